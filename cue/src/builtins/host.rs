//! What a builtin returns when it fails ([`BuiltinError`], plain data the evaluator turns into
//! an error value), and the callbacks into the evaluator that the few builtins evaluating CUE
//! values need ([`Host`]). Builtins compute on concrete data, [`Val`] (module `data`).

use super::Val;

/// How a builtin failed: a value, not a Rust error (CUE errors are values): the evaluator turns
/// it into an error value at the call's position and path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinError {
    /// What went wrong, e.g. `invalid argument 0: expected string, found int`.
    pub message: String,
    /// `true` if the error should be reported as incomplete (not fatal; more data may fix it).
    pub incomplete: bool,
}

impl BuiltinError {
    /// A fatal error with the given message.
    pub fn new(message: impl Into<String>) -> Self {
        BuiltinError {
            message: message.into(),
            incomplete: false,
        }
    }

    /// An incomplete (non-fatal) error with the given message.
    pub fn incomplete(message: impl Into<String>) -> Self {
        BuiltinError {
            message: message.into(),
            incomplete: true,
        }
    }
}

/// Callbacks into the evaluator for the few builtins that need evaluation of CUE values.
pub trait Host {
    /// Evaluates `less` of a comparator (`list.Sort(xs, {x: _, y: _, less: x < y})`) for `x` and `y`.
    fn less(&mut self, comparator: &Val, x: &Val, y: &Val) -> Result<bool, BuiltinError>;
    /// Unifies two values and reports whether the result is not bottom (used by `list.Contains`-like
    /// checks on non-concrete values, `struct.*` helpers, etc.).
    fn unifies(&mut self, a: &Val, b: &Val) -> Result<bool, BuiltinError>;
}
