//! The reconcile core the ModuleInstance and ModulePackage reconcilers share (docs/design/operator.md
//! §2.1–§2.5, §6.1, §6.6, §6.7, §7.2, §7.3; docs/design/decisions.md §1–§2; docs/design/principles.md rules 1–3, 8, 9, 11,
//! 12).
//!
//! Both kinds render a module on a leased platform, apply its objects, prune what the render no
//! longer holds and record an inventory. They differ in where the render comes from (a module
//! reference; a Flux artifact) and in a few rules the design states per kind. This module owns every
//! phase they share, once, generic over `Rendered`: the object's status, the spec fields the core
//! reads and the per-kind rules (`Rendered::METRICS`, `Rendered::FORBIDDEN_STALLS`,
//! `Rendered::DETECTS_DRIFT`, `Rendered::interval`, `Rendered::owner_uuid`). `instance.rs`
//! and `package.rs` keep their own phases and call these in their order.
//!
//! Phases and the rules implemented here:
//! - **Entry**: both kinds go through the one reconcile frame (`super::reconcile`: one GET,
//!   one span, the kind's phases, one commit point). A kind that records metrics (§7.2:
//!   ModuleInstance, never a CLI-owned one; ModulePackage records none, as upstream alpha.12)
//!   observes the outcome and the duration of every reconcile, the suspend and deletion paths
//!   included, and forgets the inventory gauge of a missing object (`forget`). A kind's phases
//!   end with [`Run::attempted`], which turns a classified failure of phases 1–7 into the
//!   recorded attempt of “Commit” below.
//! - **Gates** (`Run::gates`; §2.2 gates 3–6, §2.3 step 1): a missing `opmodel.dev/cleanup`
//!   finalizer is added and the reconcile requeues at once (the generation predicate drops that
//!   event); a deleting object without it is done. Deletion follows §2.4 and suspend never blocks
//!   it. `suspend` marks Suspended with observedGeneration, one patch, Normal `Suspended` (action
//!   `Suspend`) on the transition, no requeue, nothing else touched. A prior Ready reason
//!   `Suspended` emits Normal `Resumed` (action `Resume`). Past the gates, the value of the
//!   reconcile-request annotation ([`crds::RECONCILE_REQUEST_ANNOTATION`], whose change wakes the
//!   controller) is recorded as `status.lastHandledReconcileAt`, whatever the reconcile's end.
//! - **Deletion** (§2.4, [`crate::apply::deletion::decide`]): `!prune` or an empty inventory
//!   releases the finalizer (orphan). A missing ServiceAccount with the `opm.dev/force-delete-orphan`
//!   annotation exactly `"true"` orphans: Warning `OrphanedOnDeletion`, inventory dropped, finalizer
//!   released. A missing one otherwise stalls `DeletionSAMissing` naming `<ns>/<sa>` and the three
//!   recovery options (no controller-client fallback); another impersonation failure stalls
//!   `ImpersonationFailed`. Otherwise every inventory entry is deleted with the kind's owner uuid:
//!   a 403 under the ServiceAccount stalls `ImpersonationFailed`, another error is returned (the
//!   finalizer is kept), objects still terminating are looked at again after [`DELETION_RECHECK`].
//!   Stalls recheck after 30 minutes with a Warning (action `Delete`) once per transition; deletion
//!   patches never set observedGeneration.
//! - **Identity** (§2.5, [`service_account`]): `spec.serviceAccountName` >
//!   `--default-service-account` > the controller, always in the object's namespace. Without a
//!   client configuration to copy, the ServiceAccount's existence is still checked, so a missing
//!   one keeps its typed NotFound.
//! - **Render on a lease** (`Run::render_on`; §2.2 phase 1, §2.3 step 6): no recorded platform is
//!   Ready=False `PlatformNotReady` before any registry I/O, requeued after the kind's interval,
//!   else with backoff; the lease comes first for both kinds, so a context without the kind's
//!   renderer (only a test builds one: the manager runs no controller without it) is Stalled
//!   `RenderFailed` only once a platform is recorded. The render runs on a blocking thread and the lease is
//!   released when it ends. Kernel errors are classified by their class
//!   ([`super::outcome::classify_render`]), never by text, Warning `<reason>` (action `Render`).
//!   A render that exhausted a budget (memory, steps, time) backs off per object and retries
//!   only in the process's one retry slot ([`super::fairness`]; the kind names the inputs the
//!   render depends on).
//! - **Digests** (`Run::convert`; §2.2 phase 2, §2.3 step 7, §6.1): one Warning `RenderWarning`
//!   (action `Render`) per render warning; the render digest (the kernel's, else computed); the
//!   inventory entries (a failure is Stalled `ApplyFailed` “converting resources: …”); the
//!   inventory digest.
//! - **Plan, apply, prune** (`Run::apply`; §2.2 phases 3–6, §2.3 steps 7–8): NoOp iff the four
//!   last-applied digests are non-empty and equal to this reconcile's ([`is_no_op_of`]). A failure
//!   to build the identity stalls `ImpersonationFailed`. [`crate::apply::Engine::sync`] applies in
//!   stages (ownership always forced; `rollout.forceConflicts` recreates objects whose update is
//!   refused for immutable fields) and, when `spec.prune`, prunes stale entries with the
//!   kind's owner uuid; it returns the new inventory only on full success. Normal `Applied` with the
//!   counts (also for the apply half of a failed prune), Normal `Pruned` when something was deleted.
//!   Plan refusals (invalid object, inventory too large, empty render) stall `ApplyFailed`; apply
//!   and prune errors are Ready=False `ApplyFailed`/`PruneFailed` with backoff, except that a kind
//!   with `Rendered::FORBIDDEN_STALLS` (ModuleInstance) stalls `ImpersonationFailed` on a 403
//!   under a ServiceAccount (the Warning keeps the phase's reason; the prune stall writes no
//!   history entry, the baseline's quirk). Per-phase failure counters (§6.6): an apply error counts
//!   apply; a prune error resets apply and counts prune.
//! - **Health** (issue 29, “Ready means healthy”; [`crate::apply::health`]): after a successful
//!   apply and on a NoOp, every applied object the health check reads
//!   ([`crate::apply::health::needs_check`]) is read live (controller identity) and assessed in
//!   kstatus terms. All `Current` → Ready=True as below. Some `Failed` → Ready=False
//!   `HealthCheckFailed` naming them. Some not `Current` yet → Ready=Unknown `Progressing`
//!   (Reconciling=True) naming them, requeued after [`Context::health_poll`] (a worker never
//!   blocks on a rollout); once `spec.rollout.timeout` (else [`Context::health_timeout`]) has
//!   passed since the wait began, Ready=False `HealthCheckFailed` “timed out …”. The wait begins
//!   with the apply, or — for an instance that was Ready when its workloads degraded — when the
//!   degradation was seen (`Progressing` keeps that start in its lastTransitionTime), so a
//!   workload rolling again an hour after the apply is awaited, not reported timed out at once.
//!   Degradations and recoveries after the apply reach the reconcile through the workload watch
//!   ([`super::workloads`]). A health
//!   failure keeps the apply's record (inventory, history, lastApplied*: the apply itself
//!   succeeded), counts no failure, emits a Warning once per transition and is checked again
//!   after [`HEALTH_RECHECK`] (or the kind's interval when shorter). `rollout.timeout: 0` turns
//!   the check off. A message names at most [`HEALTH_NAMES`] objects, then “and N more”. The
//!   `ReconciliationSucceeded` event is emitted when Ready=True is reached, after the wait too.
//! - **Commit** (§2.1 deferred commit, §2.2 phase 7, §2.3 step 9): one optimistic status patch per
//!   reconcile. NoOp writes Ready, the reconcile counter 0, `nextRetryAt: null` and
//!   observedGeneration only, then Normal `NoOp`. Otherwise observedGeneration and lastAttempted*
//!   (source and render digests only once known). Success: lastApplied*, the inventory (its
//!   revision one more than before, 1 first; §6.1), a `complete` history entry, counters reset
//!   (reconcile, apply, prune when it ran), `nextRetryAt: null`, Drifted removed (kinds that detect drift, §6.5), Ready
//!   `ReconciliationSucceeded` and its Normal event. Failure: Ready=False (with Stalled=True when
//!   stalled) with the phase's reason, the reconcile counter + 1 (not for a soft block, docs/design/decisions.md §1),
//!   `nextRetryAt` = now + requeue, a `failed` history entry when there is a message (unless the
//!   failure says otherwise), a Warning once per transition ([`super::events::ready_changed`]).
//!   History holds at most [`HISTORY_LIMIT`] entries, newest first, sequence monotonic (§6.7).
//! - **Requeue** (§2.1): success and NoOp after the kind's interval (ModulePackage; a
//!   ModuleInstance with `spec.interval`) or never (a ModuleInstance without); a transient failure after its own requeue (the interval of a soft block),
//!   else backoff of the reconcile counter; a stalled one after 30 minutes.
//! - **Issue 40**: [`Run::apply_client`] is the client of the apply identity on the operator's
//!   own cluster (what `valuesFrom` reads with); [`Run::apply_to`] with `reapply` applies even on
//!   a NoOp (drift correction of `drift.mode: Enabled`).
//! - **Metrics** (§7.2, kinds that record them): apply counts and pruned count per phase, the
//!   inventory size after success, forgotten when the finalizer is released.
//! - **Target cluster** (`target`, [`super::remote`]): `spec.kubeConfig` makes apply, prune,
//!   drift, health and deletion act on a remote cluster (its ServiceAccount impersonated there);
//!   unset, the operator's own cluster at no cost. An unusable one is `KubeConfigNotFound`,
//!   `KubeConfigInvalid` or `RemoteClusterUnreachable`; the inventory records its cluster, and an
//!   inventory of another cluster is never pruned on the current one nor a NoOp.
//! - **Custom health** (`health`, [`crate::apply::health::cel`]): `spec.healthCheckExprs`,
//!   compiled once per generation, judge the kinds they name instead of kstatus; a bad one stalls
//!   `HealthCheckExprInvalid` before anything is applied.
//! - **Per-object policies** ([`crate::apply::policy`]): `opm.dev/apply: Ignore` objects are not
//!   recorded, so the inventory digest is that of the recorded entries.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crds::common::{
    FailureCounters, HistoryEntry, Inventory, InventoryEntry, ReconcileStatus, Rollout,
};
use crds::conditions::{self, reasons, types, HasConditions};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use crds::FINALIZER_CLEANUP;
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::context::Context;
use super::fairness::Admit;
use super::metrics::ControllerMetrics;
use super::outcome::{self, classify_render, Outcome, STALLED_RECHECK};
use super::reconcile::{End, Failure, Halt, Kind, Mark, Note, Run, When};
use super::runtime::{self, Error, EventType};
use crate::apply::deletion::{self as apply_deletion, Decision, FORCE_DELETE_ORPHAN_ANNOTATION};
use crate::apply::object::InstanceLabels;
use crate::apply::prune::PruneOptions;
use crate::apply::{self, ApplyOptions, Engine, Phase, SyncError, SyncOptions};
use crate::inventory;
use crate::kernel::SkewPolicy;
use crate::kernel::{BuiltPlatform, KernelError, RenderResult};
use crate::render_lease::{Origin, RenderEnd};

mod deletion;
mod health;
mod target;

use super::remote::Target;
use health::{health_note, Checks};
pub use health::{verdict_of, Verdict, HEALTH_NAMES, HEALTH_RECHECK};

/// Maximum history entries kept (§6.7).
pub const HISTORY_LIMIT: usize = 10;
/// The NoOp event text.
pub const NO_OP_MESSAGE: &str = "No changes detected";
/// The success message of the Ready condition.
pub const SUCCEEDED_MESSAGE: &str = "Reconciliation succeeded";
/// The Resumed event text.
pub const RESUMED_MESSAGE: &str = "Reconciliation resumed";
/// How soon a deletion whose objects are still terminating is looked at again.
pub const DELETION_RECHECK: Duration = Duration::from_secs(5);

/// Event actions both kinds use (§7.3).
pub mod actions {
    /// Reconcile-level events.
    pub const RECONCILE: &str = "Reconcile";
    /// Suspend.
    pub const SUSPEND: &str = "Suspend";
    /// Resume.
    pub const RESUME: &str = "Resume";
    /// Render phase.
    pub const RENDER: &str = "Render";
    /// Apply phase.
    pub const APPLY: &str = "Apply";
    /// Prune phase.
    pub const PRUNE: &str = "Prune";
    /// Deletion.
    pub const DELETE: &str = "Delete";
}

/// The four digests of one reconcile (§6.1); `render`/`inventory` are empty until rendered (and
/// a ModulePackage's `source` until its artifact is resolved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digests {
    /// The source identity: sha256 of `path@version` (ModuleInstance) or the artifact digest
    /// (ModulePackage).
    pub source: String,
    /// Digest of the values.
    pub config: String,
    /// Digest of the rendered objects.
    pub render: String,
    /// Digest of the inventory entries.
    pub inventory: String,
}

/// NoOp iff the four last-applied digests of `r` are non-empty and equal to `digests` (§6.1).
pub fn is_no_op_of(r: &ReconcileStatus, digests: &Digests) -> bool {
    let inv = r.inventory.as_ref().map(|i| i.digest.as_str());
    let applied = [
        r.last_applied_source_digest.as_deref(),
        r.last_applied_config_digest.as_deref(),
        r.last_applied_render_digest.as_deref(),
        inv,
    ];
    let current = [
        Some(digests.source.as_str()),
        Some(digests.config.as_str()),
        Some(digests.render.as_str()),
        Some(digests.inventory.as_str()),
    ];
    applied.iter().all(|d| d.is_some_and(|d| !d.is_empty())) && applied == current
}

/// Prepends `entry` with the next sequence number and trims to [`HISTORY_LIMIT`] (§6.7).
pub fn push_history(history: &mut Vec<HistoryEntry>, mut entry: HistoryEntry) {
    entry.sequence = history.iter().map(|h| h.sequence).max().unwrap_or(0) + 1;
    history.insert(0, entry);
    history.truncate(HISTORY_LIMIT);
}

/// The §2.4 DeletionSAMissing message.
pub fn deletion_sa_missing_message(service_account: &str) -> String {
    format!(
        "ServiceAccount {service_account} not found: cannot delete the managed resources as it. \
         Recover by restoring the ServiceAccount and its RBAC, by setting spec.prune=false to \
         orphan them, or by setting the {FORCE_DELETE_ORPHAN_ANNOTATION}=\"true\" annotation"
    )
}

/// The ServiceAccount in effect (§2.5): `spec` (the object's `serviceAccountName`), then
/// `default` (the flag), else none; empty names count as unset.
pub fn service_account(spec: Option<&str>, default: Option<&str>) -> Option<String> {
    spec.filter(|s| !s.is_empty())
        .or(default.filter(|s| !s.is_empty()))
        .map(str::to_owned)
}

/// A status failure counter as the backoff counter (negative as 0, saturating).
pub(crate) fn counter_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The status fields both kinds share (conditions and observedGeneration through
/// [`HasConditions`]).
pub trait RenderedStatus: HasConditions + Default + Clone + Send + Sync + 'static {
    /// `status.observedGeneration`.
    fn observed_generation(&self) -> Option<i64>;
    /// The reconcile bookkeeping (digests, inventory, history, counters).
    fn reconcile(&self) -> &ReconcileStatus;
    /// The reconcile bookkeeping, mutably.
    fn reconcile_mut(&mut self) -> &mut ReconcileStatus;
}

/// Implements [`RenderedStatus`] for statuses whose shared fields carry the same names.
macro_rules! rendered_status {
    ($($status:ty),*) => {$(
        impl RenderedStatus for $status {
            fn observed_generation(&self) -> Option<i64> {
                self.observed_generation
            }
            fn reconcile(&self) -> &ReconcileStatus {
                &self.reconcile
            }
            fn reconcile_mut(&mut self) -> &mut ReconcileStatus {
                &mut self.reconcile
            }
        }
    )*};
}

rendered_status!(
    crds::module_instance::ModuleInstanceStatus,
    crds::module_package::ModulePackageStatus
);

/// The spec fields the core reads.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// `spec.suspend`.
    pub suspend: Option<bool>,
    /// `spec.prune`.
    pub prune: Option<bool>,
    /// `spec.serviceAccountName`.
    pub service_account_name: Option<&'a str>,
    /// `spec.rollout`.
    pub rollout: Option<&'a Rollout>,
    /// `spec.healthCheckExprs` (`health`).
    pub health_check_exprs: &'a [crds::custom_health::HealthCheckExpr],
    /// `spec.kubeConfig` (`target`, [`super::remote`]).
    pub kube_config: Option<&'a crds::kube_config::KubeConfigReference>,
}

/// A kind whose reconcile renders, applies and records an inventory (module docs); also what
/// [`super::deadline::bounded`] marks timed out. Its [`Kind::interval`] is the requeue after a
/// success, a NoOp and a soft failure.
pub trait Rendered:
    Kind<Status: RenderedStatus> + Resource<Scope = NamespaceResourceScope>
{
    /// Whether the kind records the §7.2 metrics.
    const METRICS: bool;
    /// Whether a 403 under a ServiceAccount during apply or prune stalls `ImpersonationFailed`
    /// (else apply and prune errors are always transient).
    const FORBIDDEN_STALLS: bool;
    /// Whether the kind detects drift (§6.5); a success then clears `Drifted`.
    const DETECTS_DRIFT: bool;

    /// The spec fields the core reads.
    fn settings(&self) -> Settings<'_>;
    /// The owner uuid of prune's uuid guard (empty: no guard), from the status as read.
    fn owner_uuid(_prior: &Self::Status) -> String {
        String::new()
    }
    /// Whether another actor manages this object (no metrics are recorded for it).
    fn handed_off(&self) -> bool {
        false
    }
}

/// [`Rendered::settings`] for a kind whose spec names the shared fields as both CRDs do; invoked
/// inside the kind's `impl Rendered`.
macro_rules! same_named_fields {
    () => {
        fn settings(&self) -> $crate::controller::render_apply::Settings<'_> {
            $crate::controller::render_apply::Settings {
                suspend: self.spec.suspend,
                prune: self.spec.prune,
                service_account_name: self.spec.service_account_name.as_deref(),
                rollout: self.spec.rollout.as_ref(),
                health_check_exprs: &self.spec.health_check_exprs,
                kube_config: self.spec.kube_config.as_ref(),
            }
        }
    };
}
pub(crate) use same_named_fields;

/// Forgets what the process kept about `namespace/name`, which no longer exists: its inventory
/// gauge ([`Kind::gone`] of both kinds).
pub(crate) fn forget<K: Rendered>(ctx: &Context, namespace: &str, name: &str) {
    if let Some(m) = metrics_of::<K>(ctx) {
        m.forget_inventory(namespace, name);
    }
    ctx.exhausted.forget(&format!("{}/{namespace}/{name}", K::KIND));
    ctx.health_rules
        .forget(&format!("{}/{namespace}/{name}", K::KIND));
}

/// The metrics of a kind that records them.
pub(crate) fn metrics_of<K: Rendered>(ctx: &Context) -> Option<&ControllerMetrics> {
    ctx.metrics.as_ref().filter(|_| K::METRICS)
}

/// The failures of the render and apply phases.
impl Failure {
    /// A kernel error, classified by its class.
    fn render(e: &KernelError) -> Self {
        let c = classify_render(e.class);
        let f = match c.outcome {
            Outcome::FailedStalled => Failure::stalled,
            _ => Failure::transient,
        };
        f(c.reason, actions::RENDER, e.to_string())
    }

    /// A failed sync: `forbidden` is a 403 under a ServiceAccount of a kind with
    /// [`Rendered::FORBIDDEN_STALLS`].
    fn sync(phase: Phase, message: String, forbidden: bool) -> Self {
        match phase {
            Phase::Plan => Failure::stalled(reasons::APPLY_FAILED, actions::APPLY, message),
            Phase::Apply if forbidden => Failure {
                event: reasons::APPLY_FAILED,
                ..Failure::stalled(reasons::IMPERSONATION_FAILED, actions::APPLY, message)
            },
            Phase::Apply => Failure::transient(reasons::APPLY_FAILED, actions::APPLY, message),
            // The baseline's quirk: the SA-403 prune stall records no history entry.
            Phase::Prune if forbidden => Failure {
                event: reasons::PRUNE_FAILED,
                history: false,
                ..Failure::stalled(reasons::IMPERSONATION_FAILED, actions::PRUNE, message)
            },
            Phase::Prune => Failure::transient(reasons::PRUNE_FAILED, actions::PRUNE, message),
        }
    }
}

pub(crate) use crate::render_lease::Lease;

/// The phases both rendering kinds share (module docs).
impl<'a, K: Rendered> Run<'a, K> {
    fn counters(&mut self) -> &mut FailureCounters {
        self.status()
            .reconcile_mut()
            .failure_counters
            .get_or_insert_with(FailureCounters::default)
    }

    fn metrics(&self) -> Option<&'a ControllerMetrics> {
        metrics_of::<K>(self.ctx)
    }

    /// The entries of the inventory as read.
    fn previous_entries(&self) -> Vec<InventoryEntry> {
        self.prior
            .reconcile()
            .inventory
            .as_ref()
            .map(|i| i.entries.clone())
            .unwrap_or_default()
    }

    /// Gates 3–6 (module docs): `Err` ends the reconcile.
    pub async fn gates(&mut self) -> Result<(), Halt> {
        let deleting = self.deleting();
        if !self.has_finalizer(FINALIZER_CLEANUP) {
            if deleting {
                return Err(End::done().into());
            }
            self.add_finalizer(FINALIZER_CLEANUP).await?;
            return Err(End::requeue(Duration::ZERO).into());
        }
        if deleting {
            return Err(self.delete().await.map_or_else(|h| h, Halt::from));
        }
        let prior_ready_reason = conditions::get(self.prior.conditions(), types::READY)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        if self.obj.settings().suspend == Some(true) {
            return Err(self.suspend(&prior_ready_reason).into());
        }
        // A reconcile request (`crds::RECONCILE_REQUEST_ANNOTATION`) is handled by this
        // reconcile, whatever its end.
        if let Some(token) = self.requested() {
            self.status().reconcile_mut().last_handled_reconcile_at = Some(token);
        }
        if prior_ready_reason == reasons::SUSPENDED {
            self.event(
                EventType::Normal,
                reasons::RESUMED,
                actions::RESUME,
                RESUMED_MESSAGE,
            )
            .await;
        }
        Ok(())
    }

    fn suspend(&mut self, prior_ready_reason: &str) -> End {
        let generation = self.generation();
        *self.status().observed_generation_mut() = generation;
        End::marked(Mark::Suspended).note_if(
            prior_ready_reason != reasons::SUSPENDED,
            Note::normal(
                reasons::SUSPENDED,
                actions::SUSPEND,
                conditions::messages::SUSPENDED,
            ),
        )
    }

    /// The identity apply and prune act as on `target` (§2.5; on a remote cluster, the
    /// ServiceAccount there); `None` is the target's base identity (the controller's here).
    async fn identity(&self, target: &Target) -> Option<(String, Result<Engine, apply::Error>)> {
        let sa = service_account(
            self.obj.settings().service_account_name,
            self.ctx.default_service_account.as_deref(),
        )?;
        let on = target.engine(&self.ctx.engine);
        let engine = match target.base_config(self.ctx.kube_config.as_ref()) {
            Some(config) => on.impersonating(config, &self.namespace, &sa).await,
            // Without a configuration to copy, the SA's existence is still checked first, so a
            // missing SA keeps its typed NotFound (§2.4 DeletionSAMissing).
            None => match apply::impersonate::check_sa(&on.client(), &self.namespace, &sa).await {
                Err(e) => Err(e),
                Ok(()) => Err(apply::Error::InvalidObject {
                    object: format!("ServiceAccount/{}/{sa}", self.namespace),
                    reason: "no client configuration to impersonate with".to_owned(),
                }),
            },
        };
        Some((sa, engine))
    }

    /// Marks Reconciling at the start of the loop (§2.1 `Progressing`).
    pub fn mark_reconciling(&mut self) {
        self.mark(&Mark::Progressing(
            reasons::PROGRESSING,
            conditions::messages::PROGRESSING.to_owned(),
        ));
    }

    /// A lease of the platform store, or Ready=False `PlatformNotReady` (requeue after the
    /// kind's interval, else backoff).
    fn lease(&self) -> Result<Lease, Failure> {
        self.ctx.store.lease().ok_or_else(|| {
            Failure::transient(
                reasons::PLATFORM_NOT_READY,
                actions::RENDER,
                "no platform is recorded: waiting for Platform cluster".to_owned(),
            )
            .after(self.interval)
        })
    }

    /// The render phase of both kinds (module docs): the platform lease first, so no platform
    /// is `PlatformNotReady` whatever else is missing; then a context without a `renderer`
    /// stalls `RenderFailed` “no `<noun>` renderer is configured”; else `render` runs on a
    /// blocking thread with the leased platform and its skew policy, the lease is released and
    /// a kernel error is classified. `inputs` is what the render depends on (the fairness
    /// gate's fingerprint, [`super::fairness`]): a render that exhausted a budget with the same
    /// inputs is not run again before its backoff, and then only in the retry slot.
    pub async fn render_on<R: ?Sized + Send + Sync + 'static>(
        &self,
        noun: &str,
        inputs: &(impl std::hash::Hash + ?Sized),
        renderer: Option<Arc<R>>,
        render: impl FnOnce(&R, &BuiltPlatform, SkewPolicy) -> Result<RenderResult, KernelError>
            + Send
            + 'static,
    ) -> Result<RenderResult, Halt> {
        let lease = self.lease()?;
        let Some(renderer) = renderer else {
            drop(lease);
            return Err(Failure::stalled(
                reasons::RENDER_FAILED,
                actions::RENDER,
                format!("no {noun} renderer is configured"),
            )
            .into());
        };
        // Fairness (`super::fairness`): a render that exhausted a budget with these inputs
        // waits out its backoff, then retries in the one retry slot.
        let key = format!("{}/{}/{}", K::KIND, self.namespace, self.name);
        let inputs = super::fairness::fingerprint(inputs, self.obj.meta());
        let gate = &self.ctx.exhausted;
        let slot = match gate.admit(&key, inputs, std::time::Instant::now()) {
            Admit::Render => None,
            Admit::Retry(permit) => Some(permit),
            Admit::Wait(failure) => {
                drop(lease);
                return Err((*failure).into());
            }
        };
        let metrics = self.ctx.metrics.as_ref().map(|m| m.render.clone());
        let out = crate::render_lease::render_on_lease(lease, slot, move |platform, skew| {
            let started = std::time::Instant::now();
            let out = render(&renderer, platform, skew);
            if let Some(m) = metrics {
                m.record(Origin::Reconcile, RenderEnd::of(&out), started.elapsed());
            }
            out
        })
        .await
        .map_err(|e| Error::Join {
            what: format!("rendering the {noun}"),
            message: e.to_string(),
        })?;
        let now = std::time::Instant::now();
        match out {
            Ok(rendered) => {
                gate.ended(&key, inputs, None, now);
                Ok(rendered)
            }
            Err(e) => {
                let failure = Failure::render(&e);
                let failure = gate
                    .ended(&key, inputs, Some((e.class, failure.clone())), now)
                    .unwrap_or(failure);
                Err(failure.into())
            }
        }
    }

    /// The render's warnings, digest and inventory entries (module docs): the objects to apply.
    pub async fn convert(
        &mut self,
        rendered: &RenderResult,
        digests: &mut Digests,
    ) -> Result<Vec<Value>, Failure> {
        for w in &rendered.warnings {
            self.event(
                EventType::Warning,
                reasons::RENDER_WARNING,
                actions::RENDER,
                w,
            )
            .await;
        }
        // The kernel computed the inventory entries and the render digest once
        // (`RenderResult::new`); they are read here, not computed again.
        let objects: Vec<Value> = rendered.objects.iter().map(|o| o.object.clone()).collect();
        digests.render = rendered.digest.clone();
        // Objects `opm.dev/apply: Ignore` are not recorded (`crate::apply::policy`): the digest
        // is that of the entries recorded. An unknown policy value fails the apply that follows.
        digests.inventory = match apply::policy::ignored(&objects) {
            Ok(ignored) if !ignored.is_empty() => {
                inventory::inventory_digest(&apply::policy::recorded(&rendered.inventory, &ignored))
            }
            _ => inventory::inventory_digest(&rendered.inventory),
        };
        Ok(objects)
    }

    /// [`Run::apply_to`] on the target `spec.kubeConfig` names (`target`).
    pub async fn apply(
        &mut self,
        objects: &[Value],
        entries: &[InventoryEntry],
        digests: &Digests,
        instance: Option<InstanceLabels>,
    ) -> Result<End, Halt> {
        let target = self.target().await?;
        self.apply_to(&target, objects, entries, digests, instance, false)
            .await
    }

    /// The client of the identity apply acts as on the operator's own cluster (module docs,
    /// “Identity”): what `valuesFrom` reads the instance's Secrets and ConfigMaps with (they live
    /// beside the instance, whatever `spec.kubeConfig` names); a failure to build it stalls
    /// `ImpersonationFailed` as the apply's does.
    pub async fn apply_client(&self) -> Result<kube::Client, Failure> {
        match self.identity(&Target::local()).await {
            None => Ok(self.ctx.client.clone()),
            Some((_, Ok(e))) => Ok(e.client()),
            Some((_, Err(e))) => Err(Failure::stalled(
                reasons::IMPERSONATION_FAILED,
                actions::RENDER,
                e.to_string(),
            )),
        }
    }

    /// NoOp, or identity, apply and prune on `target`, then the commit (module docs); `entries`
    /// are the render's inventory entries of `objects`, `instance` the identity stamped on the
    /// objects. The custom health checks are compiled first (`health`), and an inventory of
    /// another cluster is never pruned here nor a NoOp (`target`). With `reapply` the apply runs
    /// even when the digests say NoOp (drift correction of `drift.mode: Enabled`).
    pub async fn apply_to(
        &mut self,
        target: &Target,
        objects: &[Value],
        entries: &[InventoryEntry],
        digests: &Digests,
        instance: Option<InstanceLabels>,
        reapply: bool,
    ) -> Result<End, Halt> {
        let rules = self.health_rules()?;
        let ctx = self.ctx;
        let checks = Checks {
            engine: target.engine(&ctx.engine),
            rules: rules.as_deref(),
        };
        let same_cluster = self.same_cluster(target);
        if !reapply && same_cluster && is_no_op_of(self.prior.reconcile(), digests) {
            let applied_at = self.prior.reconcile().last_applied_at.clone();
            let verdict = self.health(&checks, objects, applied_at.as_ref()).await;
            let end = self.no_op(verdict);
            return Ok(target.polled(end, self.interval));
        }
        let engine = match self.identity(target).await {
            None => target.engine(&ctx.engine).clone(),
            Some((_, Ok(e))) => e,
            Some((_, Err(e))) => {
                let f =
                    Failure::stalled(reasons::IMPERSONATION_FAILED, actions::APPLY, e.to_string());
                return Err(f.into());
            }
        };
        let settings = self.obj.settings();
        let prune = settings.prune.unwrap_or(false);
        let opts = SyncOptions {
            apply: ApplyOptions {
                recreate: settings
                    .rollout
                    .and_then(|r| r.force_conflicts)
                    .unwrap_or(false),
                instance,
                ..Default::default()
            },
            prune,
            prune_options: PruneOptions {
                owner_uuid: K::owner_uuid(&self.prior),
            },
            ..Default::default()
        };
        // An inventory of another cluster is nothing to prune here (`target`).
        let previous = if same_cluster {
            self.previous_entries()
        } else {
            Vec::new()
        };
        let impersonated = engine.impersonated().is_some();
        match engine
            .sync_entries(objects, entries.to_vec(), &previous, &opts)
            .await
        {
            Ok(result) => {
                if !same_cluster {
                    self.orphan_other_cluster(target).await;
                }
                self.event(
                    EventType::Normal,
                    reasons::APPLIED,
                    actions::APPLY,
                    &result.changes.applied_message(),
                )
                .await;
                if let Some(m) = self.metrics() {
                    m.record_apply(
                        // A recreate counts as created, as in the Applied message.
                        (result.changes.count(apply::Action::Created)
                            + result.changes.count(apply::Action::Recreated))
                            as u64,
                        result.changes.count(apply::Action::Configured) as u64,
                        result.changes.count(apply::Action::Unchanged) as u64,
                    );
                }
                let deleted = result.pruned.as_ref().map_or(0, |p| p.deleted.len());
                let outcome = if deleted > 0 {
                    self.event(
                        EventType::Normal,
                        reasons::PRUNED,
                        actions::PRUNE,
                        &format!("Pruned {deleted} stale resources"),
                    )
                    .await;
                    if let Some(m) = self.metrics() {
                        m.record_prune(deleted as u64);
                    }
                    Outcome::AppliedAndPruned
                } else {
                    Outcome::Applied
                };
                let created = result.changes.count(apply::Action::Created)
                    + result.changes.count(apply::Action::Recreated);
                let changed = format!(
                    "{created} created, {} configured, {} unchanged, {deleted} pruned",
                    result.changes.count(apply::Action::Configured),
                    result.changes.count(apply::Action::Unchanged),
                );
                let verdict = self.health(&checks, objects, None).await;
                let end = self.succeed(result.inventory, digests, outcome, prune, changed, verdict);
                // The inventory records the cluster it lives on (`target`).
                if let Some(i) = self.status().reconcile_mut().inventory.as_mut() {
                    i.cluster = target.cluster();
                }
                Ok(target.polled(end, self.interval))
            }
            Err(e) if target.is_remote() && e.error.is_unreachable() => {
                Err(self.unreachable_during_sync(target, e).into())
            }
            Err(e) => Err(self.sync_failed(e, impersonated).await.into()),
        }
    }

    /// A failed sync (module docs): the per-phase counters, the apply half's `Applied` event, the
    /// classified failure.
    async fn sync_failed(&mut self, e: SyncError, impersonated: bool) -> Failure {
        let c = self.counters();
        match e.phase {
            Phase::Plan => {}
            Phase::Apply => c.apply = c.apply.saturating_add(1),
            Phase::Prune => {
                c.apply = 0;
                c.prune = c.prune.saturating_add(1);
            }
        }
        if let Some(changes) = &e.changes {
            self.event(
                EventType::Normal,
                reasons::APPLIED,
                actions::APPLY,
                &changes.applied_message(),
            )
            .await;
        }
        let forbidden = K::FORBIDDEN_STALLS && impersonated && e.error.is_impersonation_forbidden();
        if e.error.is_ownership_conflict() {
            // Another instance owns an object of this render: not ours to write, and it resolves
            // when that instance lets go (apply/ownership.rs), so retry with backoff.
            Failure::transient(
                reasons::OWNERSHIP_CONFLICT,
                actions::APPLY,
                e.error.to_string(),
            )
        } else {
            Failure::sync(e.phase, e.error.to_string(), forbidden)
        }
    }

    /// The end of an attempt (phases 1–7, module docs “Commit”): a failure records the attempt
    /// (observedGeneration, lastAttempted*), counts a reconcile failure unless soft, resolves its
    /// requeue (its own, else backoff of the counter, 30 minutes when stalled), sets
    /// `nextRetryAt` and writes a `failed` history entry (when it has one and a message).
    pub fn attempted(&mut self, result: Result<End, Halt>, digests: &Digests) -> Result<End, Halt> {
        let Err(Halt::Failed(mut f)) = result else {
            return result;
        };
        self.record_attempt(digests);
        let counter = {
            let c = self.counters();
            let before = c.reconcile;
            if !f.soft {
                c.reconcile = c.reconcile.saturating_add(1);
            }
            before
        };
        let requeue = f.requeue.unwrap_or_else(|| {
            outcome::requeue_after(f.outcome, counter_u32(counter), None).unwrap_or(STALLED_RECHECK)
        });
        let now = runtime::now();
        let started_at = self.started_at.clone();
        let r = self.status().reconcile_mut();
        r.next_retry_at = Some(runtime::time_after(requeue));
        if f.history && !f.message.is_empty() {
            push_history(
                &mut r.history,
                HistoryEntry {
                    action: "reconcile".to_owned(),
                    phase: "failed".to_owned(),
                    started_at: Some(started_at),
                    finished_at: Some(now),
                    source_digest: digests.source.clone(),
                    config_digest: digests.config.clone(),
                    render_digest: digests.render.clone(),
                    inventory_digest: digests.inventory.clone(),
                    message: f.message.clone(),
                    ..Default::default()
                },
            );
        }
        f.requeue = Some(requeue);
        Err(Halt::Failed(f))
    }

    /// Records the attempt (§2.2 phase 7): observedGeneration and lastAttempted*.
    fn record_attempt(&mut self, digests: &Digests) {
        let elapsed = self.started.elapsed();
        let started_at = self.started_at.clone();
        let generation = self.generation();
        let status = self.status();
        *status.observed_generation_mut() = generation;
        let r = status.reconcile_mut();
        r.last_attempted_action = Some("reconcile".to_owned());
        r.last_attempted_at = Some(started_at);
        r.last_attempted_duration = Some(format!("{:.3}s", elapsed.as_secs_f64()));
        r.last_attempted_source_digest =
            (!digests.source.is_empty()).then(|| digests.source.clone());
        r.last_attempted_config_digest = Some(digests.config.clone());
        r.last_attempted_render_digest =
            (!digests.render.is_empty()).then(|| digests.render.clone());
    }

    /// A NoOp (module docs “Commit”): Ready, the counter and `nextRetryAt` from the health
    /// verdict, observedGeneration; Normal `NoOp`, or the success event of a finished wait.
    fn no_op(&mut self, verdict: Verdict) -> End {
        let generation = self.generation();
        *self.status().observed_generation_mut() = generation;
        let (mark, again) = self.health_mark(&verdict);
        if verdict == Verdict::Ready {
            self.counters().reconcile = 0;
            self.status().reconcile_mut().next_retry_at = None;
        } else {
            self.status().reconcile_mut().next_retry_at = again.map(runtime::time_after);
        }
        let was_waiting = conditions::get(self.prior.conditions(), types::READY).is_some_and(|c| {
            c.status != "True"
                && (c.reason == reasons::HEALTH_CHECK_FAILED
                    || (c.reason == reasons::PROGRESSING
                        && c.message != conditions::messages::PROGRESSING))
        });
        let end = End::marked(mark).outcome(Outcome::NoOp);
        match &verdict {
            Verdict::Ready if was_waiting => {
                let key = self.changes_key();
                let note = match self.ctx.changes(&key) {
                    Some(changed) => {
                        format!("{SUCCEEDED_MESSAGE}: {changed} (health check passed)")
                    }
                    None => format!("{SUCCEEDED_MESSAGE}: health check passed"),
                };
                end.after(self.interval)
                    .note(Note::normal(
                        reasons::RECONCILIATION_SUCCEEDED,
                        actions::RECONCILE,
                        note,
                    ))
                    .then(move |ctx| {
                        ctx.take_changes(&key);
                    })
            }
            Verdict::Ready => end.after(self.interval).note(Note::normal(
                reasons::NO_OP,
                actions::RECONCILE,
                NO_OP_MESSAGE,
            )),
            other => end.after(again).with_notes(health_note(other)),
        }
    }

    /// A successful apply (module docs “Commit”): the attempt, lastApplied*, the inventory, a
    /// `complete` history entry, the counters reset, Drifted removed, Ready from the health
    /// verdict; the success event once Ready (what changed is remembered while the health check
    /// waits); the inventory gauge.
    fn succeed(
        &mut self,
        entries: Vec<InventoryEntry>,
        digests: &Digests,
        outcome: Outcome,
        pruned: bool,
        changed: String,
        verdict: Verdict,
    ) -> End {
        self.record_attempt(digests);
        let now = runtime::now();
        let revision = self
            .prior
            .reconcile()
            .inventory
            .as_ref()
            .map_or(0, |i| i.revision)
            + 1;
        let count = i64::try_from(entries.len()).unwrap_or(i64::MAX);
        let size = entries.len();
        let status = self.status();
        let r = status.reconcile_mut();
        r.last_applied_at = Some(now.clone());
        r.last_applied_source_digest = Some(digests.source.clone());
        r.last_applied_config_digest = Some(digests.config.clone());
        r.last_applied_render_digest = Some(digests.render.clone());
        r.inventory = Some(Inventory {
            revision,
            digest: digests.inventory.clone(),
            count,
            entries,
            cluster: None,
        });
        push_history(
            &mut r.history,
            HistoryEntry {
                action: "reconcile".to_owned(),
                phase: "complete".to_owned(),
                started_at: Some(now.clone()),
                finished_at: Some(now.clone()),
                source_digest: digests.source.clone(),
                config_digest: digests.config.clone(),
                render_digest: digests.render.clone(),
                inventory_digest: digests.inventory.clone(),
                inventory_count: count,
                ..Default::default()
            },
        );
        let c = r
            .failure_counters
            .get_or_insert_with(FailureCounters::default);
        c.reconcile = 0;
        c.apply = 0;
        if pruned {
            c.prune = 0;
        }
        r.next_retry_at = None;
        if K::DETECTS_DRIFT {
            conditions::remove(status.conditions_mut(), types::DRIFTED);
        }
        let (mark, again) = self.health_mark(&verdict);
        self.status().reconcile_mut().next_retry_at = again.map(runtime::time_after);
        let end = End::marked(mark)
            .outcome(outcome)
            .after(again.or(self.interval));
        let end = match &verdict {
            // The event says what changed; the condition keeps the stable message.
            Verdict::Ready => end.note(Note::normal(
                reasons::RECONCILIATION_SUCCEEDED,
                actions::RECONCILE,
                format!("{SUCCEEDED_MESSAGE}: {changed}"),
            )),
            other => end.with_notes(health_note(other)),
        };
        let (key, namespace, name) = (
            self.changes_key(),
            self.namespace.clone(),
            self.name.clone(),
        );
        let ready = verdict == Verdict::Ready;
        end.then(move |ctx| {
            if let Some(m) = metrics_of::<K>(ctx) {
                m.set_inventory_size(&namespace, &name, size);
            }
            if ready {
                ctx.take_changes(&key);
            } else {
                ctx.remember_changes(&key, &changed);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digests() -> Digests {
        Digests {
            source: "sha256:s".into(),
            config: "sha256:c".into(),
            render: "sha256:r".into(),
            inventory: "sha256:i".into(),
        }
    }

    fn applied(d: &Digests) -> ReconcileStatus {
        ReconcileStatus {
            last_applied_source_digest: Some(d.source.clone()),
            last_applied_config_digest: Some(d.config.clone()),
            last_applied_render_digest: Some(d.render.clone()),
            inventory: Some(Inventory {
                digest: d.inventory.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn no_op_needs_four_equal_non_empty_digests_scenario_29() {
        let d = digests();
        assert!(is_no_op_of(&applied(&d), &d));
        assert!(!is_no_op_of(&ReconcileStatus::default(), &d));
        let mut other = d.clone();
        other.config = "sha256:c2".into();
        assert!(!is_no_op_of(&applied(&d), &other));
        let empty = Digests::default();
        assert!(!is_no_op_of(&applied(&empty), &empty));
    }

    #[test]
    fn history_keeps_ten_newest_first_with_monotonic_sequence() {
        let mut h = Vec::new();
        for i in 0..12 {
            push_history(
                &mut h,
                HistoryEntry {
                    message: format!("m{i}"),
                    ..Default::default()
                },
            );
        }
        assert_eq!(h.len(), HISTORY_LIMIT);
        assert_eq!(h[0].sequence, 12);
        assert_eq!(h[0].message, "m11");
        assert_eq!(h[9].sequence, 3);
    }

    #[test]
    fn the_deletion_sa_message_names_the_sa_and_the_three_options() {
        let m = deletion_sa_missing_message("team-a/deploy-sa");
        assert!(m.contains("team-a/deploy-sa"));
        assert!(m.contains("restoring the ServiceAccount"));
        assert!(m.contains("spec.prune=false"));
        assert!(m.contains("opm.dev/force-delete-orphan=\"true\""));
    }

    #[test]
    fn the_spec_service_account_wins_over_the_flag_and_empty_is_unset() {
        assert_eq!(service_account(None, None), None);
        assert_eq!(
            service_account(None, Some("opm-deployer")).as_deref(),
            Some("opm-deployer")
        );
        assert_eq!(
            service_account(Some("deploy-sa"), Some("opm-deployer")).as_deref(),
            Some("deploy-sa")
        );
        assert_eq!(
            service_account(Some(""), Some("opm-deployer")).as_deref(),
            Some("opm-deployer")
        );
        assert_eq!(service_account(Some(""), Some("")), None);
    }

    #[test]
    fn sync_failures_are_transient_unless_planned_or_forbidden_scenario_43() {
        let f = |phase, forbidden| Failure::sync(phase, "boom".into(), forbidden);
        let plan = f(Phase::Plan, true);
        assert_eq!(
            (plan.reason, plan.outcome),
            (reasons::APPLY_FAILED, Outcome::FailedStalled)
        );
        for (phase, reason) in [
            (Phase::Apply, reasons::APPLY_FAILED),
            (Phase::Prune, reasons::PRUNE_FAILED),
        ] {
            let soft = f(phase, false);
            assert_eq!(
                (soft.reason, soft.event, soft.outcome, soft.history),
                (reason, reason, Outcome::FailedTransient, true)
            );
            // Under a ServiceAccount that is forbidden: stalled ImpersonationFailed, the Warning
            // keeps the phase's reason.
            let hard = f(phase, true);
            assert_eq!(
                (hard.reason, hard.event, hard.outcome),
                (
                    reasons::IMPERSONATION_FAILED,
                    reason,
                    Outcome::FailedStalled
                )
            );
        }
        // The baseline's quirk: only the forbidden prune stall skips the history entry.
        assert!(f(Phase::Apply, true).history);
        assert!(!f(Phase::Prune, true).history);
    }

    #[test]
    fn a_soft_block_requeues_after_the_interval_without_counting_scenario_48() {
        let five = Some(Duration::from_secs(300));
        let f = Failure::transient(reasons::SOURCE_NOT_READY, "Resolve", "not ready".into())
            .after(five)
            .soft();
        assert_eq!((f.requeue, f.soft, f.history), (five, true, true));
        let g = Failure::stalled(reasons::PATH_NOT_FOUND, "Load", "gone".into()).after(None);
        assert_eq!(
            (g.requeue, g.soft, g.outcome),
            (None, false, Outcome::FailedStalled)
        );
    }
}
