//! Environments and conjuncts, and their identities.
//!
//! Rules:
//! - an environment is one level of lexical scope tied to the vertex it is evaluated in: a
//!   struct literal's scope, or bindings (comprehension keys and values, pattern labels, lazy
//!   `let` clauses); references resolve through the chain of `up` environments (`refs`);
//! - environments with the same shape (the same scope node or bindings, evaluated in the same
//!   vertex under an equivalent parent) resolve every reference alike, so they get one
//!   canonical identity (`Ev::canon`), the basis of idempotent conjuncts (design rule 1 of the
//!   module docs); an environment not made by `Ev::new_env` is only equal to itself;
//! - a conjunct is an expression in an environment with its closedness (the definition or
//!   `close()` it stems from, the group it records into when embedded, the enclosing
//!   definitions); its identity ([`ConjKey`]) is what its expression is plus its environment's
//!   canonical identity: two conjuncts with one key denote the same value in the same vertex.

use super::*;

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
    pub(super) up: Option<Arc<Env>>,
    /// The vertex the scope is evaluated in.
    pub(super) vertex: VId,
    /// The scope's content.
    pub(super) kind: EnvKind,
    /// A unique id (for caches).
    pub(super) id: u64,
    /// The canonical identity (see `Ev::canon`); `u64::MAX` for an environment that is only
    /// equal to itself.
    canon: u64,
}

/// A conjunct.
#[derive(Clone, Debug)]
pub struct Conj {
    /// The environment (None at the top of a package).
    pub(super) env: Option<Arc<Env>>,
    /// The expression.
    pub(super) expr: Expr,
    /// The closedness origin.
    pub(super) close: Option<u32>,
    /// The group struct literals record into when embedded.
    pub(super) embed: Option<u32>,
    /// Enclosing closedness origins (definitions this conjunct is part of); struct literals
    /// record their labels into these groups too.
    pub(super) outer: Option<Arc<[u32]>>,
}

impl Env {
    /// A struct scope over `vertex` (a package root) for an expression compiled outside any
    /// literal of it (`Runtime`'s expressions): not made by `Ev::new_env`, so equal only to
    /// itself.
    pub fn scope_of(vertex: VId) -> Arc<Env> {
        Arc::new(Env {
            up: None,
            vertex,
            kind: EnvKind::Struct(Arc::new(StructLit::default())),
            id: u64::MAX,
            canon: u64::MAX,
        })
    }
}

impl Conj {
    /// The conjunct `expr` in `env`, with no closedness of its own.
    pub fn new(env: Option<Arc<Env>>, expr: Expr) -> Conj {
        Conj {
            env,
            expr,
            close: None,
            embed: None,
            outer: None,
        }
    }

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

/// The identity of a conjunct: what its expression is (a struct or list literal by its node, a
/// vertex by its id, any other expression by its kind and source position) and the canonical
/// identity of its environment (see `Ev::canon`). Two conjuncts with one key denote the
/// same value in the same vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct ConjKey {
    /// The class of expression: 1 struct literal, 2 list literal, 3 vertex, 4 and up an
    /// expression identified by its source position (see `Ev::conj_key`).
    pub(super) class: u8,
    /// The literal's node, the vertex id, or the position's file and start offset.
    pub(super) node: u64,
    /// The position's end offset (0 for a literal or a vertex).
    pub(super) end: u64,
    /// The canonical identity of the conjunct's environment.
    pub(super) env: u64,
}

/// The canonical identity of an environment: what its scope holds (a struct literal node, or
/// its bindings), the vertex it is evaluated in and the canonical identity of its parent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum EnvShape {
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
pub(super) enum BindKey {
    Vertex(VId),
    Str(Arc<str>),
    Int(Arc<num_bigint::BigInt>),
    Bool(bool),
    Text(String),
    Lazy(u64, Span),
}

/// Environment ids and canonical identities (see `Ev::new_env`, `Ev::canon`).
#[derive(Default)]
pub(super) struct Envs {
    /// The id the last environment got (ids are never reused).
    pub(super) next_id: u64,
    /// Canonical identities by shape.
    pub(super) shapes: LogMap<EnvShape, u64>,
}

impl Ev {
    pub(super) fn new_env(&mut self, up: Option<Arc<Env>>, vertex: VId, kind: EnvKind) -> Arc<Env> {
        let bindings = match &kind {
            EnvKind::Bind(bs) => bs.len() as u64,
            EnvKind::Struct(_) => 0,
        };
        self.charge(cost::ENV + bindings * cost::BINDING);
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
    pub(super) fn canon(&self, e: &Arc<Env>) -> u64 {
        if e.canon == u64::MAX {
            e.id | (1 << 63)
        } else {
            e.canon
        }
    }

    /// The identity of conjunct `c` (None for literals atoms, which are cheap to take again,
    /// and for expressions without a source position).
    pub(super) fn conj_key(&self, c: &Conj) -> Option<ConjKey> {
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
}

pub(super) fn env_up(env: &Option<Arc<Env>>, up: u32) -> Option<&Arc<Env>> {
    let mut e = env.as_ref()?;
    for _ in 0..up {
        e = e.up.as_ref()?;
    }
    Some(e)
}
