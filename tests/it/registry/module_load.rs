//! End to end: the fixture modules published to the real registry by the CLI, the app loaded by
//! `cue` from its directory with the operator's `ModuleRegistry` as its `cue::module::Registry`
//! (imports without a major resolve through `default: true`; every module fetched and verified
//! once), and exported to exactly the hand-written JSON. The same from an OCI layout directory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use cue::module::ModuleFile;
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};

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
    let app_dir = fixtures().join("app");
    // The build list MVS selects from the module files is what the loader fetches.
    let main =
        ModuleFile::parse(&std::fs::read(app_dir.join("cue.mod/module.cue")).unwrap()).unwrap();
    assert_eq!(
        cue::module::select(&main, client)
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        [
            ("fixtures.test/lib@v0".to_string(), "v0.1.0".to_string()),
            ("fixtures.test/schema@v0".to_string(), "v0.1.0".to_string())
        ]
    );
    let rt = cue::Runtime::new(cue::Config::default());
    let fs = cue::module::DirFs::new(&app_dir);
    let target = cue::module::Target::Dir(String::new());
    let v = match rt.build_module(&fs, &target, Some(client)) {
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
