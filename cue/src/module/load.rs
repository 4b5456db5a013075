//! The package loader (docs/design/render.md §2.4; upstream `cue/load` and `internal/mod/modpkgload`):
//! finds the files of a package and of everything it imports, parses them once, and links the
//! imports. No evaluation happens here.
//!
//! Rules:
//! - The main module is the [`FileSystem`] given to [`load`]; its `cue.mod/module.cue` is optional
//!   (without it only std imports resolve).
//! - A package directory contributes its `.cue` files with the wanted `package` clause; names
//!   starting with `_` or `.` and `*_test.cue` / `*_tool.cue` files are left out. Inside a module,
//!   files with the same package name in every parent directory up to the module root are part
//!   of the instance too. Files without a package clause are accepted only as explicit files
//!   ([`Target::Files`]) or as an anonymous main package (`_`) when a directory has no other.
//!   A file of a directory whose build constraint (`@if(expr)` before the package clause) does
//!   not hold is left out; no tag is set, so a tag reads false (`@if(!debug)` holds). A
//!   directory all of whose files are left out so is an error.
//! - A `.json` file is read as CUE (JSON is CUE syntax) once it is checked to be JSON: what
//!   CUE accepts and JSON does not (a comma left out at a line end, a bare label, an empty
//!   file) is a syntax error of the file.
//! - An import path is `path[@vN][:qualifier]`. A first element without a dot is a std package
//!   (unless the main module's path owns it and [`is_std_package`] does not know it). Otherwise
//!   the module is the longest element-wise prefix among the main module and the dependencies:
//!   an explicit `@vN` picks that major; without one, the dependency marked `default: true`, or
//!   the only major listed. The package directory is the rest of the path; the package name is
//!   the qualifier, or else the last path element.
//! - An import no module provides is looked up in the main module's legacy directories
//!   `cue.mod/gen/<path>`, `cue.mod/pkg/<path>` and `cue.mod/usr/<path>` (all that exist form
//!   one instance).
//! - Dependency tables and versions come from the main module's `deps`; a dependency's own
//!   `deps` fill in paths the main module does not list (a tidy main module lists them all).
//!   Modules are fetched once through [`Registry::fetch`] at that exact version.
//! - Each instance is loaded once and shared by index. An import that reaches a package still
//!   being loaded is an import cycle, reported with the chain of import paths.
//! - Loading never stops at the first problem: errors are collected (with the import spec's span
//!   where one exists) and the rest of the build is still loaded.

use super::file::{parse_module_file, split_major, Dep, ModuleFile, ModuleFileError};
use super::registry::{FileSystem, FsError, ModuleVersion, Registry, RegistryError};
use super::semver;
use crate::ast::{self, ImportSpec, ParseError};
use crate::builtins::is_std_package;
use crate::parser::parse_file;
use crate::source::{FileId, SourceMap, Span};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// What to load from the main module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The package in a directory (`""` is the module root), like `cue export ./dir`.
    Dir(String),
    /// Explicit files (paths relative to the main module root), like `cue export a.cue b.cue`.
    Files(Vec<String>),
}

/// A parsed file of an instance.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedFile {
    /// Its id in [`LoadedBuild::sources`].
    pub id: FileId,
    /// Its name in the source map (module-relative path; prefixed by `module@version/` for
    /// dependency modules).
    pub name: String,
    /// The syntax tree (shared with the parse cache for dependency-module files).
    pub ast: Arc<ast::File>,
}

/// One package instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// The canonical import path (`example.com/lib/sub`, `:name` appended when the package name
    /// is not the last element).
    pub import_path: String,
    /// The package name (`_` for an anonymous package).
    pub package: String,
    /// The module (`path@vN`) the instance belongs to; `None` without a main module file.
    pub module: Option<String>,
    /// The exact version for dependency modules; `None` for the main module.
    pub version: Option<String>,
    /// The directory within its module.
    pub dir: String,
    /// The files, in load order (parent directories first, then by name).
    pub files: Vec<LoadedFile>,
    /// Non-std imports: the import path exactly as written → instance index.
    pub imports: BTreeMap<String, usize>,
    /// Std imports, as written (`strings`, `encoding/json`).
    pub std_imports: BTreeSet<String>,
}

/// The result of [`load`]: all instances, the main one at [`LoadedBuild::root`].
#[derive(Debug)]
pub struct LoadedBuild {
    /// Every instance, each once.
    pub instances: Vec<Instance>,
    /// Index of the main instance.
    pub root: usize,
    /// Names and contents of all parsed files.
    pub sources: SourceMap,
    /// The main module's `cue.mod/module.cue`, if it has a valid one.
    pub main_module: Option<ModuleFile>,
    /// Everything that went wrong; empty for a clean load.
    pub errors: Vec<LoadError>,
}

/// A loading problem (carried by [`crate::Error::Load`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadError {
    /// A syntax error in a source file.
    Parse {
        /// The file's name.
        file: String,
        /// The error.
        error: ParseError,
    },
    /// A `cue.mod/module.cue` is invalid.
    ModuleFile {
        /// The file's name.
        file: String,
        /// The error.
        error: ModuleFileError,
    },
    /// Reading a file or directory failed.
    Fs {
        /// The error.
        source: FsError,
        /// The import that led here, if any.
        span: Option<Span>,
    },
    /// No module provides the package, or its directory has no files of that package.
    PackageNotFound {
        /// The import path.
        path: String,
        /// Why.
        reason: String,
        /// The import spec.
        span: Option<Span>,
    },
    /// An import path is malformed or ambiguous.
    InvalidImport {
        /// The import path.
        path: String,
        /// Why.
        reason: String,
        /// The import spec.
        span: Span,
    },
    /// Packages import each other in a cycle.
    ImportCycle {
        /// The chain of import paths, first and last equal.
        cycle: Vec<String>,
        /// The import closing the cycle.
        span: Span,
    },
    /// Fetching a dependency module failed.
    Registry {
        /// The error.
        source: RegistryError,
        /// The import that needed the module, if any.
        span: Option<Span>,
    },
    /// The files of a directory or file list do not form one package.
    Package {
        /// The directory or file list.
        dir: String,
        /// What is wrong.
        reason: String,
    },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Parse { file, error } => write!(f, "{file}: {}", error.message),
            LoadError::ModuleFile { file, error } => write!(f, "{file}: {}", error.message),
            LoadError::Fs { source, .. } => write!(f, "{source}"),
            LoadError::PackageNotFound { path, reason, .. } => {
                write!(f, "cannot find package {path:?}: {reason}")
            }
            LoadError::InvalidImport { path, reason, .. } => {
                write!(f, "invalid import path {path:?}: {reason}")
            }
            LoadError::ImportCycle { cycle, .. } => {
                write!(f, "import cycle not allowed: {}", cycle.join(" imports "))
            }
            LoadError::Registry { source, .. } => write!(f, "{source}"),
            LoadError::Package { reason, .. } => f.write_str(reason),
        }
    }
}

impl LoadError {
    /// The source position the error concerns, if any.
    pub fn span(&self) -> Option<Span> {
        match self {
            LoadError::Parse { error, .. } => Some(error.span),
            LoadError::ModuleFile { error, .. } => Some(error.span),
            LoadError::Fs { span, .. }
            | LoadError::PackageNotFound { span, .. }
            | LoadError::Registry { span, .. } => *span,
            LoadError::InvalidImport { span, .. } | LoadError::ImportCycle { span, .. } => {
                Some(*span)
            }
            LoadError::Package { .. } => None,
        }
    }
}

/// Which module a package lives in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum ModCtx {
    Main,
    Dep(ModuleVersion),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InstKey {
    module: ModCtx,
    dir: String,
    package: String,
}

struct DepModule {
    fs: Arc<dyn FileSystem>,
    file: Option<ModuleFile>,
}

struct Loader<'a> {
    main_fs: &'a dyn FileSystem,
    registry: Option<&'a dyn Registry>,
    main: Option<ModuleFile>,
    sources: SourceMap,
    instances: Vec<Instance>,
    by_key: HashMap<InstKey, usize>,
    /// Instances being loaded, innermost last, with their import paths.
    stack: Vec<(InstKey, String)>,
    modules: HashMap<ModuleVersion, Option<DepModule>>,
    errors: Vec<LoadError>,
}

const MODULE_FILE: &str = "cue.mod/module.cue";

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn parent_dirs(dir: &str) -> Vec<String> {
    // "a/b/c" → ["", "a", "a/b"].
    let mut out = vec![String::new()];
    if dir.is_empty() {
        return Vec::new();
    }
    let elems: Vec<&str> = dir.split('/').collect();
    for i in 1..elems.len() {
        out.push(elems[..i].join("/"));
    }
    out
}

fn is_source_file(name: &str) -> bool {
    name.ends_with(".cue")
        && !name.starts_with('_')
        && !name.starts_with('.')
        && !name.ends_with("_test.cue")
        && !name.ends_with("_tool.cue")
}

/// Splits `path[@vN][:qualifier]` into (path, major, qualifier).
fn split_import(p: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, qual) = match p.rsplit_once(':') {
        Some((r, q)) if !q.contains('/') => (r, Some(q)),
        _ => (p, None),
    };
    let (path, major) = match rest.rsplit_once('@') {
        Some((base, m)) if !m.contains('/') => (base, Some(m)),
        _ => (rest, None),
    };
    (path, major, qual)
}

fn is_ident(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && cs.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// `true` if `prefix` is `path` or a `/`-element prefix of it.
fn has_path_prefix(path: &str, prefix: &str) -> bool {
    path == prefix || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

/// Loads a package of the main module and everything it imports.
pub fn load(fs: &dyn FileSystem, target: &Target, registry: Option<&dyn Registry>) -> LoadedBuild {
    let mut l = Loader {
        main_fs: fs,
        registry,
        main: None,
        sources: SourceMap::new(),
        instances: Vec::new(),
        by_key: HashMap::new(),
        stack: Vec::new(),
        modules: HashMap::new(),
        errors: Vec::new(),
    };
    l.main = l.read_module_file(fs, MODULE_FILE.to_string(), true);
    let root = match target {
        Target::Dir(dir) => {
            let dir = dir.trim_matches('/').trim_start_matches("./").to_string();
            let dir = if dir == "." { String::new() } else { dir };
            l.load_dir(ModCtx::Main, &dir, None, None)
        }
        Target::Files(files) => l.load_files(files),
    };
    let root = root.unwrap_or_else(|| {
        // Nothing could be loaded: an empty instance keeps the result well-formed.
        l.instances.push(Instance {
            import_path: String::new(),
            package: "_".into(),
            module: l.main.as_ref().map(|m| m.path_with_major()),
            version: None,
            dir: String::new(),
            files: Vec::new(),
            imports: BTreeMap::new(),
            std_imports: BTreeSet::new(),
        });
        l.instances.len() - 1
    });
    LoadedBuild {
        instances: l.instances,
        root,
        sources: l.sources,
        main_module: l.main,
        errors: l.errors,
    }
}

impl<'a> Loader<'a> {
    fn read_module_file(
        &mut self,
        fs: &dyn FileSystem,
        name: String,
        optional: bool,
    ) -> Option<ModuleFile> {
        let bytes = match fs.read_file(MODULE_FILE) {
            Ok(b) => b,
            Err(FsError::NotFound(_)) if optional => return None,
            Err(e) => {
                self.errors.push(LoadError::Fs {
                    source: e,
                    span: None,
                });
                return None;
            }
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let id = self.sources.add(name.clone(), text.as_str());
        match parse_module_file(id, &text) {
            Ok(m) => Some(m),
            Err(errs) => {
                for error in errs {
                    self.errors.push(LoadError::ModuleFile {
                        file: name.clone(),
                        error,
                    });
                }
                None
            }
        }
    }

    fn fs_of(&self, ctx: &ModCtx) -> Option<&dyn FileSystem> {
        match ctx {
            ModCtx::Main => Some(self.main_fs),
            ModCtx::Dep(mv) => self
                .modules
                .get(mv)
                .and_then(|m| m.as_ref())
                .map(|m| m.fs.as_ref()),
        }
    }

    fn file_name(ctx: &ModCtx, path: &str) -> String {
        match ctx {
            ModCtx::Main => path.to_string(),
            ModCtx::Dep(mv) => format!("{mv}/{path}"),
        }
    }

    fn module_of(&self, ctx: &ModCtx) -> (Option<String>, Option<String>) {
        match ctx {
            ModCtx::Main => (self.main.as_ref().map(|m| m.path_with_major()), None),
            ModCtx::Dep(mv) => (Some(mv.path.clone()), Some(mv.version.clone())),
        }
    }

    fn module_base(&self, ctx: &ModCtx) -> Option<String> {
        match ctx {
            ModCtx::Main => self.main.as_ref().map(|m| m.path().to_string()),
            ModCtx::Dep(mv) => Some(split_major(&mv.path).0.to_string()),
        }
    }

    fn canonical_path(&self, ctx: &ModCtx, dir: &str, package: &str) -> String {
        let base = match self.module_base(ctx) {
            Some(b) if dir.is_empty() => b,
            Some(b) => format!("{b}/{dir}"),
            None if dir.is_empty() => ".".into(),
            None => dir.to_string(),
        };
        let last = base.rsplit('/').next().unwrap_or(&base);
        if package != last && package != "_" {
            format!("{base}:{package}")
        } else {
            base
        }
    }

    /// Reads, registers and parses one file.
    fn parse_one(&mut self, ctx: &ModCtx, path: &str, span: Option<Span>) -> Option<Parsed> {
        let fs = self.fs_of(ctx)?;
        let bytes = match fs.read_file(path) {
            Ok(b) => b,
            Err(source) => {
                self.errors.push(LoadError::Fs { source, span });
                return None;
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let name = Self::file_name(ctx, path);
        let (id, ast, errs) = match ctx {
            // Dependency modules are immutable per version: their trees come from the cache.
            ModCtx::Dep(mv) => {
                let c = super::cache::ParseCache::global().get_or_parse(
                    &mv.to_string(),
                    path,
                    &name,
                    &text,
                );
                self.sources.add_shared(c.id, c.file);
                (c.id, c.ast, c.errs)
            }
            ModCtx::Main => {
                let id = self.sources.add(name.clone(), &*text);
                let (ast, mut errs) = parse_file(id, &text);
                // A `.json` file is read as CUE (JSON is CUE syntax), but only if it is JSON:
                // CUE also accepts what JSON does not (a missing comma at a line end, a bare
                // label, an empty file), which a JSON file must not hide.
                if path.ends_with(".json") && errs.is_empty() {
                    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&text) {
                        let at = byte_offset(&text, e.line(), e.column());
                        errs.push(ParseError {
                            span: Span {
                                file: id,
                                start: at,
                                end: at,
                            },
                            message: format!("invalid JSON: {e}"),
                        });
                    }
                }
                (id, Arc::new(ast), errs)
            }
        };
        let package = ast
            .package
            .as_ref()
            .map(|p| p.name.clone())
            .unwrap_or_default();
        Some(Parsed {
            path: path.to_string(),
            package,
            file: LoadedFile { id, name, ast },
            errs,
        })
    }

    /// Keeps a parsed file in an instance, reporting its syntax errors.
    fn keep(&mut self, p: Parsed) -> LoadedFile {
        for error in p.errs {
            self.errors.push(LoadError::Parse {
                file: p.file.name.clone(),
                error,
            });
        }
        p.file
    }

    /// The source files directly in `dir` (sorted by name), or an error.
    fn list_dir(&self, ctx: &ModCtx, dir: &str) -> Result<Vec<String>, FsError> {
        let fs = self
            .fs_of(ctx)
            .ok_or_else(|| FsError::NotFound(dir.to_string()))?;
        let entries = fs.read_dir(dir)?;
        Ok(entries
            .into_iter()
            .filter(|e| !e.is_dir && is_source_file(&e.name))
            .map(|e| join(dir, &e.name))
            .collect())
    }

    /// Loads the package `want` (or the directory's only package) in `dir` of `ctx`.
    fn load_dir(
        &mut self,
        ctx: ModCtx,
        dir: &str,
        want: Option<&str>,
        import: Option<&ImportSpec>,
    ) -> Option<usize> {
        let span = import.map(|i| i.path_span);
        let shown = import.map_or_else(|| Self::file_name(&ctx, dir), |i| i.path.clone());
        if let Some(w) = want {
            let key = InstKey {
                module: ctx.clone(),
                dir: dir.to_string(),
                package: w.to_string(),
            };
            if let Some(found) = self.check_known(&key, import) {
                return found;
            }
        }
        let names = match self.list_dir(&ctx, dir) {
            Ok(n) => n,
            Err(FsError::NotFound(_)) => {
                self.errors.push(LoadError::PackageNotFound {
                    path: shown,
                    reason: format!("directory {:?} does not exist", Self::file_name(&ctx, dir)),
                    span,
                });
                return None;
            }
            Err(source) => {
                self.errors.push(LoadError::Fs { source, span });
                return None;
            }
        };
        let mut parsed: Vec<Parsed> = Vec::new();
        let mut excluded = 0;
        for n in &names {
            if let Some(p) = self.parse_one(&ctx, n, span) {
                if build_constraint_holds(&p.file.ast) {
                    parsed.push(p);
                } else {
                    excluded += 1;
                }
            }
        }
        if parsed.is_empty() && excluded > 0 {
            self.errors.push(LoadError::Package {
                dir: Self::file_name(&ctx, dir),
                reason: format!(
                    "build constraints exclude all CUE files in {:?}",
                    match Self::file_name(&ctx, dir) {
                        d if d.is_empty() => ".".to_string(),
                        d => d,
                    }
                ),
            });
            return None;
        }
        let package = match want {
            Some(w) => w.to_string(),
            None => {
                let named: BTreeSet<&str> = parsed
                    .iter()
                    .map(|p| p.package.as_str())
                    .filter(|p| !p.is_empty())
                    .collect();
                match named.len() {
                    0 if parsed.is_empty() => {
                        self.errors.push(LoadError::PackageNotFound {
                            path: shown,
                            reason: "no CUE files in directory".into(),
                            span,
                        });
                        return None;
                    }
                    0 => "_".to_string(),
                    1 => named
                        .iter()
                        .next()
                        .map(|s| s.to_string())
                        .unwrap_or_default(),
                    _ => {
                        let list: Vec<String> = parsed
                            .iter()
                            .filter(|p| !p.package.is_empty())
                            .map(|p| format!("{} ({})", p.package, p.path))
                            .collect();
                        self.errors.push(LoadError::Package {
                            dir: Self::file_name(&ctx, dir),
                            reason: format!(
                                "found packages {} in {:?}",
                                list.join(", "),
                                Self::file_name(&ctx, dir)
                            ),
                        });
                        return None;
                    }
                }
            }
        };
        let key = InstKey {
            module: ctx.clone(),
            dir: dir.to_string(),
            package: package.clone(),
        };
        if want.is_none() {
            if let Some(found) = self.check_known(&key, import) {
                return found;
            }
        }
        let matches = |p: &str| p == package || (package == "_" && p.is_empty());
        let found: Vec<String> = parsed
            .iter()
            .map(|p| p.package.clone())
            .filter(|p| !p.is_empty())
            .collect();
        if !parsed.iter().any(|p| matches(&p.package)) {
            let reason = if found.is_empty() {
                format!(
                    "no CUE files of package {package} in {:?}",
                    Self::file_name(&ctx, dir)
                )
            } else {
                let set: BTreeSet<String> = found.into_iter().collect();
                format!(
                    "no files of package {package} in {:?} (found package {})",
                    Self::file_name(&ctx, dir),
                    set.into_iter().collect::<Vec<_>>().join(", ")
                )
            };
            self.errors.push(LoadError::PackageNotFound {
                path: shown,
                reason,
                span,
            });
            return None;
        }
        // Files of the same package in parent directories (inside a module only).
        let mut files = Vec::new();
        let in_module = match &ctx {
            ModCtx::Main => self.main.is_some(),
            ModCtx::Dep(_) => true,
        };
        if in_module && package != "_" {
            for pd in parent_dirs(dir) {
                let Ok(pnames) = self.list_dir(&ctx, &pd) else {
                    continue;
                };
                for n in pnames {
                    if let Some(p) = self.parse_one(&ctx, &n, span) {
                        if p.package == package {
                            files.push(self.keep(p));
                        }
                    }
                }
            }
        }
        for p in parsed {
            if matches(&p.package) {
                files.push(self.keep(p));
            }
        }
        let import_path = self.canonical_path(&ctx, dir, &package);
        Some(self.finish_instance(key, import_path, dir.to_string(), files))
    }

    /// Loads a package from the legacy `cue.mod/{gen,pkg,usr}` directories: the files of the
    /// package in all of them form one instance.
    fn load_legacy(&mut self, dirs: &[String], package: &str, spec: &ImportSpec) -> Option<usize> {
        let key = InstKey {
            module: ModCtx::Main,
            dir: dirs.join("\u{0}"),
            package: package.to_string(),
        };
        if let Some(found) = self.check_known(&key, Some(spec)) {
            return found;
        }
        let mut files = Vec::new();
        for d in dirs {
            let Ok(names) = self.list_dir(&ModCtx::Main, d) else {
                continue;
            };
            for n in names {
                if let Some(p) = self.parse_one(&ModCtx::Main, &n, Some(spec.path_span)) {
                    if p.package == package {
                        files.push(self.keep(p));
                    }
                }
            }
        }
        if files.is_empty() {
            self.errors.push(LoadError::PackageNotFound {
                path: spec.path.clone(),
                reason: format!("no files of package {package} in {}", dirs.join(", ")),
                span: Some(spec.path_span),
            });
            return None;
        }
        let (path, _, _) = split_import(&spec.path);
        let last = path.rsplit('/').next().unwrap_or(path);
        let import_path = if package == last {
            path.to_string()
        } else {
            format!("{path}:{package}")
        };
        let dir = dirs.first().cloned().unwrap_or_default();
        Some(self.finish_instance(key, import_path, dir, files))
    }

    /// `Some(result)` if the instance is already loaded or in progress (a cycle).
    fn check_known(&mut self, key: &InstKey, import: Option<&ImportSpec>) -> Option<Option<usize>> {
        let idx = *self.by_key.get(key)?;
        if let Some(pos) = self.stack.iter().position(|(k, _)| k == key) {
            let mut cycle: Vec<String> = self.stack[pos..].iter().map(|(_, p)| p.clone()).collect();
            cycle.push(self.stack[pos].1.clone());
            let span = import.map(|i| i.path_span).unwrap_or_default();
            self.errors.push(LoadError::ImportCycle { cycle, span });
            return Some(None);
        }
        Some(Some(idx))
    }

    fn load_files(&mut self, files: &[String]) -> Option<usize> {
        let mut loaded = Vec::new();
        let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for f in files {
            let path = f.trim_start_matches("./").to_string();
            if let Some(p) = self.parse_one(&ModCtx::Main, &path, None) {
                if !p.package.is_empty() {
                    names
                        .entry(p.package.clone())
                        .or_default()
                        .push(path.clone());
                }
                loaded.push(self.keep(p));
            }
        }
        if names.len() > 1 {
            let list: Vec<String> = names
                .iter()
                .map(|(p, fs)| format!("{p} ({})", fs.join(", ")))
                .collect();
            self.errors.push(LoadError::Package {
                dir: files.join(" "),
                reason: format!("found packages {}", list.join(" and ")),
            });
        }
        let package = names.keys().next().cloned().unwrap_or_else(|| "_".into());
        let dir = files
            .first()
            .and_then(|f| {
                f.trim_start_matches("./")
                    .rsplit_once('/')
                    .map(|(d, _)| d.to_string())
            })
            .unwrap_or_default();
        let key = InstKey {
            module: ModCtx::Main,
            dir: format!("<files>{}", files.join("\u{0}")),
            package: package.clone(),
        };
        let import_path = self.canonical_path(&ModCtx::Main, &dir, &package);
        Some(self.finish_instance(key, import_path, dir, loaded))
    }

    /// Registers the instance, resolves its imports, and returns its index.
    fn finish_instance(
        &mut self,
        key: InstKey,
        import_path: String,
        dir: String,
        files: Vec<LoadedFile>,
    ) -> usize {
        let (module, version) = self.module_of(&key.module);
        let idx = self.instances.len();
        let imports_list: Vec<ImportSpec> = files
            .iter()
            .flat_map(|f| f.ast.imports.iter().cloned())
            .collect();
        self.instances.push(Instance {
            import_path: import_path.clone(),
            package: key.package.clone(),
            module,
            version,
            dir,
            files,
            imports: BTreeMap::new(),
            std_imports: BTreeSet::new(),
        });
        self.by_key.insert(key.clone(), idx);
        self.stack.push((key.clone(), import_path));
        let mut imports = BTreeMap::new();
        let mut std_imports = BTreeSet::new();
        for spec in &imports_list {
            if imports.contains_key(&spec.path) || std_imports.contains(&spec.path) {
                continue;
            }
            match self.resolve(&key.module, spec) {
                Resolved::Std => {
                    std_imports.insert(spec.path.clone());
                }
                Resolved::Package { ctx, dir, package } => {
                    if let Some(i) = self.load_dir(ctx, &dir, Some(&package), Some(spec)) {
                        imports.insert(spec.path.clone(), i);
                    }
                }
                Resolved::Legacy { dirs, package } => {
                    if let Some(i) = self.load_legacy(&dirs, &package, spec) {
                        imports.insert(spec.path.clone(), i);
                    }
                }
                Resolved::Failed => {}
            }
        }
        self.stack.pop();
        if let Some(inst) = self.instances.get_mut(idx) {
            inst.imports = imports;
            inst.std_imports = std_imports;
        }
        idx
    }

    /// The dependency table seen from `ctx`: main module deps, then `ctx`'s own for other paths.
    fn deps_for(&self, ctx: &ModCtx) -> BTreeMap<String, Dep> {
        let mut out = self
            .main
            .as_ref()
            .map(|m| m.deps.clone())
            .unwrap_or_default();
        if let ModCtx::Dep(mv) = ctx {
            if let Some(Some(dm)) = self.modules.get(mv) {
                if let Some(f) = &dm.file {
                    for (k, v) in &f.deps {
                        out.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
        }
        out
    }

    fn resolve(&mut self, ctx: &ModCtx, spec: &ImportSpec) -> Resolved {
        let span = spec.path_span;
        let (path, major, qual) = split_import(&spec.path);
        let invalid = |reason: String| LoadError::InvalidImport {
            path: spec.path.clone(),
            reason,
            span,
        };
        if path.is_empty() || path.split('/').any(str::is_empty) {
            self.errors.push(invalid("empty path element".into()));
            return Resolved::Failed;
        }
        if let Some(m) = major {
            if !semver::is_major(m) {
                self.errors
                    .push(invalid(format!("invalid major version @{m} (want @vN)")));
                return Resolved::Failed;
            }
        }
        let last = path.rsplit('/').next().unwrap_or(path);
        let package = match qual {
            // `_` names the anonymous package, which cannot be imported.
            Some("_") => {
                self.errors
                    .push(invalid("_ is not a valid import path qualifier".into()));
                return Resolved::Failed;
            }
            Some(q) if is_ident(q) => q.to_string(),
            Some(q) => {
                self.errors
                    .push(invalid(format!("invalid package qualifier {q:?}")));
                return Resolved::Failed;
            }
            None => last.to_string(),
        };
        let first = path.split('/').next().unwrap_or(path);
        let main_base = self.main.as_ref().map(|m| m.path().to_string());
        let own_base = self.module_base(ctx);
        if !first.contains('.') {
            let owned = own_base
                .as_deref()
                .is_some_and(|b| has_path_prefix(path, b))
                || main_base
                    .as_deref()
                    .is_some_and(|b| has_path_prefix(path, b));
            if !owned || is_std_package(path) {
                if major.is_some() || qual.is_some() {
                    self.errors
                        .push(invalid("std packages take no version or qualifier".into()));
                    return Resolved::Failed;
                }
                return Resolved::Std;
            }
        }
        if qual.is_none() && !is_ident(&package) {
            self.errors.push(invalid(format!(
                "last path element {package:?} is not a valid package name; add a :qualifier"
            )));
            return Resolved::Failed;
        }
        // Candidates: (base path, which module).
        let mut best: Option<(usize, ModCtx)> = None;
        let consider = |best: &mut Option<(usize, ModCtx)>, base: &str, m: ModCtx| {
            if has_path_prefix(path, base) && best.as_ref().is_none_or(|(l, _)| base.len() > *l) {
                *best = Some((base.len(), m));
            }
        };
        if let (ModCtx::Dep(mv), Some(b)) = (ctx, own_base.as_deref()) {
            let own_major = split_major(&mv.path).1;
            if major.is_none() || major == own_major {
                consider(&mut best, b, ctx.clone());
            }
        }
        if let Some(m) = &self.main {
            if major.is_none() || major == Some(m.major()) {
                consider(&mut best, m.path(), ModCtx::Main);
            }
        }
        let deps = self.deps_for(ctx);
        // Group the deps by base path.
        let mut by_base: BTreeMap<&str, Vec<(&str, &Dep)>> = BTreeMap::new();
        for (k, d) in &deps {
            let (b, m) = split_major(k);
            by_base.entry(b).or_default().push((m.unwrap_or("v0"), d));
        }
        let mut dep_pick: Option<(usize, Result<ModuleVersion, String>)> = None;
        for (base, majors) in &by_base {
            if !has_path_prefix(path, base) {
                continue;
            }
            if dep_pick.as_ref().is_some_and(|(l, _)| *l >= base.len()) {
                continue;
            }
            let chosen = match major {
                Some(m) => majors.iter().find(|(mm, _)| *mm == m).ok_or_else(|| {
                    format!("module {base}@{m} is not a dependency of the main module")
                }),
                None => {
                    let defaults: Vec<_> = majors.iter().filter(|(_, d)| d.default).collect();
                    match (defaults.as_slice(), majors.as_slice()) {
                        ([one], _) => Ok(*one),
                        ([], [only]) => Ok(only),
                        _ => Err(format!(
                            "several major versions of {base} are dependencies ({}) and none is marked default: true",
                            majors.iter().map(|(m, _)| *m).collect::<Vec<_>>().join(", ")
                        )),
                    }
                }
            };
            let r = chosen.map(|(m, d)| ModuleVersion {
                path: format!("{base}@{m}"),
                version: d.version.clone(),
            });
            dep_pick = Some((base.len(), r));
        }
        if let Some((dl, r)) = dep_pick {
            if best.as_ref().is_none_or(|(l, _)| dl > *l) {
                match r {
                    Ok(mv) => {
                        if !self.ensure_module(&mv, span) {
                            return Resolved::Failed;
                        }
                        best = Some((dl, ModCtx::Dep(mv)));
                    }
                    Err(reason) => {
                        if best.is_none() {
                            self.errors.push(invalid(reason));
                            return Resolved::Failed;
                        }
                    }
                }
            }
        }
        let Some((len, target)) = best else {
            // Legacy layouts: `cue.mod/{gen,pkg,usr}/<import path>` of the main module.
            let legacy: Vec<String> = ["gen", "pkg", "usr"]
                .iter()
                .map(|d| format!("cue.mod/{d}/{path}"))
                .filter(|d| self.main_fs.read_dir(d).is_ok())
                .collect();
            if !legacy.is_empty() {
                return Resolved::Legacy {
                    dirs: legacy,
                    package,
                };
            }
            let reason = if self.main.is_none() {
                "no cue.mod/module.cue: only std packages can be imported".to_string()
            } else {
                "no dependency in cue.mod/module.cue provides it".to_string()
            };
            self.errors.push(LoadError::PackageNotFound {
                path: spec.path.clone(),
                reason,
                span: Some(span),
            });
            return Resolved::Failed;
        };
        let dir = path
            .get(len..)
            .unwrap_or("")
            .trim_start_matches('/')
            .to_string();
        Resolved::Package {
            ctx: target,
            dir,
            package,
        }
    }

    /// Fetches a dependency module once; `false` (with an error recorded) if unavailable.
    fn ensure_module(&mut self, mv: &ModuleVersion, span: Span) -> bool {
        if let Some(m) = self.modules.get(mv) {
            return m.is_some();
        }
        let Some(reg) = self.registry else {
            self.errors.push(LoadError::PackageNotFound {
                path: mv.to_string(),
                reason: "no registry configured to fetch dependency modules".into(),
                span: Some(span),
            });
            self.modules.insert(mv.clone(), None);
            return false;
        };
        match reg.fetch(mv) {
            Ok(fs) => {
                let file = self.read_module_file(fs.as_ref(), format!("{mv}/{MODULE_FILE}"), false);
                if let Some(f) = &file {
                    if f.path_with_major() != mv.path {
                        self.errors.push(LoadError::Registry {
                            source: RegistryError::Invalid {
                                module: mv.to_string(),
                                message: format!(
                                    "its cue.mod/module.cue declares module {:?}",
                                    f.module
                                ),
                            },
                            span: Some(span),
                        });
                    }
                }
                self.modules
                    .insert(mv.clone(), Some(DepModule { fs, file }));
                true
            }
            Err(source) => {
                self.errors.push(LoadError::Registry {
                    source,
                    span: Some(span),
                });
                self.modules.insert(mv.clone(), None);
                false
            }
        }
    }
}

/// A file read and parsed, not yet part of an instance.
struct Parsed {
    path: String,
    package: String,
    file: LoadedFile,
    errs: Vec<ParseError>,
}

enum Resolved {
    Std,
    /// A package under the main module's `cue.mod/gen`, `cue.mod/pkg` or `cue.mod/usr`.
    Legacy {
        dirs: Vec<String>,
        package: String,
    },
    Package {
        ctx: ModCtx,
        dir: String,
        package: String,
    },
    Failed,
}

/// Minimal version selection: starting from the root requirements, visits every reachable
/// module version (reading each one's `cue.mod/module.cue` through `registry`) and selects the
/// highest version required of each `path@vN` (the one MVS, [`super::tidy::select_all`]).
/// Returns `path@vN` → version, or every error met.
pub fn mvs(
    root: &BTreeMap<String, Dep>,
    registry: &dyn Registry,
) -> Result<BTreeMap<String, String>, Vec<LoadError>> {
    /// Reads module files through `fetch`, keeping the loader's positioned errors.
    struct Files<'a>(&'a dyn Registry);
    impl super::tidy::ModuleFileSource for Files<'_> {
        type Error = Vec<LoadError>;
        fn module_file(&self, mv: &ModuleVersion) -> Result<ModuleFile, Vec<LoadError>> {
            let fs = self
                .0
                .fetch(mv)
                .map_err(|source| vec![LoadError::Registry { source, span: None }])?;
            let bytes = fs
                .read_file(MODULE_FILE)
                .map_err(|source| vec![LoadError::Fs { source, span: None }])?;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let name = format!("{mv}/{MODULE_FILE}");
            let mut sources = SourceMap::new();
            let id = sources.add(name.clone(), text.as_str());
            parse_module_file(id, &text).map_err(|errs| {
                errs.into_iter()
                    .map(|error| LoadError::ModuleFile {
                        file: name.clone(),
                        error,
                    })
                    .collect()
            })
        }
    }
    let roots = root.iter().map(|(k, d)| (k.clone(), d.version.clone()));
    let (selected, errors) = super::tidy::select_all(roots, None, &Files(registry));
    if errors.is_empty() {
        Ok(selected)
    } else {
        Err(errors.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests;

/// The byte offset of a 1-based line and column (as `serde_json` reports them) in `text`,
/// clamped to its length.
fn byte_offset(text: &str, line: usize, column: usize) -> u32 {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let at = (start + column.saturating_sub(1)).min(text.len());
    u32::try_from(at).unwrap_or(u32::MAX)
}

/// Whether a file's build constraint (`@if(expr)` before its package clause: tag names
/// combined with `!`, `&&`, `||` and parentheses) holds. No tag is set (the command line has
/// no `-t`), so every tag reads false; a file without the attribute, or with one this does not
/// parse, is kept.
fn build_constraint_holds(file: &ast::File) -> bool {
    file.attrs
        .iter()
        .filter(|a| a.name == "if")
        .all(|a| BuildExpr::new(&a.body).eval().unwrap_or(true))
}

/// The parser and evaluator of a build constraint's expression (see `build_constraint_holds`).
struct BuildExpr<'a> {
    rest: &'a str,
}

impl<'a> BuildExpr<'a> {
    fn new(body: &'a str) -> Self {
        BuildExpr { rest: body }
    }

    /// The value of the whole expression; `None` if it does not parse.
    fn eval(mut self) -> Option<bool> {
        let v = self.or()?;
        self.rest.trim().is_empty().then_some(v)
    }

    fn eat(&mut self, tok: &str) -> bool {
        let t = self.rest.trim_start();
        match t.strip_prefix(tok) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn or(&mut self) -> Option<bool> {
        let mut v = self.and()?;
        while self.eat("||") {
            let r = self.and()?;
            v = v || r;
        }
        Some(v)
    }

    fn and(&mut self) -> Option<bool> {
        let mut v = self.unary()?;
        while self.eat("&&") {
            let r = self.unary()?;
            v = v && r;
        }
        Some(v)
    }

    fn unary(&mut self) -> Option<bool> {
        if self.eat("!") {
            return Some(!self.unary()?);
        }
        if self.eat("(") {
            let v = self.or()?;
            return self.eat(")").then_some(v);
        }
        let t = self.rest.trim_start();
        let n = t
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .unwrap_or(t.len());
        if n == 0 {
            return None;
        }
        self.rest = &t[n..];
        // No tag is set.
        Some(false)
    }
}
