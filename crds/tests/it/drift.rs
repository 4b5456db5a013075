//! `deploy/crds/*.yaml` must be exactly what `crdgen` writes from the types.

use std::path::PathBuf;

fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

#[test]
fn checked_in_crd_yaml_matches_the_types() {
    let mut expected = Vec::new();
    for crd in crds::all_crds() {
        let name = crds::crd_file_name(&crd);
        let want = crds::crd_yaml(&crd).unwrap();
        let path = crd_dir().join(&name);
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} differs from what the crds types generate; run `cargo run -p crds --bin crdgen` and commit the result",
            path.display()
        );
        expected.push(name);
    }
    let mut present: Vec<String> = std::fs::read_dir(crd_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    present.sort();
    expected.sort();
    assert_eq!(
        present, expected,
        "deploy/crds holds a file crdgen does not write; remove it or run crdgen"
    );
}

#[test]
fn all_crds_yaml_is_the_concatenation_of_the_files() {
    let all = crds::all_crds_yaml().unwrap();
    let docs: Vec<serde_json::Value> = crds::yaml::from_str_multiple(&all).unwrap();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "moduleinstances.opmodel.dev",
            "modulepackages.opmodel.dev",
            "platforms.opmodel.dev",
            "transformerregistrations.opmodel.dev"
        ]
    );
}
