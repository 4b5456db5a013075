//! A kube-runtime Controller reconciling Widgets to completion against the emulator.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::json;

use crate::common::*;

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(w: Arc<Widget>, api: Arc<Api<Widget>>) -> Result<Action, ReconcileError> {
    let gen = w.metadata.generation;
    if w.status.as_ref().and_then(|s| s.observed_generation) != gen {
        let st = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": w.name_any()},
            "status": {"ready": true, "observedGeneration": gen}});
        api.patch_status(
            &w.name_any(),
            &PatchParams::apply("widget-controller").force(),
            &Patch::Apply(st),
        )
        .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Widget>, _: &ReconcileError, _: Arc<Api<Widget>>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn controller_reconciles_to_completion() {
    let (emu, client) = start_with_widgets().await;
    let api: Api<Widget> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(api.clone());
    let ctl = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {}),
    );
    api.create(&PostParams::default(), &widget("w1", "S"))
        .await
        .unwrap();
    let ready = |g: i64| {
        move |o: Option<&Widget>| {
            o.and_then(|w| w.status.as_ref())
                .is_some_and(|s| s.ready == Some(true) && s.observed_generation == Some(g))
        }
    };
    tokio::time::timeout(
        Duration::from_secs(15),
        await_condition(api.clone(), "w1", ready(1)),
    )
    .await
    .expect("reconciled within 15s")
    .unwrap();
    // A spec change bumps generation and is reconciled again.
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": "L"}})),
    )
    .await
    .unwrap();
    tokio::time::timeout(
        Duration::from_secs(15),
        await_condition(api.clone(), "w1", ready(2)),
    )
    .await
    .expect("re-reconciled within 15s")
    .unwrap();
    ctl.abort();
    emu.shutdown().await;
}

#[tokio::test]
async fn event_recorder_publishes_and_aggregates() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::runtime::events::{Event, EventType, Recorder};
    use kube::Resource;
    let (_emu, client) = start_with_widgets().await;
    let api: Api<Widget> = Api::default_namespaced(client.clone());
    let w = api
        .create(&PostParams::default(), &widget("w1", "S"))
        .await
        .unwrap();
    let recorder = Recorder::new(client.clone(), "widget-controller".into());
    let ev = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = w.object_ref(&());
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let events: Api<K8sEvent> = Api::default_namespaced(client);
    let list = events.list(&Default::default()).await.unwrap();
    assert_eq!(
        list.items.len(),
        1,
        "the second publish updates the same event"
    );
    let e = &list.items[0];
    assert_eq!(e.reason.as_deref(), Some("Reconciled"));
    assert_eq!(e.regarding.as_ref().unwrap().name.as_deref(), Some("w1"));
    assert!(e.series.is_some() || e.deprecated_count.unwrap_or(1) >= 1);
}
