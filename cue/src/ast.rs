//! The CUE abstract syntax tree, as produced by the parser (`doc/ref/spec.md`, "Source code
//! representation" through "Modules, instances, and packages").
//!
//! Rules the tree follows:
//! - Every node has a [`Span`]; spans of synthesised nodes point at the source they came from.
//! - Literals are decoded by the parser: numbers are exact ([`BigInt`], [`BigDecimal`]) with
//!   multipliers (`K`, `Ki`, …) and `_` separators applied; string escapes are resolved.
//! - The label shorthand `a: b: c: 1` is desugared into nested single-field structs whose
//!   [`StructLit::shorthand`] is `true`; it is otherwise identical to `a: {b: {c: 1}}`.
//! - Attributes are kept as raw text; evaluation ignores them.
//! - Comments are not part of the tree.
//! - A syntax error leaves an [`Expr::Bad`] or [`Decl::Bad`] node where the parser recovered.

use crate::source::Span;
use bigdecimal::BigDecimal;
use num_bigint::BigInt;

/// One parsed source file.
#[derive(Clone, Debug, PartialEq)]
pub struct File {
    /// Span of the whole file.
    pub span: Span,
    /// Attributes before the package clause (`@if(...)`, `@extern(...)`).
    pub attrs: Vec<Attribute>,
    /// The package clause `package name`, if any.
    pub package: Option<Ident>,
    /// Import declarations, in source order.
    pub imports: Vec<ImportSpec>,
    /// Top-level declarations, in source order.
    pub decls: Vec<Decl>,
}

/// One import: `import "path"`, `import name "path"`, or an entry of `import ( ... )`.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportSpec {
    /// The explicit local name, if given.
    pub alias: Option<Ident>,
    /// The import path as written (`"strings"`, `"example.com/a/b@v1:pkg"`).
    pub path: String,
    /// Span of the path literal.
    pub path_span: Span,
    /// Span of the whole spec.
    pub span: Span,
}

/// An identifier (including `#Def`, `_hidden`, `_#hiddenDef`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The name as written, without any quoting (`#` and `_` prefixes included).
    pub name: String,
    /// Where it appears.
    pub span: Span,
}

/// A declaration inside a struct literal or at file level.
#[derive(Clone, Debug, PartialEq)]
pub enum Decl {
    /// `label: value`, `label?: value`, `label!: value`, `[pattern]: value`, `(expr): value`.
    Field(Field),
    /// An embedded expression (a struct, a scalar, a reference, ...).
    Embed(Expr),
    /// `let name = expr`.
    Let(LetClause),
    /// `...` or `...T` in a struct.
    Ellipsis {
        /// The type constraint after `...`, if any.
        expr: Option<Expr>,
        /// Span of the ellipsis.
        span: Span,
    },
    /// `for ...`/`if ...`/`let ...` clauses followed by a struct body.
    Comprehension(Comprehension),
    /// A declaration attribute `@name(...)` on its own.
    Attribute(Attribute),
    /// A declaration the parser could not read; an error was reported for it.
    Bad(Span),
}

/// Whether a field is regular, optional (`?`) or required (`!`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldConstraint {
    /// `a: v`
    Regular,
    /// `a?: v`
    Optional,
    /// `a!: v`
    Required,
}

/// A field declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The label, possibly a pattern or dynamic label.
    pub label: Label,
    /// `X=label: v` — the alias bound to the field.
    pub label_alias: Option<Ident>,
    /// Regular, optional or required.
    pub constraint: FieldConstraint,
    /// `label: X=v` — an alias bound to the value.
    pub value_alias: Option<Ident>,
    /// The field's value.
    pub value: Expr,
    /// Field attributes `@json(...)` etc., after the value.
    pub attrs: Vec<Attribute>,
    /// Span of the whole field.
    pub span: Span,
}

/// A field label.
#[derive(Clone, Debug, PartialEq)]
pub enum Label {
    /// `foo`, `#Foo`, `_foo`, `_#foo`.
    Ident(Ident),
    /// A quoted label `"foo-bar"`; `parts` holds one text part unless it is interpolated, in which
    /// case the label is dynamic and evaluates like `("...")`.
    String {
        /// The string's parts.
        parts: Vec<StrPart>,
        /// Span of the literal.
        span: Span,
    },
    /// `(expr)`: a dynamic label computed from a string expression.
    Dynamic {
        /// The label expression.
        expr: Box<Expr>,
        /// Span including the parentheses.
        span: Span,
    },
    /// `[expr]` or `[X=expr]`: a pattern constraint applying to all matching labels.
    Pattern {
        /// The alias bound to the matched label, `X` in `[X=expr]`.
        alias: Option<Ident>,
        /// The pattern, e.g. `string` or `=~"^a"`.
        expr: Box<Expr>,
        /// Span including the brackets.
        span: Span,
    },
}

impl Label {
    /// The span of the label.
    pub fn span(&self) -> Span {
        match self {
            Label::Ident(i) => i.span,
            Label::String { span, .. }
            | Label::Dynamic { span, .. }
            | Label::Pattern { span, .. } => *span,
        }
    }
}

/// `let name = expr`, as a declaration or a comprehension clause.
#[derive(Clone, Debug, PartialEq)]
pub struct LetClause {
    /// The bound name.
    pub name: Ident,
    /// The bound expression.
    pub expr: Expr,
    /// Span of the whole clause.
    pub span: Span,
}

/// A raw attribute `@name(body)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    /// The attribute name (`json` in `@json(...)`).
    pub name: String,
    /// The text between the parentheses, unparsed.
    pub body: String,
    /// Span of the whole attribute.
    pub span: Span,
}

/// A struct literal `{ decls }`.
#[derive(Clone, Debug, PartialEq)]
pub struct StructLit {
    /// Declarations in source order.
    pub decls: Vec<Decl>,
    /// `true` when synthesised from the `a: b: v` shorthand (no braces in the source).
    pub shorthand: bool,
    /// Span including the braces (or of the shorthand field).
    pub span: Span,
}

/// A comprehension: clauses, then a struct body. In a list, the body's embedded value is the element.
#[derive(Clone, Debug, PartialEq)]
pub struct Comprehension {
    /// The clauses, first to last; the first is always `for` or `if`.
    pub clauses: Vec<Clause>,
    /// The body struct.
    pub body: StructLit,
    /// Span of the whole comprehension.
    pub span: Span,
}

/// One comprehension clause.
#[derive(Clone, Debug, PartialEq)]
pub enum Clause {
    /// `for k, v in src` or `for v in src`.
    For {
        /// The key (label or index) variable, if two names are given.
        key: Option<Ident>,
        /// The value variable.
        value: Ident,
        /// The iterated expression.
        source: Expr,
        /// Span of the clause.
        span: Span,
    },
    /// `if cond`.
    If {
        /// The guard.
        cond: Expr,
        /// Span of the clause.
        span: Span,
    },
    /// `let x = e`.
    Let(LetClause),
}

/// A part of a string or bytes literal.
#[derive(Clone, Debug, PartialEq)]
pub enum StrPart {
    /// Literal text with escapes resolved (string literals).
    Text(String),
    /// Literal bytes with escapes resolved (bytes literals, `'...'`).
    Bytes(Vec<u8>),
    /// An interpolation `\(expr)`.
    Interp(Expr),
}

/// An element of a list literal.
#[derive(Clone, Debug, PartialEq)]
pub enum ListElem {
    /// A plain element.
    Expr(Expr),
    /// `...` or `...T` (only last).
    Ellipsis {
        /// The element type after `...`, if any.
        expr: Option<Expr>,
        /// Span of the ellipsis.
        span: Span,
    },
    /// `for x in xs { x }`: elements produced by a comprehension.
    Comprehension(Comprehension),
}

/// Unary operators, including the unary comparators used as bounds (`<10`, `=~"re"`) and the
/// default marker `*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Pos,
    /// `!x`
    Not,
    /// `*x` (default marker in a disjunction)
    Default,
    /// `<x`
    Lt,
    /// `<=x`
    Le,
    /// `>x`
    Gt,
    /// `>=x`
    Ge,
    /// `!=x`
    Ne,
    /// `==x`
    Eq,
    /// `=~x`
    Match,
    /// `!~x`
    NotMatch,
}

/// Binary operators, lowest precedence first: `|`, `&`, `||`, `&&`, comparisons, `+ -`, `* /`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `|` disjunction
    Disjunction,
    /// `&` unification
    Unification,
    /// `||`
    Or,
    /// `&&`
    And,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `=~`
    Match,
    /// `!~`
    NotMatch,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `_`
    Top(Span),
    /// `_|_`
    Bottom(Span),
    /// `null`
    Null(Span),
    /// `true` / `false`
    Bool(bool, Span),
    /// An integer literal, multipliers applied (`1Ki` → 1024, `1.5K` → 1500).
    Int(Box<BigInt>, Span),
    /// A decimal literal (`1.5`, `1e3`, `.5`).
    Float(Box<BigDecimal>, Span),
    /// A string or bytes literal; more than one part or an [`StrPart::Interp`] means interpolation.
    Str {
        /// The parts in order.
        parts: Vec<StrPart>,
        /// `true` for bytes (`'...'`, `#'...'#`, `'''...'''`).
        bytes: bool,
        /// Span of the literal.
        span: Span,
    },
    /// A reference to an identifier (field, alias, let, import, predeclared like `int`, `len`).
    Ident(Ident),
    /// `{ ... }`
    Struct(StructLit),
    /// `[ ... ]`
    List {
        /// The elements.
        elems: Vec<ListElem>,
        /// Span including the brackets.
        span: Span,
    },
    /// `x.sel` where `sel` is an identifier or a quoted string label.
    Selector {
        /// The operand.
        expr: Box<Expr>,
        /// The selected label (its name, unquoted).
        sel: Ident,
        /// Span of the whole expression.
        span: Span,
    },
    /// `x[i]`
    Index {
        /// The operand.
        expr: Box<Expr>,
        /// The index.
        index: Box<Expr>,
        /// Span of the whole expression.
        span: Span,
    },
    /// `x[lo:hi]`
    Slice {
        /// The operand.
        expr: Box<Expr>,
        /// Lower bound, if given.
        lo: Option<Box<Expr>>,
        /// Upper bound, if given.
        hi: Option<Box<Expr>>,
        /// Span of the whole expression.
        span: Span,
    },
    /// `f(args...)`
    Call {
        /// The called expression.
        func: Box<Expr>,
        /// The arguments.
        args: Vec<Expr>,
        /// Span of the whole expression.
        span: Span,
    },
    /// A unary expression.
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        expr: Box<Expr>,
        /// Span of the whole expression.
        span: Span,
    },
    /// A binary expression.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
        /// Span of the whole expression.
        span: Span,
    },
    /// `( expr )`
    Paren(Box<Expr>, Span),
    /// An expression the parser could not read; an error was reported for it.
    Bad(Span),
}

impl Expr {
    /// The span of the expression.
    pub fn span(&self) -> Span {
        match self {
            Expr::Top(s)
            | Expr::Bottom(s)
            | Expr::Null(s)
            | Expr::Bool(_, s)
            | Expr::Int(_, s)
            | Expr::Float(_, s)
            | Expr::Paren(_, s)
            | Expr::Bad(s) => *s,
            Expr::Ident(i) => i.span,
            Expr::Struct(st) => st.span,
            Expr::Str { span, .. }
            | Expr::List { span, .. }
            | Expr::Selector { span, .. }
            | Expr::Index { span, .. }
            | Expr::Slice { span, .. }
            | Expr::Call { span, .. }
            | Expr::Unary { span, .. }
            | Expr::Binary { span, .. } => *span,
        }
    }
}

/// A syntax error with its position. The parser collects these and keeps going.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Where the error is.
    pub span: Span,
    /// What is wrong, e.g. `expected '}', found EOF`.
    pub message: String,
}
