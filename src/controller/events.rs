//! Event deduplication (operator-spec.md §3.6, §4.2, §7.3; scenario 64; lessons.md §1.3
//! notification-controller#509).
//!
//! Rules implemented here:
//! - Warning events for failures and refusals are emitted once per transition: only when the
//!   prior `Ready` condition was not already `False` with the same reason and the same message.
//!   A changed reason or message emits again.
//! - Event messages are stable strings (no timings, no counters that change per attempt); the
//!   recorder sends exactly the condition message it dedups on.

use crds::conditions::{get, types};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Whether a Warning with `reason`/`message` is a transition from the prior conditions.
pub fn is_transition(prior: &[Condition], reason: &str, message: &str) -> bool {
    match get(prior, types::READY) {
        Some(c) => !(c.status == "False" && c.reason == reason && c.message == message),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::conditions::{mark_stalled, Status};
    use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn now() -> Time {
        Time(Default::default())
    }

    #[test]
    fn a_repeated_failure_emits_once() {
        let mut conds = Vec::new();
        assert!(is_transition(&conds, "BuildFailed", "pin missing"));
        mark_stalled(&mut conds, "BuildFailed", "pin missing", Some(1), &now());
        assert!(!is_transition(&conds, "BuildFailed", "pin missing"));
        // A changed message or reason is a new transition.
        assert!(is_transition(&conds, "BuildFailed", "pin missing: 9.9.9"));
        assert!(is_transition(&conds, "GenerateFailed", "pin missing"));
    }

    #[test]
    fn ready_true_or_unknown_before_a_failure_is_a_transition() {
        let mut conds = Vec::new();
        crds::conditions::set(
            &mut conds,
            types::READY,
            Status::Unknown,
            "BuildFailed",
            "pin missing",
            Some(1),
            &now(),
        );
        assert!(is_transition(&conds, "BuildFailed", "pin missing"));
    }
}
