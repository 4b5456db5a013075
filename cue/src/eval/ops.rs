//! Operators on atoms (spec "Operators", "Arithmetic operators", "Comparison operators"):
//! int and float arithmetic on exact decimals with CUE's 34-digit decimal context, `/` always
//! giving a float, `div mod quo rem` on integers only, string and bytes concatenation and
//! repetition, comparison of numbers by value, regular expressions with RE2 semantics (Perl
//! classes translated to their ASCII forms for the `regex` crate).

use super::Ev;
use crate::adt::*;
use crate::ast::{BinaryOp, UnaryOp};
use crate::data::num::{adjusted_exponent, exponent_in_range, format_float};
use crate::data::Val as BVal;
use crate::source::Span;
use bigdecimal::{BigDecimal, RoundingMode};
use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{Signed, ToPrimitive, Zero};
use std::num::NonZeroU64;
use std::sync::Arc;

const PREC: u64 = 34;

/// Orders decimals without aligning operands of very different magnitude.
pub fn dec_cmp(a: &BigDecimal, b: &BigDecimal) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (sa, sb) = (a.sign(), b.sign());
    if sa != sb {
        let rank = |s: Sign| match s {
            Sign::Minus => 0,
            Sign::NoSign => 1,
            Sign::Plus => 2,
        };
        return rank(sa).cmp(&rank(sb));
    }
    if sa == Sign::NoSign {
        return Ordering::Equal;
    }
    let (ea, eb) = (adjusted_exponent(a), adjusted_exponent(b));
    if ea != eb {
        let by_magnitude = ea.cmp(&eb);
        return if sa == Sign::Minus {
            by_magnitude.reverse()
        } else {
            by_magnitude
        };
    }
    a.cmp(b)
}

fn round34(d: BigDecimal) -> BigDecimal {
    match NonZeroU64::new(PREC) {
        Some(p) => {
            if d.digits() > PREC {
                d.with_precision_round(p, RoundingMode::HalfEven)
            } else {
                d
            }
        }
        None => d,
    }
}

fn to_dec(v: &Val) -> Option<BigDecimal> {
    match v {
        Val::Int(i) => Some(BigDecimal::new((**i).clone(), 0)),
        Val::Float(f) => Some((**f).clone()),
        _ => None,
    }
}

/// Decimal division with 34 significant digits, half-even.
pub fn dec_div(a: &BigDecimal, b: &BigDecimal) -> Option<BigDecimal> {
    let (ma, sa) = a.as_bigint_and_exponent();
    let (mb, sb) = b.as_bigint_and_exponent();
    if mb.is_zero() {
        return None;
    }
    let da = ma.abs().to_string().len() as i64;
    let db = mb.abs().to_string().len() as i64;
    let k = (38 + db - da).max(0);
    let n = ma * BigInt::from(10).pow(k as u32);
    let (mut q, r) = n.div_rem(&mb);
    let mut scale = sa - sb + k;
    if !r.is_zero() {
        let neg = (n_sign(&q, &r, &mb)) == Sign::Minus;
        q = q * 10 + if neg { -1 } else { 1 };
        scale += 1;
    }
    let res = round34(BigDecimal::new(q, scale));
    Some(trim_trailing(res))
}

fn n_sign(q: &BigInt, r: &BigInt, d: &BigInt) -> Sign {
    if !q.is_zero() {
        q.sign()
    } else if (r.sign() == Sign::Minus) != (d.sign() == Sign::Minus) {
        Sign::Minus
    } else {
        Sign::Plus
    }
}

fn trim_trailing(d: BigDecimal) -> BigDecimal {
    // Keep apd-like results: drop trailing zeros of a quotient only down to scale 1.
    let (m, s) = d.as_bigint_and_exponent();
    let mut m = m;
    let mut s = s;
    let ten = BigInt::from(10);
    while s > 1 && !m.is_zero() && (&m % &ten).is_zero() {
        m /= &ten;
        s -= 1;
    }
    BigDecimal::new(m, s)
}

/// A value as CUE would print it in a message.
pub fn show(v: &Val) -> String {
    let mut s = String::new();
    write_show(&mut s, v);
    s
}

/// [`show`], written to the end of `out` (a fingerprint writes thousands of values into one
/// buffer).
pub fn write_show(out: &mut String, v: &Val) {
    use std::fmt::Write as _;
    match v {
        Val::Top => out.push('_'),
        Val::Bottom(_) => out.push_str("_|_"),
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Val::Float(f) => out.push_str(&format_float(f)),
        Val::Str(s) => {
            let _ = write!(out, "{:?}", &**s);
        }
        Val::Bytes(b) => {
            let _ = write!(out, "'{}'", String::from_utf8_lossy(b));
        }
        Val::Kind(k) => write_kind_name(out, *k),
        Val::Bound(op, x) => {
            out.push_str(op.text());
            write_show(out, x);
        }
        Val::Validator(_) => out.push_str("validator"),
        Val::Vertex(_) => out.push_str("{...}"),
        Val::Builtin(n) => out.push_str(n),
        Val::StdFunc(b) => {
            let _ = write!(out, "{}.{}", b.pkg, b.name);
        }
    }
}

/// Identity of concrete scalars for unification (an int never equals a float).
pub fn scalar_identical(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Int(x), Val::Int(y)) => x == y,
        (Val::Float(x), Val::Float(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Bytes(x), Val::Bytes(y)) => x == y,
        _ => false,
    }
}

fn num_cmp(a: &Val, b: &Val) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(y)),
        _ => Some(dec_cmp(&to_dec(a)?, &to_dec(b)?)),
    }
}

/// Equality of concrete data (numbers by value).
pub fn data_equal(a: &BVal, b: &BVal) -> bool {
    match (a, b) {
        (BVal::Int(x), BVal::Float(y)) | (BVal::Float(y), BVal::Int(x)) => {
            dec_cmp(&BigDecimal::new(x.clone(), 0), y) == std::cmp::Ordering::Equal
        }
        (BVal::List(x), BVal::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| data_equal(p, q))
        }
        (BVal::Struct(x), BVal::Struct(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, p)| {
                    y.iter()
                        .find(|(k2, _)| k2 == k)
                        .is_some_and(|(_, q)| data_equal(p, q))
                })
        }
        _ => a == b,
    }
}

/// Equality used by `==`.
pub fn value_equal(ev: &mut Ev, a: &Val, b: &Val) -> Result<bool, Arc<Bottom>> {
    match (a, b) {
        (Val::Vertex(_), _) | (_, Val::Vertex(_)) => {
            let mut errs = Vec::new();
            let da = to_data_val(ev, a, &mut errs);
            let db = to_data_val(ev, b, &mut errs);
            match (da, db) {
                (Some(x), Some(y)) => Ok(data_equal(&x, &y)),
                _ => Err(errs.into_iter().next().map(|e| e.1).unwrap_or_else(|| {
                    Bottom::new(ErrorCode::Incomplete, "incomplete value", Span::default())
                })),
            }
        }
        _ => match num_cmp(a, b) {
            Some(o) if matches!(a, Val::Int(_) | Val::Float(_)) => Ok(o.is_eq()),
            _ => Ok(scalar_identical(a, b)),
        },
    }
}

fn to_data_val(ev: &mut Ev, v: &Val, errs: &mut Vec<(VId, Arc<Bottom>)>) -> Option<BVal> {
    match v {
        Val::Vertex(w) => ev.to_data(*w, errs, 0),
        other => scalar_to_data(other),
    }
}

/// A concrete scalar as builtin data.
pub fn scalar_to_data(v: &Val) -> Option<BVal> {
    Some(match v {
        Val::Null => BVal::Null,
        Val::Bool(b) => BVal::Bool(*b),
        Val::Int(i) => BVal::Int((**i).clone()),
        Val::Float(f) => BVal::Float((**f).clone()),
        Val::Str(s) => BVal::String(s.to_string()),
        Val::Bytes(b) => BVal::Bytes(b.to_vec()),
        _ => return None,
    })
}

fn err(code: ErrorCode, msg: impl Into<String>, span: Span) -> Val {
    Val::Bottom(Bottom::new(code, msg, span))
}

fn operand_check(a: &Val, b: &Val, opname: &str, span: Span) -> Option<Val> {
    for x in [a, b] {
        if let Val::Bottom(e) = x {
            return Some(Val::Bottom(e.clone()));
        }
    }
    for x in [a, b] {
        match x {
            Val::Top | Val::Kind(_) | Val::Bound(..) | Val::Validator(_) => {
                return Some(err(
                    ErrorCode::Incomplete,
                    format!("non-concrete value {} in operand to {opname}", show(x)),
                    span,
                ));
            }
            _ => {}
        }
    }
    None
}

fn op_text(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Disjunction => "|",
        BinaryOp::Unification => "&",
        BinaryOp::Or => "||",
        BinaryOp::And => "&&",
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        BinaryOp::Match => "=~",
        BinaryOp::NotMatch => "!~",
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
    }
}

/// A binary operator on evaluated operands.
pub fn binary(ev: &mut Ev, op: BinaryOp, a: Val, b: Val, span: Span) -> Val {
    if let Some(e) = operand_check(&a, &b, op_text(op), span) {
        return e;
    }
    match op {
        BinaryOp::And | BinaryOp::Or => match (&a, &b) {
            (Val::Bool(x), Val::Bool(y)) => Val::Bool(if op == BinaryOp::And {
                *x && *y
            } else {
                *x || *y
            }),
            _ => mismatch(op, &a, &b, span),
        },
        BinaryOp::Eq | BinaryOp::Ne => {
            let comparable = match (&a, &b) {
                (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => true,
                (Val::Vertex(_), Val::Vertex(_)) => true,
                (Val::Null, _) | (_, Val::Null) => true,
                (x, y) => x.kind() == y.kind(),
            };
            if !comparable {
                // Values of different kinds are never equal.
                return Val::Bool(op == BinaryOp::Ne);
            }
            match value_equal(ev, &a, &b) {
                Ok(eq) => Val::Bool(if op == BinaryOp::Eq { eq } else { !eq }),
                Err(e) => Val::Bottom(e),
            }
        }
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
            let ord = match (&a, &b) {
                (Val::Str(x), Val::Str(y)) => Some(x.cmp(y)),
                (Val::Bytes(x), Val::Bytes(y)) => Some(x.cmp(y)),
                (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => num_cmp(&a, &b),
                _ => None,
            };
            match ord {
                Some(o) => Val::Bool(match op {
                    BinaryOp::Lt => o.is_lt(),
                    BinaryOp::Le => o.is_le(),
                    BinaryOp::Gt => o.is_gt(),
                    _ => o.is_ge(),
                }),
                None => mismatch(op, &a, &b, span),
            }
        }
        BinaryOp::Match | BinaryOp::NotMatch => match (&a, &b) {
            (Val::Str(s), Val::Str(re)) => match ev.regex(re) {
                Ok(r) => {
                    let m = r.is_match(s);
                    Val::Bool(if op == BinaryOp::Match { m } else { !m })
                }
                Err(e) => err(ErrorCode::Eval, e, span),
            },
            _ => mismatch(op, &a, &b, span),
        },
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => {
            let r = arith(op, &a, &b, span);
            // What the operator made is charged to the memory budget (`budget.rs`).
            let made = match &r {
                Val::Str(s) => super::cost::text(s.len()),
                Val::Bytes(b) => super::cost::text(b.len()),
                Val::Int(_) | Val::Float(_) => super::cost::NUMBER,
                _ => 0,
            };
            ev.charge(made);
            r
        }
        BinaryOp::Div => match (to_dec(&a), to_dec(&b)) {
            (Some(x), Some(y)) => match dec_div(&x, &y) {
                Some(r) => Val::Float(Arc::new(r)),
                None => err(ErrorCode::Eval, "failed arithmetic: division by zero", span),
            },
            _ => mismatch(op, &a, &b, span),
        },
        BinaryOp::Disjunction | BinaryOp::Unification => mismatch(op, &a, &b, span),
    }
}

/// The error of operands of kinds `op` does not take.
fn mismatch(op: BinaryOp, a: &Val, b: &Val, span: Span) -> Val {
    err(
        ErrorCode::Eval,
        format!(
            "invalid operands {} and {} to '{}' (type {} and {})",
            show(a),
            show(b),
            op_text(op),
            kind_name(a.kind()),
            kind_name(b.kind())
        ),
        span,
    )
}

/// `+ - *`: integers exactly, other numbers as 34-digit decimals (a float), strings and
/// bytes concatenated (`+`) or repeated (`*` by an int, at most 16 MiB).
fn arith(op: BinaryOp, a: &Val, b: &Val, span: Span) -> Val {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => {
            return Val::int(match op {
                BinaryOp::Add => &**x + &**y,
                BinaryOp::Sub => &**x - &**y,
                _ => &**x * &**y,
            })
        }
        (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => {
            let (Some(x), Some(y)) = (to_dec(a), to_dec(b)) else {
                return mismatch(op, a, b, span);
            };
            if !exponent_in_range(&x) || !exponent_in_range(&y) {
                return err(ErrorCode::Eval, "float exponent out of range", span);
            }
            let r = match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                _ => x * y,
            };
            let r = round34(r);
            if !exponent_in_range(&r) {
                return err(ErrorCode::Eval, "float exponent out of range", span);
            }
            return Val::Float(Arc::new(r));
        }
        _ => {}
    }
    match (op, a, b) {
        (BinaryOp::Add, Val::Str(x), Val::Str(y)) => Val::Str(format!("{x}{y}").into()),
        (BinaryOp::Add, Val::Bytes(x), Val::Bytes(y)) => {
            let mut v = x.to_vec();
            v.extend_from_slice(y);
            Val::Bytes(v.into())
        }
        (BinaryOp::Mul, Val::Str(s), Val::Int(n)) | (BinaryOp::Mul, Val::Int(n), Val::Str(s)) => {
            match n.to_usize() {
                Some(n) if s.len().saturating_mul(n) <= 1 << 24 => Val::Str(s.repeat(n).into()),
                _ => err(ErrorCode::Eval, "invalid repeat count", span),
            }
        }
        (BinaryOp::Mul, Val::Bytes(s), Val::Int(n))
        | (BinaryOp::Mul, Val::Int(n), Val::Bytes(s)) => match n.to_usize() {
            Some(n) if s.len().saturating_mul(n) <= 1 << 24 => Val::Bytes(s.repeat(n).into()),
            _ => err(ErrorCode::Eval, "invalid repeat count", span),
        },
        _ => mismatch(op, a, b, span),
    }
}

/// Integer division builtins: `div mod` (Euclidean) and `quo rem` (truncated).
pub fn int_div(name: &str, a: &Val, b: &Val, span: Span) -> Val {
    if let Some(e) = operand_check(a, b, name, span) {
        return e;
    }
    let (Val::Int(x), Val::Int(y)) = (a, b) else {
        return err(
            ErrorCode::Eval,
            format!(
                "{name}: invalid operands {} and {} (expected int)",
                show(a),
                show(b)
            ),
            span,
        );
    };
    if y.is_zero() {
        return err(ErrorCode::Eval, "division by zero", span);
    }
    let (x, y) = (&**x, &**y);
    match name {
        "div" | "mod" => {
            // Euclidean: remainder always >= 0.
            let mut q = x / y;
            let mut r = x - &q * y;
            if r.is_negative() {
                if y.is_positive() {
                    q -= 1;
                    r += y;
                } else {
                    q += 1;
                    r -= y;
                }
            }
            Val::int(if name == "div" { q } else { r })
        }
        "quo" => Val::int(x / y),
        _ => Val::int(x % y),
    }
}

/// A unary operator.
pub fn unary(op: UnaryOp, v: Val, span: Span) -> Val {
    if let Val::Bottom(e) = v {
        return Val::Bottom(e);
    }
    if let Some(bop) = unary_bound(op) {
        if !v.is_concrete_scalar() {
            return err(
                ErrorCode::Incomplete,
                format!("non-concrete value {} for bound {}", show(&v), bop.text()),
                span,
            );
        }
        if matches!(bop, BoundOp::Match | BoundOp::NotMatch) {
            match &v {
                // A pattern that does not compile is an error where the bound tests a
                // string (upstream: the bound itself is a value, as in a pattern
                // constraint's label filter), not where it is written.
                Val::Str(_) => {}
                _ => {
                    return err(
                        ErrorCode::Eval,
                        format!("invalid regular expression {}", show(&v)),
                        span,
                    )
                }
            }
        }
        return Val::Bound(bop, Arc::new(v));
    }
    match (op, &v) {
        (UnaryOp::Neg, Val::Int(i)) => Val::int(-(**i).clone()),
        (UnaryOp::Neg, Val::Float(f)) => Val::Float(Arc::new(-(**f).clone())),
        (UnaryOp::Pos, Val::Int(_) | Val::Float(_)) => v,
        (UnaryOp::Not, Val::Bool(b)) => Val::Bool(!b),
        (_, Val::Kind(_) | Val::Top | Val::Bound(..) | Val::Validator(_)) => err(
            ErrorCode::Incomplete,
            format!("non-concrete value {} in unary operation", show(&v)),
            span,
        ),
        _ => err(
            ErrorCode::Eval,
            format!("invalid operand {} to unary operator", show(&v)),
            span,
        ),
    }
}

/// Checks bound `op x` against a concrete `s`; returns an error message on failure.
pub fn check_bound(ev: &mut Ev, op: BoundOp, x: &Val, s: &Val) -> Option<String> {
    let fail = || {
        Some(format!(
            "invalid value {} (out of bound {}{})",
            show(s),
            op.text(),
            show(x)
        ))
    };
    match op {
        BoundOp::Ne => {
            let eq = value_equal(ev, s, x).unwrap_or(false);
            if eq {
                fail()
            } else {
                None
            }
        }
        BoundOp::Match | BoundOp::NotMatch => {
            let (Val::Str(re), Val::Str(st)) = (x, s) else {
                return Some(format!(
                    "invalid value {} (mismatched types {} and string)",
                    show(s),
                    kind_name(s.kind())
                ));
            };
            match ev.regex(re) {
                Ok(r) => {
                    let m = r.is_match(st);
                    if m == (op == BoundOp::Match) {
                        None
                    } else {
                        fail()
                    }
                }
                Err(e) => Some(e),
            }
        }
        _ => {
            let ord = match (s, x) {
                (Val::Str(a), Val::Str(b)) => Some(a.cmp(b)),
                (Val::Bytes(a), Val::Bytes(b)) => Some(a.cmp(b)),
                (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => num_cmp(s, x),
                _ => None,
            };
            let Some(o) = ord else {
                return Some(format!(
                    "invalid value {} (mismatched types {} and {})",
                    show(s),
                    kind_name(s.kind()),
                    kind_name(x.kind())
                ));
            };
            let ok = match op {
                BoundOp::Lt => o.is_lt(),
                BoundOp::Le => o.is_le(),
                BoundOp::Gt => o.is_gt(),
                _ => o.is_ge(),
            };
            if ok {
                None
            } else {
                fail()
            }
        }
    }
}

/// The text a value contributes to an interpolation.
pub fn interp_text(v: &Val) -> Result<Vec<u8>, Arc<Bottom>> {
    match v {
        Val::Str(s) => Ok(s.as_bytes().to_vec()),
        Val::Bytes(b) => Ok(b.to_vec()),
        Val::Int(i) => Ok(i.to_string().into_bytes()),
        Val::Float(f) => Ok(format_float(f).into_bytes()),
        Val::Bool(b) => Ok(b.to_string().into_bytes()),
        Val::Bottom(b) => Err(b.clone()),
        Val::Top | Val::Kind(_) | Val::Bound(..) | Val::Validator(_) => Err(Bottom::new(
            ErrorCode::Incomplete,
            format!("invalid interpolation: non-concrete value {}", show(v)),
            Span::default(),
        )),
        _ => Err(Bottom::new(
            ErrorCode::Eval,
            format!(
                "invalid interpolation: cannot use {} in interpolation",
                show(v)
            ),
            Span::default(),
        )),
    }
}

/// `x[lo:hi]` on lists and bytes (upstream slices nothing else: a string is not sliceable).
pub fn slice(ev: &mut Ev, b: Val, lo: Option<Val>, hi: Option<Val>, span: Span) -> Val {
    let idx = |v: &Option<Val>| -> Result<Option<usize>, Val> {
        match v {
            None => Ok(None),
            Some(Val::Int(i)) => i
                .to_usize()
                .map(Some)
                .ok_or_else(|| err(ErrorCode::Eval, "negative slice index", span)),
            Some(Val::Bottom(e)) => Err(Val::Bottom(e.clone())),
            Some(o) => Err(err(
                ErrorCode::Incomplete,
                format!("invalid slice index {}", show(o)),
                span,
            )),
        }
    };
    let lo = match idx(&lo) {
        Ok(x) => x.unwrap_or(0),
        Err(e) => return e,
    };
    let hi = match idx(&hi) {
        Ok(x) => x,
        Err(e) => return e,
    };
    match b {
        Val::Bytes(bs) => {
            let hi = hi.unwrap_or(bs.len());
            if lo > hi || hi > bs.len() {
                return err(ErrorCode::Eval, "slice bounds out of range", span);
            }
            Val::Bytes(bs[lo..hi].to_vec().into())
        }
        Val::Vertex(w) => {
            ev.eval(w);
            let w = ev.deref(w);
            let arcs = ev.vx(w).elements();
            if !ev.vx(w).is_list() {
                return err(ErrorCode::Eval, "cannot slice a struct", span);
            }
            let hi = hi.unwrap_or(arcs.len());
            if lo > hi || hi > arcs.len() {
                return err(ErrorCode::Eval, "slice bounds out of range", span);
            }
            let lit = ListLit {
                elems: arcs[lo..hi]
                    .iter()
                    .map(|a| ListElemC::Expr(Expr::Vertex(*a, span)))
                    .collect(),
                ellipsis: None,
                span,
            };
            let a = ev.anon(None, Expr::List(Arc::new(lit)));
            ev.vertex_value(a, span)
        }
        Val::Bottom(e) => Val::Bottom(e),
        other => err(
            if other.is_concrete_scalar() {
                ErrorCode::Eval
            } else {
                ErrorCode::Incomplete
            },
            format!("cannot slice {}", show(&other)),
            span,
        ),
    }
}

/// Decodes UTF-8, replacing each run of invalid bytes by one U+FFFD (Go's
/// `strings.ToValidUTF8`, which CUE applies to bytes interpolated into a string).
pub fn lossy_utf8(mut b: &[u8]) -> String {
    let mut out = String::new();
    let mut in_bad_run = false;
    loop {
        match std::str::from_utf8(b) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (ok, rest) = b.split_at(e.valid_up_to());
                if !ok.is_empty() {
                    out.push_str(std::str::from_utf8(ok).unwrap_or(""));
                    in_bad_run = false;
                }
                if !in_bad_run {
                    out.push('\u{FFFD}');
                    in_bad_run = true;
                }
                let n = e.error_len().unwrap_or(rest.len()).max(1);
                b = &rest[n.min(rest.len())..];
            }
        }
    }
}

/// Unary-operator helpers re-exported for the builtin module.
pub(crate) fn unary_bound(op: UnaryOp) -> Option<BoundOp> {
    Some(match op {
        UnaryOp::Lt => BoundOp::Lt,
        UnaryOp::Le => BoundOp::Le,
        UnaryOp::Gt => BoundOp::Gt,
        UnaryOp::Ge => BoundOp::Ge,
        UnaryOp::Ne => BoundOp::Ne,
        UnaryOp::Match => BoundOp::Match,
        UnaryOp::NotMatch => BoundOp::NotMatch,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_rounds_to_34_digits() {
        let two: BigDecimal = "2.0".parse().unwrap();
        let three: BigDecimal = "3".parse().unwrap();
        let q = dec_div(&two, &three).unwrap();
        assert_eq!(q.to_string(), "0.6666666666666666666666666666666667");
    }

    #[test]
    fn euclidean_division() {
        let s = Span::default();
        let m = int_div("mod", &Val::int(-5), &Val::int(3), s);
        assert!(matches!(m, Val::Int(i) if *i == BigInt::from(1)));
        let q = int_div("quo", &Val::int(-5), &Val::int(3), s);
        assert!(matches!(q, Val::Int(i) if *i == BigInt::from(-1)));
    }
}
