//! Export of concrete data to JSON and YAML (upstream `cue export`): fields in CUE's order,
//! ints printed as integers and floats always with a decimal point or exponent, output bounded
//! by `max_output_bytes`.

use crate::builtins::Val;
use crate::eval::format_float;

/// Appends `s` as a JSON string literal escaped exactly as Go's `encoding/json` escapes it
/// (`<`, `>`, `&`, U+2028, U+2029 and control characters as `\u00xx`). The one string escaper of
/// the project: export, and the operator's Go-compatible digests, use it.
pub fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Bytes as standard base64 with padding (as Go's `encoding/json` writes `[]byte`).
fn b64(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn json_rec(v: &Val, indent: usize, out: &mut String, max: usize) -> bool {
    if out.len() > max {
        return false;
    }
    match v {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => out.push_str(&i.to_string()),
        Val::Float(f) => out.push_str(&format_float(f)),
        Val::String(s) => json_str(s, out),
        Val::Bytes(b) => json_str(&b64(b), out),
        Val::List(xs) => {
            if xs.is_empty() {
                out.push_str("[]");
                return true;
            }
            out.push_str("[\n");
            for (i, x) in xs.iter().enumerate() {
                out.push_str(&"    ".repeat(indent + 1));
                if !json_rec(x, indent + 1, out, max) {
                    return false;
                }
                if i + 1 < xs.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&"    ".repeat(indent));
            out.push(']');
        }
        Val::Struct(fs) => {
            if fs.is_empty() {
                out.push_str("{}");
                return true;
            }
            out.push_str("{\n");
            for (i, (k, x)) in fs.iter().enumerate() {
                out.push_str(&"    ".repeat(indent + 1));
                json_str(k, out);
                out.push_str(": ");
                if !json_rec(x, indent + 1, out, max) {
                    return false;
                }
                if i + 1 < fs.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&"    ".repeat(indent));
            out.push('}');
        }
        Val::Opaque(_) => out.push_str("null"),
    }
    true
}

/// JSON text (indented by four spaces, trailing newline); `None` if longer than `max` bytes.
pub fn to_json(v: &Val, max: usize) -> Option<String> {
    let mut out = String::new();
    if !json_rec(v, 0, &mut out, max) || out.len() > max {
        return None;
    }
    out.push('\n');
    Some(out)
}

fn yaml_plain_ok(s: &str) -> bool {
    if s.is_empty() || s.trim() != s {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~" | "y" | "n"
    ) {
        return false;
    }
    if s.parse::<f64>().is_ok()
        || s.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-' || c == '+')
    {
        return false;
    }
    !s.chars().any(|c| {
        matches!(
            c,
            ':' | '#'
                | '{'
                | '}'
                | '['
                | ']'
                | ','
                | '&'
                | '*'
                | '!'
                | '|'
                | '>'
                | '\''
                | '"'
                | '%'
                | '@'
                | '`'
                | '\n'
                | '\t'
                | '?'
        )
    })
}

fn yaml_scalar(v: &Val) -> String {
    match v {
        Val::Null => "null".into(),
        Val::Bool(b) => b.to_string(),
        Val::Int(i) => i.to_string(),
        Val::Float(f) => format_float(f),
        Val::String(s) => {
            if yaml_plain_ok(s) {
                s.clone()
            } else {
                let mut o = String::new();
                json_str(s, &mut o);
                o
            }
        }
        Val::Bytes(b) => format!("!!binary {}", b64(b)),
        Val::List(_) => "[]".into(),
        Val::Struct(_) => "{}".into(),
        Val::Opaque(_) => "null".into(),
    }
}

fn is_empty_composite(v: &Val) -> bool {
    match v {
        Val::List(x) => x.is_empty(),
        Val::Struct(x) => x.is_empty(),
        _ => true,
    }
}

fn yaml_rec(v: &Val, indent: usize, out: &mut String) {
    let pad = "  ".repeat(indent);
    match v {
        Val::Struct(fs) if !fs.is_empty() => {
            for (k, x) in fs {
                let key = yaml_scalar(&Val::String(k.clone()));
                if is_empty_composite(x) {
                    out.push_str(&format!("{pad}{key}: {}\n", yaml_scalar(x)));
                } else {
                    out.push_str(&format!("{pad}{key}:\n"));
                    let ind = if matches!(x, Val::List(_)) {
                        indent
                    } else {
                        indent + 1
                    };
                    yaml_rec(x, ind, out);
                }
            }
        }
        Val::List(xs) if !xs.is_empty() => {
            for x in xs {
                if is_empty_composite(x) {
                    out.push_str(&format!("{pad}- {}\n", yaml_scalar(x)));
                } else {
                    let mut sub = String::new();
                    yaml_rec(x, indent + 1, &mut sub);
                    let trimmed = sub.trim_start();
                    out.push_str(&format!("{pad}- {trimmed}"));
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", yaml_scalar(other))),
    }
}

/// YAML text.
pub fn to_yaml(v: &Val) -> String {
    let mut out = String::new();
    yaml_rec(v, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigInt;

    #[test]
    fn json_keeps_field_order() {
        let v = Val::Struct(vec![
            ("b".into(), Val::Int(BigInt::from(1))),
            ("a".into(), Val::List(vec![Val::Bool(true)])),
        ]);
        assert_eq!(
            to_json(&v, 1000).unwrap(),
            "{\n    \"b\": 1,\n    \"a\": [\n        true\n    ]\n}\n"
        );
        assert!(to_json(&v, 3).is_none());
    }

    #[test]
    fn yaml_nests_blocks() {
        let v = Val::Struct(vec![(
            "a".into(),
            Val::Struct(vec![("b".into(), Val::String("x: y".into()))]),
        )]);
        assert_eq!(to_yaml(&v), "a:\n  b: \"x: y\"\n");
    }
}
