//! The dependency closure of the generated platform module (docs/design/operator.md §3.3).
//!
//! Rules implemented:
//! - Roots: the core pin (`<core path>` at the builder's core version) plus every entry, disabled
//!   ones included, at `"v" + version`.
//! - The closure walks the published module files (the module-file layer of each pinned artifact,
//!   never the zip) and selects, for each `path@vN`, the highest version any visited requirement
//!   names (minimum version selection; two majors of a path are two modules). Every reachable
//!   `(path, version)` node is read once.
//! - The result always contains every root at a version no lower than its pin; the generated
//!   module then pins core and every entry (§3.4 checks this again).
//! - A pin that is not published is a [`ClosureError::Resolution`] naming `path@version`; an
//!   unreachable registry is [`ClosureError::Transient`]. Neither is classified by message text:
//!   the class comes from the registry error's variant.
//!
//! All access to module files goes through [`ModFileSource`], the one seam between this code and
//! any `cue::module::ModuleFileSource` (the registry client's module-file reader among them).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use cue::module::{ModuleFileSource, ModuleVersion, RegistryError};

/// A source of published module files, reduced to what the closure needs: the requirements
/// (`path@vN` → `v`-prefixed version) of one module version.
pub trait ModFileSource: Send + Sync {
    /// The `deps` of the module file of `m`.
    fn requirements(&self, m: &ModuleVersion) -> Result<Vec<(String, String)>, RegistryError>;
}

/// Every module-file source of the module system (the registry client among them) is one.
impl<T> ModFileSource for T
where
    T: ModuleFileSource<Error = RegistryError> + Send + Sync,
{
    fn requirements(&self, m: &ModuleVersion) -> Result<Vec<(String, String)>, RegistryError> {
        let mf = self.module_file(m)?;
        Ok(mf.deps.into_iter().map(|(p, d)| (p, d.version)).collect())
    }
}

/// Why the closure could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClosureError {
    /// A module version is not published, or its artifact or module file is unusable.
    #[error("{0}")]
    Resolution(RegistryError),
    /// The registry could not be reached (may pass on retry).
    #[error("{0}")]
    Transient(RegistryError),
}

impl From<RegistryError> for ClosureError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Transient { .. } => ClosureError::Transient(e),
            other => ClosureError::Resolution(other),
        }
    }
}

/// Computes the tidied dependency list of `roots` (`path@vN` → `v`-prefixed version).
pub fn closure(
    source: &dyn ModFileSource,
    roots: &[ModuleVersion],
) -> Result<BTreeMap<String, String>, ClosureError> {
    let mut selected: BTreeMap<String, String> = BTreeMap::new();
    let mut visited: BTreeSet<ModuleVersion> = BTreeSet::new();
    let mut queue: VecDeque<ModuleVersion> = roots.iter().cloned().collect();
    while let Some(m) = queue.pop_front() {
        if !visited.insert(m.clone()) {
            continue;
        }
        let higher = selected
            .get(&m.path)
            .is_none_or(|cur| cue::module::semver::compare(&m.version, cur).is_gt());
        if higher {
            selected.insert(m.path.clone(), m.version.clone());
        }
        for (path, version) in source.requirements(&m)? {
            queue.push_back(ModuleVersion { path, version });
        }
    }
    Ok(selected)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Graph {
        nodes: BTreeMap<ModuleVersion, Vec<(String, String)>>,
        asked: Mutex<Vec<String>>,
        down: bool,
    }

    fn mv(p: &str, v: &str) -> ModuleVersion {
        ModuleVersion {
            path: p.into(),
            version: v.into(),
        }
    }

    impl ModFileSource for Graph {
        fn requirements(&self, m: &ModuleVersion) -> Result<Vec<(String, String)>, RegistryError> {
            self.asked.lock().unwrap().push(m.to_string());
            if self.down {
                return Err(RegistryError::Transient {
                    module: m.to_string(),
                    message: "connection refused".into(),
                });
            }
            self.nodes
                .get(m)
                .cloned()
                .ok_or_else(|| RegistryError::NotFound {
                    module: m.to_string(),
                    available: vec![],
                })
        }
    }

    fn graph(down: bool) -> Graph {
        let e = |p: &str, v: &str| (p.to_string(), v.to_string());
        let mut nodes = BTreeMap::new();
        nodes.insert(mv("t.test/core@v0", "v0.1.0"), vec![]);
        nodes.insert(mv("t.test/core@v0", "v0.2.0"), vec![]);
        nodes.insert(
            mv("t.test/a@v0", "v0.1.0"),
            vec![e("t.test/core@v0", "v0.2.0"), e("t.test/k@v0", "v0.1.0")],
        );
        nodes.insert(
            mv("t.test/b@v1", "v1.0.0"),
            vec![
                e("t.test/k@v0", "v0.3.0-alpha.1"),
                e("t.test/k@v1", "v1.0.0"),
            ],
        );
        nodes.insert(mv("t.test/k@v0", "v0.1.0"), vec![]);
        nodes.insert(mv("t.test/k@v0", "v0.3.0-alpha.1"), vec![]);
        nodes.insert(mv("t.test/k@v1", "v1.0.0"), vec![]);
        Graph {
            nodes,
            asked: Mutex::new(vec![]),
            down,
        }
    }

    #[test]
    fn highest_version_wins_and_majors_are_separate() {
        let g = graph(false);
        let c = closure(
            &g,
            &[
                mv("t.test/core@v0", "v0.1.0"),
                mv("t.test/a@v0", "v0.1.0"),
                mv("t.test/b@v1", "v1.0.0"),
            ],
        )
        .unwrap();
        let got: Vec<(&str, &str)> = c.iter().map(|(p, v)| (p.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("t.test/a@v0", "v0.1.0"),
                ("t.test/b@v1", "v1.0.0"),
                ("t.test/core@v0", "v0.2.0"),
                ("t.test/k@v0", "v0.3.0-alpha.1"),
                ("t.test/k@v1", "v1.0.0"),
            ]
        );
        // Every node once: core twice (two versions), a, b, k@v0 twice, k@v1.
        assert_eq!(g.asked.lock().unwrap().len(), 7);
    }

    #[test]
    fn missing_pin_is_resolution_and_outage_is_transient() {
        let g = graph(false);
        let e = closure(&g, &[mv("t.test/a@v0", "v0.9.0")]).unwrap_err();
        assert!(matches!(
            e,
            ClosureError::Resolution(RegistryError::NotFound { .. })
        ));
        assert!(e.to_string().contains("t.test/a@v0.9.0"), "{e}");
        let down = graph(true);
        let e = closure(&down, &[mv("t.test/a@v0", "v0.1.0")]).unwrap_err();
        assert!(matches!(e, ClosureError::Transient(_)), "{e:?}");
    }
}
