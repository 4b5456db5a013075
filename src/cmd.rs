//! The composition root: each subcommand's arguments and the code that wires the library's parts
//! for it. `main.rs` only parses and dispatches; nothing in the library depends on this module.
//!
//! - [`serve`]: the controllers (on the leader) beside the HTTP server (`server::run_with`).
//! - [`dev`]: kube-emu (the only place it is used) plus exactly what `serve` runs, on one machine.
//! - [`render`]: the offline render CLI over the kernel.
//! - [`module`]: `opm-operator module publish|versions|fetch` over the registry client.

pub mod dev;
pub mod module;
pub mod render;
pub mod serve;
