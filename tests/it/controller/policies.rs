//! Issue 40 item 5: per-object apply policies by annotation (`crate::apply::policy`'s table):
//! `opm.dev/apply: IfNotPresent` (created once, never updated, pruned as Flux does),
//! `opm.dev/apply: Ignore` (never applied, never pruned), `opm.dev/force: enabled` (re-created on an
//! immutable-field change) and an unknown value (refused, naming the object), each with both
//! outcomes, through the ModuleInstance reconciler on kube-emu.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crds::conditions::{reasons, types};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use super::common::*;
use super::rendered::*;

fn secret(annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-password", "annotations": annotations},
        "stringData": {"password": "{{msg}}"}})
}

fn data_of(o: &Value, key: &str) -> String {
    o["data"][key].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_not_present_creates_once_never_updates_and_is_pruned_on_deletion() {
    let m = mi_env(
        vec![
            secret(json!({"opm.dev/apply": "IfNotPresent"})),
            config_map("settings", json!({})),
        ],
        |_| {},
    )
    .await;
    m.create("web", |mi| mi.spec.values = Some(json!({"msg": "first"})))
        .await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    let created = live(&m.env.client, SECRET, "db-password").await.unwrap();
    let first = data_of(&created, "password");
    assert_eq!(first, b64("first"));
    assert_eq!(
        m.inventory("web").await,
        ["Secret/db-password", "ConfigMap/settings"]
    );

    // The values change: the ConfigMap is updated, the Secret is not (never updated).
    m.set_msg("web", "second").await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    let cm = live(&m.env.client, CONFIG_MAP, "settings").await.unwrap();
    assert_eq!(cm["data"]["msg"], "second");
    let kept = live(&m.env.client, SECRET, "db-password").await.unwrap();
    assert_eq!(
        data_of(&kept, "password"),
        first,
        "IfNotPresent: not updated"
    );
    assert_eq!(kept["metadata"]["uid"], created["metadata"]["uid"]);

    // A hand edit of the Secret is not drift (its fields are not ours to keep) ...
    let secrets: Api<crds::k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(m.env.client.clone(), NS);
    secrets
        .patch(
            "db-password",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": "rotated"}})),
        )
        .await
        .unwrap();
    m.reconcile("web").await;
    assert!(
        condition(&m.status("web").await.conditions, types::DRIFTED).is_none(),
        "an IfNotPresent object's fields are not drift"
    );
    // ... but its absence is, and the next apply creates it again.
    secrets
        .delete("db-password", &DeleteParams::default())
        .await
        .unwrap();
    m.reconcile("web").await;
    let drifted = condition(&m.status("web").await.conditions, types::DRIFTED).unwrap();
    assert_eq!(drifted.0, "True", "{drifted:?}");
    m.set_msg("web", "third").await;
    m.reconcile("web").await;
    let again = live(&m.env.client, SECRET, "db-password").await.unwrap();
    assert_eq!(data_of(&again, "password"), b64("third"));

    // Deleting the instance prunes it (Flux's rule: only `opm.dev/prune: disabled` keeps it).
    m.delete("web").await;
    assert!(live(&m.env.client, SECRET, "db-password").await.is_none());
    assert!(live(&m.env.client, CONFIG_MAP, "settings").await.is_none());
}

/// `s` as a Secret stores it.
fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_not_present_with_prune_disabled_outlives_the_instance() {
    let m = mi_env(
        vec![secret(
            json!({"opm.dev/apply": "IfNotPresent", "opm.dev/prune": "disabled"}),
        )],
        |_| {},
    )
    .await;
    m.create("web", |_| {}).await;
    m.reconcile("web").await;
    assert!(live(&m.env.client, SECRET, "db-password").await.is_some());
    m.delete("web").await;
    assert!(
        live(&m.env.client, SECRET, "db-password").await.is_some(),
        "prune: disabled keeps it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_is_never_applied_and_never_pruned() {
    let m = mi_env(
        vec![
            config_map("theirs", json!({"opm.dev/apply": "Ignore"})),
            config_map("ours", json!({})),
        ],
        |_| {},
    )
    .await;
    // Someone else's ConfigMap of the same name exists: it is left exactly as it is.
    let cms: Api<crds::k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(m.env.client.clone(), NS);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "theirs"}, "data": {"msg": "by hand"}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    m.create("web", |_| {}).await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    let theirs = live(&m.env.client, CONFIG_MAP, "theirs").await.unwrap();
    assert_eq!(theirs["data"]["msg"], "by hand");
    assert!(theirs["metadata"]["labels"].is_null(), "{theirs}");
    assert_eq!(m.inventory("web").await, ["ConfigMap/ours"]);
    // Its difference from the render is not drift either.
    m.reconcile("web").await;
    assert!(condition(&m.status("web").await.conditions, types::DRIFTED).is_none());

    // An object applied before it is ignored is not pruned when it becomes Ignore, and leaves
    // the inventory; the instance's deletion leaves it too, while its other objects go.
    m.renderer.set(vec![
        config_map("theirs", json!({"opm.dev/apply": "Ignore"})),
        config_map("ours", json!({"opm.dev/apply": "Ignore"})),
        config_map("other", json!({})),
    ]);
    m.set_msg("web", "next").await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    let ours = live(&m.env.client, CONFIG_MAP, "ours").await.unwrap();
    assert_eq!(ours["data"]["msg"], "hello", "not applied any more");
    assert_eq!(m.inventory("web").await, ["ConfigMap/other"]);
    m.delete("web").await;
    assert!(live(&m.env.client, CONFIG_MAP, "ours").await.is_some());
    assert!(live(&m.env.client, CONFIG_MAP, "theirs").await.is_some());
    assert!(live(&m.env.client, CONFIG_MAP, "other").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_recreates_on_an_immutable_change_and_without_it_the_apply_fails() {
    let m = mi_env(vec![deployment("web", "a", json!({}))], |_| {}).await;
    m.create("web", |_| {}).await;
    m.reconcile("web").await;
    let first = live(&m.env.client, DEPLOYMENT, "web").await.unwrap();

    // The selector changes (immutable): refused without the annotation, nothing recreated.
    m.renderer.set(vec![deployment("web", "b", json!({}))]);
    m.set_msg("web", "1.1").await;
    let out = m.reconcile("web").await;
    assert_eq!(out.reason, Some(reasons::APPLY_FAILED), "{out:?}");
    let (st, _, message) = m.ready("web").await;
    assert_eq!(st, "False");
    assert!(
        message.contains("Deployment/team-a/web") && message.contains("spec.selector"),
        "{message}"
    );
    let same = live(&m.env.client, DEPLOYMENT, "web").await.unwrap();
    assert_eq!(same["metadata"]["uid"], first["metadata"]["uid"]);

    // With `opm.dev/force: enabled` the Deployment is deleted and created again.
    m.renderer.set(vec![deployment(
        "web",
        "b",
        json!({"opm.dev/force": "enabled"}),
    )]);
    m.set_msg("web", "1.2").await;
    let out = m
        .until_reason("web", reasons::RECONCILIATION_SUCCEEDED, 20)
        .await;
    assert!(out.outcome.is_some(), "{out:?}");
    let recreated = live(&m.env.client, DEPLOYMENT, "web").await.unwrap();
    assert_ne!(recreated["metadata"]["uid"], first["metadata"]["uid"]);
    assert_eq!(recreated["spec"]["selector"]["matchLabels"]["app"], "b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_policy_value_stalls_naming_the_object_and_applies_nothing() {
    let m = mi_env(
        vec![
            config_map("settings", json!({})),
            secret(json!({"opm.dev/apply": "Sometimes"})),
        ],
        |_| {},
    )
    .await;
    m.create("web", |_| {}).await;
    let out = m.reconcile("web").await;
    let message = assert_stalled(
        &out,
        &m.status("web").await.conditions,
        reasons::APPLY_FAILED,
    );
    assert_eq!(
        message,
        "Secret/team-a/db-password: annotation opm.dev/apply has the unknown value \
         \"Sometimes\" (allowed: Always, IfNotPresent, Ignore)"
    );
    assert!(live(&m.env.client, CONFIG_MAP, "settings").await.is_none());
    // The valid value applies both.
    m.renderer.set(vec![
        config_map("settings", json!({})),
        secret(json!({"opm.dev/apply": "Always"})),
    ]);
    m.set_msg("web", "fixed").await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    assert!(live(&m.env.client, SECRET, "db-password").await.is_some());
}
