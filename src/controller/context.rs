//! What the Platform and TransformerRegistration reconcilers share (docs/design/operator.md §2.0, §5,
//! §7.1 startup order).
//!
//! Rules:
//! - One process-wide store and layout; the Platform reconciler is the only writer of both
//!   (`set_generated`, `clear`, `ensure`, `prune`), everyone else leases.
//! - The kernel reaches the reconcilers only through the traits of `crate::kernel`
//!   ([`PlatformBuilder`], [`CatalogAcquirer`]); tests pass fakes.
//! - Every cluster read and write goes through the one controller client.
//! - Each time the Platform reconciler records a package it bumps [`Context::recorded`]; the
//!   TransformerRegistration controller re-judges every claim on that signal, so claims deferred
//!   with `PlatformNotReady` (after a restart the store is empty) recover as soon as a package is
//!   recorded, even when the Platform's status did not change (§4.5, restart recovery).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::metrics::ControllerMetrics;
use super::outcome::Outcome;
use super::runtime::Events;
use crate::apply::{Engine, EngineOptions};
use crate::kernel::{
    BuiltPlatform, CatalogAcquirer, ModuleRenderer, PackageRenderer, PlatformBuilder,
};
use crate::platform::{Layout, Store};

/// The shared state of the reconcilers.
pub struct Context {
    /// The controller identity's client.
    pub client: kube::Client,
    /// The platform store (process-local).
    pub store: Store<BuiltPlatform>,
    /// The owner of `--platform-dir`.
    pub layout: Arc<Layout>,
    /// Platform generation and build.
    pub builder: Arc<dyn PlatformBuilder>,
    /// Catalog acquisition for claims.
    pub acquirer: Arc<dyn CatalogAcquirer>,
    /// The event recorder.
    pub events: Events,
    /// Controller metrics, when registered.
    pub metrics: Option<ControllerMetrics>,
    /// The operator version written to `status.operatorVersion`.
    pub operator_version: String,
    /// Bumped each time a package is recorded.
    pub recorded: watch::Sender<u64>,
    /// Module rendering for the ModuleInstance reconciler (`None`: its controller does not run).
    pub renderer: Option<Arc<dyn ModuleRenderer>>,
    /// The apply engine acting as the controller (drift, and apply/prune without a SA).
    pub engine: Engine,
    /// The controller's client configuration, copied into impersonating clients (§2.5); `None`:
    /// a ServiceAccount in effect fails with ImpersonationFailed.
    pub kube_config: Option<kube::Config>,
    /// `--default-service-account` (§2.5; empty or `None`: the controller identity).
    pub default_service_account: Option<String>,
    /// Concurrent ModuleInstance and ModulePackage reconciles (`--max-concurrent-renders`; 0 is
    /// taken as 1). The renders themselves are bounded by `render_slots`.
    pub max_concurrent_renders: u16,
    /// The process's render slots (`--max-concurrent-renders`), shared by the reconcilers, the
    /// Platform build and the REST render API ([`crate::render_lease::RenderSlots`]); a
    /// context alone has one slot.
    pub render_slots: crate::render_lease::RenderSlots,
    /// Package rendering for the ModulePackage reconciler (`None`: its controller does not run).
    pub package_renderer: Option<Arc<dyn PackageRenderer>>,
    /// `--allow-cross-namespace-refs`: a ModulePackage may name a source in another namespace
    /// (default deny, docs/design/operator.md §2.3).
    pub allow_cross_namespace_refs: bool,
    /// `--reconcile-timeout`: the deadline of one ModuleInstance or ModulePackage reconcile run
    /// by the manager (a hung registry or artifact server cannot pin a worker).
    pub reconcile_timeout: Duration,
    /// Limits of one ModulePackage artifact (docs/design/operator.md §2.3 step 4).
    pub artifact_limits: crate::registry::flux::Limits,
    /// How often the ModulePackage controller looks for Flux source CRDs that were absent.
    pub source_discovery_interval: Duration,
    /// The replica's shard (`--shard`, `--shard-label`): which ModuleInstances and ModulePackages
    /// its controllers watch.
    pub shard: super::shard::Shard,
    /// How soon an instance whose applied objects are not ready yet is looked at again
    /// (`--health-poll-interval`).
    pub health_poll: Duration,
    /// The default rollout timeout (`--health-timeout`; `spec.rollout.timeout` overrides it;
    /// zero: no health check).
    pub health_timeout: Duration,
    /// The compiled `spec.healthCheckExprs` of the rendering kinds, per object and generation.
    pub health_rules: crate::apply::health::cel::RulesCache,
    /// The remote clusters of `spec.kubeConfig` in use (clients cached per Secret version).
    pub clusters: super::remote::Clusters,
    /// Settings of issue 40 (interval jitter, drift default, dependency requeue).
    pub gitops: GitOps,
    /// Who waits for whom (`dependsOn`): woken by the frame's commits.
    pub waiters: super::waiters::Waiters,
    /// Signature policies (`spec.verify`, [`super::verify`]); `None`: `spec.verify` stalls
    /// `VerificationFailed` (no verifying kernel).
    pub signatures: Option<Arc<super::verify::Signatures>>,
    /// The operator's own namespace (the Platform's `spec.verify` Secret lives there).
    pub operator_namespace: String,
    /// Consecutive reconcile errors per object key (`Kind/name`), for the error backoff.
    failures: FailureCounts,
    /// The renders that exhausted a budget: their backoff and the one retry slot
    /// ([`super::fairness`]).
    pub exhausted: super::fairness::Gate,
    /// What the last apply of an object changed (`Kind/namespace/name` → “1 created, …”), kept
    /// while its health check waits, for the success event once the objects are ready
    /// (process memory: after a restart the event says only that the check passed).
    pending_changes: Mutex<HashMap<String, String>>,
}

/// The default `--reconcile-timeout`.
pub const DEFAULT_RECONCILE_TIMEOUT: Duration = Duration::from_secs(120);
/// The default `--health-poll-interval`.
pub const DEFAULT_HEALTH_POLL: Duration = Duration::from_secs(2);
/// The default `--health-timeout`.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(300);
/// The default interval of looking for absent Flux source CRDs.
pub const DEFAULT_SOURCE_DISCOVERY_INTERVAL: Duration = Duration::from_secs(30);

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("store", &self.store)
            .field("layout", &self.layout)
            .field("operator_version", &self.operator_version)
            .finish_non_exhaustive()
    }
}

/// The version string `v<crate version>` stamped into `status.operatorVersion`.
pub fn operator_version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

impl Context {
    /// A context; `instance` names this process in events.
    pub fn new(
        client: kube::Client,
        store: Store<BuiltPlatform>,
        layout: Arc<Layout>,
        builder: Arc<dyn PlatformBuilder>,
        acquirer: Arc<dyn CatalogAcquirer>,
        instance: &str,
    ) -> Self {
        let (recorded, _) = watch::channel(0);
        Context {
            events: super::runtime::Events::new(client.clone(), instance),
            client: client.clone(),
            store,
            layout,
            builder,
            acquirer,
            metrics: None,
            operator_version: operator_version(),
            recorded,
            renderer: None,
            engine: Engine::new(client.clone(), EngineOptions::default()),
            kube_config: None,
            default_service_account: None,
            max_concurrent_renders: 1,
            render_slots: crate::render_lease::RenderSlots::new(1),
            package_renderer: None,
            allow_cross_namespace_refs: false,
            reconcile_timeout: DEFAULT_RECONCILE_TIMEOUT,
            artifact_limits: crate::registry::flux::Limits::default(),
            source_discovery_interval: DEFAULT_SOURCE_DISCOVERY_INTERVAL,
            shard: super::shard::Shard::default(),
            health_poll: DEFAULT_HEALTH_POLL,
            health_timeout: DEFAULT_HEALTH_TIMEOUT,
            health_rules: Default::default(),
            clusters: Default::default(),
            gitops: GitOps::default(),
            waiters: super::waiters::Waiters::default(),
            signatures: None,
            operator_namespace: "opm-system".to_owned(),
            failures: FailureCounts::default(),
            exhausted: super::fairness::Gate::default(),
            pending_changes: Mutex::new(HashMap::new()),
        }
    }

    /// Records a reconcile's metrics (when registered).
    pub fn observe(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        outcome: Option<Outcome>,
        started: Instant,
    ) {
        let Some(m) = &self.metrics else { return };
        let took = started.elapsed();
        match outcome {
            Some(o) => m.record_reconcile(kind, namespace, name, o, took),
            None => m.observe_duration(kind, namespace, name, took),
        }
    }

    /// Counts a reconcile error of `key` and returns the number of errors before this one (the
    /// backoff counter: 5 s, 10 s, 20 s, … up to 5 min).
    pub fn failed(&self, key: &str) -> u32 {
        self.failures.failed(key)
    }

    /// Resets the error counter of `key` after a reconcile that returned no error.
    pub fn succeeded(&self, key: &str) {
        self.failures.succeeded(key);
    }

    /// Remembers what the apply of `key` changed while its health check waits.
    pub fn remember_changes(&self, key: &str, changed: &str) {
        self.pending_changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned(), changed.to_owned());
    }

    /// What the last apply of `key` changed, if remembered (kept).
    pub fn changes(&self, key: &str) -> Option<String> {
        self.pending_changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// What the last apply of `key` changed, if remembered (forgets it).
    pub fn take_changes(&self, key: &str) -> Option<String> {
        self.pending_changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key)
    }

    /// Signals that a package was recorded.
    pub fn notify_recorded(&self) {
        self.recorded.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The operator-wide settings of `spec.interval`, `spec.drift` and `spec.dependsOn` (issue 40).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOps {
    /// `--interval-jitter-percentage`: each interval requeue is the interval ± up to this
    /// percentage, uniformly (Flux's semantics; below 100; 0: none). [`Context::new`] sets 0,
    /// `serve` the flag (default 10).
    pub interval_jitter_percentage: u8,
    /// `--default-drift-mode`: the drift mode of an instance whose `spec.drift.mode` is unset.
    pub default_drift_mode: crds::drift::DriftMode,
    /// `--requeue-dependency`: how soon an instance waiting for a dependency looks again.
    pub requeue_dependency: Duration,
    /// `--watch-configs-label-selector`: the Secrets and ConfigMaps watched for `valuesFrom`.
    pub watch_configs_label_selector: String,
}

/// The default `--requeue-dependency` (Flux's).
pub const DEFAULT_REQUEUE_DEPENDENCY: Duration = Duration::from_secs(5);
/// The default `--interval-jitter-percentage` (Flux's).
pub const DEFAULT_INTERVAL_JITTER_PERCENTAGE: u8 = 10;
/// The default `--watch-configs-label-selector` (Flux's).
pub const DEFAULT_WATCH_CONFIGS_LABEL_SELECTOR: &str = "reconcile.fluxcd.io/watch=Enabled";

impl Default for GitOps {
    fn default() -> Self {
        GitOps {
            interval_jitter_percentage: 0,
            default_drift_mode: crds::drift::DriftMode::Warn,
            requeue_dependency: DEFAULT_REQUEUE_DEPENDENCY,
            watch_configs_label_selector: DEFAULT_WATCH_CONFIGS_LABEL_SELECTOR.to_owned(),
        }
    }
}

impl GitOps {
    /// `interval` with the jitter (module docs of [`GitOps::interval_jitter_percentage`]).
    pub fn jittered(&self, interval: Duration) -> Duration {
        let p = u64::from(self.interval_jitter_percentage.min(99));
        if p == 0 || interval.is_zero() {
            return interval;
        }
        use std::hash::{BuildHasher, Hasher};
        // A random draw without a generator of our own: the std hasher is seeded randomly.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(interval.as_nanos());
        let draw = h.finish() % 2001; // 0..=2000 → −1.000..=+1.000
        let span = interval.as_nanos().saturating_mul(u128::from(p)) / 100;
        let offset = span.saturating_mul(u128::from(draw)) / 1000;
        let nanos = (interval.as_nanos() + offset).saturating_sub(span);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// What one reconcile decided: when to run again and the outcome for the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Requeue after this interval (`None`: wait for a watch event).
    pub requeue: Option<Duration>,
    /// The outcome (`None`: a path without an outcome, e.g. ignored or deleted objects).
    pub outcome: Option<Outcome>,
    /// The condition reason the reconcile ended with, if it wrote one (for logs and tests).
    pub reason: Option<&'static str>,
}

impl Reconciled {
    /// Nothing to do, no requeue.
    pub fn done() -> Self {
        Reconciled {
            requeue: None,
            outcome: None,
            reason: None,
        }
    }
}

/// Consecutive reconcile errors per object key.
#[derive(Debug, Default)]
pub struct FailureCounts(Mutex<HashMap<String, u32>>);

impl FailureCounts {
    /// Counts an error of `key`; returns the count before it.
    pub fn failed(&self, key: &str) -> u32 {
        let mut f = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = f.entry(key.to_owned()).or_insert(0);
        let before = *n;
        *n = n.saturating_add(1);
        before
    }

    /// Forgets the errors of `key`.
    pub fn succeeded(&self, key: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::outcome::backoff;

    #[test]
    fn jitter_stays_within_the_percentage_and_varies() {
        let mut g = GitOps::default();
        let min = Duration::from_secs(60);
        assert_eq!(g.jittered(min), min, "0 %: none");
        g.interval_jitter_percentage = 10;
        let draws: Vec<Duration> = (0..200).map(|_| g.jittered(min)).collect();
        assert!(draws
            .iter()
            .all(|d| *d >= Duration::from_secs(54) && *d <= Duration::from_secs(66)));
        assert!(draws.iter().any(|d| *d < min) && draws.iter().any(|d| *d > min));
    }

    #[test]
    fn consecutive_errors_back_off_and_a_success_resets() {
        let f = FailureCounts::default();
        let delays: Vec<u64> = (0..4)
            .map(|_| backoff(f.failed("Platform/cluster")).as_secs())
            .collect();
        assert_eq!(delays, vec![5, 10, 20, 40]);
        assert_eq!(f.failed("TransformerRegistration/x"), 0, "per object");
        f.succeeded("Platform/cluster");
        assert_eq!(backoff(f.failed("Platform/cluster")).as_secs(), 5);
    }
}
