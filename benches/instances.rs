//! ModuleInstance scale benchmark (issue 17 "Done when", issue 32; docs/design/operator.md §2.2, §2.6): N
//! instances of the fixture `demo` module (values `fixtures/opm/values/valid.json`, one namespace
//! each: the module's ConfigMap name `settings` is fixed) against one kube-emu in this process,
//! reconciled by real `opm-operator serve` processes (this build's binary; real platform kernel
//! and renderer, `--registry oci:<layout>` with the fixture modules published into a temp dir).
//!
//! Two layouts, each in a fresh emulator:
//! - unsharded: one `serve` process reconciles everything (sizes: the arguments, default
//!   100 1000 10000);
//! - sharded (`--shards K`, default 4, 0 turns it off): one unsharded process (the Platform) and K
//!   `serve --shard s<i>` processes; the instances are labelled round-robin
//!   `sharding.opmodel.dev/key=s<i>`; run at the largest size.
//!
//! Per run it prints the time from the first create until every instance is Ready=True, the API
//! requests the operators made per instance (`Emulator::requests_served` minus the benchmark's own
//! creates and polls), the CPU seconds per instance of all operator processes (utime + stime from
//! `/proc/<pid>/stat`, USER_HZ 100), and each process's peak RSS (VmHWM). Leader election is off
//! (`--leader-elect=false`: one process per shard), so the figures carry no lease traffic. Run by
//! hand in release, not in CI; it asserts only that every instance gets Ready:
//!
//!     cargo bench -p opm-operator --bench instances [-- SIZES... [--shards K] [--interval D [--window W]]]
//!
//! `--interval D` (issue 40; e.g. `1m`) creates every instance with `spec.interval: D`; after
//! all are Ready and one interval of warm-up, it measures the steady state over `--window W`
//! (default two intervals): the operators' API requests per minute and CPU per minute (every
//! interval is a full reconcile: render, drift check, health).
//!
//! The allocator (2026-12-07, `-- 1000 --shards 0`, release, alternated): jemalloc (the default
//! feature) 11.4-11.6 s until all Ready, 12.2-12.8 ms CPU per instance, peak RSS 45 MiB;
//! glibc (`--no-default-features`) 13.4 s, 13.8 ms, 47 MiB. 19.0 API requests per instance
//! either way. One arena for all threads (`narenas:1`, now built in; `.cargo/config.toml`), two
//! runs each alternated with the default of four per CPU (`_RJEM_MALLOC_CONF`): 7.9 / 9.5 s,
//! 8.3 / 10.1 ms CPU per instance, peak RSS 39 / 39 MiB, against 9.4 / 9.8 s, 10.0 / 10.8 ms,
//! 43 / 43 MiB (two arenas: 9.8 / 8.3 s, 10.6 / 8.9 ms, 41 / 40 MiB).
//!
//! Figures of 2026-12-04 (the in-process variant of this benchmark, emulator and controllers in
//! one process; release, 2 shared cores, 2 concurrent renders, load 0.6–5.7): N = 100 / 300 /
//! 1,000 → all Ready in 1.6–2.7 s / 7.3–7.9 s / 18.2–35.5 s, 21.0–21.1 API requests per instance
//! at every size, peak RSS 77–105 / 145–160 / 342–357 MiB (emulator included).
//!
//! Figures of 2026-12-05 (release, 2 cores shared with other helpers' builds, load 1.0–7.3; 2
//! concurrent renders per process; peak RSS of the operator process alone):
//!
//! | N | shards | all Ready | requests/MI | CPU/MI | peak RSS (MiB) |
//! |---|---|---|---|---|---|
//! | 100 | – | 1.1 s | 21.1 | 7.2 ms | 33 |
//! | 1,000 | – | 8.2 s | 21.1 | 7.6 ms | 39 |
//! | 10,000 | – | 155.1 s (load 4–6) | 21.1 | 8.2 ms | 92 |
//! | 10,000 | 4 | 77.3 s | 21.1 | 7.5 ms | unsharded 27; shards 45, 48, 49, 50 |
//!
//! Figures of 2026-12-05 afternoon (health check on: one more GET per Deployment per reconcile;
//! release, idle machine, load 1.8–2.1 before, 5.4 after the sharded run):
//!
//! | N | shards | all Ready | requests/MI | CPU/MI | peak RSS (MiB) |
//! |---|---|---|---|---|---|
//! | 100 | – | 1.2 s | 22.3 | 11.1 ms | 31 |
//! | 1,000 | – | 8.2 s | 22.2 | 8.3 ms | 37 |
//! | 10,000 | – | 95.6 s | 22.2 | 8.0 ms | 93 |
//! | 10,000 | 4 | 74.1 s | 22.2 | 9.8 ms | unsharded 27; shards 46, 48, 48, 48 |
//!
//! Figures of 2026-12-05 evening (release, 2 cores shared with builds, load 2.4–7.2; the memory
//! breakdown this bench now prints): 10,000 in one process 134.5 s, 22.1 requests/MI, 8.6 ms CPU/MI,
//! peak 90.6 MiB (69.7 anonymous + 20.8 file-backed at the end, PSS 88.6); over 4 shards 86.1 s,
//! 22.2/MI, shards 45.9–49.0 MiB peak (25–27.5 anonymous + ≈ 21 file-backed, PSS 29.0–31.8),
//! unsharded 27.2. Every process starts at ≈ 4.4 MiB anonymous + 20.7 MiB file-backed (the
//! binary's mapped text), which is why a shard cannot go under a third of the single process.
//!
//! Figures of 2026-12-05 night, after the discovery cache (`apply::resolve`: discovery was 3.2
//! of the 22 requests per instance) and one set of workload watches per process (release, load
//! 2.6–4.7 from a concurrent build): 1,000 in one process 7.7 s, **19.0** requests/MI, 6.1 ms
//! CPU/MI, peak 40 MiB; 10,000 in one process 93.9 s, 19.0/MI, 6.3 ms CPU/MI, peak 98.2 MiB
//! (76.7 anonymous + 21.4 file-backed). The same run of the build before them (3c5bbf2): 95.1 s,
//! 22.1/MI, 7.0 ms CPU/MI, peak 99.6 MiB.
//!
//! Memory per instance: ≈ 5.9 MiB per 1,000 instances with the slimmed caches
//! (`manager::slim_instance`), against 54 → 251 MiB (≈ 21.9 MiB per 1,000) for 1,000 → 10,000
//! with the full objects cached (same build without the `.modify` calls).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark binary fails loudly"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crds::k8s_openapi::api::core::v1::Namespace;
use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use crds::module_instance::ModuleInstance;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::Api;
use opm_operator::controller::shard::DEFAULT_SHARD_LABEL;
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};

const MODULES: &[&str] = &["core", "kube", "mini", "demo"];
/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ; 100 on Linux).
const USER_HZ: f64 = 100.0;

fn opm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm")
}

/// One `opm-operator serve` process.
struct Operator {
    child: Child,
    label: String,
}

impl Operator {
    fn spawn(dir: &Path, kubeconfig: &Path, layout: &Path, shard: Option<&str>) -> Operator {
        let label = shard.unwrap_or("unsharded").to_owned();
        let own = dir.join(&label);
        std::fs::create_dir_all(&own).unwrap();
        let log = std::fs::File::create(own.join("log")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_opm-operator"));
        cmd.args(["serve", "--self-signed", "--self-signed-dir"])
            .arg(own.join("certs"))
            .args([
                "--webhook-addr",
                "127.0.0.1:0",
                "--probe-addr",
                "127.0.0.1:0",
                "--metrics-addr",
                "0",
                "--leader-elect=false",
                "--core-module",
                "fixtures.test/core@v0",
                "--core-version",
                "v0.1.0",
                "--shard",
                shard.unwrap_or(""),
            ])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--platform-dir")
            .arg(own.join("platform"))
            .arg("--cue-cache-dir")
            .arg(own.join("cache"))
            .arg("--registry")
            .arg(format!("oci:{}", layout.display()))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log);
        Operator {
            child: cmd.spawn().unwrap(),
            label,
        }
    }

    fn proc_file(&self, name: &str) -> String {
        std::fs::read_to_string(format!("/proc/{}/{name}", self.child.id())).unwrap_or_default()
    }

    /// utime + stime in seconds.
    fn cpu_seconds(&self) -> f64 {
        let stat = self.proc_file("stat");
        // Fields after the command (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
        let tick = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (tick(11) + tick(12)) / USER_HZ
    }

    /// A `/proc/<pid>/status` memory field (`VmHWM`, `VmRSS`, `RssAnon`, `RssFile`) in MiB.
    fn status_mib(&self, field: &str) -> f64 {
        self.proc_file("status")
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// The process's memory now: resident (anonymous, file-backed), peak, and proportional set
    /// size (`Pss` of `/proc/<pid>/smaps_rollup`: shared pages divided among the processes
    /// mapping them, so the binary's text counts once over all operator processes).
    fn memory(&self) -> Memory {
        let pss = self
            .proc_file("smaps_rollup")
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0);
        Memory {
            peak: self.status_mib("VmHWM"),
            anon: self.status_mib("RssAnon"),
            file: self.status_mib("RssFile"),
            pss,
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One process's memory figures in MiB (`/proc/<pid>/status`).
#[derive(Clone, Copy)]
struct Memory {
    peak: f64,
    anon: f64,
    file: f64,
    pss: f64,
}

struct Figures {
    n: usize,
    shards: usize,
    ready: Duration,
    requests: usize,
    cpu_s: f64,
    /// (process, peak RSS MiB).
    /// Per process: its label, its memory before the first instance (platform built) and at the end.
    memory: Vec<(String, Memory, Memory)>,
    /// With `--interval`: (requests per minute, CPU seconds per minute) in the steady state.
    steady: Option<(f64, f64)>,
}

/// `--interval` and `--window` (issue 40).
#[derive(Clone, Copy)]
struct Steady {
    interval: Duration,
    window: Duration,
}

async fn ready_count(all: &Api<ModuleInstance>) -> usize {
    all.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|mi| {
            mi.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .count()
}

async fn run(
    n: usize,
    shards: usize,
    layout: &Path,
    root: &Path,
    steady: Option<Steady>,
) -> Figures {
    let dir = root.join(format!("run-{n}-{shards}"));
    std::fs::create_dir_all(&dir).unwrap();
    let emu = kube_emu::Emulator::start(kube_emu::Options {
        workloads: Some(kube_emu::simulate::Workloads::immediate()),
        ..kube_emu::Options::default()
    })
    .await
    .unwrap();
    let client = emu.client().unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, emu.kubeconfig_yaml()).unwrap();
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::all_crds() {
        crd_api.create(&PostParams::default(), &crd).await.unwrap();
    }
    // The Platform first, so the instances measure the steady state rather than the build.
    let platforms: Api<crds::platform::Platform> = Api::all(client.clone());
    let p: crds::platform::Platform = serde_json::from_value(serde_json::json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes",
                 "registry": {"fixtures.test/catalogs/mini@v0": {"version": "0.1.0"}}},
    }))
    .unwrap();
    platforms.create(&PostParams::default(), &p).await.unwrap();
    let mut operators = vec![Operator::spawn(&dir, &kubeconfig, layout, None)];
    let names: Vec<String> = (0..shards).map(|i| format!("s{i}")).collect();
    for s in &names {
        operators.push(Operator::spawn(&dir, &kubeconfig, layout, Some(s)));
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let ready = platforms
            .get("cluster")
            .await
            .unwrap()
            .status
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            });
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "platform never Ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The shards observe the Platform on their own: give them a moment to build it too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu_before: Vec<f64> = operators.iter().map(Operator::cpu_seconds).collect();
    let memory_before: Vec<Memory> = operators.iter().map(Operator::memory).collect();

    let values: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(opm().join("values/valid.json")).unwrap())
            .unwrap();
    let base = emu.requests_served();
    let mut own = 0usize;
    let started = Instant::now();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0..n {
        let ns = format!("shop-{i}");
        namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: ObjectMeta {
                        name: Some(ns.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let mut mi: ModuleInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "opmodel.dev/v1alpha1",
            "kind": "ModuleInstance",
            "metadata": {"name": "shop", "namespace": ns},
            "spec": {"module": {"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"},
                     "values": values, "prune": true},
        }))
        .unwrap();
        if let Some(st) = steady {
            mi.spec.interval = Some(format!("{}s", st.interval.as_secs()));
        }
        if let Some(s) = names.get(i % shards.max(1)).filter(|_| shards > 0) {
            mi.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(DEFAULT_SHARD_LABEL.to_owned(), s.clone());
        }
        Api::<ModuleInstance>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &mi)
            .await
            .unwrap();
        own += 2;
    }
    let all: Api<ModuleInstance> = Api::all(client.clone());
    let poll = Duration::from_millis(if n > 2000 { 2000 } else { 500 });
    let deadline = Instant::now() + Duration::from_secs(3 * 3600);
    loop {
        let ready = ready_count(&all).await;
        own += 1;
        if ready == n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {ready}/{n} Ready after three hours"
        );
        tokio::time::sleep(poll).await;
    }
    let ready = started.elapsed();
    // Let the last status writes' watch events and any follow-up reconciles settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let requests = emu.requests_served() - base - own;
    let cpu_s = operators
        .iter()
        .zip(&cpu_before)
        .map(|(o, before)| o.cpu_seconds() - before)
        .sum();
    let memory = operators
        .iter()
        .zip(memory_before)
        .map(|(o, before)| (o.label.clone(), before, o.memory()))
        .collect();
    let steady = match steady {
        None => None,
        Some(st) => {
            tokio::time::sleep(st.interval).await;
            let (r0, c0): (usize, f64) = (
                emu.requests_served(),
                operators.iter().map(Operator::cpu_seconds).sum(),
            );
            tokio::time::sleep(st.window).await;
            let requests = emu.requests_served() - r0;
            let cpu: f64 = operators.iter().map(Operator::cpu_seconds).sum::<f64>() - c0;
            let minutes = st.window.as_secs_f64() / 60.0;
            Some((requests as f64 / minutes, cpu / minutes))
        }
    };
    drop(operators);
    emu.shutdown().await;
    Figures {
        n,
        shards,
        ready,
        requests,
        cpu_s,
        memory,
        steady,
    }
}

fn print(f: &Figures) {
    let peaks: Vec<String> = f
        .memory
        .iter()
        .map(|(l, _, m)| format!("{l} {:.0}", m.peak))
        .collect();
    println!(
        "{:>6}  {:>6}  {:>9.1} s  {:>9.1} ms  {:>11.1}  {:>11.1} ms  {}",
        f.n,
        f.shards,
        f.ready.as_secs_f64(),
        f.ready.as_secs_f64() * 1000.0 / f.n as f64,
        f.requests as f64 / f.n as f64,
        f.cpu_s * 1000.0 / f.n as f64,
        peaks.join(", ")
    );
    if let Some((rpm, cpm)) = f.steady {
        println!(
            "        steady state with spec.interval: {rpm:.0} requests/min ({:.2} per instance \
             per minute), {cpm:.2} CPU s/min ({:.2} ms per instance per minute)",
            rpm / f.n as f64,
            cpm * 1000.0 / f.n as f64
        );
    }
    for (label, before, after) in &f.memory {
        println!(
            "        {label}: before the instances {:.1} anon + {:.1} file (peak {:.1}); \
             at the end {:.1} anon + {:.1} file (peak {:.1}, PSS {:.1})",
            before.anon, before.file, before.peak, after.anon, after.file, after.peak, after.pss
        );
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut sizes = Vec::new();
    let mut shards = 4usize;
    let mut interval: Option<Duration> = None;
    let mut window: Option<Duration> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--shards" {
            shards = args.next().and_then(|v| v.parse().ok()).unwrap_or(shards);
        } else if a == "--interval" {
            interval = args.next().and_then(|v| crds::duration::parse_go(&v));
        } else if a == "--window" {
            window = args.next().and_then(|v| crds::duration::parse_go(&v));
        } else if let Ok(n) = a.parse() {
            sizes.push(n);
        }
    }
    if sizes.is_empty() {
        sizes = vec![100, 1000, 10_000];
    }
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let publisher = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout.clone(),
    })))
    .unwrap();
    for m in MODULES {
        publisher.publish(&opm().join(m), "v0.1.0").unwrap();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "concurrent renders per process: {}; uptime: {}",
        opm_operator::server::default_concurrent_renders(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "{:>6}  {:>6}  {:>11}  {:>12}  {:>11}  {:>14}  peak RSS per process (MiB)",
        "N", "shards", "all Ready", "per instance", "requests/MI", "CPU/instance"
    );
    let steady = interval.map(|interval| Steady {
        interval,
        window: window.unwrap_or(interval * 2),
    });
    for &n in &sizes {
        print(&rt.block_on(run(n, 0, &layout, tmp.path(), steady)));
    }
    if let Some(&n) = sizes.iter().max().filter(|_| shards > 0) {
        print(&rt.block_on(run(n, shards, &layout, tmp.path(), steady)));
    }
    println!(
        "load after: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
