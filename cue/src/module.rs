//! Access to source files and to CUE modules. `cue` performs no I/O of its own: files come through
//! a [`FileSystem`], dependency modules through a [`Registry`] (render-spec.md §2). The operator's
//! `registry` module implements [`Registry`] over OCI; tests use in-memory implementations.

mod registry;

pub use registry::{FileSystem, FsEntry, FsError, MemFs, ModuleVersion, Registry, RegistryError};
