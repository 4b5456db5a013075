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
//!   As upstream, every builtin whose result is a bool has the flag (`strings.HasPrefix("x")`,
//!   `list.IsSorted(list.Ascending)`, `net.IPv4`). A validator answers `false` when the value does
//!   not satisfy it; an `Err` means the check itself failed (`uuid.Valid` and `net.IPCIDR` report
//!   their parse error this way, as upstream does).
//! - Builtins never panic; bad input is a [`BuiltinError`]. Every builtin checks its argument count
//!   and kinds itself (see [`args`]), with messages such as
//!   `invalid argument 0 to strings.ToUpper: expected string, found int`.
//! - Numbers: a builtin that computes a decimal (`list.Sum`, `math.Floor`, ...) returns
//!   [`Val::Int`] when the result is integral and [`Val::Float`] otherwise, as upstream's
//!   conversion of `*apd.Decimal` results does.
//! - `list.Ascending` and `list.Descending` are [`Member::Const`] marker structs (see
//!   [`list::ASCENDING_MARKER`]); the sort functions recognise them and compare natively, so the
//!   evaluator only has to pass the constant through unchanged. Any other comparator goes through
//!   [`Host::less`].
//!
//! Coverage against upstream v0.16's `pkg/` (checked package by package, function by function):
//! every package and member is provided except
//! - `tool`, `tool/cli`, `tool/exec`, `tool/file`, `tool/http`, `tool/os`: task definitions that
//!   only `cue cmd` runs (they perform I/O); this crate evaluates and exports, it runs no tasks,
//!   so an import of them is an unknown package;
//! - `encoding/openapi` (`MarshalSchema` and its `#Config`, `#Info`, ... schemas): it generates
//!   OpenAPI from CUE schemas with upstream's `encoding/openapi` generator, a large encoder of
//!   its own that no OPM module uses;
//! - in `math`: `Erf`, `Erfc`, `Erfinv`, `Erfcinv`, `Gamma`, `J0`, `J1`, `Jn`, `Y0`, `Y1`, `Yn`:
//!   upstream returns Go's float64 results of its own polynomial approximations bit for bit,
//!   which an independent implementation would not reproduce in the last digits (the rest of
//!   `math` is exact decimal arithmetic or correctly rounded).
//!
//! The predeclared builtins of the core language (`len`, `close`, `and`, `or`, `div`, `mod`, `quo`,
//! `rem`, `matchN`, ...) are the evaluator's, not in here.

pub mod args;
mod base64;
mod bits;
mod crypto;
mod csv;
mod ed25519;
mod hex;
mod host;
mod html;
pub mod json;
pub mod list;
mod math;
mod net;
mod path;
mod regexp;
mod strconv;
mod strings;
mod structs;
mod tabwriter;
mod template;
#[cfg(test)]
mod testing;
mod time;
pub mod toml;
mod uuid;
pub mod yaml;

pub use crate::data::Val;
pub use host::{BuiltinError, Host};

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
    /// `true` for functions that only move list elements around (`list.Repeat`, `Concat`):
    /// the elements of their list arguments may be non-concrete and are passed as
    /// [`Val::Opaque`] (lists of lists are opened one level further, for `Concat`).
    pub opaque_elems: bool,
    /// The implementation.
    pub func: fn(&mut dyn Host, &[Val]) -> Result<Val, BuiltinError>,
}

impl Builtin {
    /// A plain function of `arity` parameters.
    pub(crate) const fn f(
        pkg: &'static str,
        name: &'static str,
        arity: usize,
        func: fn(&mut dyn Host, &[Val]) -> Result<Val, BuiltinError>,
    ) -> Builtin {
        Builtin {
            pkg,
            name,
            arity,
            variadic: false,
            validator: false,
            opaque_args: &[],
            opaque_elems: false,
            func,
        }
    }

    /// A validator: returns `Bool` and may be used with its first parameter omitted.
    pub(crate) const fn v(
        pkg: &'static str,
        name: &'static str,
        arity: usize,
        func: fn(&mut dyn Host, &[Val]) -> Result<Val, BuiltinError>,
    ) -> Builtin {
        Builtin {
            validator: true,
            ..Builtin::f(pkg, name, arity, func)
        }
    }

    /// The same builtin with its last parameter variadic.
    pub(crate) const fn variadic(self) -> Builtin {
        Builtin {
            variadic: true,
            ..self
        }
    }

    /// The same builtin with the given parameters allowed to be non-concrete.
    pub(crate) const fn opaque(self, opaque_args: &'static [usize]) -> Builtin {
        Builtin {
            opaque_args,
            ..self
        }
    }

    /// The same builtin with non-concrete list elements allowed (see [`Builtin::opaque_elems`]).
    pub(crate) const fn structural(self) -> Builtin {
        Builtin {
            opaque_elems: true,
            ..self
        }
    }
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

/// One std package: its functions and constants.
pub(crate) struct Package {
    /// The import path.
    pub path: &'static str,
    /// The functions, in upstream's order.
    pub funcs: &'static [Builtin],
    /// The constants, computed on lookup.
    pub consts: fn(&str) -> Option<Val>,
}

/// No constants.
pub(crate) fn no_consts(_: &str) -> Option<Val> {
    None
}

/// Every package, in [`PACKAGES`] order.
static ALL: &[Package] = &[
    strings::PACKAGE,
    list::PACKAGE,
    strconv::PACKAGE,
    math::PACKAGE,
    uuid::PACKAGE,
    crypto::SHA256,
    crypto::SHA1,
    crypto::SHA512,
    crypto::MD5,
    crypto::HMAC,
    ed25519::PACKAGE,
    hex::PACKAGE,
    base64::PACKAGE,
    json::PACKAGE,
    yaml::PACKAGE,
    toml::PACKAGE,
    csv::PACKAGE,
    structs::PACKAGE,
    regexp::PACKAGE,
    path::PACKAGE,
    bits::PACKAGE,
    html::PACKAGE,
    net::PACKAGE,
    time::PACKAGE,
    template::PACKAGE,
    tabwriter::PACKAGE,
];

/// `true` if `pkg` is a std package this crate provides.
pub fn is_std_package(pkg: &str) -> bool {
    PACKAGES.contains(&pkg)
}

/// Resolves `pkg.name`, or `None` if the package has no such member.
pub fn lookup(pkg: &str, name: &str) -> Option<Member> {
    let p = ALL.iter().find(|p| p.path == pkg)?;
    if let Some(b) = p.funcs.iter().find(|b| b.name == name) {
        return Some(Member::Func(b));
    }
    (p.consts)(name).map(Member::Const)
}

/// All functions of `pkg` (empty for an unknown package): the example tables check that each
/// one has a successful example.
#[cfg(test)]
pub(crate) fn functions(pkg: &str) -> &'static [Builtin] {
    ALL.iter()
        .find(|p| p.path == pkg)
        .map(|p| p.funcs)
        .unwrap_or(&[])
}

/// The std packages provided.
pub const PACKAGES: &[&str] = &[
    "strings",
    "list",
    "strconv",
    "math",
    "uuid",
    "crypto/sha256",
    "crypto/sha1",
    "crypto/sha512",
    "crypto/md5",
    "crypto/hmac",
    "crypto/ed25519",
    "encoding/hex",
    "encoding/base64",
    "encoding/json",
    "encoding/yaml",
    "encoding/toml",
    "encoding/csv",
    "struct",
    "regexp",
    "path",
    "math/bits",
    "html",
    "net",
    "time",
    "text/template",
    "text/tabwriter",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_and_table_agree() {
        assert_eq!(PACKAGES.len(), ALL.len());
        for (name, p) in PACKAGES.iter().zip(ALL) {
            assert_eq!(*name, p.path);
            assert!(is_std_package(name));
            for b in p.funcs {
                assert_eq!(b.pkg, p.path, "{b:?}");
                assert!(
                    matches!(lookup(name, b.name), Some(Member::Func(f)) if std::ptr::eq(f, b))
                );
            }
        }
        assert!(!is_std_package("tool/exec"));
        assert!(lookup("strings", "NoSuchThing").is_none());
        assert!(lookup("nope", "ToUpper").is_none());
    }

    #[test]
    fn names_are_unique_per_package() {
        for p in ALL {
            let mut names: Vec<_> = p.funcs.iter().map(|b| b.name).collect();
            names.sort_unstable();
            let n = names.len();
            names.dedup();
            assert_eq!(n, names.len(), "duplicate in {}", p.path);
        }
    }

    #[test]
    fn random_arguments_never_panic() {
        // Every builtin gets random values of every kind, including small ints that hit index
        // and count edge cases, and strings full of special characters.
        let mut rng = testing::Rng(0xdead_beef);
        let mut host = testing::TestHost;
        for p in ALL {
            for b in p.funcs {
                for _ in 0..60 {
                    let args: Vec<Val> = (0..b.arity)
                        .map(|_| match rng.below(4) {
                            0 => Val::Int(num_bigint::BigInt::from(rng.below(7) as i64 - 3)),
                            1 => Val::String(rng.string()),
                            2 => Val::List(
                                (0..rng.below(4))
                                    .map(|_| Val::Int((rng.below(300) as i64).into()))
                                    .collect(),
                            ),
                            _ => rng.json_val(2),
                        })
                        .collect();
                    let _ = (b.func)(&mut host, &args);
                }
            }
        }
    }

    #[test]
    fn deep_values_are_bounded_not_a_stack_overflow() {
        // Nesting beyond the encoders' limit (1000) is an error; within it, it works. (Values
        // much deeper than that overflow a test thread's stack in `Clone`/`Drop` alone, so the
        // evaluator's depth limit has to stop them before they reach a builtin.)
        for (depth, ok) in [(900usize, true), (1_100, false)] {
            let mut v = Val::Int(1.into());
            for _ in 0..depth {
                v = Val::List(vec![v]);
            }
            assert_eq!(json::to_json(&v).is_ok(), ok, "json {depth}");
            assert_eq!(yaml::to_yaml(&v).is_ok(), ok, "yaml {depth}");
            let s = Val::Struct(vec![("a".into(), v.clone())]);
            assert_eq!(toml::to_toml(&s).is_ok(), ok, "toml {depth}");
            let mut host = testing::TestHost;
            let flat = (lookup("list", "FlattenN").map(|m| match m {
                Member::Func(b) => b.func,
                Member::Const(_) => unreachable!(),
            }))
            .unwrap();
            assert!(flat(&mut host, &[v, Val::Int((-1).into())]).is_ok());
        }
    }

    #[test]
    fn wrong_arity_is_an_error_not_a_panic() {
        let mut host = testing::TestHost;
        for p in ALL {
            for b in p.funcs {
                let r = (b.func)(&mut host, &[]);
                if b.arity > 0 && !(b.variadic && b.arity == 1) {
                    assert!(r.is_err(), "{b:?} accepted no arguments");
                }
                let junk = vec![Val::Opaque(7); b.arity + 3];
                let _ = (b.func)(&mut host, &junk);
                let junk = vec![Val::Struct(vec![]); b.arity];
                let _ = (b.func)(&mut host, &junk);
            }
        }
    }
}
