//! A cluster of real processes for the tests that kill or shard the operator (`chaos`,
//! `shards`): the `kube-emu` binary with its workload simulator, Debian's `docker-registry`
//! holding the fixtures published by `opm-operator module publish` (with a variant of `demo`
//! whose every object is named after its instance), the CRDs, the test's namespaces, and
//! `opm-operator serve` replicas on short leader-election timings. Every child is killed when the
//! cluster is dropped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::e2e::{kube_emu_binary, opm, Children};
use crate::registry::harness::DistRegistry;

/// The module every instance of these tests uses.
pub const DEMO: &str = "fixtures.test/modules/demo@v0";
/// Its version: the per-instance variant ([`per_instance_demo`]).
pub const DEMO_VERSION: &str = "v0.3.0";
const MINI: &str = "fixtures.test/catalogs/mini@v0";
/// The leader-election timings every replica gets: lease, renew deadline, retry period.
pub const LEASE_TIMINGS: [&str; 3] = ["4s", "3s", "1s"];

/// The `demo` fixture as v0.3.0 with its `settings` ConfigMap no longer `exact`, so it is named
/// after the instance as every other object of the module (no two instances claim one object).
fn per_instance_demo(root: &Path) -> PathBuf {
    let dir = root.join("demo-0.3.0");
    std::fs::create_dir_all(dir.join("cue.mod")).unwrap();
    std::fs::copy(
        opm().join("demo/cue.mod/module.cue"),
        dir.join("cue.mod/module.cue"),
    )
    .unwrap();
    let src = std::fs::read_to_string(opm().join("demo/module.cue")).unwrap();
    assert_eq!(src.matches("\t\t\t\texact: true\n").count(), 1);
    assert_eq!(src.matches("version:     \"0.1.0\"").count(), 1);
    let text = src
        .replace("\t\t\t\texact: true\n", "")
        .replace("version:     \"0.1.0\"", "version:     \"0.3.0\"");
    std::fs::write(dir.join("module.cue"), text).unwrap();
    dir
}

/// Polls `f` every 250 ms for at most `secs`.
pub async fn until<F, Fut>(secs: u64, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

/// The running processes and a client of the cluster.
pub struct Cluster {
    pub children: Children,
    pub client: kube::Client,
    reg: DistRegistry,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// The registry with the fixtures, kube-emu (simulated rollouts after `simulate_delay`),
    /// the CRDs and the namespaces `opm-system` + `namespaces`.
    pub async fn start(namespaces: &[&str], simulate_delay: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut children = Children::default();
        let reg = DistRegistry::start();
        for m in ["core", "kube", "mini"] {
            reg.publish(&opm().join(m), "v0.1.0");
        }
        reg.publish(&per_instance_demo(dir.path()), DEMO_VERSION);
        let kubeconfig = dir.path().join("kubeconfig");
        let emu = children.spawn(
            "kube-emu",
            Command::new(kube_emu_binary())
                .args(["--simulate-workloads", simulate_delay, "--kubeconfig"])
                .arg(&kubeconfig),
        );
        let c = &children;
        assert!(
            until(30, || async move { c.log(emu).contains("serving on") }).await,
            "{}",
            children.logs()
        );
        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in crds::all_crds() {
            crd_api.create(&PostParams::default(), &crd).await.unwrap();
        }
        let ns_api: Api<Namespace> = Api::all(client.clone());
        for ns in ["opm-system"].iter().chain(namespaces) {
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
            ns_api.create(&PostParams::default(), &ns).await.unwrap();
        }
        Cluster {
            children,
            client,
            reg,
            kubeconfig,
            dir,
        }
    }

    /// Publishes the module in `dir` at `version` into the cluster's registry.
    pub fn publish(&self, dir: &Path, version: &str) {
        self.reg.publish(dir, version);
    }

    /// Starts an `opm-operator serve` replica named `identity` (its `HOSTNAME`) with `extra`
    /// flags; returns its child index.
    pub fn serve(&mut self, identity: &str, extra: &[&str]) -> usize {
        let dir = self.dir.path();
        let mut c = Command::new(env!("CARGO_BIN_EXE_opm-operator"));
        c.args(["serve", "--self-signed", "--self-signed-dir"])
            .arg(dir.join(format!("certs-{identity}")))
            .args([
                "--webhook-addr",
                "127.0.0.1:0",
                "--probe-addr",
                "127.0.0.1:0",
                "--metrics-addr",
                "0",
                "--leader-elect-namespace",
                "opm-system",
                "--leader-elect-lease-duration",
                LEASE_TIMINGS[0],
                "--leader-elect-renew-deadline",
                LEASE_TIMINGS[1],
                "--leader-elect-retry-period",
                LEASE_TIMINGS[2],
                "--health-poll-interval",
                "1s",
                "--core-module",
                "fixtures.test/core@v0",
                "--core-version",
                "v0.1.0",
                "--registry",
                &self.reg.mapping(),
                "--kubeconfig",
            ])
            .arg(&self.kubeconfig)
            .arg("--platform-dir")
            .arg(dir.join(format!("platform-{identity}")))
            .args(extra)
            .env("RUST_LOG", "info")
            .env("HOSTNAME", identity)
            .env_remove("POD_NAME")
            .env_remove("OPM_REGISTRY");
        self.children.spawn(&format!("serve {identity}"), &mut c)
    }

    /// Creates Platform `cluster` subscribing the fixture catalog and waits until it is Ready.
    pub async fn platform(&mut self) {
        let platform: crds::platform::Platform = serde_json::from_value(json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "Platform",
            "metadata": {"name": "cluster"},
            "spec": {"type": "kubernetes", "registry": {MINI: {"version": "0.1.0"}}},
        }))
        .unwrap();
        let platforms: Api<crds::platform::Platform> = Api::all(self.client.clone());
        platforms
            .create(&PostParams::default(), &platform)
            .await
            .unwrap();
        let p = &platforms;
        let ready = until(300, || async move {
            p.get("cluster").await.ok().is_some_and(|p| {
                p.status.is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
        })
        .await;
        assert!(ready, "platform not Ready\n{}", self.children.logs());
    }

    /// The holder of the Lease `name` in `opm-system` (empty when none).
    pub async fn lease_holder(&self, name: &str) -> String {
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            self.client.clone(),
            "opm-system",
        )
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default()
    }
}
