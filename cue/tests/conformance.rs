//! Conformance: every case of `../shared/conformance/cases/public` (beside the project root) (when present) and every
//! golden `testdata/*.txtar`, run in-process on a 64 MiB-stack thread with the wall-time limit.
//!
//! Corpus rules (as `run.py`): an `expect.json` case must export the same JSON value (object key
//! order ignored, lists exact, an int never equals a float, floats compared as exact decimals);
//! an `expect.err` case must fail. `known_failures.txt` lists cases that fail today, one name and
//! reason per line; a listed case that passes fails the test (the list only shrinks) and an
//! unlisted failing case fails.
//!
//! Goldens: `-- in.cue --` (and other files) plus `-- out/export.json --` or
//! `-- out/errors.txt --`; `UPDATE_EXPECT=1 cargo test -p cue` rewrites the expected sections.
//! A header line `# cmd: vet` checks the package as `cue vet` does (`-- out/vet.txt --` holds
//! `ok`); `# expr: E` exports `E` evaluated in the package, as `cue export -e E`.

use bigdecimal::BigDecimal;
use libtest_mimic::{Arguments, Failed, Trial};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn config() -> cue::Config {
    cue::Config {
        max_wall_time: Duration::from_secs(8),
        ..cue::Config::default()
    }
}

fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(f)
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "panicked".to_string())
}

// A minimal JSON reader that keeps numbers exact.
#[derive(Debug, Clone)]
enum J {
    Null,
    Bool(bool),
    Int(String),
    Float(String),
    Str(String),
    List(Vec<J>),
    Obj(Vec<(String, J)>),
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn val(&mut self) -> Result<J, String> {
        self.ws();
        let c = *self.s.get(self.i).ok_or("unexpected end")?;
        match c {
            b'{' => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    self.ws();
                    if self.s.get(self.i) == Some(&b'}') {
                        self.i += 1;
                        break;
                    }
                    let J::Str(k) = self.val()? else {
                        return Err("bad key".into());
                    };
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return Err("expected :".into());
                    }
                    self.i += 1;
                    let v = self.val()?;
                    if out.iter().any(|(k2, _)| *k2 == k) {
                        return Err(format!("duplicate key {k}"));
                    }
                    out.push((k, v));
                    self.ws();
                    if self.s.get(self.i) == Some(&b',') {
                        self.i += 1;
                    }
                }
                Ok(J::Obj(out))
            }
            b'[' => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    self.ws();
                    if self.s.get(self.i) == Some(&b']') {
                        self.i += 1;
                        break;
                    }
                    out.push(self.val()?);
                    self.ws();
                    if self.s.get(self.i) == Some(&b',') {
                        self.i += 1;
                    }
                }
                Ok(J::List(out))
            }
            b'"' => {
                let start = self.i;
                self.i += 1;
                while self.i < self.s.len() && self.s[self.i] != b'"' {
                    if self.s[self.i] == b'\\' {
                        self.i += 1;
                    }
                    self.i += 1;
                }
                self.i += 1;
                let raw = std::str::from_utf8(&self.s[start..self.i.min(self.s.len())])
                    .map_err(|e| e.to_string())?;
                let v: serde_json::Value = serde_json::from_str(raw).map_err(|e| e.to_string())?;
                Ok(J::Str(v.as_str().unwrap_or("").to_string()))
            }
            b't' | b'f' | b'n' => {
                for (w, v) in [
                    ("true", J::Bool(true)),
                    ("false", J::Bool(false)),
                    ("null", J::Null),
                ] {
                    if self.s[self.i..].starts_with(w.as_bytes()) {
                        self.i += w.len();
                        return Ok(v);
                    }
                }
                Err("bad literal".into())
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
                    )
                {
                    self.i += 1;
                }
                let t = String::from_utf8_lossy(&self.s[start..self.i]).to_string();
                if t.is_empty() {
                    return Err(format!("unexpected byte {c}"));
                }
                if t.contains(['.', 'e', 'E']) {
                    Ok(J::Float(t))
                } else {
                    Ok(J::Int(t))
                }
            }
        }
    }
}

fn parse_stream(text: &str) -> Result<Vec<J>, String> {
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
    };
    let mut out = Vec::new();
    loop {
        p.ws();
        if p.i >= p.s.len() {
            break;
        }
        out.push(p.val()?);
    }
    Ok(out)
}

fn same(a: &J, b: &J, path: &str) -> Option<String> {
    let diff = || Some(format!("{path}: {a:?} != {b:?}"));
    match (a, b) {
        (J::Null, J::Null) => None,
        (J::Bool(x), J::Bool(y)) if x == y => None,
        (J::Int(x), J::Int(y)) => {
            let px: Option<num_bigint::BigInt> = x.parse().ok();
            let py: Option<num_bigint::BigInt> = y.parse().ok();
            if px.is_some() && px == py {
                None
            } else {
                diff()
            }
        }
        (J::Float(x), J::Float(y)) => {
            let px: Option<BigDecimal> = x.parse().ok();
            let py: Option<BigDecimal> = y.parse().ok();
            if px.is_some() && px == py {
                None
            } else {
                diff()
            }
        }
        (J::Str(x), J::Str(y)) if x == y => None,
        (J::List(x), J::List(y)) => {
            if x.len() != y.len() {
                return Some(format!("{path}: list length {} != {}", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (p, q))| same(p, q, &format!("{path}[{i}]")))
        }
        (J::Obj(x), J::Obj(y)) => {
            let mx: HashMap<&String, &J> = x.iter().map(|(k, v)| (k, v)).collect();
            let my: HashMap<&String, &J> = y.iter().map(|(k, v)| (k, v)).collect();
            if mx.len() != my.len() || mx.keys().any(|k| !my.contains_key(k)) {
                let mut ka: Vec<_> = mx.keys().collect();
                let mut kb: Vec<_> = my.keys().collect();
                ka.sort();
                kb.sort();
                return Some(format!("{path}: keys differ: {ka:?} vs {kb:?}"));
            }
            let mut keys: Vec<_> = mx.keys().collect();
            keys.sort();
            keys.into_iter()
                .find_map(|k| same(mx[*k], my[*k], &format!("{path}.{k}")))
        }
        _ => diff(),
    }
}

fn run_case(dir: PathBuf) -> Result<(), String> {
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("meta.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let args: Vec<String> = meta["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let fs = cue::module::DirFs::new(dir.clone());
    let got = on_big_stack(move || cue::export_args(&fs, &args, None, false, config()))?;
    let exp_json = dir.join("expect.json");
    if !exp_json.exists() {
        return match got {
            Err(_) => Ok(()),
            Ok(out) => Err(format!(
                "expected failure, got output: {}",
                out.chars().take(200).collect::<String>()
            )),
        };
    }
    let out =
        got.map_err(|e| format!("export failed: {}", e.chars().take(400).collect::<String>()))?;
    let want = parse_stream(&std::fs::read_to_string(exp_json).map_err(|e| e.to_string())?)?;
    let have = parse_stream(&out).map_err(|e| format!("output is not JSON: {e}"))?;
    if want.len() != have.len() {
        return Err(format!(
            "{} JSON documents, want {}",
            have.len(),
            want.len()
        ));
    }
    for (w, h) in want.iter().zip(&have) {
        if let Some(d) = same(w, h, "$") {
            return Err(format!("mismatch: {d}"));
        }
    }
    Ok(())
}

/// Parses a txtar archive: a comment header, then `-- name --` sections.
fn txtar(text: &str) -> (String, Vec<(String, String)>) {
    let mut header = String::new();
    let mut files: Vec<(String, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let t = line.trim_end();
        if t.starts_with("-- ") && t.ends_with(" --") && t.len() > 6 {
            files.push((t[3..t.len() - 3].to_string(), String::new()));
        } else if let Some(f) = files.last_mut() {
            f.1.push_str(line);
        } else {
            header.push_str(line);
        }
    }
    (header, files)
}

fn run_golden(path: PathBuf) -> Result<(), String> {
    let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    let (header, files) = txtar(&text);
    let inputs: Vec<(String, String)> = files
        .iter()
        .filter(|(n, _)| !n.starts_with("out/"))
        .cloned()
        .collect();
    // Header directives: `# cmd: vet` runs what `cue vet` does (no output on success:
    // `out/vet.txt` holds `ok`); `# expr: E` exports `E` evaluated in the package (`-e E`).
    let directive = |key: &str| {
        header
            .lines()
            .find_map(|l| l.strip_prefix("# ")?.strip_prefix(key)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    };
    let vet = directive("cmd").is_some_and(|c| c == "vet");
    let expr = directive("expr");
    let got = on_big_stack(move || {
        let mut fs = cue::module::MemFs::new();
        for (n, c) in &inputs {
            fs.insert(n.clone(), c.clone().into_bytes());
        }
        if vet {
            let rt = cue::Runtime::new(config());
            let target = cue::target_of_args(&[".".to_string()]);
            let root = rt
                .build_module(&fs, &target, None)
                .map_err(|d| rt.render(&d))?;
            root.validate(false).map_err(|d| rt.render(&d))?;
            return Ok("ok\n".to_string());
        }
        cue::export_args(&fs, &[".".to_string()], expr.as_deref(), false, config())
    })?;
    let (name, actual) = match got {
        Ok(out) if vet => ("out/vet.txt", out),
        Ok(out) => ("out/export.json", out),
        Err(e) => ("out/errors.txt", e),
    };
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        let mut s = header.clone();
        for (n, c) in files.iter().filter(|(n, _)| !n.starts_with("out/")) {
            s.push_str(&format!("-- {n} --\n{c}"));
        }
        s.push_str(&format!("-- {name} --\n{actual}"));
        std::fs::write(&path, s).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let expected = files
        .iter()
        .find(|(n, _)| n.starts_with("out/"))
        .ok_or("golden has no out/ section (run with UPDATE_EXPECT=1)")?;
    if expected.0 != name {
        return Err(format!(
            "expected {} but the run produced {name}:\n{actual}",
            expected.0
        ));
    }
    // `# keys: unordered`: object key order is not compared (the corpus rule), for results whose
    // upstream field order we do not reproduce.
    let same = expected.1.trim_end() == actual.trim_end()
        || (directive("keys").is_some_and(|k| k == "unordered")
            && name == "out/export.json"
            && matches!((parse_stream(&expected.1), parse_stream(&actual)), (Ok(a), Ok(b))
                if a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| same(x, y, "$").is_none())));
    if !same {
        return Err(format!(
            "{name} differs\n--- expected\n{}\n--- actual\n{actual}",
            expected.1
        ));
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut trials = Vec::new();

    let known_text = std::fs::read_to_string(root.join("known_failures.txt")).unwrap_or_default();
    let mut known: HashMap<String, String> = HashMap::new();
    for line in known_text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, reason) = line.split_once(' ').unwrap_or((line, ""));
        known.insert(name.to_string(), reason.trim().to_string());
    }

    // `CUE_CORPUS` overrides the corpus location (e.g. a worktree without `shared/`).
    let corpus = std::env::var_os("CUE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../../shared/conformance/cases/public"));
    if corpus.is_dir() {
        let mut cases: Vec<PathBuf> = std::fs::read_dir(&corpus)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        cases.retain(|p| p.join("meta.json").is_file());
        cases.sort();
        for c in cases {
            let name = c
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let listed = known.get(&name).cloned();
            trials.push(Trial::test(format!("corpus::{name}"), move || {
                let r = run_case(c);
                match (r, listed) {
                    (Ok(()), None) => Ok(()),
                    (Err(e), Some(_)) => {
                        let _ = e;
                        Ok(())
                    }
                    (Ok(()), Some(reason)) => Err(Failed::from(format!(
                        "listed in known_failures.txt ({reason}) but passes: remove it"
                    ))),
                    (Err(e), None) => Err(Failed::from(e)),
                }
            }));
        }
    } else {
        eprintln!(
            "!!!!! corpus absent: skipped ({} not found) !!!!!",
            corpus.display()
        );
    }

    let td = root.join("testdata");
    let mut goldens: Vec<PathBuf> = std::fs::read_dir(&td)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    goldens.retain(|p| p.extension().is_some_and(|e| e == "txtar"));
    goldens.sort();
    for g in goldens {
        let name = g
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        trials.push(Trial::test(format!("golden::{name}"), move || {
            run_golden(g).map_err(Failed::from)
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}
