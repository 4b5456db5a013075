//! The per-reconcile deadline of the ModuleInstance and ModulePackage controllers
//! (`--reconcile-timeout`; docs/design/operator.md §2.1 classification, §2.6, issue 17 "a hung registry
//! cannot pin a worker").
//!
//! Rules:
//! - The manager runs each reconcile under [`bounded`]. When the deadline passes, the reconcile
//!   future is dropped (a render already running on a blocking thread finishes there, bounded by
//!   the evaluator's own wall-time limit, but no worker waits for it).
//! - A timed-out reconcile is a classified transient failure, not an error: it goes through the
//!   one reconcile frame ([`super::reconcile::frame`]) with a single phase of its own: the object
//!   is read again, Ready=False `ReconcileTimedOut` with a message naming the deadline, the
//!   reconcile failure counter +1, `nextRetryAt` set, one optimistic status patch, a Warning event
//!   (action `Reconcile`) once per transition; requeue with the §2.1 backoff of the counter. The
//!   §7.2 metrics observe it once, as `failed_transient`, with its whole duration (the dropped
//!   reconcile observed nothing).
//! - observedGeneration, lastAttempted*, lastApplied*, the inventory and history are untouched
//!   (nothing is known about how far the reconcile got).
//!
//! The kinds it bounds are the [`Rendered`] kinds of `render_apply.rs`: their status (conditions and
//! the shared reconcile bookkeeping) is reached through that trait, not a second one.

use std::future::Future;
use std::time::{Duration, Instant};

use crds::common::FailureCounters;

use super::context::{Context, Reconciled};
use super::outcome::backoff;
use super::reconcile::{self, End, Failure, Halt, Mode, Run};
use super::render_apply::{counter_u32, Rendered, RenderedStatus};
use super::runtime::{self, Error};

/// The Ready reason of a reconcile that passed its deadline.
pub const REASON: &str = crds::conditions::reasons::RECONCILE_TIMED_OUT;

/// The message of a timed-out reconcile.
pub fn message(after: Duration) -> String {
    format!(
        "the reconcile did not finish within {after:?} (--reconcile-timeout): a registry, \
         artifact server or API call hung; retrying"
    )
}

/// Runs `reconcile` of the `K` named `namespace/name` with `ctx.reconcile_timeout` (module
/// docs).
pub async fn bounded<K: Rendered>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    reconcile: impl Future<Output = Result<Reconciled, Error>>,
) -> Result<Reconciled, Error> {
    let started = Instant::now();
    let after = ctx.reconcile_timeout;
    match tokio::time::timeout(after, reconcile).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(kind = K::KIND, namespace, name, after = ?after, "reconcile timed out");
            reconcile::frame::<K>(ctx, namespace, name, Mode::Lead, started, async |run| {
                timed_out(run, after)
            })
            .await
        }
    }
}

/// The one phase of a timed-out reconcile: the failure counter, `nextRetryAt`, the transient
/// failure with the §2.1 backoff of the counter (module docs).
fn timed_out<K: Rendered>(run: &mut Run<'_, K>, after: Duration) -> Result<End, Halt> {
    let r = run.status().reconcile_mut();
    let c = r
        .failure_counters
        .get_or_insert_with(FailureCounters::default);
    let counter = counter_u32(c.reconcile);
    c.reconcile = c.reconcile.saturating_add(1);
    let requeue = backoff(counter);
    r.next_retry_at = Some(runtime::time_after(requeue));
    Err(Failure::transient(REASON, ACTION, message(after))
        .after(Some(requeue))
        .into())
}

/// The event action of a timed-out reconcile.
const ACTION: &str = "Reconcile";
