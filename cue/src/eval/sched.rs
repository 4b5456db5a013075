//! Driving the evaluation of a vertex (upstream `sched.go`, `unify.go`'s `unify`): the order of
//! its phases, and re-evaluation after a reference cycle.
//!
//! Rules (the phases of `Ev::expand`, in order):
//! 1. a vertex starts over from its conjuncts (`reset`), keeping only a refusal by a closed
//!    struct and a disjunct's choice;
//! 2. a vertex whose only conjunct references an evaluated struct or list shares it instead
//!    (`share`);
//! 3. repeated literals are merged (`unify`), literal scalars are added first (so a reference
//!    cycle back to the vertex sees them), then every conjunct is processed (`unify`);
//! 4. embedded references that gave atoms are processed again now that every conjunct is in,
//!    fields embedded into their own ancestor are embedded again (`inline`), and held-back
//!    copies are decided (`cycle`);
//! 5. dynamic fields and comprehensions run, round after round, until neither adds anything
//!    (`structs`, `comprehension`);
//! 6. the vertex is finished (`finish`: list tails, closedness, the value's checks), and then
//!    split on its disjunctions (`disjunct`);
//! 7. it is done (`conclude`): what only the expansion needed is freed, and every vertex that
//!    read it while it was unfinished is marked to be evaluated again.
//! - Reaching a vertex being expanded is a reference cycle: the reader gets what is known so
//!   far (a concrete scalar) or a cycle error for now, and is evaluated again once the vertex
//!   is done (`taint_since`, `inherit_taint`).
//! - Reading a finished field of a struct still being expanded (from an embedding, a guard or
//!   a deep check) is noted; if the field receives a conjunct afterwards (a later conjunct of
//!   the struct, one of its comprehensions), the reader, and what read the reader so, is
//!   evaluated again on next use (`note_early_read`, `dirty_early_readers`).

use super::*;

/// A vertex `dep` that read the unfinished vertex `target` (a reference cycle): it is marked
/// for evaluation again once `target` is done (see `Ev::conclude`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Taint {
    pub(super) target: VId,
    pub(super) dep: VId,
}

/// A vertex `reader` that read `read`, a field of `parent`, while `parent` was still being
/// expanded: `read` may still receive conjuncts (from `parent`'s later conjuncts or its
/// comprehensions), and if it does, `reader` holds a value computed without them (see
/// `Ev::note_early_read`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct EarlyRead {
    pub(super) parent: VId,
    pub(super) read: VId,
    pub(super) reader: VId,
}

impl Ev {
    /// Records that the vertex being expanded read the finished vertex `w` whose parent is
    /// still being expanded. Such a read happens from an embedded expression, a comprehension
    /// or a deep check run while the parent takes its conjuncts (`sub: {#a: string, #X: #a +
    /// "a", #X}` used as `sub & {#a: "X"}` reads `#X`, and through it `#a`, before `#a: "X"`
    /// is in); when `w` receives a conjunct later, the reader and whatever read the reader
    /// the same way are evaluated again on next use (`Ev::dirty_early_readers`), as upstream's
    /// scheduler would have waited for the field to be complete.
    pub(super) fn note_early_read(&mut self, w: VId) {
        let Some(&reader) = self.active.expanding.last() else {
            return;
        };
        let Some(parent) = self.vx(w).parent else {
            return;
        };
        if reader == w || reader == parent || self.vx(parent).status != Status::Expanding {
            return;
        }
        let r = EarlyRead {
            parent,
            read: w,
            reader,
        };
        if !self.active.early_reads.contains(&r) {
            self.active.early_reads.push(r);
        }
    }

    /// `w` received a conjunct after it was finished: every vertex that read it early (see
    /// `Ev::note_early_read`) is evaluated again on next use, and so, transitively, are their
    /// own early readers.
    pub(super) fn dirty_early_readers(&mut self, w: VId) {
        if self.active.early_reads.is_empty() {
            return;
        }
        let mut todo = vec![w];
        let mut seen: Vec<VId> = Vec::new();
        while let Some(x) = todo.pop() {
            if seen.contains(&x) {
                continue;
            }
            seen.push(x);
            for i in 0..self.active.early_reads.len() {
                let Some(&r) = self.active.early_reads.get(i) else {
                    break;
                };
                if r.read == x && self.vx(r.reader).status == Status::Done {
                    self.vm(r.reader).dirty = true;
                    todo.push(r.reader);
                }
            }
        }
    }

    /// Evaluates a vertex (not its children).
    pub fn eval(&mut self, v: VId) {
        let st = self.vx(v).status;
        if st == Status::Done && !self.vx(v).dirty {
            return;
        }
        if st == Status::Expanding {
            return;
        }
        if self.budget.depth == 0 {
            let marker = 0u8;
            let here = std::ptr::addr_of!(marker) as usize;
            if self.budget.stack_base < here {
                self.budget.stack_base = here;
            }
        }
        if self.budget.depth >= self.config.max_depth || !self.stack_ok() {
            let b = self.limit(
                crate::diagnostics::Limit::Depth,
                format!(
                    "evaluation depth limit ({}) exceeded",
                    self.config.max_depth
                ),
                self.vx(v).span,
            );
            self.budget.limit_err.get_or_insert(b.clone());
            let vert = self.vm(v);
            vert.value.err = Some(b);
            vert.status = Status::Done;
            return;
        }
        self.budget.depth += 1;
        self.expand(v);
        self.budget.depth -= 1;
    }

    pub(super) fn reset(&mut self, v: VId) {
        let vert = self.vm(v);
        vert.arcs.clear();
        vert.late_done = false;
        vert.dirty = false;
        // The value starts over, but for a refusal (see `refusal`); the bounds keep their
        // buffer.
        let value = &mut vert.value;
        value.kinds = K_TOP;
        value.scalar = None;
        value.scalar_span = Span::default();
        value.bounds.clear();
        value.err = None;
        value.incomplete = None;
        value.unmet = None;
        value.is_struct = false;
        value.is_list = false;
        value.maybe_struct = false;
        value.shared = false;
        // How the disjunctions were decided starts over; which disjunct this is does not.
        let disj = &mut vert.disjunction;
        disj.result = None;
        disj.redirect = None;
        disj.redirect_mark = 0;
        disj.nest = 0;
        vert.groups.clear();
        vert.seen = Seen::default();
        // Everything usually empty starts over but a disjunct's choice.
        let choice = vert.take_scratch(|x| &mut x.choice);
        vert.x = None;
        if !choice.is_empty() {
            vert.scr_mut().choice = choice;
        }
    }

    /// The error of a field refused by a closed struct: the one `finish` made, with its
    /// positions, or (if another error took its place) a new one at the field.
    #[cold]
    #[inline(never)]
    pub(super) fn refusal(&self, v: VId) -> Arc<Bottom> {
        let vert = self.vx(v);
        let span = vert.span;
        match &vert.value.err {
            Some(b) if b.code == ErrorCode::NotAllowed && b.span == span => b.clone(),
            _ => Bottom::new(ErrorCode::NotAllowed, "field not allowed", span),
        }
    }

    /// Expands `v` once, phase by phase (see the module rules): start over, share, take in
    /// the conjuncts, late work, finish, split on disjunctions, conclude.
    pub(super) fn expand(&mut self, v: VId) {
        self.stats.expansions += 1;
        // Expanded while its own sharing check is under way (see `Active::probe_expanded`).
        let in_probe = self.active.sharing_probes.contains(&v);
        if in_probe && !self.active.probe_expanded.contains(&v) {
            self.active.probe_expanded.push(v);
        }
        // A field refused by a closed struct stays refused, with the positions found when it
        // was refused (`finish` of its parent).
        let refused = if self.vx(v).value.not_allowed {
            Some(self.refusal(v))
        } else {
            None
        };
        self.reset(v);
        if refused.is_some() {
            self.vm(v).value.err = refused;
        }
        let shared = self.shareable(v);
        // The sharing check evaluates the target first; through a reference cycle
        // (`b: c, c: b & 1`) that may have expanded `v` itself, which is then done.
        if let Some(i) = self.active.probe_expanded.iter().position(|&x| x == v) {
            if !in_probe {
                self.active.probe_expanded.swap_remove(i);
                return;
            }
        }
        if let Some(w) = shared {
            self.share(v, w);
            return;
        }
        self.vm(v).status = Status::Expanding;
        self.active.expanding.push(v);
        self.take_conjuncts(v);
        self.late_work(v);
        self.finish(v);
        if !self.vx(v).scr().pending_disj.is_empty()
            && !self.vx(v).disjunction.nosplit
            && self.budget.limit_err.is_none()
        {
            self.resolve_disjunctions(v);
        }
        self.conclude(v);
    }

    /// Phase 3 of an expansion: repeated literals merged, literal scalars first, then every
    /// conjunct of `v` processed in order (those added meanwhile too).
    fn take_conjuncts(&mut self, v: VId) {
        self.merge_repeated_literals(v);
        // Literal scalars first, so that a reference cycle back to this vertex sees them.
        let n0 = self.vx(v).conjuncts.len();
        for i in 0..n0 {
            if let Expr::Lit(val, span) = &self.vx(v).conjuncts[i].expr {
                if val.is_concrete_scalar() {
                    let (val, span) = (val.clone(), *span);
                    self.add_atom(v, val, span);
                }
            }
        }
        let mut i = 0;
        while i < self.vx(v).conjuncts.len() {
            if !self.step() {
                break;
            }
            let c = self.vx(v).conjuncts[i].clone();
            let done_early =
                i < n0 && matches!(&c.expr, Expr::Lit(val, _) if val.is_concrete_scalar());
            if !done_early {
                self.process(v, c);
            }
            i += 1;
        }
    }

    /// Phase 4 of an expansion, once every conjunct of `v` is in: embedded references taken
    /// again, self-embeddings grown, held-back copies decided, then dynamic fields and
    /// comprehensions run until neither adds anything, and the copies they held back decided.
    fn late_work(&mut self, v: VId) {
        // Embedded references that gave atoms, again now that every conjunct of `v` is in:
        // resolved anew, as the fields they name may have been rebuilt since.
        let late = self.vm(v).take_scratch(|x| &mut x.late_atoms);
        self.vm(v).late_done = true;
        for c in late {
            self.process_again(v, c);
        }
        self.reembed(v);
        self.flush_cyclic(v);
        loop {
            let dynamic = self.run_dynamic_fields(v);
            let comps = !self.vx(v).scr().comps.is_empty();
            self.run_comprehensions(v);
            if !dynamic && !comps {
                break;
            }
            if self.budget.limit_err.is_some() {
                break;
            }
        }
        if !self.frozen_fields.is_empty() {
            self.check_frozen(v);
        }
        self.flush_cyclic(v);
    }

    /// The end of an expansion of `v` (pushed on `Active::expanding`): a limit error, status done,
    /// what only the expansion needed freed, and the vertices that hit `v` meanwhile marked for
    /// evaluation again.
    pub(super) fn conclude(&mut self, v: VId) {
        if let Some(b) = &self.budget.limit_err {
            let b = b.clone();
            self.vm(v).value.err.get_or_insert(b);
        }
        self.active.expanding.pop();
        let vert = self.vm(v);
        vert.status = Status::Done;
        // What was processed into `v` matters only while it is expanded (a later conjunct
        // re-expands it from scratch): freed now, it was a large part of the peak memory.
        vert.seen = Seen::default();
        if let Some(x) = vert.x.as_deref_mut() {
            x.close_ids = Vec::new();
        }
        vert.settle_scratch();
        // Vertices that hit `v` while it was being expanded are evaluated again later.
        let mut keep = Vec::new();
        let tainted = std::mem::take(&mut self.active.tainted);
        for t in tainted {
            if t.target == v {
                if t.dep != v && self.vx(t.dep).status == Status::Done {
                    self.vm(t.dep).dirty = true;
                }
            } else {
                keep.push(t);
            }
        }
        self.active.tainted = keep;
        // Its fields take no more conjuncts from this expansion.
        if !self.active.early_reads.is_empty() {
            self.active.early_reads.retain(|r| r.parent != v);
        }
    }

    /// Records an embedded expression of `v` that gave a scalar constraint or an incomplete
    /// value while `v` is still taking its conjuncts (`#twice: {#n: int, #n * 2}` used as
    /// `#twice & {#n: 21}`): it is processed again once all are in.
    pub(super) fn late_embed(&mut self, v: VId, c: &Conj) {
        let literal = matches!(c.expr, Expr::Struct(_) | Expr::List(_) | Expr::Lit(..));
        let vx = self.vx(v);
        if !literal && c.embed.is_some() && vx.status == Status::Expanding && !vx.late_done {
            self.vm(v).scr_mut().late_atoms.push(c.clone());
        }
    }

    /// Records a conjunct of `v` whose expression met a reference cycle while `v` takes its
    /// conjuncts (`a: _Q[0:len(a)]` before `a: [{}]`): it is processed again once all are in,
    /// when what it refers to may be known (a list literal fixes `len`).
    pub(super) fn late_cycle(&mut self, v: VId, c: &Conj) {
        let vx = self.vx(v);
        if c.embed.is_none() && vx.status == Status::Expanding && !vx.late_done {
            self.vm(v).scr_mut().late_atoms.push(c.clone());
        }
    }

    /// Marks every vertex expanded since the unfinished vertex `v` (the innermost one when `v`
    /// is not on the stack) to be evaluated again once `v` is done.
    pub(super) fn taint_since(&mut self, v: VId) {
        match self.active.expanding.iter().position(|&x| x == v) {
            Some(p) => {
                for i in p + 1..self.active.expanding.len() {
                    let d = self.active.expanding[i];
                    self.active.tainted.push(Taint { target: v, dep: d });
                }
            }
            None => {
                if let Some(&cur) = self.active.expanding.last() {
                    self.active.tainted.push(Taint {
                        target: v,
                        dep: cur,
                    });
                }
            }
        }
    }

    /// A vertex `w` that read an unfinished vertex is evaluated again once that one is done
    /// (`tainted`); `v`, which takes `w`'s value now, holds the same unfinished value and is
    /// evaluated again with it (`b0: a1` read while `a1: a0 + 2` waits for `a0`).
    pub(super) fn inherit_taint(&mut self, w: VId, v: VId) {
        if self.active.tainted.is_empty() || w == v {
            return;
        }
        let targets: Vec<VId> = self
            .active
            .tainted
            .iter()
            .filter(|t| t.dep == w && t.target != v)
            .map(|t| t.target)
            .collect();
        for target in targets {
            let t = Taint { target, dep: v };
            if !self.active.tainted.contains(&t) {
                self.active.tainted.push(t);
            }
        }
    }
}
