//! ModuleInstance reconciler scenarios 27–30, 33, 36, 37, 44 (docs/design/operator.md §8) against kube-emu
//! with a fake `ModuleRenderer` rendering three ConfigMaps from the values, and a Platform
//! recorded through the fake builder: fast unit coverage of the reconciler. The same scenarios
//! run on the real kernel in `instance_real.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crds::conditions::types;
use crds::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use crds::module_instance::ModuleInstance;
use crds::platform::Platform;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams};
use kube::Api;
use opm_operator::controller::context::{Context, Reconciled};
use opm_operator::controller::outcome::STALLED_RECHECK;
use opm_operator::controller::{instance, platform};
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{
    BuiltPlatform, ErrorClass, KernelError, ModuleRenderer, ModuleRequest, Problem, RenderResult,
};
use opm_operator::render_lease::RenderSlots;

use super::common::*;

const NS: &str = "team-a";
const NAME: &str = "web";
const UUID: &str = "6f1c0e52-0000-4000-8000-000000000001";

/// Renders ConfigMaps `web-a`, `web-b`, `web-c` (the first `count`), data `msg` = `values.msg`
/// (default `hello`), with the OPM labels; or the configured error.
struct FakeRenderer {
    count: Mutex<usize>,
    error: Mutex<Option<KernelError>>,
    renders: Mutex<u32>,
    contracts: Mutex<Vec<String>>,
}

impl FakeRenderer {
    fn new() -> Arc<Self> {
        Arc::new(FakeRenderer {
            count: Mutex::new(3),
            error: Mutex::new(None),
            renders: Mutex::new(0),
            contracts: Mutex::new(vec!["x.test/contracts/db@v1".to_owned()]),
        })
    }
}

impl ModuleRenderer for FakeRenderer {
    fn render_module(
        &self,
        req: &ModuleRequest,
        _platform: &BuiltPlatform,
        _skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        *self.renders.lock().unwrap() += 1;
        if let Some(e) = self.error.lock().unwrap().clone() {
            return Err(e);
        }
        let msg = req
            .values
            .as_ref()
            .and_then(|v| v.get("msg"))
            .and_then(|v| v.as_str())
            .unwrap_or("hello")
            .to_owned();
        let n = *self.count.lock().unwrap();
        let names: Vec<String> = ["a", "b", "c"][..n]
            .iter()
            .map(|suffix| format!("{}-{suffix}", req.name))
            .collect();
        let objects: Vec<(&str, &str, &str, &str)> = ["a", "b", "c"][..n]
            .iter()
            .zip(&names)
            .map(|(suffix, name)| ("v1", "ConfigMap", name.as_str(), *suffix))
            .collect();
        Ok(fake_render(
            (&req.name, &req.namespace, UUID),
            &objects,
            &msg,
            self.contracts.lock().unwrap().clone(),
        ))
    }
}

struct Mi {
    env: Env,
    ctx: Arc<Context>,
    renderer: Arc<FakeRenderer>,
}

async fn mi_env(prune: bool) -> Mi {
    mi_env_with(prune, |_| {}).await
}

async fn mi_env_with(prune: bool, customise: impl FnOnce(&mut Context)) -> Mi {
    let env = env().await;
    let ns: Api<Namespace> = Api::all(env.client.clone());
    ns.create(
        &Default::default(),
        &Namespace {
            metadata: ObjectMeta {
                name: Some(NS.into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let renderer = FakeRenderer::new();
    let ctx = context_for(&env, "mi-platform", |ctx| {
        ctx.renderer = Some(renderer.clone());
        customise(ctx);
    });
    create(
        &instances(&env.client),
        ModuleInstance::test().named(NS, NAME).with_prune(prune),
    )
    .await;
    Mi { env, ctx, renderer }
}

fn instances(client: &kube::Client) -> Api<ModuleInstance> {
    Api::namespaced(client.clone(), NS)
}

fn config_maps(client: &kube::Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), NS)
}

async fn record_platform(m: &Mi) {
    create(
        &platforms(&m.env.client),
        Platform::test().without_catalogs(),
    )
    .await;
    platform::reconcile("cluster", &m.ctx).await.unwrap();
}

async fn reconcile(m: &Mi) -> Reconciled {
    instance::reconcile(NS, NAME, &m.ctx).await.unwrap()
}

async fn get(m: &Mi) -> ModuleInstance {
    instances(&m.env.client).get(NAME).await.unwrap()
}

async fn msg_of(m: &Mi, name: &str) -> Option<String> {
    config_maps(&m.env.client)
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|c| c.data)
        .and_then(|d| d.get("msg").cloned())
}

/// Finalizer first, then PlatformNotReady, then Ready with the platform recorded.
async fn ready(m: &Mi) -> ModuleInstance {
    let r = reconcile(m).await;
    assert_eq!(r.requeue, Some(Duration::ZERO));
    record_platform(m).await;
    let r = reconcile(m).await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
    get(m).await
}

/// The platform lease comes before the renderer (docs/design/operator.md §2.2 phase 1): without a
/// renderer and without a platform the instance waits on PlatformNotReady like any other, and
/// only a recorded platform reveals the missing renderer as Stalled RenderFailed. ModulePackage
/// follows the same order (`package.rs`).
#[tokio::test]
async fn without_a_renderer_the_platform_still_comes_first() {
    let m = mi_env_with(false, |ctx| ctx.renderer = None).await;
    assert_eq!(reconcile(&m).await.requeue, Some(Duration::ZERO));
    let r = reconcile(&m).await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("PlatformNotReady"), Some(Duration::from_secs(5)))
    );
    let status = get(&m).await.status.unwrap();
    assert!(condition(&status.conditions, types::STALLED).is_none());

    record_platform(&m).await;
    let r = reconcile(&m).await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("RenderFailed"), Some(STALLED_RECHECK))
    );
    let status = get(&m).await.status.unwrap();
    assert_eq!(
        condition(&status.conditions, types::STALLED).map(|c| c.0),
        Some("True".to_owned())
    );
    let (_, _, message) = condition(&status.conditions, types::READY).unwrap();
    assert_eq!(message, "no module renderer is configured");
    assert!(msg_of(&m, "web-a").await.is_none(), "nothing applied");
}

/// The process's one set of render slots (`--max-concurrent-renders`, shared with the render API):
/// while every slot is held elsewhere (a render API request), the Platform build and an
/// instance's render wait for one, and run once it is free.
#[tokio::test]
async fn the_platform_build_and_a_render_wait_for_a_slot_of_the_process() {
    let slots = RenderSlots::new(1);
    let shared = slots.clone();
    let m = mi_env_with(false, move |ctx| ctx.render_slots = shared).await;
    assert_eq!(reconcile(&m).await.requeue, Some(Duration::ZERO));
    create(
        &platforms(&m.env.client),
        Platform::test().without_catalogs(),
    )
    .await;

    let held = slots.try_acquire().expect("a free slot");
    let ctx = m.ctx.clone();
    let build = tokio::spawn(async move { platform::reconcile("cluster", &ctx).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!build.is_finished(), "the build waits for the slot");
    assert!(m.ctx.store.generated().is_none());
    drop(held);
    build.await.unwrap().unwrap();
    assert!(m.ctx.store.generated().is_some());
    assert_eq!(slots.available(), 1, "the build gave its slot back");

    let held = slots.try_acquire().expect("a free slot");
    let ctx = m.ctx.clone();
    let render = tokio::spawn(async move { instance::reconcile(NS, NAME, &ctx).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!render.is_finished(), "the render waits for the slot");
    assert_eq!(*m.renderer.renders.lock().unwrap(), 0);
    drop(held);
    let r = render.await.unwrap().unwrap();
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
    assert_eq!(*m.renderer.renders.lock().unwrap(), 1);
    assert_eq!(slots.available(), 1, "the render gave its slot back");
}

#[tokio::test]
async fn scenarios_27_and_30_finalizer_first_then_platform_not_ready_then_ready() {
    let m = mi_env(false).await;
    // 27: the finalizer is added, nothing rendered.
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(Duration::ZERO));
    let mi = get(&m).await;
    assert_eq!(
        mi.metadata.finalizers,
        Some(vec!["opmodel.dev/cleanup".to_owned()])
    );
    assert_eq!(*m.renderer.renders.lock().unwrap(), 0);
    // 30: no platform → Ready=False PlatformNotReady (not Stalled), backoff 5 s, Warning.
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(Duration::from_secs(5)));
    assert_eq!(r.reason, Some("PlatformNotReady"));
    let status = get(&m).await.status.unwrap();
    let (s, reason, _) = condition(&status.conditions, types::READY).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("False", "PlatformNotReady"));
    assert!(condition(&status.conditions, types::STALLED).is_none());
    assert!(msg_of(&m, "web-a").await.is_none(), "nothing applied");
    assert_eq!(
        events(&m.env.client, NAME, "PlatformNotReady").await.len(),
        1
    );
    // A repeat backs off further and emits no second Warning (scenario 64).
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(Duration::from_secs(10)));
    assert_eq!(
        events(&m.env.client, NAME, "PlatformNotReady").await.len(),
        1
    );
    // Once recorded: Ready.
    record_platform(&m).await;
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"));
    let status = get(&m).await.status.unwrap();
    assert_eq!(
        condition(&status.conditions, types::READY).map(|c| c.0),
        Some("True".to_owned())
    );
    let counters = status.reconcile.failure_counters.unwrap();
    assert_eq!(counters.reconcile, 0);
    assert!(status.reconcile.next_retry_at.is_none());
}

#[tokio::test]
async fn scenarios_28_and_29_applied_then_no_op() {
    let m = mi_env(false).await;
    let mi = ready(&m).await;
    let status = mi.status.unwrap();
    // 28: three objects applied with the OPM labels, created by the instance's claim, which stays
    // their manager while they do not change (the lazy hand-over, `opm_operator::apply::claim`).
    for n in ["web-a", "web-b", "web-c"] {
        let cm = config_maps(&m.env.client).get(n).await.unwrap();
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels["app.kubernetes.io/managed-by"], "opm-controller");
        assert_eq!(labels["module-instance.opmodel.dev/uuid"], UUID);
        let managers: Vec<_> = cm
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|f| f.manager)
            .collect();
        assert_eq!(managers, [format!("opm-claim.{UUID}")]);
    }
    let (s, reason, _) = condition(&status.conditions, types::READY).unwrap();
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("True", "ReconciliationSucceeded")
    );
    assert_eq!(
        condition(&status.conditions, types::MODULE_RESOLVED).map(|c| c.2),
        Some("module resolved: opmodel.dev/modules/web@v0.1.0".to_owned())
    );
    let inv = status.reconcile.inventory.clone().unwrap();
    assert_eq!((inv.revision, inv.count, inv.entries.len()), (1, 3, 3));
    assert!(inv.digest.starts_with("sha256:"));
    assert_eq!(status.reconcile.history.len(), 1);
    assert_eq!(status.reconcile.history[0].phase, "complete");
    assert_eq!(status.instance_uuid.as_deref(), Some(UUID));
    assert_eq!(status.required_contracts, vec!["x.test/contracts/db@v1"]);
    assert_eq!(
        status.observed_generation,
        get(&m).await.metadata.generation
    );
    assert!(status.reconcile.last_applied_render_digest.is_some());
    let applied = events(&m.env.client, NAME, "Applied").await;
    assert_eq!(
        applied[0].note.as_deref(),
        Some("Applied 3 resources (3 created, 0 updated, 0 unchanged)")
    );
    assert_eq!(
        events(&m.env.client, NAME, "ReconciliationSucceeded")
            .await
            .len(),
        1
    );
    // 29: an unchanged second reconcile is a NoOp: nothing applied, attempt fields untouched.
    let r = reconcile(&m).await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::NoOp)
    );
    let again = get(&m).await.status.unwrap();
    assert_eq!(again.reconcile.history, status.reconcile.history);
    assert_eq!(
        again.reconcile.last_attempted_at,
        status.reconcile.last_attempted_at
    );
    assert_eq!(again.reconcile.inventory, status.reconcile.inventory);
    assert!(again.reconcile.next_retry_at.is_none());
    assert_eq!(events(&m.env.client, NAME, "NoOp").await.len(), 1);
    assert_eq!(events(&m.env.client, NAME, "Applied").await.len(), 1);
}

#[tokio::test]
async fn scenario_28_a_values_edit_updates_the_objects() {
    let m = mi_env(false).await;
    ready(&m).await;
    assert_eq!(msg_of(&m, "web-a").await.as_deref(), Some("hello"));
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"msg": "bye"}}})),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::Applied)
    );
    for n in ["web-a", "web-b", "web-c"] {
        assert_eq!(msg_of(&m, n).await.as_deref(), Some("bye"));
    }
    let status = get(&m).await.status.unwrap();
    assert_eq!(status.reconcile.inventory.unwrap().revision, 2);
    assert_eq!(status.reconcile.history.len(), 2);
    assert_eq!(status.reconcile.history[0].sequence, 2);
    let applied = events(&m.env.client, NAME, "Applied").await;
    assert!(applied
        .iter()
        .any(|e| e.note.as_deref()
            == Some("Applied 3 resources (0 created, 3 updated, 0 unchanged)")));
}

#[tokio::test]
async fn scenarios_33_and_40_a_values_error_stalls_naming_the_values_path_then_recovers() {
    let m = mi_env(false).await;
    let before = ready(&m).await.status.unwrap();
    let mut e = KernelError::new(
        ErrorClass::Values,
        "values do not satisfy #config of opmodel.dev/modules/web@v0",
    );
    e.problems.push(Problem {
        path: "values.replicas".into(),
        message: "conflicting values \"x\" and int".into(),
        positions: Vec::new(),
    });
    *m.renderer.error.lock().unwrap() = Some(e);
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"replicas": "x"}}})),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(Duration::from_secs(30 * 60)));
    let status = get(&m).await.status.unwrap();
    let (s, reason, message) = condition(&status.conditions, types::STALLED).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("True", "ResolutionFailed"));
    assert!(message.contains("values.replicas"), "{message}");
    assert_eq!(
        condition(&status.conditions, types::READY).map(|c| c.0),
        Some("False".to_owned())
    );
    // The previous inventory and lastApplied* are kept; a failure history entry is written.
    assert_eq!(status.reconcile.inventory, before.reconcile.inventory);
    assert_eq!(
        status.reconcile.last_applied_config_digest,
        before.reconcile.last_applied_config_digest
    );
    assert_eq!(status.reconcile.history[0].phase, "failed");
    assert!(status.reconcile.next_retry_at.is_some());
    assert_eq!(status.required_contracts, before.required_contracts);
    assert_eq!(
        events(&m.env.client, NAME, "ResolutionFailed").await.len(),
        1
    );
    // Scenario 40: nextRetryAt ≈ now + 30 min; the next success resets the counters and
    // clears it.
    let retry = status.reconcile.next_retry_at.clone().unwrap().0;
    let ahead = retry.as_second() - crds::k8s_openapi::jiff::Timestamp::now().as_second();
    assert!((1700..=1800).contains(&ahead), "{ahead}");
    assert_eq!(status.reconcile.failure_counters.unwrap().reconcile, 1);
    *m.renderer.error.lock().unwrap() = None;
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"));
    let status = get(&m).await.status.unwrap();
    assert!(status.reconcile.next_retry_at.is_none());
    assert_eq!(status.reconcile.failure_counters.unwrap().reconcile, 0);
    assert!(condition(&status.conditions, types::STALLED).is_none());
}

#[tokio::test]
async fn scenario_36_a_hand_edit_is_drift_without_apply() {
    let m = mi_env(false).await;
    ready(&m).await;
    config_maps(&m.env.client)
        .patch(
            "web-b",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web-b", "namespace": NS},
                "data": {"msg": "edited"},
            })),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::NoOp)
    );
    let status = get(&m).await.status.unwrap();
    let (s, reason, message) = condition(&status.conditions, types::DRIFTED).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("True", "DriftDetected"));
    assert_eq!(message, "1 resource(s) drifted from desired state");
    assert_eq!(
        condition(&status.conditions, types::READY).map(|c| c.0),
        Some("True".to_owned())
    );
    assert_eq!(
        msg_of(&m, "web-b").await.as_deref(),
        Some("edited"),
        "no correction"
    );
    // The next apply clears it: it takes `data.msg` back from the editor (ownership is always
    // forced, no rollout.forceConflicts needed).
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"msg": "again"}}})),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
    let status = get(&m).await.status.unwrap();
    assert!(condition(&status.conditions, types::DRIFTED).is_none());
    assert_eq!(msg_of(&m, "web-b").await.as_deref(), Some("again"));
}

#[tokio::test]
async fn scenario_37_a_removed_component_is_pruned() {
    let m = mi_env(true).await;
    ready(&m).await;
    *m.renderer.count.lock().unwrap() = 2;
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"msg": "two"}}})),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::AppliedAndPruned)
    );
    assert!(msg_of(&m, "web-c").await.is_none());
    assert_eq!(msg_of(&m, "web-a").await.as_deref(), Some("two"));
    let status = get(&m).await.status.unwrap();
    assert_eq!(status.reconcile.inventory.unwrap().count, 2);
    let pruned = events(&m.env.client, NAME, "Pruned").await;
    assert_eq!(pruned[0].note.as_deref(), Some("Pruned 1 stale resources"));
}

#[tokio::test]
async fn scenario_44_deletion_prunes_the_inventory_and_releases_the_finalizer() {
    let m = mi_env(true).await;
    ready(&m).await;
    instances(&m.env.client)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r, Reconciled::done());
    for n in ["web-a", "web-b", "web-c"] {
        assert!(msg_of(&m, n).await.is_none(), "{n} deleted");
    }
    assert!(instances(&m.env.client)
        .get_opt(NAME)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn scenario_44_prune_false_orphans_on_deletion() {
    let m = mi_env(false).await;
    ready(&m).await;
    instances(&m.env.client)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    reconcile(&m).await;
    assert_eq!(msg_of(&m, "web-a").await.as_deref(), Some("hello"));
    assert!(instances(&m.env.client)
        .get_opt(NAME)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn scenario_31_a_recorded_platform_re_enqueues_every_instance() {
    let m = mi_env(false).await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let ctx = Arc::clone(&m.ctx);
    let task = tokio::spawn(opm_operator::controller::manager::run_controllers(
        ctx, stop_rx,
    ));
    // Without a platform the instance waits on PlatformNotReady (backoff 5 s, 10 s, ...).
    let waiting = eventually(10, || async {
        get(&m)
            .await
            .status
            .and_then(|s| condition(&s.conditions, types::READY))
            .is_some_and(|c| c.1 == "PlatformNotReady")
    })
    .await;
    assert!(waiting);
    create(
        &platforms(&m.env.client),
        Platform::test().without_catalogs(),
    )
    .await;
    // The recorded package wakes the instance well before its backoff would.
    let ready = eventually(3, || async {
        get(&m)
            .await
            .status
            .and_then(|s| condition(&s.conditions, types::READY))
            .is_some_and(|c| c.0 == "True")
    })
    .await;
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    assert!(ready);
}

#[tokio::test]
async fn scenario_39_an_apply_error_keeps_the_inventory_and_backs_off() {
    let m = mi_env(true).await;
    let before = ready(&m).await.status.unwrap();
    // Another manager makes web-b immutable: our change of its data is refused (422, immutable
    // field) and, without rollout.forceConflicts, not recreated.
    config_maps(&m.env.client)
        .patch(
            "web-b",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web-b", "namespace": NS},
                "immutable": true,
            })),
        )
        .await
        .unwrap();
    *m.renderer.count.lock().unwrap() = 2;
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"msg": "ours"}}})),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(Duration::from_secs(5)));
    let status = get(&m).await.status.unwrap();
    let (s, reason, message) = condition(&status.conditions, types::READY).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("False", "ApplyFailed"));
    assert!(
        message.contains("web-b") && message.contains("immutable"),
        "{message}"
    );
    assert!(condition(&status.conditions, types::STALLED).is_none());
    let counters = status.reconcile.failure_counters.clone().unwrap();
    assert_eq!((counters.apply, counters.reconcile), (1, 1));
    assert_eq!(status.reconcile.inventory, before.reconcile.inventory);
    assert_eq!(
        status.reconcile.last_applied_config_digest,
        before.reconcile.last_applied_config_digest
    );
    // No prune after a failed apply: web-c is still there.
    assert!(msg_of(&m, "web-c").await.is_some());
    assert_eq!(events(&m.env.client, NAME, "ApplyFailed").await.len(), 1);
    // The next failure backs off further.
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(Duration::from_secs(10)));
}

#[tokio::test]
async fn scenario_34_an_owner_cli_instance_is_managed_externally() {
    let m = mi_env(true).await;
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"owner": "cli"}})),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("ManagedExternally"));
    let mi = get(&m).await;
    assert!(mi.metadata.finalizers.unwrap_or_default().is_empty());
    let status = mi.status.unwrap();
    let (s, reason, _) = condition(&status.conditions, types::READY).unwrap();
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("Unknown", "ManagedExternally")
    );
    assert_eq!(status.observed_generation, None);
    assert_eq!(*m.renderer.renders.lock().unwrap(), 0);
    let rv = get(&m).await.metadata.resource_version;
    // A repeat writes nothing.
    reconcile(&m).await;
    assert_eq!(get(&m).await.metadata.resource_version, rv);
    assert_eq!(
        events(&m.env.client, NAME, "ManagedExternally").await.len(),
        1
    );
    // Flipped to operator: finalizer added, then adopted.
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"owner": "operator"}})),
        )
        .await
        .unwrap();
    let r = ready(&m).await;
    assert!(r.status.unwrap().reconcile.inventory.is_some());
}

#[tokio::test]
async fn scenario_35_suspend_preserves_status_and_resume_reconciles() {
    let m = mi_env(false).await;
    let before = ready(&m).await.status.unwrap();
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"suspend": true, "values": {"msg": "later"}}}),
            ),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("Suspended"));
    let mi = get(&m).await;
    let status = mi.status.unwrap();
    let (s, reason, _) = condition(&status.conditions, types::READY).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("False", "Suspended"));
    assert_eq!(status.observed_generation, mi.metadata.generation);
    assert_eq!(status.reconcile.inventory, before.reconcile.inventory);
    assert_eq!(status.reconcile.history, before.reconcile.history);
    assert_eq!(msg_of(&m, "web-a").await.as_deref(), Some("hello"));
    assert_eq!(events(&m.env.client, NAME, "Suspended").await.len(), 1);
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"suspend": false}})),
        )
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"));
    assert_eq!(events(&m.env.client, NAME, "Resumed").await.len(), 1);
    assert_eq!(msg_of(&m, "web-a").await.as_deref(), Some("later"));
}

#[tokio::test]
async fn scenario_42_a_missing_service_account_stalls_impersonation_failed() {
    let m = mi_env(false).await;
    record_platform(&m).await;
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"serviceAccountName": "deploy-sa"}})),
        )
        .await
        .unwrap();
    reconcile(&m).await;
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(Duration::from_secs(30 * 60)));
    let status = get(&m).await.status.unwrap();
    let (s, reason, message) = condition(&status.conditions, types::STALLED).unwrap();
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("True", "ImpersonationFailed")
    );
    assert!(message.contains("team-a/deploy-sa"), "{message}");
    assert!(msg_of(&m, "web-a").await.is_none(), "nothing applied");
    assert_eq!(
        events(&m.env.client, NAME, "ImpersonationFailed")
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn scenario_45_deletion_with_the_service_account_gone() {
    let m = mi_env(true).await;
    ready(&m).await;
    // The inventory is recorded; now the SA in effect is gone.
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"serviceAccountName": "deploy-sa"}})),
        )
        .await
        .unwrap();
    instances(&m.env.client)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("DeletionSAMissing"));
    reconcile(&m).await;
    let mi = get(&m).await;
    let (_, reason, message) = condition(&mi.status.unwrap().conditions, types::STALLED).unwrap();
    assert_eq!(reason, "DeletionSAMissing");
    assert!(message.contains("team-a/deploy-sa"), "{message}");
    assert_eq!(
        events(&m.env.client, NAME, "DeletionSAMissing").await.len(),
        1
    );
    assert_eq!(
        msg_of(&m, "web-a").await.as_deref(),
        Some("hello"),
        "no prune"
    );
    // `"yes"` is ignored; `"true"` orphans in the same pass.
    for (value, gone) in [("yes", false), ("true", true)] {
        instances(&m.env.client)
            .patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"opm.dev/force-delete-orphan": value}}})),
            )
            .await
            .unwrap();
        reconcile(&m).await;
        assert_eq!(
            instances(&m.env.client)
                .get_opt(NAME)
                .await
                .unwrap()
                .is_none(),
            gone
        );
    }
    let orphaned = events(&m.env.client, NAME, "OrphanedOnDeletion").await;
    assert!(orphaned[0]
        .note
        .as_deref()
        .unwrap()
        .starts_with("Orphaned 3 managed resources"));
    assert_eq!(msg_of(&m, "web-a").await.as_deref(), Some("hello"));
}

#[tokio::test]
async fn scenario_66_status_only_updates_do_not_enqueue_and_spec_changes_do() {
    let m = mi_env(false).await;
    create(
        &platforms(&m.env.client),
        Platform::test().without_catalogs(),
    )
    .await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(opm_operator::controller::manager::run_controllers(
        Arc::clone(&m.ctx),
        stop_rx,
    ));
    let is_ready = || async {
        get(&m)
            .await
            .status
            .and_then(|s| condition(&s.conditions, types::READY))
            .is_some_and(|c| c.0 == "True")
    };
    assert!(eventually(10, is_ready).await);
    // Let the start-up wakes (package recorded, finalizer requeue) settle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let renders = *m.renderer.renders.lock().unwrap();
    patch_status(
        &instances(&m.env.client),
        NAME,
        serde_json::json!({"lastAppliedVersion": "v0.0.9"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_status = *m.renderer.renders.lock().unwrap();
    instances(&m.env.client)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"values": {"msg": "spec"}}})),
        )
        .await
        .unwrap();
    let updated = eventually(10, || async {
        msg_of(&m, "web-a").await.as_deref() == Some("spec")
    })
    .await;
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    assert_eq!(after_status, renders, "a status-only update rendered again");
    assert!(updated, "a spec change was not reconciled");
}

#[tokio::test]
async fn scenario_46_required_contracts_follow_the_render_even_on_a_no_op() {
    let m = mi_env(false).await;
    let before = ready(&m).await.status.unwrap();
    assert_eq!(before.required_contracts, vec!["x.test/contracts/db@v1"]);
    *m.renderer.contracts.lock().unwrap() = vec!["b@v1".into(), "c@v1".into()];
    let r = reconcile(&m).await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::NoOp)
    );
    let status = get(&m).await.status.unwrap();
    assert_eq!(status.required_contracts, vec!["b@v1", "c@v1"]);
    assert_eq!(
        status.reconcile.last_attempted_at,
        before.reconcile.last_attempted_at
    );
}
