//! Sharded controllers (issue 32): one unsharded replica and shard replicas against one kube-emu,
//! each replica on its own tokio runtime in its own thread with its own client, store, platform
//! directory and renderer (a process in all but the address space). Killing a replica shuts its
//! runtime down without a graceful stop: its tasks vanish and its lease is not released, as when a
//! process dies.
//!
//! - each instance is reconciled by exactly its shard (the unsharded replica: the unlabelled one),
//!   and only the unsharded leader writes the Platform while the shards observe its package;
//! - relabelling an instance moves it: the new shard reconciles it, the old one never renders or
//!   applies it again, and the rendered object keeps its one field manager;
//! - killing a shard's leader hands its lease to the shard's other replica within the lease
//!   period, and the new leader reconciles the shard's instances.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crds::conditions::types;
use crds::k8s_openapi::api::coordination::v1::Lease;
use crds::k8s_openapi::api::core::v1::ConfigMap;
use crds::k8s_openapi::api::events::v1::Event as K8sEvent;
use crds::module_instance::ModuleInstance;
use crds::platform::Platform;
use kube::api::{ListParams, Patch, PatchParams};
use kube::Api;
use opm_operator::controller::context::Context;
use opm_operator::controller::leader::{Elector, Timing};
use opm_operator::controller::manager::{self, Role};
use opm_operator::controller::shard::{Shard, DEFAULT_SHARD_LABEL};
use opm_operator::kernel::{
    BuiltPlatform, KernelError, ModuleRenderer, ModuleRequest, RenderResult, SkewPolicy,
};
use opm_operator::platform::{Layout, Store};
use tokio::sync::watch;

use super::common::*;

const NS: &str = "team-a";
const UUID: &str = "6f1c0e52-0000-4000-8000-00000000aa32";

fn timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    }
}

/// Renders one ConfigMap `<name>-cm` with `values.msg`, recording which instance it rendered.
#[derive(Default)]
struct Recorder {
    renders: Mutex<Vec<String>>,
}

impl Recorder {
    fn count(&self, name: &str) -> usize {
        self.renders
            .lock()
            .unwrap()
            .iter()
            .filter(|n| *n == name)
            .count()
    }

    fn names(&self) -> BTreeSet<String> {
        self.renders.lock().unwrap().iter().cloned().collect()
    }
}

impl ModuleRenderer for Recorder {
    fn render_module(
        &self,
        req: &ModuleRequest,
        _platform: &BuiltPlatform,
        _skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        self.renders.lock().unwrap().push(req.name.clone());
        let msg = req
            .values
            .as_ref()
            .and_then(|v| v.get("msg"))
            .and_then(|v| v.as_str())
            .unwrap_or("hello")
            .to_owned();
        let cm = format!("{}-cm", req.name);
        Ok(fake_render(
            (&req.name, &req.namespace, UUID),
            &[("v1", "ConfigMap", cm.as_str(), "a")],
            &msg,
            Vec::new(),
        ))
    }
}

/// One replica: a thread running its own runtime with `manager::run` under an elector.
struct Replica {
    /// The identity in the Lease; events name `<shard>/<identity>` (or the identity).
    identity: String,
    reporting: String,
    renderer: Arc<Recorder>,
    store: Store<BuiltPlatform>,
    role: watch::Receiver<Role>,
    shutdown: watch::Sender<bool>,
    kill: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Replica {
    fn start(env: &Env, shard: Option<&str>, identity: &str) -> Replica {
        let shard = Shard::new(DEFAULT_SHARD_LABEL, shard.unwrap_or("")).unwrap();
        let reporting = shard.reporting_instance(identity);
        let renderer = Arc::new(Recorder::default());
        let store = Store::new();
        let dir = tempfile::tempdir().unwrap();
        let layout = Arc::new(Layout::new(dir.path().join("platform")).unwrap());
        layout.reset().unwrap();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (role_tx, role) = watch::channel(Role::Follower);
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let config = env.emu.config().unwrap();
        let (builder, acquirer) = (env.builder.clone(), env.acquirer.clone());
        let (r, s, id, rep) = (
            renderer.clone(),
            store.clone(),
            identity.to_owned(),
            reporting.clone(),
        );
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = kube::Client::try_from(config).unwrap();
                let mut ctx = Context::new(client.clone(), s, layout, builder, acquirer, &rep);
                ctx.renderer = Some(r);
                let elector =
                    Elector::new(client, "opm-system", &shard.lease_name(), &id, timing());
                ctx.shard = shard;
                tokio::select! {
                    _ = manager::run(Arc::new(ctx), Some(elector), shutdown_rx, role_tx) => {}
                    _ = killed => {}
                }
            });
            // A kill leaves the controller tasks mid-flight: drop them all, release nothing.
            rt.shutdown_background();
        });
        Replica {
            identity: identity.to_owned(),
            reporting,
            renderer,
            store,
            role,
            shutdown,
            kill: Some(kill),
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn leading(&self) -> bool {
        *self.role.borrow() == Role::Leader
    }

    /// Dies without a graceful stop.
    fn kill(&mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }

    /// Stops gracefully (controllers stop, the lease is released).
    fn stop(&mut self) {
        self.shutdown.send_replace(true);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

fn instances(client: &kube::Client) -> Api<ModuleInstance> {
    Api::namespaced(client.clone(), NS)
}

async fn create_instance(client: &kube::Client, name: &str, shard: Option<&str>) {
    let mut mi = ModuleInstance::test().named(NS, name);
    if let Some(s) = shard {
        mi.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(DEFAULT_SHARD_LABEL.to_owned(), s.to_owned());
    }
    create(&instances(client), mi).await;
}

async fn set_shard(client: &kube::Client, name: &str, shard: &str) {
    instances(client)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"labels": {DEFAULT_SHARD_LABEL: shard}}}),
            ),
        )
        .await
        .unwrap();
}

async fn set_msg(client: &kube::Client, name: &str, msg: &str) {
    instances(client)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"msg": msg}}})),
        )
        .await
        .unwrap();
}

async fn ready(client: &kube::Client, name: &str) -> bool {
    instances(client)
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|mi| mi.status)
        .and_then(|s| condition(&s.conditions, types::READY))
        .is_some_and(|c| c.0 == "True")
}

async fn msg_of(client: &kube::Client, name: &str) -> Option<String> {
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get_opt(&format!("{name}-cm"))
        .await
        .unwrap()
        .and_then(|c| c.data)
        .and_then(|d| d.get("msg").cloned())
}

/// The reporting instances of every event about `name`.
async fn reporters(client: &kube::Client, name: &str) -> BTreeSet<String> {
    Api::<K8sEvent>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reporting_instance)
        .collect()
}

async fn lease_holder(client: &kube::Client, lease: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "opm-system")
        .get_opt(lease)
        .await
        .unwrap()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

async fn cluster() -> Env {
    let env = env().await;
    namespace(&env.client, "opm-system").await;
    namespace(&env.client, NS).await;
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    env
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_is_reconciled_by_exactly_its_shard() {
    let env = cluster().await;
    let u = Replica::start(&env, None, "u");
    let a = Replica::start(&env, Some("a"), "a1");
    let b = Replica::start(&env, Some("b"), "b1");
    create_instance(&env.client, "plain", None).await;
    create_instance(&env.client, "wa", Some("a")).await;
    create_instance(&env.client, "wa2", Some("a")).await;
    create_instance(&env.client, "wb", Some("b")).await;
    // An instance of a shard nobody runs is left alone by everyone.
    create_instance(&env.client, "orphan", Some("c")).await;
    for name in ["plain", "wa", "wa2", "wb"] {
        assert!(
            eventually(20, || ready(&env.client, name)).await,
            "{name} Ready"
        );
    }
    assert!(u.leading() && a.leading() && b.leading(), "one lease each");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(u.renderer.names(), set(&["plain"]));
    assert_eq!(a.renderer.names(), set(&["wa", "wa2"]));
    assert_eq!(b.renderer.names(), set(&["wb"]));
    let orphan = instances(&env.client).get("orphan").await.unwrap();
    assert!(orphan.status.is_none(), "{:?}", orphan.status);
    assert!(orphan.metadata.finalizers.unwrap_or_default().is_empty());
    // One lease per shard, each held by its replica.
    assert_eq!(
        lease_holder(&env.client, crds::LEADER_ELECTION_ID)
            .await
            .as_deref(),
        Some("u")
    );
    assert_eq!(
        lease_holder(&env.client, &format!("a.{}", crds::LEADER_ELECTION_ID))
            .await
            .as_deref(),
        Some("a1")
    );
    // Which shard acted is visible in the events.
    assert_eq!(reporters(&env.client, "plain").await, set(&["u"]));
    assert_eq!(reporters(&env.client, "wa").await, set(&["a/a1"]));
    assert_eq!(reporters(&env.client, "wb").await, set(&["b/b1"]));
    // Only the unsharded leader writes the Platform; the shards observe its package.
    assert_eq!(reporters(&env.client, "cluster").await, set(&["u"]));
    let id = u.store.identity();
    assert!(id.is_some());
    assert_eq!(a.store.identity(), id);
    assert_eq!(b.store.identity(), id);
    // A Platform change reaches every shard through its own watch and re-renders its instances.
    let before = a.renderer.count("wa");
    patch_spec(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"type": "next"}),
    )
    .await;
    assert!(
        eventually(10, || async {
            a.store.identity().is_some()
                && a.store.identity() != id
                && a.store.identity() == u.store.identity()
                && a.renderer.count("wa") > before
        })
        .await,
        "shard a re-rendered on the new package"
    );
    assert_eq!(u.renderer.names(), set(&["plain"]));
    assert_eq!(b.renderer.names(), set(&["wb"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relabelling_an_instance_moves_it_between_shards() {
    let env = cluster().await;
    let _u = Replica::start(&env, None, "u");
    let a = Replica::start(&env, Some("a"), "a1");
    let b = Replica::start(&env, Some("b"), "b1");
    create_instance(&env.client, "mover", Some("a")).await;
    assert!(eventually(20, || ready(&env.client, "mover")).await);
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), NS);
    let managers = |cm: ConfigMap| -> BTreeSet<String> {
        cm.metadata
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
    // Created by shard a through the instance's create claim, which stays the manager until the
    // object's next write (the lazy hand-over, `opm_operator::apply::claim`).
    let managers_before = managers(cms.get("mover-cm").await.unwrap());
    assert_eq!(
        managers_before,
        BTreeSet::from([format!("opm-claim.{UUID}")]),
        "{managers_before:?}"
    );
    assert_eq!(b.renderer.count("mover"), 0);

    set_shard(&env.client, "mover", "b").await;
    assert!(
        eventually(10, || async { b.renderer.count("mover") > 0 }).await,
        "shard b takes the instance over"
    );
    let a_after = a.renderer.count("mover");
    // A change after the move is applied by b only.
    set_msg(&env.client, "mover", "moved").await;
    assert!(
        eventually(10, || async {
            msg_of(&env.client, "mover").await.as_deref() == Some("moved")
                && ready(&env.client, "mover").await
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        a.renderer.count("mover"),
        a_after,
        "the old shard renders nothing after the move"
    );
    // b's write hands the object over (the claim is the instance's, whichever shard wrote it):
    // no conflict, and nothing left owned by the claim or another stale manager.
    assert_eq!(
        managers(cms.get("mover-cm").await.unwrap()),
        BTreeSet::from(["opm-controller".to_owned()])
    );
    let mi = instances(&env.client).get("mover").await.unwrap();
    let status = mi.status.unwrap();
    assert!(condition(&status.conditions, types::STALLED).is_none());
    assert_eq!(
        reporters(&env.client, "mover").await,
        set(&["a/a1", "b/b1"])
    );
    // And back: a takes it again, b lets go.
    let b_after = b.renderer.count("mover");
    set_shard(&env.client, "mover", "a").await;
    set_msg(&env.client, "mover", "home").await;
    assert!(
        eventually(10, || async {
            msg_of(&env.client, "mover").await.as_deref() == Some("home")
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(b.renderer.count("mover"), b_after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shard_leader_hands_over_within_the_lease_period() {
    let env = cluster().await;
    let mut u = Replica::start(&env, None, "u");
    let mut a1 = Replica::start(&env, Some("a"), "a1");
    let mut a2 = Replica::start(&env, Some("a"), "a2");
    create_instance(&env.client, "wa", Some("a")).await;
    assert!(eventually(20, || ready(&env.client, "wa")).await);
    let lease = format!("a.{}", crds::LEADER_ELECTION_ID);
    assert!(eventually(5, || async { a1.leading() != a2.leading() }).await);
    let (leader, standby) = if a1.leading() {
        (&mut a1, &mut a2)
    } else {
        (&mut a2, &mut a1)
    };
    assert_eq!(
        lease_holder(&env.client, &lease).await,
        Some(leader.identity.clone())
    );
    assert_eq!(
        standby.renderer.count("wa"),
        0,
        "the standby renders nothing"
    );
    // The standby observes the Platform all along: its store holds the package (its own
    // observe-mode build may finish after the leader's, on a loaded machine).
    let observer = &*standby;
    assert!(
        eventually(10, || async move { observer.store.identity().is_some() }).await,
        "the standby never built the observed platform"
    );

    leader.kill();
    let killed = Instant::now();
    let mut role = standby.role.clone();
    tokio::time::timeout(
        timing().lease_duration + timing().retry_period + Duration::from_secs(1),
        role.wait_for(|r| *r == Role::Leader),
    )
    .await
    .expect("the standby leads within the lease period")
    .unwrap();
    eprintln!("shard lease takeover after a kill: {:?}", killed.elapsed());
    assert_eq!(
        lease_holder(&env.client, &lease).await,
        Some(standby.identity.clone())
    );
    // The unsharded lease was never involved.
    assert_eq!(
        lease_holder(&env.client, crds::LEADER_ELECTION_ID)
            .await
            .as_deref(),
        Some("u")
    );
    // The new leader reconciles the shard's instances.
    set_msg(&env.client, "wa", "after").await;
    assert!(
        eventually(10, || async {
            msg_of(&env.client, "wa").await.as_deref() == Some("after")
        })
        .await
    );
    assert!(standby.renderer.count("wa") > 0);
    assert!(reporters(&env.client, "wa")
        .await
        .contains(&standby.reporting));
    standby.stop();
    u.stop();
}
