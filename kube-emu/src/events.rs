//! One store for Events, two APIs: `events.k8s.io/v1` Events are stored as core `v1` Events and
//! served back converted, as the apiserver does, so an Event a controller posts through
//! `events.k8s.io/v1` (kube-rs's `Api<events::v1::Event>`, our reconcilers) is listed by
//! `kubectl get events` and shown by `kubectl describe`, and the other way round.
//!
//! Field mapping (events.k8s.io/v1 ↔ core/v1): `regarding` ↔ `involvedObject`, `note` ↔
//! `message`, `reportingController` ↔ `reportingComponent`, `deprecatedSource` ↔ `source`,
//! `deprecatedFirstTimestamp` ↔ `firstTimestamp`, `deprecatedLastTimestamp` ↔ `lastTimestamp`,
//! `deprecatedCount` ↔ `count`; `metadata`, `eventTime`, `series`, `action`, `reason`,
//! `related`, `reportingInstance` and `type` keep their names.
//!
//! Rules: the store key of `events.k8s.io` events is core `events` (see `ops::Target::key`);
//! reads convert the stored object (`ops::at_version`); creates, updates, patches (applied to
//! the converted view) and server-side apply configurations are converted back before they
//! are stored; a snapshot from before the shared store has its `events.k8s.io` Events moved
//! into it on load (`snapshot`). Field selectors of `events.k8s.io` lists match the stored (core) field names.

use serde_json::{Map, Value};

use crate::resources::ResourceType;

/// `(events.k8s.io/v1 name, core/v1 name)` of the renamed fields.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Whether `rt` is `events.k8s.io` `events` (stored as core Events).
pub fn is_events_v1(rt: &ResourceType) -> bool {
    rt.group == "events.k8s.io" && rt.plural == "events"
}

fn rename(v: Value, to_core: bool) -> Value {
    let Value::Object(m) = v else {
        return v;
    };
    let out: Map<String, Value> = m
        .into_iter()
        .map(|(k, v)| {
            let renamed = RENAMED.iter().find_map(|(new, core)| {
                if to_core {
                    (k == *new).then_some(*core)
                } else {
                    (k == *core).then_some(*new)
                }
            });
            (renamed.map(str::to_string).unwrap_or(k), v)
        })
        .collect();
    Value::Object(out)
}

/// An `events.k8s.io/v1` Event (or patch, or apply configuration) in core `v1` form.
pub fn to_core(v: Value) -> Value {
    rename(v, true)
}

/// A stored core `v1` Event in `events.k8s.io/v1` form.
pub fn from_core(v: Value) -> Value {
    rename(v, false)
}

/// [`to_core`] when `rt` is `events.k8s.io` events, else `v` unchanged.
pub fn stored_form(rt: &ResourceType, v: Value) -> Value {
    if is_events_v1(rt) {
        to_core(v)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_two_forms_round_trip() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "ModuleInstance", "name": "hello"}, "note": "applied",
            "reportingController": "opm-controller", "reportingInstance": "dev", "reason": "Applied",
            "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Apply"});
        let core = to_core(new.clone());
        assert_eq!(core["involvedObject"]["name"], "hello");
        assert_eq!(core["message"], "applied");
        assert_eq!(core["reportingComponent"], "opm-controller");
        assert_eq!(core["reason"], "Applied");
        assert!(core.get("note").is_none() && core.get("regarding").is_none());
        assert_eq!(from_core(core), new);
    }
}
