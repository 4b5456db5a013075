//! The render-and-apply run: the reconcile ModuleInstance and ModulePackage share, as one type,
//! [`RenderRun`], composed over the frame's [`Run`] (docs/design/operator.md §2.1–§2.5, §6.1,
//! §6.6, §6.7, §7.2, §7.3; docs/design/decisions.md §1–§2; docs/design/principles.md rules 1–3,
//! 8, 9, 11, 12).
//!
//! Both kinds render a module on a leased platform, apply its objects, prune what the render no
//! longer holds and record an inventory. They differ in where the render comes from (a module
//! reference; a Flux artifact) and in a few rules the design states per kind. The frame
//! ([`super::reconcile`]) owns the object, the status being built and the one commit; a
//! [`RenderRun`] borrows the frame's [`Run`] for the kind's phases and adds what a
//! render-and-apply reconcile keeps on its way, this reconcile's [`Digests`]. Every phase both
//! kinds share is a method of [`RenderRun`], all of them in this file; each is carried out by the
//! submodule named beside it, which takes the run as an argument and states the rules it
//! implements. The per-kind rules are [`Rendered`]'s: the object's status ([`RenderedStatus`]),
//! the spec fields the phases read ([`Settings`]), `METRICS`, `FORBIDDEN_STALLS`,
//! `DETECTS_DRIFT`, [`Kind::interval`] (the requeue after a success, a NoOp and a soft failure)
//! and `owner_uuid`. `instance.rs` and `package.rs` keep their own phases and call these in
//! their order.
//!
//! The phases, in reconcile order:
//! - **Entry**: both kinds go through the one reconcile frame (`super::reconcile`: one GET,
//!   one span, the kind's phases, one commit point). A kind that records metrics (§7.2:
//!   ModuleInstance, never a CLI-owned one; ModulePackage records none, as upstream alpha.12)
//!   observes the outcome and the duration of every reconcile, the suspend and deletion paths
//!   included, and forgets the inventory gauge of a missing object ([`forget`]). A kind's phases
//!   end with [`RenderRun::attempted`], which turns a classified failure of phases 1–7 into the
//!   recorded attempt of “Commit”.
//! - **Gates** ([`RenderRun::gates`], `gates`; §2.2 gates 3–6, §2.3 step 1): the cleanup
//!   finalizer, deletion, suspend and resume, the handled reconcile request.
//! - **Deletion** (`deletion`, §2.4): orphan, stall or delete the inventory, then release the
//!   finalizer.
//! - **Target cluster** ([`RenderRun::target`], `target`, [`super::remote`]): the cluster
//!   `spec.kubeConfig` names, and the inventory of another cluster.
//! - **Render on a lease** and **digests** ([`RenderRun::render_on`], [`RenderRun::convert`],
//!   `render`; §2.2 phases 1–2, §2.3 steps 6–7, §6.1).
//! - **Identity**, **plan, apply, prune** ([`RenderRun::apply`], [`RenderRun::apply_to`],
//!   [`RenderRun::apply_client`], `sync`; §2.2 phases 3–6, §2.3 steps 7–8, §2.5): NoOp iff the
//!   four last-applied digests are non-empty and equal to this reconcile's ([`is_no_op_of`]).
//! - **Health** (`health`, issue 29 “Ready means healthy”): the kstatus (or custom) verdict of the
//!   applied objects, after an apply and on a NoOp.
//! - **Commit** and **requeue** ([`RenderRun::attempted`], `commit`; §2.1, §2.2 phase 7, §2.3 step
//!   9): one optimistic status patch per reconcile, the attempt, success or failure recorded.
//! - **Metrics** (§7.2, kinds that record them): apply counts and pruned count per phase, the
//!   inventory size after success, forgotten when the finalizer is released.

use std::sync::Arc;

use crds::common::{FailureCounters, InventoryEntry, ReconcileStatus, Rollout};
use crds::conditions::{self, reasons, HasConditions};
use kube::core::NamespaceResourceScope;
use kube::Resource;
use serde_json::Value;

use super::context::Context;
use super::metrics::ControllerMetrics;
use super::reconcile::{End, Failure, Halt, Kind, Mark, Run};
use super::remote::Target;
use crate::apply::object::InstanceLabels;
use crate::kernel::{BuiltPlatform, KernelError, RenderResult, SkewPolicy};

mod commit;
mod deletion;
mod gates;
mod health;
mod render;
mod sync;
mod target;

pub(crate) use commit::counter_u32;
pub use commit::{push_history, HISTORY_LIMIT, NO_OP_MESSAGE};
pub use deletion::{deletion_sa_missing_message, DELETION_RECHECK};
pub use gates::RESUMED_MESSAGE;
pub use health::{verdict_of, Verdict, HEALTH_NAMES, HEALTH_RECHECK};
pub use sync::service_account;

/// The success message of the Ready condition.
pub const SUCCEEDED_MESSAGE: &str = "Reconciliation succeeded";

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

/// The spec fields the phases read.
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

    /// The spec fields the phases read.
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
    ctx.exhausted
        .forget(&format!("{}/{namespace}/{name}", K::KIND));
    ctx.health_rules
        .forget(&format!("{}/{namespace}/{name}", K::KIND));
}

/// The metrics of a kind that records them.
pub(crate) fn metrics_of<K: Rendered>(ctx: &Context) -> Option<&ControllerMetrics> {
    ctx.metrics.as_ref().filter(|_| K::METRICS)
}

/// One render-and-apply reconcile of one object: the frame's [`Run`] (the object, the status
/// being built, the commit) and what the shared phases keep on their way (module docs).
pub struct RenderRun<'r, 'a, K: Rendered> {
    /// The frame's reconcile of the object.
    pub run: &'r mut Run<'a, K>,
    /// This reconcile's digests as far as they are known (a kind sets `source` and `config`;
    /// [`RenderRun::convert`] sets `render` and `inventory`).
    pub digests: Digests,
}

/// The phases both rendering kinds share, in reconcile order (module docs).
impl<'r, 'a, K: Rendered> RenderRun<'r, 'a, K> {
    /// The render-and-apply phases of `run`, no digest known yet.
    pub fn new(run: &'r mut Run<'a, K>) -> Self {
        RenderRun {
            run,
            digests: Digests::default(),
        }
    }

    /// Gates 3–6 (`gates`): `Err` ends the reconcile (a deletion runs here).
    pub async fn gates(&mut self) -> Result<(), Halt> {
        gates::pass(self).await
    }

    /// Marks Reconciling at the start of the loop (§2.1 `Progressing`).
    pub fn mark_reconciling(&mut self) {
        self.run.mark(&Mark::Progressing(
            reasons::PROGRESSING,
            conditions::messages::PROGRESSING.to_owned(),
        ));
    }

    /// The target of `spec.kubeConfig` (`target`): the operator's cluster when unset, at no cost;
    /// a remote one checked reachable; or the failure saying why it cannot be used.
    pub async fn target(&self) -> Result<Target, Halt> {
        target::resolve(self).await
    }

    /// Whether the inventory as read lives on `target`'s cluster (an empty one lives anywhere).
    pub fn same_cluster(&self, target: &Target) -> bool {
        target::same_cluster(self, target)
    }

    /// The render phase (`render`): on a leased platform, with `renderer` (`None`: a context
    /// without the kind's renderer, named `noun`), on a blocking thread; a kernel error is
    /// classified. `inputs` is what the render depends on (the fairness gate's fingerprint,
    /// [`super::fairness`]).
    pub async fn render_on<R: ?Sized + Send + Sync + 'static>(
        &self,
        noun: &str,
        inputs: &(impl std::hash::Hash + ?Sized),
        renderer: Option<Arc<R>>,
        render: impl FnOnce(&R, &BuiltPlatform, SkewPolicy) -> Result<RenderResult, KernelError>
            + Send
            + 'static,
    ) -> Result<RenderResult, Halt> {
        render::on_lease(self, noun, inputs, renderer, render).await
    }

    /// The render's warnings, digests and objects (`render`): the objects to apply.
    pub async fn convert(&mut self, rendered: &RenderResult) -> Result<Vec<Value>, Failure> {
        render::convert(self, rendered).await
    }

    /// [`RenderRun::apply_to`] on the target `spec.kubeConfig` names (`target`).
    pub async fn apply(
        &mut self,
        objects: &[Value],
        entries: &[InventoryEntry],
        instance: Option<InstanceLabels>,
    ) -> Result<End, Halt> {
        let target = self.target().await?;
        self.apply_to(&target, objects, entries, instance, false)
            .await
    }

    /// NoOp, or identity, apply and prune on `target`, then the health verdict and the commit's
    /// record (`sync`); `entries` are the render's inventory entries of `objects`, `instance` the
    /// identity stamped on the objects. With `reapply` the apply runs even when the digests say
    /// NoOp (drift correction of `drift.mode: Enabled`).
    pub async fn apply_to(
        &mut self,
        target: &Target,
        objects: &[Value],
        entries: &[InventoryEntry],
        instance: Option<InstanceLabels>,
        reapply: bool,
    ) -> Result<End, Halt> {
        sync::apply_to(self, target, objects, entries, instance, reapply).await
    }

    /// The client of the identity apply acts as on the operator's own cluster (`sync`).
    pub async fn apply_client(&self) -> Result<kube::Client, Failure> {
        sync::apply_client(self).await
    }

    /// The end of an attempt (phases 1–7, `commit`): a classified failure is recorded.
    pub fn attempted(&mut self, result: Result<End, Halt>) -> Result<End, Halt> {
        commit::attempted(self, result)
    }

    /// The failure counters of the status being built.
    fn counters(&mut self) -> &mut FailureCounters {
        self.run
            .status()
            .reconcile_mut()
            .failure_counters
            .get_or_insert_with(FailureCounters::default)
    }

    /// The metrics of the kind, when it records them.
    fn metrics(&self) -> Option<&'a ControllerMetrics> {
        metrics_of::<K>(self.run.ctx)
    }

    /// The entries of the inventory as read.
    fn previous_entries(&self) -> Vec<InventoryEntry> {
        self.run
            .prior
            .reconcile()
            .inventory
            .as_ref()
            .map(|i| i.entries.clone())
            .unwrap_or_default()
    }

    /// The key of this object's remembered changes ([`Context::remember_changes`]) and compiled
    /// health checks.
    fn changes_key(&self) -> String {
        format!("{}/{}/{}", K::KIND, self.run.namespace, self.run.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::common::Inventory;

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
}
