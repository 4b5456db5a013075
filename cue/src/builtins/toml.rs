//! Package `encoding/toml` (upstream `pkg/encoding/toml`): `Marshal` as upstream's encoder, which
//! hands a Go `map[string]any` to `go-toml/v2`, and `Unmarshal` through the `toml` crate.
//!
//! `Marshal` rules (those of `go-toml/v2`'s encoder):
//! - Keys are sorted (the map loses CUE's order). In each table, plain key/values come first
//!   (`key = value`), then sub-tables and arrays of tables, each introduced by its full header
//!   (`[a.b]`, `[[a.list]]`); sections are separated by one blank line, and a table holding only
//!   tables gets its header directly followed by the next header.
//! - A list whose elements are all structs is an array of tables; other lists are inline
//!   `[1, 2]`, with structs inside them as inline tables `{a = 1, b = 'x'}`; an empty list is `[]`.
//! - Strings are literal (`'text'`) unless they contain `'`, a line break or a control character
//!   other than tab; then basic (`"..."`) with `\\`, `\"`, `\b`, `\t`, `\n`, `\f`, `\r` and
//!   `\u00XX` escapes. Keys are bare when made of `A-Za-z0-9_-`, else quoted the same way.
//! - Ints in decimal; floats via float64 in Go's shortest `'f'` form, with `.0` added when
//!   integral; `null` and bytes are errors (upstream's encoder has no mapping for them).
//!
//! `Unmarshal`: tables keep their key order, integers are ints, floats go through float64
//! (shortest text), dates and times become their TOML text as strings. Approximation: error
//! texts are the `toml` crate's, not `go-toml`'s.

use super::args::{builtin, fail, Bytes};
use super::{no_consts, Builtin, BuiltinError, Package, Val};

const P: &str = "encoding/toml";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Marshal", 1, marshal),
    Builtin::f(P, "Unmarshal", 1, unmarshal),
];

const MAX_DEPTH: usize = 1_000;

fn invalid_ascii(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7F
}

fn write_string(out: &mut String, s: &str) {
    let needs_quoting = s
        .bytes()
        .any(|b| b == b'\'' || b == b'\r' || b == b'\n' || invalid_ascii(b));
    if !needs_quoting {
        out.push('\'');
        out.push_str(s);
        out.push('\'');
        return;
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\u{8}' => out.push_str("\\b"),
            '\u{C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7F}' => {
                let b = c as u32;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xF) as usize] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_key(out: &mut String, k: &str) {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        out.push_str(k);
    } else {
        write_string(out, k);
    }
}

fn is_table(v: &Val) -> bool {
    matches!(v, Val::Struct(_))
}

fn is_table_or_array_table(v: &Val) -> bool {
    match v {
        Val::List(items) => !items.is_empty() && items.iter().all(is_table),
        other => is_table(other),
    }
}

fn write_inline(out: &mut String, v: &Val, depth: usize) -> Result<(), BuiltinError> {
    if depth > MAX_DEPTH {
        fail!("toml: value nested too deeply");
    }
    match v {
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => {
            if i64::try_from(i).is_err() {
                fail!("toml: integer {i} does not fit in int64");
            }
            out.push_str(&i.to_string())
        }
        Val::Float(f) => {
            let x: f64 = f.to_string().parse().unwrap_or(f64::NAN);
            if !x.is_finite() {
                fail!("toml: float {f} out of range");
            }
            let text = super::strconv::go_format_float(x, 'f', -1)?;
            out.push_str(&text);
            if x.trunc() == x {
                out.push_str(".0");
            }
        }
        Val::String(s) => write_string(out, s),
        Val::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_inline(out, item, depth + 1)?;
            }
            out.push(']');
        }
        Val::Struct(fields) => {
            out.push('{');
            let (kvs, tables) = split_sorted(fields);
            for (i, (k, v)) in kvs.iter().chain(tables.iter()).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_key(out, k);
                out.push_str(" = ");
                write_inline(out, v, depth + 1)?;
            }
            out.push('}');
        }
        Val::Null => fail!("toml: cannot encode null"),
        Val::Bytes(_) => fail!("toml: cannot encode bytes"),
        Val::Opaque(_) => {
            return Err(BuiltinError::incomplete(
                "cannot convert incomplete value to TOML",
            ))
        }
    }
    Ok(())
}

type Entries<'a> = Vec<(&'a str, &'a Val)>;

fn split_sorted(fields: &[(String, Val)]) -> (Entries<'_>, Entries<'_>) {
    let mut kvs: Entries<'_> = Vec::new();
    let mut tables: Entries<'_> = Vec::new();
    for (k, v) in fields {
        if is_table_or_array_table(v) {
            tables.push((k, v));
        } else {
            kvs.push((k, v));
        }
    }
    // Go sorts map keys byte-wise; a later duplicate key would have overwritten the earlier one.
    kvs.sort_by(|a, b| a.0.cmp(b.0));
    tables.sort_by(|a, b| a.0.cmp(b.0));
    (kvs, tables)
}

fn header(path: &[&str]) -> String {
    let mut h = String::new();
    for (i, k) in path.iter().enumerate() {
        if i > 0 {
            h.push('.');
        }
        write_key(&mut h, k);
    }
    h
}

fn write_table(
    out: &mut String,
    path: &mut Vec<String>,
    fields: &[(String, Val)],
    skip_header: bool,
    depth: usize,
) -> Result<(), BuiltinError> {
    if depth > MAX_DEPTH {
        fail!("toml: value nested too deeply");
    }
    if !path.is_empty() && !skip_header {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        out.push('[');
        out.push_str(&header(&p));
        out.push_str("]\n");
    }
    let (kvs, tables) = split_sorted(fields);
    for (k, v) in &kvs {
        write_key(out, k);
        out.push_str(" = ");
        write_inline(out, v, depth + 1)?;
        out.push('\n');
    }
    for (i, (k, v)) in tables.iter().enumerate() {
        if i > 0 || !kvs.is_empty() {
            out.push('\n');
        }
        path.push(k.to_string());
        match v {
            Val::Struct(f) => write_table(out, path, f, false, depth + 1)?,
            Val::List(items) => {
                let p: Vec<&str> = path.iter().map(String::as_str).collect();
                let head = format!("[[{}]]\n", header(&p));
                for (j, item) in items.iter().enumerate() {
                    if j > 0 {
                        out.push('\n');
                    }
                    out.push_str(&head);
                    if let Val::Struct(f) = item {
                        write_table(out, path, f, true, depth + 1)?;
                    }
                }
            }
            _ => {}
        }
        path.pop();
    }
    Ok(())
}

/// The TOML document for a struct value, as upstream's `toml.Marshal` (see the module doc).
pub fn to_toml(v: &Val) -> Result<String, BuiltinError> {
    match v {
        Val::Struct(fields) => {
            let mut out = String::new();
            write_table(&mut out, &mut Vec::new(), fields, false, 0)?;
            Ok(out)
        }
        Val::Opaque(_) => Err(BuiltinError::incomplete(
            "cannot convert incomplete value to TOML",
        )),
        other => fail!(
            "toml: cannot encode a top-level {}; a struct is required",
            super::args::kind_name(other)
        ),
    }
}

builtin! {
    /// `Marshal({b1: {b2: "bar"}, a1: "foo"})` → `"a1 = 'foo'\n\n[b1]\nb2 = 'bar'\n"`.
    fn marshal(_, "toml.Marshal", v: &Val) {
        Ok(Val::String(to_toml(v)?))
    }
}

fn from_toml(v: toml::Value, depth: usize) -> Result<Val, BuiltinError> {
    if depth > MAX_DEPTH {
        fail!("toml: value nested too deeply");
    }
    Ok(match v {
        toml::Value::String(s) => Val::String(s),
        toml::Value::Integer(i) => Val::Int(i.into()),
        toml::Value::Float(f) => super::strconv::float_val(f)?,
        toml::Value::Boolean(b) => Val::Bool(b),
        toml::Value::Datetime(d) => Val::String(d.to_string()),
        toml::Value::Array(items) => Val::List(
            items
                .into_iter()
                .map(|i| from_toml(i, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(t) => Val::Struct(
            t.into_iter()
                .map(|(k, v)| Ok((k, from_toml(v, depth + 1)?)))
                .collect::<Result<_, BuiltinError>>()?,
        ),
    })
}

builtin! {
    /// `Unmarshal("a1 = \"A\"\nb1.b2 = 'B'")` → `{a1: "A", b1: {b2: "B"}}`.
    fn unmarshal(_, "toml.Unmarshal", data: Bytes) {
        let text = std::str::from_utf8(data.0).map_err(|_| BuiltinError::new("toml: input is not valid UTF-8"))?;
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            BuiltinError::new(e.message().to_string())
        })?;
        from_toml(toml::Value::Table(table), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_table, val};
    use super::*;

    fn t(v: &str) -> String {
        to_toml(&val(v)).unwrap()
    }

    #[test]
    fn table() {
        check_table(
            P,
            &[
                (
                    r#"Marshal({b1: {b2: "bar"}, a1: "foo"})"#,
                    r#""a1 = 'foo'\n\n[b1]\nb2 = 'bar'\n""#,
                ),
                (r#"Marshal({a: null})"#, "!cannot encode null"),
                (r#"Marshal([1])"#, "!a struct is required"),
                (
                    r#"Unmarshal("a1 = \"A\"\nb1.b2 = 'B'")"#,
                    r#"{a1: "A", b1: {b2: "B"}}"#,
                ),
                (
                    r#"Unmarshal("x = 1.5\nd = 1979-05-27\nl = [1, 2]")"#,
                    r#"{x: 1.5, d: "1979-05-27", l: [1, 2]}"#,
                ),
                (r#"Unmarshal("foo = 1\nfoo = 1")"#, "!duplicate key"),
                (r#"Unmarshal("= 1")"#, "!"),
            ],
        );
    }

    #[test]
    fn upstream_marshal_examples() {
        // From upstream's pkg/encoding/toml/testdata/marshal.txtar.
        assert_eq!(t(r#"{r1: "foo"}"#), "r1 = 'foo'\n");
        assert_eq!(
            t(r#"{r1: "foo", r2: "bar", r3: "baz"}"#),
            "r1 = 'foo'\nr2 = 'bar'\nr3 = 'baz'\n"
        );
        assert_eq!(
            t(r#"{a1: "foo", b1: {b2: "bar"}, c1: {c2: {c3: "baz"}}}"#),
            "a1 = 'foo'\n\n[b1]\nb2 = 'bar'\n\n[c1]\n[c1.c2]\nc3 = 'baz'\n"
        );
        assert_eq!(
            t(r#"{tables: [{table1: "foo"}, {table2: "bar"}, {subtable: {sub1: "baz"}}]}"#),
            "[[tables]]\ntable1 = 'foo'\n\n[[tables]]\ntable2 = 'bar'\n\n[[tables]]\n[tables.subtable]\nsub1 = 'baz'\n"
        );
        assert_eq!(
            t(r#"{"123-456": {" foo bar ": "value"}}"#),
            "[123-456]\n' foo bar ' = 'value'\n"
        );
    }

    #[test]
    fn values() {
        assert_eq!(
            t(r#"{z: 1, f: 2.0, g: 0.5, b: true, l: [1, "a", {k: "v"}], e: [], s: "it's\n"}"#),
            "b = true\ne = []\nf = 2.0\ng = 0.5\nl = [1, 'a', {k = 'v'}]\ns = \"it's\\n\"\nz = 1\n"
        );
        assert_eq!(t(r#"{"a.b": "\u0001"}"#), "'a.b' = \"\\u0001\"\n");
        // Marshal then Unmarshal gives the same data, plain values before tables.
        let v = val(r#"{a: {b: [{c: 1}, {c: 2}], d: "x"}, e: [1.5, 2.5]}"#);
        let text = to_toml(&v).unwrap();
        let back: toml::Table = text.parse().unwrap();
        assert_eq!(
            from_toml(toml::Value::Table(back), 0).unwrap(),
            val(r#"{e: [1.5, 2.5], a: {d: "x", b: [{c: 1}, {c: 2}]}}"#)
        );
    }
}
