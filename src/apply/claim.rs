//! The create race (issue 41 item 4): when several instances render the same absent object at
//! the same moment, exactly one creates it; the others learn it in the same apply
//! ([`super::error::Error::OwnershipConflict`]), never at a later reconcile.
//!
//! The ownership rule ([`super::ownership`]) reads the live object at plan time. Between that
//! GET and the write another instance may create the object: with forced server-side apply by one
//! shared field manager, both writes succeed and the last one rewrites the owner labels. So an
//! object the plan found absent is created with a claim recorded in the object itself:
//!
//! 1. **Claim** (the create, one write): a server-side apply of the full object, *not forced*,
//!    by the instance's own field manager `opm-claim.<uuid>` ([`claim_manager`]). If the object
//!    appeared meanwhile, the owner labels it carries (another uuid, owned by another manager)
//!    conflict: 409, nothing written. The live object is then read again and the ownership rule
//!    decides: another live instance owns it → `OwnershipConflict`; otherwise (its owner is gone,
//!    or it carries no owner) it is applied as any existing object (forced, `opm-controller`) and
//!    the claims it carries are released (step 3).
//!    The claim that won stays the object's field manager: right after its create an object's
//!    `managedFields` name `opm-claim.<uuid>` (operation `Apply`), not `opm-controller`.
//! 2. **Lazy hand-over**: the claim is left in place until the object's next real write. Every
//!    plan dry-runs the apply forced by `opm-controller`; on an object the claim owns, that makes
//!    `opm-controller` co-own every field it renders with the same value (server-side apply shares
//!    equal values), so change detection ([`super::plan`]) and drift detection
//!    ([`super::drift`], which compares within `opm-controller`'s fields of that dry-run answer)
//!    read a claimed object exactly as a handed-over one: an unchanged object is not written.
//! 3. **Release** at the next write: an apply that writes the object (it changed, drifted, or was
//!    adopted) is the forced apply by `opm-controller`, then each claim manager still holding
//!    fields applies an empty configuration, which releases them (SSA's documented way to give up
//!    fields: what no other manager owns is removed, and `opm-controller` owns all it renders).
//!    A field the render dropped is held by the claim alone, so the dry-run answer still carries
//!    it and the object would plan unchanged: the plan therefore also writes (and releases) an
//!    unchanged object when a claim holds a field `opm-controller`'s dry-run entry does not
//!    ([`holds_unrendered`]), and the dropped field is removed by that release. The same rule
//!    releases a claim left by another instance (an adopted object) or a process that died.
//!
//! Within a stage the claims are written first; when one of them loses, the objects this apply
//! just claimed in that stage are deleted again (uid precondition) and nothing else of the stage
//! is written, so a losing instance leaves nothing of that stage behind.
//!
//! Trade-off (why not the alternatives): a POST create is create-only too, but leaves an
//! `Update` entry owning every field (and the defaults), which keeps fields alive after the render
//! drops them unless managedFields are rewritten by hand; a claim object of its own (a Lease per
//! object) costs writes plus objects to clean up and RBAC; an eager hand-over right after the
//! claim (forced apply, then release) costs two more writes per created object. Lazily, a create
//! is one write, as a plain apply; the hand-over costs the two writes only at the object's first
//! real write afterwards (an update that would write anyway, plus one release), and never for an
//! object that does not change. What it costs in clarity: until then `kubectl get -o yaml` shows
//! `opm-claim.<uuid>` as the field manager, and objects `opm.dev/apply: IfNotPresent` (never
//! written again) keep it. Applies without instance labels (no identity to claim with) create
//! with a plain forced apply by `opm-controller`.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use serde_json::{json, Value};

use super::error::Error;
use super::object::{InstanceLabels, ObjectRef};
use super::Engine;

/// Prefix of the claim field managers.
pub const CLAIM_MANAGER_PREFIX: &str = "opm-claim.";

/// The claim field manager of an instance.
pub fn claim_manager(me: &InstanceLabels) -> String {
    format!("{CLAIM_MANAGER_PREFIX}{}", me.uuid)
}

/// The claim managers holding fields of a live object (an entry that owns nothing, as a
/// release may leave it, holds nothing back and is ignored).
pub fn claim_managers(live: &Value) -> Vec<String> {
    let mut out: Vec<String> = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| {
            e.get("fieldsV1")
                .and_then(Value::as_object)
                .is_some_and(|f| !f.is_empty())
        })
        .filter_map(|e| e.get("manager").and_then(Value::as_str))
        .filter(|m| m.starts_with(CLAIM_MANAGER_PREFIX))
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a claim manager in `planned` (a dry-run answer of the forced apply by `manager`)
/// holds a field that `manager`'s `Apply` entry does not: a field the render no longer holds,
/// which only a release removes (module docs, step 3). With no entry of `manager`, any claim
/// holding fields counts.
pub fn holds_unrendered(planned: &Value, manager: &str) -> bool {
    let Some(entries) = planned
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return false;
    };
    let ours = entries
        .iter()
        .find(|e| {
            e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some("Apply")
                && e.get("subresource").is_none_or(|s| s.as_str() == Some(""))
        })
        .and_then(|e| e.get("fieldsV1"));
    entries
        .iter()
        .filter(|e| {
            e.get("manager")
                .and_then(Value::as_str)
                .is_some_and(|m| m.starts_with(CLAIM_MANAGER_PREFIX))
        })
        .filter_map(|e| e.get("fieldsV1"))
        .any(|theirs| !ours.is_some_and(|ours| covers(ours, theirs)))
}

/// Whether the `fieldsV1` set `ours` holds every path of `theirs` (a key-by-key subset: an
/// element or map named by `theirs` is named by `ours` with the same key, recursively).
fn covers(ours: &Value, theirs: &Value) -> bool {
    match (ours.as_object(), theirs.as_object()) {
        (Some(o), Some(t)) => t
            .iter()
            .all(|(k, tv)| o.get(k).is_some_and(|ov| covers(ov, tv))),
        // Not a set: equal or not held.
        _ => ours == theirs,
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The identity part of a body: an applied configuration that owns nothing.
fn empty_config(body: &Value) -> Value {
    let mut metadata = serde_json::Map::new();
    for k in ["name", "namespace"] {
        if let Some(v) = body.pointer(&format!("/metadata/{k}")) {
            metadata.insert(k.to_owned(), v.clone());
        }
    }
    json!({
        "apiVersion": body.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": body.get("kind").cloned().unwrap_or(Value::Null),
        "metadata": metadata,
    })
}

/// What a claim did.
pub(crate) enum Claimed {
    /// This apply created (or already held) the object; its uid, for a rollback.
    Won(Option<String>),
    /// The object appeared meanwhile and is not another live instance's: applied as existing.
    Existing,
}

impl Engine {
    /// Step 1 of the module docs for an object the plan found absent.
    pub(crate) async fn create_claimed(
        &self,
        r: &ObjectRef,
        body: &Value,
        api: &Api<DynamicObject>,
        me: &InstanceLabels,
    ) -> Result<Claimed, Error> {
        let claim = claim_manager(me);
        let params = PatchParams::apply(&claim);
        match api.patch(&r.name, &params, &Patch::Apply(body)).await {
            // The claim stays the manager until the next write (module docs, step 2).
            Ok(o) => Ok(Claimed::Won(o.metadata.uid)),
            Err(e) if is_conflict(&e) => {
                let live = match api.get_opt(&r.name).await {
                    Ok(Some(o)) => Some(super::to_value(&o, r)?),
                    // No rival object: the conflict is not a lost race; it is returned as is.
                    Ok(None) => return Err(self.err(e, r, "apply (claim)")),
                    Err(e) => return Err(self.err(e, r, "get")),
                };
                // Another live instance's: OwnershipConflict (nothing was written).
                self.ownership(r, live.as_ref(), Some(me)).await?;
                let claims = live.as_ref().map(claim_managers).unwrap_or_default();
                self.hand_over(r, body, api, &claims).await?;
                Ok(Claimed::Existing)
            }
            Err(e) => Err(self.err(e, r, "apply (claim)")),
        }
    }

    /// The forced apply by the engine's field manager, then the release of `claims`.
    pub(crate) async fn hand_over(
        &self,
        r: &ObjectRef,
        body: &Value,
        api: &Api<DynamicObject>,
        claims: &[String],
    ) -> Result<(), Error> {
        let params = PatchParams::apply(&self.opts.field_manager).force();
        api.patch(&r.name, &params, &Patch::Apply(body))
            .await
            .map_err(|e| self.err(e, r, "apply"))?;
        self.release(r, body, api, claims).await
    }

    /// Step 3, after the forced apply: each claim manager applies an empty configuration.
    pub(crate) async fn release(
        &self,
        r: &ObjectRef,
        body: &Value,
        api: &Api<DynamicObject>,
        claims: &[String],
    ) -> Result<(), Error> {
        let empty = empty_config(body);
        for c in claims {
            api.patch(&r.name, &PatchParams::apply(c), &Patch::Apply(&empty))
                .await
                .map_err(|e| self.err(e, r, "apply (release claim)"))?;
        }
        Ok(())
    }

    /// Deletes an object this apply just created (uid precondition; gone already is fine).
    pub(crate) async fn roll_back(&self, r: &ObjectRef, api: &Api<DynamicObject>, uid: &str) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        if let Err(e) = api.delete(&r.name, &params).await {
            if !super::error::is_not_found(&e) {
                tracing::warn!(object = %r, error = %e, "could not delete an object claimed by a losing apply");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_managers_are_found_in_managed_fields() {
        let f = json!({"f:data": {}});
        let live = json!({"metadata": {"managedFields": [
            {"manager": "opm-controller", "operation": "Apply", "fieldsV1": f},
            {"manager": "opm-claim.u-2", "operation": "Apply", "fieldsV1": f},
            {"manager": "kubectl", "operation": "Update", "fieldsV1": f},
            {"manager": "opm-claim.u-1", "operation": "Apply", "fieldsV1": f},
            {"manager": "opm-claim.u-3", "operation": "Apply", "fieldsV1": {}},
        ]}});
        assert_eq!(claim_managers(&live), ["opm-claim.u-1", "opm-claim.u-2"]);
        assert!(claim_managers(&json!({"metadata": {}})).is_empty());
    }

    #[test]
    fn the_empty_configuration_names_the_object_only() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "n", "labels": {"x": "y"}}, "data": {"k": "v"}});
        assert_eq!(
            empty_config(&body),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}})
        );
    }
}
