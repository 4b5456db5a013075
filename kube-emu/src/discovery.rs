//! Discovery documents: `/api`, `/apis`, `/apis/<group>`, `/api/v1`, `/apis/<group>/<version>`,
//! `/version`, and empty OpenAPI documents (the served ones, with the CRDs' definitions, are
//! built by `openapi`). Aggregated discovery (`apidiscovery.k8s.io/v2`) is not served;
//! clients asking for it get the legacy documents, which they accept as a fallback.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::state::State;

/// `/version`: 1.37, the Kubernetes version of `k8s-openapi`'s `latest` feature, whose types
/// define the built-in resources served (`builtin`); kubectl 1.36–1.38 print no version-skew
/// warning. The differences from a real 1.37 API server are listed in the crate's README.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "37",
        "gitVersion": "v1.37.0-kube-emu",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
    })
}

fn groups(st: &State) -> BTreeMap<String, Vec<String>> {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in st.types.values().filter(|t| !t.group.is_empty()) {
        let vs = g.entry(rt.group.clone()).or_default();
        for v in &rt.versions {
            if !vs.contains(v) {
                vs.push(v.clone());
            }
        }
    }
    g
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

/// `/apis`.
pub fn group_list(st: &State) -> Value {
    let gs: Vec<Value> = groups(st).iter().map(|(n, vs)| group_json(n, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/<group>`.
pub fn group(st: &State, name: &str) -> Option<Value> {
    groups(st).get(name).map(|vs| {
        let mut g = group_json(name, vs);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        g
    })
}

/// `/api/v1` and `/apis/<group>/<version>`.
pub fn resource_list(st: &State, group: &str, version: &str) -> Option<Value> {
    let mut res = Vec::new();
    for rt in st
        .types
        .values()
        .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
    {
        let mut r = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs,
        });
        if !rt.short_names.is_empty() {
            r["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            r["categories"] = json!(rt.categories);
        }
        res.push(r);
        if rt.status_subresource {
            res.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if rt.group.is_empty() && rt.plural == "serviceaccounts" {
            res.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
        if rt.scale.is_some() {
            res.push(json!({
                "name": format!("{}/scale", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": crate::scale::SCALE_GROUP,
                "version": crate::scale::SCALE_VERSION,
                "kind": crate::scale::SCALE_KIND,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if res.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}),
    )
}

/// `/openapi/v3`.
pub fn openapi_v3_root() -> Value {
    json!({"paths": {}})
}
