//! Who waits for whom (issue 40, `dependsOn`): a reconcile blocked on another object registers
//! itself here, and the frame wakes it when that object's status is written, its finalizers
//! change or it is found gone, so a dependency becoming ready wakes its dependents at once
//! instead of at their next requeue (`--requeue-dependency`, which stays as the fallback: a
//! dependency reconciled by another process, e.g. another shard, is seen only then).
//!
//! Rules:
//! - [`Waiters::wait`] records that `waiter` (kind, namespace, name) waits for `target`; a
//!   waiter is woken once per registration (the registration is consumed by [`Waiters::wake`]).
//! - [`Waiters::wake`] sends every waiter of `target` to the subscribers ([`Waiters::subscribe`],
//!   the controllers); nothing is sent, and nothing costs more than one map lookup, when nobody
//!   waits. A subscriber that lags behind loses wake-ups (the requeue covers them).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use tokio::sync::broadcast;

/// An object: (kind, namespace, name).
pub type Key = (String, String, String);

/// How many wake-ups a slow subscriber may fall behind before it loses some.
const CAPACITY: usize = 4096;

/// The waiting registry of one process (module rules).
#[derive(Debug)]
pub struct Waiters {
    waiting: Mutex<HashMap<Key, BTreeSet<Key>>>,
    tx: broadcast::Sender<Key>,
}

impl Default for Waiters {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        Waiters {
            waiting: Mutex::new(HashMap::new()),
            tx,
        }
    }
}

/// `(kind, namespace, name)` as a [`Key`].
pub fn key(kind: &str, namespace: &str, name: &str) -> Key {
    (kind.to_owned(), namespace.to_owned(), name.to_owned())
}

impl Waiters {
    /// `waiter` waits for `target`.
    pub fn wait(&self, target: Key, waiter: Key) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(target)
            .or_default()
            .insert(waiter);
    }

    /// Wakes the waiters of `target` (module rules).
    pub fn wake(&self, kind: &str, namespace: &str, name: &str) {
        let woken = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            if waiting.is_empty() {
                return;
            }
            waiting.remove(&key(kind, namespace, name))
        };
        for w in woken.into_iter().flatten() {
            // No subscriber: nobody to wake (the requeue still comes).
            let _ = self.tx.send(w);
        }
    }

    /// The wake-ups, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Key> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_waiter_is_woken_once_by_its_target_only() {
        let w = Waiters::default();
        let mut rx = w.subscribe();
        w.wait(key("MI", "a", "db"), key("MI", "a", "web"));
        w.wake("MI", "a", "other");
        assert!(rx.try_recv().is_err());
        w.wake("MI", "a", "db");
        assert_eq!(rx.try_recv().unwrap(), key("MI", "a", "web"));
        w.wake("MI", "a", "db");
        assert!(rx.try_recv().is_err(), "consumed");
    }
}
