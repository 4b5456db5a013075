//! Typed access to a builtin's arguments.
//!
//! Rules:
//! - Argument `i` is converted with [`FromArg`]; a kind mismatch is the error
//!   `invalid argument i to pkg.Name: expected K, found K'`.
//! - A non-concrete argument ([`Val::Opaque`]) where a concrete one is needed is an *incomplete*
//!   error (more evaluation may make it concrete), never a fatal one.
//! - Too few or too many arguments is an error naming the expected count.
//! - Integers converted to `i64` must fit, else `int N overflows int64`-style errors, as Go's
//!   `CallCtxt.Int` reports.

use super::{BuiltinError, Val};
use bigdecimal::BigDecimal;
use num_bigint::BigInt;
use num_traits::ToPrimitive;

/// The CUE kind name of a value, as used in error messages.
pub fn kind_name(v: &Val) -> &'static str {
    match v {
        Val::Null => "null",
        Val::Bool(_) => "bool",
        Val::Int(_) => "int",
        Val::Float(_) => "float",
        Val::String(_) => "string",
        Val::Bytes(_) => "bytes",
        Val::List(_) => "list",
        Val::Struct(_) => "struct",
        Val::Opaque(_) => "_",
    }
}

/// A conversion from an argument value to a Rust parameter type.
pub trait FromArg<'a>: Sized {
    /// The CUE kind expected, for error messages.
    const EXPECTED: &'static str;
    /// Converts, or returns `None` on a kind mismatch. `Err` is for values of the right kind that
    /// are out of range.
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>>;
}

impl<'a> FromArg<'a> for &'a Val {
    const EXPECTED: &'static str = "_";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        Some(Ok(v))
    }
}

impl<'a> FromArg<'a> for &'a str {
    const EXPECTED: &'static str = "string";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        match v {
            Val::String(s) => Some(Ok(s)),
            _ => None,
        }
    }
}

impl<'a> FromArg<'a> for bool {
    const EXPECTED: &'static str = "bool";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        match v {
            Val::Bool(b) => Some(Ok(*b)),
            _ => None,
        }
    }
}

impl<'a> FromArg<'a> for &'a BigInt {
    const EXPECTED: &'static str = "int";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        match v {
            Val::Int(i) => Some(Ok(i)),
            _ => None,
        }
    }
}

impl<'a> FromArg<'a> for i64 {
    const EXPECTED: &'static str = "int";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        match v {
            Val::Int(i) => Some(i.to_i64().ok_or_else(|| format!("int {i} overflows int64"))),
            _ => None,
        }
    }
}

/// Bytes, or the UTF-8 bytes of a string (Go's `CallCtxt.Bytes`).
#[derive(Clone, Copy, Debug)]
pub struct Bytes<'a>(pub &'a [u8]);

impl<'a> FromArg<'a> for Bytes<'a> {
    const EXPECTED: &'static str = "bytes|string";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        match v {
            Val::Bytes(b) => Some(Ok(Bytes(b))),
            Val::String(s) => Some(Ok(Bytes(s.as_bytes()))),
            _ => None,
        }
    }
}

/// A number (int or float) as an exact decimal.
#[derive(Clone, Debug)]
pub struct Num(pub BigDecimal);

impl<'a> FromArg<'a> for Num {
    const EXPECTED: &'static str = "number";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        crate::data::num::to_decimal(v).map(|d| Ok(Num(d)))
    }
}

impl<'a> FromArg<'a> for &'a [Val] {
    const EXPECTED: &'static str = "list";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        match v {
            Val::List(l) => Some(Ok(l)),
            _ => None,
        }
    }
}

/// The fields of a struct.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a>(pub &'a [(String, Val)]);

impl<'a> FromArg<'a> for Fields<'a> {
    const EXPECTED: &'static str = "struct";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        match v {
            Val::Struct(f) => Some(Ok(Fields(f))),
            _ => None,
        }
    }
}

/// A list whose elements all convert to `T` (Go's `CallCtxt.StringList`, `DecimalList`).
#[derive(Clone, Debug)]
pub struct ListOf<T>(pub Vec<T>);

impl<'a, T: FromArg<'a>> FromArg<'a> for ListOf<T> {
    const EXPECTED: &'static str = "list";
    fn from_arg(v: &'a Val) -> Option<Result<Self, String>> {
        let Val::List(items) = v else {
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match T::from_arg(item) {
                Some(Ok(x)) => out.push(x),
                Some(Err(e)) => return Some(Err(format!("element {i}: {e}"))),
                None => {
                    return Some(Err(format!(
                        "element {i}: expected {}, found {}",
                        T::EXPECTED,
                        kind_name(item)
                    )))
                }
            }
        }
        Some(Ok(ListOf(out)))
    }
}

/// Checks the argument count: exactly `n`, or at least `n` when `variadic`.
pub fn count(args: &[Val], n: usize, variadic: bool, name: &str) -> Result<(), BuiltinError> {
    let ok = if variadic {
        args.len() >= n
    } else {
        args.len() == n
    };
    if ok {
        Ok(())
    } else {
        let many = if args.len() > n { "many" } else { "few" };
        Err(BuiltinError::new(format!(
            "too {many} arguments in call to {name}: have {}, want {}{n}",
            args.len(),
            if variadic { "at least " } else { "" }
        )))
    }
}

/// Converts argument `i` of the call to `name`.
pub fn arg<'a, T: FromArg<'a>>(args: &'a [Val], i: usize, name: &str) -> Result<T, BuiltinError> {
    let Some(v) = args.get(i) else {
        return Err(BuiltinError::new(format!("missing argument {i} to {name}")));
    };
    if let Val::Opaque(_) = v {
        if T::EXPECTED != "_" {
            return Err(BuiltinError::incomplete(format!(
                "non-concrete argument {i} to {name}"
            )));
        }
    }
    match T::from_arg(v) {
        Some(Ok(x)) => Ok(x),
        Some(Err(e)) => Err(BuiltinError::new(format!(
            "invalid argument {i} to {name}: {e}"
        ))),
        None => Err(BuiltinError::new(format!(
            "invalid argument {i} to {name}: expected {}, found {}",
            T::EXPECTED,
            kind_name(v)
        ))),
    }
}

/// Defines a builtin implementation with typed parameters:
///
/// ```text
/// builtin! { fn to_upper(_h, "strings.ToUpper", s: &str) -> R { Ok(Val::String(s.to_uppercase())) } }
/// ```
///
/// The generated `fn(&mut dyn Host, &[Val])` checks the argument count and converts each
/// parameter with [`arg`]. A trailing `..rest` binds the remaining arguments (variadic).
macro_rules! builtin {
    ($(#[$m:meta])* fn $f:ident($host:tt, $full:literal $(, $p:ident : $t:ty)* $(,)?) $body:block) => {
        $(#[$m])*
        #[allow(unused_assignments)]
        fn $f(
            #[allow(unused_variables)] $host: &mut dyn $crate::builtins::Host,
            args: &[$crate::builtins::Val],
        ) -> Result<$crate::builtins::Val, $crate::builtins::BuiltinError> {
            const N: usize = 0 $(+ { let _ = stringify!($p); 1 })*;
            $crate::builtins::args::count(args, N, false, $full)?;
            #[allow(unused_mut, unused_variables)]
            let mut i = 0usize;
            $(
                let $p: $t = $crate::builtins::args::arg(args, i, $full)?;
                i += 1;
            )*
            $body
        }
    };
    ($(#[$m:meta])* fn $f:ident($host:tt, $full:literal $(, $p:ident : $t:ty)*, ..$rest:ident) $body:block) => {
        $(#[$m])*
        #[allow(unused_assignments)]
        fn $f(
            #[allow(unused_variables)] $host: &mut dyn $crate::builtins::Host,
            args: &[$crate::builtins::Val],
        ) -> Result<$crate::builtins::Val, $crate::builtins::BuiltinError> {
            const N: usize = 0 $(+ { let _ = stringify!($p); 1 })*;
            $crate::builtins::args::count(args, N, true, $full)?;
            #[allow(unused_mut, unused_variables)]
            let mut i = 0usize;
            $(
                let $p: $t = $crate::builtins::args::arg(args, i, $full)?;
                i += 1;
            )*
            let $rest: &[$crate::builtins::Val] = args.get(N..).unwrap_or(&[]);
            $body
        }
    };
}
pub(crate) use builtin;

/// Shorthand for a fatal error with a formatted message.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::builtins::BuiltinError::new(format!($($t)*)))
    };
}
pub(crate) use fail;
