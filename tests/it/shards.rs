//! Sharded controllers as processes (issue 32 done-when 1): one unsharded `opm-operator serve`
//! and shard replicas (`--shard a` twice, `--shard b`) on the `kube-emu` binary.
//!
//! - Each instance is reconciled by exactly its shard: its events' `reportingInstance` names only
//!   that shard's leader (`<shard>/<identity>`; the unsharded replica reports `<identity>`).
//! - Relabelling an instance moves it without an apply from both: after the move only the new
//!   shard reports about it, and its objects keep their one field manager.
//! - Killing shard `a`'s leader (SIGKILL) hands its Lease to the standby within the lease
//!   period (plus one retry period), and the standby reconciles the shard's instances.
//!
//! The in-process variant (`controller::shard`) checks the same rules with counted renders.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crds::module_instance::ModuleInstance;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::cluster::{until, Cluster, DEMO, DEMO_VERSION};
use crate::e2e::valid_values;

const NS: &str = "shards";
const LABEL: &str = "sharding.opmodel.dev/key";
const LEASE: &str = "4cc9e43e.opmodel.dev";

fn instances(client: &kube::Client) -> Api<ModuleInstance> {
    Api::namespaced(client.clone(), NS)
}

async fn create(client: &kube::Client, name: &str, shard: Option<&str>) {
    let labels = match shard {
        Some(s) => json!({LABEL: s}),
        None => json!({}),
    };
    let mi: ModuleInstance = serde_json::from_value(json!({
        "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"module": {"path": DEMO, "version": DEMO_VERSION},
                 "values": valid_values(), "prune": true},
    }))
    .unwrap();
    instances(client)
        .create(&PostParams::default(), &mi)
        .await
        .unwrap();
}

/// Whether `name` is Ready=True for its current generation.
async fn ready(client: &kube::Client, name: &str) -> bool {
    let Some(mi) = instances(client).get_opt(name).await.unwrap() else {
        return false;
    };
    let generation = mi.metadata.generation;
    mi.status.is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == "Ready" && c.status == "True" && c.observed_generation == generation
        })
    })
}

/// The events whose subject is the instance `name`.
async fn events_about(client: &kube::Client, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// The reporting instances of the events about `name` (`since`: only events of that
/// resourceVersion or later, compared numerically).
async fn reporters(client: &kube::Client, name: &str, since: u64) -> BTreeSet<String> {
    events_about(client, name)
        .await
        .into_iter()
        .filter(|e| {
            e.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|v| v >= since)
        })
        .filter_map(|e| e.reporting_instance)
        .collect()
}

/// Waits until no event about `name` is recorded or updated for a second (at most 15 s): a
/// reconcile still in flight records its event after the status it wrote was seen, so a moment
/// taken right after `Ready` may still precede the shard's last event about the instance.
async fn settle_events(client: &kube::Client, name: &str) {
    let latest = || async {
        events_about(client, name)
            .await
            .into_iter()
            .filter_map(|e| e.metadata.resource_version?.parse::<u64>().ok())
            .max()
    };
    let mut last = latest().await;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = latest().await;
        if now == last {
            return;
        }
        last = now;
    }
}

/// The cluster's current resourceVersion (a fresh list's).
async fn now_rv(client: &kube::Client) -> u64 {
    instances(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap()
}

async fn relabel(client: &kube::Client, name: &str, shard: &str) {
    instances(client)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {LABEL: shard}}})),
        )
        .await
        .unwrap();
}

async fn set_replicas(client: &kube::Client, name: &str, replicas: i64) {
    instances(client)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"values": {"replicas": replicas}}})),
        )
        .await
        .unwrap();
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_processes_reconcile_their_instances_move_them_and_hand_over() {
    let mut cluster = Cluster::start(&[NS], "0s").await;
    let client = cluster.client.clone();
    let c = &client;
    cluster.serve("u", &[]);
    cluster.platform().await;
    let a1 = cluster.serve("a1", &["--shard", "a"]);
    let leased = until(60, || async move {
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(c.clone(), "opm-system")
            .get_opt(&format!("a.{LEASE}"))
            .await
            .unwrap()
            .is_some()
    })
    .await;
    assert!(leased, "shard a never leased\n{}", cluster.children.logs());
    cluster.serve("a2", &["--shard", "a"]);
    cluster.serve("b1", &["--shard", "b"]);

    for (name, shard) in [("plain", None), ("wa", Some("a")), ("wb", Some("b"))] {
        create(&client, name, shard).await;
    }
    for name in ["plain", "wa", "wb"] {
        let ok = until(300, || async move { ready(c, name).await }).await;
        cluster.children.assert_running();
        assert!(ok, "{name} not Ready\n{}", cluster.children.logs());
    }
    let holder_u = cluster.lease_holder(LEASE).await;
    let holder_a = cluster.lease_holder(&format!("a.{LEASE}")).await;
    let holder_b = cluster.lease_holder(&format!("b.{LEASE}")).await;
    assert!(holder_u.starts_with("u_"), "{holder_u}");
    assert!(holder_a.starts_with("a1_"), "{holder_a}");
    assert!(holder_b.starts_with("b1_"), "{holder_b}");
    let (ra, rb) = (format!("a/{holder_a}"), format!("b/{holder_b}"));
    assert_eq!(reporters(&client, "plain", 0).await, set(&[&holder_u]));
    assert_eq!(reporters(&client, "wa", 0).await, set(&[&ra]));
    assert_eq!(reporters(&client, "wb", 0).await, set(&[&rb]));

    // Relabel wa from a to b: b takes it over, a does nothing more with it.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let managers = |d: Deployment| -> BTreeSet<String> {
        d.metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            // Managers owning fields (a released create claim may leave one owning nothing).
            .filter(|m| {
                m.fields_v1
                    .as_ref()
                    .is_some_and(|v| v.0.as_object().is_some_and(|o| !o.is_empty()))
            })
            .filter_map(|m| m.manager)
            .collect()
    };
    // Created by shard a through the instance's create claim, the manager until the next write.
    let before = managers(deployments.get("wa-web").await.unwrap());
    assert!(
        before.len() == 1 && before.iter().all(|m| m.starts_with("opm-claim.")),
        "{before:?}"
    );
    settle_events(&client, "wa").await;
    let moved_at = now_rv(&client).await;
    relabel(&client, "wa", "b").await;
    set_replicas(&client, "wa", 1).await;
    let d = &deployments;
    let moved = until(120, || async move {
        ready(c, "wa").await && d.get("wa-web").await.unwrap().spec.replicas == Some(1)
    })
    .await;
    assert!(
        moved,
        "wa not reconciled after the move\n{}",
        cluster.children.logs()
    );
    assert_eq!(reporters(&client, "wa", moved_at).await, set(&[&rb]));
    // b's write handed it over: `opm-controller` alone, nothing left to a stale manager.
    assert_eq!(
        managers(deployments.get("wa-web").await.unwrap()),
        BTreeSet::from(["opm-controller".to_owned()])
    );

    // Kill shard a's leader: the standby takes the Lease within the lease period and
    // reconciles a new instance of the shard.
    let killed_at = Instant::now();
    cluster.children.kill(a1);
    let cl = &cluster;
    let handed = until(30, || async move {
        cl.lease_holder(&format!("a.{LEASE}"))
            .await
            .starts_with("a2_")
    })
    .await;
    let took = killed_at.elapsed();
    assert!(handed, "no hand-over\n{}", cluster.children.logs());
    println!(
        "shards: shard a's lease handed over {:.1} s after SIGKILL",
        took.as_secs_f64()
    );
    // Lease 4 s + retry 1 s, with 2 s for polling and a loaded machine.
    assert!(took < Duration::from_secs(7), "{took:?}");
    let holder_a2 = cluster.lease_holder(&format!("a.{LEASE}")).await;
    let since = now_rv(&client).await;
    create(&client, "wa2", Some("a")).await;
    let ok = until(120, || async move { ready(c, "wa2").await }).await;
    assert!(ok, "wa2 not Ready\n{}", cluster.children.logs());
    assert_eq!(
        reporters(&client, "wa2", since).await,
        set(&[&format!("a/{holder_a2}")])
    );
    cluster.children.assert_running();
}
