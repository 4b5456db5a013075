//! Unifying a referenced vertex into another (upstream: a reference's conjuncts added to the
//! referring node): its atoms are taken, or, for a struct or list, its conjuncts are copied
//! into the referring vertex and evaluated there, carrying the referring conjunct's
//! closedness.
//!
//! Rules:
//! - reaching the referring vertex's own ancestor through regular fields is a structural cycle;
//!   reaching a vertex being expanded is a reference cycle (see `sched`);
//! - a copy already under way further up (`#A: {#B}`, `#B: {#A}`) adds nothing, and a copy an
//!   ancestor already holds is held back and decided once all conjuncts are in (`cycle`);
//! - a field reached through regular and hidden fields only (`a.b` with `a: #A`) does not carry
//!   the closedness it inherited from the definitions enclosing it, and a definition enclosing
//!   the referring field too counts as the referring field's own (see the module docs of the
//!   evaluator, "Closedness"); the referring field is where the reference is evaluated and
//!   also where it is written (its scopes), so a value copied out of a definition closes as it
//!   does in place (`{...} & x` is `x`);
//! - a field embedded into its own ancestor (`t: {c, c: c: g: 1}`) is embedded again as it
//!   receives conjuncts, to a fixed point (`reembed`, at most 64 rounds).

use super::*;

/// A field embedded into its own ancestor (see `Ev::reembed`): the labels from the ancestor
/// down to it (the field is looked up again: a re-expanded parent rebuilds its arcs), the
/// embedding conjunct, the vertex copied last and how many of its conjuncts were copied.
#[derive(Clone, Debug)]
pub(super) struct SelfEmbed {
    pub(super) path: Vec<Label>,
    pub(super) conj: Conj,
    pub(super) copied: VId,
    pub(super) count: usize,
}

impl Ev {
    /// Unifies the value of vertex `w` into `v`.
    /// Returns `true` when `w` was a scalar-only vertex all of whose atoms are settled (see
    /// [`settled_atom`]): nothing of `c`'s closedness was involved.
    pub(super) fn unify_vertex(&mut self, v: VId, w: VId, c: &Conj, span: Span) -> bool {
        if w == v {
            return false;
        }
        if let Some(all_regular) = self.is_ancestor_regular(w, v) {
            if all_regular {
                let b = Bottom::new(ErrorCode::StructuralCycle, "structural cycle", span);
                self.set_err(v, b);
            }
            if all_regular || self.budget.depth > 200 {
                return false;
            }
        }
        self.eval(w);
        if self.vx(w).status == Status::Expanding {
            // A reference cycle: the conjunct is treated as top for now.
            if !self.active.expanding.is_empty() {
                let deps: Vec<VId> = self.active.expanding.clone();
                let pos = deps.iter().position(|&x| x == w).unwrap_or(0);
                for &d in &deps[pos..] {
                    self.active.tainted.push(Taint { target: w, dep: d });
                }
            }
            if self.vx(w).value.is_struct {
                // Copy what is known so far of a struct being expanded.
            }
            return false;
        }
        self.inherit_taint(w, v);
        self.note_early_read(w);
        let wr = self.deref_redirect(w);
        let wx = self.vx(w);
        let rx = self.vx(wr);
        // A scalar with fields of its own (`#fn: {#in: c: string, #in.c}`) is copied as a
        // struct: its embedding is evaluated again where it is used, where `#in` may be more
        // specific (`x: #fn & {#in: c: "V"}`).
        let structural = if wx.disjunction.redirect.is_some() {
            rx.value.is_struct
                || rx.value.is_list
                || rx.disjunction.result.is_some()
                || !rx.arcs.is_empty()
        } else {
            wx.value.is_struct
                || wx.value.is_list
                || wx.disjunction.result.is_some()
                || !wx.arcs.is_empty()
        };
        if !structural && self.is_ancestor_regular(v, w).is_some() {
            // `x: {#in: c: string, #in.c}` embeds a field of itself, which may still grow
            // from conjuncts of `x` not added yet: taken again once all are in.
            self.late_embed(v, c);
        }
        let wx = self.vx(wr);
        if !structural {
            // A scalar-only vertex: take its atoms.
            let atoms: Vec<Val> = {
                let mut a = Vec::new();
                if let Some(e) = &wx.value.err {
                    a.push(Val::Bottom(e.clone()));
                }
                if wx.value.kinds != K_TOP {
                    a.push(Val::Kind(wx.value.kinds));
                }
                if let Some(s) = &wx.value.scalar {
                    a.push(s.clone());
                }
                a.extend(wx.value.bounds.iter().cloned());
                if let Some(e) = &wx.value.incomplete {
                    if wx.value.scalar.is_none() {
                        a.push(Val::Bottom(e.clone()));
                    }
                }
                a
            };
            let is_def = self.vx(w).label.is_def();
            let _ = is_def;
            let settled = atoms.iter().all(settled_atom);
            for a in atoms {
                self.add_atom(v, a, span);
            }
            return settled;
        }
        // Copying `w` into `v` while the same copy is already under way further up is an
        // embedding or reference cycle (`#A: {#B}`, `#B: {#A}`): its conjuncts are already being
        // added, so the inner copy adds nothing.
        if self.active.copying.contains(&(v, w)) {
            return false;
        }
        if self.vx(v).status == Status::Expanding && self.inlined_above(v, w) {
            self.vm(v).scr_mut().cyc_pending.push(HeldCopy {
                from: w,
                conj: c.clone(),
                span,
            });
            return false;
        }
        self.inline(v, w, c, span);
        false
    }

    /// Copies the conjuncts of the struct or list vertex `w` into `v`.
    pub(super) fn inline(&mut self, v: VId, w: VId, c: &Conj, span: Span) {
        if self.active.copying.len() >= self.config.max_depth || !self.stack_ok() {
            let b = self.limit(
                crate::diagnostics::Limit::Depth,
                format!(
                    "evaluation depth limit ({}) exceeded",
                    self.config.max_depth
                ),
                span,
            );
            self.budget.limit_err.get_or_insert(b.clone());
            self.set_err(v, b);
            return;
        }
        self.stats.inlines += 1;
        self.active.copying.push((v, w));
        if !self.vx(v).scr().inlined.contains(&w) {
            self.vm(v).scr_mut().inlined.push(w);
        }
        self.copy_conjuncts(v, w, c);
        self.active.copying.pop();
    }

    /// Processes the conjuncts of `w` into `v`, carrying the closedness of the referring conjunct.
    pub(super) fn copy_conjuncts(&mut self, v: VId, w: VId, c: &Conj) {
        let n = self.vx(w).conjuncts.len();
        self.copy_conjunct_range(v, w, c, 0, n);
        // A field of `v` embedded into `v` (spec "Embedding": the embedded value is the field's
        // value, which the embedding itself may extend: `t: {c, c: c: g: 1}` gives `t.c.g`,
        // hence `t.g`): what the field receives later is embedded too, to a fixed point
        // (`Ev::reembed`). Looked at only for embeddings of a strict descendant.
        if c.embed.is_some()
            && self.vx(v).status == Status::Expanding
            && self.ancestors(w).any(|a| a == v)
        {
            let mut path: Vec<Label> = std::iter::once(w)
                .chain(self.ancestors(w))
                .take_while(|a| *a != v)
                .map(|a| self.vx(a).label.clone())
                .collect();
            path.reverse();
            self.vm(v).scr_mut().self_embeds.push(SelfEmbed {
                path,
                conj: c.clone(),
                copied: w,
                count: n,
            });
        }
    }

    /// Embeds again the conjuncts the fields of `v` embedded into it received since they were
    /// copied (see `copy_conjuncts`), until none grows (bounded: each round copies only new
    /// conjuncts, identical ones are skipped when processed, and at most 64 rounds run).
    pub(super) fn reembed(&mut self, v: VId) {
        for _ in 0..64 {
            let mut embeds = self.vm(v).take_scratch(|x| &mut x.self_embeds);
            if embeds.is_empty() || self.budget.limit_err.is_some() {
                return;
            }
            let mut grew = false;
            for e in embeds.iter_mut() {
                // What the embedding gave a field between `v` and the embedded one reaches it
                // when that field is evaluated (`t: {c.d, c: d: c: d: e: g: 1}`); a field
                // evaluated again rebuilds its arcs, so the embedded one is looked up anew.
                let mut cur = Some(v);
                for (i, l) in e.path.iter().enumerate() {
                    let Some(p) = cur else { break };
                    if i > 0 {
                        self.eval(p);
                    }
                    cur = self.vx(p).arcs.get(l).copied();
                }
                let Some(w) = cur else { continue };
                let now = self.vx(w).conjuncts.len();
                let from = if w == e.copied { e.count } else { 0 };
                if now > from {
                    grew = true;
                    e.copied = w;
                    e.count = now;
                    let c = e.conj.clone();
                    self.copy_conjunct_range(v, w, &c, from, now);
                }
            }
            let mut more = self.vm(v).take_scratch(|x| &mut x.self_embeds);
            embeds.append(&mut more);
            if !grew {
                return;
            }
            self.vm(v).scr_mut().self_embeds = embeds;
        }
    }

    /// Processes conjuncts `from..to` of `w` into `v` (see `copy_conjuncts`).
    fn copy_conjunct_range(&mut self, v: VId, w: VId, c: &Conj, from: usize, n: usize) {
        let referring = outer_with(c);
        let w_def_close = self.vx(w).def_close;
        // A field reached through regular and hidden fields only (`a.b` with `a: #A`) does not
        // carry the closedness it inherited from the definitions enclosing it: a reference
        // closes only by the definitions its conjuncts reference themselves (upstream's typo
        // check: `r: a.b` is not checked against `#A`, `r: a` and `r: #A.b` are). Its stored
        // conjuncts hold only that inherited closedness (a definition reference among them is
        // kept as the reference and closes again where it is processed).
        //
        // Only the definitions between the field and the innermost struct enclosing both it and
        // the referring field count: a definition enclosing the referring field as well (`#D:
        // {s: {#R, v: x: {...}, m: x: s.v.x & {...}}}`, a module's `#components` holding a
        // component whose mount is written from its own volume) closes the referring field
        // through the referring conjunct's own closedness already; reaching its field through
        // regular fields from inside it carries no more of it than from outside.
        // (The innermost definition above the field is then also above the referring one.) A
        // conjunct all of whose ids the referring conjunct carries too is copied as it is: the
        // copy closes the same either way, and keeping it lets identical conjuncts be skipped.
        let (inherited_only, shared_def) = if w_def_close.is_some() {
            (false, false)
        } else {
            match std::iter::once(w)
                .chain(self.ancestors(w))
                .find(|a| self.vx(*a).label.is_def())
            {
                None => (true, false),
                // Not for an embedding: what an embedded value's closedness does is decided
                // where it joins the embedding's group (`closedness`).
                Some(d) if c.embed.is_none() => {
                    // The referring field is where the reference is evaluated, and also
                    // where it is written: a conjunct copied out of the definition (`r: {...}
                    // & #D.s`, `r: #C & #D.s` with `#D: {s: m: x: v.x & {...}, v: ...}`) still
                    // refers from inside it, its scopes (the environments it resolves names
                    // in) pass through the definition's body.
                    let shared = d == v
                        || self.ancestors(v).any(|a| a == d)
                        || std::iter::successors(c.env.as_ref(), |e| e.up.as_ref())
                            .any(|e| e.vertex == d);
                    (false, shared)
                }
                Some(_) => (false, false),
            }
        };
        let mut first_close = None;
        for i in from..n {
            // Conjuncts are only ever appended: the first `n` are the ones to copy.
            let Some(mut cj) = self.vx(w).conjuncts.get(i).cloned() else {
                break;
            };
            let foreign = |id: &u32| {
                !referring.as_ref().is_some_and(|r| r.contains(id)) && Some(*id) != c.close
            };
            if inherited_only
                || shared_def
                    && (cj.close.iter().any(foreign)
                        || cj.outer.iter().flat_map(|o| o.iter()).any(foreign))
            {
                cj.close = None;
                cj.outer = None;
            }
            if cj.close.is_none() && w_def_close.is_some() {
                cj.close = w_def_close;
            }
            // The closedness `w`'s own conjuncts carry, not the referring conjunct's.
            if first_close.is_none() {
                first_close = cj.close.filter(foreign);
            }
            if c.embed.is_some() {
                cj.embed = c.embed;
            }
            if c.close.is_some() && cj.close.is_none() {
                cj.close = c.close;
            }
            // The referring conjunct's enclosing origins enclose the copy too.
            if c.close.is_some() && cj.close != c.close || c.outer.is_some() {
                cj.outer = merge_outer(cj.outer.take(), referring.as_ref(), cj.close);
            }
            self.process(v, cj);
        }
        // The reference that brought a definition (or a field of one) here, for `field not
        // allowed` (see `closedness`).
        if let Some(id) = first_close {
            self.record_via(v, id, c);
        }
    }
}
