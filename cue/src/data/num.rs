//! Number helpers shared by the parser, the evaluator, export and the packages: the exponent
//! bound, decimal conversion and CUE's number formatting.
//!
//! Rules:
//! - A float's adjusted exponent (that of its most significant digit) is within
//!   ±[`MAX_EXPONENT`] (apd's `MaxExponent`, which CUE uses): a number literal beyond it is a
//!   syntax error, an arithmetic result beyond it an evaluation error.
//! - A computed decimal is returned as an int when it is integral (upstream converts an
//!   `*apd.Decimal` result with `RoundToIntegralExact`), else as a float.
//! - [`format_float`] is the one float formatter of the crate: export (JSON and YAML),
//!   `encoding/json`, `encoding/yaml`, interpolation and messages all use it. Upstream writes
//!   every one of these with apd's `Decimal.String` (`cue.Value.MarshalJSON` appends
//!   `X.Append(b, 'G')`; `cue export --out yaml` and `yaml.Marshal` format the exported literal,
//!   `X.String()`; interpolation is `OpContext.ToString`, `X.String()`), so there is no mode:
//!   plain notation when the exponent is `<= 0` and the adjusted exponent is `>= -6`
//!   (`1.0`, `0.000001`, `100.50`), otherwise `d.dddE±n` with an upper-case `E` (`1E+30`,
//!   `1.5E+10`, `1E-7`; upstream's script test `import_yaml_numbers` expects `1.23456E+6`).
//!   One deviation, written down: a float whose text would read as an integer (exponent 0,
//!   `1e0`, `100.`) gets `.0`, because this evaluator's decimals do not keep apd's exponent
//!   exactly and a float must stay a float when the output is read back.

use super::Val;
use bigdecimal::BigDecimal;
use num_bigint::{BigInt, Sign};
use num_traits::{Signed, Zero};

/// The largest decimal exponent a float may have (apd's `MaxExponent`, which CUE uses); beyond
/// it a value is an error, which also bounds the cost of aligning operands.
pub const MAX_EXPONENT: i64 = 100_000;

/// The exponent of the most significant digit (`1.5E+3` → 3; zero → 0).
pub fn adjusted_exponent(d: &BigDecimal) -> i64 {
    let (m, scale) = d.as_bigint_and_exponent();
    if m.is_zero() {
        return 0;
    }
    d.digits() as i64 - 1 - scale
}

/// `true` if `d`'s exponent is within ±[`MAX_EXPONENT`].
pub fn exponent_in_range(d: &BigDecimal) -> bool {
    (-MAX_EXPONENT..=MAX_EXPONENT).contains(&adjusted_exponent(d))
}

/// An int or float value as a decimal; `None` for other kinds.
pub fn to_decimal(v: &Val) -> Option<BigDecimal> {
    match v {
        Val::Int(i) => Some(BigDecimal::from(i.clone())),
        Val::Float(f) => Some(f.clone()),
        _ => None,
    }
}

/// `true` if `d` has no fractional part.
pub fn is_integral(d: &BigDecimal) -> bool {
    let (m, scale) = d.as_bigint_and_exponent();
    if scale <= 0 {
        return true;
    }
    let ten = BigInt::from(10u8);
    let div = num_traits::pow(
        ten,
        usize::try_from(scale).unwrap_or(usize::MAX).min(100_000),
    );
    (&m % &div).is_zero()
}

/// The integer value of an integral decimal (truncating otherwise).
pub fn to_bigint(d: &BigDecimal) -> BigInt {
    let (m, scale) = d.as_bigint_and_exponent();
    if scale <= 0 {
        let e = usize::try_from(-scale).unwrap_or(0).min(100_000);
        m * num_traits::pow(BigInt::from(10u8), e)
    } else {
        let e = usize::try_from(scale).unwrap_or(0).min(100_000);
        m / num_traits::pow(BigInt::from(10u8), e)
    }
}

/// A computed number: an int when integral, else a float.
pub fn from_decimal(d: BigDecimal) -> Val {
    if is_integral(&d) {
        Val::Int(to_bigint(&d))
    } else {
        Val::Float(d)
    }
}

/// Formats a float as CUE writes it (see the module rules): apd's `Decimal.String`, with `.0`
/// added when that text would read as an integer.
pub fn format_float(d: &BigDecimal) -> String {
    let mut s = apd_string(d);
    if !s.contains(['.', 'E']) {
        s.push_str(".0");
    }
    s
}

/// apd's `Decimal.String` (the General Decimal Arithmetic "to-scientific-string").
fn apd_string(d: &BigDecimal) -> String {
    let (m, scale) = d.as_bigint_and_exponent();
    let neg = m.sign() == Sign::Minus;
    let digits = m.abs().to_string();
    let exp = -scale;
    let n = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let adjusted = exp.saturating_add(n - 1);
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if exp <= 0 && adjusted >= -6 {
        if exp == 0 {
            out.push_str(&digits);
        } else {
            let point = n + exp;
            if point <= 0 {
                out.push_str("0.");
                for _ in 0..(-point) {
                    out.push('0');
                }
                out.push_str(&digits);
            } else {
                let p = usize::try_from(point).unwrap_or(0);
                out.push_str(&digits[..p]);
                out.push('.');
                out.push_str(&digits[p..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('E');
        if adjusted >= 0 {
            out.push('+');
        }
        out.push_str(&adjusted.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> BigDecimal {
        s.parse().unwrap()
    }

    #[test]
    fn formats_like_apd() {
        for (input, want) in [
            ("1.0", "1.0"),
            ("1e30", "1E+30"),
            ("1.5e10", "1.5E+10"),
            ("0.000001", "0.000001"),
            ("1e-7", "1E-7"),
            ("-2.50", "-2.50"),
            ("123.456", "123.456"),
            ("0.5", "0.5"),
            ("100", "100"),
        ] {
            assert_eq!(apd_string(&d(input)), want, "{input}");
        }
        // A float stays recognisable as one.
        for (input, want) in [
            ("100", "100.0"),
            ("1e30", "1E+30"),
            ("1e-7", "1E-7"),
            ("0.0000010", "0.0000010"),
            ("-3", "-3.0"),
        ] {
            assert_eq!(format_float(&d(input)), want, "{input}");
        }
    }

    #[test]
    fn integral_results_become_ints() {
        assert_eq!(from_decimal(d("3.00")), Val::Int(3.into()));
        assert_eq!(from_decimal(d("1e3")), Val::Int(1000.into()));
        assert_eq!(from_decimal(d("1.5")), Val::Float(d("1.5")));
    }
}
