//! Shared fixtures of the custom-health, per-object policy and remote-cluster scenarios (issue 40
//! items 4–6): a renderer of whole JSON objects (annotations, custom kinds) and a ModuleInstance
//! over it on kube-emu.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crds::module_instance::{ModuleInstance, ModuleInstanceStatus};
use crds::platform::Platform;
use kube::Api;
use opm_operator::controller::context::{Context, Reconciled};
use opm_operator::controller::{instance, platform};
use opm_operator::kernel::{
    BuiltPlatform, InstanceRef, KernelError, ModuleRenderer, ModuleRequest, RenderResult,
    RenderedObject, SkewPolicy,
};
use serde_json::Value;

use super::common::*;

/// The namespace of every instance here.
pub const NS: &str = "team-a";
/// The instance uuid the renderer stamps.
pub const UUID: &str = "6f1c0e52-0000-4000-8000-0000000000aa";

/// Renders exactly its objects (in `NS` unless they name a namespace), with the OPM labels of
/// the requested instance; `{{msg}}` in a string value is replaced by `values.msg`.
#[derive(Default)]
pub struct ObjectsRenderer {
    pub objects: Mutex<Vec<Value>>,
}

impl ObjectsRenderer {
    pub fn set(&self, objects: Vec<Value>) {
        *self.objects.lock().unwrap() = objects;
    }
}

fn substitute(v: &mut Value, msg: &str) {
    match v {
        Value::String(s) if s.contains("{{msg}}") => *s = s.replace("{{msg}}", msg),
        Value::Object(m) => m.values_mut().for_each(|v| substitute(v, msg)),
        Value::Array(a) => a.iter_mut().for_each(|v| substitute(v, msg)),
        _ => {}
    }
}

impl ModuleRenderer for ObjectsRenderer {
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
            .and_then(Value::as_str)
            .unwrap_or("hello")
            .to_owned();
        let objects = self
            .objects
            .lock()
            .unwrap()
            .iter()
            .map(|o| {
                let mut object = o.clone();
                substitute(&mut object, &msg);
                let meta = object["metadata"].as_object_mut().unwrap();
                meta.entry("namespace")
                    .or_insert_with(|| Value::String(req.namespace.clone()));
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| serde_json::json!({}))
                    .as_object_mut()
                    .unwrap();
                for (k, v) in [
                    ("app.kubernetes.io/managed-by", "opm-controller"),
                    ("module-instance.opmodel.dev/name", req.name.as_str()),
                    (
                        "module-instance.opmodel.dev/namespace",
                        req.namespace.as_str(),
                    ),
                    ("module-instance.opmodel.dev/uuid", UUID),
                    ("component.opmodel.dev/name", "app"),
                ] {
                    labels.insert(k.to_owned(), Value::String(v.to_owned()));
                }
                RenderedObject {
                    object,
                    component: "app".to_owned(),
                    transformer: "x.test/t#any".to_owned(),
                }
            })
            .collect();
        Ok(RenderResult::new(
            InstanceRef {
                name: req.name.clone(),
                namespace: req.namespace.clone(),
                fqn: String::new(),
                uuid: UUID.to_owned(),
            },
            objects,
            Vec::new(),
            Vec::new(),
        )
        .unwrap())
    }
}

/// A cluster (kube-emu, workloads simulated at once) with namespace `NS`, a recorded platform,
/// a context rendering with an [`ObjectsRenderer`] (its client configuration the emulator's, so
/// ServiceAccounts can be impersonated), adjusted by `customise`.
pub struct Mi {
    pub env: Env,
    pub ctx: Arc<Context>,
    pub renderer: Arc<ObjectsRenderer>,
}

pub async fn mi_env(objects: Vec<Value>, customise: impl FnOnce(&mut Context)) -> Mi {
    let env = env().await;
    namespace(&env.client, NS).await;
    let renderer = Arc::new(ObjectsRenderer::default());
    renderer.set(objects);
    let ctx = context_for(&env, "objects-platform", |ctx| {
        ctx.renderer = Some(renderer.clone());
        ctx.kube_config = Some(env.emu.config().unwrap());
        ctx.health_poll = Duration::from_millis(100);
        customise(ctx);
    });
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    platform::reconcile("cluster", &ctx).await.unwrap();
    Mi { env, ctx, renderer }
}

impl Mi {
    pub fn instances(&self) -> Api<ModuleInstance> {
        Api::namespaced(self.env.client.clone(), NS)
    }

    /// Creates instance `name` (prune on), adjusted by `customise`.
    pub async fn create(&self, name: &str, customise: impl FnOnce(&mut ModuleInstance)) {
        let mut mi = ModuleInstance::test().named(NS, name).with_prune(true);
        customise(&mut mi);
        create(&self.instances(), mi).await;
    }

    /// One reconcile (a first one that only adds the finalizer runs again).
    pub async fn reconcile(&self, name: &str) -> Reconciled {
        let out = instance::reconcile(NS, name, &self.ctx).await.unwrap();
        if out.outcome.is_none() && out.requeue == Some(Duration::ZERO) {
            return instance::reconcile(NS, name, &self.ctx).await.unwrap();
        }
        out
    }

    pub async fn status(&self, name: &str) -> ModuleInstanceStatus {
        self.instances()
            .get(name)
            .await
            .unwrap()
            .status
            .unwrap_or_default()
    }

    /// `(status, reason, message)` of Ready.
    pub async fn ready(&self, name: &str) -> (String, String, String) {
        condition(
            &self.status(name).await.conditions,
            crds::conditions::types::READY,
        )
        .unwrap()
    }

    /// Reconciles until Ready's reason is `reason` (at most `secs`), returning the last
    /// reconcile.
    pub async fn until_reason(&self, name: &str, reason: &str, secs: u64) -> Reconciled {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let out = self.reconcile(name).await;
            if out.reason == Some(reason) {
                return out;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "Ready never became {reason}: {:?}",
                self.ready(name).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Deletes instance `name` and reconciles until it is gone (at most 20 reconciles).
    pub async fn delete(&self, name: &str) -> Vec<Reconciled> {
        self.instances()
            .delete(name, &Default::default())
            .await
            .unwrap();
        self.delete_pending(name).await
    }

    /// Reconciles the deleted instance `name` until it is gone (at most 20 reconciles).
    pub async fn delete_pending(&self, name: &str) -> Vec<Reconciled> {
        let mut outs = Vec::new();
        for _ in 0..20 {
            if self.instances().get_opt(name).await.unwrap().is_none() {
                return outs;
            }
            outs.push(instance::reconcile(NS, name, &self.ctx).await.unwrap());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        outs
    }

    /// The recorded inventory's `Kind/name`s.
    pub async fn inventory(&self, name: &str) -> Vec<String> {
        self.status(name)
            .await
            .reconcile
            .inventory
            .map(|i| {
                i.entries
                    .iter()
                    .map(|e| format!("{}/{}", e.kind, e.name))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sets `values.msg`.
    pub async fn set_msg(&self, name: &str, msg: &str) {
        patch_spec(
            &self.instances(),
            name,
            serde_json::json!({"values": {"msg": msg}}),
        )
        .await;
    }
}

/// The live object `kind/name` of `NS` as JSON (through `client`), if it exists.
pub async fn live(
    client: &kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
    name: &str,
) -> Option<Value> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    );
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    api.get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

pub const CONFIG_MAP: (&str, &str, &str, &str) = ("", "v1", "ConfigMap", "configmaps");
pub const SECRET: (&str, &str, &str, &str) = ("", "v1", "Secret", "secrets");
pub const DEPLOYMENT: (&str, &str, &str, &str) = ("apps", "v1", "Deployment", "deployments");

/// A ConfigMap `name` whose data is `{msg: {{msg}}}`, with `annotations`.
pub fn config_map(name: &str, annotations: Value) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": annotations},
        "data": {"msg": "{{msg}}"}})
}

/// A Deployment `name` selecting `app: <app>`, with `annotations`.
pub fn deployment(name: &str, app: &str, annotations: Value) -> Value {
    serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "app", "image": "nginx:{{msg}}"}]}}}})
}
