//! File systems for the loader: [`DirFs`] (a directory of the real disk, read-only) and
//! [`OverlayFs`] (files of one tree shadowing another, for generated files).
//!
//! Rules (the [`FileSystem`] contract): paths are `/`-separated and relative; absolute paths and
//! `..` elements are refused with [`FsError::InvalidPath`] before the disk is touched; directory
//! listings are sorted by name.

use super::registry::{FileSystem, FsEntry, FsError};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn check(path: &str) -> Result<(), FsError> {
    if path.starts_with('/') || path.contains('\\') || path.split('/').any(|s| s == "..") {
        return Err(FsError::InvalidPath(path.to_string()));
    }
    Ok(())
}

fn io_err(path: &str, e: &std::io::Error) -> FsError {
    match e.kind() {
        std::io::ErrorKind::NotFound => FsError::NotFound(path.to_string()),
        _ => FsError::Io {
            path: path.to_string(),
            message: e.to_string(),
        },
    }
}

/// The files under a directory of the real disk.
#[derive(Clone, Debug)]
pub struct DirFs {
    root: PathBuf,
}

impl DirFs {
    /// A file system rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirFs { root: root.into() }
    }

    fn path(&self, p: &str) -> PathBuf {
        let p = p.trim_end_matches('/');
        if p.is_empty() || p == "." {
            self.root.clone()
        } else {
            self.root.join(p)
        }
    }
}

impl FileSystem for DirFs {
    fn read_file(&self, path: &str) -> Result<Vec<u8>, FsError> {
        check(path)?;
        std::fs::read(self.path(path)).map_err(|e| io_err(path, &e))
    }

    fn read_dir(&self, path: &str) -> Result<Vec<FsEntry>, FsError> {
        check(path)?;
        let rd = std::fs::read_dir(self.path(path)).map_err(|e| io_err(path, &e))?;
        let mut out = Vec::new();
        for e in rd {
            let e = e.map_err(|e| io_err(path, &e))?;
            out.push(FsEntry {
                name: e.file_name().to_string_lossy().into_owned(),
                // Follows symbolic links, as `cue` does for a local main module.
                is_dir: e.path().is_dir(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// `top`'s files shadow `base`'s; directories list the union of both.
pub struct OverlayFs<'a> {
    top: &'a dyn FileSystem,
    base: &'a dyn FileSystem,
}

impl<'a> OverlayFs<'a> {
    /// An overlay of `top` over `base`.
    pub fn new(top: &'a dyn FileSystem, base: &'a dyn FileSystem) -> Self {
        OverlayFs { top, base }
    }
}

impl FileSystem for OverlayFs<'_> {
    fn read_file(&self, path: &str) -> Result<Vec<u8>, FsError> {
        check(path)?;
        match self.top.read_file(path) {
            Err(FsError::NotFound(_)) => self.base.read_file(path),
            r => r,
        }
    }

    fn read_dir(&self, path: &str) -> Result<Vec<FsEntry>, FsError> {
        check(path)?;
        let mut out: BTreeMap<String, bool> = BTreeMap::new();
        let mut found = false;
        for fs in [self.base, self.top] {
            match fs.read_dir(path) {
                Ok(es) => {
                    found = true;
                    for e in es {
                        out.insert(e.name, e.is_dir);
                    }
                }
                Err(FsError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if !found {
            return Err(FsError::NotFound(path.to_string()));
        }
        Ok(out
            .into_iter()
            .map(|(name, is_dir)| FsEntry { name, is_dir })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::MemFs;

    #[test]
    fn dir_fs_refuses_escapes_and_lists_sorted() {
        let dir = std::env::temp_dir().join(format!("cue-dirfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("b.cue"), "b: 1").unwrap();
        std::fs::write(dir.join("a.cue"), "a: 1").unwrap();
        let fs = DirFs::new(&dir);
        let names: Vec<(String, bool)> = fs
            .read_dir("")
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.is_dir))
            .collect();
        assert_eq!(
            names,
            vec![
                ("a.cue".into(), false),
                ("b.cue".into(), false),
                ("sub".into(), true)
            ]
        );
        assert_eq!(fs.read_file("a.cue"), Ok(b"a: 1".to_vec()));
        assert_eq!(
            fs.read_file("../etc/passwd"),
            Err(FsError::InvalidPath("../etc/passwd".into()))
        );
        assert_eq!(
            fs.read_file("/etc/passwd"),
            Err(FsError::InvalidPath("/etc/passwd".into()))
        );
        assert_eq!(
            fs.read_file("missing.cue"),
            Err(FsError::NotFound("missing.cue".into()))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn overlay_shadows_and_merges() {
        let base = MemFs::new().with("x/a.cue", "a: 1").with("x/b.cue", "b: 1");
        let top = MemFs::new().with("x/b.cue", "b: 2").with("x/c.cue", "c: 3");
        let fs = OverlayFs::new(&top, &base);
        assert_eq!(fs.read_file("x/b.cue"), Ok(b"b: 2".to_vec()));
        assert_eq!(fs.read_file("x/a.cue"), Ok(b"a: 1".to_vec()));
        let names: Vec<String> = fs
            .read_dir("x")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec!["a.cue", "b.cue", "c.cue"]);
        assert!(matches!(fs.read_dir("y"), Err(FsError::NotFound(_))));
    }
}
