//! Crash safety of the platform layout through its public fault-injection seam
//! (`platform::fs::FileSystem`): a write failing at any step, or dying for good from any step on,
//! leaves no new `gen-…` directory and the previous package intact; `reset` at the next boot then
//! leaves an empty root.

// Test helpers outside #[test] functions may unwrap: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use opm_operator::platform::fs::{EntryKind, FileSystem, RealFs};
use opm_operator::platform::{Layout, PackageIdentity};

/// Fails call `fail_at` (and every later one when `persistent`).
struct Faulty {
    calls: AtomicUsize,
    fail_at: usize,
    persistent: bool,
}

impl Faulty {
    fn new(fail_at: usize, persistent: bool) -> Self {
        Self {
            calls: AtomicUsize::new(0),
            fail_at,
            persistent,
        }
    }

    fn step(&self) -> io::Result<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n == self.fail_at || (self.persistent && n > self.fail_at) {
            return Err(io::Error::other(format!("injected failure at step {n}")));
        }
        Ok(())
    }
}

impl FileSystem for Faulty {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        RealFs.create_dir_all(path)
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        RealFs.create_dir(path)
    }
    fn write_new_file(&self, path: &Path, contents: &[u8]) -> io::Result<()> {
        self.step()?;
        RealFs.write_new_file(path, contents)
    }
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.step()?;
        RealFs.read_file(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        RealFs.sync_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.step()?;
        RealFs.rename(from, to)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        RealFs.remove_dir_all(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        RealFs.remove_file(path)
    }
    fn entry_kind(&self, path: &Path) -> io::Result<EntryKind> {
        self.step()?;
        RealFs.entry_kind(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, EntryKind)>> {
        self.step()?;
        RealFs.read_dir(path)
    }
}

fn files(tag: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "cue.mod/module.cue",
            format!("module: \"x@v0\" // {tag}\n").into_bytes(),
        ),
        (
            "platform.cue",
            format!("package platform // {tag}\n").into_bytes(),
        ),
    ]
}

fn names(root: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    out.sort();
    out
}

#[test]
fn platform_crash_new_identity_failing_at_any_step_keeps_only_the_previous_package() {
    let previous = PackageIdentity::unclaimed(1).unwrap();
    let next = PackageIdentity::new(1, [("opmodel.dev/catalogs/a", "1.0.0")]).unwrap();
    let mut failures = 0;
    for persistent in [false, true] {
        for n in 0.. {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("platform");
            let plain = Layout::new(&root).unwrap();
            plain.write(&previous, &files("old")).unwrap();
            let faulty = Arc::new(Faulty::new(n, persistent));
            let layout = Layout::with_fs(&root, faulty.clone()).unwrap();
            let at = format!("step {n} persistent={persistent}");
            let result = layout.write(&next, &files("new"));
            let injected = faulty.calls.load(Ordering::SeqCst) > n;
            match result {
                Ok(dir) => {
                    // Only the root sync after the install rename is allowed to fail (best effort).
                    assert_eq!(
                        std::fs::read(dir.join("platform.cue")).unwrap(),
                        files("new")[1].1
                    );
                }
                Err(e) => {
                    assert!(injected, "{at}: {e}");
                    failures += 1;
                    assert_eq!(plain.packages().unwrap(), vec![previous], "{at}");
                    assert!(!root.join(next.to_string()).exists(), "{at}");
                }
            }
            assert_eq!(
                std::fs::read(root.join("gen-1/platform.cue")).unwrap(),
                files("old")[1].1,
                "{at}"
            );
            // The next boot: reset leaves an empty root whatever the crash left.
            plain.reset().unwrap();
            assert_eq!(names(&root), Vec::<String>::new(), "{at}");
            if !injected {
                break;
            }
        }
    }
    assert!(
        failures >= 16,
        "every step before the install was exercised: {failures}"
    );
}
