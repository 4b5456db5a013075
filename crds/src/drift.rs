//! `spec.drift` of a ModuleInstance (issue 40; helm-controller's `driftDetection`, Argo CD's
//! `ignoreDifferences`): what the reconciler does when live objects differ from the render.
//!
//! Rules (implemented by the reconciler; this module holds the types):
//! - `mode`: `Enabled` re-applies drifted objects, `Warn` reports them (Drifted condition and a
//!   Warning) without touching them, `Disabled` does no drift check. Unset: the operator's
//!   `--default-drift-mode` (`Warn`, the behaviour before the field existed).
//! - `ignore`: JSON pointers (RFC 6901) left out of the drift comparison and of what the operator
//!   applies to an existing object, for the objects a rule's `target` selects (every rendered
//!   object when it has none; each field of a target that is set must match).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What happens to drift.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DriftMode {
    /// Detect drift and re-apply the drifted objects.
    Enabled,
    /// Detect drift and report it (Drifted condition, Warning event); change nothing.
    Warn,
    /// No drift check.
    Disabled,
}

impl DriftMode {
    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftMode::Enabled => "Enabled",
            DriftMode::Warn => "Warn",
            DriftMode::Disabled => "Disabled",
        }
    }
}

/// The objects an ignore rule applies to (a field left unset matches any value).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftTarget {
    /// API group (`""` for the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Fields the operator neither checks for drift nor applies to an existing object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftIgnoreRule {
    /// JSON pointers (RFC 6901), e.g. `/spec/replicas`.
    #[schemars(length(min = 1))]
    pub paths: Vec<String>,
    /// The objects the rule applies to (unset: every rendered object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<DriftTarget>,
}

/// Drift detection and correction.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    /// `Enabled`, `Warn` or `Disabled` (unset: the operator's `--default-drift-mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DriftMode>,
    /// Fields to ignore.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<DriftIgnoreRule>,
}
