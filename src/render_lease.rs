//! The one "render on a lease" entry of the operator: the REST render API and the ModuleInstance /
//! ModulePackage reconcilers both render this way.
//!
//! Rules:
//! - The caller leases the platform first (`Store::lease`), so a missing platform is answered
//!   before anything waits (a 503 or `PlatformNotReady`).
//! - The render runs on a blocking thread (the kernel is synchronous; its threads have the
//!   evaluator's stack, `opm_kernel::stack`), with the leased platform and its skew policy.
//! - The lease (and whatever else `hold` holds, e.g. a render permit) is released when the render
//!   returns, on that thread: a caller that stops waiting (a timeout) never pulls the platform
//!   directory from under a render still running.
//! - A process has ONE set of render slots ([`RenderSlots`], `--max-concurrent-renders`), shared
//!   by the ModuleInstance and ModulePackage reconcilers, the Platform build and the REST render
//!   API: a render holds one slot from before the evaluation starts until it returns, so at most
//!   that many evaluations (each under `--render-memory-limit`) run in the process at once. The
//!   slot is free again when the result is ready; the evaluator behind it is freed on a thread of
//!   its own after that (`opm_kernel`'s `Staged::retire`: about 10 ms for a 129-component module),
//!   so for that long a slot's next render can start beside the memory of its last one. The
//!   memory limit's headroom covers that overlap (docs/install.md, Memory sizing).

//! - Every render is counted once in [`RenderMetrics`]: `opm_render_total{caller,result}`
//!   (`caller` = `reconcile` or `api`; `result` = `success`, `error`, `timeout`: the kernel's
//!   evaluation limit, memory budget or deadline, or the render API's `--render-timeout`) and
//!   `opm_render_duration_seconds{caller}` (the render itself, not the wait for a slot).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

use crate::kernel::{BuiltPlatform, ErrorClass, KernelError, SkewPolicy};
use crate::platform::{Generated, LeaseGuard};

/// The process's render slots (module docs). Cloning shares them.
#[derive(Clone, Debug)]
pub struct RenderSlots(Arc<Semaphore>);

impl RenderSlots {
    /// `n` slots (0 is taken as 1).
    pub fn new(n: usize) -> Self {
        RenderSlots(Arc::new(Semaphore::new(n.max(1))))
    }

    /// A slot, once one is free; held until the permit is dropped. `Err` only if the slots were
    /// closed, which nothing does.
    pub async fn acquire(&self) -> Result<OwnedSemaphorePermit, AcquireError> {
        Arc::clone(&self.0).acquire_owned().await
    }

    /// A slot if one is free now.
    pub fn try_acquire(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.0).try_acquire_owned().ok()
    }

    /// The slots free now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }

    /// Whether `self` and `other` are the same slots (clones of one set).
    pub fn same(&self, other: &RenderSlots) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A platform lease: the record and the guard releasing it.
pub type Lease = (Arc<Generated<BuiltPlatform>>, LeaseGuard);

/// Runs `render` on a blocking thread with the platform of `lease`; the lease and `hold` are
/// dropped when it returns. `Err` is the blocking task's failure (a panic or a cancelled runtime).
pub async fn render_on_lease<T, H, F>(
    lease: Lease,
    hold: H,
    render: F,
) -> Result<T, tokio::task::JoinError>
where
    T: Send + 'static,
    H: Send + 'static,
    F: FnOnce(&BuiltPlatform, SkewPolicy) -> T + Send + 'static,
{
    let (record, guard) = lease;
    tokio::task::spawn_blocking(move || {
        let out = render(&record.platform, record.skew);
        drop(guard);
        drop(hold);
        out
    })
    .await
}

/// Who rendered (the `caller` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A ModuleInstance or ModulePackage reconcile.
    Reconcile,
    /// The REST render API.
    Api,
}

impl Origin {
    fn label(self) -> &'static str {
        match self {
            Origin::Reconcile => "reconcile",
            Origin::Api => "api",
        }
    }
}

/// How a render ended (the `result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenderEnd {
    /// Objects rendered.
    Success,
    /// A kernel error other than a limit.
    Error,
    /// An evaluation limit or deadline, or the caller's time-out.
    Timeout,
}

impl RenderEnd {
    /// The end of a kernel result.
    pub fn of<T>(result: &Result<T, KernelError>) -> Self {
        match result {
            Ok(_) => RenderEnd::Success,
            Err(e) if matches!(e.class, ErrorClass::Timeout | ErrorClass::ResourceExhausted) => {
                RenderEnd::Timeout
            }
            Err(_) => RenderEnd::Error,
        }
    }

    fn label(self) -> &'static str {
        match self {
            RenderEnd::Success => "success",
            RenderEnd::Error => "error",
            RenderEnd::Timeout => "timeout",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RenderLabels {
    caller: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallerLabels {
    caller: &'static str,
}

/// Render buckets in seconds: 5 ms (a small module) to 60 s (past the render time limit).
const RENDER_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0,
];

fn render_histogram() -> Histogram {
    Histogram::new(RENDER_BUCKETS)
}

/// The render series. Cloning shares them.
#[derive(Clone, Debug)]
pub struct RenderMetrics {
    renders: Family<RenderLabels, Counter>,
    durations: Family<CallerLabels, Histogram, fn() -> Histogram>,
}

impl Default for RenderMetrics {
    fn default() -> Self {
        RenderMetrics {
            renders: Family::default(),
            durations: Family::new_with_constructor(render_histogram),
        }
    }
}

impl RenderMetrics {
    /// Registers the families (clones share the series) into `registry`.
    pub fn register_into(&self, registry: &mut Registry) {
        registry.register(
            "opm_render",
            "Renders on a leased platform, by caller and result",
            self.renders.clone(),
        );
        registry.register(
            "opm_render_duration_seconds",
            "Render duration in seconds, by caller",
            self.durations.clone(),
        );
    }

    /// Counts one render of `caller` that ended as `end` after `took`.
    pub fn record(&self, caller: Origin, end: RenderEnd, took: Duration) {
        self.renders
            .get_or_create(&RenderLabels {
                caller: caller.label(),
                result: end.label(),
            })
            .inc();
        self.durations
            .get_or_create(&CallerLabels {
                caller: caller.label(),
            })
            .observe(took.as_secs_f64());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_are_counted_by_caller_and_result() {
        let mut registry = Registry::default();
        let m = RenderMetrics::default();
        m.register_into(&mut registry);
        let timeout: Result<(), KernelError> =
            Err(KernelError::new(ErrorClass::Timeout, "evaluation deadline"));
        let bad: Result<(), KernelError> = Err(KernelError::new(ErrorClass::Values, "bad"));
        m.record(
            Origin::Api,
            RenderEnd::of(&timeout),
            Duration::from_secs(31),
        );
        m.record(
            Origin::Reconcile,
            RenderEnd::of(&bad),
            Duration::from_millis(3),
        );
        m.record(
            Origin::Reconcile,
            RenderEnd::of(&Ok::<(), KernelError>(())),
            Duration::from_millis(30),
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "opm_render_total{caller=\"api\",result=\"timeout\"} 1",
            "opm_render_total{caller=\"reconcile\",result=\"error\"} 1",
            "opm_render_total{caller=\"reconcile\",result=\"success\"} 1",
            "opm_render_duration_seconds_count{caller=\"reconcile\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in {text}");
        }
    }
}
