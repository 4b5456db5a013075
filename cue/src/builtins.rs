//! The CUE standard library (`pkg/...` upstream), one file per package, as plain functions over
//! concrete values ([`Val`]).
//!
//! Contract with the evaluator:
//! - The evaluator resolves `import "strings"` + `strings.ToUpper` through [`lookup`], which returns
//!   a [`Member`]: a constant value or a [`Builtin`] function.
//! - It evaluates the arguments to concrete values, converts them to [`Val`] and calls
//!   [`Builtin::func`]. An argument that is not concrete is passed as [`Val::Opaque`] only to
//!   builtins whose [`Builtin::opaque_args`] allows it (e.g. `list.Sort`'s comparator); otherwise the
//!   evaluator reports the call as incomplete without calling.
//! - A builtin with [`Builtin::validator`] set returns `Val::Bool` and may be used as a validator
//!   with its first parameter omitted: `strings.MinRunes(3)` constrains the value it is unified with;
//!   the evaluator calls `func(&[value, 3])` once that value is concrete.
//! - Builtins never panic; bad input is a [`BuiltinError`].
//!
//! The predeclared builtins of the core language (`len`, `close`, `and`, `or`, `div`, `mod`, `quo`,
//! `rem`, `matchN`, ...) are the evaluator's, not in here.

mod value;

pub use value::{BuiltinError, Host, Val};

/// A function of a std package.
pub struct Builtin {
    /// The package import path (`strings`, `encoding/json`).
    pub pkg: &'static str,
    /// The exported name (`ToUpper`).
    pub name: &'static str,
    /// Number of parameters (including the subject of a validator).
    pub arity: usize,
    /// `true` when the last parameter is variadic: callers may pass `arity - 1` or more arguments.
    pub variadic: bool,
    /// `true` when the function returns a bool and may be used as a validator (first argument
    /// omitted at the call site).
    pub validator: bool,
    /// Indices of parameters that may be non-concrete ([`Val::Opaque`]).
    pub opaque_args: &'static [usize],
    /// The implementation.
    pub func: fn(&mut dyn Host, &[Val]) -> Result<Val, BuiltinError>,
}

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.pkg, self.name)
    }
}

/// What a package member resolves to.
#[derive(Debug)]
pub enum Member {
    /// A function.
    Func(&'static Builtin),
    /// A constant (`math.Pi`, `math.MaxInt64`, ...).
    Const(Val),
}

/// `true` if `pkg` is a std package this crate provides.
pub fn is_std_package(pkg: &str) -> bool {
    PACKAGES.contains(&pkg)
}

/// Resolves `pkg.name`, or `None` if the package has no such member.
pub fn lookup(pkg: &str, name: &str) -> Option<Member> {
    let _ = (pkg, name);
    None
}

/// The std packages provided.
pub const PACKAGES: &[&str] = &[];
