//! Errors of the `certs` crate: one enum for loading, building, watching and bootstrapping.
//! Every variant names the file or step that failed, so a reload failure can be logged as is.

use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of loading TLS material, building configs, watching files and bootstrapping certs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("reading", "writing", ...).
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A PEM file holds no certificate.
    #[error("no certificate found in the {what} PEM")]
    NoCertificate {
        /// Which input ("certificate", "client CA").
        what: &'static str,
    },
    /// The key PEM holds no private key.
    #[error("no private key found in the key PEM")]
    NoPrivateKey,
    /// A PEM block could not be decoded.
    #[error("malformed {what} PEM: {source}")]
    Pem {
        /// Which input.
        what: &'static str,
        /// The decoding error.
        #[source]
        source: std::io::Error,
    },
    /// The leaf certificate could not be parsed as X.509.
    #[error("parsing the leaf certificate: {0}")]
    X509(String),
    /// The private key does not belong to the leaf certificate.
    #[error("the private key does not match the certificate")]
    KeyMismatch,
    /// rustls rejected the key, the chain or the config.
    #[error("building the TLS config: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client CA bundle could not be turned into a client-certificate verifier.
    #[error("building the client-certificate verifier: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
    /// The file watcher could not be set up.
    #[error("watching {path}: {source}")]
    Watch {
        /// The directory being watched.
        path: PathBuf,
        /// The watcher error.
        #[source]
        source: notify::Error,
    },
    /// The watcher thread could not be spawned.
    #[error("spawning the cert watcher thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// Generating a self-signed certificate failed.
    #[error("generating a self-signed certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
