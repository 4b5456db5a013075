//! Bad artifacts pushed raw to the real registry are refused with typed errors naming the
//! coordinate; a registry that is down or never answers gives a bounded `Transient` error.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::io::Write as _;
use std::time::{Duration, Instant};

use cue::module::{ModuleVersion, Registry as _, RegistryError};
use opm_operator::registry::artifact::{self, Descriptor};
use opm_operator::registry::{Mapping, ModuleRegistry, RegistryConfig, ZipLimits};

use crate::registry::harness::{manifest, test_timeouts, DistRegistry, RawPush};

fn mv(path: &str, version: &str) -> ModuleVersion {
    ModuleVersion {
        path: path.into(),
        version: version.into(),
    }
}

fn module_file(path: &str) -> Vec<u8> {
    format!("module: \"{path}\"\nlanguage: version: \"v0.17.0\"\n").into_bytes()
}

type ZipBuilder = zip::ZipWriter<std::io::Cursor<Vec<u8>>>;

fn zip_with(module_cue: &[u8], extra: impl FnOnce(&mut ZipBuilder)) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let o = zip::write::SimpleFileOptions::default();
    w.start_file("cue.mod/module.cue", o).unwrap();
    w.write_all(module_cue).unwrap();
    w.start_file("x.cue", o).unwrap();
    w.write_all(b"package x\n").unwrap();
    extra(&mut w);
    w.finish().unwrap().into_inner()
}

/// Pushes a module-shaped artifact (config `{}`, zip, module file) with optional tampering.
/// Pushes module `path` at v0.1.0 whose zip holds its own `cue.mod/module.cue` plus what `extra`
/// writes, under a well-formed manifest: the hostile-archive cases differ only in `extra`.
fn push_entries(raw: &RawPush, path: &str, extra: impl FnOnce(&mut ZipBuilder)) {
    let mf = module_file(&format!("{path}@v0"));
    push_module(raw, path, "v0.1.0", zip_with(&mf, extra), mf, |_| {});
}

fn push_module(
    raw: &RawPush,
    repo: &str,
    tag: &str,
    zip: Vec<u8>,
    mf: Vec<u8>,
    tweak: impl FnOnce(&mut artifact::Manifest),
) {
    let config = Descriptor::of(artifact::MODULE_CONFIG_MEDIA_TYPE, artifact::CONFIG_BLOB);
    let layers = vec![
        Descriptor::of(artifact::ZIP_MEDIA_TYPE, &zip),
        Descriptor::of(artifact::MODULE_FILE_MEDIA_TYPE, &mf),
    ];
    let mut m = manifest(config, layers);
    tweak(&mut m);
    raw.push(repo, tag, &[artifact::CONFIG_BLOB.to_vec(), zip, mf], &m);
}

fn expect_invalid(client: &ModuleRegistry, path: &str, want: &str) {
    let m = mv(&format!("{path}@v0"), "v0.1.0");
    match client.fetch(&m) {
        Err(RegistryError::Invalid { module, message }) => {
            assert_eq!(module, format!("{path}@v0.1.0"));
            assert!(
                message.contains(want),
                "{path}: want {want:?} in {message:?}"
            );
            let shown = RegistryError::Invalid { module, message }.to_string();
            assert!(shown.starts_with(&format!("{path}@v0.1.0: invalid module artifact")));
        }
        Ok(_) => panic!("{path}: fetch unexpectedly succeeded"),
        Err(e) => panic!("{path}: expected Invalid, got {e:?}"),
    }
}

#[test]
fn bad_artifacts_are_refused_naming_the_coordinate() {
    let reg = DistRegistry::start();
    let raw = RawPush::new(&reg.host);
    let good = |p: &str| zip_with(&module_file(&format!("{p}@v0")), |_| {});

    let p = "fixtures.test/bad/config";
    push_module(
        &raw,
        p,
        "v0.1.0",
        good(p),
        module_file(&format!("{p}@v0")),
        |m| {
            m.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        },
    );
    let p = "fixtures.test/bad/layers";
    let mf = module_file(&format!("{p}@v0"));
    push_module(&raw, p, "v0.1.0", good(p), mf, |m| {
        m.layers.push(m.layers[1].clone());
    });
    push_entries(&raw, "fixtures.test/bad/traversal", |w| {
        w.start_file("../../evil.cue", zip::write::SimpleFileOptions::default())
            .unwrap();
    });
    push_entries(&raw, "fixtures.test/bad/symlink", |w| {
        w.add_symlink(
            "link.cue",
            "/etc/passwd",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
    });
    push_entries(&raw, "fixtures.test/bad/local", |w| {
        w.start_file(
            "cue.mod/local-module.cue",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
    });
    push_entries(&raw, "fixtures.test/bad/big", |w| {
        w.start_file("big.cue", zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(&vec![b' '; 256 << 10]).unwrap();
    });
    let p = "fixtures.test/bad/path";
    let other = module_file("fixtures.test/other@v0");
    push_module(
        &raw,
        p,
        "v0.1.0",
        zip_with(&other, |_| {}),
        other.clone(),
        |_| {},
    );
    let p = "fixtures.test/bad/innerpath";
    push_module(
        &raw,
        p,
        "v0.1.0",
        zip_with(&other, |_| {}),
        module_file(&format!("{p}@v0")),
        |_| {},
    );
    let p = "fixtures.test/bad/digest";
    push_module(
        &raw,
        p,
        "v0.1.0",
        good(p),
        module_file(&format!("{p}@v0")),
        |_| {},
    );
    // Corrupt the stored zip blob behind the registry's back: it serves the bytes as stored.
    let zip_digest = artifact::sha256_digest(&good(p));
    let blob = reg.blob_file(&zip_digest);
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();

    let mut cfg = RegistryConfig::new(Mapping::parse(&reg.mapping()).unwrap());
    cfg.timeouts = test_timeouts();
    cfg.limits = ZipLimits {
        max_total_size: 128 << 10,
        ..ZipLimits::default()
    };
    let client = ModuleRegistry::new(cfg).unwrap();
    expect_invalid(&client, "fixtures.test/bad/config", "config media type");
    expect_invalid(&client, "fixtures.test/bad/layers", "exactly 2 layers");
    expect_invalid(
        &client,
        "fixtures.test/bad/traversal",
        "invalid path element \"..\"",
    );
    expect_invalid(&client, "fixtures.test/bad/symlink", "symlink");
    expect_invalid(&client, "fixtures.test/bad/local", "local-module.cue");
    expect_invalid(&client, "fixtures.test/bad/big", "size limit");
    expect_invalid(
        &client,
        "fixtures.test/bad/path",
        "declares module \"fixtures.test/other@v0\" but \"fixtures.test/bad/path@v0\" was requested",
    );
    expect_invalid(
        &client,
        "fixtures.test/bad/innerpath",
        "zip's cue.mod/module.cue declares module \"fixtures.test/other@v0\"",
    );
    expect_invalid(&client, "fixtures.test/bad/digest", "digest mismatch");
}

#[test]
fn a_missing_version_lists_the_versions_of_its_major() {
    let reg = DistRegistry::start();
    let raw = RawPush::new(&reg.host);
    let p = "fixtures.test/bad/missing";
    for tag in ["v0.2.0", "v0.1.0", "v1.0.0", "latest"] {
        let mf = module_file(&format!("{p}@v0"));
        push_module(&raw, p, tag, zip_with(&mf, |_| {}), mf.clone(), |_| {});
    }
    let client = reg.client(None);
    let err = client
        .fetch(&mv(&format!("{p}@v0"), "v0.9.0"))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(
        err,
        RegistryError::NotFound {
            module: format!("{p}@v0.9.0"),
            available: vec!["v0.1.0".into(), "v0.2.0".into()],
        }
    );
    assert_eq!(
        err.to_string(),
        "fixtures.test/bad/missing@v0.9.0: not found (available versions: v0.1.0, v0.2.0)"
    );
    // An unknown repository: not found, nothing available.
    let err = client
        .fetch(&mv("fixtures.test/never@v0", "v0.1.0"))
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { available, .. } if available.is_empty()));
    // A version outside the path's major is refused before any network access.
    let err = client
        .fetch(&mv(&format!("{p}@v0"), "v1.0.0"))
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::Invalid { message, .. } if message.contains("not in major v0"))
    );
}

fn client_for(host: &str) -> ModuleRegistry {
    let mut cfg = RegistryConfig::new(Mapping::parse(&format!("fixtures.test={host}")).unwrap());
    cfg.timeouts = test_timeouts();
    ModuleRegistry::new(cfg).unwrap()
}

fn assert_transient(client: &ModuleRegistry, started: Instant, what: &str) {
    let err = client
        .fetch(&mv("fixtures.test/schema@v0", "v0.1.0"))
        .map(|_| ())
        .unwrap_err();
    let elapsed = started.elapsed();
    match &err {
        RegistryError::Transient { module, .. } => {
            assert_eq!(module, "fixtures.test/schema@v0.1.0")
        }
        other => panic!("{what}: expected Transient, got {other:?}"),
    }
    // The deadline is 2 s; allow scheduling slack on a loaded 2-core machine.
    assert!(
        elapsed < Duration::from_secs(5),
        "{what}: took {elapsed:?}, the deadline is 2 s"
    );
    let started = Instant::now();
    let err = client.versions("fixtures.test/schema@v0").unwrap_err();
    assert!(
        matches!(err, RegistryError::Transient { module, .. } if module == "fixtures.test/schema@v0")
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_registry_that_is_down_is_a_quick_transient_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = client_for(&format!("127.0.0.1:{port}"));
    assert_transient(&client, Instant::now(), "port closed");
}

#[test]
fn a_registry_that_never_answers_is_a_bounded_transient_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    listener.set_nonblocking(true).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    // Accept connections and hold them open without ever writing a byte; bounded to 30 s.
    let holder = std::thread::spawn(move || {
        let mut held = Vec::new();
        let start = Instant::now();
        while !stop2.load(std::sync::atomic::Ordering::SeqCst)
            && start.elapsed() < Duration::from_secs(30)
        {
            if let Ok((s, _)) = listener.accept() {
                held.push(s);
            }
            #[allow(
                clippy::disallowed_methods,
                reason = "test accept loop with a bounded lifetime"
            )]
            std::thread::sleep(Duration::from_millis(10));
        }
        held.len()
    });
    let client = client_for(&host);
    assert_transient(&client, Instant::now(), "silent listener");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(holder.join().unwrap() >= 1, "the client did connect");
}
