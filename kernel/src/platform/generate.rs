//! Generation of the platform module (docs/design/operator.md §3.3–§3.4; docs/design/render.md §1.4).
//!
//! The platform module is a pure function of (Platform spec, active claims) as [`PlatformInput`],
//! the core pin of the [`Generator`], and the published module files the closure reads. The same
//! inputs give byte-identical files.
//!
//! Files:
//! - `cue.mod/module.cue`: `module: "opmodel.dev/platforms/cluster@v0"`, `language.version`
//!   `v0.17.0`, `deps` = the full closure, sorted, in CUE's canonical module-file layout (tabs, one
//!   field per line, no `default` markers: every path of the closure is listed, and the platform
//!   imports every module with an explicit major). It must pin core and every entry.
//! - `platform.cue`: the generated header (ending "Never edit, never publish."), `package
//!   platform`, the imports (`core "<core path>"`, then `cat<i> "<entry path>"` positional in
//!   sorted entry order; only in the `#CatalogEntry` shape), `core.#Platform` embedded,
//!   `metadata: name: "cluster"`, `type: "<type>"` and `#registry`.
//! - [`RegistryShape::CatalogEntry`] (target, docs/design/decisions.md §17): each entry is `{enable: <bool>,
//!   version: "<bare semver>", #catalog: cat<i>}`; the stamped version is the expected-version
//!   tripwire (the schema derives `version` from the imported catalog) and the key binds to the
//!   catalog's `metadata.modulePath`.
//! - [`RegistryShape::Subscription`] (core alpha.4): each entry is `{enable: <bool>, version:
//!   "<bare semver>"}`; the catalogs of the *enabled* entries are imported (`cat<i>`, `i` the
//!   entry's position among all sorted entries) and `#composedTransformers` — the slot alpha.4
//!   leaves for the kernel to fill — is written as the same per-entry copy the target shape's
//!   fold computes (`for fqn, tf in cat<i>.#transformers {(fqn): tf}`, one comprehension per
//!   enabled entry; `{}` when none is enabled). That is the materialisation of docs/design/render.md §1.5
//!   written in CUE, so a render reads `#composedTransformers` in both shapes; the build still
//!   acquires each catalog by coordinate (identity, facts) and checks the fold against them.
//!
//! Errors: bad input (empty type, empty or malformed path or version, a version outside the path's
//! major, a duplicate entry) and a closure that misses a pin are [`GenerateError::Invalid`]
//! (`Other`, "generating platform module: …"); closure failures keep their class (`Resolution`
//! for an unpublished pin, `TransientPull` for an unreachable registry) under "resolving platform
//! dependencies: …".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use cue::module::{ModuleVersion, RegistryError};
use cue::path::quote;

use super::closure::{closure, ClosureError, ModFileSource};
use crate::{ErrorClass, KernelError, PlatformEntry, PlatformInput, PLATFORM_MODULE_PATH};

/// The language version the generated module declares (the floor of `local-module.cue`).
pub const LANGUAGE_VERSION: &str = "v0.17.0";

/// The platform name the generated package carries (the Platform singleton).
pub const PLATFORM_NAME: &str = "cluster";

/// Path of the generated module file inside the package directory.
pub const MODULE_FILE: &str = "cue.mod/module.cue";

/// Path of the generated platform package file inside the package directory.
pub const PLATFORM_FILE: &str = "platform.cue";

/// Which `#registry` entry shape the core's `#Platform` expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RegistryShape {
    /// Target shape: `#CatalogEntry` with the imported catalog and the expected-version tripwire.
    #[default]
    CatalogEntry,
    /// Core alpha.4 shape: `#Subscription` (`enable`, `version`), catalogs not imported.
    Subscription,
}

/// Why generation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// The input cannot form a platform module.
    #[error("generating platform module: {0}")]
    Invalid(String),
    /// The closure could not be computed.
    #[error("resolving platform dependencies: {0}")]
    Closure(#[from] ClosureError),
}

impl GenerateError {
    /// The class a caller acts on.
    pub fn class(&self) -> ErrorClass {
        match self {
            GenerateError::Invalid(_) => ErrorClass::Other,
            GenerateError::Closure(ClosureError::Resolution(RegistryError::Unverified {
                ..
            })) => ErrorClass::Verification,
            GenerateError::Closure(ClosureError::Resolution(_)) => ErrorClass::Resolution,
            GenerateError::Closure(ClosureError::Transient(_)) => ErrorClass::TransientPull,
        }
    }
}

impl From<GenerateError> for KernelError {
    fn from(e: GenerateError) -> Self {
        KernelError::new(e.class(), e.to_string())
    }
}

/// Generates platform modules for one core pin and registry shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generator {
    /// The core module path with major (`opmodel.dev/core@v2`; tests: `fixtures.test/core@v0`).
    pub core_path: String,
    /// The core version, `v`-prefixed.
    pub core_version: String,
    /// The `#registry` entry shape.
    pub shape: RegistryShape,
    /// The core definition the package embeds: `#Platform` (OPM's name in both shapes; the
    /// fixture core names its alpha.4 shape `#SubscriptionPlatform`).
    pub definition: String,
}

impl Generator {
    /// A generator embedding `core.#Platform`.
    pub fn new(core_path: &str, core_version: &str, shape: RegistryShape) -> Generator {
        Generator {
            core_path: core_path.to_string(),
            core_version: core_version.to_string(),
            shape,
            definition: "#Platform".to_string(),
        }
    }

    /// Computes the closure through `source` and returns the generated files, sorted by path.
    pub fn generate(
        &self,
        source: &dyn ModFileSource,
        input: &PlatformInput,
    ) -> Result<Vec<(String, Vec<u8>)>, GenerateError> {
        let roots = self.roots(input)?;
        let deps = closure(source, &roots)?;
        self.files(input, &deps)
    }

    /// The closure roots: core plus every entry (disabled included) at `"v" + version`, after
    /// checking the input.
    pub fn roots(&self, input: &PlatformInput) -> Result<Vec<ModuleVersion>, GenerateError> {
        let bad = GenerateError::Invalid;
        if input.platform_type.is_empty() {
            return Err(bad("the platform type is empty".into()));
        }
        check_path(&self.core_path).map_err(|e| bad(format!("core module: {e}")))?;
        let ident = self.definition.strip_prefix('#').unwrap_or("");
        if ident.is_empty() || !ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(format!(
                "the core definition {:?} is not a definition identifier",
                self.definition
            )));
        }
        let core = ModuleVersion {
            path: self.core_path.clone(),
            version: self.core_version.clone(),
        };
        check_version(&core).map_err(|e| bad(format!("core module: {e}")))?;
        let mut roots = vec![core];
        let mut seen = BTreeSet::new();
        for e in &input.entries {
            check_path(&e.path).map_err(|m| bad(format!("registry entry {:?}: {m}", e.path)))?;
            if e.path == self.core_path {
                return Err(bad(format!(
                    "registry entry {:?}: the core module cannot be a catalog entry",
                    e.path
                )));
            }
            if !seen.insert(e.path.as_str()) {
                return Err(bad(format!("registry entry {:?} is listed twice", e.path)));
            }
            if e.version.is_empty() {
                return Err(bad(format!(
                    "registry entry {:?}: version is required",
                    e.path
                )));
            }
            if e.version.starts_with('v') {
                return Err(bad(format!(
                    "registry entry {:?}: version {:?} must be bare SemVer (no \"v\" prefix)",
                    e.path, e.version
                )));
            }
            let m = ModuleVersion {
                path: e.path.clone(),
                version: format!("v{}", e.version),
            };
            check_version(&m).map_err(|msg| bad(format!("registry entry {:?}: {msg}", e.path)))?;
            roots.push(m);
        }
        Ok(roots)
    }

    /// Writes the two files for a computed closure (`deps`: `path@vN` → `v`-prefixed version).
    pub fn files(
        &self,
        input: &PlatformInput,
        deps: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, Vec<u8>)>, GenerateError> {
        let mut entries: Vec<_> = input.entries.iter().collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        for path in std::iter::once(&self.core_path).chain(entries.iter().map(|e| &e.path)) {
            if !deps.contains_key(path) {
                return Err(GenerateError::Invalid(format!(
                    "the dependency closure does not pin {path}"
                )));
            }
        }
        let module = module_file(deps);
        let mut p = String::new();
        p.push_str(
            "// Generated by opm-operator from the Platform \"cluster\" and its active provider\n\
             // claims; the operator builds it in place. Never edit, never publish.\n\n",
        );
        p.push_str("package platform\n\n");
        // The imported catalogs: every entry in the target shape (the entry binds its catalog),
        // the enabled ones in the alpha.4 shape (only the fold reads them, and CUE refuses an
        // unused import).
        let imported: Vec<(usize, &&PlatformEntry)> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| self.shape == RegistryShape::CatalogEntry || e.enable)
            .collect();
        if !imported.is_empty() {
            p.push_str("import (\n");
            let _ = writeln!(p, "\tcore {}", quote(&self.core_path));
            for (i, e) in &imported {
                let _ = writeln!(p, "\tcat{i} {}", quote(&e.path));
            }
            p.push_str(")\n\n");
        } else {
            let _ = writeln!(p, "import core {}\n", quote(&self.core_path));
        }
        let _ = writeln!(p, "core.{}\n", self.definition);
        let _ = writeln!(p, "metadata: name: {}", quote(PLATFORM_NAME));
        let _ = writeln!(p, "type: {}", quote(&input.platform_type));
        if entries.is_empty() {
            p.push_str("#registry: {}\n");
        } else {
            p.push_str("#registry: {\n");
            for (i, e) in entries.iter().enumerate() {
                let _ = writeln!(p, "\t{}: {{", quote(&e.path));
                // Values aligned as `cue fmt` aligns consecutive fields.
                if self.shape == RegistryShape::CatalogEntry {
                    let _ = writeln!(p, "\t\tenable:   {}", e.enable);
                    let _ = writeln!(p, "\t\tversion:  {}", quote(&e.version));
                    let _ = writeln!(p, "\t\t#catalog: cat{i}");
                } else {
                    let _ = writeln!(p, "\t\tenable:  {}", e.enable);
                    let _ = writeln!(p, "\t\tversion: {}", quote(&e.version));
                }
                p.push_str("\t}\n");
            }
            p.push_str("}\n");
        }
        if self.shape == RegistryShape::Subscription {
            if imported.is_empty() {
                p.push_str("#composedTransformers: {}\n");
            } else {
                p.push_str(
                    "\n// Materialised by the operator (alpha.4 leaves this slot to the kernel): the\n\
                     // enabled entries' transformers, copied per entry.\n\
                     #composedTransformers: {\n",
                );
                for (i, _) in &imported {
                    let _ = writeln!(p, "\tfor fqn, tf in cat{i}.#transformers {{(fqn): tf}}");
                }
                p.push_str("}\n");
            }
        }
        Ok(vec![
            (MODULE_FILE.to_string(), module.into_bytes()),
            (PLATFORM_FILE.to_string(), p.into_bytes()),
        ])
    }
}

/// The module file in CUE's canonical layout.
fn module_file(deps: &BTreeMap<String, String>) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "module: {}", quote(PLATFORM_MODULE_PATH));
    let _ = writeln!(
        m,
        "language: {{\n\tversion: {}\n}}",
        quote(LANGUAGE_VERSION)
    );
    if !deps.is_empty() {
        m.push_str("deps: {\n");
        for (path, v) in deps {
            let _ = writeln!(m, "\t{}: {{\n\t\tv: {}\n\t}}", quote(path), quote(v));
        }
        m.push_str("}\n");
    }
    m
}

/// `base@vN`, with a base of non-empty elements, no `@`, the first element a domain name.
fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the module path is empty".into());
    }
    let (base, major) = path
        .rsplit_once('@')
        .ok_or_else(|| format!("module path {path:?} has no major version suffix (@vN)"))?;
    let digits = major.strip_prefix('v').unwrap_or("");
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return Err(format!(
            "module path {path:?} has an invalid major suffix {major:?}"
        ));
    }
    cue::module::check_module_path(base)
}

/// A canonical `v`-prefixed semver in the major of the path.
fn check_version(m: &ModuleVersion) -> Result<(), String> {
    let v = m.version.strip_prefix('v').unwrap_or("");
    let parsed = semver::Version::parse(v)
        .ok()
        .filter(|p| p.build.is_empty())
        .ok_or_else(|| {
            format!(
                "version {:?} is not SemVer",
                &m.version[1.min(m.version.len())..]
            )
        })?;
    let major = m.path.rsplit_once("@v").map(|(_, n)| n).unwrap_or("");
    if major != parsed.major.to_string() {
        return Err(format!(
            "version {v:?} is not in the major of {} (@v{major})",
            m.path
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]
mod tests {
    use super::*;
    use crate::PlatformEntry;

    struct Flat(BTreeMap<ModuleVersion, Vec<(String, String)>>);

    impl ModFileSource for Flat {
        fn requirements(&self, m: &ModuleVersion) -> Result<Vec<(String, String)>, RegistryError> {
            self.0
                .get(m)
                .cloned()
                .ok_or_else(|| RegistryError::NotFound {
                    module: m.to_string(),
                    available: vec![],
                })
        }
    }

    fn gen(shape: RegistryShape) -> Generator {
        Generator::new("t.test/core@v0", "v0.1.0", shape)
    }

    fn source() -> Flat {
        let mv = |p: &str, v: &str| ModuleVersion {
            path: p.into(),
            version: v.into(),
        };
        let mut m = BTreeMap::new();
        m.insert(mv("t.test/core@v0", "v0.1.0"), vec![]);
        m.insert(
            mv("t.test/b@v0", "v0.2.0"),
            vec![
                ("t.test/core@v0".into(), "v0.1.0".into()),
                ("t.test/k@v0".into(), "v0.1.0".into()),
            ],
        );
        m.insert(mv("t.test/a@v1", "v1.0.0"), vec![]);
        m.insert(mv("t.test/k@v0", "v0.1.0"), vec![]);
        Flat(m)
    }

    fn input(entries: &[(&str, &str, bool)]) -> PlatformInput {
        PlatformInput {
            platform_type: "kubernetes".into(),
            entries: entries
                .iter()
                .map(|(p, v, e)| PlatformEntry {
                    path: p.to_string(),
                    version: v.to_string(),
                    enable: *e,
                })
                .collect(),
        }
    }

    fn text(files: &[(String, Vec<u8>)], name: &str) -> String {
        String::from_utf8(files.iter().find(|(p, _)| p == name).unwrap().1.clone()).unwrap()
    }

    #[test]
    fn catalog_entry_shape_is_exact_and_deterministic() {
        let i = input(&[
            ("t.test/b@v0", "0.2.0", true),
            ("t.test/a@v1", "1.0.0", false),
        ]);
        let files = gen(RegistryShape::CatalogEntry)
            .generate(&source(), &i)
            .unwrap();
        assert_eq!(
            text(&files, MODULE_FILE),
            "module: \"opmodel.dev/platforms/cluster@v0\"\nlanguage: {\n\tversion: \"v0.17.0\"\n}\n\
             deps: {\n\t\"t.test/a@v1\": {\n\t\tv: \"v1.0.0\"\n\t}\n\t\"t.test/b@v0\": {\n\t\tv: \"v0.2.0\"\n\t}\n\
             \t\"t.test/core@v0\": {\n\t\tv: \"v0.1.0\"\n\t}\n\t\"t.test/k@v0\": {\n\t\tv: \"v0.1.0\"\n\t}\n}\n"
        );
        let p = text(&files, PLATFORM_FILE);
        assert!(p.contains("Never edit, never publish.\n"), "{p}");
        assert!(
            p.contains("import (\n\tcore \"t.test/core@v0\"\n\tcat0 \"t.test/a@v1\"\n\tcat1 \"t.test/b@v0\"\n)\n"),
            "{p}"
        );
        assert!(
            p.contains("#registry: {\n\t\"t.test/a@v1\": {\n\t\tenable:   false\n\t\tversion:  \"1.0.0\"\n\t\t#catalog: cat0\n\t}\n"),
            "{p}"
        );
        // Entry order in the input does not matter.
        let again = input(&[
            ("t.test/a@v1", "1.0.0", false),
            ("t.test/b@v0", "0.2.0", true),
        ]);
        assert_eq!(
            gen(RegistryShape::CatalogEntry)
                .generate(&source(), &again)
                .unwrap(),
            files
        );
    }

    #[test]
    fn subscription_shape_and_empty_registry() {
        let files = gen(RegistryShape::Subscription)
            .generate(&source(), &input(&[("t.test/a@v1", "1.0.0", true)]))
            .unwrap();
        let p = text(&files, PLATFORM_FILE);
        assert!(
            p.contains("import (\n\tcore \"t.test/core@v0\"\n\tcat0 \"t.test/a@v1\"\n)\n"),
            "{p}"
        );
        assert!(!p.contains("#catalog"), "{p}");
        assert!(p.contains("\ncore.#Platform\n"), "{p}");
        assert!(
            p.contains("\t\"t.test/a@v1\": {\n\t\tenable:  true\n\t\tversion: \"1.0.0\"\n\t}\n"),
            "{p}"
        );
        assert!(
            p.ends_with(
                "#composedTransformers: {\n\tfor fqn, tf in cat0.#transformers {(fqn): tf}\n}\n"
            ),
            "{p}"
        );
        // A disabled entry is neither imported nor folded.
        let off = gen(RegistryShape::Subscription)
            .generate(&source(), &input(&[("t.test/a@v1", "1.0.0", false)]))
            .unwrap();
        let p = text(&off, PLATFORM_FILE);
        assert!(p.contains("import core \"t.test/core@v0\"\n"), "{p}");
        assert!(p.ends_with("}\n#composedTransformers: {}\n"), "{p}");
        let empty = gen(RegistryShape::CatalogEntry)
            .generate(&source(), &input(&[]))
            .unwrap();
        assert!(text(&empty, PLATFORM_FILE).contains("#registry: {}\n"));
    }

    #[test]
    fn bad_input_and_unpublished_pins_are_typed() {
        let g = gen(RegistryShape::CatalogEntry);
        let cases = [
            (input(&[("t.test/a@v1", "", true)]), "version is required"),
            (input(&[("t.test/a@v1", "0.1.0", true)]), "not in the major"),
            (
                input(&[("t.test/a", "1.0.0", true)]),
                "no major version suffix",
            ),
            (input(&[("t.test/a@v1", "v1.0.0", true)]), "bare SemVer"),
            (
                input(&[
                    ("t.test/a@v1", "1.0.0", true),
                    ("t.test/a@v1", "1.0.0", false),
                ]),
                "listed twice",
            ),
        ];
        for (i, want) in cases {
            let e = g.generate(&source(), &i).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Other, "{e}");
            assert!(
                e.to_string().starts_with("generating platform module: "),
                "{e}"
            );
            assert!(e.to_string().contains(want), "{e} lacks {want}");
        }
        let mut no_type = input(&[]);
        no_type.platform_type.clear();
        assert_eq!(
            g.generate(&source(), &no_type).unwrap_err().class(),
            ErrorClass::Other
        );
        let e = g
            .generate(&source(), &input(&[("t.test/a@v1", "1.2.0", true)]))
            .unwrap_err();
        assert_eq!(e.class(), ErrorClass::Resolution);
        assert!(
            e.to_string()
                .starts_with("resolving platform dependencies: t.test/a@v1.2.0"),
            "{e}"
        );
    }
}
