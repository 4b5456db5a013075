//! The render kernel end to end on the fixture set (fixtures/opm, docs/design/render.md §5.4): every module
//! published to the real `docker-registry` with the CLI, then acquire → synthesize → match →
//! execute on the generated platform fixture. The valid render equals the hand-written expected
//! JSON byte for byte (field order included); each negative fixture fails with its class and
//! names its component, contract, coordinate or `values.<path>`; 8 concurrent renders equal the
//! serial ones; `opm-operator render` prints the same bytes from the registry and from an OCI
//! layout.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cue::module::ModuleFile;
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{BuiltPlatform, ErrorClass, KernelError, ModuleRequest, RenderResult};
use opm_operator::registry::artifact::{self, Descriptor};
use opm_operator::registry::{Mapping, ModuleRegistry, RegistryConfig, Timeouts};
use opm_operator::render::{DemandReason, Error, IdentityField, Renderer};

use crate::registry::harness::{cli, cli_ok, manifest, DistRegistry, RawPush};

/// Modules of the fixture set, in publish order (dependencies first).
const MODULES: &[&str] = &[
    "core",
    "kube",
    "mini",
    "gateway",
    "negative/badout",
    "demo",
    "negative/unmatched",
    "negative/missingfqn",
    "negative/optionaltrait",
    "negative/unstatedtrait",
    "negative/requiredtrait",
    "negative/unifyconflict",
    "negative/guardinspec",
    "negative/identitypath",
    "hostile",
];

const DEPLOYMENT_TF: &str = "fixtures.test/catalogs/mini/transformers/deployment-transformer@0.1.0";
const CONFIGMAP_TF: &str = "fixtures.test/catalogs/mini/transformers/configmap-transformer@0.1.0";

fn opm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm")
}

fn publish_all(target: &[&str]) {
    for m in MODULES {
        publish(m, "v0.1.0", target);
    }
}

fn publish(dir: &str, version: &str, target: &[&str]) {
    let d = opm().join(dir);
    let mut args = vec!["module", "publish", d.to_str().unwrap(), version];
    args.extend_from_slice(target);
    cli_ok(&args);
}

/// A registry holding every fixture module at v0.1.0.
fn published() -> DistRegistry {
    let reg = DistRegistry::start();
    publish_all(&["--registry", &reg.mapping()]);
    reg
}

/// The opening most render tests share: the published fixtures (keep the registry alive), a
/// renderer reading them, and the generated fixture platform.
fn rendering() -> (DistRegistry, Renderer, BuiltPlatform) {
    let reg = published();
    let r = renderer(client(&reg));
    (reg, r, platform("platform/generated"))
}

/// A client with generous time bounds (renders run beside other builds on a small machine).
fn client(reg: &DistRegistry) -> ModuleRegistry {
    let mut cfg = RegistryConfig::new(Mapping::parse(&reg.mapping()).unwrap());
    cfg.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        deadline: Duration::from_secs(30),
        retries: 2,
    };
    ModuleRegistry::new(cfg).unwrap()
}

fn renderer(client: ModuleRegistry) -> Renderer {
    Renderer::new(Arc::new(client)).with_config(cue::Config {
        max_wall_time: Duration::from_secs(300),
        ..cue::Config::default()
    })
}

/// A built platform as the store records it: the generated directory and its tidied deps.
fn platform(dir: &str) -> BuiltPlatform {
    let dir = opm().join(dir);
    let mf = ModuleFile::parse(&std::fs::read(dir.join("cue.mod/module.cue")).unwrap()).unwrap();
    BuiltPlatform {
        dir,
        deps: mf
            .deps
            .iter()
            .map(|(p, d)| (p.clone(), d.version.clone()))
            .collect::<BTreeMap<_, _>>(),
        ..BuiltPlatform::default()
    }
}

fn values(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(opm().join("values").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn request(module: &str, values: Option<serde_json::Value>) -> ModuleRequest {
    ModuleRequest {
        name: "shop".into(),
        namespace: "prod".into(),
        path: format!("fixtures.test/modules/{module}@v0"),
        version: "v0.1.0".into(),
        values,
    }
}

fn ok(r: &Renderer, req: &ModuleRequest, p: &BuiltPlatform) -> RenderResult {
    match r.render(req, p, SkewPolicy::Warn) {
        Ok(x) => x,
        Err(e) => panic!("{} failed: {}", req.path, KernelError::from(e)),
    }
}

fn err(r: &Renderer, req: &ModuleRequest, p: &BuiltPlatform) -> Error {
    match r.render(req, p, SkewPolicy::Warn) {
        Ok(x) => panic!("{} rendered, want an error: {x:?}", req.path),
        Err(e) => e,
    }
}

/// The result as the expected file holds it: the serde shape without the digest.
fn without_digest(r: &RenderResult) -> String {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("digest");
    serde_json::to_string_pretty(&v).unwrap()
}

fn expected() -> String {
    let text = std::fs::read_to_string(opm().join("expected/demo-valid.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn the_demo_module_renders_exactly_the_expected_objects() {
    let (_reg, r, p) = rendering();
    let got = ok(&r, &request("demo", Some(values("valid.json"))), &p);
    assert_eq!(without_digest(&got), expected());
    let objects: Vec<&serde_json::Value> = got.objects.iter().map(|o| &o.object).collect();
    assert_eq!(
        got.digest,
        opm_operator::inventory::render_digest(objects.iter().copied())
    );
    // The kernel seam gives the same result.
    use opm_operator::kernel::ModuleRenderer as _;
    let via_trait = r
        .render_module(
            &request("demo", Some(values("valid.json"))),
            &p,
            SkewPolicy::Warn,
        )
        .unwrap();
    assert_eq!(via_trait, got);
}

#[test]
fn bad_values_name_the_values_path_and_the_schema_position() {
    let (_reg, r, p) = rendering();
    // The unknown key's schema position is the `#config` literal that refuses it (line 28).
    for (file, path, schema_line) in [
        ("unknown-key.json", "values.colour", 28),
        ("out-of-bounds.json", "values.replicas", 33),
        ("incomplete.json", "values.logLevel", 36),
    ] {
        let e = err(&r, &request("demo", Some(values(file))), &p);
        assert_eq!(e.class(), ErrorClass::Values, "{file}: {e}");
        let k = KernelError::from(e);
        assert!(
            k.problems.iter().all(|x| x.path.starts_with("values")),
            "{file}: {k}"
        );
        let hit: Vec<_> = k.problems.iter().filter(|x| x.path == path).collect();
        assert!(!hit.is_empty(), "{file}: no problem at {path}: {k}");
        assert!(
            hit.iter()
                .flat_map(|x| &x.positions)
                .any(|pos| pos.file == "module.cue" && pos.line == schema_line),
            "{file}: no position module.cue:{schema_line}: {k}"
        );
    }
}

#[test]
fn negative_fixtures_fail_with_their_class_and_subject() {
    let (reg, r, p) = rendering();

    // Unmatched component.
    match err(&r, &request("unmatched", None), &p) {
        Error::Resolution {
            demands, unmatched, ..
        } => {
            assert!(demands.is_empty(), "{demands:?}");
            assert_eq!(unmatched, ["worker"]);
        }
        e => panic!("unmatched: {e}"),
    }

    // Unresolved resource demand with its alternative at another API version.
    let e = err(&r, &request("missingfqn", None), &p);
    assert_eq!(e.class(), ErrorClass::Resolution);
    match &e {
        Error::Resolution { demands, .. } => {
            assert_eq!(demands.len(), 1, "{e}");
            assert_eq!(demands[0].component, "app");
            assert_eq!(
                demands[0].fqn,
                "fixtures.test/catalogs/mini/resources/container@v2"
            );
            assert_eq!(
                demands[0].reason,
                DemandReason::MissingFqn {
                    alternatives: vec!["fixtures.test/catalogs/mini/resources/container@v1".into()]
                }
            );
        }
        e => panic!("missingfqn: {e}"),
    }

    // Optional trait unhandled: a warning, and the render succeeds.
    let got = ok(&r, &request("optionaltrait", None), &p);
    assert_eq!(got.objects.len(), 1);
    assert_eq!(got.objects[0].transformer, CONFIGMAP_TF);
    assert_eq!(got.warnings.len(), 1, "{:?}", got.warnings);
    assert!(
        got.warnings[0].contains("component \"conf\"")
            && got.warnings[0].contains("fixtures.test/catalogs/mini/traits/scaling@v1"),
        "{:?}",
        got.warnings
    );

    // Trait postures: unstated and stated false.
    for (module, component, fqn, reason) in [
        (
            "unstatedtrait",
            "web",
            "fixtures.test/catalogs/mini/traits/expose@v1",
            DemandReason::TraitUnstated,
        ),
        (
            "requiredtrait",
            "conf",
            "fixtures.test/catalogs/mini/traits/scaling@v1",
            DemandReason::TraitRequired,
        ),
    ] {
        match err(&r, &request(module, None), &p) {
            Error::Resolution { demands, .. } => {
                assert_eq!(demands.len(), 1, "{module}: {demands:?}");
                assert_eq!(demands[0].component, component);
                assert_eq!(demands[0].kind, "trait");
                assert_eq!(demands[0].fqn, fqn);
                assert_eq!(demands[0].reason, reason);
            }
            e => panic!("{module}: {e}"),
        }
    }

    // The unify rung disqualifies the only candidate for `conf`, not for `aconf` (matched
    // first, with the catalog's own copy of the contract).
    match err(&r, &request("unifyconflict", None), &p) {
        Error::Resolution {
            demands, unmatched, ..
        } => {
            assert_eq!(demands.len(), 1, "{demands:?}");
            assert_eq!(demands[0].component, "conf");
            assert!(!unmatched.iter().any(|u| u == "aconf"), "{unmatched:?}");
            assert_eq!(
                demands[0].fqn,
                "fixtures.test/catalogs/mini/resources/configs@v1"
            );
            match &demands[0].reason {
                DemandReason::Disqualified { causes } => {
                    assert_eq!(causes.len(), 1, "{causes:?}");
                    assert_eq!(causes[0].0, CONFIGMAP_TF);
                }
                other => panic!("unifyconflict: {other:?}"),
            }
        }
        e => panic!("unifyconflict: {e}"),
    }

    // Guards inside the closed spec evaluate (the intended divergence from Go CUE v0.17.1).
    let got = ok(&r, &request("guardinspec", None), &p);
    assert_eq!(got.objects.len(), 1);
    assert_eq!(got.objects[0].transformer, DEPLOYMENT_TF);
    let d = &got.objects[0].object;
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.fixtures.test/web:2.0.0"
    );

    // Identity: a declared module path other than the coordinate.
    match err(&r, &request("identitypath", None), &p) {
        Error::Identity {
            field,
            declared,
            fetched,
            coordinate,
        } => {
            assert_eq!(field, IdentityField::Path);
            assert_eq!(declared, "fixtures.test/modules/somebody-else@v0");
            assert_eq!(fetched, "fixtures.test/modules/identitypath@v0");
            assert_eq!(coordinate, "fixtures.test/modules/identitypath@v0.1.0");
        }
        e => panic!("identitypath: {e}"),
    }

    // Identity: the demo published under a tag its metadata does not declare.
    publish("demo", "v0.2.0", &["--registry", &reg.mapping()]);
    let mut req = request("demo", Some(values("valid.json")));
    req.version = "v0.2.0".into();
    match err(&r, &req, &p) {
        Error::Identity {
            field,
            declared,
            fetched,
            ..
        } => {
            assert_eq!(field, IdentityField::Version);
            assert_eq!(declared, "0.1.0");
            assert_eq!(fetched, "0.2.0");
        }
        e => panic!("demo v0.2.0: {e}"),
    }

    // A version that is not published: resolution, naming the coordinate and what exists.
    let mut req = request("demo", None);
    req.version = "v0.9.0".into();
    let e = err(&r, &req, &p);
    assert_eq!(e.class(), ErrorClass::Resolution);
    let text = e.to_string();
    assert!(
        text.contains("fixtures.test/modules/demo@v0.9.0") && text.contains("v0.1.0"),
        "{text}"
    );

    // A transformer output the closed ConfigMap refuses: the pair fails, naming both.
    let bad = platform("negative/platform-badout");
    match err(&r, &request("demo", Some(values("valid.json"))), &bad) {
        e @ Error::Execute { .. } => {
            assert_eq!(e.class(), ErrorClass::Other);
            let Error::Execute { failures, .. } = &e else {
                unreachable!()
            };
            assert_eq!(failures.len(), 1, "{e}");
            assert_eq!(failures[0].component, "conf");
            assert_eq!(
                failures[0].transformer,
                "fixtures.test/catalogs/badout/transformers/bad-transformer@0.1.0"
            );
            assert!(
                failures[0]
                    .problems
                    .iter()
                    .any(|p| p.path.ends_with("spec")),
                "{e}"
            );
        }
        e => panic!("badout: {e}"),
    }
}

#[test]
fn bad_artifacts_and_skew_are_typed() {
    let reg = published();
    let raw = RawPush::new(&reg.host);
    // A zip carrying cue.mod/local-module.cue, and a manifest with a foreign config type.
    let dir = opm().join("negative/local-module");
    let files: Vec<(String, Vec<u8>)> = [
        "cue.mod/module.cue",
        "cue.mod/local-module.cue",
        "module.cue",
    ]
    .iter()
    .map(|f| (f.to_string(), std::fs::read(dir.join(f)).unwrap()))
    .collect();
    let zip = {
        use std::io::Write as _;
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in &files {
            w.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
                .unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap().into_inner()
    };
    let mf = files[0].1.clone();
    let push = |repo: &str, config_type: &str| {
        let config = Descriptor::of(config_type, artifact::CONFIG_BLOB);
        let layers = vec![
            Descriptor::of(artifact::ZIP_MEDIA_TYPE, &zip),
            Descriptor::of(artifact::MODULE_FILE_MEDIA_TYPE, &mf),
        ];
        raw.push(
            repo,
            "v0.1.0",
            &[artifact::CONFIG_BLOB.to_vec(), zip.clone(), mf.clone()],
            &manifest(config, layers),
        );
    };
    push(
        "fixtures.test/modules/localmodule",
        artifact::MODULE_CONFIG_MEDIA_TYPE,
    );
    push(
        "fixtures.test/modules/wrongconfig",
        "application/vnd.oci.image.config.v1+json",
    );
    let r = renderer(client(&reg));
    let p = platform("platform/generated");
    for (module, want) in [
        ("localmodule", "local-module.cue"),
        ("wrongconfig", "application/vnd.oci.image.config.v1+json"),
    ] {
        let e = err(&r, &request(module, None), &p);
        assert_eq!(e.class(), ErrorClass::Resolution, "{module}: {e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("fixtures.test/modules/{module}@v0.1.0")) && text.contains(want),
            "{module}: {text}"
        );
    }

    // Skew: the platform pins mini at v0.0.9, older than the demo's v0.1.0 requirement.
    publish("mini", "v0.0.9", &["--registry", &reg.mapping()]);
    let mut older = platform("platform/generated");
    older
        .deps
        .insert("fixtures.test/catalogs/mini@v0".into(), "v0.0.9".into());
    let req = request("demo", Some(values("valid.json")));
    let warned = r.render(&req, &older, SkewPolicy::Warn).unwrap();
    assert_eq!(
        warned.warnings,
        ["module fixtures.test/modules/demo@v0.1.0 requires fixtures.test/catalogs/mini@v0 v0.1.0, newer than the platform's v0.0.9"]
    );
    assert_eq!(warned.objects.len(), 3);
    let refused = r.render(&req, &older, SkewPolicy::Refuse).unwrap_err();
    assert_eq!(refused.class(), ErrorClass::SkewRefused, "{refused}");

    // No platform.
    let none = r
        .render(&req, &BuiltPlatform::default(), SkewPolicy::Warn)
        .unwrap_err();
    assert_eq!(none.class(), ErrorClass::PlatformNotReady);
}

#[test]
fn concurrent_renders_equal_serial_ones() {
    let (_reg, r, p) = rendering();
    let reqs: Vec<ModuleRequest> = (1..=8)
        .map(|i| {
            let mut v = values("valid.json");
            v["replicas"] = i.into();
            v["image"]["tag"] = format!("1.0.{i}").into();
            request("demo", Some(v))
        })
        .collect();
    let serial: Vec<RenderResult> = reqs.iter().map(|q| ok(&r, q, &p)).collect();
    let concurrent: Vec<RenderResult> = std::thread::scope(|s| {
        let hs: Vec<_> = reqs
            .iter()
            .map(|q| {
                let r = r.clone();
                let p = &p;
                s.spawn(move || ok(&r, q, p))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(serial, concurrent);
    for (i, got) in serial.iter().enumerate() {
        let d = &got.objects[2].object;
        assert_eq!(d["spec"]["replicas"], i + 1);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"],
            format!("registry.fixtures.test/demo/web:1.0.{}", i + 1)
        );
    }
}

#[test]
fn the_cli_prints_the_same_bytes_from_a_registry_and_an_oci_layout() {
    let reg = published();
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    publish_all(&["--layout", layout.to_str().unwrap()]);
    let platform = opm().join("platform/generated");
    let valid = opm().join("values/valid.json");
    let common = [
        "render",
        "fixtures.test/modules/demo@v0.1.0",
        "--platform",
        platform.to_str().unwrap(),
        "--values",
        valid.to_str().unwrap(),
        "--name",
        "shop",
        "--namespace",
        "prod",
        "--timeout",
        "300",
    ];
    let mapping = reg.mapping();
    let mut from_registry = common.to_vec();
    from_registry.extend(["--registry", mapping.as_str()]);
    let mut from_layout = common.to_vec();
    from_layout.extend(["--layout", layout.to_str().unwrap()]);
    let a = cli_ok(&from_registry);
    let b = cli_ok(&from_layout);
    assert_eq!(a, b);
    assert_eq!(a.matches("\n---\n").count() + 1, 3, "{a}");
    assert!(a.starts_with(&format!(
        "---\n# component: conf, transformer: {CONFIGMAP_TF}\napiVersion: v1\nkind: ConfigMap\n"
    )));
    assert!(a.contains(&format!("# component: web, transformer: {DEPLOYMENT_TF}\n")));

    // JSON output is the RenderResult; the objects equal the kernel's.
    let mut json = from_layout.clone();
    json.extend(["-o", "json", "--runtime-name", "opm-controller"]);
    let out: serde_json::Value = serde_json::from_str(&cli_ok(&json)).unwrap();
    let mut out_no_digest = out.clone();
    out_no_digest.as_object_mut().unwrap().remove("digest");
    assert_eq!(
        serde_json::to_string_pretty(&out_no_digest).unwrap(),
        expected()
    );

    // A bad values file: non-zero exit, values.<path> and the schema's file:line on stderr.
    let bad = opm().join("values/out-of-bounds.json");
    let mut args = from_layout.clone();
    let pos = args
        .iter()
        .position(|a| *a == valid.to_str().unwrap())
        .unwrap();
    args[pos] = bad.to_str().unwrap();
    let o = cli(&args);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("values.replicas") && err.contains("module.cue:33:"),
        "{err}"
    );
}

#[test]
fn an_instance_package_renders_like_the_module_request() {
    let (_reg, r, p) = rendering();
    let got = match r.render_package(&opm().join("package/shop"), &p, SkewPolicy::Warn) {
        Ok(x) => x,
        Err(e) => panic!("package/shop: {}", KernelError::from(e)),
    };
    assert_eq!(without_digest(&got), expected());
    // A module directory is not an instance package.
    let e = r
        .render_package(&opm().join("demo"), &p, SkewPolicy::Warn)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::UnsupportedKind, "{e}");
}

/// Regression: a package's render errors named the directory it was read from; a ModulePackage
/// artifact is extracted into a fresh temporary directory per reconcile, so the same failure
/// gave a new message (and a new Warning) every time. The same package in two directories now
/// fails with one message, naming its module path (or "the instance package" before its module
/// file is read). Both failures here happen before any registry I/O.
#[test]
fn a_package_error_names_the_module_not_the_directory_it_was_read_from() {
    let r = Renderer::new(Arc::new(cue::module::MemRegistry::new()));
    let p = platform("platform/generated");
    let module = std::fs::read(opm().join("package/shop/cue.mod/module.cue")).unwrap();
    for (files, want) in [
        (
            vec![
                ("cue.mod/module.cue", module.as_slice()),
                ("notes.txt", b"x"),
            ],
            "fixtures.test/packages/shop@v0: not an OPM module instance package: the directory \
             holds no CUE package",
        ),
        (
            vec![("instance.cue", b"package shop\n".as_slice())],
            "the instance package: the module does not load\n  : cue.mod/module.cue: ",
        ),
    ] {
        let mut messages = Vec::new();
        for _ in 0..2 {
            let dir = tempfile::tempdir().unwrap();
            for (rel, bytes) in &files {
                let path = dir.path().join(rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, bytes).unwrap();
            }
            let e = r
                .render_package(dir.path(), &p, SkewPolicy::Warn)
                .unwrap_err();
            let message = KernelError::from(e).to_string();
            assert!(message.starts_with(want), "{message}");
            assert!(
                !message.contains(&dir.path().display().to_string()),
                "{message}"
            );
            messages.push(message);
        }
        assert_eq!(messages[0], messages[1]);
    }
}

#[test]
fn an_exceeded_evaluation_limit_is_a_timeout() {
    let reg = published();
    let p = platform("platform/generated");
    for config in [
        cue::Config {
            max_steps: 200,
            ..cue::Config::default()
        },
        cue::Config {
            max_wall_time: Duration::from_millis(1),
            ..cue::Config::default()
        },
    ] {
        let r = Renderer::new(Arc::new(client(&reg))).with_config(config);
        let e = r
            .render(
                &request("demo", Some(values("valid.json"))),
                &p,
                SkewPolicy::Warn,
            )
            .unwrap_err();
        assert_eq!(e.class(), ErrorClass::Timeout, "{e}");
        assert!(
            e.to_string().contains("fixtures.test/modules/demo@v0.1.0"),
            "{e}"
        );
    }
}

/// Issue 41: the hostile module (a comprehension of 30 million list elements) is refused by the
/// memory budget, typed (class ResourceExhausted), naming the budget, the figure reached and the
/// value being evaluated; the demo renders under the same budget.
#[test]
fn a_module_past_the_memory_budget_is_refused_naming_the_budget_and_the_value() {
    let reg = published();
    let p = platform("platform/generated");
    let budget = 32u64 << 20;
    let r = Renderer::new(Arc::new(client(&reg))).with_config(
        opm_operator::kernel::limits::render_config(
            cue::Config {
                max_wall_time: Duration::from_secs(300),
                ..cue::Config::default()
            },
            budget,
        ),
    );
    ok(&r, &request("demo", Some(values("valid.json"))), &p);
    let e = r
        .render(&request("hostile", None), &p, SkewPolicy::Warn)
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::ResourceExhausted, "{e}");
    let Error::Memory { exceeded, .. } = &e else {
        panic!("not a memory error: {e:?}")
    };
    assert_eq!(exceeded.budget, budget);
    assert!(exceeded.reached > budget, "{exceeded:?}");
    assert!(
        exceeded.path.contains("conf") && exceeded.path.contains("cells"),
        "the path names the value: {exceeded:?}"
    );
    let text = e.to_string();
    assert!(
        text.starts_with("fixtures.test/modules/hostile@v0.1.0: render memory budget exceeded: evaluation memory budget (32.0 MiB) exceeded"),
        "{text}"
    );
}

/// `opm-operator render --render-memory-limit` refuses the hostile module, naming the budget
/// (a small budget keeps the test quick in a debug build; the defaults' time and peak memory
/// are measured by hand on the release build with `/usr/bin/time -v`, never in a test).
#[test]
fn the_cli_refuses_the_hostile_module_past_its_memory_limit() {
    let reg = published();
    let platform = opm().join("platform/generated");
    let o = cli(&[
        "render",
        "fixtures.test/modules/hostile@v0.1.0",
        "--platform",
        platform.to_str().unwrap(),
        "--registry",
        &reg.mapping(),
        "--render-memory-limit",
        "24Mi",
        "--timeout",
        "300",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("render failed (ResourceExhausted)"), "{err}");
    assert!(
        err.contains("evaluation memory budget (24.0 MiB) exceeded"),
        "{err}"
    );
}

#[test]
fn a_generated_and_built_platform_renders_the_demo_exactly() {
    use opm_operator::kernel::{PlatformBuilder as _, PlatformEntry, PlatformInput};
    use opm_operator::platform::{
        Generator, Layout, PackageIdentity, PlatformKernel, RegistryShape,
    };
    let reg = published();
    let c = Arc::new(client(&reg));
    let kernel = PlatformKernel::new(
        c.clone(),
        Generator::new(
            "fixtures.test/core@v0",
            "v0.1.0",
            RegistryShape::CatalogEntry,
        ),
        cue::Config::default(),
    );
    let files = kernel
        .generate(&PlatformInput {
            platform_type: "kubernetes".into(),
            entries: vec![PlatformEntry {
                path: "fixtures.test/catalogs/mini@v0".into(),
                version: "0.1.0".into(),
                enable: true,
            }],
        })
        .unwrap_or_else(|e| panic!("generate: {e}"));
    let root = tempfile::tempdir().unwrap();
    let dir = Layout::new(root.path())
        .unwrap()
        .write(&PackageIdentity::unclaimed(1).unwrap(), &files)
        .unwrap();
    let built = kernel.build(&dir).unwrap_or_else(|e| panic!("build: {e}"));
    assert_eq!(built.transformers, [CONFIGMAP_TF, DEPLOYMENT_TF]);
    let r = renderer(client(&reg));
    let got = ok(&r, &request("demo", Some(values("valid.json"))), &built);
    assert_eq!(without_digest(&got), expected());
}

/// Issue 28 item 3: `--platform` takes the Platform a user applies as well as a generated
/// directory; both go through the Platform reconciler's generator and print the same bytes.
#[test]
fn render_of_a_platform_manifest_and_of_its_generated_directory_print_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    publish_all(&["--layout", layout.to_str().unwrap()]);
    let manifest = dir.path().join("platform.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: opmodel.dev/v1alpha1\nkind: Platform\nmetadata:\n  name: cluster\n\
         spec:\n  type: kubernetes\n  registry:\n    fixtures.test/catalogs/mini@v0:\n      \
         version: \"0.1.0\"\n",
    )
    .unwrap();
    let valid = opm().join("values/valid.json");
    let render = |platform: &std::path::Path| {
        cli_ok(&[
            "render",
            "fixtures.test/modules/demo@v0.1.0",
            "--platform",
            platform.to_str().unwrap(),
            "--core-module",
            "fixtures.test/core@v0",
            "--core-version",
            "v0.1.0",
            "--layout",
            layout.to_str().unwrap(),
            "--values",
            valid.to_str().unwrap(),
            "--name",
            "shop",
            "--namespace",
            "prod",
            "-o",
            "json",
        ])
    };
    let from_manifest = render(&manifest);
    let from_dir = render(&opm().join("platform/generated"));
    assert_eq!(from_manifest, from_dir);
    let out: serde_json::Value = serde_json::from_str(&from_manifest).unwrap();
    assert_eq!(out["objects"].as_array().unwrap().len(), 3, "{out:#}");

    // A manifest that is not the singleton, or not a Platform, is refused with the reason.
    let other = dir.path().join("other.yaml");
    std::fs::write(
        &other,
        std::fs::read_to_string(&manifest)
            .unwrap()
            .replace("name: cluster", "name: other"),
    )
    .unwrap();
    let err = cli_err(&[
        "render",
        "fixtures.test/modules/demo@v0.1.0",
        "--platform",
        other.to_str().unwrap(),
        "--layout",
        layout.to_str().unwrap(),
    ]);
    assert!(err.contains("must be named \"cluster\""), "{err}");
    let junk = dir.path().join("junk.yaml");
    std::fs::write(&junk, "just: [text").unwrap();
    let err = cli_err(&[
        "render",
        "fixtures.test/modules/demo@v0.1.0",
        "--platform",
        junk.to_str().unwrap(),
        "--layout",
        layout.to_str().unwrap(),
    ]);
    assert!(err.contains("not a Platform manifest"), "{err}");
}

/// Runs the CLI, asserts failure and returns stderr.
fn cli_err(args: &[&str]) -> String {
    let o = cli(args);
    assert!(!o.status.success(), "opm-operator {args:?} succeeded");
    String::from_utf8(o.stderr).unwrap()
}
