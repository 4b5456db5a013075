//! `render_values_mutate`: the `render_values` fuzz target driven by a structure-aware JSON
//! mutator instead of libFuzzer, for machines without cargo-fuzz / coverage instrumentation.
//! It starts from the corpus (the demo value sets) and, for the given number of seconds,
//! mutates a random corpus entry (replace a value by another kind, huge and negative numbers,
//! strings with CUE syntax and escapes, deep nesting, added and removed keys), renders it and
//! checks the invariants of `common::check`. Every input is written to `last-input.json` before
//! its render, so a crash or hang leaves the reproducer behind.
//!
//! Run: `cargo run --release --bin render_values_mutate -- SECONDS [SEED]`.

#[path = "common.rs"]
mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

/// xorshift64*: deterministic for a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const STRINGS: &[&str] = &[
    "",
    "info",
    "debug",
    "\\(x)",
    "\"",
    "_|_",
    "#config",
    "a.example",
    "UPPER",
    "ünïcödé",
    "\u{0}",
    "line\nbreak",
    "registry.fixtures.test/demo/web",
    "a b c",
];

const KEYS: &[&str] = &[
    "image",
    "tag",
    "repository",
    "replicas",
    "port",
    "hosts",
    "logLevel",
    "secret",
    "value",
    "secretName",
    "key",
    "colour",
    "#x",
    "_hidden",
    "",
    "a.b",
];

fn scalar(r: &mut Rng) -> Value {
    match r.below(9) {
        0 => Value::Null,
        1 => Value::Bool(r.below(2) == 0),
        2 => json!(r.below(20) as i64 - 5),
        3 => json!(i64::MAX),
        4 => json!(-1.5e300),
        5 => json!(0.5),
        6 => Value::String(STRINGS[r.below(STRINGS.len())].to_string()),
        7 => Value::String("x".repeat(r.below(300))),
        _ => json!(65536),
    }
}

fn random_value(r: &mut Rng, depth: usize) -> Value {
    if depth == 0 {
        return scalar(r);
    }
    match r.below(4) {
        0 => Value::Array(
            (0..r.below(4))
                .map(|_| random_value(r, depth - 1))
                .collect(),
        ),
        1 => {
            let mut m = Map::new();
            for _ in 0..r.below(4) {
                m.insert(
                    KEYS[r.below(KEYS.len())].to_string(),
                    random_value(r, depth - 1),
                );
            }
            Value::Object(m)
        }
        _ => scalar(r),
    }
}

fn mutate(r: &mut Rng, v: &mut Value, depth: usize) {
    match v {
        Value::Object(m) if !m.is_empty() && r.below(4) != 0 => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = &keys[r.below(keys.len())];
            match r.below(6) {
                0 => {
                    m.remove(k);
                }
                1 => {
                    m.insert(KEYS[r.below(KEYS.len())].to_string(), random_value(r, 2));
                }
                _ => {
                    if let Some(x) = m.get_mut(k) {
                        mutate(r, x, depth + 1);
                    }
                }
            }
        }
        Value::Array(a) if !a.is_empty() && r.below(3) != 0 => {
            let i = r.below(a.len());
            mutate(r, &mut a[i], depth + 1);
        }
        _ => {
            *v = if depth > 6 {
                scalar(r)
            } else {
                random_value(r, 3)
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(600);
    let seed: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/demo_values");
    let mut corpus: Vec<Value> = std::fs::read_dir(&dir)
        .expect("corpus directory")
        .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
        .map(|b| common::values_of(&b))
        .collect();
    assert!(!corpus.is_empty(), "empty corpus in {}", dir.display());
    let mut r = Rng(seed | 1);
    let start = Instant::now();
    let deadline = Duration::from_secs(seconds);
    let mut runs = 0u64;
    let mut slowest = Duration::ZERO;
    while start.elapsed() < deadline {
        let mut v = corpus[r.below(corpus.len())].clone();
        for _ in 0..=r.below(3) {
            mutate(&mut r, &mut v, 0);
        }
        std::fs::write("last-input.json", serde_json::to_vec(&v).expect("json")).expect("write");
        let t = Instant::now();
        common::check(v.clone());
        slowest = slowest.max(t.elapsed());
        runs += 1;
        if corpus.len() < 200 && r.below(8) == 0 {
            corpus.push(v);
        }
        if runs % 100 == 0 {
            eprintln!(
                "#{runs} after {:?}, slowest render {:?}",
                start.elapsed(),
                slowest
            );
        }
    }
    println!(
        "done: {runs} renders in {:?}, no crash, slowest render {:?} (seed {seed})",
        start.elapsed(),
        slowest
    );
}
