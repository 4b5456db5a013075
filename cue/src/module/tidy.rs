//! Minimal version selection (MVS) and tidy module files: the only MVS of the project (the
//! loader's [`super::mvs`], the registry client and `opm-operator mod tidy` all use it).
//!
//! Rules (docs/design/render.md §2.2; upstream `internal/mod/modrequirements`, after Go's MVS):
//! - the requirement graph's nodes are `path@vN` + version, its edges the `deps` of each node's
//!   module file; the main module's deps are the roots;
//! - every node reachable from the roots is visited once (including versions that end up not
//!   selected), and for each `path@vN` the highest version seen wins (semver precedence,
//!   [`super::semver::compare`]); different majors of one path are different modules;
//! - the main module itself is never part of the result, even when a dependency requires it;
//! - a tidy module file keeps the main module's fields and lists the whole build list as deps;
//!   `default: true` is kept where the main module had it, and added for a path with exactly one
//!   major in the build list and no explicit default (the implicit default made explicit).

use super::file::{split_major, Dep, ModuleFile};
use super::registry::{ModuleVersion, Registry, RegistryError};
use super::semver;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A source of module files by coordinate: a registry that can read `cue.mod/module.cue` alone
/// (the OCI client reads one blob), or any [`Registry`] through [`ByFetch`].
pub trait ModuleFileSource {
    /// The error type.
    type Error;
    /// The module file of `m`.
    fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, Self::Error>;
}

/// A [`Registry`] as a [`ModuleFileSource`]: fetches the module and reads its module file.
pub struct ByFetch<'a>(pub &'a dyn Registry);

impl ModuleFileSource for ByFetch<'_> {
    type Error = RegistryError;
    fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, RegistryError> {
        let fs = self.0.fetch(m)?;
        let invalid = |message: String| RegistryError::Invalid {
            module: m.to_string(),
            message,
        };
        let bytes = fs
            .read_file("cue.mod/module.cue")
            .map_err(|e| invalid(e.to_string()))?;
        ModuleFile::parse(&bytes).map_err(invalid)
    }
}

/// MVS from `roots` (`path@vN` → version), never selecting `main` (`path@vN`); visits every
/// reachable node once, breadth first, and goes on past errors, returning all of them.
pub(crate) fn select_all<S: ModuleFileSource>(
    roots: impl IntoIterator<Item = (String, String)>,
    main: Option<&str>,
    source: &S,
) -> (BTreeMap<String, String>, Vec<S::Error>) {
    let mut selected: BTreeMap<String, String> = BTreeMap::new();
    let mut visited: BTreeSet<(String, String)> = BTreeSet::new();
    let mut queue: VecDeque<(String, String)> = roots.into_iter().collect();
    let mut errors = Vec::new();
    while let Some((path, version)) = queue.pop_front() {
        if Some(path.as_str()) == main || !visited.insert((path.clone(), version.clone())) {
            continue;
        }
        let better = selected
            .get(&path)
            .is_none_or(|cur| semver::compare(&version, cur).is_gt());
        if better {
            selected.insert(path.clone(), version.clone());
        }
        match source.module_file(&ModuleVersion { path, version }) {
            Ok(mf) => queue.extend(mf.deps.into_iter().map(|(p, d)| (p, d.version))),
            Err(e) => errors.push(e),
        }
    }
    (selected, errors)
}

/// MVS from the main module's deps: the selected version per `path@vN`, or the first error.
pub fn select<S: ModuleFileSource>(
    main: &ModuleFile,
    source: &S,
) -> Result<BTreeMap<String, String>, S::Error> {
    let me = main.path_with_major();
    let roots = main
        .deps
        .iter()
        .map(|(p, d)| (p.clone(), d.version.clone()));
    let (selected, errors) = select_all(roots, Some(&me), source);
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(selected),
    }
}

/// The tidy form of `main`: the same module file with the full build list as deps.
pub fn tidy<S: ModuleFileSource>(main: &ModuleFile, source: &S) -> Result<ModuleFile, S::Error> {
    let selected = select(main, source)?;
    let base = |p: &str| split_major(p).0.to_string();
    let mut majors: BTreeMap<String, usize> = BTreeMap::new();
    for p in selected.keys() {
        *majors.entry(base(p)).or_default() += 1;
    }
    let explicit_default: BTreeSet<String> = main
        .deps
        .iter()
        .filter(|(_, d)| d.default)
        .map(|(p, _)| base(p))
        .collect();
    let deps = selected
        .iter()
        .map(|(p, v)| {
            let b = base(p);
            let default = match main.deps.get(p) {
                Some(d) if d.default => true,
                _ => !explicit_default.contains(&b) && majors.get(&b) == Some(&1),
            };
            (
                p.clone(),
                Dep {
                    version: v.clone(),
                    default,
                },
            )
        })
        .collect();
    Ok(ModuleFile {
        deps,
        ..main.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    type Edges = Vec<(&'static str, &'static str)>;

    struct Graph {
        files: BTreeMap<(String, String), Edges>,
        asked: RefCell<Vec<String>>,
    }

    impl Graph {
        fn new(edges: &[(&str, &str, Edges)]) -> Graph {
            Graph {
                files: edges
                    .iter()
                    .map(|(p, v, d)| ((p.to_string(), v.to_string()), d.clone()))
                    .collect(),
                asked: RefCell::new(Vec::new()),
            }
        }
    }

    fn deps_of(d: &[(&str, &str, bool)]) -> BTreeMap<String, Dep> {
        d.iter()
            .map(|(p, v, default)| {
                (
                    p.to_string(),
                    Dep {
                        version: v.to_string(),
                        default: *default,
                    },
                )
            })
            .collect()
    }

    impl ModuleFileSource for Graph {
        type Error = String;
        fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, String> {
            self.asked.borrow_mut().push(m.to_string());
            let deps = self
                .files
                .get(&(m.path.clone(), m.version.clone()))
                .ok_or_else(|| format!("{m}: not found"))?;
            let d: Vec<(&str, &str, bool)> = deps.iter().map(|(p, v)| (*p, *v, false)).collect();
            Ok(ModuleFile {
                module: m.path.clone(),
                language_version: None,
                source: None,
                deps: deps_of(&d),
            })
        }
    }

    fn main(deps: &[(&str, &str, bool)]) -> ModuleFile {
        ModuleFile {
            module: "m.test/main@v0".into(),
            language_version: Some("v0.17.0".into()),
            source: Some(super::super::SourceKind::SelfFiles),
            deps: deps_of(deps),
        }
    }

    #[test]
    fn highest_required_version_wins_transitively() {
        let g = Graph::new(&[
            ("a.t/a@v0", "v0.1.0", vec![("c.t/c@v0", "v0.2.0")]),
            (
                "b.t/b@v0",
                "v0.1.0",
                vec![("c.t/c@v0", "v0.3.0-alpha.1"), ("a.t/a@v0", "v0.2.0")],
            ),
            ("a.t/a@v0", "v0.2.0", vec![("c.t/c@v0", "v0.1.0")]),
            ("c.t/c@v0", "v0.1.0", vec![]),
            ("c.t/c@v0", "v0.2.0", vec![]),
            (
                "c.t/c@v0",
                "v0.3.0-alpha.1",
                vec![("m.test/main@v0", "v0.0.1")],
            ),
        ]);
        let m = main(&[("a.t/a@v0", "v0.1.0", false), ("b.t/b@v0", "v0.1.0", false)]);
        let sel = select(&m, &g).unwrap();
        assert_eq!(sel["a.t/a@v0"], "v0.2.0");
        assert_eq!(sel["b.t/b@v0"], "v0.1.0");
        assert_eq!(sel["c.t/c@v0"], "v0.3.0-alpha.1");
        assert!(!sel.contains_key("m.test/main@v0"));
        assert_eq!(sel.len(), 3);
    }

    #[test]
    fn majors_are_separate_defaults_and_errors() {
        let g = Graph::new(&[
            ("a.t/a@v0", "v0.1.0", vec![("c.t/c@v1", "v1.0.0")]),
            ("c.t/c@v0", "v0.5.0", vec![]),
            ("c.t/c@v1", "v1.0.0", vec![]),
        ]);
        let m = main(&[("a.t/a@v0", "v0.1.0", false), ("c.t/c@v0", "v0.5.0", true)]);
        let t = tidy(&m, &g).unwrap();
        assert_eq!(t.deps["c.t/c@v0"].version, "v0.5.0");
        assert!(t.deps["c.t/c@v0"].default, "explicit default kept");
        assert!(
            !t.deps["c.t/c@v1"].default,
            "the other major is not default"
        );
        assert!(t.deps["a.t/a@v0"].default, "single major becomes default");
        assert_eq!(t.module, m.module);
        // The tidy file reads back equal.
        assert_eq!(ModuleFile::parse(t.to_cue().as_bytes()).unwrap(), t);
        let missing = main(&[("x.t/x@v0", "v0.1.0", false)]);
        assert!(select(&missing, &g).unwrap_err().contains("not found"));
    }

    #[test]
    fn each_node_is_read_once() {
        let g = Graph::new(&[
            ("a.t/a@v0", "v0.1.0", vec![("c.t/c@v0", "v0.1.0")]),
            ("b.t/b@v0", "v0.1.0", vec![("c.t/c@v0", "v0.1.0")]),
            ("c.t/c@v0", "v0.1.0", vec![]),
        ]);
        let m = main(&[("a.t/a@v0", "v0.1.0", false), ("b.t/b@v0", "v0.1.0", false)]);
        select(&m, &g).unwrap();
        assert_eq!(g.asked.borrow().len(), 3);
    }
}
