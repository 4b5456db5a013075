//! Diagnostics: the public form of evaluation errors (docs/design/conventions.md §6.2). A [`Diagnostic`] has a
//! stable [`DiagCode`], a value path, a message, a primary span and related spans (both sides of
//! a conflict; for `field not allowed`, where the closed structs refusing the field are written,
//! see `eval::closedness`). Line and column are computed only when rendering, from a
//! [`SourceMap`].
//!
//! A [`DiagCode::Limit`] diagnostic is classified by the identity of the error the evaluator
//! raised for the limit (it records each with its [`Limit`] class where it raises it), never by
//! its message text.
//!
//! Rendering follows `cue`'s format: `path: message:` followed by one indented
//! `file:line:col` line per position.
//!
//! A [`DiagnosticReport`] is a diagnostic with its positions resolved ([`Position`], as
//! rendering prints them), the form a JSON API returns ([`crate::Runtime::reports`]).

use crate::adt::{Bottom, ErrorCode};
use crate::source::Span;
use std::sync::Arc;

/// Which evaluation limit stopped an evaluation ([`crate::Runtime::limit_exceeded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Limit {
    /// The runtime's step budget (`Config::max_steps`) is spent.
    Steps,
    /// The runtime's deadline (`Config::max_wall_time` after it was created) has passed.
    Deadline,
    /// Evaluation was cancelled through a [`crate::CancelHandle`].
    Cancelled,
    /// Nesting depth (`Config::max_depth`) or the stack budget (`Config::max_stack_bytes`).
    Depth,
    /// The runtime's memory budget (`Config::max_memory_bytes`) is spent
    /// ([`crate::Runtime::memory_exceeded`] says by how much and where).
    Memory,
}

impl Limit {
    /// The class as text (`steps`, `deadline`, `cancelled`, `depth`, `memory`).
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Steps => "steps",
            Limit::Deadline => "deadline",
            Limit::Cancelled => "cancelled",
            Limit::Depth => "depth",
            Limit::Memory => "memory",
        }
    }
}

/// The memory budget of a runtime was spent: the budget, the figure the evaluation's accounting
/// reached, and the path of the value being evaluated when it did (empty: the root). Plain data;
/// [`crate::Error::Memory`] carries it where a caller needs an error.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MemoryExceeded {
    /// `Config::max_memory_bytes`.
    pub budget: u64,
    /// The bytes accounted when the evaluation stopped (above the budget).
    pub reached: u64,
    /// The value being evaluated (`a.b[3]`; empty for the root).
    pub path: String,
}

impl std::fmt::Display for MemoryExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "evaluation memory budget ({}) exceeded: {} allocated",
            mib(self.budget),
            mib(self.reached)
        )?;
        if !self.path.is_empty() {
            write!(f, " while evaluating {}", self.path)?;
        }
        Ok(())
    }
}

/// Bytes as MiB with one decimal (`256.0 MiB`).
pub(crate) fn mib(bytes: u64) -> String {
    // Exact enough for a message: a budget is far below 2^53.
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// Stable diagnostic classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiagCode {
    /// A syntax error.
    Syntax,
    /// Files could not be loaded (missing file, mixed packages, unresolved import).
    Load,
    /// Conflicting values or another fatal evaluation error.
    Conflict,
    /// A value is not concrete.
    Incomplete,
    /// A required field is missing.
    RequiredMissing,
    /// A field is not allowed by a closed struct.
    NotAllowed,
    /// A structural cycle.
    StructuralCycle,
    /// A reference cycle.
    Cycle,
    /// An error raised by the user (`_|_`, `error()`).
    User,
    /// A configured limit was exceeded.
    Limit,
}

impl DiagCode {
    /// The code as text (`conflict`, `incomplete`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DiagCode::Syntax => "syntax",
            DiagCode::Load => "load",
            DiagCode::Conflict => "conflict",
            DiagCode::Incomplete => "incomplete",
            DiagCode::RequiredMissing => "required field missing",
            DiagCode::NotAllowed => "not allowed",
            DiagCode::StructuralCycle => "structural cycle",
            DiagCode::Cycle => "cycle",
            DiagCode::User => "user",
            DiagCode::Limit => "limit",
        }
    }
}

/// One diagnostic.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// The class.
    pub code: DiagCode,
    /// The value path (`a.b[0]`), empty for the root or for load errors.
    pub path: String,
    /// The message.
    pub message: String,
    /// The primary position.
    pub span: Option<Span>,
    /// Other positions involved.
    pub related: Vec<Span>,
}

impl Diagnostic {
    /// A diagnostic from an error value at `path`.
    pub fn from_bottom(path: String, b: &Bottom) -> Diagnostic {
        Diagnostic::from_bottom_in(path, b, &[])
    }

    /// A diagnostic from an error value at `path`; an error that is one of the evaluator's
    /// recorded `limits` is a [`DiagCode::Limit`].
    pub(crate) fn from_bottom_in(
        path: String,
        b: &Bottom,
        limits: &[(Arc<Bottom>, Limit)],
    ) -> Diagnostic {
        // A limit error keeps its code when copied; the identity check also covers errors a
        // limit error was wrapped into under its own pointer.
        let is_limit = b.code == ErrorCode::Limit
            || limits.iter().any(|(l, _)| std::ptr::eq(Arc::as_ptr(l), b));
        // The class is the code the evaluator set where it raised the error.
        let code = if is_limit {
            DiagCode::Limit
        } else {
            match b.code {
                ErrorCode::Eval | ErrorCode::Conflict => DiagCode::Conflict,
                ErrorCode::NotAllowed => DiagCode::NotAllowed,
                ErrorCode::RequiredMissing => DiagCode::RequiredMissing,
                ErrorCode::User => DiagCode::User,
                ErrorCode::StructuralCycle => DiagCode::StructuralCycle,
                ErrorCode::Incomplete | ErrorCode::Undefined => DiagCode::Incomplete,
                ErrorCode::Cycle => DiagCode::Cycle,
                ErrorCode::Limit => DiagCode::Limit,
            }
        };
        let span = if b.span == Span::default() {
            None
        } else {
            Some(b.span)
        };
        Diagnostic {
            code,
            path,
            message: b.msg.clone(),
            span,
            related: b.related.clone(),
        }
    }

    /// The diagnostics of an error value at `path`: one, or for an empty disjunction a header
    /// (`N errors in empty disjunction`) followed by each disjunct's error at its own path.
    pub fn from_error(path: &str, b: &Bottom) -> Vec<Diagnostic> {
        Diagnostic::from_error_in(path, b, &[])
    }

    /// [`Diagnostic::from_error`], classifying the evaluator's recorded `limits`.
    pub(crate) fn from_error_in(
        path: &str,
        b: &Bottom,
        limits: &[(Arc<Bottom>, Limit)],
    ) -> Vec<Diagnostic> {
        if b.sub.is_empty() {
            return vec![Diagnostic::from_bottom_in(path.to_string(), b, limits)];
        }
        let mut out = Vec::new();
        for (suffix, e) in &b.sub {
            let p = format!("{path}{suffix}");
            let p = p.strip_prefix('.').map(str::to_string).unwrap_or(p);
            out.extend(Diagnostic::from_error_in(&p, e, limits));
        }
        if b.sub.len() > 1 {
            let mut head = Diagnostic::from_bottom_in(path.to_string(), b, limits);
            head.code = out.first().map(|d| d.code).unwrap_or(head.code);
            out.insert(0, head);
        }
        out
    }

    /// The value path as a [`crate::Path`] (`None` if the text does not parse, which the
    /// evaluator's paths always do).
    pub fn value_path(&self) -> Option<crate::Path> {
        crate::Path::parse(&self.path).ok()
    }

    /// A load error.
    pub fn load(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code: DiagCode::Load,
            path: String::new(),
            message: message.into(),
            span: None,
            related: Vec::new(),
        }
    }
}

pub use crate::source::SourceMap;

/// Renders diagnostics the way `cue` does.
pub fn render(diags: &[Diagnostic], map: &SourceMap) -> String {
    let mut out = String::new();
    for d in diags {
        if d.path.is_empty() {
            out.push_str(&format!("{}:\n", d.message));
        } else {
            out.push_str(&format!("{}: {}:\n", d.path, d.message));
        }
        let mut spans: Vec<Span> = d.span.into_iter().collect();
        for r in &d.related {
            if !spans.contains(r) && *r != Span::default() {
                spans.push(*r);
            }
        }
        for s in spans {
            if let Some((f, l, c)) = map.position(s) {
                out.push_str(&format!("    {f}:{l}:{c}\n"));
            }
        }
    }
    out
}

/// A file position as `cue` prints it: `file:line:col`, 1-based, byte columns.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    /// The file name as given to the runtime.
    pub file: String,
    /// The line.
    pub line: usize,
    /// The byte column.
    pub column: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// A [`Diagnostic`] with its positions resolved, ready to serialise as JSON.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiagnosticReport {
    /// The class ([`DiagCode::as_str`]).
    pub code: String,
    /// The value path in [`Path`] syntax (indices as `[N]`); empty for the root or load errors.
    pub path: String,
    /// The message.
    pub message: String,
    /// The primary position, if known.
    pub primary: Option<Position>,
    /// The other positions involved (both sides of a conflict).
    pub related: Vec<Position>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let mut m = SourceMap::default();
        let f = m.add("a.cue", "a: 1\nb: 2\n");
        assert_eq!(m.position(Span::new(f, 5, 6)), Some(("a.cue", 2, 1)));
        assert_eq!(m.position(Span::new(f, 3, 4)), Some(("a.cue", 1, 4)));
    }
}
