//! Package `strings` (upstream `pkg/strings`): Go's `strings` functions over UTF-8 strings, plus
//! CUE's rune helpers and the `MinRunes`/`MaxRunes` validators.
//!
//! Rules:
//! - Indices (`Index`, `LastIndex`, `IndexAny`, `ByteAt`) are byte offsets, as in Go; `-1` means
//!   not found. `SliceRunes`, `MinRunes`, `MaxRunes` and `Runes` count code points.
//! - `Split*`, `Replace` and `Count` follow Go on empty separators (split after each code point;
//!   `Count(s, "")` is the code point count plus one).
//! - `ToUpper`/`ToLower` use per-code-point simple case mapping like Go's `unicode.ToUpper`: a
//!   code point whose full mapping is several code points (`ß`) is left unchanged.
//! - `ToTitle` title-cases (here: upper-cases) the first code point of each word, and `ToCamel`
//!   lower-cases it; a word starts after a Unicode space, as upstream's `manual.go`.
//! - Not provided, as upstream excludes them: `Title`, `EqualFold`, the `*Rune`/`*Func`/`*Byte`
//!   variants.

use super::args::{builtin, fail, Bytes, ListOf};
use super::{no_consts, Builtin, Package, Val};

const P: &str = "strings";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "ByteAt", 2, byte_at),
    Builtin::f(P, "ByteSlice", 3, byte_slice),
    Builtin::f(P, "Runes", 1, runes),
    Builtin::v(P, "MinRunes", 2, min_runes),
    Builtin::v(P, "MaxRunes", 2, max_runes),
    Builtin::f(P, "ToTitle", 1, to_title),
    Builtin::f(P, "ToCamel", 1, to_camel),
    Builtin::f(P, "SliceRunes", 3, slice_runes),
    Builtin::f(P, "Compare", 2, compare),
    Builtin::f(P, "Count", 2, count),
    Builtin::v(P, "Contains", 2, contains),
    Builtin::v(P, "ContainsAny", 2, contains_any),
    Builtin::f(P, "LastIndex", 2, last_index),
    Builtin::f(P, "IndexAny", 2, index_any),
    Builtin::f(P, "LastIndexAny", 2, last_index_any),
    Builtin::f(P, "SplitN", 3, split_n),
    Builtin::f(P, "SplitAfterN", 3, split_after_n),
    Builtin::f(P, "Split", 2, split),
    Builtin::f(P, "SplitAfter", 2, split_after),
    Builtin::f(P, "Fields", 1, fields),
    Builtin::f(P, "Join", 2, join),
    Builtin::v(P, "HasPrefix", 2, has_prefix),
    Builtin::v(P, "HasSuffix", 2, has_suffix),
    Builtin::f(P, "Repeat", 2, repeat),
    Builtin::f(P, "ToUpper", 1, to_upper),
    Builtin::f(P, "ToLower", 1, to_lower),
    Builtin::f(P, "Trim", 2, trim),
    Builtin::f(P, "TrimLeft", 2, trim_left),
    Builtin::f(P, "TrimRight", 2, trim_right),
    Builtin::f(P, "TrimSpace", 1, trim_space),
    Builtin::f(P, "TrimPrefix", 2, trim_prefix),
    Builtin::f(P, "TrimSuffix", 2, trim_suffix),
    Builtin::f(P, "Replace", 4, replace),
    Builtin::f(P, "Index", 2, index),
];

/// Upper bound on the size of a string a builtin builds (`Repeat`, `Replace`).
const MAX_LEN: usize = 1 << 28;

fn s(v: impl Into<String>) -> Val {
    Val::String(v.into())
}

fn int(i: impl Into<num_bigint::BigInt>) -> Val {
    Val::Int(i.into())
}

fn idx(i: Option<usize>) -> Val {
    match i {
        Some(i) => int(i),
        None => int(-1),
    }
}

fn strs<'a>(it: impl IntoIterator<Item = &'a str>) -> Val {
    Val::List(it.into_iter().map(s).collect())
}

/// Go's simple upper-case mapping of one code point.
pub(crate) fn upper(c: char) -> char {
    let mut m = c.to_uppercase();
    match (m.next(), m.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Go's simple lower-case mapping of one code point.
pub(crate) fn lower(c: char) -> char {
    let mut m = c.to_lowercase();
    match (m.next(), m.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

builtin! {
    /// `ByteAt("abc", 1)` → `98`; out of range is an error.
    fn byte_at(_, "strings.ByteAt", b: Bytes, i: i64) {
        match usize::try_from(i).ok().and_then(|i| b.0.get(i)) {
            Some(c) => Ok(int(*c)),
            None => fail!("index out of range"),
        }
    }
}

builtin! {
    /// `ByteSlice("abcdef", 2, 4)` → `'cd'`.
    fn byte_slice(_, "strings.ByteSlice", b: Bytes, start: i64, end: i64) {
        let len = b.0.len() as i64;
        if start < 0 || start > end || end > len {
            fail!("index out of range");
        }
        Ok(Val::Bytes(b.0[start as usize..end as usize].to_vec()))
    }
}

builtin! {
    /// `Runes("aé")` → `[97, 233]`.
    fn runes(_, "strings.Runes", x: &str) {
        Ok(Val::List(x.chars().map(|c| int(u32::from(c))).collect()))
    }
}

builtin! {
    /// `MinRunes("abc", 3)` → `true`; as a validator, `strings.MinRunes(3)`.
    fn min_runes(_, "strings.MinRunes", x: &str, min: i64) {
        Ok(Val::Bool(x.chars().count() as i64 >= min))
    }
}

builtin! {
    /// `MaxRunes("abcd", 3)` → `false`; as a validator, `strings.MaxRunes(3)`.
    fn max_runes(_, "strings.MaxRunes", x: &str, max: i64) {
        Ok(Val::Bool(x.chars().count() as i64 <= max))
    }
}

fn map_word_starts(x: &str, f: fn(char) -> char) -> String {
    let mut prev = ' ';
    x.chars()
        .map(|c| {
            let out = if prev.is_whitespace() { f(c) } else { c };
            prev = c;
            out
        })
        .collect()
}

builtin! {
    /// `ToTitle("hello world")` → `"Hello World"`.
    fn to_title(_, "strings.ToTitle", x: &str) {
        Ok(s(map_word_starts(x, upper)))
    }
}

builtin! {
    /// `ToCamel("AlphaBeta Gamma")` → `"alphaBeta gamma"`.
    fn to_camel(_, "strings.ToCamel", x: &str) {
        Ok(s(map_word_starts(x, lower)))
    }
}

builtin! {
    /// `SliceRunes("aébc", 1, 3)` → `"éb"`.
    fn slice_runes(_, "strings.SliceRunes", x: &str, start: i64, end: i64) {
        let chars: Vec<char> = x.chars().collect();
        if start < 0 || start > end || end > chars.len() as i64 {
            fail!("index out of range");
        }
        Ok(s(chars[start as usize..end as usize].iter().collect::<String>()))
    }
}

builtin! {
    /// `Compare("a", "b")` → `-1`.
    fn compare(_, "strings.Compare", a: &str, b: &str) {
        Ok(int(a.cmp(b) as i8))
    }
}

builtin! {
    /// `Count("cheese", "e")` → `3`; `Count("five", "")` → `5`.
    fn count(_, "strings.Count", x: &str, sub: &str) {
        if sub.is_empty() {
            return Ok(int(x.chars().count() + 1));
        }
        Ok(int(x.matches(sub).count()))
    }
}

builtin! {
    /// `Contains("seafood", "foo")` → `true`.
    fn contains(_, "strings.Contains", x: &str, sub: &str) {
        Ok(Val::Bool(x.contains(sub)))
    }
}

builtin! {
    /// `ContainsAny("failure", "ui")` → `true`.
    fn contains_any(_, "strings.ContainsAny", x: &str, chars: &str) {
        Ok(Val::Bool(x.chars().any(|c| chars.contains(c))))
    }
}

builtin! {
    /// `LastIndex("go gopher", "go")` → `3`.
    fn last_index(_, "strings.LastIndex", x: &str, sub: &str) {
        Ok(idx(x.rfind(sub)))
    }
}

builtin! {
    /// `IndexAny("golang", "ny")` → `4`.
    fn index_any(_, "strings.IndexAny", x: &str, chars: &str) {
        Ok(idx(x.find(|c| chars.contains(c))))
    }
}

builtin! {
    /// `LastIndexAny("go gopher", "go")` → `4`.
    fn last_index_any(_, "strings.LastIndexAny", x: &str, chars: &str) {
        Ok(idx(x.rfind(|c| chars.contains(c))))
    }
}

/// Go's `genSplit`: split `x` around `sep`, keeping `sep_save` bytes of the separator, into at
/// most `n` pieces (`n < 0`: all).
fn gen_split<'a>(x: &'a str, sep: &str, sep_save: usize, n: i64) -> Vec<&'a str> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        // Split after each code point.
        let mut out: Vec<&str> = Vec::new();
        let mut rest = x;
        while !rest.is_empty() {
            if n > 0 && out.len() as i64 == n - 1 {
                out.push(rest);
                return out;
            }
            let w = rest.chars().next().map_or(1, char::len_utf8);
            out.push(&rest[..w]);
            rest = &rest[w..];
        }
        return out;
    }
    let mut out = Vec::new();
    let mut rest = x;
    while n < 0 || (out.len() as i64) < n - 1 {
        match rest.find(sep) {
            Some(i) => {
                out.push(&rest[..i + sep_save]);
                rest = &rest[i + sep.len()..];
            }
            None => break,
        }
    }
    out.push(rest);
    out
}

builtin! {
    /// `SplitN("a,b,c,d", ",", 2)` → `["a", "b,c,d"]`.
    fn split_n(_, "strings.SplitN", x: &str, sep: &str, n: i64) {
        Ok(strs(gen_split(x, sep, 0, n)))
    }
}

builtin! {
    /// `SplitAfterN("a,b,c", ",", 2)` → `["a,", "b,c"]`.
    fn split_after_n(_, "strings.SplitAfterN", x: &str, sep: &str, n: i64) {
        Ok(strs(gen_split(x, sep, sep.len(), n)))
    }
}

builtin! {
    /// `Split("a,b,c", ",")` → `["a", "b", "c"]`.
    fn split(_, "strings.Split", x: &str, sep: &str) {
        Ok(strs(gen_split(x, sep, 0, -1)))
    }
}

builtin! {
    /// `SplitAfter("a,b,c", ",")` → `["a,", "b,", "c"]`.
    fn split_after(_, "strings.SplitAfter", x: &str, sep: &str) {
        Ok(strs(gen_split(x, sep, sep.len(), -1)))
    }
}

builtin! {
    /// `Fields("  foo bar  baz   ")` → `["foo", "bar", "baz"]`.
    fn fields(_, "strings.Fields", x: &str) {
        Ok(strs(x.split(char::is_whitespace).filter(|f| !f.is_empty())))
    }
}

builtin! {
    /// `Join(["a", "b"], "-")` → `"a-b"`.
    fn join(_, "strings.Join", elems: ListOf<&str>, sep: &str) {
        Ok(s(elems.0.join(sep)))
    }
}

builtin! {
    /// `HasPrefix("prefix", "pre")` → `true`.
    fn has_prefix(_, "strings.HasPrefix", x: &str, p: &str) {
        Ok(Val::Bool(x.starts_with(p)))
    }
}

builtin! {
    /// `HasSuffix("amigo", "go")` → `true`.
    fn has_suffix(_, "strings.HasSuffix", x: &str, p: &str) {
        Ok(Val::Bool(x.ends_with(p)))
    }
}

builtin! {
    /// `Repeat("na", 2)` → `"nana"`; a negative count is an error.
    fn repeat(_, "strings.Repeat", x: &str, n: i64) {
        if n < 0 {
            fail!("strings: negative Repeat count");
        }
        if (x.len() as u128) * (n as u128) > MAX_LEN as u128 {
            fail!("strings: Repeat output length overflow");
        }
        Ok(s(x.repeat(n as usize)))
    }
}

builtin! {
    /// `ToUpper("Gopher")` → `"GOPHER"`.
    fn to_upper(_, "strings.ToUpper", x: &str) {
        Ok(s(x.chars().map(upper).collect::<String>()))
    }
}

builtin! {
    /// `ToLower("Gopher")` → `"gopher"`.
    fn to_lower(_, "strings.ToLower", x: &str) {
        Ok(s(x.chars().map(lower).collect::<String>()))
    }
}

builtin! {
    /// `Trim("¡¡¡Hello!!!", "!¡")` → `"Hello"`.
    fn trim(_, "strings.Trim", x: &str, cut: &str) {
        Ok(s(x.trim_matches(|c| cut.contains(c))))
    }
}

builtin! {
    /// `TrimLeft("xxhixx", "x")` → `"hixx"`.
    fn trim_left(_, "strings.TrimLeft", x: &str, cut: &str) {
        Ok(s(x.trim_start_matches(|c| cut.contains(c))))
    }
}

builtin! {
    /// `TrimRight("xxhixx", "x")` → `"xxhi"`.
    fn trim_right(_, "strings.TrimRight", x: &str, cut: &str) {
        Ok(s(x.trim_end_matches(|c| cut.contains(c))))
    }
}

builtin! {
    /// `TrimSpace(" \t hi \n")` → `"hi"`.
    fn trim_space(_, "strings.TrimSpace", x: &str) {
        Ok(s(x.trim()))
    }
}

builtin! {
    /// `TrimPrefix("prefix-x", "prefix-")` → `"x"`.
    fn trim_prefix(_, "strings.TrimPrefix", x: &str, p: &str) {
        Ok(s(x.strip_prefix(p).unwrap_or(x)))
    }
}

builtin! {
    /// `TrimSuffix("x.cue", ".cue")` → `"x"`.
    fn trim_suffix(_, "strings.TrimSuffix", x: &str, p: &str) {
        Ok(s(x.strip_suffix(p).unwrap_or(x)))
    }
}

builtin! {
    /// `Replace("oink oink oink", "k", "ky", 2)` → `"oinky oinky oink"`; `n < 0` replaces all.
    fn replace(_, "strings.Replace", x: &str, old: &str, new: &str, n: i64) {
        if old == new || n == 0 {
            return Ok(s(x));
        }
        let mut out = String::new();
        let mut rest = x;
        let mut done = 0i64;
        if old.is_empty() {
            // Go: a match at the start and after each code point.
            let mut first = true;
            loop {
                if n >= 0 && done >= n {
                    break;
                }
                if first {
                    first = false;
                } else {
                    let Some(c) = rest.chars().next() else { break };
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                }
                out.push_str(new);
                done += 1;
                if out.len() > MAX_LEN {
                    fail!("strings: Replace output too large");
                }
            }
            out.push_str(rest);
            return Ok(s(out));
        }
        while n < 0 || done < n {
            match rest.find(old) {
                Some(i) => {
                    out.push_str(&rest[..i]);
                    out.push_str(new);
                    rest = &rest[i + old.len()..];
                    done += 1;
                    if out.len() > MAX_LEN {
                        fail!("strings: Replace output too large");
                    }
                }
                None => break,
            }
        }
        out.push_str(rest);
        Ok(s(out))
    }
}

builtin! {
    /// `Index("chicken", "ken")` → `4`.
    fn index(_, "strings.Index", x: &str, sub: &str) {
        Ok(idx(x.find(sub)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "strings",
            &[
                (r#"ByteAt("abc", 1)"#, "98"),
                (r#"ByteAt('abc', 0)"#, "97"),
                (r#"ByteAt("abc", 3)"#, "!index out of range"),
                (r#"ByteSlice("abcdef", 2, 4)"#, "'cd'"),
                (r#"ByteSlice("abc", 2, 1)"#, "!index out of range"),
                (r#"Runes("aé")"#, "[97, 233]"),
                (r#"MinRunes("abc", 3)"#, "true"),
                (r#"MinRunes("ééé", 4)"#, "false"),
                (r#"MaxRunes("abcd", 3)"#, "false"),
                (r#"MaxRunes("", 0)"#, "true"),
                (r#"ToTitle("hello world")"#, r#""Hello World""#),
                (r#"ToCamel("AlphaBeta Gamma")"#, r#""alphaBeta gamma""#),
                (r#"SliceRunes("aébc", 1, 3)"#, r#""éb""#),
                (r#"SliceRunes("abc", 1, 4)"#, "!index out of range"),
                (r#"Compare("a", "b")"#, "-1"),
                (r#"Compare("b", "b")"#, "0"),
                (r#"Count("cheese", "e")"#, "3"),
                (r#"Count("five", "")"#, "5"),
                (r#"Contains("seafood", "foo")"#, "true"),
                (r#"Contains("seafood", "bar")"#, "false"),
                (r#"ContainsAny("failure", "ui")"#, "true"),
                (r#"ContainsAny("", "")"#, "false"),
                (r#"LastIndex("go gopher", "go")"#, "3"),
                (r#"LastIndex("go gopher", "rodent")"#, "-1"),
                (r#"IndexAny("golang", "ny")"#, "4"),
                (r#"IndexAny("golang", "xyz")"#, "-1"),
                (r#"LastIndexAny("go gopher", "go")"#, "4"),
                (r#"SplitN("a,b,c,d", ",", 2)"#, r#"["a", "b,c,d"]"#),
                (r#"SplitN("a,b", ",", 0)"#, "[]"),
                (r#"SplitN("a,b,c", ",", -1)"#, r#"["a", "b", "c"]"#),
                (r#"SplitAfterN("a,b,c", ",", 2)"#, r#"["a,", "b,c"]"#),
                (r#"Split("a,b,c", ",")"#, r#"["a", "b", "c"]"#),
                (r#"Split("abc", "")"#, r#"["a", "b", "c"]"#),
                (r#"Split("", ",")"#, r#"[""]"#),
                (r#"Split("", "")"#, "[]"),
                (r#"SplitAfter("a,b,c", ",")"#, r#"["a,", "b,", "c"]"#),
                (r#"Fields("  foo bar  baz   ")"#, r#"["foo", "bar", "baz"]"#),
                (r#"Fields("   ")"#, "[]"),
                (r#"Join(["a", "b"], "-")"#, r#""a-b""#),
                (r#"Join([], "-")"#, r#""""#),
                (
                    r#"Join(["a", 1], "-")"#,
                    "!invalid argument 0 to strings.Join: element 1: expected string, found int",
                ),
                (r#"HasPrefix("prefix", "pre")"#, "true"),
                (r#"HasSuffix("amigo", "go")"#, "true"),
                (r#"HasSuffix("amigo", "x")"#, "false"),
                (r#"Repeat("na", 2)"#, r#""nana""#),
                (r#"Repeat("na", -1)"#, "!negative Repeat count"),
                (r#"ToUpper("Gopher")"#, r#""GOPHER""#),
                (r#"ToUpper("ß")"#, r#""ß""#),
                (
                    r#"ToUpper(1)"#,
                    "!invalid argument 0 to strings.ToUpper: expected string, found int",
                ),
                (
                    r#"ToUpper(_3)"#,
                    "?non-concrete argument 0 to strings.ToUpper",
                ),
                (
                    r#"ToUpper("a", "b")"#,
                    "!too many arguments in call to strings.ToUpper: have 2, want 1",
                ),
                (r#"ToLower("Gopher")"#, r#""gopher""#),
                (r#"Trim("¡¡¡Hello!!!", "!¡")"#, r#""Hello""#),
                (r#"TrimLeft("xxhixx", "x")"#, r#""hixx""#),
                (r#"TrimRight("xxhixx", "x")"#, r#""xxhi""#),
                (r#"TrimSpace(" \t hi \n")"#, r#""hi""#),
                (r#"TrimPrefix("prefix-x", "prefix-")"#, r#""x""#),
                (r#"TrimPrefix("x", "y")"#, r#""x""#),
                (r#"TrimSuffix("x.cue", ".cue")"#, r#""x""#),
                (
                    r#"Replace("oink oink oink", "k", "ky", 2)"#,
                    r#""oinky oinky oink""#,
                ),
                (
                    r#"Replace("oink oink oink", "oink", "moo", -1)"#,
                    r#""moo moo moo""#,
                ),
                (r#"Replace("ab", "", "-", -1)"#, r#""-a-b-""#),
                (r#"Replace("ab", "", "-", 2)"#, r#""-a-b""#),
                (r#"Index("chicken", "ken")"#, "4"),
                (r#"Index("chicken", "dmr")"#, "-1"),
                (
                    r#"Index("x", 1.5)"#,
                    "!invalid argument 1 to strings.Index: expected string, found float",
                ),
            ],
        );
    }
}
