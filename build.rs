//! Build metadata for `opm-operator --version` and the image labels.
//!
//! Rules:
//! - The commit is `OPM_GIT_COMMIT` when set (a build from a source archive), else what
//!   `git rev-parse HEAD` says in this checkout, else `unknown`.
//! - The build date is `OPM_BUILD_DATE` when set (RFC 3339), else the commit's date, else
//!   `unknown`. Using the commit's date by default keeps two builds of one commit identical;
//!   `scripts/image.sh` passes the same value it writes into the image's
//!   `org.opencontainers.image.created` label.
//! - The script reruns only when those variables or the checked-out commit change, so ordinary
//!   builds pay one `git` call at most.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=OPM_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=OPM_BUILD_DATE");
    // Rerun when HEAD moves: HEAD itself (a checkout) and the ref it points to (a commit).
    for p in ["HEAD", "refs/heads", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", p]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(&["rev-parse", "--git-path", &head_ref]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }

    let commit = std::env::var("OPM_GIT_COMMIT")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let date = std::env::var("OPM_BUILD_DATE")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| git(&["log", "-1", "--format=%cI", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=OPM_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=OPM_BUILD_DATE={date}");
}
