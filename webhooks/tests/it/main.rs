//! Integration tests of the webhooks crate. One binary, modules per topic:
//! - `fixtures`: the table of AdmissionReview fixtures under `tests/fixtures/` (indexed by
//!   `cases.json`, which the server track reuses over TLS);
//! - `api`: response shape (uid echo, type meta, status code), dispatch by route, error bodies;
//! - `deploy`: the manifests under `deploy/` and their invariants.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod api;
mod deploy;
mod fixtures;
