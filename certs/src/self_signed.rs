//! Self-signed bootstrap for development (`opm-operator serve --self-signed`).
//!
//! Rules:
//! - A fresh CA (ECDSA P-256, valid 1 year) and a serving certificate signed by it (valid 90 days,
//!   `serverAuth`) are generated on every bootstrap; nothing is reused across runs, so no stale key
//!   lingers. The SANs are [`default_sans`] plus any extra names.
//! - Files: `<dir>/ca.crt`, `<dir>/tls.crt`, `<dir>/tls.key` (mode 0600), and the CA bundle copied to
//!   the requested bundle path (what a `ValidatingWebhookConfiguration.caBundle` or `curl --cacert`
//!   needs). Files are written to a temporary name and renamed, so a watcher never reads half a file.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

use crate::{Error, Result};

/// The DNS names of a Service `name` in `namespace`, plus the loopback names.
pub fn default_sans(service: &str, namespace: &str) -> Vec<String> {
    vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A certificate authority that can issue serving and client certificates.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

/// A PEM certificate and its PEM private key.
#[derive(Clone, Debug)]
pub struct Issued {
    /// PEM certificate.
    pub cert_pem: String,
    /// PEM PKCS#8 private key.
    pub key_pem: String,
}

impl Ca {
    /// Generates a new CA whose subject common name is `common_name`.
    pub fn new(common_name: &str) -> Result<Self> {
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now - Duration::hours(1);
        params.not_after = now + Duration::days(365);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate in PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    fn issue(&self, sans: &[String], eku: ExtendedKeyUsagePurpose, cn: &str) -> Result<Issued> {
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::new(sans.to_vec())?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![eku];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = now - Duration::hours(1);
        params.not_after = now + Duration::days(90);
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues a serving certificate for `sans` (DNS names or IP addresses).
    pub fn issue_server(&self, sans: &[String]) -> Result<Issued> {
        let cn = sans.first().map_or("opm-operator", String::as_str);
        self.issue(sans, ExtendedKeyUsagePurpose::ServerAuth, cn)
    }

    /// Issues a client certificate with common name `cn`.
    pub fn issue_client(&self, cn: &str) -> Result<Issued> {
        self.issue(&[], ExtendedKeyUsagePurpose::ClientAuth, cn)
    }
}

/// Where a bootstrap wrote its files.
#[derive(Clone, Debug)]
pub struct Bootstrapped {
    /// The serving certificate.
    pub cert: PathBuf,
    /// The serving key.
    pub key: PathBuf,
    /// The CA certificate inside the directory.
    pub ca: PathBuf,
    /// The CA bundle copy, if one was asked for.
    pub ca_bundle: Option<PathBuf>,
    /// The CA certificate in PEM.
    pub ca_pem: String,
}

/// Writes `contents` to `path` atomically (temporary file + rename), with `mode` on Unix.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(&tmp)
        .map_err(|e| Error::io("writing", &tmp, e))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("renaming into", path, e))
}

/// Generates a CA and a serving certificate for `sans` into `dir` (created if missing), and copies
/// the CA certificate to `ca_bundle` when given.
pub fn bootstrap(dir: &Path, sans: &[String], ca_bundle: Option<&Path>) -> Result<Bootstrapped> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
    let ca = Ca::new("opm-operator development CA")?;
    let leaf = ca.issue_server(sans)?;
    let out = Bootstrapped {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        ca: dir.join("ca.crt"),
        ca_bundle: ca_bundle.map(Path::to_path_buf),
        ca_pem: ca.cert_pem().to_string(),
    };
    write_atomic(&out.ca, ca.cert_pem().as_bytes(), 0o644)?;
    write_atomic(&out.key, leaf.key_pem.as_bytes(), 0o600)?;
    write_atomic(&out.cert, leaf.cert_pem.as_bytes(), 0o644)?;
    if let Some(bundle) = ca_bundle {
        if let Some(parent) = bundle.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io("creating", parent, e))?;
        }
        write_atomic(bundle, ca.cert_pem().as_bytes(), 0o644)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CertStore, TlsPaths};

    #[test]
    fn bootstrap_writes_a_loadable_pair_with_the_sans() {
        let dir = tempfile::tempdir().unwrap();
        let sans = default_sans("opm-operator-webhook", "opm-system");
        let bundle = dir.path().join("out/ca-bundle.pem");
        let b = bootstrap(&dir.path().join("certs"), &sans, Some(&bundle)).unwrap();
        assert_eq!(std::fs::read_to_string(&bundle).unwrap(), b.ca_pem);
        let store = CertStore::load(TlsPaths {
            cert: b.cert.clone(),
            key: b.key.clone(),
            client_ca: None,
        })
        .unwrap();
        let info = store.info();
        assert!(info.sans.contains(&"localhost".to_string()));
        assert!(info.sans.contains(&"127.0.0.1".to_string()));
        assert!(info
            .sans
            .contains(&"opm-operator-webhook.opm-system.svc".to_string()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&b.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn issued_certs_chain_to_the_ca() {
        let ca = Ca::new("test CA").unwrap();
        let leaf = ca.issue_server(&["localhost".to_string()]).unwrap();
        let mut reader = leaf.cert_pem.as_bytes();
        let der = rustls_pemfile::certs(&mut reader).next().unwrap().unwrap();
        let mut ca_reader = ca.cert_pem().as_bytes();
        let ca_der = rustls_pemfile::certs(&mut ca_reader)
            .next()
            .unwrap()
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_der).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            crate::provider(),
        )
        .build()
        .unwrap();
        use rustls::client::danger::ServerCertVerifier as _;
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        verifier
            .verify_server_cert(&der, &[], &name, &[], rustls_pki_types::UnixTime::now())
            .unwrap();
    }
}
