//! Calls: the predeclared builtins of the language (`len close and or div mod quo rem matchN
//! matchIf error`, spec "Builtin functions") and the bridge to the std library
//! ([`crate::builtins`]): arguments are converted to concrete data, a call with the subject
//! omitted becomes a validator checked once the value is concrete.

use super::{data_to_expr, ops, Ev};
use crate::adt::*;
use crate::ast::FieldConstraint;
use crate::builtins::{self, BuiltinError, Host, Member, Val as BVal};
use crate::source::Span;
use std::sync::Arc;

fn err(code: ErrorCode, msg: impl Into<String>, span: Span) -> Val {
    Val::Bottom(Bottom::new(code, msg, span))
}

/// Resolves `pkg.name`.
pub fn pkg_member(ev: &mut Ev, pkg: &str, name: &str, span: Span) -> Val {
    match builtins::lookup(pkg, name) {
        Some(Member::Func(b)) => Val::StdFunc(b),
        Some(Member::Const(c)) => data_value(ev, &c, span),
        None => err(
            ErrorCode::Eval,
            format!("undefined builtin {pkg}.{name} (package or member not provided)"),
            span,
        ),
    }
}

fn data_value(ev: &mut Ev, d: &BVal, span: Span) -> Val {
    // A builtin's result is charged to the memory budget before it becomes a value.
    if !ev.charge(super::cost::data(d)) {
        return match ev.budget.limit_err.clone() {
            Some(b) => Val::Bottom(b),
            None => Val::Top,
        };
    }
    match d {
        BVal::List(_) | BVal::Struct(_) => {
            let a = ev.anon(None, data_to_expr(d, span));
            ev.vertex_value(a, span)
        }
        BVal::Opaque(v) => Val::Vertex(*v as VId),
        other => match data_to_expr(other, span) {
            Expr::Lit(v, _) => v,
            _ => Val::Top,
        },
    }
}

/// A snapshot expression of an evaluated value (without its validators).
fn snapshot(ev: &mut Ev, s: &Val, span: Span) -> Expr {
    match s {
        Val::Vertex(v) => {
            let v = ev.deref(*v);
            let vx = ev.vx(v);
            if vx.is_list() {
                let elems = vx
                    .arcs
                    .values()
                    .map(|a| ListElemC::Expr(Expr::Vertex(*a, span)))
                    .collect();
                return Expr::List(Arc::new(ListLit {
                    elems,
                    ellipsis: None,
                    span,
                }));
            }
            let fields = vx
                .arcs
                .iter()
                .map(|(l, a)| FieldDecl {
                    label: LabelExpr::Fixed(l.clone()),
                    constraint: ev.vx(*a).constraint().unwrap_or(FieldConstraint::Regular),
                    value: Expr::Vertex(*a, span),
                    span,
                })
                .collect();
            Expr::Struct(Arc::new(StructLit {
                fields,
                ellipsis: Some(None),
                span,
                ..Default::default()
            }))
        }
        other => Expr::Lit(other.clone(), span),
    }
}

/// Evaluates, before the throw-away evaluations of schema checks, the older vertices they
/// read: each schema, and the value with its arcs down its regular fields (the fields
/// `error_deep` walks), as the check's snapshot refers to every arc. Reached for the first
/// time inside a check, such a vertex would be changed by it and the check could not be
/// dropped (see `arena`); evaluated here it is kept, as the value's export or validation
/// needs it anyway. Vertices being expanded are left alone, as the check would leave them.
fn settle(ev: &mut Ev, schemas: &[&Val], value: &Val) {
    for sc in schemas {
        if let Val::Vertex(w) = sc {
            ev.eval(*w);
        }
    }
    if let Val::Vertex(v) = value {
        settle_deep(ev, *v, 0);
    }
}

fn settle_deep(ev: &mut Ev, v: VId, depth: usize) {
    if depth > 64 || ev.budget.limit_err.is_some() || !ev.stack_ok() {
        return;
    }
    ev.eval(v);
    let v = ev.deref(v);
    if ev.vx(v).disjunction.result.is_some() {
        return;
    }
    for (l, a) in ev.vx(v).arc_list() {
        if ev.active.expanding.contains(&a) {
            continue;
        }
        let walk = (l.is_regular() || l.kind == LabelKind::Index)
            && ev.vx(a).constraint() != Some(FieldConstraint::Optional);
        if walk {
            settle_deep(ev, a, depth + 1);
        } else {
            ev.eval(a);
        }
    }
}

/// `true` if `value` unified with schema vertex `schema` has no fatal error.
fn matches_schema(ev: &mut Ev, schema: &Val, value: &Val, span: Span) -> bool {
    match_schema(ev, schema, value, span) == Match::Yes
}

/// Whether a value matches a schema of `matchN`/`matchIf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Match {
    Yes,
    No,
    /// The only failures are required fields not present yet: an incomplete value, which may
    /// still come to match (spec "Field constraints": a missing required field is incomplete).
    Maybe,
}

fn match_schema(ev: &mut Ev, schema: &Val, value: &Val, span: Span) -> Match {
    let snap = snapshot(ev, value, span);
    let sch = match schema {
        Val::Vertex(v) => Expr::Vertex(*v, span),
        other => Expr::Lit(other.clone(), span),
    };
    // A throw-away evaluation: only the answer is kept (see `arena`).
    let mark = ev.mark();
    let a = ev.anon(None, Expr::Unify(Arc::new([sch, snap]), span));
    let out = match ev.error_or_required_deep(a) {
        (Some(_), _) => Match::No,
        (None, true) => Match::Maybe,
        (None, false) => Match::Yes,
    };
    ev.rollback(mark);
    out
}

/// A schema argument as the evaluator holds it: a fatal error as is, anything else unresolved
/// (a disjunction keeps its alternatives rather than collapsing to its default).
fn opaque_value(ev: &mut Ev, env: &Option<Arc<super::Env>>, a: &Expr) -> Val {
    let w = match a {
        Expr::Struct(_) | Expr::List(_) | Expr::Unify(..) | Expr::Disj(..) => {
            ev.anon(env.clone(), a.clone())
        }
        Expr::FieldRef { .. }
        | Expr::SelfRef { .. }
        | Expr::LetRef { .. }
        | Expr::BindRef { .. }
        | Expr::Selector(..)
        | Expr::Index(..)
        | Expr::Import(..)
        | Expr::Vertex(..) => match ev.resolve(env, a) {
            super::Res::V(w) => w,
            super::Res::A(v) => return v,
        },
        _ => return ev.eval_expr(env, a),
    };
    // Evaluated as any operand is (cycles and errors reported the same way) ...
    let v = ev.vertex_value(w, a.span());
    if matches!(v, Val::Bottom(_)) {
        return v;
    }
    // ... but a disjunction is kept whole rather than replaced by its default.
    let w = ev.deref_redirect(w);
    if ev.vx(w).disjunction.result.is_some() {
        Val::Vertex(w)
    } else {
        v
    }
}

/// A schema argument as builtin data: plain data when the vertex is concrete data without a
/// disjunction, otherwise the vertex itself ([`BVal::Opaque`]).
fn opaque_data(ev: &mut Ev, w: VId) -> BVal {
    let w = ev.deref_redirect(w);
    if ev.vx(w).disjunction.result.is_none() {
        let mut scratch = Vec::new();
        if let Some(d) = ev.to_data(w, &mut scratch, 0) {
            if scratch.is_empty() {
                return d;
            }
        }
    }
    BVal::Opaque(w as u64)
}

/// Checks a validator against a value; returns an error message on failure.
pub fn check_validator(ev: &mut Ev, v: &Validator, s: &Val) -> Option<String> {
    match v {
        Validator::Builtin(b, args) => {
            let mut errs = Vec::new();
            let subject = match s {
                Val::Vertex(w) => ev.to_data(*w, &mut errs, 0)?,
                other => ops::scalar_to_data(other)?,
            };
            // A validator without arguments (`net.FQDN`, `strings.MinRunes` curried aside)
            // is called on the subject alone, without a list allocated for it.
            let one: [BVal; 1];
            let many: Vec<BVal>;
            let all: &[BVal] = if args.is_empty() {
                one = [subject];
                &one
            } else {
                let mut all = Vec::with_capacity(args.len() + 1);
                all.push(subject);
                for (i, a) in args.iter().enumerate() {
                    match a {
                        Val::Vertex(w) if b.opaque_args.contains(&(i + 1)) => {
                            all.push(opaque_data(ev, *w))
                        }
                        other
                            if !other.is_concrete_scalar() && b.opaque_args.contains(&(i + 1)) =>
                        {
                            let a = ev.anon(None, Expr::Lit(other.clone(), Span::default()));
                            all.push(BVal::Opaque(a as u64))
                        }
                        Val::Vertex(w) => all.push(ev.to_data(*w, &mut errs, 0)?),
                        other => all.push(ops::scalar_to_data(other)?),
                    }
                }
                many = all;
                &many
            };
            let mut host = HostImpl { ev };
            match (b.func)(&mut host, all) {
                Ok(BVal::Bool(true)) => None,
                Ok(_) => Some(format!(
                    "invalid value {} (does not satisfy {}.{})",
                    ops::show(s),
                    b.pkg,
                    b.name
                )),
                Err(e) => Some(format!("{}.{}: {}", b.pkg, b.name, e.message)),
            }
        }
        Validator::MatchN(n, schemas, span) => {
            // Definite matches, and schemas the value may still match once its missing
            // required fields are set.
            let (mut count, mut maybe) = (0i64, 0i64);
            settle(ev, &schemas.iter().collect::<Vec<_>>(), s);
            for sc in schemas {
                match match_schema(ev, sc, s, *span) {
                    Match::Yes => count += 1,
                    Match::Maybe => maybe += 1,
                    Match::No => {}
                }
            }
            let sat = |ev: &mut Ev, c: i64| {
                let cv = Val::int(c);
                match n {
                    Val::Int(_) => ops::value_equal(ev, n, &cv).unwrap_or(false),
                    Val::Bound(op, x) => ops::check_bound(ev, *op, x, &cv).is_none(),
                    _ => false,
                }
            };
            // A schema missing only required fields does not match now (a concrete value
            // lacking them is final); failing now but satisfiable once such fields are set,
            // the value is merely incomplete.
            let ok = sat(ev, count);
            let undecided = !ok && (1..=maybe).any(|k| sat(ev, count + k));
            if ok {
                None
            } else {
                if undecided {
                    ev.validator_incomplete = true;
                }
                Some(format!(
                    "invalid value {} (does not satisfy matchN): {} matched, expected {}",
                    ops::show(s),
                    count,
                    ops::show(n)
                ))
            }
        }
        Validator::MatchIf(i, t, e, span) => {
            settle(ev, &[i, t, e], s);
            let ok = if matches_schema(ev, i, s, *span) {
                matches_schema(ev, t, s, *span)
            } else {
                matches_schema(ev, e, s, *span)
            };
            if ok {
                None
            } else {
                Some(format!(
                    "invalid value {} (does not satisfy matchIf)",
                    ops::show(s)
                ))
            }
        }
    }
}

struct HostImpl<'a> {
    ev: &'a mut Ev,
}

impl Host for HostImpl<'_> {
    fn less(&mut self, comparator: &BVal, x: &BVal, y: &BVal) -> Result<bool, BuiltinError> {
        let span = Span::default();
        let BVal::Opaque(c) = comparator else {
            return Err(BuiltinError::new("comparator is not a struct"));
        };
        let lit = StructLit {
            fields: vec![
                FieldDecl {
                    label: LabelExpr::Fixed(Label::ident("x")),
                    constraint: FieldConstraint::Regular,
                    value: data_to_expr(x, span),
                    span,
                },
                FieldDecl {
                    label: LabelExpr::Fixed(Label::ident("y")),
                    constraint: FieldConstraint::Regular,
                    value: data_to_expr(y, span),
                    span,
                },
            ],
            ellipsis: Some(None),
            span,
            ..Default::default()
        };
        // A throw-away evaluation: only the answer is kept (see `arena`).
        self.ev.eval(*c as VId);
        let mark = self.ev.mark();
        let a = self.ev.anon(
            None,
            Expr::Unify(
                Arc::new([Expr::Vertex(*c as VId, span), Expr::Struct(Arc::new(lit))]),
                span,
            ),
        );
        self.ev.eval(a);
        let a = self.ev.deref(a);
        let less = self.ev.vx(a).arcs.get(&Label::ident("less")).copied();
        let out = match less {
            Some(l) => match self.ev.vertex_value(l, span) {
                Val::Bool(b) => Ok(b),
                Val::Bottom(b) => Err(BuiltinError {
                    message: b.msg.clone(),
                    incomplete: !b.code.is_fatal(),
                }),
                other => Err(BuiltinError::incomplete(format!(
                    "less is not a bool: {}",
                    ops::show(&other)
                ))),
            },
            None => Err(BuiltinError::new("comparator has no field less")),
        };
        self.ev.rollback(mark);
        out
    }

    fn unifies(&mut self, a: &BVal, b: &BVal) -> Result<bool, BuiltinError> {
        let span = Span::default();
        let mark = self.ev.mark();
        let x = self.ev.anon(
            None,
            Expr::Unify(
                Arc::new([data_to_expr(a, span), data_to_expr(b, span)]),
                span,
            ),
        );
        let out = self.ev.fatal_error_deep(x, 0).is_none();
        self.ev.rollback(mark);
        Ok(out)
    }
}

/// Evaluates a call expression.
pub fn call(
    ev: &mut Ev,
    env: &Option<Arc<super::Env>>,
    f: &Expr,
    args: &[Expr],
    span: Span,
) -> Val {
    let fv = ev.eval_expr(env, f);
    match fv {
        Val::Builtin(name) => predeclared(ev, env, &name, args, span),
        Val::StdFunc(b) => std_call(ev, env, b, args, span),
        // A std function of one argument held in a field is a validator there (`atoms`), and
        // still the function when called through the field.
        // A callee that is still top (`_function: _` in a schema, a function supplied where
        // the schema is used) may become a function: the call is incomplete, not an error
        // (upstream issue 4201).
        Val::Vertex(w) => match held_function(ev, w) {
            Some(b) => std_call(ev, env, b, args, span),
            None => {
                let wd = ev.deref(w);
                let wx = ev.vx(wd);
                let top = wx.value.kinds == K_TOP
                    && wx.value.scalar.is_none()
                    && !wx.value.is_struct
                    && !wx.value.is_list;
                err(
                    if top {
                        ErrorCode::Incomplete
                    } else {
                        ErrorCode::Eval
                    },
                    format!("cannot call non-function {}", ops::show(&Val::Vertex(w))),
                    span,
                )
            }
        },
        Val::Bottom(b) => Val::Bottom(b),
        Val::Top | Val::Kind(K_TOP) => err(
            ErrorCode::Incomplete,
            "cannot call non-function _ (not known yet)".to_string(),
            span,
        ),
        other => err(
            ErrorCode::Eval,
            format!("cannot call non-function {}", ops::show(&other)),
            span,
        ),
    }
}

/// The std function a vertex holds as its only value (a validator made of the function
/// alone, with no argument bound), if it holds one.
fn held_function(ev: &mut Ev, w: VId) -> Option<&'static crate::builtins::Builtin> {
    ev.eval(w);
    let w = ev.deref(w);
    let vx = ev.vx(w);
    if vx.value.scalar.is_some() || !vx.arcs.is_empty() || vx.value.is_struct || vx.value.is_list {
        return None;
    }
    match vx.value.bounds.as_slice() {
        [Val::Validator(x)] => match &**x {
            Validator::Builtin(b, a) if a.is_empty() => Some(*b),
            _ => None,
        },
        _ => None,
    }
}

/// The length of the list `e` refers to while that list is being evaluated, if a closed list
/// literal has fixed it (spec "Lists": a list without `...` has exactly its elements).
fn closed_len_in_progress(ev: &mut Ev, env: &Option<Arc<super::Env>>, e: &Expr) -> Option<usize> {
    if !matches!(
        e,
        Expr::FieldRef { .. }
            | Expr::SelfRef { .. }
            | Expr::Selector(..)
            | Expr::Index(..)
            | Expr::BindRef { .. }
    ) {
        return None;
    }
    let super::Res::V(w) = ev.resolve(env, e) else {
        return None;
    };
    let w = ev.deref_redirect(w);
    let vx = ev.vx(w);
    if vx.status != super::Status::Expanding || !vx.is_list() {
        return None;
    }
    vx.scr().list.as_ref().and_then(|l| l.closed_len)
}

fn list_items(ev: &mut Ev, v: &Val) -> Option<Vec<VId>> {
    if let Val::Vertex(w) = v {
        ev.eval(*w);
        let w = ev.deref(*w);
        if ev.vx(w).is_list() {
            return Some(ev.vx(w).arcs.values().copied().collect());
        }
    }
    None
}

/// A call of a predeclared builtin (spec "Builtin functions").
fn predeclared(
    ev: &mut Ev,
    env: &Option<Arc<super::Env>>,
    name: &str,
    args: &[Expr],
    span: Span,
) -> Val {
    let arity = match name {
        "len" | "close" | "and" | "or" => Some(1),
        "div" | "mod" | "quo" | "rem" | "matchN" => Some(2),
        "matchIf" => Some(3),
        _ => None,
    };
    if let Some(n) = arity.filter(|n| args.len() != *n) {
        return err(
            ErrorCode::Eval,
            format!("{name}: expected {n} arguments, got {}", args.len()),
            span,
        );
    }
    match name {
        "len" => len(ev, env, &args[0], span),
        "close" | "and" | "or" => {
            let a = ev.anon(
                env.clone(),
                Expr::Call(
                    Arc::new(Expr::Lit(Val::Builtin(name.into()), span)),
                    args.into(),
                    span,
                ),
            );
            ev.vertex_value(a, span)
        }
        "div" | "mod" | "quo" | "rem" => {
            let a = ev.eval_expr(env, &args[0]);
            let b = ev.eval_expr(env, &args[1]);
            let a = ev.concrete_default(a);
            let b = ev.concrete_default(b);
            ops::int_div(name, &a, &b, span)
        }
        "matchN" => {
            let n = ev.eval_expr(env, &args[0]);
            let n = ev.concrete_default(n);
            if let Val::Bottom(b) = n {
                return Val::Bottom(b);
            }
            let l = ev.eval_expr(env, &args[1]);
            let Some(items) = list_items(ev, &l) else {
                return err(
                    ErrorCode::Eval,
                    "matchN: second argument must be a list",
                    span,
                );
            };
            let schemas = items.into_iter().map(Val::Vertex).collect();
            Val::Validator(Arc::new(Validator::MatchN(n, schemas, span)))
        }
        "matchIf" => {
            let mut vs = Vec::new();
            for a in args {
                let x = ev.anon(env.clone(), a.clone());
                vs.push(Val::Vertex(x));
            }
            Val::Validator(Arc::new(Validator::MatchIf(
                vs[0].clone(),
                vs[1].clone(),
                vs[2].clone(),
                span,
            )))
        }
        "error" => {
            let msg = match args.first() {
                Some(a) => {
                    let v = ev.eval_expr(env, a);
                    match v {
                        Val::Str(s) => s.to_string(),
                        other => ops::show(&other),
                    }
                }
                None => "error".into(),
            };
            err(ErrorCode::User, msg, span)
        }
        _ => err(ErrorCode::Eval, format!("unknown builtin {name}"), span),
    }
}

/// `len(x)`: the bytes of a string or bytes value, the elements of a list, the regular
/// fields of a struct.
fn len(ev: &mut Ev, env: &Option<Arc<super::Env>>, arg: &Expr, span: Span) -> Val {
    let v = ev.eval_expr(env, arg);
    if let Val::Bottom(b) = &v {
        if b.code == ErrorCode::Cycle {
            // A list being evaluated whose length a list literal already fixed (`a:
            // [{}]` with `a: _Q[0:len(a)]`): no conjunct can change that length, so it
            // is the answer rather than a cycle.
            if let Some(n) = closed_len_in_progress(ev, env, arg) {
                return Val::int(n);
            }
        }
    }
    let v = ev.concrete_default(v);
    match v {
        Val::Str(s) => Val::int(s.len()),
        Val::Bytes(b) => Val::int(b.len()),
        Val::Vertex(w) => {
            let w = ev.deref(w);
            let vx = ev.vx(w);
            if vx.is_list() {
                Val::int(vx.elements().len())
            } else {
                let arcs: Vec<(Label, VId)> = vx.arc_list();
                let mut n = 0usize;
                for (l, a) in arcs {
                    if !l.is_regular() {
                        continue;
                    }
                    ev.eval(a);
                    if ev.vx(a).constraint() == Some(FieldConstraint::Regular) {
                        n += 1;
                    }
                }
                Val::int(n)
            }
        }
        Val::Bottom(b) => Val::Bottom(b),
        other if other.is_concrete_scalar() => err(
            ErrorCode::Eval,
            format!("invalid argument to len: {}", ops::show(&other)),
            span,
        ),
        other => err(
            ErrorCode::Incomplete,
            format!("len: non-concrete argument {}", ops::show(&other)),
            span,
        ),
    }
}

/// A list argument of a structural builtin: concrete data where it is concrete, its elements
/// otherwise, each as data or as [`BVal::Opaque`] (nested lists opened `levels - 1` further).
/// `None` for anything but a list without errors.
fn open_list(ev: &mut Ev, w: VId, levels: u32) -> Option<BVal> {
    let mut scratch = Vec::new();
    if let Some(d) = ev.to_data(w, &mut scratch, 0) {
        if scratch.is_empty() {
            return Some(d);
        }
    }
    ev.eval(w);
    let d = ev.deref(w);
    let vx = ev.vx(d);
    if levels == 0 || !vx.is_list() || vx.err().is_some() || vx.disjunction.result.is_some() {
        return None;
    }
    let arcs = vx.elements();
    let mut out = Vec::with_capacity(arcs.len());
    for a in arcs {
        ev.eval(a);
        let ad = ev.deref(a);
        if ev.vx(ad).err().is_some() {
            return None;
        }
        out.push(open_list(ev, a, levels - 1).unwrap_or(BVal::Opaque(a as u64)));
    }
    Some(BVal::List(out))
}

fn std_call(
    ev: &mut Ev,
    env: &Option<Arc<super::Env>>,
    b: &'static builtins::Builtin,
    args: &[Expr],
    span: Span,
) -> Val {
    let fits = if b.variadic {
        args.len() + 1 >= b.arity
    } else {
        args.len() == b.arity
    };
    // Any bool-returning function may be used as a validator with its subject omitted.
    let as_validator = !fits && !b.variadic && args.len() + 1 == b.arity;
    let as_validator = as_validator || (b.validator && b.variadic && args.len() + 1 == b.arity - 1);
    // As a validator the subject is argument 0, so the written arguments start at position 1.
    let offset = usize::from(as_validator);
    let mut vals = Vec::new();
    for (i, a) in args.iter().enumerate() {
        // A schema argument (`list.MatchN`'s matcher, `list.Sort`'s comparator) is passed as
        // the value it is: its defaults are not taken, `int | *1` still matches `2`.
        let v = if b.opaque_args.contains(&(i + offset)) {
            opaque_value(ev, env, a)
        } else {
            let v = ev.eval_expr(env, a);
            ev.concrete_default(v)
        };
        if let Val::Bottom(e) = &v {
            return Val::Bottom(e.clone());
        }
        vals.push(v);
    }
    if as_validator {
        return Val::Validator(Arc::new(Validator::Builtin(b, vals)));
    }
    if !fits {
        return err(
            ErrorCode::Eval,
            format!(
                "{}.{}: expected {} arguments, got {}",
                b.pkg,
                b.name,
                b.arity,
                args.len()
            ),
            span,
        );
    }
    let mut data = Vec::new();
    for (i, v) in vals.iter().enumerate() {
        let mut errs = Vec::new();
        let d = match v {
            Val::Vertex(w) => {
                if b.opaque_args.contains(&i) {
                    Some(opaque_data(ev, *w))
                } else if b.opaque_elems {
                    match open_list(ev, *w, 2) {
                        Some(d) => Some(d),
                        None => ev.to_data(*w, &mut errs, 0),
                    }
                } else {
                    ev.to_data(*w, &mut errs, 0)
                }
            }
            other => {
                if !other.is_concrete_scalar() && b.opaque_args.contains(&i) {
                    let a = ev.anon(None, Expr::Lit(other.clone(), span));
                    Some(BVal::Opaque(a as u64))
                } else {
                    ops::scalar_to_data(other)
                }
            }
        };
        match d {
            Some(d) => data.push(d),
            None => {
                if let Some((_, e)) = errs.into_iter().next() {
                    if e.code.is_fatal() {
                        return Val::Bottom(e);
                    }
                }
                return err(
                    ErrorCode::Incomplete,
                    format!(
                        "{}.{}: non-concrete argument {}",
                        b.pkg,
                        b.name,
                        ops::show(v)
                    ),
                    span,
                );
            }
        }
    }
    let mut host = HostImpl { ev };
    match (b.func)(&mut host, &data) {
        Ok(r) => data_value(ev, &r, span),
        Err(e) => err(
            if e.incomplete {
                ErrorCode::Incomplete
            } else {
                ErrorCode::Eval
            },
            format!("error in call to {}.{}: {}", b.pkg, b.name, e.message),
            span,
        ),
    }
}
