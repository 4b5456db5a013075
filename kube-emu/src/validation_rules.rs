//! CRD validation rules (`x-kubernetes-validations`), evaluated with the `cel` crate on create
//! and update of a custom resource, as the apiserver's `apiextensions` CEL validator does.
//!
//! Rules implemented:
//! - A rule is evaluated at each schema node that declares it (the root, `properties`,
//!   `items`, schema-valued `additionalProperties`), with `self` bound to the value there
//!   (objects are CEL maps, arrays lists, integers `int`, other numbers `double`); absent and
//!   `null` values are not evaluated.
//! - Transition rules (those referring to `oldSelf`) are evaluated on update only, where the
//!   node has a correlated old value: through object properties, `additionalProperties` keys
//!   and the keys of `x-kubernetes-list-type: map` lists (not through atomic lists or sets), as
//!   upstream correlates them; `oldSelf` is bound to it. A rule with `optionalOldSelf: true` is
//!   skipped (optional types are not in the `cel` crate).
//! - Ratcheting (`CRDValidationRatcheting`): on update, a node whose value equals its
//!   correlated old value is not validated again (nor anything below it); in addition (broader
//!   than upstream, so a stored object that predates a rule keeps taking status writes), a
//!   failure the stored object already has at the same place with the same cause is dropped.
//! - A failing rule is a cause of the 422 Invalid answer, as the apiserver writes it: the
//!   node's path (`<nil>` for the root; `fieldPath` appended when the rule has one), the
//!   `reason` as the cause type (`FieldValueInvalid` by default, `FieldValueForbidden`,
//!   `FieldValueRequired`, `FieldValueDuplicate`), and the message: `messageExpression`'s
//!   string when it evaluates to one, else `message`, else `failed rule: <rule>`, in the shape
//!   of the cause type (`Invalid value: "<schema type>": <message>`, `Forbidden: <message>`,
//!   `Required value: <message>`, `Duplicate value: "<message>"`).
//! - A rule the `cel` crate cannot compile, or whose evaluation errs (a function of the
//!   Kubernetes CEL libraries the crate lacks, such as `isSorted` or `quantity`, a missing key,
//!   a type mismatch the apiserver's type-check would have refused at CRD creation) is skipped
//!   and logged once per rule: never rejecting what the apiserver accepts is the safer side.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// A compiled rule, or `None` when it does not compile.
type Compiled = Option<Arc<cel::Program>>;

/// Compiles a rule once per process.
fn compile(rule: &str) -> Compiled {
    static CACHE: OnceLock<parking_lot::Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(p) = cache.lock().get(rule) {
        return p.clone();
    }
    // The parser must not take the server down on odd input.
    let compiled = std::panic::catch_unwind(|| cel::Program::compile(rule))
        .ok()
        .and_then(Result::ok)
        .map(Arc::new);
    if compiled.is_none() {
        skipped(rule, "does not compile with the cel crate");
    }
    cache.lock().insert(rule.to_string(), compiled.clone());
    compiled
}

/// Logs a skipped rule once per process.
fn skipped(rule: &str, why: &str) {
    static SEEN: OnceLock<parking_lot::Mutex<HashSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if seen.lock().insert(rule.to_string()) {
        tracing::warn!(rule, why, "kube-emu: x-kubernetes-validations rule skipped");
    }
}

/// The CEL value of a JSON value.
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(f)) => cel::Value::Float(f),
            (None, None) => cel::Value::Null,
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<cel::objects::Key, cel::Value> = m
                .iter()
                .map(|(k, v)| (cel::objects::Key::from(k.as_str()), to_cel(v)))
                .collect();
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}

/// Runs a compiled program with `self` (and `oldSelf`) bound.
fn run(program: &cel::Program, this: &Value, old: Option<&Value>) -> Option<cel::Value> {
    let mut ctx = cel::Context::default();
    ctx.add_variable_from_value("self", to_cel(this));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(&ctx)))
        .ok()
        .and_then(Result::ok)
}

/// One failed rule: (cause type, field path, message).
type Cause = (&'static str, String, String);

/// The outcome of one rule at one node.
fn check(rule: &Value, this: &Value, old: Option<&Value>, ty: &str, path: &str) -> Option<Cause> {
    let text = rule["rule"].as_str()?;
    let program = compile(text)?;
    let transition = program.references().has_variable("oldSelf");
    if transition && rule["optionalOldSelf"] == Value::Bool(true) {
        skipped(text, "optionalOldSelf needs CEL optional types");
        return None;
    }
    if transition && old.is_none() {
        return None;
    }
    let passed = match run(&program, this, old.filter(|_| transition)) {
        Some(cel::Value::Bool(b)) => b,
        _ => {
            skipped(text, "evaluation failed or did not give a bool");
            return None;
        }
    };
    if passed {
        return None;
    }
    let message = rule["messageExpression"]
        .as_str()
        .and_then(compile)
        .and_then(|p| run(&p, this, old.filter(|_| transition)))
        .and_then(|v| match v {
            cel::Value::String(s) if !s.is_empty() => Some(s.to_string()),
            _ => None,
        })
        .or_else(|| {
            rule["message"]
                .as_str()
                .filter(|m| !m.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("failed rule: {text}"));
    let mut field = path.to_string();
    if let Some(fp) = rule["fieldPath"].as_str().filter(|f| !f.is_empty()) {
        field = format!(
            "{path}{}",
            if fp.starts_with('.') || fp.starts_with('[') {
                fp.to_string()
            } else {
                format!(".{fp}")
            }
        );
        field = field.trim_start_matches('.').to_string();
    }
    if field.is_empty() {
        field = "<nil>".into();
    }
    Some(match rule["reason"].as_str() {
        Some("FieldValueForbidden") => (
            "FieldValueForbidden",
            field,
            format!("Forbidden: {message}"),
        ),
        Some("FieldValueRequired") => (
            "FieldValueRequired",
            field,
            format!("Required value: {message}"),
        ),
        Some("FieldValueDuplicate") => (
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: \"{message}\""),
        ),
        _ => (
            "FieldValueInvalid",
            field,
            format!("Invalid value: \"{ty}\": {message}"),
        ),
    })
}

/// The old element of a `x-kubernetes-list-type: map` list with the same keys as `item`.
fn correlated_item<'a>(schema: &Value, old: Option<&'a Value>, item: &Value) -> Option<&'a Value> {
    if schema["x-kubernetes-list-type"] != "map" {
        return None;
    }
    let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    old?.as_array()?
        .iter()
        .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
}

fn walk(v: &Value, old: Option<&Value>, schema: &Value, path: &str, out: &mut Vec<Cause>) {
    if v.is_null() || old == Some(v) {
        return;
    }
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        let ty = schema["type"].as_str().unwrap_or("object");
        for r in rules {
            out.extend(check(r, v, old, ty, path));
        }
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            let props = schema["properties"].as_object();
            let addl = schema["additionalProperties"]
                .as_object()
                .map(|_| &schema["additionalProperties"]);
            for (k, child) in m {
                let old_child = old.and_then(|o| o.get(k.as_str()));
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    walk(child, old_child, s, &join(k), out);
                } else if let Some(s) = addl {
                    walk(child, old_child, s, &join(k), out);
                }
            }
        }
        Value::Array(a) if schema["items"].is_object() => {
            for (i, child) in a.iter().enumerate() {
                let old_child = correlated_item(schema, old, child);
                walk(
                    child,
                    old_child,
                    &schema["items"],
                    &format!("{path}[{i}]"),
                    out,
                );
            }
        }
        _ => {}
    }
}

/// The causes (type, field, message) of the rules `new` fails under `schema`; `old` is the
/// stored object on update (module rules).
pub fn validate(new: &Value, old: Option<&Value>, schema: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    walk(new, old, schema, "", &mut out);
    if out.is_empty() {
        return out;
    }
    let Some(old) = old else {
        return out;
    };
    // A failure the stored object already has, at the same place with the same cause, is
    // not enforced (the stored object stays updatable, e.g. its status).
    let mut before = Vec::new();
    walk(old, None, schema, "", &mut before);
    out.retain(|c| !before.contains(c));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(rule: Value) -> Value {
        json!({"type": "object", "x-kubernetes-validations": [rule],
               "properties": {"spec": {"type": "object", "properties": {
                   "replicas": {"type": "integer",
                       "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may not shrink"}]},
                   "tags": {"type": "array", "items": {"type": "string",
                       "x-kubernetes-validations": [{"rule": "self.startsWith('t-')"}]}},
                   "ports": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["name"],
                       "items": {"type": "object", "x-kubernetes-validations": [
                           {"rule": "self.port == oldSelf.port", "message": "port is immutable",
                            "reason": "FieldValueForbidden"}]}}}}}})
    }

    fn singleton() -> Value {
        schema(
            json!({"rule": "self.metadata.name == 'cluster'", "message": "only 'cluster' is permitted"}),
        )
    }

    #[test]
    fn the_operator_crd_rule_rejects_other_names_with_its_message() {
        let s = singleton();
        assert!(validate(&json!({"metadata": {"name": "cluster"}}), None, &s).is_empty());
        let bad = json!({"metadata": {"name": "other"}});
        assert_eq!(
            validate(&bad, None, &s),
            vec![(
                "FieldValueInvalid",
                "<nil>".to_string(),
                "Invalid value: \"object\": only 'cluster' is permitted".to_string()
            )]
        );
        // Ratcheting: an unchanged object stays updatable.
        assert!(validate(&bad, Some(&bad), &s).is_empty());
    }

    #[test]
    fn nested_rules_macros_and_logic() {
        let s = schema(
            json!({"rule": "self.metadata.name.contains('.') && self.spec.tags.all(t, size(t) < 8)"}),
        );
        let v = json!({"metadata": {"name": "a.b"}, "spec": {"tags": ["t-1", "x"]}});
        assert_eq!(
            validate(&v, None, &s),
            vec![(
                "FieldValueInvalid",
                "spec.tags[1]".to_string(),
                "Invalid value: \"string\": failed rule: self.startsWith('t-')".to_string()
            )]
        );
        let v = json!({"metadata": {"name": "ab"}, "spec": {}});
        assert_eq!(validate(&v, None, &s).len(), 1);
    }

    #[test]
    fn transition_rules_see_the_correlated_old_value() {
        let s = singleton();
        let old = json!({"metadata": {"name": "cluster"}, "spec": {"replicas": 3,
            "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}});
        // On create, transition rules are not evaluated.
        assert!(validate(&old, None, &s).is_empty());
        let new = json!({"metadata": {"name": "cluster"}, "spec": {"replicas": 2,
            "ports": [{"name": "b", "port": 3}, {"name": "c", "port": 9}]}});
        assert_eq!(
            validate(&new, Some(&old), &s),
            vec![
                (
                    "FieldValueInvalid",
                    "spec.replicas".to_string(),
                    "Invalid value: \"integer\": may not shrink".to_string()
                ),
                (
                    "FieldValueForbidden",
                    "spec.ports[0]".to_string(),
                    "Forbidden: port is immutable".to_string()
                ),
            ]
        );
    }

    #[test]
    fn message_expressions_and_field_paths() {
        let s = schema(
            json!({"rule": "self.spec.replicas < 10", "fieldPath": ".spec.replicas",
            "messageExpression": "'too many: ' + string(self.spec.replicas)"}),
        );
        let v = json!({"metadata": {"name": "x"}, "spec": {"replicas": 12}});
        assert_eq!(
            validate(&v, None, &s),
            vec![(
                "FieldValueInvalid",
                "spec.replicas".to_string(),
                "Invalid value: \"object\": too many: 12".to_string()
            )]
        );
    }

    #[test]
    fn rules_the_crate_cannot_evaluate_never_reject() {
        for rule in [
            "self.spec.isSorted()",
            "self.spec.mode == 'a'",
            "self.(",
            "1 + 'a'",
        ] {
            let s = schema(json!({"rule": rule}));
            let v = json!({"metadata": {"name": "x"}, "spec": {"tags": []}});
            assert!(validate(&v, None, &s).is_empty(), "{rule}");
        }
    }
}
