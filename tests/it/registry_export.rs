//! End to end: the fixture modules published to the real registry by the CLI, the app's build
//! list selected by MVS over the module files, every dependency fetched and verified, staged for
//! the evaluator, and the app exported by `cue` to exactly the hand-written JSON.
//!
//! `cue` does not resolve imports through a `Registry` yet; the dependencies reach it as vendored
//! packages (`cue.mod/pkg`, see `registry::stage`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use opm_operator::registry::{stage, zipfile, Location, Mapping, ModuleRegistry, RegistryConfig};

use crate::registry::harness::{fixtures, publish_fixtures, DistRegistry};

#[test]
fn the_app_fixture_exports_from_registry_modules() {
    let reg = DistRegistry::start();
    publish_fixtures(&["--registry", &reg.mapping()]);
    export_and_compare(&reg.client(None));
}

#[test]
fn the_app_fixture_exports_from_an_oci_layout() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    publish_fixtures(&["--layout", layout.to_str().unwrap()]);
    let client = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout,
    })))
    .unwrap();
    export_and_compare(&client);
}

fn export_and_compare(client: &ModuleRegistry) {
    let app = zipfile::collect_module_files(&fixtures().join("app")).unwrap();
    let (fs, build_list) = stage::vendor_tree(client, &app).unwrap();
    assert_eq!(
        build_list.into_iter().collect::<Vec<_>>(),
        [
            ("fixtures.test/lib@v0".to_string(), "v0.1.0".to_string()),
            ("fixtures.test/schema@v0".to_string(), "v0.1.0".to_string())
        ]
    );
    let rt = cue::Runtime::new(cue::Config::default());
    let v = match rt.build_args(&fs, &[".".to_string()]) {
        Ok(v) => v,
        Err(d) => panic!("build failed:\n{}", rt.render(&d)),
    };
    let json = match v.to_json() {
        Ok(j) => j,
        Err(d) => panic!("export failed:\n{}", rt.render(&d)),
    };
    let got: serde_json::Value = serde_json::from_str(&json).unwrap();
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("expected/app.json")).unwrap())
            .unwrap();
    // Compared as text too, so field order counts (serde_json keeps insertion order here).
    assert_eq!(
        serde_json::to_string_pretty(&got).unwrap(),
        serde_json::to_string_pretty(&want).unwrap()
    );
}
