//! The `encoding/yaml` decoder (`Unmarshal`, `UnmarshalStream`, `Validate`): YAML text to
//! values, on `granit-parser`'s event stream, with CUE's rules for turning `yaml.v3` nodes into
//! values (upstream `internal/encoding/yaml/decode.go`).
//!
//! Rules:
//! - A plain scalar is resolved as `yaml.v3` resolves it (YAML 1.2 core plus Go's integer
//!   syntax): `null`, `Null`, `NULL`, `~` and the empty scalar are null; `true`, `True`, `TRUE`,
//!   `false`, `False`, `FALSE` are booleans (`yes`, `no`, `on`, `off`, `y`, `n` are strings);
//!   after removing `_`, a decimal, `0x`, `0o`, `0b` or leading-zero octal integer (`0777` is
//!   511) within 64 bits is an integer; otherwise text matching
//!   `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` is a number, except a leading-zero
//!   spelling that is no valid octal (`08`, `0128`), which stays a string. Numbers keep their
//!   text exactly (`1.50` is `1.50`, integers of any size are exact). Everything else, and
//!   every quoted or block scalar, is a string.
//! - A number written with a leading `+` is an error, as upstream (a CUE literal has no `+`);
//!   so are infinities and NaN (CUE has no such numbers).
//! - Tags: `!!str` and `!` make a string, `!!binary` bytes (base64, whitespace ignored),
//!   `!!int`, `!!float`, `!!bool` and `!!null` resolve the text (also when quoted) and fail when
//!   it is not of that type (`!!float 1` is the number 1), `!!timestamp` a string. Other tags
//!   are ignored (approximation: upstream rejects them).
//! - Mapping keys are scalars; a key that is no string is named by its CUE literal (`1`, `true`,
//!   `null`, `0x1F`). A key given twice must have equal values (upstream unifies the two).
//! - Merge keys (`<<`, or `!!merge <<`) take one mapping or a list of mappings: merged fields
//!   take the place of the `<<` key, explicit keys of the mapping win over merged ones, and
//!   earlier sources of a list win over later ones.
//! - Aliases repeat their anchor's value. A document that expands to more than
//!   [`MAX_NODES`] values (aliases counted each time they repeat) is an error (alias bombs),
//!   as is nesting deeper than `MAX_DEPTH`.
//! - A stream: `Unmarshal` takes exactly one document (empty input is null); an empty document
//!   (`---` alone) is null.

use super::super::args::fail;
use super::super::{BuiltinError, Val};
use super::MAX_DEPTH;
use base64::Engine as _;
use bigdecimal::BigDecimal;
use granit_parser::{Event, Parser, ScalarStyle, Tag};
use num_bigint::BigInt;
use std::collections::HashMap;
use std::rc::Rc;
use std::str::FromStr as _;

/// The most values one document may expand to.
pub(super) const MAX_NODES: usize = 1_000_000;

const CORE: &str = "tag:yaml.org,2002:";

/// A node of one document, before resolution.
#[derive(Debug)]
enum Node {
    Scalar {
        text: String,
        plain: bool,
        tag: Option<Rc<str>>,
    },
    Seq(Vec<Rc<Node>>),
    Map(Vec<(Rc<Node>, Rc<Node>)>),
}

fn err(e: impl std::fmt::Display) -> BuiltinError {
    BuiltinError::new(format!("yaml: {e}"))
}

/// `!!x` as `x` for core tags; other tags as written.
fn tag_name(t: &Tag) -> Rc<str> {
    if t.handle() == CORE {
        Rc::from(format!("!!{}", t.suffix()))
    } else {
        Rc::from(format!("{}{}", t.handle(), t.suffix()))
    }
}

/// A collection being built: its anchor, and its children so far.
enum Open {
    Seq(usize, Vec<Rc<Node>>),
    Map(usize, Vec<Rc<Node>>),
}

/// The documents of a stream, as node trees (anchors resolved by sharing).
fn documents(text: &str) -> Result<Vec<Rc<Node>>, BuiltinError> {
    let mut docs = Vec::new();
    let mut anchors: HashMap<usize, Rc<Node>> = HashMap::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Rc<Node>> = None;
    let mut in_doc = false;
    for ev in Parser::new_from_str(text) {
        let (ev, _) = ev.map_err(err)?;
        let done: Option<(usize, Rc<Node>)> = match ev {
            Event::DocumentStart(..) => {
                in_doc = true;
                anchors.clear();
                None
            }
            Event::DocumentEnd => {
                if in_doc {
                    docs.push(root.take().unwrap_or_else(|| {
                        Rc::new(Node::Scalar {
                            text: String::new(),
                            plain: true,
                            tag: None,
                        })
                    }));
                }
                in_doc = false;
                None
            }
            Event::Scalar(v, style, anchor, tag) => Some((
                anchor,
                Rc::new(Node::Scalar {
                    text: v.into_owned(),
                    plain: style == ScalarStyle::Plain,
                    tag: tag.as_deref().map(tag_name),
                }),
            )),
            Event::Alias(id) => match anchors.get(&id) {
                Some(n) => Some((0, n.clone())),
                None => fail!("yaml: unknown anchor"),
            },
            Event::SequenceStart(_, anchor, _) => {
                stack.push(Open::Seq(anchor, Vec::new()));
                None
            }
            Event::MappingStart(_, anchor, _) => {
                stack.push(Open::Map(anchor, Vec::new()));
                None
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Seq(anchor, items)) => Some((anchor, Rc::new(Node::Seq(items)))),
                Some(Open::Map(anchor, items)) => {
                    let mut pairs = Vec::with_capacity(items.len() / 2);
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Some((anchor, Rc::new(Node::Map(pairs))))
                }
                None => fail!("yaml: unbalanced collection events"),
            },
            _ => None,
        };
        if let Some((anchor, node)) = done {
            if anchor != 0 {
                anchors.insert(anchor, node.clone());
            }
            match stack.last_mut() {
                Some(Open::Seq(_, items) | Open::Map(_, items)) => items.push(node),
                None => root = Some(node),
            }
        }
    }
    Ok(docs)
}

/// What a scalar resolves to.
enum Scalar {
    Null,
    Bool(bool),
    Num(String),
    Str,
}

/// Go's `strconv.ParseInt(s, 0, 64)` or `ParseUint(s, 0, 64)` on `s` (no `_`): the value.
pub(super) fn go_int(s: &str) -> Option<BigInt> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = BigInt::parse_bytes(digits.as_bytes(), radix)?;
    let v = if neg { -v } else { v };
    (v >= BigInt::from(i64::MIN) && v <= BigInt::from(u64::MAX)).then_some(v)
}

/// `yaml.v3`'s resolution of a plain scalar (see the module doc).
fn resolve_plain(s: &str) -> Result<Scalar, BuiltinError> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Scalar::Null),
        "true" | "True" | "TRUE" => return Ok(Scalar::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Scalar::Bool(false)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => fail!("yaml: cannot represent {s} as a CUE number"),
        _ => {}
    }
    match s.as_bytes().first() {
        Some(b'0'..=b'9' | b'+' | b'-') => {}
        Some(b'.') => {
            return Ok(if super::yaml_style_float(s) {
                Scalar::Num(s.to_owned())
            } else {
                Scalar::Str
            })
        }
        _ => return Ok(Scalar::Str),
    }
    let plain: String = s.chars().filter(|&c| c != '_').collect();
    let number = if go_int(&plain).is_some() {
        true
    } else if super::yaml_style_float(&plain) {
        // `01289`: a float to yaml.v3, a string to CUE.
        let body = plain.strip_prefix(['-', '+']).unwrap_or(&plain);
        !(body.len() > 1 && body.starts_with('0') && body.bytes().all(|b| b.is_ascii_digit()))
    } else {
        false
    };
    if !number {
        return Ok(Scalar::Str);
    }
    if s.starts_with('+') {
        fail!("yaml: cannot decode {s:?} as a number: a CUE number has no leading +");
    }
    Ok(Scalar::Num(plain))
}

/// A resolved number's text (no `_`) as a value: an integer when it reads as one.
fn number(text: &str) -> Result<Val, BuiltinError> {
    if let Some(i) = go_int(text) {
        return Ok(Val::Int(i));
    }
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    if !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()) {
        if let Some(i) = BigInt::parse_bytes(body.as_bytes(), 10) {
            return Ok(Val::Int(if neg { -i } else { i }));
        }
    }
    // `.5` and `1.` and `1.e3` as BigDecimal reads them.
    let mut t = String::with_capacity(body.len() + 2);
    if neg {
        t.push('-');
    }
    if body.starts_with('.') {
        t.push('0');
    }
    let mut prev = ' ';
    for c in body.chars() {
        if prev == '.' && !c.is_ascii_digit() {
            t.push('0');
        }
        t.push(c);
        prev = c;
    }
    if prev == '.' {
        t.push('0');
    }
    BigDecimal::from_str(&t)
        .map(Val::Float)
        .map_err(|e| err(format!("cannot decode {text:?} as a number: {e}")))
}

/// The value of a scalar node, and the label it gives as a mapping key.
fn scalar(text: &str, plain: bool, tag: Option<&str>) -> Result<(Val, String), BuiltinError> {
    let resolved = match tag {
        None if plain => resolve_plain(text)?,
        None | Some("!" | "!!str" | "!!timestamp") => Scalar::Str,
        Some("!!binary") => {
            let clean: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean)
                .map_err(|_| err("!!binary value contains invalid base64 data"))?;
            return Ok((Val::Bytes(bytes), text.to_owned()));
        }
        Some(t @ ("!!int" | "!!float" | "!!bool" | "!!null")) => {
            let r = resolve_plain(text)?;
            let ok = matches!(
                (t, &r),
                ("!!int", Scalar::Num(n)) if go_int(n).is_some() || !n.contains(['.', 'e', 'E'])
            ) || matches!((t, &r), ("!!float", Scalar::Num(_)))
                || matches!((t, &r), ("!!bool", Scalar::Bool(_)))
                || matches!((t, &r), ("!!null", Scalar::Null));
            if !ok {
                fail!("yaml: cannot decode {text:?} as {t}");
            }
            r
        }
        Some(_) if plain => resolve_plain(text)?,
        Some(_) => Scalar::Str,
    };
    Ok(match resolved {
        Scalar::Null => (Val::Null, "null".to_owned()),
        Scalar::Bool(b) => (Val::Bool(b), b.to_string()),
        Scalar::Str => (Val::String(text.to_owned()), text.to_owned()),
        Scalar::Num(n) => {
            let label = match n.strip_prefix('-').unwrap_or(&n) {
                b if b.len() > 1 && b.starts_with('0') && b.as_bytes()[1].is_ascii_digit() => {
                    format!("{}0o{}", if n.starts_with('-') { "-" } else { "" }, &b[1..])
                }
                _ => text.to_owned(),
            };
            (number(&n)?, label)
        }
    })
}

/// Converts node trees to values, counting what alias expansion produces.
struct Builder {
    nodes: usize,
}

impl Builder {
    fn value(&mut self, n: &Node, depth: usize) -> Result<Val, BuiltinError> {
        if depth > MAX_DEPTH {
            fail!("yaml: value nested too deeply");
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            fail!("yaml: document expands to more than {MAX_NODES} values");
        }
        Ok(match n {
            Node::Scalar { text, plain, tag } => scalar(text, *plain, tag.as_deref())?.0,
            Node::Seq(items) => Val::List(
                items
                    .iter()
                    .map(|i| self.value(i, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Node::Map(pairs) => Val::Struct(self.mapping(pairs, depth)?),
        })
    }

    fn mapping(
        &mut self,
        pairs: &[(Rc<Node>, Rc<Node>)],
        depth: usize,
    ) -> Result<Vec<(String, Val)>, BuiltinError> {
        // Explicit fields first (duplicates must agree), remembering where each `<<` stood.
        let mut explicit: Vec<(String, Val)> = Vec::with_capacity(pairs.len());
        let mut merges: Vec<(usize, &Node)> = Vec::new();
        for (k, v) in pairs {
            let Node::Scalar { text, plain, tag } = &**k else {
                fail!("yaml: invalid map key: only scalar keys are supported");
            };
            let is_merge = text == "<<"
                && match tag.as_deref() {
                    None => *plain,
                    Some(t) => t == "!!merge",
                };
            if is_merge {
                merges.push((explicit.len(), v));
                continue;
            }
            let (_, key) = scalar(text, *plain, tag.as_deref())?;
            let val = self.value(v, depth + 1)?;
            match explicit.iter().find(|(k2, _)| *k2 == key) {
                Some((_, old)) if super::super::list::equal(old, &val) => {}
                Some(_) => fail!("yaml: conflicting values for key {key:?}"),
                None => explicit.push((key, val)),
            }
        }
        if merges.is_empty() {
            return Ok(explicit);
        }
        let explicit_keys: Vec<String> = explicit.iter().map(|(k, _)| k.clone()).collect();
        let mut fields: Vec<(String, Val)> = Vec::with_capacity(explicit.len());
        let mut merges = merges.into_iter().peekable();
        for (i, field) in explicit.into_iter().map(Some).chain([None]).enumerate() {
            while let Some((_, src)) = merges.next_if(|(pos, _)| *pos == i) {
                let sources: Vec<&Node> = match src {
                    Node::Seq(items) => items.iter().map(|n| &**n).collect(),
                    other => vec![other],
                };
                for source in sources {
                    let Val::Struct(merged) = self.value(source, depth + 1)? else {
                        fail!("yaml: map merge requires map or sequence of maps as the value");
                    };
                    for (k, v) in merged {
                        if !explicit_keys.contains(&k) && fields.iter().all(|(k2, _)| *k2 != k) {
                            fields.push((k, v));
                        }
                    }
                }
            }
            if let Some(f) = field {
                fields.push(f);
            }
        }
        Ok(fields)
    }
}

/// Every document of a YAML stream as a value.
pub(super) fn stream(text: &str) -> Result<Vec<Val>, BuiltinError> {
    let docs = documents(text)?;
    let mut b = Builder { nodes: 0 };
    docs.iter()
        .map(|d| {
            b.nodes = 0;
            b.value(d, 0)
        })
        .collect()
}

/// Parses one YAML document into a value (see the module doc for the rules).
pub fn from_yaml_str(text: &str) -> Result<Val, BuiltinError> {
    let mut docs = stream(text)?;
    if docs.len() > 1 {
        fail!("yaml: expected a single YAML document, found a stream");
    }
    Ok(docs.pop().unwrap_or(Val::Null))
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::val;
    use super::*;

    fn y(text: &str) -> Val {
        from_yaml_str(text).unwrap_or_else(|e| panic!("{text:?}: {}", e.message))
    }

    fn fails(text: &str, want: &str) {
        match from_yaml_str(text) {
            Ok(v) => panic!("{text:?} decoded to {v:?}"),
            Err(e) => assert!(e.message.contains(want), "{text:?}: {}", e.message),
        }
    }

    #[test]
    fn yaml_1_1_words_are_strings() {
        assert_eq!(
            y("a: yes\nb: no\nc: on\nd: off\ne: y\nf: True\ng: TRUE\nh: tRUE\n"),
            val(r#"{a: "yes", b: "no", c: "on", d: "off", e: "y", f: true, g: true, h: "tRUE"}"#)
        );
    }

    #[test]
    fn integers_as_yaml_v3_and_cue_read_them() {
        assert_eq!(
            y("a: 0777\nb: 0o17\nc: 0x1F\nd: 0b101\ne: 1_000\ng: 08\nh: -0x1F\ni: 0o\n"),
            val(r#"{a: 511, b: 15, c: 31, d: 5, e: 1000, g: "08", h: -31, i: "0o"}"#)
        );
        assert_eq!(
            y("a: 12345678901234567890123\nb: -9223372036854775809\n"),
            val("{a: 12345678901234567890123, b: -9223372036854775809}")
        );
        fails("a: +1", "leading +");
    }

    #[test]
    fn floats_keep_their_text() {
        let v = y("a: 1.50\nb: 1e3\nc: .5\nd: 1.\ne: -2.5E-3\n");
        let Val::Struct(fields) = v else {
            panic!("{v:?}")
        };
        let texts: Vec<String> = fields
            .iter()
            .map(|(k, v)| match v {
                Val::Float(d) => format!("{k}={d}"),
                other => format!("{k}={other:?}"),
            })
            .collect();
        assert_eq!(texts[0], "a=1.50");
        assert!(matches!(fields[1].1, Val::Float(_)), "{:?}", fields[1]);
        assert_eq!(fields[2].1, val("0.5"));
        assert_eq!(fields[3].1, val("1.0"));
        assert_eq!(fields[4].1, val("-0.0025"));
        fails("a: .inf", "cannot represent");
        fails("a: -.Inf", "cannot represent");
    }

    #[test]
    fn tags() {
        assert_eq!(
            y("a: !!str 1\nb: !!int \"3\"\nc: !!float 1\nd: !!binary aGVs\n  bG8=\ne: !!null ~\n"),
            Val::Struct(vec![
                ("a".into(), Val::String("1".into())),
                ("b".into(), Val::Int(3.into())),
                ("c".into(), Val::Int(1.into())),
                ("d".into(), Val::Bytes(b"hello".to_vec())),
                ("e".into(), Val::Null),
            ])
        );
        fails("a: !!int x", "as !!int");
        fails("a: !!bool yes", "as !!bool");
        fails("a: !!binary \"!!!\"", "invalid base64");
        assert_eq!(y("a: !custom x"), val(r#"{a: "x"}"#));
    }

    #[test]
    fn keys_and_duplicates() {
        assert_eq!(
            y("1: a\ntrue: b\nnull: c\n0x1F: d\n010: e\n"),
            val(r#"{"1": "a", "true": "b", "null": "c", "0x1F": "d", "0o10": "e"}"#)
        );
        assert_eq!(y("a: 1\na: 1\n"), val("{a: 1}"));
        fails("a: 1\na: 2\n", "conflicting values");
        fails("[a]: 1\n", "only scalar keys");
    }

    #[test]
    fn anchors_merges_and_streams() {
        assert_eq!(
            y("x: &v [1, 2]\ny: *v\ns: &s hello\nt: *s\n"),
            val(r#"{x: [1, 2], y: [1, 2], s: "hello", t: "hello"}"#)
        );
        assert_eq!(
            y("b: &b {x: 1, y: 0}\nm:\n  <<: *b\n  y: 2\nn:\n  !!merge <<: *b\n"),
            val("{b: {x: 1, y: 0}, m: {x: 1, y: 2}, n: {x: 1, y: 0}}")
        );
        assert_eq!(y("'<<': 1"), val(r#"{"<<": 1}"#));
        fails("a: 1\nm:\n  <<: 3\n", "map merge requires");
        assert_eq!(y(""), Val::Null);
        assert_eq!(y("# only a comment\n"), Val::Null);
        assert_eq!(
            stream("a: 1\n---\n---\nb: 2\n").unwrap(),
            vec![val("{a: 1}"), Val::Null, val("{b: 2}")]
        );
        fails("a: 1\n---\nb: 2\n", "expected a single YAML document");
        fails("a: [", "yaml:");
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        fails(&text, "expands to more than");
    }

    #[test]
    fn blocks_and_escapes() {
        assert_eq!(
            y("lit: |\n  a\n   b\nfold: >-\n  a\n  b\n\n  c\nq: \"\\u263A\\t\"\n"),
            Val::Struct(vec![
                ("lit".into(), Val::String("a\n b\n".into())),
                ("fold".into(), Val::String("a b\nc".into())),
                ("q".into(), Val::String("☺\t".into())),
            ])
        );
    }
}
