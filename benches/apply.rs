//! The apply engine against kube-emu: 1,000 objects (500 ConfigMaps + 500 Deployments) applied
//! in one staged pass, then re-applied unchanged (the no-op cost), then with every ConfigMap
//! changed, then drift-checked, then pruned entirely; then the same three applies again in
//! another namespace as an instance (instance labels: objects found absent are created through
//! a claim, `opm_operator::apply::claim`). Prints wall time, HTTP requests per object
//! (counted by the emulator) and objects per second for each pass. Emulator and engine share one process (and the machine's cores).
//!
//! Run: `cargo bench -p opm-operator --bench apply` (prints figures; asserts nothing).
//! Optional argument: the number of objects (default 1000, half of each kind).

use std::time::{Duration, Instant};

use opm_operator::apply::drift::DriftOptions;
use opm_operator::apply::object::InstanceLabels;
use opm_operator::apply::prune::PruneOptions;
use opm_operator::apply::{Action, ApplyOptions, ChangeSet, Engine, EngineOptions};
use serde_json::{json, Value};

fn objects(n: usize, rev: &str) -> Vec<Value> {
    objects_in("bench", n, rev)
}

fn objects_in(ns: &str, n: usize, rev: &str) -> Vec<Value> {
    let mut v = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})];
    for i in 0..n / 2 {
        v.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": ns,
                "labels": {"component.opmodel.dev/name": "c"}},
            "data": {"rev": rev, "payload": "x".repeat(256)}}));
        v.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("web-{i}"), "namespace": ns,
                "labels": {"component.opmodel.dev/name": "c"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": format!("web-{i}")}},
                "template": {"metadata": {"labels": {"app": format!("web-{i}")}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                        "ports": [{"containerPort": 80}],
                        "env": [{"name": "MODE", "value": "bench"}]}]}}}}));
    }
    v
}

async fn pass(
    emu: &kube_emu::Emulator,
    eng: &Engine,
    objs: &[Value],
    label: &str,
) -> Result<ChangeSet, Box<dyn std::error::Error>> {
    pass_with(emu, eng, objs, label, &ApplyOptions::default()).await
}

async fn pass_with(
    emu: &kube_emu::Emulator,
    eng: &Engine,
    objs: &[Value],
    label: &str,
    opts: &ApplyOptions,
) -> Result<ChangeSet, Box<dyn std::error::Error>> {
    let before = emu.requests_served();
    let start = Instant::now();
    let cs = eng.apply_all_staged(objs, opts).await?;
    let took = start.elapsed();
    let reqs = emu.requests_served() - before;
    println!(
        "{label:<28} {:>8.2} s  {:>7.0} obj/s  {:>5.2} req/obj  ({} created, {} configured, {} unchanged)",
        took.as_secs_f64(),
        objs.len() as f64 / took.as_secs_f64().max(f64::EPSILON),
        reqs as f64 / objs.len() as f64,
        cs.count(Action::Created),
        cs.count(Action::Configured),
        cs.count(Action::Unchanged),
    );
    Ok(cs)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let emu = kube_emu::Emulator::start(kube_emu::Options::default()).await?;
    let eng = Engine::new(
        emu.client()?,
        EngineOptions {
            wait_interval: Duration::from_millis(50),
            ..EngineOptions::default()
        },
    );
    let first = objects(n, "1");
    println!(
        "apply engine bench: {} objects ({} ConfigMaps, {} Deployments, 1 Namespace), concurrency {}",
        first.len(),
        n / 2,
        n / 2,
        EngineOptions::default().concurrency
    );
    pass(&emu, &eng, &first, "initial apply").await?;
    pass(&emu, &eng, &first, "no-op re-apply").await?;
    let second = objects(n, "2");
    pass(&emu, &eng, &second, "half changed (ConfigMaps)").await?;

    let before = emu.requests_served();
    let start = Instant::now();
    let report = eng.drift(&second, &DriftOptions::default()).await;
    let took = start.elapsed();
    println!(
        "{:<28} {:>8.2} s  {:>7.0} obj/s  {:>5.2} req/obj  ({:?})",
        "drift check (in sync)",
        took.as_secs_f64(),
        second.len() as f64 / took.as_secs_f64().max(f64::EPSILON),
        (emu.requests_served() - before) as f64 / second.len() as f64,
        report.outcome(),
    );

    let inventory = opm_operator::inventory::entries_of(&second)?;
    let before = emu.requests_served();
    let start = Instant::now();
    let pruned = eng.prune(&inventory, &PruneOptions::default()).await;
    let took = start.elapsed();
    println!(
        "{:<28} {:>8.2} s  {:>7.0} obj/s  {:>5.2} req/obj  ({} deleted, {} skipped, {} errors)",
        "prune everything",
        took.as_secs_f64(),
        inventory.len() as f64 / took.as_secs_f64().max(f64::EPSILON),
        (emu.requests_served() - before) as f64 / inventory.len() as f64,
        pruned.deleted.len(),
        pruned.skipped.len(),
        pruned.errors.len(),
    );

    let opts = ApplyOptions {
        instance: Some(InstanceLabels {
            name: "bench".into(),
            namespace: "bench-i".into(),
            uuid: "6f1c0e52-0000-4000-8000-0000000000be".into(),
        }),
        ..ApplyOptions::default()
    };
    let third = objects_in("bench-i", n, "1");
    pass_with(&emu, &eng, &third, "initial apply (instance)", &opts).await?;
    pass_with(&emu, &eng, &third, "no-op re-apply (instance)", &opts).await?;
    let fourth = objects_in("bench-i", n, "2");
    pass_with(&emu, &eng, &fourth, "half changed (instance)", &opts).await?;
    emu.shutdown().await;
    Ok(())
}
