//! Immutable fields of built-in kinds: the update validation of the apiserver's
//! `pkg/apis/*/validation` that refuses changes, with the same causes.
//!
//! Rules (old = the stored object, new = the object after the write, both after the kind hooks;
//! checked on every update of the main resource, i.e. PUT, PATCH and server-side apply, dry-run
//! or not):
//! - `apps` Deployment, DaemonSet, ReplicaSet: `spec.selector` may not change
//!   (`FieldValueInvalid`, `Invalid value: <new>: field is immutable`, apimachinery
//!   `ValidateImmutableField`).
//! - `apps` StatefulSet: only `replicas`, `ordinals`, `template`, `updateStrategy`,
//!   `persistentVolumeClaimRetentionPolicy` and `minReadySeconds` of `spec` may change; any other
//!   change (the selector among them) is one `FieldValueForbidden` cause on `spec`.
//! - `batch` Job: `spec.selector` and `spec.template` may not change (`FieldValueInvalid`,
//!   `field is immutable`).
//! - ConfigMap and Secret: once `immutable: true`, `immutable` may not be unset and `data` /
//!   `binaryData` may not change (`FieldValueForbidden`, ``field is immutable when `immutable` is
//!   set``). A Secret's `stringData` is merged into `data` by the kind hooks, so it is covered.
//! - Service: `spec.clusterIP` may not change once set, unless either side is `ExternalName`
//!   (`FieldValueInvalid`, `field is immutable`). An update that omits it keeps the old one
//!   (the apiserver's `PrepareForUpdate`), see [`keep_allocated`].
//! - PersistentVolumeClaim: `spec` may not change except `resources.requests`
//!   (`FieldValueForbidden` on `spec`).
//! - CustomResourceDefinition: `spec.scope` may not change (`FieldValueInvalid`,
//!   `field is immutable`).

use serde_json::Value;

/// The apiserver's `FieldImmutableErrorMsg`.
const FIELD_IMMUTABLE: &str = "field is immutable";

/// One refused change: `(cause type, field, message)`, as [`crate::api_error::ApiError::invalid_typed`]
/// takes it.
pub type Cause = (&'static str, String, String);

fn invalid_immutable(field: &str, new: &Value) -> Cause {
    let shown = if new.is_null() {
        "null".to_string()
    } else {
        new.to_string()
    };
    (
        "FieldValueInvalid",
        field.to_string(),
        format!("Invalid value: {shown}: {FIELD_IMMUTABLE}"),
    )
}

fn forbidden(field: &str, detail: &str) -> Cause {
    (
        "FieldValueForbidden",
        field.to_string(),
        format!("Forbidden: {detail}"),
    )
}

/// `spec` without the listed keys (for "everything else may not change" rules).
fn spec_without(o: &Value, keys: &[&str]) -> Value {
    let mut spec = o.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(m) = spec.as_object_mut() {
        for k in keys {
            m.remove(*k);
        }
    }
    spec
}

/// The causes refusing the update of `old` into `new` for the kind `(group, plural)`; empty when
/// the update is allowed (see the module rules).
pub fn check(group: &str, plural: &str, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let at = |o: &Value, p: &str| o.pointer(p).cloned().unwrap_or(Value::Null);
    match (group, plural) {
        ("apps", "deployments" | "daemonsets" | "replicasets") => {
            let (o, n) = (at(old, "/spec/selector"), at(new, "/spec/selector"));
            if o != n {
                causes.push(invalid_immutable("spec.selector", &n));
            }
        }
        ("apps", "statefulsets") => {
            let allowed = [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ];
            if spec_without(old, &allowed) != spec_without(new, &allowed) {
                causes.push(forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
        ("batch", "jobs") => {
            for (field, p) in [
                ("spec.selector", "/spec/selector"),
                ("spec.template", "/spec/template"),
            ] {
                let (o, n) = (at(old, p), at(new, p));
                if o != n {
                    causes.push(invalid_immutable(field, &n));
                }
            }
        }
        ("", "configmaps" | "secrets") if old["immutable"] == Value::Bool(true) => {
            let detail = "field is immutable when `immutable` is set";
            if new["immutable"] != Value::Bool(true) {
                causes.push(forbidden("immutable", detail));
            }
            for f in ["data", "binaryData"] {
                if at(old, &format!("/{f}")) != at(new, &format!("/{f}")) {
                    causes.push(forbidden(f, detail));
                }
            }
        }
        ("", "services") => {
            let external =
                |o: &Value| o.pointer("/spec/type") == Some(&Value::from("ExternalName"));
            let (o, n) = (at(old, "/spec/clusterIP"), at(new, "/spec/clusterIP"));
            let set = o.as_str().is_some_and(|s| !s.is_empty());
            if set && !external(old) && !external(new) && o != n {
                causes.push(invalid_immutable("spec.clusterIP", &n));
            }
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let (o, n) = (at(old, "/spec/scope"), at(new, "/spec/scope"));
            if o != n {
                causes.push(invalid_immutable("spec.scope", &n));
            }
        }
        ("", "persistentvolumeclaims") => {
            let without_requests = |o: &Value| {
                let mut spec = spec_without(o, &[]);
                if let Some(r) = spec.get_mut("resources").and_then(Value::as_object_mut) {
                    r.remove("requests");
                    if r.is_empty() {
                        if let Some(m) = spec.as_object_mut() {
                            m.remove("resources");
                        }
                    }
                }
                spec
            };
            if without_requests(old) != without_requests(new) {
                causes.push(forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                ));
            }
        }
        _ => {}
    }
    causes
}

/// Before the kind hooks of an update: a Service update that omits `spec.clusterIP` /
/// `spec.clusterIPs` keeps the allocated ones, as the apiserver does.
pub fn keep_allocated(group: &str, plural: &str, old: &Value, new: &mut Value) {
    if (group, plural) != ("", "services") {
        return;
    }
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for k in ["clusterIP", "clusterIPs"] {
        let absent = spec.get(k).is_none_or(Value::is_null);
        if let (true, Some(v)) = (absent, old.pointer(&format!("/spec/{k}"))) {
            spec.insert(k.to_string(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(c: &[Cause]) -> Vec<(&str, &str)> {
        c.iter().map(|(r, f, _)| (*r, f.as_str())).collect()
    }

    #[test]
    fn workload_selectors_are_immutable() {
        let old = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "replicas": 1}});
        let scaled = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "replicas": 3}});
        let moved = json!({"spec": {"selector": {"matchLabels": {"app": "b"}}, "replicas": 1}});
        for plural in ["deployments", "daemonsets", "replicasets"] {
            assert!(check("apps", plural, &old, &scaled).is_empty(), "{plural}");
            let c = check("apps", plural, &old, &moved);
            assert_eq!(fields(&c), vec![("FieldValueInvalid", "spec.selector")]);
            assert!(c[0].2.ends_with(": field is immutable"), "{}", c[0].2);
            assert!(c[0].2.contains(r#""app":"b""#), "{}", c[0].2);
        }
        // Other groups' kinds of the same name are not checked.
        assert!(check("example.com", "deployments", &old, &moved).is_empty());
    }

    #[test]
    fn statefulset_spec_is_forbidden_except_the_mutable_fields() {
        let old = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "serviceName": "s",
            "replicas": 1, "template": {"metadata": {"labels": {"app": "a"}}}}});
        let mut ok = old.clone();
        ok["spec"]["replicas"] = json!(2);
        ok["spec"]["template"]["metadata"]["labels"]["v"] = json!("2");
        ok["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        assert!(check("apps", "statefulsets", &old, &ok).is_empty());
        let mut moved = old.clone();
        moved["spec"]["selector"]["matchLabels"]["app"] = json!("b");
        assert_eq!(
            fields(&check("apps", "statefulsets", &old, &moved)),
            vec![("FieldValueForbidden", "spec")]
        );
        let mut renamed = old;
        renamed["spec"]["serviceName"] = json!("t");
        assert_eq!(check("apps", "statefulsets", &ok, &renamed).len(), 1);
    }

    #[test]
    fn job_selector_and_template_are_immutable() {
        let old = json!({"spec": {"selector": {"matchLabels": {"j": "1"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}, "parallelism": 1}});
        let mut ok = old.clone();
        ok["spec"]["parallelism"] = json!(2);
        assert!(check("batch", "jobs", &old, &ok).is_empty());
        let mut both = old.clone();
        both["spec"]["selector"]["matchLabels"]["j"] = json!("2");
        both["spec"]["template"]["spec"]["containers"][0]["image"] = json!("b");
        assert_eq!(
            fields(&check("batch", "jobs", &old, &both)),
            vec![
                ("FieldValueInvalid", "spec.selector"),
                ("FieldValueInvalid", "spec.template")
            ]
        );
    }

    #[test]
    fn immutable_configmaps_and_secrets_keep_their_data() {
        let mutable = json!({"data": {"k": "v"}});
        let changed = json!({"data": {"k": "w"}});
        for plural in ["configmaps", "secrets"] {
            assert!(check("", plural, &mutable, &changed).is_empty());
            let old = json!({"immutable": true, "data": {"k": "v"}, "binaryData": {"b": "AA=="}});
            let mut same = old.clone();
            same["metadata"] = json!({"labels": {"x": "y"}});
            assert!(check("", plural, &old, &same).is_empty(), "{plural}");
            let new = json!({"data": {"k": "w"}});
            assert_eq!(
                fields(&check("", plural, &old, &new)),
                vec![
                    ("FieldValueForbidden", "immutable"),
                    ("FieldValueForbidden", "data"),
                    ("FieldValueForbidden", "binaryData")
                ]
            );
        }
    }

    #[test]
    fn service_cluster_ip_is_immutable_once_set() {
        let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.5"}});
        let moved = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.6"}});
        assert_eq!(
            fields(&check("", "services", &old, &moved)),
            vec![("FieldValueInvalid", "spec.clusterIP")]
        );
        let external = json!({"spec": {"type": "ExternalName", "externalName": "x"}});
        assert!(check("", "services", &old, &external).is_empty());
        let unset = json!({"spec": {"type": "ClusterIP"}});
        assert!(check("", "services", &unset, &moved).is_empty());
        // An update that omits the address keeps the allocated one, so it is no change.
        let mut omitted = json!({"spec": {"type": "ClusterIP", "ports": []}});
        keep_allocated("", "services", &old, &mut omitted);
        assert_eq!(omitted["spec"]["clusterIP"], "10.96.0.5");
        assert!(check("", "services", &old, &omitted).is_empty());
    }

    #[test]
    fn pvc_spec_is_immutable_except_requests() {
        let old = json!({"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "a",
            "resources": {"requests": {"storage": "1Gi"}}}});
        let mut grown = old.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(check("", "persistentvolumeclaims", &old, &grown).is_empty());
        let mut class = old.clone();
        class["spec"]["storageClassName"] = json!("b");
        assert_eq!(
            fields(&check("", "persistentvolumeclaims", &old, &class)),
            vec![("FieldValueForbidden", "spec")]
        );
    }

    #[test]
    fn crd_scope_is_immutable() {
        let g = "apiextensions.k8s.io";
        let old = json!({"spec": {"scope": "Namespaced", "group": "example.com"}});
        let cluster = json!({"spec": {"scope": "Cluster", "group": "example.com"}});
        assert_eq!(
            fields(&check(g, "customresourcedefinitions", &old, &cluster)),
            vec![("FieldValueInvalid", "spec.scope")]
        );
        assert!(check(g, "customresourcedefinitions", &old, &old).is_empty());
    }
}
