//! Minimal version selection (MVS) over module files, for writing tidy `cue.mod/module.cue` files.
//!
//! Rules implemented (CUE's `modrequirements`, after Go's MVS):
//! - The requirement graph's nodes are `path@vN` + version; the edges are the `deps` of each
//!   node's module file. The main module's deps are the roots.
//! - Every node reachable from the roots is visited (including versions that end up not
//!   selected), and for each `path@vN` the highest version seen wins. Different majors of one path
//!   are different modules.
//! - The main module itself is never part of the result, even when a dependency requires it.
//! - A tidy module file keeps the main module's fields and lists the whole build list as deps;
//!   `default: true` is kept where the main module had it, and added for a path that has exactly
//!   one major in the build list and no explicit default (the implicit default made explicit, so
//!   a generated module resolves major-less imports the same way).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use cue::module::ModuleVersion;

use super::modfile::{Dep, ModuleFile};
use super::version;

/// A source of module files by coordinate.
pub trait ModuleFileSource {
    /// The error type.
    type Error;
    /// The module file of `m`.
    fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, Self::Error>;
}

impl ModuleFileSource for super::ModuleRegistry {
    type Error = cue::module::RegistryError;
    fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, Self::Error> {
        super::ModuleRegistry::module_file(self, m)
    }
}

/// Runs MVS from the main module's deps; returns the selected version per `path@vN`.
pub fn select<S: ModuleFileSource>(
    main: &ModuleFile,
    source: &S,
) -> Result<BTreeMap<String, String>, S::Error> {
    let mut selected: BTreeMap<String, String> = BTreeMap::new();
    let mut visited: BTreeSet<(String, String)> = BTreeSet::new();
    let mut queue: VecDeque<(String, String)> = main
        .deps
        .iter()
        .map(|(p, d)| (p.clone(), d.version.clone()))
        .collect();
    while let Some((path, ver)) = queue.pop_front() {
        if path == main.module || !visited.insert((path.clone(), ver.clone())) {
            continue;
        }
        match selected.get(&path) {
            Some(cur) if version::compare(cur, &ver) != std::cmp::Ordering::Less => {}
            _ => {
                selected.insert(path.clone(), ver.clone());
            }
        }
        let mf = source.module_file(&ModuleVersion {
            path: path.clone(),
            version: ver,
        })?;
        for (p, d) in mf.deps {
            queue.push_back((p, d.version));
        }
    }
    Ok(selected)
}

/// The tidy form of `main`: the same module file with the full build list as deps.
pub fn tidy<S: ModuleFileSource>(main: &ModuleFile, source: &S) -> Result<ModuleFile, S::Error> {
    let selected = select(main, source)?;
    let mut majors: BTreeMap<&str, usize> = BTreeMap::new();
    for p in selected.keys() {
        if let Ok((base, _)) = version::split_major(p) {
            *majors.entry(base).or_default() += 1;
        }
    }
    let explicit_default: BTreeSet<&str> = main
        .deps
        .iter()
        .filter(|(_, d)| d.default)
        .filter_map(|(p, _)| version::split_major(p).ok().map(|(b, _)| b))
        .collect();
    let mut deps = BTreeMap::new();
    for (p, v) in &selected {
        let base = version::split_major(p).map(|(b, _)| b).unwrap_or(p);
        let default = match main.deps.get(p) {
            Some(d) if d.default => true,
            _ => !explicit_default.contains(base) && majors.get(base) == Some(&1),
        };
        deps.insert(
            p.clone(),
            Dep {
                version: v.clone(),
                default,
            },
        );
    }
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

    impl ModuleFileSource for Graph {
        type Error = String;
        fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, String> {
            self.asked.borrow_mut().push(m.to_string());
            let deps = self
                .files
                .get(&(m.path.clone(), m.version.clone()))
                .ok_or_else(|| format!("{m}: not found"))?;
            Ok(ModuleFile {
                module: m.path.clone(),
                language_version: None,
                source_kind: None,
                deps: deps
                    .iter()
                    .map(|(p, v)| {
                        (
                            p.to_string(),
                            Dep {
                                version: v.to_string(),
                                default: false,
                            },
                        )
                    })
                    .collect(),
                other: Default::default(),
            })
        }
    }

    fn main(deps: &[(&str, &str, bool)]) -> ModuleFile {
        ModuleFile {
            module: "m.test/main@v0".into(),
            language_version: Some("v0.17.0".into()),
            source_kind: Some("self".into()),
            deps: deps
                .iter()
                .map(|(p, v, d)| {
                    (
                        p.to_string(),
                        Dep {
                            version: v.to_string(),
                            default: *d,
                        },
                    )
                })
                .collect(),
            other: Default::default(),
        }
    }

    #[test]
    fn highest_required_version_wins_transitively() {
        // main -> a@v0.1.0, b@v0.1.0; a@v0.1.0 -> c@v0.2.0; b@v0.1.0 -> c@v0.3.0-alpha.1, a@v0.2.0;
        // a@v0.2.0 -> c@v0.1.0.
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
    fn majors_are_separate_and_errors_propagate() {
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
        assert!(
            t.deps["a.t/a@v0"].default,
            "single major becomes explicit default"
        );
        assert_eq!(t.module, m.module);

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
