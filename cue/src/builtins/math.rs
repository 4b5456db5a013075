//! Package `math` (upstream `pkg/math`): exact decimal rounding and arithmetic helpers, Go's
//! float64 functions, and the mathematical and `math/big` constants.
//!
//! Rules:
//! - `Floor`, `Ceil`, `Trunc`, `Round` (half away from zero) and `RoundToEven` work on the exact
//!   decimal and return ints.
//! - Functions upstream computes on `apd` decimals (`Abs`, `Copysign`, `Dim`, `Cbrt`, `Exp`,
//!   `Exp2`, `Log`, `Log10`, `Log2`, `Pow`, `Signbit`) are exact or rounded half-up to 34
//!   significant digits like apd's context: `Abs`, `Copysign`, `Dim` and `Pow`/`Exp2` with an
//!   integral exponent exactly, the transcendental ones by series evaluated with 60 digits
//!   (`Exp(3)` is `20.08553692318766774092852965458172`); `Log2` divides the rounded logarithms
//!   as upstream does. Exact results drop trailing zeros (`Cbrt(3.375)` is `1.5`).
//! - Functions upstream computes on float64 (`Sqrt`, `Sin`, `Mod`, `Remainder`, `Atan2`, ...)
//!   take float64 arguments; the result is the shortest decimal of the float64.
//! - Every number result is an int when it is integral (`Pow10(4)` is `10000`, `Mod(7, 3)` is
//!   `1`), as upstream's conversion of results does. A NaN or infinite result is an error.
//! - `MultipleOf(x, y)` is a validator: `x / y` is an integer (exactly; `y == 0` is an error).
//! - Not provided (no pure-Rust implementation here): `Erf`, `Erfc`, `Erfinv`, `Erfcinv`,
//!   `Gamma`, `J0`, `J1`, `Jn`, `Y0`, `Y1`, `Yn`.

use super::args::{builtin, fail, Num};
use super::strconv::float_val;
use super::{Builtin, BuiltinError, Package, Val};
use crate::data::num::{from_decimal, to_bigint};
use bigdecimal::{BigDecimal, RoundingMode};
use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{One, Signed, ToPrimitive, Zero};

const P: &str = "math";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts,
};

fn consts(name: &str) -> Option<Val> {
    let text = match name {
        "MaxExp" => "2147483647",
        "MinExp" => "-2147483648",
        "MaxPrec" => "4294967295",
        "ToNearestEven" | "Exact" => "0",
        "ToNearestAway" | "Above" => "1",
        "ToZero" => "2",
        "AwayFromZero" => "3",
        "ToNegativeInf" => "4",
        "ToPositiveInf" => "5",
        "Below" => "-1",
        "MaxBase" => "62",
        "E" => "2.71828182845904523536028747135266249775724709369995957496696763",
        "Pi" => "3.14159265358979323846264338327950288419716939937510582097494459",
        "Phi" => "1.61803398874989484820458683436563811772030917980576286213544861",
        "Sqrt2" => "1.41421356237309504880168872420969807856967187537694807317667974",
        "SqrtE" => "1.64872127070012814684865078781416357165377610071014801157507931",
        "SqrtPi" => "1.77245385090551602729816748334114518279754945612238712821380779",
        "SqrtPhi" => "1.27201964951406896425242246173749149171560804184009624861664038",
        "Ln2" => "0.693147180559945309417232121458176568075500134360255254120680009",
        "Log2E" => "1.442695040888963407359924681001892137426645954152985934135449408",
        "Ln10" => "2.3025850929940456840179914546843642076011014886287729760333278",
        "Log10E" => "0.43429448190325182765112891891660508229439700580366656611445378",
        _ => return None,
    };
    if text.contains('.') {
        text.parse::<BigDecimal>().ok().map(Val::Float)
    } else {
        text.parse::<BigInt>().ok().map(Val::Int)
    }
}

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Jacobi", 2, jacobi),
    Builtin::f(P, "Floor", 1, floor),
    Builtin::f(P, "Ceil", 1, ceil),
    Builtin::f(P, "Trunc", 1, trunc),
    Builtin::f(P, "Round", 1, round),
    Builtin::f(P, "RoundToEven", 1, round_to_even),
    Builtin::v(P, "MultipleOf", 2, multiple_of),
    Builtin::f(P, "Abs", 1, abs),
    Builtin::f(P, "Acosh", 1, acosh),
    Builtin::f(P, "Asin", 1, asin),
    Builtin::f(P, "Acos", 1, acos),
    Builtin::f(P, "Asinh", 1, asinh),
    Builtin::f(P, "Atan", 1, atan),
    Builtin::f(P, "Atan2", 2, atan2),
    Builtin::f(P, "Atanh", 1, atanh),
    Builtin::f(P, "Cbrt", 1, cbrt),
    Builtin::f(P, "Copysign", 2, copysign),
    Builtin::f(P, "Dim", 2, dim),
    Builtin::f(P, "Exp", 1, exp),
    Builtin::f(P, "Exp2", 1, exp2),
    Builtin::f(P, "Expm1", 1, expm1),
    Builtin::f(P, "Hypot", 2, hypot),
    Builtin::f(P, "Ldexp", 2, ldexp),
    Builtin::f(P, "Log", 1, log),
    Builtin::f(P, "Log10", 1, log10),
    Builtin::f(P, "Log2", 1, log2),
    Builtin::f(P, "Log1p", 1, log1p),
    Builtin::f(P, "Logb", 1, logb),
    Builtin::f(P, "Ilogb", 1, ilogb),
    Builtin::f(P, "Mod", 2, mod_),
    Builtin::f(P, "Pow", 2, pow),
    Builtin::f(P, "Pow10", 1, pow10),
    Builtin::f(P, "Remainder", 2, remainder),
    Builtin::v(P, "Signbit", 1, signbit),
    Builtin::f(P, "Cos", 1, cos),
    Builtin::f(P, "Sin", 1, sin),
    Builtin::f(P, "Sinh", 1, sinh),
    Builtin::f(P, "Cosh", 1, cosh),
    Builtin::f(P, "Sqrt", 1, sqrt),
    Builtin::f(P, "Tan", 1, tan),
    Builtin::f(P, "Tanh", 1, tanh),
];

fn f64_of(n: &Num) -> Result<f64, BuiltinError> {
    let f: f64 = n.0.to_string().parse().unwrap_or(f64::NAN);
    if f.is_finite() {
        Ok(f)
    } else {
        fail!("value {} out of range for float64", n.0)
    }
}

/// A float64 result: the shortest decimal, an int when integral.
fn float_result(f: f64) -> Result<Val, BuiltinError> {
    if !f.is_finite() {
        fail!("result {f} is not a finite number");
    }
    match float_val(f)? {
        Val::Float(d) => Ok(from_decimal(d)),
        other => Ok(other),
    }
}

/// Working precision of the series below, in significant digits.
const WORK: u64 = 60;

fn work(x: BigDecimal) -> BigDecimal {
    x.with_prec(WORK)
}

fn round34(x: &BigDecimal) -> BigDecimal {
    let prec = std::num::NonZeroU64::new(34).unwrap_or(std::num::NonZeroU64::MIN);
    x.with_precision_round(prec, RoundingMode::HalfUp)
}

/// A decimal result rounded like apd's 34-digit base context. A result that is exact up to the
/// noise of the working precision drops its trailing zeros (`1.5`); an inexact one keeps all 34
/// digits, as apd does.
fn apd_result(x: BigDecimal) -> Val {
    let r = round34(&x);
    if r.is_zero() {
        return Val::Int(0.into());
    }
    let noise = BigDecimal::new(1.into(), 50) * x.abs();
    if (&x - &r).abs() <= noise {
        return from_decimal(r.normalized());
    }
    from_decimal(r)
}

/// `atanh(z)` by its series, for `|z| <= 1/3`.
fn atanh_series(z: &BigDecimal) -> BigDecimal {
    let z2 = work(z * z);
    let mut term = z.clone();
    let mut sum = z.clone();
    let eps = BigDecimal::new(1.into(), (WORK + 5) as i64);
    let mut k = 1u64;
    while term.abs() > eps && k < 2000 {
        term = work(&term * &z2);
        k += 2;
        sum = work(sum + work(&term / BigDecimal::from(k)));
    }
    sum
}

fn ln2() -> BigDecimal {
    work(atanh_series(&work(BigDecimal::one() / BigDecimal::from(3))) * BigDecimal::from(2))
}

fn ln10() -> BigDecimal {
    // ln 10 = 3 ln 2 + ln 1.25, and ln 1.25 = 2 atanh(1/9).
    let ln125 = atanh_series(&work(BigDecimal::one() / BigDecimal::from(9))) * BigDecimal::from(2);
    work(ln2() * BigDecimal::from(3) + ln125)
}

/// The natural logarithm of a positive decimal, to the working precision.
fn ln(x: &BigDecimal) -> BigDecimal {
    // x = m * 10^k with 1 <= m < 10.
    let digits = x.digits() as i64;
    let (_, scale) = x.as_bigint_and_exponent();
    let k = digits - 1 - scale;
    let mut m = work(x * BigDecimal::new(1.into(), k));
    // Bring m into [0.75, 1.5] by halving: m = y * 2^j.
    let mut j = 0i64;
    let limit = BigDecimal::new(15.into(), 1);
    while m > limit {
        m = work(m / BigDecimal::from(2));
        j += 1;
    }
    let z = work((&m - BigDecimal::one()) / (&m + BigDecimal::one()));
    let ln_m = work(atanh_series(&z) * BigDecimal::from(2));
    work(ln_m + ln2() * BigDecimal::from(j) + ln10() * BigDecimal::from(k))
}

/// `e^x` to the working precision; `None` when the result would be out of any sane range.
fn exp_dec(x: &BigDecimal) -> Option<BigDecimal> {
    if x.abs() > 100_000 {
        return None;
    }
    let l2 = ln2();
    let n = to_bigint(&work(x / &l2).with_scale_round(0, RoundingMode::HalfEven));
    let r = work(x - &l2 * BigDecimal::from(n.clone()));
    let eps = BigDecimal::new(1.into(), (WORK + 5) as i64);
    let mut term = BigDecimal::one();
    let mut sum = BigDecimal::one();
    let mut k = 0u64;
    while (k == 0 || term.abs() > eps) && k < 2000 {
        k += 1;
        term = work(work(&term * &r) / BigDecimal::from(k));
        sum = work(sum + &term);
    }
    let n = n.to_i64()?;
    let two = BigDecimal::from(2);
    let mut scale = BigDecimal::one();
    for _ in 0..n.unsigned_abs() {
        scale = work(scale * &two);
    }
    Some(if n >= 0 {
        work(sum * scale)
    } else {
        work(sum / scale)
    })
}

fn need_positive(x: &Num, name: &str) -> Result<(), BuiltinError> {
    if !x.0.is_positive() {
        fail!("{name}: argument must be positive, got {}", x.0);
    }
    Ok(())
}

fn round_with(n: &Num, mode: RoundingMode) -> Val {
    Val::Int(to_bigint(&n.0.with_scale_round(0, mode)))
}

builtin! {
    /// `Floor(-1.5)` → `-2`.
    fn floor(_, "math.Floor", x: Num) {
        Ok(round_with(&x, RoundingMode::Floor))
    }
}

builtin! {
    /// `Ceil(1.2)` → `2`.
    fn ceil(_, "math.Ceil", x: Num) {
        Ok(round_with(&x, RoundingMode::Ceiling))
    }
}

builtin! {
    /// `Trunc(-1.7)` → `-1`.
    fn trunc(_, "math.Trunc", x: Num) {
        Ok(round_with(&x, RoundingMode::Down))
    }
}

builtin! {
    /// `Round(2.5)` → `3`; `Round(-2.5)` → `-3`.
    fn round(_, "math.Round", x: Num) {
        Ok(round_with(&x, RoundingMode::HalfUp))
    }
}

builtin! {
    /// `RoundToEven(2.5)` → `2`.
    fn round_to_even(_, "math.RoundToEven", x: Num) {
        Ok(round_with(&x, RoundingMode::HalfEven))
    }
}

/// `(mantissa_x, mantissa_y)` of two decimals brought to the same scale.
fn common_scale(x: &BigDecimal, y: &BigDecimal) -> (BigInt, BigInt) {
    let (mx, sx) = x.as_bigint_and_exponent();
    let (my, sy) = y.as_bigint_and_exponent();
    let s = sx.max(sy);
    let ten = BigInt::from(10u8);
    let up = |m: BigInt, from: i64| {
        m * num_traits::pow(ten.clone(), usize::try_from(s - from).unwrap_or(0))
    };
    (up(mx, sx), up(my, sy))
}

builtin! {
    /// `MultipleOf(15, 5)` → `true`; `MultipleOf(1.5, 0.5)` → `true`; as a validator,
    /// `math.MultipleOf(5)`.
    fn multiple_of(_, "math.MultipleOf", x: Num, y: Num) {
        if y.0.is_zero() {
            fail!("division by zero");
        }
        let (a, b) = common_scale(&x.0, &y.0);
        Ok(Val::Bool(a.mod_floor(&b).is_zero()))
    }
}

builtin! {
    /// `Abs(-2.5)` → `2.5`; `Abs(-3)` → `3`.
    fn abs(_, "math.Abs", x: Num) {
        Ok(from_decimal(x.0.abs()))
    }
}

builtin! {
    /// `Copysign(3, -1)` → `-3`.
    fn copysign(_, "math.Copysign", x: Num, y: Num) {
        let m = x.0.abs();
        Ok(from_decimal(if y.0.is_negative() { -m } else { m }))
    }
}

builtin! {
    /// `Dim(5, 3)` → `2`; `Dim(3, 5)` → `0`.
    fn dim(_, "math.Dim", x: Num, y: Num) {
        let d = &x.0 - &y.0;
        Ok(from_decimal(if d.is_negative() { BigDecimal::zero() } else { d }))
    }
}

builtin! {
    /// `Signbit(-0.5)` → `true`.
    fn signbit(_, "math.Signbit", x: Num) {
        Ok(Val::Bool(x.0.is_negative()))
    }
}

builtin! {
    /// `Cbrt(27)` → `3`.
    fn cbrt(_, "math.Cbrt", x: Num) {
        if x.0.is_zero() {
            return Ok(Val::Int(0.into()));
        }
        let neg = x.0.is_negative();
        let a = x.0.abs();
        let guess: f64 = f64_of(&Num(a.clone()))?.cbrt();
        let mut y = match float_val(guess)? {
            Val::Float(d) => d,
            _ => BigDecimal::one(),
        };
        for _ in 0..12 {
            let y2 = work(&y * &y);
            y = work(work(&y * BigDecimal::from(2) + work(&a / y2)) / BigDecimal::from(3));
        }
        Ok(apd_result(if neg { -y } else { y }))
    }
}

builtin! {
    /// `Exp(0)` → `1`.
    fn exp(_, "math.Exp", x: Num) {
        exp_dec(&x.0).map(apd_result).ok_or_else(|| BuiltinError::new("math.Exp: result out of range"))
    }
}

/// `base ** y` exactly for an integral `y` (negative powers rounded to 34 digits).
fn int_pow(base: &BigDecimal, y: &BigInt) -> Result<Val, BuiltinError> {
    let Some(e) = y.abs().to_u32().filter(|e| *e <= 100_000) else {
        fail!("math.Pow: exponent {y} too large");
    };
    let digits = base.digits().saturating_mul(u64::from(e));
    if digits > 1_000_000 {
        fail!("math.Pow: result too large");
    }
    let mut acc = BigDecimal::one();
    let mut b = base.clone();
    let mut k = e;
    while k > 0 {
        if k & 1 == 1 {
            acc *= &b;
        }
        k >>= 1;
        if k > 0 {
            b = &b * &b;
        }
    }
    if y.is_negative() {
        if acc.is_zero() {
            fail!("math.Pow: division by zero");
        }
        let prec = std::num::NonZeroU64::new(34).unwrap_or(std::num::NonZeroU64::MIN);
        acc = (BigDecimal::one() / acc).with_precision_round(prec, RoundingMode::HalfUp);
        acc = acc.normalized();
    }
    Ok(from_decimal(acc))
}

builtin! {
    /// `Exp2(10)` → `1024`.
    fn exp2(_, "math.Exp2", x: Num) {
        if crate::data::num::is_integral(&x.0) {
            return int_pow(&BigDecimal::from(2), &to_bigint(&x.0));
        }
        exp_dec(&work(&x.0 * ln2())).map(apd_result).ok_or_else(|| BuiltinError::new("math.Exp2: result out of range"))
    }
}

builtin! {
    /// `Pow(2, 10)` → `1024`; `Pow(1.5, 2)` → `2.25`; `Pow(4, 0.5)` → `2`.
    fn pow(_, "math.Pow", x: Num, y: Num) {
        if crate::data::num::is_integral(&y.0) {
            return int_pow(&x.0, &to_bigint(&y.0));
        }
        if x.0.is_zero() {
            if y.0.is_positive() {
                return Ok(Val::Int(0.into()));
            }
            fail!("math.Pow: division by zero");
        }
        if x.0.is_negative() {
            fail!("math.Pow: negative base {} with a non-integral exponent {}", x.0, y.0);
        }
        exp_dec(&work(&y.0 * ln(&x.0))).map(apd_result).ok_or_else(|| BuiltinError::new("math.Pow: result out of range"))
    }
}

builtin! {
    /// `Log(1)` → `0`.
    fn log(_, "math.Log", x: Num) {
        need_positive(&x, "math.Log")?;
        Ok(apd_result(ln(&x.0)))
    }
}

builtin! {
    /// `Log10(1000)` → `3`.
    fn log10(_, "math.Log10", x: Num) {
        need_positive(&x, "math.Log10")?;
        Ok(apd_result(work(ln(&x.0) / ln10())))
    }
}

builtin! {
    /// `Log2(8)` → `3`.
    fn log2(_, "math.Log2", x: Num) {
        need_positive(&x, "math.Log2")?;
        // Upstream divides the 34-digit logarithms: Ln(x) / Ln(2), each rounded.
        Ok(apd_result(work(round34(&ln(&x.0)) / round34(&ln2()))))
    }
}

macro_rules! float_fn {
    ($f:ident, $full:literal, $doc:literal, |$x:ident| $e:expr) => {
        builtin! {
            #[doc = $doc]
            fn $f(_, $full, a: Num) {
                let $x = f64_of(&a)?;
                float_result($e)
            }
        }
    };
}

float_fn!(acosh, "math.Acosh", "`Acosh(1)` → `0.0`.", |x| x.acosh());
float_fn!(asin, "math.Asin", "`Asin(0)` → `0.0`.", |x| x.asin());
float_fn!(acos, "math.Acos", "`Acos(1)` → `0.0`.", |x| x.acos());
float_fn!(asinh, "math.Asinh", "`Asinh(0)` → `0.0`.", |x| x.asinh());
float_fn!(atan, "math.Atan", "`Atan(0)` → `0.0`.", |x| x.atan());
float_fn!(atanh, "math.Atanh", "`Atanh(0)` → `0.0`.", |x| x.atanh());
float_fn!(expm1, "math.Expm1", "`Expm1(0)` → `0.0`.", |x| x.exp_m1());
float_fn!(log1p, "math.Log1p", "`Log1p(0)` → `0.0`.", |x| x.ln_1p());
float_fn!(cos, "math.Cos", "`Cos(0)` → `1.0`.", |x| x.cos());
float_fn!(sin, "math.Sin", "`Sin(0)` → `0.0`.", |x| x.sin());
float_fn!(sinh, "math.Sinh", "`Sinh(0)` → `0.0`.", |x| x.sinh());
float_fn!(cosh, "math.Cosh", "`Cosh(0)` → `1.0`.", |x| x.cosh());
float_fn!(
    sqrt,
    "math.Sqrt",
    "`Sqrt(2.25)` → `1.5`; `Sqrt(-1)` is an error.",
    |x| x.sqrt()
);
float_fn!(tan, "math.Tan", "`Tan(0)` → `0.0`.", |x| x.tan());
float_fn!(tanh, "math.Tanh", "`Tanh(0)` → `0.0`.", |x| x.tanh());

/// Go's `math.Logb`/`Ilogb` exponent: `floor(log2(|x|))`, exact for powers of two.
fn binary_exponent(x: f64) -> Result<i64, BuiltinError> {
    if x == 0.0 {
        fail!("argument must be non-zero");
    }
    let bits = x.abs().to_bits();
    let exp = ((bits >> 52) & 0x7FF) as i64;
    if exp == 0 {
        // Subnormal: normalise by the leading zeros of the mantissa.
        let mant = bits & ((1u64 << 52) - 1);
        return Ok(-1022 - (i64::from(mant.leading_zeros()) - 12) - 1);
    }
    Ok(exp - 1023)
}

builtin! {
    /// `Logb(8)` → `3.0`.
    fn logb(_, "math.Logb", x: Num) {
        float_result(binary_exponent(f64_of(&x)?)? as f64)
    }
}

builtin! {
    /// `Ilogb(8)` → `3`.
    fn ilogb(_, "math.Ilogb", x: Num) {
        Ok(Val::Int(binary_exponent(f64_of(&x)?)?.into()))
    }
}

builtin! {
    /// `Atan2(0, 1)` → `0.0`.
    fn atan2(_, "math.Atan2", y: Num, x: Num) {
        float_result(f64_of(&y)?.atan2(f64_of(&x)?))
    }
}

builtin! {
    /// `Hypot(3, 4)` → `5.0`.
    fn hypot(_, "math.Hypot", p: Num, q: Num) {
        float_result(f64_of(&p)?.hypot(f64_of(&q)?))
    }
}

builtin! {
    /// `Ldexp(0.5, 3)` → `4.0`.
    fn ldexp(_, "math.Ldexp", frac: Num, e: i64) {
        let e = i32::try_from(e.clamp(-2000, 2000)).unwrap_or(0);
        float_result(f64_of(&frac)? * 2f64.powi(e))
    }
}

builtin! {
    /// `Mod(7, 3)` → `1.0`; `Mod(-7, 3)` → `-1.0` (the sign of `x`, like Go's `math.Mod`).
    fn mod_(_, "math.Mod", x: Num, y: Num) {
        float_result(f64_of(&x)? % f64_of(&y)?)
    }
}

builtin! {
    /// `Remainder(7, 4)` → `-1.0` (IEEE 754: the quotient rounds to even).
    fn remainder(_, "math.Remainder", x: Num, y: Num) {
        let (x, y) = (f64_of(&x)?, f64_of(&y)?);
        if y == 0.0 {
            fail!("result NaN is not a finite number");
        }
        let n = (x / y).round_ties_even();
        float_result(x - n * y)
    }
}

builtin! {
    /// `Pow10(3)` → `1000.0`.
    fn pow10(_, "math.Pow10", n: i64) {
        let n = i32::try_from(n).map_err(|_| BuiltinError::new(format!("int {n} overflows int32")))?;
        float_result(10f64.powi(n))
    }
}

builtin! {
    /// `Jacobi(2, 7)` → `1`; `y` must be odd.
    fn jacobi(_, "math.Jacobi", x: &BigInt, y: &BigInt) {
        if y.is_even() {
            fail!("big: invalid 2nd argument to Int.Jacobi: need odd integer but got {y}");
        }
        let mut a = x.clone();
        let mut b = y.clone();
        let mut j = 1i32;
        if b.is_negative() {
            if a.is_negative() {
                j = -1;
            }
            b = -b;
        }
        a = a.mod_floor(&b);
        let eight = BigInt::from(8);
        while !a.is_zero() {
            while a.is_even() {
                a >>= 1;
                let r = b.mod_floor(&eight);
                if r == BigInt::from(3) || r == BigInt::from(5) {
                    j = -j;
                }
            }
            std::mem::swap(&mut a, &mut b);
            if a.mod_floor(&BigInt::from(4)) == BigInt::from(3) && b.mod_floor(&BigInt::from(4)) == BigInt::from(3) {
                j = -j;
            }
            a = a.mod_floor(&b);
        }
        Ok(Val::Int(if b.is_one() { j.into() } else { 0.into() }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_const, check_table};

    #[test]
    fn table() {
        check_table(
            "math",
            &[
                ("Jacobi(2, 7)", "1"),
                ("Jacobi(3, 7)", "-1"),
                ("Jacobi(7, 7)", "0"),
                ("Jacobi(1, 2)", "!need odd integer"),
                ("Floor(-1.5)", "-2"),
                ("Floor(3)", "3"),
                ("Ceil(1.2)", "2"),
                ("Trunc(-1.7)", "-1"),
                ("Round(2.5)", "3"),
                ("Round(-2.5)", "-3"),
                ("Round(2.4999)", "2"),
                (
                    r#"Round("x")"#,
                    "!invalid argument 0 to math.Round: expected number, found string",
                ),
                ("RoundToEven(2.5)", "2"),
                ("RoundToEven(3.5)", "4"),
                ("MultipleOf(15, 5)", "true"),
                ("MultipleOf(55, 5)", "true"),
                ("MultipleOf(16, 5)", "false"),
                ("MultipleOf(1.5, 0.5)", "true"),
                ("MultipleOf(1, 0)", "!division by zero"),
                ("Abs(-2.5)", "2.5"),
                ("Abs(-3)", "3"),
                ("Acosh(1)", "0"),
                ("Asin(0)", "0"),
                ("Acos(1)", "0"),
                ("Asinh(0)", "0"),
                ("Atan(0)", "0"),
                ("Atan2(0, 1)", "0"),
                ("Atanh(0)", "0"),
                ("Cbrt(27)", "3"),
                ("Copysign(3, -1)", "-3"),
                ("Dim(5, 3)", "2"),
                ("Dim(3, 5)", "0"),
                ("Exp(0)", "1"),
                ("Exp2(10)", "1024"),
                ("Exp2(-1)", "0.5"),
                ("Expm1(0)", "0"),
                ("Hypot(3, 4)", "5"),
                ("Ldexp(0.5, 3)", "4"),
                ("Log(1)", "0"),
                ("Log(0)", "!must be positive"),
                ("Log10(1000)", "3"),
                ("Log2(8)", "3"),
                ("Log1p(0)", "0"),
                ("Logb(8)", "3"),
                ("Ilogb(8)", "3"),
                ("Ilogb(0.75)", "-1"),
                ("Mod(7, 3)", "1"),
                ("Mod(-7, 3)", "-1"),
                ("Mod(7, 0)", "!not a finite number"),
                ("Pow(2, 10)", "1024"),
                ("Pow(1.5, 2)", "2.25"),
                ("Pow(2, -2)", "0.25"),
                ("Pow(4, 0.5)", "2"),
                ("Pow(-8, 0.5)", "!negative base"),
                // From upstream's pkg/math testdata (conformance pkg-math-gen).
                (
                    "Floor(3.14159265358979323846264338327950288419716939937510582097494459)",
                    "3",
                ),
                ("Jacobi(1000, 201)", "1"),
                ("Pow(8, 4)", "4096"),
                ("Pow10(4)", "10000"),
                ("Abs(-2.2)", "2.2"),
                ("Cbrt(2)", "1.259921049894873164767210607278228"),
                ("Cbrt(-3.375)", "-1.5"),
                ("Copysign(5, -2.2)", "-5"),
                ("Exp(3)", "20.08553692318766774092852965458172"),
                ("Exp2(3.5)", "11.31370849898476039041350979367758"),
                ("Log(4)", "1.386294361119890618834464242916353"),
                ("Log10(4)", "0.6020599913279623904274777894489861"),
                ("Log2(5)", "2.321928094887362347870319429489391"),
                ("Dim(3, 2.5)", "0.5"),
                ("Dim(5, 7.2)", "0"),
                ("Asin(2.0e400)", "!out of range for float64"),
                ("Pow(0, -1)", "!division by zero"),
                ("Pow10(3)", "1000"),
                ("Remainder(7, 4)", "-1"),
                ("Remainder(5, 2)", "1"),
                ("Signbit(-0.5)", "true"),
                ("Signbit(1)", "false"),
                ("Cos(0)", "1"),
                ("Sin(0)", "0"),
                ("Sinh(0)", "0"),
                ("Cosh(0)", "1"),
                ("Sqrt(2.25)", "1.5"),
                ("Sqrt(-1)", "!not a finite number"),
                ("Tan(0)", "0"),
                ("Tanh(0)", "0"),
            ],
        );
        check_const(
            "math",
            "Pi",
            "3.14159265358979323846264338327950288419716939937510582097494459",
        );
        check_const("math", "MaxBase", "62");
        check_const("math", "Below", "-1");
    }
}
