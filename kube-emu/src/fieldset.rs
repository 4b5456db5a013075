//! Field sets in the `fieldsV1` format of managedFields, and the list semantics that shape them.
//!
//! Rules:
//! - A path element is `f:<field>` (map key), `k:<json of key fields>` (element of a list-map,
//!   key fields sorted by name), `v:<json value>` (element of a set list) or `i:<index>`.
//! - A node is owned when it is a leaf (`{}`) or carries the `"."` marker beside children.
//! - Lists are atomic (owned as one leaf) unless the schema (`x-kubernetes-list-type: map|set`,
//!   `x-kubernetes-list-map-keys`) or, for built-in kinds and `metadata`, the known table says
//!   otherwise: `containers`/`initContainers`/`ephemeralContainers`/`volumes`/`env`/
//!   `imagePullSecrets` by `name`, container `ports` by `containerPort`+`protocol`, service
//!   `ports` by `port`+`protocol`, `volumeMounts` by `mountPath`, `conditions` by `type`,
//!   `ownerReferences` by `uid`, `finalizers` as a set.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// How a list merges.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Replaced as a whole.
    Atomic,
    /// Elements identified by these key fields.
    Map(Vec<String>),
    /// Elements identified by their (scalar) value.
    Set,
}

/// The schema context of a value: a structural schema node for custom resources, or the
/// built-in table for core kinds and `metadata`.
#[derive(Debug, Clone, Copy)]
pub struct Shape<'a> {
    schema: Option<&'a Value>,
    builtin: bool,
    field: &'a str,
}

impl<'a> Shape<'a> {
    /// The root shape of an object, from its version's schema (custom resources) or the table.
    pub fn root(schema: Option<&'a Value>) -> Self {
        Shape {
            schema,
            builtin: schema.is_none(),
            field: "",
        }
    }

    /// The shape of a map member.
    pub fn child(self, key: &'a str) -> Shape<'a> {
        if self.field.is_empty() && !self.builtin && key == "metadata" {
            return Shape {
                schema: None,
                builtin: true,
                field: key,
            };
        }
        let schema = self.schema.and_then(|s| {
            s.get("properties")
                .and_then(|p| p.get(key))
                .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
        });
        Shape {
            schema,
            builtin: self.builtin,
            field: key,
        }
    }

    /// The shape of list items.
    pub fn items(self) -> Shape<'a> {
        Shape {
            schema: self.schema.and_then(|s| s.get("items")),
            builtin: self.builtin,
            field: self.field,
        }
    }

    /// The schema node, if any.
    pub fn schema(&self) -> Option<&'a Value> {
        self.schema
    }

    /// How a list at this shape merges; `items` helps tell container ports from service ports.
    pub fn list_kind(&self, items: &[Value]) -> ListKind {
        if !self.builtin {
            let Some(s) = self.schema else {
                return ListKind::Atomic;
            };
            return match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => ListKind::Map(
                    s.get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|k| k.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
                Some("set") => ListKind::Set,
                _ => ListKind::Atomic,
            };
        }
        let keys: &[&str] = match self.field {
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "volumes"
            | "env"
            | "imagePullSecrets" => &["name"],
            "volumeMounts" => &["mountPath"],
            "volumeDevices" => &["devicePath"],
            "conditions" => &["type"],
            "ownerReferences" => &["uid"],
            "ports" => {
                if items.iter().any(|i| i.get("containerPort").is_some()) {
                    &["containerPort", "protocol"]
                } else {
                    &["port", "protocol"]
                }
            }
            "finalizers" => return ListKind::Set,
            _ => return ListKind::Atomic,
        };
        if items.iter().all(Value::is_object) {
            ListKind::Map(keys.iter().map(|k| k.to_string()).collect())
        } else {
            ListKind::Atomic
        }
    }
}

/// The `k:` element name of a list-map item (present key fields only, sorted).
pub fn key_elem(item: &Value, keys: &[String]) -> String {
    let mut m = BTreeMap::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    format!("k:{}", serde_json::to_string(&m).unwrap_or_default())
}

fn item_matches(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

/// A set of fields (a trie of path elements).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet {
    /// Whether this node itself is owned.
    pub own: bool,
    /// Child path elements.
    pub children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// Parses a `fieldsV1` object.
    pub fn from_json(v: &Value) -> FieldSet {
        let mut fs = FieldSet::default();
        if let Some(m) = v.as_object() {
            if m.is_empty() {
                fs.own = true;
            }
            for (k, c) in m {
                if k == "." {
                    fs.own = true;
                } else {
                    fs.children.insert(k.clone(), FieldSet::from_json(c));
                }
            }
        }
        fs
    }

    /// Renders as a `fieldsV1` object.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if self.own && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, c) in &self.children {
            m.insert(k.clone(), c.to_json());
        }
        Value::Object(m)
    }

    /// True when nothing is owned.
    pub fn is_empty(&self) -> bool {
        !self.own && self.children.values().all(FieldSet::is_empty)
    }

    /// All owned paths.
    pub fn leaves(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.walk(&mut Vec::new(), &mut out);
        out
    }

    fn walk(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.own {
            out.push(prefix.clone());
        }
        for (k, c) in &self.children {
            prefix.push(k.clone());
            c.walk(prefix, out);
            prefix.pop();
        }
    }

    /// Whether a path is owned.
    pub fn has(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.own,
            Some((h, t)) => self.children.get(h).is_some_and(|c| c.has(t)),
        }
    }

    /// Marks a path owned.
    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.own = true,
            Some((h, t)) => self.children.entry(h.clone()).or_default().insert(t),
        }
    }

    /// Unmarks a path.
    pub fn remove(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.own = false,
            Some((h, t)) => {
                if let Some(c) = self.children.get_mut(h) {
                    c.remove(t);
                    if c.is_empty() {
                        self.children.remove(h);
                    }
                }
            }
        }
    }

    /// Adds every path of `other`.
    pub fn union(&mut self, other: &FieldSet) {
        self.own |= other.own;
        for (k, c) in &other.children {
            self.children.entry(k.clone()).or_default().union(c);
        }
    }

    /// `self` minus `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            own: self.own && !other.own,
            children: BTreeMap::new(),
        };
        for (k, c) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    /// Keeps only nodes that also exist (owned or not) in `other`.
    pub fn retain_in(&mut self, other: &FieldSet) {
        self.children.retain(|k, c| match other.children.get(k) {
            Some(o) => {
                c.retain_in(o);
                !c.is_empty()
            }
            None => false,
        });
    }
}

/// The field set of a value.
pub fn collect(v: &Value, shape: Shape<'_>, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, cv) in m {
                let mut child = FieldSet::default();
                collect(cv, shape.child(k), &mut child);
                out.children.insert(format!("f:{k}"), child);
            }
        }
        Value::Array(items) if !items.is_empty() => match shape.list_kind(items) {
            ListKind::Map(keys) => {
                let ishape = shape.items();
                for item in items {
                    let mut child = FieldSet {
                        own: true,
                        ..Default::default()
                    };
                    collect(item, ishape, &mut child);
                    child.own = true;
                    out.children.insert(key_elem(item, &keys), child);
                }
            }
            ListKind::Set => {
                for item in items {
                    out.children.insert(
                        format!("v:{}", serde_json::to_string(item).unwrap_or_default()),
                        FieldSet {
                            own: true,
                            ..Default::default()
                        },
                    );
                }
            }
            ListKind::Atomic => out.own = true,
        },
        _ => out.own = true,
    }
}

/// The leaves of `new` that differ from `old` (added or changed), with the same list semantics.
pub fn changed(old: Option<&Value>, new: &Value, shape: Shape<'_>, out: &mut FieldSet) {
    let Some(old) = old else {
        collect(new, shape, out);
        return;
    };
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(om), Value::Object(nm)) if !nm.is_empty() => {
            for (k, nv) in nm {
                let mut child = FieldSet::default();
                changed(om.get(k), nv, shape.child(k), &mut child);
                if !child.is_empty() {
                    out.children.insert(format!("f:{k}"), child);
                }
            }
        }
        (Value::Array(oa), Value::Array(na)) if !na.is_empty() => match shape.list_kind(na) {
            ListKind::Map(keys) => {
                let ishape = shape.items();
                for item in na {
                    let name = key_elem(item, &keys);
                    let prev = oa.iter().find(|o| key_elem(o, &keys) == name);
                    let mut child = FieldSet::default();
                    changed(prev, item, ishape, &mut child);
                    if prev.is_none() {
                        child.own = true;
                    }
                    if !child.is_empty() {
                        out.children.insert(name, child);
                    }
                }
            }
            ListKind::Set => {
                for item in na {
                    if !oa.contains(item) {
                        out.children.insert(
                            format!("v:{}", serde_json::to_string(item).unwrap_or_default()),
                            FieldSet {
                                own: true,
                                ..Default::default()
                            },
                        );
                    }
                }
            }
            ListKind::Atomic => out.own = true,
        },
        _ => collect(new, shape, out),
    }
}

/// The value at a path.
pub fn get_path<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    let Some((h, t)) = path.split_first() else {
        return Some(v);
    };
    let next = if let Some(f) = h.strip_prefix("f:") {
        v.get(f)?
    } else if let Some(k) = h.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        v.as_array()?.iter().find(|i| item_matches(i, &key))?
    } else if let Some(s) = h.strip_prefix("v:") {
        let val: Value = serde_json::from_str(s).ok()?;
        v.as_array()?.iter().find(|i| **i == val)?
    } else if let Some(i) = h.strip_prefix("i:") {
        v.as_array()?.get(i.parse::<usize>().ok()?)?
    } else {
        return None;
    };
    get_path(next, t)
}

/// Removes the value at a path (a map member or a list element); absent paths are ignored.
pub fn remove_path(v: &mut Value, path: &[String]) {
    let Some((h, t)) = path.split_first() else {
        return;
    };
    if t.is_empty() {
        if let Some(f) = h.strip_prefix("f:") {
            if let Some(m) = v.as_object_mut() {
                m.remove(f);
            }
        } else if let Some(k) = h.strip_prefix("k:") {
            if let (Ok(key), Some(a)) = (
                serde_json::from_str::<Map<String, Value>>(k),
                v.as_array_mut(),
            ) {
                a.retain(|i| !item_matches(i, &key));
            }
        } else if let Some(s) = h.strip_prefix("v:") {
            if let (Ok(val), Some(a)) = (serde_json::from_str::<Value>(s), v.as_array_mut()) {
                a.retain(|i| *i != val);
            }
        }
        return;
    }
    let next = if let Some(f) = h.strip_prefix("f:") {
        v.get_mut(f)
    } else if let Some(k) = h.strip_prefix("k:") {
        match serde_json::from_str::<Map<String, Value>>(k) {
            Ok(key) => v
                .as_array_mut()
                .and_then(|a| a.iter_mut().find(|i| item_matches(i, &key))),
            Err(_) => None,
        }
    } else {
        None
    };
    if let Some(n) = next {
        remove_path(n, t);
    }
}

/// A path in the apiserver's conflict notation: `.spec.containers[name="a"].image`.
pub fn path_string(path: &[String]) -> String {
    let mut s = String::new();
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = e.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_are_keyed_by_name() {
        let v = json!({"spec": {"containers": [{"name": "a", "image": "x"}], "replicas": 1}});
        let mut fs = FieldSet::default();
        collect(&v, Shape::root(None), &mut fs);
        assert_eq!(
            fs.to_json(),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}}, "f:replicas": {}}})
        );
        let p: Vec<String> = vec![
            "f:spec".into(),
            "f:containers".into(),
            "k:{\"name\":\"a\"}".into(),
            "f:image".into(),
        ];
        assert_eq!(get_path(&v, &p), Some(&json!("x")));
        assert_eq!(path_string(&p), ".spec.containers[name=\"a\"].image");
    }

    #[test]
    fn fields_v1_round_trips() {
        let j = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:data": {"f:k": {}}});
        assert_eq!(FieldSet::from_json(&j).to_json(), j);
    }

    #[test]
    fn changed_reports_only_differences() {
        let old = json!({"data": {"a": "1", "b": "2"}});
        let new = json!({"data": {"a": "1", "b": "3", "c": "4"}});
        let mut fs = FieldSet::default();
        changed(Some(&old), &new, Shape::root(None), &mut fs);
        assert_eq!(fs.to_json(), json!({"f:data": {"f:b": {}, "f:c": {}}}));
    }
}
