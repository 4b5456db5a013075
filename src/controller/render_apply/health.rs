//! Ready means healthy (issue 29): the kstatus verdict of the applied objects, its conditions,
//! its event and the rollout timeout.
//!
//! Rules:
//! - After a successful apply and on a NoOp, every applied object the health check reads
//!   ([`crate::apply::health::needs_check`]) is read live (controller identity, on the cluster
//!   the object applies to: `super::target`) and assessed in kstatus terms. All `Current` →
//!   Ready=True `ReconciliationSucceeded`. Some `Failed` → Ready=False `HealthCheckFailed` naming
//!   them. Some not `Current` yet → Ready=Unknown `Progressing` (Reconciling=True) naming them,
//!   requeued after `--health-poll-interval` (a worker never blocks on a rollout); once
//!   `spec.rollout.timeout` (else `--health-timeout`) has passed since the wait began,
//!   Ready=False `HealthCheckFailed` “timed out …”.
//! - The wait begins with the apply, or — for an instance that was Ready when its workloads
//!   degraded — when the degradation was seen (`Progressing` keeps that start in its
//!   lastTransitionTime), so a workload rolling again an hour after the apply is awaited, not
//!   reported timed out at once. Degradations and recoveries after the apply reach the reconcile
//!   through the workload watch ([`crate::controller::workloads`]).
//! - A health failure keeps the apply's record (inventory, history, lastApplied*: the apply
//!   itself succeeded), counts no failure, emits a Warning once per transition and is checked
//!   again after [`HEALTH_RECHECK`] (or the kind's interval when shorter). `rollout.timeout: 0`
//!   turns the check off. A message names at most [`HEALTH_NAMES`] objects, then “and N more”.
//!   The `ReconciliationSucceeded` event is emitted when Ready=True is reached, after the wait
//!   too (`super::commit`).
//! - Custom health checks (`spec.healthCheckExprs`, [`crate::apply::health::cel`]): compiled once
//!   per generation of the object (`Context::health_rules`) at the start of every apply or
//!   NoOp; an expression that does not compile, or two entries for one kind, stall
//!   `HealthCheckExprInvalid` naming the entry and the expression, before anything is applied.
//!   The objects of the kinds they name are judged by them instead of kstatus.

use std::sync::Arc;
use std::time::Duration;

use crds::conditions::{self, reasons, types, HasConditions};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::{actions, RenderRun, Rendered, SUCCEEDED_MESSAGE};
use crate::apply::{self, Engine};
use crate::controller::reconcile::{Failure, Mark, Note, When};

/// How soon a failed health check is looked at again.
pub const HEALTH_RECHECK: Duration = Duration::from_secs(30);
/// The most objects a health message names.
pub const HEALTH_NAMES: usize = 5;

/// The applied objects' health (module docs, “Health”).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every object read is Current (or the check is off).
    Ready,
    /// Some objects are not Current yet and the timeout has not passed (the message).
    Waiting(String),
    /// Some objects are Failed, or not Current after the timeout (the message).
    Failed(String),
}

/// `what` and the first [`HEALTH_NAMES`] of `items` (`…; and N more`).
fn name_some(items: &[String]) -> String {
    let mut out = items
        .iter()
        .take(HEALTH_NAMES)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > HEALTH_NAMES {
        out.push_str(&format!("; and {} more", items.len() - HEALTH_NAMES));
    }
    out
}

/// The verdict of a health report (`report`: per object, its kstatus or the read error),
/// `elapsed` since the apply and the rollout `timeout` (module docs).
pub fn verdict_of(
    report: Vec<(String, Result<apply::health::Health, apply::Error>)>,
    elapsed: Duration,
    timeout: Duration,
) -> Verdict {
    use apply::health::Health;
    let mut failed = Vec::new();
    let mut waiting = Vec::new();
    for (name, h) in report {
        match h {
            Ok(Health::Current) => {}
            Ok(Health::Failed(m)) => failed.push(format!("{name}: {m}")),
            Ok(Health::InProgress(m)) => waiting.push(format!("{name}: {m}")),
            Ok(Health::NotFound) => waiting.push(format!("{name}: not found")),
            Err(e) => waiting.push(format!("{name}: status unknown: {e}")),
        }
    }
    if !failed.is_empty() {
        return Verdict::Failed(format!(
            "{} object(s) failed: {}",
            failed.len(),
            name_some(&failed)
        ));
    }
    if waiting.is_empty() {
        return Verdict::Ready;
    }
    if elapsed >= timeout {
        return Verdict::Failed(format!(
            "timed out after {} waiting for {} object(s) to become ready: {}",
            crds::duration::format_go(timeout),
            waiting.len(),
            name_some(&waiting)
        ));
    }
    Verdict::Waiting(format!(
        "waiting for {} object(s) to become ready: {}",
        waiting.len(),
        name_some(&waiting)
    ))
}

/// What a health check reads with: the engine on the target cluster and the custom rules.
pub(super) struct Checks<'e> {
    /// The engine acting on the cluster the objects are applied to.
    pub engine: &'e Engine,
    /// The compiled `spec.healthCheckExprs` (`None`: kstatus only).
    pub rules: Option<&'e apply::health::cel::HealthRules>,
}

/// The compiled `spec.healthCheckExprs` (module docs), or the stall naming the bad entry.
pub(super) fn rules<K: Rendered>(
    rr: &RenderRun<'_, '_, K>,
) -> Result<Option<Arc<apply::health::cel::HealthRules>>, Failure> {
    let run = &*rr.run;
    let exprs = run.obj.settings().health_check_exprs;
    if exprs.is_empty() {
        // Rules compiled for an earlier generation go (no cost while none are cached).
        if !run.ctx.health_rules.is_empty() {
            run.ctx.health_rules.forget(&rr.changes_key());
        }
        return Ok(None);
    }
    run.ctx
        .health_rules
        .rules(&rr.changes_key(), run.generation(), exprs)
        .map_err(|e| {
            Failure::stalled(
                reasons::HEALTH_CHECK_EXPR_INVALID,
                actions::RECONCILE,
                format!("spec.{e}"),
            )
        })
}

/// The rollout timeout: `spec.rollout.timeout` (a malformed one is logged and the operator's
/// default used), else `--health-timeout`.
fn rollout_timeout<K: Rendered>(rr: &RenderRun<'_, '_, K>) -> Duration {
    let default = rr.run.ctx.health_timeout;
    match rr
        .run
        .obj
        .settings()
        .rollout
        .and_then(|r| r.timeout.as_deref())
    {
        None => default,
        Some(s) => crds::duration::parse_go(s).unwrap_or_else(|| {
            tracing::warn!(
                timeout = s,
                "spec.rollout.timeout is not a duration; using the default"
            );
            default
        }),
    }
}

/// The health of the applied `objects` (module docs); `applied_at` is when they were last
/// applied (`None`: by this reconcile).
pub(super) async fn check<K: Rendered>(
    rr: &RenderRun<'_, '_, K>,
    checks: &Checks<'_>,
    objects: &[Value],
    applied_at: Option<&Time>,
) -> Verdict {
    let timeout = rollout_timeout(rr);
    if timeout.is_zero() {
        return Verdict::Ready;
    }
    let report = checks
        .engine
        .health_of_with(objects, checks.rules)
        .await
        .into_iter()
        .map(|(r, h)| (r.to_string(), h))
        .collect();
    let elapsed = waiting_since(rr, applied_at).map_or(Duration::ZERO, |t| {
        let since = crds::k8s_openapi::jiff::Timestamp::now().duration_since(t);
        Duration::try_from(since).unwrap_or(Duration::ZERO)
    });
    verdict_of(report, elapsed, timeout)
}

/// Since when the objects have been awaited (`None`: from now), the start of the rollout
/// timeout: a reconcile that applies starts it; an instance that was Ready starts it now (its
/// workloads degraded after the apply: the wait is counted from when that was seen, not from an
/// apply long ago); one already waiting (Ready=Unknown `Progressing`) keeps the start it
/// recorded, or the last apply if later; otherwise it is the last apply.
fn waiting_since<K: Rendered>(
    rr: &RenderRun<'_, '_, K>,
    applied_at: Option<&Time>,
) -> Option<crds::k8s_openapi::jiff::Timestamp> {
    let applied = applied_at?.0;
    let ready = conditions::get(rr.run.prior.conditions(), types::READY)?;
    match (ready.status.as_str(), ready.reason.as_str()) {
        ("True", _) => None,
        ("Unknown", reasons::PROGRESSING) => Some(applied.max(ready.last_transition_time.0)),
        _ => Some(applied),
    }
}

/// The conditions of the health verdict and when to look again (`None`: Ready).
pub(super) fn mark<K: Rendered>(
    rr: &RenderRun<'_, '_, K>,
    verdict: &Verdict,
) -> (Mark, Option<Duration>) {
    match verdict {
        Verdict::Ready => (
            Mark::Ready(
                reasons::RECONCILIATION_SUCCEEDED,
                SUCCEEDED_MESSAGE.to_owned(),
            ),
            None,
        ),
        Verdict::Waiting(m) => (
            Mark::Progressing(reasons::PROGRESSING, m.clone()),
            Some(rr.run.ctx.health_poll),
        ),
        Verdict::Failed(m) => (
            Mark::NotReady(reasons::HEALTH_CHECK_FAILED, m.clone()),
            Some(
                rr.run
                    .interval
                    .map_or(HEALTH_RECHECK, |i| i.min(HEALTH_RECHECK)),
            ),
        ),
    }
}

/// The event of a health verdict that is not Ready: a Warning once per transition to
/// HealthCheckFailed; nothing while waiting.
pub(super) fn note(verdict: &Verdict) -> Option<Note> {
    match verdict {
        Verdict::Failed(m) => Some(
            Note::warning(reasons::HEALTH_CHECK_FAILED, actions::RECONCILE, m.clone())
                .when(When::Transition),
        ),
        Verdict::Ready | Verdict::Waiting(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::health::Health;

    fn report(items: &[(&str, Health)]) -> Vec<(String, Result<Health, apply::Error>)> {
        items
            .iter()
            .map(|(n, h)| ((*n).to_owned(), Ok(h.clone())))
            .collect()
    }

    #[test]
    fn a_failure_wins_waiting_times_out_and_messages_name_at_most_five() {
        let min = Duration::from_secs(60);
        let progressing = Health::InProgress("available replicas: 0 of 1".into());
        assert_eq!(
            verdict_of(report(&[("a", Health::Current)]), Duration::ZERO, min),
            Verdict::Ready
        );
        assert_eq!(
            verdict_of(
                report(&[
                    ("a", progressing.clone()),
                    ("b", Health::Failed("deadline".into()))
                ]),
                Duration::ZERO,
                min
            ),
            Verdict::Failed("1 object(s) failed: b: deadline".into())
        );
        assert_eq!(
            verdict_of(report(&[("a", progressing.clone()), ("c", Health::NotFound)]), Duration::from_secs(59), min),
            Verdict::Waiting(
                "waiting for 2 object(s) to become ready: a: available replicas: 0 of 1; c: not found"
                    .into()
            )
        );
        assert_eq!(
            verdict_of(report(&[("a", progressing.clone())]), min, min),
            Verdict::Failed(
                "timed out after 1m0s waiting for 1 object(s) to become ready: a: available replicas: 0 of 1"
                    .into()
            )
        );
        let many: Vec<(String, Health)> = (0..7)
            .map(|i| (format!("o{i}"), Health::NotFound))
            .collect();
        let many: Vec<(&str, Health)> = many.iter().map(|(n, h)| (n.as_str(), h.clone())).collect();
        let Verdict::Waiting(m) = verdict_of(report(&many), Duration::ZERO, min) else {
            panic!("not waiting")
        };
        assert!(m.ends_with("o4: not found; and 2 more"), "{m}");
        assert!(!m.contains("o5"), "{m}");
    }
}
