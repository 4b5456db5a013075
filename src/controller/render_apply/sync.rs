//! The identity, and the plan, apply and prune of a render (docs/design/operator.md §2.2 phases
//! 3–6, §2.3 steps 7–8, §2.5, §6.6).
//!
//! Rules:
//! - **Identity** ([`service_account`]): `spec.serviceAccountName` > `--default-service-account` >
//!   the controller, always in the object's namespace. Without a client configuration to copy,
//!   the ServiceAccount's existence is still checked, so a missing one keeps its typed NotFound.
//!   [`apply_client`] is the client of that identity on the operator's own cluster (what
//!   `valuesFrom` reads the instance's Secrets and ConfigMaps with: they live beside the
//!   instance, whatever `spec.kubeConfig` names).
//! - **NoOp** iff the four last-applied digests are non-empty and equal to this reconcile's
//!   ([`super::is_no_op_of`]) and the inventory lives on the target's cluster (`super::target`);
//!   a NoOp still checks health (`super::health`). With `reapply` the apply runs even on a NoOp
//!   (drift correction of `drift.mode: Enabled`, issue 40).
//! - The custom health checks are compiled before anything is applied (`super::health`). A
//!   failure to build the identity stalls `ImpersonationFailed`.
//! - [`crate::apply::Engine::sync`] applies in stages (ownership always forced;
//!   `rollout.forceConflicts` recreates objects whose update is refused for immutable fields)
//!   and, when `spec.prune`, prunes stale entries with the kind's owner uuid (an inventory of
//!   another cluster is nothing to prune here); it returns the new inventory only on full
//!   success. Normal `Applied` with the counts (also for the apply half of a failed prune),
//!   Normal `Pruned` when something was deleted; the §7.2 apply and prune counts.
//! - Plan refusals (invalid object, inventory too large, empty render) stall `ApplyFailed`; apply
//!   and prune errors are Ready=False `ApplyFailed`/`PruneFailed` with backoff, except that a
//!   kind with `Rendered::FORBIDDEN_STALLS` (ModuleInstance) stalls `ImpersonationFailed` on a
//!   403 under a ServiceAccount (the Warning keeps the phase's reason; the prune stall writes no
//!   history entry, the baseline's quirk). An object another instance owns is Ready=False
//!   `OwnershipConflict` with backoff. Per-phase failure counters (§6.6): an apply error counts
//!   apply; a prune error resets apply and counts prune.

use crds::common::InventoryEntry;
use crds::conditions::reasons;
use serde_json::Value;

use super::{actions, commit, health, is_no_op_of, target, RenderRun, Rendered, RenderedStatus};
use crate::apply::object::InstanceLabels;
use crate::apply::prune::PruneOptions;
use crate::apply::{self, ApplyOptions, Engine, Phase, SyncError, SyncOptions};
use crate::controller::outcome::Outcome;
use crate::controller::reconcile::{End, Failure, Halt};
use crate::controller::remote::Target;
use crate::controller::runtime::EventType;

/// The ServiceAccount in effect (§2.5): `spec` (the object's `serviceAccountName`), then
/// `default` (the flag), else none; empty names count as unset.
pub fn service_account(spec: Option<&str>, default: Option<&str>) -> Option<String> {
    spec.filter(|s| !s.is_empty())
        .or(default.filter(|s| !s.is_empty()))
        .map(str::to_owned)
}

/// A failed sync: `forbidden` is a 403 under a ServiceAccount of a kind with
/// [`Rendered::FORBIDDEN_STALLS`] (module docs).
fn failure(phase: Phase, message: String, forbidden: bool) -> Failure {
    match phase {
        Phase::Plan => Failure::stalled(reasons::APPLY_FAILED, actions::APPLY, message),
        Phase::Apply if forbidden => Failure {
            event: reasons::APPLY_FAILED,
            ..Failure::stalled(reasons::IMPERSONATION_FAILED, actions::APPLY, message)
        },
        Phase::Apply => Failure::transient(reasons::APPLY_FAILED, actions::APPLY, message),
        // The baseline's quirk: the SA-403 prune stall records no history entry.
        Phase::Prune if forbidden => Failure {
            event: reasons::PRUNE_FAILED,
            history: false,
            ..Failure::stalled(reasons::IMPERSONATION_FAILED, actions::PRUNE, message)
        },
        Phase::Prune => Failure::transient(reasons::PRUNE_FAILED, actions::PRUNE, message),
    }
}

/// The identity apply and prune act as on `target` (§2.5; on a remote cluster, the
/// ServiceAccount there); `None` is the target's base identity (the controller's here).
pub(super) async fn identity<K: Rendered>(
    rr: &RenderRun<'_, '_, K>,
    target: &Target,
) -> Option<(String, Result<Engine, apply::Error>)> {
    let run = &*rr.run;
    let sa = service_account(
        run.obj.settings().service_account_name,
        run.ctx.default_service_account.as_deref(),
    )?;
    let on = target.engine(&run.ctx.engine);
    let engine = match target.base_config(run.ctx.kube_config.as_ref()) {
        Some(config) => on.impersonating(config, &run.namespace, &sa).await,
        // Without a configuration to copy, the SA's existence is still checked first, so a
        // missing SA keeps its typed NotFound (§2.4 DeletionSAMissing).
        None => match apply::impersonate::check_sa(&on.client(), &run.namespace, &sa).await {
            Err(e) => Err(e),
            Ok(()) => Err(apply::Error::InvalidObject {
                object: format!("ServiceAccount/{}/{sa}", run.namespace),
                reason: "no client configuration to impersonate with".to_owned(),
            }),
        },
    };
    Some((sa, engine))
}

/// The client of the identity apply acts as on the operator's own cluster (module docs,
/// “Identity”); a failure to build it stalls `ImpersonationFailed` as the apply's does.
pub(super) async fn apply_client<K: Rendered>(
    rr: &RenderRun<'_, '_, K>,
) -> Result<kube::Client, Failure> {
    match identity(rr, &Target::local()).await {
        None => Ok(rr.run.ctx.client.clone()),
        Some((_, Ok(e))) => Ok(e.client()),
        Some((_, Err(e))) => Err(Failure::stalled(
            reasons::IMPERSONATION_FAILED,
            actions::RENDER,
            e.to_string(),
        )),
    }
}

/// NoOp, or identity, apply and prune on `target`, then the record of the commit (module docs);
/// `entries` are the render's inventory entries of `objects`, `instance` the identity stamped
/// on the objects.
pub(super) async fn apply_to<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    target: &Target,
    objects: &[Value],
    entries: &[InventoryEntry],
    instance: Option<InstanceLabels>,
    reapply: bool,
) -> Result<End, Halt> {
    let rules = health::rules(rr)?;
    let ctx = rr.run.ctx;
    let checks = health::Checks {
        engine: target.engine(&ctx.engine),
        rules: rules.as_deref(),
    };
    let same_cluster = target::same_cluster(rr, target);
    if !reapply && same_cluster && is_no_op_of(rr.run.prior.reconcile(), &rr.digests) {
        let applied_at = rr.run.prior.reconcile().last_applied_at.clone();
        let verdict = health::check(rr, &checks, objects, applied_at.as_ref()).await;
        let end = commit::no_op(rr, verdict);
        return Ok(target::polled(target, end, rr.run.interval));
    }
    let engine = match identity(rr, target).await {
        None => target.engine(&ctx.engine).clone(),
        Some((_, Ok(e))) => e,
        Some((_, Err(e))) => {
            let f = Failure::stalled(reasons::IMPERSONATION_FAILED, actions::APPLY, e.to_string());
            return Err(f.into());
        }
    };
    let settings = rr.run.obj.settings();
    let prune = settings.prune.unwrap_or(false);
    let opts = SyncOptions {
        apply: ApplyOptions {
            recreate: settings
                .rollout
                .and_then(|r| r.force_conflicts)
                .unwrap_or(false),
            instance,
            ..Default::default()
        },
        prune,
        prune_options: PruneOptions {
            owner_uuid: K::owner_uuid(&rr.run.prior),
        },
        ..Default::default()
    };
    // An inventory of another cluster is nothing to prune here (`target`).
    let previous = if same_cluster {
        rr.previous_entries()
    } else {
        Vec::new()
    };
    let impersonated = engine.impersonated().is_some();
    match engine
        .sync_entries(objects, entries.to_vec(), &previous, &opts)
        .await
    {
        Ok(result) => {
            if !same_cluster {
                target::orphan_other_cluster(rr, target).await;
            }
            rr.run
                .event(
                    EventType::Normal,
                    reasons::APPLIED,
                    actions::APPLY,
                    &result.changes.applied_message(),
                )
                .await;
            if let Some(m) = rr.metrics() {
                m.record_apply(
                    // A recreate counts as created, as in the Applied message.
                    (result.changes.count(apply::Action::Created)
                        + result.changes.count(apply::Action::Recreated))
                        as u64,
                    result.changes.count(apply::Action::Configured) as u64,
                    result.changes.count(apply::Action::Unchanged) as u64,
                );
            }
            let deleted = result.pruned.as_ref().map_or(0, |p| p.deleted.len());
            let outcome = if deleted > 0 {
                rr.run
                    .event(
                        EventType::Normal,
                        reasons::PRUNED,
                        actions::PRUNE,
                        &format!("Pruned {deleted} stale resources"),
                    )
                    .await;
                if let Some(m) = rr.metrics() {
                    m.record_prune(deleted as u64);
                }
                Outcome::AppliedAndPruned
            } else {
                Outcome::Applied
            };
            let created = result.changes.count(apply::Action::Created)
                + result.changes.count(apply::Action::Recreated);
            let changed = format!(
                "{created} created, {} configured, {} unchanged, {deleted} pruned",
                result.changes.count(apply::Action::Configured),
                result.changes.count(apply::Action::Unchanged),
            );
            let verdict = health::check(rr, &checks, objects, None).await;
            let end = commit::succeed(rr, result.inventory, outcome, prune, changed, verdict);
            // The inventory records the cluster it lives on (`target`).
            if let Some(i) = rr.run.status().reconcile_mut().inventory.as_mut() {
                i.cluster = target.cluster();
            }
            Ok(target::polled(target, end, rr.run.interval))
        }
        Err(e) if target.is_remote() && e.error.is_unreachable() => {
            Err(target::unreachable_during_sync(rr, target, e).into())
        }
        Err(e) => Err(failed(rr, e, impersonated).await.into()),
    }
}

/// A failed sync (module docs): the per-phase counters, the apply half's `Applied` event, the
/// classified failure.
async fn failed<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    e: SyncError,
    impersonated: bool,
) -> Failure {
    let c = rr.counters();
    match e.phase {
        Phase::Plan => {}
        Phase::Apply => c.apply = c.apply.saturating_add(1),
        Phase::Prune => {
            c.apply = 0;
            c.prune = c.prune.saturating_add(1);
        }
    }
    if let Some(changes) = &e.changes {
        rr.run
            .event(
                EventType::Normal,
                reasons::APPLIED,
                actions::APPLY,
                &changes.applied_message(),
            )
            .await;
    }
    let forbidden = K::FORBIDDEN_STALLS && impersonated && e.error.is_impersonation_forbidden();
    if e.error.is_ownership_conflict() {
        // Another instance owns an object of this render: not ours to write, and it resolves
        // when that instance lets go (apply/ownership.rs), so retry with backoff.
        Failure::transient(
            reasons::OWNERSHIP_CONFLICT,
            actions::APPLY,
            e.error.to_string(),
        )
    } else {
        failure(e.phase, e.error.to_string(), forbidden)
    }
}

#[cfg(test)]
mod tests {
    use crds::conditions::reasons;

    use super::{failure, service_account};
    use crate::apply::Phase;
    use crate::controller::outcome::Outcome;

    #[test]
    fn the_spec_service_account_wins_over_the_flag_and_empty_is_unset() {
        assert_eq!(service_account(None, None), None);
        assert_eq!(
            service_account(None, Some("opm-deployer")).as_deref(),
            Some("opm-deployer")
        );
        assert_eq!(
            service_account(Some("deploy-sa"), Some("opm-deployer")).as_deref(),
            Some("deploy-sa")
        );
        assert_eq!(
            service_account(Some(""), Some("opm-deployer")).as_deref(),
            Some("opm-deployer")
        );
        assert_eq!(service_account(Some(""), Some("")), None);
    }

    #[test]
    fn sync_failures_are_transient_unless_planned_or_forbidden_scenario_43() {
        let f = |phase, forbidden| failure(phase, "boom".into(), forbidden);
        let plan = f(Phase::Plan, true);
        assert_eq!(
            (plan.reason, plan.outcome),
            (reasons::APPLY_FAILED, Outcome::FailedStalled)
        );
        for (phase, reason) in [
            (Phase::Apply, reasons::APPLY_FAILED),
            (Phase::Prune, reasons::PRUNE_FAILED),
        ] {
            let soft = f(phase, false);
            assert_eq!(
                (soft.reason, soft.event, soft.outcome, soft.history),
                (reason, reason, Outcome::FailedTransient, true)
            );
            // Under a ServiceAccount that is forbidden: stalled ImpersonationFailed, the Warning
            // keeps the phase's reason.
            let hard = f(phase, true);
            assert_eq!(
                (hard.reason, hard.event, hard.outcome),
                (
                    reasons::IMPERSONATION_FAILED,
                    reason,
                    Outcome::FailedStalled
                )
            );
        }
        // The baseline's quirk: only the forbidden prune stall skips the history entry.
        assert!(f(Phase::Apply, true).history);
        assert!(!f(Phase::Prune, true).history);
    }
}
