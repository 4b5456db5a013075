//! Lease+release throughput of the platform store under 1, 2 and 8 threads, with and without a
//! concurrent writer replacing the record (`set_generated`) as fast as it can.
//!
//! Run: `cargo bench -p opm-operator --bench platform_store` (prints figures; asserts nothing).
//! Optional argument: seconds per measurement (default 1).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use opm_operator::kernel::SkewPolicy;
use opm_operator::platform::{self, Generated, PackageIdentity, Store};

fn record(generation: i64) -> Result<Generated<Arc<String>>, platform::Error> {
    let identity = PackageIdentity::new(generation, [("opmodel.dev/catalogs/a", "1.0.0")])?;
    Ok(Generated {
        identity,
        dir: PathBuf::from(format!("/var/run/opm/platform/{identity}")),
        platform: Arc::new(format!("platform {generation}")),
        skew: SkewPolicy::Warn,
    })
}

/// Returns (lease+release pairs per second, replacements per second).
fn measure(
    threads: usize,
    with_writer: bool,
    window: Duration,
) -> Result<(f64, f64), platform::Error> {
    let store = Store::new();
    store.set_generated(record(1)?);
    // Records for the writer are built up front, so it measures the store, not formatting.
    let records = (2..=1001).map(record).collect::<Result<Vec<_>, _>>()?;
    let stop = AtomicBool::new(false);
    let pairs = AtomicU64::new(0);
    let replacements = AtomicU64::new(0);
    let started = Instant::now();
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        if let Some((record, guard)) = store.lease() {
                            std::hint::black_box(&record.platform);
                            drop(guard);
                            n += 1;
                        }
                    }
                }
                pairs.fetch_add(n, Ordering::Relaxed);
            });
        }
        if with_writer {
            s.spawn(|| {
                for r in records.iter().cycle() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    store.set_generated(r.clone());
                    std::hint::black_box(store.leased());
                    replacements.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while started.elapsed() < window {
            thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let secs = started.elapsed().as_secs_f64();
    Ok((
        pairs.into_inner() as f64 / secs,
        replacements.into_inner() as f64 / secs,
    ))
}

fn main() -> Result<(), platform::Error> {
    let window = std::env::args()
        .nth(1)
        .and_then(|a| a.parse::<f64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs_f64);
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!("platform store lease+release throughput ({cores} cores, {window:?} per row)");
    println!(
        "{:>8} {:>8} {:>16} {:>12} {:>16}",
        "threads", "writer", "pairs/s", "ns/pair/thr", "replacements/s"
    );
    for with_writer in [false, true] {
        for threads in [1, 2, 8] {
            let (rate, replaced) = measure(threads, with_writer, window)?;
            println!(
                "{threads:>8} {:>8} {rate:>16.0} {:>12.1} {replaced:>16.0}",
                if with_writer { "yes" } else { "no" },
                1e9 / rate * threads as f64,
            );
        }
    }
    Ok(())
}
