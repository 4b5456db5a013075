//! CUE module registry client over OCI (docs/design/render.md §2; docs/design/architecture.md §3 "Registry").
//!
//! [`ModuleRegistry`] implements [`cue::module::Registry`]: it maps module paths to locations with
//! a CUE_REGISTRY-style [`Mapping`] (remote OCI registries over HTTPS or plain HTTP, OCI image-layout
//! directories, or `none`), fetches module artifacts exactly as CUE publishes them, verifies every
//! blob and the zip, and caches extracted modules on disk. It also publishes modules (zip + module
//! file + `{}` config) to either kind of location, and lists versions.
//!
//! The module system itself is `cue::module`'s, the only one of the project: the `module.cue`
//! parser and writer ([`cue::module::ModuleFile`]), module-path and coordinate rules
//! ([`cue::module::check_path`], [`cue::module::check_coordinate`]), semver and MVS
//! ([`cue::module::select`], [`cue::module::tidy`], fed by [`ModuleRegistry`] as a
//! [`cue::module::ModuleFileSource`]).
//!
//! Parts: [`mapping`] (CUE_REGISTRY syntax), [`artifact`] (manifest shape and digests),
//! [`zipfile`] (zip safety and creation), [`remote`] (bounded async OCI access), [`layout`] (OCI
//! layout directories), [`cache`] (the on-disk cache), [`auth`] (docker config credentials),
//! [`client`] (the sync facade), [`verify`] and [`sign`] (cosign key-based signatures: verified by
//! digest before any layer is read when a policy is set, and signing for publishers); [`flux`] downloads and safely extracts Flux source artifacts
//! (ModulePackage). The `opm-operator module ...` command lives in the binary (`src/cmd/module.rs`).
//!
//! Architecture invariant: no kube, axum or operator code; the async runtime (tokio) is private to
//! the client, which offers a synchronous facade (the `cue::module::Registry` seam is synchronous).

pub mod artifact;
pub mod auth;
pub mod cache;
pub mod client;
pub mod flux;
pub mod layout;
pub mod mapping;
pub mod remote;
pub mod sign;
pub mod verify;
pub mod zipfile;

use std::path::PathBuf;

pub use client::{
    install_crypto_provider, FetchedModule, ModuleRegistry, Published, RegistryConfig, Signed,
    Verified, VerifyingRegistry,
};
pub use mapping::{Location, Mapping};
pub use remote::Timeouts;
pub use verify::TrustedKeys;
pub use zipfile::ZipLimits;

/// Errors of the registry module outside the [`cue::module::Registry`] seam (which uses
/// [`cue::module::RegistryError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A registry operation failed; the inner error names the coordinate.
    #[error("{0}")]
    Registry(cue::module::RegistryError),
    /// The registry mapping (CUE_REGISTRY / `--registry`) does not parse.
    #[error("invalid registry mapping {spec:?}: {message}")]
    Mapping {
        /// The mapping text.
        spec: String,
        /// What is wrong.
        message: String,
    },
    /// A module file could not be read as data or lacks a required field.
    #[error("{}: {message}", path.display())]
    ModuleFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Publishing was refused (version/major mismatch, immutable tag, unpublishable files, ...).
    #[error("cannot publish {module}: {message}")]
    Publish {
        /// The coordinate (`path@version`).
        module: String,
        /// Why.
        message: String,
    },
    /// A command-line argument is malformed.
    #[error("{0}")]
    Usage(String),
    /// The docker config file could not be read.
    #[error("docker config: {0}")]
    Credentials(String),
    /// Local file-system I/O failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The tokio runtime of the client could not be started.
    #[error("cannot start the registry runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl From<cue::module::RegistryError> for Error {
    fn from(e: cue::module::RegistryError) -> Self {
        Error::Registry(e)
    }
}
