//! opm-operator: the Open Platform Model operator.
//!
//! Architecture invariants (docs/design/architecture.md §2–§3):
//! - Crates by dependency weight: `cue` (the evaluator), `crds` (types), `webhooks` (pure admission
//!   logic), `certs`, `opm-kernel` (the synchronous render kernel: seam, render, platform
//!   generation/build/store/layout, inventory; no tokio, kube or axum), `opm-registry` (the OCI module
//!   registry client and Flux artifacts; tokio only inside the client). This root package is the only
//!   one with axum and kube-runtime, and nothing depends on it.
//! - Every CUE evaluation goes through `cue`; values enter builds as data, never as spliced CUE text.
//! - The kernel's and the registry's modules are re-exported here under their former paths
//!   ([`kernel`], [`render`], [`platform`], [`inventory`], [`registry`]) so the operator reads one
//!   namespace; the arrows still point down (kernel → cue, crds; never up into this crate).
//! - `server` hosts the admission webhooks, the REST render API, probes and metrics.
//! - `controller` holds the reconcilers and the runtime they share.
//! - `render_lease` is the one "render on a leased platform" entry (render API and reconcilers).
//! - `apply` is the apply engine: staged SSA, safe prune, deletion, drift, health, impersonation.
//! - `values_from` reads, merges and redacts the values of Secrets and ConfigMaps (reconciler and
//!   render API).
//! - `cmd` is the composition root: `serve`, `dev` (kube-emu plus the `serve` wiring on one
//!   machine), `render`, `module`.

pub mod apply;
pub mod cmd;
pub mod controller;
pub mod render_lease;
pub mod server;
pub mod values_from;

/// `--version`: the package version, the git commit and the build date (`build.rs`: the commit's
/// date unless `OPM_BUILD_DATE` says otherwise). The image's OCI labels carry the same values.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("OPM_GIT_COMMIT"),
    ", built ",
    env!("OPM_BUILD_DATE"),
    ")"
);

/// The allocator of every binary that links this crate (the operator, its tests and benches;
/// feature `jemalloc`, on by default, off for the fuzz targets):
/// jemalloc instead of the C library's malloc. An evaluation is mostly small allocations that live
/// exactly as long as the render (vertices, arc lists, environments): with glibc, `malloc`/`free`
/// were over a quarter of a 129-component render's instructions, jemalloc takes the render from
/// 959 M to 822 M instructions at the same peak memory (47 → 48 MiB; `benches/render.rs`).
/// mimalloc was as fast but doubled the peak (103 MiB), glibc's larger tcache gained less and cannot
/// be set from code. Its options are built in from `.cargo/config.toml` (a 300 ms decay and one
/// arena for all threads; why, there) and checked by `tests/it/allocator.rs`.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The git commit this binary was built from (`unknown` outside a checkout).
pub const GIT_COMMIT: &str = env!("OPM_GIT_COMMIT");

pub use opm_kernel as kernel;
pub use opm_kernel::{inventory, platform, render};
pub use opm_registry as registry;
