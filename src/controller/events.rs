//! Event deduplication (docs/design/operator.md §3.6, §4.2, §7.3; scenario 64; docs/design/principles.md §1.3
//! notification-controller#509).
//!
//! Rules implemented here:
//! - An event about the `Ready` condition is emitted once per transition: only when `Ready` as
//!   written differs from `Ready` as read in status, reason or message ([`ready_changed`]; the
//!   reconcile frame applies it to every end, `super::reconcile`). For a failure this is: the
//!   prior `Ready` was not already `False` with the same reason and the same message; a changed
//!   reason or message emits again.
//! - Event messages are stable strings (no timings, no counters that change per attempt); the
//!   recorder sends exactly the condition message it dedups on.

use crds::conditions::{get, types};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Whether `Ready` in `now` differs from `Ready` in `prior` (status, reason or message).
pub fn ready_changed(prior: &[Condition], now: &[Condition]) -> bool {
    ready_of(prior) != ready_of(now)
}

fn ready_of(conds: &[Condition]) -> Option<(&str, &str, &str)> {
    get(conds, types::READY).map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::conditions::{mark_stalled, Status};
    use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn now() -> Time {
        Time(Default::default())
    }

    /// Whether marking a failure `reason`/`message` over `prior` changes Ready (the frame's rule
    /// for a failure's Warning).
    fn is_transition(prior: &[Condition], reason: &str, message: &str) -> bool {
        let mut after = prior.to_vec();
        mark_stalled(&mut after, reason, message, Some(1), &now());
        ready_changed(prior, &after)
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

    #[test]
    fn ready_changes_when_its_status_reason_or_message_does() {
        let mut prior = Vec::new();
        let mut after = Vec::new();
        assert!(!ready_changed(&prior, &after), "no Ready before or after");
        mark_stalled(&mut after, "BuildFailed", "pin missing", Some(1), &now());
        assert!(ready_changed(&prior, &after), "first Ready");
        mark_stalled(&mut prior, "BuildFailed", "pin missing", Some(1), &now());
        assert!(!ready_changed(&prior, &after), "the same failure again");
        crds::conditions::mark_ready(&mut after, "Generated", "pin missing", Some(1), &now());
        assert!(ready_changed(&prior, &after), "False to True");
    }
}
