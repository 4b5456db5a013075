//! Deletion of a ModuleInstance or ModulePackage (docs/design/operator.md §2.4; the “Deletion” rules of the parent
//! module): orphan, stall or delete the inventory, then release the finalizer.

#[allow(
    clippy::wildcard_imports,
    reason = "a part of the parent module's reconcile"
)]
use super::*;

impl<K: Rendered> Run<'_, K> {
    /// §2.4.
    pub(super) async fn delete(&mut self) -> Result<End, Halt> {
        let entries = self.previous_entries();
        let prune = self.obj.settings().prune.unwrap_or(false);
        // The cluster the inventory lives on (`target`): unusable → kept or orphaned.
        let target = if prune && !entries.is_empty() {
            match self.deletion_target().await? {
                Some(target) => target,
                None => {
                    // Written before the finalizer goes: the object may be gone after it.
                    self.status().reconcile_mut().inventory = None;
                    self.patcher.patch_status(&self.obj).await?;
                    return self.release().await;
                }
            }
        } else {
            Target::local()
        };
        let identity = if prune && !entries.is_empty() {
            self.identity(&target).await
        } else {
            None
        };
        let annotation = self
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
            Decision::Orphan => self.release().await,
            Decision::OrphanSaMissing {
                count,
                service_account,
            } => {
                let msg = format!(
                    "Orphaned {count} managed resources; ServiceAccount {service_account:?} \
                     missing and {FORCE_DELETE_ORPHAN_ANNOTATION} annotation set"
                );
                self.event(
                    EventType::Warning,
                    reasons::ORPHANED_ON_DELETION,
                    actions::DELETE,
                    &msg,
                )
                .await;
                // Written before the finalizer goes: the object may be gone after it.
                self.status().reconcile_mut().inventory = None;
                self.patcher.patch_status(&self.obj).await?;
                self.release().await
            }
            Decision::StallSaMissing { service_account } => {
                let msg = deletion_sa_missing_message(&service_account);
                Err(self.stall_deletion(reasons::DELETION_SA_MISSING, msg))
            }
            Decision::ImpersonationFailed(msg) => {
                Err(self.stall_deletion(reasons::IMPERSONATION_FAILED, msg))
            }
            Decision::Prune => {
                let engine = match identity {
                    Some((_, Ok(e))) => e,
                    _ => target.engine(&self.ctx.engine).clone(),
                };
                let opts = PruneOptions {
                    owner_uuid: K::owner_uuid(&self.prior),
                };
                let mut result = engine.delete_all(&entries, &opts).await;
                if result.complete() {
                    if let Some(m) = self.metrics() {
                        m.record_prune(result.pruned.deleted.len() as u64);
                    }
                    return self.release().await;
                }
                let errors = std::mem::take(&mut result.pruned.errors);
                match apply::Error::collect(errors) {
                    Some(e)
                        if engine.impersonated().is_some() && e.is_impersonation_forbidden() =>
                    {
                        Err(self.stall_deletion(reasons::IMPERSONATION_FAILED, e.to_string()))
                    }
                    // The remote cluster stopped answering: kept, retried with backoff.
                    Some(e) if target.is_remote() && e.is_unreachable() => {
                        self.at = self.prior.observed_generation();
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
                            self.namespace,
                            self.name
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
    fn stall_deletion(&mut self, reason: &'static str, message: String) -> Halt {
        self.at = self.prior.observed_generation();
        let mut f = Failure::stalled(reason, actions::DELETE, message);
        f.history = false;
        f.into()
    }
    /// Removes the cleanup finalizer (the object goes; its inventory gauge with it).
    async fn release(&mut self) -> Result<End, Halt> {
        self.remove_finalizer(FINALIZER_CLEANUP).await?;
        if let Some(m) = self.metrics() {
            m.forget_inventory(&self.namespace, &self.name);
        }
        // What a health wait remembered for the success event goes with the object, and so do
        // its compiled health checks.
        self.ctx.take_changes(&self.changes_key());
        self.ctx.health_rules.forget(&self.changes_key());
        Ok(End::done())
    }
}
