//! PEM loading, rustls server configuration, hot reload and self-signed bootstrap.
//!
//! Architecture invariants:
//! - No async runtime, no kube, no HTTP framework: the crate is plain `std` + rustls, so the server
//!   (or any other host) drives it. The watcher is one `std` thread.
//! - Every config is built with the `ring` provider passed explicitly; nothing here relies on the
//!   process-wide default provider.
//! - A new certificate is served only when the new chain and key parse **and** the key matches the
//!   leaf certificate; otherwise the previous config stays in place (docs/design/principles.md rule 18).
//! - The reload loop never exits while its [`Watcher`] is alive, and never panics; each outcome is
//!   counted in [`CertMetrics`], which the host exports (`cert_reload_total{result}`,
//!   `cert_not_after_seconds`). The crate has no metrics registry of its own.
//! - Live connections keep the config they were accepted with; new handshakes read
//!   [`CertStore::config`], which is swapped atomically.

mod error;
mod pem;
pub mod self_signed;
mod store;
mod watch;

pub use error::{Error, Result};
pub use pem::{build_server_config, CertInfo, Loaded, Material};
pub use store::{CertMetrics, CertStore, ReloadOutcome, TlsPaths};
pub use watch::{watch, Watcher, DEFAULT_POLL_INTERVAL};

/// The `ring` crypto provider used for every config this crate builds.
pub fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
