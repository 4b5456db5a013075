//! Server-side apply through kube-rs: create, update, conflicts, force, field removal, list-map
//! keys and managedFields in the real fieldsV1 format.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::common::*;

fn cm(data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
}

fn entry<'a>(obj: &'a ConfigMap, manager: &str) -> Option<&'a serde_json::Value> {
    obj.metadata
        .managed_fields
        .as_ref()?
        .iter()
        .find(|e| e.manager.as_deref() == Some(manager))
        .and_then(|e| e.fields_v1.as_ref())
        .map(|f| &f.0)
}

#[tokio::test]
async fn apply_create_update_conflict_force_and_removal() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    let a = PatchParams::apply("alice");
    let b = PatchParams::apply("bob");
    let o = api
        .patch(
            "c",
            &a,
            &Patch::Apply(cm(json!({"x": "1", "y": "2", "z": "3"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        entry(&o, "alice").unwrap(),
        &json!({"f:data": {"f:x": {}, "f:y": {}, "f:z": {}}})
    );
    let mf = o.metadata.managed_fields.as_ref().unwrap();
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    assert_eq!(mf[0].fields_type.as_deref(), Some("FieldsV1"));
    // Same value: shared ownership, no conflict.
    api.patch("c", &b, &Patch::Apply(cm(json!({"x": "1"}))))
        .await
        .unwrap();
    // A different value conflicts and names the owner.
    let err = api
        .patch("c", &b, &Patch::Apply(cm(json!({"x": "1", "y": "9"}))))
        .await
        .unwrap_err();
    let s = api_status(err);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.contains("conflict with \"alice\""),
        "{}",
        s.message
    );
    assert!(s.message.contains(".data.y"), "{}", s.message);
    let o = api
        .patch(
            "c",
            &b.clone().force(),
            &Patch::Apply(cm(json!({"x": "1", "y": "9"}))),
        )
        .await
        .unwrap();
    assert_eq!(o.data.as_ref().unwrap()["y"], "9");
    assert_eq!(
        entry(&o, "alice").unwrap(),
        &json!({"f:data": {"f:x": {}, "f:z": {}}}),
        "force took y from alice"
    );
    // alice stops applying z (only she owned it): removed. She stops applying x: bob still owns it.
    let o = api
        .patch("c", &a, &Patch::Apply(cm(json!({}))))
        .await
        .unwrap();
    let data = o.data.unwrap();
    assert_eq!(data.get("z"), None);
    assert_eq!(data["x"], "1");
    assert_eq!(data["y"], "9");
    // An Update by another manager takes ownership of what it changes.
    let o = api
        .patch(
            "c",
            &PatchParams {
                field_manager: Some("editor".into()),
                ..Default::default()
            },
            &Patch::Merge(json!({"data": {"y": "10"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        entry(&o, "editor").unwrap(),
        &json!({"f:data": {"f:y": {}}})
    );
    assert_eq!(entry(&o, "bob").unwrap(), &json!({"f:data": {"f:x": {}}}));
    // Applying the same configuration again is a no-op: the resourceVersion stays.
    let before = api.get("c").await.unwrap();
    let again = api
        .patch("c", &b, &Patch::Apply(cm(json!({"x": "1"}))))
        .await
        .unwrap();
    assert_eq!(
        before.metadata.resource_version,
        again.metadata.resource_version
    );
    // fieldManager is required for apply.
    let err = api
        .patch("c", &PatchParams::default(), &Patch::Apply(cm(json!({}))))
        .await
        .unwrap_err();
    assert_eq!(api_status(err).code, 422);
}

#[tokio::test]
async fn apply_merges_containers_by_name() {
    let emu = start().await;
    let api: Api<Deployment> = Api::default_namespaced(emu.client().unwrap());
    let dep = |containers: serde_json::Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": containers}}}})
    };
    api.patch("d", &PatchParams::apply("a"), &Patch::Apply(dep(json!([{"name": "app", "image": "app:1", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]))))
        .await
        .unwrap();
    let o = api
        .patch(
            "d",
            &PatchParams::apply("b"),
            &Patch::Apply(dep(json!([{"name": "sidecar", "image": "side:1"}]))),
        )
        .await
        .unwrap();
    let v = serde_json::to_value(&o).unwrap();
    let names: Vec<_> = v["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["app", "sidecar"]);
    let mf = o.metadata.managed_fields.unwrap();
    let a = mf
        .iter()
        .find(|e| e.manager.as_deref() == Some("a"))
        .unwrap();
    let fields = &a.fields_v1.as_ref().unwrap().0;
    let c = &fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"];
    assert_eq!(c["."], json!({}));
    assert!(
        c["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"].is_object(),
        "{fields}"
    );
    let err = api
        .patch(
            "d",
            &PatchParams::apply("b"),
            &Patch::Apply(dep(
                json!([{"name": "sidecar", "image": "side:1"}, {"name": "app", "image": "app:2"}]),
            )),
        )
        .await
        .unwrap_err();
    assert!(api_status(err).message.contains("conflict with \"a\""));
    // a drops its container: it is removed; b's stays.
    let o = api
        .patch("d", &PatchParams::apply("a"), &Patch::Apply(dep(json!([]))))
        .await
        .unwrap();
    let v = serde_json::to_value(&o).unwrap();
    let cs = v["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0]["name"], "sidecar");
    assert_eq!(o.metadata.generation, Some(3));
}

#[tokio::test]
async fn apply_status_and_custom_list_map() {
    let (_emu, client) = start_with_widgets().await;
    let api: Api<Widget> = Api::default_namespaced(client);
    let w = |ports: serde_json::Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "S", "ports": ports}});
    api.patch(
        "w",
        &PatchParams::apply("a"),
        &Patch::Apply(w(json!([{"name": "http", "port": 80}]))),
    )
    .await
    .unwrap();
    let dynamic: Api<kube::api::DynamicObject> = Api::default_namespaced_with(
        api.clone().into_client(),
        &kube::api::ApiResource::erase::<Widget>(&()),
    );
    let o = dynamic.patch("w", &PatchParams::apply("b"), &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "S", "ports": [{"name": "grpc", "port": 90}]}}))).await.unwrap();
    let v = o.data;
    assert_eq!(
        v["spec"]["ports"].as_array().unwrap().len(),
        2,
        "x-kubernetes-list-map-keys merge"
    );
    let st = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": {"ready": true}});
    let o = api
        .patch_status("w", &PatchParams::apply("ctl"), &Patch::Apply(st))
        .await
        .unwrap();
    assert_eq!(o.status.unwrap().ready, Some(true));
    let mf = o.metadata.managed_fields.unwrap();
    let ctl = mf
        .iter()
        .find(|e| e.manager.as_deref() == Some("ctl"))
        .unwrap();
    assert_eq!(ctl.subresource.as_deref(), Some("status"));
    assert_eq!(
        ctl.fields_v1.as_ref().unwrap().0,
        json!({"f:status": {"f:ready": {}}})
    );
}
