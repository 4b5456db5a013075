//! Closedness ids and the lists of them conjuncts carry (see `closedness` for what the groups
//! of a vertex do with them).
//!
//! Rules:
//! - ids are handed out in sequence and never reused; each has a class ([`IdFlags`]): weak (a
//!   literal's own group, an embedding mark, a file: it does not close by itself), not
//!   recursive (`close()`: closes its struct, not the structs below it), and the two sides of an
//!   embedding mark;
//! - one `close(x)` call processed into a vertex gets one id however many ways it arrives
//!   (`Ev::close_id`), so its argument is processed for its new outer ids only;
//! - a conjunct's outer ids are a short list, shared rather than copied when nothing is added.

use super::*;

/// The classes of closedness ids, by id: ids are handed out in sequence (`Ev::new_close`), so
/// a flag byte per id replaces four hash sets read for every id of every outer list.
#[derive(Debug, Default)]
pub(super) struct IdFlags {
    pub(super) flags: Vec<u8>,
    /// The flags of `u32::MAX`, the id of a file's top-level literal.
    pub(super) file: u8,
}

impl IdFlags {
    /// Not closing by itself (a literal's own group, an embedding mark, a file).
    pub(super) const WEAK: u8 = 1;
    /// From `close()`: closes its struct, not the structs below it.
    pub(super) const NONREC: u8 = 2;
    /// The embedded side's mark of a literal (a key of `ClosedIds::embed_marks`).
    pub(super) const EMBED_MARK: u8 = 4;
    /// The literal side's mark (a value of `ClosedIds::embed_marks`).
    pub(super) const OWN_MARK: u8 = 8;

    #[inline]
    pub(super) fn has(&self, id: u32, f: u8) -> bool {
        let x = if id == u32::MAX {
            self.file
        } else {
            self.flags.get(id as usize).copied().unwrap_or(0)
        };
        x & f != 0
    }

    pub(super) fn set(&mut self, id: u32, f: u8) {
        if id == u32::MAX {
            self.file |= f;
            return;
        }
        let i = id as usize;
        if self.flags.len() <= i {
            self.flags.resize(i + 1, 0);
        }
        if let Some(x) = self.flags.get_mut(i) {
            *x |= f;
        }
    }
}

/// Closedness ids (see `closedness`): handed out in sequence, never reused.
pub(super) struct ClosedIds {
    /// The id handed out last.
    pub(super) next: u32,
    /// The class of each id (weak, not recursive, embedding mark, literal mark).
    pub(super) flags: IdFlags,
    /// Embedding marks (spec "Embedding", "Closed structs"): for a struct literal with
    /// embeddings, the mark its embedded values' descendants carry, mapped to the mark its own
    /// fields' descendants carry (its group id). Below the literal, a closing group from the
    /// embedded side joins the group of the literal's side, so what the literal itself
    /// declares, at any depth, is not rejected by what it embeds (`out: {#A, a: b: 1}` with
    /// `#A: a?: #B`).
    pub(super) embed_marks: FastMap<u32, u32>,
    /// The source positions closedness groups name (`Group::src`, `Group::via`), each once;
    /// index 0 is no position. Only ever appended (a rollback keeps them: they are spans of
    /// the loaded sources, bounded by their size).
    pub(super) positions: Vec<Span>,
    /// The index of each span in `positions`.
    pub(super) position_ids: FastMap<Span, u32>,
    /// The index `position_id` gave last.
    pub(super) last_position: u32,
}

/// A closedness id list under construction: on the stack up to 24 ids, allocated once when
/// done (a `Vec` turned into an `Arc<[u32]>` is allocated twice; id lists are short).
pub(super) struct IdBuf {
    pub(super) buf: [u32; 24],
    pub(super) n: usize,
    spill: Vec<u32>,
}

impl IdBuf {
    pub(super) fn new() -> IdBuf {
        IdBuf {
            buf: [0; 24],
            n: 0,
            spill: Vec::new(),
        }
    }

    pub(super) fn as_slice(&self) -> &[u32] {
        if self.spill.is_empty() {
            self.buf.get(..self.n).unwrap_or(&[])
        } else {
            &self.spill
        }
    }

    pub(super) fn push(&mut self, id: u32) {
        if !self.spill.is_empty() {
            self.spill.push(id);
        } else if let Some(slot) = self.buf.get_mut(self.n) {
            *slot = id;
            self.n += 1;
        } else {
            self.spill.extend_from_slice(&self.buf);
            self.spill.push(id);
        }
    }

    fn push_new(&mut self, id: u32) {
        if !self.as_slice().contains(&id) {
            self.push(id);
        }
    }

    /// The list, `None` when empty.
    pub(super) fn done(&self) -> Option<Arc<[u32]>> {
        let s = self.as_slice();
        if s.is_empty() {
            None
        } else {
            Some(Arc::from(s))
        }
    }
}

impl Ev {
    /// The closedness id of the call `close(x)` (conjunct `c`) processed into `v`: one per
    /// call identity (same expression in the same canonical environment) while `v` is expanded,
    /// however many ways the call reaches `v`. `close(x) & close(x)` closes to what `x` declares
    /// either way, so the arrivals share one group, and the argument, arriving again with the
    /// same id, is processed for its new outer ids only instead of in full (the core's
    /// `spec: close({_allFields})` reaches a component's `spec` ten times).
    pub(super) fn close_id(&mut self, v: VId, c: &Conj) -> u32 {
        let key = self.conj_key(c);
        if let Some(k) = key {
            if let Some(&(_, id)) = self.vx(v).scr().close_ids.iter().find(|(x, _)| *x == k) {
                return id;
            }
        }
        let id = self.new_close();
        self.closed.flags.set(id, IdFlags::NONREC);
        if let Some(k) = key {
            self.vm(v).scr_mut().close_ids.push((k, id));
        }
        id
    }

    pub(super) fn new_close(&mut self) -> u32 {
        self.closed.next += 1;
        self.closed.next
    }
}

/// Whether the ids of `a` are all in `b`.
#[inline]
pub(super) fn outer_subset(a: &Option<Arc<[u32]>>, b: &Option<Arc<[u32]>>) -> bool {
    match (a, b) {
        (None, _) => true,
        (Some(x), None) => x.is_empty(),
        (Some(x), Some(y)) => x.iter().all(|i| y.contains(i)),
    }
}

/// A 128-bit summary of an id set (a Bloom filter): two bits per id, picked by two
/// multiplicative hashes (ids are small consecutive numbers: `id % 128` alone made ids 128
/// apart indistinguishable). `a ⊆ b` implies `outer_bloom(a) & !outer_bloom(b) == 0`, so a set
/// setting a bit the other lacks is no subset of it (the cheap half of [`outer_subset`]).
pub(super) fn outer_bloom(ids: &Option<Arc<[u32]>>) -> u128 {
    ids.iter().flat_map(|x| x.iter()).fold(0, |b, &id| {
        let h1 = id.wrapping_mul(0x9E37_79B1) >> 25;
        let h2 = id.wrapping_mul(0x85EB_CA6B) >> 25;
        b | (1u128 << h1) | (1u128 << h2)
    })
}

/// `ids` with `id` added (shared, not copied, when it is in already).
pub(super) fn with_id(ids: &Option<Arc<[u32]>>, id: u32) -> Arc<[u32]> {
    if let Some(o) = ids {
        if o.contains(&id) {
            return o.clone();
        }
    }
    let mut v: Vec<u32> = ids.as_ref().map(|o| o.to_vec()).unwrap_or_default();
    if !v.contains(&id) {
        v.push(id);
    }
    v.into()
}

/// The enclosing origins of `c` plus its own.
pub(super) fn outer_with(c: &Conj) -> Option<Arc<[u32]>> {
    // Shared, not copied, when nothing is added (most calls).
    match (&c.outer, c.close) {
        (Some(o), None) if !o.is_empty() => return Some(o.clone()),
        (Some(o), Some(id)) if o.contains(&id) => return Some(o.clone()),
        _ => {}
    }
    let mut v = IdBuf::new();
    for id in c.outer.iter().flat_map(|o| o.iter()) {
        v.push(*id);
    }
    if let Some(id) = c.close {
        v.push_new(id);
    }
    v.done()
}

/// The ids of `base` followed by those of `add` that are not in it and are not `except` (`None`
/// for none); an unchanged list is shared, not copied.
pub(super) fn merge_outer(
    base: Option<Arc<[u32]>>,
    add: Option<&Arc<[u32]>>,
    except: Option<u32>,
) -> Option<Arc<[u32]>> {
    let base = base.filter(|b| !b.is_empty());
    let Some(add) = add else {
        return base;
    };
    let new = |id: &u32| Some(*id) != except && !base.as_ref().is_some_and(|b| b.contains(id));
    if !add.iter().any(new) {
        return base;
    }
    if base.is_none() && add.iter().all(new) {
        return Some(add.clone());
    }
    let mut o = IdBuf::new();
    for id in base.iter().flat_map(|b| b.iter()) {
        o.push(*id);
    }
    for id in add.iter() {
        if new(id) {
            o.push_new(*id);
        }
    }
    o.done()
}
