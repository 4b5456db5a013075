//! Safe prune (docs/design/operator.md §6.3, docs/design/decisions.md §4; docs/design/principles.md rule 3).
//!
//! Per stale entry, in order:
//! 1. Kind `Namespace` or `CustomResourceDefinition` → skipped, always.
//! 2. GET the live object: NotFound (or a kind no longer served) → already gone, success; an
//!    error → collected, continue with the next entry.
//! 3. Live label `app.kubernetes.io/managed-by` not one of `opm-cli`, `opm-controller`,
//!    `open-platform-model` → skipped (the object is no longer ours; a copied label never makes
//!    an object prunable because candidates come only from the inventory).
//! 4. `owner_uuid` non-empty, live `module-instance.opmodel.dev/uuid` non-empty and different →
//!    skipped. An empty live uuid (legacy) is tolerated; an empty `owner_uuid` disables the check.
//! 5. Live annotation [`PRUNE_ANNOTATION`] = `"disabled"` → skipped (per-object opt-out).
//! 6. DELETE (background propagation); NotFound → success; an error → collected, continue
//!    (fail-slow: every entry is tried and every error reported).
//!
//! Entries are processed with the engine's bounded concurrency; results keep the entry order.

use futures::stream::{self, StreamExt};
use kube::api::DeleteParams;
use serde_json::Value;

use super::error::Error;
use super::object::{ObjectRef, INSTANCE_UUID_LABEL, MANAGED_BY_LABEL};
use super::Engine;
use crds::common::InventoryEntry;

/// Per-object prune opt-out: an object annotated `opm.dev/prune: "disabled"` is never pruned
/// (nor deleted on instance deletion); only the exact value `"disabled"` counts.
pub const PRUNE_ANNOTATION: &str = "opm.dev/prune";

/// The `managed-by` values that mark an object as OPM-managed (§1.5).
pub const OPM_ACTORS: [&str; 3] = ["opm-cli", "opm-controller", "open-platform-model"];

/// Settings of a prune.
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    /// The owning instance's uuid (`status.instanceUUID`); empty disables the uuid guard.
    pub owner_uuid: String,
}

/// Why an entry was not deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// Namespaces and CRDs are never pruned.
    ProtectedKind,
    /// The live `managed-by` label is not an OPM actor (value shown, empty when absent).
    NotManaged(String),
    /// The live uuid label names another instance.
    OtherOwner(String),
    /// The object carries the opt-out annotation.
    OptedOut,
}

/// The outcome of a prune.
#[derive(Debug, Default)]
pub struct PruneResult {
    /// Objects deleted (or already gone).
    pub deleted: Vec<ObjectRef>,
    /// Objects left in place, with why.
    pub skipped: Vec<(ObjectRef, SkipReason)>,
    /// Every error met (the other entries were still tried).
    pub errors: Vec<Error>,
}

fn label<'a>(o: &'a Value, key: &str) -> &'a str {
    o.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The guard decision for a live object (rules 3–5), `None` when it may be deleted.
pub fn guard(live: &Value, owner_uuid: &str) -> Option<SkipReason> {
    let managed_by = label(live, MANAGED_BY_LABEL);
    if !OPM_ACTORS.contains(&managed_by) {
        return Some(SkipReason::NotManaged(managed_by.to_string()));
    }
    let uuid = label(live, INSTANCE_UUID_LABEL);
    if !owner_uuid.is_empty() && !uuid.is_empty() && uuid != owner_uuid {
        return Some(SkipReason::OtherOwner(uuid.to_string()));
    }
    let opt_out = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PRUNE_ANNOTATION))
        .and_then(Value::as_str)
        == Some("disabled");
    if opt_out {
        return Some(SkipReason::OptedOut);
    }
    None
}

/// Whether the entry's kind is never pruned.
pub fn is_protected(r: &ObjectRef) -> bool {
    matches!(
        (r.group.as_str(), r.kind.as_str()),
        ("", "Namespace") | ("apiextensions.k8s.io", "CustomResourceDefinition")
    )
}

impl Engine {
    /// Prunes `stale` entries with the guards of the module docs.
    pub async fn prune(&self, stale: &[InventoryEntry], opts: &PruneOptions) -> PruneResult {
        let results: Vec<(ObjectRef, Result<Option<SkipReason>, Error>)> =
            stream::iter(stale.iter().map(ObjectRef::of_entry))
                .map(|r| async move {
                    let res = self.prune_one(&r, opts).await;
                    (r, res)
                })
                .buffered(self.opts.concurrency.max(1))
                .collect()
                .await;
        let mut out = PruneResult::default();
        for (r, res) in results {
            match res {
                Ok(None) => out.deleted.push(r),
                Ok(Some(why)) => out.skipped.push((r, why)),
                Err(err) => out.errors.push(err),
            }
        }
        out
    }

    async fn prune_one(
        &self,
        r: &ObjectRef,
        opts: &PruneOptions,
    ) -> Result<Option<SkipReason>, Error> {
        if is_protected(r) {
            return Ok(Some(SkipReason::ProtectedKind));
        }
        let Some((api, _)) = self.api_for(r).await? else {
            return Ok(None);
        };
        let live = match api.get_opt(&r.name).await {
            Ok(Some(o)) => super::to_value(&o, r)?,
            Ok(None) => return Ok(None),
            Err(e) => return Err(self.err(e, r, "get")),
        };
        if let Some(why) = guard(&live, &opts.owner_uuid) {
            return Ok(Some(why));
        }
        match api.delete(&r.name, &DeleteParams::background()).await {
            Ok(_) => Ok(None),
            Err(e) if super::error::is_not_found(&e) => Ok(None),
            Err(e) => Err(self.err(e, r, "delete")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"labels": labels, "annotations": annotations}})
    }

    #[test]
    fn guards() {
        let ok = live(
            json!({"app.kubernetes.io/managed-by": "opm-controller", "module-instance.opmodel.dev/uuid": "u1"}),
            json!({}),
        );
        assert_eq!(guard(&ok, "u1"), None);
        assert_eq!(guard(&ok, ""), None);
        assert_eq!(guard(&ok, "u2"), Some(SkipReason::OtherOwner("u1".into())));
        let legacy = live(
            json!({"app.kubernetes.io/managed-by": "open-platform-model"}),
            json!({}),
        );
        assert_eq!(guard(&legacy, "u1"), None);
        let cli = live(
            json!({"app.kubernetes.io/managed-by": "opm-cli", "module-instance.opmodel.dev/uuid": "u1"}),
            json!({}),
        );
        assert_eq!(guard(&cli, "u1"), None);
        let foreign = live(json!({"app.kubernetes.io/managed-by": "helm"}), json!({}));
        assert_eq!(
            guard(&foreign, "u1"),
            Some(SkipReason::NotManaged("helm".into()))
        );
        assert_eq!(
            guard(&json!({"metadata": {}}), ""),
            Some(SkipReason::NotManaged(String::new()))
        );
        let opted = live(
            json!({"app.kubernetes.io/managed-by": "opm-controller"}),
            json!({"opm.dev/prune": "disabled"}),
        );
        assert_eq!(guard(&opted, ""), Some(SkipReason::OptedOut));
        let not_exact = live(
            json!({"app.kubernetes.io/managed-by": "opm-controller"}),
            json!({"opm.dev/prune": "false"}),
        );
        assert_eq!(guard(&not_exact, ""), None);
    }
}
