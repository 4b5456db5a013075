//! Access to source files and to CUE modules. `cue` performs no I/O of its own: files come through
//! a [`FileSystem`], dependency modules through a [`Registry`] (docs/design/render.md §2). The operator's
//! `registry` module implements [`Registry`] over OCI; tests use in-memory implementations.

mod cache;
mod file;
mod fs;
mod load;
mod registry;
mod tidy;

pub use cue_modpath::{path, semver};

pub use cache::ParseCache;
pub use file::{
    check_module_path, parse_module_file, split_major, Dep, ModuleFile, ModuleFileError, SourceKind,
};
pub use fs::{DirFs, OverlayFs};
pub use load::{load, mvs, Instance, LoadError, LoadedBuild, LoadedFile, Target};
pub use path::{
    check_coordinate, check_path, check_path_with_major, parse_coordinate, CoordinateError,
    ModulePathError, PathProblem,
};
pub use registry::{
    FileSystem, FsEntry, FsError, MemFs, MemRegistry, ModuleVersion, Registry, RegistryError,
};
pub use tidy::{select, tidy, ByFetch, ModuleFileSource};
