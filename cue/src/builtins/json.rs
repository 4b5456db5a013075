//! Package `encoding/json` (upstream `pkg/encoding/json`).
//!
//! Rules:
//! - `Marshal` writes Go's `encoding/json` text for a CUE value: no spaces, struct fields in CUE
//!   order, bytes as standard base64 strings, ints in decimal, floats as `cue export` prints them
//!   ([`crate::data::num::format_float`]: `1.0`, `1E+30`, as upstream's `X.Append(b, 'G')`).
//!   Strings are escaped by [`json_str`], the project's one escaper (also `cue export`'s, as
//!   `cue::export::json_str`), as Go does with HTML escaping on: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as
//!   `\u00XX`, `<`, `>`, `&`, U+2028 and U+2029 as `\u003c`, `\u003e`, `\u0026`, `\u2028`,
//!   `\u2029`. A non-concrete value is an incomplete error.
//! - `Unmarshal` accepts exactly RFC 8259 JSON (Go's `json.Valid`; anything else is
//!   `json: invalid JSON`): integers without fraction or exponent become ints, other numbers exact
//!   floats (`1.0` stays `1.0`); objects keep key order; a repeated key must repeat the same value
//!   (CUE unifies them), else it is an error.
//! - `Compact`, `Indent` and `HTMLEscape` rewrite JSON text like Go's functions of the same name
//!   (`Indent` keeps empty `{}`/`[]` on one line and puts a space after `:`).
//! - `Validate(data, schema)` is a validator: it parses `data` and asks the host whether the value
//!   unifies with `schema` (which may be non-concrete).

use super::args::{builtin, fail, Bytes};
use super::{no_consts, Builtin, BuiltinError, Package, Val};
use crate::data::num::format_float;
use base64::Engine as _;
use bigdecimal::BigDecimal;
use num_bigint::BigInt;

const P: &str = "encoding/json";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::v(P, "Valid", 1, valid),
    Builtin::f(P, "Compact", 1, compact),
    Builtin::f(P, "Indent", 3, indent),
    Builtin::f(P, "HTMLEscape", 1, html_escape),
    Builtin::f(P, "Marshal", 1, marshal),
    Builtin::f(P, "MarshalStream", 1, marshal_stream),
    Builtin::f(P, "UnmarshalStream", 1, unmarshal_stream),
    Builtin::f(P, "Unmarshal", 1, unmarshal),
    Builtin::v(P, "Validate", 2, validate).opaque(&[1]),
];

/// Maximum nesting accepted by the parser (deeper input is an error, not a stack overflow).
const MAX_DEPTH: usize = 1_000;

/// Appends `s` as a JSON string literal escaped exactly as Go's `encoding/json` (Go ≥ 1.22)
/// escapes it: `\b \f \n \r \t` by name, `<`, `>`, `&`, U+2028, U+2029 and the other control
/// characters as `\u00xx`. The one string escaper of the project: export, `encoding/json`
/// and the operator's Go-compatible digests use it.
pub fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
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

fn write_json(out: &mut String, v: &Val, depth: usize) -> Result<(), BuiltinError> {
    if depth > MAX_DEPTH {
        fail!("json: value nested too deeply");
    }
    match v {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => out.push_str(&i.to_string()),
        Val::Float(f) => out.push_str(&format_float(f)),
        Val::String(s) => json_str(s, out),
        Val::Bytes(b) => json_str(&base64::engine::general_purpose::STANDARD.encode(b), out),
        Val::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item, depth + 1)?;
            }
            out.push(']');
        }
        Val::Struct(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_str(k, out);
                out.push(':');
                write_json(out, v, depth + 1)?;
            }
            out.push('}');
        }
        Val::Opaque(_) => {
            return Err(BuiltinError::incomplete(
                "cannot convert incomplete value to JSON",
            ))
        }
    }
    Ok(())
}

/// The compact JSON text of `v` (Go `json.Marshal` of a CUE value).
pub fn to_json(v: &Val) -> Result<String, BuiltinError> {
    let mut out = String::new();
    write_json(&mut out, v, 0)?;
    Ok(out)
}

/// A JSON syntax error, worded like Go's `SyntaxError`.
#[derive(Debug)]
pub(crate) struct SyntaxError(pub String);

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

fn describe(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        c if c.is_ascii_graphic() || c == b' ' => format!("'{}'", c as char),
        c => format!("'\\x{c:02x}'"),
    }
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    fn err(&self, context: &str) -> SyntaxError {
        match self.s.get(self.pos) {
            None => SyntaxError("unexpected end of JSON input".into()),
            Some(&c) => SyntaxError(format!("invalid character {} {context}", describe(c))),
        }
    }

    fn lit(&mut self, word: &[u8], v: Val) -> Result<Val, SyntaxError> {
        for &w in word {
            if self.s.get(self.pos) != Some(&w) {
                return Err(self.err("in literal"));
            }
            self.pos += 1;
        }
        Ok(v)
    }

    fn value(&mut self, depth: usize) -> Result<Val, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(SyntaxError("exceeded max depth".into()));
        }
        self.ws();
        match self.s.get(self.pos) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Val::String(self.string()?)),
            Some(b't') => self.lit(b"true", Val::Bool(true)),
            Some(b'f') => self.lit(b"false", Val::Bool(false)),
            Some(b'n') => self.lit(b"null", Val::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.err("looking for beginning of value")),
        }
    }

    #[inline(never)]
    fn object(&mut self, depth: usize) -> Result<Val, SyntaxError> {
        self.pos += 1;
        let mut fields: Vec<(String, Val)> = Vec::new();
        self.ws();
        if self.s.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Val::Struct(fields));
        }
        loop {
            self.ws();
            if self.s.get(self.pos) != Some(&b'"') {
                return Err(self.err("looking for beginning of object key string"));
            }
            let k = self.string()?;
            self.ws();
            if self.s.get(self.pos) != Some(&b':') {
                return Err(self.err("after object key"));
            }
            self.pos += 1;
            let v = self.value(depth + 1)?;
            match fields.iter().find(|(k2, _)| *k2 == k) {
                Some((_, old)) if *old == v => {}
                Some(_) => {
                    return Err(SyntaxError(format!(
                        "duplicate key {k:?} with conflicting values"
                    )))
                }
                None => fields.push((k, v)),
            }
            self.ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Val::Struct(fields));
                }
                _ => return Err(self.err("after object key:value pair")),
            }
        }
    }

    #[inline(never)]
    fn array(&mut self, depth: usize) -> Result<Val, SyntaxError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.s.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Val::List(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Val::List(items));
                }
                _ => return Err(self.err("after array element")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.s.get(self.pos) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Val, SyntaxError> {
        let start = self.pos;
        if self.s.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.s.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("in numeric literal")),
        }
        let mut float = false;
        if self.s.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            float = true;
            if self.digits() == 0 {
                return Err(self.err("after decimal point in numeric literal"));
            }
        }
        if let Some(b'e' | b'E') = self.s.get(self.pos) {
            self.pos += 1;
            float = true;
            if let Some(b'+' | b'-') = self.s.get(self.pos) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("in exponent of numeric literal"));
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.pos])
            .map_err(|_| SyntaxError("invalid number".into()))?;
        if float {
            text.parse::<BigDecimal>()
                .map(Val::Float)
                .map_err(|e| SyntaxError(e.to_string()))
        } else {
            text.parse::<BigInt>()
                .map(Val::Int)
                .map_err(|e| SyntaxError(e.to_string()))
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return Err(self.err(""));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(&e) = self.s.get(self.pos) else {
                        return Err(self.err(""));
                    };
                    self.pos += 1;
                    let simple = match e {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(8),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(b) = simple {
                        out.push(b);
                        continue;
                    }
                    if e != b'u' {
                        self.pos -= 1;
                        return Err(self.err("in string escape code"));
                    }
                    let Some(u) = self.hex4() else {
                        return Err(self.err("in \\u hexadecimal character escape"));
                    };
                    let mut ch = char::from_u32(u);
                    if (0xD800..0xDC00).contains(&u)
                        && self.s.get(self.pos..self.pos + 2) == Some(b"\\u")
                    {
                        let save = self.pos;
                        self.pos += 2;
                        match self.hex4() {
                            Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                ch = char::from_u32(0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00));
                            }
                            _ => self.pos = save,
                        }
                    }
                    let ch = ch.unwrap_or('\u{FFFD}');
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1F => return Err(self.err("in string literal")),
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }
}

/// Parses one JSON document (surrounding whitespace allowed).
pub(crate) fn parse(data: &[u8]) -> Result<Val, SyntaxError> {
    let mut p = Parser { s: data, pos: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.pos < data.len() {
        return Err(p.err("after top-level value"));
    }
    Ok(v)
}

/// Parses a stream of JSON documents separated by whitespace.
pub(crate) fn parse_stream(data: &[u8]) -> Result<Vec<Val>, SyntaxError> {
    let mut p = Parser { s: data, pos: 0 };
    let mut out = Vec::new();
    loop {
        p.ws();
        if p.pos >= data.len() {
            return Ok(out);
        }
        out.push(p.value(0)?);
    }
}

builtin! {
    /// `Valid("{\"a\": 1}")` → `true`; `Valid("{a: 1}")` → `false`.
    fn valid(_, "json.Valid", data: Bytes) {
        Ok(Val::Bool(parse(data.0).is_ok()))
    }
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Copies the string literal starting at `src[i]` (a `"`) to `out`; returns the index after it.
fn copy_string(src: &[u8], mut i: usize, out: &mut Vec<u8>) -> usize {
    out.push(src[i]);
    i += 1;
    while i < src.len() {
        let d = src[i];
        out.push(d);
        i += 1;
        if d == b'\\' && i < src.len() {
            out.push(src[i]);
            i += 1;
        } else if d == b'"' {
            break;
        }
    }
    i
}

/// Go's `json.Compact` of already validated text: whitespace outside strings is dropped.
fn compact_text(src: &[u8]) -> String {
    let mut out = Vec::with_capacity(src.len());
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        if c == b'"' {
            i = copy_string(src, i, &mut out);
            continue;
        }
        if !is_ws(c) {
            out.push(c);
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Go's `json.Indent` of already validated text: leading whitespace is dropped, trailing
/// whitespace kept, and empty objects and arrays stay `{}` and `[]`.
fn indent_text(src: &[u8], prefix: &str, ind: &str) -> String {
    let start = src.iter().position(|&c| !is_ws(c)).unwrap_or(src.len());
    let end = src
        .iter()
        .rposition(|&c| !is_ws(c))
        .map_or(start, |p| p + 1);
    let mut out: Vec<u8> = Vec::with_capacity(src.len() * 2);
    let mut depth = 0usize;
    let mut need_indent = false;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend_from_slice(prefix.as_bytes());
        for _ in 0..depth {
            out.extend_from_slice(ind.as_bytes());
        }
    };
    let mut i = start;
    while i < end {
        let c = src[i];
        if is_ws(c) {
            i += 1;
            continue;
        }
        if need_indent && c != b'}' && c != b']' {
            need_indent = false;
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            b'"' => {
                i = copy_string(src, i, &mut out);
                continue;
            }
            b'{' | b'[' => {
                need_indent = true;
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => {
                out.push(c);
                out.push(b' ');
            }
            b'}' | b']' => {
                if need_indent {
                    need_indent = false;
                } else {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out.extend_from_slice(&src[end..]);
    String::from_utf8_lossy(&out).into_owned()
}

fn invalid(e: SyntaxError) -> BuiltinError {
    BuiltinError::new(e.0)
}

builtin! {
    /// `Compact("{ \"a\" : [1, 2] }")` → `"{\"a\":[1,2]}"`.
    fn compact(_, "json.Compact", src: Bytes) {
        parse(src.0).map_err(invalid)?;
        Ok(Val::String(compact_text(src.0)))
    }
}

builtin! {
    /// `Indent("{\"a\":[1,2],\"b\":{}}", "", "  ")` →
    /// `"{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}"`.
    fn indent(_, "json.Indent", src: Bytes, prefix: &str, ind: &str) {
        parse(src.0).map_err(invalid)?;
        Ok(Val::String(indent_text(src.0, prefix, ind)))
    }
}

builtin! {
    /// `HTMLEscape("{\"a\":\"<b>\"}")` → `"{\"a\":\"\\u003cb\\u003e\"}"`.
    fn html_escape(_, "json.HTMLEscape", src: Bytes) {
        let text = String::from_utf8_lossy(src.0);
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '<' => out.push_str("\\u003c"),
                '>' => out.push_str("\\u003e"),
                '&' => out.push_str("\\u0026"),
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                c => out.push(c),
            }
        }
        Ok(Val::String(out))
    }
}

builtin! {
    /// `Marshal({a: 1, b: [true, null, "<x>"], c: 1.0})` →
    /// `"{\"a\":1,\"b\":[true,null,\"\\u003cx\\u003e\"],\"c\":1.0}"`.
    fn marshal(_, "json.Marshal", v: &Val) {
        Ok(Val::String(to_json(v)?))
    }
}

builtin! {
    /// `MarshalStream([{a: 1}, 2])` → `"{\"a\":1}\n2\n"`.
    fn marshal_stream(_, "json.MarshalStream", xs: &[Val]) {
        let mut out = String::new();
        for x in xs {
            write_json(&mut out, x, 0)?;
            out.push('\n');
        }
        Ok(Val::String(out))
    }
}

builtin! {
    /// `Unmarshal("{\"a\": [1, 2.0, \"x\"]}")` → `{a: [1, 2.0, "x"]}`; invalid input is
    /// `json: invalid JSON`.
    fn unmarshal(_, "json.Unmarshal", data: Bytes) {
        parse(data.0).map_err(|e| BuiltinError::new(format!("json: invalid JSON: {}", e.0)))
    }
}

builtin! {
    /// `UnmarshalStream("{\"a\":1} [2]")` → `[{a: 1}, [2]]`.
    fn unmarshal_stream(_, "json.UnmarshalStream", data: Bytes) {
        parse_stream(data.0)
            .map(Val::List)
            .map_err(|e| BuiltinError::new(format!("json: invalid JSON: {}", e.0)))
    }
}

builtin! {
    /// `Validate("{\"a\":1}", schema)` → `true` when the parsed value unifies with `schema`; as a
    /// validator, `json.Validate(schema)`.
    fn validate(h, "json.Validate", data: Bytes, schema: &Val) {
        let v = parse(data.0).map_err(|e| BuiltinError::new(format!("json: invalid JSON: {}", e.0)))?;
        if h.unifies(schema, &v)? {
            Ok(Val::Bool(true))
        } else {
            fail!("json.Validate: value does not satisfy the schema")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_table, val};
    use super::*;

    #[test]
    fn table() {
        check_table(
            "encoding/json",
            &[
                (r#"Valid("{\"a\": 1}")"#, "true"),
                (r#"Valid("{a: 1}")"#, "false"),
                (r#"Valid("[1,]")"#, "false"),
                (r#"Valid('01')"#, "false"),
                (
                    r#"Compact("{ \"a\" : [1, 2], \"s\": \" x \" }")"#,
                    r#""{\"a\":[1,2],\"s\":\" x \"}""#,
                ),
                (r#"Compact("{")"#, "!unexpected end of JSON input"),
                (
                    r#"Indent("{\"a\":[1,2],\"b\":{}}", "", "  ")"#,
                    r#""{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}""#,
                ),
                (
                    r#"Indent("[\"x\",{\"k\":\"v\"}]", ">", "\t")"#,
                    r#""[\n>\t\"x\",\n>\t{\n>\t\t\"k\": \"v\"\n>\t}\n>]""#,
                ),
                (r#"Indent("[]", "", "  ")"#, r#""[]""#),
                (
                    r#"Indent("nope", "", "  ")"#,
                    "!invalid character 'o' in literal",
                ),
                (
                    r#"HTMLEscape("{\"a\":\"<b>&\"}")"#,
                    r#""{\"a\":\"\\u003cb\\u003e\\u0026\"}""#,
                ),
                (
                    r#"Marshal({a: 1, b: [true, null, "<x>"], c: 1.0})"#,
                    r#""{\"a\":1,\"b\":[true,null,\"\\u003cx\\u003e\"],\"c\":1.0}""#,
                ),
                (
                    r#"Marshal("tab\there\u0001\u2028")"#,
                    r#""\"tab\\there\\u0001\\u2028\"""#,
                ),
                (r#"Marshal('hi')"#, r#""\"aGk=\"""#),
                ("Marshal(1e30)", r#""1E+30""#),
                ("Marshal({})", r#""{}""#),
                ("Marshal([])", r#""[]""#),
                ("Marshal(_1)", "?cannot convert incomplete value"),
                (r#"MarshalStream([{a: 1}, 2])"#, r#""{\"a\":1}\n2\n""#),
                (r#"MarshalStream(1)"#, "!expected list, found int"),
                (r#"UnmarshalStream("{\"a\":1} [2]")"#, "[{a: 1}, [2]]"),
                (
                    r#"Unmarshal("{\"a\": [1, 2.0, \"x\", -0, 1E2]}")"#,
                    r#"{a: [1, 2.0, "x", 0, 1E2]}"#,
                ),
                (r#"Unmarshal("\"\\ud83d\\ude00\\u00e9\"")"#, r#""😀é""#),
                (r#"Unmarshal('{"a":1,"a":1}')"#, "{a: 1}"),
                (r#"Unmarshal('{"a":1,"a":2}')"#, "!duplicate key"),
                (r#"Unmarshal("{a: 1}")"#, "!json: invalid JSON"),
                (r#"Unmarshal("1 2")"#, "!after top-level value"),
                (r#"Unmarshal("\"a\tb\"")"#, "!in string literal"),
                (r#"Unmarshal(1)"#, "!expected bytes|string, found int"),
                (r#"Validate("{\"a\":1}", {a: 1})"#, "true"),
                (r#"Validate("{\"a\":2}", {a: 1})"#, "!does not satisfy"),
            ],
        );
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let deep = "[".repeat(5_000) + &"]".repeat(5_000);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn marshal_unmarshal_round_trip() {
        let mut rng = super::super::testing::Rng(0x5eed);
        for _ in 0..300 {
            let v = rng.json_val(4);
            let text = to_json(&v).unwrap();
            let back = parse(text.as_bytes()).unwrap();
            assert!(
                super::super::list::equal(&back, &v),
                "{v:?}\n{text}\n{back:?}"
            );
            assert_eq!(to_json(&back).unwrap(), text);
        }
        assert_eq!(
            to_json(&val(r#"{"a b": 'x'}"#)).unwrap(),
            r#"{"a b":"eA=="}"#
        );
    }
}
