//! Issue 40 item 6: remote clusters (`spec.kubeConfig.secretRef`), with two kube-emu clusters in
//! this process (the management cluster the instance lives on, and the remote one): render here;
//! apply, drift, prune, health and deletion there, as the ServiceAccount there; an unusable
//! kubeconfig (missing, invalid, refused); clients cached per Secret version; a change of target
//! that orphans the old inventory instead of pruning it anywhere. The cluster that stops
//! answering is `remote_real` (real processes). `kubectl explain` of the new fields, with both
//! kubectl versions, is here too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crds::conditions::{reasons, types};
use crds::k8s_openapi::api::core::v1::Secret;
use crds::k8s_openapi::ByteString;
use crds::kube_config::{KubeConfigReference, SecretKeyReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use opm_operator::controller::remote::REMOTE_HEALTH_POLL;
use serde_json::json;

use super::common::*;
use super::rendered::*;
use crate::kubectls::{self, Version};

/// A kubeconfig for `url` without credentials (kube-emu takes an unauthenticated request as its
/// admin, and the file stays valid across a restart of the emulator).
pub fn kubeconfig_for(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: remote\ncontexts:\n- name: remote\n  context: {{cluster: remote, user: admin}}\nclusters:\n- name: remote\n  cluster: {{server: '{url}'}}\nusers:\n- name: admin\n  user: {{}}\n"
    )
}

/// Writes Secret `NS/name` with `key: text` on `client`'s cluster (created or replaced).
pub async fn kubeconfig_secret(client: &kube::Client, name: &str, key: &str, text: &str) {
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            key.to_owned(),
            ByteString(text.as_bytes().to_vec()),
        )])),
        ..Default::default()
    };
    match api.get_opt(name).await.unwrap() {
        None => {
            api.create(&PostParams::default(), &secret).await.unwrap();
        }
        Some(_) => {
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {key: secret.data.unwrap()[key]}})),
            )
            .await
            .unwrap();
        }
    }
}

/// `spec.kubeConfig` naming Secret `name` (default key).
pub fn kube_config(name: &str) -> Option<KubeConfigReference> {
    Some(KubeConfigReference {
        secret_ref: SecretKeyReference {
            name: name.into(),
            key: None,
        },
    })
}

/// A second cluster (workloads simulated at once) with namespace `NS`.
pub async fn remote_cluster() -> (kube_emu::Emulator, kube::Client) {
    let emu = kube_emu::Emulator::start(kube_emu::Options {
        workloads: Some(kube_emu::simulate::Workloads::immediate()),
        ..kube_emu::Options::default()
    })
    .await
    .unwrap();
    let client = emu.client().unwrap();
    namespace(&client, NS).await;
    (emu, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_after_the_render_happens_on_the_remote_cluster_as_its_service_account() {
    let m = mi_env(
        vec![
            config_map("settings", json!({})),
            deployment("web", "web", json!({})),
        ],
        |_| {},
    )
    .await;
    let (remote, rc) = remote_cluster().await;
    // The ServiceAccount and its rights exist there only.
    service_account(&rc, NS, "deployer").await;
    role(
        &rc,
        NS,
        "deployer",
        &[("", "configmaps"), ("apps", "deployments")],
        &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
    )
    .await;
    bind(
        &rc,
        NS,
        "deployer",
        "deployer",
        "User",
        "system:serviceaccount:team-a:deployer",
    )
    .await;
    // The Flux/Cluster API key `value.yaml` is read when `value` is absent.
    kubeconfig_secret(
        &m.env.client,
        "remote-kc",
        "value.yaml",
        &kubeconfig_for(remote.url()),
    )
    .await;
    m.create("web", |mi| {
        mi.spec.kube_config = kube_config("remote-kc");
        mi.spec.service_account_name = Some("deployer".into());
    })
    .await;
    let out = m
        .until_reason("web", reasons::RECONCILIATION_SUCCEEDED, 20)
        .await;
    // Ready on a remote cluster: polled (no workload watch there).
    assert_eq!(out.requeue, Some(REMOTE_HEALTH_POLL), "{out:?}");
    let applied = live(&rc, CONFIG_MAP, "settings").await.unwrap();
    assert_eq!(
        applied["metadata"]["labels"]["module-instance.opmodel.dev/name"],
        "web"
    );
    assert!(live(&rc, DEPLOYMENT, "web").await.is_some());
    assert!(live(&m.env.client, CONFIG_MAP, "settings").await.is_none());
    assert!(live(&m.env.client, DEPLOYMENT, "web").await.is_none());
    let inventory = m.status("web").await.reconcile.inventory.unwrap();
    assert_eq!(
        inventory.cluster.as_deref(),
        Some(format!("{}/", remote.url()).as_str())
    );
    assert_eq!(m.ctx.clusters.len(), 1);

    // Drift is checked there.
    Api::<crds::k8s_openapi::api::core::v1::ConfigMap>::namespaced(rc.clone(), NS)
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"msg": "by hand"}})),
        )
        .await
        .unwrap();
    m.reconcile("web").await;
    let drifted = condition(&m.status("web").await.conditions, types::DRIFTED).unwrap();
    assert_eq!(drifted.0, "True", "{drifted:?}");

    // Health is judged there: a failing rollout there fails the instance.
    Api::<crds::k8s_openapi::api::apps::v1::Deployment>::namespaced(rc.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {kube_emu::simulate::ANNOTATION: "fail"}}}),
            ),
        )
        .await
        .unwrap();
    m.set_msg("web", "2").await;
    m.until_reason("web", reasons::HEALTH_CHECK_FAILED, 20)
        .await;

    // Stale objects are pruned there, and the deletion prunes there.
    m.renderer.set(vec![deployment("web", "web", json!({}))]);
    m.set_msg("web", "3").await;
    m.reconcile("web").await;
    assert!(live(&rc, CONFIG_MAP, "settings").await.is_none());
    m.delete("web").await;
    assert!(m.instances().get_opt("web").await.unwrap().is_none());
    assert!(live(&rc, DEPLOYMENT, "web").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_account_is_looked_up_on_the_remote_cluster() {
    let m = mi_env(vec![config_map("settings", json!({}))], |_| {}).await;
    let (remote, _rc) = remote_cluster().await;
    // It exists here, not there.
    service_account(&m.env.client, NS, "deployer").await;
    kubeconfig_secret(
        &m.env.client,
        "remote-kc",
        "value",
        &kubeconfig_for(remote.url()),
    )
    .await;
    m.create("web", |mi| {
        mi.spec.kube_config = kube_config("remote-kc");
        mi.spec.service_account_name = Some("deployer".into());
    })
    .await;
    let out = m.reconcile("web").await;
    let message = assert_stalled(
        &out,
        &m.status("web").await.conditions,
        reasons::IMPERSONATION_FAILED,
    );
    assert_eq!(message, "ServiceAccount team-a/deployer not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_invalid_kubeconfig_is_reported_and_recovers() {
    let m = mi_env(vec![config_map("settings", json!({}))], |_| {}).await;
    let (remote, rc) = remote_cluster().await;
    m.create("web", |mi| mi.spec.kube_config = kube_config("remote-kc"))
        .await;

    // No Secret: Ready=False, retried with backoff (a Secret may be written later).
    let out = m.reconcile("web").await;
    assert_eq!(out.reason, Some(reasons::KUBE_CONFIG_NOT_FOUND), "{out:?}");
    assert_eq!(out.requeue, Some(Duration::from_secs(5)));
    assert_eq!(
        m.ready("web").await,
        (
            "False".into(),
            reasons::KUBE_CONFIG_NOT_FOUND.into(),
            "the kubeConfig Secret team-a/remote-kc was not found".into()
        )
    );
    assert!(condition(&m.status("web").await.conditions, types::STALLED).is_none());

    // A kubeconfig that does not parse, or that asks for an exec plugin: stalled.
    kubeconfig_secret(&m.env.client, "remote-kc", "value", "clusters: [").await;
    let out = m.reconcile("web").await;
    let message = assert_stalled(
        &out,
        &m.status("web").await.conditions,
        reasons::KUBE_CONFIG_INVALID,
    );
    assert!(
        message
            .starts_with("the kubeConfig Secret team-a/remote-kc: the kubeconfig does not parse"),
        "{message}"
    );
    let exec = kubeconfig_for(remote.url()).replace(
        "user: {}",
        "user: {exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}}",
    );
    kubeconfig_secret(&m.env.client, "remote-kc", "value", &exec).await;
    let out = m.reconcile("web").await;
    let message = assert_stalled(
        &out,
        &m.status("web").await.conditions,
        reasons::KUBE_CONFIG_INVALID,
    );
    assert!(
        message.contains("exec credential plugins are not allowed"),
        "{message}"
    );
    assert!(live(&rc, CONFIG_MAP, "settings").await.is_none());

    // A usable one: applied there.
    kubeconfig_secret(
        &m.env.client,
        "remote-kc",
        "value",
        &kubeconfig_for(remote.url()),
    )
    .await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    assert!(live(&rc, CONFIG_MAP, "settings").await.is_some());

    // The client is cached per Secret version: the same one until the Secret changes.
    let reference = kube_config("remote-kc").unwrap();
    let resolve = || {
        m.ctx
            .clusters
            .resolve(&m.env.client, &m.ctx.engine, NS, &reference)
    };
    let a = resolve().await.unwrap();
    let b = resolve().await.unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    patch_meta(
        &Api::<Secret>::namespaced(m.env.client.clone(), NS),
        "remote-kc",
        json!({"labels": {"rotated": "yes"}}),
    )
    .await;
    let c = resolve().await.unwrap();
    assert!(
        !Arc::ptr_eq(&a, &c),
        "a new Secret version builds a new client"
    );
    assert_eq!(m.ctx.clusters.len(), 1, "the old client is dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_target_orphans_the_old_inventory_and_prunes_nothing_anywhere() {
    let m = mi_env(vec![config_map("settings", json!({}))], |_| {}).await;
    let (first, fc) = remote_cluster().await;
    let (second, sc) = remote_cluster().await;
    kubeconfig_secret(
        &m.env.client,
        "remote-kc",
        "value",
        &kubeconfig_for(first.url()),
    )
    .await;
    m.create("web", |mi| mi.spec.kube_config = kube_config("remote-kc"))
        .await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    assert!(live(&fc, CONFIG_MAP, "settings").await.is_some());

    // The Secret now names another cluster; the render is the same: not a NoOp.
    kubeconfig_secret(
        &m.env.client,
        "remote-kc",
        "value",
        &kubeconfig_for(second.url()),
    )
    .await;
    let out = m.reconcile("web").await;
    assert_eq!(
        out.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED),
        "{out:?}"
    );
    assert!(live(&sc, CONFIG_MAP, "settings").await.is_some());
    assert!(
        live(&fc, CONFIG_MAP, "settings").await.is_some(),
        "left on the first cluster"
    );
    let (kind, _, note) =
        one_event(&events(&m.env.client, "web", reasons::INVENTORY_ORPHANED).await);
    assert_eq!(kind, "Warning");
    assert_eq!(
        note,
        format!(
            "1 object(s) recorded on cluster {}/ are left there (not pruned): spec.kubeConfig now targets cluster {}/",
            first.url(),
            second.url()
        )
    );
    let inventory = m.status("web").await.reconcile.inventory.unwrap();
    assert_eq!(
        inventory.cluster.as_deref(),
        Some(format!("{}/", second.url()).as_str())
    );

    // Deleting prunes on the current target only.
    m.delete("web").await;
    assert!(live(&sc, CONFIG_MAP, "settings").await.is_none());
    assert!(live(&fc, CONFIG_MAP, "settings").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_shows_health_check_exprs_and_kube_config() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, env.emu.kubeconfig_yaml()).unwrap();
    for version in [Version::V1_20, Version::V1_37] {
        let bin = kubectls::bin(version);
        let explain = |what: &str| {
            let out = std::process::Command::new(&bin)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["explain", what])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "kubectl explain {what} ({version:?}): {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            text
        };
        let exprs = explain("mi.spec.healthCheckExprs");
        for field in ["apiVersion", "kind", "current", "inProgress", "failed"] {
            assert!(exprs.contains(field), "{version:?}: {exprs}");
        }
        assert!(exprs.contains("CEL"), "{version:?}: {exprs}");
        let kc = explain("mi.spec.kubeConfig");
        assert!(kc.contains("secretRef"), "{version:?}: {kc}");
        let secret_ref = explain("mi.spec.kubeConfig.secretRef");
        assert!(
            secret_ref.contains("name") && secret_ref.contains("key"),
            "{version:?}: {secret_ref}"
        );
        assert!(explain("mpkg.spec.kubeConfig").contains("secretRef"));
        assert!(explain("mpkg.spec.healthCheckExprs").contains("current"));
    }
}
