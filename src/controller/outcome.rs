//! Reconcile outcomes, backoff and failure classification (docs/design/operator.md §2.1, §2.2 phase 1,
//! §3.6; docs/design/decisions.md §1).
//!
//! Rules implemented here:
//! - Five outcomes with stable metric labels: `no_op`, `applied`, `applied_and_pruned`,
//!   `failed_transient`, `failed_stalled`.
//! - Transient failures requeue with backoff `min(5s · 2^(n−1), 5m)` where `n` is the reconcile
//!   failure counter plus one (`n ≤ 1` gives 5 s); stalled failures recheck after 30 minutes;
//!   successes of a ModuleInstance requeue at its `spec.interval` when set and otherwise not (a
//!   ModulePackage requeues at its interval).
//! - Classified failures return a requeue interval, never an error to the controller runtime.
//! - A render error maps to its condition reason by its [`ErrorClass`], never by message text:
//!   PlatformNotReady and transient pulls are `Ready=False` with backoff; skew refusals,
//!   resolution failures, unsupported kinds, a spent memory budget (`MemoryBudgetExceeded`) and
//!   everything else are stalled.
//! - The Platform reconciler requeues network-class build failures after 1 minute and every other
//!   failure (and every inventory refusal) after 30 minutes.

use std::time::Duration;

use crds::conditions::reasons;

use crate::kernel::ErrorClass;

/// Recheck interval of a stalled object (`StalledRecheckInterval`).
pub const STALLED_RECHECK: Duration = Duration::from_secs(30 * 60);

/// Requeue interval of a Platform build failure of the network class.
pub const PLATFORM_NETWORK_RETRY: Duration = Duration::from_secs(60);

/// First transient backoff step.
pub const BACKOFF_BASE: Duration = Duration::from_secs(5);

/// Transient backoff ceiling.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5 * 60);

/// How one reconcile ended (docs/design/operator.md §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Nothing changed.
    NoOp,
    /// Objects were applied.
    Applied,
    /// Objects were applied and stale objects pruned.
    AppliedAndPruned,
    /// A failure that may pass (backoff).
    FailedTransient,
    /// A failure that needs a change (30-minute recheck).
    FailedStalled,
}

impl Outcome {
    /// The `outcome` label of `opm_controller_reconcile_total`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Outcome::NoOp => "no_op",
            Outcome::Applied => "applied",
            Outcome::AppliedAndPruned => "applied_and_pruned",
            Outcome::FailedTransient => "failed_transient",
            Outcome::FailedStalled => "failed_stalled",
        }
    }

    /// True for the two failure outcomes.
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::FailedTransient | Outcome::FailedStalled)
    }
}

/// The transient backoff for reconcile failure counter `counter` (the delay uses `counter + 1`).
pub fn backoff(counter: u32) -> Duration {
    let n = counter.saturating_add(1);
    if n <= 1 {
        return BACKOFF_BASE;
    }
    // 5 s · 2^(n−1) reaches the 5-minute cap at n = 7; stop doubling long before overflow.
    let exp = (n - 1).min(16);
    let secs = BACKOFF_BASE.as_secs().saturating_mul(1u64 << exp);
    Duration::from_secs(secs).min(BACKOFF_MAX)
}

/// The requeue interval after `outcome`; `interval` is the object's own interval (`spec.interval`;
/// `None` for a ModuleInstance without one: no requeue on success).
pub fn requeue_after(
    outcome: Outcome,
    counter: u32,
    interval: Option<Duration>,
) -> Option<Duration> {
    match outcome {
        Outcome::NoOp | Outcome::Applied | Outcome::AppliedAndPruned => interval,
        Outcome::FailedTransient => Some(backoff(counter)),
        Outcome::FailedStalled => Some(STALLED_RECHECK),
    }
}

/// How a render failure is reported (docs/design/operator.md §2.2 phase 1 table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderFailure {
    /// The Ready (and, when stalled, Stalled) condition reason; also the Warning event reason.
    pub reason: &'static str,
    /// The failure outcome.
    pub outcome: Outcome,
}

/// Classifies a kernel error by its class.
pub fn classify_render(class: ErrorClass) -> RenderFailure {
    let (reason, outcome) = match class {
        ErrorClass::PlatformNotReady => (reasons::PLATFORM_NOT_READY, Outcome::FailedTransient),
        ErrorClass::TransientPull => (reasons::RESOLUTION_FAILED, Outcome::FailedTransient),
        ErrorClass::SkewRefused => (reasons::SKEW_REFUSED, Outcome::FailedStalled),
        ErrorClass::Resolution | ErrorClass::Values => {
            (reasons::RESOLUTION_FAILED, Outcome::FailedStalled)
        }
        ErrorClass::UnsupportedKind => (reasons::UNSUPPORTED_KIND, Outcome::FailedStalled),
        ErrorClass::Verification => (reasons::VERIFICATION_FAILED, Outcome::FailedStalled),
        ErrorClass::ResourceExhausted => (reasons::MEMORY_BUDGET_EXCEEDED, Outcome::FailedStalled),
        ErrorClass::Timeout | ErrorClass::Other => (reasons::RENDER_FAILED, Outcome::FailedStalled),
    };
    RenderFailure { reason, outcome }
}

/// The Platform reconciler's requeue after a failure: 1 minute for the network class, otherwise
/// 30 minutes (`None` = an inventory refusal, which carries no error).
pub fn platform_retry(class: Option<ErrorClass>) -> Duration {
    match class {
        Some(ErrorClass::TransientPull) => PLATFORM_NETWORK_RETRY,
        _ => STALLED_RECHECK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_follows_scenario_39() {
        // Counters 0/1/2/… give 5s/10s/20s/…, capped at 5m from counter 6 on (scenario 39).
        let got: Vec<u64> = (0..11).map(|c| backoff(c).as_secs()).collect();
        assert_eq!(got, [5, 10, 20, 40, 80, 160, 300, 300, 300, 300, 300]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn requeue_depends_on_outcome_and_interval() {
        let five_min = Duration::from_secs(300);
        assert_eq!(requeue_after(Outcome::Applied, 3, None), None);
        assert_eq!(
            requeue_after(Outcome::NoOp, 0, Some(five_min)),
            Some(five_min)
        );
        assert_eq!(
            requeue_after(Outcome::FailedTransient, 2, None),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            requeue_after(Outcome::FailedStalled, 0, Some(five_min)),
            Some(STALLED_RECHECK)
        );
    }

    #[test]
    fn metric_labels_are_the_spec_strings() {
        let all = [
            Outcome::NoOp,
            Outcome::Applied,
            Outcome::AppliedAndPruned,
            Outcome::FailedTransient,
            Outcome::FailedStalled,
        ];
        let labels: Vec<_> = all.iter().map(|o| o.metric_label()).collect();
        assert_eq!(
            labels,
            [
                "no_op",
                "applied",
                "applied_and_pruned",
                "failed_transient",
                "failed_stalled"
            ]
        );
        assert_eq!(all.iter().filter(|o| o.is_failure()).count(), 2);
    }

    #[test]
    fn render_errors_classify_by_class() {
        let c = classify_render(ErrorClass::PlatformNotReady);
        assert_eq!(
            (c.reason, c.outcome),
            ("PlatformNotReady", Outcome::FailedTransient)
        );
        let c = classify_render(ErrorClass::TransientPull);
        assert_eq!(
            (c.reason, c.outcome),
            ("ResolutionFailed", Outcome::FailedTransient)
        );
        let c = classify_render(ErrorClass::SkewRefused);
        assert_eq!(
            (c.reason, c.outcome),
            ("SkewRefused", Outcome::FailedStalled)
        );
        let c = classify_render(ErrorClass::Resolution);
        assert_eq!(
            (c.reason, c.outcome),
            ("ResolutionFailed", Outcome::FailedStalled)
        );
        let c = classify_render(ErrorClass::UnsupportedKind);
        assert_eq!(
            (c.reason, c.outcome),
            ("UnsupportedKind", Outcome::FailedStalled)
        );
        let c = classify_render(ErrorClass::Other);
        assert_eq!(
            (c.reason, c.outcome),
            ("RenderFailed", Outcome::FailedStalled)
        );
        let c = classify_render(ErrorClass::ResourceExhausted);
        assert_eq!(
            (c.reason, c.outcome),
            ("MemoryBudgetExceeded", Outcome::FailedStalled)
        );
    }

    #[test]
    fn platform_failures_retry_by_class() {
        assert_eq!(
            platform_retry(Some(ErrorClass::TransientPull)),
            PLATFORM_NETWORK_RETRY
        );
        assert_eq!(
            platform_retry(Some(ErrorClass::Resolution)),
            STALLED_RECHECK
        );
        assert_eq!(platform_retry(None), STALLED_RECHECK);
    }
}
