//! Integration tests of the root package: one binary, one module per area.

mod platform_crash;
mod platform_stress;
mod server;
