//! The `scale` subresource (`…/deployments/web/scale`), as the apiserver serves it for
//! Deployments, StatefulSets and ReplicaSets and for custom resources that declare
//! `subresources.scale`: what `kubectl scale` and autoscalers read and write.
//!
//! Rules implemented here:
//! - The subresource reads and writes an `autoscaling/v1` `Scale` (discovery lists
//!   `<plural>/scale` with that group, version and kind, which is how clients find it): its metadata
//!   is the parent's name, namespace, uid, resourceVersion and creationTimestamp; `spec.replicas`
//!   is the parent's spec replicas (built-in kinds default an absent value to 1, as the apiserver's
//!   defaulting does; custom resources to 0); `status.replicas` the parent's status replicas (0
//!   when absent); `status.selector` the label selector in its string form — for built-in kinds
//!   the parent's `spec.selector` formatted as `k=v,k in (a,b),!k` (requirements sorted by key),
//!   for custom resources the string at `labelSelectorPath` (absent when the CRD names none).
//! - A write (PUT of a Scale, or a merge, strategic-merge or JSON patch of the Scale) changes only
//!   the parent's spec replicas, through a merge patch of the parent, so the parent's own rules
//!   apply (admission, immutable fields, managed fields for the writer, a new generation, the
//!   workload simulator). A `metadata.resourceVersion` in the written Scale is a precondition on the
//!   parent (409 Conflict when it moved). `spec.replicas` must be a non-negative integer (422).
//! - Apply patches (server-side apply) of a Scale are not served (415), nor are other verbs (405).

use serde_json::{json, Map, Value};

use crate::api_error::{ApiError, ApiResult};
use crate::ops;
use crate::patch;
use crate::request::{Req, Target};
use crate::resources::{ResourceType, ScalePaths};
use crate::Shared;

/// The group/version/kind clients decode the subresource as.
pub const SCALE_GROUP: &str = "autoscaling";
/// See [`SCALE_GROUP`].
pub const SCALE_VERSION: &str = "v1";
/// See [`SCALE_GROUP`].
pub const SCALE_KIND: &str = "Scale";

/// Serves a request for the scale subresource of `t` (whose `sub` is `scale`).
pub async fn serve(
    sh: &Shared,
    t: &Target,
    r: &Req,
    verb: &str,
    content_type: &str,
    body: &[u8],
) -> ApiResult<(u16, Value)> {
    let Some(paths) = t.rt.scale.as_ref() else {
        return Err(t.not_found());
    };
    let parent = Target {
        sub: String::new(),
        ..t.clone()
    };
    let current = || -> ApiResult<Value> { Ok(of(&t.rt, paths, &ops::get(sh, &parent)?)) };
    let written = match verb {
        "get" => return Ok((200, current()?)),
        "update" => serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding Scale: {e}")))?,
        "patch" => {
            let ct = content_type.split(';').next().unwrap_or("").trim();
            let p: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let mut scale = current()?;
            match ct {
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    patch::merge(&mut scale, &p)
                }
                "application/json-patch+json" => patch::json(&mut scale, &p)?,
                other => return Err(ApiError::unsupported_media_type(other)),
            }
            scale
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    let replicas = replicas_of(t, &written)?;
    let mut change = Value::Object(Map::new());
    set_path(&mut change, &paths.spec_replicas, json!(replicas));
    if let Some(rv) = written["metadata"]["resourceVersion"]
        .as_str()
        .filter(|rv| !rv.is_empty())
    {
        change["metadata"] = json!({"resourceVersion": rv});
    }
    let bytes = serde_json::to_vec(&change)
        .map_err(|e| ApiError::internal(format!("encoding the parent patch: {e}")))?;
    let (_, after) = ops::patch(sh, &parent, r, "application/merge-patch+json", &bytes).await?;
    Ok((200, of(&t.rt, paths, &after)))
}

/// The written `spec.replicas`: a non-negative integer, or 422 Invalid.
fn replicas_of(t: &Target, scale: &Value) -> ApiResult<i64> {
    let v = &scale["spec"]["replicas"];
    match v.as_i64() {
        Some(n) if n >= 0 && n <= i64::from(i32::MAX) => Ok(n),
        _ => Err(ApiError::invalid(
            SCALE_GROUP,
            SCALE_KIND,
            &t.name,
            vec![(
                "spec.replicas".into(),
                format!("Invalid value: {v}: must be greater than or equal to 0"),
            )],
        )),
    }
}

/// The `Scale` view of a parent object.
pub fn of(rt: &ResourceType, paths: &ScalePaths, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut m = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(k) {
            m.insert(k.to_owned(), v.clone());
        }
    }
    let default = if rt.custom { 0 } else { 1 };
    let spec = get_path(obj, &paths.spec_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(default);
    let status = get_path(obj, &paths.status_replicas)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut st = json!({"replicas": status});
    let selector = if rt.custom {
        paths
            .label_selector
            .as_deref()
            .and_then(|p| get_path(obj, p))
            .and_then(Value::as_str)
            .map(str::to_owned)
    } else {
        Some(format_selector(&obj["spec"]["selector"]))
    };
    if let Some(s) = selector.filter(|s| !s.is_empty()) {
        st["selector"] = json!(s);
    }
    json!({
        "kind": SCALE_KIND,
        "apiVersion": format!("{SCALE_GROUP}/{SCALE_VERSION}"),
        "metadata": m,
        "spec": {"replicas": spec},
        "status": st,
    })
}

/// A `LabelSelector` object in its string form (requirements sorted by key, values sorted).
pub fn format_selector(sel: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key.to_owned(), text));
    }
    reqs.sort();
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// The segments of a JSON path of the form `.spec.replicas`.
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('.').filter(|s| !s.is_empty())
}

fn get_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    segments(path).try_fold(v, |cur, k| cur.get(k))
}

/// Sets `path` in `v`, making the objects on the way.
fn set_path(v: &mut Value, path: &str, x: Value) {
    let segs: Vec<&str> = segments(path).collect();
    let Some((last, init)) = segs.split_last() else {
        return;
    };
    let mut cur = v;
    for k in init {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Some(m) = cur.as_object_mut() else {
            return;
        };
        cur = m
            .entry((*k).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(m) = cur.as_object_mut() {
        m.insert((*last).to_owned(), x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_format_as_the_apiserver_prints_them() {
        let sel = json!({
            "matchLabels": {"tier": "web", "app": "a"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "zone", "operator": "NotIn", "values": ["x"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "b", "operator": "Exists"},
            ],
        });
        assert_eq!(
            format_selector(&sel),
            "app=a,b,!canary,env in (dev,prod),tier=web,zone notin (x)"
        );
        assert_eq!(format_selector(&Value::Null), "");
    }

    #[test]
    fn the_scale_view_reads_the_paths_and_defaults_like_the_apiserver() {
        let builtin = crate::resources::builtins()
            .into_iter()
            .find(|r| r.plural == "deployments")
            .unwrap();
        let paths = builtin.scale.clone().unwrap();
        let d = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u",
                                    "resourceVersion": "7", "labels": {"x": "y"}},
                       "spec": {"selector": {"matchLabels": {"app": "a"}}}});
        let s = of(&builtin, &paths, &d);
        assert_eq!(
            s,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "web", "namespace": "default", "uid": "u", "resourceVersion": "7"},
                   "spec": {"replicas": 1}, "status": {"replicas": 0, "selector": "app=a"}})
        );

        let crd = json!({"metadata": {"name": "widgets.ex.com"}, "spec": {
            "group": "ex.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                     "statusReplicasPath": ".status.count",
                                                     "labelSelectorPath": ".status.sel"}}}]}});
        let rt = crate::resources::from_crd(&crd).unwrap();
        let paths = rt.scale.clone().unwrap();
        let w = json!({"metadata": {"name": "w"}, "spec": {"size": 4},
                       "status": {"count": 3, "sel": "app=w"}});
        let s = of(&rt, &paths, &w);
        assert_eq!(s["spec"]["replicas"], 4);
        assert_eq!(s["status"], json!({"replicas": 3, "selector": "app=w"}));
        let bare = of(&rt, &paths, &json!({"metadata": {"name": "w"}}));
        assert_eq!(bare["spec"]["replicas"], 0, "custom kinds have no default");
        assert!(bare["status"].get("selector").is_none());
    }

    #[test]
    fn a_path_is_written_with_the_objects_on_the_way() {
        let mut v = json!({});
        set_path(&mut v, ".spec.scaling.size", json!(3));
        assert_eq!(v, json!({"spec": {"scaling": {"size": 3}}}));
        assert_eq!(get_path(&v, ".spec.scaling.size"), Some(&json!(3)));
        assert_eq!(get_path(&v, ".spec.missing"), None);
    }
}
