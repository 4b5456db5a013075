//! The inventory model and the reconcile digests (docs/design/operator.md §6.1–§6.2, docs/design/principles.md rules
//! 1–2).
//!
//! Rules implemented here:
//! - An entry is `{group, kind, namespace, name, v, component}` built from a rendered object's
//!   `apiVersion`, `kind`, `metadata.namespace`, `metadata.name` and its
//!   `component.opmodel.dev/name` label (`crds::common::InventoryEntry`).
//! - **Stale set** = previous entries with no desired entry equal on (group, kind, namespace,
//!   name). The version and the component are not part of identity: an API migration
//!   (v1beta1 → v1) or a move between components is never stale. An empty previous inventory gives
//!   an empty stale set.
//! - **Inventory digest**: entries stably sorted by group, kind, namespace, name, component,
//!   version; the array JSON-encoded as Go's `encoding/json` encodes the CRD struct (keys in the
//!   order group, kind, namespace, name, v, component; empty optional fields omitted; compact; `<`,
//!   `>`, `&`, U+2028 and U+2029 escaped as `\u00xx`); `sha256:<hex>` of those bytes. No entries →
//!   the digest of empty input. This must stay wire-compatible with the Go digest (the CLI hand-off
//!   compares inventories).
//! - **Source digest** (ModuleInstance) = sha256 of `path@version`; **config digest** = sha256 of the
//!   values re-serialised with sorted keys (none/empty → empty input; unparsable → the raw bytes);
//!   **render digest** = objects stably sorted by group, kind, namespace, name, each serialised
//!   as Go serialises an unstructured object (map keys sorted), concatenated, hashed.
//! - **Size budget**: an inventory whose encoded entries exceed the budget (default 512 KiB, well
//!   under etcd's 1.5 MiB request limit) is a typed [`Error::TooLarge`], never a status write the
//!   API server rejects.
//!
//! The Go-compatible encoder here exists only to reproduce Go's digest bytes; it is not an output
//! format (objects leave the operator as `serde_json::Value`).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crds::common::InventoryEntry;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The label carrying a rendered object's component.
pub const COMPONENT_LABEL: &str = "component.opmodel.dev/name";

/// Default inventory size budget in bytes of encoded entries.
pub const DEFAULT_SIZE_BUDGET: usize = 512 * 1024;

/// Errors of the inventory model.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A rendered object lacks `apiVersion`, `kind` or `metadata.name` (or they are not strings).
    #[error("object {index} has no {field}")]
    MissingField {
        /// Position of the object in the rendered list.
        index: usize,
        /// The missing field.
        field: &'static str,
    },
    /// The encoded inventory exceeds the size budget.
    #[error(
        "inventory of {count} entries encodes to {size} bytes, over the budget of {budget} bytes"
    )]
    TooLarge {
        /// Number of entries.
        count: usize,
        /// Encoded size in bytes.
        size: usize,
        /// The budget in bytes.
        budget: usize,
    },
}

/// Builds the inventory entry of one rendered object.
pub fn entry_of(index: usize, object: &Value) -> Result<InventoryEntry, Error> {
    let text = |v: Option<&Value>, field: &'static str| -> Result<String, Error> {
        match v.and_then(Value::as_str) {
            Some(s) if !s.is_empty() => Ok(s.to_owned()),
            _ => Err(Error::MissingField { index, field }),
        }
    };
    let api_version = text(object.get("apiVersion"), "apiVersion")?;
    let kind = text(object.get("kind"), "kind")?;
    let metadata = object.get("metadata");
    let name = text(metadata.and_then(|m| m.get("name")), "metadata.name")?;
    let namespace = metadata
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let component = metadata
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(COMPONENT_LABEL))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (Some(g.to_owned()), v.to_owned()),
        None => (None, api_version),
    };
    Ok(InventoryEntry {
        group: group.filter(|g| !g.is_empty()),
        kind,
        namespace,
        name,
        v: Some(version).filter(|v| !v.is_empty()),
        component,
    })
}

/// Builds the entries of a rendered object list, in render order.
pub fn entries_of<'a>(
    objects: impl IntoIterator<Item = &'a Value>,
) -> Result<Vec<InventoryEntry>, Error> {
    objects
        .into_iter()
        .enumerate()
        .map(|(i, o)| entry_of(i, o))
        .collect()
}

/// The identity used for staleness: (group, kind, namespace, name).
fn identity(e: &InventoryEntry) -> (&str, &str, &str, &str) {
    (
        e.group.as_deref().unwrap_or(""),
        &e.kind,
        e.namespace.as_deref().unwrap_or(""),
        &e.name,
    )
}

/// Previous entries that no desired entry matches on (group, kind, namespace, name), in the
/// previous inventory's order.
pub fn stale(previous: &[InventoryEntry], desired: &[InventoryEntry]) -> Vec<InventoryEntry> {
    let wanted: BTreeSet<_> = desired.iter().map(identity).collect();
    previous
        .iter()
        .filter(|e| !wanted.contains(&identity(e)))
        .cloned()
        .collect()
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let mut out = String::from("sha256:");
    for b in Sha256::digest(bytes) {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Entries sorted as the digest sorts them: group, kind, namespace, name, component, version.
fn sorted(entries: &[InventoryEntry]) -> Vec<&InventoryEntry> {
    let mut v: Vec<&InventoryEntry> = entries.iter().collect();
    v.sort_by(|a, b| {
        let key = |e: &'_ InventoryEntry| {
            (
                e.group.clone().unwrap_or_default(),
                e.kind.clone(),
                e.namespace.clone().unwrap_or_default(),
                e.name.clone(),
                e.component.clone().unwrap_or_default(),
                e.v.clone().unwrap_or_default(),
            )
        };
        key(a).cmp(&key(b))
    });
    v
}

/// The Go `encoding/json` bytes of the entries (CRD struct field order; `kind` and `name` always
/// present, the optional fields omitted when empty).
fn encode_entries(entries: &[&InventoryEntry]) -> String {
    let mut out = String::from("[");
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let fields = [
            ("group", e.group.as_deref()),
            ("kind", Some(e.kind.as_str())),
            ("namespace", e.namespace.as_deref()),
            ("name", Some(e.name.as_str())),
            ("v", e.v.as_deref()),
            ("component", e.component.as_deref()),
        ];
        out.push('{');
        let mut first = true;
        for (key, value) in fields {
            let required = key == "kind" || key == "name";
            let Some(value) = value.filter(|v| required || !v.is_empty()) else {
                continue;
            };
            if !first {
                out.push(',');
            }
            first = false;
            go_string(&mut out, key);
            out.push(':');
            go_string(&mut out, value);
        }
        out.push('}');
    }
    out.push(']');
    out
}

/// Appends `s` as a Go `encoding/json` string literal (HTML-safe escaping; cue's escaper).
fn go_string(out: &mut String, s: &str) {
    cue::export::json_str(s, out);
}

/// Appends `v` as Go's `encoding/json` encodes an unstructured value (`map[string]any` with sorted
/// keys, `[]any`, numbers as written).
fn go_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => go_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_string(out, k);
                out.push(':');
                if let Some(val) = map.get(*k) {
                    go_value(out, val);
                }
            }
            out.push('}');
        }
    }
}

/// The inventory digest of §6.1.
pub fn inventory_digest(entries: &[InventoryEntry]) -> String {
    if entries.is_empty() {
        return sha256_digest(b"");
    }
    sha256_digest(encode_entries(&sorted(entries)).as_bytes())
}

/// Checks the encoded size of `entries` against `budget` bytes.
pub fn check_size(entries: &[InventoryEntry], budget: usize) -> Result<(), Error> {
    let size = encode_entries(&entries.iter().collect::<Vec<_>>()).len();
    if size > budget {
        return Err(Error::TooLarge {
            count: entries.len(),
            size,
            budget,
        });
    }
    Ok(())
}

/// The ModuleInstance source digest: sha256 of `path@version`.
pub fn source_digest(path: &str, version: &str) -> String {
    sha256_digest(format!("{path}@{version}").as_bytes())
}

/// The config digest of raw values bytes (the CR's `spec.values`).
pub fn config_digest(values: Option<&[u8]>) -> String {
    let raw = match values {
        None => return sha256_digest(b""),
        Some([]) => return sha256_digest(b""),
        Some(raw) => raw,
    };
    match serde_json::from_slice::<Value>(raw) {
        Ok(v) => {
            let mut out = String::new();
            go_value(&mut out, &v);
            sha256_digest(out.as_bytes())
        }
        Err(_) => sha256_digest(raw),
    }
}

/// The render-digest sort key of an object: (group, kind, namespace, name).
type ObjectKey = (String, String, String, String);

/// The render digest of the rendered objects.
pub fn render_digest<'a>(objects: impl IntoIterator<Item = &'a Value>) -> String {
    let field = |o: &Value, path: &[&str]| -> String {
        let mut cur = o;
        for p in path {
            match cur.get(p) {
                Some(next) => cur = next,
                None => return String::new(),
            }
        }
        cur.as_str().unwrap_or_default().to_owned()
    };
    let mut keyed: Vec<(ObjectKey, &Value)> = objects
        .into_iter()
        .map(|o| {
            let api = field(o, &["apiVersion"]);
            let group = api
                .split_once('/')
                .map(|(g, _)| g.to_owned())
                .unwrap_or_default();
            (
                (
                    group,
                    field(o, &["kind"]),
                    field(o, &["metadata", "namespace"]),
                    field(o, &["metadata", "name"]),
                ),
                o,
            )
        })
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::new();
    for (_, o) in keyed {
        go_value(&mut out, o);
    }
    sha256_digest(out.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    fn e(group: &str, kind: &str, ns: &str, name: &str, v: &str, comp: &str) -> InventoryEntry {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        InventoryEntry {
            group: opt(group),
            kind: kind.into(),
            namespace: opt(ns),
            name: name.into(),
            v: opt(v),
            component: opt(comp),
        }
    }

    #[test]
    fn entries_come_from_gvk_namespace_name_and_component_label() {
        let objs = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "prod",
                                "labels": {"component.opmodel.dev/name": "web"}}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}),
        ];
        let got = entries_of(&objs).unwrap();
        assert_eq!(got[0], e("apps", "Deployment", "prod", "web", "v1", "web"));
        assert_eq!(got[1], e("", "Namespace", "", "prod", "v1", ""));
    }

    #[test]
    fn an_object_without_a_name_is_a_typed_error() {
        let err = entry_of(
            3,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        );
        assert_eq!(
            err,
            Err(Error::MissingField {
                index: 3,
                field: "metadata.name"
            })
        );
    }

    #[test]
    fn version_and_component_moves_are_never_stale() {
        let prev = vec![
            e("policy", "PodDisruptionBudget", "a", "x", "v1beta1", "c1"),
            e("", "ConfigMap", "a", "moved", "v1", "c1"),
            e("", "ConfigMap", "a", "gone", "v1", "c1"),
        ];
        let desired = vec![
            e("policy", "PodDisruptionBudget", "a", "x", "v1", "c1"),
            e("", "ConfigMap", "a", "moved", "v1", "c2"),
        ];
        assert_eq!(stale(&prev, &desired), vec![prev[2].clone()]);
        assert!(stale(&[], &desired).is_empty());
        assert_eq!(stale(&prev, &[]), prev);
    }

    #[test]
    fn a_namespace_change_is_stale() {
        let prev = vec![e("", "ConfigMap", "a", "x", "v1", "")];
        let desired = vec![e("", "ConfigMap", "b", "x", "v1", "")];
        assert_eq!(stale(&prev, &desired), prev);
    }

    // Expected digests computed independently with Python:
    //   hashlib.sha256(json.dumps(entries, separators=(",", ":")).encode()).hexdigest()
    // over the entries listed in each test (Go's field order, omitempty, sorted as §6.1 says).
    #[test]
    fn inventory_digest_matches_the_go_encoding() {
        assert_eq!(
            inventory_digest(&[]),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // Deliberately out of order: the digest sorts.
        let entries = vec![
            e("", "ConfigMap", "prod", "web-config", "v1", "config"),
            e("apps", "Deployment", "prod", "web", "v1", "web"),
        ];
        assert_eq!(
            encode_entries(&sorted(&entries)),
            r#"[{"kind":"ConfigMap","namespace":"prod","name":"web-config","v":"v1","component":"config"},{"group":"apps","kind":"Deployment","namespace":"prod","name":"web","v":"v1","component":"web"}]"#
        );
        assert_eq!(
            inventory_digest(&entries),
            "sha256:be7361e03f1e423fea329ae79dd0a9b2ba3df74f9c6750b22cee37610854064b"
        );
    }

    #[test]
    fn go_strings_escape_html_characters() {
        let mut s = String::new();
        go_string(&mut s, "a<b>&\u{2028}\"\\\n");
        assert_eq!(s, r#""a\u003cb\u003e\u0026\u2028\"\\\n""#);
    }

    #[test]
    fn config_digest_ignores_key_order_and_whitespace() {
        let a = config_digest(Some(br#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#));
        let b = config_digest(Some(br#"{"a":{"x":"s","y":[1,2]},"b":1}"#));
        assert_eq!(a, b);
        assert_eq!(a, sha256_digest(br#"{"a":{"x":"s","y":[1,2]},"b":1}"#));
        assert_eq!(config_digest(None), sha256_digest(b""));
        assert_eq!(config_digest(Some(b"")), sha256_digest(b""));
        assert_eq!(
            config_digest(Some(b"{not json")),
            sha256_digest(b"{not json")
        );
    }

    #[test]
    fn source_digest_hashes_path_at_version() {
        assert_eq!(
            source_digest("fixtures.test/modules/demo@v0", "v0.1.0"),
            sha256_digest(b"fixtures.test/modules/demo@v0@v0.1.0")
        );
    }

    #[test]
    fn render_digest_is_independent_of_render_order() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "n"}, "data": {"k": "v"}});
        let dep = json!({"kind": "Deployment", "apiVersion": "apps/v1",
                         "metadata": {"namespace": "n", "name": "w"}});
        let one = render_digest([&cm, &dep]);
        assert_eq!(one, render_digest([&dep, &cm]));
        // Core group ("") sorts before "apps"; keys are sorted inside each object.
        let expected = concat!(
            r#"{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"a","namespace":"n"}}"#,
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w","namespace":"n"}}"#
        );
        assert_eq!(one, sha256_digest(expected.as_bytes()));
        let changed = json!({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "a", "namespace": "n"}, "data": {"k": "w"}});
        assert_ne!(one, render_digest([&changed, &dep]));
    }

    #[test]
    fn an_oversize_inventory_is_a_typed_error() {
        let entries: Vec<_> = (0..100)
            .map(|i| e("", "ConfigMap", "ns", &format!("cm-{i:04}"), "v1", "c"))
            .collect();
        assert!(check_size(&entries, DEFAULT_SIZE_BUDGET).is_ok());
        match check_size(&entries, 1000) {
            Err(Error::TooLarge {
                count,
                size,
                budget,
            }) => {
                assert_eq!((count, budget), (100, 1000));
                assert!(size > 1000);
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }
}
