//! PEM → rustls `ServerConfig`.
//!
//! Rules:
//! - The certificate PEM holds the leaf first, then any intermediates; the key PEM holds one PKCS#8,
//!   PKCS#1 or SEC1 key. The key must match the leaf (SubjectPublicKeyInfo comparison); a key whose
//!   public half cannot be derived is rejected too, never accepted on trust.
//! - ALPN offers `h2` then `http/1.1`.
//! - With a client CA bundle, every client must present a certificate chaining to it (mTLS);
//!   without one, no client certificate is asked for.

use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::{Error, Result};

/// The raw bytes of one set of TLS files, as read from disk.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Material {
    /// PEM certificate chain, leaf first.
    pub cert_pem: Vec<u8>,
    /// PEM private key.
    pub key_pem: Vec<u8>,
    /// Optional PEM bundle of CAs trusted for client certificates.
    pub client_ca_pem: Option<Vec<u8>>,
}

/// Facts about the served leaf certificate, for logs and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// Serial number as colon-separated hex (x509-parser's `raw_serial_as_string`).
    pub serial: String,
    /// Subject alternative names (DNS names and IP addresses), in certificate order.
    pub sans: Vec<String>,
    /// `notAfter` as seconds since the Unix epoch.
    pub not_after_unix: i64,
}

/// A built config together with facts about its leaf certificate.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The rustls server config, ready for a `TlsAcceptor`.
    pub config: Arc<ServerConfig>,
    /// Facts about the leaf certificate.
    pub info: CertInfo,
}

fn parse_certs(pem: &[u8], what: &'static str) -> Result<Vec<CertificateDer<'static>>> {
    let mut reader = pem;
    let certs = rustls_pemfile::certs(&mut reader)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| Error::Pem { what, source })?;
    if certs.is_empty() {
        return Err(Error::NoCertificate { what });
    }
    Ok(certs)
}

fn parse_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>> {
    let mut reader = pem;
    rustls_pemfile::private_key(&mut reader)
        .map_err(|source| Error::Pem {
            what: "key",
            source,
        })?
        .ok_or(Error::NoPrivateKey)
}

impl CertInfo {
    /// Reads serial, SANs and `notAfter` of a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<CertInfo> {
        cert_info(der)
    }
}

/// Reads serial, SANs and `notAfter` of a DER certificate.
pub(crate) fn cert_info(der: &[u8]) -> Result<CertInfo> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|e| Error::X509(e.to_string()))?;
    let mut sans = Vec::new();
    if let Ok(Some(ext)) = cert.subject_alternative_name() {
        for name in &ext.value.general_names {
            match name {
                GeneralName::DNSName(d) => sans.push((*d).to_string()),
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes)
                            .ok()
                            .map(|b| std::net::IpAddr::from(b).to_string()),
                        16 => <[u8; 16]>::try_from(*bytes)
                            .ok()
                            .map(|b| std::net::IpAddr::from(b).to_string()),
                        _ => None,
                    };
                    if let Some(ip) = ip {
                        sans.push(ip);
                    }
                }
                _ => {}
            }
        }
    }
    Ok(CertInfo {
        serial: cert.raw_serial_as_string(),
        sans,
        not_after_unix: cert.validity().not_after.timestamp(),
    })
}

/// Builds a server config from PEM material, checking that the key matches the leaf certificate.
pub fn build_server_config(material: &Material) -> Result<Loaded> {
    let provider = crate::provider();
    let chain = parse_certs(&material.cert_pem, "certificate")?;
    let key = parse_key(&material.key_pem)?;
    let leaf = chain.first().ok_or(Error::NoCertificate {
        what: "certificate",
    })?;
    let info = cert_info(leaf.as_ref())?;

    let signing_key = provider.key_provider.load_private_key(key.clone_key())?;
    let certified = CertifiedKey::new(chain.clone(), signing_key);
    match certified.keys_match() {
        Ok(()) => {}
        Err(rustls::Error::InconsistentKeys(_)) => return Err(Error::KeyMismatch),
        Err(e) => return Err(Error::Rustls(e)),
    }

    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &material.client_ca_pem {
        Some(ca_pem) => {
            let mut roots = RootCertStore::empty();
            for ca in parse_certs(ca_pem, "client CA")? {
                roots.add(ca)?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Loaded {
        config: Arc::new(config),
        info,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(sans: &[&str]) -> (String, String) {
        let ck = rcgen::generate_simple_self_signed(
            sans.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        (ck.cert.pem(), ck.signing_key.serialize_pem())
    }

    #[test]
    fn builds_with_alpn_and_reports_sans() {
        let (cert, key) = pair(&["localhost", "127.0.0.1"]);
        let loaded = build_server_config(&Material {
            cert_pem: cert.into_bytes(),
            key_pem: key.into_bytes(),
            client_ca_pem: None,
        })
        .unwrap();
        assert_eq!(
            loaded.config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert_eq!(loaded.info.sans, vec!["localhost", "127.0.0.1"]);
        assert!(loaded.info.not_after_unix > 0);
        assert!(!loaded.info.serial.is_empty());
    }

    #[test]
    fn rejects_a_key_of_another_cert() {
        let (cert, _) = pair(&["a.example"]);
        let (_, other_key) = pair(&["b.example"]);
        let err = build_server_config(&Material {
            cert_pem: cert.into_bytes(),
            key_pem: other_key.into_bytes(),
            client_ca_pem: None,
        })
        .unwrap_err();
        assert!(matches!(err, Error::KeyMismatch), "{err}");
    }

    #[test]
    fn rejects_empty_and_garbage_input() {
        let (cert, key) = pair(&["a.example"]);
        let no_cert = build_server_config(&Material {
            cert_pem: b"not a pem".to_vec(),
            key_pem: key.clone().into_bytes(),
            client_ca_pem: None,
        })
        .unwrap_err();
        assert!(matches!(no_cert, Error::NoCertificate { .. }), "{no_cert}");
        let no_key = build_server_config(&Material {
            cert_pem: cert.clone().into_bytes(),
            key_pem: Vec::new(),
            client_ca_pem: None,
        })
        .unwrap_err();
        assert!(matches!(no_key, Error::NoPrivateKey), "{no_key}");
        let bad_ca = build_server_config(&Material {
            cert_pem: cert.into_bytes(),
            key_pem: key.into_bytes(),
            client_ca_pem: Some(b"garbage".to_vec()),
        })
        .unwrap_err();
        assert!(matches!(bad_ca, Error::NoCertificate { .. }), "{bad_ca}");
    }

    #[test]
    fn client_ca_bundle_builds_and_leaf_stays_first() {
        let (cert, key) = pair(&["a.example"]);
        let (ca, _) = pair(&["ca.example"]);
        let loaded = build_server_config(&Material {
            cert_pem: cert.into_bytes(),
            key_pem: key.into_bytes(),
            client_ca_pem: Some(ca.into_bytes()),
        })
        .unwrap();
        // The served facts are the leaf's, not the CA's; mTLS itself is exercised over real TLS in
        // the server's integration tests.
        assert_eq!(loaded.info.sans, vec!["a.example"]);
    }
}
