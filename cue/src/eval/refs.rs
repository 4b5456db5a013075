//! References and selectors (CUE spec "References", "Selectors", "Let declarations").
//!
//! An identifier resolves through the environment chain to the vertex or let binding that
//! declares it; a selector looks the label up in the evaluated operand (a definition or hidden
//! label only in its own package); a redirect left by structure sharing or a resolved
//! disjunction is followed (`deref`). An operand that is no field (an inline struct or list)
//! is an error when one of its regular fields is (`unrooted_error`), before anything is
//! selected from it or indexed in it.

use super::*;

/// The result of resolving a reference.
pub(super) enum Res {
    V(VId),
    A(Val),
}

impl Ev {
    /// Makes the package rooted at `v` importable as `path` (its import path without version
    /// or qualifier).
    pub(crate) fn add_package(&mut self, path: String, v: VId) {
        self.packages.insert(path, v);
    }

    /// Follows single-survivor redirects.
    pub fn deref_redirect(&self, mut v: VId) -> VId {
        let mut n = 0;
        while let Some(r) = self.vx(v).disjunction.redirect {
            v = r;
            n += 1;
            if n > 1000 {
                break;
            }
        }
        v
    }

    /// Follows redirects and takes the default of a disjunction when it is unique.
    pub fn deref(&mut self, v: VId) -> VId {
        let mut v = self.deref_redirect(v);
        let mut n = 0;
        while let Some(d) = self.vx(v).disjunction.result.clone() {
            let defs: Vec<VId> = d.alts.iter().filter(|a| a.1).map(|a| a.0).collect();
            if defs.len() == 1 && d.has_default {
                v = defs[0];
                self.eval(v);
                v = self.deref_redirect(v);
            } else {
                break;
            }
            n += 1;
            if n > 100 {
                break;
            }
        }
        v
    }

    // ----------------------------------------------------------------------------------------
    // References and expressions.

    fn let_vertex(
        &mut self,
        env: &Arc<Env>,
        idx: u32,
        expr: &Expr,
        bind_env: Option<Arc<Env>>,
    ) -> VId {
        let key = (env.id, idx);
        if let Some(&v) = self.caches.lets.get(&key) {
            return v;
        }
        let v = self.new_vertex(Some(env.vertex), Label::internal("let"));
        let x = self.vm(v);
        x.constraint = Some(FieldConstraint::Regular);
        x.span = expr.span();
        x.conjuncts.push(Conj::new(bind_env, expr.clone()));
        self.caches.lets.insert(key, v);
        v
    }

    /// The vertices the conjuncts of `v` refer to, sorted, when every conjunct of `v` is a
    /// reference to a vertex (a field, a definition, an import's member, a selection of one);
    /// `None` for anything else (a literal, an operator, a comprehension, a disjunction, a
    /// reference to an atom or an error). Two vertices with the same targets are the
    /// unification of the same values, so they are one value (see `Value::same_sources`).
    pub fn conjunct_targets(&mut self, v: VId) -> Option<Vec<VId>> {
        self.eval(v);
        let mut v = self.deref_redirect(v);
        // A proxy arc of a sharing vertex is the arc it refers to.
        for _ in 0..64 {
            match super::share::proxied(&self.vx(v).conjuncts) {
                Some(t) => {
                    self.eval(t);
                    v = self.deref_redirect(t);
                }
                None => break,
            }
        }
        let conjuncts = self.vx(v).conjuncts.clone();
        if conjuncts.is_empty() {
            return None;
        }
        // `a & b` is the conjuncts `a` and `b`.
        let mut refs: Vec<(&Option<Arc<Env>>, &Expr)> = Vec::with_capacity(conjuncts.len());
        let mut todo: Vec<(&Option<Arc<Env>>, &Expr)> =
            conjuncts.iter().map(|c| (&c.env, &c.expr)).collect();
        while let Some((env, e)) = todo.pop() {
            match e {
                Expr::Unify(parts, _) => todo.extend(parts.iter().map(|x| (env, x))),
                Expr::FieldRef { .. } | Expr::Selector(..) | Expr::Import(..) => {
                    refs.push((env, e))
                }
                _ => return None,
            }
        }
        let mut out = Vec::with_capacity(refs.len());
        for (env, e) in refs {
            match self.resolve(env, e) {
                Res::V(w) => {
                    self.eval(w);
                    let w = self.deref_redirect(w);
                    if self.vx(w).value.err.is_some() {
                        return None;
                    }
                    out.push(w);
                }
                Res::A(_) => return None,
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    /// Resolves a reference to the vertex it names, or to an atom (a binding's value, an
    /// error); any other expression is evaluated.
    pub(super) fn resolve(&mut self, env: &Option<Arc<Env>>, e: &Expr) -> Res {
        match e {
            Expr::SelfRef { up, span } => match env_up(env, *up) {
                Some(en) => Res::V(self.current_disjunct(en.vertex)),
                None => bad_env(*span),
            },
            Expr::FieldRef { up, label, span } => match env_up(env, *up) {
                Some(en) => {
                    let vid = en.vertex;
                    self.resolve_field(vid, label, *span)
                }
                None => bad_env(*span),
            },
            Expr::LetRef { up, idx, span, .. } => match env_up(env, *up).cloned() {
                Some(en) => self.resolve_let(en, *idx, *span),
                None => bad_env(*span),
            },
            Expr::BindRef { up, idx, span } => match env_up(env, *up).cloned() {
                Some(en) => self.resolve_binding(en, *idx, *span),
                None => bad_env(*span),
            },
            Expr::Vertex(v, _) => Res::V(*v),
            Expr::Import(path, span) => {
                let base = crate::compile::import_key(path);
                match self.packages.get(&base) {
                    Some(&v) => Res::V(v),
                    None => Res::A(Val::Bottom(Bottom::new(
                        ErrorCode::Eval,
                        format!("package {path:?} not found"),
                        *span,
                    ))),
                }
            }
            Expr::Selector(base, label, span) => {
                let b = match self.resolve(env, base) {
                    Res::V(w) => w,
                    Res::A(Val::Vertex(w)) => match self.unrooted_error(w) {
                        Some(e) => return Res::A(Val::Bottom(e)),
                        None => w,
                    },
                    Res::A(Val::Bottom(b)) => return Res::A(Val::Bottom(b)),
                    Res::A(other) => {
                        let code = if other.is_concrete_scalar() {
                            ErrorCode::Eval
                        } else {
                            ErrorCode::Incomplete
                        };
                        return Res::A(Val::Bottom(Bottom::new(
                            code,
                            format!("invalid selector {}: not a struct", label.name),
                            *span,
                        )));
                    }
                };
                self.select(b, label, *span)
            }
            Expr::Index(base, index, span) => self.resolve_index(env, base, index, *span),
            other => Res::A(self.eval_expr(env, other)),
        }
    }

    /// The error a value that is no field (an inline struct or list, a unification of them)
    /// takes from its fields before one is selected or indexed (see `Ev::child_error`); a
    /// field's value is looked into as it is, so `a: {x: 1 & 2, y: 2}` still gives `a.y` 2.
    fn unrooted_error(&mut self, w: VId) -> Option<Arc<Bottom>> {
        let w = self.deref(w);
        let x = self.vx(w);
        if x.parent.is_some() || !(x.value.is_struct || x.value.is_list) {
            return None;
        }
        self.child_error(w)
    }

    /// The field `label` of the struct literal's vertex `vid` (an identifier resolved to a
    /// field of an enclosing struct).
    fn resolve_field(&mut self, vid: VId, label: &Label, span: Span) -> Res {
        match self.vx(vid).arcs.get(label).copied() {
            Some(a) => {
                // A reference to an optional field that is not present is incomplete.
                // Definitions too: an optional field declares but does not define
                // its field (spec "Field constraints").
                if self.vx(vid).status != Status::Fresh
                    && self.vx(a).constraint == Some(FieldConstraint::Optional)
                {
                    return Res::A(Val::Bottom(Bottom::new(
                        ErrorCode::Undefined,
                        format!("cannot reference optional field: {}", label.path_text()),
                        span,
                    )));
                }
                Res::V(self.current_disjunct(a))
            }
            None => {
                // The field may not be declared in this conjunct of the vertex (a
                // disjunction clone, or a let at file level); look it up by value.
                if self.vx(vid).status == Status::Fresh {
                    self.eval(vid);
                }
                let vid2 = self.deref(vid);
                match self.vx(vid2).arcs.get(label) {
                    Some(&a) => Res::V(a),
                    None => Res::A(Val::Bottom(Bottom::new(
                        ErrorCode::Incomplete,
                        format!("reference {:?} not found", &*label.name),
                        span,
                    ))),
                }
            }
        }
    }

    /// The `let` number `idx` of the struct literal of environment `en`.
    fn resolve_let(&mut self, en: Arc<Env>, idx: u32, span: Span) -> Res {
        let expr = match &en.kind {
            EnvKind::Struct(lit) => lit.lets.get(idx as usize).map(|l| l.1.clone()),
            EnvKind::Bind(_) => None,
        };
        match expr {
            // A let naming another value by reference (`let X = a`) is that value, as
            // the reference itself would be: `X.b` inside `a` selects `a.b` instead
            // of copying `a` under itself, which would be a structural cycle.
            Some(
                x @ (Expr::FieldRef { .. }
                | Expr::Selector(..)
                | Expr::LetRef { .. }
                | Expr::SelfRef { .. }),
            ) if !self.active.let_resolving.contains(&(en.id, idx)) => {
                // A let referring to itself (`let X = Y, let Y = X`) takes the let
                // vertex below, where the cycle is met as one.
                self.active.let_resolving.push((en.id, idx));
                let r = self.resolve(&Some(en.clone()), &x);
                self.active.let_resolving.pop();
                match r {
                    Res::V(w) => Res::V(w),
                    _ => Res::V(self.let_vertex(&en, idx, &x, Some(en.clone()))),
                }
            }
            Some(x) => Res::V(self.let_vertex(&en, idx, &x, Some(en.clone()))),
            None => Res::A(Val::Bottom(Bottom::new(
                ErrorCode::Eval,
                "internal: bad let",
                span,
            ))),
        }
    }

    /// The binding number `idx` of environment `en` (a comprehension's key or value, a
    /// pattern's label, a lazy `let` clause).
    fn resolve_binding(&mut self, en: Arc<Env>, idx: u32, span: Span) -> Res {
        let b = match &en.kind {
            EnvKind::Bind(bs) => bs.get(idx as usize).cloned(),
            EnvKind::Struct(_) => None,
        };
        match b {
            Some(Binding::Vertex(v)) => Res::V(v),
            Some(Binding::Val(a)) => Res::A(a),
            Some(Binding::Lazy(lenv, x)) => {
                Res::V(self.let_vertex(&en, idx + 1000, &x, Some(lenv)))
            }
            None => Res::A(Val::Bottom(Bottom::new(
                ErrorCode::Eval,
                "internal: bad binding",
                span,
            ))),
        }
    }

    /// `base[index]` (spec "Index expressions"): an element of a list by position, a field of
    /// a struct by name.
    fn resolve_index(
        &mut self,
        env: &Option<Arc<Env>>,
        base: &Expr,
        index: &Expr,
        span: Span,
    ) -> Res {
        let iv = self.eval_expr(env, index);
        let b = match self.resolve(env, base) {
            Res::V(w) => w,
            Res::A(Val::Vertex(w)) => match self.unrooted_error(w) {
                Some(e) => return Res::A(Val::Bottom(e)),
                None => w,
            },
            Res::A(Val::Bottom(b)) => return Res::A(Val::Bottom(b)),
            // Only lists and structs can be indexed (spec "Index expressions"): a
            // string or bytes value cannot.
            Res::A(v @ (Val::Str(_) | Val::Bytes(_))) => {
                return Res::A(Val::Bottom(Bottom::new(
                    ErrorCode::Eval,
                    format!(
                        "invalid operand {} (found {}, want list or struct)",
                        ops::show(&v),
                        if matches!(v, Val::Str(_)) {
                            "string"
                        } else {
                            "bytes"
                        }
                    ),
                    span,
                )));
            }
            Res::A(other) => {
                return Res::A(Val::Bottom(Bottom::new(
                    if other.is_concrete_scalar() {
                        ErrorCode::Eval
                    } else {
                        ErrorCode::Incomplete
                    },
                    format!("invalid index of {}", ops::show(&other)),
                    span,
                )))
            }
        };
        match iv {
            Val::Int(i) => {
                self.eval(b);
                let bd = self.deref(b);
                let bx = self.vx(bd);
                if let Some(e) = &bx.value.err {
                    return Res::A(Val::Bottom(e.clone()));
                }
                if !bx.value.is_list {
                    let cycle = self.unknown_in_cycle(bd);
                    let bx = self.vx(bd);
                    return Res::A(Val::Bottom(Bottom::new(
                        if cycle {
                            ErrorCode::Cycle
                        } else if bx.value.is_struct {
                            ErrorCode::Eval
                        } else {
                            ErrorCode::Incomplete
                        },
                        format!("invalid index {i} (not a list)"),
                        span,
                    )));
                }
                let idx: Option<usize> = num_traits::ToPrimitive::to_usize(&*i);
                match idx.and_then(|ix| bx.arcs.get(&Label::index(ix))) {
                    Some(&a) => Res::V(a),
                    None => Res::A(Val::Bottom(Bottom::new(
                        ErrorCode::Eval,
                        format!("index out of range [{}] with length {}", i, bx.arc_count()),
                        span,
                    ))),
                }
            }
            Val::Str(s) => self.select(b, &Label::string(&s), span),
            Val::Bottom(b) => Res::A(Val::Bottom(b)),
            other => Res::A(Val::Bottom(Bottom::new(
                if other.is_concrete_scalar() {
                    ErrorCode::Eval
                } else {
                    ErrorCode::Incomplete
                },
                format!("invalid index {}", ops::show(&other)),
                span,
            ))),
        }
    }

    pub(super) fn select(&mut self, b: VId, label: &Label, span: Span) -> Res {
        self.eval(b);
        let bd = self.deref(b);
        let bx = self.vx(bd);
        if let Some(e) = &bx.value.err {
            return Res::A(Val::Bottom(e.clone()));
        }
        if bx.disjunction.result.is_some() {
            return Res::A(Val::Bottom(Bottom::new(
                ErrorCode::Incomplete,
                format!(
                    "unresolved disjunction: cannot select {}",
                    label.path_text()
                ),
                span,
            )));
        }
        match bx.arcs.get(label) {
            Some(&a) => {
                let expanding = bx.status == Status::Expanding;
                if !expanding {
                    self.eval(a);
                }
                if self.vx(a).value.not_allowed
                    && self.active.disjuncts.is_empty()
                    && !std::iter::once(bd)
                        .chain(self.ancestors(bd))
                        .any(|p| self.vx(p).disjunction.clone_of.is_some())
                {
                    return Res::V(self.unrefused(a));
                }
                if self.vx(a).constraint == Some(FieldConstraint::Optional) {
                    return Res::A(Val::Bottom(Bottom::new(
                        ErrorCode::Undefined,
                        format!("cannot reference optional field: {}", label.path_text()),
                        span,
                    )));
                }
                Res::V(a)
            }
            None => {
                // An imported package is complete: a member it lacks is an error, not
                // something a later conjunct could still add.
                let is_package =
                    bx.status == Status::Done && self.packages.values().any(|&p| p == bd);
                let done = bx.status == Status::Done;
                let code = if is_package {
                    ErrorCode::Eval
                } else if self.unknown_in_cycle(bd) {
                    ErrorCode::Cycle
                } else if self
                    .vx(bd)
                    .value
                    .incomplete
                    .as_ref()
                    .is_some_and(|e| e.code == ErrorCode::Cycle)
                {
                    // A struct whose comprehensions wait on a reference cycle does not know
                    // its fields yet: the absent field is part of that cycle.
                    ErrorCode::Cycle
                } else if self.vx(bd).value.is_struct && done && self.refuses_absent(bd, label) {
                    // A closed struct that can never have the field.
                    ErrorCode::Eval
                } else if self.vx(bd).value.is_struct {
                    ErrorCode::Undefined
                } else if self.vx(bd).value.scalar.is_some() || self.vx(bd).value.is_list {
                    ErrorCode::Eval
                } else {
                    ErrorCode::Undefined
                };
                Res::A(Val::Bottom(Bottom::new(
                    code,
                    format!("undefined field: {}", label.path_text()),
                    span,
                )))
            }
        }
    }
}

impl Ev {
    /// Whether `v` is a value still being computed of which nothing is known yet: expanding,
    /// no struct, list or scalar so far (`Y: f(X)` while `X` reads `Y.m`; `Y: {if Z.m !=
    /// _|_ {..}}` while `Z` reads `Y.m`). Selecting or indexing into it is then a reference
    /// cycle, not an absent field or a wrong kind: the field may be there once `Y` is known
    /// (upstream's lookup in a node under evaluation is a cycle error). What was expanded
    /// since `v` read it unfinished is evaluated again once `v` is done.
    fn unknown_in_cycle(&mut self, v: VId) -> bool {
        let x = self.vx(v);
        let unknown = x.status == Status::Expanding
            && !x.value.is_struct
            && !x.value.is_list
            && x.value.scalar.is_none();
        if unknown {
            self.taint_since(v);
        }
        unknown
    }

    /// The value of the field `a` its struct refuses, apart from the refusal: a field selected
    /// from a struct is its own value, and the closedness of the struct it sits in is that
    /// struct's error, not the field's (upstream evalv3 looks fields up without checking
    /// closedness: `(#D & {b: 2}).b` is 2, `eval/openinline`). A new vertex with `a`'s
    /// conjuncts, evaluated apart from the struct. Not while a disjunction is decided, nor
    /// in a disjunct: there the refusal is a failure of the alternative, which eliminates it
    /// (real modules pick a default `[]` over an alternative that copies a refused field).
    fn unrefused(&mut self, a: VId) -> VId {
        let w = self.new_vertex(None, Label::internal("_selected"));
        let conjuncts = self.vx(a).conjuncts.clone();
        let span = self.vx(a).span;
        let x = self.vm(w);
        x.span = span;
        x.conjuncts = conjuncts;
        w
    }
}

/// The error of a reference whose environment is not there (a compiler bug, never user input).
fn bad_env(span: Span) -> Res {
    Res::A(Val::Bottom(Bottom::new(
        ErrorCode::Eval,
        "internal: bad environment",
        span,
    )))
}
