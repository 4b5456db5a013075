//! Conjunct intake (upstream `unify.go`, `conjunct.go`): processing one conjunct into a vertex,
//! by expression family.
//!
//! Rules:
//! - unification is idempotent (spec "Unification"): a conjunct identical to one processed into
//!   the vertex before (same [`ConjKey`], same closedness, outer ids included in the earlier
//!   one's, or any outer ids when the earlier one only added settled atoms) adds nothing and is
//!   skipped; a struct or list literal that differs only by more outer ids is processed for the
//!   new ids alone (`only_new_outer`); a disjunction equal to an earlier one but for its outer
//!   ids takes the earlier one's choice (`D & D == D`);
//! - by family (`process_expr`): literal atoms join the vertex's value (`atoms`); struct and
//!   list literals expand into arcs (`structs`, `lists`); `a & b` is taken apart; a disjunction
//!   waits to be split once the vertex is finished, unless the vertex is a disjunct that
//!   already chose; a reference unifies the referenced vertex in (`inline`); `close`, `and` and
//!   `or` calls are unified structurally; anything else is evaluated to a value (`expr`) and
//!   added;
//! - an embedded expression that is not final yet, or one that met a reference cycle, is
//!   processed again once every conjunct of the vertex is in (`late_embed`, `late_cycle`).

use super::*;

/// The processed conjuncts of a vertex by [`ConjKey`], boxed: only a vertex being expanded has
/// any (it is freed when the vertex is done), and an empty map is 32 bytes in every vertex.
/// Most vertices process conjuncts of one key only: that key is held alone, without a hash
/// table (a table per expanded vertex was a measured cost); a second key makes it a map.
#[derive(Clone, Debug, Default)]
pub(super) struct Seen(Option<Box<SeenStore>>);

/// What a [`Seen`] holds: one key, or a map once a second key arrives.
#[derive(Clone, Debug)]
pub(super) enum SeenStore {
    One(ConjKey, SeenList),
    Map(FastMap<ConjKey, SeenList>),
}

impl Seen {
    #[inline]
    pub(super) fn get(&self, k: &ConjKey) -> Option<&SeenList> {
        match &**self.0.as_ref()? {
            SeenStore::One(k0, l) => (k0 == k).then_some(l),
            SeenStore::Map(m) => m.get(k),
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, k: &ConjKey) -> Option<&mut SeenList> {
        match &mut **self.0.as_mut()? {
            SeenStore::One(k0, l) => (k0 == k).then_some(l),
            SeenStore::Map(m) => m.get_mut(k),
        }
    }

    /// The entries of `k`, created empty.
    #[inline]
    pub(super) fn entry(&mut self, k: ConjKey) -> &mut SeenList {
        let store = self
            .0
            .get_or_insert_with(|| Box::new(SeenStore::One(k, SeenList::Empty)));
        if matches!(&**store, SeenStore::One(k0, _) if *k0 != k) {
            let old = std::mem::replace(&mut **store, SeenStore::Map(FastMap::default()));
            if let (SeenStore::One(k0, first), SeenStore::Map(m)) = (old, &mut **store) {
                m.insert(k0, first);
            }
        }
        match &mut **store {
            SeenStore::One(_, l) => l,
            SeenStore::Map(m) => m.entry(k).or_default(),
        }
    }
}

/// The processed conjuncts of one [`ConjKey`] in a vertex: almost always one, held inline (a
/// `Vec` per key was one allocation per processed conjunct).
#[derive(Clone, Debug, Default)]
pub(super) enum SeenList {
    #[default]
    Empty,
    One(SeenConj),
    Many(Vec<SeenConj>),
}

impl SeenList {
    #[inline]
    pub(super) fn as_slice(&self) -> &[SeenConj] {
        match self {
            SeenList::Empty => &[],
            SeenList::One(e) => std::slice::from_ref(e),
            SeenList::Many(v) => v,
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut SeenConj> {
        match self {
            SeenList::Empty => None,
            SeenList::One(e) => (i == 0).then_some(e),
            SeenList::Many(v) => v.get_mut(i),
        }
    }

    /// Appends `e`; returns its index.
    #[inline]
    pub(super) fn push(&mut self, e: SeenConj) -> usize {
        match std::mem::take(self) {
            SeenList::Empty => {
                *self = SeenList::One(e);
                0
            }
            SeenList::One(first) => {
                *self = SeenList::Many(vec![first, e]);
                1
            }
            SeenList::Many(mut v) => {
                v.push(e);
                let i = v.len() - 1;
                *self = SeenList::Many(v);
                i
            }
        }
    }
}

/// A conjunct processed into a vertex (see [`Seen`]): its closedness, which disjunction of the
/// vertex it is, and whether processing it only added settled atoms.
#[derive(Clone, Debug)]
pub(super) struct SeenConj {
    pub(super) close: Option<u32>,
    pub(super) embed: Option<u32>,
    pub(super) outer: Option<Arc<[u32]>>,
    /// [`outer_bloom`] of `outer`: a conjunct whose ids set a bit this lacks is no subset of
    /// `outer`, decided without comparing the ids (a vertex can hold hundreds of entries
    /// of one key that differ by one id, each compared on every arrival of the key).
    outer_bloom: u128,
    /// Its index among the vertex's disjunctions (`usize::MAX` if it is no disjunction).
    disj: usize,
    /// Processing it only added settled atoms (see [`Ev::process_expr`]): it is skipped when
    /// met again whatever its outer ids.
    pub(super) atomic: bool,
}

impl Ev {
    /// Processes one conjunct into `v`.
    ///
    /// Unification is idempotent (spec "Unification"): a conjunct identical to one already
    /// processed into `v` (same [`ConjKey`], same closedness, outer ids included in the
    /// earlier one's, or any outer ids when the earlier one only added settled atoms: see
    /// [`Ev::process_expr`]) adds nothing and is skipped. An identical disjunction that differs only
    /// in its outer closedness ids is the same disjunction (`D & D == D`): it takes the
    /// alternative its twin takes and is not split on again. This keeps the conjuncts a
    /// definition contributes once per vertex however many references bring it there.
    pub(super) fn process(&mut self, v: VId, c: Conj) {
        self.process_inner(v, c, true);
    }

    /// Processes `c` into `v` even if an identical conjunct was processed before (an embedded
    /// reference taken again once all conjuncts of `v` are in).
    pub(super) fn process_again(&mut self, v: VId, c: Conj) {
        self.process_inner(v, c, false);
    }

    fn process_inner(&mut self, v: VId, c: Conj, dedup: bool) {
        if !self.step() {
            if let Some(b) = self.budget.limit_err.clone() {
                self.set_err(v, b);
            }
            return;
        }
        self.stats.processed += 1;
        let key = if dedup { self.conj_key(&c) } else { None };
        let mut twin: Option<usize> = None;
        let mut again: Option<usize> = None;
        if let Some(k) = &key {
            if let Some(prev) = self.vx(v).seen.get(k) {
                let bloom = outer_bloom(&c.outer);
                for (i, e) in prev.as_slice().iter().enumerate() {
                    if e.close == c.close && e.embed == c.embed {
                        if e.atomic
                            || (bloom & !e.outer_bloom == 0 && outer_subset(&c.outer, &e.outer))
                        {
                            self.stats.deduped += 1;
                            return;
                        }
                        if e.disj != usize::MAX {
                            twin = Some(e.disj);
                        } else if again.is_none() {
                            again = Some(i);
                        }
                    }
                }
            }
        }
        if let (Some(k), None, Some(i)) = (&key, twin, again) {
            if let Some(c) = self.only_new_outer(v, k, i, &c) {
                self.stats.incremental += 1;
                self.process_expr(v, c);
                return;
            }
        }
        let mut recorded = None;
        if let (Some(k), None) = (&key, twin) {
            // A disjunction takes the next index (the Disj arm below counts every one).
            let di = if matches!(c.expr, Expr::Disj(..)) {
                self.vx(v).scr().disj_seen
            } else {
                usize::MAX
            };
            let entries = self.vm(v).seen.entry(*k);
            let i = entries.push(SeenConj {
                close: c.close,
                embed: c.embed,
                outer: c.outer.clone(),
                outer_bloom: outer_bloom(&c.outer),
                disj: di,
                atomic: false,
            });
            recorded = Some((*k, i));
        }
        if let (Some(ti), Expr::Disj(alts, _)) = (twin, &c.expr) {
            // The twin of disjunction `ti`: the same choice, or nothing while `ti` is pending.
            if let Some(&ch) = self.vx(v).scr().choice.get(ti) {
                if let Some((e, _)) = alts.get(ch) {
                    let e = e.clone();
                    self.vm(v).disjunction.nest += 1;
                    self.process(v, c.with_expr(e));
                    self.vm(v).disjunction.nest -= 1;
                }
            }
            return;
        }
        if self.process_expr(v, c) {
            if let Some((k, i)) = recorded {
                if let Some(e) = self.vm(v).seen.get_mut(&k).and_then(|es| es.get_mut(i)) {
                    e.atomic = true;
                }
            }
        }
    }

    /// Struct and list literals that reached `v` more than once before it expands (the same
    /// literal in the same canonical environment, with the same closedness and embedding; only
    /// their outer closedness ids differ) are taken once, with the union of their outer ids.
    /// Processing the later ones would add exactly what [`Ev::only_new_outer`] processes them
    /// for, the ids the first lacks, so the result is the same under the same conditions (no
    /// embedding marks involved), and every child gets one conjunct instead of one per
    /// arrival. (Render: 57 k of the 129 k conjuncts present when vertices expand.)
    pub(super) fn merge_repeated_literals(&mut self, v: VId) {
        let n = self.vx(v).conjuncts.len();
        if n < 2 {
            return;
        }
        // The first arrival of each literal: its identity, closedness and index.
        struct First {
            key: ConjKey,
            close: Option<u32>,
            embed: Option<u32>,
            index: usize,
        }
        let mut firsts: Vec<First> = Vec::new();
        let mut merged: Vec<usize> = Vec::new();
        for i in 0..n {
            let c = &self.vx(v).conjuncts[i];
            if !matches!(c.expr, Expr::Struct(_) | Expr::List(_))
                || c.close.is_some_and(|id| self.is_mark(id))
                || self.has_mark(&c.outer)
            {
                continue;
            }
            let Some(k) = self.conj_key(c) else {
                continue;
            };
            let (close, embed) = (c.close, c.embed);
            match firsts
                .iter()
                .find(|f| f.key == k && f.close == close && f.embed == embed)
            {
                Some(&First { index: j, .. }) => {
                    let add = c.outer.clone();
                    let base = self.vx(v).conjuncts[j].outer.clone();
                    self.vm(v).conjuncts[j].outer = merge_outer(base, add.as_ref(), None);
                    merged.push(i);
                }
                None => firsts.push(First {
                    key: k,
                    close,
                    embed,
                    index: i,
                }),
            }
        }
        if merged.is_empty() {
            return;
        }
        self.stats.merged += merged.len() as u64;
        // `merged` is in ascending order.
        let mut i = 0;
        self.vm(v).conjuncts.retain(|_| {
            i += 1;
            merged.binary_search(&(i - 1)).is_err()
        });
    }

    /// A struct or list conjunct identical to processed one `i` of key `k` but for outer
    /// closedness ids it adds (`#Component` reaching a component through its pattern, its
    /// blueprint and its embedded fragments): everything it records per id is already
    /// recorded for the earlier one's ids, so only the new ids remain to record. Returns the
    /// conjunct with just those ids (and widens the earlier one's to the union, so a third
    /// arrival with a subset is skipped), or `None` when it must be processed in full: an
    /// expression other than a literal, a conjunct closed by an embedding mark, or one whose
    /// embedding marks differ from the earlier one's (`expand_struct` reads the marks of the
    /// whole id set, not one id at a time; with the same marks, kept in the new ids, it
    /// decides alike).
    pub(super) fn only_new_outer(
        &mut self,
        v: VId,
        k: &ConjKey,
        i: usize,
        c: &Conj,
    ) -> Option<Conj> {
        if !matches!(c.expr, Expr::Struct(_) | Expr::List(_)) {
            return None;
        }
        let prev = self.vx(v).seen.get(k)?.as_slice().get(i)?.outer.clone();
        if c.close.is_some_and(|id| self.is_mark(id)) || !self.same_marks(&prev, &c.outer) {
            return None;
        }
        // The marks stay in the new ids, in their order: `literal_groups` reads the whole set
        // only for its marks (which embedding literal a value came through, and whether it is
        // that literal's own side), so with the same marks it decides as for the full set.
        let mut new = IdBuf::new();
        for id in c.outer.iter().flat_map(|x| x.iter().copied()) {
            if self.is_mark(id) || !prev.as_ref().is_some_and(|p| p.contains(&id)) {
                new.push(id);
            }
        }
        let union = merge_outer(prev, c.outer.as_ref(), None);
        if let Some(e) = self.vm(v).seen.get_mut(k).and_then(|es| es.get_mut(i)) {
            e.outer_bloom = outer_bloom(&union);
            e.outer = union;
        }
        Some(Conj {
            env: c.env.clone(),
            expr: c.expr.clone(),
            close: c.close,
            embed: c.embed,
            outer: Some(new.done().unwrap_or_else(|| Arc::from(&[][..]))),
        })
    }

    /// Processes the expression of conjunct `c` into `v`, by expression family. Returns
    /// `true` when all it did was add settled atoms (see [`settled_atom`]) to `v`, with no
    /// struct, list, disjunction or embedding involved: the closedness ids of such a conjunct
    /// play no part, so the same conjunct reached again with other outer ids adds nothing.
    fn process_expr(&mut self, v: VId, c: Conj) -> bool {
        match &c.expr {
            Expr::Lit(val, span) => {
                let val = val.clone();
                self.add_atom(v, val, *span);
                false
            }
            Expr::Struct(lit) => {
                let lit = lit.clone();
                self.expand_struct(v, &c, &lit);
                false
            }
            Expr::List(lit) => {
                let lit = lit.clone();
                self.expand_list(v, &c, &lit);
                false
            }
            Expr::Unify(..) => {
                self.process_unify(v, c);
                false
            }
            Expr::Disj(alts, _) => {
                let alts = alts.clone();
                self.process_disj(v, &c, alts);
                false
            }
            Expr::FieldRef { .. }
            | Expr::SelfRef { .. }
            | Expr::LetRef { .. }
            | Expr::BindRef { .. }
            | Expr::Selector(..)
            | Expr::Index(..)
            | Expr::Import(..)
            | Expr::Vertex(..) => self.process_ref(v, &c),
            Expr::Call(f, args, span) => self.process_call(v, &c, f, args, *span),
            Expr::Bad(b) => {
                let b = b.clone();
                self.set_err(v, b);
                false
            }
            _ => {
                let span = c.expr.span();
                let val = self.eval_expr(&c.env, &c.expr);
                if !final_atom(&val) {
                    self.late_embed(v, &c);
                }
                if matches!(&val, Val::Bottom(b) if b.code == ErrorCode::Cycle) {
                    self.late_cycle(v, &c);
                }
                self.add_value(v, val, &c, span) && c.embed.is_none()
            }
        }
    }

    /// `a & b & ...`: each operand is processed in the conjunct's environment and closedness,
    /// taken apart without copying the operands (a long `a & b & ...` would be copied once
    /// per operand otherwise).
    fn process_unify(&mut self, v: VId, c: Conj) {
        let Conj {
            env,
            expr,
            close,
            embed,
            outer,
        } = c;
        if let Expr::Unify(xs, _) = expr {
            // An embedded conjunction is one embedded value (spec "Embedding"): a struct
            // literal unified with a reference there (`{#D & {x: 1}}`) is checked against what
            // the reference closes, as `#D & {x: 1}` is anywhere else; only the reference
            // joins the embedding's group, not the literal next to it (upstream
            // `definitions/typocheck`, `embed.andInStruct`). Not done: an open struct reached
            // through a reference there (`{_h & #D}`) still joins the group, as a definition
            // already closing this vertex may not be moved to the embedding's group.
            let with_ref = embed.is_some() && xs.iter().any(|x| !matches!(x, Expr::Struct(_)));
            for x in xs.iter() {
                let embed = if with_ref && matches!(x, Expr::Struct(_)) {
                    None
                } else {
                    embed
                };
                self.process(
                    v,
                    Conj {
                        env: env.clone(),
                        expr: x.clone(),
                        close,
                        embed,
                        outer: outer.clone(),
                    },
                );
            }
        }
    }

    /// A disjunction: a disjunct processes the alternative it chose for it; a disjunction of
    /// one alternative is that alternative; any other waits until `v` is finished, when `v` is
    /// split on it (`disjunct`), with the atom state `v` had when it was met.
    fn process_disj(&mut self, v: VId, c: &Conj, alts: Arc<[(Expr, bool)]>) {
        let seen = self.vx(v).scr().disj_seen;
        self.vm(v).scr_mut().disj_seen += 1;
        if let Some(&ch) = self.vx(v).scr().choice.get(seen) {
            if let Some((e, _)) = alts.get(ch) {
                self.process_chosen(v, c.expr.span(), c.with_expr(e.clone()));
            }
        } else if alts.len() == 1 {
            self.process(v, c.with_expr(alts[0].0.clone()));
        } else {
            let vx = self.vx(v);
            let nested = vx.disjunction.nest > 0;
            let within = vx.scr().within.last().copied();
            let met = Met {
                scalar: vx.value.scalar.is_some(),
                bounds: vx.value.bounds.len(),
            };
            self.vm(v).scr_mut().pending_disj.push(PendingDisj {
                conj: c.clone(),
                alts,
                nested,
                within,
                met,
            });
        }
    }

    /// Processes the alternative `c` chosen for the disjunction at `span` into the disjunct
    /// `v`; disjunctions met meanwhile are nested in it (`PendingDisj::within`).
    pub(super) fn process_chosen(&mut self, v: VId, span: Span, c: Conj) {
        self.vm(v).disjunction.nest += 1;
        self.vm(v).scr_mut().within.push(span);
        self.process(v, c);
        self.vm(v).scr_mut().within.pop();
        self.vm(v).disjunction.nest -= 1;
    }

    /// A reference: the vertex it names is unified into `v` (`inline`), an atom it names is
    /// added. Returns whether only settled atoms were added (see [`Ev::process_expr`]).
    fn process_ref(&mut self, v: VId, c: &Conj) -> bool {
        let span = c.expr.span();
        match self.resolve(&c.env, &c.expr) {
            Res::V(w) => {
                // An embedded value that is an atom may depend on fields of `v` that
                // conjuncts not added yet declare (`{[#a][0]}` with `#a: "s"` declared
                // by another conjunct): taken again once all are in.
                // (With one conjunct, the literal's own fields are all in already.)
                if c.embed.is_some()
                    && !matches!(c.expr, Expr::FieldRef { .. })
                    && self.vx(v).conjuncts.len() > 1
                {
                    let wr = self.deref_redirect(w);
                    let wx = self.vx(wr);
                    // Only a value that is not final yet: a concrete scalar or an
                    // error cannot change.
                    if !(wx.value.is_struct
                        || wx.value.is_list
                        || wx.disjunction.result.is_some()
                        || wx.value.scalar.is_some()
                        || wx.value.err.is_some())
                    {
                        self.late_embed(v, c);
                    }
                }
                self.unify_vertex(v, w, c, span) && c.embed.is_none()
            }
            Res::A(a) => {
                if c.embed.is_some() {
                    self.late_embed(v, c);
                }
                let atomic = c.embed.is_none() && settled_atom(&a);
                self.add_atom(v, a, span);
                atomic
            }
        }
    }

    /// A call. `close`, `and` and `or` are unified structurally: `close(x)` is `x` closed (one
    /// closedness id per call, see `Ev::close_id`), `and(l)` unifies the elements of `l`,
    /// `or(l)` is their disjunction; any other call is evaluated and its value added.
    fn process_call(&mut self, v: VId, c: &Conj, f: &Expr, args: &[Expr], span: Span) -> bool {
        if let (Expr::Lit(Val::Builtin(name), _), [arg]) = (f, args) {
            match &**name {
                "close" => {
                    self.process_close(v, c, arg, span);
                    return false;
                }
                "and" => {
                    self.process_and(v, c, arg, span);
                    return false;
                }
                "or" => {
                    self.process_or(v, c, arg, span);
                    return false;
                }
                _ => {}
            }
        }
        let val = self.eval_expr(&c.env, &c.expr);
        if !final_atom(&val) {
            self.late_embed(v, c);
        }
        self.add_value(v, val, c, span) && c.embed.is_none()
    }

    /// `close(arg)`: `arg` processed under the call's closedness id, which closes it.
    fn process_close(&mut self, v: VId, c: &Conj, arg: &Expr, span: Span) {
        let id = self.close_id(v, c);
        self.process(
            v,
            Conj {
                env: c.env.clone(),
                expr: arg.clone(),
                close: Some(id),
                embed: c.embed,
                outer: outer_with(c),
            },
        );
        // `close` takes and returns a struct (upstream's parameter is a
        // struct): `close(1)` or `close([1])` is a conflict.
        self.add_atom(v, Val::Kind(K_STRUCT), span);
    }

    /// `and(list)`: every element of the list unified into `v`.
    fn process_and(&mut self, v: VId, c: &Conj, arg: &Expr, span: Span) {
        let lv = self.call_list(&c.env, arg, span);
        if let Val::Vertex(l) = lv {
            self.eval(l);
            let l = self.deref(l);
            let items: Vec<VId> = self.vx(l).arcs.values().copied().collect();
            for it in items {
                self.unify_vertex(v, it, c, span);
            }
            return;
        }
        self.set_err(
            v,
            Bottom::new(ErrorCode::Eval, "and: argument must be a list", span),
        );
    }

    /// `or(list)`: the disjunction of the list's elements (an empty list is incomplete).
    fn process_or(&mut self, v: VId, c: &Conj, arg: &Expr, span: Span) {
        let lv = self.call_list(&c.env, arg, span);
        if let Val::Vertex(l) = lv {
            self.eval(l);
            let l = self.deref(l);
            let items: Vec<VId> = self.vx(l).arcs.values().copied().collect();
            if items.is_empty() {
                self.add_atom(
                    v,
                    Val::Bottom(Bottom::new(
                        ErrorCode::Incomplete,
                        "empty list in call to or",
                        span,
                    )),
                    span,
                );
                return;
            }
            let alts = items
                .into_iter()
                .map(|it| (Expr::Vertex(it, span), false))
                .collect();
            self.process(
                v,
                Conj {
                    expr: Expr::Disj(alts, span),
                    ..c.clone()
                },
            );
            return;
        }
        self.set_err(
            v,
            Bottom::new(ErrorCode::Eval, "or: argument must be a list", span),
        );
    }

    /// The evaluated list argument of an `and`/`or` call, once per environment and position.
    fn call_list(&mut self, env: &Option<Arc<Env>>, arg: &Expr, span: Span) -> Val {
        let key = (env.as_ref().map_or(0, |e| e.id), span);
        if let Some(v) = self.caches.call_lists.get(&key) {
            return v.clone();
        }
        let v = self.eval_expr(env, arg);
        if matches!(v, Val::Vertex(_)) {
            self.caches.call_lists.insert(key, v.clone());
        }
        v
    }

    /// Adds an evaluated value to `v`; `true` if it was a settled atom (see [`settled_atom`]).
    fn add_value(&mut self, v: VId, val: Val, c: &Conj, span: Span) -> bool {
        match val {
            Val::Vertex(w) => self.unify_vertex(v, w, c, span),
            other => {
                let atomic = settled_atom(&other);
                self.add_atom(v, other, span);
                atomic
            }
        }
    }
}
