//! `opm-operator dev` as a process, driven with the real `kubectl` and `curl` (issue 18 "done
//! when"): the example ModuleInstance becomes Ready, `kubectl get mi -A` prints the printer
//! columns, a Platform named `other` is refused with the singleton message, patching the values
//! re-renders the ConfigMap, the render API answers the printed curl line with the dev token, and
//! after SIGTERM and a restart on the same state directory the objects are still there and Ready.
//! The time from start to the example Ready is printed. The embedded cluster's simulated
//! rollouts show Ready means healthy: a values edit makes the example `Progressing`, then
//! Ready; a Deployment annotated to fail makes it `HealthCheckFailed` (issue 29).
//!
//! `dev --layout` (issue 28 item 4): on a layout of the fixture set published with `module
//! publish` (CI), and on the real OPM layout `scripts/opm-real.sh` publishes when `OPM_REAL_OUT`
//! names its output directory (skipped with a printed reason otherwise: third-party sources are
//! never part of CI).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(
    clippy::disallowed_methods,
    reason = "a synchronous test polling child processes (no runtime to yield to)"
)]

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::child::LoggedChild;
use crate::kubectls::{self, Version};

/// The running `opm-operator dev`; killed on drop (a failing test leaves no process behind).
pub(crate) struct Dev {
    proc: LoggedChild,
}

impl Dev {
    pub(crate) fn start(state: &Path) -> Dev {
        Dev::start_with(state, &[])
    }

    fn start_with(state: &Path, args: &[&OsStr]) -> Dev {
        let proc = LoggedChild::spawn(
            Command::new(env!("CARGO_BIN_EXE_opm-operator"))
                .args(["dev", "--port-base", "0", "--state-dir"])
                .arg(state)
                .args(args)
                .current_dir(state.parent().unwrap())
                .env("RUST_LOG", "info"),
        )
        .unwrap();
        Dev { proc }
    }

    fn output(&self) -> String {
        self.proc.log()
    }

    /// Waits for the summary (printed once the server listens) and returns it.
    pub(crate) fn summary(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let out = self.output();
            if let (Some(a), Some(b)) = (
                out.find("opm-operator dev: running"),
                out.find("(ready to serve in"),
            ) {
                return out[a..b].to_owned();
            }
            if let Some(status) = self.proc.child.try_wait().unwrap() {
                panic!("dev exited with {status}: {out}");
            }
            assert!(Instant::now() < deadline, "no summary: {out}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (`TERM`, `INT`) and waits for a clean exit.
    fn stop(&mut self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.proc.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.proc.child.try_wait().unwrap() {
                assert!(status.success(), "{status}: {}", self.output());
                return;
            }
            assert!(Instant::now() < deadline, "did not stop: {}", self.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The summary line that contains all of `needles`.
pub(crate) fn line<'a>(summary: &'a str, needles: &[&str]) -> &'a str {
    summary
        .lines()
        .find(|l| needles.iter().all(|n| l.contains(n)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{summary}"))
}

/// Runs a printed line as a user pastes it.
fn sh(path: &OsStr, line: &str) -> Output {
    Command::new("sh")
        .args(["-c", line])
        .env("PATH", path)
        .output()
        .unwrap()
}

pub(crate) fn ok(path: &OsStr, line: &str) -> String {
    let out = sh(path, line);
    assert!(
        out.status.success(),
        "{line}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kubectl(bin: &Path, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(bin)
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

/// Polls `line` until its output (trimmed) is `want`.
fn until_output(path: &OsStr, line: &str, want: &str, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let out = sh(path, line);
        let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{line}: {got:?}, want {want:?} ({})",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The dev loop once per tested kubectl version (see `kubectls`): the printed lines run with that
/// version first on `PATH`.
mod dev_runs_the_loop_for_kubectl_and_curl_and_keeps_its_state {
    #[test]
    fn v1_20() {
        super::dev_loop(super::Version::V1_20);
    }
    #[test]
    fn v1_37() {
        super::dev_loop(super::Version::V1_37);
    }
}

fn dev_loop(version: Version) {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let kubeconfig = state.join("kubeconfig");
    let kb = kubectls::bin(version);
    let path = kubectls::path_with(&kubectls::path_dir(version, tmp.path()));

    let t0 = Instant::now();
    let mut dev = Dev::start(&state);
    let summary = dev.summary();
    ok(
        &path,
        line(
            &summary,
            &["kubectl wait --for=condition=Ready", "mi/hello"],
        ),
    );
    let first_ready = t0.elapsed();
    println!("opm-operator dev: start to example Ready in {first_ready:?} (goal < 5 s)");

    // Printer columns.
    let get = ok(&path, line(&summary, &["kubectl get mi -A"]));
    let mut rows = get.lines();
    let header: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "READY", "MODULE", "VERSION", "AGE"],
        "{get}"
    );
    let row: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row[..5],
        [
            "demo",
            "hello",
            "True",
            "fixtures.test/modules/demo@v0",
            "v0.1.0"
        ],
        "{get}"
    );

    // The Platform singleton.
    let other = kubectl(
        &kb,
        &kubeconfig,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: opmodel.dev/v1alpha1\nkind: Platform\nmetadata:\n  name: other\n\
             spec:\n  type: kubernetes\n",
        ),
    );
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        err.contains("Platform is a cluster singleton; the only permitted name is 'cluster'"),
        "{err}"
    );

    // The ValidatingWebhookConfiguration reaches our webhook server (a rule only it checks).
    let padded = kubectl(
        &kb,
        &kubeconfig,
        &[
            "patch",
            "platform",
            "cluster",
            "--type=merge",
            "-p",
            r#"{"spec":{"type":" kubernetes"}}"#,
        ],
        None,
    );
    assert!(!padded.status.success());
    let err = String::from_utf8_lossy(&padded.stderr);
    assert!(
        // kubectl prints an Invalid status with its field causes (the webhook's details, kept
        // by the emulator as the apiserver keeps them).
        err.contains(r#"The Platform "cluster" is invalid: spec.type:"#)
            && err.contains("must not have leading or trailing whitespace"),
        "{err}"
    );

    // The ConfigMap follows the values.
    let cm = line(&summary, &["kubectl get configmap settings"]);
    until_output(&path, cm, "info", 10);
    ok(&path, line(&summary, &["kubectl patch mi/hello"]));
    until_output(&path, cm, "debug", 60);
    let uid = kubectl(
        &kb,
        &kubeconfig,
        &[
            "get",
            "mi",
            "hello",
            "-n",
            "demo",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
        None,
    );
    let uid = String::from_utf8(uid.stdout).unwrap();
    assert!(!uid.is_empty());

    // The render API with the dev token, as printed.
    let body = ok(
        &path,
        &format!(
            "{} -sS --fail-with-body",
            line(&summary, &["curl --cacert", "Authorization: Bearer"])
        ),
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let objects = v["objects"].as_array().unwrap();
    let settings = objects
        .iter()
        .find(|o| {
            o["object"]["kind"] == "ConfigMap" && o["object"]["metadata"]["name"] == "settings"
        })
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(settings["object"]["data"]["log-level"], "info");
    assert!(objects.iter().any(|o| o["object"]["kind"] == "Deployment"));
    // Without the token the API refuses. (HTTP/1.1: over HTTP/2 curl sometimes reports a stream
    // error (exit 92) for this early 401, which answers before the request body is read.)
    let no_token = ok(
        &path,
        &format!(
            "{} --http1.1 -s -o /dev/null -w '%{{http_code}}'",
            line(&summary, &["curl --cacert"]).replace("Authorization", "X-Nothing")
        ),
    );
    assert_eq!(no_token, "401");

    // `kubectl explain` reads our CRDs' schemas.
    let explain = kubectl(&kb, &kubeconfig, &["explain", "mi.spec.module"], None);
    let explained = String::from_utf8_lossy(&explain.stdout);
    assert!(explain.status.success(), "{explained}");
    assert!(explained.contains("version"), "{explained}");

    // Issue 30's table, as a new user types it, with this kubectl version.
    let run = |args: &[&str]| {
        let out = kubectl(&kb, &kubeconfig, args, None);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} ({version:?}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    assert!(run(&["create", "namespace", "prod"]).contains("namespace/prod created"));
    assert!(run(&["explain", "mi.spec"]).contains("The module to instantiate."));
    // Signed modules (issue 41): `spec.verify` of both kinds.
    // (kubectl 1.20 lists no fields of a nullable object; both print the description.)
    let verify = run(&["explain", "mi.spec.verify"]);
    assert!(
        verify.contains("Require the module to be signed"),
        "{verify}"
    );
    let verify = run(&["explain", "platform.spec.verify"]);
    assert!(
        verify.contains("Require every module and catalog"),
        "{verify}"
    );
    let all = run(&["get", "all", "-n", "demo"]);
    assert!(all.contains("deployment.apps/"), "{all}");
    let deploy = run(&["get", "deploy", "-n", "demo"]);
    let header: Vec<&str> = deploy.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{deploy}"
    );
    // The Platform's Generated event (events.k8s.io/v1, in `default` for a cluster-scoped
    // object) in `get events` and `describe`.
    let events = run(&["get", "events", "-A"]);
    assert!(
        events.contains("Generated") && events.contains("platform/cluster"),
        "{events}"
    );
    let described = run(&["describe", "platform", "cluster"]);
    let tail = &described[described.find("Events:").unwrap_or(0)..];
    assert!(
        tail.contains("Generated") && tail.contains("opm-controller"),
        "{described}"
    );
    // The instance's success events (after the first apply and the values edit) in `get
    // events -n demo` and `describe mi`.
    let events = run(&["get", "events", "-n", "demo"]);
    assert!(
        events.contains("ReconciliationSucceeded") && events.contains("moduleinstance/hello"),
        "{events}"
    );
    let described = run(&["describe", "mi", "hello", "-n", "demo"]);
    let tail = &described[described.find("Events:").unwrap_or(0)..];
    assert!(
        tail.contains("ReconciliationSucceeded") && tail.contains("created"),
        "{described}"
    );
    let opm = run(&["get", "opm", "-A"]);
    assert!(
        opm.contains("platform.opmodel.dev/cluster")
            && opm.contains("moduleinstance.opmodel.dev/hello"),
        "{opm}"
    );

    // Issue 40: the README's valuesFrom and dependsOn lines, run as written there.
    readme_gitops_lines(&path, &kubeconfig);

    dev.stop("TERM");
    assert!(state.join("cluster.json").is_file());

    // Restart on the same state: the objects are still there, patched, and Ready.
    let t1 = Instant::now();
    let mut dev = Dev::start(&state);
    let summary = dev.summary();
    ok(
        &path,
        line(
            &summary,
            &["kubectl wait --for=condition=Ready", "mi/hello"],
        ),
    );
    println!(
        "opm-operator dev: restart to example Ready in {:?}",
        t1.elapsed()
    );
    let uid2 = kubectl(
        &kb,
        &kubeconfig,
        &[
            "get",
            "mi",
            "hello",
            "-n",
            "demo",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
        None,
    );
    assert_eq!(String::from_utf8(uid2.stdout).unwrap(), uid);
    let cm = line(&summary, &["kubectl get configmap settings"]);
    until_output(&path, cm, "debug", 10);
    // The restarted controllers reconcile: patching back re-renders.
    ok(
        &path,
        &line(&summary, &["kubectl patch mi/hello"]).replace("debug", "warn"),
    );
    until_output(&path, cm, "warn", 60);

    // Ready means healthy (issue 29): the edit changed the Deployment, so the instance is
    // Progressing while the embedded cluster's simulated rollout runs, then Ready.
    let ready = format!(
        "KUBECONFIG={} kubectl get mi hello -n demo -o \
         jsonpath='{{.status.conditions[?(@.type==\"Ready\")].status}}/{{.status.conditions[?(@.type==\"Ready\")].reason}}'",
        kubeconfig.display()
    );
    until_output(&path, &ready, "Unknown/Progressing", 30);
    until_output(&path, &ready, "True/ReconciliationSucceeded", 60);
    // A failing workload: the simulator fails the next rollout of the annotated Deployment.
    let deployment = format!("KUBECONFIG={} kubectl -n demo", kubeconfig.display());
    ok(
        &path,
        &format!("{deployment} annotate deployment hello-web kube-emu.opmodel.dev/simulate=fail"),
    );
    ok(
        &path,
        &line(&summary, &["kubectl patch mi/hello"])
            .replace(r#""logLevel":"debug""#, r#""replicas":2"#),
    );
    until_output(&path, &ready, "False/HealthCheckFailed", 60);
    let described = ok(&path, &format!("{deployment} describe mi hello"));
    let tail = &described[described.find("Events:").unwrap_or(0)..];
    assert!(
        tail.contains("HealthCheckFailed") && tail.contains("Deployment/demo/hello-web"),
        "{described}"
    );
    let plat = kubectl(
        &kb,
        &kubeconfig,
        &[
            "get",
            "platform",
            "cluster",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
        None,
    );
    assert_eq!(String::from_utf8(plat.stdout).unwrap(), "True");
    // Ctrl-C stops it as cleanly as SIGTERM.
    dev.stop("INT");
}

/// The README line of the dev session containing `fragment`, as a user pastes it after
/// `export KUBECONFIG=…` (the session's first line).
fn readme_line(kubeconfig: &Path, fragment: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains(fragment))
        .unwrap_or_else(|| panic!("no README line with {fragment:?}"));
    format!("export KUBECONFIG={}; {line}", kubeconfig.display())
}

/// Issue 40's README lines: `kubectl explain` of the new fields, `logLevel` moved into a
/// watched Secret (its change re-renders at once), and the `dependsOn` pair (`prod/web` waits
/// for `demo/hello`, then follows it to Ready).
fn readme_gitops_lines(path: &OsStr, kubeconfig: &Path) {
    let line = |fragment: &str| readme_line(kubeconfig, fragment);
    let explained = ok(path, &line("kubectl explain mi.spec.valuesFrom"));
    for field in ["targetPath", "valuesKey", "readyExpr", "ignore", "mode"] {
        assert!(explained.contains(field), "{field}: {explained}");
    }
    ok(path, &line("kubectl create secret generic hello-values"));
    ok(
        path,
        &line(r#""valuesFrom":[{"kind":"Secret","name":"hello-values"}]"#),
    );
    let cm = line("# warn: from the Secret");
    until_output(path, &cm, "warn", 60);
    ok(path, &line("kubectl patch secret hello-values"));
    until_output(path, &cm, "debug", 30);
    ok(path, &line(r#"{"spec":{"suspend":true}}"#));
    let ready = format!(
        "export KUBECONFIG={}; kubectl get mi hello -n demo -o jsonpath='{{.status.conditions[?(@.type==\"Ready\")].reason}}'",
        kubeconfig.display()
    );
    until_output(path, &ready, "Suspended", 30);
    ok(
        path,
        &line(r#""dependsOn":[{"name":"hello","namespace":"demo"}]"#),
    );
    until_output(
        path,
        &line("# DependencyNotReady"),
        "DependencyNotReady",
        30,
    );
    ok(path, &line(r#"{"spec":{"suspend":false}}"#));
    ok(
        path,
        &line("kubectl wait --for=condition=Ready mi/web -n prod"),
    );
}

/// A corrupt snapshot stops `dev` at start with an error naming the file, and the file is kept.
#[test]
fn a_corrupt_state_snapshot_fails_the_start_and_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let snapshot = state.join("cluster.json");
    std::fs::write(&snapshot, b"{\"format\": 1, \"objects\": [").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["dev", "--port-base", "0", "--state-dir"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("snapshot {} is corrupt", snapshot.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&snapshot).unwrap(),
        b"{\"format\": 1, \"objects\": ["
    );
}

/// One `dev --layout` session (issue 28 item 4).
struct LayoutCase<'a> {
    /// The OCI layout.
    layout: &'a Path,
    /// Flags after `--layout` (catalogs, generator flags).
    flags: &'a [&'a str],
    /// Manifests a cluster admin applies first (CRDs the module's objects need).
    manifests: &'a [&'a str],
    /// `spec.module` of the ModuleInstance.
    module: serde_json::Value,
    /// `spec.values`.
    values: serde_json::Value,
    /// Kinds (`kind.group`, as `rendered` names them) the render must include.
    kinds: &'a [&'a str],
    /// A values edit (merge patch of `spec.values`) and what it changes: kind, name, jsonpath,
    /// the value before and after.
    edit: (
        serde_json::Value,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
    ),
}

/// The objects of a render API answer as `kubectl get` arguments (`kind.group`, name).
fn rendered(answer: &serde_json::Value) -> Vec<(String, String)> {
    answer["objects"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|o| {
            let ob = &o["object"];
            let api = ob["apiVersion"].as_str().unwrap();
            let kind = ob["kind"].as_str().unwrap().to_lowercase();
            let kind = match api.rsplit_once('/') {
                Some((group, _)) => format!("{kind}.{group}"),
                None => kind,
            };
            (kind, ob["metadata"]["name"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// Files of a directory tree with their contents (to show a layout is never written).
fn tree(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn layout_session(case: &LayoutCase) {
    const NS: &str = "demo";
    const NAME: &str = "app";
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let kubeconfig = state.join("kubeconfig");
    let kb = kubectls::bin(Version::V1_37);
    let before = tree(case.layout);
    let mut args: Vec<&OsStr> = vec![OsStr::new("--layout"), case.layout.as_os_str()];
    args.extend(case.flags.iter().map(OsStr::new));
    let mut dev = Dev::start_with(&state, &args);
    let summary = dev.summary();
    let catalog = case.flags[case.flags.iter().position(|f| *f == "--catalog").unwrap() + 1];
    let (path, version) = catalog.split_once('=').unwrap();
    line(
        &summary,
        &["Platform cluster subscribing", &format!("{path} {version}")],
    );
    let run = |args: &[&str], stdin: Option<&str>| {
        let out = kubectl(&kb, &kubeconfig, args, stdin);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    run(
        &[
            "wait",
            "--for=condition=Ready",
            "platform/cluster",
            "--timeout=60s",
        ],
        None,
    );
    // No example: the layout holds the user's modules, not ours.
    assert_eq!(run(&["get", "mi", "-A", "-o", "name"], None), "");
    for m in case.manifests {
        run(&["apply", "-f", "-"], Some(m));
    }
    let instance = serde_json::json!({
        "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"module": case.module, "values": case.values, "prune": true},
    });
    run(&["apply", "-f", "-"], Some(&instance.to_string()));
    run(
        &[
            "wait",
            "--for=condition=Ready",
            &format!("mi/{NAME}"),
            "-n",
            NS,
            "--timeout=120s",
        ],
        None,
    );

    // The render API (mode render, the instance as applied) gives the live objects, each with
    // the OPM labels.
    let port = line(&summary, &["render API"])
        .split("https://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_owned();
    let token = std::fs::read_to_string(state.join("token")).unwrap();
    let api = |body: &serde_json::Value| -> serde_json::Value {
        let out = Command::new("curl")
            .args(["-sS", "--fail-with-body", "--cacert"])
            .arg(state.join("certs/ca.crt"))
            .args([
                "-H",
                &format!("Authorization: Bearer {}", token.trim()),
                "-H",
                "content-type: application/json",
                "-d",
                &body.to_string(),
                &format!("https://127.0.0.1:{port}/v1/namespaces/{NS}/render"),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        serde_json::from_str(&text).unwrap()
    };
    let live_instance: serde_json::Value =
        serde_json::from_str(&run(&["get", "mi", NAME, "-n", NS, "-o", "json"], None)).unwrap();
    let answer = api(&serde_json::json!({"mode": "render", "instance": live_instance}));
    let objects = rendered(&answer);
    assert!(!objects.is_empty(), "{answer}");
    for kind in case.kinds {
        assert!(
            objects.iter().any(|(k, _)| k == kind),
            "{kind}: {objects:?}"
        );
    }
    for (kind, name) in &objects {
        let labels = run(
            &[
                "get",
                kind,
                name,
                "-n",
                NS,
                "-o",
                "jsonpath={.metadata.labels}",
            ],
            None,
        );
        let labels: serde_json::Value = serde_json::from_str(&labels).unwrap();
        assert_eq!(
            labels["module-instance.opmodel.dev/name"], NAME,
            "{kind}/{name}"
        );
        assert_eq!(
            labels["app.kubernetes.io/managed-by"], "opm-controller",
            "{kind}/{name}"
        );
    }
    // Mode diff of the instance as applied: every object unchanged, nothing to prune.
    let diff = api(&serde_json::json!({"mode": "diff", "instance": live_instance}));
    for r in diff["results"].as_array().unwrap() {
        assert_eq!(r["result"], "unchanged", "{diff}");
    }
    assert_eq!(diff["prune"], serde_json::json!([]), "{diff}");

    // A values edit re-renders.
    let (patch, kind, name, jsonpath, was, want) = &case.edit;
    let get = |jp: &str| {
        run(
            &["get", kind, name, "-n", NS, "-o", &format!("jsonpath={jp}")],
            None,
        )
    };
    assert_eq!(get(jsonpath), *was);
    // The diff against the live objects shows the edit before it is applied.
    let mut edited = case.values.clone();
    for (k, v) in patch.as_object().unwrap() {
        edited[k] = v.clone();
    }
    let preview = api(&serde_json::json!({
        "mode": "diff", "name": NAME, "module": case.module, "values": edited,
    }));
    assert!(
        preview["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["result"] == "update"),
        "{preview}"
    );
    run(
        &[
            "patch",
            &format!("mi/{NAME}"),
            "-n",
            NS,
            "--type=merge",
            "-p",
            &serde_json::json!({"spec": {"values": patch}}).to_string(),
        ],
        None,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(jsonpath) != *want {
        assert!(
            Instant::now() < deadline,
            "{kind}/{name} {jsonpath} never became {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Delete with prune: true deletes them.
    run(
        &[
            "delete",
            "mi",
            NAME,
            "-n",
            NS,
            "--wait=true",
            "--timeout=60s",
        ],
        None,
    );
    for (kind, name) in &objects {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = kubectl(&kb, &kubeconfig, &["get", kind, name, "-n", NS], None);
            if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound") {
                break;
            }
            assert!(Instant::now() < deadline, "{kind}/{name} was not pruned");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    dev.stop("TERM");
    assert!(
        tree(case.layout) == before,
        "dev --layout wrote into the user's layout"
    );
}

/// `dev --layout` on the fixture set published into a layout of its own, with the fixture core's
/// generator flags: Platform `cluster` subscribes `mini`, a ModuleInstance of `demo` becomes
/// Ready with OPM-labelled objects, a values edit re-renders, the render API gives the same
/// objects and an empty diff, and a delete prunes them.
#[test]
fn dev_layout_runs_the_operator_on_the_modules_of_a_users_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm");
    for m in ["core", "kube", "mini", "gateway", "demo"] {
        let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
            .args(["module", "publish"])
            .arg(fixtures.join(m))
            .args(["v0.1.0", "--no-cache", "--layout"])
            .arg(&layout)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let values: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("values/valid.json")).unwrap())
            .unwrap();
    layout_session(&LayoutCase {
        layout: &layout,
        flags: &[
            "--catalog",
            "fixtures.test/catalogs/mini@v0=0.1.0",
            "--core-module",
            "fixtures.test/core@v0",
            "--core-version",
            "v0.1.0",
        ],
        manifests: &[],
        module: serde_json::json!({"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"}),
        values,
        kinds: &["deployment.apps", "configmap"],
        edit: (
            serde_json::json!({"logLevel": "debug"}),
            "configmap",
            "settings",
            "{.data.log-level}",
            "info",
            "debug",
        ),
    });
}

/// `dev --layout` on the kinds fixture (`fixtures/opm/kinds`: a catalog rendering any object as
/// written, and a module of a CronJob, a HorizontalPodAutoscaler and a cluster-scoped
/// MutatingWebhookConfiguration): the instance becomes Ready in the embedded cluster, which
/// serves every built-in kind (issue 42), a values edit re-renders the CronJob, delete prunes.
#[test]
fn dev_layout_runs_a_module_of_cronjob_hpa_and_mutating_webhook() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm");
    for m in ["core", "kinds/catalog", "kinds/module"] {
        let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
            .args(["module", "publish"])
            .arg(fixtures.join(m))
            .args(["v0.1.0", "--no-cache", "--layout"])
            .arg(&layout)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{m}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    layout_session(&LayoutCase {
        layout: &layout,
        flags: &[
            "--catalog",
            "fixtures.test/catalogs/kinds@v0=0.1.0",
            "--core-module",
            "fixtures.test/core@v0",
            "--core-version",
            "v0.1.0",
        ],
        manifests: &[],
        module: serde_json::json!({"path": "fixtures.test/modules/kinds@v0", "version": "v0.1.0"}),
        values: serde_json::json!({}),
        kinds: &[
            "cronjob.batch",
            "horizontalpodautoscaler.autoscaling",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io",
        ],
        edit: (
            serde_json::json!({"schedule": "0 4 * * *"}),
            "cronjob",
            "app-nightly",
            "{.spec.schedule}",
            "0 3 * * *",
            "0 4 * * *",
        ),
    });
}

/// A minimal stand-in for the Gateway API's HTTPRoute CRD (web_app renders an HTTPRoute; a real
/// cluster installs gateway-api's CRDs).
const HTTPROUTE_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "httproutes.gateway.networking.k8s.io"},
 "spec": {"group": "gateway.networking.k8s.io", "scope": "Namespaced",
  "names": {"kind": "HTTPRoute", "listKind": "HTTPRouteList", "plural": "httproutes", "singular": "httproute"},
  "versions": [{"name": "v1", "served": true, "storage": true,
   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;

/// The same session on the public OPM catalog and `web_app` (issue 28 item 4), from the output
/// directory of `scripts/opm-real.sh WS OUT` named by `OPM_REAL_OUT` (its `layout/` and the
/// harness's values `runs/web_app.values.json`).
#[test]
fn dev_layout_runs_web_app_on_the_real_opm_catalog() {
    let Some(out) = std::env::var_os("OPM_REAL_OUT") else {
        println!(
            "skipped: OPM_REAL_OUT is not set (run scripts/opm-real.sh WS OUT, then set \
             OPM_REAL_OUT=OUT; the real OPM sources are never part of CI)"
        );
        return;
    };
    let out = Path::new(&out);
    let values: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("runs/web_app.values.json"))
            .unwrap_or_else(|e| panic!("{}: {e}", out.display())),
    )
    .unwrap();
    layout_session(&LayoutCase {
        layout: &out.join("layout"),
        flags: &[
            "--catalog",
            "opmodel.dev/catalogs/opm@v2=2.0.0-alpha.4",
            "--platform-shape",
            "subscription",
        ],
        manifests: &[HTTPROUTE_CRD],
        module: serde_json::json!({"path": "testing.opmodel.dev/modules/web_app@v1", "version": "v1.0.0"}),
        values,
        kinds: &[],
        edit: (
            serde_json::json!({"replicas": 3}),
            "deployment.apps",
            "app-web",
            "{.spec.replicas}",
            "2",
            "3",
        ),
    });
}
