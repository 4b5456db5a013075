//! The facade the render kernel uses beside the original [`Value`] API: values addressed by
//! [`Path`], field iteration with a filter, data in and out as `serde_json::Value`, typed
//! decoding, and diagnostics as JSON-serialisable reports.
//!
//! Rules (render-spec §1.3–§1.8; style.md §2, §5; CUE `doc/ref/spec.md`):
//! - values enter as data, never as text: [`Runtime::value_from_json`] builds the value from the
//!   `serde_json::Value` tree (object keys are regular fields, in the object's order; integers are
//!   CUE `int`, other numbers CUE `float`), so no CUE syntax in the data is ever interpreted;
//! - [`Value::fill_path`] unifies the value with the data placed at the path (an index selector
//!   places it in an open list, so the list keeps its other elements); the result is a new value,
//!   the receiver is unchanged;
//! - [`Value::to_json_value`] exports what [`Value::to_json`] exports (regular fields, defaults
//!   taken, CUE's field order, bytes as standard base64), as a `serde_json::Value`; a number
//!   outside what `serde_json` holds (integers beyond `i64`/`u64`, floats beyond `f64`) is a
//!   [`DiagCode::Limit`] diagnostic at its path, never a silent rounding of an integer;
//! - [`Value::decode`] is `to_json_value` followed by `serde_json::from_value`;
//! - [`Runtime::export_expr`] is `compile_expr` followed by `to_json_value`, and
//!   [`Value::check_unify`] is `unify` followed by `validate`, each keeping nothing it
//!   evaluated: unless the evaluation changed a value built before it (the first reach of a
//!   definition evaluates it in place, and that is kept), everything it built is dropped again,
//!   so a render's memory is its instance's, not its instance's plus every output's;
//! - [`Value::fields_where`] yields the arcs the [`FieldFilter`] admits, in CUE's order, with
//!   their [`Selector`] and [`FieldConstraint`], then, if `patterns` is set, the pattern
//!   constraints (`[string]: T`) as [`Selector::Pattern`] with constraint `Optional` (a pattern
//!   applies to fields that may exist, spec "Pattern and default constraints") and the
//!   constraint's value as it applies to a field whose label is not known (the label is
//!   `string`); [`Value::fill_path`] at a pattern selector is an error value (a pattern is not a
//!   place data can go);
//! - hidden fields of an imported package are reached with [`Value::lookup_hidden`] (name and
//!   import path), since a [`Path`], like CUE's path syntax, names only the main package's;
//! - [`Runtime::reports`] turns diagnostics into [`DiagnosticReport`]s with file:line:col
//!   positions (1-based, byte columns as `cue` prints them) that a JSON API returns as they are.

use crate::adt::{self, Expr, LabelKind, VId};
use crate::builtins;
use crate::errors::{DiagCode, Diagnostic};
use crate::path::{Path, Selector};
use crate::source::Span;
use crate::{lock, Runtime, Value};
use base64::Engine as _;
use bigdecimal::BigDecimal;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use std::str::FromStr;
use std::sync::Arc;

pub use crate::ast::FieldConstraint;

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

/// A file position as `cue` prints it: `file:line:col`, 1-based, byte columns.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    /// The file name as given to the runtime.
    pub file: String,
    /// The line.
    pub line: usize,
    /// The byte column.
    pub column: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// A [`Diagnostic`] with its positions resolved, ready to serialise as JSON.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiagnosticReport {
    /// The class ([`DiagCode::as_str`]).
    pub code: String,
    /// The value path in [`Path`] syntax (indices as `[N]`); empty for the root or load errors.
    pub path: String,
    /// The message.
    pub message: String,
    /// The primary position, if known.
    pub primary: Option<Position>,
    /// The other positions involved (both sides of a conflict).
    pub related: Vec<Position>,
}

/// Why [`Value::decode`] failed.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The value has errors or is not concrete.
    #[error("value does not export: {}", .0.first().map_or("", |d| d.message.as_str()))]
    Eval(Vec<Diagnostic>),
    /// The data does not have the shape of the target type.
    #[error("value does not decode: {0}")]
    Shape(#[from] serde_json::Error),
}

fn data_of_json(j: &serde_json::Value) -> builtins::Val {
    use builtins::Val as B;
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

/// Runs `f` as a throw-away evaluation (see the module rules): the evaluator is rolled back to
/// where it was before `f` unless `f` changed a vertex built earlier.
fn throw_away<R>(g: &mut crate::Inner, f: impl FnOnce(&mut crate::Inner) -> R) -> R {
    let mark = g.ev.mark();
    let out = f(g);
    if let Some(m) = mark {
        g.ev.rollback(m);
    }
    out
}

/// `d` as JSON; an error is positioned at the value's own path (`path`, computed only then)
/// plus the path below it.
fn json_at(
    d: &builtins::Val,
    path: impl FnOnce() -> String,
) -> Result<serde_json::Value, Vec<Diagnostic>> {
    json_of_data(d, &Path::root()).map_err(|mut e| {
        let at = Path::parse(&path()).unwrap_or_default();
        let below = Path::parse(&e.path).unwrap_or_default();
        let mut full = at.selectors().to_vec();
        full.extend(below.selectors().iter().cloned());
        e.path = Path::new(full).diagnostic_text();
        vec![e]
    })
}

fn json_of_data(d: &builtins::Val, at: &Path) -> Result<serde_json::Value, Diagnostic> {
    use builtins::Val as B;
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
                    at,
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
                        at,
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
                out.push(json_of_data(x, &at.child(Selector::Index(i)))?);
            }
            serde_json::Value::Array(out)
        }
        B::Struct(fs) => {
            let mut m = serde_json::Map::with_capacity(fs.len());
            for (k, x) in fs {
                let v = json_of_data(x, &at.child(Selector::Field(k.clone())))?;
                m.insert(k.clone(), v);
            }
            serde_json::Value::Object(m)
        }
        B::Opaque(_) => {
            return Err(Diagnostic {
                code: DiagCode::Incomplete,
                path: at.diagnostic_text(),
                message: "value is not concrete".into(),
                span: None,
                related: Vec::new(),
            })
        }
    })
}

impl std::fmt::Debug for Value {
    /// The value's path from its package root (`Value(a.b)`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Value({})", self.path())
    }
}

impl Runtime {
    /// [`Runtime::compile_expr`] then [`Value::to_json_value`], keeping nothing it evaluated
    /// (see the module rules): the evaluator rolls back to where it was before, unless the
    /// evaluation changed a vertex built earlier, in which case all of it is kept.
    pub fn export_expr(
        &self,
        pkg: &Value,
        src: &str,
    ) -> Result<serde_json::Value, Vec<Diagnostic>> {
        crate::enter(&self.inner, |g| {
            throw_away(g, |g| {
                let v = self.compile_expr_in(g, pkg, src)?;
                let d = v.data_in(&mut g.ev)?;
                json_at(&d, || g.ev.path_text(v.v))
            })
        })
    }

    /// A value of this runtime built from JSON data (see the module rules).
    pub fn value_from_json(&self, data: &serde_json::Value) -> Value {
        let expr = crate::eval::data_to_expr(&data_of_json(data), Span::default());
        let v = lock(&self.inner).ev.anon(None, expr);
        Value {
            inner: self.inner.clone(),
            v,
        }
    }

    /// Diagnostics with resolved file positions, serialisable as JSON.
    pub fn reports(&self, diags: &[Diagnostic]) -> Vec<DiagnosticReport> {
        let g = lock(&self.inner);
        let pos = |s: Span| {
            g.map.position(s).map(|(file, line, column)| Position {
                file: file.to_string(),
                line,
                column,
            })
        };
        diags
            .iter()
            .map(|d| DiagnosticReport {
                code: d.code.as_str().to_string(),
                path: d
                    .value_path()
                    .map_or_else(|| d.path.clone(), |p| p.to_string()),
                message: d.message.clone(),
                primary: d.span.and_then(pos),
                related: d.related.iter().filter_map(|&s| pos(s)).collect(),
            })
            .collect()
    }
}

impl Value {
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
                let x = &ev.vs[d as usize];
                if label.kind == LabelKind::Index && !x.is_list {
                    return None;
                }
                v = x.arcs.get(&label).copied()?;
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
            let a = ev.vs[v as usize].arcs.get(&label).copied()?;
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
        let mut e = crate::eval::data_to_expr(&data_of_json(data), span);
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

    /// [`Value::unify`] then [`Value::validate`], keeping nothing it evaluated (see the module
    /// rules and [`Runtime::export_expr`]): a check whose result is only the verdict.
    pub fn check_unify(&self, other: &Value, concrete: bool) -> Result<(), Vec<Diagnostic>> {
        let e = self.unify_expr(other);
        let diags = crate::enter(&self.inner, |g| {
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
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, DecodeError> {
        let j = self.to_json_value().map_err(DecodeError::Eval)?;
        Ok(serde_json::from_value(j)?)
    }
}
