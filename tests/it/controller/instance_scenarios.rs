//! ModuleInstance reconciler scenarios 32, 38, 41 and 43 (docs/design/operator.md §8; §2.2 phases 1, 4–6,
//! §2.5, §6.2), and docs/design/principles.md rules 2–3 (A→B→A component set, empty render refused), against
//! kube-emu: skew with the real kernel on the fixture modules published to the
//! real `docker-registry`; staleness across component moves and API versions, and impersonated
//! apply under kube-emu's RBAC, with a scripted renderer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crds::conditions::types;
use crds::k8s_openapi::api::core::v1::ConfigMap;
use crds::k8s_openapi::api::rbac::v1::RoleBinding;
use crds::module_instance::ModuleInstance;
use crds::platform::Platform;
use kube::Api;
use opm_operator::controller::context::{Context, Reconciled};
use opm_operator::controller::outcome::Outcome;
use opm_operator::controller::{instance, platform};
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{
    BuiltPlatform, KernelError, ModuleRenderer, ModuleRequest, RenderResult,
};
use opm_operator::platform::{Layout, Store};

use super::common::*;

const NS: &str = "team-a";
const NAME: &str = "web";
const UUID: &str = "6f1c0e52-0000-4000-8000-000000000002";
const STALLED_RECHECK: Duration = Duration::from_secs(30 * 60);
const CONFIG_MAPS: &[(&str, &str)] = &[("", "configmaps")];

/// Renders exactly the scripted objects (each `(apiVersion, kind, name, component)`), with the
/// OPM labels of instance `NAME`, data/spec `msg` from `values.msg`.
struct ScriptedRenderer {
    objects: Mutex<Vec<(&'static str, &'static str, &'static str, &'static str)>>,
}

impl ModuleRenderer for ScriptedRenderer {
    fn render_module(
        &self,
        req: &ModuleRequest,
        _platform: &BuiltPlatform,
        _skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        let msg = req
            .values
            .as_ref()
            .and_then(|v| v.get("msg"))
            .and_then(|v| v.as_str())
            .unwrap_or("hello")
            .to_owned();
        let objects = self.objects.lock().unwrap().clone();
        Ok(fake_render(
            (&req.name, &req.namespace, UUID),
            &objects,
            &msg,
            Vec::new(),
        ))
    }
}

struct Mi {
    env: Env,
    ctx: Arc<Context>,
    renderer: Arc<ScriptedRenderer>,
}

/// A cluster with namespace `team-a`, instance `web` (prune on), a recorded platform and a
/// context whose controller client configuration is the emulator's (so SAs can be impersonated).
async fn mi_env(objects: Vec<(&'static str, &'static str, &'static str, &'static str)>) -> Mi {
    let env = env().await;
    namespace(&env.client, NS).await;
    let renderer = Arc::new(ScriptedRenderer {
        objects: Mutex::new(objects),
    });
    let ctx = context_for(&env, "mi-platform", |ctx| {
        ctx.renderer = Some(renderer.clone());
        ctx.kube_config = Some(env.emu.config().unwrap());
    });
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    platform::reconcile("cluster", &ctx).await.unwrap();
    create(
        &instances(&env.client),
        ModuleInstance::test().named(NS, NAME).with_prune(true),
    )
    .await;
    Mi { env, ctx, renderer }
}

fn instances(client: &kube::Client) -> Api<ModuleInstance> {
    Api::namespaced(client.clone(), NS)
}

fn config_maps(client: &kube::Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), NS)
}

async fn reconcile(m: &Mi) -> Reconciled {
    instance::reconcile(NS, NAME, &m.ctx).await.unwrap()
}

async fn status(m: &Mi) -> crds::module_instance::ModuleInstanceStatus {
    instances(&m.env.client)
        .get(NAME)
        .await
        .unwrap()
        .status
        .unwrap()
}

async fn set_values(m: &Mi, msg: &str) {
    patch_spec(
        &instances(&m.env.client),
        NAME,
        serde_json::json!({"values": {"msg": msg}}),
    )
    .await;
}

/// Finalizer, then a first successful apply.
async fn first_apply(m: &Mi) {
    assert_eq!(reconcile(m).await.requeue, Some(Duration::ZERO));
    let r = reconcile(m).await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
}

#[tokio::test]
async fn scenario_38_a_component_move_and_an_api_version_change_are_not_stale() {
    let m = mi_env(vec![
        ("v1", "ConfigMap", "web-a", "a"),
        ("v1", "ConfigMap", "web-b", "b"),
        ("x.test/v1beta1", "Widget", "web-w", "w"),
    ])
    .await;
    install_widget_crd(&m.env.client).await;
    first_apply(&m).await;
    let uid_b = config_maps(&m.env.client)
        .get("web-b")
        .await
        .unwrap()
        .metadata
        .uid;
    let uid_w = widgets(&m.env.client, NS, "v1beta1")
        .get("web-w")
        .await
        .unwrap()
        .metadata
        .uid;

    // web-b moves to component `a`; the widget is now rendered at x.test/v1.
    *m.renderer.objects.lock().unwrap() = vec![
        ("v1", "ConfigMap", "web-a", "a"),
        ("v1", "ConfigMap", "web-b", "a"),
        ("x.test/v1", "Widget", "web-w", "w"),
    ];
    set_values(&m, "moved").await;
    let r = reconcile(&m).await;
    assert_eq!(r.outcome, Some(Outcome::Applied), "nothing pruned: {r:?}");
    assert!(events(&m.env.client, NAME, "Pruned").await.is_empty());
    // The same live objects, patched in place.
    let b = config_maps(&m.env.client).get("web-b").await.unwrap();
    assert_eq!(b.metadata.uid, uid_b);
    assert_eq!(b.data.unwrap()["msg"], "moved");
    assert_eq!(
        b.metadata.labels.unwrap()["component.opmodel.dev/name"],
        "a"
    );
    let w = widgets(&m.env.client, NS, "v1").get("web-w").await.unwrap();
    assert_eq!(w.metadata.uid, uid_w);
    assert_eq!(w.data["spec"]["msg"], "moved");
    // The inventory follows the render: web-b under `a`, the widget at v1.
    let inv = status(&m).await.reconcile.inventory.unwrap();
    assert_eq!((inv.revision, inv.count), (2, 3));
    let b_entry = inv.entries.iter().find(|e| e.name == "web-b").unwrap();
    assert_eq!(b_entry.component.as_deref(), Some("a"));
    let w_entry = inv.entries.iter().find(|e| e.name == "web-w").unwrap();
    assert_eq!(w_entry.v.as_deref(), Some("v1"));

    // Control: dropping web-b for real is stale and pruned.
    *m.renderer.objects.lock().unwrap() = vec![
        ("v1", "ConfigMap", "web-a", "a"),
        ("x.test/v1", "Widget", "web-w", "w"),
    ];
    set_values(&m, "dropped").await;
    let r = reconcile(&m).await;
    assert_eq!(r.outcome, Some(Outcome::AppliedAndPruned), "{r:?}");
    assert!(config_maps(&m.env.client)
        .get_opt("web-b")
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn lessons_rules_2_and_3_a_removed_then_restored_component_and_an_empty_render() {
    let m = mi_env(vec![
        ("v1", "ConfigMap", "web-a", "a"),
        ("v1", "ConfigMap", "web-b", "b"),
    ])
    .await;
    first_apply(&m).await;
    // A → B: b removed and pruned.
    *m.renderer.objects.lock().unwrap() = vec![("v1", "ConfigMap", "web-a", "a")];
    set_values(&m, "b-gone").await;
    assert_eq!(reconcile(&m).await.outcome, Some(Outcome::AppliedAndPruned));
    assert!(config_maps(&m.env.client)
        .get_opt("web-b")
        .await
        .unwrap()
        .is_none());
    // B → A: b comes back, re-created and recorded again.
    *m.renderer.objects.lock().unwrap() = vec![
        ("v1", "ConfigMap", "web-a", "a"),
        ("v1", "ConfigMap", "web-b", "b"),
    ];
    set_values(&m, "b-back").await;
    assert_eq!(reconcile(&m).await.outcome, Some(Outcome::Applied));
    let b = config_maps(&m.env.client).get("web-b").await.unwrap();
    assert_eq!(b.data.unwrap()["msg"], "b-back");
    let inv = status(&m).await.reconcile.inventory.unwrap();
    assert_eq!((inv.revision, inv.count), (3, 2));

    // An empty render over a non-empty inventory is refused before any write: Stalled
    // ApplyFailed, the inventory and the objects kept.
    m.renderer.objects.lock().unwrap().clear();
    set_values(&m, "empty").await;
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(STALLED_RECHECK), "{r:?}");
    let s = status(&m).await;
    let (st, reason, message) = condition(&s.conditions, types::STALLED).unwrap();
    assert_eq!((st.as_str(), reason.as_str()), ("True", "ApplyFailed"));
    assert!(message.contains("empty render"), "{message}");
    assert_eq!(s.reconcile.inventory.unwrap(), inv);
    for n in ["web-a", "web-b"] {
        assert!(config_maps(&m.env.client)
            .get_opt(n)
            .await
            .unwrap()
            .is_some());
    }
}

#[tokio::test]
async fn scenarios_41_and_43_apply_and_prune_impersonate_the_service_account() {
    let m = mi_env(vec![
        ("v1", "ConfigMap", "web-a", "a"),
        ("v1", "ConfigMap", "web-b", "b"),
    ])
    .await;
    service_account(&m.env.client, NS, "deploy-sa").await;
    role(
        &m.env.client,
        NS,
        "configmaps-rw",
        CONFIG_MAPS,
        &["get", "list", "create", "patch", "update", "delete"],
    )
    .await;
    patch_spec(
        &instances(&m.env.client),
        NAME,
        serde_json::json!({"serviceAccountName": "deploy-sa"}),
    )
    .await;
    assert_eq!(reconcile(&m).await.requeue, Some(Duration::ZERO));

    // 43: the SA exists but holds no RBAC: the apply is refused (403) → Stalled
    // ImpersonationFailed, 30 min, one Warning ApplyFailed, nothing applied.
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(STALLED_RECHECK), "{r:?}");
    assert_eq!(r.outcome, Some(Outcome::FailedStalled));
    let s = status(&m).await;
    let (st, reason, message) = condition(&s.conditions, types::STALLED).unwrap();
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "ImpersonationFailed")
    );
    assert!(message.to_lowercase().contains("forbidden"), "{message}");
    let (ready, ready_reason, _) = condition(&s.conditions, types::READY).unwrap();
    assert_eq!(
        (ready.as_str(), ready_reason.as_str()),
        ("False", "ImpersonationFailed")
    );
    assert!(s.reconcile.inventory.is_none());
    assert_eq!(events(&m.env.client, NAME, "ApplyFailed").await.len(), 1);
    assert!(config_maps(&m.env.client)
        .get_opt("web-a")
        .await
        .unwrap()
        .is_none());

    // 41: a RoleBinding to the group `system:serviceaccounts:team-a` authorises the
    // impersonated identity (so the groups were sent); the apply succeeds.
    bind(
        &m.env.client,
        NS,
        "sa-group",
        "configmaps-rw",
        "Group",
        "system:serviceaccounts:team-a",
    )
    .await;
    let r = reconcile(&m).await;
    assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
    let a = config_maps(&m.env.client).get("web-a").await.unwrap();
    assert_eq!(a.data.unwrap()["msg"], "hello");
    assert!(condition(&status(&m).await.conditions, types::STALLED).is_none());

    // Prune also runs as the SA: with the group binding gone and one to the user
    // `system:serviceaccount:team-a:deploy-sa` instead, web-b is pruned.
    let rb: Api<RoleBinding> = Api::namespaced(m.env.client.clone(), NS);
    rb.delete("sa-group", &Default::default()).await.unwrap();
    bind(
        &m.env.client,
        NS,
        "sa-user",
        "configmaps-rw",
        "User",
        "system:serviceaccount:team-a:deploy-sa",
    )
    .await;
    *m.renderer.objects.lock().unwrap() = vec![("v1", "ConfigMap", "web-a", "a")];
    set_values(&m, "user").await;
    let r = reconcile(&m).await;
    assert_eq!(r.outcome, Some(Outcome::AppliedAndPruned), "{r:?}");
    assert!(config_maps(&m.env.client)
        .get_opt("web-b")
        .await
        .unwrap()
        .is_none());

    // A binding to a Role without `delete`: the apply succeeds, the prune of web-a is a 403
    // under the SA → Stalled ImpersonationFailed, Warning PruneFailed, and no failure history
    // entry (the baseline's quirk); web-a stays.
    rb.delete("sa-user", &Default::default()).await.unwrap();
    role(
        &m.env.client,
        NS,
        "configmaps-apply",
        CONFIG_MAPS,
        &["get", "list", "create", "patch", "update"],
    )
    .await;
    bind(
        &m.env.client,
        NS,
        "sa-apply",
        "configmaps-apply",
        "User",
        "system:serviceaccount:team-a:deploy-sa",
    )
    .await;
    let history_before = status(&m).await.reconcile.history;
    *m.renderer.objects.lock().unwrap() = vec![("v1", "ConfigMap", "web-c", "c")];
    set_values(&m, "no-delete").await;
    let r = reconcile(&m).await;
    assert_eq!(r.requeue, Some(STALLED_RECHECK), "{r:?}");
    let s = status(&m).await;
    let (_, reason, _) = condition(&s.conditions, types::STALLED).unwrap();
    assert_eq!(reason, "ImpersonationFailed");
    assert_eq!(s.reconcile.history, history_before);
    assert_eq!(events(&m.env.client, NAME, "PruneFailed").await.len(), 1);
    assert!(config_maps(&m.env.client)
        .get_opt("web-a")
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        s.reconcile.inventory.unwrap().entries[0].name,
        "web-a",
        "the inventory is kept"
    );
}

/// Scenario 32 with the real kernel: the demo module requires mini v0.1.0; the recorded
/// platform pins mini v0.0.9.
mod skew {
    use std::collections::BTreeMap;
    use std::path::Path;

    use cue::module::ModuleFile;
    use opm_operator::platform::{Generated, PackageIdentity};
    use opm_operator::render::Renderer;

    use super::*;
    use crate::registry::harness::{cli_ok, DistRegistry};

    const PROD: &str = "prod";
    const SHOP: &str = "shop";
    const MINI: &str = "fixtures.test/catalogs/mini@v0";

    fn opm() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm")
    }

    /// The generated platform fixture with mini pinned at v0.0.9.
    fn older_platform() -> BuiltPlatform {
        let dir = opm().join("platform/generated");
        let mf =
            ModuleFile::parse(&std::fs::read(dir.join("cue.mod/module.cue")).unwrap()).unwrap();
        let mut deps: BTreeMap<String, String> = mf
            .deps
            .iter()
            .map(|(p, d)| (p.clone(), d.version.clone()))
            .collect();
        deps.insert(MINI.into(), "v0.0.9".into());
        BuiltPlatform {
            dir,
            deps,
            ..BuiltPlatform::default()
        }
    }

    fn record(store: &Store<BuiltPlatform>, generation: i64, skew: SkewPolicy) {
        let platform = older_platform();
        store.set_generated(Generated {
            identity: PackageIdentity::unclaimed(generation).unwrap(),
            dir: platform.dir.clone(),
            platform,
            skew,
        });
    }

    #[tokio::test]
    async fn scenario_32_skew_refused_stalls_and_warn_renders_with_a_warning() {
        let reg = DistRegistry::start();
        for (m, v) in [
            ("core", "v0.1.0"),
            ("kube", "v0.1.0"),
            ("mini", "v0.1.0"),
            ("mini", "v0.0.9"),
            ("demo", "v0.1.0"),
        ] {
            let d = opm().join(m);
            cli_ok(&[
                "module",
                "publish",
                d.to_str().unwrap(),
                v,
                "--registry",
                &reg.mapping(),
            ]);
        }
        let env = env().await;
        let client = env.client.clone();
        namespace(&client, PROD).await;
        let renderer = Renderer::new(Arc::new(reg.client(None))).with_config(cue::Config {
            max_wall_time: Duration::from_secs(300),
            ..cue::Config::default()
        });
        let store = Store::new();
        record(&store, 1, SkewPolicy::Refuse);
        let layout = Arc::new(Layout::new(env.dir.path().join("skew-platform")).unwrap());
        let mut ctx = Context::new(
            client.clone(),
            store.clone(),
            layout,
            env.builder.clone(),
            env.acquirer.clone(),
            "test",
        );
        ctx.renderer = Some(Arc::new(renderer));
        let values: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(opm().join("values/valid.json")).unwrap(),
        )
        .unwrap();
        let mis: Api<ModuleInstance> = Api::namespaced(client.clone(), PROD);
        create(
            &mis,
            ModuleInstance::test()
                .named(PROD, SHOP)
                .with_module("fixtures.test/modules/demo@v0", "v0.1.0")
                .with_values(values)
                .with_prune(true),
        )
        .await;
        let reconcile = || instance::reconcile(PROD, SHOP, &ctx);
        assert_eq!(reconcile().await.unwrap().requeue, Some(Duration::ZERO));

        // Refuse: Stalled SkewRefused naming the dependency and both versions, 30 min, nothing
        // applied, one Warning (action Render).
        let r = reconcile().await.unwrap();
        assert_eq!(r.requeue, Some(STALLED_RECHECK), "{r:?}");
        assert_eq!(r.reason, Some("SkewRefused"));
        let s = mis.get(SHOP).await.unwrap().status.unwrap();
        let (st, reason, message) = condition(&s.conditions, types::STALLED).unwrap();
        assert_eq!((st.as_str(), reason.as_str()), ("True", "SkewRefused"));
        for part in [MINI, "v0.1.0", "v0.0.9", "fixtures.test/modules/demo"] {
            assert!(message.contains(part), "{part} missing from {message}");
        }
        assert!(s.reconcile.inventory.is_none());
        let refused = events(&client, SHOP, "SkewRefused").await;
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].type_.as_deref(), Some("Warning"));
        assert_eq!(refused[0].action.as_deref(), Some("Render"));
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), PROD);
        assert!(cms.get_opt("settings").await.unwrap().is_none());

        // Warn: the same platform renders and applies, with one RenderWarning naming the skew.
        record(&store, 2, SkewPolicy::Warn);
        let r = reconcile().await.unwrap();
        assert_eq!(r.reason, Some("ReconciliationSucceeded"), "{r:?}");
        let warned = events(&client, SHOP, "RenderWarning").await;
        assert_eq!(warned.len(), 1);
        assert_eq!(warned[0].type_.as_deref(), Some("Warning"));
        assert_eq!(warned[0].action.as_deref(), Some("Render"));
        assert_eq!(
            warned[0].note.as_deref(),
            Some("module fixtures.test/modules/demo@v0.1.0 requires fixtures.test/catalogs/mini@v0 v0.1.0, newer than the platform's v0.0.9")
        );
        assert!(cms.get_opt("settings").await.unwrap().is_some());
        let s = mis.get(SHOP).await.unwrap().status.unwrap();
        assert!(condition(&s.conditions, types::STALLED).is_none());
        assert_eq!(s.reconcile.inventory.unwrap().count, 3);
    }
}
