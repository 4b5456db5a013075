//! Flux sources of a ModulePackage (docs/design/operator.md §2.3 step 3, §2.3 watches, docs/design/principles.md
//! rule 11).
//!
//! Rules:
//! - Supported kinds are exactly `OCIRepository`, `GitRepository` and `Bucket` of group
//!   `source.toolkit.fluxcd.io` (version from `sourceRef.apiVersion`, default `v1`); any other kind
//!   or group is unsupported. Sources are read as dynamic objects: the Flux CRDs are optional.
//! - An empty `sourceRef.namespace` is the package's own; another namespace is refused unless
//!   `--allow-cross-namespace-refs`.
//! - A source is ready when its `Ready` condition is `True` and `status.artifact` carries a
//!   non-empty `url` and `digest`; the revision is informative.
//! - Watch predicate ([`SourceFilter`]): a source seen for the first time passes (create), a
//!   deletion does not, an update passes iff the artifact's revision or digest changed, or the
//!   artifact appeared or disappeared. A passing source enqueues the packages whose `sourceRef`
//!   kind and name match and whose effective namespace is the source's ([`packages_for`]).

use std::collections::HashMap;

use crds::module_package::{ModulePackage, SourceRef};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::ResourceExt;
use serde_json::Value;

/// The API group of Flux sources.
pub const GROUP: &str = "source.toolkit.fluxcd.io";
/// The version used when `sourceRef.apiVersion` is empty.
pub const DEFAULT_VERSION: &str = "v1";
/// The supported source kinds.
pub const KINDS: [&str; 3] = ["OCIRepository", "GitRepository", "Bucket"];

/// The dynamic resource of a supported source kind, or why it is unsupported.
pub fn resource(r: &SourceRef) -> Result<ApiResource, String> {
    if !KINDS.contains(&r.kind.as_str()) {
        return Err(format!(
            "source kind {:?} is not supported (OCIRepository, GitRepository or Bucket)",
            r.kind
        ));
    }
    let version = match r.api_version.as_deref().filter(|v| !v.is_empty()) {
        None => DEFAULT_VERSION.to_owned(),
        Some(av) => match av.split_once('/') {
            Some((group, version)) if group == GROUP && !version.is_empty() => version.to_owned(),
            _ => {
                return Err(format!(
                    "source apiVersion {av:?} is not supported (expected {GROUP}/<version>)"
                ))
            }
        },
    };
    Ok(kind_resource(&r.kind, &version))
}

/// The dynamic resource of `kind` at `version` in [`GROUP`].
pub fn kind_resource(kind: &str, version: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, version, kind))
}

/// The namespace the source is looked up in: `sourceRef.namespace`, else the package's own.
pub fn effective_namespace<'a>(r: &'a SourceRef, own: &'a str) -> &'a str {
    r.namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(own)
}

/// `<kind>/<namespace>/<name>` (the `status.source.ref` of a package).
pub fn ref_string(r: &SourceRef, own: &str) -> String {
    format!("{}/{}/{}", r.kind, effective_namespace(r, own), r.name)
}

/// A source's artifact (`status.artifact`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Artifact {
    /// Download URL.
    pub url: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Revision (informative).
    pub revision: String,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The artifact of a source, if it has one with a URL and a digest.
pub fn artifact(obj: &DynamicObject) -> Option<Artifact> {
    let a = obj.data.pointer("/status/artifact")?;
    let (url, digest) = (str_at(a, "/url"), str_at(a, "/digest"));
    (!url.is_empty() && !digest.is_empty()).then(|| Artifact {
        url: url.to_owned(),
        digest: digest.to_owned(),
        revision: str_at(a, "/revision").to_owned(),
    })
}

/// Whether the source's `Ready` condition is `True`.
pub fn is_ready(obj: &DynamicObject) -> bool {
    obj.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| str_at(c, "/type") == "Ready" && str_at(c, "/status") == "True")
        })
}

/// The ready artifact of a source, or why it is not ready.
pub fn ready_artifact(obj: &DynamicObject) -> Result<Artifact, &'static str> {
    if !is_ready(obj) {
        return Err("is not ready");
    }
    artifact(obj).ok_or("has no artifact")
}

/// The watch predicate of sources (module docs).
#[derive(Debug, Default)]
pub struct SourceFilter(HashMap<(String, String, String), Option<(String, String)>>);

fn key(kind: &str, obj: &DynamicObject) -> (String, String, String) {
    (
        kind.to_owned(),
        obj.namespace().unwrap_or_default(),
        obj.name_any(),
    )
}

impl SourceFilter {
    /// Whether an applied source passes.
    pub fn applied(&mut self, kind: &str, obj: &DynamicObject) -> bool {
        let now = artifact(obj).map(|a| (a.revision, a.digest));
        match self.0.insert(key(kind, obj), now.clone()) {
            None => true,
            Some(before) => before != now,
        }
    }

    /// A deleted source never passes (it is forgotten).
    pub fn deleted(&mut self, kind: &str, obj: &DynamicObject) -> bool {
        self.0.remove(&key(kind, obj));
        false
    }
}

/// The packages referencing the source `kind` `obj`.
pub fn packages_for<'a>(
    kind: &str,
    obj: &DynamicObject,
    packages: impl IntoIterator<Item = &'a ModulePackage>,
) -> Vec<&'a ModulePackage> {
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    packages
        .into_iter()
        .filter(|mp| {
            let r = &mp.spec.source_ref;
            let own = mp.namespace().unwrap_or_default();
            r.kind == kind && r.name == name && effective_namespace(r, &own) == ns
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn source(ns: &str, name: &str, status: Value) -> DynamicObject {
        let mut o = DynamicObject::new(name, &kind_resource("OCIRepository", "v1")).within(ns);
        o.data = serde_json::json!({ "status": status });
        o
    }

    fn ready(rev: &str, digest: &str) -> Value {
        serde_json::json!({
            "conditions": [{"type": "Ready", "status": "True"}],
            "artifact": {"url": "http://127.0.0.1/a.tgz", "digest": digest, "revision": rev},
        })
    }

    #[test]
    fn only_the_three_flux_kinds_are_supported() {
        let mut r = SourceRef {
            kind: "HelmChart".into(),
            name: "x".into(),
            ..Default::default()
        };
        assert!(resource(&r).unwrap_err().contains("HelmChart"));
        r.kind = "OCIRepository".into();
        let ar = resource(&r).unwrap();
        assert_eq!(
            (ar.group.as_str(), ar.version.as_str(), ar.plural.as_str()),
            (GROUP, "v1", "ocirepositories")
        );
        r.api_version = Some("source.toolkit.fluxcd.io/v1beta2".into());
        assert_eq!(resource(&r).unwrap().version, "v1beta2");
        r.api_version = Some("example.com/v1".into());
        assert!(resource(&r).is_err());
    }

    #[test]
    fn readiness_needs_the_condition_and_an_artifact() {
        assert!(ready_artifact(&source("a", "s", ready("r1", "sha256:1"))).is_ok());
        let no_artifact = source(
            "a",
            "s",
            serde_json::json!({"conditions": [{"type": "Ready", "status": "True"}]}),
        );
        assert_eq!(ready_artifact(&no_artifact), Err("has no artifact"));
        let not_ready = source(
            "a",
            "s",
            serde_json::json!({"conditions": [{"type": "Ready", "status": "False"}]}),
        );
        assert_eq!(ready_artifact(&not_ready), Err("is not ready"));
    }

    #[test]
    fn the_filter_passes_creates_and_artifact_changes_only_scenario_65() {
        let mut f = SourceFilter::default();
        let s1 = source("a", "s", ready("r1", "sha256:1"));
        assert!(f.applied("OCIRepository", &s1), "create passes");
        assert!(!f.applied("OCIRepository", &s1), "same artifact");
        let mut status_only = s1.clone();
        status_only.data["status"]["conditions"][0]["message"] = "x".into();
        assert!(!f.applied("OCIRepository", &status_only));
        assert!(f.applied("OCIRepository", &source("a", "s", ready("r2", "sha256:2"))));
        assert!(
            f.applied("OCIRepository", &source("a", "s", serde_json::json!({}))),
            "gone"
        );
        assert!(!f.deleted("OCIRepository", &s1));
        assert!(f.applied("OCIRepository", &s1), "re-created");
    }

    #[test]
    fn packages_match_kind_name_and_effective_namespace() {
        let own = ModulePackage::test(); // team-a, OCIRepository src
        let mut other_ns = ModulePackage::test().with_source("OCIRepository", "src");
        other_ns.metadata.name = Some("b".into());
        other_ns.spec.source_ref.namespace = Some("flux-system".into());
        let git = ModulePackage::test().with_source("GitRepository", "src");
        let all = [own, other_ns, git];
        let s = source("team-a", "src", ready("r", "sha256:1"));
        let hit: Vec<_> = packages_for("OCIRepository", &s, &all)
            .iter()
            .map(|m| m.name_any())
            .collect();
        assert_eq!(hit, ["pkg"]);
        let s = source("flux-system", "src", ready("r", "sha256:1"));
        let hit: Vec<_> = packages_for("OCIRepository", &s, &all)
            .iter()
            .map(|m| m.name_any())
            .collect();
        assert_eq!(hit, ["b"]);
    }
}
