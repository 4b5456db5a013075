//! Controller tests (issue 15): the Platform and TransformerRegistration reconcilers, their
//! watches, leader election and restart recovery, and the ModuleInstance reconciler (issue 17),
//! against kube-emu with fake kernel seams; sharded replicas (issue 32).

pub(crate) mod common;
mod gitops;
mod health;
mod health_exprs;
mod instance;
mod instance_real;
mod instance_scenarios;
mod manager;
mod ownership;
mod package;
mod package_real;
mod package_serve;
mod platform;
mod platform_real;
mod platform_serve;
mod policies;
mod race;
mod real;
mod registration;
mod remote;
mod remote_real;
mod rendered;
mod requested;
mod serve;
mod shard;
mod signed;
