//! The REST render API under load (issue 16): the real server over TLS, the real render kernel,
//! the fixture modules in an OCI layout and the generated platform fixture in the store; auth off
//! (this measures rendering and HTTP, not the TokenReview round trip).
//!
//! For concurrency 1, 4 and 16 (keep-alive HTTP/1.1 connections, closed loop, `BENCH_SECS` each,
//! default 10): requests/s, p50 and p99 latency. Then the process's peak RSS (VmHWM).
//! `--max-concurrent-renders` is the machine's CPU count, so 16 measures queueing too.
//!
//! Run: `cargo bench --bench render_api` (`BENCH_SECS=3` for a quick look).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark binary: a failure aborts the run"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]

#[path = "support/tls.rs"]
mod tls;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use opm_operator::kernel::SkewPolicy;
use opm_operator::platform::{Generated, PackageIdentity, Store};
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};
use opm_operator::server::render_api::{auth::RenderAuth, RenderBackend};
use opm_operator::server::{self, Settings};

use tls::{call, connect, env_or, LoopbackTls};

/// The render endpoint of the benchmark's namespace.
const RENDER_PATH: &str = "/v1/namespaces/bench/render";

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let secs = env_or("BENCH_SECS", 10);
    let opm = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm");
    let layout = tempfile::tempdir().unwrap();
    for m in ["core", "kube", "mini", "gateway", "demo"] {
        let status = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
            .args(["module", "publish"])
            .arg(opm.join(m))
            .args(["v0.1.0", "--no-cache", "--layout"])
            .arg(layout.path())
            .output()
            .unwrap();
        assert!(status.status.success(), "publish {m}");
    }
    let platform_dir = opm.join("platform/generated");
    let store = Store::new();
    store.set_generated(Generated {
        identity: PackageIdentity::unclaimed(1).unwrap(),
        dir: platform_dir.clone(),
        platform: opm_operator::platform::from_dir(&platform_dir).unwrap(),
        skew: SkewPolicy::Warn,
    });
    let registry = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout.path().to_path_buf(),
    })))
    .unwrap();
    let renderer = Arc::new(opm_operator::render::Renderer::new(Arc::new(registry)));
    let values: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(opm.join("values/valid.json")).unwrap())
            .unwrap();
    let body = Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "name": "shop",
            "module": {"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"},
            "values": values
        }))
        .unwrap(),
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tls = LoopbackTls::new();
        let (_tx, cluster) = tokio::sync::watch::channel(None);
        let mut settings = Settings::loopback();
        settings.limits.request_timeout = Duration::from_secs(120);
        settings.render = Some(RenderBackend::new(
            store,
            renderer,
            RenderAuth::None,
            cluster,
            Duration::from_secs(120),
            server::default_concurrency(),
        ));
        let running = server::start(settings, tls.store.clone()).await.unwrap();
        let client = tls.client.clone();
        let addr = running.webhook_addr;

        let mut probe = connect(addr, client.clone()).await;
        let t = Instant::now();
        assert!(call(&mut probe, RENDER_PATH, &body).await, "the first render succeeds");
        println!(
            "first render (cold caches): {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );

        for conc in [1usize, 4, 16] {
            let deadline = Instant::now() + Duration::from_secs(secs);
            let mut tasks = Vec::new();
            for _ in 0..conc {
                let client = client.clone();
                let body = body.clone();
                tasks.push(tokio::spawn(async move {
                    let mut send = connect(addr, client.clone()).await;
                    let mut lat = Vec::new();
                    let mut errors = 0usize;
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        if call(&mut send, RENDER_PATH, &body).await {
                            lat.push(t.elapsed().as_micros() as u64);
                        } else {
                            errors += 1;
                            send = connect(addr, client.clone()).await;
                        }
                    }
                    (lat, errors)
                }));
            }
            let start = Instant::now();
            let mut lat = Vec::new();
            let mut errors = 0;
            for t in tasks {
                let (l, e) = t.await.unwrap();
                lat.extend(l);
                errors += e;
            }
            let elapsed = start.elapsed().as_secs_f64();
            lat.sort_unstable();
            let pct = |p: f64| {
                lat.get(((lat.len() as f64 * p).ceil() as usize).saturating_sub(1))
                    .copied()
                    .unwrap_or(0) as f64
                    / 1000.0
            };
            println!(
                "concurrency {conc:>2}: {:>7.1} req/s  p50 {:>8.1} ms  p99 {:>8.1} ms  ({} ok, {errors} errors)",
                lat.len() as f64 / elapsed,
                pct(0.50),
                pct(0.99),
                lat.len()
            );
        }
        println!("peak RSS: {:.1} MiB", peak_rss_kib() as f64 / 1024.0);
        running.shutdown();
        running.wait().await.unwrap();
    });
}
