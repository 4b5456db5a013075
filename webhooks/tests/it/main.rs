//! Integration tests of the webhooks crate (fixture table).
