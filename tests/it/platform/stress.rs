//! Concurrency stress of the platform store and layout together (issue #6).
//!
//! Threads lease, hold, release (once, twice, or by drop), replace and clear concurrently while a
//! checker verifies, at the start and end of every lease (and across replacements for long ones),
//! that the leased directory exists and is complete: every package's last file is a marker holding
//! the checksum of the other files, and the record carries the same checksum. A second test checks
//! the lease counts exactly at barrier points against what the threads hold.
//!
//! The lease counting is not model-checked (no loom); these tests sample interleavings only.

// Test helpers outside #[test] functions may unwrap: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use opm_operator::kernel::SkewPolicy;
use opm_operator::platform::{Generated, Layout, LeaseGuard, PackageIdentity, Store};

const MARKER: &str = "COMPLETE";

fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The package for an identity: two small files, then the marker (written last).
fn package(identity: &PackageIdentity) -> (Vec<(String, Vec<u8>)>, u64) {
    let name = identity.to_string();
    let files = vec![
        (
            "cue.mod/module.cue".to_owned(),
            format!("module: \"opmodel.dev/platforms/cluster@v0\"\n// {name}\n").into_bytes(),
        ),
        (
            "platform.cue".to_owned(),
            format!("package platform\nmetadata: name: \"{name}\"\n")
                .repeat(4)
                .into_bytes(),
        ),
    ];
    let sum = files.iter().fold(0xcbf2_9ce4_8422_2325, |h, (p, b)| {
        fnv(b, fnv(p.as_bytes(), h))
    });
    let mut all = files;
    all.push((MARKER.to_owned(), sum.to_string().into_bytes()));
    (all, sum)
}

/// Checks that `dir` holds the complete package whose checksum is `want`.
fn check_complete(dir: &Path, want: u64) -> Result<(), String> {
    let marker = std::fs::read_to_string(dir.join(MARKER))
        .map_err(|e| format!("{}: marker unreadable: {e}", dir.display()))?;
    let mut sum = 0xcbf2_9ce4_8422_2325;
    for path in ["cue.mod/module.cue", "platform.cue"] {
        let bytes = std::fs::read(dir.join(path))
            .map_err(|e| format!("{}: {path} unreadable: {e}", dir.display()))?;
        sum = fnv(&bytes, fnv(path.as_bytes(), sum));
    }
    if marker != want.to_string() || sum != want {
        return Err(format!(
            "{}: checksum mismatch (marker {marker}, files {sum}, record {want})",
            dir.display()
        ));
    }
    Ok(())
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Identities cycle over a few generations and claim sets, so the same generation reappears with
/// different claims (the hazard of docs/design/operator.md §5.3) and identities recur (exercising `ensure` reuse).
fn pick_identity(rng: &mut Rng, generation: &mut i64) -> PackageIdentity {
    if rng.below(8) == 0 {
        *generation += 1;
    }
    let claims: &[(&str, &str)] = match rng.below(3) {
        0 => &[],
        1 => &[("opmodel.dev/catalogs/a", "1.0.0")],
        _ => &[
            ("opmodel.dev/catalogs/a", "1.0.0"),
            ("opmodel.dev/catalogs/b", "0.3.0"),
        ],
    };
    PackageIdentity::new(*generation, claims.iter().copied()).unwrap()
}

#[test]
fn platform_stress_leased_directories_stay_complete_for_the_whole_lease() {
    const LEASERS: usize = 4;
    const LEASES_PER_THREAD: usize = 12_500;
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("platform")).unwrap();
    layout.reset().unwrap();
    let store: Store<u64> = Store::new();
    let stop = AtomicBool::new(false);
    let violations = Mutex::new(Vec::<String>::new());
    let ops = AtomicU64::new(0);
    let replacements = AtomicU64::new(0);
    let reused = AtomicU64::new(0);
    let held_across_replacement = AtomicU64::new(0);
    let leasers_done = AtomicUsize::new(0);
    let started = Instant::now();

    thread::scope(|s| {
        // The Platform reconciler: ensure, record, prune against the store.
        s.spawn(|| {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let mut generation = 1;
            while !stop.load(Ordering::Relaxed) {
                let identity = pick_identity(&mut rng, &mut generation);
                let (files, sum) = package(&identity);
                let (dir, how) = layout.ensure(&identity, &files).unwrap();
                if how == opm_operator::platform::Ensured::Reused {
                    reused.fetch_add(1, Ordering::Relaxed);
                }
                store.set_generated(Generated {
                    identity,
                    dir,
                    platform: sum,
                    skew: SkewPolicy::Warn,
                });
                if let Err(e) = layout.prune(&[], &store) {
                    violations.lock().unwrap().push(format!("prune: {e}"));
                }
                replacements.fetch_add(1, Ordering::Relaxed);
                ops.fetch_add(3, Ordering::Relaxed);
            }
        });
        // Platform deletion and re-creation: clear after every 8th replacement.
        s.spawn(|| {
            let mut cleared_at = 0;
            while !stop.load(Ordering::Relaxed) {
                let now = replacements.load(Ordering::Relaxed);
                if now >= cleared_at + 8 {
                    store.clear();
                    cleared_at = now;
                    ops.fetch_add(1, Ordering::Relaxed);
                }
                thread::yield_now();
            }
        });
        // Renders.
        for t in 0..LEASERS {
            let (store, violations, ops, stop) = (&store, &violations, &ops, &stop);
            let (held_across_replacement, leasers_done) = (&held_across_replacement, &leasers_done);
            s.spawn(move || {
                let mut rng = Rng(0xdead_beef_0000_0001 + t as u64);
                let mut done = 0;
                let fail = |msg: String| violations.lock().unwrap().push(msg);
                while done < LEASES_PER_THREAD {
                    let Some((record, mut guard)) = store.lease() else {
                        thread::yield_now();
                        continue;
                    };
                    done += 1;
                    if let Err(e) = check_complete(&record.dir, record.platform) {
                        fail(format!("at lease start: {e}"));
                    }
                    if rng.below(256) == 0 {
                        // A long render: hold the lease across at least one replacement.
                        let deadline = Instant::now() + Duration::from_millis(200);
                        while store.identity() == Some(record.identity) && Instant::now() < deadline
                        {
                            thread::yield_now();
                        }
                        if store.identity() != Some(record.identity) {
                            held_across_replacement.fetch_add(1, Ordering::Relaxed);
                        }
                    } else if rng.below(4) == 0 {
                        // A nested lease (a render calling into the TR path).
                        if let Some((inner, inner_guard)) = store.lease() {
                            if let Err(e) = check_complete(&inner.dir, inner.platform) {
                                fail(format!("nested lease: {e}"));
                            }
                            drop(inner_guard);
                            ops.fetch_add(2, Ordering::Relaxed);
                        }
                    }
                    if let Err(e) = check_complete(&record.dir, record.platform) {
                        fail(format!("at lease end: {e}"));
                    }
                    match rng.below(3) {
                        0 => drop(guard),
                        1 => guard.release(),
                        _ => {
                            guard.release();
                            guard.release();
                        }
                    }
                    ops.fetch_add(2, Ordering::Relaxed);
                }
                if leasers_done.fetch_add(1, Ordering::SeqCst) + 1 == LEASERS {
                    stop.store(true, Ordering::SeqCst);
                }
            });
        }
    });

    let elapsed = started.elapsed();
    let violations = violations.into_inner().unwrap();
    assert!(
        violations.is_empty(),
        "{} violations, first: {:?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );
    assert!(
        store.leased().is_empty(),
        "every lease released: {:?}",
        store.leased()
    );
    let ops = ops.into_inner();
    let replacements = replacements.into_inner();
    eprintln!(
        "platform stress: {ops} operations ({} leases, {replacements} replacements, {} reused, \
         {} leases held across a replacement) in {elapsed:?}",
        LEASERS * LEASES_PER_THREAD,
        reused.into_inner(),
        held_across_replacement.into_inner(),
    );
    assert!(ops >= 100_000, "{ops}");
    assert!(
        replacements >= 10,
        "the replacer ran concurrently: {replacements}"
    );
    // After the last release, pruning against the store keeps only the current package.
    layout.prune(&[], &store).unwrap();
    let left = layout.packages().unwrap();
    assert_eq!(left, store.identity().into_iter().collect::<Vec<_>>());
}

#[test]
fn platform_stress_lease_counts_match_held_guards_at_every_barrier() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 50;
    const OPS_PER_ROUND: usize = 600;
    let store: Store<()> = Store::new();
    let identities: Vec<PackageIdentity> = (1..=3)
        .flat_map(|g| {
            [
                PackageIdentity::unclaimed(g).unwrap(),
                PackageIdentity::new(g, [("c", "1")]).unwrap(),
            ]
        })
        .collect();
    let set = |i: usize| {
        let identity = identities[i % identities.len()];
        store.set_generated(Generated {
            identity,
            dir: format!("/p/{identity}").into(),
            platform: (),
            skew: SkewPolicy::Warn,
        });
    };
    set(0);
    let barrier = Barrier::new(THREADS + 1);
    let held: Vec<Mutex<BTreeMap<PackageIdentity, usize>>> =
        (0..THREADS).map(|_| Mutex::new(BTreeMap::new())).collect();
    let total_ops = AtomicU64::new(0);
    let mismatches = Mutex::new(Vec::<String>::new());

    thread::scope(|s| {
        for t in 0..THREADS {
            let (store, barrier, held, total_ops, set) =
                (&store, &barrier, &held, &total_ops, &set);
            s.spawn(move || {
                let mut rng = Rng(0x51_7cc1_b727_220a + t as u64);
                let mut guards: Vec<LeaseGuard> = Vec::new();
                for _ in 0..ROUNDS {
                    for _ in 0..OPS_PER_ROUND {
                        match rng.below(10) {
                            0..=3 => {
                                if let Some((_, g)) = store.lease() {
                                    guards.push(g);
                                }
                            }
                            4..=6 if !guards.is_empty() => {
                                let i = rng.below(guards.len() as u64) as usize;
                                let mut g = guards.swap_remove(i);
                                g.release();
                                if rng.below(2) == 0 {
                                    g.release();
                                }
                            }
                            7 => set(rng.below(64) as usize),
                            8 => {
                                if rng.below(8) == 0 {
                                    store.clear();
                                }
                            }
                            _ => {
                                // A released guard kept around and released again later.
                                if let Some(g) = guards.last_mut() {
                                    if rng.below(16) == 0 {
                                        g.release();
                                    }
                                }
                                guards.retain(|g| !g.is_released());
                            }
                        }
                        total_ops.fetch_add(1, Ordering::Relaxed);
                    }
                    let mut mine = BTreeMap::new();
                    for g in &guards {
                        *mine.entry(g.identity().unwrap()).or_insert(0) += 1;
                    }
                    *held[t].lock().unwrap() = mine;
                    barrier.wait();
                    barrier.wait();
                }
                drop(guards);
            });
        }
        for round in 0..ROUNDS {
            barrier.wait();
            let mut want = BTreeMap::new();
            for h in &held {
                for (id, n) in h.lock().unwrap().iter() {
                    *want.entry(*id).or_insert(0) += n;
                }
            }
            let got: BTreeMap<_, _> = store
                .leased()
                .into_iter()
                .map(|l| (l.identity, l.count))
                .collect();
            if got != want {
                mismatches
                    .lock()
                    .unwrap()
                    .push(format!("round {round}: store {got:?} != held {want:?}"));
            }
            barrier.wait();
        }
    });
    let mismatches = mismatches.into_inner().unwrap();
    assert!(mismatches.is_empty(), "{mismatches:?}");
    assert!(store.leased().is_empty());
    assert_eq!(
        total_ops.into_inner(),
        (THREADS * ROUNDS * OPS_PER_ROUND) as u64
    );
}
