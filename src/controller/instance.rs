//! The ModuleInstance reconciler (operator-spec.md §2.1, §2.2, §2.4–§2.6, §6, §7.2–§7.3;
//! lessons.md §5 rules 1–3, 8, 9, 12).
//!
//! The phases ModuleInstance shares with ModulePackage (gates, deletion, identity, render on a
//! lease, digests, apply/prune, the deferred commit, metrics) live in [`super::render_apply`]; this
//! module holds what is the ModuleInstance's own, in the order of §2.2:
//! - **Gate 2, hand-off.** `owner: cli`: a deleting object is left alone; otherwise Ready=Unknown
//!   `ManagedExternally`, conditions only (no finalizer, no observedGeneration, the CLI's status
//!   untouched; a repeat writes nothing), Normal `ManagedExternally` (action `Reconcile`) when the
//!   condition was written. No metrics are recorded for a CLI-owned instance (§7.2).
//! - **Source identity**: the Source digest is sha256 of `path@version`, the Config digest that of
//!   `spec.values` (§6.1).
//! - **Phase 1 render** of `spec.module` with `spec.values` on the leased platform; no recorded
//!   platform is `PlatformNotReady` with backoff (an instance has no interval). With
//!   `spec.verify`, or the Platform's policy in force, the render fetches through a verifying
//!   view (`super::verify`): an unsigned, wrongly signed or tampered module (or dependency) is
//!   Ready=False `VerificationFailed` naming it and why, before anything is evaluated or applied.
//! - **Phase 2 bookkeeping**: ModuleResolved=True; `instanceUUID` from the first uuid label;
//!   `requiredContracts` from the render (persisted by no-ops too; earlier failures keep the old
//!   value).
//! - **Phase 3 drift** on every reconcile, no-ops included, with the controller identity (§6.5):
//!   Drifted=True `DriftDetected` when objects differ or are missing; a failed check counts a drift
//!   failure and leaves Drifted as it was. A success clears Drifted. A Warning `DriftDetected`
//!   (action `Reconcile`) is sent when Drifted appears or its message changes on a reconcile
//!   whose render is the one last applied (a NoOp); after a change of the render the objects
//!   differ because of that change, which the apply that follows brings in, so no Warning.
//! - **Phases 4–6**: the instance labels stamped carry the instance's own name and namespace; prune
//!   (also on deletion) guards on the owner uuid `status.instanceUUID`; a 403 under a
//!   ServiceAccount stalls `ImpersonationFailed` (`Rendered::FORBIDDEN_STALLS`).
//! - **Success** does not requeue; metrics (§7.2) are recorded.

use crds::common::FailureCounters;
use crds::conditions::{self, reasons, types, HasConditions};
use crds::module_instance::{ModuleInstance, ModuleInstanceStatus, Owner};
use serde_json::Value;

use super::context::{Context, Reconciled};
use super::reconcile::{self, End, Failure, Halt, Kind, Mode, Note, Run, When};
use super::render_apply::{self, Rendered};
use super::runtime::{self, Error, EventType};
use crate::apply::drift::{DriftOptions, DriftOutcome};
use crate::apply::object::InstanceLabels;
use crate::inventory;
use crate::kernel::{ModuleRequest, RenderResult};

pub use super::render_apply::{
    actions, deletion_sa_missing_message, is_no_op_of, push_history, Digests, DELETION_RECHECK,
    HISTORY_LIMIT, NO_OP_MESSAGE, SUCCEEDED_MESSAGE,
};

/// The kind label of metrics and spans.
pub const KIND: &str = "ModuleInstance";
/// The Reconciling message at loop start (§2.1).
pub const PROGRESSING_MESSAGE: &str = conditions::messages::PROGRESSING;

/// The ServiceAccount in effect for `mi` (§2.5): spec, then the flag, else none.
pub fn effective_service_account(mi: &ModuleInstance, default: Option<&str>) -> Option<String> {
    render_apply::service_account(mi.spec.service_account_name.as_deref(), default)
}

/// NoOp iff the four last-applied digests are non-empty and equal to the current ones (§6.1).
pub fn is_no_op(status: &ModuleInstanceStatus, digests: &Digests) -> bool {
    is_no_op_of(&status.reconcile, digests)
}

impl Kind for ModuleInstance {
    type Status = ModuleInstanceStatus;
    const KIND: &'static str = KIND;

    reconcile::status_field!();

    fn api(client: kube::Client, namespace: &str) -> kube::Api<Self> {
        kube::Api::namespaced(client, namespace)
    }

    /// No metrics for a CLI-owned instance (§7.2).
    fn metered(&self) -> bool {
        !self.handed_off()
    }

    fn gone(ctx: &Context, namespace: &str, name: &str) {
        render_apply::forget::<Self>(ctx, namespace, name);
    }

    /// Gate 2, then the shared gates 3–6, then phases 1–7 (module docs).
    async fn phases(run: &mut Run<'_, Self>) -> Result<End, Halt> {
        if run.obj.handed_off() {
            if run.deleting() {
                return Ok(End::done());
            }
            return Ok(managed_externally(run));
        }
        run.gates().await?;
        let mut digests = Digests::default();
        let result = reconcile_phases(run, &mut digests).await;
        run.attempted(result, &digests)
    }
}

impl Rendered for ModuleInstance {
    const METRICS: bool = true;
    const FORBIDDEN_STALLS: bool = true;
    const DETECTS_DRIFT: bool = true;

    render_apply::same_named_fields!();

    fn owner_uuid(prior: &ModuleInstanceStatus) -> String {
        prior.instance_uuid.clone().unwrap_or_default()
    }

    fn handed_off(&self) -> bool {
        self.spec.owner == Some(Owner::Cli)
    }
}

/// Reconciles the ModuleInstance `namespace/name` (§2.2).
pub async fn reconcile(namespace: &str, name: &str, ctx: &Context) -> Result<Reconciled, Error> {
    reconcile::reconcile::<ModuleInstance>(ctx, namespace, name, Mode::Lead).await
}

/// Gate 2 (module docs): conditions only, Normal `ManagedExternally` when written.
fn managed_externally(run: &mut Run<'_, ModuleInstance>) -> End {
    let now = runtime::now();
    // Conditions only: leave observedGeneration and the rest of the CLI's status as is.
    let status = run.status();
    let before = status.conditions.clone();
    conditions::mark_managed_externally(&mut status.conditions, None, &now);
    // A repeat must be an empty patch: keep the transition time of an equal condition.
    if conditions::get(&before, types::READY)
        .is_some_and(|c| c.status == "Unknown" && c.reason == reasons::MANAGED_EXTERNALLY)
    {
        status.conditions = before;
    }
    End::reason(reasons::MANAGED_EXTERNALLY).note(
        Note::normal(
            reasons::MANAGED_EXTERNALLY,
            actions::RECONCILE,
            conditions::messages::MANAGED_EXTERNALLY,
        )
        .when(When::Written),
    )
}

/// Phases 1–7; `digests` are this reconcile's as far as they are known.
async fn reconcile_phases(
    run: &mut Run<'_, ModuleInstance>,
    digests: &mut Digests,
) -> Result<End, Halt> {
    let generation = run.generation();
    run.mark_reconciling();
    let values_bytes = match &run.obj.spec.values {
        Some(v) => serde_json::to_vec(v).map_err(|source| Error::Encode {
            what: "spec.values".to_owned(),
            source,
        })?,
        None => Vec::new(),
    };
    let (path, version) = (
        run.obj.spec.module.path.clone(),
        run.obj.spec.module.version.clone(),
    );
    digests.source = inventory::source_digest(&path, &version);
    digests.config = inventory::config_digest(Some(&values_bytes));

    // Phase 1: render on a leased platform.
    let rendered = render(run).await?;

    // Phase 2: bookkeeping.
    let now = runtime::now();
    conditions::mark_module_resolved(
        run.status().conditions_mut(),
        &path,
        &version,
        generation,
        &now,
    );
    let objects = run.convert(&rendered, digests).await?;
    let uuid = InstanceLabels::of(&rendered).map(|l| l.uuid);
    {
        let status = run.status();
        if uuid.is_some() {
            status.instance_uuid = uuid.clone();
        }
        status.required_contracts = rendered.required_contracts.clone();
    }

    // Phase 3: drift (controller identity); NoOp and phases 4–7 follow in the core.
    let unchanged = render_apply::is_no_op_of(&run.prior.reconcile, digests);
    drift(run, &objects, unchanged).await;
    let instance = uuid.map(|uuid| InstanceLabels {
        name: run.name.clone(),
        namespace: run.namespace.clone(),
        uuid,
    });
    run.apply(&objects, &rendered.inventory, digests, instance)
        .await
}

/// Phase 1 (§2.2).
async fn render(run: &Run<'_, ModuleInstance>) -> Result<RenderResult, Halt> {
    let req = ModuleRequest {
        name: run.name.clone(),
        namespace: run.namespace.clone(),
        path: run.obj.spec.module.path.clone(),
        version: run.obj.spec.module.version.clone(),
        values: run.obj.spec.values.clone(),
    };
    // Signed modules (`spec.verify`, the Platform's policy): `super::verify`.
    let keys = match &run.obj.spec.verify {
        Some(v) => Some(
            super::verify::trusted_keys(&run.ctx.client, &run.namespace, v)
                .await
                .map_err(|e| keys_halt(e, actions::RENDER))?,
        ),
        None => None,
    };
    let signatures = run.ctx.signatures.clone();
    if keys.is_some() || signatures.as_ref().is_some_and(|s| s.required().is_some()) {
        if signatures.is_none() {
            return Err(Failure::stalled(
                reasons::VERIFICATION_FAILED,
                actions::RENDER,
                "spec.verify: this operator has no verifying registry client".to_owned(),
            )
            .into());
        }
        return run
            .render_on("module", signatures, move |s, platform, skew| {
                s.render(&req, platform, skew, keys)
            })
            .await;
    }
    let renderer = run.ctx.renderer.clone();
    run.render_on("module", renderer, move |renderer, platform, skew| {
        renderer.render_module(&req, platform, skew)
    })
    .await
}

/// The end of a reconcile whose `spec.verify` keys could not be had (`super::verify`).
fn keys_halt(e: super::verify::KeysError, action: &'static str) -> Halt {
    match e {
        super::verify::KeysError::Unusable(m) => {
            Failure::stalled(reasons::VERIFICATION_FAILED, action, m).into()
        }
        super::verify::KeysError::Read(e) => e.into(),
    }
}

/// Phase 3 drift (§6.5): Drifted and the drift failure counter;
/// `unchanged`: the render is the one last applied (a NoOp), so a difference is someone else's.
async fn drift(run: &mut Run<'_, ModuleInstance>, objects: &[Value], unchanged: bool) {
    let report = run
        .ctx
        .engine
        .drift(objects, &DriftOptions::default())
        .await;
    let generation = run.generation();
    let now = runtime::now();
    let status = run.status();
    let prior = conditions::get(&status.conditions, types::DRIFTED).map(|c| c.message.clone());
    let failed = match report.outcome() {
        DriftOutcome::InSync => {
            conditions::remove(&mut status.conditions, types::DRIFTED);
            false
        }
        DriftOutcome::Drifted(n) => {
            conditions::mark_drifted(&mut status.conditions, n, generation, &now);
            false
        }
        DriftOutcome::Unknown => {
            for (r, e) in &report.errors {
                tracing::warn!(object = %r, error = %e, "drift check failed");
            }
            true
        }
    };
    let c = status
        .reconcile
        .failure_counters
        .get_or_insert_with(FailureCounters::default);
    c.drift = if failed { c.drift.saturating_add(1) } else { 0 };
    // A Warning when drift appears or its extent changes, not on every reconcile that sees it,
    // and only when the render is the one last applied: after a change of spec, values or
    // platform, the objects differ from the new render because of that change (the apply that
    // follows clears Drifted), which is not drift (before a first apply every object is
    // "missing" for the same reason).
    let now_drifted =
        conditions::get(&status.conditions, types::DRIFTED).map(|c| c.message.clone());
    if let Some(message) = now_drifted.filter(|m| unchanged && prior.as_ref() != Some(m)) {
        run.event(
            EventType::Warning,
            reasons::DRIFT_DETECTED,
            actions::RECONCILE,
            &message,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_service_account_wins_over_the_flag_scenario_42() {
        let mut mi = ModuleInstance::new("a", Default::default());
        assert_eq!(effective_service_account(&mi, None), None);
        assert_eq!(
            effective_service_account(&mi, Some("opm-deployer")).as_deref(),
            Some("opm-deployer")
        );
        mi.spec.service_account_name = Some("deploy-sa".into());
        assert_eq!(
            effective_service_account(&mi, Some("opm-deployer")).as_deref(),
            Some("deploy-sa")
        );
        mi.spec.service_account_name = Some(String::new());
        assert_eq!(effective_service_account(&mi, Some("")), None);
    }

    #[test]
    fn the_owner_uuid_guard_and_the_hand_off_come_from_the_instance() {
        let mut mi = ModuleInstance::new("a", Default::default());
        assert!(!mi.handed_off());
        mi.spec.owner = Some(Owner::Cli);
        assert!(mi.handed_off());
        let mut status = ModuleInstanceStatus::default();
        assert_eq!(ModuleInstance::owner_uuid(&status), "");
        status.instance_uuid = Some("u-1".into());
        assert_eq!(ModuleInstance::owner_uuid(&status), "u-1");
    }
}
