//! The one error type of the `platform` module.
//!
//! Every variant says what failed and where; I/O variants name the operation and the path. None of
//! them is expected in normal operation except `Prune` (a busy or vanished entry), which callers log.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Errors of the platform store, identity and layout.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The layout was given an empty root path (`--platform-dir` unset).
    #[error("platform layout has no root directory")]
    NoRoot,
    /// `write` was called with an empty file list.
    #[error("no files to write")]
    NoFiles,
    /// A package file path is not a plain relative path inside the package directory. Refused
    /// before anything touches the disk.
    #[error("refusing package file path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A symbolic link was found where the package needs a real directory or file.
    #[error("refusing to write through symbolic link {}", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A filesystem operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// The operation (`create directory`, `write`, `rename`, …).
        op: &'static str,
        /// The path it was applied to.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Installing a new package failed after the previous one had been moved aside, and moving it
    /// back failed too: the previous package's complete contents are at `aside`.
    #[error(
        "installing {}: {source}; restoring the previous package also failed ({restore}), it is kept at {}",
        dir.display(),
        aside.display()
    )]
    RestoreFailed {
        /// The package directory being replaced.
        dir: PathBuf,
        /// Where the previous package now is.
        aside: PathBuf,
        /// The failure of the install rename.
        #[source]
        source: io::Error,
        /// The failure of the restore rename.
        restore: io::Error,
    },
    /// Some entries could not be removed by `prune`/`reset`; every other entry was processed.
    #[error("pruning {}: {}", root.display(), PruneFailures(failures))]
    Prune {
        /// The layout root.
        root: PathBuf,
        /// Each entry that could not be listed or removed, with its error.
        failures: Vec<PruneFailure>,
    },
    /// A package identity needs a positive generation.
    #[error("invalid platform generation {0}: a package identity needs a positive generation")]
    InvalidGeneration(i64),
    /// A claim cannot be part of a canonical claims string.
    #[error("invalid claim {claim:?}: {reason}")]
    InvalidClaim {
        /// The claim as `<catalog>@<version>`.
        claim: String,
        /// Why it was refused.
        reason: &'static str,
    },
}

/// One entry `prune` could not remove (or the root it could not list).
#[derive(Debug)]
pub struct PruneFailure {
    /// The path of the entry.
    pub path: PathBuf,
    /// The error.
    pub source: io::Error,
}

struct PruneFailures<'a>(&'a [PruneFailure]);

impl fmt::Display for PruneFailures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", failure.path.display(), failure.source)?;
        }
        Ok(())
    }
}
