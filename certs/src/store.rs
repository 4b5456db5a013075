//! The live TLS config and its reload rule.
//!
//! Rules:
//! - [`CertStore::load`] must succeed at start: a server never starts without a valid pair.
//! - [`CertStore::reload_if_changed`] reads the files again. Bytes equal to what is served, or to the
//!   last rejected attempt, are no event (so a bad pair is counted once, not once per poll). New bytes
//!   that build a config replace the served config and count a success; new bytes that do not build
//!   count a failure and leave the served config alone.
//! - Reading cert and key is not atomic. The cert is read again after the key, and the read retried
//!   when it changed in between, so a Secret's `..data` swap is never seen half done.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rustls::ServerConfig;

use crate::pem::{build_server_config, CertInfo, Material};
use crate::{Error, Result};

/// Where the TLS files live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsPaths {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
    /// Optional PEM bundle of client CAs (enables mTLS).
    pub client_ca: Option<PathBuf>,
}

impl TlsPaths {
    /// Reads all files of this set.
    pub fn read(&self) -> Result<Material> {
        fn read(path: &Path) -> Result<Vec<u8>> {
            std::fs::read(path).map_err(|e| Error::io("reading", path, e))
        }
        let mut attempts = 0;
        loop {
            let cert_pem = read(&self.cert)?;
            let key_pem = read(&self.key)?;
            let client_ca_pem = self.client_ca.as_deref().map(read).transpose()?;
            attempts += 1;
            if attempts >= 3 || read(&self.cert)? == cert_pem {
                return Ok(Material {
                    cert_pem,
                    key_pem,
                    client_ca_pem,
                });
            }
        }
    }

    /// The directories holding the files (what a watcher must watch), without duplicates.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let files = [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()];
        for file in files.into_iter().flatten() {
            let dir = match file.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    }
}

/// Reload outcomes and the served certificate's expiry, as plain atomics the host exports.
#[derive(Debug, Default)]
pub struct CertMetrics {
    reload_success: AtomicU64,
    reload_failure: AtomicU64,
    not_after_seconds: AtomicI64,
    checks: AtomicU64,
}

impl CertMetrics {
    /// Reloads that replaced the served config (`cert_reload_total{result="success"}`).
    pub fn reload_success(&self) -> u64 {
        self.reload_success.load(Ordering::Relaxed)
    }
    /// Reloads rejected because the new files did not build (`cert_reload_total{result="failure"}`).
    pub fn reload_failure(&self) -> u64 {
        self.reload_failure.load(Ordering::Relaxed)
    }
    /// Reload checks run so far (changed or not); for diagnostics and tests.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }
    /// `notAfter` of the served leaf, seconds since the epoch (`cert_not_after_seconds`).
    pub fn not_after_seconds(&self) -> i64 {
        self.not_after_seconds.load(Ordering::Relaxed)
    }
}

/// What one reload check did.
#[derive(Debug)]
pub enum ReloadOutcome {
    /// The files hold what is served, or what was last rejected.
    Unchanged,
    /// A new config is served.
    Reloaded(CertInfo),
    /// The new files were rejected; the old config is still served.
    Rejected(Error),
}

struct Served {
    config: Arc<ServerConfig>,
    info: CertInfo,
}

/// The served TLS config, swapped on reload.
pub struct CertStore {
    paths: TlsPaths,
    served: RwLock<Served>,
    /// The material last looked at (served or rejected), to skip unchanged files.
    last_seen: Mutex<Material>,
    metrics: CertMetrics,
}

impl std::fmt::Debug for CertStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertStore")
            .field("paths", &self.paths)
            .field("info", &self.info())
            .finish_non_exhaustive()
    }
}

impl CertStore {
    /// Loads the files once; fails when they do not build a config.
    pub fn load(paths: TlsPaths) -> Result<Arc<Self>> {
        let material = paths.read()?;
        let loaded = build_server_config(&material)?;
        let metrics = CertMetrics::default();
        metrics
            .not_after_seconds
            .store(loaded.info.not_after_unix, Ordering::Relaxed);
        Ok(Arc::new(CertStore {
            paths,
            served: RwLock::new(Served {
                config: loaded.config,
                info: loaded.info,
            }),
            last_seen: Mutex::new(material),
            metrics,
        }))
    }

    /// The config for a new handshake.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.served
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .config
            .clone()
    }

    /// Facts about the served leaf certificate.
    pub fn info(&self) -> CertInfo {
        self.served
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .info
            .clone()
    }

    /// The watched paths.
    pub fn paths(&self) -> &TlsPaths {
        &self.paths
    }

    /// Reload counters and expiry.
    pub fn metrics(&self) -> &CertMetrics {
        &self.metrics
    }

    /// Reads the files and swaps the config when they changed and build; see the module rules.
    pub fn reload_if_changed(&self) -> ReloadOutcome {
        let mut last_seen = self
            .last_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.metrics.checks.fetch_add(1, Ordering::Relaxed);
        let material = match self.paths.read() {
            Ok(m) => m,
            Err(e) => {
                // A file that vanished mid-swap is retried on the next check; count it once per
                // distinct situation by remembering an empty material.
                let empty = Material::default();
                if *last_seen == empty {
                    return ReloadOutcome::Unchanged;
                }
                *last_seen = empty;
                self.metrics.reload_failure.fetch_add(1, Ordering::Relaxed);
                return ReloadOutcome::Rejected(e);
            }
        };
        if material == *last_seen {
            return ReloadOutcome::Unchanged;
        }
        let outcome = match build_server_config(&material) {
            Ok(loaded) => {
                let info = loaded.info.clone();
                *self.served.write().unwrap_or_else(PoisonError::into_inner) = Served {
                    config: loaded.config,
                    info: loaded.info,
                };
                self.metrics
                    .not_after_seconds
                    .store(info.not_after_unix, Ordering::Relaxed);
                self.metrics.reload_success.fetch_add(1, Ordering::Relaxed);
                ReloadOutcome::Reloaded(info)
            }
            Err(e) => {
                self.metrics.reload_failure.fetch_add(1, Ordering::Relaxed);
                ReloadOutcome::Rejected(e)
            }
        };
        *last_seen = material;
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, sans: &[&str]) -> String {
        let ck = rcgen::generate_simple_self_signed(
            sans.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        std::fs::write(dir.join("tls.crt"), ck.cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), ck.signing_key.serialize_pem()).unwrap();
        crate::pem::cert_info(ck.cert.der()).unwrap().serial
    }

    fn paths(dir: &Path) -> TlsPaths {
        TlsPaths {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            client_ca: None,
        }
    }

    #[test]
    fn reloads_new_pair_and_keeps_old_on_bad_pair() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_pair(dir.path(), &["one.example"]);
        let store = CertStore::load(paths(dir.path())).unwrap();
        assert_eq!(store.info().serial, first);
        assert!(matches!(
            store.reload_if_changed(),
            ReloadOutcome::Unchanged
        ));

        let second = write_pair(dir.path(), &["two.example"]);
        assert!(matches!(
            store.reload_if_changed(),
            ReloadOutcome::Reloaded(_)
        ));
        assert_eq!(store.info().serial, second);
        assert_eq!(store.metrics().reload_success(), 1);

        // A key that does not match: rejected once, counted once, old cert kept.
        let other = rcgen::generate_simple_self_signed(vec!["x.example".to_string()]).unwrap();
        std::fs::write(
            dir.path().join("tls.key"),
            other.signing_key.serialize_pem(),
        )
        .unwrap();
        assert!(matches!(
            store.reload_if_changed(),
            ReloadOutcome::Rejected(Error::KeyMismatch)
        ));
        assert!(matches!(
            store.reload_if_changed(),
            ReloadOutcome::Unchanged
        ));
        assert_eq!(store.metrics().reload_failure(), 1);
        assert_eq!(store.info().serial, second);
        assert_eq!(store.info().sans, vec!["two.example"]);
    }

    #[test]
    fn missing_file_is_a_failure_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        write_pair(dir.path(), &["one.example"]);
        let store = CertStore::load(paths(dir.path())).unwrap();
        std::fs::remove_file(dir.path().join("tls.key")).unwrap();
        assert!(matches!(
            store.reload_if_changed(),
            ReloadOutcome::Rejected(Error::Io { .. })
        ));
        assert!(matches!(
            store.reload_if_changed(),
            ReloadOutcome::Unchanged
        ));
        assert_eq!(store.metrics().reload_failure(), 1);
    }

    #[test]
    fn load_fails_on_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(CertStore::load(paths(dir.path())).is_err());
    }
}
