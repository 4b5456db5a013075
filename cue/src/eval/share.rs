//! Structure sharing (upstream `share.go`; design rule 2 of the evaluator's module docs).
//!
//! A vertex whose only conjunct (beside top) is a reference to an evaluated struct or list cannot
//! add or reject a field, so its value *is* the referenced one: it gets one proxy arc per arc of
//! the target, each sharing its own target lazily. Nothing is re-evaluated and every field keeps
//! its own path for error messages. The same holds for a reference to a disjunction whose
//! alternatives have no fields (`n: c.name` with `name: string | *"web"`): the vertex takes the
//! target's alternatives and defaults instead of splitting the disjunction again (an unresolved
//! one is still reported at the referring path, which exports it). Sharing stops after 64
//! nested levels so that structural cycles are still found.
//!
//! The walks over results (`to_data`, `collect_fatal_hidden` in `readout.rs`) do not evaluate a
//! proxy that nothing evaluated yet: they go through it to its target (upstream's validator:
//! `DerefNonShared`), and only if the target has an error do they walk the proxy itself, so
//! that the error has the proxy's path. In the 129-component render bench this leaves 69.3 k
//! vertices instead of 83.5 k (5.4 k shared instead of 11.9 k).

use super::*;

/// Most ancestors sharing a value (see `Ev::shareable`) a vertex may have and still share one.
const MAX_SHARED_DEPTH: usize = 64;

/// An arc of a shared vertex, as its proxy in the sharing vertex is made (see [`Ev::share`]).
struct ProxyArc {
    label: Label,
    /// What the proxy's only conjunct refers to.
    target: VId,
    constraint: Option<FieldConstraint>,
    /// A refused arc's error, if it has one (`Some(_)` for a refused arc).
    refused: Option<Option<Arc<Bottom>>>,
    span: Span,
}

impl Ev {
    /// Structure sharing (upstream: `adt.Vertex.BaseValue` set to a shared vertex): a vertex
    /// whose only conjunct (beside top) is a reference to an evaluated struct or list `w` (or a
    /// disjunction of alternatives without fields), with
    /// no closedness of its own that could reject anything (no other conjunct can add a field),
    /// is `w`: it is redirected to `w` instead of copying and re-evaluating `w`'s conjuncts.
    /// This is what keeps `components: {for n, c in m.#components {(n): c}}` and
    /// `#transform & {#component: comp}` linear in the size of the shared value.
    pub(super) fn shareable(&mut self, v: VId) -> Option<VId> {
        self.active.sharing_probes.push(v);
        let r = self.shareable_probe(v);
        self.active.sharing_probes.pop();
        r
    }

    /// [`Ev::shareable`] while `v` is on the probe stack.
    fn shareable_probe(&mut self, v: VId) -> Option<VId> {
        let vx = self.vx(v);
        if vx.value.not_allowed
            || !vx.scr().choice.is_empty()
            || vx.disjunction.nosplit
            || vx.disjunction.clone_of.is_some()
        {
            return None;
        }
        // A value that shares values all the way down without end (`a: b: c: {a}.b` makes a
        // new anonymous value at every level) is a structural cycle: past this many sharing
        // ancestors the vertex is copied instead, where the cycle is found.
        if self
            .ancestors(v)
            .filter(|p| self.vx(*p).value.shared)
            .nth(MAX_SHARED_DEPTH)
            .is_some()
        {
            return None;
        }
        let mut it = vx
            .conjuncts
            .iter()
            .filter(|c| !matches!(c.expr, Expr::Lit(Val::Top, _)));
        let c = it.next()?.clone();
        if it.next().is_some() || c.embed.is_some() {
            return None;
        }
        if !matches!(
            c.expr,
            Expr::FieldRef { .. }
                | Expr::SelfRef { .. }
                | Expr::LetRef { .. }
                | Expr::BindRef { .. }
                | Expr::Selector(..)
                | Expr::Index(..)
                | Expr::Vertex(..)
        ) {
            return None;
        }
        let Res::V(w) = self.resolve(&c.env, &c.expr) else {
            return None;
        };
        if w == v
            || self.is_ancestor_regular(w, v).is_some()
            || self.is_ancestor_regular(v, w).is_some()
        {
            return None;
        }
        // A target being expanded, or being checked for sharing further up (a reference cycle
        // through sharing candidates, `b: c, c: b`), is not shared: the expansion of `v` then
        // meets the cycle and treats it as one.
        if self.vx(w).status == Status::Expanding || self.active.sharing_probes.contains(&w) {
            return None;
        }
        self.eval(w);
        // A target that read a vertex still being expanded (`c: d & {b: 2}`, `d: e`, `e: {a:
        // 1} & c`) is evaluated again once that one is done; so is `v`, which shares it.
        self.inherit_taint(w, v);
        let wr = self.deref_redirect(w);
        let wx = self.vx(wr);
        if wx.status != Status::Done
            || wx.dirty
            || wx.value.err.is_some()
            || !wx.scr().pending_disj.is_empty()
        {
            return None;
        }
        match &wx.disjunction.result {
            None if !(wx.value.is_struct || wx.value.is_list) => return None,
            // A disjunction of values without fields (`name: string | *"web"` read by a field
            // of a copied component) is shared whole: splitting it again where it is
            // referenced gives the same alternatives. One with struct or list alternatives is
            // copied, so that fields below it keep the referring path.
            Some(d) => {
                let d = d.clone();
                for (a, _) in &d.alts {
                    let ax = self.vx(self.deref_redirect(*a));
                    if ax.status != Status::Done
                        || !ax.arcs.is_empty()
                        || ax.value.is_struct
                        || ax.value.is_list
                    {
                        return None;
                    }
                }
            }
            None => {}
        }
        if self.active.expanding.contains(&wr) {
            return None;
        }
        Some(wr)
    }

    /// Makes `v` share the evaluated struct or list `w` (see [`Ev::shareable`]): `v` takes
    /// `w`'s value and gets one arc per arc of `w` whose only conjunct is that arc, so each is
    /// shared in turn when (and only if) it is evaluated. No conjunct of `w` is evaluated
    /// again, and every field of `v` keeps its own path (errors are reported where they are
    /// used, as with a copy).
    pub(super) fn share(&mut self, v: VId, w: VId) {
        self.stats.shared += 1;
        let wx = self.vx(w);
        let w_shared = wx.value.shared;
        let arcs: Vec<ProxyArc> = wx
            .arcs
            .iter()
            .map(|(l, a)| {
                let ax = self.vx(*a);
                // An arc of a vertex that itself shares is a proxy: the new proxy refers to
                // what that one refers to, so a chain of sharing vertices (a component read
                // through `components`, then `#instance`, then `#component`) does not make
                // and evaluate one proxy per level.
                let target = match proxied(&ax.conjuncts) {
                    Some(t) if w_shared => t,
                    _ => *a,
                };
                // A refused arc's error (with its positions) goes with the flag.
                let refused = ax.value.not_allowed.then(|| ax.value.err.clone());
                ProxyArc {
                    label: l.clone(),
                    target,
                    constraint: ax.constraint,
                    refused,
                    span: ax.span,
                }
            })
            .collect();
        // `w`'s value, but for what stays `v`'s own: its error and refusal, and whether only
        // comprehensions made it a struct.
        let from = &wx.value;
        let kinds = from.kinds;
        let scalar = from.scalar.clone();
        let scalar_span = from.scalar_span;
        let bounds = from.bounds.clone();
        let incomplete = from.incomplete.clone();
        let unmet = from.unmet.clone();
        let (is_struct, is_list) = (from.is_struct, from.is_list);
        let bound_spans = wx.scr().bound_spans.clone();
        let disj = wx.disjunction.result.clone();
        for ProxyArc {
            label: l,
            target: a,
            constraint,
            refused,
            span,
        } in arcs
        {
            let c = self.new_vertex(Some(v), l.clone());
            let cx = self.vm(c);
            cx.constraint = constraint;
            if let Some(err) = refused {
                cx.value.not_allowed = true;
                cx.value.err = err;
            }
            cx.span = span;
            cx.conjuncts.push(Conj::new(None, Expr::Vertex(a, span)));
            self.insert_arc(v, l, c);
        }
        let vert = self.vm(v);
        let value = &mut vert.value;
        value.kinds = kinds;
        value.scalar = scalar;
        value.scalar_span = scalar_span;
        value.bounds = bounds;
        value.incomplete = incomplete;
        value.unmet = unmet;
        value.is_struct = is_struct;
        value.is_list = is_list;
        value.shared = true;
        vert.scr_mut().bound_spans = bound_spans;
        vert.settle_scratch();
        vert.disjunction.result = disj;
        vert.status = Status::Done;
    }
}

/// The vertex a proxy refers to: the target of conjuncts that are exactly one plain reference
/// to a vertex (no environment, closedness, embedding or outer ids), as [`Ev::share`] makes them.
pub(super) fn proxied(conjuncts: &[Conj]) -> Option<VId> {
    match conjuncts {
        [Conj {
            env: None,
            expr: Expr::Vertex(t, _),
            close: None,
            embed: None,
            outer: None,
        }] => Some(*t),
        _ => None,
    }
}
