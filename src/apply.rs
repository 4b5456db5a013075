//! The apply engine: staged server-side apply, change sets, safe prune, deletion, drift, health
//! and impersonation (docs/design/operator.md §2.2 phases 3–6, §2.4, §2.5, §6;
//! docs/design/principles.md §1.2–§1.4 and rules 1–7, 12, 13, 21).
//!
//! One [`Engine`] (a client, its identity, a shared discovery cache) and its verbs, one file
//! per verb as fluxcd/pkg's `ssa` splits its resource manager; each file states the rules of its
//! verb:
//! - [`staged`]: [`Engine::apply_all_staged`], the staged server-side apply (stages, plan before
//!   write, the create race, recreates, the stage-0 and final waits).
//! - [`plan`]: what an apply would do, without writing: the plan of one object (GET, the
//!   ownership rule, the forced dry-run, change detection, the recreate decision) and
//!   [`Engine::plan`]; [`preview`]: [`Engine::preview`], the fail-slow preview of every object
//!   (the render API's `validate` and `diff`).
//! - [`wait`]: [`Engine::health_of`], [`Engine::health_of_with`] and [`Engine::wait_ready`], the
//!   live kstatus (or custom) health of applied objects.
//! - [`sync`]: [`Engine::sync`], apply then prune with the inventory-safety rules.
//! - [`prune`] and [`deletion`]: stale and whole-inventory deletion with the prune guards;
//!   [`drift`]: the drift check; [`impersonate`]: the ServiceAccount identity; [`claim`] and
//!   [`ownership`]: who may write an object; [`policy`]: the per-object `opm.dev/*` annotations;
//!   [`resolve`]: discovery; [`object`]: object identity, stages and labels; [`health`]: kstatus.
//!
//! Rules of the whole engine:
//! - **Conflict semantics** (docs/design/principles.md §1.9 item 5, rule 5;
//!   docs/design/operator.md §2.2 phase 5, read as Flux's `force`): field manager
//!   [`FIELD_MANAGER`], and every SSA of the engine (apply stages, their dry-runs, drift checks
//!   and corrections, render previews) forces field ownership, so a field another manager took
//!   (`kubectl edit`) is taken back by the next apply: drift is corrected, never a conflict.
//!   `rollout.forceConflicts` ([`ApplyOptions::recreate`]) means "recreate objects whose update
//!   is refused" (the rules of [`plan`] and [`staged`]).
//! - At most [`EngineOptions::concurrency`] requests run at once in any verb.
//! - **Identity** ([`impersonate`]): an engine built over an impersonating client records the
//!   user, so a 403 is [`Error::Forbidden`] with `impersonated: Some(..)`. Owner lookups
//!   ([`ownership`]) always use the controller's own client.
//!
//! How a reconciler uses it (ModuleInstance, §2.2 phases 3–6 and §2.4):
//!
//! ```text
//! let engine = Engine::new(controller_client, EngineOptions::default());   // once, shared
//! // phase 3: drift with the identity the spec asks for; DriftOutcome::Unknown → drift counter +1
//! let report = engine.drift(&objects, &DriftOptions::default()).await;
//! // phase 4: identity (ServiceAccountNotFound / Forbidden → Stalled ImpersonationFailed)
//! let eng = engine.impersonating(&controller_config, &mi_namespace, &sa).await?;
//! // phases 5–6: on Ok record r.inventory (revision+1) and emit r.changes.applied_message();
//! // on Err keep the old inventory; err.phase says ApplyFailed / PruneFailed, and
//! // err.error.is_impersonation_forbidden() says Stalled ImpersonationFailed.
//! let r = eng.sync(&objects, &status.inventory.entries, &SyncOptions { prune: spec.prune,
//!     prune_options: PruneOptions { owner_uuid }, apply: ApplyOptions { force, instance, .. }, .. }).await;
//! // §2.4: deletion::decide(prune, inventory.len(), Some(&identity), annotation), then
//! // eng.delete_all(&entries, &opts): keep the finalizer unless DeleteResult::complete().
//! ```

pub mod claim;
pub mod deletion;
pub mod drift;
pub mod error;
pub mod health;
pub mod impersonate;
pub mod object;
pub mod ownership;
pub mod plan;
pub mod policy;
pub mod preview;
pub mod prune;
pub mod resolve;
pub mod staged;
pub mod sync;
pub mod wait;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::Client;
use serde_json::Value;

pub use error::Error;
use health::Cancel;
use object::{InstanceLabels, ObjectRef};
pub use preview::Preview;
use resolve::{Resolved, Resolver};
pub use sync::{Phase, SyncError, SyncOptions, SyncResult};

/// The SSA field manager and event reporter of the operator.
pub const FIELD_MANAGER: &str = "opm-controller";

/// Per-object wait opt-out: an object annotated `opm.dev/wait: "disabled"` is not waited for
/// by the final health wait (docs/design/principles.md rule 7). Stage-0 waits (CRDs, Namespaces) always run.
pub const WAIT_ANNOTATION: &str = "opm.dev/wait";

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// SSA field manager.
    pub field_manager: String,
    /// Runtime name stamped as `app.kubernetes.io/managed-by`.
    pub runtime_name: String,
    /// Requests in flight per stage (docs/design/principles.md rule 20: ~4; more is not faster).
    pub concurrency: usize,
    /// Poll interval of waits.
    pub wait_interval: Duration,
    /// Deadline of the stage-0 wait (CRDs established, Namespaces active).
    pub stage_timeout: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            field_manager: FIELD_MANAGER.into(),
            runtime_name: crate::kernel::RUNTIME_NAME.into(),
            concurrency: 4,
            wait_interval: Duration::from_millis(500),
            stage_timeout: Duration::from_secs(60),
        }
    }
}

/// Per-apply settings.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Recreate an existing object whose update is refused for immutable fields
    /// (`rollout.forceConflicts`); field ownership is always forced.
    pub recreate: bool,
    /// Instance identity labels to stamp (None: leave the render's labels as they are).
    pub instance: Option<InstanceLabels>,
    /// After the last stage, wait until every applied object is healthy (kstatus).
    pub wait: bool,
    /// Deadline of that final wait.
    pub wait_timeout: Duration,
    /// Fires when a newer desired state arrives: cancels waits.
    pub cancel: Cancel,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            recreate: false,
            instance: None,
            wait: false,
            wait_timeout: Duration::from_secs(300),
            cancel: Cancel::never(),
        }
    }
}

/// What apply did to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// It did not exist and was created.
    Created,
    /// It existed and differed; it was updated.
    Configured,
    /// It existed and a dry-run showed no change; nothing was written.
    Unchanged,
    /// It existed, its update was refused for immutable fields, and it was deleted and created
    /// again (`rollout.forceConflicts`).
    Recreated,
}

/// One entry of a change set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The object.
    pub object: ObjectRef,
    /// What happened to it.
    pub action: Action,
}

/// The result of an apply, in render order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// One entry per object.
    pub changes: Vec<Change>,
    /// Objects taken over from an instance that no longer exists ([`ownership`]): `object (from
    /// namespace/name)`, in render order.
    pub adopted: Vec<String>,
}

impl ChangeSet {
    /// Number of objects with `action`.
    pub fn count(&self, action: Action) -> usize {
        self.changes.iter().filter(|c| c.action == action).count()
    }

    /// The `Applied` event text (docs/design/operator.md §2.2 phase 5). A recreated object counts as
    /// created: the message shape is the design's, and the object is new (new uid).
    pub fn applied_message(&self) -> String {
        format!(
            "Applied {} resources ({} created, {} updated, {} unchanged)",
            self.changes.len(),
            self.count(Action::Created) + self.count(Action::Recreated),
            self.count(Action::Configured),
            self.count(Action::Unchanged)
        ) + &self.adopted_note()
    }

    /// `"; adopted …"` naming the adopted objects, or nothing.
    fn adopted_note(&self) -> String {
        if self.adopted.is_empty() {
            return String::new();
        }
        format!(
            "; adopted from deleted instances: {}",
            self.adopted.join(", ")
        )
    }
}

/// The apply engine. Cheap to clone; clones share the discovery cache.
#[derive(Clone)]
pub struct Engine {
    pub(crate) client: Client,
    pub(crate) resolver: Arc<Resolver>,
    pub(crate) opts: EngineOptions,
    /// The impersonated user, when the client impersonates (§2.5).
    pub(crate) impersonated: Option<String>,
    /// The controller's own client, whatever identity the engine acts with: owner lookups
    /// ([`ownership`]) are the operator's decision, so they never depend on what an impersonated
    /// ServiceAccount or render caller may read.
    pub(crate) controller: Client,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("opts", &self.opts)
            .field("impersonated", &self.impersonated)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine acting with `client`'s identity.
    pub fn new(client: Client, opts: EngineOptions) -> Engine {
        Engine {
            controller: client.clone(),
            client,
            resolver: Arc::new(Resolver::default()),
            opts,
            impersonated: None,
        }
    }

    /// The same engine acting through an impersonating client (see [`impersonate`]).
    pub fn with_identity(&self, client: Client, user: String) -> Engine {
        Engine {
            client,
            resolver: self.resolver.clone(),
            opts: self.opts.clone(),
            impersonated: Some(user),
            controller: self.controller.clone(),
        }
    }

    /// An engine acting on another cluster with `client` (`spec.kubeConfig`), sharing this
    /// engine's options but with a discovery cache of its own; owner lookups ([`ownership`])
    /// still use this engine's controller client: the instances live on this cluster.
    pub fn on_cluster(&self, client: Client) -> Engine {
        Engine {
            client,
            resolver: Arc::new(Resolver::default()),
            opts: self.opts.clone(),
            impersonated: None,
            controller: self.controller.clone(),
        }
    }

    /// The client this engine acts with.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The impersonated user, if any.
    pub fn impersonated(&self) -> Option<&str> {
        self.impersonated.as_deref()
    }

    /// The typed error of `verb` on `object`, naming the impersonated user (if any).
    pub(crate) fn err(&self, e: kube::Error, object: &ObjectRef, verb: &'static str) -> Error {
        Error::from_kube(e, &object.to_string(), verb, self.impersonated.as_deref())
    }

    /// The dynamic API of `r` (resolved), or the typed error for an unserved kind / a missing
    /// namespace.
    pub(crate) async fn api_for(
        &self,
        r: &ObjectRef,
    ) -> Result<Option<(Api<DynamicObject>, Resolved)>, Error> {
        let Some(res) = self
            .resolver
            .resolve(&self.client, r, self.impersonated.as_deref())
            .await?
        else {
            return Ok(None);
        };
        let api = if res.namespaced {
            let Some(ns) = r.namespace.as_deref() else {
                return Err(Error::InvalidObject {
                    object: r.to_string(),
                    reason: "namespaced kind without metadata.namespace".into(),
                });
            };
            Api::namespaced_with(self.client.clone(), ns, &res.resource)
        } else {
            Api::all_with(self.client.clone(), &res.resource)
        };
        Ok(Some((api, res)))
    }

    /// GETs the live object (`None` when absent or its kind is not served).
    pub async fn get_live(&self, r: &ObjectRef) -> Result<Option<Value>, Error> {
        let Some((api, _)) = self.api_for(r).await? else {
            return Ok(None);
        };
        match api.get_opt(&r.name).await {
            Ok(Some(o)) => Ok(Some(to_value(&o, r)?)),
            Ok(None) => Ok(None),
            Err(e) => Err(self.err(e, r, "get")),
        }
    }
}

/// The API object `o` (the object `r`) as JSON.
pub(crate) fn to_value(o: &DynamicObject, r: &ObjectRef) -> Result<Value, Error> {
    serde_json::to_value(o).map_err(|e| Error::InvalidObject {
        object: r.to_string(),
        reason: format!("cannot encode the API object: {e}"),
    })
}
