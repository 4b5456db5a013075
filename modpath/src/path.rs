//! Module paths: the one validator the loader, the registry client and the webhooks share
//! (docs/design/render.md §2.1; upstream `mod/module/path.go`, `CheckPath` and
//! `CheckPathWithoutVersion`).
//!
//! Rules (a path without its major suffix, the "base"):
//! - non-empty; `/`-separated elements, none empty (no leading, trailing or doubled `/`);
//! - every element uses only lower-case ASCII letters, digits and `.`, `_`, `-`; it starts and
//!   ends with a letter or digit; punctuation between letters and digits is one `.`, one `_`,
//!   two `_`, or a run of `-` (the OCI repository-name grammar upstream also enforces, so every
//!   module path is a valid OCI repository name);
//! - the first element is a domain name: it contains a dot and has no `_`;
//! - no element's prefix before its first dot is a reserved Windows file name (`con`, `nul`,
//!   `com1`, ... in any case), as upstream refuses them.
//!
//! A major-suffixed path is `base@vN`: `N` decimal without leading zeros (`@v0`, `@v12`); a full
//! version (`@v1.2.3`) or any other suffix is refused. Upper case is refused everywhere (upstream
//! refuses it to avoid case ambiguity in registries).

use std::fmt;

/// Why a module path is invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid module path {path:?}: {reason}")]
pub struct ModulePathError {
    /// The path as given.
    pub path: String,
    /// What is wrong.
    pub reason: PathProblem,
}

/// The rule a module path breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathProblem {
    /// The path is empty.
    Empty,
    /// An element is empty (a leading, trailing or doubled `/`).
    EmptyElement,
    /// A character outside `a-z 0-9 . _ -`.
    InvalidChar(char),
    /// An element starts or ends with punctuation, or has punctuation other than `.`, `_`,
    /// `__` or a run of `-` between letters and digits.
    BadPunctuation(String),
    /// The first element has no dot (it must be a domain name).
    FirstElementNotDomain(String),
    /// The first element has a `_` (not allowed in a domain name).
    UnderscoreInDomain(String),
    /// The element is a reserved Windows file name.
    Reserved(String),
    /// A major suffix is missing where one is required.
    MissingMajor,
    /// The suffix after `@` is not a major version `vN`.
    BadMajor(String),
}

impl fmt::Display for PathProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathProblem::Empty => f.write_str("empty module path"),
            PathProblem::EmptyElement => {
                f.write_str("empty path element (a leading, trailing or doubled '/')")
            }
            PathProblem::InvalidChar(c) => {
                write!(f, "invalid character {c:?} (allowed: a-z 0-9 . _ -)")
            }
            PathProblem::BadPunctuation(e) => write!(
                f,
                "element {e:?} must start and end with a letter or digit and separate them by \
                 '.', '_', '__' or dashes"
            ),
            PathProblem::FirstElementNotDomain(e) => {
                write!(
                    f,
                    "first element {e:?} must be a host name containing a dot"
                )
            }
            PathProblem::UnderscoreInDomain(e) => {
                write!(
                    f,
                    "first element {e:?} is a domain name and cannot contain '_'"
                )
            }
            PathProblem::Reserved(e) => write!(f, "element {e:?} is a reserved file name"),
            PathProblem::MissingMajor => f.write_str("no major version suffix (@vN)"),
            PathProblem::BadMajor(s) => write!(
                f,
                "suffix @{s} is not a major version (@v0, @v1, ... without leading zeros)"
            ),
        }
    }
}

const RESERVED: [&str; 22] = [
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

fn check_element(elem: &str) -> Result<(), PathProblem> {
    if elem.is_empty() {
        return Err(PathProblem::EmptyElement);
    }
    if let Some(c) = elem
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')))
    {
        return Err(PathProblem::InvalidChar(c));
    }
    // Runs of punctuation between alphanumerics: `.`, `_`, `__` or `-+`.
    let b = elem.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let bad = || PathProblem::BadPunctuation(elem.to_string());
    if !b.first().copied().is_some_and(alnum) || !b.last().copied().is_some_and(alnum) {
        return Err(bad());
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let run = &elem[start..i];
        let ok = run == "." || run == "_" || run == "__" || run.bytes().all(|c| c == b'-');
        if !ok {
            return Err(bad());
        }
    }
    let short = elem.split('.').next().unwrap_or(elem);
    if RESERVED.contains(&short) {
        return Err(PathProblem::Reserved(elem.to_string()));
    }
    Ok(())
}

fn problem(path: &str, reason: PathProblem) -> ModulePathError {
    ModulePathError {
        path: path.to_string(),
        reason,
    }
}

/// Checks a module path without major suffix (`example.com/catalogs/x`).
pub fn check_path(base: &str) -> Result<(), ModulePathError> {
    if base.is_empty() {
        return Err(problem(base, PathProblem::Empty));
    }
    for (i, elem) in base.split('/').enumerate() {
        check_element(elem).map_err(|r| problem(base, r))?;
        if i == 0 {
            if !elem.contains('.') {
                return Err(problem(
                    base,
                    PathProblem::FirstElementNotDomain(elem.to_string()),
                ));
            }
            if elem.contains('_') {
                return Err(problem(
                    base,
                    PathProblem::UnderscoreInDomain(elem.to_string()),
                ));
            }
        }
    }
    Ok(())
}

/// Parses a major suffix without the `@` (`v0`, `v12`).
pub fn parse_major(suffix: &str) -> Option<u64> {
    let digits = suffix.strip_prefix('v')?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// Checks a module path that must have a major suffix (`example.com/x@v1`); returns the base
/// and the major.
pub fn check_path_with_major(path: &str) -> Result<(&str, u64), ModulePathError> {
    let Some((base, suffix)) = path.rsplit_once('@') else {
        check_path(path)?;
        return Err(problem(path, PathProblem::MissingMajor));
    };
    let major =
        parse_major(suffix).ok_or_else(|| problem(path, PathProblem::BadMajor(suffix.into())))?;
    check_path(base).map_err(|e| problem(path, e.reason))?;
    Ok((base, major))
}

/// Checks a module path with an optional major suffix (as `module:` in `module.cue` is written);
/// returns the base and the major (`0` when not written).
pub fn check_path_opt_major(path: &str) -> Result<(&str, u64), ModulePathError> {
    if path.contains('@') {
        check_path_with_major(path)
    } else {
        check_path(path).map(|()| (path, 0))
    }
}

/// Why a module coordinate (`path@vN` + version) is invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoordinateError {
    /// The path is invalid.
    #[error(transparent)]
    Path(#[from] ModulePathError),
    /// The version is not a canonical module version (`vMAJOR.MINOR.PATCH[-PRERELEASE]`).
    #[error("{0:?} is not a canonical semver version (vMAJOR.MINOR.PATCH[-PRERELEASE])")]
    Version(String),
    /// The version is not in the path's major.
    #[error("version {version} is not in major v{major} of {path}")]
    MajorMismatch {
        /// The path with major.
        path: String,
        /// The version.
        version: String,
        /// The path's major.
        major: u64,
    },
    /// The text is not `PATH@VERSION`.
    #[error("{0:?} is not of the form PATH@VERSION")]
    Form(String),
}

fn tag_major(version: &str) -> Result<u64, CoordinateError> {
    crate::semver::parse_tag(version)
        .map(|v| v.major)
        .ok_or_else(|| CoordinateError::Version(version.to_string()))
}

/// Checks a coordinate: `m.path` is `base@vN` and `m.version` a module version in major `N`;
/// returns `base`.
pub fn check_coordinate(m: &crate::ModuleVersion) -> Result<&str, CoordinateError> {
    let (base, major) = check_path_with_major(&m.path)?;
    if tag_major(&m.version)? != major {
        return Err(CoordinateError::MajorMismatch {
            path: m.path.clone(),
            version: m.version.clone(),
            major,
        });
    }
    Ok(base)
}

/// Parses `base@vX.Y.Z` into a coordinate (`base@vX` + `vX.Y.Z`).
pub fn parse_coordinate(s: &str) -> Result<crate::ModuleVersion, CoordinateError> {
    let (base, version) = s
        .rsplit_once('@')
        .ok_or_else(|| CoordinateError::Form(s.to_string()))?;
    check_path(base)?;
    let major = tag_major(version)?;
    Ok(crate::ModuleVersion {
        path: format!("{base}@v{major}"),
        version: version.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The agreed rules, one row each: the path, and the problem (`None`: valid).
    #[test]
    fn module_path_rules_table() {
        use PathProblem as P;
        let rows: Vec<(&str, Option<P>)> = vec![
            ("example.com", None),
            ("example.com/x", None),
            ("opmodel.dev/catalogs/opm", None),
            ("a.b/c_d/e-f/g.h", None),
            ("a.b/c__d/e---f", None),
            ("x-y.example.com/v2/a1", None),
            ("fixtures.test/schema", None),
            ("", Some(P::Empty)),
            ("example.com//x", Some(P::EmptyElement)),
            ("example.com/x/", Some(P::EmptyElement)),
            ("/example.com/x", Some(P::EmptyElement)),
            ("Example.com/x", Some(P::InvalidChar('E'))),
            ("example.com/X", Some(P::InvalidChar('X'))),
            ("example.com/a~b", Some(P::InvalidChar('~'))),
            ("example.com/a b", Some(P::InvalidChar(' '))),
            ("example.com/a@b/c", Some(P::InvalidChar('@'))),
            ("example.com/é", Some(P::InvalidChar('é'))),
            ("example.com/.x", Some(P::BadPunctuation(".x".into()))),
            ("example.com/x.", Some(P::BadPunctuation("x.".into()))),
            ("example.com/_x", Some(P::BadPunctuation("_x".into()))),
            ("example.com/x-", Some(P::BadPunctuation("x-".into()))),
            ("example.com/a..b", Some(P::BadPunctuation("a..b".into()))),
            ("example.com/a___b", Some(P::BadPunctuation("a___b".into()))),
            ("example.com/a.-b", Some(P::BadPunctuation("a.-b".into()))),
            ("example.com/..", Some(P::BadPunctuation("..".into()))),
            (
                "-example.com/x",
                Some(P::BadPunctuation("-example.com".into())),
            ),
            (
                "example/x",
                Some(P::FirstElementNotDomain("example".into())),
            ),
            (
                "localhost",
                Some(P::FirstElementNotDomain("localhost".into())),
            ),
            (
                "ex_ample.com/x",
                Some(P::UnderscoreInDomain("ex_ample.com".into())),
            ),
            ("example.com/con", Some(P::Reserved("con".into()))),
            ("example.com/nul.x", Some(P::Reserved("nul.x".into()))),
            ("example.com/console", None),
        ];
        for (path, want) in rows {
            let got = check_path(path).err().map(|e| e.reason);
            assert_eq!(got, want, "{path:?}");
        }
    }

    #[test]
    fn coordinates() {
        let m = parse_coordinate("example.com/x@v1.2.3").unwrap();
        assert_eq!(
            (m.path.as_str(), m.version.as_str()),
            ("example.com/x@v1", "v1.2.3")
        );
        assert_eq!(check_coordinate(&m), Ok("example.com/x"));
        let wrong = crate::ModuleVersion {
            path: "example.com/x@v2".into(),
            version: "v1.2.3".into(),
        };
        assert!(matches!(
            check_coordinate(&wrong),
            Err(CoordinateError::MajorMismatch { major: 2, .. })
        ));
        assert!(matches!(
            parse_coordinate("example.com/x@1.2.3"),
            Err(CoordinateError::Version(_))
        ));
        assert!(matches!(
            parse_coordinate("example.com/x"),
            Err(CoordinateError::Form(_))
        ));
        assert!(matches!(
            parse_coordinate("Example.com/x@v1.0.0"),
            Err(CoordinateError::Path(_))
        ));
    }

    #[test]
    fn major_suffix_rules_table() {
        use PathProblem as P;
        let rows: Vec<(&str, Result<u64, P>)> = vec![
            ("example.com/x@v0", Ok(0)),
            ("example.com/x@v1", Ok(1)),
            ("opmodel.dev/catalogs/opm@v12", Ok(12)),
            ("example.com/x", Err(P::MissingMajor)),
            ("example.com/x@1", Err(P::BadMajor("1".into()))),
            ("example.com/x@v", Err(P::BadMajor("v".into()))),
            ("example.com/x@v01", Err(P::BadMajor("v01".into()))),
            ("example.com/x@v1.2.3", Err(P::BadMajor("v1.2.3".into()))),
            ("example.com/x@v1@v1", Err(P::InvalidChar('@'))),
            ("@v1", Err(P::Empty)),
            ("Example.com/x@v1", Err(P::InvalidChar('E'))),
        ];
        for (path, want) in rows {
            let got = check_path_with_major(path)
                .map(|(_, m)| m)
                .map_err(|e| e.reason);
            assert_eq!(got, want, "{path:?}");
        }
        assert_eq!(
            check_path_with_major("a.b/c@v3").map(|(b, _)| b),
            Ok("a.b/c")
        );
        assert_eq!(check_path_opt_major("a.b/c"), Ok(("a.b/c", 0)));
        assert_eq!(check_path_opt_major("a.b/c@v2"), Ok(("a.b/c", 2)));
        let e = check_path_with_major("a.b/C@v1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid module path \"a.b/C@v1\": invalid character 'C' (allowed: a-z 0-9 . _ -)"
        );
    }
}
