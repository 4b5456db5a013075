//! Integration tests of the root package: one binary, one module per area.

mod apply;
mod apply_faults;
mod apply_prune;
mod artifact;
mod controller;
mod dev;
mod e2e;
mod platform_crash;
mod platform_gen;
mod platform_stress;
mod registry;
mod registry_auth;
mod registry_bad;
mod registry_cache;
mod registry_export;
mod render;
mod server;
