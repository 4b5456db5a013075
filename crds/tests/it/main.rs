//! Integration tests of the crds crate: the checked-in CRD YAML matches the types, and the
//! generated schemas carry the invariants of docs/design/operator.md §1. One binary, modules per topic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod citations;
mod drift;
mod reasons;
mod reference;
mod schema;
