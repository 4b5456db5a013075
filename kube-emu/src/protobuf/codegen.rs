//! The generator of `protobuf/generated.rs`, the field tables the protobuf decoder reads
//! (`cargo run -p kube-emu --bin protogen`; the test `generated_tables_are_up_to_date`
//! regenerates them and fails on any difference).
//!
//! Rules implemented:
//! - Wire facts come from `k8s-pb`'s sources (prost bindings generated from the upstream
//!   `generated.proto` files): for each message its fields' numbers, scalar types, `repeated`,
//!   `map<string, X>` and the message a field holds. The sources are read as text (the
//!   `#[prost(...)]` attribute and the Rust type of each field); `k8s-pb` is never compiled.
//! - JSON facts come from `k8s-openapi`'s schemas (the `latest` feature, the version kube-emu
//!   reports), named as upstream (`io.k8s.api.apps.v1.DeploymentSpec`). The generator walks
//!   from the definition of every served kind (the `builtin` table), plus `TokenRequest`,
//!   `Scale` and `DeleteOptions`, pairing each definition with the `k8s-pb` message of the same
//!   package and name (prost's names lose the casing of acronyms, `ClientIpConfig`: names are
//!   compared without case). A proto field matches the JSON property whose name is equal
//!   ignoring case and punctuation (`u_id` is `uid`, `volume_id` is `volumeID`, `ref` is
//!   `$ref`).
//! - A message `k8s-pb` lacks at that group version (a kind promoted to GA after its
//!   release) is taken from another version of the same group when every one of its fields
//!   matches the GA definition's properties (the field numbers of a promoted type are kept).
//! - A proto field no property matches, holding a message whose fields are all properties of
//!   the parent, is a Go embedded struct (`ProbeHandler` in `Probe`): inlined.
//! - Messages with a JSON form of their own are named by definition: `Time`, `MicroTime`,
//!   `Quantity`, `IntOrString`, the raw-JSON ones (`FieldsV1`, `RawExtension`,
//!   apiextensions `JSON`), the `JSONSchemaPropsOr*` unions; a message with no definition
//!   whose only field is `repeated items` is a Go named slice (`ExtraValue`): a JSON array.
//! - Whether a zero scalar on the wire is kept: Go writes every non-pointer field, so a zero
//!   of a non-pointer `omitempty` field means "unset" and is dropped, as Go's JSON would; the
//!   list of those fields (`go_value_fields.txt`) is extracted from the upstream Go types by
//!   `protogen --go-api` (neither `k8s-pb` nor `k8s-openapi` says which Go fields are
//!   pointers); any other zero (a pointer set to zero, a field without `omitempty`, a field
//!   the list does not know) is kept.
//! - Versions: `k8s-pb` may trail the version kube-emu serves. A proto field the served
//!   JSON has no property for is left out of the table and listed in the generated file's
//!   header (a body setting it is refused, never dropped); a message whose JSON has no
//!   properties at all (a JSON form the decoder lacks) is a generation error.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::schemars::{self, JsonSchema};
use serde_json::{Map, Value};

use crate::Error;

/// A scalar or composite proto field type, as `k8s-pb` declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PbType {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    Bytes,
    /// A message: (module path, struct name).
    Message(String, String),
    /// `map<string, string>`.
    MapString,
    /// `map<string, bytes>`.
    MapBytes,
    /// `map<string, Message>`.
    MapMessage(String, String),
}

/// One field of a `k8s-pb` message.
#[derive(Debug, Clone)]
struct PbField {
    /// The prost field name (`r#` removed).
    name: String,
    tag: u32,
    ty: PbType,
    repeated: bool,
}

/// `k8s-pb`'s messages: (module path, lowercase struct name) → (struct name, fields).
type PbMessages = BTreeMap<(String, String), (String, Vec<PbField>)>;

fn codegen_err(msg: impl Into<String>) -> Error {
    Error::Codegen(msg.into())
}

/// Reads every `mod.rs` under `k8s-pb`'s `src/`.
fn read_k8s_pb(src: &Path) -> Result<PbMessages, Error> {
    let mut out = PbMessages::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = std::fs::read_dir(&dir)
            .map_err(|e| codegen_err(format!("reading {}: {e}", dir.display())))?;
        for entry in rd {
            let path = entry
                .map_err(|e| codegen_err(format!("reading {}: {e}", dir.display())))?
                .path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "mod.rs") {
                let module = path
                    .parent()
                    .and_then(|p| p.strip_prefix(src).ok())
                    .map(|p| {
                        p.components()
                            .map(|c| c.as_os_str().to_string_lossy().into_owned())
                            .collect::<Vec<_>>()
                            .join("/")
                    })
                    .unwrap_or_default();
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| codegen_err(format!("reading {}: {e}", path.display())))?;
                parse_module(&module, &text, &mut out)?;
            }
        }
    }
    Ok(out)
}

/// Parses the prost structs of one module.
fn parse_module(module: &str, text: &str, out: &mut PbMessages) -> Result<(), Error> {
    let mut current: Option<(String, Vec<PbField>)> = None;
    let mut attr = String::new();
    let mut in_attr = false;
    let mut field_decl = String::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some((name, fields)) = current.as_mut() {
            if line == "}" {
                let (name, fields) = (name.clone(), std::mem::take(fields));
                out.insert((module.to_string(), name.to_lowercase()), (name, fields));
                current = None;
                continue;
            }
            if in_attr || l.starts_with("#[prost(") {
                attr.push_str(l);
                in_attr = !l.ends_with(")]");
                continue;
            }
            if l.starts_with("pub ") || !field_decl.is_empty() {
                field_decl.push_str(l);
                // A declaration spans lines until its generics close (`BTreeMap<\n K,\n V,\n>,`).
                let open = field_decl.matches('<').count();
                if !l.ends_with(',') || open != field_decl.matches('>').count() {
                    continue;
                }
                let decl = std::mem::take(&mut field_decl);
                let a = std::mem::take(&mut attr);
                let field = parse_field(module, &a, &decl)
                    .map_err(|e| codegen_err(format!("{module}::{name}: {e}")))?;
                fields.push(field);
            }
        } else if let Some(rest) = l.strip_prefix("pub struct ") {
            if let Some(name) = rest.strip_suffix(" {}") {
                out.insert(
                    (module.to_string(), name.to_lowercase()),
                    (name.to_string(), Vec::new()),
                );
            } else if let Some(name) = rest.strip_suffix(" {") {
                current = Some((name.to_string(), Vec::new()));
                attr.clear();
            }
        }
    }
    Ok(())
}

/// A quoted attribute value: `tag = "3"` → `3`.
fn attr_value<'a>(attr: &'a str, key: &str) -> Option<&'a str> {
    let start = attr.find(&format!("{key} = \""))? + key.len() + 4;
    let end = attr.get(start..)?.find('"')? + start;
    attr.get(start..end)
}

/// Resolves a Rust type path relative to `module` (`super::super::core::v1::PodSpec`).
fn resolve(module: &str, path: &str) -> (String, String) {
    let mut segs: Vec<&str> = module.split('/').filter(|s| !s.is_empty()).collect();
    let mut parts: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let name = parts.pop().unwrap_or_default().to_string();
    let mut rest = Vec::new();
    for p in parts {
        if p == "super" {
            segs.pop();
        } else {
            rest.push(p);
        }
    }
    segs.extend(rest);
    (segs.join("/"), name)
}

/// The innermost type of `Option<Box<X>>`, `Vec<X>`, or the value type of a `BTreeMap`.
fn inner_type(decl: &str) -> String {
    let ty = decl.split_once(':').map(|(_, t)| t).unwrap_or(decl);
    let ty: String = ty.chars().filter(|c| !c.is_whitespace()).collect();
    let ty = ty.trim_end_matches(',');
    let ty = match ty.rsplit_once("String,") {
        Some((_, v)) if ty.contains("BTreeMap<") => v.to_string(),
        _ => ty.to_string(),
    };
    let mut t = ty.as_str();
    for wrapper in [
        "::core::option::Option<",
        "::prost::alloc::boxed::Box<",
        "::prost::alloc::vec::Vec<",
    ] {
        if let Some(x) = t.strip_prefix(wrapper) {
            t = x;
        }
    }
    t.trim_end_matches(['>', ',']).to_string()
}

fn parse_field(module: &str, attr: &str, decl: &str) -> Result<PbField, String> {
    let name = decl
        .trim_start_matches("pub ")
        .split(':')
        .next()
        .unwrap_or_default()
        .trim()
        .trim_start_matches("r#")
        .to_string();
    let tag = attr_value(attr, "tag")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("field {name}: no tag in {attr}"))?;
    let body = attr
        .trim_start_matches("#[prost(")
        .trim_end_matches(")]")
        .to_string();
    let kind = body.split([',', ' ']).next().unwrap_or_default();
    let repeated = body.contains(", repeated");
    let ty = match kind {
        "string" => PbType::String,
        "bool" => PbType::Bool,
        "int32" => PbType::Int32,
        "int64" => PbType::Int64,
        "double" => PbType::Double,
        "bytes" => PbType::Bytes,
        "message" => {
            let (m, n) = resolve(module, &inner_type(decl));
            PbType::Message(m, n)
        }
        "btree_map" | "map" => match attr_value(attr, kind) {
            Some("string, string") => PbType::MapString,
            Some("string, bytes") => PbType::MapBytes,
            Some("string, message") => {
                let (m, n) = resolve(module, &inner_type(decl));
                PbType::MapMessage(m, n)
            }
            other => return Err(format!("field {name}: map type {other:?}")),
        },
        other => return Err(format!("field {name}: proto type {other}")),
    };
    Ok(PbField {
        name,
        tag,
        ty,
        repeated,
    })
}

/// How a message is written in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    Time,
    MicroTime,
    Quantity,
    IntOrString,
    RawJson,
    Array,
    Either,
}

impl Shape {
    fn rust(self) -> &'static str {
        match self {
            Shape::Object => "Object",
            Shape::Time => "Time",
            Shape::MicroTime => "MicroTime",
            Shape::Quantity => "Quantity",
            Shape::IntOrString => "IntOrString",
            Shape::RawJson => "RawJson",
            Shape::Array => "Array",
            Shape::Either => "Either",
        }
    }
}

/// The messages with a JSON form of their own, by definition name.
fn special_shape(definition: &str) -> Option<Shape> {
    const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";
    const EXT: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.";
    Some(match definition {
        d if d == format!("{META}Time") => Shape::Time,
        d if d == format!("{META}MicroTime") => Shape::MicroTime,
        d if d == format!("{META}FieldsV1") => Shape::RawJson,
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => Shape::Quantity,
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => Shape::IntOrString,
        "io.k8s.apimachinery.pkg.runtime.RawExtension" => Shape::RawJson,
        d if d == format!("{EXT}JSON") => Shape::RawJson,
        d if d.starts_with(EXT) && d[EXT.len()..].starts_with("JSONSchemaPropsOr") => Shape::Either,
        _ => return None,
    })
}

/// The `k8s-pb` module of a definition's package, or `None` outside the packages it covers.
fn module_of(definition: &str) -> Option<(String, String)> {
    let (pkg, name) = definition.rsplit_once('.')?;
    let module = [
        ("io.k8s.api.", "api/"),
        ("io.k8s.apimachinery.", "apimachinery/"),
        (
            "io.k8s.apiextensions-apiserver.",
            "apiextensions_apiserver/",
        ),
        ("io.k8s.kube-aggregator.", "kube_aggregator/"),
    ]
    .iter()
    .find_map(|(p, m)| {
        pkg.strip_prefix(p)
            .map(|rest| format!("{m}{}", rest.replace('.', "/")))
    })?;
    Some((module, name.to_string()))
}

/// A name compared as `k8s-pb` and JSON may spell it: lowercase letters and digits only
/// (`u_id` is `uid`, `x_kubernetes_validations` is `x-kubernetes-validations`, `ref` is `$ref`).
fn norm(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .flat_map(char::to_lowercase)
        .collect()
}

/// The `$ref`'d definition of a property schema (direct, array items, map values, `allOf`).
fn ref_of(schema: &Value) -> Option<String> {
    let direct = |s: &Value| {
        s.get("$ref")
            .and_then(Value::as_str)
            .map(|r| r.trim_start_matches("#/definitions/").to_string())
    };
    direct(schema)
        .or_else(|| schema.get("items").and_then(direct))
        .or_else(|| schema.get("additionalProperties").and_then(direct))
        .or_else(|| {
            schema
                .get("allOf")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(direct)
        })
}

/// One field of the generated table.
#[derive(Debug, Clone)]
struct OutField {
    tag: u32,
    json: String,
    ty: String,
    repeated: bool,
    keep_zero: bool,
    inline: bool,
}

/// One message of the generated table.
#[derive(Debug, Clone)]
struct OutMessage {
    /// The definition name (`io.k8s.api.core.v1.Probe`; an inlined embedded struct is
    /// `<parent definition>/<proto name>`).
    name: String,
    shape: Shape,
    /// The `k8s-pb` message (`api/core/v1/Probe`).
    source: String,
    fields: Vec<OutField>,
}

/// The inputs of one generation.
pub struct Inputs {
    /// `k8s-pb`'s `src/` directory.
    pub k8s_pb_src: PathBuf,
    /// `k8s-pb`'s version (written in the header).
    pub k8s_pb_version: String,
    /// The contents of `go_value_fields.txt`.
    pub go_value_fields: String,
}

/// The schemas of every served kind and of the extra messages clients send.
/// A kind a client may send: its `apiVersion` (`*` for any), kind and definition name.
type Root = (String, String, String);

/// A table entry waiting for its fields: its index and definition name, the `k8s-pb`
/// message, and the definition whose properties name its fields (an inlined struct's parent).
struct Pending {
    index: usize,
    name: String,
    msg: (String, String),
    props_of: Option<String>,
}

fn definitions() -> (Map<String, Value>, Vec<Root>) {
    use k8s_openapi::api;
    let table = crate::builtin::table();
    let mut defs = table.definitions.clone();
    let mut settings = schemars::generate::SchemaSettings::draft07();
    settings.definitions_path = "/definitions".into();
    settings.meta_schema = None;
    settings.transforms = Vec::new();
    let mut generator = schemars::SchemaGenerator::new(settings);
    let mut roots: Vec<Root> = table
        .rows
        .iter()
        .map(|r| {
            let api_version = if r.group.is_empty() {
                r.version.to_string()
            } else {
                format!("{}/{}", r.group, r.version)
            };
            (api_version, r.kind.to_string(), r.definition.clone())
        })
        .collect();
    let mut extra = |api_version: &str, kind: &str, name: String| {
        roots.push((api_version.into(), kind.into(), name));
    };
    {
        let _ = generator.subschema_for::<api::authentication::v1::TokenRequest>();
        extra(
            "authentication.k8s.io/v1",
            "TokenRequest",
            api::authentication::v1::TokenRequest::schema_name().into_owned(),
        );
        let _ = generator.subschema_for::<api::autoscaling::v1::Scale>();
        extra(
            "autoscaling/v1",
            "Scale",
            api::autoscaling::v1::Scale::schema_name().into_owned(),
        );
        let _ = generator
            .subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>();
        extra(
            "*",
            "DeleteOptions",
            k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions::schema_name()
                .into_owned(),
        );
    }
    for (k, v) in generator.take_definitions(true) {
        defs.entry(k).or_insert(v);
    }
    roots.sort();
    roots.dedup();
    (defs, roots)
}

/// Parses `go_value_fields.txt`: `definition field field ...` per line, `#` comments; the
/// definition lowercased.
fn parse_value_fields(text: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        if let Some(def) = words.next() {
            // Definitions compared without case: prost's names lose acronyms' casing.
            for f in words {
                out.insert((def.to_lowercase(), f.to_string()));
            }
        }
    }
    out
}

/// The generator's state: the `k8s-pb` messages, the JSON definitions, the table so far.
struct Walk<'a> {
    pb: &'a PbMessages,
    defs: &'a Map<String, Value>,
    value_fields: &'a BTreeSet<(String, String)>,
    index: HashMap<String, usize>,
    out: Vec<OutMessage>,
    queue: VecDeque<Pending>,
    errors: Vec<String>,
    /// Proto fields the served version's JSON has no property for (see the module doc).
    gaps: Vec<String>,
}

impl Walk<'_> {
    /// Whether proto field `f` is a Go embedded struct of a definition with properties
    /// `props`: a single message whose every field is one of `props` or, in turn, an
    /// embedded struct (`RuleWithOperations` embeds `Rule`).
    fn is_embedded(&self, f: &PbField, props: &Map<String, Value>, depth: usize) -> bool {
        let PbType::Message(m, n) = &f.ty else {
            return false;
        };
        if f.repeated || depth > 4 {
            return false;
        }
        self.pb
            .get(&(m.clone(), n.to_lowercase()))
            .is_some_and(|(_, sub)| {
                sub.iter().all(|sf| {
                    props.keys().any(|p| norm(p) == norm(&sf.name))
                        || self.is_embedded(sf, props, depth + 1)
                })
            })
    }

    /// The `k8s-pb` message for a definition: same package, or another version of the group
    /// whose fields all match (see the module doc).
    fn find_message(&self, definition: &str) -> Option<(String, String)> {
        let (module, name) = module_of(definition)?;
        let key = (module.clone(), name.to_lowercase());
        if self.pb.contains_key(&key) {
            return Some(key);
        }
        let group = module.rsplit_once('/').map(|(g, _)| g)?;
        let props = self.properties(definition)?;
        let mut candidates: Vec<&(String, String)> = self
            .pb
            .keys()
            .filter(|(m, n)| m.rsplit_once('/').map(|(g, _)| g) == Some(group) && *n == key.1)
            .collect();
        candidates.sort_by(|a, b| b.0.cmp(&a.0));
        candidates
            .into_iter()
            .find(|k| {
                self.pb.get(*k).is_some_and(|(_, fields)| {
                    fields
                        .iter()
                        .all(|f| props.keys().any(|p| norm(p) == norm(&f.name)))
                })
            })
            .cloned()
    }

    fn properties(&self, definition: &str) -> Option<&Map<String, Value>> {
        self.defs.get(definition)?.get("properties")?.as_object()
    }

    /// The table index of (definition, message), queued for its fields on first sight.
    /// `props_of` is the definition whose properties name the fields (the parent of an
    /// inlined struct).
    fn intern(&mut self, name: String, msg: (String, String), props_of: Option<String>) -> usize {
        if let Some(i) = self.index.get(&name) {
            return *i;
        }
        let shape = special_shape(&name).unwrap_or_else(|| {
            let only_items = self
                .pb
                .get(&msg)
                .is_some_and(|(_, f)| f.len() == 1 && f[0].name == "items" && f[0].repeated);
            if only_items && !self.defs.contains_key(&name) {
                Shape::Array
            } else {
                Shape::Object
            }
        });
        let i = self.out.len();
        self.out.push(OutMessage {
            name: name.clone(),
            shape,
            source: format!("{}/{}", msg.0, self.pb.get(&msg).map_or("?", |m| &m.0)),
            fields: Vec::new(),
        });
        self.index.insert(name.clone(), i);
        self.queue.push_back(Pending {
            index: i,
            name,
            msg,
            props_of,
        });
        i
    }

    /// Fills the fields of table entry `i`.
    fn expand(&mut self, i: usize, name: &str, msg: &(String, String), props_of: Option<&str>) {
        let Some((_, fields)) = self.pb.get(msg) else {
            self.errors
                .push(format!("{name}: no k8s-pb message {}/{}", msg.0, msg.1));
            return;
        };
        let shape = self.out[i].shape;
        if !matches!(shape, Shape::Object | Shape::Array | Shape::Either) {
            // Decoded by shape (`Time`, `Quantity`, ...), not by field table.
            return;
        }
        let def_name = props_of.unwrap_or(name).to_string();
        let props = self.properties(&def_name).cloned().unwrap_or_default();
        if shape == Shape::Object && props.is_empty() && !fields.is_empty() && props_of.is_none() {
            // A JSON form of its own the decoder does not know (`metav1.Duration`, a string).
            self.errors.push(format!(
                "{name}: a message whose JSON has no properties; give it a shape"
            ));
            return;
        }
        let mut out = Vec::new();
        for f in fields {
            let prop = props.iter().find(|(p, _)| norm(p) == norm(&f.name));
            let (json, schema) = match prop {
                Some((p, s)) => (p.clone(), Some(s.clone())),
                // Special shapes and named slices read their fields by number.
                None if shape != Shape::Object => (f.name.clone(), None),
                None => {
                    // A Go embedded struct: every field of it is a property of the parent.
                    let embedded = self.is_embedded(f, &props, 0);
                    if let (true, PbType::Message(m, n)) = (embedded, &f.ty) {
                        let key = (m.clone(), n.to_lowercase());
                        let proto_name = self.pb.get(&key).map_or(n.clone(), |x| x.0.clone());
                        let sub = self.intern(
                            format!("{def_name}/{proto_name}"),
                            key,
                            Some(def_name.clone()),
                        );
                        out.push(OutField {
                            tag: f.tag,
                            json: String::new(),
                            ty: format!("Ty::Msg({sub})"),
                            repeated: false,
                            keep_zero: false,
                            inline: true,
                        });
                    } else {
                        self.gaps.push(format!("{name} {} ({})", f.name, f.tag));
                    }
                    continue;
                }
            };
            let child = |this: &mut Self, m: &str, n: &str| -> usize {
                let key = (m.to_string(), n.to_lowercase());
                let proto_name = this.pb.get(&key).map_or(n.to_string(), |x| x.0.clone());
                // Without a `$ref` (the fields of a union, a Go named slice such as
                // `ExtraValue`): the definition of that name in the package, else a name of
                // its own.
                let package = name.split('/').next().and_then(|n| n.rsplit_once('.'));
                let by_name = package.and_then(|(p, _)| {
                    let want = format!("{p}.{proto_name}").to_lowercase();
                    this.defs.keys().find(|d| d.to_lowercase() == want).cloned()
                });
                let def = schema
                    .as_ref()
                    .and_then(ref_of)
                    .or(by_name)
                    .unwrap_or_else(|| format!("{name}.{json}/{proto_name}"));
                this.intern(def, key, None)
            };
            let ty = match &f.ty {
                PbType::String => "Ty::Str".to_string(),
                PbType::Bool => "Ty::Bool".to_string(),
                PbType::Int32 => "Ty::I32".to_string(),
                PbType::Int64 => "Ty::I64".to_string(),
                PbType::Double => "Ty::F64".to_string(),
                PbType::Bytes => "Ty::Bytes".to_string(),
                PbType::MapString => "Ty::MapStr".to_string(),
                PbType::MapBytes => "Ty::MapBytes".to_string(),
                PbType::Message(m, n) => format!("Ty::Msg({})", child(self, m, n)),
                PbType::MapMessage(m, n) => format!("Ty::MapMsg({})", child(self, m, n)),
            };
            let scalar = matches!(
                f.ty,
                PbType::String | PbType::Bool | PbType::Int32 | PbType::Int64 | PbType::Double
            );
            // The Go struct that declares the field: the embedded one for an inlined message
            // (`LocalObjectReference` in `ConfigMapKeySelector`), named as its definition.
            let go_struct = match (props_of, name.rsplit_once('/'), def_name.rsplit_once('.')) {
                (Some(_), Some((_, embedded)), Some((package, _))) => {
                    format!("{package}.{embedded}")
                }
                _ => def_name.clone(),
            };
            let keep_zero = scalar
                && !f.repeated
                && !self
                    .value_fields
                    .contains(&(go_struct.to_lowercase(), json.clone()));
            out.push(OutField {
                tag: f.tag,
                json,
                ty,
                repeated: f.repeated,
                keep_zero,
                inline: false,
            });
        }
        out.sort_by_key(|f| f.tag);
        self.out[i].fields = out;
    }
}

/// Generates `protobuf/generated.rs` (see the module doc).
pub fn generate(inputs: &Inputs) -> Result<String, Error> {
    let pb = read_k8s_pb(&inputs.k8s_pb_src)?;
    let (defs, roots) = definitions();
    let value_fields = parse_value_fields(&inputs.go_value_fields);
    let mut walk = Walk {
        pb: &pb,
        defs: &defs,
        value_fields: &value_fields,
        index: HashMap::new(),
        out: Vec::new(),
        queue: VecDeque::new(),
        errors: Vec::new(),
        gaps: Vec::new(),
    };
    let mut root_rows = Vec::new();
    let mut missing = Vec::new();
    for (api_version, kind, def) in &roots {
        match walk.find_message(def) {
            Some(msg) => {
                let i = walk.intern(def.clone(), msg, None);
                root_rows.push((api_version.clone(), kind.clone(), i));
            }
            None => missing.push(format!("{api_version} {kind}")),
        }
    }
    while let Some(p) = walk.queue.pop_front() {
        walk.expand(p.index, &p.name, &p.msg, p.props_of.as_deref());
    }
    if !walk.errors.is_empty() {
        return Err(codegen_err(walk.errors.join("\n")));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "//! @generated by `cargo run -p kube-emu --bin protogen`: do not edit (the test\n\
         //! `generated_tables_are_up_to_date` fails on any difference). Wire facts from k8s-pb\n\
         //! {}, JSON names from k8s-openapi's `latest` schemas, zeros of Go value fields from\n\
         //! `go_value_fields.txt`; see `codegen.rs`.",
        inputs.k8s_pb_version
    );
    if !missing.is_empty() {
        let _ = writeln!(
            s,
            "//!\n//! Served kinds without a k8s-pb message (decoded as JSON only): {}.",
            missing.join(", ")
        );
    }
    if !walk.gaps.is_empty() {
        walk.gaps.sort();
        walk.gaps.dedup();
        let _ = writeln!(
            s,
            "//!\n//! Fields of k8s-pb {} that the served version's JSON does not have (left out: a\n\
             //! body that sets one is refused, 400):\n//! {}.",
            inputs.k8s_pb_version,
            walk.gaps.join(", ")
        );
    }
    let _ = writeln!(s, "\nuse super::{{Field, Message, Shape, Ty}};\n");
    let _ = writeln!(
        s,
        "/// The message of each kind a client may send: (apiVersion, kind, message); `*` is any."
    );
    let _ = writeln!(s, "pub(super) const ROOTS: &[(&str, &str, u16)] = &[");
    for (v, k, i) in &root_rows {
        let _ = writeln!(s, "    ({v:?}, {k:?}, {i}),");
    }
    let _ = writeln!(s, "];\n");
    let _ = writeln!(
        s,
        "/// Every message, by index; fields in field-number order."
    );
    let _ = writeln!(s, "pub(super) const MESSAGES: &[Message] = &[");
    for (i, m) in walk.out.iter().enumerate() {
        let _ = writeln!(
            s,
            "    // {i}: k8s-pb {}\n    Message {{ name: {:?}, shape: Shape::{}, fields: &[",
            m.source,
            m.name,
            m.shape.rust()
        );
        for f in &m.fields {
            let _ = writeln!(
                s,
                "        Field {{ tag: {}, json: {:?}, ty: {}, repeated: {}, keep_zero: {}, inline: {} }},",
                f.tag, f.json, f.ty, f.repeated, f.keep_zero, f.inline
            );
        }
        let _ = writeln!(s, "    ] }},");
    }
    let _ = writeln!(s, "];");
    Ok(s)
}

/// `k8s-pb`'s `src/` directory and version, from `cargo metadata` run in `manifest_dir`.
pub fn locate_k8s_pb(manifest_dir: &Path) -> Result<(PathBuf, String), Error> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        // The optional `k8s-pb` dependency is in the graph only with its feature named.
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--features",
            "kube-emu/k8s-pb",
        ])
        .current_dir(manifest_dir)
        .output()
        .map_err(|e| codegen_err(format!("cargo metadata: {e}")))?;
    if !out.status.success() {
        return Err(codegen_err(format!(
            "cargo metadata: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let meta: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| codegen_err(format!("cargo metadata output: {e}")))?;
    let pkg = meta
        .get("packages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("name").and_then(Value::as_str) == Some("k8s-pb"))
        .ok_or_else(|| codegen_err("k8s-pb is not in the dependency graph"))?;
    let manifest = pkg
        .get("manifest_path")
        .and_then(Value::as_str)
        .ok_or_else(|| codegen_err("k8s-pb has no manifest_path"))?;
    let version = pkg
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let src = Path::new(manifest)
        .parent()
        .map(|d| d.join("src"))
        .ok_or_else(|| codegen_err("k8s-pb's manifest has no directory"))?;
    Ok((src, version))
}

/// Extracts `go_value_fields.txt` from checkouts of the upstream Go modules: `(import
/// prefix, directory)` pairs such as `("k8s.io/api", "/src/api")`. A line per Go struct
/// lists its non-pointer scalar fields tagged `omitempty` (JSON names), under the OpenAPI
/// definition name (`io.k8s.api.apps.v1.DeploymentSpec`).
/// `git_ref` names the upstream release the checkouts are at (written in the header).
pub fn extract_go_value_fields(
    roots: &[(String, PathBuf)],
    git_ref: &str,
) -> Result<String, Error> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (prefix, dir) in roots {
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            let rd = std::fs::read_dir(&d)
                .map_err(|e| codegen_err(format!("reading {}: {e}", d.display())))?;
            for entry in rd {
                let path = entry
                    .map_err(|e| codegen_err(format!("reading {}: {e}", d.display())))?
                    .path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let is_types = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".go") && !n.ends_with("_test.go"));
                if !is_types {
                    continue;
                }
                let rel = path
                    .parent()
                    .and_then(|p| p.strip_prefix(dir).ok())
                    .map(|p| p.to_string_lossy().replace('/', "."))
                    .unwrap_or_default();
                // `k8s.io/api` → `io.k8s.api`.
                let (host, path_part) = prefix.split_once('/').unwrap_or((prefix.as_str(), ""));
                let host: Vec<&str> = host.split('.').rev().collect();
                let pkg = format!("{}.{}", host.join("."), path_part.replace('/', "."));
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| codegen_err(format!("reading {}: {e}", path.display())))?;
                go_structs(&text, |name, field| {
                    let def = if rel.is_empty() {
                        format!("{pkg}.{name}")
                    } else {
                        format!("{pkg}.{rel}.{name}")
                    };
                    out.entry(def).or_default().insert(field.to_string());
                });
            }
        }
    }
    let prefixes: Vec<String> = roots
        .iter()
        .map(|(p, _)| format!("--go-api {p}=DIR"))
        .collect();
    let mut s = format!(
        "# Go value (non-pointer) scalar fields tagged `omitempty`, by OpenAPI definition: a zero\n\
         # of one of these on the protobuf wire means \"unset\" and is dropped.\n\
         # @generated by `cargo run -p kube-emu --bin protogen -- --go-ref {git_ref}\n\
         # {}` from the upstream Go types at {git_ref}; do not edit.\n",
        prefixes.join(" ")
    );
    for (def, fields) in out {
        let _ = writeln!(
            s,
            "{def} {}",
            fields.into_iter().collect::<Vec<_>>().join(" ")
        );
    }
    Ok(s)
}

/// Calls `f(struct, json field)` for each non-pointer scalar `omitempty` field of each struct
/// of a Go file (scalars: fields whose protobuf tag is `varint`/`fixed64`, or `bytes` of a
/// Go string type).
fn go_structs(text: &str, mut f: impl FnMut(&str, &str)) {
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("type ") {
            current = rest.strip_suffix(" struct {").map(|n| n.trim().to_string());
            continue;
        }
        if line == "}" {
            current = None;
            continue;
        }
        let Some(name) = current.as_deref() else {
            continue;
        };
        let l = line.trim();
        if l.starts_with("//") {
            continue;
        }
        let Some((decl, tags)) = l.split_once('`') else {
            continue;
        };
        let mut words = decl.split_whitespace();
        let (Some(_), Some(ty)) = (words.next(), words.next()) else {
            continue;
        };
        if ty.starts_with('*') || ty.starts_with('[') || ty.starts_with("map[") {
            continue;
        }
        let tag = |key: &str| {
            let start = tags.find(&format!("{key}:\""))? + key.len() + 2;
            let end = tags.get(start..)?.find('"')? + start;
            tags.get(start..end)
        };
        let (Some(json), Some(pb)) = (tag("json"), tag("protobuf")) else {
            continue;
        };
        let mut json_parts = json.split(',');
        let json_name = json_parts.next().unwrap_or_default();
        if json_name.is_empty() || !json_parts.any(|p| p == "omitempty") {
            continue;
        }
        let wire = pb.split(',').next().unwrap_or_default();
        let scalar = match wire {
            "varint" | "fixed64" | "fixed32" => true,
            "bytes" => ty == "string" || pb.contains("casttype="),
            _ => false,
        };
        if scalar {
            f(name, json_name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tables_are_up_to_date() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let (k8s_pb_src, k8s_pb_version) = locate_k8s_pb(dir).unwrap();
        let go_value_fields =
            std::fs::read_to_string(dir.join("src/protobuf/go_value_fields.txt")).unwrap();
        let fresh = generate(&Inputs {
            k8s_pb_src,
            k8s_pb_version,
            go_value_fields,
        })
        .unwrap();
        let current = std::fs::read_to_string(dir.join("src/protobuf/generated.rs")).unwrap();
        assert!(
            fresh == current,
            "src/protobuf/generated.rs is out of date: run `cargo run -p kube-emu --bin protogen`"
        );
    }

    #[test]
    fn prost_fields_and_paths_are_read() {
        let src = r#"
/// Doc.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct DeploymentSpec {
    /// Number.
    #[prost(int32, optional, tag = "1")]
    pub replicas: ::core::option::Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub selector:
        ::core::option::Option<super::super::super::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    #[prost(btree_map = "string, message", tag = "3")]
    pub limits: ::prost::alloc::collections::BTreeMap<
        ::prost::alloc::string::String,
        super::super::super::apimachinery::pkg::api::resource::Quantity,
    >,
    #[prost(string, repeated, tag = "4")]
    pub r#type: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
}
"#;
        let mut out = PbMessages::new();
        parse_module("api/apps/v1", src, &mut out).unwrap();
        let (name, fields) = &out[&("api/apps/v1".to_string(), "deploymentspec".to_string())];
        assert_eq!(name, "DeploymentSpec");
        assert_eq!(fields.len(), 4);
        assert_eq!(fields[0].ty, PbType::Int32);
        assert_eq!(
            fields[1].ty,
            PbType::Message(
                "apimachinery/pkg/apis/meta/v1".into(),
                "LabelSelector".into()
            )
        );
        assert_eq!(
            fields[2].ty,
            PbType::MapMessage("apimachinery/pkg/api/resource".into(), "Quantity".into())
        );
        assert_eq!(
            (fields[3].name.as_str(), fields[3].repeated),
            ("type", true)
        );
    }

    #[test]
    fn go_value_fields_are_non_pointer_omitempty_scalars() {
        let go = "type DeploymentSpec struct {\n\
            \t// +optional\n\
            \tReplicas *int32 `json:\"replicas,omitempty\" protobuf:\"varint,1,opt,name=replicas\"`\n\
            \tPaused bool `json:\"paused,omitempty\" protobuf:\"varint,7,opt,name=paused\"`\n\
            \tStrategy DeploymentStrategy `json:\"strategy,omitempty\" protobuf:\"bytes,4,opt,name=strategy\"`\n\
            \tType DeploymentStrategyType `json:\"type,omitempty\" protobuf:\"bytes,1,opt,name=type,casttype=DeploymentStrategyType\"`\n\
            \tName string `json:\"name\" protobuf:\"bytes,2,opt,name=name\"`\n\
            }\n";
        let mut seen = Vec::new();
        go_structs(go, |s, f| seen.push(format!("{s}.{f}")));
        assert_eq!(seen, ["DeploymentSpec.paused", "DeploymentSpec.type"]);
    }
}
