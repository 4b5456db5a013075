//! Package `math/bits` (upstream `pkg/math/bits`).
//!
//! Rules: `And`, `Or`, `Xor` and `Clear` (and-not) work on arbitrarily large ints word by word on
//! their magnitudes, as upstream does with `big.Int.Bits` (so the sign of an argument is
//! ignored and results are non-negative). `Lsh`/`Rsh` shift (`Rsh` rounds toward negative
//! infinity), and `At`/`Set` read and write one bit with two's complement semantics for negative
//! ints, as Go's `big.Int.Bit`/`SetBit`; shift counts and bit positions are capped at 2^20.
//! `OnesCount`, `Reverse`, `ReverseBytes` and `Len` take
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
    Builtin::f(P, "Lsh", 2, lsh),
    Builtin::f(P, "Rsh", 2, rsh),
    Builtin::f(P, "At", 2, at),
    Builtin::f(P, "Set", 3, set),
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

fn position(n: i64, name: &str) -> Result<u64, BuiltinError> {
    match u64::try_from(n) {
        Ok(v) if v <= 1 << 20 => Ok(v),
        _ => fail!("invalid argument 1 to {name}: {n} is out of range"),
    }
}

builtin! {
    /// `Lsh(8, 4)` → `128`.
    fn lsh(_, "bits.Lsh", x: &BigInt, n: i64) {
        Ok(Val::Int(x << position(n, "bits.Lsh")?))
    }
}

builtin! {
    /// `Rsh(256, 4)` → `16`.
    fn rsh(_, "bits.Rsh", x: &BigInt, n: i64) {
        Ok(Val::Int(x >> position(n, "bits.Rsh")?))
    }
}

builtin! {
    /// `At(256, 8)` → `1`; `At(256, 9)` → `0`.
    fn at(_, "bits.At", x: &BigInt, i: i64) {
        Ok(Val::Int(u8::from(x.bit(position(i, "bits.At")?)).into()))
    }
}

builtin! {
    /// `Set(256, 7, 1)` → `384`; `Set(256, 8, 0)` → `0`.
    fn set(_, "bits.Set", x: &BigInt, i: i64, bit: i64) {
        let pos = position(i, "bits.Set")?;
        if bit != 0 && bit != 1 {
            fail!("invalid argument 2 to bits.Set: bit must be 0 or 1, got {bit}");
        }
        let mut v = x.clone();
        v.set_bit(pos, bit == 1);
        Ok(Val::Int(v))
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
                // Multi-word cases from upstream's math/bits testdata.
                ("Or(18446744073709551856, 15)", "18446744073709551871"),
                ("And(18446744073709555470, 61687)", "6"),
                ("Xor(18446744073709555471, 4080)", "18446744073709551871"),
                ("Xor(4080, 18446744073709555471)", "18446744073709551871"),
                (
                    "Clear(4722366482869645213704, 15)",
                    "4722366482869645213696",
                ),
                ("Clear(15, 72057594037927944)", "7"),
                ("Lsh(8, 4)", "128"),
                ("Lsh(8, -1)", "!out of range"),
                ("Rsh(256, 4)", "16"),
                ("Rsh(-3, 1)", "-2"),
                ("At(256, 8)", "1"),
                ("At(256, 9)", "0"),
                ("At(-1, 100)", "1"),
                ("Set(256, 7, 1)", "384"),
                ("Set(256, 8, 0)", "0"),
                ("Set(1, 0, 2)", "!bit must be 0 or 1"),
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
