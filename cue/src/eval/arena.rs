//! Where vertices live and are allocated: the chunked arena, and throw-away evaluations.
//!
//! Rules:
//! - every vertex is allocated here (`Ev::new_vertex`, `Ev::anon`, `Ev::push_vertex`), in
//!   chunks of a fixed size, so growing the arena never copies it;
//! - a throw-away evaluation ([`Ev::mark`], [`Ev::rollback`]) is dropped again if it changed no
//!   vertex built before its mark: the arena records any mutable borrow of an older vertex, and
//!   the caches that name vertices are append-only logs truncated to their length at the mark;
//!   an evaluation that changed an older vertex, or left work under way, is kept whole.

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
    pub(super) tainted: usize,
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
    pub(super) chunks: Vec<Vec<Vertex>>,
    pub(super) len: usize,
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
        if i < self.watch {
            self.touched = true;
        }
        &mut self.chunks[i / ARENA_CHUNK][i % ARENA_CHUNK]
    }
}

impl Ev {
    /// Starts a throw-away evaluation (see [`Ev::rollback`]); `None` while another is out.
    pub fn mark(&mut self) -> Option<Mark> {
        if self.vs.watch != 0 {
            return None;
        }
        self.vs.watch = self.vs.len();
        self.vs.touched = false;
        Some(Mark {
            vertices: self.vs.len(),
            memory: self.budget.memory,
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
        self.budget.memory = m.memory;
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
