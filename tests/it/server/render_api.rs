//! The REST render API over real TLS, authenticated and authorised against `kube-emu`
//! (TokenReview + SubjectAccessReview with real RBAC objects), on a real leased platform store.
//!
//! The kernel is a scripted [`ModuleRenderer`]: these tests are about the HTTP contract (auth,
//! status codes, error shapes, lease and permit handling). The render kernel's own output is
//! tested in the kernel's tests; byte-identity with `opm-operator render` is a test of the wired
//! binary once the kernel lands (see the issue note).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::rbac::v1::Role;
use kube::api::PostParams;
use kube::Api;
use kube_emu::{Emulator, UserInfo};
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{
    BuiltPlatform, ErrorClass, InstanceRef, KernelError, ModuleRenderer, ModuleRequest, Problem,
    RenderResult, RenderedObject, SourcePos,
};
use opm_operator::platform::{Generated, PackageIdentity, Store};
use opm_operator::render_lease::RenderSlots;
use opm_operator::server::render_api::auth::{Cluster, RenderAuth};
use opm_operator::server::render_api::RenderBackend;
use opm_operator::server::Settings;
use serde_json::{json, Value};

use super::common::{
    published_fixture_modules, real_render_server, render_cluster, Options, Resp, TestServer,
};
use crate::controller::common::{bind, role};

/// A scripted kernel: a ConfigMap per request carrying the values; `values.fail` picks an error
/// class; `values.block` waits until the test releases it.
#[derive(Default)]
struct Scripted {
    calls: AtomicUsize,
    gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    started: Mutex<Option<std::sync::mpsc::Sender<PathLeased>>>,
}

/// What a blocked render saw when it started.
#[derive(Debug)]
struct PathLeased(std::path::PathBuf);

impl ModuleRenderer for Scripted {
    fn render_module(
        &self,
        req: &ModuleRequest,
        platform: &BuiltPlatform,
        _skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let values = req.values.clone().unwrap_or_else(|| json!({}));
        if values.get("block").is_some() {
            if let Some(tx) = self.started.lock().unwrap().take() {
                tx.send(PathLeased(platform.dir.clone())).unwrap();
            }
            if let Some(rx) = self.gate.lock().unwrap().take() {
                let _ = rx.recv_timeout(Duration::from_secs(20));
            }
        }
        if let Some(v) = values.get("echo") {
            // A values error quoting the value, as CUE quotes a conflicting one.
            return Err(KernelError {
                class: ErrorClass::Values,
                message: format!("values.echo: conflicting values {v} and int"),
                problems: vec![Problem {
                    path: "values.echo".into(),
                    message: format!("conflicting values {v} and int"),
                    positions: vec![],
                }],
            });
        }
        if let Some(class) = values.get("fail").and_then(Value::as_str) {
            let class = match class {
                "values" => ErrorClass::Values,
                "resolution" => ErrorClass::Resolution,
                "pull" => ErrorClass::TransientPull,
                "skew" => ErrorClass::SkewRefused,
                "timeout" => ErrorClass::Timeout,
                _ => ErrorClass::Other,
            };
            return Err(KernelError {
                class,
                message: format!("{}@{}: scripted failure", req.path, req.version),
                problems: vec![Problem {
                    path: "values.replicas".into(),
                    message: "invalid value 99 (out of bound <=10)".into(),
                    positions: vec![SourcePos {
                        file: "module.cue".into(),
                        line: 12,
                        column: 14,
                    }],
                }],
            });
        }
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": req.name, "namespace": req.namespace,
                         "labels": {"component.opmodel.dev/name": "config"}},
            "data": {"values": values.to_string(), "platform": platform.dir.display().to_string()}
        });
        Ok(RenderResult {
            instance: InstanceRef {
                name: req.name.clone(),
                namespace: req.namespace.clone(),
                fqn: format!("{}:{}", req.path, req.version),
                uuid: "00000000-0000-5000-8000-000000000001".into(),
            },
            objects: vec![RenderedObject {
                object: object.clone(),
                component: "config".into(),
                transformer: "fixtures.test/catalogs/mini@v0#configmap".into(),
            }],
            inventory: vec![opm_operator::inventory::entry_of(0, &object).unwrap()],
            warnings: vec![],
            required_contracts: vec!["fixtures.test/contracts/config@v0".into()],
            digest: "sha256:0".into(),
        })
    }
}

fn record(generation: i64) -> Generated<BuiltPlatform> {
    let identity = PackageIdentity::unclaimed(generation).unwrap();
    let dir = std::path::PathBuf::from(format!("/platforms/{identity}"));
    Generated {
        identity,
        dir: dir.clone(),
        platform: BuiltPlatform {
            dir,
            ..BuiltPlatform::default()
        },
        skew: SkewPolicy::Warn,
    }
}

struct Fixture {
    emu: Emulator,
    server: TestServer,
    store: Store<BuiltPlatform>,
    kernel: Arc<Scripted>,
}

async fn fixture(timeout: Duration, with_platform: bool) -> Fixture {
    fixture_with(timeout, with_platform, None).await
}

/// [`fixture`] whose backend renders in `slots` (the process's one set) when given.
async fn fixture_with(
    timeout: Duration,
    with_platform: bool,
    slots: Option<RenderSlots>,
) -> Fixture {
    let (emu, admin) = render_cluster(vec![
        (
            "alice-token",
            UserInfo {
                username: "alice".into(),
                groups: vec!["devs".into(), "system:authenticated".into()],
                uid: "u-alice".into(),
            },
        ),
        (
            "bob-token",
            UserInfo {
                username: "bob".into(),
                groups: vec!["system:authenticated".into()],
                uid: String::new(),
            },
        ),
    ])
    .await;
    bind_role(
        &admin,
        "opm-render",
        ("opmodel.dev", "moduleinstances/render", &["create"]),
        ("Group", "devs"),
    )
    .await;

    let store = Store::new();
    if with_platform {
        store.set_generated(record(1));
    }
    let kernel = Arc::new(Scripted::default());
    let mut settings = Settings::loopback();
    let (_, cluster) = tokio::sync::watch::channel(Some(Cluster {
        client: admin,
        config: emu.config().unwrap(),
    }));
    settings.render = Some(RenderBackend::new(
        store.clone(),
        kernel.clone(),
        RenderAuth::Kube,
        cluster,
        timeout,
        2,
    ));
    if let Some(slots) = slots {
        settings.render = settings.render.take().map(|b| b.sharing(slots));
    }
    let server = TestServer::start_with(Options {
        settings,
        ..Options::default()
    })
    .await;
    Fixture {
        emu,
        server,
        store,
        kernel,
    }
}

impl Fixture {
    async fn render(&self, ns: &str, token: Option<&str>, body: &Value) -> Resp {
        let mut b = http::Request::post(format!("/v1/namespaces/{ns}/render"))
            .header("host", "localhost")
            .header("content-type", "application/json");
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let req = b
            .body(http_body_util::Full::new(bytes::Bytes::from(
                serde_json::to_vec(body).unwrap(),
            )))
            .unwrap();
        self.server
            .client
            .request(self.server.running.webhook_addr, req)
            .await
            .unwrap()
    }
}

fn request(values: Value) -> Value {
    json!({
        "name": "demo",
        "module": {"path": "fixtures.test/modules/demo@v0", "version": "0.1.0"},
        "values": values
    })
}

fn assert_status_shape(r: &Resp, code: u16, reason: &str) {
    assert_eq!(r.status, code, "{}", r.text());
    let v = r.json();
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["status"], "Failure");
    assert_eq!(v["reason"], reason);
    assert_eq!(v["code"], code);
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[tokio::test]
async fn callers_without_a_valid_token_get_401_and_denied_callers_403() {
    let f = fixture(Duration::from_secs(5), true).await;
    let body = request(json!({}));
    let r = f.render("team-a", None, &body).await;
    assert_status_shape(&r, 401, "Unauthorized");
    assert_eq!(
        r.headers
            .get("www-authenticate")
            .and_then(|h| h.to_str().ok()),
        Some("Bearer")
    );
    let r = f.render("team-a", Some("forged"), &body).await;
    assert_status_shape(&r, 401, "Unauthorized");
    let r = f.render("team-a", Some("bob-token"), &body).await;
    assert_status_shape(&r, 403, "Forbidden");
    assert!(r.json()["message"].as_str().unwrap().contains("\"bob\""));
    // alice may render in team-a only.
    let r = f.render("team-b", Some("alice-token"), &body).await;
    assert_status_shape(&r, 403, "Forbidden");
    assert_eq!(f.kernel.calls.load(Ordering::SeqCst), 0, "nothing rendered");
}

#[tokio::test]
async fn an_allowed_render_returns_objects_provenance_and_inventory() {
    let f = fixture(Duration::from_secs(5), true).await;
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &request(json!({"replicas": 2})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["mode"], "render");
    assert_eq!(v["instance"]["name"], "demo");
    assert_eq!(v["instance"]["namespace"], "team-a");
    assert_eq!(v["objects"].as_array().unwrap().len(), 1);
    let obj = &v["objects"][0];
    assert_eq!(obj["component"], "config");
    assert_eq!(
        obj["transformer"],
        "fixtures.test/catalogs/mini@v0#configmap"
    );
    // Values reached the kernel as data; the platform was the recorded one.
    assert_eq!(obj["object"]["data"]["values"], r#"{"replicas":2}"#);
    assert!(obj["object"]["data"]["platform"]
        .as_str()
        .unwrap()
        .starts_with("/platforms/"));
    // Field order of the object is the kernel's.
    let keys: Vec<_> = obj["object"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata", "data"]);
    assert_eq!(
        v["inventory"],
        json!([{"kind": "ConfigMap", "namespace": "team-a", "name": "demo", "v": "v1", "component": "config"}])
    );
    assert_eq!(
        v["requiredContracts"],
        json!(["fixtures.test/contracts/config@v0"])
    );

    // The ModuleInstance-manifest form renders the same thing.
    let manifest = json!({"instance": {
        "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
        "metadata": {"name": "demo"},
        "spec": {"module": {"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"},
                 "values": {"replicas": 2}}
    }});
    let r2 = f.render("team-a", Some("alice-token"), &manifest).await;
    assert_eq!(r2.status, 200, "{}", r2.text());
    assert_eq!(r2.json()["objects"], v["objects"]);
}

#[tokio::test]
async fn no_platform_is_503_with_retry_after() {
    let f = fixture(Duration::from_secs(5), false).await;
    let r = f
        .render("team-a", Some("alice-token"), &request(json!({})))
        .await;
    assert_eq!(r.status, 503);
    assert_eq!(r.error_code(), "platform_not_ready");
    let retry: u64 = r
        .headers
        .get("retry-after")
        .and_then(|h| h.to_str().ok())
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    assert!(retry > 0);
    assert_eq!(f.kernel.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn kernel_errors_answer_by_class_with_problem_paths() {
    let f = fixture(Duration::from_secs(5), true).await;
    for (fail, status, code) in [
        ("values", 422, "invalid_values"),
        ("resolution", 404, "module_not_found"),
        ("pull", 502, "registry_unavailable"),
        ("skew", 409, "skew_refused"),
        ("timeout", 504, "render_timeout"),
        ("other", 422, "render_failed"),
    ] {
        let r = f
            .render(
                "team-a",
                Some("alice-token"),
                &request(json!({"fail": fail})),
            )
            .await;
        assert_eq!(r.status, status, "{fail}: {}", r.text());
        assert_eq!(r.error_code(), code);
        let v = r.json();
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("fixtures.test/modules/demo@v0@v0.1.0"),
            "the message names the coordinate: {v}"
        );
        assert_eq!(
            v["error"]["problems"],
            json!([{"path": "values.replicas", "message": "invalid value 99 (out of bound <=10)",
                    "positions": ["module.cue:12:14"]}])
        );
    }
}

#[tokio::test]
async fn bad_requests_are_400_or_413_and_render_nothing() {
    let f = fixture(Duration::from_secs(5), true).await;
    let r = f
        .render("team-a", Some("alice-token"), &json!({"name": "demo"}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), "invalid_request");
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &json!({"name": "demo", "modul": {"path": "a.b/c@v0", "version": "1.0.0"}}),
        )
        .await;
    assert_eq!(r.status, 400, "unknown member");
    let big = "x".repeat(4 * 1024 * 1024);
    let r = f
        .render("team-a", Some("alice-token"), &request(json!({"big": big})))
        .await;
    assert_eq!(r.status, 413);
    assert_eq!(r.error_code(), "payload_too_large");
    assert_eq!(f.kernel.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_render_holds_its_platform_lease_while_the_platform_is_regenerated() {
    let f = fixture(Duration::from_secs(10), true).await;
    let (release, gate) = std::sync::mpsc::channel();
    let (started_tx, started) = std::sync::mpsc::channel();
    *f.kernel.gate.lock().unwrap() = Some(gate);
    *f.kernel.started.lock().unwrap() = Some(started_tx);
    let old = f.store.identity().unwrap();

    let server = &f;
    let body = request(json!({"block": true}));
    let render = server.render("team-a", Some("alice-token"), &body);
    let observe = async {
        let seen = tokio::task::spawn_blocking(move || {
            started.recv_timeout(Duration::from_secs(10)).unwrap()
        })
        .await
        .unwrap();
        // The platform is regenerated while the render runs.
        f.store.set_generated(record(2));
        assert_ne!(f.store.identity().unwrap(), old);
        let leased: Vec<_> = f.store.leased().into_iter().map(|l| l.identity).collect();
        assert_eq!(leased, vec![old], "the running render pins the old package");
        release.send(()).unwrap();
        seen
    };
    let (r, seen) = tokio::join!(render, observe);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["objects"][0]["object"]["data"]["platform"],
        seen.0.display().to_string()
    );
    super::common::eventually("the lease is released", Duration::from_secs(5), || async {
        f.store.leased().is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_render_over_the_timeout_is_504() {
    let f = fixture(Duration::from_millis(300), true).await;
    let (release, gate) = std::sync::mpsc::channel::<()>();
    *f.kernel.gate.lock().unwrap() = Some(gate);
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &request(json!({"block": true})),
        )
        .await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(r.error_code(), "render_timeout");
    drop(release);
}

/// The render API renders in the process's one set of render slots (`RenderBackend::sharing`,
/// what `serve` wires): while a reconcile holds the only slot, a request waits for it and past
/// `--render-timeout` is 504 with the kernel never called; once the slot is free, a request
/// renders and gives the slot back.
#[tokio::test]
async fn the_render_api_waits_for_a_slot_the_reconcilers_share() {
    let slots = RenderSlots::new(1);
    let f = fixture_with(Duration::from_secs(2), true, Some(slots.clone())).await;
    let held = slots.try_acquire().expect("a free slot");
    let body = request(json!({}));
    let r = f.render("team-a", Some("alice-token"), &body).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(r.error_code(), "render_timeout");
    assert_eq!(f.kernel.calls.load(Ordering::SeqCst), 0);
    drop(held);
    let r = f.render("team-a", Some("alice-token"), &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(f.kernel.calls.load(Ordering::SeqCst), 1);
    super::common::eventually("the slot is given back", Duration::from_secs(5), || async {
        slots.available() == 1
    })
    .await;
}

#[tokio::test]
async fn a_server_without_a_render_backend_answers_503() {
    let server = TestServer::start().await;
    let r = server
        .post(
            "/v1/namespaces/team-a/render",
            serde_json::to_vec(&request(json!({}))).unwrap(),
        )
        .await;
    assert_eq!(r.status, 503);
    assert_eq!(r.error_code(), "render_unavailable");
}

/// Creates Role `name` in team-a with one rule (api group, resource, verbs) and binds it to
/// `subject` (kind, name).
async fn bind_role(
    admin: &kube::Client,
    name: &str,
    (group, resource, verbs): (&str, &str, &[&str]),
    (kind, subject): (&str, &str),
) {
    role(admin, "team-a", name, &[(group, resource)], verbs).await;
    let binding = format!("{name}-{}", subject.to_lowercase());
    bind(admin, "team-a", &binding, name, kind, subject).await;
}

/// Grants alice `verbs` on ConfigMaps in team-a.
async fn grant_configmaps(f: &Fixture, verbs: &[&str]) {
    let admin = f.emu.client().unwrap();
    bind_role(
        &admin,
        "configmaps",
        ("", "configmaps", verbs),
        ("User", "alice"),
    )
    .await;
}

fn mode(mode: &str, values: Value) -> Value {
    let mut r = request(values);
    r["mode"] = json!(mode);
    r
}

#[tokio::test]
async fn validate_dry_runs_as_the_caller_and_reports_what_they_may_not_create() {
    let f = fixture(Duration::from_secs(10), true).await;
    // alice may render in team-a but not create ConfigMaps there.
    let r = f
        .render("team-a", Some("alice-token"), &mode("validate", json!({})))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["mode"], "validate");
    let res = &v["results"][0];
    assert_eq!(
        res["object"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team-a", "name": "demo"})
    );
    assert_eq!(res["result"], "error", "{v}");
    assert_eq!(res["error"]["reason"], "forbidden", "{v}");
    assert!(
        res["error"]["message"].as_str().unwrap().contains("alice"),
        "{v}"
    );
    // Nothing was created by the dry-run.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(f.emu.client().unwrap(), "team-a");
    assert!(cms.get_opt("demo").await.unwrap().is_none());

    grant_configmaps(&f, &["get", "create", "patch"]).await;
    let r = f
        .render("team-a", Some("alice-token"), &mode("validate", json!({})))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["results"][0]["result"], "create", "{v}");
    assert!(v["results"][0].get("error").is_none());
    assert!(v.get("prune").is_none(), "validate lists no prune set");
    assert!(
        cms.get_opt("demo").await.unwrap().is_none(),
        "still a dry-run"
    );
}

#[tokio::test]
async fn diff_shows_unchanged_after_apply_then_the_patch_and_the_prune_set() {
    let f = fixture(Duration::from_secs(10), true).await;
    grant_configmaps(&f, &["get", "create", "patch"]).await;
    let admin = f.emu.client().unwrap();
    // Apply what the render produces, as a reconcile would (field manager opm-controller, the
    // instance labels stamped).
    let rendered = f
        .render(
            "team-a",
            Some("alice-token"),
            &request(json!({"replicas": 1})),
        )
        .await
        .json();
    let object = rendered["objects"][0]["object"].clone();
    let engine = opm_operator::apply::Engine::new(admin.clone(), Default::default());
    let stamped = opm_operator::apply::ApplyOptions {
        instance: Some(opm_operator::apply::object::InstanceLabels {
            name: "demo".into(),
            namespace: "team-a".into(),
            uuid: rendered["instance"]["uuid"].as_str().unwrap().into(),
        }),
        ..Default::default()
    };
    engine.apply_all_staged(&[object], &stamped).await.unwrap();
    // An instance whose inventory also holds an object the render no longer produces.
    let mis: Api<crds::ModuleInstance> = Api::namespaced(admin.clone(), "team-a");
    mis.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
            "metadata": {"name": "demo", "namespace": "team-a"},
            "spec": {"module": {"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"}}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    mis.patch_status(
        "demo",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {"inventory": {"revision": 1, "count": 2, "entries": [
            {"kind": "ConfigMap", "namespace": "team-a", "name": "demo", "v": "v1", "component": "config"},
            {"kind": "ConfigMap", "namespace": "team-a", "name": "old", "v": "v1", "component": "legacy"}
        ]}}})),
    )
    .await
    .unwrap();
    // alice may not read ModuleInstances: the prune set cannot be computed as her.
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &mode("diff", json!({"replicas": 1})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.error_code(), "forbidden");
    let role: Api<Role> = Api::namespaced(admin.clone(), "team-a");
    role.patch(
        "opm-render",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"rules": [
            {"apiGroups": ["opmodel.dev"], "resources": ["moduleinstances/render"], "verbs": ["create"]},
            {"apiGroups": ["opmodel.dev"], "resources": ["moduleinstances"], "verbs": ["get"]}
        ]})),
    )
    .await
    .unwrap();

    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &mode("diff", json!({"replicas": 1})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["results"][0]["result"], "unchanged", "{v}");
    assert!(v["results"][0].get("patch").is_none());
    assert_eq!(
        v["prune"],
        json!([{"kind": "ConfigMap", "namespace": "team-a", "name": "old", "v": "v1", "component": "legacy"}])
    );

    // A values change: the same object, updated, with the patch of what changes.
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &mode("diff", json!({"replicas": 3})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["results"][0]["result"], "update", "{v}");
    assert_eq!(
        v["results"][0]["patch"],
        json!([{"op": "replace", "path": "/data/values", "value": "{\"replicas\":3}"}]),
        "{v}"
    );
    // Still a preview: the live object is unchanged.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(admin, "team-a");
    let live = cms.get("demo").await.unwrap();
    assert_eq!(live.data.unwrap()["values"], r#"{"replicas":1}"#);
}

#[tokio::test]
async fn validate_and_diff_report_an_object_another_live_instance_owns() {
    let f = fixture(Duration::from_secs(10), true).await;
    grant_configmaps(&f, &["get", "create", "patch"]).await;
    let admin = f.emu.client().unwrap();
    let rendered = f
        .render("team-a", Some("alice-token"), &request(json!({})))
        .await
        .json();
    let object = rendered["objects"][0]["object"].clone();
    // Instance team-a/other (alive) applied the same ConfigMap `demo` under its own identity.
    let mis: Api<crds::ModuleInstance> = Api::namespaced(admin.clone(), "team-a");
    mis.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
            "metadata": {"name": "other", "namespace": "team-a"},
            "spec": {"module": {"path": "fixtures.test/modules/other@v0", "version": "v0.1.0"}}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let engine = opm_operator::apply::Engine::new(admin.clone(), Default::default());
    let other = opm_operator::apply::ApplyOptions {
        instance: Some(opm_operator::apply::object::InstanceLabels {
            name: "other".into(),
            namespace: "team-a".into(),
            uuid: "u-other".into(),
        }),
        ..Default::default()
    };
    engine.apply_all_staged(&[object], &other).await.unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(admin.clone(), "team-a");
    let before = cms.get("demo").await.unwrap().metadata.resource_version;
    // diff reads the named instance's inventory as alice.
    let role: Api<Role> = Api::namespaced(admin.clone(), "team-a");
    role.patch(
        "opm-render",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"rules": [
            {"apiGroups": ["opmodel.dev"], "resources": ["moduleinstances/render"], "verbs": ["create"]},
            {"apiGroups": ["opmodel.dev"], "resources": ["moduleinstances"], "verbs": ["get"]}
        ]})),
    )
    .await
    .unwrap();
    for m in ["validate", "diff"] {
        let r = f
            .render(
                "team-a",
                Some("alice-token"),
                &mode(m, json!({"replicas": 2})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let res = &v["results"][0];
        assert_eq!(res["result"], "error", "{m}: {v}");
        assert_eq!(res["error"]["reason"], "ownership_conflict", "{m}: {v}");
        let msg = res["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("ConfigMap/team-a/demo") && msg.contains("team-a/other"),
            "the object and its owner are named: {msg}"
        );
    }
    // Nothing was written, and once the owner is gone the object is adoptable again: the owner
    // lookup is the operator's (alice may not read ModulePackages, and need not).
    assert_eq!(
        cms.get("demo").await.unwrap().metadata.resource_version,
        before
    );
    mis.delete("other", &Default::default()).await.unwrap();
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &mode("validate", json!({"replicas": 2})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["results"][0]["result"], "update", "{}", r.text());
}

#[tokio::test]
async fn previews_without_a_cluster_connection_are_503() {
    let store = Store::new();
    store.set_generated(record(1));
    let (_tx, cluster) = tokio::sync::watch::channel(None);
    let mut settings = Settings::loopback();
    settings.render = Some(RenderBackend::new(
        store,
        Arc::new(Scripted::default()),
        RenderAuth::None,
        cluster,
        Duration::from_secs(5),
        1,
    ));
    let server = TestServer::start_with(Options {
        settings,
        ..Options::default()
    })
    .await;
    let post = |body: Value| {
        let server = &server;
        async move {
            server
                .post(
                    "/v1/namespaces/team-a/render",
                    serde_json::to_vec(&body).unwrap(),
                )
                .await
        }
    };
    // Auth off (dev): a plain render works with no cluster at all.
    let r = post(request(json!({}))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(mode("diff", json!({}))).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.error_code(), "cluster_unavailable");
}

/// The wired pipeline: the real render kernel behind the API, the fixture modules in an OCI
/// layout, the generated platform fixture in the store. The API's objects are byte-identical to
/// `opm-operator render -o json` for the same module, values, name and namespace.
#[tokio::test]
async fn the_api_renders_the_same_bytes_as_the_cli() {
    use crate::registry::harness::cli_ok;

    let (layout, opm) = published_fixture_modules();
    let layout_dir = layout.path().to_str().unwrap().to_string();
    let platform_dir = opm.join("platform/generated");
    let values_file = opm.join("values/valid.json");
    let cli_json = cli_ok(&[
        "render",
        "fixtures.test/modules/demo@v0.1.0",
        "--layout",
        &layout_dir,
        "--platform",
        platform_dir.to_str().unwrap(),
        "-f",
        values_file.to_str().unwrap(),
        "--name",
        "shop",
        "--namespace",
        "team-a",
        "--runtime-name",
        "opm-controller",
        "-o",
        "json",
    ]);
    let cli: Value = serde_json::from_str(&cli_json).unwrap();

    let (server, _cluster_tx) = real_render_server(
        layout.path(),
        &platform_dir,
        (RenderAuth::None, None),
        Duration::from_secs(120),
        1,
    )
    .await;
    let values: Value =
        serde_json::from_str(&std::fs::read_to_string(&values_file).unwrap()).unwrap();
    let body = json!({
        "name": "shop",
        "module": {"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"},
        "values": values
    });
    let r = server
        .post(
            "/v1/namespaces/team-a/render",
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let api = r.json();
    assert_eq!(api["objects"].as_array().map(Vec::len), Some(3), "{api}");
    assert_eq!(
        serde_json::to_string(&api["objects"]).unwrap(),
        serde_json::to_string(&cli["objects"]).unwrap(),
        "byte-identical objects (field order included)"
    );
    assert_eq!(api["inventory"], cli["inventory"]);
    assert_eq!(api["digest"], cli["digest"]);
}

/// Issue 40: `valuesFrom` is read as the caller; a caller who may not get the Secret gets a 403
/// naming it, never its content; the values read never appear in an error answer or a diff.
#[tokio::test]
async fn values_from_is_read_as_the_caller_and_no_secret_value_leaves_in_errors_or_diffs() {
    const CANARY: &str = "canary-render-5c1d0e77";
    // Every log line of this test process at trace level, behind the writer `serve` uses.
    let logs = Captured::default();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(opm_operator::values_from::Redacting(logs.clone()))
        .with_ansi(false)
        .init();
    let f = fixture(Duration::from_secs(10), true).await;
    let admin = f.emu.client().unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(admin.clone(), "team-a");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "creds"},
                "stringData": {"values.yaml": format!("password: {CANARY}\n"), "raw": CANARY}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let with = |sources: Value| {
        let mut r = request(json!({"replicas": 1}));
        r["valuesFrom"] = sources;
        r
    };
    let creds = json!([{"kind": "Secret", "name": "creds"}]);
    // alice may render but not get Secrets: 403 naming the object.
    let r = f
        .render("team-a", Some("alice-token"), &with(creds.clone()))
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.error_code(), "forbidden");
    assert!(
        r.text().contains("Secret team-a/creds") && r.text().contains("alice"),
        "{}",
        r.text()
    );
    assert_eq!(f.kernel.calls.load(Ordering::SeqCst), 0, "nothing rendered");
    bind_role(
        &admin,
        "secrets",
        ("", "secrets", &["get"]),
        ("User", "alice"),
    )
    .await;
    let r = f
        .render("team-a", Some("alice-token"), &with(creds.clone()))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let values = r.json()["objects"][0]["object"]["data"]["values"].clone();
    assert_eq!(
        serde_json::from_str::<Value>(values.as_str().unwrap()).unwrap(),
        json!({"password": CANARY, "replicas": 1}),
        "merged under values"
    );
    // A values error quoting the Secret's value: redacted in the message and the problems.
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &with(json!([{"kind": "Secret", "name": "creds", "valuesKey": "raw", "targetPath": "echo"}])),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(
        r.text().contains("[redacted]") && !r.text().contains(CANARY),
        "{}",
        r.text()
    );
    // Missing and refused sources.
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &with(json!([{"kind": "Secret", "name": "nope"}])),
        )
        .await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (422, "values_from_not_found"),
        "{}",
        r.text()
    );
    let r = f
        .render(
            "team-a",
            Some("alice-token"),
            &with(json!([{"kind": "Secret", "name": "creds", "namespace": "other"}])),
        )
        .await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (422, "values_from_invalid"),
        "{}",
        r.text()
    );
    // diff against a live object rendered without the Secret: the patch names the change, not
    // the value.
    grant_configmaps(&f, &["get", "create", "patch"]).await;
    bind_role(
        &admin,
        "instances",
        ("opmodel.dev", "moduleinstances", &["get"]),
        ("User", "alice"),
    )
    .await;
    let rendered = f
        .render(
            "team-a",
            Some("alice-token"),
            &request(json!({"replicas": 1})),
        )
        .await
        .json();
    let engine = opm_operator::apply::Engine::new(admin.clone(), Default::default());
    engine
        .apply_all_staged(
            &[rendered["objects"][0]["object"].clone()],
            &Default::default(),
        )
        .await
        .unwrap();
    let mut body = with(creds);
    body["mode"] = json!("diff");
    let r = f.render("team-a", Some("alice-token"), &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["results"][0]["result"], "update", "{v}");
    let patch = v["results"][0]["patch"].to_string();
    assert!(
        patch.contains("/data/values") && patch.contains("[redacted]"),
        "{patch}"
    );
    assert!(!patch.contains(CANARY), "{patch}");
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(logged.contains("render"), "captured");
    assert!(!logged.contains(CANARY), "logs: {logged}");
}

/// Captured log lines.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
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
