//! The platform store (docs/design/operator.md §5.1, keyed per §5.4): one slot holding the current
//! generated platform record, plus lease counts per package identity.
//!
//! Rules implemented here:
//! - One mutex guards the record and the lease counts together, so `lease` reads the record and
//!   counts the lease in one step: once `set_generated` or `clear` returns, every lease of the
//!   replaced record is already counted (and visible to `leased`), and every later lease gets the
//!   new record (or none).
//! - A lease can only ever be taken on the *current* record. A package that is neither current nor
//!   leased can therefore only become leased again if `set_generated` installs it again.
//! - `set_generated` and `clear` never touch lease counts: renders holding a lease keep reading.
//! - Each lease is released exactly once: by `LeaseGuard::release` (idempotent) or by dropping the
//!   guard. A second release is a no-op and can never drop another holder's lease, even for the same
//!   identity. The count entry is deleted when its last lease is released.
//! - Critical sections only touch in-memory maps (no I/O, nothing that panics), so a poisoned mutex
//!   still holds consistent state and is recovered rather than propagated.
//!
//! Callers: render paths and the TransformerRegistration reconciler `lease`; the Platform
//! reconciler `set_generated`/`leased`/`clear`, and `Layout::prune` asks the store which packages
//! are pinned (see [`LeaseView`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::PackageIdentity;
use crate::SkewPolicy;

/// The record of one generated and built platform package.
///
/// `P` is the built platform value's handle (the CUE value type, typically behind an `Arc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated<P> {
    /// The package identity (dir name, lease key, store key).
    pub identity: PackageIdentity,
    /// The package directory (`Layout::dir(identity)`).
    pub dir: PathBuf,
    /// The built platform.
    pub platform: P,
    /// The resolved skew policy.
    pub skew: SkewPolicy,
}

impl<P> Generated<P> {
    /// The Platform generation the package was generated for.
    pub fn generation(&self) -> i64 {
        self.identity.generation()
    }
}

/// A package with outstanding leases, as listed by [`Store::leased`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedPackage {
    /// The leased identity.
    pub identity: PackageIdentity,
    /// The directory recorded by its first outstanding lease.
    pub dir: PathBuf,
    /// The number of outstanding leases (always > 0).
    pub count: usize,
}

/// Answers whether a package directory must survive a prune.
pub trait LeaseView {
    /// True when `identity` is the current record or has outstanding leases.
    fn is_pinned(&self, identity: &PackageIdentity) -> bool;
}

/// A [`LeaseView`] pinning nothing (boot-time reset, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLeases;

impl LeaseView for NoLeases {
    fn is_pinned(&self, _identity: &PackageIdentity) -> bool {
        false
    }
}

struct State<P> {
    record: Option<Arc<Generated<P>>>,
    leases: BTreeMap<PackageIdentity, LeaseCount>,
}

struct LeaseCount {
    dir: PathBuf,
    count: usize,
}

struct Inner<P> {
    state: Mutex<State<P>>,
}

impl<P> Inner<P> {
    fn lock(&self) -> MutexGuard<'_, State<P>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The type-erased side of the store a [`LeaseGuard`] releases into.
trait Release: Send + Sync {
    fn release(&self, identity: &PackageIdentity);
}

impl<P: Send + Sync> Release for Inner<P> {
    fn release(&self, identity: &PackageIdentity) {
        let mut state = self.lock();
        if let Some(entry) = state.leases.get_mut(identity) {
            entry.count = entry.count.saturating_sub(1);
            if entry.count == 0 {
                state.leases.remove(identity);
            }
        }
    }
}

/// The process-local platform store. Cloning gives another handle to the same store.
pub struct Store<P> {
    inner: Arc<Inner<P>>,
}

impl<P> Clone for Store<P> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<P> fmt::Debug for Store<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("Store")
            .field("identity", &state.record.as_ref().map(|r| r.identity))
            .field("leased", &state.leases.len())
            .finish()
    }
}

impl<P: Send + Sync + 'static> Default for Store<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Send + Sync + 'static> Store<P> {
    /// An empty store: no record, generation 0, no leases.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    record: None,
                    leases: BTreeMap::new(),
                }),
            }),
        }
    }

    /// Replaces the record and returns the replaced one. Leases on the replaced record are untouched.
    pub fn set_generated(&self, record: Generated<P>) -> Option<Arc<Generated<P>>> {
        self.inner.lock().record.replace(Arc::new(record))
    }

    /// The current record (a shared immutable snapshot), if any.
    pub fn generated(&self) -> Option<Arc<Generated<P>>> {
        self.inner.lock().record.clone()
    }

    /// The current record's generation, or 0 when none is held.
    pub fn generation(&self) -> i64 {
        self.inner
            .lock()
            .record
            .as_ref()
            .map_or(0, |r| r.generation())
    }

    /// The current record's identity, if any.
    pub fn identity(&self) -> Option<PackageIdentity> {
        self.inner.lock().record.as_ref().map(|r| r.identity)
    }

    /// Leases the current record: `None` when no record is held, else the record and a guard that
    /// releases the lease once (explicitly or on drop).
    pub fn lease(&self) -> Option<(Arc<Generated<P>>, LeaseGuard)> {
        let mut state = self.inner.lock();
        let record = Arc::clone(state.record.as_ref()?);
        state
            .leases
            .entry(record.identity)
            .and_modify(|e| e.count = e.count.saturating_add(1))
            .or_insert_with(|| LeaseCount {
                dir: record.dir.clone(),
                count: 1,
            });
        drop(state);
        let sink: Arc<dyn Release> = self.inner.clone();
        let guard = LeaseGuard {
            held: Some((sink, record.identity)),
        };
        Some((record, guard))
    }

    /// The packages with outstanding leases, ascending by identity.
    pub fn leased(&self) -> Vec<LeasedPackage> {
        self.inner
            .lock()
            .leases
            .iter()
            .map(|(identity, e)| LeasedPackage {
                identity: *identity,
                dir: e.dir.clone(),
                count: e.count,
            })
            .collect()
    }

    /// The prune keep-set: the current record's identity and every leased identity, ascending and
    /// read in one step.
    pub fn pinned(&self) -> Vec<PackageIdentity> {
        let state = self.inner.lock();
        let mut out: Vec<_> = state.leases.keys().copied().collect();
        if let Some(r) = &state.record {
            if let Err(at) = out.binary_search(&r.identity) {
                out.insert(at, r.identity);
            }
        }
        out
    }

    /// Drops the record (generation becomes 0) and returns it. Leases are kept.
    pub fn clear(&self) -> Option<Arc<Generated<P>>> {
        self.inner.lock().record.take()
    }
}

impl<P: Send + Sync + 'static> LeaseView for Store<P> {
    fn is_pinned(&self, identity: &PackageIdentity) -> bool {
        let state = self.inner.lock();
        state.leases.contains_key(identity)
            || state
                .record
                .as_ref()
                .is_some_and(|r| r.identity == *identity)
    }
}

/// Releases one lease exactly once: on [`LeaseGuard::release`] or on drop, whichever comes first.
pub struct LeaseGuard {
    held: Option<(Arc<dyn Release>, PackageIdentity)>,
}

impl LeaseGuard {
    /// Releases the lease. Calling it again (or dropping the guard afterwards) does nothing.
    pub fn release(&mut self) {
        if let Some((sink, identity)) = self.held.take() {
            sink.release(&identity);
        }
    }

    /// Whether this guard has already released its lease.
    pub fn is_released(&self) -> bool {
        self.held.is_none()
    }

    /// The leased identity, until released.
    pub fn identity(&self) -> Option<PackageIdentity> {
        self.held.as_ref().map(|(_, id)| *id)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.release();
    }
}

impl fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("identity", &self.identity())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(generation: i64) -> PackageIdentity {
        PackageIdentity::unclaimed(generation).unwrap()
    }

    fn claimed(generation: i64, catalog: &str) -> PackageIdentity {
        PackageIdentity::new(generation, [(catalog, "1.0.0")]).unwrap()
    }

    fn record(identity: PackageIdentity, platform: &'static str) -> Generated<&'static str> {
        Generated {
            identity,
            dir: PathBuf::from(format!("/p/{identity}")),
            platform,
            skew: SkewPolicy::Warn,
        }
    }

    fn counts(store: &Store<&'static str>) -> Vec<(PackageIdentity, usize)> {
        store
            .leased()
            .into_iter()
            .map(|l| (l.identity, l.count))
            .collect()
    }

    #[test]
    fn spec_5_1_new_is_empty_no_record_generation_0_no_leases() {
        let store = Store::<&'static str>::new();
        assert!(store.generated().is_none());
        assert_eq!(store.generation(), 0);
        assert_eq!(store.identity(), None);
        assert!(store.leased().is_empty());
        assert!(store.pinned().is_empty());
    }

    #[test]
    fn spec_5_1_set_generated_replaces_record_and_leaves_leases_untouched() {
        let store = Store::new();
        assert!(store.set_generated(record(id(1), "one")).is_none());
        let (_, _guard) = store.lease().unwrap();
        let replaced = store.set_generated(record(id(2), "two")).unwrap();
        assert_eq!(replaced.platform, "one");
        assert_eq!(store.generation(), 2);
        assert_eq!(store.generated().unwrap().platform, "two");
        assert_eq!(counts(&store), vec![(id(1), 1)]);
    }

    #[test]
    fn spec_5_1_generated_is_copy_of_record_or_none() {
        let store = Store::new();
        assert!(store.generated().is_none());
        store.set_generated(record(id(4), "four"));
        let snapshot = store.generated().unwrap();
        assert_eq!(*snapshot, record(id(4), "four"));
        // The snapshot is unaffected by a later replacement.
        store.set_generated(record(id(5), "five"));
        assert_eq!(snapshot.platform, "four");
        assert_eq!(snapshot.generation(), 4);
    }

    #[test]
    fn spec_5_1_generation_is_held_generation_or_0() {
        let store = Store::new();
        assert_eq!(store.generation(), 0);
        store.set_generated(record(claimed(9, "c"), "nine"));
        assert_eq!(store.generation(), 9);
        store.clear();
        assert_eq!(store.generation(), 0);
    }

    #[test]
    fn spec_5_1_lease_with_none_held_is_none_and_counts_nothing() {
        let store = Store::<&'static str>::new();
        assert!(store.lease().is_none());
        assert!(store.leased().is_empty());
    }

    #[test]
    fn spec_5_1_lease_counts_and_returns_copy_and_release() {
        let store = Store::new();
        store.set_generated(record(id(1), "one"));
        let (rec, mut a) = store.lease().unwrap();
        let (_, mut b) = store.lease().unwrap();
        assert_eq!(*rec, record(id(1), "one"));
        assert_eq!(a.identity(), Some(id(1)));
        assert_eq!(counts(&store), vec![(id(1), 2)]);
        a.release();
        assert!(a.is_released());
        assert_eq!(counts(&store), vec![(id(1), 1)]);
        b.release();
        assert!(store.leased().is_empty(), "last release deletes the count");
    }

    #[test]
    fn spec_5_1_lease_release_is_idempotent_and_never_drops_another_lease() {
        let store = Store::new();
        store.set_generated(record(id(1), "one"));
        let (_, mut a) = store.lease().unwrap();
        let (_, b) = store.lease().unwrap();
        a.release();
        a.release();
        a.release();
        drop(a);
        assert_eq!(counts(&store), vec![(id(1), 1)], "b's lease survives");
        drop(b);
        assert!(store.leased().is_empty());
    }

    #[test]
    fn spec_5_1_lease_dropping_the_guard_releases() {
        let store = Store::new();
        store.set_generated(record(id(1), "one"));
        {
            let _lease = store.lease().unwrap();
            assert_eq!(counts(&store), vec![(id(1), 1)]);
        }
        assert!(store.leased().is_empty());
    }

    #[test]
    fn spec_5_1_leased_lists_positive_counts_ascending() {
        let store = Store::new();
        let mut guards = Vec::new();
        for (identity, n) in [(id(3), 1), (claimed(1, "x"), 2), (id(1), 3)] {
            store.set_generated(record(identity, "p"));
            for _ in 0..n {
                guards.push(store.lease().unwrap().1);
            }
        }
        let leased = store.leased();
        assert_eq!(
            leased
                .iter()
                .map(|l| (l.identity, l.count))
                .collect::<Vec<_>>(),
            vec![(id(1), 3), (claimed(1, "x"), 2), (id(3), 1)]
        );
        assert_eq!(leased[0].dir, PathBuf::from("/p/gen-1"));
        guards.retain(|g| g.identity() != Some(id(1)));
        assert_eq!(
            counts(&store),
            vec![(claimed(1, "x"), 2), (id(3), 1)],
            "zero counts are not listed"
        );
    }

    #[test]
    fn spec_5_1_clear_drops_record_and_keeps_leases() {
        let store = Store::new();
        store.set_generated(record(id(2), "two"));
        let (rec, guard) = store.lease().unwrap();
        assert_eq!(store.clear().unwrap().platform, "two");
        assert!(store.generated().is_none());
        assert_eq!(store.generation(), 0);
        assert!(store.lease().is_none());
        assert_eq!(counts(&store), vec![(id(2), 1)]);
        assert_eq!(rec.platform, "two", "the render keeps its record");
        drop(guard);
        assert!(store.leased().is_empty());
    }

    #[test]
    fn spec_5_3_same_generation_new_claims_is_a_different_key() {
        // A claim activating at the same generation installs a new identity: the render's lease
        // stays counted under the old identity, which stays pinned.
        let store = Store::new();
        let old = id(7);
        let new = claimed(7, "opmodel.dev/catalogs/extra");
        store.set_generated(record(old, "old"));
        let (rec, guard) = store.lease().unwrap();
        store.set_generated(record(new, "new"));
        assert_eq!(store.generation(), 7);
        assert_eq!(store.identity(), Some(new));
        assert_eq!(counts(&store), vec![(old, 1)]);
        assert!(store.is_pinned(&old) && store.is_pinned(&new));
        assert_eq!(store.pinned(), vec![old, new]);
        assert_eq!(rec.identity, old);
        drop(guard);
        assert!(!store.is_pinned(&old));
        assert_eq!(store.pinned(), vec![new]);
    }

    #[test]
    fn release_after_same_identity_is_reinstalled_counts_only_its_own_lease() {
        let store = Store::new();
        store.set_generated(record(id(1), "one"));
        let (_, mut early) = store.lease().unwrap();
        store.clear();
        store.set_generated(record(id(1), "one again"));
        let (_, late) = store.lease().unwrap();
        assert_eq!(counts(&store), vec![(id(1), 2)]);
        early.release();
        early.release();
        assert_eq!(counts(&store), vec![(id(1), 1)]);
        drop(late);
        assert!(store.leased().is_empty());
    }

    #[test]
    fn guards_release_into_their_own_store() {
        let a = Store::new();
        let b = Store::new();
        a.set_generated(record(id(1), "a"));
        b.set_generated(record(id(1), "b"));
        let (_, ga) = a.lease().unwrap();
        let (_, gb) = b.lease().unwrap();
        drop(ga);
        assert!(a.leased().is_empty());
        assert_eq!(counts(&b), vec![(id(1), 1)]);
        drop(gb);
    }

    #[test]
    fn skew_policy_refuse_only_when_spelled_refuse() {
        assert_eq!(SkewPolicy::from_spec(Some("Refuse")), SkewPolicy::Refuse);
        assert_eq!(SkewPolicy::from_spec(Some("Warn")), SkewPolicy::Warn);
        assert_eq!(SkewPolicy::from_spec(Some("refuse")), SkewPolicy::Warn);
        assert_eq!(SkewPolicy::from_spec(None), SkewPolicy::Warn);
    }

    #[test]
    fn store_and_guard_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Store<Arc<String>>>();
        assert_send_sync::<LeaseGuard>();
    }
}
