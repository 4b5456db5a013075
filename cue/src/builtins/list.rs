//! Package `list` (upstream `pkg/list`): slicing, flattening, numeric aggregates, sorting and the
//! `MinItems`/`MaxItems`/`UniqueItems`/`MatchN` validators.
//!
//! Rules:
//! - `Take`/`Drop`/`Slice`/`Repeat` reject negative counts; `Slice` requires `0 <= i <= j <= len`.
//! - `Sum`/`Product`/`Avg`/`Max`/`Min`/`Range` compute exact decimals (division rounded to 34
//!   significant digits like apd's base context) and return an int when the result is integral.
//! - `Contains` uses CUE equality (`1 == 1.0`); `UniqueItems` compares printed values, so `1` and
//!   `1.0` are different items, as upstream's `%+v` comparison.
//! - `Sort`/`SortStable` are stable. The comparator `list.Ascending` / `list.Descending` is a
//!   marker struct (one field named [`ASCENDING_MARKER`] / [`DESCENDING_MARKER`]) and is compared
//!   natively (numbers with numbers, strings with strings). Any other comparator, concrete or
//!   [`Val::Opaque`], is evaluated through [`Host::less`].
//! - Validators return `false` when the value does not satisfy them (called as functions too:
//!   `MinItems([1], 2)` is `false`, as in upstream's testdata). The evaluator words the error;
//!   upstream adds `len(list) < MinItems(2) (1 < 2)` to it.
//! - `MatchN(list, n, matchValue)` counts elements that unify with `matchValue` and checks that the
//!   count unifies with `n`, both through [`Host::unifies`].

use super::args::{builtin, fail, ListOf, Num};
use super::{Builtin, BuiltinError, Host, Package, Val};
use crate::data::num::{from_decimal, to_decimal};
use bigdecimal::BigDecimal;
use num_traits::{Signed, Zero};
use std::cmp::Ordering;

const P: &str = "list";

/// The field name of the `list.Ascending` marker struct.
pub const ASCENDING_MARKER: &str = "$std:list.Ascending";
/// The field name of the `list.Descending` marker struct.
pub const DESCENDING_MARKER: &str = "$std:list.Descending";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts,
};

fn consts(name: &str) -> Option<Val> {
    let marker = match name {
        "Ascending" => ASCENDING_MARKER,
        "Descending" => DESCENDING_MARKER,
        _ => return None,
    };
    Some(Val::Struct(vec![(marker.to_string(), Val::Bool(true))]))
}

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Drop", 2, drop).structural(),
    Builtin::f(P, "FlattenN", 2, flatten_n).structural(),
    Builtin::f(P, "Take", 2, take).structural(),
    Builtin::f(P, "Slice", 3, slice).structural(),
    Builtin::v(P, "MinItems", 2, min_items),
    Builtin::v(P, "MaxItems", 2, max_items),
    Builtin::v(P, "UniqueItems", 1, unique_items),
    Builtin::v(P, "Contains", 2, contains),
    Builtin::v(P, "MatchN", 3, match_n).opaque(&[1, 2]),
    Builtin::f(P, "Avg", 1, avg),
    Builtin::f(P, "Max", 1, max),
    Builtin::f(P, "Min", 1, min),
    Builtin::f(P, "Product", 1, product),
    Builtin::f(P, "Range", 3, range),
    Builtin::f(P, "Sum", 1, sum),
    Builtin::f(P, "Sort", 2, sort).opaque(&[1]),
    Builtin::f(P, "SortStable", 2, sort_stable).opaque(&[1]),
    Builtin::f(P, "SortStrings", 1, sort_strings),
    Builtin::v(P, "IsSorted", 2, is_sorted).opaque(&[1]),
    Builtin::v(P, "IsSortedStrings", 1, is_sorted_strings),
    Builtin::f(P, "Repeat", 2, repeat).structural(),
    Builtin::f(P, "Concat", 1, concat).structural(),
    Builtin::f(P, "Reverse", 1, reverse).structural(),
];

/// Upper bound on the length of a list a builtin builds (`Repeat`, `Range`).
const MAX_ITEMS: usize = 1 << 24;

builtin! {
    /// `Drop([1, 2, 3, 4], 2)` → `[3, 4]`.
    fn drop(_, "list.Drop", x: &[Val], n: i64) {
        if n < 0 {
            fail!("negative index");
        }
        Ok(Val::List(x.get(n as usize..).unwrap_or(&[]).to_vec()))
    }
}

fn flatten_into(out: &mut Vec<Val>, xs: &[Val], depth: i64) {
    for v in xs {
        match v {
            Val::List(inner) if depth != 0 => flatten_into(out, inner, depth - 1),
            other => out.push(other.clone()),
        }
    }
}

builtin! {
    /// `FlattenN([1, [[2, 3], []], [4]], 1)` → `[1, [2, 3], [], 4]`; a negative depth flattens all.
    fn flatten_n(_, "list.FlattenN", xs: &[Val], depth: i64) {
        let mut out = Vec::new();
        flatten_into(&mut out, xs, depth);
        Ok(Val::List(out))
    }
}

builtin! {
    /// `Take([1, 2, 3, 4], 2)` → `[1, 2]`.
    fn take(_, "list.Take", x: &[Val], n: i64) {
        if n < 0 {
            fail!("negative index");
        }
        Ok(Val::List(x[..x.len().min(n as usize)].to_vec()))
    }
}

builtin! {
    /// `Slice([1, 2, 3, 4], 1, 3)` → `[2, 3]`.
    fn slice(_, "list.Slice", x: &[Val], i: i64, j: i64) {
        if i < 0 {
            fail!("negative index");
        }
        if i > j {
            fail!("invalid index: {i} > {j}");
        }
        if i > x.len() as i64 || j > x.len() as i64 {
            fail!("slice bounds out of range");
        }
        Ok(Val::List(x[i as usize..j as usize].to_vec()))
    }
}

builtin! {
    /// `MinItems([1, 2], 2)` → `true`; as a validator, `list.MinItems(2)`.
    fn min_items(_, "list.MinItems", x: &[Val], n: i64) {
        let c = x.len() as i64;
        Ok(Val::Bool(c >= n))
    }
}

builtin! {
    /// `MaxItems([1, 2], 2)` → `true`; as a validator, `list.MaxItems(2)`.
    fn max_items(_, "list.MaxItems", x: &[Val], n: i64) {
        let c = x.len() as i64;
        Ok(Val::Bool(c <= n))
    }
}

/// A canonical text of a value, distinguishing ints from floats.
fn canonical(v: &Val, out: &mut String) {
    match v {
        Val::Float(f) => {
            out.push_str("f:");
            out.push_str(&crate::data::num::format_float(f));
        }
        Val::List(items) => {
            out.push('[');
            for i in items {
                canonical(i, out);
                out.push(',');
            }
            out.push(']');
        }
        Val::Struct(fields) => {
            out.push('{');
            for (k, v) in fields {
                out.push_str(&format!("{k:?}:"));
                canonical(v, out);
                out.push(',');
            }
            out.push('}');
        }
        other => out.push_str(&format!("{other:?}")),
    }
}

builtin! {
    /// `UniqueItems([1, 2, 1])` → `false`.
    fn unique_items(_, "list.UniqueItems", x: &[Val]) {
        let mut seen: Vec<String> = x
            .iter()
            .map(|v| {
                let mut s = String::new();
                canonical(v, &mut s);
                s
            })
            .collect();
        seen.sort();
        let n = seen.len();
        seen.dedup();
        Ok(Val::Bool(n == seen.len()))
    }
}

/// CUE equality of concrete values: numbers compare by value across int and float, structs by
/// their field sets.
pub(crate) fn equal(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => {
            to_decimal(a) == to_decimal(b)
        }
        (Val::List(x), Val::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Val::Struct(x), Val::Struct(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.iter().any(|(k2, v2)| k == k2 && equal(v, v2)))
        }
        _ => a == b,
    }
}

builtin! {
    /// `Contains([1, 2, 3], 2)` → `true`.
    fn contains(_, "list.Contains", x: &[Val], v: &Val) {
        Ok(Val::Bool(x.iter().any(|w| equal(v, w))))
    }
}

builtin! {
    /// `MatchN([1, "a", 2], 2, _1)` (with `_1` unifying with anything) → `true`; as a validator,
    /// `list.MatchN(>0, int)`.
    fn match_n(h, "list.MatchN", x: &[Val], n: &Val, m: &Val) {
        let mut count = 0usize;
        for w in x {
            if h.unifies(m, w)? {
                count += 1;
            }
        }
        if h.unifies(n, &Val::Int(count.into()))? {
            Ok(Val::Bool(true))
        } else {
            fail!("number of matched elements is {count}: does not satisfy {}", show(n))
        }
    }
}

fn show(v: &Val) -> String {
    match v {
        Val::Int(i) => i.to_string(),
        Val::Opaque(_) => "_".to_string(),
        other => super::json::to_json(other).unwrap_or_else(|_| "_".to_string()),
    }
}

fn div34(a: &BigDecimal, n: usize) -> BigDecimal {
    let prec = std::num::NonZeroU64::new(34).unwrap_or(std::num::NonZeroU64::MIN);
    (a / BigDecimal::from(n as u64)).with_precision_round(prec, bigdecimal::RoundingMode::HalfUp)
}

builtin! {
    /// `Avg([1, 2, 3, 4])` → `2.5`; an empty list is an error.
    fn avg(_, "list.Avg", xs: ListOf<Num>) {
        if xs.0.is_empty() {
            fail!("empty list");
        }
        let total: BigDecimal = xs.0.iter().map(|n| &n.0).sum();
        Ok(from_decimal(div34(&total, xs.0.len()).normalized_keep()))
    }
}

/// Removes trailing zeros introduced by rounding, keeping integral values readable.
trait NormalizeKeep {
    fn normalized_keep(self) -> BigDecimal;
}

impl NormalizeKeep for BigDecimal {
    fn normalized_keep(self) -> BigDecimal {
        if self.is_zero() {
            return BigDecimal::zero();
        }
        let n = self.normalized();
        if n.fractional_digit_count() < 0 {
            n.with_scale(0)
        } else {
            n
        }
    }
}

fn extreme(xs: &[Num], want: Ordering) -> Option<Val> {
    let mut best = xs.first()?;
    for x in &xs[1..] {
        if x.0.cmp(&best.0) == want {
            best = x;
        }
    }
    Some(from_decimal(best.0.clone()))
}

builtin! {
    /// `Max([1, 3, 2])` → `3`; an empty list is an error.
    fn max(_, "list.Max", xs: ListOf<Num>) {
        extreme(&xs.0, Ordering::Greater).ok_or_else(|| BuiltinError::new("empty list"))
    }
}

builtin! {
    /// `Min([2, 1.5, 3])` → `1.5`; an empty list is an error.
    fn min(_, "list.Min", xs: ListOf<Num>) {
        extreme(&xs.0, Ordering::Less).ok_or_else(|| BuiltinError::new("empty list"))
    }
}

builtin! {
    /// `Product([2, 3, 4])` → `24`; `Product([])` → `1`.
    fn product(_, "list.Product", xs: ListOf<Num>) {
        let mut p = BigDecimal::from(1);
        for x in &xs.0 {
            p *= &x.0;
        }
        Ok(from_decimal(p))
    }
}

builtin! {
    /// `Range(0, 5, 2)` → `[0, 2, 4]`; `Range(5, 0, -2)` → `[5, 3, 1]`.
    fn range(_, "list.Range", start: Num, limit: Num, step: Num) {
        let (start, limit, step) = (start.0, limit.0, step.0);
        if step.is_zero() {
            fail!("step must be non zero");
        }
        let neg = step.is_negative();
        if !neg && start > limit {
            fail!("end must be greater than start when step is positive");
        }
        if neg && start < limit {
            fail!("end must be less than start when step is negative");
        }
        let mut out = Vec::new();
        let mut cur = start;
        while (!neg && cur < limit) || (neg && cur > limit) {
            if out.len() >= MAX_ITEMS {
                fail!("list.Range: result too long");
            }
            out.push(from_decimal(cur.clone()));
            cur = &cur + &step;
        }
        Ok(Val::List(out))
    }
}

builtin! {
    /// `Sum([1, 2, 3.5])` → `6.5`; `Sum([])` → `0`.
    fn sum(_, "list.Sum", xs: ListOf<Num>) {
        let total: BigDecimal = xs.0.iter().map(|n| &n.0).sum();
        Ok(from_decimal(total))
    }
}

/// Which built-in comparator a value is, if any.
fn marker(cmp: &Val) -> Option<bool> {
    match cmp {
        Val::Struct(f) if f.len() == 1 => match f[0].0.as_str() {
            ASCENDING_MARKER => Some(true),
            DESCENDING_MARKER => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn native_cmp(x: &Val, y: &Val) -> Result<Ordering, BuiltinError> {
    match (x, y) {
        (Val::String(a), Val::String(b)) => Ok(a.cmp(b)),
        _ => match (to_decimal(x), to_decimal(y)) {
            (Some(a), Some(b)) => Ok(a.cmp(&b)),
            _ => Err(BuiltinError::new(format!(
                "invalid operands to the list.Ascending comparator: cannot compare {} and {}",
                super::args::kind_name(x),
                super::args::kind_name(y)
            ))),
        },
    }
}

/// `less(x, y)` under comparator `cmp`.
fn less(h: &mut dyn Host, cmp: &Val, x: &Val, y: &Val) -> Result<bool, BuiltinError> {
    match marker(cmp) {
        Some(true) => Ok(native_cmp(x, y)? == Ordering::Less),
        Some(false) => Ok(native_cmp(x, y)? == Ordering::Greater),
        None => h.less(cmp, x, y),
    }
}

/// A stable merge sort with a fallible comparison.
fn merge_sort(h: &mut dyn Host, cmp: &Val, items: Vec<Val>) -> Result<Vec<Val>, BuiltinError> {
    if items.len() <= 1 {
        return Ok(items);
    }
    let mut right = items;
    let left = right.drain(..right.len() / 2).collect::<Vec<_>>();
    let left = merge_sort(h, cmp, left)?;
    let right = merge_sort(h, cmp, right)?;
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut l = left.into_iter().peekable();
    let mut r = right.into_iter().peekable();
    while let (Some(a), Some(b)) = (l.peek(), r.peek()) {
        // Take from the right only when it is strictly less, which keeps equal items in order.
        if less(h, cmp, b, a)? {
            out.extend(r.next());
        } else {
            out.extend(l.next());
        }
    }
    out.extend(l);
    out.extend(r);
    Ok(out)
}

builtin! {
    /// `Sort([2, 3, 1], list.Ascending)` → `[1, 2, 3]`; `Sort([{a: 2}, {a: 1}], {x: {}, y: {},
    /// less: x.a < y.a})` → `[{a: 1}, {a: 2}]`.
    fn sort(h, "list.Sort", x: &[Val], cmp: &Val) {
        Ok(Val::List(merge_sort(h, cmp, x.to_vec())?))
    }
}

builtin! {
    /// `SortStable([2, 3, 1], list.Descending)` → `[3, 2, 1]` (deprecated upstream: `Sort` is
    /// stable).
    fn sort_stable(h, "list.SortStable", x: &[Val], cmp: &Val) {
        Ok(Val::List(merge_sort(h, cmp, x.to_vec())?))
    }
}

builtin! {
    /// `SortStrings(["b", "a", "c"])` → `["a", "b", "c"]` (byte-wise order).
    fn sort_strings(_, "list.SortStrings", x: ListOf<&str>) {
        let mut v = x.0;
        v.sort_unstable();
        Ok(Val::List(v.into_iter().map(|s| Val::String(s.to_string())).collect()))
    }
}

builtin! {
    /// `IsSorted([1, 2, 3], list.Ascending)` → `true`.
    fn is_sorted(h, "list.IsSorted", x: &[Val], cmp: &Val) {
        for w in x.windows(2) {
            if less(h, cmp, &w[1], &w[0])? {
                return Ok(Val::Bool(false));
            }
        }
        Ok(Val::Bool(true))
    }
}

builtin! {
    /// `IsSortedStrings(["a", "b"])` → `true`.
    fn is_sorted_strings(_, "list.IsSortedStrings", x: ListOf<&str>) {
        Ok(Val::Bool(x.0.windows(2).all(|w| w[0] <= w[1])))
    }
}

builtin! {
    /// `Repeat([1, 2], 2)` → `[1, 2, 1, 2]`; a negative count is an error.
    fn repeat(_, "list.Repeat", x: &[Val], n: i64) {
        if n < 0 {
            fail!("negative count");
        }
        if (x.len() as u128) * (n as u128) > MAX_ITEMS as u128 {
            fail!("list.Repeat: result too long");
        }
        let mut out = Vec::with_capacity(x.len() * n as usize);
        for _ in 0..n {
            out.extend_from_slice(x);
        }
        Ok(Val::List(out))
    }
}

builtin! {
    /// `Concat([[1, 2], [3], []])` → `[1, 2, 3]`.
    fn concat(_, "list.Concat", x: &[Val]) {
        let mut out = Vec::new();
        for (i, v) in x.iter().enumerate() {
            match v {
                Val::List(items) => out.extend_from_slice(items),
                other => fail!(
                    "invalid argument 0 to list.Concat: element {i}: expected list, found {}",
                    super::args::kind_name(other)
                ),
            }
        }
        Ok(Val::List(out))
    }
}

builtin! {
    /// `Reverse([1, 2, 3])` → `[3, 2, 1]`.
    fn reverse(_, "list.Reverse", x: &[Val]) {
        let mut v = x.to_vec();
        v.reverse();
        Ok(Val::List(v))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_table, run, val};
    use super::*;

    #[test]
    fn table() {
        check_table(
            "list",
            &[
                ("Drop([1, 2, 3, 4], 2)", "[3, 4]"),
                ("Drop([1], 5)", "[]"),
                ("Drop([1], -1)", "!negative index"),
                ("FlattenN([1, [[2, 3], []], [4]], 1)", "[1, [2, 3], [], 4]"),
                ("FlattenN([1, [[2, 3], []], [4]], -1)", "[1, 2, 3, 4]"),
                ("FlattenN([1, [2]], 0)", "[1, [2]]"),
                ("FlattenN(1, 0)", "!expected list, found int"),
                ("Take([1, 2, 3, 4], 2)", "[1, 2]"),
                ("Take([1], 3)", "[1]"),
                ("Take([1], -3)", "!negative index"),
                ("Slice([1, 2, 3, 4], 1, 3)", "[2, 3]"),
                ("Slice([1, 2], 2, 1)", "!invalid index: 2 > 1"),
                ("Slice([1, 2], 1, 3)", "!slice bounds out of range"),
                ("MinItems([1, 2], 2)", "true"),
                ("MinItems([1], 2)", "false"),
                ("MaxItems([1, 2], 2)", "true"),
                ("MaxItems([1, 2, 3], 2)", "false"),
                ("UniqueItems([1, 2, 1])", "false"),
                ("UniqueItems([1, 1.0, {a: 1}, {a: 2}])", "true"),
                ("Contains([1, 2, 3], 2)", "true"),
                ("Contains([1, 2.0], 2)", "true"),
                (r#"Contains([{a: "x"}], {a: "y"})"#, "false"),
                (r#"MatchN([1, "a", 2], 3, _1)"#, "true"),
                (
                    r#"MatchN([1, "a", 2], 2, _1)"#,
                    "!number of matched elements is 3: does not satisfy 2",
                ),
                ("Avg([1, 2, 3, 4])", "2.5"),
                ("Avg([2, 2])", "2"),
                ("Avg([1, 2, 2])", "1.666666666666666666666666666666667"),
                ("Avg([])", "!empty list"),
                (r#"Avg(["a"])"#, "!element 0: expected number, found string"),
                ("Max([1, 3, 2])", "3"),
                ("Max([])", "!empty list"),
                ("Min([2, 1.5, 3])", "1.5"),
                ("Product([2, 3, 4])", "24"),
                ("Product([])", "1"),
                ("Product([0.5, 3])", "1.5"),
                ("Range(0, 5, 2)", "[0, 2, 4]"),
                ("Range(5, 0, -2)", "[5, 3, 1]"),
                ("Range(0, 1, 0.25)", "[0, 0.25, 0.50, 0.75]"),
                ("Range(0, 5, 0)", "!step must be non zero"),
                (
                    "Range(5, 0, 1)",
                    "!end must be greater than start when step is positive",
                ),
                ("Sum([1, 2, 3.5])", "6.5"),
                ("Sum([1.5, 1.5])", "3"),
                ("Sum([])", "0"),
                ("Sort([2, 3, 1], _1)", "[1, 2, 3]"),
                (
                    "Sort([{a: 2, b: 1}, {a: 1}, {a: 2, b: 2}], _2)",
                    "[{a: 1}, {a: 2, b: 1}, {a: 2, b: 2}]",
                ),
                ("Sort([1, 2], _9)", "!test host: cannot compare"),
                ("SortStable([2, 3, 1], _1)", "[1, 2, 3]"),
                (
                    r#"SortStrings(["b", "a", "c", "B"])"#,
                    r#"["B", "a", "b", "c"]"#,
                ),
                (
                    r#"SortStrings(["b", 1])"#,
                    "!element 1: expected string, found int",
                ),
                ("IsSorted([1, 2, 3], _1)", "true"),
                ("IsSorted([1, 3, 2], _1)", "false"),
                (r#"IsSortedStrings(["a", "b"])"#, "true"),
                (r#"IsSortedStrings(["b", "a"])"#, "false"),
                ("Repeat([1, 2], 2)", "[1, 2, 1, 2]"),
                ("Repeat([1], -1)", "!negative count"),
                ("Concat([[1, 2], [3], []])", "[1, 2, 3]"),
                ("Concat([[1], 2])", "!element 1: expected list, found int"),
                ("Reverse([1, 2, 3])", "[3, 2, 1]"),
            ],
        );
    }

    #[test]
    fn ascending_and_descending_markers_sort_natively() {
        let asc = consts("Ascending").unwrap();
        let desc = consts("Descending").unwrap();
        let xs = val("[3, 1.5, 2]");
        assert_eq!(
            run("list", "Sort", &[xs.clone(), asc.clone()]).unwrap(),
            val("[1.5, 2, 3]")
        );
        assert_eq!(
            run("list", "Sort", &[xs, desc.clone()]).unwrap(),
            val("[3, 2, 1.5]")
        );
        let ss = val(r#"["b", "c", "a"]"#);
        assert_eq!(
            run("list", "SortStable", &[ss.clone(), desc]).unwrap(),
            val(r#"["c", "b", "a"]"#)
        );
        assert_eq!(
            run("list", "IsSorted", &[ss, asc.clone()]).unwrap(),
            Val::Bool(false)
        );
        let mixed = val(r#"[1, "a"]"#);
        assert!(run("list", "Sort", &[mixed, asc]).is_err());
    }
}
