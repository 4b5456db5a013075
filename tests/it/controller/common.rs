//! Shared fixtures of the controller tests: a kube-emu cluster with the CRDs, fakes of the kernel
//! seams (`PlatformBuilder`, `CatalogAcquirer`) and small helpers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::child::LoggedChild;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crds::k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use crds::k8s_openapi::api::events::v1::Event as K8sEvent;
use crds::k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use crds::platform::Platform;
use crds::transformer_registration::TransformerRegistration;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams,
};
use kube::{Api, Resource};
use opm_operator::controller::context::Context;
use opm_operator::kernel::{
    AcquireError, BuiltPlatform, CatalogAcquirer, CatalogInfo, ContractInventory, KernelError,
    PlatformBuilder, PlatformInput,
};
use opm_operator::platform::{Layout, Store};

/// The fake builder: generation is a deterministic function of the input; build returns the
/// configured inventory; either step can be made to fail.
#[derive(Default)]
pub struct FakeBuilder {
    pub generate_error: Mutex<Option<KernelError>>,
    pub build_error: Mutex<Option<KernelError>>,
    pub contracts: Mutex<ContractInventory>,
    pub deps: Mutex<BTreeMap<String, String>>,
    pub inputs: Mutex<Vec<PlatformInput>>,
    pub builds: Mutex<u32>,
    /// When set, builds wait (at most 30 s) until [`FakeBuilder::open_gate`].
    pub gated: Mutex<bool>,
    gate: std::sync::Condvar,
}

impl FakeBuilder {
    pub fn healthy() -> Arc<Self> {
        let b = FakeBuilder::default();
        *b.contracts.lock().unwrap() = ContractInventory {
            routable: true,
            discriminated: true,
            fulfilled: true,
            ..Default::default()
        };
        b.deps.lock().unwrap().insert(
            "opmodel.dev/core@v2".to_owned(),
            "v2.0.0-alpha.4".to_owned(),
        );
        Arc::new(b)
    }

    /// Lets gated builds proceed.
    pub fn open_gate(&self) {
        *self.gated.lock().unwrap() = false;
        self.gate.notify_all();
    }

    pub fn last_input(&self) -> PlatformInput {
        self.inputs.lock().unwrap().last().cloned().unwrap()
    }
}

impl PlatformBuilder for FakeBuilder {
    fn generate(&self, input: &PlatformInput) -> Result<Vec<(String, Vec<u8>)>, KernelError> {
        self.inputs.lock().unwrap().push(input.clone());
        if let Some(e) = self.generate_error.lock().unwrap().clone() {
            return Err(e);
        }
        let mut platform = format!("type: {:?}\n", input.platform_type);
        for e in &input.entries {
            platform.push_str(&format!(
                "{:?}: {{enable: {}, version: {:?}}}\n",
                e.path, e.enable, e.version
            ));
        }
        Ok(vec![
            (
                "cue.mod/module.cue".to_owned(),
                b"module: \"opmodel.dev/platforms/cluster@v0\"\n".to_vec(),
            ),
            ("platform.cue".to_owned(), platform.into_bytes()),
        ])
    }

    fn build(&self, dir: &Path) -> Result<BuiltPlatform, KernelError> {
        {
            let gated = self.gated.lock().unwrap();
            let _unused = self
                .gate
                .wait_timeout_while(gated, std::time::Duration::from_secs(30), |g| *g)
                .unwrap();
        }
        *self.builds.lock().unwrap() += 1;
        if let Some(e) = self.build_error.lock().unwrap().clone() {
            return Err(e);
        }
        assert!(
            dir.join("platform.cue").is_file(),
            "built an incomplete dir"
        );
        Ok(BuiltPlatform {
            dir: dir.to_path_buf(),
            deps: self.deps.lock().unwrap().clone(),
            transformers: Vec::new(),
            contracts: self.contracts.lock().unwrap().clone(),
        })
    }
}

/// The fake acquirer: a table of catalogs by (path, version); unknown ones are "not found".
#[derive(Default)]
pub struct FakeAcquirer {
    pub catalogs: Mutex<HashMap<(String, String), Result<CatalogInfo, AcquireError>>>,
    pub calls: Mutex<u32>,
}

impl FakeAcquirer {
    pub fn set(&self, path: &str, version: &str, r: Result<CatalogInfo, AcquireError>) {
        self.catalogs
            .lock()
            .unwrap()
            .insert((path.to_owned(), version.to_owned()), r);
    }

    pub fn provides(&self, path: &str, version: &str, provides: &[&str]) {
        self.set(
            path,
            version,
            Ok(CatalogInfo {
                provides: provides.iter().map(|s| s.to_string()).collect(),
                requires: BTreeMap::new(),
            }),
        );
    }
}

impl CatalogAcquirer for FakeAcquirer {
    fn acquire(&self, path: &str, version: &str) -> Result<CatalogInfo, AcquireError> {
        *self.calls.lock().unwrap() += 1;
        self.catalogs
            .lock()
            .unwrap()
            .get(&(path.to_owned(), version.to_owned()))
            .cloned()
            .unwrap_or_else(|| {
                Err(AcquireError::Other(KernelError::new(
                    opm_operator::kernel::ErrorClass::Resolution,
                    format!("module {path}@v{version} not found"),
                )))
            })
    }
}

/// A cluster with the CRDs, and a context over fakes.
pub struct Env {
    /// The cluster (kept alive for the test's duration).
    pub emu: kube_emu::Emulator,
    pub client: kube::Client,
    pub builder: Arc<FakeBuilder>,
    pub acquirer: Arc<FakeAcquirer>,
    pub ctx: Arc<Context>,
    /// The root of the test's `--platform-dir` (kept alive for the test's duration).
    pub dir: tempfile::TempDir,
}

pub async fn env() -> Env {
    let emu = kube_emu::Emulator::start(kube_emu::Options {
        workloads: Some(kube_emu::simulate::Workloads::immediate()),
        ..kube_emu::Options::default()
    })
    .await
    .unwrap();
    let client = emu.client().unwrap();
    install_crds(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let builder = FakeBuilder::healthy();
    let acquirer = Arc::new(FakeAcquirer::default());
    let ctx = context(&client, dir.path(), builder.clone(), acquirer.clone());
    Env {
        emu,
        client,
        builder,
        acquirer,
        ctx,
        dir,
    }
}

pub fn context(
    client: &kube::Client,
    root: &Path,
    builder: Arc<FakeBuilder>,
    acquirer: Arc<FakeAcquirer>,
) -> Arc<Context> {
    context_named(client, root, builder, acquirer, "test")
}

/// A context whose events name `instance` as the reporting instance.
pub fn context_named(
    client: &kube::Client,
    root: &Path,
    builder: Arc<FakeBuilder>,
    acquirer: Arc<FakeAcquirer>,
    instance: &str,
) -> Arc<Context> {
    let layout = Arc::new(Layout::new(root.join("platform")).unwrap());
    layout.reset().unwrap();
    Arc::new(Context::new(
        client.clone(),
        Store::new(),
        layout,
        builder,
        acquirer,
        instance,
    ))
}

pub async fn install_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::all_crds() {
        api.create(&PostParams::default(), &crd).await.unwrap();
    }
}

/// Creates an object built by a fixture (server-assigned fields cleared).
pub async fn create<K>(api: &Api<K>, mut obj: K) -> K
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let meta = obj.meta_mut();
    meta.uid = None;
    meta.generation = None;
    meta.resource_version = None;
    api.create(&PostParams::default(), &obj).await.unwrap()
}

/// Creates namespace `name` unless it exists.
pub async fn namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(name).await.unwrap().is_none() {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &ns).await.unwrap();
    }
}

/// Creates ServiceAccount `ns/name`.
pub async fn service_account(client: &kube::Client, ns: &str, name: &str) {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&PostParams::default(), &sa).await.unwrap();
}

/// Role `ns/name` granting `verbs` on each `(apiGroup, resource)` of `resources`.
pub async fn role(
    client: &kube::Client,
    ns: &str,
    name: &str,
    resources: &[(&str, &str)],
    verbs: &[&str],
) {
    let api: Api<Role> = Api::namespaced(client.clone(), ns);
    let rules = resources
        .iter()
        .map(|(group, resource)| PolicyRule {
            api_groups: Some(vec![(*group).to_owned()]),
            resources: Some(vec![(*resource).to_owned()]),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        })
        .collect();
    let role = Role {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        rules: Some(rules),
    };
    api.create(&PostParams::default(), &role).await.unwrap();
}

/// RoleBinding `ns/name` of Role `role` to one subject of `kind` (`User`, `Group`).
pub async fn bind(
    client: &kube::Client,
    ns: &str,
    name: &str,
    role: &str,
    kind: &str,
    subject: &str,
) {
    let api: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: kind.into(),
            name: subject.into(),
            namespace: None,
        }]),
    };
    api.create(&PostParams::default(), &binding).await.unwrap();
}

pub fn platforms(client: &kube::Client) -> Api<Platform> {
    Api::all(client.clone())
}

pub fn claims(client: &kube::Client) -> Api<TransformerRegistration> {
    Api::all(client.clone())
}

/// Sets a status by merge patch on /status.
pub async fn patch_status<K>(api: &Api<K>, name: &str, status: serde_json::Value) -> K
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({ "status": status })),
    )
    .await
    .unwrap()
}

/// Merge-patches the object with `body`.
async fn merge<K>(api: &Api<K>, name: &str, body: serde_json::Value) -> K
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap()
}

/// Merge-patches the spec.
pub async fn patch_spec<K>(api: &Api<K>, name: &str, spec: serde_json::Value) -> K
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    merge(api, name, serde_json::json!({ "spec": spec })).await
}

/// Merge-patches the metadata (labels, annotations).
pub async fn patch_meta<K>(api: &Api<K>, name: &str, metadata: serde_json::Value) -> K
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    merge(api, name, serde_json::json!({ "metadata": metadata })).await
}

/// The events about `name` with `reason` (events of cluster-scoped objects land in `default`).
pub async fn events(client: &kube::Client, name: &str, reason: &str) -> Vec<K8sEvent> {
    let api: Api<K8sEvent> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

/// The events about `name` with `reason` once there is at least one, waiting up to `secs`: a
/// running controller writes the status first and records the event after it, so a test that
/// saw the status may read the events before they are there.
pub async fn until_events(
    client: &kube::Client,
    name: &str,
    reason: &str,
    secs: u64,
) -> Vec<K8sEvent> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let evs = events(client, name, reason).await;
        if !evs.is_empty() || std::time::Instant::now() >= deadline {
            return evs;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The only event of `evs`: (type, action, note).
pub fn one_event(evs: &[K8sEvent]) -> (String, String, String) {
    assert_eq!(evs.len(), 1, "{evs:?}");
    (
        evs[0].type_.clone().unwrap_or_default(),
        evs[0].action.clone().unwrap_or_default(),
        evs[0].note.clone().unwrap_or_default(),
    )
}

/// Checks a reconcile that stalled with `reason`: the 30-minute recheck, Stalled=True and
/// Ready=False in `conditions` (read after it) with that reason and one message, returned.
pub fn assert_stalled(
    out: &opm_operator::controller::context::Reconciled,
    conditions: &[crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    reason: &str,
) -> String {
    assert_eq!(
        (out.reason, out.requeue, out.outcome),
        (
            Some(reason),
            Some(std::time::Duration::from_secs(30 * 60)),
            Some(opm_operator::controller::outcome::Outcome::FailedStalled)
        ),
        "{out:?}"
    );
    let (st, stalled_reason, message) = condition(conditions, crds::conditions::types::STALLED)
        .unwrap_or_else(|| panic!("not stalled: {conditions:?}"));
    assert_eq!((st.as_str(), stalled_reason.as_str()), ("True", reason));
    assert_eq!(
        condition(conditions, crds::conditions::types::READY),
        Some(("False".into(), reason.into(), message.clone()))
    );
    message
}

/// The condition of `type_` (status, reason, message). Every read also checks that every
/// message in `conds` is well-formed ([`assert_messages_well_formed`]), so each condition any
/// reconciler writes in any scenario is checked (issue 29 item 4).
pub fn condition(
    conds: &[crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<(String, String, String)> {
    assert_messages_well_formed(conds);
    conds
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Polls `f` every 50 ms until it returns true or `secs` pass.
pub async fn eventually<F, Fut>(secs: u64, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// `widgets.x.test` with two served versions, `v1beta1` (stored) and `v1`.
pub async fn install_widget_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.x.test"},
        "spec": {
            "group": "x.test",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            ],
        },
    }))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), &crd).await.unwrap();
}

/// Widgets of namespace `ns` read at `version` of `widgets.x.test`.
pub fn widgets(client: &kube::Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("x.test", version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A running `opm-operator serve` process whose stdout and stderr are collected into one log;
/// killed and reaped on drop.
pub struct ServeProc(LoggedChild);

impl std::ops::Deref for ServeProc {
    type Target = LoggedChild;
    fn deref(&self) -> &LoggedChild {
        &self.0
    }
}

impl std::ops::DerefMut for ServeProc {
    fn deref_mut(&mut self) -> &mut LoggedChild {
        &mut self.0
    }
}

/// The leader-election flags of the multi-replica tests: a 2 s lease renewed within 1.5 s,
/// retried every 200 ms, in `opm-system`.
pub const FAST_LEADER_ELECTION: [&str; 8] = [
    "--leader-elect-lease-duration",
    "2s",
    "--leader-elect-renew-deadline",
    "1500ms",
    "--leader-elect-retry-period",
    "200ms",
    "--leader-elect-namespace",
    "opm-system",
];

impl ServeProc {
    /// `opm-operator serve` with self-signed certificates under `dir/certs`, the webhook and
    /// probe listeners on free loopback ports, `kubeconfig`, `platform_dir` and `RUST_LOG=info`;
    /// the test adds its own flags and environment.
    pub fn command(dir: &Path, kubeconfig: &Path, platform_dir: &Path) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"));
        cmd.args(["serve", "--self-signed", "--self-signed-dir"])
            .arg(dir.join("certs"))
            .args([
                "--webhook-addr",
                "127.0.0.1:0",
                "--probe-addr",
                "127.0.0.1:0",
            ])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--platform-dir")
            .arg(platform_dir)
            .env("RUST_LOG", "info");
        cmd
    }

    /// Spawns `cmd` and collects its output.
    pub fn spawn(mut cmd: std::process::Command) -> ServeProc {
        ServeProc(LoggedChild::spawn(&mut cmd).unwrap())
    }

    /// The leader-election identity of a process run with `HOSTNAME=replica` and no `POD_NAME`.
    pub fn identity(&self) -> String {
        format!("replica_{}", self.child.id())
    }

    /// Whether the log contains `needle` within `secs`.
    pub async fn wait_log(&self, needle: &str, secs: u64) -> bool {
        eventually(secs, || async { self.log().contains(needle) }).await
    }
}

/// A context over the fakes of `env` with a platform layout of its own under `env.dir/<layout>`,
/// adjusted by `customise` (a renderer, a client configuration, ...).
pub fn context_for(env: &Env, layout: &str, customise: impl FnOnce(&mut Context)) -> Arc<Context> {
    let layout = Arc::new(Layout::new(env.dir.path().join(layout)).unwrap());
    layout.reset().unwrap();
    let mut ctx = Context::new(
        env.client.clone(),
        Store::new(),
        layout,
        env.builder.clone(),
        env.acquirer.clone(),
        "test",
    );
    customise(&mut ctx);
    Arc::new(ctx)
}

/// The render of the fake kernels: each `(apiVersion, kind, name, component)` of `objects` in
/// `namespace` with the OPM labels of instance `name`/`namespace`/`uuid` and its component,
/// `msg` as a ConfigMap's data or another kind's spec, transformer `x.test/t#<kind>`; the
/// inventory as the kernel computes it.
pub fn fake_render(
    (name, namespace, uuid): (&str, &str, &str),
    objects: &[(&str, &str, &str, &str)],
    msg: &str,
    required_contracts: Vec<String>,
) -> opm_operator::kernel::RenderResult {
    use opm_operator::kernel::{InstanceRef, RenderResult, RenderedObject};
    let objects: Vec<RenderedObject> = objects
        .iter()
        .map(|(api_version, kind, object_name, component)| {
            let mut object = serde_json::json!({
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {
                    "name": object_name,
                    "namespace": namespace,
                    "labels": {
                        "app.kubernetes.io/managed-by": "opm-controller",
                        "module-instance.opmodel.dev/name": name,
                        "module-instance.opmodel.dev/namespace": namespace,
                        "module-instance.opmodel.dev/uuid": uuid,
                        "component.opmodel.dev/name": component,
                    },
                },
            });
            let field = if *kind == "ConfigMap" { "data" } else { "spec" };
            object[field] = serde_json::json!({ "msg": msg });
            RenderedObject {
                object,
                component: (*component).to_owned(),
                transformer: format!("x.test/t#{kind}"),
            }
        })
        .collect();
    RenderResult::new(
        InstanceRef {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            fqn: String::new(),
            uuid: uuid.to_owned(),
        },
        objects,
        Vec::new(),
        required_contracts,
    )
    .unwrap()
}

/// The holder of the operator's leader Lease in `opm-system`, if held.
pub async fn holder(client: &kube::Client) -> Option<String> {
    let api: Api<crds::k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "opm-system");
    api.get_opt(crds::LEADER_ELECTION_ID)
        .await
        .ok()??
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// For `serve` processes against `env`'s cluster: namespace `opm-system` (the leader Lease's)
/// and a kubeconfig file in a fresh temporary directory (returned with the file's path).
pub async fn serve_cluster(env: &Env) -> (tempfile::TempDir, std::path::PathBuf) {
    namespace(&env.client, "opm-system").await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, env.emu.kubeconfig_yaml()).unwrap();
    (dir, kubeconfig)
}

/// Every condition message is well-formed (issue 29 item 4): within a line, no doubled separator
/// (`@v0@`, two spaces, `: :`, `//`, `, ,`, `; ;`, `::`) and no empty quoted field; no line
/// ends with a dangling `:` unless an indented list follows it; no surrounding whitespace; only
/// a True condition may have an empty message. Indented continuation lines (`\n  item`) are
/// the reconcilers' list format, and the apiserver's own `API group ""` (the core group) in a
/// forwarded 403 is its wording, not an empty field of ours.
pub fn assert_messages_well_formed(
    conds: &[crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) {
    for c in conds {
        let m = &c.message;
        let what = format!("{} {}: {m:?}", c.type_, c.reason);
        assert!(m.trim() == m, "{what}: surrounding whitespace");
        assert!(!m.is_empty() || c.status == "True", "{what}: empty message");
        let lines: Vec<&str> = m.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // A URL's `://` is not a doubled separator; the apiserver names the core group `""`.
            let text = line
                .trim_start()
                .replace("://", ":")
                .replace("API group \"\"", "API group core");
            for bad in ["@v0@", "  ", ": :", "\"\"", "//", ", ,", "; ;", "::"] {
                assert!(!text.contains(bad), "{what}: contains {bad:?}");
            }
            let list_follows = lines.get(i + 1).is_some_and(|n| n.starts_with("  "));
            assert!(
                !text.trim_end().ends_with(':') || list_follows,
                "{what}: a line ends with a dangling ':'"
            );
        }
    }
}
