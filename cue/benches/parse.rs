//! Parser throughput: parses every `.cue` file of the conformance corpus (and a large synthetic
//! data file) repeatedly and prints MB/s. Run with `cargo bench -p cue --bench parse`.

use cue::source::FileId;
use std::time::Instant;

fn collect(dir: &std::path::Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "cue") {
            if let Ok(s) = std::fs::read_to_string(&p) {
                out.push(s);
            }
        }
    }
}

fn measure(name: &str, inputs: &[String], rounds: usize) {
    let bytes: usize = inputs.iter().map(String::len).sum::<usize>() * rounds;
    let start = Instant::now();
    let mut errors = 0usize;
    for _ in 0..rounds {
        for s in inputs {
            errors += cue::parser::parse_file(FileId(0), s).1.len();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{name}: {:.1} MB in {secs:.3} s = {:.1} MB/s ({errors} errors)",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / secs
    );
}

fn main() {
    let mut root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/cases/public");
    if !root.exists() {
        root = std::path::PathBuf::from("/work/shared/conformance/cases/public");
    }
    let mut corpus = Vec::new();
    collect(&root, &mut corpus);
    if corpus.is_empty() {
        println!("corpus absent: skipped");
    } else {
        measure("corpus", &corpus, 20);
    }
    // A CRD-like data file: nested structs, strings, lists, numbers.
    let mut big = String::from("package data\n");
    for i in 0..20_000 {
        big.push_str(&format!(
            "item{i}: {{name: \"n-{i}\", port: {i}, tags: [\"a\", \"b\"], ratio: 0.5, \"quoted-key\": true, nested: x: y: {i}}}\n"
        ));
    }
    measure("synthetic data", &[big], 3);
}
