//! The evaluator's hash maps: keyed by ids, spans and pointers, which no outside input chooses
//! freely, so they hash with [`FastHasher`] (multiply-rotate, as rustc's FxHash) rather than
//! SipHash, a measured cost on every field lookup. [`LogMap`] is an insertion-ordered cache that
//! a rollback truncates (see `arena`). Maps keyed by text the input chooses are
//! `crate::textmap::TextMap`s instead.

use super::*;

/// A hash map with a fast non-cryptographic hash (multiply-rotate, as rustc's FxHash) for the
/// evaluator's internal keys (ids, spans, pointers), which no outside input chooses freely.
pub(super) type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// The arcs of a vertex: insertion-ordered, hashed with [`FastHasher`] (labels are looked up
/// on every field access; SipHash was a measured cost).
pub type ArcMap = IndexMap<Label, VId, std::hash::BuildHasherDefault<FastHasher>>;
/// An append-only cache of the evaluator: in insertion order, so that [`Ev::rollback`] drops
/// exactly the entries made since its [`Mark`] by truncating.
pub(super) type LogMap<K, V> = IndexMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// The hasher of [`FastMap`].
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Whole words are read as words; the tail is shifted in byte by byte (a copy into a
        // buffer was a `memcpy` call per word).
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.write_u64(u64::from_le_bytes(b));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let t = tail
                .iter()
                .rev()
                .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
            self.write_u64(t);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}
