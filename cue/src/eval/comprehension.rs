//! Comprehensions (CUE spec "Comprehensions"; upstream `comprehension.go`).
//!
//! `for` and `if` clauses run after the vertex's declared fields are expanded, so guards see every
//! field; each result is an embedding of the struct it stands in (its fields are allowed by the
//! struct's closedness). A comprehension whose clauses are still incomplete (it reads a field
//! another comprehension of the same vertex yields) is retried after the others ran, as long as
//! a round makes progress; then its error stands. Fields a round yielded under dynamic labels
//! (`"\(k)": v`) are added before such a retry (or before giving up), as the field a guard reads
//! may be one of them. A guard or source that stays incomplete
//! leaves the struct incomplete (nothing is yielded, and an export of the struct fails: what it
//! would hold is unknown), as upstream's `cue export` reports `incomplete bool: _`.
//!
//! Fixed point: a comprehension that ran and yielded nothing (a guard false, a source with no
//! fields) runs again once another comprehension of the same struct yielded after it, as what it
//! tests may exist now (`out: {spec: w: {}, if spec.w.s != _|_ {spec: t: spec.w.s}, if true
//! {spec: w: s: 1}}` gives `t: 1`; the catalog's blueprints test `spec.<workload>.scaling` this
//! way while modules add it under `if enabled {...}` beside them). Until a rerun yields nothing
//! new; a comprehension that yielded is consumed and never runs again, so the reruns end. Not
//! done: one that yielded is not taken back when a later yield makes its guard false
//! (`if a.x == _|_ {...}` before `if true {a: x: 1}`): upstream decides such a guard after the
//! other comprehensions, or reports the cycle.

use super::*;

/// A comprehension of a struct literal waiting to run (see `comprehension`): its environment
/// and clauses, and the closedness of the literal's conjunct its results are embedded with.
#[derive(Clone, Debug)]
pub(super) struct PendingComp {
    pub(super) env: Arc<Env>,
    pub(super) comp: ComprehensionC,
    pub(super) close: Option<u32>,
    /// The group its results record their labels into (they are embeddings).
    pub(super) embed: Option<u32>,
    pub(super) outer: Option<Arc<[u32]>>,
}

impl Ev {
    /// Runs comprehension clauses; collects the environments in which the body is yielded.
    pub(super) fn run_clauses(
        &mut self,
        v: VId,
        env: &Arc<Env>,
        comp: &ComprehensionC,
        i: usize,
        out: &mut Vec<Arc<Env>>,
    ) -> Option<Arc<Bottom>> {
        if !self.step() {
            return self.budget.limit_err.clone();
        }
        let Some(cl) = comp.clauses.get(i) else {
            if !self.charge(cost::YIELD) {
                return self.budget.limit_err.clone();
            }
            out.push(env.clone());
            return None;
        };
        match cl {
            ClauseC::For { source, span } => {
                let src = match self.enclosing_source(env, source, v) {
                    Some(w) => Val::Vertex(w),
                    None => self.eval_expr(&Some(env.clone()), source),
                };
                match src {
                    Val::Vertex(w) => {
                        self.eval(w);
                        let w = self.deref(w);
                        if let Some(b) = self.vx(w).value.err.clone() {
                            return Some(b);
                        }
                        let wx = self.vx(w);
                        if wx.disjunction.result.is_some() {
                            return Some(Bottom::new(
                                ErrorCode::Incomplete,
                                "cannot range over unresolved disjunction",
                                *span,
                            ));
                        }
                        let arcs: Vec<(Label, VId)> = wx.arc_list();
                        let is_list = wx.is_list();
                        for (l, a) in arcs {
                            if is_list {
                                if l.kind != LabelKind::Index {
                                    continue;
                                }
                            } else {
                                if !l.is_regular() {
                                    continue;
                                }
                                self.eval(a);
                                if self.vx(a).constraint() != Some(FieldConstraint::Regular) {
                                    continue;
                                }
                            }
                            let key = if is_list {
                                Val::int(l.index)
                            } else {
                                Val::str(&l.name)
                            };
                            let benv = self.new_env(
                                Some(env.clone()),
                                v,
                                EnvKind::Bind(vec![Binding::Val(key), Binding::Vertex(a)]),
                            );
                            if let Some(b) = self.run_clauses(v, &benv, comp, i + 1, out) {
                                return Some(b);
                            }
                        }
                        None
                    }
                    Val::Bottom(b) => Some(b),
                    Val::Null => None,
                    other => {
                        let code = if other.is_concrete_scalar() {
                            ErrorCode::Eval
                        } else {
                            ErrorCode::Incomplete
                        };
                        Some(Bottom::new(
                            code,
                            format!("cannot range over {}", ops::show(&other)),
                            *span,
                        ))
                    }
                }
            }
            ClauseC::If { cond, span } => {
                let cv = self.eval_expr(&Some(env.clone()), cond);
                match cv {
                    Val::Bool(true) => self.run_clauses(v, env, comp, i + 1, out),
                    Val::Bool(false) => None,
                    Val::Bottom(b) => Some(b),
                    other if other.is_concrete_scalar() => Some(Bottom::new(
                        ErrorCode::Eval,
                        format!("cannot use {} as type bool", ops::show(&other)),
                        *span,
                    )),
                    other => Some(Bottom::new(
                        ErrorCode::Incomplete,
                        format!("incomplete bool: {}", ops::show(&other)),
                        *span,
                    )),
                }
            }
            ClauseC::Let { expr, .. } => {
                let benv = self.new_env(
                    Some(env.clone()),
                    v,
                    EnvKind::Bind(vec![Binding::Lazy(env.clone(), expr.clone())]),
                );
                self.run_clauses(v, &benv, comp, i + 1, out)
            }
        }
    }

    /// The struct a `for` clause of `v` ranges over when it is `v` itself or a struct
    /// enclosing it, still being expanded (`t: {w: {...}, for k, x in t {(k): out: 1}}`):
    /// its declared fields are in (comprehensions run after them), so the clause ranges over
    /// them, where evaluating the reference would meet the expansion as a cycle (upstream
    /// `comprehensions/pushdown` issue2131). Ranging over `v` itself freezes its field set
    /// (`check_frozen`).
    fn enclosing_source(&mut self, env: &Arc<Env>, source: &Expr, v: VId) -> Option<VId> {
        if !matches!(source, Expr::FieldRef { .. } | Expr::SelfRef { .. }) {
            return None;
        }
        let Res::V(w) = self.resolve(&Some(env.clone()), source) else {
            return None;
        };
        let enclosing = w == v || self.ancestors(v).any(|p| p == w);
        if !enclosing || self.vx(w).status != Status::Expanding {
            return None;
        }
        if w == v {
            let n = self.vx(v).arcs.len();
            self.frozen_fields.entry(v).or_insert(n);
        }
        Some(w)
    }

    /// A struct whose own `for` clause ranged over its fields may not get a new regular field
    /// from its comprehensions afterwards (upstream `cycle/freeze`: `a: {x: 1, for k, v in a
    /// {(k+"q"): v}}` is an error): the first such field makes `v` an error.
    pub(super) fn check_frozen(&mut self, v: VId) {
        let Some(n) = self.frozen_fields.remove(&v) else {
            return;
        };
        let len = self.vx(v).arcs.len();
        for i in n..len {
            let Some((l, &a)) = self.vx(v).arcs.get_index(i) else {
                break;
            };
            if l.is_regular() {
                let msg = format!(
                    "adding field {} not allowed as field set was already referenced",
                    l.path_text()
                );
                let span = self.vx(a).span;
                self.set_err(v, Bottom::new(ErrorCode::Eval, msg, span));
                return;
            }
        }
    }

    /// Runs the pending comprehensions of `v` to the fixed point of the module docs: rounds
    /// until none is left; then, if a comprehension yielded after others had yielded nothing,
    /// those are run again (the fields they test may exist now), until a run of them yields
    /// nothing new. A comprehension that yielded is never run again (it is consumed), so the
    /// reruns end: each needs a yield of one of them.
    pub(super) fn run_comprehensions(&mut self, v: VId) {
        let mut empty: Vec<PendingComp> = Vec::new();
        let mut yielded_since = false;
        loop {
            self.comprehension_rounds(v, &mut empty, &mut yielded_since);
            if !yielded_since || empty.is_empty() || self.budget.limit_err.is_some() {
                break;
            }
            yielded_since = false;
            let again = std::mem::take(&mut empty);
            self.stats.comp_reruns += again.len() as u64;
            self.vm(v).scr_mut().comps.extend(again);
        }
    }

    /// The rounds of [`Ev::run_comprehensions`] until no comprehension of `v` is pending: one
    /// whose clauses are incomplete waits for the next round as long as a round makes progress.
    /// Those that ran and yielded nothing are put into `empty`; `yielded_since` is set when one
    /// yields while `empty` holds any.
    fn comprehension_rounds(
        &mut self,
        v: VId,
        empty: &mut Vec<PendingComp>,
        yielded_since: &mut bool,
    ) {
        let mut round = 0;
        loop {
            let comps = self.vm(v).take_scratch(|x| &mut x.comps);
            if comps.is_empty() {
                break;
            }
            let mut failed = Vec::new();
            let mut progressed = false;
            for pc in comps {
                let mut bodies = Vec::new();
                let r = self.run_clauses(v, &pc.env, &pc.comp, 0, &mut bodies);
                match r {
                    Some(b) if !b.code.is_fatal() && round == 0 => {
                        failed.push((pc, b));
                    }
                    Some(b) => {
                        self.set_err(v, b);
                    }
                    None if bodies.is_empty() => {
                        progressed = true;
                        empty.push(pc);
                    }
                    None => {
                        progressed = true;
                        *yielded_since |= !empty.is_empty();
                        for benv in bodies {
                            self.process(
                                v,
                                Conj {
                                    env: Some(benv),
                                    expr: Expr::Struct(pc.comp.body.clone()),
                                    close: pc.close,
                                    embed: pc.embed,
                                    outer: pc.outer.clone(),
                                },
                            );
                        }
                    }
                }
            }
            if failed.is_empty() {
                if self.vx(v).scr().comps.is_empty() {
                    break;
                }
                round = 0;
                continue;
            }
            // Fields a round yielded under dynamic labels (`"\(k)": v`) are added only when
            // the labels are evaluated: what a failed comprehension tests may be among them,
            // so they are added before it is retried or given up.
            if self.run_dynamic_fields(v) {
                round = 1;
                for (pc, _) in failed {
                    self.vm(v).scr_mut().comps.push(pc);
                }
                continue;
            }
            if !progressed || round > 0 {
                for (_, b) in failed {
                    // A source or guard selecting a field that is not there (`for x in
                    // src.foo`, `for k in p` with `p?: [...]`) is as unknown as an
                    // incomplete one (upstream `comprehensions/incomplete`: `b: [for x in
                    // src.foo {}]` is incomplete, not `[]`).
                    if matches!(b.code, ErrorCode::Incomplete | ErrorCode::Undefined) {
                        self.stuck_comprehensions.insert(v, ());
                    }
                    self.set_err(v, b);
                }
                if self.vx(v).scr().comps.is_empty() {
                    break;
                }
                continue;
            }
            round += 1;
            for (pc, _) in failed {
                self.vm(v).scr_mut().comps.push(pc);
            }
        }
    }
}
