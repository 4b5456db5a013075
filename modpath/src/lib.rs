//! cue-modpath: the syntax of CUE module coordinates, the one home of the module-path rules for
//! every crate of the project (the evaluator's loader, the registry client, the webhooks), so a
//! crate that checks a path need not depend on the evaluator.
//!
//! - [`path`]: module paths and major suffixes (upstream `mod/module/path.go`), coordinates.
//! - [`semver`]: module versions (`vMAJOR.MINOR.PATCH[-PRE]`), their order and majors.
//! - [`ModuleVersion`]: a coordinate (`path@vN` + exact version).
//!
//! Architecture invariant: std and thiserror only; no I/O.

pub mod path;
pub mod semver;

/// A module coordinate: `path@vMAJOR` plus an exact version, e.g. `example.com/lib@v1` + `v1.2.3`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModuleVersion {
    /// Module path with major suffix (`example.com/lib@v1`).
    pub path: String,
    /// Exact canonical semver with `v` prefix (`v1.2.3`).
    pub version: String,
}

impl std::fmt::Display for ModuleVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `example.com/lib@v1` + `v1.2.3` is written `example.com/lib@v1.2.3`.
        let base = self
            .path
            .split_once('@')
            .map(|(p, _)| p)
            .unwrap_or(&self.path);
        write!(f, "{}@{}", base, self.version)
    }
}
