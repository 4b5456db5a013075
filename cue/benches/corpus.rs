//! Benchmark: evaluation time and peak memory of the 20 largest corpus cases. Each case runs in
//! a child process (this binary re-invoked with `--one DIR`) so that `VmHWM` from
//! `/proc/self/status` is that case's peak resident memory.

use std::path::{Path, PathBuf};
use std::time::Instant;

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|x| x.parse().ok()))
        })
        .unwrap_or(0)
}

fn one(dir: PathBuf) {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap_or_default())
            .unwrap_or(serde_json::Value::Null);
    let args: Vec<String> = meta["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let t = Instant::now();
    let r = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let fs = cue::module::DirFs::new(dir);
            cue::export_args(&fs, &args, None, false, cue::Config::default()).is_ok()
        })
        .ok()
        .and_then(|h| h.join().ok())
        .unwrap_or(false);
    println!("{} {} {}", t.elapsed().as_micros(), peak_kib(), r);
}

fn size(dir: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                n += size(&p);
            } else if p.extension().is_some_and(|x| x == "cue") {
                n += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    n
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        if let Some(d) = args.get(i + 1) {
            one(PathBuf::from(d));
        }
        return;
    }
    let corpus = std::env::var_os("CUE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/cases/public")
        });
    let Ok(rd) = std::fs::read_dir(&corpus) else {
        println!("corpus absent: skipped");
        return;
    };
    let mut cases: Vec<(u64, PathBuf)> =
        rd.flatten().map(|e| (size(&e.path()), e.path())).collect();
    cases.sort_by_key(|c| std::cmp::Reverse(c.0));
    cases.truncate(20);
    let exe = std::env::current_exe().unwrap_or_default();
    println!(
        "{:<60} {:>8} {:>10} {:>10} ok",
        "case", "bytes", "eval ms", "peak MiB"
    );
    let mut total = 0u128;
    for (sz, c) in cases {
        let out = std::process::Command::new(&exe)
            .arg("--one")
            .arg(&c)
            .output();
        let line = out
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default();
        let f: Vec<&str> = line.split_whitespace().collect();
        let us: u128 = f.first().and_then(|x| x.parse().ok()).unwrap_or(0);
        let kib: u64 = f.get(1).and_then(|x| x.parse().ok()).unwrap_or(0);
        total += us;
        println!(
            "{:<60} {:>8} {:>10.1} {:>10.1} {}",
            c.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            sz,
            us as f64 / 1000.0,
            kib as f64 / 1024.0,
            f.get(2).unwrap_or(&"?")
        );
    }
    println!("total eval time: {:.1} ms", total as f64 / 1000.0);
}
