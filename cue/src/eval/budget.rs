//! The evaluation budget (`Config`): steps, nesting depth, wall time, stack and cancellation.
//!
//! Rules:
//! - every expansion and every processed conjunct takes a step (`Ev::step`); the wall clock
//!   and the cancel flag are read every 512 steps;
//! - the step counter and the clock are the budget of the whole runtime, never reset per call;
//!   an API call only clears the previous call's limit error (`Ev::reset_limits`);
//! - once a limit is exceeded, `Budget::limit_err` is set and every further step fails, so
//!   every result from then on is that fatal error; each limit error is recorded with its
//!   class ([`crate::errors::Limit`]), by which diagnostics are classified;
//! - the stack budget counts from the stack position of the outermost evaluation: deeper
//!   recursion is a depth limit error, never an overflow.

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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_depth: 2000,
            max_steps: 20_000_000,
            max_wall_time: Duration::from_secs(8),
            max_output_bytes: 64 << 20,
            max_stack_bytes: 40 << 20,
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
    pub(super) limits: Vec<(Arc<Bottom>, crate::errors::Limit)>,
    /// Set by another thread to stop evaluation (checked with the step limit).
    pub(super) cancel: Arc<AtomicBool>,
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
                crate::errors::Limit::Depth,
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
    pub fn limit(&mut self, kind: crate::errors::Limit, msg: String, span: Span) -> Arc<Bottom> {
        let b = Bottom::new(ErrorCode::Eval, msg, span);
        if self.budget.limits.len() < 1024 {
            self.budget.limits.push((b.clone(), kind));
        }
        b
    }

    /// Every limit error raised, with its class (diagnostics are classified by identity).
    pub(crate) fn limits(&self) -> &[(Arc<Bottom>, crate::errors::Limit)] {
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
                crate::errors::Limit::Cancelled,
                "evaluation cancelled".to_string(),
            )
        } else if self.budget.start.elapsed() > self.config.max_wall_time {
            let msg = format!(
                "evaluation time limit ({:?}) exceeded",
                self.config.max_wall_time
            );
            (crate::errors::Limit::Deadline, msg)
        } else {
            return false;
        };
        self.budget.limit_err = Some(self.limit(kind, msg, Span::default()));
        true
    }

    pub(super) fn step(&mut self) -> bool {
        if self.budget.limit_err.is_some() || !self.stack_ok() {
            return false;
        }
        self.budget.steps += 1;
        if self.budget.steps > self.config.max_steps {
            self.budget.limit_err = Some(self.limit(
                crate::errors::Limit::Steps,
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
