//! Struct literals (upstream `adt.StructLit` evaluation in `unify.go`, `closed.go`): fields,
//! dynamic fields, pattern constraints, embeddings and comprehensions of a literal unified into
//! a vertex, and where arcs are allocated.
//!
//! Rules:
//! - next to an embedding, only regular fields make the value a struct: definitions, hidden and
//!   optional fields, patterns and `...` leave the embedded value free to be a scalar (spec
//!   "Embedding");
//! - a literal records its labels into the closedness group of its conjunct's origin (its own
//!   group when it has embeddings or comprehensions), and into the groups of the definitions
//!   enclosing it; an embedded value joins the embedding's group instead of closing it
//!   (`closedness`);
//! - a field's conjunct carries the closedness a field of it inherits (a definition's own id
//!   for a definition field); a field's constraint is the strongest of its declarations
//!   (regular over required over optional);
//! - a dynamic label is evaluated once every conjunct of the vertex is in, against the same
//!   state for all dynamic labels of a round;
//! - a pattern constraint applies to every regular arc whose label its filter accepts, present
//!   or added later (`arc_full`); a filter that refers to nothing is evaluated once per literal;
//! - comprehensions wait until the declared fields are in (`comprehension`).

use super::*;

/// A pattern constraint of a struct (`[filter]: value`): applied to every regular arc whose
/// label the filter accepts, present and future (see `Ev::arc_full`).
#[derive(Clone, Debug)]
pub(super) struct Pattern {
    /// The label filter, a vertex of its own.
    pub(super) filter: VId,
    /// The constraint's value, with the closedness of its literal (no environment: `env`).
    pub(super) conj: Conj,
    /// The environment of the struct literal declaring it.
    pub(super) env: Option<Arc<Env>>,
}

/// A field with a dynamic label, added once all conjuncts of its struct are in: the literal and
/// index of the field, its struct's environment and the closedness context of `expand_struct`.
#[derive(Clone, Debug)]
pub(super) struct PendingField {
    pub(super) lit: Arc<StructLit>,
    pub(super) index: usize,
    pub(super) env: Arc<Env>,
    pub(super) ctx: FieldCtx,
}

/// Where `expand_struct` records a field's label and which closedness its value carries.
#[derive(Clone, Debug)]
pub(super) struct FieldCtx {
    pub(super) group: Option<usize>,
    outer_groups: Vec<usize>,
    pub(super) child_outer: Option<Arc<[u32]>>,
    pub(super) child_close: Option<u32>,
}

impl Ev {
    /// The pattern constraints (`[filter]: value`) of the evaluated `v`, in the order they were
    /// met: the label filter, and the constraint's value as a vertex of its own, evaluated as a
    /// field the filter accepts whose label is not known yet (the label binds to `string`).
    pub fn pattern_constraints(&mut self, v: VId) -> Vec<(VId, VId)> {
        self.eval(v);
        let v = self.deref(v);
        let pats = self.vx(v).scr().patterns.clone();
        let mut out = Vec::with_capacity(pats.len());
        for Pattern {
            filter,
            conj: pc,
            env: penv,
        } in pats
        {
            let a = self.new_vertex(None, Label::internal("_pattern"));
            let env = self.new_env(
                penv,
                a,
                EnvKind::Bind(vec![Binding::Val(Val::Kind(K_STRING)), Binding::Vertex(a)]),
            );
            self.vm(a).span = pc.expr.span();
            self.add_conj(
                a,
                Conj {
                    env: Some(env),
                    ..pc
                },
            );
            out.push((filter, a));
        }
        out
    }

    /// Gets or creates arc `label` of `v` (applying pattern constraints to a new arc).
    pub(super) fn arc(&mut self, v: VId, label: &Label) -> VId {
        self.arc_full(v, label).1
    }

    /// [`Ev::arc`] with the arc's index in `v`'s arc map.
    fn arc_full(&mut self, v: VId, label: &Label) -> (usize, VId) {
        if let Some((i, _, &a)) = self.vx(v).arcs.get_full(label) {
            return (i, a);
        }
        let a = self.new_vertex(Some(v), label.clone());
        let i = self.insert_arc(v, label.clone(), a);
        let pats = self.vx(v).scr().patterns.clone();
        for p in pats {
            self.apply_pattern(v, a, label, p.filter, &p.conj, p.env);
        }
        (i, a)
    }

    /// Adds arc `a` labelled `label` to `v` (replacing one of that label); returns its index.
    /// Every arc is added here.
    #[inline]
    pub(super) fn insert_arc(&mut self, v: VId, label: Label, a: VId) -> usize {
        self.charge(cost::ARC);
        self.vm(v).arcs.insert_full(label, a).0
    }

    /// Evaluates the labels of the pending dynamic fields of `v` (all against the same state:
    /// a dynamic label does not see fields other dynamic labels of this round add), then adds
    /// the fields. Returns whether any were pending.
    pub(super) fn run_dynamic_fields(&mut self, v: VId) -> bool {
        let pending = self.vm(v).take_scratch(|x| &mut x.dyn_fields);
        if pending.is_empty() {
            return false;
        }
        let mut ready = Vec::with_capacity(pending.len());
        for p in pending {
            let Some(f) = p.lit.fields.get(p.index) else {
                continue;
            };
            let LabelExpr::Dynamic(e) = &f.label else {
                continue;
            };
            let lv = self.eval_expr(&Some(p.env.clone()), e);
            let lv = self.concrete_default(lv);
            match lv {
                Val::Str(s) => ready.push((p, Label::string(&s))),
                Val::Bottom(b) => self.set_err(v, b),
                other => {
                    let code = if other.is_concrete_scalar() {
                        ErrorCode::Eval
                    } else {
                        ErrorCode::Incomplete
                    };
                    self.set_err(
                        v,
                        Bottom::new(
                            code,
                            format!(
                                "invalid label: expected string, found {}",
                                ops::show(&other)
                            ),
                            f.span,
                        ),
                    );
                }
            }
        }
        for (p, label) in ready {
            if let Some(f) = p.lit.fields.get(p.index) {
                self.add_field(v, &p.env, f, label, &p.ctx);
            }
        }
        true
    }

    /// Adds field `f` of a struct literal under `label` to `v`.
    fn add_field(&mut self, v: VId, env: &Arc<Env>, f: &FieldDecl, label: Label, ctx: &FieldCtx) {
        let (i, a) = self.arc_full(v, &label);
        if let Some(g) = ctx.group {
            self.vm(v).groups[g].labels.insert(i);
        }
        for &g in &ctx.outer_groups {
            self.vm(v).groups[g].labels.insert(i);
        }
        let mut fouter = ctx.child_outer.clone();
        let cc = if label.is_def() {
            let id = match self.vx(a).def_close {
                Some(id) => id,
                None => {
                    let id = self.new_close();
                    self.vm(a).def_close = Some(id);
                    id
                }
            };
            if let Some(cc) = ctx.child_close {
                let mut o: Vec<u32> = fouter.as_ref().map(|x| x.to_vec()).unwrap_or_default();
                if !o.contains(&cc) {
                    o.push(cc);
                }
                fouter = Some(o.into());
            }
            Some(id)
        } else {
            ctx.child_close
        };
        let ax = self.vm(a);
        ax.constraint = Some(match (ax.constraint, f.constraint) {
            (None, x) => x,
            (Some(FieldConstraint::Regular), _) | (_, FieldConstraint::Regular) => {
                FieldConstraint::Regular
            }
            (Some(FieldConstraint::Required), _) | (_, FieldConstraint::Required) => {
                FieldConstraint::Required
            }
            _ => FieldConstraint::Optional,
        });
        if ax.conjuncts.is_empty() {
            ax.span = f.span;
        }
        self.add_conj(
            a,
            Conj {
                env: Some(env.clone()),
                expr: f.value.clone(),
                close: cc,
                embed: None,
                outer: fouter,
            },
        );
    }

    /// Unifies the struct literal `lit` of conjunct `c` into `v`: its fields become arcs, its
    /// patterns apply to them, its embeddings are processed into `v`, and its dynamic fields
    /// and comprehensions wait until every conjunct of `v` is in; all of it records into the
    /// closedness groups the conjunct carries (`closedness`).
    pub(super) fn expand_struct(&mut self, v: VId, c: &Conj, lit: &Arc<StructLit>) {
        self.mark_struct(v, lit);
        let env = self.new_env(c.env.clone(), v, EnvKind::Struct(lit.clone()));
        let target = self.literal_target(c, lit);
        let marks = self.literal_marks(c, lit, target);
        let (gi, ogs) = self.literal_groups(v, c, target);
        // Where the closed structs are written, for `field not allowed` (see `closedness`).
        self.record_src(v, gi, &ogs, lit.span);
        let mut child_outer = self.child_outer(c);
        if let Some((t, _)) = marks {
            child_outer = Some(with_id(&child_outer, t));
        }
        if lit.ellipsis.is_some() {
            for g in gi.iter().chain(ogs.iter()) {
                self.vm(v).groups[*g].open = true;
            }
        }
        let child_close = self.child_close(c);
        let ctx = FieldCtx {
            group: gi,
            outer_groups: ogs,
            child_outer,
            child_close,
        };
        for (index, f) in lit.fields.iter().enumerate() {
            match &f.label {
                LabelExpr::Fixed(l) => self.add_field(v, &env, f, l.clone(), &ctx),
                // A dynamic label may refer to fields declared later or contributed by other
                // conjuncts: it is evaluated once the vertex has all its conjuncts.
                LabelExpr::Dynamic(_) => self.vm(v).scr_mut().dyn_fields.push(PendingField {
                    lit: lit.clone(),
                    index,
                    env: env.clone(),
                    ctx: ctx.clone(),
                }),
            }
        }
        self.add_patterns(v, &env, lit, &ctx);
        let embed_outer = match marks {
            Some((_, e)) => Some(with_id(&c.outer, e)),
            None => c.outer.clone(),
        };
        for e in &lit.embeds {
            self.process(
                v,
                Conj {
                    env: Some(env.clone()),
                    expr: e.clone(),
                    close: c.close,
                    embed: target,
                    outer: embed_outer.clone(),
                },
            );
        }
        for comp in &lit.comprehensions {
            self.vm(v).scr_mut().comps.push(PendingComp {
                env: env.clone(),
                comp: comp.clone(),
                close: c.close,
                embed: target,
                outer: c.outer.clone(),
            });
        }
    }

    /// Whether literal `lit` makes `v` a struct. Next to an embedding, only regular fields do:
    /// definitions, hidden and optional fields, patterns and `...` constrain the fields a
    /// struct would have but leave the embedded value free to be a scalar (`{..., #foo:
    /// string, _}` is `_`, so `"s" & {..., #foo: string, _}` is the string; spec "Embedding").
    /// A literal of comprehensions only is a struct unless they yield a scalar (`finish`).
    fn mark_struct(&mut self, v: VId, lit: &StructLit) {
        let has_fields = lit.fields.iter().any(|f| match &f.label {
            LabelExpr::Fixed(l) => {
                l.is_regular()
                    && (lit.embeds.is_empty() || f.constraint == FieldConstraint::Regular)
            }
            LabelExpr::Dynamic(_) => true,
        }) || lit.embeds.is_empty()
            && (!lit.patterns.is_empty() || lit.ellipsis.is_some());
        if has_fields || (lit.embeds.is_empty() && lit.comprehensions.is_empty()) {
            self.vm(v).value.is_struct = true;
        } else if lit.embeds.is_empty() {
            self.vm(v).value.maybe_struct = true;
        }
    }

    /// The pattern constraints of `lit` (expanded in `env`): recorded into the literal's
    /// groups (their filters allow labels there), kept for arcs added later, and applied to
    /// the arcs `v` has now.
    fn add_patterns(&mut self, v: VId, env: &Arc<Env>, lit: &Arc<StructLit>, ctx: &FieldCtx) {
        for (pi, p) in lit.patterns.iter().enumerate() {
            let fv = self.pattern_filter(env, lit, pi, &p.filter);
            if let Some(g) = ctx.group {
                self.vm(v).groups[g].extra_mut().patterns.push(fv);
            }
            for &g in &ctx.outer_groups {
                self.vm(v).groups[g].extra_mut().patterns.push(fv);
            }
            let pc = Conj {
                env: None,
                expr: p.value.clone(),
                close: ctx.child_close,
                embed: None,
                outer: ctx.child_outer.clone(),
            };
            self.vm(v).scr_mut().patterns.push(Pattern {
                filter: fv,
                conj: pc.clone(),
                env: Some(env.clone()),
            });
            let arcs: Vec<(Label, VId)> = self.vx(v).arc_list();
            for (l, a) in arcs {
                self.apply_pattern(v, a, &l, fv, &pc, Some(env.clone()));
            }
        }
    }

    /// The label filter vertex of pattern `pi` of `lit` expanded in `env` (see `Caches::filters`).
    fn pattern_filter(
        &mut self,
        env: &Arc<Env>,
        lit: &Arc<StructLit>,
        pi: usize,
        filter: &Expr,
    ) -> VId {
        if !refers_to_nothing(filter) {
            return self.anon(Some(env.clone()), filter.clone());
        }
        let key = (Arc::as_ptr(lit) as usize, pi);
        if let Some(&f) = self.caches.filters.get(&key) {
            return f;
        }
        let f = self.anon(None, filter.clone());
        self.caches.filters.insert(key, f);
        f
    }
}

/// Whether `e` is built from literals and operators only (no reference, import, call,
/// struct or list), so that its value does not depend on where it is evaluated.
fn refers_to_nothing(e: &Expr) -> bool {
    match e {
        Expr::Lit(..) => true,
        Expr::Unary(_, x, _) => refers_to_nothing(x),
        Expr::Binary(_, a, b, _) => refers_to_nothing(a) && refers_to_nothing(b),
        Expr::Unify(xs, _) => xs.iter().all(refers_to_nothing),
        Expr::Disj(xs, _) => xs.iter().all(|(x, _)| refers_to_nothing(x)),
        _ => false,
    }
}
