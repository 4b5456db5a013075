//! OpenAPI documents, so `kubectl explain <crd>[.field]` and kubectl 1.20 `diff` work: the v2
//! document (JSON, or the gnostic `openapi_v2.Document` protobuf kubectl asks for, an encoding
//! of the JSON one) and the v3 documents (`/openapi/v3` index,
//! `/openapi/v3/apis/<group>/<version>`).
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
//!   `oneOf`/`anyOf`/`allOf`/`not` are dropped. The protobuf form encodes `$ref`, `description`,
//!   `type`, `format`, `required`, `properties`, `items`, `additionalProperties` and the GVK
//!   extension.
//! - v2 `paths` cover every served resource, built-in or custom, from the same resource table
//!   as discovery: per served version the collection (`/api/v1/namespaces/{namespace}/configmaps`,
//!   `/apis/<group>/<version>/<plural>` when cluster-scoped), object (`<collection>/{name}`),
//!   all-namespaces list and `/status` paths, with the operations the resource's verbs allow
//!   (review kinds: `post` only). Each operation carries `x-kubernetes-action` and
//!   `x-kubernetes-group-version-kind` (one object, as the apiserver writes it on operations);
//!   writes take the `dryRun` query parameter. kubectl 1.20 `diff` refuses a kind unless its
//!   PATCH operation (found by that GVK) has `dryRun`; kubectl ≥ 1.26 no longer checks.
//! - v3 group-version documents also carry `paths`: for every definition its collection and
//!   object paths with a `get` operation tagged `x-kubernetes-group-version-kind` (kubectl ≥ 1.27
//!   `explain` resolves a resource to its kind through them, then finds the schema by that GVK).
//! - Built-in kinds have no definitions: kubectl skips client-side validation for them and uses
//!   its compiled-in types for strategic merge, as before.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::builtin;
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

/// The definition name of a custom kind's version: `dev.opmodel.v1alpha1.ModuleInstance`.
fn def_name(group: &str, version: &str, kind: &str) -> String {
    format!("{}.{version}.{kind}", reversed_group(group))
}

/// The definitions of the stored CRDs' served versions.
fn defs_of_crds(st: &State) -> Vec<Def> {
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
                name: def_name(&rt.group, version, &rt.kind),
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

/// `/openapi/v2` as JSON: the CRDs' definitions and the operations of every served resource.
pub fn v2_json(st: &State) -> Value {
    let mut defs = builtin_definitions().clone();
    defs.extend(
        defs_of_crds(st)
            .into_iter()
            .map(|d| (d.name, to_v2(&d.schema))),
    );
    json!({
        "swagger": "2.0",
        "info": {"title": "kube-emu", "version": "v1.37.0"},
        "paths": v2_paths(st),
        "definitions": defs,
    })
}

/// Where one version of a resource is served (the apiserver's path shapes): the collection
/// (`…/namespaces/{namespace}/<plural>` or `…/<plural>`), one object (`<collection>/{name}`),
/// and for namespaced resources the list across all namespaces (`…/<plural>`).
struct Shapes {
    collection: String,
    object: String,
    all_namespaces: Option<String>,
}

fn shapes(group: &str, version: &str, plural: &str, namespaced: bool) -> Shapes {
    let base = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let collection = if namespaced {
        format!("{base}/namespaces/{{namespace}}/{plural}")
    } else {
        format!("{base}/{plural}")
    };
    Shapes {
        object: format!("{collection}/{{name}}"),
        all_namespaces: namespaced.then(|| format!("{base}/{plural}")),
        collection,
    }
}

/// The group-version part of an operation id, as the apiserver spells it: `CoreV1`, `AppsV1`,
/// `RbacAuthorizationV1`, `OpmodelDevV1alpha1`.
fn gv_camel(group: &str, version: &str) -> String {
    fn upper_first(s: &str) -> String {
        let mut c = s.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    }
    let group = if group.is_empty() {
        "core"
    } else {
        group.strip_suffix(".k8s.io").unwrap_or(group)
    };
    let g: String = group.split(['.', '-']).map(upper_first).collect();
    format!("{g}{}", upper_first(version))
}

/// A query parameter of an operation.
fn query(name: &str, ty: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "type": ty, "uniqueItems": true, "description": description})
}

/// A path parameter (`name`, `namespace`).
fn path_param(name: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "type": "string", "uniqueItems": true})
}

/// The query parameters of an action: `dryRun` on every write (kubectl 1.20 `diff` checks the
/// PATCH operation for it), `fieldManager` on create/update/patch, `force` on patch, the list
/// and watch options on list.
fn action_params(action: &str) -> Vec<Value> {
    let dry_run = query(
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. Valid value: All.",
    );
    let field_manager = query(
        "fieldManager",
        "string",
        "The name of the actor or entity making the change.",
    );
    match action {
        "post" | "put" => vec![dry_run, field_manager],
        "patch" => vec![
            dry_run,
            field_manager,
            query(
                "force",
                "boolean",
                "Force an apply request, taking over conflicting fields.",
            ),
        ],
        "delete" | "deletecollection" => vec![dry_run],
        "list" => vec![
            query(
                "labelSelector",
                "string",
                "A selector on the objects' labels.",
            ),
            query(
                "fieldSelector",
                "string",
                "A selector on the objects' fields.",
            ),
            query("limit", "integer", "The maximum number of items to return."),
            query(
                "continue",
                "string",
                "The continue token of a previous list.",
            ),
            query("resourceVersion", "string", "Where a watch starts."),
            query("watch", "boolean", "Watch for changes instead of listing."),
            query("allowWatchBookmarks", "boolean", "Ask for BOOKMARK events."),
            query(
                "timeoutSeconds",
                "integer",
                "The timeout of a list or watch call.",
            ),
        ],
        _ => Vec::new(),
    }
}

/// The v2 `paths` of every served resource: for each served version its collection, object,
/// all-namespaces and `/status` paths with the operations its verbs allow, each tagged with
/// `x-kubernetes-action` and `x-kubernetes-group-version-kind` (one object, as the apiserver
/// writes it on operations). Write operations take `dryRun`. Built from the same resource
/// table as discovery; bodies and responses refer to the CRD's definition, or are a plain
/// object for built-in kinds (which have no definitions).
fn v2_paths(st: &State) -> Map<String, Value> {
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for rt in st.types.values() {
        for version in &rt.versions {
            let gvk = json!({"group": rt.group, "version": version, "kind": rt.kind});
            let builtin_def = builtin::table()
                .rows
                .iter()
                .find(|r| r.group == rt.group && r.version == version && r.plural == rt.plural);
            let schema = match (rt.schema(version), builtin_def) {
                (Some(_), _) => {
                    json!({"$ref": format!("#/definitions/{}", def_name(&rt.group, version, &rt.kind))})
                }
                (None, Some(b)) => json!({"$ref": format!("#/definitions/{}", b.definition)}),
                (None, None) => json!({"type": "object"}),
            };
            let gv = gv_camel(&rt.group, version);
            let scope = if rt.namespaced { "Namespaced" } else { "" };
            let s = shapes(&rt.group, version, &rt.plural, rt.namespaced);
            let mut add = |path: &str, method: &str, action: &str, id: String| {
                let mut params = Vec::new();
                if matches!(action, "post" | "put" | "patch") {
                    params.push(
                        json!({"name": "body", "in": "body", "required": true, "schema": schema}),
                    );
                }
                params.extend(action_params(action));
                let response = match action {
                    "list" | "deletecollection" => json!({"description": "OK"}),
                    _ => json!({"description": "OK", "schema": schema}),
                };
                let item = paths.entry(path.to_string()).or_default();
                if !item.contains_key("parameters") {
                    let mut path_params = Vec::new();
                    if path.contains("{name}") {
                        path_params.push(path_param("name"));
                    }
                    if path.contains("{namespace}") {
                        path_params.push(path_param("namespace"));
                    }
                    item.insert("parameters".into(), Value::Array(path_params));
                }
                item.insert(
                    method.into(),
                    json!({
                        "operationId": id,
                        "x-kubernetes-action": action,
                        "x-kubernetes-group-version-kind": gvk,
                        "parameters": params,
                        "responses": {"200": response},
                    }),
                );
            };
            let kind = &rt.kind;
            add(
                &s.collection,
                "post",
                "post",
                format!("create{gv}{scope}{kind}"),
            );
            if rt.is_review() {
                continue;
            }
            add(
                &s.collection,
                "get",
                "list",
                format!("list{gv}{scope}{kind}"),
            );
            add(
                &s.collection,
                "delete",
                "deletecollection",
                format!("delete{gv}Collection{scope}{kind}"),
            );
            if let Some(all) = &s.all_namespaces {
                add(
                    all,
                    "get",
                    "list",
                    format!("list{gv}{kind}ForAllNamespaces"),
                );
            }
            for (method, action, verb) in [
                ("get", "get", "read"),
                ("put", "put", "replace"),
                ("patch", "patch", "patch"),
                ("delete", "delete", "delete"),
            ] {
                add(
                    &s.object,
                    method,
                    action,
                    format!("{verb}{gv}{scope}{kind}"),
                );
            }
            if rt.status_subresource {
                let status = format!("{}/status", s.object);
                for (method, verb) in [("get", "read"), ("put", "replace"), ("patch", "patch")] {
                    add(
                        &status,
                        method,
                        method,
                        format!("{verb}{gv}{scope}{kind}Status"),
                    );
                }
            }
        }
    }
    paths
        .into_iter()
        .map(|(k, v)| (k, Value::Object(v)))
        .collect()
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

    /// A vendor extension: `NamedAny { name, value: Any { yaml } }` (JSON is valid YAML).
    fn extension(&mut self, field: u64, name: &str, value: &Value) {
        let mut any = Pb::default();
        any.string(2, &value.to_string());
        let mut named = Pb::default();
        named.string(1, name);
        named.message(2, any);
        self.message(field, named);
    }
}

/// `openapi_v2.Schema`: `$ref` 1, format 2, description 4, required 19, additionalProperties 21,
/// type 22, items 23, properties 25, the GVK extension 31.
fn schema_pb(s: &Value) -> Pb {
    let mut pb = Pb::default();
    let str_of = |k: &str| s.get(k).and_then(Value::as_str);
    if let Some(r) = str_of("$ref") {
        pb.string(1, r);
    }
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
        pb.extension(31, "x-kubernetes-group-version-kind", gvk);
    }
    pb
}

/// Which gnostic message a parameter is: `(Parameter field, NonBodyParameter field)`, with the
/// fields of that message's `type` and `uniqueItems` (the sub-schemas number them differently).
struct ParamShape {
    non_body: u64,
    ty: u64,
    unique_items: u64,
}

/// `openapi_v2.ParametersItem` of a parameter: a `BodyParameter` (description 1, name 2, in 3,
/// required 4, schema 5) or a query/path sub-schema of a `NonBodyParameter` (required 1, in 2,
/// description 3, name 4, then type and uniqueItems). `None` for kinds of parameter the
/// document never carries (header, formData).
fn parameter_pb(p: &Value) -> Option<Pb> {
    let str_of = |k: &str| p.get(k).and_then(Value::as_str);
    let flag = |k: &str| p.get(k) == Some(&Value::Bool(true));
    let mut param = Pb::default();
    match str_of("in") {
        Some("body") => {
            let mut body = Pb::default();
            if let Some(d) = str_of("description") {
                body.string(1, d);
            }
            body.string(2, str_of("name").unwrap_or("body"));
            body.string(3, "body");
            if flag("required") {
                body.boolean(4, true);
            }
            if p["schema"].is_object() {
                body.message(5, schema_pb(&p["schema"]));
            }
            param.message(1, body);
        }
        Some(loc @ ("query" | "path")) => {
            let shape = if loc == "query" {
                ParamShape {
                    non_body: 3,
                    ty: 6,
                    unique_items: 20,
                }
            } else {
                ParamShape {
                    non_body: 4,
                    ty: 5,
                    unique_items: 19,
                }
            };
            let mut sub = Pb::default();
            if flag("required") {
                sub.boolean(1, true);
            }
            sub.string(2, loc);
            if let Some(d) = str_of("description") {
                sub.string(3, d);
            }
            if let Some(n) = str_of("name") {
                sub.string(4, n);
            }
            if let Some(t) = str_of("type") {
                sub.string(shape.ty, t);
            }
            if flag("uniqueItems") {
                sub.boolean(shape.unique_items, true);
            }
            let mut non_body = Pb::default();
            non_body.message(shape.non_body, sub);
            param.message(2, non_body);
        }
        _ => return None,
    }
    let mut item = Pb::default();
    item.message(1, param);
    Some(item)
}

/// `openapi_v2.Operation`: description 3, operationId 5, parameters 8, responses 9 (`Responses`
/// of `NamedResponseValue { name, ResponseValue { Response { description, SchemaItem } } }`)
/// and the `x-` vendor extensions 13.
fn operation_pb(op: &Value) -> Pb {
    let mut pb = Pb::default();
    if let Some(d) = op.get("description").and_then(Value::as_str) {
        pb.string(3, d);
    }
    if let Some(id) = op.get("operationId").and_then(Value::as_str) {
        pb.string(5, id);
    }
    for p in op["parameters"].as_array().into_iter().flatten() {
        if let Some(item) = parameter_pb(p) {
            pb.message(8, item);
        }
    }
    if let Some(responses) = op["responses"].as_object() {
        let mut codes = Pb::default();
        for (code, r) in responses {
            let mut resp = Pb::default();
            if let Some(d) = r.get("description").and_then(Value::as_str) {
                resp.string(1, d);
            }
            if r["schema"].is_object() {
                let mut item = Pb::default();
                item.message(1, schema_pb(&r["schema"]));
                resp.message(2, item);
            }
            let mut value = Pb::default();
            value.message(1, resp);
            let mut named = Pb::default();
            named.string(1, code);
            named.message(2, value);
            codes.message(1, named);
        }
        pb.message(9, codes);
    }
    for (k, v) in op.as_object().into_iter().flatten() {
        if k.starts_with("x-") {
            pb.extension(13, k, v);
        }
    }
    pb
}

/// `openapi_v2.PathItem`: the operations (get 2, put 3, post 4, delete 5, patch 8) and the
/// path parameters 9.
fn path_item_pb(item: &Value) -> Pb {
    let mut pb = Pb::default();
    for (method, field) in [
        ("get", 2),
        ("put", 3),
        ("post", 4),
        ("delete", 5),
        ("patch", 8),
    ] {
        if item[method].is_object() {
            pb.message(field, operation_pb(&item[method]));
        }
    }
    for p in item["parameters"].as_array().into_iter().flatten() {
        if let Some(param) = parameter_pb(p) {
            pb.message(9, param);
        }
    }
    pb
}

/// `/openapi/v2` as the gnostic `openapi_v2.Document` protobuf, an encoding of [`v2_json`]:
/// `swagger` (1), `info` (2: title 1, version 2), `paths` (8: repeated `NamedPathItem` 2) and
/// `definitions` (9: repeated `NamedSchema` 1).
pub fn v2_proto(st: &State) -> Vec<u8> {
    let doc = v2_json(st);
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut info = Pb::default();
    info.string(1, &str_of(&doc["info"]["title"]));
    info.string(2, &str_of(&doc["info"]["version"]));
    let mut paths = Pb::default();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        let mut named = Pb::default();
        named.string(1, path);
        named.message(2, path_item_pb(item));
        paths.message(2, named);
    }
    let mut definitions = Pb::default();
    for (name, schema) in doc["definitions"].as_object().into_iter().flatten() {
        let mut named = Pb::default();
        named.string(1, name);
        named.message(2, schema_pb(schema));
        definitions.message(1, named);
    }
    let mut out = Pb::default();
    out.string(1, &str_of(&doc["swagger"]));
    out.message(2, info);
    out.message(8, paths);
    out.message(9, definitions);
    out.0
}

/// The built-in kinds' definitions in the v2 form (`$ref`s to `#/definitions/`), each served
/// kind's root tagged with `x-kubernetes-group-version-kind`; computed once per process.
fn builtin_definitions() -> &'static Map<String, Value> {
    static DEFS: OnceLock<Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let table = builtin::table();
        let mut defs = table.definitions.clone();
        for row in &table.rows {
            if let Some(d) = defs.get_mut(&row.definition).and_then(Value::as_object_mut) {
                d.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": row.group, "version": row.version, "kind": row.kind}]),
                );
            }
        }
        defs
    })
}

/// The `group/version` path of a v3 document (`api/v1`, `apis/apps/v1`).
fn v3_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of group-version documents.
pub fn v3_root(st: &State) -> Value {
    let mut paths = BTreeMap::new();
    let gvs = builtin::table()
        .rows
        .iter()
        .map(|r| (r.group.to_string(), r.version.to_string()))
        .chain(defs_of_crds(st).into_iter().map(|d| (d.group, d.version)));
    for (group, version) in gvs {
        let p = v3_path(&group, &version);
        let url = format!("/openapi/v3/{p}");
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// Rewrites `#/definitions/` references to `#/components/schemas/` (the v3 form).
fn to_v3_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == "$ref" {
                    if let Some(r) = child
                        .as_str()
                        .and_then(|r| r.strip_prefix("#/definitions/"))
                    {
                        *child = json!(format!("#/components/schemas/{r}"));
                    }
                } else {
                    to_v3_refs(child);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(to_v3_refs),
        _ => {}
    }
}

/// Adds `name` and every built-in definition it references to `out` (v3 form).
fn reachable(name: &str, defs: &Map<String, Value>, out: &mut Map<String, Value>) {
    if out.contains_key(name) {
        return;
    }
    let Some(d) = defs.get(name) else {
        return;
    };
    let mut d = d.clone();
    to_v3_refs(&mut d);
    let mut refs = Vec::new();
    collect_refs(&d, &mut refs);
    out.insert(name.to_string(), d);
    for r in refs {
        reachable(&r, defs, out);
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                match (k.as_str(), child.as_str()) {
                    ("$ref", Some(r)) => {
                        if let Some(n) = r.strip_prefix("#/components/schemas/") {
                            out.push(n.to_string());
                        }
                    }
                    _ => collect_refs(child, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_refs(c, out)),
        _ => {}
    }
}

/// The `paths` entries of one definition: its collection and object paths (namespaced and
/// cluster-wide, as the apiserver publishes them), each with a `get` operation tagged with the
/// GVK and answering the definition. kubectl ≥ 1.27 `explain` finds a resource's kind through
/// these operations.
fn v3_paths(d: &Def, paths: &mut Map<String, Value>) {
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
    let s = shapes(&d.group, &d.version, &d.plural, d.namespaced);
    paths.insert(s.object, op("get", false));
    paths.insert(s.collection, op("list", true));
    if let Some(all) = s.all_namespaces {
        paths.insert(all, op("list", true));
    }
}

/// `/openapi/v3/apis/<group>/<version>`, or `None` when no CRD serves that group-version.
pub fn v3_group_version(st: &State, group: &str, version: &str) -> Option<Value> {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    let builtins = builtin_definitions();
    for row in builtin::table()
        .rows
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        reachable(&row.definition, builtins, &mut schemas);
        let d = Def {
            name: row.definition.clone(),
            group: row.group.to_string(),
            version: row.version.to_string(),
            kind: row.kind.to_string(),
            plural: row.plural.to_string(),
            namespaced: row.namespaced,
            schema: Value::Null,
        };
        v3_paths(&d, &mut paths);
    }
    for d in defs_of_crds(st)
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

    /// A state with the built-ins and one namespaced CRD kind (`example.com/v1` Widget).
    fn state_with_widget() -> State {
        let mut st = State::new(16);
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]},
        });
        let rt = crate::resources::from_crd(&crd).unwrap();
        st.types.insert((rt.group.clone(), rt.plural.clone()), rt);
        st
    }

    fn has_dry_run(op: &Value) -> bool {
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "dryRun" && p["in"] == "query")
    }

    #[test]
    fn v2_paths_of_built_in_and_custom_kinds() {
        let doc = v2_json(&state_with_widget());
        let paths = doc["paths"].as_object().unwrap();
        // Namespaced built-in: collection, object, across namespaces.
        let cm = &paths["/api/v1/namespaces/{namespace}/configmaps/{name}"];
        for m in ["get", "put", "patch", "delete"] {
            assert_eq!(
                cm[m]["x-kubernetes-group-version-kind"],
                json!({"group": "", "version": "v1", "kind": "ConfigMap"}),
                "{m}"
            );
        }
        assert!(has_dry_run(&cm["patch"]) && has_dry_run(&cm["put"]) && has_dry_run(&cm["delete"]));
        assert!(!has_dry_run(&cm["get"]));
        assert_eq!(cm["patch"]["operationId"], "patchCoreV1NamespacedConfigMap");
        let names: Vec<&Value> = cm["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["name"])
            .collect();
        assert_eq!(names, ["name", "namespace"]);
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/configmaps"]["post"]["x-kubernetes-action"],
            "post"
        );
        assert_eq!(
            paths["/api/v1/configmaps"]["get"]["operationId"],
            "listCoreV1ConfigMapForAllNamespaces"
        );
        // Cluster-scoped built-in with a status subresource (kubectl 1.20 `diff` of a CRD kind
        // without its own PATCH operation falls back to Namespace's).
        let ns = &paths["/api/v1/namespaces/{name}"];
        assert!(has_dry_run(&ns["patch"]));
        assert_eq!(
            ns["patch"]["x-kubernetes-group-version-kind"]["kind"],
            "Namespace"
        );
        assert!(has_dry_run(
            &paths["/api/v1/namespaces/{name}/status"]["patch"]
        ));
        // A group: the group's path prefix and operation ids.
        assert_eq!(
            paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
                ["operationId"],
            "patchAppsV1NamespacedDeployment"
        );
        assert_eq!(
            paths["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["put"]["operationId"],
            "replaceRbacAuthorizationV1ClusterRole"
        );
        // Review kinds are create-only.
        let review = paths["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]
            .as_object()
            .unwrap();
        let methods: Vec<&String> = review.keys().filter(|k| *k != "parameters").collect();
        assert_eq!(methods, ["post"]);
        assert!(
            !paths.contains_key("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews/{name}")
        );
        // The CRD kind, its body and response referring to its definition.
        let w = &paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"];
        assert!(has_dry_run(&w["patch"]));
        assert_eq!(
            w["patch"]["x-kubernetes-group-version-kind"],
            json!({"group": "example.com", "version": "v1", "kind": "Widget"})
        );
        assert_eq!(
            w["patch"]["operationId"],
            "patchExampleComV1NamespacedWidget"
        );
        let reference = "#/definitions/com.example.v1.Widget";
        assert_eq!(w["get"]["responses"]["200"]["schema"]["$ref"], reference);
        assert!(doc["definitions"]["com.example.v1.Widget"].is_object());
        // Every served resource has its PATCH operation (one source: the resource table).
        let st = state_with_widget();
        for rt in st.types.values().filter(|t| !t.is_review()) {
            let found = paths.values().any(|item| {
                item["patch"]["x-kubernetes-group-version-kind"]["kind"] == rt.kind.as_str()
                    && has_dry_run(&item["patch"])
            });
            assert!(found, "no PATCH with dryRun for {}", rt.kind);
        }
    }

    /// The fields of one protobuf message: (field number, payload) for length-delimited
    /// fields, (field number, varint as 8 little-endian bytes) for varints.
    fn fields(mut b: &[u8]) -> Vec<(u64, Vec<u8>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut n = 0;
            let mut shift = 0;
            loop {
                let byte = b[0];
                *b = &b[1..];
                n |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    return n;
                }
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            match key & 7 {
                0 => out.push((key >> 3, varint(&mut b).to_le_bytes().to_vec())),
                2 => {
                    let len = varint(&mut b) as usize;
                    out.push((key >> 3, b[..len].to_vec()));
                    b = &b[len..];
                }
                w => panic!("unexpected wire type {w}"),
            }
        }
        out
    }

    fn field(b: &[u8], n: u64) -> Vec<Vec<u8>> {
        fields(b)
            .into_iter()
            .filter(|(f, _)| *f == n)
            .map(|(_, v)| v)
            .collect()
    }

    fn one(b: &[u8], path: &[u64]) -> Vec<u8> {
        path.iter().fold(b.to_vec(), |m, n| {
            field(&m, *n)
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("no field {n}"))
        })
    }

    /// Walks the protobuf as kubectl 1.20's dry-run check does: Document.paths.path[], each
    /// PathItem's patch operation, its GVK vendor extension (YAML of one object) and its
    /// parameters' query sub-schema names.
    #[test]
    fn v2_protobuf_carries_the_patch_operations() {
        let st = state_with_widget();
        let pb = v2_proto(&st);
        let doc = v2_json(&st);
        assert_eq!(one(&pb, &[1]), b"2.0");
        let items = field(&one(&pb, &[8]), 2);
        assert_eq!(items.len(), doc["paths"].as_object().unwrap().len());
        let mut dry_run_kinds = Vec::new();
        for item in &items {
            let name = String::from_utf8(one(item, &[1])).unwrap();
            let path_item = one(item, &[2]);
            let Some(patch) = field(&path_item, 8).into_iter().next() else {
                continue;
            };
            let gvk = field(&patch, 13)
                .into_iter()
                .find(|ext| one(ext, &[1]) == b"x-kubernetes-group-version-kind")
                .map(|ext| serde_json::from_slice::<Value>(&one(&ext, &[2, 2])).unwrap())
                .unwrap_or_else(|| panic!("no GVK on PATCH {name}"));
            let query_names: Vec<Vec<u8>> = field(&patch, 8)
                .iter()
                .filter_map(|p| field(&one(p, &[1]), 2).into_iter().next())
                .filter_map(|nb| field(&nb, 3).into_iter().next())
                .map(|q| one(&q, &[4]))
                .collect();
            assert!(
                query_names.iter().any(|n| n == b"dryRun"),
                "{name}: {query_names:?}"
            );
            assert_eq!(
                doc["paths"][&name]["patch"]["x-kubernetes-group-version-kind"],
                gvk
            );
            dry_run_kinds.push(gvk["kind"].as_str().unwrap().to_string());
        }
        for kind in ["ConfigMap", "Namespace", "Deployment", "Widget"] {
            assert!(dry_run_kinds.iter().any(|k| k == kind), "{kind}");
        }
        // Path parameters: PathItem.parameters → Parameter → NonBodyParameter → path sub-schema.
        let cm = items
            .iter()
            .find(|i| one(i, &[1]) == b"/api/v1/namespaces/{namespace}/configmaps/{name}")
            .unwrap();
        let params: Vec<Vec<u8>> = field(&one(cm, &[2]), 9)
            .iter()
            .map(|p| one(p, &[1, 2, 4, 4]))
            .collect();
        assert_eq!(params, [b"name".to_vec(), b"namespace".to_vec()]);
        // The definitions are still there.
        let defs = field(&one(&pb, &[9]), 1);
        let names: Vec<Vec<u8>> = defs.iter().map(|d| one(d, &[1])).collect();
        for name in ["com.example.v1.Widget", "io.k8s.api.apps.v1.Deployment"] {
            assert!(names.iter().any(|n| n == name.as_bytes()), "{name}");
        }
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
