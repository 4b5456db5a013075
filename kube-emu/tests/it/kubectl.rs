//! The real kubectl against the emulator: a scripted session over a kubeconfig in a temp dir.
//!
//! kubectl is found through `KUBECTL` or `PATH`; scripts/setup.sh installs Debian's
//! `kubernetes-client` (kubectl v1.20), which the session is written for.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::common::*;

fn find_kubectl() -> PathBuf {
    if let Ok(k) = std::env::var("KUBECTL") {
        return PathBuf::from(k);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join("kubectl");
        if p.is_file() {
            return p;
        }
    }
    panic!("kubectl not found (set KUBECTL or run scripts/setup.sh, which installs Debian's kubernetes-client)");
}

struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
}

struct Out {
    ok: bool,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scripted_session() {
    let bin = find_kubectl();
    let tmp = tempfile::tempdir().unwrap();
    let emu = start().await;
    std::fs::write(tmp.path().join("kubeconfig"), emu.kubeconfig_yaml()).unwrap();
    let k = Kubectl {
        bin,
        dir: Path::new(tmp.path()).to_path_buf(),
    };
    let version = k.ok(&["version", "--client", "--short"]).await;
    eprintln!("kubectl: {}", version.trim());

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
    let w = k.json(&["get", "widget", "w1"]).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_over_https() {
    let bin = find_kubectl();
    let tmp = tempfile::tempdir().unwrap();
    let emu = kube_emu::Emulator::start(kube_emu::Options {
        tls: true,
        ..Default::default()
    })
    .await
    .unwrap();
    std::fs::write(tmp.path().join("kubeconfig"), emu.kubeconfig_yaml()).unwrap();
    let k = Kubectl {
        bin,
        dir: Path::new(tmp.path()).to_path_buf(),
    };
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
async fn with_operator_crds() -> (kube_emu::Emulator, Kubectl, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let emu = start().await;
    std::fs::write(tmp.path().join("kubeconfig"), emu.kubeconfig_yaml()).unwrap();
    let k = Kubectl {
        bin: find_kubectl(),
        dir: Path::new(tmp.path()).to_path_buf(),
    };
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_the_crd_printer_columns() {
    let (emu, k, _tmp) = with_operator_crds().await;
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

    // Built-in kinds: NAME and AGE.
    let out = k.ok(&["get", "namespaces"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE"], "{out}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_is_refused_by_the_crd_validation_rules() {
    let (_emu, k, _tmp) = with_operator_crds().await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_crd_schemas() {
    let (emu, k, _tmp) = with_operator_crds().await;

    let out = k.ok(&["explain", "moduleinstance.spec"]).await;
    assert!(out.contains("KIND:     ModuleInstance"), "{out}");
    assert!(out.contains("VERSION:  opmodel.dev/v1alpha1"), "{out}");
    assert!(out.contains("RESOURCE: spec <Object>"), "{out}");
    assert!(out.contains("module\t<Object> -required-"), "{out}");
    assert!(out.contains("The module to instantiate."), "{out}");
    let out = k.ok(&["explain", "mi.spec.module.version"]).await;
    assert!(out.contains("FIELD:    version <string>"), "{out}");
    assert!(out.contains("Module version"), "{out}");
    let out = k.ok(&["explain", "platform"]).await;
    assert!(out.contains("KIND:     Platform"), "{out}");

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_an_immutable_field_refusal_as_against_a_real_cluster() {
    let (_emu, k, _tmp) = with_operator_crds().await;
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
