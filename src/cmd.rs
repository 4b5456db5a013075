//! The subcommands' entry points: argument types and the code that runs them, over the library.
//! `main.rs` only parses and dispatches.

pub mod module;
pub mod render;
