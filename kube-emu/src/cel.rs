//! CRD validation rules (`x-kubernetes-validations`): the CEL rule shapes the operator's own
//! CRDs declare, evaluated on create and update of a custom resource.
//!
//! Rules implemented:
//! - A rule is evaluated at each schema node that declares it (the root, `properties`,
//!   `items`, schema-valued `additionalProperties`), with `self` bound to the value there; absent
//!   values are not evaluated.
//! - Supported shapes (whitespace-insensitive): `P == L`, `P != L`, `P.contains(S)`,
//!   `P.startsWith(S)`, `P.endsWith(S)`, `has(P)`, `!has(P)` and `size(P) OP N` (OP one of
//!   `== != < <= > >=`), where `P` is `self` or `self.a.b` (field selection), `L` a string
//!   (`'x'` or `"x"`), integer or `true`/`false` literal, `S` a string literal, `N` an integer.
//! - A failing rule answers 422 Invalid with the apiserver's cause:
//!   `<path>: Invalid value: "<schema type>": <message>` (`<nil>` as the path of a root-level
//!   rule; `failed rule: <rule>` when the rule has no `message`).
//! - A rule whose shape is not supported, or whose path selects a missing field (the apiserver
//!   reports "no such key", but never rejecting what it would accept is the safer side), is
//!   skipped; an unsupported rule is logged once per process.
//! - Transition rules (using `oldSelf`) are skipped (and logged once, like every unsupported
//!   shape). On update, a rule the old object already
//!   failed is not enforced (a lenient form of the apiserver's validation ratcheting).

use std::collections::HashSet;
use std::sync::OnceLock;

use serde_json::Value;

/// A parsed rule.
#[derive(Debug, Clone, PartialEq)]
enum Rule {
    Cmp(Vec<String>, CmpOp, Value),
    Str(Vec<String>, StrFn, String),
    Has(Vec<String>, bool),
    Size(Vec<String>, CmpOp, i64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum StrFn {
    Contains,
    StartsWith,
    EndsWith,
}

/// `self` or `self.a.b` → the field names after `self`.
fn parse_self_path(s: &str) -> Option<Vec<String>> {
    let s = s.trim();
    let rest = s.strip_prefix("self")?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let rest = rest.strip_prefix('.')?;
    let parts: Vec<String> = rest.split('.').map(|p| p.trim().to_string()).collect();
    let ident = |p: &String| {
        !p.is_empty()
            && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !p.starts_with(|c: char| c.is_ascii_digit())
    };
    parts.iter().all(ident).then_some(parts)
}

fn parse_string_lit(s: &str) -> Option<String> {
    let s = s.trim();
    let inner = s
        .strip_prefix('\'')
        .and_then(|x| x.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|x| x.strip_suffix('"')))?;
    // Escapes and embedded quotes are outside the subset.
    (!inner.contains(['\\', '\'', '"'])).then(|| inner.to_string())
}

fn parse_lit(s: &str) -> Option<Value> {
    let s = s.trim();
    if let Some(st) = parse_string_lit(s) {
        return Some(Value::String(st));
    }
    match s {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        _ => s.parse::<i64>().ok().map(Value::from),
    }
}

fn split_cmp(s: &str) -> Option<(&str, CmpOp, &str)> {
    for (tok, op) in [
        ("==", CmpOp::Eq),
        ("!=", CmpOp::Ne),
        ("<=", CmpOp::Le),
        (">=", CmpOp::Ge),
        ("<", CmpOp::Lt),
        (">", CmpOp::Gt),
    ] {
        if let Some((l, r)) = s.split_once(tok) {
            return Some((l, op, r));
        }
    }
    None
}

/// Parses a rule of the supported subset; `None` for anything else.
fn parse(rule: &str) -> Option<Rule> {
    let r = rule.trim();
    if r.contains("oldSelf") || r.contains("&&") || r.contains("||") || r.contains('?') {
        return None;
    }
    if let Some(inner) = r.strip_prefix("!has(").and_then(|x| x.strip_suffix(')')) {
        return Some(Rule::Has(parse_self_path(inner)?, false));
    }
    if let Some(inner) = r.strip_prefix("has(").and_then(|x| x.strip_suffix(')')) {
        return Some(Rule::Has(parse_self_path(inner)?, true));
    }
    if let Some(rest) = r.strip_prefix("size(") {
        let (inner, tail) = rest.split_once(')')?;
        let (l, op, n) = split_cmp(tail)?;
        if !l.trim().is_empty() {
            return None;
        }
        return Some(Rule::Size(
            parse_self_path(inner)?,
            op,
            n.trim().parse().ok()?,
        ));
    }
    for (name, f) in [
        (".contains(", StrFn::Contains),
        (".startsWith(", StrFn::StartsWith),
        (".endsWith(", StrFn::EndsWith),
    ] {
        if let Some((path, arg)) = r.split_once(name) {
            let arg = arg.strip_suffix(')')?;
            return Some(Rule::Str(parse_self_path(path)?, f, parse_string_lit(arg)?));
        }
    }
    let (l, op, rhs) = split_cmp(r)?;
    if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
        return None;
    }
    Some(Rule::Cmp(parse_self_path(l)?, op, parse_lit(rhs)?))
}

fn select<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |cur, k| cur.get(k.as_str()))
        .filter(|x| !x.is_null())
}

fn ord(op: CmpOp, a: i64, b: i64) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

/// Evaluates a rule on `self`; `None` when it cannot be evaluated (missing field, type mismatch).
fn eval(rule: &Rule, this: &Value) -> Option<bool> {
    match rule {
        Rule::Has(path, want) => {
            let (last, parent) = path.split_last()?;
            let p = select(this, parent).or(parent.is_empty().then_some(this))?;
            Some(p.as_object()?.contains_key(last.as_str()) == *want)
        }
        Rule::Cmp(path, op, lit) => {
            let v = if path.is_empty() {
                this
            } else {
                select(this, path)?
            };
            let same_type = matches!(
                (v, lit),
                (Value::String(_), Value::String(_))
                    | (Value::Bool(_), Value::Bool(_))
                    | (Value::Number(_), Value::Number(_))
            );
            if !same_type {
                return None;
            }
            Some((v == lit) == (*op == CmpOp::Eq))
        }
        Rule::Str(path, f, arg) => {
            let v = if path.is_empty() {
                this
            } else {
                select(this, path)?
            };
            let s = v.as_str()?;
            Some(match f {
                StrFn::Contains => s.contains(arg.as_str()),
                StrFn::StartsWith => s.starts_with(arg.as_str()),
                StrFn::EndsWith => s.ends_with(arg.as_str()),
            })
        }
        Rule::Size(path, op, n) => {
            let v = if path.is_empty() {
                this
            } else {
                select(this, path)?
            };
            let len = match v {
                Value::String(s) => s.chars().count(),
                Value::Array(a) => a.len(),
                Value::Object(m) => m.len(),
                _ => return None,
            };
            Some(ord(*op, i64::try_from(len).ok()?, *n))
        }
    }
}

/// Logs an unsupported rule once per process.
fn warn_unsupported(rule: &str) {
    static SEEN: OnceLock<parking_lot::Mutex<HashSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if seen.lock().insert(rule.to_string()) {
        tracing::warn!(
            rule,
            "kube-emu: x-kubernetes-validations rule shape not supported; skipped"
        );
    }
}

/// One failed rule: the schema node's path and the cause text.
struct Failure {
    path: String,
    rule: String,
    cause: String,
}

fn walk(v: &Value, schema: &Value, path: &str, out: &mut Vec<Failure>) {
    if v.is_null() {
        return;
    }
    if let Some(rules) = schema["x-kubernetes-validations"].as_array() {
        for r in rules {
            let Some(text) = r["rule"].as_str() else {
                continue;
            };
            let Some(parsed) = parse(text) else {
                warn_unsupported(text);
                continue;
            };
            if eval(&parsed, v) == Some(false) {
                let msg = r["message"]
                    .as_str()
                    .filter(|m| !m.is_empty())
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("failed rule: {text}"));
                let ty = schema["type"].as_str().unwrap_or("object");
                out.push(Failure {
                    path: if path.is_empty() {
                        "<nil>".into()
                    } else {
                        path.to_string()
                    },
                    rule: text.to_string(),
                    cause: format!("Invalid value: \"{ty}\": {msg}"),
                });
            }
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
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    walk(child, s, &join(k), out);
                } else if let Some(s) = addl {
                    walk(child, s, &join(k), out);
                }
            }
        }
        Value::Array(a) if schema["items"].is_object() => {
            for (i, child) in a.iter().enumerate() {
                walk(child, &schema["items"], &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The `(field, cause)` pairs of the rules `new` fails under `schema`, leaving out (on update)
/// the rules `old` already failed at the same path.
pub fn validate(new: &Value, old: Option<&Value>, schema: &Value) -> Vec<(String, String)> {
    let mut fails = Vec::new();
    walk(new, schema, "", &mut fails);
    if fails.is_empty() {
        return Vec::new();
    }
    let mut old_fails = Vec::new();
    if let Some(o) = old {
        walk(o, schema, "", &mut old_fails);
    }
    fails
        .into_iter()
        .filter(|f| {
            !old_fails
                .iter()
                .any(|o| o.path == f.path && o.rule == f.rule)
        })
        .map(|f| (f.path, f.cause))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(rule: &str, message: &str) -> Value {
        json!({"type": "object", "x-kubernetes-validations": [{"rule": rule, "message": message}],
               "properties": {"spec": {"type": "object", "properties": {
                   "tags": {"type": "array", "items": {"type": "string",
                       "x-kubernetes-validations": [{"rule": "self.startsWith('t-')"}]}}}}}})
    }

    #[test]
    fn parses_the_operator_crd_rule_shapes() {
        assert_eq!(
            parse("self.metadata.name == 'cluster'"),
            Some(Rule::Cmp(
                vec!["metadata".into(), "name".into()],
                CmpOp::Eq,
                json!("cluster")
            ))
        );
        assert_eq!(
            parse("self.metadata.name.contains('.')"),
            Some(Rule::Str(
                vec!["metadata".into(), "name".into()],
                StrFn::Contains,
                ".".into()
            ))
        );
        assert_eq!(
            parse("size(self.spec.items) <= 3"),
            Some(Rule::Size(
                vec!["spec".into(), "items".into()],
                CmpOp::Le,
                3
            ))
        );
        assert_eq!(parse("self.a == oldSelf.a"), None);
        assert_eq!(parse("self.a.all(x, x > 1)"), None);
        assert_eq!(parse("self.a == 'x' && self.b == 'y'"), None);
    }

    #[test]
    fn singleton_rule_rejects_other_names_with_the_message() {
        let s = schema(
            "self.metadata.name == 'cluster'",
            "only 'cluster' is permitted",
        );
        let ok = json!({"metadata": {"name": "cluster"}});
        assert!(validate(&ok, None, &s).is_empty());
        let bad = json!({"metadata": {"name": "other"}});
        assert_eq!(
            validate(&bad, None, &s),
            vec![(
                "<nil>".to_string(),
                "Invalid value: \"object\": only 'cluster' is permitted".to_string()
            )]
        );
        // Ratcheting: an object that already failed the rule stays updatable.
        assert!(validate(&bad, Some(&bad), &s).is_empty());
    }

    #[test]
    fn nested_rules_report_their_path_and_default_message() {
        let s = schema("self.metadata.name.contains('.')", "dot");
        let v = json!({"metadata": {"name": "a.b"}, "spec": {"tags": ["t-1", "x"]}});
        assert_eq!(
            validate(&v, None, &s),
            vec![(
                "spec.tags[1]".to_string(),
                "Invalid value: \"string\": failed rule: self.startsWith('t-')".to_string()
            )]
        );
    }

    #[test]
    fn unsupported_or_unevaluable_rules_never_reject() {
        let s = schema("self.spec.all(x, x == 1)", "never");
        assert!(validate(&json!({"metadata": {"name": "x"}}), None, &s).is_empty());
        let s = schema("self.spec.mode == 'a'", "missing field");
        assert!(validate(&json!({"metadata": {"name": "x"}}), None, &s).is_empty());
    }
}
