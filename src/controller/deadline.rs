//! The per-reconcile deadline of the ModuleInstance and ModulePackage controllers
//! (`--reconcile-timeout`; operator-spec.md §2.1 classification, §2.6, issue 17 "a hung registry
//! cannot pin a worker").
//!
//! Rules:
//! - The manager runs each reconcile under [`bounded`]. When the deadline passes, the reconcile
//!   future is dropped (a render already running on a blocking thread finishes there, bounded by
//!   the evaluator's own wall-time limit, but no worker waits for it).
//! - A timed-out reconcile is a classified transient failure, not an error: the object is read
//!   again, Ready=False `ReconcileTimedOut` with a message naming the deadline, the reconcile
//!   failure counter +1, `nextRetryAt` set, one optimistic status patch, a Warning event
//!   (action `Reconcile`) once per transition; requeue with the §2.1 backoff of the counter.
//! - observedGeneration, lastAttempted*, lastApplied*, the inventory and history are untouched
//!   (nothing is known about how far the reconcile got).
//!
//! The kinds it bounds are the [`Rendered`] kinds of `render_apply.rs`: their status (conditions and
//! the shared reconcile bookkeeping) is reached through that trait, not a second one.

use std::future::Future;
use std::time::Duration;

use crds::common::FailureCounters;
use crds::conditions::{self, HasConditions};
use kube::{Api, Resource};

use super::context::{Context, Reconciled};
use super::outcome::{backoff, Outcome};
use super::render_apply::{counter_u32, Rendered, RenderedStatus};
use super::runtime::{self, Error, EventType, Patcher};

/// The Ready reason of a reconcile that passed its deadline.
pub const REASON: &str = "ReconcileTimedOut";

/// The message of a timed-out reconcile.
pub fn message(after: Duration) -> String {
    format!(
        "the reconcile did not finish within {after:?} (--reconcile-timeout): a registry, \
         artifact server or API call hung; retrying"
    )
}

/// Runs `reconcile` of `api`/`name` with `ctx.reconcile_timeout` (module docs).
pub async fn bounded<K>(
    ctx: &Context,
    api: Api<K>,
    name: &str,
    reconcile: impl Future<Output = Result<Reconciled, Error>>,
) -> Result<Reconciled, Error>
where
    K: Rendered,
{
    let after = ctx.reconcile_timeout;
    match tokio::time::timeout(after, reconcile).await {
        Ok(r) => r,
        Err(_) => timed_out(ctx, api, name, after).await,
    }
}

async fn timed_out<K>(
    ctx: &Context,
    api: Api<K>,
    name: &str,
    after: Duration,
) -> Result<Reconciled, Error>
where
    K: Rendered,
{
    let kind = K::kind(&());
    let what = format!("{kind} {}/{name}", api_namespace(&api));
    tracing::warn!(object = %what, after = ?after, "reconcile timed out");
    let Some(mut obj) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading {what}"), e))?
    else {
        return Ok(Reconciled::done());
    };
    let mut patcher = Patcher::new(api, &obj, what)?;
    let generation = obj.meta().generation;
    let msg = message(after);
    let now = runtime::now();
    let status = obj.status_mut();
    let prior = status.conditions().to_vec();
    let r = status.reconcile_mut();
    let c = r
        .failure_counters
        .get_or_insert_with(FailureCounters::default);
    let counter = counter_u32(c.reconcile);
    c.reconcile = c.reconcile.saturating_add(1);
    let requeue = backoff(counter);
    r.next_retry_at = Some(runtime::time_after(requeue));
    conditions::mark_not_ready(status.conditions_mut(), REASON, &msg, generation, &now);
    patcher.patch_status(&obj).await?;
    if super::events::is_transition(&prior, REASON, &msg) {
        ctx.events
            .publish(&obj, EventType::Warning, REASON, "Reconcile", &msg)
            .await;
    }
    Ok(Reconciled {
        requeue: Some(requeue),
        outcome: Some(Outcome::FailedTransient),
        reason: Some(REASON),
    })
}

fn api_namespace<K: Resource>(api: &Api<K>) -> String {
    api.namespace().unwrap_or_default().to_owned()
}
