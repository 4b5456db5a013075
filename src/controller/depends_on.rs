//! The `dependsOn` gate of both rendering kinds (issue 40; Flux's `dependsOn` with
//! `readyExpr`): one home for what ModuleInstance and ModulePackage share; each kind says how a
//! blocked reconcile ends ([`Dependent::blocked`]).
//!
//! Rules:
//! - Checked before anything is read or rendered (after the gates), only when `dependsOn` is
//!   not empty (an object without it costs no request). Each entry names an object of the same
//!   kind; an empty namespace is the dependent's own. Another namespace is allowed only where
//!   the kind allows it ([`Dependent::cross_namespace`]: a ModuleInstance with
//!   `--allow-cross-namespace-refs`, a ModulePackage never).
//! - Every `readyExpr` is compiled first (CEL, the `cel` crate); one that does not compile is
//!   [`Blocked::Invalid`].
//! - **Cycles**: the graph reachable from the dependent (each object read once, at most
//!   [`MAX_GRAPH`] objects) is searched for a path back to it; the shortest one found is
//!   [`Blocked::Cycle`], named `a -> b -> a`. A cycle that does not pass through the dependent
//!   blocks it through a dependency that never becomes ready instead.
//! - **Readiness**, in the order written, the first blocking entry wins: a missing dependency
//!   blocks (`(not found)`); without `readyExpr` a dependency is ready when Ready=True at its
//!   current generation (the condition's, else the status's observedGeneration, when recorded,
//!   equals `metadata.generation`: a dependency whose spec just changed is not ready until it is
//!   reconciled); with `readyExpr` it is ready when the expression (`dep`: the dependency,
//!   `self`: the dependent, both as JSON) is `true`. `false` blocks; an evaluation error (say
//!   `dep.status` absent yet) blocks with the error named; a non-boolean result is
//!   [`Blocked::Invalid`].
//! - A blocked dependent sets observedGeneration and registers as a waiter of its blocking
//!   dependency ([`super::waiters`]): the dependency's next status write, finalizer change or
//!   disappearance wakes it (its requeue stays the fallback).
//! - **Deletion in reverse order** ([`await_dependents`]): a deleting object whose dependents
//!   (objects of the kind naming it in `dependsOn`) are being deleted too waits until they are
//!   gone (or no longer hold their cleanup finalizer), so a dependency's objects outlive those of
//!   its dependents; Ready=Unknown `DependentsDeleting` naming them, requeued at
//!   `--requeue-dependency` and woken when one of them releases its finalizer. Dependents that
//!   are not being deleted do not hold a deletion up (they block on the missing dependency
//!   instead).

use std::collections::{HashMap, HashSet, VecDeque};

use crds::conditions::{self, reasons, types, HasConditions};
use crds::depends_on::DependsOn;
use crds::FINALIZER_CLEANUP;
use kube::api::ListParams;
use kube::ResourceExt;
use serde_json::Value;

use super::context::Context;
use super::reconcile::{End, Failure, Halt, Kind, Mark, Run};
use super::render_apply::{Rendered, RenderedStatus};
use super::runtime::Error;
use super::waiters;

/// The event action of a blocked reconcile.
pub const ACTION: &str = "DependsOn";
/// The most objects read while looking for a cycle.
pub const MAX_GRAPH: usize = 64;

/// An object (namespace, name).
type Node = (String, String);

/// Why a dependent may not proceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// The first dependency not ready: `ns/name` and why (`None`: not Ready).
    NotReady {
        /// `ns/name`.
        dependency: String,
        /// `(not found)`, `(readyExpr is false)`, `(readyExpr: <error>)`.
        why: Option<String>,
    },
    /// An entry names another namespace where the kind does not allow it.
    CrossNamespace {
        /// The namespace named.
        namespace: String,
        /// The dependency's name.
        name: String,
    },
    /// The entries lead back to the dependent: the cycle, `a -> b -> a`.
    Cycle(String),
    /// An entry cannot be judged (a `readyExpr` that does not compile or is not a boolean).
    Invalid(String),
}

impl Blocked {
    /// `waiting for dependency ns/name[ (why)]` for [`Blocked::NotReady`].
    pub fn waiting_message(dependency: &str, why: Option<&str>) -> String {
        match why {
            Some(w) => format!("waiting for dependency {dependency} {w}"),
            None => format!("waiting for dependency {dependency}"),
        }
    }
}

/// A kind with `dependsOn` (module rules).
pub trait Dependent: Rendered {
    /// The object's `dependsOn`.
    fn depends_on(&self) -> &[DependsOn];
    /// Whether an entry may name another namespace.
    fn cross_namespace(ctx: &Context) -> bool;
    /// How a blocked reconcile of this kind ends.
    fn blocked(run: &Run<'_, Self>, blocked: Blocked) -> Failure;
}

/// The namespace of an entry (empty: `own`).
fn namespace_of<'a>(d: &'a DependsOn, own: &'a str) -> &'a str {
    d.namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(own)
}

/// Reads objects of `K` once each.
struct Graph<'c, K: Kind> {
    client: &'c kube::Client,
    read: HashMap<Node, Option<K>>,
}

impl<K: Kind> Graph<'_, K> {
    async fn get(&mut self, node: &Node) -> Result<Option<&K>, Error> {
        if !self.read.contains_key(node) {
            let got = K::api(self.client.clone(), &node.0)
                .get_opt(&node.1)
                .await
                .map_err(|e| {
                    Error::kube(
                        format!("reading dependency {} {}/{}", K::KIND, node.0, node.1),
                        e,
                    )
                })?;
            self.read.insert(node.clone(), got);
        }
        Ok(self.read.get(node).and_then(Option::as_ref))
    }
}

/// The gate (module rules): `Err` when blocked.
pub async fn gate<K: Dependent>(run: &mut Run<'_, K>) -> Result<(), Halt> {
    if run.obj.depends_on().is_empty() {
        return Ok(());
    }
    let Some(blocked) = check(run).await? else {
        return Ok(());
    };
    if let Blocked::NotReady { dependency, .. } = &blocked {
        if let Some((ns, name)) = dependency.split_once('/') {
            run.ctx.waiters.wait(
                waiters::key(K::KIND, ns, name),
                waiters::key(K::KIND, &run.namespace, &run.name),
            );
        }
    }
    let generation = run.generation();
    *run.status().observed_generation_mut() = generation;
    Err(K::blocked(run, blocked).into())
}

/// What blocks the dependent, if anything (module rules).
pub async fn check<K: Dependent>(run: &Run<'_, K>) -> Result<Option<Blocked>, Error> {
    let own = run.namespace.clone();
    let entries = run.obj.depends_on().to_vec();
    let mut programs = Vec::with_capacity(entries.len());
    for d in &entries {
        let ns = namespace_of(d, &own);
        if ns != own && !K::cross_namespace(run.ctx) {
            return Ok(Some(Blocked::CrossNamespace {
                namespace: ns.to_owned(),
                name: d.name.clone(),
            }));
        }
        let program = match d.ready_expr.as_deref().filter(|e| !e.trim().is_empty()) {
            None => None,
            Some(expr) => match cel::Program::compile(expr) {
                Ok(p) => Some(p),
                Err(e) => {
                    return Ok(Some(Blocked::Invalid(format!(
                        "dependency {ns}/{}: readyExpr does not compile: {e}",
                        d.name
                    ))))
                }
            },
        };
        programs.push(program);
    }
    let mut graph = Graph::<K> {
        client: &run.ctx.client,
        read: HashMap::new(),
    };
    if let Some(cycle) = find_cycle(run, &mut graph).await? {
        return Ok(Some(Blocked::Cycle(cycle)));
    }
    let me = serde_json::to_value(&run.obj).unwrap_or(Value::Null);
    for (d, program) in entries.iter().zip(programs) {
        let node = (namespace_of(d, &own).to_owned(), d.name.clone());
        let dependency = format!("{}/{}", node.0, node.1);
        let Some(dep) = graph.get(&node).await? else {
            return Ok(Some(Blocked::NotReady {
                dependency,
                why: Some("(not found)".to_owned()),
            }));
        };
        let why = match program {
            None => (!ready(dep)).then_some(None),
            Some(p) => {
                let dep = serde_json::to_value(dep).unwrap_or(Value::Null);
                match evaluate(&p, &dep, &me) {
                    Ok(true) => None,
                    Ok(false) => Some(Some("(readyExpr is false)".to_owned())),
                    Err(Evaluation::NotBoolean(t)) => {
                        return Ok(Some(Blocked::Invalid(format!(
                            "dependency {dependency}: readyExpr is a {t}, not a boolean"
                        ))))
                    }
                    Err(Evaluation::Failed(e)) => Some(Some(format!("(readyExpr: {e})"))),
                }
            }
        };
        if let Some(why) = why {
            return Ok(Some(Blocked::NotReady { dependency, why }));
        }
    }
    Ok(None)
}

/// Ready=True at the object's current generation (module rules).
pub fn ready<K: Rendered>(dep: &K) -> bool {
    let Some(status) = dep.status_of() else {
        return false;
    };
    let Some(c) = conditions::get(status.conditions(), types::READY) else {
        return false;
    };
    let observed = c.observed_generation.or(status.observed_generation());
    c.status == "True" && observed.is_none_or(|g| Some(g) == dep.meta().generation)
}

/// Why a `readyExpr` gave no boolean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluation {
    /// It evaluated to another type (named).
    NotBoolean(String),
    /// It failed (the error).
    Failed(String),
}

/// Evaluates `program` with `dep` and `self` bound.
pub fn evaluate(program: &cel::Program, dep: &Value, me: &Value) -> Result<bool, Evaluation> {
    let mut ctx = cel::Context::default();
    let bind = |v: &Value| cel::to_value(v).map_err(|e| Evaluation::Failed(e.to_string()));
    ctx.add_variable_from_value("dep", bind(dep)?);
    ctx.add_variable_from_value("self", bind(me)?);
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(Evaluation::NotBoolean(
            format!("{:?}", other.type_of())
                .to_lowercase()
                .trim_matches('"')
                .to_owned(),
        )),
        Err(e) => Err(Evaluation::Failed(e.to_string())),
    }
}

/// The shortest cycle through the dependent, if any (module rules).
async fn find_cycle<K: Dependent>(
    run: &Run<'_, K>,
    graph: &mut Graph<'_, K>,
) -> Result<Option<String>, Error> {
    let me: Node = (run.namespace.clone(), run.name.clone());
    let mut parent: HashMap<Node, Node> = HashMap::new();
    let mut seen: HashSet<Node> = HashSet::from([me.clone()]);
    let mut queue: VecDeque<Node> = VecDeque::new();
    let edges = |obj: &K, own: &str| -> Vec<Node> {
        obj.depends_on()
            .iter()
            .map(|d| (namespace_of(d, own).to_owned(), d.name.clone()))
            .collect()
    };
    for n in edges(&run.obj, &me.0) {
        if n == me {
            return Ok(Some(format!("{}/{} -> {}/{}", me.0, me.1, me.0, me.1)));
        }
        if seen.insert(n.clone()) {
            parent.insert(n.clone(), me.clone());
            queue.push_back(n);
        }
    }
    while let Some(n) = queue.pop_front() {
        if graph.read.len() >= MAX_GRAPH {
            break;
        }
        let Some(obj) = graph.get(&n).await? else {
            continue;
        };
        for next in edges(obj, &n.0) {
            if next == me {
                let mut path = vec![n.clone()];
                let mut at = &n;
                while let Some(p) = parent.get(at) {
                    path.push(p.clone());
                    at = p;
                }
                path.reverse();
                path.push(me.clone());
                let names: Vec<String> = path.iter().map(|(a, b)| format!("{a}/{b}")).collect();
                return Ok(Some(names.join(" -> ")));
            }
            if seen.insert(next.clone()) {
                parent.insert(next.clone(), n.clone());
                queue.push_back(next);
            }
        }
    }
    Ok(None)
}

/// Deletion in reverse order (module rules): `Err` while dependents being deleted remain.
pub async fn await_dependents<K: Dependent>(run: &mut Run<'_, K>) -> Result<(), Halt> {
    if !run.deleting() || !run.has_finalizer(FINALIZER_CLEANUP) {
        return Ok(());
    }
    let own = run.namespace.clone();
    let api = if K::cross_namespace(run.ctx) {
        kube::Api::<K>::all(run.ctx.client.clone())
    } else {
        K::api(run.ctx.client.clone(), &own)
    };
    let all = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube(format!("listing the dependents of {}/{}", own, run.name), e))?;
    let mut deleting = Vec::new();
    for o in all.items {
        let ns = o.namespace().unwrap_or_default();
        let names_me = o
            .depends_on()
            .iter()
            .any(|d| namespace_of(d, &ns) == own && d.name == run.name);
        let held = o.meta().deletion_timestamp.is_some()
            && o.finalizers().iter().any(|f| f == FINALIZER_CLEANUP);
        if names_me && held {
            run.ctx.waiters.wait(
                waiters::key(K::KIND, &ns, &o.name_any()),
                waiters::key(K::KIND, &own, &run.name),
            );
            deleting.push(format!("{ns}/{}", o.name_any()));
        }
    }
    if deleting.is_empty() {
        return Ok(());
    }
    deleting.sort();
    let message = format!(
        "waiting for dependents being deleted first: {}",
        deleting.join(", ")
    );
    Err(
        End::marked(Mark::Progressing(reasons::DEPENDENTS_DELETING, message))
            .after(Some(run.ctx.gitops.requeue_dependency))
            .into(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    #[test]
    fn ready_expr_sees_dep_and_self_and_must_be_boolean() {
        let dep = json!({"metadata": {"name": "db", "generation": 2},
                         "status": {"observedGeneration": 2, "phase": "up"}});
        let me = json!({"metadata": {"name": "web"}});
        let p = |e: &str| cel::Program::compile(e).unwrap();
        assert_eq!(
            evaluate(
                &p("dep.metadata.generation == dep.status.observedGeneration"),
                &dep,
                &me
            ),
            Ok(true)
        );
        assert_eq!(
            evaluate(&p("dep.status.phase == 'down'"), &dep, &me),
            Ok(false)
        );
        assert_eq!(
            evaluate(&p("self.metadata.name == 'web'"), &dep, &me),
            Ok(true)
        );
        assert!(matches!(
            evaluate(&p("dep.status.phase"), &dep, &me),
            Err(Evaluation::NotBoolean(_))
        ));
        assert!(matches!(
            evaluate(&p("dep.status.missing == 1"), &dep, &me),
            Err(Evaluation::Failed(_))
        ));
        assert!(cel::Program::compile("dep.status ==").is_err());
    }

    #[test]
    fn ready_means_ready_at_the_current_generation() {
        use crds::module_instance::ModuleInstance;
        let mut mi = ModuleInstance::new("db", Default::default());
        mi.metadata.generation = Some(3);
        assert!(!ready(&mi), "no status");
        let cond =
            |gen: Option<i64>| crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "ReconciliationSucceeded".into(),
                message: String::new(),
                observed_generation: gen,
                last_transition_time: crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    crds::k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            };
        mi.status = Some(Default::default());
        mi.status.as_mut().unwrap().conditions = vec![cond(Some(3))];
        assert!(ready(&mi));
        mi.status.as_mut().unwrap().conditions = vec![cond(Some(2))];
        assert!(!ready(&mi), "the spec changed since");
        mi.status.as_mut().unwrap().conditions = vec![cond(None)];
        assert!(ready(&mi), "no generation recorded: taken at its word");
    }
}
