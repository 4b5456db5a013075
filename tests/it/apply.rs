//! The apply engine against kube-emu: staged SSA (a CRD and its CR in one pass), change-set
//! counts, conflict semantics (ownership always forced; recreate on an immutable-field refusal
//! only with rollout.forceConflicts, never for PVCs/CRDs/Namespaces or objects not ours), label stamping, impersonation
//! (scenario 41), drift (scenario 36) and health waits.
//!
//! docs/design/operator.md §8 scenarios → tests:
//! - 36 (drift, dry-run error counted): `apply::scenario_36_drift_detected_ignored_counted_and_cleared`
//! - 37 (prune + guards): `apply::prune::scenario_37_prune_deletes_stale_and_honours_every_guard`
//! - 38 (component move / API version change not stale):
//!   `apply::prune::scenario_38_component_move_and_version_change_are_not_stale`
//! - 39 (apply error: no prune, inventory kept): `apply::faults::failed_apply_adds_nothing_and_prunes_nothing`
//! - 41, 43 (impersonation; 403 typed as an impersonation failure):
//!   `apply::scenario_41_impersonation_403_typed_and_group_rolebinding_authorises`
//! - 44 (deletion, fail-slow, finalizer kept until gone):
//!   `apply::prune::scenario_44_deletion_prunes_all_but_protected_fail_slow_and_waits_for_gone`
//! - 45 (SA gone on deletion, orphan annotation): `apply::prune::scenario_45_deleting_with_the_sa_gone`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

pub mod faults;
pub mod prune;

use std::time::Duration;

use http::Method;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_emu::fault::{FaultKind, FaultRule};
use opm_operator::apply::drift::{DriftOptions, DriftOutcome, IgnoreRule};
use opm_operator::apply::health::Cancel;
use opm_operator::apply::object::{InstanceLabels, ObjectRef};
use opm_operator::apply::{Action, ApplyOptions, Engine, EngineOptions, Error};
use serde_json::{json, Value};

pub(crate) async fn emu() -> kube_emu::Emulator {
    kube_emu::Emulator::start(kube_emu::Options::default())
        .await
        .unwrap()
}

pub(crate) fn engine(emu: &kube_emu::Emulator) -> Engine {
    Engine::new(
        emu.client().unwrap(),
        EngineOptions {
            wait_interval: Duration::from_millis(20),
            stage_timeout: Duration::from_secs(10),
            ..EngineOptions::default()
        },
    )
}

pub(crate) fn cm(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns,
            "labels": {"component.opmodel.dev/name": "web"}},
        "data": data})
}

pub(crate) fn ns(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

pub(crate) fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {"group": "example.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}})
}

pub(crate) fn widget(ns: &str, name: &str, size: i64) -> Value {
    json!({"apiVersion": "example.dev/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": ns}, "spec": {"size": size}})
}

pub(crate) fn dyn_api(
    client: &kube::Client,
    ns: &str,
    gvk: (&str, &str, &str),
    plural: &str,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2), plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

pub(crate) fn cm_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    dyn_api(client, ns, ("", "v1", "ConfigMap"), "configmaps")
}

pub(crate) async fn live_cm(client: &kube::Client, ns: &str, name: &str) -> Option<Value> {
    cm_api(client, ns)
        .get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

#[tokio::test]
async fn crd_and_its_cr_apply_in_one_pass() {
    let emu = emu().await;
    let eng = engine(&emu);
    // Render order puts the CR first: staging must still apply the CRD and Namespace before it.
    let objects = vec![widget("shop", "w1", 3), crd(), ns("shop")];
    let cs = eng
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Created), 3, "{cs:?}");
    let w = dyn_api(
        &emu.client().unwrap(),
        "shop",
        ("example.dev", "v1", "Widget"),
        "widgets",
    )
    .get("w1")
    .await
    .unwrap();
    assert_eq!(w.data["spec"]["size"], 3);
    // Re-applying is a no-op, also once the server's status timestamps (second precision) of
    // the CRD would differ between a dry-run answer and the live object.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let cs = eng
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Unchanged), 3, "{cs:?}");

    // The CRD is removed behind our back: the next apply of the CR sees fresh discovery and
    // reports the kind as not served (no stale discovery cache).
    let crds = Api::<DynamicObject>::all_with(
        emu.client().unwrap(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.delete("widgets.example.dev", &Default::default())
        .await
        .unwrap();
    let err = eng
        .apply_all_staged(&[widget("shop", "w1", 3)], &ApplyOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownKind { .. }), "{err:?}");
    emu.shutdown().await;
}

/// Discovery is cached across applies (`apply::resolve`): re-applying two unchanged ConfigMaps
/// is exactly one GET and one dry-run each, no discovery request; a Namespace in the first stage
/// does not drop the cache, a CRD does (covered by `crd_and_its_cr_apply_in_one_pass`).
#[tokio::test]
async fn discovery_is_cached_across_applies() {
    let emu = emu().await;
    let eng = engine(&emu);
    let objects = vec![
        ns("cached"),
        cm("cached", "a", json!({"k": "1"})),
        cm("cached", "b", json!({"k": "1"})),
    ];
    eng.apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    let before = emu.requests_served();
    let cs = eng
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Unchanged), 3, "{cs:?}");
    // Three objects: a GET and a dry-run each, and the Namespace's readiness read of stage 0.
    assert_eq!(emu.requests_served() - before, 3 * 2 + 1);
    emu.shutdown().await;
}

#[tokio::test]
async fn change_set_counts_created_configured_unchanged() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let mut objects = vec![
        ns("app"),
        cm("app", "a", json!({"k": "1"})),
        cm("app", "b", json!({"k": "1"})),
    ];
    let cs = eng
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        cs.applied_message(),
        "Applied 3 resources (3 created, 0 updated, 0 unchanged)"
    );
    let rv_b = live_cm(&client, "app", "b").await.unwrap()["metadata"]["resourceVersion"].clone();
    objects[1] = cm("app", "a", json!({"k": "2"}));
    objects.push(cm("app", "c", json!({})));
    let cs = eng
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        cs.applied_message(),
        "Applied 4 resources (1 created, 1 updated, 2 unchanged)"
    );
    assert_eq!(
        cs.changes
            .iter()
            .map(|c| (c.object.to_string(), c.action))
            .collect::<Vec<_>>(),
        vec![
            ("Namespace/app".to_string(), Action::Unchanged),
            ("ConfigMap/app/a".to_string(), Action::Configured),
            ("ConfigMap/app/b".to_string(), Action::Unchanged),
            ("ConfigMap/app/c".to_string(), Action::Created),
        ]
    );
    assert_eq!(
        live_cm(&client, "app", "a").await.unwrap()["data"]["k"],
        "2"
    );
    // The unchanged object was not written.
    assert_eq!(
        live_cm(&client, "app", "b").await.unwrap()["metadata"]["resourceVersion"],
        rv_b
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn plan_previews_without_writing() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let objects = [cm("default", "a", json!({"k": "1"}))];
    eng.apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    let rv = emu.resource_version();
    let changed = vec![
        cm("default", "a", json!({"k": "2"})),
        cm("default", "b", json!({"k": "1"})),
    ];
    let cs = eng.plan(&changed, &ApplyOptions::default()).await.unwrap();
    assert_eq!(
        cs.changes.iter().map(|c| c.action).collect::<Vec<_>>(),
        vec![Action::Configured, Action::Created]
    );
    assert_eq!(emu.resource_version(), rv, "nothing written");
    assert!(live_cm(&client, "default", "b").await.is_none());
    let cs = eng
        .plan(&objects[..1], &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Unchanged), 1);
    emu.shutdown().await;
}

#[tokio::test]
async fn status_and_managed_fields_stripped_and_runtime_labels_stamped() {
    let emu = emu().await;
    let eng = engine(&emu);
    let mut o = cm("default", "x", json!({"a": "b"}));
    o["status"] = json!({"phase": "Whatever"});
    o["metadata"]["managedFields"] = json!([{"manager": "someone", "operation": "Apply"}]);
    o["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("author");
    let opts = ApplyOptions {
        instance: Some(InstanceLabels {
            name: "inst".into(),
            namespace: "default".into(),
            uuid: "uuid-1".into(),
        }),
        ..ApplyOptions::default()
    };
    eng.apply_all_staged(&[o], &opts).await.unwrap();
    let live = live_cm(&emu.client().unwrap(), "default", "x")
        .await
        .unwrap();
    let labels = &live["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/managed-by"], "opm-controller");
    assert_eq!(labels["module-instance.opmodel.dev/uuid"], "uuid-1");
    assert_eq!(labels["module-instance.opmodel.dev/name"], "inst");
    assert!(live.get("status").is_none());
    // Created through the instance's claim, which stays the manager until the object's next
    // write (the lazy hand-over, `opm_operator::apply::claim`).
    assert_eq!(managers(&live), ["opm-claim.uuid-1"], "{live:#}");
    emu.shutdown().await;
}

#[tokio::test]
async fn fields_taken_by_other_managers_are_taken_back_without_force_conflicts() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let ours = cm("default", "shared", json!({"k": "ours", "j": "ours"}));
    eng.apply_all_staged(std::slice::from_ref(&ours), &ApplyOptions::default())
        .await
        .unwrap();
    // Another applier takes data.k (forced SSA) and an editor takes data.j (an Update, as
    // `kubectl edit` does): both now own a field we render.
    cm_api(&client, "default")
        .patch(
            "shared",
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "shared", "namespace": "default"}, "data": {"k": "theirs"}})),
        )
        .await
        .unwrap();
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    cm_api(&client, "default")
        .patch(
            "shared",
            &edit,
            &Patch::Merge(json!({"data": {"j": "edited"}})),
        )
        .await
        .unwrap();
    // The next apply, without rollout.forceConflicts, corrects the drift: no conflict error.
    let cs = eng
        .apply_all_staged(std::slice::from_ref(&ours), &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Configured), 1, "{cs:?}");
    let live = live_cm(&client, "default", "shared").await.unwrap();
    assert_eq!(live["data"], json!({"k": "ours", "j": "ours"}));
    let owners = |field: &str| -> Vec<String> {
        live["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["fieldsV1"]["f:data"][format!("f:{field}")].is_object())
            .map(|m| m["manager"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(owners("k"), vec!["opm-controller"], "{live}");
    assert_eq!(owners("j"), vec!["opm-controller"], "{live}");
    emu.shutdown().await;
}

fn labelled(mut o: Value, app: &str) -> Value {
    o["spec"]["selector"]["matchLabels"]["app"] = json!(app);
    o["spec"]["template"]["metadata"]["labels"]["app"] = json!(app);
    o
}

fn uid(o: &Value) -> String {
    o["metadata"]["uid"].as_str().unwrap().to_string()
}

fn instance() -> InstanceLabels {
    InstanceLabels {
        name: "web".into(),
        namespace: "default".into(),
        uuid: "0000-web".into(),
    }
}

#[tokio::test]
async fn immutable_change_is_refused_without_force_conflicts_and_recreated_with_it() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let deploys = dyn_api(
        &client,
        "default",
        ("apps", "v1", "Deployment"),
        "deployments",
    );
    let live_of = |name: &'static str| {
        let deploys = deploys.clone();
        async move { serde_json::to_value(deploys.get(name).await.unwrap()).unwrap() }
    };
    let opts = ApplyOptions {
        instance: Some(instance()),
        ..ApplyOptions::default()
    };
    let other = cm("default", "other", json!({"k": "1"}));
    eng.apply_all_staged(&[deployment("default", "web"), other.clone()], &opts)
        .await
        .unwrap();
    let first = uid(&live_of("web").await);
    let other_uid = uid(&live_cm(&client, "default", "other").await.unwrap());

    // The selector changes: refused, naming the field and the setting; nothing of the stage
    // is written (the new ConfigMap planned with it is not created).
    let moved = labelled(deployment("default", "web"), "web-v2");
    let fresh = cm("default", "fresh", json!({"k": "new"}));
    let desired = [moved, other, fresh];
    let err = eng.apply_all_staged(&desired, &opts).await.unwrap_err();
    match &err {
        Error::Immutable { object, fields } => {
            assert_eq!(object, "Deployment/default/web");
            assert_eq!(fields, &vec!["spec.selector".to_string()]);
        }
        other => panic!("expected an immutable-field refusal, got {other:?}"),
    }
    assert!(err.to_string().contains("rollout.forceConflicts"), "{err}");
    assert!(err.is_immutable());
    assert!(live_cm(&client, "default", "fresh").await.is_none());
    assert_eq!(uid(&live_of("web").await), first);

    // With rollout.forceConflicts the Deployment is deleted and created again (new uid); the
    // other objects are untouched, and the recreate counts as created in the Applied message.
    let recreate = ApplyOptions {
        recreate: true,
        ..opts.clone()
    };
    let cs = eng.apply_all_staged(&desired, &recreate).await.unwrap();
    assert_eq!(cs.count(Action::Recreated), 1, "{cs:?}");
    assert_eq!(cs.changes[0].action, Action::Recreated);
    assert_eq!(
        cs.applied_message(),
        "Applied 3 resources (2 created, 0 updated, 1 unchanged)"
    );
    let live = live_of("web").await;
    assert_ne!(uid(&live), first);
    assert_eq!(live["spec"]["selector"]["matchLabels"]["app"], "web-v2");
    assert_eq!(
        uid(&live_cm(&client, "default", "other").await.unwrap()),
        other_uid
    );
    assert!(live_cm(&client, "default", "fresh").await.is_some());
    emu.shutdown().await;
}

#[tokio::test]
async fn objects_that_would_lose_data_or_are_not_ours_are_never_recreated() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let recreate = ApplyOptions {
        recreate: true,
        instance: Some(instance()),
        ..ApplyOptions::default()
    };
    // A PVC whose storage class changes.
    let pvc = |class: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                "resources": {"requests": {"storage": "1Gi"}}}})
    };
    let pvcs = dyn_api(
        &client,
        "default",
        ("", "v1", "PersistentVolumeClaim"),
        "persistentvolumeclaims",
    );
    eng.apply_all_staged(&[pvc("a")], &recreate).await.unwrap();
    let before = uid(&serde_json::to_value(pvcs.get("data").await.unwrap()).unwrap());
    let err = eng
        .apply_all_staged(&[pvc("b")], &recreate)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::RecreateRefused { ref object, ref fields, .. }
            if object == "PersistentVolumeClaim/default/data" && fields == &vec!["spec".to_string()]),
        "{err:?}"
    );
    let live = serde_json::to_value(pvcs.get("data").await.unwrap()).unwrap();
    assert_eq!(uid(&live), before);
    assert_eq!(live["spec"]["storageClassName"], "a");

    // A CRD whose scope changes.
    let crds = kube::Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    eng.apply_all_staged(&[crd()], &recreate).await.unwrap();
    let name = crd()["metadata"]["name"].as_str().unwrap().to_string();
    let before = uid(&serde_json::to_value(crds.get(&name).await.unwrap()).unwrap());
    let mut cluster = crd();
    cluster["spec"]["scope"] = json!("Cluster");
    let err = eng
        .apply_all_staged(&[cluster], &recreate)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::RecreateRefused { ref fields, .. } if fields == &vec!["spec.scope".to_string()]),
        "{err:?}"
    );
    assert_eq!(
        uid(&serde_json::to_value(crds.get(&name).await.unwrap()).unwrap()),
        before
    );

    // A Deployment someone else created (not our labels) is not deleted to be replaced.
    let deploys = dyn_api(
        &client,
        "default",
        ("apps", "v1", "Deployment"),
        "deployments",
    );
    let theirs: DynamicObject = serde_json::from_value(deployment("default", "theirs")).unwrap();
    let created = deploys
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let err = eng
        .apply_all_staged(&[labelled(deployment("default", "theirs"), "x")], &recreate)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RecreateRefused { .. }), "{err:?}");
    assert_eq!(
        deploys.get("theirs").await.unwrap().metadata.uid,
        created.metadata.uid
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn unknown_kind_and_invalid_objects_are_typed_errors() {
    let emu = emu().await;
    let eng = engine(&emu);
    let err = eng
        .apply_all_staged(&[widget("default", "w", 1)], &ApplyOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownKind { ref kind, .. } if kind == "Widget"),
        "{err:?}"
    );
    let err = eng
        .apply_all_staged(&[json!({"kind": "ConfigMap"})], &ApplyOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidObject { .. }), "{err:?}");
    let twice = vec![
        cm("default", "dup", json!({"k": "1"})),
        cm("default", "dup", json!({"k": "2"})),
    ];
    let err = eng
        .apply_all_staged(&twice, &ApplyOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidObject { ref object, .. } if object == "ConfigMap/default/dup"),
        "{err:?}"
    );
    assert!(live_cm(&emu.client().unwrap(), "default", "dup")
        .await
        .is_none());
    let no_ns = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let err = eng
        .apply_all_staged(&[no_ns], &ApplyOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidObject { .. }), "{err:?}");
    emu.shutdown().await;
}

async fn make_sa(client: &kube::Client, namespace: &str, name: &str) {
    let sa = dyn_api(
        client,
        namespace,
        ("", "v1", "ServiceAccount"),
        "serviceaccounts",
    );
    let obj: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace}}))
        .unwrap();
    sa.create(&PostParams::default(), &obj).await.unwrap();
}

#[tokio::test]
async fn scenario_41_impersonation_403_typed_and_group_rolebinding_authorises() {
    let emu = emu().await;
    let eng = engine(&emu);
    let admin = emu.client().unwrap();
    eng.apply_all_staged(&[ns("team-a")], &ApplyOptions::default())
        .await
        .unwrap();
    make_sa(&admin, "team-a", "deploy-sa").await;
    let config = emu.config().unwrap();
    let as_sa = eng
        .impersonating(&config, "team-a", "deploy-sa")
        .await
        .unwrap();
    assert_eq!(
        as_sa.impersonated(),
        Some("system:serviceaccount:team-a:deploy-sa")
    );
    let objects = vec![cm("team-a", "app", json!({"k": "v"}))];
    let err = as_sa
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_impersonation_forbidden(), "{err:?}");
    match &err {
        Error::Forbidden { impersonated, .. } => assert_eq!(
            impersonated.as_deref(),
            Some("system:serviceaccount:team-a:deploy-sa")
        ),
        other => panic!("{other:?}"),
    }
    // The same 403 under the controller identity is not an impersonation failure.
    let rbac = |kind: &str, body: Value| -> Value {
        let mut b = body;
        b["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
        b["kind"] = json!(kind);
        b
    };
    let role = rbac(
        "Role",
        json!({"metadata": {"name": "deployer", "namespace": "team-a"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}),
    );
    // Bound to the namespace's SA *group*, not to the SA by name (scenario 41).
    let binding = rbac(
        "RoleBinding",
        json!({"metadata": {"name": "deployer", "namespace": "team-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                "name": "system:serviceaccounts:team-a"}]}),
    );
    eng.apply_all_staged(&[binding, role], &ApplyOptions::default())
        .await
        .unwrap();
    let cs = as_sa
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Created), 1);
    // A missing SA is typed (uncached read), and no engine is built.
    let err = eng
        .impersonating(&config, "team-a", "nobody")
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ServiceAccountNotFound { ref namespace, ref name } if namespace == "team-a" && name == "nobody")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn scenario_36_drift_detected_ignored_counted_and_cleared() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let objects = vec![
        cm("default", "a", json!({"k": "1"})),
        cm("default", "b", json!({"k": "1"})),
    ];
    eng.apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    let rep = eng.drift(&objects, &DriftOptions::default()).await;
    assert_eq!(rep.outcome(), DriftOutcome::InSync);
    assert_eq!(rep.checked, 2);

    // A hand edit (an Update by another manager) of a field we own, plus a field we do not own.
    let hand = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    cm_api(&client, "default")
        .patch(
            "a",
            &hand,
            &Patch::Merge(json!({"data": {"k": "hand-edited", "extra": "x"}})),
        )
        .await
        .unwrap();
    let rep = eng.drift(&objects, &DriftOptions::default()).await;
    assert_eq!(rep.outcome(), DriftOutcome::Drifted(1));
    assert_eq!(rep.drifted[0].to_string(), "ConfigMap/default/a");

    // An ignore rule on the drifted pointer hides it.
    let ignore = DriftOptions {
        ignore: vec![IgnoreRule {
            paths: vec!["/data/k".into()],
            kind: Some("ConfigMap".into()),
            name: Some("a".into()),
            ..IgnoreRule::default()
        }],
        ..DriftOptions::default()
    };
    assert_eq!(
        eng.drift(&objects, &ignore).await.outcome(),
        DriftOutcome::InSync
    );

    // A dry-run error is counted and never read as "no drift".
    emu.inject_fault(
        FaultRule::any(1, FaultKind::Internal)
            .method(Method::PATCH)
            .path_contains("/configmaps/b")
            .dry_run(true),
    );
    let rep = eng.drift(&objects, &ignore).await;
    assert_eq!(rep.outcome(), DriftOutcome::Unknown);
    assert_eq!(rep.errors.len(), 1);
    assert_eq!(rep.errors[0].0.to_string(), "ConfigMap/default/b");
    assert_eq!(emu.faults_fired(), 1);

    // Drift as an identity without RBAC: a 403 dry-run is an error, not "in sync".
    make_sa(&client, "default", "tenant").await;
    let as_sa = eng
        .impersonating(&emu.config().unwrap(), "default", "tenant")
        .await
        .unwrap();
    let rep = as_sa.drift(&objects, &DriftOptions::default()).await;
    assert_eq!(rep.outcome(), DriftOutcome::Unknown);
    assert!(rep
        .errors
        .iter()
        .all(|(_, e)| e.is_impersonation_forbidden()));

    // The hand edit took ownership of data.k (an Update); the next apply takes it back
    // (ownership is always forced) and the drift is cleared.
    let cs = eng
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Configured), 1);
    assert_eq!(
        eng.drift(&objects, &DriftOptions::default())
            .await
            .outcome(),
        DriftOutcome::InSync
    );
    // Opt-in correction re-applies a drifted object.
    cm_api(&client, "default")
        .patch("b", &hand, &Patch::Merge(json!({"data": {"k": "x"}})))
        .await
        .unwrap();
    let rep = eng
        .drift(
            &objects,
            &DriftOptions {
                correct: true,
                ..DriftOptions::default()
            },
        )
        .await;
    assert_eq!(rep.corrected.len(), 1);
    assert_eq!(
        live_cm(&client, "default", "b").await.unwrap()["data"]["k"],
        "1"
    );
    emu.shutdown().await;
}

fn deployment(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})
}

#[tokio::test]
async fn health_wait_times_out_succeeds_and_cancels() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let d = deployment("default", "web");
    let opts = ApplyOptions {
        wait: true,
        wait_timeout: Duration::from_millis(200),
        ..ApplyOptions::default()
    };
    // kube-emu runs no controllers: the Deployment never becomes ready by itself.
    let err = eng
        .apply_all_staged(std::slice::from_ref(&d), &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Timeout { ref waiting_for, .. } if waiting_for[0].starts_with("Deployment/default/web")),
        "{err:?}"
    );
    let r = ObjectRef::of(&d).unwrap();

    // A per-object opt-out skips the final wait for that object.
    let mut quiet = deployment("default", "quiet");
    quiet["metadata"]["annotations"] = json!({"opm.dev/wait": "disabled"});
    let cs = eng.apply_all_staged(&[quiet], &opts).await.unwrap();
    assert_eq!(cs.count(Action::Created), 1);

    // An apply waiting for health is cancelled when a newer desired state arrives.
    let (handle, cancel) = Cancel::pair();
    let waiting = ApplyOptions {
        wait: true,
        wait_timeout: Duration::from_secs(30),
        cancel,
        ..ApplyOptions::default()
    };
    let eng1 = eng.clone();
    let d1 = d.clone();
    let applying = tokio::spawn(async move { eng1.apply_all_staged(&[d1], &waiting).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.cancel();
    let res = tokio::time::timeout(Duration::from_secs(5), applying)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(res, Err(Error::Cancelled)), "{res:?}");

    // Cancellation (a newer desired state) ends the wait at once.
    let (handle, cancel) = Cancel::pair();
    let eng2 = eng.clone();
    let r2 = r.clone();
    let waiter = tokio::spawn(async move {
        eng2.wait_ready(&[r2], Duration::from_secs(30), cancel)
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.cancel();
    let res = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(res, Err(Error::Cancelled)), "{res:?}");

    // A controller reports it ready: the wait succeeds.
    let deployments = dyn_api(
        &client,
        "default",
        ("apps", "v1", "Deployment"),
        "deployments",
    );
    let generation = deployments.get("web").await.unwrap().metadata.generation;
    deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"observedGeneration": generation, "replicas": 1,
                "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}}),
            ),
        )
        .await
        .unwrap();
    eng.wait_ready(
        std::slice::from_ref(&r),
        Duration::from_secs(5),
        Cancel::never(),
    )
    .await
    .unwrap();

    // A terminal failure fails fast, long before the deadline.
    deployments
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded", "message": "deadline exceeded"}]}}),
            ),
        )
        .await
        .unwrap();
    let start = std::time::Instant::now();
    let err = eng
        .wait_ready(&[r], Duration::from_secs(30), Cancel::never())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::HealthFailed { .. }), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    emu.shutdown().await;
}

/// The managers owning at least one field of `o`.
fn managers(o: &Value) -> Vec<String> {
    o["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["fieldsV1"].as_object().is_some_and(|f| !f.is_empty()))
        .map(|e| e["manager"].as_str().unwrap().to_owned())
        .collect()
}

/// Issue 41 item 4 (`opm_operator::apply::claim`), the lazy hand-over: an object an instance
/// creates is written once, by its claim, which stays its only manager; applying the same render
/// again writes nothing (the claim is neither a change nor a reason to write); a render that only
/// drops a key writes the object, hands it to `opm-controller` and releases the claim, so the key
/// is removed; a claim left behind (another process of the instance died, or a rival instance's
/// object was adopted) holding a key the render does not hold is released the same way, and one
/// holding only what the render holds waits for the object's next real write.
#[tokio::test]
async fn a_claimed_object_is_written_once_and_handed_over_when_the_render_drops_a_field() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let opts = ApplyOptions {
        instance: Some(instance()),
        ..ApplyOptions::default()
    };
    let claim = format!("opm-claim.{}", instance().uuid);
    let first = cm("default", "claimed", json!({"a": "1", "b": "2"}));
    let rv = emu.resource_version();
    let cs = eng
        .apply_all_staged(std::slice::from_ref(&first), &opts)
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Created), 1);
    assert_eq!(emu.resource_version(), rv + 1, "one write: the claim");
    let live = live_cm(&client, "default", "claimed").await.unwrap();
    assert_eq!(managers(&live), [claim.as_str()], "{live:#}");

    // The same render: unchanged, nothing written, the claim stays.
    let rv = emu.resource_version();
    let cs = eng
        .apply_all_staged(std::slice::from_ref(&first), &opts)
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Unchanged), 1, "{cs:?}");
    assert_eq!(emu.resource_version(), rv, "nothing written");

    // The render drops `b` and changes nothing else: the claim alone holds `b`, so the object is
    // written, handed over and released, and `b` is removed.
    let second = cm("default", "claimed", json!({"a": "1"}));
    eng.apply_all_staged(std::slice::from_ref(&second), &opts)
        .await
        .unwrap();
    let live = live_cm(&client, "default", "claimed").await.unwrap();
    assert_eq!(live["data"], json!({"a": "1"}), "{live:#}");
    assert_eq!(managers(&live), ["opm-controller"], "{live:#}");

    // A claim left behind co-owning `c`, which the render does not hold: released by the next
    // apply, which changes nothing else.
    let mut stale = second.clone();
    stale["data"]["c"] = json!("3");
    cm_api(&client, "default")
        .patch(
            "claimed",
            &PatchParams::apply(&claim).force(),
            &Patch::Apply(&stale),
        )
        .await
        .unwrap();
    let cs = eng
        .apply_all_staged(std::slice::from_ref(&second), &opts)
        .await
        .unwrap();
    assert_eq!(cs.changes.len(), 1);
    let live = live_cm(&client, "default", "claimed").await.unwrap();
    assert_eq!(live["data"], json!({"a": "1"}), "{live:#}");
    assert_eq!(managers(&live), ["opm-controller"], "{live:#}");
    // Released: the next apply writes nothing.
    let rv = emu.resource_version();
    let cs = eng
        .apply_all_staged(std::slice::from_ref(&second), &opts)
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Unchanged), 1);
    assert_eq!(emu.resource_version(), rv, "nothing written");

    // A claim co-owning only what the render holds is no reason to write...
    cm_api(&client, "default")
        .patch(
            "claimed",
            &PatchParams::apply(&claim).force(),
            &Patch::Apply(&second),
        )
        .await
        .unwrap();
    let rv = emu.resource_version();
    let cs = eng
        .apply_all_staged(std::slice::from_ref(&second), &opts)
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Unchanged), 1);
    assert_eq!(emu.resource_version(), rv, "nothing written");
    let live = live_cm(&client, "default", "claimed").await.unwrap();
    let mut both = managers(&live);
    both.sort();
    assert_eq!(both, [claim.as_str(), "opm-controller"], "{live:#}");
    // ...and is released by the next real write.
    let third = cm("default", "claimed", json!({"a": "2"}));
    let cs = eng
        .apply_all_staged(std::slice::from_ref(&third), &opts)
        .await
        .unwrap();
    assert_eq!(cs.count(Action::Configured), 1);
    let live = live_cm(&client, "default", "claimed").await.unwrap();
    assert_eq!(live["data"], json!({"a": "2"}), "{live:#}");
    assert_eq!(managers(&live), ["opm-controller"], "{live:#}");
    emu.shutdown().await;
}

/// The lazy hand-over (`opm_operator::apply::claim`) and drift: right after a create the claim
/// is the object's only manager, and the drift check still reads an untouched object as in sync
/// (the forced dry-run makes `opm-controller` co-own every rendered field), a hand edit as
/// drift, and a correction puts the value back; the first real write after a create hands the
/// object over, and a key the render drops then goes with it (the plain path, no claim left).
#[tokio::test]
async fn a_claimed_object_is_in_sync_drifts_by_hand_and_is_handed_over_by_its_first_update() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let opts = ApplyOptions {
        instance: Some(instance()),
        ..ApplyOptions::default()
    };
    let claim = format!("opm-claim.{}", instance().uuid);
    let labelled = |data: Value| {
        let mut o = cm("default", "drifty", data);
        let labels = o["metadata"]["labels"].as_object_mut().unwrap();
        let i = instance();
        labels.insert("module-instance.opmodel.dev/name".into(), json!(i.name));
        labels.insert(
            "module-instance.opmodel.dev/namespace".into(),
            json!(i.namespace),
        );
        labels.insert("module-instance.opmodel.dev/uuid".into(), json!(i.uuid));
        o
    };
    let objects = vec![labelled(json!({"k": "1", "j": "1"}))];
    eng.apply_all_staged(&objects, &opts).await.unwrap();
    let live = live_cm(&client, "default", "drifty").await.unwrap();
    assert_eq!(managers(&live), [claim.as_str()], "{live:#}");
    let rv = emu.resource_version();
    let rep = eng.drift(&objects, &DriftOptions::default()).await;
    assert_eq!(rep.outcome(), DriftOutcome::InSync, "{rep:?}");
    assert_eq!(emu.resource_version(), rv, "a drift check writes nothing");

    let hand = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    cm_api(&client, "default")
        .patch(
            "drifty",
            &hand,
            &Patch::Merge(json!({"data": {"k": "hand"}})),
        )
        .await
        .unwrap();
    let rep = eng
        .drift(
            &objects,
            &DriftOptions {
                correct: true,
                ..DriftOptions::default()
            },
        )
        .await;
    assert_eq!(rep.outcome(), DriftOutcome::Drifted(1), "{rep:?}");
    assert_eq!(rep.corrected.len(), 1);
    let live = live_cm(&client, "default", "drifty").await.unwrap();
    assert_eq!(live["data"], json!({"k": "1", "j": "1"}), "{live:#}");
    assert_eq!(
        eng.drift(&objects, &DriftOptions::default())
            .await
            .outcome(),
        DriftOutcome::InSync
    );

    // The first update hands over: `opm-controller` alone, and a key dropped later is removed
    // by the plain apply.
    let changed = vec![labelled(json!({"k": "2", "j": "1"}))];
    let cs = eng.apply_all_staged(&changed, &opts).await.unwrap();
    assert_eq!(cs.count(Action::Configured), 1);
    let live = live_cm(&client, "default", "drifty").await.unwrap();
    assert_eq!(managers(&live), ["opm-controller"], "{live:#}");
    let dropped = vec![labelled(json!({"k": "2"}))];
    let cs = eng.apply_all_staged(&dropped, &opts).await.unwrap();
    assert_eq!(cs.count(Action::Configured), 1);
    let live = live_cm(&client, "default", "drifty").await.unwrap();
    assert_eq!(live["data"], json!({"k": "2"}), "{live:#}");
    emu.shutdown().await;
}
