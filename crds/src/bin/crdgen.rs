//! `crdgen`: writes one YAML file per CRD into `deploy/crds/` (or the directory given as the first
//! argument), generated from the crds crate's types. Run `cargo run -p crds --bin crdgen` after
//! changing a type; the drift test in `crds/tests` fails until the checked-in files match.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args_os().nth(1) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds"),
    };
    std::fs::create_dir_all(&dir)?;
    for crd in crds::all_crds() {
        let path = dir.join(crds::crd_file_name(&crd));
        std::fs::write(&path, crds::crd_yaml(&crd)?)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
