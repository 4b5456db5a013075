//! Issue 40 on ModuleInstance against kube-emu, both outcomes of each rule: `valuesFrom`
//! (merge order, optional and required sources, another namespace, the apply identity, the
//! canary: no Secret value in status, events, history, metrics or any log line at trace level),
//! `interval` with drift `Enabled` / `Warn` / `Disabled` and `ignore` rules, and `dependsOn`
//! (readiness, `readyExpr`, cycles, waking, reverse deletion order). The renderer is a fake
//! that renders the values into a ConfigMap and a Deployment; the watches (labelled Secrets,
//! dependency wake-ups, the interval) run in the real kube-runtime controller
//! (`manager::run_instances`) over HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crds::conditions::types;
use crds::k8s_openapi::api::apps::v1::Deployment;
use crds::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use crds::module_instance::ModuleInstance;
use crds::platform::Platform;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use opm_operator::controller::context::{Context, Reconciled};
use opm_operator::controller::{instance, manager, platform};
use opm_operator::kernel::{
    BuiltPlatform, ErrorClass, InstanceRef, KernelError, ModuleRenderer, ModuleRequest, Problem,
    RenderResult, RenderedObject, SkewPolicy,
};
use serde_json::{json, Value};

use super::common::*;

const NS: &str = "team-a";
const UUID: &str = "6f1c0e52-0000-4000-8000-0000000000aa";

/// Renders ConfigMap `<name>-values` (data `values` = the values as JSON) and Deployment
/// `<name>` (`replicas` = `values.replicas`, default 2); `values.explode` fails the render with
/// a values error quoting it, as CUE quotes a conflicting value.
#[derive(Default)]
struct Renderer {
    seen: Mutex<Vec<Option<Value>>>,
}

impl Renderer {
    fn last(&self) -> Option<Value> {
        self.seen.lock().unwrap().last().cloned().flatten()
    }
    fn renders(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

impl ModuleRenderer for Renderer {
    fn render_module(
        &self,
        req: &ModuleRequest,
        _platform: &BuiltPlatform,
        _skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        self.seen.lock().unwrap().push(req.values.clone());
        let values = req.values.clone().unwrap_or_else(|| json!({}));
        if let Some(v) = values.get("explode") {
            return Err(KernelError {
                class: ErrorClass::Values,
                message: format!("values.explode: conflicting values {v} and int"),
                problems: vec![Problem {
                    path: "values.explode".into(),
                    message: format!("conflicting values {v} and int"),
                    positions: vec![],
                }],
            });
        }
        let labels = json!({
            "app.kubernetes.io/managed-by": "opm-controller",
            "module-instance.opmodel.dev/name": req.name,
            "module-instance.opmodel.dev/namespace": req.namespace,
            "module-instance.opmodel.dev/uuid": UUID,
            "component.opmodel.dev/name": "web",
        });
        let replicas = values.get("replicas").and_then(Value::as_i64).unwrap_or(2);
        let objects = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("{}-values", req.name), "namespace": req.namespace, "labels": labels},
                   "data": {"values": values.to_string()}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": req.name, "namespace": req.namespace, "labels": labels},
                   "spec": {"replicas": replicas,
                            "selector": {"matchLabels": {"app": req.name}},
                            "template": {"metadata": {"labels": {"app": req.name}},
                                         "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}}),
        ];
        RenderResult::new(
            InstanceRef {
                name: req.name.clone(),
                namespace: req.namespace.clone(),
                fqn: String::new(),
                uuid: UUID.into(),
            },
            objects
                .into_iter()
                .map(|object| RenderedObject {
                    object,
                    component: "web".into(),
                    transformer: "x.test/t#web".into(),
                })
                .collect(),
            Vec::new(),
            Vec::new(),
        )
        .map_err(|e| KernelError::new(ErrorClass::Other, e.to_string()))
    }
}

struct G {
    env: Env,
    ctx: Arc<Context>,
    renderer: Arc<Renderer>,
}

async fn g_env(customise: impl FnOnce(&mut Context)) -> G {
    let env = env().await;
    namespace(&env.client, NS).await;
    let renderer = Arc::new(Renderer::default());
    let config = env.emu.config().unwrap();
    let ctx = context_for(&env, "gitops-platform", |ctx| {
        ctx.renderer = Some(renderer.clone());
        ctx.kube_config = Some(config);
        customise(ctx);
    });
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    platform::reconcile("cluster", &ctx).await.unwrap();
    G { env, ctx, renderer }
}

impl G {
    fn instances(&self) -> Api<ModuleInstance> {
        Api::namespaced(self.env.client.clone(), NS)
    }
    async fn create(&self, name: &str, spec: Value) {
        let mut mi = ModuleInstance::test().named(NS, name);
        let mut merged = serde_json::to_value(&mi.spec).unwrap();
        for (k, v) in spec.as_object().unwrap() {
            merged[k] = v.clone();
        }
        mi.spec = serde_json::from_value(merged).unwrap();
        create(&self.instances(), mi).await;
    }
    /// Reconciles until past the finalizer gate.
    async fn reconcile(&self, name: &str) -> Reconciled {
        let mut r = instance::reconcile(NS, name, &self.ctx).await.unwrap();
        if r.requeue == Some(Duration::ZERO) && r.reason.is_none() {
            r = instance::reconcile(NS, name, &self.ctx).await.unwrap();
        }
        r
    }
    async fn get(&self, name: &str) -> ModuleInstance {
        self.instances().get(name).await.unwrap()
    }
    async fn ready(&self, name: &str) -> (String, String, String) {
        let mi = self.get(name).await;
        condition(&mi.status.unwrap_or_default().conditions, types::READY).unwrap()
    }
    async fn secret(&self, name: &str, data: &[(&str, &str)], watched: bool) {
        let api: Api<Secret> = Api::namespaced(self.env.client.clone(), NS);
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": if watched {
                json!({"reconcile.fluxcd.io/watch": "Enabled"}) } else { json!({}) }},
            "stringData": data.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
        }))
        .unwrap();
        match api.get_opt(name).await.unwrap() {
            None => {
                api.create(&PostParams::default(), &s).await.unwrap();
            }
            Some(_) => {
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"stringData": s.string_data})),
                )
                .await
                .unwrap();
            }
        }
    }
    async fn config_map(&self, name: &str, data: &[(&str, &str)]) {
        let api: Api<ConfigMap> = Api::namespaced(self.env.client.clone(), NS);
        let c: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name},
            "data": data.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
        }))
        .unwrap();
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.env.client.clone(), NS)
    }
    async fn replicas(&self, name: &str) -> Option<i32> {
        self.deployments().get(name).await.unwrap().spec.replicas
    }
    /// Scales `name` by hand (an Update by another field manager, as `kubectl scale` or an HPA).
    async fn scale_by_hand(&self, name: &str, replicas: i32) {
        self.deployments()
            .patch(
                name,
                &PatchParams {
                    field_manager: Some("kubectl-edit".into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
    }
    /// Runs the ModuleInstance controller until the returned sender is dropped or set.
    fn run_controller(&self) -> tokio::sync::watch::Sender<bool> {
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            manager::run_instances(ctx, async move {
                let _ = rx.wait_for(|s| *s).await;
            })
            .await;
        });
        tx
    }
}

fn five_s() -> Option<Duration> {
    Some(Duration::from_secs(5))
}

// ---------------------------------------------------------------------------------------------
// valuesFrom.

#[tokio::test]
async fn values_from_merges_in_order_under_spec_values_and_a_secret_change_reapplies() {
    let g = g_env(|_| {}).await;
    g.secret(
        "base",
        &[("values.yaml", "a: {x: 1, y: 1}\nlist: [1, 2]\nkeep: s\n")],
        false,
    )
    .await;
    g.config_map(
        "over",
        &[
            ("values.yaml", "a: {y: 2}\nlist: [3]\n"),
            ("tag", "\"007\""),
        ],
    )
    .await;
    g.create(
        "web",
        json!({
            "values": {"a": {"z": 3}, "keep": "spec"},
            "valuesFrom": [
                {"kind": "Secret", "name": "base"},
                {"kind": "ConfigMap", "name": "over"},
                {"kind": "ConfigMap", "name": "over", "valuesKey": "tag", "targetPath": "image.tag"},
                {"kind": "Secret", "name": "absent", "optional": true},
                {"kind": "ConfigMap", "name": "over", "valuesKey": "absent", "optional": true}
            ]
        }),
    )
    .await;
    let r = g.reconcile("web").await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
    assert_eq!(
        g.renderer.last(),
        Some(
            json!({"a": {"x": 1, "y": 2, "z": 3}, "list": [3], "keep": "spec",
                    "image": {"tag": "007"}})
        )
    );
    let digest = g
        .get("web")
        .await
        .status
        .unwrap()
        .reconcile
        .last_applied_config_digest;
    // Unchanged sources: a NoOp.
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    assert_eq!(
        g.get("web")
            .await
            .status
            .unwrap()
            .reconcile
            .last_applied_config_digest,
        digest
    );
    // A changed Secret re-renders and re-applies (the digest covers the values).
    g.secret("base", &[("values.yaml", "a: {x: 9}\n")], false)
        .await;
    let r = g.reconcile("web").await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::Applied),
        "{r:?}"
    );
    let cm: Api<ConfigMap> = Api::namespaced(g.env.client.clone(), NS);
    let data = cm.get("web-values").await.unwrap().data.unwrap();
    assert!(data["values"].contains("\"x\":9"), "{data:?}");
    let status = g.get("web").await.status.unwrap();
    assert_ne!(status.reconcile.last_applied_config_digest, digest);
    let stored = serde_json::to_string(&status).unwrap();
    assert!(!stored.contains("\"x\":9"), "no value in the status");
}

#[tokio::test]
async fn a_missing_required_source_is_not_ready_until_it_appears() {
    let g = g_env(|_| {}).await;
    g.create(
        "web",
        json!({"valuesFrom": [{"kind": "Secret", "name": "creds"}]}),
    )
    .await;
    let r = g.reconcile("web").await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("ValuesFromNotFound"), five_s()),
        "{r:?}"
    );
    let (st, _, msg) = g.ready("web").await;
    assert_eq!(
        (st.as_str(), msg.as_str()),
        ("False", "valuesFrom Secret team-a/creds not found")
    );
    assert_eq!(g.renderer.renders(), 0, "nothing rendered");
    // The object without the key is still missing what is required.
    g.secret("creds", &[("other", "x")], false).await;
    let r = g.reconcile("web").await;
    assert_eq!(r.reason, Some("ValuesFromNotFound"));
    assert_eq!(
        g.ready("web").await.2,
        "valuesFrom key values.yaml of Secret team-a/creds not found"
    );
    g.secret("creds", &[("values.yaml", "msg: hi\n")], false)
        .await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    assert_eq!(g.renderer.last(), Some(json!({"msg": "hi"})));
}

#[tokio::test]
async fn another_namespace_and_unusable_content_stall_without_showing_the_content() {
    let g = g_env(|_| {}).await;
    g.secret(
        "creds",
        &[("values.yaml", "- not-a-mapping-s3cr3t\n")],
        false,
    )
    .await;
    g.create(
        "web",
        json!({"valuesFrom": [{"kind": "Secret", "name": "creds", "namespace": "other"}]}),
    )
    .await;
    let r = g.reconcile("web").await;
    let ready = g.get("web").await.status.unwrap().conditions;
    let msg = assert_stalled(&r, &ready, "ValuesFromInvalid");
    assert!(
        msg.contains("another namespace than the instance's (team-a) is refused"),
        "{msg}"
    );
    patch_spec(
        &g.instances(),
        "web",
        json!({"valuesFrom": [{"kind": "Secret", "name": "creds"}]}),
    )
    .await;
    let r = g.reconcile("web").await;
    let ready = g.get("web").await.status.unwrap().conditions;
    let msg = assert_stalled(&r, &ready, "ValuesFromInvalid");
    assert!(
        msg.contains("not a YAML mapping") && !msg.contains("s3cr3t"),
        "{msg}"
    );
}

#[tokio::test]
async fn values_are_read_as_the_service_account_the_instance_applies_as() {
    let g = g_env(|_| {}).await;
    service_account(&g.env.client, NS, "deploy").await;
    role(
        &g.env.client,
        NS,
        "deploy",
        &[("", "configmaps"), ("apps", "deployments")],
        &["get", "list", "create", "patch", "update", "delete"],
    )
    .await;
    bind(
        &g.env.client,
        NS,
        "deploy",
        "deploy",
        "User",
        "system:serviceaccount:team-a:deploy",
    )
    .await;
    g.secret("creds", &[("values.yaml", "msg: from-secret\n")], false)
        .await;
    g.create(
        "web",
        json!({"serviceAccountName": "deploy",
               "valuesFrom": [{"kind": "Secret", "name": "creds"}]}),
    )
    .await;
    let r = g.reconcile("web").await;
    let conds = g.get("web").await.status.unwrap().conditions;
    let msg = assert_stalled(&r, &conds, "ValuesFromForbidden");
    assert!(
        msg.contains("Secret team-a/creds") && msg.contains("system:serviceaccount:team-a:deploy"),
        "{msg}"
    );
    role(&g.env.client, NS, "secrets", &[("", "secrets")], &["get"]).await;
    bind(
        &g.env.client,
        NS,
        "secrets",
        "secrets",
        "User",
        "system:serviceaccount:team-a:deploy",
    )
    .await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    assert_eq!(g.renderer.last(), Some(json!({"msg": "from-secret"})));
}

/// A writer of captured log lines (the test process's own subscriber, behind the redacting
/// writer `serve` uses).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn the_canary_never_reaches_status_events_history_metrics_or_the_log() {
    const CANARY: &str = "canary-7f3e9b21-do-not-leak";
    let logs = Captured::default();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(opm_operator::values_from::Redacting(logs.clone()))
        .with_ansi(false)
        .init();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = opm_operator::controller::metrics::ControllerMetrics::register(&mut registry);
    let g = g_env(|ctx| ctx.metrics = Some(metrics)).await;
    // A Secret whose value the module rejects (CUE quotes a conflicting value in its error), as
    // a mapping, and the same value set by targetPath.
    let yaml = format!("explode: {CANARY}\n");
    g.secret(
        "creds",
        &[("values.yaml", yaml.as_str()), ("raw", CANARY)],
        false,
    )
    .await;
    g.create(
        "web",
        json!({"valuesFrom": [{"kind": "Secret", "name": "creds"}]}),
    )
    .await;
    let r = g.reconcile("web").await;
    assert_eq!(r.reason, Some("ResolutionFailed"), "{r:?}");
    tracing::trace!(values = %CANARY, "a log line printing a Secret value");
    let msg = g.ready("web").await.2;
    assert!(msg.contains("[redacted]"), "{msg}");
    // The targetPath form, then a success whose ConfigMap carries the value (the render output).
    patch_spec(
        &g.instances(),
        "web",
        json!({"valuesFrom": [{"kind": "Secret", "name": "creds", "valuesKey": "raw", "targetPath": "explode"}]}),
    )
    .await;
    assert_eq!(g.reconcile("web").await.reason, Some("ResolutionFailed"));
    patch_spec(
        &g.instances(),
        "web",
        json!({"valuesFrom": [{"kind": "Secret", "name": "creds", "valuesKey": "raw", "targetPath": "password"}]}),
    )
    .await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    assert_eq!(g.renderer.last(), Some(json!({"password": CANARY})));

    let status = serde_json::to_string(&g.get("web").await.status).unwrap();
    assert!(!status.contains(CANARY), "status: {status}");
    let events: Api<crds::k8s_openapi::api::events::v1::Event> = Api::all(g.env.client.clone());
    let events = serde_json::to_string(&events.list(&Default::default()).await.unwrap()).unwrap();
    assert!(events.contains("ResolutionFailed"), "{events}");
    assert!(!events.contains(CANARY), "events: {events}");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains("opm_controller_reconcile_total"), "{text}");
    assert!(!text.contains(CANARY), "metrics");
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("a log line printing a Secret value"),
        "trace lines are captured"
    );
    assert!(!logged.contains(CANARY), "logs: {logged}");
}

// ---------------------------------------------------------------------------------------------
// interval and drift.

#[tokio::test]
async fn the_interval_requeues_and_without_it_nothing_does() {
    let g = g_env(|_| {}).await;
    g.create("web", json!({})).await;
    assert_eq!(g.reconcile("web").await.requeue, None);
    g.create("api", json!({"interval": "10m"})).await;
    let r = g.reconcile("api").await;
    assert_eq!(
        (r.reason, r.requeue),
        (
            Some("ReconciliationSucceeded"),
            Some(Duration::from_secs(600))
        )
    );
}

#[tokio::test]
async fn enabled_drift_is_put_back_within_one_interval() {
    let g = g_env(|_| {}).await;
    g.create(
        "web",
        json!({"interval": "2s", "drift": {"mode": "Enabled"}}),
    )
    .await;
    let stop = g.run_controller();
    assert!(
        eventually(30, || async {
            g.get("web")
                .await
                .status
                .is_some_and(|s| crds::conditions::is_true(&s.conditions, types::READY))
        })
        .await
    );
    g.scale_by_hand("web", 5).await;
    let t = std::time::Instant::now();
    assert!(
        eventually(10, || async { g.replicas("web").await == Some(2) }).await,
        "not put back"
    );
    println!("drift put back after {:?} (interval 2s)", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        eventually(10, || async {
            !events(&g.env.client, "web", "DriftCorrected")
                .await
                .is_empty()
        })
        .await
    );
    stop.send_replace(true);
}

#[tokio::test]
async fn warn_reports_drift_and_leaves_it_and_disabled_checks_nothing() {
    let g = g_env(|_| {}).await;
    g.create("web", json!({"drift": {"mode": "Warn"}})).await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    g.scale_by_hand("web", 5).await;
    g.reconcile("web").await;
    let conds = g.get("web").await.status.unwrap().conditions;
    assert_eq!(
        condition(&conds, types::DRIFTED),
        Some((
            "True".into(),
            "DriftDetected".into(),
            "1 resource(s) drifted from desired state".into()
        ))
    );
    assert_eq!(events(&g.env.client, "web", "DriftDetected").await.len(), 1);
    assert_eq!(g.replicas("web").await, Some(5), "left alone");
    assert!(events(&g.env.client, "web", "DriftCorrected")
        .await
        .is_empty());
    // Disabled: no check, Drifted removed, still left alone.
    patch_spec(
        &g.instances(),
        "web",
        json!({"drift": {"mode": "Disabled"}}),
    )
    .await;
    g.reconcile("web").await;
    let conds = g.get("web").await.status.unwrap().conditions;
    assert_eq!(condition(&conds, types::DRIFTED), None);
    assert_eq!(g.replicas("web").await, Some(5));
    // The process-wide default applies when the instance sets nothing: Enabled here.
    let g2 = g_env(|ctx| ctx.gitops.default_drift_mode = crds::drift::DriftMode::Enabled).await;
    g2.create("web", json!({})).await;
    g2.reconcile("web").await;
    g2.scale_by_hand("web", 7).await;
    g2.reconcile("web").await;
    assert_eq!(g2.replicas("web").await, Some(2), "put back by the default");
}

#[tokio::test]
async fn ignored_fields_are_neither_drift_nor_applied_again() {
    let g = g_env(|_| {}).await;
    g.create(
        "web",
        json!({"drift": {"mode": "Enabled", "ignore": [
            {"paths": ["/spec/replicas"], "target": {"kind": "Deployment", "group": "apps"}}]}}),
    )
    .await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    assert_eq!(
        g.replicas("web").await,
        Some(2),
        "created with the rendered value"
    );
    g.scale_by_hand("web", 5).await;
    g.reconcile("web").await;
    let conds = g.get("web").await.status.unwrap().conditions;
    assert_eq!(condition(&conds, types::DRIFTED), None, "ignored: no drift");
    assert_eq!(g.replicas("web").await, Some(5));
    // A new render applies again, without the ignored field: the hand's value stays.
    patch_spec(&g.instances(), "web", json!({"values": {"msg": "v2"}})).await;
    let r = g.reconcile("web").await;
    assert_eq!(
        r.outcome,
        Some(opm_operator::controller::outcome::Outcome::Applied),
        "{r:?}"
    );
    assert_eq!(g.replicas("web").await, Some(5), "not applied again");
    let managed = g
        .deployments()
        .get("web")
        .await
        .unwrap()
        .metadata
        .managed_fields
        .unwrap();
    // Ours: `opm-controller`'s entry, or the create claim's while the Deployment has not been
    // written since its create (the lazy hand-over, `opm_operator::apply::claim`).
    let ours: Vec<_> = managed
        .iter()
        .filter(|m| {
            m.manager
                .as_deref()
                .is_some_and(|m| m == "opm-controller" || m.starts_with("opm-claim."))
                && m.operation.as_deref() == Some("Apply")
        })
        .collect();
    assert!(!ours.is_empty(), "{managed:?}");
    for entry in ours {
        let fields = serde_json::to_string(&entry.fields_v1).unwrap();
        assert!(!fields.contains("f:replicas"), "released: {fields}");
    }
    // Without the rule the same edit is drift, and Enabled puts it back.
    patch_spec(
        &g.instances(),
        "web",
        json!({"drift": {"mode": "Enabled", "ignore": null}}),
    )
    .await;
    g.reconcile("web").await;
    g.reconcile("web").await;
    assert_eq!(g.replicas("web").await, Some(2));
}

// ---------------------------------------------------------------------------------------------
// dependsOn.

async fn mark_ready(g: &G, name: &str) {
    let generation = g.get(name).await.metadata.generation;
    patch_status(
        &g.instances(),
        name,
        json!({"observedGeneration": generation, "conditions": [{
            "type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": generation
        }]}),
    )
    .await;
}

#[tokio::test]
async fn depends_on_blocks_until_ready_and_ready_expr_replaces_the_check() {
    let g = g_env(|_| {}).await;
    g.create("web", json!({"dependsOn": [{"name": "db"}]}))
        .await;
    let r = g.reconcile("web").await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("DependencyNotReady"), five_s()),
        "{r:?}"
    );
    assert_eq!(
        g.ready("web").await,
        (
            "False".into(),
            "DependencyNotReady".into(),
            "waiting for dependency team-a/db (not found)".into()
        )
    );
    let ev = events(&g.env.client, "web", "DependencyNotReady").await;
    assert_eq!(one_event(&ev).0, "Normal");
    assert_eq!(g.renderer.renders(), 0);
    // Present, not ready: blocked naming it; then Ready at its generation: proceeds.
    g.create("db", json!({"suspend": true})).await;
    assert_eq!(g.reconcile("web").await.reason, Some("DependencyNotReady"));
    assert_eq!(g.ready("web").await.2, "waiting for dependency team-a/db");
    mark_ready(&g, "db").await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    // readyExpr replaces the Ready check: false blocks, true passes, an error names itself.
    patch_spec(
        &g.instances(),
        "web",
        json!({"dependsOn": [{"name": "db", "readyExpr": "dep.spec.suspend == false"}]}),
    )
    .await;
    assert_eq!(g.reconcile("web").await.reason, Some("DependencyNotReady"));
    assert_eq!(
        g.ready("web").await.2,
        "waiting for dependency team-a/db (readyExpr is false)"
    );
    patch_spec(
        &g.instances(),
        "web",
        json!({"dependsOn": [{"name": "db", "readyExpr": "dep.spec.suspend && self.metadata.name == 'web'"}]}),
    )
    .await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    patch_spec(
        &g.instances(),
        "web",
        json!({"dependsOn": [{"name": "db", "readyExpr": "dep.status.nothing == 1"}]}),
    )
    .await;
    assert_eq!(g.reconcile("web").await.reason, Some("DependencyNotReady"));
    assert!(
        g.ready("web").await.2.contains("(readyExpr: "),
        "{:?}",
        g.ready("web").await
    );
    // An expression that does not compile, or is no boolean, stalls.
    for expr in ["dep.spec ==", "dep.metadata.name"] {
        patch_spec(
            &g.instances(),
            "web",
            json!({"dependsOn": [{"name": "db", "readyExpr": expr}]}),
        )
        .await;
        let r = g.reconcile("web").await;
        let conds = g.get("web").await.status.unwrap().conditions;
        assert_stalled(&r, &conds, "DependencyInvalid");
    }
    // Another namespace: refused without --allow-cross-namespace-refs.
    patch_spec(
        &g.instances(),
        "web",
        json!({"dependsOn": [{"name": "db", "namespace": "other"}]}),
    )
    .await;
    let r = g.reconcile("web").await;
    let conds = g.get("web").await.status.unwrap().conditions;
    let msg = assert_stalled(&r, &conds, "DependencyInvalid");
    assert!(msg.contains("--allow-cross-namespace-refs"), "{msg}");
}

#[tokio::test]
async fn a_dependency_cycle_stalls_naming_it() {
    let g = g_env(|_| {}).await;
    g.create("a", json!({"dependsOn": [{"name": "b"}]})).await;
    g.create("b", json!({"dependsOn": [{"name": "c"}]})).await;
    g.create("c", json!({"dependsOn": [{"name": "a"}]})).await;
    let r = g.reconcile("a").await;
    let conds = g.get("a").await.status.unwrap().conditions;
    let msg = assert_stalled(&r, &conds, "DependencyCycle");
    assert_eq!(
        msg,
        "dependency cycle: team-a/a -> team-a/b -> team-a/c -> team-a/a"
    );
    // Breaking it: c depends on nothing, a waits for b (not ready), not a cycle any more.
    patch_spec(&g.instances(), "c", json!({"dependsOn": null})).await;
    assert_eq!(g.reconcile("a").await.reason, Some("DependencyNotReady"));
    g.create("self", json!({"dependsOn": [{"name": "self"}]}))
        .await;
    let r = g.reconcile("self").await;
    let conds = g.get("self").await.status.unwrap().conditions;
    assert_eq!(
        assert_stalled(&r, &conds, "DependencyCycle"),
        "dependency cycle: team-a/self -> team-a/self"
    );
}

#[tokio::test]
async fn a_dependency_becoming_ready_wakes_its_dependent() {
    // A long --requeue-dependency: only the wake-up can be fast.
    let g = g_env(|ctx| ctx.gitops.requeue_dependency = Duration::from_secs(300)).await;
    g.create("web", json!({"dependsOn": [{"name": "db"}]}))
        .await;
    g.create("db", json!({"suspend": true})).await;
    let stop = g.run_controller();
    assert!(
        eventually(20, || async {
            g.get("web").await.status.is_some_and(|s| {
                crds::conditions::get(&s.conditions, types::READY)
                    .is_some_and(|c| c.reason == "DependencyNotReady")
            })
        })
        .await
    );
    let t = std::time::Instant::now();
    patch_spec(&g.instances(), "db", json!({"suspend": false})).await;
    assert!(
        eventually(20, || async {
            g.get("web")
                .await
                .status
                .is_some_and(|s| crds::conditions::is_true(&s.conditions, types::READY))
        })
        .await,
        "{:?}",
        g.get("web").await.status
    );
    println!(
        "dependent Ready {:?} after its dependency was resumed",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(60));
    stop.send_replace(true);
}

#[tokio::test]
async fn deletion_waits_for_dependents_being_deleted_and_not_for_others() {
    let g = g_env(|_| {}).await;
    g.create("db", json!({"prune": true})).await;
    assert_eq!(
        g.reconcile("db").await.reason,
        Some("ReconciliationSucceeded")
    );
    g.create("web", json!({"prune": true, "dependsOn": [{"name": "db"}]}))
        .await;
    assert_eq!(
        g.reconcile("web").await.reason,
        Some("ReconciliationSucceeded")
    );
    for name in ["web", "db"] {
        g.instances()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let r = g.reconcile("db").await;
    assert_eq!(
        (r.reason, r.requeue),
        (Some("DependentsDeleting"), five_s()),
        "{r:?}"
    );
    assert_eq!(
        g.ready("db").await.2,
        "waiting for dependents being deleted first: team-a/web"
    );
    let cm: Api<ConfigMap> = Api::namespaced(g.env.client.clone(), NS);
    assert!(
        cm.get_opt("db-values").await.unwrap().is_some(),
        "the dependency's objects stay"
    );
    g.reconcile("web").await;
    assert!(
        g.instances().get_opt("web").await.unwrap().is_none(),
        "the dependent is gone"
    );
    g.reconcile("db").await;
    assert!(g.instances().get_opt("db").await.unwrap().is_none());
    assert!(
        cm.get_opt("db-values").await.unwrap().is_none(),
        "pruned after"
    );
    // A dependent that is not being deleted does not hold a deletion up.
    g.create("db2", json!({"prune": true})).await;
    g.reconcile("db2").await;
    g.create("web2", json!({"dependsOn": [{"name": "db2"}]}))
        .await;
    g.instances()
        .delete("db2", &DeleteParams::default())
        .await
        .unwrap();
    g.reconcile("db2").await;
    assert!(g.instances().get_opt("db2").await.unwrap().is_none());
}

#[tokio::test]
async fn a_labelled_secret_change_rerenders_at_once_and_an_unlabelled_one_waits() {
    let g = g_env(|_| {}).await;
    g.secret("watched", &[("values.yaml", "msg: one\n")], true)
        .await;
    g.secret("quiet", &[("values.yaml", "other: one\n")], false)
        .await;
    g.create(
        "web",
        json!({"valuesFrom": [{"kind": "Secret", "name": "watched"}, {"kind": "Secret", "name": "quiet"}]}),
    )
    .await;
    let stop = g.run_controller();
    let cm: Api<ConfigMap> = Api::namespaced(g.env.client.clone(), NS);
    let values = || async {
        cm.get_opt("web-values")
            .await
            .unwrap()
            .and_then(|c| c.data)
            .map(|d| d["values"].clone())
            .unwrap_or_default()
    };
    assert!(eventually(30, || async { values().await.contains("\"msg\":\"one\"") }).await);
    g.secret("quiet", &[("values.yaml", "other: two\n")], false)
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        values().await.contains("\"other\":\"one\""),
        "not watched: waits"
    );
    g.secret("watched", &[("values.yaml", "msg: two\n")], true)
        .await;
    assert!(
        eventually(20, || async { values().await.contains("\"msg\":\"two\"") }).await,
        "{}",
        values().await
    );
    assert!(
        values().await.contains("\"other\":\"two\""),
        "read at that reconcile"
    );
    stop.send_replace(true);
}
