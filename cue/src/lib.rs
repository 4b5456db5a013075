#![warn(missing_docs)]
//! `cue`: a CUE evaluator written in Rust, targeting the semantics of CUE v0.16–v0.17.
//!
//! Architecture invariants:
//! - No I/O except through [`module::FileSystem`] and [`module::Registry`]; no async, no network
//!   ([`module::DirFs`] is the only file system that touches the disk).
//! - Parsing never fails: it returns a tree plus positioned errors.
//! - Evaluation is synchronous, bounded by `Config` limits, and never panics on any input.
//!
//! The public entry points are [`Runtime`] (build a package from files, or a module and its
//! imports with [`Runtime::build_module`] over a [`module::FileSystem`] and a [`module::Registry`])
//! and [`Value`] (lookup, iteration, unification, validation, export). Values are `Send`: they
//! share the evaluator through an `Arc<Mutex<_>>`.
//!
//! The render kernel's facade (module `facade`, re-exported here): values addressed by [`Path`],
//! [`Value::fields_where`], data in with [`Runtime::value_from_json`] and [`Value::fill_path`],
//! data out with [`Value::to_json_value`] and [`Value::decode`], and [`Runtime::reports`].
//!
//! Budget and stack (render-spec §2, style.md §5):
//! - a [`Runtime`] has one budget: `Config::max_steps` steps and a deadline `Config::max_wall_time`
//!   after [`Runtime::new`], shared by every call on it and its values (never reset per call); a
//!   spent budget makes every further evaluation a [`DiagCode::Limit`] diagnostic;
//! - [`Runtime::cancel_handle`] gives a [`CancelHandle`] another thread sets to stop the
//!   evaluation at its next step; [`Runtime::limit_exceeded`] tells which [`Limit`] stopped it;
//! - evaluation never overflows a small thread stack: every call that parses, compiles or
//!   evaluates first makes sure `Config::max_stack_bytes` (plus a margin) is left, and runs on a
//!   fresh `stacker` segment of that size when the calling thread (a 2 MiB tokio
//!   `spawn_blocking` thread, say) has less. The evaluator's own stack budget then turns deeper
//!   recursion into a `Limit` diagnostic. A thread with enough stack (the CLI's 64 MiB) pays
//!   nothing; a small one pays one mapping of the segment per call: measured with
//!   `CUE_MEM_STACK_MIB=2 cargo bench -p cue --bench memory`, 2.2 ms per OPM-shaped render on a
//!   2 MiB thread against 0.93 ms on a 64 MiB one. Callers that render often should therefore
//!   run evaluation on threads with `max_stack_bytes` + 4 MiB of stack (tokio:
//!   `runtime::Builder::thread_stack_size` for the blocking pool); small threads stay correct.

// The evaluator's internals are private (issue 12).
mod adt;
pub mod ast;
mod builtins;
mod compile;
mod data;
pub mod errors;
mod eval;
pub mod export;
mod facade;
pub mod module;
pub mod parser;
pub mod path;
pub mod scanner;
pub mod source;
pub mod token;

use adt::{Expr, Label, LabelKind, VId};
pub use adt::{
    Kinds, K_BOOL, K_BYTES, K_FLOAT, K_INT, K_LIST, K_NULL, K_NUMBER, K_STRING, K_STRUCT, K_TOP,
};
pub use data::Val as Data;
use errors::SourceMap;
pub use errors::{DiagCode, Diagnostic, Limit};
pub use eval::Config;
use eval::{Conj, Ev};
pub use facade::{DecodeError, DiagnosticReport, Field, FieldConstraint, FieldFilter, Position};
pub use path::{Path, PathError, Selector};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Stack kept beyond `Config::max_stack_bytes` for the code between the evaluator's checks.
const STACK_MARGIN: usize = 2 << 20;

struct Inner {
    ev: Ev,
    map: SourceMap,
    files: Vec<Arc<ast::File>>,
    lits: Vec<Arc<adt::StructLit>>,
    /// Instances built from loaded builds so far (keys and hidden scopes are numbered by it).
    loaded: usize,
    /// The hidden-field scope of each loaded package by import path (the main package's is 0).
    hidden_scopes: std::collections::HashMap<String, usize>,
}

/// An evaluation context: source files, the evaluator and its limits.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Mutex<Inner>>,
}

/// A value in a [`Runtime`].
#[derive(Clone)]
pub struct Value {
    inner: Arc<Mutex<Inner>>,
    v: VId,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Runs `f` with at least `stack` bytes (plus [`STACK_MARGIN`]) of stack left: on the calling
/// thread when it has them, on a fresh segment otherwise.
fn with_stack<R>(stack: usize, f: impl FnOnce() -> R) -> R {
    let need = stack.saturating_add(STACK_MARGIN);
    stacker::maybe_grow(need, need.saturating_add(STACK_MARGIN), f)
}

/// One API call on the evaluator: enough stack, the stack base recorded, the limit error of the
/// previous call cleared (the step and time budget stays spent).
fn enter<R>(m: &Mutex<Inner>, f: impl FnOnce(&mut Inner) -> R) -> R {
    let mut g = lock(m);
    let stack = g.ev.config.max_stack_bytes;
    with_stack(stack, move || {
        g.ev.reset_limits();
        f(&mut g)
    })
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
                hidden_scopes: std::collections::HashMap::new(),
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
            g.ev.packages.insert(key(i), v);
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
        let env = Arc::new(eval::Env {
            up: None,
            vertex: pkg.v,
            kind: eval::EnvKind::Struct(Arc::new(adt::StructLit::default())),
            id: u64::MAX,
            canon: u64::MAX,
        });
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
        errors::render(diags, &g.map)
    }

    /// The handle that cancels this runtime's evaluations from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            flag: lock(&self.inner).ev.cancel.clone(),
        }
    }

    /// The limit that stopped the latest evaluation that hit one, if any (cancellation, the
    /// deadline, the step budget, or nesting depth). Typed: callers never read message text.
    pub fn limit_exceeded(&self) -> Option<Limit> {
        lock(&self.inner).ev.limits.last().map(|(_, k)| *k)
    }

    /// Time since the runtime was created (its deadline is `Config::max_wall_time` after that).
    pub fn elapsed(&self) -> std::time::Duration {
        lock(&self.inner).ev.elapsed()
    }

    /// Evaluation steps spent so far out of `Config::max_steps`.
    pub fn steps_used(&self) -> u64 {
        lock(&self.inner).ev.steps_used()
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new(Config::default())
    }
}

fn parse_path(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    for c in path.chars() {
        match c {
            '"' => in_q = !in_q,
            '.' if !in_q => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.retain(|s| !s.is_empty());
    out
}

impl Value {
    fn with<R>(&self, f: impl FnOnce(&mut Ev, VId) -> R) -> R {
        enter(&self.inner, |g| f(&mut g.ev, self.v))
    }

    /// The arcs of this struct, in CUE's order, whose label `keep_label` admits (internal arcs
    /// never) and whose constraint `keep_constraint` admits. An arc is evaluated only after its
    /// label is admitted, so unselected hidden fields (catalog `_test*` data) cost nothing. The
    /// one arc walk behind [`Value::fields`] and [`Value::fields_where`].
    pub(crate) fn pick_arcs(
        &self,
        keep_label: impl Fn(&Label) -> bool,
        keep_constraint: impl Fn(Option<ast::FieldConstraint>) -> bool,
    ) -> Vec<(Label, Option<ast::FieldConstraint>, VId)> {
        self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            let arcs: Vec<(Label, VId)> = ev.vs[v as usize]
                .arcs
                .iter()
                .map(|(l, a)| (l.clone(), *a))
                .collect();
            let mut out = Vec::new();
            for (l, a) in arcs {
                if matches!(l.kind, LabelKind::Internal) || !keep_label(&l) {
                    continue;
                }
                ev.eval(a);
                let c = ev.vs[a as usize].constraint;
                if keep_constraint(c) {
                    out.push((l, c, a));
                }
            }
            out
        })
    }

    fn wrap(&self, v: VId) -> Value {
        Value {
            inner: self.inner.clone(),
            v,
        }
    }

    /// Looks up a dotted path (`a.b`, `#Def.x`, `_hidden`, `"quoted-label".x`).
    pub fn lookup(&self, path: &str) -> Option<Value> {
        let mut cur = self.clone();
        for seg in parse_path(path) {
            cur = cur.lookup_label(&seg)?;
        }
        Some(cur)
    }

    /// Looks up one label (an identifier-like label is classified by its prefix).
    pub fn lookup_label(&self, name: &str) -> Option<Value> {
        let r = self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            let labels = [Label::ident(name), Label::string(name)];
            let mut found = None;
            for l in labels {
                if let Some(&a) = ev.vs[v as usize].arcs.get(&l) {
                    found = Some(a);
                    break;
                }
            }
            if found.is_none() && ev.vs[v as usize].is_list {
                if let Ok(i) = name.parse::<usize>() {
                    found = ev.vs[v as usize].arcs.get(&Label::index(i)).copied();
                }
            }
            if let Some(a) = found {
                ev.eval(a);
            }
            found
        })?;
        Some(self.wrap(r))
    }

    /// The fields of a struct: regular ones, plus optional ones if asked, plus definitions and
    /// hidden fields if asked. Labels are returned as written.
    pub fn fields(&self, optional: bool, defs_and_hidden: bool) -> Vec<(String, Value)> {
        let arcs = self.pick_arcs(
            |l| defs_and_hidden || l.is_regular() || l.kind == LabelKind::Index,
            |c| optional || c == Some(ast::FieldConstraint::Regular),
        );
        let ids: Vec<(String, VId)> = arcs
            .into_iter()
            .map(|(l, _, a)| (l.name.to_string(), a))
            .collect();
        ids.into_iter().map(|(n, a)| (n, self.wrap(a))).collect()
    }

    /// The allowed kinds ([`adt::K_INT`] etc.); 0 for bottom.
    pub fn kind(&self) -> Kinds {
        self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            let x = &ev.vs[v as usize];
            if x.err.is_some() {
                return 0;
            }
            if let Some(s) = &x.scalar {
                return s.kind();
            }
            if x.is_struct {
                return adt::K_STRUCT;
            }
            if x.is_list {
                return adt::K_LIST;
            }
            x.kinds
        })
    }

    /// The default of a disjunction (the value itself otherwise).
    pub fn default(&self) -> Value {
        let d = self.with(|ev, v| {
            ev.eval(v);
            ev.deref(v)
        });
        self.wrap(d)
    }

    /// `true` if the value is an error.
    pub fn is_bottom(&self) -> bool {
        self.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            ev.vs[v as usize].err.is_some()
        })
    }

    /// Whether a closed struct allows a regular field `label`.
    pub fn allows(&self, label: &str) -> bool {
        let probe = Value {
            inner: self.inner.clone(),
            v: self.with(|ev, _| {
                ev.anon(
                    None,
                    Expr::Struct(Arc::new(adt::StructLit {
                        fields: vec![adt::FieldDecl {
                            label: adt::LabelExpr::Fixed(Label::string(label)),
                            constraint: ast::FieldConstraint::Optional,
                            value: Expr::Lit(adt::Val::Top, source::Span::default()),
                            span: source::Span::default(),
                        }],
                        ..Default::default()
                    })),
                )
            }),
        };
        let u = self.unify(&probe);
        let lab = Label::string(label);
        u.with(|ev, v| {
            ev.eval(v);
            let v = ev.deref(v);
            match ev.vs[v as usize].arcs.get(&lab).copied() {
                Some(a) => {
                    ev.eval(a);
                    ev.vs[a as usize].err.is_none()
                }
                None => false,
            }
        })
    }

    /// Unifies two values. A value of another runtime is taken by its concrete data (an error
    /// value if it is not concrete).
    pub fn unify(&self, other: &Value) -> Value {
        let e = self.unify_expr(other);
        let u = self.with(|ev, _| ev.anon(None, e));
        self.wrap(u)
    }

    /// The expression `self & other` (`other` as data if it belongs to another runtime).
    fn unify_expr(&self, other: &Value) -> Expr {
        let span = source::Span::default();
        let a = self.v;
        let bexpr = if Arc::ptr_eq(&self.inner, &other.inner) {
            Expr::Vertex(other.v, span)
        } else {
            match other.to_data() {
                Ok(d) => eval::data_to_expr(&d, span),
                Err(d) => Expr::Bad(adt::Bottom::new(
                    adt::ErrorCode::Incomplete,
                    format!(
                        "value of another runtime is not concrete: {}",
                        d.first().map(|x| x.message.as_str()).unwrap_or("")
                    ),
                    span,
                )),
            }
        };
        Expr::Unify(Arc::new([Expr::Vertex(a, span), bexpr]), span)
    }

    fn collect(
        &self,
        ev: &mut Ev,
        v: VId,
        concrete: bool,
        keep: bool,
    ) -> (Option<builtins::Val>, Vec<Diagnostic>) {
        let mut errs = Vec::new();
        // Validation reads only the errors: the data is built only if it is kept.
        let data = if keep {
            ev.to_data(v, &mut errs, 0)
        } else {
            ev.check_data(v, &mut errs, 0);
            None
        };
        ev.collect_fatal_hidden(v, &mut errs, 0, false);
        let truncated = errs.len() >= eval::MAX_ERRORS;
        let mut diags = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (at, b) in errs {
            if !concrete && !b.code.is_fatal() {
                continue;
            }
            let path = ev.path_text(at);
            for d in Diagnostic::from_error_in(&path, &b, &ev.limits) {
                if seen.insert((d.path.clone(), d.message.clone())) {
                    diags.push(d);
                }
            }
        }
        if truncated {
            diags.push(Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message: format!(
                    "too many errors: only the first {} looked at",
                    eval::MAX_ERRORS
                ),
                span: None,
                related: Vec::new(),
            });
        }
        (data, diags)
    }

    /// Validates the value: every error, and with `concrete` every non-concrete regular field,
    /// is reported with its path.
    pub fn validate(&self, concrete: bool) -> Result<(), Vec<Diagnostic>> {
        let (_, diags) = enter(&self.inner, |g| {
            self.collect(&mut g.ev, self.v, concrete, false)
        });
        if diags.is_empty() {
            Ok(())
        } else {
            Err(diags)
        }
    }

    /// The concrete data of the value (regular fields, defaults taken).
    pub fn to_data(&self) -> Result<builtins::Val, Vec<Diagnostic>> {
        enter(&self.inner, |g| self.data_in(&mut g.ev))
    }

    /// [`Value::to_data`] with the evaluator at hand.
    fn data_in(&self, ev: &mut Ev) -> Result<builtins::Val, Vec<Diagnostic>> {
        let (d, diags) = self.collect(ev, self.v, true, true);
        match d {
            Some(d) if diags.is_empty() => Ok(d),
            _ => Err(if diags.is_empty() {
                vec![Diagnostic::load("value is not concrete")]
            } else {
                diags
            }),
        }
    }

    /// JSON export.
    pub fn to_json(&self) -> Result<String, Vec<Diagnostic>> {
        let d = self.to_data()?;
        let max = lock(&self.inner).ev.config.max_output_bytes;
        export::to_json(&d, max).ok_or_else(|| {
            vec![Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message: format!("output exceeds {max} bytes"),
                span: None,
                related: Vec::new(),
            }]
        })
    }

    /// The value as CUE text, concrete or not (what `cue eval` prints): regular fields,
    /// required and optional fields and definitions, disjunctions with their defaults, kinds and
    /// bounds; errors inline as `_|_ // message`. The root of a package prints as a file's
    /// declarations. Never fails: use [`Value::validate`] to learn about errors. Text past
    /// `Config::max_output_bytes` is cut (no further field or element is printed), and a last
    /// comment line says so.
    pub fn to_cue(&self) -> String {
        enter(&self.inner, |g| self.to_cue_in(g))
    }

    fn to_cue_in(&self, g: &mut Inner) -> String {
        let root =
            g.ev.vs
                .get(self.v as usize)
                .is_some_and(|x| x.parent.is_none());
        let mut s = if root {
            g.ev.print_cue_file(self.v)
        } else {
            g.ev.print_cue(self.v)
        };
        if !s.ends_with('\n') {
            s.push('\n');
        }
        let max = g.ev.config.max_output_bytes;
        if s.len() > max {
            s.push_str(&format!("// output cut: longer than {max} bytes\n"));
        }
        s
    }

    /// YAML export.
    pub fn to_yaml(&self) -> Result<String, Vec<Diagnostic>> {
        let d = self.to_data()?;
        let max = lock(&self.inner).ev.config.max_output_bytes;
        let y = export::to_yaml(&d).map_err(|message| {
            vec![Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message,
                span: None,
                related: Vec::new(),
            }]
        })?;
        if y.len() > max {
            return Err(vec![Diagnostic {
                code: DiagCode::Limit,
                path: String::new(),
                message: format!("output exceeds {max} bytes"),
                span: None,
                related: Vec::new(),
            }]);
        }
        Ok(y)
    }

    /// The path of the value from its package root.
    pub fn path(&self) -> String {
        self.with(|ev, v| ev.path_text(v))
    }
}

/// The root vertex of a package: one conjunct per file's struct literal.
fn package_root(ev: &mut Ev, lits: &[Arc<adt::StructLit>]) -> VId {
    let root = ev.new_vertex(None, Label::internal("root"));
    for l in lits {
        ev.add_conj(
            root,
            Conj {
                env: None,
                expr: Expr::Struct(l.clone()),
                close: None,
                embed: None,
                outer: None,
            },
        );
    }
    root
}

/// The load target of command-line style arguments: one directory (`.` or `./dir`) names a
/// package; anything else is a list of files.
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
        [one] if !one.ends_with(".cue") => module::Target::Dir(clean(one)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send + Sync>() {}

    #[test]
    fn values_are_send() {
        assert_send::<Value>();
        assert_send::<Runtime>();
    }

    fn build(src: &str) -> Value {
        Runtime::default()
            .build_files(&[("in.cue".into(), src.into())])
            .unwrap()
    }

    #[test]
    fn api_lookup_unify_allows() {
        let v = build("#D: {a: int, b?: string}\nx: #D & {a: 1}\n_h: 3\n");
        let d = v.lookup("#D").unwrap();
        assert!(d.allows("a"));
        assert!(!d.allows("zzz"));
        assert_eq!(v.lookup("x.a").unwrap().to_json().unwrap(), "1\n");
        assert_eq!(v.lookup("_h").unwrap().to_json().unwrap(), "3\n");
        let y = d.unify(&build("a: 2"));
        assert!(y.validate(true).is_ok());
        assert_eq!(y.lookup("a").unwrap().to_json().unwrap(), "2\n");
        let z = d.unify(&build("a: 2, c: 3"));
        assert!(z.validate(false).is_err());
        assert_eq!(d.fields(true, false).len(), 2);
        assert_eq!(d.fields(false, false).len(), 1);
    }

    #[test]
    fn defaults_and_errors() {
        let v = build("a: *1 | 2\nb: a & 2\nc: int\n");
        assert_eq!(v.lookup("a").unwrap().to_json().unwrap(), "1\n");
        assert_eq!(v.lookup("b").unwrap().to_json().unwrap(), "2\n");
        let errs = v.validate(true).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "c");
        assert_eq!(errs[0].code, DiagCode::Incomplete);
    }

    /// Regression (eval fuzz target, 2026-12-03): lists that hold each other grow without end;
    /// evaluation stops at a limit, and reporting stops after `MAX_ERRORS` errors instead of
    /// printing (and computing the path of) every one of the failing fields.
    #[test]
    fn runaway_values_report_a_bounded_number_of_errors() {
        let rt = Runtime::new(Config {
            max_depth: 300,
            ..Config::default()
        });
        let src = "f: [g, g, g, g, g, g, g]\ng: [h, h, h, h, h, h, h]\n\
                   h: [i, i, i, i, l, i, i]\ni: [j, g, g, g, g, j, j]\nj: 1\n";
        let v = rt.build_files(&[("in.cue".into(), src.into())]).unwrap();
        let errs = v.validate(true).unwrap_err();
        assert!(errs.len() <= eval::MAX_ERRORS + 1, "{} errors", errs.len());
        assert!(errs.iter().any(|d| d.code == DiagCode::Limit), "{errs:?}");
    }

    /// Regression (eval fuzz target, 2026-12-04, an OOM under ASan): printing the runaway lists
    /// above as CUE walked the tree of seven elements per level to the print depth (7^200
    /// visits; 22 GB and minutes without ASan). The text stops at `max_output_bytes`.
    #[test]
    fn printing_a_runaway_value_stops_at_the_output_limit() {
        let max = 64 << 10;
        let rt = Runtime::new(Config {
            max_output_bytes: max,
            ..Config::default()
        });
        let src = "f: [g, g, g, g, g, g, g]\ng: [h, h, h, h, h, h, h]\n\
                   h: [i, i, i, i, l, i, i]\ni: [j, g, g, g, g, j, j]\nj: 1\n";
        let v = rt.build_files(&[("in.cue".into(), src.into())]).unwrap();
        let text = v.to_cue();
        // What passes the limit: the brackets closing the levels being printed, one indented
        // line each.
        let closing = eval::print::MAX_DEPTH * (2 * eval::print::MAX_DEPTH + 8);
        assert!(text.len() < max + closing, "{} bytes", text.len());
        assert!(
            text.ends_with(&format!("// output cut: longer than {max} bytes\n")),
            "{}",
            &text[text.len().saturating_sub(200)..]
        );
        assert!(
            text.starts_with("f: [\n"),
            "{}",
            &text[..200.min(text.len())]
        );
    }

    /// A package whose `#T` computes an output from `in` with lets, comprehensions, patterns
    /// (a cached label filter), a call list and a default decided by the input.
    const PAIRS: &str = r#"
#T: {
	in: items: [...{name: string, v: int}]
	let n = len(in.items)
	out: {
		count: n
		names: [for i in in.items {i.name}]
		m: [string]: int
		m: {for i in in.items {(i.name): i.v}}
		ok: and([true, for i in in.items {i.v >= 0}])
		kind: *"small" | "big"
		if n > 2 {kind: "big"}
	}
}
data: {items: [{name: "a", v: 1}]}
"#;

    const INPUTS: &[&str] = &[
        r#"[{name: "a", v: 1}]"#,
        r#"[{name: "x", v: 2}, {name: "y", v: 3}, {name: "z", v: 0}]"#,
        r#"[]"#,
        r#"[{name: "q", v: 7}, {name: "r", v: 8}]"#,
    ];

    fn vertices(v: &Value) -> usize {
        lock(&v.inner).ev.vs.len()
    }

    fn stats(v: &Value) -> eval::Stats {
        lock(&v.inner).ev.stats.clone()
    }

    #[test]
    fn export_expr_drops_what_it_built_and_keeps_what_it_changed() {
        let rt = Runtime::default();
        let pkg = rt.build_files(&[("in.cue".into(), PAIRS.into())]).unwrap();
        pkg.validate(false).unwrap();
        // The first call reaches `#T`'s arcs for the first time and evaluates them in place:
        // that changes vertices built before, so all of it is kept.
        let before = vertices(&pkg);
        let first = rt.export_expr(&pkg, "(#T & {in: data}).out").unwrap();
        assert_eq!(
            first,
            serde_json::json!({"count": 1, "names": ["a"], "m": {"a": 1}, "ok": true, "kind": "small"})
        );
        assert!(vertices(&pkg) > before);
        assert_eq!(stats(&pkg).kept, 1);
        // Later calls change nothing older: each leaves the evaluator as it found it.
        for (i, items) in INPUTS.iter().enumerate() {
            let before = vertices(&pkg);
            let src = format!("(#T & {{in: items: {items}}}).out");
            rt.export_expr(&pkg, &src).unwrap();
            assert_eq!(vertices(&pkg), before, "call {i}");
            assert_eq!(stats(&pkg).rolled_back, i as u64 + 1);
        }
    }

    #[test]
    fn export_expr_gives_what_compiling_and_exporting_gives() {
        // The same sequence of outputs, errors included, through export_expr (which reuses the
        // ids and cache slots it frees) and through compile_expr + to_json_value (which keep
        // everything) in a runtime of its own, then the same package data afterwards.
        let a = Runtime::default();
        let pa = a.build_files(&[("in.cue".into(), PAIRS.into())]).unwrap();
        let b = Runtime::default();
        let pb = b.build_files(&[("in.cue".into(), PAIRS.into())]).unwrap();
        let mut srcs: Vec<String> = Vec::new();
        for _ in 0..2 {
            for items in INPUTS {
                srcs.push(format!("(#T & {{in: items: {items}}}).out"));
            }
            srcs.push("(#T & {in: items: [{name: 1}]}).out".into());
            srcs.push("(#T & {in: items: [{name: \"n\"}]}).out".into());
            srcs.push("#T.out".into());
        }
        for src in &srcs {
            let x = a.export_expr(&pa, src).map_err(|d| a.render(&d));
            let y = b
                .compile_expr(&pb, src)
                .and_then(|v| v.to_json_value())
                .map_err(|d| b.render(&d));
            assert_eq!(x.is_ok(), y.is_ok(), "{src}: {x:?} vs {y:?}");
            if let (Ok(x), Ok(y)) = (&x, &y) {
                assert_eq!(x, y, "{src}");
            }
        }
        assert!(stats(&pa).rolled_back >= 10, "{:?}", stats(&pa));
        assert_eq!(pa.to_json().unwrap(), pb.to_json().unwrap());
        assert_eq!(pa.to_cue(), pb.to_cue());
    }

    /// File-level lets, call lists in one, and a pattern inside a comprehension body are
    /// first reached inside a throw-away evaluation (validation cannot evaluate them: the input
    /// is missing), from environments built before it: their cache entries point at vertices
    /// the rollback frees, and must go with them, or the next evaluation would find a vertex
    /// id that now names something else.
    const FIRST_REACH: &str = r#"
let L = {k: 10}
let M = {k: 100, all: and([true, k > 1])}
let A = and([{p: 1}, {q: M.k}])
#T: {
	in: a: int
	out: {
		v: in.a + L.k
		if in.a > 0 {
			m: [string]: {from: "pattern"}
			m: {x: n: in.a, y: n: M.k}
			ok: M.all
			both: A
		}
	}
}
"#;

    #[test]
    fn export_expr_drops_cache_entries_of_older_scopes() {
        let a = Runtime::default();
        let pa = a
            .build_files(&[("in.cue".into(), FIRST_REACH.into())])
            .unwrap();
        pa.validate(false).unwrap();
        let b = Runtime::default();
        let pb = b
            .build_files(&[("in.cue".into(), FIRST_REACH.into())])
            .unwrap();
        pb.validate(false).unwrap();
        for n in [1, 2, -3, 4, 5] {
            let src = format!("(#T & {{in: a: {n}}}).out");
            let x = a.export_expr(&pa, &src).unwrap();
            let y = b.compile_expr(&pb, &src).unwrap().to_json_value().unwrap();
            assert_eq!(x, y, "{src}");
            // Every call builds new vertices from the ids the previous one freed.
            let z = a.export_expr(&pa, "[{p: 1}, {q: [2, 3]}, {r: 4}]").unwrap();
            assert_eq!(z, serde_json::json!([{"p": 1}, {"q": [2, 3]}, {"r": 4}]));
        }
        assert!(stats(&pa).rolled_back >= 8, "{:?}", stats(&pa));
    }

    #[test]
    fn check_unify_gives_the_verdict_of_unify_and_validate_and_keeps_nothing() {
        let src = "#R: {kind: \"R\", spec: {n: int & >0, m?: string}}\na: #R & {spec: n: 1}\nb: {kind: \"R\", spec: n: 1}\nc: {spec: n: -1}\nd: {spec: q: 1}\n";
        let pkg = build(src);
        pkg.validate(false).unwrap();
        let at = |p: &str| pkg.lookup(p).unwrap();
        let pairs = [("a", "b"), ("a", "c"), ("a", "d"), ("#R", "b"), ("#R", "d")];
        let verdicts = |pkg: &Value| -> Vec<Result<(), Vec<Diagnostic>>> {
            let mut out = Vec::new();
            for (x, y) in pairs {
                for concrete in [false, true] {
                    let (a, b) = (pkg.lookup(x).unwrap(), pkg.lookup(y).unwrap());
                    let before = vertices(pkg);
                    out.push(a.check_unify(&b, concrete));
                    // Everything the check reads was evaluated by the validation above.
                    assert_eq!(vertices(pkg), before, "{x} & {y}");
                }
            }
            out
        };
        let quick = verdicts(&pkg);
        let mut full = Vec::new();
        for (x, y) in pairs {
            for concrete in [false, true] {
                full.push(at(x).unify(&at(y)).validate(concrete));
            }
        }
        assert_eq!(quick, full);
        assert_eq!(stats(&pkg).kept, 0);
        assert!(at("a").check_unify(&at("d"), false).is_err());
        assert!(at("a").check_unify(&at("b"), true).is_ok());
        assert!(stats(&pkg).rolled_back > 0, "{:?}", stats(&pkg));
    }
}
