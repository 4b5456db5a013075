//! The built-in resource table against `k8s-openapi`'s own sources: every GA resource of the
//! crate's `latest` Kubernetes version is served, and nothing else.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// `k8s-openapi`'s source directory, found with `cargo metadata` (offline: the crate is a
/// dependency, already on disk).
fn k8s_openapi_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--manifest-path",
        ])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pkg = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "k8s-openapi")
        .unwrap();
    PathBuf::from(pkg["manifest_path"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `latest` feature's module (`v1_37`), read from the crate's manifest.
fn latest_module(dir: &std::path::Path) -> String {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("latest = "))
        .unwrap();
    line.split('"').nth(1).unwrap().to_string()
}

fn files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn const_str(src: &str, name: &str) -> String {
    let marker = format!("const {name}: &'static str = \"");
    let at = src.find(&marker).unwrap() + marker.len();
    src[at..].split('"').next().unwrap().to_string()
}

/// Every (group, version, plural) of a GA group version that `k8s-openapi` defines as a
/// namespaced or cluster-scoped resource (not a subresource).
pub fn k8s_openapi_ga_resources() -> BTreeSet<(String, String, String)> {
    let dir = k8s_openapi_dir();
    let root = dir.join("src").join(latest_module(&dir));
    let mut all = Vec::new();
    files(&root, &mut all);
    let ga = regex::Regex::new(r"^v[0-9]+$").unwrap();
    let mut out = BTreeSet::new();
    for f in all {
        let src = std::fs::read_to_string(&f).unwrap();
        if !src.contains("impl crate::Resource for")
            || src.contains("type Scope = crate::SubResourceScope")
        {
            continue;
        }
        let version = const_str(&src, "VERSION");
        // apimachinery's meta types (APIGroup, Status, ...) are not resources of a group.
        if !ga.is_match(&version) || f.to_string_lossy().contains("/apimachinery/") {
            continue;
        }
        out.insert((
            const_str(&src, "GROUP"),
            version,
            const_str(&src, "URL_PATH_SEGMENT"),
        ));
    }
    out
}

#[test]
fn builtin_table_matches_k8s_openapi() {
    let expected = k8s_openapi_ga_resources();
    let served: BTreeSet<(String, String, String)> = kube_emu::builtin::table()
        .rows
        .iter()
        .map(|r| (r.group.into(), r.version.into(), r.plural.into()))
        .collect();
    let missing: Vec<_> = expected.difference(&served).collect();
    let extra: Vec<_> = served.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing: {missing:?}\nnot in k8s-openapi: {extra:?}"
    );
    // The kinds the issue names are among them.
    for (g, p) in [
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
        ),
        ("autoscaling", "horizontalpodautoscalers"),
        ("batch", "cronjobs"),
        ("networking.k8s.io", "ingresses"),
        ("policy", "poddisruptionbudgets"),
        ("networking.k8s.io", "networkpolicies"),
        ("storage.k8s.io", "storageclasses"),
        ("", "persistentvolumes"),
        ("", "resourcequotas"),
        ("", "limitranges"),
        ("discovery.k8s.io", "endpointslices"),
        ("scheduling.k8s.io", "priorityclasses"),
    ] {
        assert!(
            served.iter().any(|(sg, _, sp)| sg == g && sp == p),
            "{g}/{p}"
        );
    }
}

#[test]
fn every_served_kind_has_its_openapi_definition() {
    let table = kube_emu::builtin::table();
    for row in &table.rows {
        let d = &table.definitions[&row.definition];
        assert!(
            d["properties"]["metadata"].is_object() || !row.listable,
            "{}",
            row.definition
        );
    }
    let deployment = &table.definitions["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    let spec = &table.definitions["io.k8s.api.apps.v1.DeploymentSpec"];
    assert_eq!(spec["properties"]["replicas"]["type"], "integer");
}
