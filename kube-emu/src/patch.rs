//! Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.
//!
//! Strategic merge uses the list table of `fieldset.rs` (merge keys for containers, ports, env,
//! volumes, conditions...; primitive `finalizers` merge as a set) and honours the `$patch`
//! directives `replace` and `delete`, `$deleteFromPrimitiveList/<field>`; `$setElementOrder` and
//! `$retainKeys` are accepted and ignored. Any other list is replaced, as for a merge patch.

use serde_json::Value;

use crate::api_error::{ApiError, ApiResult};
use crate::fieldset::{ListKind, Shape};

/// Applies a JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies a JSON patch document.
pub fn json(target: &mut Value, patch: &Value) -> ApiResult<()> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    json_patch::patch(target, &p).map_err(|e| {
        ApiError::invalid(
            "",
            "",
            "",
            vec![("patch".into(), format!("Invalid value: {e}"))],
        )
    })
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Applies a strategic merge patch.
pub fn strategic(target: &mut Value, patch: &Value, shape: Shape<'_>) {
    let Some(pm) = patch.as_object() else {
        *target = strip_directives(patch);
        return;
    };
    if pm.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = strip_directives(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    for (k, pv) in pm {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(arr), Some(del)) = (
                target.get_mut(field).and_then(Value::as_array_mut),
                pv.as_array(),
            ) {
                arr.retain(|x| !del.contains(x));
            }
            continue;
        }
        let Some(tm) = target.as_object_mut() else {
            return;
        };
        if pv.is_null() {
            tm.remove(k);
            continue;
        }
        let cshape = shape.child(k);
        match (tm.get_mut(k), pv) {
            (Some(tv @ Value::Object(_)), Value::Object(po)) => {
                if po.get("$patch").and_then(Value::as_str) == Some("delete") {
                    tm.remove(k);
                } else {
                    strategic(tv, pv, cshape);
                }
            }
            (Some(Value::Array(ta)), Value::Array(pa)) => match cshape.list_kind(pa) {
                ListKind::Map(keys) if !keys.is_empty() => {
                    let key = &keys[0];
                    let ishape = cshape.items();
                    for pe in pa {
                        let kv = pe.get(key);
                        let pos = ta.iter().position(|t| t.get(key) == kv && kv.is_some());
                        let delete = pe.get("$patch").and_then(Value::as_str) == Some("delete");
                        match (pos, delete) {
                            (Some(i), true) => {
                                ta.remove(i);
                            }
                            (Some(i), false) => strategic(&mut ta[i], pe, ishape),
                            (None, true) => {}
                            (None, false) => ta.push(strip_directives(pe)),
                        }
                    }
                }
                ListKind::Set => {
                    for pe in pa {
                        if !ta.contains(pe) {
                            ta.push(pe.clone());
                        }
                    }
                }
                _ => *ta = pa.iter().map(strip_directives).collect(),
            },
            _ => {
                tm.insert(k.clone(), strip_directives(pv));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_by_name() {
        let mut t = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}});
        let p = json!({"spec": {"containers": [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}, {"name": "a", "$patch": "delete"}]}});
        strategic(&mut t, &p, Shape::root(None));
        assert_eq!(
            t,
            json!({"spec": {"containers": [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}]}})
        );
    }

    #[test]
    fn strategic_unions_finalizers_and_removes_nulls() {
        let mut t = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}}});
        let p = json!({"metadata": {"finalizers": ["b"], "labels": {"x": null}}});
        strategic(&mut t, &p, Shape::root(None));
        assert_eq!(
            t,
            json!({"metadata": {"finalizers": ["a", "b"], "labels": {"y": "2"}}})
        );
    }
}
