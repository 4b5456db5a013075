//! Reading results out: the error of a value and its children (`error_deep`), fingerprints for
//! merging equal disjuncts, and the conversion of a finished vertex to data (`to_data`: regular
//! fields in CUE's order, defaults taken, incomplete values and hidden errors reported); and
//! data in (`data_to_expr`: concrete data as a literal expression).
//!
//! Optional fields are not read: one whose values conflict, or that a closed struct does not
//! allow, is in error as a field constraint only (it can never be set); the struct holding it is
//! neither an error nor incomplete (upstream evalv3: `b?: _|_ // field not allowed` in a struct
//! that exports).

use super::*;

/// Most errors collected from one value ([`Ev::to_data`]); the rest are not looked for.
pub const MAX_ERRORS: usize = 1000;

/// What the walk for errors met besides the first error (see `Ev::error_deep_walk`).
#[derive(Default)]
struct WalkNotes {
    /// A required field was met.
    required: bool,
    /// Whether to note the first `Undefined` value (`undefined`).
    want_undefined: bool,
    /// The first regular field whose value selects a field that is not there, with the
    /// labels down to it.
    undefined: Option<LabelledError>,
    /// Fields a closed struct does not allow are not errors (see `Ev::child_error`).
    open_inline: bool,
}

/// An error with the labels from the walked value down to where it is.
pub(super) type LabelledError = (Vec<Label>, Arc<Bottom>);

impl Ev {
    /// The first fatal error in the regular fields of `v`, evaluating them.
    pub fn fatal_error_deep(&mut self, v: VId, depth: usize) -> Option<Arc<Bottom>> {
        self.error_deep(v, depth, false)
    }

    /// Like [`Ev::fatal_error_deep`], except that fields a closed struct does not allow are not
    /// errors (upstream's "open inline" rule for values that are not fields).
    pub(super) fn fatal_error_deep_open(&mut self, v: VId) -> Option<Arc<Bottom>> {
        let mut notes = WalkNotes {
            open_inline: true,
            ..WalkNotes::default()
        };
        self.error_deep_walk(v, 0, false, &mut Vec::new(), &mut notes)
    }

    /// Like [`Ev::fatal_error_deep`]; with `strict`, missing required fields count as errors.
    pub fn error_deep(&mut self, v: VId, depth: usize, strict: bool) -> Option<Arc<Bottom>> {
        self.error_deep_at(v, depth, strict, &mut Vec::new())
    }

    /// Like [`Ev::error_deep`], leaving in `at` the labels from `v` down to the failing field.
    pub(super) fn error_deep_at(
        &mut self,
        v: VId,
        depth: usize,
        strict: bool,
        at: &mut Vec<Label>,
    ) -> Option<Arc<Bottom>> {
        self.error_deep_walk(v, depth, strict, at, &mut WalkNotes::default())
    }

    /// [`Ev::error_deep_at`] (non-strict) that also reports the first regular field below `v`
    /// whose value selects a field that is not there (an `Undefined` value without a scalar),
    /// with the labels down to it: a disjunct holding one is eliminated as a failed one is
    /// (upstream's disjunct check takes any error of the disjunct's regular fields).
    pub(super) fn error_or_undefined_deep(
        &mut self,
        v: VId,
        at: &mut Vec<Label>,
    ) -> (Option<Arc<Bottom>>, Option<LabelledError>) {
        let mut notes = WalkNotes {
            want_undefined: true,
            ..WalkNotes::default()
        };
        let e = self.error_deep_walk(v, 0, false, at, &mut notes);
        (e, notes.undefined)
    }

    /// The non-strict walk of [`Ev::error_deep`] telling in one pass what the strict one would
    /// add: the first error, and whether a required field was met on the way. With no error,
    /// the strict walk fails exactly when a required field was met (it visits what this walk
    /// visits up to the first required field on each path), so a schema check needs one walk
    /// where it took two.
    pub fn error_or_required_deep(&mut self, v: VId) -> (Option<Arc<Bottom>>, bool) {
        let mut notes = WalkNotes::default();
        let e = self.error_deep_walk(v, 0, false, &mut Vec::new(), &mut notes);
        (e, notes.required)
    }

    fn error_deep_walk(
        &mut self,
        v: VId,
        depth: usize,
        strict: bool,
        at: &mut Vec<Label>,
        notes: &mut WalkNotes,
    ) -> Option<Arc<Bottom>> {
        if depth > 64 || self.budget.limit_err.is_some() || !self.stack_ok() {
            return self.budget.limit_err.clone();
        }
        self.eval(v);
        let v = self.deref_redirect(v);
        let vx = self.vx(v);
        if let Some(e) = vx.err() {
            if !(notes.open_inline && e.code == ErrorCode::NotAllowed) {
                return Some(e.clone());
            }
        }
        if notes.want_undefined && notes.undefined.is_none() && vx.value.scalar.is_none() {
            if let Some(b) = &vx.value.incomplete {
                if b.code == ErrorCode::Undefined {
                    notes.undefined = Some((at.clone(), b.clone()));
                }
            }
        }
        if vx.disjunction.result.is_some() {
            return None;
        }
        // By index, not over a copy of the arcs: the walk visits every vertex of the values it
        // checks, and a list per vertex was most of its allocations.
        let n = vx.arcs.len();
        for i in 0..n {
            let Some((l, a)) = self.vx(v).arcs.get_index(i).map(|(l, a)| (l.clone(), *a)) else {
                break;
            };
            if !(l.is_regular() || l.kind == LabelKind::Index) {
                continue;
            }
            let c = self.vx(a).constraint();
            if c == Some(FieldConstraint::Optional) || self.active.expanding.contains(&a) {
                continue;
            }
            at.push(l);
            if c == Some(FieldConstraint::Required) {
                if strict {
                    let span = self.vx(a).span();
                    return Some(Bottom::new(ErrorCode::Eval, "required field missing", span));
                }
                notes.required = true;
            }
            if let Some(e) = self.error_deep_walk(a, depth + 1, strict, at, notes) {
                return Some(e);
            }
            at.pop();
        }
        None
    }

    /// A canonical text of a value, used to merge equal disjuncts, written to the end of `s`
    /// (the fingerprints being compared share one buffer).
    pub(super) fn fingerprint(&mut self, v: VId, s: &mut String) {
        self.fingerprint_in(v, 0, 0, s);
    }

    /// [`Ev::fingerprint`] (one buffer for the whole walk);
    /// `optionals` counts the optional fields above `v` (see there).
    fn fingerprint_in(&mut self, v: VId, depth: usize, optionals: usize, s: &mut String) {
        use std::fmt::Write as _;
        if depth > 32 || !self.stack_ok() {
            s.push('…');
            return;
        }
        self.eval(v);
        let v = self.deref_redirect(v);
        let vx = self.vx(v);
        if let Some(e) = vx.err() {
            let _ = write!(s, "_|_({})", e.msg);
            return;
        }
        if let Some(d) = vx.disjunction.result.clone() {
            for (i, (a, m)) in d.alts.iter().enumerate() {
                if i > 0 {
                    s.push('|');
                }
                if *m {
                    s.push('*');
                }
                self.fingerprint_in(*a, depth + 1, optionals, s);
            }
            return;
        }
        if let Some(x) = vx.scalar() {
            ops::write_show(s, x);
        } else {
            write_kind_name(s, vx.value.kinds);
        }
        // A concrete scalar has passed its bounds: they do not tell equal values apart.
        if vx.scalar().is_none() {
            for b in &vx.value.bounds {
                s.push('&');
                ops::write_show(s, b);
            }
        }
        if vx.is_struct() || vx.is_list() {
            let mut arcs: Vec<(Label, VId)> = vx.arc_list();
            // Equal values whatever order their fields arrived in (field order is not identity).
            if vx.is_struct() {
                arcs.sort_by(|x, y| {
                    (x.0.kind, &x.0.name, x.0.index).cmp(&(y.0.kind, &y.0.name, y.0.index))
                });
            }
            let closed = vx.groups.iter().any(|g| g.closing && !g.open);
            s.push(if closed { '#' } else { '{' });
            for (l, a) in arcs {
                let c = self.vx(a).constraint();
                // An optional field counts with its value, as upstream's structural equality
                // (`Equal` with `CheckStructural`) compares optional arcs: `{n!: string, m?:
                // bool}` written twice is one value. Below `MAX_OPTIONAL_DEPTH` optional
                // fields, a further one is identified by where its conjuncts come from
                // instead of being evaluated: recursive schemas such as `#S: {items?: #S |
                // [...#S]}` hold the next level in every disjunct, and evaluating them all
                // would grow without end.
                const MAX_OPTIONAL_DEPTH: usize = 4;
                let optional = c == Some(FieldConstraint::Optional);
                s.push_str(&l.name);
                s.push_str(match c {
                    Some(FieldConstraint::Optional) => "?",
                    Some(FieldConstraint::Required) => "!",
                    _ => "",
                });
                s.push(':');
                if optional && optionals >= MAX_OPTIONAL_DEPTH {
                    self.source_fingerprint(a, s);
                } else {
                    self.fingerprint_in(a, depth + 1, optionals + usize::from(optional), s);
                }
                s.push(',');
            }
            s.push('}');
        }
    }

    /// The sources of an unevaluated field: the sorted spans of its conjuncts, written to `s`.
    fn source_fingerprint(&self, v: VId, s: &mut String) {
        use std::fmt::Write as _;
        let mut spans: Vec<(u32, u32, u32)> = self
            .vx(v)
            .conjuncts
            .iter()
            .map(|c| {
                let s = c.expr.span();
                (s.file.0, s.start, s.end)
            })
            .collect();
        spans.sort_unstable();
        spans.dedup();
        s.push_str("src(");
        for (f, a, b) in spans {
            let _ = write!(s, "{f}:{a}-{b};");
        }
        s.push(')');
    }

    // ----------------------------------------------------------------------------------------
    // Conversion to concrete data.

    /// Converts a vertex to concrete data (regular fields, defaults taken); errors are collected.
    // `&mut self`: conversion evaluates what it reaches (the lint expects `&self` for `to_*`).
    #[allow(clippy::wrong_self_convention)]
    pub fn to_data(
        &mut self,
        v: VId,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
    ) -> Option<BVal> {
        self.walk_data(v, errs, depth, true)
    }

    /// The errors [`Ev::to_data`] collects, without building the data (validation: the walk,
    /// and the evaluation it forces, are the same; only the copies of labels and scalars into a
    /// data tree that is thrown away are not made).
    pub fn check_data(&mut self, v: VId, errs: &mut Vec<(VId, Arc<Bottom>)>, depth: usize) {
        self.walk_data(v, errs, depth, false);
    }

    /// [`Ev::to_data`], building the data only if `keep` (otherwise a `Some` stands for
    /// "converts" and holds nothing).
    fn walk_data(
        &mut self,
        v: VId,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
        keep: bool,
    ) -> Option<BVal> {
        // Past a limit, or with enough errors found, the rest is not looked at: reporting
        // every failing field of a huge value would take longer than evaluating it.
        if errs.len() >= MAX_ERRORS {
            return None;
        }
        if depth > self.config.max_depth {
            errs.push((
                v,
                self.limit(
                    crate::diagnostics::Limit::Depth,
                    "depth limit exceeded".into(),
                    Span::default(),
                ),
            ));
            return None;
        }
        // Each value read out is one node of data, charged to the memory budget.
        if !self.step() || !self.charge(cost::ELEM) {
            if let Some(b) = self.budget.limit_err.clone() {
                if !errs.iter().any(|(_, e)| Arc::ptr_eq(e, &b)) {
                    errs.push((v, b));
                }
            }
            return None;
        }
        self.eval(v);
        let v0 = v;
        let v = self.deref(v);
        let vx = self.vx(v);
        if let Some(e) = vx.err() {
            errs.push((v0, e.clone()));
            return None;
        }
        if let Some(d) = &vx.disjunction.result {
            let n = d.alts.len();
            let span = vx.span();
            errs.push((
                v0,
                Bottom::new(
                    ErrorCode::Incomplete,
                    format!("incomplete value: unresolved disjunction of {n} values"),
                    span,
                ),
            ));
            return None;
        }
        if let Some(e) = &vx.value.unmet {
            errs.push((v0, e.clone()));
            return None;
        }
        // A struct whose comprehension could not run (its guard or source stayed incomplete:
        // `if x.enabled {...}` with `enabled: bool`) is not concrete: what it would yield is
        // unknown, so its export fails like any incomplete value.
        // Its fields are still walked: the errors below it count for validation too.
        let mut stuck = false;
        if !self.stuck_comprehensions.is_empty() && self.stuck_comprehensions.contains_key(&v) {
            if let Some(e) = &vx.value.incomplete {
                errs.push((v0, e.clone()));
                stuck = true;
            }
        }
        if vx.is_list() {
            return self.list_data(v, errs, depth, keep, stuck);
        }
        if vx.is_struct() {
            return self.struct_data(v, errs, depth, keep, stuck);
        }
        self.scalar_data(v0, v, errs, keep)
    }

    /// [`Ev::walk_data`] of the list `v`: its elements (`stuck`: `v` is not concrete, though
    /// its elements are still walked for their errors).
    fn list_data(
        &mut self,
        v: VId,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
        keep: bool,
        stuck: bool,
    ) -> Option<BVal> {
        let vx = self.vx(v);
        let arcs = vx.elements();
        let mut out = Vec::new();
        let mut ok = true;
        let shared = vx.value.shared;
        for a in arcs {
            match self.data_of_arc(a, shared, errs, depth + 1, keep) {
                Some(x) if keep => out.push(x),
                Some(_) => {}
                None => ok = false,
            }
        }
        if ok && !stuck {
            Some(BVal::List(out))
        } else {
            None
        }
    }

    /// [`Ev::walk_data`] of the struct `v`: its regular fields in order; an optional field is
    /// left out (unless a closed struct refused it), a required one is an error.
    fn struct_data(
        &mut self,
        v: VId,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
        keep: bool,
        stuck: bool,
    ) -> Option<BVal> {
        let vx = self.vx(v);
        let shared = vx.value.shared;
        let arcs: Vec<(Label, VId)> = vx.arc_list();
        let mut out = Vec::new();
        let mut ok = true;
        for (l, a) in arcs {
            if !l.is_regular() {
                continue;
            }
            if shared && self.unforced_proxy(a).is_some() {
                match self.data_of_arc(a, shared, errs, depth + 1, keep) {
                    Some(x) if keep => out.push((l.name.to_string(), x)),
                    Some(_) => {}
                    None => ok = false,
                }
                continue;
            }
            self.eval(a);
            let ax = self.vx(a);
            match ax.constraint() {
                Some(FieldConstraint::Optional) => continue,
                Some(FieldConstraint::Required) => {
                    let span = ax.span();
                    errs.push((
                        a,
                        Bottom::new(
                            ErrorCode::RequiredMissing,
                            format!("field is required but not present: {}", l.path_text()),
                            span,
                        ),
                    ));
                    ok = false;
                    continue;
                }
                _ => {}
            }
            match self.walk_data(a, errs, depth + 1, keep) {
                Some(x) if keep => out.push((l.name.to_string(), x)),
                Some(_) => {}
                None => ok = false,
            }
        }
        if ok && !stuck {
            Some(BVal::Struct(out))
        } else {
            None
        }
    }

    /// [`Ev::walk_data`] of `v` (reached as `v0`) holding no struct or list: its concrete
    /// scalar, or an incomplete error naming what is known of it.
    fn scalar_data(
        &mut self,
        v0: VId,
        v: VId,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        keep: bool,
    ) -> Option<BVal> {
        let vx = self.vx(v);
        match vx.scalar() {
            Some(f @ (Val::Builtin(_) | Val::StdFunc(_))) => {
                // A function held in a field is callable through it, but is not data.
                let msg = format!("cannot export function {}", ops::show(f));
                let span = vx.span();
                errs.push((v0, Bottom::new(ErrorCode::Eval, msg, span)));
                None
            }
            Some(s) if keep => ops::scalar_to_data(s),
            Some(_) => Some(BVal::Null),
            None => {
                let span = vx.span();
                let msg = match &vx.value.incomplete {
                    Some(b) => b.msg.clone(),
                    None => {
                        let mut s = kind_name(vx.value.kinds);
                        for b in &vx.value.bounds {
                            s = format!("{s} & {}", ops::show(b));
                        }
                        format!("incomplete value {s}")
                    }
                };
                let span = vx.value.incomplete.as_ref().map(|b| b.span).unwrap_or(span);
                errs.push((v0, Bottom::new(ErrorCode::Incomplete, msg, span)));
                None
            }
        }
    }

    /// Collects fatal errors in definitions and hidden fields (which export does not visit).
    ///
    /// A value in them made only of references to the same vertices as one this walk already
    /// found clean (`Ev::conjunct_targets`: each component's `#blueprints[fqn]`, the
    /// `#Blueprint` pattern and the catalog's blueprint, or its `#traits[fqn]`) is the same
    /// value and holds the same errors, none: it is not walked again. Half the vertices of a
    /// 20-component render were these copies. One that held errors is walked wherever it
    /// occurs, so each path is reported.
    pub fn collect_fatal_hidden(
        &mut self,
        v: VId,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
        inside: bool,
    ) {
        if depth == 0 {
            self.hidden_clean.clear();
            self.collect_hidden_walk(v, errs, 0, inside);
            self.hidden_clean.clear();
        } else {
            self.collect_hidden_walk(v, errs, depth, inside);
        }
    }

    /// The walk of [`Ev::collect_fatal_hidden`].
    fn collect_hidden_walk(
        &mut self,
        v: VId,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
        inside: bool,
    ) {
        if depth > 40
            || errs.len() >= MAX_ERRORS
            || self.budget.limit_err.is_some()
            || !self.stack_ok()
        {
            self.hidden_cuts += 1;
            return;
        }
        self.eval(v);
        let v = self.deref(v);
        let vx = self.vx(v);
        if inside {
            if let Some(e) = vx.err() {
                if e.code.is_fatal() {
                    errs.push((v, e.clone()));
                }
                return;
            }
        }
        if vx.disjunction.result.is_some() {
            return;
        }
        let shared = vx.value.shared;
        let arcs: Vec<(Label, VId)> = vx.arc_list();
        for (l, a) in arcs {
            let ins = inside || l.is_def() || l.is_hidden();
            if matches!(l.kind, LabelKind::Internal) {
                continue;
            }
            if self.vx(a).constraint() == Some(FieldConstraint::Optional) {
                continue;
            }
            let proxy = self.unforced_proxy(a).filter(|_| shared);
            let sources = if ins {
                self.conjunct_targets(proxy.unwrap_or(a))
            } else {
                None
            };
            if let Some(s) = &sources {
                if self.hidden_clean.contains(s) {
                    self.stats.hidden_reused += 1;
                    continue;
                }
            }
            let (n0, cuts) = (errs.len(), self.hidden_cuts);
            self.walk_hidden_arc(a, proxy, errs, depth, ins);
            // Clean only if walked in full: a walk cut short (depth, stack) may have missed
            // an error that a walk of the same value from higher up would find.
            if let Some(s) = sources {
                if errs.len() == n0 && self.hidden_cuts == cuts && self.budget.limit_err.is_none() {
                    self.hidden_clean.insert(s);
                }
            }
        }
    }

    /// One arc of [`Ev::collect_fatal_hidden`]'s walk. A proxy not yet evaluated is walked
    /// through its target (see `data_of_arc`); any error found there is dropped and the proxy
    /// walked, so that it has the proxy's path.
    fn walk_hidden_arc(
        &mut self,
        a: VId,
        proxy: Option<VId>,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
        ins: bool,
    ) {
        if let Some(t) = proxy {
            let n = errs.len();
            self.collect_hidden_walk(t, errs, depth + 1, ins);
            if errs.len() == n && self.budget.limit_err.is_none() {
                return;
            }
            errs.truncate(n);
        }
        self.collect_hidden_walk(a, errs, depth + 1, ins);
    }

    /// The target `t` of `a`, an arc of a shared vertex (see [`Ev::share`]) that has not been
    /// evaluated and whose value is therefore still exactly `t`'s (its only conjunct is `t`'s
    /// finished vertex, with no closedness, embedding or constraint of its own). `None` for any
    /// other arc. The walks (`to_data`, `collect_fatal_hidden`) go through such an arc to `t`
    /// instead of evaluating it, which would build one proxy vertex per arc of `t`, all the way
    /// down (upstream's validator does the same: `DerefNonShared`).
    fn unforced_proxy(&self, a: VId) -> Option<VId> {
        let ax = self.vx(a);
        if ax.status != Status::Fresh
            || ax.value.not_allowed
            || !matches!(ax.constraint(), None | Some(FieldConstraint::Regular))
        {
            return None;
        }
        super::share::proxied(&ax.conjuncts).filter(|t| self.vx(*t).status == Status::Done)
    }

    /// [`Ev::to_data`] of `a`, an arc or element of a vertex (`shared` if that vertex shares
    /// its value). An unevaluated proxy is converted through its target, without building the
    /// proxy's arcs: its data is the target's. Errors are reported where the user wrote the
    /// value they reached, the proxy's path (`components.web.spec…`, not the shared `let`'s), so
    /// if the target has any, they are dropped and the proxy is converted instead, which
    /// reports them as before: the error-free walk, by far the common one, builds no proxies.
    fn data_of_arc(
        &mut self,
        a: VId,
        shared: bool,
        errs: &mut Vec<(VId, Arc<Bottom>)>,
        depth: usize,
        keep: bool,
    ) -> Option<BVal> {
        if let Some(t) = self.unforced_proxy(a).filter(|_| shared) {
            let n = errs.len();
            let d = self.walk_data(t, errs, depth, keep);
            if errs.len() == n
                && self.budget.limit_err.is_none()
                && (d.is_some() || n >= MAX_ERRORS)
            {
                return d;
            }
            errs.truncate(n);
        }
        self.walk_data(a, errs, depth, keep)
    }
}

/// Builds a value expression from concrete data.
pub fn data_to_expr(d: &BVal, span: Span) -> Expr {
    match d {
        BVal::Null => Expr::Lit(Val::Null, span),
        BVal::Bool(b) => Expr::Lit(Val::Bool(*b), span),
        BVal::Int(i) => Expr::Lit(Val::Int(Arc::new(i.clone())), span),
        BVal::Float(f) if !crate::data::num::exponent_in_range(f) => Expr::Lit(
            Val::Bottom(Bottom::new(
                ErrorCode::Eval,
                "float exponent out of range",
                span,
            )),
            span,
        ),
        BVal::Float(f) => Expr::Lit(Val::Float(Arc::new(f.clone())), span),
        BVal::String(s) => Expr::Lit(Val::Str(s.as_str().into()), span),
        BVal::Bytes(b) => Expr::Lit(Val::Bytes(b.clone().into()), span),
        BVal::List(xs) => Expr::List(Arc::new(ListLit {
            elems: xs
                .iter()
                .map(|x| ListElemC::Expr(data_to_expr(x, span)))
                .collect(),
            ellipsis: None,
            span,
        })),
        BVal::Struct(fs) => Expr::Struct(Arc::new(StructLit {
            fields: fs
                .iter()
                .map(|(k, x)| FieldDecl {
                    label: LabelExpr::Fixed(Label::string(k)),
                    constraint: FieldConstraint::Regular,
                    value: data_to_expr(x, span),
                    span,
                })
                .collect(),
            span,
            ..Default::default()
        })),
        BVal::Opaque(v) => Expr::Vertex(*v as VId, span),
    }
}
