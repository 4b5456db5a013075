//! The ModuleInstance reconciler (docs/design/operator.md §2.1, §2.2, §2.4–§2.6, §6, §7.2–§7.3;
//! docs/design/principles.md rules 1–3, 8, 9, 12).
//!
//! The phases ModuleInstance shares with ModulePackage (gates, deletion, identity, render on a
//! lease, digests, apply/prune, the deferred commit, metrics) are those of
//! [`super::render_apply::RenderRun`]; this module holds what is the ModuleInstance's own, in the
//! order of §2.2:
//! - **Gate 2, hand-off.** `owner: cli`: a deleting object is left alone; otherwise Ready=Unknown
//!   `ManagedExternally`, conditions only (no finalizer, no observedGeneration, the CLI's status
//!   untouched; a repeat writes nothing), Normal `ManagedExternally` (action `Reconcile`) when the
//!   condition was written. No metrics are recorded for a CLI-owned instance (§7.2).
//! - **Source identity**: the Source digest is sha256 of `path@version`, the Config digest that of
//!   `spec.values` (§6.1).
//! - **Phase 1 render** of `spec.module` with `spec.values` on the leased platform; no recorded
//!   platform is `PlatformNotReady` with backoff (at `spec.interval` when the instance has one).
//!   With `spec.verify`, or the Platform's policy in force, the render fetches through a
//!   verifying view (`super::verify`): an unsigned, wrongly signed or tampered module (or
//!   dependency) is Ready=False `VerificationFailed` naming it and why, before anything is
//!   evaluated or applied.
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
//! - **Success** requeues after `spec.interval` (jittered by `--interval-jitter-percentage`)
//!   when set, else not (a Ready instance on a remote cluster is polled, [`super::remote`]);
//!   metrics (§7.2) are recorded.
//! - **Target**: the cluster of `spec.kubeConfig` is resolved once per reconcile, before the
//!   render (an unusable one costs no render), and phase 3 drift and phases 4–6 act on it.
//!
//! Issue 40 (GitOps expectations), in reconcile order:
//! - **Deletion in reverse order** and **`dependsOn`** ([`super::depends_on`]): a deleting
//!   instance waits for its dependents that are being deleted; past the gates an instance whose
//!   dependencies are not ready is Ready=False `DependencyNotReady` (requeued at
//!   `--requeue-dependency`, woken when the dependency changes), a cycle Stalled
//!   `DependencyCycle`, an invalid entry Stalled `DependencyInvalid`.
//! - **`valuesFrom`** ([`super::values_from`]): the values rendered are the references' merged
//!   under `spec.values`; Secret-sourced values never reach a message (conditions, events,
//!   history, logs).
//! - **`interval`**: every interval a full reconcile (render, drift check, health).
//! - **`drift`**: `mode` (else `--default-drift-mode`, `Warn`: the behaviour before the field):
//!   `Disabled` checks nothing and removes Drifted; `Warn` reports (Drifted, Warning
//!   `DriftDetected`); `Enabled` reports and, on a NoOp, re-applies through the normal apply (the
//!   instance's identity, staging, ownership guard), then Normal `DriftCorrected`. `ignore` rules
//!   are left out of the comparison and removed from the objects applied before (those of the
//!   inventory), so the operator releases those fields under server-side apply: a field nobody
//!   else owns is then removed by the API server (its default applies), one another manager
//!   owns (an HPA's `spec.replicas`) stays as that manager set it. An object applied for the
//!   first time carries the ignored fields as rendered (their initial value).

use crds::common::FailureCounters;
use crds::conditions::{self, reasons, types, HasConditions};
use crds::module_instance::{ModuleInstance, ModuleInstanceStatus, Owner};
use serde_json::Value;

use super::context::{Context, Reconciled};
use super::depends_on::{self, Blocked, Dependent};
use super::reconcile::{self, End, Failure, Halt, Kind, Mode, Note, Run, When};
use super::remote::Target;
use super::render_apply::{self, RenderRun, Rendered};
use super::runtime::{self, Error, EventType};
use super::values_from;
use crate::apply::drift::{DriftOptions, DriftOutcome, IgnoreRule};
use crate::apply::object::InstanceLabels;
use crate::inventory;
use crate::kernel::{ModuleRequest, RenderResult};
use crate::values_from::Redactor;
use crds::drift::DriftMode;
use std::time::Duration;

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
        crate::values_from::forget(&values_from::owner_key(namespace, name));
    }

    /// `spec.interval` (issue 40): unset, zero or malformed (logged) is none.
    fn interval(&self) -> Option<Duration> {
        interval_of(self)
    }

    /// Gate 2, the reverse deletion order, the shared gates 3–6, `dependsOn`, then phases 1–7
    /// (module docs).
    async fn phases(run: &mut Run<'_, Self>) -> Result<End, Halt> {
        if run.obj.handed_off() {
            if run.deleting() {
                return Ok(End::done());
            }
            return Ok(managed_externally(run));
        }
        depends_on::await_dependents(run).await?;
        let mut rr = RenderRun::new(run);
        rr.gates().await?;
        depends_on::gate(rr.run).await?;
        let mut redactor = Redactor::default();
        let result = reconcile_phases(&mut rr, &mut redactor).await;
        let result = values_from::redact_end(&redactor, result);
        rr.attempted(result)
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

impl Dependent for ModuleInstance {
    fn depends_on(&self) -> &[crds::depends_on::DependsOn] {
        &self.spec.depends_on
    }

    /// With `--allow-cross-namespace-refs` only.
    fn cross_namespace(ctx: &Context) -> bool {
        ctx.allow_cross_namespace_refs
    }

    /// Not ready: Ready=False `DependencyNotReady` (Normal once per transition, no failure
    /// counted), requeued at `--requeue-dependency`; a cycle, a refused namespace or an invalid
    /// `readyExpr` stalls (`DependencyCycle`, `DependencyInvalid`), Warning.
    fn blocked(run: &Run<'_, Self>, blocked: Blocked) -> Failure {
        match blocked {
            Blocked::NotReady { dependency, why } => Failure::transient(
                reasons::DEPENDENCY_NOT_READY,
                depends_on::ACTION,
                Blocked::waiting_message(&dependency, why.as_deref()),
            )
            .after(Some(run.ctx.gitops.requeue_dependency))
            .soft()
            .event_type(EventType::Normal),
            Blocked::CrossNamespace { namespace, name } => Failure::stalled(
                reasons::DEPENDENCY_INVALID,
                depends_on::ACTION,
                format!(
                    "dependency {namespace}/{name}: another namespace is refused (the operator \
                     runs without --allow-cross-namespace-refs)"
                ),
            ),
            Blocked::Cycle(cycle) => Failure::stalled(
                reasons::DEPENDENCY_CYCLE,
                depends_on::ACTION,
                format!("dependency cycle: {cycle}"),
            ),
            Blocked::Invalid(m) => {
                Failure::stalled(reasons::DEPENDENCY_INVALID, depends_on::ACTION, m)
            }
        }
    }
}

/// `spec.interval` of `mi` (unset, zero or malformed: none; a malformed one is logged).
pub fn interval_of(mi: &ModuleInstance) -> Option<Duration> {
    let s = mi.spec.interval.as_deref()?;
    match crds::duration::parse_go(s) {
        Some(d) if !d.is_zero() => Some(d),
        Some(_) => None,
        None => {
            tracing::warn!(
                interval = s,
                "spec.interval is not a duration; no periodic reconcile"
            );
            None
        }
    }
}

/// The drift mode of `mi`: `spec.drift.mode`, else `default` (`--default-drift-mode`).
pub fn drift_mode(mi: &ModuleInstance, default: DriftMode) -> DriftMode {
    mi.spec
        .drift
        .as_ref()
        .and_then(|d| d.mode)
        .unwrap_or(default)
}

/// `spec.drift.ignore` as the drift check's rules.
pub fn ignore_rules(mi: &ModuleInstance) -> Vec<IgnoreRule> {
    mi.spec
        .drift
        .iter()
        .flat_map(|d| d.ignore.iter())
        .map(|r| {
            let t = r.target.clone().unwrap_or_default();
            IgnoreRule {
                paths: r.paths.clone(),
                kind: t.kind,
                name: t.name,
                group: t.group,
                version: t.version,
                namespace: t.namespace,
            }
        })
        .collect()
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

/// Phases 1–7; `rr.digests` are this reconcile's as far as they are known.
async fn reconcile_phases(
    rr: &mut RenderRun<'_, '_, ModuleInstance>,
    redactor: &mut Redactor,
) -> Result<End, Halt> {
    let generation = rr.run.generation();
    rr.mark_reconciling();
    let (path, version) = (
        rr.run.obj.spec.module.path.clone(),
        rr.run.obj.spec.module.version.clone(),
    );
    rr.digests.source = inventory::source_digest(&path, &version);
    // `spec.valuesFrom` and `spec.values` (issue 40; `values_from`).
    let composed = values_from::compose(rr).await?;
    rr.digests.config = inventory::config_digest(Some(&composed.config));
    *redactor = composed.redactor;
    // The cluster applied to (`spec.kubeConfig`, `super::remote`): resolved once, before the
    // render, so an unusable one costs no render.
    let target = rr.target().await?;

    // Phase 1: render on a leased platform.
    let mut rendered = render(rr, composed.values).await?;
    if !redactor.is_empty() {
        for w in &mut rendered.warnings {
            *w = redactor.redact(w);
        }
    }

    // Phase 2: bookkeeping.
    let now = runtime::now();
    conditions::mark_module_resolved(
        rr.run.status().conditions_mut(),
        &path,
        &version,
        generation,
        &now,
    );
    let objects = rr.convert(&rendered).await?;
    let uuid = InstanceLabels::of(&rendered).map(|l| l.uuid);
    {
        let status = rr.run.status();
        if uuid.is_some() {
            status.instance_uuid = uuid.clone();
        }
        status.required_contracts = rendered.required_contracts.clone();
    }

    // Phase 3: drift (controller identity) as `spec.drift` says; NoOp and phases 4–7 follow
    // in the core. Ignored fields are not applied to objects applied before (issue 40).
    let unchanged =
        rr.same_cluster(&target) && render_apply::is_no_op_of(&rr.run.prior.reconcile, &rr.digests);
    let rules = ignore_rules(&rr.run.obj);
    let mode = drift_mode(&rr.run.obj, rr.run.ctx.gitops.default_drift_mode);
    let drifted = drift(rr.run, &target, &objects, unchanged, mode, &rules).await;
    let objects = strip_ignored(objects, &rules, &rr.run.prior.reconcile);
    let instance = uuid.map(|uuid| InstanceLabels {
        name: rr.run.name.clone(),
        namespace: rr.run.namespace.clone(),
        uuid,
    });
    let correct = unchanged && mode == DriftMode::Enabled && drifted > 0;
    let end = rr
        .apply_to(&target, &objects, &rendered.inventory, instance, correct)
        .await?;
    Ok(end.note_if(
        correct,
        Note::normal(
            reasons::DRIFT_CORRECTED,
            actions::RECONCILE,
            format!("{drifted} drifted resource(s) re-applied (drift.mode Enabled)"),
        ),
    ))
}

/// `objects` without the ignored fields of those the inventory `r` holds (applied before):
/// the operator stops applying, so stops owning, those fields; an object applied for the first
/// time carries them (issue 40, module docs of `apply::drift`).
fn strip_ignored(
    mut objects: Vec<Value>,
    rules: &[IgnoreRule],
    r: &crds::common::ReconcileStatus,
) -> Vec<Value> {
    if rules.is_empty() {
        return objects;
    }
    let applied: Vec<crate::apply::object::ObjectRef> = r
        .inventory
        .iter()
        .flat_map(|i| i.entries.iter())
        .map(crate::apply::object::ObjectRef::of_entry)
        .collect();
    for o in &mut objects {
        let Ok(me) = crate::apply::object::ObjectRef::of(o) else {
            continue;
        };
        let before = applied.iter().any(|a| {
            a.group == me.group
                && a.kind == me.kind
                && a.namespace == me.namespace
                && a.name == me.name
        });
        if before {
            crate::apply::drift::strip_ignored(o, rules);
        }
    }
    objects
}

/// Phase 1 (§2.2) with `values` (`spec.values` over `spec.valuesFrom`).
async fn render(
    rr: &RenderRun<'_, '_, ModuleInstance>,
    values: Option<Value>,
) -> Result<RenderResult, Halt> {
    let run = &*rr.run;
    let req = ModuleRequest {
        name: run.name.clone(),
        namespace: run.namespace.clone(),
        path: run.obj.spec.module.path.clone(),
        version: run.obj.spec.module.version.clone(),
        values,
    };
    // What the render depends on (`super::fairness`): the coordinate and the values.
    let inputs = (
        req.path.clone(),
        req.version.clone(),
        req.values.as_ref().map(Value::to_string),
    );
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
        return rr
            .render_on("module", &inputs, signatures, move |s, platform, skew| {
                s.render(&req, platform, skew, keys)
            })
            .await;
    }
    let renderer = run.ctx.renderer.clone();
    rr.render_on(
        "module",
        &inputs,
        renderer,
        move |renderer, platform, skew| renderer.render_module(&req, platform, skew),
    )
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
/// `mode` `Disabled` checks nothing (and removes Drifted); `rules` are left out of the
/// comparison. Returns how many objects drifted (0 when unknown).
async fn drift(
    run: &mut Run<'_, ModuleInstance>,
    target: &Target,
    objects: &[Value],
    unchanged: bool,
    mode: DriftMode,
    rules: &[IgnoreRule],
) -> usize {
    if mode == DriftMode::Disabled {
        conditions::remove(&mut run.status().conditions, types::DRIFTED);
        return 0;
    }
    let opts = DriftOptions {
        ignore: rules.to_vec(),
        ..DriftOptions::default()
    };
    let report = target.engine(&run.ctx.engine).drift(objects, &opts).await;
    let count = match report.outcome() {
        DriftOutcome::Drifted(n) => n,
        _ => 0,
    };
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
    count
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
