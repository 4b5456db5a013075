//! `opm-operator render`: render a module offline with the same engine as the operator
//! (issue 13 item 7).
//!
//! `render MODULE@VERSION | DIR [--values FILE]… [--set path=value]… --platform DIR
//! [--registry MAPPING | --layout DIR] [--name N --namespace NS] [-o yaml|json]`
//!
//! Rules:
//! - `MODULE@VERSION` is a coordinate with the full version (`fixtures.test/modules/demo@v0.1.0`;
//!   the major path suffix is derived from the version). `DIR` is a local module directory: it is
//!   served as that module at the version its `metadata.version` declares, its dependencies come
//!   from the registry.
//! - `--platform DIR` is a generated platform module directory (`cue.mod/module.cue` +
//!   `platform.cue`); its deps are read from its module file (`opm_kernel::platform::from_dir`).
//!   `--platform FILE` is a Platform CR (the manifest a user applies, named `cluster`): its
//!   subscriptions are generated into a temporary directory by the Platform reconciler's own
//!   generator (`controller::platform::entries` + `PlatformKernel::generate`; no claims), so
//!   both forms of the same platform render the same bytes.
//! - Values: each `--values` file (JSON or YAML) is deep-merged over the previous ones (objects
//!   merge, anything else replaces); then each `--set a.b=v` sets one path (`v` parsed as JSON,
//!   else taken as a string).
//! - Output: `-o yaml` (default) is a YAML stream, one document per object in render order, each
//!   preceded by a `# component: …, transformer: …` provenance comment; `-o json` is the whole
//!   `RenderResult` as JSON. Warnings go to stderr. The output is a pure function of the inputs,
//!   so a registry and an OCI layout holding the same modules print the same bytes.
//! - Errors print the message and every problem with its `file:line:col` positions; the exit
//!   status is non-zero.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use cue::module::{FileSystem, MemFs, ModuleVersion, Registry, RegistryError};

use crate::kernel::SkewPolicy;
use crate::kernel::{
    BuiltPlatform, KernelError, ModuleRequest, PlatformBuilder as _, PlatformInput, RenderResult,
};
use crate::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};
use crate::render::{Error, Renderer};

/// Arguments of `opm-operator render`.
#[derive(clap::Args, Debug, Clone)]
pub struct RenderArgs {
    /// `MODULE@VERSION` (e.g. `example.com/modules/app@v1.2.3`) or a module directory.
    pub module: String,
    /// A values file (JSON or YAML); repeatable, later files win.
    #[arg(long = "values", short = 'f')]
    pub values: Vec<PathBuf>,
    /// `path=value` (value as JSON, else a string); repeatable, applied after the files.
    #[arg(long = "set")]
    pub set: Vec<String>,
    /// The platform: a generated platform module directory, or a Platform manifest (the CR a
    /// user applies, YAML or JSON) generated here as the Platform reconciler does.
    #[arg(long)]
    pub platform: PathBuf,
    /// With a Platform manifest: the generator's core pin and `#registry` shape (the flags
    /// `serve` takes for the Platform reconciler).
    #[command(flatten)]
    pub generator: crate::cmd::serve::GeneratorArgs,
    /// Registry mapping, CUE_REGISTRY syntax.
    #[arg(long, env = "OPM_REGISTRY", default_value = "")]
    pub registry: String,
    /// Use this OCI image-layout directory for every module (wins over --registry).
    #[arg(long)]
    pub layout: Option<PathBuf>,
    /// Module cache directory (default: no cache).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Instance name.
    #[arg(long, default_value = "default")]
    pub name: String,
    /// Instance namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Output format: yaml or json.
    #[arg(long, short = 'o', default_value = "yaml")]
    pub output: String,
    /// Runtime name stamped as app.kubernetes.io/managed-by.
    #[arg(long, default_value = "opm-cli")]
    pub runtime_name: String,
    /// Refuse (instead of warn) when the module needs newer deps than the platform pins.
    #[arg(long)]
    pub refuse_skew: bool,
    /// Evaluation wall-time limit of the render, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Memory budget of the render (and of the platform build of a Platform manifest), accounted
    /// by the evaluator: past it the render stops, naming the budget and the value being
    /// evaluated (`serve`'s flag of the same name).
    #[arg(long, default_value = crate::kernel::limits::DEFAULT_RENDER_MEMORY_LIMIT, value_parser = crate::kernel::limits::parse_bytes, value_name = "BYTES")]
    pub render_memory_limit: u64,
}

/// Why the command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments or input files.
    #[error("{0}")]
    Usage(String),
    /// The render failed.
    #[error("{}", render_kernel_error(.0))]
    Render(KernelError),
}

/// A kernel error with every problem and all its positions.
pub fn render_kernel_error(e: &KernelError) -> String {
    let mut s = format!("render failed ({:?}): {}", e.class, e.message);
    for p in &e.problems {
        let path = if p.path.is_empty() { "-" } else { &p.path };
        s.push_str(&format!("\n  {path}: {}", p.message));
        for pos in &p.positions {
            s.push_str(&format!("\n      {}:{}:{}", pos.file, pos.line, pos.column));
        }
    }
    s
}

/// Serves one local module tree at one coordinate, everything else from `inner`.
struct LocalFirst {
    module: ModuleVersion,
    tree: Arc<MemFs>,
    inner: Arc<dyn Registry>,
}

impl Registry for LocalFirst {
    fn fetch(&self, m: &ModuleVersion) -> Result<Arc<dyn FileSystem>, RegistryError> {
        if *m == self.module {
            let fs: Arc<dyn FileSystem> = self.tree.clone();
            return Ok(fs);
        }
        self.inner.fetch(m)
    }

    fn versions(&self, path: &str) -> Result<Vec<String>, RegistryError> {
        let mut v = self.inner.versions(path).unwrap_or_default();
        if path == self.module.path && !v.contains(&self.module.version) {
            v.push(self.module.version.clone());
        }
        Ok(v)
    }
}

fn registry(args: &RenderArgs) -> Result<Arc<dyn Registry>, CliError> {
    Ok(Arc::new(module_registry(args)?))
}

/// The module registry of `--layout` / `--registry`.
fn module_registry(args: &RenderArgs) -> Result<ModuleRegistry, CliError> {
    let mapping = match &args.layout {
        Some(dir) => Mapping::single(Location::Layout { dir: dir.clone() }),
        None => Mapping::parse(&args.registry)
            .map_err(|m| CliError::Usage(format!("--registry {:?}: {m}", args.registry)))?,
    };
    let mut cfg = RegistryConfig::new(mapping);
    cfg.cache_dir = args.cache_dir.clone();
    ModuleRegistry::new(cfg).map_err(|e| CliError::Usage(e.to_string()))
}

/// Deep merge: objects merge key by key, anything else replaces.
fn merge(base: &mut serde_json::Value, over: serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

fn read_values(files: &[PathBuf], sets: &[String]) -> Result<Option<serde_json::Value>, CliError> {
    if files.is_empty() && sets.is_empty() {
        return Ok(None);
    }
    let mut acc = serde_json::Value::Object(serde_json::Map::new());
    for f in files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| CliError::Usage(format!("{}: {e}", f.display())))?;
        let v: serde_json::Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(je) => crds::yaml::from_str(&text).map_err(|ye| {
                CliError::Usage(format!(
                    "{}: neither JSON ({je}) nor YAML ({ye})",
                    f.display()
                ))
            })?,
        };
        if !v.is_object() {
            return Err(CliError::Usage(format!(
                "{}: values must be an object",
                f.display()
            )));
        }
        merge(&mut acc, v);
    }
    for s in sets {
        let (path, raw) = s
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--set {s:?}: expected path=value")))?;
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(CliError::Usage(format!("--set {s:?}: empty path element")));
        }
        let value = serde_json::from_str(raw)
            .unwrap_or_else(|_| serde_json::Value::String(raw.to_string()));
        let mut nested = value;
        for key in path.rsplit('.') {
            let mut m = serde_json::Map::new();
            m.insert(key.to_string(), nested);
            nested = serde_json::Value::Object(m);
        }
        merge(&mut acc, nested);
    }
    Ok(Some(acc))
}

/// `MODULE@VERSION` → (path with major, version).
fn parse_coordinate(s: &str) -> Option<(String, String)> {
    let (base, version) = s.rsplit_once('@')?;
    let v = cue::module::semver::Version::parse(version)?;
    if !version.starts_with('v') || base.is_empty() {
        return None;
    }
    Some((format!("{base}@v{}", v.major), version.to_string()))
}

/// The module's declared version, read by building its root package (DIR mode only).
fn declared_version(tree: &MemFs, registry: &dyn Registry) -> Result<String, CliError> {
    let rt = cue::Runtime::default();
    let v = rt
        .build_module(
            tree,
            &cue::module::Target::Dir(String::new()),
            Some(registry),
        )
        .map_err(|d| CliError::Usage(format!("module directory: {}", rt.render(&d))))?;
    let path = cue::Path::parse("metadata.version").map_err(|e| CliError::Usage(e.to_string()))?;
    match v.lookup_path(&path).map(|x| x.to_json_value()) {
        Some(Ok(serde_json::Value::String(s))) => Ok(format!("v{s}")),
        _ => Err(CliError::Usage(
            "module directory: metadata.version is not a concrete string".into(),
        )),
    }
}

/// `--platform`: a generated platform directory, or a Platform CR (YAML or JSON) generated into a
/// temporary directory by the Platform reconciler's generator (`--core-module`,
/// `--core-version`, `--platform-shape`, modules from the same registry as the render). The
/// temporary directory lives as long as the returned guard.
fn platform_of(args: &RenderArgs) -> Result<(BuiltPlatform, Option<tempfile::TempDir>), CliError> {
    let usage = |e: String| CliError::Usage(format!("--platform {}: {e}", args.platform.display()));
    if args.platform.is_dir() {
        return Ok((
            crate::platform::from_dir(&args.platform).map_err(usage)?,
            None,
        ));
    }
    let text = std::fs::read_to_string(&args.platform).map_err(|e| usage(e.to_string()))?;
    let plat: crds::Platform = crds::yaml::from_str(&text)
        .map_err(|e| usage(format!("not a Platform manifest (nor a directory): {e}")))?;
    if plat.metadata.name.as_deref() != Some(crds::PLATFORM_NAME) {
        return Err(usage(format!(
            "the Platform must be named {:?}, as on a cluster",
            crds::PLATFORM_NAME
        )));
    }
    let (entries, _) = crate::controller::platform::entries(&plat.spec.registry, &[])
        .map_err(|e| usage(e.message))?;
    let input = PlatformInput {
        platform_type: plat.spec.r#type.clone(),
        entries,
    };
    let kernel = crate::platform::PlatformKernel::new(
        Arc::new(module_registry(args)?),
        args.generator.generator(),
        crate::kernel::limits::render_config(cue::Config::default(), args.render_memory_limit),
    );
    let files = kernel.generate(&input).map_err(|e| usage(e.to_string()))?;
    let dir = tempfile::Builder::new()
        .prefix("opm-render-platform-")
        .tempdir()
        .map_err(|e| usage(e.to_string()))?;
    for (rel, bytes) in files {
        let path = dir.path().join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| usage(e.to_string()))?;
        }
        std::fs::write(&path, bytes).map_err(|e| usage(e.to_string()))?;
    }
    let built = crate::platform::from_dir(dir.path()).map_err(usage)?;
    Ok((built, Some(dir)))
}

/// Formats a result as the command prints it.
pub fn format_result(r: &RenderResult, output: &str) -> Result<String, CliError> {
    match output {
        "json" => serde_json::to_string_pretty(r)
            .map(|s| s + "\n")
            .map_err(|e| CliError::Usage(e.to_string())),
        "yaml" => {
            let mut out = String::new();
            for o in &r.objects {
                out.push_str("---\n");
                out.push_str(&format!(
                    "# component: {}, transformer: {}\n",
                    o.component, o.transformer
                ));
                let y =
                    crds::yaml::to_string(&o.object).map_err(|e| CliError::Usage(e.to_string()))?;
                out.push_str(&y);
            }
            Ok(out)
        }
        other => Err(CliError::Usage(format!(
            "-o {other:?}: expected yaml or json"
        ))),
    }
}

/// Runs the command; returns what to print on stdout and the warnings for stderr.
pub fn run(args: &RenderArgs) -> Result<(String, Vec<String>), CliError> {
    let inner = registry(args)?;
    let values = read_values(&args.values, &args.set)?;
    let (platform, _generated) = platform_of(args)?;
    let local = FsPath::new(&args.module);
    let (reg, path, version): (Arc<dyn Registry>, String, String) = if local.is_dir() {
        let tree = crate::render::stage::dir_tree(local)
            .map_err(|e| CliError::Usage(format!("{}: {e}", local.display())))?;
        let mf_bytes = tree
            .read_file("cue.mod/module.cue")
            .map_err(|e| CliError::Usage(format!("{}: {e}", local.display())))?;
        let mf = crate::render::deps::parse_module_file(&mf_bytes).map_err(CliError::Usage)?;
        let version = declared_version(&tree, inner.as_ref())?;
        let module = ModuleVersion {
            path: mf.module.clone(),
            version: version.clone(),
        };
        let reg: Arc<dyn Registry> = Arc::new(LocalFirst {
            module,
            tree: Arc::new(tree),
            inner,
        });
        (reg, mf.module, version)
    } else {
        let (path, version) = parse_coordinate(&args.module).ok_or_else(|| {
            CliError::Usage(format!(
                "{:?} is neither a directory nor MODULE@VERSION (e.g. example.com/app@v1.2.3)",
                args.module
            ))
        })?;
        (inner, path, version)
    };
    let wall = std::time::Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            CliError::Usage(format!("--timeout {}: not a positive number", args.timeout))
        })?;
    let config = crate::kernel::limits::render_config(
        cue::Config {
            max_wall_time: wall,
            ..cue::Config::default()
        },
        args.render_memory_limit,
    );
    let renderer = Renderer::new(reg)
        .with_runtime_name(args.runtime_name.clone())
        .with_config(config);
    let req = ModuleRequest {
        name: args.name.clone(),
        namespace: args.namespace.clone(),
        path,
        version,
        values,
    };
    let skew = if args.refuse_skew {
        SkewPolicy::Refuse
    } else {
        SkewPolicy::Warn
    };
    let result = renderer
        .render(&req, &platform, skew)
        .map_err(|e: Error| CliError::Render(e.into()))?;
    let text = format_result(&result, &args.output)?;
    Ok((text, result.warnings))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn coordinates_take_the_major_from_the_version() {
        assert_eq!(
            parse_coordinate("fixtures.test/modules/demo@v0.1.0"),
            Some(("fixtures.test/modules/demo@v0".into(), "v0.1.0".into()))
        );
        assert_eq!(
            parse_coordinate("a.test/m@v2.0.0-alpha.1"),
            Some(("a.test/m@v2".into(), "v2.0.0-alpha.1".into()))
        );
        assert_eq!(parse_coordinate("a.test/m"), None);
        assert_eq!(parse_coordinate("a.test/m@latest"), None);
    }

    #[test]
    fn values_merge_deeply_and_sets_apply_last() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.yaml");
        std::fs::write(&a, r#"{"image": {"tag": "1", "repository": "r"}, "n": 1}"#).unwrap();
        std::fs::write(&b, "image:\n  tag: \"2\"\n").unwrap();
        let v = read_values(&[a, b], &["n=3".into(), "x.y=hello".into()])
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"image": {"tag": "2", "repository": "r"}, "n": 3, "x": {"y": "hello"}})
        );
        assert!(read_values(&[], &["=1".into()]).is_err());
    }
}
