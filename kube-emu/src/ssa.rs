//! Field management: server-side apply and ownership tracking of ordinary updates.
//!
//! Rules (after structured-merge-diff):
//! - Each managedFields entry is one (manager, operation, subresource) with a `fieldsV1` set.
//! - Apply: the applied configuration's leaf set becomes the manager's Apply entry. A leaf also
//!   owned by another entry whose live value differs from the applied one is a conflict (409,
//!   naming the manager) unless `force`, which takes the field from the other owners. Equal values
//!   are shared. The applied configuration is merged into the live object (maps recursively,
//!   list-maps by key, sets by value, other lists replaced). Fields the manager applied before
//!   and no longer applies are removed from the object unless another entry owns them.
//! - Update (create, PUT, patches): leaves that were added or changed move to the manager's
//!   Update entry and are taken from every other entry.
//! - Afterwards every entry keeps only fields that still exist; empty entries are dropped.
//! - `apiVersion`, `kind` and the identity/system metadata (`name`, `namespace`, `uid`,
//!   `resourceVersion`, `generation`, `creationTimestamp`, `deletionTimestamp`, `managedFields`)
//!   are never owned. With a status subresource, main-resource entries exclude `status` and
//!   `/status` entries (`subresource: status`) own only `status`.

use serde_json::{json, Map, Value};

use crate::api_error::{ApiError, ApiResult};
use crate::fieldset::{self, collect, get_path, key_elem, remove_path, FieldSet, ListKind, Shape};

/// Which part of an object a write may touch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scope {
    /// The whole object (no status subresource).
    All,
    /// Everything but `status` (main resource of a kind with a status subresource).
    Main,
    /// Only `status` (the `/status` subresource).
    Status,
}

impl Scope {
    fn subresource(self) -> Option<&'static str> {
        (self == Scope::Status).then_some("status")
    }
}

const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The owned-field view of an object: drops identity fields and what the scope excludes.
pub fn scoped(obj: &Value, scope: Scope) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        match scope {
            Scope::All => {}
            Scope::Main => {
                m.remove("status");
            }
            Scope::Status => m.retain(|k, _| k == "status"),
        }
        if let Some(md) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in SYSTEM_META {
                md.remove(*k);
            }
            if md.is_empty() {
                m.remove("metadata");
            }
        }
    }
    strip_nulls(&mut v);
    v
}

fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, c| !c.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// One managedFields entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    set: FieldSet,
}

fn parse_entries(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or("").to_string(),
                    operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                    api_version: e["apiVersion"].as_str().unwrap_or("").to_string(),
                    time: e["time"].as_str().unwrap_or("").to_string(),
                    subresource: e["subresource"].as_str().map(str::to_string),
                    set: FieldSet::from_json(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn write_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    // Ownership is kept only for fields that still exist in the object.
    for e in &mut entries {
        retain_existing(&mut e.set, obj);
    }
    entries.retain(|e| !e.set.is_empty());
    let arr: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": e.set.to_json(),
            });
            if let Some(s) = e.subresource {
                v["subresource"] = Value::String(s);
            }
            v
        })
        .collect();
    if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if arr.is_empty() {
            md.remove("managedFields");
        } else {
            md.insert("managedFields".into(), Value::Array(arr));
        }
    }
}

/// Drops set nodes whose path does not exist in the object.
fn retain_existing(set: &mut FieldSet, obj: &Value) {
    fn walk(set: &mut FieldSet, v: &Value) {
        set.children.retain(|k, c| {
            let p = [k.clone()];
            match get_path(v, &p) {
                Some(cv) => {
                    walk(c, cv);
                    !c.is_empty()
                }
                None => false,
            }
        });
    }
    walk(set, obj);
}

/// Merges an applied configuration into a live value.
fn merge_apply(live: &mut Value, applied: &Value, shape: Shape<'_>) {
    match (live, applied) {
        (Value::Object(lm), Value::Object(am)) => {
            for (k, av) in am {
                match lm.get_mut(k) {
                    Some(lv) => merge_apply(lv, av, shape.child(k)),
                    None => {
                        lm.insert(k.clone(), av.clone());
                    }
                }
            }
        }
        (Value::Array(la), Value::Array(aa)) => match shape.list_kind(aa) {
            ListKind::Map(keys) => {
                let ishape = shape.items();
                for ae in aa {
                    let name = key_elem(ae, &keys);
                    match la.iter_mut().find(|l| key_elem(l, &keys) == name) {
                        Some(le) => merge_apply(le, ae, ishape),
                        None => la.push(ae.clone()),
                    }
                }
            }
            ListKind::Set => {
                for ae in aa {
                    if !la.contains(ae) {
                        la.push(ae.clone());
                    }
                }
            }
            ListKind::Atomic => *la = aa.clone(),
        },
        (l, a) => *l = a.clone(),
    }
}

/// Arguments of one apply.
pub struct Apply<'a> {
    /// Field manager.
    pub manager: &'a str,
    /// `force=true`.
    pub force: bool,
    /// Schema context of the object.
    pub shape: Shape<'a>,
    /// Which part the request may touch.
    pub scope: Scope,
    /// apiVersion recorded in managedFields.
    pub api_version: &'a str,
    /// Timestamp recorded in managedFields.
    pub now: &'a str,
}

/// Server-side apply: returns the new object (with managedFields) or a 409 naming the owners.
pub fn apply(live: &Value, applied: &Value, a: &Apply<'_>) -> ApiResult<Value> {
    let cfg = scoped(applied, a.scope);
    let mut applied_set = FieldSet::default();
    collect(&cfg, a.shape, &mut applied_set);
    let mut entries = parse_entries(live);
    let sub = a.scope.subresource().map(str::to_string);
    let is_self =
        |e: &Entry| e.manager == a.manager && e.operation == "Apply" && e.subresource == sub;

    let mut conflicts: Vec<(String, Vec<String>)> = Vec::new();
    for e in entries.iter().filter(|e| !is_self(e)) {
        if e.manager == a.manager {
            continue;
        }
        for p in applied_set.leaves() {
            if e.set.has(&p) {
                let lv = get_path(live, &p);
                let av = get_path(&cfg, &p);
                let atomic_leaf =
                    lv.is_some_and(|v| !v.is_object()) || av.is_some_and(|v| !v.is_object());
                if lv != av && atomic_leaf {
                    conflicts.push((e.manager.clone(), p));
                }
            }
        }
    }
    if !conflicts.is_empty() && !a.force {
        return Err(conflict_error(&conflicts, a.api_version));
    }
    for (mgr, p) in &conflicts {
        for e in entries.iter_mut().filter(|e| &e.manager == mgr) {
            e.set.remove(p);
        }
    }

    let mut merged = live.clone();
    if !merged.is_object() {
        merged = Value::Object(Map::new());
    }
    merge_apply(&mut merged, &cfg, a.shape);

    let prev = entries
        .iter()
        .find(|e| is_self(e))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let mut others = FieldSet::default();
    for e in entries.iter().filter(|e| !is_self(e)) {
        others.union(&e.set);
    }
    let removed = prev.difference(&applied_set).difference(&others);
    let mut paths = removed.leaves();
    // Shallow paths first: removing a list element removes its fields with it, and the
    // element's key fields must not be removed on their own (the element would lose its name).
    paths.sort_by_key(Vec::len);
    let mut done: Vec<Vec<String>> = Vec::new();
    for p in paths {
        if p.is_empty() || done.iter().any(|d| p.starts_with(d)) {
            continue;
        }
        if is_key_field(&p) {
            continue;
        }
        remove_path(&mut merged, &p);
        done.push(p);
    }

    let entry = Entry {
        manager: a.manager.to_string(),
        operation: "Apply".into(),
        api_version: a.api_version.to_string(),
        time: a.now.to_string(),
        subresource: sub.clone(),
        set: applied_set,
    };
    // Keep the entry's position so an unchanged apply is recognised as a no-op.
    match entries.iter().position(&is_self) {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    write_entries(&mut merged, entries);
    Ok(merged)
}

/// Whether the path ends at a key field of a list-map element (`...k:{"name":..}/f:name`).
fn is_key_field(p: &[String]) -> bool {
    let [.., parent, last] = p else {
        return false;
    };
    match (parent.strip_prefix("k:"), last.strip_prefix("f:")) {
        (Some(k), Some(f)) => serde_json::from_str::<Map<String, Value>>(k)
            .map(|m| m.contains_key(f))
            .unwrap_or(false),
        _ => false,
    }
}

fn conflict_error(conflicts: &[(String, Vec<String>)], api_version: &str) -> ApiError {
    let n = conflicts.len();
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, p)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with \"{m}\" using {api_version}"),
                "field": fieldset::path_string(p),
            })
        })
        .collect();
    let message = if n == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with \"{}\" using {api_version}: {}",
            conflicts[0].0,
            fieldset::path_string(&conflicts[0].1)
        )
    } else {
        let mut s = format!("Apply failed with {n} conflicts: ");
        let lines: Vec<String> = conflicts
            .iter()
            .map(|(m, p)| {
                format!(
                    "conflict with \"{m}\" using {api_version}: {}",
                    fieldset::path_string(p)
                )
            })
            .collect();
        s.push_str(&lines.join("\n"));
        s
    };
    ApiError::conflict_with(message, json!({"causes": causes}))
}

/// Records an ordinary write by `manager` in the new object's managedFields.
pub fn track_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    shape: Shape<'_>,
    scope: Scope,
    api_version: &str,
    now: &str,
) {
    let mut entries = old.map(parse_entries).unwrap_or_default();
    let old_scoped = old.map(|o| scoped(o, scope));
    let new_scoped = scoped(new, scope);
    let mut changed = FieldSet::default();
    fieldset::changed(old_scoped.as_ref(), &new_scoped, shape, &mut changed);
    let sub = scope.subresource().map(str::to_string);
    if !changed.is_empty() {
        for e in entries.iter_mut() {
            if !(e.manager == manager && e.operation == "Update" && e.subresource == sub) {
                for p in changed.leaves() {
                    e.set.remove(&p);
                }
            }
        }
        match entries
            .iter_mut()
            .find(|e| e.manager == manager && e.operation == "Update" && e.subresource == sub)
        {
            Some(e) => {
                e.set.union(&changed);
                e.time = now.to_string();
                e.api_version = api_version.to_string();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now.to_string(),
                subresource: sub,
                set: changed,
            }),
        }
    }
    write_entries(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<'a>(m: &'a str, force: bool) -> Apply<'a> {
        Apply {
            manager: m,
            force,
            shape: Shape::root(None),
            scope: Scope::All,
            api_version: "v1",
            now: "t",
        }
    }

    #[test]
    fn apply_conflicts_force_and_removal() {
        let a1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1", "y": "2"}});
        let o1 = apply(&json!({"metadata": {"name": "c"}}), &a1, &args("a", false)).unwrap();
        assert_eq!(
            o1["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:x": {}, "f:y": {}}})
        );
        // Same value from another manager: shared, no conflict.
        let b1 = json!({"data": {"x": "1"}});
        let o2 = apply(&o1, &b1, &args("b", false)).unwrap();
        // Different value: conflict naming "a".
        let b2 = json!({"data": {"x": "1", "y": "3"}});
        let err = apply(&o2, &b2, &args("b", false)).unwrap_err();
        assert_eq!(err.code, 409);
        assert!(
            err.message.contains("conflict with \"a\""),
            "{}",
            err.message
        );
        let o3 = apply(&o2, &b2, &args("b", true)).unwrap();
        assert_eq!(o3["data"]["y"], "3");
        // "a" stops applying everything: x and y stay because b applies them.
        let o4 = apply(&o3, &json!({"data": {}}), &args("a", false)).unwrap();
        assert_eq!(o4["data"], json!({"x": "1", "y": "3"}));
        // b stops applying y and nobody else owns it: removed.
        let o5 = apply(&o4, &json!({"data": {"x": "1"}}), &args("b", false)).unwrap();
        assert_eq!(o5["data"], json!({"x": "1"}));
    }

    #[test]
    fn update_takes_ownership_of_changed_fields() {
        let mut o = json!({"metadata": {"name": "c"}, "data": {"x": "1"}});
        track_update(None, &mut o, "m1", Shape::root(None), Scope::All, "v1", "t");
        let mut n = o.clone();
        n["data"]["x"] = json!("2");
        track_update(
            Some(&o),
            &mut n,
            "m2",
            Shape::root(None),
            Scope::All,
            "v1",
            "t",
        );
        let mf = n["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 1);
        assert_eq!(mf[0]["manager"], "m2");
    }
}
