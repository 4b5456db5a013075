//! Workload health triggers: an instance's Ready follows its workloads after the apply too
//! (issue 29's follow-up; kstatus as in Flux's health checks, event-driven as Argo CD's resource
//! tracking). Without them a ModuleInstance, which has no periodic reconcile (docs/design/operator.md §2.2),
//! would stay Ready=True while a Deployment it applied crash-loops an hour later.
//!
//! Rules:
//! - The controllers of the kinds that render (ModuleInstance, ModulePackage) watch, cluster-wide,
//!   the Deployments, StatefulSets and DaemonSets carrying the instance uuid label (every object the
//!   operator applies carries it; the API server filters, so only ours are sent).
//! - Each object's kstatus class (Current, in progress, Failed: [`crate::apply::health::assess`])
//!   is remembered by uid with its generation. An observation enqueues the instance its
//!   `module-instance.opmodel.dev/{namespace,name}` labels name when, **at the same
//!   generation**, the object leaves `Current` (it degraded) or leaves `Failed` (it recovers, or
//!   rolls again), and when the object is deleted (or vanished while the watch was re-listing).
//!   Nothing is enqueued on the first sight of an object (the reconcile that applied it follows
//!   its health already), on a generation change (a spec write: the reconcile that wrote it
//!   follows the rollout; anyone else's write is drift, seen at the next reconcile), nor when an
//!   object leaves the in-progress class (an instance waiting on it polls every
//!   `--health-poll-interval` already: a trigger would only add a reconcile to every rollout).
//!   Objects annotated `opm.dev/wait: disabled` are not followed (the health check skips them
//!   too).
//! - So a workload that degrades after Ready is seen at once (the instance goes `Progressing`, then
//!   `HealthCheckFailed` if it does not recover within the rollout timeout, counted from when the
//!   degradation was seen: `render_apply::health`), and one that recovers makes the instance Ready
//!   again without waiting for the poll or recheck interval.
//! - Cost: three watches per process, shared by the ModuleInstance and ModulePackage controllers
//!   when both run ([`fan_out`]), and one small record per watched object; the objects
//!   themselves are not cached. In a sharded install every shard sees every managed workload; a
//!   trigger for another shard's instance finds nothing in the shard's cache and is dropped by the
//!   controller runtime.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use futures::{future, stream, Stream, StreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource};

use crate::apply::health::{assess, wait_disabled, Health};
use crate::apply::object::{INSTANCE_NAMESPACE_LABEL, INSTANCE_NAME_LABEL, INSTANCE_UUID_LABEL};

/// The kinds followed: `(group, version, kind, plural)`.
pub const FOLLOWED: &[(&str, &str, &str, &str)] = &[
    ("apps", "v1", "Deployment", "deployments"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("apps", "v1", "DaemonSet", "daemonsets"),
];

/// The class of a kstatus verdict (its message left out: a changing replica count is progress,
/// not a change of health).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Reconciled and ready.
    Current,
    /// Progressing (or terminating).
    InProgress,
    /// A terminal failure.
    Failed,
}

impl Class {
    /// The class of an object's kstatus.
    pub fn of(object: &serde_json::Value) -> Class {
        match assess(object) {
            Health::Current => Class::Current,
            Health::Failed(_) => Class::Failed,
            Health::InProgress(_) | Health::NotFound => Class::InProgress,
        }
    }
}

/// The instance (namespace, name) an object's labels name, if both labels are there.
fn instance_of(object: &serde_json::Value) -> Option<(String, String)> {
    let labels = object.pointer("/metadata/labels")?;
    let get = |k: &str| labels.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    Some((get(INSTANCE_NAMESPACE_LABEL)?, get(INSTANCE_NAME_LABEL)?))
}

#[derive(Debug, Clone)]
struct Seen {
    generation: Option<i64>,
    class: Class,
    instance: (String, String),
}

/// What one watch has seen (by object uid), and which instances its events enqueue (module
/// rules). One tracker per watched kind: a re-list of one kind says nothing of the others.
#[derive(Debug, Default)]
pub struct Tracker {
    seen: HashMap<String, Seen>,
    /// The uids listed since the watch restarted (`None` outside a re-list).
    relisted: Option<HashSet<String>>,
}

impl Tracker {
    /// An object was added, changed or listed: the instance to enqueue, if its health class
    /// changed at the same generation.
    pub fn observe(&mut self, object: &serde_json::Value) -> Option<(String, String)> {
        let uid = object.pointer("/metadata/uid")?.as_str()?.to_owned();
        if let Some(r) = self.relisted.as_mut() {
            r.insert(uid.clone());
        }
        if wait_disabled(object) {
            self.seen.remove(&uid);
            return None;
        }
        let instance = instance_of(object)?;
        let now = Seen {
            generation: object
                .pointer("/metadata/generation")
                .and_then(serde_json::Value::as_i64),
            class: Class::of(object),
            instance: instance.clone(),
        };
        let before = self.seen.insert(uid, now.clone())?;
        let left = before.class != now.class && before.class != Class::InProgress;
        (before.generation == now.generation && left).then_some(instance)
    }

    /// An object was deleted: the instance to enqueue, if it was followed.
    pub fn deleted(&mut self, object: &serde_json::Value) -> Option<(String, String)> {
        let uid = object.pointer("/metadata/uid")?.as_str()?;
        self.seen.remove(uid).map(|s| s.instance)
    }

    /// The watch restarted: the listing that follows replaces what was seen.
    pub fn relist_started(&mut self) {
        self.relisted = Some(HashSet::new());
    }

    /// The listing is complete: the instances of the objects that vanished meanwhile.
    pub fn relist_done(&mut self) -> Vec<(String, String)> {
        let Some(listed) = self.relisted.take() else {
            return Vec::new();
        };
        let gone: Vec<String> = self
            .seen
            .keys()
            .filter(|uid| !listed.contains(*uid))
            .cloned()
            .collect();
        gone.iter()
            .filter_map(|uid| self.seen.remove(uid))
            .map(|s| s.instance)
            .collect()
    }

    /// How many objects are followed.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no object is followed.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// The instances of one watch event that a tracker says to enqueue.
fn on_event(tracker: &mut Tracker, event: watcher::Event<DynamicObject>) -> Vec<(String, String)> {
    let value = |o: &DynamicObject| serde_json::to_value(o).ok();
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => value(&o)
            .and_then(|v| tracker.observe(&v))
            .into_iter()
            .collect(),
        watcher::Event::Delete(o) => value(&o)
            .and_then(|v| tracker.deleted(&v))
            .into_iter()
            .collect(),
        watcher::Event::Init => {
            tracker.relist_started();
            Vec::new()
        }
        watcher::Event::InitDone => tracker.relist_done(),
    }
}

/// An instance a workload trigger names: `(namespace, name)`.
pub type Named = (String, String);

/// The stream of instances (as `K` references) whose workloads changed health (module rules);
/// runs until dropped.
pub fn triggers<K>(client: &kube::Client) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + 'static,
{
    as_refs(instances(client))
}

/// The `K` references of the instances `named` names.
pub fn as_refs<K>(
    named: impl Stream<Item = Named> + Send + 'static,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + 'static,
{
    named.map(|(ns, name)| ObjectRef::new(&name).within(&ns))
}

/// One set of watches for several controllers (module rules, “Cost”): the instances `source`
/// names are sent to each of `n` subscribers. The returned future forwards them until the source
/// ends or every subscriber is gone; a subscriber is an unbounded channel, so a slow controller
/// loses no trigger.
pub fn fan_out(
    source: impl Stream<Item = Named> + Send + 'static,
    n: usize,
) -> (
    impl Future<Output = ()> + Send + 'static,
    Vec<futures::channel::mpsc::UnboundedReceiver<Named>>,
) {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..n)
        .map(|_| futures::channel::mpsc::unbounded::<Named>())
        .unzip();
    let forward = async move {
        let mut senders = senders;
        let mut source = std::pin::pin!(source);
        while let Some(named) = source.next().await {
            senders.retain(|tx| tx.unbounded_send(named.clone()).is_ok());
            if senders.is_empty() {
                return;
            }
        }
    };
    (forward, receivers)
}

/// The instances whose workloads changed health (module rules): the three watches of
/// [`FOLLOWED`], merged; runs until dropped.
pub fn instances(client: &kube::Client) -> impl Stream<Item = Named> + Send + 'static {
    let config = watcher::Config::default().labels(INSTANCE_UUID_LABEL);
    let watches = FOLLOWED.iter().map(|(group, version, kind, plural)| {
        let ar = ApiResource {
            group: (*group).into(),
            version: (*version).into(),
            api_version: format!("{group}/{version}"),
            kind: (*kind).into(),
            plural: (*plural).into(),
        };
        let mut tracker = Tracker::default();
        // A watch that cannot run (say, no list permission on the kind) is retried with backoff;
        // its first failure after running is a warning, the repeats are debug lines.
        let mut failing = false;
        watcher(Api::<DynamicObject>::all_with(client.clone(), &ar), config.clone())
            .default_backoff()
            .filter_map(move |event| {
                future::ready(match event {
                    Ok(e) => {
                        failing = false;
                        Some(stream::iter(on_event(&mut tracker, e)))
                    }
                    Err(e) if failing => {
                        tracing::debug!(kind = %ar.kind, error = %e, "workload health watch still failing");
                        None
                    }
                    Err(e) => {
                        failing = true;
                        tracing::warn!(kind = %ar.kind, error = %e, "workload health watch failed (retrying with backoff): until it runs, degradations after Ready are seen only at the next reconcile");
                        None
                    }
                })
            })
            .flatten()
            .boxed()
    });
    stream::select_all(watches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(uid: &str, generation: i64, available: bool) -> serde_json::Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team", "uid": uid, "generation": generation,
                         "labels": {INSTANCE_NAME_LABEL: "shop", INSTANCE_NAMESPACE_LABEL: "team",
                                    INSTANCE_UUID_LABEL: "u-1"}},
            "spec": {"replicas": 2},
            "status": {"observedGeneration": generation, "replicas": 2, "updatedReplicas": 2,
                       "readyReplicas": if available { 2 } else { 1 },
                       "availableReplicas": if available { 2 } else { 1 },
                       "conditions": [{"type": "Available", "status": if available { "True" } else { "False" }}]},
        })
    }

    fn failed_at(generation: i64) -> serde_json::Value {
        let mut d = deployment("a", generation, false);
        d["status"]["conditions"] = json!([{"type": "Progressing", "status": "False",
                                             "reason": "ProgressDeadlineExceeded"}]);
        d
    }

    #[test]
    fn leaving_current_or_failed_at_the_same_generation_enqueues_the_instance() {
        let shop = Some(("team".to_owned(), "shop".to_owned()));
        let mut t = Tracker::default();
        assert_eq!(t.observe(&deployment("a", 1, true)), None, "first sight");
        assert_eq!(t.observe(&deployment("a", 1, true)), None, "no change");
        assert_eq!(t.observe(&deployment("a", 1, false)), shop, "degraded");
        assert_eq!(
            t.observe(&deployment("a", 1, false)),
            None,
            "still degraded"
        );
        // A rollout finishing is the waiting reconcile's to see (it polls).
        assert_eq!(
            t.observe(&deployment("a", 1, true)),
            None,
            "rolled out again"
        );
        assert_eq!(t.observe(&failed_at(1)), shop, "failed");
        assert_eq!(
            t.observe(&deployment("a", 1, true)),
            shop,
            "recovered from the failure"
        );
        // A spec write (new generation) is followed by the reconcile that made it.
        assert_eq!(
            t.observe(&deployment("a", 2, false)),
            None,
            "new generation"
        );
        assert_eq!(
            t.observe(&deployment("a", 2, true)),
            None,
            "its rollout finished"
        );
        assert_eq!(t.observe(&failed_at(2)), shop, "then it failed");
        assert_eq!(t.len(), 1);
        assert_eq!(t.deleted(&failed_at(2)), shop, "deleted");
        assert_eq!(t.deleted(&failed_at(2)), None, "not followed any more");
        assert!(t.is_empty());
    }

    #[test]
    fn unlabelled_and_wait_disabled_objects_are_not_followed() {
        let mut t = Tracker::default();
        let mut bare = deployment("b", 1, true);
        bare["metadata"]["labels"] = json!({});
        assert_eq!(t.observe(&bare), None);
        let mut off = deployment("c", 1, true);
        off["metadata"]["annotations"] = json!({"opm.dev/wait": "disabled"});
        assert_eq!(t.observe(&off), None);
        off["status"]["availableReplicas"] = json!(0);
        assert_eq!(t.observe(&off), None);
        assert!(t.is_empty());
    }

    #[test]
    fn a_relist_reports_what_vanished_and_keeps_what_it_lists() {
        let mut t = Tracker::default();
        t.observe(&deployment("a", 1, true));
        t.observe(&deployment("b", 1, true));
        t.relist_started();
        assert_eq!(t.observe(&deployment("a", 1, true)), None);
        assert_eq!(
            t.relist_done(),
            vec![("team".to_owned(), "shop".to_owned())],
            "b vanished while the watch was down"
        );
        assert_eq!(t.len(), 1);
        assert!(t.relist_done().is_empty(), "no re-list in progress");
    }

    #[tokio::test]
    async fn one_source_reaches_every_subscriber_until_all_are_gone() {
        let named = |n: &str| ("team".to_owned(), n.to_owned());
        let (tx, source) = futures::channel::mpsc::unbounded::<Named>();
        let (forward, mut subscribers) = fan_out(source, 2);
        let forward = tokio::spawn(forward);
        let (mut second, mut first) = (
            subscribers.pop().expect("two subscribers"),
            subscribers.pop().expect("two subscribers"),
        );
        tx.unbounded_send(named("shop")).expect("forwarding");
        assert_eq!(first.next().await, Some(named("shop")));
        assert_eq!(second.next().await, Some(named("shop")));
        // A subscriber that goes does not stop the others.
        drop(first);
        tx.unbounded_send(named("cart")).expect("forwarding");
        assert_eq!(second.next().await, Some(named("cart")));
        // When the last one goes, the forwarding ends at the next trigger.
        drop(second);
        tx.unbounded_send(named("web")).expect("forwarding");
        tokio::time::timeout(std::time::Duration::from_secs(5), forward)
            .await
            .expect("forwarding ended")
            .expect("no panic");
    }
}
