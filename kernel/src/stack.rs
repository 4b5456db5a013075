//! The project's one big-stack policy for CUE evaluation.
//!
//! Rules:
//! - Every kernel entry that evaluates (a render, a platform build, a catalog acquisition) runs its
//!   work through [`on_eval_stack`] with the stack the evaluator's budget needs:
//!   `Config::max_stack_bytes` plus [`MARGIN`] ([`eval_stack_bytes`]).
//! - A caller's thread that has that much stack left runs the work itself: the operator builds its
//!   tokio runtime with `thread_stack_size(eval_stack_bytes(..))` (`src/server.rs`), so renders in
//!   `spawn_blocking` and the reconcilers' blocking work never start a thread of their own.
//! - A thread with less (the CLI's main thread, a test's, a 2 MiB default thread) gets one scoped
//!   thread of that size for the whole call, so the evaluator's own `stacker` check (`cue`'s safety
//!   net for any caller, see `cue`'s crate docs) never has to map a fresh segment per API call.
//! - A panic in the work is not swallowed: it becomes [`StackError`] (the kernel's callers turn it
//!   into a classified error), never a panic of the caller.

use cue::Config;

/// Stack above the evaluator's budget: the kernel's own frames, serde, the registry client.
pub const MARGIN: usize = 8 << 20;

/// The stack an evaluating call needs under `config`.
pub fn eval_stack_bytes(config: &Config) -> usize {
    config.max_stack_bytes.saturating_add(MARGIN)
}

/// Why the work could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StackError {
    /// The big-stack thread could not be started.
    #[error("cannot start the evaluation thread: {0}")]
    Spawn(String),
    /// The work panicked on its big-stack thread.
    #[error("the evaluation thread panicked")]
    Panicked,
}

/// Runs `f` with at least `stack` bytes of stack: on this thread when it has them left, else on one
/// scoped thread named `name` with a stack of that size.
pub fn on_eval_stack<R: Send>(
    stack: usize,
    name: &str,
    f: impl FnOnce() -> R + Send,
) -> Result<R, StackError> {
    if stacker::remaining_stack().is_some_and(|left| left >= stack) {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .map_err(|_| StackError::Panicked);
    }
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name(name.to_string())
            .stack_size(stack)
            .spawn_scoped(s, f)
            .map_err(|e| StackError::Spawn(e.to_string()))?;
        h.join().map_err(|_| StackError::Panicked)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_probe() -> usize {
        stacker::remaining_stack().unwrap_or(0)
    }

    #[test]
    fn a_small_thread_gets_a_big_one_and_a_big_thread_runs_inline() {
        let need = 32 << 20;
        let small = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let me = std::thread::current().id();
                on_eval_stack(need, "probe", move || {
                    (std::thread::current().id() != me, depth_probe())
                })
            })
            .map(|h| h.join());
        let Ok(Ok(Ok((moved, left)))) = small else {
            unreachable!("the probe thread runs")
        };
        assert!(moved, "a 2 MiB thread hands the work to a new thread");
        assert!(
            left >= need - (1 << 20),
            "the new thread has the stack asked for"
        );

        let big = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                let me = std::thread::current().id();
                on_eval_stack(need, "probe", move || std::thread::current().id() == me)
            })
            .map(|h| h.join());
        assert!(
            matches!(big, Ok(Ok(Ok(true)))),
            "a 64 MiB thread runs the work itself"
        );
    }

    #[test]
    fn a_panic_in_the_work_is_an_error_not_a_panic() {
        for thread_stack in [2 << 20, 64 << 20] {
            let r = std::thread::Builder::new()
                .stack_size(thread_stack)
                .spawn(|| {
                    on_eval_stack(16 << 20, "probe", || -> u8 {
                        std::panic::panic_any("boom")
                    })
                })
                .map(|h| h.join());
            assert!(
                matches!(r, Ok(Ok(Err(StackError::Panicked)))),
                "thread of {thread_stack} bytes"
            );
        }
    }
}
