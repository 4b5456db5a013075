//! Platform build benchmark (docs/design/operator.md §3.3–§3.5): the OPM fixture modules (core, kube,
//! mini, gateway) are published into an OCI layout (no network), then this measures
//! - `generate`: closure + generated files, with a fresh client (module files read from the
//!   layout) and with a warm one;
//! - `build`: load + evaluate + shape gate + contract inventory of the generated mini + gateway
//!   platform, each in its own runtime (as the Platform reconciler runs it);
//! - `acquire`: the gateway catalog through the `CatalogAcquirer`;
//! - the process's peak RSS (`VmHWM`).
//!
//! Run: `cargo bench -p opm-operator --bench platform_build` (optionally `-- N` iterations,
//! default 10). Not run in CI.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark binary fails loudly"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opm_operator::kernel::{CatalogAcquirer, PlatformBuilder, PlatformEntry, PlatformInput};
use opm_operator::platform::{Generator, Layout, PackageIdentity, PlatformKernel, RegistryShape};
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};

fn client(layout: &Path) -> Arc<ModuleRegistry> {
    let cfg = RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout.to_path_buf(),
    }));
    Arc::new(ModuleRegistry::new(cfg).unwrap())
}

fn kernel(c: Arc<ModuleRegistry>) -> PlatformKernel {
    PlatformKernel::new(
        c,
        Generator::new(
            "fixtures.test/core@v0",
            "v0.1.0",
            RegistryShape::CatalogEntry,
        ),
        cue::Config::default(),
    )
}

fn stats(name: &str, mut d: Vec<Duration>) {
    d.sort();
    let ms = |x: Duration| x.as_secs_f64() * 1e3;
    println!(
        "{name:<28} n={:<3} min {:>8.2} ms  median {:>8.2} ms  max {:>8.2} ms",
        d.len(),
        ms(d[0]),
        ms(d[d.len() / 2]),
        ms(d[d.len() - 1])
    );
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm");
    let layout = tempfile::tempdir().unwrap();
    let publisher = client(layout.path());
    for m in ["core", "kube", "mini", "gateway"] {
        publisher.publish(&fixtures.join(m), "v0.1.0").unwrap();
    }
    let input = PlatformInput {
        platform_type: "kubernetes".into(),
        entries: [
            "fixtures.test/catalogs/gateway@v0",
            "fixtures.test/catalogs/mini@v0",
        ]
        .iter()
        .map(|p| PlatformEntry {
            path: p.to_string(),
            version: "0.1.0".into(),
            enable: true,
        })
        .collect(),
    };

    let mut cold = Vec::new();
    for _ in 0..n {
        let k = kernel(client(layout.path()));
        let t = Instant::now();
        k.generate(&input).unwrap();
        cold.push(t.elapsed());
    }
    let k = kernel(client(layout.path()));
    let files = k.generate(&input).unwrap();
    let mut warm = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let again = k.generate(&input).unwrap();
        warm.push(t.elapsed());
        assert_eq!(again, files);
    }
    let root = tempfile::tempdir().unwrap();
    let dir = Layout::new(root.path())
        .unwrap()
        .write(&PackageIdentity::unclaimed(1).unwrap(), &files)
        .unwrap();
    // The first build fetches the module zips into the client's memo.
    let t = Instant::now();
    let first = k.build(&dir).unwrap_or_else(|e| panic!("{e}"));
    let first = (t.elapsed(), first);
    let mut builds = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let b = k.build(&dir).unwrap_or_else(|e| panic!("{e}"));
        builds.push(t.elapsed());
        assert_eq!(b, first.1);
    }
    let mut acquires = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        k.acquire("fixtures.test/catalogs/gateway@v0", "0.1.0")
            .unwrap_or_else(|e| panic!("{e}"));
        acquires.push(t.elapsed());
    }
    println!(
        "platform: {} transformers, {} contracts defined",
        first.1.transformers.len(),
        first.1.contracts.defined_by.len()
    );
    stats("generate (fresh client)", cold);
    stats("generate (warm client)", warm);
    stats("build (first, fetches zips)", vec![first.0]);
    stats("build (warm)", builds);
    stats("acquire gateway (warm)", acquires);
    match peak_rss_kib() {
        Some(k) => println!("peak RSS {:.1} MiB", k as f64 / 1024.0),
        None => println!("peak RSS unavailable (no /proc/self/status)"),
    }
}
