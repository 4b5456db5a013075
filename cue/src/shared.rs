//! The evaluator state a [`crate::Runtime`] and its [`crate::Value`]s share, and the one way an
//! API call reaches it.
//!
//! Rules (docs/design/render.md §2, docs/design/conventions.md §5):
//! - the state (evaluator, source map, files) sits behind one mutex; a poisoned lock is taken
//!   over, never a panic;
//! - every API call that parses, compiles or evaluates runs through [`enter`]: first enough
//!   stack (`Config::max_stack_bytes` plus [`STACK_MARGIN`], on a fresh `stacker` segment when
//!   the calling thread has less), then the previous call's limit error is cleared (the step and
//!   time budget stays spent);
//! - a throw-away evaluation ([`throw_away`]) leaves the evaluator as it found it, unless it
//!   changed a vertex built before it (then all of it is kept).

use crate::adt;
use crate::ast;
use crate::eval::Ev;
use crate::source::SourceMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Stack kept beyond `Config::max_stack_bytes` for the code between the evaluator's checks.
const STACK_MARGIN: usize = 2 << 20;

/// The shared state of a runtime and its values.
pub(crate) struct Inner {
    pub(crate) ev: Ev,
    pub(crate) map: SourceMap,
    pub(crate) files: Vec<Arc<ast::File>>,
    pub(crate) lits: Vec<Arc<adt::StructLit>>,
    /// Instances built from loaded builds so far (keys and hidden scopes are numbered by it).
    pub(crate) loaded: usize,
    /// The hidden-field scope of each loaded package by import path (the main package's is 0).
    pub(crate) hidden_scopes: crate::textmap::TextMap<String, usize>,
}

/// The state, even if a thread panicked while holding it.
pub(crate) fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Runs `f` with at least `stack` bytes (plus [`STACK_MARGIN`]) of stack left: on the calling
/// thread when it has them, on a fresh segment otherwise.
pub(crate) fn with_stack<R>(stack: usize, f: impl FnOnce() -> R) -> R {
    let need = stack.saturating_add(STACK_MARGIN);
    stacker::maybe_grow(need, need.saturating_add(STACK_MARGIN), f)
}

/// One API call on the evaluator: enough stack, the stack base recorded, the limit error of the
/// previous call cleared (the step and time budget stays spent).
pub(crate) fn enter<R>(m: &Mutex<Inner>, f: impl FnOnce(&mut Inner) -> R) -> R {
    let mut g = lock(m);
    let stack = g.ev.config.max_stack_bytes;
    with_stack(stack, move || {
        g.ev.reset_limits();
        f(&mut g)
    })
}

/// Runs `f` as a throw-away evaluation (see the module rules): the evaluator is rolled back to
/// where it was before `f` unless `f` changed a vertex built earlier.
pub(crate) fn throw_away<R>(g: &mut Inner, f: impl FnOnce(&mut Inner) -> R) -> R {
    let mark = g.ev.mark();
    let out = f(g);
    g.ev.rollback(mark);
    out
}
