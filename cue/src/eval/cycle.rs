//! Reference cycles and structural cycles (CUE spec "Cycles"; upstream `cycle.go`).
//!
//! Reaching a vertex that is being expanded yields top for that conjunct and marks the
//! dependents for re-evaluation (a reference cycle that resolves, `a: b, b: a & 1`); reaching an
//! ancestor through regular fields is a structural cycle, an error unless it sits under an
//! optional field or a definition that is never made concrete.

use super::*;

/// A copy of the struct or list vertex `from` into a vertex whose ancestor already holds one
/// (see `Ev::flush_cyclic`), held back with the conjunct referring to it and its position.
#[derive(Clone, Debug)]
pub(super) struct HeldCopy {
    pub(super) from: VId,
    pub(super) conj: Conj,
    pub(super) span: Span,
}

impl Ev {
    pub(super) fn is_ancestor_regular(&self, anc: VId, v: VId) -> Option<bool> {
        // Returns Some(all_regular) if `anc` is a strict ancestor of `v`.
        let mut cur = self.vx(v).parent;
        let mut all_regular = !matches!(self.vx(v).constraint, Some(FieldConstraint::Optional))
            && !self.vx(v).label.is_def();
        let mut n = 0;
        while let Some(p) = cur {
            // A disjunct stands for the vertex it is a choice of (`c: 1 | {d: c}`).
            if p == anc || self.vx(p).disjunction.clone_of == Some(anc) {
                return Some(all_regular);
            }
            let px = self.vx(p);
            if matches!(px.constraint, Some(FieldConstraint::Optional)) || px.label.is_def() {
                all_regular = false;
            }
            cur = px.parent;
            n += 1;
            if n > 100_000 {
                break;
            }
        }
        None
    }

    /// The strict ancestors of `v`, nearest first (at most 10,000: a guard, not a limit).
    pub(super) fn ancestors(&self, v: VId) -> impl Iterator<Item = VId> + '_ {
        std::iter::successors(self.vx(v).parent, |p| self.vx(*p).parent).take(10_000)
    }

    /// Whether a strict ancestor of `v` already holds a copy of `w`: copying `w` into `v` then
    /// repeats the structure one level down (`#T: ["a", #T]`, `#L: {next?: #L}`).
    pub(super) fn inlined_above(&self, v: VId, w: VId) -> bool {
        self.ancestors(v)
            .any(|p| self.vx(p).scr().inlined.contains(&w))
    }

    /// Whether a strict ancestor of `v` holds an unfed copy of `w` with nothing fed in between
    /// (see `flush_cyclic`): a vertex on the way down from it with a conjunct from outside the
    /// repeated structure (`inside` is false for its span) is fed by data, which brought the
    /// recursion this far (`#T: x: y?: {V: _, z: #T & V}` with `a: #T, a: x: y: V: x: y: V:
    /// {}`: `a.x.y.z.x.y` is there because of `V`, not because `#T` repeats itself).
    fn unfed_suspect_above(&self, v: VId, w: VId, inside: &dyn Fn(Span) -> bool) -> bool {
        for p in self.ancestors(v) {
            let px = self.vx(p);
            if px.scr().suspect.contains(&w) {
                return true;
            }
            if px.conjuncts.iter().any(|c| !inside(c.expr.span())) {
                return false;
            }
        }
        false
    }

    /// Whether `v` or an ancestor up to the root is an optional field or a definition.
    fn under_optional(&self, v: VId) -> bool {
        std::iter::once(v).chain(self.ancestors(v)).any(|p| {
            let px = self.vx(p);
            px.constraint == Some(FieldConstraint::Optional) || px.label.is_def()
        })
    }

    /// Makes the copies `unify_vertex` held back (structural-cycle rule, after upstream's
    /// "a cycle is only an error if the node has no non-cyclic conjuncts"): if `v` has a conjunct
    /// from outside the repeated structures (data: `l: #List & {next: {...}}`), the recursion is
    /// fed and may end, so the copies are made. Otherwise the copy is made once more on trust
    /// (the copied value may stop by itself, its recursion being behind optional fields or
    /// patterns: `a: b?: c: a`), and `v` is marked suspect for `w`; meeting the same unfed copy
    /// again below a suspect, with no vertex fed by outside data in between, is a structural
    /// cycle: an error for a regular field, nothing at all in an optional field or a
    /// definition, which are only evaluated on demand.
    pub(super) fn flush_cyclic(&mut self, v: VId) {
        let mut rounds = 0;
        while !self.vx(v).scr().cyc_pending.is_empty() {
            rounds += 1;
            let pending = self.vm(v).take_scratch(|x| &mut x.cyc_pending);
            let vx = self.vx(v);
            if vx.value.err.is_some() || rounds > 64 {
                return;
            }
            // Data counts only if it does not come from the repeated structure itself: a field
            // of `#T: {[string]: #T, b: {}}` is fed by `b: {}`, which `#T` brings along at every
            // level (upstream's self-feeding cycle).
            let decls: Vec<Span> = pending
                .iter()
                .flat_map(|h| self.vx(h.from).conjuncts.iter().map(|c| c.expr.span()))
                .collect();
            let inside = |s: Span| {
                decls
                    .iter()
                    .any(|d| d.file == s.file && d.start <= s.start && s.end <= d.end)
            };
            // A `let` or inline value (`let subs = #sub & {#p: x}`) is fed by the expression
            // that made it, which differs at every level (upstream: inline structs are not
            // rooted in the tree).
            let has_data = vx.label.kind == LabelKind::Internal
                || vx.conjuncts.iter().any(|c| !inside(c.expr.span()));
            if !has_data {
                let mut cycle = None;
                let mut copied = false;
                // A disjunct is given no extra round: its cycle eliminates it.
                let disjunct = vx.disjunction.nosplit && !vx.scr().choice.is_empty();
                for HeldCopy {
                    from: w,
                    conj,
                    span,
                } in pending
                {
                    if disjunct || self.unfed_suspect_above(v, w, &inside) {
                        cycle.get_or_insert(span);
                    } else if !self.vx(v).scr().inlined.contains(&w) {
                        self.vm(v).scr_mut().suspect.push(w);
                        self.inline(v, w, &conj, span);
                        copied = true;
                    }
                }
                if let Some(span) = cycle {
                    if !copied && !self.under_optional(v) {
                        let b = Bottom::new(ErrorCode::StructuralCycle, "structural cycle", span);
                        self.set_err(v, b);
                    }
                }
                continue;
            }
            for HeldCopy {
                from: w,
                conj,
                span,
            } in pending
            {
                if !self.vx(v).scr().inlined.contains(&w) {
                    self.inline(v, w, &conj, span);
                }
            }
        }
    }
}
