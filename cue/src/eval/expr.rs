//! Expression evaluation by family (upstream `expr.go`, `evaluator.go`): an expression in an
//! environment to a value, for operands, labels, guards and arguments.
//!
//! Rules:
//! - references resolve to vertices (`refs`), whose value in an operand position is their
//!   concrete scalar, their struct or list, their error, or their kinds and bounds
//!   (`vertex_value`); a vertex being expanded gives a cycle error (a concrete scalar already
//!   known is its value);
//! - struct, list, unification and disjunction expressions become anonymous vertices;
//! - operands take defaults (`concrete_default`); `&&` and `||` short-circuit; `x == _|_`
//!   tests whether `x` is an error or a scalar that is not concrete (`a: int` makes `a ==
//!   _|_` true, as upstream's `validate` does), or an inline struct or list with a fatal
//!   error in a regular field at any depth (`child_error`), except that a reference cycle
//!   leaves the test itself incomplete (operators on atoms: `ops`; calls: `builtin`);
//! - interpolation converts each part to text, the result being a string or bytes.

use super::*;

impl Ev {
    /// The value of a vertex in an operand position.
    pub fn vertex_value(&mut self, v: VId, span: Span) -> Val {
        self.eval(v);
        if self.vx(v).status == Status::Done {
            self.note_early_read(v);
        }
        if let Some(&cur) = self.active.expanding.last() {
            self.inherit_taint(v, cur);
        }
        if self.vx(v).status == Status::Expanding {
            // Every vertex expanded since `v` read it unfinished (`a0: X, X: b1, b1: b0 - 2,
            // b0: a1, a1: a0 + 2`: `b0` and `b1` hold what `a1` gave before `a0` was known):
            // all of them are evaluated again once `v` is done, as `unify_vertex` does.
            self.taint_since(v);
            if let Some(s) = self.vx(v).value.scalar.clone() {
                if self.vx(v).scr().pending_disj.is_empty() && !self.vx(v).value.is_struct {
                    return s;
                }
            }
            return Val::Bottom(Bottom::new(ErrorCode::Cycle, "cycle in reference", span));
        }
        let v = self.deref(v);
        let vx = self.vx(v);
        if let Some(e) = &vx.value.err {
            return Val::Bottom(e.clone());
        }
        if let Some(d) = &vx.disjunction.result {
            let _ = d;
            return Val::Vertex(v);
        }
        if vx.value.is_struct || vx.value.is_list {
            return Val::Vertex(v);
        }
        if let Some(s) = &vx.value.scalar {
            return s.clone();
        }
        if let Some(e) = &vx.value.incomplete {
            return Val::Bottom(e.clone());
        }
        if vx.value.bounds.is_empty() {
            return Val::Kind(vx.value.kinds);
        }
        Val::Vertex(v)
    }

    /// Evaluates an expression to a value.
    pub fn eval_expr(&mut self, env: &Option<Arc<Env>>, e: &Expr) -> Val {
        if !self.step() {
            return Val::Bottom(
                self.budget
                    .limit_err
                    .clone()
                    .unwrap_or_else(|| Bottom::new(ErrorCode::Eval, "limit exceeded", e.span())),
            );
        }
        match e {
            Expr::Lit(v, _) => v.clone(),
            Expr::Bad(b) => Val::Bottom(b.clone()),
            Expr::FieldRef { .. }
            | Expr::SelfRef { .. }
            | Expr::LetRef { .. }
            | Expr::BindRef { .. }
            | Expr::Selector(..)
            | Expr::Index(..)
            | Expr::Import(..)
            | Expr::Vertex(..) => match self.resolve(env, e) {
                Res::V(w) => self.vertex_value(w, e.span()),
                Res::A(a) => a,
            },
            Expr::Struct(_) | Expr::List(_) | Expr::Unify(..) | Expr::Disj(..) => {
                let a = self.anon(env.clone(), e.clone());
                self.vertex_value(a, e.span())
            }
            Expr::PkgMember(pkg, name, span) => builtin::pkg_member(self, pkg, name, *span),
            Expr::Slice(base, lo, hi, span) => {
                let b = self.eval_expr(env, base);
                let lo = lo.as_ref().map(|x| self.eval_expr(env, x));
                let hi = hi.as_ref().map(|x| self.eval_expr(env, x));
                ops::slice(self, b, lo, hi, *span)
            }
            Expr::Call(f, args, span) => builtin::call(self, env, f, args, *span),
            Expr::Unary(op, x, span) => {
                let xv = self.eval_expr(env, x);
                let xv = self.concrete_default(xv);
                ops::unary(*op, xv, *span)
            }
            Expr::Binary(op, a, b, span) => {
                if matches!(op, BinaryOp::Eq | BinaryOp::Ne) {
                    let a_bot = matches!(&**a, Expr::Lit(Val::Bottom(_), _));
                    let b_bot = matches!(&**b, Expr::Lit(Val::Bottom(_), _));
                    if a_bot || b_bot {
                        let other = if a_bot { b } else { a };
                        let ov = self.eval_expr(env, other);
                        if let Val::Bottom(b) = &ov {
                            if b.code == ErrorCode::Cycle {
                                // Whether a value in a reference cycle is an error is not
                                // known yet: the test is incomplete, not true.
                                return ov;
                            }
                        }
                        let is_bot = self.is_bottom_val(&ov);
                        return Val::Bool(if *op == BinaryOp::Eq { is_bot } else { !is_bot });
                    }
                }
                if matches!(op, BinaryOp::And | BinaryOp::Or) {
                    let av = self.eval_expr(env, a);
                    let av = self.concrete_default(av);
                    match (&av, op) {
                        (Val::Bool(false), BinaryOp::And) => return Val::Bool(false),
                        (Val::Bool(true), BinaryOp::Or) => return Val::Bool(true),
                        _ => {}
                    }
                    let bv = self.eval_expr(env, b);
                    let bv = self.concrete_default(bv);
                    return ops::binary(self, *op, av, bv, *span);
                }
                let av = self.eval_expr(env, a);
                let bv = self.eval_expr(env, b);
                let av = self.concrete_default(av);
                let bv = self.concrete_default(bv);
                ops::binary(self, *op, av, bv, *span)
            }
            Expr::Interp(parts, bytes, span) => {
                let mut out: Vec<u8> = Vec::new();
                for p in parts.iter() {
                    match p {
                        InterpPart::Text(t) => out.extend_from_slice(t.as_bytes()),
                        InterpPart::Bytes(b) => out.extend_from_slice(b),
                        InterpPart::Expr(x) => {
                            let xv = self.eval_expr(env, x);
                            let xv = self.concrete_default(xv);
                            match ops::interp_text(&xv) {
                                Ok(s) => out.extend_from_slice(&s),
                                Err(mut b) => {
                                    if b.span == Span::default() {
                                        Arc::make_mut(&mut b).span = *span;
                                    }
                                    return Val::Bottom(b);
                                }
                            }
                        }
                    }
                }
                self.charge(cost::text(out.len()));
                if *bytes {
                    Val::Bytes(out.into())
                } else {
                    Val::Str(ops::lossy_utf8(&out).into())
                }
            }
        }
    }

    /// `true` if the value is an error or not concrete (the `x == _|_` test; a struct or list
    /// is tested by its own error only, an unresolved disjunction is not an error).
    fn is_bottom_val(&mut self, v: &Val) -> bool {
        match v {
            Val::Bottom(_) => true,
            Val::Vertex(w) => {
                let w = self.deref(*w);
                let x = self.vx(w);
                if x.value.err.is_some() {
                    return true;
                }
                if x.value.is_struct || x.value.is_list {
                    // A field's struct is tested by its own error only (see `child_error`).
                    return x.parent.is_none() && self.child_error(w).is_some();
                }
                x.value.scalar.is_none() && x.disjunction.result.is_none()
            }
            // A value that is not concrete (`int`, `>=0`, `_`, a validator) tests as an
            // error: upstream `validate` compares by concreteness, not only by error.
            Val::Top | Val::Kind(_) | Val::Bound(..) | Val::Validator(_) => true,
            _ => false,
        }
    }

    /// The fatal error of a regular field of the inline struct or list `v` (a value that is no
    /// field), at any depth, which makes `v` itself an error (upstream completes such a value's
    /// fields and `AddChildError` passes their errors up): for the `x == _|_` test and for
    /// selecting from or indexing it (`({a: 1} & {a: 2}) == _|_` is true, `({x: 1, y: 2} & {x:
    /// 3}).y` is an error). A field its closed struct does not allow is no error here (upstream
    /// keeps v2's "open inline" behaviour: `(#D & {b: 2}).b` is 2).
    ///
    /// Known gap: upstream also finalizes a field's struct for `x == _|_` (`a: {x: 1 & 2}`
    /// makes `a == _|_` true); here a field's struct is tested by its own error only. Walking
    /// it evaluates whatever lies below the tested value, which the render's guards on whole
    /// component parts (`if t.spec != _|_`) made cost 105 -> 185 MB on a 20-component module.
    pub(super) fn child_error(&mut self, v: VId) -> Option<Arc<Bottom>> {
        self.fatal_error_deep_open(v).filter(|e| e.code.is_fatal())
    }

    /// Resolves a vertex value to its concrete scalar or default, for operands.
    pub fn concrete_default(&mut self, v: Val) -> Val {
        match v {
            Val::Vertex(w) => {
                let w = self.deref(w);
                let wx = self.vx(w);
                if let Some(e) = &wx.value.err {
                    return Val::Bottom(e.clone());
                }
                if wx.disjunction.result.is_some() {
                    return Val::Bottom(Bottom::new(
                        ErrorCode::Incomplete,
                        "unresolved disjunction",
                        wx.span,
                    ));
                }
                if wx.value.is_struct || wx.value.is_list {
                    return Val::Vertex(w);
                }
                match &wx.value.scalar {
                    Some(s) => s.clone(),
                    None => {
                        if let Some(b) = wx.value.bounds.first() {
                            b.clone()
                        } else {
                            Val::Kind(wx.value.kinds)
                        }
                    }
                }
            }
            other => other,
        }
    }
}
