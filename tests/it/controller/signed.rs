//! Issue 41 item 3 through the reconcilers, on the real kernel, the real registry and kube-emu:
//! a ModuleInstance whose `spec.verify` is not satisfied is `Ready=False VerificationFailed`
//! naming the module and why, with nothing rendered or applied; a Platform whose `spec.verify`
//! is not satisfied by its catalogs is not built, and once it is, its policy holds every
//! instance's module to it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use crds::conditions::types;
use crds::k8s_openapi::api::apps::v1::Deployment;
use crds::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use crds::k8s_openapi::ByteString;
use crds::module_instance::ModuleInstance;
use kube::api::{Patch, PatchParams};
use kube::Api;
use opm_operator::controller::{instance, platform};
use opm_operator::registry::sign;
use p256::ecdsa::SigningKey;

use super::common::*;
use super::real::*;

const NS: &str = "signed";

fn key(seed: u8) -> SigningKey {
    SigningKey::from_slice(&[seed; 32]).unwrap()
}

/// The Secret `name` in `ns` holding `k`'s public key as `cosign.pub`.
async fn key_secret(r: &Real, ns: &str, name: &str, k: &SigningKey) {
    let mut data = BTreeMap::new();
    data.insert(
        "cosign.pub".to_owned(),
        ByteString(sign::public_key_pem(k).unwrap().into_bytes()),
    );
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    create(&Api::<Secret>::namespaced(r.client.clone(), ns), s).await;
}

/// Signs `path@v0.1.0` in the test registry with `k` (off the async runtime).
async fn sign_module(r: &Real, path: &str, k: &SigningKey) {
    let client = r.reg.client(None);
    let m = cue::module::ModuleVersion {
        path: path.to_owned(),
        version: "v0.1.0".to_owned(),
    };
    let k = k.clone();
    tokio::task::spawn_blocking(move || client.sign_module(&m, &k).unwrap())
        .await
        .unwrap();
}

fn instances(r: &Real) -> Api<ModuleInstance> {
    Api::namespaced(r.client.clone(), NS)
}

async fn ready(r: &Real, name: &str) -> (String, String, String) {
    let s = instances(r)
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    condition(&s.conditions, types::READY).unwrap()
}

async fn demo(r: &Real, name: &str, secret: Option<&str>) {
    let values: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate::platform::gen::opm("values").join("valid.json")).unwrap(),
    )
    .unwrap();
    let mut mi = ModuleInstance::test()
        .named(NS, name)
        .with_module(DEMO, "v0.1.0")
        .with_values(values);
    if let Some(s) = secret {
        mi = mi.with_verify(s);
    }
    create(&instances(r), mi).await;
    // Finalizer, then the render.
    instance::reconcile(NS, name, &r.ctx).await.unwrap();
    instance::reconcile(NS, name, &r.ctx).await.unwrap();
}

fn cms(r: &Real) -> Api<ConfigMap> {
    Api::namespaced(r.client.clone(), NS)
}

/// Nothing of the demo module was applied in `NS`.
async fn nothing_applied(r: &Real) {
    let cms = cms(r).list(&Default::default()).await.unwrap();
    assert!(
        cms.items
            .iter()
            .all(|c| c.metadata.name.as_deref() != Some("settings")),
        "settings was applied"
    );
    let deps = Api::<Deployment>::namespaced(r.client.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap();
    assert!(deps.items.is_empty(), "a Deployment was applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_requiring_a_signature_renders_only_a_module_signed_with_its_keys() {
    let r = rendering(|_| {}).await;
    namespace(&r.client, NS).await;
    record(&r, &[(MINI, None)]).await;
    let (a, b) = (key(11), key(12));
    key_secret(&r, NS, "keys-a", &a).await;
    key_secret(&r, NS, "keys-b", &b).await;

    // Unsigned: refused, nothing applied.
    demo(&r, "unsigned", Some("keys-a")).await;
    let (s, reason, message) = ready(&r, "unsigned").await;
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("False", "VerificationFailed")
    );
    assert!(
        message.contains("fixtures.test/modules/demo@v0.1.0") && message.contains("not signed"),
        "{message}"
    );
    nothing_applied(&r).await;

    // Signed with A; the instance trusting only B is refused.
    sign_module(&r, DEMO, &a).await;
    demo(&r, "wrong-key", Some("keys-b")).await;
    let (_, reason, message) = ready(&r, "wrong-key").await;
    assert_eq!(reason, "VerificationFailed", "{message}");
    assert!(
        message.contains("not made by any trusted key") && message.contains("Secret signed/keys-b"),
        "{message}"
    );
    nothing_applied(&r).await;

    // A missing Secret is named.
    demo(&r, "no-secret", Some("absent")).await;
    let (_, reason, message) = ready(&r, "no-secret").await;
    assert_eq!(reason, "VerificationFailed");
    assert!(message.contains("Secret signed/absent"), "{message}");

    // The instance trusting A renders and applies.
    instance::reconcile(NS, "unsigned", &r.ctx).await.unwrap();
    let (s, reason, message) = ready(&r, "unsigned").await;
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("True", "ReconciliationSucceeded"),
        "{message}"
    );
    assert!(cms(&r).get_opt("settings").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_requiring_signatures_builds_only_on_signed_catalogs_and_holds_every_module() {
    let r = rendering(|_| {}).await;
    namespace(&r.client, NS).await;
    namespace(&r.client, "opm-system").await;
    let a = key(21);
    key_secret(&r, "opm-system", "platform-keys", &a).await;
    let plat = plat(&[(MINI, None)]).with_verify("platform-keys");
    create(&platforms(&r.client), plat).await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    let st = platforms(&r.client)
        .get("cluster")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    let (s, reason, message) = condition(&st.conditions, types::READY).unwrap();
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("False", "VerificationFailed")
    );
    assert!(message.contains("not signed"), "{message}");
    assert!(r.ctx.store.generated().is_none(), "nothing was recorded");

    // Sign what the platform is built from; the next reconcile records it.
    for m in [CORE, KUBE, MINI] {
        sign_module(&r, m, &a).await;
    }
    platforms(&r.client)
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"x": "1"}}})),
        )
        .await
        .unwrap();
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    let st = platforms(&r.client)
        .get("cluster")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    let (s, reason, message) = condition(&st.conditions, types::READY).unwrap();
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("True", "Generated"),
        "{message}"
    );

    // An instance without a policy of its own is held to the Platform's: demo is unsigned.
    demo(&r, "plain", None).await;
    let (_, reason, message) = ready(&r, "plain").await;
    assert_eq!(reason, "VerificationFailed", "{message}");
    assert!(
        message.contains("fixtures.test/modules/demo@v0.1.0") && message.contains("not signed"),
        "{message}"
    );
    nothing_applied(&r).await;
    sign_module(&r, DEMO, &a).await;
    instance::reconcile(NS, "plain", &r.ctx).await.unwrap();
    let (s, reason, message) = ready(&r, "plain").await;
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("True", "ReconciliationSucceeded"),
        "{message}"
    );
    assert!(cms(&r).get_opt("settings").await.unwrap().is_some());
}
