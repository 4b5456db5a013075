//! CUE_REGISTRY-style mapping from module paths to registry locations (docs/design/render.md §2.3).
//!
//! Supported syntax: a comma-separated list of entries (whitespace around entries is ignored);
//! each entry is `PREFIX=LOCATION` or a bare `LOCATION`, the catch-all (at most one). A `LOCATION`
//! is one of:
//! - `host[:port][/repo-prefix][+insecure|+secure]`: an OCI distribution registry. `+insecure`
//!   means plain HTTP; `localhost`, `127.0.0.1` and `[::1]` are insecure unless `+secure` is given.
//!   Tags or digests (`:tag`, `@sha256:...` after the host) are refused.
//! - `none`: modules under the prefix may not be fetched at all.
//! - `oci:DIR`: an OCI image-layout directory (this project's extension; see `layout`).
//!
//! Matching is by the longest prefix that matches whole path elements (`foo.com/bar` matches
//! `foo.com/bar` and `foo.com/bar/baz`, never `foo.com/barn`). The entry order does not matter and a
//! prefix may appear only once. Without a catch-all the default is `registry.cue.works`, as in CUE.
//! The repository of a module is `<repo-prefix>/<module path without @vN>` (no prefix stripping:
//! CUE's config-file form with `stripPrefix`, `pathEncoding` and `prefixForTags` is not supported)
//! and its tag is the version.

use std::path::PathBuf;

/// Where modules under a prefix come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// An OCI distribution registry.
    Remote {
        /// `host[:port]`.
        host: String,
        /// Repository prefix without leading or trailing `/` (may be empty).
        repo_prefix: String,
        /// Plain HTTP instead of HTTPS.
        insecure: bool,
    },
    /// An OCI image-layout directory.
    Layout {
        /// The layout's root directory.
        dir: PathBuf,
    },
    /// Fetching is forbidden.
    None,
}

impl Location {
    /// The repository of a module (path without major) at this location.
    pub fn repository(&self, base: &str) -> String {
        match self {
            Location::Remote { repo_prefix, .. } if !repo_prefix.is_empty() => {
                format!("{repo_prefix}/{base}")
            }
            _ => base.to_string(),
        }
    }

    /// A stable key naming this location, used by the cache (so one version published to two
    /// registries is never confused).
    pub fn key(&self) -> String {
        match self {
            Location::Remote {
                host, repo_prefix, ..
            } => format!("{host}/{repo_prefix}"),
            Location::Layout { dir } => {
                let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
                format!("oci:{}", abs.display())
            }
            Location::None => "none".to_string(),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Remote {
                host,
                repo_prefix,
                insecure,
            } => {
                write!(f, "{host}")?;
                if !repo_prefix.is_empty() {
                    write!(f, "/{repo_prefix}")?;
                }
                if *insecure {
                    write!(f, "+insecure")?;
                }
                Ok(())
            }
            Location::Layout { dir } => write!(f, "oci:{}", dir.display()),
            Location::None => write!(f, "none"),
        }
    }
}

/// A parsed registry mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    default: Location,
    prefixes: Vec<(String, Location)>,
}

/// The catch-all CUE uses when none is given.
pub const CUE_DEFAULT_REGISTRY: &str = "registry.cue.works";

impl Mapping {
    /// Parses a CUE_REGISTRY value. An empty string gives the default mapping.
    pub fn parse(spec: &str) -> Result<Mapping, String> {
        let mut default: Option<Location> = None;
        let mut prefixes: Vec<(String, Location)> = Vec::new();
        for entry in spec.split(',').map(str::trim) {
            if entry.is_empty() {
                if spec.trim().is_empty() {
                    continue;
                }
                return Err(format!("empty entry in registry mapping {spec:?}"));
            }
            match entry.split_once('=') {
                Some((prefix, loc)) => {
                    let prefix = prefix.trim().trim_end_matches('/');
                    check_prefix(prefix)?;
                    if prefixes.iter().any(|(p, _)| p == prefix) {
                        return Err(format!("duplicate prefix {prefix:?} in registry mapping"));
                    }
                    prefixes.push((prefix.to_string(), parse_location(loc.trim())?));
                }
                None => {
                    if default.is_some() {
                        return Err(format!(
                            "more than one catch-all registry in mapping {spec:?}"
                        ));
                    }
                    default = Some(parse_location(entry)?);
                }
            }
        }
        let default = match default {
            Some(d) => d,
            None => parse_location(CUE_DEFAULT_REGISTRY)?,
        };
        Ok(Mapping { default, prefixes })
    }

    /// A mapping that sends every module to one location.
    pub fn single(location: Location) -> Mapping {
        Mapping {
            default: location,
            prefixes: Vec::new(),
        }
    }

    /// The location for a module path (without major): longest whole-element prefix, else the
    /// catch-all.
    pub fn resolve(&self, base: &str) -> &Location {
        self.prefixes
            .iter()
            .filter(|(p, _)| {
                base == p
                    || (base.len() > p.len() && base.starts_with(p.as_str()) && {
                        base.as_bytes().get(p.len()) == Some(&b'/')
                    })
            })
            .max_by_key(|(p, _)| p.len())
            .map(|(_, l)| l)
            .unwrap_or(&self.default)
    }

    /// All locations, the catch-all first.
    pub fn locations(&self) -> impl Iterator<Item = &Location> {
        std::iter::once(&self.default).chain(self.prefixes.iter().map(|(_, l)| l))
    }
}

fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("empty prefix in registry mapping".into());
    }
    if prefix
        .split('/')
        .any(|e| e.is_empty() || e == "." || e == ".." || e.contains('@'))
    {
        return Err(format!("invalid prefix {prefix:?} in registry mapping"));
    }
    Ok(())
}

fn parse_location(loc: &str) -> Result<Location, String> {
    if loc == "none" {
        return Ok(Location::None);
    }
    if let Some(dir) = loc.strip_prefix("oci:") {
        if dir.is_empty() {
            return Err("oci: location without a directory".into());
        }
        return Ok(Location::Layout {
            dir: PathBuf::from(dir),
        });
    }
    let (rest, security) = if let Some(r) = loc.strip_suffix("+insecure") {
        (r, Some(true))
    } else if let Some(r) = loc.strip_suffix("+secure") {
        (r, Some(false))
    } else {
        (loc, None)
    };
    if rest.is_empty() {
        return Err(format!("empty registry location {loc:?}"));
    }
    if rest.contains('@') {
        return Err(format!(
            "registry location {loc:?} may not contain a digest or '@'"
        ));
    }
    let (host, repo) = match rest.split_once('/') {
        Some((h, r)) => (h, r.trim_end_matches('/')),
        None => (rest, ""),
    };
    check_host(host).map_err(|e| format!("registry location {loc:?}: {e}"))?;
    if !repo.is_empty() {
        for elem in repo.split('/') {
            let ok = !elem.is_empty()
                && elem.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                });
            if !ok {
                return Err(format!(
                    "registry location {loc:?}: invalid repository prefix element {elem:?} (a tag is not allowed)"
                ));
            }
        }
    }
    let hostname = host_without_port(host);
    let local = matches!(hostname, "localhost" | "127.0.0.1" | "[::1]");
    Ok(Location::Remote {
        host: host.to_string(),
        repo_prefix: repo.to_string(),
        insecure: security.unwrap_or(local),
    })
}

fn host_without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(i) => &host[..=i],
            None => host,
        };
    }
    host.split_once(':').map(|(h, _)| h).unwrap_or(host)
}

fn check_host(host: &str) -> Result<(), String> {
    let (name, port) = if host.starts_with('[') {
        let end = host
            .find(']')
            .ok_or_else(|| format!("unterminated IPv6 host {host:?}"))?;
        let rest = &host[end + 1..];
        let port = match rest.strip_prefix(':') {
            Some(p) => Some(p),
            None if rest.is_empty() => None,
            None => return Err(format!("invalid host {host:?}")),
        };
        (&host[..=end], port)
    } else {
        match host.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host, None),
        }
    };
    if name.is_empty()
        || !(name.starts_with('[')
            || name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')))
    {
        return Err(format!("invalid host {host:?}"));
    }
    if let Some(p) = port {
        if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "invalid port {p:?} in {host:?} (a tag is not allowed)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(host: &str, repo: &str, insecure: bool) -> Location {
        Location::Remote {
            host: host.into(),
            repo_prefix: repo.into(),
            insecure,
        }
    }

    #[test]
    fn longest_whole_element_prefix_wins() {
        let m = Mapping::parse(
            "testing.opmodel.dev=ghcr.io/open-platform-model, opmodel.dev=ghcr.io/opm,registry.cue.works",
        )
        .unwrap();
        assert_eq!(
            m.resolve("opmodel.dev/catalogs/opm"),
            &remote("ghcr.io", "opm", false)
        );
        assert_eq!(
            m.resolve("testing.opmodel.dev/modules/web_app"),
            &remote("ghcr.io", "open-platform-model", false)
        );
        assert_eq!(
            m.resolve("opmodel.devx/a"),
            &remote("registry.cue.works", "", false)
        );
        let m = Mapping::parse("foo.com/bar=r1.io,foo.com=r2.io,r3.io").unwrap();
        assert_eq!(m.resolve("foo.com/bar"), &remote("r1.io", "", false));
        assert_eq!(m.resolve("foo.com/bar/x"), &remote("r1.io", "", false));
        assert_eq!(m.resolve("foo.com/barn"), &remote("r2.io", "", false));
        assert_eq!(m.resolve("other.org/x"), &remote("r3.io", "", false));
    }

    #[test]
    fn repository_joins_prefix_and_path() {
        let m = Mapping::parse("opmodel.dev=ghcr.io/open-platform-model").unwrap();
        assert_eq!(
            m.resolve("opmodel.dev/catalogs/opm")
                .repository("opmodel.dev/catalogs/opm"),
            "open-platform-model/opmodel.dev/catalogs/opm"
        );
        assert_eq!(
            remote("h", "", false).repository("a.b/c"),
            "a.b/c",
            "an empty prefix adds nothing"
        );
    }

    #[test]
    fn insecure_rules() {
        assert_eq!(
            Mapping::parse("127.0.0.1:5000").unwrap().resolve("x.y"),
            &remote("127.0.0.1:5000", "", true)
        );
        assert_eq!(
            Mapping::parse("localhost:5000+secure")
                .unwrap()
                .resolve("x.y"),
            &remote("localhost:5000", "", false)
        );
        assert_eq!(
            Mapping::parse("reg.example:8443/a/b+insecure")
                .unwrap()
                .resolve("x.y"),
            &remote("reg.example:8443", "a/b", true)
        );
        assert_eq!(
            Mapping::parse("[::1]:5000").unwrap().resolve("x.y"),
            &remote("[::1]:5000", "", true)
        );
    }

    #[test]
    fn none_layout_and_default() {
        let m = Mapping::parse("fixtures.test=none,oci:/tmp/layout").unwrap();
        assert_eq!(m.resolve("fixtures.test/a"), &Location::None);
        assert_eq!(
            m.resolve("x.y/z"),
            &Location::Layout {
                dir: "/tmp/layout".into()
            }
        );
        assert_eq!(
            Mapping::parse("").unwrap().resolve("x.y"),
            &remote("registry.cue.works", "", false)
        );
    }

    #[test]
    fn malformed_mappings_are_refused() {
        for bad in [
            "a.b=r.io,a.b=s.io",
            "r.io,s.io",
            "r.io/repo:tag",
            "r.io/repo@sha256:abc",
            "a.b=",
            "=r.io",
            "r.io,,s.io",
            "r.io/Upper",
            "ho st",
        ] {
            assert!(Mapping::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
