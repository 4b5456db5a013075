//! Parser tests: per-construct dumps, recovery cases and the conformance corpus.

use super::*;
use crate::ast::*;

/// A compact S-expression-like rendering of a tree.
pub(crate) fn dump_expr(e: &Expr) -> String {
    match e {
        Expr::Top(_) => "_".into(),
        Expr::Bottom(_) => "_|_".into(),
        Expr::Null(_) => "null".into(),
        Expr::Bool(b, _) => b.to_string(),
        Expr::Int(i, _) => i.to_string(),
        Expr::Float(f, _) => format!("{f}f"),
        Expr::Str { parts, bytes, .. } => dump_str(parts, *bytes),
        Expr::Ident(i) => i.name.clone(),
        Expr::Struct(s) => dump_struct(s),
        Expr::List { elems, .. } => {
            let items: Vec<String> = elems
                .iter()
                .map(|el| match el {
                    ListElem::Expr(e) => dump_expr(e),
                    ListElem::Ellipsis { expr, .. } => {
                        format!("...{}", expr.as_ref().map(dump_expr).unwrap_or_default())
                    }
                    ListElem::Comprehension(c) => dump_comp(c),
                })
                .collect();
            format!("[{}]", items.join(", "))
        }
        Expr::Selector { expr, sel, .. } => format!("(. {} {})", dump_expr(expr), sel.name),
        Expr::Index { expr, index, .. } => {
            format!("(idx {} {})", dump_expr(expr), dump_expr(index))
        }
        Expr::Slice { expr, lo, hi, .. } => format!(
            "(slice {} {} {})",
            dump_expr(expr),
            lo.as_ref().map_or("-".into(), |e| dump_expr(e)),
            hi.as_ref().map_or("-".into(), |e| dump_expr(e))
        ),
        Expr::Call { func, args, .. } => {
            let mut s = format!("(call {}", dump_expr(func));
            for a in args {
                s.push(' ');
                s.push_str(&dump_expr(a));
            }
            s + ")"
        }
        Expr::Unary { op, expr, .. } => format!("({} {})", unary_sym(*op), dump_expr(expr)),
        Expr::Binary { op, lhs, rhs, .. } => {
            format!(
                "({} {} {})",
                binary_sym(*op),
                dump_expr(lhs),
                dump_expr(rhs)
            )
        }
        Expr::Paren(e, _) => format!("(paren {})", dump_expr(e)),
        Expr::Bad(_) => "BAD".into(),
    }
}

fn unary_sym(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-",
        UnaryOp::Pos => "+",
        UnaryOp::Not => "!",
        UnaryOp::Default => "*",
        UnaryOp::Lt => "<",
        UnaryOp::Le => "<=",
        UnaryOp::Gt => ">",
        UnaryOp::Ge => ">=",
        UnaryOp::Ne => "!=",
        UnaryOp::Eq => "==",
        UnaryOp::Match => "=~",
        UnaryOp::NotMatch => "!~",
    }
}

fn binary_sym(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Disjunction => "|",
        BinaryOp::Unification => "&",
        BinaryOp::Or => "||",
        BinaryOp::And => "&&",
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        BinaryOp::Match => "=~",
        BinaryOp::NotMatch => "!~",
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
    }
}

fn dump_str(parts: &[StrPart], bytes: bool) -> String {
    let one = |p: &StrPart| match p {
        StrPart::Text(t) => format!("{t:?}"),
        StrPart::Bytes(b) => format!("b{:?}", String::from_utf8_lossy(b)),
        StrPart::Interp(e) => format!("\\({})", dump_expr(e)),
    };
    match parts {
        [p @ (StrPart::Text(_) | StrPart::Bytes(_))] => one(p),
        [] if bytes => "b\"\"".into(),
        [] => "\"\"".into(),
        _ => format!(
            "(interp {})",
            parts.iter().map(one).collect::<Vec<_>>().join(" ")
        ),
    }
}

fn dump_label(l: &Label) -> String {
    match l {
        Label::Ident(i) => i.name.clone(),
        Label::String { parts, .. } => dump_str(parts, false),
        Label::Dynamic { expr, .. } => format!("({})", dump_expr(expr)),
        Label::Pattern { alias, expr, .. } => format!(
            "[{}{}]",
            alias
                .as_ref()
                .map_or(String::new(), |a| format!("{}=", a.name)),
            dump_expr(expr)
        ),
    }
}

fn dump_attr(a: &Attribute) -> String {
    format!("@{}({})", a.name, a.body)
}

pub(crate) fn dump_decl(d: &Decl) -> String {
    match d {
        Decl::Field(f) => {
            let mut s = String::new();
            if let Some(a) = &f.label_alias {
                s.push_str(&a.name);
                s.push('=');
            }
            s.push_str(&dump_label(&f.label));
            s.push_str(match f.constraint {
                FieldConstraint::Regular => "",
                FieldConstraint::Optional => "?",
                FieldConstraint::Required => "!",
            });
            s.push_str(": ");
            if let Some(a) = &f.value_alias {
                s.push_str(&a.name);
                s.push('=');
            }
            s.push_str(&dump_expr(&f.value));
            for a in &f.attrs {
                s.push(' ');
                s.push_str(&dump_attr(a));
            }
            s
        }
        Decl::Embed(e) => dump_expr(e),
        Decl::Let(l) => format!("let {} = {}", l.name.name, dump_expr(&l.expr)),
        Decl::Ellipsis { expr, .. } => {
            format!("...{}", expr.as_ref().map(dump_expr).unwrap_or_default())
        }
        Decl::Comprehension(c) => dump_comp(c),
        Decl::Attribute(a) => dump_attr(a),
        Decl::Bad(_) => "BAD".into(),
    }
}

fn dump_comp(c: &Comprehension) -> String {
    let mut s = String::new();
    for cl in &c.clauses {
        match cl {
            Clause::For {
                key, value, source, ..
            } => {
                s.push_str("(for ");
                if let Some(k) = key {
                    s.push_str(&k.name);
                    s.push(' ');
                }
                s.push_str(&format!("{} {})", value.name, dump_expr(source)));
            }
            Clause::If { cond, .. } => s.push_str(&format!("(if {})", dump_expr(cond))),
            Clause::Let(l) => s.push_str(&format!("(let {} {})", l.name.name, dump_expr(&l.expr))),
        }
    }
    s + &dump_struct(&c.body)
}

fn dump_struct(s: &StructLit) -> String {
    let decls: Vec<String> = s.decls.iter().map(dump_decl).collect();
    if s.shorthand {
        format!("{{:{}}}", decls.join(", "))
    } else {
        format!("{{{}}}", decls.join(", "))
    }
}

pub(crate) fn dump_file(f: &File) -> String {
    let mut out = Vec::new();
    for a in &f.attrs {
        out.push(dump_attr(a));
    }
    if let Some(p) = &f.package {
        out.push(format!("package {}", p.name));
    }
    for i in &f.imports {
        out.push(format!(
            "import {}{:?}",
            i.alias
                .as_ref()
                .map_or(String::new(), |a| format!("{} ", a.name)),
            i.path
        ));
    }
    for d in &f.decls {
        out.push(dump_decl(d));
    }
    out.join("; ")
}

fn parse_ok(src: &str) -> String {
    let (f, errs) = parse_file(FileId(0), src);
    assert!(errs.is_empty(), "unexpected errors for {src:?}: {errs:?}");
    dump_file(&f)
}

fn expr_ok(src: &str) -> String {
    let (e, errs) = parse_expr(FileId(0), src);
    assert!(errs.is_empty(), "unexpected errors for {src:?}: {errs:?}");
    dump_expr(&e)
}

/// Per-construct cases: source → dump of the whole file.
#[test]
fn constructs() {
    let cases: &[(&str, &str)] = &[
        ("a: 1", "a: 1"),
        ("a: 1, b: 2", "a: 1; b: 2"),
        ("a: 1\nb: 2\n", "a: 1; b: 2"),
        ("#D: {x: int}", "#D: {x: int}"),
        ("_h: 1\n_#hd: 2\n$v: 3", "_h: 1; _#hd: 2; $v: 3"),
        ("\"a-b\": 1", "\"a-b\": 1"),
        ("a?: 1\nb!: 2", "a?: 1; b!: 2"),
        ("a: b: c: 1", "a: {:b: {:c: 1}}"),
        ("a: b?: 1", "a: {:b?: 1}"),
        ("[string]: int", "[string]: int"),
        ("[X=string]: {name: X}", "[X=string]: {name: X}"),
        ("a: [=~\"^x\"]: 1", "a: {:[(=~ \"^x\")]: 1}"),
        ("(k): 1", "(k): 1"),
        ("\"\\(k)x\": 1", "(interp \\(k) \"x\"): 1"),
        ("X=a: 1", "X=a: 1"),
        ("a: X=b", "a: X=b"),
        ("a: X=b: 1", "a: {:X=b: 1}"),
        ("let x = 1\ny: x", "let x = 1; y: x"),
        (
            "if: 1\nfor: 2\nlet: 3\nin: 4",
            "if: 1; for: 2; let: 3; in: 4",
        ),
        ("package: 1\nimport: 2", "package: 1; import: 2"),
        ("true: 1\nnull: 2", "true: 1; null: 2"),
        ("for k, v in x {(k): v}", "(for k v x){(k): v}"),
        (
            "for v in x if v > 1 let y = v {a: y}",
            "(for v x)(if (> v 1))(let y v){a: y}",
        ),
        ("if a {b: 1}", "(if a){b: 1}"),
        ("if !a {b: 1}", "(if (! a)){b: 1}"),
        ("a: [for x in y {x}]", "a: [(for x y){x}]"),
        ("a: [if c {1}, 2]", "a: [(if c){1}, 2]"),
        ("{a: 1}\nb: 2", "{a: 1}; b: 2"),
        ("a: {...}\nb: {...int}", "a: {...}; b: {...int}"),
        ("a: [...]\nb: [1, ...int]", "a: [...]; b: [1, ...int]"),
        ("a: 1 @json(\"x,omitempty\")", "a: 1 @json(\"x,omitempty\")"),
        ("@if(foo)\npackage p\na: 1", "@if(foo); package p; a: 1"),
        ("a: {\n@decl(x)\nb: 1\n}", "a: {@decl(x), b: 1}"),
        (
            "package x\nimport \"strings\"",
            "package x; import \"strings\"",
        ),
        (
            "package x\nimport (\n\t\"strings\"\n\tj \"encoding/json\"\n)\na: 1",
            "package x; import \"strings\"; import j \"encoding/json\"; a: 1",
        ),
        (
            "import s \"strings\", a: s.x",
            "import s \"strings\"; a: (. s x)",
        ),
        ("a: [string]: [int]: 1", "a: {:[string]: {:[int]: 1}}"),
        ("[a, b]\n[1][0]", "[a, b]; (idx [1] 0)"),
        ("a: [1, 2] | *[3]", "a: (| [1, 2] (* [3]))"),
        ("a: 1\n\n// comment\nb: 2 // trailing\n", "a: 1; b: 2"),
        ("a: b.c.\"d-e\".#F", "a: (. (. (. b c) d-e) #F)"),
        ("a: [\n1\n2\n]", "a: [1, 2]"),
        ("a: {b: 1, c: 2,}", "a: {b: 1, c: 2}"),
        ("a!: string\nb?: X=int", "a!: string; b?: X=int"),
        ("x: for: 1", "x: {:for: 1}"),
        ("if x\n{a: 1}", "(if x){a: 1}"),
        ("for x in y\nif x {a: 1}", "(for x y)(if x){a: 1}"),
        ("for, if", "for; if"),
        ("{for}", "{for}"),
        ("package _\na: 1", "package _; a: 1"),
        (
            "package p\n@attr(1)\nimport \"s\"\na: 1",
            "package p; import \"s\"; @attr(1); a: 1",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(parse_ok(src), *want, "source: {src:?}");
    }
}

#[test]
fn expressions() {
    let cases: &[(&str, &str)] = &[
        ("a | b & c", "(| a (& b c))"),
        ("a & b || c", "(& a (|| b c))"),
        ("a || b && c", "(|| a (&& b c))"),
        ("a && b == c", "(&& a (== b c))"),
        ("a == b + c", "(== a (+ b c))"),
        ("a + b * c", "(+ a (* b c))"),
        ("a - b - c", "(- (- a b) c)"),
        ("a / b * c", "(* (/ a b) c)"),
        ("-a + b", "(+ (- a) b)"),
        ("*1 | 2", "(| (* 1) 2)"),
        (">=1 & <=5", "(& (>= 1) (<= 5))"),
        (
            "!=\"\" & =~\"a\" & !~\"b\"",
            "(& (& (!= \"\") (=~ \"a\")) (!~ \"b\"))",
        ),
        ("a =~ b", "(=~ a b)"),
        ("a < b", "(< a b)"),
        (
            "a div b * c + d mod e",
            "(+ (* (call div a b) c) (call mod d e))",
        ),
        ("{#: 1}", "{#: 1}"),
        ("!a", "(! a)"),
        ("--1", "(- (- 1))"),
        ("f(a, b)", "(call f a b)"),
        ("f()", "(call f)"),
        ("f(a,)", "(call f a)"),
        ("a[1]", "(idx a 1)"),
        ("a[1:2]", "(slice a 1 2)"),
        ("a[:2]", "(slice a - 2)"),
        ("a[1:]", "(slice a 1 -)"),
        ("a[:]", "(slice a - -)"),
        ("(a | b).c", "(. (paren (| a b)) c)"),
        (
            "strings.ToUpper(x)[0]",
            "(idx (call (. strings ToUpper) x) 0)",
        ),
        ("_", "_"),
        ("_|_", "_|_"),
        ("null", "null"),
        ("true", "true"),
        ("1Ki", "1024"),
        ("1.5K", "1500"),
        (".5", "0.5f"),
        ("1e3", "1000f"),
        ("0x10", "16"),
        ("1_000_000", "1000000"),
        ("{a: 1}.a", "(. {a: 1} a)"),
        ("[1, 2][0]", "(idx [1, 2] 0)"),
        ("\"a\\nb\"", "\"a\\nb\""),
        ("'a\\x00'", "b\"a\\0\""),
        ("#\"a\\nb\"#", "\"a\\\\nb\""),
        ("##\"a\"#b\"##", "\"a\\\"#b\""),
        ("#\"x\\#(y)\"#", "(interp \"x\" \\(y))"),
        ("#\"x\\(y)\"#", "\"x\\\\(y)\""),
        ("\"a\\(b)c\\(d)\"", "(interp \"a\" \\(b) \"c\" \\(d))"),
        ("\"\\(\"in\\(x)\")\"", "(interp \\((interp \"in\" \\(x))))"),
        ("\"\\(a + (b))\"", "(interp \\((+ a (paren b))))"),
        ("\"\"\"\n  a\n    b\n  \"\"\"", "\"a\\n  b\""),
        ("'''\n  a\n  '''", "b\"a\""),
        (
            "\"\"\"\n  x\\(y)z\n  w\n  \"\"\"",
            "(interp \"x\" \\(y) \"z\\nw\")",
        ),
        ("\"\\u00e9\\U0001F600\"", "\"é😀\""),
    ];
    for (src, want) in cases {
        assert_eq!(expr_ok(src), *want, "source: {src:?}");
    }
}

#[test]
fn spans_cover_constructs() {
    let src = "a: b: 1 + 2\nc: \"x\"";
    let (f, errs) = parse_file(FileId(3), src);
    assert!(errs.is_empty());
    let Decl::Field(a) = &f.decls[0] else {
        panic!("field expected")
    };
    assert_eq!((a.span.start, a.span.end), (0, 11));
    assert_eq!(a.span.file, FileId(3));
    let Expr::Struct(s) = &a.value else {
        panic!("struct expected")
    };
    assert!(s.shorthand);
    assert_eq!((s.span.start, s.span.end), (3, 11));
    let Decl::Field(c) = &f.decls[1] else {
        panic!("field expected")
    };
    assert_eq!((c.value.span().start, c.value.span().end), (15, 18));
}

#[test]
fn import_spans_point_at_path() {
    let src = "package p\nimport x \"a.com/b@v1:c\"";
    let (f, errs) = parse_file(FileId(0), src);
    assert!(errs.is_empty());
    let i = &f.imports[0];
    assert_eq!(i.path, "a.com/b@v1:c");
    assert_eq!(
        &src[i.path_span.start as usize..i.path_span.end as usize],
        "\"a.com/b@v1:c\""
    );
    assert_eq!(i.alias.as_ref().map(|a| a.name.as_str()), Some("x"));
}

/// `parse_err! { name, source, expected message fragment }`: the source must produce an error
/// containing the fragment, and parsing must still return a tree.
macro_rules! parse_err {
    ($($name:ident, $src:expr, $msg:expr);* $(;)?) => {
        $(
            #[test]
            fn $name() {
                let (_f, errs) = parse_file(FileId(0), $src);
                assert!(
                    errs.iter().any(|e| e.message.contains($msg)),
                    "expected an error containing {:?} for {:?}, got {:?}",
                    $msg, $src, errs
                );
            }
        )*
    };
}

parse_err! {
    unclosed_struct, "a: {b: 1", "expected '}', found EOF";
    unclosed_list, "a: [1, 2", "expected ']'";
    unclosed_paren, "a: (1 + 2", "expected ')'";
    missing_comma_struct, "a: {b: 1 c: 2}", "missing ',' in struct literal";
    missing_comma_list, "a: [1 2]", "missing ',' in list literal";
    illegal_char, "a: 1 ^ 2", "illegal character";
    unterminated_string, "a: \"abc", "string literal not terminated";
    bad_escape, "a: \"\\q\"", "unknown escape sequence";
    missing_value, "a: ", "expected operand, found EOF";
    invalid_label, "a.b: 1", "invalid label";
    number_label, "1: 2", "invalid label";
    missing_in, "for x y {}", "expected 'in'";
    comprehension_no_body, "for x in y", "expected '{'";
    bad_interp, "a: \"\\(1 2)\"", "expected ')' for string interpolation";
    multiline_bad_close, "a: \"\"\"\n  x\"\"\"", "closing quote of multiline string";
    multiline_bad_indent, "a: \"\"\"\n  x\n y\n  \"\"\"", "invalid whitespace";
    multiline_no_newline, "a: \"\"\"x\n\"\"\"", "expected newline after multiline quote";
    stray_close, "a: 1\n}\nb: 2", "unexpected '}'";
    hex_in_string, "a: \"\\x41\"", "only allowed in bytes";
    bad_hex, "a: 0x", "illegal hexadecimal number";
    bad_exponent, "a: 1e", "exponent has no digits";
    alias_on_embed, "X=1", "old-style alias";
    unary_eq, "a: ==1", "expected operand";
    ellipsis_not_last, "a: [..., 1]", "expected ']'";
    pattern_two_elems, "[a, b]: 1", "square bracket must have exactly one element";
    reserved_ident, "__x: 1", "identifiers starting with '__' are reserved";
    attr_unclosed, "a: 1 @x(", "attribute missing ')'";
    selector_missing, "a: b.", "expected selector";
    number_selector, "x: a.5", "expected selector, found 5";
    import_no_path, "import x", "expected import path string";
}

#[test]
fn recovery_keeps_later_fields() {
    let (f, errs) = parse_file(FileId(0), "a: {b: 1 c: 2}\nd: 3\ne: )\nf: 4");
    assert!(!errs.is_empty());
    let names: Vec<String> = f
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Field(Field {
                label: Label::Ident(i),
                ..
            }) => Some(i.name.clone()),
            _ => None,
        })
        .collect();
    assert!(names.contains(&"d".to_string()), "{names:?} / {errs:?}");
    assert!(names.contains(&"f".to_string()), "{names:?} / {errs:?}");
}

#[test]
fn deep_nesting_is_an_error_not_an_overflow() {
    for open in ["[", "{a: ", "(", "-", "\"\\("] {
        let src = open.repeat(100_000);
        let handle = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(move || parse_file(FileId(0), &src).1)
            .unwrap();
        let errs = handle.join().unwrap();
        assert!(
            errs.iter().any(|e| e.message.contains("nested too deeply")),
            "{open}: {:?}",
            errs.first()
        );
    }
}

#[test]
fn nesting_below_the_limit_parses() {
    let n = 500;
    let src = format!("a: {}1{}", "[".repeat(n), "]".repeat(n));
    let (_f, errs) = parse_file(FileId(0), &src);
    assert!(errs.is_empty(), "{:?}", errs.first());
}

#[test]
fn garbage_terminates() {
    let inputs = [
        "}}}]]])))",
        ":::",
        "\"\\(",
        "\"\\(\"\\(\"\\(",
        "a: \"\\(}\"",
        "[[[[:",
        "@@@",
        "for for for",
        "if if {",
        "import (",
        "package",
        "#\"",
        "'''",
        "a: [for]",
        ")\"",
        "\"\\()\"",
        "x: \"\\(\n)\"",
    ];
    for src in inputs {
        let (_f, _errs) = parse_file(FileId(0), src);
        let (_e, _errs) = parse_expr(FileId(0), src);
    }
}

/// Parses every `.cue` file of the conformance corpus.
#[test]
fn conformance_corpus_parses() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/conformance/cases/public");
    let root = if root.exists() {
        root
    } else {
        std::path::Path::new("/work/shared/conformance/cases/public").to_path_buf()
    };
    if !root.exists() {
        eprintln!("!!!!! corpus absent: skipped ({}) !!!!!", root.display());
        return;
    }
    let mut files = Vec::new();
    collect_cue_files(&root, &mut files);
    files.sort();
    let mut clean = 0usize;
    let mut total = 0usize;
    let mut syntax_cases_failing = 0usize;
    let mut failures = Vec::new();
    for path in &files {
        let src = std::fs::read_to_string(path).unwrap();
        let (_f, errs) = parse_file(FileId(0), &src);
        // The case directory holds expect.err when the export must fail.
        let case_dir = case_dir_of(&root, path);
        let expect_err = std::fs::read_to_string(case_dir.join("expect.err")).ok();
        let meta = std::fs::read_to_string(case_dir.join("meta.json")).unwrap_or_default();
        let may_fail = expect_err.is_some()
            && (meta.contains("syntax")
                || meta.contains("parse")
                || expect_err.as_deref().is_some_and(|e| {
                    e.contains("expected")
                        || e.contains("illegal")
                        || e.contains("missing")
                        || e.contains("syntax")
                        || e.contains("invalid")
                        || e.contains("string literal")
                        || e.contains("escape")
                        || e.contains("not terminated")
                }));
        if errs.is_empty() {
            clean += 1;
            total += 1;
        } else if may_fail {
            syntax_cases_failing += 1;
        } else {
            total += 1;
            failures.push(format!(
                "{}: {}",
                path.strip_prefix(&root).unwrap_or(path).display(),
                errs.iter()
                    .take(3)
                    .map(|e| format!("@{} {}", e.span.start, e.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    eprintln!(
        "corpus: {} files; {clean}/{total} parse cleanly; {syntax_cases_failing} error-expected cases with parse errors",
        files.len()
    );
    for f in &failures {
        eprintln!("  FAIL {f}");
    }
    assert!(total > 0);
    let rate = clean as f64 / total as f64;
    assert!(
        rate >= 0.98,
        "parse rate {rate:.3} < 0.98; failures:\n{}",
        failures.join("\n")
    );
}

fn collect_cue_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_cue_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "cue") {
            out.push(p);
        }
    }
}

fn case_dir_of(root: &std::path::Path, path: &std::path::Path) -> std::path::PathBuf {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let first = rel.components().next().map(|c| c.as_os_str().to_owned());
    match first {
        Some(c) => root.join(c),
        None => root.to_path_buf(),
    }
}

/// Inputs nested past [`MAX_DEPTH`] stay within an 8 MiB stack (a main thread's) in debug builds,
/// where a nesting level costs about 3.5 KiB of stack (much less in release builds).
#[test]
fn deep_nesting_fits_a_small_stack() {
    for (open, close) in [
        ("[", "]"),
        ("{a: ", "}"),
        ("(", ")"),
        ("\"\\(", ")\""),
        ("a: ", ""),
    ] {
        let src = format!("x: {}1{}", open.repeat(3000), close.repeat(3000));
        let n = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(move || parse_file(FileId(0), &src).1.len())
            .unwrap()
            .join()
            .unwrap();
        assert!(n > 0 || open == "a: ", "{open}");
    }
}

#[test]
fn string_forms() {
    let cases: &[(&str, &str)] = &[
        ("#\"\"\"\n  a\\(b)\n  \"\"\"#", r#""a\\(b)""#),
        ("'''\n  a\\(b)\\x41\n  '''", r#"(interp b"a" \(b) b"A")"#),
        ("\"\"\"\n\t\ta\n\n\t\tb\n\t\t\"\"\"", r#""a\n\nb""#),
        (r#""a\\b""#, r#""a\\b""#),
        (r#""""#, r#""""#),
        (r#""\(a)""#, r#"(interp \(a))"#),
        (r#""x\(a)""#, r#"(interp "x" \(a))"#),
        ("1.5Mi", "1572864"),
        ("0X1f", "31"),
        ("1e-2", "0.01f"),
    ];
    for (src, want) in cases {
        assert_eq!(expr_ok(src), *want, "source: {src:?}");
    }
}

/// Shapes taken from the OPM feature inventory (docs/design/render.md §3).
#[test]
fn opm_shapes() {
    let cases: &[(&str, &str)] = &[
        (
            r#"matchLabels: "core.opmodel.dev/workload-type"!: "stateless" | "stateful""#,
            r#"matchLabels: {:"core.opmodel.dev/workload-type"!: (| "stateless" "stateful")}"#,
        ),
        (
            "(v.$secretName): (v.$dataKey): v",
            "((. v $secretName)): {:((. v $dataKey)): v}",
        ),
        (
            "_prefix=#instancePrefix?: string",
            "_prefix=#instancePrefix?: string",
        ),
        ("x: [if c {a}, b][0]", "x: (idx [(if c){a}, b] 0)"),
        (
            "if s.scaling != _|_ if s.scaling.auto == _|_ {a: 1}",
            "(if (!= (. s scaling) _|_))(if (== (. (. s scaling) auto) _|_)){a: 1}",
        ),
        (
            "output: [for _, cm in _configMaps let _n = \"x\" {name: _n}]",
            "output: [(for _ cm _configMaps)(let _n \"x\"){name: _n}]",
        ),
        (
            "ports?: [portName=string]: #PortSchema & {name: portName}",
            "ports?: {:[portName=string]: (& #PortSchema {name: portName})}",
        ),
        (
            "port: int & >0 & <=65535 | *8080",
            "port: (| (& (& int (> 0)) (<= 65535)) (* 8080))",
        ),
        (
            "r: =~#\"^([0-9]+(\\.[0-9]+)?|[0-9]+m)$\"#",
            r#"r: (=~ "^([0-9]+(\\.[0-9]+)?|[0-9]+m)$")"#,
        ),
        (
            "a: matchN(1, [{x!: _}, {y!: _}])",
            "a: (call matchN 1 [{x!: _}, {y!: _}])",
        ),
        (
            "h: sha256.Sum256(s)[:5]",
            "h: (slice (call (. sha256 Sum256) s) - 5)",
        ),
        (
            "spec: close({_allFields})",
            "spec: (call close {_allFields})",
        ),
        (
            "for k, v in m {(k): \"\\(v)\"}",
            "(for k v m){(k): (interp \\(v))}",
        ),
        ("X=\"in\": string", "X=\"in\": string"),
    ];
    for (src, want) in cases {
        assert_eq!(parse_ok(src), *want, "source: {src:?}");
    }
}

#[test]
fn fuzz_regression_scanner_escape_mid_char() {
    // Found by the eval fuzz target: the scanner sliced the source inside a multi-byte character.
    let data = include_bytes!("../../fuzz/regressions/eval/scanner_escape_mid_char.cue");
    let src = String::from_utf8_lossy(data);
    let (_, errs) = crate::parser::parse_file(crate::source::FileId(0), &src);
    assert!(!errs.is_empty());
}

#[test]
fn attribute_string_ending_in_a_backslash_or_escaping_a_multibyte_char() {
    // Unterminated: an error, not a slice past the end or inside a character.
    for src in ["x: 1 @a(\"\\", "@e(\"\\\u{fffd}\u{fffd}\\"] {
        let (_, errs) = crate::parser::parse_file(crate::source::FileId(0), src);
        assert!(
            errs.iter()
                .any(|e| e.message.contains("not terminated") || e.message.contains("missing")),
            "{src:?}: {errs:?}"
        );
    }
    let (f, errs) =
        crate::parser::parse_file(crate::source::FileId(0), "x: 1 @a('\\\u{e9}')\ny: 2");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(f.decls.len(), 2);
}
