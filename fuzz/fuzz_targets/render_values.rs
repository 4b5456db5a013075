//! Fuzz target `render_values`: render the demo fixture module (fixtures/opm) on the generated
//! platform with arbitrary values. Inputs that parse as JSON are the values; other inputs become
//! the string value of `logLevel` (so every input reaches the evaluator). Nothing may panic or
//! hang: every render must end in a result or a typed error within the lowered limits, and a
//! `Values` error must name a `values` path.
//!
//! Modules are served from memory (no registry, no network). Run with cargo-fuzz
//! (`cargo fuzz run render_values fuzz/corpus/demo_values`) or, without it, as a plain libFuzzer
//! binary (`cargo build --release` here, then run `target/release/render_values corpus/…`).
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    common::check(common::values_of(data));
});
