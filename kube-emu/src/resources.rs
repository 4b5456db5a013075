//! The resource registry: which group/version/resource triples exist, their kinds, scope,
//! subresources, and (for custom resources) their structural schemas. Built-in kinds come from
//! `k8s-openapi`'s types (`builtin`); custom kinds are added and removed as
//! CustomResourceDefinition objects are written.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::builtin;

/// One served resource (all of its versions).
#[derive(Debug, Clone)]
pub struct ResourceType {
    /// API group, `""` for core.
    pub group: String,
    /// Served versions, preferred (storage) first.
    pub versions: Vec<String>,
    /// Plural resource name, e.g. `configmaps`.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Categories (kubectl `get all`).
    pub categories: Vec<String>,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether a `/status` subresource exists (status is split from the main resource).
    pub status_subresource: bool,
    /// Where the `/scale` subresource reads and writes replicas, if the kind has one.
    pub scale: Option<ScalePaths>,
    /// Structural schema per version (custom resources only).
    pub schemas: BTreeMap<String, Value>,
    /// True for kinds defined by a CustomResourceDefinition.
    pub custom: bool,
    /// Verbs advertised in discovery.
    pub verbs: Vec<&'static str>,
}

/// The JSON paths (`.spec.replicas`) behind a `/scale` subresource (`crate::scale`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas.
    pub spec_replicas: String,
    /// The observed replicas.
    pub status_replicas: String,
    /// A string label selector (custom resources; built-in kinds format `spec.selector`).
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of the built-in workload kinds.
    fn builtin() -> Self {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        }
    }
}

/// Verbs of an ordinary resource.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl ResourceType {
    /// The `group/version` string for a version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// The preferred (storage) version.
    pub fn storage_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    /// The schema for a version, if any.
    pub fn schema(&self, version: &str) -> Option<&Value> {
        self.schemas.get(version)
    }

    /// Whether this resource only accepts `create` (review-style APIs).
    pub fn is_review(&self) -> bool {
        self.verbs == ["create"]
    }
}

/// The built-in resource table, from `k8s-openapi`'s types (see [`crate::builtin`]).
pub fn builtins() -> Vec<ResourceType> {
    builtin::by_resource()
        .into_iter()
        .map(|((group, plural), rows)| {
            let first = rows[0];
            let verbs = match builtin::VERB_EXCEPTIONS
                .iter()
                .find(|(g, p, _)| *g == group && *p == plural)
            {
                Some((_, _, v)) => v.to_vec(),
                None if first.listable => ALL_VERBS.to_vec(),
                None => vec!["create"],
            };
            ResourceType {
                group: group.to_string(),
                versions: rows.iter().map(|r| r.version.to_string()).collect(),
                plural: plural.to_string(),
                singular: first.kind.to_lowercase(),
                kind: first.kind.to_string(),
                short_names: builtin::short_names(group, plural),
                categories: builtin::categories(group, plural),
                namespaced: first.namespaced,
                status_subresource: first.status,
                scale: builtin::SCALABLE
                    .contains(&(group, plural))
                    .then(ScalePaths::builtin),
                schemas: BTreeMap::new(),
                custom: false,
                verbs,
            }
        })
        .collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds the resource type a CustomResourceDefinition declares, or the list of problems that make
/// it invalid (reported as 422 Invalid).
pub fn from_crd(crd: &Value) -> Result<ResourceType, Vec<(String, String)>> {
    let mut errs = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("").to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or("").to_string();
    let kind = names["kind"].as_str().unwrap_or("").to_string();
    if group.is_empty() {
        errs.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        errs.push(("spec.names.plural".into(), "Required value".into()));
    }
    if kind.is_empty() {
        errs.push(("spec.names.kind".into(), "Required value".into()));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        errs.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = spec["scope"].as_str().unwrap_or("");
    if scope != "Namespaced" && scope != "Cluster" {
        errs.push((
            "spec.scope".into(),
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        ));
    }
    let mut versions: Vec<(bool, String)> = Vec::new();
    let mut schemas = BTreeMap::new();
    let mut status_subresource = false;
    let mut scale = None;
    if let Some(vs) = spec["versions"].as_array() {
        for (i, v) in vs.iter().enumerate() {
            let vname = v["name"].as_str().unwrap_or("").to_string();
            if vname.is_empty() {
                errs.push((format!("spec.versions[{i}].name"), "Required value".into()));
                continue;
            }
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            let storage = v["storage"].as_bool().unwrap_or(false);
            if v["subresources"]["status"].is_object() {
                status_subresource = true;
            }
            let sc = &v["subresources"]["scale"];
            if sc.is_object() {
                let path = |k: &str| sc[k].as_str().map(str::to_string);
                match (path("specReplicasPath"), path("statusReplicasPath")) {
                    (Some(spec_replicas), Some(status_replicas)) => {
                        scale = Some(ScalePaths {
                            spec_replicas,
                            status_replicas,
                            label_selector: path("labelSelectorPath"),
                        })
                    }
                    _ => errs.push((
                        format!("spec.versions[{i}].subresources.scale"),
                        "Required value: specReplicasPath and statusReplicasPath are required"
                            .into(),
                    )),
                }
            }
            let schema = &v["schema"]["openAPIV3Schema"];
            if schema.is_object() {
                schemas.insert(vname.clone(), schema.clone());
            }
            versions.push((storage, vname));
        }
    }
    if versions.is_empty() {
        errs.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    // Storage version first, the rest in declaration order.
    versions.sort_by_key(|(storage, _)| !*storage);
    Ok(ResourceType {
        group,
        versions: versions.into_iter().map(|(_, v)| v).collect(),
        singular: names["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase()),
        plural,
        kind,
        short_names: strs(&names["shortNames"]),
        categories: strs(&names["categories"]),
        namespaced: scope == "Namespaced",
        status_subresource,
        scale,
        schemas,
        custom: true,
        verbs: ALL_VERBS.to_vec(),
    })
}

/// The status a CustomResourceDefinition gets once registered (Established, NamesAccepted).
pub fn crd_status(rt: &ResourceType, now: &str) -> Value {
    json!({
        "acceptedNames": {
            "plural": rt.plural,
            "singular": rt.singular,
            "kind": rt.kind,
            "listKind": format!("{}List", rt.kind),
            "shortNames": rt.short_names,
            "categories": rt.categories,
        },
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": [rt.storage_version()],
    })
}
