//! The vertex: a node of the value graph (upstream `adt.Vertex`), and the read API the rest of
//! the crate uses on it.
//!
//! Rules:
//! - a vertex holds its conjuncts, its arcs (child fields, insertion-ordered: CUE's field
//!   order) and its value as far as unification got ([`VertexValue`]); a disjunction leaves
//!   either a redirect to the single surviving disjunct or the surviving alternatives
//!   ([`DisjState`]);
//! - a vertex is expanded once (`Status::Expanding` while it is), then `Done`; a conjunct added
//!   to a done vertex marks it dirty, and it is evaluated again from scratch on next use;
//! - state most vertices never use, or use only while expanded, lives in a boxed [`Scratch`]
//!   dropped when empty (four in five vertices of a render are leaves; the vertex is 240
//!   bytes);
//! - outside the evaluator, a vertex is read through its accessors (`arcs`, `arc`, `kind`, ...),
//!   never through its fields.

use super::*;

/// Evaluation status of a vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not evaluated.
    Fresh,
    /// Being evaluated.
    Expanding,
    /// Evaluated.
    Done,
}

/// The arcs of a vertex, boxed: four in five vertices of a render are leaves, and an empty
/// [`ArcMap`] is 56 bytes. Reads see an absent box as empty.
#[derive(Clone, Debug, Default)]
pub struct Arcs(Option<Box<ArcStore>>);

/// Up to this many arcs are held in a plain array searched in order: one allocation for
/// the box where an [`ArcMap`] took three (the box, its entries and its hash table), and a
/// handful of label comparisons where a lookup hashed the label. Most structs of a render
/// have a few fields.
const SMALL_ARCS: usize = 6;

/// Where [`Arcs`] keeps its arcs: a few in insertion order, else a map.
#[derive(Clone, Debug)]
enum ArcStore {
    /// The first `.0` slots are filled, in insertion order; the rest are `None`.
    Small(u8, [Option<(Label, VId)>; SMALL_ARCS]),
    Map(ArcMap),
}

impl ArcStore {
    /// The filled slots of a small store (empty for a map).
    fn small(&self) -> &[Option<(Label, VId)>] {
        match self {
            ArcStore::Small(n, items) => items.get(..usize::from(*n)).unwrap_or(&[]),
            ArcStore::Map(_) => &[],
        }
    }
}

impl Arcs {
    /// The arc labelled `l`.
    pub fn get(&self, l: &Label) -> Option<&VId> {
        match self.0.as_deref()? {
            ArcStore::Map(m) => m.get(l),
            s => s
                .small()
                .iter()
                .flatten()
                .find(|(k, _)| k == l)
                .map(|(_, a)| a),
        }
    }

    /// The arc labelled `l` with its index.
    pub fn get_full(&self, l: &Label) -> Option<(usize, &Label, &VId)> {
        match self.0.as_deref()? {
            ArcStore::Map(m) => m.get_full(l),
            s => s
                .small()
                .iter()
                .flatten()
                .enumerate()
                .find(|(_, (k, _))| k == l)
                .map(|(i, (k, a))| (i, k, a)),
        }
    }

    /// The arc at index `i` (arcs keep their insertion order).
    pub fn get_index(&self, i: usize) -> Option<(&Label, &VId)> {
        match self.0.as_deref()? {
            ArcStore::Map(m) => m.get_index(i),
            s => s.small().get(i)?.as_ref().map(|(k, a)| (k, a)),
        }
    }

    /// Adds or replaces an arc; returns its index.
    #[inline]
    pub fn insert_full(&mut self, l: Label, a: VId) -> (usize, Option<VId>) {
        let store = self
            .0
            .get_or_insert_with(|| Box::new(ArcStore::Small(0, Default::default())));
        match &mut **store {
            ArcStore::Map(m) => m.insert_full(l, a),
            ArcStore::Small(n, items) => {
                let len = usize::from(*n);
                for (i, slot) in items.iter_mut().take(len).enumerate() {
                    if let Some((k, old)) = slot {
                        if *k == l {
                            return (i, Some(std::mem::replace(old, a)));
                        }
                    }
                }
                if let Some(slot) = items.get_mut(len) {
                    *slot = Some((l, a));
                    *n += 1;
                    return (len, None);
                }
                // Full: from now on a map, in the same order.
                let mut m = ArcMap::with_capacity_and_hasher(2 * SMALL_ARCS, Default::default());
                m.extend(items.iter_mut().filter_map(Option::take));
                let r = m.insert_full(l, a);
                **store = ArcStore::Map(m);
                r
            }
        }
    }

    /// The number of arcs.
    pub fn len(&self) -> usize {
        match self.0.as_deref() {
            None => 0,
            Some(ArcStore::Small(n, _)) => usize::from(*n),
            Some(ArcStore::Map(m)) => m.len(),
        }
    }

    /// Whether there are no arcs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The arcs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Label, &VId)> {
        let (small, map) = match self.0.as_deref() {
            None => (&[][..], None),
            Some(ArcStore::Map(m)) => (&[][..], Some(m)),
            Some(s) => (s.small(), None),
        };
        small
            .iter()
            .flatten()
            .map(|(l, a)| (l, a))
            .chain(map.into_iter().flat_map(|m| m.iter()))
    }

    /// The arc vertices in order.
    pub fn values(&self) -> impl Iterator<Item = &VId> {
        self.iter().map(|(_, a)| a)
    }

    /// Removes every arc.
    #[inline]
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

/// A disjunction result.
#[derive(Clone, Debug)]
pub struct DisjResult {
    /// The surviving alternatives with their default mark.
    pub(super) alts: Vec<(VId, bool)>,
    /// `true` if any alternative is marked default.
    pub(super) has_default: bool,
    /// Default modes (0 maybe, 1 default, 2 not default) per alternative.
    pub(super) modes: Vec<u8>,
}

/// A node of the value graph.
#[derive(Clone, Debug)]
pub struct Vertex {
    /// The parent (None for roots and anonymous values).
    pub(super) parent: Option<VId>,
    /// The label in the parent.
    pub(super) label: Label,
    /// Regular, optional or required (None until a field declares it).
    pub(super) constraint: Option<FieldConstraint>,
    /// The span of the first conjunct.
    pub(super) span: Span,
    /// The conjuncts.
    pub(super) conjuncts: Vec<Conj>,
    /// The status.
    pub(super) status: Status,
    /// Done, but a conjunct arrived since (or a vertex it read unfinished is done now): it is
    /// evaluated again on next use.
    pub(super) dirty: bool,
    /// `late_atoms` were processed again: embeddings from now on are final.
    pub(super) late_done: bool,
    /// The child fields.
    pub(super) arcs: Arcs,
    /// The value as far as unification got.
    pub(super) value: VertexValue,
    /// How the vertex's disjunctions were decided, or which disjunct it is.
    pub(super) disjunction: DisjState,
    /// The closedness id for conjuncts of a definition field.
    pub(super) def_close: Option<u32>,
    /// The closedness groups (see `closedness`).
    pub(super) groups: Groups,
    /// The usually empty state (see [`Scratch`]); `None` stands for all of it empty.
    pub(super) x: Option<Box<Scratch>>,
    /// The conjuncts processed into this vertex, by identity (see [`ConjKey`]), with their
    /// closedness and, for a disjunction, its index among the vertex's disjunctions.
    pub(super) seen: Seen,
}

/// The value of a [`Vertex`] as far as unification got (upstream: a vertex's `BaseValue`):
/// the kinds still allowed, the concrete scalar, the bounds and validators, whether a struct
/// or list was unified in, and the errors. Evaluation starts it over (`Ev::reset`); sharing
/// and atom-only disjuncts copy it from another vertex.
#[derive(Clone, Debug)]
pub struct VertexValue {
    /// Allowed kinds.
    pub(super) kinds: Kinds,
    /// The concrete scalar, if any.
    pub(super) scalar: Option<Val>,
    /// Where the concrete scalar came from.
    pub(super) scalar_span: Span,
    /// Bounds and validators.
    pub(super) bounds: Vec<Val>,
    /// A fatal error.
    pub(super) err: Option<Arc<Bottom>>,
    /// An incomplete error.
    pub(super) incomplete: Option<Arc<Bottom>>,
    /// A validator of this struct or list that is not satisfied yet but may still be once
    /// missing required fields are set: an incomplete error for concrete uses (export).
    pub(super) unmet: Option<Arc<Bottom>>,
    /// A struct literal was unified in.
    pub(super) is_struct: bool,
    /// A list literal was unified in.
    pub(super) is_list: bool,
    /// Only comprehensions were unified in so far: a struct unless they yield a scalar.
    pub(super) maybe_struct: bool,
    /// This vertex shares the value of another (see `Ev::share`): its arcs are proxies.
    pub(super) shared: bool,
    /// A closed struct refused this field: `err` holds the refusal, kept when the field is
    /// evaluated again.
    pub(super) not_allowed: bool,
}

impl Default for VertexValue {
    fn default() -> Self {
        VertexValue {
            kinds: K_TOP,
            scalar: None,
            scalar_span: Span::default(),
            bounds: Vec::new(),
            err: None,
            incomplete: None,
            unmet: None,
            is_struct: false,
            is_list: false,
            maybe_struct: false,
            shared: false,
            not_allowed: false,
        }
    }
}

/// How the disjunctions of a [`Vertex`] were decided (see `disjunct`), or, for a disjunct,
/// which vertex it is a choice of.
#[derive(Clone, Debug, Default)]
pub struct DisjState {
    /// The disjunction result, if more than one alternative survived.
    pub(super) result: Option<Arc<DisjResult>>,
    /// The vertex this one resolved to (a single surviving disjunct).
    pub(super) redirect: Option<VId>,
    /// For a vertex resolved to one disjunct: whether that disjunct is marked default.
    pub(super) redirect_mark: u8,
    /// For a disjunct: the vertex it is a choice of.
    pub(super) clone_of: Option<VId>,
    /// A disjunct: its disjunctions are decided by its choice, never split again.
    pub(super) nosplit: bool,
    /// How many chosen alternatives are being processed into the vertex right now (a
    /// disjunction met inside one is nested).
    pub(super) nest: u32,
}

/// The part of a [`Vertex`] that most vertices never use, or use only while they are being
/// expanded: boxed, and dropped when the vertex is done with all of it empty
/// (`Vertex::settle_scratch`), so a vertex costs its common fields only (the render's 84 k
/// vertices were a measured 55 MB at 656 bytes each). An absent box reads as all empty.
#[derive(Clone, Debug, Default)]
pub(super) struct Scratch {
    /// For a disjunct: the alternative chosen for each disjunction, in order met.
    pub(super) choice: Vec<usize>,
    pub(super) disj_seen: usize,
    /// For a disjunct: the disjunctions whose chosen alternatives are being processed into
    /// it right now, innermost last.
    pub(super) within: Vec<Span>,
    pub(super) pending_disj: Vec<PendingDisj>,
    pub(super) comps: Vec<PendingComp>,
    pub(super) dyn_fields: Vec<PendingField>,
    pub(super) patterns: Vec<Pattern>,
    pub(super) list: Option<ListState>,
    /// Struct or list vertices whose conjuncts were copied into this one (structural cycles).
    pub(super) inlined: Vec<VId>,
    /// Copies held back because an ancestor already holds that vertex: decided once the other
    /// conjuncts are in, by whether any of them feeds this vertex from outside (`flush_cyclic`).
    pub(super) cyc_pending: Vec<HeldCopy>,
    /// Vertices copied in here although nothing else fed this vertex (see `flush_cyclic`).
    pub(super) suspect: Vec<VId>,
    /// Embedded references that gave atoms, processed again once all conjuncts are in.
    pub(super) late_atoms: Vec<Conj>,
    /// Fields of this vertex embedded into it (`t: {c, c: c: g: 1}`), with the embedding
    /// conjunct and how many of the field's conjuncts were copied: copied again as they grow.
    pub(super) self_embeds: Vec<SelfEmbed>,
    /// Where each of `bounds` came from (same order).
    pub(super) bound_spans: Vec<Span>,
    /// The closedness id of each `close(x)` call processed into this vertex while it is
    /// expanded, by the call's identity (see [`Ev::close_id`]).
    pub(super) close_ids: Vec<(ConjKey, u32)>,
}

/// What an absent [`Scratch`] reads as.
static EMPTY_SCRATCH: Scratch = Scratch {
    choice: Vec::new(),
    disj_seen: 0,
    within: Vec::new(),
    pending_disj: Vec::new(),
    comps: Vec::new(),
    dyn_fields: Vec::new(),
    patterns: Vec::new(),
    list: None,
    inlined: Vec::new(),
    cyc_pending: Vec::new(),
    suspect: Vec::new(),
    late_atoms: Vec::new(),
    self_embeds: Vec::new(),
    bound_spans: Vec::new(),
    close_ids: Vec::new(),
};

impl Scratch {
    /// Whether this holds nothing (reads the same as an absent box).
    pub(super) fn is_empty(&self) -> bool {
        self.nothing_deferred()
            && self.choice.is_empty()
            && self.disj_seen == 0
            && self.within.is_empty()
            && self.pending_disj.is_empty()
            && self.inlined.is_empty()
            && self.bound_spans.is_empty()
            && self.close_ids.is_empty()
    }

    /// Whether no work is deferred or held back: no comprehension, dynamic field, pattern, list
    /// state, held-back copy, suspect copy or late atom.
    pub(super) fn nothing_deferred(&self) -> bool {
        self.comps.is_empty()
            && self.dyn_fields.is_empty()
            && self.patterns.is_empty()
            && self.list.is_none()
            && self.cyc_pending.is_empty()
            && self.suspect.is_empty()
            && self.late_atoms.is_empty()
            && self.self_embeds.is_empty()
    }
}

/// The read API: how the rest of the crate (and the evaluator's readers: `readout`, `print`,
/// `builtin`) look at a vertex. None of it evaluates: read a vertex once `Ev::eval` (and
/// `Ev::deref`, for a disjunction's default) made it what is to be read.
impl Vertex {
    /// The parent (`None` for roots and anonymous values).
    pub(crate) fn parent(&self) -> Option<VId> {
        self.parent
    }

    /// The label in the parent.
    pub(crate) fn label(&self) -> &Label {
        &self.label
    }

    /// Regular, optional or required (`None` until a field declares it).
    pub(crate) fn constraint(&self) -> Option<FieldConstraint> {
        self.constraint
    }

    /// Where the vertex's first conjunct is written.
    pub(crate) fn span(&self) -> Span {
        self.span
    }

    /// The arcs in CUE's order, each with its label.
    pub(crate) fn arcs(&self) -> impl Iterator<Item = (&Label, VId)> {
        self.arcs.iter().map(|(l, a)| (l, *a))
    }

    /// The arcs in CUE's order, copied out: to walk them while evaluating each.
    pub(crate) fn arc_list(&self) -> Vec<(Label, VId)> {
        self.arcs.iter().map(|(l, a)| (l.clone(), *a)).collect()
    }

    /// The arc labelled `l`.
    pub(crate) fn arc(&self, l: &Label) -> Option<VId> {
        self.arcs.get(l).copied()
    }

    /// The number of arcs.
    pub(crate) fn arc_count(&self) -> usize {
        self.arcs.len()
    }

    /// The fatal error, if any.
    pub(crate) fn err(&self) -> Option<&Arc<Bottom>> {
        self.value.err.as_ref()
    }

    /// The concrete scalar, if any.
    pub(crate) fn scalar(&self) -> Option<&Val> {
        self.value.scalar.as_ref()
    }

    /// Whether a struct was unified in.
    pub(crate) fn is_struct(&self) -> bool {
        self.value.is_struct
    }

    /// Whether a list was unified in.
    pub(crate) fn is_list(&self) -> bool {
        self.value.is_list
    }

    /// The kind of the value: none (0) for an error, the scalar's kind, struct, list, or the
    /// kinds still allowed.
    pub(crate) fn kind(&self) -> Kinds {
        let x = &self.value;
        if x.err.is_some() {
            return 0;
        }
        if let Some(s) = &x.scalar {
            return s.kind();
        }
        if x.is_struct {
            return K_STRUCT;
        }
        if x.is_list {
            return K_LIST;
        }
        x.kinds
    }

    /// A list's elements: its index arcs, in order (a list embedded in a struct keeps that
    /// struct's hidden fields and definitions as arcs too; they are not elements).
    pub(crate) fn elements(&self) -> Vec<VId> {
        self.arcs
            .iter()
            .filter(|(l, _)| l.kind == LabelKind::Index)
            .map(|(_, a)| *a)
            .collect()
    }

    /// The usually empty state, for reading.
    pub(super) fn scr(&self) -> &Scratch {
        self.x.as_deref().unwrap_or(&EMPTY_SCRATCH)
    }

    /// The usually empty state, for writing (allocated on first need).
    pub(super) fn scr_mut(&mut self) -> &mut Scratch {
        self.x.get_or_insert_with(Box::default)
    }

    /// Takes one part of the usually empty state out, leaving it empty (allocates nothing).
    pub(super) fn take_scratch<T: Default>(
        &mut self,
        part: impl FnOnce(&mut Scratch) -> &mut T,
    ) -> T {
        self.x
            .as_deref_mut()
            .map(|x| std::mem::take(part(x)))
            .unwrap_or_default()
    }

    /// Drops the usually empty state if all of it is empty.
    pub(super) fn settle_scratch(&mut self) {
        if self.x.as_deref().is_some_and(Scratch::is_empty) {
            self.x = None;
        }
    }

    pub(super) fn new(parent: Option<VId>, label: Label) -> Vertex {
        Vertex {
            parent,
            label,
            constraint: None,
            span: Span::default(),
            conjuncts: Vec::new(),
            status: Status::Fresh,
            dirty: false,
            late_done: false,
            arcs: Arcs::default(),
            value: VertexValue::default(),
            disjunction: DisjState::default(),
            def_close: None,
            groups: Groups::default(),
            x: None,
            seen: Seen::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    /// A vertex's size is a measured part of a render's peak memory (see the module rules):
    /// a field added to it, or a group that pads it, should be a choice made knowingly.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_vertex_is_240_bytes() {
        assert_eq!(std::mem::size_of::<super::Vertex>(), 240);
    }
}
