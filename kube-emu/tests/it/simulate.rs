//! The opt-in workload simulator seen through a kube client.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_emu::simulate::{Workloads, ANNOTATION};
use kube_emu::{Emulator, Options};
use serde_json::json;

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }))
    .unwrap()
}

async fn start(workloads: Option<Workloads>) -> Emulator {
    Emulator::start(Options {
        workloads,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// Polls until `check` holds for the Deployment's status (5 s at most).
async fn until(api: &Api<Deployment>, name: &str, check: impl Fn(&serde_json::Value) -> bool) {
    for _ in 0..100 {
        let d = api.get(name).await.unwrap();
        let s = serde_json::to_value(&d.status).unwrap();
        if check(&s) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "status of {name} never matched: {:?}",
        api.get(name).await.unwrap().status
    );
}

#[tokio::test]
async fn without_the_simulator_a_deployment_never_gets_a_status() {
    let emu = start(None).await;
    let api: Api<Deployment> = Api::namespaced(emu.client().unwrap(), "default");
    api.create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(api.get("web").await.unwrap().status.is_none());
}

#[tokio::test]
async fn the_immediate_simulator_answers_in_the_same_write() {
    let emu = start(Some(Workloads::immediate())).await;
    let api: Api<Deployment> = Api::namespaced(emu.client().unwrap(), "default");
    api.create(&PostParams::default(), &deployment("web", 2))
        .await
        .unwrap();
    let s = api.get("web").await.unwrap().status.unwrap();
    assert_eq!(s.available_replicas, Some(2));
    assert_eq!(s.observed_generation, Some(1));
}

#[tokio::test]
async fn the_delayed_simulator_answers_later_and_follows_spec_changes_and_the_annotation() {
    let emu = start(Some(Workloads::after(Duration::from_millis(300)))).await;
    let api: Api<Deployment> = Api::namespaced(emu.client().unwrap(), "default");
    api.create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    // Not at once: the rollout is in progress for the delay.
    assert!(api.get("web").await.unwrap().status.is_none());
    until(&api, "web", |s| s["availableReplicas"] == 1).await;

    // A spec change: the generation moves, the status follows it after the delay.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    let d = api.get("web").await.unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.unwrap().observed_generation, Some(1));
    until(&api, "web", |s| {
        s["observedGeneration"] == 2 && s["availableReplicas"] == 3
    })
    .await;

    // Asked to fail: the Deployment reports ProgressDeadlineExceeded.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION: "fail"}}})),
    )
    .await
    .unwrap();
    until(&api, "web", |s| {
        s["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["reason"] == "ProgressDeadlineExceeded"))
    })
    .await;
}
