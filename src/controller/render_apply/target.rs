//! The cluster a ModuleInstance or ModulePackage applies to (`spec.kubeConfig`; the rules are
//! [`super::super::remote`]'s): its resolution into conditions, the inventory of another
//! cluster, the requeue of a Ready remote object and its deletion.

#[allow(
    clippy::wildcard_imports,
    reason = "a part of the parent module's reconcile"
)]
use super::*;
use crate::controller::remote::{Unusable, REMOTE_HEALTH_POLL};

impl Target {
    /// `end` with the requeue of a remote target (module rules of `remote`, “Health after
    /// Ready”): an end that waits for no event is looked at again after [`REMOTE_HEALTH_POLL`]
    /// (or `interval` when shorter).
    pub(super) fn polled(&self, mut end: End, interval: Option<Duration>) -> End {
        if self.is_remote() && end.requeue.is_none() {
            end.requeue = Some(interval.map_or(REMOTE_HEALTH_POLL, |i| i.min(REMOTE_HEALTH_POLL)));
        }
        end
    }
}

/// The failure of an unusable remote cluster (reasons of `remote`'s module rules).
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

impl<K: Rendered> Run<'_, K> {
    /// The target of `spec.kubeConfig` (the operator's cluster when unset, at no cost), checked
    /// reachable, or the failure saying why it cannot be used.
    pub async fn target(&self) -> Result<Target, Halt> {
        let Some(r) = self.obj.settings().kube_config else {
            return Ok(Target::local());
        };
        self.ctx
            .clusters
            .target(&self.ctx.client, &self.ctx.engine, &self.namespace, r)
            .await
            .map_err(|u| failure(u, actions::APPLY))
    }

    /// The cluster of the inventory as read.
    fn inventory_cluster(&self) -> Option<String> {
        self.prior
            .reconcile()
            .inventory
            .as_ref()
            .and_then(|i| i.cluster.clone())
    }

    /// Whether the inventory as read lives on `target`'s cluster (an empty one lives anywhere).
    pub fn same_cluster(&self, target: &Target) -> bool {
        let entries = self
            .prior
            .reconcile()
            .inventory
            .as_ref()
            .map_or(0, |i| i.entries.len());
        entries == 0 || self.inventory_cluster() == target.cluster()
    }

    /// Warning `InventoryOrphaned`: the inventory as read lives on another cluster than
    /// `target`'s, and is left there.
    pub(super) async fn orphan_other_cluster(&mut self, target: &Target) {
        let count = self.previous_entries().len();
        let message = format!(
            "{count} object(s) recorded on {} are left there (not pruned): spec.kubeConfig now targets {}",
            Target::describe(self.inventory_cluster().as_deref()),
            Target::describe(target.cluster().as_deref()),
        );
        tracing::warn!(%message, "inventory of another cluster orphaned");
        self.event(
            EventType::Warning,
            reasons::INVENTORY_ORPHANED,
            actions::PRUNE,
            &message,
        )
        .await;
    }

    /// A sync that failed because the remote cluster stopped answering: nothing was pruned
    /// (prune runs only after a successful apply); the apply counter counts it.
    pub(super) fn unreachable_during_sync(&mut self, target: &Target, e: SyncError) -> Failure {
        let c = self.counters();
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

    /// The target a deletion prunes on (module rules of `remote`, “Deletion”): `Ok(Some)` to
    /// prune there, `Ok(None)` to orphan (the event sent), `Err` to keep the finalizer.
    pub(super) async fn deletion_target(&mut self) -> Result<Option<Target>, Halt> {
        let Some(r) = self.obj.settings().kube_config else {
            if self.inventory_cluster().is_some() {
                self.orphan_other_cluster(&Target::local()).await;
                return Ok(None);
            }
            return Ok(Some(Target::local()));
        };
        let found = self
            .ctx
            .clusters
            .target(&self.ctx.client, &self.ctx.engine, &self.namespace, r)
            .await;
        match found {
            Ok(target) if self.same_cluster(&target) => Ok(Some(target)),
            Ok(target) => {
                self.orphan_other_cluster(&target).await;
                Ok(None)
            }
            Err(Unusable::Read(what, e)) => Err(failure(Unusable::Read(what, e), actions::DELETE)),
            Err(u) => {
                let forced = self
                    .obj
                    .annotations()
                    .get(FORCE_DELETE_ORPHAN_ANNOTATION)
                    .is_some_and(|v| v == "true");
                if !forced {
                    // Deletion never sets observedGeneration and writes no history entry.
                    self.at = self.prior.observed_generation();
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
                let count = self.previous_entries().len();
                let message = format!(
                    "Orphaned {count} managed resources; {why} and {FORCE_DELETE_ORPHAN_ANNOTATION} annotation set"
                );
                self.event(
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
}
