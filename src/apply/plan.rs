//! What an apply would do, without writing anything (docs/design/operator.md §2.2 phase 5;
//! docs/design/principles.md rules 1–5): the plan of one object, which the staged apply
//! ([`super::staged`]), [`Engine::plan`] and the preview ([`super::preview`]) share.
//!
//! Rules:
//! - **Prepare**: invalid objects and an object rendered twice (same group, kind, namespace,
//!   name) fail the whole call before any request; objects `opm.dev/apply: Ignore`
//!   ([`super::policy`]) are left out; every object is stamped with the runtime and instance
//!   labels ([`super::object::prepare`]).
//! - **Plan one object**: GET, then the ownership rule ([`super::ownership`]: an object of another
//!   live instance is refused, one of a deleted instance adopted), then a server-side apply with
//!   `dryRun=All` forcing field ownership. Change detection compares the dry-run answer with the
//!   live object, ignoring `managedFields`, `resourceVersion`, `generation` and `status` (absent →
//!   created; equal → unchanged, not written; else configured). An object
//!   `opm.dev/apply: IfNotPresent` that exists is unchanged, left entirely alone.
//! - **Claims** ([`super::claim`], the lazy hand-over): a write releases the claim managers still
//!   holding fields of the object. An unchanged object is written for them only when a claim
//!   holds a field that `opm-controller`'s entry of the dry-run answer does not (a field the
//!   render dropped, which only the release removes); any other claim waits for the next write.
//! - A kind not served is [`Error::UnknownKind`] (no dry-run is attempted for it), and so is one
//!   whose cached discovery went stale (its dry-run answers 404 and a fresh lookup finds it gone:
//!   [`super::resolve`]).
//! - **Recreate**: when the dry-run of an existing object is refused for immutable fields
//!   ([`super::error::immutable_fields`]), the object is planned [`Action::Recreated`] when
//!   `rollout.forceConflicts` ([`super::ApplyOptions::recreate`]) or `opm.dev/force: enabled`
//!   asks for it (so nothing is deleted when another object of the stage fails planning);
//!   without it the refusal is [`Error::Immutable`] naming the fields. Never recreated, whatever
//!   the setting ([`Error::RecreateRefused`], nothing deleted): Namespaces, CRDs and
//!   PersistentVolumeClaims (data loss), and a live object that the prune guard would not delete
//!   as ours ([`super::prune::guard`]; with instance labels, the live uuid must be the
//!   instance's).
//! - [`Engine::plan`] plans every object of every stage at once, with no wait, and reports the
//!   errors of all of them: objects of a kind not yet served (a CR whose CRD is part of the same
//!   set) are [`Error::UnknownKind`], since no dry-run can be made for them.

use futures::stream::{self, StreamExt};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::object::{self, InstanceLabels, ObjectRef};
use super::{
    claim, error, ownership, policy, prune, to_value, Action, ApplyOptions, Change, ChangeSet,
    Engine, Error,
};

/// What applying one object would do, and the API to do it with.
pub(super) struct Plan {
    pub(super) action: Action,
    pub(super) api: Api<DynamicObject>,
    /// The live object (comparable form), if it exists.
    pub(super) live: Option<Value>,
    /// The server-side dry-run result (comparable form); for a recreate, the body to apply.
    pub(super) planned: Value,
    /// For [`Action::Recreated`]: the live uid to delete and the immutable fields.
    pub(super) recreate: Option<(String, Vec<String>)>,
    /// The former owner (`namespace/name`) when the object is adopted ([`ownership`]).
    pub(super) adopted: Option<String>,
    /// Claim managers still holding fields of the live object ([`claim`]), released by the
    /// write. Of an unchanged object they are kept (and the object written for them) only when
    /// a claim holds a field the render dropped (the lazy hand-over).
    pub(super) claims: Vec<String>,
}

/// One prepared object.
pub(super) struct Prepared {
    pub(super) r: ObjectRef,
    pub(super) body: Value,
    /// Its `opm.dev/*` policy ([`policy`]).
    pub(super) policy: policy::Policy,
}

impl Engine {
    /// The objects to apply, prepared (module docs, “Prepare”).
    pub(super) fn prepare_all(
        &self,
        objects: &[Value],
        opts: &ApplyOptions,
    ) -> Result<Vec<Prepared>, Error> {
        let mut out = Vec::with_capacity(objects.len());
        let mut errors = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for o in objects {
            match ObjectRef::of(o) {
                Ok(r) => {
                    let identity = (
                        r.group.clone(),
                        r.kind.clone(),
                        r.namespace.clone(),
                        r.name.clone(),
                    );
                    if !seen.insert(identity) {
                        errors.push(Error::InvalidObject {
                            object: r.to_string(),
                            reason: "the render contains this object more than once".into(),
                        });
                        continue;
                    }
                    let policy = match policy::Policy::of(o) {
                        Ok(p) if p.ignored() => continue,
                        Ok(p) => p,
                        Err(e) => {
                            errors.push(e);
                            continue;
                        }
                    };
                    out.push(Prepared {
                        body: object::prepare(o, &self.opts.runtime_name, opts.instance.as_ref()),
                        r,
                        policy,
                    })
                }
                Err(e) => errors.push(e),
            }
        }
        match Error::collect(errors) {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// What applying `objects` would do, without writing anything (GET + server-side dry-run
    /// per object, all stages at once, no waits): the REST `validate`/`diff` modes and previews
    /// use it. Objects of a kind not yet served (a CR whose CRD is part of the same set) are
    /// reported as [`Error::UnknownKind`], since no dry-run can be made for them.
    pub async fn plan(&self, objects: &[Value], opts: &ApplyOptions) -> Result<ChangeSet, Error> {
        let prepared = self.prepare_all(objects, opts)?;
        let planned: Vec<Result<Plan, Error>> = stream::iter(prepared.iter())
            .map(|p| self.plan_one(p, opts.recreate, opts.instance.as_ref()))
            .buffered(self.opts.concurrency.max(1))
            .collect()
            .await;
        let mut changes = Vec::new();
        let mut adopted = Vec::new();
        let mut errors = Vec::new();
        for (p, r) in prepared.into_iter().zip(planned) {
            match r {
                Ok(plan) => {
                    if let Some(from) = plan.adopted {
                        adopted.push(format!("{} (from {from})", p.r));
                    }
                    changes.push(Change {
                        object: p.r,
                        action: plan.action,
                    })
                }
                Err(e) => errors.push(e),
            }
        }
        match Error::collect(errors) {
            Some(e) => Err(e),
            None => Ok(ChangeSet { changes, adopted }),
        }
    }

    /// GET, the ownership rule ([`ownership`]: an object of another live instance is refused)
    /// and dry-run of one object (field ownership forced): what applying it would do. An existing
    /// object whose update is refused for immutable fields is planned [`Action::Recreated`] when
    /// `recreate` allows it and the object may be recreated (see the module rules).
    pub(super) async fn plan_one(
        &self,
        p: &Prepared,
        recreate: bool,
        me: Option<&InstanceLabels>,
    ) -> Result<Plan, Error> {
        let Some((api, _)) = self.api_for(&p.r).await? else {
            return Err(Error::UnknownKind {
                object: p.r.to_string(),
                api_version: p.r.api_version(),
                kind: p.r.kind.clone(),
            });
        };
        let live = match api.get_opt(&p.r.name).await {
            Ok(o) => o.map(|o| to_value(&o, &p.r)).transpose()?,
            Err(e) => return Err(self.err(e, &p.r, "get")),
        };
        // `opm.dev/apply: IfNotPresent` ([`policy`]): an existing object is left as it is.
        if p.policy.apply == policy::ApplyMode::IfNotPresent {
            if let Some(live) = live {
                let live = comparable(live);
                // Left alone entirely: a leftover claim on it is not released either.
                return Ok(Plan {
                    action: Action::Unchanged,
                    api,
                    live: Some(live.clone()),
                    planned: live,
                    recreate: None,
                    adopted: None,
                    claims: Vec::new(),
                });
            }
        }
        // `opm.dev/force: enabled` ([`policy`]): this object is re-created as with
        // `rollout.forceConflicts`.
        let recreate = recreate || p.policy.force;
        let adopted = match self.ownership(&p.r, live.as_ref(), me).await? {
            ownership::Ownership::Ours => None,
            ownership::Ownership::Adopted(from) => Some(from),
        };
        let dry = PatchParams::apply(&self.opts.field_manager)
            .dry_run()
            .force();
        let answer = match api.patch(&p.r.name, &dry, &Patch::Apply(&p.body)).await {
            Ok(o) => to_value(&o, &p.r)?,
            // An apply creates a missing object, so a 404 says the kind (as cached) is not
            // served, or the namespace is missing: look the kind up afresh (`resolve` rules).
            Err(e) if error::is_not_found(&e) => {
                self.resolver.forget(&p.r);
                return match self.api_for(&p.r).await? {
                    None => Err(Error::UnknownKind {
                        object: p.r.to_string(),
                        api_version: p.r.api_version(),
                        kind: p.r.kind.clone(),
                    }),
                    Some(_) => Err(self.err(e, &p.r, "apply (dry-run)")),
                };
            }
            Err(e) => {
                let fields = live.as_ref().and_then(|_| error::immutable_fields(&e));
                return match (fields, live) {
                    (Some(fields), Some(live)) => self
                        .plan_recreate(p, api, live, fields, recreate)
                        .map(|plan| Plan { adopted, ..plan }),
                    _ => Err(self.err(e, &p.r, "apply (dry-run)")),
                };
            }
        };
        let mut claims = live.as_ref().map(claim::claim_managers).unwrap_or_default();
        let unrendered =
            !claims.is_empty() && claim::holds_unrendered(&answer, &self.opts.field_manager);
        let planned = comparable(answer);
        let live = live.map(comparable);
        let action = match &live {
            None => Action::Created,
            Some(l) if *l == planned => Action::Unchanged,
            Some(_) => Action::Configured,
        };
        // The lazy hand-over ([`claim`]): a claim is released by the next write; an unchanged
        // object is written for it only when a claim holds a field the render dropped.
        if action == Action::Unchanged && !unrendered {
            claims.clear();
        }
        Ok(Plan {
            action,
            api,
            live,
            planned,
            recreate: None,
            adopted,
            claims,
        })
    }

    /// The plan for an existing object whose update was refused for immutable `fields`: a
    /// recreate when allowed, else the typed refusal (module rules, "Conflict semantics").
    fn plan_recreate(
        &self,
        p: &Prepared,
        api: Api<DynamicObject>,
        live: Value,
        fields: Vec<String>,
        recreate: bool,
    ) -> Result<Plan, Error> {
        let object = p.r.to_string();
        if !recreate {
            return Err(Error::Immutable { object, fields });
        }
        let refused = |why: String| Error::RecreateRefused {
            object: p.r.to_string(),
            fields: fields.clone(),
            why,
        };
        if prune::is_protected(&p.r)
            || (p.r.group.is_empty() && p.r.kind == "PersistentVolumeClaim")
        {
            return Err(refused(format!(
                "a {} is never recreated (its data would be lost)",
                p.r.kind
            )));
        }
        let live_uuid = live
            .pointer("/metadata/labels")
            .and_then(|l| l.get(object::INSTANCE_UUID_LABEL))
            .and_then(Value::as_str)
            .unwrap_or("");
        let owner = p
            .body
            .pointer("/metadata/labels")
            .and_then(|l| l.get(object::INSTANCE_UUID_LABEL))
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(skip) = prune::guard(&live, owner) {
            return Err(refused(format!(
                "the prune guard keeps the live object ({skip:?})"
            )));
        }
        if !owner.is_empty() && live_uuid != owner {
            return Err(refused(format!(
                "the live object belongs to instance uuid {live_uuid:?}, not {owner:?}"
            )));
        }
        let Some(uid) = live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Err(refused("the live object has no uid".into()));
        };
        Ok(Plan {
            action: Action::Recreated,
            api,
            live: Some(comparable(live)),
            planned: comparable(p.body.clone()),
            recreate: Some((uid, fields)),
            adopted: None,
            claims: Vec::new(),
        })
    }
}

/// The object with the fields that change on every write removed (for change detection).
/// `status` is not compared: apply never sends it (it is stripped), so a status difference
/// between the dry-run answer and the live object (a controller's or the server's timestamps)
/// is never a change of ours.
fn comparable(mut o: Value) -> Value {
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("resourceVersion");
        m.remove("generation");
    }
    o
}
