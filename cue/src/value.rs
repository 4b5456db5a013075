//! [`Value`]: a value in a [`crate::Runtime`], and its whole API: lookup (by dotted text, by
//! [`Path`], hidden fields of imported packages), field iteration with a [`FieldFilter`],
//! unification, validation, and export as data ([`crate::Data`]), JSON text, YAML, CUE text, a
//! `serde_json::Value` or a typed decoding.
//!
//! Rules (docs/design/render.md §1.3–§1.8; docs/design/conventions.md §2, §5; CUE `doc/ref/spec.md`):
//! - a value is a handle into its runtime's evaluator; every method is one call on it (module
//!   `shared`), and a method that builds something (unify, fill) returns a new value, the
//!   receiver unchanged; a value of another runtime is unified as its concrete data;
//! - [`Value::fill_path`] unifies the value with the data placed at the path (an index selector
//!   places it in an open list, so the list keeps its other elements); data enters as a
//!   `serde_json::Value` tree as in [`crate::Runtime::value_from_json`], never as text;
//! - [`Value::to_json_value`] exports what [`Value::to_json`] exports (regular fields, defaults
//!   taken, CUE's field order, bytes as standard base64), as a `serde_json::Value`; a number
//!   outside what `serde_json` holds (integers beyond `i64`/`u64`, floats beyond `f64`) is a
//!   [`DiagCode::Limit`] diagnostic at its path, never a silent rounding of an integer;
//! - [`Value::decode`] is `to_json_value` followed by `serde_json::from_value`; its failures are
//!   [`Error::Eval`] and [`Error::Shape`];
//! - [`Value::check_unify`] is `unify` followed by `validate`, keeping nothing it evaluated (as
//!   [`crate::Runtime::export_expr`]): a check whose result is only the verdict;
//! - [`Value::fields_where`] yields the arcs the [`FieldFilter`] admits, in CUE's order, with
//!   their [`Selector`] and [`FieldConstraint`], then, if `patterns` is set, the pattern
//!   constraints (`[string]: T`) as [`Selector::Pattern`] with constraint `Optional` (a pattern
//!   applies to fields that may exist, spec "Pattern and default constraints") and the
//!   constraint's value as it applies to a field whose label is not known (the label is
//!   `string`); [`Value::fill_path`] at a pattern selector is an error value (a pattern is not a
//!   place data can go);
//! - hidden fields of an imported package are reached with [`Value::lookup_hidden`] (name and
//!   import path), since a [`Path`], like CUE's path syntax, names only the main package's;
//! - validation and export report every error with its path, at most `eval::MAX_ERRORS` of them
//!   (then one [`DiagCode::Limit`] diagnostic says so); output past `Config::max_output_bytes` is
//!   a `Limit` diagnostic (JSON, YAML) or cut with a last comment line saying so (CUE text).

use crate::adt::{self, Expr, Kinds, Label, LabelKind, VId};
use crate::ast;
use crate::data::Val;
use crate::diagnostics::{DiagCode, Diagnostic};
use crate::error::Error;
use crate::eval::{self, Ev};
use crate::export;
use crate::path::{Path, Selector};
use crate::shared::{enter, lock, throw_away, Inner};
use crate::source::Span;
use base64::Engine as _;
use bigdecimal::BigDecimal;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

pub use crate::ast::FieldConstraint;

/// A value in a [`Runtime`].
#[derive(Clone)]
pub struct Value {
    pub(crate) inner: Arc<Mutex<Inner>>,
    pub(crate) v: VId,
}

/// Which arcs [`Value::fields_where`] yields. A field is yielded when its label class is
/// selected (`fields`, `definitions`, `hidden`) and its constraint is: regular fields of a
/// selected class always, `?` fields if `optional`, `!` fields if `required`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldFilter {
    /// Regular-label fields and list elements.
    pub fields: bool,
    /// Definitions (`#D`).
    pub definitions: bool,
    /// Hidden fields and hidden definitions (`_x`, `_#x`).
    pub hidden: bool,
    /// Also optional (`a?:`) fields of the selected classes.
    pub optional: bool,
    /// Also required (`a!:`) fields of the selected classes.
    pub required: bool,
    /// Also the pattern constraints (`[filter]: T`), after the arcs.
    pub patterns: bool,
}

impl FieldFilter {
    /// What export sees: regular fields with a regular constraint.
    pub fn data() -> FieldFilter {
        FieldFilter {
            fields: true,
            ..FieldFilter::default()
        }
    }

    /// Definitions only, whatever their constraint.
    pub fn definitions() -> FieldFilter {
        FieldFilter {
            definitions: true,
            optional: true,
            required: true,
            ..FieldFilter::default()
        }
    }

    /// Every arc and every pattern constraint.
    pub fn all() -> FieldFilter {
        FieldFilter {
            fields: true,
            definitions: true,
            hidden: true,
            optional: true,
            required: true,
            patterns: true,
        }
    }
}

/// One arc yielded by [`Value::fields_where`].
#[derive(Clone, Debug)]
pub struct Field {
    /// The selector of the arc under its parent.
    pub selector: Selector,
    /// `a:`, `a?:` or `a!:` (list elements are regular).
    pub constraint: FieldConstraint,
    /// The arc's value.
    pub value: Value,
}

impl std::fmt::Debug for Value {
    /// The value's path from its package root (`Value(a.b)`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Value({})", self.path())
    }
}

impl Value {
    fn with<R>(&self, f: impl FnOnce(&mut Ev, VId) -> R) -> R {
        enter(&self.inner, |g| f(&mut g.ev, self.v))
    }

    /// The arcs of this struct, in CUE's order, whose label `keep_label` admits (internal arcs
    /// never) and whose constraint `keep_constraint` admits. An arc is evaluated only after its
    /// label is admitted, so unselected hidden fields (catalog `_test*` data) cost nothing. The
    /// one arc walk behind [`Value::fields`] and [`Value::fields_where`].
    pub(crate) fn pick_arcs(
        &self,
        keep_label: impl Fn(&Label) -> bool,
        keep_constraint: impl Fn(Option<ast::FieldConstraint>) -> bool,
    ) -> Vec<(Label, Option<ast::FieldConstraint>, VId)> {
        self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            let arcs = ev.vertex(v).arc_list();
            let mut out = Vec::new();
            for (l, a) in arcs {
                if matches!(l.kind, LabelKind::Internal) || !keep_label(&l) {
                    continue;
                }
                ev.eval(a);
                let c = ev.vertex(a).constraint();
                if keep_constraint(c) {
                    out.push((l, c, a));
                }
            }
            out
        })
    }

    fn wrap(&self, v: VId) -> Value {
        Value {
            inner: self.inner.clone(),
            v,
        }
    }

    /// Looks up a dotted path (`a.b`, `#Def.x`, `_hidden`, `"quoted-label".x`).
    pub fn lookup(&self, path: &str) -> Option<Value> {
        let mut cur = self.clone();
        for seg in parse_path(path) {
            cur = cur.lookup_label(&seg)?;
        }
        Some(cur)
    }

    /// Looks up one label (an identifier-like label is classified by its prefix).
    pub fn lookup_label(&self, name: &str) -> Option<Value> {
        let r = self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            let labels = [Label::ident(name), Label::string(name)];
            let mut found = None;
            let x = ev.vertex(v);
            for l in labels {
                if let Some(a) = x.arc(&l) {
                    found = Some(a);
                    break;
                }
            }
            if found.is_none() && x.is_list() {
                if let Ok(i) = name.parse::<usize>() {
                    found = x.arc(&Label::index(i));
                }
            }
            if let Some(a) = found {
                ev.eval(a);
            }
            found
        })?;
        Some(self.wrap(r))
    }

    /// The fields of a struct: regular ones, plus optional ones if asked, plus definitions and
    /// hidden fields if asked. Labels are returned as written.
    pub fn fields(&self, optional: bool, defs_and_hidden: bool) -> Vec<(String, Value)> {
        let arcs = self.pick_arcs(
            |l| defs_and_hidden || l.is_regular() || l.kind == LabelKind::Index,
            |c| optional || c == Some(ast::FieldConstraint::Regular),
        );
        let ids: Vec<(String, VId)> = arcs
            .into_iter()
            .map(|(l, _, a)| (l.name.to_string(), a))
            .collect();
        ids.into_iter().map(|(n, a)| (n, self.wrap(a))).collect()
    }

    /// The allowed kinds ([`adt::K_INT`] etc.); 0 for bottom.
    pub fn kind(&self) -> Kinds {
        self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            ev.vertex(v).kind()
        })
    }

    /// The default of a disjunction (the value itself otherwise).
    pub fn default(&self) -> Value {
        let d = self.with(|ev, v| {
            ev.eval(v);
            ev.deref(v)
        });
        self.wrap(d)
    }

    /// `true` if the value is an error.
    pub fn is_bottom(&self) -> bool {
        self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            ev.vertex(v).err().is_some()
        })
    }

    /// Whether a closed struct allows a regular field `label`.
    pub fn allows(&self, label: &str) -> bool {
        let probe = Value {
            inner: self.inner.clone(),
            v: self.with(|ev, _| {
                ev.anon(
                    None,
                    Expr::Struct(Arc::new(adt::StructLit {
                        fields: vec![adt::FieldDecl {
                            label: adt::LabelExpr::Fixed(Label::string(label)),
                            constraint: ast::FieldConstraint::Optional,
                            value: Expr::Lit(adt::Val::Top, Span::default()),
                            span: Span::default(),
                        }],
                        ..Default::default()
                    })),
                )
            }),
        };
        let u = self.unify(&probe);
        let lab = Label::string(label);
        u.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            match ev.vertex(v).arc(&lab) {
                Some(a) => {
                    ev.eval(a);
                    ev.vertex(a).err().is_none()
                }
                None => false,
            }
        })
    }

    /// Unifies two values. A value of another runtime is taken by its concrete data (an error
    /// value if it is not concrete).
    pub fn unify(&self, other: &Value) -> Value {
        let e = self.unify_expr(other);
        let u = self.with(|ev, _| ev.anon(None, e));
        self.wrap(u)
    }

    /// The expression `self & other` (`other` as data if it belongs to another runtime).
    fn unify_expr(&self, other: &Value) -> Expr {
        let span = Span::default();
        let a = self.v;
        let bexpr = if Arc::ptr_eq(&self.inner, &other.inner) {
            Expr::Vertex(other.v, span)
        } else {
            match other.to_data() {
                Ok(d) => eval::data_to_expr(&d, span),
                Err(d) => Expr::Bad(adt::Bottom::new(
                    adt::ErrorCode::Incomplete,
                    format!(
                        "value of another runtime is not concrete: {}",
                        d.first().map(|x| x.message.as_str()).unwrap_or("")
                    ),
                    span,
                )),
            }
        };
        Expr::Unify(Arc::new([Expr::Vertex(a, span), bexpr]), span)
    }

    fn collect(
        &self,
        ev: &mut Ev,
        v: VId,
        concrete: bool,
        keep: bool,
    ) -> (Option<Val>, Vec<Diagnostic>) {
        let mut errs = Vec::new();
        // Validation reads only the errors: the data is built only if it is kept.
        let data = if keep {
            ev.to_data(v, &mut errs, 0)
        } else {
            ev.check_data(v, &mut errs, 0);
            None
        };
        ev.collect_fatal_hidden(v, &mut errs, 0, false);
        let truncated = errs.len() >= eval::MAX_ERRORS;
        let mut diags = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (at, b) in errs {
            if !concrete && !b.code.is_fatal() {
                continue;
            }
            let path = ev.path_text(at);
            for d in Diagnostic::from_error_in(&path, &b, ev.limits()) {
                if seen.insert((d.path.clone(), d.message.clone())) {
                    diags.push(d);
                }
            }
        }
        if truncated {
            diags.push(Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message: format!(
                    "too many errors: only the first {} looked at",
                    eval::MAX_ERRORS
                ),
                span: None,
                related: Vec::new(),
            });
        }
        (data, diags)
    }

    /// Validates the value: every error, and with `concrete` every non-concrete regular field,
    /// is reported with its path.
    pub fn validate(&self, concrete: bool) -> Result<(), Vec<Diagnostic>> {
        let (_, diags) = enter(&self.inner, |g| {
            self.collect(&mut g.ev, self.v, concrete, false)
        });
        if diags.is_empty() {
            Ok(())
        } else {
            Err(diags)
        }
    }

    /// The concrete data of the value (regular fields, defaults taken).
    pub fn to_data(&self) -> Result<Val, Vec<Diagnostic>> {
        enter(&self.inner, |g| self.data_in(&mut g.ev))
    }

    /// [`Value::to_data`] with the evaluator at hand.
    pub(crate) fn data_in(&self, ev: &mut Ev) -> Result<Val, Vec<Diagnostic>> {
        let (d, diags) = self.collect(ev, self.v, true, true);
        match d {
            Some(d) if diags.is_empty() => Ok(d),
            _ => Err(if diags.is_empty() {
                vec![Diagnostic::load("value is not concrete")]
            } else {
                diags
            }),
        }
    }

    /// JSON export.
    pub fn to_json(&self) -> Result<String, Vec<Diagnostic>> {
        let d = self.to_data()?;
        let max = lock(&self.inner).ev.config.max_output_bytes;
        export::to_json(&d, max).ok_or_else(|| {
            vec![Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message: format!("output exceeds {max} bytes"),
                span: None,
                related: Vec::new(),
            }]
        })
    }

    /// The value as CUE text, concrete or not (what `cue eval` prints): regular fields,
    /// required and optional fields and definitions, disjunctions with their defaults, kinds and
    /// bounds; errors inline as `_|_ // message`. The root of a package prints as a file's
    /// declarations. Never fails: use [`Value::validate`] to learn about errors. Text past
    /// `Config::max_output_bytes` is cut (no further field or element is printed), and a last
    /// comment line says so.
    pub fn to_cue(&self) -> String {
        enter(&self.inner, |g| self.to_cue_in(g))
    }

    fn to_cue_in(&self, g: &mut Inner) -> String {
        let root =
            g.ev.get_vertex(self.v)
                .is_some_and(|x| x.parent().is_none());
        let mut s = if root {
            g.ev.print_cue_file(self.v)
        } else {
            g.ev.print_cue(self.v)
        };
        if !s.ends_with('\n') {
            s.push('\n');
        }
        let max = g.ev.config.max_output_bytes;
        if s.len() > max {
            s.push_str(&format!("// output cut: longer than {max} bytes\n"));
        }
        s
    }

    /// YAML export.
    pub fn to_yaml(&self) -> Result<String, Vec<Diagnostic>> {
        let d = self.to_data()?;
        let max = lock(&self.inner).ev.config.max_output_bytes;
        let y = export::to_yaml(&d).map_err(|message| {
            vec![Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message,
                span: None,
                related: Vec::new(),
            }]
        })?;
        if y.len() > max {
            return Err(vec![Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message: format!("output exceeds {max} bytes"),
                span: None,
                related: Vec::new(),
            }]);
        }
        Ok(y)
    }

    /// The path of the value from its package root.
    pub fn path(&self) -> String {
        self.with(|ev, v| ev.path_text(v))
    }

    /// Looks up a [`Path`]; `None` if a selector names no arc (an index selects only in a
    /// list). A value whose evaluation hit a limit has no arcs: when `None` matters, ask
    /// [`Runtime::limit_exceeded`] whether a limit (cancellation, deadline) is the reason.
    pub fn lookup_path(&self, path: &Path) -> Option<Value> {
        // One call on the evaluator for the whole path (each call may map a stack segment).
        let a = self.with(|ev, mut v| {
            for s in path.selectors() {
                if matches!(s, Selector::Pattern(_)) {
                    return None;
                }
                let label = s.label();
                ev.eval(v);
                let d = ev.deref(v);
                let x = ev.vertex(d);
                if label.kind == LabelKind::Index && !x.is_list() {
                    return None;
                }
                v = x.arc(&label)?;
                ev.eval(v);
            }
            Some(v)
        })?;
        Some(self.wrap(a))
    }

    /// The hidden field (or hidden definition) `name` (`_x`, `_#x`) of the package with import
    /// path `package` (as the importing file wrote it, without major or qualifier, e.g.
    /// `example.com/lib`), in this value. CUE scopes hidden fields by package, and a [`Path`]
    /// (like CUE's own path syntax) addresses only those of the main package: this is the way
    /// to the others. `None` if the package was not loaded into this runtime or has no such
    /// field here.
    pub fn lookup_hidden(&self, name: &str, package: &str) -> Option<Value> {
        let scope = *lock(&self.inner).hidden_scopes.get(package)?;
        let mut label = adt::Label::ident(name);
        if !label.is_hidden() {
            return None;
        }
        label.index = u32::try_from(scope).unwrap_or(u32::MAX);
        let a = self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            let a = ev.vertex(v).arc(&label)?;
            ev.eval(a);
            Some(a)
        })?;
        Some(self.wrap(a))
    }

    /// The arcs the filter admits, in CUE's order (see [`FieldFilter`]).
    pub fn fields_where(&self, filter: FieldFilter) -> Vec<Field> {
        let picked: Vec<(Selector, FieldConstraint, VId)> = self
            .pick_arcs(
                |l| match l.kind {
                    LabelKind::Regular | LabelKind::Index => filter.fields,
                    LabelKind::Def => filter.definitions,
                    LabelKind::Hidden | LabelKind::HiddenDef => filter.hidden,
                    LabelKind::Internal => false,
                },
                |c| match c.unwrap_or(FieldConstraint::Regular) {
                    FieldConstraint::Regular => true,
                    FieldConstraint::Optional => filter.optional,
                    FieldConstraint::Required => filter.required,
                },
            )
            .into_iter()
            .filter_map(|(l, c, a)| {
                let s = Selector::of_label(&l)?;
                Some((s, c.unwrap_or(FieldConstraint::Regular), a))
            })
            .collect();
        let mut out: Vec<Field> = picked
            .into_iter()
            .map(|(selector, constraint, a)| Field {
                selector,
                constraint,
                value: self.wrap(a),
            })
            .collect();
        if filter.patterns {
            let pats = self.with(|ev, v| {
                ev.pattern_constraints(v)
                    .into_iter()
                    .map(|(f, a)| (ev.print_cue(f), a))
                    .collect::<Vec<_>>()
            });
            out.extend(pats.into_iter().map(|(text, a)| Field {
                selector: Selector::Pattern(text),
                constraint: FieldConstraint::Optional,
                value: self.wrap(a),
            }));
        }
        out
    }

    /// The value unified with `data` placed at `path` (see the module rules). The receiver is
    /// unchanged.
    pub fn fill_path(&self, path: &Path, data: &serde_json::Value) -> Value {
        let span = Span::default();
        let mut e = eval::data_to_expr(&data_of_json(data), span);
        for s in path.selectors().iter().rev() {
            e = match s {
                Selector::Pattern(f) => Expr::Bad(adt::Bottom::new(
                    adt::ErrorCode::Eval,
                    format!("cannot fill a pattern constraint ([{f}]): it is not a field"),
                    span,
                )),
                Selector::Index(i) => {
                    let mut elems: Vec<adt::ListElemC> = (0..*i)
                        .map(|_| adt::ListElemC::Expr(Expr::Lit(adt::Val::Top, span)))
                        .collect();
                    elems.push(adt::ListElemC::Expr(e));
                    Expr::List(Arc::new(adt::ListLit {
                        elems,
                        ellipsis: Some(None),
                        span,
                    }))
                }
                s => Expr::Struct(Arc::new(adt::StructLit {
                    fields: vec![adt::FieldDecl {
                        label: adt::LabelExpr::Fixed(s.label()),
                        constraint: FieldConstraint::Regular,
                        value: e,
                        span,
                    }],
                    ..Default::default()
                })),
            };
        }
        let a = self.v;
        let u = self.with(|ev, _| {
            let b = ev.anon(None, e);
            ev.anon(
                None,
                Expr::Unify(
                    Arc::new([Expr::Vertex(a, span), Expr::Vertex(b, span)]),
                    span,
                ),
            )
        });
        self.wrap(u)
    }

    /// Whether `self` and `other` are one value by construction: values of one runtime each
    /// made only of references, to the same vertices (`a: #A & #B` and `b: #B & #A`,
    /// wherever they are written). Unifying either with a third value gives the same result.
    /// `false` says nothing: equal values may be built otherwise.
    pub fn same_sources(&self, other: &Value) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            && enter(&self.inner, |g| {
                let a = g.ev.conjunct_targets(self.v);
                a.is_some() && a == g.ev.conjunct_targets(other.v)
            })
    }

    /// [`Value::unify`] then [`Value::validate`], keeping nothing it evaluated (see the module
    /// rules and [`Runtime::export_expr`]): a check whose result is only the verdict.
    pub fn check_unify(&self, other: &Value, concrete: bool) -> Result<(), Vec<Diagnostic>> {
        let e = self.unify_expr(other);
        let diags = enter(&self.inner, |g| {
            throw_away(g, |g| {
                let u = g.ev.anon(None, e);
                self.collect(&mut g.ev, u, concrete, false).1
            })
        });
        if diags.is_empty() {
            Ok(())
        } else {
            Err(diags)
        }
    }

    /// The exported data as a `serde_json::Value` in CUE's field order (see the module rules).
    pub fn to_json_value(&self) -> Result<serde_json::Value, Vec<Diagnostic>> {
        let d = self.to_data()?;
        json_at(&d, || self.path())
    }

    /// The exported data decoded into `T`.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        let j = self.to_json_value().map_err(Error::Eval)?;
        serde_json::from_value(j).map_err(Error::Shape)
    }
}
fn parse_path(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    for c in path.chars() {
        match c {
            '"' => in_q = !in_q,
            '.' if !in_q => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.retain(|s| !s.is_empty());
    out
}

pub(crate) fn data_of_json(j: &serde_json::Value) -> Val {
    use Val as B;
    match j {
        serde_json::Value::Null => B::Null,
        serde_json::Value::Bool(b) => B::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                B::Int(BigInt::from(i))
            } else if let Some(u) = n.as_u64() {
                B::Int(BigInt::from(u))
            } else {
                // serde_json prints a finite f64 in a form BigDecimal reads; it never holds NaN
                // or infinities.
                match BigDecimal::from_str(&n.to_string()) {
                    Ok(d) => B::Float(d),
                    Err(_) => B::Float(BigDecimal::from(0)),
                }
            }
        }
        serde_json::Value::String(s) => B::String(s.clone()),
        serde_json::Value::Array(xs) => B::List(xs.iter().map(data_of_json).collect()),
        serde_json::Value::Object(m) => B::Struct(
            m.iter()
                .map(|(k, v)| (k.clone(), data_of_json(v)))
                .collect(),
        ),
    }
}

fn limit(path: &Path, message: String) -> Diagnostic {
    Diagnostic {
        code: DiagCode::Limit,
        path: path.diagnostic_text(),
        message,
        span: None,
        related: Vec::new(),
    }
}

/// `d` as JSON; an error is positioned at the value's own path (`path`, computed only then)
/// plus the path below it.
pub(crate) fn json_at(
    d: &Val,
    path: impl FnOnce() -> String,
) -> Result<serde_json::Value, Vec<Diagnostic>> {
    json_of_data(d, At::Root).map_err(|mut e| {
        let at = Path::parse(&path()).unwrap_or_default();
        let below = Path::parse(&e.path).unwrap_or_default();
        let mut full = at.selectors().to_vec();
        full.extend(below.selectors().iter().cloned());
        e.path = Path::new(full).diagnostic_text();
        vec![e]
    })
}

/// Where [`json_of_data`] is below the value it started from: a chain of borrowed steps,
/// made into a [`Path`] only for an error (a path built per node, with every selector
/// copied, was most of the conversion's allocations).
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Field(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn path(&self) -> Path {
        let mut sels = Vec::new();
        let mut cur = self;
        loop {
            match cur {
                At::Root => break,
                At::Field(up, k) => {
                    sels.push(Selector::Field((*k).to_string()));
                    cur = up;
                }
                At::Index(up, i) => {
                    sels.push(Selector::Index(*i));
                    cur = up;
                }
            }
        }
        sels.reverse();
        Path::new(sels)
    }
}

fn json_of_data(d: &Val, at: At<'_>) -> Result<serde_json::Value, Diagnostic> {
    use Val as B;
    Ok(match d {
        B::Null => serde_json::Value::Null,
        B::Bool(b) => serde_json::Value::Bool(*b),
        B::Int(i) => {
            if let Some(x) = i.to_i64() {
                serde_json::Value::from(x)
            } else if let Some(x) = i.to_u64() {
                serde_json::Value::from(x)
            } else {
                return Err(limit(
                    &at.path(),
                    format!("integer {i} is outside the 64-bit range of a JSON value"),
                ));
            }
        }
        B::Float(f) => {
            let x = f.to_string().parse::<f64>().ok().filter(|x| x.is_finite());
            match x.and_then(serde_json::Number::from_f64) {
                Some(n) => serde_json::Value::Number(n),
                None => {
                    return Err(limit(
                        &at.path(),
                        format!("float {f} is outside the range of a JSON value"),
                    ))
                }
            }
        }
        B::String(s) => serde_json::Value::String(s.clone()),
        B::Bytes(b) => {
            serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        B::List(xs) => {
            let mut out = Vec::with_capacity(xs.len());
            for (i, x) in xs.iter().enumerate() {
                out.push(json_of_data(x, At::Index(&at, i))?);
            }
            serde_json::Value::Array(out)
        }
        B::Struct(fs) => {
            let mut m = serde_json::Map::with_capacity(fs.len());
            for (k, x) in fs {
                let v = json_of_data(x, At::Field(&at, k))?;
                m.insert(k.clone(), v);
            }
            serde_json::Value::Object(m)
        }
        B::Opaque(_) => {
            return Err(Diagnostic {
                code: DiagCode::Incomplete,
                path: at.path().diagnostic_text(),
                message: "value is not concrete".into(),
                span: None,
                related: Vec::new(),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Runtime};

    fn assert_send<T: Send + Sync>() {}

    #[test]
    fn values_are_send() {
        assert_send::<Value>();
        assert_send::<Runtime>();
    }

    fn build(src: &str) -> Value {
        Runtime::default()
            .build_files(&[("in.cue".into(), src.into())])
            .unwrap()
    }

    #[test]
    fn api_lookup_unify_allows() {
        let v = build("#D: {a: int, b?: string}\nx: #D & {a: 1}\n_h: 3\n");
        let d = v.lookup("#D").unwrap();
        assert!(d.allows("a"));
        assert!(!d.allows("zzz"));
        assert_eq!(v.lookup("x.a").unwrap().to_json().unwrap(), "1\n");
        assert_eq!(v.lookup("_h").unwrap().to_json().unwrap(), "3\n");
        let y = d.unify(&build("a: 2"));
        assert!(y.validate(true).is_ok());
        assert_eq!(y.lookup("a").unwrap().to_json().unwrap(), "2\n");
        let z = d.unify(&build("a: 2, c: 3"));
        assert!(z.validate(false).is_err());
        assert_eq!(d.fields(true, false).len(), 2);
        assert_eq!(d.fields(false, false).len(), 1);
    }

    #[test]
    fn defaults_and_errors() {
        let v = build("a: *1 | 2\nb: a & 2\nc: int\n");
        assert_eq!(v.lookup("a").unwrap().to_json().unwrap(), "1\n");
        assert_eq!(v.lookup("b").unwrap().to_json().unwrap(), "2\n");
        let errs = v.validate(true).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "c");
        assert_eq!(errs[0].code, DiagCode::Incomplete);
    }

    /// Regression (eval fuzz target, 2026-12-03): lists that hold each other grow without end;
    /// evaluation stops at a limit, and reporting stops after `MAX_ERRORS` errors instead of
    /// printing (and computing the path of) every one of the failing fields.
    #[test]
    fn runaway_values_report_a_bounded_number_of_errors() {
        // The depth (or step) limit is what must strike, not the wall clock: on a loaded machine
        // a debug build passes the default 8 s first.
        let rt = Runtime::new(Config {
            max_depth: 300,
            max_wall_time: std::time::Duration::from_secs(600),
            ..Config::default()
        });
        let src = "f: [g, g, g, g, g, g, g]\ng: [h, h, h, h, h, h, h]\n\
                   h: [i, i, i, i, j, i, i]\ni: [j, g, g, g, g, j, j]\nj: 1\n";
        let v = rt.build_files(&[("in.cue".into(), src.into())]).unwrap();
        let errs = v.validate(true).unwrap_err();
        assert!(errs.len() <= eval::MAX_ERRORS + 1, "{} errors", errs.len());
        assert!(errs.iter().any(|d| d.code == DiagCode::Limit), "{errs:?}");
    }

    /// Regression (eval fuzz target, 2026-12-04, an OOM under ASan): printing the runaway lists
    /// above as CUE walked the tree of seven elements per level to the print depth (7^200
    /// visits; 22 GB and minutes without ASan). The text stops at `max_output_bytes`.
    #[test]
    fn printing_a_runaway_value_stops_at_the_output_limit() {
        let max = 64 << 10;
        let rt = Runtime::new(Config {
            max_output_bytes: max,
            ..Config::default()
        });
        let src = "f: [g, g, g, g, g, g, g]\ng: [h, h, h, h, h, h, h]\n\
                   h: [i, i, i, i, j, i, i]\ni: [j, g, g, g, g, j, j]\nj: 1\n";
        let v = rt.build_files(&[("in.cue".into(), src.into())]).unwrap();
        let text = v.to_cue();
        // What passes the limit: the brackets closing the levels being printed, one indented
        // line each.
        let closing = eval::print::MAX_DEPTH * (2 * eval::print::MAX_DEPTH + 8);
        assert!(text.len() < max + closing, "{} bytes", text.len());
        assert!(
            text.ends_with(&format!("// output cut: longer than {max} bytes\n")),
            "{}",
            &text[text.len().saturating_sub(200)..]
        );
        assert!(
            text.starts_with("f: [\n"),
            "{}",
            &text[..200.min(text.len())]
        );
    }

    /// A package whose `#T` computes an output from `in` with lets, comprehensions, patterns
    /// (a cached label filter), a call list and a default decided by the input.
    const PAIRS: &str = r#"
#T: {
	in: items: [...{name: string, v: int}]
	let n = len(in.items)
	out: {
		count: n
		names: [for i in in.items {i.name}]
		m: [string]: int
		m: {for i in in.items {(i.name): i.v}}
		ok: and([true, for i in in.items {i.v >= 0}])
		kind: *"small" | "big"
		if n > 2 {kind: "big"}
	}
}
data: {items: [{name: "a", v: 1}]}
"#;

    const INPUTS: &[&str] = &[
        r#"[{name: "a", v: 1}]"#,
        r#"[{name: "x", v: 2}, {name: "y", v: 3}, {name: "z", v: 0}]"#,
        r#"[]"#,
        r#"[{name: "q", v: 7}, {name: "r", v: 8}]"#,
    ];

    fn vertices(v: &Value) -> usize {
        lock(&v.inner).ev.vertex_count()
    }

    fn stats(v: &Value) -> eval::Stats {
        lock(&v.inner).ev.stats.clone()
    }

    #[test]
    fn a_hidden_value_made_of_the_same_definitions_is_walked_once_unless_it_fails() {
        let rt = Runtime::default();
        let clean = r#"
#Meta: {name: string | *"m", labels: [string]: string}
#Bp: {#meta: #Meta, spec: {replicas: int | *1, image: string | *"x"}, ...}
#Base: {kind: "bp", ...}
c1: {#bp: #Base & #Bp, name: "a"}
c2: {#bp: #Base & #Bp, name: "b"}
c3: {#bp: #Bp & #Base, name: "c"}
c4: {#bp: #Bp, name: "d"}
"#;
        let pkg = rt.build_files(&[("in.cue".into(), clean.into())]).unwrap();
        pkg.validate(true).unwrap();
        // `#Bp.#meta` is walked with `#Bp` (it is `#Meta`); c1's `#bp` is walked, its `#meta`
        // not again; c2's and c3's (the same two definitions in another order) are not walked
        // again; c4's is another value (one definition), walked, its `#meta` not again.
        assert_eq!(stats(&pkg).hidden_reused, 4, "{:?}", stats(&pkg));
        // A value that held an error is walked wherever it occurs: every path is reported.
        let failing = r#"
#A: {a: int}
#B: {a: string}
c1: {#h: #A & #B}
c2: {#h: #A & #B}
"#;
        let pkg = rt
            .build_files(&[("in.cue".into(), failing.into())])
            .unwrap();
        let diags = pkg.validate(false).unwrap_err();
        let paths: Vec<&str> = diags.iter().map(|d| d.path.as_str()).collect();
        assert!(paths.contains(&"c1.#h.a"), "{paths:?}");
        assert!(paths.contains(&"c2.#h.a"), "{paths:?}");
    }

    #[test]
    fn export_expr_drops_what_it_built_and_keeps_what_it_changed() {
        let rt = Runtime::default();
        let pkg = rt.build_files(&[("in.cue".into(), PAIRS.into())]).unwrap();
        pkg.validate(false).unwrap();
        // The first call reaches `#T`'s arcs for the first time and evaluates them in place:
        // that changes vertices built before, so all of it is kept.
        let before = vertices(&pkg);
        let first = rt.export_expr(&pkg, "(#T & {in: data}).out").unwrap();
        assert_eq!(
            first,
            serde_json::json!({"count": 1, "names": ["a"], "m": {"a": 1}, "ok": true, "kind": "small"})
        );
        assert!(vertices(&pkg) > before);
        assert_eq!(stats(&pkg).kept, 1);
        // Later calls change nothing older: each leaves the evaluator as it found it.
        for (i, items) in INPUTS.iter().enumerate() {
            let before = vertices(&pkg);
            let src = format!("(#T & {{in: items: {items}}}).out");
            rt.export_expr(&pkg, &src).unwrap();
            assert_eq!(vertices(&pkg), before, "call {i}");
            assert_eq!(stats(&pkg).rolled_back, i as u64 + 1);
        }
    }

    #[test]
    fn export_expr_gives_what_compiling_and_exporting_gives() {
        // The same sequence of outputs, errors included, through export_expr (which reuses the
        // ids and cache slots it frees) and through compile_expr + to_json_value (which keep
        // everything) in a runtime of its own, then the same package data afterwards.
        let a = Runtime::default();
        let pa = a.build_files(&[("in.cue".into(), PAIRS.into())]).unwrap();
        let b = Runtime::default();
        let pb = b.build_files(&[("in.cue".into(), PAIRS.into())]).unwrap();
        let mut srcs: Vec<String> = Vec::new();
        for _ in 0..2 {
            for items in INPUTS {
                srcs.push(format!("(#T & {{in: items: {items}}}).out"));
            }
            srcs.push("(#T & {in: items: [{name: 1}]}).out".into());
            srcs.push("(#T & {in: items: [{name: \"n\"}]}).out".into());
            srcs.push("#T.out".into());
        }
        for src in &srcs {
            let x = a.export_expr(&pa, src).map_err(|d| a.render(&d));
            let y = b
                .compile_expr(&pb, src)
                .and_then(|v| v.to_json_value())
                .map_err(|d| b.render(&d));
            assert_eq!(x.is_ok(), y.is_ok(), "{src}: {x:?} vs {y:?}");
            if let (Ok(x), Ok(y)) = (&x, &y) {
                assert_eq!(x, y, "{src}");
            }
        }
        assert!(stats(&pa).rolled_back >= 10, "{:?}", stats(&pa));
        assert_eq!(pa.to_json().unwrap(), pb.to_json().unwrap());
        assert_eq!(pa.to_cue(), pb.to_cue());
    }

    /// File-level lets, call lists in one, and a pattern inside a comprehension body are
    /// first reached inside a throw-away evaluation (validation cannot evaluate them: the input
    /// is missing), from environments built before it: their cache entries point at vertices
    /// the rollback frees, and must go with them, or the next evaluation would find a vertex
    /// id that now names something else.
    const FIRST_REACH: &str = r#"
let L = {k: 10}
let M = {k: 100, all: and([true, k > 1])}
let A = and([{p: 1}, {q: M.k}])
#T: {
	in: a: int
	out: {
		v: in.a + L.k
		if in.a > 0 {
			m: [string]: {from: "pattern"}
			m: {x: n: in.a, y: n: M.k}
			ok: M.all
			both: A
		}
	}
}
"#;

    #[test]
    fn export_expr_drops_cache_entries_of_older_scopes() {
        let a = Runtime::default();
        let pa = a
            .build_files(&[("in.cue".into(), FIRST_REACH.into())])
            .unwrap();
        pa.validate(false).unwrap();
        let b = Runtime::default();
        let pb = b
            .build_files(&[("in.cue".into(), FIRST_REACH.into())])
            .unwrap();
        pb.validate(false).unwrap();
        for n in [1, 2, -3, 4, 5] {
            let src = format!("(#T & {{in: a: {n}}}).out");
            let x = a.export_expr(&pa, &src).unwrap();
            let y = b.compile_expr(&pb, &src).unwrap().to_json_value().unwrap();
            assert_eq!(x, y, "{src}");
            // Every call builds new vertices from the ids the previous one freed.
            let z = a.export_expr(&pa, "[{p: 1}, {q: [2, 3]}, {r: 4}]").unwrap();
            assert_eq!(z, serde_json::json!([{"p": 1}, {"q": [2, 3]}, {"r": 4}]));
        }
        assert!(stats(&pa).rolled_back >= 8, "{:?}", stats(&pa));
    }

    #[test]
    fn check_unify_gives_the_verdict_of_unify_and_validate_and_keeps_nothing() {
        let src = "#R: {kind: \"R\", spec: {n: int & >0, m?: string}}\na: #R & {spec: n: 1}\nb: {kind: \"R\", spec: n: 1}\nc: {spec: n: -1}\nd: {spec: q: 1}\n";
        let pkg = build(src);
        pkg.validate(false).unwrap();
        let at = |p: &str| pkg.lookup(p).unwrap();
        let pairs = [("a", "b"), ("a", "c"), ("a", "d"), ("#R", "b"), ("#R", "d")];
        let verdicts = |pkg: &Value| -> Vec<Result<(), Vec<Diagnostic>>> {
            let mut out = Vec::new();
            for (x, y) in pairs {
                for concrete in [false, true] {
                    let (a, b) = (pkg.lookup(x).unwrap(), pkg.lookup(y).unwrap());
                    let before = vertices(pkg);
                    out.push(a.check_unify(&b, concrete));
                    // Everything the check reads was evaluated by the validation above.
                    assert_eq!(vertices(pkg), before, "{x} & {y}");
                }
            }
            out
        };
        let quick = verdicts(&pkg);
        let mut full = Vec::new();
        for (x, y) in pairs {
            for concrete in [false, true] {
                full.push(at(x).unify(&at(y)).validate(concrete));
            }
        }
        assert_eq!(quick, full);
        assert_eq!(stats(&pkg).kept, 0);
        assert!(at("a").check_unify(&at("d"), false).is_err());
        assert!(at("a").check_unify(&at("b"), true).is_ok());
        assert!(stats(&pkg).rolled_back > 0, "{:?}", stats(&pkg));
    }

    /// `matchN` decides each schema on a throw-away unification of the schema and the value
    /// (spec "Validators": a value matches a schema when their unification is not an error).
    /// The check runs inside the expansion of the value's vertex, and through `export_expr`
    /// inside another throw-away evaluation: each unification is dropped again once decided,
    /// so the vertices alive do not grow with the number of checks.
    #[test]
    fn matchn_schema_checks_are_dropped_once_decided() {
        let src = "#S: {a?: int, b?: int, matchN(1, [{a!: _}, {b!: _}])}\n\
                   one: #S & {a: 1}\n";
        let many = |n: usize| {
            let items: Vec<String> = (0..n).map(|i| format!("x{i}: #S & {{a: {i}}}")).collect();
            format!("{src}many: {{{}}}\n", items.join(", "))
        };
        let rt = Runtime::default();
        let small = rt.build_files(&[("in.cue".into(), many(5))]).unwrap();
        small.validate(true).unwrap();
        let large = rt.build_files(&[("in.cue".into(), many(45))]).unwrap();
        large.validate(true).unwrap();
        assert_eq!(
            large.lookup("many.x44").unwrap().to_json_value().unwrap(),
            serde_json::json!({"a": 44})
        );
        // Two schemas per value, each checked and dropped.
        assert!(stats(&large).rolled_back >= 90, "{:?}", stats(&large));
        // 40 more values cost the vertices of 40 values (a handful each), not of their checks.
        let per_value = (vertices(&large) - vertices(&small)) / 40;
        assert!(per_value <= 8, "{per_value} vertices per value");
        // A value matching both schemas, or neither, still fails.
        for bad in ["#S & {a: 1, b: 2}", "#S & {}"] {
            let v = rt
                .build_files(&[("in.cue".into(), format!("{src}bad: {bad}\n"))])
                .unwrap();
            assert!(v.validate(true).is_err(), "{bad}");
        }
        // Nested in the throw-away evaluation of `export_expr`: both are dropped.
        let before = vertices(&large);
        let out = rt.export_expr(&large, "#S & {b: 7}").unwrap();
        assert_eq!(out, serde_json::json!({"b": 7}));
        assert_eq!(vertices(&large), before);
    }
}
