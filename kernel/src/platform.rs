//! The platform store and its on-disk layout (docs/design/operator.md §5, keyed per §5.4 / docs/design/architecture.md §3
//! "Platform store lease key").
//!
//! The Platform reconciler generates a CUE platform package, writes it under `--platform-dir` with
//! [`Layout`], builds it, and records it in the process-local [`Store`]. Renders (and the
//! TransformerRegistration reconciler) [`Store::lease`] the current record and read its directory.
//!
//! # Generation and build (docs/design/operator.md §3.3–§3.5, §4.1)
//! [`closure`] computes the platform module's dependency closure over published module files,
//! [`generate`] writes the deterministic `cue.mod/module.cue` + `platform.cue`, [`build`] loads
//! the written package (shape-gated) and reads the contract inventory that [`contracts`]
//! computes; [`PlatformKernel`] implements `kernel::PlatformBuilder` and
//! `kernel::CatalogAcquirer` over them.
//!
//! # Keys
//! Everything is keyed on [`PackageIdentity`] — `(generation, active-claims digest)`, written
//! `gen-<N>` or `gen-<N>-<16 hex>` — never on the generation alone. A claim activating at an
//! unchanged Platform generation therefore yields a new identity, a new directory beside the old one
//! and a new store key, so it can never pull a directory from under a render (the hazard of docs/design/operator.md §5.3).
//!
//! # What a reader may assume
//! - While it holds a lease (from [`Store::lease`] until the [`LeaseGuard`] is released or dropped),
//!   the leased record's directory exists and is complete: every file was written and fsynced in a
//!   staging directory before one atomic rename made it visible, and no `prune` removes a pinned
//!   package. The record itself is an immutable snapshot (`Arc<Generated<P>>`).
//! - A `gen-…` directory is always complete; dot-prefixed entries are never packages.
//!
//! # What prune may delete, and when
//! [`Layout::prune`] deletes every root entry that is not `gen-<k>` for `k` in its `keep` list or
//! pinned by its [`LeaseView`]; passing the [`Store`] pins the current record and every leased
//! package, checked entry by entry at deletion time. A package leased now is removed by the first
//! prune after its last release. Failed builds never prune. [`Layout::reset`] (boot only, before any
//! lease exists) deletes everything.
//!
//! # Caller duties (the Platform reconciler)
//! - Write (`ensure`) the package before `set_generated` records it, and never run `set_generated`
//!   concurrently with `prune` (the controller runs one reconcile of `cluster` at a time).
//! - Use [`Layout::ensure`] rather than [`Layout::write`] when regenerating: a byte-identical
//!   package on disk (possibly leased) is then left untouched instead of being swapped via move-aside.
//!   Identity keying alone does not cover an identity that recurs (a claim toggled off and on at one
//!   generation while a render still leases the older package): `write` would make that leased
//!   directory briefly absent, which the stress test observes as renders failing to read it.
//! - Run layout operations in `spawn_blocking`: they are synchronous `std::fs` calls.

pub mod build;
pub mod closure;
pub mod contracts;
mod error;
pub mod fs;
pub mod generate;
mod identity;
mod layout;
mod store;

pub use build::{from_dir, PlatformKernel, PlatformRegistry};
pub use error::{Error, PruneFailure};
pub use generate::{Generator, RegistryShape};
pub use identity::PackageIdentity;
pub use layout::{Ensured, Layout};
pub use store::{Generated, LeaseGuard, LeaseView, LeasedPackage, NoLeases, Store};
