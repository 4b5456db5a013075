//! Health in kstatus terms, and the stage-boundary wait (docs/design/principles.md rule 7, §1.3–§1.4).
//!
//! Rules ([`assess`], a pure function of the live object):
//! - Any object with `metadata.deletionTimestamp` is `InProgress` (terminating).
//! - Any object whose `status.observedGeneration` is present and differs from
//!   `metadata.generation` is `InProgress` (the controller has not seen the latest spec).
//! - CustomResourceDefinition: `Established=True` → Current; `NamesAccepted=False` → Failed.
//! - Namespace: phase `Active` (or no phase yet) → Current; `Terminating` → InProgress.
//! - Deployment: a `Progressing` condition with reason `ProgressDeadlineExceeded` → Failed;
//!   Current when updated, ready and available replicas all reach `spec.replicas` (default 1)
//!   and no old replicas remain (`status.replicas` = `spec.replicas`).
//! - StatefulSet: Current when ready and updated replicas reach `spec.replicas` and, for the
//!   RollingUpdate strategy, `currentRevision` = `updateRevision`.
//! - DaemonSet: Current when updated, available and ready counts reach
//!   `desiredNumberScheduled` (and the latter was observed).
//! - Job: `Complete=True` → Current; `Failed=True` → Failed; otherwise InProgress.
//! - Service: type LoadBalancer needs `status.loadBalancer.ingress`; other types are Current.
//! - PersistentVolumeClaim: phase `Bound` → Current; `Lost` → Failed.
//! - Generic (any other kind, and CRs): `Stalled=True` → Failed; `Reconciling=True` → InProgress;
//!   `Ready=False` → InProgress; `Ready=True` or no conditions → Current.
//! - Which rendered objects a health check looks at ([`needs_check`]): not those annotated
//!   [`super::WAIT_ANNOTATION`]` = "disabled"`, and not the kinds whose rules above make them
//!   `Current` whenever they exist (ConfigMap, Secret, ServiceAccount, RBAC objects,
//!   NetworkPolicy, PodDisruptionBudget, quotas and limit ranges, classes, Services other than
//!   `LoadBalancer`) nor the ones stage 0 already waited for (Namespace, CRD). Every other kind
//!   (workloads, PVCs, custom resources with conditions) is read live.
//! - Custom health checks ([`cel`], `spec.healthCheckExprs`) replace these rules for the kinds
//!   they name.
//! - The wait ([`wait_for`]) polls every interval until every object is Current; it returns at
//!   once with [`Error::HealthFailed`] when an object is Failed (fail fast), with
//!   [`Error::Cancelled`] when the cancel signal fires (a newer desired state), and with
//!   [`Error::Timeout`] naming the objects not ready at the deadline.

pub mod cel;

use std::time::Duration;

use serde_json::Value;

use super::error::Error;

/// kstatus-style status of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Reconciled and ready.
    Current,
    /// Still progressing (with a reason).
    InProgress(String),
    /// A terminal failure (with the message).
    Failed(String),
    /// The object does not exist.
    NotFound,
}

fn cond<'a>(o: &'a Value, t: &str) -> Option<&'a Value> {
    o.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
}

fn cond_status<'a>(o: &'a Value, t: &str) -> Option<&'a str> {
    cond(o, t)?.get("status")?.as_str()
}

fn cond_message(o: &Value, t: &str) -> String {
    cond(o, t)
        .and_then(|c| c.get("message").or_else(|| c.get("reason")))
        .and_then(Value::as_str)
        .unwrap_or(t)
        .to_string()
}

fn int(o: &Value, ptr: &str) -> Option<i64> {
    o.pointer(ptr).and_then(Value::as_i64)
}

fn progress(what: &str, have: i64, want: i64) -> Health {
    Health::InProgress(format!("{what}: {have} of {want}"))
}

/// The kstatus of a live object (see the module rules).
pub fn assess(o: &Value) -> Health {
    if o.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return Health::InProgress("terminating".into());
    }
    if let (Some(observed), Some(generation)) = (
        int(o, "/status/observedGeneration"),
        int(o, "/metadata/generation"),
    ) {
        if observed != generation {
            return Health::InProgress(format!(
                "observedGeneration {observed} behind generation {generation}"
            ));
        }
    }
    let api = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let group = api.split_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            if cond_status(o, "NamesAccepted") == Some("False") {
                return Health::Failed(cond_message(o, "NamesAccepted"));
            }
            if cond_status(o, "Established") == Some("True") {
                Health::Current
            } else {
                Health::InProgress("not established".into())
            }
        }
        ("", "Namespace") => match o.pointer("/status/phase").and_then(Value::as_str) {
            Some("Terminating") => Health::InProgress("terminating".into()),
            _ => Health::Current,
        },
        ("apps", "Deployment") => deployment(o),
        ("apps", "StatefulSet") => statefulset(o),
        ("apps", "DaemonSet") => daemonset(o),
        ("batch", "Job") => {
            if cond_status(o, "Failed") == Some("True") {
                Health::Failed(cond_message(o, "Failed"))
            } else if cond_status(o, "Complete") == Some("True") {
                Health::Current
            } else {
                Health::InProgress("job not complete".into())
            }
        }
        ("", "Service") => {
            let lb = o.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer");
            let ingress = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if lb && !ingress {
                Health::InProgress("load balancer not provisioned".into())
            } else {
                Health::Current
            }
        }
        ("", "PersistentVolumeClaim") => match o.pointer("/status/phase").and_then(Value::as_str) {
            Some("Bound") => Health::Current,
            Some("Lost") => Health::Failed("claim lost".into()),
            _ => Health::InProgress("claim not bound".into()),
        },
        _ => generic(o),
    }
}

fn generic(o: &Value) -> Health {
    if cond_status(o, "Stalled") == Some("True") {
        return Health::Failed(cond_message(o, "Stalled"));
    }
    if cond_status(o, "Reconciling") == Some("True") {
        return Health::InProgress(cond_message(o, "Reconciling"));
    }
    if cond_status(o, "Ready") == Some("False") {
        return Health::InProgress(cond_message(o, "Ready"));
    }
    Health::Current
}

fn deployment(o: &Value) -> Health {
    if cond(o, "Progressing")
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        == Some("ProgressDeadlineExceeded")
    {
        return Health::Failed(cond_message(o, "Progressing"));
    }
    let want = int(o, "/spec/replicas").unwrap_or(1);
    let s = |f: &str| int(o, &format!("/status/{f}")).unwrap_or(0);
    if s("updatedReplicas") < want {
        return progress("updated replicas", s("updatedReplicas"), want);
    }
    if s("replicas") > s("updatedReplicas") {
        return Health::InProgress(format!(
            "old replicas pending termination: {}",
            s("replicas") - s("updatedReplicas")
        ));
    }
    if s("readyReplicas") < want {
        return progress("ready replicas", s("readyReplicas"), want);
    }
    if s("availableReplicas") < want {
        return progress("available replicas", s("availableReplicas"), want);
    }
    Health::Current
}

fn statefulset(o: &Value) -> Health {
    let want = int(o, "/spec/replicas").unwrap_or(1);
    let s = |f: &str| int(o, &format!("/status/{f}")).unwrap_or(0);
    if s("readyReplicas") < want {
        return progress("ready replicas", s("readyReplicas"), want);
    }
    let rolling = o
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        .is_none_or(|t| t == "RollingUpdate");
    if rolling {
        if s("updatedReplicas") < want {
            return progress("updated replicas", s("updatedReplicas"), want);
        }
        let cur = o.pointer("/status/currentRevision");
        let upd = o.pointer("/status/updateRevision");
        if cur != upd {
            return Health::InProgress("revision rollout in progress".into());
        }
    }
    Health::Current
}

fn daemonset(o: &Value) -> Health {
    let Some(want) = int(o, "/status/desiredNumberScheduled") else {
        return Health::InProgress("not yet observed".into());
    };
    let s = |f: &str| int(o, &format!("/status/{f}")).unwrap_or(0);
    for f in ["updatedNumberScheduled", "numberAvailable", "numberReady"] {
        if s(f) < want {
            return progress(f, s(f), want);
        }
    }
    Health::Current
}

/// Whether `o` (a rendered object) opts out of waits with [`super::WAIT_ANNOTATION`].
pub fn wait_disabled(o: &Value) -> bool {
    super::policy::is_disabled(o, super::WAIT_ANNOTATION)
}

/// Whether a health check reads `o` (a rendered object) live (module rules).
pub fn needs_check(o: &Value) -> bool {
    if wait_disabled(o) {
        return false;
    }
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
    let group = o
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    let always_current = match group {
        "" => matches!(
            kind,
            "ConfigMap"
                | "Secret"
                | "ServiceAccount"
                | "Namespace"
                | "ResourceQuota"
                | "LimitRange"
                | "Endpoints"
        ),
        "rbac.authorization.k8s.io" => true,
        "networking.k8s.io" => matches!(kind, "NetworkPolicy" | "IngressClass"),
        "policy" => kind == "PodDisruptionBudget",
        "scheduling.k8s.io" | "storage.k8s.io" | "node.k8s.io" => true,
        "apiextensions.k8s.io" => kind == "CustomResourceDefinition",
        "admissionregistration.k8s.io" => true,
        _ => false,
    };
    if always_current {
        return false;
    }
    if group.is_empty() && kind == "Service" {
        return o.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer");
    }
    true
}

/// A cancellation signal for waits: fires when a newer desired state arrives.
#[derive(Debug, Clone)]
pub struct Cancel(tokio::sync::watch::Receiver<bool>);

/// The sending side of [`Cancel`].
#[derive(Debug)]
pub struct CancelHandle(tokio::sync::watch::Sender<bool>);

impl CancelHandle {
    /// Fires the signal (every clone of the paired [`Cancel`] sees it).
    pub fn cancel(&self) {
        let _ = self.0.send(true);
    }
}

impl Cancel {
    /// A signal and its handle.
    pub fn pair() -> (CancelHandle, Cancel) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (CancelHandle(tx), Cancel(rx))
    }

    /// A signal that never fires.
    pub fn never() -> Cancel {
        // With the sender dropped the value stays `false` forever.
        let (tx, rx) = tokio::sync::watch::channel(false);
        drop(tx);
        Cancel(rx)
    }

    /// Whether the signal has fired.
    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when the signal fires (never, if the handle is dropped without firing).
    pub async fn cancelled(&mut self) {
        loop {
            if *self.0.borrow() {
                return;
            }
            if self.0.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Polls `fetch` for each of `names` until all are Current (see the module rules).
///
/// `fetch(i)` returns the live object `i` (`None` when it does not exist).
pub async fn wait_for<F, Fut>(
    names: &[String],
    mut fetch: F,
    timeout: Duration,
    interval: Duration,
    mut cancel: Cancel,
) -> Result<(), Error>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Value>, Error>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pending: Vec<usize> = (0..names.len()).collect();
    loop {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        let mut still = Vec::new();
        let mut why = Vec::new();
        for &i in &pending {
            let health = match fetch(i).await? {
                Some(o) => assess(&o),
                None => Health::NotFound,
            };
            match health {
                Health::Current => {}
                Health::Failed(message) => {
                    return Err(Error::HealthFailed {
                        object: names[i].clone(),
                        message,
                    })
                }
                Health::InProgress(m) => {
                    still.push(i);
                    why.push(format!("{}: {m}", names[i]));
                }
                Health::NotFound => {
                    still.push(i);
                    why.push(format!("{}: not found", names[i]));
                }
            }
        }
        if still.is_empty() {
            return Ok(());
        }
        pending = still;
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                waiting_for: why,
                after: timeout,
            });
        }
        let sleep_until = (tokio::time::Instant::now() + interval).min(deadline);
        tokio::select! {
            _ = tokio::time::sleep_until(sleep_until) => {}
            _ = cancel.cancelled() => return Err(Error::Cancelled),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn h(v: Value) -> Health {
        assess(&v)
    }

    #[test]
    fn deployments() {
        let d = |status: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "generation": 2}, "spec": {"replicas": 2},
                "status": status})
        };
        assert!(matches!(h(d(json!({}))), Health::InProgress(_)));
        assert!(matches!(
            h(d(json!({"observedGeneration": 1, "updatedReplicas": 2, "replicas": 2,
                "readyReplicas": 2, "availableReplicas": 2}))),
            Health::InProgress(m) if m.contains("observedGeneration")
        ));
        assert_eq!(
            h(d(
                json!({"observedGeneration": 2, "updatedReplicas": 2, "replicas": 2,
                "readyReplicas": 2, "availableReplicas": 2})
            )),
            Health::Current
        );
        assert!(matches!(
            h(d(json!({"observedGeneration": 2, "updatedReplicas": 2, "replicas": 3,
                "readyReplicas": 2, "availableReplicas": 2}))),
            Health::InProgress(m) if m.contains("old replicas")
        ));
        assert!(matches!(
            h(d(json!({"conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded", "message": "deadline"}]}))),
            Health::Failed(m) if m == "deadline"
        ));
    }

    #[test]
    fn statefulsets_daemonsets_jobs() {
        let ss = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
            "spec": {"replicas": 1}, "status": {"readyReplicas": 1, "updatedReplicas": 1,
            "currentRevision": "a", "updateRevision": "b"}});
        assert!(matches!(h(ss.clone()), Health::InProgress(m) if m.contains("revision")));
        let mut ok = ss;
        ok["status"]["updateRevision"] = json!("a");
        assert_eq!(h(ok), Health::Current);
        let ds = |s: Value| json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "status": s});
        assert!(matches!(h(ds(json!({}))), Health::InProgress(_)));
        assert!(matches!(
            h(ds(json!({"desiredNumberScheduled": 2, "updatedNumberScheduled": 2,
                "numberAvailable": 1, "numberReady": 2}))),
            Health::InProgress(m) if m.contains("numberAvailable")
        ));
        assert_eq!(
            h(ds(
                json!({"desiredNumberScheduled": 2, "updatedNumberScheduled": 2,
                "numberAvailable": 2, "numberReady": 2})
            )),
            Health::Current
        );
        let job = |c: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "status": {"conditions": c}});
        assert!(matches!(h(job(json!([]))), Health::InProgress(_)));
        assert_eq!(
            h(job(json!([{"type": "Complete", "status": "True"}]))),
            Health::Current
        );
        assert!(matches!(
            h(job(json!([{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]))),
            Health::Failed(m) if m == "BackoffLimitExceeded"
        ));
    }

    #[test]
    fn a_health_check_reads_only_objects_that_can_be_unhealthy() {
        let o = |api: &str, kind: &str, extra: Value| {
            let mut v = json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}});
            if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
                m.extend(e.clone());
            }
            v
        };
        assert!(needs_check(&o("apps/v1", "Deployment", json!({}))));
        assert!(needs_check(&o("batch/v1", "Job", json!({}))));
        assert!(needs_check(&o("v1", "PersistentVolumeClaim", json!({}))));
        assert!(needs_check(&o("example.com/v1", "Widget", json!({}))));
        assert!(needs_check(&o(
            "v1",
            "Service",
            json!({"spec": {"type": "LoadBalancer"}})
        )));
        assert!(!needs_check(&o(
            "v1",
            "Service",
            json!({"spec": {"type": "ClusterIP"}})
        )));
        assert!(!needs_check(&o("v1", "ConfigMap", json!({}))));
        assert!(!needs_check(&o("v1", "Namespace", json!({}))));
        assert!(!needs_check(&o(
            "rbac.authorization.k8s.io/v1",
            "Role",
            json!({})
        )));
        assert!(!needs_check(&o(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            json!({})
        )));
        let opted_out = o(
            "apps/v1",
            "Deployment",
            json!({"metadata": {"name": "x", "annotations": {"opm.dev/wait": "disabled"}}}),
        );
        assert!(!needs_check(&opted_out));
    }

    #[test]
    fn crds_namespaces_services_generic() {
        let crd = |c: Value| json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "status": {"conditions": c}});
        assert_eq!(
            h(crd(json!([{"type": "Established", "status": "True"}]))),
            Health::Current
        );
        assert!(matches!(h(crd(json!([]))), Health::InProgress(_)));
        assert!(matches!(
            h(crd(
                json!([{"type": "NamesAccepted", "status": "False", "message": "clash"}])
            )),
            Health::Failed(_)
        ));
        assert!(matches!(
            h(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "status": {"phase": "Terminating"}})
            ),
            Health::InProgress(_)
        ));
        assert!(matches!(
            h(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "LoadBalancer"}})
            ),
            Health::InProgress(_)
        ));
        assert_eq!(
            h(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "ClusterIP"}})
            ),
            Health::Current
        );
        let cr = |c: Value| json!({"apiVersion": "x.dev/v1", "kind": "Thing", "metadata": {"name": "t", "generation": 3}, "status": {"observedGeneration": 3, "conditions": c}});
        assert_eq!(
            h(cr(json!([{"type": "Ready", "status": "True"}]))),
            Health::Current
        );
        assert!(matches!(
            h(cr(json!([{"type": "Ready", "status": "False"}]))),
            Health::InProgress(_)
        ));
        assert!(matches!(
            h(cr(json!([{"type": "Stalled", "status": "True", "message": "bad"}]))),
            Health::Failed(m) if m == "bad"
        ));
        assert!(matches!(
            h(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}})
            ),
            Health::InProgress(_)
        ));
    }

    #[tokio::test]
    async fn wait_fails_fast_times_out_and_cancels() {
        let names = vec!["Job/n/j".to_string()];
        let failed = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": [{"type": "Failed", "status": "True", "message": "boom"}]}});
        let start = std::time::Instant::now();
        let r = wait_for(
            &names,
            |_| {
                let f = failed.clone();
                async move { Ok(Some(f)) }
            },
            Duration::from_secs(30),
            Duration::from_millis(10),
            Cancel::never(),
        )
        .await;
        assert!(matches!(r, Err(Error::HealthFailed { .. })));
        assert!(start.elapsed() < Duration::from_secs(5), "fail fast");

        let r = wait_for(
            &names,
            |_| async { Ok(None) },
            Duration::from_millis(50),
            Duration::from_millis(10),
            Cancel::never(),
        )
        .await;
        assert!(
            matches!(r, Err(Error::Timeout { ref waiting_for, .. }) if waiting_for[0].contains("not found"))
        );

        let (handle, cancel) = Cancel::pair();
        let task = tokio::spawn(wait_for_owned(names.clone(), cancel));
        tokio::time::sleep(Duration::from_millis(30)).await;
        handle.cancel();
        let r = task.await.unwrap();
        assert!(matches!(r, Err(Error::Cancelled)));
    }

    async fn wait_for_owned(names: Vec<String>, cancel: Cancel) -> Result<(), Error> {
        wait_for(
            &names,
            |_| async { Ok(None) },
            Duration::from_secs(30),
            Duration::from_millis(10),
            cancel,
        )
        .await
    }
}
