//! Building the generated platform module and acquiring catalogs (docs/design/operator.md §2.0, §3.5
//! steps 2–3, §4.1 steps 4–5 and 7; docs/design/render.md §1.4–§1.5, §2.4).
//!
//! [`PlatformKernel`] implements [`PlatformBuilder`] and [`CatalogAcquirer`] over a module registry.
//!
//! Build rules:
//! - The generated directory is a main module (its `cue.mod/module.cue` lists the full closure);
//!   dependency modules come from the registry at exactly those versions. Each build evaluates in
//!   its own `cue::Runtime` (nothing is shared between builds or with renders) on a thread with a
//!   64 MiB stack.
//! - Load failures keep the registry's class: an unreachable registry is `TransientPull`, a missing
//!   or unusable module `Resolution`; any other load or evaluation error is `Other`, as "building
//!   platform module: …" with one problem per diagnostic (its value path, e.g.
//!   `#registry."<path>".version` for the expected-version tripwire, whose message names both
//!   versions, and its source positions).
//! - Shape gate: the package must carry `kind: "Platform"` and a concrete `metadata.name`; it is
//!   checked before the package is validated, so a package of another kind is refused as such.
//! - Entries are read from `#registry`: `enable` (defaults resolved) and the catalog. In the
//!   `#CatalogEntry` shape the catalog is the entry's `#catalog`; the key must equal its
//!   `metadata.modulePath` and the stamped `version` its `metadata.version` (default resolved).
//!   The schema enforces both by unification, except when the catalog's version is itself a
//!   default (`Version: #V | *"0.1.0"`, as OPM's identity packages write it): the stamp then wins
//!   the disjunction silently, so the build compares the stamp with the default readout and
//!   refuses with a problem at `#registry."<path>".version` naming both versions. In
//!   the `#Subscription` shape each enabled entry's catalog is acquired from the registry at
//!   `"v" + version` (docs/design/render.md §1.5: version present, major equal to the key's, identity
//!   checked).
//! - From each catalog: `#transformers` (FQN → transformer; its `requiredResources`,
//!   `requiredTraits`, `requiredBlueprints` keys are contract FQNs whose embedded copies carry
//!   `fulfilment`, default `"catalog"`; `requiredLabels`), and the contract maps `#resources`,
//!   `#traits`, `#blueprints` (what the catalog defines). The inventory is computed from that
//!   plain data by [`super::contracts::inventory`]; a failure there is "reading the platform's
//!   contract inventory: …" (`Other`).
//! - `#composedTransformers` (what renders read: the core's fold in the `#CatalogEntry` shape, the
//!   generated per-entry copy in the `#Subscription` shape) must exist and list exactly the
//!   transformers of the enabled entries' catalogs; a disagreement is a build error naming both
//!   lists.
//! - [`BuiltPlatform`] carries the directory, the deps of the generated module file, the sorted
//!   FQNs of the composed (enabled) transformers and the inventory: plain data only.
//!
//! Acquire rules (docs/design/operator.md §4.1): the catalog `path@"v"+version` is fetched and built as the main module of
//! its own build; a root package whose `kind` is not `"Catalog"` is [`AcquireError::WrongKind`]
//! (checked on the value, never on message text); the declared `metadata.modulePath` and
//! `metadata.version` must equal the coordinate; `provides` = the contracts some transformer
//! requires with `fulfilment: "provider"`, `requires` = the catalog's module-file deps.

use std::collections::BTreeMap;
use std::path::Path as FsPath;
use std::sync::Arc;

use cue::module::{DirFs, FileSystem, LoadError, ModuleVersion, Registry, RegistryError, Target};
use cue::path::quote;
use cue::{Config, Diagnostic, FieldFilter, Path, Runtime, Selector, Value};

use super::closure::ModFileSource;
use super::contracts::{self, EntryFacts, TransformerFacts};
use super::generate::{Generator, RegistryShape, MODULE_FILE};
use crate::{
    AcquireError, BuiltPlatform, CatalogAcquirer, CatalogInfo, ErrorClass, KernelError,
    PlatformBuilder, PlatformInput, Problem,
};

/// A registry the platform kernel can use: full module fetches for builds, module files for the
/// closure.
pub trait PlatformRegistry: Registry + ModFileSource {}

impl<T: Registry + ModFileSource> PlatformRegistry for T {}

/// The platform half of the render kernel: generation, build, contract inventory, catalog
/// acquisition.
pub struct PlatformKernel {
    registry: Arc<dyn PlatformRegistry>,
    generator: Generator,
    config: Config,
}

impl PlatformKernel {
    /// A kernel over `registry` generating with `generator`; each build evaluates under `config`.
    pub fn new(registry: Arc<dyn PlatformRegistry>, generator: Generator, config: Config) -> Self {
        PlatformKernel {
            registry,
            generator,
            config,
        }
    }

    /// The generator (core pin and registry shape).
    pub fn generator(&self) -> &Generator {
        &self.generator
    }
}

impl PlatformBuilder for PlatformKernel {
    fn generate(&self, input: &PlatformInput) -> Result<Vec<(String, Vec<u8>)>, KernelError> {
        Ok(self.generator.generate(self.registry.as_ref(), input)?)
    }

    fn build(&self, dir: &FsPath) -> Result<BuiltPlatform, KernelError> {
        build_dir(
            self.registry.clone(),
            self.generator.shape,
            self.config.clone(),
            dir,
        )
    }
}

/// Builds the generated platform module in `dir` (the one way a platform directory becomes a
/// [`BuiltPlatform`]: the reconciler through [`PlatformKernel`], `opm-operator render
/// --platform`, tests and benches): its `#registry` read in `shape`, dependencies from
/// `registry`, evaluated under `config` on a thread with the stack that config needs.
pub fn build_dir(
    registry: Arc<dyn PlatformRegistry>,
    shape: RegistryShape,
    config: Config,
    dir: &FsPath,
) -> Result<BuiltPlatform, KernelError> {
    let dir = dir.to_path_buf();
    let eval = config.clone();
    on_eval_thread(&config, std::convert::identity, move || {
        build_platform(registry, eval, shape, &dir)
    })
}

impl CatalogAcquirer for PlatformKernel {
    fn acquire(&self, path: &str, version: &str) -> Result<CatalogInfo, AcquireError> {
        let registry = self.registry.clone();
        let config = self.config.clone();
        let (path, version) = (path.to_string(), version.to_string());
        on_eval_thread(&self.config, AcquireError::Other, move || {
            let rt = Runtime::new(config);
            let cat = load_catalog(&rt, registry.as_ref(), &path, &version)?;
            let provides = contracts::provides(&cat.transformers);
            Ok(CatalogInfo {
                provides,
                requires: cat.requires,
            })
        })
    }
}

/// Runs `f` with the stack the evaluator needs under `config` ([`crate::stack`]).
fn on_eval_thread<T: Send, E: Send>(
    config: &Config,
    wrap: fn(KernelError) -> E,
    f: impl FnOnce() -> Result<T, E> + Send,
) -> Result<T, E> {
    let stack = crate::stack::eval_stack_bytes(config);
    crate::stack::on_eval_stack(stack, "opm-platform-eval", f)
        .unwrap_or_else(|e| Err(wrap(KernelError::new(ErrorClass::Other, e.to_string()))))
}

fn build_err(message: impl std::fmt::Display) -> KernelError {
    KernelError::new(
        ErrorClass::Other,
        format!("building platform module: {message}"),
    )
}

fn inventory_err(message: impl std::fmt::Display) -> KernelError {
    KernelError::new(
        ErrorClass::Other,
        format!("reading the platform's contract inventory: {message}"),
    )
}

fn registry_class(e: &RegistryError) -> ErrorClass {
    match e {
        RegistryError::Transient { .. } => ErrorClass::TransientPull,
        RegistryError::Unverified { .. } => ErrorClass::Verification,
        _ => ErrorClass::Resolution,
    }
}

/// The platform of a generated platform directory as a render needs it, without evaluating it:
/// the directory and its module file's deps (`path@vN` → version). The one reader of a generated
/// directory for the CLI, the benches and the tests; the Platform reconciler's builds
/// ([`PlatformKernel`]) add the transformer index and the contract inventory.
pub fn from_dir(dir: &FsPath) -> Result<BuiltPlatform, String> {
    let mf = dir.join("cue.mod").join("module.cue");
    let bytes = std::fs::read(&mf).map_err(|e| format!("{}: {e}", mf.display()))?;
    Ok(BuiltPlatform {
        dir: dir.to_path_buf(),
        deps: read_deps(&bytes).map_err(|e| format!("{}: {e}", mf.display()))?,
        ..BuiltPlatform::default()
    })
}

/// The deps of a generated module file (`path@vN` → version).
fn read_deps(bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let mf = cue::module::ModuleFile::parse(bytes)?;
    Ok(mf.deps.into_iter().map(|(p, d)| (p, d.version)).collect())
}

/// Loads the root package of the main module in `fs` and builds it in `rt` (not yet validated:
/// the shape gate reads `kind` first, so a package of the wrong kind is refused as such even
/// when it has errors of its own). `what` prefixes messages.
fn load_root(
    rt: &Runtime,
    fs: &dyn FileSystem,
    registry: &dyn Registry,
    what: &str,
) -> Result<Value, KernelError> {
    let loaded = cue::module::load(fs, &Target::Dir(String::new()), Some(registry));
    // The registry's class wins: an unreachable registry is transient, a missing module a
    // resolution failure.
    let mut class = None;
    for e in &loaded.errors {
        if let LoadError::Registry { source, .. } = e {
            let c = registry_class(source);
            if c == ErrorClass::TransientPull || class.is_none() {
                class = Some(c);
            }
        }
    }
    let v = rt.build_loaded(loaded).map_err(|d| {
        let mut e = diag_error(rt, what, &d);
        if let Some(c) = class {
            e.class = c;
        }
        e
    })?;
    Ok(v)
}

/// Validates a built value (non-concretely: definitions and constraints, as a build does).
fn validate(rt: &Runtime, v: &Value, what: &str) -> Result<(), KernelError> {
    v.validate(false).map_err(|d| diag_error(rt, what, &d))
}

fn diag_error(rt: &Runtime, what: &str, diags: &[Diagnostic]) -> KernelError {
    let reports = rt.reports(diags);
    let summary: Vec<String> = reports
        .iter()
        .map(|r| {
            if r.path.is_empty() {
                r.message.clone()
            } else {
                format!("{}: {}", r.path, r.message)
            }
        })
        .collect();
    let problems = reports.into_iter().map(Problem::from).collect();
    KernelError {
        class: ErrorClass::Other,
        message: format!("{what}: {}", summary.join("; ")),
        problems,
    }
}

/// `v.sel` for one selector.
fn child(v: &Value, sel: Selector) -> Option<Value> {
    v.lookup_path(&Path::new(vec![sel]))
}

fn def(name: &str) -> Selector {
    Selector::Definition(format!("#{}", name.trim_start_matches('#')))
}

fn field(name: &str) -> Selector {
    Selector::Field(name.to_string())
}

/// A concrete string at `sel` (defaults resolved), if any.
fn string_at(v: &Value, sel: Selector) -> Option<String> {
    match child(v, sel)?.default().to_json_value() {
        Ok(serde_json::Value::String(s)) => Some(s),
        _ => None,
    }
}

fn build_platform(
    registry: Arc<dyn PlatformRegistry>,
    config: Config,
    shape: RegistryShape,
    dir: &FsPath,
) -> Result<BuiltPlatform, KernelError> {
    let mf_path = dir.join(MODULE_FILE);
    let mf =
        std::fs::read(&mf_path).map_err(|e| build_err(format!("{}: {e}", mf_path.display())))?;
    let deps = read_deps(&mf).map_err(|e| build_err(format!("{}: {e}", mf_path.display())))?;
    let rt = Runtime::new(config);
    let fs = DirFs::new(dir);
    let v = load_root(&rt, &fs, registry.as_ref(), "building platform module")?;

    // Shape gate.
    let kind = string_at(&v, field("kind"));
    if kind.as_deref() != Some("Platform") {
        return Err(build_err(match kind {
            Some(k) => format!("the package is not a #Platform: kind is {k:?}"),
            None => "the package is not a #Platform: it has no concrete kind".to_string(),
        }));
    }
    let name = child(&v, field("metadata")).and_then(|m| string_at(&m, field("name")));
    if name.is_none() {
        return Err(build_err(
            "the package is not a #Platform: metadata.name is not a concrete string",
        ));
    }

    validate(&rt, &v, "building platform module")?;

    let reg =
        child(&v, def("registry")).ok_or_else(|| build_err("the platform has no #registry"))?;
    let mut entries = Vec::new();
    for f in reg.fields_where(FieldFilter::data()) {
        let Selector::Field(key) = &f.selector else {
            continue;
        };
        let at = format!("#registry.{}", quote(key));
        let enable = match child(&f.value, field("enable")).map(|e| e.default().to_json_value()) {
            Some(Ok(serde_json::Value::Bool(b))) => b,
            None => true,
            _ => return Err(build_err(format!("{at}.enable is not a concrete bool"))),
        };
        let version = string_at(&f.value, field("version"));
        let catalog = match shape {
            RegistryShape::CatalogEntry => {
                let cat = child(&f.value, def("catalog"))
                    .ok_or_else(|| build_err(format!("{at} has no #catalog")))?;
                let meta = child(&cat, field("metadata"));
                let declared = meta.as_ref().and_then(|m| string_at(m, field("version")));
                let module_path = meta
                    .as_ref()
                    .and_then(|m| string_at(m, field("modulePath")));
                if module_path.as_deref() != Some(key.as_str()) {
                    return Err(build_err(format!(
                        "{at}.#catalog.metadata.modulePath: the entry key {} is bound to a catalog declaring {}",
                        quote(key),
                        module_path.as_deref().map_or("no module path".to_string(), quote)
                    )));
                }
                if version.is_none() || version != declared {
                    // The schema's unification cannot catch a catalog whose version is a
                    // default (`Version: #V | *"0.2.0"`): the stamp wins the disjunction. The
                    // default readout here can.
                    let show = |v: &Option<String>| v.as_deref().map_or("none".to_string(), quote);
                    let message = format!(
                        "conflicting values {} (the version the operator stamped) and {} (the imported catalog's metadata.version): the closure selected different bytes than the entry pins",
                        show(&version),
                        show(&declared)
                    );
                    let mut e = build_err(format!("{at}.version: {message}"));
                    e.problems.push(Problem {
                        path: format!("{at}.version"),
                        message,
                        positions: Vec::new(),
                    });
                    return Err(e);
                }
                if !enable {
                    entries.push(EntryFacts {
                        path: key.clone(),
                        enable,
                        ..EntryFacts::default()
                    });
                    continue;
                }
                let (defined, transformers) =
                    catalog_facts(&cat, &format!("{at}.#catalog")).map_err(inventory_err)?;
                (defined, transformers)
            }
            RegistryShape::Subscription => {
                if !enable {
                    entries.push(EntryFacts {
                        path: key.clone(),
                        enable,
                        ..EntryFacts::default()
                    });
                    continue;
                }
                let version = version
                    .ok_or_else(|| build_err(format!("{at}.version is not a concrete string")))?;
                let cat =
                    load_catalog(&rt, registry.as_ref(), key, &version).map_err(|e| match e {
                        AcquireError::WrongKind(m) => build_err(format!("{at}: {m}")),
                        AcquireError::Other(mut k) => {
                            k.message = format!("building platform module: {at}: {}", k.message);
                            k
                        }
                    })?;
                (cat.defined, cat.transformers)
            }
        };
        entries.push(EntryFacts {
            path: key.clone(),
            enable,
            defined: catalog.0,
            transformers: catalog.1,
        });
    }
    let inventory = contracts::inventory(&entries);
    let transformers: Vec<String> = contracts::composed(&entries)
        .keys()
        .map(|k| k.to_string())
        .collect();
    // The fold must agree with the entries read here (renders read the fold).
    let fold = child(&v, def("composedTransformers"))
        .ok_or_else(|| build_err("the platform has no #composedTransformers"))?;
    let mut folded: Vec<String> = fold
        .fields_where(FieldFilter::data())
        .into_iter()
        .filter_map(|f| match f.selector {
            Selector::Field(k) => Some(k),
            _ => None,
        })
        .collect();
    folded.sort();
    if folded != transformers {
        return Err(build_err(format!(
            "#composedTransformers lists [{}] but the enabled entries' catalogs carry [{}]",
            folded.join(", "),
            transformers.join(", ")
        )));
    }
    Ok(BuiltPlatform {
        dir: dir.to_path_buf(),
        deps,
        transformers,
        contracts: inventory,
    })
}

type Facts = (BTreeMap<String, bool>, Vec<TransformerFacts>);

/// `fulfilment` of an embedded contract copy, default resolved (`"catalog"` when absent).
fn is_provider(contract: &Value, at: &str) -> Result<bool, String> {
    match child(contract, field("fulfilment")).map(|f| f.default().to_json_value()) {
        None => Ok(false),
        Some(Ok(serde_json::Value::String(s))) => match s.as_str() {
            "provider" => Ok(true),
            "catalog" => Ok(false),
            other => Err(format!("{at}.fulfilment: unknown value {other:?}")),
        },
        Some(_) => Err(format!("{at}.fulfilment is not a concrete string")),
    }
}

/// Keys → provider flag of a contract map (`#resources`, `requiredTraits`, …); absent = empty.
fn contract_map(v: &Value, sel: Selector, at: &str) -> Result<BTreeMap<String, bool>, String> {
    let mut out = BTreeMap::new();
    let at = format!("{at}.{sel}");
    let Some(m) = child(v, sel) else {
        return Ok(out);
    };
    for f in m.fields_where(FieldFilter::data()) {
        if let Selector::Field(k) = &f.selector {
            let p = is_provider(&f.value, &format!("{at}.{}", quote(k)))?;
            out.insert(k.clone(), p);
        }
    }
    Ok(out)
}

/// What a catalog value defines and its transformers.
fn catalog_facts(cat: &Value, at: &str) -> Result<Facts, String> {
    let mut defined = BTreeMap::new();
    for m in ["resources", "traits", "blueprints"] {
        defined.extend(contract_map(cat, def(m), at)?);
    }
    let mut transformers = Vec::new();
    if let Some(tfs) = child(cat, def("transformers")) {
        for f in tfs.fields_where(FieldFilter::data()) {
            let Selector::Field(fqn) = &f.selector else {
                continue;
            };
            let tat = format!("{at}.#transformers.{}", quote(fqn));
            let mut required = BTreeMap::new();
            for m in ["requiredResources", "requiredTraits", "requiredBlueprints"] {
                required.extend(contract_map(&f.value, field(m), &tat)?);
            }
            let mut required_labels = BTreeMap::new();
            if let Some(l) = child(&f.value, field("requiredLabels")) {
                match l.default().to_json_value() {
                    Ok(serde_json::Value::Object(m)) => {
                        for (k, v) in m {
                            let v = match v {
                                serde_json::Value::String(s) => s,
                                other => other.to_string(),
                            };
                            required_labels.insert(k, v);
                        }
                    }
                    _ => return Err(format!("{tat}.requiredLabels is not concrete data")),
                }
            }
            transformers.push(TransformerFacts {
                fqn: fqn.clone(),
                required,
                required_labels,
            });
        }
    }
    Ok((defined, transformers))
}

/// A catalog loaded by coordinate.
struct LoadedCatalog {
    defined: BTreeMap<String, bool>,
    transformers: Vec<TransformerFacts>,
    requires: BTreeMap<String, String>,
}

/// Fetches `path` at bare `version`, builds its root package in `rt`, checks kind and identity
/// and reads its facts.
fn load_catalog(
    rt: &Runtime,
    registry: &dyn PlatformRegistry,
    path: &str,
    version: &str,
) -> Result<LoadedCatalog, AcquireError> {
    let coord = format!(
        "{}@v{version}",
        path.rsplit_once('@').map_or(path, |(b, _)| b)
    );
    let other = |class, msg: String| AcquireError::Other(KernelError::new(class, msg));
    if version.is_empty() || version.starts_with('v') {
        return Err(other(
            ErrorClass::Resolution,
            format!("catalog {path}: version {version:?} must be bare SemVer"),
        ));
    }
    let m = ModuleVersion {
        path: path.to_string(),
        version: format!("v{version}"),
    };
    let fs = registry.fetch(&m).map_err(|e| {
        other(
            registry_class(&e),
            format!("acquiring catalog {coord}: {e}"),
        )
    })?;
    let requires: BTreeMap<String, String> = match fs.read_file(MODULE_FILE) {
        Ok(b) => read_deps(&b),
        Err(e) => Err(e.to_string()),
    }
    .map_err(|e| {
        other(
            ErrorClass::Resolution,
            format!("acquiring catalog {coord}: {MODULE_FILE}: {e}"),
        )
    })?;
    let v = load_root(
        rt,
        fs.as_ref(),
        registry,
        &format!("acquiring catalog {coord}"),
    )
    .map_err(AcquireError::Other)?;
    let kind = string_at(&v, field("kind"));
    if kind.as_deref() != Some("Catalog") {
        // A kind that is an error (`#Catalog & {kind: "Module"}`: conflicting values) is named as
        // such: "no concrete kind" would hide the conflict from the claim's author.
        let conflict = child(&v, field("kind"))
            .and_then(|k| k.validate(false).err())
            .and_then(|d| d.into_iter().next());
        return Err(AcquireError::WrongKind(match (kind, conflict) {
            (Some(k), _) => format!("{coord} has kind {}, not \"Catalog\"", quote(&k)),
            (None, Some(d)) => format!(
                "{coord} declares a kind that is an error ({}), so it is not a catalog",
                d.message
            ),
            (None, None) => format!("{coord} declares no concrete kind, so it is not a catalog"),
        }));
    }
    validate(rt, &v, &format!("acquiring catalog {coord}")).map_err(AcquireError::Other)?;
    let meta = child(&v, field("metadata"));
    let declared_path = meta
        .as_ref()
        .and_then(|m| string_at(m, field("modulePath")));
    let declared_version = meta.as_ref().and_then(|m| string_at(m, field("version")));
    if declared_path.as_deref() != Some(path) || declared_version.as_deref() != Some(version) {
        return Err(other(
            ErrorClass::Resolution,
            format!(
                "acquiring catalog {coord}: identity mismatch: the catalog declares modulePath {} and version {}",
                declared_path.as_deref().map_or("none".to_string(), quote),
                declared_version.as_deref().map_or("none".to_string(), quote)
            ),
        ));
    }
    let at = format!("catalog {coord}");
    let (defined, transformers) = catalog_facts(&v, &at)
        .map_err(|e| other(ErrorClass::Other, format!("reading {at}: {e}")))?;
    Ok(LoadedCatalog {
        defined,
        transformers,
        requires,
    })
}
