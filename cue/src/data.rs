//! Concrete data (public as `cue::Data`): the values export writes, builtins compute on and
//! [`crate::Runtime::value_from_json`] reads, with the number helpers all of them share
//! ([`num`]).
//!
//! Rules: a struct keeps its regular fields in CUE's order; ints and floats are exact decimals
//! (`BigInt`, `BigDecimal`); a value that is not concrete appears only as [`Val::Opaque`], the
//! evaluator's handle, which reaches only the builtins that accept it.

pub mod num;

use bigdecimal::BigDecimal;
use num_bigint::BigInt;

/// A concrete CUE value. Struct fields keep their order.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer.
    Int(BigInt),
    /// A decimal float.
    Float(BigDecimal),
    /// A string.
    String(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Val>),
    /// A struct: regular fields in CUE's order.
    Struct(Vec<(String, Val)>),
    /// A value the evaluator keeps (not concrete, e.g. a comparator struct or a type); the id is the
    /// evaluator's handle, interpreted only through the builtins' `Host`.
    Opaque(u64),
}
