//! Architecture invariants read off the source (issue 33): no import cycle between the modules of
//! the operator (`src/`), the kernel (`kernel/src/`), the registry client (`registry/src/`), the
//! API emulator (`kube-emu/src/`) and the CUE evaluator (`cue/src/`).
//!
//! The graph's nodes are module files (`src/server/routes.rs` is `server::routes`). An edge is a
//! path in code that names another module: `crate::a::b…`, `super::…`, or a child module by its
//! name (`child::item`). Rules, so the graph shows dependencies rather than structure:
//! - `mod x;` declarations and `pub use` re-exports are structure, not use: they make no edge;
//! - a path through a re-export (`crate::platform::Store`, re-exported from `platform::store`) is
//!   an edge to the module that defines the item;
//! - a child naming its ancestor's items (`super::Engine`) is part of that ancestor: no edge;
//! - test modules (`#[cfg(test)] mod tests`) and comments are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (segments) → file.
fn modules(root: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let Ok(rel) = f.strip_prefix(root) else {
            continue;
        };
        let mut segs: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if segs == ["lib"] || segs == ["main"] {
            segs.clear();
        }
        if segs.first().is_some_and(|s| s == "bin") {
            continue;
        }
        out.insert(segs, f);
    }
    out
}

/// The code of a file without comments and test modules, split into its `pub use` statements
/// (structure) and everything else except `mod x;` declarations (use).
fn code(text: &str) -> (Vec<String>, String) {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let (mut reexports, mut rest) = (Vec::new(), String::new());
    let mut open: Option<String> = None;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        let t = line.trim();
        if let Some(stmt) = open.as_mut() {
            stmt.push_str(t);
        } else if let Some(body) = t
            .strip_prefix("pub use ")
            .or_else(|| t.strip_prefix("pub(crate) use "))
        {
            open = Some(body.to_string());
        } else {
            let is_mod = (t.starts_with("mod ") || t.starts_with("pub mod ")) && t.ends_with(';');
            if !is_mod {
                rest.push_str(line);
                rest.push('\n');
            }
            continue;
        }
        if t.ends_with(';') {
            if let Some(stmt) = open.take() {
                reexports.push(stmt.trim_end_matches(';').to_string());
            }
        }
    }
    (reexports, rest)
}

/// The longest prefix of `path` that is a module, and the rest.
fn deepest<'a>(
    mods: &BTreeMap<Vec<String>, PathBuf>,
    path: &'a [String],
) -> Option<(Vec<String>, &'a [String])> {
    (0..=path.len())
        .rev()
        .find(|k| mods.contains_key(&path[..*k]))
        .map(|k| (path[..k].to_vec(), &path[k..]))
}

/// Splits `a::b::{c, d as e}` into full paths (`a::b::c`, `a::b::d`) with the names they bind.
fn use_paths(body: &str) -> Vec<(Vec<String>, String)> {
    let body: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let (prefix, items) = match body.split_once('{') {
        Some((p, rest)) => (
            p.trim_end_matches("::"),
            rest.trim_end_matches('}').to_string(),
        ),
        None => match body.rsplit_once("::") {
            Some((p, last)) => (p, last.to_string()),
            None => ("", body.clone()),
        },
    };
    let prefix: Vec<String> = prefix
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    items
        .split(',')
        .filter(|i| !i.is_empty() && !i.contains('{') && !i.contains('}'))
        .map(|i| {
            let (path, name) = match i.split_once("as") {
                Some((p, n)) if !n.is_empty() => (p, n.to_string()),
                _ => (i, i.rsplit("::").next().unwrap_or(i).to_string()),
            };
            let mut full = prefix.clone();
            full.extend(path.split("::").map(str::to_string));
            (full, name)
        })
        .collect()
}

/// Makes `path` (as written in module `at`) absolute from the crate root.
fn absolute(at: &[String], path: &[String]) -> Vec<String> {
    match path.first().map(String::as_str) {
        Some("crate") => path[1..].to_vec(),
        Some("self") => at.iter().chain(&path[1..]).cloned().collect(),
        Some("super") => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = &at[..at.len().saturating_sub(ups)];
            base.iter().chain(&path[ups..]).cloned().collect()
        }
        _ => at.iter().chain(path).cloned().collect(),
    }
}

fn graph(root: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mods = modules(root);
    let texts: BTreeMap<_, _> = mods
        .iter()
        .map(|(m, f)| (m.clone(), std::fs::read_to_string(f).unwrap_or_default()))
        .collect();
    // (module, name) → the module defining the re-exported item.
    let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for (m, text) in &texts {
        for body in code(text).0 {
            for (path, name) in use_paths(&body) {
                let abs = absolute(m, &path);
                if let Some((target, _)) = deepest(&mods, &abs) {
                    if &target != m {
                        reexports.insert((m.clone(), name), target);
                    }
                }
            }
        }
    }
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, text) in &texts {
        let code = code(text).1;
        let mut targets = BTreeSet::new();
        let bytes = code.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let starts_word = i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'_'
                    || bytes[i - 1] == b':');
            if !(starts_word && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'_')) {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < bytes.len()
                && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_' || bytes[j] == b':')
            {
                j += 1;
            }
            let word = &code[i..j];
            i = j;
            if !word.contains("::") {
                continue;
            }
            let path: Vec<String> = word
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            let head = path.first().map(String::as_str).unwrap_or("");
            let is_child = {
                let mut c = m.clone();
                c.push(head.to_string());
                mods.contains_key(&c)
            };
            if !matches!(head, "crate" | "super" | "self") && !is_child {
                continue;
            }
            let abs = absolute(m, &path);
            let Some((mut target, rest)) = deepest(&mods, &abs) else {
                continue;
            };
            if let Some(name) = rest.first() {
                if let Some(t) = reexports.get(&(target.clone(), name.clone())) {
                    target = t.clone();
                }
            }
            if &target == m || m.starts_with(&target) {
                continue;
            }
            targets.insert(target);
        }
        edges.insert(m.clone(), targets);
    }
    edges
}

/// One cycle of the graph, if any (depth-first search).
fn find_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        v: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        marks: &mut BTreeMap<Vec<String>, Mark>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        marks.insert(v.clone(), Mark::Open);
        stack.push(v.clone());
        for w in edges.get(v).into_iter().flatten() {
            match marks.get(w) {
                Some(Mark::Open) => {
                    let from = stack.iter().position(|s| s == w).unwrap_or(0);
                    return Some(stack[from..].iter().map(|m| m.join("::")).collect());
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(c) = visit(w, edges, marks, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        marks.insert(v.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for v in edges.keys() {
        if !marks.contains_key(v) {
            if let Some(c) = visit(v, edges, &mut marks, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_operator_kernel_registry_emulator_and_evaluator_have_no_import_cycle() {
    for dir in [
        "src",
        "kernel/src",
        "registry/src",
        "kube-emu/src",
        "cue/src",
    ] {
        let edges = graph(&workspace().join(dir));
        assert!(edges.len() > 5, "{dir}: the modules were read");
        assert_eq!(find_cycle(&edges), None, "{dir}: an import cycle");
    }
}

#[test]
fn the_checker_sees_a_cycle_through_siblings_and_through_a_reexport() {
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| {
        let f = dir.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, s).unwrap();
    };
    // a → b::inner (through b's re-export), b::inner → a: a cycle.
    w("lib.rs", "mod a;\nmod b;\n");
    w("a.rs", "use crate::b::Thing;\n");
    w("b.rs", "mod inner;\npub use inner::Thing;\n");
    w(
        "b/inner.rs",
        "pub struct Thing;\nfn f() { crate::a::g(); }\n",
    );
    let c = find_cycle(&graph(dir.path())).unwrap();
    assert_eq!(c.len(), 2, "{c:?}");
    // Without the edge back, no cycle; a child naming its parent's item is not one either.
    w(
        "b/inner.rs",
        "pub struct Thing;\nfn f() { super::helper(); }\n",
    );
    w(
        "b.rs",
        "mod inner;\npub use inner::Thing;\nfn helper() { inner::go(); }\n",
    );
    assert_eq!(find_cycle(&graph(dir.path())), None);
}
