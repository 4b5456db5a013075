//! The cluster a ModuleInstance or ModulePackage applies to (`spec.kubeConfig`; the rules of the
//! kubeconfig, the client cache and reachability are [`super::super::remote`]'s): its resolution
//! into conditions, the inventory of another cluster, the requeue of a Ready remote object and
//! its deletion.
//!
//! Rules:
//! - `spec.kubeConfig` makes apply, prune, drift, health and deletion act on a remote cluster (its
//!   ServiceAccount impersonated there); unset, the operator's own cluster at no cost.
//! - An unusable one is Ready=False `KubeConfigNotFound` (retried), Stalled `KubeConfigInvalid`
//!   or Ready=False `RemoteClusterUnreachable` (retried); a read error of the Secret is returned.
//! - The inventory records its cluster, and an inventory of another cluster is never pruned on
//!   the current one nor a NoOp: it is left there, Warning `InventoryOrphaned`.
//! - A sync that fails because the remote cluster stopped answering is
//!   `RemoteClusterUnreachable`; nothing was pruned, the apply counter counts it.
//! - An end on a remote target that waits for no event is looked at again after
//!   [`REMOTE_HEALTH_POLL`] (or the kind's interval when shorter): no workload watch reaches
//!   there.
//! - Deletion prunes on the inventory's cluster; an unusable one keeps the finalizer (the message
//!   names the ways to orphan) unless the object is annotated `opm.dev/force-delete-orphan:
//!   "true"` (Warning `OrphanedOnDeletion`); an inventory of another cluster is orphaned.

use std::time::Duration;

use crds::conditions::reasons;
use kube::ResourceExt;

use super::{actions, RenderRun, Rendered, RenderedStatus};
use crate::apply::deletion::FORCE_DELETE_ORPHAN_ANNOTATION;
use crate::apply::SyncError;
use crate::controller::reconcile::{End, Failure, Halt};
use crate::controller::remote::{Target, Unusable, REMOTE_HEALTH_POLL};
use crate::controller::runtime::{Error, EventType};

/// `end` with the requeue of a remote target (module docs): an end that waits for no event is
/// looked at again after [`REMOTE_HEALTH_POLL`] (or `interval` when shorter).
pub(super) fn polled(target: &Target, mut end: End, interval: Option<Duration>) -> End {
    if target.is_remote() && end.requeue.is_none() {
        end.requeue = Some(interval.map_or(REMOTE_HEALTH_POLL, |i| i.min(REMOTE_HEALTH_POLL)));
    }
    end
}

/// The failure of an unusable remote cluster (module docs).
fn failure(u: Unusable, action: &'static str) -> Halt {
    match u {
        Unusable::NotFound(m) => {
            Failure::transient(reasons::KUBE_CONFIG_NOT_FOUND, action, m).into()
        }
        Unusable::Invalid(m) => Failure::stalled(reasons::KUBE_CONFIG_INVALID, action, m).into(),
        Unusable::Unreachable(m) => {
            Failure::transient(reasons::REMOTE_CLUSTER_UNREACHABLE, action, m).into()
        }
        Unusable::Read(what, e) => Halt::Error(Error::kube(what, e)),
    }
}

/// The target of `spec.kubeConfig` (the operator's cluster when unset, at no cost), checked
/// reachable, or the failure saying why it cannot be used.
pub(super) async fn resolve<K: Rendered>(rr: &RenderRun<'_, '_, K>) -> Result<Target, Halt> {
    let run = &*rr.run;
    let Some(r) = run.obj.settings().kube_config else {
        return Ok(Target::local());
    };
    run.ctx
        .clusters
        .target(&run.ctx.client, &run.ctx.engine, &run.namespace, r)
        .await
        .map_err(|u| failure(u, actions::APPLY))
}

/// The cluster of the inventory as read.
fn inventory_cluster<K: Rendered>(rr: &RenderRun<'_, '_, K>) -> Option<String> {
    rr.run
        .prior
        .reconcile()
        .inventory
        .as_ref()
        .and_then(|i| i.cluster.clone())
}

/// Whether the inventory as read lives on `target`'s cluster (an empty one lives anywhere).
pub(super) fn same_cluster<K: Rendered>(rr: &RenderRun<'_, '_, K>, target: &Target) -> bool {
    let entries = rr
        .run
        .prior
        .reconcile()
        .inventory
        .as_ref()
        .map_or(0, |i| i.entries.len());
    entries == 0 || inventory_cluster(rr) == target.cluster()
}

/// Warning `InventoryOrphaned`: the inventory as read lives on another cluster than
/// `target`'s, and is left there.
pub(super) async fn orphan_other_cluster<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    target: &Target,
) {
    let count = rr.previous_entries().len();
    let message = format!(
        "{count} object(s) recorded on {} are left there (not pruned): spec.kubeConfig now targets {}",
        Target::describe(inventory_cluster(rr).as_deref()),
        Target::describe(target.cluster().as_deref()),
    );
    tracing::warn!(%message, "inventory of another cluster orphaned");
    rr.run
        .event(
            EventType::Warning,
            reasons::INVENTORY_ORPHANED,
            actions::PRUNE,
            &message,
        )
        .await;
}

/// A sync that failed because the remote cluster stopped answering: nothing was pruned
/// (prune runs only after a successful apply); the apply counter counts it.
pub(super) fn unreachable_during_sync<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
    target: &Target,
    e: SyncError,
) -> Failure {
    let c = rr.counters();
    c.apply = c.apply.saturating_add(1);
    Failure::transient(
        reasons::REMOTE_CLUSTER_UNREACHABLE,
        actions::APPLY,
        format!(
            "{} stopped answering during the {:?} phase: {}",
            Target::describe(target.cluster().as_deref()),
            e.phase,
            e.error
        ),
    )
}

/// The target a deletion prunes on (module docs, “Deletion”): `Ok(Some)` to prune there,
/// `Ok(None)` to orphan (the event sent), `Err` to keep the finalizer.
pub(super) async fn deletion_target<K: Rendered>(
    rr: &mut RenderRun<'_, '_, K>,
) -> Result<Option<Target>, Halt> {
    let Some(r) = rr.run.obj.settings().kube_config else {
        if inventory_cluster(rr).is_some() {
            orphan_other_cluster(rr, &Target::local()).await;
            return Ok(None);
        }
        return Ok(Some(Target::local()));
    };
    let ctx = rr.run.ctx;
    let found = ctx
        .clusters
        .target(&ctx.client, &ctx.engine, &rr.run.namespace, r)
        .await;
    match found {
        Ok(target) if same_cluster(rr, &target) => Ok(Some(target)),
        Ok(target) => {
            orphan_other_cluster(rr, &target).await;
            Ok(None)
        }
        Err(Unusable::Read(what, e)) => Err(failure(Unusable::Read(what, e), actions::DELETE)),
        Err(u) => {
            let forced = rr
                .run
                .obj
                .annotations()
                .get(FORCE_DELETE_ORPHAN_ANNOTATION)
                .is_some_and(|v| v == "true");
            if !forced {
                // Deletion never sets observedGeneration and writes no history entry.
                rr.run.at = rr.run.prior.observed_generation();
                return Err(match failure(u, actions::DELETE) {
                    Halt::Failed(mut f) => {
                        f.history = false;
                        f.message = format!(
                            "{}; the managed resources are kept until it is usable (or set spec.prune=false, or the {FORCE_DELETE_ORPHAN_ANNOTATION}=\"true\" annotation, to orphan them)",
                            f.message
                        );
                        Halt::Failed(f)
                    }
                    other => other,
                });
            }
            let why = match u {
                Unusable::NotFound(m) | Unusable::Invalid(m) | Unusable::Unreachable(m) => m,
                Unusable::Read(m, _) => m,
            };
            let count = rr.previous_entries().len();
            let message = format!(
                "Orphaned {count} managed resources; {why} and {FORCE_DELETE_ORPHAN_ANNOTATION} annotation set"
            );
            rr.run
                .event(
                    EventType::Warning,
                    reasons::ORPHANED_ON_DELETION,
                    actions::DELETE,
                    &message,
                )
                .await;
            Ok(None)
        }
    }
}
