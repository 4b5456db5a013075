//! `opm-operator serve` as processes: without a reachable cluster it says so and keeps serving
//! webhooks; two replicas against one kube-emu elect exactly one leader, which reconciles, and a
//! stopped leader hands over within one lease duration; `--platform-dir` is reset at boot.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crds::platform::Platform;

use super::common::*;

/// A `serve` replica run with `HOSTNAME=replica`, the fast leader election and no registry.
fn start(dir: &Path, kubeconfig: &Path, platform_dir: &Path) -> ServeProc {
    start_with_metrics(dir, kubeconfig, platform_dir, "0")
}

fn start_with_metrics(
    dir: &Path,
    kubeconfig: &Path,
    platform_dir: &Path,
    metrics_addr: &str,
) -> ServeProc {
    let mut cmd = ServeProc::command(dir, kubeconfig, platform_dir);
    cmd.args(["--metrics-addr", metrics_addr])
        .args(FAST_LEADER_ELECTION)
        .args(["--registry", "127.0.0.1:1"])
        .env("HOSTNAME", "replica")
        .env_remove("POD_NAME");
    ServeProc::spawn(cmd)
}

/// SIGTERM, then waits (polling, so the in-process kube-emu keeps serving) up to 20 s.
async fn terminate(serve: &mut ServeProc) -> std::process::ExitStatus {
    let status = Command::new("kill")
        .args(["-TERM", &serve.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "did not stop: {}", serve.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn without_a_cluster_serve_says_so_and_keeps_serving_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: http://127.0.0.1:1\ncontexts:\n- name: gone\n  context:\n    cluster: gone\n    user: u\ncurrent-context: gone\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let mut serve = start(dir.path(), &kubeconfig, &dir.path().join("platform"));
    assert!(
        serve.wait_log("no reachable Kubernetes cluster", 30).await,
        "{}",
        serve.log()
    );
    assert!(serve.wait_log("serving", 5).await, "{}", serve.log());
    let log = serve.log();
    assert!(log.contains("127.0.0.1:1"), "names the cluster: {log}");
    assert!(serve.child.try_wait().unwrap().is_none(), "still running");
    let status = terminate(&mut serve).await;
    assert!(status.success(), "{status:?}\n{}", serve.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leader_and_a_handover() {
    let env = env().await;
    let (dir, kubeconfig) = serve_cluster(&env).await;
    // Replica a boots on a non-empty platform dir: it is reset.
    let pa = dir.path().join("platform-a");
    std::fs::create_dir_all(pa.join("gen-9/cue.mod")).unwrap();
    std::fs::write(pa.join("gen-9/platform.cue"), "stale").unwrap();
    let metrics_port = free_port();
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    // a starts first and leads; b then competes for a held lease.
    let a = start_with_metrics(&dir.path().join("a"), &kubeconfig, &pa, &metrics_addr);
    assert!(
        eventually(30, || async { holder(&env.client).await.is_some() }).await,
        "a: {}",
        a.log()
    );
    let b = start(
        &dir.path().join("b"),
        &kubeconfig,
        &dir.path().join("platform-b"),
    );
    assert!(b.wait_log("serving", 30).await, "b: {}", b.log());
    assert!(a.wait_log("reset the platform directory", 5).await);
    assert!(
        std::fs::read_dir(&pa).unwrap().next().is_none(),
        "platform dir reset at boot"
    );
    let leader_id = holder(&env.client).await.unwrap();
    let a_id = a.identity();
    let (mut leader, follower) = if leader_id == a.identity() {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(leader_id, leader.identity());
    // The leader reconciles: the Platform fails with the real kernel's closure error, and every
    // event comes from the leader.
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    assert!(
        eventually(20, || async {
            platforms(&env.client)
                .get("cluster")
                .await
                .ok()
                .and_then(|p| p.status)
                .and_then(|s| condition(&s.conditions, crds::conditions::types::READY))
                .is_some_and(|c| {
                    // The real kernel against a registry nobody listens on: a transient closure
                    // failure naming the core module it could not resolve.
                    c.1 == "BuildFailed"
                        && c.2.contains("resolving platform dependencies")
                        && c.2.contains("opmodel.dev/core@v2")
                })
        })
        .await,
        "leader: {}",
        leader.log()
    );
    // The event is published just after the status write the test saw: poll for it.
    assert!(
        eventually(10, || async {
            !events(&env.client, "cluster", "BuildFailed")
                .await
                .is_empty()
        })
        .await
    );
    let evs = events(&env.client, "cluster", "BuildFailed").await;
    assert_eq!(evs.len(), 1);
    assert_eq!(
        evs[0].reporting_instance.as_deref(),
        Some(leader_id.as_str())
    );
    assert!(
        !follower.log().contains("acquired the leader lease"),
        "{}",
        follower.log()
    );
    // The leader's /metrics (the server's registry) carries the controller families next to the
    // server's own, with its Platform reconcile counted.
    assert_eq!(leader_id, a_id, "a started first and holds the lease");
    // The counter is bumped just after the status write the test saw: poll until it shows.
    let counted = r#"opm_controller_reconcile_total{kind="Platform",name="cluster",namespace="",outcome="failed_transient"}"#;
    let mut text = String::new();
    for _ in 0..100 {
        text = get_metrics(metrics_port).await;
        if text.contains(counted) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for series in [
        "# TYPE opm_controller_reconcile_total counter",
        r#"opm_controller_reconcile_total{kind="Platform",name="cluster",namespace="",outcome="failed_transient"}"#,
        "# TYPE http_requests_in_flight gauge",
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
    // A graceful stop releases the lease; the follower takes over within one lease duration.
    let status = terminate(&mut leader).await;
    assert!(status.success(), "{}", leader.log());
    let stopped = Instant::now();
    let follower_id = follower.identity();
    let took_over = eventually(2, || async {
        holder(&env.client).await.as_deref() == Some(follower_id.as_str())
    })
    .await;
    let took = stopped.elapsed();
    assert!(took_over, "follower: {}", follower.log());
    eprintln!("serve handover after SIGTERM: {took:?}");
    assert!(took < Duration::from_secs(2));
    assert!(follower.wait_log("acquired the leader lease", 5).await);
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// GET /metrics over plain HTTP/1.0 (polled until the listener answers).
async fn get_metrics(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            return out;
        }
        assert!(Instant::now() < deadline, "metrics listener never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
