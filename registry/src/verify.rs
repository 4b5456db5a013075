//! Cosign key-based signatures of module artifacts: the artifact layout, trusted keys, and the
//! check of one signature artifact against one manifest digest.
//!
//! The layout is cosign's (its `specs/SIGNATURE_SPEC.md`, tag-based discovery, OCI image
//! manifest object type, simple-signing payload, ECDSA P-256):
//! - The signatures of the artifact whose manifest digest is `sha256:<hex>` live in the same
//!   repository under the tag `sha256-<hex>.sig` ([`signature_tag`]): an image manifest whose
//!   layers are the signed payloads, media type [`SIMPLE_SIGNING_MEDIA_TYPE`], each layer
//!   annotated [`SIGNATURE_ANNOTATION`] with the base64 of an ASN.1 DER ECDSA P-256 signature over
//!   the payload bytes (SHA-256). Several layers are several signatures; other layers are ignored.
//! - The payload is simple-signing JSON: `critical.type` must be [`SIGNATURE_TYPE`] and
//!   `critical.image.docker-manifest-digest` (key matched without regard to case, as cosign's Go
//!   decoder does, so the spec's own `Docker-manifest-digest` example reads) must equal the digest
//!   being verified. `critical.identity.docker-reference` is ignored, as the spec says (a module
//!   copied with its signature to another registry or an OCI layout still verifies; the module
//!   path the zip and the module file declare is checked elsewhere against the requested path).
//!   `optional` is free.
//! - A signature verifies when its payload blob matches its descriptor (size and digest), its
//!   signature verifies with at least one trusted key, and its payload names the digest. The
//!   artifact is accepted when at least one signature verifies ([`check`]); otherwise the error
//!   says, per signature, why not.
//! - Bounds: at most [`MAX_SIGNATURES`] signature layers are read, each payload at most
//!   [`MAX_PAYLOAD`] bytes; a larger declaration is refused before anything is read.
//!
//! Trusted keys ([`TrustedKeys`]) are PEM `PUBLIC KEY` blocks (SubjectPublicKeyInfo, P-256), as
//! `cosign generate-key-pair` writes `cosign.pub`. Their fingerprint (sha256 over the sorted DER
//! keys) keys the client's cache of verified digests, so a changed key set verifies again.
//!
//! What is not supported: keyless signatures (Fulcio certificates, Rekor bundles; a certificate
//! annotation is ignored, the key must be one of the trusted keys), other key types (RSA,
//! Ed25519), notation. Signing and private keys are in [`crate::sign`].

use base64::Engine as _;
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::artifact::{self, Descriptor, Manifest};

/// Media type of a simple-signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a cosign signature payload.
pub const SIGNATURE_TYPE: &str = "cosign container image signature";
/// Signature layers read from one signature artifact.
pub const MAX_SIGNATURES: usize = 32;
/// Largest payload read.
pub const MAX_PAYLOAD: u64 = 64 << 10;
/// Largest signature manifest read.
pub const MAX_SIGNATURE_MANIFEST: u64 = 1 << 20;

/// The tag holding the signatures of `digest` (`sha256:<hex>` → `sha256-<hex>.sig`).
pub fn signature_tag(digest: &str) -> Result<String, String> {
    let hex = artifact::digest_hex(digest)?;
    Ok(format!("sha256-{hex}.sig"))
}

/// A set of trusted public keys and where they come from.
#[derive(Clone)]
pub struct TrustedKeys {
    source: String,
    keys: Vec<(String, VerifyingKey)>,
    fingerprint: String,
}

impl std::fmt::Debug for TrustedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKeys")
            .field("source", &self.source)
            .field(
                "keys",
                &self
                    .keys
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl PartialEq for TrustedKeys {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint && self.source == other.source
    }
}

impl Eq for TrustedKeys {}

impl TrustedKeys {
    /// Keys from `(name, PEM text)` pairs (every `PUBLIC KEY` block of each); `source` names
    /// where they come from in messages (`Secret opm-system/cosign-keys`). No key at all, a
    /// block that is not a P-256 public key, or text without a PEM block is an error naming the
    /// entry.
    pub fn from_pems(source: &str, entries: &[(String, Vec<u8>)]) -> Result<TrustedKeys, String> {
        let mut keys = Vec::new();
        for (name, text) in entries {
            let text = std::str::from_utf8(text).map_err(|_| format!("{name}: not PEM text"))?;
            let blocks = pem_blocks(text).map_err(|e| format!("{name}: {e}"))?;
            let mut found = false;
            for (label, der) in blocks {
                if label != "PUBLIC KEY" {
                    continue;
                }
                let key = VerifyingKey::from_public_key_der(&der)
                    .map_err(|e| format!("{name}: not an ECDSA P-256 public key: {e}"))?;
                keys.push((name.clone(), key));
                found = true;
            }
            if !found {
                return Err(format!("{name}: no PEM \"PUBLIC KEY\" block"));
            }
        }
        if keys.is_empty() {
            return Err(format!("{source} holds no public key"));
        }
        let mut ders: Vec<Vec<u8>> = keys
            .iter()
            .filter_map(|(_, k)| k.to_public_key_der().ok().map(|d| d.as_bytes().to_vec()))
            .collect();
        ders.sort();
        ders.dedup();
        let mut h = Sha256::new();
        for d in &ders {
            h.update((d.len() as u64).to_be_bytes());
            h.update(d);
        }
        Ok(TrustedKeys {
            source: source.to_string(),
            keys,
            fingerprint: hex::encode(h.finalize()),
        })
    }

    /// Where the keys come from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// sha256 (hex) over the sorted DER keys: equal for equal key sets.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Never true for a built set (construction refuses an empty one).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The name of the first key `signature` over `payload` verifies with.
    fn verifies(&self, payload: &[u8], signature: &Signature) -> Option<&str> {
        self.keys
            .iter()
            .find(|(_, k)| k.verify(payload, signature).is_ok())
            .map(|(n, _)| n.as_str())
    }
}

/// One signature layer of a signature artifact: its descriptor and base64 signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The payload's descriptor.
    pub payload: Descriptor,
    /// The annotation's value.
    pub signature: String,
}

/// The signature layers of a signature manifest (module docs), payload sizes checked against
/// [`MAX_PAYLOAD`]. A manifest with none is an error (it signs nothing).
pub fn candidates(raw: &[u8]) -> Result<Vec<Candidate>, String> {
    let m: Manifest = serde_json::from_slice(raw)
        .map_err(|e| format!("the signature manifest is not an image manifest: {e}"))?;
    let mut out = Vec::new();
    for l in m.layers {
        if l.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
            continue;
        }
        let Some(sig) = l
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
            .cloned()
        else {
            continue;
        };
        artifact::digest_hex(&l.digest)?;
        if u64::try_from(l.size).map_or(true, |s| s > MAX_PAYLOAD) {
            return Err(format!(
                "signature payload {} declares {} bytes, over the limit of {MAX_PAYLOAD}",
                l.digest, l.size
            ));
        }
        out.push(Candidate {
            payload: l,
            signature: sig,
        });
        if out.len() == MAX_SIGNATURES {
            break;
        }
    }
    if out.is_empty() {
        return Err("the signature artifact holds no simple-signing signature layer".into());
    }
    Ok(out)
}

/// Checks the signatures `found` (each candidate with its payload bytes, or why they could not
/// be read) for `digest` against `keys`: `Ok(key name)` for the first that verifies, else every
/// signature's reason, joined.
pub fn check(
    found: &[(Candidate, Result<Vec<u8>, String>)],
    digest: &str,
    keys: &TrustedKeys,
) -> Result<String, String> {
    let mut reasons = Vec::new();
    for (i, (c, payload)) in found.iter().enumerate() {
        match check_one(c, payload, digest, keys) {
            Ok(name) => return Ok(name.to_string()),
            Err(why) => reasons.push(format!("signature {}: {why}", i + 1)),
        }
    }
    Err(format!(
        "no signature of manifest {digest} verifies with the keys of {} ({})",
        keys.source,
        reasons.join("; ")
    ))
}

fn check_one<'k>(
    c: &Candidate,
    payload: &Result<Vec<u8>, String>,
    digest: &str,
    keys: &'k TrustedKeys,
) -> Result<&'k str, String> {
    let payload = payload.as_ref().map_err(Clone::clone)?;
    artifact::verify(&c.payload, payload, "payload")?;
    let der = base64::engine::general_purpose::STANDARD
        .decode(c.signature.trim())
        .map_err(|e| format!("the signature is not base64: {e}"))?;
    let sig = Signature::from_der(&der)
        .map_err(|_| "the signature is not an ASN.1 DER ECDSA P-256 signature".to_string())?;
    let name = keys
        .verifies(payload, &sig)
        .ok_or_else(|| "not made by any trusted key (or the payload was altered)".to_string())?;
    let named = payload_digest(payload)?;
    if named != digest {
        return Err(format!(
            "it signs manifest {named}, not {digest} (a signature of other content)"
        ));
    }
    Ok(name)
}

/// `critical.image.docker-manifest-digest` of a simple-signing payload, after checking
/// `critical.type`.
pub fn payload_digest(payload: &[u8]) -> Result<String, String> {
    let v: Value = serde_json::from_slice(payload)
        .map_err(|e| format!("the payload is not simple-signing JSON: {e}"))?;
    let critical = v
        .get("critical")
        .and_then(Value::as_object)
        .ok_or("the payload has no critical section")?;
    let ty = critical.get("type").and_then(Value::as_str).unwrap_or("");
    if ty != SIGNATURE_TYPE {
        return Err(format!(
            "the payload's critical.type is {ty:?}, not {SIGNATURE_TYPE:?}"
        ));
    }
    critical
        .get("image")
        .and_then(Value::as_object)
        .and_then(|image| {
            image
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("docker-manifest-digest"))
        })
        .and_then(|(_, v)| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| "the payload names no critical.image.docker-manifest-digest".to_string())
}

/// The simple-signing payload cosign signs for `digest` of `reference` (`host/repository`, or
/// the repository of a layout), with `optional` claims.
pub fn payload(reference: &str, digest: &str, optional: Option<Value>) -> Vec<u8> {
    let v = serde_json::json!({
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest},
            "type": SIGNATURE_TYPE,
        },
        "optional": optional,
    });
    serde_json::to_vec(&v).unwrap_or_default()
}

/// The PEM blocks of `text`: `(label, DER)`. Text outside blocks is ignored; a block without its
/// end line or with a body that is not base64 is an error.
pub fn pem_blocks(text: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(label) = line
            .trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for l in lines.by_ref() {
            let l = l.trim();
            if l == end {
                closed = true;
                break;
            }
            // RFC 1421 headers (`Proc-Type: ...`) are not part of the body.
            if l.contains(':') {
                continue;
            }
            body.push_str(l);
        }
        if !closed {
            return Err(format!("PEM block {label:?} has no end line"));
        }
        let der = base64::engine::general_purpose::STANDARD
            .decode(body.as_bytes())
            .map_err(|e| format!("PEM block {label:?} is not base64: {e}"))?;
        out.push((label.to_string(), der));
    }
    Ok(out)
}

/// A PEM block of `der` under `label`, lines of 64 characters.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut s = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        s.push_str(&String::from_utf8_lossy(chunk));
        s.push('\n');
    }
    s.push_str(&format!("-----END {label}-----\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_tag_follows_the_digest() {
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            signature_tag(&d).unwrap(),
            format!("sha256-{}.sig", "ab".repeat(32))
        );
        assert!(signature_tag("md5:00").is_err());
    }

    #[test]
    fn the_payload_digest_key_is_matched_without_case() {
        let p = br#"{"critical":{"identity":{"docker-reference":"x"},"image":{"Docker-manifest-digest":"sha256:1"},"type":"cosign container image signature"}}"#;
        assert_eq!(payload_digest(p).unwrap(), "sha256:1");
        let wrong =
            br#"{"critical":{"image":{"docker-manifest-digest":"sha256:1"},"type":"other"}}"#;
        assert!(payload_digest(wrong).unwrap_err().contains("critical.type"));
    }

    #[test]
    fn a_key_set_needs_a_public_key() {
        let e = TrustedKeys::from_pems("Secret a/b", &[("x.pub".into(), b"hello".to_vec())])
            .unwrap_err();
        assert!(e.contains("x.pub: no PEM"), "{e}");
        let e = TrustedKeys::from_pems("Secret a/b", &[]).unwrap_err();
        assert!(e.contains("holds no public key"), "{e}");
    }
}
