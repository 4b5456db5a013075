//! `docs/reference/crds.md` must be exactly what `crdgen` writes from the CRD schemas.

use std::path::PathBuf;

#[test]
fn checked_in_crd_reference_matches_the_schemas() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/crds.md");
    let want = crds::reference::crd_reference(&crds::all_crds());
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} differs from what the CRD schemas generate; run `cargo run -p crds --bin crdgen` and commit the result",
        path.display()
    );
}
