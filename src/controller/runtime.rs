//! The reconciler runtime every reconciler shares (docs/design/operator.md §2.1, §3.6, §4.2, §7.3; docs/design/decisions.md §1).
//!
//! Rules implemented here:
//! - **Status patcher** (Flux SerialPatcher semantics): the patch is a JSON merge patch computed as
//!   the difference between the status as first read and the status the reconcile wants
//!   ([`merge_diff`]); removed fields are sent as `null`. Every write carries the
//!   `metadata.resourceVersion` of the object as last read or written by this patcher, so a
//!   concurrent edit makes the API server answer 409 and the reconcile requeues
//!   ([`Error::Conflict`]): newer state is never overwritten. A status equal to the one read sends
//!   nothing (an idempotent reconcile writes nothing).
//! - **Metadata patches** (finalizers) go through the same patcher with the same precondition, so
//!   the status patch that follows them uses the resourceVersion they returned.
//! - **Events** are `events.k8s.io/v1`, one object per emission, each with an action verb; a
//!   Warning is sent only on a transition ([`super::events::ready_changed`], scenario 64), and its
//!   note is exactly the condition message (a stable string).
//! - **Tracing**: one span per reconcile ([`reconcile_span`]) with kind, namespace, name and
//!   generation.
//! - **Errors** are typed where they arise; a classified failure is never an error (it is a
//!   requeue interval), so [`Error`] only carries what the controller runtime must retry.

use std::fmt::Debug;
use std::time::Duration;

use crds::k8s_openapi::api::events::v1::Event as K8sEvent;
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use crds::k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// The reporting controller name of every event (`reportingController`): the field manager.
pub const REPORTING_CONTROLLER: &str = crds::FIELD_MANAGER;

/// How long a reconcile waits before retrying after a write conflict.
pub const CONFLICT_RETRY: Duration = Duration::from_secs(1);

/// Errors a reconcile returns to the controller runtime (which retries them with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A read or write of `what` failed at the API server.
    #[error("{what}: {source}")]
    Kube {
        /// What was being read or written (names the object).
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The object changed since it was read; the reconcile must start again from a fresh read.
    #[error("{what}: the object changed since it was read (conflict); requeued")]
    Conflict {
        /// The object written.
        what: String,
    },
    /// A value could not be encoded as JSON (a bug: our types always encode).
    #[error("encoding {what}: {source}")]
    Encode {
        /// What was encoded.
        what: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A call to the API server did not answer in time.
    #[error("{what}: no answer within {after:?}")]
    Timeout {
        /// What was being done.
        what: String,
        /// The deadline.
        after: Duration,
    },
    /// Deleting an object's inventory failed (the finalizer is kept; docs/design/operator.md §2.4 step 3).
    #[error("{what}: {source}")]
    Delete {
        /// The owner whose inventory was being deleted.
        what: String,
        /// The joined deletion errors (boxed: the variant would dwarf the others).
        #[source]
        source: Box<crate::apply::Error>,
    },
    /// A blocking task of the reconcile panicked or was cancelled.
    #[error("{what}: the blocking task did not finish: {message}")]
    Join {
        /// What the task was doing.
        what: String,
        /// The join error text.
        message: String,
    },
    /// The process's render slots were closed (nothing closes them: a bug).
    #[error("{what}: no render slot: {source}")]
    Slots {
        /// What was waiting for a slot.
        what: String,
        /// The semaphore's error.
        #[source]
        source: tokio::sync::AcquireError,
    },
}

impl Error {
    /// Wraps a client error: 409 becomes [`Error::Conflict`].
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        let what = what.into();
        match &source {
            kube::Error::Api(s) if s.code == 409 => Error::Conflict { what },
            _ => Error::Kube { what, source },
        }
    }

    /// The requeue interval the controller runtime uses for this error.
    pub fn retry_after(&self, failures: u32) -> Duration {
        match self {
            Error::Conflict { .. } => CONFLICT_RETRY,
            _ => super::outcome::backoff(failures),
        }
    }
}

/// Whether a client error is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The current time as a Kubernetes `Time`.
pub fn now() -> Time {
    Time(Timestamp::now())
}

/// The time `d` from now (`nextRetryAt`); saturates at now when it would overflow.
pub fn time_after(d: Duration) -> Time {
    let now = Timestamp::now();
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    Time(
        now.checked_add(SignedDuration::from_secs(secs))
            .unwrap_or(now),
    )
}

/// The span of one reconcile (kind, namespace, name, generation).
pub fn reconcile_span(kind: &str, namespace: &str, name: &str, generation: i64) -> tracing::Span {
    tracing::info_span!("reconcile", kind, namespace, name, generation)
}

/// The JSON merge patch (RFC 7386) turning `old` into `new`, or `None` when they are equal.
/// Fields of `old` missing from `new` are `null`; non-object values (lists included) are replaced
/// whole.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (o, n) if o == n => None,
        (_, n) => Some(n.clone()),
    }
}

/// Writes one object's status and metadata with the optimistic precondition of the module docs.
pub struct Patcher<K> {
    api: Api<K>,
    name: String,
    what: String,
    resource_version: Option<String>,
    base_status: Value,
}

impl<K> Patcher<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    /// A patcher whose diff base is `obj` as read (`what` names it in errors).
    pub fn new(api: Api<K>, obj: &K, what: impl Into<String>) -> Result<Self, Error> {
        let what = what.into();
        let base_status = status_of(obj, &what)?;
        Ok(Patcher {
            api,
            name: obj.name_any(),
            resource_version: obj.resource_version(),
            what,
            base_status,
        })
    }

    /// Commits `obj`'s status: a merge patch of the difference to the base, with the
    /// resourceVersion precondition. Returns whether anything was written.
    pub async fn patch_status(&mut self, obj: &K) -> Result<bool, Error> {
        let status = status_of(obj, &self.what)?;
        let Some(diff) = merge_diff(&self.base_status, &status) else {
            return Ok(false);
        };
        let body = serde_json::json!({
            "metadata": { "resourceVersion": self.resource_version },
            "status": diff,
        });
        let written = self
            .api
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|e| Error::kube(format!("patching the status of {}", self.what), e))?;
        self.resource_version = written.resource_version();
        self.base_status = status_of(&written, &self.what)?;
        Ok(true)
    }

    /// Sets the finalizer list to `finalizers` (merge patch with the precondition) and returns the
    /// object as written.
    pub async fn patch_finalizers(&mut self, finalizers: &[String]) -> Result<K, Error> {
        let body = serde_json::json!({
            "metadata": {
                "resourceVersion": self.resource_version,
                "finalizers": finalizers,
            },
        });
        let written = self
            .api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|e| Error::kube(format!("patching the finalizers of {}", self.what), e))?;
        self.resource_version = written.resource_version();
        Ok(written)
    }
}

fn status_of<K: Serialize>(obj: &K, what: &str) -> Result<Value, Error> {
    let v = serde_json::to_value(obj).map_err(|source| Error::Encode {
        what: what.to_owned(),
        source,
    })?;
    Ok(v.get("status").cloned().unwrap_or(Value::Null))
}

/// The type of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Progress.
    Normal,
    /// A failure or refusal.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Publishes `events.k8s.io/v1` events as `opm-controller`: one Event object per call (the
/// callers already send a Warning only on a transition, so a changed message is a new event, never
/// folded into the series of an older one).
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    instance: String,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// Events of cluster-scoped objects are written to this namespace (as client-go does).
pub const CLUSTER_EVENTS_NAMESPACE: &str = "default";

impl Events {
    /// A recorder on `client`; `instance` is the reporting instance (the pod or process identity).
    pub fn new(client: kube::Client, instance: &str) -> Self {
        Events {
            client,
            instance: instance.to_owned(),
        }
    }

    /// Publishes one event about `obj`. A failure to publish is logged, never fatal: events are
    /// informative and the condition carries the same text.
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let regarding = obj.object_ref(&());
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| CLUSTER_EVENTS_NAMESPACE.to_owned());
        let now = Timestamp::now();
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or("object"),
            now.as_nanosecond()
        );
        let ev = K8sEvent {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(action.to_owned()),
            reason: Some(reason.to_owned()),
            note: Some(note.to_owned()),
            type_: Some(type_.as_str().to_owned()),
            regarding: Some(regarding),
            reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(e) = api.create(&PostParams::default(), &ev).await {
            tracing::warn!(reason, action, error = %e, "publishing an event failed");
        }
    }
}

/// Runs a blocking kernel call off the async runtime.
pub async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Join {
            what: what.to_owned(),
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_status_needs_no_patch() {
        let s = json!({"observedGeneration": 2, "conditions": [{"type": "Ready"}]});
        assert_eq!(merge_diff(&s, &s), None);
    }

    #[test]
    fn changed_and_removed_fields_are_patched() {
        let old = json!({"observedGeneration": 1, "accepted": true, "operatorVersion": "v1"});
        let new = json!({"observedGeneration": 2, "accepted": true, "registry": []});
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"observedGeneration": 2, "operatorVersion": null, "registry": []}))
        );
    }

    #[test]
    fn lists_are_replaced_whole_and_nested_objects_diffed() {
        let old = json!({"a": {"x": 1, "y": 2}, "l": [1, 2]});
        let new = json!({"a": {"x": 1, "y": 3}, "l": [1]});
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"a": {"y": 3}, "l": [1]}))
        );
        // From no status at all to a status: the whole status.
        assert_eq!(merge_diff(&Value::Null, &new), Some(new.clone()));
    }

    #[test]
    fn a_conflict_is_retried_quickly_and_other_errors_back_off() {
        let conflict = Error::Conflict { what: "x".into() };
        assert_eq!(conflict.retry_after(7), CONFLICT_RETRY);
        let join = Error::Join {
            what: "x".into(),
            message: "boom".into(),
        };
        assert_eq!(join.retry_after(0), Duration::from_secs(5));
        assert_eq!(join.retry_after(1), Duration::from_secs(10));
    }
}
