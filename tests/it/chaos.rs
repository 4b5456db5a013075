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
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crds::module_instance::ModuleInstance;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use crate::e2e::{kube_emu_binary, opm, valid_values, Children};
use crate::registry::harness::{cli_ok, DistRegistry};

const DEMO: &str = "fixtures.test/modules/demo@v0";
const MINI: &str = "fixtures.test/catalogs/mini@v0";
const NAMESPACES: [&str; 3] = ["chaos-a", "chaos-b", "chaos-c"];
const PER_NAMESPACE: usize = 20;
const MANAGED: &str = "app.kubernetes.io/managed-by=opm-controller";
const LEASE: &str = "4cc9e43e.opmodel.dev";

/// The `demo` fixture as v0.3.0 with its `settings` ConfigMap no longer `exact` (so it is named
/// after the instance, as every other object of the module).
fn per_instance_demo(root: &Path) -> PathBuf {
    let dir = root.join("demo-0.3.0");
    std::fs::create_dir_all(dir.join("cue.mod")).unwrap();
    std::fs::copy(
        opm().join("demo/cue.mod/module.cue"),
        dir.join("cue.mod/module.cue"),
    )
    .unwrap();
    let src = std::fs::read_to_string(opm().join("demo/module.cue")).unwrap();
    assert_eq!(src.matches("\t\t\t\texact: true\n").count(), 1);
    assert_eq!(src.matches("version:     \"0.1.0\"").count(), 1);
    let text = src
        .replace("\t\t\t\texact: true\n", "")
        .replace("version:     \"0.1.0\"", "version:     \"0.3.0\"");
    std::fs::write(dir.join("module.cue"), text).unwrap();
    dir
}

/// An `opm-operator serve` replica with leader election on short timings.
fn serve(dir: &Path, reg: &DistRegistry, kubeconfig: &Path, identity: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_opm-operator"));
    c.args(["serve", "--self-signed", "--self-signed-dir"])
        .arg(dir.join(format!("certs-{identity}")))
        .args([
            "--webhook-addr",
            "127.0.0.1:0",
            "--probe-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "0",
            "--leader-elect-namespace",
            "opm-system",
            "--leader-elect-lease-duration",
            "4s",
            "--leader-elect-renew-deadline",
            "3s",
            "--leader-elect-retry-period",
            "1s",
            "--health-poll-interval",
            "1s",
            "--core-module",
            "fixtures.test/core@v0",
            "--core-version",
            "v0.1.0",
            "--registry",
            &reg.mapping(),
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .arg("--platform-dir")
        .arg(dir.join(format!("platform-{identity}")))
        .env("RUST_LOG", "info")
        .env("HOSTNAME", identity)
        .env_remove("POD_NAME")
        .env_remove("OPM_REGISTRY");
    c
}

async fn client_of(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Polls `f` every 250 ms for at most `secs`.
async fn until<F, Fut>(secs: u64, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

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
    let dir = tempfile::tempdir().unwrap();
    let mut children = Children::default();

    let reg = DistRegistry::start();
    for m in ["core", "kube", "mini"] {
        cli_ok(&[
            "module",
            "publish",
            opm().join(m).to_str().unwrap(),
            "v0.1.0",
            "--registry",
            &reg.mapping(),
        ]);
    }
    cli_ok(&[
        "module",
        "publish",
        per_instance_demo(dir.path()).to_str().unwrap(),
        "v0.3.0",
        "--registry",
        &reg.mapping(),
    ]);

    let kubeconfig = dir.path().join("kubeconfig");
    let emu = children.spawn(
        "kube-emu",
        Command::new(kube_emu_binary())
            .args(["--simulate-workloads", "500ms", "--kubeconfig"])
            .arg(&kubeconfig),
    );
    let c = &children;
    assert!(
        until(30, || async move { c.log(emu).contains("serving on") }).await,
        "{}",
        children.logs()
    );
    let client = client_of(&kubeconfig).await;
    let k = &client;
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::all_crds() {
        crd_api.create(&PostParams::default(), &crd).await.unwrap();
    }
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in ["opm-system"].into_iter().chain(NAMESPACES) {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        ns_api.create(&PostParams::default(), &ns).await.unwrap();
    }

    // The operator and the Platform.
    let mut leader = children.spawn(
        "serve one",
        &mut serve(dir.path(), &reg, &kubeconfig, "chaos-one"),
    );
    let platform: crds::platform::Platform = serde_json::from_value(json!({
        "apiVersion": "opmodel.dev/v1alpha1", "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes", "registry": {MINI: {"version": "0.1.0"}}},
    }))
    .unwrap();
    let platforms: Api<crds::platform::Platform> = Api::all(client.clone());
    platforms
        .create(&PostParams::default(), &platform)
        .await
        .unwrap();
    let p = &platforms;
    let platform_ready = until(300, || async move {
        p.get("cluster").await.ok().is_some_and(|p| {
            p.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
    })
    .await;
    assert!(platform_ready, "platform not Ready\n{}", children.logs());

    // 60 instances; the operator is killed one second after its first apply.
    for ns in NAMESPACES {
        let api = Api::<ModuleInstance>::namespaced(client.clone(), ns);
        for i in 0..PER_NAMESPACE {
            let mi: ModuleInstance = serde_json::from_value(json!({
                "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
                "metadata": {"name": instance_name(i), "namespace": ns},
                "spec": {"module": {"path": DEMO, "version": "v0.3.0"},
                         "values": valid_values(), "prune": true},
            }))
            .unwrap();
            api.create(&PostParams::default(), &mi).await.unwrap();
        }
    }
    let applied = until(300, || async move { !managed(k).await.is_empty() }).await;
    assert!(applied, "nothing applied\n{}", children.logs());
    let first_apply = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    children.kill(leader);
    let before_restart = managed(&client).await.len();
    leader = children.spawn(
        "serve one (restarted)",
        &mut serve(dir.path(), &reg, &kubeconfig, "chaos-one-restarted"),
    );
    all_ready(&client, &mut children, 900, "after the restart").await;
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
    all_ready(&client, &mut children, 900, "after the rename").await;
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
    let second = children.spawn(
        "serve two",
        &mut serve(dir.path(), &reg, &kubeconfig, "chaos-two"),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "opm-system");
    let holder = leases
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
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
        children.logs()
    );
    children.kill(leader);
    let took_over = Instant::now();
    all_ready(&client, &mut children, 900, "after the leader change").await;
    let holder = leases
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
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
    let _ = second;

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
    assert!(deleted, "instances not deleted\n{}", children.logs());
    let after = managed(&client).await;
    assert_eq!(after, kept, "only the deleted instances' objects may go");
    children.assert_running();
}
