//! Syntax checks shared by both webhooks. Each check returns `Err(reason)` with a sentence that names
//! what is wrong; callers prefix the field path.
//!
//! Rules:
//! - **Module path** and **major-suffixed module path** (`path@v<N>`): the rules of
//!   `cue_modpath::path` (upstream CUE's `CheckPath`), shared with the loader and the registry
//!   client: lower-case `[a-z0-9._-]` elements in OCI repository-name form, the first a host name
//!   containing a dot; `N` a decimal without leading zeros. The major is returned.
//! - **Bare SemVer**: SemVer 2.0.0 exactly (`MAJOR.MINOR.PATCH[-pre][+build]`, no leading zeros), no
//!   `v` prefix, no range operators (`^`, `~`, `>=`, `*`, `x`, spaces, `||`).
//! - **Contract FQN**: `<module path>/<name>@v<N>`: a module path of at least one element (its first
//!   element a host as above) followed by a kebab-case name (`[a-z0-9]` at both ends, `[a-z0-9-]`
//!   inside) and the contract's major `@v<N>`. An implementation FQN (`...@1.2.3`, a transformer) is
//!   refused with that hint, because claims list the contracts they fulfil, not transformers.
//! - **Reserved namespace**: `opmodel.dev/platforms/` is the generated platform module's namespace
//!   (docs/design/operator.md §1.5: `opmodel.dev/platforms/cluster@v0`, never published), so nothing may claim
//!   or subscribe to a path under it.
//! - **Core schema**: `opmodel.dev/core@vN` is the core schema the operator pins itself (§3.3), not a
//!   catalog, so it can be neither claimed nor subscribed.

/// The core schema module's path (without major). The operator pins it itself as a closure root
/// (docs/design/operator.md §3.3), so it is never a catalog: not claimable, not subscribable.
pub const CORE_MODULE_PATH: &str = "opmodel.dev/core";

/// The generated platform module's reserved, never-published namespace.
pub const RESERVED_PLATFORMS_PREFIX: &str = "opmodel.dev/platforms/";

/// Checks a module path without a version suffix, by the project's one set of module-path rules
/// ([`cue_modpath::path::check_path`], upstream `CheckPathWithoutVersion`).
pub fn check_module_path(path: &str) -> Result<(), String> {
    cue_modpath::path::check_path(path).map_err(|e| e.reason.to_string())
}

/// Parses `@v<N>` (without the `@`) into N ([`cue_modpath::path::parse_major`]).
fn parse_major_suffix(suffix: &str) -> Result<u64, String> {
    cue_modpath::path::parse_major(suffix).ok_or_else(|| {
        format!("the version suffix @{suffix} must be a major version like @v1 (no leading zero)")
    })
}

/// Checks a major-suffixed module path (`example.com/catalogs/x@v1`) and returns (path, major),
/// by [`cue_modpath::path::check_path_with_major`].
pub fn check_major_module_path(s: &str) -> Result<(&str, u64), String> {
    use cue_modpath::path::PathProblem;
    cue_modpath::path::check_path_with_major(s).map_err(|e| match e.reason {
        PathProblem::MissingMajor => format!("{s:?} must end in a major version suffix like @v1"),
        PathProblem::BadMajor(suffix) if suffix.contains('.') => format!(
            "{s:?} must end in a major version suffix like @v1, not a full version (@{suffix})"
        ),
        reason => format!("{s:?} is not a valid module path: {reason}"),
    })
}

/// Whether a path (with or without suffix) lies under the reserved platforms namespace.
pub fn is_reserved(path: &str) -> bool {
    path.starts_with(RESERVED_PLATFORMS_PREFIX)
        || path.split('@').next() == Some("opmodel.dev/platforms")
}

/// Checks a bare SemVer version and returns it parsed.
pub fn check_bare_semver(v: &str) -> Result<semver::Version, String> {
    if v.is_empty() {
        return Err("the version is empty".to_owned());
    }
    if v.starts_with(['v', 'V']) {
        return Err(format!(
            "{v:?} must be a bare SemVer version without the 'v' prefix (e.g. {:?})",
            &v[1..]
        ));
    }
    if v.contains(['^', '~', '>', '<', '=', '*', ' ', '|', ','])
        || v.split('.').any(|p| p == "x" || p == "X")
    {
        return Err(format!(
            "{v:?} is a version range, but one exact SemVer version is required (e.g. 1.2.3)"
        ));
    }
    semver::Version::parse(v)
        .map_err(|e| format!("{v:?} is not a SemVer version (MAJOR.MINOR.PATCH): {e}"))
}

fn is_kebab(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Checks a contract FQN (`opmodel.dev/resources/workload/container@v1`).
pub fn check_contract_fqn(fqn: &str) -> Result<(), String> {
    let Some((path, suffix)) = fqn.rsplit_once('@') else {
        return Err(format!(
            "{fqn:?} is not a contract FQN (<module path>/<name>@v<N>): no @v<N> suffix"
        ));
    };
    if semver::Version::parse(suffix).is_ok() {
        return Err(format!(
            "{fqn:?} is a transformer (implementation) FQN, but a claim lists the contracts the catalog fulfils (<path>/<name>@v<N>)"
        ));
    }
    parse_major_suffix(suffix).map_err(|e| format!("{fqn:?} is not a contract FQN: {e}"))?;
    let Some((module, name)) = path.rsplit_once('/') else {
        return Err(format!(
            "{fqn:?} is not a contract FQN (<module path>/<name>@v<N>): no module path"
        ));
    };
    check_module_path(module).map_err(|e| format!("{fqn:?} is not a contract FQN: {e}"))?;
    if !is_kebab(name) {
        return Err(format!(
            "{fqn:?} is not a contract FQN: the name {name:?} must be kebab-case (a-z 0-9 -)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_module_paths() {
        assert_eq!(
            check_major_module_path("example.com/catalogs/x@v1").unwrap(),
            ("example.com/catalogs/x", 1)
        );
        assert_eq!(
            check_major_module_path("opmodel.dev/catalogs/opm@v12")
                .unwrap()
                .1,
            12
        );
        assert_eq!(check_major_module_path("a.b/c_d/e.f/g-h@v0").unwrap().1, 0);
        for bad in [
            "example.com/catalogs/x",
            "example.com/catalogs/x@1",
            "example.com/catalogs/x@v1.2.3",
            "example.com/catalogs/x@v01",
            "example.com/catalogs/x@v",
            "Example.com/x@v1",
            "example/x@v1",
            "example.com//x@v1",
            "example.com/x/@v1",
            "example.com/X@v1",
            "example.com/.x@v1",
            "-example.com/x@v1",
            "example.com/a b@v1",
            "a.b/e~f@v1",
            "@v1",
        ] {
            assert!(
                check_major_module_path(bad).is_err(),
                "{bad} should be refused"
            );
        }
    }

    #[test]
    fn semver_rules() {
        assert!(check_bare_semver("1.2.3").is_ok());
        assert!(check_bare_semver("2.0.0-alpha.3").is_ok());
        assert!(check_bare_semver("1.0.0+build.5").is_ok());
        for bad in [
            "v1.2.3",
            "1.2",
            "^1.2.3",
            ">=1.0.0",
            "1.x",
            "01.2.3",
            "",
            "1.2.3 || 2.0.0",
            "latest",
        ] {
            assert!(check_bare_semver(bad).is_err(), "{bad} should be refused");
        }
        assert!(check_bare_semver("v1.2.3")
            .unwrap_err()
            .contains("'v' prefix"));
        assert!(check_bare_semver("~1.2.3").unwrap_err().contains("range"));
    }

    #[test]
    fn contract_fqns() {
        assert!(check_contract_fqn("opmodel.dev/resources/workload/container@v1").is_ok());
        assert!(check_contract_fqn("example.com/backup@v0").is_ok());
        assert!(check_contract_fqn("example.com/t/backup@1.2.3")
            .unwrap_err()
            .contains("transformer"));
        for bad in [
            "backup@v1",
            "example.com/Backup@v1",
            "example.com/backup",
            "example.com/backup-@v1",
            "example.com/b_c@v1",
        ] {
            assert!(check_contract_fqn(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn reserved_namespace() {
        assert!(is_reserved("opmodel.dev/platforms/cluster@v0"));
        assert!(is_reserved("opmodel.dev/platforms@v0"));
        assert!(!is_reserved("opmodel.dev/platformsx/y@v0"));
        assert!(!is_reserved("opmodel.dev/catalogs/opm@v2"));
    }
}
