//! ModulePackage reconciler scenarios 47–51, 64–66 (docs/design/operator.md §8, §2.3, §2.4) against kube-emu,
//! with a test stand-in for Flux's source-controller: the OCIRepository CRD
//! (`source.toolkit.fluxcd.io/v1`) installed into kube-emu, whose status artifact points at a
//! tar.gz served over HTTP on 127.0.0.1 by the test (built from `fixtures/opm/package/shop`).
//! The scenarios use a fake `PackageRenderer` that renders ConfigMaps from the extracted package
//! (so a new artifact changes the objects); `package_real.rs` runs them on the real kernel with
//! the fixture package, reusing this file's artifact server and Flux stand-in.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use crds::conditions::types;
use crds::k8s_openapi::api::core::v1::ConfigMap;
use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use crds::module_package::{DependsOn, ModulePackage};
use crds::platform::Platform;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::Api;
use opm_operator::controller::context::{Context, Reconciled};
use opm_operator::controller::outcome::STALLED_RECHECK;
use opm_operator::controller::package::source::kind_resource;
use opm_operator::controller::{deadline, manager, package, platform};
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{BuiltPlatform, ErrorClass, KernelError, PackageRenderer, RenderResult};
use sha2::{Digest as _, Sha256};

use super::common::*;

const NS: &str = "team-a";
const NAME: &str = "pkg";
const SRC: &str = "src";
const UUID: &str = "7a1c0e52-0000-4000-8000-000000000002";
const FIVE_MIN: Duration = Duration::from_secs(300);
const STALLED: Duration = Duration::from_secs(30 * 60);

// ---------------------------------------------------------------------------------------------
// The artifact server.

#[derive(Clone)]
pub enum Route {
    Body(Vec<u8>),
    /// A body sent without Content-Length (streamed).
    Stream(Vec<u8>),
    Status(u16),
    /// Accepts and never answers.
    Hang,
}

#[derive(Clone, Default)]
pub struct Artifacts(Arc<Mutex<HashMap<String, Route>>>);

impl Artifacts {
    pub fn set(&self, path: &str, r: Route) {
        self.0.lock().unwrap().insert(path.to_owned(), r);
    }
}

pub async fn serve(artifacts: Artifacts) -> SocketAddr {
    let app = axum::Router::new().fallback(move |uri: Uri| {
        let route = artifacts.0.lock().unwrap().get(uri.path()).cloned();
        async move {
            match route {
                None => Response::builder()
                    .status(StatusCode::NOT_FOUND)
                    .body(Body::empty())
                    .unwrap(),
                Some(Route::Status(s)) => {
                    Response::builder().status(s).body(Body::empty()).unwrap()
                }
                Some(Route::Body(b)) => Response::builder().body(Body::from(b)).unwrap(),
                Some(Route::Stream(b)) => {
                    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = b
                        .chunks(1 << 20)
                        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
                        .collect();
                    Response::builder()
                        .body(Body::from_stream(futures::stream::iter(chunks)))
                        .unwrap()
                }
                Some(Route::Hang) => {
                    tokio::time::sleep(Duration::from_secs(120)).await;
                    Response::builder().body(Body::empty()).unwrap()
                }
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn shop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm/package/shop")
}

/// The files of the shop fixture under `app/`.
pub fn shop_files() -> Vec<(String, Vec<u8>)> {
    crate::platform::gen::module_files(&shop_dir())
        .into_iter()
        .map(|(p, b)| (format!("app/{p}"), b))
        .collect()
}

/// A tar.gz of regular files `(path, content)` (mode 0644; parent directories implied).
pub fn tgz_of<P: AsRef<str>, C: AsRef<[u8]>>(files: &[(P, C)]) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (path, content) in files {
        let content = content.as_ref();
        let mut h = tar::Header::new_gnu();
        h.set_size(content.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path.as_ref(), content).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A tar.gz of the shop fixture under `app/`, plus extra files.
pub fn shop_tgz(extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut files: Vec<(String, Vec<u8>)> = shop_files();
    files.extend(extra.iter().map(|(p, c)| ((*p).to_owned(), c.to_vec())));
    tgz_of(&files)
}

/// A tar.gz of raw entries `(path, type flag, link, content)`; names go into the header
/// unchecked, so hostile names can be built.
pub fn raw_tgz(entries: &[(&str, u8, &str, &[u8])]) -> Vec<u8> {
    let mut tar_bytes = Vec::new();
    for (path, flag, link, content) in entries {
        let mut h = tar::Header::new_old();
        {
            let old = h.as_old_mut();
            old.name[..path.len()].copy_from_slice(path.as_bytes());
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_entry_type(tar::EntryType::new(*flag));
        h.set_size(content.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar_bytes.extend_from_slice(h.as_bytes());
        tar_bytes.extend_from_slice(content);
        let pad = (512 - content.len() % 512) % 512;
        tar_bytes.extend(std::iter::repeat_n(0u8, pad));
    }
    tar_bytes.extend(std::iter::repeat_n(0u8, 1024));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar_bytes).unwrap();
    gz.finish().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The Flux stand-in: the OCIRepository CRD and objects with a status artifact.

pub async fn install_oci_repository_crd(client: &kube::Client) {
    install_source_crd(client, "OCIRepository", "ocirepositories").await;
}

/// Installs the CRD of Flux source `kind` (plural `plural`), v1, status subresource, any schema.
pub async fn install_source_crd(client: &kube::Client, kind: &str, plural: &str) {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.source.toolkit.fluxcd.io")},
        "spec": {
            "group": "source.toolkit.fluxcd.io",
            "names": {
                "kind": kind, "listKind": format!("{kind}List"),
                "plural": plural, "singular": kind.to_lowercase()
            },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true
                }}
            }]
        }
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

fn oci() -> ApiResource {
    kind_resource("OCIRepository", "v1")
}

/// Creates (or updates) OCIRepository `ns/name` with `ready` and the artifact (url, digest,
/// revision) in its status.
pub async fn set_source(
    client: &kube::Client,
    ns: &str,
    name: &str,
    ready: bool,
    artifact: Option<(&str, &str, &str)>,
) {
    set_source_of(client, &oci(), ns, name, ready, artifact).await;
}

/// [`set_source`] for a source of resource `ar`.
pub async fn set_source_of(
    client: &kube::Client,
    ar: &ApiResource,
    ns: &str,
    name: &str,
    ready: bool,
    artifact: Option<(&str, &str, &str)>,
) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    if api.get_opt(name).await.unwrap().is_none() {
        let mut o = DynamicObject::new(name, ar).within(ns);
        o.data = serde_json::json!({"spec": {"url": "oci://127.0.0.1/x", "interval": "1m"}});
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    let mut status = serde_json::json!({
        "conditions": [{
            "type": "Ready", "status": if ready { "True" } else { "False" },
            "reason": "Test", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"
        }],
        "artifact": null,
    });
    if let Some((url, digest, revision)) = artifact {
        status["artifact"] = serde_json::json!({
            "url": url, "digest": digest, "revision": revision,
            "path": "x.tar.gz", "lastUpdateTime": "2026-01-01T00:00:00Z"
        });
    }
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await
    .unwrap();
}

/// Serves `bytes` at `/<revision>.tar.gz` of the artifact server at `addr` and points source
/// `team-a/src` at it (Ready) with `digest`; returns the artifact URL.
pub async fn serve_artifact(
    client: &kube::Client,
    artifacts: &Artifacts,
    addr: SocketAddr,
    revision: &str,
    bytes: Vec<u8>,
    digest: &str,
) -> String {
    let path = format!("/{revision}.tar.gz");
    artifacts.set(&path, Route::Body(bytes));
    let url = format!("http://{addr}{path}");
    set_source(client, NS, SRC, true, Some((&url, digest, revision))).await;
    url
}

// ---------------------------------------------------------------------------------------------
// The fake renderer.

/// Renders ConfigMaps `<first n of a, b, c>` in `team-a` with data `msg` = the package's
/// `msg.txt` (default `hello`), or the configured error. Checks the reconciler handed it the
/// package directory.
struct FakePackages {
    count: Mutex<usize>,
    error: Mutex<Option<KernelError>>,
    renders: Mutex<u32>,
}

impl FakePackages {
    fn new() -> Arc<Self> {
        Arc::new(FakePackages {
            count: Mutex::new(2),
            error: Mutex::new(None),
            renders: Mutex::new(0),
        })
    }
    fn renders(&self) -> u32 {
        *self.renders.lock().unwrap()
    }
}

impl PackageRenderer for FakePackages {
    fn render_package(
        &self,
        dir: &Path,
        _platform: &BuiltPlatform,
        _skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        *self.renders.lock().unwrap() += 1;
        assert!(dir.join("instance.cue").is_file(), "{}", dir.display());
        if let Some(e) = self.error.lock().unwrap().clone() {
            return Err(e);
        }
        let msg = std::fs::read_to_string(dir.join("msg.txt")).unwrap_or_else(|_| "hello".into());
        let n = *self.count.lock().unwrap();
        let names: Vec<String> = ["a", "b", "c"][..n]
            .iter()
            .map(|s| format!("shop-{s}"))
            .collect();
        let objects: Vec<(&str, &str, &str, &str)> = ["a", "b", "c"][..n]
            .iter()
            .zip(&names)
            .map(|(s, name)| ("v1", "ConfigMap", name.as_str(), *s))
            .collect();
        Ok(fake_render(
            ("shop", NS, UUID),
            &objects,
            msg.trim(),
            Vec::new(),
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The environment.

struct Mp {
    env: Env,
    ctx: Arc<Context>,
    renderer: Arc<FakePackages>,
    artifacts: Artifacts,
    addr: SocketAddr,
}

/// kube-emu with the CRDs (and the OCIRepository CRD when `flux`), namespace `team-a`, the
/// artifact server, and a context with the fake package renderer; `customise` edits the context.
async fn mp_env_with(flux: bool, customise: impl FnOnce(&mut Context)) -> Mp {
    let env = env().await;
    namespace(&env.client, NS).await;
    if flux {
        install_oci_repository_crd(&env.client).await;
    }
    let renderer = FakePackages::new();
    let ctx = context_for(&env, "mp-platform", |ctx| {
        ctx.package_renderer = Some(renderer.clone());
        customise(ctx);
    });
    let artifacts = Artifacts::default();
    let addr = serve(artifacts.clone()).await;
    Mp {
        env,
        ctx,
        renderer,
        artifacts,
        addr,
    }
}

async fn mp_env() -> Mp {
    mp_env_with(true, |_| {}).await
}

impl Mp {
    fn packages(&self) -> Api<ModulePackage> {
        Api::namespaced(self.env.client.clone(), NS)
    }
    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.env.client.clone(), NS)
    }
    async fn reconcile(&self) -> Reconciled {
        package::reconcile(NS, NAME, &self.ctx).await.unwrap()
    }
    async fn get(&self) -> ModulePackage {
        self.packages().get(NAME).await.unwrap()
    }
    async fn ready_condition(&self) -> (String, String, String) {
        condition(&self.get().await.status.unwrap().conditions, types::READY).unwrap()
    }
    async fn stalled(&self) -> bool {
        condition(&self.get().await.status.unwrap().conditions, types::STALLED)
            .is_some_and(|c| c.0 == "True")
    }
    async fn record_platform(&self) {
        create(
            &platforms(&self.env.client),
            Platform::test().without_catalogs(),
        )
        .await;
        platform::reconcile("cluster", &self.ctx).await.unwrap();
    }
    async fn publish_with_digest(&self, revision: &str, bytes: Vec<u8>, digest: &str) -> String {
        serve_artifact(
            &self.env.client,
            &self.artifacts,
            self.addr,
            revision,
            bytes,
            digest,
        )
        .await
    }
    async fn publish(&self, revision: &str, bytes: Vec<u8>) -> String {
        let d = digest(&bytes);
        self.publish_with_digest(revision, bytes, &d).await
    }
    async fn msg_of(&self, name: &str) -> Option<String> {
        self.config_maps()
            .get_opt(name)
            .await
            .unwrap()
            .and_then(|c| c.data)
            .and_then(|d| d.get("msg").cloned())
    }
    /// Creates the package, adds the finalizer (first reconcile) and records the platform.
    async fn create(&self, mp: ModulePackage) {
        create(&self.packages(), mp).await;
        let r = self.reconcile().await;
        assert_eq!(r.requeue, Some(Duration::ZERO), "finalizer first: {r:?}");
        assert!(self
            .get()
            .await
            .metadata
            .finalizers
            .unwrap()
            .contains(&"opmodel.dev/cleanup".to_owned()));
    }
}

pub fn test_package() -> ModulePackage {
    let mut mp = ModulePackage::test();
    mp.spec.prune = Some(true);
    mp
}

/// [`test_package`] depending on package `base` of its own namespace (scenario 51).
pub fn depending_on_base() -> ModulePackage {
    let mut mp = test_package();
    mp.spec.depends_on = vec![DependsOn {
        name: "base".into(),
        namespace: None,
        ready_expr: None,
    }];
    mp
}

/// Creates the dependency `base`, not Ready yet.
pub async fn create_base(packages: &Api<ModulePackage>) {
    let mut base = ModulePackage::test();
    base.metadata.name = Some("base".into());
    create(packages, base).await;
}

/// Marks the dependency `base` Ready.
pub async fn mark_base_ready(packages: &Api<ModulePackage>) {
    patch_status(
        packages,
        "base",
        serde_json::json!({"conditions": [{
            "type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]}),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

#[tokio::test]
async fn scenario_47_a_ready_source_is_fetched_rendered_and_applied_then_no_op() {
    let m = mp_env().await;
    m.record_platform().await;
    let url = m
        .publish("main@sha1:aaaa", shop_tgz(&[("app/msg.txt", b"v1")]))
        .await;
    m.create(test_package()).await;

    let r = m.reconcile().await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
    assert_eq!(
        r.requeue,
        Some(FIVE_MIN),
        "requeue after the default interval"
    );
    let mp = m.get().await;
    let status = mp.status.clone().unwrap();
    let src = status.source.clone().unwrap();
    let bytes = shop_tgz(&[("app/msg.txt", b"v1")]);
    assert_eq!(src.r#ref.as_deref(), Some("OCIRepository/team-a/src"));
    assert_eq!(src.artifact_revision.as_deref(), Some("main@sha1:aaaa"));
    assert_eq!(
        src.artifact_digest.as_deref(),
        Some(digest(&bytes).as_str())
    );
    assert_eq!(src.artifact_url.as_deref(), Some(url.as_str()));
    assert_eq!(
        status.reconcile.last_applied_source_digest.as_deref(),
        Some(digest(&bytes).as_str()),
        "the Source digest is the artifact digest verbatim"
    );
    let inv = status.reconcile.inventory.clone().unwrap();
    assert_eq!((inv.revision, inv.count), (1, 2));
    assert_eq!(status.reconcile.history.len(), 1);
    assert_eq!(status.observed_generation, mp.metadata.generation);
    assert_eq!(m.msg_of("shop-a").await.as_deref(), Some("v1"));
    let cm = m.config_maps().get("shop-a").await.unwrap();
    assert_eq!(
        cm.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
        "opm-controller"
    );
    assert_eq!(events(&m.env.client, NAME, "Applied").await.len(), 1);
    assert_eq!(
        events(&m.env.client, NAME, "ReconciliationSucceeded")
            .await
            .len(),
        1
    );

    // Unchanged: NoOp, requeue after the interval, history untouched.
    let r = m.reconcile().await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::NoOp)
    );
    assert_eq!(r.requeue, Some(FIVE_MIN));
    let after = m.get().await.status.unwrap();
    assert_eq!(after.reconcile.history, status.reconcile.history);
    assert_eq!(
        after.reconcile.last_attempted_at,
        status.reconcile.last_attempted_at
    );
    assert_eq!(events(&m.env.client, NAME, "NoOp").await.len(), 1);

    // A new revision updates the objects; dropping a component prunes its object.
    *m.renderer.count.lock().unwrap() = 1;
    m.publish("main@sha1:bbbb", shop_tgz(&[("app/msg.txt", b"v2")]))
        .await;
    let r = m.reconcile().await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::AppliedAndPruned),
        "{r:?}"
    );
    assert_eq!(m.msg_of("shop-a").await.as_deref(), Some("v2"));
    assert!(m.msg_of("shop-b").await.is_none(), "pruned");
    let status = m.get().await.status.unwrap();
    assert_eq!(status.reconcile.inventory.unwrap().revision, 2);
    assert_eq!(
        status.source.unwrap().artifact_revision.as_deref(),
        Some("main@sha1:bbbb")
    );

    // A custom interval is the requeue.
    patch_spec(&m.packages(), NAME, serde_json::json!({"interval": "90s"})).await;
    let r = m.reconcile().await;
    assert_eq!(r.requeue, Some(Duration::from_secs(90)));
}

#[tokio::test]
async fn scenario_48_source_not_ready_waits_and_a_missing_or_unsupported_source_stalls() {
    let m = mp_env().await;
    m.record_platform().await;
    m.create(test_package()).await;

    // Missing source → Stalled SourceNotReady, 30m.
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("SourceNotReady"), Some(STALLED)),
        "{r:?}"
    );
    let (s, _, msg) = m.ready_condition().await;
    assert_eq!(s, "False");
    assert!(msg.contains("OCIRepository/team-a/src not found"), "{msg}");
    assert!(m.stalled().await);
    assert_eq!(events(&m.env.client, NAME, "SourceNotReady").await.len(), 1);

    // Not ready → Ready=False SourceNotReady, not stalled, requeue interval; not a counted failure.
    set_source(&m.env.client, NS, SRC, false, None).await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("SourceNotReady"), Some(FIVE_MIN)),
        "{r:?}"
    );
    assert!(!m.stalled().await);
    let (_, _, msg) = m.ready_condition().await;
    assert!(msg.contains("is not ready"), "{msg}");
    let reconcile_counter = m
        .get()
        .await
        .status
        .unwrap()
        .reconcile
        .failure_counters
        .unwrap()
        .reconcile;

    // Ready without artifact → the same soft block.
    set_source(&m.env.client, NS, SRC, true, None).await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("SourceNotReady"), Some(FIVE_MIN))
    );
    let (_, _, msg) = m.ready_condition().await;
    assert!(msg.contains("has no artifact"), "{msg}");
    let status = m.get().await.status.unwrap();
    assert_eq!(
        status.reconcile.failure_counters.unwrap().reconcile,
        reconcile_counter
    );
    assert!(status.source.is_none(), "no artifact was recorded");
    assert_eq!(m.renderer.renders(), 0);

    // kind HelmChart → Stalled.
    patch_spec(
        &m.packages(),
        NAME,
        serde_json::json!({"sourceRef": {"kind": "HelmChart", "name": SRC}}),
    )
    .await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("SourceNotReady"), Some(STALLED))
    );
    let (_, _, msg) = m.ready_condition().await;
    assert!(msg.contains("HelmChart"), "{msg}");
    assert!(m.stalled().await);
}

#[tokio::test]
async fn a_cross_namespace_source_is_refused_unless_allowed() {
    for allowed in [false, true] {
        let m = mp_env_with(true, |c| c.allow_cross_namespace_refs = allowed).await;
        namespace(&m.env.client, "flux-system").await;
        m.record_platform().await;
        let bytes = shop_tgz(&[]);
        let path = "/x.tar.gz";
        m.artifacts.set(path, Route::Body(bytes.clone()));
        let url = format!("http://{}{path}", m.addr);
        set_source(
            &m.env.client,
            "flux-system",
            SRC,
            true,
            Some((&url, &digest(&bytes), "r1")),
        )
        .await;
        let mut mp = test_package();
        mp.spec.source_ref.namespace = Some("flux-system".into());
        m.create(mp).await;
        let r = m.reconcile().await;
        if allowed {
            assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
            let src = m.get().await.status.unwrap().source.unwrap();
            assert_eq!(src.r#ref.as_deref(), Some("OCIRepository/flux-system/src"));
        } else {
            assert_eq!(
                (r.reason, r.requeue),
                (Some("SourceNotReady"), Some(STALLED))
            );
            let (_, _, msg) = m.ready_condition().await;
            assert!(msg.contains("--allow-cross-namespace-refs"), "{msg}");
            assert_eq!(m.renderer.renders(), 0);
        }
    }
}

/// One hostile or broken artifact: FetchFailed naming `cause`, requeue after the interval,
/// nothing rendered.
async fn assert_fetch_failed(m: &Mp, cause: &str) {
    let r = m.reconcile().await;
    fetch_failed(&m.env.client, &m.get().await, r, cause).await;
    assert_eq!(m.renderer.renders(), 0);
    assert!(m.config_maps().get_opt("shop-a").await.unwrap().is_none());
}

/// Checks a reconcile of package `mp` (as read after it) that failed to fetch: FetchFailed
/// naming `cause`, Ready=False, not Stalled, requeue after the default interval, a Warning
/// (action Fetch) carrying the message.
pub async fn fetch_failed(client: &kube::Client, mp: &ModulePackage, r: Reconciled, cause: &str) {
    assert_eq!(
        (r.reason, r.requeue),
        (Some("FetchFailed"), Some(FIVE_MIN)),
        "{cause}: {r:?}"
    );
    let conditions = &mp.status.as_ref().unwrap().conditions;
    let (s, _, msg) = condition(conditions, types::READY).unwrap();
    assert_eq!(s, "False");
    assert!(condition(conditions, types::STALLED).is_none_or(|c| c.0 != "True"));
    assert!(msg.contains(cause), "expected {cause:?} in {msg:?}");
    let name = mp.metadata.name.as_deref().unwrap();
    let ev = events(client, name, "FetchFailed").await;
    assert!(ev
        .iter()
        .any(|e| e.note.as_deref() == Some(msg.as_str()) && e.action.as_deref() == Some("Fetch")));
}

#[tokio::test]
async fn scenario_49_hostile_and_broken_artifacts_fail_the_fetch_and_write_nothing_outside() {
    let m = mp_env_with(true, |c| c.artifact_limits.max_unpacked = 1 << 20).await;
    m.record_platform().await;
    m.create(test_package()).await;
    let outside = tempfile::tempdir().unwrap();
    let tag = format!("pkg-escape-{}", std::process::id());

    // Digest mismatch.
    let good = shop_tgz(&[]);
    m.publish_with_digest("r-mismatch", good.clone(), &digest(b"something else"))
        .await;
    assert_fetch_failed(&m, "digest mismatch").await;

    // Non-200.
    let url = format!("http://{}/gone.tar.gz", m.addr);
    m.artifacts.set("/gone.tar.gz", Route::Status(404));
    set_source(
        &m.env.client,
        NS,
        SRC,
        true,
        Some((&url, &digest(&good), "r-404")),
    )
    .await;
    assert_fetch_failed(&m, "HTTP 404").await;

    // Over 64 MiB, streamed without Content-Length.
    let big = vec![0u8; 64 * 1024 * 1024 + 1];
    m.artifacts.set("/big.tar.gz", Route::Stream(big.clone()));
    let url = format!("http://{}/big.tar.gz", m.addr);
    set_source(
        &m.env.client,
        NS,
        SRC,
        true,
        Some((&url, &digest(&big), "r-big")),
    )
    .await;
    drop(big);
    assert_fetch_failed(&m, "larger than 67108864 bytes").await;

    // Not a tar.gz.
    m.publish("r-plain", b"plain text, not gzip".to_vec()).await;
    assert_fetch_failed(&m, "not a tar.gz").await;

    // `../` entry.
    let escape = format!("../{tag}.txt");
    m.publish(
        "r-dotdot",
        raw_tgz(&[
            ("app/instance.cue", b'0', "", b"x"),
            (&escape, b'0', "", b"pwned"),
        ]),
    )
    .await;
    assert_fetch_failed(&m, "escapes the extraction directory").await;
    assert!(!std::env::temp_dir().join(format!("{tag}.txt")).exists());

    // Absolute entry.
    let abs = format!("{}/abs.txt", outside.path().display());
    m.publish("r-abs", raw_tgz(&[(&abs, b'0', "", b"pwned")]))
        .await;
    assert_fetch_failed(&m, "escapes the extraction directory").await;

    // A symlink escaping, then a file written through it.
    let target = outside.path().display().to_string();
    m.publish(
        "r-symlink",
        raw_tgz(&[
            ("app/evil", b'2', &target, b""),
            ("app/evil/x.txt", b'0', "", b"pwned"),
        ]),
    )
    .await;
    assert_fetch_failed(&m, "symlink").await;
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );

    // A decompression bomb (over the unpacked limit, lowered to 1 MiB here).
    let zeros = vec![0u8; 4 << 20];
    m.publish("r-bomb", raw_tgz(&[("app/bomb.bin", b'0', "", &zeros)]))
        .await;
    assert_fetch_failed(&m, "unpacks to more than").await;

    // More than 10,000 entries.
    let names: Vec<String> = (0..10_001).map(|i| format!("app/f{i}")).collect();
    let entries: Vec<(&str, u8, &str, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), b'0', "", &b""[..]))
        .collect();
    m.publish("r-many", raw_tgz(&entries)).await;
    assert_fetch_failed(&m, "more than 10000 entries").await;

    // The failures were counted and the next good artifact recovers.
    let status = m.get().await.status.unwrap();
    assert!(status.reconcile.failure_counters.unwrap().reconcile >= 9);
    m.publish("r-good", shop_tgz(&[])).await;
    let r = m.reconcile().await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
    assert_eq!(
        m.get()
            .await
            .status
            .unwrap()
            .reconcile
            .failure_counters
            .unwrap()
            .reconcile,
        0
    );
}

#[tokio::test]
async fn scenario_50_path_and_kind_failures_stall() {
    let m = mp_env().await;
    m.record_platform().await;
    m.publish("r1", shop_tgz(&[("docs/readme.md", b"no package here")]))
        .await;

    // Missing path → Stalled PathNotFound.
    let mut mp = test_package();
    mp.spec.path = "./missing".into();
    m.create(mp).await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("PathNotFound"), Some(STALLED)),
        "{r:?}"
    );
    assert!(m.stalled().await);
    let ev = events(&m.env.client, NAME, "PathNotFound").await;
    assert_eq!(ev[0].action.as_deref(), Some("Load"));

    // `..` → PathNotFound.
    patch_spec(
        &m.packages(),
        NAME,
        serde_json::json!({"path": "app/../../etc"}),
    )
    .await;
    let r = m.reconcile().await;
    assert_eq!(r.reason, Some("PathNotFound"));

    // A directory without instance.cue → InstanceFileNotFound.
    patch_spec(&m.packages(), NAME, serde_json::json!({"path": "docs"})).await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("InstanceFileNotFound"), Some(STALLED))
    );
    assert_eq!(m.renderer.renders(), 0);

    // The loader refuses another kind → Stalled UnsupportedKind.
    patch_spec(&m.packages(), NAME, serde_json::json!({"path": "./app"})).await;
    *m.renderer.error.lock().unwrap() = Some(KernelError::new(
        ErrorClass::UnsupportedKind,
        "package app: kind is \"ModuleRelease\", not \"ModuleInstance\"",
    ));
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("UnsupportedKind"), Some(STALLED))
    );
    let (_, _, msg) = m.ready_condition().await;
    assert!(msg.contains("not \"ModuleInstance\""), "{msg}");
    assert_eq!(
        events(&m.env.client, NAME, "UnsupportedKind").await.len(),
        1
    );

    // Scenario 64: the same failure again emits no second event.
    m.reconcile().await;
    assert_eq!(
        events(&m.env.client, NAME, "UnsupportedKind").await.len(),
        1
    );

    // A resolution error stalls ResolutionFailed, another RenderFailed.
    *m.renderer.error.lock().unwrap() =
        Some(KernelError::new(ErrorClass::Resolution, "module not found"));
    assert_eq!(m.reconcile().await.reason, Some("ResolutionFailed"));
    *m.renderer.error.lock().unwrap() = Some(KernelError::new(ErrorClass::Other, "boom"));
    assert_eq!(m.reconcile().await.reason, Some("RenderFailed"));
}

#[tokio::test]
async fn the_platform_not_ready_waits_for_the_interval() {
    let m = mp_env().await;
    m.publish("r1", shop_tgz(&[])).await;
    m.create(test_package()).await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("PlatformNotReady"), Some(FIVE_MIN)),
        "{r:?}"
    );
    assert!(!m.stalled().await);
    m.record_platform().await;
    assert_eq!(m.reconcile().await.reason, Some("ReconciliationSucceeded"));
}

/// The platform lease comes before the renderer (docs/design/operator.md §2.3 step 6, as §2.2 phase 1 for
/// ModuleInstance in `instance.rs`): without a renderer and without a platform the package waits
/// on PlatformNotReady, and only a recorded platform reveals the missing renderer as Stalled
/// RenderFailed.
#[tokio::test]
async fn without_a_renderer_the_platform_still_comes_first() {
    let m = mp_env_with(true, |ctx| ctx.package_renderer = None).await;
    m.publish("r1", shop_tgz(&[])).await;
    m.create(test_package()).await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("PlatformNotReady"), Some(FIVE_MIN)),
        "{r:?}"
    );
    assert!(!m.stalled().await);

    m.record_platform().await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("RenderFailed"), Some(STALLED_RECHECK)),
        "{r:?}"
    );
    assert!(m.stalled().await);
    assert_eq!(
        m.ready_condition().await.2,
        "no package renderer is configured"
    );
    assert!(m.msg_of("shop-a").await.is_none(), "nothing applied");
}

#[tokio::test]
async fn scenario_51_depends_on_blocks_until_the_dependency_is_ready() {
    let m = mp_env().await;
    m.record_platform().await;
    m.publish("r1", shop_tgz(&[])).await;

    // Not found.
    let mp = depending_on_base();
    m.create(mp).await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("DependenciesNotReady"), Some(FIVE_MIN)),
        "{r:?}"
    );
    let got = m.get().await;
    let (s, _, msg) = condition(&got.status.clone().unwrap().conditions, types::READY).unwrap();
    assert_eq!(s, "False");
    assert_eq!(msg, "waiting for dependency team-a/base (not found)");
    assert_eq!(
        got.status.unwrap().observed_generation,
        got.metadata.generation
    );
    let ev = events(&m.env.client, NAME, "DependenciesNotReady").await;
    assert_eq!(ev[0].type_.as_deref(), Some("Normal"));
    assert_eq!(ev[0].action.as_deref(), Some("DependsOn"));

    // Present but not Ready.
    create_base(&m.packages()).await;
    let r = m.reconcile().await;
    assert_eq!(r.reason, Some("DependenciesNotReady"));
    let (_, _, msg) = m.ready_condition().await;
    assert_eq!(msg, "waiting for dependency team-a/base");
    assert_eq!(m.renderer.renders(), 0, "nothing rendered while blocked");

    // Ready → proceeds.
    mark_base_ready(&m.packages()).await;
    assert_eq!(m.reconcile().await.reason, Some("ReconciliationSucceeded"));

    // Cross-namespace → the cross-namespace message, a Warning.
    patch_spec(
        &m.packages(),
        NAME,
        serde_json::json!({"dependsOn": [{"name": "base", "namespace": "other"}]}),
    )
    .await;
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("DependenciesNotReady"), Some(FIVE_MIN))
    );
    let (_, _, msg) = m.ready_condition().await;
    assert!(
        msg.contains("cross-namespace dependencies are not supported"),
        "{msg}"
    );
    let ev = events(&m.env.client, NAME, "DependenciesNotReady").await;
    assert!(ev.iter().any(|e| e.type_.as_deref() == Some("Warning")));
}

#[tokio::test]
async fn scenario_44_deletion_prunes_the_inventory_and_releases_the_finalizer() {
    let m = mp_env().await;
    m.record_platform().await;
    m.publish("r1", shop_tgz(&[])).await;
    m.create(test_package()).await;
    assert_eq!(m.reconcile().await.reason, Some("ReconciliationSucceeded"));
    assert!(m.msg_of("shop-a").await.is_some());
    m.packages()
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(m.reconcile().await, Reconciled::done());
    assert!(m.msg_of("shop-a").await.is_none());
    assert!(m.msg_of("shop-b").await.is_none());
    assert!(
        m.packages().get_opt(NAME).await.unwrap().is_none(),
        "finalizer released"
    );
}

#[tokio::test]
async fn deletion_with_prune_off_orphans_and_suspend_does_not_block() {
    let m = mp_env().await;
    m.record_platform().await;
    m.publish("r1", shop_tgz(&[])).await;
    let mut mp = test_package();
    mp.spec.prune = Some(false);
    m.create(mp).await;
    assert_eq!(m.reconcile().await.reason, Some("ReconciliationSucceeded"));

    // Suspend: Ready=False Suspended, status kept; resume reconciles.
    patch_spec(&m.packages(), NAME, serde_json::json!({"suspend": true})).await;
    let r = m.reconcile().await;
    assert_eq!((r.reason, r.requeue), (Some("Suspended"), None));
    let status = m.get().await.status.unwrap();
    assert_eq!(status.reconcile.inventory.as_ref().unwrap().revision, 1);
    assert_eq!(events(&m.env.client, NAME, "Suspended").await.len(), 1);

    m.packages()
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(m.reconcile().await, Reconciled::done());
    assert!(m.packages().get_opt(NAME).await.unwrap().is_none());
    assert!(m.msg_of("shop-a").await.is_some(), "orphaned, not deleted");
}

#[tokio::test]
async fn a_hung_artifact_server_times_the_reconcile_out_as_a_transient_failure() {
    let m = mp_env_with(true, |c| c.reconcile_timeout = Duration::from_millis(1500)).await;
    m.record_platform().await;
    m.artifacts.set("/hang.tar.gz", Route::Hang);
    let url = format!("http://{}/hang.tar.gz", m.addr);
    set_source(
        &m.env.client,
        NS,
        SRC,
        true,
        Some((&url, &digest(b"x"), "r1")),
    )
    .await;
    m.create(test_package()).await;
    let started = std::time::Instant::now();
    let r =
        deadline::bounded::<ModulePackage>(&m.ctx, NS, NAME, package::reconcile(NS, NAME, &m.ctx))
            .await
            .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r.reason, Some(deadline::REASON));
    assert_eq!(
        r.requeue,
        Some(Duration::from_secs(5)),
        "backoff of counter 0"
    );
    let (s, reason, msg) = m.ready_condition().await;
    assert_eq!((s.as_str(), reason.as_str()), ("False", deadline::REASON));
    assert!(msg.contains("--reconcile-timeout"), "{msg}");
    assert!(!m.stalled().await);
    let status = m.get().await.status.unwrap();
    assert_eq!(status.reconcile.failure_counters.unwrap().reconcile, 1);
    assert!(status.reconcile.next_retry_at.is_some());
    assert_eq!(events(&m.env.client, NAME, deadline::REASON).await.len(), 1);
}

/// Scenarios 65/66 and docs/design/principles.md rule 11 through the running controller: without the Flux CRDs the
/// controller runs (the package waits on a missing source); when the OCIRepository CRD appears
/// its watch starts and a source with an artifact enqueues the package; a new artifact revision
/// re-renders; a status-only source update does not enqueue.
#[tokio::test]
async fn scenario_65_flux_crds_appearing_after_start_start_the_source_watch() {
    let m = mp_env_with(false, |c| {
        c.source_discovery_interval = Duration::from_millis(200);
    })
    .await;
    m.record_platform().await;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let ctx = Arc::clone(&m.ctx);
    let controller = tokio::spawn(async move {
        manager::run_packages(ctx, async move {
            let _ = stop_rx.await;
        })
        .await;
    });
    create(&m.packages(), test_package()).await;
    let stalled_on_missing_source = eventually(20, || async {
        m.get()
            .await
            .status
            .and_then(|s| condition(&s.conditions, types::READY))
            .is_some_and(|(_, reason, msg)| reason == "SourceNotReady" && msg.contains("not found"))
    })
    .await;
    assert!(stalled_on_missing_source, "{:?}", m.get().await.status);
    assert!(
        !controller.is_finished(),
        "the controller runs without the Flux CRDs"
    );

    // The CRD and a ready source appear: the package is enqueued by the source watch (its own
    // requeue is 30 minutes away).
    install_oci_repository_crd(&m.env.client).await;
    m.publish("r1", shop_tgz(&[("app/msg.txt", b"one")])).await;
    assert!(
        eventually(20, || async {
            m.msg_of("shop-a").await.as_deref() == Some("one")
        })
        .await,
        "{:?}",
        m.get().await.status
    );
    // Let the wakes of the source's creation and of its artifact appearing settle (a reconcile
    // woken by the creation may already have read the artifact).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let renders = m.renderer.renders();

    // A status-only change of the source (same artifact) does not enqueue.
    let api: Api<DynamicObject> = Api::namespaced_with(m.env.client.clone(), NS, &oci());
    api.patch_status(
        SRC,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"observedGeneration": 7}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        m.renderer.renders(),
        renders,
        "status-only source update enqueued nothing"
    );

    // A new revision re-renders.
    m.publish("r2", shop_tgz(&[("app/msg.txt", b"two")])).await;
    assert!(
        eventually(20, || async {
            m.msg_of("shop-a").await.as_deref() == Some("two")
        })
        .await
    );
    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(20), controller)
        .await
        .unwrap()
        .unwrap();
}

/// Scenarios 31 (for packages) and 66 through the running controllers: a package waiting on
/// PlatformNotReady (its own requeue is 5 minutes away) is reconciled as soon as the Platform is
/// recorded; a status-only update of the package does not enqueue it, a spec change does.
#[tokio::test]
async fn scenarios_31_and_66_platform_events_enqueue_packages_and_status_updates_do_not() {
    let m = mp_env().await;
    m.publish("r1", shop_tgz(&[])).await;
    create(&m.packages(), test_package()).await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(manager::run_controllers(Arc::clone(&m.ctx), stop_rx));
    let reason_is = |want: &'static str| {
        let m = &m;
        move || async move {
            m.get()
                .await
                .status
                .and_then(|s| condition(&s.conditions, types::READY))
                .is_some_and(|c| c.1 == want)
        }
    };
    assert!(eventually(10, reason_is("PlatformNotReady")).await);
    create(
        &platforms(&m.env.client),
        Platform::test().without_catalogs(),
    )
    .await;
    let ready = eventually(10, reason_is("ReconciliationSucceeded")).await;
    // Let the start-up wakes settle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let renders = m.renderer.renders();
    patch_status(
        &m.packages(),
        NAME,
        serde_json::json!({"lastAppliedVersion": "v0.0.9"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_status = m.renderer.renders();
    patch_spec(&m.packages(), NAME, serde_json::json!({"interval": "7m"})).await;
    let spec_enqueued = eventually(10, || async { m.renderer.renders() > after_status }).await;
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    assert!(ready, "the recorded Platform did not enqueue the package");
    assert_eq!(after_status, renders, "a status-only update rendered again");
    assert!(spec_enqueued, "a spec change was not reconciled");
}

/// `--reconcile-timeout` bounds ModuleInstance reconciles too: a render that hangs frees the
/// worker with Ready=False `ReconcileTimedOut` (transient, backoff).
#[tokio::test]
async fn the_reconcile_timeout_also_bounds_module_instances() {
    use crds::module_instance::ModuleInstance;
    use opm_operator::controller::instance;
    use opm_operator::kernel::{ModuleRenderer, ModuleRequest};

    struct Slow;
    impl ModuleRenderer for Slow {
        fn render_module(
            &self,
            _req: &ModuleRequest,
            _platform: &BuiltPlatform,
            _skew: SkewPolicy,
        ) -> Result<RenderResult, KernelError> {
            #[allow(
                clippy::disallowed_methods,
                reason = "a synchronous render (run on a blocking thread) that hangs"
            )]
            std::thread::sleep(Duration::from_secs(5));
            Err(KernelError::new(ErrorClass::Other, "too late"))
        }
    }
    let m = mp_env_with(true, |c| {
        c.renderer = Some(Arc::new(Slow));
        c.reconcile_timeout = Duration::from_secs(1);
    })
    .await;
    m.record_platform().await;
    let mis: Api<ModuleInstance> = Api::namespaced(m.env.client.clone(), NS);
    create(&mis, ModuleInstance::test().named(NS, "web")).await;
    let r = instance::reconcile(NS, "web", &m.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(Duration::ZERO), "finalizer first");
    let started = std::time::Instant::now();
    let r = deadline::bounded::<ModuleInstance>(
        &m.ctx,
        NS,
        "web",
        instance::reconcile(NS, "web", &m.ctx),
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the worker was freed"
    );
    assert_eq!(r.reason, Some(deadline::REASON));
    let status = mis.get("web").await.unwrap().status.unwrap();
    let (s, reason, msg) = condition(&status.conditions, types::READY).unwrap();
    assert_eq!((s.as_str(), reason.as_str()), ("False", deadline::REASON));
    assert!(msg.contains("1s"), "{msg}");
}

/// §2.4 for packages: a deleting package whose ServiceAccount is gone stalls `DeletionSAMissing`
/// (finalizer kept, nothing deleted); with `opm.dev/force-delete-orphan: "true"` it orphans and
/// releases the finalizer in the same pass.
#[tokio::test]
async fn deletion_with_the_service_account_gone_stalls_then_orphans_on_the_annotation() {
    let m = mp_env().await;
    m.record_platform().await;
    m.publish("r1", shop_tgz(&[])).await;
    m.create(test_package()).await;
    assert_eq!(m.reconcile().await.reason, Some("ReconciliationSucceeded"));
    patch_spec(
        &m.packages(),
        NAME,
        serde_json::json!({"serviceAccountName": "deploy-sa"}),
    )
    .await;
    m.packages()
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let r = m.reconcile().await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("DeletionSAMissing"), Some(STALLED))
    );
    let (_, _, msg) = m.ready_condition().await;
    assert!(msg.contains("team-a/deploy-sa"), "{msg}");
    m.reconcile().await;
    assert_eq!(
        events(&m.env.client, NAME, "DeletionSAMissing").await.len(),
        1
    );
    assert!(m.msg_of("shop-a").await.is_some(), "nothing deleted");
    assert!(
        m.packages().get_opt(NAME).await.unwrap().is_some(),
        "finalizer kept"
    );

    m.packages()
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "opm.dev/force-delete-orphan": "true"
            }}})),
        )
        .await
        .unwrap();
    assert_eq!(m.reconcile().await, Reconciled::done());
    assert!(m.packages().get_opt(NAME).await.unwrap().is_none());
    assert!(m.msg_of("shop-a").await.is_some(), "orphaned");
    let ev = events(&m.env.client, NAME, "OrphanedOnDeletion").await;
    assert!(ev[0]
        .note
        .as_deref()
        .unwrap()
        .starts_with("Orphaned 2 managed resources"));
}

/// GitRepository and Bucket sources are read the same way (their status artifact).
#[tokio::test]
async fn git_repository_and_bucket_sources_are_supported() {
    let m = mp_env_with(false, |_| {}).await;
    m.record_platform().await;
    let bytes = shop_tgz(&[("app/msg.txt", b"from-source")]);
    m.artifacts.set("/s.tar.gz", Route::Body(bytes.clone()));
    let url = format!("http://{}/s.tar.gz", m.addr);
    for (i, (kind, plural)) in [("GitRepository", "gitrepositories"), ("Bucket", "buckets")]
        .into_iter()
        .enumerate()
    {
        install_source_crd(&m.env.client, kind, plural).await;
        set_source_of(
            &m.env.client,
            &kind_resource(kind, "v1"),
            NS,
            "repo",
            true,
            Some((&url, &digest(&bytes), "main@sha1:cafe")),
        )
        .await;
        let name = format!("pkg-{i}");
        let mut mp = test_package().with_source(kind, "repo");
        mp.metadata.name = Some(name.clone());
        create(&m.packages(), mp).await;
        let run = || package::reconcile(NS, &name, &m.ctx);
        assert_eq!(run().await.unwrap().requeue, Some(Duration::ZERO));
        let r = run().await.unwrap();
        assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{kind}: {r:?}");
        let src = m
            .packages()
            .get(&name)
            .await
            .unwrap()
            .status
            .unwrap()
            .source
            .unwrap();
        assert_eq!(src.r#ref, Some(format!("{kind}/team-a/repo")));
        assert_eq!(m.msg_of("shop-a").await.as_deref(), Some("from-source"));
    }
}

/// Issue 40: the `dependsOn` gate ModulePackage shares with ModuleInstance: a cycle stalls
/// `DependencyCycle` naming it, and a `readyExpr` replaces the Ready check.
#[tokio::test]
async fn a_package_dependency_cycle_stalls_and_ready_expr_replaces_the_ready_check() {
    let m = mp_env().await;
    m.record_platform().await;
    m.publish("r1", shop_tgz(&[])).await;
    m.create(depending_on_base()).await;
    let mut base = ModulePackage::test();
    base.metadata.name = Some("base".into());
    base.spec.depends_on = vec![DependsOn {
        name: NAME.into(),
        namespace: None,
        ready_expr: None,
    }];
    create(&m.packages(), base).await;
    let r = m.reconcile().await;
    assert_eq!(r.reason, Some("DependencyCycle"), "{r:?}");
    let (_, _, msg) = m.ready_condition().await;
    assert_eq!(
        msg,
        "dependency cycle: team-a/pkg -> team-a/base -> team-a/pkg"
    );
    assert_eq!(m.renderer.renders(), 0);
    // No cycle; base is not Ready, but the expression holds.
    patch_spec(
        &m.packages(),
        "base",
        serde_json::json!({"dependsOn": null}),
    )
    .await;
    patch_spec(
        &m.packages(),
        NAME,
        serde_json::json!({"dependsOn": [{"name": "base", "readyExpr": "dep.metadata.name == 'base'"}]}),
    )
    .await;
    assert_eq!(m.reconcile().await.reason, Some("ReconciliationSucceeded"));
}
