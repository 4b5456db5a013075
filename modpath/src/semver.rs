//! Semantic versions as CUE modules use them (`v`-prefixed, semver 2.0.0; upstream
//! `internal/mod/semver`).
//!
//! Rules:
//! - A version is `vMAJOR.MINOR.PATCH`, optionally `-PRERELEASE` and `+BUILD`; numbers have no
//!   leading zeros. Canonical versions are full (no `v1` / `v1.2` shorthand).
//! - Order: by major, minor, patch; a prerelease sorts before its release; prerelease identifiers
//!   compare numerically when both are numeric, numeric before alphanumeric, otherwise as ASCII;
//!   a shorter identifier list sorts first when all shared identifiers are equal. Build metadata
//!   is ignored.

use std::cmp::Ordering;

/// A parsed version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// Major number.
    pub major: u64,
    /// Minor number.
    pub minor: u64,
    /// Patch number.
    pub patch: u64,
    /// Dot-separated prerelease identifiers (empty for a release).
    pub pre: Vec<String>,
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

impl Version {
    /// Parses a canonical `vX.Y.Z[-pre][+build]` version.
    pub fn parse(s: &str) -> Option<Version> {
        let rest = s.strip_prefix('v')?;
        let rest = match rest.split_once('+') {
            Some((r, build)) => {
                if build.is_empty()
                    || !build.split('.').all(|id| {
                        !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    })
                {
                    return None;
                }
                r
            }
            None => rest,
        };
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (rest, None),
        };
        let mut nums = core.split('.');
        let major = number(nums.next()?)?;
        let minor = number(nums.next()?)?;
        let patch = number(nums.next()?)?;
        if nums.next().is_some() {
            return None;
        }
        let pre = match pre {
            None => Vec::new(),
            Some(p) => {
                let ids: Vec<String> = p.split('.').map(str::to_string).collect();
                for id in &ids {
                    if id.is_empty()
                        || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        || (id.bytes().all(|b| b.is_ascii_digit()) && number(id).is_none())
                    {
                        return None;
                    }
                }
                ids
            }
        };
        Some(Version {
            major,
            minor,
            patch,
            pre,
        })
    }
}

fn cmp_pre(a: &[String], b: &[String]) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    for (x, y) in a.iter().zip(b) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(n), Ok(m))
                if x.bytes().all(|c| c.is_ascii_digit())
                    && y.bytes().all(|c| c.is_ascii_digit()) =>
            {
                n.cmp(&m)
            }
            _ => {
                let xn = x.bytes().all(|c| c.is_ascii_digit());
                let yn = y.bytes().all(|c| c.is_ascii_digit());
                match (xn, yn) {
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    _ => x.cmp(y),
                }
            }
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

impl Ord for Version {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(o.major, o.minor, o.patch))
            .then_with(|| cmp_pre(&self.pre, &o.pre))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Compares two version strings; unparsable versions sort before all valid ones (and among
/// themselves as strings).
pub fn compare(a: &str, b: &str) -> Ordering {
    match (Version::parse(a), Version::parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => a.cmp(b),
    }
}

/// A version a registry tag may carry: canonical, without build metadata (`+...`), as CUE refuses
/// build metadata in module versions.
pub fn parse_tag(s: &str) -> Option<Version> {
    if s.contains('+') {
        return None;
    }
    Version::parse(s)
}

/// Keeps the tags that are module versions ([`parse_tag`]) in major `major`, ascending, without
/// duplicates.
pub fn filter_major(tags: impl IntoIterator<Item = String>, major: u64) -> Vec<String> {
    let mut out: Vec<String> = tags
        .into_iter()
        .filter(|t| parse_tag(t).is_some_and(|v| v.major == major))
        .collect();
    out.sort_by(|a, b| compare(a, b).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

/// `true` if `s` is a major-version suffix `vN` (no leading zeros).
pub fn is_major(s: &str) -> bool {
    s.strip_prefix('v').and_then(number).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_filter_by_major_in_precedence_order() {
        let tags = [
            "v2.0.0",
            "v1.10.0",
            "v1.2.0",
            "v1.2.0-rc.1",
            "latest",
            "v1.2.0+b",
            "1.3.0",
            "v1.2.0",
        ]
        .map(String::from);
        assert_eq!(
            filter_major(tags.clone(), 1),
            ["v1.2.0-rc.1", "v1.2.0", "v1.10.0"]
        );
        assert_eq!(filter_major(tags, 2), ["v2.0.0"]);
        assert!(parse_tag("v1.0.0+meta").is_none());
    }

    #[test]
    fn parses_and_orders() {
        assert!(Version::parse("v1.2.3").is_some());
        assert!(Version::parse("v2.0.0-alpha.4+meta").is_some());
        for bad in [
            "1.2.3",
            "v1.2",
            "v01.2.3",
            "v1.2.3-",
            "v1.2.3-01",
            "v1.2.3+",
        ] {
            assert!(Version::parse(bad).is_none(), "{bad}");
        }
        let mut vs = vec![
            "v2.0.0",
            "v2.0.0-alpha.10",
            "v2.0.0-alpha.4",
            "v2.0.0-0.dev.1",
            "v1.9.9",
            "v2.0.0-alpha",
            "v2.0.0-beta",
        ];
        vs.sort_by(|a, b| compare(a, b));
        assert_eq!(
            vs,
            vec![
                "v1.9.9",
                "v2.0.0-0.dev.1",
                "v2.0.0-alpha",
                "v2.0.0-alpha.4",
                "v2.0.0-alpha.10",
                "v2.0.0-beta",
                "v2.0.0"
            ]
        );
        assert!(is_major("v0") && is_major("v12") && !is_major("v01") && !is_major("1"));
    }
}
