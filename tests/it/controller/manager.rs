//! The manager: watches, leader election, restart recovery and the hazard of docs/design/operator.md §5.3 at controller
//! level, against kube-emu with the fake kernel seams.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crds::conditions::types;
use crds::module_instance::ModuleInstance;
use crds::platform::Platform;
use crds::transformer_registration::TransformerRegistration;
use kube::api::DeleteParams;
use kube::Api;
use opm_operator::controller::leader::{Elector, Timing};
use opm_operator::controller::manager::{self, Role};
use opm_operator::controller::{platform, registration};
use tokio::sync::watch;

use super::common::*;

const CATALOG: &str = "x.test/catalogs/k8up@v1";
const CONTRACT: &str = "x.test/contracts/backup@v1";

struct Running {
    shutdown: watch::Sender<bool>,
    role: watch::Receiver<Role>,
    task: tokio::task::JoinHandle<()>,
}

fn start(
    ctx: Arc<opm_operator::controller::context::Context>,
    elector: Option<Elector>,
) -> Running {
    let (shutdown, rx) = watch::channel(false);
    let (role_tx, role) = watch::channel(Role::Follower);
    let task = tokio::spawn(manager::run(ctx, elector, rx, role_tx));
    Running {
        shutdown,
        role,
        task,
    }
}

async fn platform_reason(client: &kube::Client) -> Option<String> {
    let p = platforms(client).get_opt("cluster").await.ok()??;
    condition(&p.status?.conditions, types::READY).map(|c| c.1)
}

#[tokio::test]
async fn controllers_follow_spec_changes_claims_and_deletion() {
    let env = env().await;
    let run = start(env.ctx.clone(), None);
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    assert!(
        eventually(10, || async {
            platform_reason(&env.client).await.as_deref() == Some("Generated")
        })
        .await
    );
    let g1 = env.ctx.store.generation();
    // A spec change regenerates.
    patch_spec(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"type": "t2"}),
    )
    .await;
    assert!(eventually(10, || async { env.ctx.store.generation() > g1 }).await);
    // Scenario 25 end to end: the claim controller accepts and activates the claim (its provider
    // is Ready), the contribution change enqueues the Platform, which folds the catalog in.
    env.acquirer.provides(CATALOG, "1.0.0", &[CONTRACT]);
    namespace_and_provider(&env.client).await;
    create(
        &claims(&env.client),
        TransformerRegistration::for_provider("team-a", "k8up", CATALOG, "1.0.0")
            .with_provides(&[CONTRACT]),
    )
    .await;
    assert!(
        eventually(10, || async {
            env.ctx.store.identity().is_some_and(|id| id.has_claims())
        })
        .await
    );
    // Scenario 26: deletion clears the store.
    platforms(&env.client)
        .delete("cluster", &DeleteParams::default())
        .await
        .unwrap();
    assert!(eventually(10, || async { env.ctx.store.generated().is_none() }).await);
    run.shutdown.send_replace(true);
    run.task.await.unwrap();
}

#[tokio::test]
async fn restart_recovery_claims_recover_when_a_package_is_recorded() {
    let env = env().await;
    // Before the "restart": a recorded platform and an accepted, active claim.
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    env.acquirer.provides(CATALOG, "1.0.0", &[CONTRACT]);
    namespace_and_provider(&env.client).await;
    create(
        &claims(&env.client),
        TransformerRegistration::for_provider("team-a", "k8up", CATALOG, "1.0.0")
            .with_provides(&[CONTRACT]),
    )
    .await;
    registration::reconcile("team-a.k8up", &env.ctx)
        .await
        .unwrap();
    // The platform folds the active claim in before the restart, so its status is already final.
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    assert!(env.ctx.store.identity().is_some_and(|id| id.has_claims()));
    let before_obj = platforms(&env.client).get("cluster").await.unwrap();
    let before = before_obj.metadata.resource_version.clone();

    // The restart: a fresh store over the same, non-empty --platform-dir (reset at boot, as
    // `serve` does); the build waits for the test, so the claim is judged first.
    let old = env.ctx.store.generated().unwrap();
    assert!(old.dir.is_dir());
    let builder = FakeBuilder::healthy();
    *builder.gated.lock().unwrap() = true;
    let ctx = context(
        &env.client,
        env.dir.path(),
        builder.clone(),
        env.acquirer.clone(),
    );
    assert!(ctx.layout.packages().unwrap().is_empty(), "reset at boot");
    let run = start(ctx.clone(), None);
    let started = Instant::now();
    let deferred = eventually(10, || async {
        let tr = claims(&env.client).get("team-a.k8up").await.unwrap();
        let s = tr.status.unwrap();
        s.accepted
            && condition(&s.conditions, types::READY).is_some_and(|c| c.1 == "PlatformNotReady")
    })
    .await;
    assert!(
        deferred,
        "the claim defers while the store is empty, accepted untouched"
    );
    builder.open_gate();
    let recovered = eventually(10, || async {
        let tr = claims(&env.client).get("team-a.k8up").await.unwrap();
        condition(&tr.status.unwrap().conditions, types::READY).is_some_and(|c| c.1 == "Accepted")
    })
    .await;
    assert!(recovered, "recovered without the 30-minute requeue");
    // The package was regenerated under the same identity.
    assert_eq!(*builder.builds.lock().unwrap(), 1);
    assert_eq!(ctx.layout.packages().unwrap(), vec![old.identity]);
    assert!(old.dir.join("platform.cue").is_file());
    assert!(started.elapsed() < Duration::from_secs(10));
    // The Platform's status did not need to change for the claim to recover.
    let after = platforms(&env.client).get("cluster").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, before,
        "platform status unchanged: {:#?} vs {:#?}",
        before_obj.status, after.status
    );
    run.shutdown.send_replace(true);
    run.task.await.unwrap();
}

async fn namespace_and_provider(client: &kube::Client) {
    use crds::k8s_openapi::api::core::v1::Namespace;
    let ns: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some("team-a".into());
    ns.create(&Default::default(), &n).await.unwrap();
    let mis: Api<ModuleInstance> = Api::namespaced(client.clone(), "team-a");
    create(&mis, ModuleInstance::test().named("team-a", "k8up")).await;
    patch_status(
        &mis,
        "k8up",
        serde_json::json!({
            "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "inventory": {"revision": 1, "digest": "sha256:x", "count": 1, "entries": [
                {"group": "opmodel.dev", "kind": "TransformerRegistration", "name": "team-a.k8up", "v": "v1alpha1"}
            ]}
        }),
    )
    .await;
}

#[tokio::test]
async fn hazard_5_3_a_leased_package_stays_complete_while_a_claim_activates() {
    let env = env().await;
    let api = platforms(&env.client);
    create(&api, Platform::test().without_catalogs()).await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    let (leased, mut lease) = env.ctx.store.lease().unwrap();
    let before = std::fs::read(leased.dir.join("platform.cue")).unwrap();
    let generation = api.get("cluster").await.unwrap().metadata.generation;
    // A claim activates at the same generation: a new package, the leased one untouched.
    let trs = claims(&env.client);
    create(
        &trs,
        TransformerRegistration::for_provider("team-a", "k8up", CATALOG, "1.0.0"),
    )
    .await;
    patch_status(
        &trs,
        "team-a.k8up",
        serde_json::json!({"accepted": true, "active": true}),
    )
    .await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(
        api.get("cluster").await.unwrap().metadata.generation,
        generation
    );
    let current = env.ctx.store.generated().unwrap();
    assert_ne!(current.identity, leased.identity);
    assert_eq!(
        std::fs::read(leased.dir.join("platform.cue")).unwrap(),
        before
    );
    assert!(leased.dir.join("cue.mod/module.cue").is_file());
    // Released, then the next build prunes it.
    lease.release();
    patch_spec(&api, "cluster", serde_json::json!({"type": "next"})).await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    assert!(!leased.dir.exists());
    assert_eq!(
        env.ctx.layout.packages().unwrap(),
        vec![env.ctx.store.identity().unwrap()]
    );
}

fn timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    }
}

#[tokio::test]
async fn leader_election_one_leads_and_the_other_takes_over() {
    let env = env().await;
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    namespace_only(&env.client, "opm-system").await;
    let elector = |id: &str| {
        Elector::new(
            env.client.clone(),
            "opm-system",
            crds::LEADER_ELECTION_ID,
            id,
            timing(),
        )
    };
    let dir_b = tempfile::tempdir().unwrap();
    let builder_b = FakeBuilder::healthy();
    let ctx_b = context_named(
        &env.client,
        dir_b.path(),
        builder_b.clone(),
        env.acquirer.clone(),
        "b",
    );
    let a = start(env.ctx.clone(), Some(elector("a")));
    let b = start(ctx_b.clone(), Some(elector("b")));
    assert!(
        eventually(10, || async {
            *a.role.borrow() == Role::Leader || *b.role.borrow() == Role::Leader
        })
        .await
    );
    // Give the follower a few retry periods: it must not lead too.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (leader, follower, follower_builder, leader_ctx, follower_ctx) =
        if *a.role.borrow() == Role::Leader {
            (a, b, builder_b.clone(), env.ctx.clone(), ctx_b.clone())
        } else {
            (b, a, env.builder.clone(), ctx_b.clone(), env.ctx.clone())
        };
    assert_eq!(*follower.role.borrow(), Role::Follower, "exactly one leads");
    assert!(
        eventually(10, || async {
            platform_reason(&env.client).await.as_deref() == Some("Generated")
        })
        .await
    );
    // Only the leader writes: every event names it. The follower observes: its own store holds
    // the same package, for the render API of its replica.
    let leader_instance = if Arc::ptr_eq(&leader_ctx, &env.ctx) {
        "test"
    } else {
        "b"
    };
    // The status is written before its event: wait for the event.
    let evs = until_events(&env.client, "cluster", "Generated", 5).await;
    assert_eq!(evs.len(), 1, "one Generated event");
    assert_eq!(evs[0].reporting_instance.as_deref(), Some(leader_instance));
    assert!(
        eventually(10, || async {
            follower_ctx.store.identity().is_some()
                && follower_ctx.store.identity() == leader_ctx.store.identity()
        })
        .await,
        "the follower records the same package"
    );
    let builds_before = *follower_builder.builds.lock().unwrap();
    // Stopping the leader releases the lease; the other takes over within one lease duration.
    leader.shutdown.send_replace(true);
    leader.task.await.unwrap();
    let stopped = Instant::now();
    let mut role = follower.role.clone();
    tokio::time::timeout(
        timing().lease_duration,
        role.wait_for(|r| *r == Role::Leader),
    )
    .await
    .expect("takeover within one lease duration")
    .unwrap();
    let took = stopped.elapsed();
    eprintln!("leader takeover after graceful stop: {took:?}");
    // The new leader reconciles: a spec change is picked up by its builder.
    patch_spec(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"type": "after"}),
    )
    .await;
    assert!(
        eventually(10, || async {
            *follower_builder.builds.lock().unwrap() > builds_before
                && platform_reason(&env.client).await.as_deref() == Some("Generated")
        })
        .await
    );
    follower.shutdown.send_replace(true);
    follower.task.await.unwrap();
}

#[tokio::test]
async fn leader_election_a_crashed_leader_expires() {
    let env = env().await;
    namespace_only(&env.client, "opm-system").await;
    let e = |id: &str| {
        Elector::new(
            env.client.clone(),
            "opm-system",
            crds::LEADER_ELECTION_ID,
            id,
            timing(),
        )
    };
    let crashed = e("crashed");
    assert!(crashed.try_acquire_or_renew().await.unwrap());
    let other = e("other");
    assert!(
        !other.try_acquire_or_renew().await.unwrap(),
        "held and fresh"
    );
    let t0 = Instant::now();
    while !other.try_acquire_or_renew().await.unwrap() {
        tokio::time::sleep(timing().retry_period).await;
    }
    let took = t0.elapsed();
    eprintln!("takeover of an expired lease: {took:?}");
    assert!(took <= timing().lease_duration + Duration::from_secs(1) + timing().retry_period);
    assert_eq!(other.holder().await.unwrap().as_deref(), Some("other"));
    // The old holder sees it lost the lease.
    assert!(!crashed.try_acquire_or_renew().await.unwrap());
}

async fn namespace_only(client: &kube::Client, name: &str) {
    use crds::k8s_openapi::api::core::v1::Namespace;
    let ns: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(name.into());
    ns.create(&Default::default(), &n).await.unwrap();
}

#[tokio::test]
async fn a_platform_held_by_a_foreign_finalizer_clears_the_store_when_deleted() {
    let env = env().await;
    let run = start(env.ctx.clone(), None);
    let mut p = Platform::test().without_catalogs();
    p.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&platforms(&env.client), p).await;
    assert!(eventually(10, || async { env.ctx.store.generated().is_some() }).await);
    platforms(&env.client)
        .delete("cluster", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        eventually(10, || async { env.ctx.store.generated().is_none() }).await,
        "the deletion timestamp wakes the reconciler, which clears the store"
    );
    assert!(platforms(&env.client)
        .get_opt("cluster")
        .await
        .unwrap()
        .is_some());
    run.shutdown.send_replace(true);
    run.task.await.unwrap();
}

#[tokio::test]
async fn a_leader_that_loses_the_lease_stops_its_controllers() {
    use crds::k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Patch, PatchParams};
    let env = env().await;
    namespace_only(&env.client, "opm-system").await;
    let elector = Elector::new(
        env.client.clone(),
        "opm-system",
        crds::LEADER_ELECTION_ID,
        "a",
        timing(),
    );
    let mut run = start(env.ctx.clone(), Some(elector));
    run.role.wait_for(|r| *r == Role::Leader).await.unwrap();
    // Another holder takes the lease (as after a partition): a stops leading.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "opm-system");
    let now = crds::k8s_openapi::jiff::Timestamp::now();
    leases
        .patch(
            crds::LEADER_ELECTION_ID,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {
                "holderIdentity": "intruder",
                "renewTime": crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
                "leaseDurationSeconds": 60,
            }})),
        )
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        run.role.wait_for(|r| *r == Role::Follower),
    )
    .await
    .expect("stops leading")
    .unwrap();
    // The lease is not released on shutdown: a does not hold it.
    run.shutdown.send_replace(true);
    tokio::time::timeout(Duration::from_secs(10), run.task)
        .await
        .expect("shuts down")
        .unwrap();
    let holder = leases
        .get(crds::LEADER_ELECTION_ID)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("intruder"));
}
