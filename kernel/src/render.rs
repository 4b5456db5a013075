//! The render kernel: OPM modules in, Kubernetes objects out (docs/design/render.md §1; docs/design/operator.md
//! §2.0 `ModuleRenderer`; docs/design/architecture.md §3).
//!
//! Pipeline of one render ([`Renderer::render`]), each step in its own part:
//! 1. **Acquire and stage** (`stage`, docs/design/render.md §1.2–§1.3): pull `path@version` through the
//!    registry, stage it in memory as the main module of the render build with the promoted deps
//!    (`deps`), synthesize the instance package (values as JSON data) and the render glue, and
//!    build once, in a fresh [`cue::Runtime`] bounded by the renderer's [`cue::Config`].
//! 2. **Shape gate and identity** (docs/design/render.md §1.2 steps 3–4): the module's root package must have `kind`
//!    concretely `"Module"` and concrete `metadata.{name, modulePath, version}`; `modulePath` must
//!    equal the requested path and `version` the tag without its `v` ([`Error::Identity`]).
//! 3. **Skew** (docs/design/render.md §1.7, docs/design/decisions.md §18): the module's own requirements against the platform's tidied list;
//!    newer → a warning (Warn) or [`Error::Skew`] (Refuse).
//! 4. **Instance** (docs/design/render.md §1.3): the values unify with the instance's `#module.#config` (closedness,
//!    bounds; each problem is an [`Error::Values`] named `values.<path>`, whatever the core does
//!    with `values`), then the whole instance validates concretely (its regular fields, with
//!    what they hold; not the instance's own `#module` copy, see `validate_instance`); problems
//!    under `values` are [`Error::Values`] (each names `values.<path>` and the positions of the schema constraint and
//!    the value), others [`Error::Instance`]; then the metadata is decoded.
//! 5. **Match** (`matcher`, docs/design/render.md §1.6, docs/design/decisions.md §26): in Rust over the build (the choice and its reason are in
//!    the `matcher` docs).
//! 6. **Execute** (docs/design/render.md §1.6–§1.8): for each pair sorted by (component, transformer FQN), the
//!    transformer's `#transform` is unified with the component and the context (data: instance and
//!    component metadata, runtime name) and its `output` exported; a struct output is one
//!    object, a list one object per element (an empty list none), anything else an error; each
//!    pair's output must be concrete. All pair failures are reported together. Each pair is
//!    evaluated and exported by `Runtime::export_expr`, which rolls the evaluator back
//!    afterwards, so a render never holds more than one output's evaluation at a time.
//! 7. **Result**: objects (JSON in CUE field order) with provenance, inventory entries
//!    (`inventory::entries_of`), warnings, required contracts (sorted, unique) and the render
//!    digest (`inventory::render_digest`, docs/design/operator.md §6.1).
//!
//! Renders share nothing: each has its own runtime, and the evaluator runs on a thread of the
//! render's own with a stack sized from the config, so callers may call from `spawn_blocking`.
//! An exceeded limit anywhere is [`Error::Limit`] (class `Timeout`), a spent memory budget
//! [`Error::Memory`] (class `ResourceExhausted`: `cue::Config::max_memory_bytes`, one budget per
//! render, as the steps and the deadline are).
//!
//! ModulePackage renders ([`Renderer::render_package`], `kernel::PackageRenderer`) stage the
//! authored instance package directory as the main module instead of a pulled module, gate on
//! `kind: "ModuleInstance"` ([`Error::UnsupportedKind`]), and share steps 3–7. Their errors name
//! the package by its module path, never by the directory (`stage`: a ModulePackage artifact is
//! extracted into a fresh temporary directory per reconcile).
//!
//! Known gaps (written down, not hidden): the promotion invariant check (an OPM path resolving off the roots) is
//! not checked beyond "the platform wins every shared path"; the context is built the alpha.4 way
//! (instance and component metadata + runtime name), not by a projection in core (docs/design/decisions.md §22).

pub mod deps;
pub mod error;
pub mod matcher;
pub mod stage;

use std::sync::Arc;

use cue::module::Registry;
use cue::path::{Path, Selector};
use cue::{Diagnostic, Runtime, Value};

pub use error::{Demand, DemandReason, Error, IdentityField, PairFailure};

use crate::SkewPolicy;
use crate::{
    BuiltPlatform, InstanceRef, KernelError, ModuleRenderer, ModuleRequest, PackageRenderer,
    Problem, RenderResult, RenderedObject, RUNTIME_NAME,
};

/// Renders modules on built platforms. Cheap to clone; holds no evaluation state.
#[derive(Clone)]
pub struct Renderer {
    registry: Arc<dyn Registry>,
    config: cue::Config,
    runtime_name: String,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("config", &self.config)
            .field("runtime_name", &self.runtime_name)
            .finish_non_exhaustive()
    }
}

/// Diagnostics as [`Problem`]s with resolved positions.
pub(crate) fn problems_of(rt: &Runtime, diags: &[Diagnostic]) -> Vec<Problem> {
    rt.reports(diags).into_iter().map(Problem::from).collect()
}

fn def(name: &str) -> Selector {
    Selector::Definition(name.to_string())
}

fn field(name: &str) -> Selector {
    Selector::Field(name.to_string())
}

/// The instance metadata the kernel decodes (docs/design/render.md §1.3).
#[derive(Debug, Clone, serde::Deserialize)]
struct InstanceMeta {
    name: String,
    namespace: String,
    fqn: String,
    uuid: String,
    #[serde(default)]
    labels: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    annotations: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The component metadata the context carries.
#[derive(Debug, Clone, serde::Deserialize)]
struct ComponentMeta {
    name: String,
    #[serde(default)]
    labels: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    annotations: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `{k: v}` with the optional maps only when present.
fn meta_json(
    base: Vec<(&str, serde_json::Value)>,
    labels: &Option<serde_json::Map<String, serde_json::Value>>,
    annotations: &Option<serde_json::Map<String, serde_json::Value>>,
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (k, v) in base {
        m.insert(k.to_string(), v);
    }
    if let Some(l) = labels {
        m.insert("labels".into(), serde_json::Value::Object(l.clone()));
    }
    if let Some(a) = annotations {
        m.insert("annotations".into(), serde_json::Value::Object(a.clone()));
    }
    serde_json::Value::Object(m)
}

impl Renderer {
    /// A renderer pulling modules through `registry`, with default limits and the operator's
    /// runtime name.
    pub fn new(registry: Arc<dyn Registry>) -> Renderer {
        Renderer {
            registry,
            config: cue::Config::default(),
            runtime_name: RUNTIME_NAME.to_string(),
        }
    }

    /// The same renderer (limits, runtime name) fetching through `registry` instead: a render
    /// whose modules must pass a signature policy of its own fetches through a verifying view of
    /// the shared client.
    pub fn with_registry(&self, registry: Arc<dyn Registry>) -> Renderer {
        Renderer {
            registry,
            ..self.clone()
        }
    }

    /// Sets the evaluation limits of every render.
    pub fn with_config(mut self, config: cue::Config) -> Renderer {
        self.config = config;
        self
    }

    /// Sets the runtime name stamped as `app.kubernetes.io/managed-by`.
    pub fn with_runtime_name(mut self, name: impl Into<String>) -> Renderer {
        self.runtime_name = name.into();
        self
    }

    /// Renders `req` on `platform` (see the module docs for the pipeline).
    pub fn render(
        &self,
        req: &ModuleRequest,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, Error> {
        self.on_render_thread(platform, || self.render_here(req, platform, skew))
    }

    /// Runs `f` with the stack the evaluator's limit needs ([`crate::stack`]; no record →
    /// PlatformNotReady).
    fn on_render_thread(
        &self,
        platform: &BuiltPlatform,
        f: impl FnOnce() -> Result<RenderResult, Error> + Send,
    ) -> Result<RenderResult, Error> {
        if platform.dir.as_os_str().is_empty() {
            return Err(Error::PlatformNotReady);
        }
        let stack = crate::stack::eval_stack_bytes(&self.config);
        crate::stack::on_eval_stack(stack, "opm-render", f)
            .map_err(|e| Error::Thread(e.to_string()))?
    }

    fn render_here(
        &self,
        req: &ModuleRequest,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, Error> {
        let coord = stage::coordinate(&req.path, &req.version);
        let t0 = std::time::Instant::now();
        let mark = |what: &str| tracing::debug!(elapsed = ?t0.elapsed(), module = %req.path, "render: {what}");
        let staged = stage::stage(&self.registry, req, platform, self.config.clone())?;
        mark("built");
        let out = self.render_staged(&staged, req, &coord, platform, skew);
        staged.retire();
        out
    }

    /// The module render after staging: the shape gate, identity, then [`Renderer::finish`].
    fn render_staged(
        &self,
        staged: &stage::Staged,
        req: &ModuleRequest,
        coord: &str,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, Error> {
        let coord = coord.to_string();
        let root = &staged.root;
        let build = Build {
            staged,
            coordinate: &coord,
        };

        // Shape gate and identity.
        let module = build.lookup(root, vec![def("#module")], || Error::Shape {
            coordinate: coord.clone(),
            message: "the root package is missing".into(),
        })?;
        let text = |p: &[&str]| -> Result<String, Error> {
            let shown = p.join(".");
            let v = build.lookup(&module, p.iter().map(|s| field(s)).collect(), || {
                Error::Shape {
                    coordinate: coord.clone(),
                    message: format!("{shown} is missing"),
                }
            })?;
            match v.to_json_value() {
                Ok(serde_json::Value::String(s)) => Ok(s),
                Ok(other) => Err(Error::Shape {
                    coordinate: coord.clone(),
                    message: format!("{shown} is {other}, not a string"),
                }),
                Err(d) => {
                    if let Some(e) = build.limit(&d) {
                        return Err(e);
                    }
                    Err(Error::Shape {
                        coordinate: coord.clone(),
                        message: format!(
                            "{shown} is not concrete: {}",
                            d.first().map_or("", |x| x.message.as_str())
                        ),
                    })
                }
            }
        };
        let kind = text(&["kind"])?;
        if kind != "Module" {
            return Err(Error::Shape {
                coordinate: coord.clone(),
                message: format!("kind is {kind:?}, not \"Module\""),
            });
        }
        text(&["metadata", "name"])?;
        let declared_path = text(&["metadata", "modulePath"])?;
        let declared_version = text(&["metadata", "version"])?;
        if declared_path != req.path {
            return Err(Error::Identity {
                coordinate: coord,
                field: IdentityField::Path,
                declared: declared_path,
                fetched: req.path.clone(),
            });
        }
        let tag = req.version.strip_prefix('v').unwrap_or(&req.version);
        if declared_version != tag {
            return Err(Error::Identity {
                coordinate: coord,
                field: IdentityField::Version,
                declared: declared_version,
                fetched: tag.to_string(),
            });
        }

        tracing::debug!(module = %req.path, "render: gated");
        self.finish(staged, &coord, platform, skew, &declared_version)
    }

    /// The common tail of module and package renders: skew, instance validation, match,
    /// execute, result.
    fn finish(
        &self,
        staged: &stage::Staged,
        coord: &str,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
        declared_version: &str,
    ) -> Result<RenderResult, Error> {
        let coord = coord.to_string();
        let rt = &staged.rt;
        let root = &staged.root;
        let build = Build {
            staged,
            coordinate: &coord,
        };
        let t0 = std::time::Instant::now();
        let mark = |what: &str| tracing::debug!(elapsed = ?t0.elapsed(), module = %coord, "render: {what}");
        // Skew.
        let mut warnings = Vec::new();
        let platform_deps = if platform.deps.is_empty() {
            None
        } else {
            Some(&platform.deps)
        };
        if let Some(pd) = platform_deps {
            for f in deps::skew(&staged.module_file, pd) {
                match skew {
                    SkewPolicy::Refuse => {
                        return Err(Error::Skew {
                            coordinate: coord,
                            dep: f.dep,
                            module_version: f.module_version,
                            platform_version: f.platform_version,
                        })
                    }
                    SkewPolicy::Warn => warnings.push(format!(
                        "module {coord} requires {} {}, newer than the platform's {}",
                        f.dep, f.module_version, f.platform_version
                    )),
                }
            }
        }

        // Instance concreteness, values first.
        let instance = build.lookup(root, vec![def("#instance")], || Error::Instance {
            coordinate: coord.clone(),
            problems: Vec::new(),
        })?;
        // Values against the module's `#config` first (docs/design/render.md §1.3): a
        // core whose instance leaves `values` open and unifies it with `#config` only inside a
        // `let` (alpha.4: `values: _`, `let unifiedModule = #module & {#config: values}`) would
        // let an unknown key through, or report it under `components.…`.
        if let Some(d) = values_against_config(&instance) {
            if let Some(e) = build.limit(&d) {
                return Err(e);
            }
            return Err(Error::Values {
                coordinate: coord,
                problems: problems_of(rt, &d)
                    .into_iter()
                    .map(|mut p| {
                        p.path = values_path(&p.path);
                        p
                    })
                    .collect(),
            });
        }
        if let Err(d) = validate_instance(&instance) {
            if let Some(e) = build.limit(&d) {
                return Err(e);
            }
            let problems = problems_of(rt, &d);
            let strip = |p: &str| p.strip_prefix("#instance.").unwrap_or(p).to_string();
            let mut problems: Vec<Problem> = problems
                .into_iter()
                .map(|mut p| {
                    p.path = strip(&p.path);
                    p
                })
                .collect();
            let is_values = |p: &Problem| p.path == "values" || p.path.starts_with("values.");
            if problems.iter().any(is_values) {
                problems.retain(is_values);
                return Err(Error::Values {
                    coordinate: coord,
                    problems,
                });
            }
            return Err(Error::Instance {
                coordinate: coord,
                problems,
            });
        }
        let meta: InstanceMeta = build
            .lookup(&instance, vec![field("metadata")], || Error::Instance {
                coordinate: coord.clone(),
                problems: Vec::new(),
            })?
            .decode()
            .map_err(|e| Error::Instance {
                coordinate: coord.clone(),
                problems: vec![Problem {
                    path: "metadata".into(),
                    message: e.to_string(),
                    positions: Vec::new(),
                }],
            })?;
        let instance_label = format!("{}/{}", meta.namespace, meta.name);
        mark("instance validated");

        // Match.
        let comps_v = build.lookup(&instance, vec![field("components")], || Error::Instance {
            coordinate: coord.clone(),
            problems: Vec::new(),
        })?;
        let composed = build.lookup(root, vec![def("#transformers")], || Error::Platform {
            dir: platform.dir.display().to_string(),
            message: "the platform has no #composedTransformers".into(),
            problems: Vec::new(),
        })?;
        let comps = matcher::components(&comps_v);
        let tfs = matcher::transformers(&composed);
        let m = matcher::match_all(&comps, &tfs);
        warnings.extend(m.warnings);
        mark("matched");
        if !m.demands.is_empty() || !m.unmatched.is_empty() {
            return Err(Error::Resolution {
                instance: instance_label,
                demands: m.demands,
                unmatched: m.unmatched,
            });
        }

        // Execute.
        let instance_meta = meta_json(
            vec![
                ("name", meta.name.clone().into()),
                ("namespace", meta.namespace.clone().into()),
                ("fqn", meta.fqn.clone().into()),
                ("version", declared_version.into()),
                ("uuid", meta.uuid.clone().into()),
            ],
            &meta.labels,
            &meta.annotations,
        );
        let mut component_meta = std::collections::BTreeMap::new();
        for c in &comps {
            let cm: ComponentMeta = build
                .lookup(&c.value, vec![field("metadata")], || Error::Instance {
                    coordinate: coord.clone(),
                    problems: Vec::new(),
                })?
                .decode()
                .map_err(|e| Error::Instance {
                    coordinate: coord.clone(),
                    problems: vec![Problem {
                        path: format!("components.{}.metadata", c.name),
                        message: e.to_string(),
                        positions: Vec::new(),
                    }],
                })?;
            let j = meta_json(
                vec![("name", cm.name.clone().into())],
                &cm.labels,
                &cm.annotations,
            );
            component_meta.insert(c.name.clone(), j);
        }
        let mut objects = Vec::new();
        let mut failures = Vec::new();
        for (c, t) in &m.pairs {
            let expr = stage::pair_expr(
                c,
                t,
                &self.runtime_name,
                &instance_meta,
                component_meta.get(c).unwrap_or(&serde_json::Value::Null),
            );
            // Formatted only when the debug level is on (a `format!` per pair was not).
            tracing::debug!(
                elapsed = ?t0.elapsed(),
                module = %coord,
                component = %c,
                transformer = %t,
                "render: executing"
            );
            match execute(rt, root, &expr) {
                Ok(objs) => objects.extend(objs.into_iter().map(|object| RenderedObject {
                    object,
                    component: c.clone(),
                    transformer: t.clone(),
                })),
                Err(Exec::Limit(d)) => return Err(build.limit_of(&d)),
                Err(Exec::Failed(message, d)) => failures.push(PairFailure {
                    component: c.clone(),
                    transformer: t.clone(),
                    message,
                    problems: problems_of(rt, &d),
                }),
            }
        }
        if !failures.is_empty() {
            return Err(Error::Execute {
                instance: instance_label,
                failures,
            });
        }
        RenderResult::new(
            InstanceRef {
                name: meta.name,
                namespace: meta.namespace,
                fqn: meta.fqn,
                uuid: meta.uuid,
            },
            objects,
            warnings,
            m.required_contracts,
        )
        .map_err(|e| Error::Output {
            coordinate: coord.clone(),
            message: e.to_string(),
        })
    }
}

impl Renderer {
    /// Renders an authored instance package in `dir` (ModulePackage): gated on
    /// `kind: "ModuleInstance"` (else [`Error::UnsupportedKind`]), then the common tail.
    pub fn render_package(
        &self,
        dir: &std::path::Path,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, Error> {
        self.on_render_thread(platform, || self.render_package_here(dir, platform, skew))
    }

    fn render_package_here(
        &self,
        dir: &std::path::Path,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, Error> {
        let staged = stage::stage_package(&self.registry, dir, platform, self.config.clone())?;
        let out = self.render_package_staged(&staged, platform, skew);
        staged.retire();
        out
    }

    /// The package render after staging: the kind gate, then [`Renderer::finish`].
    fn render_package_staged(
        &self,
        staged: &stage::Staged,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, Error> {
        let shown = staged.module_file.module.clone();
        let instance = staged
            .root
            .lookup_path(&Path::new(vec![def("#instance")]))
            .ok_or_else(|| Error::UnsupportedKind {
                package: shown.clone(),
                message: "the root package is missing".into(),
            })?;
        let kind = instance
            .lookup_path(&Path::new(vec![field("kind")]))
            .map(|k| k.to_json_value());
        match kind {
            Some(Ok(serde_json::Value::String(k))) if k == "ModuleInstance" => {}
            Some(Ok(other)) => {
                return Err(Error::UnsupportedKind {
                    package: shown,
                    message: format!("kind is {other}, not \"ModuleInstance\""),
                })
            }
            _ => {
                return Err(Error::UnsupportedKind {
                    package: shown,
                    message: "kind is missing or not concrete".into(),
                })
            }
        }
        let version = instance
            .lookup_path(&Path::new(vec![def("#moduleMetadata"), field("version")]))
            .and_then(|v| v.to_json_value().ok())
            .and_then(|v| v.as_str().map(str::to_owned))
            .ok_or_else(|| Error::UnsupportedKind {
                package: shown.clone(),
                message: "the instance's module has no concrete metadata.version".into(),
            })?;
        self.finish(staged, &shown, platform, skew, &version)
    }
}

impl PackageRenderer for Renderer {
    fn render_package(
        &self,
        dir: &std::path::Path,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        Renderer::render_package(self, dir, platform, skew).map_err(KernelError::from)
    }
}

/// The build one render reads: its lookups tell a value that is missing from a budget that ran
/// out.
struct Build<'a> {
    staged: &'a stage::Staged,
    coordinate: &'a str,
}

impl Build<'_> {
    /// `from` at `path`, else `missing()`, unless the build has hit an evaluation limit (a lookup
    /// finds nothing once the step or time budget is spent): then [`Error::Limit`].
    fn lookup(
        &self,
        from: &Value,
        path: Vec<Selector>,
        missing: impl FnOnce() -> Error,
    ) -> Result<Value, Error> {
        from.lookup_path(&Path::new(path))
            .ok_or_else(|| match self.staged.root.validate(false) {
                Err(d) => self.limit(&d).unwrap_or_else(missing),
                Ok(()) => missing(),
            })
    }

    /// [`Error::Limit`] with the problems of `d`, when `d` reports a spent budget.
    fn limit(&self, d: &[Diagnostic]) -> Option<Error> {
        hit_limit(d).then(|| self.limit_of(d))
    }

    /// [`Error::Limit`] (or [`Error::Memory`]) with the problems of `d`.
    fn limit_of(&self, d: &[Diagnostic]) -> Error {
        limit_error(&self.staged.rt, self.coordinate, d)
    }
}

/// The error of a spent budget with the problems of `d`: [`Error::Memory`] when the runtime
/// recorded its memory budget as the limit hit (typed, `Runtime::memory_exceeded`), else
/// [`Error::Limit`].
pub(crate) fn limit_error(rt: &Runtime, coordinate: &str, d: &[Diagnostic]) -> Error {
    let problems = problems_of(rt, d);
    match rt.memory_exceeded() {
        Some(exceeded) => Error::Memory {
            coordinate: coordinate.to_string(),
            exceeded,
            problems,
        },
        None => Error::Limit {
            coordinate: coordinate.to_string(),
            problems,
        },
    }
}

/// Whether `d` reports a spent evaluation budget (steps, time, depth or output).
fn hit_limit(d: &[Diagnostic]) -> bool {
    d.iter().any(|x| x.code == cue::DiagCode::Limit)
}

/// Whole-instance concreteness (docs/design/render.md §1.3, §4.7): every regular field of the instance
/// validates concretely, errors in hidden fields and definitions inside them included. The
/// instance's own definitions (`#module`, `#moduleMetadata`: the module as declared, before
/// the values are unified in) are not walked: a render reads what `components`, `values` and
/// `metadata` reference of them, and nothing else (the Go kernel never evaluates the rest
/// either). Walking `#module` evaluated every component a second time and was half the cost
/// of a 129-component render. A bottom instance is validated whole, for its diagnostics.
fn validate_instance(instance: &cue::Value) -> Result<(), Vec<Diagnostic>> {
    if instance.is_bottom() {
        return instance.validate(true);
    }
    let filter = cue::FieldFilter {
        fields: true,
        required: true,
        ..cue::FieldFilter::default()
    };
    let mut diags = Vec::new();
    for f in instance.fields_where(filter) {
        if let Err(d) = f.value.validate(true) {
            diags.extend(d);
        }
    }
    if diags.is_empty() {
        Ok(())
    } else {
        Err(diags)
    }
}

/// The errors of `#module.#config & values` (closedness: an unknown key is `field not allowed`;
/// conflicts, bounds), or `None` when they unify or the instance has no values or no `#config`.
fn values_against_config(instance: &cue::Value) -> Option<Vec<Diagnostic>> {
    let values = instance.lookup_path(&Path::new(vec![field("values")]))?;
    let config = instance.lookup_path(&Path::new(vec![def("#module"), def("#config")]))?;
    // A throw-away check: the unified copy is not kept in the render's evaluator.
    config.check_unify(&values, false).err()
}

/// A problem path of `#config & values` as `values.<path>`.
fn values_path(p: &str) -> String {
    let rest = p
        .strip_prefix("#instance.")
        .unwrap_or(p)
        .trim_start_matches("#module.")
        .trim_start_matches("#config");
    let rest = rest.strip_prefix("values").unwrap_or(rest);
    match rest.trim_start_matches('.') {
        "" => "values".to_owned(),
        r => format!("values.{r}"),
    }
}

/// Why one pair failed.
enum Exec {
    Limit(Vec<Diagnostic>),
    Failed(String, Vec<Diagnostic>),
}

/// Evaluates one pair's output and splits it into objects.
fn execute(rt: &Runtime, root: &Value, expr: &str) -> Result<Vec<serde_json::Value>, Exec> {
    // Evaluated and exported in one call that frees the pair's evaluation again: the outputs
    // of all pairs are never held at once (the render's peak is the instance's).
    let data = rt.export_expr(root, expr).map_err(|d| {
        if hit_limit(&d) {
            Exec::Limit(d)
        } else if d.iter().any(|x| x.code == cue::DiagCode::Syntax) {
            Exec::Failed("the pair does not compile".into(), d)
        } else {
            Exec::Failed("the output is not valid and concrete".into(), d)
        }
    })?;
    match data {
        serde_json::Value::Object(_) => Ok(vec![data]),
        serde_json::Value::Array(items) => {
            if let Some(i) = items.iter().position(|x| !x.is_object()) {
                return Err(Exec::Failed(
                    format!("output element {i} is not an object"),
                    Vec::new(),
                ));
            }
            Ok(items)
        }
        other => Err(Exec::Failed(
            format!(
                "unexpected output kind: {}",
                match other {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Bool(_) => "bool",
                    serde_json::Value::Number(_) => "number",
                    _ => "string",
                }
            ),
            Vec::new(),
        )),
    }
}

impl ModuleRenderer for Renderer {
    fn render_module(
        &self,
        req: &ModuleRequest,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        self.render(req, platform, skew).map_err(KernelError::from)
    }
}
