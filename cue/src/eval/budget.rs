//! The evaluation budget (`Config`): steps, nesting depth, wall time, stack, memory and
//! cancellation.
//!
//! Rules:
//! - every expansion and every processed conjunct takes a step (`Ev::step`); the wall clock
//!   and the cancel flag are read every 512 steps;
//! - the step counter and the clock are the budget of the whole runtime, never reset per call;
//!   an API call only clears the previous call's limit error (`Ev::reset_limits`);
//! - once a limit is exceeded, `Budget::limit_err` is set and every further step fails, so
//!   every result from then on is that fatal error; each limit error has the code
//!   `ErrorCode::Limit` (kept by every copy, so diagnostics classify it as a limit wherever it
//!   ends up) and is recorded with its kind ([`crate::diagnostics::Limit`]);
//! - the stack budget counts from the stack position of the outermost evaluation: deeper
//!   recursion is a depth limit error, never an overflow;
//! - memory: every allocation site of the evaluator that grows with the input charges what it
//!   allocates to `Budget::memory` ([`Ev::charge`]; the sites and their charges are in
//!   [`cost`]): vertices, conjuncts, arcs, environments with their bindings and canonical
//!   shapes, comprehension results, strings, bytes and numbers made by operators and
//!   interpolation, lists made by builtins, the data read out, and the source text built into
//!   the runtime (its syntax tree and compiled form, per byte). The figure is what the
//!   runtime allocated, not what it still holds: only a rolled-back throw-away evaluation
//!   (`Ev::rollback`) gives its charges back. Past `Config::max_memory_bytes` the charge sets
//!   the limit error ([`crate::diagnostics::Limit::Memory`], message naming the budget, the figure
//!   and the path of the vertex being expanded, also kept typed as
//!   [`crate::diagnostics::MemoryExceeded`]); loops that allocate per item stop on it at once, the
//!   rest at the next step, which checks the figure too. A charge is one add and one compare.

use super::*;

/// Evaluation limits.
#[derive(Clone, Debug)]
pub struct Config {
    /// Maximum nesting of vertex evaluation.
    pub max_depth: usize,
    /// Maximum number of evaluation steps.
    pub max_steps: u64,
    /// Maximum wall time.
    pub max_wall_time: Duration,
    /// Maximum size of exported output.
    pub max_output_bytes: usize,
    /// Stack the evaluator may use (bytes). The API guarantees this much at every call: it
    /// grows the stack (a `stacker` segment) when the calling thread has less left.
    pub max_stack_bytes: usize,
    /// Memory the runtime's evaluations may allocate, as the evaluator accounts it (bytes; see
    /// the module docs). The default is no practical limit; the operator sets its
    /// `--render-memory-limit` here.
    pub max_memory_bytes: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_depth: 2000,
            max_steps: 20_000_000,
            max_wall_time: Duration::from_secs(8),
            max_output_bytes: 64 << 20,
            max_stack_bytes: 40 << 20,
            max_memory_bytes: u64::MAX,
        }
    }
}

/// What the limits of [`Config`] are measured against, and the errors raised when one is
/// exceeded (see `Ev::step`, `Ev::stack_ok`).
pub struct Budget {
    /// Steps taken so far (the budget of the whole runtime, never reset).
    pub(super) steps: u64,
    /// Nesting of vertex evaluation right now.
    pub(super) depth: usize,
    /// When the evaluator was created: the deadline is `max_wall_time` after it.
    pub(super) start: Instant,
    /// The stack position the stack budget counts from.
    pub(super) stack_base: usize,
    /// Set once a limit is exceeded.
    pub(super) limit_err: Option<Arc<Bottom>>,
    /// Every limit error raised, with its class (diagnostics are classified by identity).
    pub(super) limits: Vec<(Arc<Bottom>, crate::diagnostics::Limit)>,
    /// Set by another thread to stop evaluation (checked with the step limit).
    pub(super) cancel: Arc<AtomicBool>,
    /// Bytes charged so far (the budget of the whole runtime; a rollback gives back what the
    /// rolled-back evaluation charged).
    pub(super) memory: u64,
    /// The first time the memory budget was exceeded: the budget, the figure, the path.
    pub(super) memory_exceeded: Option<crate::diagnostics::MemoryExceeded>,
}

/// What the allocation sites charge ([`Ev::charge`]): the size of what they allocate plus the
/// allocator's and the containers' overhead, rounded up so that the figure is never below what a
/// render makes resident: measured with `valgrind --tool=dhat` (the heap at its peak) and with
/// the process's resident memory (`/usr/bin/time -v`) on the hostile comprehension and on the
/// real OPM modules (docs/install.md "Memory sizing" has the figures).
pub(super) mod cost {
    use super::*;

    /// Allocator overhead per block (glibc: an 8-byte header, sizes rounded up to 16, 32 at
    /// least): the worst case of a small block, not the average.
    const BLOCK: u64 = 32;

    /// What no site charges: the evaluator's maps and caches (closedness, sharing, disjunction
    /// and call caches, hash maps at their load factor) and the kernel's copies around the
    /// evaluation. Every charge is taken half again: measured through `opm-operator render`
    /// (release), the 20-component OPM module grows the process by 96 MB for 74 MB charged
    /// without it; web_app, podinfo and harness_mini by 23–26 MB for 23–25 MB.
    pub(in crate::eval) fn with_unseen(bytes: u64) -> u64 {
        bytes.saturating_add(bytes >> 1)
    }

    /// A growable vector holds up to twice its length (capacity doubles), and three times while
    /// it moves: an element pushed is charged twice its size.
    const GROWTH: u64 = 2;

    /// A vertex in the arena, with its first conjunct and its boxed maps as most have them.
    pub(in crate::eval) const VERTEX: u64 =
        (std::mem::size_of::<Vertex>() + std::mem::size_of::<Conj>()) as u64 + 2 * BLOCK;
    /// A further conjunct of a vertex.
    pub(in crate::eval) const CONJ: u64 = std::mem::size_of::<Conj>() as u64;
    /// An arc in a vertex's arc map (label, id and the map's index slot).
    pub(in crate::eval) const ARC: u64 = GROWTH * (std::mem::size_of::<Label>() + 16) as u64;
    /// An environment (its `Arc`), and its canonical shape in the shape map.
    pub(in crate::eval) const ENV: u64 = (std::mem::size_of::<Env>()
        + std::mem::size_of::<EnvShape>()
        + 4 * std::mem::size_of::<u64>()) as u64
        + 2 * BLOCK;
    /// One binding of an environment, with its key in the shape and its atom.
    pub(in crate::eval) const BINDING: u64 = (std::mem::size_of::<Binding>()
        + std::mem::size_of::<BindKey>()
        + std::mem::size_of::<num_bigint::BigInt>())
        as u64
        + BLOCK;
    /// A comprehension result waiting to be added (its environment is charged apart).
    pub(in crate::eval) const YIELD: u64 = GROWTH * std::mem::size_of::<Arc<Env>>() as u64;
    /// A number made by an operator (an `Arc` of a big integer or decimal).
    pub(in crate::eval) const NUMBER: u64 =
        std::mem::size_of::<bigdecimal::BigDecimal>() as u64 + BLOCK;
    /// An element of a list of values or of data.
    pub(in crate::eval) const ELEM: u64 = GROWTH * std::mem::size_of::<Expr>() as u64;

    /// What a runtime holds per byte of source text it builds: the syntax tree (shared with
    /// the parse cache for dependency files, charged to every runtime that builds them anyway:
    /// a render cannot know what the cache will keep) and the compiled struct literals. Measured:
    /// 17–28 resident bytes per byte over the OPM core and catalog files.
    const SOURCE_PER_BYTE: u64 = 32;

    /// Source text of `len` bytes built into a runtime ([`SOURCE_PER_BYTE`]).
    pub(in crate::eval) fn source(len: usize) -> u64 {
        (len as u64).saturating_mul(SOURCE_PER_BYTE)
    }

    /// A string or bytes value of `len` bytes.
    pub(in crate::eval) fn text(len: usize) -> u64 {
        len as u64 + BLOCK
    }

    /// Data a builtin returned, as the values it becomes (a literal per element).
    pub(in crate::eval) fn data(d: &BVal) -> u64 {
        match d {
            BVal::String(s) => text(s.len()),
            BVal::Bytes(b) => text(b.len()),
            BVal::Int(_) | BVal::Float(_) => NUMBER,
            BVal::List(xs) => xs.iter().map(|x| ELEM + data(x)).sum(),
            BVal::Struct(fs) => fs
                .iter()
                .map(|(k, x)| ELEM + ARC + text(k.len()) + data(x))
                .sum(),
            BVal::Null | BVal::Bool(_) | BVal::Opaque(_) => 0,
        }
    }
}

impl Ev {
    /// Records the current stack position as the base for the stack budget.
    pub fn mark_stack_base(&mut self) {
        let marker = 0u8;
        self.budget.stack_base = std::ptr::addr_of!(marker) as usize;
    }

    /// `false` (and the limit error set) once the stack budget is used up.
    #[inline]
    pub fn stack_ok(&mut self) -> bool {
        let marker = 0u8;
        let here = std::ptr::addr_of!(marker) as usize;
        if self.budget.stack_base.saturating_sub(here) > self.config.max_stack_bytes {
            return self.stack_spent();
        }
        true
    }

    /// The stack budget is spent: a depth limit error (once). Always `false`.
    #[cold]
    fn stack_spent(&mut self) -> bool {
        if self.budget.limit_err.is_none() {
            self.budget.limit_err = Some(self.limit(
                crate::diagnostics::Limit::Depth,
                "evaluation depth limit exceeded (stack budget)".into(),
                Span::default(),
            ));
        }
        false
    }

    /// Starts an API call: records the stack base and clears the limit error of the previous
    /// call. The step counter and the wall clock are not reset: they are the budget of the whole
    /// runtime, so a spent budget fails the next step again.
    pub fn reset_limits(&mut self) {
        self.mark_stack_base();
        self.budget.limit_err = None;
        self.over_time();
    }

    /// A limit error of class `kind`, recorded in `Budget::limits` (the first 1024).
    pub fn limit(
        &mut self,
        kind: crate::diagnostics::Limit,
        msg: String,
        span: Span,
    ) -> Arc<Bottom> {
        let b = Bottom::new(ErrorCode::Limit, msg, span);
        if self.budget.limits.len() < 1024 {
            self.budget.limits.push((b.clone(), kind));
        }
        b
    }

    /// Every limit error raised, with its class (diagnostics are classified by identity).
    pub(crate) fn limits(&self) -> &[(Arc<Bottom>, crate::diagnostics::Limit)] {
        &self.budget.limits
    }

    /// The flag another thread sets to stop the evaluation at its next step.
    pub(crate) fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.budget.cancel.clone()
    }

    /// Steps used so far.
    pub fn steps_used(&self) -> u64 {
        self.budget.steps
    }

    /// Time since the evaluator was created (the deadline is `max_wall_time` after that).
    pub fn elapsed(&self) -> Duration {
        self.budget.start.elapsed()
    }

    /// `true` (and the limit error set) once the deadline has passed or evaluation is cancelled.
    fn over_time(&mut self) -> bool {
        let (kind, msg) = if self.budget.cancel.load(Ordering::Relaxed) {
            (
                crate::diagnostics::Limit::Cancelled,
                "evaluation cancelled".to_string(),
            )
        } else if self.budget.start.elapsed() > self.config.max_wall_time {
            let msg = format!(
                "evaluation time limit ({:?}) exceeded",
                self.config.max_wall_time
            );
            (crate::diagnostics::Limit::Deadline, msg)
        } else {
            return false;
        };
        self.budget.limit_err = Some(self.limit(kind, msg, Span::default()));
        true
    }

    /// Charges `bytes` to the memory budget (module docs): `false` (and the limit error set)
    /// once the figure is past `Config::max_memory_bytes`.
    #[inline]
    pub(super) fn charge(&mut self, bytes: u64) -> bool {
        let bytes = cost::with_unseen(bytes);
        self.budget.memory = self.budget.memory.saturating_add(bytes);
        if self.budget.memory > self.config.max_memory_bytes {
            return self.memory_spent();
        }
        true
    }

    /// The memory budget is spent: a memory limit error naming the budget, the figure and the
    /// vertex being expanded (recorded typed the first time). Always `false`.
    #[cold]
    fn memory_spent(&mut self) -> bool {
        if self.budget.limit_err.is_some() {
            return false;
        }
        // The innermost vertex being expanded that a path names (an anonymous value, such as
        // a list literal passed to a call, has none: its enclosing field is named instead).
        let path = self
            .active
            .expanding
            .iter()
            .rev()
            .find_map(|&v| self.named_path(v))
            .unwrap_or_default();
        let exceeded = crate::diagnostics::MemoryExceeded {
            budget: self.config.max_memory_bytes,
            reached: self.budget.memory,
            path,
        };
        let msg = exceeded.to_string();
        self.budget.memory_exceeded.get_or_insert(exceeded);
        self.budget.limit_err =
            Some(self.limit(crate::diagnostics::Limit::Memory, msg, Span::default()));
        false
    }

    /// The path of `v` from its root, unless the root is an anonymous value or `v` is a root.
    fn named_path(&self, v: VId) -> Option<String> {
        let mut root = v;
        while let Some(p) = self.vx(root).parent() {
            root = p;
        }
        let l = self.vx(root).label();
        if root == v || (l.kind == LabelKind::Internal && &*l.name == "_anon") {
            return None;
        }
        Some(self.path_text(v))
    }

    /// Charges `bytes` of source text built into this runtime: its syntax tree and its compiled
    /// form ([`cost::source`]). `false` once the budget is spent (the next step fails).
    pub(crate) fn charge_source(&mut self, bytes: usize) -> bool {
        self.charge(cost::source(bytes))
    }

    /// Bytes charged to the memory budget so far.
    pub fn memory_used(&self) -> u64 {
        self.budget.memory
    }

    /// The first time the memory budget was exceeded, if it was.
    pub(crate) fn memory_exceeded(&self) -> Option<&crate::diagnostics::MemoryExceeded> {
        self.budget.memory_exceeded.as_ref()
    }

    pub(super) fn step(&mut self) -> bool {
        if self.budget.limit_err.is_some() || !self.stack_ok() {
            return false;
        }
        self.budget.steps += 1;
        if self.budget.memory > self.config.max_memory_bytes {
            return self.memory_spent();
        }
        if self.budget.steps > self.config.max_steps {
            self.budget.limit_err = Some(self.limit(
                crate::diagnostics::Limit::Steps,
                format!("evaluation step limit ({}) exceeded", self.config.max_steps),
                Span::default(),
            ));
            return false;
        }
        if self.budget.steps % 512 == 0 && self.over_time() {
            return false;
        }
        true
    }
}
