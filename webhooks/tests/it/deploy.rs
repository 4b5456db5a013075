//! The manifests under `deploy/` parse and keep their invariants: the kustomization names every
//! manifest present; the webhook configuration fails closed, times out in ≤ 5 s, targets only our
//! group and exactly the routes the webhooks crate serves, through the Service's 443 → webhook
//! port; the Deployment passes the docs/design/operator.md §7.1 flags whose ports match the container ports and probes, runs
//! non-root with a read-only root filesystem, resources and the TLS Secret volume; RBAC covers the
//! four CRDs with status and finalizers, never creates claims, impersonates only service accounts,
//! and keeps leases in the operator's namespace. `deploy/sharded/` (issue 32) builds one
//! Deployment per shard, each passing a distinct `--shard` and serving the webhooks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use webhooks::WebhookKind;

const NS: &str = "opm-system";

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    crds::yaml::from_str_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn manifest_files(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && path.join("kustomization.yaml").is_file() {
            // A kustomization of its own (deploy/sharded/): checked by its own test.
            continue;
        } else if path.is_dir() {
            manifest_files(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.insert(
                path.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
}

/// Every object of every manifest the kustomization lists.
fn objects() -> Vec<Value> {
    kustomization()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| yaml_docs(&deploy_dir().join(r.as_str().unwrap())))
        .collect()
}

fn kustomization() -> Value {
    yaml_docs(&deploy_dir().join("kustomization.yaml")).remove(0)
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn kustomization_lists_every_manifest_present() {
    let mut present = BTreeSet::new();
    manifest_files(&deploy_dir(), &deploy_dir(), &mut present);
    present.remove("kustomization.yaml");
    let listed: BTreeSet<String> = strs(&kustomization()["resources"])
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        listed, present,
        "deploy/kustomization.yaml resources must name every manifest under deploy/"
    );
    for crd in crds::all_crds() {
        assert!(listed.contains(&format!("crds/{}", crds::crd_file_name(&crd))));
    }
}

#[test]
fn every_object_is_well_formed_and_namespaced_objects_live_in_opm_system() {
    let objs = objects();
    assert!(objs.len() >= 15, "only {} objects", objs.len());
    let cluster_scoped = [
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
    ];
    for o in &objs {
        let kind = o["kind"].as_str().unwrap();
        assert!(o["apiVersion"].is_string(), "{kind} has an apiVersion");
        assert!(o["metadata"]["name"].is_string(), "{kind} has a name");
        if cluster_scoped.contains(&kind) {
            assert!(
                o["metadata"]["namespace"].is_null(),
                "{kind} is cluster-scoped"
            );
        } else {
            assert_eq!(
                o["metadata"]["namespace"], NS,
                "{kind} {}",
                o["metadata"]["name"]
            );
        }
    }
    assert_eq!(find(&objs, "Namespace", NS)["apiVersion"], "v1");
    find(&objs, "ServiceAccount", "opm-operator");
}

#[test]
fn webhook_configuration_matches_the_routes_and_fails_closed() {
    let objs = objects();
    let vwc = find(&objs, "ValidatingWebhookConfiguration", "opm-operator");
    let hooks = vwc["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 2);
    let service = find(&objs, "Service", "opm-operator-webhook");
    let mut paths = BTreeSet::new();
    for h in hooks {
        let name = h["name"].as_str().unwrap();
        assert_eq!(h["failurePolicy"], "Fail", "{name}");
        assert_eq!(h["timeoutSeconds"], 5, "{name}");
        assert_eq!(h["sideEffects"], "None", "{name}");
        assert_eq!(strs(&h["admissionReviewVersions"]), ["v1"], "{name}");
        let svc = &h["clientConfig"]["service"];
        assert_eq!(svc["name"], service["metadata"]["name"], "{name}");
        assert_eq!(svc["namespace"], NS, "{name}");
        assert_eq!(svc["port"], 443, "{name}");
        let path = svc["path"].as_str().unwrap();
        let kind =
            WebhookKind::from_path(path).unwrap_or_else(|| panic!("{name}: {path} is not a route"));
        paths.insert(path.to_owned());
        let rules = h["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            strs(&rules[0]["apiGroups"]),
            ["opmodel.dev"],
            "{name}: our group only"
        );
        assert_eq!(strs(&rules[0]["resources"]), [kind.plural()], "{name}");
        assert_eq!(
            strs(&rules[0]["operations"]),
            ["CREATE", "UPDATE"],
            "{name}"
        );
        let sel = &h["namespaceSelector"]["matchExpressions"][0];
        assert_eq!(sel["key"], "kubernetes.io/metadata.name");
        assert_eq!(sel["operator"], "NotIn");
        assert_eq!(strs(&sel["values"]), [NS]);
    }
    let routes: BTreeSet<String> = WebhookKind::ALL
        .iter()
        .map(|k| k.path().to_owned())
        .collect();
    assert_eq!(paths, routes);
    // The CA bundle has one declared owner, the Certificate that writes the serving Secret.
    let owner = vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .unwrap();
    let cert = find(&objs, "Certificate", owner.split('/').nth(1).unwrap());
    assert_eq!(
        format!("{NS}/{}", cert["metadata"]["name"].as_str().unwrap()),
        owner
    );
    let dns = strs(&cert["spec"]["dnsNames"]);
    assert!(dns.contains(&format!("opm-operator-webhook.{NS}.svc").as_str()));
}

/// The port of a `--flag=host:port` argument.
fn flag_port(args: &[&str], flag: &str) -> i64 {
    let arg = args
        .iter()
        .find(|a| a.starts_with(&format!("{flag}=")))
        .unwrap_or_else(|| panic!("no {flag}"));
    arg.rsplit(':').next().unwrap().parse().unwrap()
}

fn flag_value<'a>(args: &[&'a str], flag: &str) -> &'a str {
    let prefix = format!("{flag}=");
    args.iter()
        .find_map(|a| a.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {flag}"))
}

#[test]
fn deployment_and_service_agree_on_ports_probes_tls_and_security() {
    let objs = objects();
    let dep = find(&objs, "Deployment", "opm-operator");
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "opm-operator");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    let args = strs(&c["args"]);
    assert_eq!(args[0], "serve");
    let port = |name: &str| -> i64 {
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["containerPort"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(flag_port(&args, "--webhook-addr"), port("webhook"));
    assert_eq!(flag_port(&args, "--probe-addr"), port("probes"));
    assert_eq!(flag_port(&args, "--metrics-addr"), port("metrics"));
    assert_ne!(
        port("probes"),
        port("webhook"),
        "probes are on their own plain port"
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(c[probe]["httpGet"]["path"], path);
        assert_eq!(c[probe]["httpGet"]["port"], "probes");
        assert!(c[probe]["httpGet"]["scheme"].is_null() || c[probe]["httpGet"]["scheme"] == "HTTP");
    }
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(strs(&sc["capabilities"]["drop"]), ["ALL"]);
    assert!(c["resources"]["requests"]["memory"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());
    // TLS files come from the Secret the Certificate writes, through a read-only mount.
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "tls")
        .unwrap();
    assert_eq!(mount["readOnly"], true);
    let dir = mount["mountPath"].as_str().unwrap();
    assert_eq!(flag_value(&args, "--tls-cert"), format!("{dir}/tls.crt"));
    assert_eq!(flag_value(&args, "--tls-key"), format!("{dir}/tls.key"));
    let vol = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tls")
        .unwrap();
    let cert = find(&objs, "Certificate", "opm-operator-webhook");
    assert_eq!(vol["secret"]["secretName"], cert["spec"]["secretName"]);
    // Service 443 → the named webhook port, selecting the Deployment's pods.
    let svc = find(&objs, "Service", "opm-operator-webhook");
    let sp = &svc["spec"]["ports"][0];
    assert_eq!(sp["port"], 443);
    assert_eq!(sp["targetPort"], "webhook");
    let labels = &dep["spec"]["template"]["metadata"]["labels"];
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "service selector {k} matches the pods");
    }
}

fn rules_of<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Vec<Value> {
    find(objs, kind, name)["rules"].as_array().unwrap()
}

fn allows(rules: &[Value], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        strs(&r["apiGroups"]).contains(&group)
            && strs(&r["resources"]).contains(&resource)
            && strs(&r["verbs"]).contains(&verb)
    })
}

#[test]
fn rbac_is_least_privilege() {
    let objs = objects();
    let op = rules_of(&objs, "ClusterRole", "opm-operator");
    // Least privilege (proven sufficient by tests/it/install.rs, which runs the operator as this
    // ServiceAccount against an RBAC-enforcing API server): the reconcilers read their primaries
    // and patch finalizers onto them; the Platform carries no finalizer, so it is read only.
    for plural in [
        "moduleinstances",
        "modulepackages",
        "platforms",
        "transformerregistrations",
    ] {
        for verb in ["get", "list", "watch"] {
            assert!(allows(op, "opmodel.dev", plural, verb), "{plural} {verb}");
        }
        assert_eq!(
            allows(op, "opmodel.dev", plural, "patch"),
            plural != "platforms",
            "{plural} patch (finalizers)"
        );
        assert!(
            allows(op, "opmodel.dev", &format!("{plural}/status"), "patch"),
            "{plural}/status"
        );
        for verb in ["create", "update", "delete"] {
            assert!(
                !allows(op, "opmodel.dev", plural, verb),
                "the operator never uses {verb} on {plural}"
            );
        }
        assert!(
            !allows(op, "opmodel.dev", &format!("{plural}/status"), "update"),
            "status is written by merge patch, never update"
        );
    }
    assert!(allows(op, "events.k8s.io", "events", "create"));
    assert!(allows(op, "", "serviceaccounts", "impersonate"));
    for forbidden in ["users", "groups"] {
        assert!(
            !allows(op, "", forbidden, "impersonate"),
            "impersonating {forbidden} would allow system:masters"
        );
    }
    for r in op
        .iter()
        .chain(rules_of(&objs, "ClusterRole", "opm-operator-apply"))
    {
        for field in ["apiGroups", "resources", "verbs"] {
            assert!(!strs(&r[field]).contains(&"*"), "no wildcard {field}: {r}");
        }
    }
    // Leases only in the operator's own namespace.
    assert!(!allows(op, "coordination.k8s.io", "leases", "get"));
    let lease = rules_of(&objs, "Role", "opm-operator-leader-election");
    assert!(allows(lease, "coordination.k8s.io", "leases", "update"));
    assert_eq!(
        find(&objs, "Role", "opm-operator-leader-election")["metadata"]["namespace"],
        NS
    );
    // The apply role never prunes namespaces (docs/design/operator.md §6.3).
    let apply = rules_of(&objs, "ClusterRole", "opm-operator-apply");
    assert!(allows(apply, "apps", "deployments", "patch"));
    assert!(!allows(apply, "", "namespaces", "delete"));
    // Claim creation is a separate role that nothing binds.
    let admin = rules_of(&objs, "ClusterRole", "opm-transformerregistration-admin");
    assert!(allows(
        admin,
        "opmodel.dev",
        "transformerregistrations",
        "create"
    ));
    let bindings: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
        .collect();
    assert!(bindings
        .iter()
        .all(|b| b["roleRef"]["name"] != "opm-transformerregistration-admin"));
    for b in &bindings {
        let s = &b["subjects"][0];
        assert_eq!(
            (
                s["kind"].as_str(),
                s["name"].as_str(),
                s["namespace"].as_str()
            ),
            (Some("ServiceAccount"), Some("opm-operator"), Some(NS))
        );
        // Every binding points at a role defined here.
        let kind = b["roleRef"]["kind"].as_str().unwrap();
        find(&objs, kind, b["roleRef"]["name"].as_str().unwrap());
    }
}

#[test]
fn kubectl_kustomize_builds_the_base() {
    // kubectl is installed by scripts/setup.sh (Debian kubernetes-client).
    let out = std::process::Command::new("kubectl")
        .args(["kustomize", deploy_dir().to_str().unwrap()])
        .output()
        .unwrap_or_else(|e| panic!("kubectl not runnable ({e}); run scripts/setup.sh"));
    assert!(
        out.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = crds::yaml::from_str_multiple(&text).unwrap();
    assert_eq!(
        docs.len(),
        objects().len(),
        "kustomize emits every object once"
    );
    let image = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .map(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .unwrap();
    assert_eq!(image, "ghcr.io/open-platform-model/opm-operator:latest");
}

#[test]
fn the_sharded_install_adds_one_deployment_per_shard() {
    let dir = deploy_dir().join("sharded");
    let kust = yaml_docs(&dir.join("kustomization.yaml")).remove(0);
    let mut present = BTreeSet::new();
    manifest_files(&dir, &dir, &mut present);
    present.remove("kustomization.yaml");
    let listed: BTreeSet<String> = strs(&kust["resources"])
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(listed, present, "deploy/sharded lists every manifest");
    let out = std::process::Command::new("kubectl")
        .args(["kustomize", dir.to_str().unwrap()])
        .output()
        .unwrap_or_else(|e| panic!("kubectl not runnable ({e}); run scripts/setup.sh"));
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/sharded failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> =
        crds::yaml::from_str_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert!(docs.len() >= 2, "at least two shards");
    let base = objects();
    let base_deploy = find(&base, "Deployment", "opm-operator");
    let service = find(&base, "Service", "opm-operator-webhook");
    let base_args = strs(&base_deploy["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        !base_args.iter().any(|a| a.starts_with("--shard")),
        "the base Deployment is the unsharded replica set"
    );
    let mut shards = BTreeSet::new();
    for d in &docs {
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["namespace"], NS);
        let spec = &d["spec"]["template"]["spec"];
        let args = strs(&spec["containers"][0]["args"]);
        let shard = args
            .iter()
            .find_map(|a| a.strip_prefix("--shard="))
            .unwrap_or_else(|| panic!("{} passes --shard", d["metadata"]["name"]));
        assert!(shards.insert(shard.to_owned()), "shard {shard} twice");
        // The same server flags as the base replica set, plus the shard.
        let rest: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| !a.starts_with("--shard="))
            .collect();
        assert_eq!(rest, base_args);
        // The rest of the pod is the base's: image policy, env, probes, resources, security
        // context, volumes (a shard must run as hardened and as sized as the base).
        let base_spec = &base_deploy["spec"]["template"]["spec"];
        let mut container = spec["containers"][0].clone();
        container["args"] = base_spec["containers"][0]["args"].clone();
        // The image is set by each kustomization's `images:`; it is checked below.
        container["image"] = base_spec["containers"][0]["image"].clone();
        assert_eq!(
            container, base_spec["containers"][0],
            "{} container",
            d["metadata"]["name"]
        );
        for field in [
            "securityContext",
            "volumes",
            "serviceAccountName",
            "automountServiceAccountToken",
            "terminationGracePeriodSeconds",
        ] {
            assert_eq!(spec[field], base_spec[field], "{field}");
        }
        assert_eq!(spec["serviceAccountName"], "opm-operator");
        assert!(
            d["spec"]["replicas"].as_i64().unwrap() >= 2,
            "a standby per shard"
        );
        // Its pods serve the webhooks through the Service, and only its own pods are selected.
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        for (k, v) in service["spec"]["selector"].as_object().unwrap() {
            assert_eq!(&labels[k], v, "{k}");
        }
        let selector = d["spec"]["selector"]["matchLabels"].as_object().unwrap();
        for (k, v) in selector {
            assert_eq!(&labels[k], v, "{k}");
        }
        assert_ne!(
            &d["spec"]["selector"], &base_deploy["spec"]["selector"],
            "a shard's selector is its own"
        );
        assert_eq!(
            spec["containers"][0]["image"],
            "ghcr.io/open-platform-model/opm-operator:latest"
        );
    }
}
