//! ModuleInstance scenarios 27–31, 33–46, 64 and 66 (docs/design/operator.md §8; §2.2, §2.4, §2.5, §6) on
//! the REAL kernel: the fixture module `demo` (`fixtures/opm/demo`, the value sets of
//! `fixtures/opm/values`) pulled from the real `docker-registry` and rendered by
//! `opm_operator::render::Renderer` on the platform the real `PlatformKernel` generated and
//! recorded for Platform `cluster` subscribing mini (harness: `real.rs`), reconciled against
//! kube-emu. Instance `prod/shop` renders exactly `fixtures/opm/expected/demo-valid.json`: two
//! ConfigMaps of component `conf` (`settings`, and `shop-hosts-<content hash>`, immutable) and
//! Deployment `shop-web` of component `web`.
//!
//! What the fake-renderer tests (`instance.rs`, `instance_scenarios.rs`) assert only as far as the
//! reconciler carries it is asserted here end to end: the applied objects equal the expected
//! render, the last-applied digests are the digests of that render, a values error names
//! `values.<path>` and the `file:line` of the schema constraint, a resolution error names the
//! module coordinate, an invalid instance stalls RenderFailed naming the field, a component
//! removed by a new module version and an object renamed by a values edit (the content-hash
//! ConfigMap) are pruned under the §6.3 guards, and a renamed component moves its objects in
//! place (not stale). Module versions a scenario needs are built in the test from the fixture
//! files (`real::variant`): v0.2.0 adds a component `cache`, v0.3.0 renames `conf` to `config`,
//! v0.4.0 makes the instance invalid, v0.5.0 is v0.1.0's bytes published under another version,
//! v0.6.0 and v0.7.0 add a component `extra` (resource `objects` of the test catalog `kinds`)
//! asking for a Namespace, a CRD and Widget `shop-extra` at `x.test/v1beta1` (v0.6.0) or
//! `x.test/v1` (v0.7.0).
//!
//! The catalog `kinds` is gateway's files published under a new path with one resource and one
//! transformer emitting the objects a component asks for; with the CRD `widgets.x.test` (served
//! at v1beta1 and v1) installed in kube-emu it carries scenario 38's API-version move (not stale)
//! and scenario 37's protected kinds (a stale Namespace and CRD are never pruned) on the real
//! kernel. Scenario 32 (skew) runs on the real kernel in `instance_scenarios.rs`; the scripted
//! scenario 38 there stays as the reconciler-level check.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use crds::conditions::types;
use crds::k8s_openapi::api::apps::v1::Deployment;
use crds::k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use crds::k8s_openapi::api::rbac::v1::RoleBinding;
use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use crds::module_instance::{ModuleInstance, ModuleInstanceStatus};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::Api;
use kube_emu::fault::{FaultKind, FaultRule};
use opm_operator::controller::context::{Context, Reconciled};
use opm_operator::controller::instance;
use opm_operator::controller::outcome::Outcome;
use opm_operator::inventory;
use serde_json::{json, Value};

use super::common::*;
use super::real::*;
use crate::apply::prune::relabel;
use crate::platform::gen::{opm, renamed};

const NS: &str = SHOP_NS;
const NAME: &str = SHOP;
/// The module path without its major, as the kernel names a coordinate (`<path>@<version>`).
const DEMO_AT: &str = "fixtures.test/modules/demo@";
const SA_RESOURCES: &[(&str, &str)] = &[("", "configmaps"), ("apps", "deployments")];
const ALL_VERBS: &[&str] = &["get", "list", "create", "patch", "update", "delete"];

// ---------------------------------------------------------------------------------------------
// Fixtures and helpers.

fn values(file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(opm("values").join(file)).unwrap()).unwrap()
}

/// `valid.json` with `edit` merged in at the top level.
fn valid_with(edit: Value) -> Value {
    let mut v = values("valid.json");
    for (k, x) in edit.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// `demo` v0.1.0 with its `metadata.version` set to `version` (without the `v`).
fn demo_at(version: &str, edits: &[(&str, &str)], extra: &[(&str, &str)]) -> Files {
    let stamp = format!("version:     \"{version}\"");
    let mut all = vec![("version:     \"0.1.0\"", stamp.as_str())];
    all.extend_from_slice(edits);
    variant("demo", &all, extra)
}

/// Publishes the demo variants of `versions` (for the scenarios that switch module versions):
/// v0.2.0 adds component `cache` (ConfigMap `cache-settings`), v0.3.0 renames component `conf`
/// to `config`, v0.4.0 labels `web` twice (an invalid instance), v0.5.0 is v0.1.0's bytes
/// (declaring 0.1.0: an identity mismatch).
async fn publish_variants(r: &Real, versions: &[&'static str]) {
    const CACHE: &str = "package demo\n\nimport res \"fixtures.test/catalogs/mini/resources\"\n\n\
        #components: cache: res.#Configs & {\n\tspec: configs: \"cache-settings\": {\n\t\t\
        exact: true\n\t\tdata: size: \"64Mi\"\n\t}\n}\n";
    const BROKEN: &str = "package demo\n\n#components: web: metadata: labels: tier: \"backend\"\n";
    let extra = |widget: &str| {
        format!(
            "package demo\n\nimport k \"fixtures.test/catalogs/kinds/resources\"\n\n\
             #components: extra: k.#Objects & {{spec: objects: {{\n\t\
             namespace: \"{EXTRA_NS}\"\n\tcrd: true\n\twidget: \"{widget}\"\n}}}}\n"
        )
    };
    // The kinds catalog as a dependency of the variants that import it.
    let kinds_dep = (
        "deps: {\n",
        "deps: {\n\t\"fixtures.test/catalogs/kinds@v0\": {\n\t\tv: \"v0.1.0\"\n\t}\n",
    );
    let (v6, v7) = (extra("v1beta1"), extra("v1"));
    for version in versions {
        let files = match *version {
            "v0.2.0" => demo_at("0.2.0", &[], &[("cache.cue", CACHE)]),
            "v0.3.0" => demo_at(
                "0.3.0",
                &[("\tconf: res.#Configs & {", "\tconfig: res.#Configs & {")],
                &[],
            ),
            "v0.4.0" => demo_at("0.4.0", &[], &[("broken.cue", BROKEN)]),
            "v0.5.0" => variant("demo", &[], &[]),
            "v0.6.0" => demo_at("0.6.0", &[kinds_dep], &[("extra.cue", v6.as_str())]),
            "v0.7.0" => demo_at("0.7.0", &[kinds_dep], &[("extra.cue", v7.as_str())]),
            other => panic!("no demo variant {other}"),
        };
        publish_files(r, files, version).await;
    }
}

/// The test catalog: gateway's files under a new path, resource `objects`, transformer
/// `kinds-transformer`.
const KINDS: &str = "fixtures.test/catalogs/kinds@v0";
/// The Namespace the `extra` component asks for; its Widget is `shop-extra`.
const EXTRA_NS: &str = "shop-extra-ns";
const EXTRA: &str = "shop-extra";
/// The CRD the `extra` component asks for.
const GADGETS: &str = "gadgets.kinds.fixtures.test";

/// The catalog's one contract: resource `objects`, the kinds a component asks for.
const KINDS_RESOURCE: &str = r#"package resources

import c "fixtures.test/core@v0"

#ObjectsResource: c.#Resource & {
	metadata: {
		name:           "objects"
		modulePath:     "fixtures.test/catalogs/kinds/resources"
		apiVersion:     "v1"
		catalogVersion: "0.1.0"
		fqn:            "fixtures.test/catalogs/kinds/resources/objects@v1"
		description:    "Objects of kinds the fixture catalogs do not render"
	}
	spec: objects: {
		namespace?: string
		crd?:       bool
		widget?:    string
	}
}

#Objects: c.#Component & {
	#resources: (#ObjectsResource.metadata.fqn): #ObjectsResource
}
"#;

/// The catalog's one transformer: Namespace `objects.namespace`, CRD
/// `gadgets.kinds.fixtures.test` when `objects.crd`, Widget `<instance>-<component>` at
/// `x.test/<objects.widget>` (its `spec.renderedAt`); each only when asked for.
const KINDS_TRANSFORMER: &str = r#"package transformers

import (
	c "fixtures.test/core@v0"
	res "fixtures.test/catalogs/kinds/resources"
)

#KindsTransformer: c.#ComponentTransformer & {
	metadata: {
		name:           "kinds-transformer"
		modulePath:     "fixtures.test/catalogs/kinds/transformers"
		catalogVersion: "0.1.0"
		fqn:            "fixtures.test/catalogs/kinds/transformers/kinds-transformer@0.1.0"
		description:    "The objects a component asks for"
	}
	requiredResources: (res.#ObjectsResource.metadata.fqn): res.#ObjectsResource

	#transform: {
		#component: _
		#context:   _
		output: [
			if #component.spec.objects.namespace != _|_ {
				apiVersion: "v1"
				kind:       "Namespace"
				metadata: {
					name:   #component.spec.objects.namespace
					labels: #context.labels
				}
			},
			if #component.spec.objects.crd != _|_ {
				apiVersion: "apiextensions.k8s.io/v1"
				kind:       "CustomResourceDefinition"
				metadata: {
					name:   "gadgets.kinds.fixtures.test"
					labels: #context.labels
				}
				spec: {
					group: "kinds.fixtures.test"
					scope: "Namespaced"
					names: {plural: "gadgets", singular: "gadget", kind: "Gadget", listKind: "GadgetList"}
					versions: [{
						name:    "v1"
						served:  true
						storage: true
						schema: openAPIV3Schema: {type: "object", "x-kubernetes-preserve-unknown-fields": true}
					}]
				}
			},
			if #component.spec.objects.widget != _|_ {
				apiVersion: "x.test/\(#component.spec.objects.widget)"
				kind:       "Widget"
				metadata: {
					name:      "\(#context.name)-\(#context.componentName)"
					namespace: #context.namespace
					labels:    #context.labels
				}
				// The version it was rendered at: a move is a change, so it is written there.
				spec: renderedAt: apiVersion
			},
		]
	}
}
"#;

/// Installs the Widget CRD (served at v1beta1 and v1), publishes the catalog `kinds` and records
/// Platform `cluster` subscribing mini and kinds.
async fn record_with_kinds(r: &Real) {
    install_widget_crd(&r.client).await;
    let files = variant(
        "gateway",
        &[
            (
                "t \"fixtures.test/catalogs/gateway/transformers\"",
                "t \"fixtures.test/catalogs/gateway/transformers\"\n\t\
                 r \"fixtures.test/catalogs/gateway/resources\"",
            ),
            (
                "(t.#RouteTransformer.metadata.fqn): t.#RouteTransformer\n}",
                "(t.#KindsTransformer.metadata.fqn): t.#KindsTransformer\n}\n\n\
                 #resources: {\n\t(r.#ObjectsResource.metadata.fqn): r.#ObjectsResource\n}",
            ),
        ],
        &[
            ("resources/objects.cue", KINDS_RESOURCE),
            ("transformers/kinds.cue", KINDS_TRANSFORMER),
        ],
    );
    publish_files(r, renamed(files, "gateway", "kinds"), "v0.1.0").await;
    record(r, &[(MINI, None), (KINDS, None)]).await;
}

fn instances(r: &Real) -> Api<ModuleInstance> {
    Api::namespaced(r.client.clone(), NS)
}

/// The demo instance `prod/shop` at `version` with `values`.
fn shop_instance(version: &str, values: Value, prune: bool) -> ModuleInstance {
    ModuleInstance::test()
        .named(NS, NAME)
        .with_module(DEMO, version)
        .with_values(values)
        .with_prune(prune)
}

/// The real harness (`customise` edits the context) with namespace `prod` and instance `prod/shop` (demo v0.1.0, `valid.json`, `prune`); the platform is
/// recorded when `platform`.
async fn shop_with(prune: bool, platform: bool, customise: impl FnOnce(&mut Context)) -> Real {
    let r = rendering(customise).await;
    namespace(&r.client, NS).await;
    if platform {
        record(&r, &[(MINI, None)]).await;
    }
    create(
        &instances(&r),
        shop_instance("v0.1.0", values("valid.json"), prune),
    )
    .await;
    r
}

async fn shop(prune: bool) -> Real {
    shop_with(prune, true, |_| {}).await
}

async fn reconcile(r: &Real) -> Reconciled {
    instance::reconcile(NS, NAME, &r.ctx).await.unwrap()
}

async fn get(r: &Real) -> ModuleInstance {
    instances(r).get(NAME).await.unwrap()
}

async fn status(r: &Real) -> ModuleInstanceStatus {
    get(r).await.status.unwrap()
}

async fn cond(r: &Real, type_: &str) -> Option<(String, String, String)> {
    condition(&status(r).await.conditions, type_)
}

/// Reconciles once and checks the stall: `reason` with the 30-minute recheck, Stalled=True and
/// Ready=False with that reason and one message, which is returned.
async fn reconcile_stalled(r: &Real, reason: &str) -> String {
    let out = reconcile(r).await;
    assert_stalled(&out, &status(r).await.conditions, reason)
}

/// Finalizer first, then the first successful apply.
async fn ready(r: &Real) -> ModuleInstanceStatus {
    assert_eq!(reconcile(r).await.requeue, Some(Duration::ZERO));
    let out = reconcile(r).await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    status(r).await
}

/// Replaces `spec.values` (a merge patch would merge into the old values).
async fn set_values(r: &Real, v: Value) {
    instances(r)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::<Value>::Json(
                serde_json::from_value(
                    json!([{"op": "replace", "path": "/spec/values", "value": v}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
}

/// Sets `spec.rollout.forceConflicts` (recreate objects whose update is refused).
async fn force_conflicts(r: &Real) {
    patch_spec(
        &instances(r),
        NAME,
        json!({"rollout": {"forceConflicts": true}}),
    )
    .await;
}

async fn set_version(r: &Real, version: &str) {
    patch_spec(
        &instances(r),
        NAME,
        json!({"module": {"path": DEMO, "version": version}}),
    )
    .await;
}

/// Takes `data.<key>` of ConfigMap `settings` as field manager `someone-else`.
async fn hand_edit_settings(r: &Real, key: &str, value: &str) {
    config_maps(r)
        .patch(
            "settings",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": NS},
                "data": {key: value},
            })),
        )
        .await
        .unwrap();
}

/// The names of the hosts ConfigMaps in the inventory.
fn hosts_in(s: &ModuleInstanceStatus) -> Vec<String> {
    s.reconcile
        .inventory
        .as_ref()
        .unwrap()
        .entries
        .iter()
        .filter(|e| e.name.starts_with("shop-hosts-"))
        .map(|e| e.name.clone())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_27_28_29_46_the_demo_render_is_applied_then_a_no_op_keeps_the_record() {
    let r = shop(true).await;
    // 27: the finalizer first, nothing rendered.
    let out = reconcile(&r).await;
    assert_eq!(out.requeue, Some(Duration::ZERO));
    assert_eq!(
        get(&r).await.metadata.finalizers,
        Some(vec!["opmodel.dev/cleanup".to_owned()])
    );
    assert_eq!(r.renderer.renders(), 0);
    assert!(live_cm(&r, "settings").await.is_none());

    // 28: the expected render applied by `opm-controller` with the OPM labels.
    let out = reconcile(&r).await;
    assert_eq!(
        (out.outcome, out.requeue, out.reason),
        (
            Some(Outcome::Applied),
            None,
            Some("ReconciliationSucceeded")
        )
    );
    let mi = get(&r).await;
    let s = mi.status.clone().unwrap();
    assert_shop_applied(&r, &s.reconcile).await;
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "True".into(),
            "ReconciliationSucceeded".into(),
            "Reconciliation succeeded".into()
        )
    );
    assert!(condition(&s.conditions, types::RECONCILING).is_none());
    assert!(condition(&s.conditions, types::STALLED).is_none());
    assert_eq!(
        condition(&s.conditions, types::MODULE_RESOLVED).unwrap(),
        (
            "True".into(),
            "ModuleResolved".into(),
            format!("module resolved: {DEMO_AT}v0.1.0")
        )
    );
    assert_eq!(s.observed_generation, mi.metadata.generation);
    assert_eq!(s.instance_uuid.as_deref(), Some(UUID));
    // 46: the render's required contracts.
    let contracts: Vec<String> =
        serde_json::from_value(expected()["required_contracts"].clone()).unwrap();
    assert_eq!(s.required_contracts, contracts);
    let inv = s.reconcile.inventory.clone().unwrap();
    assert_eq!(inv.revision, 1);
    let rec = &s.reconcile;
    assert_eq!(
        rec.last_applied_source_digest,
        Some(inventory::source_digest(DEMO, "v0.1.0"))
    );
    assert_eq!(
        rec.last_applied_config_digest,
        Some(inventory::config_digest(Some(
            &serde_json::to_vec(&values("valid.json")).unwrap()
        )))
    );
    assert!(rec.last_applied_at.is_some());
    assert_eq!(rec.history.len(), 1);
    let h = &rec.history[0];
    assert_eq!((h.sequence, h.phase.as_str()), (1, "complete"));
    assert_eq!(h.inventory_count, 3);
    assert_eq!(
        Some(&h.render_digest),
        rec.last_applied_render_digest.as_ref()
    );
    assert_eq!(h.inventory_digest, inv.digest);
    assert!(rec.next_retry_at.is_none());
    assert_eq!(
        one_event(&events(&r.client, NAME, "Applied").await),
        (
            "Normal".into(),
            "Apply".into(),
            "Applied 3 resources (3 created, 0 updated, 0 unchanged)".into()
        )
    );
    assert_eq!(
        events(&r.client, NAME, "ReconciliationSucceeded")
            .await
            .len(),
        1
    );

    // 29: an unchanged second reconcile renders, finds the four digests equal and applies nothing.
    let renders = r.renderer.renders();
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::NoOp));
    assert_eq!(out.requeue, None);
    assert_eq!(r.renderer.renders(), renders + 1, "a no-op still renders");
    let again = status(&r).await;
    assert_eq!(again.reconcile.history, rec.history);
    assert_eq!(again.reconcile.last_attempted_at, rec.last_attempted_at);
    assert_eq!(again.reconcile.inventory, rec.inventory);
    assert!(again.reconcile.next_retry_at.is_none());
    assert_eq!(
        one_event(&events(&r.client, NAME, "NoOp").await),
        (
            "Normal".into(),
            "Reconcile".into(),
            "No changes detected".into()
        )
    );
    assert_eq!(events(&r.client, NAME, "Applied").await.len(), 1);

    // 46: a no-op render still writes the render's contracts over a stale list (an older
    // operator's), without touching the attempt fields.
    patch_status(
        &instances(&r),
        NAME,
        json!({"requiredContracts": ["fixtures.test/contracts/gone@v1"]}),
    )
    .await;
    assert_eq!(reconcile(&r).await.outcome, Some(Outcome::NoOp));
    let again = status(&r).await;
    assert_eq!(again.required_contracts, contracts);
    assert_eq!(again.reconcile.last_attempted_at, rec.last_attempted_at);

    // 28: a values edit updates the changed objects and leaves the rest unchanged.
    set_values(&r, valid_with(json!({"replicas": 2, "logLevel": "debug"}))).await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::Applied), "{out:?}");
    assert_eq!(replicas(&r).await, Some(2));
    assert_eq!(
        live_cm(&r, "settings").await.unwrap().data.unwrap()["log-level"],
        "debug"
    );
    let s = status(&r).await;
    assert_eq!(s.reconcile.inventory.unwrap().revision, 2);
    assert_eq!(s.reconcile.history.len(), 2);
    assert_eq!(s.reconcile.history[0].sequence, 2);
    assert!(events(&r.client, NAME, "Applied")
        .await
        .iter()
        .any(|e| e.note.as_deref()
            == Some("Applied 3 resources (0 created, 2 updated, 1 unchanged)")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_30_26_64_platform_not_ready_until_the_real_platform_is_recorded() {
    let r = shop_with(false, false, |_| {}).await;
    assert_eq!(reconcile(&r).await.requeue, Some(Duration::ZERO));
    // 30: no platform → Ready=False PlatformNotReady (not Stalled), backoff 5 s, a Warning; the
    // renderer is never asked (the lease fails before any registry I/O).
    let out = reconcile(&r).await;
    assert_eq!(
        (out.reason, out.requeue, out.outcome),
        (
            Some("PlatformNotReady"),
            Some(Duration::from_secs(5)),
            Some(Outcome::FailedTransient)
        )
    );
    let message = "no platform is recorded: waiting for Platform cluster";
    assert_eq!(
        cond(&r, types::READY).await.unwrap(),
        ("False".into(), "PlatformNotReady".into(), message.into())
    );
    assert!(cond(&r, types::STALLED).await.is_none());
    assert_eq!(r.renderer.renders(), 0);
    assert!(live_cm(&r, "settings").await.is_none());
    assert_eq!(
        one_event(&events(&r.client, NAME, "PlatformNotReady").await),
        ("Warning".into(), "Render".into(), message.into())
    );
    // 64: the same failure again backs off further and emits no second Warning.
    let out = reconcile(&r).await;
    assert_eq!(out.requeue, Some(Duration::from_secs(10)));
    assert_eq!(events(&r.client, NAME, "PlatformNotReady").await.len(), 1);

    // The real platform is recorded → rendered and applied, counters reset.
    record(&r, &[(MINI, None)]).await;
    let out = reconcile(&r).await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    let s = status(&r).await;
    assert_eq!(s.reconcile.failure_counters.unwrap().reconcile, 0);
    assert!(s.reconcile.next_retry_at.is_none());
    assert!(live_cm(&r, "settings").await.is_some());

    // 26: the Platform deleted clears the store; the instance then reports PlatformNotReady and
    // its objects are left alone.
    platforms(&r.client)
        .delete("cluster", &DeleteParams::default())
        .await
        .unwrap();
    opm_operator::controller::platform::reconcile("cluster", &r.ctx)
        .await
        .unwrap();
    assert!(r.ctx.store.generated().is_none());
    set_values(&r, valid_with(json!({"replicas": 4}))).await;
    let out = reconcile(&r).await;
    assert_eq!(out.reason, Some("PlatformNotReady"));
    assert_eq!(replicas(&r).await, Some(3));
    assert_eq!(status(&r).await.reconcile.inventory.unwrap().revision, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_33_40_46_64_kernel_errors_stall_with_the_kernel_s_own_words() {
    let r = shop(true).await;
    publish_variants(&r, &["v0.4.0", "v0.5.0"]).await;
    let before = ready(&r).await;

    // 33: a values error → Stalled ResolutionFailed naming `values.replicas` and the schema's
    // bound at module.cue:33 (`int & >=1 & <=10`), 30 min.
    set_values(&r, values("out-of-bounds.json")).await;
    let message = reconcile_stalled(&r, "ResolutionFailed").await;
    assert!(
        message.starts_with(&format!("{DEMO_AT}v0.1.0: invalid values\n")),
        "{message}"
    );
    assert!(
        message.contains("values.replicas: invalid value 11 (out of bound <=10) (module.cue:33:"),
        "{message}"
    );
    let s = status(&r).await;
    // Nothing changed on the cluster; the inventory, lastApplied* and requiredContracts (46)
    // are kept; a failure history entry carries the message.
    assert_eq!(s.reconcile.inventory, before.reconcile.inventory);
    assert_eq!(
        s.reconcile.last_applied_config_digest,
        before.reconcile.last_applied_config_digest
    );
    assert_eq!(s.required_contracts, before.required_contracts);
    assert_eq!(s.reconcile.history.len(), 2);
    assert_eq!(s.reconcile.history[0].phase, "failed");
    assert_eq!(s.reconcile.history[0].message, message);
    assert_eq!(replicas(&r).await, Some(3));
    // 40: nextRetryAt ≈ now + 30 min; the reconcile counter counts.
    let retry = s.reconcile.next_retry_at.clone().unwrap().0;
    let ahead = retry.as_second() - crds::k8s_openapi::jiff::Timestamp::now().as_second();
    assert!((1700..=1800).contains(&ahead), "{ahead}");
    assert_eq!(s.reconcile.failure_counters.clone().unwrap().reconcile, 1);
    assert_eq!(
        one_event(&events(&r.client, NAME, "ResolutionFailed").await),
        ("Warning".into(), "Render".into(), message.clone())
    );
    // 64: the same failure again: no second Warning.
    reconcile(&r).await;
    assert_eq!(events(&r.client, NAME, "ResolutionFailed").await.len(), 1);
    // A changed message emits again: an unknown key, then a required field left out.
    for (file, part) in [
        ("unknown-key.json", "values.colour: field not allowed"),
        ("incomplete.json", "values.logLevel"),
    ] {
        set_values(&r, values(file)).await;
        assert_eq!(reconcile(&r).await.reason, Some("ResolutionFailed"));
        let (_, _, message) = cond(&r, types::STALLED).await.unwrap();
        assert!(message.contains(part), "{file}: {message}");
    }
    assert_eq!(events(&r.client, NAME, "ResolutionFailed").await.len(), 3);

    // 33: resolution errors name the coordinate: a version never published, and v0.1.0's bytes
    // published as v0.5.0 (an identity mismatch).
    set_values(&r, values("valid.json")).await;
    set_version(&r, "v0.9.9").await;
    assert_eq!(reconcile(&r).await.reason, Some("ResolutionFailed"));
    let (_, _, message) = cond(&r, types::STALLED).await.unwrap();
    assert!(
        message.starts_with(&format!("pulling {DEMO_AT}v0.9.9: ")) && message.contains("not found"),
        "{message}"
    );
    set_version(&r, "v0.5.0").await;
    assert_eq!(reconcile(&r).await.reason, Some("ResolutionFailed"));
    let (_, _, message) = cond(&r, types::STALLED).await.unwrap();
    assert_eq!(
        message,
        format!(
            "{DEMO_AT}v0.5.0: identity mismatch: metadata.version is \"0.1.0\", fetched as \
             \"0.5.0\""
        )
    );
    // Any other evaluation error → Stalled RenderFailed naming the field and its position.
    set_version(&r, "v0.4.0").await;
    let message = reconcile_stalled(&r, "RenderFailed").await;
    assert!(
        message.starts_with(&format!("{DEMO_AT}v0.4.0: the instance is not valid\n"))
            && message.contains(
                "components.web.metadata.labels.tier: conflicting values \"backend\" and \
                 \"frontend\""
            ),
        "{message}"
    );
    let (ty, action, _) = one_event(&events(&r.client, NAME, "RenderFailed").await);
    assert_eq!((ty.as_str(), action.as_str()), ("Warning", "Render"));
    let s = status(&r).await;
    assert_eq!(s.reconcile.failure_counters.clone().unwrap().reconcile, 7);
    assert_eq!(s.reconcile.inventory, before.reconcile.inventory);
    assert_eq!(s.required_contracts, before.required_contracts);

    // 40: the next success resets the counters, clears nextRetryAt and Stalled (v0.1.0 with
    // the original values: the last-applied digests again, so a no-op).
    set_version(&r, "v0.1.0").await;
    let out = reconcile(&r).await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    let s = status(&r).await;
    assert!(s.reconcile.next_retry_at.is_none());
    assert_eq!(s.reconcile.failure_counters.unwrap().reconcile, 0);
    assert!(condition(&s.conditions, types::STALLED).is_none());
    assert_eq!(condition(&s.conditions, types::READY).unwrap().0, "True");
}

/// Scenarios 31 and 66 through the running controllers: two instances waiting on
/// PlatformNotReady (backoff 5 s) are rendered as soon as the real platform is recorded; a
/// status-only update renders nothing, a spec change renders and applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_31_66_the_recorded_platform_wakes_every_instance_and_status_updates_do_not() {
    let r = shop_with(false, false, |_| {}).await;
    namespace(&r.client, "staging").await;
    let staging: Api<ModuleInstance> = Api::namespaced(r.client.clone(), "staging");
    create(
        &staging,
        shop_instance("v0.1.0", values("valid.json"), false).named("staging", NAME),
    )
    .await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(opm_operator::controller::manager::run_controllers(
        Arc::clone(&r.ctx),
        stop_rx,
    ));
    let reason_of = |api: Api<ModuleInstance>, want: &'static str| async move {
        api.get(NAME)
            .await
            .unwrap()
            .status
            .and_then(|s| condition(&s.conditions, types::READY))
            .is_some_and(|c| c.1 == want)
    };
    let waiting = eventually(10, || async {
        reason_of(instances(&r), "PlatformNotReady").await
            && reason_of(staging.clone(), "PlatformNotReady").await
    })
    .await;
    create(&platforms(&r.client), plat(&[(MINI, None)])).await;
    // The recorded package wakes both well before their backoff would.
    let woken = eventually(4, || async {
        reason_of(instances(&r), "ReconciliationSucceeded").await
            && reason_of(staging.clone(), "ReconciliationSucceeded").await
    })
    .await;
    let staging_web: Api<Deployment> = Api::namespaced(r.client.clone(), "staging");
    let applied_both = deployments(&r).get_opt("shop-web").await.unwrap().is_some()
        && staging_web.get_opt("shop-web").await.unwrap().is_some();
    // Let the start-up wakes settle, then a status-only update: nothing renders.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let renders = r.renderer.renders();
    patch_status(
        &instances(&r),
        NAME,
        json!({"lastAttemptedAction": "by-hand"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_status = r.renderer.renders();
    // A spec change renders and applies.
    set_values(&r, valid_with(json!({"replicas": 4}))).await;
    let updated = eventually(10, || async { replicas(&r).await == Some(4) }).await;
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    assert!(waiting, "the instances did not wait on PlatformNotReady");
    assert!(woken, "the recorded Platform did not wake both instances");
    assert!(applied_both);
    assert_eq!(after_status, renders, "a status-only update rendered again");
    assert!(updated, "a spec change was not reconciled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_34_37_an_owner_cli_instance_is_left_to_the_cli_then_adopted() {
    let r = shop(true).await;
    // The CLI applied the instance earlier: its status lists an object this render no longer
    // produces, live with the CLI's labels and the instance's uuid.
    create(
        &config_maps(&r),
        serde_json::from_value(json!({
            "metadata": {"name": "cli-leftover", "namespace": NS, "labels": {
                "app.kubernetes.io/managed-by": "opm-cli",
                "module-instance.opmodel.dev/uuid": UUID,
                "component.opmodel.dev/name": "old",
            }},
            "data": {"from": "cli"},
        }))
        .unwrap(),
    )
    .await;
    patch_spec(&instances(&r), NAME, json!({"owner": "cli"})).await;
    let cli_status = json!({
        "instanceUUID": UUID,
        "inventory": {"revision": 4, "digest": "sha256:cli", "count": 1, "entries": [
            {"kind": "ConfigMap", "namespace": NS, "name": "cli-leftover", "v": "v1", "component": "old"}
        ]},
        "lastAttemptedAction": "apply",
    });
    patch_status(&instances(&r), NAME, cli_status).await;
    let cli_written = status(&r).await;

    // 34: hands off: no finalizer, no render, Ready=Unknown ManagedExternally, no
    // observedGeneration, the CLI's status untouched.
    let out = reconcile(&r).await;
    assert_eq!((out.reason, out.requeue), (Some("ManagedExternally"), None));
    let mi = get(&r).await;
    assert!(mi.metadata.finalizers.unwrap_or_default().is_empty());
    assert_eq!(r.renderer.renders(), 0);
    assert!(live_cm(&r, "settings").await.is_none());
    let s = mi.status.unwrap();
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "Unknown".into(),
            "ManagedExternally".into(),
            "ModuleInstance is managed externally by the CLI".into()
        )
    );
    assert_eq!(s.observed_generation, None);
    assert_eq!(s.reconcile, cli_written.reconcile);
    assert_eq!(s.instance_uuid, cli_written.instance_uuid);
    // A repeat writes nothing and emits nothing.
    let rv = get(&r).await.metadata.resource_version;
    reconcile(&r).await;
    assert_eq!(get(&r).await.metadata.resource_version, rv);
    assert_eq!(
        one_event(&events(&r.client, NAME, "ManagedExternally").await),
        (
            "Normal".into(),
            "Reconcile".into(),
            "ModuleInstance is managed externally by the CLI".into()
        )
    );
    // Owner `future-actor` is refused by the API server.
    assert!(instances(&r)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"owner": "future-actor"}})),
        )
        .await
        .is_err());

    // Flipped to `operator`: the finalizer, then adoption. The real render is applied; the
    // CLI's leftover (managed-by `opm-cli`, matching uuid) is stale and pruned (37); the
    // inventory revision continues the CLI's.
    patch_spec(&instances(&r), NAME, json!({"owner": "operator"})).await;
    assert_eq!(reconcile(&r).await.requeue, Some(Duration::ZERO));
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::AppliedAndPruned), "{out:?}");
    assert!(live_cm(&r, "cli-leftover").await.is_none());
    let s = status(&r).await;
    let inv = s.reconcile.inventory.unwrap();
    assert_eq!((inv.revision, inv.count), (5, 3));
    assert!(condition(&s.conditions, types::READY).is_some_and(|c| c.0 == "True"));
    assert_eq!(
        one_event(&events(&r.client, NAME, "Pruned").await).2,
        "Pruned 1 stale resources"
    );

    // 34: a CLI-owned instance's deletion prunes nothing: it carries no finalizer, so it is
    // gone at once and the reconcile finds nothing; its objects stay.
    let tool = shop_instance("v0.1.0", values("valid.json"), true);
    let mut tool = tool.named(NS, "tool");
    tool.spec.owner = Some(crds::module_instance::Owner::Cli);
    create(&instances(&r), tool).await;
    assert_eq!(
        instance::reconcile(NS, "tool", &r.ctx)
            .await
            .unwrap()
            .reason,
        Some("ManagedExternally")
    );
    instances(&r)
        .delete("tool", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        instance::reconcile(NS, "tool", &r.ctx).await.unwrap(),
        Reconciled::done()
    );
    assert!(instances(&r).get_opt("tool").await.unwrap().is_none());
    assert!(live_cm(&r, "settings").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_35_46_suspend_preserves_the_record_and_resume_renders_the_new_spec() {
    let r = shop(true).await;
    let before = ready(&r).await;
    let renders = r.renderer.renders();
    patch_spec(&instances(&r), NAME, json!({"suspend": true})).await;
    set_values(&r, valid_with(json!({"replicas": 5}))).await;
    for _ in 0..2 {
        let out = reconcile(&r).await;
        assert_eq!((out.reason, out.requeue), (Some("Suspended"), None));
    }
    assert_eq!(
        r.renderer.renders(),
        renders,
        "nothing rendered while suspended"
    );
    let mi = get(&r).await;
    let s = mi.status.unwrap();
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "False".into(),
            "Suspended".into(),
            "Reconciliation is suspended".into()
        )
    );
    assert_eq!(s.observed_generation, mi.metadata.generation);
    assert_eq!(s.reconcile.inventory, before.reconcile.inventory);
    assert_eq!(s.reconcile.history, before.reconcile.history);
    assert_eq!(
        s.reconcile.last_applied_render_digest,
        before.reconcile.last_applied_render_digest
    );
    // 46: suspended keeps the required contracts.
    assert_eq!(s.required_contracts, before.required_contracts);
    assert_eq!(replicas(&r).await, Some(3), "nothing applied");
    assert_eq!(
        one_event(&events(&r.client, NAME, "Suspended").await),
        (
            "Normal".into(),
            "Suspend".into(),
            "Reconciliation is suspended".into()
        )
    );
    // Resumed: one Resumed event and a full reconcile of the edited spec.
    patch_spec(&instances(&r), NAME, json!({"suspend": false})).await;
    let out = reconcile(&r).await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    let (ty, action, _) = one_event(&events(&r.client, NAME, "Resumed").await);
    assert_eq!((ty.as_str(), action.as_str()), ("Normal", "Resume"));
    assert_eq!(replicas(&r).await, Some(5));
    assert_eq!(status(&r).await.reconcile.inventory.unwrap().revision, 2);
}

/// A change of values makes the live objects differ from the new render; that is the change
/// being applied, not drift: no `DriftDetected` Warning (Drifted, set by the check, is cleared
/// by the apply).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_values_change_is_not_reported_as_drift() {
    let r = shop(true).await;
    ready(&r).await;
    set_values(&r, valid_with(json!({"logLevel": "debug"}))).await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::Applied), "{out:?}");
    assert!(condition(&status(&r).await.conditions, types::DRIFTED).is_none());
    let evs = events(&r.client, NAME, "DriftDetected").await;
    assert!(evs.is_empty(), "{evs:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_36_a_hand_edit_is_drift_a_failed_dry_run_is_counted_and_an_apply_clears_it() {
    let r = shop(true).await;
    ready(&r).await;
    hand_edit_settings(&r, "greeting", "hi").await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::NoOp));
    let s = status(&r).await;
    let drifted = (
        "True".to_owned(),
        "DriftDetected".to_owned(),
        "1 resource(s) drifted from desired state".to_owned(),
    );
    assert_eq!(condition(&s.conditions, types::DRIFTED).unwrap(), drifted);
    assert!(condition(&s.conditions, types::READY).is_some_and(|c| c.0 == "True"));
    assert_eq!(s.reconcile.failure_counters.unwrap().drift, 0);
    // Issue 30 item 4: drift is a Warning event, once while it stays the same.
    let drift_events = || async { events(&r.client, NAME, "DriftDetected").await };
    let evs = drift_events().await;
    assert_eq!(evs.len(), 1, "{evs:#?}");
    assert_eq!(evs[0].type_.as_deref(), Some("Warning"));
    assert_eq!(evs[0].note.as_deref(), Some(drifted.2.as_str()));
    assert_eq!(
        live_cm(&r, "settings").await.unwrap().data.unwrap()["greeting"],
        "hi",
        "detection only, no correction"
    );

    // A dry-run that fails counts a drift failure, leaves Drifted as it was, and the no-op
    // goes on.
    let fired = r.emu.faults_fired();
    r.emu.inject_fault(
        FaultRule::any(1, FaultKind::Internal)
            .dry_run(true)
            .path_contains("/configmaps/settings"),
    );
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::NoOp));
    assert_eq!(r.emu.faults_fired(), fired + 1);
    let s = status(&r).await;
    assert_eq!(s.reconcile.failure_counters.unwrap().drift, 1);
    assert_eq!(condition(&s.conditions, types::DRIFTED).unwrap(), drifted);
    assert_eq!(
        drift_events().await.len(),
        1,
        "no second Warning for the same drift"
    );

    // The next apply takes `data.greeting` back from the editor (ownership is always forced),
    // restores the field and clears Drifted.
    set_values(&r, valid_with(json!({"logLevel": "debug"}))).await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::Applied), "{out:?}");
    let s = status(&r).await;
    assert!(condition(&s.conditions, types::DRIFTED).is_none());
    assert_eq!(s.reconcile.failure_counters.unwrap().drift, 0);
    let data = live_cm(&r, "settings").await.unwrap().data.unwrap();
    assert_eq!(
        (data["greeting"].as_str(), data["log-level"].as_str()),
        ("hello", "debug")
    );
    // Each successful apply is a Normal event saying what changed: the first created the three
    // objects, this one configured some and created and pruned nothing.
    let notes: Vec<String> = events(&r.client, NAME, "ReconciliationSucceeded")
        .await
        .into_iter()
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes.contains(
            &"Reconciliation succeeded: 3 created, 0 configured, 0 unchanged, 0 pruned".to_owned()
        ),
        "{notes:#?}"
    );
    let last = notes.last().unwrap();
    let counts: Vec<u32> = last
        .trim_start_matches("Reconciliation succeeded: ")
        .split(", ")
        .map(|p| p.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 4, "{last}");
    assert_eq!((counts[0], counts[3]), (0, 0), "{last}");
    assert!(counts[1] >= 1 && counts[1] + counts[2] == 3, "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_37_a_removed_component_and_a_renamed_object_are_pruned_under_the_guards() {
    let r = shop(true).await;
    publish_variants(&r, &["v0.2.0"]).await;
    set_version(&r, "v0.2.0").await;
    ready(&r).await;
    assert!(live_cm(&r, "cache-settings").await.is_some());
    assert_eq!(status(&r).await.reconcile.inventory.unwrap().count, 4);

    // Back to v0.1.0 (no `cache` component) with one host fewer (the hosts ConfigMap's content
    // hash, so its name, changes): both are stale. `cache-settings` now carries a foreign
    // managed-by → skipped; the old hosts ConfigMap lost its uuid label (legacy) → deleted.
    relabel(
        &r.client,
        NS,
        "cache-settings",
        json!({"app.kubernetes.io/managed-by": "helm"}),
    )
    .await;
    relabel(
        &r.client,
        NS,
        HOSTS,
        json!({"module-instance.opmodel.dev/uuid": null}),
    )
    .await;
    set_version(&r, "v0.1.0").await;
    set_values(&r, valid_with(json!({"hosts": ["a.example"]}))).await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::AppliedAndPruned), "{out:?}");
    assert!(live_cm(&r, HOSTS).await.is_none(), "legacy object pruned");
    assert!(
        live_cm(&r, "cache-settings").await.is_some(),
        "foreign object kept"
    );
    let s = status(&r).await;
    let hosts = hosts_in(&s);
    assert_eq!(hosts.len(), 1);
    assert_ne!(hosts[0], HOSTS);
    let new_hosts = live_cm(&r, &hosts[0]).await.unwrap();
    assert_eq!(new_hosts.data.unwrap()["hosts"], "a.example");
    assert_eq!(
        new_hosts.metadata.labels.unwrap()["module-instance.opmodel.dev/uuid"],
        UUID
    );
    let inv = s.reconcile.inventory.unwrap();
    assert_eq!((inv.revision, inv.count), (2, 3));
    assert!(inv.entries.iter().all(|e| e.name != "cache-settings"));
    let pruned = events(&r.client, NAME, "Pruned").await;
    assert_eq!(
        one_event(&pruned),
        (
            "Normal".into(),
            "Prune".into(),
            "Pruned 1 stale resources".into()
        )
    );

    // Another host list: the previous hosts ConfigMap now carries another instance's uuid →
    // skipped; nothing deleted, so no Pruned event and the outcome is a plain apply.
    relabel(
        &r.client,
        NS,
        &hosts[0],
        json!({"module-instance.opmodel.dev/uuid": "00000000-0000-4000-8000-000000000000"}),
    )
    .await;
    set_values(&r, valid_with(json!({"hosts": ["c.example"]}))).await;
    let out = reconcile(&r).await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    assert!(
        live_cm(&r, &hosts[0]).await.is_some(),
        "other instance's object kept"
    );
    assert_eq!(events(&r.client, NAME, "Pruned").await.len(), 1);
    let s = status(&r).await;
    assert_eq!(hosts_in(&s).len(), 1);
    assert!(!hosts_in(&s).contains(&hosts[0]));
}

/// Scenario 38 and docs/design/principles.md rule 2 (A→B→A) on real module versions: renaming component `conf`
/// to `config` (v0.3.0) moves both ConfigMaps to the new component in place; a component
/// removed (v0.2.0 → v0.1.0) is pruned and comes back when restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_38_a_renamed_component_moves_its_objects_in_place_and_a_b_a_restores() {
    let r = shop(true).await;
    publish_variants(&r, &["v0.2.0", "v0.3.0"]).await;
    ready(&r).await;
    let uid = |cm: Option<ConfigMap>| cm.unwrap().metadata.uid;
    let settings_uid = uid(live_cm(&r, "settings").await);
    let hosts_uid = uid(live_cm(&r, HOSTS).await);

    set_version(&r, "v0.3.0").await;
    let out = reconcile(&r).await;
    assert_eq!(
        out.outcome,
        Some(Outcome::Applied),
        "nothing pruned: {out:?}"
    );
    assert!(events(&r.client, NAME, "Pruned").await.is_empty());
    for (name, before) in [("settings", &settings_uid), (HOSTS, &hosts_uid)] {
        let cm = live_cm(&r, name).await.unwrap();
        assert_eq!(&cm.metadata.uid, before, "{name} patched in place");
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels["component.opmodel.dev/name"], "config");
        assert_eq!(labels["app.kubernetes.io/name"], "config");
    }
    let inv = status(&r).await.reconcile.inventory.unwrap();
    assert_eq!((inv.revision, inv.count), (2, 3));
    for e in &inv.entries {
        let want = if e.kind == "ConfigMap" {
            "config"
        } else {
            "web"
        };
        assert_eq!(e.component.as_deref(), Some(want), "{}", e.name);
    }

    // A → B → A: v0.2.0 adds `cache`, v0.3.0 drops it (pruned), v0.2.0 brings it back.
    for (version, cache, outcome) in [
        ("v0.2.0", true, Outcome::Applied),
        ("v0.3.0", false, Outcome::AppliedAndPruned),
        ("v0.2.0", true, Outcome::Applied),
    ] {
        set_version(&r, version).await;
        let out = reconcile(&r).await;
        assert_eq!(out.outcome, Some(outcome), "{version}: {out:?}");
        assert_eq!(
            live_cm(&r, "cache-settings").await.is_some(),
            cache,
            "{version}"
        );
        let inv = status(&r).await.reconcile.inventory.unwrap();
        assert_eq!(
            inv.entries.iter().any(|e| e.name == "cache-settings"),
            cache,
            "{version}"
        );
    }
    assert_eq!(status(&r).await.reconcile.inventory.unwrap().revision, 5);
}

/// Scenarios 38 (API version) and 37 (protected kinds) on the catalog `kinds`: the widget
/// rendered at `x.test/v1` instead of `x.test/v1beta1` is applied in place, then the component
/// `extra` removed prunes its widget but never its Namespace nor its CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_38_37_a_new_api_version_is_not_stale_and_namespaces_and_crds_are_never_pruned() {
    let r = shop_with(true, false, |_| {}).await;
    record_with_kinds(&r).await;
    publish_variants(&r, &["v0.6.0", "v0.7.0"]).await;
    set_version(&r, "v0.6.0").await;
    let s = ready(&r).await;
    let inv = s.reconcile.inventory.unwrap();
    assert_eq!(inv.count, 6, "{:?}", inv.entries);
    let widget_entry = |inv: &crds::common::Inventory| {
        inv.entries.iter().find(|e| e.kind == "Widget").map(|e| {
            (
                e.group.clone(),
                e.namespace.clone(),
                e.name.clone(),
                e.v.clone(),
            )
        })
    };
    let at = |v: &str| {
        Some((
            Some("x.test".to_owned()),
            Some(NS.to_owned()),
            EXTRA.to_owned(),
            Some(v.to_owned()),
        ))
    };
    assert_eq!(widget_entry(&inv), at("v1beta1"));
    let w = widgets(&r.client, NS, "v1beta1").get(EXTRA).await.unwrap();
    assert_eq!(w.data["spec"]["renderedAt"], "x.test/v1beta1");
    let uid = w.metadata.uid;
    let namespaces: Api<Namespace> = Api::all(r.client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(r.client.clone());
    for labels in [
        namespaces.get(EXTRA_NS).await.unwrap().metadata.labels,
        crds.get(GADGETS).await.unwrap().metadata.labels,
    ] {
        let labels = labels.unwrap();
        assert_eq!(labels["module-instance.opmodel.dev/uuid"], UUID);
        assert_eq!(labels["component.opmodel.dev/name"], "extra");
    }

    // 38: v0.7.0 renders the widget at x.test/v1 (same group, kind, namespace, name): applied at
    // the new version in place, nothing pruned, the inventory entry at v1.
    set_version(&r, "v0.7.0").await;
    let out = reconcile(&r).await;
    assert_eq!(
        out.outcome,
        Some(Outcome::Applied),
        "nothing pruned: {out:?}"
    );
    assert!(events(&r.client, NAME, "Pruned").await.is_empty());
    let w = widgets(&r.client, NS, "v1").get(EXTRA).await.unwrap();
    assert_eq!(w.metadata.uid, uid, "the widget was not recreated");
    assert_eq!(w.data["spec"]["renderedAt"], "x.test/v1");
    let applied_at: Vec<(Option<String>, Option<String>)> = w
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        // Entries owning fields (a released create claim may leave one owning nothing).
        .filter(|f| {
            f.fields_v1
                .as_ref()
                .is_some_and(|v| v.0.as_object().is_some_and(|o| !o.is_empty()))
        })
        .map(|f| (f.manager, f.api_version))
        .collect();
    assert_eq!(
        applied_at,
        [(Some("opm-controller".into()), Some("x.test/v1".into()))]
    );
    let s = status(&r).await;
    let inv = s.reconcile.inventory.unwrap();
    assert_eq!((inv.revision, inv.count), (2, 6));
    assert_eq!(widget_entry(&inv), at("v1"));
    assert_eq!(condition(&s.conditions, types::READY).unwrap().0, "True");

    // 37: back to v0.1.0 (no `extra`): the widget, the Namespace and the CRD are stale; only the
    // widget is deleted, the Namespace and the CRD stay (§6.3 rule 1) and leave the inventory.
    set_version(&r, "v0.1.0").await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::AppliedAndPruned), "{out:?}");
    assert!(widgets(&r.client, NS, "v1")
        .get_opt(EXTRA)
        .await
        .unwrap()
        .is_none());
    // Kept, not terminating (a deleted Namespace lingers with its finalizer).
    let ns = namespaces.get(EXTRA_NS).await.unwrap();
    assert!(ns.metadata.deletion_timestamp.is_none(), "{ns:?}");
    let crd = crds.get(GADGETS).await.unwrap();
    assert!(crd.metadata.deletion_timestamp.is_none(), "{crd:?}");
    assert_eq!(
        one_event(&events(&r.client, NAME, "Pruned").await).2,
        "Pruned 1 stale resources"
    );
    let s = status(&r).await;
    assert_shop_applied(&r, &s.reconcile).await;
    assert_eq!(s.reconcile.inventory.unwrap().revision, 3);
    assert_eq!(condition(&s.conditions, types::READY).unwrap().0, "True");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_39_an_apply_error_keeps_the_record_prunes_nothing_and_backs_off() {
    let r = shop(true).await;
    let before = ready(&r).await;
    // Another manager makes `settings` immutable; the instance then changes its data (and
    // drops a host, so the old hosts ConfigMap would be stale): the update is refused for an
    // immutable field and, without rollout.forceConflicts, the apply fails.
    config_maps(&r)
        .patch(
            "settings",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": NS},
                "immutable": true,
            })),
        )
        .await
        .unwrap();
    set_values(
        &r,
        valid_with(json!({"logLevel": "warn", "hosts": ["a.example"]})),
    )
    .await;
    let out = reconcile(&r).await;
    assert_eq!(
        (out.reason, out.requeue, out.outcome),
        (
            Some("ApplyFailed"),
            Some(Duration::from_secs(5)),
            Some(Outcome::FailedTransient)
        )
    );
    let s = status(&r).await;
    let (st, reason, message) = condition(&s.conditions, types::READY).unwrap();
    assert_eq!((st.as_str(), reason.as_str()), ("False", "ApplyFailed"));
    assert!(message.contains("ConfigMap/prod/settings"), "{message}");
    assert!(
        message.contains("immutable") && message.contains("rollout.forceConflicts"),
        "{message}"
    );
    assert!(condition(&s.conditions, types::STALLED).is_none());
    let counters = s.reconcile.failure_counters.clone().unwrap();
    assert_eq!((counters.apply, counters.reconcile), (1, 1));
    assert_eq!(s.reconcile.inventory, before.reconcile.inventory);
    assert_eq!(
        s.reconcile.last_applied_config_digest,
        before.reconcile.last_applied_config_digest
    );
    assert_eq!(s.reconcile.history[0].phase, "failed");
    assert!(
        live_cm(&r, HOSTS).await.is_some(),
        "no prune after a failed apply"
    );
    let (ty, action, note) = one_event(&events(&r.client, NAME, "ApplyFailed").await);
    assert_eq!(
        (ty.as_str(), action.as_str(), note.as_str()),
        ("Warning", "Apply", message.as_str())
    );
    // The backoff doubles with the reconcile counter (5 s · 2^n) up to the 5-minute cap; the
    // same failure emits no new event. Counters 3 and 4 are skipped by setting the counter, as
    // two more failures would have.
    for (counter, secs) in [(1, 10), (2, 20)] {
        let out = reconcile(&r).await;
        assert_eq!(
            out.requeue,
            Some(Duration::from_secs(secs)),
            "counter {counter}"
        );
    }
    patch_status(
        &instances(&r),
        NAME,
        json!({"failureCounters": {"reconcile": 5, "apply": 5, "prune": 0, "drift": 0}}),
    )
    .await;
    for (counter, secs) in [(5, 160), (6, 300), (7, 300)] {
        let out = reconcile(&r).await;
        assert_eq!(
            out.requeue,
            Some(Duration::from_secs(secs)),
            "counter {counter}"
        );
    }
    let counters = status(&r).await.reconcile.failure_counters.unwrap();
    assert_eq!((counters.apply, counters.reconcile), (8, 8));
    assert_eq!(events(&r.client, NAME, "ApplyFailed").await.len(), 1);
    // With rollout.forceConflicts the ConfigMap is recreated (new uid, not immutable any more),
    // the apply succeeds, prunes the old hosts ConfigMap and resets the counters.
    let old_uid = live_cm(&r, "settings").await.unwrap().metadata.uid;
    force_conflicts(&r).await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::AppliedAndPruned), "{out:?}");
    assert!(live_cm(&r, HOSTS).await.is_none());
    let s = status(&r).await;
    let counters = s.reconcile.failure_counters.unwrap();
    assert_eq!((counters.apply, counters.reconcile), (0, 0));
    let settings = live_cm(&r, "settings").await.unwrap();
    assert_ne!(settings.metadata.uid, old_uid);
    assert_eq!(settings.immutable, None);
    assert_eq!(settings.data.unwrap()["log-level"], "warn");
}

/// Binds Role `role` to the user of ServiceAccount `prod/deploy-sa` (RoleBinding `binding`).
async fn bind_deploy_sa(r: &Real, binding: &str, role: &str) {
    let user = "system:serviceaccount:prod:deploy-sa";
    bind(&r.client, NS, binding, role, "User", user).await;
}

async fn unbind(r: &Real, binding: &str) {
    Api::<RoleBinding>::namespaced(r.client.clone(), NS)
        .delete(binding, &DeleteParams::default())
        .await
        .unwrap();
}

/// Scenarios 41–43 with the `--default-service-account` flag set to `opm-deployer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_41_42_43_apply_and_prune_impersonate_the_service_account_in_effect() {
    let r = shop_with(true, true, |c| {
        c.default_service_account = Some("opm-deployer".into());
    })
    .await;
    namespace(&r.client, "opm-system").await;
    service_account(&r.client, "opm-system", "opm-deployer").await;
    assert_eq!(reconcile(&r).await.requeue, Some(Duration::ZERO));

    // 42: the flag's SA exists only in the controller's namespace, not in the instance's →
    // Stalled ImpersonationFailed naming prod/opm-deployer; nothing applied.
    let message = reconcile_stalled(&r, "ImpersonationFailed").await;
    assert!(message.contains("prod/opm-deployer"), "{message}");
    assert!(live_cm(&r, "settings").await.is_none());
    let (ty, _, _) = one_event(&events(&r.client, NAME, "ImpersonationFailed").await);
    assert_eq!(ty, "Warning");

    // 43: present in `prod` but without RBAC: the apply is refused (403) → Stalled
    // ImpersonationFailed, a Warning ApplyFailed, nothing applied, no inventory.
    service_account(&r.client, NS, "opm-deployer").await;
    role(&r.client, NS, "deploy", SA_RESOURCES, ALL_VERBS).await;
    let message = reconcile_stalled(&r, "ImpersonationFailed").await;
    let s = status(&r).await;
    assert!(message.to_lowercase().contains("forbidden"), "{message}");
    assert!(s.reconcile.inventory.is_none());
    assert_eq!(events(&r.client, NAME, "ApplyFailed").await.len(), 1);
    assert!(live_cm(&r, "settings").await.is_none());

    // 41: a RoleBinding to the group `system:serviceaccounts:prod` authorises the impersonated
    // identity (so the groups were sent): applied.
    bind(
        &r.client,
        NS,
        "sa-group",
        "deploy",
        "Group",
        "system:serviceaccounts:prod",
    )
    .await;
    let out = reconcile(&r).await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    assert!(cond(&r, types::STALLED).await.is_none());
    assert_eq!(replicas(&r).await, Some(3));

    // 42: the spec's SA wins over the flag's: `deploy-sa` is missing → stalled naming it, though
    // `opm-deployer` would be authorised.
    patch_spec(
        &instances(&r),
        NAME,
        json!({"serviceAccountName": "deploy-sa"}),
    )
    .await;
    set_values(&r, valid_with(json!({"replicas": 2}))).await;
    assert_eq!(reconcile(&r).await.reason, Some("ImpersonationFailed"));
    let (_, _, message) = cond(&r, types::STALLED).await.unwrap();
    assert!(message.contains("prod/deploy-sa"), "{message}");
    assert_eq!(replicas(&r).await, Some(3), "nothing applied");

    // 41: the apply and the prune run as `system:serviceaccount:prod:deploy-sa`: with only a
    // binding to that user, a host dropped prunes the old hosts ConfigMap.
    service_account(&r.client, NS, "deploy-sa").await;
    unbind(&r, "sa-group").await;
    bind_deploy_sa(&r, "sa-user", "deploy").await;
    set_values(
        &r,
        valid_with(json!({"replicas": 2, "hosts": ["a.example"]})),
    )
    .await;
    let out = reconcile(&r).await;
    assert_eq!(out.outcome, Some(Outcome::AppliedAndPruned), "{out:?}");
    assert!(live_cm(&r, HOSTS).await.is_none());
    assert_eq!(replicas(&r).await, Some(2));

    // A Role without `delete`: the apply succeeds, the prune is a 403 under the SA → Stalled
    // ImpersonationFailed, a Warning PruneFailed, no failure history entry (the baseline's quirk),
    // the stale object and the inventory kept.
    unbind(&r, "sa-user").await;
    role(
        &r.client,
        NS,
        "deploy-no-delete",
        SA_RESOURCES,
        &["get", "list", "create", "patch", "update"],
    )
    .await;
    bind_deploy_sa(&r, "sa-user-apply", "deploy-no-delete").await;
    let before = status(&r).await;
    let stale = hosts_in(&before);
    set_values(
        &r,
        valid_with(json!({"replicas": 2, "hosts": ["b.example"]})),
    )
    .await;
    reconcile_stalled(&r, "ImpersonationFailed").await;
    let s = status(&r).await;
    assert_eq!(s.reconcile.history, before.reconcile.history);
    assert_eq!(s.reconcile.inventory, before.reconcile.inventory);
    let (ty, action, _) = one_event(&events(&r.client, NAME, "PruneFailed").await);
    assert_eq!((ty.as_str(), action.as_str()), ("Warning", "Prune"));
    assert!(live_cm(&r, &stale[0]).await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_44_deletion_prunes_the_inventory_fail_slow_and_prune_off_orphans() {
    let r = shop(true).await;
    ready(&r).await;
    namespace(&r.client, "staging").await;
    let staging: Api<ModuleInstance> = Api::namespaced(r.client.clone(), "staging");
    create(
        &staging,
        shop_instance("v0.1.0", values("valid.json"), false).named("staging", NAME),
    )
    .await;
    for _ in 0..2 {
        instance::reconcile("staging", NAME, &r.ctx).await.unwrap();
    }
    let staging_cms: Api<ConfigMap> = Api::namespaced(r.client.clone(), "staging");
    assert!(staging_cms.get_opt("settings").await.unwrap().is_some());

    // Suspend never blocks deletion. One delete fails: the others are still attempted, the
    // finalizer is kept and the reconcile returns the error; the retry finishes.
    patch_spec(&instances(&r), NAME, json!({"suspend": true})).await;
    assert_eq!(reconcile(&r).await.reason, Some("Suspended"));
    instances(&r)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let fired = r.emu.faults_fired();
    r.emu.inject_fault(
        FaultRule::any(1, FaultKind::Internal)
            .method(http::Method::DELETE)
            .path_contains("/deployments/shop-web"),
    );
    let err = instance::reconcile(NS, NAME, &r.ctx).await.unwrap_err();
    assert_eq!(r.emu.faults_fired(), fired + 1);
    assert!(err.to_string().contains("prod/shop"), "{err}");
    assert!(live_cm(&r, "settings").await.is_none());
    assert!(live_cm(&r, HOSTS).await.is_none());
    assert!(deployments(&r).get_opt("shop-web").await.unwrap().is_some());
    assert_eq!(
        get(&r).await.metadata.finalizers,
        Some(vec!["opmodel.dev/cleanup".to_owned()])
    );
    assert_eq!(reconcile(&r).await, Reconciled::done());
    assert!(deployments(&r).get_opt("shop-web").await.unwrap().is_none());
    assert!(instances(&r).get_opt(NAME).await.unwrap().is_none());

    // prune=false: the finalizer is released and every object stays.
    staging
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        instance::reconcile("staging", NAME, &r.ctx).await.unwrap(),
        Reconciled::done()
    );
    assert!(staging.get_opt(NAME).await.unwrap().is_none());
    let staging_web: Api<Deployment> = Api::namespaced(r.client.clone(), "staging");
    assert!(staging_web.get_opt("shop-web").await.unwrap().is_some());
    assert!(staging_cms.get_opt("settings").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_45_deletion_as_a_service_account_that_lost_its_rbac_then_vanished() {
    let r = shop(true).await;
    service_account(&r.client, NS, "deploy-sa").await;
    role(&r.client, NS, "deploy", SA_RESOURCES, ALL_VERBS).await;
    bind_deploy_sa(&r, "sa-user", "deploy").await;
    patch_spec(
        &instances(&r),
        NAME,
        json!({"serviceAccountName": "deploy-sa"}),
    )
    .await;
    ready(&r).await;
    let annotate = |value: &'static str| {
        let api = instances(&r);
        async move {
            api.patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    "opm.dev/force-delete-orphan": value
                }}})),
            )
            .await
            .unwrap();
        }
    };

    // The SA exists but its RBAC is gone: the deletion prune is refused (403) → Stalled
    // ImpersonationFailed; the orphan annotation does not apply while the SA exists.
    unbind(&r, "sa-user").await;
    annotate("true").await;
    instances(&r)
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    reconcile_stalled(&r, "ImpersonationFailed").await;
    let (ty, action, _) = one_event(&events(&r.client, NAME, "ImpersonationFailed").await);
    assert_eq!((ty.as_str(), action.as_str()), ("Warning", "Delete"));
    assert!(instances(&r).get_opt(NAME).await.unwrap().is_some());
    assert!(live_cm(&r, "settings").await.is_some());

    // The SA gone, annotation `"yes"` (ignored): Stalled DeletionSAMissing naming prod/deploy-sa
    // and the three ways out, one Warning across retries, nothing pruned.
    annotate("yes").await;
    Api::<ServiceAccount>::namespaced(r.client.clone(), NS)
        .delete("deploy-sa", &DeleteParams::default())
        .await
        .unwrap();
    let message = reconcile_stalled(&r, "DeletionSAMissing").await;
    assert_eq!(reconcile_stalled(&r, "DeletionSAMissing").await, message);
    for part in [
        "ServiceAccount prod/deploy-sa not found",
        "restoring the ServiceAccount and its RBAC",
        "spec.prune=false",
        "opm.dev/force-delete-orphan=\"true\"",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
    let (ty, action, note) = one_event(&events(&r.client, NAME, "DeletionSAMissing").await);
    assert_eq!(
        (ty.as_str(), action.as_str(), note.as_str()),
        ("Warning", "Delete", message.as_str())
    );
    assert!(live_cm(&r, "settings").await.is_some());

    // `"true"`: orphaned in the same pass, the finalizer released, every object kept.
    annotate("true").await;
    assert_eq!(reconcile(&r).await, Reconciled::done());
    assert!(instances(&r).get_opt(NAME).await.unwrap().is_none());
    assert_eq!(
        one_event(&events(&r.client, NAME, "OrphanedOnDeletion").await),
        (
            "Warning".into(),
            "Delete".into(),
            "Orphaned 3 managed resources; ServiceAccount \"prod/deploy-sa\" missing and \
             opm.dev/force-delete-orphan annotation set"
                .into()
        )
    );
    for name in ["settings", HOSTS] {
        assert!(live_cm(&r, name).await.is_some(), "{name} orphaned");
    }
    assert_eq!(replicas(&r).await, Some(3));
}
