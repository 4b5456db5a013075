//! Integration tests of the root package: one binary, one module per area.

mod server;
