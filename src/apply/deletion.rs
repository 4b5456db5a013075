//! Deletion of an instance's objects (docs/design/operator.md §2.4; docs/design/principles.md rules 12–13).
//!
//! Rules:
//! - [`decide`] turns the inputs of §2.4 into a typed decision; the reconciler sets the
//!   conditions and events. In order: `!prune` or an empty inventory → orphan (remove the
//!   finalizer, delete nothing). A ServiceAccount in effect that is missing → with the
//!   `opm.dev/force-delete-orphan` annotation exactly `"true"`: orphan with the
//!   `OrphanedOnDeletion` outcome (inventory cleared); otherwise `DeletionSAMissing`
//!   (finalizer kept, no deletes, **no fallback to the controller identity**). Any other
//!   impersonation error → `ImpersonationFailed`. Otherwise → prune the whole inventory.
//! - [`Engine::delete_all`] prunes every inventory entry with the §6.3 guards (Namespaces and
//!   CRDs skipped, foreign objects skipped, fail-slow), then re-reads each deleted object: an
//!   object still present (finalizers, terminating) is reported in `remaining`, so the caller
//!   keeps the finalizer and the inventory until the objects are proven gone.

use crds::common::InventoryEntry;

use super::error::Error;
use super::object::ObjectRef;
use super::prune::{PruneOptions, PruneResult};
use super::Engine;

/// The orphan escape annotation (§1.5); only `"true"` counts.
pub const FORCE_DELETE_ORPHAN_ANNOTATION: &str = "opm.dev/force-delete-orphan";

/// What deletion should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Remove the finalizer, delete nothing (prune off or nothing recorded).
    Orphan,
    /// The SA is gone and the annotation is `"true"`: Warning `OrphanedOnDeletion` for `count`
    /// resources, clear the inventory, remove the finalizer.
    OrphanSaMissing {
        /// Inventory entries orphaned.
        count: usize,
        /// `<ns>/<sa>`.
        service_account: String,
    },
    /// The SA is gone, no escape: Stalled `DeletionSAMissing`, finalizer kept, no deletes.
    StallSaMissing {
        /// `<ns>/<sa>`.
        service_account: String,
    },
    /// Impersonation failed otherwise: Stalled `ImpersonationFailed`.
    ImpersonationFailed(String),
    /// Prune every inventory entry (with the engine given).
    Prune,
}

/// The §2.4 decision. `identity` is the outcome of building the impersonated engine (`None`
/// when no SA is in effect); `annotation` is the object's `opm.dev/force-delete-orphan` value.
pub fn decide(
    prune: bool,
    inventory_len: usize,
    identity: Option<&Result<Engine, Error>>,
    annotation: Option<&str>,
) -> Decision {
    if !prune || inventory_len == 0 {
        return Decision::Orphan;
    }
    match identity {
        Some(Err(Error::ServiceAccountNotFound { namespace, name })) => {
            let service_account = format!("{namespace}/{name}");
            if annotation == Some("true") {
                Decision::OrphanSaMissing {
                    count: inventory_len,
                    service_account,
                }
            } else {
                Decision::StallSaMissing { service_account }
            }
        }
        Some(Err(e)) => Decision::ImpersonationFailed(e.to_string()),
        Some(Ok(_)) | None => Decision::Prune,
    }
}

/// The outcome of [`Engine::delete_all`].
#[derive(Debug, Default)]
pub struct DeleteResult {
    /// The prune over the whole inventory.
    pub pruned: PruneResult,
    /// Deleted objects still present (finalizers pending): keep the finalizer and inventory.
    pub remaining: Vec<ObjectRef>,
}

impl DeleteResult {
    /// Whether every object is proven gone (or deliberately skipped) and no error occurred.
    pub fn complete(&self) -> bool {
        self.pruned.errors.is_empty() && self.remaining.is_empty()
    }
}

impl Engine {
    /// Deletes every entry of `inventory` (see the module rules).
    pub async fn delete_all(
        &self,
        inventory: &[InventoryEntry],
        opts: &PruneOptions,
    ) -> DeleteResult {
        let mut pruned = self.prune(inventory, opts).await;
        let mut remaining = Vec::new();
        for r in &pruned.deleted {
            match self.get_live(r).await {
                Ok(None) => {}
                Ok(Some(_)) => remaining.push(r.clone()),
                Err(e) => pruned.errors.push(e),
            }
        }
        DeleteResult { pruned, remaining }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        assert_eq!(decide(false, 3, None, None), Decision::Orphan);
        assert_eq!(decide(true, 0, None, None), Decision::Orphan);
        assert_eq!(decide(true, 3, None, None), Decision::Prune);
        let missing = || {
            Err(Error::ServiceAccountNotFound {
                namespace: "team-a".into(),
                name: "sa".into(),
            })
        };
        assert_eq!(
            decide(true, 3, Some(&missing()), Some("yes")),
            Decision::StallSaMissing {
                service_account: "team-a/sa".into()
            }
        );
        assert_eq!(
            decide(true, 3, Some(&missing()), None),
            Decision::StallSaMissing {
                service_account: "team-a/sa".into()
            }
        );
        assert_eq!(
            decide(true, 3, Some(&missing()), Some("true")),
            Decision::OrphanSaMissing {
                count: 3,
                service_account: "team-a/sa".into()
            }
        );
        let denied: Result<Engine, Error> = Err(Error::Forbidden {
            object: "ServiceAccount/team-a/sa".into(),
            verb: "get",
            impersonated: None,
            message: "denied".into(),
        });
        assert!(matches!(
            decide(true, 3, Some(&denied), Some("true")),
            Decision::ImpersonationFailed(_)
        ));
    }
}
