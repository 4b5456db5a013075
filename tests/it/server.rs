//! Integration tests of `opm-operator serve`: the real listeners on loopback, real TLS (a test CA
//! made with rcgen, a rustls client), the webhooks crate's admission logic behind the router.
//!
//! Every request has a bounded client timeout and every wait polls with a deadline: a hang fails
//! the test instead of stalling CI.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod binary;
mod common;
mod deadlines;
mod fixtures;
mod openapi;
mod probes;
mod render_api;
mod reviews;
mod rotation;
mod schemathesis;
mod shutdown;
