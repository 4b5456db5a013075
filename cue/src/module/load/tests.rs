//! Loader tests over in-memory modules.

use super::*;
use crate::module::{MemFs, MemRegistry};

fn schema_module() -> MemFs {
    MemFs::new()
        .with(
            "cue.mod/module.cue",
            "module: \"example.com/schema@v1\"\nlanguage: version: \"v0.16.0\"\nsource: kind: \"self\"",
        )
        .with("schema.cue", "package schema\n#Name: string")
        .with("types/types.cue", "package types\n#Port: int & >0")
}

fn lib_module() -> MemFs {
    MemFs::new()
        .with(
            "cue.mod/module.cue",
            r#"module: "example.com/lib@v0"
language: version: "v0.16.0"
deps: "example.com/schema@v1": {v: "v1.2.0", default: true}
"#,
        )
        .with(
            "lib.cue",
            "package lib\nimport \"example.com/schema\"\n#App: name: schema.#Name",
        )
}

fn registry() -> MemRegistry {
    MemRegistry::default()
        .with("example.com/schema@v1", "v1.2.0", schema_module())
        .with("example.com/lib@v0", "v0.3.0", lib_module())
}

fn main_module() -> MemFs {
    MemFs::new()
        .with(
            "cue.mod/module.cue",
            r#"module: "example.com/main@v0"
language: version: "v0.16.0"
deps: {
    "example.com/schema@v1": {v: "v1.2.0", default: true}
    "example.com/lib@v0": {v: "v0.3.0"}
}
"#,
        )
        .with(
            "main.cue",
            r#"package main
import (
    "strings"
    "example.com/lib"
    s "example.com/schema@v1"
    "example.com/schema/types"
    "example.com/main/sub"
)
app: lib.#App & {name: strings.ToUpper("x")}
n: s.#Name
p: types.#Port
q: sub.x
"#,
        )
        .with("sub/sub.cue", "package sub\nx: 1")
        .with("_ignored.cue", "package main\nbroken: {")
        .with(".hidden.cue", "package main\nbroken: {")
        .with("main_test.cue", "package main\nbroken: {")
        .with("other.cue", "package other\nz: 1")
}

fn error_texts(b: &LoadedBuild) -> Vec<String> {
    b.errors.iter().map(|e| e.to_string()).collect()
}

#[test]
fn loads_three_modules_sharing_instances() {
    let reg = registry();
    let b = load(&main_module(), &Target::Dir(String::new()), Some(&reg));
    // `other.cue` has a different package: loading the root directory is ambiguous.
    assert!(error_texts(&b)
        .iter()
        .any(|e| e.contains("found packages main (main.cue), other (other.cue)")));

    let fs = main_module().with("other.cue", "package main\nz: 1");
    let b = load(&fs, &Target::Dir(String::new()), Some(&reg));
    assert!(b.errors.is_empty(), "{:?}", error_texts(&b));
    let root = &b.instances[b.root];
    assert_eq!(root.package, "main");
    assert_eq!(root.import_path, "example.com/main");
    assert_eq!(root.module.as_deref(), Some("example.com/main@v0"));
    let names: Vec<&str> = root.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, vec!["main.cue", "other.cue"]);
    assert_eq!(root.std_imports.iter().collect::<Vec<_>>(), vec!["strings"]);

    let lib = &b.instances[root.imports["example.com/lib"]];
    assert_eq!(lib.package, "lib");
    assert_eq!(lib.version.as_deref(), Some("v0.3.0"));
    assert_eq!(lib.files[0].name, "example.com/lib@v0.3.0/lib.cue");
    // lib imports schema without a major; it is the same instance main imports with @v1.
    let schema_from_lib = lib.imports["example.com/schema"];
    assert_eq!(schema_from_lib, root.imports["example.com/schema@v1"]);
    let schema = &b.instances[schema_from_lib];
    assert_eq!(schema.import_path, "example.com/schema");
    assert_eq!(schema.module.as_deref(), Some("example.com/schema@v1"));
    let types = &b.instances[root.imports["example.com/schema/types"]];
    assert_eq!(types.dir, "types");
    let sub = &b.instances[root.imports["example.com/main/sub"]];
    assert_eq!(sub.import_path, "example.com/main/sub");
    assert_eq!(sub.version, None);
    // 5 instances: main, lib, schema, types, sub; each module fetched once.
    assert_eq!(b.instances.len(), 5);
    let fetches = reg.fetches();
    assert_eq!(fetches.len(), 2, "{fetches:?}");
    // The file ids map back to names and text.
    let f = &sub.files[0];
    assert_eq!(b.sources.name(f.id), "sub/sub.cue");
    assert_eq!(b.sources.text(f.id), "package sub\nx: 1");
}

#[test]
fn explicit_files_may_lack_a_package_clause() {
    let fs = MemFs::new()
        .with("in.cue", "import \"strings\"\na: strings.ToUpper(\"x\")")
        .with("b.cue", "b: 1");
    let b = load(
        &fs,
        &Target::Files(vec!["in.cue".into(), "b.cue".into()]),
        None,
    );
    assert!(b.errors.is_empty(), "{:?}", error_texts(&b));
    let root = &b.instances[b.root];
    assert_eq!(root.package, "_");
    assert_eq!(root.files.len(), 2);
    assert!(root.std_imports.contains("strings"));
    assert!(b.main_module.is_none());
}

#[test]
fn explicit_files_of_two_packages_conflict() {
    let fs = MemFs::new()
        .with("a.cue", "package a")
        .with("b.cue", "package b");
    let b = load(
        &fs,
        &Target::Files(vec!["a.cue".into(), "b.cue".into()]),
        None,
    );
    assert!(error_texts(&b)[0].contains("found packages a (a.cue) and b (b.cue)"));
}

#[test]
fn parent_directories_contribute_same_package_files() {
    let fs = MemFs::new()
        .with("cue.mod/module.cue", "module: \"mod.test/x\"")
        .with("root.cue", "package foo\nr: 1")
        .with("a/a.cue", "package foo\na: 1")
        .with("a/b/b.cue", "package foo\nb: 1")
        .with("a/b/other.cue", "package bar\nc: 1")
        .with(
            "main.cue",
            "package main\nimport \"mod.test/x/a/b:foo\"\nv: foo.b",
        );
    let b = load(&fs, &Target::Files(vec!["main.cue".into()]), None);
    assert!(b.errors.is_empty(), "{:?}", error_texts(&b));
    let root = &b.instances[b.root];
    let inst = &b.instances[root.imports["mod.test/x/a/b:foo"]];
    let names: Vec<&str> = inst.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, vec!["root.cue", "a/a.cue", "a/b/b.cue"]);
    assert_eq!(inst.import_path, "mod.test/x/a/b:foo");
}

#[test]
fn import_cycles_are_reported_with_the_chain() {
    let fs = MemFs::new()
        .with("cue.mod/module.cue", "module: \"mod.test/c@v0\"")
        .with("a/a.cue", "package a\nimport \"mod.test/c/b\"\nx: b.y")
        .with("b/b.cue", "package b\nimport \"mod.test/c/a\"\ny: a.x");
    let b = load(&fs, &Target::Dir("a".into()), None);
    let cycle = b
        .errors
        .iter()
        .find_map(|e| match e {
            LoadError::ImportCycle { cycle, span } => Some((cycle.clone(), *span)),
            _ => None,
        })
        .expect("a cycle error");
    assert_eq!(
        cycle.0,
        vec!["mod.test/c/a", "mod.test/c/b", "mod.test/c/a"]
    );
    assert_eq!(b.sources.snippet(cycle.1), "\"mod.test/c/a\"");
    assert!(error_texts(&b)
        .iter()
        .any(|e| e
            == "import cycle not allowed: mod.test/c/a imports mod.test/c/b imports mod.test/c/a"));
}

#[test]
fn resolution_errors_carry_the_import_span() {
    let fs = MemFs::new()
        .with(
            "cue.mod/module.cue",
            r#"module: "mod.test/m"
deps: {
    "x.test/two@v1": v: "v1.0.0"
    "x.test/two@v2": v: "v2.0.0"
}"#,
        )
        .with(
            "m.cue",
            r#"package m
import (
    "nowhere.test/pkg"
    "x.test/two"
    "x.test/two@v3"
    "mod.test/m/missing"
    "mod.test/m/k8s.io"
    "x.test/two@v1"
)
"#,
        );
    let b = load(&fs, &Target::Dir(String::new()), None);
    let texts = error_texts(&b);
    let want = [
        (
            "\"nowhere.test/pkg\"",
            "no dependency in cue.mod/module.cue provides it",
        ),
        ("\"x.test/two\"", "none is marked default: true"),
        (
            "\"x.test/two@v3\"",
            "module x.test/two@v3 is not a dependency",
        ),
        ("\"mod.test/m/missing\"", "does not exist"),
        ("\"mod.test/m/k8s.io\"", "not a valid package name"),
        ("\"x.test/two@v1\"", "no registry configured"),
    ];
    for (snippet, msg) in want {
        let e = b
            .errors
            .iter()
            .find(|e| e.to_string().contains(msg))
            .unwrap_or_else(|| panic!("no error {msg:?} in {texts:?}"));
        let span = e.span().expect("span");
        assert_eq!(b.sources.snippet(span), snippet, "{msg}");
    }
}

#[test]
fn registry_errors_name_the_module() {
    let fs = MemFs::new()
        .with(
            "cue.mod/module.cue",
            "module: \"mod.test/m\"\ndeps: \"example.com/lib@v0\": v: \"v0.9.9\"",
        )
        .with("m.cue", "package m\nimport \"example.com/lib\"");
    let reg = registry();
    let b = load(&fs, &Target::Dir(String::new()), Some(&reg));
    let texts = error_texts(&b);
    assert!(
        texts
            .iter()
            .any(|e| e.contains("example.com/lib@v0.9.9: not found (available versions: v0.3.0)")),
        "{texts:?}"
    );
}

#[test]
fn bad_module_file_is_reported() {
    let fs = MemFs::new()
        .with("cue.mod/module.cue", "module: 1")
        .with("a.cue", "a: 1");
    let b = load(&fs, &Target::Files(vec!["a.cue".into()]), None);
    assert!(error_texts(&b)[0].contains("cue.mod/module.cue: module.cue: module must be a string"));
}

#[test]
fn syntax_errors_are_load_errors_with_file_names() {
    let fs = MemFs::new().with("a.cue", "a: {");
    let b = load(&fs, &Target::Files(vec!["a.cue".into()]), None);
    assert_eq!(error_texts(&b), vec!["a.cue: expected '}', found EOF"]);
    assert_eq!(b.instances[b.root].files.len(), 1);
}

#[test]
fn mvs_selects_the_highest_required_version() {
    let a1 = MemFs::new().with(
        "cue.mod/module.cue",
        "module: \"t.test/a@v1\"\ndeps: \"t.test/c@v1\": v: \"v1.1.0\"",
    );
    let b1 = MemFs::new().with(
        "cue.mod/module.cue",
        "module: \"t.test/b@v1\"\ndeps: \"t.test/c@v1\": v: \"v1.3.0\"",
    );
    let c = |v: &str| {
        MemFs::new().with(
            "cue.mod/module.cue",
            format!("module: \"t.test/c@v1\"\n// {v}"),
        )
    };
    let reg = MemRegistry::default()
        .with("t.test/a@v1", "v1.0.0", a1)
        .with("t.test/b@v1", "v1.0.0", b1)
        .with("t.test/c@v1", "v1.1.0", c("1.1"))
        .with("t.test/c@v1", "v1.3.0", c("1.3"))
        .with("t.test/c@v1", "v1.2.0", c("1.2"));
    let mut root = BTreeMap::new();
    for (k, v) in [
        ("t.test/a@v1", "v1.0.0"),
        ("t.test/b@v1", "v1.0.0"),
        ("t.test/c@v1", "v1.2.0"),
    ] {
        root.insert(
            k.to_string(),
            Dep {
                version: v.into(),
                default: false,
            },
        );
    }
    let sel = mvs(&root, &reg).unwrap();
    assert_eq!(sel["t.test/c@v1"], "v1.3.0");
    assert_eq!(sel["t.test/a@v1"], "v1.0.0");
    assert_eq!(sel.len(), 3);
    // A missing module is an error naming it.
    root.insert(
        "t.test/zz@v1".into(),
        Dep {
            version: "v1.0.0".into(),
            default: false,
        },
    );
    let errs = mvs(&root, &reg).unwrap_err();
    assert!(errs[0].to_string().contains("t.test/zz@v1.0.0: not found"));
}

#[test]
fn split_import_paths() {
    assert_eq!(split_import("a.b/c@v1:d"), ("a.b/c", Some("v1"), Some("d")));
    assert_eq!(split_import("a.b/c"), ("a.b/c", None, None));
    assert_eq!(split_import("a.b/c:d"), ("a.b/c", None, Some("d")));
    assert_eq!(split_import("strings"), ("strings", None, None));
    assert!(has_path_prefix("a.b/c/d", "a.b/c"));
    assert!(!has_path_prefix("a.b/cd", "a.b/c"));
    assert_eq!(parent_dirs("a/b/c"), vec!["", "a", "a/b"]);
    assert!(parent_dirs("").is_empty());
}

#[test]
fn legacy_cue_mod_pkg_directories_resolve() {
    let fs = MemFs::new()
        .with("cue.mod/module.cue", "module: \"mod.test\"")
        .with(
            "cue.mod/pkg/foo.com/example/example.cue",
            "package example\nSettings: {}",
        )
        .with(
            "cue.mod/usr/foo.com/example/extra.cue",
            "package example\nextra: 1",
        )
        .with(
            "in.cue",
            "package exitcode\nimport pkg \"foo.com/example\"\na: pkg.Settings",
        );
    let b = load(&fs, &Target::Files(vec!["in.cue".into()]), None);
    assert!(b.errors.is_empty(), "{:?}", error_texts(&b));
    let root = &b.instances[b.root];
    let ex = &b.instances[root.imports["foo.com/example"]];
    assert_eq!(ex.package, "example");
    assert_eq!(ex.import_path, "foo.com/example");
    let names: Vec<&str> = ex.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "cue.mod/pkg/foo.com/example/example.cue",
            "cue.mod/usr/foo.com/example/extra.cue"
        ]
    );
}
