//! Object identity, preparation for apply, and stage classification (docs/design/operator.md §2.2
//! phase 5, §6.4; docs/design/principles.md rule 4).
//!
//! Rules:
//! - An object is identified by (group, version, kind, namespace, name); it prints as
//!   `Kind/namespace/name` (`Kind/name` when cluster-scoped), the form every error and event uses.
//! - Before apply: `.status` and `metadata.managedFields` are stripped, as are the server-owned
//!   `metadata` fields (`resourceVersion`, `uid`, `creationTimestamp`, `generation`,
//!   `deletionTimestamp`, `selfLink`); a CRD's conversion-webhook `caBundle` is stripped (it is
//!   injected by whoever owns the webhook certificate, as fluxcd/pkg/ssa does).
//! - Runtime-owned labels (§1.5, §6.4): `app.kubernetes.io/managed-by` is set to the acting
//!   runtime (`opm-controller`), overriding whatever the object carried; the instance identity
//!   labels `module-instance.opmodel.dev/{name,namespace,uuid}` are stamped when the caller
//!   passes the instance.
//! - Stages (fluxcd/pkg/ssa `ApplyAllStaged`, docs/design/principles.md rule 4): 0 = CustomResourceDefinitions,
//!   Namespaces, ClusterRoles (waited for and followed by a discovery refresh); 1 = class kinds
//!   (`*Class` kinds such as StorageClass, IngressClass, PriorityClass); 2 = ServiceAccounts and
//!   Roles (so bindings never precede what they bind); 3 = everything else, in render order.

use std::fmt;

use serde_json::{Map, Value};

use super::error::Error;

/// The label naming the acting runtime.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Instance name label.
pub const INSTANCE_NAME_LABEL: &str = "module-instance.opmodel.dev/name";
/// Instance namespace label.
pub const INSTANCE_NAMESPACE_LABEL: &str = "module-instance.opmodel.dev/namespace";
/// Instance uuid label.
pub const INSTANCE_UUID_LABEL: &str = "module-instance.opmodel.dev/uuid";

/// Identity of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// API group ("" for core).
    pub group: String,
    /// API version ("" when unknown, e.g. an inventory entry without `v`).
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`None` for cluster-scoped or unspecified).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

impl ObjectRef {
    /// The identity of an object given as JSON.
    pub fn of(object: &Value) -> Result<ObjectRef, Error> {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
        let api_version = s(object.get("apiVersion"));
        let kind = s(object.get("kind"));
        let name = s(object.pointer("/metadata/name"));
        let namespace = Some(s(object.pointer("/metadata/namespace"))).filter(|n| !n.is_empty());
        let (group, version) = split_api_version(&api_version);
        let r = ObjectRef {
            group,
            version,
            kind,
            namespace,
            name,
        };
        if api_version.is_empty() || r.kind.is_empty() || r.name.is_empty() {
            return Err(Error::InvalidObject {
                object: r.to_string(),
                reason: "apiVersion, kind and metadata.name are required".into(),
            });
        }
        Ok(r)
    }

    /// The identity of an inventory entry.
    pub fn of_entry(e: &crds::common::InventoryEntry) -> ObjectRef {
        ObjectRef {
            group: e.group.clone().unwrap_or_default(),
            version: e.v.clone().unwrap_or_default(),
            kind: e.kind.clone(),
            namespace: e.namespace.clone().filter(|n| !n.is_empty()),
            name: e.name.clone(),
        }
    }

    /// `group/version` (or `version` for core).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Splits `apiVersion` into (group, version).
pub fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// The instance whose identity labels are stamped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstanceLabels {
    /// Instance name.
    pub name: String,
    /// Instance namespace.
    pub namespace: String,
    /// Instance uuid.
    pub uuid: String,
}

impl InstanceLabels {
    /// The instance labels a reconcile stamps for `rendered`: the uuid is the first rendered
    /// object's `module-instance.opmodel.dev/uuid` label, else the instance's uuid; `None` when
    /// neither is set (nothing is stamped then). One rule for the ModuleInstance reconciler and the
    /// render API's previews, so a preview shows what a reconcile applies.
    pub fn of(rendered: &crate::kernel::RenderResult) -> Option<InstanceLabels> {
        let uuid = rendered
            .objects
            .iter()
            .find_map(|o| {
                o.object
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(crds::labels::INSTANCE_UUID))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            })
            .or_else(|| {
                (!rendered.instance.uuid.is_empty()).then(|| rendered.instance.uuid.clone())
            })?;
        Some(InstanceLabels {
            name: rendered.instance.name.clone(),
            namespace: rendered.instance.namespace.clone(),
            uuid,
        })
    }
}

/// Returns the object as it is sent to server-side apply (see the module rules).
pub fn prepare(object: &Value, runtime: &str, instance: Option<&InstanceLabels>) -> Value {
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(k);
        }
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if !labels.is_object() {
            *labels = Value::Object(Map::new());
        }
        if let Some(l) = labels.as_object_mut() {
            l.insert(MANAGED_BY_LABEL.into(), Value::String(runtime.into()));
            if let Some(i) = instance {
                l.insert(INSTANCE_NAME_LABEL.into(), Value::String(i.name.clone()));
                l.insert(
                    INSTANCE_NAMESPACE_LABEL.into(),
                    Value::String(i.namespace.clone()),
                );
                l.insert(INSTANCE_UUID_LABEL.into(), Value::String(i.uuid.clone()));
            }
        }
    }
    if is_crd(object) {
        if let Some(conv) = o
            .pointer_mut("/spec/conversion/webhook/clientConfig")
            .and_then(Value::as_object_mut)
        {
            conv.remove("caBundle");
        }
    }
    o
}

fn is_crd(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
        && object
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|a| a.starts_with("apiextensions.k8s.io/"))
}

/// Whether `r` is a CustomResourceDefinition (applying it may change what discovery serves).
pub fn defines_kinds(r: &ObjectRef) -> bool {
    r.group == "apiextensions.k8s.io" && r.kind == "CustomResourceDefinition"
}

/// The apply stage of a kind (see the module rules).
pub fn stage_of(r: &ObjectRef) -> usize {
    match (r.group.as_str(), r.kind.as_str()) {
        ("apiextensions.k8s.io", "CustomResourceDefinition")
        | ("", "Namespace")
        | ("rbac.authorization.k8s.io", "ClusterRole") => 0,
        (_, k) if k.ends_with("Class") => 1,
        ("", "ServiceAccount") | ("rbac.authorization.k8s.io", "Role") => 2,
        _ => 3,
    }
}

/// Number of stages.
pub const STAGES: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prepare_strips_server_fields_and_stamps_labels() {
        let o = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "n", "resourceVersion": "4",
                "managedFields": [{}], "labels": {"app.kubernetes.io/managed-by": "author"}},
            "data": {"k": "v"}, "status": {"x": 1}
        });
        let inst = InstanceLabels {
            name: "i".into(),
            namespace: "n".into(),
            uuid: "u-1".into(),
        };
        let p = prepare(&o, "opm-controller", Some(&inst));
        assert_eq!(
            p,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "n", "labels": {
                    "app.kubernetes.io/managed-by": "opm-controller",
                    "module-instance.opmodel.dev/name": "i",
                    "module-instance.opmodel.dev/namespace": "n",
                    "module-instance.opmodel.dev/uuid": "u-1"}},
                "data": {"k": "v"}
            })
        );
    }

    #[test]
    fn stages_order_crds_namespaces_classes_roles_rest() {
        let r = |api: &str, kind: &str| {
            ObjectRef::of(&json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}}))
                .map(|r| stage_of(&r))
                .ok()
        };
        assert_eq!(
            r("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            Some(0)
        );
        assert_eq!(r("v1", "Namespace"), Some(0));
        assert_eq!(r("rbac.authorization.k8s.io/v1", "ClusterRole"), Some(0));
        assert_eq!(r("storage.k8s.io/v1", "StorageClass"), Some(1));
        assert_eq!(r("rbac.authorization.k8s.io/v1", "Role"), Some(2));
        assert_eq!(r("rbac.authorization.k8s.io/v1", "RoleBinding"), Some(3));
        assert_eq!(r("apps/v1", "Deployment"), Some(3));
        assert!(ObjectRef::of(&json!({"kind": "X"})).is_err());
    }
}
