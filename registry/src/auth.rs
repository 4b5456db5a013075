//! Registry credentials from a docker config file.
//!
//! Rules implemented:
//! - The file is `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`; a missing file
//!   means anonymous access everywhere.
//! - `auths.<host>.auth` is base64 of `user:password`; `auths.<host>.username` + `password` are
//!   accepted too, and `identitytoken` is sent as a bearer token. Keys may be written as
//!   `host[:port]`, `https://host[:port]`, or with a path (`https://index.docker.io/v1/`): only the
//!   host part is compared.
//! - Credential helpers (`credsStore`, `credHelpers`) are NOT supported: hosts that only have a
//!   helper are accessed anonymously, and a warning says so once when the file is read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;

/// Credentials per registry host.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    by_host: HashMap<String, RegistryAuth>,
}

impl Credentials {
    /// No credentials: anonymous access everywhere.
    pub fn anonymous() -> Credentials {
        Credentials::default()
    }

    /// The default config file location, if any.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
            return Some(PathBuf::from(dir).join("config.json"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker").join("config.json"))
    }

    /// Reads a docker config file; a missing file gives anonymous credentials.
    pub fn from_file(path: &Path) -> Result<Credentials, String> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Credentials::anonymous())
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Self::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses docker config JSON.
    pub fn parse(bytes: &[u8]) -> Result<Credentials, String> {
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
        if v.get("credsStore").is_some() || v.get("credHelpers").is_some() {
            tracing::warn!(
                "docker config uses credential helpers (credsStore/credHelpers), which are not supported; only `auths` entries are used"
            );
        }
        let mut by_host = HashMap::new();
        if let Some(auths) = v.get("auths").and_then(|a| a.as_object()) {
            for (key, entry) in auths {
                let host = normalize_host(key);
                if let Some(token) = entry.get("identitytoken").and_then(|t| t.as_str()) {
                    if !token.is_empty() {
                        by_host.insert(host, RegistryAuth::Bearer(token.to_string()));
                        continue;
                    }
                }
                if let Some(auth) = entry.get("auth").and_then(|a| a.as_str()) {
                    if auth.is_empty() {
                        continue;
                    }
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|_| format!("auths.{key}.auth is not base64"))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| format!("auths.{key}.auth is not UTF-8"))?;
                    let (user, pass) = text
                        .split_once(':')
                        .ok_or_else(|| format!("auths.{key}.auth is not user:password"))?;
                    by_host.insert(host, RegistryAuth::Basic(user.into(), pass.into()));
                    continue;
                }
                if let (Some(u), Some(p)) = (
                    entry.get("username").and_then(|u| u.as_str()),
                    entry.get("password").and_then(|p| p.as_str()),
                ) {
                    by_host.insert(host, RegistryAuth::Basic(u.into(), p.into()));
                }
            }
        }
        Ok(Credentials { by_host })
    }

    /// The credentials for `host` (`host[:port]`), anonymous when none are configured.
    pub fn for_host(&self, host: &str) -> RegistryAuth {
        self.by_host
            .get(host)
            .cloned()
            .unwrap_or(RegistryAuth::Anonymous)
    }
}

fn normalize_host(key: &str) -> String {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_auths_in_all_spellings() {
        let cfg = br#"{
            "auths": {
                "127.0.0.1:5000": {"auth": "dXNlcjpwYXNz"},
                "https://ghcr.io/v2/": {"username": "u2", "password": "p2"},
                "tok.example": {"identitytoken": "abc"}
            },
            "credsStore": "desktop"
        }"#;
        let c = Credentials::parse(cfg).unwrap();
        assert_eq!(
            c.for_host("127.0.0.1:5000"),
            RegistryAuth::Basic("user".into(), "pass".into())
        );
        assert_eq!(
            c.for_host("ghcr.io"),
            RegistryAuth::Basic("u2".into(), "p2".into())
        );
        assert_eq!(
            c.for_host("tok.example"),
            RegistryAuth::Bearer("abc".into())
        );
        assert_eq!(c.for_host("other.example"), RegistryAuth::Anonymous);
    }

    #[test]
    fn missing_file_is_anonymous_and_bad_auth_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let c = Credentials::from_file(&d.path().join("config.json")).unwrap();
        assert_eq!(c.for_host("x"), RegistryAuth::Anonymous);
        assert!(Credentials::parse(br#"{"auths":{"h":{"auth":"!!"}}}"#).is_err());
    }
}
