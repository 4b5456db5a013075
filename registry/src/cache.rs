//! The on-disk module cache.
//!
//! Rules implemented:
//! - An entry is keyed by registry location AND `module@version` (docs/design/render.md §2.3's stale-cache
//!   trap: the same version published to two registries is two entries). Its directory name is a
//!   readable form of the coordinate plus a hash of the full key, so distinct keys never collide.
//! - An entry holds `meta.json` (registry key, module, version, verified zip and manifest digests)
//!   and `files/` (the extracted, already checked module tree). Only verified artifacts are stored.
//! - Entries are written into a fresh temporary directory under the cache root and renamed into
//!   place in one step, so readers see a complete entry or none. When two writers race, the
//!   rename of the second fails because the target exists; it discards its copy and the winner's
//!   entry is used. Entries are immutable once written.
//! - A read checks that `meta.json` names the requested key; anything unreadable is a miss.

use std::path::{Path, PathBuf};

use cue::module::ModuleVersion;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::zipfile;

/// An on-disk cache rooted at one directory.
#[derive(Clone, Debug)]
pub struct Cache {
    root: PathBuf,
}

/// What `meta.json` records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMeta {
    /// The registry location key.
    pub registry: String,
    /// `path@vN`.
    pub module: String,
    /// Exact version.
    pub version: String,
    /// Digest of the verified module zip.
    pub zip_digest: String,
    /// Digest of the verified manifest.
    pub manifest_digest: String,
}

/// A cached module: its files and metadata.
pub struct Entry {
    /// `(path, contents)`, sorted by path.
    pub files: Vec<(String, Vec<u8>)>,
    /// The recorded metadata.
    pub meta: EntryMeta,
}

impl Cache {
    /// A cache rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Cache {
        Cache { root: root.into() }
    }

    /// The default root: `$OPM_CACHE_DIR`, else `$XDG_CACHE_HOME/opm-operator/modules`, else
    /// `$HOME/.cache/opm-operator/modules`.
    pub fn default_root() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("OPM_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("opm-operator").join("modules"))
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of an entry.
    pub fn entry_dir(&self, registry: &str, m: &ModuleVersion) -> PathBuf {
        let key = format!("{registry}\n{}\n{}", m.path, m.version);
        let hash = hex::encode(Sha256::digest(key.as_bytes()));
        let readable: String = format!("{m}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '@') {
                    c
                } else {
                    '_'
                }
            })
            .take(100)
            .collect();
        self.root.join(format!("{readable}-{}", &hash[..16]))
    }

    /// Loads an entry, or `None` when absent or unreadable.
    pub fn load(&self, registry: &str, m: &ModuleVersion) -> Option<Entry> {
        let dir = self.entry_dir(registry, m);
        let meta: EntryMeta =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).ok()?).ok()?;
        if meta.registry != registry || meta.module != m.path || meta.version != m.version {
            return None;
        }
        let mut files = Vec::new();
        read_tree(&dir.join("files"), "", &mut files).ok()?;
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Some(Entry { files, meta })
    }

    /// Stores an entry atomically; returns `false` when another writer got there first (its entry
    /// is then the one on disk).
    pub fn store(&self, meta: &EntryMeta, files: &[(String, Vec<u8>)]) -> std::io::Result<bool> {
        let m = ModuleVersion {
            path: meta.module.clone(),
            version: meta.version.clone(),
        };
        let target = self.entry_dir(&meta.registry, &m);
        if target.join("meta.json").exists() {
            return Ok(false);
        }
        std::fs::create_dir_all(&self.root)?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&self.root)?;
        let files_dir = tmp.path().join("files");
        std::fs::create_dir_all(&files_dir)?;
        for (path, data) in files {
            zipfile::check_entry_path(path).map_err(std::io::Error::other)?;
            let p = files_dir.join(path);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&p, data)?;
        }
        let meta_bytes = serde_json::to_vec_pretty(meta).map_err(std::io::Error::other)?;
        std::fs::write(tmp.path().join("meta.json"), meta_bytes)?;
        match std::fs::rename(tmp.path(), &target) {
            Ok(()) => Ok(true),
            Err(e) if target.join("meta.json").exists() => {
                tracing::debug!(error = %e, "lost the cache race; using the existing entry");
                Ok(false)
            }
            Err(e) => Err(e),
        }
        // `tmp` is dropped here: after a successful rename its path no longer exists and the
        // clean-up is a no-op; after a lost race it removes our copy.
    }
}

fn read_tree(root: &Path, rel: &str, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    for ent in std::fs::read_dir(&dir)? {
        let ent = ent?;
        let name = ent
            .file_name()
            .into_string()
            .map_err(|_| std::io::Error::other("non-UTF-8 name in cache"))?;
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let ft = ent.file_type()?;
        if ft.is_dir() {
            read_tree(root, &path, out)?;
        } else if ft.is_file() {
            out.push((path, std::fs::read(ent.path())?));
        } else {
            return Err(std::io::Error::other("irregular file in cache entry"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(registry: &str) -> EntryMeta {
        EntryMeta {
            registry: registry.into(),
            module: "a.b/c@v0".into(),
            version: "v0.1.0".into(),
            zip_digest: "sha256:00".into(),
            manifest_digest: "sha256:11".into(),
        }
    }

    #[test]
    fn store_load_and_race() {
        let d = tempfile::tempdir().unwrap();
        let c = Cache::new(d.path().join("cache"));
        let m = ModuleVersion {
            path: "a.b/c@v0".into(),
            version: "v0.1.0".into(),
        };
        assert!(c.load("r1", &m).is_none());
        let files = vec![
            (
                "cue.mod/module.cue".to_string(),
                b"module: \"a.b/c@v0\"".to_vec(),
            ),
            ("x/y.cue".to_string(), b"package x".to_vec()),
        ];
        assert!(c.store(&meta("r1"), &files).unwrap());
        assert!(
            !c.store(&meta("r1"), &files).unwrap(),
            "second writer loses"
        );
        let e = c.load("r1", &m).unwrap();
        assert_eq!(e.files, files);
        assert!(c.load("r2", &m).is_none(), "keyed by registry too");
        // Only the entry is left: no temporary directories.
        let names: Vec<_> = std::fs::read_dir(c.root()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }
}
