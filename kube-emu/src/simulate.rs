//! The workload simulator (opt-in, [`crate::Options::workloads`]): kube-emu runs no
//! controllers, so a Deployment it stores never gets a status and a health check waits for ever.
//! With the simulator on, the store writes the status a controller would write, so clients that
//! wait for kstatus `Current` (the operator's health check, `kubectl rollout status`, `kubectl
//! wait`) see a whole rollout.
//!
//! Rules:
//! - Simulated resources: Deployments, StatefulSets, DaemonSets (`apps`), Jobs (`batch`),
//!   HorizontalPodAutoscalers, PodDisruptionBudgets, PersistentVolumeClaims and Services of
//!   type `LoadBalancer` (core). Other objects are left alone (a CronJob too: its controller
//!   writes a status only when a schedule fires, and kstatus reads none: a CronJob is
//!   `Current` as it is); an object being deleted (`deletionTimestamp`) is left alone.
//! - HorizontalPodAutoscaler: `currentReplicas` = `desiredReplicas` = `spec.minReplicas`
//!   (default 1) with the controller's conditions (`AbleToScale`, `ScalingActive`,
//!   `ScalingLimited`); `fail` → `AbleToScale=False FailedGetScale`, `hold` →
//!   `ScalingActive=False`. PodDisruptionBudget (kstatus reads it): expected, desired and
//!   current healthy = an integer `spec.minAvailable` (default 1), `DisruptionAllowed=True`;
//!   `fail`/`hold` → no healthy pod, `DisruptionAllowed=False InsufficientPods`.
//! - The outcome is chosen per object by the annotation [`ANNOTATION`]: absent or `healthy` →
//!   the status of a finished rollout (Deployment: updated, ready and available replicas equal
//!   `spec.replicas` (default 1), `Available=True`, `Progressing=True NewReplicaSetAvailable`;
//!   StatefulSet: ready/current/updated replicas and equal revisions; DaemonSet: one node
//!   scheduled, updated, ready and available; Job: `Complete=True` with `succeeded` =
//!   `spec.completions` (default 1); PVC: phase `Bound` with the requested capacity; Service:
//!   one load-balancer ingress `127.0.0.1`). `fail` → the status of a failed rollout where the
//!   kind has one (Deployment: `Progressing=False ProgressDeadlineExceeded`, no available
//!   replica; Job: `Failed=True BackoffLimitExceeded`; PVC: phase `Lost`); kinds without a
//!   failed state (StatefulSet, DaemonSet, Service) stay in progress, as `hold` does. `hold` →
//!   a rollout that never finishes (no ready replica, Job active, PVC `Pending`, no ingress).
//!   Any other value is treated as `healthy`.
//! - Every status carries `observedGeneration` = `metadata.generation` where the kind has one,
//!   so a spec change makes the object in progress again until the simulator answers it.
//! - The status is written only when it differs from the stored one (a write of the simulator
//!   never triggers another), as one commit of the whole object (no generation bump, as a
//!   status-subresource write). With a zero delay the store writes it in the same transaction as
//!   the change that asked for it (`state`: the object is healthy as soon as the write returns);
//!   with a delay a background task of the emulator writes it `delay` after the change, if the
//!   object still has the same uid and generation. Objects restored from a snapshot are looked
//!   at once at start, as if just changed. This module only computes statuses.
//! - Known difference: no Pods or ReplicaSets are created and the status write records no
//!   managedFields entry of a controller.

use std::time::Duration;

use serde_json::{json, Value};

/// Per-object outcome annotation: `healthy` (default), `fail` or `hold`.
pub const ANNOTATION: &str = "kube-emu.opmodel.dev/simulate";

/// Simulator settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workloads {
    /// How long after a change its status is written (zero: in the same transaction).
    pub delay: Duration,
}

impl Workloads {
    /// Statuses written in the same transaction as the change.
    pub fn immediate() -> Self {
        Workloads {
            delay: Duration::ZERO,
        }
    }

    /// Statuses written `delay` after the change.
    pub fn after(delay: Duration) -> Self {
        Workloads { delay }
    }
}

/// The outcome an object asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Healthy,
    Fail,
    Hold,
}

fn outcome_of(o: &Value) -> Outcome {
    match o
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ANNOTATION))
        .and_then(Value::as_str)
    {
        Some("fail") => Outcome::Fail,
        Some("hold") => Outcome::Hold,
        _ => Outcome::Healthy,
    }
}

/// A resource: (group, plural).
type Res<'a> = (&'a str, &'a str);

fn is(key: Res<'_>, group: &str, plural: &str) -> bool {
    key.0 == group && key.1 == plural
}

fn replicas(o: &Value, ptr: &str) -> i64 {
    o.pointer(ptr).and_then(Value::as_i64).unwrap_or(1)
}

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message})
}

/// The status the simulator gives `o` (a stored object of resource `key`), or `None` when the
/// simulator leaves it alone (module rules).
pub fn status_for(key: (&str, &str), o: &Value) -> Option<Value> {
    if o.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return None;
    }
    let outcome = outcome_of(o);
    let generation = o.pointer("/metadata/generation").cloned();
    let name = o
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut status = if is(key, "apps", "deployments") {
        let r = replicas(o, "/spec/replicas");
        match outcome {
            Outcome::Healthy => json!({
                "replicas": r, "updatedReplicas": r, "readyReplicas": r, "availableReplicas": r,
                "conditions": [
                    cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
                    cond("Progressing", "True", "NewReplicaSetAvailable",
                         &format!("ReplicaSet \"{name}\" has successfully progressed.")),
                ],
            }),
            Outcome::Fail => json!({
                "replicas": r, "updatedReplicas": r, "unavailableReplicas": r,
                "conditions": [
                    cond("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
                    cond("Progressing", "False", "ProgressDeadlineExceeded",
                         &format!("ReplicaSet \"{name}\" has timed out progressing.")),
                ],
            }),
            Outcome::Hold => json!({
                "replicas": r, "updatedReplicas": r, "unavailableReplicas": r,
                "conditions": [
                    cond("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
                    cond("Progressing", "True", "ReplicaSetUpdated",
                         &format!("ReplicaSet \"{name}\" is progressing.")),
                ],
            }),
        }
    } else if is(key, "apps", "statefulsets") {
        let r = replicas(o, "/spec/replicas");
        let revision = format!(
            "{name}-{}",
            generation.as_ref().and_then(Value::as_i64).unwrap_or(1)
        );
        let ready = if outcome == Outcome::Healthy { r } else { 0 };
        json!({
            "replicas": r, "readyReplicas": ready, "availableReplicas": ready,
            "currentReplicas": r, "updatedReplicas": r,
            "currentRevision": revision, "updateRevision": revision,
        })
    } else if is(key, "apps", "daemonsets") {
        let ready = i64::from(outcome == Outcome::Healthy);
        json!({
            "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1,
            "numberReady": ready, "numberAvailable": ready, "numberUnavailable": 1 - ready,
            "numberMisscheduled": 0,
        })
    } else if is(key, "batch", "jobs") {
        let completions = replicas(o, "/spec/completions");
        match outcome {
            Outcome::Healthy => json!({
                "succeeded": completions,
                "conditions": [cond("Complete", "True", "Completed", "Job completed")],
            }),
            Outcome::Fail => json!({
                "failed": 1,
                "conditions": [cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")],
            }),
            Outcome::Hold => json!({"active": 1}),
        }
    } else if is(key, "autoscaling", "horizontalpodautoscalers") {
        let r = o
            .pointer("/spec/minReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let conditions = match outcome {
            Outcome::Healthy => json!([
                cond(
                    "AbleToScale",
                    "True",
                    "ReadyForNewScale",
                    "recommended size matches current size"
                ),
                cond(
                    "ScalingActive",
                    "True",
                    "ValidMetricFound",
                    "the HPA was able to successfully calculate a replica count"
                ),
                cond(
                    "ScalingLimited",
                    "False",
                    "DesiredWithinRange",
                    "the desired count is within the acceptable range"
                ),
            ]),
            Outcome::Fail => json!([cond(
                "AbleToScale",
                "False",
                "FailedGetScale",
                "the HPA controller was unable to get the target's current scale"
            ),]),
            Outcome::Hold => json!([
                cond(
                    "AbleToScale",
                    "True",
                    "SucceededGetScale",
                    "the HPA controller was able to get the target's current scale"
                ),
                cond(
                    "ScalingActive",
                    "False",
                    "FailedGetResourceMetric",
                    "the HPA was unable to compute the replica count"
                ),
            ]),
        };
        json!({"currentReplicas": r, "desiredReplicas": r, "conditions": conditions})
    } else if is(key, "policy", "poddisruptionbudgets") {
        let want = o
            .pointer("/spec/minAvailable")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let healthy = if outcome == Outcome::Healthy { want } else { 0 };
        let (status, reason) = if outcome == Outcome::Healthy {
            ("True", "SufficientPods")
        } else {
            ("False", "InsufficientPods")
        };
        json!({
            "expectedPods": want, "desiredHealthy": want, "currentHealthy": healthy,
            "disruptionsAllowed": 0,
            "conditions": [cond("DisruptionAllowed", status, reason, "")],
        })
    } else if is(key, "", "persistentvolumeclaims") {
        match outcome {
            Outcome::Healthy => {
                let mut s = json!({"phase": "Bound"});
                if let Some(modes) = o.pointer("/spec/accessModes") {
                    s["accessModes"] = modes.clone();
                }
                if let Some(size) = o.pointer("/spec/resources/requests/storage") {
                    s["capacity"] = json!({"storage": size});
                }
                s
            }
            Outcome::Fail => json!({"phase": "Lost"}),
            Outcome::Hold => json!({"phase": "Pending"}),
        }
    } else if is(key, "", "services")
        && o.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer")
    {
        match outcome {
            Outcome::Healthy => json!({"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}),
            Outcome::Fail | Outcome::Hold => json!({"loadBalancer": {}}),
        }
    } else {
        return None;
    };
    let has_generation = !is(key, "", "persistentvolumeclaims") && !is(key, "", "services");
    if has_generation {
        if let (Some(g), Some(s)) = (generation, status.as_object_mut()) {
            s.insert("observedGeneration".into(), g);
        }
    }
    Some(status)
}

/// The object with the simulated status, when that differs from the stored status.
pub fn update_for(key: (&str, &str), o: &Value) -> Option<Value> {
    let status = status_for(key, o)?;
    if o.get("status") == Some(&status) {
        return None;
    }
    let mut next = o.clone();
    next["status"] = status;
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(g: &'a str, p: &'a str) -> (&'a str, &'a str) {
        (g, p)
    }

    #[test]
    fn deployments_follow_the_annotation_and_the_generation() {
        let k = key("apps", "deployments");
        let d = json!({"metadata": {"name": "web", "generation": 3}, "spec": {"replicas": 2}});
        let s = status_for(k, &d).unwrap();
        assert_eq!(s["availableReplicas"], 2);
        assert_eq!(s["observedGeneration"], 3);
        let mut failing = d.clone();
        failing["metadata"]["annotations"] = json!({ANNOTATION: "fail"});
        let s = status_for(k, &failing).unwrap();
        assert_eq!(s["conditions"][1]["reason"], "ProgressDeadlineExceeded");
        assert!(s.get("availableReplicas").is_none());
        // Once written, the same status is not written again.
        let updated = update_for(k, &d).unwrap();
        assert!(update_for(k, &updated).is_none());
    }

    #[test]
    fn other_objects_and_deleting_ones_are_left_alone() {
        let cm = json!({"metadata": {"name": "c"}});
        assert!(status_for(key("", "configmaps"), &cm).is_none());
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "ClusterIP"}});
        assert!(status_for(key("", "services"), &svc).is_none());
        let deleting =
            json!({"metadata": {"name": "w", "deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert!(status_for(key("apps", "deployments"), &deleting).is_none());
    }

    #[test]
    fn autoscalers_and_disruption_budgets_get_a_controllers_status() {
        let hpa = json!({"metadata": {"name": "h", "generation": 2}, "spec": {"minReplicas": 2, "maxReplicas": 5}});
        let s = status_for(key("autoscaling", "horizontalpodautoscalers"), &hpa).unwrap();
        assert_eq!(
            (s["currentReplicas"].clone(), s["desiredReplicas"].clone()),
            (json!(2), json!(2))
        );
        assert_eq!(s["conditions"][1]["reason"], "ValidMetricFound");
        assert_eq!(s["observedGeneration"], 2);
        let pdb = json!({"metadata": {"name": "p", "generation": 1}, "spec": {"minAvailable": 2}});
        let s = status_for(key("policy", "poddisruptionbudgets"), &pdb).unwrap();
        assert_eq!(s["currentHealthy"], 2);
        assert_eq!(s["observedGeneration"], 1);
        let cj =
            json!({"metadata": {"name": "c", "generation": 1}, "spec": {"schedule": "* * * * *"}});
        assert!(status_for(key("batch", "cronjobs"), &cj).is_none());
    }

    #[test]
    fn jobs_and_claims_have_a_failed_state_and_a_held_one() {
        let job = |a: &str| json!({"metadata": {"name": "j", "generation": 1, "annotations": {ANNOTATION: a}}});
        assert_eq!(
            status_for(key("batch", "jobs"), &job("fail")).unwrap()["conditions"][0]["type"],
            "Failed"
        );
        assert_eq!(
            status_for(key("batch", "jobs"), &job("hold")).unwrap()["active"],
            1
        );
        let pvc = json!({"metadata": {"name": "p"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}});
        let s = status_for(key("", "persistentvolumeclaims"), &pvc).unwrap();
        assert_eq!(s["phase"], "Bound");
        assert_eq!(s["capacity"]["storage"], "1Gi");
        assert!(s.get("observedGeneration").is_none());
    }
}
