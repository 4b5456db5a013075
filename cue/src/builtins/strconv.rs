//! Package `strconv` (upstream `pkg/strconv`, Go's `strconv`): conversions between numbers,
//! booleans and their string forms, and Go string quoting.
//!
//! Rules:
//! - Errors use Go's text: `strconv.Atoi: parsing "x": invalid syntax`, `... value out of range`.
//! - `ParseInt`/`ParseUint`/`Atoi` read like `math/big`'s `SetString` (upstream's since v0.15):
//!   an optional sign, base 0 (prefixes `0x`, `0o`, `0b`, `0`, and `_` separators) or bases
//!   2–62 (above 36, `a-z` are 10–35 and `A-Z` 36–61), into an unlimited int; `bitSize` 0 keeps
//!   the full precision, a positive one requires the value to fit a signed (unsigned) int of that
//!   many bits, a negative one is a range error; a negative `ParseUint` is a range error; `Atoi`
//!   is `ParseInt(s, 10, 0)`.
//! - `FormatInt`/`FormatUint` take arbitrarily large ints of either sign (CUE passes a
//!   `*big.Int`) and bases 2–62 (`big.Int.Text`).
//! - `ParseNumber` reads one CUE number literal with an optional sign (spec "Numeric literals":
//!   prefixes, `_` only between digits, fractions, exponents, multipliers `K`…`Pi`); an integral
//!   result is an int.
//! - `ParseFloat` goes through an IEEE double like Go and returns the shortest decimal that round
//!   trips (`"100"` gives `1E+2`, as upstream's `apd.SetFloat64`); infinities and NaN are errors
//!   because CUE numbers cannot hold them.
//! - `FormatFloat(f, fmt, prec, bitSize)` implements Go's `'e'`, `'E'`, `'f'`, `'g'`, `'G'`
//!   formats; `fmt` is a byte given as an int (`102`) or a one-character string (`"f"`).
//! - Quoting follows Go's `strconv.Quote`. Go's `unicode.IsPrint` is approximated: control
//!   characters, non-ASCII spaces, private-use and the common format characters (soft hyphen,
//!   zero-width and bidi marks, BOM) are treated as non-printable.

use super::args::{builtin, fail, Num};
use super::{no_consts, Builtin, BuiltinError, Package, Val};
use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

const P: &str = "strconv";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts,
};

fn consts(name: &str) -> Option<Val> {
    match name {
        "IntSize" => Some(Val::Int(64.into())),
        _ => no_consts(name),
    }
}

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Unquote", 1, unquote),
    Builtin::v(P, "ParseBool", 1, parse_bool),
    Builtin::f(P, "ParseFloat", 2, parse_float),
    Builtin::f(P, "ParseNumber", 1, parse_number),
    Builtin::f(P, "ParseUint", 3, parse_uint),
    Builtin::f(P, "ParseInt", 3, parse_int),
    Builtin::f(P, "Atoi", 1, atoi),
    Builtin::f(P, "FormatBool", 1, format_bool),
    Builtin::f(P, "FormatFloat", 4, format_float),
    Builtin::f(P, "FormatUint", 2, format_uint),
    Builtin::f(P, "FormatInt", 2, format_int),
    Builtin::f(P, "Itoa", 1, itoa),
    Builtin::f(P, "Quote", 1, quote),
    Builtin::f(P, "QuoteToASCII", 1, quote_to_ascii),
    Builtin::f(P, "QuoteToGraphic", 1, quote_to_graphic),
    Builtin::f(P, "QuoteRune", 1, quote_rune),
    Builtin::f(P, "QuoteRuneToASCII", 1, quote_rune_to_ascii),
    Builtin::f(P, "QuoteRuneToGraphic", 1, quote_rune_to_graphic),
    Builtin::v(P, "IsPrint", 1, is_print),
    Builtin::v(P, "IsGraphic", 1, is_graphic),
    Builtin::v(P, "CanBackquote", 1, can_backquote),
];

fn syntax(func: &str, s: &str) -> BuiltinError {
    BuiltinError::new(format!(
        "strconv.{func}: parsing {}: invalid syntax",
        go_quote(s, false)
    ))
}

fn range_err(func: &str, s: &str) -> BuiltinError {
    BuiltinError::new(format!(
        "strconv.{func}: parsing {}: value out of range",
        go_quote(s, false)
    ))
}

/// The value of digit `c` in `base` as `math/big` reads it: `0-9`, then letters
/// case-insensitively up to base 36, and `a-z` (10–35) before `A-Z` (36–61) above it.
fn digit(c: u8, base: u32) -> Option<u32> {
    let d = match c {
        b'0'..=b'9' => u32::from(c - b'0'),
        b'a'..=b'z' => u32::from(c - b'a') + 10,
        b'A'..=b'Z' if base <= 36 => u32::from(c - b'A') + 10,
        b'A'..=b'Z' => u32::from(c - b'A') + 36,
        _ => return None,
    };
    (d < base).then_some(d)
}

/// Parses `s` the way `math/big`'s `Int.SetString(s, base)` does (upstream's `ParseInt` and
/// `ParseUint` call it): an optional sign, then digits of `base` 2–62; for base 0 the prefix
/// picks the base (`0x`, `0o`, `0b`, a plain `0` for octal, else 10) and `_` may separate
/// digits (or a prefix and a digit). `None` is a syntax error.
fn parse_big(s: &str, base: i64) -> Option<BigInt> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits, seps) = match base {
        0 => match lower.as_deref() {
            Some("0x") => (16, &body[2..], true),
            Some("0o") => (8, &body[2..], true),
            Some("0b") => (2, &body[2..], true),
            _ if body.len() > 1 && body.starts_with('0') => (8, &body[1..], true),
            _ => (10, body, true),
        },
        2..=62 => (base as u32, body, false),
        _ => return None,
    };
    // With a prefix, a `_` may also follow the prefix directly (`0x_1`).
    let prefixed = digits.len() < body.len();
    let mut v = BigInt::zero();
    let mut any = false;
    let mut prev_sep = !prefixed;
    for &c in digits.as_bytes() {
        if c == b'_' && seps {
            if prev_sep {
                return None;
            }
            prev_sep = true;
            continue;
        }
        v = v * radix + digit(c, radix)?;
        any = true;
        prev_sep = false;
    }
    if !any || prev_sep {
        return None;
    }
    Some(if neg { -v } else { v })
}

/// Upstream's bit-size rule: a negative size is a range error, 0 is unlimited precision, and
/// otherwise the value must fit a signed (`signed`) or unsigned integer of that many bits.
fn fits(v: &BigInt, bit_size: i64, signed: bool) -> bool {
    let Ok(n) = u64::try_from(bit_size) else {
        return false;
    };
    if !signed && v.is_negative() {
        return false;
    }
    if n == 0 {
        return true;
    }
    if !signed {
        return v.bits() <= n;
    }
    let limit = BigInt::from(1) << (n - 1);
    *v < limit && *v >= -limit
}

fn parse_checked(
    func: &str,
    s: &str,
    base: i64,
    bit_size: i64,
    signed: bool,
) -> Result<Val, BuiltinError> {
    if bit_size < 0 {
        return Err(range_err(func, s));
    }
    let v = parse_big(s, base).ok_or_else(|| syntax(func, s))?;
    if !fits(&v, bit_size, signed) {
        return Err(range_err(func, s));
    }
    Ok(Val::Int(v))
}

builtin! {
    /// `ParseInt("-0x1F", 0, 64)` → `-31`; `ParseInt("128", 10, 8)` is out of range;
    /// `ParseInt("1e40", 0, 0)` is a syntax error; bit size 0 is unlimited.
    fn parse_int(_, "strconv.ParseInt", s: &str, base: i64, bit_size: i64) {
        parse_checked("ParseInt", s, base, bit_size, true)
    }
}

builtin! {
    /// `ParseUint("255", 10, 8)` → `255`; a negative value is out of range.
    fn parse_uint(_, "strconv.ParseUint", s: &str, base: i64, bit_size: i64) {
        parse_checked("ParseUint", s, base, bit_size, false)
    }
}

builtin! {
    /// `Atoi("-42")` → `-42`; `Atoi("x")` is `strconv.Atoi: parsing "x": invalid syntax`.
    fn atoi(_, "strconv.Atoi", s: &str) {
        // Upstream's Atoi is ParseInt(s, 10, 0) (unlimited) with the function name changed.
        parse_checked("Atoi", s, 10, 0, true)
    }
}

builtin! {
    /// `Itoa(42)` → `"42"`.
    fn itoa(_, "strconv.Itoa", i: &BigInt) {
        if i.to_i64().is_none() {
            fail!("int {i} overflows int");
        }
        Ok(Val::String(i.to_string()))
    }
}

builtin! {
    /// `ParseBool("T")` → `true`.
    fn parse_bool(_, "strconv.ParseBool", s: &str) {
        match s {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Val::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Val::Bool(false)),
            _ => Err(syntax("ParseBool", s)),
        }
    }
}

builtin! {
    /// `FormatBool(true)` → `"true"`.
    fn format_bool(_, "strconv.FormatBool", b: bool) {
        Ok(Val::String(b.to_string()))
    }
}

/// Checks `s` against the CUE number-literal grammar (spec "Numeric literals"), as upstream's
/// `literal.ParseNum`: an optional sign, then a decimal (`1_000`, `1.5e3`, `.5`, `1.`), a
/// prefixed integer (`0x`, `0o`, `0b`) or a decimal with a multiplier (`1.5Ki`); `_` only
/// between digits. Returns the message of the first violation.
fn check_number(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    // Digits of `radix` with `_` separators; returns whether any digit was read.
    let digits = |i: &mut usize, radix: u32| -> Result<bool, String> {
        let (mut any, mut last_sep) = (false, false);
        while let Some(&c) = b.get(*i) {
            if c == b'_' {
                last_sep = true;
            } else if char::from(c).is_digit(radix) {
                any = true;
                last_sep = false;
            } else {
                break;
            }
            *i += 1;
        }
        if last_sep {
            return Err("illegal '_' in number".into());
        }
        Ok(any)
    };
    let prefix = b.get(i..i + 2).map(|p| p.to_ascii_lowercase());
    if let Some((radix, name)) = match prefix.as_deref() {
        Some(b"0x") => Some((16, "hexadecimal")),
        Some(b"0o") => Some((8, "octal")),
        Some(b"0b") => Some((2, "binary")),
        _ => None,
    } {
        i += 2;
        if !digits(&mut i, radix)? || i < b.len() {
            return Err(format!("illegal {name} number {s:?}"));
        }
        return Ok(());
    }
    let int = digits(&mut i, 10)?;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac = digits(&mut i, 10)?;
        if !int && !frac {
            return Err(format!("illegal fraction {s:?}"));
        }
    } else if !int {
        return Err(format!("invalid number {s:?}"));
    }
    let rest = &s[i..];
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if !digits(&mut i, 10)? {
            return Err("illegal exponent".into());
        }
    } else if ["K", "M", "G", "T", "P"]
        .iter()
        .any(|m| rest == *m || rest.strip_suffix('i') == Some(m))
    {
        i = b.len();
    }
    if i < b.len() {
        return Err(format!("invalid number {s:?}"));
    }
    Ok(())
}

builtin! {
    /// `ParseNumber("0xFF")` → `255`, `ParseNumber("1Ki")` → `1024`, `ParseNumber("-.5")` →
    /// `-0.5`: a CUE number literal with an optional sign; an integral result is an int, as
    /// upstream converts its decimal result.
    fn parse_number(_, "strconv.ParseNumber", s: &str) {
        let fail_with = |msg: String| {
            BuiltinError::new(format!("strconv.ParseNumber: parsing {}: {msg}", go_quote(s, false)))
        };
        check_number(s).map_err(fail_with)?;
        let (neg, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        // A leading-zero integer (`010`) is octal, as in upstream's (legacy) literal reader.
        let digits: String = body.chars().filter(|&c| c != '_').collect();
        if digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|c| c.is_ascii_digit()) {
            let v = BigInt::parse_bytes(&digits.as_bytes()[1..], 8).ok_or_else(|| {
                fail_with(format!("illegal integer number {}", go_quote(s, false)))
            })?;
            return Ok(Val::Int(if neg { -v } else { v }));
        }
        let d = match crate::parser::literal::decode_number(body).map_err(fail_with)? {
            crate::parser::literal::Number::Int(i) => bigdecimal::BigDecimal::from(i),
            crate::parser::literal::Number::Float(f) => f,
        };
        Ok(crate::data::num::from_decimal(if neg { -d } else { d }))
    }
}

fn to_radix(i: &BigInt, base: i64) -> Result<String, BuiltinError> {
    // `big.Int.Text`: bases 2–62, digits `0-9a-zA-Z`.
    const DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let Ok(b @ 2..=62) = u32::try_from(base) else {
        fail!("strconv: illegal AppendInt/FormatInt base");
    };
    if b <= 36 {
        return Ok(i.to_str_radix(b));
    }
    let digits: String = i
        .magnitude()
        .to_radix_be(b)
        .iter()
        .map(|&d| char::from(DIGITS[usize::from(d)]))
        .collect();
    Ok(if i.is_negative() {
        format!("-{digits}")
    } else {
        digits
    })
}

builtin! {
    /// `FormatInt(-255, 16)` → `"-ff"`.
    fn format_int(_, "strconv.FormatInt", i: &BigInt, base: i64) {
        Ok(Val::String(to_radix(i, base)?))
    }
}

builtin! {
    /// `FormatUint(255, 2)` → `"11111111"`.
    fn format_uint(_, "strconv.FormatUint", i: &BigInt, base: i64) {
        // Upstream takes any big int here (`big.Int.Text`), negative ones included.
        Ok(Val::String(to_radix(i, base)?))
    }
}

/// The shortest decimal for `f` as a [`Val::Float`], the way apd's `SetFloat64` builds it.
pub(crate) fn float_val(f: f64) -> Result<Val, BuiltinError> {
    if !f.is_finite() {
        fail!("value {f} cannot be represented as a CUE number");
    }
    let text = format!("{f:e}");
    text.parse::<bigdecimal::BigDecimal>()
        .map(Val::Float)
        .map_err(|e| BuiltinError::new(e.to_string()))
}

builtin! {
    /// `ParseFloat("1.5", 64)` → `1.5`; `ParseFloat("x", 64)` is an error.
    fn parse_float(_, "strconv.ParseFloat", s: &str, bit_size: i64) {
        let clean: String = s.chars().filter(|&c| c != '_').collect();
        let lower = clean.to_ascii_lowercase();
        let body = lower.trim_start_matches(['+', '-']);
        if body.starts_with("inf") || body.starts_with("nan") || body.is_empty() {
            if matches!(body, "inf" | "infinity" | "nan") {
                fail!("strconv.ParseFloat: parsing {}: value cannot be represented as a CUE number", go_quote(s, false));
            }
            return Err(syntax("ParseFloat", s));
        }
        if !body.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-')) {
            return Err(syntax("ParseFloat", s));
        }
        let f: f64 = clean.parse().map_err(|_| syntax("ParseFloat", s))?;
        if f.is_infinite() {
            return Err(range_err("ParseFloat", s));
        }
        let f = if bit_size == 32 { f64::from(f as f32) } else { f };
        float_val(f)
    }
}

/// Decimal digits (no trailing zeros) and decimal point position of `f`, rounded to `prec`
/// significant digits, or the shortest round-trip digits when `prec` is `None`.
fn digits(f: f64, prec: Option<usize>) -> (String, i64) {
    let text = match prec {
        Some(p) => format!("{:.*e}", p.saturating_sub(1), f.abs()),
        None => format!("{:e}", f.abs()),
    };
    let (mant, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let mut d: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    while d.len() > 1 && d.ends_with('0') {
        d.pop();
    }
    if d == "0" {
        return (String::new(), 0);
    }
    (d, exp + 1)
}

fn fmt_e(neg: bool, d: &str, dp: i64, prec: usize, e: char) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let first = d.chars().next().unwrap_or('0');
    out.push(first);
    if prec > 0 {
        out.push('.');
        let rest: String = d
            .chars()
            .skip(1)
            .chain(std::iter::repeat('0'))
            .take(prec)
            .collect();
        out.push_str(&rest);
    }
    out.push(e);
    let exp = if d.is_empty() { 0 } else { dp - 1 };
    out.push(if exp < 0 { '-' } else { '+' });
    let a = exp.abs();
    if a < 10 {
        out.push('0');
    }
    out.push_str(&a.to_string());
    out
}

fn fmt_f(neg: bool, d: &str, dp: i64, prec: usize) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let digit = |i: i64| -> char {
        if i >= 0 && (i as usize) < d.len() {
            d.as_bytes()[i as usize] as char
        } else {
            '0'
        }
    };
    if dp > 0 {
        for i in 0..dp {
            out.push(digit(i));
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 0..prec as i64 {
            out.push(digit(dp + i));
        }
    }
    out
}

/// Go's `strconv.FormatFloat` for the formats e, E, f, g, G.
pub(crate) fn go_format_float(f: f64, fmt: char, prec: i64) -> Result<String, BuiltinError> {
    if f.is_nan() {
        return Ok("NaN".into());
    }
    if f.is_infinite() {
        return Ok(if f > 0.0 { "+Inf" } else { "-Inf" }.into());
    }
    let neg = f.is_sign_negative();
    let shortest = prec < 0;
    match fmt {
        'e' | 'E' => {
            let (d, dp) = digits(
                f,
                if shortest {
                    None
                } else {
                    Some(prec as usize + 1)
                },
            );
            let p = if shortest {
                d.len().saturating_sub(1)
            } else {
                prec as usize
            };
            Ok(fmt_e(neg, &d, dp, p, fmt))
        }
        'f' => {
            if shortest {
                let (d, dp) = digits(f, None);
                let p = (d.len() as i64 - dp).max(0) as usize;
                Ok(fmt_f(neg, &d, dp, p))
            } else {
                Ok(format!("{:.*}", prec as usize, f))
            }
        }
        'g' | 'G' => {
            let e = if fmt == 'g' { 'e' } else { 'E' };
            let (d, dp) = if shortest {
                digits(f, None)
            } else {
                digits(f, Some(if prec == 0 { 1 } else { prec as usize }))
            };
            let nd = d.len() as i64;
            let mut prec = if shortest {
                nd
            } else if prec == 0 {
                1
            } else {
                prec
            };
            let mut eprec = prec;
            if eprec > nd && nd >= dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = dp - 1;
            if exp < -4 || exp >= eprec {
                if prec > nd {
                    prec = nd;
                }
                return Ok(fmt_e(neg, &d, dp, (prec - 1).max(0) as usize, e));
            }
            if prec > dp {
                prec = nd;
            }
            Ok(fmt_f(neg, &d, dp, (prec - dp).max(0) as usize))
        }
        other => Ok(format!("%{other}")),
    }
}

builtin! {
    /// `FormatFloat(3.25, "f", 1, 64)` → `"3.2"`; `FormatFloat(1e21, "g", -1, 64)` → `"1e+21"`.
    fn format_float(_, "strconv.FormatFloat", x: Num, fmt: &Val, prec: i64, bit_size: i64) {
        let fmt = match fmt {
            Val::Int(i) => i.to_u8().map(char::from),
            Val::String(s) if s.len() == 1 => s.chars().next(),
            _ => None,
        };
        let Some(fmt) = fmt else {
            fail!("invalid argument 1 to strconv.FormatFloat: expected a format byte such as \"f\"");
        };
        let f: f64 = x.0.to_string().parse().unwrap_or(f64::NAN);
        let f = if bit_size == 32 { f64::from(f as f32) } else { f };
        Ok(Val::String(go_format_float(f, fmt, prec)?))
    }
}

/// Approximates Go's `unicode.IsPrint`.
pub(crate) fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c,
        '\u{AD}' | '\u{600}'..='\u{605}' | '\u{61C}' | '\u{6DD}' | '\u{70F}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}'
        | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{E000}'..='\u{F8FF}'
        | '\u{F0000}'..='\u{10FFFF}' | '\u{FFFE}' | '\u{FFFF}' | '\u{E0001}'..='\u{E007F}')
}

/// Approximates Go's `unicode.IsGraphic` (printable or a Unicode space).
fn is_graphic_char(c: char) -> bool {
    is_printable(c)
        || (c.is_whitespace() && !c.is_control() && !matches!(c, '\u{2028}' | '\u{2029}'))
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    Ascii,
    Graphic,
}

fn quote_char(out: &mut String, c: char, q: char, mode: Mode) {
    if c == q || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    let keep = match mode {
        Mode::Ascii => c.is_ascii() && is_printable(c),
        Mode::Plain => is_printable(c),
        Mode::Graphic => is_graphic_char(c),
    };
    if keep {
        out.push(c);
        return;
    }
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{C}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{B}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c == '\u{7F}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push_str(&format!("\\U{:08x}", c as u32)),
    }
}

/// Go's `strconv.Quote` (or `QuoteToASCII` when `ascii`).
pub(crate) fn go_quote(s: &str, ascii: bool) -> String {
    quote_with(s, '"', if ascii { Mode::Ascii } else { Mode::Plain })
}

fn quote_with(s: &str, q: char, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        quote_char(&mut out, c, q, mode);
    }
    out.push(q);
    out
}

builtin! {
    /// `Quote("a\tb\"c")` → `"\"a\\tb\\\"c\""`.
    fn quote(_, "strconv.Quote", s: &str) {
        Ok(Val::String(quote_with(s, '"', Mode::Plain)))
    }
}

builtin! {
    /// `QuoteToASCII("é")` → `"\"\\u00e9\""`.
    fn quote_to_ascii(_, "strconv.QuoteToASCII", s: &str) {
        Ok(Val::String(quote_with(s, '"', Mode::Ascii)))
    }
}

builtin! {
    /// `QuoteToGraphic("\u00a0")` → `"\"\u00a0\""`.
    fn quote_to_graphic(_, "strconv.QuoteToGraphic", s: &str) {
        Ok(Val::String(quote_with(s, '"', Mode::Graphic)))
    }
}

fn rune(i: &BigInt) -> char {
    i.to_u32().and_then(char::from_u32).unwrap_or('\u{FFFD}')
}

builtin! {
    /// `QuoteRune(9786)` → `"'☺'"`.
    fn quote_rune(_, "strconv.QuoteRune", r: &BigInt) {
        Ok(Val::String(quote_with(&rune(r).to_string(), '\'', Mode::Plain)))
    }
}

builtin! {
    /// `QuoteRuneToASCII(9786)` → `"'\\u263a'"`.
    fn quote_rune_to_ascii(_, "strconv.QuoteRuneToASCII", r: &BigInt) {
        Ok(Val::String(quote_with(&rune(r).to_string(), '\'', Mode::Ascii)))
    }
}

builtin! {
    /// `QuoteRuneToGraphic(10)` → `"'\\n'"`.
    fn quote_rune_to_graphic(_, "strconv.QuoteRuneToGraphic", r: &BigInt) {
        Ok(Val::String(quote_with(&rune(r).to_string(), '\'', Mode::Graphic)))
    }
}

builtin! {
    /// `IsPrint(9786)` → `true`; `IsPrint(7)` → `false`.
    fn is_print(_, "strconv.IsPrint", r: &BigInt) {
        Ok(Val::Bool(r.to_u32().and_then(char::from_u32).is_some_and(is_printable)))
    }
}

builtin! {
    /// `IsGraphic(160)` → `true`.
    fn is_graphic(_, "strconv.IsGraphic", r: &BigInt) {
        Ok(Val::Bool(r.to_u32().and_then(char::from_u32).is_some_and(is_graphic_char)))
    }
}

builtin! {
    /// ``CanBackquote("a`b")`` → `false`.
    fn can_backquote(_, "strconv.CanBackquote", s: &str) {
        Ok(Val::Bool(s.chars().all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || !(c < ' ' || c == '\u{7F}')))))
    }
}

/// Go's `strconv.Unquote`.
pub(crate) fn go_unquote(s: &str) -> Option<String> {
    let q = s.chars().next()?;
    if !matches!(q, '"' | '\'' | '`') || s.len() < 2 || !s.ends_with(q) {
        return None;
    }
    let body = &s[1..s.len() - 1];
    match q {
        '`' => {
            if body.contains('`') {
                return None;
            }
            Some(body.replace('\r', ""))
        }
        '"' | '\'' => {
            let mut out = String::new();
            let mut chars = body.chars().peekable();
            let mut count = 0;
            while let Some(c) = chars.next() {
                count += 1;
                if c == q || c == '\n' {
                    return None;
                }
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                let e = chars.next()?;
                let mut hex = |n: usize| -> Option<u32> {
                    let mut v = 0u32;
                    for _ in 0..n {
                        v = v * 16 + chars.next()?.to_digit(16)?;
                    }
                    Some(v)
                };
                match e {
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{C}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'v' => out.push('\u{B}'),
                    '\\' => out.push('\\'),
                    'x' => {
                        let v = hex(2)?;
                        if q == '"' && v >= 0x80 {
                            // A raw byte that is not valid UTF-8 on its own.
                            return None;
                        }
                        out.push(char::from_u32(v)?);
                    }
                    'u' => out.push(char::from_u32(hex(4)?)?),
                    'U' => out.push(char::from_u32(hex(8)?)?),
                    '0'..='7' => {
                        let mut v = e.to_digit(8)?;
                        for _ in 0..2 {
                            v = v * 8 + chars.next()?.to_digit(8)?;
                        }
                        if v > 255 || (q == '"' && v >= 0x80) {
                            return None;
                        }
                        out.push(char::from_u32(v)?);
                    }
                    c if c == q => out.push(c),
                    _ => return None,
                }
            }
            if q == '\'' && (count == 0 || out.chars().count() != 1) {
                return None;
            }
            Some(out)
        }
        _ => None,
    }
}

builtin! {
    /// `Unquote("\"a\\tb\"")` → `"a\tb"`; a malformed literal is `invalid syntax`.
    fn unquote(_, "strconv.Unquote", s: &str) {
        go_unquote(s).map(Val::String).ok_or_else(|| BuiltinError::new("invalid syntax"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_const, check_table};
    use super::*;

    #[test]
    fn table() {
        check_table(
            "strconv",
            &[
                (r#"Unquote("\"a\\tb\"")"#, r#""a\tb""#),
                (r#"Unquote("`raw\\n`")"#, r#""raw\\n""#),
                (r#"Unquote("'x'")"#, r#""x""#),
                (r#"Unquote("\"\\u263a\"")"#, r#""☺""#),
                (r#"Unquote("abc")"#, "!invalid syntax"),
                (r#"Unquote("éé")"#, "!invalid syntax"),
                (r#"Unquote("'ab'")"#, "!invalid syntax"),
                (r#"ParseBool("T")"#, "true"),
                (r#"ParseBool("0")"#, "false"),
                (
                    r#"ParseBool("yes")"#,
                    r#"!strconv.ParseBool: parsing "yes": invalid syntax"#,
                ),
                (r#"ParseFloat("1.5", 64)"#, "1.5"),
                (r#"ParseFloat("1e3", 64)"#, "1e3"),
                (r#"ParseFloat("0.1", 32)"#, "0.10000000149011612"),
                (r#"ParseFloat("x", 64)"#, "!invalid syntax"),
                (r#"ParseFloat("inf", 64)"#, "!cannot be represented"),
                (r#"ParseUint("255", 10, 8)"#, "255"),
                (r#"ParseUint("256", 10, 8)"#, "!value out of range"),
                (r#"ParseUint("-1", 10, 8)"#, "!value out of range"),
                (r#"ParseUint("1000", 10, 0)"#, "1000"),
                (r#"ParseUint("123", 10, -1)"#, "!value out of range"),
                (
                    r#"ParseInt("99999999999999999999999", 10, 0)"#,
                    "99999999999999999999999",
                ),
                (r#"ParseInt("7", 10, 3)"#, "!value out of range"),
                (r#"ParseInt("-4", 10, 3)"#, "-4"),
                (r#"ParseInt("Z", 62, 8)"#, "61"),
                (r#"ParseInt("z", 62, 8)"#, "35"),
                (r#"ParseInt("Z", 36, 8)"#, "35"),
                (r#"ParseInt("1", 63, 8)"#, "!invalid syntax"),
                (r#"ParseInt("0x_1F", 0, 64)"#, "31"),
                (r#"ParseInt("0x", 0, 64)"#, "!invalid syntax"),
                (r#"ParseInt("1__0", 0, 64)"#, "!invalid syntax"),
                (r#"ParseInt("10_", 0, 64)"#, "!invalid syntax"),
                (r#"ParseInt("08", 0, 64)"#, "!invalid syntax"),
                (r#"ParseInt("-0x1F", 0, 64)"#, "-31"),
                (r#"ParseInt("0b101", 0, 8)"#, "5"),
                (r#"ParseInt("0o17", 0, 64)"#, "15"),
                (r#"ParseInt("017", 0, 64)"#, "15"),
                (r#"ParseInt("1_000", 0, 64)"#, "1000"),
                (r#"ParseInt("1_000", 10, 64)"#, "!invalid syntax"),
                (r#"ParseInt("zz", 36, 64)"#, "1295"),
                (
                    r#"ParseInt("128", 10, 8)"#,
                    r#"!strconv.ParseInt: parsing "128": value out of range"#,
                ),
                (r#"ParseInt("-128", 10, 8)"#, "-128"),
                (r#"Atoi("-42")"#, "-42"),
                (r#"Atoi("+7")"#, "7"),
                (
                    r#"Atoi("x")"#,
                    r#"!strconv.Atoi: parsing "x": invalid syntax"#,
                ),
                (
                    r#"Atoi("")"#,
                    r#"!strconv.Atoi: parsing "": invalid syntax"#,
                ),
                (r#"Atoi("99999999999999999999")"#, "99999999999999999999"),
                (r#"ParseNumber("123.456")"#, "123.456"),
                (r#"ParseNumber("0xFF")"#, "255"),
                (r#"ParseNumber("1.5Ki")"#, "1536"),
                (r#"ParseNumber("-.5")"#, "-0.5"),
                (r#"ParseNumber("+1e3")"#, "1000"),
                (r#"ParseNumber("1_000")"#, "1000"),
                (r#"ParseNumber("010")"#, "8"),
                (r#"ParseNumber("1_")"#, "!illegal '_' in number"),
                (r#"ParseNumber("0xG")"#, "!illegal hexadecimal number"),
                (r#"ParseNumber("1e")"#, "!illegal exponent"),
                (r#"ParseNumber("1x")"#, "!invalid number"),
                (r#"ParseNumber(".")"#, "!illegal fraction"),
                (r#"ParseNumber("")"#, "!invalid number"),
                ("FormatBool(true)", r#""true""#),
                (r#"FormatFloat(3.25, "f", 1, 64)"#, r#""3.2""#),
                (r#"FormatFloat(1.5, 102, -1, 64)"#, r#""1.5""#),
                (r#"FormatFloat(1e21, "g", -1, 64)"#, r#""1e+21""#),
                (
                    r#"FormatFloat(123456789, "g", -1, 64)"#,
                    r#""1.23456789e+08""#,
                ),
                (r#"FormatFloat(100000, "g", -1, 64)"#, r#""100000""#),
                (r#"FormatFloat(0.0001, "g", -1, 64)"#, r#""0.0001""#),
                (r#"FormatFloat(0.00001, "g", -1, 64)"#, r#""1e-05""#),
                (r#"FormatFloat(1234.5678, "e", 3, 64)"#, r#""1.235e+03""#),
                (
                    r#"FormatFloat(1234.5678, "E", -1, 64)"#,
                    r#""1.2345678E+03""#,
                ),
                (r#"FormatFloat(1234.5678, "g", 3, 64)"#, r#""1.23e+03""#),
                (r#"FormatFloat(1.5, "g", 5, 64)"#, r#""1.5""#),
                (r#"FormatFloat(0, "f", 2, 64)"#, r#""0.00""#),
                (r#"FormatFloat(1.5, [], 2, 64)"#, "!format byte"),
                ("FormatUint(255, 2)", r#""11111111""#),
                ("FormatUint(-1, 2)", r#""-1""#),
                ("FormatUint(61, 62)", r#""Z""#),
                ("FormatInt(-3843, 62)", r#""-ZZ""#),
                ("FormatInt(1, 63)", "!illegal AppendInt/FormatInt base"),
                ("FormatInt(-255, 16)", r#""-ff""#),
                (
                    "FormatInt(123456789012345678901234567890, 10)",
                    r#""123456789012345678901234567890""#,
                ),
                ("FormatInt(1, 1)", "!illegal AppendInt/FormatInt base"),
                (
                    r#"FormatInt("1", 10)"#,
                    "!invalid argument 0 to strconv.FormatInt: expected int, found string",
                ),
                ("Itoa(42)", r#""42""#),
                (r#"Quote("a\tb\"c")"#, r#""\"a\\tb\\\"c\"""#),
                (r#"Quote("☺\u0007")"#, r#""\"☺\\a\"""#),
                (r#"Quote("\u00ad")"#, r#""\"\\u00ad\"""#),
                (r#"QuoteToASCII("é")"#, r#""\"\\u00e9\"""#),
                (r#"QuoteToGraphic("\u00a0")"#, "\"\\\"\u{a0}\\\"\""),
                ("QuoteRune(9786)", r#""'☺'""#),
                ("QuoteRuneToASCII(9786)", r#""'\\u263a'""#),
                ("QuoteRuneToGraphic(10)", r#""'\\n'""#),
                ("IsPrint(9786)", "true"),
                ("IsPrint(7)", "false"),
                ("IsGraphic(160)", "true"),
                (r#"CanBackquote("a`b")"#, "false"),
                (r#"CanBackquote("a\tb")"#, "true"),
            ],
        );
        check_const("strconv", "IntSize", "64");
    }

    #[test]
    fn quote_then_unquote_round_trips() {
        for s in [
            "",
            "plain",
            "tab\there",
            "quote\"q",
            "uni☺é",
            "\u{0}\u{7f}",
            "\u{1F600}",
        ] {
            assert_eq!(go_unquote(&go_quote(s, false)).as_deref(), Some(s), "{s:?}");
            assert_eq!(go_unquote(&go_quote(s, true)).as_deref(), Some(s), "{s:?}");
        }
    }
}
