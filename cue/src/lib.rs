//! `cue`: a CUE evaluator written in Rust, targeting the semantics of CUE v0.16–v0.17.
//!
//! Architecture invariants:
//! - No I/O except through [`module::FileSystem`] and [`module::Registry`]; no async, no network.
//! - Parsing never fails: it returns a tree plus positioned errors.
//! - Evaluation is synchronous, bounded by `Config` limits, and never panics on any input.

pub mod ast;
pub mod builtins;
pub mod module;
pub mod parser;
pub mod scanner;
pub mod source;
pub mod token;
