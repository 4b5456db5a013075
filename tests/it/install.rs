//! The install, executed (issue 39 item 2): `kubectl apply -k deploy/` on a cluster that enforces
//! RBAC, then the operator run from the image's root filesystem the way the kubelet runs the
//! Deployment's container, with the permissions `deploy/rbac.yaml` grants and nothing more.
//!
//! The pieces, all real processes in one network namespace of their own (`ip netns`: the
//! Deployment's fixed ports, 9443/8081/8080, cannot collide with anything else on the machine, as
//! in a pod):
//! - the cluster: the `kube-emu` binary over HTTPS, workload simulator on, an audit log of every
//!   request (`audit.k8s.io/v1` events); Debian's `docker-registry` with the fixture modules;
//! - the user: kubectl (once per tested version) applying `deploy/` server-side after the two
//!   cert-manager CRDs it uses (the test plays cert-manager: it issues the webhook's serving
//!   certificate into the Secret and injects the caBundle), then the per-cluster settings a user
//!   gives (the registry mapping with `kubectl set env`, and the fixture core module as extra args);
//! - the kubelet: reads the Deployment back from the API server and starts its container from
//!   the OCI archive `scripts/image.sh` writes (`target/image/opm-operator.oci.tar`): the image's
//!   layers unpacked, its entrypoint and the container's args and env (downward API resolved), the
//!   service-account token (TokenRequest), the cluster CA and the namespace at
//!   `/var/run/secrets/kubernetes.io/serviceaccount/`, the TLS Secret at its mount path, one fresh
//!   directory per `emptyDir`, a read-only root (`readOnlyRootFilesystem`), as the pod's user
//!   (`runAsUser`), with `KUBERNETES_SERVICE_HOST/PORT` (`unshare -m` + `chroot --userspec`);
//! - then: the startup probe's path answers on its port, an AdmissionReview POSTed to the path
//!   of the ValidatingWebhookConfiguration (by its Service DNS name, verified against the
//!   injected caBundle) is answered, the Platform and two ModuleInstances (one applying as a
//!   tenant ServiceAccount, one as the operator) become Ready, a tenant renders through the REST
//!   API with a token bound to `opm-render`, and deleting the instances prunes their objects.
//!
//! Least privilege, proven: every request of the operator's ServiceAccount is in the audit log.
//! A request RBAC refused fails the test (so a rule missing from `deploy/rbac.yaml` fails it),
//! and every permission the operator's roles grant must have been used, or be listed in
//! [`GRANTED_NOT_EXERCISED`] with the reason it is granted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(
    clippy::disallowed_methods,
    reason = "a synchronous test polling child processes (no runtime to yield to)"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::e2e::{kube_emu_binary, opm, valid_values, Children};
use crate::kubectls::{self, Version};

const DEMO: &str = "fixtures.test/modules/demo@v0";
const MINI: &str = "fixtures.test/catalogs/mini@v0";
const OPERATOR_SA: &str = "system:serviceaccount:opm-system:opm-operator";
/// The API server's port inside the namespace.
const API_PORT: u16 = 6443;
const REGISTRY: &str = "127.0.0.1:5000";

/// Permissions `deploy/rbac.yaml` grants the operator that this scenario does not use, each with
/// why it is granted: `(apiGroup, resource[/subresource], verb, reason)`. A permission listed here
/// that is no longer granted fails the test too, so the list only holds what is true.
const GRANTED_NOT_EXERCISED: &[(&str, &str, &str, &str)] = &[
    (
        "opmodel.dev",
        "modulepackages",
        "get",
        "the ModulePackage reconciler: no package in this scenario",
    ),
    (
        "opmodel.dev",
        "modulepackages",
        "patch",
        "the ModulePackage finalizer: no package in this scenario",
    ),
    (
        "opmodel.dev",
        "modulepackages/status",
        "patch",
        "the ModulePackage status: no package in this scenario",
    ),
    (
        "opmodel.dev",
        "transformerregistrations",
        "get",
        "the claim reconciler: no claim in this scenario",
    ),
    (
        "opmodel.dev",
        "transformerregistrations",
        "patch",
        "the dependents finalizer: no claim in this scenario",
    ),
    (
        "opmodel.dev",
        "transformerregistrations/status",
        "patch",
        "the claim verdict: no claim in this scenario",
    ),
    (
        "source.toolkit.fluxcd.io",
        "ocirepositories",
        "get",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "ocirepositories",
        "list",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "ocirepositories",
        "watch",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "gitrepositories",
        "get",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "gitrepositories",
        "list",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "gitrepositories",
        "watch",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "buckets",
        "get",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "buckets",
        "list",
        "ModulePackage sources, when Flux is installed",
    ),
    (
        "source.toolkit.fluxcd.io",
        "buckets",
        "watch",
        "ModulePackage sources, when Flux is installed",
    ),
];

/// The kinds `opm-operator-apply` grants for modules applied as the operator (no tenant
/// ServiceAccount): what a typical module renders. The fixture module renders a Deployment and
/// ConfigMaps, whose every granted verb must be used; every other kind of that role is granted
/// for other modules, with no verb beyond those the rendered kinds used.
const APPLY_ROLE: &str = "opm-operator-apply";

/// A network namespace of its own, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("opm-install-{}-{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let add = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(
            add.status.success(),
            "ip netns add: {}",
            String::from_utf8_lossy(&add.stderr)
        );
        let up = Command::new("ip")
            .args(["-n", &name, "link", "set", "lo", "up"])
            .output()
            .unwrap();
        assert!(
            up.status.success(),
            "{}",
            String::from_utf8_lossy(&up.stderr)
        );
        Netns(name)
    }

    /// `program` run inside the namespace.
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn run(mut c: Command, stdin: Option<&[u8]>) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut si = child.stdin.take().unwrap();
        if let Some(input) = stdin {
            si.write_all(input).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

/// kubectl of one version inside the namespace, as the cluster admin.
struct Kubectl<'a> {
    ns: &'a Netns,
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl<'_> {
    fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut c = self.ns.cmd(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        run(c, stdin)
    }

    fn ok(&self, args: &[&str], stdin: Option<&[u8]>, ctx: &Children) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            ctx.logs()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str], ctx: &Children) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a, None, ctx)).unwrap()
    }
}

fn until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

/// The OCI archive `scripts/image.sh` writes: `<target>/image/opm-operator.oci.tar`, next to the
/// profile directory of this test binary.
fn image_archive() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // <target>/<profile>/deps/it-<hash> → <target>/image/opm-operator.oci.tar
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap();
    let archive = target.join("image/opm-operator.oci.tar");
    assert!(
        archive.is_file(),
        "{} is missing: the install test runs the operator from its image; `bash scripts/image.sh` \
         builds it (scripts/test.sh does, before the tests)",
        archive.display()
    );
    archive
}

/// The parts of an image config the kubelet reads.
struct ImageConfig {
    user: String,
    entrypoint: Vec<String>,
    env: Vec<String>,
    labels: BTreeMap<String, String>,
}

/// Unpacks the image's layers (in order) into `root` and returns its config.
fn unpack_image(archive: &Path, root: &Path) -> ImageConfig {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        files.insert(path, data);
    }
    let blob = |digest: &str| -> &Vec<u8> {
        let path = format!("blobs/{}", digest.replacen(':', "/", 1));
        files
            .get(&path)
            .unwrap_or_else(|| panic!("{path} missing from the archive"))
    };
    let index: Value = serde_json::from_slice(&files["index.json"]).unwrap();
    let manifest: Value =
        serde_json::from_slice(blob(index["manifests"][0]["digest"].as_str().unwrap())).unwrap();
    let config: Value =
        serde_json::from_slice(blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    std::fs::create_dir_all(root).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        let data = blob(layer["digest"].as_str().unwrap());
        let media = layer["mediaType"].as_str().unwrap();
        let reader: Box<dyn std::io::Read> = if media.ends_with("gzip") {
            Box::new(flate2::read::GzDecoder::new(&data[..]))
        } else {
            Box::new(&data[..])
        };
        let mut layer_tar = tar::Archive::new(reader);
        layer_tar.set_preserve_permissions(true);
        layer_tar.set_preserve_ownerships(true);
        layer_tar.unpack(root).unwrap();
    }
    let c = &config["config"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    ImageConfig {
        user: c["User"].as_str().unwrap_or("").to_owned(),
        entrypoint: strings(&c["Entrypoint"]),
        env: strings(&c["Env"]),
        labels: c["Labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Quotes a word for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// One permission: (apiGroup, resource[/subresource], verb).
type Perm = (String, String, String);

/// What the roles bound to the operator's ServiceAccount grant, expanded to single permissions
/// (no wildcards are granted; a wildcard would fail here).
fn granted(manifests: &[Value]) -> BTreeSet<Perm> {
    let bound_to_operator = |b: &Value| {
        b["subjects"].as_array().is_some_and(|s| {
            s.iter().any(|s| {
                s["kind"] == "ServiceAccount"
                    && s["name"] == "opm-operator"
                    && s["namespace"] == "opm-system"
            })
        })
    };
    let roles: BTreeSet<(String, String)> = manifests
        .iter()
        .filter(|m| m["kind"] == "ClusterRoleBinding" || m["kind"] == "RoleBinding")
        .filter(|b| bound_to_operator(b))
        .map(|b| {
            (
                b["roleRef"]["kind"].as_str().unwrap().to_owned(),
                b["roleRef"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut out = BTreeSet::new();
    for m in manifests {
        let kind = m["kind"].as_str().unwrap_or("");
        let name = m["metadata"]["name"].as_str().unwrap_or("");
        if !roles.contains(&(kind.to_owned(), name.to_owned())) {
            continue;
        }
        for rule in m["rules"].as_array().unwrap() {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
                    .unwrap_or_default()
            };
            for g in list("apiGroups") {
                for r in list("resources") {
                    for v in list("verbs") {
                        assert!(
                            g != "*" && r != "*" && v != "*",
                            "{kind} {name} grants a wildcard: {rule}"
                        );
                        out.insert((g.clone(), r.clone(), v));
                    }
                }
            }
        }
    }
    out
}

/// The resources of the role `name` (for the documented apply-role exception).
fn role_resources(manifests: &[Value], name: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for m in manifests
        .iter()
        .filter(|m| m["kind"] == "ClusterRole" && m["metadata"]["name"] == name)
    {
        for rule in m["rules"].as_array().unwrap() {
            for g in rule["apiGroups"].as_array().unwrap() {
                for r in rule["resources"].as_array().unwrap() {
                    out.insert((
                        g.as_str().unwrap().to_owned(),
                        r.as_str().unwrap().to_owned(),
                    ));
                }
            }
        }
    }
    out
}

/// The operator's requests in the audit log: what it used, and what RBAC refused.
fn audited(log: &str) -> (BTreeSet<Perm>, Vec<String>) {
    let mut used = BTreeSet::new();
    let mut refused = Vec::new();
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let e: Value = serde_json::from_str(line).unwrap();
        if e["user"]["username"] != OPERATOR_SA {
            continue;
        }
        let o = &e["objectRef"];
        let Some(resource) = o["resource"].as_str() else {
            continue; // discovery, /version: allowed to every authenticated user
        };
        let resource = match o["subresource"].as_str() {
            Some(s) if !s.is_empty() => format!("{resource}/{s}"),
            _ => resource.to_owned(),
        };
        let group = o["apiGroup"].as_str().unwrap_or("").to_owned();
        let verb = e["verb"].as_str().unwrap().to_owned();
        let code = e["responseStatus"]["code"].as_u64().unwrap_or(0);
        if code == 403 {
            refused.push(format!(
                "{verb} {group}/{resource} {} (as {})",
                e["requestURI"].as_str().unwrap_or(""),
                e["impersonatedUser"]["username"]
                    .as_str()
                    .unwrap_or("itself")
            ));
        }
        if e["impersonatedUser"].is_object() {
            // Authorized against the impersonated ServiceAccount; the operator itself used
            // `impersonate`, which the API server audits as its own request.
            used.insert((
                String::new(),
                "serviceaccounts".into(),
                "impersonate".into(),
            ));
            continue;
        }
        // An apply that created its object (201) was authorized as `create` too.
        if verb == "patch" && code == 201 {
            used.insert((group.clone(), resource.clone(), "create".to_owned()));
        }
        used.insert((group, resource, verb));
    }
    (used, refused)
}

/// The kubelet's part: the container of the Deployment `deploy`, from the image unpacked at
/// `root`, started inside `ns`. Returns the child's index in `children`.
#[allow(clippy::too_many_arguments)]
fn start_container(
    ns: &Netns,
    children: &mut Children,
    k: &Kubectl<'_>,
    image: &ImageConfig,
    root: &Path,
    pod: &Path,
    deploy: &Value,
    token: &str,
    kube_ca: &str,
) -> usize {
    let spec = &deploy["spec"]["template"]["spec"];
    let container = &spec["containers"][0];
    let pod_name = "opm-operator-7d9f8b6c5-x2k4q";
    let namespace = deploy["metadata"]["namespace"].as_str().unwrap();
    // The security context the pod asks for, and the one the image declares.
    let uid = spec["securityContext"]["runAsUser"].as_u64().unwrap();
    let gid = spec["securityContext"]["runAsGroup"]
        .as_u64()
        .unwrap_or(uid);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        image.user,
        format!("{uid}:{gid}"),
        "image user vs runAsUser"
    );
    let read_only = container["securityContext"]["readOnlyRootFilesystem"] == true;
    assert!(
        read_only,
        "the container must ask for a read-only root filesystem"
    );

    // Volumes.
    let mut mounts: Vec<(PathBuf, String, bool)> = Vec::new(); // (source, path in root, ro)
    let volumes: BTreeMap<String, Value> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().to_owned(), v.clone()))
        .collect();
    for m in container["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let v = &volumes[name];
        let src = pod.join("volumes").join(name);
        std::fs::create_dir_all(&src).unwrap();
        if let Some(secret) = v["secret"]["secretName"].as_str() {
            let s = k.json(&["get", "secret", secret, "-n", namespace], children);
            for (key, value) in s["data"].as_object().unwrap() {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(value.as_str().unwrap())
                    .unwrap();
                std::fs::write(src.join(key), bytes).unwrap();
            }
        } else {
            assert!(v["emptyDir"].is_object(), "volume {name}: {v}");
        }
        // fsGroup: the pod's group owns its volumes.
        chown_r(&src, uid, gid);
        mounts.push((
            src,
            m["mountPath"].as_str().unwrap().to_owned(),
            m["readOnly"] == true,
        ));
    }
    // The projected service-account volume.
    assert_ne!(spec["automountServiceAccountToken"], false);
    let sa = pod.join("volumes/kube-api-access");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::write(sa.join("token"), token).unwrap();
    std::fs::write(sa.join("ca.crt"), kube_ca).unwrap();
    std::fs::write(sa.join("namespace"), namespace).unwrap();
    chown_r(&sa, uid, gid);
    mounts.push((
        sa,
        "/var/run/secrets/kubernetes.io/serviceaccount".into(),
        true,
    ));

    // Environment: the image's, the Service variables, then the container's (downward API).
    let mut env: Vec<(String, String)> = image
        .env
        .iter()
        .map(|e| {
            let (k, v) = e.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    env.push(("HOSTNAME".into(), pod_name.into()));
    env.push(("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()));
    env.push(("KUBERNETES_SERVICE_PORT".into(), API_PORT.to_string()));
    for e in container["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap().to_owned();
        let value = if let Some(v) = e["value"].as_str() {
            v.to_owned()
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.namespace") => namespace.to_owned(),
                Some("metadata.name") => pod_name.to_owned(),
                other => panic!("env {name}: unsupported source {other:?}"),
            }
        };
        env.push((name, value));
    }
    env.push(("RUST_LOG".into(), "info".into()));

    // The command line: the image's entrypoint, the container's args.
    assert!(
        container["command"].is_null(),
        "the container keeps the image's entrypoint"
    );
    let mut argv = image.entrypoint.clone();
    argv.extend(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );

    // The script of the mount namespace: the root bound onto itself, mount points created,
    // volumes bound (read-only where asked), /proc and a minimal /dev, then the root read-only,
    // then the binary as the pod's user.
    let r = root.display().to_string();
    let mut script = vec![
        "set -e".to_owned(),
        format!("mount --bind {0} {0}", sh_quote(&r)),
    ];
    for (src, path, ro) in &mounts {
        let target = format!("{r}{path}");
        script.push(format!("mkdir -p {}", sh_quote(&target)));
        script.push(format!(
            "mount --bind {} {}",
            sh_quote(&src.display().to_string()),
            sh_quote(&target)
        ));
        if *ro {
            script.push(format!("mount -o remount,ro,bind {}", sh_quote(&target)));
        }
    }
    script.push(format!("mkdir -p {0}/proc {0}/dev", sh_quote(&r)));
    script.push(format!("mount -t proc proc {}/proc", sh_quote(&r)));
    script.push(format!(
        "mount -t tmpfs -o mode=755 tmpfs {}/dev",
        sh_quote(&r)
    ));
    for d in ["null", "zero", "random", "urandom"] {
        script.push(format!("touch {}/dev/{d}", sh_quote(&r)));
        script.push(format!("mount --bind /dev/{d} {}/dev/{d}", sh_quote(&r)));
    }
    script.push(format!("mount -o remount,ro,bind {}", sh_quote(&r)));
    let env_words: Vec<String> = env
        .iter()
        .map(|(k, v)| sh_quote(&format!("{k}={v}")))
        .collect();
    let argv_words: Vec<String> = argv.iter().map(|a| sh_quote(a)).collect();
    script.push(format!(
        "exec env -i {} chroot --userspec={uid}:{gid} {} {}",
        env_words.join(" "),
        sh_quote(&r),
        argv_words.join(" ")
    ));
    let mut c = ns.cmd("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(script.join("\n"));
    children.spawn("operator (pod)", &mut c)
}

fn chown_r(path: &Path, uid: u64, gid: u64) {
    let out = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
}

/// `curl` inside the namespace.
fn curl(ns: &Netns, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut c = ns.cmd("curl");
    c.args(["-sS", "--max-time", "20"]).args(args);
    run(c, stdin)
}

/// A container port of the Deployment by name.
fn container_port(deploy: &Value, name: &str) -> u64 {
    deploy["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no port {name}"))["containerPort"]
        .as_u64()
        .unwrap()
}

/// The install scenario once per tested kubectl version.
mod kubectl_apply_k_deploy_installs_a_working_least_privilege_operator_from_its_image {
    #[test]
    fn v1_20() {
        super::install(super::Version::V1_20);
    }
    #[test]
    fn v1_37() {
        super::install(super::Version::V1_37);
    }
}

fn install(version: Version) {
    let t0 = Instant::now();
    let archive = image_archive();
    let dir = tempfile::tempdir().unwrap();
    let ns = Netns::new(match version {
        Version::V1_20 => "v120",
        Version::V1_37 => "v137",
    });
    let mut children = Children::default();

    // The image: a root filesystem with the binary and what it links, nothing to run a shell.
    let root = dir.path().join("rootfs");
    let image = unpack_image(&archive, &root);
    assert_eq!(image.user, "65532:65532");
    assert_eq!(image.entrypoint, ["/opm-operator"]);
    for absent in ["bin/sh", "bin/bash", "usr/bin/apt", "bin/busybox"] {
        assert!(!root.join(absent).exists(), "the image holds /{absent}");
    }
    for label in [
        "org.opencontainers.image.source",
        "org.opencontainers.image.version",
        "org.opencontainers.image.revision",
        "org.opencontainers.image.licenses",
    ] {
        assert!(image.labels.contains_key(label), "label {label} missing");
    }

    stage(t0, "registry");
    // The registry with the fixture modules.
    let reg_dir = dir.path().join("registry");
    std::fs::create_dir_all(&reg_dir).unwrap();
    std::fs::write(
        reg_dir.join("config.yml"),
        format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  \
             filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {REGISTRY}\n",
            reg_dir.join("storage").display()
        ),
    )
    .unwrap();
    let mut reg = ns.cmd("/usr/bin/docker-registry");
    reg.arg("serve").arg(reg_dir.join("config.yml"));
    children.spawn("docker-registry", &mut reg);
    let docker_config = dir.path().join("docker");
    std::fs::create_dir_all(&docker_config).unwrap();
    let mapping = format!("fixtures.test={REGISTRY}");
    let published = until(30, || {
        let mut c = ns.cmd(env!("CARGO_BIN_EXE_opm-operator"));
        c.args(["module", "publish"])
            .arg(opm().join("core"))
            .args(["v0.1.0", "--registry", &mapping])
            .env("DOCKER_CONFIG", &docker_config);
        run(c, None).status.success()
    });
    assert!(published, "publishing to the registry\n{}", children.logs());
    for m in ["kube", "mini", "demo"] {
        let mut c = ns.cmd(env!("CARGO_BIN_EXE_opm-operator"));
        c.args(["module", "publish"])
            .arg(opm().join(m))
            .args(["v0.1.0", "--registry", &mapping])
            .env("DOCKER_CONFIG", &docker_config);
        let out = run(c, None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    stage(t0, "cluster");
    // The cluster: HTTPS, audited, the webhook Service resolving to the pod's port.
    let kubeconfig = dir.path().join("kubeconfig");
    let kube_ca = dir.path().join("kube-ca.crt");
    let audit = dir.path().join("audit.jsonl");
    let mut emu = ns.cmd(kube_emu_binary());
    emu.args(["--port", &API_PORT.to_string(), "--tls", "--ca-file"])
        .arg(&kube_ca)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--audit-log")
        .arg(&audit)
        .args([
            "--simulate-workloads",
            "1s",
            "--service-url",
            "opm-system/opm-operator-webhook=https://127.0.0.1:9443",
        ]);
    let emu = children.spawn("kube-emu", &mut emu);
    assert!(
        until(30, || children.log(emu).contains("serving on")),
        "{}",
        children.logs()
    );
    let k = Kubectl {
        ns: &ns,
        bin: kubectls::bin(version),
        kubeconfig: kubeconfig.clone(),
    };

    stage(t0, "apply -k deploy/");
    // kubectl apply -k deploy/, server-side, after the cert-manager kinds it uses.
    let cm_crds =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/install/cert-manager-crds.yaml");
    k.ok(
        &["apply", "--server-side", "-f", cm_crds.to_str().unwrap()],
        None,
        &children,
    );
    let applied = until(30, || {
        // The CRDs just created may take a discovery refresh to be served.
        k.run(&["apply", "--server-side", "-k", "deploy/"], None)
            .status
            .success()
    });
    if !applied {
        k.ok(
            &["apply", "--server-side", "-k", "deploy/"],
            None,
            &children,
        );
    }
    for (kind, name, namespace) in [
        ("crd", "moduleinstances.opmodel.dev", ""),
        ("namespace", "opm-system", ""),
        ("serviceaccount", "opm-operator", "opm-system"),
        ("clusterrole", "opm-operator", ""),
        ("clusterrolebinding", "opm-operator-apply", ""),
        ("deployment", "opm-operator", "opm-system"),
        ("service", "opm-operator-webhook", "opm-system"),
        ("validatingwebhookconfiguration", "opm-operator", ""),
        ("certificate", "opm-operator-webhook", "opm-system"),
    ] {
        let mut args = vec!["get", kind, name];
        if !namespace.is_empty() {
            args.extend(["-n", namespace]);
        }
        k.ok(&args, None, &children);
    }
    // The rendered manifests, for the RBAC comparison below.
    let rendered = k.ok(&["kustomize", "deploy/"], None, &children);
    let manifests: Vec<Value> = rendered
        .split("\n---")
        .filter(|d| !d.trim().is_empty())
        .map(|d| crds::yaml::from_str(d).unwrap())
        .collect();

    stage(t0, "certificates");
    // cert-manager's part: the serving certificate for the Service's DNS names, and its CA as
    // the webhooks' caBundle.
    // Exactly the names deploy/certificate.yaml asks for: the API server verifies the Service's
    // DNS name, so a wrong name there fails the webhook call below.
    let certificate = manifests
        .iter()
        .find(|m| m["kind"] == "Certificate")
        .expect("deploy/ has a cert-manager Certificate");
    let dns_names: Vec<String> = certificate["spec"]["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    let ca = certs::self_signed::Ca::new("opm-operator-webhook-ca").unwrap();
    let serving = ca.issue_server(&dns_names).unwrap();
    let (crt, key, ca_pem) = (
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("webhook-ca.crt"),
    );
    std::fs::write(&crt, &serving.cert_pem).unwrap();
    std::fs::write(&key, &serving.key_pem).unwrap();
    std::fs::write(&ca_pem, ca.cert_pem()).unwrap();
    k.ok(
        &[
            "create",
            "secret",
            "tls",
            "opm-operator-webhook-tls",
            "-n",
            "opm-system",
            &format!("--cert={}", crt.display()),
            &format!("--key={}", key.display()),
        ],
        None,
        &children,
    );
    let vwc = k.json(
        &["get", "validatingwebhookconfiguration", "opm-operator"],
        &children,
    );
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca.cert_pem());
    let patch: Vec<Value> = (0..vwc["webhooks"].as_array().unwrap().len())
        .map(|i| json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}))
        .collect();
    k.ok(
        &[
            "patch",
            "validatingwebhookconfiguration",
            "opm-operator",
            "--type=json",
            "-p",
            &serde_json::to_string(&patch).unwrap(),
        ],
        None,
        &children,
    );

    // The user's settings for this cluster: where modules come from (documented: OPM_REGISTRY),
    // and, for the fixture set only, its core module.
    k.ok(
        &[
            "set",
            "env",
            "deployment/opm-operator",
            "-n",
            "opm-system",
            &format!("OPM_REGISTRY={mapping}"),
        ],
        None,
        &children,
    );
    let extra = json!([
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--core-module=fixtures.test/core@v0"},
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--core-version=v0.1.0"},
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--health-poll-interval=1s"},
    ]);
    k.ok(
        &[
            "patch",
            "deployment",
            "opm-operator",
            "-n",
            "opm-system",
            "--type=json",
            "-p",
            &extra.to_string(),
        ],
        None,
        &children,
    );

    stage(t0, "kubelet");
    // The kubelet: the pod template as stored, a token for its ServiceAccount, the container.
    let deploy = k.json(
        &["get", "deployment", "opm-operator", "-n", "opm-system"],
        &children,
    );
    let sa = deploy["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = token_for(&ns, &kubeconfig, &kube_ca, "opm-system", &sa);
    let pod = dir.path().join("pod");
    let operator = start_container(
        &ns,
        &mut children,
        &k,
        &image,
        &root,
        &pod,
        &deploy,
        &token,
        &std::fs::read_to_string(&kube_ca).unwrap(),
    );

    stage(t0, "startup probe");
    // The startup probe, as the kubelet runs it.
    let probe = &deploy["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["httpGet"];
    let probe_url = format!(
        "http://127.0.0.1:{}{}",
        container_port(&deploy, probe["port"].as_str().unwrap()),
        probe["path"].as_str().unwrap()
    );
    let ready = until(60, || curl(&ns, &["-f", &probe_url], None).status.success());
    children.assert_running();
    assert!(ready, "{probe_url} never answered\n{}", children.logs());

    stage(t0, "admission review");
    // An AdmissionReview to the path the webhook configuration names, by the Service's DNS
    // name, verified against the caBundle the API server uses.
    let hook = &vwc["webhooks"][1];
    assert_eq!(hook["name"], "platforms.opmodel.dev");
    let svc = &hook["clientConfig"]["service"];
    let host = format!(
        "{}.{}.svc",
        svc["name"].as_str().unwrap(),
        svc["namespace"].as_str().unwrap()
    );
    let url = format!(
        "https://{host}:{}{}",
        container_port(&deploy, "webhook"),
        svc["path"].as_str().unwrap()
    );
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7f0b2b4e-install-test",
            "kind": {"group": "opmodel.dev", "version": "v1alpha1", "kind": "Platform"},
            "resource": {"group": "opmodel.dev", "version": "v1alpha1", "resource": "platforms"},
            "name": "other",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "opmodel.dev/v1alpha1", "kind": "Platform",
                       "metadata": {"name": "other"}, "spec": {"type": "kubernetes"}},
            "dryRun": false,
        }
    });
    let out = curl(
        &ns,
        &[
            "-f",
            "--cacert",
            ca_pem.to_str().unwrap(),
            "--resolve",
            &format!("{host}:{}:127.0.0.1", container_port(&deploy, "webhook")),
            "-H",
            "content-type: application/json",
            "--data-binary",
            "@-",
            &url,
        ],
        Some(review.to_string().as_bytes()),
    );
    assert!(
        out.status.success(),
        "AdmissionReview to {url}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        children.logs()
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["response"]["uid"], "7f0b2b4e-install-test",
        "{answer}"
    );
    assert_eq!(answer["response"]["allowed"], false, "{answer}");

    stage(t0, "platform and instances");
    // The Platform (through the API server, so through the webhook) and two instances: one
    // applying as a tenant ServiceAccount (impersonated), one as the operator.
    let platform = json!({
        "apiVersion": "opmodel.dev/v1alpha1", "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes", "registry": {MINI: {"version": "0.1.0"}}},
    });
    k.ok(
        &["apply", "-f", "-"],
        Some(platform.to_string().as_bytes()),
        &children,
    );
    for team in ["team-a", "team-b"] {
        k.ok(&["create", "namespace", team], None, &children);
    }
    let tenant = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\n  namespace: team-a\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: deployer\n  namespace: team-a\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {APPLY_ROLE}\n\
         subjects:\n  - kind: ServiceAccount\n    name: deployer\n    namespace: team-a\n"
    );
    k.ok(&["apply", "-f", "-"], Some(tenant.as_bytes()), &children);
    for (team, sa) in [("team-a", Some("deployer")), ("team-b", None)] {
        let mut spec = json!({
            "module": {"path": DEMO, "version": "v0.1.0"},
            "values": valid_values(),
            "prune": true,
        });
        if let Some(sa) = sa {
            spec["serviceAccountName"] = json!(sa);
        }
        let mi = json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
            "metadata": {"name": "shop", "namespace": team}, "spec": spec,
        });
        k.ok(
            &["apply", "-f", "-"],
            Some(mi.to_string().as_bytes()),
            &children,
        );
    }
    for (what, ns_arg) in [
        ("platform/cluster", None),
        ("mi/shop", Some("team-a")),
        ("mi/shop", Some("team-b")),
    ] {
        let mut args = vec!["wait", "--for=condition=Ready", what, "--timeout=120s"];
        if let Some(n) = ns_arg {
            args.extend(["-n", n]);
        }
        let waited = k.run(&args, None);
        children.assert_running();
        assert!(
            waited.status.success(),
            "{what} {ns_arg:?} not Ready: {}\n{}",
            String::from_utf8_lossy(&waited.stderr),
            children.logs()
        );
    }
    for team in ["team-a", "team-b"] {
        let web = k.json(&["get", "deployment", "shop-web", "-n", team], &children);
        assert_eq!(
            web["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "opm-controller"
        );
    }

    stage(t0, "render API");
    // A tenant renders through the REST API: a token of a ServiceAccount bound to opm-render.
    let render_user = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: alice\n  namespace: team-b\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: alice-render\n  namespace: team-b\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: opm-render\n\
         subjects:\n  - kind: ServiceAccount\n    name: alice\n    namespace: team-b\n";
    k.ok(
        &["apply", "-f", "-"],
        Some(render_user.as_bytes()),
        &children,
    );
    let alice = token_for(&ns, &kubeconfig, &kube_ca, "team-b", "alice");
    let body = json!({
        "name": "preview",
        "module": {"path": DEMO, "version": "v0.1.0"},
        "values": valid_values(),
    });
    let out = curl(
        &ns,
        &[
            "-f",
            "--cacert",
            ca_pem.to_str().unwrap(),
            "--resolve",
            &format!("{host}:{}:127.0.0.1", container_port(&deploy, "webhook")),
            "-H",
            &format!("Authorization: Bearer {alice}"),
            "-H",
            "content-type: application/json",
            "--data-binary",
            "@-",
            &format!(
                "https://{host}:{}/v1/namespaces/team-b/render",
                container_port(&deploy, "webhook")
            ),
        ],
        Some(body.to_string().as_bytes()),
    );
    assert!(
        out.status.success(),
        "render API: {} {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        children.logs()
    );
    let rendered: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !rendered["objects"].as_array().unwrap().is_empty(),
        "{rendered}"
    );

    stage(t0, "deletion");
    // Deleting the instances prunes what they applied.
    for team in ["team-a", "team-b"] {
        k.ok(
            &["delete", "mi", "shop", "-n", team, "--timeout=120s"],
            None,
            &children,
        );
    }
    for team in ["team-a", "team-b"] {
        let gone = until(60, || {
            let out = k.run(
                &[
                    "get",
                    "deployment,configmap",
                    "-n",
                    team,
                    "-l",
                    "module-instance.opmodel.dev/name=shop",
                    "-o",
                    "name",
                ],
                None,
            );
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim().is_empty()
        });
        assert!(
            gone,
            "{team}: objects left after deletion\n{}",
            children.logs()
        );
    }

    stage(t0, "stop");
    // A clean stop (SIGTERM, as the kubelet stops a container).
    let pid = children.pid(operator);
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let stopped = until(30, || children.exited(operator));
    assert!(
        stopped,
        "the operator did not stop on SIGTERM\n{}",
        children.logs()
    );

    stage(t0, "audit");
    // Least privilege: nothing refused, nothing granted and unused but the documented.
    let log = std::fs::read_to_string(&audit).unwrap();
    let (used, refused) = audited(&log);
    assert!(
        refused.is_empty(),
        "RBAC refused the operator (a rule missing from deploy/rbac.yaml):\n{}",
        refused.join("\n")
    );
    let grants = granted(&manifests);
    let apply_role = role_resources(&manifests, APPLY_ROLE);
    let documented: BTreeSet<Perm> = GRANTED_NOT_EXERCISED
        .iter()
        .map(|(g, r, v, _)| (g.to_string(), r.to_string(), v.to_string()))
        .collect();
    let stale: Vec<&Perm> = documented.iter().filter(|p| !grants.contains(p)).collect();
    assert!(
        stale.is_empty(),
        "listed as granted but not granted: {stale:?}"
    );
    // The apply role: the kinds the module rendered (applied: patched) use every verb granted on
    // them; its other kinds are granted no verb the rendered ones did not use.
    let exercised: BTreeSet<&(String, String)> = apply_role
        .iter()
        .filter(|(g, r)| used.contains(&(g.clone(), r.clone(), "patch".to_owned())))
        .collect();
    assert!(
        exercised.len() >= 2,
        "the operator applied too little as itself to judge its apply role: {used:?}"
    );
    let apply_verbs: BTreeSet<&str> = used
        .iter()
        .filter(|(g, r, _)| exercised.contains(&(g.clone(), r.clone())))
        .map(|(_, _, v)| v.as_str())
        .collect();
    let unused: Vec<&Perm> = grants
        .iter()
        .filter(|p| !used.contains(*p) && !documented.contains(*p))
        .filter(|(g, r, v)| {
            let other_kind = apply_role.contains(&(g.clone(), r.clone()))
                && !exercised.contains(&(g.clone(), r.clone()));
            !(other_kind && apply_verbs.contains(v.as_str()))
        })
        .collect();
    assert!(
        unused.is_empty(),
        "granted by deploy/rbac.yaml but never used (remove, or list in GRANTED_NOT_EXERCISED with \
         the reason):\n{unused:#?}\nused:\n{used:#?}"
    );
    let ungranted: Vec<&Perm> = used
        .iter()
        .filter(|p| {
            !grants.contains(*p)
                && !DEFAULT_GRANTS.contains(&(p.0.as_str(), p.1.as_str(), p.2.as_str()))
        })
        .collect();
    assert!(
        ungranted.is_empty(),
        "used without a grant in deploy/rbac.yaml (the emulator's RBAC let it through?): {ungranted:?}"
    );
    println!(
        "install ({version:?}): the operator used {} permissions; {} granted, {} documented as not exercised",
        used.len(),
        grants.len(),
        documented.len()
    );
}

/// Prints the stage reached (a hang or a failure in CI says where it happened).
fn stage(t0: Instant, name: &str) {
    eprintln!("install: {:>6.1} s  {name}", t0.elapsed().as_secs_f64());
}

/// What every authenticated identity may do without a role of ours (the API server's defaults):
/// reviewing its own access.
const DEFAULT_GRANTS: &[(&str, &str, &str)] = &[
    ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),
    ("authorization.k8s.io", "selfsubjectrulesreviews", "create"),
];

/// A token for the ServiceAccount `namespace/name` (TokenRequest, as the kubelet asks for one).
fn token_for(ns: &Netns, kubeconfig: &Path, ca: &Path, namespace: &str, name: &str) -> String {
    let kc: Value = crds::yaml::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
    let admin = kc["users"][0]["user"]["token"].as_str().unwrap().to_owned();
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 3600},
    });
    let out = curl(
        ns,
        &[
            "-f",
            "--cacert",
            ca.to_str().unwrap(),
            "-H",
            &format!("Authorization: Bearer {admin}"),
            "-H",
            "content-type: application/json",
            "--data-binary",
            "@-",
            &format!(
                "https://127.0.0.1:{API_PORT}/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
            ),
        ],
        Some(body.to_string().as_bytes()),
    );
    assert!(
        out.status.success(),
        "TokenRequest {namespace}/{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tr: Value = serde_json::from_slice(&out.stdout).unwrap();
    tr["status"]["token"].as_str().unwrap().to_owned()
}
