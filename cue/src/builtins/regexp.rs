//! Package `regexp` (upstream `pkg/regexp`, Go's RE2 `regexp`), over the `regex` crate, which
//! implements the same leftmost-first RE2 semantics.
//!
//! Rules:
//! - `Find*` fail with `no match` when nothing matches (upstream's `errNoMatch`); `n < 0` in the
//!   `FindAll*` functions means all matches. Unmatched groups are `""`.
//! - `FindNamedSubmatch` returns a struct of the named groups only.
//! - `ReplaceAll` expands `$1`, `${1}`, `$name`, `${name}` and `$$` like Go's `Regexp.Expand`
//!   (the longest name wins: `$1x` is the group named `1x`); `ReplaceAllLiteral` does not expand.
//! - `Valid` is a validator: an invalid pattern is the error `error parsing regexp: ...`.
//! - Approximation: Perl classes (`\d`, `\w`, `\s`, `\b`) are Unicode-aware here but ASCII-only in
//!   Go, and the error texts for invalid patterns are the `regex` crate's.

use super::args::{builtin, fail};
use super::{no_consts, Builtin, BuiltinError, Package, Val};

const P: &str = "regexp";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Find", 2, find),
    Builtin::f(P, "FindAll", 3, find_all),
    Builtin::f(P, "FindAllNamedSubmatch", 3, find_all_named_submatch),
    Builtin::f(P, "FindAllSubmatch", 3, find_all_submatch),
    Builtin::f(P, "FindNamedSubmatch", 2, find_named_submatch),
    Builtin::f(P, "FindSubmatch", 2, find_submatch),
    Builtin::f(P, "ReplaceAll", 3, replace_all),
    Builtin::f(P, "ReplaceAllLiteral", 3, replace_all_literal),
    Builtin::v(P, "Valid", 1, valid),
    Builtin::v(P, "Match", 2, match_),
    Builtin::f(P, "QuoteMeta", 1, quote_meta),
];

/// Compiles `pattern` with size limits, so hostile patterns fail instead of exhausting memory.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, BuiltinError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 22)
        .dfa_size_limit(1 << 22)
        .nest_limit(200)
        .build()
        .map_err(|e| {
            let msg = e.to_string();
            let last = msg
                .lines()
                .last()
                .unwrap_or("invalid pattern")
                .trim()
                .to_string();
            BuiltinError::new(format!("error parsing regexp: {last}: `{pattern}`"))
        })
}

fn no_match() -> BuiltinError {
    BuiltinError::new("no match")
}

fn s(v: &str) -> Val {
    Val::String(v.to_string())
}

fn limit(n: i64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn groups(c: &regex::Captures<'_>) -> Val {
    Val::List(c.iter().map(|m| s(m.map_or("", |m| m.as_str()))).collect())
}

fn named(re: &regex::Regex, c: &regex::Captures<'_>) -> Val {
    Val::Struct(
        re.capture_names()
            .flatten()
            .map(|name| (name.to_string(), s(c.name(name).map_or("", |m| m.as_str()))))
            .collect(),
    )
}

builtin! {
    /// `Find("f[a-z]+", "a foo bar")` → `"foo"`; no match is an error.
    fn find(_, "regexp.Find", pattern: &str, x: &str) {
        compile(pattern)?.find(x).map(|m| s(m.as_str())).ok_or_else(no_match)
    }
}

builtin! {
    /// `FindAll("a.", "acabad", -1)` → `["ac", "ab", "ad"]`.
    fn find_all(_, "regexp.FindAll", pattern: &str, x: &str, n: i64) {
        let out: Vec<Val> = compile(pattern)?.find_iter(x).take(limit(n)).map(|m| s(m.as_str())).collect();
        if out.is_empty() {
            return Err(no_match());
        }
        Ok(Val::List(out))
    }
}

builtin! {
    /// `FindAllSubmatch("(a)(.)", "acab", -1)` → `[["ac", "a", "c"], ["ab", "a", "b"]]`.
    fn find_all_submatch(_, "regexp.FindAllSubmatch", pattern: &str, x: &str, n: i64) {
        let out: Vec<Val> = compile(pattern)?.captures_iter(x).take(limit(n)).map(|c| groups(&c)).collect();
        if out.is_empty() {
            return Err(no_match());
        }
        Ok(Val::List(out))
    }
}

builtin! {
    /// `FindAllNamedSubmatch("(?P<k>a)(?P<v>.)", "acab", 1)` → `[{k: "a", v: "c"}]`.
    fn find_all_named_submatch(_, "regexp.FindAllNamedSubmatch", pattern: &str, x: &str, n: i64) {
        let re = compile(pattern)?;
        let out: Vec<Val> = re.captures_iter(x).take(limit(n)).map(|c| named(&re, &c)).collect();
        if out.is_empty() {
            return Err(no_match());
        }
        Ok(Val::List(out))
    }
}

builtin! {
    /// `FindSubmatch("(\\w+)@(\\w+)", "me@host")` → `["me@host", "me", "host"]`.
    fn find_submatch(_, "regexp.FindSubmatch", pattern: &str, x: &str) {
        compile(pattern)?.captures(x).map(|c| groups(&c)).ok_or_else(no_match)
    }
}

builtin! {
    /// `FindNamedSubmatch("(?P<user>\\w+)@(?P<host>\\w+)", "me@host")` → `{user: "me", host: "host"}`.
    fn find_named_submatch(_, "regexp.FindNamedSubmatch", pattern: &str, x: &str) {
        let re = compile(pattern)?;
        let c = re.captures(x).ok_or_else(no_match)?;
        Ok(named(&re, &c))
    }
}

builtin! {
    /// `ReplaceAll("a(x*)b", "-ab-axxb-", "${1}W")` → `"-W-xxW-"`.
    fn replace_all(_, "regexp.ReplaceAll", pattern: &str, src: &str, repl: &str) {
        Ok(s(&compile(pattern)?.replace_all(src, repl)))
    }
}

builtin! {
    /// `ReplaceAllLiteral("a(x*)b", "-ab-axxb-", "${1}")` → `"-${1}-${1}-"`.
    fn replace_all_literal(_, "regexp.ReplaceAllLiteral", pattern: &str, src: &str, repl: &str) {
        Ok(s(&compile(pattern)?.replace_all(src, regex::NoExpand(repl))))
    }
}

builtin! {
    /// `Valid("a+")` → `true`; `Valid("(")` is an error; as a validator, `regexp.Valid`.
    fn valid(_, "regexp.Valid", pattern: &str) {
        compile(pattern)?;
        Ok(Val::Bool(true))
    }
}

builtin! {
    /// `Match("^[a-z]+\\[[0-9]+\\]$", "adam[23]")` → `true`.
    fn match_(_, "regexp.Match", pattern: &str, x: &str) {
        Ok(Val::Bool(compile(pattern)?.is_match(x)))
    }
}

builtin! {
    /// `QuoteMeta("1.5+x")` → `"1\\.5\\+x"`.
    fn quote_meta(_, "regexp.QuoteMeta", x: &str) {
        // Go escapes exactly the characters `\.+*?()|[]{}^$`.
        let mut out = String::with_capacity(x.len());
        for c in x.chars() {
            if "\\.+*?()|[]{}^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
        if out.len() > 1 << 28 {
            fail!("regexp.QuoteMeta: result too large");
        }
        Ok(s(&out))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "regexp",
            &[
                (r#"Find("f[a-z]+", "a foo bar")"#, r#""foo""#),
                (r#"Find("z", "abc")"#, "!no match"),
                (r#"Find("(", "abc")"#, "!error parsing regexp"),
                (r#"FindAll("a.", "acabad", -1)"#, r#"["ac", "ab", "ad"]"#),
                (r#"FindAll("a.", "acabad", 2)"#, r#"["ac", "ab"]"#),
                (r#"FindAll("z", "abc", -1)"#, "!no match"),
                (
                    r#"FindAllSubmatch("(a)(.)", "acab", -1)"#,
                    r#"[["ac", "a", "c"], ["ab", "a", "b"]]"#,
                ),
                (
                    r#"FindAllNamedSubmatch("(?P<k>a)(?P<v>.)", "acab", 1)"#,
                    r#"[{k: "a", v: "c"}]"#,
                ),
                (
                    r#"FindSubmatch("(\\w+)@(\\w+)", "me@host")"#,
                    r#"["me@host", "me", "host"]"#,
                ),
                (r#"FindSubmatch("(a)|(b)", "b")"#, r#"["b", "", "b"]"#),
                (
                    r#"FindNamedSubmatch("(?P<user>\\w+)@(?P<host>\\w+)", "me@host")"#,
                    r#"{user: "me", host: "host"}"#,
                ),
                (
                    r#"ReplaceAll("a(x*)b", "-ab-axxb-", "${1}W")"#,
                    r#""-W-xxW-""#,
                ),
                (r#"ReplaceAll("a(x*)b", "-ab-axxb-", "$1W")"#, r#""---""#),
                (
                    r#"ReplaceAll("a(?P<n>x*)b", "-axb-", "<$n>$$")"#,
                    r#""-<x>$-""#,
                ),
                (
                    r#"ReplaceAllLiteral("a(x*)b", "-ab-axxb-", "${1}")"#,
                    r#""-${1}-${1}-""#,
                ),
                (r#"Valid("a+")"#, "true"),
                (r#"Valid("(")"#, "!error parsing regexp"),
                (r#"Match("^[a-z]+\\[[0-9]+\\]$", "adam[23]")"#, "true"),
                (r#"Match("^x$", "y")"#, "false"),
                (r#"QuoteMeta("1.5+x")"#, r#""1\\.5\\+x""#),
            ],
        );
    }
}
