//! Package `math/bits` (upstream `pkg/math/bits`).
//!
//! Rules: `And`, `Or`, `Xor` and `Clear` (and-not) work on arbitrarily large ints word by word on
//! their magnitudes, as upstream does with `big.Int.Bits` (so the sign of an argument is
//! ignored and results are non-negative). `OnesCount`, `Reverse`, `ReverseBytes` and `Len` take
//! a uint64.

use super::args::{builtin, fail};
use super::{no_consts, Builtin, BuiltinError, Package, Val};
use num_bigint::{BigInt, BigUint, Sign};
use num_traits::ToPrimitive;

const P: &str = "math/bits";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "And", 2, and),
    Builtin::f(P, "Or", 2, or),
    Builtin::f(P, "Xor", 2, xor),
    Builtin::f(P, "Clear", 2, clear),
    Builtin::f(P, "OnesCount", 1, ones_count),
    Builtin::f(P, "Reverse", 1, reverse),
    Builtin::f(P, "ReverseBytes", 1, reverse_bytes),
    Builtin::f(P, "Len", 1, len),
];

fn mag(i: &BigInt) -> BigUint {
    i.magnitude().clone()
}

fn out(u: BigUint) -> Val {
    Val::Int(BigInt::from_biguint(Sign::Plus, u))
}

fn u64_arg(i: &BigInt, name: &str) -> Result<u64, BuiltinError> {
    match i.to_u64() {
        Some(v) => Ok(v),
        None => fail!("invalid argument 0 to {name}: {i} overflows uint64"),
    }
}

builtin! {
    /// `And(12, 10)` → `8`.
    fn and(_, "bits.And", a: &BigInt, b: &BigInt) {
        Ok(out(mag(a) & mag(b)))
    }
}

builtin! {
    /// `Or(12, 10)` → `14`.
    fn or(_, "bits.Or", a: &BigInt, b: &BigInt) {
        Ok(out(mag(a) | mag(b)))
    }
}

builtin! {
    /// `Xor(12, 10)` → `6`.
    fn xor(_, "bits.Xor", a: &BigInt, b: &BigInt) {
        Ok(out(mag(a) ^ mag(b)))
    }
}

builtin! {
    /// `Clear(12, 10)` → `4` (`a &^ b`).
    fn clear(_, "bits.Clear", a: &BigInt, b: &BigInt) {
        let (a, b) = (mag(a), mag(b));
        let common = &a & &b;
        Ok(out(a ^ common))
    }
}

builtin! {
    /// `OnesCount(255)` → `8`.
    fn ones_count(_, "bits.OnesCount", x: &BigInt) {
        Ok(Val::Int(u64_arg(x, "bits.OnesCount")?.count_ones().into()))
    }
}

builtin! {
    /// `Reverse(1)` → `9223372036854775808`.
    fn reverse(_, "bits.Reverse", x: &BigInt) {
        Ok(Val::Int(u64_arg(x, "bits.Reverse")?.reverse_bits().into()))
    }
}

builtin! {
    /// `ReverseBytes(1)` → `72057594037927936`.
    fn reverse_bytes(_, "bits.ReverseBytes", x: &BigInt) {
        Ok(Val::Int(u64_arg(x, "bits.ReverseBytes")?.swap_bytes().into()))
    }
}

builtin! {
    /// `Len(8)` → `4`; `Len(0)` → `0`.
    fn len(_, "bits.Len", x: &BigInt) {
        Ok(Val::Int((64 - u64_arg(x, "bits.Len")?.leading_zeros()).into()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "math/bits",
            &[
                ("And(12, 10)", "8"),
                ("And(340282366920938463463374607431768211455, 3)", "3"),
                ("Or(12, 10)", "14"),
                ("Xor(12, 10)", "6"),
                ("Clear(12, 10)", "4"),
                ("Clear(-12, 10)", "4"),
                ("OnesCount(255)", "8"),
                ("OnesCount(-1)", "!overflows uint64"),
                ("Reverse(1)", "9223372036854775808"),
                ("ReverseBytes(1)", "72057594037927936"),
                ("Len(8)", "4"),
                ("Len(0)", "0"),
            ],
        );
    }
}
