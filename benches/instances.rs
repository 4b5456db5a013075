//! ModuleInstance scale benchmark (issue 17 "Done when"; operator-spec §2.2, §2.6): N instances of
//! the fixture `demo` module (values `fixtures/opm/values/valid.json`, one namespace each: the
//! module's ConfigMap name `settings` is fixed) against an in-process kube-emu, reconciled by the
//! real controllers (`manager::run_controllers`: Platform, TransformerRegistration and
//! ModuleInstance) with the real platform kernel and renderer. The fixture modules are published
//! into an OCI layout in a temp dir and read through the on-disk module cache.
//!
//! For N = 100, 300, 1,000 (each in a fresh emulator and controller set, same process) it prints
//! the time from the first create until every instance is Ready=True, the API requests the
//! controllers made per instance (`Emulator::requests_served`, minus the benchmark's own creates
//! and polls), and the peak RSS during that size (VmHWM, reset before each size through
//! `/proc/self/clear_refs`). Run by hand in release, not in CI; it asserts only that every
//! instance gets Ready:
//!
//!     cargo bench -p opm-operator --bench instances [-- SIZES...]   (default 100 300 1000)
//!
//! Figures of 2026-12-04 (release, 2 shared cores, 2 concurrent renders, load 0.6–5.7 from other
//! builds): N = 100 / 300 / 1,000 → all Ready in 1.6–2.7 s / 7.3–7.9 s / 18.2–35.5 s
//! (16–36 ms per instance, no trend beyond the load noise), 21.0–21.1 API requests per instance
//! at every size, peak RSS 77–105 / 145–160 / 342–357 MiB (the in-process emulator's objects,
//! watch history and the controllers' caches grow with N, ≈ 0.3 MiB per instance).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark binary fails loudly"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crds::k8s_openapi::api::core::v1::Namespace;
use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use crds::module_instance::ModuleInstance;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::Api;
use opm_operator::controller::context::Context;
use opm_operator::platform::generate::{Generator, RegistryShape};
use opm_operator::platform::{Layout, PlatformKernel, Store};
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};
use opm_operator::render::Renderer;

const MODULES: &[&str] = &["core", "kube", "mini", "demo"];

fn opm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm")
}

/// Peak resident set size in MiB since the last reset.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Resets VmHWM to the current RSS (Linux `clear_refs` value 5).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

struct Figures {
    n: usize,
    ready: Duration,
    requests: usize,
    peak_mib: f64,
}

async fn run(n: usize, registry: &Arc<ModuleRegistry>, root: &Path) -> Figures {
    reset_peak_rss();
    let emu = kube_emu::Emulator::start(kube_emu::Options::default())
        .await
        .unwrap();
    let client = emu.client().unwrap();
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::all_crds() {
        crd_api.create(&PostParams::default(), &crd).await.unwrap();
    }
    let platform = Arc::new(PlatformKernel::new(
        registry.clone(),
        Generator::new(
            "fixtures.test/core@v0",
            "v0.1.0",
            RegistryShape::CatalogEntry,
        ),
        cue::Config::default(),
    ));
    let layout = Arc::new(Layout::new(root.join(format!("platform-{n}"))).unwrap());
    layout.reset().unwrap();
    let mut ctx = Context::new(
        client.clone(),
        Store::new(),
        layout,
        platform.clone(),
        platform,
        "bench",
    );
    ctx.renderer = Some(Arc::new(Renderer::new(registry.clone())));
    ctx.kube_config = Some(emu.config().unwrap());
    ctx.max_concurrent_renders = opm_operator::server::default_concurrent_renders();
    let ctx = Arc::new(ctx);

    // The Platform first, so the instances measure the steady state rather than the build.
    let platforms: Api<crds::platform::Platform> = Api::all(client.clone());
    let p: crds::platform::Platform = serde_json::from_value(serde_json::json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes",
                 "registry": {"fixtures.test/catalogs/mini@v0": {"version": "0.1.0"}}},
    }))
    .unwrap();
    platforms.create(&PostParams::default(), &p).await.unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(opm_operator::controller::manager::run_controllers(
        Arc::clone(&ctx),
        stop_rx,
    ));
    let deadline = Instant::now() + Duration::from_secs(300);
    while ctx.store.generation() == 0 {
        assert!(Instant::now() < deadline, "platform never recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let values: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(opm().join("values/valid.json")).unwrap())
            .unwrap();
    let base = emu.requests_served();
    let mut own = 0usize;
    let started = Instant::now();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0..n {
        let ns = format!("shop-{i}");
        namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: ObjectMeta {
                        name: Some(ns.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let mi: ModuleInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "opmodel.dev/v1alpha1",
            "kind": "ModuleInstance",
            "metadata": {"name": "shop", "namespace": ns},
            "spec": {"module": {"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"},
                     "values": values, "prune": true},
        }))
        .unwrap();
        Api::<ModuleInstance>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &mi)
            .await
            .unwrap();
        own += 2;
    }
    let all: Api<ModuleInstance> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let list = all.list(&ListParams::default()).await.unwrap();
        own += 1;
        let ready = list
            .items
            .iter()
            .filter(|mi| {
                mi.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .count();
        if ready == n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {ready}/{n} Ready after an hour"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ready = started.elapsed();
    // Let the last status writes' watch events and any follow-up reconciles settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let requests = emu.requests_served() - base - own;
    let peak_mib = peak_rss_mib();
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    emu.shutdown().await;
    Figures {
        n,
        ready,
        requests,
        peak_mib,
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sizes: Vec<usize> = {
        let args: Vec<usize> = std::env::args()
            .skip(1)
            .filter_map(|a| a.parse().ok())
            .collect();
        if args.is_empty() {
            vec![100, 300, 1000]
        } else {
            args
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let publisher = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout.clone(),
    })))
    .unwrap();
    for m in MODULES {
        publisher.publish(&opm().join(m), "v0.1.0").unwrap();
    }
    let mut cfg = RegistryConfig::new(Mapping::single(Location::Layout { dir: layout }));
    cfg.cache_dir = Some(tmp.path().join("cache"));
    let registry = Arc::new(ModuleRegistry::new(cfg).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "concurrent renders: {}",
        opm_operator::server::default_concurrent_renders()
    );
    println!(
        "{:>6}  {:>12}  {:>14}  {:>12}  {:>15}",
        "N", "all Ready", "per instance", "requests/MI", "peak RSS (MiB)"
    );
    for n in sizes {
        let f = rt.block_on(run(n, &registry, tmp.path()));
        println!(
            "{:>6}  {:>10.1} s  {:>11.1} ms  {:>12.1}  {:>15.1}",
            f.n,
            f.ready.as_secs_f64(),
            f.ready.as_secs_f64() * 1000.0 / f.n as f64,
            f.requests as f64 / f.n as f64,
            f.peak_mib
        );
    }
}
