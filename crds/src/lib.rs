//! CRD types of `opmodel.dev/v1alpha1` (docs/design/operator.md §1): ModuleInstance, ModulePackage,
//! Platform and TransformerRegistration, their conditions and reasons, and fixture builders.
//!
//! Architecture invariants:
//! - Types only, no I/O: kube's derive macro (no client), schemars and serde. The clock is never
//!   read here; condition setters take `now` from the caller.
//! - The CRD YAML under `deploy/crds/` is generated from these types by the `crdgen` bin
//!   (`cargo run -p crds --bin crdgen`) and drift-tested against them.
//! - Every status carries `observedGeneration` and `conditions` as a list-map keyed by `type`
//!   (standard `metav1.Condition`), so kstatus readers (`kubectl wait`, Flux, Argo) work unchanged.

//! - Feature `kinds` (default) holds the four kinds, their CRDs and fixtures (kube's derive macro);
//!   without it the crate is the shared status types, conditions and labels only, so a synchronous
//!   consumer (the render kernel) depends on neither kube nor its derive.

pub mod common;
pub mod conditions;
pub mod custom_health;
pub mod depends_on;
pub mod drift;
pub mod duration;
#[cfg(feature = "kinds")]
pub mod fixtures;
pub mod kube_config;
#[cfg(feature = "kinds")]
pub mod module_instance;
#[cfg(feature = "kinds")]
pub mod module_package;
#[cfg(feature = "kinds")]
pub mod platform;
#[cfg(feature = "kinds")]
pub mod reference;
#[cfg(feature = "kinds")]
pub mod transformer_registration;
pub mod values_from;
pub mod verify;
pub mod yaml;

#[cfg(feature = "kinds")]
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
#[cfg(feature = "kinds")]
use kube::CustomResourceExt;

pub use conditions::HasConditions;
#[cfg(feature = "kinds")]
pub use module_instance::{ModuleInstance, ModuleInstanceSpec, ModuleInstanceStatus};
#[cfg(feature = "kinds")]
pub use module_package::{ModulePackage, ModulePackageSpec, ModulePackageStatus};
#[cfg(feature = "kinds")]
pub use platform::{Platform, PlatformSpec, PlatformStatus};
#[cfg(feature = "kinds")]
pub use transformer_registration::{
    TransformerRegistration, TransformerRegistrationSpec, TransformerRegistrationStatus,
};

/// Re-exported so callers build condition times and object metadata with the same types.
pub use k8s_openapi;

/// The API group of every CRD.
pub const GROUP: &str = "opmodel.dev";
/// The API version of every CRD.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every CRD object.
pub const API_VERSION: &str = "opmodel.dev/v1alpha1";
/// The only permitted Platform name (docs/design/operator.md §1.3).
pub const PLATFORM_NAME: &str = "cluster";
/// Annotation asking for a reconcile now (Flux's convention, so `kubectl annotate …
/// reconcile.fluxcd.io/requestedAt="$(date +%s)" --overwrite` works as for Flux's kinds): any
/// change of its value wakes the object's controller; the value handled is recorded in
/// `status.lastHandledReconcileAt` of every kind.
pub const RECONCILE_REQUEST_ANNOTATION: &str = "reconcile.fluxcd.io/requestedAt";
/// Finalizer of ModuleInstance and ModulePackage: prune on deletion (§2.4).
pub const FINALIZER_CLEANUP: &str = "opmodel.dev/cleanup";
/// Finalizer guarding a TransformerRegistration's removal while dependents remain (§4.4).
pub const FINALIZER_DEPENDENTS: &str = "opmodel.dev/dependents";
/// The generated platform module's path: reserved, never published (§1.5).
pub const PLATFORM_MODULE_PATH: &str = "opmodel.dev/platforms/cluster@v0";
/// SSA field manager and event reporter.
pub const FIELD_MANAGER: &str = labels::MANAGED_BY_OPERATOR;
/// Leader election ID.
pub const LEADER_ELECTION_ID: &str = "4cc9e43e.opmodel.dev";

/// Labels and annotations of §1.5.
pub mod labels {
    /// Runtime actor label.
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// The operator's runtime name (value of [`MANAGED_BY`]).
    pub const MANAGED_BY_OPERATOR: &str = "opm-controller";
    /// The CLI's runtime name.
    pub const MANAGED_BY_CLI: &str = "opm-cli";
    /// Legacy runtime name: recognised, never stamped.
    pub const MANAGED_BY_LEGACY: &str = "open-platform-model";
    /// Instance identity: name.
    pub const INSTANCE_NAME: &str = "module-instance.opmodel.dev/name";
    /// Instance identity: namespace.
    pub const INSTANCE_NAMESPACE: &str = "module-instance.opmodel.dev/namespace";
    /// Instance identity: uuid.
    pub const INSTANCE_UUID: &str = "module-instance.opmodel.dev/uuid";
    /// Component provenance.
    pub const COMPONENT_NAME: &str = "component.opmodel.dev/name";
    /// OPM infrastructure classification.
    pub const OPM_COMPONENT: &str = "opmodel.dev/component";
    /// Annotation: orphan on deletion when the SA is missing; only `"true"` counts.
    pub const FORCE_DELETE_ORPHAN: &str = "opm.dev/force-delete-orphan";
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Serialising a CRD to YAML failed (not expected: the types always serialise).
    #[error("serialising CRD YAML: {0}")]
    Yaml(#[from] yaml::SerError),
}

#[cfg(feature = "kinds")]
/// All four CRDs, in a stable order (by kind name).
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        ModuleInstance::crd(),
        ModulePackage::crd(),
        Platform::crd(),
        TransformerRegistration::crd(),
    ]
}

#[cfg(feature = "kinds")]
/// The file name (under `deploy/crds/`) of a CRD: `<plural>.<group>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

#[cfg(feature = "kinds")]
/// One CRD as a YAML document (with a leading `---` and a generated-file header).
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, Error> {
    Ok(format!(
        "# Generated by `cargo run -p crds --bin crdgen` from the crds crate. Do not edit.\n---\n{}",
        yaml::to_string(crd)?
    ))
}

#[cfg(feature = "kinds")]
/// All CRDs of the operator as one multi-document YAML string, in a stable order.
pub fn all_crds_yaml() -> Result<String, Error> {
    let mut out = String::new();
    for crd in all_crds() {
        out.push_str(&crd_yaml(&crd)?);
    }
    Ok(out)
}
