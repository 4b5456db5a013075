//! Where vertices live and are allocated: the chunked arena, and throw-away evaluations.
//!
//! Rules:
//! - every vertex is allocated here (`Ev::new_vertex`, `Ev::anon`, `Ev::push_vertex`), in
//!   chunks of a fixed size, so growing the arena never copies it;
//! - a throw-away evaluation ([`Ev::mark`], [`Ev::rollback`]) is dropped again if it changed no
//!   vertex built before its mark: the arena records the lowest older vertex borrowed mutably,
//!   and the caches that name vertices are append-only logs truncated to their length at the
//!   mark; an evaluation that changed an older vertex, or left work under way that was not
//!   under way at its mark, is kept whole;
//! - throw-away evaluations nest (a schema check of `matchN` inside the expansion of a vertex,
//!   inside the export of a pair output): the innermost is watched, and when it ends the
//!   lowest vertex it touched counts for the enclosing one, which is watched again. One begun
//!   while vertices are being expanded may be dropped: it leaves the work under way as it
//!   found it (the same vertices being expanded, decided, copied; no vertex marked to be
//!   evaluated again), and nothing it built is reachable from an unchanged older vertex.

use super::*;

/// The state [`Ev::rollback`] returns to: the arena's and the caches' lengths when
/// [`Ev::mark`] was called.
#[derive(Debug)]
pub struct Mark {
    pub(super) vertices: usize,
    /// Bytes charged to the memory budget at the mark (given back by a rollback).
    pub(super) memory: u64,
    pub(super) lets: usize,
    pub(super) filters: usize,
    pub(super) calls: usize,
    pub(super) shapes: usize,
    pub(super) packages: usize,
    /// The lengths of the work under way (`Active`) at the mark: it must be as it was.
    pub(super) active: [usize; 8],
    /// The enclosing throw-away evaluation's watch and lowest touched vertex, restored when
    /// this one ends.
    pub(super) outer_watch: usize,
    pub(super) outer_touched: usize,
}

/// Vertices per chunk of [`Arena`].
const ARENA_CHUNK: usize = 1024;

/// The vertex arena: fixed-size chunks, so growing it never copies (a `Vec` of a quarter
/// million vertices held the old and the new buffer at once while doubling: a measured part
/// of the render's peak memory). Indexed like a slice by `VId as usize`.
///
/// While a [`Mark`] is out (see [`Ev::mark`]), the lowest vertex older than the innermost
/// mark that was borrowed mutably is recorded: only an evaluation that changed no older vertex
/// can be rolled back.
pub struct Arena {
    pub(super) chunks: Vec<Vec<Vertex>>,
    pub(super) len: usize,
    /// Vertices below this index are watched for changes (0: nothing is).
    watch: usize,
    /// The lowest watched vertex borrowed mutably since the watch began (`usize::MAX`: none).
    touched: usize,
}

impl Default for Arena {
    fn default() -> Arena {
        Arena {
            chunks: Vec::new(),
            len: 0,
            watch: 0,
            touched: usize::MAX,
        }
    }
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
    pub(super) fn truncate(&mut self, n: usize) {
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
        if i < self.watch && i < self.touched {
            self.touched = i;
        }
        &mut self.chunks[i / ARENA_CHUNK][i % ARENA_CHUNK]
    }
}

impl Ev {
    /// Starts a throw-away evaluation (see [`Ev::rollback`]), inside the one already out if
    /// any. Every mark must be ended by [`Ev::rollback`], innermost first.
    pub fn mark(&mut self) -> Mark {
        let m = Mark {
            vertices: self.vs.len(),
            memory: self.budget.memory,
            lets: self.caches.lets.len(),
            filters: self.caches.filters.len(),
            calls: self.caches.call_lists.len(),
            shapes: self.envs.shapes.len(),
            packages: self.packages.len(),
            active: self.active.lens(),
            outer_watch: self.vs.watch,
            outer_touched: self.vs.touched,
        };
        self.vs.watch = self.vs.len();
        self.vs.touched = usize::MAX;
        m
    }

    /// Ends the evaluation begun by `m`: if it changed no vertex older than `m`, everything
    /// it built is dropped (the vertices from `m` on and the cache entries made since) and
    /// `true` is returned; else everything is kept, as if no mark had been taken. Sound
    /// because the evaluator only refers to a vertex from a vertex, an environment or one of
    /// these caches: a vertex older than the mark that no one changed cannot refer to a newer
    /// one, environments made since are reachable only from the dropped vertices (an older
    /// vertex would have had to change to hold one), and the caches are append-only, so
    /// truncating them to their length at the mark drops exactly the newer entries. The work
    /// under way must be as it was at the mark: what is being expanded, probed, copied or
    /// decided then is older than the mark, and a vertex marked for re-evaluation since would
    /// name a dropped reader. Ids that are never reused (environment and closedness ids) just
    /// go on counting.
    pub fn rollback(&mut self, m: Mark) -> bool {
        let touched = self.vs.touched;
        // Early reads noted since the mark by vertices it drops go with them (see
        // `Ev::note_early_read`); one by an older vertex means that vertex was being expanded.
        let early = m.active[7];
        let early_dropped = self
            .active
            .early_reads
            .get(early..)
            .is_some_and(|rs| rs.iter().all(|r| r.reader as usize >= m.vertices));
        let lens = self.active.lens();
        let clean = touched >= m.vertices
            && self.budget.limit_err.is_none()
            && self.vs.watch == m.vertices
            && self.packages.len() == m.packages
            && lens[..7] == m.active[..7]
            && early_dropped;
        // The enclosing evaluation is watched again; what this one touched counts for it.
        self.vs.watch = m.outer_watch;
        self.vs.touched = if clean {
            m.outer_touched
        } else {
            m.outer_touched.min(touched)
        };
        if !clean {
            self.stats.kept += 1;
            return false;
        }
        self.stats.rolled_back += 1;
        self.active.early_reads.truncate(early);
        self.vs.truncate(m.vertices);
        self.budget.memory = m.memory;
        self.caches.lets.truncate(m.lets);
        self.caches.filters.truncate(m.filters);
        self.caches.call_lists.truncate(m.calls);
        self.envs.shapes.truncate(m.shapes);
        if !self.stuck_comprehensions.is_empty() {
            let n = m.vertices as VId;
            self.stuck_comprehensions.retain(|v, _| *v < n);
        }
        if !self.frozen_fields.is_empty() {
            let n = m.vertices as VId;
            self.frozen_fields.retain(|v, _| *v < n);
        }
        true
    }

    /// A new vertex.
    pub fn new_vertex(&mut self, parent: Option<VId>, label: Label) -> VId {
        self.push_vertex(Vertex::new(parent, label))
    }

    /// Adds vertex `x` to the arena: every vertex is allocated here, and charged (a clone
    /// with its conjuncts).
    pub(super) fn push_vertex(&mut self, x: Vertex) -> VId {
        let extra = x.conjuncts.len().saturating_sub(1) as u64;
        self.charge(cost::VERTEX + extra * cost::CONJ);
        let id = self.vs.len() as VId;
        self.vs.push(x);
        id
    }

    /// A new anonymous vertex holding one conjunct.
    pub fn anon(&mut self, env: Option<Arc<Env>>, expr: Expr) -> VId {
        let v = self.new_vertex(None, Label::internal("_anon"));
        let x = self.vm(v);
        x.span = expr.span();
        x.conjuncts.push(Conj::new(env, expr));
        v
    }

    /// Vertex `v`, to read (see the read API of [`Vertex`]).
    pub(crate) fn vertex(&self, v: VId) -> &Vertex {
        self.vx(v)
    }

    /// Vertex `v` if there is one (a vertex id from outside the evaluator).
    pub(crate) fn get_vertex(&self, v: VId) -> Option<&Vertex> {
        self.vs.get(v as usize)
    }

    /// The number of vertices alive.
    pub(crate) fn vertex_count(&self) -> usize {
        self.vs.len()
    }

    pub(super) fn vx(&self, v: VId) -> &Vertex {
        &self.vs[v as usize]
    }
    pub(super) fn vm(&mut self, v: VId) -> &mut Vertex {
        &mut self.vs[v as usize]
    }

    /// Adds a conjunct to a vertex; a vertex already evaluated is re-evaluated on next use.
    pub fn add_conj(&mut self, v: VId, c: Conj) {
        // The first conjunct is charged with its vertex.
        if !self.vx(v).conjuncts.is_empty() {
            self.charge(cost::CONJ);
        }
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
            self.dirty_early_readers(v);
        }
    }

    /// The path of labels from the root to `v`.
    pub fn path(&self, v: VId) -> Vec<Label> {
        let mut out = Vec::new();
        let mut cur = Some(v);
        let mut guard = 0;
        while let Some(c) = cur {
            let x = self.vx(c);
            if x.parent().is_none() {
                break;
            }
            out.push(x.label().clone());
            cur = x.parent();
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
}
