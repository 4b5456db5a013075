//! End to end with the real binaries (issue 17, docs/design/operator.md §2.2, §2.4, §6): the `kube-emu`
//! binary as the cluster, Debian's `docker-registry` holding the fixture modules published by
//! `opm-operator module publish`, `opm-operator serve` as the operator, and the real `kubectl`
//! as the user, once with each tested kubectl version (v1.20 and v1.37, see `kubectls`).
//!
//! What it checks, in order: `opm-operator crds | kubectl apply -f -`; a Platform subscribing the
//! fixture catalog becomes Ready; a ModuleInstance of the fixture `demo` module becomes Ready
//! (`kubectl wait --for=condition=Ready`) and its three objects exist with the OPM labels; a
//! values edit (`kubectl patch`) updates the Deployment; moving to `demo` v0.2.0 (the same module
//! without its `conf` component, published from a copy of the fixture) prunes the two ConfigMaps;
//! `kubectl delete` of the instance deletes its inventory and the finalizer lets it go.
//!
//! How the `kube-emu` binary is found: it belongs to another package, so Cargo gives this test no
//! `CARGO_BIN_EXE_kube-emu`. The test runs `cargo build -p kube-emu --bin kube-emu` (the cargo
//! that built the test, `env!("CARGO")`; a no-op when it is fresh) and takes the binary next to
//! the test executable's `deps/` directory, i.e. the same target directory and profile.
//!
//! Every child process is killed when the test ends, passing or failing ([`Children`]'s `Drop`;
//! the registry's own guard kills it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::child::LoggedChild;
use crate::kubectls::{self, Version};
use crate::registry::harness::DistRegistry;

const DEMO: &str = "fixtures.test/modules/demo@v0";
const MINI: &str = "fixtures.test/catalogs/mini@v0";

/// Child processes killed (and reaped) on drop, with their combined output kept for failures.
#[derive(Default)]
pub(crate) struct Children {
    procs: Vec<(String, LoggedChild)>,
    /// The children killed on purpose ([`Children::kill`]).
    killed: std::collections::BTreeSet<usize>,
}

impl Children {
    pub(crate) fn spawn(&mut self, name: &str, cmd: &mut Command) -> usize {
        let child = LoggedChild::spawn(cmd).unwrap_or_else(|e| panic!("spawning {name}: {e}"));
        self.procs.push((name.to_owned(), child));
        self.procs.len() - 1
    }

    /// The output so far of the child `i` ([`Children::spawn`]'s result).
    pub(crate) fn log(&self, i: usize) -> String {
        self.procs[i].1.log()
    }

    /// The process id of the child `i`.
    pub(crate) fn pid(&self, i: usize) -> u32 {
        self.procs[i].1.child.id()
    }

    /// Whether the child `i` has exited (reaped).
    pub(crate) fn exited(&mut self, i: usize) -> bool {
        matches!(self.procs[i].1.child.try_wait(), Ok(Some(_)))
    }

    /// The tail of every child's output (for assertion messages).
    pub(crate) fn logs(&self) -> String {
        let mut s = String::new();
        for (name, child) in &self.procs {
            s.push_str(&format!("--- {name} ---\n{}\n", child.tail(40)));
        }
        s
    }

    /// Kills the child `i` with SIGKILL (a crash), which [`Children::assert_running`] expects.
    pub(crate) fn kill(&mut self, i: usize) {
        self.procs[i].1.kill();
        self.killed.insert(i);
    }

    pub(crate) fn assert_running(&mut self) {
        for (i, (name, child)) in self.procs.iter_mut().enumerate() {
            if self.killed.contains(&i) {
                continue;
            }
            if let Some(status) = child.child.try_wait().unwrap() {
                panic!("{name} exited ({status})");
            }
        }
    }
}

/// The `kube-emu` binary of this target directory and profile, built if needed.
pub(crate) fn kube_emu_binary() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args(["build", "--quiet", "-p", "kube-emu", "--bin", "kube-emu"])
        .current_dir(manifest)
        .status()
        .expect("running cargo build -p kube-emu");
    assert!(status.success(), "cargo build -p kube-emu failed");
    // <target>/<profile>/deps/it-<hash> → <target>/<profile>/kube-emu
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = profile_dir.join("kube-emu");
    assert!(bin.is_file(), "{} missing", bin.display());
    bin
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut child = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            let mut si = child.stdin.take().unwrap();
            if let Some(input) = stdin {
                si.write_all(input).unwrap();
            }
        }
        child.wait_with_output().unwrap()
    }

    /// Runs kubectl and returns its stdout; panics with both streams on failure.
    fn ok(&self, args: &[&str], stdin: Option<&[u8]>, ctx: &Children) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            ctx.logs()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str], ctx: &Children) -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a, None, ctx)).unwrap()
    }

    /// Whether `kubectl get` finds the object.
    fn exists(&self, args: &[&str]) -> bool {
        let mut a = vec!["get"];
        a.extend(args);
        let out = self.run(&a, None);
        if out.status.success() {
            return true;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("NotFound") || err.contains("not found"),
            "{err}"
        );
        false
    }
}

/// Polls `f` every 250 ms for at most `secs`.
async fn until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

pub(crate) fn opm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm")
}

/// A copy of the `demo` fixture declaring version 0.2.0 without its `conf` component (and the
/// imports only `conf` used).
fn demo_without_conf(root: &Path) -> PathBuf {
    let dir = root.join("demo-0.2.0");
    std::fs::create_dir_all(dir.join("cue.mod")).unwrap();
    std::fs::copy(
        opm().join("demo/cue.mod/module.cue"),
        dir.join("cue.mod/module.cue"),
    )
    .unwrap();
    let src = std::fs::read_to_string(opm().join("demo/module.cue")).unwrap();
    let conf = src.find("\tconf: res.#Configs").expect("conf component");
    let mut text = src[..conf].to_owned();
    text.push_str("}\n");
    let text = text
        .replace("version:     \"0.1.0\"", "version:     \"0.2.0\"")
        .replace("\t\"strings\"\n", "")
        .replace("\tres \"fixtures.test/catalogs/mini/resources\"\n", "");
    assert!(text.contains("\"0.2.0\"") && !text.contains("res.#") && !text.contains("strings."));
    std::fs::write(dir.join("module.cue"), text).unwrap();
    dir
}

pub(crate) fn valid_values() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(opm().join("values/valid.json")).unwrap())
        .unwrap()
}

/// The whole scenario once per tested kubectl version (see `kubectls`).
mod kubectl_drives_a_module_instance_through_the_real_binaries {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn v1_20() {
        super::drive(super::Version::V1_20).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn v1_37() {
        super::drive(super::Version::V1_37).await;
    }
}

async fn drive(version: Version) {
    let dir = tempfile::tempdir().unwrap();
    let mut children = Children::default();

    // The registry, with the fixtures published by the real CLI.
    let reg = DistRegistry::start();
    for m in ["core", "kube", "mini", "demo"] {
        reg.publish(&opm().join(m), "v0.1.0");
    }
    reg.publish(&demo_without_conf(dir.path()), "v0.2.0");

    // The cluster.
    let kubeconfig = dir.path().join("kubeconfig");
    let emu = children.spawn(
        "kube-emu",
        Command::new(kube_emu_binary())
            .args(["--simulate-workloads", "1s"])
            .arg("--kubeconfig")
            .arg(&kubeconfig),
    );
    assert!(
        until(30, || children.log(emu).contains("serving on")).await,
        "{}",
        children.logs()
    );
    let k = Kubectl {
        bin: kubectls::bin(version),
        kubeconfig: kubeconfig.clone(),
    };

    // The CRDs, through kubectl.
    let crds = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .arg("crds")
        .output()
        .unwrap();
    assert!(crds.status.success());
    k.ok(&["apply", "-f", "-"], Some(&crds.stdout), &children);
    for ns in ["opm-system", "prod"] {
        k.ok(&["create", "namespace", ns], None, &children);
    }

    // The operator.
    children.spawn(
        "opm-operator serve",
        Command::new(env!("CARGO_BIN_EXE_opm-operator"))
            .args(["serve", "--self-signed", "--self-signed-dir"])
            .arg(dir.path().join("certs"))
            .args([
                "--webhook-addr",
                "127.0.0.1:0",
                "--probe-addr",
                "127.0.0.1:0",
                "--metrics-addr",
                "0",
                "--leader-elect-namespace",
                "opm-system",
                "--core-module",
                "fixtures.test/core@v0",
                "--core-version",
                "v0.1.0",
                "--registry",
                &reg.mapping(),
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .arg("--platform-dir")
            .arg(dir.path().join("platform"))
            .env("RUST_LOG", "info")
            .env("HOSTNAME", "e2e")
            .env_remove("POD_NAME")
            .env_remove("OPM_REGISTRY"),
    );

    // The Platform subscribing the fixture catalog.
    let platform = serde_json::json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes", "registry": {MINI: {"version": "0.1.0"}}},
    });
    k.ok(
        &["apply", "-f", "-"],
        Some(platform.to_string().as_bytes()),
        &children,
    );
    let waited = k.run(
        &[
            "wait",
            "--for=condition=Ready",
            "platform/cluster",
            "--timeout=300s",
        ],
        None,
    );
    children.assert_running();
    assert!(
        waited.status.success(),
        "platform not Ready: {}\n{}",
        String::from_utf8_lossy(&waited.stderr),
        children.logs()
    );

    // The ModuleInstance.
    let mi = serde_json::json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "ModuleInstance",
        "metadata": {"name": "shop", "namespace": "prod"},
        "spec": {
            "module": {"path": DEMO, "version": "v0.1.0"},
            "values": valid_values(),
            "prune": true,
        },
    });
    k.ok(
        &["apply", "-f", "-"],
        Some(mi.to_string().as_bytes()),
        &children,
    );
    let waited = k.run(
        &[
            "wait",
            "--for=condition=Ready",
            "moduleinstance/shop",
            "-n",
            "prod",
            "--timeout=600s",
        ],
        None,
    );
    children.assert_running();
    assert!(
        waited.status.success(),
        "instance not Ready: {}\n{}",
        String::from_utf8_lossy(&waited.stderr),
        children.logs()
    );
    let web = k.json(&["get", "deployment", "shop-web", "-n", "prod"], &children);
    let labels = &web["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/managed-by"], "opm-controller");
    assert_eq!(labels["module-instance.opmodel.dev/name"], "shop");
    assert_eq!(labels["module-instance.opmodel.dev/namespace"], "prod");
    assert_eq!(
        labels["module-instance.opmodel.dev/uuid"],
        "4cc2523c-c376-545e-a997-dc2f4899f403"
    );
    assert_eq!(labels["component.opmodel.dev/name"], "web");
    assert_eq!(web["spec"]["replicas"], 3);
    for cm in ["settings", "shop-hosts-77eb3aa434"] {
        let c = k.json(&["get", "configmap", cm, "-n", "prod"], &children);
        assert_eq!(
            c["metadata"]["labels"]["component.opmodel.dev/name"],
            "conf"
        );
        assert_eq!(
            c["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "opm-controller"
        );
    }
    let status =
        k.json(&["get", "moduleinstance", "shop", "-n", "prod"], &children)["status"].clone();
    assert_eq!(status["inventory"]["revision"], 1, "{status}");
    assert_eq!(status["inventory"]["count"], 3, "{status}");
    let finalizers = k.json(&["get", "moduleinstance", "shop", "-n", "prod"], &children)
        ["metadata"]["finalizers"]
        .clone();
    assert_eq!(finalizers, serde_json::json!(["opmodel.dev/cleanup"]));

    // A values edit updates the Deployment.
    k.ok(
        &[
            "patch",
            "moduleinstance",
            "shop",
            "-n",
            "prod",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"values":{"replicas":2}}}"#,
        ],
        None,
        &children,
    );
    let updated = until(300, || {
        k.json(&["get", "deployment", "shop-web", "-n", "prod"], &children)["spec"]["replicas"] == 2
    })
    .await;
    children.assert_running();
    assert!(updated, "replicas not updated\n{}", children.logs());

    // v0.2.0 drops the `conf` component: its ConfigMaps are pruned, the Deployment stays.
    k.ok(
        &[
            "patch",
            "moduleinstance",
            "shop",
            "-n",
            "prod",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"module":{"version":"v0.2.0"}}}"#,
        ],
        None,
        &children,
    );
    let pruned = until(300, || {
        !k.exists(&["configmap", "settings", "-n", "prod"])
            && !k.exists(&["configmap", "shop-hosts-77eb3aa434", "-n", "prod"])
    })
    .await;
    children.assert_running();
    assert!(pruned, "conf objects not pruned\n{}", children.logs());
    assert!(k.exists(&["deployment", "shop-web", "-n", "prod"]));
    let v2 = opm_operator::inventory::source_digest(DEMO, "v0.2.0");
    let mut last = serde_json::Value::Null;
    let settled = until(60, || {
        last =
            k.json(&["get", "moduleinstance", "shop", "-n", "prod"], &children)["status"].clone();
        last["inventory"]["count"] == 1
            && last["inventory"]["revision"] == 3
            && last["lastAppliedSourceDigest"] == v2.as_str()
    })
    .await;
    assert!(
        settled,
        "inventory not updated: {last}\n{}",
        children.logs()
    );

    // Deleting the instance deletes its inventory and releases the finalizer.
    k.ok(
        &[
            "delete",
            "moduleinstance",
            "shop",
            "-n",
            "prod",
            "--wait=true",
            "--timeout=120s",
        ],
        None,
        &children,
    );
    assert!(!k.exists(&["moduleinstance", "shop", "-n", "prod"]));
    assert!(!k.exists(&["deployment", "shop-web", "-n", "prod"]));
    children.assert_running();
}
