//! Package `path` (upstream `pkg/path`, Go's `path/filepath` made OS-independent).
//!
//! Rules:
//! - Every function takes an optional last argument naming the OS (`"unix"`, the default, when
//!   omitted); the builtins are registered as variadic so the evaluator may pass it or not.
//!   Only the `unix` and `plan9` conventions (separator `/`; list separator `:`, NUL for plan9)
//!   are supported;
//!   `"windows"` is an error here (FIXME: upstream supports drive letters and `\`).
//! - `Clean` is Go's lexical cleaning (`a//b/../c/.` → `a/c`, `""` → `.`); `Join` joins non-empty
//!   elements and cleans (all empty → `""`); `Split` cuts after the last `/`; `Base`, `Dir`,
//!   `Ext`, `IsAbs`, `Rel`, `Resolve`, `SplitList`, `VolumeName` (always `""`), `ToSlash` and
//!   `FromSlash` (identity) and `Match` (shell patterns, `syntax error in pattern`) follow Go.

use super::args::{arg, builtin, fail, ListOf};
use super::{no_consts, Builtin, BuiltinError, Package, Val};

const P: &str = "path";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: |name| match name {
        "Unix" => Some(Val::String("unix".into())),
        "Windows" => Some(Val::String("windows".into())),
        "Plan9" => Some(Val::String("plan9".into())),
        _ => no_consts(name),
    },
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Split", 2, split).variadic(),
    Builtin::f(P, "SplitList", 2, split_list).variadic(),
    Builtin::f(P, "Join", 2, join).variadic(),
    Builtin::v(P, "Match", 3, match_).variadic(),
    Builtin::f(P, "Clean", 2, clean).variadic(),
    Builtin::f(P, "ToSlash", 2, to_slash).variadic(),
    Builtin::f(P, "FromSlash", 2, from_slash).variadic(),
    Builtin::f(P, "Ext", 2, ext).variadic(),
    Builtin::f(P, "Resolve", 3, resolve).variadic(),
    Builtin::f(P, "Rel", 3, rel).variadic(),
    Builtin::f(P, "Base", 2, base).variadic(),
    Builtin::f(P, "Dir", 2, dir).variadic(),
    Builtin::v(P, "IsAbs", 2, is_abs).variadic(),
    Builtin::f(P, "VolumeName", 2, volume_name).variadic(),
];

/// Checks the optional OS argument; `true` for plan9.
fn os(rest: &[Val], name: &str) -> Result<bool, BuiltinError> {
    match rest {
        [] => Ok(false),
        [v] => match arg::<&str>(rest, 0, name)? {
            "unix" => Ok(false),
            "plan9" => Ok(true),
            "windows" => fail!("{name}: the windows path convention is not supported"),
            other => {
                let _ = v;
                fail!("{name}: unknown OS {other:?}")
            }
        },
        _ => fail!("too many arguments in call to {name}"),
    }
}

/// Go's `path.Clean`.
pub(crate) fn clean_path(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for elem in p.split('/') {
        match elem {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            e => parts.push(e),
        }
    }
    let body = parts.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

fn split_path(p: &str) -> (&str, &str) {
    match p.rfind('/') {
        Some(i) => (&p[..=i], &p[i + 1..]),
        None => ("", p),
    }
}

fn s(v: impl Into<String>) -> Val {
    Val::String(v.into())
}

builtin! {
    /// `Split("a/b/c.cue")` → `["a/b/", "c.cue"]`.
    fn split(_, "path.Split", p: &str, ..rest) {
        os(rest, "path.Split")?;
        let (d, f) = split_path(p);
        Ok(Val::List(vec![s(d), s(f)]))
    }
}

builtin! {
    /// `SplitList("/a:/b")` → `["/a", "/b"]`; `SplitList("")` → `[]`.
    fn split_list(_, "path.SplitList", p: &str, ..rest) {
        let plan9 = os(rest, "path.SplitList")?;
        if p.is_empty() {
            return Ok(Val::List(vec![]));
        }
        Ok(Val::List(p.split(if plan9 { '\0' } else { ':' }).map(s).collect()))
    }
}

builtin! {
    /// `Join(["a", "b/", "../c"])` → `"a/c"`.
    fn join(_, "path.Join", elems: ListOf<&str>, ..rest) {
        os(rest, "path.Join")?;
        let parts: Vec<&str> = elems.0.into_iter().filter(|e| !e.is_empty()).collect();
        if parts.is_empty() {
            return Ok(s(""));
        }
        Ok(s(clean_path(&parts.join("/"))))
    }
}

builtin! {
    /// `Clean("a//b/../c/.")` → `"a/c"`.
    fn clean(_, "path.Clean", p: &str, ..rest) {
        os(rest, "path.Clean")?;
        Ok(s(clean_path(p)))
    }
}

builtin! {
    /// `ToSlash("a/b")` → `"a/b"`.
    fn to_slash(_, "path.ToSlash", p: &str, ..rest) {
        os(rest, "path.ToSlash")?;
        Ok(s(p))
    }
}

builtin! {
    /// `FromSlash("a/b")` → `"a/b"`.
    fn from_slash(_, "path.FromSlash", p: &str, ..rest) {
        os(rest, "path.FromSlash")?;
        Ok(s(p))
    }
}

builtin! {
    /// `Ext("a/b.tar.gz")` → `".gz"`.
    fn ext(_, "path.Ext", p: &str, ..rest) {
        os(rest, "path.Ext")?;
        for (i, c) in p.char_indices().rev() {
            match c {
                '/' => break,
                '.' => return Ok(s(&p[i..])),
                _ => {}
            }
        }
        Ok(s(""))
    }
}

builtin! {
    /// `Resolve("/a/b", "../c")` → `"/a/c"`; an absolute `sub` wins.
    fn resolve(_, "path.Resolve", d: &str, sub: &str, ..rest) {
        os(rest, "path.Resolve")?;
        if sub.starts_with('/') {
            return Ok(s(clean_path(sub)));
        }
        let parts: Vec<&str> = [d, sub].into_iter().filter(|e| !e.is_empty()).collect();
        Ok(s(if parts.is_empty() { String::new() } else { clean_path(&parts.join("/")) }))
    }
}

builtin! {
    /// `Rel("/a/b", "/a/c/d")` → `"../c/d"`.
    fn rel(_, "path.Rel", basepath: &str, targpath: &str, ..rest) {
        os(rest, "path.Rel")?;
        let base = clean_path(basepath);
        let targ = clean_path(targpath);
        if targ == base {
            return Ok(s("."));
        }
        let base = if base == "." { String::new() } else { base };
        if base.starts_with('/') != targ.starts_with('/') {
            fail!("Rel: can't make {targpath} relative to {basepath}");
        }
        let bparts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
        let tparts: Vec<&str> = targ.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        let common = bparts.iter().zip(&tparts).take_while(|(a, b)| a == b).count();
        if bparts[common..].contains(&"..") {
            fail!("Rel: can't make {targpath} relative to {basepath}");
        }
        let mut out: Vec<&str> = vec![".."; bparts.len() - common];
        out.extend_from_slice(&tparts[common..]);
        Ok(s(if out.is_empty() { ".".to_string() } else { out.join("/") }))
    }
}

builtin! {
    /// `Base("a/b/")` → `"b"`; `Base("")` → `"."`; `Base("///")` → `"/"`.
    fn base(_, "path.Base", p: &str, ..rest) {
        os(rest, "path.Base")?;
        if p.is_empty() {
            return Ok(s("."));
        }
        let trimmed = p.trim_end_matches('/');
        if trimmed.is_empty() {
            return Ok(s("/"));
        }
        Ok(s(split_path(trimmed).1))
    }
}

builtin! {
    /// `Dir("a/b/c")` → `"a/b"`; `Dir("c")` → `"."`.
    fn dir(_, "path.Dir", p: &str, ..rest) {
        os(rest, "path.Dir")?;
        Ok(s(clean_path(split_path(p).0)))
    }
}

builtin! {
    /// `IsAbs("/a")` → `true`.
    fn is_abs(_, "path.IsAbs", p: &str, ..rest) {
        os(rest, "path.IsAbs")?;
        Ok(Val::Bool(p.starts_with('/')))
    }
}

builtin! {
    /// `VolumeName("/a")` → `""`.
    fn volume_name(_, "path.VolumeName", p: &str, ..rest) {
        os(rest, "path.VolumeName")?;
        let _ = p;
        Ok(s(""))
    }
}

/// Go's `path.Match`: `*` (not `/`), `?`, `[...]` classes with ranges and `^` negation, `\`
/// escapes. `Err(())` is a malformed pattern.
fn glob(pattern: &[char], name: &[char]) -> Result<bool, ()> {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            match pattern[p] {
                '*' => {
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                '?' if n < name.len() && name[n] != '/' => {
                    p += 1;
                    n += 1;
                    continue;
                }
                '[' => {
                    let (matched, next) = class(pattern, p, name.get(n).copied())?;
                    if matched && n < name.len() {
                        p = next;
                        n += 1;
                        continue;
                    }
                }
                '\\' => {
                    let c = *pattern.get(p + 1).ok_or(())?;
                    if n < name.len() && name[n] == c {
                        p += 2;
                        n += 1;
                        continue;
                    }
                }
                c if c != '?' && n < name.len() && name[n] == c => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
        } else if n == name.len() {
            return Ok(true);
        }
        // Backtrack: let the last star take one more (non-slash) character.
        match star {
            Some((sp, sn)) if sn < name.len() && name[sn] != '/' => {
                star = Some((sp, sn + 1));
                p = sp + 1;
                n = sn + 1;
            }
            _ => {
                // Validate the rest of the pattern, as Go reports bad patterns even on mismatch.
                let mut i = p;
                while i < pattern.len() {
                    match pattern[i] {
                        '[' => i = class(pattern, i, None)?.1,
                        '\\' => {
                            pattern.get(i + 1).ok_or(())?;
                            i += 2;
                        }
                        _ => i += 1,
                    }
                }
                return Ok(false);
            }
        }
    }
}

/// Matches `c` against the class starting at `pattern[p] == '['`; returns the match and the index
/// after the class.
fn class(pattern: &[char], p: usize, c: Option<char>) -> Result<(bool, usize), ()> {
    let mut i = p + 1;
    let negated = pattern.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let ch = *pattern.get(i).ok_or(())?;
        if ch == ']' && !first {
            i += 1;
            break;
        }
        first = false;
        let lo = if ch == '\\' {
            i += 1;
            *pattern.get(i).ok_or(())?
        } else if ch == '-' || ch == ']' {
            return Err(());
        } else {
            ch
        };
        i += 1;
        let mut hi = lo;
        if pattern.get(i) == Some(&'-') && pattern.get(i + 1) != Some(&']') {
            i += 1;
            let h = *pattern.get(i).ok_or(())?;
            hi = if h == '\\' {
                i += 1;
                *pattern.get(i).ok_or(())?
            } else {
                h
            };
            i += 1;
        }
        if let Some(c) = c {
            if lo <= c && c <= hi {
                matched = true;
            }
        }
    }
    let ok = c.is_some_and(|c| c != '/') && (matched != negated);
    Ok((ok, i))
}

builtin! {
    /// `Match("*.cue", "x.cue")` → `true`; `Match("[", "x")` is `syntax error in pattern`.
    fn match_(_, "path.Match", pattern: &str, name: &str, ..rest) {
        os(rest, "path.Match")?;
        let pc: Vec<char> = pattern.chars().collect();
        let nc: Vec<char> = name.chars().collect();
        match glob(&pc, &nc) {
            Ok(b) => Ok(Val::Bool(b)),
            Err(()) => fail!("syntax error in pattern"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "path",
            &[
                (r#"Split("a/b/c.cue")"#, r#"["a/b/", "c.cue"]"#),
                (r#"Split("c.cue", "unix")"#, r#"["", "c.cue"]"#),
                (r#"Split("c.cue", "windows")"#, "!not supported"),
                (r#"Split("c.cue", "beos")"#, "!unknown OS"),
                (r#"SplitList("/a:/b")"#, r#"["/a", "/b"]"#),
                (r#"SplitList("")"#, "[]"),
                (r#"SplitList("a:b\u0000c", "plan9")"#, r#"["a:b", "c"]"#),
                (r#"Join(["a", "b/", "../c"])"#, r#""a/c""#),
                (r#"Join(["", ""])"#, r#""""#),
                (r#"Join(["/", "a"])"#, r#""/a""#),
                (r#"Clean("a//b/../c/.")"#, r#""a/c""#),
                (r#"Clean("")"#, r#"".""#),
                (r#"Clean("/../a")"#, r#""/a""#),
                (r#"Clean("../../a/..")"#, r#""../..""#),
                (r#"ToSlash("a/b")"#, r#""a/b""#),
                (r#"FromSlash("a/b")"#, r#""a/b""#),
                (r#"Ext("a/b.tar.gz")"#, r#"".gz""#),
                (r#"Ext("a.b/c")"#, r#""""#),
                (r#"Resolve("/a/b", "../c")"#, r#""/a/c""#),
                (r#"Resolve("/a/b", "/x")"#, r#""/x""#),
                (r#"Rel("/a/b", "/a/c/d")"#, r#""../c/d""#),
                (r#"Rel("a", "a")"#, r#"".""#),
                (r#"Rel("/a", "b")"#, "!can't make b relative to /a"),
                (r#"Base("a/b/")"#, r#""b""#),
                (r#"Base("")"#, r#"".""#),
                (r#"Base("///")"#, r#""/""#),
                (r#"Dir("a/b/c")"#, r#""a/b""#),
                (r#"Dir("c")"#, r#"".""#),
                (r#"Dir("/")"#, r#""/""#),
                (r#"IsAbs("/a")"#, "true"),
                (r#"IsAbs("a")"#, "false"),
                (r#"VolumeName("/a")"#, r#""""#),
                (r#"Match("*.cue", "x.cue")"#, "true"),
                (r#"Match("*.cue", "d/x.cue")"#, "false"),
                (r#"Match("a?c", "abc")"#, "true"),
                (r#"Match("[a-c]x", "bx")"#, "true"),
                (r#"Match("[^a-c]x", "bx")"#, "false"),
                (r#"Match("a\\*", "a*")"#, "true"),
                (r#"Match("[", "x")"#, "!syntax error in pattern"),
                (r#"Match("x[", "y")"#, "!syntax error in pattern"),
            ],
        );
    }
}
