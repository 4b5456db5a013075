//! Building multi-module programs through [`cue::Runtime::build_module`]: the loader's instances
//! are evaluated once each, imports bind by the loader's links, hidden fields are per package, and
//! load errors come back as positioned diagnostics.

use cue::module::{MemFs, MemRegistry, Target};

fn module_file(path: &str, deps: &str) -> String {
    format!("module: \"{path}\"\nlanguage: version: \"v0.16.0\"\ndeps: {{{deps}}}\n")
}

/// schema@v1 (two versions published, v2 as a second major), lib importing schema by its
/// default major, main importing both.
fn registry() -> MemRegistry {
    let schema = |name_rule: &str| {
        MemFs::new()
            .with(
                "cue.mod/module.cue",
                module_file("example.com/schema@v1", ""),
            )
            .with(
                "schema.cue",
                format!("package schema\n#Name: {name_rule}\n_secret: \"schema\"\ncount: 1\n"),
            )
    };
    MemRegistry::default()
        .with("example.com/schema@v1", "v1.0.0", schema("string"))
        .with(
            "example.com/schema@v1",
            "v1.2.0",
            schema("=~\"^[a-z]+$\""),
        )
        .with(
            "example.com/schema@v2",
            "v2.0.0",
            MemFs::new()
                .with(
                    "cue.mod/module.cue",
                    module_file("example.com/schema@v2", ""),
                )
                .with("schema.cue", "package schema\n#Name: \"v2\"\ncount: 2\n"),
        )
        .with(
            "example.com/lib@v0",
            "v0.3.0",
            MemFs::new()
                .with(
                    "cue.mod/module.cue",
                    module_file(
                        "example.com/lib@v0",
                        "\"example.com/schema@v1\": {v: \"v1.0.0\", default: true}",
                    ),
                )
                .with(
                    "lib.cue",
                    "package lib\nimport \"example.com/schema\"\n_secret: \"lib\"\n#App: {name: schema.#Name, tag: _secret}\nschemaCount: schema.count\n",
                ),
        )
}

fn main_module(main_cue: &str) -> MemFs {
    MemFs::new()
        .with(
            "cue.mod/module.cue",
            module_file(
                "example.com/main@v0",
                "\"example.com/schema@v1\": {v: \"v1.2.0\", default: true}\n\"example.com/schema@v2\": {v: \"v2.0.0\"}\n\"example.com/lib@v0\": {v: \"v0.3.0\"}",
            ),
        )
        .with("main.cue", main_cue)
}

fn export(fs: &MemFs, reg: &MemRegistry) -> Result<serde_json::Value, String> {
    let rt = cue::Runtime::default();
    let v = rt
        .build_module(fs, &Target::Dir(String::new()), Some(reg))
        .map_err(|d| rt.render(&d))?;
    let json = v.to_json().map_err(|d| rt.render(&d))?;
    serde_json::from_str(&json).map_err(|e| e.to_string())
}

#[test]
fn three_modules_export_with_default_majors_and_shared_instances() {
    let reg = registry();
    let fs = main_module(
        r#"package main
import (
    "example.com/lib"
    "example.com/schema"
    s2 "example.com/schema@v2"
)
_secret: "main"
app: lib.#App & {name: "web"}
mine: _secret
counts: [lib.schemaCount, schema.count, s2.count]
v2: s2.#Name
"#,
    );
    let got = export(&fs, &reg).unwrap();
    assert_eq!(
        got,
        serde_json::json!({
            // lib's own hidden field, not main's
            "app": {"name": "web", "tag": "lib"},
            "mine": "main",
            // lib and main share one schema@v1 instance (MVS picks v1.2.0 for both)
            "counts": [1, 1, 2],
            "v2": "v2"
        })
    );
    // Each module version is fetched once.
    let mut fetches = reg.fetches();
    fetches.sort();
    assert_eq!(
        fetches,
        vec![
            "example.com/lib@v0.3.0",
            "example.com/schema@v1.2.0",
            "example.com/schema@v2.0.0"
        ]
    );
}

#[test]
fn the_selected_version_applies_to_dependencies_too() {
    // schema v1.2.0 (the main module's choice) constrains names to lower case, also inside lib.
    let reg = registry();
    let fs =
        main_module("package main\nimport \"example.com/lib\"\napp: lib.#App & {name: \"Web\"}\n");
    let err = export(&fs, &reg).unwrap_err();
    assert!(err.contains("app.name"), "{err}");
    assert!(err.contains("out of bound =~\"^[a-z]+$\""), "{err}");
}

#[test]
fn hidden_fields_of_another_package_are_invisible() {
    let reg = registry();
    let fs = main_module("package main\nimport \"example.com/schema\"\nx: schema._secret\n");
    let err = export(&fs, &reg).unwrap_err();
    assert!(err.contains("undefined field: _secret"), "{err}");
}

#[test]
fn hidden_fields_with_the_same_name_do_not_conflict_across_packages() {
    let reg = registry();
    let fs = main_module(
        "package main\nimport \"example.com/lib\"\napp: lib.#App & {name: \"web\", _secret: 42}\nout: app._secret\n",
    );
    let got = export(&fs, &reg).unwrap();
    assert_eq!(
        got,
        serde_json::json!({"app": {"name": "web", "tag": "lib"}, "out": 42})
    );
}

#[test]
fn a_member_missing_from_an_imported_package_is_an_error() {
    let reg = registry();
    let fs =
        main_module("package main\nimport \"example.com/schema\"\nx: {a: schema.nope} & {a: 1}\n");
    let err = export(&fs, &reg).unwrap_err();
    assert!(err.contains("undefined field: nope"), "{err}");
}

#[test]
fn load_errors_are_positioned_diagnostics() {
    let reg = registry();
    let fs = main_module("package main\n\nimport \"example.com/missing\"\n\nx: missing.y\n");
    let err = export(&fs, &reg).unwrap_err();
    assert!(err.contains("example.com/missing"), "{err}");
    assert!(err.contains("main.cue:3:8"), "{err}");
}

#[test]
fn a_missing_version_lists_the_published_ones() {
    let reg = registry();
    let fs = MemFs::new()
        .with(
            "cue.mod/module.cue",
            module_file(
                "example.com/main@v0",
                "\"example.com/schema@v1\": {v: \"v1.9.0\"}",
            ),
        )
        .with(
            "main.cue",
            "package main\nimport \"example.com/schema\"\nx: schema.count\n",
        );
    let err = export(&fs, &reg).unwrap_err();
    assert!(err.contains("example.com/schema@v1.9.0"), "{err}");
    assert!(err.contains("v1.0.0, v1.2.0"), "{err}");
}

#[test]
fn a_second_build_in_one_runtime_keeps_positions() {
    // The second build re-parses under fresh file ids; its errors still point at its files.
    let reg = registry();
    let rt = cue::Runtime::default();
    let ok = main_module("package main\nx: 1\n");
    rt.build_module(&ok, &Target::Dir(String::new()), Some(&reg))
        .unwrap();
    let bad =
        main_module("package main\nimport \"example.com/schema\"\ny: 1 & schema.count\nz: 2 & 3\n");
    let v = rt
        .build_module(&bad, &Target::Dir(String::new()), Some(&reg))
        .unwrap();
    let err = rt.render(&v.validate(true).unwrap_err());
    assert!(err.contains("z: conflicting values"), "{err}");
    assert!(err.contains("main.cue:4:4"), "{err}");
}
