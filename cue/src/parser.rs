//! The CUE parser (`doc/ref/spec.md`, "Structs" through "Modules, instances, and packages";
//! upstream `cue/parser`): a hand-written recursive-descent parser over [`Scanner`] tokens.
//!
//! Rules it implements:
//! - A file is: attributes, an optional `package name`, `import` declarations (single or
//!   grouped, with optional alias), then declarations. `package` and `import` are keywords only
//!   in that preamble; `for`, `if`, `let` start a comprehension or let clause unless they are a
//!   field label (`if: 1`, `let?: 2`).
//! - Declarations are separated by commas, written or inserted at line ends.
//! - A field is `label: value`, with `?`/`!` markers, label aliases `X=label:`, value aliases
//!   `label: X=value`, pattern constraints `[expr]:` / `[X=expr]:`, dynamic labels `(expr):` and
//!   quoted (possibly interpolated) labels. `a: b: v` is desugared into nested single-field
//!   structs marked [`StructLit::shorthand`].
//! - Binary precedence, lowest first: `|`, `&`, `||`, `&&`, comparisons, `+ -`, `* /`; all
//!   left-associative. Unary operators (`- + ! *` and the comparators used as bounds) bind tighter.
//!   The integer operators `div mod quo rem` (precedence of `*`, as upstream's scanner) become
//!   calls of the predeclared functions of the same name.
//! - Parsing never fails: errors are collected with their span, the parser recovers at the next
//!   comma, newline or closing bracket, and a tree is always returned ([`Expr::Bad`],
//!   [`Decl::Bad`] mark the holes). Nesting deeper than [`MAX_DEPTH`] is an error, never a stack
//!   overflow, and every loop consumes input, so parsing always terminates.

pub(crate) mod literal;

use std::collections::VecDeque;

pub use crate::ast::ParseError;
use crate::ast::{
    Attribute, BinaryOp, Clause, Comprehension, Decl, Expr, Field, FieldConstraint, File, Ident,
    ImportSpec, Label, LetClause, ListElem, StrPart, StructLit, UnaryOp,
};
use crate::scanner::Scanner;
use crate::source::{FileId, Span};
use crate::token::{Token, TokenKind as T};
use literal::{decode_number, decode_segments, segment_content, Number, SegKind, StrShape};

/// Maximum nesting of expressions (brackets, braces, parentheses, unary operators).
pub const MAX_DEPTH: u32 = 1000;

/// At most this many errors are reported per file; the rest are dropped.
const MAX_ERRORS: usize = 100;

/// Parses one source file.
pub fn parse_file(file: FileId, src: &str) -> (File, Vec<ParseError>) {
    let mut p = Parser::new(file, src);
    let f = p.file();
    (f, p.finish())
}

/// Parses a single expression (the whole input must be one expression).
pub fn parse_expr(file: FileId, src: &str) -> (Expr, Vec<ParseError>) {
    let mut p = Parser::new(file, src);
    let e = p.expr();
    while p.tok.kind == T::Comma && p.tok.inserted {
        p.bump();
    }
    if p.tok.kind != T::Eof {
        p.error_expected("end of expression");
    }
    (e, p.finish())
}

/// What a label-or-value position held: the optional `X=` alias and the expression or pattern.
enum Head {
    /// An expression (possibly convertible to a label).
    Expr(Expr),
    /// `[alias=expr]` directly followed by a field marker: a pattern label.
    Pattern(Label),
}

struct Parser<'a> {
    sc: Scanner<'a>,
    src: &'a str,
    file: FileId,
    tok: Token,
    ahead: VecDeque<Token>,
    /// End offset of the last consumed token.
    prev_end: u32,
    /// Number of tokens consumed so far (progress checks).
    consumed: u64,
    errors: Vec<ParseError>,
    depth: u32,
    depth_reported: bool,
}

fn binary_op(k: T) -> Option<(BinaryOp, u8)> {
    Some(match k {
        T::Or => (BinaryOp::Disjunction, 1),
        T::And => (BinaryOp::Unification, 2),
        T::Lor => (BinaryOp::Or, 3),
        T::Land => (BinaryOp::And, 4),
        T::Eql => (BinaryOp::Eq, 5),
        T::Neq => (BinaryOp::Ne, 5),
        T::Lss => (BinaryOp::Lt, 5),
        T::Leq => (BinaryOp::Le, 5),
        T::Gtr => (BinaryOp::Gt, 5),
        T::Geq => (BinaryOp::Ge, 5),
        T::Mat => (BinaryOp::Match, 5),
        T::Nmat => (BinaryOp::NotMatch, 5),
        T::Add => (BinaryOp::Add, 6),
        T::Sub => (BinaryOp::Sub, 6),
        T::Mul => (BinaryOp::Mul, 7),
        T::Quo => (BinaryOp::Div, 7),
        _ => return None,
    })
}

fn unary_op(k: T) -> Option<UnaryOp> {
    Some(match k {
        T::Sub => UnaryOp::Neg,
        T::Add => UnaryOp::Pos,
        T::Not => UnaryOp::Not,
        T::Mul => UnaryOp::Default,
        T::Lss => UnaryOp::Lt,
        T::Leq => UnaryOp::Le,
        T::Gtr => UnaryOp::Gt,
        T::Geq => UnaryOp::Ge,
        T::Neq => UnaryOp::Ne,
        T::Mat => UnaryOp::Match,
        T::Nmat => UnaryOp::NotMatch,
        _ => return None,
    })
}

impl<'a> Parser<'a> {
    fn new(file: FileId, src: &'a str) -> Self {
        let mut sc = Scanner::new(file, src);
        let tok = sc.next_token();
        let src = sc.source();
        Parser {
            sc,
            src,
            file,
            tok,
            ahead: VecDeque::new(),
            prev_end: 0,
            consumed: 0,
            errors: Vec::new(),
            depth: 0,
            depth_reported: false,
        }
    }

    fn finish(&mut self) -> Vec<ParseError> {
        let mut errs = self.sc.take_errors();
        errs.append(&mut self.errors);
        errs.sort_by_key(|e| (e.span.start, e.span.end));
        errs.dedup();
        errs.truncate(MAX_ERRORS);
        errs
    }

    // ---- token handling ----

    fn bump(&mut self) {
        if self.tok.kind == T::Eof {
            return;
        }
        self.prev_end = self.tok.span.end;
        self.consumed += 1;
        self.tok = match self.ahead.pop_front() {
            Some(t) => t,
            None => self.sc.next_token(),
        };
    }

    /// The token `n` positions after the current one (`peek(0)` is the current token).
    fn peek(&mut self, n: usize) -> Token {
        if n == 0 {
            return self.tok;
        }
        while self.ahead.len() < n {
            let t = self.sc.next_token();
            self.ahead.push_back(t);
        }
        self.ahead[n - 1]
    }

    fn text(&self, t: Token) -> &'a str {
        self.src
            .get(t.span.start as usize..t.span.end as usize)
            .unwrap_or("")
    }

    fn is_kw(&self, kw: &str) -> bool {
        self.tok.kind == T::Ident && self.text(self.tok) == kw
    }

    fn span_from(&self, start: u32) -> Span {
        Span::new(self.file, start, self.prev_end.max(start))
    }

    fn error(&mut self, span: Span, message: impl Into<String>) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(ParseError {
                span,
                message: message.into(),
            });
        }
    }

    fn found(&self) -> String {
        let t = self.tok;
        match t.kind {
            T::Comma if t.inserted => "newline".into(),
            T::Eof => "EOF".into(),
            T::Ident | T::Int | T::Float | T::String => {
                let s = self.text(t);
                if s.chars().count() > 40 {
                    format!("{}...", s.chars().take(40).collect::<String>())
                } else {
                    s.to_string()
                }
            }
            k => k.describe().to_string(),
        }
    }

    fn error_expected(&mut self, what: &str) {
        let msg = format!("expected {what}, found {}", self.found());
        self.error(self.tok.span, msg);
    }

    fn expect(&mut self, k: T) -> bool {
        if self.tok.kind == k {
            self.bump();
            true
        } else {
            self.error_expected(k.describe());
            false
        }
    }

    /// Skips to the next comma (consumed) or closing bracket (not consumed) at nesting depth 0.
    fn skip_to_sync(&mut self) {
        let mut depth = 0u32;
        loop {
            match self.tok.kind {
                T::Eof => return,
                T::Comma if depth == 0 => {
                    self.bump();
                    return;
                }
                T::Comma if self.tok.inserted && depth > 0 => {
                    // A newline inside an unclosed bracket: give up on the bracket.
                    self.bump();
                    return;
                }
                T::LParen | T::LBrack | T::LBrace | T::InterpStart => depth += 1,
                T::RParen | T::RBrack | T::RBrace | T::InterpEnd => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                }
                _ => {}
            }
            self.bump();
        }
    }

    fn enter(&mut self) -> bool {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            if !self.depth_reported {
                self.depth_reported = true;
                self.error(
                    self.tok.span,
                    format!("expression nested too deeply (more than {MAX_DEPTH} levels)"),
                );
            }
            return false;
        }
        true
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn ident(&mut self) -> Option<Ident> {
        if self.tok.kind == T::Ident {
            let id = Ident {
                name: self.text(self.tok).to_string(),
                span: self.tok.span,
            };
            self.bump();
            Some(id)
        } else {
            self.error_expected("identifier");
            None
        }
    }

    /// `true` if a `for`/`if` keyword followed by token `n` is an identifier instead (a label,
    /// an alias or an embedded reference), as upstream decides.
    fn keyword_is_ident(&mut self, n: usize) -> bool {
        matches!(
            self.peek(n).kind,
            T::Colon | T::Assign | T::Option | T::Comma | T::Eof | T::RBrace | T::RBrack
        ) || self.is_field_marker(n)
    }

    /// `true` if the tokens from `n` on are a field marker: `:`, `?:`, `!:`.
    fn is_field_marker(&mut self, n: usize) -> bool {
        match self.peek(n).kind {
            T::Colon => true,
            T::Option | T::Not => self.peek(n + 1).kind == T::Colon,
            _ => false,
        }
    }

    // ---- file ----

    fn file(&mut self) -> File {
        let mut attrs = Vec::new();
        let mut package = None;
        let mut imports = Vec::new();
        loop {
            match self.tok.kind {
                T::Comma => self.bump(),
                T::Attribute => {
                    let a = self.attribute();
                    attrs.push(a);
                }
                _ => break,
            }
        }
        let mut decls = Vec::new();
        if self.is_kw("package") && self.peek(1).kind == T::Ident {
            self.bump();
            package = self.ident();
            self.end_of_decl("package clause");
            // Attributes between the package clause and the imports are declarations.
            loop {
                match self.tok.kind {
                    T::Comma => self.bump(),
                    T::Attribute => {
                        let a = self.attribute();
                        decls.push(Decl::Attribute(a));
                    }
                    _ => break,
                }
            }
        }
        while self.is_kw("import") && matches!(self.peek(1).kind, T::String | T::LParen | T::Ident)
        {
            self.import_decl(&mut imports);
            self.end_of_decl("import declaration");
        }
        decls.extend(self.decl_list(T::Eof, "file"));
        File {
            span: Span::new(self.file, 0, self.src.len() as u32),
            attrs,
            package,
            imports,
            decls,
        }
    }

    fn end_of_decl(&mut self, what: &str) {
        match self.tok.kind {
            T::Comma => self.bump(),
            T::Eof => {}
            _ => {
                let msg = format!("missing ',' after {what}, found {}", self.found());
                self.error(self.tok.span, msg);
                self.skip_to_sync();
            }
        }
    }

    fn import_decl(&mut self, out: &mut Vec<ImportSpec>) {
        self.bump();
        if self.tok.kind == T::LParen {
            self.bump();
            loop {
                match self.tok.kind {
                    T::RParen => {
                        self.bump();
                        break;
                    }
                    T::Eof => {
                        self.error_expected("')'");
                        break;
                    }
                    T::Comma => self.bump(),
                    _ => {
                        let before = self.consumed;
                        if let Some(s) = self.import_spec() {
                            out.push(s);
                        }
                        if !matches!(self.tok.kind, T::Comma | T::RParen) {
                            self.error_expected("',' or ')' in import declaration");
                            self.skip_to_sync();
                        }
                        if self.consumed == before {
                            self.bump();
                        }
                    }
                }
            }
        } else if let Some(s) = self.import_spec() {
            out.push(s);
        }
    }

    fn import_spec(&mut self) -> Option<ImportSpec> {
        let start = self.tok.span.start;
        let alias = if self.tok.kind == T::Ident {
            self.ident()
        } else {
            None
        };
        if self.tok.kind != T::String {
            self.error_expected("import path string");
            return None;
        }
        let path_span = self.tok.span;
        let e = self.string_lit();
        let path = match e {
            Expr::Str {
                parts,
                bytes: false,
                ..
            } => match parts.as_slice() {
                [StrPart::Text(s)] => s.clone(),
                [] => String::new(),
                _ => {
                    self.error(path_span, "invalid import path");
                    return None;
                }
            },
            _ => {
                self.error(path_span, "import path must be a string");
                return None;
            }
        };
        if path.is_empty() {
            self.error(path_span, "empty import path");
        }
        Some(ImportSpec {
            alias,
            path,
            path_span,
            span: self.span_from(start),
        })
    }

    // ---- declarations ----

    /// Parses declarations up to `close` (not consumed).
    fn decl_list(&mut self, close: T, what: &str) -> Vec<Decl> {
        let mut decls = Vec::new();
        loop {
            if self.tok.kind == close {
                break;
            }
            match self.tok.kind {
                T::Eof => {
                    self.error_expected(close.describe());
                    break;
                }
                T::Comma => {
                    self.bump();
                    continue;
                }
                T::RBrace | T::RBrack | T::RParen | T::InterpMid | T::InterpEnd => {
                    if close != T::Eof {
                        // Leave the closer to an enclosing construct? Only ours counts here.
                        self.error_expected(close.describe());
                        break;
                    }
                    let msg = format!("unexpected {}", self.found());
                    self.error(self.tok.span, msg);
                    self.bump();
                    continue;
                }
                _ => {}
            }
            let before = self.consumed;
            let start = self.tok.span.start;
            let d = self.decl();
            decls.push(d);
            match self.tok.kind {
                T::Comma => self.bump(),
                k if k == close || k == T::Eof => {}
                _ => {
                    let msg = format!("missing ',' in {what}, found {}", self.found());
                    self.error(self.tok.span, msg);
                    self.skip_to_sync();
                    if self.consumed == before {
                        self.bump();
                        decls.push(Decl::Bad(self.span_from(start)));
                    }
                }
            }
            if self.consumed == before {
                self.bump();
            }
        }
        decls
    }

    fn decl(&mut self) -> Decl {
        let start = self.tok.span.start;
        match self.tok.kind {
            T::Ellipsis => {
                self.bump();
                let expr = if self.starts_expr() {
                    Some(self.expr())
                } else {
                    None
                };
                return Decl::Ellipsis {
                    expr,
                    span: self.span_from(start),
                };
            }
            T::Attribute => {
                return Decl::Attribute(self.attribute());
            }
            T::Ident => {
                let kw = self.text(self.tok);
                if kw == "let" && self.peek(1).kind == T::Ident && self.peek(2).kind == T::Assign {
                    return match self.let_clause() {
                        Some(l) => Decl::Let(l),
                        None => Decl::Bad(self.span_from(start)),
                    };
                }
                if (kw == "for" || kw == "if") && !self.keyword_is_ident(1) {
                    return match self.comprehension() {
                        Some(c) => Decl::Comprehension(c),
                        None => Decl::Bad(self.span_from(start)),
                    };
                }
            }
            _ => {}
        }
        let (alias, head) = self.head();
        if self.is_field_marker(0) {
            match self.field_from(start, alias, head) {
                Some(f) => Decl::Field(f),
                None => Decl::Bad(self.span_from(start)),
            }
        } else {
            if let Some(a) = alias {
                self.error(
                    a.span,
                    "old-style alias; use \"let X = expr\" instead (an alias must be followed by a field label and ':')",
                );
            }
            match head {
                Head::Expr(e) => Decl::Embed(e),
                Head::Pattern(l) => {
                    self.error(l.span(), "expected ':' after pattern constraint");
                    Decl::Bad(l.span())
                }
            }
        }
    }

    /// Parses `[X=]expr` at a label-or-value position, recognising pattern labels.
    fn head(&mut self) -> (Option<Ident>, Head) {
        let alias = if self.tok.kind == T::Ident && self.peek(1).kind == T::Assign {
            let a = self.ident();
            self.bump();
            a
        } else {
            None
        };
        if self.tok.kind == T::LBrack {
            return (alias, self.bracket_head());
        }
        (alias, Head::Expr(self.expr()))
    }

    /// At `[`: a pattern label `[X=e]` (when a field marker follows the `]`) or a list operand
    /// continued into a full expression.
    fn bracket_head(&mut self) -> Head {
        let start = self.tok.span.start;
        if !self.enter() {
            self.leave();
            self.bump();
            return Head::Expr(Expr::Bad(self.span_from(start)));
        }
        self.bump();
        let simple = !(matches!(self.tok.kind, T::RBrack | T::Ellipsis)
            || ((self.is_kw("for") || self.is_kw("if")) && !self.keyword_is_ident(1)));
        if !simple {
            let list = self.list_rest(start, Vec::new());
            self.leave();
            return Head::Expr(self.expr_from(list));
        }
        let alias = if self.tok.kind == T::Ident && self.peek(1).kind == T::Assign {
            let a = self.ident();
            self.bump();
            a
        } else {
            None
        };
        let e = self.expr();
        if self.tok.kind == T::RBrack && (alias.is_some() || self.is_field_marker(1)) {
            self.bump();
            self.leave();
            return Head::Pattern(Label::Pattern {
                alias,
                expr: Box::new(e),
                span: self.span_from(start),
            });
        }
        if let Some(a) = &alias {
            self.error(a.span, "alias not allowed in list literal");
        }
        let list = self.list_rest(start, vec![ListElem::Expr(e)]);
        self.leave();
        Head::Expr(self.expr_from(list))
    }

    /// Turns an expression into a label, or reports why it is not one.
    fn label_of(&mut self, head: Head) -> Option<Label> {
        let e = match head {
            Head::Pattern(l) => return Some(l),
            Head::Expr(e) => e,
        };
        let span = e.span();
        let kw = |name: &str| {
            Some(Label::Ident(Ident {
                name: name.into(),
                span,
            }))
        };
        match e {
            Expr::Ident(id) => {
                if id.name.starts_with("__") {
                    self.error(id.span, "identifiers starting with '__' are reserved");
                }
                Some(Label::Ident(id))
            }
            Expr::List { mut elems, span } => {
                if elems.len() == 1 {
                    if let Some(ListElem::Expr(e)) = elems.pop() {
                        return Some(Label::Pattern {
                            alias: None,
                            expr: Box::new(e),
                            span,
                        });
                    }
                }
                self.error(span, "square bracket must have exactly one element");
                None
            }
            Expr::Null(_) => kw("null"),
            Expr::Bool(true, _) => kw("true"),
            Expr::Bool(false, _) => kw("false"),
            Expr::Str {
                parts,
                bytes: false,
                span,
            } => Some(Label::String { parts, span }),
            Expr::Paren(inner, span) => Some(Label::Dynamic { expr: inner, span }),
            Expr::Bad(_) => None,
            Expr::Top(_) => {
                self.error(span, "cannot use _ as label");
                None
            }
            _ => {
                self.error(
                    span,
                    "invalid label: expected identifier, string, (expr) or [pattern]",
                );
                None
            }
        }
    }

    /// The current token is a field marker; builds the field whose label is `head`.
    fn field_from(&mut self, start: u32, label_alias: Option<Ident>, head: Head) -> Option<Field> {
        let label = self.label_of(head);
        let constraint = match self.tok.kind {
            T::Option => {
                self.bump();
                FieldConstraint::Optional
            }
            T::Not => {
                self.bump();
                FieldConstraint::Required
            }
            _ => FieldConstraint::Regular,
        };
        self.bump(); // ':'
        let vstart = self.tok.span.start;
        let (alias, vhead) = self.head();
        let (value_alias, value) = if self.is_field_marker(0) {
            // Shorthand `a: b: v`.
            let inner = if self.enter() {
                self.field_from(vstart, alias, vhead)
            } else {
                self.skip_to_sync();
                None
            };
            self.leave();
            let span = self.span_from(vstart);
            let decls = match inner {
                Some(f) => vec![Decl::Field(f)],
                None => vec![Decl::Bad(span)],
            };
            (
                None,
                Expr::Struct(StructLit {
                    decls,
                    shorthand: true,
                    span,
                }),
            )
        } else {
            let v = match vhead {
                Head::Expr(e) => e,
                Head::Pattern(l) => {
                    self.error(l.span(), "expected ':' after pattern constraint");
                    Expr::Bad(l.span())
                }
            };
            let mut v = v;
            if let Some(a) = &alias {
                if self.tok.kind == T::Colon {
                    self.error(a.span, "alias not allowed here");
                    v = Expr::Bad(v.span());
                }
            }
            (alias, v)
        };
        let mut attrs = Vec::new();
        while self.tok.kind == T::Attribute {
            attrs.push(self.attribute());
        }
        let label = label?;
        Some(Field {
            label,
            label_alias,
            constraint,
            value_alias,
            value,
            attrs,
            span: self.span_from(start),
        })
    }

    fn attribute(&mut self) -> Attribute {
        let t = self.tok;
        let text = self.text(t);
        self.bump();
        let inner = text.strip_prefix('@').unwrap_or(text);
        let (name, body) = match inner.find('(') {
            Some(i) => {
                let body = &inner[i + 1..];
                (&inner[..i], body.strip_suffix(')').unwrap_or(body))
            }
            None => (inner, ""),
        };
        Attribute {
            name: name.to_string(),
            body: body.to_string(),
            span: t.span,
        }
    }

    fn let_clause(&mut self) -> Option<LetClause> {
        let start = self.tok.span.start;
        self.bump();
        let name = self.ident()?;
        if !self.expect(T::Assign) {
            return None;
        }
        let expr = self.expr();
        Some(LetClause {
            name,
            expr,
            span: self.span_from(start),
        })
    }

    fn comprehension(&mut self) -> Option<Comprehension> {
        let start = self.tok.span.start;
        let mut clauses = Vec::new();
        loop {
            let cstart = self.tok.span.start;
            if self.is_kw("for") {
                self.bump();
                let first = self.ident()?;
                let (key, value) = if self.tok.kind == T::Comma && !self.tok.inserted {
                    self.bump();
                    (Some(first), self.ident()?)
                } else {
                    (None, first)
                };
                if !self.is_kw("in") {
                    self.error_expected("'in'");
                    return None;
                }
                self.bump();
                let source = self.expr();
                clauses.push(Clause::For {
                    key,
                    value,
                    source,
                    span: self.span_from(cstart),
                });
            } else if self.is_kw("if") {
                self.bump();
                let cond = self.expr();
                clauses.push(Clause::If {
                    cond,
                    span: self.span_from(cstart),
                });
            } else if self.is_kw("let") && !clauses.is_empty() {
                clauses.push(Clause::Let(self.let_clause()?));
            } else {
                break;
            }
            // A comma may follow each clause (so clauses and the body may be split over lines).
            if self.tok.kind == T::Comma {
                self.bump();
            }
        }
        if self.tok.kind != T::LBrace {
            self.error_expected("'{'");
            return None;
        }
        let body = self.struct_lit();
        Some(Comprehension {
            clauses,
            body,
            span: self.span_from(start),
        })
    }

    // ---- expressions ----

    fn starts_expr(&self) -> bool {
        !matches!(
            self.tok.kind,
            T::Comma
                | T::RBrace
                | T::RBrack
                | T::RParen
                | T::Eof
                | T::Colon
                | T::Attribute
                | T::InterpMid
                | T::InterpEnd
        )
    }

    fn expr(&mut self) -> Expr {
        self.binary(1, None)
    }

    /// Continues an expression whose first operand (a list) is already parsed.
    fn expr_from(&mut self, operand: Expr) -> Expr {
        let lhs = self.postfix(operand);
        self.binary(1, Some(lhs))
    }

    fn binary(&mut self, min_prec: u8, lhs: Option<Expr>) -> Expr {
        let mut lhs = match lhs {
            Some(l) => l,
            None => self.unary(),
        };
        loop {
            // `div`, `mod`, `quo`, `rem` are infix integer operators (precedence of `*`); the AST
            // has no operator for them, so they become calls of the predeclared functions.
            if self.tok.kind == T::Ident && min_prec <= 7 {
                let t = self.tok;
                let name = self.text(t);
                if matches!(name, "div" | "mod" | "quo" | "rem") {
                    self.bump();
                    let rhs = self.binary(8, None);
                    let span = lhs.span().to(rhs.span());
                    lhs = Expr::Call {
                        func: Box::new(Expr::Ident(Ident {
                            name: name.to_string(),
                            span: t.span,
                        })),
                        args: vec![lhs, rhs],
                        span,
                    };
                    continue;
                }
            }
            let Some((op, prec)) = binary_op(self.tok.kind) else {
                break;
            };
            if prec < min_prec {
                break;
            }
            self.bump();
            let rhs = self.binary(prec + 1, None);
            let span = lhs.span().to(rhs.span());
            lhs = Expr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                span,
            };
        }
        lhs
    }

    fn unary(&mut self) -> Expr {
        let start = self.tok.span.start;
        if !self.enter() {
            self.leave();
            let span = self.tok.span;
            self.bump();
            return Expr::Bad(span);
        }
        let e = if let Some(op) = unary_op(self.tok.kind) {
            self.bump();
            let operand = self.unary();
            Expr::Unary {
                op,
                expr: Box::new(operand),
                span: self.span_from(start),
            }
        } else {
            let operand = self.operand();
            self.postfix(operand)
        };
        self.leave();
        e
    }

    fn postfix(&mut self, mut e: Expr) -> Expr {
        let start = e.span().start;
        loop {
            match self.tok.kind {
                T::Period => {
                    self.bump();
                    let sel = match self.tok.kind {
                        T::Ident => self.ident(),
                        T::String
                            if {
                                let t = self.text(self.tok);
                                t.starts_with('"') && !t.starts_with("\"\"")
                            } =>
                        {
                            let span = self.tok.span;
                            match self.string_lit() {
                                Expr::Str {
                                    parts,
                                    bytes: false,
                                    ..
                                } => match parts.as_slice() {
                                    [StrPart::Text(s)] => Some(Ident {
                                        name: s.clone(),
                                        span,
                                    }),
                                    [] => Some(Ident {
                                        name: String::new(),
                                        span,
                                    }),
                                    _ => None,
                                },
                                _ => None,
                            }
                            .or_else(|| {
                                self.error(
                                    span,
                                    "invalid selector: expected identifier or simple string",
                                );
                                None
                            })
                        }
                        _ => {
                            self.error_expected("selector");
                            None
                        }
                    };
                    let Some(sel) = sel else {
                        return Expr::Bad(self.span_from(start));
                    };
                    e = Expr::Selector {
                        expr: Box::new(e),
                        sel,
                        span: self.span_from(start),
                    };
                }
                T::LParen => {
                    self.bump();
                    let mut args = Vec::new();
                    loop {
                        match self.tok.kind {
                            T::RParen => break,
                            T::Eof => break,
                            _ => {}
                        }
                        let before = self.consumed;
                        args.push(self.expr());
                        match self.tok.kind {
                            T::Comma => self.bump(),
                            T::RParen => {}
                            _ => {
                                self.error_expected("',' or ')' in argument list");
                                self.skip_to_sync();
                            }
                        }
                        if self.consumed == before {
                            break;
                        }
                    }
                    self.expect(T::RParen);
                    e = Expr::Call {
                        func: Box::new(e),
                        args,
                        span: self.span_from(start),
                    };
                }
                T::LBrack => {
                    self.bump();
                    let lo = if self.tok.kind == T::Colon {
                        None
                    } else {
                        Some(Box::new(self.expr()))
                    };
                    if self.tok.kind == T::Colon {
                        self.bump();
                        let hi = if self.tok.kind == T::RBrack {
                            None
                        } else {
                            Some(Box::new(self.expr()))
                        };
                        self.expect(T::RBrack);
                        e = Expr::Slice {
                            expr: Box::new(e),
                            lo,
                            hi,
                            span: self.span_from(start),
                        };
                    } else {
                        self.expect(T::RBrack);
                        let index = lo.unwrap_or_else(|| Box::new(Expr::Bad(self.tok.span)));
                        e = Expr::Index {
                            expr: Box::new(e),
                            index,
                            span: self.span_from(start),
                        };
                    }
                }
                _ => return e,
            }
        }
    }

    fn operand(&mut self) -> Expr {
        let t = self.tok;
        let span = t.span;
        match t.kind {
            T::Ident => {
                let text = self.text(t);
                self.bump();
                match text {
                    "_" => Expr::Top(span),
                    "null" => Expr::Null(span),
                    "true" => Expr::Bool(true, span),
                    "false" => Expr::Bool(false, span),
                    _ => Expr::Ident(Ident {
                        name: text.to_string(),
                        span,
                    }),
                }
            }
            T::Bottom => {
                self.bump();
                Expr::Bottom(span)
            }
            T::Int | T::Float => {
                let text = self.text(t);
                self.bump();
                match decode_number(text) {
                    Ok(Number::Int(i)) => Expr::Int(Box::new(i), span),
                    Ok(Number::Float(f)) => Expr::Float(Box::new(f), span),
                    Err(m) => {
                        self.error(span, m);
                        Expr::Bad(span)
                    }
                }
            }
            T::String | T::InterpStart => self.string_lit(),
            T::LBrace => Expr::Struct(self.struct_lit()),
            T::LBrack => {
                self.bump();
                self.list_rest(span.start, Vec::new())
            }
            T::LParen => {
                self.bump();
                let inner = self.expr();
                self.expect(T::RParen);
                Expr::Paren(Box::new(inner), self.span_from(span.start))
            }
            _ => {
                self.error_expected("operand");
                if !matches!(
                    t.kind,
                    T::Comma
                        | T::RBrace
                        | T::RBrack
                        | T::RParen
                        | T::Eof
                        | T::InterpMid
                        | T::InterpEnd
                        | T::Colon
                ) {
                    self.bump();
                }
                Expr::Bad(span)
            }
        }
    }

    fn struct_lit(&mut self) -> StructLit {
        let start = self.tok.span.start;
        self.bump(); // '{'
        let decls = if self.enter() {
            self.decl_list(T::RBrace, "struct literal")
        } else {
            self.skip_to_sync();
            Vec::new()
        };
        self.leave();
        if self.tok.kind == T::RBrace {
            self.bump();
        }
        StructLit {
            decls,
            shorthand: false,
            span: self.span_from(start),
        }
    }

    /// Parses list elements after `[` (and after `elems`, already parsed) through `]`.
    fn list_rest(&mut self, start: u32, mut elems: Vec<ListElem>) -> Expr {
        if !elems.is_empty() {
            self.list_separator();
        }
        loop {
            match self.tok.kind {
                T::RBrack => {
                    self.bump();
                    break;
                }
                T::Eof | T::RBrace | T::RParen | T::InterpMid | T::InterpEnd => {
                    self.error_expected("']'");
                    break;
                }
                T::Comma => {
                    self.error_expected("list element");
                    self.bump();
                    continue;
                }
                _ => {}
            }
            let before = self.consumed;
            let estart = self.tok.span.start;
            if self.tok.kind == T::Ellipsis {
                self.bump();
                let expr = if self.starts_expr() {
                    Some(self.expr())
                } else {
                    None
                };
                elems.push(ListElem::Ellipsis {
                    expr,
                    span: self.span_from(estart),
                });
                self.list_separator();
                if !matches!(self.tok.kind, T::RBrack | T::Eof | T::RBrace | T::RParen) {
                    let msg = format!(
                        "expected ']' after '...' (an ellipsis must be the last element of a list), found {}",
                        self.found()
                    );
                    self.error(self.tok.span, msg);
                }
                continue;
            } else if (self.is_kw("for") || self.is_kw("if")) && !self.keyword_is_ident(1) {
                match self.comprehension() {
                    Some(c) => elems.push(ListElem::Comprehension(c)),
                    None => {
                        self.skip_list_elem();
                        elems.push(ListElem::Expr(Expr::Bad(self.span_from(estart))));
                    }
                }
            } else {
                elems.push(ListElem::Expr(self.expr()));
            }
            self.list_separator();
            if self.consumed == before {
                self.bump();
            }
        }
        Expr::List {
            elems,
            span: self.span_from(start),
        }
    }

    fn list_separator(&mut self) {
        match self.tok.kind {
            T::Comma => self.bump(),
            T::RBrack => {}
            T::Eof | T::RBrace | T::RParen => {}
            _ => {
                let msg = format!("missing ',' in list literal, found {}", self.found());
                self.error(self.tok.span, msg);
                self.skip_list_elem();
            }
        }
    }

    fn skip_list_elem(&mut self) {
        let mut depth = 0u32;
        loop {
            match self.tok.kind {
                T::Eof => return,
                T::Comma if depth == 0 => {
                    self.bump();
                    return;
                }
                T::RBrack | T::RBrace | T::RParen if depth == 0 => return,
                T::LParen | T::LBrack | T::LBrace => depth += 1,
                T::RParen | T::RBrack | T::RBrace => depth -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    /// Parses a string literal, including interpolations.
    fn string_lit(&mut self) -> Expr {
        let first = self.tok;
        let text = self.text(first);
        let shape = StrShape::of(text);
        if first.kind == T::String {
            self.bump();
            let (off, raw) = segment_content(text, SegKind::Whole, shape);
            if !shape.multiline && !raw.contains(['\\', '\r']) {
                // Fast path: nothing to decode.
                let part = if shape.is_bytes() {
                    StrPart::Bytes(raw.as_bytes().to_vec())
                } else {
                    StrPart::Text(raw.to_string())
                };
                return Expr::Str {
                    parts: vec![part],
                    bytes: shape.is_bytes(),
                    span: first.span,
                };
            }
            let (mut vals, errs) = decode_segments(&[raw], shape);
            self.report_decode(&[(first.span, off)], errs);
            let v = vals.pop().unwrap_or_default();
            return Expr::Str {
                parts: vec![self.part(v, shape, first.span)],
                bytes: shape.is_bytes(),
                span: first.span,
            };
        }
        // Interpolation: segments and expressions alternate.
        let mut segs: Vec<(Token, SegKind)> = vec![(first, SegKind::Start)];
        let mut exprs: Vec<Expr> = Vec::new();
        self.bump();
        let mut end = first.span;
        loop {
            let e = if self.enter() {
                self.expr()
            } else {
                Expr::Bad(self.tok.span)
            };
            self.leave();
            exprs.push(e);
            while self.tok.kind == T::Comma && self.tok.inserted {
                self.bump();
            }
            if !matches!(self.tok.kind, T::InterpMid | T::InterpEnd) {
                self.error_expected("')' for string interpolation");
                // Skip to this literal's next segment.
                let mut nest = 0u32;
                loop {
                    match self.tok.kind {
                        T::Eof => break,
                        T::InterpStart => nest += 1,
                        T::InterpEnd if nest > 0 => nest -= 1,
                        T::InterpMid | T::InterpEnd if nest == 0 => break,
                        _ => {}
                    }
                    self.bump();
                }
            }
            match self.tok.kind {
                T::InterpMid => {
                    segs.push((self.tok, SegKind::Mid));
                    self.bump();
                }
                T::InterpEnd => {
                    segs.push((self.tok, SegKind::End));
                    end = self.tok.span;
                    self.bump();
                    break;
                }
                _ => break,
            }
        }
        let mut raws = Vec::with_capacity(segs.len());
        let mut offs = Vec::with_capacity(segs.len());
        for (t, k) in &segs {
            let (off, raw) = segment_content(self.text(*t), *k, shape);
            raws.push(raw);
            offs.push((t.span, off));
        }
        let (vals, errs) = decode_segments(&raws, shape);
        self.report_decode(&offs, errs);
        let span = first.span.to(end).to(self.span_from(first.span.start));
        let mut parts = Vec::new();
        let mut exprs = exprs.into_iter();
        for (i, v) in vals.into_iter().enumerate() {
            if !v.is_empty() {
                parts.push(self.part(v, shape, segs[i].0.span));
            }
            if let Some(e) = exprs.next() {
                parts.push(StrPart::Interp(e));
            }
        }
        Expr::Str {
            parts,
            bytes: shape.is_bytes(),
            span,
        }
    }

    fn part(&mut self, v: Vec<u8>, shape: StrShape, span: Span) -> StrPart {
        if shape.is_bytes() {
            StrPart::Bytes(v)
        } else {
            match String::from_utf8(v) {
                Ok(s) => StrPart::Text(s),
                Err(e) => {
                    self.error(span, "invalid UTF-8 in string literal");
                    StrPart::Text(String::from_utf8_lossy(e.as_bytes()).into_owned())
                }
            }
        }
    }

    fn report_decode(&mut self, segs: &[(Span, usize)], errs: Vec<literal::DecodeError>) {
        for e in errs {
            let (span, off) = segs.get(e.segment).copied().unwrap_or_default();
            let at = (span.start as usize + off + e.at).min(span.end as usize) as u32;
            self.error(Span::new(self.file, at, at.max(span.start)), e.message);
        }
    }
}

#[cfg(test)]
mod tests;
