//! `opm-operator module sign|verify|generate-key-pair`: cosign key-based signatures for
//! publishers (the layout and the key formats are `opm_registry::verify` and
//! `opm_registry::sign`).
//!
//! Rules:
//! - `sign` signs the manifest digest the version's tag names now, after checking the artifact
//!   as a fetch would (nothing that a fetch refuses is signed), and adds the signature to those
//!   already stored under `sha256-<hex>.sig`; signing twice with the same key changes nothing.
//! - The password of an encrypted key is `COSIGN_PASSWORD` (empty when unset), as with cosign;
//!   there is no interactive prompt.
//! - `verify` succeeds when one signature verifies with one of the `--key` public keys and the
//!   module passes every fetch check; it fails naming the module and why.
//! - `generate-key-pair` refuses to overwrite an existing file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::out;
use crate::registry::client::ModuleRegistry;
use crate::registry::verify::TrustedKeys;
use crate::registry::{sign as signing, Error};

fn password() -> Vec<u8> {
    std::env::var_os("COSIGN_PASSWORD")
        .map(|p| p.into_encoded_bytes())
        .unwrap_or_default()
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

fn coordinate(text: &str) -> Result<cue::module::ModuleVersion, Error> {
    cue::module::parse_coordinate(text).map_err(|e| Error::Usage(e.to_string()))
}

/// `module sign`.
pub fn sign(coordinate_text: &str, key: &Path, reg: &ModuleRegistry) -> Result<(), Error> {
    let m = coordinate(coordinate_text)?;
    let pem = String::from_utf8(read(key)?)
        .map_err(|_| Error::Usage(format!("{}: not PEM text", key.display())))?;
    let key = signing::private_key(&pem, &password())
        .map_err(|e| Error::Usage(format!("{}: {e}", key.display())))?;
    let s = reg.sign_module(&m, &key)?;
    out(&format!(
        "{} {} {} {}",
        if s.created { "signed" } else { "unchanged" },
        s.module,
        s.manifest_digest,
        s.signature_tag
    ))
}

/// `module verify`.
pub fn verify(coordinate_text: &str, keys: &[PathBuf], reg: &ModuleRegistry) -> Result<(), Error> {
    let m = coordinate(coordinate_text)?;
    let entries = keys
        .iter()
        .map(|p| Ok((p.display().to_string(), read(p)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let shown: Vec<String> = keys.iter().map(|p| p.display().to_string()).collect();
    let trusted = TrustedKeys::from_pems(&shown.join(", "), &entries).map_err(Error::Usage)?;
    let v = reg.verify_module(&m, &Arc::new(trusted))?;
    out(&format!(
        "verified {} {} ({})",
        v.module, v.manifest_digest, v.signature_tag
    ))
}

/// `module generate-key-pair`.
pub fn generate_key_pair(prefix: &Path) -> Result<(), Error> {
    let with = |ext: &str| {
        let mut s = prefix.as_os_str().to_owned();
        s.push(ext);
        PathBuf::from(s)
    };
    let (private, public) = (with(".key"), with(".pub"));
    for p in [&private, &public] {
        if p.exists() {
            return Err(Error::Usage(format!(
                "{} exists; refusing to overwrite it",
                p.display()
            )));
        }
    }
    let (key, pubkey) = signing::generate(&password()).map_err(Error::Usage)?;
    for (p, text) in [(&private, key), (&public, pubkey)] {
        std::fs::write(p, text).map_err(|e| Error::Io {
            path: p.clone(),
            source: e,
        })?;
    }
    out(&format!(
        "wrote {} and {}",
        private.display(),
        public.display()
    ))
}
