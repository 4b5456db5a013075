//! The real-kernel harness of the controller tests (`platform_real`, `instance_real`,
//! `package_real`): the fixture modules of `fixtures/opm/` published to the real
//! `docker-registry`, a kube-emu cluster with the CRDs, and a [`Context`] whose platform builder
//! and catalog acquirer are the real `PlatformKernel` over that registry. [`rendering`] also
//! installs the real render kernel (`opm_operator::render::Renderer`, counted) as the module and
//! package renderer, and the emulator's client configuration so ServiceAccounts can be
//! impersonated.
//!
//! Rules:
//! - Each test publishes its own registry (the registry is a child process killed on drop), so
//!   tests share nothing and run in parallel.
//! - The Platform is recorded the way the operator records it: a `Platform` object reconciled by
//!   the Platform reconciler on the real kernel ([`record`]), never by writing the store.
//! - Module variants a scenario needs are built in the test from the fixture files
//!   ([`variant`]), each edit checked to apply exactly once, so a fixture change cannot silently
//!   turn a variant into the original.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube_emu::simulate::Workloads;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crds::common::{InventoryEntry, ReconcileStatus};
use crds::k8s_openapi::api::apps::v1::Deployment;
use crds::k8s_openapi::api::core::v1::ConfigMap;
use crds::platform::Platform;
use kube::Api;
use opm_operator::controller::context::Context;
use opm_operator::controller::platform;
use opm_operator::inventory;
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{
    BuiltPlatform, KernelError, ModuleRenderer, ModuleRequest, PackageRenderer, RenderResult,
};
use opm_operator::platform::{Generator, Layout, PlatformKernel, RegistryShape, Store};
use opm_operator::render::Renderer;

use serde_json::Value;

use super::common::*;
use crate::platform::gen::{module_files, opm, published};
use crate::registry::harness::DistRegistry;

pub const CORE: &str = "fixtures.test/core@v0";
pub const KUBE: &str = "fixtures.test/x/kube@v0";
pub const MINI: &str = "fixtures.test/catalogs/mini@v0";
pub const GATEWAY: &str = "fixtures.test/catalogs/gateway@v0";
pub const GATEWAY2: &str = "fixtures.test/catalogs/gateway2@v0";
pub const DEMO: &str = "fixtures.test/modules/demo@v0";

/// A module's or a package's files: `/`-separated relative path, content.
pub type Files = Vec<(String, Vec<u8>)>;

/// A cluster, a registry with the fixtures published, and a context over the real kernel.
pub struct Real {
    pub emu: kube_emu::Emulator,
    pub client: kube::Client,
    pub reg: DistRegistry,
    pub ctx: Arc<Context>,
    /// The real render kernel over `reg`; installed in `ctx` only by [`rendering`].
    pub renderer: Arc<Counted>,
    /// The root of the test's `--platform-dir` (kept alive for the test's duration).
    pub _root: tempfile::TempDir,
}

/// The real render kernel, counting the renders it was asked for (module and package).
pub struct Counted {
    inner: Renderer,
    renders: AtomicU32,
}

impl Counted {
    /// Renders asked for so far.
    pub fn renders(&self) -> u32 {
        self.renders.load(Ordering::SeqCst)
    }
}

impl ModuleRenderer for Counted {
    fn render_module(
        &self,
        req: &ModuleRequest,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        self.renders.fetch_add(1, Ordering::SeqCst);
        self.inner.render_module(req, platform, skew)
    }
}

impl PackageRenderer for Counted {
    fn render_package(
        &self,
        dir: &std::path::Path,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        self.renders.fetch_add(1, Ordering::SeqCst);
        PackageRenderer::render_package(&self.inner, dir, platform, skew)
    }
}

/// The harness over the real platform kernel; no module or package renderer is installed (the
/// Platform and TransformerRegistration tests run the manager, whose ModuleInstance controller
/// would otherwise reconcile their stand-in provider instances).
pub async fn real() -> Real {
    build(false, Workloads::immediate(), |_| {}).await
}

/// The harness with the real render kernel installed as module and package renderer and the
/// emulator's client configuration (impersonation); `customise` edits the context last.
pub async fn rendering(customise: impl FnOnce(&mut Context)) -> Real {
    build(true, Workloads::immediate(), customise).await
}

/// [`rendering`] on a cluster whose workload simulator answers after `workloads.delay`.
pub async fn rendering_with(workloads: Workloads, customise: impl FnOnce(&mut Context)) -> Real {
    build(true, workloads, customise).await
}

/// The cluster's workload statuses come from kube-emu's simulator (immediate unless a test
/// asks for a delay): without it no Deployment would ever be healthy.
async fn build(install: bool, workloads: Workloads, customise: impl FnOnce(&mut Context)) -> Real {
    let (reg, registry) = tokio::task::spawn_blocking(published).await.unwrap();
    let kernel = Arc::new(PlatformKernel::new(
        registry.clone(),
        Generator::new(CORE, "v0.1.0", RegistryShape::CatalogEntry),
        cue::Config::default(),
    ));
    // A generous wall-time budget: debug builds on a loaded machine are slow, and a limit hit
    // would be a RenderFailed no scenario expects.
    let renderer = Arc::new(Counted {
        inner: Renderer::new(registry.clone()).with_config(cue::Config {
            max_wall_time: Duration::from_secs(300),
            ..cue::Config::default()
        }),
        renders: AtomicU32::new(0),
    });
    // Signature policies over the same client (`spec.verify`; inert while none is set).
    let signatures = Arc::new(opm_operator::controller::verify::Signatures::new(
        registry,
        renderer.inner.clone(),
    ));
    let emu = kube_emu::Emulator::start(kube_emu::Options {
        workloads: Some(workloads),
        ..kube_emu::Options::default()
    })
    .await
    .unwrap();
    let client = emu.client().unwrap();
    install_crds(&client).await;
    let root = tempfile::tempdir().unwrap();
    let layout = Arc::new(Layout::new(root.path().join("platform")).unwrap());
    layout.reset().unwrap();
    let mut ctx = Context::new(
        client.clone(),
        Store::new(),
        layout,
        kernel.clone(),
        kernel,
        "test",
    );
    ctx.signatures = Some(signatures);
    if install {
        ctx.renderer = Some(renderer.clone());
        ctx.package_renderer = Some(renderer.clone());
        ctx.kube_config = Some(emu.config().unwrap());
    }
    customise(&mut ctx);
    Real {
        emu,
        client,
        reg,
        ctx: Arc::new(ctx),
        renderer,
        _root: root,
    }
}

/// Platform `cluster` subscribing each `(catalog, enable)` at 0.1.0.
pub fn plat(catalogs: &[(&str, Option<bool>)]) -> Platform {
    catalogs
        .iter()
        .fold(Platform::test().without_catalogs(), |p, (path, en)| {
            p.with_catalog(path, "0.1.0", *en)
        })
}

/// Creates Platform `cluster` subscribing `catalogs` and records its package through the
/// Platform reconciler on the real kernel.
pub async fn record(r: &Real, catalogs: &[(&str, Option<bool>)]) {
    create(&platforms(&r.client), plat(catalogs)).await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert!(
        r.ctx.store.generated().is_some(),
        "the platform was not recorded: {:?}",
        platforms(&r.client).get("cluster").await.unwrap().status
    );
}

/// Publishes `files` as one module at `version` to the test registry (off the async runtime).
pub async fn publish_files(r: &Real, files: Files, version: &'static str) {
    let publisher = r.reg.client(None);
    tokio::task::spawn_blocking(move || publisher.publish_files(&files, version).unwrap())
        .await
        .unwrap();
}

/// The files of fixture module `dir` with each `(from, to)` replaced in the file holding it
/// (each `from` must occur exactly once in the module) and `extra` files added.
pub fn variant(dir: &str, edits: &[(&str, &str)], extra: &[(&str, &str)]) -> Files {
    let mut files = module_files(&opm(dir));
    for (from, to) in edits {
        let hits: Vec<usize> = files
            .iter()
            .enumerate()
            .filter(|(_, (_, b))| String::from_utf8_lossy(b).matches(from).count() > 0)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            hits.len(),
            1,
            "{from:?} must be in exactly one file of {dir}"
        );
        let (_, bytes) = &mut files[hits[0]];
        let text = String::from_utf8(std::mem::take(bytes)).unwrap();
        assert_eq!(text.matches(from).count(), 1, "{from:?} must occur once");
        *bytes = text.replace(from, to).into_bytes();
    }
    for (path, text) in extra {
        files.push(((*path).to_owned(), text.as_bytes().to_vec()));
    }
    files.sort();
    files
}

// ---------------------------------------------------------------------------------------------
// The shop render: instance `prod/shop` of `demo` v0.1.0 with `valid.json` (a ModuleInstance, or
// the `package/shop` instance package), as `fixtures/opm/expected/demo-valid.json` gives it.

/// The namespace and name of the shop instance.
pub const SHOP_NS: &str = "prod";
pub const SHOP: &str = "shop";
/// UUID v5 of `fixtures.test/modules/demo:shop:prod` (fixtures/opm/README.md).
pub const UUID: &str = "4cc2523c-c376-545e-a997-dc2f4899f403";
/// The content-hash name of the hosts ConfigMap for hosts `a.example,b.example`.
pub const HOSTS: &str = "shop-hosts-77eb3aa434";
/// The expected render of `demo` v0.1.0 with `valid.json` as `prod/shop`.
pub fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(opm("expected").join("demo-valid.json")).unwrap())
        .unwrap()
}

pub fn expected_objects() -> Vec<Value> {
    expected()["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["object"].clone())
        .collect()
}

pub fn config_maps(r: &Real) -> Api<ConfigMap> {
    Api::namespaced(r.client.clone(), SHOP_NS)
}

pub fn deployments(r: &Real) -> Api<Deployment> {
    Api::namespaced(r.client.clone(), SHOP_NS)
}

pub async fn replicas(r: &Real) -> Option<i32> {
    deployments(r).get("shop-web").await.unwrap().spec.replicas
}

pub async fn live_cm(r: &Real, name: &str) -> Option<ConfigMap> {
    config_maps(r).get_opt(name).await.unwrap()
}

/// Whether `got` holds everything of `want`: objects key by key, arrays element by element
/// (same length), scalars equal. Server-set fields (uid, managedFields, defaults) are ignored.
pub fn holds(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| g.get(k).is_some_and(|gv| holds(gv, wv))),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(gv, wv)| holds(gv, wv))
        }
        _ => got == want,
    }
}

/// The live object of the expected `want` (a ConfigMap or a Deployment).
pub async fn live_of(r: &Real, want: &Value) -> Value {
    let name = want["metadata"]["name"].as_str().unwrap();
    match want["kind"].as_str().unwrap() {
        "ConfigMap" => serde_json::to_value(config_maps(r).get(name).await.unwrap()).unwrap(),
        "Deployment" => serde_json::to_value(deployments(r).get(name).await.unwrap()).unwrap(),
        k => panic!("unexpected kind {k}"),
    }
}

/// The shop render is live as `expected/demo-valid.json` gives it, applied by the instance (its
/// create claim or `opm-controller`) with the OPM labels, and `status` records its inventory and
/// render digest.
pub async fn assert_shop_applied(r: &Real, status: &ReconcileStatus) {
    for want in expected_objects() {
        let got = live_of(r, &want).await;
        assert!(holds(&got, &want), "live {got:#} lacks {want:#}");
        let labels = &got["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/managed-by"], "opm-controller");
        assert_eq!(labels["module-instance.opmodel.dev/name"], SHOP);
        assert_eq!(labels["module-instance.opmodel.dev/uuid"], UUID);
        // One manager owns the fields (a released create claim may leave an entry owning
        // nothing): the instance's create claim until the object's first write after its create,
        // `opm-controller` from then on (the lazy hand-over, `opm_operator::apply::claim`).
        let managers: Vec<&str> = got["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["fieldsV1"].as_object().is_some_and(|f| !f.is_empty()))
            .filter_map(|f| f["manager"].as_str())
            .collect();
        let claim = format!("opm-claim.{UUID}");
        assert!(
            managers == [claim.as_str()] || managers == ["opm-controller"],
            "{}: {managers:?}",
            want["metadata"]["name"]
        );
    }
    let entries: Vec<InventoryEntry> =
        serde_json::from_value(expected()["inventory"].clone()).unwrap();
    let inv = status.inventory.as_ref().unwrap();
    assert_eq!(inv.count, 3);
    assert_eq!(inv.entries, entries);
    assert_eq!(inv.digest, inventory::inventory_digest(&entries));
    assert_eq!(
        status.last_applied_render_digest,
        Some(inventory::render_digest(expected_objects().iter()))
    );
}
