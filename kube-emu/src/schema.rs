//! Structural-schema processing of custom resources, in the apiserver's order: prune unknown
//! fields, apply defaults, validate.
//!
//! Rules: pruning drops object members that are not in `properties` unless the node has
//! `x-kubernetes-preserve-unknown-fields: true` or `additionalProperties`; `apiVersion`, `kind`
//! and `metadata` at the root are kept. Defaulting fills `default` for absent members (then
//! descends). Validation checks `type` (with `nullable`, `x-kubernetes-int-or-string`),
//! `required`, `enum`, `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`,
//! `pattern` (Rust `regex`, which matches RE2's syntax for the patterns schemas use; an invalid
//! pattern never matches).
//! Not implemented (documented gap): `format`, `oneOf`/`anyOf`/`allOf`/`not`, and CEL
//! `x-kubernetes-validations`.

use serde_json::Value;

/// Prunes unknown fields in place.
pub fn prune(v: &mut Value, schema: &Value, root: bool) {
    match v {
        Value::Object(m) => {
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let props = schema.get("properties").and_then(Value::as_object);
            let addl = schema.get("additionalProperties").filter(|a| a.is_object());
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if root && (k == "apiVersion" || k == "kind" || k == "metadata") {
                    continue;
                }
                if let Some(ps) = props.and_then(|p| p.get(&k)) {
                    if let Some(cv) = m.get_mut(&k) {
                        prune(cv, ps, false);
                    }
                } else if let Some(a) = addl {
                    if let Some(cv) = m.get_mut(&k) {
                        prune(cv, a, false);
                    }
                } else if !(preserve || props.is_none() && is_open(schema)) {
                    m.remove(&k);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for i in a {
                    prune(i, items, false);
                }
            }
        }
        _ => {}
    }
}

/// A node without type and properties (e.g. `x-kubernetes-int-or-string` or `{}`) keeps its value.
fn is_open(schema: &Value) -> bool {
    schema.get("type").is_none() && schema.get("properties").is_none()
}

/// Applies `default` values in place.
pub fn default(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    if !m.contains_key(k) {
                        if let Some(d) = ps.get("default") {
                            m.insert(k.clone(), d.clone());
                        }
                    }
                    if let Some(cv) = m.get_mut(k) {
                        default(cv, ps);
                    }
                }
            }
            if let Some(a) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    let declared = schema.get("properties").and_then(|p| p.get(&k)).is_some();
                    if !declared {
                        if let Some(cv) = m.get_mut(&k) {
                            default(cv, a);
                        }
                    }
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for i in a {
                    default(i, items);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Validates a value; returns `(field path, message)` pairs in the apiserver's wording.
pub fn validate(v: &Value, schema: &Value, path: &str, errs: &mut Vec<(String, String)>) {
    if v.is_null() {
        if !schema
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            && schema.get("type").is_some()
        {
            let t = schema["type"].as_str().unwrap_or("");
            errs.push((
                path.into(),
                format!("Invalid value: \"null\": {path} in body must be of type {t}: \"null\""),
            ));
        }
        return;
    }
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let got = type_name(v);
        let ok = got == t
            || (t == "number" && got == "integer")
            || (int_or_string && (got == "integer" || got == "string"));
        if !ok {
            errs.push((
                path.into(),
                format!("Invalid value: \"{got}\": {path} in body must be of type {t}: \"{got}\""),
            ));
            return;
        }
    }
    if let Some(en) = schema.get("enum").and_then(Value::as_array) {
        if !en.contains(v) {
            let allowed: Vec<String> = en.iter().map(|e| e.to_string()).collect();
            errs.push((
                path.into(),
                format!(
                    "Unsupported value: {v}: supported values: {}",
                    allowed.join(", ")
                ),
            ));
        }
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            if n < min {
                errs.push((path.into(), format!("Invalid value: {v}: {path} in body should be greater than or equal to {min}")));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if n > max {
                errs.push((
                    path.into(),
                    format!(
                        "Invalid value: {v}: {path} in body should be less than or equal to {max}"
                    ),
                ));
            }
        }
    }
    if let Some(s) = v.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
            if len < min {
                errs.push((path.into(), format!("Invalid value: \"{s}\": {path} in body should be at least {min} chars long")));
            }
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
            if len > max {
                errs.push((
                    path.into(),
                    format!("Too long: may not be more than {max} bytes"),
                ));
            }
        }
        if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
            let ok = regex::Regex::new(p).is_ok_and(|re| re.is_match(s));
            if !ok {
                errs.push((
                    path.into(),
                    format!("Invalid value: \"{s}\": {path} in body should match '{p}'"),
                ));
            }
        }
    }
    match v {
        Value::Object(m) => {
            if let Some(req) = schema.get("required").and_then(Value::as_array) {
                for r in req.iter().filter_map(Value::as_str) {
                    if !m.contains_key(r) {
                        errs.push((join(path, r), "Required value".into()));
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let addl = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, cv) in m {
                if path.is_empty() && (k == "apiVersion" || k == "kind" || k == "metadata") {
                    continue;
                }
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    validate(cv, ps, &join(path, k), errs);
                } else if let Some(a) = addl {
                    validate(cv, a, &join(path, k), errs);
                }
            }
        }
        Value::Array(a) => {
            let n = a.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if n < min {
                    errs.push((
                        path.into(),
                        format!(
                            "Invalid value: {n}: {path} in body should have at least {min} items"
                        ),
                    ));
                }
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if n > max {
                    errs.push((
                        path.into(),
                        format!("Too many: {n}: must have at most {max} items"),
                    ));
                }
            }
            if let Some(items) = schema.get("items") {
                for (i, cv) in a.iter().enumerate() {
                    validate(cv, items, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "string", "enum": ["S", "M"]},
                "replicas": {"type": "integer", "default": 1},
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }})
    }

    #[test]
    fn prunes_defaults_and_validates() {
        let s = schema();
        let mut v = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"size": "L", "junk": 1, "extra": {"kept": true}}, "other": 2});
        prune(&mut v, &s, true);
        default(&mut v, &s);
        assert_eq!(
            v["spec"],
            json!({"size": "L", "extra": {"kept": true}, "replicas": 1})
        );
        assert!(v.get("other").is_none());
        let mut errs = Vec::new();
        validate(&v, &s, "", &mut errs);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].1.starts_with("Unsupported value: \"L\""),
            "{errs:?}"
        );
        let mut errs = Vec::new();
        validate(&json!({"spec": {}}), &s, "", &mut errs);
        assert_eq!(
            errs,
            vec![("spec.size".to_string(), "Required value".to_string())]
        );
        let mut errs = Vec::new();
        validate(
            &json!({"spec": {"size": "S", "name": "Ab1"}}),
            &s,
            "",
            &mut errs,
        );
        assert_eq!(errs.len(), 1);
        assert!(errs[0].1.contains("should match '^[a-z]+$'"), "{errs:?}");
        let mut errs = Vec::new();
        validate(
            &json!({"spec": {"size": "S", "name": "ab"}}),
            &s,
            "",
            &mut errs,
        );
        assert!(errs.is_empty());
    }
}
