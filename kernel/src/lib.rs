//! opm-kernel: the OPM render kernel, synchronous and free of the async operator.
//!
//! Architecture invariants:
//! - No tokio, kube, hyper or axum (`cargo tree -p opm-kernel` is checked by `scripts/test.sh`): the
//!   kernel is called from the reconcilers, the REST render API and the CLI, and runs on whatever
//!   thread its caller gives it. Module access is only through `cue::module::Registry` (and
//!   [`platform::closure::ModFileSource`] for module files), implemented by `opm-registry`.
//! - Dependencies point down: [`render`] and [`platform`] implement the seam below; the seam
//!   imports neither (it owns [`SkewPolicy`]); [`inventory`] is leaf data over `crds`' status types.
//!
//! Modules: this file is the seam (the types and traits callers use), [`render`] the render pipeline
//! (stage, match, execute), [`platform`] platform generation, build, store and on-disk layout,
//! [`inventory`] the inventory model, stale set and digests, [`stack`] the one big-stack policy of
//! every evaluating call, [`limits`] the evaluation limits (the memory budget) of every render path.
//!
//! # The seam between the render kernel and its callers (docs/design/operator.md §2.0)
//!
//! The reconcilers (`controller/`), the REST render API (`server/`) and `opm-operator render` call
//! the kernel only through the types and traits in this module; the kernel (`render/`) implements
//! them. Tests of the callers fake the traits; tests of the kernel call it directly. This file is
//! the agreed contract: change it only together with both sides.
//!
//! Rules:
//! - Every error a caller must act on is classified by [`ErrorClass`], set where the error is
//!   raised. Callers never read message text to classify.
//! - Renders share nothing: each call evaluates in its own CUE `Runtime`. The platform a render
//!   uses reaches it as a [`BuiltPlatform`] (plain data: directory, transformer index, contract
//!   inventory, resolved deps) through a store lease, never as a live value of another render.
//! - Output is data: objects as `serde_json::Value` in CUE field order, with provenance.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub mod inventory;
pub mod limits;
pub mod platform;
pub mod render;
pub mod stack;

/// The runtime name stamped as `app.kubernetes.io/managed-by` by the operator.
pub const RUNTIME_NAME: &str = crds::labels::MANAGED_BY_OPERATOR;

/// The reserved module path of the generated platform module (docs/design/operator.md §1.5).
pub const PLATFORM_MODULE_PATH: &str = "opmodel.dev/platforms/cluster@v0";

/// How a render treats a module built against a different core schema version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SkewPolicy {
    /// Render and warn (the default).
    #[default]
    Warn,
    /// Refuse to render.
    Refuse,
}

impl SkewPolicy {
    /// Resolves `spec.skewPolicy`: `"Refuse"` is `Refuse`, anything else (Warn, unset) is `Warn`.
    pub fn from_spec(value: Option<&str>) -> Self {
        match value {
            Some("Refuse") => Self::Refuse,
            _ => Self::Warn,
        }
    }
}

/// How a caller reacts to a kernel error (docs/design/render.md §1.9, docs/design/operator.md §2.2 phase 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// No platform is recorded in the store (requeue with backoff; HTTP 503).
    PlatformNotReady,
    /// A registry or network failure that may pass (backoff; HTTP 502).
    TransientPull,
    /// The module needs newer catalogs than the platform pins and the policy is Refuse.
    SkewRefused,
    /// Identity mismatch, unresolved demands, module/catalog not found, acquisition failure
    /// (stalled; HTTP 404 for not found, 422 otherwise).
    Resolution,
    /// Bad values: `values.<path>` errors against the module's `#config` (stalled; HTTP 422).
    Values,
    /// The package loaded is not a `#ModuleInstance` (ModulePackage only).
    UnsupportedKind,
    /// An evaluation limit or deadline was exceeded (HTTP 504 for time, 413 for size).
    Timeout,
    /// The render ran out of its memory budget (`cue::Config::max_memory_bytes`, the operator's
    /// `--render-memory-limit`): the message names the budget, the figure reached and the value
    /// being evaluated (stalled `MemoryBudgetExceeded`, retried with backoff; HTTP 413).
    ResourceExhausted,
    /// A signature policy (`spec.verify`) is in force and a module or catalog is not signed as
    /// it requires (stalled `VerificationFailed`; nothing was evaluated).
    Verification,
    /// Anything else (stalled `RenderFailed`; HTTP 422/500).
    Other,
}

/// A position in a CUE source file (`file:line:col`, 1-based).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourcePos {
    /// File name as the build saw it (module-relative where possible).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

/// One structured problem a kernel error carries (a CUE diagnostic, rewritten for the user).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Problem {
    /// The value path the problem is about, e.g. `values.image.tag` or `components.web.spec`.
    pub path: String,
    /// The message (stable text, no timings).
    pub message: String,
    /// Where in the sources (first = primary).
    pub positions: Vec<SourcePos>,
}

impl From<cue::DiagnosticReport> for Problem {
    /// A CUE diagnostic as a problem: its path and message, the primary position first, then the
    /// related ones (both sides of a conflict).
    fn from(r: cue::DiagnosticReport) -> Self {
        Problem {
            path: r.path,
            message: r.message,
            positions: r
                .primary
                .into_iter()
                .chain(r.related)
                .map(|p| SourcePos {
                    file: p.file,
                    line: u32::try_from(p.line).unwrap_or(u32::MAX),
                    column: u32::try_from(p.column).unwrap_or(u32::MAX),
                })
                .collect(),
        }
    }
}

/// A kernel error: a class, a message naming the coordinate / component / transformer /
/// `values.<path>` it is about, and the structured problems behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelError {
    /// How callers react.
    pub class: ErrorClass,
    /// Human-readable, stable message.
    pub message: String,
    /// Structured detail (may be empty).
    pub problems: Vec<Problem>,
}

impl KernelError {
    /// An error of `class` with `message` and no structured problems.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        KernelError {
            class,
            message: message.into(),
            problems: Vec::new(),
        }
    }
}

/// How many positions of a problem the one-line message shows.
pub const DISPLAYED_POSITIONS: usize = 3;

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for p in &self.problems {
            write!(f, "\n  {}: {}", p.path, p.message)?;
            // The first positions (the value's own first, then what refuses or constrains it,
            // e.g. the closed `#config` literal of the module), so a status message names the
            // module file too.
            let shown: Vec<String> = p
                .positions
                .iter()
                .take(DISPLAYED_POSITIONS)
                .map(|pos| format!("{}:{}:{}", pos.file, pos.line, pos.column))
                .collect();
            if !shown.is_empty() {
                let more = if p.positions.len() > DISPLAYED_POSITIONS {
                    ", …"
                } else {
                    ""
                };
                write!(f, " ({}{more})", shown.join(", "))?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for KernelError {}

/// One rendered Kubernetes object with its provenance (docs/design/render.md §1.8).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RenderedObject {
    /// The object, in CUE field order (concrete regular fields only).
    pub object: serde_json::Value,
    /// The component that produced it (`component.opmodel.dev/name`).
    pub component: String,
    /// The transformer FQN that produced it.
    pub transformer: String,
}

/// The result of one render (docs/design/operator.md §2.0 RenderResult).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RenderResult {
    /// The instance name and namespace the render was for.
    pub instance: InstanceRef,
    /// Objects in execution order: pairs sorted by (component, transformer FQN), list outputs in
    /// element order.
    pub objects: Vec<RenderedObject>,
    /// Inventory entries of the objects (same order).
    pub inventory: Vec<crds::common::InventoryEntry>,
    /// Render warnings (optional traits unhandled, skew under Warn, ...), stable text.
    pub warnings: Vec<String>,
    /// Contract FQNs the components demand, sorted and de-duplicated.
    pub required_contracts: Vec<String>,
    /// `sha256:<hex>` render digest (docs/design/operator.md §6.1).
    pub digest: String,
}

impl RenderResult {
    /// A result over `objects` with its inventory entries and render digest computed here, once
    /// (the reconcilers, the render API and the CLI read them from the result, never again from
    /// the objects).
    pub fn new(
        instance: InstanceRef,
        objects: Vec<RenderedObject>,
        warnings: Vec<String>,
        required_contracts: Vec<String>,
    ) -> Result<RenderResult, inventory::Error> {
        let inventory = inventory::entries_of(objects.iter().map(|o| &o.object))?;
        let digest = inventory::render_digest(objects.iter().map(|o| &o.object));
        Ok(RenderResult {
            instance,
            objects,
            inventory,
            warnings,
            required_contracts,
            digest,
        })
    }
}

/// Instance identity as decoded from the synthesized instance.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct InstanceRef {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.fqn`.
    pub fqn: String,
    /// `metadata.uuid`.
    pub uuid: String,
}

/// What a ModuleInstance render needs (the CR's spec and identity).
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleRequest {
    /// Instance name.
    pub name: String,
    /// Instance namespace.
    pub namespace: String,
    /// Module path, major-suffixed (`fixtures.test/modules/demo@v0`).
    pub path: String,
    /// Module version, `v`-prefixed (`v0.1.0`).
    pub version: String,
    /// Values as data; `None` means the module's `#config` defaults.
    pub values: Option<serde_json::Value>,
}

/// A platform recorded in the store (the store's `P`): plain data only, shared read-only by
/// every render that leases it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BuiltPlatform {
    /// The generated module directory the platform was built from.
    pub dir: PathBuf,
    /// The platform's tidied dependency list (module path@major → `v`-prefixed version), from its
    /// `cue.mod/module.cue`: the render module's authority on shared paths, and the skew baseline.
    pub deps: BTreeMap<String, String>,
    /// Transformer FQNs of the composed platform, sorted.
    pub transformers: Vec<String>,
    /// The contract inventory (docs/design/operator.md §2.0).
    pub contracts: ContractInventory,
}

/// The platform's contract inventory (docs/design/operator.md §2.0, §3.5–§3.6; docs/design/decisions.md §9).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContractInventory {
    /// Contract FQN → the enabled catalog (module path) defining it (the first in path order
    /// when several do: see `collisions`).
    pub defined_by: BTreeMap<String, String>,
    /// Contract FQN → every enabled entry (catalog module path) defining it, sorted, for the
    /// contracts more than one enabled entry defines (post-seed `ContractCollisions`, docs/design/operator.md
    /// §3.5 step 4). Empty when every contract has one definition.
    pub collisions: BTreeMap<String, Vec<String>>,
    /// Contract FQN → transformer FQNs requiring it, sorted.
    pub required_by: BTreeMap<String, Vec<String>>,
    /// Contract FQN → registry entries (catalog module paths) providing it, sorted; one per entry
    /// (two majors of one catalog count twice).
    pub provided_by: BTreeMap<String, Vec<String>>,
    /// Contracts with more than one provider, sorted.
    pub over_subscribed: Vec<String>,
    /// Provider-fulfilled contracts defined by an enabled catalog with no provider, sorted.
    pub unfulfilled: Vec<String>,
    /// Transformer pairs where every component the narrower matches is also matched by the
    /// broader, sorted by (broader, narrower).
    pub comparable: Vec<ComparablePair>,
    /// No contract is over-subscribed.
    pub routable: bool,
    /// No comparable transformer pair.
    pub discriminated: bool,
    /// Every provider-fulfilled contract has a provider.
    pub fulfilled: bool,
}

/// Two transformers whose predicates are comparable (docs/design/operator.md §3.5 `ComparablePredicates`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ComparablePair {
    /// The broader transformer FQN.
    pub broader: String,
    /// The narrower transformer FQN.
    pub narrower: String,
    /// The contracts both match over, sorted.
    pub contracts: Vec<String>,
}

/// One entry of the generated platform module (docs/design/operator.md §3.2).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlatformEntry {
    /// Catalog module path with major (`fixtures.test/catalogs/mini@v0`).
    pub path: String,
    /// Bare SemVer (`0.1.0`), as in the Platform CR.
    pub version: String,
    /// Whether the entry is enabled (disabled entries are still pinned and imported).
    pub enable: bool,
}

/// The input of platform generation: a pure function of (spec, active claims).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformInput {
    /// `spec.type`.
    pub platform_type: String,
    /// Entries sorted by path (subscriptions first win over claims for the same catalog).
    pub entries: Vec<PlatformEntry>,
}

/// What the Platform reconciler needs from the kernel (docs/design/operator.md §3.3–§3.5).
pub trait PlatformBuilder: Send + Sync {
    /// Computes the closure and returns the generated files (`cue.mod/module.cue`,
    /// `platform.cue`), byte-identical for the same input and registry content.
    /// Errors: `TransientPull` (registry unreachable), `Resolution` (a pin is not published),
    /// `Other` (generation failed).
    fn generate(&self, input: &PlatformInput) -> Result<Vec<(String, Vec<u8>)>, KernelError>;

    /// Builds the generated module in `dir` (shape-gated) and reads its contract inventory.
    fn build(&self, dir: &Path) -> Result<BuiltPlatform, KernelError>;
}

/// Renders ModuleInstances on a leased platform.
pub trait ModuleRenderer: Send + Sync {
    /// Renders `req` on `platform` with `skew` policy. Runs synchronously (call it from
    /// `spawn_blocking`).
    fn render_module(
        &self,
        req: &ModuleRequest,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError>;
}

/// Renders an authored instance package (ModulePackage) from a directory on disk.
pub trait PackageRenderer: Send + Sync {
    /// Loads the instance package in `dir` (gated on `#ModuleInstance`, else `UnsupportedKind`)
    /// and renders it on `platform`.
    fn render_package(
        &self,
        dir: &Path,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError>;
}

/// What the TransformerRegistration reconciler learns about a claimed catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogInfo {
    /// Contracts some transformer of the catalog requires with `fulfilment: "provider"`, sorted.
    pub provides: Vec<String>,
    /// The catalog's `cue.mod/module.cue` requirements: path@major → `v`-prefixed version.
    pub requires: BTreeMap<String, String>,
}

/// Why a catalog could not be acquired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireError {
    /// The artifact is not a catalog (checked by type: docs/design/operator.md §4.1 step 4).
    WrongKind(String),
    /// Any other failure (not found, registry down, bad artifact, evaluation error).
    Other(KernelError),
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::WrongKind(m) => f.write_str(m),
            AcquireError::Other(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AcquireError {}

/// Acquires a catalog by coordinate (docs/design/operator.md §2.0 `CatalogAcquirer`).
pub trait CatalogAcquirer: Send + Sync {
    /// Pulls `path` (major-suffixed) at bare SemVer `version` and reads what it provides and
    /// requires.
    fn acquire(&self, path: &str, version: &str) -> Result<CatalogInfo, AcquireError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(file: &str, line: u32) -> SourcePos {
        SourcePos {
            file: file.into(),
            line,
            column: 1,
        }
    }

    #[test]
    fn the_message_names_the_first_positions_of_each_problem() {
        let mut e = KernelError::new(ErrorClass::Values, "invalid values");
        e.problems.push(Problem {
            path: "values.colour".into(),
            message: "field not allowed".into(),
            positions: vec![pos("values.cue", 14), pos("module.cue", 28)],
        });
        e.problems.push(Problem {
            path: "values.x".into(),
            message: "conflicting values".into(),
            positions: (1..=4).map(|l| pos("a.cue", l)).collect(),
        });
        e.problems.push(Problem {
            path: "values.y".into(),
            message: "incomplete".into(),
            positions: Vec::new(),
        });
        assert_eq!(
            e.to_string(),
            "invalid values\n  values.colour: field not allowed (values.cue:14:1, module.cue:28:1)\n  \
             values.x: conflicting values (a.cue:1:1, a.cue:2:1, a.cue:3:1, …)\n  values.y: incomplete"
        );
    }
}
