//! The evaluator (upstream `internal/core/adt`: `unify.go`, `closed.go`, `disjunct.go`,
//! `default.go`, `cycle.go`, `comprehension.go`, structure sharing in `share.go`).
//!
//! Rules implemented (CUE spec: "Unification", "Disjunction", "Default values", "Closed
//! structs", "Embedding", "Definitions", "Field constraints"; render-spec §3-§4):
//! - A vertex is a node of the value graph holding conjuncts (expression + environment). Adding a
//!   struct literal to a vertex creates an environment whose vertex is *that* vertex, so references
//!   inside the literal bind to the unified node (render-spec §4.1). A reference to a struct vertex
//!   copies its conjuncts into the referring vertex, re-evaluating them there — unless the
//!   referring vertex has nothing else to add, in which case it shares the referenced value
//!   (see "Design" below).
//! - Children are evaluated lazily; a vertex is expanded once (fields, embeddings), then its
//!   comprehensions run (so guards see every declared field), then patterns, list tails and
//!   closedness are applied.
//! - Closedness: every conjunct carries the id of the definition (or `close()`) it stems from;
//!   struct literals record their labels into the group of that id; a regular label must be
//!   allowed by every closing group of its vertex. Embedding (spec "Embedding"; values made by
//!   comprehensions are embeddings too) does not close the embedding struct against its own
//!   fields: the closedness an embedded value carries joins the embedding's group, so a struct
//!   embedding several closed values allows the union of their fields plus its own. A
//!   definition reaching a vertex both directly and as the embedding of a closed definition
//!   (`#M: {#V, mountPath!: string}` met with `#V & {...}`) is checked once, as part of the
//!   embedding one, in either order (`alias_group`, `merge_group`). A field referenced through
//!   regular and hidden fields only (`a.b` with `a: #A`) does not carry the closedness it
//!   inherited from enclosing definitions; the definitions its own conjuncts reference close
//!   it again (`copy_conjuncts`). A definition enclosing the referring field too (`#D: {v: x:
//!   {...}, m: x: v.x & {...}}`) counts as the referring field's own: it closes `m.x` through
//!   the referring conjunct, and the reference adds nothing of it (for a reference that is not
//!   an embedding, whose closedness the embedding rules decide; a copied conjunct whose ids
//!   the referring conjunct carries anyway is copied unchanged, which keeps copies identical). Known gap: a field reached through a structure-shared proxy
//!   of a definition (`a: #A` alone, then `a.b`) still carries `#A`'s closedness.
//! - Embedding a field of the same struct (`t: {c, c: c: g: 1}`, `t: {c.d, ...}`) embeds that
//!   field's value, which the embedding itself may extend (`t.c.g` here, hence `t.g`): the
//!   conjuncts the field receives after it was copied are embedded too, round after round until
//!   none arrives (`Ev::reembed`, at most 64 rounds; identical conjuncts are skipped).
//! - Disjunctions: each vertex meeting a disjunction is cloned once per alternative (with the
//!   choice fixed), clones with fatal errors are eliminated, equal survivors merged. The default of
//!   a combination is the conjunction of the chosen alternatives' marks (an unmarked disjunction
//!   counts as all-default). There is no cap on the number of disjunctions: one is split per
//!   round until every state has chosen.
//! - Cycles: reaching a vertex that is being expanded yields top for that conjunct and marks the
//!   dependents for re-evaluation (every vertex expanded since it, and any vertex that takes
//!   the value of a marked one before it is evaluated again: `Ev::inherit_taint`), so a
//!   reference cycle one member of which is concrete resolves to its fixed point; reaching an ancestor through regular fields is a structural
//!   cycle.
//! - Limits (`Config`): steps, depth and wall time are checked on every expansion; exceeding one
//!   makes every further result a fatal error.
//!
//! Where each rule lives: this file holds the vertex model, unification (`process`,
//! `expand_struct`, `finish`) and expression evaluation; `closedness` (groups, patterns),
//! `disjunct` (splitting, defaults), `refs` (references, selectors, lets), `share` (structure
//! sharing), `cycle` (reference and structural cycles), `comprehension`, `lists`, `export`
//! (errors, fingerprints, data out), `ops` (operators on atoms), `builtin` (calls) and `print`.
//!
//! # Design: why the cost is linear in what a configuration says, not in how often it says it
//!
//! Measured on the OPM workload (`CUE_EVAL_STATS=1` prints the counters of [`Stats`]), copying
//! conjuncts was the cost: a `#Component` made of four fragments holds the `#Component` body
//! five times, every reference to a struct copied and re-evaluated everything below it, and a
//! render went module → instance → components → each transformer's `#component`, redoing the
//! catalog's work at each step (web_app: 1.9 M conjuncts, 1 M environments, 4.5 s, 530 MB).
//! Three rules remove the repetition without changing results:
//! 1. **Idempotent conjuncts** (`A & A == A`). Environments get a canonical identity
//!    (`Ev::canon`): the same scope node evaluated in the same vertex under an equivalent
//!    parent. A conjunct whose expression and canonical environment equal those of one already
//!    processed into the vertex, with the same closedness, is skipped (`Ev::process`); so is
//!    one that differs only by its outer closedness ids when the earlier one only added settled
//!    atoms (outer ids only decide which groups a struct's labels are recorded in: an atom
//!    records none); a struct or list literal that differs only by *additional* outer ids
//!    is processed for the new ids alone (`Ev::only_new_outer`): its labels are recorded into
//!    the new groups and only the new ids reach its arcs, which do the same in turn, instead of
//!    expanding it again (not when embedding marks are among the ids: `expand_struct` looks
//!    at those as a set); a disjunction equal to an earlier one but for its outer closedness ids
//!    takes the earlier one's choice instead of being split on again (`D & D == D`), so k
//!    copies of a definition with a default disjunction cost one split, not 2^k states.
//! 2. **Structure sharing** (`Ev::shareable`, `Ev::share`). A vertex whose only conjunct
//!    (beside top) is a reference to an evaluated struct or list cannot add or reject a field, so
//!    its value *is* the referenced one: it gets one proxy arc per arc of the target, each
//!    sharing its own target lazily. Nothing is re-evaluated, and every field keeps its own path
//!    for error messages. A reference to a disjunction of field-less alternatives shares the
//!    alternatives the same way (each proxy level split it again before). `components: {for n, c in m.#components {(n): c}}` and
//!    `#transform & {#component: comp}` are such vertices.
//! 3. **No deep copies of large expressions**: `a & b & ...` is taken apart by moving its
//!    operands, not by copying the whole conjunction per operand.
//!
//! 4. **Disjuncts of atom-only fields** (`Ev::atom_disjunct`): a field holding atoms only
//!    (`clusterDomain: string | *"cluster.local"` met five times) is not evaluated again from
//!    all its conjuncts per alternative: its kinds, scalar and bounds are unified with the
//!    chosen alternatives, which is the same by commutativity and idempotence; where the order
//!    things arrive in could show (a conflict message, the order of bounds) the clone is
//!    evaluated in full as before. Dropped disjuncts without arcs free their conjunct copies.
//!    (Render: 12.5 k of 14.2 k clones; processed conjuncts 454 k -> 326 k.)
//! 5. **Memory**: the vertices live in a chunked [`Arena`] (growing it never copies), the
//!    per-vertex record of processed conjuncts (`seen`) is freed once the vertex is done, and
//!    the state most vertices never use or use only while expanded lives in a boxed [`Scratch`]
//!    dropped once the vertex is done with it empty (render peak RSS 196 -> 181 MiB), and
//!    the evaluator's internal maps (arcs by label, closedness groups) hash with
//!    [`FastHasher`], not SipHash. A vertex's arc map, closedness groups and record of
//!    processed conjuncts are boxed ([`Arcs`], `Groups`, `Seen`: four in five vertices are
//!    leaves without groups), and a label is 24 bytes, so an `Expr` is 48 (render peak heap
//!    104 -> 98 MB).
//! 6. **Throw-away evaluations** ([`Ev::mark`], [`Ev::rollback`]): an evaluation whose result
//!    is only read out (the render kernel's pair outputs, through `Runtime::export_expr`) is
//!    dropped again afterwards if it changed no vertex built before its mark: the arena records
//!    any mutable borrow of an older vertex, and the caches that map to vertices are
//!    append-only maps truncated to their length at the mark. A first reach of a definition
//!    evaluates it in place and is kept. (Render: 127 of 129 pair outputs dropped; 69.9 k ->
//!    42.6 k vertices alive at the end; peak RSS 108 -> 76 MiB.)
//! 7. **One closedness id per `close()` call** (`Ev::close_id`): a call reaching a vertex
//!    again (the core's `spec: close({_allFields})` reaches a component's `spec` through every
//!    definition that embeds `#Component`) takes the id of its first arrival, so its argument is
//!    processed for its new outer ids only, not expanded again under a fresh id with all it
//!    embeds. (Render: processed conjuncts 326 k -> 258 k, environments 118 k -> 89 k.)
//! 8. **Repeated literals merged before expansion** (`Ev::merge_repeated_literals`): a struct
//!    or list literal that reached a vertex several times before it expands, differing only
//!    in outer closedness ids (`#Component`'s literals through the module's pattern, the
//!    blueprint and each embedded fragment), is taken once with the union of those ids: the
//!    later arrivals would be processed for exactly the ids the first lacks (item 1's
//!    incremental rule, under the same conditions), and each child then gets one conjunct
//!    instead of one per arrival, so the saving compounds down the tree. (Render: 3.5 k
//!    merges; processed conjuncts 258 k -> 103 k, environments 89 k -> 38 k.)
//!
//! Together: web_app render 0.26 s CPU / 58 MB; the generated benchmark
//! (`cargo bench -p cue --bench components`) grows linearly from 10 to 129 components. On the
//! render kernel's 129-component module, processing repeated literals for their new outer ids
//! saves a fifth of the conjuncts (`CUE_EVAL_STATS=1`, one render: 567 k → 462 k processed,
//! 59 k of them incrementally; 145 k → 118 k environments; 84 k vertices either way; peak RSS
//! 217 → 196 MiB). What is not done yet: a literal whose outer ids include embedding marks is
//! still expanded again (the marks are fresh per expansion of an embedding literal, so its
//! embedded fragments never match an earlier expansion), and a vertex with a second conjunct still copies the referenced value
//! instead of sharing it and evaluating only the difference.

mod builtin;
mod closedness;
mod comprehension;
mod cycle;
mod disjunct;
mod export;
mod lists;
pub(crate) mod ops;
pub(crate) mod print;
mod refs;
mod share;

use crate::adt::*;
use crate::ast::{BinaryOp, FieldConstraint, UnaryOp};
use crate::data::Val as BVal;
use crate::source::Span;
use indexmap::IndexMap;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A hash map with a fast non-cryptographic hash (multiply-rotate, as rustc's FxHash) for the
/// evaluator's internal keys (ids, spans, pointers), which no outside input chooses freely.
type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// The arcs of a vertex: insertion-ordered, hashed with [`FastHasher`] (labels are looked up
/// on every field access; SipHash was a measured cost).
pub type ArcMap = IndexMap<Label, VId, std::hash::BuildHasherDefault<FastHasher>>;
/// An append-only cache of the evaluator: in insertion order, so that [`Ev::rollback`] drops
/// exactly the entries made since its [`Mark`] by truncating.
type LogMap<K, V> = IndexMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

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

/// Most ancestors sharing a value (see `Ev::shareable`) a vertex may have and still share one.
const MAX_SHARED_DEPTH: usize = 64;

/// Most errors collected from one value ([`Ev::to_data`]); the rest are not looked for.
pub const MAX_ERRORS: usize = 1000;

/// Evaluation limits.
#[derive(Clone, Debug)]
pub struct Config {
    /// Maximum nesting of vertex evaluation.
    pub max_depth: usize,
    /// Maximum number of evaluation steps.
    pub max_steps: u64,
    /// Maximum wall time.
    pub max_wall_time: Duration,
    /// Maximum size of exported output.
    pub max_output_bytes: usize,
    /// Stack the evaluator may use (bytes). The API guarantees this much at every call: it
    /// grows the stack (a `stacker` segment) when the calling thread has less left.
    pub max_stack_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_depth: 2000,
            max_steps: 20_000_000,
            max_wall_time: Duration::from_secs(8),
            max_output_bytes: 64 << 20,
            max_stack_bytes: 40 << 20,
        }
    }
}

/// A binding in a comprehension or pattern environment.
#[derive(Clone, Debug)]
pub enum Binding {
    /// A vertex (a comprehension value).
    Vertex(VId),
    /// An atom (a key or label).
    Val(Val),
    /// A lazily evaluated `let` clause.
    Lazy(Arc<Env>, Expr),
}

/// What an environment level holds.
#[derive(Debug)]
pub enum EnvKind {
    /// A struct literal's scope.
    Struct(Arc<StructLit>),
    /// Bindings.
    Bind(Vec<Binding>),
}

/// An environment: one level of lexical scope, tied to the vertex it is evaluated in.
#[derive(Debug)]
pub struct Env {
    /// The enclosing environment.
    pub up: Option<Arc<Env>>,
    /// The vertex the scope is evaluated in.
    pub vertex: VId,
    /// The scope's content.
    pub kind: EnvKind,
    /// A unique id (for caches).
    pub id: u64,
    /// The canonical identity (see `Ev::canon`); `u64::MAX` for an environment that is only
    /// equal to itself.
    pub canon: u64,
}

/// A conjunct.
#[derive(Clone, Debug)]
pub struct Conj {
    /// The environment (None at the top of a package).
    pub env: Option<Arc<Env>>,
    /// The expression.
    pub expr: Expr,
    /// The closedness origin.
    pub close: Option<u32>,
    /// The group struct literals record into when embedded.
    pub embed: Option<u32>,
    /// Enclosing closedness origins (definitions this conjunct is part of); struct literals
    /// record their labels into these groups too.
    pub outer: Option<Arc<[u32]>>,
}

impl Conj {
    /// The conjunct `e` in the environment and closedness of `self` (without copying
    /// `self.expr`, which may be large).
    pub fn with_expr(&self, e: Expr) -> Conj {
        Conj {
            env: self.env.clone(),
            expr: e,
            close: self.close,
            embed: self.embed,
            outer: self.outer.clone(),
        }
    }
}

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

/// A set of a vertex's arcs by their index in its arc map (arcs are only appended, and are
/// cleared only together with the groups, in `reset`): a group records the fields its
/// literals declare without hashing or copying their labels. The first 64 indices are inline.
#[derive(Clone, Debug, Default)]
struct ArcSet {
    low: u64,
    high: Option<Box<[u64]>>,
}

impl ArcSet {
    #[inline]
    fn insert(&mut self, i: usize) {
        if i < 64 {
            self.low |= 1 << i;
            return;
        }
        let w = i / 64 - 1;
        let len = self.high.as_ref().map_or(0, |h| h.len());
        if len <= w {
            let mut words = self.high.take().map(Vec::from).unwrap_or_default();
            words.resize(w + 1, 0);
            self.high = Some(words.into_boxed_slice());
        }
        if let Some(x) = self.high.as_mut().and_then(|h| h.get_mut(w)) {
            *x |= 1 << (i % 64);
        }
    }

    #[inline]
    fn contains(&self, i: usize) -> bool {
        if i < 64 {
            return self.low & (1 << i) != 0;
        }
        self.high
            .as_ref()
            .and_then(|h| h.get(i / 64 - 1))
            .is_some_and(|x| x & (1 << (i % 64)) != 0)
    }
}

/// The arcs of a vertex, boxed: four in five vertices of a render are leaves, and an empty
/// [`ArcMap`] is 56 bytes. Reads see an absent map as empty.
#[derive(Clone, Debug, Default)]
pub struct Arcs(Option<Box<ArcMap>>);

impl Arcs {
    /// The arc labelled `l`.
    pub fn get(&self, l: &Label) -> Option<&VId> {
        self.0.as_ref()?.get(l)
    }

    /// The arc labelled `l` with its index.
    pub fn get_full(&self, l: &Label) -> Option<(usize, &Label, &VId)> {
        self.0.as_ref()?.get_full(l)
    }

    /// The arc at index `i` (arcs keep their insertion order).
    pub fn get_index(&self, i: usize) -> Option<(&Label, &VId)> {
        self.0.as_ref()?.get_index(i)
    }

    /// Adds or replaces an arc; returns its index.
    pub fn insert_full(&mut self, l: Label, a: VId) -> (usize, Option<VId>) {
        self.0
            .get_or_insert_with(Default::default)
            .insert_full(l, a)
    }

    /// Adds or replaces an arc.
    pub fn insert(&mut self, l: Label, a: VId) -> Option<VId> {
        self.insert_full(l, a).1
    }

    /// The number of arcs.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |m| m.len())
    }

    /// Whether there are no arcs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The arcs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Label, &VId)> {
        self.0.iter().flat_map(|m| m.iter())
    }

    /// The labels in order.
    pub fn keys(&self) -> impl Iterator<Item = &Label> {
        self.iter().map(|(l, _)| l)
    }

    /// The arc vertices in order.
    pub fn values(&self) -> impl Iterator<Item = &VId> {
        self.iter().map(|(_, a)| a)
    }

    /// Removes every arc.
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

/// The closedness groups of a vertex with the group of each closedness id: boxed, as four in
/// five vertices have none (48 bytes each saved), and the id index a short list searched in
/// order (a hash map was one allocation and a rehash per vertex with groups).
#[derive(Clone, Debug, Default)]
struct Groups(Option<Box<GroupsInner>>);

#[derive(Clone, Debug, Default)]
struct GroupsInner {
    list: Vec<Group>,
    of: Vec<(u32, usize)>,
}

/// What an absent [`Groups`] box reads as.
static NO_GROUPS: [Group; 0] = [];

impl Groups {
    fn as_slice(&self) -> &[Group] {
        self.0.as_ref().map_or(&NO_GROUPS, |x| &x.list)
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn iter(&self) -> std::slice::Iter<'_, Group> {
        self.as_slice().iter()
    }

    fn get(&self, g: usize) -> Option<&Group> {
        self.as_slice().get(g)
    }

    fn clear(&mut self) {
        self.0 = None;
    }

    /// Appends `g`; returns its index.
    fn push(&mut self, g: Group) -> usize {
        let x = self.0.get_or_insert_with(Default::default);
        // Most vertices with groups have one: the first is allocated alone.
        if x.list.capacity() == 0 {
            x.list.reserve_exact(1);
        }
        x.list.push(g);
        x.list.len() - 1
    }

    /// The group of closedness id `id`.
    fn group_of(&self, id: u32) -> Option<usize> {
        self.0
            .as_ref()?
            .of
            .iter()
            .find(|(k, _)| *k == id)
            .map(|(_, g)| *g)
    }

    /// Records group `g` for `id` unless `id` has a group already.
    fn set_group_of(&mut self, id: u32, g: usize) {
        if self.group_of(id).is_none() {
            self.0.get_or_insert_with(Default::default).of.push((id, g));
        }
    }
}

impl std::ops::Index<usize> for Groups {
    type Output = Group;
    fn index(&self, g: usize) -> &Group {
        &self.as_slice()[g]
    }
}

impl std::ops::IndexMut<usize> for Groups {
    fn index_mut(&mut self, g: usize) -> &mut Group {
        &mut self.0.get_or_insert_with(Default::default).list[g]
    }
}

/// The classes of closedness ids, by id: ids are handed out in sequence (`Ev::new_close`), so
/// a flag byte per id replaces four hash sets read for every id of every outer list.
#[derive(Debug, Default)]
struct IdFlags {
    flags: Vec<u8>,
    /// The flags of `u32::MAX`, the id of a file's top-level literal.
    file: u8,
}

impl IdFlags {
    /// Not closing by itself (a literal's own group, an embedding mark, a file).
    const WEAK: u8 = 1;
    /// From `close()`: closes its struct, not the structs below it.
    const NONREC: u8 = 2;
    /// The embedded side's mark of a literal (a key of `Ev::embed_marks`).
    const EMBED_MARK: u8 = 4;
    /// The literal side's mark (a value of `Ev::embed_marks`).
    const OWN_MARK: u8 = 8;

    #[inline]
    fn has(&self, id: u32, f: u8) -> bool {
        let x = if id == u32::MAX {
            self.file
        } else {
            self.flags.get(id as usize).copied().unwrap_or(0)
        };
        x & f != 0
    }

    fn set(&mut self, id: u32, f: u8) {
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

/// A closedness group of a vertex (see `closedness`); 48 bytes, as a vertex under
/// definitions holds several and the render holds tens of thousands of such vertices.
#[derive(Clone, Debug, Default)]
struct Group {
    /// The arcs (by index, see [`ArcSet`]) the group's literals declare.
    labels: ArcSet,
    /// The pattern constraints and the merged groups (see `absorbs`), rarely any.
    extra: Option<Box<GroupExtra>>,
    /// The closedness id this group was created for (0 for none: ids start at 1).
    owner: u32,
    /// Where the closed struct is written, for a `field not allowed` message (see
    /// `closedness`): the struct literal that declares the group's fields (an index into
    /// `Ev::positions`, 0 for none) ...
    src: u32,
    /// ... and the reference that brought the closed value to this vertex (0 for none).
    via: u32,
    open: bool,
    closing: bool,
    /// This group was merged into others (see `Ev::merge_group`): it is no longer checked on
    /// its own, and what it allows counts for each group that absorbs it.
    merged: bool,
    /// `src` is a literal whose closedness is the group's own (not one it encloses).
    src_direct: bool,
}

/// The rarely used part of a [`Group`].
#[derive(Clone, Debug, Default)]
struct GroupExtra {
    /// The label filters of the group's pattern constraints.
    patterns: Vec<VId>,
    /// The merged groups whose labels and patterns this group allows as its own.
    absorbs: Vec<usize>,
}

impl Group {
    /// The closedness id this group was created for.
    fn owner(&self) -> Option<u32> {
        (self.owner != 0).then_some(self.owner)
    }

    fn patterns(&self) -> &[VId] {
        self.extra.as_ref().map_or(&[], |x| &x.patterns)
    }

    fn absorbs(&self) -> &[usize] {
        self.extra.as_ref().map_or(&[], |x| &x.absorbs)
    }

    fn extra_mut(&mut self) -> &mut GroupExtra {
        self.extra.get_or_insert_with(Default::default)
    }
}

#[derive(Clone, Debug, Default)]
struct ListState {
    closed_len: Option<usize>,
    min_len: usize,
    tails: Vec<(usize, Conj)>,
}

/// A disjunction result.
#[derive(Clone, Debug)]
pub struct DisjResult {
    /// The surviving alternatives with their default mark.
    pub alts: Vec<(VId, bool)>,
    /// `true` if any alternative is marked default.
    pub has_default: bool,
    /// Default modes (0 maybe, 1 default, 2 not default) per alternative.
    pub modes: Vec<u8>,
}

/// A comprehension of a struct literal waiting to run (see `comprehension`): its environment
/// and clauses, and the closedness of the literal's conjunct its results are embedded with.
#[derive(Clone, Debug)]
struct PendingComp {
    env: Arc<Env>,
    comp: ComprehensionC,
    close: Option<u32>,
    /// The group its results record their labels into (they are embeddings).
    embed: Option<u32>,
    outer: Option<Arc<[u32]>>,
}

/// A disjunction met while expanding a vertex, split on once the vertex is finished (see
/// `disjunct`).
#[derive(Clone, Debug)]
struct PendingDisj {
    /// The conjunct holding the disjunction.
    conj: Conj,
    /// The alternatives, each with its default mark.
    alts: Arc<[(Expr, bool)]>,
    /// Met inside an alternative of another disjunction.
    nested: bool,
    /// The vertex's atom state when it was met.
    met: Met,
}

/// What a vertex held when one of its disjunctions was met: whether it had a scalar and how
/// many bounds. A disjunct that starts from the vertex's complete atom state
/// (`Ev::atom_disjunct`) is exact only if nothing it orders by arrival came in after.
#[derive(Clone, Copy, Debug)]
struct Met {
    scalar: bool,
    bounds: usize,
}

/// A node of the value graph.
#[derive(Clone, Debug)]
pub struct Vertex {
    /// The parent (None for roots and anonymous values).
    pub parent: Option<VId>,
    /// The label in the parent.
    pub label: Label,
    /// Regular, optional or required (None until a field declares it).
    pub constraint: Option<FieldConstraint>,
    /// The span of the first conjunct.
    pub span: Span,
    /// The conjuncts.
    pub conjuncts: Vec<Conj>,
    /// The status.
    pub status: Status,
    /// Done, but a conjunct arrived since (or a vertex it read unfinished is done now): it is
    /// evaluated again on next use.
    dirty: bool,
    /// `late_atoms` were processed again: embeddings from now on are final.
    late_done: bool,
    /// The child fields.
    pub arcs: Arcs,
    /// The value as far as unification got.
    pub value: VertexValue,
    /// How the vertex's disjunctions were decided, or which disjunct it is.
    pub disjunction: DisjState,
    /// The closedness id for conjuncts of a definition field.
    pub def_close: Option<u32>,
    /// The closedness groups (see `closedness`).
    groups: Groups,
    /// The usually empty state (see [`Scratch`]); `None` stands for all of it empty.
    x: Option<Box<Scratch>>,
    /// The conjuncts processed into this vertex, by identity (see [`ConjKey`]), with their
    /// closedness and, for a disjunction, its index among the vertex's disjunctions.
    seen: Seen,
}

/// The value of a [`Vertex`] as far as unification got (upstream: a vertex's `BaseValue`):
/// the kinds still allowed, the concrete scalar, the bounds and validators, whether a struct
/// or list was unified in, and the errors. Evaluation starts it over (`Ev::reset`); sharing
/// and atom-only disjuncts copy it from another vertex.
#[derive(Clone, Debug)]
pub struct VertexValue {
    /// Allowed kinds.
    pub kinds: Kinds,
    /// The concrete scalar, if any.
    pub scalar: Option<Val>,
    /// Where the concrete scalar came from.
    pub scalar_span: Span,
    /// Bounds and validators.
    pub bounds: Vec<Val>,
    /// A fatal error.
    pub err: Option<Arc<Bottom>>,
    /// An incomplete error.
    pub incomplete: Option<Arc<Bottom>>,
    /// A validator of this struct or list that is not satisfied yet but may still be once
    /// missing required fields are set: an incomplete error for concrete uses (export).
    pub unmet: Option<Arc<Bottom>>,
    /// A struct literal was unified in.
    pub is_struct: bool,
    /// A list literal was unified in.
    pub is_list: bool,
    /// Only comprehensions were unified in so far: a struct unless they yield a scalar.
    pub maybe_struct: bool,
    /// This vertex shares the value of another (see `Ev::share`): its arcs are proxies.
    pub shared: bool,
    /// A closed struct refused this field: `err` holds the refusal, kept when the field is
    /// evaluated again.
    pub not_allowed: bool,
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
    pub result: Option<Arc<DisjResult>>,
    /// The vertex this one resolved to (a single surviving disjunct).
    pub redirect: Option<VId>,
    /// For a vertex resolved to one disjunct: whether that disjunct is marked default.
    pub redirect_mark: u8,
    /// For a disjunct: the vertex it is a choice of.
    pub clone_of: Option<VId>,
    /// A disjunct: its disjunctions are decided by its choice, never split again.
    pub nosplit: bool,
    /// How many chosen alternatives are being processed into the vertex right now (a
    /// disjunction met inside one is nested).
    pub nest: u32,
}

/// The processed conjuncts of a vertex by [`ConjKey`], boxed: only a vertex being expanded has
/// any (it is freed when the vertex is done), and an empty map is 32 bytes in every vertex.
#[derive(Clone, Debug, Default)]
struct Seen(Option<Box<FastMap<ConjKey, SeenList>>>);

impl Seen {
    fn get(&self, k: &ConjKey) -> Option<&SeenList> {
        self.0.as_ref()?.get(k)
    }

    fn get_mut(&mut self, k: &ConjKey) -> Option<&mut SeenList> {
        self.0.as_mut()?.get_mut(k)
    }

    /// The entries of `k`, created empty.
    fn entry(&mut self, k: ConjKey) -> &mut SeenList {
        self.0
            .get_or_insert_with(Default::default)
            .entry(k)
            .or_default()
    }
}

/// The processed conjuncts of one [`ConjKey`] in a vertex: almost always one, held inline (a
/// `Vec` per key was one allocation per processed conjunct).
#[derive(Clone, Debug, Default)]
enum SeenList {
    #[default]
    Empty,
    One(SeenConj),
    Many(Vec<SeenConj>),
}

impl SeenList {
    fn as_slice(&self) -> &[SeenConj] {
        match self {
            SeenList::Empty => &[],
            SeenList::One(e) => std::slice::from_ref(e),
            SeenList::Many(v) => v,
        }
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut SeenConj> {
        match self {
            SeenList::Empty => None,
            SeenList::One(e) => (i == 0).then_some(e),
            SeenList::Many(v) => v.get_mut(i),
        }
    }

    /// Appends `e`; returns its index.
    fn push(&mut self, e: SeenConj) -> usize {
        match std::mem::take(self) {
            SeenList::Empty => {
                *self = SeenList::One(e);
                0
            }
            SeenList::One(first) => {
                *self = SeenList::Many(vec![first, e]);
                1
            }
            SeenList::Many(mut v) => {
                v.push(e);
                let i = v.len() - 1;
                *self = SeenList::Many(v);
                i
            }
        }
    }
}

/// The part of a [`Vertex`] that most vertices never use, or use only while they are being
/// expanded: boxed, and dropped when the vertex is done with all of it empty
/// (`Vertex::settle_scratch`), so a vertex costs its common fields only (the render's 84 k
/// vertices were a measured 55 MB at 656 bytes each). An absent box reads as all empty.
#[derive(Clone, Debug, Default)]
struct Scratch {
    /// For a disjunct: the alternative chosen for each disjunction, in order met.
    choice: Vec<usize>,
    disj_seen: usize,
    pending_disj: Vec<PendingDisj>,
    comps: Vec<PendingComp>,
    dyn_fields: Vec<PendingField>,
    patterns: Vec<Pattern>,
    list: Option<ListState>,
    /// Struct or list vertices whose conjuncts were copied into this one (structural cycles).
    inlined: Vec<VId>,
    /// Copies held back because an ancestor already holds that vertex: decided once the other
    /// conjuncts are in, by whether any of them feeds this vertex from outside (`flush_cyclic`).
    cyc_pending: Vec<HeldCopy>,
    /// Vertices copied in here although nothing else fed this vertex (see `flush_cyclic`).
    suspect: Vec<VId>,
    /// Embedded references that gave atoms, processed again once all conjuncts are in.
    late_atoms: Vec<Conj>,
    /// Fields of this vertex embedded into it (`t: {c, c: c: g: 1}`), with the embedding
    /// conjunct and how many of the field's conjuncts were copied: copied again as they grow.
    self_embeds: Vec<SelfEmbed>,
    /// Where each of `bounds` came from (same order).
    bound_spans: Vec<Span>,
    /// The closedness id of each `close(x)` call processed into this vertex while it is
    /// expanded, by the call's identity (see [`Ev::close_id`]).
    close_ids: Vec<(ConjKey, u32)>,
}

/// A pattern constraint of a struct (`[filter]: value`): applied to every regular arc whose
/// label the filter accepts, present and future (see `Ev::arc_full`).
#[derive(Clone, Debug)]
struct Pattern {
    /// The label filter, a vertex of its own.
    filter: VId,
    /// The constraint's value, with the closedness of its literal (no environment: `env`).
    conj: Conj,
    /// The environment of the struct literal declaring it.
    env: Option<Arc<Env>>,
}

/// A copy of the struct or list vertex `from` into a vertex whose ancestor already holds one
/// (see `Ev::flush_cyclic`), held back with the conjunct referring to it and its position.
#[derive(Clone, Debug)]
struct HeldCopy {
    from: VId,
    conj: Conj,
    span: Span,
}

/// A field embedded into its own ancestor (see `Ev::reembed`): the labels from the ancestor
/// down to it (the field is looked up again: a re-expanded parent rebuilds its arcs), the
/// embedding conjunct, the vertex copied last and how many of its conjuncts were copied.
#[derive(Clone, Debug)]
struct SelfEmbed {
    path: Vec<Label>,
    conj: Conj,
    copied: VId,
    count: usize,
}

/// What an absent [`Scratch`] reads as.
static EMPTY_SCRATCH: Scratch = Scratch {
    choice: Vec::new(),
    disj_seen: 0,
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
    fn is_empty(&self) -> bool {
        self.nothing_deferred()
            && self.choice.is_empty()
            && self.disj_seen == 0
            && self.pending_disj.is_empty()
            && self.inlined.is_empty()
            && self.bound_spans.is_empty()
            && self.close_ids.is_empty()
    }

    /// Whether no work is deferred or held back: no comprehension, dynamic field, pattern, list
    /// state, held-back copy, suspect copy or late atom.
    fn nothing_deferred(&self) -> bool {
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

/// The identity of a conjunct: what its expression is (a struct or list literal by its node, a
/// vertex by its id, any other expression by its kind and source position) and the canonical
/// identity of its environment (see `Ev::canon`). Two conjuncts with one key denote the
/// same value in the same vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ConjKey {
    /// The class of expression: 1 struct literal, 2 list literal, 3 vertex, 4 and up an
    /// expression identified by its source position (see `Ev::conj_key`).
    class: u8,
    /// The literal's node, the vertex id, or the position's file and start offset.
    node: u64,
    /// The position's end offset (0 for a literal or a vertex).
    end: u64,
    /// The canonical identity of the conjunct's environment.
    env: u64,
}

/// A conjunct processed into a vertex (see [`Seen`]): its closedness, which disjunction of the
/// vertex it is, and whether processing it only added settled atoms.
#[derive(Clone, Debug)]
struct SeenConj {
    close: Option<u32>,
    embed: Option<u32>,
    outer: Option<Arc<[u32]>>,
    /// Its index among the vertex's disjunctions (`usize::MAX` if it is no disjunction).
    disj: usize,
    /// Processing it only added settled atoms (see [`Ev::process_expr`]): it is skipped when
    /// met again whatever its outer ids.
    atomic: bool,
}

/// The canonical identity of an environment: what its scope holds (a struct literal node, or
/// its bindings), the vertex it is evaluated in and the canonical identity of its parent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum EnvShape {
    /// A struct literal's scope: the parent's identity, the vertex and the literal's node.
    Struct { up: u64, vertex: VId, lit: usize },
    /// Bindings: the parent's identity, the vertex and each binding's identity.
    Bind {
        up: u64,
        vertex: VId,
        binds: Vec<BindKey>,
    },
}

/// The identity of one binding of an environment (see [`EnvShape`]): a vertex by id, an atom
/// by value (strings, integers and booleans directly, other atoms by their CUE text), a lazy
/// `let` by its environment's canonical identity and its expression's position.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum BindKey {
    Vertex(VId),
    Str(Arc<str>),
    Int(Arc<num_bigint::BigInt>),
    Bool(bool),
    Text(String),
    Lazy(u64, Span),
}

/// Whether the ids of `a` are all in `b`.
fn outer_subset(a: &Option<Arc<[u32]>>, b: &Option<Arc<[u32]>>) -> bool {
    match (a, b) {
        (None, _) => true,
        (Some(x), None) => x.is_empty(),
        (Some(x), Some(y)) => x.iter().all(|i| y.contains(i)),
    }
}

impl Vertex {
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
    fn scr(&self) -> &Scratch {
        self.x.as_deref().unwrap_or(&EMPTY_SCRATCH)
    }

    /// The usually empty state, for writing (allocated on first need).
    fn scr_mut(&mut self) -> &mut Scratch {
        self.x.get_or_insert_with(Box::default)
    }

    /// Takes one part of the usually empty state out, leaving it empty (allocates nothing).
    fn take_scratch<T: Default>(&mut self, part: impl FnOnce(&mut Scratch) -> &mut T) -> T {
        self.x
            .as_deref_mut()
            .map(|x| std::mem::take(part(x)))
            .unwrap_or_default()
    }

    /// Drops the usually empty state if all of it is empty.
    fn settle_scratch(&mut self) {
        if self.x.as_deref().is_some_and(Scratch::is_empty) {
            self.x = None;
        }
    }

    fn new(parent: Option<VId>, label: Label) -> Vertex {
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

/// A field with a dynamic label, added once all conjuncts of its struct are in: the literal and
/// index of the field, its struct's environment and the closedness context of `expand_struct`.
#[derive(Clone, Debug)]
struct PendingField {
    lit: Arc<StructLit>,
    index: usize,
    env: Arc<Env>,
    ctx: FieldCtx,
}

/// Where `expand_struct` records a field's label and which closedness its value carries.
#[derive(Clone, Debug)]
struct FieldCtx {
    group: Option<usize>,
    outer_groups: Vec<usize>,
    child_outer: Option<Arc<[u32]>>,
    child_close: Option<u32>,
}

/// The result of resolving a reference.
enum Res {
    V(VId),
    A(Val),
}

/// The state [`Ev::rollback`] returns to: the arena's and the caches' lengths when
/// [`Ev::mark`] was called.
#[derive(Debug)]
pub struct Mark {
    vertices: usize,
    lets: usize,
    filters: usize,
    calls: usize,
    shapes: usize,
    packages: usize,
    tainted: usize,
}

/// Vertices per chunk of [`Arena`].
const ARENA_CHUNK: usize = 1024;

/// The vertex arena: fixed-size chunks, so growing it never copies (a `Vec` of a quarter
/// million vertices held the old and the new buffer at once while doubling: a measured part
/// of the render's peak memory). Indexed like a slice by `VId as usize`.
///
/// While a [`Mark`] is out (see [`Ev::mark`]), every mutable access to a vertex older than the
/// mark is recorded: only an evaluation that changed no older vertex can be rolled back.
#[derive(Default)]
pub struct Arena {
    chunks: Vec<Vec<Vertex>>,
    len: usize,
    /// Vertices below this index are watched for changes (0: nothing is).
    watch: usize,
    /// A watched vertex was borrowed mutably since the watch began.
    touched: bool,
}

impl Arena {
    /// The number of vertices.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends a vertex.
    pub fn push(&mut self, v: Vertex) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < ARENA_CHUNK => c.push(v),
            _ => {
                let mut c = Vec::with_capacity(ARENA_CHUNK);
                c.push(v);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    /// The vertex at `i`, if any.
    pub fn get(&self, i: usize) -> Option<&Vertex> {
        self.chunks.get(i / ARENA_CHUNK)?.get(i % ARENA_CHUNK)
    }

    /// Drops the vertices from `n` on.
    fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        let keep_chunks = n.div_ceil(ARENA_CHUNK);
        self.chunks.truncate(keep_chunks);
        if let Some(c) = self.chunks.last_mut() {
            let in_last = n - (keep_chunks - 1) * ARENA_CHUNK;
            c.truncate(in_last);
        }
        self.len = n;
    }
}

impl std::ops::Index<usize> for Arena {
    type Output = Vertex;
    fn index(&self, i: usize) -> &Vertex {
        &self.chunks[i / ARENA_CHUNK][i % ARENA_CHUNK]
    }
}

impl std::ops::IndexMut<usize> for Arena {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut Vertex {
        if i < self.watch {
            self.touched = true;
        }
        &mut self.chunks[i / ARENA_CHUNK][i % ARENA_CHUNK]
    }
}

/// The evaluator: the vertices, the limits and what they are measured against, and the
/// state of each concern, grouped by concern (see the module docs for how an evaluation runs).
pub struct Ev {
    /// All vertices.
    pub vs: Arena,
    /// Limits.
    pub config: Config,
    /// What the limits are measured against, and the errors raised when one is exceeded.
    pub budget: Budget,
    /// Environment ids and canonical identities.
    envs: Envs,
    /// Closedness ids: their classes, the embedding marks, and the positions groups name.
    closed: ClosedIds,
    /// Results computed once per key (append-only, truncated by a rollback).
    caches: Caches,
    /// The work under way, innermost last: what is expanded, probed, copied or decided now.
    active: Active,
    /// Loaded non-std packages by import path (without version/qualifier).
    pub packages: HashMap<String, VId>,
    /// Vertices a comprehension of which stayed incomplete (its guard or source never became
    /// concrete): they yield nothing, and their export fails (`comprehension`). Filled only on
    /// that failure path.
    stuck_comprehensions: FastMap<VId, ()>,
    /// Set by a validator check whose failure is not final (`matchN` over schemas the value
    /// may still match once its missing required fields are set): the failure is incomplete.
    pub(crate) validator_incomplete: bool,
    /// Work counters (printed to stderr when the evaluator is dropped and `CUE_EVAL_STATS` is
    /// set): where evaluation time goes on a real workload.
    pub stats: Stats,
}

/// What the limits of [`Config`] are measured against, and the errors raised when one is
/// exceeded (see `Ev::step`, `Ev::stack_ok`).
pub struct Budget {
    /// Steps taken so far (the budget of the whole runtime, never reset).
    steps: u64,
    /// Nesting of vertex evaluation right now.
    depth: usize,
    /// When the evaluator was created: the deadline is `max_wall_time` after it.
    start: Instant,
    /// The stack position the stack budget counts from.
    stack_base: usize,
    /// Set once a limit is exceeded.
    pub limit_err: Option<Arc<Bottom>>,
    /// Every limit error raised, with its class (diagnostics are classified by identity).
    pub limits: Vec<(Arc<Bottom>, crate::errors::Limit)>,
    /// Set by another thread to stop evaluation (checked with the step limit).
    pub cancel: Arc<AtomicBool>,
}

/// Environment ids and canonical identities (see `Ev::new_env`, `Ev::canon`).
#[derive(Default)]
struct Envs {
    /// The id the last environment got (ids are never reused).
    next_id: u64,
    /// Canonical identities by shape.
    shapes: LogMap<EnvShape, u64>,
}

/// Closedness ids (see `closedness`): handed out in sequence, never reused.
struct ClosedIds {
    /// The id handed out last.
    next: u32,
    /// The class of each id (weak, not recursive, embedding mark, literal mark).
    flags: IdFlags,
    /// Embedding marks (spec "Embedding", "Closed structs"): for a struct literal with
    /// embeddings, the mark its embedded values' descendants carry, mapped to the mark its own
    /// fields' descendants carry (its group id). Below the literal, a closing group from the
    /// embedded side joins the group of the literal's side, so what the literal itself
    /// declares, at any depth, is not rejected by what it embeds (`out: {#A, a: b: 1}` with
    /// `#A: a?: #B`).
    embed_marks: FastMap<u32, u32>,
    /// The source positions closedness groups name (`Group::src`, `Group::via`), each once;
    /// index 0 is no position. Only ever appended (a rollback keeps them: they are spans of
    /// the loaded sources, bounded by their size).
    positions: Vec<Span>,
    /// The index of each span in `positions`.
    position_ids: FastMap<Span, u32>,
    /// The index `position_id` gave last.
    last_position: u32,
}

/// Results computed once per key. Those that name vertices are append-only logs, truncated by
/// [`Ev::rollback`] to their length at the [`Mark`].
#[derive(Default)]
struct Caches {
    /// The vertex of each `let` (and lazy binding), by environment id and index.
    lets: LogMap<(u64, u32), VId>,
    /// The label filter vertex of each pattern constraint whose filter refers to nothing
    /// (`[string]: T`, `[=~"^x"]: T`), by struct literal and pattern index: its value is the
    /// same wherever the literal is expanded, so it is evaluated once.
    filters: LogMap<(usize, usize), VId>,
    /// The list argument of an `and`/`or` call, by environment and call position: each disjunct
    /// of a vertex processes the call again, and must not rebuild a long list every time.
    call_lists: LogMap<(u64, Span), Val>,
    /// Compiled regular expressions (or their compile error) by source text.
    regexes: HashMap<String, Result<Arc<regex::Regex>, String>>,
}

/// The work under way, innermost last. A throw-away evaluation with any of it left over
/// cannot be rolled back (see [`Ev::rollback`]).
#[derive(Default)]
struct Active {
    /// The vertices being expanded (see `Ev::expand`).
    expanding: Vec<VId>,
    /// The vertices whose structure-sharing check (`shareable`) is under way: it evaluates the
    /// referenced vertex before its own expansion starts, so a reference cycle (`b: c, c: b`)
    /// must be stopped here, not by the expansion's cycle detection.
    sharing_probes: Vec<VId>,
    /// The vertices of `sharing_probes` that were expanded (through a reference cycle) while
    /// their sharing check was under way: their outer expansion has nothing left to do.
    probe_expanded: Vec<VId>,
    /// The lets (environment id, index) being resolved as references (`let X = a`), to stop a
    /// let cycle (`let X = Y, let Y = X`).
    let_resolving: Vec<(u64, u32)>,
    /// `(vertex, disjunct)` pairs being decided by `resolve_disjunctions`, innermost last: a
    /// reference to the vertex from inside its own disjunct means that disjunct.
    disjuncts: Vec<(VId, VId)>,
    /// `(target, source)` pairs whose conjuncts are being copied right now (embedding cycles).
    copying: Vec<(VId, VId)>,
    /// Vertices that read an unfinished one, to be evaluated again once it is done.
    tainted: Vec<Taint>,
}

/// A vertex `dep` that read the unfinished vertex `target` (a reference cycle): it is marked
/// for evaluation again once `target` is done (see `Ev::conclude`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Taint {
    target: VId,
    dep: VId,
}

/// Work counters of an evaluator.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Conjuncts processed.
    pub processed: u64,
    /// Conjuncts skipped as identical to one processed before.
    pub deduped: u64,
    /// Vertex expansions.
    pub expansions: u64,
    /// Copies of a vertex's conjuncts into another (references to structs).
    pub inlines: u64,
    /// Disjunct clones evaluated.
    pub clones: u64,
    /// Vertices shared with the vertex they reference instead of copied.
    pub shared: u64,
    /// Literals reached again with more outer closedness ids, processed for the new ids only.
    pub incremental: u64,
    /// Disjunct clones of an atom-only vertex built from its atom state (`Ev::atom_disjunct`).
    pub atom_disjuncts: u64,
    /// Repeated literals taken once with their outer ids merged (`Ev::merge_repeated_literals`).
    pub merged: u64,
    /// Throw-away evaluations dropped again by [`Ev::rollback`].
    pub rolled_back: u64,
    /// Throw-away evaluations kept, as they changed an older vertex.
    pub kept: u64,
}

impl Drop for Ev {
    fn drop(&mut self) {
        if std::env::var_os("CUE_EVAL_STATS").is_some() {
            eprintln!(
                "eval stats: vertices={} envs={} {:?}",
                self.vs.len(),
                self.envs.next_id,
                self.stats
            );
        }
    }
}

/// The enclosing origins of `c` plus its own.
/// `ids` with `id` added.
fn with_id(ids: &Option<Arc<[u32]>>, id: u32) -> Arc<[u32]> {
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

fn outer_with(c: &Conj) -> Option<Arc<[u32]>> {
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

/// A closedness id list under construction: on the stack up to 24 ids, allocated once when
/// done (a `Vec` turned into an `Arc<[u32]>` is allocated twice; id lists are short).
struct IdBuf {
    buf: [u32; 24],
    n: usize,
    spill: Vec<u32>,
}

impl IdBuf {
    fn new() -> IdBuf {
        IdBuf {
            buf: [0; 24],
            n: 0,
            spill: Vec::new(),
        }
    }

    fn as_slice(&self) -> &[u32] {
        if self.spill.is_empty() {
            self.buf.get(..self.n).unwrap_or(&[])
        } else {
            &self.spill
        }
    }

    fn push(&mut self, id: u32) {
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
    fn done(&self) -> Option<Arc<[u32]>> {
        let s = self.as_slice();
        if s.is_empty() {
            None
        } else {
            Some(Arc::from(s))
        }
    }
}

/// The ids of `base` followed by those of `add` that are not in it and are not `except` (`None`
/// for none); an unchanged list is shared, not copied.
fn merge_outer(
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

fn merge_mode(a: u8, b: u8) -> u8 {
    match (a, b) {
        (1, _) | (_, 1) => 1,
        (0, _) | (_, 0) => 0,
        _ => 2,
    }
}

fn env_up(env: &Option<Arc<Env>>, up: u32) -> Option<&Arc<Env>> {
    let mut e = env.as_ref()?;
    for _ in 0..up {
        e = e.up.as_ref()?;
    }
    Some(e)
}

impl Ev {
    /// A new evaluator.
    pub fn new(config: Config) -> Ev {
        Ev {
            vs: Arena::default(),
            config,
            budget: Budget {
                steps: 0,
                depth: 0,
                start: Instant::now(),
                stack_base: 0,
                limit_err: None,
                limits: Vec::new(),
                cancel: Arc::new(AtomicBool::new(false)),
            },
            envs: Envs::default(),
            closed: ClosedIds {
                next: 0,
                flags: IdFlags::default(),
                embed_marks: FastMap::default(),
                positions: vec![Span::default()],
                position_ids: FastMap::default(),
                last_position: 0,
            },
            caches: Caches::default(),
            active: Active::default(),
            packages: HashMap::new(),
            stuck_comprehensions: FastMap::default(),
            validator_incomplete: false,
            stats: Stats::default(),
        }
    }

    /// Starts a throw-away evaluation (see [`Ev::rollback`]); `None` while another is out.
    pub fn mark(&mut self) -> Option<Mark> {
        if self.vs.watch != 0 {
            return None;
        }
        self.vs.watch = self.vs.len();
        self.vs.touched = false;
        Some(Mark {
            vertices: self.vs.len(),
            lets: self.caches.lets.len(),
            filters: self.caches.filters.len(),
            calls: self.caches.call_lists.len(),
            shapes: self.envs.shapes.len(),
            packages: self.packages.len(),
            tainted: self.active.tainted.len(),
        })
    }

    /// Ends the evaluation begun by `m`: if it changed no vertex older than `m`, everything
    /// it built is dropped (the vertices from `m` on and the cache entries made since) and
    /// `true` is returned; else everything is kept, as if no mark had been taken. Sound
    /// because the evaluator only refers to a vertex from a vertex, an environment or one of
    /// these caches: a vertex older than the mark that no one changed cannot refer to a newer
    /// one, environments made since are reachable only from the dropped vertices (an older
    /// vertex would have had to change to hold one), and the caches are append-only, so
    /// truncating them to their length at the mark drops exactly the newer entries. Ids that
    /// are never reused (environment and closedness ids) just go on counting.
    pub fn rollback(&mut self, m: Mark) -> bool {
        let clean = !self.vs.touched
            && self.budget.limit_err.is_none()
            && self.vs.watch == m.vertices
            && self.packages.len() == m.packages
            && self.active.tainted.len() == m.tainted
            && self.active.expanding.is_empty()
            && self.active.disjuncts.is_empty()
            && self.active.copying.is_empty();
        self.vs.watch = 0;
        self.vs.touched = false;
        if !clean {
            self.stats.kept += 1;
            return false;
        }
        self.stats.rolled_back += 1;
        self.vs.truncate(m.vertices);
        self.caches.lets.truncate(m.lets);
        self.caches.filters.truncate(m.filters);
        self.caches.call_lists.truncate(m.calls);
        self.envs.shapes.truncate(m.shapes);
        if !self.stuck_comprehensions.is_empty() {
            let n = m.vertices as VId;
            self.stuck_comprehensions.retain(|v, _| *v < n);
        }
        true
    }

    /// Records the current stack position as the base for the stack budget.
    pub fn mark_stack_base(&mut self) {
        let marker = 0u8;
        self.budget.stack_base = std::ptr::addr_of!(marker) as usize;
    }

    /// `false` (and the limit error set) once the stack budget is used up.
    #[inline]
    pub fn stack_ok(&mut self) -> bool {
        let marker = 0u8;
        let here = std::ptr::addr_of!(marker) as usize;
        if self.budget.stack_base.saturating_sub(here) > self.config.max_stack_bytes {
            return self.stack_spent();
        }
        true
    }

    /// The stack budget is spent: a depth limit error (once). Always `false`.
    #[cold]
    fn stack_spent(&mut self) -> bool {
        if self.budget.limit_err.is_none() {
            self.budget.limit_err = Some(self.limit(
                crate::errors::Limit::Depth,
                "evaluation depth limit exceeded (stack budget)".into(),
                Span::default(),
            ));
        }
        false
    }

    /// Starts an API call: records the stack base and clears the limit error of the previous
    /// call. The step counter and the wall clock are not reset: they are the budget of the whole
    /// runtime, so a spent budget fails the next step again.
    pub fn reset_limits(&mut self) {
        self.mark_stack_base();
        self.budget.limit_err = None;
        self.over_time();
    }

    /// A limit error of class `kind`, recorded in [`Ev::limits`] (the first 1024).
    pub fn limit(&mut self, kind: crate::errors::Limit, msg: String, span: Span) -> Arc<Bottom> {
        let b = Bottom::new(ErrorCode::Eval, msg, span);
        if self.budget.limits.len() < 1024 {
            self.budget.limits.push((b.clone(), kind));
        }
        b
    }

    /// Steps used so far.
    pub fn steps_used(&self) -> u64 {
        self.budget.steps
    }

    /// Time since the evaluator was created (the deadline is `max_wall_time` after that).
    pub fn elapsed(&self) -> Duration {
        self.budget.start.elapsed()
    }

    /// `true` (and the limit error set) once the deadline has passed or evaluation is cancelled.
    fn over_time(&mut self) -> bool {
        let (kind, msg) = if self.budget.cancel.load(Ordering::Relaxed) {
            (
                crate::errors::Limit::Cancelled,
                "evaluation cancelled".to_string(),
            )
        } else if self.budget.start.elapsed() > self.config.max_wall_time {
            let msg = format!(
                "evaluation time limit ({:?}) exceeded",
                self.config.max_wall_time
            );
            (crate::errors::Limit::Deadline, msg)
        } else {
            return false;
        };
        self.budget.limit_err = Some(self.limit(kind, msg, Span::default()));
        true
    }

    /// A new vertex.
    pub fn new_vertex(&mut self, parent: Option<VId>, label: Label) -> VId {
        let id = self.vs.len() as VId;
        self.vs.push(Vertex::new(parent, label));
        id
    }

    /// A new anonymous vertex holding one conjunct.
    pub fn anon(&mut self, env: Option<Arc<Env>>, expr: Expr) -> VId {
        let v = self.new_vertex(None, Label::internal("_anon"));
        self.vs[v as usize].span = expr.span();
        self.vs[v as usize].conjuncts.push(Conj {
            env,
            expr,
            close: None,
            embed: None,
            outer: None,
        });
        v
    }

    /// The pattern constraints (`[filter]: value`) of the evaluated `v`, in the order they were
    /// met: the label filter, and the constraint's value as a vertex of its own, evaluated as a
    /// field the filter accepts whose label is not known yet (the label binds to `string`).
    pub fn pattern_constraints(&mut self, v: VId) -> Vec<(VId, VId)> {
        self.eval(v);
        let v = self.deref(v);
        let pats = self.vx(v).scr().patterns.clone();
        let mut out = Vec::with_capacity(pats.len());
        for Pattern {
            filter,
            conj: pc,
            env: penv,
        } in pats
        {
            let a = self.new_vertex(None, Label::internal("_pattern"));
            let env = self.new_env(
                penv,
                a,
                EnvKind::Bind(vec![Binding::Val(Val::Kind(K_STRING)), Binding::Vertex(a)]),
            );
            self.vm(a).span = pc.expr.span();
            self.add_conj(
                a,
                Conj {
                    env: Some(env),
                    ..pc
                },
            );
            out.push((filter, a));
        }
        out
    }

    fn vx(&self, v: VId) -> &Vertex {
        &self.vs[v as usize]
    }
    fn vm(&mut self, v: VId) -> &mut Vertex {
        &mut self.vs[v as usize]
    }

    fn new_env(&mut self, up: Option<Arc<Env>>, vertex: VId, kind: EnvKind) -> Arc<Env> {
        self.envs.next_id += 1;
        let id = self.envs.next_id;
        let upc = up.as_ref().map_or(0, |e| self.canon(e));
        let shape = match &kind {
            EnvKind::Struct(lit) => EnvShape::Struct {
                up: upc,
                vertex,
                lit: Arc::as_ptr(lit) as usize,
            },
            EnvKind::Bind(bs) => {
                let key = bs
                    .iter()
                    .map(|b| match b {
                        Binding::Vertex(w) => BindKey::Vertex(*w),
                        Binding::Val(Val::Str(x)) => BindKey::Str(x.clone()),
                        Binding::Val(Val::Int(x)) => BindKey::Int(x.clone()),
                        Binding::Val(Val::Bool(x)) => BindKey::Bool(*x),
                        Binding::Val(x) => BindKey::Text(ops::show(x)),
                        Binding::Lazy(e, x) => BindKey::Lazy(self.canon(e), x.span()),
                    })
                    .collect();
                EnvShape::Bind {
                    up: upc,
                    vertex,
                    binds: key,
                }
            }
        };
        let next = self.envs.shapes.len() as u64 + 1;
        let canon = *self.envs.shapes.entry(shape).or_insert(next);
        Arc::new(Env {
            up,
            vertex,
            kind,
            id,
            canon,
        })
    }

    /// The canonical identity of an environment: equal for two environments with the same
    /// shape (same scope node or bindings, same vertex, same canonical parent), which resolve
    /// every reference alike. An environment not made here is only equal to itself.
    fn canon(&self, e: &Arc<Env>) -> u64 {
        if e.canon == u64::MAX {
            e.id | (1 << 63)
        } else {
            e.canon
        }
    }

    /// The identity of conjunct `c` (None for literals atoms, which are cheap to take again,
    /// and for expressions without a source position).
    fn conj_key(&self, c: &Conj) -> Option<ConjKey> {
        let env = c.env.as_ref().map_or(0, |e| self.canon(e));
        let (class, node, end) = match &c.expr {
            Expr::Lit(..) | Expr::Unify(..) | Expr::Bad(_) => return None,
            Expr::Struct(l) => (1, Arc::as_ptr(l) as usize as u64, 0),
            Expr::List(l) => (2, Arc::as_ptr(l) as usize as u64, 0),
            Expr::Vertex(id, _) => (3, u64::from(*id), 0),
            e => {
                let sp = e.span();
                if sp == Span::default() {
                    return None;
                }
                let kind: u8 = match e {
                    Expr::FieldRef { .. } => 4,
                    Expr::SelfRef { .. } => 9,
                    Expr::LetRef { .. } => 5,
                    Expr::BindRef { .. } => 6,
                    Expr::Import(..) => 7,
                    Expr::PkgMember(..) => 8,
                    Expr::Selector(..) => 9,
                    Expr::Index(..) => 10,
                    Expr::Slice(..) => 11,
                    Expr::Call(..) => 12,
                    Expr::Unary(..) => 13,
                    Expr::Binary(..) => 14,
                    Expr::Disj(..) => 15,
                    Expr::Interp(..) => 16,
                    _ => 17,
                };
                (
                    kind,
                    (u64::from(sp.file.0) << 32) | u64::from(sp.start),
                    u64::from(sp.end),
                )
            }
        };
        Some(ConjKey {
            class,
            node,
            end,
            env,
        })
    }

    /// The closedness id of the call `close(x)` (conjunct `c`) processed into `v`: one per
    /// call identity (same expression in the same canonical environment) while `v` is expanded,
    /// however many ways the call reaches `v`. `close(x) & close(x)` closes to what `x` declares
    /// either way, so the arrivals share one group, and the argument, arriving again with the
    /// same id, is processed for its new outer ids only instead of in full (the core's
    /// `spec: close({_allFields})` reaches a component's `spec` ten times).
    fn close_id(&mut self, v: VId, c: &Conj) -> u32 {
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

    fn new_close(&mut self) -> u32 {
        self.closed.next += 1;
        self.closed.next
    }

    fn step(&mut self) -> bool {
        if self.budget.limit_err.is_some() || !self.stack_ok() {
            return false;
        }
        self.budget.steps += 1;
        if self.budget.steps > self.config.max_steps {
            self.budget.limit_err = Some(self.limit(
                crate::errors::Limit::Steps,
                format!("evaluation step limit ({}) exceeded", self.config.max_steps),
                Span::default(),
            ));
            return false;
        }
        if self.budget.steps % 512 == 0 && self.over_time() {
            return false;
        }
        true
    }

    /// Adds a conjunct to a vertex; a vertex already evaluated is re-evaluated on next use.
    pub fn add_conj(&mut self, v: VId, c: Conj) {
        let vert = self.vm(v);
        if vert.conjuncts.is_empty() {
            vert.span = c.expr.span();
        }
        // Most vertices get one conjunct: the first is allocated alone.
        if vert.conjuncts.capacity() == 0 {
            vert.conjuncts.reserve_exact(1);
        }
        vert.conjuncts.push(c);
        if vert.status == Status::Done {
            vert.dirty = true;
        }
    }

    /// The path of labels from the root to `v`.
    pub fn path(&self, v: VId) -> Vec<Label> {
        let mut out = Vec::new();
        let mut cur = Some(v);
        let mut guard = 0;
        while let Some(c) = cur {
            let x = self.vx(c);
            if x.parent.is_none() {
                break;
            }
            out.push(x.label.clone());
            cur = x.parent;
            guard += 1;
            if guard > 100_000 {
                break;
            }
        }
        out.reverse();
        out
    }

    /// The path as text (`a.b[0]."c-d"`).
    pub fn path_text(&self, v: VId) -> String {
        let mut s = String::new();
        for l in self.path(v) {
            if l.kind == LabelKind::Index {
                if s.is_empty() {
                    s.push_str(&l.name);
                } else {
                    s.push('.');
                    s.push_str(&l.name);
                }
                continue;
            }
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(&l.path_text());
        }
        s
    }

    // ----------------------------------------------------------------------------------------
    // Evaluation of vertices.

    /// Evaluates a vertex (not its children).
    pub fn eval(&mut self, v: VId) {
        let st = self.vx(v).status;
        if st == Status::Done && !self.vx(v).dirty {
            return;
        }
        if st == Status::Expanding {
            return;
        }
        if self.budget.depth == 0 {
            let marker = 0u8;
            let here = std::ptr::addr_of!(marker) as usize;
            if self.budget.stack_base < here {
                self.budget.stack_base = here;
            }
        }
        if self.budget.depth >= self.config.max_depth || !self.stack_ok() {
            let b = self.limit(
                crate::errors::Limit::Depth,
                format!(
                    "evaluation depth limit ({}) exceeded",
                    self.config.max_depth
                ),
                self.vx(v).span,
            );
            self.budget.limit_err.get_or_insert(b.clone());
            let vert = self.vm(v);
            vert.value.err = Some(b);
            vert.status = Status::Done;
            return;
        }
        self.budget.depth += 1;
        self.expand(v);
        self.budget.depth -= 1;
    }

    fn reset(&mut self, v: VId) {
        let vert = self.vm(v);
        vert.arcs.clear();
        vert.late_done = false;
        vert.dirty = false;
        // The value starts over, but for a refusal (see `refusal`); the bounds keep their
        // buffer.
        let value = &mut vert.value;
        value.kinds = K_TOP;
        value.scalar = None;
        value.scalar_span = Span::default();
        value.bounds.clear();
        value.err = None;
        value.incomplete = None;
        value.unmet = None;
        value.is_struct = false;
        value.is_list = false;
        value.maybe_struct = false;
        value.shared = false;
        // How the disjunctions were decided starts over; which disjunct this is does not.
        let disj = &mut vert.disjunction;
        disj.result = None;
        disj.redirect = None;
        disj.redirect_mark = 0;
        disj.nest = 0;
        vert.groups.clear();
        vert.seen = Seen::default();
        // Everything usually empty starts over but a disjunct's choice.
        let choice = vert.take_scratch(|x| &mut x.choice);
        vert.x = None;
        if !choice.is_empty() {
            vert.scr_mut().choice = choice;
        }
    }

    /// The error of a field refused by a closed struct: the one `finish` made, with its
    /// positions, or (if another error took its place) a new one at the field.
    #[cold]
    #[inline(never)]
    fn refusal(&self, v: VId) -> Arc<Bottom> {
        let vert = self.vx(v);
        let span = vert.span;
        match &vert.value.err {
            Some(b) if b.code == ErrorCode::NotAllowed && b.span == span => b.clone(),
            _ => Bottom::new(ErrorCode::NotAllowed, "field not allowed", span),
        }
    }

    fn expand(&mut self, v: VId) {
        self.stats.expansions += 1;
        // Expanded while its own sharing check is under way (see `probe_expanded`).
        let in_probe = self.active.sharing_probes.contains(&v);
        if in_probe && !self.active.probe_expanded.contains(&v) {
            self.active.probe_expanded.push(v);
        }
        // A field refused by a closed struct stays refused, with the positions found when it
        // was refused (`finish` of its parent).
        let refused = if self.vx(v).value.not_allowed {
            Some(self.refusal(v))
        } else {
            None
        };
        self.reset(v);
        if refused.is_some() {
            self.vm(v).value.err = refused;
        }
        let shared = self.shareable(v);
        // The sharing check evaluates the target first; through a reference cycle
        // (`b: c, c: b & 1`) that may have expanded `v` itself, which is then done.
        if let Some(i) = self.active.probe_expanded.iter().position(|&x| x == v) {
            if !in_probe {
                self.active.probe_expanded.swap_remove(i);
                return;
            }
        }
        if let Some(w) = shared {
            self.share(v, w);
            return;
        }
        self.vm(v).status = Status::Expanding;
        self.active.expanding.push(v);
        self.merge_repeated_literals(v);
        // Literal scalars first, so that a reference cycle back to this vertex sees them.
        let n0 = self.vx(v).conjuncts.len();
        for i in 0..n0 {
            if let Expr::Lit(val, span) = &self.vx(v).conjuncts[i].expr {
                if val.is_concrete_scalar() {
                    let (val, span) = (val.clone(), *span);
                    self.add_atom(v, val, span);
                }
            }
        }
        let mut i = 0;
        while i < self.vx(v).conjuncts.len() {
            if !self.step() {
                break;
            }
            let c = self.vx(v).conjuncts[i].clone();
            let done_early =
                i < n0 && matches!(&c.expr, Expr::Lit(val, _) if val.is_concrete_scalar());
            if !done_early {
                self.process(v, c);
            }
            i += 1;
        }
        // Embedded references that gave atoms, again now that every conjunct of `v` is in:
        // resolved anew, as the fields they name may have been rebuilt since.
        let late = self.vm(v).take_scratch(|x| &mut x.late_atoms);
        self.vm(v).late_done = true;
        for c in late {
            self.process_again(v, c);
        }
        self.reembed(v);
        self.flush_cyclic(v);
        loop {
            let dynamic = self.run_dynamic_fields(v);
            let comps = !self.vx(v).scr().comps.is_empty();
            self.run_comprehensions(v);
            if !dynamic && !comps {
                break;
            }
            if self.budget.limit_err.is_some() {
                break;
            }
        }
        self.flush_cyclic(v);
        self.finish(v);
        if !self.vx(v).scr().pending_disj.is_empty()
            && !self.vx(v).disjunction.nosplit
            && self.budget.limit_err.is_none()
        {
            self.resolve_disjunctions(v);
        }
        self.conclude(v);
    }

    /// The end of an expansion of `v` (pushed on `in_progress`): a limit error, status done,
    /// what only the expansion needed freed, and the vertices that hit `v` meanwhile marked for
    /// evaluation again.
    fn conclude(&mut self, v: VId) {
        if let Some(b) = &self.budget.limit_err {
            let b = b.clone();
            self.vm(v).value.err.get_or_insert(b);
        }
        self.active.expanding.pop();
        let vert = self.vm(v);
        vert.status = Status::Done;
        // What was processed into `v` matters only while it is expanded (a later conjunct
        // re-expands it from scratch): freed now, it was a large part of the peak memory.
        vert.seen = Seen::default();
        if let Some(x) = vert.x.as_deref_mut() {
            x.close_ids = Vec::new();
        }
        vert.settle_scratch();
        // Vertices that hit `v` while it was being expanded are evaluated again later.
        let mut keep = Vec::new();
        let tainted = std::mem::take(&mut self.active.tainted);
        for t in tainted {
            if t.target == v {
                if t.dep != v && self.vx(t.dep).status == Status::Done {
                    self.vm(t.dep).dirty = true;
                }
            } else {
                keep.push(t);
            }
        }
        self.active.tainted = keep;
    }

    fn set_err(&mut self, v: VId, b: Arc<Bottom>) {
        let vert = self.vm(v);
        if b.code.is_fatal() {
            if vert.value.err.is_none() {
                vert.value.err = Some(b);
            }
        } else if vert.value.incomplete.is_none() {
            vert.value.incomplete = Some(b);
        }
    }

    /// Processes one conjunct into `v`.
    ///
    /// Unification is idempotent (spec "Unification"): a conjunct identical to one already
    /// processed into `v` (same [`ConjKey`], same closedness, outer ids included in the
    /// earlier one's, or any outer ids when the earlier one only added settled atoms: see
    /// [`Ev::process_expr`]) adds nothing and is skipped. An identical disjunction that differs only
    /// in its outer closedness ids is the same disjunction (`D & D == D`): it takes the
    /// alternative its twin takes and is not split on again. This keeps the conjuncts a
    /// definition contributes once per vertex however many references bring it there.
    fn process(&mut self, v: VId, c: Conj) {
        self.process_inner(v, c, true);
    }

    /// Processes `c` into `v` even if an identical conjunct was processed before (an embedded
    /// reference taken again once all conjuncts of `v` are in).
    fn process_again(&mut self, v: VId, c: Conj) {
        self.process_inner(v, c, false);
    }

    fn process_inner(&mut self, v: VId, c: Conj, dedup: bool) {
        if !self.step() {
            if let Some(b) = self.budget.limit_err.clone() {
                self.set_err(v, b);
            }
            return;
        }
        self.stats.processed += 1;
        let key = if dedup { self.conj_key(&c) } else { None };
        let mut twin: Option<usize> = None;
        let mut again: Option<usize> = None;
        if let Some(k) = &key {
            if let Some(prev) = self.vx(v).seen.get(k) {
                for (i, e) in prev.as_slice().iter().enumerate() {
                    if e.close == c.close && e.embed == c.embed {
                        if e.atomic || outer_subset(&c.outer, &e.outer) {
                            self.stats.deduped += 1;
                            return;
                        }
                        if e.disj != usize::MAX {
                            twin = Some(e.disj);
                        } else if again.is_none() {
                            again = Some(i);
                        }
                    }
                }
            }
        }
        if let (Some(k), None, Some(i)) = (&key, twin, again) {
            if let Some(c) = self.only_new_outer(v, k, i, &c) {
                self.stats.incremental += 1;
                self.process_expr(v, c);
                return;
            }
        }
        let mut recorded = None;
        if let (Some(k), None) = (&key, twin) {
            // A disjunction takes the next index (the Disj arm below counts every one).
            let di = if matches!(c.expr, Expr::Disj(..)) {
                self.vx(v).scr().disj_seen
            } else {
                usize::MAX
            };
            let entries = self.vm(v).seen.entry(*k);
            let i = entries.push(SeenConj {
                close: c.close,
                embed: c.embed,
                outer: c.outer.clone(),
                disj: di,
                atomic: false,
            });
            recorded = Some((*k, i));
        }
        if let (Some(ti), Expr::Disj(alts, _)) = (twin, &c.expr) {
            // The twin of disjunction `ti`: the same choice, or nothing while `ti` is pending.
            if let Some(&ch) = self.vx(v).scr().choice.get(ti) {
                if let Some((e, _)) = alts.get(ch) {
                    let e = e.clone();
                    self.vm(v).disjunction.nest += 1;
                    self.process(v, c.with_expr(e));
                    self.vm(v).disjunction.nest -= 1;
                }
            }
            return;
        }
        if self.process_expr(v, c) {
            if let Some((k, i)) = recorded {
                if let Some(e) = self.vm(v).seen.get_mut(&k).and_then(|es| es.get_mut(i)) {
                    e.atomic = true;
                }
            }
        }
    }

    /// Struct and list literals that reached `v` more than once before it expands (the same
    /// literal in the same canonical environment, with the same closedness and embedding; only
    /// their outer closedness ids differ) are taken once, with the union of their outer ids.
    /// Processing the later ones would add exactly what [`Ev::only_new_outer`] processes them
    /// for, the ids the first lacks, so the result is the same under the same conditions (no
    /// embedding marks involved), and every child gets one conjunct instead of one per
    /// arrival. (Render: 57 k of the 129 k conjuncts present when vertices expand.)
    fn merge_repeated_literals(&mut self, v: VId) {
        let n = self.vx(v).conjuncts.len();
        if n < 2 {
            return;
        }
        // The first arrival of each literal: its identity, closedness and index.
        struct First {
            key: ConjKey,
            close: Option<u32>,
            embed: Option<u32>,
            index: usize,
        }
        let mut firsts: Vec<First> = Vec::new();
        let mut merged: Vec<usize> = Vec::new();
        for i in 0..n {
            let c = &self.vx(v).conjuncts[i];
            if !matches!(c.expr, Expr::Struct(_) | Expr::List(_))
                || c.close.is_some_and(|id| self.is_mark(id))
                || self.has_mark(&c.outer)
            {
                continue;
            }
            let Some(k) = self.conj_key(c) else {
                continue;
            };
            let (close, embed) = (c.close, c.embed);
            match firsts
                .iter()
                .find(|f| f.key == k && f.close == close && f.embed == embed)
            {
                Some(&First { index: j, .. }) => {
                    let add = c.outer.clone();
                    let base = self.vx(v).conjuncts[j].outer.clone();
                    self.vm(v).conjuncts[j].outer = merge_outer(base, add.as_ref(), None);
                    merged.push(i);
                }
                None => firsts.push(First {
                    key: k,
                    close,
                    embed,
                    index: i,
                }),
            }
        }
        if merged.is_empty() {
            return;
        }
        self.stats.merged += merged.len() as u64;
        // `merged` is in ascending order.
        let mut i = 0;
        self.vm(v).conjuncts.retain(|_| {
            i += 1;
            merged.binary_search(&(i - 1)).is_err()
        });
    }

    /// A struct or list conjunct identical to processed one `i` of key `k` but for outer
    /// closedness ids it adds (`#Component` reaching a component through its pattern, its
    /// blueprint and its embedded fragments): everything it records per id is already
    /// recorded for the earlier one's ids, so only the new ids remain to record. Returns the
    /// conjunct with just those ids (and widens the earlier one's to the union, so a third
    /// arrival with a subset is skipped), or `None` when it must be processed in full: an
    /// expression other than a literal, or closedness involving embedding marks (whose
    /// handling in `expand_struct` looks at the whole id set, not at one id at a time).
    fn only_new_outer(&mut self, v: VId, k: &ConjKey, i: usize, c: &Conj) -> Option<Conj> {
        if !matches!(c.expr, Expr::Struct(_) | Expr::List(_)) {
            return None;
        }
        let prev = self.vx(v).seen.get(k)?.as_slice().get(i)?.outer.clone();
        if self.has_mark(&prev)
            || self.has_mark(&c.outer)
            || c.close.is_some_and(|id| self.is_mark(id))
        {
            return None;
        }
        let mut new = IdBuf::new();
        for id in c.outer.iter().flat_map(|x| x.iter().copied()) {
            if !prev.as_ref().is_some_and(|p| p.contains(&id)) {
                new.push(id);
            }
        }
        let union = merge_outer(prev, c.outer.as_ref(), None);
        if let Some(e) = self.vm(v).seen.get_mut(k).and_then(|es| es.get_mut(i)) {
            e.outer = union;
        }
        Some(Conj {
            env: c.env.clone(),
            expr: c.expr.clone(),
            close: c.close,
            embed: c.embed,
            outer: Some(new.done().unwrap_or_else(|| Arc::from(&[][..]))),
        })
    }

    /// Processes the expression of conjunct `c` into `v`. Returns `true` when all it did was
    /// add settled atoms (see [`settled_atom`]) to `v`, with no struct, list, disjunction or
    /// embedding involved: the closedness ids of such a conjunct play no part, so the same
    /// conjunct reached again with other outer ids adds nothing.
    fn process_expr(&mut self, v: VId, c: Conj) -> bool {
        match &c.expr {
            Expr::Lit(val, span) => {
                let val = val.clone();
                self.add_atom(v, val, *span);
                false
            }
            Expr::Struct(lit) => {
                let lit = lit.clone();
                self.expand_struct(v, &c, &lit);
                false
            }
            Expr::List(lit) => {
                let lit = lit.clone();
                self.expand_list(v, &c, &lit);
                false
            }
            Expr::Unify(..) => {
                // Taken apart without copying the operands (a long `a & b & ...` would be
                // copied once per operand otherwise).
                let Conj {
                    env,
                    expr,
                    close,
                    embed,
                    outer,
                } = c;
                if let Expr::Unify(xs, _) = expr {
                    for x in xs.iter() {
                        self.process(
                            v,
                            Conj {
                                env: env.clone(),
                                expr: x.clone(),
                                close,
                                embed,
                                outer: outer.clone(),
                            },
                        );
                    }
                }
                false
            }
            Expr::Disj(alts, _) => {
                let alts = alts.clone();
                let seen = self.vx(v).scr().disj_seen;
                self.vm(v).scr_mut().disj_seen += 1;
                if let Some(&ch) = self.vx(v).scr().choice.get(seen) {
                    if let Some((e, _)) = alts.get(ch) {
                        self.vm(v).disjunction.nest += 1;
                        self.process(v, c.with_expr(e.clone()));
                        self.vm(v).disjunction.nest -= 1;
                    }
                } else if alts.len() == 1 {
                    self.process(v, c.with_expr(alts[0].0.clone()));
                } else {
                    let vx = self.vx(v);
                    let nested = vx.disjunction.nest > 0;
                    let met = Met {
                        scalar: vx.value.scalar.is_some(),
                        bounds: vx.value.bounds.len(),
                    };
                    self.vm(v).scr_mut().pending_disj.push(PendingDisj {
                        conj: c.clone(),
                        alts,
                        nested,
                        met,
                    });
                }
                false
            }
            Expr::FieldRef { .. }
            | Expr::SelfRef { .. }
            | Expr::LetRef { .. }
            | Expr::BindRef { .. }
            | Expr::Selector(..)
            | Expr::Index(..)
            | Expr::Import(..)
            | Expr::Vertex(..) => {
                let span = c.expr.span();
                match self.resolve(&c.env, &c.expr) {
                    Res::V(w) => {
                        // An embedded value that is an atom may depend on fields of `v` that
                        // conjuncts not added yet declare (`{[#a][0]}` with `#a: "s"` declared
                        // by another conjunct): taken again once all are in.
                        // (With one conjunct, the literal's own fields are all in already.)
                        if c.embed.is_some()
                            && !matches!(c.expr, Expr::FieldRef { .. })
                            && self.vx(v).conjuncts.len() > 1
                        {
                            let wr = self.deref_redirect(w);
                            let wx = self.vx(wr);
                            // Only a value that is not final yet: a concrete scalar or an
                            // error cannot change.
                            if !(wx.value.is_struct
                                || wx.value.is_list
                                || wx.disjunction.result.is_some()
                                || wx.value.scalar.is_some()
                                || wx.value.err.is_some())
                            {
                                self.late_embed(v, &c);
                            }
                        }
                        self.unify_vertex(v, w, &c, span) && c.embed.is_none()
                    }
                    Res::A(a) => {
                        if c.embed.is_some() {
                            self.late_embed(v, &c);
                        }
                        let atomic = c.embed.is_none() && settled_atom(&a);
                        self.add_atom(v, a, span);
                        atomic
                    }
                }
            }
            Expr::Call(f, args, span) => {
                if let Expr::Lit(Val::Builtin(name), _) = &**f {
                    if &**name == "close" && args.len() == 1 {
                        let id = self.close_id(v, &c);
                        self.process(
                            v,
                            Conj {
                                env: c.env.clone(),
                                expr: args[0].clone(),
                                close: Some(id),
                                embed: c.embed,
                                outer: outer_with(&c),
                            },
                        );
                        // `close` takes and returns a struct (upstream's parameter is a
                        // struct): `close(1)` or `close([1])` is a conflict.
                        self.add_atom(v, Val::Kind(K_STRUCT), *span);
                        return false;
                    }
                    if &**name == "and" && args.len() == 1 {
                        let lv = self.call_list(&c.env, &args[0], *span);
                        if let Val::Vertex(l) = lv {
                            self.eval(l);
                            let l = self.deref(l);
                            let items: Vec<VId> = self.vx(l).arcs.values().copied().collect();
                            for it in items {
                                self.unify_vertex(v, it, &c, *span);
                            }
                            return false;
                        }
                        self.set_err(
                            v,
                            Bottom::new(ErrorCode::Eval, "and: argument must be a list", *span),
                        );
                        return false;
                    }
                    if &**name == "or" && args.len() == 1 {
                        let lv = self.call_list(&c.env, &args[0], *span);
                        if let Val::Vertex(l) = lv {
                            self.eval(l);
                            let l = self.deref(l);
                            let items: Vec<VId> = self.vx(l).arcs.values().copied().collect();
                            if items.is_empty() {
                                self.add_atom(
                                    v,
                                    Val::Bottom(Bottom::new(
                                        ErrorCode::Incomplete,
                                        "empty list in call to or",
                                        *span,
                                    )),
                                    *span,
                                );
                                return false;
                            }
                            let alts = items
                                .into_iter()
                                .map(|it| (Expr::Vertex(it, *span), false))
                                .collect();
                            self.process(
                                v,
                                Conj {
                                    expr: Expr::Disj(alts, *span),
                                    ..c.clone()
                                },
                            );
                            return false;
                        }
                        self.set_err(
                            v,
                            Bottom::new(ErrorCode::Eval, "or: argument must be a list", *span),
                        );
                        return false;
                    }
                }
                let val = self.eval_expr(&c.env, &c.expr);
                if !final_atom(&val) {
                    self.late_embed(v, &c);
                }
                self.add_value(v, val, &c, *span) && c.embed.is_none()
            }
            Expr::Bad(b) => {
                let b = b.clone();
                self.set_err(v, b);
                false
            }
            _ => {
                let span = c.expr.span();
                let val = self.eval_expr(&c.env, &c.expr);
                if !final_atom(&val) {
                    self.late_embed(v, &c);
                }
                if matches!(&val, Val::Bottom(b) if b.code == ErrorCode::Cycle) {
                    self.late_cycle(v, &c);
                }
                self.add_value(v, val, &c, span) && c.embed.is_none()
            }
        }
    }

    /// The evaluated list argument of an `and`/`or` call, once per environment and position.
    fn call_list(&mut self, env: &Option<Arc<Env>>, arg: &Expr, span: Span) -> Val {
        let key = (env.as_ref().map_or(0, |e| e.id), span);
        if let Some(v) = self.caches.call_lists.get(&key) {
            return v.clone();
        }
        let v = self.eval_expr(env, arg);
        if matches!(v, Val::Vertex(_)) {
            self.caches.call_lists.insert(key, v.clone());
        }
        v
    }

    /// Records an embedded expression of `v` that gave a scalar constraint or an incomplete
    /// value while `v` is still taking its conjuncts (`#twice: {#n: int, #n * 2}` used as
    /// `#twice & {#n: 21}`): it is processed again once all are in.
    fn late_embed(&mut self, v: VId, c: &Conj) {
        let literal = matches!(c.expr, Expr::Struct(_) | Expr::List(_) | Expr::Lit(..));
        let vx = self.vx(v);
        if !literal && c.embed.is_some() && vx.status == Status::Expanding && !vx.late_done {
            self.vm(v).scr_mut().late_atoms.push(c.clone());
        }
    }

    /// Records a conjunct of `v` whose expression met a reference cycle while `v` takes its
    /// conjuncts (`a: _Q[0:len(a)]` before `a: [{}]`): it is processed again once all are in,
    /// when what it refers to may be known (a list literal fixes `len`).
    fn late_cycle(&mut self, v: VId, c: &Conj) {
        let vx = self.vx(v);
        if c.embed.is_none() && vx.status == Status::Expanding && !vx.late_done {
            self.vm(v).scr_mut().late_atoms.push(c.clone());
        }
    }

    /// Adds an evaluated value to `v`; `true` if it was a settled atom (see [`settled_atom`]).
    fn add_value(&mut self, v: VId, val: Val, c: &Conj, span: Span) -> bool {
        match val {
            Val::Vertex(w) => self.unify_vertex(v, w, c, span),
            other => {
                let atomic = settled_atom(&other);
                self.add_atom(v, other, span);
                atomic
            }
        }
    }

    /// Unifies the value of vertex `w` into `v`.
    /// Returns `true` when `w` was a scalar-only vertex all of whose atoms are settled (see
    /// [`settled_atom`]): nothing of `c`'s closedness was involved.
    fn unify_vertex(&mut self, v: VId, w: VId, c: &Conj, span: Span) -> bool {
        if w == v {
            return false;
        }
        if let Some(all_regular) = self.is_ancestor_regular(w, v) {
            if all_regular {
                let b = Bottom::new(ErrorCode::StructuralCycle, "structural cycle", span);
                self.set_err(v, b);
            }
            if all_regular || self.budget.depth > 200 {
                return false;
            }
        }
        self.eval(w);
        if self.vx(w).status == Status::Expanding {
            // A reference cycle: the conjunct is treated as top for now.
            if !self.active.expanding.is_empty() {
                let deps: Vec<VId> = self.active.expanding.clone();
                let pos = deps.iter().position(|&x| x == w).unwrap_or(0);
                for &d in &deps[pos..] {
                    self.active.tainted.push(Taint { target: w, dep: d });
                }
            }
            if self.vx(w).value.is_struct {
                // Copy what is known so far of a struct being expanded.
            }
            return false;
        }
        self.inherit_taint(w, v);
        let wr = self.deref_redirect(w);
        let wx = self.vx(w);
        let rx = self.vx(wr);
        // A scalar with fields of its own (`#fn: {#in: c: string, #in.c}`) is copied as a
        // struct: its embedding is evaluated again where it is used, where `#in` may be more
        // specific (`x: #fn & {#in: c: "V"}`).
        let structural = if wx.disjunction.redirect.is_some() {
            rx.value.is_struct
                || rx.value.is_list
                || rx.disjunction.result.is_some()
                || !rx.arcs.is_empty()
        } else {
            wx.value.is_struct
                || wx.value.is_list
                || wx.disjunction.result.is_some()
                || !wx.arcs.is_empty()
        };
        if !structural && self.is_ancestor_regular(v, w).is_some() {
            // `x: {#in: c: string, #in.c}` embeds a field of itself, which may still grow
            // from conjuncts of `x` not added yet: taken again once all are in.
            self.late_embed(v, c);
        }
        let wx = self.vx(wr);
        if !structural {
            // A scalar-only vertex: take its atoms.
            let atoms: Vec<Val> = {
                let mut a = Vec::new();
                if let Some(e) = &wx.value.err {
                    a.push(Val::Bottom(e.clone()));
                }
                if wx.value.kinds != K_TOP {
                    a.push(Val::Kind(wx.value.kinds));
                }
                if let Some(s) = &wx.value.scalar {
                    a.push(s.clone());
                }
                a.extend(wx.value.bounds.iter().cloned());
                if let Some(e) = &wx.value.incomplete {
                    if wx.value.scalar.is_none() {
                        a.push(Val::Bottom(e.clone()));
                    }
                }
                a
            };
            let is_def = self.vx(w).label.is_def();
            let _ = is_def;
            let settled = atoms.iter().all(settled_atom);
            for a in atoms {
                self.add_atom(v, a, span);
            }
            return settled;
        }
        // Copying `w` into `v` while the same copy is already under way further up is an
        // embedding or reference cycle (`#A: {#B}`, `#B: {#A}`): its conjuncts are already being
        // added, so the inner copy adds nothing.
        if self.active.copying.contains(&(v, w)) {
            return false;
        }
        if self.vx(v).status == Status::Expanding && self.inlined_above(v, w) {
            self.vm(v).scr_mut().cyc_pending.push(HeldCopy {
                from: w,
                conj: c.clone(),
                span,
            });
            return false;
        }
        self.inline(v, w, c, span);
        false
    }

    /// Copies the conjuncts of the struct or list vertex `w` into `v`.
    fn inline(&mut self, v: VId, w: VId, c: &Conj, span: Span) {
        if self.active.copying.len() >= self.config.max_depth || !self.stack_ok() {
            let b = self.limit(
                crate::errors::Limit::Depth,
                format!(
                    "evaluation depth limit ({}) exceeded",
                    self.config.max_depth
                ),
                span,
            );
            self.budget.limit_err.get_or_insert(b.clone());
            self.set_err(v, b);
            return;
        }
        self.stats.inlines += 1;
        self.active.copying.push((v, w));
        if !self.vx(v).scr().inlined.contains(&w) {
            self.vm(v).scr_mut().inlined.push(w);
        }
        self.copy_conjuncts(v, w, c);
        self.active.copying.pop();
    }

    /// Processes the conjuncts of `w` into `v`, carrying the closedness of the referring conjunct.
    fn copy_conjuncts(&mut self, v: VId, w: VId, c: &Conj) {
        let n = self.vx(w).conjuncts.len();
        self.copy_conjunct_range(v, w, c, 0, n);
        // A field of `v` embedded into `v` (spec "Embedding": the embedded value is the field's
        // value, which the embedding itself may extend: `t: {c, c: c: g: 1}` gives `t.c.g`,
        // hence `t.g`): what the field receives later is embedded too, to a fixed point
        // (`Ev::reembed`). Looked at only for embeddings of a strict descendant.
        if c.embed.is_some()
            && self.vx(v).status == Status::Expanding
            && self.ancestors(w).any(|a| a == v)
        {
            let mut path: Vec<Label> = std::iter::once(w)
                .chain(self.ancestors(w))
                .take_while(|a| *a != v)
                .map(|a| self.vx(a).label.clone())
                .collect();
            path.reverse();
            self.vm(v).scr_mut().self_embeds.push(SelfEmbed {
                path,
                conj: c.clone(),
                copied: w,
                count: n,
            });
        }
    }

    /// Embeds again the conjuncts the fields of `v` embedded into it received since they were
    /// copied (see `copy_conjuncts`), until none grows (bounded: each round copies only new
    /// conjuncts, identical ones are skipped when processed, and at most 64 rounds run).
    fn reembed(&mut self, v: VId) {
        for _ in 0..64 {
            let mut embeds = self.vm(v).take_scratch(|x| &mut x.self_embeds);
            if embeds.is_empty() || self.budget.limit_err.is_some() {
                return;
            }
            let mut grew = false;
            for e in embeds.iter_mut() {
                // What the embedding gave a field between `v` and the embedded one reaches it
                // when that field is evaluated (`t: {c.d, c: d: c: d: e: g: 1}`); a field
                // evaluated again rebuilds its arcs, so the embedded one is looked up anew.
                let mut cur = Some(v);
                for (i, l) in e.path.iter().enumerate() {
                    let Some(p) = cur else { break };
                    if i > 0 {
                        self.eval(p);
                    }
                    cur = self.vx(p).arcs.get(l).copied();
                }
                let Some(w) = cur else { continue };
                let now = self.vx(w).conjuncts.len();
                let from = if w == e.copied { e.count } else { 0 };
                if now > from {
                    grew = true;
                    e.copied = w;
                    e.count = now;
                    let c = e.conj.clone();
                    self.copy_conjunct_range(v, w, &c, from, now);
                }
            }
            let mut more = self.vm(v).take_scratch(|x| &mut x.self_embeds);
            embeds.append(&mut more);
            if !grew {
                return;
            }
            self.vm(v).scr_mut().self_embeds = embeds;
        }
    }

    /// Processes conjuncts `from..to` of `w` into `v` (see `copy_conjuncts`).
    fn copy_conjunct_range(&mut self, v: VId, w: VId, c: &Conj, from: usize, n: usize) {
        let referring = outer_with(c);
        let w_def_close = self.vx(w).def_close;
        // A field reached through regular and hidden fields only (`a.b` with `a: #A`) does not
        // carry the closedness it inherited from the definitions enclosing it: a reference
        // closes only by the definitions its conjuncts reference themselves (upstream's typo
        // check: `r: a.b` is not checked against `#A`, `r: a` and `r: #A.b` are). Its stored
        // conjuncts hold only that inherited closedness (a definition reference among them is
        // kept as the reference and closes again where it is processed).
        //
        // Only the definitions between the field and the innermost struct enclosing both it and
        // the referring field count: a definition enclosing the referring field as well (`#D:
        // {s: {#R, v: x: {...}, m: x: s.v.x & {...}}}`, a module's `#components` holding a
        // component whose mount is written from its own volume) closes the referring field
        // through the referring conjunct's own closedness already; reaching its field through
        // regular fields from inside it carries no more of it than from outside.
        // (The innermost definition above the field is then also above the referring one.) A
        // conjunct all of whose ids the referring conjunct carries too is copied as it is: the
        // copy closes the same either way, and keeping it lets identical conjuncts be skipped.
        let (inherited_only, shared_def) = if w_def_close.is_some() {
            (false, false)
        } else {
            match std::iter::once(w)
                .chain(self.ancestors(w))
                .find(|a| self.vx(*a).label.is_def())
            {
                None => (true, false),
                // Not for an embedding: what an embedded value's closedness does is decided
                // where it joins the embedding's group (`closedness`).
                Some(d) if c.embed.is_none() => {
                    let shared = d == v || self.ancestors(v).any(|a| a == d);
                    (false, shared)
                }
                Some(_) => (false, false),
            }
        };
        let mut first_close = None;
        for i in from..n {
            // Conjuncts are only ever appended: the first `n` are the ones to copy.
            let Some(mut cj) = self.vx(w).conjuncts.get(i).cloned() else {
                break;
            };
            let foreign = |id: &u32| {
                !referring.as_ref().is_some_and(|r| r.contains(id)) && Some(*id) != c.close
            };
            if inherited_only
                || shared_def
                    && (cj.close.iter().any(foreign)
                        || cj.outer.iter().flat_map(|o| o.iter()).any(foreign))
            {
                cj.close = None;
                cj.outer = None;
            }
            if cj.close.is_none() && w_def_close.is_some() {
                cj.close = w_def_close;
            }
            // The closedness `w`'s own conjuncts carry, not the referring conjunct's.
            if first_close.is_none() {
                first_close = cj.close.filter(foreign);
            }
            if c.embed.is_some() {
                cj.embed = c.embed;
            }
            if c.close.is_some() && cj.close.is_none() {
                cj.close = c.close;
            }
            // The referring conjunct's enclosing origins enclose the copy too.
            if c.close.is_some() && cj.close != c.close || c.outer.is_some() {
                cj.outer = merge_outer(cj.outer.take(), referring.as_ref(), cj.close);
            }
            self.process(v, cj);
        }
        // The reference that brought a definition (or a field of one) here, for `field not
        // allowed` (see `closedness`).
        if let Some(id) = first_close {
            self.record_via(v, id, c);
        }
    }

    fn add_atom(&mut self, v: VId, val: Val, span: Span) {
        match val {
            Val::Top => {}
            Val::Bottom(b) => self.set_err(v, b),
            Val::Kind(k) => {
                let vert = self.vm(v);
                vert.value.kinds &= k;
            }
            Val::Bound(op, x) => {
                let k = Val::Bound(op, x.clone()).kind();
                let vert = self.vm(v);
                vert.value.kinds &= k;
                vert.value.bounds.push(Val::Bound(op, x));
                vert.scr_mut().bound_spans.push(span);
            }
            Val::Validator(x) => {
                let vert = self.vm(v);
                vert.value.bounds.push(Val::Validator(x));
                vert.scr_mut().bound_spans.push(span);
            }
            Val::Vertex(_) => {}
            Val::StdFunc(b) if b.arity == 1 || (b.variadic && b.arity == 2) => {
                // A std function used as a value is a validator on its only argument.
                let vert = self.vm(v);
                vert.value
                    .bounds
                    .push(Val::Validator(Arc::new(Validator::Builtin(b, Vec::new()))));
                vert.scr_mut().bound_spans.push(span);
            }
            Val::Builtin(_) | Val::StdFunc(_) => {
                self.set_err(
                    v,
                    Bottom::new(ErrorCode::Eval, "cannot use function as value", span),
                );
            }
            s => {
                let existing = self.vx(v).value.scalar.clone();
                match existing {
                    Some(t) => {
                        if !ops::scalar_identical(&s, &t) {
                            let msg = format!(
                                "conflicting values {} and {}{}",
                                ops::show(&t),
                                ops::show(&s),
                                if t.kind() != s.kind() {
                                    format!(
                                        " (mismatched types {} and {})",
                                        kind_name(t.kind()),
                                        kind_name(s.kind())
                                    )
                                } else {
                                    String::new()
                                }
                            );
                            let mut b = Bottom {
                                code: ErrorCode::Conflict,
                                msg,
                                span,
                                related: vec![self.vx(v).span],
                                sub: Vec::new(),
                            };
                            b.related.retain(|x| *x != span);
                            self.set_err(v, Arc::new(b));
                        }
                    }
                    None => {
                        let vert = self.vm(v);
                        vert.value.scalar = Some(s);
                        vert.value.scalar_span = span;
                    }
                }
            }
        }
    }

    /// Gets or creates arc `label` of `v` (applying pattern constraints to a new arc).
    fn arc(&mut self, v: VId, label: &Label) -> VId {
        self.arc_full(v, label).1
    }

    /// [`Ev::arc`] with the arc's index in `v`'s arc map.
    fn arc_full(&mut self, v: VId, label: &Label) -> (usize, VId) {
        if let Some((i, _, &a)) = self.vx(v).arcs.get_full(label) {
            return (i, a);
        }
        let a = self.new_vertex(Some(v), label.clone());
        let (i, _) = self.vm(v).arcs.insert_full(label.clone(), a);
        let pats = self.vx(v).scr().patterns.clone();
        for p in pats {
            self.apply_pattern(v, a, label, p.filter, &p.conj, p.env);
        }
        (i, a)
    }

    /// Evaluates the labels of the pending dynamic fields of `v` (all against the same state:
    /// a dynamic label does not see fields other dynamic labels of this round add), then adds
    /// the fields. Returns whether any were pending.
    fn run_dynamic_fields(&mut self, v: VId) -> bool {
        let pending = self.vm(v).take_scratch(|x| &mut x.dyn_fields);
        if pending.is_empty() {
            return false;
        }
        let mut ready = Vec::with_capacity(pending.len());
        for p in pending {
            let Some(f) = p.lit.fields.get(p.index) else {
                continue;
            };
            let LabelExpr::Dynamic(e) = &f.label else {
                continue;
            };
            let lv = self.eval_expr(&Some(p.env.clone()), e);
            let lv = self.concrete_default(lv);
            match lv {
                Val::Str(s) => ready.push((p, Label::string(&s))),
                Val::Bottom(b) => self.set_err(v, b),
                other => {
                    let code = if other.is_concrete_scalar() {
                        ErrorCode::Eval
                    } else {
                        ErrorCode::Incomplete
                    };
                    self.set_err(
                        v,
                        Bottom::new(
                            code,
                            format!(
                                "invalid label: expected string, found {}",
                                ops::show(&other)
                            ),
                            f.span,
                        ),
                    );
                }
            }
        }
        for (p, label) in ready {
            if let Some(f) = p.lit.fields.get(p.index) {
                self.add_field(v, &p.env, f, label, &p.ctx);
            }
        }
        true
    }

    /// Adds field `f` of a struct literal under `label` to `v`.
    fn add_field(&mut self, v: VId, env: &Arc<Env>, f: &FieldDecl, label: Label, ctx: &FieldCtx) {
        let (i, a) = self.arc_full(v, &label);
        if let Some(g) = ctx.group {
            self.vm(v).groups[g].labels.insert(i);
        }
        for &g in &ctx.outer_groups {
            self.vm(v).groups[g].labels.insert(i);
        }
        let mut fouter = ctx.child_outer.clone();
        let cc = if label.is_def() {
            let id = match self.vx(a).def_close {
                Some(id) => id,
                None => {
                    let id = self.new_close();
                    self.vm(a).def_close = Some(id);
                    id
                }
            };
            if let Some(cc) = ctx.child_close {
                let mut o: Vec<u32> = fouter.as_ref().map(|x| x.to_vec()).unwrap_or_default();
                if !o.contains(&cc) {
                    o.push(cc);
                }
                fouter = Some(o.into());
            }
            Some(id)
        } else {
            ctx.child_close
        };
        let ax = self.vm(a);
        ax.constraint = Some(match (ax.constraint, f.constraint) {
            (None, x) => x,
            (Some(FieldConstraint::Regular), _) | (_, FieldConstraint::Regular) => {
                FieldConstraint::Regular
            }
            (Some(FieldConstraint::Required), _) | (_, FieldConstraint::Required) => {
                FieldConstraint::Required
            }
            _ => FieldConstraint::Optional,
        });
        if ax.conjuncts.is_empty() {
            ax.span = f.span;
        }
        self.add_conj(
            a,
            Conj {
                env: Some(env.clone()),
                expr: f.value.clone(),
                close: cc,
                embed: None,
                outer: fouter,
            },
        );
    }

    fn expand_struct(&mut self, v: VId, c: &Conj, lit: &Arc<StructLit>) {
        // Next to an embedding, only regular fields make the value a struct: definitions,
        // hidden and optional fields, patterns and `...` constrain the fields a struct would
        // have but leave the embedded value free to be a scalar (`{..., #foo: string, _}` is
        // `_`, so `"s" & {..., #foo: string, _}` is the string; spec "Embedding").
        let has_fields = lit.fields.iter().any(|f| match &f.label {
            LabelExpr::Fixed(l) => {
                l.is_regular()
                    && (lit.embeds.is_empty() || f.constraint == FieldConstraint::Regular)
            }
            LabelExpr::Dynamic(_) => true,
        }) || lit.embeds.is_empty()
            && (!lit.patterns.is_empty() || lit.ellipsis.is_some());
        if has_fields || (lit.embeds.is_empty() && lit.comprehensions.is_empty()) {
            self.vm(v).value.is_struct = true;
        } else if lit.embeds.is_empty() {
            self.vm(v).value.maybe_struct = true;
        }
        let env = self.new_env(c.env.clone(), v, EnvKind::Struct(lit.clone()));
        // The closedness group this literal records its labels into. A literal holding
        // embeddings or comprehensions gets a group of its own: what they embed records into
        // it (spec "Closed structs": values generated by comprehensions are embeddings).
        let target = if let Some(e) = c.embed {
            Some(e)
        } else if let Some(cl) = c.close {
            Some(cl)
        } else if lit.is_file {
            self.closed.flags.set(u32::MAX, IdFlags::WEAK);
            Some(u32::MAX)
        } else if !lit.embeds.is_empty() || !lit.comprehensions.is_empty() {
            let id = self.new_close();
            self.closed.flags.set(id, IdFlags::WEAK);
            Some(id)
        } else {
            None
        };
        // Marks for a literal embedding values next to fields of its own (see `embed_marks`).
        let marks = match target {
            Some(t) if c.embed.is_none() && c.close.is_none() => {
                if !lit.embeds.is_empty()
                    && lit.fields.iter().any(|f| match &f.label {
                        LabelExpr::Fixed(l) => l.is_regular(),
                        LabelExpr::Dynamic(_) => true,
                    })
                {
                    let e = self.new_close();
                    self.closed
                        .flags
                        .set(e, IdFlags::WEAK | IdFlags::EMBED_MARK);
                    self.closed.flags.set(t, IdFlags::WEAK | IdFlags::OWN_MARK);
                    self.closed.embed_marks.insert(e, t);
                    Some((t, e))
                } else {
                    None
                }
            }
            _ => None,
        };
        // A closing value that came through an embedding (its conjunct carries the embedded
        // side's mark) joins the group of the embedding literal's own side.
        if let Some(o) = &c.outer {
            // A conjunct that carries the literal's own mark too came from the literal's own
            // fields (`{X: {...}, {X}}`): it is not the embedded side; unless a definition
            // closes it (`{r: i: #d: r: {}, r.i.#d}`): that definition is embedded like any
            // other, and what the literal declares is not rejected by it.
            let t = o
                .iter()
                .find_map(|id| self.closed.embed_marks.get(id).copied())
                .filter(|t| !o.contains(t) || c.close.is_some());
            if let Some(t) = t {
                let ids: Vec<u32> = c.close.into_iter().chain(o.iter().copied()).collect();
                for n in ids {
                    if !self.closed.flags.has(n, IdFlags::WEAK) {
                        self.alias_group(v, n, t);
                    }
                }
            }
        }
        let gi = target.map(|t| self.group_idx(v, t));
        let mut ogs = Vec::with_capacity(c.outer.as_ref().map_or(0, |o| o.len()) + 1);
        if let Some(e) = c.embed {
            // An embedded value (spec "Embedding"): the closedness it carries (its own origin
            // and the definitions enclosing it where it was declared) does not close the
            // embedding struct against the struct's other fields; it joins the embedding's
            // group, so the struct allows the union of what every embedding declares. An
            // origin that already has a group of its own here (the embedding sits inside that
            // same definition: `#C: {a: {v: 1}, s: close({a})}`) records the labels too, as
            // that definition declares them.
            let outer = c.outer.clone();
            let ids = c
                .close
                .into_iter()
                .chain(outer.iter().flat_map(|o| o.iter().copied()));
            for id in ids {
                if id == e || self.is_mark(id) {
                    continue;
                }
                match self.vx(v).groups.group_of(id) {
                    Some(g) if Some(g) != gi => {
                        if let (Some(t), true) = (gi, Some(id) == c.close) {
                            self.merge_group(v, id, g, t);
                        }
                        if !ogs.contains(&g) {
                            ogs.push(g);
                        }
                    }
                    Some(_) => {}
                    None => self.alias_group(v, id, e),
                }
            }
        } else if let Some(o) = &c.outer {
            for id in o.iter() {
                if Some(*id) != target && !self.closed.flags.has(*id, IdFlags::EMBED_MARK) {
                    let g = self.group_idx(v, *id);
                    if !ogs.contains(&g) {
                        ogs.push(g);
                    }
                }
            }
        }
        // Where the closed structs are written, for `field not allowed` (see `closedness`).
        self.record_src(v, gi, &ogs, lit.span);
        let mut child_outer = self.child_outer(c);
        if let Some((t, _)) = marks {
            child_outer = Some(with_id(&child_outer, t));
        }
        if lit.ellipsis.is_some() {
            for g in gi.iter().chain(ogs.iter()) {
                self.vm(v).groups[*g].open = true;
            }
        }
        let child_close = self.child_close(c);
        let ctx = FieldCtx {
            group: gi,
            outer_groups: ogs,
            child_outer: child_outer.clone(),
            child_close,
        };
        for (index, f) in lit.fields.iter().enumerate() {
            match &f.label {
                LabelExpr::Fixed(l) => self.add_field(v, &env, f, l.clone(), &ctx),
                // A dynamic label may refer to fields declared later or contributed by other
                // conjuncts: it is evaluated once the vertex has all its conjuncts.
                LabelExpr::Dynamic(_) => self.vm(v).scr_mut().dyn_fields.push(PendingField {
                    lit: lit.clone(),
                    index,
                    env: env.clone(),
                    ctx: ctx.clone(),
                }),
            }
        }
        for (pi, p) in lit.patterns.iter().enumerate() {
            let fv = self.pattern_filter(&env, lit, pi, &p.filter);
            if let Some(g) = gi {
                self.vm(v).groups[g].extra_mut().patterns.push(fv);
            }
            for &g in &ctx.outer_groups {
                self.vm(v).groups[g].extra_mut().patterns.push(fv);
            }
            let pc = Conj {
                env: None,
                expr: p.value.clone(),
                close: child_close,
                embed: None,
                outer: child_outer.clone(),
            };
            self.vm(v).scr_mut().patterns.push(Pattern {
                filter: fv,
                conj: pc.clone(),
                env: Some(env.clone()),
            });
            let arcs: Vec<(Label, VId)> = self
                .vx(v)
                .arcs
                .iter()
                .map(|(l, a)| (l.clone(), *a))
                .collect();
            for (l, a) in arcs {
                self.apply_pattern(v, a, &l, fv, &pc, Some(env.clone()));
            }
        }
        let embed_outer = match marks {
            Some((_, e)) => Some(with_id(&c.outer, e)),
            None => c.outer.clone(),
        };
        for e in &lit.embeds {
            self.process(
                v,
                Conj {
                    env: Some(env.clone()),
                    expr: e.clone(),
                    close: c.close,
                    embed: target,
                    outer: embed_outer.clone(),
                },
            );
        }
        for comp in &lit.comprehensions {
            self.vm(v).scr_mut().comps.push(PendingComp {
                env: env.clone(),
                comp: comp.clone(),
                close: c.close,
                embed: target,
                outer: c.outer.clone(),
            });
        }
    }

    /// The label filter vertex of pattern `pi` of `lit` expanded in `env` (see `filter_cache`).
    fn pattern_filter(
        &mut self,
        env: &Arc<Env>,
        lit: &Arc<StructLit>,
        pi: usize,
        filter: &Expr,
    ) -> VId {
        if !refers_to_nothing(filter) {
            return self.anon(Some(env.clone()), filter.clone());
        }
        let key = (Arc::as_ptr(lit) as usize, pi);
        if let Some(&f) = self.caches.filters.get(&key) {
            return f;
        }
        let f = self.anon(None, filter.clone());
        self.caches.filters.insert(key, f);
        f
    }

    fn finish(&mut self, v: VId) {
        // List tails and lengths.
        if let Some(st) = self.vx(v).scr().list.clone() {
            let arcs: Vec<(Label, VId)> = self
                .vx(v)
                .arcs
                .iter()
                .map(|(l, a)| (l.clone(), *a))
                .collect();
            let n = arcs
                .iter()
                .filter(|(l, _)| l.kind == LabelKind::Index)
                .count();
            if let Some(cl) = st.closed_len {
                if n > cl || st.min_len > cl {
                    let b = Bottom::new(
                        ErrorCode::Eval,
                        format!(
                            "incompatible list lengths ({} and {})",
                            cl,
                            n.max(st.min_len)
                        ),
                        self.vx(v).span,
                    );
                    self.set_err(v, b);
                }
            }
            for (p, tc) in &st.tails {
                for (l, a) in &arcs {
                    if l.kind == LabelKind::Index && l.index as usize >= *p {
                        self.add_conj(*a, tc.clone());
                    }
                }
            }
        }
        // Closedness: a regular label must be allowed by every closing group, each together
        // with the groups it absorbs (`merge_group`).
        // Each closing group's members are a range of one flat list (one allocation, not one
        // per group), and the arcs are read by index (no copy of the labels).
        let ngroups = self.vx(v).groups.len();
        let mut members: Vec<usize> = Vec::new();
        let mut closing: Vec<(usize, usize)> = Vec::new();
        for r in 0..ngroups {
            let gs = &self.vx(v).groups;
            if gs[r].merged || !gs[r].closing {
                continue;
            }
            let start = members.len();
            self.group_members_into(v, r, &mut members);
            let gs = &self.vx(v).groups;
            if members[start..].iter().any(|&m| gs[m].open) {
                members.truncate(start);
            } else {
                closing.push((start, members.len()));
            }
        }
        if !closing.is_empty() {
            let n = self.vx(v).arcs.len();
            for i in 0..n {
                let Some((l, &a)) = self.vx(v).arcs.get_index(i) else {
                    break;
                };
                if !l.is_regular() {
                    continue;
                }
                // The closing groups that refuse the label (with the groups they absorb).
                let mut refusing: Vec<usize> = Vec::new();
                for &(from, to) in &closing {
                    let gs = &members[from..to];
                    if gs.iter().any(|&g| self.vx(v).groups[g].labels.contains(i)) {
                        continue;
                    }
                    let pats: Vec<VId> = gs
                        .iter()
                        .flat_map(|&g| self.vx(v).groups[g].patterns().iter().copied())
                        .collect();
                    // The label only when patterns must be asked (the common case needs none).
                    let Some(l) = self.vx(v).arcs.get_index(i).map(|(l, _)| l.clone()) else {
                        break;
                    };
                    let mut m = false;
                    for p in pats {
                        if self.label_matches(p, &l) {
                            m = true;
                            break;
                        }
                    }
                    if !m {
                        refusing.extend_from_slice(gs);
                    }
                }
                if !refusing.is_empty() {
                    self.refuse(v, a, &refusing);
                }
            }
        }
        // A literal holding only comprehensions is a struct unless they yielded a scalar.
        {
            let vert = self.vm(v);
            if vert.value.maybe_struct
                && !vert.value.is_struct
                && !vert.value.is_list
                && vert.value.scalar.is_none()
            {
                vert.value.is_struct = true;
            }
        }
        // The value itself.
        let vert = self.vx(v);
        let mut kinds = vert.value.kinds;
        if vert.value.is_struct {
            kinds &= K_STRUCT;
        }
        if vert.value.is_list {
            kinds &= K_LIST;
        }
        let span = vert.span;
        if vert.value.err.is_some() {
            return;
        }
        if kinds == 0 {
            let msg = self.conflict_msg(v);
            self.set_err(v, Bottom::new(ErrorCode::Conflict, msg, span));
            return;
        }
        if let Some(s) = vert.value.scalar.clone() {
            if kinds & s.kind() == 0 {
                let msg = self.conflict_msg(v);
                self.set_err(v, Bottom::new(ErrorCode::Conflict, msg, span));
                return;
            }
            let bounds = vert.value.bounds.clone();
            let (sspan, bspans) = (vert.value.scalar_span, vert.scr().bound_spans.clone());
            for (i, b) in bounds.iter().enumerate() {
                if let Some(e) = self.check_bound(b, &s) {
                    // Both sides, as upstream prints them: the bound, then the value.
                    let primary = bspans.get(i).copied().unwrap_or(span);
                    let value = if sspan == Span::default() {
                        span
                    } else {
                        sspan
                    };
                    let mut related = vec![value];
                    related.retain(|x| *x != primary && *x != Span::default());
                    self.set_err(
                        v,
                        Arc::new(Bottom {
                            code: ErrorCode::Conflict,
                            msg: e,
                            span: primary,
                            related,
                            sub: Vec::new(),
                        }),
                    );
                    return;
                }
            }
        } else if vert.value.is_struct || vert.value.is_list {
            let bounds = vert.value.bounds.clone();
            for b in bounds {
                if let Val::Validator(_) = &b {
                    self.validator_incomplete = false;
                    let failed = self.check_bound(&b, &Val::Vertex(v));
                    let undecided = std::mem::take(&mut self.validator_incomplete);
                    if let Some(e) = failed {
                        // A struct or list that is not yet concrete (a schema, a definition)
                        // may still come to satisfy the validator: the failure is incomplete.
                        // So is one inside a definition, which is never final.
                        let mut errs = Vec::new();
                        let in_def = self.path(v).iter().any(|l| l.is_def());
                        let code = if in_def
                            || undecided
                            || (self.to_data(v, &mut errs, 0).is_none()
                                && errs.iter().all(|(_, b)| !b.code.is_fatal()))
                        {
                            ErrorCode::Incomplete
                        } else {
                            ErrorCode::Eval
                        };
                        let b = Bottom::new(code, e, span);
                        if undecided {
                            self.vm(v).value.unmet = Some(b.clone());
                        }
                        self.set_err(v, b);
                        return;
                    }
                }
            }
        }
        self.vm(v).value.kinds = kinds;
    }

    fn conflict_msg(&self, v: VId) -> String {
        let vert = self.vx(v);
        let mut parts = Vec::new();
        if vert.value.is_struct {
            parts.push("struct".to_string());
        }
        if vert.value.is_list {
            parts.push("list".to_string());
        }
        if let Some(s) = &vert.value.scalar {
            parts.push(ops::show(s));
        }
        if vert.value.kinds != K_TOP {
            parts.push(kind_name(vert.value.kinds));
        }
        if parts.len() >= 2 {
            format!(
                "conflicting values {} and {} (mismatched types)",
                parts[0], parts[1]
            )
        } else {
            format!("conflicting values ({})", parts.join(", "))
        }
    }

    /// Checks a bound or validator against a concrete value; returns an error message.
    fn check_bound(&mut self, b: &Val, s: &Val) -> Option<String> {
        match b {
            Val::Bound(op, x) => ops::check_bound(self, *op, x, s),
            Val::Validator(val) => builtin::check_validator(self, val, s),
            _ => None,
        }
    }

    /// Compiles (with caching) a regular expression with RE2 semantics.
    pub fn regex(&mut self, re: &str) -> Result<Arc<regex::Regex>, String> {
        if let Some(r) = self.caches.regexes.get(re) {
            return r.clone();
        }
        let tr = ops::translate_re2(re);
        let r = regex::Regex::new(&tr)
            .map(Arc::new)
            .map_err(|e| format!("invalid regular expression {re:?}: {e}"));
        self.caches.regexes.insert(re.to_string(), r.clone());
        r
    }

    /// Marks every vertex expanded since the unfinished vertex `v` (the innermost one when `v`
    /// is not on the stack) to be evaluated again once `v` is done.
    pub(super) fn taint_since(&mut self, v: VId) {
        match self.active.expanding.iter().position(|&x| x == v) {
            Some(p) => {
                for i in p + 1..self.active.expanding.len() {
                    let d = self.active.expanding[i];
                    self.active.tainted.push(Taint { target: v, dep: d });
                }
            }
            None => {
                if let Some(&cur) = self.active.expanding.last() {
                    self.active.tainted.push(Taint {
                        target: v,
                        dep: cur,
                    });
                }
            }
        }
    }

    /// A vertex `w` that read an unfinished vertex is evaluated again once that one is done
    /// (`tainted`); `v`, which takes `w`'s value now, holds the same unfinished value and is
    /// evaluated again with it (`b0: a1` read while `a1: a0 + 2` waits for `a0`).
    fn inherit_taint(&mut self, w: VId, v: VId) {
        if self.active.tainted.is_empty() || w == v {
            return;
        }
        let targets: Vec<VId> = self
            .active
            .tainted
            .iter()
            .filter(|t| t.dep == w && t.target != v)
            .map(|t| t.target)
            .collect();
        for target in targets {
            let t = Taint { target, dep: v };
            if !self.active.tainted.contains(&t) {
                self.active.tainted.push(t);
            }
        }
    }

    /// The value of a vertex in an operand position.
    pub fn vertex_value(&mut self, v: VId, span: Span) -> Val {
        self.eval(v);
        if let Some(&cur) = self.active.expanding.last() {
            self.inherit_taint(v, cur);
        }
        if self.vx(v).status == Status::Expanding {
            // Every vertex expanded since `v` read it unfinished (`a0: X, X: b1, b1: b0 - 2,
            // b0: a1, a1: a0 + 2`: `b0` and `b1` hold what `a1` gave before `a0` was known):
            // all of them are evaluated again once `v` is done, as `unify_vertex` does.
            self.taint_since(v);
            if let Some(s) = self.vx(v).value.scalar.clone() {
                if self.vx(v).scr().pending_disj.is_empty() && !self.vx(v).value.is_struct {
                    return s;
                }
            }
            return Val::Bottom(Bottom::new(ErrorCode::Cycle, "cycle in reference", span));
        }
        let v = self.deref(v);
        let vx = self.vx(v);
        if let Some(e) = &vx.value.err {
            return Val::Bottom(e.clone());
        }
        if let Some(d) = &vx.disjunction.result {
            let _ = d;
            return Val::Vertex(v);
        }
        if vx.value.is_struct || vx.value.is_list {
            return Val::Vertex(v);
        }
        if let Some(s) = &vx.value.scalar {
            return s.clone();
        }
        if let Some(e) = &vx.value.incomplete {
            return Val::Bottom(e.clone());
        }
        if vx.value.bounds.is_empty() {
            return Val::Kind(vx.value.kinds);
        }
        Val::Vertex(v)
    }

    /// Evaluates an expression to a value.
    pub fn eval_expr(&mut self, env: &Option<Arc<Env>>, e: &Expr) -> Val {
        if !self.step() {
            return Val::Bottom(
                self.budget
                    .limit_err
                    .clone()
                    .unwrap_or_else(|| Bottom::new(ErrorCode::Eval, "limit exceeded", e.span())),
            );
        }
        match e {
            Expr::Lit(v, _) => v.clone(),
            Expr::Bad(b) => Val::Bottom(b.clone()),
            Expr::FieldRef { .. }
            | Expr::SelfRef { .. }
            | Expr::LetRef { .. }
            | Expr::BindRef { .. }
            | Expr::Selector(..)
            | Expr::Index(..)
            | Expr::Import(..)
            | Expr::Vertex(..) => match self.resolve(env, e) {
                Res::V(w) => self.vertex_value(w, e.span()),
                Res::A(a) => a,
            },
            Expr::Struct(_) | Expr::List(_) | Expr::Unify(..) | Expr::Disj(..) => {
                let a = self.anon(env.clone(), e.clone());
                self.vertex_value(a, e.span())
            }
            Expr::PkgMember(pkg, name, span) => builtin::pkg_member(self, pkg, name, *span),
            Expr::Slice(base, lo, hi, span) => {
                let b = self.eval_expr(env, base);
                let lo = lo.as_ref().map(|x| self.eval_expr(env, x));
                let hi = hi.as_ref().map(|x| self.eval_expr(env, x));
                ops::slice(self, b, lo, hi, *span)
            }
            Expr::Call(f, args, span) => builtin::call(self, env, f, args, *span),
            Expr::Unary(op, x, span) => {
                let xv = self.eval_expr(env, x);
                let xv = self.concrete_default(xv);
                ops::unary(self, *op, xv, *span)
            }
            Expr::Binary(op, a, b, span) => {
                if matches!(op, BinaryOp::Eq | BinaryOp::Ne) {
                    let a_bot = matches!(&**a, Expr::Lit(Val::Bottom(_), _));
                    let b_bot = matches!(&**b, Expr::Lit(Val::Bottom(_), _));
                    if a_bot || b_bot {
                        let other = if a_bot { b } else { a };
                        let ov = self.eval_expr(env, other);
                        let is_bot = self.is_bottom_val(&ov);
                        return Val::Bool(if *op == BinaryOp::Eq { is_bot } else { !is_bot });
                    }
                }
                if matches!(op, BinaryOp::And | BinaryOp::Or) {
                    let av = self.eval_expr(env, a);
                    let av = self.concrete_default(av);
                    match (&av, op) {
                        (Val::Bool(false), BinaryOp::And) => return Val::Bool(false),
                        (Val::Bool(true), BinaryOp::Or) => return Val::Bool(true),
                        _ => {}
                    }
                    let bv = self.eval_expr(env, b);
                    let bv = self.concrete_default(bv);
                    return ops::binary(self, *op, av, bv, *span);
                }
                let av = self.eval_expr(env, a);
                let bv = self.eval_expr(env, b);
                let av = self.concrete_default(av);
                let bv = self.concrete_default(bv);
                ops::binary(self, *op, av, bv, *span)
            }
            Expr::Interp(parts, bytes, span) => {
                let mut out: Vec<u8> = Vec::new();
                for p in parts.iter() {
                    match p {
                        InterpPart::Text(t) => out.extend_from_slice(t.as_bytes()),
                        InterpPart::Bytes(b) => out.extend_from_slice(b),
                        InterpPart::Expr(x) => {
                            let xv = self.eval_expr(env, x);
                            let xv = self.concrete_default(xv);
                            match ops::interp_text(&xv) {
                                Ok(s) => out.extend_from_slice(&s),
                                Err(mut b) => {
                                    if b.span == Span::default() {
                                        Arc::make_mut(&mut b).span = *span;
                                    }
                                    return Val::Bottom(b);
                                }
                            }
                        }
                    }
                }
                if *bytes {
                    Val::Bytes(out.into())
                } else {
                    Val::Str(ops::lossy_utf8(&out).into())
                }
            }
        }
    }

    /// `true` if the value is an error (the `x == _|_` test).
    fn is_bottom_val(&mut self, v: &Val) -> bool {
        match v {
            Val::Bottom(_) => true,
            Val::Vertex(w) => {
                let w = self.deref(*w);
                self.vx(w).value.err.is_some()
            }
            _ => false,
        }
    }

    /// Resolves a vertex value to its concrete scalar or default, for operands.
    pub fn concrete_default(&mut self, v: Val) -> Val {
        match v {
            Val::Vertex(w) => {
                let w = self.deref(w);
                let wx = self.vx(w);
                if let Some(e) = &wx.value.err {
                    return Val::Bottom(e.clone());
                }
                if wx.disjunction.result.is_some() {
                    return Val::Bottom(Bottom::new(
                        ErrorCode::Incomplete,
                        "unresolved disjunction",
                        wx.span,
                    ));
                }
                if wx.value.is_struct || wx.value.is_list {
                    return Val::Vertex(w);
                }
                match &wx.value.scalar {
                    Some(s) => s.clone(),
                    None => {
                        if let Some(b) = wx.value.bounds.first() {
                            b.clone()
                        } else {
                            Val::Kind(wx.value.kinds)
                        }
                    }
                }
            }
            other => other,
        }
    }
}

/// Builds a value expression from concrete data.
pub fn data_to_expr(d: &BVal, span: Span) -> Expr {
    match d {
        BVal::Null => Expr::Lit(Val::Null, span),
        BVal::Bool(b) => Expr::Lit(Val::Bool(*b), span),
        BVal::Int(i) => Expr::Lit(Val::Int(Arc::new(i.clone())), span),
        BVal::Float(f) if !crate::data::num::exponent_in_range(f) => Expr::Lit(
            Val::Bottom(Bottom::new(
                ErrorCode::Eval,
                "float exponent out of range",
                span,
            )),
            span,
        ),
        BVal::Float(f) => Expr::Lit(Val::Float(Arc::new(f.clone())), span),
        BVal::String(s) => Expr::Lit(Val::Str(s.as_str().into()), span),
        BVal::Bytes(b) => Expr::Lit(Val::Bytes(b.clone().into()), span),
        BVal::List(xs) => Expr::List(Arc::new(ListLit {
            elems: xs
                .iter()
                .map(|x| ListElemC::Expr(data_to_expr(x, span)))
                .collect(),
            ellipsis: None,
            span,
        })),
        BVal::Struct(fs) => Expr::Struct(Arc::new(StructLit {
            fields: fs
                .iter()
                .map(|(k, x)| FieldDecl {
                    label: LabelExpr::Fixed(Label::string(k)),
                    constraint: FieldConstraint::Regular,
                    value: data_to_expr(x, span),
                    span,
                })
                .collect(),
            span,
            ..Default::default()
        })),
        BVal::Opaque(v) => Expr::Vertex(*v as VId, span),
    }
}

/// Whether an embedded value can no longer change: a concrete scalar or a fatal error.
fn final_atom(v: &Val) -> bool {
    match v {
        Val::Bottom(b) => b.code.is_fatal(),
        Val::Vertex(_) => true,
        other => other.is_concrete_scalar(),
    }
}

/// Whether `e` is built from literals and operators only (no reference, import, call,
/// struct or list), so that its value does not depend on where it is evaluated.
fn refers_to_nothing(e: &Expr) -> bool {
    match e {
        Expr::Lit(..) => true,
        Expr::Unary(_, x, _) => refers_to_nothing(x),
        Expr::Binary(_, a, b, _) => refers_to_nothing(a) && refers_to_nothing(b),
        Expr::Unify(xs, _) => xs.iter().all(refers_to_nothing),
        Expr::Disj(xs, _) => xs.iter().all(|(x, _)| refers_to_nothing(x)),
        _ => false,
    }
}

/// Whether adding atom `v` to a vertex again would change nothing whatever closedness it came
/// with: any atom but a vertex and a non-fatal error (an incomplete or cycle error may be a
/// value not known yet).
fn settled_atom(v: &Val) -> bool {
    match v {
        Val::Bottom(b) => b.code.is_fatal(),
        Val::Vertex(_) => false,
        _ => true,
    }
}

/// Labels as a path suffix (`.a.b.0`), empty for none.
fn labels_text(labels: &[Label]) -> String {
    let mut s = String::new();
    for l in labels {
        s.push('.');
        if l.kind == LabelKind::Index {
            s.push_str(&l.name);
        } else {
            s.push_str(&l.path_text());
        }
    }
    s
}

/// The error of a disjunction none of whose disjuncts survived (upstream: "N errors in empty
/// disjunction", then each disjunct's error at its own path). A single failing disjunct is its
/// error, at its path; errors repeated by several disjuncts are listed once.
fn empty_disjunction(errs: Vec<(String, Arc<Bottom>)>, span: Span) -> Arc<Bottom> {
    let mut uniq: Vec<(String, Arc<Bottom>)> = Vec::new();
    for (p, e) in errs {
        if !uniq
            .iter()
            .any(|(q, f)| *q == p && f.msg == e.msg && f.span == e.span)
        {
            uniq.push((p, e));
        }
    }
    match uniq.len() {
        0 => Bottom::new(ErrorCode::Eval, "empty disjunction", span),
        1 if uniq[0].0.is_empty() => uniq.remove(0).1,
        n => {
            let code = if uniq.iter().all(|(_, e)| !e.code.is_fatal()) {
                ErrorCode::Incomplete
            } else {
                ErrorCode::Eval
            };
            let msg = if n == 1 {
                uniq[0].1.msg.clone()
            } else {
                format!("{n} errors in empty disjunction")
            };
            Arc::new(Bottom {
                code,
                msg,
                span: if n == 1 { uniq[0].1.span } else { span },
                related: Vec::new(),
                sub: uniq,
            })
        }
    }
}

/// Unary-operator helpers re-exported for the builtin module.
pub(crate) fn unary_bound(op: UnaryOp) -> Option<BoundOp> {
    Some(match op {
        UnaryOp::Lt => BoundOp::Lt,
        UnaryOp::Le => BoundOp::Le,
        UnaryOp::Gt => BoundOp::Gt,
        UnaryOp::Ge => BoundOp::Ge,
        UnaryOp::Ne => BoundOp::Ne,
        UnaryOp::Match => BoundOp::Match,
        UnaryOp::NotMatch => BoundOp::NotMatch,
        _ => return None,
    })
}
