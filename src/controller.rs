//! The reconcilers and the frame they share (operator-spec.md §2–§4, §7).
//!
//! This session lands the pure part of the frame: reconcile outcomes, their metric labels and
//! requeue intervals and the classification of kernel errors into condition reasons
//! ([`outcome`]); the Platform contract gate ([`platform_gate`]); the pure verdict steps of the
//! TransformerRegistration reconciler ([`claims`]); event deduplication ([`events`]). The
//! kube-runtime controllers, the status patcher, the event recorder, the manager with leader
//! election and the four reconcilers build on it (issues 15 and 17).

pub mod claims;
pub mod events;
pub mod metrics;
pub mod outcome;
pub mod platform_gate;
