//! A reconcile request through the running controllers (Flux's convention,
//! `crds::RECONCILE_REQUEST_ANNOTATION`): a ModuleInstance has no periodic reconcile, so a new
//! value of `reconcile.fluxcd.io/requestedAt` is the way to ask for one without editing the spec.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crds::conditions::reasons;
use crds::module_instance::ModuleInstance;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;

use super::common::*;
use super::health::{cluster, controller, until_ready, NAME, NS};

async fn handled(api: &Api<ModuleInstance>) -> Option<String> {
    api.get(NAME)
        .await
        .unwrap()
        .status
        .and_then(|s| s.reconcile.last_handled_reconcile_at)
}

async fn request(api: &Api<ModuleInstance>, token: &str) {
    api.patch(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {crds::RECONCILE_REQUEST_ANNOTATION: token}}}),
        ),
    )
    .await
    .unwrap();
}

/// A Ready instance is reconciled again when the annotation gets a new value (its generation
/// unchanged: the predicate passes the annotation), and the value is recorded; each new value
/// is one more reconcile (a NoOp here), the same value again is none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_request_wakes_the_controller_and_is_recorded() {
    let r = cluster(Duration::from_millis(100), None).await;
    let api = Api::<ModuleInstance>::namespaced(r.client.clone(), NS);
    let (stop, task) = controller(&r);
    until_ready(&r, "True", reasons::RECONCILIATION_SUCCEEDED, 30).await;
    let generation = api.get(NAME).await.unwrap().metadata.generation;
    assert_eq!(handled(&api).await, None, "nothing requested yet");
    let no_ops = || async { events(&r.client, NAME, "NoOp").await.len() };
    let before = no_ops().await;

    for (i, token) in ["1733420000", "1733420060"].into_iter().enumerate() {
        request(&api, token).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while handled(&api).await.as_deref() != Some(token) {
            assert!(
                std::time::Instant::now() < deadline,
                "request {token} not handled within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The status is committed before the reconcile's events are published: wait for the
        // event, then check there is exactly one more.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while no_ops().await < before + i + 1 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(no_ops().await, before + i + 1, "one reconcile per request");
    }
    // An unrelated annotation wakes nothing.
    api.patch(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"team": "shop"}}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(no_ops().await, before + 2);
    assert_eq!(api.get(NAME).await.unwrap().metadata.generation, generation);
    stop.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}
