//! The filesystem seam of the layout: every disk operation `Layout` performs goes through
//! [`FileSystem`], so tests can inject a failure at any step.
//!
//! Rules implemented here:
//! - [`RealFs`] is `std::fs`, synchronous (callers run layout operations in `spawn_blocking`).
//! - Directories are created with mode 0755 (before the umask).
//! - `write_new_file` creates the file exclusively (`O_CREAT|O_EXCL`, so it never follows or
//!   overwrites a symbolic link), writes all bytes and fsyncs the file before returning.
//! - `entry_kind`/`read_dir` never follow symbolic links: a link is reported as a link.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// What a directory entry is, without following symbolic links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else (socket, device, fifo).
    Other,
}

impl From<fs::FileType> for EntryKind {
    fn from(t: fs::FileType) -> Self {
        if t.is_symlink() {
            Self::Symlink
        } else if t.is_dir() {
            Self::Dir
        } else if t.is_file() {
            Self::File
        } else {
            Self::Other
        }
    }
}

/// The disk operations of the layout.
pub trait FileSystem: Send + Sync {
    /// Creates `path` and any missing parents (mode 0755); an existing directory is fine.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Creates exactly `path` (mode 0755); fails if anything exists there.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates a new file (never an existing one, never through a link), writes `contents` and
    /// fsyncs it.
    fn write_new_file(&self, path: &Path, contents: &[u8]) -> io::Result<()>;
    /// Reads a whole file.
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Fsyncs a directory, making the entries created or renamed in it durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to` (atomic on one filesystem).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a directory tree (links inside are removed, not followed).
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Removes a file or a symbolic link.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// The kind of `path`, not following a final symbolic link.
    fn entry_kind(&self, path: &Path) -> io::Result<EntryKind>;
    /// The entries of a directory (names and kinds, links not followed), in no particular order.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, EntryKind)>>;
}

/// The real filesystem (`std::fs`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl FileSystem for RealFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::DirBuilder::new().mode(0o755).create(path)
    }

    fn write_new_file(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        file.write_all(contents)?;
        file.sync_all()
    }

    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        fs::File::open(path)?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        fs::File::open(path)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir_all(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn entry_kind(&self, path: &Path) -> io::Result<EntryKind> {
        Ok(fs::symlink_metadata(path)?.file_type().into())
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, EntryKind)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            out.push((entry.file_name(), entry.file_type()?.into()));
        }
        Ok(out)
    }
}

/// A [`FileSystem`] that counts and logs every call and fails the calls a rule selects (tests only).
#[cfg(test)]
pub(crate) mod testing {
    use std::ffi::OsString;
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use super::{EntryKind, FileSystem, RealFs};

    type Rule = Box<dyn Fn(usize, &'static str, &Path) -> bool + Send + Sync>;
    type Hook = Box<dyn Fn(&'static str, &Path) + Send + Sync>;
    /// One logged call: the operation, its path and, for `rename`, the destination.
    pub(crate) type Call = (&'static str, PathBuf, Option<PathBuf>);

    pub(crate) struct FaultFs {
        calls: AtomicUsize,
        rule: Rule,
        after: Option<Hook>,
        log: Mutex<Vec<Call>>,
    }

    impl FaultFs {
        /// Fails whenever `rule(step, op, path)` holds (steps count from 0; for `rename` the path
        /// is the source).
        pub(crate) fn when(
            rule: impl Fn(usize, &'static str, &Path) -> bool + Send + Sync + 'static,
        ) -> Self {
            Self {
                calls: AtomicUsize::new(0),
                rule: Box::new(rule),
                after: None,
                log: Mutex::new(Vec::new()),
            }
        }

        pub(crate) fn recording() -> Self {
            Self::when(|_, _, _| false)
        }

        /// Fails only call number `n`.
        pub(crate) fn failing_once_at(n: usize) -> Self {
            Self::when(move |step, _, _| step == n)
        }

        /// Fails call number `n` and every later call (the disk went away).
        pub(crate) fn failing_from(n: usize) -> Self {
            Self::when(move |step, _, _| step >= n)
        }

        /// Runs `hook(op, path)` after every successful call.
        pub(crate) fn with_hook(
            mut self,
            hook: impl Fn(&'static str, &Path) + Send + Sync + 'static,
        ) -> Self {
            self.after = Some(Box::new(hook));
            self
        }

        pub(crate) fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }

        pub(crate) fn ops(&self) -> Vec<Call> {
            self.log.lock().unwrap().clone()
        }

        fn run<T>(
            &self,
            op: &'static str,
            path: &Path,
            to: Option<&Path>,
            f: impl FnOnce() -> io::Result<T>,
        ) -> io::Result<T> {
            let step = self.calls.fetch_add(1, Ordering::SeqCst);
            self.log
                .lock()
                .unwrap()
                .push((op, path.to_path_buf(), to.map(Path::to_path_buf)));
            if (self.rule)(step, op, path) {
                return Err(io::Error::other(format!(
                    "injected failure at step {step} ({op} {})",
                    path.display()
                )));
            }
            let out = f()?;
            if let Some(hook) = &self.after {
                hook(op, path);
            }
            Ok(out)
        }
    }

    impl FileSystem for FaultFs {
        fn create_dir_all(&self, path: &Path) -> io::Result<()> {
            self.run("create_dir_all", path, None, || RealFs.create_dir_all(path))
        }
        fn create_dir(&self, path: &Path) -> io::Result<()> {
            self.run("create_dir", path, None, || RealFs.create_dir(path))
        }
        fn write_new_file(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
            self.run("write_new_file", path, None, || {
                RealFs.write_new_file(path, contents)
            })
        }
        fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.run("read_file", path, None, || RealFs.read_file(path))
        }
        fn sync_dir(&self, path: &Path) -> io::Result<()> {
            self.run("sync_dir", path, None, || RealFs.sync_dir(path))
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.run("rename", from, Some(to), || RealFs.rename(from, to))
        }
        fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
            self.run("remove_dir_all", path, None, || RealFs.remove_dir_all(path))
        }
        fn remove_file(&self, path: &Path) -> io::Result<()> {
            self.run("remove_file", path, None, || RealFs.remove_file(path))
        }
        fn entry_kind(&self, path: &Path) -> io::Result<EntryKind> {
            self.run("entry_kind", path, None, || RealFs.entry_kind(path))
        }
        fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, EntryKind)>> {
            self.run("read_dir", path, None, || RealFs.read_dir(path))
        }
    }
}
