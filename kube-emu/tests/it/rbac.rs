//! Impersonation, bearer tokens, RBAC, TokenReview and SubjectAccessReview.

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_emu::UserInfo;
use serde_json::json;

use crate::common::*;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn impersonated_writes_are_authorised_by_rbac() {
    let emu = start().await;
    let admin = emu.client().unwrap();
    let alice: Api<ConfigMap> = Api::default_namespaced(emu.client_as("alice", &["devs"]).unwrap());
    let s = api_status(
        alice
            .create(&PostParams::default(), &cm("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "cm-writer"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}]}))
    .unwrap();
    Api::<Role>::default_namespaced(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let rb: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "devs-write"},
        "subjects": [{"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "cm-writer", "apiGroup": "rbac.authorization.k8s.io"}}))
    .unwrap();
    Api::<RoleBinding>::default_namespaced(admin.clone())
        .create(&PostParams::default(), &rb)
        .await
        .unwrap();
    alice
        .create(&PostParams::default(), &cm("a"))
        .await
        .unwrap();
    assert!(alice.get("a").await.is_ok());
    let s = api_status(
        alice
            .delete("a", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 403);
    assert!(
        s.message.contains("configmaps \"a\" is forbidden"),
        "{}",
        s.message
    );
    // Another namespace is not covered by the RoleBinding.
    let other: Api<ConfigMap> =
        Api::namespaced(emu.client_as("alice", &["devs"]).unwrap(), "kube-system");
    assert_eq!(
        api_status(other.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
    // A user without the group is still forbidden.
    let bob: Api<ConfigMap> = Api::default_namespaced(emu.client_as("bob", &[]).unwrap());
    assert_eq!(api_status(bob.get("a").await.unwrap_err()).code, 403);
}

#[tokio::test]
async fn tokens_token_review_and_subject_access_review() {
    let emu = start().await;
    let admin = emu.client().unwrap();
    emu.add_token(
        "tok-carol",
        UserInfo {
            username: "carol".into(),
            groups: vec!["readers".into()],
            uid: "u1".into(),
        },
    );
    let cr: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "read-cm"},
        "rules": [{"apiGroups": ["*"], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]})).unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &cr)
        .await
        .unwrap();
    let crb: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "readers"},
        "subjects": [{"kind": "Group", "name": "readers"}],
        "roleRef": {"kind": "ClusterRole", "name": "read-cm", "apiGroup": "rbac.authorization.k8s.io"}})).unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &crb)
        .await
        .unwrap();
    let carol: Api<ConfigMap> = Api::all(emu.client_with_token("tok-carol").unwrap());
    assert!(carol.list(&ListParams::default()).await.is_ok());
    let carol_ns: Api<ConfigMap> =
        Api::default_namespaced(emu.client_with_token("tok-carol").unwrap());
    assert_eq!(
        api_status(
            carol_ns
                .create(&PostParams::default(), &cm("x"))
                .await
                .unwrap_err()
        )
        .code,
        403
    );
    let bad: Api<ConfigMap> = Api::all(emu.client_with_token("nope").unwrap());
    assert_eq!(
        api_status(bad.list(&ListParams::default()).await.unwrap_err()).code,
        401
    );

    let tr: TokenReview = serde_json::from_value(json!({"spec": {"token": "tok-carol"}})).unwrap();
    let out = Api::<TokenReview>::all(admin.clone())
        .create(&PostParams::default(), &tr)
        .await
        .unwrap();
    let st = out.status.unwrap();
    assert_eq!(st.authenticated, Some(true));
    assert_eq!(st.user.unwrap().username.as_deref(), Some("carol"));
    let tr: TokenReview = serde_json::from_value(json!({"spec": {"token": "wrong"}})).unwrap();
    let out = Api::<TokenReview>::all(admin.clone())
        .create(&PostParams::default(), &tr)
        .await
        .unwrap();
    assert_eq!(out.status.unwrap().authenticated, Some(false));

    let sar = |verb: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": {"user": "carol", "groups": ["readers"],
            "resourceAttributes": {"namespace": "default", "verb": verb, "resource": "configmaps"}}})).unwrap()
    };
    let sars = Api::<SubjectAccessReview>::all(admin);
    assert!(
        sars.create(&PostParams::default(), &sar("list"))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
    assert!(
        !sars
            .create(&PostParams::default(), &sar("delete"))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
}
