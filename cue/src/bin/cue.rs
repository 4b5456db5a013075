//! The `cue` command line: `cue export|eval|vet [--out json|yaml] [-e expr] [files|dir]`.
//! Exit status 1 on any error, with diagnostics on stderr. Evaluation runs on a thread with a
//! 64 MiB stack so deep inputs hit the configured depth limit, not the stack.

use std::process::ExitCode;

struct Args {
    cmd: String,
    out: String,
    expr: Option<String>,
    concrete: bool,
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
        inputs: Vec::new(),
    };
    while let Some(x) = it.next() {
        match x.as_str() {
            "--out" => a.out = it.next().ok_or("--out needs a value")?,
            "-e" | "--expression" => a.expr = Some(it.next().ok_or("-e needs a value")?),
            "-c" | "--concrete" => a.concrete = true,
            s if s.starts_with("--out=") => a.out = s[6..].to_string(),
            s if s.starts_with('-') && s.len() > 1 => {}
            _ => a.inputs.push(x),
        }
    }
    if a.inputs.is_empty() {
        a.inputs.push(".".into());
    }
    Ok(a)
}

fn run() -> Result<String, String> {
    let a = parse_args()?;
    let rt = cue::Runtime::new(cue::Config::default());
    let fs = cue::module::DirFs::new(std::env::current_dir().map_err(|e| e.to_string())?);
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
            match v.to_json() {
                Ok(s) => Ok(s),
                Err(_) => Ok(String::new()),
            }
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
            print!("{out}");
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
