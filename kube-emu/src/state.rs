//! The in-memory store: objects per resource, one global resourceVersion counter, the bounded
//! event history that watches resume from, and the registry of resource types.
//!
//! Rules: every committed write bumps the counter once and records one event (ADDED, MODIFIED,
//! DELETED) stamped with that version; deleted objects carry the deletion's version. The history
//! keeps the last `history_limit` events; a watch from a version older than the oldest kept
//! event gets 410 Gone. Committing also runs the store's own controllers: CRDs register and
//! unregister their kinds (deleting a CRD deletes its objects), and a Terminating namespace
//! deletes its contents (objects with finalizers get a deletionTimestamp) and disappears once
//! empty. With the zero-delay workload simulator, it also writes simulated workload statuses
//! ([`crate::simulate`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::rbac::UserInfo;
use crate::resources::{self, ResourceType};
use crate::timefmt;

/// A resource key: (group, plural).
pub type ResKey = (String, String);

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub struct Event {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// Resource.
    pub key: ResKey,
    /// Namespace (`""` for cluster scope).
    pub namespace: String,
    /// Type.
    pub etype: EventType,
    /// Object after the change (for DELETED: the last state).
    pub object: Arc<Value>,
    /// Object before the change.
    pub prev: Option<Arc<Value>>,
}

/// What a write does once prepared.
#[derive(Debug, Clone)]
pub enum Change {
    /// Insert or replace.
    Put(Value),
    /// Remove.
    Delete,
}

/// A token issued by TokenRequest.
#[derive(Debug, Clone)]
pub struct ServiceAccountToken {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid when the token was issued (a recreated account invalidates the token).
    pub uid: String,
    /// When the token stops authenticating.
    pub expires: std::time::SystemTime,
}

/// The store.
pub struct State {
    /// The global resourceVersion counter (last used value).
    pub rv: u64,
    /// Resource types by (group, plural).
    pub types: BTreeMap<ResKey, ResourceType>,
    /// Objects by resource, then (namespace, name).
    pub objects: HashMap<ResKey, BTreeMap<(String, String), Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// The highest resourceVersion dropped from the history.
    pub evicted_upto: u64,
    /// Broadcast of committed events.
    pub tx: broadcast::Sender<Arc<Event>>,
    /// Registered bearer tokens.
    pub tokens: HashMap<String, UserInfo>,
    /// Tokens issued by TokenRequest (`authn`).
    pub sa_tokens: HashMap<String, ServiceAccountToken>,
    /// Write simulated workload statuses in the committing transaction ([`crate::simulate`]
    /// with a zero delay).
    pub simulate_now: bool,
}

fn meta_str<'v>(o: &'v Value, f: &str) -> &'v str {
    o["metadata"][f].as_str().unwrap_or("")
}

impl State {
    /// A store with the built-in kinds and the usual namespaces.
    pub fn new(history_limit: usize) -> Self {
        let (tx, _) = broadcast::channel(history_limit.clamp(1024, 1 << 16));
        let mut st = State {
            rv: 0,
            types: BTreeMap::new(),
            objects: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            evicted_upto: 0,
            tx,
            tokens: HashMap::new(),
            sa_tokens: HashMap::new(),
            simulate_now: false,
        };
        for rt in resources::builtins() {
            st.types.insert((rt.group.clone(), rt.plural.clone()), rt);
        }
        let now = timefmt::now();
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now,
                             "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            });
            st.commit(
                &(String::new(), "namespaces".into()),
                "",
                ns,
                Change::Put(obj),
            );
        }
        st
    }

    /// Finds a resource type by group, version and plural (or kind, case-insensitively).
    pub fn find_type(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .get(&(group.to_string(), plural.to_string()))
            .filter(|rt| rt.versions.iter().any(|v| v == version))
    }

    /// Looks up one object.
    pub fn get(&self, key: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(key)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// All objects of a resource in a namespace (`None` = every namespace), sorted by key.
    pub fn list(&self, key: &ResKey, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(m) = self.objects.get(key) else {
            return Vec::new();
        };
        match ns {
            None => m.values().cloned().collect(),
            Some(ns) => m
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }

    /// Whether a namespace exists and whether it is terminating.
    pub fn namespace_state(&self, ns: &str) -> Option<bool> {
        self.get(&(String::new(), "namespaces".into()), "", ns)
            .map(|o| o["metadata"]["deletionTimestamp"].is_string())
    }

    /// Events after `rv` (all resources), or `Err` when `rv` is older than the history window.
    pub fn events_since(&self, rv: u64) -> Result<Vec<Arc<Event>>, u64> {
        if rv < self.evicted_upto {
            return Err(self.history.front().map(|e| e.rv).unwrap_or(self.rv));
        }
        let start = self.history.partition_point(|e| e.rv <= rv);
        Ok(self.history.iter().skip(start).cloned().collect())
    }

    /// Sets the counter to `rv` and empties the watch history, as if every version up to `rv`
    /// had been evicted (used when a snapshot is restored: resuming watches get 410 Gone).
    pub fn restart_history(&mut self, rv: u64) {
        self.rv = rv;
        self.history.clear();
        self.evicted_upto = rv;
    }

    fn record(&mut self, ev: Event) {
        let ev = Arc::new(ev);
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.evicted_upto = old.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(ev);
    }

    /// Commits one change with a new resourceVersion and runs the store controllers.
    /// Returns the stored object (for deletes: the last state).
    pub fn commit(&mut self, key: &ResKey, ns: &str, name: &str, change: Change) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        let slot = (ns.to_string(), name.to_string());
        let prev = self.objects.get(key).and_then(|m| m.get(&slot)).cloned();
        let (etype, obj) = match change {
            Change::Put(mut v) => {
                v["metadata"]["resourceVersion"] = Value::String(rv.to_string());
                let obj = Arc::new(v);
                self.objects
                    .entry(key.clone())
                    .or_default()
                    .insert(slot, obj.clone());
                let et = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (et, obj)
            }
            Change::Delete => {
                if let Some(m) = self.objects.get_mut(key) {
                    m.remove(&slot);
                }
                let mut last = prev.as_deref().cloned().unwrap_or(Value::Null);
                if last.is_object() {
                    last["metadata"]["resourceVersion"] = Value::String(rv.to_string());
                }
                (EventType::Deleted, Arc::new(last))
            }
        };
        self.record(Event {
            rv,
            key: key.clone(),
            namespace: ns.to_string(),
            etype,
            object: obj.clone(),
            prev,
        });
        self.after_commit(key, ns, name, etype, &obj);
        obj
    }

    fn after_commit(&mut self, key: &ResKey, ns: &str, name: &str, etype: EventType, obj: &Value) {
        let is_crd = key.0 == "apiextensions.k8s.io" && key.1 == "customresourcedefinitions";
        let is_ns = key.0.is_empty() && key.1 == "namespaces";
        if is_crd {
            if etype == EventType::Deleted {
                if let Ok(rt) = resources::from_crd(obj) {
                    let rk = (rt.group.clone(), rt.plural.clone());
                    let names: Vec<(String, String)> = self
                        .objects
                        .get(&rk)
                        .map(|m| m.keys().cloned().collect())
                        .unwrap_or_default();
                    for (n_ns, n_name) in names {
                        self.commit(&rk, &n_ns, &n_name, Change::Delete);
                    }
                    self.types.remove(&rk);
                }
            } else if let Ok(rt) = resources::from_crd(obj) {
                self.types.insert((rt.group.clone(), rt.plural.clone()), rt);
            }
        }
        if is_ns && etype != EventType::Deleted && obj["metadata"]["deletionTimestamp"].is_string()
        {
            self.cascade_namespace(name);
        }
        if !ns.is_empty() && etype == EventType::Deleted && self.namespace_state(ns) == Some(true) {
            self.finish_namespace(ns);
        }
        if self.simulate_now && etype != EventType::Deleted {
            if let Some(next) = crate::simulate::update_for((&key.0, &key.1), obj) {
                self.commit(key, ns, name, Change::Put(next));
            }
        }
    }

    fn cascade_namespace(&mut self, ns: &str) {
        let now = timefmt::now();
        let keys: Vec<ResKey> = self
            .types
            .values()
            .filter(|t| t.namespaced)
            .map(|t| (t.group.clone(), t.plural.clone()))
            .collect();
        for k in keys {
            for obj in self.list(&k, Some(ns)) {
                let name = meta_str(&obj, "name").to_string();
                let has_finalizers = obj["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty());
                if has_finalizers {
                    if !obj["metadata"]["deletionTimestamp"].is_string() {
                        let mut o = (*obj).clone();
                        o["metadata"]["deletionTimestamp"] = json!(now);
                        o["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                        self.commit(&k, ns, &name, Change::Put(o));
                    }
                } else {
                    self.commit(&k, ns, &name, Change::Delete);
                }
            }
        }
        self.finish_namespace(ns);
    }

    fn finish_namespace(&mut self, ns: &str) {
        let empty = self
            .objects
            .iter()
            .filter(|(k, _)| !(k.0.is_empty() && k.1 == "namespaces"))
            .all(|(_, m)| {
                m.range((ns.to_string(), String::new())..)
                    .next()
                    .is_none_or(|((n, _), _)| n != ns)
            });
        if empty {
            self.commit(
                &(String::new(), "namespaces".into()),
                "",
                ns,
                Change::Delete,
            );
        }
    }
}
