//! Registry integration tests against the real distribution registry and OCI layouts: publish the
//! fixture modules with the real CLI, resolve them by path@version, check the artifact shape.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod auth;
mod bad;
mod cache;
mod flux;
pub mod harness;
mod module_load;
mod signed;

use cue::module::ModuleFile;
use cue::module::{ModuleVersion, Registry as _, RegistryError};
use opm_operator::registry::artifact;
use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};

use harness::{cli, cli_ok, fixtures, publish_fixtures, DistRegistry, RawPush};

fn mv(path: &str, version: &str) -> ModuleVersion {
    ModuleVersion {
        path: path.into(),
        version: version.into(),
    }
}

fn fixture_file(module: &str, file: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(module).join(file)).unwrap()
}

/// Checks the fetched tree of the app module through the `cue` seam.
fn check_app_tree(reg: &dyn cue::module::Registry) {
    let fs = reg.fetch(&mv("fixtures.test/app@v0", "v0.1.0")).unwrap();
    assert_eq!(
        fs.read_file("app.cue").unwrap(),
        fixture_file("app", "app.cue")
    );
    assert_eq!(
        fs.read_file("cue.mod/module.cue").unwrap(),
        fixture_file("app", "cue.mod/module.cue")
    );
    let names: Vec<String> = fs
        .read_dir("")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["app.cue", "cue.mod"]);
    let lib = reg.fetch(&mv("fixtures.test/lib@v0", "v0.1.0")).unwrap();
    let lib_src = String::from_utf8(lib.read_file("lib.cue").unwrap()).unwrap();
    assert!(lib_src.contains("import \"fixtures.test/schema\""));
    let schema = reg.fetch(&mv("fixtures.test/schema@v0", "v0.1.0")).unwrap();
    assert_eq!(
        schema.read_file("schema.cue").unwrap(),
        fixture_file("schema", "schema.cue")
    );
}

/// Resolves the app module's import graph through MVS: lib and schema at v0.1.0, and the lib's
/// major-less import of schema is covered by a `default: true` dep of the main module.
fn check_resolution(reg: &ModuleRegistry) {
    let main = ModuleFile::parse(&fixture_file("app", "cue.mod/module.cue")).unwrap();
    let tidy = cue::module::tidy(&main, reg).unwrap();
    assert_eq!(tidy.deps.len(), 2);
    assert_eq!(tidy.deps["fixtures.test/lib@v0"].version, "v0.1.0");
    assert!(tidy.deps["fixtures.test/schema@v0"].default);
    let lib = reg
        .module_file(&mv("fixtures.test/lib@v0", "v0.1.0"))
        .unwrap();
    assert!(lib.deps["fixtures.test/schema@v0"].default);
}

#[test]
fn fixtures_publish_to_a_real_registry_and_resolve() {
    let reg = DistRegistry::start();
    let spec = reg.mapping();
    publish_fixtures(&["--registry", &spec]);
    // More schema versions, to check ordering and major filtering.
    let schema_dir = fixtures().join("schema");
    let schema_dir = schema_dir.to_str().unwrap();
    for v in ["v0.10.0", "v0.2.0-alpha.1"] {
        cli_ok(&["module", "publish", schema_dir, v, "--registry", &spec]);
    }

    // The artifact is exactly CUE's shape.
    let raw = RawPush::new(&reg.host);
    let m: artifact::Manifest =
        serde_json::from_slice(&raw.manifest("fixtures.test/schema", "v0.1.0")).unwrap();
    assert_eq!(m.config.media_type, "application/vnd.cue.module.v1+json");
    assert_eq!(raw.blob("fixtures.test/schema", &m.config), b"{}");
    assert_eq!(m.layers.len(), 2);
    assert_eq!(m.layers[0].media_type, "application/zip");
    assert_eq!(m.layers[1].media_type, "application/vnd.cue.modulefile.v1");
    assert_eq!(
        raw.blob("fixtures.test/schema", &m.layers[1]),
        fixture_file("schema", "cue.mod/module.cue")
    );

    let client = reg.client(None);
    assert_eq!(
        client.versions("fixtures.test/schema@v0").unwrap(),
        ["v0.1.0", "v0.2.0-alpha.1", "v0.10.0"]
    );
    assert_eq!(
        client.versions("fixtures.test/schema@v1").unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        client.versions("fixtures.test/nothing@v0").unwrap(),
        Vec::<String>::new()
    );
    check_app_tree(&client);
    check_resolution(&client);

    // The CLI agrees.
    let out = cli_ok(&[
        "module",
        "versions",
        "fixtures.test/schema@v0",
        "--registry",
        &spec,
    ]);
    assert_eq!(out, "v0.1.0\nv0.2.0-alpha.1\nv0.10.0\n");
    let dest = tempfile::tempdir().unwrap();
    let out_dir = dest.path().join("lib");
    cli_ok(&[
        "module",
        "fetch",
        "fixtures.test/lib@v0.1.0",
        "--out",
        out_dir.to_str().unwrap(),
        "--registry",
        &spec,
        "--no-cache",
    ]);
    assert_eq!(
        std::fs::read(out_dir.join("lib.cue")).unwrap(),
        fixture_file("lib", "lib.cue")
    );

    // Republishing the same content is a no-op; different content under a published tag and a
    // version outside the path's major are refused, naming the coordinate.
    let again = cli_ok(&[
        "module",
        "publish",
        schema_dir,
        "v0.1.0",
        "--registry",
        &spec,
    ]);
    assert!(
        again.starts_with("unchanged fixtures.test/schema@v0.1.0"),
        "{again}"
    );
    let lib_dir = fixtures().join("lib");
    let o = cli(&[
        "module",
        "publish",
        lib_dir.to_str().unwrap(),
        "v1.0.0",
        "--registry",
        &spec,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("fixtures.test/lib@v1.0.0") && err.contains("not in major v0"),
        "{err}"
    );
    let changed = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("schema"), changed.path());
    std::fs::write(changed.path().join("extra.cue"), "package schema\n").unwrap();
    let o = cli(&[
        "module",
        "publish",
        changed.path().to_str().unwrap(),
        "v0.1.0",
        "--registry",
        &spec,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("fixtures.test/schema@v0.1.0") && err.contains("immutable"),
        "{err}"
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn fixtures_publish_to_an_oci_layout_and_resolve_offline() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let layout_s = layout.to_str().unwrap();
    publish_fixtures(&["--layout", layout_s]);
    assert!(layout.join("oci-layout").is_file());
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let names: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["annotations"]["org.opencontainers.image.ref.name"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(
        names,
        [
            "fixtures.test/schema:v0.1.0",
            "fixtures.test/lib:v0.1.0",
            "fixtures.test/app:v0.1.0"
        ]
    );

    // The same layout through a mapping (`oci:DIR`) and through --layout.
    let spec = format!("fixtures.test=oci:{layout_s}");
    let client = ModuleRegistry::new(RegistryConfig::new(Mapping::parse(&spec).unwrap())).unwrap();
    assert_eq!(client.versions("fixtures.test/lib@v0").unwrap(), ["v0.1.0"]);
    check_app_tree(&client);
    check_resolution(&client);
    let out = cli_ok(&[
        "module",
        "versions",
        "fixtures.test/app@v0",
        "--layout",
        layout_s,
    ]);
    assert_eq!(out, "v0.1.0\n");

    // `module tidy` closes a partial dep list under MVS: lib@v0.1.0 requires schema@v0.1.0.
    let partial = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(partial.path().join("cue.mod")).unwrap();
    std::fs::write(
        partial.path().join("cue.mod/module.cue"),
        "module: \"fixtures.test/partial@v0\"\nlanguage: version: \"v0.17.0\"\ndeps: \"fixtures.test/lib@v0\": v: \"v0.1.0\"\n",
    )
    .unwrap();
    let tidy = cli_ok(&[
        "module",
        "tidy",
        partial.path().to_str().unwrap(),
        "--layout",
        layout_s,
        "--no-cache",
    ]);
    let tidy = ModuleFile::parse(tidy.as_bytes()).unwrap();
    assert_eq!(tidy.module, "fixtures.test/partial@v0");
    assert_eq!(
        tidy.deps.keys().collect::<Vec<_>>(),
        ["fixtures.test/lib@v0", "fixtures.test/schema@v0"]
    );
    assert_eq!(tidy.deps["fixtures.test/schema@v0"].version, "v0.1.0");
    assert!(tidy.deps["fixtures.test/schema@v0"].default);

    match client
        .fetch(&mv("fixtures.test/app@v0", "v0.2.0"))
        .map(|_| ())
    {
        Err(RegistryError::NotFound { module, available }) => {
            assert_eq!(module, "fixtures.test/app@v0.2.0");
            assert_eq!(available, ["v0.1.0"]);
        }
        other => panic!("expected NotFound, got {other:?}"),
    }

    // A corrupted zip blob in the layout is refused with the coordinate named.
    let m: artifact::Manifest = {
        let l = opm_operator::registry::layout::Layout::new(&layout);
        serde_json::from_slice(&l.manifest("fixtures.test/schema", "v0.1.0").unwrap().0).unwrap()
    };
    let hex = artifact::digest_hex(&m.layers[0].digest)
        .unwrap()
        .to_string();
    let blob = layout.join("blobs/sha256").join(hex);
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let fresh = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout.clone(),
    })))
    .unwrap();
    match fresh
        .fetch(&mv("fixtures.test/schema@v0", "v0.1.0"))
        .map(|_| ())
    {
        Err(RegistryError::Invalid { module, message }) => {
            assert_eq!(module, "fixtures.test/schema@v0.1.0");
            assert!(message.contains("digest mismatch"), "{message}");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn fetch_works_from_spawn_blocking_and_plain_threads() {
    let reg = DistRegistry::start();
    publish_fixtures(&["--registry", &reg.mapping()]);
    let client = std::sync::Arc::new(reg.client(None));

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let c = client.clone();
    let files = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            c.fetch_module(&mv("fixtures.test/schema@v0", "v0.1.0"))
                .map(|f| f.files.len())
        })
        .await
        .unwrap()
    });
    assert_eq!(files.unwrap(), 2);
    let c = client.clone();
    let v = std::thread::spawn(move || c.versions("fixtures.test/lib@v0"))
        .join()
        .unwrap();
    assert_eq!(v.unwrap(), ["v0.1.0"]);
    // Dropping the client inside an async context must not panic.
    rt.block_on(async move { drop(client) });
}
