//! Staging a main module with its registry dependencies as one file tree for the evaluator.
//!
//! `cue` resolves imports of the main module's own packages and of vendored packages
//! (`cue.mod/pkg/<import path>`), but not yet through a [`cue::module::Registry`]. Until it does,
//! [`vendor_tree`] bridges: it runs minimal version selection over the main module's deps (`mvs`),
//! fetches every selected module through the registry (verified, cached), and lays each one out
//! under `cue.mod/pkg/<module path without major>/`, leaving out the dependency's own `cue.mod/`.
//!
//! Rules and limits:
//! - The versions are exactly MVS's build list, so the staged tree is what a tidy main module
//!   resolves to.
//! - `cue.mod/pkg` is keyed by path without major, so two majors of one module path in the build
//!   list cannot be staged: that is an error naming both.
//! - The main module's files are kept as they are; a main module that vendors a path itself wins
//!   over nothing: staging refuses to overwrite an existing file.

use std::collections::BTreeMap;

use cue::module::{MemFs, ModuleVersion};

use super::modfile::ModuleFile;
use super::{mvs, version, zipfile, Error, ModuleRegistry};

/// The main module's files plus every dependency of its build list under `cue.mod/pkg/`.
/// Returns the tree and the build list (`path@vN` → version).
pub fn vendor_tree(
    reg: &ModuleRegistry,
    main_files: &[(String, Vec<u8>)],
) -> Result<(MemFs, BTreeMap<String, String>), Error> {
    let mf_bytes = main_files
        .iter()
        .find(|(p, _)| p == zipfile::MODULE_FILE)
        .map(|(_, b)| b.as_slice())
        .ok_or_else(|| Error::ModuleFile {
            path: zipfile::MODULE_FILE.into(),
            message: "missing from the main module".into(),
        })?;
    let main = ModuleFile::parse(mf_bytes).map_err(|message| Error::ModuleFile {
        path: zipfile::MODULE_FILE.into(),
        message,
    })?;
    let build_list = mvs::select(&main, reg)?;
    let mut tree: BTreeMap<String, Vec<u8>> = main_files.iter().cloned().collect();
    let mut bases: BTreeMap<String, String> = BTreeMap::new();
    for (path, v) in &build_list {
        let (base, _) = version::split_major(path).map_err(Error::Usage)?;
        if let Some(other) = bases.insert(base.to_string(), path.clone()) {
            return Err(Error::Usage(format!(
                "cannot stage both {other} and {path} under cue.mod/pkg/{base}"
            )));
        }
        let m = ModuleVersion {
            path: path.clone(),
            version: v.clone(),
        };
        let fetched = reg.fetch_module(&m)?;
        for (file, data) in &fetched.files {
            if file.starts_with("cue.mod/") {
                continue;
            }
            let target = format!("cue.mod/pkg/{base}/{file}");
            if tree.contains_key(&target) {
                return Err(Error::Usage(format!(
                    "{target} already exists in the main module"
                )));
            }
            tree.insert(target, data.clone());
        }
    }
    let mut fs = MemFs::new();
    for (p, d) in tree {
        fs.insert(p, d);
    }
    Ok((fs, build_list))
}
