//! The staged server-side apply, [`Engine::apply_all_staged`] (docs/design/operator.md §2.2
//! phase 5; docs/design/principles.md rules 1–7).
//!
//! Rules:
//! - **Stages**: objects are grouped into stages ([`object::stage_of`]): CRDs, Namespaces and
//!   ClusterRoles, then class kinds, then ServiceAccounts and Roles, then the rest. Stage 0 is
//!   waited for (CRD `Established`, Namespace active) and, when it applied CRDs, followed by a
//!   discovery refresh, so a module shipping a CRD and its CRs applies in one pass (discovery is
//!   otherwise cached: [`super::resolve`]).
//! - **Plan before write**: within a stage, every object is first planned ([`super::plan`]: GET
//!   and `dryRun=All`), and only when the whole stage planned without error are the created or
//!   configured objects applied for real, so a conflict or an invalid object fails its stage
//!   before any of that stage is written. Every object of a stage is planned; the stage's errors
//!   are all reported and the later stages do not run. An unchanged object is not written unless
//!   a claim manager holds a field of it the render dropped ([`claim`], step 3).
//! - **Create race** ([`claim`]): with instance labels, an object the plan found absent is
//!   created through a claim (one unforced apply by the instance's own field manager, which stays
//!   the object's manager until its next write hands it to `opm-controller`), so of several
//!   instances creating it at once exactly one succeeds and the others fail with
//!   `OwnershipConflict` in the same apply; claims are written first in their stage, and a lost
//!   claim takes back what the stage claimed.
//! - **Recreate** (planned [`Action::Recreated`], [`super::plan`]): the live object is deleted
//!   (uid precondition, background propagation), waited for until gone (bounded by
//!   [`super::EngineOptions::stage_timeout`]) and applied again. A recreate is logged and counted
//!   as created in the `Applied` message.
//! - **Final wait** ([`super::wait`]): with [`ApplyOptions::wait`], every applied object except
//!   those annotated [`super::WAIT_ANNOTATION`]` = "disabled"` is waited for after the last stage
//!   (kstatus, fail fast, deadline, cancellation). Stage-0 waits always run.

use futures::stream::{self, StreamExt};
use kube::api::{Api, DeleteParams, DynamicObject, Preconditions};

use super::object::{self, InstanceLabels, ObjectRef};
use super::plan::{Plan, Prepared};
use super::{claim, error, health, Action, ApplyOptions, Change, ChangeSet, Engine, Error};
use serde_json::Value;

/// One planned write of a stage.
struct Write {
    index: usize,
    action: Action,
    api: Api<DynamicObject>,
    recreate: Option<(String, Vec<String>)>,
    claims: Vec<String>,
}

impl Engine {
    /// Applies `objects` stage by stage (see the module rules) and returns the change set.
    pub async fn apply_all_staged(
        &self,
        objects: &[Value],
        opts: &ApplyOptions,
    ) -> Result<ChangeSet, Error> {
        let prepared = self.prepare_all(objects, opts)?;
        let mut results: Vec<Option<Action>> = vec![None; prepared.len()];
        let mut adopted: Vec<Option<String>> = vec![None; prepared.len()];
        for stage in 0..object::STAGES {
            let idx: Vec<usize> = (0..prepared.len())
                .filter(|&i| object::stage_of(&prepared[i].r) == stage)
                .collect();
            if idx.is_empty() {
                continue;
            }
            // Plan the whole stage (GET + dry-run per object) before writing any of it.
            let planned: Vec<(usize, Result<Plan, Error>)> = stream::iter(idx.iter().copied())
                .map(|i| {
                    let p = &prepared[i];
                    async move {
                        (
                            i,
                            self.plan_one(p, opts.recreate, opts.instance.as_ref())
                                .await,
                        )
                    }
                })
                .buffered(self.opts.concurrency.max(1))
                .collect()
                .await;
            let mut errors = Vec::new();
            let mut writes = Vec::new();
            for (i, r) in planned {
                match r {
                    Ok(plan) => {
                        results[i] = Some(plan.action);
                        adopted[i] = plan
                            .adopted
                            .map(|from| format!("{} (from {from})", prepared[i].r));
                        if plan.action != Action::Unchanged || !plan.claims.is_empty() {
                            writes.push(Write {
                                index: i,
                                action: plan.action,
                                api: plan.api,
                                recreate: plan.recreate,
                                claims: plan.claims,
                            });
                        }
                    }
                    Err(e) => errors.push(e),
                }
            }
            if let Some(e) = Error::collect(errors) {
                return Err(e);
            }
            // Claims of absent objects first ([`claim`]): a lost claim writes nothing else of
            // the stage and takes back what this stage claimed.
            let me = opts.instance.as_ref();
            let prepared = &prepared;
            let (claimed, plain): (Vec<Write>, Vec<Write>) = writes
                .into_iter()
                .partition(|w| me.is_some() && w.action == Action::Created);
            let won: Vec<(Write, Result<Option<String>, Error>)> = stream::iter(claimed)
                .map(|w| async move {
                    let r = self.write_one(&prepared[w.index], &w, me).await;
                    (w, r)
                })
                .buffered(self.opts.concurrency.max(1))
                .collect()
                .await;
            if won.iter().any(|(_, r)| r.is_err()) {
                let mut errors = Vec::new();
                for (w, r) in won {
                    match r {
                        Ok(Some(uid)) => self.roll_back(&prepared[w.index].r, &w.api, &uid).await,
                        Ok(None) => {}
                        Err(e) => errors.push(e),
                    }
                }
                if let Some(e) = Error::collect(errors) {
                    return Err(e);
                }
            }
            let written: Vec<Result<Option<String>, Error>> = stream::iter(plain)
                .map(|w| async move { self.write_one(&prepared[w.index], &w, me).await })
                .buffered(self.opts.concurrency.max(1))
                .collect()
                .await;
            if let Some(e) = Error::collect(written.into_iter().filter_map(Result::err).collect()) {
                return Err(e);
            }
            if stage == 0 {
                let names: Vec<&Prepared> = idx.iter().map(|&i| &prepared[i]).collect();
                self.wait_refs(
                    &names.iter().map(|p| p.r.clone()).collect::<Vec<_>>(),
                    self.opts.stage_timeout,
                    opts.cancel.clone(),
                )
                .await?;
                // Applied CRDs may change what discovery says (`resolve` module rules).
                if idx.iter().any(|&i| object::defines_kinds(&prepared[i].r)) {
                    self.resolver.refresh();
                }
            }
        }
        if opts.wait {
            let refs: Vec<ObjectRef> = prepared
                .iter()
                .filter(|p| !health::wait_disabled(&p.body))
                .map(|p| p.r.clone())
                .collect();
            self.wait_refs(&refs, opts.wait_timeout, opts.cancel.clone())
                .await?;
        }
        let changes = prepared
            .into_iter()
            .zip(results)
            .filter_map(|(p, a)| {
                a.map(|action| Change {
                    object: p.r,
                    action,
                })
            })
            .collect();
        Ok(ChangeSet {
            changes,
            adopted: adopted.into_iter().flatten().collect(),
        })
    }

    /// Applies one object for real (ownership forced, then the plan's claims released); a planned
    /// recreate first deletes the live object (uid precondition) and waits until it is gone. With
    /// instance labels `me`, an object the plan found absent (or just deleted for a recreate) is
    /// created through a claim ([`claim`]); the uid of an object this call created is returned
    /// (for a stage rollback).
    async fn write_one(
        &self,
        p: &Prepared,
        w: &Write,
        me: Option<&InstanceLabels>,
    ) -> Result<Option<String>, Error> {
        let api = &w.api;
        if let Some((uid, fields)) = &w.recreate {
            tracing::info!(object = %p.r, ?fields, "recreating: the update changes immutable fields (rollout.forceConflicts)");
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::background()
            };
            match api.delete(&p.r.name, &params).await {
                Ok(_) => {}
                Err(e) if error::is_not_found(&e) => {}
                Err(e) => return Err(self.err(e, &p.r, "delete (recreate)")),
            }
            self.wait_gone(p, api, uid).await?;
        }
        if let Some(me) = me.filter(|_| matches!(w.action, Action::Created | Action::Recreated)) {
            return match self.create_claimed(&p.r, &p.body, api, me).await? {
                claim::Claimed::Won(uid) if w.action == Action::Created => Ok(uid),
                _ => Ok(None),
            };
        }
        self.hand_over(&p.r, &p.body, api, &w.claims).await?;
        Ok(None)
    }

    /// Polls until the object with `uid` is gone (absent or replaced), bounded by the stage
    /// timeout (finalizers may hold it).
    async fn wait_gone(
        &self,
        p: &Prepared,
        api: &Api<DynamicObject>,
        uid: &str,
    ) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + self.opts.stage_timeout;
        loop {
            match api.get_opt(&p.r.name).await {
                Ok(None) => return Ok(()),
                Ok(Some(o)) if o.metadata.uid.as_deref() != Some(uid) => return Ok(()),
                Ok(Some(_)) => {}
                Err(e) => return Err(self.err(e, &p.r, "get")),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout {
                    waiting_for: vec![format!("{}: deletion before recreate", p.r)],
                    after: self.opts.stage_timeout,
                });
            }
            tokio::time::sleep(self.opts.wait_interval).await;
        }
    }
}
