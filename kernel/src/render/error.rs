//! Render errors (docs/design/render.md §1.9; docs/design/operator.md §2.0 `KernelError`).
//!
//! Rules:
//! - Every failure of the kernel is one [`Error`] variant, raised where it arises; its
//!   [`ErrorClass`] is a function of the variant (and, for pulls, of the registry error's own
//!   variant), never of message text.
//! - Every message names what it is about: the module coordinate, the component, the transformer
//!   FQN or the `values.<path>`; CUE diagnostics travel as [`Problem`]s with their file:line:col.
//! - An evaluation limit (steps, depth, wall time, output size) anywhere is [`Error::Limit`]
//!   (class `Timeout`), whatever else failed with it; a spent memory budget is [`Error::Memory`]
//!   (class `ResourceExhausted`), read from the runtime's typed record of it
//!   (`cue::Runtime::memory_exceeded`), never from a message.

use std::fmt;

use cue::module::RegistryError;

use crate::{ErrorClass, KernelError, Problem};

/// Which identity field disagrees (docs/design/render.md §1.2 step 4, docs/design/decisions.md §24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityField {
    /// `metadata.modulePath` versus the requested path.
    Path,
    /// `metadata.version` versus the pulled tag without its `v`.
    Version,
}

impl fmt::Display for IdentityField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdentityField::Path => "metadata.modulePath",
            IdentityField::Version => "metadata.version",
        })
    }
}

/// Why a demand of a component is unresolved (docs/design/render.md §1.6, docs/design/decisions.md §26).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemandReason {
    /// No transformer of the platform lists the contract; `alternatives` are the same contract at
    /// other API versions that some transformer lists, on the Kubernetes version ladder.
    MissingFqn {
        /// Known FQNs of the same contract at other API versions.
        alternatives: Vec<String>,
    },
    /// Every transformer listing the resource was disqualified by the unify rung.
    Disqualified {
        /// `(transformer FQN, cause)` for each disqualified candidate.
        causes: Vec<(String, String)>,
    },
    /// A trait no matched transformer handles, whose posture is `optional: false`.
    TraitRequired,
    /// A trait no matched transformer handles, whose posture is unstated.
    TraitUnstated,
}

/// One unresolved demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    /// The component.
    pub component: String,
    /// `"resource"` or `"trait"`.
    pub kind: &'static str,
    /// The contract FQN.
    pub fqn: String,
    /// Why.
    pub reason: DemandReason,
}

impl fmt::Display for Demand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "component {:?}: {} {}: ",
            self.component, self.kind, self.fqn
        )?;
        match &self.reason {
            DemandReason::MissingFqn { alternatives } if alternatives.is_empty() => {
                f.write_str("no transformer of the platform handles it")
            }
            DemandReason::MissingFqn { alternatives } => write!(
                f,
                "no transformer of the platform handles it (available: {})",
                alternatives.join(", ")
            ),
            DemandReason::Disqualified { causes } => {
                f.write_str("every candidate transformer was disqualified")?;
                for (t, c) in causes {
                    write!(f, "; {t}: {c}")?;
                }
                Ok(())
            }
            DemandReason::TraitRequired => {
                f.write_str("no matched transformer handles it and it is not optional")
            }
            DemandReason::TraitUnstated => f.write_str(
                "no matched transformer handles it and its posture is unstated (optional unset)",
            ),
        }
    }
}

/// One failed (component, transformer) pair of the execute phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairFailure {
    /// The component.
    pub component: String,
    /// The transformer FQN.
    pub transformer: String,
    /// What went wrong.
    pub message: String,
    /// The CUE diagnostics behind it.
    pub problems: Vec<Problem>,
}

/// A render failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No platform is recorded (the caller requeues).
    #[error("no platform is ready")]
    PlatformNotReady,
    /// The module could not be pulled.
    #[error("pulling {coordinate}: {error}")]
    Pull {
        /// `path@version`.
        coordinate: String,
        /// The registry's typed error (plain data, part of this error's text).
        error: RegistryError,
    },
    /// The request is malformed (bad path/version, bad instance name).
    #[error("{coordinate}: {message}")]
    Request {
        /// `path@version`.
        coordinate: String,
        /// What is wrong.
        message: String,
    },
    /// The platform directory cannot be read or its module file is invalid.
    #[error("platform {dir}: {message}")]
    Platform {
        /// The platform directory.
        dir: String,
        /// What is wrong.
        message: String,
        /// CUE diagnostics, if any.
        problems: Vec<Problem>,
    },
    /// The module's files do not load or build (syntax, imports, module file).
    #[error("{coordinate}: the module does not load")]
    Load {
        /// `path@version`.
        coordinate: String,
        /// The diagnostics.
        problems: Vec<Problem>,
    },
    /// The module's root package is not a module (docs/design/render.md §1.2 step 3).
    #[error("{coordinate}: not an OPM module: {message}")]
    Shape {
        /// `path@version`.
        coordinate: String,
        /// Which field and why.
        message: String,
    },
    /// The module declares another identity than the coordinate it was pulled by.
    #[error("{coordinate}: identity mismatch: {field} is {declared:?}, fetched as {fetched:?}")]
    Identity {
        /// `path@version`.
        coordinate: String,
        /// The field.
        field: IdentityField,
        /// What the module declares.
        declared: String,
        /// What was requested.
        fetched: String,
    },
    /// The values do not satisfy the module's `#config`.
    #[error("{coordinate}: invalid values")]
    Values {
        /// `path@version`.
        coordinate: String,
        /// `values.<path>` problems with the schema positions.
        problems: Vec<Problem>,
    },
    /// The instance does not evaluate concretely for another reason than its values.
    #[error("{coordinate}: the instance is not valid")]
    Instance {
        /// `path@version`.
        coordinate: String,
        /// The problems.
        problems: Vec<Problem>,
    },
    /// The module needs newer catalogs or core than the platform pins (policy Refuse).
    #[error("{coordinate}: requires {dep} {module_version}, newer than the platform's {platform_version} (skew policy Refuse)")]
    Skew {
        /// `path@version` of the module.
        coordinate: String,
        /// The dependency path.
        dep: String,
        /// The module's requirement.
        module_version: String,
        /// The platform's pin.
        platform_version: String,
    },
    /// Unresolved demands and unmatched components (docs/design/render.md §1.6).
    #[error("{}", resolution_message(.instance, .demands, .unmatched))]
    Resolution {
        /// The instance (`name/namespace`).
        instance: String,
        /// Unresolved demands.
        demands: Vec<Demand>,
        /// Components no transformer matches.
        unmatched: Vec<String>,
    },
    /// Executing one or more pairs failed.
    #[error("{}", execute_message(.instance, .failures))]
    Execute {
        /// The instance (`name/namespace`).
        instance: String,
        /// The failed pairs.
        failures: Vec<PairFailure>,
    },
    /// An evaluation limit was exceeded.
    #[error("{coordinate}: evaluation limit exceeded")]
    Limit {
        /// `path@version`.
        coordinate: String,
        /// The diagnostics.
        problems: Vec<Problem>,
    },
    /// The render ran out of its memory budget.
    #[error("{coordinate}: render memory budget exceeded: {exceeded}")]
    Memory {
        /// `path@version`.
        coordinate: String,
        /// The budget, the figure reached and the value being evaluated.
        exceeded: cue::MemoryExceeded,
        /// The diagnostics.
        problems: Vec<Problem>,
    },
    /// The rendered objects lack inventory fields.
    #[error("{coordinate}: {message}")]
    Output {
        /// `path@version`.
        coordinate: String,
        /// What is wrong.
        message: String,
    },
    /// The instance package's root is not a `#ModuleInstance` (ModulePackage renders).
    #[error("{package}: not an OPM module instance package: {message}")]
    UnsupportedKind {
        /// The package's module path (a package is never named by its directory: see `stage`).
        package: String,
        /// What was found.
        message: String,
    },
    /// The render thread could not be started or died.
    #[error("render thread: {0}")]
    Thread(String),
}

fn resolution_message(instance: &str, demands: &[Demand], unmatched: &[String]) -> String {
    let mut parts: Vec<String> = demands.iter().map(ToString::to_string).collect();
    for c in unmatched {
        parts.push(format!("component {c:?}: no transformer matches it"));
    }
    format!("instance {instance}: unresolved: {}", parts.join("; "))
}

fn execute_message(instance: &str, failures: &[PairFailure]) -> String {
    let parts: Vec<String> = failures
        .iter()
        .map(|p| {
            format!(
                "component {:?}, transformer {}: {}",
                p.component, p.transformer, p.message
            )
        })
        .collect();
    format!("instance {instance}: {}", parts.join("; "))
}

impl Error {
    /// How callers react (docs/design/operator.md §2.2).
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::PlatformNotReady => ErrorClass::PlatformNotReady,
            Error::Pull { error, .. } => match error {
                RegistryError::Transient { .. } => ErrorClass::TransientPull,
                RegistryError::Unverified { .. } => ErrorClass::Verification,
                _ => ErrorClass::Resolution,
            },
            Error::Request { .. }
            | Error::Load { .. }
            | Error::Shape { .. }
            | Error::Identity { .. }
            | Error::Resolution { .. } => ErrorClass::Resolution,
            Error::Values { .. } => ErrorClass::Values,
            Error::UnsupportedKind { .. } => ErrorClass::UnsupportedKind,
            Error::Skew { .. } => ErrorClass::SkewRefused,
            Error::Limit { .. } => ErrorClass::Timeout,
            Error::Memory { .. } => ErrorClass::ResourceExhausted,
            Error::Platform { .. }
            | Error::Instance { .. }
            | Error::Execute { .. }
            | Error::Output { .. }
            | Error::Thread(_) => ErrorClass::Other,
        }
    }

    /// The structured problems behind the error.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            Error::Platform { problems, .. }
            | Error::Load { problems, .. }
            | Error::Values { problems, .. }
            | Error::Instance { problems, .. }
            | Error::Limit { problems, .. }
            | Error::Memory { problems, .. } => problems.clone(),
            Error::Execute { failures, .. } => failures
                .iter()
                .flat_map(|f| f.problems.iter().cloned())
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl From<Error> for KernelError {
    fn from(e: Error) -> KernelError {
        KernelError {
            class: e.class(),
            message: e.to_string(),
            problems: e.problems(),
        }
    }
}
