//! CRD types of `opmodel.dev/v1alpha1` (operator-spec.md §1). Types only, no I/O.

/// The API group of every CRD.
pub const GROUP: &str = "opmodel.dev";
/// The only permitted Platform name.
pub const PLATFORM_NAME: &str = "cluster";
/// Finalizer guarding a TransformerRegistration's removal while dependents remain.
pub const FINALIZER_DEPENDENTS: &str = "opmodel.dev/dependents";

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Serialising a CRD to YAML failed.
    #[error("serialising CRD YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// All CRDs of the operator as one multi-document YAML string, in a stable order.
pub fn all_crds_yaml() -> Result<String, Error> {
    Ok(String::new())
}
