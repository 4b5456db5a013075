//! Apply then prune, [`Engine::sync`], with the inventory-safety rules (docs/design/operator.md
//! §2.2 phases 5–6, §6; docs/design/principles.md rules 12, 13, 21).
//!
//! Rules:
//! - Before any write: the desired inventory is checked against the size budget
//!   ([`SyncOptions::size_budget`]); an unknown `opm.dev/*` policy value ([`super::policy`])
//!   refuses the whole apply; an empty render over a non-empty inventory is refused unless
//!   allowed ([`SyncOptions::allow_empty`]). These fail in [`Phase::Plan`].
//! - The apply is [`Engine::apply_all_staged`] ([`super::staged`]).
//! - Stale entries are computed only after a fully successful apply and pruned with the guards of
//!   [`super::prune`]; an object `opm.dev/apply: Ignore` is not recorded, and what was recorded of
//!   it is never stale.
//! - The new inventory is returned only when apply and prune both succeeded, so a failure keeps
//!   the previous inventory (nothing of a failed apply is recorded, nothing is pruned after it);
//!   a failed prune still carries the apply's change set (the reconciler emits `Applied` for it).
//!
//! Known gap: objects created by an apply whose later stage failed are live but not in the
//! inventory until a later successful apply records them (as in fluxcd/pkg/ssa); if the desired
//! set drops them before that, they are not pruned.

use crds::common::InventoryEntry;
use serde_json::Value;

use super::{policy, prune, ApplyOptions, ChangeSet, Engine, Error};

impl Engine {
    /// Apply then prune with every inventory-safety rule of the module docs; the inventory
    /// entries are computed from `objects` ([`Engine::sync_entries`] takes them computed).
    pub async fn sync(
        &self,
        objects: &[Value],
        previous: &[InventoryEntry],
        opts: &SyncOptions,
    ) -> Result<SyncResult, SyncError> {
        let desired = crate::inventory::entries_of(objects).map_err(|e| SyncError {
            phase: Phase::Plan,
            error: Error::InvalidObject {
                object: String::new(),
                reason: e.to_string(),
            },
            changes: None,
            pruned: None,
        })?;
        self.sync_entries(objects, desired, previous, opts).await
    }

    /// [`Engine::sync`] with `desired`, the inventory entries of `objects` (in order) as the
    /// kernel computed them (`RenderResult::inventory`).
    pub async fn sync_entries(
        &self,
        objects: &[Value],
        desired: Vec<InventoryEntry>,
        previous: &[InventoryEntry],
        opts: &SyncOptions,
    ) -> Result<SyncResult, SyncError> {
        let fail = |phase, error| SyncError {
            phase,
            error,
            changes: None,
            pruned: None,
        };
        crate::inventory::check_size(&desired, opts.size_budget)
            .map_err(|e| fail(Phase::Plan, Error::InventoryTooLarge(e)))?;
        // `opm.dev/*` policies ([`policy`]): an unknown value refuses the whole apply; an ignored
        // object is not recorded, and what was recorded of it is never stale.
        let ignored = policy::ignored(objects).map_err(|e| fail(Phase::Plan, e))?;
        if desired.is_empty() && !previous.is_empty() && !opts.allow_empty {
            return Err(fail(
                Phase::Plan,
                Error::EmptyRenderRefused {
                    previous: previous.len(),
                },
            ));
        }
        let changes = self
            .apply_all_staged(objects, &opts.apply)
            .await
            .map_err(|e| fail(Phase::Apply, e))?;
        let mut pruned = None;
        if opts.prune {
            let stale = crate::inventory::stale(previous, &desired);
            let mut result = self.prune(&stale, &opts.prune_options).await;
            if let Some(e) = Error::collect(std::mem::take(&mut result.errors)) {
                return Err(SyncError {
                    phase: Phase::Prune,
                    error: e,
                    changes: Some(changes),
                    pruned: Some(result),
                });
            }
            pruned = Some(result);
        }
        Ok(SyncResult {
            changes,
            pruned,
            inventory: policy::recorded(&desired, &ignored),
        })
    }
}

/// Settings of [`Engine::sync`].
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Apply settings.
    pub apply: ApplyOptions,
    /// Prune stale entries (`spec.prune`).
    pub prune: bool,
    /// Prune settings (owner uuid, ...).
    pub prune_options: prune::PruneOptions,
    /// Allow an empty render to prune a non-empty inventory.
    pub allow_empty: bool,
    /// Inventory size budget in bytes.
    pub size_budget: usize,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            apply: ApplyOptions::default(),
            prune: true,
            prune_options: prune::PruneOptions::default(),
            allow_empty: false,
            size_budget: crate::inventory::DEFAULT_SIZE_BUDGET,
        }
    }
}

/// A successful sync: the new inventory is to be recorded.
#[derive(Debug)]
pub struct SyncResult {
    /// What apply did.
    pub changes: ChangeSet,
    /// What prune did (None when prune is off).
    pub pruned: Option<prune::PruneResult>,
    /// The new inventory entries (render order).
    pub inventory: Vec<InventoryEntry>,
}

/// The phase a sync failed in; the previous inventory stays in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before any write (invalid object, inventory too large, empty render refused).
    Plan,
    /// Apply (nothing pruned).
    Apply,
    /// Prune (every stale entry was tried).
    Prune,
}

/// A failed sync.
#[derive(Debug, thiserror::Error)]
#[error("{phase:?}: {error}")]
pub struct SyncError {
    /// Where it failed.
    pub phase: Phase,
    /// Why.
    #[source]
    pub error: Error,
    /// The apply's change set when apply succeeded and prune failed (the reconciler still
    /// emits `Applied` for it, §2.2 phase 5).
    pub changes: Option<ChangeSet>,
    /// What prune did before failing (deleted and skipped entries; the errors are in `error`).
    pub pruned: Option<prune::PruneResult>,
}
