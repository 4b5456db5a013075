//! Service-account tokens from TokenRequest, impersonation authorized per kind of identity,
//! and the audit log.

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_emu::{Emulator, Options, UserInfo};
use serde_json::{json, Value};

use crate::common::*;

async fn create<K>(api: &Api<K>, v: Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

/// Grants `verbs` on `resources` (core group) in `ns` to a subject through a Role and RoleBinding.
async fn grant(admin: &kube::Client, ns: &str, name: &str, subject: Value, rules: Value) {
    create(
        &Api::<Role>::namespaced(admin.clone(), ns),
        json!({"metadata": {"name": name}, "rules": rules}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), ns),
        json!({"metadata": {"name": name}, "subjects": [subject],
               "roleRef": {"kind": "Role", "name": name, "apiGroup": "rbac.authorization.k8s.io"}}),
    )
    .await;
}

/// POSTs a TokenRequest for `ns/sa` with `client`: (HTTP status, body).
async fn request_token(client: &kube::Client, ns: &str, sa: &str, spec: Value) -> (u16, Value) {
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let req = http::Request::post(format!(
        "/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&body).unwrap())
    .unwrap();
    raw(client, req).await
}

/// Sends a request; returns the status code and the JSON body.
async fn raw(client: &kube::Client, req: http::Request<Vec<u8>>) -> (u16, Value) {
    let resp = client
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn sa_subject(ns: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": ns})
}

#[tokio::test]
async fn token_request_issues_a_service_account_token_that_rbac_applies_to() {
    let emu = start().await;
    let admin = emu.client().unwrap();
    let (code, body) = request_token(&admin, "default", "op", json!({})).await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["message"], "serviceaccounts \"op\" not found");
    create(
        &Api::<ServiceAccount>::default_namespaced(admin.clone()),
        json!({"metadata": {"name": "op"}}),
    )
    .await;
    let (code, body) =
        request_token(&admin, "default", "op", json!({"expirationSeconds": 60})).await;
    assert_eq!(code, 422, "{body}");
    let (code, tr) = request_token(&admin, "default", "op", json!({})).await;
    assert_eq!(code, 201, "{tr}");
    assert_eq!(tr["kind"], "TokenRequest");
    assert_eq!(tr["spec"]["expirationSeconds"], 3600);
    assert_eq!(
        tr["spec"]["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert!(tr["status"]["expirationTimestamp"].is_string());
    let token = tr["status"]["token"].as_str().unwrap().to_string();
    assert_eq!(token.split('.').count(), 3, "JWT-shaped: {token}");

    // The token is the service account, and RBAC applies to it.
    let op = emu.client_with_token(&token).unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(op.clone());
    let s = api_status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        s.message,
        "configmaps is forbidden: User \"system:serviceaccount:default:op\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    grant(
        &admin,
        "default",
        "op-read",
        sa_subject("default", "op"),
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
    )
    .await;
    cms.list(&ListParams::default()).await.unwrap();
    // The groups of a service account are bound too.
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "sa-reader"},
               "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"]}]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "sa-reader"},
               "subjects": [{"kind": "Group", "name": "system:serviceaccounts:default", "apiGroup": "rbac.authorization.k8s.io"}],
               "roleRef": {"kind": "ClusterRole", "name": "sa-reader", "apiGroup": "rbac.authorization.k8s.io"}}),
    )
    .await;
    Api::<ServiceAccount>::default_namespaced(op.clone())
        .get("op")
        .await
        .unwrap();

    // TokenReview knows it.
    let review: TokenReview = serde_json::from_value(json!({"spec": {"token": token}})).unwrap();
    let r = Api::<TokenReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let status = r.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:op")
    );
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ]
    );
    let sa = Api::<ServiceAccount>::default_namespaced(admin.clone())
        .get("op")
        .await
        .unwrap();
    assert_eq!(user.uid, sa.metadata.uid);

    // Creating a token is itself authorized: create on serviceaccounts/token.
    let (code, body) = request_token(&op, "default", "op", json!({})).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "serviceaccounts \"op\" is forbidden: User \"system:serviceaccount:default:op\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"default\""
    );
    grant(
        &admin,
        "default",
        "op-token",
        sa_subject("default", "op"),
        json!([{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"], "resourceNames": ["op"]}]),
    )
    .await;
    let (code, body) = request_token(&op, "default", "op", json!({})).await;
    assert_eq!(code, 201, "{body}");

    // Deleting the service account ends its tokens.
    Api::<ServiceAccount>::default_namespaced(admin.clone())
        .delete("op", &DeleteParams::default())
        .await
        .unwrap();
    let e = cms.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_status(e).code, 401);
}

/// A request as `bob` (static token) with impersonation headers: (status, body).
async fn as_bob(emu: &Emulator, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let bob = emu.client_with_token("bob-token").unwrap();
    let mut req = http::Request::get(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    raw(&bob, req.body(Vec::new()).unwrap()).await
}

#[tokio::test]
async fn impersonation_is_authorized_per_kind_of_identity() {
    let emu = Emulator::start(Options {
        tokens: [(
            "bob-token".to_string(),
            UserInfo {
                username: "bob".into(),
                groups: vec!["system:authenticated".into()],
                uid: String::new(),
            },
        )]
        .into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let admin = emu.client().unwrap();
    let cms = "/api/v1/namespaces/team/configmaps";
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    create(&ns, json!({"metadata": {"name": "team"}})).await;
    // The impersonated service account (groups implied) may list configmaps in team.
    grant(
        &admin,
        "team",
        "sa-group-read",
        json!({"kind": "Group", "name": "system:serviceaccounts:team", "apiGroup": "rbac.authorization.k8s.io"}),
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
    )
    .await;
    let sa = [("Impersonate-User", "system:serviceaccount:team:op")];
    let (code, body) = as_bob(&emu, cms, &sa).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "serviceaccounts \"op\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"team\""
    );
    // `impersonate` on users does not cover service accounts.
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "imp-users"},
               "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "bob-imp-users"},
               "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}],
               "roleRef": {"kind": "ClusterRole", "name": "imp-users", "apiGroup": "rbac.authorization.k8s.io"}}),
    )
    .await;
    assert_eq!(as_bob(&emu, cms, &sa).await.0, 403);
    grant(
        &admin,
        "team",
        "bob-imp-sa",
        json!({"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}),
        json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"], "resourceNames": ["op"]}]),
    )
    .await;
    let (code, body) = as_bob(&emu, cms, &sa).await;
    assert_eq!(code, 200, "{body}");
    // Another service account of the namespace is not covered by resourceNames.
    let other = [("Impersonate-User", "system:serviceaccount:team:other")];
    assert_eq!(as_bob(&emu, cms, &other).await.0, 403);
    // A plain user is checked on users (granted above); it lacks the service-account groups.
    let (code, body) = as_bob(&emu, cms, &[("Impersonate-User", "alice")]).await;
    assert_eq!(code, 403);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("User \"alice\" cannot list"),
        "{body}"
    );
    // Each group needs impersonate on groups; then the groups replace the implied ones.
    let with_group = [
        ("Impersonate-User", "system:serviceaccount:team:op"),
        ("Impersonate-Group", "devs"),
    ];
    let (code, body) = as_bob(&emu, cms, &with_group).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "groups \"devs\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
    );
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": "imp-groups-uids"},
               "rules": [{"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"]},
                         {"apiGroups": ["authentication.k8s.io"], "resources": ["uids"], "verbs": ["impersonate"], "resourceNames": ["u-1"]}]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "bob-imp-groups"},
               "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}],
               "roleRef": {"kind": "ClusterRole", "name": "imp-groups-uids", "apiGroup": "rbac.authorization.k8s.io"}}),
    )
    .await;
    let (code, body) = as_bob(&emu, cms, &with_group).await;
    assert_eq!(code, 403, "devs has no grant: {body}");
    // A uid needs impersonate on uids in authentication.k8s.io (u-1 only).
    let with_uid = |uid| {
        [
            ("Impersonate-User", "system:serviceaccount:team:op"),
            ("Impersonate-Uid", uid),
        ]
    };
    assert_eq!(as_bob(&emu, cms, &with_uid("u-1")).await.0, 200);
    let (code, body) = as_bob(&emu, cms, &with_uid("u-2")).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "uids.authentication.k8s.io \"u-2\" is forbidden: User \"bob\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope"
    );
    // Groups without a user are a bad request.
    let (code, _) = as_bob(&emu, cms, &[("Impersonate-Group", "devs")]).await;
    assert_eq!(code, 400);
}

/// The audit log's events, one per line.
fn audit_events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn the_audit_log_has_one_event_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let emu = Emulator::start(Options {
        audit_log: Some(log.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    let admin = emu.client().unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(admin.clone());
    create(&cms, json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).await;
    cms.get("a").await.unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    // A watch is recorded when it starts.
    let watch =
        http::Request::get("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1")
            .body(Vec::new())
            .unwrap();
    let _ = raw(&admin, watch).await;
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let alice: Api<ConfigMap> = Api::default_namespaced(emu.client_as("alice", &["devs"]).unwrap());
    assert_eq!(api_status(alice.get("a").await.unwrap_err()).code, 403);
    let _ = raw(
        &admin,
        http::Request::get("/version").body(Vec::new()).unwrap(),
    )
    .await;

    let evs = audit_events(&log);
    for e in &evs {
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(e["kind"], "Event");
        assert_eq!(e["level"], "Metadata");
        assert_eq!(e["stage"], "ResponseComplete");
        assert!(e["auditID"].is_string() && e["stageTimestamp"].is_string());
    }
    let summary: Vec<(String, String, u64)> = evs
        .iter()
        .map(|e| {
            (
                e["verb"].as_str().unwrap().to_string(),
                e["objectRef"]["resource"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                e["responseStatus"]["code"].as_u64().unwrap(),
            )
        })
        .collect();
    let expect = [
        ("create", "configmaps", 201),
        ("get", "configmaps", 200),
        ("list", "configmaps", 200),
        ("watch", "configmaps", 200),
        ("delete", "configmaps", 200),
        ("get", "configmaps", 403),
        ("get", "", 200),
    ];
    let expect: Vec<(String, String, u64)> = expect
        .iter()
        .map(|(v, r, c)| (v.to_string(), r.to_string(), *c))
        .collect();
    assert_eq!(summary, expect);
    assert_eq!(
        evs[0]["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "name": "a", "apiVersion": "v1"})
    );
    assert_eq!(evs[0]["user"]["username"], "kube-emu-admin");
    assert!(evs[0].get("impersonatedUser").is_none());
    assert_eq!(
        evs[3]["requestURI"],
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
    );
    assert_eq!(
        evs[5]["impersonatedUser"],
        json!({"username": "alice", "groups": ["devs", "system:authenticated"]})
    );
    assert_eq!(evs[5]["user"]["username"], "kube-emu-admin");
    assert_eq!(evs[6]["requestURI"], "/version");
    assert!(evs[6].get("objectRef").is_none());
    emu.shutdown().await;
}
