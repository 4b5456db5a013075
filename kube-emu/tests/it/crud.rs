//! CRUD, optimistic concurrency, status subresource, finalizers, namespaces, selectors,
//! pagination, schemas and dry-run through kube-rs.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use crate::common::*;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"}
    }))
    .unwrap()
}

#[tokio::test]
async fn crud_round_trip_with_metadata() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    let created = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    assert!(created.uid().is_some());
    assert!(created.creation_timestamp().is_some());
    assert_eq!(created.metadata.generation, Some(1));
    let rv1: u64 = created.resource_version().unwrap().parse().unwrap();
    let got = api.get("a").await.unwrap();
    assert_eq!(got.uid(), created.uid());
    let mut upd = got.clone();
    upd.data = Some([("k".to_string(), "w".to_string())].into());
    let replaced = api
        .replace("a", &PostParams::default(), &upd)
        .await
        .unwrap();
    let rv2: u64 = replaced.resource_version().unwrap().parse().unwrap();
    assert!(rv2 > rv1);
    assert_eq!(replaced.data.as_ref().unwrap()["k"], "w");
    assert_eq!(replaced.uid(), created.uid());
    let mf = replaced.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].operation.as_deref(), Some("Update"));
    let dup = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap_err();
    let s = api_status(dup);
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let s = api_status(api.get("a").await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "configmaps \"a\" not found");
    let s = api_status(api.delete("a", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(s.code, 404);
}

#[tokio::test]
async fn stale_resource_version_is_a_conflict() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    api.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let first = api.get("a").await.unwrap();
    let second = first.clone();
    let mut f = first.clone();
    f.data = Some([("k".to_string(), "1".to_string())].into());
    api.replace("a", &PostParams::default(), &f).await.unwrap();
    let mut s2 = second;
    s2.data = Some([("k".to_string(), "2".to_string())].into());
    let s = api_status(
        api.replace("a", &PostParams::default(), &s2)
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message.contains("the object has been modified"),
        "{}",
        s.message
    );
    // A patch carrying a stale resourceVersion conflicts too.
    let p = json!({"metadata": {"resourceVersion": first.resource_version().unwrap()}, "data": {"k": "3"}});
    let s = api_status(
        api.patch("a", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 409);
    // Missing namespace is NotFound.
    let other: Api<ConfigMap> = Api::namespaced(emu.client().unwrap(), "nope");
    let s = api_status(
        other
            .create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 404);
}

#[tokio::test]
async fn status_subresource_is_split_and_generation_tracks_spec() {
    let (_emu, client) = start_with_widgets().await;
    let api: Api<Widget> = Api::default_namespaced(client);
    let mut w = widget("w", "S");
    w.status = Some(WidgetStatus {
        ready: Some(true),
        observed_generation: None,
    });
    let created = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.status, None, "status is dropped on create");
    assert_eq!(
        created.spec.color.as_deref(),
        Some("blue"),
        "schema default applied"
    );
    let st = json!({"status": {"ready": true, "observedGeneration": 1}});
    let after = api
        .patch_status("w", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
    assert_eq!(after.status.as_ref().unwrap().ready, Some(true));
    assert_eq!(
        after.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );
    // Status on the main resource is ignored.
    let p = json!({"status": {"ready": false}, "metadata": {"labels": {"a": "b"}}});
    let after = api
        .patch("w", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(after.status.as_ref().unwrap().ready, Some(true));
    assert_eq!(
        after.metadata.generation,
        Some(1),
        "metadata writes do not bump generation"
    );
    // Spec on the status subresource is ignored.
    let p = json!({"spec": {"size": "L"}, "status": {"ready": false}});
    let after = api
        .patch_status("w", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(after.spec.size, "S");
    assert_eq!(after.status.as_ref().unwrap().ready, Some(false));
    let p = json!({"spec": {"size": "M"}});
    let after = api
        .patch("w", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(after.metadata.generation, Some(2));
    let got = api.get_status("w").await.unwrap();
    assert_eq!(got.spec.size, "M");
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_emu, client) = start_with_widgets().await;
    let api: Api<Widget> = Api::default_namespaced(client);
    let mut w = widget("w", "S");
    w.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let got = api.get("w").await.unwrap();
    assert!(got.metadata.deletion_timestamp.is_some());
    // A second delete is a no-op that keeps the object.
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let p = json!({"metadata": {"finalizers": ["example.com/hold", "new"]}});
    let s = api_status(
        api.patch("w", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    let p = json!({"metadata": {"finalizers": null}});
    api.patch("w", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(api_status(api.get("w").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn namespace_deletion_cascades() {
    let (emu, client) = start_with_widgets().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    cms.create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    let ws: Api<Widget> = Api::namespaced(client.clone(), "team");
    let mut w = widget("w", "S");
    w.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    ws.create(&PostParams::default(), &w).await.unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_status(cms.get("c").await.unwrap_err()).code, 404);
    assert!(ws
        .get("w")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());
    let live = nss.get("team").await.unwrap();
    assert_eq!(live.status.unwrap().phase.as_deref(), Some("Terminating"));
    let s = api_status(
        cms.create(&PostParams::default(), &cm("d", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    let p = json!({"metadata": {"finalizers": null}});
    ws.patch("w", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(api_status(nss.get("team").await.unwrap_err()).code, 404);
    drop(emu);
}

#[tokio::test]
async fn selectors_and_pagination() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    for i in 0..25 {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        let mut labels = json!({"tier": tier, "n": i.to_string()});
        if i % 5 == 0 {
            labels["five"] = json!("yes");
        }
        api.create(&PostParams::default(), &cm(&format!("c{i:02}"), labels))
            .await
            .unwrap();
    }
    let count = |sel: &'static str| {
        let api = api.clone();
        async move {
            api.list(&ListParams::default().labels(sel))
                .await
                .unwrap()
                .items
                .len()
        }
    };
    assert_eq!(count("tier=even").await, 13);
    assert_eq!(count("tier!=even").await, 12);
    assert_eq!(count("n in (1,2,3)").await, 3);
    assert_eq!(count("tier=odd,n notin (1,3)").await, 10);
    assert_eq!(count("five").await, 5);
    assert_eq!(count("!five").await, 20);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=c07"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let by_ns = api
        .list(&ListParams::default().fields("metadata.namespace!=default"))
        .await
        .unwrap();
    assert!(by_ns.items.is_empty());
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(10);
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        names.extend(page.items.iter().map(|c| c.name_any()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = ListParams::default().limit(10).continue_token(&c),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names.len(), 25);
    assert_eq!(names[0], "c00");
    assert_eq!(names[24], "c24");
    let s = api_status(
        api.list(&ListParams::default().labels("a b"))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 400);
}

#[tokio::test]
async fn crd_schema_prunes_defaults_and_validates() {
    let (_emu, client) = start_with_widgets().await;
    let api: Api<kube::api::DynamicObject> =
        Api::default_namespaced_with(client, &kube::api::ApiResource::erase::<Widget>(&()));
    let obj = |spec: serde_json::Value| -> kube::api::DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": spec, "junk": 1}))
        .unwrap()
    };
    let created = api
        .create(
            &PostParams::default(),
            &obj(json!({"size": "M", "unknown": 1, "extra": {"free": {"x": 1}}})),
        )
        .await
        .unwrap();
    let spec = &created.data["spec"];
    assert_eq!(spec["color"], "blue");
    assert!(spec.get("unknown").is_none(), "unknown fields are pruned");
    assert!(created.data.get("junk").is_none());
    assert_eq!(
        spec["extra"]["free"]["x"], 1,
        "preserve-unknown-fields keeps data"
    );
    let s = api_status(
        api.create(&PostParams::default(), &obj(json!({"size": "XL"})))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message.contains("spec.size: Unsupported value: \"XL\""),
        "{}",
        s.message
    );
    let s = api_status(
        api.create(&PostParams::default(), &obj(json!({"color": "red"})))
            .await
            .unwrap_err(),
    );
    assert!(
        s.message.contains("spec.size: Required value"),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn dry_run_validates_and_stores_nothing() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    let rv0 = emu.resource_version();
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let out = api.create(&pp, &cm("a", json!({}))).await.unwrap();
    assert_eq!(out.name_any(), "a");
    assert_eq!(api_status(api.get("a").await.unwrap_err()).code, 404);
    assert_eq!(emu.resource_version(), rv0);
    api.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let patch = json!({"data": {"k": "dry"}});
    let ppd = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let out = api.patch("a", &ppd, &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(out.data.unwrap()["k"], "dry");
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "v");
    let ssa = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"x": "1"}});
    let ppa = PatchParams::apply("t").dry_run();
    api.patch("b", &ppa, &Patch::Apply(&ssa)).await.unwrap();
    assert_eq!(api_status(api.get("b").await.unwrap_err()).code, 404);
    let dp = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    api.delete("a", &dp).await.unwrap();
    assert!(api.get("a").await.is_ok());
    // Dry-run still validates.
    let s = api_status(api.create(&pp, &cm("a", json!({}))).await.unwrap_err());
    assert_eq!(s.code, 409);
}

#[tokio::test]
async fn serves_https_with_a_trusted_generated_ca() {
    let emu = kube_emu::Emulator::start(kube_emu::Options {
        tls: true,
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(emu.url().starts_with("https://127.0.0.1:"));
    assert!(emu
        .kubeconfig_yaml()
        .contains("certificate-authority-data: "));
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    api.create(&PostParams::default(), &cm("tls", json!({})))
        .await
        .unwrap();
    assert_eq!(api.get("tls").await.unwrap().name_any(), "tls");
    emu.shutdown().await;
}

#[tokio::test]
async fn delete_collection_and_metadata_only_reads() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    for (i, tier) in ["a", "a", "b"].iter().enumerate() {
        api.create(
            &PostParams::default(),
            &cm(&format!("c{i}"), json!({"tier": tier})),
        )
        .await
        .unwrap();
    }
    let metas = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(metas.items.len(), 3);
    assert_eq!(metas.items[0].metadata.name.as_deref(), Some("c0"));
    let one = api.get_metadata("c2").await.unwrap();
    assert_eq!(one.metadata.labels.unwrap()["tier"], "b");
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("tier=a"),
    )
    .await
    .unwrap();
    let left: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(left, ["c2"]);
}

#[tokio::test]
async fn malformed_bodies_are_rejected_not_fatal() {
    let emu = start().await;
    let client = emu.client().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let bad = [json!({"metadata": "x"}), json!({"metadata": {"labels": 1}})];
    for p in bad {
        let e = api
            .patch("a", &PatchParams::default(), &Patch::Merge(&p))
            .await
            .unwrap_err();
        assert!(matches!(api_status(e).code, 400 | 422));
    }
    let e = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "replace", "path": "", "value": 3}])).unwrap(),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(api_status(e).code, 422);
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let e = nss
        .patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": "nope"})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_status(e).code, 422);
    // The server is still alive.
    assert!(api.get("a").await.is_ok());
}

/// Issue 30: kube-rs clients keep sending JSON and keep working next to kubectl 1.37's protobuf
/// bodies: `Api<Namespace>` create, merge patch, server-side apply and delete.
#[tokio::test]
async fn kube_rs_namespace_create_patch_delete_still_json() {
    let emu = start().await;
    let nss: Api<Namespace> = Api::all(emu.client().unwrap());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "prod"}})).unwrap();
    let created = nss.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(created.name_any(), "prod");
    let patched = nss
        .patch(
            "prod",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.labels().get("team").map(String::as_str), Some("a"));
    let applied = nss
        .patch(
            "prod",
            &PatchParams::apply("test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "prod", "annotations": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        applied.annotations().get("a").map(String::as_str),
        Some("b")
    );
    nss.delete("prod", &DeleteParams::default()).await.unwrap();
    let gone = nss.get_opt("prod").await.unwrap();
    assert!(
        gone.is_none_or(|n| n.metadata.deletion_timestamp.is_some()),
        "deleted or terminating"
    );
    emu.shutdown().await;
}

/// The `scale` subresource through kube-rs (the autoscaling/v1 `Scale` client): the view of a
/// Deployment, a patch and a replace that change only the parent's replicas, the resourceVersion
/// precondition, a refused negative count, a kind without the subresource, and a custom resource
/// whose CRD declares `subresources.scale`.
#[tokio::test]
async fn the_scale_subresource_reads_and_writes_the_parents_replicas() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v1::Scale;
    let emu = start().await;
    let client = emu.client().unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2,
                 "selector": {"matchLabels": {"app": "web"},
                              "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                 "template": {"metadata": {"labels": {"app": "web", "tier": "a"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let s = deployments.get_scale("web").await.unwrap();
    assert_eq!(s.metadata.uid, created.metadata.uid);
    assert_eq!(
        s.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(s.spec.as_ref().unwrap().replicas, Some(2));
    let status = s.status.clone().unwrap();
    assert_eq!(status.replicas, 0);
    assert_eq!(status.selector.as_deref(), Some("app=web,tier in (a,b)"));

    // A merge patch of the Scale changes the Deployment's replicas and nothing else.
    let patched = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(5));
    let after = deployments.get("web").await.unwrap();
    assert_eq!(after.spec.replicas, Some(5));
    assert_eq!(after.metadata.generation, Some(2), "a spec change");
    assert_eq!(after.spec.template, created.spec.template);

    // A replace carrying a stale resourceVersion is a conflict; a fresh one goes through.
    let mut stale: Scale = s.clone();
    stale.spec.as_mut().unwrap().replicas = Some(1);
    let e = api_status(
        deployments
            .replace_scale("web", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409, "{e:?}");
    let mut fresh = deployments.get_scale("web").await.unwrap();
    fresh.spec.as_mut().unwrap().replicas = Some(1);
    let replaced = deployments
        .replace_scale("web", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().replicas, Some(1));

    let e = api_status(
        deployments
            .patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": -1}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
    assert_eq!(
        deployments.get("web").await.unwrap().spec.replicas,
        Some(1),
        "a refused write changes nothing"
    );

    // ConfigMaps have no scale subresource.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    assert_eq!(api_status(cms.get_scale("c").await.unwrap_err()).code, 404);

    // A custom resource whose CRD declares the subresource, with its own paths.
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget"});
    crd["spec"]["versions"][0]["subresources"] = json!({"status": {}, "scale": {
        "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.count"}});
    crd["spec"]["versions"][0]["schema"] = json!({"openAPIV3Schema": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}});
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let ar = kube::discovery::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let gadgets: Api<kube::api::DynamicObject> = Api::default_namespaced_with(client.clone(), &ar);
    let g: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"size": 2}
    }))
    .unwrap();
    gadgets.create(&PostParams::default(), &g).await.unwrap();
    let s = gadgets.get_scale("g").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(2));
    gadgets
        .patch_scale(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    let g = gadgets.get("g").await.unwrap();
    assert_eq!(g.data["spec"]["size"], 7);
}
