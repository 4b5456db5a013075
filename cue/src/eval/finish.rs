//! Finishing a vertex once all its conjuncts are in (upstream `unify.go`'s completion and
//! `closed.go`'s checks): list lengths and tails, closedness, and the checks of its value.
//!
//! Rules:
//! - a closed list has exactly its elements; a typed tail unifies with every element past the
//!   literal's own (spec "Lists");
//! - a regular label must be allowed by every closing group of the vertex, each together with
//!   the groups it absorbs: declared by one of their literals or accepted by one of their
//!   patterns (spec "Closed structs"); a refused field is an error at the field;
//! - a literal holding only comprehensions is a struct unless they yielded a scalar;
//! - the kinds left must admit the struct, list or scalar the vertex holds; a concrete scalar
//!   must satisfy every bound and validator (the first failing one is reported, at the bound,
//!   with the value as related position); a struct or list must satisfy its validators, a
//!   failure being incomplete while the value may still come to satisfy it (inside a
//!   definition, or not yet concrete).

use super::*;

impl Ev {
    /// Finishes `v` once all its conjuncts are in: list lengths and tails, closedness, then
    /// the checks of its value (see the module rules).
    pub(super) fn finish(&mut self, v: VId) {
        self.finish_list(v);
        self.check_closed(v);
        // A literal holding only comprehensions is a struct unless they yielded a scalar.
        let vert = self.vm(v);
        if vert.value.maybe_struct
            && !vert.value.is_struct
            && !vert.value.is_list
            && vert.value.scalar.is_none()
        {
            vert.value.is_struct = true;
        }
        self.check_value(v);
    }

    /// List tails and lengths: a closed list has exactly its elements, and a typed tail
    /// reaches every element past the literal's own.
    fn finish_list(&mut self, v: VId) {
        let Some(st) = self.vx(v).scr().list.clone() else {
            return;
        };
        let arcs: Vec<(Label, VId)> = self.vx(v).arc_list();
        let n = arcs
            .iter()
            .filter(|(l, _)| l.kind == LabelKind::Index)
            .count();
        if let Some(cl) = st.closed_len {
            if n > cl || st.min_len > cl {
                let b = Bottom::new(
                    ErrorCode::Eval,
                    format!(
                        "incompatible list lengths ({} and {})",
                        cl,
                        n.max(st.min_len)
                    ),
                    self.vx(v).span,
                );
                self.set_err(v, b);
            }
        }
        for (p, tc) in &st.tails {
            for (l, a) in &arcs {
                if l.kind == LabelKind::Index && l.index as usize >= *p {
                    self.add_conj(*a, tc.clone());
                }
            }
        }
    }

    /// The value itself: its kinds must admit what it holds, a concrete scalar must satisfy
    /// its bounds and validators, a struct or list its validators. Unless one fails, the
    /// vertex's kinds narrow to what it holds.
    fn check_value(&mut self, v: VId) {
        let vert = self.vx(v);
        let mut kinds = vert.value.kinds;
        if vert.value.is_struct {
            kinds &= K_STRUCT;
        }
        if vert.value.is_list {
            kinds &= K_LIST;
        }
        let span = vert.span;
        if vert.value.err.is_some() {
            return;
        }
        if kinds == 0 {
            let msg = self.conflict_msg(v);
            self.set_err(v, Bottom::new(ErrorCode::Conflict, msg, span));
            return;
        }
        if let Some(s) = vert.value.scalar.clone() {
            if kinds & s.kind() == 0 {
                let msg = self.conflict_msg(v);
                self.set_err(v, Bottom::new(ErrorCode::Conflict, msg, span));
                return;
            }
            if self.check_scalar_bounds(v, &s, span) {
                return;
            }
        } else if (vert.value.is_struct || vert.value.is_list) && self.check_validators(v, span) {
            return;
        }
        self.vm(v).value.kinds = kinds;
    }

    /// Checks the concrete scalar `s` of `v` against its bounds and validators in the order
    /// they arrived; the first failure is the error (at the bound, with the value as related
    /// position, as upstream prints both sides). Returns whether one failed.
    fn check_scalar_bounds(&mut self, v: VId, s: &Val, span: Span) -> bool {
        let vert = self.vx(v);
        let bounds = vert.value.bounds.clone();
        let (sspan, bspans) = (vert.value.scalar_span, vert.scr().bound_spans.clone());
        for (i, b) in bounds.iter().enumerate() {
            if let Some(e) = self.check_bound(b, s) {
                // Both sides, as upstream prints them: the bound, then the value.
                let primary = bspans.get(i).copied().unwrap_or(span);
                let value = if sspan == Span::default() {
                    span
                } else {
                    sspan
                };
                let mut related = vec![value];
                related.retain(|x| *x != primary && *x != Span::default());
                self.set_err(
                    v,
                    Arc::new(Bottom {
                        code: ErrorCode::Conflict,
                        msg: e,
                        span: primary,
                        related,
                        sub: Vec::new(),
                    }),
                );
                return true;
            }
        }
        false
    }

    /// Checks the struct or list `v` against its validators; the first failure is the error,
    /// incomplete while `v` may still come to satisfy it. Returns whether one failed.
    fn check_validators(&mut self, v: VId, span: Span) -> bool {
        let bounds = self.vx(v).value.bounds.clone();
        for b in bounds {
            if let Val::Validator(_) = &b {
                self.validator_incomplete = false;
                let failed = self.check_bound(&b, &Val::Vertex(v));
                let undecided = std::mem::take(&mut self.validator_incomplete);
                if let Some(e) = failed {
                    // A struct or list that is not yet concrete (a schema, a definition)
                    // may still come to satisfy the validator: the failure is incomplete.
                    // So is one inside a definition, which is never final.
                    let mut errs = Vec::new();
                    let in_def = self.path(v).iter().any(|l| l.is_def());
                    let code = if in_def
                        || undecided
                        || (self.to_data(v, &mut errs, 0).is_none()
                            && errs.iter().all(|(_, b)| !b.code.is_fatal()))
                    {
                        ErrorCode::Incomplete
                    } else {
                        ErrorCode::Eval
                    };
                    let b = Bottom::new(code, e, span);
                    if undecided {
                        self.vm(v).value.unmet = Some(b.clone());
                    }
                    self.set_err(v, b);
                    return true;
                }
            }
        }
        false
    }
}
