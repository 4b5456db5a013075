//! Crash test of the whole operator (issue 29 item 3), with the real binaries: the `kube-emu`
//! binary (workload simulator on, so Ready means the Deployments are available), Debian's
//! `docker-registry` holding the fixtures published by `opm-operator module publish`, and
//! `opm-operator serve` processes with leader election.
//!
//! The scenario, in order:
//! 1. 60 ModuleInstances (`prune: true`) over 3 namespaces, of a variant of the `demo` module
//!    whose every object name derives from the instance name (so no two instances claim one
//!    object; the ownership rule has its own tests).
//! 2. The operator is killed with SIGKILL one second after its first apply and started again.
//!    Then every instance is Ready at its generation, and the live objects the operator manages
//!    are exactly the union of the inventories, each object once, labelled with its owner.
//! 3. A values change that renames an object (the content-hashed hosts ConfigMap): all Ready
//!    again, nothing stale left (same check).
//! 4. A second replica joins; a values change starts and the leader (read from the Lease) is
//!    killed mid-reconcile; the other replica takes over and finishes it (same check).
//! 5. Deleting one namespace's instances removes exactly their objects; the other namespaces'
//!    objects are untouched (same uids and resourceVersions).
//!
//! The time from the first apply to all Ready (after the crash) is printed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crds::module_instance::ModuleInstance;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use crate::cluster::{until, Cluster, DEMO, DEMO_VERSION};
use crate::e2e::{valid_values, Children};
const NAMESPACES: [&str; 3] = ["chaos-a", "chaos-b", "chaos-c"];
const PER_NAMESPACE: usize = 20;
const MANAGED: &str = "app.kubernetes.io/managed-by=opm-controller";
const LEASE: &str = "4cc9e43e.opmodel.dev";

fn instance_name(i: usize) -> String {
    format!("app{i:02}")
}

async fn instances(client: &kube::Client) -> Vec<ModuleInstance> {
    let mut out = Vec::new();
    for ns in NAMESPACES {
        out.extend(
            Api::<ModuleInstance>::namespaced(client.clone(), ns)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items,
        );
    }
    out
}

/// Whether `mi` is Ready=True for its current generation.
fn ready_now(mi: &ModuleInstance) -> bool {
    let generation = mi.metadata.generation;
    mi.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == "Ready" && c.status == "True" && c.observed_generation == generation
        })
    })
}

/// How many of the instances are Ready for their generation, of how many.
async fn ready_count(client: &kube::Client) -> (usize, usize) {
    let all = instances(client).await;
    (all.iter().filter(|m| ready_now(m)).count(), all.len())
}

/// A managed object's identity and what the check compares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Live {
    kind: String,
    namespace: String,
    name: String,
    owner: (String, String),
    uid: String,
    resource_version: String,
}

/// Every live Deployment and ConfigMap the operator manages in the scenario's namespaces.
async fn managed(client: &kube::Client) -> Vec<Live> {
    let lp = ListParams::default().labels(MANAGED);
    let mut out = Vec::new();
    for ns in NAMESPACES {
        let deployments = Api::<Deployment>::namespaced(client.clone(), ns)
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|d| ("Deployment", d.metadata));
        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|c| ("ConfigMap", c.metadata));
        for (kind, md) in deployments.chain(config_maps) {
            let labels = md.labels.clone().unwrap_or_default();
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            out.push(Live {
                kind: kind.to_owned(),
                namespace: ns.to_owned(),
                name: md.name.clone().unwrap_or_default(),
                owner: (
                    label("module-instance.opmodel.dev/namespace"),
                    label("module-instance.opmodel.dev/name"),
                ),
                uid: md.uid.clone().unwrap_or_default(),
                resource_version: md.resource_version.clone().unwrap_or_default(),
            });
        }
    }
    out.sort();
    out
}

/// The scenario's invariant: the live managed objects are exactly the union of the instances'
/// inventories, no object is in two inventories, and each is labelled with the instance whose
/// inventory lists it. Returns the live objects.
async fn assert_exactly_the_inventories(
    client: &kube::Client,
    expected_instances: usize,
) -> Vec<Live> {
    let all = instances(client).await;
    assert_eq!(all.len(), expected_instances);
    let mut listed: BTreeMap<(String, String, String), (String, String)> = BTreeMap::new();
    for mi in &all {
        let ns = mi.metadata.namespace.clone().unwrap();
        let name = mi.metadata.name.clone().unwrap();
        let inventory = mi
            .status
            .as_ref()
            .and_then(|s| s.reconcile.inventory.clone())
            .unwrap_or_else(|| panic!("{ns}/{name} has no inventory"));
        assert_eq!(inventory.entries.len(), 3, "{ns}/{name}: {inventory:?}");
        for e in inventory.entries {
            let key = (
                e.kind.clone(),
                e.namespace.clone().unwrap_or_default(),
                e.name.clone(),
            );
            let before = listed.insert(key.clone(), (ns.clone(), name.clone()));
            assert!(before.is_none(), "{key:?} is in two inventories");
        }
    }
    let live = managed(client).await;
    let mut seen = BTreeSet::new();
    for l in &live {
        let key = (l.kind.clone(), l.namespace.clone(), l.name.clone());
        assert!(seen.insert(key.clone()), "{key:?} twice");
        let owner = listed
            .get(&key)
            .unwrap_or_else(|| panic!("{key:?} is live but in no inventory (stale)"));
        assert_eq!(&l.owner, owner, "{key:?} carries the wrong owner");
    }
    let missing: Vec<_> = listed.keys().filter(|k| !seen.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "inventory entries not live: {missing:?}"
    );
    live
}

/// Waits until every instance is Ready for its generation (panics with the logs after `secs`).
async fn all_ready(client: &kube::Client, children: &mut Children, secs: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (ready, total) = ready_count(client).await;
        if ready == total && total > 0 {
            break;
        }
        children.assert_running();
        assert!(
            Instant::now() < deadline,
            "{what}: {ready}/{total} Ready\n{}",
            children.logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Merge-patches every instance's `spec.values` with `values`.
async fn patch_values(client: &kube::Client, values: Value) {
    for mi in instances(client).await {
        Api::<ModuleInstance>::namespaced(client.clone(), &mi.metadata.namespace.unwrap())
            .patch(
                &mi.metadata.name.unwrap(),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"values": values}})),
            )
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_survives_sigkill_and_a_leader_change_with_sixty_instances() {
    let mut cluster = Cluster::start(&NAMESPACES, "500ms").await;
    let client = cluster.client.clone();
    let k = &client;
    let mut leader = cluster.serve("chaos-one", &[]);
    cluster.platform().await;

    // 60 instances; the operator is killed one second after its first apply.
    for ns in NAMESPACES {
        let api = Api::<ModuleInstance>::namespaced(client.clone(), ns);
        for i in 0..PER_NAMESPACE {
            let mi: ModuleInstance = serde_json::from_value(json!({
                "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
                "metadata": {"name": instance_name(i), "namespace": ns},
                "spec": {"module": {"path": DEMO, "version": DEMO_VERSION},
                         "values": valid_values(), "prune": true},
            }))
            .unwrap();
            api.create(&PostParams::default(), &mi).await.unwrap();
        }
    }
    let applied = until(300, || async move { !managed(k).await.is_empty() }).await;
    assert!(applied, "nothing applied\n{}", cluster.children.logs());
    let first_apply = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.children.kill(leader);
    let before_restart = managed(&client).await.len();
    leader = cluster.serve("chaos-one-restarted", &[]);
    all_ready(&client, &mut cluster.children, 900, "after the restart").await;
    println!(
        "chaos: {} objects live at the SIGKILL; all 60 instances Ready {:.1} s after the first apply",
        before_restart,
        first_apply.elapsed().as_secs_f64()
    );
    assert_exactly_the_inventories(&client, 60).await;

    // A values change that renames every hosts ConfigMap (its name carries a content hash).
    let old_hosts: BTreeSet<(String, String)> = managed(&client)
        .await
        .into_iter()
        .filter(|l| l.name.contains("-hosts-"))
        .map(|l| (l.namespace, l.name))
        .collect();
    assert_eq!(old_hosts.len(), 60);
    patch_values(&client, json!({"hosts": ["c.example"]})).await;
    all_ready(&client, &mut cluster.children, 900, "after the rename").await;
    let live = assert_exactly_the_inventories(&client, 60).await;
    let new_hosts: BTreeSet<(String, String)> = live
        .iter()
        .filter(|l| l.name.contains("-hosts-"))
        .map(|l| (l.namespace.clone(), l.name.clone()))
        .collect();
    assert_eq!(new_hosts.len(), 60);
    assert!(
        new_hosts.is_disjoint(&old_hosts),
        "the hosts ConfigMaps were not renamed"
    );

    // A second replica; the leader is killed in the middle of a values change.
    cluster.serve("chaos-two", &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let holder = cluster.lease_holder(LEASE).await;
    assert!(
        holder.starts_with("chaos-one-restarted"),
        "the restarted replica should lead: {holder}"
    );
    patch_values(&client, json!({"replicas": 1})).await;
    let deployments_of = |ns: &'static str| Api::<Deployment>::namespaced(client.clone(), ns);
    let started = until(300, || async move {
        for ns in NAMESPACES {
            let list = Api::<Deployment>::namespaced(k.clone(), ns)
                .list(&ListParams::default())
                .await
                .unwrap();
            if list.items.iter().any(|d| d.spec.replicas == Some(1)) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        started,
        "the values change never started\n{}",
        cluster.children.logs()
    );
    cluster.children.kill(leader);
    let took_over = Instant::now();
    all_ready(
        &client,
        &mut cluster.children,
        900,
        "after the leader change",
    )
    .await;
    let holder = cluster.lease_holder(LEASE).await;
    assert!(holder.starts_with("chaos-two"), "{holder}");
    println!(
        "chaos: the second replica finished the change {:.1} s after the leader was killed",
        took_over.elapsed().as_secs_f64()
    );
    let live = assert_exactly_the_inventories(&client, 60).await;
    for ns in NAMESPACES {
        for d in deployments_of(ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
        {
            assert_eq!(d.spec.replicas, Some(1));
        }
    }

    // Deleting one namespace's instances removes exactly their objects.
    let (gone, kept): (Vec<Live>, Vec<Live>) =
        live.into_iter().partition(|l| l.namespace == NAMESPACES[0]);
    assert_eq!(gone.len(), 60);
    Api::<ModuleInstance>::namespaced(client.clone(), NAMESPACES[0])
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    let deleted = until(300, || async move {
        Api::<ModuleInstance>::namespaced(k.clone(), NAMESPACES[0])
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    assert!(
        deleted,
        "instances not deleted\n{}",
        cluster.children.logs()
    );
    let after = managed(&client).await;
    assert_eq!(after, kept, "only the deleted instances' objects may go");
    cluster.children.assert_running();
}
