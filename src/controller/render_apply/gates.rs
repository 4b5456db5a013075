//! The gates of a render-and-apply reconcile (docs/design/operator.md §2.2 gates 3–6, §2.3 step
//! 1): what ends it before anything is rendered.
//!
//! Rules:
//! - A missing `opmodel.dev/cleanup` finalizer is added and the reconcile requeues at once (the
//!   generation predicate drops that event); a deleting object without it is done.
//! - A deleting object is deleted (`super::deletion`, §2.4); suspend never blocks it.
//! - `suspend` marks Suspended with observedGeneration, one patch, Normal `Suspended` (action
//!   `Suspend`) on the transition, no requeue, nothing else touched.
//! - A prior Ready reason `Suspended` emits Normal `Resumed` (action `Resume`).
//! - Past the gates, the value of the reconcile-request annotation
//!   ([`crds::RECONCILE_REQUEST_ANNOTATION`], whose change wakes the controller) is recorded as
//!   `status.lastHandledReconcileAt`, whatever the reconcile's end.

use std::time::Duration;

use crds::conditions::{self, reasons, types, HasConditions};
use crds::FINALIZER_CLEANUP;

use super::{actions, deletion, RenderRun, Rendered, RenderedStatus};
use crate::controller::reconcile::{End, Halt, Mark, Note};
use crate::controller::runtime::EventType;

/// The Resumed event text.
pub const RESUMED_MESSAGE: &str = "Reconciliation resumed";

/// Gates 3–6 (module docs): `Err` ends the reconcile.
pub(super) async fn pass<K: Rendered>(rr: &mut RenderRun<'_, '_, K>) -> Result<(), Halt> {
    let run = &mut *rr.run;
    let deleting = run.deleting();
    if !run.has_finalizer(FINALIZER_CLEANUP) {
        if deleting {
            return Err(End::done().into());
        }
        run.add_finalizer(FINALIZER_CLEANUP).await?;
        return Err(End::requeue(Duration::ZERO).into());
    }
    if deleting {
        return Err(deletion::delete(rr).await.map_or_else(|h| h, Halt::from));
    }
    let run = &mut *rr.run;
    let prior_ready_reason = conditions::get(run.prior.conditions(), types::READY)
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    if run.obj.settings().suspend == Some(true) {
        let generation = run.generation();
        *run.status().observed_generation_mut() = generation;
        return Err(suspended(&prior_ready_reason).into());
    }
    // A reconcile request (`crds::RECONCILE_REQUEST_ANNOTATION`) is handled by this
    // reconcile, whatever its end.
    if let Some(token) = run.requested() {
        run.status().reconcile_mut().last_handled_reconcile_at = Some(token);
    }
    if prior_ready_reason == reasons::SUSPENDED {
        run.event(
            EventType::Normal,
            reasons::RESUMED,
            actions::RESUME,
            RESUMED_MESSAGE,
        )
        .await;
    }
    Ok(())
}

/// The end of a suspended object (module docs), whose Ready reason was `prior_ready_reason`.
fn suspended(prior_ready_reason: &str) -> End {
    End::marked(Mark::Suspended).note_if(
        prior_ready_reason != reasons::SUSPENDED,
        Note::normal(
            reasons::SUSPENDED,
            actions::SUSPEND,
            conditions::messages::SUSPENDED,
        ),
    )
}
