//! Throughput of kube-emu through kube-rs with 10,000 ConfigMaps: create, get, server-side
//! apply, watch events (live while patching, and replayed from history), and the process's
//! memory (VmRSS/VmHWM from /proc/self/status). `KUBE_EMU_BENCH_N` changes the object count.
//! Run: `cargo bench -p kube-emu --bench throughput`.

// A benchmark binary reports failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_emu::{Emulator, Options};
use serde_json::json;

const CONCURRENCY: usize = 32;

fn mem() -> String {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

fn report(what: &str, n: usize, d: Duration) {
    println!(
        "{what:<28} {n:>6} in {:>7.3} s = {:>9.0} /s   [{}]",
        d.as_secs_f64(),
        n as f64 / d.as_secs_f64(),
        mem()
    );
}

fn cm(i: usize) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": format!("cm-{i:05}"), "labels": {"app": "bench", "shard": (i % 10).to_string()}},
        "data": {"index": i.to_string(), "payload": "x".repeat(64)}
    }))
    .unwrap()
}

async fn count_events(
    mut s: impl futures::Stream<Item = Result<WatchEvent<ConfigMap>, kube::Error>> + Unpin,
    n: usize,
) -> usize {
    let mut seen = 0;
    while seen < n {
        match tokio::time::timeout(Duration::from_secs(60), s.next()).await {
            Ok(Some(Ok(WatchEvent::Modified(_) | WatchEvent::Added(_)))) => seen += 1,
            Ok(Some(Ok(_))) => {}
            other => panic!("watch ended early after {seen} events: {other:?}"),
        }
    }
    seen
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("KUBE_EMU_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    println!("kube-emu throughput, {n} ConfigMaps, {CONCURRENCY} concurrent requests, client and server in one process");
    println!(
        "start                                                          [{}]",
        mem()
    );
    let emu = Emulator::start(Options {
        history_limit: 4 * n,
        ..Default::default()
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());

    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &cm(i)).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    report("create", n, t.elapsed());

    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { api.get(&format!("cm-{i:05}")).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    report("get", n, t.elapsed());

    let t = Instant::now();
    let listed = api.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), n);
    report("list (one request, items)", n, t.elapsed());

    let ssa_start_rv = emu.resource_version();
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:05}")}, "data": {"applied": "yes", "index": i.to_string()}});
                api.patch(&format!("cm-{i:05}"), &PatchParams::apply("bench").force(), &Patch::Apply(cfg)).await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    report("server-side apply", n, t.elapsed());

    // Live watch events: a watcher started before n merge patches.
    let rv = emu.resource_version().to_string();
    let stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let watcher = tokio::spawn(async move {
        let t = Instant::now();
        let seen = count_events(stream, n).await;
        (seen, t.elapsed())
    });
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                api.patch(
                    &format!("cm-{i:05}"),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"live": "1"}})),
                )
                .await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    report("merge patch", n, t.elapsed());
    let (seen, d) = watcher.await.unwrap();
    report("watch events (live)", seen, d);

    // Replay from history: the n SSA events.
    let t = Instant::now();
    let stream = api
        .watch(&WatchParams::default(), &ssa_start_rv.to_string())
        .await
        .unwrap()
        .boxed();
    let seen = count_events(stream, n).await;
    report("watch events (replayed)", seen, t.elapsed());
    emu.shutdown().await;
}
