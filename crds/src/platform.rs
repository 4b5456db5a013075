//! `Platform` (docs/design/operator.md §1.3): the cluster singleton named `cluster` that pins catalogs.
//! Cluster-scoped, short name `plat`. The CRD's CEL rule refuses any other name; the webhook checks
//! the rest (module paths, SemVer, majors).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::HasConditions;

/// What to do when a module was built against a newer catalog than the platform pins.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SkewPolicy {
    /// Render on the platform's build and warn (`RenderWarning`). The default when unset.
    #[default]
    Warn,
    /// Refuse before evaluation (workload Ready=False `SkewRefused`).
    Refuse,
}

/// One subscribed catalog (`spec.registry[<path@vN>]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_version)]
pub struct RegistryEntry {
    /// Whether the catalog's transformers are active (unset = true). Disabled entries are still
    /// pinned and imported with `enable: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    /// One bare SemVer build, e.g. `2.0.0-alpha.3` (the cue.mod pin and the stamped expected version).
    /// Defaults to empty when reading a legacy object that predates the required field.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub version: String,
}

/// Makes `version` CRD-required without a default, while Rust reads a legacy object without it as
/// an empty string (the reconciler then refuses it with `BuildFailed`, §3.2; the API server's
/// validation ratcheting keeps such a stored object status-patchable).
fn require_version(schema: &mut schemars::Schema) {
    if let Some(version) = schema
        .get_mut("properties")
        .and_then(|p| p.as_object_mut())
        .and_then(|p| p.get_mut("version"))
        .and_then(|v| v.as_object_mut())
    {
        version.remove("default");
    }
    match schema.get_mut("required").and_then(|r| r.as_array_mut()) {
        Some(req) => {
            if !req.iter().any(|r| r == "version") {
                req.push("version".into());
            }
        }
        None => {
            schema.insert("required".to_owned(), serde_json::json!(["version"]));
        }
    }
}

impl RegistryEntry {
    /// `enable == nil || *enable`.
    pub fn enabled(&self) -> bool {
        self.enable.unwrap_or(true)
    }
}

/// Desired state of the Platform.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "opmodel.dev",
    version = "v1alpha1",
    kind = "Platform",
    doc = "The cluster singleton (named cluster) pinning the catalogs of transformers the operator renders with.",
    plural = "platforms",
    singular = "platform",
    shortname = "plat",
    category = "opm",
    status = "PlatformStatus",
    validation = Rule::new("self.metadata.name == 'cluster'").message("Platform is a cluster singleton; the only permitted name is 'cluster'"),
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Operator","type":"string","jsonPath":".status.operatorVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PlatformSpec {
    /// Informational platform type (core `#Platform.type`), e.g. `kubernetes`.
    #[schemars(length(min = 1))]
    pub r#type: String,
    /// Subscribed catalogs keyed by major-suffixed catalog path (`opmodel.dev/catalogs/opm@v2`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub registry: BTreeMap<String, RegistryEntry>,
    /// `Warn` (unset) or `Refuse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew_policy: Option<SkewPolicy>,
    /// Require every module and catalog the cluster renders to be signed (cosign, public keys
    /// from a Secret of the operator's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::verify::Verify>,
}

/// Where a pinned catalog came from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RegistrySource {
    /// An authored `spec.registry` entry.
    Subscription,
    /// An accepted-and-active TransformerRegistration claim.
    Registration,
}

/// One catalog actually pinned in the recorded package.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinnedCatalog {
    /// Major-suffixed catalog path (the list-map key).
    pub catalog: String,
    /// The pinned bare SemVer version.
    pub version: String,
    /// Whether it is enabled.
    pub enabled: bool,
    /// Subscription or Registration.
    pub source: RegistrySource,
}

/// What identifies the recorded package (docs/design/operator.md §5.4).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageIdentity {
    /// The Platform generation.
    #[serde(default)]
    pub generation: i64,
    /// Digest of the active-claims set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub claims_digest: String,
}

/// Observed state of the Platform.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlatformStatus {
    /// The generation last reconciled (success and failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions: Ready, Reconciling, Stalled, ContractsFulfilled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The operator version (CLI skew ceiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The union of catalogs actually pinned (rewritten only when a package is recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["catalog"]))]
    pub registry: Vec<PinnedCatalog>,
    /// Identity of the recorded package: the Platform generation and the active claims' digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_identity: Option<PackageIdentity>,
    /// The value of the `reconcile.fluxcd.io/requestedAt` annotation the last reconcile
    /// handled (Flux's `lastHandledReconcileAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

impl HasConditions for PlatformStatus {
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
    fn observed_generation_mut(&mut self) -> &mut Option<i64> {
        &mut self.observed_generation
    }
}
