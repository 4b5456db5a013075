//! The render module's dependency list: promotion and skew (docs/design/render.md §1.7, docs/design/decisions.md §18;
//! docs/design/operator.md §3.3).
//!
//! Rules:
//! - The render build's main module is the staged instance module; its `cue.mod/module.cue` is
//!   rewritten with the **promoted** deps: the module's own requirements plus the platform's
//!   tidied list, the platform's version winning on every shared path (the platform is the
//!   authority on shared paths). A path is `default: true` when either side says so, so a major-less
//!   import that resolves in the platform module (e.g. the catalog's kube import) resolves here too.
//! - **Skew** compares, per path, the module's own requirement with the platform's tidied list
//!   (never the promoted list): a module requirement newer than the platform's pin is a finding
//!   (Warn: a warning; Refuse: an error); an older one is plain data.
//! - Module files are `cue::module::ModuleFile` everywhere (the module system's one type); this
//!   file only adds the render's promotion and skew over it.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use cue::module::{Dep, ModuleFile, SourceKind};

/// Parses `cue.mod/module.cue` bytes.
pub fn parse_module_file(bytes: &[u8]) -> Result<ModuleFile, String> {
    ModuleFile::parse(bytes)
}

/// Writes a module file as CUE.
pub fn write_module_file(m: &ModuleFile) -> String {
    m.to_cue()
}

/// One dependency on which the module is newer than the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkewFinding {
    /// `path@vN`.
    pub dep: String,
    /// The module's requirement.
    pub module_version: String,
    /// The platform's pin.
    pub platform_version: String,
}

/// The module file of the render build: `module`'s identity with the promoted deps.
/// `platform_defaults` are the platform's `default: true` paths.
pub fn promote(
    module: &ModuleFile,
    platform: &BTreeMap<String, String>,
    platform_defaults: &[String],
) -> ModuleFile {
    let mut deps: BTreeMap<String, Dep> = module.deps.clone();
    for (path, version) in platform {
        if *path == module.module {
            continue;
        }
        let default = platform_defaults.iter().any(|d| d == path)
            || deps.get(path).is_some_and(|d| d.default);
        deps.insert(
            path.clone(),
            Dep {
                version: version.clone(),
                default,
            },
        );
    }
    ModuleFile {
        module: module.module.clone(),
        language_version: module
            .language_version
            .clone()
            .or_else(|| Some("v0.17.0".to_string())),
        source: Some(SourceKind::SelfFiles),
        deps,
    }
}

/// The dependencies on which `module` requires a newer version than `platform` pins.
pub fn skew(module: &ModuleFile, platform: &BTreeMap<String, String>) -> Vec<SkewFinding> {
    module
        .deps
        .iter()
        .filter_map(|(path, dep)| {
            let pinned = platform.get(path)?;
            (cue::module::semver::compare(&dep.version, pinned) == Ordering::Greater).then(|| {
                SkewFinding {
                    dep: path.clone(),
                    module_version: dep.version.clone(),
                    platform_version: pinned.clone(),
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn module() -> ModuleFile {
        parse_module_file(
            br#"module: "fixtures.test/modules/demo@v0"
language: version: "v0.17.0"
deps: {
	"fixtures.test/catalogs/mini@v0": {v: "v0.2.0"}
	"fixtures.test/core@v0": {v: "v0.1.0"}
	"fixtures.test/x/kube@v0": {v: "v0.1.0", default: true}
}
"#,
        )
        .unwrap()
    }

    fn platform() -> BTreeMap<String, String> {
        [
            ("fixtures.test/catalogs/mini@v0", "v0.1.0"),
            ("fixtures.test/core@v0", "v0.1.1"),
            ("fixtures.test/catalogs/gateway@v0", "v0.1.0"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    #[test]
    fn platform_wins_every_shared_path_and_adds_its_own() {
        let p = promote(&module(), &platform(), &[]);
        let v = |k: &str| p.deps.get(k).map(|d| d.version.clone());
        assert_eq!(
            v("fixtures.test/catalogs/mini@v0").as_deref(),
            Some("v0.1.0")
        );
        assert_eq!(v("fixtures.test/core@v0").as_deref(), Some("v0.1.1"));
        assert_eq!(
            v("fixtures.test/catalogs/gateway@v0").as_deref(),
            Some("v0.1.0")
        );
        assert_eq!(v("fixtures.test/x/kube@v0").as_deref(), Some("v0.1.0"));
        assert!(p.deps["fixtures.test/x/kube@v0"].default);
        assert_eq!(p.module, "fixtures.test/modules/demo@v0");
    }

    #[test]
    fn only_newer_module_requirements_are_skew() {
        let s = skew(&module(), &platform());
        assert_eq!(
            s,
            vec![SkewFinding {
                dep: "fixtures.test/catalogs/mini@v0".into(),
                module_version: "v0.2.0".into(),
                platform_version: "v0.1.0".into(),
            }]
        );
    }
}
