//! The on-disk cache: a warm fetch needs no registry, and concurrent cold fetches leave one entry.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::sync::{Arc, Barrier};

use cue::module::{ModuleVersion, Registry as _};

use crate::registry::harness::{publish_fixtures, DistRegistry};

fn schema() -> ModuleVersion {
    ModuleVersion {
        path: "fixtures.test/schema@v0".into(),
        version: "v0.1.0".into(),
    }
}

fn entries(root: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn a_warm_fetch_survives_the_registry_going_away() {
    let mut reg = DistRegistry::start();
    publish_fixtures(&["--registry", &reg.mapping()]);
    let cache = tempfile::tempdir().unwrap();
    let cold = reg
        .client(Some(cache.path()))
        .fetch_module(&schema())
        .unwrap();
    assert!(!cold.cached);
    reg.stop();
    // A new client (empty memo) with the same cache: no network needed.
    let client = reg.client(Some(cache.path()));
    let warm = client.fetch_module(&schema()).unwrap();
    assert!(warm.cached);
    assert_eq!(warm.files, cold.files);
    assert_eq!(warm.meta, cold.meta);
    let fs = client.fetch(&schema()).unwrap();
    assert!(fs
        .read_file("schema.cue")
        .unwrap()
        .starts_with(b"// Package schema"));
    // Not cached and the registry is gone: a transient error, not a hang.
    let other = ModuleVersion {
        path: "fixtures.test/lib@v0".into(),
        version: "v0.1.0".into(),
    };
    assert!(matches!(
        client.fetch(&other).map(|_| ()),
        Err(cue::module::RegistryError::Transient { .. })
    ));
}

#[test]
fn concurrent_cold_fetches_all_succeed_and_leave_one_entry() {
    let reg = DistRegistry::start();
    publish_fixtures(&["--registry", &reg.mapping()]);
    let cache = tempfile::tempdir().unwrap();
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            // Separate clients, so every thread misses its memo and races on the disk cache.
            let client = reg.client(Some(cache.path()));
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                client.fetch_module(&schema()).map(|f| f.files.clone())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let first = results[0].as_ref().unwrap().clone();
    for r in &results {
        assert_eq!(r.as_ref().unwrap(), &first);
    }
    let names = entries(cache.path());
    assert_eq!(
        names.len(),
        1,
        "one entry and no temporary directories: {names:?}"
    );
    assert!(
        names[0].starts_with("fixtures.test_schema@v0.1.0-"),
        "{names:?}"
    );
}
