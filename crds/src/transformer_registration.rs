//! `TransformerRegistration` (docs/design/operator.md §1.4): a provider's claim that its catalog implements
//! platform contracts. Cluster-scoped, short name `treg`, named `<instance ns>.<instance name>`
//! (the CRD's CEL rule checks the dot; the webhook checks the exact name), finalizer
//! `opmodel.dev/dependents`. Every spec field is CRD-required.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::HasConditions;

/// The ModuleInstance that rendered the claim (stamped, never authored).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRef {
    /// Namespace of the ModuleInstance.
    #[schemars(length(min = 1))]
    pub namespace: String,
    /// Name of the ModuleInstance.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// The claim.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "opmodel.dev",
    version = "v1alpha1",
    kind = "TransformerRegistration",
    doc = "A provider's claim that its catalog implements platform contracts, judged by the operator.",
    plural = "transformerregistrations",
    singular = "transformerregistration",
    shortname = "treg",
    category = "opm",
    status = "TransformerRegistrationStatus",
    validation = Rule::new("self.metadata.name.contains('.')").message("name must be the dot-joined <namespace>.<name> of the claiming instance"),
    printcolumn = r#"{"name":"Catalog","type":"string","jsonPath":".spec.catalog"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Accepted","type":"boolean","jsonPath":".status.accepted"}"#,
    printcolumn = r#"{"name":"Active","type":"boolean","jsonPath":".status.active"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TransformerRegistrationSpec {
    /// The provider catalog's major-suffixed path, e.g. `opmodel.dev/catalogs/k8up@v1` (a catalog,
    /// never a module).
    #[schemars(length(min = 1))]
    pub catalog: String,
    /// Bare SemVer version of the catalog.
    #[schemars(length(min = 1))]
    pub version: String,
    /// Provider-fulfilled contract FQNs (may be empty; verified by exact equality).
    pub provides: Vec<String>,
    /// The ModuleInstance that rendered the claim.
    pub provider_ref: ProviderRef,
}

/// The verdict on the claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransformerRegistrationStatus {
    /// The generation last judged (set even when no verdict was taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions: Ready, Reconciling, Stalled, Active.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Whether the claim was accepted.
    #[serde(default)]
    pub accepted: bool,
    /// The activation latch: once true, only deletion ends it.
    #[serde(default)]
    pub active: bool,
    /// The value of the `reconcile.fluxcd.io/requestedAt` annotation the last reconcile
    /// handled (Flux's `lastHandledReconcileAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

impl HasConditions for TransformerRegistrationStatus {
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
