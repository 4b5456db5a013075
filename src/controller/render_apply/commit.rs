//! What a render-and-apply reconcile records for the frame's one commit, and when it requeues
//! (docs/design/operator.md §2.1 deferred commit and requeue, §2.2 phase 7, §2.3 step 9, §6.1,
//! §6.5, §6.7; docs/design/decisions.md §1).
//!
//! Rules:
//! - One optimistic status patch per reconcile (the frame's commit, [`super::super::reconcile`]);
//!   the phases here only build the status it writes.
//! - **NoOp** writes Ready (from the health verdict, `super::health`), the reconcile counter 0,
//!   `nextRetryAt: null` and observedGeneration only, then Normal `NoOp`; a NoOp that finishes a
//!   health wait sends the success event instead, naming what the apply changed.
//! - Otherwise observedGeneration and lastAttempted* (source and render digests only once known).
//! - **Success**: lastApplied*, the inventory (its revision one more than before, 1 first; §6.1),
//!   a `complete` history entry, counters reset (reconcile, apply, prune when it ran),
//!   `nextRetryAt: null`, Drifted removed (kinds that detect drift, §6.5), Ready
//!   `ReconciliationSucceeded` and its Normal event naming the changes (while a health check
//!   waits, what changed is remembered for that event); the inventory gauge (§7.2).
//! - **Failure** ([`attempted`]): Ready=False (with Stalled=True when stalled) with the phase's
//!   reason, the reconcile counter + 1 (not for a soft block, docs/design/decisions.md §1),
//!   `nextRetryAt` = now + requeue, a `failed` history entry when there is a message (unless the
//!   failure says otherwise), a Warning once per transition
//!   ([`crate::controller::events::ready_changed`]).
//! - History holds at most [`HISTORY_LIMIT`] entries, newest first, sequence monotonic (§6.7).
//! - **Requeue**: success and NoOp after the kind's interval (ModulePackage; a ModuleInstance with
//!   `spec.interval`) or never (a ModuleInstance without); a transient failure after its own
//!   requeue (the interval of a soft block), else backoff of the reconcile counter; a stalled one
//!   after 30 minutes.

use crds::common::{FailureCounters, HistoryEntry, Inventory, InventoryEntry};
use crds::conditions::{self, reasons, types, HasConditions};

use super::health::{self, Verdict};
use super::{actions, metrics_of, RenderRun, Rendered, RenderedStatus, SUCCEEDED_MESSAGE};
use crate::controller::outcome::{self, Outcome, STALLED_RECHECK};
use crate::controller::reconcile::{End, Halt, Note};
use crate::controller::runtime;

/// Maximum history entries kept (§6.7).
pub const HISTORY_LIMIT: usize = 10;
/// The NoOp event text.
pub const NO_OP_MESSAGE: &str = "No changes detected";

/// Prepends `entry` with the next sequence number and trims to [`HISTORY_LIMIT`] (§6.7).
pub fn push_history(history: &mut Vec<HistoryEntry>, mut entry: HistoryEntry) {
    entry.sequence = history.iter().map(|h| h.sequence).max().unwrap_or(0) + 1;
    history.insert(0, entry);
    history.truncate(HISTORY_LIMIT);
}

/// A status failure counter as the backoff counter (negative as 0, saturating).
pub(crate) fn counter_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The end of an attempt (phases 1–7, module docs “Failure”): a failure records the attempt
/// (observedGeneration, lastAttempted*), counts a reconcile failure unless soft, resolves its
/// requeue (its own, else backoff of the counter, 30 minutes when stalled), sets
/// `nextRetryAt` and writes a `failed` history entry (when it has one and a message).
pub(super) fn attempted<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    result: Result<End, Halt>,
) -> Result<End, Halt> {
    let Err(Halt::Failed(mut f)) = result else {
        return result;
    };
    record_attempt(rr);
    let counter = {
        let c = rr.counters();
        let before = c.reconcile;
        if !f.soft {
            c.reconcile = c.reconcile.saturating_add(1);
        }
        before
    };
    let requeue = f.requeue.unwrap_or_else(|| {
        outcome::requeue_after(f.outcome, counter_u32(counter), None).unwrap_or(STALLED_RECHECK)
    });
    let now = runtime::now();
    let started_at = rr.run.started_at.clone();
    let digests = &rr.digests;
    let r = rr.run.status().reconcile_mut();
    r.next_retry_at = Some(runtime::time_after(requeue));
    if f.history && !f.message.is_empty() {
        push_history(
            &mut r.history,
            HistoryEntry {
                action: "reconcile".to_owned(),
                phase: "failed".to_owned(),
                started_at: Some(started_at),
                finished_at: Some(now),
                source_digest: digests.source.clone(),
                config_digest: digests.config.clone(),
                render_digest: digests.render.clone(),
                inventory_digest: digests.inventory.clone(),
                message: f.message.clone(),
                ..Default::default()
            },
        );
    }
    f.requeue = Some(requeue);
    Err(Halt::Failed(f))
}

/// Records the attempt (§2.2 phase 7): observedGeneration and lastAttempted*.
fn record_attempt<K: Rendered>(rr: &mut RenderRun<'_, '_, K>) {
    let elapsed = rr.run.started.elapsed();
    let started_at = rr.run.started_at.clone();
    let generation = rr.run.generation();
    let digests = &rr.digests;
    let status = rr.run.status();
    *status.observed_generation_mut() = generation;
    let r = status.reconcile_mut();
    r.last_attempted_action = Some("reconcile".to_owned());
    r.last_attempted_at = Some(started_at);
    r.last_attempted_duration = Some(format!("{:.3}s", elapsed.as_secs_f64()));
    r.last_attempted_source_digest = (!digests.source.is_empty()).then(|| digests.source.clone());
    r.last_attempted_config_digest = Some(digests.config.clone());
    r.last_attempted_render_digest = (!digests.render.is_empty()).then(|| digests.render.clone());
}

/// A NoOp (module docs): Ready, the counter and `nextRetryAt` from the health verdict,
/// observedGeneration; Normal `NoOp`, or the success event of a finished wait.
pub(super) fn no_op<K: Rendered>(rr: &mut RenderRun<'_, '_, K>, verdict: Verdict) -> End {
    let generation = rr.run.generation();
    *rr.run.status().observed_generation_mut() = generation;
    let (mark, again) = health::mark(rr, &verdict);
    if verdict == Verdict::Ready {
        rr.counters().reconcile = 0;
        rr.run.status().reconcile_mut().next_retry_at = None;
    } else {
        rr.run.status().reconcile_mut().next_retry_at = again.map(runtime::time_after);
    }
    let was_waiting = conditions::get(rr.run.prior.conditions(), types::READY).is_some_and(|c| {
        c.status != "True"
            && (c.reason == reasons::HEALTH_CHECK_FAILED
                || (c.reason == reasons::PROGRESSING
                    && c.message != conditions::messages::PROGRESSING))
    });
    let end = End::marked(mark).outcome(Outcome::NoOp);
    match &verdict {
        Verdict::Ready if was_waiting => {
            let key = rr.changes_key();
            let note = match rr.run.ctx.changes(&key) {
                Some(changed) => {
                    format!("{SUCCEEDED_MESSAGE}: {changed} (health check passed)")
                }
                None => format!("{SUCCEEDED_MESSAGE}: health check passed"),
            };
            end.after(rr.run.interval)
                .note(Note::normal(
                    reasons::RECONCILIATION_SUCCEEDED,
                    actions::RECONCILE,
                    note,
                ))
                .then(move |ctx| {
                    ctx.take_changes(&key);
                })
        }
        Verdict::Ready => end.after(rr.run.interval).note(Note::normal(
            reasons::NO_OP,
            actions::RECONCILE,
            NO_OP_MESSAGE,
        )),
        other => end.after(again).with_notes(health::note(other)),
    }
}

/// A successful apply (module docs “Success”): the attempt, lastApplied*, the inventory
/// `entries`, a `complete` history entry, the counters reset (prune's when `pruned`), Drifted
/// removed, Ready from the health verdict; the success event naming what `changed` once Ready
/// (remembered while the health check waits); the inventory gauge.
pub(super) fn succeed<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    entries: Vec<InventoryEntry>,
    outcome: Outcome,
    pruned: bool,
    changed: String,
    verdict: Verdict,
) -> End {
    record_attempt(rr);
    let now = runtime::now();
    let revision = rr
        .run
        .prior
        .reconcile()
        .inventory
        .as_ref()
        .map_or(0, |i| i.revision)
        + 1;
    let count = i64::try_from(entries.len()).unwrap_or(i64::MAX);
    let size = entries.len();
    let digests = &rr.digests;
    let status = rr.run.status();
    let r = status.reconcile_mut();
    r.last_applied_at = Some(now.clone());
    r.last_applied_source_digest = Some(digests.source.clone());
    r.last_applied_config_digest = Some(digests.config.clone());
    r.last_applied_render_digest = Some(digests.render.clone());
    r.inventory = Some(Inventory {
        revision,
        digest: digests.inventory.clone(),
        count,
        entries,
        cluster: None,
    });
    push_history(
        &mut r.history,
        HistoryEntry {
            action: "reconcile".to_owned(),
            phase: "complete".to_owned(),
            started_at: Some(now.clone()),
            finished_at: Some(now.clone()),
            source_digest: digests.source.clone(),
            config_digest: digests.config.clone(),
            render_digest: digests.render.clone(),
            inventory_digest: digests.inventory.clone(),
            inventory_count: count,
            ..Default::default()
        },
    );
    let c = r
        .failure_counters
        .get_or_insert_with(FailureCounters::default);
    c.reconcile = 0;
    c.apply = 0;
    if pruned {
        c.prune = 0;
    }
    r.next_retry_at = None;
    if K::DETECTS_DRIFT {
        conditions::remove(status.conditions_mut(), types::DRIFTED);
    }
    let (mark, again) = health::mark(rr, &verdict);
    rr.run.status().reconcile_mut().next_retry_at = again.map(runtime::time_after);
    let end = End::marked(mark)
        .outcome(outcome)
        .after(again.or(rr.run.interval));
    let end = match &verdict {
        // The event says what changed; the condition keeps the stable message.
        Verdict::Ready => end.note(Note::normal(
            reasons::RECONCILIATION_SUCCEEDED,
            actions::RECONCILE,
            format!("{SUCCEEDED_MESSAGE}: {changed}"),
        )),
        other => end.with_notes(health::note(other)),
    };
    let (key, namespace, name) = (
        rr.changes_key(),
        rr.run.namespace.clone(),
        rr.run.name.clone(),
    );
    let ready = verdict == Verdict::Ready;
    end.then(move |ctx| {
        if let Some(m) = metrics_of::<K>(ctx) {
            m.set_inventory_size(&namespace, &name, size);
        }
        if ready {
            ctx.take_changes(&key);
        } else {
            ctx.remember_changes(&key, &changed);
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crds::common::HistoryEntry;
    use crds::conditions::reasons;

    use super::{push_history, HISTORY_LIMIT};
    use crate::controller::outcome::Outcome;
    use crate::controller::reconcile::Failure;

    #[test]
    fn history_keeps_ten_newest_first_with_monotonic_sequence() {
        let mut h = Vec::new();
        for i in 0..12 {
            push_history(
                &mut h,
                HistoryEntry {
                    message: format!("m{i}"),
                    ..Default::default()
                },
            );
        }
        assert_eq!(h.len(), HISTORY_LIMIT);
        assert_eq!(h[0].sequence, 12);
        assert_eq!(h[0].message, "m11");
        assert_eq!(h[9].sequence, 3);
    }

    #[test]
    fn a_soft_block_requeues_after_the_interval_without_counting_scenario_48() {
        let five = Some(Duration::from_secs(300));
        let f = Failure::transient(reasons::SOURCE_NOT_READY, "Resolve", "not ready".into())
            .after(five)
            .soft();
        assert_eq!((f.requeue, f.soft, f.history), (five, true, true));
        let g = Failure::stalled(reasons::PATH_NOT_FOUND, "Load", "gone".into()).after(None);
        assert_eq!(
            (g.requeue, g.soft, g.outcome),
            (None, false, Outcome::FailedStalled)
        );
    }
}
