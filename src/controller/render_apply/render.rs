//! The render phase on a leased platform and the digests of its result (docs/design/operator.md
//! §2.2 phases 1–2, §2.3 steps 6–7, §6.1).
//!
//! Rules:
//! - **Render on a lease**: no recorded platform is Ready=False `PlatformNotReady` before any
//!   registry I/O, requeued after the kind's interval, else with backoff; the lease comes first
//!   for both kinds, so a context without the kind's renderer (only a test builds one: the
//!   manager runs no controller without it) is Stalled `RenderFailed` only once a platform is
//!   recorded. The render waits for one of the process's render slots
//!   ([`crate::render_lease::RenderSlots`], shared with the render API and the Platform build),
//!   runs on a blocking thread, and the slot and the lease are released when it ends; the
//!   render metrics observe it. Kernel errors are classified by their class
//!   ([`crate::controller::outcome::classify_render`]), never by text, Warning `<reason>`
//!   (action `Render`). A render that exhausted a budget (memory, steps, time) backs off per
//!   object and retries only in the process's one retry slot
//!   ([`crate::controller::fairness`]; the kind names the inputs the render depends on).
//! - **Digests**: one Warning `RenderWarning` (action `Render`) per render warning; the render
//!   digest and the inventory entries are the kernel's (computed once, when the render result is
//!   built); the inventory digest is that of the recorded entries: objects
//!   `opm.dev/apply: Ignore` ([`crate::apply::policy`]) are not recorded. An unknown policy value
//!   fails the apply that follows.

use std::sync::Arc;

use crds::conditions::reasons;
use serde_json::Value;

use super::{actions, RenderRun, Rendered};
use crate::apply;
use crate::controller::fairness::Admit;
use crate::controller::outcome::{classify_render, Outcome};
use crate::controller::reconcile::{Failure, Halt};
use crate::controller::runtime::{Error, EventType};
use crate::inventory;
use crate::kernel::{BuiltPlatform, KernelError, RenderResult, SkewPolicy};
use crate::render_lease::{Lease, Origin, RenderEnd};

/// A kernel error, classified by its class (module docs).
fn failure(e: &KernelError) -> Failure {
    let c = classify_render(e.class);
    let f = match c.outcome {
        Outcome::FailedStalled => Failure::stalled,
        _ => Failure::transient,
    };
    f(c.reason, actions::RENDER, e.to_string())
}

/// A lease of the platform store, or Ready=False `PlatformNotReady` (requeue after the
/// kind's interval, else backoff).
fn lease<K: Rendered>(rr: &RenderRun<'_, '_, K>) -> Result<Lease, Failure> {
    rr.run.ctx.store.lease().ok_or_else(|| {
        Failure::transient(
            reasons::PLATFORM_NOT_READY,
            actions::RENDER,
            "no platform is recorded: waiting for Platform cluster".to_owned(),
        )
        .after(rr.run.interval)
    })
}

/// The render phase of both kinds (module docs): the platform lease first, so no platform
/// is `PlatformNotReady` whatever else is missing; then a context without a `renderer`
/// stalls `RenderFailed` “no `<noun>` renderer is configured”; else `render` runs on a
/// blocking thread with the leased platform and its skew policy, the lease is released and
/// a kernel error is classified. `inputs` is what the render depends on (the fairness
/// gate's fingerprint, [`crate::controller::fairness`]): a render that exhausted a budget with
/// the same inputs is not run again before its backoff, and then only in the retry slot.
pub(super) async fn on_lease<K: Rendered, R: ?Sized + Send + Sync + 'static>(
    rr: &RenderRun<'_, '_, K>,
    noun: &str,
    inputs: &(impl std::hash::Hash + ?Sized),
    renderer: Option<Arc<R>>,
    render: impl FnOnce(&R, &BuiltPlatform, SkewPolicy) -> Result<RenderResult, KernelError>
        + Send
        + 'static,
) -> Result<RenderResult, Halt> {
    let lease = lease(rr)?;
    let Some(renderer) = renderer else {
        drop(lease);
        return Err(Failure::stalled(
            reasons::RENDER_FAILED,
            actions::RENDER,
            format!("no {noun} renderer is configured"),
        )
        .into());
    };
    // Fairness: a render that exhausted a budget with these inputs waits out its backoff, then
    // retries in the one retry slot.
    let run = &*rr.run;
    let key = format!("{}/{}/{}", K::KIND, run.namespace, run.name);
    let inputs = crate::controller::fairness::fingerprint(inputs, run.obj.meta());
    let gate = &run.ctx.exhausted;
    let slot = match gate.admit(&key, inputs, std::time::Instant::now()) {
        Admit::Render => None,
        Admit::Retry(permit) => Some(permit),
        Admit::Wait { error, after } => {
            drop(lease);
            return Err(again(failure(&error), after).into());
        }
    };
    // One of the process's render slots (shared with the render API and the Platform build),
    // held until the render returns.
    let permit = run
        .ctx
        .render_slots
        .acquire()
        .await
        .map_err(|source| Error::Slots {
            what: format!("rendering the {noun}"),
            source,
        })?;
    let metrics = run.ctx.metrics.as_ref().map(|m| m.render.clone());
    let out = crate::render_lease::render_on_lease(lease, (slot, permit), move |platform, skew| {
        let started = std::time::Instant::now();
        let out = render(&renderer, platform, skew);
        if let Some(m) = metrics {
            m.record(Origin::Reconcile, RenderEnd::of(&out), started.elapsed());
        }
        out
    })
    .await
    .map_err(|e| Error::Join {
        what: format!("rendering the {noun}"),
        message: e.to_string(),
    })?;
    let now = std::time::Instant::now();
    match out {
        Ok(rendered) => {
            gate.ended(&key, inputs, None, now);
            Ok(rendered)
        }
        Err(e) => {
            let f = failure(&e);
            let f = match gate.ended(&key, inputs, Some(&e), now) {
                Some(wait) => f.after(Some(wait)),
                None => f,
            };
            Err(f.into())
        }
    }
}

/// `failure` reported again without a render (the fairness gate's wait): no history entry, no
/// failure count, requeued `after`.
fn again(failure: Failure, after: std::time::Duration) -> Failure {
    let mut f = failure.soft().after(Some(after));
    f.history = false;
    f
}

/// The render's warnings, digests and inventory entries (module docs): the objects to apply.
pub(super) async fn convert<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    rendered: &RenderResult,
) -> Result<Vec<Value>, Failure> {
    for w in &rendered.warnings {
        rr.run
            .event(
                EventType::Warning,
                reasons::RENDER_WARNING,
                actions::RENDER,
                w,
            )
            .await;
    }
    // The kernel computed the inventory entries and the render digest once
    // (`RenderResult::new`); they are read here, not computed again.
    let objects: Vec<Value> = rendered.objects.iter().map(|o| o.object.clone()).collect();
    rr.digests.render = rendered.digest.clone();
    // Objects `opm.dev/apply: Ignore` are not recorded (`crate::apply::policy`): the digest
    // is that of the entries recorded. An unknown policy value fails the apply that follows.
    rr.digests.inventory = match apply::policy::ignored(&objects) {
        Ok(ignored) if !ignored.is_empty() => {
            inventory::inventory_digest(&apply::policy::recorded(&rendered.inventory, &ignored))
        }
        _ => inventory::inventory_digest(&rendered.inventory),
    };
    Ok(objects)
}
