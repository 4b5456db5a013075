//! CUE module registry client over OCI (render-spec.md §2; DESIGN.md "Registry").
//!
//! [`ModuleRegistry`] implements [`cue::module::Registry`]: it maps module paths to locations with
//! a CUE_REGISTRY-style [`Mapping`] (remote OCI registries over HTTPS or plain HTTP, OCI image-layout
//! directories, or `none`), fetches module artifacts exactly as CUE publishes them, verifies every
//! blob and the zip, and caches extracted modules on disk. It also publishes modules (zip + module
//! file + `{}` config) to either kind of location, lists versions, and [`mvs`] computes tidy
//! dependency lists.
//!
//! Parts: [`mapping`] (CUE_REGISTRY syntax), [`version`] (paths and semver), [`modfile`]
//! (`cue.mod/module.cue`), [`artifact`] (manifest shape and digests), [`zipfile`] (zip safety and
//! creation), [`remote`] (bounded async OCI access), [`layout`] (OCI layout directories),
//! [`cache`] (the on-disk cache), [`auth`] (docker config credentials), [`client`] (the sync
//! facade), [`mvs`] (minimal version selection), [`cli`] (`opm-operator module ...`).

pub mod artifact;
pub mod auth;
pub mod cache;
pub mod cli;
pub mod client;
pub mod layout;
pub mod mapping;
pub mod modfile;
pub mod mvs;
pub mod remote;
pub mod version;
pub mod zipfile;

use std::path::PathBuf;

pub use cli::{run_module_command, ModuleCommand};
pub use client::{
    install_crypto_provider, FetchedModule, ModuleRegistry, Published, RegistryConfig,
};
pub use mapping::{Location, Mapping};
pub use remote::Timeouts;
pub use zipfile::ZipLimits;

/// Errors of the registry module outside the [`cue::module::Registry`] seam (which uses
/// [`cue::module::RegistryError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A registry operation failed; the inner error names the coordinate.
    #[error(transparent)]
    Registry(#[from] cue::module::RegistryError),
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
    /// The OCI HTTP client could not be built.
    #[error("{0}")]
    Client(String),
}
