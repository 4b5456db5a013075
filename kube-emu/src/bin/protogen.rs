//! `protogen`: writes `kube-emu/src/protobuf/generated.rs`, the protobuf field tables, from
//! `k8s-pb`'s sources (found with `cargo metadata`), `k8s-openapi`'s schemas and
//! `go_value_fields.txt` (see `kube_emu::protobuf::codegen`).
//!
//! `--go-ref TAG --go-api k8s.io/api=DIR --go-api k8s.io/apimachinery=DIR --go-api
//! k8s.io/apiextensions-apiserver=DIR` (checkouts of the upstream Go modules at TAG, the
//! release `k8s-openapi`'s `latest` describes) first rewrites `go_value_fields.txt` from the
//! Go types. `--check` writes nothing and exits 1 when the
//! checked-in table differs from a fresh generation.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kube_emu::protobuf::codegen;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("protogen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode, kube_emu::Error> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protobuf");
    let mut go_roots: Vec<(String, PathBuf)> = Vec::new();
    let mut check = false;
    let mut go_ref = String::from("an unnamed release");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--check" => check = true,
            "--go-ref" => go_ref = args.next().unwrap_or_default(),
            "--go-api" => {
                let v = args.next().unwrap_or_default();
                let Some((prefix, path)) = v.split_once('=') else {
                    return Err(kube_emu::Error::Codegen(format!(
                        "--go-api takes IMPORT_PREFIX=DIR, not {v:?}"
                    )));
                };
                go_roots.push((prefix.to_string(), PathBuf::from(path)));
            }
            other => {
                return Err(kube_emu::Error::Codegen(format!(
                    "unknown argument {other:?} (--check, --go-ref TAG, --go-api PREFIX=DIR)"
                )))
            }
        }
    }
    let values_path = dir.join("go_value_fields.txt");
    if !go_roots.is_empty() {
        let text = codegen::extract_go_value_fields(&go_roots, &go_ref)?;
        std::fs::write(&values_path, text)?;
        eprintln!("protogen: wrote {}", values_path.display());
    }
    let (k8s_pb_src, k8s_pb_version) =
        codegen::locate_k8s_pb(Path::new(env!("CARGO_MANIFEST_DIR")))?;
    let inputs = codegen::Inputs {
        k8s_pb_src,
        k8s_pb_version,
        go_value_fields: std::fs::read_to_string(&values_path)?,
    };
    let generated = codegen::generate(&inputs)?;
    let out = dir.join("generated.rs");
    if check {
        let current = std::fs::read_to_string(&out).unwrap_or_default();
        if current != generated {
            eprintln!("protogen: {} is out of date", out.display());
            return Ok(ExitCode::FAILURE);
        }
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::write(&out, generated)?;
    eprintln!("protogen: wrote {}", out.display());
    Ok(ExitCode::SUCCESS)
}
