//! Leader election and restart with two real `opm-operator serve` processes against one kube-emu
//! (exposed on a loopback port through a kubeconfig file) and the real `docker-registry` holding
//! the fixture modules (docs/design/operator.md §3, §5.2 reset, §7.1; issue 15 "Leader election").
//!
//! Asserted: exactly one replica holds the Lease and writes the Platform's status and events
//! (the follower keeps only its own store and `--platform-dir` current); the leader generates the
//! package from the real registry; killing the leader (SIGKILL: no graceful release) makes the
//! follower take over once the lease expires, within one lease duration plus one retry period of
//! the kill; a replica restarted on its non-empty `--platform-dir` resets it at boot and
//! regenerates the package.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crds::conditions::types;
use crds::platform::Platform;

use super::common::*;
use crate::platform::gen::opm;
use crate::registry::harness::DistRegistry;

const MINI: &str = "fixtures.test/catalogs/mini@v0";
const LEASE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(200);

/// A `serve` replica and its `--platform-dir`.
struct Replica {
    proc: ServeProc,
    platform_dir: PathBuf,
}

impl Replica {
    fn start(dir: &Path, kubeconfig: &Path, registry: &str, platform_dir: &Path) -> Replica {
        let mut cmd = ServeProc::command(dir, kubeconfig, platform_dir);
        cmd.args(["--metrics-addr", "0"])
            .args(FAST_LEADER_ELECTION)
            .args([
                "--registry",
                registry,
                "--core-module",
                "fixtures.test/core@v0",
                "--core-version",
                "v0.1.0",
            ])
            .env("HOSTNAME", "replica")
            .env_remove("POD_NAME")
            .env_remove("OPM_REGISTRY");
        Replica {
            proc: ServeProc::spawn(cmd),
            platform_dir: platform_dir.to_path_buf(),
        }
    }

    fn identity(&self) -> String {
        self.proc.identity()
    }

    fn log(&self) -> String {
        self.proc.log()
    }

    /// SIGKILL: the process dies holding the lease.
    fn kill(&mut self) {
        self.proc.kill();
    }

    /// The generated packages in this replica's `--platform-dir` that carry a `platform.cue`.
    fn packages(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(&self.platform_dir) else {
            return Vec::new();
        };
        let mut out: Vec<String> = rd
            .filter_map(Result::ok)
            .filter(|e| e.path().join("platform.cue").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }
}

async fn ready_reason(client: &kube::Client) -> Option<(String, String)> {
    let p = platforms(client).get_opt("cluster").await.ok()??;
    condition(&p.status?.conditions, types::READY).map(|c| (c.1, c.2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_replicas_on_the_real_registry_one_leads_a_kill_hands_over_a_restart_regenerates()
{
    let reg = tokio::task::spawn_blocking(|| {
        let reg = DistRegistry::start();
        let client = reg.client(None);
        for dir in ["core", "kube", "mini"] {
            client.publish(&opm(dir), "v0.1.0").unwrap();
        }
        reg
    })
    .await
    .unwrap();
    let env = env().await;
    let (dir, kubeconfig) = serve_cluster(&env).await;
    let mapping = reg.mapping();
    let generation = create(
        &platforms(&env.client),
        Platform::test()
            .without_catalogs()
            .with_catalog(MINI, "0.1.0", None),
    )
    .await
    .metadata
    .generation
    .unwrap();
    let package = format!("gen-{generation}");

    let (pa, pb) = (dir.path().join("platform-a"), dir.path().join("platform-b"));
    let mut a = Replica::start(&dir.path().join("a"), &kubeconfig, &mapping, &pa);
    assert!(
        eventually(30, || async { holder(&env.client).await.is_some() }).await,
        "a: {}",
        a.log()
    );
    let b = Replica::start(&dir.path().join("b"), &kubeconfig, &mapping, &pb);
    assert_eq!(holder(&env.client).await, Some(a.identity()));

    // The leader generates from the real registry; the follower builds its own copy.
    assert!(
        eventually(60, || async {
            ready_reason(&env.client)
                .await
                .is_some_and(|(r, _)| r == "Generated")
        })
        .await,
        "a: {}\nb: {}",
        a.log(),
        b.log()
    );
    assert!(
        eventually(60, || async { b.packages() == vec![package.clone()] }).await,
        "follower records its own package: {:?}\n{}",
        b.packages(),
        b.log()
    );
    assert_eq!(a.packages(), vec![package.clone()]);
    // Exactly one reconciles: the one Generated event comes from the leader (published just
    // after the status write: polled).
    assert!(
        eventually(10, || async {
            !events(&env.client, "cluster", "Generated").await.is_empty()
        })
        .await
    );
    let evs = events(&env.client, "cluster", "Generated").await;
    assert_eq!(evs.len(), 1, "{evs:#?}");
    assert_eq!(
        evs[0].reporting_instance.as_deref(),
        Some(a.identity().as_str())
    );
    assert!(
        !b.log().contains("acquired the leader lease"),
        "{}",
        b.log()
    );

    // SIGKILL the leader: the lease is not released; the follower takes over once it expires.
    a.kill();
    let killed = Instant::now();
    let b_id = b.identity();
    assert!(
        eventually(10, || async {
            holder(&env.client).await.as_deref() == Some(b_id.as_str())
        })
        .await,
        "b: {}",
        b.log()
    );
    let took = killed.elapsed();
    eprintln!("takeover after SIGKILL of the leader: {took:?}");
    assert!(
        took <= LEASE + RETRY + Duration::from_secs(1),
        "took {took:?}"
    );

    // The new leader reconciles: a spec change is generated and reported by b.
    let api = platforms(&env.client);
    patch_spec(&api, "cluster", serde_json::json!({"type": "kubernetes-b"})).await;
    let next = api
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    assert!(
        eventually(60, || async {
            ready_reason(&env.client).await.is_some_and(|(r, m)| {
                r == "Generated"
                    && m == format!("Platform module generated and built for generation {next}")
            })
        })
        .await,
        "b: {}",
        b.log()
    );
    assert!(
        eventually(10, || async {
            events(&env.client, "cluster", "Generated")
                .await
                .iter()
                .any(|e| e.reporting_instance.as_deref() == Some(b_id.as_str()))
        })
        .await
    );

    // Restart a on its non-empty platform dir (the stale package marked): reset at boot, then
    // the package is regenerated for the current generation.
    assert_eq!(a.packages(), vec![package.clone()]);
    std::fs::write(pa.join(&package).join("stale-marker"), "x").unwrap();
    let a2 = Replica::start(&dir.path().join("a2"), &kubeconfig, &mapping, &pa);
    let fresh = format!("gen-{next}");
    assert!(
        eventually(60, || async { a2.packages() == vec![fresh.clone()] }).await,
        "a2 regenerates: {:?}\n{}",
        a2.packages(),
        a2.log()
    );
    assert!(!pa.join(&package).exists(), "the stale package was reset");
    assert!(a2.log().contains("reset the platform directory"));
    assert_eq!(holder(&env.client).await, Some(b_id), "b keeps leading");
}
