//! opm-operator: the Open Platform Model operator.
//!
//! Architecture invariants (DESIGN.md §2–3):
//! - This root package is the only crate with tokio/axum/kube-runtime; leaf crates (`cue`, `crds`,
//!   `webhooks`, `certs`) stay free of the async runtime.
//! - Every CUE evaluation goes through `cue`; values enter builds as data, never as spliced CUE text.
//! - `platform` owns the process-local platform store and its on-disk layout.
//! - `registry` implements `cue::module::Registry` over OCI registries and OCI layout directories.
//! - `server` hosts the admission webhooks, probes and metrics.
//! - `controller` holds the reconcilers and the frame they share.
//! - `apply` is the apply engine: staged SSA, safe prune, deletion, drift, health, impersonation.
//! - `artifact` downloads, verifies and safely extracts Flux source artifacts (ModulePackage).
//! - `inventory` holds the inventory model, the stale set and the reconcile digests.
//! - `dev` is `opm-operator dev`: kube-emu plus the `serve` wiring on one machine.
//! - `kernel` is the seam between the render kernel and its callers (reconcilers, REST API, CLI).

pub mod apply;
pub mod artifact;
pub mod controller;
pub mod dev;
pub mod inventory;
pub mod kernel;
pub mod platform;
pub mod registry;
pub mod render;
pub mod server;
