//! The library's error type. Errors seen by API clients are `ApiError` (in `api_error.rs`) and are
//! rendered as `Status` objects; this enum covers starting and driving the emulator itself.

/// Errors from starting, configuring or stopping the emulator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the listener or serving failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// Building the kube client failed.
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    /// Building a kube config from the emulator's kubeconfig failed.
    #[error("kube config: {0}")]
    KubeConfig(#[from] kube::config::KubeconfigError),
    /// A manifest or kubeconfig could not be (de)serialised.
    #[error("serialisation: {0}")]
    Serde(String),
    /// Generating the serving certificate or TLS configuration failed.
    #[error("tls: {0}")]
    Tls(String),
    /// The emulator rejected a request made through the library API.
    #[error("api error: {0}")]
    Api(String),
    /// Loading or writing the store's snapshot failed (`Options::snapshot`).
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    /// Generating the protobuf field tables failed (`protobuf::codegen`, the `protogen` bin).
    #[error("protobuf table generation: {0}")]
    Codegen(String),
}
