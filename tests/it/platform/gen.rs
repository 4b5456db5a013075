//! Platform generation, build, contract inventory and catalog acquisition against the real
//! `docker-registry` with the OPM fixture modules published (docs/design/operator.md §3.3–§3.6, §4.1
//! steps 4–5 and 7; docs/design/render.md §1.4–§1.5).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use opm_operator::controller::platform_gate;
use opm_operator::kernel::{
    AcquireError, CatalogAcquirer, ErrorClass, PlatformBuilder, PlatformEntry, PlatformInput,
};
use opm_operator::platform::{Generator, Layout, PackageIdentity, PlatformKernel, RegistryShape};
use opm_operator::registry::ModuleRegistry;

use crate::registry::harness::{fixtures, DistRegistry};

const CORE: &str = "fixtures.test/core@v0";
const MINI: &str = "fixtures.test/catalogs/mini@v0";
const GATEWAY: &str = "fixtures.test/catalogs/gateway@v0";
const GATEWAY2: &str = "fixtures.test/catalogs/gateway2@v0";
const KUBE: &str = "fixtures.test/x/kube@v0";
const EXPOSE: &str = "fixtures.test/catalogs/mini/traits/expose@v1";
const CONTAINER: &str = "fixtures.test/catalogs/mini/resources/container@v1";
const DEPLOY_TF: &str = "fixtures.test/catalogs/mini/transformers/deployment-transformer@0.1.0";
const CM_TF: &str = "fixtures.test/catalogs/mini/transformers/configmap-transformer@0.1.0";
const ROUTE_TF: &str = "fixtures.test/catalogs/gateway/transformers/route-transformer@0.1.0";
const ROUTE2_TF: &str = "fixtures.test/catalogs/gateway2/transformers/route-transformer@0.1.0";

pub(crate) fn opm(dir: &str) -> PathBuf {
    fixtures().join("opm").join(dir)
}

/// The files of a fixture module directory, `/`-separated relative paths.
pub(crate) fn module_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The gateway provider catalog renamed to `gateway2` (a second provider of `expose`).
pub(crate) fn gateway2_files() -> Vec<(String, Vec<u8>)> {
    renamed(module_files(&opm("gateway")), "gateway", "gateway2")
}

/// `files` with every `from` in their text replaced by `to` (a module published under a new path).
pub(crate) fn renamed(
    files: Vec<(String, Vec<u8>)>,
    from: &str,
    to: &str,
) -> Vec<(String, Vec<u8>)> {
    files
        .into_iter()
        .map(|(p, b)| {
            let text = String::from_utf8(b).unwrap().replace(from, to);
            (p, text.into_bytes())
        })
        .collect()
}

/// A registry with core, kube, mini, gateway, gateway2 and demo published at v0.1.0.
pub(crate) fn published() -> (DistRegistry, Arc<ModuleRegistry>) {
    let reg = DistRegistry::start();
    let client = reg.client(None);
    for dir in ["core", "kube", "mini", "gateway", "demo"] {
        client.publish(&opm(dir), "v0.1.0").unwrap();
    }
    client.publish_files(&gateway2_files(), "v0.1.0").unwrap();
    (reg, Arc::new(client))
}

fn kernel(client: &Arc<ModuleRegistry>, shape: RegistryShape) -> PlatformKernel {
    let mut g = Generator::new(CORE, "v0.1.0", shape);
    if shape == RegistryShape::Subscription {
        g.definition = "#SubscriptionPlatform".into();
    }
    PlatformKernel::new(client.clone(), g, cue::Config::default())
}

fn input(entries: &[(&str, &str, bool)]) -> PlatformInput {
    PlatformInput {
        platform_type: "kubernetes".into(),
        entries: entries
            .iter()
            .map(|(p, v, e)| PlatformEntry {
                path: p.to_string(),
                version: v.to_string(),
                enable: *e,
            })
            .collect(),
    }
}

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/it/platform/gen_golden")
            .join(name),
    )
    .unwrap()
}

/// Generates through `k` and writes the package with `Layout` under `root`.
fn generate_into(k: &PlatformKernel, root: &Path, gen: i64, i: &PlatformInput) -> PathBuf {
    let files = k.generate(i).unwrap_or_else(|e| panic!("{e}"));
    let layout = Layout::new(root).unwrap();
    layout
        .write(&PackageIdentity::unclaimed(gen).unwrap(), &files)
        .unwrap()
}

#[test]
fn closure_and_generation_are_byte_identical_and_match_the_golden_files() {
    let (_reg, client) = published();
    let k = kernel(&client, RegistryShape::CatalogEntry);
    let i = input(&[(MINI, "0.1.0", true), (GATEWAY, "0.1.0", false)]);
    let files = k.generate(&i).unwrap();
    let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["cue.mod/module.cue", "platform.cue"]);
    assert_eq!(
        String::from_utf8_lossy(&files[0].1),
        String::from_utf8_lossy(&golden("mini-gateway.module.cue"))
    );
    assert_eq!(
        String::from_utf8_lossy(&files[1].1),
        String::from_utf8_lossy(&golden("mini-gateway.platform.cue"))
    );
    // Same input, a fresh client (no memo), reversed entry order: the same bytes.
    let again = kernel(&Arc::new(_reg.client(None)), RegistryShape::CatalogEntry)
        .generate(&input(&[(GATEWAY, "0.1.0", false), (MINI, "0.1.0", true)]))
        .unwrap();
    assert_eq!(again, files);

    // The alpha.4 subscription shape: the same closure; the enabled catalog is imported for the
    // materialised #composedTransformers.
    let sub = kernel(&client, RegistryShape::Subscription)
        .generate(&i)
        .unwrap();
    assert_eq!(sub[0], files[0]);
    assert_eq!(
        String::from_utf8_lossy(&sub[1].1),
        String::from_utf8_lossy(&golden("mini-gateway.subscription.cue"))
    );
}

#[test]
fn unpublished_pins_are_resolution_and_an_unreachable_registry_is_transient() {
    let (mut reg, client) = published();
    let k = kernel(&client, RegistryShape::CatalogEntry);
    let e = k.generate(&input(&[(MINI, "0.9.0", true)])).unwrap_err();
    assert_eq!(e.class, ErrorClass::Resolution, "{e}");
    assert!(
        e.message
            .starts_with("resolving platform dependencies: fixtures.test/catalogs/mini@v0.9.0"),
        "{e}"
    );
    assert!(
        e.message.contains("v0.1.0"),
        "published versions listed: {e}"
    );
    let e = k.generate(&input(&[(MINI, "0.1", true)])).unwrap_err();
    assert_eq!(e.class, ErrorClass::Other, "{e}");
    assert!(e.message.starts_with("generating platform module: "), "{e}");
    reg.stop();
    let fresh = kernel(&Arc::new(reg.client(None)), RegistryShape::CatalogEntry);
    let e = fresh
        .generate(&input(&[(MINI, "0.1.0", true)]))
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::TransientPull, "{e}");
    assert!(
        e.message.starts_with("resolving platform dependencies: "),
        "{e}"
    );
}

#[test]
fn mini_alone_builds_routable_and_discriminated_with_its_provider_contract_unfulfilled() {
    let (_reg, client) = published();
    let k = kernel(&client, RegistryShape::CatalogEntry);
    let root = tempfile::tempdir().unwrap();
    let dir = generate_into(&k, root.path(), 1, &input(&[(MINI, "0.1.0", true)]));
    let built = k.build(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(built.dir, dir);
    let deps: Vec<(&str, &str)> = built
        .deps
        .iter()
        .map(|(p, v)| (p.as_str(), v.as_str()))
        .collect();
    assert_eq!(deps, [(MINI, "v0.1.0"), (CORE, "v0.1.0"), (KUBE, "v0.1.0")]);
    assert_eq!(built.transformers, [CM_TF, DEPLOY_TF]);
    let inv = &built.contracts;
    assert!(inv.routable && inv.discriminated, "{inv:?}");
    assert_eq!(inv.defined_by.len(), 5, "{inv:?}");
    assert!(inv.defined_by.values().all(|c| c == MINI), "{inv:?}");
    assert_eq!(inv.required_by[CONTAINER], [DEPLOY_TF]);
    assert!(inv.provided_by.is_empty() && inv.over_subscribed.is_empty());
    // mini defines `expose` as provider-fulfilled and nothing provides it.
    assert_eq!(inv.unfulfilled, [EXPOSE]);
    assert!(!inv.fulfilled);
    assert!(platform_gate::gate(inv).is_none());
    let f = platform_gate::fulfilment(inv);
    assert_eq!(f.reason, "UnfulfilledContracts");
    assert!(
        f.message.contains(&format!("{EXPOSE} (defined by {MINI})")),
        "{}",
        f.message
    );

    // The alpha.4 subscription shape materialises the same catalog from the registry.
    let sk = kernel(&client, RegistryShape::Subscription);
    let sdir = generate_into(&sk, root.path(), 2, &input(&[(MINI, "0.1.0", true)]));
    let sbuilt = sk.build(&sdir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sbuilt.transformers, built.transformers);
    assert_eq!(sbuilt.contracts, built.contracts);
}

#[test]
fn a_provider_catalog_fulfils_and_two_providers_oversubscribe() {
    let (_reg, client) = published();
    let k = kernel(&client, RegistryShape::CatalogEntry);
    let root = tempfile::tempdir().unwrap();

    let dir = generate_into(
        &k,
        root.path(),
        1,
        &input(&[(MINI, "0.1.0", true), (GATEWAY, "0.1.0", true)]),
    );
    let built = k.build(&dir).unwrap_or_else(|e| panic!("{e}"));
    let inv = &built.contracts;
    assert_eq!(built.transformers, [ROUTE_TF, CM_TF, DEPLOY_TF]);
    assert_eq!(inv.provided_by[EXPOSE], [GATEWAY]);
    assert_eq!(inv.required_by[EXPOSE], [ROUTE_TF]);
    assert_eq!(inv.required_by[CONTAINER], [ROUTE_TF, DEPLOY_TF]);
    assert!(
        inv.fulfilled && inv.routable && inv.discriminated,
        "{inv:?}"
    );
    assert!(platform_gate::gate(inv).is_none());
    assert_eq!(platform_gate::fulfilment(inv).reason, "ContractsFulfilled");

    // A disabled provider provides nothing.
    let off = generate_into(
        &k,
        root.path(),
        2,
        &input(&[(MINI, "0.1.0", true), (GATEWAY, "0.1.0", false)]),
    );
    let off = k.build(&off).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(off.transformers, [CM_TF, DEPLOY_TF]);
    assert!(!off.contracts.fulfilled);

    // Two providers of one contract: over-subscribed, and their equal predicates comparable.
    let two = generate_into(
        &k,
        root.path(),
        3,
        &input(&[
            (MINI, "0.1.0", true),
            (GATEWAY, "0.1.0", true),
            (GATEWAY2, "0.1.0", true),
        ]),
    );
    let two = k.build(&two).unwrap_or_else(|e| panic!("{e}"));
    let inv = &two.contracts;
    assert_eq!(inv.provided_by[EXPOSE], [GATEWAY2, GATEWAY]);
    assert_eq!(inv.over_subscribed, [EXPOSE]);
    assert!(!inv.routable && !inv.discriminated && inv.fulfilled);
    assert_eq!(inv.comparable.len(), 1, "{inv:?}");
    assert_eq!(inv.comparable[0].broader, ROUTE_TF);
    assert_eq!(inv.comparable[0].narrower, ROUTE2_TF);
    assert_eq!(inv.comparable[0].contracts, [CONTAINER, EXPOSE]);
    let refusal = platform_gate::gate(inv).unwrap();
    assert_eq!(refusal.reason, "OverSubscribedContracts");
    assert!(
        refusal.message.contains(&format!(
            "\n  {EXPOSE} (defined by {MINI}) provided by {GATEWAY2}, {GATEWAY}"
        )),
        "{}",
        refusal.message
    );
    assert!(
        refusal.message.contains(&format!(
            "\n  {ROUTE_TF} (broader) and {ROUTE2_TF} (narrower) over {CONTAINER}, {EXPOSE}"
        )),
        "{}",
        refusal.message
    );
}

#[test]
fn a_stamped_version_the_catalog_does_not_declare_trips_the_build() {
    let (reg, client) = published();
    // The gateway's bytes (declaring 0.1.0) published under v0.2.0.
    reg.client(None).publish(&opm("gateway"), "v0.2.0").unwrap();
    let k = kernel(&client, RegistryShape::CatalogEntry);
    let root = tempfile::tempdir().unwrap();
    let dir = generate_into(
        &k,
        root.path(),
        1,
        &input(&[(MINI, "0.1.0", true), (GATEWAY, "0.2.0", true)]),
    );
    let e = k.build(&dir).unwrap_err();
    assert_eq!(e.class, ErrorClass::Other, "{e}");
    assert!(e.message.starts_with("building platform module: "), "{e}");
    let at = format!("#registry.\"{GATEWAY}\".version");
    let p = e
        .problems
        .iter()
        .find(|p| p.path == at)
        .unwrap_or_else(|| panic!("no problem at {at}: {e}"));
    assert!(
        p.message.contains("\"0.2.0\"") && p.message.contains("\"0.1.0\""),
        "{}",
        p.message
    );
    assert!(e.message.contains(&at), "{e}");

    // The fixtures' hand-written tripwires: the stamp and the key binding.
    let e = k
        .build(&opm("negative/platform-version-mismatch"))
        .unwrap_err();
    assert!(e.problems.iter().any(|p| p.path == at), "{e}");
    let e = k.build(&opm("negative/platform-key-mismatch")).unwrap_err();
    assert_eq!(e.class, ErrorClass::Other, "{e}");
    assert!(
        e.problems
            .iter()
            .any(|p| p.path.ends_with("#catalog.metadata.modulePath")),
        "{e}"
    );
}

#[test]
fn the_shape_gate_refuses_a_package_that_is_not_a_platform() {
    let (_reg, client) = published();
    let k = kernel(&client, RegistryShape::CatalogEntry);
    // The demo module is a valid package but a #Module, not a #Platform.
    let e = k.build(&opm("demo")).unwrap_err();
    assert_eq!(e.class, ErrorClass::Other, "{e}");
    assert!(
        e.message
            .starts_with("building platform module: the package is not a #Platform"),
        "{e}"
    );
}

#[test]
fn the_acquirer_reads_provides_and_requires_and_types_the_wrong_kind() {
    let (_reg, client) = published();
    let k = kernel(&client, RegistryShape::CatalogEntry);
    let gw = k
        .acquire(GATEWAY, "0.1.0")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gw.provides, [EXPOSE]);
    let req: Vec<(&str, &str)> = gw
        .requires
        .iter()
        .map(|(p, v)| (p.as_str(), v.as_str()))
        .collect();
    assert_eq!(req, [(MINI, "v0.1.0"), (CORE, "v0.1.0"), (KUBE, "v0.1.0")]);
    let mini = k.acquire(MINI, "0.1.0").unwrap_or_else(|e| panic!("{e}"));
    assert!(mini.provides.is_empty(), "{:?}", mini.provides);

    match k.acquire("fixtures.test/modules/demo@v0", "0.1.0") {
        Err(AcquireError::WrongKind(m)) => {
            assert!(m.contains("fixtures.test/modules/demo@v0.1.0"), "{m}");
            assert!(m.contains("\"Module\""), "{m}");
        }
        other => panic!("expected WrongKind, got {other:?}"),
    }
    match k.acquire(GATEWAY, "0.3.0") {
        Err(AcquireError::Other(e)) => {
            assert_eq!(e.class, ErrorClass::Resolution, "{e}");
            assert!(
                e.message.contains("fixtures.test/catalogs/gateway@v0.3.0"),
                "{e}"
            );
        }
        other => panic!("expected a resolution error, got {other:?}"),
    }
}

/// The closure selects the highest version any module requires, so an entry pinned lower than a
/// co-subscribed catalog requires is imported at the higher version, and the stamp trips.
#[test]
fn a_closure_that_raises_an_entry_above_its_pin_trips_the_stamp() {
    let (reg, client) = published();
    let publisher = reg.client(None);
    // mini v0.2.0 declares version 0.2.0.
    let mini2: Vec<(String, Vec<u8>)> = module_files(&opm("mini"))
        .into_iter()
        .map(|(p, b)| {
            let t = String::from_utf8(b).unwrap();
            let t = if p == "identity/identity.cue" {
                t.replace("*\"0.1.0\"", "*\"0.2.0\"")
            } else {
                t
            };
            (p, t.into_bytes())
        })
        .collect();
    publisher.publish_files(&mini2, "v0.2.0").unwrap();
    // gateway2 v0.2.0 requires mini v0.2.0.
    let gw2: Vec<(String, Vec<u8>)> = gateway2_files()
        .into_iter()
        .map(|(p, b)| {
            let t = String::from_utf8(b).unwrap();
            let t = if p == "cue.mod/module.cue" {
                t.replace(
                    "\"fixtures.test/catalogs/mini@v0\": {\n\t\tv: \"v0.1.0\"",
                    "\"fixtures.test/catalogs/mini@v0\": {\n\t\tv: \"v0.2.0\"",
                )
            } else {
                t.replace("0.1.0", "0.2.0")
            };
            (p, t.into_bytes())
        })
        .collect();
    publisher.publish_files(&gw2, "v0.2.0").unwrap();

    let k = kernel(&client, RegistryShape::CatalogEntry);
    let i = input(&[(MINI, "0.1.0", true), (GATEWAY2, "0.2.0", true)]);
    let root = tempfile::tempdir().unwrap();
    let dir = generate_into(&k, root.path(), 1, &i);
    let module = std::fs::read_to_string(dir.join("cue.mod/module.cue")).unwrap();
    assert!(
        module.contains("\t\"fixtures.test/catalogs/mini@v0\": {\n\t\tv: \"v0.2.0\"\n"),
        "{module}"
    );
    let e = k.build(&dir).unwrap_err();
    let at = format!("#registry.\"{MINI}\".version");
    let p = e
        .problems
        .iter()
        .find(|p| p.path == at)
        .unwrap_or_else(|| panic!("no problem at {at}: {e}"));
    assert!(
        p.message.contains("\"0.1.0\"") && p.message.contains("\"0.2.0\""),
        "{}",
        p.message
    );
}

/// The render kernel sees a generated and built platform exactly as it sees the hand-written
/// generated platform of the fixtures: for the demo module and the negative modules whose
/// outcome depends on the platform's transformers (an unmatched component, a demand with no
/// bucket but an alternative, an optional trait left unhandled), both give the same result or
/// the same error. The demo renders its three objects; the missing-FQN module fails at matching.
#[test]
fn a_generated_platform_renders_like_the_hand_written_one() {
    use opm_operator::kernel::SkewPolicy;
    use opm_operator::kernel::{ModuleRenderer as _, ModuleRequest};
    use opm_operator::render::Renderer;

    let (reg, client) = published();
    let publisher = reg.client(None);
    for m in ["unmatched", "missingfqn", "optionaltrait"] {
        publisher
            .publish(&opm(&format!("negative/{m}")), "v0.1.0")
            .unwrap();
    }
    let k = kernel(&client, RegistryShape::CatalogEntry);
    let root = tempfile::tempdir().unwrap();
    let dir = generate_into(&k, root.path(), 1, &input(&[(MINI, "0.1.0", true)]));
    let built = k.build(&dir).unwrap_or_else(|e| panic!("{e}"));
    let hand = opm_operator::kernel::BuiltPlatform {
        dir: opm("platform/generated"),
        deps: built.deps.clone(),
        ..Default::default()
    };
    let r = Renderer::new(client.clone()).with_config(cue::Config {
        max_wall_time: std::time::Duration::from_secs(300),
        ..cue::Config::default()
    });
    let valid: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(opm("values/valid.json")).unwrap()).unwrap();
    for (module, values) in [
        ("demo", Some(valid)),
        ("unmatched", None),
        ("missingfqn", None),
        ("optionaltrait", None),
    ] {
        let req = ModuleRequest {
            name: "shop".into(),
            namespace: "prod".into(),
            path: format!("fixtures.test/modules/{module}@v0"),
            version: "v0.1.0".into(),
            values,
        };
        let on_generated = r.render_module(&req, &built, SkewPolicy::Warn);
        let on_hand = r.render_module(&req, &hand, SkewPolicy::Warn);
        assert_eq!(on_generated, on_hand, "{module}");
        if module == "demo" {
            let r = on_generated.as_ref().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.objects.len(), 3, "{r:?}");
        }
        if module == "missingfqn" {
            let e = on_generated.unwrap_err();
            assert_eq!(e.class, ErrorClass::Resolution, "{e}");
            assert!(
                e.to_string()
                    .contains("fixtures.test/catalogs/mini/resources/container@v2"),
                "{e}"
            );
        }
    }
}
