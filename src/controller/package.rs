//! The ModulePackage reconciler (operator-spec.md §2.1, §2.3, §2.4, §2.5, §6, §7.3; lessons.md §5
//! rules 1–3, 11).
//!
//! Rules implemented here, in the order of §2.3:
//! 1. GET (missing → done); interval = `spec.interval` (Go duration; unset, `0` or unparsable →
//!    5m, unparsable logged); the `opmodel.dev/cleanup` finalizer is added first (requeue at
//!    once); deletion follows §2.4 with an empty owner uuid (no uuid guard); `suspend` marks
//!    Suspended with observedGeneration (Normal `Suspended` on the transition, no metrics); a prior
//!    Ready reason `Suspended` emits Normal `Resumed`.
//! 2. `dependsOn` before anything else: a dependency in another namespace is an error (“…
//!    cross-namespace dependencies are not supported”, Warning); a missing one blocks as
//!    `<ns>/<name> (not found)`, one whose Ready is not True blocks as `<ns>/<name>`; a blocker
//!    is Ready=False `DependenciesNotReady` “waiting for dependency X” (Normal, action
//!    `DependsOn`). Always observedGeneration, one patch, requeue after the interval; nothing is
//!    fetched or rendered.
//! 3. MarkReconciling, then the source ([`source`]): an unsupported kind, a refused
//!    cross-namespace reference (`--allow-cross-namespace-refs` off) or a missing source (or
//!    missing Flux CRD) is Stalled `SourceNotReady` (30m); a source not Ready or without artifact
//!    is Ready=False `SourceNotReady` after the interval (a soft block: the reconcile failure
//!    counter is not bumped). Warning, action `Resolve`. Success records `status.source` and the
//!    Source digest is the artifact digest verbatim.
//! 4. The artifact is fetched with [`crate::artifact::fetch`] into a temporary directory removed
//!    afterwards (every limit of step 4 lives there); a failure is Ready=False `FetchFailed`
//!    naming the cause, Warning action `Fetch`, requeue after the interval.
//! 5. The package path ([`crate::artifact::package_dir`]): `..` or a missing directory is Stalled
//!    `PathNotFound`, no `instance.cue` Stalled `InstanceFileNotFound`; Warning action `Load`, 30m.
//! 6. Render on a lease of the platform store (none → Ready=False `PlatformNotReady`, requeue
//!    after the interval) with the record's skew policy, through `kernel::PackageRenderer` (the
//!    loader gates on `#ModuleInstance`). Kernel errors are classified by their class
//!    ([`super::outcome::classify_render`]): UnsupportedKind / ResolutionFailed / SkewRefused /
//!    RenderFailed stall (30m); a transient registry pull backs off, as for a ModuleInstance.
//! 7. Digests: render, inventory, Config = digest of nothing. NoOp → Normal `NoOp`, requeue after
//!    the interval. No drift detection.
//! 8. Apply and prune as a ModuleInstance through [`crate::apply::Engine::sync`] except: apply and
//!    prune errors are always transient (backoff; no ServiceAccount-403 stall) and prune runs with
//!    an empty owner uuid. Success → Ready `ReconciliationSucceeded`, requeue after the interval.
//! 9. Commit as a ModuleInstance (one optimistic status patch; NoOp writes Ready, counters and
//!    `nextRetryAt` only); failure counters apply/prune/reconcile only; history ≤ 10; no
//!    Prometheus metrics (as upstream alpha.12).

pub mod source;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crds::common::{FailureCounters, HistoryEntry, Inventory, InventoryEntry};
use crds::conditions::{self, reasons, types};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use crds::k8s_openapi::jiff::{SignedDuration, Timestamp};
use crds::module_package::{ModulePackage, ModulePackageStatus, SourceStatus};
use crds::FINALIZER_CLEANUP;
use kube::api::DynamicObject;
use kube::{Api, ResourceExt};
use serde_json::Value;
use tracing::Instrument;

use super::context::{Context, Reconciled};
use super::frame::{self, Error, EventType, Patcher};
use super::instance::{deletion_sa_missing_message, is_no_op_of, push_history, Digests};
use super::outcome::{self, classify_render, Outcome, STALLED_RECHECK};
use crate::apply::deletion::{self, Decision, FORCE_DELETE_ORPHAN_ANNOTATION};
use crate::apply::object::InstanceLabels;
use crate::apply::prune::PruneOptions;
use crate::apply::{self, ApplyOptions, Engine, Phase, SyncOptions};
use crate::artifact;
use crate::inventory;
use crate::kernel::RenderResult;

/// The kind label of spans.
pub const KIND: &str = "ModulePackage";
/// The interval when `spec.interval` is unset or zero (§1.2).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// How soon a deletion whose objects are still terminating is looked at again.
pub const DELETION_RECHECK: Duration = super::instance::DELETION_RECHECK;

/// Event actions of the ModulePackage loop (§7.3).
pub mod actions {
    pub use super::super::instance::actions::*;
    /// Waiting for dependencies.
    pub const DEPENDS_ON: &str = "DependsOn";
    /// Resolving the source.
    pub const RESOLVE: &str = "Resolve";
    /// Downloading the artifact.
    pub const FETCH: &str = "Fetch";
    /// Locating the package in the artifact.
    pub const LOAD: &str = "Load";
}

/// Parses a Go duration (`300ms`, `1.5h`, `1h30m`, `0`); `None` when malformed.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// The interval of `mp` (§1.2: unset or zero → 5m; malformed → 5m).
pub fn interval_of(mp: &ModulePackage) -> Duration {
    match mp.spec.interval.as_deref() {
        None => DEFAULT_INTERVAL,
        Some(s) => match parse_go_duration(s) {
            Some(d) if !d.is_zero() => d,
            Some(_) => DEFAULT_INTERVAL,
            None => {
                tracing::warn!(interval = s, "spec.interval is not a duration; using 5m");
                DEFAULT_INTERVAL
            }
        },
    }
}

/// The §2.3 step 2 message of a cross-namespace dependency.
pub fn cross_namespace_dependency_message(namespace: &str, name: &str) -> String {
    format!("dependency {namespace}/{name}: cross-namespace dependencies are not supported")
}

fn time_after(d: Duration) -> Time {
    let now = Timestamp::now();
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    Time(
        now.checked_add(SignedDuration::from_secs(secs))
            .unwrap_or(now),
    )
}

fn counters(status: &mut ModulePackageStatus) -> &mut FailureCounters {
    status
        .reconcile
        .failure_counters
        .get_or_insert_with(FailureCounters::default)
}

fn counter_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// Reconciles the ModulePackage `namespace/name` (§2.3).
pub async fn reconcile(namespace: &str, name: &str, ctx: &Context) -> Result<Reconciled, Error> {
    let started = Instant::now();
    let api: Api<ModulePackage> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(mp) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading ModulePackage {namespace}/{name}"), e))?
    else {
        return Ok(Reconciled::done());
    };
    let generation = mp.metadata.generation.unwrap_or_default();
    let span = frame::reconcile_span(KIND, namespace, name, generation);
    Run::new(api, mp, ctx, started)?
        .run()
        .instrument(span)
        .await
}

/// One reconcile of one object.
struct Run<'a> {
    ctx: &'a Context,
    mp: ModulePackage,
    patcher: Patcher<ModulePackage>,
    prior: ModulePackageStatus,
    interval: Duration,
    started: Instant,
    started_at: Time,
    namespace: String,
    name: String,
}

/// How a failed phase is reported.
struct Failure {
    reason: &'static str,
    message: String,
    outcome: Outcome,
    action: &'static str,
    /// Requeue after this instead of the outcome's (the interval of soft failures).
    requeue: Option<Duration>,
    /// A soft block (source not ready): the reconcile counter is left alone.
    soft: bool,
}

impl Failure {
    fn stalled(reason: &'static str, action: &'static str, message: String) -> Self {
        Failure {
            reason,
            message,
            outcome: Outcome::FailedStalled,
            action,
            requeue: None,
            soft: false,
        }
    }

    fn after(
        reason: &'static str,
        action: &'static str,
        message: String,
        interval: Duration,
    ) -> Self {
        Failure {
            reason,
            message,
            outcome: Outcome::FailedTransient,
            action,
            requeue: Some(interval),
            soft: false,
        }
    }
}

impl<'a> Run<'a> {
    fn new(
        api: Api<ModulePackage>,
        mp: ModulePackage,
        ctx: &'a Context,
        started: Instant,
    ) -> Result<Self, Error> {
        let namespace = mp.namespace().unwrap_or_default();
        let name = mp.name_any();
        let patcher = Patcher::new(api, &mp, format!("ModulePackage {namespace}/{name}"))?;
        let prior = mp.status.clone().unwrap_or_default();
        let interval = interval_of(&mp);
        Ok(Run {
            ctx,
            mp,
            patcher,
            prior,
            interval,
            started,
            started_at: frame::now(),
            namespace,
            name,
        })
    }

    fn generation(&self) -> Option<i64> {
        self.mp.metadata.generation
    }

    fn status(&mut self) -> &mut ModulePackageStatus {
        self.mp.status.get_or_insert_with(Default::default)
    }

    async fn event(&self, type_: EventType, reason: &str, action: &str, note: &str) {
        self.ctx
            .events
            .publish(&self.mp, type_, reason, action, note)
            .await;
    }

    async fn run(mut self) -> Result<Reconciled, Error> {
        let deleting = self.mp.metadata.deletion_timestamp.is_some();
        let has_finalizer = self.mp.finalizers().iter().any(|f| f == FINALIZER_CLEANUP);
        if !has_finalizer {
            if deleting {
                return Ok(Reconciled::done());
            }
            let mut finalizers = self.mp.finalizers().to_vec();
            finalizers.push(FINALIZER_CLEANUP.to_owned());
            self.patcher.patch_finalizers(&finalizers).await?;
            return Ok(Reconciled {
                requeue: Some(Duration::ZERO),
                outcome: None,
                reason: None,
            });
        }
        if deleting {
            return self.delete().await;
        }
        let prior_ready_reason = conditions::get(&self.prior.conditions, types::READY)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        if self.mp.spec.suspend == Some(true) {
            return self.suspend(&prior_ready_reason).await;
        }
        if prior_ready_reason == reasons::SUSPENDED {
            self.event(
                EventType::Normal,
                reasons::RESUMED,
                actions::RESUME,
                "Reconciliation resumed",
            )
            .await;
        }
        if !self.mp.spec.depends_on.is_empty() {
            if let Some(r) = self.depends_on().await? {
                return Ok(r);
            }
        }
        self.reconcile().await
    }

    async fn suspend(mut self, prior_ready_reason: &str) -> Result<Reconciled, Error> {
        let generation = self.generation();
        let now = frame::now();
        let status = self.status();
        conditions::mark_suspended(&mut status.conditions, generation, &now);
        status.observed_generation = generation;
        self.patcher.patch_status(&self.mp).await?;
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

    /// Step 2: `Some` when blocked (the status is written), `None` when every dependency is Ready.
    async fn depends_on(&mut self) -> Result<Option<Reconciled>, Error> {
        let api: Api<ModulePackage> = Api::namespaced(self.ctx.client.clone(), &self.namespace);
        let mut blocked: Option<(EventType, String)> = None;
        for dep in self.mp.spec.depends_on.clone() {
            let ns = dep
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(&self.namespace)
                .to_owned();
            if ns != self.namespace {
                blocked = Some((
                    EventType::Warning,
                    cross_namespace_dependency_message(&ns, &dep.name),
                ));
                break;
            }
            let got = api.get_opt(&dep.name).await.map_err(|e| {
                Error::kube(
                    format!("reading dependency ModulePackage {ns}/{}", dep.name),
                    e,
                )
            })?;
            let blocker = match got {
                None => Some(format!("{ns}/{} (not found)", dep.name)),
                Some(d) => {
                    let ready = d
                        .status
                        .as_ref()
                        .is_some_and(|s| conditions::is_true(&s.conditions, types::READY));
                    (!ready).then(|| format!("{ns}/{}", dep.name))
                }
            };
            if let Some(b) = blocker {
                blocked = Some((EventType::Normal, format!("waiting for dependency {b}")));
                break;
            }
        }
        let Some((event_type, message)) = blocked else {
            return Ok(None);
        };
        let generation = self.generation();
        let now = frame::now();
        let status = self.status();
        status.observed_generation = generation;
        conditions::mark_not_ready(
            &mut status.conditions,
            reasons::DEPENDENCIES_NOT_READY,
            &message,
            generation,
            &now,
        );
        self.patcher.patch_status(&self.mp).await?;
        if super::events::is_transition(
            &self.prior.conditions,
            reasons::DEPENDENCIES_NOT_READY,
            &message,
        ) {
            self.event(
                event_type,
                reasons::DEPENDENCIES_NOT_READY,
                actions::DEPENDS_ON,
                &message,
            )
            .await;
        }
        Ok(Some(Reconciled {
            requeue: Some(self.interval),
            outcome: Some(Outcome::FailedTransient),
            reason: Some(reasons::DEPENDENCIES_NOT_READY),
        }))
    }

    /// The identity apply and prune act as (§2.5); `None` is the controller identity.
    async fn identity(&self) -> Option<(String, Result<Engine, apply::Error>)> {
        let sa = self
            .mp
            .spec
            .service_account_name
            .as_deref()
            .filter(|s| !s.is_empty())
            .or(self
                .ctx
                .default_service_account
                .as_deref()
                .filter(|s| !s.is_empty()))?
            .to_owned();
        let engine = match &self.ctx.kube_config {
            Some(config) => {
                self.ctx
                    .engine
                    .impersonating(config, &self.namespace, &sa)
                    .await
            }
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

    /// §2.4 (owner uuid empty: packages have no uuid guard).
    async fn delete(mut self) -> Result<Reconciled, Error> {
        let entries: Vec<InventoryEntry> = self
            .prior
            .reconcile
            .inventory
            .as_ref()
            .map(|i| i.entries.clone())
            .unwrap_or_default();
        let prune = self.mp.spec.prune.unwrap_or(false);
        let identity = if prune && !entries.is_empty() {
            self.identity().await
        } else {
            None
        };
        let annotation = self
            .mp
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
                self.patcher.patch_status(&self.mp).await?;
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
                let mut result = engine.delete_all(&entries, &PruneOptions::default()).await;
                if result.complete() {
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
                            "deleting the inventory of ModulePackage {}/{}",
                            self.namespace, self.name
                        ),
                        source: Box::new(e),
                    }),
                    None => Ok(Reconciled {
                        requeue: Some(DELETION_RECHECK),
                        outcome: None,
                        reason: None,
                    }),
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
        self.patcher.patch_status(&self.mp).await?;
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
        let finalizers: Vec<String> = self
            .mp
            .finalizers()
            .iter()
            .filter(|f| f.as_str() != FINALIZER_CLEANUP)
            .cloned()
            .collect();
        self.patcher.patch_finalizers(&finalizers).await?;
        Ok(Reconciled::done())
    }

    /// Step 3: the source's artifact, or a classified failure.
    async fn resolve_source(&self) -> Result<Result<source::Artifact, Failure>, Error> {
        let r = &self.mp.spec.source_ref;
        let stalled = |message: String| {
            Ok(Err(Failure::stalled(
                reasons::SOURCE_NOT_READY,
                actions::RESOLVE,
                message,
            )))
        };
        let ar = match source::resource(r) {
            Ok(ar) => ar,
            Err(m) => return stalled(m),
        };
        let ns = source::effective_namespace(r, &self.namespace).to_owned();
        if ns != self.namespace && !self.ctx.allow_cross_namespace_refs {
            return stalled(format!(
                "source {} in namespace {ns:?}: cross-namespace source references are refused \
                 (the operator runs without --allow-cross-namespace-refs)",
                r.name
            ));
        }
        let shown = source::ref_string(r, &self.namespace);
        let api: Api<DynamicObject> = Api::namespaced_with(self.ctx.client.clone(), &ns, &ar);
        let obj = match api.get(&r.name).await {
            Ok(o) => o,
            Err(e) if frame::is_not_found(&e) => {
                return stalled(format!("source {shown} not found"));
            }
            Err(e) => return Err(Error::kube(format!("reading source {shown}"), e)),
        };
        Ok(source::ready_artifact(&obj).map_err(|why| Failure {
            reason: reasons::SOURCE_NOT_READY,
            message: format!("source {shown} {why}"),
            outcome: Outcome::FailedTransient,
            action: actions::RESOLVE,
            requeue: Some(self.interval),
            soft: true,
        }))
    }

    /// Steps 3–9.
    async fn reconcile(mut self) -> Result<Reconciled, Error> {
        let generation = self.generation();
        let now = frame::now();
        conditions::mark_reconciling(
            &mut self.status().conditions,
            reasons::PROGRESSING,
            conditions::messages::PROGRESSING,
            generation,
            &now,
        );
        let mut digests = Digests {
            config: inventory::config_digest(None),
            ..Default::default()
        };

        // Step 3: source.
        let art = match self.resolve_source().await? {
            Ok(a) => a,
            Err(f) => return self.fail(f, &digests).await,
        };
        digests.source = art.digest.clone();
        let shown = source::ref_string(&self.mp.spec.source_ref, &self.namespace);
        self.status().source = Some(SourceStatus {
            r#ref: Some(shown),
            artifact_revision: Some(art.revision.clone()),
            artifact_digest: Some(art.digest.clone()),
            artifact_url: Some(art.url.clone()),
        });

        // Step 4: fetch.
        let fetched = match artifact::fetch(&art.url, &art.digest, &self.ctx.artifact_limits).await
        {
            Ok(f) => f,
            Err(e) => {
                let f = Failure::after(
                    reasons::FETCH_FAILED,
                    actions::FETCH,
                    format!("fetching artifact {}: {e}", art.url),
                    self.interval,
                );
                return self.fail(f, &digests).await;
            }
        };

        // Step 5: path.
        let dir = match artifact::package_dir(fetched.root(), &self.mp.spec.path) {
            Ok(d) => d,
            Err(e) => {
                let reason = match e {
                    artifact::Error::InstanceFileNotFound(_) => reasons::INSTANCE_FILE_NOT_FOUND,
                    _ => reasons::PATH_NOT_FOUND,
                };
                let f = Failure::stalled(reason, actions::LOAD, e.to_string());
                return self.fail(f, &digests).await;
            }
        };

        // Step 6: render (the extraction lives until the render is done).
        let rendered = match self.render(fetched, dir).await? {
            Ok(r) => r,
            Err(f) => return self.fail(f, &digests).await,
        };
        for w in &rendered.warnings {
            self.event(
                EventType::Warning,
                reasons::RENDER_WARNING,
                actions::RENDER,
                w,
            )
            .await;
        }

        // Step 7: digests, NoOp.
        let objects: Vec<Value> = rendered.objects.iter().map(|o| o.object.clone()).collect();
        digests.render = if rendered.digest.is_empty() {
            inventory::render_digest(objects.iter())
        } else {
            rendered.digest.clone()
        };
        let desired = match inventory::entries_of(objects.iter()) {
            Ok(e) => e,
            Err(e) => {
                let f = Failure::stalled(
                    reasons::APPLY_FAILED,
                    actions::APPLY,
                    format!("converting resources: {e}"),
                );
                return self.fail(f, &digests).await;
            }
        };
        digests.inventory = inventory::inventory_digest(&desired);
        if is_no_op_of(&self.prior.reconcile, &digests) {
            return self.no_op().await;
        }

        // Step 8: identity, apply, prune.
        let engine = match self.identity().await {
            None => self.ctx.engine.clone(),
            Some((_, Ok(e))) => e,
            Some((_, Err(e))) => {
                let f =
                    Failure::stalled(reasons::IMPERSONATION_FAILED, actions::APPLY, e.to_string());
                return self.fail(f, &digests).await;
            }
        };
        let prune = self.mp.spec.prune.unwrap_or(false);
        let previous: Vec<InventoryEntry> = self
            .prior
            .reconcile
            .inventory
            .as_ref()
            .map(|i| i.entries.clone())
            .unwrap_or_default();
        let opts = SyncOptions {
            apply: ApplyOptions {
                force: self
                    .mp
                    .spec
                    .rollout
                    .as_ref()
                    .and_then(|r| r.force_conflicts)
                    .unwrap_or(false),
                instance: InstanceLabels::of(&rendered),
                ..Default::default()
            },
            prune,
            prune_options: PruneOptions::default(),
            ..Default::default()
        };
        match engine.sync(&objects, &previous, &opts).await {
            Ok(result) => {
                self.event(
                    EventType::Normal,
                    reasons::APPLIED,
                    actions::APPLY,
                    &result.changes.applied_message(),
                )
                .await;
                let deleted = result.pruned.as_ref().map_or(0, |p| p.deleted.len());
                if deleted > 0 {
                    self.event(
                        EventType::Normal,
                        reasons::PRUNED,
                        actions::PRUNE,
                        &format!("Pruned {deleted} stale resources"),
                    )
                    .await;
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
                let message = e.error.to_string();
                let f = match e.phase {
                    Phase::Plan => Failure::stalled(reasons::APPLY_FAILED, actions::APPLY, message),
                    Phase::Apply => Failure {
                        reason: reasons::APPLY_FAILED,
                        message,
                        outcome: Outcome::FailedTransient,
                        action: actions::APPLY,
                        requeue: None,
                        soft: false,
                    },
                    Phase::Prune => Failure {
                        reason: reasons::PRUNE_FAILED,
                        message,
                        outcome: Outcome::FailedTransient,
                        action: actions::PRUNE,
                        requeue: None,
                        soft: false,
                    },
                };
                self.fail(f, &digests).await
            }
        }
    }

    /// Step 6: `Ok(Err(_))` is a classified failure.
    async fn render(
        &self,
        fetched: artifact::Fetched,
        dir: std::path::PathBuf,
    ) -> Result<Result<RenderResult, Failure>, Error> {
        let Some(renderer) = self.ctx.package_renderer.clone() else {
            return Ok(Err(Failure::stalled(
                reasons::RENDER_FAILED,
                actions::RENDER,
                "no package renderer is configured".to_owned(),
            )));
        };
        let Some((record, mut guard)) = self.ctx.store.lease() else {
            return Ok(Err(Failure::after(
                reasons::PLATFORM_NOT_READY,
                actions::RENDER,
                "no platform is recorded: waiting for Platform cluster".to_owned(),
                self.interval,
            )));
        };
        let rec = Arc::clone(&record);
        let out = frame::blocking("rendering the package", move || {
            let r = renderer.render_package(&dir, &rec.platform, rec.skew);
            drop(fetched);
            r
        })
        .await;
        guard.release();
        Ok(out?.map_err(|e| {
            let c = classify_render(e.class);
            Failure {
                reason: c.reason,
                message: e.to_string(),
                outcome: c.outcome,
                action: actions::RENDER,
                requeue: None,
                soft: false,
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
        r.last_attempted_source_digest =
            (!digests.source.is_empty()).then(|| digests.source.clone());
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
            super::instance::SUCCEEDED_MESSAGE,
            generation,
            &now,
        );
        counters(status).reconcile = 0;
        status.reconcile.next_retry_at = None;
        self.patcher.patch_status(&self.mp).await?;
        self.event(
            EventType::Normal,
            reasons::NO_OP,
            actions::RECONCILE,
            super::instance::NO_OP_MESSAGE,
        )
        .await;
        Ok(Reconciled {
            requeue: Some(self.interval),
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
        conditions::mark_ready(
            &mut status.conditions,
            reasons::RECONCILIATION_SUCCEEDED,
            super::instance::SUCCEEDED_MESSAGE,
            generation,
            &now,
        );
        self.patcher.patch_status(&self.mp).await?;
        self.event(
            EventType::Normal,
            reasons::RECONCILIATION_SUCCEEDED,
            actions::RECONCILE,
            super::instance::SUCCEEDED_MESSAGE,
        )
        .await;
        Ok(Reconciled {
            requeue: Some(self.interval),
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
            if !f.soft {
                c.reconcile = c.reconcile.saturating_add(1);
            }
            before
        };
        let requeue = f.requeue.unwrap_or_else(|| {
            outcome::requeue_after(f.outcome, counter_u32(counter), None).unwrap_or(STALLED_RECHECK)
        });
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
        if !f.message.is_empty() {
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
        self.patcher.patch_status(&self.mp).await?;
        if super::events::is_transition(&self.prior.conditions, f.reason, &f.message) {
            self.event(EventType::Warning, f.reason, f.action, &f.message)
                .await;
        }
        tracing::warn!(reason = f.reason, message = %f.message, "module package not reconciled");
        Ok(Reconciled {
            requeue: Some(requeue),
            outcome: Some(f.outcome),
            reason: Some(f.reason),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn go_durations_parse() {
        let d = |s| parse_go_duration(s);
        assert_eq!(d("5m"), Some(Duration::from_secs(300)));
        assert_eq!(d("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(d("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(d("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(d("0"), Some(Duration::ZERO));
        assert_eq!(d("5"), None, "a unit is required");
        assert_eq!(d("5x"), None);
        assert_eq!(d("-1s"), None);
        assert_eq!(d(""), None);
    }

    #[test]
    fn the_interval_defaults_to_five_minutes() {
        let mut mp = ModulePackage::test();
        assert_eq!(interval_of(&mp), DEFAULT_INTERVAL);
        mp.spec.interval = Some("0s".into());
        assert_eq!(interval_of(&mp), DEFAULT_INTERVAL);
        mp.spec.interval = Some("10m".into());
        assert_eq!(interval_of(&mp), Duration::from_secs(600));
        mp.spec.interval = Some("soon".into());
        assert_eq!(interval_of(&mp), DEFAULT_INTERVAL);
    }
}
