//! `crdgen`: writes one YAML file per CRD into `deploy/crds/` and the CRD reference
//! `docs/reference/crds.md`, both generated from the crds crate's types. Run
//! `cargo run -p crds --bin crdgen` after changing a type; the drift tests in `crds/tests` fail
//! until the checked-in files match. `crdgen DIR [FILE]` writes the YAML into `DIR` (and the
//! reference into `FILE` only when given).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut args = std::env::args_os().skip(1);
    let (dir, reference) = match args.next() {
        Some(d) => (PathBuf::from(d), args.next().map(PathBuf::from)),
        None => (
            root.join("deploy/crds"),
            Some(root.join("docs/reference/crds.md")),
        ),
    };
    std::fs::create_dir_all(&dir)?;
    let crds = crds::all_crds();
    for crd in &crds {
        let path = dir.join(crds::crd_file_name(crd));
        std::fs::write(&path, crds::crd_yaml(crd)?)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = reference {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, crds::reference::crd_reference(&crds))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
