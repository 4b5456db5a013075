//! OpenAPI documents for the custom resources, so `kubectl explain <crd>[.field]` works: the
//! v2 document (JSON, or the gnostic `openapi_v2.Document` protobuf kubectl asks for) and the v3
//! documents (`/openapi/v3` index, `/openapi/v3/apis/<group>/<version>`).
//!
//! Rules implemented:
//! - One definition per served version of every stored CRD that has a schema, named as the
//!   apiserver names them: the reversed group, the version and the kind
//!   (`dev.opmodel.v1alpha1.ModuleInstance`), tagged with `x-kubernetes-group-version-kind`.
//!   `apiVersion`, `kind` (strings) and `metadata` (an object) are added to the root's properties
//!   when the schema leaves them out, as the apiserver does (it uses a `$ref` to ObjectMeta, which
//!   the emulator does not publish).
//! - v3 carries the structural schema as stored. v2 is the apiserver's lossy down-conversion in
//!   the parts kubectl reads: a node with `x-kubernetes-preserve-unknown-fields` keeps only its
//!   description (an emulator choice: kubectl then accepts anything there), `nullable` drops
//!   the node's `type`, `properties` and `items` and its entry in the parent's `required`, an
//!   array without `items` loses its type,
//!   `oneOf`/`anyOf`/`allOf`/`not` are dropped. The protobuf form encodes `description`, `type`,
//!   `format`, `required`, `properties`, `items`, `additionalProperties` and the GVK extension.
//! - v3 group-version documents also carry `paths`: for every definition its collection and
//!   object paths with a `get` operation tagged `x-kubernetes-group-version-kind` (kubectl ≥ 1.27
//!   `explain` resolves a resource to its kind through them, then finds the schema by that GVK).
//! - Built-in kinds have no definitions: kubectl skips client-side validation for them and uses
//!   its compiled-in types for strategic merge, as before.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::state::State;

/// One published definition.
struct Def {
    name: String,
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    schema: Value,
}

/// `opmodel.dev` → `dev.opmodel`.
fn reversed_group(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

fn defs(st: &State) -> Vec<Def> {
    let mut out = Vec::new();
    for rt in st.types.values().filter(|t| t.custom) {
        for version in &rt.versions {
            let Some(s) = rt.schema(version) else {
                continue;
            };
            let mut schema = s.clone();
            if let Some(m) = schema.as_object_mut() {
                let props = m
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(p) = props.as_object_mut() {
                    p.entry("apiVersion").or_insert_with(|| json!({
                        "type": "string",
                        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.",
                    }));
                    p.entry("kind").or_insert_with(|| json!({
                        "type": "string",
                        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase.",
                    }));
                    p.entry("metadata").or_insert_with(|| json!({
                        "type": "object",
                        "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                    }));
                }
                m.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": rt.group, "version": version, "kind": rt.kind}]),
                );
            }
            out.push(Def {
                name: format!("{}.{}.{}", reversed_group(&rt.group), version, rt.kind),
                group: rt.group.clone(),
                version: version.clone(),
                kind: rt.kind.clone(),
                plural: rt.plural.clone(),
                namespaced: rt.namespaced,
                schema,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The v2 down-conversion of a structural schema node (see the module doc).
fn to_v2(s: &Value) -> Value {
    let Some(m) = s.as_object() else {
        return s.clone();
    };
    let mut out = Map::new();
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        if let Some(d) = m.get("description") {
            out.insert("description".into(), d.clone());
        }
        return Value::Object(out);
    }
    let nullable = m.get("nullable") == Some(&Value::Bool(true));
    for (k, v) in m {
        match k.as_str() {
            "oneOf" | "anyOf" | "allOf" | "not" | "nullable" => {}
            // An untyped node must not carry properties or items (kubectl's parser rejects it).
            "type" | "properties" | "items" if nullable => {}
            // kubectl cannot parse an array without an item schema.
            "type" if v == "array" && !m.get("items").is_some_and(Value::is_object) => {}
            // A nullable property is not required in v2.
            "required" => {
                let props = m.get("properties");
                let kept: Vec<Value> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| {
                        let p = r.as_str().and_then(|r| props.and_then(|p| p.get(r)));
                        !p.is_some_and(|p| p.get("nullable") == Some(&Value::Bool(true)))
                    })
                    .cloned()
                    .collect();
                if !kept.is_empty() {
                    out.insert(k.clone(), Value::Array(kept));
                }
            }
            "properties" => {
                let props: Map<String, Value> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(pk, pv)| (pk.clone(), to_v2(pv)))
                    .collect();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), to_v2(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// `/openapi/v2` as JSON.
pub fn v2_json(st: &State) -> Value {
    let defs: Map<String, Value> = defs(st)
        .into_iter()
        .map(|d| (d.name, to_v2(&d.schema)))
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "kube-emu", "version": "v1.31.0"},
        "paths": {},
        "definitions": defs,
    })
}

/// A protobuf message under construction (wire types 0 and 2 only).
#[derive(Default)]
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut n: u64) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }

    fn bytes(&mut self, field: u64, b: &[u8]) {
        self.varint(field << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u64, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn message(&mut self, field: u64, m: Pb) {
        self.bytes(field, &m.0);
    }

    fn boolean(&mut self, field: u64, b: bool) {
        self.varint(field << 3);
        self.varint(u64::from(b));
    }
}

/// `openapi_v2.Schema`.
fn schema_pb(s: &Value) -> Pb {
    let mut pb = Pb::default();
    let str_of = |k: &str| s.get(k).and_then(Value::as_str);
    if let Some(f) = str_of("format") {
        pb.string(2, f);
    }
    if let Some(d) = str_of("description") {
        pb.string(4, d);
    }
    for r in s["required"].as_array().into_iter().flatten() {
        if let Some(r) = r.as_str() {
            pb.string(19, r);
        }
    }
    match &s["additionalProperties"] {
        Value::Object(_) => {
            let mut item = Pb::default();
            item.message(1, schema_pb(&s["additionalProperties"]));
            pb.message(21, item);
        }
        Value::Bool(b) => {
            let mut item = Pb::default();
            item.boolean(2, *b);
            pb.message(21, item);
        }
        _ => {}
    }
    if let Some(t) = str_of("type") {
        let mut ty = Pb::default();
        ty.string(1, t);
        pb.message(22, ty);
    }
    if s["items"].is_object() {
        let mut items = Pb::default();
        items.message(1, schema_pb(&s["items"]));
        pb.message(23, items);
    }
    if let Some(props) = s["properties"].as_object() {
        let mut p = Pb::default();
        for (k, v) in props {
            let mut named = Pb::default();
            named.string(1, k);
            named.message(2, schema_pb(v));
            p.message(1, named);
        }
        pb.message(25, p);
    }
    if let Some(gvk) = s.get("x-kubernetes-group-version-kind") {
        // NamedAny { name, value: Any { yaml } }; JSON is valid YAML.
        let mut any = Pb::default();
        any.string(2, &gvk.to_string());
        let mut named = Pb::default();
        named.string(1, "x-kubernetes-group-version-kind");
        named.message(2, any);
        pb.message(31, named);
    }
    pb
}

/// `/openapi/v2` as the gnostic `openapi_v2.Document` protobuf: `swagger` (1), `info` (2:
/// title 1, version 2), `paths` (8, empty) and `definitions` (9: repeated NamedSchema 1).
pub fn v2_proto(st: &State) -> Vec<u8> {
    let mut info = Pb::default();
    info.string(1, "kube-emu");
    info.string(2, "v1.31.0");
    let mut definitions = Pb::default();
    for d in defs(st) {
        let mut named = Pb::default();
        named.string(1, &d.name);
        named.message(2, schema_pb(&to_v2(&d.schema)));
        definitions.message(1, named);
    }
    let mut doc = Pb::default();
    doc.string(1, "2.0");
    doc.message(2, info);
    doc.message(8, Pb::default());
    doc.message(9, definitions);
    doc.0
}

/// `/openapi/v3`: the index of group-version documents.
pub fn v3_root(st: &State) -> Value {
    let mut paths = BTreeMap::new();
    for d in defs(st) {
        let p = format!("apis/{}/{}", d.group, d.version);
        let url = format!("/openapi/v3/{p}");
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// The `paths` entries of one definition: its collection and object paths (namespaced and
/// cluster-wide, as the apiserver publishes them), each with a `get` operation tagged with the
/// GVK and answering the definition. kubectl ≥ 1.27 `explain` finds a resource's kind through
/// these operations.
fn v3_paths(d: &Def, paths: &mut Map<String, Value>) {
    let base = format!("/apis/{}/{}", d.group, d.version);
    let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
    let schema_ref = json!({"$ref": format!("#/components/schemas/{}", d.name)});
    let op = |action: &str, list: bool| {
        let mut schema = schema_ref.clone();
        if list {
            schema = json!({"type": "object", "properties": {"items": {"type": "array", "items": schema_ref}}});
        }
        json!({"get": {
            "operationId": format!("{action}{}", d.kind),
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}},
        }})
    };
    paths.insert(format!("{base}/{}", d.plural), op("list", true));
    if d.namespaced {
        let ns = format!("{base}/namespaces/{{namespace}}/{}", d.plural);
        paths.insert(format!("{ns}/{{name}}"), op("get", false));
        paths.insert(ns, op("list", true));
    } else {
        paths.insert(format!("{base}/{}/{{name}}", d.plural), op("get", false));
    }
}

/// `/openapi/v3/apis/<group>/<version>`, or `None` when no CRD serves that group-version.
pub fn v3_group_version(st: &State, group: &str, version: &str) -> Option<Value> {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for d in defs(st)
        .into_iter()
        .filter(|d| d.group == group && d.version == version)
    {
        v3_paths(&d, &mut paths);
        schemas.insert(d.name, d.schema);
    }
    if schemas.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_down_conversion() {
        let s = json!({"type": "object", "required": ["maybe", "either"], "properties": {
            "values": {"type": "object", "description": "free", "x-kubernetes-preserve-unknown-fields": true,
                       "properties": {"a": {"type": "string"}}},
            "maybe": {"type": "object", "nullable": true, "description": "n", "properties": {"x": {"type": "string"}}},
            "either": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        }});
        assert_eq!(
            to_v2(&s),
            json!({"type": "object", "required": ["either"], "properties": {
                "values": {"description": "free"},
                "maybe": {"description": "n"},
                "either": {"x-kubernetes-int-or-string": true},
            }})
        );
    }

    #[test]
    fn varint_keys_above_field_15() {
        let mut pb = Pb::default();
        pb.string(22, "x");
        // (22 << 3) | 2 = 178 = 0xb2 0x01, then length 1.
        assert_eq!(pb.0, vec![0xb2, 0x01, 0x01, b'x']);
        assert_eq!(reversed_group("opmodel.dev"), "dev.opmodel");
    }
}
