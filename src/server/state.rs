//! Shared state of the HTTP handlers: limits, the evaluation semaphore, readiness, metrics and
//! the render backend.
//!
//! `AppState` is a cheap `Arc` clone (crates.io pattern); every router gets the same one, so the
//! probe port reports readiness of the webhook port and `/metrics` sees every listener's counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::metrics::Metrics;
use super::render_api::auth::{ClusterRx, RenderAuth};
use crate::kernel::{BuiltPlatform, ModuleRenderer};
use crate::platform::Store;

/// The apiserver's own request body limit (3 MiB); a larger AdmissionReview cannot exist.
pub const DEFAULT_BODY_LIMIT: usize = 3 * 1024 * 1024;

/// The default [`Limits::head_timeout`].
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Request limits of the webhook listener.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest accepted request body in bytes (413 above).
    pub body_limit: usize,
    /// Deadline of a whole request, including reading the body (408 after).
    pub request_timeout: Duration,
    /// Deadline of one admission evaluation, including the wait for a permit; a review over it is
    /// denied with a message saying so (never an opaque 500).
    pub eval_timeout: Duration,
    /// Evaluations running at once (the semaphore size).
    pub max_concurrent_reviews: usize,
    /// Deadline for an HTTP/1 connection to start a request while none is in flight (slow-loris
    /// heads, idle keep-alive connections); checked once per period, so such a connection lives
    /// at most two periods.
    pub head_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::with_timeout(Duration::from_secs(5), default_concurrency())
    }
}

impl Limits {
    /// Limits for a request timeout: evaluation gets 80 % of it, so its denial still arrives in time.
    pub fn with_timeout(request_timeout: Duration, max_concurrent_reviews: usize) -> Self {
        Limits {
            body_limit: DEFAULT_BODY_LIMIT,
            request_timeout,
            eval_timeout: request_timeout.mul_f64(0.8),
            max_concurrent_reviews: max_concurrent_reviews.max(1),
            head_timeout: DEFAULT_HEAD_TIMEOUT,
        }
    }
}

/// The number of CPUs, the default evaluation concurrency.
pub fn default_concurrency() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// State shared by all handlers.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Inner>);

/// The contents of [`AppState`].
#[derive(Debug)]
pub struct Inner {
    /// Request limits.
    pub limits: Limits,
    /// Permits for evaluations.
    pub semaphore: Arc<Semaphore>,
    /// Metric families.
    pub metrics: Metrics,
    /// The render API's backend, if this server renders.
    pub render: Option<RenderBackend>,
    ready: AtomicBool,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// New state; `certs` adds the certificate metrics.
    pub fn new(limits: Limits, certs: Option<Arc<certs::CertStore>>) -> Self {
        Self::new_with(limits, certs, None, |_| {})
    }

    /// New state with a render backend (the REST render API answers 503 without one).
    pub fn with_render(
        limits: Limits,
        certs: Option<Arc<certs::CertStore>>,
        render: Option<RenderBackend>,
    ) -> Self {
        Self::new_with(limits, certs, render, |_| {})
    }

    /// Like [`AppState::with_render`]; `register` adds further metric families to the served
    /// registry.
    pub fn new_with(
        limits: Limits,
        certs: Option<Arc<certs::CertStore>>,
        render: Option<RenderBackend>,
        register: impl FnOnce(&mut prometheus_client::registry::Registry),
    ) -> Self {
        AppState(Arc::new(Inner {
            semaphore: Arc::new(Semaphore::new(limits.max_concurrent_reviews)),
            limits,
            metrics: Metrics::new_with(certs, register),
            render,
            ready: AtomicBool::new(false),
        }))
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.0.ready.load(Ordering::SeqCst)
    }

    /// Sets readiness (true once TLS is bound, false again while draining).
    pub fn set_ready(&self, ready: bool) {
        self.0.ready.store(ready, Ordering::SeqCst);
    }
}

/// Everything the render route needs; absent on a webhook-only server.
#[derive(Clone)]
pub struct RenderBackend {
    /// The leased platform store the Platform reconciler records into.
    pub store: Store<BuiltPlatform>,
    /// The render kernel.
    pub renderer: Arc<dyn ModuleRenderer>,
    /// Authentication and authorisation of callers.
    pub auth: RenderAuth,
    /// The cluster, once connected (auth reviews, validate and diff).
    pub cluster: ClusterRx,
    /// Deadline of one render, including the wait for a permit.
    pub timeout: Duration,
    /// The render slots (`--max-concurrent-renders`): the process's one set, shared with the
    /// reconcilers and the Platform build when `serve` wires them ([`RenderBackend::sharing`]).
    pub slots: crate::render_lease::RenderSlots,
    /// The render series (`opm_render_*`), shared with the reconcilers.
    pub metrics: crate::render_lease::RenderMetrics,
}

impl std::fmt::Debug for RenderBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderBackend")
            .field("store", &self.store)
            .field("auth", &self.auth)
            .field("timeout", &self.timeout)
            .field("slots", &self.slots.available())
            .finish_non_exhaustive()
    }
}

impl RenderBackend {
    /// A backend over `store` and `renderer` with `max_concurrent` render slots of its own
    /// (see [`RenderBackend::sharing`]) and renders of at most `timeout`.
    pub fn new(
        store: Store<BuiltPlatform>,
        renderer: Arc<dyn ModuleRenderer>,
        auth: RenderAuth,
        cluster: ClusterRx,
        timeout: Duration,
        max_concurrent: usize,
    ) -> Self {
        RenderBackend {
            store,
            renderer,
            auth,
            cluster,
            timeout,
            slots: crate::render_lease::RenderSlots::new(max_concurrent),
            metrics: crate::render_lease::RenderMetrics::default(),
        }
    }

    /// Renders in `slots` (the process's one set) instead of slots of its own.
    pub fn sharing(mut self, slots: crate::render_lease::RenderSlots) -> Self {
        self.slots = slots;
        self
    }

    /// Counts renders into `metrics` (by default into series nobody registered).
    pub fn with_metrics(mut self, metrics: crate::render_lease::RenderMetrics) -> Self {
        self.metrics = metrics;
        self
    }
}
