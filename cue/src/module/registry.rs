//! The two I/O seams of the evaluator: [`FileSystem`] (read-only source trees) and [`Registry`]
//! (versioned CUE modules). Both are synchronous; an async implementation bridges on its side.
//!
//! Paths given to a [`FileSystem`] are `/`-separated, relative to its root, never absolute and never
//! containing `..` (callers normalise; implementations must refuse anything else).

pub use cue_modpath::ModuleVersion;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsEntry {
    /// The entry's name (no `/`).
    pub name: String,
    /// `true` for a directory.
    pub is_dir: bool,
}

/// A file-system error, carrying the path it concerns (carried by [`crate::Error::Fs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FsError {
    /// No such file or directory.
    NotFound(String),
    /// The path is absolute, contains `..`, or is otherwise not acceptable.
    InvalidPath(String),
    /// Any other I/O failure, with its message.
    Io {
        /// The path concerned.
        path: String,
        /// What went wrong.
        message: String,
    },
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsError::NotFound(p) => write!(f, "{p}: no such file or directory"),
            FsError::InvalidPath(p) => write!(f, "{p}: invalid path"),
            FsError::Io { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

/// A read-only tree of source files.
pub trait FileSystem: Send + Sync {
    /// Reads a whole file.
    fn read_file(&self, path: &str) -> Result<Vec<u8>, FsError>;
    /// Lists a directory, sorted by name. `""` is the root.
    fn read_dir(&self, path: &str) -> Result<Vec<FsEntry>, FsError>;
}

/// An in-memory [`FileSystem`]: a map from `/`-separated path to contents. Directories are implied
/// by the paths of the files in them.
#[derive(Clone, Debug, Default)]
pub struct MemFs {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemFs {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file.
    pub fn insert(&mut self, path: impl Into<String>, contents: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), contents.into());
    }

    /// Builder form of [`MemFs::insert`].
    pub fn with(mut self, path: impl Into<String>, contents: impl Into<Vec<u8>>) -> Self {
        self.insert(path, contents);
        self
    }
}

fn check_path(path: &str) -> Result<(), FsError> {
    if path.starts_with('/') || path.split('/').any(|seg| seg == "..") {
        return Err(FsError::InvalidPath(path.to_string()));
    }
    Ok(())
}

impl FileSystem for MemFs {
    fn read_file(&self, path: &str) -> Result<Vec<u8>, FsError> {
        check_path(path)?;
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| FsError::NotFound(path.to_string()))
    }

    fn read_dir(&self, path: &str) -> Result<Vec<FsEntry>, FsError> {
        check_path(path)?;
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{}/", path.trim_end_matches('/'))
        };
        let mut out: BTreeMap<String, bool> = BTreeMap::new();
        for key in self.files.keys() {
            if let Some(rest) = key.strip_prefix(&prefix) {
                match rest.split_once('/') {
                    Some((dir, _)) => {
                        out.insert(dir.to_string(), true);
                    }
                    None => {
                        out.entry(rest.to_string()).or_insert(false);
                    }
                }
            }
        }
        if out.is_empty() && !path.is_empty() {
            return Err(FsError::NotFound(path.to_string()));
        }
        Ok(out
            .into_iter()
            .map(|(name, is_dir)| FsEntry { name, is_dir })
            .collect())
    }
}

/// Errors from a [`Registry`] (carried by [`crate::Error::Registry`]). Every variant names the
/// module coordinate it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// The module or version does not exist; `available` lists the published versions in that major.
    NotFound {
        /// The requested coordinate.
        module: String,
        /// Published versions in the requested major, ascending.
        available: Vec<String>,
    },
    /// A failure that may succeed on retry (registry down, timeout, 5xx).
    Transient {
        /// The requested coordinate.
        module: String,
        /// What went wrong.
        message: String,
    },
    /// The artifact exists but is not an acceptable CUE module (media type, digest, zip safety, ...).
    Invalid {
        /// The requested coordinate.
        module: String,
        /// What is wrong with it.
        message: String,
    },
    /// Authentication or authorisation failed.
    Denied {
        /// The requested coordinate.
        module: String,
        /// The registry's answer.
        message: String,
    },
    /// A signature policy is in force and the artifact is not signed as it requires (unsigned,
    /// signed with another key, or the signature does not match the artifact).
    Unverified {
        /// The requested coordinate.
        module: String,
        /// Why the verification failed.
        message: String,
    },
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistryError::NotFound { module, available } => {
                let available = if available.is_empty() {
                    "none".to_string()
                } else {
                    available.join(", ")
                };
                write!(f, "{module}: not found (available versions: {available})")
            }
            RegistryError::Transient { module, message } => {
                write!(f, "{module}: transient registry error: {message}")
            }
            RegistryError::Invalid { module, message } => {
                write!(f, "{module}: invalid module artifact: {message}")
            }
            RegistryError::Denied { module, message } => {
                write!(f, "{module}: access denied: {message}")
            }
            RegistryError::Unverified { module, message } => {
                write!(f, "{module}: signature verification failed: {message}")
            }
        }
    }
}

/// A source of versioned CUE modules. Implementations must be safe to call from several threads.
pub trait Registry: Send + Sync {
    /// Fetches the module's file tree (the unpacked module zip: `cue.mod/module.cue` and packages).
    fn fetch(&self, module: &ModuleVersion) -> Result<Arc<dyn FileSystem>, RegistryError>;
    /// Lists the published versions of `path` (with major suffix, `example.com/lib@v1`), ascending
    /// by semver.
    fn versions(&self, path: &str) -> Result<Vec<String>, RegistryError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memfs_lists_implied_directories() {
        let fs = MemFs::new()
            .with("a/b.cue", "x: 1")
            .with("a/c/d.cue", "y: 2")
            .with("top.cue", "");
        let root = fs.read_dir("").unwrap();
        assert_eq!(
            root,
            vec![
                FsEntry {
                    name: "a".into(),
                    is_dir: true
                },
                FsEntry {
                    name: "top.cue".into(),
                    is_dir: false
                }
            ]
        );
        assert_eq!(fs.read_dir("a").unwrap().len(), 2);
        assert_eq!(fs.read_file("a/b.cue").unwrap(), b"x: 1");
        assert!(matches!(fs.read_file("../x"), Err(FsError::InvalidPath(_))));
        assert!(matches!(fs.read_dir("nope"), Err(FsError::NotFound(_))));
    }

    #[test]
    fn module_version_display_joins_base_and_version() {
        let m = ModuleVersion {
            path: "example.com/lib@v1".into(),
            version: "v1.2.3".into(),
        };
        assert_eq!(m.to_string(), "example.com/lib@v1.2.3");
    }
}

/// An in-memory [`Registry`] (for tests, and for callers holding module trees already): module
/// path with major + version → tree. It records every fetch, so tests can check that a module
/// was fetched once.
#[derive(Debug, Default)]
pub struct MemRegistry {
    modules: BTreeMap<ModuleVersion, Arc<MemFs>>,
    fetches: Mutex<Vec<String>>,
}

impl MemRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces module `path` (with its major, `example.com/m@v0`) at `version`.
    pub fn insert(&mut self, path: &str, version: &str, fs: MemFs) {
        let mv = ModuleVersion {
            path: path.into(),
            version: version.into(),
        };
        self.modules.insert(mv, Arc::new(fs));
    }

    /// Builder form of [`MemRegistry::insert`].
    pub fn with(mut self, path: &str, version: &str, fs: MemFs) -> Self {
        self.insert(path, version, fs);
        self
    }

    /// The modules fetched so far (`path@version`), in order.
    pub fn fetches(&self) -> Vec<String> {
        match self.fetches.lock() {
            Ok(f) => f.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl Registry for MemRegistry {
    fn fetch(&self, module: &ModuleVersion) -> Result<Arc<dyn FileSystem>, RegistryError> {
        match self.fetches.lock() {
            Ok(mut f) => f.push(module.to_string()),
            Err(p) => p.into_inner().push(module.to_string()),
        }
        match self.modules.get(module) {
            Some(fs) => Ok(fs.clone() as Arc<dyn FileSystem>),
            None => Err(RegistryError::NotFound {
                module: module.to_string(),
                available: self.versions(&module.path)?,
            }),
        }
    }

    fn versions(&self, path: &str) -> Result<Vec<String>, RegistryError> {
        let mut v: Vec<String> = self
            .modules
            .keys()
            .filter(|m| m.path == path)
            .map(|m| m.version.clone())
            .collect();
        v.sort_by(|a, b| super::semver::compare(a, b));
        Ok(v)
    }
}
