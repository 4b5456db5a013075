//! Platform scenarios 11–26 and TransformerRegistration scenarios 52–64 (docs/design/operator.md §8) with
//! the REAL kernel: `PlatformKernel` (closure, generation, build, contract inventory, catalog
//! acquisition) over the real `docker-registry` holding the fixture modules (`fixtures/opm/{core,
//! kube,mini,gateway,demo}` and `gateway` renamed `gateway2`, all at v0.1.0), reconciled against
//! kube-emu. What the fake-kernel tests (`platform.rs`, `registration.rs`) assert only as far as
//! the reconciler carries it is asserted here end to end: the bytes of the generated module, the
//! inventory gate on two real providers of one contract, the expected-version tripwire, an
//! unreachable registry's requeue, a claimed provider catalog folded into the platform, the kind
//! the kernel reads from a published module or core claimed as a catalog (53), a provider's
//! missing or foreign inventory (55), and build compatibility against the package's real deps (56).
//!
//! Scenario 56's refusal needs an `opmodel.dev/` path shared by a claimed catalog and the
//! platform package, which the `fixtures.test/` set has none of: its test re-homes the core, mini
//! and gateway variants under `opmodel.dev/` in its registry (`real_opm`) and runs a kernel
//! pinning that core, so the real closure, build and acquisition produce the deps compared.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use crds::conditions::types;
use crds::module_instance::ModuleInstance;
use crds::platform::{Platform, RegistrySource, SkewPolicy as CrdSkew};
use crds::transformer_registration::TransformerRegistration;
use kube::api::DeleteParams;
use kube::Api;
use opm_operator::controller::context::Context;
use opm_operator::controller::{platform, registration};
use opm_operator::kernel::SkewPolicy;
use opm_operator::platform::{
    Generator, Layout, PackageIdentity, PlatformKernel, RegistryShape, Store,
};

use super::common::*;
use super::real::*;
use crate::platform::gen::opm;

const EXPOSE: &str = "fixtures.test/catalogs/mini/traits/expose@v1";
const CONTAINER: &str = "fixtures.test/catalogs/mini/resources/container@v1";
const ROUTE_TF: &str = "fixtures.test/catalogs/gateway/transformers/route-transformer@0.1.0";
const ROUTE2_TF: &str = "fixtures.test/catalogs/gateway2/transformers/route-transformer@0.1.0";

const ONE_MIN: Duration = Duration::from_secs(60);
const THIRTY_MIN: Duration = Duration::from_secs(30 * 60);

async fn status(r: &Real) -> crds::platform::PlatformStatus {
    platforms(&r.client)
        .get("cluster")
        .await
        .unwrap()
        .status
        .unwrap()
}

async fn ready(r: &Real) -> (String, String, String) {
    condition(&status(r).await.conditions, types::READY).unwrap()
}

async fn fulfilled(r: &Real) -> Option<(String, String, String)> {
    condition(&status(r).await.conditions, types::CONTRACTS_FULFILLED)
}

fn unfulfilled_message() -> String {
    format!(
        "1 provider-fulfilled contract is defined by an enabled catalog and implemented by \
         nothing on the platform; a module demanding one will not resolve until a provider \
         registers:\n  {EXPOSE} (defined by {MINI})"
    )
}

fn fulfilled_message() -> String {
    "every provider-fulfilled contract the enabled catalogs define has a provider (5 defined)"
        .to_owned()
}

/// The transformers of the recorded package.
fn transformers(r: &Real) -> Vec<String> {
    r.ctx
        .store
        .generated()
        .unwrap()
        .platform
        .transformers
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_11_12_13_14_22_24_26_generated_from_the_real_registry() {
    let r = real().await;
    let api = platforms(&r.client);
    // 12: no Platform object → store stays empty, no error.
    assert_eq!(
        platform::reconcile("cluster", &r.ctx)
            .await
            .unwrap()
            .requeue,
        None
    );
    assert!(r.ctx.store.generated().is_none());

    // 13: one enabled catalog and one disabled.
    let created = create(&api, plat(&[(MINI, None), (GATEWAY, Some(false))])).await;
    let generation = created.metadata.generation.unwrap();
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, None);
    let s = status(&r).await;
    assert_eq!(s.observed_generation, Some(generation));
    assert_eq!(
        s.operator_version.as_deref(),
        Some(concat!("v", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "True".into(),
            "Generated".into(),
            format!("Platform module generated and built for generation {generation}")
        )
    );
    assert!(condition(&s.conditions, types::STALLED).is_none());
    let rec = r.ctx.store.generated().unwrap();
    let id = PackageIdentity::unclaimed(generation).unwrap();
    assert_eq!(rec.identity, id);
    assert_eq!(rec.dir, r.ctx.layout.dir(&id));
    assert_eq!(rec.skew, SkewPolicy::Warn);
    assert_eq!(s.package_identity.unwrap().generation, generation);
    let module = std::fs::read_to_string(rec.dir.join("cue.mod/module.cue")).unwrap();
    assert!(
        module.starts_with("module: \"opmodel.dev/platforms/cluster@v0\"\n"),
        "{module}"
    );
    for dep in [GATEWAY, MINI, CORE, KUBE] {
        assert!(
            module.contains(&format!("\t\"{dep}\": {{\n\t\tv: \"v0.1.0\"\n\t}}")),
            "{dep} pinned: {module}"
        );
    }
    let platform_cue = std::fs::read_to_string(rec.dir.join("platform.cue")).unwrap();
    assert!(
        platform_cue.contains(&format!(
            "\"{GATEWAY}\": {{\n\t\tenable:   false\n\t\tversion:  \"0.1.0\""
        )),
        "{platform_cue}"
    );
    // The disabled gateway contributes nothing; mini's provider-fulfilled `expose` is unmet.
    assert_eq!(
        rec.platform.deps.get(MINI).map(String::as_str),
        Some("v0.1.0")
    );
    assert!(!transformers(&r).iter().any(|t| t == ROUTE_TF));
    assert_eq!(s.registry.len(), 2);
    assert!(s
        .registry
        .iter()
        .all(|p| p.source == RegistrySource::Subscription && p.version == "0.1.0"));
    assert!(s
        .registry
        .iter()
        .any(|p| p.catalog == GATEWAY && !p.enabled));
    // 22: ContractsFulfilled per the §3.6 table.
    assert_eq!(
        fulfilled(&r).await.unwrap(),
        (
            "False".into(),
            "UnfulfilledContracts".into(),
            unfulfilled_message()
        )
    );
    assert_eq!(events(&r.client, "cluster", "Generated").await.len(), 1);

    // 11: another name is ignored, the store untouched.
    assert_eq!(
        platform::reconcile("not-cluster", &r.ctx)
            .await
            .unwrap()
            .requeue,
        None
    );
    assert_eq!(r.ctx.store.identity(), Some(id));

    // 14 + 22: enabling the provider fulfils every contract; 24: the skew policy is recorded.
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {GATEWAY: {"enable": true, "version": "0.1.0"}}}),
    )
    .await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(
        fulfilled(&r).await.unwrap(),
        (
            "True".into(),
            "ContractsFulfilled".into(),
            fulfilled_message()
        )
    );
    assert!(transformers(&r).iter().any(|t| t == ROUTE_TF));
    for (policy, expected) in [
        (Some(CrdSkew::Refuse), SkewPolicy::Refuse),
        (Some(CrdSkew::Warn), SkewPolicy::Warn),
    ] {
        patch_spec(&api, "cluster", serde_json::json!({"skewPolicy": policy})).await;
        platform::reconcile("cluster", &r.ctx).await.unwrap();
        assert_eq!(r.ctx.store.generated().unwrap().skew, expected);
    }
    let last = api
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    assert_eq!(r.ctx.layout.generations().unwrap(), vec![last]);

    // 22: no entries → nothing defined, nothing verified.
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {MINI: null, GATEWAY: null}}),
    )
    .await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(
        fulfilled(&r).await.unwrap(),
        (
            "True".into(),
            "NoContractsDefined".into(),
            "the enabled catalogs define no contract, so nothing was verified".into()
        )
    );
    assert!(transformers(&r).is_empty());

    // 26: deletion clears the store and leaves the package on disk; claims then defer.
    let dir = r.ctx.store.generated().unwrap().dir.clone();
    api.delete("cluster", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        platform::reconcile("cluster", &r.ctx)
            .await
            .unwrap()
            .requeue,
        None
    );
    assert!(r.ctx.store.generated().is_none());
    assert_eq!(r.ctx.store.generation(), 0);
    assert!(dir.join("platform.cue").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_15_16_17_22_a_failure_keeps_the_last_good_package_and_leases_hold() {
    let r = real().await;
    let api = platforms(&r.client);
    create(&api, plat(&[(MINI, None)])).await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    let good = r.ctx.store.generated().unwrap();
    let good_fulfilled = fulfilled(&r).await.unwrap();

    // 15: a render holds a lease while generation 2 builds.
    let (_leased, mut lease) = r.ctx.store.lease().unwrap();

    // 16: a pin that is not published.
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {"fixtures.test/catalogs/ghost@v9": {"version": "9.9.9"}}}),
    )
    .await;
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, Some(THIRTY_MIN));
    let (st, reason, msg) = ready(&r).await;
    assert_eq!((st.as_str(), reason.as_str()), ("False", "BuildFailed"));
    assert!(
        msg.starts_with("resolving platform dependencies: ")
            && msg.contains("fixtures.test/catalogs/ghost@v9.9.9"),
        "{msg}"
    );
    assert_eq!(
        condition(&status(&r).await.conditions, types::STALLED)
            .unwrap()
            .0,
        "True"
    );
    assert_eq!(r.ctx.store.generated().unwrap(), good, "last good kept");
    assert_eq!(
        r.ctx.layout.packages().unwrap(),
        vec![good.identity],
        "no directory written"
    );
    // 22: the failure leaves ContractsFulfilled describing the last good package.
    assert_eq!(fulfilled(&r).await.unwrap(), good_fulfilled);

    // 17: gateway's bytes (declaring 0.1.0) published as v0.2.0 and pinned at 0.2.0.
    let publisher = r.reg.client(None);
    tokio::task::spawn_blocking(move || publisher.publish(&opm("gateway"), "v0.2.0").unwrap())
        .await
        .unwrap();
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {
            "fixtures.test/catalogs/ghost@v9": null,
            GATEWAY: {"version": "0.2.0"}
        }}),
    )
    .await;
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, Some(THIRTY_MIN));
    let (_, reason, msg) = ready(&r).await;
    assert_eq!(reason, "BuildFailed");
    let at = format!("#registry.\"{GATEWAY}\".version");
    assert!(
        msg.starts_with("building platform module: ")
            && msg.contains(&at)
            && msg.contains("\"0.2.0\"")
            && msg.contains("\"0.1.0\""),
        "{msg}"
    );
    assert_eq!(r.ctx.store.generated().unwrap(), good, "nothing recorded");
    assert_eq!(fulfilled(&r).await.unwrap(), good_fulfilled);

    // 15: the fix builds; the leased package stays next to the new one until released.
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {GATEWAY: {"version": "0.1.0"}}}),
    )
    .await;
    assert_eq!(
        platform::reconcile("cluster", &r.ctx)
            .await
            .unwrap()
            .requeue,
        None
    );
    let second = r.ctx.store.generated().unwrap();
    assert_ne!(second.identity, good.identity);
    let mut kept = r.ctx.layout.packages().unwrap();
    kept.sort();
    let mut want = vec![good.identity, second.identity];
    want.sort();
    assert_eq!(kept, want);
    assert!(good.dir.join("cue.mod/module.cue").is_file());
    lease.release();
    patch_spec(&api, "cluster", serde_json::json!({"skewPolicy": "Refuse"})).await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(
        r.ctx.layout.packages().unwrap(),
        vec![r.ctx.store.identity().unwrap()]
    );
    assert!(!good.dir.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_19_20_21_64_two_real_providers_are_refused_until_one_is_disabled() {
    let r = real().await;
    let api = platforms(&r.client);
    create(
        &api,
        plat(&[(MINI, None), (GATEWAY, None), (GATEWAY2, None)]),
    )
    .await;
    for _ in 0..2 {
        let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
        assert_eq!(out.requeue, Some(THIRTY_MIN));
    }
    let routable = format!(
        "platform is not routable: 1 over-subscribed contract; a platform package cannot be \
         generated until one competing catalog is disabled or its claim removed:\n  {EXPOSE} \
         (defined by {MINI}) provided by {GATEWAY2}, {GATEWAY}"
    );
    let discriminated = format!(
        "platform is not discriminated: 1 comparable transformer pair; every component the \
         narrower transformer matches is also matched by the broader one, so both would render \
         (0015:D5):\n  {ROUTE_TF} (broader) and {ROUTE2_TF} (narrower) over {CONTAINER}, {EXPOSE}"
    );
    assert_eq!(
        ready(&r).await,
        (
            "False".into(),
            "OverSubscribedContracts".into(),
            format!("{routable}\n\n{discriminated}")
        )
    );
    assert!(r.ctx.store.generated().is_none(), "nothing recorded");
    assert!(fulfilled(&r).await.is_none(), "written only when recorded");
    // 64: the same refusal twice is one Warning.
    assert_eq!(
        events(&r.client, "cluster", "OverSubscribedContracts")
            .await
            .len(),
        1
    );
    // 21: the tuple fixed: generated, Stalled gone, recorded, no requeue.
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {GATEWAY2: {"enable": false, "version": "0.1.0"}}}),
    )
    .await;
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, None);
    let s = status(&r).await;
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap().1,
        "Generated"
    );
    assert!(condition(&s.conditions, types::STALLED).is_none());
    assert!(r.ctx.store.generated().is_some());
    assert!(!transformers(&r).iter().any(|t| t == ROUTE2_TF));
}

/// The gateway catalog renamed `plainroute` with its `expose` requirement dropped: its route
/// transformer matches every container component, a superset of what mini's deployment
/// transformer matches, and provides nothing.
fn plainroute_files() -> Vec<(String, Vec<u8>)> {
    crate::platform::gen::module_files(&opm("gateway"))
        .into_iter()
        .map(|(p, b)| {
            let text: String = String::from_utf8(b)
                .unwrap()
                .replace("gateway", "plainroute")
                .lines()
                .filter(|l| !l.contains("requiredTraits") && !l.contains("tr \"fixtures.test"))
                .map(|l| format!("{l}\n"))
                .collect();
            (p, text.into_bytes())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_20_comparable_predicates_alone_refuse_with_broader_and_narrower_rows() {
    let r = real().await;
    publish_files(&r, plainroute_files(), "v0.1.0").await;
    const PLAIN: &str = "fixtures.test/catalogs/plainroute@v0";
    const PLAIN_TF: &str = "fixtures.test/catalogs/plainroute/transformers/route-transformer@0.1.0";
    const DEPLOY_TF: &str = "fixtures.test/catalogs/mini/transformers/deployment-transformer@0.1.0";
    create(&platforms(&r.client), plat(&[(MINI, None), (PLAIN, None)])).await;
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, Some(THIRTY_MIN));
    assert_eq!(
        ready(&r).await,
        (
            "False".into(),
            "ComparablePredicates".into(),
            format!(
                "platform is not discriminated: 1 comparable transformer pair; every component \
                 the narrower transformer matches is also matched by the broader one, so both \
                 would render (0015:D5):\n  {PLAIN_TF} (broader) and {DEPLOY_TF} (narrower) over \
                 {CONTAINER}"
            )
        )
    );
    assert!(r.ctx.store.generated().is_none());
}

/// mini published as a second major, `mini@v1` at v1.0.0: the core stamps contract FQNs from
/// the catalog's registry path without the major, so both majors define the same contracts.
fn mini_v1_files() -> Vec<(String, Vec<u8>)> {
    crate::platform::gen::module_files(&opm("mini"))
        .into_iter()
        .map(|(p, b)| {
            let t = String::from_utf8(b).unwrap();
            let t = match p.as_str() {
                "cue.mod/module.cue" => t.replace(
                    "module: \"fixtures.test/catalogs/mini@v0\"",
                    "module: \"fixtures.test/catalogs/mini@v1\"",
                ),
                "identity/identity.cue" => t
                    .replace("catalogs/mini@v0", "catalogs/mini@v1")
                    .replace("*\"0.1.0\"", "*\"1.0.0\""),
                _ => t,
            };
            (p, t.into_bytes())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_collisions_two_majors_of_one_catalog_defining_the_same_contracts_are_refused() {
    let r = real().await;
    publish_files(&r, mini_v1_files(), "v1.0.0").await;
    const DUP: &str = "fixtures.test/catalogs/mini@v1";
    let api = platforms(&r.client);
    create(&api, plat(&[(MINI, None)]).with_catalog(DUP, "1.0.0", None)).await;
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, Some(THIRTY_MIN));
    let rows: String = [
        "blueprints/stateless@v1",
        "resources/configs@v1",
        "resources/container@v1",
        "traits/expose@v1",
        "traits/scaling@v1",
    ]
    .iter()
    .map(|c| format!("\n  fixtures.test/catalogs/mini/{c} defined by {MINI}, {DUP}"))
    .collect();
    let tf = |name: &str, v: &str| format!("fixtures.test/catalogs/mini/transformers/{name}@{v}");
    let (st, reason, msg) = ready(&r).await;
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "ContractCollisions")
    );
    assert_eq!(
        msg,
        format!(
            "platform has colliding contract definitions: 5 contracts are defined by more than \
             one enabled catalog; a contract has exactly one definition, so disable all but one \
             of them:{rows}\n\nplatform is not discriminated: 2 comparable transformer pairs; \
             every component the narrower transformer matches is also matched by the broader \
             one, so both would render (0015:D5):\n  {} (broader) and {} (narrower) over \
             fixtures.test/catalogs/mini/resources/configs@v1\n  {} (broader) and {} (narrower) \
             over {CONTAINER}",
            tf("configmap-transformer", "0.1.0"),
            tf("configmap-transformer", "1.0.0"),
            tf("deployment-transformer", "0.1.0"),
            tf("deployment-transformer", "1.0.0"),
        )
    );
    assert!(r.ctx.store.generated().is_none());
    // The second major disabled defines nothing: generated.
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {DUP: {"enable": false, "version": "1.0.0"}}}),
    )
    .await;
    assert_eq!(
        platform::reconcile("cluster", &r.ctx)
            .await
            .unwrap()
            .requeue,
        None
    );
    assert_eq!(ready(&r).await.1, "Generated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_18_a_versionless_legacy_subscription_is_refused_before_any_registry_io() {
    use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut r = real().await;
    // A stored object that predates the required field: the CRD relaxed, the object written raw.
    let crds_api: Api<CustomResourceDefinition> = Api::all(r.client.clone());
    let name = "platforms.opmodel.dev";
    let mut v = serde_json::to_value(crds_api.get(name).await.unwrap()).unwrap();
    super::platform::drop_required_version(&mut v);
    let relaxed: CustomResourceDefinition = serde_json::from_value(v).unwrap();
    crds_api
        .replace(name, &Default::default(), &relaxed)
        .await
        .unwrap();
    let raw: Api<kube::api::DynamicObject> = Api::all_with(
        r.client.clone(),
        &kube::api::ApiResource::erase::<Platform>(&()),
    );
    let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes", "registry": {
            MINI: {"version": "0.1.0"},
            "fixtures.test/catalogs/legacy@v0": {}
        }},
    }))
    .unwrap();
    raw.create(&Default::default(), &obj).await.unwrap();
    // With the registry gone, any registry I/O would be a transient closure failure instead.
    r.reg.stop();
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, Some(THIRTY_MIN));
    assert_eq!(
        ready(&r).await,
        (
            "False".into(),
            "BuildFailed".into(),
            "registry entry \"fixtures.test/catalogs/legacy@v0\": version is required (stored \
             object predates the required field)"
                .into()
        )
    );
    assert!(r.ctx.store.generated().is_none());
    assert!(r.ctx.layout.packages().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_23_an_unreachable_registry_requeues_in_one_minute() {
    let mut r = real().await;
    create(&platforms(&r.client), plat(&[(MINI, None)])).await;
    r.reg.stop();
    let out = platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(out.requeue, Some(ONE_MIN));
    let (st, reason, msg) = ready(&r).await;
    assert_eq!((st.as_str(), reason.as_str()), ("False", "BuildFailed"));
    assert!(
        msg.starts_with("resolving platform dependencies: "),
        "{msg}"
    );
    assert!(r.ctx.store.generated().is_none());
}

// ---------------------------------------------------------------------------------------------
// TransformerRegistration (52–64) on the real acquirer.

async fn set_ready(client: &kube::Client, ns: &str, name: &str, ready: bool) {
    let api: Api<ModuleInstance> = Api::namespaced(client.clone(), ns);
    let status = if ready { "True" } else { "False" };
    patch_status(
        &api,
        name,
        serde_json::json!({"conditions": [{"type": "Ready", "status": status, "reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    )
    .await;
}

/// Provider instance `ns/name` whose inventory owns claim `ns.name`.
async fn provider(client: &kube::Client, ns: &str, name: &str, ready: bool) {
    namespace(client, ns).await;
    let api: Api<ModuleInstance> = Api::namespaced(client.clone(), ns);
    create(&api, ModuleInstance::test().named(ns, name)).await;
    set_ready(client, ns, name, ready).await;
    patch_status(
        &api,
        name,
        serde_json::json!({"inventory": {"revision": 1, "digest": "sha256:x", "count": 1, "entries": [
            {"group": "opmodel.dev", "kind": "TransformerRegistration", "name": format!("{ns}.{name}"), "v": "v1alpha1"}
        ]}}),
    )
    .await;
}

async fn claim(r: &Real, ns: &str, name: &str, catalog: &str, version: &str, provides: &[&str]) {
    create(
        &claims(&r.client),
        TransformerRegistration::for_provider(ns, name, catalog, version).with_provides(provides),
    )
    .await;
}

async fn verdict(r: &Real, name: &str) -> (String, String, String) {
    let tr = claims(&r.client).get(name).await.unwrap();
    condition(&tr.status.unwrap().conditions, types::READY).unwrap()
}

async fn judge(r: &Real, name: &str) -> Option<Duration> {
    registration::reconcile(name, &r.ctx).await.unwrap().requeue
}

/// A cluster with Platform `cluster` subscribing `catalogs` and its package recorded.
async fn real_with(catalogs: &[(&str, Option<bool>)]) -> Real {
    let r = real().await;
    record(&r, catalogs).await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_52_53_54_55_56_judging_real_catalogs() {
    let r = real().await;
    provider(&r.client, "team-a", "gw", true).await;
    claim(&r, "team-a", "gw", GATEWAY, "0.1.0", &[]).await;
    // 52: no platform yet → deferred, no verdict, no registry I/O needed.
    assert_eq!(judge(&r, "team-a.gw").await, Some(THIRTY_MIN));
    let tr = claims(&r.client).get("team-a.gw").await.unwrap();
    let s = tr.status.clone().unwrap();
    assert!(!s.accepted);
    assert_eq!(s.observed_generation, tr.metadata.generation);
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "Unknown".into(),
            "PlatformNotReady".into(),
            "No platform has been generated yet, so the claim cannot be judged".into()
        )
    );

    create(&platforms(&r.client), plat(&[(MINI, None)])).await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    // 54: the claim lists [] but the real gateway implements [expose].
    assert_eq!(judge(&r, "team-a.gw").await, Some(THIRTY_MIN));
    assert_eq!(
        verdict(&r, "team-a.gw").await,
        (
            "False".into(),
            "ProvidesMismatch".into(),
            format!(
                "Claim lists provider contracts [] but the catalog implements [{EXPOSE}]; \
                 acceptance requires them to match exactly"
            )
        )
    );
    // 54 + 56: the exact set is accepted; gateway's requirements are all `fixtures.test/`
    // paths, which the build-compatibility check does not compare.
    let trs = claims(&r.client);
    patch_spec(&trs, "team-a.gw", serde_json::json!({"provides": [EXPOSE]})).await;
    assert_eq!(judge(&r, "team-a.gw").await, None);
    assert_eq!(
        verdict(&r, "team-a.gw").await,
        (
            "True".into(),
            "Accepted".into(),
            format!("Claim accepted for catalog {GATEWAY} at 0.1.0")
        )
    );

    // 53: a module is not a catalog (checked by type) …
    provider(&r.client, "team-b", "demo", true).await;
    claim(&r, "team-b", "demo", DEMO, "0.1.0", &[]).await;
    judge(&r, "team-b.demo").await;
    let (_, reason, msg) = verdict(&r, "team-b.demo").await;
    assert_eq!(reason, "CatalogWrongKind");
    assert!(
        msg.starts_with(&format!(
            "Claimed artifact {DEMO} at 0.1.0 is not a catalog: "
        )) && msg.contains("\"Module\""),
        "{msg}"
    );
    // … and an unpublished version is unresolved, naming catalog and version.
    provider(&r.client, "team-c", "gw", true).await;
    claim(&r, "team-c", "gw", GATEWAY2, "0.3.0", &[EXPOSE]).await;
    judge(&r, "team-c.gw").await;
    let (_, reason, msg) = verdict(&r, "team-c.gw").await;
    assert_eq!(reason, "CatalogUnresolved");
    assert!(
        msg.starts_with(&format!(
            "Claimed catalog {GATEWAY2} at 0.3.0 could not be resolved: "
        )) && msg.contains("fixtures.test/catalogs/gateway2@v0.3.0"),
        "{msg}"
    );

    // 55: a provider that does not exist.
    claim(&r, "team-d", "gw", GATEWAY2, "0.1.0", &[EXPOSE]).await;
    judge(&r, "team-d.gw").await;
    assert_eq!(
        verdict(&r, "team-d.gw").await,
        (
            "False".into(),
            "ProviderMismatch".into(),
            "Claim names provider ModuleInstance team-d/gw, which does not exist, so the claim \
             is not rendered output"
                .into()
        )
    );
    // 60: refused claims carry no finalizer and no Active condition.
    for name in ["team-b.demo", "team-c.gw", "team-d.gw"] {
        let tr = trs.get(name).await.unwrap();
        assert!(tr.metadata.finalizers.unwrap_or_default().is_empty());
        assert!(condition(&tr.status.unwrap().conditions, types::ACTIVE).is_none());
    }
}

/// Publishes the gateway catalog as `fixtures.test/catalogs/<name>@v0` v0.1.0 with `extra` appended
/// to its root file, claims it from `<ns>/p` (provider Ready) and judges the claim twice, each
/// judgement requeueing after 30 minutes.
async fn gateway_variant_judged(r: &Real, ns: &str, name: &str, extra: &str) {
    let to = format!("fixtures.test/catalogs/{name}");
    let files = rehomed("gateway", &[("fixtures.test/catalogs/gateway", &to)], &[])
        .into_iter()
        .map(|(p, mut b)| {
            if p == "catalog.cue" {
                b.extend_from_slice(format!("\n{extra}\n").as_bytes());
            }
            (p, b)
        })
        .collect();
    publish_files(r, files, "v0.1.0").await;
    provider(&r.client, ns, "p", true).await;
    let catalog = format!("fixtures.test/catalogs/{name}@v0");
    claim(r, ns, "p", &catalog, "0.1.0", &[EXPOSE]).await;
    for _ in 0..2 {
        assert_eq!(judge(r, &format!("{ns}.p")).await, Some(THIRTY_MIN));
    }
}

/// A refused claim: Ready=False with `reason`/`message`, Stalled, not accepted, no finalizer, no
/// Active condition, one Warning (action `Accept`) however often it was judged.
async fn assert_refused(r: &Real, name: &str, reason: &str, message: &str) {
    let tr = claims(&r.client).get(name).await.unwrap();
    assert!(tr
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .is_empty());
    let s = tr.status.unwrap();
    assert!(!s.accepted);
    assert_eq!(s.observed_generation, tr.metadata.generation);
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        ("False".into(), reason.into(), message.into())
    );
    assert_eq!(
        condition(&s.conditions, types::STALLED).unwrap(),
        ("True".into(), reason.into(), message.into())
    );
    assert!(condition(&s.conditions, types::ACTIVE).is_none());
    let evs = events(&r.client, name, reason).await;
    assert_eq!(evs.len(), 1, "one Warning for {name}");
    assert_eq!(evs[0].type_.as_deref(), Some("Warning"));
    assert_eq!(evs[0].action.as_deref(), Some("Accept"));
    assert_eq!(evs[0].note.as_deref(), Some(message));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_53_real_modules_that_are_not_catalogs_and_unresolvable_catalogs_are_refused() {
    let r = real_with(&[(MINI, None)]).await;
    // A published module (kind "Module") and the core (a package of definitions, no concrete
    // kind) claimed as catalogs: refused by the kind the kernel read, not by message text.
    for (ns, artifact, why) in [
        (
            "team-a",
            DEMO,
            "fixtures.test/modules/demo@v0.1.0 has kind \"Module\", not \"Catalog\"",
        ),
        (
            "team-b",
            CORE,
            "fixtures.test/core@v0.1.0 declares no concrete kind, so it is not a catalog",
        ),
    ] {
        provider(&r.client, ns, "p", true).await;
        claim(&r, ns, "p", artifact, "0.1.0", &[]).await;
        let name = format!("{ns}.p");
        for _ in 0..2 {
            assert_eq!(judge(&r, &name).await, Some(THIRTY_MIN));
        }
        let msg = format!("Claimed artifact {artifact} at 0.1.0 is not a catalog: {why}");
        assert_refused(&r, &name, "CatalogWrongKind", &msg).await;
    }
    // A catalog whose kind is an error (`c.#Catalog` and `kind: "Module"` conflict): refused as
    // not a catalog, naming the conflict rather than "no concrete kind".
    const CLASH: &str = "fixtures.test/catalogs/clash@v0";
    gateway_variant_judged(&r, "team-e", "clash", "kind: \"Module\"").await;
    let (_, reason, msg) = verdict(&r, "team-e.p").await;
    assert_eq!(reason, "CatalogWrongKind");
    let prefix = format!(
        "Claimed artifact {CLASH} at 0.1.0 is not a catalog: fixtures.test/catalogs/clash@v0.1.0 \
         declares a kind that is an error ("
    );
    assert!(
        msg.starts_with(&prefix) && msg.contains("conflicting values"),
        "{msg}"
    );
    assert_refused(&r, "team-e.p", "CatalogWrongKind", &msg).await;

    // A plain evaluation error whose text mentions kinds (`kindHint: 1 & 2` beside a concrete
    // `kind: "Catalog"`) is unresolved, not wrong kind: the class is the error's type, never
    // its message.
    const HINT: &str = "fixtures.test/catalogs/hint@v0";
    gateway_variant_judged(&r, "team-f", "hint", "metadata: kindHint: 1 & 2").await;
    let (_, reason, msg) = verdict(&r, "team-f.p").await;
    assert_eq!(reason, "CatalogUnresolved", "{msg}");
    assert!(
        msg.starts_with(&format!(
            "Claimed catalog {HINT} at 0.1.0 could not be resolved: "
        )) && msg.contains("kindHint"),
        "{msg}"
    );
    assert_refused(&r, "team-f.p", "CatalogUnresolved", &msg).await;

    // A version never published and a path never published: unresolved, naming the claimed
    // catalog and version, then the coordinate the kernel asked the registry for.
    for (ns, catalog, version, coord) in [
        (
            "team-c",
            GATEWAY,
            "0.3.0",
            "fixtures.test/catalogs/gateway@v0.3.0",
        ),
        (
            "team-d",
            "fixtures.test/catalogs/ghost@v0",
            "0.1.0",
            "fixtures.test/catalogs/ghost@v0.1.0",
        ),
    ] {
        provider(&r.client, ns, "p", true).await;
        claim(&r, ns, "p", catalog, version, &[EXPOSE]).await;
        let name = format!("{ns}.p");
        for _ in 0..2 {
            assert_eq!(judge(&r, &name).await, Some(THIRTY_MIN));
        }
        let (_, reason, msg) = verdict(&r, &name).await;
        assert_eq!(reason, "CatalogUnresolved");
        let prefix = format!(
            "Claimed catalog {catalog} at {version} could not be resolved: acquiring catalog \
             {coord}: "
        );
        assert!(msg.starts_with(&prefix), "{msg}");
        assert_refused(&r, &name, "CatalogUnresolved", &msg).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_55_a_provider_without_inventory_defers_and_one_owning_another_claim_refuses() {
    let r = real_with(&[(MINI, None)]).await;
    namespace(&r.client, "team-a").await;
    let mis: Api<ModuleInstance> = Api::namespaced(r.client.clone(), "team-a");
    create(&mis, ModuleInstance::test().named("team-a", "gw")).await;
    claim(&r, "team-a", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    let trs = claims(&r.client);
    let pending = (
        "Unknown".to_owned(),
        "ProviderInventoryPending".to_owned(),
        "Provider ModuleInstance team-a/gw has not written an inventory yet".to_owned(),
    );

    // The provider exists but has written no inventory: no verdict yet.
    for _ in 0..2 {
        assert_eq!(judge(&r, "team-a.gw").await, Some(THIRTY_MIN));
    }
    let tr = trs.get("team-a.gw").await.unwrap();
    let s = tr.status.unwrap();
    assert!(!s.accepted);
    assert_eq!(s.observed_generation, tr.metadata.generation);
    assert_eq!(condition(&s.conditions, types::READY).unwrap(), pending);
    assert_eq!(
        condition(&s.conditions, types::RECONCILING).unwrap(),
        ("True".into(), pending.1.clone(), pending.2.clone())
    );
    assert!(condition(&s.conditions, types::STALLED).is_none());
    assert!(events(&r.client, "team-a.gw", &pending.1).await.is_empty());

    // Its inventory owns another claim: refused, naming the claim and the provider.
    let inventory = |claim: &str| {
        serde_json::json!({"inventory": {"revision": 1, "digest": "sha256:x", "count": 1,
            "entries": [{"group": "opmodel.dev", "kind": "TransformerRegistration",
                "name": claim, "v": "v1alpha1"}]}})
    };
    patch_status(&mis, "gw", inventory("team-a.other")).await;
    for _ in 0..2 {
        assert_eq!(judge(&r, "team-a.gw").await, Some(THIRTY_MIN));
    }
    assert_refused(
        &r,
        "team-a.gw",
        "ProviderMismatch",
        "Claim team-a.gw is not in the inventory of provider ModuleInstance team-a/gw, so the \
         claim is not rendered output",
    )
    .await;

    // It renders the claim: accepted (the provider is not Ready: inactive).
    patch_status(&mis, "gw", inventory("team-a.gw")).await;
    assert_eq!(judge(&r, "team-a.gw").await, None);
    assert_eq!(verdict(&r, "team-a.gw").await.1, "Accepted");

    // The inventory goes again: deferred, the accepted verdict and the finalizer untouched.
    patch_status(&mis, "gw", serde_json::json!({"inventory": null})).await;
    assert_eq!(judge(&r, "team-a.gw").await, Some(THIRTY_MIN));
    let tr = trs.get("team-a.gw").await.unwrap();
    assert_eq!(
        tr.metadata.finalizers.unwrap_or_default(),
        vec!["opmodel.dev/dependents".to_owned()]
    );
    let s = tr.status.unwrap();
    assert!(s.accepted && !s.active);
    assert_eq!(condition(&s.conditions, types::READY).unwrap(), pending);
    assert!(events(&r.client, "team-a.gw", &pending.1).await.is_empty());
}

// Scenario 56 on OPM paths: the build-compatibility check compares only `opmodel.dev/` (and
// `testing.opmodel.dev/`) requirements, matching a claimed catalog's `cue.mod/module.cue` deps
// to the deps of the recorded platform package by base path. The fixtures are re-homed there:
// core as `opmodel.dev/core@v0` (v0.1.0–v0.3.0) and `@v1` (v1.0.0), mini as
// `opmodel.dev/catalogs/mini@v0`, gateway variants as `opmodel.dev/catalogs/<name>@v0`; kube
// stays `fixtures.test/x/kube@v0` (a non-OPM path), also published at v0.2.0.

const OPM_CORE: &str = "opmodel.dev/core@v0";
const OPM_CORE_V1: &str = "opmodel.dev/core@v1";
const OPM_MINI: &str = "opmodel.dev/catalogs/mini@v0";
const OPM_EXPOSE: &str = "opmodel.dev/catalogs/mini/traits/expose@v1";

/// `module` (a `cue.mod/module.cue` in the fixtures' layout, `deps` last) with each of `pins`
/// (path@major → version) required: a pinned version replaced, a new requirement added; the
/// `default: true` markers kept and the deps written sorted.
fn with_deps(module: &str, pins: &[(&str, &str)]) -> String {
    let (head, tail) = module.split_once("deps: {\n").unwrap_or((module, ""));
    let mut deps: std::collections::BTreeMap<String, (String, bool)> = Default::default();
    let mut current = String::new();
    for line in tail.lines().map(str::trim) {
        if let Some(path) = line.strip_suffix(": {") {
            current = path.trim_matches('"').to_owned();
            deps.insert(current.clone(), (String::new(), false));
        } else if let Some(v) = line.strip_prefix("v:") {
            deps.get_mut(&current).unwrap().0 = v.trim().trim_matches('"').to_owned();
        } else if line == "default: true" {
            deps.get_mut(&current).unwrap().1 = true;
        }
    }
    for (path, v) in pins {
        deps.entry((*path).to_owned()).or_default().0 = (*v).to_owned();
    }
    if deps.is_empty() {
        return module.to_owned();
    }
    let mut out = format!("{}\ndeps: {{\n", head.trim_end());
    for (path, (v, default)) in deps {
        out += &format!("\t\"{path}\": {{\n\t\tv: \"{v}\"\n");
        if default {
            out += "\t\tdefault: true\n";
        }
        out += "\t}\n";
    }
    out + "}\n"
}

/// The files of fixture module `dir` re-homed: each of `renames` (old → new, in order) applied
/// to every file, then `pins` required in its module file.
fn rehomed(dir: &str, renames: &[(&str, &str)], pins: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    crate::platform::gen::module_files(&opm(dir))
        .into_iter()
        .map(|(p, b)| {
            let mut t = String::from_utf8(b).unwrap();
            for (from, to) in renames {
                t = t.replace(from, to);
            }
            if p == "cue.mod/module.cue" {
                t = with_deps(&t, pins);
            }
            (p, t.into_bytes())
        })
        .collect()
}

/// The gateway catalog as `opmodel.dev/catalogs/<name>@v0` (providing mini's `expose` at its OPM
/// path), importing the core at `core` and requiring `pins`.
fn opm_gateway(name: &str, core: &str, pins: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    rehomed(
        "gateway",
        &[
            ("fixtures.test/core@v0", core),
            ("fixtures.test/catalogs/", "opmodel.dev/catalogs/"),
            ("gateway", name),
        ],
        pins,
    )
}

/// A cluster whose kernel pins the OPM core at v0.2.0, with the re-homed modules and the gateway
/// variants published.
async fn real_opm() -> Real {
    const PREFIXES: &[&str] = &["fixtures.test", "opmodel.dev"];
    let r = real().await;
    let publisher = r.reg.client_for(PREFIXES, None);
    tokio::task::spawn_blocking(move || {
        let core = |path: &str| rehomed("core", &[("fixtures.test/core@v0", path)], &[]);
        for v in ["v0.1.0", "v0.2.0", "v0.3.0"] {
            publisher.publish_files(&core(OPM_CORE), v).unwrap();
        }
        publisher
            .publish_files(&core(OPM_CORE_V1), "v1.0.0")
            .unwrap();
        publisher.publish(&opm("kube"), "v0.2.0").unwrap();
        let mini = rehomed(
            "mini",
            &[
                ("fixtures.test/core@v0", OPM_CORE),
                ("fixtures.test/catalogs/", "opmodel.dev/catalogs/"),
            ],
            &[],
        );
        publisher.publish_files(&mini, "v0.1.0").unwrap();
        for (name, core, pins) in [
            ("gwolder", OPM_CORE, vec![(OPM_CORE, "v0.1.0")]),
            ("gwsame", OPM_CORE, vec![(OPM_CORE, "v0.2.0")]),
            ("gwnewer", OPM_CORE, vec![(OPM_CORE, "v0.3.0")]),
            (
                "gwnext",
                OPM_CORE_V1,
                vec![(OPM_CORE_V1, "v1.0.0"), (OPM_CORE, "v0.2.0")],
            ),
            ("gwkube", OPM_CORE, vec![(KUBE, "v0.2.0")]),
        ] {
            publisher
                .publish_files(&opm_gateway(name, core, &pins), "v0.1.0")
                .unwrap();
        }
    })
    .await
    .unwrap();
    let kernel = Arc::new(PlatformKernel::new(
        Arc::new(r.reg.client_for(PREFIXES, None)),
        Generator::new(OPM_CORE, "v0.2.0", RegistryShape::CatalogEntry),
        cue::Config::default(),
    ));
    let ctx = Arc::new(Context::new(
        r.client.clone(),
        Store::new(),
        r.ctx.layout.clone(),
        kernel.clone(),
        kernel,
        "test",
    ));
    Real { ctx, ..r }
}

fn gw(name: &str) -> String {
    format!("opmodel.dev/catalogs/{name}@v0")
}

fn incompatible(path: &str, needs: &str, resolved: &str, why: &str) -> String {
    let base = path.rsplit_once('@').unwrap().0;
    format!(
        "Claimed catalog requires {path} at \"{needs}\" but the platform resolved \"{resolved}\": \
         {why}. The comparison is conservative: a cue.mod requirement records what the provider \
         was tidied against, not what it uses, so lowering the requirement on {base} is the \
         author's fix."
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_56_a_catalog_requiring_a_newer_or_other_major_opm_core_is_build_incompatible() {
    let r = real_opm().await;
    let api = platforms(&r.client);
    create(&api, plat(&[(OPM_MINI, None)])).await;
    assert_eq!(
        platform::reconcile("cluster", &r.ctx)
            .await
            .unwrap()
            .requeue,
        None
    );
    // What the check compares against: the package's deps (core pinned by the kernel at v0.2.0
    // above mini's v0.1.0 requirement; kube at v0.1.0 through mini).
    let deps = r.ctx.store.generated().unwrap().platform.deps.clone();
    assert_eq!(deps.get(OPM_CORE).map(String::as_str), Some("v0.2.0"));
    assert_eq!(deps.get(KUBE).map(String::as_str), Some("v0.1.0"));
    assert!(!deps.contains_key(OPM_CORE_V1));

    // Providers not Ready: accepted claims stay inactive and hold no contract, so every claim
    // of `expose` is judged on its own requirements.
    for (ns, name) in [
        ("team-a", "gwnewer"),
        ("team-b", "gwnext"),
        ("team-c", "gwolder"),
        ("team-d", "gwsame"),
        ("team-e", "gwkube"),
    ] {
        provider(&r.client, ns, name, false).await;
        claim(&r, ns, name, &gw(name), "0.1.0", &[OPM_EXPOSE]).await;
    }

    // A newer core of the same major, and another major of the core: refused.
    for _ in 0..2 {
        assert_eq!(judge(&r, "team-a.gwnewer").await, Some(THIRTY_MIN));
        assert_eq!(judge(&r, "team-b.gwnext").await, Some(THIRTY_MIN));
    }
    assert_refused(
        &r,
        "team-a.gwnewer",
        "BuildIncompatible",
        &incompatible(
            OPM_CORE,
            "v0.3.0",
            "v0.2.0",
            "the catalog needs a newer version than the platform resolved",
        ),
    )
    .await;
    assert_refused(
        &r,
        "team-b.gwnext",
        "BuildIncompatible",
        &incompatible(
            OPM_CORE_V1,
            "v1.0.0",
            "v0.2.0",
            "the majors differ and are not comparable",
        ),
    )
    .await;

    // An older and an equal core pass; a newer non-OPM requirement (kube v0.2.0) is ignored.
    for (claim, catalog) in [
        ("team-c.gwolder", gw("gwolder")),
        ("team-d.gwsame", gw("gwsame")),
        ("team-e.gwkube", gw("gwkube")),
    ] {
        assert_eq!(judge(&r, claim).await, None, "{claim}");
        assert_eq!(
            verdict(&r, claim).await,
            (
                "True".into(),
                "Accepted".into(),
                format!("Claim accepted for catalog {catalog} at 0.1.0")
            )
        );
        assert!(events(&r.client, claim, "BuildIncompatible")
            .await
            .is_empty());
    }

    // Level-computed: once the platform resolves core v0.3.0 (gwnewer subscribed: the closure
    // takes the highest requirement) the same claim is accepted; the other major still refuses.
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {gw("gwnewer"): {"version": "0.1.0"}}}),
    )
    .await;
    assert_eq!(
        platform::reconcile("cluster", &r.ctx)
            .await
            .unwrap()
            .requeue,
        None
    );
    let deps = &r.ctx.store.generated().unwrap().platform.deps;
    assert_eq!(deps.get(OPM_CORE).map(String::as_str), Some("v0.3.0"));
    assert_eq!(judge(&r, "team-a.gwnewer").await, None);
    assert_eq!(verdict(&r, "team-a.gwnewer").await.1, "Accepted");
    judge(&r, "team-b.gwnext").await;
    assert_eq!(
        verdict(&r, "team-b.gwnext").await,
        (
            "False".into(),
            "BuildIncompatible".into(),
            incompatible(
                OPM_CORE_V1,
                "v1.0.0",
                "v0.3.0",
                "the majors differ and are not comparable",
            )
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_25_59_61_62_a_claim_activates_folds_in_and_is_guarded() {
    let r = real_with(&[(MINI, None)]).await;
    let first = r.ctx.store.identity().unwrap();
    provider(&r.client, "team-a", "gw", false).await;
    claim(&r, "team-a", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    // 59: accepted, provider not Ready → inactive.
    assert_eq!(judge(&r, "team-a.gw").await, None);
    let trs = claims(&r.client);
    let tr = trs.get("team-a.gw").await.unwrap();
    assert_eq!(
        tr.metadata.finalizers.clone().unwrap_or_default(),
        vec!["opmodel.dev/dependents".to_owned()]
    );
    let s = tr.status.unwrap();
    assert!(s.accepted && !s.active);
    assert_eq!(
        condition(&s.conditions, types::ACTIVE).unwrap(),
        (
            "False".into(),
            "ProviderNotReady".into(),
            "Waiting for provider ModuleInstance team-a/gw to report Ready".into()
        )
    );
    // An accepted but inactive claim contributes nothing.
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(r.ctx.store.identity(), Some(first));

    // Provider Ready → active, generation unchanged.
    set_ready(&r.client, "team-a", "gw", true).await;
    judge(&r, "team-a.gw").await;
    let tr = trs.get("team-a.gw").await.unwrap();
    let s = tr.status.unwrap();
    assert!(s.active);
    assert_eq!(s.observed_generation, tr.metadata.generation);
    let active_since = s
        .conditions
        .iter()
        .find(|c| c.type_ == types::ACTIVE)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone(),
                c.last_transition_time.clone(),
            )
        })
        .unwrap();
    assert_eq!(
        (active_since.0.as_str(), active_since.1.as_str()),
        ("True", "ProviderReady")
    );

    // 25: the Platform folds the active claim in at the same generation: a new package
    // identity, gateway imported and enabled, the contract now fulfilled.
    let generation = platforms(&r.client)
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .generation;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    let rec = r.ctx.store.generated().unwrap();
    assert!(rec.identity.has_claims());
    assert_eq!(Some(rec.identity.generation()), generation);
    assert_ne!(rec.identity, first);
    let platform_cue = std::fs::read_to_string(rec.dir.join("platform.cue")).unwrap();
    assert!(
        platform_cue.contains(&format!(
            "\"{GATEWAY}\": {{\n\t\tenable:   true\n\t\tversion:  \"0.1.0\""
        )),
        "{platform_cue}"
    );
    assert!(transformers(&r).iter().any(|t| t == ROUTE_TF));
    let s = status(&r).await;
    let gw = s.registry.iter().find(|p| p.catalog == GATEWAY).unwrap();
    assert_eq!(gw.source, RegistrySource::Registration);
    assert_eq!(
        fulfilled(&r).await.unwrap(),
        (
            "True".into(),
            "ContractsFulfilled".into(),
            fulfilled_message()
        )
    );
    // The claim is re-judged against the package that now contains its own catalog and stays
    // accepted (its own catalog never refuses it).
    judge(&r, "team-a.gw").await;
    assert_eq!(verdict(&r, "team-a.gw").await.1, "Accepted");
    // 59: an outage of the provider does not deactivate (latch), transition time unchanged.
    set_ready(&r.client, "team-a", "gw", false).await;
    judge(&r, "team-a.gw").await;
    let s = trs.get("team-a.gw").await.unwrap().status.unwrap();
    assert!(s.active);
    let after = s
        .conditions
        .iter()
        .find(|c| c.type_ == types::ACTIVE)
        .unwrap();
    assert_eq!(after.last_transition_time, active_since.2);

    // 61: a dependent instance blocks the deletion.
    namespace(&r.client, "apps").await;
    let mis: Api<ModuleInstance> = Api::namespaced(r.client.clone(), "apps");
    create(&mis, ModuleInstance::test().named("apps", "consumer")).await;
    patch_status(
        &mis,
        "consumer",
        serde_json::json!({"requiredContracts": [EXPOSE]}),
    )
    .await;
    trs.delete("team-a.gw", &DeleteParams::default())
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(judge(&r, "team-a.gw").await, Some(THIRTY_MIN));
    }
    let s = trs.get("team-a.gw").await.unwrap().status.unwrap();
    assert!(s.accepted && s.active);
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "False".into(),
            "DependentsRemain".into(),
            "Deletion blocked: 1 module instance(s) still demand contracts this claim provides \
             (apps/consumer); remove them before removing the provider"
                .into()
        )
    );
    // 64: one Warning across the repeats.
    assert_eq!(
        events(&r.client, "team-a.gw", "DependentsRemain")
            .await
            .len(),
        1
    );
    // 62: while blocked the claim still contributes its catalog.
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(r.ctx.store.identity(), Some(rec.identity));
    assert!(transformers(&r).iter().any(|t| t == ROUTE_TF));
    // The dependent goes: the guard releases, the claim is gone, the platform drops gateway.
    mis.delete("consumer", &DeleteParams::default())
        .await
        .unwrap();
    judge(&r, "team-a.gw").await;
    assert!(trs.get_opt("team-a.gw").await.unwrap().is_none());
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    assert_eq!(r.ctx.store.identity(), Some(first));
    assert!(!transformers(&r).iter().any(|t| t == ROUTE_TF));
    assert_eq!(fulfilled(&r).await.unwrap().1, "UnfulfilledContracts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_25_57_58_60_64_one_provider_per_catalog_and_per_contract() {
    // 58: an enabled subscription already provides `expose`.
    let r = real_with(&[(MINI, None), (GATEWAY, None)]).await;
    provider(&r.client, "team-a", "gw2", false).await;
    claim(&r, "team-a", "gw2", GATEWAY2, "0.1.0", &[EXPOSE]).await;
    for _ in 0..2 {
        assert_eq!(judge(&r, "team-a.gw2").await, Some(THIRTY_MIN));
    }
    let subscribed = format!(
        "Contract {EXPOSE} is already provided by subscribed catalog {GATEWAY}; a contract has \
         exactly one provider, so disable that subscription or withdraw this claim"
    );
    assert_eq!(
        verdict(&r, "team-a.gw2").await,
        ("False".into(), "ContractSubscribed".into(), subscribed)
    );
    // 64: the repeated refusal emitted one Warning.
    assert_eq!(
        events(&r.client, "team-a.gw2", "ContractSubscribed")
            .await
            .len(),
        1
    );
    // 25: the subscription disabled wins over a claim of the same catalog; the disabled gateway
    // provides nothing, so the gateway2 claim is accepted (provider not Ready yet: inactive).
    let api = platforms(&r.client);
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({"registry": {GATEWAY: {"enable": false, "version": "0.1.0"}}}),
    )
    .await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    judge(&r, "team-a.gw2").await;
    assert_eq!(verdict(&r, "team-a.gw2").await.1, "Accepted");

    // 58: an accepted-but-inactive holder does not block a claim of gateway (same contract).
    provider(&r.client, "team-b", "gw", true).await;
    claim(&r, "team-b", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    judge(&r, "team-b.gw").await;
    assert_eq!(verdict(&r, "team-b.gw").await.1, "Accepted");
    assert!(
        claims(&r.client)
            .get("team-b.gw")
            .await
            .unwrap()
            .status
            .unwrap()
            .active
    );
    // 25: the claim of gateway is active but the disabled subscription wins.
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    let s = status(&r).await;
    let gw = s.registry.iter().find(|p| p.catalog == GATEWAY).unwrap();
    assert_eq!(
        (gw.source, gw.enabled),
        (RegistrySource::Subscription, false)
    );
    assert!(!transformers(&r).iter().any(|t| t == ROUTE_TF));
    // 58 + 60: re-judged, the inactive gateway2 claim meets the active holder of `expose` and is
    // refused; not being active, it loses its Active condition.
    judge(&r, "team-a.gw2").await;
    assert_eq!(
        verdict(&r, "team-a.gw2").await,
        (
            "False".into(),
            "ContractClaimed".into(),
            format!(
                "Contract {EXPOSE} is already provided by active claim team-b.gw; a contract \
                 has exactly one provider, so remove one of the two providers"
            )
        )
    );
    let s = claims(&r.client)
        .get("team-a.gw2")
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!s.accepted);
    assert!(condition(&s.conditions, types::ACTIVE).is_none());

    // 57: a second claim of gateway: the older (tie: lower name) holds it.
    provider(&r.client, "team-c", "gw", true).await;
    claim(&r, "team-c", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    judge(&r, "team-c.gw").await;
    assert_eq!(
        verdict(&r, "team-c.gw").await,
        (
            "False".into(),
            "DuplicateClaim".into(),
            format!(
                "Claim team-b.gw already holds provider catalog {GATEWAY}; remove one of the two \
                 claims"
            )
        )
    );
}

/// A context over a fresh kernel (no in-process memo) on `reg`, sharing `r`'s store and layout:
/// the next acquisitions really reach the registry.
fn fresh_context(r: &Real) -> Arc<Context> {
    let kernel = Arc::new(PlatformKernel::new(
        Arc::new(r.reg.client(None)),
        Generator::new(CORE, "v0.1.0", RegistryShape::CatalogEntry),
        cue::Config::default(),
    ));
    Arc::new(Context::new(
        r.client.clone(),
        r.ctx.store.clone(),
        r.ctx.layout.clone(),
        kernel.clone(),
        kernel,
        "test",
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_registry_holds_an_accepted_verdict_and_refuses_a_new_claim() {
    let mut r = real_with(&[(MINI, None)]).await;
    provider(&r.client, "team-a", "gw", true).await;
    claim(&r, "team-a", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    judge(&r, "team-a.gw").await;
    let trs = claims(&r.client);
    let accepted = trs.get("team-a.gw").await.unwrap();
    assert!(accepted.status.as_ref().unwrap().active);
    provider(&r.client, "team-b", "gw2", true).await;
    claim(&r, "team-b", "gw2", GATEWAY2, "0.1.0", &[EXPOSE]).await;

    r.reg.stop();
    let ctx = fresh_context(&r);
    // The accepted claim keeps its verdict: only Reconciling records the failure.
    for _ in 0..2 {
        let out = registration::reconcile("team-a.gw", &ctx).await.unwrap();
        assert_eq!(
            out.requeue,
            Some(Duration::from_secs(5)),
            "hold-age backoff"
        );
    }
    let tr = trs.get("team-a.gw").await.unwrap();
    let s = tr.status.unwrap();
    assert!(s.accepted && s.active);
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "True".into(),
            "Accepted".into(),
            format!("Claim accepted for catalog {GATEWAY} at 0.1.0")
        )
    );
    let (st, reason, msg) = condition(&s.conditions, types::RECONCILING).unwrap();
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "CatalogUnresolved")
    );
    assert!(
        msg.starts_with(&format!(
            "Claimed catalog {GATEWAY} at 0.1.0 could not be resolved: "
        )) && msg.ends_with("; the accepted verdict is kept until the registry answers"),
        "{msg}"
    );
    assert_eq!(
        tr.metadata.finalizers.unwrap_or_default(),
        vec!["opmodel.dev/dependents".to_owned()]
    );
    assert_eq!(
        events(&r.client, "team-a.gw", "CatalogUnresolved")
            .await
            .len(),
        1,
        "one Warning when the hold starts"
    );
    // It still contributes its catalog (the platform keeps serving the held package).
    assert!(platform::contribution(&trs.get("team-a.gw").await.unwrap()).is_some());

    // A claim never accepted is refused as in the seed.
    assert_eq!(
        registration::reconcile("team-b.gw2", &ctx)
            .await
            .unwrap()
            .requeue,
        Some(THIRTY_MIN)
    );
    let (st, reason, _) = verdict(&r, "team-b.gw2").await;
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "CatalogUnresolved")
    );

    // An edited accepted claim (new generation) is judged afresh: refused.
    patch_spec(
        &trs,
        "team-a.gw",
        serde_json::json!({"provides": [EXPOSE, CONTAINER]}),
    )
    .await;
    registration::reconcile("team-a.gw", &ctx).await.unwrap();
    let s = trs.get("team-a.gw").await.unwrap().status.unwrap();
    assert!(!s.accepted && s.active, "refused; the latch keeps active");
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap().1,
        "CatalogUnresolved"
    );
}

// ---------------------------------------------------------------------------------------------
// The manager on the real kernel: restart recovery (§4.5) and the §5.3 hazard.

/// The real kernel behind a gate: builds wait (at most 30 s) until the test opens it.
struct GatedKernel {
    inner: Arc<PlatformKernel>,
    closed: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
    builds: std::sync::atomic::AtomicU32,
}

impl GatedKernel {
    fn open(&self) {
        *self.closed.lock().unwrap() = false;
        self.opened.notify_all();
    }
}

impl opm_operator::kernel::PlatformBuilder for GatedKernel {
    fn generate(
        &self,
        input: &opm_operator::kernel::PlatformInput,
    ) -> Result<Vec<(String, Vec<u8>)>, opm_operator::kernel::KernelError> {
        self.inner.generate(input)
    }

    fn build(
        &self,
        dir: &std::path::Path,
    ) -> Result<opm_operator::kernel::BuiltPlatform, opm_operator::kernel::KernelError> {
        {
            let closed = self.closed.lock().unwrap();
            let _unused = self
                .opened
                .wait_timeout_while(closed, Duration::from_secs(30), |c| *c)
                .unwrap();
        }
        self.builds
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.build(dir)
    }
}

struct Running {
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Runs the controllers on `ctx` as the only replica (no election).
fn run_manager(ctx: Arc<Context>) -> Running {
    let (shutdown, rx) = tokio::sync::watch::channel(false);
    let (role, _) = tokio::sync::watch::channel(opm_operator::controller::manager::Role::Follower);
    let task = tokio::spawn(opm_operator::controller::manager::run(ctx, None, rx, role));
    Running { shutdown, task }
}

impl Running {
    async fn stop(self) {
        self.shutdown.send_replace(true);
        self.task.await.unwrap();
    }
}

async fn claim_ready(r: &Real, name: &str) -> Option<(String, String)> {
    let tr = claims(&r.client).get_opt(name).await.ok()??;
    let s = tr.status?;
    condition(&s.conditions, types::READY).map(|c| (c.1, s.accepted.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_recovery_claims_defer_then_recover_when_the_real_package_is_recorded() {
    // Before the restart: a package with an active gateway claim folded in.
    let r = real_with(&[(MINI, None)]).await;
    provider(&r.client, "team-a", "gw", true).await;
    claim(&r, "team-a", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    judge(&r, "team-a.gw").await;
    platform::reconcile("cluster", &r.ctx).await.unwrap();
    let before = r.ctx.store.generated().unwrap();
    assert!(before.identity.has_claims());

    // The restart: a fresh process state over the same, non-empty --platform-dir (reset at
    // boot, as `serve` does), a fresh kernel, and builds held until the claim was judged.
    let layout = Arc::new(Layout::new(r.ctx.layout.root()).unwrap());
    layout.reset().unwrap();
    assert!(layout.packages().unwrap().is_empty());
    let gated = Arc::new(GatedKernel {
        inner: Arc::new(PlatformKernel::new(
            Arc::new(r.reg.client(None)),
            Generator::new(CORE, "v0.1.0", RegistryShape::CatalogEntry),
            cue::Config::default(),
        )),
        closed: std::sync::Mutex::new(true),
        opened: std::sync::Condvar::new(),
        builds: Default::default(),
    });
    let acquirer = gated.inner.clone();
    let ctx = Arc::new(Context::new(
        r.client.clone(),
        Store::new(),
        layout.clone(),
        gated.clone(),
        acquirer,
        "restarted",
    ));
    let run = run_manager(ctx.clone());
    // The store is empty: the claim defers with PlatformNotReady, `accepted` left true.
    assert!(
        eventually(20, || async {
            claim_ready(&r, "team-a.gw").await == Some(("PlatformNotReady".into(), "true".into()))
        })
        .await,
        "{:?}",
        claim_ready(&r, "team-a.gw").await
    );
    let s = claims(&r.client)
        .get("team-a.gw")
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(s.active, "the latch survives the restart");
    // The build completes: the claim is re-judged at once, not after the 30-minute requeue.
    let opened = std::time::Instant::now();
    gated.open();
    assert!(
        eventually(20, || async {
            claim_ready(&r, "team-a.gw").await == Some(("Accepted".into(), "true".into()))
        })
        .await,
        "{:?}",
        claim_ready(&r, "team-a.gw").await
    );
    eprintln!(
        "claim recovered {:?} after the build was released",
        opened.elapsed()
    );
    // Regenerated under the same identity (same generation, same active claims).
    let after = ctx.store.generated().unwrap();
    assert_eq!(after.identity, before.identity);
    assert_eq!(after.dir, before.dir);
    assert!(after.dir.join("platform.cue").is_file());
    assert_eq!(after.platform.transformers, before.platform.transformers);
    assert_eq!(layout.packages().unwrap(), vec![before.identity]);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_5_3_a_leased_real_package_stays_complete_while_a_claim_activates() {
    let r = real().await;
    create(&platforms(&r.client), plat(&[(MINI, None)])).await;
    let run = run_manager(r.ctx.clone());
    assert!(
        eventually(30, || async { r.ctx.store.generated().is_some() }).await,
        "the manager records the package"
    );
    // A render leases the unclaimed package.
    let (leased, mut lease) = r.ctx.store.lease().unwrap();
    assert!(!leased.identity.has_claims());
    let files = |dir: &std::path::Path| {
        (
            std::fs::read(dir.join("platform.cue")).unwrap(),
            std::fs::read(dir.join("cue.mod/module.cue")).unwrap(),
        )
    };
    let leased_bytes = files(&leased.dir);
    let generation = platforms(&r.client)
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();

    // A provider claim activates (judged by the running TR controller): the Platform regenerates
    // at the same generation under a new identity.
    provider(&r.client, "team-a", "gw", true).await;
    claim(&r, "team-a", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    assert!(
        eventually(30, || async {
            r.ctx.store.identity().is_some_and(|id| id.has_claims())
        })
        .await,
        "claim folded in: {:?}",
        claim_ready(&r, "team-a.gw").await
    );
    let current = r.ctx.store.generated().unwrap();
    assert_eq!(current.identity.generation(), generation);
    assert_ne!(current.dir, leased.dir);
    // The leased directory is complete and unchanged while the lease is held.
    assert_eq!(files(&leased.dir), leased_bytes);
    let mut kept = r.ctx.layout.packages().unwrap();
    kept.sort();
    let mut want = vec![leased.identity, current.identity];
    want.sort();
    assert_eq!(kept, want);

    // Released: the next build prunes it.
    lease.release();
    patch_spec(
        &platforms(&r.client),
        "cluster",
        serde_json::json!({"type": "next"}),
    )
    .await;
    assert!(
        eventually(30, || async { !leased.dir.exists() }).await,
        "{:?}",
        r.ctx.layout.packages()
    );
    // The current package remains (a package a claim judgement leased during that build may
    // remain too, until the build after its release).
    assert!(r
        .ctx
        .layout
        .packages()
        .unwrap()
        .contains(&r.ctx.store.identity().unwrap()));
    run.stop().await;
}

/// The real acquirer, counting its calls.
struct CountingAcquirer {
    inner: Arc<PlatformKernel>,
    calls: std::sync::atomic::AtomicU32,
}

impl opm_operator::kernel::CatalogAcquirer for CountingAcquirer {
    fn acquire(
        &self,
        path: &str,
        version: &str,
    ) -> Result<opm_operator::kernel::CatalogInfo, opm_operator::kernel::AcquireError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.acquire(path, version)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_25_59_63_watches_drive_activation_and_folding_on_the_real_kernel() {
    let r = real().await;
    let kernel = Arc::new(PlatformKernel::new(
        Arc::new(r.reg.client(None)),
        Generator::new(CORE, "v0.1.0", RegistryShape::CatalogEntry),
        cue::Config::default(),
    ));
    let counting = Arc::new(CountingAcquirer {
        inner: kernel.clone(),
        calls: Default::default(),
    });
    let ctx = Arc::new(Context::new(
        r.client.clone(),
        Store::new(),
        r.ctx.layout.clone(),
        kernel,
        counting.clone(),
        "watches",
    ));
    create(&platforms(&r.client), plat(&[(MINI, None)])).await;
    provider(&r.client, "team-a", "gw", false).await;
    claim(&r, "team-a", "gw", GATEWAY, "0.1.0", &[EXPOSE]).await;
    let run = run_manager(ctx.clone());
    // Judged once the package is recorded: accepted, inactive (provider not Ready).
    assert!(
        eventually(30, || async {
            claims(&r.client)
                .get("team-a.gw")
                .await
                .ok()
                .and_then(|t| t.status)
                .is_some_and(|s| {
                    s.accepted
                        && condition(&s.conditions, types::ACTIVE)
                            .is_some_and(|c| c.1 == "ProviderNotReady")
                })
        })
        .await,
        "{:?}",
        claim_ready(&r, "team-a.gw").await
    );
    // 63: a history-only update of the provider wakes nothing (no new acquisition).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = counting.calls.load(std::sync::atomic::Ordering::SeqCst);
    let mis: Api<ModuleInstance> = Api::namespaced(r.client.clone(), "team-a");
    let patched = patch_status(
        &mis,
        "gw",
        serde_json::json!({"lastAttemptedAction": "apply"}),
    )
    .await;
    assert_eq!(
        patched
            .status
            .unwrap()
            .reconcile
            .last_attempted_action
            .as_deref(),
        Some("apply")
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        counting.calls.load(std::sync::atomic::Ordering::SeqCst),
        settled,
        "history-only update dropped"
    );
    // 59 + 63 + 25: the provider turns Ready → the claim is re-judged and activates → the
    // Platform folds gateway in, and the contract is fulfilled; all through the watches.
    set_ready(&r.client, "team-a", "gw", true).await;
    assert!(
        eventually(30, || async {
            ctx.store.identity().is_some_and(|id| id.has_claims())
                && ctx
                    .store
                    .generated()
                    .is_some_and(|g| g.platform.transformers.iter().any(|t| t == ROUTE_TF))
        })
        .await,
        "{:?}",
        claim_ready(&r, "team-a.gw").await
    );
    assert!(counting.calls.load(std::sync::atomic::Ordering::SeqCst) > settled);
    assert!(
        eventually(10, || async {
            fulfilled(&r)
                .await
                .is_some_and(|f| f.1 == "ContractsFulfilled")
        })
        .await
    );
    run.stop().await;
}
