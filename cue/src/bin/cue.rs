//! The `cue` command line: `cue export|eval|vet [--out json|yaml] [-e expr] [files|dir]`.
//! Exit status 1 on any error, with diagnostics on stderr. Evaluation runs on a thread with a
//! 64 MiB stack so deep inputs hit the configured depth limit, not the stack.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

struct Args {
    cmd: String,
    out: String,
    expr: Option<String>,
    concrete: bool,
    /// `--out` was given (for `eval`, whose default output is CUE).
    out_given: bool,
    inputs: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let cmd = it
        .next()
        .ok_or("usage: cue export|eval|vet [flags] [files|dir]")?;
    let mut a = Args {
        cmd,
        out: "json".into(),
        expr: None,
        concrete: false,
        out_given: false,
        inputs: Vec::new(),
    };
    while let Some(x) = it.next() {
        match x.as_str() {
            "--out" => {
                a.out = it.next().ok_or("--out needs a value")?;
                a.out_given = true;
            }
            "-e" | "--expression" => a.expr = Some(it.next().ok_or("-e needs a value")?),
            "-c" | "--concrete" => a.concrete = true,
            s if s.starts_with("--out=") => {
                a.out = s[6..].to_string();
                a.out_given = true;
            }
            s if s.starts_with('-') && s.len() > 1 => {}
            _ => a.inputs.push(x),
        }
    }
    if a.inputs.is_empty() {
        a.inputs.push(".".into());
    }
    Ok(a)
}

/// Lexically normalises `p` (absolute or relative to `cwd`): `.` dropped, `..` applied.
fn normalise(cwd: &Path, p: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in cwd.join(p).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The directory the command reads from and the inputs relative to it. Like upstream, the main
/// module is the nearest directory at or above the working directory holding `cue.mod`; without
/// one, the deepest directory holding the working directory and every input. Inputs may be
/// absolute or reach up with `..`, but must stay inside the main module.
fn root_and_inputs(inputs: &[String]) -> Result<(PathBuf, Vec<String>), String> {
    let cwd = std::env::current_dir().map_err(|e| format!("working directory: {e}"))?;
    let abs: Vec<PathBuf> = inputs.iter().map(|i| normalise(&cwd, i)).collect();
    let module = cwd.ancestors().find(|d| d.join("cue.mod").is_dir());
    let root = match module {
        Some(m) => m.to_path_buf(),
        None => {
            let mut root = cwd.clone();
            for a in &abs {
                let dir = if a.is_dir() {
                    a.as_path()
                } else {
                    a.parent().unwrap_or(a)
                };
                while !dir.starts_with(&root) {
                    if !root.pop() {
                        break;
                    }
                }
            }
            root
        }
    };
    let mut rel = Vec::new();
    for (a, i) in abs.iter().zip(inputs) {
        let r = a
            .strip_prefix(&root)
            .map_err(|_| format!("{i}: outside the main module {}", root.display()))?;
        let r = r.to_string_lossy();
        rel.push(if r.is_empty() {
            ".".to_string()
        } else {
            r.into_owned()
        });
    }
    Ok((root, rel))
}

fn run() -> Result<String, String> {
    let mut a = parse_args()?;
    let rt = cue::Runtime::new(cue::Config::default());
    let (root, inputs) = root_and_inputs(&a.inputs)?;
    a.inputs = inputs;
    let fs = cue::module::DirFs::new(root);
    if a.cmd == "export" {
        return cue::export_args(
            &fs,
            &a.inputs,
            a.expr.as_deref(),
            a.out == "yaml",
            cue::Config::default(),
        );
    }
    let root = rt
        .build_module(&fs, &cue::target_of_args(&a.inputs), None)
        .map_err(|d| rt.render(&d))?;
    let v = match &a.expr {
        Some(e) => rt.compile_expr(&root, e).map_err(|d| rt.render(&d))?,
        None => root.clone(),
    };
    match a.cmd.as_str() {
        "vet" => {
            v.validate(a.concrete).map_err(|d| rt.render(&d))?;
            Ok(String::new())
        }
        "eval" => {
            v.validate(false).map_err(|d| rt.render(&d))?;
            if a.concrete {
                v.validate(true).map_err(|d| rt.render(&d))?;
            }
            if a.out == "json" && a.out_given {
                return v.to_json().map_err(|d| rt.render(&d));
            }
            Ok(v.to_cue())
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

fn main() -> ExitCode {
    let h = std::thread::Builder::new().stack_size(64 << 20).spawn(run);
    let r = match h {
        Ok(h) => match h.join() {
            Ok(r) => r,
            Err(_) => Err("internal error: evaluator thread failed".into()),
        },
        Err(e) => Err(format!("cannot start evaluator thread: {e}")),
    };
    match r {
        Ok(out) => {
            // A closed pipe (`cue eval | head`) is not an error worth a panic.
            let mut so = std::io::stdout().lock();
            let _ = so.write_all(out.as_bytes()).and_then(|()| so.flush());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprint!("{e}");
            if !e.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(1)
        }
    }
}
