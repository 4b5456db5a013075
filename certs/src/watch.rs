//! The reload loop: file events plus a polling fallback.
//!
//! Rules:
//! - The loop watches the *directories* of the TLS files (non-recursively), because a Kubernetes
//!   Secret volume replaces files by swapping the `..data` symlink: the watched file paths never get
//!   an event of their own.
//! - Independently of events it checks every `poll` interval, so a missed or unsupported event
//!   (network file systems, inotify limits) only delays a reload. If the watcher cannot be set up at
//!   all, polling alone runs.
//! - Access events (opening or reading a file, including this loop's own reads) are ignored; only
//!   creations, modifications, removals and renames wake the loop.
//! - Each wake-up calls [`CertStore::reload_if_changed`] inside `catch_unwind`: the loop survives
//!   anything and ends only when the [`Watcher`] handle is dropped.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher as _;

use crate::store::{CertStore, ReloadOutcome};
use crate::{Error, Result};

/// The default polling interval of the fallback check.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);

enum Msg {
    Changed,
    Stop,
}

/// Keeps the reload loop alive; dropping it stops the loop.
pub struct Watcher {
    tx: mpsc::Sender<Msg>,
    _fs: Option<notify::RecommendedWatcher>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("fs_events", &self._fs.is_some())
            .finish_non_exhaustive()
    }
}

impl Watcher {
    /// Whether file-system events are in use (false: polling only).
    pub fn has_fs_events(&self) -> bool {
        self._fs.is_some()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Sending fails only when the thread already ended, which is what we want anyway.
        let _ = self.tx.send(Msg::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn fs_watcher(store: &CertStore, tx: mpsc::Sender<Msg>) -> Result<notify::RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Our own reads of the files raise open/access events; only changes may wake the loop,
        // or every check would trigger the next one.
        if let Ok(event) = event {
            if !matches!(event.kind, notify::EventKind::Access(_)) {
                let _ = tx.send(Msg::Changed);
            }
        }
    })
    .map_err(|source| Error::Watch {
        path: ".".into(),
        source,
    })?;
    for dir in store.paths().dirs() {
        watcher
            .watch(&dir, notify::RecursiveMode::NonRecursive)
            .map_err(|source| Error::Watch { path: dir, source })?;
    }
    Ok(watcher)
}

fn check(store: &CertStore) {
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.reload_if_changed()));
    match outcome {
        Ok(ReloadOutcome::Unchanged) => {}
        Ok(ReloadOutcome::Reloaded(info)) => tracing::info!(
            serial = %info.serial,
            sans = ?info.sans,
            not_after = info.not_after_unix,
            "reloaded the TLS certificate"
        ),
        Ok(ReloadOutcome::Rejected(error)) => tracing::warn!(
            %error,
            "rejected new TLS files; still serving the previous certificate"
        ),
        Err(_) => {
            tracing::error!("the TLS reload check panicked; still serving the previous certificate")
        }
    }
}

/// Starts the reload loop for `store`, checking on file events and every `poll`.
pub fn watch(store: Arc<CertStore>, poll: Duration) -> Result<Watcher> {
    let (tx, rx) = mpsc::channel();
    let fs = match fs_watcher(&store, tx.clone()) {
        Ok(w) => Some(w),
        Err(error) => {
            tracing::warn!(%error, "file events unavailable; polling the TLS files only");
            None
        }
    };
    let thread = std::thread::Builder::new()
        .name("cert-reload".into())
        .spawn(move || loop {
            match rx.recv_timeout(poll) {
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Msg::Changed) => {
                    // Coalesce a burst of events (a symlink swap emits several) into one check.
                    while let Ok(msg) = rx.try_recv() {
                        if matches!(msg, Msg::Stop) {
                            return;
                        }
                    }
                    check(&store);
                }
                Err(RecvTimeoutError::Timeout) => check(&store),
            }
        })
        .map_err(Error::Spawn)?;
    Ok(Watcher {
        tx,
        _fs: fs,
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TlsPaths;
    use std::path::Path;
    use std::time::Instant;

    /// Writes a Secret-volume-like layout: `<dir>/..<ts>/tls.*`, `..data -> ..<ts>`,
    /// `tls.crt -> ..data/tls.crt`.
    fn secret_layout(dir: &Path, version: &str, sans: &[&str]) {
        let ck = rcgen::generate_simple_self_signed(
            sans.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        let data = dir.join(format!("..{version}"));
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("tls.crt"), ck.cert.pem()).unwrap();
        std::fs::write(data.join("tls.key"), ck.signing_key.serialize_pem()).unwrap();
        let tmp = dir.join("..data_tmp");
        std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("..data")).unwrap();
        for f in ["tls.crt", "tls.key"] {
            if !dir.join(f).exists() {
                std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
            }
        }
    }

    fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }

    #[test]
    fn symlink_swap_is_picked_up_by_events_or_polling() {
        let dir = tempfile::tempdir().unwrap();
        secret_layout(dir.path(), "1", &["one.example"]);
        let store = CertStore::load(TlsPaths {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        })
        .unwrap();
        let _w = watch(store.clone(), Duration::from_millis(200)).unwrap();
        secret_layout(dir.path(), "2", &["two.example"]);
        wait_for("the swapped cert", || store.info().sans == ["two.example"]);
        assert_eq!(store.metrics().reload_success(), 1);
    }

    #[test]
    fn own_reads_do_not_wake_the_loop() {
        // Plain files in the watched directory (not a Secret layout, whose reads resolve into an
        // unwatched `..<ts>` subdirectory): each read raises an open event there.
        let dir = tempfile::tempdir().unwrap();
        let ck = rcgen::generate_simple_self_signed(vec!["one.example".to_string()]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), ck.cert.pem()).unwrap();
        std::fs::write(dir.path().join("tls.key"), ck.signing_key.serialize_pem()).unwrap();
        let store = CertStore::load(TlsPaths {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        })
        .unwrap();
        let w = watch(store.clone(), Duration::from_secs(60)).unwrap();
        assert!(
            w.has_fs_events(),
            "inotify is available on the test machines"
        );
        // Wake the loop once with a change that does not alter the pair.
        std::fs::write(dir.path().join("unrelated"), b"x").unwrap();
        wait_for("one check", || store.metrics().checks() >= 1);
        let after_wake = store.metrics().checks();
        let quiet_until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < quiet_until {
            std::thread::park_timeout(Duration::from_millis(20));
        }
        assert!(
            store.metrics().checks() <= after_wake + 1,
            "the loop keeps waking itself: {} checks",
            store.metrics().checks()
        );
    }

    #[test]
    fn polling_alone_reloads() {
        let dir = tempfile::tempdir().unwrap();
        secret_layout(dir.path(), "1", &["one.example"]);
        let store = CertStore::load(TlsPaths {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        })
        .unwrap();
        // Drive the loop without a file watcher, as when inotify is unavailable.
        let (tx, rx) = mpsc::channel::<Msg>();
        let s = store.clone();
        let t = std::thread::spawn(move || loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                _ => check(&s),
            }
        });
        secret_layout(dir.path(), "2", &["two.example"]);
        wait_for("the polled cert", || store.info().sans == ["two.example"]);
        tx.send(Msg::Stop).unwrap();
        t.join().unwrap();
    }
}
