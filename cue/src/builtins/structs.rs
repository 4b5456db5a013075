//! Package `struct` (upstream `pkg/struct`): the `MinFields`/`MaxFields` validators.
//!
//! Rules: the count is the number of regular fields of the (concrete) struct, which is all a
//! [`Val::Struct`] holds. A struct that does not satisfy the bound gives `false` (upstream's
//! error adds `len(fields) < MinFields(2) (1 < 2)`).

use super::args::{builtin, Fields};
use super::{no_consts, Builtin, Package, Val};

const P: &str = "struct";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::v(P, "MinFields", 2, min_fields),
    Builtin::v(P, "MaxFields", 2, max_fields),
];

builtin! {
    /// `MinFields({a: 1, b: 2}, 2)` → `true`; as a validator, `struct.MinFields(2)`.
    fn min_fields(_, "struct.MinFields", s: Fields, n: i64) {
        let c = s.0.len() as i64;
        Ok(Val::Bool(c >= n))
    }
}

builtin! {
    /// `MaxFields({a: 1}, 1)` → `true`; as a validator, `struct.MaxFields(1)`.
    fn max_fields(_, "struct.MaxFields", s: Fields, n: i64) {
        let c = s.0.len() as i64;
        Ok(Val::Bool(c <= n))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "struct",
            &[
                ("MinFields({a: 1, b: 2}, 2)", "true"),
                ("MinFields({a: 1}, 2)", "false"),
                ("MinFields([1], 2)", "!expected struct, found list"),
                ("MaxFields({a: 1}, 1)", "true"),
                ("MaxFields({a: 1, b: 2}, 1)", "false"),
            ],
        );
    }
}
