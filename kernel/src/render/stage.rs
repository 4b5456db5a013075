//! Acquisition, instance synthesis and the render build (docs/design/render.md §1.2, §1.3, §1.7).
//!
//! Rules:
//! - The module is pulled by coordinate through the registry and staged **in memory** as the main
//!   module of the render build: the registry's file tree is the base of an overlay, nothing is
//!   written to disk. Its `cue.mod/module.cue` is replaced by the promoted one (see `deps`).
//! - The overlay adds three reserved packages, all generated:
//!   - `opm-synth-instance/` (package `instance`): `instance.cue` imports core as `core` at the
//!     major the module requires and the module as `opmModule` by its path, embeds
//!     `core.#ModuleInstance`, sets `metadata.name`/`namespace` as quoted string literals and writes
//!     `#module: opmModule`; `values.cue` is `values:` followed by the caller's values as JSON text
//!     (JSON is CUE: the values are data, no caller string is ever spliced into CUE syntax; the
//!     JSON is pretty-printed so a values position names a line of its own).
//!   - `opm-synth-platform/`: the platform module's root package files, read from the built
//!     platform's directory, so the catalogs arrive by import through the promoted deps.
//!   - `opm-synth-render/` (package `render`, the build target): imports the instance, the
//!     platform and the module, and declares the kernel's handles `#module`, `#instance` and
//!     `#transformers` (the platform's `#composedTransformers`).
//! - A pair executes as the expression [`pair_expr`] compiled in the glue package's scope:
//!   `(#transformers[fqn].#transform & {#component: #instance.components[c], #context: ctx}).output`
//!   where `ctx` is data: the decoded instance and component metadata and the runtime name, as
//!   Go's kernel fills it (docs/design/render.md §1.6). Building the context by reference to the instance
//!   instead costs the evaluator seconds per pair today, so it is data.
//! - One [`cue::Runtime`] per render, bounded by the caller's [`cue::Config`]; nothing is shared
//!   between renders. The render's result is built from data, never from a handle into the
//!   evaluator, so the evaluator is freed on a thread of its own once the result is built
//!   ([`Staged::retire`]).
//! - A package render (ModulePackage) names the package by its module path (`cue.mod/module.cue`)
//!   in every error, never by the directory it was read from: the operator extracts each artifact
//!   into a fresh temporary directory, so a message naming it would differ on every reconcile of
//!   the same failure (a new Warning each time, docs/design/operator.md §8 scenario 64). Before the module
//!   file is read the package is "the instance package".
//! - Every name written into generated CUE (instance name, namespace, component names and FQNs
//!   in pair expressions) and the context are written as JSON literals.

use std::path::Path as FsPath;
use std::sync::Arc;

use cue::module::{FileSystem, MemFs, ModuleVersion, OverlayFs, Registry, Target};
use cue::{Diagnostic, Runtime, Value};

use super::deps;
use super::error::Error;
use super::problems_of;
use crate::{BuiltPlatform, ModuleRequest};
use cue::module::ModuleFile;

/// Reserved directory of the synthesized instance package.
pub const INSTANCE_DIR: &str = "opm-synth-instance";
/// Reserved directory of the staged platform package.
pub const PLATFORM_DIR: &str = "opm-synth-platform";
/// Reserved directory of the render glue package (the build target).
pub const RENDER_DIR: &str = "opm-synth-render";

/// The result of staging and building one render.
pub struct Staged {
    /// The render's evaluation context.
    pub rt: Runtime,
    /// The glue package's root value.
    pub root: Value,
    /// The module's own module file (for skew).
    pub module_file: ModuleFile,
}

impl Staged {
    /// Frees the render's evaluator on a thread of its own, so the caller has its result without
    /// waiting for it (rule above: the evaluator is the render's alone, nothing reads it after
    /// the result is built). Freeing the evaluation of a 129-component module is about 28 M
    /// instructions on jemalloc, 4 % of the render (`benches/render.rs`; with glibc's malloc a
    /// second thread freeing into the render's arena contends for its lock and is slower than
    /// freeing here). When no thread can be started, it is freed here.
    pub fn retire(self) {
        // A failed spawn drops the closure, and the staged render with it, on this thread.
        let _freed_elsewhere = std::thread::Builder::new()
            .name("opm-render-free".into())
            .spawn(move || drop(self));
    }
}

/// A module coordinate as printed in errors (`path@version` with the major dropped).
pub fn coordinate(path: &str, version: &str) -> String {
    ModuleVersion {
        path: path.to_string(),
        version: version.to_string(),
    }
    .to_string()
}

fn json_str(s: &str) -> String {
    // Serialising a string cannot fail; fall back to an empty literal rather than panic.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// The package name declared by CUE source text (the first `package` clause), if any.
pub fn package_name(src: &str) -> Option<String> {
    for line in src.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("//") || t.starts_with('@') {
            continue;
        }
        let rest = t.strip_prefix("package")?;
        let name = rest.trim();
        if !name.is_empty()
            && rest.starts_with(char::is_whitespace)
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '#' || c == '$')
        {
            return Some(name.to_string());
        }
        return None;
    }
    None
}

/// The platform's root package files (name, text) and its module file.
/// Platform files (name, text), their package name, the promoted render module file.
type StagedPlatform = (Vec<(String, String)>, String, ModuleFile);

/// The platform half of a render build: the platform files, their package name, and the
/// render module's module file with the platform's deps promoted (the platform wins every shared
/// path; its `default: true` markers kept).
fn stage_platform(
    platform: &BuiltPlatform,
    module_file: &ModuleFile,
) -> Result<StagedPlatform, Error> {
    let (platform_files, platform_mf) = read_platform(platform)?;
    let platform_pkg = platform_files
        .iter()
        .find_map(|(_, t)| package_name(t))
        .ok_or_else(|| Error::Platform {
            dir: platform.dir.display().to_string(),
            message: "the platform files declare no package".into(),
            problems: Vec::new(),
        })?;
    let platform_deps = if platform.deps.is_empty() {
        platform_mf
            .deps
            .iter()
            .map(|(p, d)| (p.clone(), d.version.clone()))
            .collect()
    } else {
        platform.deps.clone()
    };
    let defaults: Vec<String> = platform_mf
        .deps
        .iter()
        .filter(|(_, d)| d.default)
        .map(|(p, _)| p.clone())
        .collect();
    let promoted = deps::promote(module_file, &platform_deps, &defaults);
    Ok((platform_files, platform_pkg, promoted))
}

fn read_platform(platform: &BuiltPlatform) -> Result<(Vec<(String, String)>, ModuleFile), Error> {
    let dir = &platform.dir;
    let perr = |message: String| Error::Platform {
        dir: dir.display().to_string(),
        message,
        problems: Vec::new(),
    };
    let mf_path = dir.join("cue.mod").join("module.cue");
    let mf_bytes =
        std::fs::read(&mf_path).map_err(|e| perr(format!("{}: {e}", mf_path.display())))?;
    let mf = deps::parse_module_file(&mf_bytes).map_err(perr)?;
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| perr(e.to_string()))?;
    for e in entries {
        let e = e.map_err(|e| perr(e.to_string()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        if !p.is_file()
            || !name.ends_with(".cue")
            || name.starts_with(['_', '.'])
            || name.ends_with("_test.cue")
            || name.ends_with("_tool.cue")
        {
            continue;
        }
        let text = std::fs::read_to_string(&p).map_err(|e| perr(format!("{name}: {e}")))?;
        files.push((name, text));
    }
    files.sort();
    if files.is_empty() {
        return Err(perr("no .cue files in the platform directory".into()));
    }
    Ok((files, mf))
}

/// The core the module requires (`fixtures.test/core@v0`, `opmodel.dev/core@v2`): the first
/// dependency (in path order) whose last path element is `core`. A module requiring no such path
/// is refused by the shape gate.
fn core_path(module: &ModuleFile) -> Option<String> {
    let mut cores = module.deps.keys().filter(|p| {
        let base = p.split('@').next().unwrap_or(p);
        base.rsplit('/').next() == Some("core")
    });
    let first = cores.next()?.clone();
    Some(first)
}

/// Generates the instance package files.
fn instance_files(
    core: &str,
    module_path: &str,
    module_pkg: &str,
    req: &ModuleRequest,
) -> Vec<(String, String)> {
    let import_module = if default_package(module_path) == module_pkg {
        json_str(module_path)
    } else {
        json_str(&format!("{module_path}:{module_pkg}"))
    };
    let mut out = vec![(
        format!("{INSTANCE_DIR}/instance.cue"),
        format!(
            "// Generated by the render kernel (docs/design/render.md §1.3). Do not edit.\n\
             package instance\n\n\
             import (\n\tcore {}\n\topmModule {}\n)\n\n\
             core.#ModuleInstance\n\n\
             metadata: name:      {}\n\
             metadata: namespace: {}\n\
             #module:             opmModule\n",
            json_str(core),
            import_module,
            json_str(&req.name),
            json_str(&req.namespace),
        ),
    )];
    if let Some(values) = &req.values {
        let json = serde_json::to_string_pretty(values).unwrap_or_else(|_| "{}".to_string());
        out.push((
            format!("{INSTANCE_DIR}/values.cue"),
            format!("package instance\n\nvalues: {json}\n"),
        ));
    }
    out
}

/// The package name an import path implies (its last element without the major).
fn default_package(path: &str) -> &str {
    let base = path.split('@').next().unwrap_or(path);
    base.rsplit('/').next().unwrap_or(base)
}

/// Generates the render glue package.
fn render_file(module_path: &str, platform_pkg: &str, module_pkg: &str) -> String {
    let base = module_path.split('@').next().unwrap_or(module_path);
    let import_module = if default_package(module_path) == module_pkg {
        json_str(module_path)
    } else {
        json_str(&format!("{module_path}:{module_pkg}"))
    };
    format!(
        "// Generated by the render kernel (docs/design/render.md §1.6-§1.7). Do not edit.\n\
         package render\n\n\
         import (\n\
         \topmModule {import_module}\n\
         \topmInstance {inst}\n\
         \topmPlatform {plat}\n\
         )\n\n\
         #module:       opmModule\n\
         #instance:     opmInstance\n\
         #transformers: opmPlatform.#composedTransformers\n",
        inst = json_str(&format!("{base}/{INSTANCE_DIR}:instance")),
        plat = json_str(&format!("{base}/{PLATFORM_DIR}:{platform_pkg}")),
    )
}

/// The expression that executes one pair: the transformer's `#transform` unified with the
/// component and the context (data), its `output` selected. Names and the context enter as JSON.
pub fn pair_expr(
    component: &str,
    transformer: &str,
    runtime_name: &str,
    instance_meta: &serde_json::Value,
    component_meta: &serde_json::Value,
) -> String {
    let j = |v: &serde_json::Value| serde_json::to_string(v).unwrap_or_else(|_| "{}".to_string());
    format!(
        "(#transformers[{}].#transform & {{#component: #instance.components[{}], #context: {{#runtimeName: {}, #moduleInstanceMetadata: {}, #componentMetadata: {}}}}}).output",
        json_str(transformer),
        json_str(component),
        json_str(runtime_name),
        j(instance_meta),
        j(component_meta),
    )
}

/// Diagnostics as a typed error: a limit anywhere wins, else `make`.
pub fn classify(
    rt: &Runtime,
    coordinate: &str,
    diags: &[Diagnostic],
    make: impl FnOnce(Vec<crate::Problem>) -> Error,
) -> Error {
    if diags.iter().any(|d| d.code == cue::DiagCode::Limit) {
        return super::limit_error(rt, coordinate, diags);
    }
    make(problems_of(rt, diags))
}

/// Pulls the module, stages it with the synthesized packages and builds the render package.
/// Returns the build and the skew findings' input (the module's own module file).
pub fn stage(
    registry: &Arc<dyn Registry>,
    req: &ModuleRequest,
    platform: &BuiltPlatform,
    config: cue::Config,
) -> Result<Staged, Error> {
    let coord = coordinate(&req.path, &req.version);
    let request_err = |message: String| Error::Request {
        coordinate: coord.clone(),
        message,
    };
    if cue::module::split_major(&req.path).1.is_none() {
        return Err(request_err(format!(
            "module path {:?} has no major suffix (@vN)",
            req.path
        )));
    }
    if !req.version.starts_with('v') || cue::module::semver::Version::parse(&req.version).is_none()
    {
        return Err(request_err(format!(
            "version {:?} is not a v-prefixed semantic version",
            req.version
        )));
    }
    let mv = ModuleVersion {
        path: req.path.clone(),
        version: req.version.clone(),
    };
    let base = registry.fetch(&mv).map_err(|error| Error::Pull {
        coordinate: coord.clone(),
        error,
    })?;
    let load_err = |message: String| Error::Load {
        coordinate: coord.clone(),
        problems: vec![crate::Problem {
            path: String::new(),
            message,
            positions: Vec::new(),
        }],
    };
    let mf_bytes = base
        .read_file("cue.mod/module.cue")
        .map_err(|e| load_err(format!("cue.mod/module.cue: {e}")))?;
    let module_file = deps::parse_module_file(&mf_bytes).map_err(load_err)?;
    let module_pkg = root_package(base.as_ref()).ok_or_else(|| Error::Shape {
        coordinate: coord.clone(),
        message: "the module root holds no CUE package".into(),
    })?;
    let core = core_path(&module_file).ok_or_else(|| Error::Shape {
        coordinate: coord.clone(),
        message: "the module requires no core module (a dependency whose path ends in /core)"
            .into(),
    })?;

    let (platform_files, platform_pkg, promoted) = stage_platform(platform, &module_file)?;

    let mut top = MemFs::new();
    top.insert("cue.mod/module.cue", deps::write_module_file(&promoted));
    for (name, text) in instance_files(&core, &req.path, &module_pkg, req) {
        top.insert(name, text);
    }
    for (name, text) in platform_files {
        top.insert(format!("{PLATFORM_DIR}/{name}"), text);
    }
    top.insert(
        format!("{RENDER_DIR}/render.cue"),
        render_file(&req.path, &platform_pkg, &module_pkg),
    );
    let fs = OverlayFs::new(&top, base.as_ref());
    let rt = Runtime::new(config);
    let registry_ref: &dyn Registry = registry.as_ref();
    let root = rt
        .build_module(&fs, &Target::Dir(RENDER_DIR.into()), Some(registry_ref))
        .map_err(|d| {
            classify(&rt, &coord, &d, |problems| Error::Load {
                coordinate: coord.clone(),
                problems,
            })
        })?;
    Ok(Staged {
        rt,
        root,
        module_file,
    })
}

/// Stages an authored instance package (ModulePackage, docs/design/render.md §1.1): the directory is the
/// main module (its own `cue.mod`, deps promoted with the platform's), its root package is the
/// instance; the platform and the glue are added as for a module render. Nothing is written to
/// the directory.
pub fn stage_package(
    registry: &Arc<dyn Registry>,
    dir: &FsPath,
    platform: &BuiltPlatform,
    config: cue::Config,
) -> Result<Staged, Error> {
    let load_err = |message: String| Error::Load {
        coordinate: "the instance package".to_owned(),
        problems: vec![crate::Problem {
            path: String::new(),
            message,
            positions: Vec::new(),
        }],
    };
    let base = dir_tree(dir).map_err(|e| load_err(e.to_string()))?;
    let mf_bytes = base
        .read_file("cue.mod/module.cue")
        .map_err(|e| load_err(format!("cue.mod/module.cue: {e}")))?;
    let module_file = deps::parse_module_file(&mf_bytes).map_err(load_err)?;
    let shown = module_file.module.clone();
    let pkg = root_package(&base).ok_or_else(|| Error::UnsupportedKind {
        package: shown.clone(),
        message: "the directory holds no CUE package".into(),
    })?;
    let (platform_files, platform_pkg, promoted) = stage_platform(platform, &module_file)?;
    let mut top = MemFs::new();
    top.insert("cue.mod/module.cue", deps::write_module_file(&promoted));
    for (name, text) in platform_files {
        top.insert(format!("{PLATFORM_DIR}/{name}"), text);
    }
    let path = &module_file.module;
    let base_path = path.split('@').next().unwrap_or(path);
    let import_instance = if default_package(path) == pkg {
        json_str(path)
    } else {
        json_str(&format!("{path}:{pkg}"))
    };
    top.insert(
        format!("{RENDER_DIR}/render.cue"),
        format!(
            "// Generated by the render kernel (docs/design/render.md §1.1, ModulePackage). Do not edit.\n\
             package render\n\n\
             import (\n\
             \topmInstance {import_instance}\n\
             \topmPlatform {plat}\n\
             )\n\n\
             #instance:     opmInstance\n\
             #transformers: opmPlatform.#composedTransformers\n",
            plat = json_str(&format!("{base_path}/{PLATFORM_DIR}:{platform_pkg}")),
        ),
    );
    let fs = OverlayFs::new(&top, &base);
    let rt = Runtime::new(config);
    let registry_ref: &dyn Registry = registry.as_ref();
    let root = rt
        .build_module(&fs, &Target::Dir(RENDER_DIR.into()), Some(registry_ref))
        .map_err(|d| {
            classify(&rt, &shown, &d, |problems| Error::Load {
                coordinate: shown.clone(),
                problems,
            })
        })?;
    Ok(Staged {
        rt,
        root,
        module_file,
    })
}

/// The package name of the module's root directory.
fn root_package(fs: &dyn FileSystem) -> Option<String> {
    let entries = fs.read_dir("").ok()?;
    for e in entries {
        if e.is_dir || !e.name.ends_with(".cue") || e.name.starts_with(['_', '.']) {
            continue;
        }
        let bytes = fs.read_file(&e.name).ok()?;
        if let Some(p) = package_name(&String::from_utf8_lossy(&bytes)) {
            return Some(p);
        }
    }
    None
}

/// Reads a directory's `.cue` files (for `opm-operator render DIR`): a module tree as a [`MemFs`].
pub fn dir_tree(dir: &FsPath) -> Result<MemFs, std::io::Error> {
    let mut fs = MemFs::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if path.is_dir() {
                if !name.starts_with('.') {
                    stack.push((path, r));
                }
            } else if name.ends_with(".cue") {
                fs.insert(r, std::fs::read(&path)?);
            }
        }
    }
    Ok(fs)
}
