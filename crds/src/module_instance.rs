//! `ModuleInstance` (docs/design/operator.md §1.1): an instance of a published module (path@version +
//! values), rendered on the leased platform and applied with server-side apply. Namespaced, short
//! name `mi`, finalizer `opmodel.dev/cleanup`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ReconcileStatus, Rollout};
use crate::conditions::HasConditions;
use crate::custom_health::HealthCheckExpr;
use crate::depends_on::DependsOn;
use crate::drift::Drift;
use crate::kube_config::KubeConfigReference;
use crate::values_from::ValuesReference;

/// Who manages the instance. Only the literal `cli` makes the operator hands-off.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    /// The OPM CLI manages it; the operator only reports `ManagedExternally`.
    Cli,
    /// The operator manages it.
    Operator,
}

/// The published module to instantiate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleRef {
    /// Major-suffixed module path, e.g. `opmodel.dev/modules/cert_manager@v0`.
    #[schemars(length(min = 1))]
    pub path: String,
    /// Module version, e.g. `v0.2.1`.
    #[schemars(length(min = 1))]
    pub version: String,
}

/// Desired state of a ModuleInstance.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "opmodel.dev",
    version = "v1alpha1",
    kind = "ModuleInstance",
    doc = "An instance of a published OPM module (path@version + values), rendered on the platform and applied with server-side apply.",
    plural = "moduleinstances",
    singular = "moduleinstance",
    shortname = "mi",
    category = "opm",
    namespaced,
    status = "ModuleInstanceStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Module","type":"string","jsonPath":".spec.module.path"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.module.version"}"#,
    printcolumn = r#"{"name":"Retry","type":"date","jsonPath":".status.nextRetryAt","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleInstanceSpec {
    /// Stop reconciling (nothing is touched while suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// `cli` = hands-off; unset or `operator` = managed by the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// The module to instantiate.
    pub module: ModuleRef,
    /// Instance values (free-form JSON, unified with the module's `#config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::preserve_unknown_fields")]
    pub values: Option<serde_json::Value>,
    /// Prune stale objects on reconcile and everything on deletion (never Namespaces or CRDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune: Option<bool>,
    /// Service account (in the instance's namespace) to impersonate for apply and prune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Rollout options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Custom health checks: per kind, CEL expressions over the live object (`self`, and its
    /// top-level fields by name as in Flux) judging it in progress, failed or current, used
    /// instead of the built-in kstatus rules for that kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub health_check_exprs: Vec<HealthCheckExpr>,
    /// Apply, prune, drift-check and health-check on the cluster of this kubeconfig (a Secret in
    /// the instance's namespace) instead of the operator's own; the render happens here, the
    /// ServiceAccount is impersonated there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::kube_config::optional_schema")]
    pub kube_config: Option<KubeConfigReference>,
    /// Values read from Secrets and ConfigMaps of the instance's namespace (as the identity the
    /// instance applies as), merged in order, with `spec.values` merged on top (a later source
    /// wins per key; maps merge deeply).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<ValuesReference>,
    /// Reconcile fully (render, drift check, health) every interval, with the operator's
    /// `--interval-jitter-percentage` (Go duration, e.g. `10m`; unset or `0s`: only when something
    /// changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub interval: Option<String>,
    /// Drift detection and correction (unset: the operator's `--default-drift-mode`, nothing
    /// ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// ModuleInstances that must be ready before this one is rendered (Ready=True at their
    /// generation, or their `readyExpr`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependsOn>,
    /// Require the module to be signed (cosign, public keys from a Secret of this namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::verify::Verify>,
}

/// Observed state of a ModuleInstance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleInstanceStatus {
    /// The generation last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Instance UUID (from label `module-instance.opmodel.dev/uuid`; the prune guard).
    #[serde(
        default,
        rename = "instanceUUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub instance_uuid: Option<String>,
    /// Conditions: Ready, Reconciling, Stalled, ModuleResolved, Drifted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Attempt/apply bookkeeping, inventory and history.
    #[serde(flatten)]
    pub reconcile: ReconcileStatus,
    /// Sorted, de-duplicated contract FQNs the components demand (from the last render).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub required_contracts: Vec<String>,
}

impl HasConditions for ModuleInstanceStatus {
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
