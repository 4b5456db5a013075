//! Integration tests of the root package: one binary, one folder per area (`apply/`,
//! `controller/`, `platform/`, `registry/`, `server/`), plus the whole-product sessions (`dev`,
//! `e2e`) and the render kernel (`render`).

mod allocator;
mod apply;
mod architecture;
mod chaos;
mod child;
mod cluster;
mod controller;
mod dev;
mod e2e;
mod fairness;
mod install;
mod kubectls;
mod monitoring;
mod platform;
mod registry;
mod render;
mod server;
mod shards;
