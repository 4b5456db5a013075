//! The on-disk layout of generated platform packages under `--platform-dir` (docs/design/operator.md §5.2,
//! keyed on [`PackageIdentity`] per §5.4).
//!
//! Entries of the root:
//! - `gen-<identity>` — a complete package. It only ever appears by an atomic rename of a fully
//!   written and fsynced staging directory, so a reader that finds it finds every file complete.
//! - `.staging-<identity>-<12 hex>` — a write in progress (or the leftover of a crash).
//! - `.aside-<identity>-<same 12 hex>` — the previous package of the same identity while it is being
//!   replaced (or the leftover of a crash).
//!
//! Rules implemented here:
//! - `write` validates every file path *before touching the disk*: non-empty, relative, `/`-separated
//!   segments that are neither empty, `.` nor `..`, no `\` or NUL, no duplicates and no file that is
//!   also a directory of another. Nothing inside a package is ever a symbolic link: directories are
//!   created one by one and files exclusively, and a link planted in the staging directory is refused.
//!   (The root itself may be a link, e.g. to a mounted volume.)
//! - `write` failure at any step removes the staging directory (best effort) and leaves no new
//!   `gen-…` directory; the previous package of the same identity is moved back if it had been moved
//!   aside. Under a single failure the previous package is never missing; if restoring it fails too,
//!   the error is `RestoreFailed` and names the `.aside-…` copy, which still holds it complete.
//! - After the install rename, syncing the root and removing the aside copy are best effort: the
//!   package is complete and visible, the layout is reset at every boot (so a rename lost to a power
//!   failure costs nothing), and a leftover aside copy is removed by the next `prune` or `reset`.
//! - `ensure` is `write` that leaves an existing package untouched when its files are byte-identical
//!   to the requested ones. The Platform reconciler uses it so that regenerating an identity that is
//!   still on disk (a claim toggled off and on again at one generation, while a render leases the
//!   older package) never moves a leased directory.
//! - `prune` removes every root entry except `gen-<k>` for `k` in `keep` or pinned by the given
//!   [`LeaseView`]: superseded packages, staging leftovers, aside copies and foreign entries (the
//!   root is owned). It asks the view entry by entry, just before each removal; passing the
//!   [`Store`](super::Store) itself means a caller cannot forget the current record or a lease.
//!   Because a lease is only ever taken on the store's current record, a package that is neither
//!   current nor leased cannot become leased during the prune unless `set_generated` installs it
//!   concurrently — the Platform reconciler (the only caller of `set_generated`, `write` and
//!   `prune`) must not do both at once. Links are removed, never followed. A missing root is fine;
//!   prune continues past errors and reports them all.
//! - `reset` (boot) removes everything and recreates the root.
//! - `packages`/`generations` list complete packages only (directories with a canonical identity
//!   name), ascending; dot entries and anything else are ignored; a missing root is empty.
//! - One mutex serializes `write`, `ensure`, `prune` and `reset` within a process, so a prune never
//!   removes the staging directory of a concurrent write. Listing needs no lock (renames are atomic).

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::fs::{EntryKind, FileSystem, RealFs};
use super::{Error, LeaseView, NoLeases, PackageIdentity, PruneFailure};

/// What [`Layout::ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    /// A byte-identical package was already installed and was left untouched.
    Reused,
    /// The package was written (new, or replacing a differing one).
    Written,
}

/// The owner of `--platform-dir`.
pub struct Layout {
    root: PathBuf,
    fs: Arc<dyn FileSystem>,
    ops: Mutex<()>,
}

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layout").field("root", &self.root).finish()
    }
}

/// A validated package file: its path segments and contents.
struct PackageFile<'a> {
    segments: Vec<&'a str>,
    contents: &'a [u8],
}

impl Layout {
    /// A layout over `root` on the real filesystem. An empty root is refused.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, Error> {
        Self::with_fs(root, Arc::new(RealFs))
    }

    /// A layout over `root` performing its disk operations through `fs` (the fault-injection seam).
    pub fn with_fs(root: impl Into<PathBuf>, fs: Arc<dyn FileSystem>) -> Result<Self, Error> {
        let root = root.into();
        if root.as_os_str().is_empty() {
            return Err(Error::NoRoot);
        }
        Ok(Self {
            root,
            fs,
            ops: Mutex::new(()),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/<identity>`, whether or not it exists.
    pub fn dir(&self, identity: &PackageIdentity) -> PathBuf {
        self.root.join(identity.to_string())
    }

    /// Writes a package atomically and returns its directory; see the module docs for the steps and
    /// the guarantees on failure. Paths are relative, `/`-separated.
    pub fn write<P: AsRef<str>, B: AsRef<[u8]>>(
        &self,
        identity: &PackageIdentity,
        files: &[(P, B)],
    ) -> Result<PathBuf, Error> {
        let files = validate(files)?;
        let _ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        self.write_locked(identity, &files)
    }

    /// Like [`Layout::write`], but an installed package whose files are byte-identical to `files`
    /// (same paths, same directories, same bytes, no links) is left untouched.
    pub fn ensure<P: AsRef<str>, B: AsRef<[u8]>>(
        &self,
        identity: &PackageIdentity,
        files: &[(P, B)],
    ) -> Result<(PathBuf, Ensured), Error> {
        let files = validate(files)?;
        let _ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = self.dir(identity);
        if self.tree_matches(&dir, &files) {
            return Ok((dir, Ensured::Reused));
        }
        Ok((self.write_locked(identity, &files)?, Ensured::Written))
    }

    /// Removes every entry of the root except the packages in `keep` and those `leases` pins, and
    /// returns the removed paths (sorted). See the module docs.
    pub fn prune(
        &self,
        keep: &[PackageIdentity],
        leases: &dyn LeaseView,
    ) -> Result<Vec<PathBuf>, Error> {
        let _ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        self.prune_locked(keep, leases)
    }

    /// Boot-time reset: removes everything under the root, then recreates it.
    pub fn reset(&self) -> Result<(), Error> {
        let _ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        self.prune_locked(&[], &NoLeases)?;
        self.fs
            .create_dir_all(&self.root)
            .map_err(|e| io_err("create directory", &self.root, e))
    }

    /// The complete packages on disk, ascending.
    pub fn packages(&self) -> Result<Vec<PackageIdentity>, Error> {
        let entries = match self.fs.read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("list", &self.root, e)),
        };
        let mut out: Vec<_> = entries
            .into_iter()
            .filter(|(_, kind)| *kind == EntryKind::Dir)
            .filter_map(|(name, _)| name.to_str().and_then(PackageIdentity::parse))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The generations that have at least one complete package on disk, ascending.
    pub fn generations(&self) -> Result<Vec<i64>, Error> {
        let mut out: Vec<i64> = self
            .packages()?
            .iter()
            .map(PackageIdentity::generation)
            .collect();
        out.dedup();
        Ok(out)
    }

    fn write_locked(
        &self,
        identity: &PackageIdentity,
        files: &[PackageFile<'_>],
    ) -> Result<PathBuf, Error> {
        let fs = &*self.fs;
        fs.create_dir_all(&self.root)
            .map_err(|e| io_err("create directory", &self.root, e))?;
        let (staging, suffix) = self.create_staging(identity)?;
        if let Err(e) = fill(fs, &staging, files) {
            remove_best_effort(fs, &staging);
            return Err(e);
        }
        let dir = self.dir(identity);
        let aside = self.root.join(format!(".aside-{identity}-{suffix}"));
        let moved_aside = match fs.entry_kind(&dir) {
            Ok(_) => match fs.rename(&dir, &aside) {
                Ok(()) => true,
                Err(e) => {
                    remove_best_effort(fs, &staging);
                    return Err(io_err("move aside", &dir, e));
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => {
                remove_best_effort(fs, &staging);
                return Err(io_err("inspect", &dir, e));
            }
        };
        if let Err(err) = fs.rename(&staging, &dir) {
            // Restore first: the previous package is missing only for the two renames.
            let restored = if moved_aside {
                fs.rename(&aside, &dir)
            } else {
                Ok(())
            };
            remove_best_effort(fs, &staging);
            if let Err(restore) = restored {
                return Err(Error::RestoreFailed {
                    dir,
                    aside,
                    source: err,
                    restore,
                });
            }
            return Err(io_err("install", &staging, err));
        }
        // The package is complete and visible. Syncing the root makes the rename durable; it is best
        // effort because the layout is reset at every boot, so a rename lost to a power failure
        // costs nothing, while failing here would leave a complete package behind a failed write.
        if let Err(e) = fs.sync_dir(&self.root) {
            tracing::warn!(root = %self.root.display(), error = %e, "could not sync the platform layout root after installing a package");
        }
        if moved_aside {
            remove_best_effort(fs, &aside);
        }
        Ok(dir)
    }

    fn create_staging(&self, identity: &PackageIdentity) -> Result<(PathBuf, String), Error> {
        let mut attempt = 0;
        loop {
            let suffix = random_suffix();
            let staging = self.root.join(format!(".staging-{identity}-{suffix}"));
            match self.fs.create_dir(&staging) {
                Ok(()) => return Ok((staging, suffix)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1;
                }
                Err(e) => return Err(io_err("create directory", &staging, e)),
            }
        }
    }

    fn prune_locked(
        &self,
        keep: &[PackageIdentity],
        leases: &dyn LeaseView,
    ) -> Result<Vec<PathBuf>, Error> {
        let mut entries = match self.fs.read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(Error::Prune {
                    root: self.root.clone(),
                    failures: vec![PruneFailure {
                        path: self.root.clone(),
                        source,
                    }],
                })
            }
        };
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut removed = Vec::new();
        let mut failures = Vec::new();
        for (name, kind) in entries {
            let kept = name
                .to_str()
                .and_then(PackageIdentity::parse)
                .is_some_and(|id| keep.contains(&id) || leases.is_pinned(&id));
            if kept {
                continue;
            }
            let path = self.root.join(&name);
            let result = if kind == EntryKind::Dir {
                self.fs.remove_dir_all(&path)
            } else {
                self.fs.remove_file(&path)
            };
            match result {
                Ok(()) => removed.push(path),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => failures.push(PruneFailure { path, source }),
            }
        }
        if failures.is_empty() {
            Ok(removed)
        } else {
            Err(Error::Prune {
                root: self.root.clone(),
                failures,
            })
        }
    }

    /// Whether `dir` is a real directory holding exactly `files` (and the directories they imply).
    fn tree_matches(&self, dir: &Path, files: &[PackageFile<'_>]) -> bool {
        if !matches!(self.fs.entry_kind(dir), Ok(EntryKind::Dir)) {
            return false;
        }
        let mut want_files = BTreeMap::new();
        let mut want_dirs = BTreeSet::new();
        for file in files {
            let mut rel = PathBuf::new();
            for segment in &file.segments[..file.segments.len() - 1] {
                rel.push(segment);
                want_dirs.insert(rel.clone());
            }
            want_files.insert(file.segments.iter().collect::<PathBuf>(), file.contents);
        }
        let mut found_dirs = BTreeSet::new();
        let mut found_files = BTreeSet::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let Ok(entries) = self.fs.read_dir(&dir.join(&rel)) else {
                return false;
            };
            for (name, kind) in entries {
                let child = rel.join(name);
                match kind {
                    EntryKind::Dir => {
                        found_dirs.insert(child.clone());
                        stack.push(child);
                    }
                    EntryKind::File => {
                        found_files.insert(child);
                    }
                    EntryKind::Symlink | EntryKind::Other => return false,
                }
            }
        }
        if found_dirs != want_dirs || found_files.len() != want_files.len() {
            return false;
        }
        want_files.iter().all(|(rel, contents)| {
            found_files.contains(rel)
                && self
                    .fs
                    .read_file(&dir.join(rel))
                    .is_ok_and(|bytes| bytes == *contents)
        })
    }
}

/// Checks every file path before anything touches the disk.
fn validate<P: AsRef<str>, B: AsRef<[u8]>>(
    files: &[(P, B)],
) -> Result<Vec<PackageFile<'_>>, Error> {
    if files.is_empty() {
        return Err(Error::NoFiles);
    }
    let refuse = |path: &str, reason| Error::InvalidPath {
        path: path.to_owned(),
        reason,
    };
    let mut out = Vec::with_capacity(files.len());
    let mut file_paths = BTreeSet::new();
    let mut dir_paths = BTreeSet::new();
    for (path, contents) in files {
        let path = path.as_ref();
        if path.is_empty() {
            return Err(refuse(path, "the path is empty"));
        }
        if path.starts_with('/') {
            return Err(refuse(path, "the path is absolute"));
        }
        if path.contains('\\') || path.contains('\0') {
            return Err(refuse(path, "the path contains a backslash or NUL"));
        }
        let segments: Vec<&str> = path.split('/').collect();
        for segment in &segments {
            match *segment {
                "" => return Err(refuse(path, "the path has an empty segment")),
                "." => return Err(refuse(path, "the path has a '.' segment")),
                ".." => return Err(refuse(path, "the path escapes the package directory")),
                _ => {}
            }
        }
        let joined = segments.join("/");
        if !file_paths.insert(joined.clone()) {
            return Err(refuse(path, "the path is listed twice"));
        }
        if dir_paths.contains(&joined) {
            return Err(refuse(path, "the path is also a directory of another file"));
        }
        for end in 1..segments.len() {
            let parent = segments[..end].join("/");
            if file_paths.contains(&parent) {
                return Err(refuse(path, "a parent of the path is also a file"));
            }
            dir_paths.insert(parent);
        }
        out.push(PackageFile {
            segments,
            contents: contents.as_ref(),
        });
    }
    Ok(out)
}

/// Writes the files into the fresh staging directory and fsyncs every directory, deepest first.
fn fill(fs: &dyn FileSystem, staging: &Path, files: &[PackageFile<'_>]) -> Result<(), Error> {
    let mut dirs = BTreeSet::new();
    for file in files {
        let mut path = staging.to_path_buf();
        let (name, parents) = match file.segments.split_last() {
            Some(split) => split,
            None => continue,
        };
        for segment in parents {
            path.push(segment);
            if dirs.insert(path.clone()) {
                create_real_dir(fs, &path)?;
            }
        }
        path.push(name);
        if let Err(e) = fs.write_new_file(&path, file.contents) {
            if e.kind() == io::ErrorKind::AlreadyExists
                && matches!(fs.entry_kind(&path), Ok(EntryKind::Symlink))
            {
                return Err(Error::Symlink { path });
            }
            return Err(io_err("write", &path, e));
        }
    }
    // Deepest first, so that each directory is synced after its children's entries exist.
    let mut ordered: Vec<_> = dirs.into_iter().collect();
    ordered.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    ordered.push(staging.to_path_buf());
    for dir in ordered {
        fs.sync_dir(&dir).map_err(|e| io_err("sync", &dir, e))?;
    }
    Ok(())
}

fn create_real_dir(fs: &dyn FileSystem, path: &Path) -> Result<(), Error> {
    match fs.create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match fs.entry_kind(path) {
            Ok(EntryKind::Dir) => Ok(()),
            Ok(EntryKind::Symlink) => Err(Error::Symlink {
                path: path.to_path_buf(),
            }),
            _ => Err(io_err("create directory", path, e)),
        },
        Err(e) => Err(io_err("create directory", path, e)),
    }
}

fn remove_best_effort(fs: &dyn FileSystem, path: &Path) {
    if let Err(e) = fs.remove_dir_all(path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a platform layout leftover; the next prune removes it");
        }
    }
}

fn io_err(op: &'static str, path: &Path, source: io::Error) -> Error {
    Error::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// 12 hex digits, unique within the process (a counter) and random across processes (a randomly
/// keyed SipHash over the counter, the time and the pid). `write` retries on a collision anyway.
fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    format!("{:012x}", hasher.finish() & 0xffff_ffff_ffff)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;
    use crate::platform::fs::testing::{Call, FaultFs};
    use crate::platform::{Generated, Store};
    use crate::SkewPolicy;

    type Files = Vec<(&'static str, Vec<u8>)>;

    fn id(generation: i64) -> PackageIdentity {
        PackageIdentity::unclaimed(generation).unwrap()
    }

    fn claimed(generation: i64, catalog: &str) -> PackageIdentity {
        PackageIdentity::new(generation, [(catalog, "1.0.0")]).unwrap()
    }

    fn files(tag: &str) -> Files {
        vec![
            (
                "cue.mod/module.cue",
                format!("module: \"opmodel.dev/platforms/cluster@v0\" // {tag}\n").into_bytes(),
            ),
            (
                "platform.cue",
                format!("package platform // {tag}\n").into_bytes(),
            ),
            (
                "sub/dir/extra.cue",
                format!("package extra // {tag}\n").into_bytes(),
            ),
        ]
    }

    /// Every file under `dir` (relative path → bytes), or `None` if `dir` is not a directory.
    fn tree(dir: &Path) -> Option<BTreeMap<String, Vec<u8>>> {
        fn walk(base: &Path, rel: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
            for entry in fs::read_dir(base.join(rel)).unwrap() {
                let entry = entry.unwrap();
                let child = rel.join(entry.file_name());
                let kind = entry.file_type().unwrap();
                assert!(!kind.is_symlink(), "link inside a package: {child:?}");
                if kind.is_dir() {
                    walk(base, &child, out);
                } else {
                    out.insert(
                        child.to_str().unwrap().to_owned(),
                        fs::read(base.join(&child)).unwrap(),
                    );
                }
            }
        }
        if !fs::symlink_metadata(dir).ok()?.is_dir() {
            return None;
        }
        let mut out = BTreeMap::new();
        walk(dir, Path::new(""), &mut out);
        Some(out)
    }

    fn as_tree(files: &Files) -> BTreeMap<String, Vec<u8>> {
        files
            .iter()
            .map(|(p, b)| ((*p).to_owned(), b.clone()))
            .collect()
    }

    fn names(root: &Path) -> Vec<String> {
        let mut out: Vec<String> = match fs::read_dir(root) {
            Ok(rd) => rd
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
            Err(_) => Vec::new(),
        };
        out.sort();
        out
    }

    fn faulty(root: &Path, fs: FaultFs) -> (Layout, Arc<FaultFs>) {
        let fs = Arc::new(fs);
        let dyn_fs: Arc<dyn FileSystem> = fs.clone();
        (Layout::with_fs(root, dyn_fs).unwrap(), fs)
    }

    fn record(layout: &Layout, identity: PackageIdentity) -> Generated<()> {
        Generated {
            identity,
            dir: layout.dir(&identity),
            platform: (),
            skew: SkewPolicy::Warn,
        }
    }

    fn umask() -> u32 {
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
        u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
    }

    // ---- §5.2 dir ----

    #[test]
    fn spec_5_2_dir_is_root_slash_identity_whether_or_not_it_exists() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().join("absent")).unwrap();
        assert_eq!(layout.dir(&id(3)), tmp.path().join("absent/gen-3"));
        let c = claimed(3, "x");
        assert_eq!(layout.dir(&c), tmp.path().join(format!("absent/{c}")));
        assert!(!tmp.path().join("absent").exists());
    }

    // ---- §5.2 write ----

    #[test]
    fn spec_5_2_write_refuses_empty_root() {
        let err = Layout::new("").unwrap_err();
        assert!(matches!(err, Error::NoRoot));
        assert_eq!(err.to_string(), "platform layout has no root directory");
    }

    #[test]
    fn spec_5_2_write_refuses_no_files() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().join("root")).unwrap();
        let none: &[(&str, &[u8])] = &[];
        let err = layout.write(&id(1), none).unwrap_err();
        assert_eq!(err.to_string(), "no files to write");
        assert!(
            !tmp.path().join("root").exists(),
            "nothing touched the disk"
        );
    }

    #[test]
    fn spec_5_2_write_creates_root_mode_0755_and_returns_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("a/b/root");
        let layout = Layout::new(&root).unwrap();
        let dir = layout.write(&id(2), &files("v1")).unwrap();
        assert_eq!(dir, root.join("gen-2"));
        assert_eq!(tree(&dir), Some(as_tree(&files("v1"))));
        let want = 0o755 & !umask();
        for d in [&root, &dir, &dir.join("cue.mod"), &dir.join("sub/dir")] {
            let mode = fs::metadata(d).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, want, "{}", d.display());
        }
        assert_eq!(names(&root), vec!["gen-2"], "no staging or aside left");
    }

    #[test]
    fn spec_5_2_write_stages_in_dot_staging_then_renames_and_moves_existing_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        Layout::new(&root)
            .unwrap()
            .write(&id(3), &files("old"))
            .unwrap();
        let old_inode = fs::metadata(root.join("gen-3")).unwrap().ino();
        let (layout, fs) = faulty(&root, FaultFs::recording());
        let dir = layout.write(&id(3), &files("new")).unwrap();
        assert_eq!(tree(&dir), Some(as_tree(&files("new"))));
        assert_ne!(fs::metadata(&dir).unwrap().ino(), old_inode);
        assert_eq!(
            names(&root),
            vec!["gen-3"],
            "aside copy removed after success"
        );

        let ops = fs.ops();
        let staging = ops
            .iter()
            .find(|(op, p, _)| *op == "create_dir" && p.parent() == Some(root.as_path()))
            .map(|(_, p, _)| p.file_name().unwrap().to_str().unwrap().to_owned())
            .unwrap();
        let suffix = staging.strip_prefix(".staging-gen-3-").unwrap();
        assert_eq!(suffix.len(), 12);
        assert!(suffix
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        let renames: Vec<_> = ops
            .iter()
            .filter(|(op, ..)| *op == "rename")
            .map(|(_, from, to)| (from.clone(), to.clone().unwrap()))
            .collect();
        let aside = root.join(format!(".aside-gen-3-{suffix}"));
        assert_eq!(
            renames,
            vec![
                (root.join("gen-3"), aside.clone()),
                (root.join(&staging), root.join("gen-3")),
            ]
        );
        let removed: Vec<_> = ops
            .iter()
            .filter(|(op, ..)| *op == "remove_dir_all")
            .collect();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].1, aside);
        // Every file was written before any directory was synced, and the staging directory was
        // synced before the install rename.
        let pos = |pred: &dyn Fn(&Call) -> bool| ops.iter().position(pred).unwrap();
        let last_write = ops
            .iter()
            .rposition(|(op, ..)| *op == "write_new_file")
            .unwrap();
        let first_sync = pos(&|(op, ..)| *op == "sync_dir");
        let staging_sync = pos(&|(op, p, _)| *op == "sync_dir" && *p == root.join(&staging));
        let install = pos(&|(op, p, _)| *op == "rename" && *p == root.join(&staging));
        assert!(last_write < first_sync && staging_sync < install);
        assert!(ops[install + 1..]
            .iter()
            .any(|(op, p, _)| *op == "sync_dir" && *p == root));
    }

    #[test]
    fn spec_5_2_write_refuses_escaping_paths_before_touching_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let cases: &[&[&str]] = &[
            &["../escape.cue"],
            &["a/../../escape.cue"],
            &["a/.."],
            &["/etc/passwd"],
            &[""],
            &["a//b.cue"],
            &["a/"],
            &["./a.cue"],
            &["a\\..\\b.cue"],
            &["a\0b"],
            &["a.cue", "a.cue"],
            &["a", "a/b.cue"],
            &["a/b.cue", "a"],
            &["ok.cue", "../escape.cue"],
        ];
        for paths in cases {
            let (layout, fs) = faulty(&root, FaultFs::recording());
            let files: Vec<(&str, &[u8])> = paths.iter().map(|p| (*p, &b"x"[..])).collect();
            let err = layout.write(&id(1), &files).unwrap_err();
            assert!(matches!(err, Error::InvalidPath { .. }), "{paths:?}: {err}");
            assert_eq!(fs.calls(), 0, "{paths:?}: the disk was touched");
            let err = layout.ensure(&id(1), &files).unwrap_err();
            assert!(matches!(err, Error::InvalidPath { .. }), "{paths:?}: {err}");
            assert_eq!(fs.calls(), 0, "{paths:?}: the disk was touched");
        }
        assert!(!root.exists());
        assert!(!tmp.path().join("escape.cue").exists());
    }

    #[test]
    fn spec_5_2_write_refuses_symlinks_planted_in_staging() {
        for target_name in ["cue.mod", "platform.cue"] {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("root");
            let outside = tmp.path().join("outside");
            fs::create_dir(&outside).unwrap();
            let link_target = outside.clone();
            let planted = FaultFs::recording().with_hook(move |op, path| {
                let is_staging = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(".staging-"));
                if op == "create_dir" && is_staging {
                    std::os::unix::fs::symlink(&link_target, path.join(target_name)).unwrap();
                }
            });
            let (layout, _) = faulty(&root, planted);
            let err = layout.write(&id(1), &files("v")).unwrap_err();
            assert!(matches!(err, Error::Symlink { .. }), "{target_name}: {err}");
            assert_eq!(
                names(&outside),
                Vec::<String>::new(),
                "nothing written through the link"
            );
            assert_eq!(
                names(&root),
                Vec::<String>::new(),
                "staging removed, no gen dir"
            );
        }
    }

    /// Records a successful write of `target` over a root holding `gen-1` ("old"): the number of
    /// filesystem calls and the step of the install rename.
    fn recorded_write(target: PackageIdentity) -> (usize, usize) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        Layout::new(&root)
            .unwrap()
            .write(&id(1), &files("old"))
            .unwrap();
        let (layout, fs) = faulty(&root, FaultFs::recording());
        layout.write(&target, &files("new")).unwrap();
        let install = fs
            .ops()
            .iter()
            .position(|(op, p, _)| {
                *op == "rename"
                    && p.file_name()
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .starts_with(".staging-")
            })
            .unwrap();
        (fs.calls(), install)
    }

    #[test]
    fn spec_5_2_write_failure_at_every_step_leaves_no_new_gen_dir_and_keeps_previous() {
        let (steps, install) = recorded_write(id(2));
        assert!(steps >= 10 && install + 1 < steps, "{steps} {install}");
        for persistent in [false, true] {
            for n in 0..steps {
                let tmp = tempfile::tempdir().unwrap();
                let root = tmp.path().join("root");
                Layout::new(&root)
                    .unwrap()
                    .write(&id(1), &files("old"))
                    .unwrap();
                let fault = if persistent {
                    FaultFs::failing_from(n)
                } else {
                    FaultFs::failing_once_at(n)
                };
                let (layout, _) = faulty(&root, fault);
                let result = layout.write(&id(2), &files("new"));
                let at = format!("step {n} persistent={persistent}");
                assert_eq!(
                    tree(&root.join("gen-1")),
                    Some(as_tree(&files("old"))),
                    "{at}"
                );
                if n > install {
                    // Only the best-effort root sync follows the install rename.
                    assert!(result.is_ok(), "{at}");
                    assert_eq!(
                        tree(&root.join("gen-2")),
                        Some(as_tree(&files("new"))),
                        "{at}"
                    );
                    assert_eq!(names(&root), vec!["gen-1", "gen-2"], "{at}");
                } else {
                    assert!(result.is_err(), "{at}");
                    assert!(!root.join("gen-2").exists(), "{at}");
                    let left = names(&root);
                    if persistent {
                        // The disk went away: the staging cleanup may have failed too.
                        assert!(
                            left.iter()
                                .all(|n| n == "gen-1" || n.starts_with(".staging-gen-2-")),
                            "{at}: {left:?}"
                        );
                    } else {
                        assert_eq!(left, vec!["gen-1"], "{at}");
                    }
                }
            }
        }
    }

    #[test]
    fn spec_5_2_write_replacing_same_identity_fails_safely_at_every_step() {
        let (steps, install) = recorded_write(id(1));
        for n in 0..steps {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("root");
            Layout::new(&root)
                .unwrap()
                .write(&id(1), &files("old"))
                .unwrap();
            let (layout, _) = faulty(&root, FaultFs::failing_once_at(n));
            let result = layout.write(&id(1), &files("new"));
            let now = tree(&root.join("gen-1"));
            if n > install {
                // After the install rename only the best-effort root sync and aside removal run.
                assert!(result.is_ok(), "step {n}");
                assert_eq!(now, Some(as_tree(&files("new"))), "step {n}");
                let left = names(&root);
                assert!(
                    left.iter()
                        .all(|n| n == "gen-1" || n.starts_with(".aside-gen-1-")),
                    "step {n}: {left:?}"
                );
                Layout::new(&root)
                    .unwrap()
                    .prune(&[id(1)], &NoLeases)
                    .unwrap();
                assert_eq!(names(&root), vec!["gen-1"]);
            } else {
                assert!(result.is_err(), "step {n}");
                assert_eq!(now, Some(as_tree(&files("old"))), "step {n}");
                assert_eq!(names(&root), vec!["gen-1"], "step {n}");
            }
        }
        // Persistent failure: gen-1, if present, is complete (old or new); if absent, the error
        // names the aside copy, which holds the old package complete.
        for n in 0..steps {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("root");
            Layout::new(&root)
                .unwrap()
                .write(&id(1), &files("old"))
                .unwrap();
            let (layout, _) = faulty(&root, FaultFs::failing_from(n));
            let result = layout.write(&id(1), &files("new"));
            match tree(&root.join("gen-1")) {
                Some(t) if result.is_ok() => {
                    assert_eq!(t, as_tree(&files("new")), "step {n}");
                }
                Some(t) => assert_eq!(t, as_tree(&files("old")), "step {n}"),
                None => match result {
                    Err(Error::RestoreFailed { aside, .. }) => {
                        assert_eq!(tree(&aside), Some(as_tree(&files("old"))), "step {n}");
                    }
                    other => panic!("step {n}: gen-1 missing without RestoreFailed: {other:?}"),
                },
            }
        }
    }

    #[test]
    fn spec_5_2_write_stat_error_other_than_not_exist_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let dir = root.join("gen-4");
        let (layout, _) = faulty(
            &root,
            FaultFs::when(move |_, op, p| op == "entry_kind" && p == dir),
        );
        let err = layout.write(&id(4), &files("v")).unwrap_err();
        assert!(matches!(err, Error::Io { op: "inspect", .. }), "{err}");
        assert_eq!(names(&root), Vec::<String>::new(), "staging removed");
    }

    #[test]
    fn spec_5_2_write_install_failure_removes_staging_and_renames_aside_back() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        Layout::new(&root)
            .unwrap()
            .write(&id(5), &files("old"))
            .unwrap();
        let (layout, _) = faulty(
            &root,
            FaultFs::when(|_, op, p| {
                op == "rename"
                    && p.file_name()
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .starts_with(".staging-")
            }),
        );
        let err = layout.write(&id(5), &files("new")).unwrap_err();
        assert!(matches!(err, Error::Io { op: "install", .. }), "{err}");
        assert_eq!(names(&root), vec!["gen-5"]);
        assert_eq!(tree(&root.join("gen-5")), Some(as_tree(&files("old"))));
    }

    #[test]
    fn spec_5_2_write_install_and_restore_failure_names_the_aside_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        Layout::new(&root)
            .unwrap()
            .write(&id(5), &files("old"))
            .unwrap();
        let (layout, _) = faulty(
            &root,
            FaultFs::when(|_, op, p| {
                let name = p.file_name().unwrap().to_str().unwrap();
                op == "rename" && (name.starts_with(".staging-") || name.starts_with(".aside-"))
            }),
        );
        let err = layout.write(&id(5), &files("new")).unwrap_err();
        let Error::RestoreFailed { aside, .. } = &err else {
            panic!("{err}");
        };
        assert!(err.to_string().contains(".aside-gen-5-"), "{err}");
        assert_eq!(tree(aside), Some(as_tree(&files("old"))));
        let layout = Layout::new(&root).unwrap();
        assert_eq!(
            layout.packages().unwrap(),
            Vec::new(),
            "no complete-looking dir"
        );
    }

    // ---- §5.2 prune ----

    #[test]
    fn spec_5_2_prune_missing_root_is_ok() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().join("never")).unwrap();
        assert_eq!(
            layout.prune(&[id(1)], &NoLeases).unwrap(),
            Vec::<PathBuf>::new()
        );
        assert!(!tmp.path().join("never").exists());
    }

    #[test]
    fn spec_5_2_prune_removes_superseded_staging_aside_and_foreign_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let layout = Layout::new(&root).unwrap();
        for g in [1, 2, 3] {
            layout.write(&id(g), &files("v")).unwrap();
        }
        layout.write(&claimed(3, "x"), &files("v")).unwrap();
        fs::create_dir_all(root.join(".staging-gen-4-0123456789ab/cue.mod")).unwrap();
        fs::create_dir(root.join(".aside-gen-3-0123456789ab")).unwrap();
        fs::write(root.join("stray.txt"), b"x").unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep.txt"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("gen-9")).unwrap();

        let removed = layout.prune(&[id(3)], &NoLeases).unwrap();
        assert_eq!(names(&root), vec!["gen-3"]);
        assert_eq!(removed.len(), 7, "{removed:?}");
        assert!(
            outside.join("keep.txt").exists(),
            "links are removed, not followed"
        );
    }

    #[test]
    fn spec_5_2_prune_continues_past_errors_and_reports_them_all() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let plain = Layout::new(&root).unwrap();
        for g in 1..=5 {
            plain.write(&id(g), &files("v")).unwrap();
        }
        let (layout, _) = faulty(
            &root,
            FaultFs::when(|_, op, p| {
                op == "remove_dir_all" && (p.ends_with("gen-1") || p.ends_with("gen-3"))
            }),
        );
        let err = layout.prune(&[id(5)], &NoLeases).unwrap_err();
        let Error::Prune { failures, .. } = &err else {
            panic!("{err}");
        };
        let failed: Vec<_> = failures.iter().map(|f| f.path.clone()).collect();
        assert_eq!(failed, vec![root.join("gen-1"), root.join("gen-3")]);
        assert!(err.to_string().contains("gen-1") && err.to_string().contains("gen-3"));
        assert_eq!(names(&root), vec!["gen-1", "gen-3", "gen-5"]);
    }

    #[test]
    fn spec_5_2_prune_never_removes_the_current_or_a_leased_package() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let layout = Layout::new(&root).unwrap();
        let store = Store::new();
        for g in 1..=4 {
            layout.write(&id(g), &files("v")).unwrap();
        }
        store.set_generated(record(&layout, id(2)));
        let (_, lease2) = store.lease().unwrap();
        store.set_generated(record(&layout, id(3)));
        let (_, lease3) = store.lease().unwrap();
        store.set_generated(record(&layout, id(4)));
        layout.prune(&[], &store).unwrap();
        assert_eq!(layout.packages().unwrap(), vec![id(2), id(3), id(4)]);
        drop(lease2);
        store.clear();
        layout.prune(&[], &store).unwrap();
        assert_eq!(
            layout.packages().unwrap(),
            vec![id(3)],
            "cleared, only the lease pins"
        );
        drop(lease3);
        layout.prune(&[], &store).unwrap();
        assert_eq!(layout.packages().unwrap(), Vec::new());
    }

    #[test]
    fn spec_5_2_keep_set_leased_package_is_pruned_by_first_build_after_release() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().join("root")).unwrap();
        let store = Store::new();
        // Generation 1 is built and leased by a render.
        layout.write(&id(1), &files("1")).unwrap();
        store.set_generated(record(&layout, id(1)));
        let (leased, guard) = store.lease().unwrap();
        // Generation 2 builds: keep = {current} ∪ leased.
        layout.write(&id(2), &files("2")).unwrap();
        store.set_generated(record(&layout, id(2)));
        let mut keep = vec![id(2)];
        keep.extend(store.leased().iter().map(|l| l.identity));
        assert_eq!(keep, vec![id(2), id(1)]);
        layout.prune(&keep, &NoLeases).unwrap();
        assert_eq!(tree(&leased.dir), Some(as_tree(&files("1"))));
        // A failed build of generation 3 writes its directory but never prunes.
        layout.write(&id(3), &files("3")).unwrap();
        drop(guard);
        assert_eq!(layout.packages().unwrap(), vec![id(1), id(2), id(3)]);
        // The first successful build after the release prunes the released package.
        layout.write(&id(4), &files("4")).unwrap();
        store.set_generated(record(&layout, id(4)));
        layout.prune(&store.pinned(), &store).unwrap();
        assert_eq!(layout.packages().unwrap(), vec![id(4)]);
    }

    // ---- §5.2 reset ----

    #[test]
    fn spec_5_2_reset_removes_everything_and_recreates_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let layout = Layout::new(&root).unwrap();
        layout.reset().unwrap();
        assert!(root.is_dir(), "missing root is created");
        layout.write(&id(1), &files("v")).unwrap();
        layout.write(&claimed(1, "c"), &files("v")).unwrap();
        fs::write(root.join("stray"), b"x").unwrap();
        layout.reset().unwrap();
        assert!(root.is_dir());
        assert_eq!(names(&root), Vec::<String>::new());
    }

    #[test]
    fn spec_5_2_reset_empty_root_is_an_error() {
        // The root is checked when the layout is built, so no layout with an empty root exists.
        assert!(matches!(Layout::new(""), Err(Error::NoRoot)));
        assert!(matches!(
            Layout::with_fs("", Arc::new(RealFs)),
            Err(Error::NoRoot)
        ));
    }

    #[test]
    fn spec_5_2_reset_failure_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        Layout::new(&root)
            .unwrap()
            .write(&id(1), &files("v"))
            .unwrap();
        let (layout, _) = faulty(&root, FaultFs::when(|_, op, _| op == "remove_dir_all"));
        assert!(matches!(layout.reset(), Err(Error::Prune { .. })));
        let (layout, _) = faulty(&root, FaultFs::when(|_, op, _| op == "create_dir_all"));
        assert!(matches!(
            layout.reset(),
            Err(Error::Io {
                op: "create directory",
                ..
            })
        ));
    }

    #[test]
    fn crash_reset_after_staging_and_aside_leftovers_leaves_an_empty_root() {
        // Simulate crashes: writes that die (the disk goes away) after staging, and after the
        // move-aside, leave leftovers; reset at the next boot removes them all.
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        Layout::new(&root)
            .unwrap()
            .write(&id(1), &files("old"))
            .unwrap();
        // The disk fails once the files are written: staging stays behind.
        let dies_before_sync = FaultFs::when(|_, op, _| op == "sync_dir" || op == "remove_dir_all");
        let (layout, _) = faulty(&root, dies_before_sync);
        layout.write(&id(2), &files("new")).unwrap_err();
        // The aside copy cannot be removed after an install: it stays behind.
        let aside_stuck = FaultFs::when(|_, op, _| op == "remove_dir_all");
        let (layout, _) = faulty(&root, aside_stuck);
        layout.write(&id(1), &files("new")).unwrap();
        // Leftovers a killed process would leave mid-write.
        fs::create_dir_all(root.join(".staging-gen-3-aaaaaaaaaaaa/cue.mod")).unwrap();
        fs::write(
            root.join(".staging-gen-3-aaaaaaaaaaaa/cue.mod/module.cue"),
            b"partial",
        )
        .unwrap();
        fs::create_dir_all(root.join(".aside-gen-1-bbbbbbbbbbbb/cue.mod")).unwrap();
        let before = names(&root);
        assert!(
            before.iter().any(|n| n.starts_with(".staging-")),
            "{before:?}"
        );
        assert!(
            before.iter().any(|n| n.starts_with(".aside-")),
            "{before:?}"
        );
        let layout = Layout::new(&root).unwrap();
        assert_eq!(
            layout.packages().unwrap(),
            vec![id(1)],
            "leftovers are not packages"
        );
        layout.reset().unwrap();
        assert!(root.is_dir());
        assert_eq!(names(&root), Vec::<String>::new());
    }

    // ---- §5.2 generations / packages ----

    #[test]
    fn spec_5_2_generations_lists_complete_gen_dirs_ascending_skipping_others() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let layout = Layout::new(&root).unwrap();
        assert_eq!(
            layout.generations().unwrap(),
            Vec::<i64>::new(),
            "missing root"
        );
        let c2 = claimed(2, "x");
        for dir in [
            "gen-10".to_owned(),
            "gen-1".to_owned(),
            "gen-2".to_owned(),
            c2.to_string(),
            "gen-abc".to_owned(),
            "gen-01".to_owned(),
            "gen-0".to_owned(),
            ".staging-gen-3-0123456789ab".to_owned(),
            ".aside-gen-4-0123456789ab".to_owned(),
        ] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        fs::write(root.join("gen-5"), b"a file").unwrap();
        std::os::unix::fs::symlink(root.join("gen-1"), root.join("gen-6")).unwrap();
        assert_eq!(layout.generations().unwrap(), vec![1, 2, 10]);
        assert_eq!(layout.packages().unwrap(), vec![id(1), id(2), c2, id(10)]);
    }

    // ---- §5.3 hazard, fixed by §5.4 identity keying ----

    #[test]
    fn spec_5_3_claim_activating_at_same_generation_keeps_the_leased_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let layout = Layout::new(&root).unwrap();
        let store = Store::new();
        let before = id(7);
        layout.ensure(&before, &files("no claims")).unwrap();
        store.set_generated(record(&layout, before));
        let (held, mut guard) = store.lease().unwrap();

        // A claim activates: same generation, new identity, a new directory beside the old one.
        let after = claimed(7, "opmodel.dev/catalogs/provider");
        let (dir, how) = layout.ensure(&after, &files("with claim")).unwrap();
        assert_eq!(how, Ensured::Written);
        assert_ne!(dir, held.dir);
        store.set_generated(record(&layout, after));
        layout.prune(&store.pinned(), &store).unwrap();
        assert_eq!(layout.packages().unwrap(), vec![before, after]);
        assert_eq!(
            tree(&held.dir),
            Some(as_tree(&files("no claims"))),
            "render still reads"
        );
        assert_eq!(tree(&dir), Some(as_tree(&files("with claim"))));

        // After the render releases, the next prune removes the old package.
        guard.release();
        layout.prune(&store.pinned(), &store).unwrap();
        assert_eq!(layout.packages().unwrap(), vec![after]);
        assert_eq!(names(&root), vec![after.to_string()]);
    }

    #[test]
    fn ensure_reuses_a_byte_identical_leased_package_without_touching_it() {
        // A claim toggles off and on at one generation while a render leases the older package.
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().join("root")).unwrap();
        let store = Store::new();
        let a = claimed(3, "a");
        let b = id(3);
        layout.ensure(&a, &files("a")).unwrap();
        store.set_generated(record(&layout, a));
        let (held, _guard) = store.lease().unwrap();
        let inode = fs::metadata(&held.dir).unwrap().ino();
        layout.ensure(&b, &files("b")).unwrap();
        store.set_generated(record(&layout, b));
        let (dir, how) = layout.ensure(&a, &files("a")).unwrap();
        assert_eq!((dir.clone(), how), (held.dir.clone(), Ensured::Reused));
        assert_eq!(fs::metadata(&dir).unwrap().ino(), inode, "not moved");
        assert_eq!(layout.packages().unwrap(), vec![b, a]);
    }

    #[test]
    fn ensure_rewrites_a_package_that_differs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let layout = Layout::new(&root).unwrap();
        layout.write(&id(1), &files("old")).unwrap();
        let (_, how) = layout.ensure(&id(1), &files("new")).unwrap();
        assert_eq!(how, Ensured::Written);
        assert_eq!(tree(&root.join("gen-1")), Some(as_tree(&files("new"))));
        // An extra file, an extra directory or a missing file also differ.
        fs::write(root.join("gen-1/extra.cue"), b"x").unwrap();
        assert_eq!(
            layout.ensure(&id(1), &files("new")).unwrap().1,
            Ensured::Written
        );
        fs::create_dir(root.join("gen-1/empty")).unwrap();
        assert_eq!(
            layout.ensure(&id(1), &files("new")).unwrap().1,
            Ensured::Written
        );
        fs::remove_file(root.join("gen-1/platform.cue")).unwrap();
        assert_eq!(
            layout.ensure(&id(1), &files("new")).unwrap().1,
            Ensured::Written
        );
        assert_eq!(
            layout.ensure(&id(1), &files("new")).unwrap().1,
            Ensured::Reused
        );
        assert_eq!(tree(&root.join("gen-1")), Some(as_tree(&files("new"))));
    }

    #[test]
    fn concurrent_writes_and_prunes_are_serialized() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path().join("root")).unwrap();
        std::thread::scope(|s| {
            for t in 0..4i64 {
                let layout = &layout;
                s.spawn(move || {
                    for i in 0..10 {
                        let g = t * 100 + i + 1;
                        // A prune removing a concurrent write's staging directory would fail it.
                        layout.write(&id(g), &files("v")).unwrap();
                        layout.prune(&[id(g)], &NoLeases).unwrap();
                    }
                });
            }
        });
        let left = layout.packages().unwrap();
        assert!(left.len() <= 4, "{left:?}");
        assert_eq!(names(layout.root()).len(), left.len(), "no leftovers");
        for p in left {
            assert_eq!(tree(&layout.dir(&p)), Some(as_tree(&files("v"))));
        }
    }

    #[test]
    fn layout_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Layout>();
    }

    #[test]
    fn random_suffixes_are_12_lowercase_hex_and_distinct() {
        let all: BTreeSet<String> = (0..1000).map(|_| random_suffix()).collect();
        assert_eq!(all.len(), 1000);
        assert!(all.iter().all(|s| s.len() == 12
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))));
    }
}
