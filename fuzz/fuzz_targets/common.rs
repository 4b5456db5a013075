//! Shared by the fuzz targets: the demo fixture module served from memory, the renderer with
//! lowered limits, and the invariants every render must keep.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cue::module::{MemRegistry, Registry};
use opm_operator::kernel::{BuiltPlatform, ErrorClass, ModuleRequest};
use opm_operator::kernel::SkewPolicy;
use opm_operator::render::{stage, Renderer};

pub fn opm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/opm")
}

pub struct Setup {
    pub renderer: Renderer,
    pub platform: BuiltPlatform,
}

pub fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let mut reg = MemRegistry::new();
        for (dir, path) in [
            ("core", "fixtures.test/core@v0"),
            ("kube", "fixtures.test/x/kube@v0"),
            ("mini", "fixtures.test/catalogs/mini@v0"),
            ("demo", "fixtures.test/modules/demo@v0"),
        ] {
            let tree = stage::dir_tree(&opm().join(dir)).expect("fixture tree");
            reg.insert(path, "v0.1.0", tree);
        }
        let registry: Arc<dyn Registry> = Arc::new(reg);
        let renderer = Renderer::new(registry).with_config(cue::Config {
            max_steps: 2_000_000,
            max_wall_time: Duration::from_secs(20),
            max_output_bytes: 4 << 20,
            ..cue::Config::default()
        });
        let dir = opm().join("platform/generated");
        let deps: BTreeMap<String, String> = [
            ("fixtures.test/catalogs/mini@v0", "v0.1.0"),
            ("fixtures.test/core@v0", "v0.1.0"),
            ("fixtures.test/x/kube@v0", "v0.1.0"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        Setup {
            renderer,
            platform: BuiltPlatform {
                dir,
                deps,
                ..BuiltPlatform::default()
            },
        }
    })
}

/// Renders `values` and checks the invariants: a result has a digest; a `Values` error names
/// only `values` paths. Panics (a finding) otherwise.
pub fn check(values: serde_json::Value) {
    let s = setup();
    let req = ModuleRequest {
        name: "fuzz".into(),
        namespace: "ns".into(),
        path: "fixtures.test/modules/demo@v0".into(),
        version: "v0.1.0".into(),
        values: Some(values),
    };
    match s.renderer.render(&req, &s.platform, SkewPolicy::Warn) {
        Ok(r) => assert!(r.digest.starts_with("sha256:")),
        Err(e) => {
            if e.class() == ErrorClass::Values {
                let k = opm_operator::kernel::KernelError::from(e);
                assert!(
                    k.problems.iter().all(|p| p.path.starts_with("values")),
                    "a Values error outside values: {k}"
                );
            }
        }
    }
}

/// The values of a raw input: JSON if it parses, else the input as the `logLevel` string.
pub fn values_of(data: &[u8]) -> serde_json::Value {
    match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(v) => v,
        Err(_) => serde_json::json!({
            "logLevel": String::from_utf8_lossy(data),
            "secret": {"value": "x"},
        }),
    }
}
