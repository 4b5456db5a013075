//! Fairness of renders that run out of a budget (the render on a lease of
//! [`super::render_apply`]): one module that exhausts its memory budget, its step budget or its
//! deadline must not take the workers of every other instance.
//!
//! Rules:
//! - A render *exhausts* when its kernel error has class `ResourceExhausted` (the memory budget,
//!   `--render-memory-limit`) or `Timeout` (steps, depth, the evaluation deadline): it cost a
//!   whole budget, and the same inputs cost it again (evaluation is deterministic).
//! - Per object (`Kind/namespace/name`) the gate remembers the last exhausted render: the
//!   fingerprint of its inputs (what the kind renders: module coordinate and values, or artifact
//!   digest and path; plus the `reconcile.fluxcd.io/requestedAt` annotation, so a requested
//!   reconcile is new input), how many exhausted renders of those inputs followed each other,
//!   when the next may run, and the failure it reported.
//! - Backoff, exponential and capped: after the n-th consecutive exhausted render the next runs
//!   no sooner than `min(30 s · 2^(n−1), 30 min)` later ([`backoff`]). A reconcile before then
//!   with the same inputs (a Platform change, a workload event, a requeue) renders nothing: it
//!   reports the remembered failure again (the status does not change, so nothing is written;
//!   no history entry, no failure count) and requeues for the time left.
//! - One worker at a time: a render of remembered inputs (a retry after its backoff) runs only
//!   while holding the process's one *retry slot*; when another retry holds it, the reconcile
//!   does not wait (a waiting reconcile would hold a worker): it reports the remembered failure
//!   and requeues after [`SLOT_BUSY_REQUEUE`]. So every known-exhausting object together holds
//!   at most one render worker, and the others wait at most one render's time for the workers
//!   the first exhaustion of each took.
//! - Anything else forgets the record: a render of new inputs runs as any other, a success or a
//!   failure of another class ends the exhaustion (its own outcome requeues it), and a deleted
//!   object is forgotten with the rest of what the process kept about it.
//! - Process memory only: after a restart each exhausting object costs one render again.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::kernel::{ErrorClass, KernelError};

/// The first backoff step after an exhausted render.
pub const BACKOFF_BASE: Duration = Duration::from_secs(30);

/// The backoff ceiling.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30 * 60);

/// How soon a retry that found the retry slot taken looks again.
pub const SLOT_BUSY_REQUEUE: Duration = Duration::from_secs(5);

/// The annotation by which a user requests a reconcile (Flux's).
const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// The backoff after `n` consecutive exhausted renders (`n ≥ 1`; 0 counts as 1).
pub fn backoff(n: u32) -> Duration {
    let exp = n.saturating_sub(1).min(16);
    BACKOFF_BASE.saturating_mul(1u32 << exp).min(BACKOFF_MAX)
}

/// Whether a kernel error of `class` exhausted a budget (module docs).
pub fn exhausts(class: ErrorClass) -> bool {
    matches!(class, ErrorClass::ResourceExhausted | ErrorClass::Timeout)
}

/// The fingerprint of a render's inputs: `inputs` (the kind's) and the requested-reconcile
/// annotation of `meta`.
pub fn fingerprint<T: Hash + ?Sized>(inputs: &T, meta: &kube::api::ObjectMeta) -> u64 {
    let mut h = DefaultHasher::new();
    inputs.hash(&mut h);
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(REQUESTED_AT))
        .hash(&mut h);
    h.finish()
}

/// The last exhausted render of one object.
#[derive(Debug, Clone)]
struct Exhausted {
    inputs: u64,
    count: u32,
    not_before: Instant,
    error: KernelError,
}

/// What the gate decides before a render.
#[derive(Debug)]
pub enum Admit {
    /// Render (new inputs: no slot needed).
    Render,
    /// Render holding the retry slot (dropped when the render ends).
    Retry(OwnedSemaphorePermit),
    /// Do not render: report the remembered error again (no history entry, no failure count),
    /// requeued `after` (the wait left, or the busy slot's requeue).
    Wait {
        /// The kernel error of the last render of these inputs.
        error: Box<KernelError>,
        /// When to look again.
        after: Duration,
    },
}

/// The gate of the module docs; cheap to share (one per process, in the context).
#[derive(Debug, Clone)]
pub struct Gate {
    exhausted: Arc<Mutex<HashMap<String, Exhausted>>>,
    slot: Arc<Semaphore>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            exhausted: Arc::default(),
            slot: Arc::new(Semaphore::new(1)),
        }
    }
}

impl Gate {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Exhausted>> {
        self.exhausted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `key` may render `inputs` now (module docs).
    pub fn admit(&self, key: &str, inputs: u64, now: Instant) -> Admit {
        let mut map = self.map();
        let Some(e) = map.get(key) else {
            return Admit::Render;
        };
        if e.inputs != inputs {
            map.remove(key);
            return Admit::Render;
        }
        if now < e.not_before {
            return Admit::Wait {
                error: Box::new(e.error.clone()),
                after: e.not_before - now,
            };
        }
        match self.slot.clone().try_acquire_owned() {
            Ok(permit) => Admit::Retry(permit),
            Err(_) => Admit::Wait {
                error: Box::new(e.error.clone()),
                after: SLOT_BUSY_REQUEUE,
            },
        }
    }

    /// Records how the render of `inputs` by `key` ended: `Some(error)` with its kernel error,
    /// `None` for a success. Returns the backoff of an exhausted render (its failure is requeued
    /// after it); `None` for anything else.
    pub fn ended(
        &self,
        key: &str,
        inputs: u64,
        end: Option<&KernelError>,
        now: Instant,
    ) -> Option<Duration> {
        let mut map = self.map();
        let error = match end {
            Some(e) if exhausts(e.class) => e,
            _ => {
                map.remove(key);
                return None;
            }
        };
        let count = match map.get(key) {
            Some(e) if e.inputs == inputs => e.count.saturating_add(1),
            _ => 1,
        };
        let wait = backoff(count);
        map.insert(
            key.to_owned(),
            Exhausted {
                inputs,
                count,
                not_before: now + wait,
                error: error.clone(),
            },
        );
        Some(wait)
    }

    /// Forgets `key` (the object is gone).
    pub fn forget(&self, key: &str) {
        self.map().remove(key);
    }

    /// How many objects are remembered as exhausting (for tests and the log).
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether no object is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic, reason = "tests")]
    use super::*;

    fn exhausted() -> KernelError {
        KernelError::new(ErrorClass::ResourceExhausted, "budget 512.0 MiB")
    }

    #[test]
    fn the_backoff_doubles_from_thirty_seconds_to_thirty_minutes() {
        let got: Vec<u64> = (0..10).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(got, [30, 30, 60, 120, 240, 480, 960, 1800, 1800, 1800]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn an_exhausted_render_waits_out_its_backoff_then_retries_in_the_one_slot() {
        let gate = Gate::default();
        let t0 = Instant::now();
        assert!(matches!(gate.admit("MI/a/x", 1, t0), Admit::Render));
        let wait = gate.ended("MI/a/x", 1, Some(&exhausted()), t0);
        assert_eq!(wait, Some(BACKOFF_BASE));

        // Before the backoff: no render, the same failure, requeued for the time left.
        let t1 = t0 + Duration::from_secs(10);
        match gate.admit("MI/a/x", 1, t1) {
            Admit::Wait { error, after } => {
                assert_eq!(*error, exhausted());
                assert_eq!(after, Duration::from_secs(20));
            }
            other => panic!("{other:?}"),
        }

        // After it: a retry, holding the slot; a second object's retry meanwhile waits.
        gate.ended("MI/a/y", 7, Some(&exhausted()), t0);
        let t2 = t0 + Duration::from_secs(31);
        let Admit::Retry(permit) = gate.admit("MI/a/x", 1, t2) else {
            panic!("a retry after the backoff")
        };
        match gate.admit("MI/a/y", 7, t2) {
            Admit::Wait { after, .. } => assert_eq!(after, SLOT_BUSY_REQUEUE),
            other => panic!("{other:?}"),
        }
        // The second exhaustion in a row doubles the backoff.
        let wait = gate.ended("MI/a/x", 1, Some(&exhausted()), t2);
        drop(permit);
        assert_eq!(wait, Some(2 * BACKOFF_BASE));
        assert!(matches!(gate.admit("MI/a/y", 7, t2), Admit::Retry(_)));
    }

    #[test]
    fn new_inputs_a_success_or_another_failure_forget_the_exhaustion() {
        let gate = Gate::default();
        let t0 = Instant::now();
        gate.ended("MI/a/x", 1, Some(&exhausted()), t0);
        assert!(matches!(gate.admit("MI/a/x", 2, t0), Admit::Render));
        assert!(gate.is_empty());

        gate.ended("MI/a/x", 1, Some(&exhausted()), t0);
        assert_eq!(gate.ended("MI/a/x", 1, None, t0), None);
        assert!(gate.is_empty());

        gate.ended("MI/a/x", 1, Some(&exhausted()), t0);
        let other = KernelError::new(ErrorClass::Other, "bad");
        let wait = gate.ended("MI/a/x", 1, Some(&other), t0);
        assert_eq!(wait, None, "another failure keeps its own requeue");
        assert!(gate.is_empty());

        gate.ended("MI/a/x", 1, Some(&exhausted()), t0);
        gate.forget("MI/a/x");
        assert!(gate.is_empty());
    }

    #[test]
    fn a_requested_reconcile_is_new_input() {
        let mut meta = kube::api::ObjectMeta::default();
        let before = fingerprint(&("m@v1", "{}"), &meta);
        assert_eq!(before, fingerprint(&("m@v1", "{}"), &meta));
        meta.annotations = Some([(REQUESTED_AT.to_owned(), "now".to_owned())].into());
        assert_ne!(before, fingerprint(&("m@v1", "{}"), &meta));
        assert_ne!(
            before,
            fingerprint(&("m@v2", "{}"), &kube::api::ObjectMeta::default())
        );
    }
}
