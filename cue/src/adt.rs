//! The internal representation the evaluator works on (upstream `internal/core/adt`).
//!
//! Rules:
//! - A compiled [`Expr`] has its identifiers resolved lexically: a reference names how many
//!   environments to go up and what to find there (spec "Declarations and scopes").
//! - A [`Val`] is an evaluated atom: top, bottom, a concrete scalar, a kind, a bound or validator,
//!   or a handle to a vertex (structs and lists live in vertices).
//! - Errors are values: [`Bottom`] carries an [`ErrorCode`]; `Incomplete` and `Cycle` are not fatal
//!   because more information may resolve them.
//! - Cloning an [`Expr`] is O(1) and allocation-free: every sub-expression and operand list is
//!   behind an `Arc` (`Arc<[Expr]>` for `&`, `|`, call arguments and interpolation parts), because
//!   the evaluator copies a conjunct's expression each time it re-processes or clones a vertex.

use crate::ast::{BinaryOp, FieldConstraint, UnaryOp};
use crate::source::Span;
use bigdecimal::BigDecimal;
use num_bigint::BigInt;
use std::sync::Arc;

/// Index of a vertex in the evaluator's arena.
pub type VId = u32;

/// Kind bit set.
pub type Kinds = u16;
/// `null`
pub const K_NULL: Kinds = 1;
/// `bool`
pub const K_BOOL: Kinds = 2;
/// `int`
pub const K_INT: Kinds = 4;
/// `float`
pub const K_FLOAT: Kinds = 8;
/// `string`
pub const K_STRING: Kinds = 16;
/// `bytes`
pub const K_BYTES: Kinds = 32;
/// list
pub const K_LIST: Kinds = 64;
/// struct
pub const K_STRUCT: Kinds = 128;
/// `number`
pub const K_NUMBER: Kinds = K_INT | K_FLOAT;
/// `_`
pub const K_TOP: Kinds = 255;

/// Names a kind set the way CUE prints it.
pub fn kind_name(k: Kinds) -> String {
    let mut s = String::new();
    write_kind_name(&mut s, k);
    s
}

/// [`kind_name`], written to the end of `out` (a fingerprint writes thousands of them into
/// one buffer).
pub fn write_kind_name(out: &mut String, k: Kinds) {
    if k == K_TOP {
        out.push('_');
        return;
    }
    if k == K_NUMBER {
        out.push_str("number");
        return;
    }
    let mut first = true;
    for (bit, name) in [
        (K_NULL, "null"),
        (K_BOOL, "bool"),
        (K_INT, "int"),
        (K_FLOAT, "float"),
        (K_STRING, "string"),
        (K_BYTES, "bytes"),
        (K_LIST, "list"),
        (K_STRUCT, "struct"),
    ] {
        if k & bit != 0 {
            if !first {
                out.push('|');
            }
            out.push_str(name);
            first = false;
        }
    }
    if first {
        out.push_str("_|_");
    }
}

/// Error classes (upstream `adt.ErrorCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A fatal evaluation error other than the classes below (bad operand, division by zero,
    /// a failing builtin, ...).
    Eval,
    /// Two values that do not unify: conflicting scalars or kinds, a value outside a bound or
    /// rejected by a validator (spec "Unification"). Fatal.
    Conflict,
    /// A field that a closed struct does not allow (spec "Closed structs"). Fatal.
    NotAllowed,
    /// A required field (`a!: T`) that no conjunct gave a regular value (spec "Required
    /// fields"). Not fatal: more data may still supply it.
    RequiredMissing,
    /// A selector naming a field that is not there or only optional (spec "Field
    /// constraints"). Not fatal: another conjunct may still add it.
    Undefined,
    /// An error raised by the user (`_|_` literal, `error()`).
    User,
    /// A structural cycle.
    StructuralCycle,
    /// A value is not yet concrete enough; not fatal.
    Incomplete,
    /// A reference cycle; not fatal.
    Cycle,
    /// A limit of the evaluation's budget was exceeded (steps, depth, wall time, cancellation:
    /// `eval::budget`). Fatal. The class travels with every copy of the error, so a limit
    /// error copied into another vertex is still reported as a limit.
    Limit,
}

impl ErrorCode {
    /// `true` for codes that more information cannot fix.
    pub fn is_fatal(self) -> bool {
        !matches!(
            self,
            ErrorCode::Incomplete
                | ErrorCode::Cycle
                | ErrorCode::RequiredMissing
                | ErrorCode::Undefined
        )
    }
}

/// An error value.
#[derive(Clone, Debug, PartialEq)]
pub struct Bottom {
    /// The class.
    pub code: ErrorCode,
    /// The message, without position or path.
    pub msg: String,
    /// The primary position.
    pub span: Span,
    /// Other positions involved (the other side of a conflict, ...).
    pub related: Vec<Span>,
    /// For an empty disjunction: the error of each disjunct, with its path below the
    /// disjunction's (`.a.b`, empty for the disjunction itself).
    pub sub: Vec<(String, Arc<Bottom>)>,
}

impl Bottom {
    /// A bottom value.
    pub fn new(code: ErrorCode, msg: impl Into<String>, span: Span) -> Arc<Bottom> {
        Arc::new(Bottom {
            code,
            msg: msg.into(),
            span,
            related: Vec::new(),
            sub: Vec::new(),
        })
    }
}

/// Whether a label is a regular field, definition or hidden field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelKind {
    /// Regular (exported) field.
    Regular,
    /// `#Def`
    Def,
    /// `_hidden`
    Hidden,
    /// `_#hiddenDef`
    HiddenDef,
    /// A list index.
    Index,
    /// An internal slot (let bindings, anonymous values).
    Internal,
}

/// A field label.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Label {
    /// The name (for indices, the decimal text).
    pub name: Arc<str>,
    /// The class.
    pub kind: LabelKind,
    /// The index for list elements (the package scope for hidden labels). 32 bits keep a
    /// label at 24 bytes and so `Expr` at 48 (the name is the exact decimal text either way).
    pub index: u32,
}

/// How many list index names [`Label::index`] shares.
const SHARED_INDEX_NAMES: usize = 256;

impl Label {
    /// A label for an identifier as written (`#a` is a definition, `_a` hidden).
    pub fn ident(name: &str) -> Label {
        let kind = if name.starts_with("_#") {
            LabelKind::HiddenDef
        } else if name.starts_with('#') {
            LabelKind::Def
        } else if name.starts_with('_') && name.len() > 1 {
            LabelKind::Hidden
        } else {
            LabelKind::Regular
        };
        Label {
            name: name.into(),
            kind,
            index: 0,
        }
    }
    /// A regular label from a string (quoted labels are always regular).
    pub fn string(name: &str) -> Label {
        Label {
            name: name.into(),
            kind: LabelKind::Regular,
            index: 0,
        }
    }
    /// A list index label (the names of the first [`SHARED_INDEX_NAMES`] indices are shared,
    /// not allocated per label: every list element of every evaluation has one).
    pub fn index(i: usize) -> Label {
        static NAMES: std::sync::OnceLock<Vec<Arc<str>>> = std::sync::OnceLock::new();
        let names = NAMES.get_or_init(|| {
            (0..SHARED_INDEX_NAMES)
                .map(|n| Arc::from(n.to_string()))
                .collect()
        });
        Label {
            name: names
                .get(i)
                .cloned()
                .unwrap_or_else(|| i.to_string().into()),
            kind: LabelKind::Index,
            index: u32::try_from(i).unwrap_or(u32::MAX),
        }
    }
    /// An internal label.
    pub fn internal(name: &str) -> Label {
        Label {
            name: name.into(),
            kind: LabelKind::Internal,
            index: 0,
        }
    }
    /// `true` for definitions.
    pub fn is_def(&self) -> bool {
        matches!(self.kind, LabelKind::Def | LabelKind::HiddenDef)
    }
    /// `true` for hidden fields and hidden definitions.
    pub fn is_hidden(&self) -> bool {
        matches!(self.kind, LabelKind::Hidden | LabelKind::HiddenDef)
    }
    /// `true` for regular fields (exported).
    pub fn is_regular(&self) -> bool {
        matches!(self.kind, LabelKind::Regular)
    }
    /// How the label appears in a path.
    pub fn path_text(&self) -> String {
        match self.kind {
            LabelKind::Index => self.name.to_string(),
            LabelKind::Regular => {
                if is_ident(&self.name) {
                    self.name.to_string()
                } else {
                    format!("{:?}", &*self.name)
                }
            }
            _ => self.name.to_string(),
        }
    }
}

/// `true` if `s` is a valid CUE identifier.
pub fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_alphabetic() || c == '_' || c == '$' || c == '#' => {}
        _ => return false,
    }
    chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// Bound operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `!=`
    Ne,
    /// `=~`
    Match,
    /// `!~`
    NotMatch,
}

impl BoundOp {
    /// The operator text.
    pub fn text(self) -> &'static str {
        match self {
            BoundOp::Lt => "<",
            BoundOp::Le => "<=",
            BoundOp::Gt => ">",
            BoundOp::Ge => ">=",
            BoundOp::Ne => "!=",
            BoundOp::Match => "=~",
            BoundOp::NotMatch => "!~",
        }
    }
}

/// A validator that is checked once the value is concrete.
#[derive(Clone, Debug)]
pub enum Validator {
    /// A std builtin with its first argument omitted.
    Builtin(&'static crate::builtins::Builtin, Vec<Val>),
    /// `matchN(n, [schemas])`; `n` is a number or a bound.
    MatchN(Val, Vec<Val>, Span),
    /// `matchIf(if, then, else)`.
    MatchIf(Val, Val, Val, Span),
}

/// An evaluated atom.
#[derive(Clone, Debug)]
pub enum Val {
    /// `_`
    Top,
    /// An error.
    Bottom(Arc<Bottom>),
    /// `null`
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(Arc<BigInt>),
    /// A decimal float.
    Float(Arc<BigDecimal>),
    /// A string.
    Str(Arc<str>),
    /// Bytes.
    Bytes(Arc<[u8]>),
    /// A basic type (kind set).
    Kind(Kinds),
    /// A bound `op value`.
    Bound(BoundOp, Arc<Val>),
    /// A validator.
    Validator(Arc<Validator>),
    /// A struct, list or other composite value held by a vertex.
    Vertex(VId),
    /// A predeclared builtin function (`len`, `close`, ...).
    Builtin(Arc<str>),
    /// A std package member function.
    StdFunc(&'static crate::builtins::Builtin),
}

impl Val {
    /// An int value.
    pub fn int(i: impl Into<BigInt>) -> Val {
        Val::Int(Arc::new(i.into()))
    }
    /// A string value.
    pub fn str(s: &str) -> Val {
        Val::Str(s.into())
    }
    /// `true` for concrete scalars.
    pub fn is_concrete_scalar(&self) -> bool {
        matches!(
            self,
            Val::Null | Val::Bool(_) | Val::Int(_) | Val::Float(_) | Val::Str(_) | Val::Bytes(_)
        )
    }
    /// The kind of a concrete scalar (or the allowed kinds of a constraint).
    pub fn kind(&self) -> Kinds {
        match self {
            Val::Top => K_TOP,
            Val::Bottom(_) => 0,
            Val::Null => K_NULL,
            Val::Bool(_) => K_BOOL,
            Val::Int(_) => K_INT,
            Val::Float(_) => K_FLOAT,
            Val::Str(_) => K_STRING,
            Val::Bytes(_) => K_BYTES,
            Val::Kind(k) => *k,
            Val::Bound(op, v) => match op {
                BoundOp::Match | BoundOp::NotMatch => K_STRING,
                BoundOp::Ne => K_TOP,
                _ => match &**v {
                    Val::Int(_) | Val::Float(_) => K_NUMBER,
                    Val::Str(_) => K_STRING,
                    Val::Bytes(_) => K_BYTES,
                    _ => K_TOP,
                },
            },
            Val::Validator(_) => K_TOP,
            Val::Vertex(_) => K_STRUCT | K_LIST,
            Val::Builtin(_) | Val::StdFunc(_) => K_TOP,
        }
    }
}

/// A label position in a struct literal.
#[derive(Clone, Debug)]
pub enum LabelExpr {
    /// A fixed label.
    Fixed(Label),
    /// A computed label `(expr)` or an interpolated string label.
    Dynamic(Expr),
}

/// A field declaration in a compiled struct literal.
#[derive(Clone, Debug)]
pub struct FieldDecl {
    /// The label.
    pub label: LabelExpr,
    /// Regular, optional or required.
    pub constraint: FieldConstraint,
    /// The value.
    pub value: Expr,
    /// The span of the field.
    pub span: Span,
}

/// A pattern constraint `[filter]: value`.
#[derive(Clone, Debug)]
pub struct PatternDecl {
    /// The label filter.
    pub filter: Expr,
    /// The value, evaluated in an environment binding the label (one binding).
    pub value: Expr,
}

/// A comprehension clause.
#[derive(Clone, Debug)]
pub enum ClauseC {
    /// `for k, v in src`: introduces one environment with two bindings (key, value).
    For {
        /// The iterated expression.
        source: Expr,
        /// Span.
        span: Span,
    },
    /// `if cond`
    If {
        /// The guard.
        cond: Expr,
        /// Span.
        span: Span,
    },
    /// `let x = e`: introduces one environment with one lazy binding.
    Let {
        /// The bound expression.
        expr: Expr,
    },
}

/// A comprehension.
#[derive(Clone, Debug)]
pub struct ComprehensionC {
    /// The clauses.
    pub clauses: Vec<ClauseC>,
    /// The body, evaluated in the innermost clause environment.
    pub body: Arc<StructLit>,
}

/// A compiled struct literal; one environment level.
#[derive(Clone, Debug, Default)]
pub struct StructLit {
    /// Fields in source order.
    pub fields: Vec<FieldDecl>,
    /// Pattern constraints.
    pub patterns: Vec<PatternDecl>,
    /// Embedded expressions.
    pub embeds: Vec<Expr>,
    /// Comprehensions.
    pub comprehensions: Vec<ComprehensionC>,
    /// `let` declarations, referenced by index.
    pub lets: Vec<(Arc<str>, Expr)>,
    /// `...` (with an optional type; closedness only cares about presence).
    pub ellipsis: Option<Option<Expr>>,
    /// `true` if this literal is a file (package) body.
    pub is_file: bool,
    /// The span.
    pub span: Span,
}

/// A compiled list literal.
#[derive(Clone, Debug, Default)]
pub struct ListLit {
    /// Elements (comprehensions yield zero or more elements).
    pub elems: Vec<ListElemC>,
    /// `...T`: the element type of the open tail (`None` = closed list).
    pub ellipsis: Option<Option<Expr>>,
    /// The span.
    pub span: Span,
}

/// A list element.
#[derive(Clone, Debug)]
pub enum ListElemC {
    /// One element.
    Expr(Expr),
    /// A comprehension.
    Comprehension(ComprehensionC),
}

/// A part of an interpolation.
#[derive(Clone, Debug)]
pub enum InterpPart {
    /// Literal text.
    Text(String),
    /// Literal bytes.
    Bytes(Vec<u8>),
    /// An expression.
    Expr(Expr),
}

/// A compiled expression.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A literal atom.
    Lit(Val, Span),
    /// A struct literal.
    Struct(Arc<StructLit>),
    /// A list literal.
    List(Arc<ListLit>),
    /// The struct `up` environments up itself: a value alias of a struct literal used inside
    /// it (`#O: X={s: _, o: X.s}`) names the struct as unified where the literal is processed.
    SelfRef {
        /// Environments to go up.
        up: u32,
        /// Span.
        span: Span,
    },
    /// A field of the struct `up` environments up.
    FieldRef {
        /// Environments to go up.
        up: u32,
        /// The field.
        label: Label,
        /// Span.
        span: Span,
    },
    /// A `let` of the struct `up` environments up.
    LetRef {
        /// Environments to go up.
        up: u32,
        /// Index into `StructLit::lets`.
        idx: u32,
        /// Name (for messages).
        name: Arc<str>,
        /// Span.
        span: Span,
    },
    /// A binding (comprehension variable, pattern label) of the environment `up` up.
    BindRef {
        /// Environments to go up.
        up: u32,
        /// Index of the binding.
        idx: u32,
        /// Span.
        span: Span,
    },
    /// An imported package.
    Import(Arc<str>, Span),
    /// A member of a std package (`strings.ToUpper`).
    PkgMember(Arc<str>, Arc<str>, Span),
    /// `x.sel`
    Selector(Arc<Expr>, Label, Span),
    /// `x[i]`
    Index(Arc<Expr>, Arc<Expr>, Span),
    /// `x[lo:hi]`
    Slice(Arc<Expr>, Option<Arc<Expr>>, Option<Arc<Expr>>, Span),
    /// `f(args)`
    Call(Arc<Expr>, Arc<[Expr]>, Span),
    /// A unary operator.
    Unary(UnaryOp, Arc<Expr>, Span),
    /// A binary operator other than `&` and `|`.
    Binary(BinaryOp, Arc<Expr>, Arc<Expr>, Span),
    /// `a & b & ...`
    Unify(Arc<[Expr]>, Span),
    /// `a | *b | ...`: (alternative, default mark).
    Disj(Arc<[(Expr, bool)]>, Span),
    /// String or bytes interpolation.
    Interp(Arc<[InterpPart]>, bool, Span),
    /// The evaluated value of a vertex (used for builtins and API unification).
    Vertex(VId, Span),
    /// An error found during compilation.
    Bad(Arc<Bottom>),
}

impl Expr {
    /// The span.
    pub fn span(&self) -> Span {
        match self {
            Expr::Lit(_, s)
            | Expr::Import(_, s)
            | Expr::PkgMember(_, _, s)
            | Expr::Selector(_, _, s)
            | Expr::Index(_, _, s)
            | Expr::Slice(_, _, _, s)
            | Expr::Call(_, _, s)
            | Expr::Unary(_, _, s)
            | Expr::Binary(_, _, _, s)
            | Expr::Unify(_, s)
            | Expr::Disj(_, s)
            | Expr::Interp(_, _, s)
            | Expr::Vertex(_, s) => *s,
            Expr::FieldRef { span, .. }
            | Expr::SelfRef { span, .. }
            | Expr::LetRef { span, .. }
            | Expr::BindRef { span, .. } => *span,
            Expr::Struct(s) => s.span,
            Expr::List(l) => l.span,
            Expr::Bad(b) => b.span,
        }
    }
}
