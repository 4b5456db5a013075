//! A vertex's atoms: kinds, the concrete scalar, bounds and validators, and errors (spec
//! "Unification" of basic values, "Bounds", "Errors").
//!
//! Rules:
//! - kinds intersect; two concrete scalars must be identical, else a conflict naming both
//!   (and their types when they differ); bounds and validators are collected and checked once
//!   the vertex is finished (`finish`), in the order they arrived;
//! - a std function used as a value is a validator on its only argument; any other function
//!   (`len`, `strings.Join`) held in a field or let is that field's value, which a call
//!   through a reference calls (`_f: strings.Join, x: _f(["a"], "-")`) and an export
//!   refuses (a function is not data);
//! - the first fatal error of a vertex stands; a non-fatal one (incomplete, cycle, undefined,
//!   missing required field) is kept apart, as more information may still resolve it.

use super::*;

impl Ev {
    pub(super) fn set_err(&mut self, v: VId, b: Arc<Bottom>) {
        let vert = self.vm(v);
        if b.code.is_fatal() {
            if vert.value.err.is_none() {
                vert.value.err = Some(b);
            }
        } else if vert.value.incomplete.is_none() {
            vert.value.incomplete = Some(b);
        }
    }

    pub(super) fn add_atom(&mut self, v: VId, val: Val, span: Span) {
        match val {
            Val::Top => {}
            Val::Bottom(b) => self.set_err(v, b),
            Val::Kind(k) => {
                let vert = self.vm(v);
                vert.value.kinds &= k;
            }
            Val::Bound(op, x) => {
                let k = Val::Bound(op, x.clone()).kind();
                let vert = self.vm(v);
                vert.value.kinds &= k;
                vert.value.bounds.push(Val::Bound(op, x));
                vert.scr_mut().bound_spans.push(span);
            }
            Val::Validator(x) => {
                let vert = self.vm(v);
                vert.value.bounds.push(Val::Validator(x));
                vert.scr_mut().bound_spans.push(span);
            }
            Val::Vertex(_) => {}
            Val::StdFunc(b) if b.arity == 1 || (b.variadic && b.arity == 2) => {
                // A std function used as a value is a validator on its only argument.
                let vert = self.vm(v);
                vert.value
                    .bounds
                    .push(Val::Validator(Arc::new(Validator::Builtin(b, Vec::new()))));
                vert.scr_mut().bound_spans.push(span);
            }
            s => {
                let existing = self.vx(v).value.scalar.clone();
                match existing {
                    Some(t) => {
                        if !ops::scalar_identical(&s, &t) {
                            let msg = format!(
                                "conflicting values {} and {}{}",
                                ops::show(&t),
                                ops::show(&s),
                                if t.kind() != s.kind() {
                                    format!(
                                        " (mismatched types {} and {})",
                                        kind_name(t.kind()),
                                        kind_name(s.kind())
                                    )
                                } else {
                                    String::new()
                                }
                            );
                            let mut b = Bottom {
                                code: ErrorCode::Conflict,
                                msg,
                                span,
                                related: vec![self.vx(v).span],
                                sub: Vec::new(),
                            };
                            b.related.retain(|x| *x != span);
                            self.set_err(v, Arc::new(b));
                        }
                    }
                    None => {
                        let vert = self.vm(v);
                        vert.value.scalar = Some(s);
                        vert.value.scalar_span = span;
                    }
                }
            }
        }
    }

    pub(super) fn conflict_msg(&self, v: VId) -> String {
        let vert = self.vx(v);
        let mut parts = Vec::new();
        if vert.value.is_struct {
            parts.push("struct".to_string());
        }
        if vert.value.is_list {
            parts.push("list".to_string());
        }
        if let Some(s) = &vert.value.scalar {
            parts.push(ops::show(s));
        }
        if vert.value.kinds != K_TOP {
            parts.push(kind_name(vert.value.kinds));
        }
        if parts.len() >= 2 {
            format!(
                "conflicting values {} and {} (mismatched types)",
                parts[0], parts[1]
            )
        } else {
            format!("conflicting values ({})", parts.join(", "))
        }
    }

    /// Checks a bound or validator against a concrete value; returns an error message.
    pub(super) fn check_bound(&mut self, b: &Val, s: &Val) -> Option<String> {
        match b {
            Val::Bound(op, x) => ops::check_bound(self, *op, x, s),
            Val::Validator(val) => builtin::check_validator(self, val, s),
            _ => None,
        }
    }
}

/// Whether an embedded value can no longer change: a concrete scalar or a fatal error.
pub(super) fn final_atom(v: &Val) -> bool {
    match v {
        Val::Bottom(b) => b.code.is_fatal(),
        Val::Vertex(_) => true,
        other => other.is_concrete_scalar(),
    }
}

/// Whether adding atom `v` to a vertex again would change nothing whatever closedness it came
/// with: any atom but a vertex and a non-fatal error (an incomplete or cycle error may be a
/// value not known yet).
pub(super) fn settled_atom(v: &Val) -> bool {
    match v {
        Val::Bottom(b) => b.code.is_fatal(),
        Val::Vertex(_) => false,
        _ => true,
    }
}
