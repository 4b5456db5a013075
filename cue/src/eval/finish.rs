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
    pub(super) fn finish(&mut self, v: VId) {
        // List tails and lengths.
        if let Some(st) = self.vx(v).scr().list.clone() {
            let arcs: Vec<(Label, VId)> = self
                .vx(v)
                .arcs
                .iter()
                .map(|(l, a)| (l.clone(), *a))
                .collect();
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
        // Closedness: a regular label must be allowed by every closing group, each together
        // with the groups it absorbs (`merge_group`).
        // Each closing group's members are a range of one flat list (one allocation, not one
        // per group), and the arcs are read by index (no copy of the labels).
        let ngroups = self.vx(v).groups.len();
        let mut members: Vec<usize> = Vec::new();
        let mut closing: Vec<(usize, usize)> = Vec::new();
        for r in 0..ngroups {
            let gs = &self.vx(v).groups;
            if gs[r].merged || !gs[r].closing {
                continue;
            }
            let start = members.len();
            self.group_members_into(v, r, &mut members);
            let gs = &self.vx(v).groups;
            if members[start..].iter().any(|&m| gs[m].open) {
                members.truncate(start);
            } else {
                closing.push((start, members.len()));
            }
        }
        if !closing.is_empty() {
            let n = self.vx(v).arcs.len();
            for i in 0..n {
                let Some((l, &a)) = self.vx(v).arcs.get_index(i) else {
                    break;
                };
                if !l.is_regular() {
                    continue;
                }
                // The closing groups that refuse the label (with the groups they absorb).
                let mut refusing: Vec<usize> = Vec::new();
                for &(from, to) in &closing {
                    let gs = &members[from..to];
                    if gs.iter().any(|&g| self.vx(v).groups[g].labels.contains(i)) {
                        continue;
                    }
                    let pats: Vec<VId> = gs
                        .iter()
                        .flat_map(|&g| self.vx(v).groups[g].patterns().iter().copied())
                        .collect();
                    // The label only when patterns must be asked (the common case needs none).
                    let Some(l) = self.vx(v).arcs.get_index(i).map(|(l, _)| l.clone()) else {
                        break;
                    };
                    let mut m = false;
                    for p in pats {
                        if self.label_matches(p, &l) {
                            m = true;
                            break;
                        }
                    }
                    if !m {
                        refusing.extend_from_slice(gs);
                    }
                }
                if !refusing.is_empty() {
                    self.refuse(v, a, &refusing);
                }
            }
        }
        // A literal holding only comprehensions is a struct unless they yielded a scalar.
        {
            let vert = self.vm(v);
            if vert.value.maybe_struct
                && !vert.value.is_struct
                && !vert.value.is_list
                && vert.value.scalar.is_none()
            {
                vert.value.is_struct = true;
            }
        }
        // The value itself.
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
            let bounds = vert.value.bounds.clone();
            let (sspan, bspans) = (vert.value.scalar_span, vert.scr().bound_spans.clone());
            for (i, b) in bounds.iter().enumerate() {
                if let Some(e) = self.check_bound(b, &s) {
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
                    return;
                }
            }
        } else if vert.value.is_struct || vert.value.is_list {
            let bounds = vert.value.bounds.clone();
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
                        return;
                    }
                }
            }
        }
        self.vm(v).value.kinds = kinds;
    }
}
