//! A [`cue::module::FileSystem`] over a directory of the real disk (for the CLI and tests; the
//! library itself does no I/O).

use cue::module::{FileSystem, FsEntry, FsError};
use std::path::PathBuf;

/// Files under `root`.
pub struct DiskFs {
    /// The root directory.
    pub root: PathBuf,
}

impl DiskFs {
    fn path(&self, p: &str) -> PathBuf {
        if p.is_empty() || p == "." {
            self.root.clone()
        } else {
            self.root.join(p)
        }
    }
}

impl FileSystem for DiskFs {
    fn read_file(&self, path: &str) -> Result<Vec<u8>, FsError> {
        std::fs::read(self.path(path)).map_err(|_| FsError::NotFound(path.to_string()))
    }

    fn read_dir(&self, path: &str) -> Result<Vec<FsEntry>, FsError> {
        let rd =
            std::fs::read_dir(self.path(path)).map_err(|_| FsError::NotFound(path.to_string()))?;
        let mut out: Vec<FsEntry> = rd
            .filter_map(|e| e.ok())
            .map(|e| FsEntry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_dir: e.path().is_dir(),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}
