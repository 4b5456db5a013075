//! Registry benchmark: resolution time of the fixture modules (app, lib, schema at v0.1.0) from
//! the real distribution registry on loopback (cold: empty cache), from the on-disk cache (warm:
//! a new client, so no in-process memo), from the in-process memo, and from an OCI layout.
//!
//! Run: `cargo bench -p opm-operator --bench registry` (needs `docker-registry`; see
//! scripts/setup.sh).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods,
    reason = "a benchmark binary fails loudly and polls with short sleeps"
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cue::module::ModuleVersion;
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};

const MODULES: [&str; 3] = ["schema", "lib", "app"];

fn coords() -> Vec<ModuleVersion> {
    MODULES
        .iter()
        .map(|m| ModuleVersion {
            path: format!("fixtures.test/{m}@v0"),
            version: "v0.1.0".into(),
        })
        .collect()
}

fn client(mapping: Mapping, cache: Option<&Path>) -> ModuleRegistry {
    let mut cfg = RegistryConfig::new(mapping);
    cfg.cache_dir = cache.map(Path::to_path_buf);
    ModuleRegistry::new(cfg).unwrap()
}

fn resolve_all(c: &ModuleRegistry) {
    for m in coords() {
        let f = c.fetch_module(&m).unwrap();
        assert!(!f.files.is_empty());
    }
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let n = samples.len();
    let median = samples[n / 2];
    let min = samples[0];
    let max = samples[n - 1];
    println!(
        "{name:<34} n={n:<4} median {:>9.3} ms  min {:>9.3} ms  max {:>9.3} ms",
        median.as_secs_f64() * 1e3,
        min.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
}

fn main() {
    let bin = Path::new("/usr/bin/docker-registry");
    if !bin.exists() {
        eprintln!(
            "{} is missing: install docker-registry (scripts/setup.sh)",
            bin.display()
        );
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let host = format!("127.0.0.1:{port}");
    let cfg = dir.path().join("config.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\n",
            dir.path().join("storage").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(bin)
        .arg("serve")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mapping = Mapping::parse(&format!("fixtures.test={host}")).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let publisher = client(mapping.clone(), None);
    let start = Instant::now();
    loop {
        match publisher.list_versions("fixtures.test/schema@v0") {
            Ok(_) => break,
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(25))
            }
            Err(e) => panic!("registry did not come up: {e}"),
        }
    }
    let layout = dir.path().join("layout");
    let layout_pub = client(
        Mapping::single(Location::Layout {
            dir: layout.clone(),
        }),
        None,
    );
    for m in MODULES {
        publisher.publish(&fixtures.join(m), "v0.1.0").unwrap();
        layout_pub.publish(&fixtures.join(m), "v0.1.0").unwrap();
    }

    println!(
        "resolving {} fixture modules per sample ({host})",
        MODULES.len()
    );
    let mut cold = Vec::new();
    let mut caches = Vec::new();
    for _ in 0..20 {
        let cache = tempfile::tempdir().unwrap();
        let c = client(mapping.clone(), Some(cache.path()));
        let t = Instant::now();
        resolve_all(&c);
        cold.push(t.elapsed());
        caches.push(cache);
    }
    report("cold (registry -> verify -> cache)", cold);

    let warm_cache = &caches[0];
    let mut warm = Vec::new();
    for _ in 0..100 {
        let c = client(mapping.clone(), Some(warm_cache.path()));
        let t = Instant::now();
        resolve_all(&c);
        warm.push(t.elapsed());
    }
    report("warm (disk cache, new client)", warm);

    let c = client(mapping.clone(), Some(warm_cache.path()));
    resolve_all(&c);
    let mut memo = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        resolve_all(&c);
        memo.push(t.elapsed());
    }
    report("memo (same client)", memo);

    let mut layout_cold = Vec::new();
    for _ in 0..50 {
        let c = client(
            Mapping::single(Location::Layout {
                dir: layout.clone(),
            }),
            None,
        );
        let t = Instant::now();
        resolve_all(&c);
        layout_cold.push(t.elapsed());
    }
    report("layout (no cache, new client)", layout_cold);

    let mut versions = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        publisher.list_versions("fixtures.test/schema@v0").unwrap();
        versions.push(t.elapsed());
    }
    report("versions (tag list)", versions);

    let _ = child.kill();
    let _ = child.wait();
}
