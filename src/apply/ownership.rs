//! Ownership of live objects between instances (issue 29; Argo CD's shared-resource conflict).
//!
//! Rules, checked for every object an apply or a preview plans, after the GET of the live object
//! and before anything is written:
//! - An object that does not exist, carries no `module-instance.opmodel.dev/uuid` label, carries
//!   the applying instance's uuid, or is applied without instance labels (no identity to compare)
//!   is ours to apply.
//! - An object carrying another uuid belongs to the instance its `…/name` and `…/namespace` labels
//!   name. When that instance is *live* — a ModuleInstance or ModulePackage of that namespace and
//!   name exists, and (for a ModuleInstance whose status records it) its `instanceUUID` is the
//!   label's — the object is not applied: [`Error::OwnershipConflict`] names the object and the
//!   owner `namespace/name`. The apply fails in its planning, so nothing of that stage is written
//!   and nothing is pruned; the reconciler reports `Ready=False` reason `OwnershipConflict`.
//! - When no such instance exists (deleted, or the labels name an incarnation whose uuid differs),
//!   the object is adopted: applied (field ownership is forced anyway) and reported in
//!   [`super::ChangeSet::adopted`].
//! - The owner is looked up with the controller's own identity ([`Engine`]'s controller client),
//!   whatever identity the apply or preview acts with: whether an object is another instance's is
//!   the operator's decision, the same for a reconcile impersonating a ServiceAccount, a render
//!   API preview as its caller, and the controller itself. (The live object itself is still read
//!   as that identity first, so a caller learns an owner only of an object it may read.)
//! - A failed owner lookup (403, 5xx) fails the plan of that object: ownership is never guessed.
//! - The window between this GET and the write (two instances both finding the object absent)
//!   is closed by [`super::claim`]: an absent object is created through an unforced claim, and
//!   the loser comes back here with the object its rival created, in the same apply. The rule
//!   reads labels only, never `managedFields`: a claim manager still holding an object's fields
//!   (the lazy hand-over) changes nothing here.

use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;

use super::error::Error;
use super::object::{
    InstanceLabels, ObjectRef, INSTANCE_NAMESPACE_LABEL, INSTANCE_NAME_LABEL, INSTANCE_UUID_LABEL,
};
use super::Engine;

/// What the rule says of one live object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Ours (or nobody's): apply.
    Ours,
    /// Another instance's, which no longer exists: apply and report the adoption (`namespace/name`
    /// of the former owner).
    Adopted(String),
}

fn label<'a>(live: &'a Value, key: &str) -> &'a str {
    live.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Engine {
    /// Applies the rules of the module docs to the live object of `r`.
    pub(crate) async fn ownership(
        &self,
        r: &ObjectRef,
        live: Option<&Value>,
        me: Option<&InstanceLabels>,
    ) -> Result<Ownership, Error> {
        let (Some(live), Some(me)) = (live, me) else {
            return Ok(Ownership::Ours);
        };
        let uuid = label(live, INSTANCE_UUID_LABEL);
        if uuid.is_empty() || uuid == me.uuid {
            return Ok(Ownership::Ours);
        }
        let (name, namespace) = (
            label(live, INSTANCE_NAME_LABEL),
            label(live, INSTANCE_NAMESPACE_LABEL),
        );
        let owner = format!("{namespace}/{name}");
        if name.is_empty() || namespace.is_empty() {
            return Ok(Ownership::Adopted(owner));
        }
        if self.instance_is_live(r, namespace, name, uuid).await? {
            return Err(Error::OwnershipConflict {
                object: r.to_string(),
                owner,
            });
        }
        Ok(Ownership::Adopted(owner))
    }

    /// Whether a ModuleInstance (with that uuid, when its status records one) or a ModulePackage
    /// named `namespace/name` exists.
    async fn instance_is_live(
        &self,
        r: &ObjectRef,
        namespace: &str,
        name: &str,
        uuid: &str,
    ) -> Result<bool, Error> {
        let kinds = [
            ApiResource::erase::<crds::ModuleInstance>(&()),
            ApiResource::erase::<crds::ModulePackage>(&()),
        ];
        for ar in kinds {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.controller.clone(), namespace, &ar);
            // The controller's identity: a 403 here is the operator's RBAC, never the
            // impersonated identity's (so it is not an `ImpersonationFailed`).
            let found = api.get_opt(name).await.map_err(|e| {
                Error::from_kube(e, &r.to_string(), "get the owner instance of", None)
            })?;
            let Some(found) = found else { continue };
            let recorded = found
                .data
                .pointer("/status/instanceUUID")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Ok(recorded.is_empty() || recorded == uuid);
        }
        Ok(false)
    }
}
