//! Disjunctions and defaults (CUE spec "Disjunction", "Default values"; upstream `disjunct.go`,
//! `default.go`).
//!
//! A vertex meeting a disjunction is cloned once per alternative with the choice fixed; clones
//! with fatal errors are eliminated and equal survivors merged. The default of a combination is
//! the conjunction of the chosen alternatives' marks (an unmarked disjunction counts as
//! all-default). A disjunction none of whose marked alternatives survives has no default, and
//! neither do the disjunctions nested in its alternatives (spec "Default values": the default
//! of a disjunction with marked terms is made of those terms only, so
//! `(*3 | (*1 | 2)) & (1 | 2)` is `1 | 2`; `3 | (*1 | 2)` keeps the inner default, and so does
//! a marked term, `*(*1 | 2) | 3` being 1). When no disjunct survives and one of them failed
//! for want of information (an incomplete error, a field its value does not define yet), the
//! disjunction is incomplete, not an error (upstream ranks the incomplete code first). There is no cap on the number of disjunctions: one is split per round until
//! every state has chosen, and a disjunction equal to one already split (but for its outer
//! closedness ids) takes that one's choice (`D & D == D`).
//!
//! Equality is structural, as upstream's `Equal(..., CheckStructural)`: regular, required and
//! optional fields all count with their values (`{n!: string, m?: bool}` written twice, or two
//! definitions with those fields, are one value: an RBAC subject `#WorkloadIdentity |
//! #ServiceAccount` resolves), closedness counts, field order does not. Optional fields nested
//! more than four deep are compared by their sources, which bounds recursive schemas.
//!
//! Equal states are found by fingerprint (`Ev::fingerprint`, a walk of the whole clone), and
//! only when there is something to compare: a level with one surviving state, and a split with
//! one survivor, take none. On the OPM render benchmark most splits leave one state (a
//! transformer's `output: {...} | [...{...}]` against a struct output, an enum against a
//! concrete value), and fingerprinting each Kubernetes object twice cost 1.6 % of its instructions.
//!
//! A state holding atoms only with a concrete scalar, at its last disjunction, one of whose
//! alternatives certainly holds the scalar (a kind containing its kind, or the scalar itself),
//! clones no disjunct for the alternatives of a kind disjoint from the scalar's: they could
//! only be eliminated, and with a survivor certain their errors are never read (`string |
//! int | bool` against a label's string is one disjunct, not three).

use super::*;

/// A disjunction met while expanding a vertex, split on once the vertex is finished (see
/// `disjunct`).
#[derive(Clone, Debug)]
pub(super) struct PendingDisj {
    /// The conjunct holding the disjunction.
    pub(super) conj: Conj,
    /// The alternatives, each with its default mark.
    pub(super) alts: Arc<[(Expr, bool)]>,
    /// Met inside an alternative of another disjunction.
    pub(super) nested: bool,
    /// The disjunction whose chosen alternative it was met in (the innermost), if any.
    pub(super) within: Option<Span>,
    /// The vertex's atom state when it was met.
    pub(super) met: Met,
}

/// What a vertex held when one of its disjunctions was met: whether it had a scalar and how
/// many bounds. A disjunct that starts from the vertex's complete atom state
/// (`Ev::atom_disjunct`) is exact only if nothing it orders by arrival came in after.
#[derive(Clone, Copy, Debug)]
pub(super) struct Met {
    pub(super) scalar: bool,
    pub(super) bounds: usize,
}

/// A state of a vertex being split on its disjunctions: a clone with the history of its
/// choices (the first state is the vertex itself, with none).
struct State {
    vertex: VId,
    hist: Vec<Chosen>,
}

/// One choice of a state: the disjunction (by position) and the class of the alternative
/// taken: 0 an alternative of an unmarked disjunction, 1 a marked alternative, 2 an unmarked
/// alternative of a marked disjunction.
#[derive(Clone, Copy)]
struct Chosen {
    at: Span,
    class: u8,
    /// The disjunction whose chosen alternative this one was met in.
    within: Option<Span>,
}

/// The default provenance of a state: the highest class among its choices.
fn prov(h: &[Chosen]) -> u8 {
    h.iter().map(|x| x.class).max().unwrap_or(0)
}

/// What splitting a vertex collects across levels.
#[derive(Default)]
struct Split {
    /// The states with no disjunction left.
    finals: Vec<State>,
    /// Disjunctions whose marks stand whatever survives (a marked alternative is an error by
    /// itself).
    keep_marks: HashSet<Span>,
    /// The error of every eliminated disjunct, with its path below the vertex.
    errs: Vec<(String, Arc<Bottom>)>,
    /// The first disjunct eliminated for selecting a field its value does not define: not
    /// listed among `errs`, but an empty disjunction is incomplete with it.
    undefined: Option<Arc<Bottom>>,
}

impl Split {
    /// Each final state with its default mode: a disjunction none of whose marked
    /// alternatives survives has no default, so its other alternatives count as unmarked.
    fn final_marks(&mut self) -> Vec<(VId, u8)> {
        let mut marked_alive: HashSet<Span> = self
            .finals
            .iter()
            .flat_map(|st| st.hist.iter())
            .filter(|e| e.class == 1)
            .map(|e| e.at)
            .collect();
        marked_alive.extend(std::mem::take(&mut self.keep_marks));
        std::mem::take(&mut self.finals)
            .into_iter()
            .map(|st| {
                // A disjunction left without a default is a plain value: the marks of the
                // disjunctions met inside its chosen alternative are masked with it (spec
                // "Default values": the default of a disjunction with marked terms is made of
                // those terms only). Outer choices come first in the history.
                let mut masked: Vec<Span> = Vec::new();
                let mut m = 0;
                for e in &st.hist {
                    let inside_masked = e.within.is_some_and(|w| masked.contains(&w));
                    let no_default = e.class == 2 && !marked_alive.contains(&e.at);
                    let class = if inside_masked || no_default {
                        masked.push(e.at);
                        0
                    } else {
                        e.class
                    };
                    m = m.max(class);
                }
                (st.vertex, m)
            })
            .collect()
    }
}

impl Ev {
    // ----------------------------------------------------------------------------------------
    // Disjunctions.

    fn make_clone(&mut self, v: VId, choice: Vec<usize>) -> VId {
        let vert = self.vx(v);
        let mut clone = Vertex::new(vert.parent, vert.label.clone());
        clone.conjuncts = vert.conjuncts.clone();
        clone.constraint = vert.constraint;
        clone.def_close = vert.def_close;
        clone.span = vert.span;
        clone.value.not_allowed = vert.value.not_allowed;
        if vert.value.not_allowed {
            // The refusal with its positions (see `Ev::expand`).
            clone.value.err = vert.value.err.clone();
        }
        clone.scr_mut().choice = choice;
        clone.disjunction.nosplit = true;
        clone.disjunction.clone_of = Some(vert.disjunction.clone_of.unwrap_or(v));
        self.stats.clones += 1;
        let cid = self.push_vertex(clone);
        self.active.disjuncts.push((v, cid));
        if !self.atom_disjunct(v, cid) {
            self.eval(cid);
        }
        self.active.disjuncts.pop();
        cid
    }

    /// Frees what a dropped disjunct `cid` holds (its copy of the vertex's conjuncts, its
    /// bounds and scratch state) when it has no arcs: nothing can reach such a clone once it
    /// is dropped — failed, merged into an equal state, or split into the next level's clones
    /// (it is no alternative, no redirect target, no parent) — and the render kept thousands
    /// of them, a copy of every conjunct of their field each.
    fn release_disjunct(&mut self, cid: VId) {
        let c = self.vm(cid);
        if c.arcs.is_empty() {
            c.conjuncts = Vec::new();
            c.value.bounds = Vec::new();
            c.x = None;
        }
    }

    /// Builds the disjunct `cid` of the atom-only vertex `v` from `v`'s atom state instead of
    /// processing `v`'s conjuncts again; `false` (with `cid` left to be evaluated from its
    /// conjuncts) where that would not give the same disjunct.
    ///
    /// Rule: unification is commutative and idempotent (spec "Unification"), so when `v` holds
    /// atoms only — no arcs, not a struct or list, no error, nothing pending but its
    /// disjunctions — the disjunct choosing alternative `choice[j]` of its `j`-th disjunction is
    /// `v`'s kinds, scalar and bounds unified with the chosen alternatives. That is what
    /// evaluating the clone's conjuncts computes, up to the order things arrive in, which shows
    /// in two places only: which of two conflicting scalars a message names first, and the order
    /// of the bounds (the first failing one is reported, and a non-concrete value prints them).
    /// So the result is kept only when it is still atom-only with no new disjunction or
    /// deferred work, and, if an alternative added bounds or the result is an error, when `v`
    /// got no scalar and no bound after meeting the chosen disjunctions (the recorded [`Met`]).
    /// On the render's 129-component module 12.5 k of 14.2 k clones take this path (processed
    /// conjuncts 454 k -> 326 k).
    fn atom_disjunct(&mut self, v: VId, cid: VId) -> bool {
        let vx = self.vx(v);
        if !atom_only(vx) || vx.value.err.is_some() || vx.value.incomplete.is_some() {
            return false;
        }
        let choice = &self.vx(cid).scr().choice;
        let pend = &vx.scr().pending_disj;
        if choice.len() > pend.len() {
            return false;
        }
        let mut chosen = Vec::with_capacity(choice.len());
        // Whether every chosen disjunction was met after all of `v`'s scalar and bounds.
        let mut in_order = true;
        for (j, &ch) in choice.iter().enumerate() {
            let Some(pd) = pend.get(j) else {
                return false;
            };
            let Some((e, _)) = pd.alts.get(ch) else {
                return false;
            };
            if pd.nested {
                return false;
            }
            in_order &= pd.met.bounds == vx.value.bounds.len()
                && (pd.met.scalar || vx.value.scalar.is_none());
            chosen.push(pd.conj.with_expr(e.clone()));
        }
        let rest: Vec<PendingDisj> = pend.get(choice.len()..).unwrap_or(&[]).to_vec();
        let base_bounds = vx.value.bounds.len();
        let kinds = vx.value.kinds;
        let scalar = vx.value.scalar.clone();
        let scalar_span = vx.value.scalar_span;
        let bounds = vx.value.bounds.clone();
        let (bspans, seen, inlined) = (
            vx.scr().bound_spans.clone(),
            vx.scr().disj_seen,
            vx.scr().inlined.clone(),
        );
        let c = self.vm(cid);
        c.value.kinds = kinds;
        c.value.scalar = scalar;
        c.value.scalar_span = scalar_span;
        c.value.bounds = bounds;
        c.status = Status::Expanding;
        let s = c.scr_mut();
        s.bound_spans = bspans;
        // The struct vertices copied in (structural cycle checks see them as the clone would).
        s.inlined = inlined;
        // Past every disjunction `v` met: one an alternative brings is new, and refused below.
        s.disj_seen = seen;
        self.active.expanding.push(cid);
        for c in chosen {
            let span = c.expr.span();
            self.process_chosen(cid, span, c);
        }
        let cx = self.vx(cid);
        let ok = atom_only(cx)
            && cx.scr().pending_disj.is_empty()
            && (in_order || cx.value.bounds.len() == base_bounds);
        if ok {
            self.vm(cid).scr_mut().pending_disj = rest;
            self.finish(cid);
        }
        if !ok || (!in_order && self.vx(cid).value.err.is_some()) {
            // Evaluated from its conjuncts instead (`expand` starts it over).
            self.active.expanding.pop();
            self.vm(cid).status = Status::Fresh;
            return false;
        }
        self.stats.atom_disjuncts += 1;
        self.conclude(cid);
        true
    }

    /// `a`, or the disjunct of `a` being decided right now (spec "Disjunctions": each
    /// disjunct is evaluated as the value of the field, so a reference from inside it to the
    /// field itself sees that disjunct, not the undecided whole).
    pub(super) fn current_disjunct(&self, a: VId) -> VId {
        self.active
            .disjuncts
            .iter()
            .rev()
            .find(|(o, _)| *o == a)
            .map_or(a, |(_, c)| *c)
    }

    /// Splits `v` on its disjunctions level by level: each state is a clone with a prefix of
    /// choices fixed; failing states are dropped and equal states merged before the next level.
    /// The survivors decide `v`: an error when none survives, a redirect to the single one, or
    /// the disjunction of all of them with their defaults.
    pub(super) fn resolve_disjunctions(&mut self, v: VId) {
        let mut split = Split::default();
        let mut frontier = vec![State {
            vertex: v,
            hist: Vec::new(),
        }];
        // One disjunction is split per round, so the loop ends when every state has chosen an
        // alternative of each of its (finitely many) disjunctions; no fixed cap drops
        // surviving states (the evaluation limits still apply).
        while !frontier.is_empty() {
            if self.budget.limit_err.is_some() {
                break;
            }
            let mut next: Vec<State> = Vec::new();
            for st in std::mem::take(&mut frontier) {
                self.split_state(v, st, &mut split, &mut next);
            }
            frontier = self.merge_states(next);
        }
        let finals = split.final_marks();
        self.decide_disjunctions(v, finals, split.errs, split.undefined);
    }

    /// Splits state `st` of `v` on its next pending disjunction, one clone per alternative
    /// (each cloned from `v`), into `next`; a state with none left is final. A clone that
    /// fails is dropped with its error (unless the error is a field not allowed yet, which a
    /// disjunction still to be split may allow).
    fn split_state(&mut self, v: VId, st: State, split: &mut Split, next: &mut Vec<State>) {
        let Some(pd) = self.vx(st.vertex).scr().pending_disj.first().cloned() else {
            split.finals.push(st);
            return;
        };
        let (dspan, alts) = (pd.conj.expr.span(), pd.alts);
        let has_marks = alts.iter().any(|(_, d)| *d);
        // A marked alternative that is an error by itself keeps the disjunction's marks.
        if alts
            .iter()
            .any(|(e, d)| *d && matches!(e, Expr::Lit(Val::Bottom(_), _) | Expr::Bad(_)))
        {
            split.keep_marks.insert(dspan);
        }
        let base_choice = self.vx(st.vertex).scr().choice.clone();
        // The concrete scalar of a state holding atoms only, at its last disjunction, when one
        // alternative certainly holds it: that alternative survives (unification is
        // commutative: the disjunct is the state's atoms unified with it), so the state's
        // vertex is decided by the survivors and the errors of the eliminated alternatives
        // are never read; those that certainly conflict with the scalar (`int` or `bool` in
        // `string | int | bool` against a string) are not cloned to be eliminated.
        let held = {
            let x = self.vx(st.vertex);
            let last = x.scr().pending_disj.len() == 1 && !pd.nested;
            match &x.value.scalar {
                Some(s)
                    if last
                        && atom_only(x)
                        && x.value.err.is_none()
                        && x.value.incomplete.is_none()
                        && s.is_concrete_scalar()
                        && alts.iter().any(|(e, _)| scalar_meets(s, e) == Some(true)) =>
                {
                    Some(s.clone())
                }
                _ => None,
            }
        };
        for (i, (alt, mark)) in alts.iter().enumerate() {
            if self.budget.limit_err.is_some() {
                break;
            }
            if held
                .as_ref()
                .is_some_and(|s| scalar_meets(s, alt) == Some(false))
            {
                continue;
            }
            // Sized for the new choice: a clone of the base then a push was two allocations.
            let mut ch = Vec::with_capacity(base_choice.len() + 1);
            ch.extend_from_slice(&base_choice);
            ch.push(i);
            let cid = self.make_clone(v, ch);
            let undefined = self
                .vx(cid)
                .value
                .incomplete
                .as_ref()
                .is_some_and(|b| b.code == ErrorCode::Undefined)
                && self.vx(cid).value.scalar.is_none();
            if undefined {
                if split.undefined.is_none() {
                    split.undefined = self.vx(cid).value.incomplete.clone();
                }
                self.release_disjunct(cid);
                continue;
            }
            let mut at = Vec::new();
            self.active.disjuncts.push((v, cid));
            let (mut found, undef) = self.error_or_undefined_deep(cid, &mut at);
            self.active.disjuncts.pop();
            // A field of the disjunct that selects a field not there eliminates it like an
            // error (`*[m.b] | 2` with `m: a: 2` is 2; upstream `disjunctions/elimination`).
            if found.is_none() {
                if let Some((path, b)) = undef {
                    at = path;
                    found = Some(b);
                }
            }
            if let Some(e) = found {
                // A field the struct does not allow yet may be allowed by an embedded
                // disjunction still to be split: such a state is judged at the end.
                let later =
                    !self.vx(cid).scr().pending_disj.is_empty() && e.code == ErrorCode::NotAllowed;
                if !later {
                    split.errs.push((labels_text(&at), e));
                    self.release_disjunct(cid);
                    continue;
                }
            }
            let class: u8 = if !has_marks {
                0
            } else if *mark {
                1
            } else {
                2
            };
            let mut hist = Vec::with_capacity(st.hist.len() + 1);
            hist.extend_from_slice(&st.hist);
            hist.push(Chosen {
                at: dspan,
                class,
                within: pd.within,
            });
            next.push(State { vertex: cid, hist });
        }
        // A state that was split is superseded by its clones (each cloned from `v`).
        if st.vertex != v {
            self.release_disjunct(st.vertex);
        }
    }

    /// Merges equal states of a level (by fingerprint and the disjunctions they have left),
    /// keeping the best default provenance of each; a single state has nothing to be merged
    /// with, so its fingerprint (a walk of the whole clone) is not taken.
    fn merge_states(&mut self, next: Vec<State>) -> Vec<State> {
        use std::fmt::Write as _;
        if next.len() < 2 {
            return next;
        }
        // The keys one after the other in one buffer, each state with its range.
        let mut keys = std::mem::take(&mut self.bufs.keys);
        keys.clear();
        let mut merged: Vec<(State, std::ops::Range<usize>)> = Vec::with_capacity(next.len());
        for st in next {
            let start = keys.len();
            self.fingerprint(st.vertex, &mut keys);
            for pd in &self.vx(st.vertex).scr().pending_disj {
                let _ = write!(keys, "|{:?}", pd.conj.expr.span());
            }
            let key = keys.get(start..);
            if let Some(u) = merged.iter_mut().find(|u| keys.get(u.1.clone()) == key) {
                keys.truncate(start);
                let better = match (prov(&st.hist), prov(&u.0.hist)) {
                    (1, x) => x != 1 && st.hist.iter().all(|e| e.class != 2) || x == 2,
                    (0, 2) => true,
                    _ => false,
                };
                if better {
                    u.0.hist = st.hist;
                }
                self.release_disjunct(st.vertex);
            } else {
                merged.push((st, start..keys.len()));
            }
        }
        keys.clear();
        self.bufs.keys = keys;
        merged.into_iter().map(|(st, _)| st).collect()
    }

    /// Decides `v` from its final states (each with its default mode): the resolved clones are
    /// flattened, equal survivors merged; none is an error (every eliminated disjunct's,
    /// `errs`), one is a redirect, more are the disjunction.
    fn decide_disjunctions(
        &mut self,
        v: VId,
        finals: Vec<(VId, u8)>,
        errs: Vec<(String, Arc<Bottom>)>,
        undefined: Option<Arc<Bottom>>,
    ) {
        // Flatten resolved clones and merge equal alternatives.
        let mut survivors: Vec<(VId, u8)> = Vec::new();
        for (cid, m) in finals {
            let cx = self.vx(cid);
            if let Some(dr) = cx.disjunction.result.clone() {
                for (i, (a, _)) in dr.alts.iter().enumerate() {
                    survivors.push((*a, m.max(dr.modes.get(i).copied().unwrap_or(0))));
                }
            } else {
                let target = cx.disjunction.redirect.unwrap_or(cid);
                survivors.push((target, m.max(cx.disjunction.redirect_mark)));
            }
        }
        // A single survivor needs no fingerprint either.
        // The fingerprints one after the other in one buffer, each survivor with its range.
        let mut uniq: Vec<(VId, u8, std::ops::Range<usize>)> = Vec::new();
        if let [(a, d)] = survivors[..] {
            uniq.push((a, d, 0..0));
        } else {
            let mut keys = std::mem::take(&mut self.bufs.keys);
            keys.clear();
            for (a, d) in survivors {
                let start = keys.len();
                self.fingerprint(a, &mut keys);
                let fp = keys.get(start..);
                if let Some(u) = uniq.iter_mut().find(|u| keys.get(u.2.clone()) == fp) {
                    u.1 = merge_mode(u.1, d);
                    keys.truncate(start);
                } else {
                    uniq.push((a, d, start..keys.len()));
                }
            }
            keys.clear();
            self.bufs.keys = keys;
        }
        let vert = self.vm(v);
        vert.take_scratch(|x| &mut x.pending_disj);
        if uniq.is_empty() {
            let span = vert.span;
            vert.value.err = Some(empty_disjunction(errs, undefined, span));
            return;
        }
        if uniq.len() == 1 {
            vert.disjunction.redirect = Some(uniq[0].0);
            vert.disjunction.redirect_mark = uniq[0].1;
            return;
        }
        let has_default = uniq.iter().any(|u| u.1 == 1);
        let modes = uniq.iter().map(|u| u.1).collect();
        vert.disjunction.result = Some(Arc::new(DisjResult {
            alts: uniq.into_iter().map(|u| (u.0, u.1 == 1)).collect(),
            modes,
            has_default,
        }));
    }
}

/// Whether `x` holds atoms only, errors aside: no arcs, not a struct or list, no
/// disjunction decided, nothing deferred.
fn atom_only(x: &Vertex) -> bool {
    x.arcs.is_empty()
        && !x.value.is_struct
        && !x.value.is_list
        && !x.value.maybe_struct
        && x.disjunction.redirect.is_none()
        && x.disjunction.result.is_none()
        && x.value.unmet.is_none()
        && !x.value.shared
        && !x.value.not_allowed
        && x.scr().nothing_deferred()
}

/// How alternative `alt` of a disjunction meets the concrete scalar `s`, when that is
/// certain without evaluating it: `Some(true)` it holds `s` (a kind that contains `s`'s, or
/// `s` itself), `Some(false)` it conflicts (a kind or a scalar of another kind).
fn scalar_meets(s: &Val, alt: &Expr) -> Option<bool> {
    let Expr::Lit(a, _) = alt else {
        return None;
    };
    let k = s.kind();
    match a {
        Val::Kind(ak) if ak & k == k => Some(true),
        Val::Kind(ak) if ak & k == 0 => Some(false),
        a if a.is_concrete_scalar() && a.kind() & k == 0 => Some(false),
        a if ops::scalar_identical(a, s) => Some(true),
        _ => None,
    }
}

fn merge_mode(a: u8, b: u8) -> u8 {
    match (a, b) {
        (1, _) | (_, 1) => 1,
        (0, _) | (_, 0) => 0,
        _ => 2,
    }
}

/// Labels as a path suffix (`.a.b.0`), empty for none.
fn labels_text(labels: &[Label]) -> String {
    let mut s = String::new();
    for l in labels {
        s.push('.');
        if l.kind == LabelKind::Index {
            s.push_str(&l.name);
        } else {
            s.push_str(&l.path_text());
        }
    }
    s
}

/// The error of a disjunction none of whose disjuncts survived (upstream: "N errors in empty
/// disjunction", then each disjunct's error at its own path). A single failing disjunct is its
/// error, at its path; errors repeated by several disjuncts are listed once. It is incomplete
/// when one eliminated disjunct failed for want of information (an incomplete error, or a
/// field selected from a value that does not define it yet), as upstream's: more conjuncts may
/// still make that disjunct succeed (a transformer's `output: {...} | [...{...}]` met with a
/// comprehension over a `#component: _` not given yet is incomplete, not an error).
fn empty_disjunction(
    errs: Vec<(String, Arc<Bottom>)>,
    undefined: Option<Arc<Bottom>>,
    span: Span,
) -> Arc<Bottom> {
    let mut uniq: Vec<(String, Arc<Bottom>)> = Vec::new();
    for (p, e) in errs {
        if !uniq
            .iter()
            .any(|(q, f)| *q == p && f.msg == e.msg && f.span == e.span)
        {
            uniq.push((p, e));
        }
    }
    // Incomplete as soon as one disjunct is: more information may still make it succeed.
    let incomplete = undefined.is_some() || uniq.iter().any(|(_, e)| !e.code.is_fatal());
    match (uniq.len(), undefined) {
        (0, Some(u)) => u,
        (0, None) => Bottom::new(ErrorCode::Eval, "empty disjunction", span),
        (1, _) if uniq[0].0.is_empty() && (!incomplete || !uniq[0].1.code.is_fatal()) => {
            uniq.remove(0).1
        }
        (n, _) => {
            let code = if incomplete {
                ErrorCode::Incomplete
            } else {
                ErrorCode::Eval
            };
            let msg = if n == 1 {
                uniq[0].1.msg.clone()
            } else {
                format!("{n} errors in empty disjunction")
            };
            Arc::new(Bottom {
                code,
                msg,
                span: if n == 1 { uniq[0].1.span } else { span },
                related: Vec::new(),
                sub: uniq,
            })
        }
    }
}
