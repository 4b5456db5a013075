//! Issue 41 item 3: signed modules at the registry-client level, against the real distribution
//! registry and an OCI layout.
//!
//! The compatibility test builds the signature artifact BY HAND from cosign's
//! `specs/SIGNATURE_SPEC.md` (tag-based discovery `sha256-<hex>.sig`, an OCI image manifest whose
//! layer is the simple-signing payload with media type
//! `application/vnd.dev.cosign.simplesigning.v1+json`, the base64 ECDSA-P256/SHA-256 signature in
//! the layer annotation `dev.cosignproject.cosign/signature`, the payload as the spec's example
//! with its `Docker-manifest-digest` spelling), and the private key as cosign writes it
//! (`ENCRYPTED SIGSTORE PRIVATE KEY`: go-securesystemslib's `encrypted` JSON, scrypt N=2^16 r=8 p=1
//! and nacl/secretbox over the PKCS#8 key), with RustCrypto directly, never with our signer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use base64::Engine as _;
use crypto_secretbox::aead::{Aead as _, KeyInit as _};
use cue::module::{ModuleVersion, RegistryError};
use opm_operator::registry::artifact::{self, Descriptor};
use opm_operator::registry::{sign, TrustedKeys};
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _};

use super::harness::{fixtures, manifest, publish_fixtures, DistRegistry, RawPush};

const PASSWORD: &[u8] = b"correct horse";

fn schema() -> ModuleVersion {
    ModuleVersion {
        path: "fixtures.test/schema@v0".into(),
        version: "v0.1.0".into(),
    }
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = b64(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// A P-256 key pair with the private key in cosign's encrypted PEM, built by hand.
struct CosignKey {
    signing: SigningKey,
    private_pem: String,
    public_pem: String,
}

fn cosign_key(seed: u8) -> CosignKey {
    let signing = SigningKey::from_slice(&[seed; 32]).unwrap();
    let pkcs8 = signing.to_pkcs8_der().unwrap();
    let salt = [seed ^ 0x5a; 32];
    let nonce = [seed ^ 0xa5; 24];
    let mut key = [0u8; 32];
    scrypt::scrypt(
        PASSWORD,
        &salt,
        &scrypt::Params::new(16, 8, 1, 32).unwrap(),
        &mut key,
    )
    .unwrap();
    let sealed = crypto_secretbox::XSalsa20Poly1305::new(&key.into())
        .encrypt(&nonce.into(), pkcs8.as_bytes())
        .unwrap();
    let json = format!(
        r#"{{"kdf":{{"name":"scrypt","params":{{"N":65536,"r":8,"p":1}},"salt":"{}"}},"cipher":{{"name":"nacl/secretbox","nonce":"{}"}},"ciphertext":"{}"}}"#,
        b64(&salt),
        b64(&nonce),
        b64(&sealed)
    );
    let public = VerifyingKey::from(&signing).to_public_key_der().unwrap();
    CosignKey {
        signing,
        private_pem: pem("ENCRYPTED SIGSTORE PRIVATE KEY", json.as_bytes()),
        public_pem: pem("PUBLIC KEY", public.as_bytes()),
    }
}

fn trusted(k: &CosignKey) -> Arc<TrustedKeys> {
    Arc::new(
        TrustedKeys::from_pems(
            "Secret test/cosign",
            &[("cosign.pub".into(), k.public_pem.clone().into_bytes())],
        )
        .unwrap(),
    )
}

/// The spec's simple-signing payload for `digest` (its example's spelling and optional claims).
fn spec_payload(reference: &str, digest: &str) -> Vec<u8> {
    format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{reference}"}},"image":{{"Docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":{{"creator":"atomic","timestamp":1458239713}}}}"#
    )
    .into_bytes()
}

/// Pushes, under `sha256-<hex>.sig` of `repo`, the spec's OCI image manifest with one layer per
/// `(payload, base64 signature)`.
fn push_signatures(raw: &RawPush, repo: &str, digest: &str, sigs: &[(Vec<u8>, String)]) {
    let config =
        br#"{"architecture":"","os":"","config":{},"rootfs":{"type":"layers","diff_ids":[]}}"#;
    let mut blobs = vec![config.to_vec()];
    let mut layers = Vec::new();
    for (payload, sig) in sigs {
        let mut d = Descriptor::of("application/vnd.dev.cosign.simplesigning.v1+json", payload);
        d.annotations = Some(
            [(
                "dev.cosignproject.cosign/signature".to_string(),
                sig.clone(),
            )]
            .into(),
        );
        layers.push(d);
        blobs.push(payload.clone());
    }
    let m = manifest(
        Descriptor::of("application/vnd.oci.image.config.v1+json", config),
        layers,
    );
    let tag = format!("sha256-{}.sig", artifact::digest_hex(digest).unwrap());
    raw.push(repo, &tag, &blobs, &m);
}

fn signed_by_hand(key: &SigningKey, payload: &[u8]) -> String {
    let sig: Signature = key.sign(payload);
    b64(sig.to_der().as_bytes())
}

fn refused(e: RegistryError, want: &str) {
    match e {
        RegistryError::Unverified { module, message } => {
            assert_eq!(module, "fixtures.test/schema@v0.1.0");
            assert!(message.contains(want), "{message}");
        }
        other => panic!("not a verification failure: {other}"),
    }
}

#[test]
fn a_signature_laid_out_as_cosigns_spec_verifies_and_unsigned_wrong_key_or_tampered_do_not() {
    let reg = DistRegistry::start();
    publish_fixtures(&["--registry", &reg.mapping()]);
    let raw = RawPush::new(&reg.host);
    let repo = "fixtures.test/schema";
    let published = raw.manifest(repo, "v0.1.0");
    let digest = artifact::sha256_digest(&published);
    let reference = format!("{}/{repo}", reg.host);
    let a = cosign_key(1);
    let b = cosign_key(2);
    // Our key reader opens cosign's encrypted key.
    let read = sign::private_key(&a.private_pem, PASSWORD).unwrap();
    assert_eq!(read, a.signing);

    // Unsigned.
    let e = reg
        .client(None)
        .fetch_module_verified(&schema(), &trusted(&a));
    refused(e.unwrap_err(), "is not signed");

    // Signed with another key only.
    let payload = spec_payload(&reference, &digest);
    push_signatures(
        &raw,
        repo,
        &digest,
        &[(payload.clone(), signed_by_hand(&b.signing, &payload))],
    );
    let e = reg
        .client(None)
        .fetch_module_verified(&schema(), &trusted(&a));
    refused(e.unwrap_err(), "not made by any trusted key");

    // Tampered payload: signed by A, then edited (its descriptor follows the edit).
    let sig = signed_by_hand(&read, &payload);
    let edited = String::from_utf8(payload.clone())
        .unwrap()
        .replace("atomic", "mallory")
        .into_bytes();
    push_signatures(&raw, repo, &digest, &[(edited, sig.clone())]);
    let e = reg
        .client(None)
        .fetch_module_verified(&schema(), &trusted(&a));
    refused(e.unwrap_err(), "not made by any trusted key");

    // Valid: B's signature and A's, as two layers.
    push_signatures(
        &raw,
        repo,
        &digest,
        &[
            (payload.clone(), signed_by_hand(&b.signing, &payload)),
            (payload.clone(), sig.clone()),
        ],
    );
    let client = reg.client(None);
    let f = client
        .fetch_module_verified(&schema(), &trusted(&a))
        .unwrap();
    assert_eq!(f.meta.manifest_digest, digest);
    assert_eq!(
        f.files
            .iter()
            .find(|(p, _)| p == "schema.cue")
            .map(|(_, b)| b.clone()),
        Some(std::fs::read(fixtures().join("schema/schema.cue")).unwrap())
    );
    // Either key of a set may have signed.
    client
        .fetch_module_verified(&schema(), &trusted(&b))
        .unwrap();
    // The wrong key: a set holding neither.
    let c = cosign_key(3);
    let e = reg
        .client(None)
        .fetch_module_verified(&schema(), &trusted(&c));
    refused(e.unwrap_err(), "not made by any trusted key");

    // Tampered layer: the tag now names a manifest whose zip layer changed (garbage: were the
    // layers read before the signature check, this would be a zip error, not a refusal).
    let mut m: artifact::Manifest = serde_json::from_slice(&published).unwrap();
    let junk = b"not the module zip".to_vec();
    m.layers[0] = Descriptor::of(artifact::ZIP_MEDIA_TYPE, &junk);
    let module_file = raw.blob(repo, &m.layers[1]);
    raw.push(
        repo,
        "v0.1.0",
        &[artifact::CONFIG_BLOB.to_vec(), junk, module_file],
        &m,
    );
    let moved = artifact::sha256_digest(&serde_json::to_vec(&m).unwrap());
    assert_ne!(moved, digest);
    let e = reg
        .client(None)
        .fetch_module_verified(&schema(), &trusted(&a));
    refused(e.unwrap_err(), "is not signed");
    // ... and with the old signature replayed under the new digest's tag.
    push_signatures(&raw, repo, &moved, &[(payload.clone(), sig)]);
    let e = reg
        .client(None)
        .fetch_module_verified(&schema(), &trusted(&a));
    refused(
        e.unwrap_err(),
        &format!("it signs manifest {digest}, not {moved}"),
    );
    // A client that verified the old digest earlier does not re-read the moved tag: its memo
    // holds the verified content.
    let again = client
        .fetch_module_verified(&schema(), &trusted(&a))
        .unwrap();
    assert_eq!(again.meta.manifest_digest, digest);
}

#[test]
fn the_registry_wide_policy_covers_every_fetch_and_module_file() {
    let reg = DistRegistry::start();
    publish_fixtures(&["--registry", &reg.mapping()]);
    let a = cosign_key(4);
    let client = reg.client(None);
    client.require(Some(trusted(&a)));
    let app = ModuleVersion {
        path: "fixtures.test/app@v0".into(),
        version: "v0.1.0".into(),
    };
    assert!(matches!(
        client.module_file(&app),
        Err(RegistryError::Unverified { .. })
    ));
    assert!(matches!(
        client.fetch_module(&app),
        Err(RegistryError::Unverified { .. })
    ));
    // Our signer (the `module sign` path) against the registry, then the policy is satisfied.
    let key = sign::private_key(&a.private_pem, PASSWORD).unwrap();
    let publisher = reg.client(None);
    let s = publisher.sign_module(&app, &key).unwrap();
    assert!(s.created);
    assert!(!publisher.sign_module(&app, &key).unwrap().created);
    client.module_file(&app).unwrap();
    client.fetch_module(&app).unwrap();
    client.require(None);
    client.fetch_module(&schema()).unwrap();
}

/// Runs the CLI with `COSIGN_PASSWORD`; returns (success, stdout + stderr).
fn cli_pw(args: &[&str], home: &Path) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(args)
        .env("DOCKER_CONFIG", home)
        .env("COSIGN_PASSWORD", std::str::from_utf8(PASSWORD).unwrap())
        .env_remove("CUE_REGISTRY")
        .env("OPM_CACHE_DIR", home.join("cache"))
        .output()
        .unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn layouts_hold_signatures_and_the_cli_signs_and_verifies() {
    let d = tempfile::tempdir().unwrap();
    let layout = d.path().join("layout");
    let home = d.path();
    let l = layout.to_str().unwrap();
    publish_fixtures(&["--layout", l]);
    let prefix = d.path().join("mine");
    let (ok, out) = cli_pw(
        &[
            "module",
            "generate-key-pair",
            "--output-key-prefix",
            prefix.to_str().unwrap(),
        ],
        home,
    );
    assert!(ok, "{out}");
    let (key, public) = (d.path().join("mine.key"), d.path().join("mine.pub"));
    let coord = "fixtures.test/schema@v0.1.0";
    let verify = |pubkey: &Path| {
        cli_pw(
            &[
                "module",
                "verify",
                coord,
                "--key",
                pubkey.to_str().unwrap(),
                "--layout",
                l,
            ],
            home,
        )
    };
    let (ok, out) = verify(&public);
    assert!(!ok && out.contains("is not signed"), "{out}");
    let sign_with = |k: &Path| {
        cli_pw(
            &[
                "module",
                "sign",
                coord,
                "--key",
                k.to_str().unwrap(),
                "--layout",
                l,
            ],
            home,
        )
    };
    let (ok, out) = sign_with(&key);
    assert!(
        ok && out.starts_with("signed fixtures.test/schema@v0.1.0"),
        "{out}"
    );
    let (ok, out) = sign_with(&key);
    assert!(ok && out.starts_with("unchanged"), "{out}");
    let (ok, out) = verify(&public);
    assert!(
        ok && out.starts_with("verified fixtures.test/schema@v0.1.0"),
        "{out}"
    );
    // A key written by hand in cosign's format signs too; its public key verifies.
    let cosign = cosign_key(5);
    let other_key = d.path().join("cosign.key");
    let other_pub = d.path().join("cosign.pub");
    std::fs::write(&other_pub, &cosign.public_pem).unwrap();
    let (ok, out) = verify(&other_pub);
    assert!(!ok && out.contains("not made by any trusted key"), "{out}");
    std::fs::write(&other_key, &cosign.private_pem).unwrap();
    let (ok, out) = sign_with(&other_key);
    assert!(ok, "{out}");
    for p in [&public, &other_pub] {
        let (ok, out) = verify(p);
        assert!(ok, "{out}");
    }
    // The signature tag is not a version.
    let (ok, out) = cli_pw(
        &[
            "module",
            "versions",
            "fixtures.test/schema@v0",
            "--layout",
            l,
        ],
        home,
    );
    assert!(ok && out.trim() == "v0.1.0", "{out}");
}
