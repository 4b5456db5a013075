//! Package `path` (upstream `pkg/path`, Go's `path/filepath` made OS-independent).
//!
//! Rules:
//! - Every function takes an optional last argument naming the OS: `"unix"` (the default when
//!   omitted), `"plan9"` or `"windows"` (the constants `path.Unix`, `path.Plan9`,
//!   `path.Windows`), or any other OS upstream's `OS` type admits (`"linux"`, `"darwin"`, `"aix"`,
//!   ..., Go's `runtime.GOOS` values), which all behave as unix; any other string is an error. The
//!   builtins are registered as variadic so the evaluator may pass it or not.
//! - unix and plan9 use `/` (list separators `:` and NUL); windows accepts `\` and `/` as
//!   separators, writes `\`, has volume names (`c:`, `\\host\share`), compares names in `Rel`
//!   case-insensitively, treats reserved device names (`NUL`, `COM1`, ...) as absolute, and splits
//!   lists on `;` outside double quotes — all as upstream's copy of Go's `filepath`.
//! - `Clean` is Go's lexical cleaning (`a//b/../c/.` → `a/c`, `""` → `.`); `Join` joins from the
//!   first non-empty element and cleans; `Split` cuts after the last separator; `Base`, `Dir`,
//!   `Ext`, `IsAbs`, `Rel`, `Resolve` (an absolute `sub` wins), `SplitList`, `VolumeName`,
//!   `ToSlash`, `FromSlash` and `Match` (shell patterns; `\` escapes except on windows;
//!   `syntax error in pattern`) follow Go.

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

/// A path convention.
#[derive(Clone, Copy, PartialEq)]
enum Os {
    Unix,
    Plan9,
    Windows,
}

impl Os {
    fn sep(self) -> char {
        if self == Os::Windows {
            '\\'
        } else {
            '/'
        }
    }

    fn is_sep(self, c: u8) -> bool {
        c == b'/' || (self == Os::Windows && c == b'\\')
    }

    /// upstream's `volumeNameLen` (drive letters and UNC shares on windows only).
    fn volume_len(self, p: &str) -> usize {
        if self != Os::Windows || p.len() < 2 {
            return 0;
        }
        let b = p.as_bytes();
        if b[1] == b':' && b[0].is_ascii_alphabetic() {
            return 2;
        }
        let l = b.len();
        if l >= 5 && self.is_sep(b[0]) && self.is_sep(b[1]) && !self.is_sep(b[2]) && b[2] != b'.' {
            let mut n = 3;
            while n < l - 1 {
                if self.is_sep(b[n]) {
                    n += 1;
                    if !self.is_sep(b[n]) {
                        if b[n] == b'.' {
                            break;
                        }
                        while n < l && !self.is_sep(b[n]) {
                            n += 1;
                        }
                        return n;
                    }
                    break;
                }
                n += 1;
            }
        }
        0
    }

    fn with_separators(self, p: &str) -> String {
        if self == Os::Windows {
            p.replace('/', "\\")
        } else {
            p.to_string()
        }
    }

    fn same_word(self, a: &str, b: &str) -> bool {
        if self == Os::Windows {
            a.to_lowercase() == b.to_lowercase()
        } else {
            a == b
        }
    }
}

/// The OS values other than `windows` and `plan9` that upstream's `OS` type admits (`"unix"` and
/// the `runtime.GOOS` values of Go); all of them use unix paths.
const UNIX_LIKE: &[&str] = &[
    "unix",
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "hurd",
    "illumos",
    "ios",
    "js",
    "linux",
    "nacl",
    "netbsd",
    "openbsd",
    "solaris",
    "zos",
];

/// Reads the optional OS argument.
fn os(rest: &[Val], name: &str) -> Result<Os, BuiltinError> {
    match rest {
        [] => Ok(Os::Unix),
        [_] => match arg::<&str>(rest, 0, name)? {
            "plan9" => Ok(Os::Plan9),
            "windows" => Ok(Os::Windows),
            o if UNIX_LIKE.contains(&o) => Ok(Os::Unix),
            other => fail!("{name}: unknown OS {other:?}"),
        },
        _ => fail!("too many arguments in call to {name}"),
    }
}

/// Go's `filepath.Clean` for `os`.
fn clean_path(p: &str, os: Os) -> String {
    let vol_len = os.volume_len(p);
    let (vol, path) = p.split_at(vol_len);
    if path.is_empty() {
        if vol_len > 1 && p.as_bytes()[1] != b':' {
            return os.with_separators(p);
        }
        return format!("{p}.");
    }
    let b = path.as_bytes();
    let rooted = os.is_sep(b[0]);
    let n = b.len();
    let sep = os.sep() as u8;
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let (mut r, mut dotdot) = (0usize, 0usize);
    if rooted {
        out.push(sep);
        r = 1;
        dotdot = 1;
    }
    while r < n {
        if os.is_sep(b[r]) || (b[r] == b'.' && (r + 1 == n || os.is_sep(b[r + 1]))) {
            // An empty or `.` element.
            r += 1;
        } else if b[r] == b'.' && b.get(r + 1) == Some(&b'.') && (r + 2 == n || os.is_sep(b[r + 2]))
        {
            r += 2;
            if out.len() > dotdot {
                // Back up to the previous separator, dropping it too (Go's `out.w--` loop).
                let mut w = out.len() - 1;
                while w > dotdot && !os.is_sep(out[w]) {
                    w -= 1;
                }
                out.truncate(w);
            } else if !rooted {
                if !out.is_empty() {
                    out.push(sep);
                }
                out.extend_from_slice(b"..");
                dotdot = out.len();
            }
        } else {
            if (rooted && out.len() != 1) || (!rooted && !out.is_empty()) {
                out.push(sep);
            }
            while r < n && !os.is_sep(b[r]) {
                out.push(b[r]);
                r += 1;
            }
        }
    }
    if out.is_empty() {
        out.push(b'.');
    }
    os.with_separators(&format!("{vol}{}", String::from_utf8_lossy(&out)))
}

fn split_path(p: &str, os: Os) -> (&str, &str) {
    let vol = os.volume_len(p);
    let b = p.as_bytes();
    let mut i = b.len();
    while i > vol && !os.is_sep(b[i - 1]) {
        i -= 1;
    }
    p.split_at(i)
}

fn is_abs_path(p: &str, os: Os) -> bool {
    match os {
        Os::Windows => {
            const RESERVED: &[&str] = &[
                "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7",
                "COM8", "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8",
                "LPT9",
            ];
            if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(p)) {
                return true;
            }
            let l = os.volume_len(p);
            l != 0 && p.as_bytes().get(l).is_some_and(|&c| os.is_sep(c))
        }
        _ => p.starts_with('/'),
    }
}

/// Go's `filepath.Join` for `os`.
fn join_paths(elems: &[&str], os: Os) -> String {
    let Some(first) = elems.iter().position(|e| !e.is_empty()) else {
        return String::new();
    };
    let elems = &elems[first..];
    let sep = os.sep().to_string();
    if os != Os::Windows {
        return clean_path(&elems.join("/"), os);
    }
    if elems[0].len() == 2 && elems[0].as_bytes()[1] == b':' {
        let i = elems
            .iter()
            .skip(1)
            .position(|e| !e.is_empty())
            .map_or(elems.len(), |i| i + 1);
        return clean_path(&format!("{}{}", elems[0], elems[i..].join(&sep)), os);
    }
    let p = clean_path(&elems.join(&sep), os);
    let is_unc = |s: &str| os.volume_len(s) > 2;
    if !is_unc(&p) {
        return p;
    }
    let head = clean_path(elems[0], os);
    if is_unc(&head) {
        return p;
    }
    let tail = clean_path(&elems[1..].join(&sep), os);
    if head.ends_with('\\') {
        format!("{head}{tail}")
    } else {
        format!("{head}\\{tail}")
    }
}

fn s(v: impl Into<String>) -> Val {
    Val::String(v.into())
}

builtin! {
    /// `Split("a/b/c.cue")` → `["a/b/", "c.cue"]`.
    fn split(_, "path.Split", p: &str, ..rest) {
        let os = os(rest, "path.Split")?;
        let (d, f) = split_path(p, os);
        Ok(Val::List(vec![s(d), s(f)]))
    }
}

builtin! {
    /// `SplitList("/a:/b")` → `["/a", "/b"]`; `SplitList("")` → `[]`.
    fn split_list(_, "path.SplitList", p: &str, ..rest) {
        let os = os(rest, "path.SplitList")?;
        if p.is_empty() {
            return Ok(Val::List(vec![]));
        }
        let parts: Vec<String> = match os {
            Os::Unix => p.split(':').map(String::from).collect(),
            Os::Plan9 => p.split('\0').map(String::from).collect(),
            Os::Windows => {
                let mut parts = Vec::new();
                let mut cur = String::new();
                let mut quoted = false;
                for c in p.chars() {
                    match c {
                        '"' => {
                            quoted = !quoted;
                            cur.push(c);
                        }
                        ';' if !quoted => parts.push(std::mem::take(&mut cur)),
                        c => cur.push(c),
                    }
                }
                parts.push(cur);
                parts.into_iter().map(|p| p.replace('"', "")).collect()
            }
        };
        Ok(Val::List(parts.into_iter().map(Val::String).collect()))
    }
}

builtin! {
    /// `Join(["a", "b/", "../c"])` → `"a/c"`.
    fn join(_, "path.Join", elems: ListOf<&str>, ..rest) {
        let os = os(rest, "path.Join")?;
        Ok(s(join_paths(&elems.0, os)))
    }
}

builtin! {
    /// `Clean("a//b/../c/.")` → `"a/c"`.
    fn clean(_, "path.Clean", p: &str, ..rest) {
        let os = os(rest, "path.Clean")?;
        Ok(s(clean_path(p, os)))
    }
}

builtin! {
    /// `ToSlash("a\\b", "windows")` → `"a/b"`.
    fn to_slash(_, "path.ToSlash", p: &str, ..rest) {
        let os = os(rest, "path.ToSlash")?;
        Ok(s(if os == Os::Windows { p.replace('\\', "/") } else { p.to_string() }))
    }
}

builtin! {
    /// `FromSlash("/a/b", "windows")` → `"\\a\\b"`.
    fn from_slash(_, "path.FromSlash", p: &str, ..rest) {
        let os = os(rest, "path.FromSlash")?;
        Ok(s(os.with_separators(p)))
    }
}

builtin! {
    /// `Ext("a/b.tar.gz")` → `".gz"`.
    fn ext(_, "path.Ext", p: &str, ..rest) {
        let os = os(rest, "path.Ext")?;
        let b = p.as_bytes();
        let mut i = b.len();
        while i > 0 && !os.is_sep(b[i - 1]) {
            i -= 1;
            if b[i] == b'.' {
                return Ok(s(&p[i..]));
            }
        }
        Ok(s(""))
    }
}

builtin! {
    /// `Resolve("/a/b", "../c")` → `"/a/c"`; an absolute `sub` wins.
    fn resolve(_, "path.Resolve", d: &str, sub: &str, ..rest) {
        let os = os(rest, "path.Resolve")?;
        if is_abs_path(sub, os) {
            return Ok(s(clean_path(sub, os)));
        }
        let d = clean_path(d, os);
        Ok(s(join_paths(&[&d, sub], os)))
    }
}

builtin! {
    /// `Rel("/a/b", "/a/c/d")` → `"../c/d"`.
    fn rel(_, "path.Rel", basepath: &str, targpath: &str, ..rest) {
        let os = os(rest, "path.Rel")?;
        let base_vol = &basepath[..os.volume_len(basepath)];
        let targ_vol = &targpath[..os.volume_len(targpath)];
        let base_c = clean_path(basepath, os);
        let targ_c = clean_path(targpath, os);
        if os.same_word(&targ_c, &base_c) {
            return Ok(s("."));
        }
        let sep = os.sep() as u8;
        let mut base = base_c[base_vol.len().min(base_c.len())..].to_string();
        let targ = targ_c[targ_vol.len().min(targ_c.len())..].to_string();
        if base == "." {
            base.clear();
        } else if base.is_empty() && os.volume_len(base_vol) > 2 {
            base = os.sep().to_string();
        }
        let base_slashed = base.as_bytes().first() == Some(&sep);
        let targ_slashed = targ.as_bytes().first() == Some(&sep);
        let cannot = || BuiltinError::new(format!("Rel: can't make {targpath} relative to {basepath}"));
        if base_slashed != targ_slashed || !os.same_word(base_vol, targ_vol) {
            return Err(cannot());
        }
        let (bb, tb) = (base.as_bytes(), targ.as_bytes());
        let (bl, tl) = (bb.len(), tb.len());
        let (mut b0, mut bi, mut t0, mut ti) = (0, 0, 0, 0);
        loop {
            while bi < bl && bb[bi] != sep {
                bi += 1;
            }
            while ti < tl && tb[ti] != sep {
                ti += 1;
            }
            if !os.same_word(&targ[t0..ti], &base[b0..bi]) {
                break;
            }
            if bi < bl {
                bi += 1;
            }
            if ti < tl {
                ti += 1;
            }
            b0 = bi;
            t0 = ti;
            if bi >= bl && ti >= tl {
                break;
            }
        }
        if &base[b0..bi] == ".." {
            return Err(cannot());
        }
        if b0 != bl {
            let seps = base[b0..bl].bytes().filter(|&c| c == sep).count();
            let mut out = String::from("..");
            for _ in 0..seps {
                out.push(os.sep());
                out.push_str("..");
            }
            if t0 != tl {
                out.push(os.sep());
                out.push_str(&targ[t0..]);
            }
            return Ok(s(out));
        }
        Ok(s(&targ[t0..]))
    }
}

builtin! {
    /// `Base("a/b/")` → `"b"`; `Base("")` → `"."`; `Base("///")` → `"/"`.
    fn base(_, "path.Base", p: &str, ..rest) {
        let os = os(rest, "path.Base")?;
        if p.is_empty() {
            return Ok(s("."));
        }
        let mut q = p;
        while !q.is_empty() && os.is_sep(q.as_bytes()[q.len() - 1]) {
            q = &q[..q.len() - 1];
        }
        let q = &q[os.volume_len(q)..];
        let b = q.as_bytes();
        let mut i = b.len();
        while i > 0 && !os.is_sep(b[i - 1]) {
            i -= 1;
        }
        let q = &q[i..];
        Ok(s(if q.is_empty() { os.sep().to_string() } else { q.to_string() }))
    }
}

builtin! {
    /// `Dir("a/b/c")` → `"a/b"`; `Dir("c")` → `"."`.
    fn dir(_, "path.Dir", p: &str, ..rest) {
        let os = os(rest, "path.Dir")?;
        let vol = &p[..os.volume_len(p)];
        let b = p.as_bytes();
        let mut i = b.len();
        while i > vol.len() && !os.is_sep(b[i - 1]) {
            i -= 1;
        }
        let d = clean_path(&p[vol.len()..i], os);
        if d == "." && vol.len() > 2 {
            return Ok(s(vol));
        }
        Ok(s(format!("{vol}{d}")))
    }
}

builtin! {
    /// `IsAbs("/a")` → `true`; `IsAbs("c:\\a", "windows")` → `true`.
    fn is_abs(_, "path.IsAbs", p: &str, ..rest) {
        let os = os(rest, "path.IsAbs")?;
        Ok(Val::Bool(is_abs_path(p, os)))
    }
}

builtin! {
    /// `VolumeName("c:\\a", "windows")` → `"c:"`; always `""` on unix.
    fn volume_name(_, "path.VolumeName", p: &str, ..rest) {
        let os = os(rest, "path.VolumeName")?;
        Ok(s(&p[..os.volume_len(p)]))
    }
}

/// Go's `path.Match`: `*` (not `/`), `?`, `[...]` classes with ranges and `^` negation, `\`
/// escapes. `Err(())` is a malformed pattern.
fn glob(pattern: &[char], name: &[char], sep: char, escape: bool) -> Result<bool, ()> {
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
                '?' if n < name.len() && name[n] != sep => {
                    p += 1;
                    n += 1;
                    continue;
                }
                '[' => {
                    let (matched, next) = class(pattern, p, name.get(n).copied(), sep, escape)?;
                    if matched && n < name.len() {
                        p = next;
                        n += 1;
                        continue;
                    }
                }
                '\\' if escape => {
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
            Some((sp, sn)) if sn < name.len() && name[sn] != sep => {
                star = Some((sp, sn + 1));
                p = sp + 1;
                n = sn + 1;
            }
            _ => {
                // Validate the rest of the pattern, as Go reports bad patterns even on mismatch.
                let mut i = p;
                while i < pattern.len() {
                    match pattern[i] {
                        '[' => i = class(pattern, i, None, sep, escape)?.1,
                        '\\' if escape => {
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
fn class(
    pattern: &[char],
    p: usize,
    c: Option<char>,
    sep: char,
    escape: bool,
) -> Result<(bool, usize), ()> {
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
        let lo = if ch == '\\' && escape {
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
            hi = if h == '\\' && escape {
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
    let ok = c.is_some_and(|c| c != sep) && (matched != negated);
    Ok((ok, i))
}

builtin! {
    /// `Match("*.cue", "x.cue")` → `true`; `Match("[", "x")` is `syntax error in pattern`.
    fn match_(_, "path.Match", pattern: &str, name: &str, ..rest) {
        let os = os(rest, "path.Match")?;
        let pc: Vec<char> = pattern.chars().collect();
        let nc: Vec<char> = name.chars().collect();
        match glob(&pc, &nc, os.sep(), os != Os::Windows) {
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
                (
                    r#"Split("c:\\foo\\bar", "windows")"#,
                    r#"["c:\\foo\\", "bar"]"#,
                ),
                (
                    r#"Split("\\\\host\\share\\foo", "windows")"#,
                    r#"["\\\\host\\share\\", "foo"]"#,
                ),
                (
                    r#"Split("c:\\foo\\bar", "unix")"#,
                    r#"["", "c:\\foo\\bar"]"#,
                ),
                (r#"Split("c.cue", "beos")"#, "!unknown OS"),
                (r#"Join(["a", "b"], "aix")"#, r#""a/b""#),
                (r#"Join(["a", "b"], "darwin")"#, r#""a/b""#),
                (r#"Join(["a", "b"], "Linux")"#, "!unknown OS"),
                (r#"SplitList("/a:/b")"#, r#"["/a", "/b"]"#),
                (r#"SplitList("")"#, "[]"),
                (
                    r#"SplitList("a;\"b;c\";d", "windows")"#,
                    r#"["a", "b;c", "d"]"#,
                ),
                (r#"SplitList("a:b\u0000c", "plan9")"#, r#"["a:b", "c"]"#),
                (r#"Join(["a", "b/", "../c"])"#, r#""a/c""#),
                (r#"Join(["", ""])"#, r#""""#),
                (r#"Join(["/", "a"])"#, r#""/a""#),
                (r#"Clean("a//b/../c/.")"#, r#""a/c""#),
                (r#"Clean("")"#, r#"".""#),
                (r#"Clean("abc//def//ghi", "windows")"#, r#""abc\\def\\ghi""#),
                (r#"Clean("c:\\abc\\def\\..\\..", "windows")"#, r#""c:\\""#),
                (
                    r#"Clean("c:\\abc\\def\\..\\..", "unix")"#,
                    r#""c:\\abc\\def\\..\\..""#,
                ),
                (r#"Clean("/../a")"#, r#""/a""#),
                (r#"Clean("../../a/..")"#, r#""../..""#),
                (r#"ToSlash("a/b")"#, r#""a/b""#),
                (r#"ToSlash("a\\b", "windows")"#, r#""a/b""#),
                (r#"FromSlash("a/b")"#, r#""a/b""#),
                (r#"FromSlash("/a//b", "windows")"#, r#""\\a\\\\b""#),
                (r#"Ext("a/b.tar.gz")"#, r#"".gz""#),
                (r#"Ext("a.b/c")"#, r#""""#),
                (r#"Ext("a.dir\\foo")"#, r#"".dir\\foo""#),
                (r#"Ext("a.dir\\foo", "windows")"#, r#""""#),
                (r#"Resolve("/a/b", "../c")"#, r#""/a/c""#),
                (r#"Resolve("/a/b", "/x")"#, r#""/x""#),
                (r#"Resolve("c:/a", "d:\\", "windows")"#, r#""d:\\""#),
                (
                    r#"Resolve("a/b/c", "d/e", "windows")"#,
                    r#""a\\b\\c\\d\\e""#,
                ),
                (r#"Rel("/a/b", "/a/c/d")"#, r#""../c/d""#),
                (r#"Rel("a", "a")"#, r#"".""#),
                (r#"Rel("/a", "b")"#, "!can't make b relative to /a"),
                (r#"Rel("C:\\A\\b", "c:\\a\\c", "windows")"#, r#""..\\c""#),
                (r#"Base("a/b/")"#, r#""b""#),
                (r#"Base("")"#, r#"".""#),
                (r#"Base("///")"#, r#""/""#),
                (r#"Dir("a/b/c")"#, r#""a/b""#),
                (r#"Dir("c")"#, r#"".""#),
                (r#"Dir("/")"#, r#""/""#),
                (r#"IsAbs("/a")"#, "true"),
                (r#"IsAbs("a")"#, "false"),
                (r#"IsAbs("c:\\a", "windows")"#, "true"),
                (r#"IsAbs("\\a", "windows")"#, "false"),
                (r#"IsAbs("NUL", "windows")"#, "true"),
                (r#"VolumeName("/a")"#, r#""""#),
                (
                    r#"VolumeName("\\\\host\\share\\x", "windows")"#,
                    r#""\\\\host\\share""#,
                ),
                (r#"Base("c:\\a\\b", "windows")"#, r#""b""#),
                (r#"Dir("c:\\a\\b", "windows")"#, r#""c:\\a""#),
                (r#"Join(["c:", "a"], "windows")"#, r#""c:a""#),
                (
                    r#"Join(["\\", "host", "share"], "windows")"#,
                    r#""\\host\\share""#,
                ),
                (r#"Match("*.cue", "x.cue")"#, "true"),
                (r#"Match("*.cue", "d/x.cue")"#, "false"),
                (r#"Match("a?c", "abc")"#, "true"),
                (r#"Match("[a-c]x", "bx")"#, "true"),
                (r#"Match("[^a-c]x", "bx")"#, "false"),
                (r#"Match("a\\*", "a*")"#, "true"),
                (r#"Match("*.txt", "a/b.txt", "windows")"#, "true"),
                (
                    r#"Match("*.zip", "c:\\a\\b\\file.zip", "windows")"#,
                    "false",
                ),
                (r#"Match("*.zip", "c:\\a\\b\\file.zip")"#, "true"),
                (r#"Match("[", "x")"#, "!syntax error in pattern"),
                (r#"Match("x[", "y")"#, "!syntax error in pattern"),
            ],
        );
    }
}
