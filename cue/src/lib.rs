#![warn(missing_docs)]
//! `cue`: a CUE evaluator written in Rust, targeting the semantics of CUE v0.16–v0.17.
//!
//! Architecture invariants:
//! - No I/O except through [`module::FileSystem`] and [`module::Registry`]; no async, no network
//!   ([`module::DirFs`] is the only file system that touches the disk).
//! - Parsing never fails: it returns a tree plus positioned errors.
//! - Evaluation is synchronous, bounded by `Config` limits, and never panics on any input.
//!
//! The public entry points are [`Runtime`] (module `runtime`: build a package from files, or a
//! module and its imports with [`Runtime::build_module`] over a [`module::FileSystem`] and a
//! [`module::Registry`]; data in with [`Runtime::value_from_json`]; diagnostics out with
//! [`Runtime::render`] and [`Runtime::reports`]) and [`Value`] (module `value`, its whole API:
//! lookup, also by [`Path`], iteration with [`Value::fields_where`], unification, validation,
//! [`Value::fill_path`], and export as text, [`Data`], [`Value::to_json_value`] or
//! [`Value::decode`]). Values are `Send`: they share the evaluator through an `Arc<Mutex<_>>`
//! (module `shared`). Evaluation errors are values, reported as [`Diagnostic`]s; everything else
//! that fails is typed where it arises and converts into the crate's one error type, [`Error`]
//! (module `error`).
//!
//! Budget and stack (docs/design/render.md §2, docs/design/conventions.md §5):
//! - a [`Runtime`] has one budget: `Config::max_steps` steps, `Config::max_memory_bytes` bytes
//!   the evaluator accounts at its allocation sites, and a deadline `Config::max_wall_time`
//!   after [`Runtime::new`], shared by every call on it and its values (never reset per call); a
//!   spent budget makes every further evaluation a [`DiagCode::Limit`] diagnostic, and a spent
//!   memory budget is also kept typed ([`Runtime::memory_exceeded`]: [`MemoryExceeded`], the
//!   budget, the figure reached and the path being evaluated; [`Error::Memory`] carries it);
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
pub mod diagnostics;
mod error;
mod eval;
pub mod export;
pub mod module;
pub mod parser;
pub mod path;
mod runtime;
pub mod scanner;
mod shared;
pub mod source;
mod textmap;
pub mod token;
mod value;

pub use adt::{
    Kinds, K_BOOL, K_BYTES, K_FLOAT, K_INT, K_LIST, K_NULL, K_NUMBER, K_STRING, K_STRUCT, K_TOP,
};
pub use data::Val as Data;
pub use diagnostics::{DiagCode, Diagnostic, DiagnosticReport, Limit, MemoryExceeded, Position};
pub use error::{Error, Result};
pub use eval::Config;
pub use path::{Path, PathError, Selector};
pub use runtime::{export_args, target_of_args, CancelHandle, Runtime};
pub use value::{Field, FieldConstraint, FieldFilter, Value};
