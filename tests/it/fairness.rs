//! Fairness of `serve` under hostile modules (issue 41 item 2), with the real binaries of
//! [`crate::cluster`]: the `kube-emu` binary (workload simulator on), the registry with the
//! fixtures plus `fixtures/opm/hostile` (a comprehension of 30 million list elements), and one
//! `opm-operator serve` with `--max-concurrent-renders 2` and a small `--render-memory-limit`.
//!
//! The scenario:
//! 1. One warm-up instance (registry caches filled).
//! 2. 30 instances of the per-instance `demo` alone: the time until all are Ready; the
//!    process's peak resident memory then is the floor (the process with its instances and
//!    their own renders, each within the budget).
//! 3. 4 hostile instances, then 30 more `demo` instances: the time until those are Ready is
//!    within 1.5× the time alone; the hostile ones are `Ready=False` reason
//!    `MemoryBudgetExceeded`, the message naming the budget and the value being evaluated;
//!    and the process's peak resident memory (`VmHWM`) stays under floor + concurrency ×
//!    budget, the container arithmetic of docs/install.md.
//!
//! The figures are printed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crds::module_instance::ModuleInstance;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::cluster::{Cluster, DEMO, DEMO_VERSION};
use crate::e2e::valid_values;

const ALONE: &str = "fair-alone";
const MIXED: &str = "fair-mixed";
const WARM: &str = "fair-warm";
const NORMAL: usize = 30;
const HOSTILE: usize = 4;
const CONCURRENCY: u64 = 2;
/// The budget of the test's `serve` (`--render-memory-limit`), in MiB.
const BUDGET_MIB: u64 = 32;
const HOSTILE_MODULE: &str = "fixtures.test/modules/hostile@v0";

/// A line of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

async fn create(
    client: &kube::Client,
    ns: &str,
    name: &str,
    module: &str,
    version: &str,
    values: serde_json::Value,
) {
    let mi: ModuleInstance = serde_json::from_value(json!({
        "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"module": {"path": module, "version": version}, "values": values},
    }))
    .unwrap();
    Api::<ModuleInstance>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &mi)
        .await
        .unwrap();
}

/// The Ready condition of `mi` for its generation: (status, reason, message).
fn ready_of(mi: &ModuleInstance) -> Option<(String, String, String)> {
    let generation = mi.metadata.generation;
    mi.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready" && c.observed_generation == generation)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    })
}

/// The instances of `ns` whose name starts with `prefix`.
async fn listed(client: &kube::Client, ns: &str, prefix: &str) -> Vec<ModuleInstance> {
    Api::<ModuleInstance>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|m| {
            m.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect()
}

/// Waits until the `count` instances `prefix*` of `ns` are Ready=True; returns the time taken.
async fn all_ready(
    cluster: &mut Cluster,
    ns: &str,
    prefix: &str,
    count: usize,
    since: Instant,
) -> Duration {
    let deadline = since + Duration::from_secs(100);
    loop {
        let items = listed(&cluster.client, ns, prefix).await;
        let ready = items
            .iter()
            .filter(|m| ready_of(m).is_some_and(|(s, _, _)| s == "True"))
            .count();
        if ready == count {
            return since.elapsed();
        }
        cluster.children.assert_running();
        assert!(
            Instant::now() < deadline,
            "{ns}: {ready}/{count} Ready\n{}",
            cluster.children.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_modules_hold_up_no_one_and_stay_inside_the_memory_arithmetic() {
    let mut cluster = Cluster::start(&[ALONE, MIXED, WARM], "200ms").await;
    cluster.publish(&crate::e2e::opm().join("hostile"), "v0.1.0");
    let budget = format!("{BUDGET_MIB}Mi");
    let serve = cluster.serve(
        "fair",
        &[
            "--max-concurrent-renders",
            &CONCURRENCY.to_string(),
            "--render-memory-limit",
            &budget,
        ],
    );
    cluster.platform().await;
    let pid = cluster.children.pid(serve);
    let client = cluster.client.clone();

    // 1. One warm-up render.
    create(&client, WARM, "warm", DEMO, DEMO_VERSION, valid_values()).await;
    all_ready(&mut cluster, WARM, "warm", 1, Instant::now()).await;

    // 2. The normal instances alone.
    let started = Instant::now();
    for i in 0..NORMAL {
        create(
            &client,
            ALONE,
            &format!("app{i:03}"),
            DEMO,
            DEMO_VERSION,
            valid_values(),
        )
        .await;
    }
    let alone = all_ready(&mut cluster, ALONE, "app", NORMAL, started).await;
    let floor = status_bytes(pid, "VmHWM");

    // 3. The hostile instances first, then as many normal ones.
    let started = Instant::now();
    for i in 0..HOSTILE {
        create(
            &client,
            MIXED,
            &format!("hostile{i}"),
            HOSTILE_MODULE,
            "v0.1.0",
            json!({}),
        )
        .await;
    }
    for i in 0..NORMAL {
        create(
            &client,
            MIXED,
            &format!("app{i:03}"),
            DEMO,
            DEMO_VERSION,
            valid_values(),
        )
        .await;
    }
    let mixed = all_ready(&mut cluster, MIXED, "app", NORMAL, started).await;

    // The hostile ones: refused by the memory budget, naming it and where.
    let refused = crate::cluster::until(60, || async {
        let h = listed(&client, MIXED, "hostile").await;
        h.len() == HOSTILE
            && h.iter().all(|m| {
                ready_of(m).is_some_and(|(s, r, _)| s == "False" && r == "MemoryBudgetExceeded")
            })
    })
    .await;
    let hostile = listed(&client, MIXED, "hostile").await;
    assert!(
        refused,
        "{:?}\n{}",
        hostile.iter().map(ready_of).collect::<Vec<_>>(),
        cluster.children.logs()
    );
    for m in &hostile {
        let (_, _, message) = ready_of(m).unwrap();
        assert!(
            message.contains(&format!(
                "evaluation memory budget ({BUDGET_MIB}.0 MiB) exceeded"
            )),
            "{message}"
        );
        assert!(message.contains("while evaluating "), "{message}");
    }
    let hwm = status_bytes(pid, "VmHWM");
    let limit = floor + CONCURRENCY * (BUDGET_MIB << 20);
    println!(
        "fairness: {NORMAL} instances Ready in {:.1} s alone, {:.1} s beside {HOSTILE} hostile ones ({:.2}×); \
         floor {} MiB, peak {} MiB, floor + {CONCURRENCY} × {BUDGET_MIB} MiB = {} MiB",
        alone.as_secs_f64(),
        mixed.as_secs_f64(),
        mixed.as_secs_f64() / alone.as_secs_f64(),
        floor >> 20,
        hwm >> 20,
        limit >> 20
    );
    assert!(
        mixed.as_secs_f64() <= 1.5 * alone.as_secs_f64(),
        "beside the hostile instances the others took {mixed:?}, alone {alone:?}"
    );
    assert!(
        hwm < limit,
        "peak RSS {} MiB over floor {} MiB + {CONCURRENCY} × {BUDGET_MIB} MiB",
        hwm >> 20,
        floor >> 20
    );
    cluster.children.assert_running();
}
