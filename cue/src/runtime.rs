//! [`Runtime`]: an evaluation context (source files, the evaluator and its limits) and what it
//! builds: packages from files or from a loaded module build, expressions in their scope, values
//! from JSON data, and diagnostics rendered as text or as JSON-serialisable reports.
//!
//! Rules (docs/design/render.md §1.3–§2; docs/design/conventions.md §2, §5):
//! - a runtime has one budget, `Config::max_steps` steps, `Config::max_memory_bytes` bytes of
//!   accounted allocations and a deadline `Config::max_wall_time` after [`Runtime::new`], shared
//!   by every call on it and its values (never reset per call); a
//!   spent budget makes every further evaluation a [`DiagCode::Limit`] diagnostic, and
//!   [`Runtime::limit_exceeded`] tells which [`Limit`] stopped it (typed: callers never read
//!   message text); a [`CancelHandle`] stops it from another thread at its next step;
//! - every call that parses, compiles or evaluates runs with enough stack (module `shared`);
//! - values enter as data, never as text: [`Runtime::value_from_json`] builds the value from the
//!   `serde_json::Value` tree (object keys are regular fields, in the object's order; integers are
//!   CUE `int`, other numbers CUE `float`), so no CUE syntax in the data is ever interpreted;
//! - [`Runtime::export_expr`] is `compile_expr` followed by [`Value::to_json_value`], keeping
//!   nothing it evaluated: unless the evaluation changed a value built before it (the first reach
//!   of a definition evaluates it in place, and that is kept), everything it built is dropped
//!   again, so a render's memory is its instance's, not its instance's plus every output's;
//! - [`Runtime::reports`] turns diagnostics into [`DiagnosticReport`]s with file:line:col
//!   positions (1-based, byte columns as `cue` prints them) that a JSON API returns as they are.

use crate::adt::{self, Expr, Label, VId};
use crate::ast;
use crate::compile;
use crate::diagnostics::{
    self, DiagCode, Diagnostic, DiagnosticReport, Limit, MemoryExceeded, Position,
};
use crate::eval::{self, Config, Conj, Ev};
use crate::module;
use crate::parser;
use crate::shared::{enter, lock, throw_away, with_stack, Inner};
use crate::source::{SourceMap, Span};
use crate::value::{data_of_json, json_at, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// An evaluation context: source files, the evaluator and its limits.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Mutex<Inner>>,
}

/// Stops the evaluations of one [`Runtime`] from another thread (a timed-out request): the
/// running evaluation fails at its next step, and so does every later one, with a
/// [`DiagCode::Limit`] diagnostic and [`Limit::Cancelled`] from [`Runtime::limit_exceeded`].
#[derive(Clone, Debug)]
pub struct CancelHandle {
    flag: Arc<AtomicBool>,
}

impl CancelHandle {
    /// Cancels the runtime's evaluation (idempotent).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// `true` once [`CancelHandle::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

impl Runtime {
    /// A runtime with the given limits.
    pub fn new(config: Config) -> Runtime {
        Runtime {
            inner: Arc::new(Mutex::new(Inner {
                ev: Ev::new(config),
                map: SourceMap::default(),
                files: Vec::new(),
                lits: Vec::new(),
                loaded: 0,
                hidden_scopes: Default::default(),
            })),
        }
    }

    /// Builds one package from `(name, source)` pairs. Syntax errors and files of different
    /// packages are diagnostics.
    pub fn build_files(&self, files: &[(String, String)]) -> Result<Value, Vec<Diagnostic>> {
        enter(&self.inner, |g| self.build_files_in(g, files))
    }

    fn build_files_in(
        &self,
        g: &mut Inner,
        files: &[(String, String)],
    ) -> Result<Value, Vec<Diagnostic>> {
        let mut diags = Vec::new();
        let mut asts = Vec::new();
        for (name, src) in files {
            // The memory budget: the tree and the compiled form of the text (a spent budget
            // fails the first step of the evaluation).
            g.ev.charge_source(src.len());
            let id = g.map.add(name.as_str(), src.as_str());
            let (f, errs) = parser::parse_file(id, src);
            for e in errs {
                diags.push(Diagnostic {
                    code: DiagCode::Syntax,
                    path: String::new(),
                    message: e.message.clone(),
                    span: Some(e.span),
                    related: Vec::new(),
                });
            }
            asts.push(Arc::new(f));
        }
        let mut pkg: Option<String> = None;
        for f in &asts {
            if let Some(p) = &f.package {
                match &pkg {
                    None => pkg = Some(p.name.clone()),
                    Some(q) if *q != p.name && p.name != "_" && q != "_" => {
                        diags.push(Diagnostic::load(format!(
                            "found packages {q:?} and {:?} in the same build",
                            p.name
                        )));
                    }
                    _ => {}
                }
            }
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        let refs: Vec<&ast::File> = asts.iter().map(|f| f.as_ref()).collect();
        let mut c = compile::Compiler::new();
        let lits = c.compile_package(&refs);
        if !c.fatal.is_empty() {
            return Err(c
                .fatal
                .iter()
                .map(|b| Diagnostic::from_bottom(String::new(), b))
                .collect());
        }
        let root = package_root(&mut g.ev, &lits);
        g.files.extend(asts);
        g.lits.extend(lits);
        Ok(Value {
            inner: self.inner.clone(),
            v: root,
        })
    }

    /// Loads a package of the main module `fs` with [`module::load`] (dependency modules come
    /// from `registry`) and builds it with [`Runtime::build_loaded`].
    pub fn build_module(
        &self,
        fs: &dyn module::FileSystem,
        target: &module::Target,
        registry: Option<&dyn module::Registry>,
    ) -> Result<Value, Vec<Diagnostic>> {
        let stack = lock(&self.inner).ev.config.max_stack_bytes;
        let build = with_stack(stack, || module::load(fs, target, registry));
        self.build_loaded(build)
    }

    /// Builds every instance of a loaded build and returns the main one.
    ///
    /// Rules: each instance is compiled and evaluated once and shared by all its importers
    /// (imports resolve to instances by the loader's links, not by path, so two majors of one
    /// module are two packages); hidden fields (`_x`, `_#x`) are scoped to their package, so a
    /// package cannot see or clash with another's; any load error fails the build with all of
    /// them, positioned where the loader knows the import spec.
    pub fn build_loaded(&self, build: module::LoadedBuild) -> Result<Value, Vec<Diagnostic>> {
        enter(&self.inner, |g| self.build_loaded_in(g, build))
    }

    fn build_loaded_in(
        &self,
        g: &mut Inner,
        build: module::LoadedBuild,
    ) -> Result<Value, Vec<Diagnostic>> {
        let module::LoadedBuild {
            instances,
            root,
            mut sources,
            errors,
            ..
        } = build;
        // File ids of the loaded trees index `sources`: adopt it when this runtime has no files
        // yet, otherwise register the shared (cached) files under their process-wide ids and
        // re-parse the others under fresh ids of the runtime's map.
        // The memory budget: the trees and the compiled form of every file built (a spent
        // budget fails the first step of the evaluation).
        let text: usize = instances
            .iter()
            .flat_map(|inst| &inst.files)
            .map(|f| sources.text(f.id).len())
            .sum();
        g.ev.charge_source(text);
        let adopt = g.map.is_empty();
        if adopt {
            std::mem::swap(&mut g.map, &mut sources);
        }
        if !errors.is_empty() {
            return Err(errors
                .iter()
                .map(|e| {
                    let mut d = Diagnostic::load(e.to_string());
                    if adopt {
                        d.span = e.span();
                    }
                    d
                })
                .collect());
        }
        let base = g.loaded;
        g.loaded += instances.len();
        let key = |i: usize| format!("/loaded/{}", base + i);
        let mut diags = Vec::new();
        let mut roots = Vec::with_capacity(instances.len());
        for (i, inst) in instances.iter().enumerate() {
            let asts: Vec<Arc<ast::File>> = if adopt {
                inst.files.iter().map(|f| f.ast.clone()).collect()
            } else {
                let mut out = Vec::new();
                for f in &inst.files {
                    // A shared (cached) file keeps its process-wide id: register it, reuse the tree.
                    if let Some(shared) = sources.shared(f.id) {
                        g.map.add_shared(f.id, shared);
                        out.push(f.ast.clone());
                        continue;
                    }
                    let text = sources.text(f.id).to_string();
                    let id = g.map.add(f.name.clone(), text.clone());
                    let (ast, errs) = parser::parse_file(id, &text);
                    diags.extend(errs.into_iter().map(|e| Diagnostic {
                        code: DiagCode::Syntax,
                        path: String::new(),
                        message: e.message,
                        span: Some(e.span),
                        related: Vec::new(),
                    }));
                    out.push(Arc::new(ast));
                }
                out
            };
            let refs: Vec<&ast::File> = asts.iter().map(|f| f.as_ref()).collect();
            let mut c = compile::Compiler::new();
            c.hidden_scope = if i == root { 0 } else { base + i + 1 };
            if i != root {
                g.hidden_scopes
                    .insert(inst.import_path.clone(), c.hidden_scope);
            }
            c.import_keys = inst
                .imports
                .iter()
                .map(|(path, &j)| (path.clone(), key(j)))
                .collect();
            let lits = c.compile_package(&refs);
            diags.extend(
                c.fatal
                    .iter()
                    .map(|b| Diagnostic::from_bottom(String::new(), b)),
            );
            let v = package_root(&mut g.ev, &lits);
            g.ev.add_package(key(i), v);
            if i == root {
                g.files.extend(asts);
            }
            g.lits.extend(lits);
            roots.push(v);
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        let v = roots
            .get(root)
            .copied()
            .ok_or_else(|| vec![Diagnostic::load("the build has no main instance")])?;
        Ok(Value {
            inner: self.inner.clone(),
            v,
        })
    }

    /// Compiles an expression in the scope of a built package (`cue export -e`).
    pub fn compile_expr(&self, pkg: &Value, src: &str) -> Result<Value, Vec<Diagnostic>> {
        enter(&self.inner, |g| self.compile_expr_in(g, pkg, src))
    }

    fn compile_expr_in(
        &self,
        g: &mut Inner,
        pkg: &Value,
        src: &str,
    ) -> Result<Value, Vec<Diagnostic>> {
        let id = g.map.add("<expr>", src);
        let (e, errs) = parser::parse_expr(id, src);
        if !errs.is_empty() {
            return Err(errs
                .into_iter()
                .map(|e| Diagnostic {
                    code: DiagCode::Syntax,
                    path: String::new(),
                    message: e.message,
                    span: Some(e.span),
                    related: Vec::new(),
                })
                .collect());
        }
        let files = g.files.clone();
        let refs: Vec<&ast::File> = files.iter().map(|f| f.as_ref()).collect();
        let mut c = compile::Compiler::new();
        let ce = c.compile_expr_in_package(&refs, &e);
        // The expression is evaluated in an environment whose vertex is the package root.
        let env = eval::Env::scope_of(pkg.v);
        g.ev.eval(pkg.v);
        let v = g.ev.anon(Some(env), ce);
        Ok(Value {
            inner: self.inner.clone(),
            v,
        })
    }

    /// Renders diagnostics with file positions.
    pub fn render(&self, diags: &[Diagnostic]) -> String {
        let g = lock(&self.inner);
        diagnostics::render(diags, &g.map)
    }

    /// The handle that cancels this runtime's evaluations from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            flag: lock(&self.inner).ev.cancel_flag(),
        }
    }

    /// The limit that stopped the latest evaluation that hit one, if any (cancellation, the
    /// deadline, the step budget, or nesting depth). Typed: callers never read message text.
    pub fn limit_exceeded(&self) -> Option<Limit> {
        lock(&self.inner).ev.limits().last().map(|(_, k)| *k)
    }

    /// The first time an evaluation ran out of the memory budget (`Config::max_memory_bytes`):
    /// the budget, the figure reached and the value being evaluated. Typed, as
    /// [`Runtime::limit_exceeded`]; [`crate::Error::Memory`] carries it as an error.
    pub fn memory_exceeded(&self) -> Option<MemoryExceeded> {
        lock(&self.inner).ev.memory_exceeded().cloned()
    }

    /// Bytes the runtime's evaluations have charged to the memory budget so far (what they
    /// allocated, less what rolled-back throw-away evaluations gave back).
    pub fn memory_used(&self) -> u64 {
        lock(&self.inner).ev.memory_used()
    }

    /// Time since the runtime was created (its deadline is `Config::max_wall_time` after that).
    pub fn elapsed(&self) -> std::time::Duration {
        lock(&self.inner).ev.elapsed()
    }

    /// Evaluation steps spent so far out of `Config::max_steps`.
    pub fn steps_used(&self) -> u64 {
        lock(&self.inner).ev.steps_used()
    }

    /// [`Runtime::compile_expr`] then [`Value::to_json_value`], keeping nothing it evaluated
    /// (see the module rules): the evaluator rolls back to where it was before, unless the
    /// evaluation changed a vertex built earlier, in which case all of it is kept.
    pub fn export_expr(
        &self,
        pkg: &Value,
        src: &str,
    ) -> Result<serde_json::Value, Vec<Diagnostic>> {
        enter(&self.inner, |g| {
            throw_away(g, |g| {
                let v = self.compile_expr_in(g, pkg, src)?;
                let d = v.data_in(&mut g.ev)?;
                json_at(&d, || g.ev.path_text(v.v))
            })
        })
    }

    /// A value of this runtime built from JSON data (see the module rules).
    pub fn value_from_json(&self, data: &serde_json::Value) -> Value {
        let expr = eval::data_to_expr(&data_of_json(data), Span::default());
        let v = lock(&self.inner).ev.anon(None, expr);
        Value {
            inner: self.inner.clone(),
            v,
        }
    }

    /// Diagnostics with resolved file positions, serialisable as JSON.
    pub fn reports(&self, diags: &[Diagnostic]) -> Vec<DiagnosticReport> {
        let g = lock(&self.inner);
        let pos = |s: Span| {
            g.map.position(s).map(|(file, line, column)| Position {
                file: file.to_string(),
                line,
                column,
            })
        };
        diags
            .iter()
            .map(|d| DiagnosticReport {
                code: d.code.as_str().to_string(),
                path: d
                    .value_path()
                    .map_or_else(|| d.path.clone(), |p| p.to_string()),
                message: d.message.clone(),
                primary: d.span.and_then(pos),
                related: d.related.iter().filter_map(|&s| pos(s)).collect(),
            })
            .collect()
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new(Config::default())
    }
}

/// The root vertex of a package: one conjunct per file's struct literal.
fn package_root(ev: &mut Ev, lits: &[Arc<adt::StructLit>]) -> VId {
    let root = ev.new_vertex(None, Label::internal("root"));
    for l in lits {
        ev.add_conj(root, Conj::new(None, Expr::Struct(l.clone())));
    }
    root
}

/// The load target of command-line style arguments: one directory (`.` or `./dir`) names a
/// package; anything else is a list of files: `.cue` files, and `.json` files, whose data is
/// CUE syntax already (an object is the file's struct, an array or a scalar its embedded value).
pub fn target_of_args(args: &[String]) -> module::Target {
    let clean = |a: &str| {
        let a = a.trim_end_matches('/');
        let a = a.strip_prefix("./").unwrap_or(a);
        if a.is_empty() || a == "." {
            String::new()
        } else {
            a.to_string()
        }
    };
    match args {
        [] => module::Target::Dir(String::new()),
        [one] if !one.ends_with(".cue") && !one.ends_with(".json") => {
            module::Target::Dir(clean(one))
        }
        many => module::Target::Files(many.iter().map(|a| clean(a)).collect()),
    }
}

/// What `cue export` does: build the package named by `args` (files or directories of `fs`),
/// fail on any error in it, and print the value (or `expr` evaluated in it) as JSON or YAML.
/// Returns the output, or the rendered diagnostics.
pub fn export_args(
    fs: &dyn module::FileSystem,
    args: &[String],
    expr: Option<&str>,
    yaml: bool,
    config: Config,
) -> Result<String, String> {
    let rt = Runtime::new(config);
    let dot = [".".to_string()];
    let args = if args.is_empty() { &dot[..] } else { args };
    let root = rt
        .build_module(fs, &target_of_args(args), None)
        .map_err(|d| rt.render(&d))?;
    let v = match expr {
        Some(e) => rt.compile_expr(&root, e).map_err(|d| rt.render(&d))?,
        None => {
            root.validate(false).map_err(|d| rt.render(&d))?;
            root
        }
    };
    let r = if yaml { v.to_yaml() } else { v.to_json() };
    r.map_err(|d| rt.render(&d))
}
