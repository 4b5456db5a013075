//! Package `encoding/yaml` (upstream `pkg/encoding/yaml`), with the crate's one YAML encoder
//! ([`to_yaml`]): `yaml.Marshal` and `cue export --out yaml` both use it, as upstream's both go
//! through `internal/encoding/yaml.Encode`.
//!
//! Encoder rules — upstream converts the value to a `yaml.v3` node tree (block style, indent 2)
//! and `yaml.v3`'s emitter prints it; this file reproduces that pipeline for concrete values:
//! - Structs are block mappings and lists block sequences (`key:` then the value indented by
//!   two; a sequence under a key is indented too: `key:\n  - a`; a struct in a list starts on
//!   the dash line: `- a: 1\n  b: 2`). Empty ones are `{}` and `[]`.
//! - Strings: a string with a line break asks for a literal block (`|`, `|-`, `|+`, with an
//!   indentation indicator when it starts with a space or break). Otherwise CUE quotes (double)
//!   the YAML 1.1 words (`yes`, `no`, `on`, `off`, `y`, `n`, `true`, `True`, ..., `.Nan`) and
//!   anything that looks like a date, time, base-60 number or hex number; `yaml.v3` quotes
//!   (double) whatever a plain scalar would read back as another type (`"1"`, `"1.5"`, `"null"`,
//!   `""`, `"0o17"`, `".inf"`; not `<<`, which `yaml.v3`'s resolver never looks up). Then the emitter's analysis applies: a plain scalar that
//!   starts with an indicator (`#`, `&`, `*`, `!`, `|`, `>`, `'`, `"`, `%`, `@`, `` ` ``, `- `,
//!   `? `, `: `), contains `: ` or ` #`, or has leading/trailing spaces becomes single-quoted; tabs,
//!   control characters, characters outside the BMP and a space before a line break force double
//!   quotes, with `yaml.v3`'s escapes (`\t`, `\e`, `\N`, `\L`, `\P`, `\xXX`, `\uXXXX`,
//!   `\UXXXXXXXX`, upper-case hex). Deviation: U+2028 and U+2029 force double quotes too
//!   (`\L`, `\P`), where `yaml.v3` may write them raw in a literal block: they are line breaks
//!   in YAML 1.1 but content in YAML 1.2, so only the escaped form reads back the same in both
//!   (and in our YAML 1.2 decoder). Literal blocks that cannot be (trailing space, special
//!   characters, inside a key) fall back to double quotes.
//! - Long plain and quoted scalars fold at a space once the line passes 80 columns, as `yaml.v3`
//!   does by default (continuation lines indented like the value).
//! - Keys are written like string values but never as blocks; a key with a line break or longer
//!   than 128 bytes uses the explicit `? key` / `: value` form.
//! - Numbers print as CUE exports them, bytes as `!!binary <base64>`, `null`/`true`/`false` plain.
//! - `MarshalStream` joins documents with `---\n`.
//!
//! Decoder rules (`Unmarshal`, `UnmarshalStream`, `Validate`): see the `decode` module
//! (YAML 1.2 core as `yaml.v3` resolves it, numbers kept exact, `!!binary` as bytes, merge keys).

use super::args::{builtin, fail, Bytes};
use super::{no_consts, Builtin, BuiltinError, Package, Val};
use crate::data::num::format_float;
use base64::Engine as _;

const P: &str = "encoding/yaml";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Marshal", 1, marshal),
    Builtin::f(P, "MarshalStream", 1, marshal_stream),
    Builtin::f(P, "Unmarshal", 1, unmarshal),
    Builtin::f(P, "UnmarshalStream", 1, unmarshal_stream),
    Builtin::v(P, "Validate", 2, validate).opaque(&[1]),
    Builtin::v(P, "ValidatePartial", 2, validate_partial).opaque(&[1]),
];

const BEST_WIDTH: usize = 80;
const MAX_DEPTH: usize = 1_000;

/// The YAML 1.1 words CUE always quotes (upstream `legacyStrings`).
const LEGACY: &[&str] = &[
    "y", "Y", "yes", "Yes", "YES", "n", "N", "t", "T", "f", "F", "no", "No", "NO", "true", "True",
    "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", ".Nan",
];

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `yaml.v3`'s `is_printable`.
fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
}

/// CUE's `shouldQuote`: YAML 1.1 words, and date, time, base-60 or hex lookalikes.
fn cue_should_quote(s: &str) -> bool {
    if LEGACY.contains(&s) {
        return true;
    }
    // ^[\-+0-9:\. \t]+([-:]|[tT])[\-+0-9:\. \t]+[zZ]?$|^0x[a-fA-F0-9]+$
    if let Some(hex) = s.strip_prefix("0x") {
        if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return true;
        }
    }
    let body = s.strip_suffix(['z', 'Z']).unwrap_or(s);
    let set = |c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | ':' | '.' | ' ' | '\t');
    let chars: Vec<char> = body.chars().collect();
    // Find a separator ([-:] or [tT]) with at least one set character on both sides, all
    // other characters in the set.
    for (i, &c) in chars.iter().enumerate() {
        if matches!(c, '-' | ':' | 't' | 'T')
            && i > 0
            && i + 1 < chars.len()
            && chars[..i].iter().all(|&c| set(c))
            && chars[i + 1..].iter().all(|&c| set(c))
        {
            return true;
        }
    }
    false
}

/// Go's `strconv.ParseInt(s, 0, 64)` or `ParseUint(s, 0, 64)` succeeds.
fn go_int(s: &str) -> bool {
    decode::go_int(s).is_some()
}

/// `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.strip_prefix(['-', '+']).unwrap_or(s).as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let st = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - st
    };
    if b.first() == Some(&b'.') {
        i = 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// `true` when `yaml.v3`'s resolver reads the plain scalar `s` as something other than a string.
fn resolves_to_non_string(s: &str) -> bool {
    const MAP: &[&str] = &[
        "true", "True", "TRUE", "false", "False", "FALSE", "", "~", "null", "Null", "NULL", ".nan",
        ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf",
        "-.INF",
    ];
    let hint = match s.as_bytes().first() {
        None => 'N',
        Some(b'+' | b'-') => 'S',
        Some(b'0'..=b'9') => 'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => 'M',
        Some(b'.') => '.',
        _ => return false,
    };
    if MAP.contains(&s) {
        return true;
    }
    match hint {
        '.' => yaml_style_float(s) || (s.len() > 1 && s[1..].bytes().all(|c| c.is_ascii_digit())),
        'D' | 'S' => {
            let plain: String = s.chars().filter(|&c| c != '_').collect();
            go_int(&plain) || yaml_style_float(&plain)
        }
        _ => false,
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// What the emitter's `yaml_emitter_analyze_scalar` concludes about a scalar.
struct Analysis {
    multiline: bool,
    block_plain: bool,
    single: bool,
    block: bool,
}

fn analyze(value: &str) -> Analysis {
    if value.is_empty() {
        return Analysis {
            multiline: false,
            block_plain: true,
            single: true,
            block: false,
        };
    }
    let chars: Vec<char> = value.chars().collect();
    let mut block_ind = value.starts_with("---") || value.starts_with("...");
    let (mut line_breaks, mut special, mut tabs) = (false, false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let mut preceded_by_ws = true;
    let (mut prev_space, mut prev_break) = (false, false);
    let n = chars.len();
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_ws = i + 1 >= n || matches!(chars[i + 1], ' ' | '\t');
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => block_ind = true,
                '?' | ':' | '-' if followed_by_ws => block_ind = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_ws => block_ind = true,
                '#' if preceded_by_ws => block_ind = true,
                _ => {}
            }
        }
        if c == '\t' {
            tabs = true;
        } else if !is_printable(c) || matches!(c, '\u{2028}' | '\u{2029}') {
            special = true;
        }
        if c == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i + 1 == n {
                trailing_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break(c) {
            line_breaks = true;
            if i == 0 {
                leading_break = true;
            }
            if i + 1 == n {
                trailing_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_space = false;
            prev_break = true;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_by_ws = matches!(c, ' ' | '\t' | '\0') || is_break(c);
    }
    let mut a = Analysis {
        multiline: line_breaks,
        block_plain: true,
        single: true,
        block: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.block_plain = false;
    }
    if trailing_space {
        a.block = false;
    }
    if break_space {
        a.block_plain = false;
        a.single = false;
    }
    if space_break || tabs || special {
        a.block_plain = false;
        a.single = false;
    }
    if space_break || special {
        a.block = false;
    }
    if line_breaks || block_ind {
        a.block_plain = false;
    }
    a
}

/// The style asked for by the node tree for a string (CUE's encoder plus `yaml.v3`'s node
/// encoder).
fn requested_style(s: &str) -> Style {
    if s.contains('\n') {
        Style::Literal
    } else if cue_should_quote(s) || resolves_to_non_string(s) {
        Style::Double
    } else {
        Style::Plain
    }
}

/// The emitter's final choice (`yaml_emitter_select_scalar_style`).
fn select_style(requested: Style, a: &Analysis, value: &str, simple_key: bool) -> Style {
    let mut style = requested;
    if simple_key && a.multiline {
        style = Style::Double;
    }
    if style == Style::Plain && (!a.block_plain || (value.is_empty() && simple_key)) {
        style = Style::Single;
    }
    if style == Style::Single && !a.single {
        style = Style::Double;
    }
    if style == Style::Literal && (!a.block || simple_key) {
        style = Style::Double;
    }
    style
}

struct Emitter {
    out: String,
    column: usize,
    whitespace: bool,
    indention: bool,
}

impl Emitter {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
        self.indention = true;
    }

    fn write_indent(&mut self, indent: usize) {
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
    }

    fn indicator(&mut self, ind: &str, need_ws: bool, is_ws: bool, is_indention: bool) {
        if need_ws && !self.whitespace {
            self.put(' ');
        }
        for c in ind.chars() {
            self.put(c);
        }
        self.whitespace = is_ws;
        self.indention = self.indention && is_indention;
    }

    fn plain(&mut self, value: &str, allow_breaks: bool, indent: usize) {
        if !value.is_empty() && !self.whitespace {
            self.put(' ');
        }
        let chars: Vec<char> = value.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                let next_space = chars.get(i + 1) == Some(&' ');
                if allow_breaks && !spaces && self.column > BEST_WIDTH && !next_space {
                    self.write_indent(indent);
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                self.indention = false;
                spaces = false;
            }
        }
        if !value.is_empty() {
            self.whitespace = false;
        }
        self.indention = false;
    }

    fn single(&mut self, value: &str, allow_breaks: bool, indent: usize) {
        self.indicator("'", true, false, false);
        let mut spaces = false;
        let len = value.len();
        for (i, c) in value.char_indices() {
            if c == ' ' {
                let next_space = value[i + 1..].starts_with(' ');
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i + 1 < len
                    && !next_space
                {
                    self.write_indent(indent);
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
            }
        }
        self.indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn double(&mut self, value: &str, allow_breaks: bool, indent: usize) {
        self.indicator("\"", true, false, false);
        let mut spaces = false;
        let len = value.len();
        for (i, c) in value.char_indices() {
            if !is_printable(c) || c == '\u{FEFF}' || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                let short = match c {
                    '\0' => Some('0'),
                    '\u{7}' => Some('a'),
                    '\u{8}' => Some('b'),
                    '\t' => Some('t'),
                    '\n' => Some('n'),
                    '\u{B}' => Some('v'),
                    '\u{C}' => Some('f'),
                    '\r' => Some('r'),
                    '\u{1B}' => Some('e'),
                    '"' => Some('"'),
                    '\\' => Some('\\'),
                    '\u{85}' => Some('N'),
                    '\u{A0}' => Some('_'),
                    '\u{2028}' => Some('L'),
                    '\u{2029}' => Some('P'),
                    _ => None,
                };
                match short {
                    Some(s) => self.put(s),
                    None => {
                        let v = c as u32;
                        let (p, w) = if v <= 0xFF {
                            ('x', 2)
                        } else if v <= 0xFFFF {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(p);
                        for ch in format!("{v:0w$X}").chars() {
                            self.put(ch);
                        }
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && i > 0 && i + 1 < len {
                    self.write_indent(indent);
                    if value[i + 1..].starts_with(' ') {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn literal(&mut self, value: &str, indent: usize) {
        self.indicator("|", true, false, false);
        let first = value.chars().next();
        if first.is_some_and(|c| c == ' ' || is_break(c)) {
            self.indicator("2", false, false, false);
        }
        let chars: Vec<char> = value.chars().collect();
        let chomp = match chars.as_slice() {
            [] => Some("-"),
            [.., last] if !is_break(*last) => Some("-"),
            [_] => Some("+"),
            [.., prev, _] if is_break(*prev) => Some("+"),
            _ => None,
        };
        if let Some(ch) = chomp {
            self.indicator(ch, false, false, false);
        }
        self.put_break();
        self.whitespace = true;
        let mut breaks = true;
        for &c in &chars {
            if is_break(c) {
                if c == '\n' {
                    self.put_break();
                } else {
                    self.out.push(c);
                    self.column = 0;
                    self.indention = true;
                }
                breaks = true;
            } else {
                if breaks {
                    self.write_indent(indent);
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
    }

    fn scalar(&mut self, value: &str, style: Style, simple_key: bool, indent: usize) {
        match style {
            Style::Plain => self.plain(value, !simple_key, indent),
            Style::Single => self.single(value, !simple_key, indent),
            Style::Double => self.double(value, !simple_key, indent),
            Style::Literal => self.literal(value, indent),
        }
    }

    fn string(&mut self, s: &str, simple_key: bool, indent: usize) {
        let a = analyze(s);
        let style = select_style(requested_style(s), &a, s, simple_key);
        self.scalar(s, style, simple_key, indent);
    }

    /// Emits `v`; `parent` is the indentation of the enclosing collection (`None` at the root).
    fn node(&mut self, v: &Val, parent: Option<usize>, depth: usize) -> Result<(), BuiltinError> {
        if depth > MAX_DEPTH {
            fail!("yaml: value nested too deeply");
        }
        let child = parent.map_or(0, |p| p + 2);
        let scalar_indent = parent.map_or(2, |p| p + 2);
        match v {
            Val::Null => self.plain("null", true, scalar_indent),
            Val::Bool(b) => self.plain(if *b { "true" } else { "false" }, true, scalar_indent),
            Val::Int(i) => self.plain(&i.to_string(), true, scalar_indent),
            Val::Float(f) => self.plain(&format_float(f), true, scalar_indent),
            Val::String(s) => self.string(s, false, scalar_indent),
            Val::Bytes(b) => {
                if !self.whitespace {
                    self.put(' ');
                }
                for c in "!!binary".chars() {
                    self.put(c);
                }
                self.whitespace = false;
                self.indention = false;
                let text = base64::engine::general_purpose::STANDARD.encode(b);
                self.plain(&text, true, scalar_indent);
            }
            Val::List(items) if items.is_empty() => {
                self.indicator("[", true, true, false);
                self.indicator("]", false, false, false);
            }
            Val::Struct(fields) if fields.is_empty() => {
                self.indicator("{", true, true, false);
                self.indicator("}", false, false, false);
            }
            Val::List(items) => {
                for item in items {
                    self.write_indent(child);
                    self.indicator("-", true, false, true);
                    self.node(item, Some(child), depth + 1)?;
                }
            }
            Val::Struct(fields) => {
                for (k, v) in fields {
                    self.write_indent(child);
                    let a = analyze(k);
                    if !a.multiline && k.len() <= 128 {
                        self.string(k, true, child + 2);
                        self.indicator(":", false, false, false);
                    } else {
                        self.indicator("?", true, false, true);
                        self.string(k, false, child + 2);
                        self.write_indent(child);
                        self.indicator(":", true, false, true);
                    }
                    self.node(v, Some(child), depth + 1)?;
                }
            }
            Val::Opaque(_) => {
                return Err(BuiltinError::incomplete(
                    "cannot convert incomplete value to YAML",
                ))
            }
        }
        Ok(())
    }
}

/// The YAML document for `v`, byte-compatible with upstream's `yaml.Marshal` (see the module
/// doc for the rules), ending in a newline.
pub fn to_yaml(v: &Val) -> Result<String, BuiltinError> {
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
    };
    e.node(v, None, 0)?;
    // Document end: `write_indent` at indentation 0.
    e.write_indent(0);
    Ok(e.out)
}

builtin! {
    /// `Marshal({a: 1, b: ["x", "yes"], c: "l1\nl2"})` → `"a: 1\nb:\n  - x\n  - \"yes\"\nc: |-\n  l1\n  l2\n"`.
    fn marshal(_, "yaml.Marshal", v: &Val) {
        Ok(Val::String(to_yaml(v)?))
    }
}

builtin! {
    /// `MarshalStream([{a: 1}, {b: 2}])` → `"a: 1\n---\nb: 2\n"`.
    fn marshal_stream(_, "yaml.MarshalStream", xs: &[Val]) {
        let mut out = String::new();
        for (i, x) in xs.iter().enumerate() {
            if i > 0 {
                out.push_str("---\n");
            }
            out.push_str(&to_yaml(x)?);
        }
        Ok(Val::String(out))
    }
}

mod decode;

pub use decode::from_yaml_str;

fn text(data: Bytes<'_>) -> Result<&str, BuiltinError> {
    std::str::from_utf8(data.0).map_err(|_| BuiltinError::new("yaml: input is not valid UTF-8"))
}

builtin! {
    /// `Unmarshal("a: [1, 1.5, yes, \"x\"]\nb: ~")` → `{a: [1, 1.5, "yes", "x"], b: null}`.
    fn unmarshal(_, "yaml.Unmarshal", data: Bytes) {
        from_yaml_str(text(data)?)
    }
}

builtin! {
    /// `UnmarshalStream("a: 1\n---\nb: 2\n")` → `[{a: 1}, {b: 2}]`.
    fn unmarshal_stream(_, "yaml.UnmarshalStream", data: Bytes) {
        Ok(Val::List(decode::stream(text(data)?)?))
    }
}

fn validate_all(
    h: &mut dyn super::Host,
    data: Bytes<'_>,
    schema: &Val,
    name: &str,
) -> Result<Val, BuiltinError> {
    for v in decode::stream(text(data)?)? {
        if !h.unifies(schema, &v)? {
            fail!("{name}: value does not satisfy the schema");
        }
    }
    Ok(Val::Bool(true))
}

builtin! {
    /// `Validate("a: 1", {a: 1})` → `true`; as a validator, `yaml.Validate(schema)`. Every
    /// document of a stream must satisfy the schema.
    fn validate(h, "yaml.Validate", data: Bytes, schema: &Val) {
        validate_all(h, data, schema, "yaml.Validate")
    }
}

builtin! {
    /// `ValidatePartial("a: 1", {a: 1})` → `true`. Approximation: the host's unification check
    /// is used for both `Validate` and `ValidatePartial`.
    fn validate_partial(h, "yaml.ValidatePartial", data: Bytes, schema: &Val) {
        validate_all(h, data, schema, "yaml.ValidatePartial")
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_table, val, Rng};
    use super::*;

    fn y(v: &str) -> String {
        to_yaml(&val(v)).unwrap()
    }

    #[test]
    fn table() {
        check_table(
            P,
            &[
                (
                    r#"Marshal({a: 1, b: ["x", "yes"], c: "l1\nl2"})"#,
                    r#""a: 1\nb:\n  - x\n  - \"yes\"\nc: |-\n  l1\n  l2\n""#,
                ),
                (r#"Marshal("hello")"#, r#""hello\n""#),
                (r#"Marshal(_1)"#, "?cannot convert incomplete value"),
                (
                    r#"MarshalStream([{a: 1}, {b: 2}])"#,
                    r#""a: 1\n---\nb: 2\n""#,
                ),
                (
                    r#"Unmarshal("a: [1, 1.5, yes, \"x\"]\nb: ~")"#,
                    r#"{a: [1, 1.5, "yes", "x"], b: null}"#,
                ),
                (
                    r#"Unmarshal("a: 0x1F\nb: 0o17\nc: \"0x1F\"\nd: 1e3\ne: 1.50")"#,
                    r#"{a: 31, b: 15, c: "0x1F", d: 1e3, e: 1.5}"#,
                ),
                (
                    r#"Unmarshal("base: &b {x: 1, y: 0}\nm:\n  <<: *b\n  y: 2")"#,
                    "{base: {x: 1, y: 0}, m: {x: 1, y: 2}}",
                ),
                (
                    r#"Unmarshal("a: &a {x: 1}\nb: &b {x: 2, z: 3}\nm:\n  k: 0\n  <<: [*a, *b]")"#,
                    "{a: {x: 1}, b: {x: 2, z: 3}, m: {k: 0, x: 1, z: 3}}",
                ),
                (r#"Unmarshal("a: [")"#, "!yaml:"),
                (
                    r#"Unmarshal("a: 1\n---\nb: 2")"#,
                    "!expected a single YAML document",
                ),
                (r#"Unmarshal("a: .inf")"#, "!cannot represent"),
                (
                    r#"UnmarshalStream("a: 1\n---\nb: 2\n")"#,
                    "[{a: 1}, {b: 2}]",
                ),
                (r#"Validate("a: 1", {a: 1})"#, "true"),
                (r#"Validate("a: 2", {a: 1})"#, "!does not satisfy"),
                (r#"ValidatePartial("a: 1", {a: 1})"#, "true"),
            ],
        );
    }

    #[test]
    fn upstream_encoder_examples() {
        // From upstream's internal/encoding/yaml encode tests (values only, block style).
        assert_eq!(
            y(r#"{seq: [1, 2, 3, {a: 1, b: 2}], a: {b: {c: 3}}, b: {x: 0, y: 1, z: 2}}"#),
            "seq:\n  - 1\n  - 2\n  - 3\n  - a: 1\n    b: 2\na:\n  b:\n    c: 3\nb:\n  x: 0\n  \"y\": 1\n  z: 2\n"
        );
        assert_eq!(
            y(r#"{str: "str", dat: '\x80', nil: null, yes: true, non: false, dec: 0.3}"#),
            "str: str\ndat: !!binary gA==\nnil: null\n\"yes\": true\nnon: false\ndec: 0.3\n"
        );
        assert_eq!(
            y(
                r##"{"k\nl": 3, q: "?", r: "? q", s: "?x", c: "a:b", u: "http://x/y", h: "#cloudmon"}"##
            ),
            "? |-\n  k\n  l\n: 3\nq: '?'\nr: '? q'\ns: ?x\nc: a:b\nu: http://x/y\nh: '#cloudmon'\n"
        );
        assert_eq!(
            y(r##"{receivers: [{name: "pager", slack_configs: [{text: "{{ range .Alerts }}{{ .Annotations.description }}\n{{ end }}", channel: "#cloudmon", send_resolved: true}]}], route: {receiver: "pager", group_by: ["alertname", "cluster"]}}"##),
            "receivers:\n  - name: pager\n    slack_configs:\n      - text: |-\n          {{ range .Alerts }}{{ .Annotations.description }}\n          {{ end }}\n        channel: '#cloudmon'\n        send_resolved: true\nroute:\n  receiver: pager\n  group_by:\n    - alertname\n    - cluster\n"
        );
    }

    #[test]
    fn quoting_rules() {
        for (s, want) in [
            ("", "\"\""),
            ("1", "\"1\""),
            ("1.5", "\"1.5\""),
            ("1_000", "\"1_000\""),
            ("08", "\"08\""),
            ("0o17", "\"0o17\""),
            ("null", "\"null\""),
            ("~", "\"~\""),
            ("<<", "<<"),
            (".inf", "\".inf\""),
            ("on", "\"on\""),
            ("2006-01-02", "\"2006-01-02\""),
            ("12:30", "\"12:30\""),
            ("0x1F", "\"0x1F\""),
            ("-", "'-'"),
            ("- a", "'- a'"),
            ("a: b", "'a: b'"),
            ("a #b", "'a #b'"),
            ("a#b", "a#b"),
            (" lead", "' lead'"),
            ("trail ", "'trail '"),
            ("it's", "it's"),
            ("'q'", "'''q'''"),
            ("tab\there", "\"tab\\there\""),
            ("emoji😀", "\"emoji\\U0001F600\""),
            ("é ☺", "é ☺"),
            ("nbsp\u{a0}", "nbsp\u{a0}"),
            ("bell\u{7}", "\"bell\\a\""),
            ("del\u{7f}", "\"del\\x7F\""),
            ("plain text", "plain text"),
            ("---", "\"---\""),
            ("...", "'...'"),
            ("@x", "'@x'"),
            ("x@", "x@"),
            ("-1", "\"-1\""),
            ("+", "+"),
            ("yes please", "yes please"),
        ] {
            assert_eq!(
                y(&format!(
                    "{{k: {}}}",
                    super::super::json::to_json(&Val::String(s.into())).unwrap()
                )),
                format!("k: {want}\n"),
                "{s:?}"
            );
        }
    }

    #[test]
    fn literal_blocks() {
        assert_eq!(y(r#"{a: "x\n"}"#), "a: |\n  x\n");
        assert_eq!(y(r#"{a: "x\n\n"}"#), "a: |+\n  x\n\n");
        assert_eq!(y(r#"{a: "\n"}"#), "a: |2+\n\n");
        assert_eq!(y(r#"{a: " x\ny"}"#), "a: |2-\n   x\n  y\n");
        assert_eq!(y(r#"{a: "x\n\ny"}"#), "a: |-\n  x\n\n  y\n");
        assert_eq!(
            y(r#"{a: "trailing \nspace"}"#),
            "a: \"trailing \\nspace\"\n"
        );
        assert_eq!(y(r#"["a\nb"]"#), "- |-\n  a\n  b\n");
        assert_eq!(
            y(r#"{l: [{m: "a\nb"}]}"#),
            "l:\n  - m: |-\n      a\n      b\n"
        );
        assert_eq!(y(r#""a\nb""#), "|-\n  a\n  b\n");
    }

    #[test]
    fn layout() {
        assert_eq!(y("{}"), "{}\n");
        assert_eq!(y("[]"), "[]\n");
        assert_eq!(
            y("{a: {}, b: [], c: [[]], d: [{}]}"),
            "a: {}\nb: []\nc:\n  - []\nd:\n  - {}\n"
        );
        assert_eq!(y("[[1, 2], [3]]"), "- - 1\n  - 2\n- - 3\n");
        assert_eq!(y("[{a: 1, b: [1]}]"), "- a: 1\n  b:\n    - 1\n");
        assert_eq!(
            y("{a: -1, b: 1.0, c: 1e30, d: null}"),
            "a: -1\nb: 1.0\nc: 1E+30\nd: null\n"
        );
        assert_eq!(y("42"), "42\n");
    }

    #[test]
    fn long_strings_fold_at_80_columns() {
        let words = "word ".repeat(30);
        let s = words.trim_end();
        let out = y(&format!("{{key: \"{s}\"}}"));
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 1, "{out}");
        assert!(lines[0].starts_with("key: word"));
        assert!(lines[1].starts_with("  word"));
        // The folded text reads back as the same string.
        assert_eq!(
            from_yaml_str(&out).unwrap(),
            val(&format!("{{key: \"{s}\"}}"))
        );
        let long_key = "k".repeat(130);
        assert_eq!(
            y(&format!("{{{long_key}: 1}}")),
            format!("? {long_key}\n: 1\n")
        );
    }

    #[test]
    fn marshal_unmarshal_round_trip() {
        let mut rng = Rng(0xfeed);
        for _ in 0..300 {
            let v = rng.json_val(4);
            let text = to_yaml(&v).unwrap();
            let back = from_yaml_str(&text).unwrap_or_else(|e| panic!("{e:?}\n{v:?}\n{text}"));
            assert!(
                super::super::list::equal(&back, &v),
                "{v:?}\n{text}\n{back:?}"
            );
        }
    }
}
