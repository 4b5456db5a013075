//! Hash maps keyed by text the input chooses: identifiers and labels in the compiler's scopes,
//! import paths, hidden-field scopes, regular expressions.
//!
//! Rules:
//! - they hash with foldhash, seeded per process: a module cannot pick colliding keys ahead of
//!   time, and the hash costs a fraction of SipHash's (SipHash was about 10 M instructions of
//!   the 129-component render, `benches/render.rs`);
//! - maps keyed by the evaluator's own ids, spans and pointers, which no input chooses freely,
//!   use the evaluator's fixed multiply-rotate hash instead (`eval/hash.rs`);
//! - nothing may depend on their iteration order, which changes from process to process.

/// A hash map keyed by text the input chooses (see the module rules).
pub(crate) type TextMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The set of [`TextMap`].
pub(crate) type TextSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
