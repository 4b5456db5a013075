//! OCI image-layout directories as a module registry (offline / air-gapped use, and the embedded
//! default for `dev`).
//!
//! Choice: ONE layout holds every repository. `index.json` lists one manifest descriptor per
//! module version, annotated `org.opencontainers.image.ref.name: "<repository>:<tag>"`, where the
//! repository is the module path without major (`fixtures.test/schema:v0.1.0`). This is the form
//! `oras` and `skopeo` accept for multi-image layouts, and it keeps one directory per air-gapped
//! bundle. Blobs live in `blobs/sha256/<hex>`; `oci-layout` holds `{"imageLayoutVersion":"1.0.0"}`.
//!
//! Reads apply the same checks as the remote registry: the manifest and every blob are verified
//! against their digests and sizes, and sizes are capped before reading. Digests must be sha256,
//! which also keeps blob paths inside the layout.
//!
//! Writes (push) store blobs by content (temporary file + rename), then rewrite `index.json`
//! atomically. A tag that already exists is left alone when it names the same manifest and refused
//! otherwise (tags are immutable; [`Layout::replace_raw`] moves a tag, for signature tags). Writers are expected to be one process at a time (a build step);
//! readers may run concurrently with a writer.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::artifact::{self, BuiltArtifact, Descriptor};

/// The annotation naming a manifest in `index.json`.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// An OCI image-layout directory.
#[derive(Clone, Debug)]
pub struct Layout {
    dir: PathBuf,
}

/// Errors of layout access: `NotFound` or a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// No such tag or blob.
    NotFound(String),
    /// Unreadable or malformed.
    Invalid(String),
}

impl Layout {
    /// A layout at `dir` (it need not exist yet for push).
    pub fn new(dir: impl Into<PathBuf>) -> Layout {
        Layout { dir: dir.into() }
    }

    /// The root directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn index(&self) -> Result<Value, LayoutError> {
        let p = self.dir.join("index.json");
        match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| LayoutError::Invalid(format!("{}: {e}", p.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if self.dir.join("oci-layout").exists() {
                    Ok(json!({"schemaVersion": 2, "manifests": []}))
                } else {
                    Err(LayoutError::Invalid(format!(
                        "{} is not an OCI image layout (no oci-layout file)",
                        self.dir.display()
                    )))
                }
            }
            Err(e) => Err(LayoutError::Invalid(format!("{}: {e}", p.display()))),
        }
    }

    fn entries(&self) -> Result<Vec<(String, Descriptor)>, LayoutError> {
        let index = self.index()?;
        let mut out = Vec::new();
        for m in index
            .get("manifests")
            .and_then(|m| m.as_array())
            .into_iter()
            .flatten()
        {
            let Some(name) = m
                .get("annotations")
                .and_then(|a| a.get(REF_NAME))
                .and_then(|n| n.as_str())
            else {
                continue;
            };
            let d: Descriptor = serde_json::from_value(m.clone())
                .map_err(|e| LayoutError::Invalid(format!("index.json entry {name:?}: {e}")))?;
            out.push((name.to_string(), d));
        }
        Ok(out)
    }

    /// The tags of a repository.
    pub fn tags(&self, repository: &str) -> Result<Vec<String>, LayoutError> {
        let prefix = format!("{repository}:");
        Ok(self
            .entries()?
            .into_iter()
            .filter_map(|(n, _)| n.strip_prefix(&prefix).map(str::to_string))
            .filter(|t| !t.contains('/'))
            .collect())
    }

    /// The manifest bytes and digest of `repository:tag`, verified.
    pub fn manifest(&self, repository: &str, tag: &str) -> Result<(Vec<u8>, String), LayoutError> {
        let name = format!("{repository}:{tag}");
        let d = self
            .entries()?
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d)
            .ok_or_else(|| LayoutError::NotFound(format!("no {name} in the layout")))?;
        let bytes = self.blob(&d, 4 << 20)?;
        Ok((bytes, d.digest))
    }

    /// Reads and verifies a blob, refusing one larger than `max`.
    pub fn blob(&self, d: &Descriptor, max: u64) -> Result<Vec<u8>, LayoutError> {
        let hex = artifact::digest_hex(&d.digest).map_err(LayoutError::Invalid)?;
        if u64::try_from(d.size).map_or(true, |s| s > max) {
            return Err(LayoutError::Invalid(format!(
                "blob {} declares {} bytes, over the limit of {max}",
                d.digest, d.size
            )));
        }
        let p = self.dir.join("blobs").join("sha256").join(hex);
        let meta = std::fs::metadata(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                LayoutError::NotFound(format!("blob {} missing from the layout", d.digest))
            }
            _ => LayoutError::Invalid(format!("{}: {e}", p.display())),
        })?;
        if meta.len() > max {
            return Err(LayoutError::Invalid(format!(
                "blob {} is {} bytes, over the limit of {max}",
                d.digest,
                meta.len()
            )));
        }
        let data =
            std::fs::read(&p).map_err(|e| LayoutError::Invalid(format!("{}: {e}", p.display())))?;
        artifact::verify(d, &data, &format!("blob {}", d.digest)).map_err(LayoutError::Invalid)?;
        Ok(data)
    }

    /// Writes a blob by content.
    pub fn put_blob(&self, data: &[u8]) -> Result<Descriptor, String> {
        let d = Descriptor::of("application/octet-stream", data);
        let hex = artifact::digest_hex(&d.digest)?;
        let dir = self.dir.join("blobs").join("sha256");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let p = dir.join(hex);
        if p.exists() {
            return Ok(d);
        }
        write_atomic(&dir, &p, data)?;
        Ok(d)
    }

    fn init(&self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let marker = self.dir.join("oci-layout");
        if !marker.exists() {
            write_atomic(&self.dir, &marker, br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        }
        Ok(())
    }

    /// Pushes raw manifest bytes and blobs under `repository:tag` (no module checks: tests use
    /// this to build bad artifacts). Returns `false` when the tag already named this manifest.
    pub fn push_raw(
        &self,
        repository: &str,
        tag: &str,
        blobs: &[Vec<u8>],
        manifest: &[u8],
        manifest_media_type: &str,
    ) -> Result<bool, String> {
        self.write_tag(repository, tag, blobs, manifest, manifest_media_type, false)
    }

    /// Like [`Layout::push_raw`], but a tag naming other content is moved to this manifest (a
    /// signature tag, to which each new signature adds a layer, as in a registry).
    pub fn replace_raw(
        &self,
        repository: &str,
        tag: &str,
        blobs: &[Vec<u8>],
        manifest: &[u8],
        manifest_media_type: &str,
    ) -> Result<bool, String> {
        self.write_tag(repository, tag, blobs, manifest, manifest_media_type, true)
    }

    fn write_tag(
        &self,
        repository: &str,
        tag: &str,
        blobs: &[Vec<u8>],
        manifest: &[u8],
        manifest_media_type: &str,
        replace: bool,
    ) -> Result<bool, String> {
        self.init()?;
        for b in blobs {
            self.put_blob(b)?;
        }
        let mut md = self.put_blob(manifest)?;
        md.media_type = manifest_media_type.to_string();
        let name = format!("{repository}:{tag}");
        let mut index = self.index().map_err(|e| match e {
            LayoutError::NotFound(m) | LayoutError::Invalid(m) => m,
        })?;
        if !index.is_object() {
            return Err("index.json is not an object".into());
        }
        let manifests = index
            .as_object_mut()
            .map(|o| {
                o.entry("manifests")
                    .or_insert_with(|| Value::Array(Vec::new()))
            })
            .and_then(|m| m.as_array_mut())
            .ok_or("index.json: manifests is not a list")?;
        let named = |m: &Value| {
            m.get("annotations")
                .and_then(|a| a.get(REF_NAME))
                .and_then(|n| n.as_str())
                == Some(name.as_str())
        };
        for m in manifests.iter() {
            if named(m) {
                if m.get("digest").and_then(|d| d.as_str()) == Some(md.digest.as_str()) {
                    return Ok(false);
                }
                if !replace {
                    return Err(format!(
                        "{name} already exists in the layout with different content (tags are immutable)"
                    ));
                }
            }
        }
        manifests.retain(|m| !named(m));
        manifests.push(json!({
            "mediaType": md.media_type,
            "digest": md.digest,
            "size": md.size,
            "annotations": { REF_NAME: name },
        }));
        if let Some(o) = index.as_object_mut() {
            o.insert("schemaVersion".into(), json!(2));
            o.insert("mediaType".into(), json!(INDEX_MEDIA_TYPE));
        }
        let bytes = serde_json::to_vec_pretty(&index).map_err(|e| e.to_string())?;
        write_atomic(&self.dir, &self.dir.join("index.json"), &bytes)?;
        Ok(true)
    }

    /// Pushes a built module artifact.
    pub fn push(&self, repository: &str, tag: &str, a: &BuiltArtifact) -> Result<bool, String> {
        let blobs: Vec<Vec<u8>> = a.blobs.iter().map(|(_, b)| b.clone()).collect();
        self.push_raw(
            repository,
            tag,
            &blobs,
            &a.manifest,
            artifact::MANIFEST_MEDIA_TYPE,
        )
    }
}

/// Writes `data` to `target` through a temporary file in `dir` and a rename.
pub fn write_atomic(dir: &Path, target: &Path, data: &[u8]) -> Result<(), String> {
    use std::io::Write as _;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    tmp.write_all(data)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| format!("{}: {e}", target.display()))?;
    tmp.persist(target)
        .map_err(|e| format!("{}: {e}", target.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_then_read_back_and_immutability() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout::new(d.path());
        let a = artifact::build(b"zip".to_vec(), b"mf".to_vec()).unwrap();
        assert!(l.push("a.b/c", "v0.1.0", &a).unwrap());
        assert!(
            !l.push("a.b/c", "v0.1.0", &a).unwrap(),
            "same content is a no-op"
        );
        let b = artifact::build(b"zip2".to_vec(), b"mf".to_vec()).unwrap();
        assert!(l
            .push("a.b/c", "v0.1.0", &b)
            .unwrap_err()
            .contains("immutable"));
        l.push("a.b/c", "v0.2.0", &b).unwrap();
        l.push("a.b/cd", "v9.0.0", &b).unwrap();
        let mut tags = l.tags("a.b/c").unwrap();
        tags.sort();
        assert_eq!(tags, ["v0.1.0", "v0.2.0"]);
        let (m, digest) = l.manifest("a.b/c", "v0.1.0").unwrap();
        assert_eq!(digest, a.manifest_digest);
        let mm = artifact::check_manifest(&m).unwrap();
        assert_eq!(l.blob(&mm.zip, 100).unwrap(), b"zip");
        assert!(matches!(
            l.manifest("a.b/c", "v0.3.0"),
            Err(LayoutError::NotFound(_))
        ));
        // A corrupted blob is refused.
        let hex = artifact::digest_hex(&mm.zip.digest).unwrap();
        std::fs::write(d.path().join("blobs/sha256").join(hex), b"zap").unwrap();
        assert!(
            matches!(l.blob(&mm.zip, 100), Err(LayoutError::Invalid(m)) if m.contains("digest mismatch"))
        );
    }

    #[test]
    fn a_directory_without_oci_layout_is_refused() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            Layout::new(d.path()).tags("a.b/c"),
            Err(LayoutError::Invalid(m)) if m.contains("not an OCI image layout")
        ));
    }
}
