//! Deletion of a ModuleInstance or ModulePackage (docs/design/operator.md §2.4,
//! [`crate::apply::deletion::decide`]): orphan, stall or delete the inventory, then release the
//! finalizer.
//!
//! Rules:
//! - `!prune` or an empty inventory releases the finalizer (orphan).
//! - The inventory is deleted on the cluster it lives on (`super::target`); an unusable one keeps
//!   the finalizer or orphans, as `super::super::remote`'s “Deletion” rules say.
//! - A missing ServiceAccount with the `opm.dev/force-delete-orphan` annotation exactly `"true"`
//!   orphans: Warning `OrphanedOnDeletion`, inventory dropped, finalizer released. A missing one
//!   otherwise stalls `DeletionSAMissing` naming `<ns>/<sa>` and the three recovery options (no
//!   controller-client fallback); another impersonation failure stalls `ImpersonationFailed`.
//! - Otherwise every inventory entry is deleted with the kind's owner uuid: a 403 under the
//!   ServiceAccount stalls `ImpersonationFailed`, a remote cluster that stops answering is
//!   Ready=False `RemoteClusterUnreachable` (retried with backoff), another error is returned (the
//!   finalizer is kept), objects still terminating are looked at again after
//!   [`DELETION_RECHECK`].
//! - Stalls recheck after 30 minutes with a Warning (action `Delete`) once per transition;
//!   deletion patches never set observedGeneration and write no history entry.
//! - Releasing the finalizer forgets the inventory gauge, the changes a health wait remembered
//!   and the compiled health checks of the object.

use std::time::Duration;

use crds::conditions::reasons;
use crds::FINALIZER_CLEANUP;
use kube::ResourceExt;

use super::{actions, sync, target, RenderRun, Rendered, RenderedStatus};
use crate::apply::deletion::{self as apply_deletion, Decision, FORCE_DELETE_ORPHAN_ANNOTATION};
use crate::apply::prune::PruneOptions;
use crate::controller::reconcile::{End, Failure, Halt};
use crate::controller::remote::Target;
use crate::controller::runtime::{Error, EventType};

/// How soon a deletion whose objects are still terminating is looked at again.
pub const DELETION_RECHECK: Duration = Duration::from_secs(5);

/// The §2.4 DeletionSAMissing message.
pub fn deletion_sa_missing_message(service_account: &str) -> String {
    format!(
        "ServiceAccount {service_account} not found: cannot delete the managed resources as it. \
         Recover by restoring the ServiceAccount and its RBAC, by setting spec.prune=false to \
         orphan them, or by setting the {FORCE_DELETE_ORPHAN_ANNOTATION}=\"true\" annotation"
    )
}

/// §2.4 (module docs).
pub(super) async fn delete<K: Rendered>(rr: &mut RenderRun<'_, '_, K>) -> Result<End, Halt> {
    let entries = rr.previous_entries();
    let prune = rr.run.obj.settings().prune.unwrap_or(false);
    // The cluster the inventory lives on (`target`): unusable → kept or orphaned.
    let target = if prune && !entries.is_empty() {
        match target::deletion_target(rr).await? {
            Some(target) => target,
            None => {
                // Written before the finalizer goes: the object may be gone after it.
                rr.run.status().reconcile_mut().inventory = None;
                rr.run.patcher.patch_status(&rr.run.obj).await?;
                return release(rr).await;
            }
        }
    } else {
        Target::local()
    };
    let identity = if prune && !entries.is_empty() {
        sync::identity(rr, &target).await
    } else {
        None
    };
    let annotation = rr
        .run
        .obj
        .annotations()
        .get(FORCE_DELETE_ORPHAN_ANNOTATION)
        .cloned();
    let decision = apply_deletion::decide(
        prune,
        entries.len(),
        identity.as_ref().map(|(_, e)| e),
        annotation.as_deref(),
    );
    match decision {
        Decision::Orphan => release(rr).await,
        Decision::OrphanSaMissing {
            count,
            service_account,
        } => {
            let msg = format!(
                "Orphaned {count} managed resources; ServiceAccount {service_account:?} \
                 missing and {FORCE_DELETE_ORPHAN_ANNOTATION} annotation set"
            );
            rr.run
                .event(
                    EventType::Warning,
                    reasons::ORPHANED_ON_DELETION,
                    actions::DELETE,
                    &msg,
                )
                .await;
            // Written before the finalizer goes: the object may be gone after it.
            rr.run.status().reconcile_mut().inventory = None;
            rr.run.patcher.patch_status(&rr.run.obj).await?;
            release(rr).await
        }
        Decision::StallSaMissing { service_account } => {
            let msg = deletion_sa_missing_message(&service_account);
            Err(stall(rr, reasons::DELETION_SA_MISSING, msg))
        }
        Decision::ImpersonationFailed(msg) => Err(stall(rr, reasons::IMPERSONATION_FAILED, msg)),
        Decision::Prune => {
            let engine = match identity {
                Some((_, Ok(e))) => e,
                _ => target.engine(&rr.run.ctx.engine).clone(),
            };
            let opts = PruneOptions {
                owner_uuid: K::owner_uuid(&rr.run.prior),
            };
            let mut result = engine.delete_all(&entries, &opts).await;
            if result.complete() {
                if let Some(m) = rr.metrics() {
                    m.record_prune(result.pruned.deleted.len() as u64);
                }
                return release(rr).await;
            }
            let errors = std::mem::take(&mut result.pruned.errors);
            match crate::apply::Error::collect(errors) {
                Some(e) if engine.impersonated().is_some() && e.is_impersonation_forbidden() => {
                    Err(stall(rr, reasons::IMPERSONATION_FAILED, e.to_string()))
                }
                // The remote cluster stopped answering: kept, retried with backoff.
                Some(e) if target.is_remote() && e.is_unreachable() => {
                    rr.run.at = rr.run.prior.observed_generation();
                    let mut f = Failure::transient(
                        reasons::REMOTE_CLUSTER_UNREACHABLE,
                        actions::DELETE,
                        format!(
                            "{} stopped answering while deleting the managed resources: {e}",
                            Target::describe(target.cluster().as_deref())
                        ),
                    );
                    f.history = false;
                    Err(f.into())
                }
                Some(e) => Err(Error::Delete {
                    what: format!(
                        "deleting the inventory of {} {}/{}",
                        K::KIND,
                        rr.run.namespace,
                        rr.run.name
                    ),
                    source: Box::new(e),
                }
                .into()),
                None => {
                    tracing::info!(
                        remaining = result.remaining.len(),
                        "waiting for deleted objects to go"
                    );
                    Ok(End::requeue(DELETION_RECHECK))
                }
            }
        }
    }
}

/// A stalled deletion: Ready=False, Stalled=True at the observedGeneration as read (deletion
/// never sets it), a Warning (action `Delete`) once per transition, rechecked after 30
/// minutes.
fn stall<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    reason: &'static str,
    message: String,
) -> Halt {
    rr.run.at = rr.run.prior.observed_generation();
    let mut f = Failure::stalled(reason, actions::DELETE, message);
    f.history = false;
    f.into()
}

/// Removes the cleanup finalizer (the object goes; its inventory gauge with it).
async fn release<K: Rendered>(rr: &mut RenderRun<'_, '_, K>) -> Result<End, Halt> {
    rr.run.remove_finalizer(FINALIZER_CLEANUP).await?;
    if let Some(m) = rr.metrics() {
        m.forget_inventory(&rr.run.namespace, &rr.run.name);
    }
    // What a health wait remembered for the success event goes with the object, and so do
    // its compiled health checks.
    let key = rr.changes_key();
    rr.run.ctx.take_changes(&key);
    rr.run.ctx.health_rules.forget(&key);
    Ok(End::done())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deletion_sa_message_names_the_sa_and_the_three_options() {
        let m = deletion_sa_missing_message("team-a/deploy-sa");
        assert!(m.contains("team-a/deploy-sa"));
        assert!(m.contains("restoring the ServiceAccount"));
        assert!(m.contains("spec.prune=false"));
        assert!(m.contains("opm.dev/force-delete-orphan=\"true\""));
    }
}
