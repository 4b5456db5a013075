//! Package `text/template` (upstream `pkg/text/template`): `Execute` runs a Go template over a
//! CUE value decoded the way `cue.Value.Decode` decodes into `interface{}` (structs are maps,
//! lists slices, numbers int or float64), plus `HTMLEscape` and `JSEscape`.
//!
//! Supported template language (a subset of Go's `text/template`):
//! - Text and actions `{{ ... }}` with the trim markers `{{- ` and ` -}}`; comments `{{/* */}}`.
//! - Pipelines that are a single operand: `.`, field chains `.a.b`, `$` and `$.a`, string, number
//!   and boolean literals. A missing map key prints `<no value>`, like Go.
//! - `{{if}}`/`{{else if}}`/`{{else}}`/`{{end}}`, `{{range}}` (lists, and maps in key order, with
//!   `{{else}}` for empty), and `{{with}}`; truth is Go's (`false`, `0`, `""`, empty, nil are false).
//! - Values print as Go's `fmt.Print`: maps `map[k:v ...]` with sorted keys, lists `[a b]`, floats
//!   in `%v` form (`1e+06`), null `<nil>`.
//!
//! Not supported (an error, never a wrong result): functions (`printf`, `len`, `index`, ...),
//! multi-command pipelines (`|`), variables other than `$`, `define`/`template`/`block`.

use super::args::{builtin, fail};
use super::{no_consts, Builtin, BuiltinError, Package, Val};

const P: &str = "text/template";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Execute", 2, execute),
    Builtin::f(P, "HTMLEscape", 1, html_escape),
    Builtin::f(P, "JSEscape", 1, js_escape),
];

const MAX_DEPTH: usize = 100;
const MAX_OUT: usize = 1 << 26;

#[derive(Debug)]
enum Node {
    Text(String),
    Print(String),
    If(Vec<(String, Vec<Node>)>, Vec<Node>),
    Range(String, Vec<Node>, Vec<Node>),
    With(String, Vec<Node>, Vec<Node>),
}

#[derive(Debug, PartialEq)]
enum Tok {
    Text(String),
    Action(String),
}

fn lex(src: &str) -> Result<Vec<Tok>, BuiltinError> {
    let mut toks = Vec::new();
    let mut rest = src;
    let mut trim_next = false;
    while !rest.is_empty() {
        let Some(start) = rest.find("{{") else {
            let t = if trim_next { rest.trim_start() } else { rest };
            toks.push(Tok::Text(t.to_string()));
            break;
        };
        let mut text = &rest[..start];
        if trim_next {
            text = text.trim_start();
        }
        let after = &rest[start + 2..];
        let trim_left =
            after.starts_with("- ") || after.starts_with("-\t") || after.starts_with("-\n");
        if trim_left {
            text = text.trim_end();
        }
        toks.push(Tok::Text(text.to_string()));
        let body_start = if trim_left { 2 } else { 0 };
        let Some(end) = after.find("}}") else {
            fail!("template: unclosed action");
        };
        let mut body = &after[body_start..end];
        trim_next = false;
        if body.ends_with(" -") || body.ends_with("\t-") || body.ends_with("\n-") {
            body = &body[..body.len() - 1];
            trim_next = true;
        }
        let body = body.trim();
        if !(body.starts_with("/*") && body.ends_with("*/")) {
            toks.push(Tok::Action(body.to_string()));
        }
        rest = &after[end + 2..];
    }
    Ok(toks)
}

fn parse_list(
    toks: &[Tok],
    pos: &mut usize,
    depth: usize,
) -> Result<(Vec<Node>, String), BuiltinError> {
    if depth > MAX_DEPTH {
        fail!("template: nested too deeply");
    }
    let mut nodes = Vec::new();
    while *pos < toks.len() {
        let tok = &toks[*pos];
        *pos += 1;
        match tok {
            Tok::Text(t) => {
                if !t.is_empty() {
                    nodes.push(Node::Text(t.clone()));
                }
            }
            Tok::Action(a) => {
                let (word, arg) = a
                    .split_once(char::is_whitespace)
                    .unwrap_or((a.as_str(), ""));
                let arg = arg.trim().to_string();
                match word {
                    "end" | "else" => return Ok((nodes, a.clone())),
                    "if" => {
                        let mut branches = vec![];
                        let mut cond = arg;
                        let otherwise;
                        loop {
                            let (body, stop) = parse_list(toks, pos, depth + 1)?;
                            branches.push((cond, body));
                            if stop == "end" {
                                otherwise = vec![];
                                break;
                            }
                            if let Some(c) = stop.strip_prefix("else if ") {
                                cond = c.trim().to_string();
                                continue;
                            }
                            if stop != "else" {
                                fail!("template: unexpected {{{{{stop}}}}} in if");
                            }
                            let (body, stop) = parse_list(toks, pos, depth + 1)?;
                            if stop != "end" {
                                fail!("template: expected end, found {{{{{stop}}}}}");
                            }
                            otherwise = body;
                            break;
                        }
                        nodes.push(Node::If(branches, otherwise));
                    }
                    "range" | "with" => {
                        let (body, stop) = parse_list(toks, pos, depth + 1)?;
                        let otherwise = match stop.as_str() {
                            "end" => vec![],
                            "else" => {
                                let (b, stop) = parse_list(toks, pos, depth + 1)?;
                                if stop != "end" {
                                    fail!("template: expected end, found {{{{{stop}}}}}");
                                }
                                b
                            }
                            other => fail!("template: unexpected {{{{{other}}}}} in {word}"),
                        };
                        nodes.push(if word == "range" {
                            Node::Range(arg, body, otherwise)
                        } else {
                            Node::With(arg, body, otherwise)
                        });
                    }
                    "define" | "template" | "block" => fail!("template: {word} is not supported"),
                    _ => nodes.push(Node::Print(a.clone())),
                }
            }
        }
    }
    Ok((nodes, String::new()))
}

/// A decoded value; `None` is Go's missing value (`<no value>`).
type Data<'a> = Option<&'a Val>;

fn eval_operand<'a>(
    expr: &str,
    dot: Data<'a>,
    root: Data<'a>,
) -> Result<Result<Data<'a>, Val>, BuiltinError> {
    let e = expr.trim();
    if e.contains(['|', '(', ')']) || e.split_whitespace().count() > 1 {
        fail!("template: unsupported pipeline {e:?}: functions and pipelines are not supported");
    }
    if let Some(s) = e.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        return Ok(Err(Val::String(
            super::strconv::go_unquote(&format!("\"{s}\"")).unwrap_or_default(),
        )));
    }
    match e {
        "true" => return Ok(Err(Val::Bool(true))),
        "false" => return Ok(Err(Val::Bool(false))),
        "nil" => fail!("template: nil is not a command"),
        _ => {}
    }
    if let Ok(i) = e.parse::<i64>() {
        return Ok(Err(Val::Int(i.into())));
    }
    let (mut cur, path) = if e == "." {
        return Ok(Ok(dot));
    } else if let Some(p) = e.strip_prefix('$') {
        (root, p)
    } else if e.starts_with('.') {
        (dot, e)
    } else {
        fail!("template: function {e:?} not defined");
    };
    for field in path.split('.').filter(|f| !f.is_empty()) {
        cur = match cur {
            Some(Val::Struct(fields)) => fields.iter().find(|(k, _)| k == field).map(|(_, v)| v),
            Some(Val::Null) | None => None,
            Some(other) => fail!(
                "template: can't evaluate field {field} in type {}",
                go_type(other)
            ),
        };
    }
    Ok(Ok(cur))
}

fn go_type(v: &Val) -> &'static str {
    match v {
        Val::Null => "interface {}",
        Val::Bool(_) => "bool",
        Val::Int(_) => "int",
        Val::Float(_) => "float64",
        Val::String(_) => "string",
        Val::Bytes(_) => "[]uint8",
        Val::List(_) => "[]interface {}",
        Val::Struct(_) => "map[string]interface {}",
        Val::Opaque(_) => "interface {}",
    }
}

fn truth(v: Data<'_>) -> bool {
    match v {
        None | Some(Val::Null) | Some(Val::Opaque(_)) => false,
        Some(Val::Bool(b)) => *b,
        Some(Val::Int(i)) => !num_traits::Zero::is_zero(i),
        Some(Val::Float(f)) => !num_traits::Zero::is_zero(f),
        Some(Val::String(s)) => !s.is_empty(),
        Some(Val::Bytes(b)) => !b.is_empty(),
        Some(Val::List(l)) => !l.is_empty(),
        Some(Val::Struct(f)) => !f.is_empty(),
    }
}

/// Go's `fmt.Print` of a decoded value.
fn print(out: &mut String, v: &Val) -> Result<(), BuiltinError> {
    match v {
        Val::Null => out.push_str("<nil>"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => out.push_str(&i.to_string()),
        Val::Float(f) => {
            let x: f64 = f.to_string().parse().unwrap_or(f64::NAN);
            out.push_str(&super::strconv::go_format_float(x, 'g', -1)?);
        }
        Val::String(s) => out.push_str(s),
        Val::Bytes(b) => {
            out.push('[');
            let parts: Vec<String> = b.iter().map(u8::to_string).collect();
            out.push_str(&parts.join(" "));
            out.push(']');
        }
        Val::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print(out, item)?;
            }
            out.push(']');
        }
        Val::Struct(fields) => {
            let mut sorted: Vec<&(String, Val)> = fields.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push_str("map[");
            for (i, (k, v)) in sorted.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                print(out, v)?;
            }
            out.push(']');
        }
        Val::Opaque(_) => return Err(BuiltinError::incomplete("template: non-concrete data")),
    }
    if out.len() > MAX_OUT {
        fail!("template: output too large");
    }
    Ok(())
}

fn exec(
    nodes: &[Node],
    dot: Data<'_>,
    root: Data<'_>,
    out: &mut String,
    depth: usize,
) -> Result<(), BuiltinError> {
    if depth > MAX_DEPTH {
        fail!("template: nested too deeply");
    }
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Print(e) => match eval_operand(e, dot, root)? {
                Ok(Some(v)) => print(out, v)?,
                Ok(None) => out.push_str("<no value>"),
                Err(lit) => print(out, &lit)?,
            },
            Node::If(branches, otherwise) => {
                let mut done = false;
                for (cond, body) in branches {
                    let t = match eval_operand(cond, dot, root)? {
                        Ok(v) => truth(v),
                        Err(lit) => truth(Some(&lit)),
                    };
                    if t {
                        exec(body, dot, root, out, depth + 1)?;
                        done = true;
                        break;
                    }
                }
                if !done {
                    exec(otherwise, dot, root, out, depth + 1)?;
                }
            }
            Node::Range(e, body, otherwise) => {
                let v = eval_operand(e, dot, root)?.map_err(|_| {
                    BuiltinError::new("template: range can't iterate over a literal")
                })?;
                match v {
                    Some(Val::List(items)) if !items.is_empty() => {
                        for item in items {
                            exec(body, Some(item), root, out, depth + 1)?;
                        }
                    }
                    Some(Val::Struct(fields)) if !fields.is_empty() => {
                        let mut sorted: Vec<&(String, Val)> = fields.iter().collect();
                        sorted.sort_by(|a, b| a.0.cmp(&b.0));
                        for (_, item) in sorted {
                            exec(body, Some(item), root, out, depth + 1)?;
                        }
                    }
                    Some(Val::List(_)) | Some(Val::Struct(_)) | None | Some(Val::Null) => {
                        exec(otherwise, dot, root, out, depth + 1)?
                    }
                    Some(other) => fail!("template: range can't iterate over {}", go_type(other)),
                }
            }
            Node::With(e, body, otherwise) => match eval_operand(e, dot, root)? {
                Ok(v) if truth(v) => exec(body, v, root, out, depth + 1)?,
                Err(lit) if truth(Some(&lit)) => {
                    let mut s = String::new();
                    // A literal dot: run the body against the literal.
                    let nodes: &[Node] = body;
                    exec(nodes, Some(&lit), root, &mut s, depth + 1)?;
                    out.push_str(&s);
                }
                _ => exec(otherwise, dot, root, out, depth + 1)?,
            },
        }
    }
    Ok(())
}

builtin! {
    /// `Execute("{{.s}}", {s: "myname"})` → `"myname"`.
    fn execute(_, "template.Execute", templ: &str, data: &Val) {
        let toks = lex(templ)?;
        let mut pos = 0;
        let (nodes, stop) = parse_list(&toks, &mut pos, 0)?;
        if !stop.is_empty() {
            fail!("template: unexpected {{{{{stop}}}}}");
        }
        let mut out = String::new();
        exec(&nodes, Some(data), Some(data), &mut out, 0)?;
        Ok(Val::String(out))
    }
}

builtin! {
    /// `HTMLEscape("<a href=\"x\">&'")` → `"&lt;a href=&#34;x&#34;&gt;&amp;&#39;"`.
    fn html_escape(_, "template.HTMLEscape", s: &str) {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '&' => out.push_str("&amp;"),
                '\'' => out.push_str("&#39;"),
                '"' => out.push_str("&#34;"),
                '\0' => out.push('\u{FFFD}'),
                c => out.push(c),
            }
        }
        Ok(Val::String(out))
    }
}

builtin! {
    /// `JSEscape("a'b<c")` → `"a\\'b\\u003Cc"`.
    fn js_escape(_, "template.JSEscape", s: &str) {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                '"' => out.push_str("\\\""),
                '<' => out.push_str("\\u003C"),
                '>' => out.push_str("\\u003E"),
                '&' => out.push_str("\\u0026"),
                '=' => out.push_str("\\u003D"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 || !super::strconv::is_printable(c) => {
                    out.push_str(&format!("\\u{:04X}", c as u32));
                }
                c => out.push(c),
            }
        }
        Ok(Val::String(out))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "text/template",
            &[
                (r#"Execute("{{.s}}", {s: "myname"})"#, r#""myname""#),
                (
                    r#"Execute("a {{- .x -}} b {{.missing}}", {x: 1})"#,
                    r#""a1b <no value>""#,
                ),
                (
                    r#"Execute("{{range .l}}[{{.}}]{{else}}none{{end}}", {l: [1, 2.5, "x"]})"#,
                    r#""[1][2.5][x]""#,
                ),
                (
                    r#"Execute("{{range .l}}x{{else}}none{{end}}", {l: []})"#,
                    r#""none""#,
                ),
                (
                    r#"Execute("{{if .a}}A{{else if .b}}B{{else}}C{{end}}", {a: false, b: "y"})"#,
                    r#""B""#,
                ),
                (
                    r#"Execute("{{with .m}}{{.k}}{{end}} {{.m}} {{$.n}}", {m: {k: "v", a: [1]}, n: null})"#,
                    r#""v map[a:[1] k:v] <nil>""#,
                ),
                (
                    r#"Execute("{{/* note */}}{{.f}}", {f: 1000000.0})"#,
                    r#""1e+06""#,
                ),
                (
                    r#"Execute("{{printf \"%d\" .x}}", {x: 1})"#,
                    "!not supported",
                ),
                (
                    r#"Execute("{{.a.b}}", {a: 1})"#,
                    "!can't evaluate field b in type int",
                ),
                (r#"Execute("{{if .a}}", {a: 1})"#, "!"),
                (r#"Execute("{{.a", {a: 1})"#, "!unclosed action"),
                (
                    r#"HTMLEscape("<a href=\"x\">&'")"#,
                    r#""&lt;a href=&#34;x&#34;&gt;&amp;&#39;""#,
                ),
                (r#"JSEscape("a'b<c")"#, r#""a\\'b\\u003Cc""#),
            ],
        );
    }
}
