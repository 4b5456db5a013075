//! The OCI artifact of a CUE module, exactly as CUE publishes it (docs/design/render.md §2.2).
//!
//! Rules implemented:
//! - The manifest is an OCI image manifest (`schemaVersion: 2`; `mediaType`, when present,
//!   `application/vnd.oci.image.manifest.v1+json`).
//! - `config.mediaType` is `application/vnd.cue.module.v1+json` (a top-level `artifactType` of the
//!   same value is accepted too); the config blob CUE pushes is the two bytes `{}`.
//! - There are exactly two layers: layer 0 has media type `application/zip` (the module zip), layer
//!   1 carries `application/vnd.cue.modulefile.v1` in `mediaType` or `artifactType` (the raw
//!   `cue.mod/module.cue`).
//! - Digests are `sha256:<64 lowercase hex>`; every blob read is checked against its descriptor's
//!   digest and size before use. Other algorithms are refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Media type of an OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Config media type that marks a CUE module.
pub const MODULE_CONFIG_MEDIA_TYPE: &str = "application/vnd.cue.module.v1+json";
/// Media type of layer 0.
pub const ZIP_MEDIA_TYPE: &str = "application/zip";
/// Media type of layer 1.
pub const MODULE_FILE_MEDIA_TYPE: &str = "application/vnd.cue.modulefile.v1";
/// The config blob CUE pushes.
pub const CONFIG_BLOB: &[u8] = b"{}";

/// An OCI content descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the content.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: i64,
    /// Optional artifact type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// Optional annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    /// The descriptor of `data` with `media_type`.
    pub fn of(media_type: &str, data: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_string(),
            digest: sha256_digest(data),
            size: i64::try_from(data.len()).unwrap_or(i64::MAX),
            artifact_type: None,
            annotations: None,
        }
    }
}

/// An OCI image manifest (the fields this client reads or writes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: i64,
    /// Manifest media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Optional artifact type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config descriptor.
    pub config: Descriptor,
    /// The layers.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// Optional annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// A manifest that passed the CUE-module checks.
#[derive(Clone, Debug)]
pub struct ModuleManifest {
    /// Layer 0.
    pub zip: Descriptor,
    /// Layer 1.
    pub module_file: Descriptor,
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Checks a digest's syntax and returns its hex part.
pub fn digest_hex(digest: &str) -> Result<&str, String> {
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| format!("unsupported digest {digest:?} (only sha256 is accepted)"))?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!("malformed digest {digest:?}"));
    }
    Ok(hex)
}

/// Checks `data` against its descriptor: size and sha256 digest.
pub fn verify(desc: &Descriptor, data: &[u8], what: &str) -> Result<(), String> {
    digest_hex(&desc.digest)?;
    if i64::try_from(data.len()).ok() != Some(desc.size) {
        return Err(format!(
            "{what} size mismatch: descriptor says {} bytes, got {}",
            desc.size,
            data.len()
        ));
    }
    let actual = sha256_digest(data);
    if actual != desc.digest {
        return Err(format!(
            "{what} digest mismatch: expected {}, got {actual}",
            desc.digest
        ));
    }
    Ok(())
}

/// Parses and checks a manifest as a CUE module artifact.
pub fn check_manifest(raw: &[u8]) -> Result<ModuleManifest, String> {
    let m: Manifest =
        serde_json::from_slice(raw).map_err(|e| format!("manifest is not valid JSON: {e}"))?;
    if m.schema_version != 2 {
        return Err(format!(
            "manifest schemaVersion is {}, expected 2",
            m.schema_version
        ));
    }
    if let Some(mt) = &m.media_type {
        if mt != MANIFEST_MEDIA_TYPE {
            return Err(format!(
                "manifest media type is {mt:?}, expected {MANIFEST_MEDIA_TYPE:?}"
            ));
        }
    }
    let is_module = m.config.media_type == MODULE_CONFIG_MEDIA_TYPE
        || m.artifact_type.as_deref() == Some(MODULE_CONFIG_MEDIA_TYPE);
    if !is_module {
        return Err(format!(
            "not a CUE module: config media type is {:?}, expected {MODULE_CONFIG_MEDIA_TYPE:?}",
            m.config.media_type
        ));
    }
    if m.layers.len() != 2 {
        return Err(format!(
            "a CUE module has exactly 2 layers (zip, module file), this manifest has {}",
            m.layers.len()
        ));
    }
    let zip = m.layers[0].clone();
    let module_file = m.layers[1].clone();
    if zip.media_type != ZIP_MEDIA_TYPE {
        return Err(format!(
            "layer 0 media type is {:?}, expected {ZIP_MEDIA_TYPE:?}",
            zip.media_type
        ));
    }
    if module_file.media_type != MODULE_FILE_MEDIA_TYPE
        && module_file.artifact_type.as_deref() != Some(MODULE_FILE_MEDIA_TYPE)
    {
        return Err(format!(
            "layer 1 media type is {:?}, expected {MODULE_FILE_MEDIA_TYPE:?}",
            module_file.media_type
        ));
    }
    for (d, what) in [(&zip, "layer 0"), (&module_file, "layer 1")] {
        digest_hex(&d.digest).map_err(|e| format!("{what}: {e}"))?;
        if d.size < 0 {
            return Err(format!("{what}: negative size"));
        }
    }
    Ok(ModuleManifest { zip, module_file })
}

/// The blobs and manifest of a module artifact, ready to push.
#[derive(Clone, Debug)]
pub struct BuiltArtifact {
    /// `(descriptor, bytes)` for the config, the zip and the module file.
    pub blobs: Vec<(Descriptor, Vec<u8>)>,
    /// The serialized manifest.
    pub manifest: Vec<u8>,
    /// Its digest.
    pub manifest_digest: String,
}

/// Builds the artifact CUE would push for a module zip and its module file.
pub fn build(zip: Vec<u8>, module_file: Vec<u8>) -> Result<BuiltArtifact, String> {
    let config = Descriptor::of(MODULE_CONFIG_MEDIA_TYPE, CONFIG_BLOB);
    let zip_d = Descriptor::of(ZIP_MEDIA_TYPE, &zip);
    let mf_d = Descriptor::of(MODULE_FILE_MEDIA_TYPE, &module_file);
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_string()),
        artifact_type: None,
        config: config.clone(),
        layers: vec![zip_d.clone(), mf_d.clone()],
        annotations: None,
    };
    let bytes = serde_json::to_vec(&manifest).map_err(|e| e.to_string())?;
    Ok(BuiltArtifact {
        manifest_digest: sha256_digest(&bytes),
        manifest: bytes,
        blobs: vec![
            (config, CONFIG_BLOB.to_vec()),
            (zip_d, zip),
            (mf_d, module_file),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_artifacts_pass_the_check() {
        let a = build(b"zipbytes".to_vec(), b"module: \"a.b/c@v0\"".to_vec()).unwrap();
        let m = check_manifest(&a.manifest).unwrap();
        assert_eq!(m.zip.digest, sha256_digest(b"zipbytes"));
        assert_eq!(m.module_file.size, 18);
        verify(&m.zip, b"zipbytes", "zip").unwrap();
        assert!(verify(&m.zip, b"zipbytez", "zip")
            .unwrap_err()
            .contains("digest mismatch"));
        assert!(verify(&m.zip, b"zip", "zip")
            .unwrap_err()
            .contains("size mismatch"));
    }

    #[test]
    fn wrong_shapes_are_refused() {
        let a = build(b"z".to_vec(), b"m".to_vec()).unwrap();
        let mut m: Manifest = serde_json::from_slice(&a.manifest).unwrap();
        m.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        let e = check_manifest(&serde_json::to_vec(&m).unwrap()).unwrap_err();
        assert!(e.contains("config media type"), "{e}");

        let mut m: Manifest = serde_json::from_slice(&a.manifest).unwrap();
        m.layers.push(m.layers[1].clone());
        let e = check_manifest(&serde_json::to_vec(&m).unwrap()).unwrap_err();
        assert!(e.contains("exactly 2 layers"), "{e}");

        let mut m: Manifest = serde_json::from_slice(&a.manifest).unwrap();
        m.layers[0].digest = "md5:abc".into();
        let e = check_manifest(&serde_json::to_vec(&m).unwrap()).unwrap_err();
        assert!(e.contains("only sha256"), "{e}");

        let mut m: Manifest = serde_json::from_slice(&a.manifest).unwrap();
        m.layers[1].media_type = "text/plain".into();
        m.layers[1].artifact_type = Some(MODULE_FILE_MEDIA_TYPE.into());
        assert!(
            check_manifest(&serde_json::to_vec(&m).unwrap()).is_ok(),
            "the module-file marker may be in artifactType"
        );
    }
}
