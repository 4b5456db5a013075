//! The ModuleInstance reconciler (operator-spec.md §2.1, §2.2, §2.4–§2.6, §6, §7.2–§7.3;
//! lessons.md §5 rules 1–3, 8, 9, 12).
//!
//! Rules implemented here, in the order of §2.2:
//! - **Phase 0 gates.** A missing object is done. `owner: cli` hands off: a deleting object is
//!   left alone; otherwise Ready=Unknown `ManagedExternally`, conditions only (no finalizer, no
//!   observedGeneration, the CLI's status untouched; a repeat writes nothing), Normal
//!   `ManagedExternally` when the condition was written. A missing `opmodel.dev/cleanup` finalizer
//!   is added and the reconcile requeues at once (the generation predicate drops that event).
//!   Deletion follows §2.4 ([`crate::apply::deletion::decide`], then
//!   [`crate::apply::Engine::delete_all`]); deletion patches never set observedGeneration and
//!   suspend never blocks it. `suspend` marks Suspended (observedGeneration, Normal `Suspended`
//!   on the transition) and touches nothing else; a prior Ready reason `Suspended` emits Normal
//!   `Resumed`.
//! - **Phase 1 render** through a lease of the platform store: no record is Ready=False
//!   `PlatformNotReady` with backoff before any registry I/O; kernel errors are classified by
//!   their [`crate::kernel::ErrorClass`] with [`super::outcome::classify_render`] (never by
//!   text), Warning `<reason>` (action `Render`) once per transition.
//! - **Phase 2 bookkeeping**: ModuleResolved=True, one Warning `RenderWarning` per render
//!   warning, render/inventory digests (§6.1), `instanceUUID` from the first uuid label,
//!   `requiredContracts` from the render (persisted by no-ops too; earlier failures keep the old
//!   value).
//! - **Phase 3**: drift on every reconcile (no-ops included) with the controller identity
//!   (§6.5): Drifted=True `DriftDetected` when objects differ or are missing; a failed check
//!   counts a drift failure and leaves Drifted as it was. NoOp iff the four last-applied digests
//!   are non-empty and equal to this render's: Normal `NoOp`, no apply.
//! - **Phases 4–6**: the apply identity follows §2.5 (`spec.serviceAccountName` >
//!   `--default-service-account` > controller), a failure to build it is Stalled
//!   `ImpersonationFailed`. [`crate::apply::Engine::sync`] applies in stages and prunes stale
//!   entries with the owner uuid `status.instanceUUID`; it returns the new inventory only on
//!   full success. A 403 under a ServiceAccount stalls `ImpersonationFailed`; other apply/prune
//!   errors are Ready=False `ApplyFailed`/`PruneFailed` with backoff; plan refusals (invalid
//!   object, inventory too large, empty render) stall `ApplyFailed`.
//! - **Phase 7 deferred commit** (one status patch per reconcile, optimistic, §2.1): NoOp writes
//!   Ready, counters, `nextRetryAt: null` and observedGeneration only. Otherwise lastAttempted*,
//!   on success lastApplied*, the inventory (revision + 1) and a success history entry; on
//!   failure a failure history entry (except the SA-403 prune stall); failure counters per phase
//!   (§6.6); history ≤ 10, newest first, sequence monotonic (§6.7); `nextRetryAt` = now + requeue.
//! - **Metrics** (§7.2): reconcile outcome and duration (also for suspend and deletion), apply
//!   counts, pruned count, inventory size; none for CLI-owned instances.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crds::common::{FailureCounters, HistoryEntry, Inventory, InventoryEntry};
use crds::conditions::{self, reasons, types};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use crds::k8s_openapi::jiff::{SignedDuration, Timestamp};
use crds::module_instance::{ModuleInstance, ModuleInstanceStatus, Owner};
use crds::FINALIZER_CLEANUP;
use kube::{Api, ResourceExt};
use serde_json::Value;
use tracing::Instrument;

use super::context::{Context, Reconciled};
use super::frame::{self, Error, EventType, Patcher};
use super::outcome::{self, classify_render, Outcome, STALLED_RECHECK};
use crate::apply::deletion::{self, Decision, FORCE_DELETE_ORPHAN_ANNOTATION};
use crate::apply::drift::{DriftOptions, DriftOutcome};
use crate::apply::object::InstanceLabels;
use crate::apply::prune::PruneOptions;
use crate::apply::{self, ApplyOptions, Engine, Phase, SyncOptions};
use crate::inventory;
use crate::kernel::{ModuleRequest, RenderResult};

/// The kind label of metrics and spans.
pub const KIND: &str = "ModuleInstance";
/// Maximum history entries kept (§6.7).
pub const HISTORY_LIMIT: usize = 10;
/// The Reconciling message at loop start (§2.1).
pub const PROGRESSING_MESSAGE: &str = "Reconciliation in progress";
/// The NoOp event text.
pub const NO_OP_MESSAGE: &str = "No changes detected";
/// The success message of the Ready condition.
pub const SUCCEEDED_MESSAGE: &str = "Reconciliation succeeded";
/// How soon a deletion whose objects are still terminating is looked at again.
pub const DELETION_RECHECK: Duration = Duration::from_secs(5);

/// Event actions (§7.3).
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

/// The ServiceAccount in effect for `mi` (§2.5): spec, then the flag, else none.
pub fn effective_service_account(mi: &ModuleInstance, default: Option<&str>) -> Option<String> {
    mi.spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
        .or(default.filter(|s| !s.is_empty()))
        .map(str::to_owned)
}

/// NoOp iff the four last-applied digests are non-empty and equal to the current ones (§6.1).
pub fn is_no_op(status: &ModuleInstanceStatus, digests: &Digests) -> bool {
    is_no_op_of(&status.reconcile, digests)
}

/// [`is_no_op`] on the bookkeeping ModuleInstance and ModulePackage share.
pub fn is_no_op_of(r: &crds::common::ReconcileStatus, digests: &Digests) -> bool {
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

/// The four digests of one reconcile (§6.1); `render`/`inventory` are empty until rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digests {
    /// sha256 of `path@version`.
    pub source: String,
    /// Digest of the values.
    pub config: String,
    /// Digest of the rendered objects.
    pub render: String,
    /// Digest of the inventory entries.
    pub inventory: String,
}

fn time_after(d: Duration) -> Time {
    let now = Timestamp::now();
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    Time(
        now.checked_add(SignedDuration::from_secs(secs))
            .unwrap_or(now),
    )
}

/// Drift of `objects` with the controller identity. `Engine::drift`'s future cannot be proven
/// `Send` (a higher-ranked closure inside it), which the controller runtime requires of the
/// reconcile future; so it is driven to completion on a blocking thread of the same runtime.
async fn drift_of(engine: &Engine, objects: &[Value]) -> Result<apply::drift::DriftReport, Error> {
    Ok(engine.drift(objects, &DriftOptions::default()).await)
}

fn counters(status: &mut ModuleInstanceStatus) -> &mut FailureCounters {
    status
        .reconcile
        .failure_counters
        .get_or_insert_with(FailureCounters::default)
}

fn counter_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// Reconciles the ModuleInstance `namespace/name` (§2.2).
pub async fn reconcile(namespace: &str, name: &str, ctx: &Context) -> Result<Reconciled, Error> {
    let started = Instant::now();
    let api: Api<ModuleInstance> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(mi) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading ModuleInstance {namespace}/{name}"), e))?
    else {
        if let Some(m) = &ctx.metrics {
            m.forget_inventory(namespace, name);
        }
        return Ok(Reconciled::done());
    };
    let generation = mi.metadata.generation.unwrap_or_default();
    let span = frame::reconcile_span(KIND, namespace, name, generation);
    let cli = mi.spec.owner == Some(Owner::Cli);
    let result = Run::new(api, mi, ctx, started)?
        .run()
        .instrument(span)
        .await;
    if !cli {
        match &result {
            Ok(r) => ctx.observe(KIND, namespace, name, r.outcome, started),
            Err(_) => ctx.observe(KIND, namespace, name, None, started),
        }
    }
    result
}

/// One reconcile of one object.
struct Run<'a> {
    ctx: &'a Context,
    mi: ModuleInstance,
    patcher: Patcher<ModuleInstance>,
    prior: ModuleInstanceStatus,
    started: Instant,
    started_at: Time,
    namespace: String,
    name: String,
}

/// How a failed phase is reported.
struct Failure {
    reason: &'static str,
    /// The Warning event's reason (the phase's failure reason, §7.3).
    event: &'static str,
    message: String,
    outcome: Outcome,
    action: &'static str,
    /// Write a failure history entry.
    history: bool,
}

impl<'a> Run<'a> {
    fn new(
        api: Api<ModuleInstance>,
        mi: ModuleInstance,
        ctx: &'a Context,
        started: Instant,
    ) -> Result<Self, Error> {
        let namespace = mi.namespace().unwrap_or_default();
        let name = mi.name_any();
        let patcher = Patcher::new(api, &mi, format!("ModuleInstance {namespace}/{name}"))?;
        let prior = mi.status.clone().unwrap_or_default();
        Ok(Run {
            ctx,
            mi,
            patcher,
            prior,
            started,
            started_at: frame::now(),
            namespace,
            name,
        })
    }

    fn generation(&self) -> Option<i64> {
        self.mi.metadata.generation
    }

    fn status(&mut self) -> &mut ModuleInstanceStatus {
        self.mi.status.get_or_insert_with(Default::default)
    }

    async fn event(&self, type_: EventType, reason: &str, action: &str, note: &str) {
        self.ctx
            .events
            .publish(&self.mi, type_, reason, action, note)
            .await;
    }

    async fn run(mut self) -> Result<Reconciled, Error> {
        let deleting = self.mi.metadata.deletion_timestamp.is_some();
        // Gate 2: owner cli.
        if self.mi.spec.owner == Some(Owner::Cli) {
            if deleting {
                return Ok(Reconciled::done());
            }
            return self.managed_externally().await;
        }
        // Gate 3: finalizer.
        let has_finalizer = self.mi.finalizers().iter().any(|f| f == FINALIZER_CLEANUP);
        if !has_finalizer {
            if deleting {
                return Ok(Reconciled::done());
            }
            let mut finalizers = self.mi.finalizers().to_vec();
            finalizers.push(FINALIZER_CLEANUP.to_owned());
            self.patcher.patch_finalizers(&finalizers).await?;
            return Ok(Reconciled {
                requeue: Some(Duration::ZERO),
                outcome: None,
                reason: None,
            });
        }
        // Gate 4: deletion.
        if deleting {
            return self.delete().await;
        }
        // Gate 5: suspend.
        let prior_ready_reason = conditions::get(&self.prior.conditions, types::READY)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        if self.mi.spec.suspend == Some(true) {
            return self.suspend(&prior_ready_reason).await;
        }
        // Gate 6: resume.
        if prior_ready_reason == reasons::SUSPENDED {
            self.event(
                EventType::Normal,
                reasons::RESUMED,
                actions::RESUME,
                "Reconciliation resumed",
            )
            .await;
        }
        self.reconcile().await
    }

    async fn managed_externally(mut self) -> Result<Reconciled, Error> {
        let now = frame::now();
        // Conditions only: leave observedGeneration and the rest of the CLI's status as is.
        let status = self.status();
        let before = status.conditions.clone();
        conditions::mark_managed_externally(&mut status.conditions, None, &now);
        // A repeat must be an empty patch: keep the transition time of an equal condition.
        if conditions::get(&before, types::READY)
            .is_some_and(|c| c.status == "Unknown" && c.reason == reasons::MANAGED_EXTERNALLY)
        {
            status.conditions = before;
        }
        let wrote = self.patcher.patch_status(&self.mi).await?;
        if wrote {
            self.event(
                EventType::Normal,
                reasons::MANAGED_EXTERNALLY,
                actions::RECONCILE,
                conditions::messages::MANAGED_EXTERNALLY,
            )
            .await;
        }
        Ok(Reconciled {
            requeue: None,
            outcome: None,
            reason: Some(reasons::MANAGED_EXTERNALLY),
        })
    }

    async fn suspend(mut self, prior_ready_reason: &str) -> Result<Reconciled, Error> {
        let generation = self.generation();
        let now = frame::now();
        let status = self.status();
        conditions::mark_suspended(&mut status.conditions, generation, &now);
        status.observed_generation = generation;
        self.patcher.patch_status(&self.mi).await?;
        if prior_ready_reason != reasons::SUSPENDED {
            self.event(
                EventType::Normal,
                reasons::SUSPENDED,
                actions::SUSPEND,
                conditions::messages::SUSPENDED,
            )
            .await;
        }
        Ok(Reconciled {
            requeue: None,
            outcome: None,
            reason: Some(reasons::SUSPENDED),
        })
    }

    /// The identity apply and prune act as (§2.5); `Ok(None)` is the controller identity.
    async fn identity(&self) -> Option<(String, Result<Engine, apply::Error>)> {
        let sa = effective_service_account(&self.mi, self.ctx.default_service_account.as_deref())?;
        let engine = match &self.ctx.kube_config {
            Some(config) => {
                self.ctx
                    .engine
                    .impersonating(config, &self.namespace, &sa)
                    .await
            }
            // Without a configuration to copy, the SA's existence is still checked first, so a
            // missing SA keeps its typed NotFound (§2.4 DeletionSAMissing).
            None => {
                match apply::impersonate::check_sa(&self.ctx.client, &self.namespace, &sa).await {
                    Err(e) => Err(e),
                    Ok(()) => Err(apply::Error::InvalidObject {
                        object: format!("ServiceAccount/{}/{sa}", self.namespace),
                        reason: "no client configuration to impersonate with".to_owned(),
                    }),
                }
            }
        };
        Some((sa, engine))
    }

    fn remove_finalizer_list(&self) -> Vec<String> {
        self.mi
            .finalizers()
            .iter()
            .filter(|f| f.as_str() != FINALIZER_CLEANUP)
            .cloned()
            .collect()
    }

    /// §2.4.
    async fn delete(mut self) -> Result<Reconciled, Error> {
        let entries: Vec<InventoryEntry> = self
            .prior
            .reconcile
            .inventory
            .as_ref()
            .map(|i| i.entries.clone())
            .unwrap_or_default();
        let prune = self.mi.spec.prune.unwrap_or(false);
        let identity = if prune && !entries.is_empty() {
            self.identity().await
        } else {
            None
        };
        let annotation = self
            .mi
            .annotations()
            .get(FORCE_DELETE_ORPHAN_ANNOTATION)
            .cloned();
        let decision = deletion::decide(
            prune,
            entries.len(),
            identity.as_ref().map(|(_, e)| e),
            annotation.as_deref(),
        );
        match decision {
            Decision::Orphan => self.release().await,
            Decision::OrphanSaMissing {
                count,
                service_account,
            } => {
                let msg = format!(
                    "Orphaned {count} managed resources; ServiceAccount {service_account:?} \
                     missing and {FORCE_DELETE_ORPHAN_ANNOTATION} annotation set"
                );
                self.event(
                    EventType::Warning,
                    reasons::ORPHANED_ON_DELETION,
                    actions::DELETE,
                    &msg,
                )
                .await;
                self.status().reconcile.inventory = None;
                self.patcher.patch_status(&self.mi).await?;
                self.release().await
            }
            Decision::StallSaMissing { service_account } => {
                let msg = deletion_sa_missing_message(&service_account);
                self.stall_deletion(reasons::DELETION_SA_MISSING, msg).await
            }
            Decision::ImpersonationFailed(msg) => {
                self.stall_deletion(reasons::IMPERSONATION_FAILED, msg)
                    .await
            }
            Decision::Prune => {
                let engine = match identity {
                    Some((_, Ok(e))) => e,
                    _ => self.ctx.engine.clone(),
                };
                let opts = PruneOptions {
                    owner_uuid: self.prior.instance_uuid.clone().unwrap_or_default(),
                };
                let mut result = engine.delete_all(&entries, &opts).await;
                if result.complete() {
                    if let Some(m) = &self.ctx.metrics {
                        m.record_prune(result.pruned.deleted.len() as u64);
                    }
                    return self.release().await;
                }
                let errors = std::mem::take(&mut result.pruned.errors);
                match apply::Error::collect(errors) {
                    Some(e)
                        if engine.impersonated().is_some() && e.is_impersonation_forbidden() =>
                    {
                        self.stall_deletion(reasons::IMPERSONATION_FAILED, e.to_string())
                            .await
                    }
                    Some(e) => Err(Error::Delete {
                        what: format!(
                            "deleting the inventory of ModuleInstance {}/{}",
                            self.namespace, self.name
                        ),
                        source: Box::new(e),
                    }),
                    None => {
                        tracing::info!(
                            remaining = result.remaining.len(),
                            "waiting for deleted objects to go"
                        );
                        Ok(Reconciled {
                            requeue: Some(DELETION_RECHECK),
                            outcome: None,
                            reason: None,
                        })
                    }
                }
            }
        }
    }

    async fn stall_deletion(
        mut self,
        reason: &'static str,
        message: String,
    ) -> Result<Reconciled, Error> {
        let now = frame::now();
        let generation = self.prior.observed_generation;
        let status = self.status();
        conditions::mark_stalled(&mut status.conditions, reason, &message, generation, &now);
        self.patcher.patch_status(&self.mi).await?;
        if super::events::is_transition(&self.prior.conditions, reason, &message) {
            self.event(EventType::Warning, reason, actions::DELETE, &message)
                .await;
        }
        Ok(Reconciled {
            requeue: Some(STALLED_RECHECK),
            outcome: Some(Outcome::FailedStalled),
            reason: Some(reason),
        })
    }

    async fn release(mut self) -> Result<Reconciled, Error> {
        let finalizers = self.remove_finalizer_list();
        self.patcher.patch_finalizers(&finalizers).await?;
        if let Some(m) = &self.ctx.metrics {
            m.forget_inventory(&self.namespace, &self.name);
        }
        Ok(Reconciled::done())
    }

    /// Phases 1–7.
    async fn reconcile(mut self) -> Result<Reconciled, Error> {
        let generation = self.generation();
        let now = frame::now();
        conditions::mark_reconciling(
            &mut self.status().conditions,
            reasons::PROGRESSING,
            PROGRESSING_MESSAGE,
            generation,
            &now,
        );
        let values_bytes = match &self.mi.spec.values {
            Some(v) => serde_json::to_vec(v).map_err(|source| Error::Encode {
                what: "spec.values".to_owned(),
                source,
            })?,
            None => Vec::new(),
        };
        let mut digests = Digests {
            source: inventory::source_digest(
                &self.mi.spec.module.path,
                &self.mi.spec.module.version,
            ),
            config: inventory::config_digest(Some(&values_bytes)),
            ..Default::default()
        };

        // Phase 1: render on a leased platform.
        let rendered = match self.render().await? {
            Ok(r) => r,
            Err(f) => return self.fail(f, &digests).await,
        };

        // Phase 2: bookkeeping.
        let now = frame::now();
        let (path, version) = (
            self.mi.spec.module.path.clone(),
            self.mi.spec.module.version.clone(),
        );
        conditions::mark_module_resolved(
            &mut self.status().conditions,
            &path,
            &version,
            generation,
            &now,
        );
        for w in &rendered.warnings {
            self.event(
                EventType::Warning,
                reasons::RENDER_WARNING,
                actions::RENDER,
                w,
            )
            .await;
        }
        let objects: Vec<Value> = rendered.objects.iter().map(|o| o.object.clone()).collect();
        digests.render = if rendered.digest.is_empty() {
            inventory::render_digest(objects.iter())
        } else {
            rendered.digest.clone()
        };
        let desired = match inventory::entries_of(objects.iter()) {
            Ok(e) => e,
            Err(e) => {
                let f = Failure {
                    reason: reasons::APPLY_FAILED,
                    event: reasons::APPLY_FAILED,
                    message: format!("converting resources: {e}"),
                    outcome: Outcome::FailedStalled,
                    action: actions::APPLY,
                    history: true,
                };
                return self.fail(f, &digests).await;
            }
        };
        digests.inventory = inventory::inventory_digest(&desired);
        let uuid = InstanceLabels::of(&rendered).map(|l| l.uuid);
        {
            let status = self.status();
            if uuid.is_some() {
                status.instance_uuid = uuid.clone();
            }
            status.required_contracts = rendered.required_contracts.clone();
        }

        // Phase 3: drift (controller identity), then NoOp.
        let drift = drift_of(&self.ctx.engine, &objects).await?;
        let now = frame::now();
        match drift.outcome() {
            DriftOutcome::InSync => {
                conditions::remove(&mut self.status().conditions, types::DRIFTED);
                counters(self.status()).drift = 0;
            }
            DriftOutcome::Drifted(n) => {
                conditions::mark_drifted(&mut self.status().conditions, n, generation, &now);
                counters(self.status()).drift = 0;
            }
            DriftOutcome::Unknown => {
                for (r, e) in &drift.errors {
                    tracing::warn!(object = %r, error = %e, "drift check failed");
                }
                let c = counters(self.status());
                c.drift = c.drift.saturating_add(1);
            }
        }
        if is_no_op(&self.prior, &digests) {
            return self.no_op().await;
        }

        // Phase 4: identity.
        let engine = match self.identity().await {
            None => self.ctx.engine.clone(),
            Some((_, Ok(e))) => e,
            Some((_, Err(e))) => {
                let f = Failure {
                    reason: reasons::IMPERSONATION_FAILED,
                    event: reasons::IMPERSONATION_FAILED,
                    message: e.to_string(),
                    outcome: Outcome::FailedStalled,
                    action: actions::APPLY,
                    history: true,
                };
                return self.fail(f, &digests).await;
            }
        };

        // Phases 5–6: staged apply, prune.
        let prune = self.mi.spec.prune.unwrap_or(false);
        let previous: Vec<InventoryEntry> = self
            .prior
            .reconcile
            .inventory
            .as_ref()
            .map(|i| i.entries.clone())
            .unwrap_or_default();
        let instance = uuid.map(|uuid| InstanceLabels {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            uuid,
        });
        let opts = SyncOptions {
            apply: ApplyOptions {
                force: self
                    .mi
                    .spec
                    .rollout
                    .as_ref()
                    .and_then(|r| r.force_conflicts)
                    .unwrap_or(false),
                instance,
                ..Default::default()
            },
            prune,
            prune_options: PruneOptions {
                owner_uuid: self.prior.instance_uuid.clone().unwrap_or_default(),
            },
            ..Default::default()
        };
        let impersonated = engine.impersonated().is_some();
        match engine.sync(&objects, &previous, &opts).await {
            Ok(result) => {
                let applied_msg = result.changes.applied_message();
                self.event(
                    EventType::Normal,
                    reasons::APPLIED,
                    actions::APPLY,
                    &applied_msg,
                )
                .await;
                if let Some(m) = &self.ctx.metrics {
                    m.record_apply(
                        result.changes.count(apply::Action::Created) as u64,
                        result.changes.count(apply::Action::Configured) as u64,
                        result.changes.count(apply::Action::Unchanged) as u64,
                    );
                }
                let deleted = result.pruned.as_ref().map_or(0, |p| p.deleted.len());
                if deleted > 0 {
                    self.event(
                        EventType::Normal,
                        reasons::PRUNED,
                        actions::PRUNE,
                        &format!("Pruned {deleted} stale resources"),
                    )
                    .await;
                    if let Some(m) = &self.ctx.metrics {
                        m.record_prune(deleted as u64);
                    }
                }
                let outcome = if deleted > 0 {
                    Outcome::AppliedAndPruned
                } else {
                    Outcome::Applied
                };
                self.succeed(result.inventory, &digests, outcome, prune)
                    .await
            }
            Err(e) => {
                let c = counters(self.status());
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
                let forbidden = impersonated && e.error.is_impersonation_forbidden();
                let f = match e.phase {
                    Phase::Plan => Failure {
                        reason: reasons::APPLY_FAILED,
                        event: reasons::APPLY_FAILED,
                        message: e.error.to_string(),
                        outcome: Outcome::FailedStalled,
                        action: actions::APPLY,
                        history: true,
                    },
                    Phase::Apply => Failure {
                        reason: if forbidden {
                            reasons::IMPERSONATION_FAILED
                        } else {
                            reasons::APPLY_FAILED
                        },
                        event: reasons::APPLY_FAILED,
                        message: e.error.to_string(),
                        outcome: if forbidden {
                            Outcome::FailedStalled
                        } else {
                            Outcome::FailedTransient
                        },
                        action: actions::APPLY,
                        history: true,
                    },
                    Phase::Prune => Failure {
                        reason: if forbidden {
                            reasons::IMPERSONATION_FAILED
                        } else {
                            reasons::PRUNE_FAILED
                        },
                        event: reasons::PRUNE_FAILED,
                        message: e.error.to_string(),
                        outcome: if forbidden {
                            Outcome::FailedStalled
                        } else {
                            Outcome::FailedTransient
                        },
                        action: actions::PRUNE,
                        // The spec's quirk: the SA-403 prune stall records no history entry.
                        history: !forbidden,
                    },
                };
                // The event is the phase's Warning (ApplyFailed / PruneFailed), sent as the
                // condition reason so it dedups with it.
                self.fail(f, &digests).await
            }
        }
    }

    /// Phase 1 (§2.2): `Ok(Err(_))` is a classified failure.
    async fn render(&self) -> Result<Result<RenderResult, Failure>, Error> {
        let Some((record, mut guard)) = self.ctx.store.lease() else {
            return Ok(Err(Failure {
                reason: reasons::PLATFORM_NOT_READY,
                event: reasons::PLATFORM_NOT_READY,
                message: "no platform is recorded: waiting for Platform cluster".to_owned(),
                outcome: Outcome::FailedTransient,
                action: actions::RENDER,
                history: true,
            }));
        };
        let Some(renderer) = self.ctx.renderer.clone() else {
            guard.release();
            return Ok(Err(Failure {
                reason: reasons::RENDER_FAILED,
                event: reasons::RENDER_FAILED,
                message: "no module renderer is configured".to_owned(),
                outcome: Outcome::FailedStalled,
                action: actions::RENDER,
                history: true,
            }));
        };
        let req = ModuleRequest {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            path: self.mi.spec.module.path.clone(),
            version: self.mi.spec.module.version.clone(),
            values: self.mi.spec.values.clone(),
        };
        let rec = Arc::clone(&record);
        let out = frame::blocking("rendering the module", move || {
            renderer.render_module(&req, &rec.platform, rec.skew)
        })
        .await;
        guard.release();
        Ok(out?.map_err(|e| {
            let c = classify_render(e.class);
            Failure {
                reason: c.reason,
                event: c.reason,
                message: e.to_string(),
                outcome: c.outcome,
                action: actions::RENDER,
                history: true,
            }
        }))
    }

    fn attempted(&mut self, digests: &Digests) {
        let elapsed = self.started.elapsed();
        let started_at = self.started_at.clone();
        let generation = self.generation();
        let status = self.status();
        status.observed_generation = generation;
        let r = &mut status.reconcile;
        r.last_attempted_action = Some("reconcile".to_owned());
        r.last_attempted_at = Some(started_at);
        r.last_attempted_duration = Some(format!("{:.3}s", elapsed.as_secs_f64()));
        r.last_attempted_source_digest = Some(digests.source.clone());
        r.last_attempted_config_digest = Some(digests.config.clone());
        r.last_attempted_render_digest =
            (!digests.render.is_empty()).then(|| digests.render.clone());
    }

    async fn no_op(mut self) -> Result<Reconciled, Error> {
        let generation = self.generation();
        let now = frame::now();
        let status = self.status();
        status.observed_generation = generation;
        conditions::mark_ready(
            &mut status.conditions,
            reasons::RECONCILIATION_SUCCEEDED,
            SUCCEEDED_MESSAGE,
            generation,
            &now,
        );
        counters(status).reconcile = 0;
        status.reconcile.next_retry_at = None;
        self.patcher.patch_status(&self.mi).await?;
        self.event(
            EventType::Normal,
            reasons::NO_OP,
            actions::RECONCILE,
            NO_OP_MESSAGE,
        )
        .await;
        Ok(Reconciled {
            requeue: None,
            outcome: Some(Outcome::NoOp),
            reason: Some(reasons::RECONCILIATION_SUCCEEDED),
        })
    }

    async fn succeed(
        mut self,
        entries: Vec<InventoryEntry>,
        digests: &Digests,
        outcome: Outcome,
        pruned: bool,
    ) -> Result<Reconciled, Error> {
        self.attempted(digests);
        let generation = self.generation();
        let now = frame::now();
        let revision = self
            .prior
            .reconcile
            .inventory
            .as_ref()
            .map_or(0, |i| i.revision)
            + 1;
        let count = i64::try_from(entries.len()).unwrap_or(i64::MAX);
        let size = entries.len();
        let status = self.status();
        let r = &mut status.reconcile;
        r.last_applied_at = Some(now.clone());
        r.last_applied_source_digest = Some(digests.source.clone());
        r.last_applied_config_digest = Some(digests.config.clone());
        r.last_applied_render_digest = Some(digests.render.clone());
        r.inventory = Some(Inventory {
            revision,
            digest: digests.inventory.clone(),
            count,
            entries,
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
        conditions::remove(&mut status.conditions, types::DRIFTED);
        conditions::mark_ready(
            &mut status.conditions,
            reasons::RECONCILIATION_SUCCEEDED,
            SUCCEEDED_MESSAGE,
            generation,
            &now,
        );
        self.patcher.patch_status(&self.mi).await?;
        if let Some(m) = &self.ctx.metrics {
            m.set_inventory_size(&self.namespace, &self.name, size);
        }
        self.event(
            EventType::Normal,
            reasons::RECONCILIATION_SUCCEEDED,
            actions::RECONCILE,
            SUCCEEDED_MESSAGE,
        )
        .await;
        Ok(Reconciled {
            requeue: None,
            outcome: Some(outcome),
            reason: Some(reasons::RECONCILIATION_SUCCEEDED),
        })
    }

    async fn fail(mut self, f: Failure, digests: &Digests) -> Result<Reconciled, Error> {
        self.attempted(digests);
        let generation = self.generation();
        let now = frame::now();
        let counter = {
            let c = counters(self.status());
            let before = c.reconcile;
            c.reconcile = c.reconcile.saturating_add(1);
            before
        };
        let requeue = outcome::requeue_after(f.outcome, counter_u32(counter), None)
            .unwrap_or(STALLED_RECHECK);
        let started_at = self.started_at.clone();
        let status = self.status();
        match f.outcome {
            Outcome::FailedStalled => conditions::mark_stalled(
                &mut status.conditions,
                f.reason,
                &f.message,
                generation,
                &now,
            ),
            _ => conditions::mark_not_ready(
                &mut status.conditions,
                f.reason,
                &f.message,
                generation,
                &now,
            ),
        }
        status.reconcile.next_retry_at = Some(time_after(requeue));
        if f.history && !f.message.is_empty() {
            push_history(
                &mut status.reconcile.history,
                HistoryEntry {
                    action: "reconcile".to_owned(),
                    phase: "failed".to_owned(),
                    started_at: Some(started_at),
                    finished_at: Some(now.clone()),
                    source_digest: digests.source.clone(),
                    config_digest: digests.config.clone(),
                    render_digest: digests.render.clone(),
                    inventory_digest: digests.inventory.clone(),
                    message: f.message.clone(),
                    ..Default::default()
                },
            );
        }
        self.patcher.patch_status(&self.mi).await?;
        if super::events::is_transition(&self.prior.conditions, f.reason, &f.message) {
            self.event(EventType::Warning, f.event, f.action, &f.message)
                .await;
        }
        tracing::warn!(reason = f.reason, message = %f.message, "module instance not reconciled");
        Ok(Reconciled {
            requeue: Some(requeue),
            outcome: Some(f.outcome),
            reason: Some(f.reason),
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

    fn applied(d: &Digests) -> ModuleInstanceStatus {
        let mut s = ModuleInstanceStatus::default();
        s.reconcile.last_applied_source_digest = Some(d.source.clone());
        s.reconcile.last_applied_config_digest = Some(d.config.clone());
        s.reconcile.last_applied_render_digest = Some(d.render.clone());
        s.reconcile.inventory = Some(Inventory {
            digest: d.inventory.clone(),
            ..Default::default()
        });
        s
    }

    #[test]
    fn no_op_needs_four_equal_non_empty_digests_scenario_29() {
        let d = digests();
        assert!(is_no_op(&applied(&d), &d));
        assert!(!is_no_op(&ModuleInstanceStatus::default(), &d));
        let mut other = d.clone();
        other.config = "sha256:c2".into();
        assert!(!is_no_op(&applied(&d), &other));
        let empty = Digests::default();
        assert!(!is_no_op(&applied(&empty), &empty));
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
    fn the_deletion_sa_message_names_the_sa_and_the_three_options() {
        let m = deletion_sa_missing_message("team-a/deploy-sa");
        assert!(m.contains("team-a/deploy-sa"));
        assert!(m.contains("restoring the ServiceAccount"));
        assert!(m.contains("spec.prune=false"));
        assert!(m.contains("opm.dev/force-delete-orphan=\"true\""));
    }
}
