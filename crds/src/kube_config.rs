//! The remote-cluster reference (`spec.kubeConfig`, the shape of Flux's `kubeConfig.secretRef`): a
//! Secret in the object's own namespace holding a kubeconfig. What the operator does with it
//! (which requests go there, how it is cached, which kubeconfigs are refused) is stated where
//! it is used (`opm-operator`'s `controller::remote`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The key read when `secretRef.key` is unset.
pub const DEFAULT_KEY: &str = "value";
/// The key read when `secretRef.key` is unset and [`DEFAULT_KEY`] is absent (Cluster API and
/// Flux's convention).
pub const FALLBACK_KEY: &str = "value.yaml";

/// A key of a Secret in the object's own namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyReference {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The key holding the kubeconfig (unset: `value`, else `value.yaml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The schema of an optional `kubeConfig` field: the object's own, not `nullable` (an absent
/// field is unset), so `kubectl explain` descends into it with every kubectl version (the v2
/// OpenAPI an apiserver serves drops the properties of a `nullable` object).
pub fn optional_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    <KubeConfigReference as JsonSchema>::json_schema(g)
}

/// Where to apply: the cluster a kubeconfig names instead of the operator's own.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigReference {
    /// The Secret (in the object's namespace) holding the kubeconfig. Only inline credentials
    /// are accepted (no exec or auth-provider plugins, no file paths).
    pub secret_ref: SecretKeyReference,
}
