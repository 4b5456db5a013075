//! `ModulePackage` (docs/design/operator.md §1.2): an authored instance package (`instance.cue`) from a Flux
//! source artifact (OCIRepository, GitRepository, Bucket). Namespaced, short name `mpkg`, finalizer
//! `opmodel.dev/cleanup`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ReconcileStatus, Rollout};
use crate::conditions::HasConditions;
use crate::custom_health::HealthCheckExpr;
use crate::kube_config::KubeConfigReference;

/// The Flux source holding the artifact (kind checked by the reconciler).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    /// API version of the source (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `OCIRepository`, `GitRepository` or `Bucket`.
    pub kind: String,
    /// Name of the source.
    pub name: String,
    /// Namespace of the source (empty = the package's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A ModulePackage this one waits for (same namespace only; the type both kinds share).
pub use crate::depends_on::DependsOn;

/// Desired state of a ModulePackage.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "opmodel.dev",
    version = "v1alpha1",
    kind = "ModulePackage",
    doc = "An authored OPM instance package (instance.cue) from a Flux source artifact, rendered and applied like a ModuleInstance.",
    plural = "modulepackages",
    singular = "modulepackage",
    shortname = "mpkg",
    category = "opm",
    namespaced,
    status = "ModulePackageStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.sourceRef.name"}"#,
    printcolumn = r#"{"name":"Path","type":"string","jsonPath":".spec.path"}"#,
    printcolumn = r#"{"name":"Revision","type":"string","jsonPath":".status.source.artifactRevision","priority":1}"#,
    printcolumn = r#"{"name":"Retry","type":"date","jsonPath":".status.nextRetryAt","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ModulePackageSpec {
    /// The Flux source.
    pub source_ref: SourceRef,
    /// Directory of the artifact holding `instance.cue`.
    #[schemars(length(min = 1))]
    pub path: String,
    /// Reconcile interval and soft-failure requeue (Go duration; unset or 0 → 5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// ModulePackages that must be Ready first (same namespace only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependsOn>,
    /// Prune stale objects on reconcile and everything on deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune: Option<bool>,
    /// Stop reconciling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Service account to impersonate for apply and prune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Rollout options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Custom health checks (as ModuleInstance's `healthCheckExprs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub health_check_exprs: Vec<HealthCheckExpr>,
    /// The cluster to apply to (as ModuleInstance's `kubeConfig`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::kube_config::optional_schema")]
    pub kube_config: Option<KubeConfigReference>,
}

/// The artifact last fetched.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// `<kind>/<namespace>/<name>` of the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
    /// Artifact revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_revision: Option<String>,
    /// Artifact digest (`sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_digest: Option<String>,
    /// Artifact URL.
    #[serde(
        default,
        rename = "artifactURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub artifact_url: Option<String>,
}

/// Observed state of a ModulePackage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModulePackageStatus {
    /// The generation last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions: Ready, Reconciling, Stalled, Drifted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Attempt/apply bookkeeping, inventory and history.
    #[serde(flatten)]
    pub reconcile: ReconcileStatus,
    /// The artifact last fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
}

impl HasConditions for ModulePackageStatus {
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
