//! Module paths and versions as CUE spells them.
//!
//! Rules implemented (render-spec.md §2.1–2.2):
//! - A module path with major suffix is `base@vN` where `base` contains no `@`, its elements are
//!   non-empty, never `.` or `..`, and use only `A-Z a-z 0-9 - . _ ~`; the first element contains a
//!   dot (a domain name).
//! - A version is canonical semver with a `v` prefix: `vMAJOR.MINOR.PATCH[-PRERELEASE]`. Build
//!   metadata (`+...`) and short forms (`v1`, `v1.2`) are refused, as CUE refuses them for tags.
//! - Ordering is semver precedence: prereleases sort before their release, numerically where the
//!   identifier is numeric (`v2.0.0-0.dev.1 < v2.0.0-alpha.3 < v2.0.0`).

use cue::module::ModuleVersion;

/// Checks a module path without major suffix (`fixtures.test/schema`).
pub fn check_base_path(base: &str) -> Result<(), String> {
    if base.is_empty() {
        return Err("empty module path".into());
    }
    if base.contains('@') {
        return Err(format!("module path {base:?} contains more than one '@'"));
    }
    for (i, elem) in base.split('/').enumerate() {
        if elem.is_empty() || elem == "." || elem == ".." {
            return Err(format!(
                "module path {base:?} has an invalid element {elem:?}"
            ));
        }
        if let Some(c) = elem
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')))
        {
            return Err(format!("module path {base:?} contains the character {c:?}"));
        }
        if i == 0 && !elem.contains('.') {
            return Err(format!(
                "module path {base:?} must start with a domain name (an element containing a dot)"
            ));
        }
    }
    Ok(())
}

/// Splits `base@vN` into `(base, N)`.
pub fn split_major(path: &str) -> Result<(&str, u64), String> {
    let (base, major) = path
        .rsplit_once('@')
        .ok_or_else(|| format!("module path {path:?} has no major version suffix (@vN)"))?;
    check_base_path(base)?;
    let n = major
        .strip_prefix('v')
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .filter(|n| *n == "0" || !n.starts_with('0'))
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| format!("module path {path:?} has an invalid major suffix {major:?}"))?;
    Ok((base, n))
}

/// Parses a canonical `v`-prefixed semver version.
pub fn parse(version: &str) -> Option<semver::Version> {
    let rest = version.strip_prefix('v')?;
    let v = semver::Version::parse(rest).ok()?;
    if !v.build.is_empty() {
        return None;
    }
    Some(v)
}

/// Checks that `version` is canonical semver and returns its major.
pub fn major_of(version: &str) -> Result<u64, String> {
    parse(version).map(|v| v.major).ok_or_else(|| {
        format!("{version:?} is not a canonical semver version (vMAJOR.MINOR.PATCH[-PRERELEASE])")
    })
}

/// Checks that `m.path` is `base@vN` and `m.version` a canonical version in major `N`; returns
/// `base`.
pub fn check_coordinate(m: &ModuleVersion) -> Result<&str, String> {
    let (base, major) = split_major(&m.path)?;
    let vmajor = major_of(&m.version)?;
    if vmajor != major {
        return Err(format!(
            "version {} is not in major v{major} of {}",
            m.version, m.path
        ));
    }
    Ok(base)
}

/// Parses `base@vX.Y.Z` into a coordinate (`base@vX` + `vX.Y.Z`).
pub fn parse_coordinate(s: &str) -> Result<ModuleVersion, String> {
    let (base, version) = s
        .rsplit_once('@')
        .ok_or_else(|| format!("{s:?} is not of the form PATH@VERSION"))?;
    check_base_path(base)?;
    let major = major_of(version)?;
    Ok(ModuleVersion {
        path: format!("{base}@v{major}"),
        version: version.to_string(),
    })
}

/// Sorts versions ascending by semver precedence; invalid ones sort first, by text.
pub fn sort(versions: &mut [String]) {
    versions.sort_by(|a, b| match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp_precedence(&y).then_with(|| a.cmp(b)),
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    });
}

/// Compares two canonical versions by precedence (invalid versions compare lowest).
pub fn compare(a: &str, b: &str) -> std::cmp::Ordering {
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp_precedence(&y),
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Keeps the tags that are canonical versions in major `major`, sorted ascending.
pub fn filter_major(tags: impl IntoIterator<Item = String>, major: u64) -> Vec<String> {
    let mut out: Vec<String> = tags
        .into_iter()
        .filter(|t| parse(t).is_some_and(|v| v.major == major))
        .collect();
    sort(&mut out);
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_major_accepts_and_refuses() {
        assert_eq!(
            split_major("fixtures.test/schema@v0").unwrap(),
            ("fixtures.test/schema", 0)
        );
        assert_eq!(split_major("a.b/c@v12").unwrap(), ("a.b/c", 12));
        assert!(split_major("fixtures.test/schema").is_err());
        assert!(split_major("fixtures.test/schema@1").is_err());
        assert!(split_major("fixtures.test/schema@v01").is_err());
        assert!(split_major("noDomain/x@v0").is_err());
        assert!(split_major("a.b/../x@v0").is_err());
        assert!(split_major("a.b//x@v0").is_err());
    }

    #[test]
    fn versions_sort_by_semver_with_prereleases() {
        let mut v: Vec<String> = [
            "v2.0.0",
            "v2.0.0-alpha.10",
            "v2.0.0-alpha.3",
            "v2.0.0-0.dev.1",
            "v1.9.0",
            "v2.1.0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        sort(&mut v);
        assert_eq!(
            v,
            [
                "v1.9.0",
                "v2.0.0-0.dev.1",
                "v2.0.0-alpha.3",
                "v2.0.0-alpha.10",
                "v2.0.0",
                "v2.1.0"
            ]
        );
    }

    #[test]
    fn filter_major_drops_other_majors_and_non_versions() {
        let tags = [
            "latest",
            "v0.2.0",
            "v1.0.0",
            "v0.1.0",
            "v0.1.0+meta",
            "0.3.0",
        ]
        .iter()
        .map(|s| s.to_string());
        assert_eq!(filter_major(tags, 0), ["v0.1.0", "v0.2.0"]);
    }

    #[test]
    fn coordinates_parse_and_check_major() {
        let m = parse_coordinate("fixtures.test/schema@v0.1.0").unwrap();
        assert_eq!(m.path, "fixtures.test/schema@v0");
        assert_eq!(m.version, "v0.1.0");
        let bad = ModuleVersion {
            path: "fixtures.test/schema@v1".into(),
            version: "v0.1.0".into(),
        };
        assert!(check_coordinate(&bad)
            .unwrap_err()
            .contains("not in major v1"));
        assert!(parse_coordinate("fixtures.test/schema@v1").is_err());
        assert!(major_of("v1.2").is_err());
    }
}
