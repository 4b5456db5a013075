//! Closedness groups and pattern constraints (CUE spec "Closed structs", "Embedding",
//! "Definitions", "Field constraints"; upstream `closed.go`).
//!
//! Every conjunct carries the closedness id of the definition (or `close()`) it stems from; a
//! struct literal records its labels (and patterns) into the group of that id at its vertex, and
//! `Ev::finish` allows a regular label only when every closing group allows it. An embedded value
//! joins the embedding struct's group instead of closing it (`alias_group`); a definition reaching
//! a vertex both directly and as the embedding of a closed definition is checked once, as part
//! of the embedding one (`merge_group`), and one embedded by several closed definitions counts for
//! each of them without joining them.
//!
//! A struct literal with embeddings next to fields of its own (the file root included) marks
//! both sides, so that below it what the literal declares is not rejected by what it embeds
//! (`ClosedIds::embed_marks`). A conjunct carrying the literal's own mark came from its own fields
//! (`{X: {...}, {X}}`) and is not the embedded side, unless a definition closes it: a
//! definition declared inside the literal and embedded into it (`{r: i: #d: r: {}, r.i.#d}`,
//! at the root of a file too) is embedded like any other definition.
//!
//! A `field not allowed` error names, after the refused field, where each closed struct that
//! refuses it is written (upstream lists the same: the closing struct literal and the
//! reference that brought the definition in): every group records the first struct literal
//! whose fields it holds as its own (`src`; a literal it only encloses, such as the body of a
//! definition it references, when it has none) and the reference that brought its closedness
//! id to the vertex (`via`). A closed struct nested in a definition (`#A: b: {c: int}`, `x:
//! #A & {b: d: 1}`) names its own literal (`{c: int}`) and the reference above it (`#A` in
//! `x`). A value only compared with a closed one (`Value::check_unify`) has no reference
//! position: the literal is named.

use super::*;

impl Ev {
    fn group_idx(&mut self, v: VId, id: u32) -> usize {
        if let Some(g) = self.vx(v).groups.group_of(id) {
            return g;
        }
        let closing = !self.closed.flags.has(id, IdFlags::WEAK);
        let vert = self.vm(v);
        // The group is `id`'s by its owner (`Groups::group_of`).
        vert.groups.push(Group {
            closing,
            owner: id,
            ..Default::default()
        })
    }

    /// The index of `s` in `positions` (0 for no position).
    fn position_id(&mut self, s: Span) -> u32 {
        if s == Span::default() {
            return 0;
        }
        // The same literal is recorded into several groups in a row.
        if let Some(&i) = self
            .closed
            .positions
            .get(self.closed.last_position as usize)
        {
            if i == s {
                return self.closed.last_position;
            }
        }
        if let Some(&i) = self.closed.position_ids.get(&s) {
            self.closed.last_position = i;
            return i;
        }
        let Ok(i) = u32::try_from(self.closed.positions.len()) else {
            return 0;
        };
        self.closed.positions.push(s);
        self.closed.position_ids.insert(s, i);
        self.closed.last_position = i;
        i
    }

    /// Records that the struct literal at `s` declares fields into the groups of `v` it
    /// records its labels into: `gi`, the literal's target (its own closedness), and `ogs`,
    /// the definitions enclosing it. A group keeps the first literal that is its own, else
    /// the first it encloses.
    pub(super) fn record_src(&mut self, v: VId, gi: Option<usize>, ogs: &[usize], s: Span) {
        let mut p = None;
        for (g, direct) in gi
            .map(|g| (g, true))
            .into_iter()
            .chain(ogs.iter().map(|&g| (g, false)))
        {
            let Some(x) = self.vx(v).groups.get(g) else {
                continue;
            };
            if x.src != 0 && (x.src_direct || !direct) {
                continue;
            }
            let i = match p {
                Some(i) => i,
                None => *p.insert(self.position_id(s)),
            };
            if i == 0 {
                return;
            }
            let x = &mut self.vm(v).groups[g];
            x.src = i;
            x.src_direct = direct;
        }
    }

    /// Records the reference `c` that brought closedness id `id` to `v` (the first one), on
    /// the group `id` has at `v`, if any.
    pub(super) fn record_via(&mut self, v: VId, id: u32, c: &Conj) {
        let Some(g) = self.vx(v).groups.group_of(id) else {
            return;
        };
        if self.vx(v).groups[g].via == 0 {
            let p = self.position_id(c.expr.span());
            self.vm(v).groups[g].via = p;
        }
    }

    /// Refuses arc `a` of `v`, which the closing groups `gs` (with the groups they absorb) do
    /// not allow: `field not allowed` at the field, then where each of those closed structs
    /// is written.
    #[cold]
    #[inline(never)]
    pub(super) fn refuse(&mut self, v: VId, a: VId, gs: &[usize]) {
        let span = self.vx(a).span;
        let mut related = self.closed_positions(v, gs);
        related.retain(|s| *s != span);
        let b = Arc::new(Bottom {
            code: ErrorCode::NotAllowed,
            msg: "field not allowed".into(),
            span,
            related,
            sub: Vec::new(),
        });
        let ax = self.vm(a);
        ax.value.not_allowed = true;
        ax.value.err.get_or_insert(b);
    }

    /// The positions of the closed structs the groups `gs` of `v` stand for (their literals
    /// and references, see the module rules): a group with no reference of its own at `v`
    /// (a struct nested in a definition) takes the one of its closedness id at the nearest
    /// ancestor that has one. Sorted by file and offset, each once.
    fn closed_positions(&self, v: VId, gs: &[usize]) -> Vec<Span> {
        let mut out = Vec::new();
        let pos = |i: u32| {
            self.closed
                .positions
                .get(i as usize)
                .copied()
                .filter(|_| i != 0)
        };
        for &g in gs {
            let Some(x) = self.vx(v).groups.get(g) else {
                continue;
            };
            out.extend(pos(x.src));
            let via = if x.via != 0 {
                Some(x.via)
            } else {
                x.owner().and_then(|id| {
                    self.ancestors(v).find_map(|p| {
                        let gp = self.vx(p).groups.group_of(id)?;
                        let via = self.vx(p).groups.get(gp)?.via;
                        (via != 0).then_some(via)
                    })
                })
            };
            out.extend(via.and_then(pos));
        }
        out.sort_by_key(|s| (s.file.0, s.start, s.end));
        out.dedup();
        out
    }

    /// The closedness id whose group the struct literal `lit` of conjunct `c` records its
    /// labels into: the embedding's group for an embedded literal, else its closedness origin;
    /// a file's top-level literal, or a literal holding embeddings or comprehensions, gets a
    /// group of its own (weak: it does not close by itself), which what they embed records
    /// into (spec "Closed structs": values generated by comprehensions are embeddings).
    pub(super) fn literal_target(&mut self, c: &Conj, lit: &StructLit) -> Option<u32> {
        if let Some(e) = c.embed {
            Some(e)
        } else if let Some(cl) = c.close {
            Some(cl)
        } else if lit.is_file {
            self.closed.flags.set(u32::MAX, IdFlags::WEAK);
            Some(u32::MAX)
        } else if !lit.embeds.is_empty() || !lit.comprehensions.is_empty() {
            let id = self.new_close();
            self.closed.flags.set(id, IdFlags::WEAK);
            Some(id)
        } else {
            None
        }
    }

    /// The marks of a literal embedding values next to regular fields of its own (see
    /// `ClosedIds::embed_marks`): `(own, embedded)`, the literal's group id for its own side
    /// and a new id for the embedded side. `None` for any other literal.
    pub(super) fn literal_marks(
        &mut self,
        c: &Conj,
        lit: &StructLit,
        target: Option<u32>,
    ) -> Option<(u32, u32)> {
        match target {
            Some(t) if c.embed.is_none() && c.close.is_none() => {
                if !lit.embeds.is_empty()
                    && lit.fields.iter().any(|f| match &f.label {
                        LabelExpr::Fixed(l) => l.is_regular(),
                        LabelExpr::Dynamic(_) => true,
                    })
                {
                    let e = self.new_close();
                    self.closed
                        .flags
                        .set(e, IdFlags::WEAK | IdFlags::EMBED_MARK);
                    self.closed.flags.set(t, IdFlags::WEAK | IdFlags::OWN_MARK);
                    self.closed.embed_marks.insert(e, t);
                    Some((t, e))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// The groups of `v` a struct literal of conjunct `c` records its labels into: the group
    /// of its `target` (see `literal_target`), and the groups of the definitions enclosing it
    /// (its outer ids); for an embedded literal, the groups its own closedness already has
    /// here. A closing value that came through an embedding joins the embedding literal's own
    /// side first (`alias_group`).
    pub(super) fn literal_groups(
        &mut self,
        v: VId,
        c: &Conj,
        target: Option<u32>,
    ) -> (Option<usize>, Vec<usize>) {
        // A closing value that came through an embedding (its conjunct carries the embedded
        // side's mark) joins the group of the embedding literal's own side.
        if let Some(o) = &c.outer {
            // A conjunct that carries the literal's own mark too came from the literal's own
            // fields (`{X: {...}, {X}}`): it is not the embedded side; unless a definition
            // closes it (`{r: i: #d: r: {}, r.i.#d}`): that definition is embedded like any
            // other, and what the literal declares is not rejected by it.
            let t = o
                .iter()
                .find_map(|id| self.closed.embed_marks.get(id).copied())
                .filter(|t| !o.contains(t) || c.close.is_some());
            if let Some(t) = t {
                let ids: Vec<u32> = c.close.into_iter().chain(o.iter().copied()).collect();
                for n in ids {
                    if !self.closed.flags.has(n, IdFlags::WEAK) {
                        self.alias_group(v, n, t);
                    }
                }
            }
        }
        let gi = target.map(|t| self.group_idx(v, t));
        let mut ogs = Vec::with_capacity(c.outer.as_ref().map_or(0, |o| o.len()) + 1);
        if let Some(e) = c.embed {
            // An embedded value (spec "Embedding"): the closedness it carries (its own origin
            // and the definitions enclosing it where it was declared) does not close the
            // embedding struct against the struct's other fields; it joins the embedding's
            // group, so the struct allows the union of what every embedding declares. An
            // origin that already has a group of its own here (the embedding sits inside that
            // same definition: `#C: {a: {v: 1}, s: close({a})}`) records the labels too, as
            // that definition declares them.
            let outer = c.outer.clone();
            let ids = c
                .close
                .into_iter()
                .chain(outer.iter().flat_map(|o| o.iter().copied()));
            for id in ids {
                if id == e || self.is_mark(id) {
                    continue;
                }
                match self.vx(v).groups.group_of(id) {
                    Some(g) if Some(g) != gi => {
                        if let (Some(t), true) = (gi, Some(id) == c.close) {
                            self.merge_group(v, id, g, t);
                        }
                        if !ogs.contains(&g) {
                            ogs.push(g);
                        }
                    }
                    Some(_) => {}
                    None => self.alias_group(v, id, e),
                }
            }
        } else if let Some(o) = &c.outer {
            for id in o.iter() {
                if Some(*id) != target && !self.closed.flags.has(*id, IdFlags::EMBED_MARK) {
                    let g = self.group_idx(v, *id);
                    if !ogs.contains(&g) {
                        ogs.push(g);
                    }
                }
            }
        }
        (gi, ogs)
    }

    /// Closedness (spec "Closed structs"): a regular label of `v` must be allowed by every
    /// closing group, each together with the groups it absorbs (`merge_group`): declared by
    /// one of their literals or accepted by one of their patterns. A group open by `...` (or
    /// absorbing one that is) allows anything. Each refused arc gets its error (`refuse`).
    pub(super) fn check_closed(&mut self, v: VId) {
        // Each closing group's members are a range of one flat list (one allocation, not one
        // per group), and the arcs are read by index (no copy of the labels).
        let mut members = std::mem::take(&mut self.bufs.members);
        let mut closing = std::mem::take(&mut self.bufs.closing);
        self.closing_groups(v, &mut members, &mut closing);
        if !closing.is_empty() {
            self.refuse_unclosed(v, &members, &closing);
        }
        self.bufs.members = members;
        self.bufs.closing = closing;
    }

    /// Whether the closed struct `v` (evaluated) can never have the regular field `label` it
    /// lacks: a closing group (with the groups it absorbs) is not open and none of its
    /// patterns accepts the label (upstream `Vertex.Accept`). Selecting such a field is an
    /// error, not an incomplete value a later conjunct could still fill.
    pub(super) fn refuses_absent(&mut self, v: VId, label: &Label) -> bool {
        if !label.is_regular() {
            return false;
        }
        let (mut members, mut closing) = (Vec::new(), Vec::new());
        self.closing_groups(v, &mut members, &mut closing);
        for (from, to) in closing {
            let pats: Vec<VId> = members[from..to]
                .iter()
                .flat_map(|&g| self.vx(v).groups[g].patterns().iter().copied())
                .collect();
            if !pats.into_iter().any(|p| self.label_matches(p, label)) {
                return true;
            }
        }
        false
    }

    /// The closing groups of `v` that are not open, each with the groups it absorbs: a range
    /// of `closing` into the flat list `members` (one allocation, not one per group).
    fn closing_groups(&self, v: VId, members: &mut Vec<usize>, closing: &mut Vec<(usize, usize)>) {
        members.clear();
        closing.clear();
        let ngroups = self.vx(v).groups.len();
        for r in 0..ngroups {
            let gs = &self.vx(v).groups;
            if gs[r].merged || !gs[r].closing {
                continue;
            }
            let start = members.len();
            self.group_members_into(v, r, members);
            let gs = &self.vx(v).groups;
            if members[start..].iter().any(|&m| gs[m].open) {
                members.truncate(start);
            } else {
                closing.push((start, members.len()));
            }
        }
    }

    /// The arcs of `v` each range of `closing` (in `members`) refuses get their error.
    fn refuse_unclosed(&mut self, v: VId, members: &[usize], closing: &[(usize, usize)]) {
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
            for &(from, to) in closing {
                let gs = &members[from..to];
                if gs.iter().any(|&g| self.vx(v).groups[g].labels.contains(i)) {
                    continue;
                }
                // The label only when patterns must be asked (the common case needs none).
                let Some(l) = self.vx(v).arcs.get_index(i).map(|(l, _)| l.clone()) else {
                    break;
                };
                // Into a reused buffer (taken while in use: a nested check starts empty).
                let mut pats = std::mem::take(&mut self.bufs.patterns);
                pats.clear();
                pats.extend(
                    gs.iter()
                        .flat_map(|&g| self.vx(v).groups[g].patterns().iter().copied()),
                );
                let mut m = false;
                for &p in &pats {
                    if self.label_matches(p, &l) {
                        m = true;
                        break;
                    }
                }
                self.bufs.patterns = pats;
                if !m {
                    refusing.extend_from_slice(gs);
                }
            }
            if !refusing.is_empty() {
                self.refuse(v, a, &refusing);
            }
        }
    }

    pub(super) fn alias_group(&mut self, v: VId, id: u32, target: u32) {
        let tg = self.group_idx(v, target);
        if !self.closed.flags.has(id, IdFlags::WEAK) {
            self.vm(v).groups[tg].closing = true;
        }
        self.vm(v).groups.set_group_of(id, tg);
    }

    /// Appends group `g` and every group it absorbs, transitively (`merge_group`), to `out`.
    fn group_members_into(&self, v: VId, g: usize, out: &mut Vec<usize>) {
        let groups = &self.vx(v).groups;
        let start = out.len();
        out.push(g);
        let mut i = start;
        while let Some(&m) = out.get(i) {
            for &a in groups.get(m).map(|x| x.absorbs()).unwrap_or(&[]) {
                if !out[start..].contains(&a) {
                    out.push(a);
                }
            }
            i += 1;
        }
    }

    /// Whether group `g` is `t` or absorbs it, transitively.
    fn absorbs(&self, v: VId, g: usize, t: usize) -> bool {
        if g == t {
            return true;
        }
        let groups = &self.vx(v).groups;
        if groups.get(g).is_none_or(|x| x.absorbs().is_empty()) {
            return false;
        }
        let mut out = Vec::new();
        self.group_members_into(v, g, &mut out);
        out.contains(&t)
    }

    /// A definition that reaches this vertex directly (its own closing group `g`) and also as
    /// an embedding of a closed definition or `close()` (group `t`: `#M: {#V, mountPath!:
    /// string}` with `m: #M & (#V & {...})`) is checked once, as part of the embedding one:
    /// the embedding definition's fields plus the embedded one's are allowed (spec
    /// "Embedding", "Closed structs"; upstream gives one closedness id per definition per
    /// vertex, and the embedded use does not start a check of its own). The other order (the
    /// embedding first) aliases the id to `t` in `alias_group`; this is the same rule when the
    /// direct reference came first. Only the definition's own group merges (a group it was
    /// aliased into belongs to another definition, whose check stays), only between two
    /// closing groups (a definition embedded in an open struct keeps its own check), and a
    /// definition embedded by several closed definitions (`#A: {#C, a: int}`, `#B: {#C, b:
    /// int}`) counts for each of them without joining them: `a` stays not allowed by `#B`.
    pub(super) fn merge_group(&mut self, v: VId, id: u32, g: usize, t: usize) {
        let groups = &self.vx(v).groups;
        let is = |i: usize, f: fn(&Group) -> bool| groups.get(i).is_some_and(f);
        if g == t
            || !is(g, |x| x.closing)
            || !is(t, |x| x.closing)
            || groups.get(g).and_then(Group::owner) != Some(id)
            || self.absorbs(v, g, t)
        {
            return;
        }
        let vert = self.vm(v);
        vert.groups[g].merged = true;
        if !vert.groups[t].absorbs().contains(&g) {
            vert.groups[t].extra_mut().absorbs.push(g);
        }
    }

    pub(super) fn child_outer(&self, c: &Conj) -> Option<Arc<[u32]>> {
        let o = c.outer.as_ref()?;
        let keep = |id: &u32| {
            self.is_mark(*id) || !self.closed.flags.has(*id, IdFlags::NONREC | IdFlags::WEAK)
        };
        // Shared, not copied, when every id is kept (most calls).
        if !o.is_empty() && o.iter().all(keep) {
            return Some(o.clone());
        }
        let v: Vec<u32> = o.iter().copied().filter(keep).collect();
        if v.is_empty() {
            None
        } else {
            Some(v.into())
        }
    }

    pub(super) fn is_mark(&self, id: u32) -> bool {
        self.closed
            .flags
            .has(id, IdFlags::OWN_MARK | IdFlags::EMBED_MARK)
    }

    /// Whether two outer id lists hold the same embedding marks in the same order.
    pub(super) fn same_marks(&self, a: &Option<Arc<[u32]>>, b: &Option<Arc<[u32]>>) -> bool {
        self.marks_of(a).eq(self.marks_of(b))
    }

    /// The embedding marks of an outer id list, in order.
    fn marks_of<'a>(&'a self, o: &'a Option<Arc<[u32]>>) -> impl Iterator<Item = u32> + 'a {
        o.iter()
            .flat_map(|x| x.iter().copied())
            .filter(move |id| self.is_mark(*id))
    }

    /// Whether an outer id list holds an embedding mark.
    pub(super) fn has_mark(&self, outer: &Option<Arc<[u32]>>) -> bool {
        outer
            .iter()
            .flat_map(|o| o.iter())
            .any(|id| self.is_mark(*id))
    }

    pub(super) fn child_close(&self, c: &Conj) -> Option<u32> {
        match c.close {
            Some(id) if !self.closed.flags.has(id, IdFlags::NONREC | IdFlags::WEAK) => Some(id),
            _ => None,
        }
    }

    pub(super) fn apply_pattern(
        &mut self,
        v: VId,
        a: VId,
        label: &Label,
        filter: VId,
        pc: &Conj,
        penv: Option<Arc<Env>>,
    ) {
        if !label.is_regular() {
            return;
        }
        if !self.label_matches(filter, label) {
            // A label test that cannot be decided (an invalid regular expression) is an error
            // of the struct, not a label the pattern leaves alone.
            if let Some(b) = self.invalid_label_test(filter, pc.expr.span()) {
                self.set_err(v, b);
            }
            return;
        }
        let env = self.new_env(
            penv,
            a,
            EnvKind::Bind(vec![
                Binding::Val(Val::str(&label.name)),
                Binding::Vertex(a),
            ]),
        );
        self.add_conj(
            a,
            Conj {
                env: Some(env),
                expr: pc.expr.clone(),
                close: pc.close,
                embed: None,
                outer: pc.outer.clone(),
            },
        );
    }

    /// Whether the label filter vertex `f` accepts `label`.
    fn label_matches(&mut self, f: VId, label: &Label) -> bool {
        // The label's own string: a new copy per asked label was a measured cost.
        let s = Val::Str(label.name.clone());
        self.accepts(f, &s)
    }

    /// The error of a label filter that cannot test any label: a match operator whose regular
    /// expression does not compile (upstream reports it on the struct whose label it tested;
    /// a filter that is an error otherwise matches nothing, silently).
    fn invalid_label_test(&mut self, f: VId, span: Span) -> Option<Arc<Bottom>> {
        let f = self.vx(f).disjunction.redirect.unwrap_or(f);
        let bounds = self.vx(f).value.bounds.clone();
        for b in bounds {
            if let Val::Bound(BoundOp::Match | BoundOp::NotMatch, x) = &b {
                if let Val::Str(re) = &**x {
                    if let Err(e) = self.regex(re) {
                        return Some(Bottom::new(ErrorCode::Eval, e, span));
                    }
                }
            }
        }
        None
    }

    /// Whether unifying the scalar `s` with vertex `f` succeeds.
    pub fn accepts(&mut self, f: VId, s: &Val) -> bool {
        self.eval(f);
        let f = match self.vx(f).disjunction.redirect {
            Some(r) => r,
            None => f,
        };
        if let Some(d) = self.vx(f).disjunction.result.clone() {
            return d.alts.iter().any(|(a, _)| self.accepts(*a, s));
        }
        let fx = self.vx(f);
        if fx.value.err.is_some() || fx.value.is_struct || fx.value.is_list {
            return false;
        }
        if fx.value.kinds & s.kind() == 0 {
            return false;
        }
        if let Some(t) = &fx.value.scalar {
            if !ops::scalar_identical(s, t) {
                return false;
            }
        }
        let bounds = fx.value.bounds.clone();
        for b in bounds {
            if self.check_bound(&b, s).is_some() {
                return false;
            }
        }
        true
    }
}
