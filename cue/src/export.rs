//! Export of concrete data to JSON and YAML (upstream `cue export`): fields in CUE's order,
//! ints printed as integers and floats always with a decimal point or exponent, output bounded
//! by `max_output_bytes`. YAML is written by the one YAML encoder (`encoding/yaml`'s), strings
//! by the one JSON string escaper ([`json_str`], `encoding/json`'s, re-exported here), floats by
//! the one float formatter (`data::num::format_float`). Export uses the encoding packages, never
//! the other way round.

pub use crate::builtins::json::json_str;
use crate::data::num::format_float;
use crate::data::Val;

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

/// YAML text: the crate's one YAML encoder (`encoding/yaml`'s, upstream's
/// `internal/encoding/yaml.Encode` for both `cue export --out yaml` and `yaml.Marshal`).
/// Export data is concrete, so the encoder's only error (an incomplete value) does not arise;
/// a depth beyond the encoder's limit is reported as its error text.
pub fn to_yaml(v: &Val) -> Result<String, String> {
    crate::builtins::yaml::to_yaml(v).map_err(|e| e.message)
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
        assert_eq!(to_yaml(&v).unwrap(), "a:\n  b: 'x: y'\n");
    }

    #[test]
    fn strings_escape_as_go_encoding_json() {
        let mut out = String::new();
        json_str(
            "a\"\\\u{8}\u{c}\n\r\t<>&\u{1}\u{1f}\u{2028}\u{2029}é",
            &mut out,
        );
        assert_eq!(
            out,
            r#""a\"\\\b\f\n\r\t\u003c\u003e\u0026\u0001\u001f\u2028\u2029é""#
        );
    }
}
