//! The evaluator (upstream `internal/core/adt`: `sched.go`, `unify.go`, `closed.go`,
//! `disjunct.go`, `default.go`, `cycle.go`, `comprehension.go`, `share.go`).
//!
//! # How an evaluation runs
//!
//! The compiler (`compile`) hands over expressions whose identifiers are already resolved
//! lexically (so many scopes up, that field). The evaluator builds from them a graph of
//! *vertices* (`vertex.rs`): one per field, list element or anonymous value, all in one arena
//! (`arena.rs`), named by a [`VId`]. A vertex holds *conjuncts*: an expression, the
//! environment it is evaluated in, and the closedness it carries (`env.rs`). A package root is
//! a vertex with one conjunct per file. Nothing is evaluated before it is asked for: the API
//! (`value`, `runtime`) calls [`Ev::eval`] on a vertex, reads it through the vertex's read
//! API, and asks for its children in turn. Evaluating a vertex never evaluates its children;
//! it gives them conjuncts.
//!
//! [`Ev::eval`] (`sched.rs`) checks the budget (`budget.rs`: steps, depth, time, stack) and
//! expands the vertex, once, in these phases:
//!
//! 1. **Start over** (`sched.rs`): what a previous evaluation built is dropped; only a
//!    refusal by a closed struct and a disjunct's choice survive.
//! 2. **Share** (`share.rs`): a vertex whose only conjunct references an evaluated struct
//!    takes that struct's value, with lazy proxy arcs, and is done.
//! 3. **Take in the conjuncts** (`unify.rs`): repeated literals are merged, then each conjunct
//!    is processed, unless one identical to it was; by expression family:
//!    - an atom (a literal, or what an operator, call or interpolation evaluates to: `expr.rs`,
//!      `ops.rs`, `builtin.rs`) joins the vertex's value (`atoms.rs`);
//!    - a struct literal (`structs.rs`) opens a scope of its own, gives each field an arc with
//!      the field's value as that arc's conjunct, records its labels into the closedness
//!      groups its conjunct carries (`closedness.rs`; the ids in `ids.rs`), applies its
//!      patterns, and processes its embeddings into the vertex; a list literal does the same
//!      with index arcs (`lists.rs`);
//!    - a reference (`refs.rs`) names a vertex, evaluated first: its atoms are taken or, for
//!      a struct or list, its conjuncts are copied in and processed here under the referring
//!      conjunct's closedness (`inline.rs`);
//!    - a disjunction waits for phase 6, unless the vertex is a disjunct that chose already.
//! 4. **Late work** (`sched.rs`): embedded references are taken again now that every conjunct
//!    is in, fields embedded into their own ancestor grow to a fixed point (`inline.rs`), copies
//!    held back as possible structural cycles are decided (`cycle.rs`), then dynamic fields
//!    (`structs.rs`) and comprehensions (`comprehension.rs`) run, round after round, until
//!    none adds anything.
//! 5. **Finish** (`finish.rs`): list lengths and tails, closedness (each regular arc must be
//!    allowed by every closing group), and the value's checks (kinds against what it holds,
//!    bounds and validators against its scalar).
//! 6. **Disjunctions** (`disjunct.rs`): the vertex is cloned once per alternative, one
//!    disjunction per level; failing clones are dropped and equal ones merged; the vertex then
//!    redirects to the one survivor, or holds the survivors with their defaults.
//! 7. **Done** (`sched.rs`): what only the expansion needed is freed, and the vertices that read
//!    this one while it was unfinished (a reference cycle) are marked to be evaluated again.
//!
//! Results are read out by `readout.rs` (`to_data`: regular fields in order, defaults taken,
//! each child evaluated on the way and every error collected with its path; the deep error
//! checks; fingerprints for merging disjuncts) and `print.rs` (CUE text). An evaluation whose
//! result is only read out is rolled back afterwards (`arena.rs`, design rule 6 below).
//!
//! The state of [`Ev`] is grouped by concern: the arena, the budget, environment identities
//! (`env.rs`), closedness ids (`ids.rs`), the caches a rollback truncates, and the work under
//! way (vertices being expanded, probed for sharing, copied, decided as disjuncts), which
//! cycle detection reads. A [`Vertex`] holds its conjuncts, its arcs, its value so far
//! ([`VertexValue`]) and how its disjunctions were decided ([`DisjState`]); what only an
//! expansion needs lives in a box freed when it is done.
//!
//! Where memory is allocated: every vertex in `Ev::push_vertex` (`arena.rs`: fields,
//! anonymous values, disjunct clones, sharing proxies), every arc in `Ev::insert_arc`
//! (`structs.rs`), every environment in `Ev::new_env` (`env.rs`), conjuncts where a vertex
//! receives one (`Ev::add_conj`, and the copies `inline.rs` processes); new strings, bytes and
//! lists of values in the operators (`ops.rs`, interpolation in `expr.rs`) and the builtins
//! (`builtin.rs` and `crate::builtins`); lists of data in `readout.rs`.
//!
//! # Rules
//!
//! Rules implemented (CUE spec: "Unification", "Disjunction", "Default values", "Closed
//! structs", "Embedding", "Definitions", "Field constraints"):
//! - A vertex is a node of the value graph holding conjuncts (expression + environment). Adding a
//!   struct literal to a vertex creates an environment whose vertex is *that* vertex, so references
//!   inside the literal bind to the unified node. A reference to a struct vertex
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
//! - Limits (`Config`): steps, depth, wall time and memory are checked on every expansion;
//!   memory is also charged and checked where it is allocated (`budget.rs`); exceeding one
//!   makes every further result a fatal error.
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
//!    42.6 k vertices alive at the end; peak RSS 108 -> 76 MiB.) Throw-away evaluations nest,
//!    and one may run inside an expansion: each schema check of `matchN`/`matchIf` unifies
//!    the schema with a snapshot of the value in vertices of its own and keeps only the
//!    answer; the older vertices it reads (the schemas, the value down its regular fields) are
//!    evaluated before its mark so that it changes none of them. (The catalog's
//!    `#VolumeSchema` checks nine schemas per copy of each volume: on the 20-component
//!    real-shaped module 19.5 k checks dropped, 91 kept; 775 k -> 102 k vertices alive at the
//!    end; the CUE harness's peak RSS 620 -> 179 MB.)
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
//! 9. **Marked literals taken incrementally; a cheap dedup test** (`Ev::only_new_outer`,
//!    `SeenConj::outer_bloom`): item 1's incremental rule also holds for a literal whose
//!    outer ids hold embedding marks, when they are the marks of the earlier arrival (kept,
//!    in order, in the new ids: `literal_groups` reads the whole id set only for its marks).
//!    The core's `spec!: (strings.ToCamel(metadata.#definitionName)): _` reaches a
//!    component's `spec` through every resource, trait and blueprint that embeds it, each
//!    time under other outer ids; before, each arrival was expanded in full and recorded,
//!    and every later arrival compared with hundreds of records. A 128-bit Bloom filter of
//!    each record's ids (two hashed bits per id) rules most records out without comparing
//!    ids, and a schema check walks the unified value once (`Ev::error_or_required_deep`:
//!    the strict walk's verdict follows from the non-strict one's). (The 20-component
//!    harness: 1.71 M -> 0.56 M processed conjuncts, 446 k -> 196 k environments, 19.5 k ->
//!    7.2 k schema checks, 2.4 s -> 0.5 s, 179 -> 104 MB; the real fleet's harnesses 4-15x
//!    faster in about half the memory, every output unchanged.)
//!
//! Together: web_app render 0.26 s CPU / 58 MB; the generated benchmark
//! (`cargo bench -p cue --bench components`) grows linearly from 10 to 129 components. On the
//! render kernel's 129-component module, processing repeated literals for their new outer ids
//! saves a fifth of the conjuncts (`CUE_EVAL_STATS=1`, one render: 567 k → 462 k processed,
//! 59 k of them incrementally; 145 k → 118 k environments; 84 k vertices either way; peak RSS
//! 217 → 196 MiB). What is not done yet: a literal arriving with other embedding marks than
//! an earlier arrival is still expanded again (the marks are fresh per expansion of an
//! embedding literal, so its embedded fragments never match an earlier expansion of that
//! literal), and a vertex with a second conjunct still copies the referenced value instead of
//! sharing it and evaluating only the difference.

mod arena;
mod atoms;
mod budget;
mod builtin;
mod closedness;
mod comprehension;
mod cycle;
mod disjunct;
mod env;
mod expr;
mod finish;
mod groups;
mod hash;
mod ids;
mod inline;
mod lists;
pub(crate) mod ops;
pub(crate) mod print;
mod re2;
mod readout;
mod refs;
mod sched;
mod share;
mod structs;
mod unify;
mod vertex;

use crate::adt::*;
use crate::ast::{BinaryOp, FieldConstraint};
use crate::data::Val as BVal;
use crate::source::Span;
use crate::textmap::TextMap;
use indexmap::IndexMap;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arena::*;
use atoms::*;
pub use budget::Config;
use budget::*;

use comprehension::*;
use cycle::*;
use disjunct::*;
use env::*;
pub use env::{Conj, Env};
use groups::*;
use hash::*;
use ids::*;
use inline::*;
use lists::*;
pub use readout::{data_to_expr, MAX_ERRORS};
use refs::*;
use sched::*;
use structs::*;
use unify::*;
use vertex::*;

/// The evaluator: the vertices, the limits and what they are measured against, and the
/// state of each concern, grouped by concern (see the module docs for how an evaluation runs).
pub struct Ev {
    /// All vertices.
    vs: Arena,
    /// Limits.
    pub config: Config,
    /// What the limits are measured against, and the errors raised when one is exceeded.
    budget: Budget,
    /// Environment ids and canonical identities.
    envs: Envs,
    /// Closedness ids: their classes, the embedding marks, and the positions groups name.
    closed: ClosedIds,
    /// Results computed once per key (append-only, truncated by a rollback).
    caches: Caches,
    /// The work under way, innermost last: what is expanded, probed, copied or decided now.
    active: Active,
    /// Loaded non-std packages by import path (without version/qualifier).
    packages: TextMap<String, VId>,
    /// Vertices a comprehension of which stayed incomplete (its guard or source never became
    /// concrete): they yield nothing, and their export fails (`comprehension`). Filled only on
    /// that failure path.
    stuck_comprehensions: FastMap<VId, ()>,
    /// Vertices a `for` clause of their own ranges over while they are expanded, with how many
    /// arcs they had then: a comprehension may not add a field to that set (`comprehension`).
    frozen_fields: FastMap<VId, usize>,
    /// Set by a validator check whose failure is not final (`matchN` over schemas the value
    /// may still match once its missing required fields are set): the failure is incomplete.
    validator_incomplete: bool,
    /// Buffers reused across calls (taken while in use, so a nested call starts empty).
    bufs: Bufs,
    /// Sources of the hidden values and definitions one walk of `Ev::collect_fatal_hidden` has
    /// found free of errors (see there); emptied when a walk starts and ends.
    hidden_clean: HashSet<Vec<VId>>,
    /// How often that walk stopped short (depth, stack, error count): a value walked while it
    /// did is not recorded as clean.
    hidden_cuts: u64,
    /// Work counters (printed to stderr when the evaluator is dropped and `CUE_EVAL_STATS` is
    /// set): where evaluation time goes on a real workload.
    pub stats: Stats,
}

/// Buffers reused across calls instead of allocated per call (`Ev::check_closed` runs for
/// every struct that is finished).
#[derive(Default)]
struct Bufs {
    /// The members of the closing groups, one range per group.
    members: Vec<usize>,
    /// The ranges of `members`.
    closing: Vec<(usize, usize)>,
    /// The patterns of the closing groups that refuse a label (`Ev::refuse_unclosed`).
    patterns: Vec<VId>,
    /// The fingerprints of the states or survivors being merged (`Ev::merge_states`,
    /// `Ev::decide_disjunctions`), one after the other.
    keys: String,
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
    regexes: TextMap<String, Result<Arc<regex::Regex>, String>>,
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
    /// Vertices that read a field of a struct still being expanded (see `Ev::note_early_read`).
    early_reads: Vec<EarlyRead>,
}

impl Active {
    /// The length of each list of work under way (a throw-away evaluation must leave them so).
    fn lens(&self) -> [usize; 8] {
        [
            self.expanding.len(),
            self.sharing_probes.len(),
            self.probe_expanded.len(),
            self.let_resolving.len(),
            self.disjuncts.len(),
            self.copying.len(),
            self.tainted.len(),
            self.early_reads.len(),
        ]
    }
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
    /// Comprehensions run again after another of the same vertex yielded
    /// (`Ev::run_comprehensions`).
    pub comp_reruns: u64,
    /// Hidden values and definitions not walked again for errors, as a value made of the same
    /// definitions was walked clean (`Ev::collect_fatal_hidden`).
    pub hidden_reused: u64,
    /// Throw-away evaluations kept, as they changed an older vertex.
    pub kept: u64,
}

impl Drop for Ev {
    fn drop(&mut self) {
        if std::env::var_os("CUE_EVAL_STATS").is_some() {
            eprintln!(
                "eval stats: vertices={} envs={} memory={} {:?}",
                self.vertex_count(),
                self.envs.next_id,
                self.budget.memory,
                self.stats
            );
        }
    }
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
                memory: 0,
                memory_exceeded: None,
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
            packages: TextMap::default(),
            stuck_comprehensions: FastMap::default(),
            frozen_fields: FastMap::default(),
            bufs: Bufs::default(),
            hidden_clean: HashSet::new(),
            hidden_cuts: 0,
            validator_incomplete: false,
            stats: Stats::default(),
        }
    }
}
