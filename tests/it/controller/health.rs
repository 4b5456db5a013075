//! Issue 29 item 2: Ready means healthy. After an apply the instance is Ready=Unknown
//! `Progressing` (naming the objects it waits for) until every applied object is kstatus
//! `Current`, Ready=False `HealthCheckFailed` when one fails or the rollout timeout passes, and
//! Ready=True only then; a worker never blocks (each reconcile returns with a requeue). The
//! Deployment's status comes from kube-emu's workload simulator, delayed so the wait is seen.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crds::common::Rollout;
use crds::conditions::{reasons, types};
use crds::module_instance::ModuleInstance;
use kube::api::{Patch, PatchParams};
use kube::Api;
use kube_emu::simulate::{Workloads, ANNOTATION};
use opm_operator::controller::context::Reconciled;
use opm_operator::controller::instance;
use serde_json::{json, Value};

use super::common::*;
use super::real::*;

pub(super) const NS: &str = "rollout";
pub(super) const NAME: &str = "web";
const POLL: Duration = Duration::from_millis(200);

fn values() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(crate::platform::gen::opm("values").join("valid.json")).unwrap(),
    )
    .unwrap()
}

/// A cluster whose Deployments become available `delay` after each change, the platform
/// recorded, and one demo instance with `rollout`.
pub(super) async fn cluster(delay: Duration, rollout: Option<Rollout>) -> Real {
    let r = rendering_with(Workloads::after(delay), |c| c.health_poll = POLL).await;
    namespace(&r.client, NS).await;
    record(&r, &[(MINI, None)]).await;
    let mut mi = ModuleInstance::test()
        .named(NS, NAME)
        .with_module(DEMO, "v0.1.0")
        .with_values(values())
        .with_prune(true);
    mi.spec.rollout = rollout;
    create(&Api::<ModuleInstance>::namespaced(r.client.clone(), NS), mi).await;
    r
}

/// One reconcile (the first one of an instance only adds the finalizer, so it runs again).
async fn reconcile(r: &Real) -> Reconciled {
    let out = instance::reconcile(NS, NAME, &r.ctx).await.unwrap();
    if out.outcome.is_none() && out.requeue == Some(Duration::ZERO) {
        return instance::reconcile(NS, NAME, &r.ctx).await.unwrap();
    }
    out
}

/// `(status, reason, message)` of `type_`.
async fn cond(r: &Real, type_: &str) -> Option<(String, String, String)> {
    let mi = Api::<ModuleInstance>::namespaced(r.client.clone(), NS)
        .get(NAME)
        .await
        .unwrap();
    condition(&mi.status.unwrap_or_default().conditions, type_)
}

/// The name of the one Deployment the instance applied.
async fn deployment(r: &Real) -> String {
    let api = Api::<crds::k8s_openapi::api::apps::v1::Deployment>::namespaced(r.client.clone(), NS);
    let list = api.list(&Default::default()).await.unwrap().items;
    assert_eq!(list.len(), 1, "{list:?}");
    list[0].metadata.name.clone().unwrap()
}

/// Sets the simulator's outcome annotation on the Deployment (as `kubectl annotate` would).
async fn simulate(r: &Real, outcome: Option<&str>) {
    let name = deployment(r).await;
    Api::<crds::k8s_openapi::api::apps::v1::Deployment>::namespaced(r.client.clone(), NS)
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION: outcome}}})),
        )
        .await
        .unwrap();
}

/// Reconciles (as the requeue asks) until Ready's reason is `reason`, at most `secs`.
async fn until_reason(r: &Real, reason: &str, secs: u64) -> Reconciled {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let out = reconcile(r).await;
        if out.reason == Some(reason) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Ready never became {reason}: {:?}",
            cond(r, types::READY).await
        );
        tokio::time::sleep(out.requeue.unwrap_or(POLL).min(POLL)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_waits_for_the_deployment_progressing_then_ready() {
    let r = cluster(Duration::from_millis(1500), None).await;
    let first = reconcile(&r).await;
    // Applied, not yet available: Progressing, naming the Deployment, requeued at the poll
    // interval (the reconcile returned; no worker waits for the rollout).
    assert_eq!(first.reason, Some(reasons::PROGRESSING), "{first:?}");
    assert_eq!(first.requeue, Some(POLL));
    let (st, reason, message) = cond(&r, types::READY).await.unwrap();
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", reasons::PROGRESSING)
    );
    let name = deployment(&r).await;
    assert!(
        message.starts_with("waiting for 1 object(s) to become ready: ")
            && message.contains(&format!("Deployment/{NS}/{name}")),
        "{message}"
    );
    assert_eq!(
        cond(&r, types::RECONCILING).await.map(|c| c.0),
        Some("True".into())
    );
    // No success event yet; the inventory is recorded (the apply itself succeeded).
    assert!(events(&r.client, NAME, reasons::RECONCILIATION_SUCCEEDED)
        .await
        .is_empty());
    let mi = Api::<ModuleInstance>::namespaced(r.client.clone(), NS)
        .get(NAME)
        .await
        .unwrap();
    assert_eq!(
        mi.status.unwrap().reconcile.inventory.map(|i| i.count),
        Some(3)
    );

    let done = until_reason(&r, reasons::RECONCILIATION_SUCCEEDED, 20).await;
    assert_eq!(done.requeue, None, "a Ready ModuleInstance is not polled");
    let (st, _, message) = cond(&r, types::READY).await.unwrap();
    assert_eq!(st, "True", "{message}");
    assert!(cond(&r, types::RECONCILING).await.is_none());
    let (kind, _, note) =
        one_event(&events(&r.client, NAME, reasons::RECONCILIATION_SUCCEEDED).await);
    assert_eq!(
        (kind.as_str(), note.as_str()),
        (
            "Normal",
            "Reconciliation succeeded: 3 created, 0 configured, 0 unchanged, 0 pruned \
             (health check passed)"
        )
    );
    // Ready stays Ready: the next reconcile is a NoOp with its usual event.
    assert_eq!(
        reconcile(&r).await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    assert_eq!(events(&r.client, NAME, reasons::NO_OP).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_deployment_is_health_check_failed_and_recovers() {
    let r = cluster(Duration::from_millis(600), None).await;
    assert_eq!(reconcile(&r).await.reason, Some(reasons::PROGRESSING));
    simulate(&r, Some("fail")).await;
    let out = until_reason(&r, reasons::HEALTH_CHECK_FAILED, 20).await;
    assert_eq!(out.requeue, Some(Duration::from_secs(30)));
    let name = deployment(&r).await;
    let (st, _, message) = cond(&r, types::READY).await.unwrap();
    assert_eq!(st, "False");
    assert!(
        message.starts_with("1 object(s) failed: ")
            && message.contains(&format!("Deployment/{NS}/{name}"))
            && message.contains("has timed out progressing"),
        "{message}"
    );
    // One Warning for the transition, none for a repeat of the same verdict.
    reconcile(&r).await;
    let (kind, _, note) = one_event(&events(&r.client, NAME, reasons::HEALTH_CHECK_FAILED).await);
    assert_eq!((kind.as_str(), note), ("Warning", message.clone()));
    // Nothing was counted as a failed reconcile; the inventory is the apply's.
    let mi = Api::<ModuleInstance>::namespaced(r.client.clone(), NS)
        .get(NAME)
        .await
        .unwrap();
    let rs = mi.status.unwrap().reconcile;
    assert_eq!(rs.inventory.map(|i| i.count), Some(3));

    // The workload heals: Ready again.
    simulate(&r, None).await;
    until_reason(&r, reasons::RECONCILIATION_SUCCEEDED, 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_that_never_finishes_times_out_and_timeout_zero_does_not_wait() {
    let r = cluster(
        Duration::from_millis(300),
        Some(Rollout {
            timeout: Some("2s".into()),
            ..Default::default()
        }),
    )
    .await;
    assert_eq!(reconcile(&r).await.reason, Some(reasons::PROGRESSING));
    simulate(&r, Some("hold")).await;
    until_reason(&r, reasons::HEALTH_CHECK_FAILED, 20).await;
    let (_, _, message) = cond(&r, types::READY).await.unwrap();
    assert!(
        message
            .starts_with("timed out after 2s waiting for 1 object(s) to become ready: Deployment/"),
        "{message}"
    );

    // `rollout.timeout: 0`: no health check, Ready once applied.
    Api::<ModuleInstance>::namespaced(r.client.clone(), NS)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"rollout": {"timeout": "0"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        reconcile(&r).await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
}

/// Runs the controllers as `serve` does (`run_controllers`: the ModuleInstance and ModulePackage
/// controllers sharing one set of workload watches) until the returned sender says stop.
pub(super) fn controller(
    r: &Real,
) -> (
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(opm_operator::controller::manager::run_controllers(
        std::sync::Arc::clone(&r.ctx),
        stop_rx,
    ));
    (stop_tx, task)
}

/// Waits (the controller reconciling on its own) until Ready is `(status, reason)`, at most
/// `secs`; returns its message.
pub(super) async fn until_ready(r: &Real, status: &str, reason: &str, secs: u64) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some((s, why, message)) = cond(r, types::READY).await {
            if s == status && why == reason {
                return message;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Ready never became {status}/{reason} within {secs} s: {:?}",
            cond(r, types::READY).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// After Ready the instance follows its workloads with no change of its own (`controller::workloads`):
/// a Deployment that fails (a status change at the same generation) turns it HealthCheckFailed,
/// and its recovery Ready again. A Ready instance is not requeued and a failed health check is
/// rechecked after 30 s, so seeing both within 10 s is the workload watch's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_that_degrades_after_ready_is_seen_and_so_is_its_recovery() {
    let r = cluster(Duration::from_millis(300), None).await;
    let (stop, task) = controller(&r);
    until_ready(&r, "True", reasons::RECONCILIATION_SUCCEEDED, 30).await;
    let generation =
        Api::<crds::k8s_openapi::api::apps::v1::Deployment>::namespaced(r.client.clone(), NS)
            .get(&deployment(&r).await)
            .await
            .unwrap()
            .metadata
            .generation;

    simulate(&r, Some("fail")).await;
    let message = until_ready(&r, "False", reasons::HEALTH_CHECK_FAILED, 10).await;
    assert!(
        message.starts_with("1 object(s) failed: Deployment/")
            && message.contains("has timed out progressing"),
        "{message}"
    );
    // The controller records the event after the status this test saw.
    let (kind, _, note) =
        one_event(&until_events(&r.client, NAME, reasons::HEALTH_CHECK_FAILED, 5).await);
    assert_eq!((kind.as_str(), note), ("Warning", message));
    simulate(&r, None).await;
    until_ready(&r, "True", reasons::RECONCILIATION_SUCCEEDED, 10).await;
    // Nothing was applied for it: the Deployment's spec is the one first applied.
    let after =
        Api::<crds::k8s_openapi::api::apps::v1::Deployment>::namespaced(r.client.clone(), NS)
            .get(&deployment(&r).await)
            .await
            .unwrap();
    assert_eq!(after.metadata.generation, generation);
    stop.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}

/// A degradation long after the apply is awaited for the rollout timeout from when it was seen,
/// not reported as timed out at once: Progressing first, HealthCheckFailed one timeout later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rollout_timeout_of_a_degradation_counts_from_when_it_was_seen() {
    let r = cluster(
        Duration::from_millis(200),
        Some(Rollout {
            timeout: Some("3s".into()),
            ..Default::default()
        }),
    )
    .await;
    let (stop, task) = controller(&r);
    until_ready(&r, "True", reasons::RECONCILIATION_SUCCEEDED, 30).await;
    // Longer ago than the timeout.
    tokio::time::sleep(Duration::from_secs(4)).await;
    simulate(&r, Some("hold")).await;
    let waiting = until_ready(&r, "Unknown", reasons::PROGRESSING, 10).await;
    assert!(
        waiting.starts_with("waiting for 1 object(s) to become ready: Deployment/"),
        "{waiting}"
    );
    let failed = until_ready(&r, "False", reasons::HEALTH_CHECK_FAILED, 15).await;
    assert!(
        failed.starts_with("timed out after 3s waiting for 1 object(s)"),
        "{failed}"
    );
    stop.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}
