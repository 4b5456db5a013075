//! Signing module artifacts the way cosign does (see [`crate::verify`] for the layout), and the
//! private keys publishers hold.
//!
//! Private keys, PEM, by label:
//! - `ENCRYPTED SIGSTORE PRIVATE KEY` (what `cosign generate-key-pair` writes) and its older name
//!   `ENCRYPTED COSIGN PRIVATE KEY`: the body is JSON `{kdf: {name: "scrypt", params: {N, r, p},
//!   salt}, cipher: {name: "nacl/secretbox", nonce}, ciphertext}` (byte fields base64), the key
//!   is scrypt(password, salt, N, r, p) of 32 bytes, and the opened secretbox is the PKCS#8 DER of
//!   the P-256 key. Only the three scrypt parameter sets cosign writes are accepted (N = 2^15,
//!   2^16, 2^17 with r = 8, p = 1), which also bounds the work a hostile key file can ask for.
//! - `PRIVATE KEY` (unencrypted PKCS#8) and `EC PRIVATE KEY` (SEC1).
//!
//! [`generate`] writes a new key pair in cosign's format (scrypt N = 2^16, random 32-byte salt,
//! random 24-byte nonce), so `cosign sign --key` accepts what `opm-operator module
//! generate-key-pair` writes and the other way round.
//!
//! A signature is ECDSA P-256 over the payload bytes with SHA-256, deterministic (RFC 6979),
//! ASN.1 DER, base64 in the layer annotation. [`signature_manifest`] appends the new layer to the
//! signatures already stored for the digest (as cosign does), leaving an identical signature
//! alone.

use base64::Engine as _;
use crypto_secretbox::aead::{Aead as _, KeyInit as _};
use crypto_secretbox::XSalsa20Poly1305;
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _, EncodePublicKey as _};
use serde::{Deserialize, Serialize};

use super::artifact::{self, Descriptor, Manifest};
use super::verify::{self, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};

/// PEM label of cosign's encrypted private key (cosign 2 and later).
pub const SIGSTORE_KEY_LABEL: &str = "ENCRYPTED SIGSTORE PRIVATE KEY";
/// PEM label of cosign 1's encrypted private key.
pub const COSIGN_KEY_LABEL: &str = "ENCRYPTED COSIGN PRIVATE KEY";
/// Config media type of a signature manifest.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// The scrypt parameter sets cosign writes (N, r, p): legacy, standard, OWASP.
const SCRYPT_PARAMS: [(u32, u32, u32); 3] = [(1 << 15, 8, 1), (1 << 16, 8, 1), (1 << 17, 8, 1)];

#[derive(Serialize, Deserialize)]
struct Encrypted {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Serialize, Deserialize)]
struct Kdf {
    name: String,
    params: KdfParams,
    salt: String,
}

#[derive(Serialize, Deserialize)]
struct KdfParams {
    #[serde(rename = "N")]
    n: u32,
    r: u32,
    p: u32,
}

#[derive(Serialize, Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

fn b64(s: &str, what: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("{what} is not base64: {e}"))
}

fn scrypt_key(password: &[u8], salt: &[u8], n: u32, r: u32, p: u32) -> Result<[u8; 32], String> {
    if !SCRYPT_PARAMS.contains(&(n, r, p)) {
        return Err(format!(
            "unsupported scrypt parameters N={n} r={r} p={p} (cosign writes N=2^15..2^17, r=8, p=1)"
        ));
    }
    let log_n = u8::try_from(n.trailing_zeros()).map_err(|e| e.to_string())?;
    let params = scrypt::Params::new(log_n, r, p, 32).map_err(|e| e.to_string())?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password, salt, &params, &mut key).map_err(|e| e.to_string())?;
    Ok(key)
}

/// Reads a private key (module docs); `password` opens an encrypted one.
pub fn private_key(pem: &str, password: &[u8]) -> Result<SigningKey, String> {
    let blocks = verify::pem_blocks(pem)?;
    let (label, der) = blocks
        .into_iter()
        .find(|(l, _)| l.contains("PRIVATE KEY"))
        .ok_or("no PEM private key block")?;
    match label.as_str() {
        SIGSTORE_KEY_LABEL | COSIGN_KEY_LABEL => {
            let e: Encrypted = serde_json::from_slice(&der)
                .map_err(|e| format!("{label}: not cosign's encrypted key JSON: {e}"))?;
            if e.kdf.name != "scrypt" || e.cipher.name != "nacl/secretbox" {
                return Err(format!(
                    "{label}: unsupported kdf {:?} / cipher {:?}",
                    e.kdf.name, e.cipher.name
                ));
            }
            let salt = b64(&e.kdf.salt, "kdf.salt")?;
            let nonce = b64(&e.cipher.nonce, "cipher.nonce")?;
            if nonce.len() != 24 {
                return Err(format!("{label}: the nonce is not 24 bytes"));
            }
            let sealed = b64(&e.ciphertext, "ciphertext")?;
            let key = scrypt_key(password, &salt, e.kdf.params.n, e.kdf.params.r, e.kdf.params.p)?;
            let cipher = XSalsa20Poly1305::new(&key.into());
            let plain = cipher
                .decrypt(crypto_secretbox::Nonce::from_slice(&nonce), sealed.as_slice())
                .map_err(|_| format!("{label}: wrong password (the key does not decrypt)"))?;
            SigningKey::from_pkcs8_der(&plain)
                .map_err(|e| format!("{label}: not a PKCS#8 P-256 key: {e}"))
        }
        "PRIVATE KEY" => SigningKey::from_pkcs8_der(&der)
            .map_err(|e| format!("PRIVATE KEY: not a PKCS#8 P-256 key: {e}")),
        "EC PRIVATE KEY" => p256::SecretKey::from_sec1_der(&der)
            .map(SigningKey::from)
            .map_err(|e| format!("EC PRIVATE KEY: not a SEC1 P-256 key: {e}")),
        other => Err(format!(
            "unsupported private key type {other:?} (want {SIGSTORE_KEY_LABEL}, PRIVATE KEY or EC PRIVATE KEY)"
        )),
    }
}

fn random<const N: usize>() -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).map_err(|e| format!("no randomness: {e}"))?;
    Ok(b)
}

/// The PEM `PUBLIC KEY` of a private key.
pub fn public_key_pem(key: &SigningKey) -> Result<String, String> {
    let der = VerifyingKey::from(key)
        .to_public_key_der()
        .map_err(|e| e.to_string())?;
    Ok(verify::pem_encode("PUBLIC KEY", der.as_bytes()))
}

/// A new P-256 key pair in cosign's format: (`ENCRYPTED SIGSTORE PRIVATE KEY` PEM encrypted
/// with `password`, `PUBLIC KEY` PEM).
pub fn generate(password: &[u8]) -> Result<(String, String), String> {
    let key = loop {
        let bytes: [u8; 32] = random()?;
        if let Ok(k) = SigningKey::from_slice(&bytes) {
            break k;
        }
    };
    Ok((encrypt(&key, password)?, public_key_pem(&key)?))
}

/// `key` as cosign's encrypted PEM (scrypt N = 2^16).
pub fn encrypt(key: &SigningKey, password: &[u8]) -> Result<String, String> {
    let der = key.to_pkcs8_der().map_err(|e| e.to_string())?;
    let salt: [u8; 32] = random()?;
    let nonce: [u8; 24] = random()?;
    let (n, r, p) = SCRYPT_PARAMS[1];
    let k = scrypt_key(password, &salt, n, r, p)?;
    let sealed = XSalsa20Poly1305::new(&k.into())
        .encrypt(crypto_secretbox::Nonce::from_slice(&nonce), der.as_bytes())
        .map_err(|_| "encryption failed".to_string())?;
    let e64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let body = Encrypted {
        kdf: Kdf {
            name: "scrypt".into(),
            params: KdfParams { n, r, p },
            salt: e64(&salt),
        },
        cipher: Cipher {
            name: "nacl/secretbox".into(),
            nonce: e64(&nonce),
        },
        ciphertext: e64(&sealed),
    };
    let json = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    Ok(verify::pem_encode(SIGSTORE_KEY_LABEL, &json))
}

/// The base64 DER signature of `payload`.
pub fn sign_payload(key: &SigningKey, payload: &[u8]) -> String {
    let sig: Signature = key.sign(payload);
    base64::engine::general_purpose::STANDARD.encode(sig.to_der().as_bytes())
}

/// A signature artifact ready to push: blobs (config, payloads) and the manifest.
#[derive(Clone, Debug)]
pub struct SignatureArtifact {
    /// `(descriptor, bytes)` of every blob the manifest names.
    pub blobs: Vec<(Descriptor, Vec<u8>)>,
    /// The serialized manifest.
    pub manifest: Vec<u8>,
    /// `false` when `existing` already held this very signature (nothing to push).
    pub changed: bool,
}

/// The signature manifest for `payload` signed as `signature`, appended to the signature layers
/// of `existing` (the manifest already under the tag and its payload blobs), as cosign does.
pub fn signature_manifest(
    existing: Option<(&[u8], Vec<Vec<u8>>)>,
    payload: &[u8],
    signature: &str,
) -> Result<SignatureArtifact, String> {
    let mut layers: Vec<Descriptor> = Vec::new();
    let mut blobs: Vec<(Descriptor, Vec<u8>)> = Vec::new();
    if let Some((raw, payloads)) = existing {
        let m: Manifest = serde_json::from_slice(raw)
            .map_err(|e| format!("the existing signature manifest does not parse: {e}"))?;
        for (l, b) in m
            .layers
            .into_iter()
            .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
            .zip(payloads)
        {
            blobs.push((l.clone(), b));
            layers.push(l);
        }
    }
    let mut d = Descriptor::of(SIMPLE_SIGNING_MEDIA_TYPE, payload);
    d.annotations = Some([(SIGNATURE_ANNOTATION.to_string(), signature.to_string())].into());
    let changed = !layers.contains(&d);
    if changed {
        layers.push(d.clone());
        blobs.push((d, payload.to_vec()));
    }
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "",
        "os": "",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .map_err(|e| e.to_string())?;
    let config_d = Descriptor::of(CONFIG_MEDIA_TYPE, &config);
    blobs.push((config_d.clone(), config));
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(artifact::MANIFEST_MEDIA_TYPE.to_string()),
        artifact_type: None,
        config: config_d,
        layers,
        annotations: None,
    };
    Ok(SignatureArtifact {
        blobs,
        manifest: serde_json::to_vec(&manifest).map_err(|e| e.to_string())?,
        changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{check, Candidate, TrustedKeys};

    #[test]
    fn a_generated_key_pair_round_trips_and_signs() {
        let (private, public) = generate(b"pw").unwrap();
        assert!(private.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"));
        assert!(private_key(&private, b"wrong")
            .unwrap_err()
            .contains("wrong password"));
        let key = private_key(&private, b"pw").unwrap();
        let keys =
            TrustedKeys::from_pems("test", &[("k.pub".into(), public.into_bytes())]).unwrap();
        let digest = artifact::sha256_digest(b"m");
        let payload = verify::payload("r", &digest, None);
        let sig = sign_payload(&key, &payload);
        let a = signature_manifest(None, &payload, &sig).unwrap();
        let c = verify::candidates(&a.manifest).unwrap();
        let found: Vec<(Candidate, Result<Vec<u8>, String>)> =
            c.into_iter().map(|c| (c, Ok(payload.clone()))).collect();
        assert_eq!(check(&found, &digest, &keys).unwrap(), "k.pub");
        // Appending the same signature again changes nothing.
        let again =
            signature_manifest(Some((&a.manifest, vec![payload.clone()])), &payload, &sig).unwrap();
        assert!(!again.changed);
        assert_eq!(verify::candidates(&again.manifest).unwrap().len(), 1);
    }

    #[test]
    fn unencrypted_pkcs8_and_sec1_keys_are_read() {
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let pkcs8 = key.to_pkcs8_der().unwrap();
        let pem = verify::pem_encode("PRIVATE KEY", pkcs8.as_bytes());
        assert_eq!(private_key(&pem, b"").unwrap(), key);
        let sec1 = p256::SecretKey::from(&key).to_sec1_der().unwrap();
        let pem = verify::pem_encode("EC PRIVATE KEY", &sec1);
        assert_eq!(private_key(&pem, b"").unwrap(), key);
        let pem = verify::pem_encode("RSA PRIVATE KEY", b"x");
        assert!(private_key(&pem, b"").unwrap_err().contains("unsupported"));
    }
}
