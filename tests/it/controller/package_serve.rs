//! `opm-operator serve` as a process with the ModulePackage controller (docs/design/principles.md rule 11,
//! docs/design/operator.md §2.3 watches): against a kube-emu without the Flux source CRDs it runs, logs
//! the missing CRDs once and a package waits on its missing source; when the OCIRepository CRD and
//! a source with an artifact appear, the source watch starts without a restart and enqueues the
//! package (whose own requeue is 30 minutes away), which gets past the source and the fetch.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crds::conditions::types;
use crds::k8s_openapi::api::core::v1::Namespace;
use crds::module_package::ModulePackage;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

use super::common::*;
use super::package::{
    digest, install_oci_repository_crd, serve, set_source, shop_tgz, test_package, Artifacts, Route,
};

#[tokio::test]
async fn serve_runs_without_flux_and_starts_the_source_watch_when_the_crd_appears() {
    let env = env().await;
    let client = env.client.clone();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some("team-a".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, env.emu.kubeconfig_yaml()).unwrap();
    let mut cmd = ServeProc::command(dir.path(), &kubeconfig, &dir.path().join("platform"));
    cmd.args([
        "--metrics-addr",
        "0",
        "--leader-elect",
        "false",
        "--registry",
        "127.0.0.1:1",
        "--reconcile-timeout",
        "30s",
    ]);
    let mut proc = ServeProc::spawn(cmd);

    let packages: Api<ModulePackage> = Api::namespaced(client.clone(), "team-a");
    create(&packages, test_package()).await;
    let reason = || async {
        packages
            .get("pkg")
            .await
            .unwrap()
            .status
            .and_then(|s| condition(&s.conditions, types::READY))
            .map(|c| (c.1, c.2))
    };
    let waiting = eventually(60, || async {
        reason()
            .await
            .is_some_and(|(r, m)| r == "SourceNotReady" && m.contains("not found"))
    })
    .await;
    assert!(waiting, "{:?}\n{}", reason().await, proc.log());
    assert!(proc.child.try_wait().unwrap().is_none(), "still running");
    let missing = "Flux source CRDs not installed";
    assert_eq!(proc.log().matches(missing).count(), 1, "{}", proc.log());

    // The CRD and a ready source appear: the watch starts (within the 30 s discovery interval)
    // and enqueues the package, which gets past the source and the fetch to the platform gate.
    install_oci_repository_crd(&client).await;
    let artifacts = Artifacts::default();
    let addr = serve(artifacts.clone()).await;
    let bytes = shop_tgz(&[]);
    artifacts.set("/a.tar.gz", Route::Body(bytes.clone()));
    let url = format!("http://{addr}/a.tar.gz");
    set_source(
        &client,
        "team-a",
        "src",
        true,
        Some((&url, &digest(&bytes), "r1")),
    )
    .await;
    let moved = eventually(60, || async {
        reason().await.is_some_and(|(r, _)| r == "PlatformNotReady")
    })
    .await;
    assert!(moved, "{:?}\n{}", reason().await, proc.log());
    assert!(
        proc.log().contains("Flux source CRD found"),
        "{}",
        proc.log()
    );
    let status = packages.get("pkg").await.unwrap().status.unwrap();
    assert_eq!(
        status.source.unwrap().artifact_url.as_deref(),
        Some(url.as_str())
    );
    assert!(proc.child.try_wait().unwrap().is_none(), "still running");
    let _ = proc.child.kill();
}
