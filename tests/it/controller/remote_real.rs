//! Issue 40 item 6 with a real process: the remote cluster is the `kube-emu` binary (its store
//! kept in a snapshot file, on a fixed port), stopped while an instance targets it. While it is
//! down the instance is Ready=False `RemoteClusterUnreachable`, retried with backoff, and nothing
//! is applied or pruned anywhere (the management cluster's same-named object included); when it
//! is back, the next reconcile applies and prunes there and the instance is Ready again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crds::conditions::{reasons, types};
use crds::k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::common::*;
use super::remote::{kube_config, kubeconfig_for, kubeconfig_secret};
use super::rendered::*;
use crate::child::LoggedChild;
use crate::e2e::kube_emu_binary;

/// A free loopback port (bound, then released for the emulator).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the kube-emu binary on `port` with its store in `dir/store.json`; waits until it
/// serves.
async fn start_remote(bin: &Path, dir: &Path, port: u16) -> LoggedChild {
    let child = LoggedChild::spawn(
        Command::new(bin)
            .args(["--port", &port.to_string(), "--simulate-workloads", "0s"])
            .arg("--kubeconfig")
            .arg(dir.join("kubeconfig"))
            .arg("--snapshot")
            .arg(dir.join("store.json")),
    )
    .unwrap();
    let served = eventually(30, || async { child.log().contains("serving on") }).await;
    assert!(served, "kube-emu did not start: {}", child.log());
    child
}

/// Stops the emulator as Ctrl-C does (it writes its snapshot) and waits for it to exit.
async fn stop_remote(mut child: LoggedChild) {
    let pid = child.child.id().to_string();
    let status = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(status.success());
    let exited = eventually(30, || {
        let done = child.child.try_wait().unwrap().is_some();
        async move { done }
    })
    .await;
    assert!(exited, "kube-emu did not stop: {}", child.log());
}

fn remote_client(port: u16) -> kube::Client {
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_cluster_that_stops_answering_prunes_nothing_and_recovers() {
    let bin = kube_emu_binary();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let remote = start_remote(&bin, dir.path(), port).await;
    let rc = remote_client(port);
    namespace(&rc, NS).await;

    let m = mi_env(
        vec![
            config_map("settings", json!({})),
            config_map("extra", json!({})),
        ],
        |_| {},
    )
    .await;
    // The management cluster has an object of the same name as a remote one: never touched.
    Api::<ConfigMap>::namespaced(m.env.client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "extra"}, "data": {"here": "yes"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    kubeconfig_secret(
        &m.env.client,
        "remote-kc",
        "value",
        &kubeconfig_for(&format!("http://127.0.0.1:{port}")),
    )
    .await;
    m.create("web", |mi| mi.spec.kube_config = kube_config("remote-kc"))
        .await;
    m.until_reason("web", reasons::RECONCILIATION_SUCCEEDED, 30)
        .await;
    assert!(live(&rc, CONFIG_MAP, "extra").await.is_some());
    let inventory = m.inventory("web").await;
    assert_eq!(inventory, ["ConfigMap/settings", "ConfigMap/extra"]);

    // The remote cluster stops; the render drops `extra`.
    stop_remote(remote).await;
    m.renderer.set(vec![config_map("settings", json!({}))]);
    m.set_msg("web", "while-down").await;
    let mut backoff = Vec::new();
    for _ in 0..3 {
        let out = m.reconcile("web").await;
        assert_eq!(
            out.reason,
            Some(reasons::REMOTE_CLUSTER_UNREACHABLE),
            "{out:?}"
        );
        backoff.push(out.requeue.unwrap());
    }
    assert!(
        backoff[0] < backoff[1] && backoff[1] < backoff[2],
        "retried with backoff: {backoff:?}"
    );
    let (st, reason, message) = m.ready("web").await;
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", reasons::REMOTE_CLUSTER_UNREACHABLE)
    );
    assert!(
        message.starts_with(&format!(
            "cluster http://127.0.0.1:{port}/ is not reachable: "
        )),
        "{message}"
    );
    assert!(condition(&m.status("web").await.conditions, types::STALLED).is_none());
    // Nothing pruned anywhere: the inventory is as it was, the management cluster's `extra` is
    // there.
    assert_eq!(m.inventory("web").await, inventory);
    let here = live(&m.env.client, CONFIG_MAP, "extra").await.unwrap();
    assert_eq!(here["data"]["here"], "yes");

    // Back (same port, same store): applied and pruned there, Ready again.
    let remote = start_remote(&bin, dir.path(), port).await;
    assert!(
        live(&rc, CONFIG_MAP, "extra").await.is_some(),
        "still there after the outage"
    );
    m.until_reason("web", reasons::RECONCILIATION_SUCCEEDED, 30)
        .await;
    assert!(
        live(&rc, CONFIG_MAP, "extra").await.is_none(),
        "pruned on recovery"
    );
    let settings = live(&rc, CONFIG_MAP, "settings").await.unwrap();
    assert_eq!(settings["data"]["msg"], "while-down");
    assert!(live(&m.env.client, CONFIG_MAP, "extra").await.is_some());
    assert_eq!(m.inventory("web").await, ["ConfigMap/settings"]);

    // Deleting while it is down keeps the finalizer (and the objects); back, the deletion prunes
    // there.
    stop_remote(remote).await;
    m.instances()
        .delete("web", &Default::default())
        .await
        .unwrap();
    let out = opm_operator::controller::instance::reconcile(NS, "web", &m.ctx)
        .await
        .unwrap();
    assert_eq!(
        out.reason,
        Some(reasons::REMOTE_CLUSTER_UNREACHABLE),
        "{out:?}"
    );
    assert!(m.instances().get_opt("web").await.unwrap().is_some());
    let remote = start_remote(&bin, dir.path(), port).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    m.delete_pending("web").await;
    assert!(m.instances().get_opt("web").await.unwrap().is_none());
    assert!(live(&rc, CONFIG_MAP, "settings").await.is_none());
    stop_remote(remote).await;
}
