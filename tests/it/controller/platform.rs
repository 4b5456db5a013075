//! Platform reconciler scenarios 11–26 and 64 (docs/design/operator.md §8) against kube-emu with a fake
//! `PlatformBuilder`. What needs the real kernel and registry (the bytes of `cue.mod/module.cue`,
//! closure errors naming the real pin, the `#registry."<path>".version` tripwire) is asserted here
//! only as far as the reconciler carries it: the kernel's error text reaches the condition behind
//! the prefix docs/design/operator.md §3.5 names.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crds::conditions::{reasons, types};
use crds::platform::{Platform, RegistrySource, SkewPolicy as CrdSkew};
use crds::transformer_registration::TransformerRegistration;
use kube::api::DeleteParams;
use opm_operator::controller::platform::reconcile;
use opm_operator::kernel::SkewPolicy;
use opm_operator::kernel::{ComparablePair, ErrorClass, KernelError, PlatformEntry};
use opm_operator::platform::PackageIdentity;

use super::common::*;

const THIRTY_MIN: Duration = Duration::from_secs(30 * 60);

fn plat() -> Platform {
    Platform::test()
        .without_catalogs()
        .with_catalog("x.test/catalogs/mini@v0", "0.1.0", None)
        .with_catalog("x.test/catalogs/off@v0", "0.2.0", Some(false))
}

async fn status(env: &Env) -> crds::platform::PlatformStatus {
    platforms(&env.client)
        .get("cluster")
        .await
        .unwrap()
        .status
        .unwrap()
}

#[tokio::test]
async fn scenario_11_other_names_are_ignored() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let held = env.ctx.store.identity();
    let r = reconcile("not-cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, None);
    assert_eq!(env.ctx.store.identity(), held);
    assert!(held.is_some());
}

#[tokio::test]
async fn scenario_12_and_26_no_platform_clears_the_store() {
    let env = env().await;
    let api = platforms(&env.client);
    create(&api, plat()).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let dir = env.ctx.store.generated().unwrap().dir.clone();
    api.delete("cluster", &DeleteParams::default())
        .await
        .unwrap();
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, None);
    assert!(env.ctx.store.generated().is_none());
    assert_eq!(env.ctx.store.generation(), 0);
    // Nothing on disk is torn down by the deletion (frozen, pruned by the next build or boot).
    assert!(dir.is_dir());
}

#[tokio::test]
async fn scenario_13_generated() {
    let env = env().await;
    let created = create(&platforms(&env.client), plat()).await;
    let generation = created.metadata.generation.unwrap();
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, None);
    assert_eq!(r.reason, Some(reasons::GENERATED));
    let s = status(&env).await;
    assert_eq!(s.observed_generation, Some(generation));
    assert_eq!(
        s.operator_version.as_deref(),
        Some(concat!("v", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(
        condition(&s.conditions, types::READY),
        Some((
            "True".into(),
            "Generated".into(),
            format!("Platform module generated and built for generation {generation}")
        ))
    );
    assert!(condition(&s.conditions, types::STALLED).is_none());
    assert!(condition(&s.conditions, types::RECONCILING).is_none());
    let rec = env.ctx.store.generated().unwrap();
    let id = PackageIdentity::unclaimed(generation).unwrap();
    assert_eq!(rec.identity, id);
    assert_eq!(rec.dir, env.ctx.layout.dir(&id));
    assert_eq!(rec.skew, SkewPolicy::Warn);
    assert_eq!(s.package_identity.unwrap().generation, generation);
    // The input: both catalogs pinned, the disabled one with enable=false, sorted by path.
    let input = env.builder.last_input();
    assert_eq!(input.platform_type, "kubernetes");
    assert_eq!(
        input.entries,
        vec![
            PlatformEntry {
                path: "x.test/catalogs/mini@v0".into(),
                version: "0.1.0".into(),
                enable: true
            },
            PlatformEntry {
                path: "x.test/catalogs/off@v0".into(),
                version: "0.2.0".into(),
                enable: false
            },
        ]
    );
    let files = std::fs::read_to_string(rec.dir.join("platform.cue")).unwrap();
    assert!(files.contains("enable: false"), "{files}");
    assert_eq!(s.registry.len(), 2);
    assert!(s
        .registry
        .iter()
        .all(|p| p.source == RegistrySource::Subscription));
    assert_eq!(events(&env.client, "cluster", "Generated").await.len(), 1);
}

#[tokio::test]
async fn scenario_14_only_the_newest_generation_remains() {
    let env = env().await;
    let api = platforms(&env.client);
    create(&api, plat()).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    for t in ["a", "b", "c"] {
        patch_spec(&api, "cluster", serde_json::json!({ "type": t })).await;
        reconcile("cluster", &env.ctx).await.unwrap();
    }
    let gen = api
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .generation
        .unwrap();
    assert_eq!(env.ctx.layout.generations().unwrap(), vec![gen]);
}

#[tokio::test]
async fn scenario_15_leased_packages_survive_until_released() {
    let env = env().await;
    let api = platforms(&env.client);
    create(&api, plat()).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let g1 = env.ctx.store.generation();
    let (_rec, mut lease) = env.ctx.store.lease().unwrap();
    patch_spec(&api, "cluster", serde_json::json!({ "type": "two" })).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let g2 = env.ctx.store.generation();
    assert_eq!(env.ctx.layout.generations().unwrap(), vec![g1, g2]);
    let leased: Vec<i64> = env
        .ctx
        .store
        .leased()
        .iter()
        .map(|l| l.identity.generation())
        .collect();
    assert_eq!(leased, vec![g1]);
    lease.release();
    patch_spec(&api, "cluster", serde_json::json!({ "type": "three" })).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let g3 = env.ctx.store.generation();
    assert_eq!(env.ctx.layout.generations().unwrap(), vec![g3]);
}

#[tokio::test]
async fn scenario_16_a_missing_pin_keeps_the_last_good_package() {
    let env = env().await;
    let api = platforms(&env.client);
    create(&api, plat()).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let good = env.ctx.store.generated().unwrap();
    *env.builder.generate_error.lock().unwrap() = Some(KernelError::new(
        ErrorClass::Resolution,
        "resolving platform dependencies: x.test/catalogs/ghost@v9: version v9.9.9 does not exist",
    ));
    patch_spec(
        &api,
        "cluster",
        serde_json::json!({ "registry": { "x.test/catalogs/ghost@v9": { "version": "9.9.9" } } }),
    )
    .await;
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    let s = status(&env).await;
    let (st, reason, msg) = condition(&s.conditions, types::READY).unwrap();
    assert_eq!((st.as_str(), reason.as_str()), ("False", "BuildFailed"));
    assert_eq!(
        msg,
        "resolving platform dependencies: x.test/catalogs/ghost@v9: version v9.9.9 does not exist"
    );
    assert_eq!(
        condition(&s.conditions, types::STALLED).unwrap().1,
        "BuildFailed"
    );
    assert_eq!(env.ctx.store.generated().unwrap().identity, good.identity);
    assert_eq!(
        env.ctx.layout.generations().unwrap(),
        vec![good.identity.generation()],
        "no directory written for the failed generation"
    );
}

#[tokio::test]
async fn scenario_17_a_build_conflict_records_nothing() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    *env.builder.build_error.lock().unwrap() = Some(KernelError::new(
        ErrorClass::Other,
        "building platform module: #registry.\"x.test/catalogs/mini@v0\".version: conflicting values \"0.1.0\" and \"0.1.1\"",
    ));
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    let (_, reason, msg) = condition(&status(&env).await.conditions, types::READY).unwrap();
    assert_eq!(reason, "BuildFailed");
    assert!(
        msg.starts_with("building platform module: #registry.\"x.test/catalogs/mini@v0\".version"),
        "{msg}"
    );
    assert!(env.ctx.store.generated().is_none());
}

fn over_subscribed() -> opm_operator::kernel::ContractInventory {
    let mut inv = opm_operator::kernel::ContractInventory {
        routable: false,
        discriminated: true,
        fulfilled: true,
        ..Default::default()
    };
    inv.over_subscribed = vec!["x.test/contracts/backup@v1".into()];
    inv.defined_by.insert(
        "x.test/contracts/backup@v1".into(),
        "x.test/catalogs/mini@v0".into(),
    );
    inv.provided_by.insert(
        "x.test/contracts/backup@v1".into(),
        vec!["x.test/catalogs/b@v0".into(), "x.test/catalogs/a@v0".into()],
    );
    inv
}

#[tokio::test]
async fn scenarios_19_20_21_the_inventory_gate_and_recovery() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    *env.builder.contracts.lock().unwrap() = over_subscribed();
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    let (_, reason, msg) = condition(&status(&env).await.conditions, types::READY).unwrap();
    assert_eq!(reason, "OverSubscribedContracts");
    assert!(
        msg.ends_with(
            "\n  x.test/contracts/backup@v1 (defined by x.test/catalogs/mini@v0) provided by \
             x.test/catalogs/a@v0, x.test/catalogs/b@v0"
        ),
        "{msg}"
    );
    assert!(env.ctx.store.generated().is_none());

    // Not discriminated only.
    let pair = ComparablePair {
        broader: "x.test/t/broad".into(),
        narrower: "x.test/t/narrow".into(),
        contracts: vec!["x.test/contracts/backup@v1".into()],
    };
    {
        let mut inv = env.builder.contracts.lock().unwrap();
        inv.routable = true;
        inv.discriminated = false;
        inv.comparable = vec![pair];
    }
    reconcile("cluster", &env.ctx).await.unwrap();
    let (_, reason, msg) = condition(&status(&env).await.conditions, types::READY).unwrap();
    assert_eq!(reason, "ComparablePredicates");
    assert!(msg.contains("\n  x.test/t/broad (broader) and x.test/t/narrow (narrower) over x.test/contracts/backup@v1"), "{msg}");

    // Both: OverSubscribedContracts carrying both findings.
    env.builder.contracts.lock().unwrap().routable = false;
    reconcile("cluster", &env.ctx).await.unwrap();
    let (_, reason, msg) = condition(&status(&env).await.conditions, types::READY).unwrap();
    assert_eq!(reason, "OverSubscribedContracts");
    assert!(
        msg.contains("platform is not routable")
            && msg.contains("\n\nplatform is not discriminated"),
        "{msg}"
    );

    // 21: the tuple is fixed.
    {
        let mut inv = env.builder.contracts.lock().unwrap();
        inv.routable = true;
        inv.discriminated = true;
    }
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, None);
    let s = status(&env).await;
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap().1,
        "Generated"
    );
    assert!(condition(&s.conditions, types::STALLED).is_none());
    assert!(env.ctx.store.generated().is_some());
}

#[tokio::test]
async fn scenario_22_contracts_fulfilled_describes_the_last_good_package() {
    let env = env().await;
    let api = platforms(&env.client);
    create(&api, plat()).await;
    {
        let mut inv = env.builder.contracts.lock().unwrap();
        inv.defined_by
            .insert("x.test/c/a@v1".into(), "x.test/catalogs/mini@v0".into());
        inv.fulfilled = false;
        inv.unfulfilled = vec!["x.test/c/a@v1".into()];
    }
    reconcile("cluster", &env.ctx).await.unwrap();
    let s = status(&env).await;
    let (st, reason, msg) = condition(&s.conditions, types::CONTRACTS_FULFILLED).unwrap();
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "UnfulfilledContracts")
    );
    assert!(
        msg.starts_with("1 provider-fulfilled contract is defined by an enabled catalog"),
        "{msg}"
    );
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap().0,
        "True",
        "never moves Ready"
    );
    // A later failure leaves it unchanged.
    *env.builder.build_error.lock().unwrap() = Some(KernelError::new(ErrorClass::Other, "boom"));
    patch_spec(&api, "cluster", serde_json::json!({ "type": "other" })).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let s2 = status(&env).await;
    assert_eq!(
        condition(&s2.conditions, types::CONTRACTS_FULFILLED),
        Some((st, reason, msg))
    );
    // No contract defined.
    *env.builder.build_error.lock().unwrap() = None;
    *env.builder.contracts.lock().unwrap() = opm_operator::kernel::ContractInventory {
        routable: true,
        discriminated: true,
        fulfilled: true,
        ..Default::default()
    };
    reconcile("cluster", &env.ctx).await.unwrap();
    let s3 = status(&env).await;
    assert_eq!(
        condition(&s3.conditions, types::CONTRACTS_FULFILLED),
        Some((
            "True".into(),
            "NoContractsDefined".into(),
            "the enabled catalogs define no contract, so nothing was verified".into()
        ))
    );
}

#[tokio::test]
async fn scenario_23_network_failures_retry_after_a_minute() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    *env.builder.generate_error.lock().unwrap() = Some(KernelError::new(
        ErrorClass::TransientPull,
        "resolving platform dependencies: x.test/catalogs/mini@v0 at v0.1.0: dial tcp 127.0.0.1:1: connection refused",
    ));
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(Duration::from_secs(60)));
    *env.builder.generate_error.lock().unwrap() = Some(KernelError::new(
        ErrorClass::Other,
        "generating platform module: generation failed",
    ));
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    let (_, reason, msg) = condition(&status(&env).await.conditions, types::READY).unwrap();
    assert_eq!(
        (reason.as_str(), msg.as_str()),
        (
            "GenerateFailed",
            "generating platform module: generation failed"
        )
    );
}

/// A reconcile request (`reconcile.fluxcd.io/requestedAt`) is recorded whatever the end: a
/// failed build (which otherwise waits 30 minutes) and a success each record the value handled.
#[tokio::test]
async fn a_reconcile_request_is_recorded_on_failure_and_success() {
    let env = env().await;
    let mut p = plat();
    p.metadata.annotations = Some(
        [(
            crds::RECONCILE_REQUEST_ANNOTATION.to_owned(),
            "1".to_owned(),
        )]
        .into_iter()
        .collect(),
    );
    create(&platforms(&env.client), p).await;
    *env.builder.generate_error.lock().unwrap() = Some(KernelError::new(
        ErrorClass::Other,
        "generating platform module: generation failed",
    ));
    reconcile("cluster", &env.ctx).await.unwrap();
    let s = status(&env).await;
    assert_eq!(s.last_handled_reconcile_at.as_deref(), Some("1"));
    assert!(condition(&s.conditions, types::READY).is_some_and(|c| c.0 == "False"));
    *env.builder.generate_error.lock().unwrap() = None;
    patch_meta(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"annotations": {crds::RECONCILE_REQUEST_ANNOTATION: "2"}}),
    )
    .await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let s = status(&env).await;
    assert_eq!(s.last_handled_reconcile_at.as_deref(), Some("2"));
    assert!(condition(&s.conditions, types::READY).is_some_and(|c| c.0 == "True"));
}

#[tokio::test]
async fn scenario_24_skew_policy() {
    for (policy, want) in [
        (None, SkewPolicy::Warn),
        (Some(CrdSkew::Warn), SkewPolicy::Warn),
        (Some(CrdSkew::Refuse), SkewPolicy::Refuse),
    ] {
        let env = env().await;
        let mut p = plat();
        p.spec.skew_policy = policy;
        create(&platforms(&env.client), p).await;
        reconcile("cluster", &env.ctx).await.unwrap();
        assert_eq!(env.ctx.store.generated().unwrap().skew, want, "{policy:?}");
    }
}

#[tokio::test]
async fn scenario_25_active_claims_join_the_package_and_subscriptions_win() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    let trs = claims(&env.client);
    for tr in [
        TransformerRegistration::for_provider("team-a", "k8up", "x.test/catalogs/k8up@v1", "1.0.0"),
        TransformerRegistration::for_provider("team-b", "off", "x.test/catalogs/off@v0", "0.9.0"),
        TransformerRegistration::for_provider("team-c", "idle", "x.test/catalogs/idle@v0", "0.1.0"),
    ] {
        let name = tr.metadata.name.clone().unwrap();
        let active = !name.starts_with("team-c");
        create(&trs, tr).await;
        patch_status(
            &trs,
            &name,
            serde_json::json!({"accepted": true, "active": active}),
        )
        .await;
    }
    reconcile("cluster", &env.ctx).await.unwrap();
    let input = env.builder.last_input();
    let paths: Vec<(&str, &str, bool)> = input
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.version.as_str(), e.enable))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("x.test/catalogs/k8up@v1", "1.0.0", true),
            ("x.test/catalogs/mini@v0", "0.1.0", true),
            ("x.test/catalogs/off@v0", "0.2.0", false),
        ]
    );
    let rec = env.ctx.store.generated().unwrap();
    assert!(rec.identity.has_claims());
    let s = status(&env).await;
    let k8up = s
        .registry
        .iter()
        .find(|p| p.catalog == "x.test/catalogs/k8up@v1")
        .unwrap();
    assert_eq!(k8up.source, RegistrySource::Registration);
}

#[tokio::test]
async fn scenario_64_a_repeated_failure_emits_one_warning() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    *env.builder.build_error.lock().unwrap() = Some(KernelError::new(ErrorClass::Other, "boom"));
    for _ in 0..3 {
        reconcile("cluster", &env.ctx).await.unwrap();
    }
    assert_eq!(events(&env.client, "cluster", "BuildFailed").await.len(), 1);
    *env.builder.build_error.lock().unwrap() =
        Some(KernelError::new(ErrorClass::Other, "boom again"));
    reconcile("cluster", &env.ctx).await.unwrap();
    let evs = events(&env.client, "cluster", "BuildFailed").await;
    assert_eq!(evs.len(), 2, "a changed message emits again");
    assert!(evs
        .iter()
        .all(|e| e.action.as_deref() == Some("Generate") && e.type_.as_deref() == Some("Warning")));
}

#[tokio::test]
async fn skip_keyed_on_identity_rebuilds_nothing_and_writes_nothing() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    reconcile("cluster", &env.ctx).await.unwrap();
    let rv = platforms(&env.client)
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .resource_version;
    let r = reconcile("cluster", &env.ctx).await.unwrap();
    assert_eq!(r.reason, Some(reasons::GENERATED));
    assert_eq!(
        *env.builder.builds.lock().unwrap(),
        1,
        "the held package is reused"
    );
    let rv2 = platforms(&env.client)
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .resource_version;
    assert_eq!(rv, rv2, "an unchanged status is not written");
}

#[tokio::test]
async fn the_status_patcher_never_overwrites_newer_state() {
    use opm_operator::controller::runtime::{Error, Patcher};
    let env = env().await;
    let api = platforms(&env.client);
    let read = create(&api, plat()).await;
    let mut patcher = Patcher::new(api.clone(), &read, "Platform cluster").unwrap();
    // A concurrent writer changes the status after our read.
    patch_status(
        &api,
        "cluster",
        serde_json::json!({"operatorVersion": "v9"}),
    )
    .await;
    let mut mine = read.clone();
    mine.status = Some(crds::platform::PlatformStatus {
        operator_version: Some("v1".into()),
        ..Default::default()
    });
    let err = patcher.patch_status(&mine).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    let now = api.get("cluster").await.unwrap();
    assert_eq!(
        now.status.as_ref().unwrap().operator_version.as_deref(),
        Some("v9")
    );
    // From a fresh read: an unchanged status writes nothing, a change writes only the diff.
    let mut p2 = Patcher::new(api.clone(), &now, "Platform cluster").unwrap();
    assert!(!p2.patch_status(&now).await.unwrap());
    let mut next = now.clone();
    next.status.as_mut().unwrap().observed_generation = Some(1);
    assert!(p2.patch_status(&next).await.unwrap());
    let after = api.get("cluster").await.unwrap().status.unwrap();
    assert_eq!(
        (after.observed_generation, after.operator_version.as_deref()),
        (Some(1), Some("v9"))
    );
    // The patcher follows its own writes: a second change does not conflict with the first.
    next.status.as_mut().unwrap().operator_version = Some("v10".into());
    assert!(p2.patch_status(&next).await.unwrap());
}

#[tokio::test]
async fn reconciles_are_counted_in_the_controller_metrics() {
    use opm_operator::controller::context::Context;
    use opm_operator::controller::metrics::ControllerMetrics;
    let env = env().await;
    let mut registry = prometheus_client::registry::Registry::default();
    let dir = tempfile::tempdir().unwrap();
    let layout = std::sync::Arc::new(opm_operator::platform::Layout::new(dir.path()).unwrap());
    let mut ctx = Context::new(
        env.client.clone(),
        opm_operator::platform::Store::new(),
        layout,
        env.builder.clone(),
        env.acquirer.clone(),
        "test",
    );
    ctx.metrics = Some(ControllerMetrics::register(&mut registry));
    create(&platforms(&env.client), plat()).await;
    reconcile("cluster", &ctx).await.unwrap();
    reconcile("cluster", &ctx).await.unwrap();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for series in [
        r#"opm_controller_reconcile_total{kind="Platform",name="cluster",namespace="",outcome="applied"} 1"#,
        r#"opm_controller_reconcile_total{kind="Platform",name="cluster",namespace="",outcome="no_op"} 1"#,
        r#"opm_controller_reconcile_duration_seconds_count{kind="Platform",name="cluster",namespace=""} 2"#,
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
}

/// A stored legacy Platform whose entry has no version (the CRD then did not require it).
#[tokio::test]
async fn scenario_18_a_versionless_legacy_subscription_refuses_without_registry_io() {
    use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let emu = kube_emu::Emulator::start(kube_emu::Options::default())
        .await
        .unwrap();
    let client = emu.client().unwrap();
    let crds_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::all_crds() {
        let mut v = serde_json::to_value(&crd).unwrap();
        if crd.spec.names.kind == "Platform" {
            drop_required_version(&mut v);
        }
        let crd: CustomResourceDefinition = serde_json::from_value(v).unwrap();
        crds_api.create(&Default::default(), &crd).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let builder = FakeBuilder::healthy();
    let ctx = context(&client, dir.path(), builder.clone(), Default::default());
    let raw: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<Platform>(&()),
    );
    let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes", "registry": {"x.test/catalogs/legacy@v0": {}}},
    }))
    .unwrap();
    raw.create(&Default::default(), &obj).await.unwrap();
    let r = reconcile("cluster", &ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    let s = platforms(&client)
        .get("cluster")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        condition(&s.conditions, types::READY),
        Some((
            "False".into(),
            "BuildFailed".into(),
            "registry entry \"x.test/catalogs/legacy@v0\": version is required (stored object \
             predates the required field)"
                .into()
        ))
    );
    assert!(builder.inputs.lock().unwrap().is_empty(), "no registry I/O");
    assert!(ctx.store.generated().is_none());
}

use kube::Api;

pub(super) fn drop_required_version(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Array(req)) = m.get_mut("required") {
                req.retain(|r| r != "version");
                if req.is_empty() {
                    m.remove("required");
                }
            }
            for (_, child) in m.iter_mut() {
                drop_required_version(child);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_required_version),
        _ => {}
    }
}

#[tokio::test]
async fn contract_collisions_refuse_ahead_of_the_other_findings_and_record_nothing() {
    let env = env().await;
    create(&platforms(&env.client), plat()).await;
    let mut inv = over_subscribed();
    inv.collisions.insert(
        "x.test/contracts/backup@v1".into(),
        vec![
            "x.test/catalogs/mini@v0".into(),
            "x.test/catalogs/dup@v0".into(),
        ],
    );
    *env.builder.contracts.lock().unwrap() = inv;
    for _ in 0..2 {
        let r = reconcile("cluster", &env.ctx).await.unwrap();
        assert_eq!(r.requeue, Some(THIRTY_MIN));
    }
    let s = status(&env).await;
    let (st, reason, msg) = condition(&s.conditions, types::READY).unwrap();
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "ContractCollisions")
    );
    assert!(
        msg.starts_with(
            "platform has colliding contract definitions: 1 contract is defined by more than one \
             enabled catalog; a contract has exactly one definition, so disable all but one of \
             them:\n  x.test/contracts/backup@v1 defined by x.test/catalogs/dup@v0, \
             x.test/catalogs/mini@v0\n\nplatform is not routable: "
        ),
        "{msg}"
    );
    assert_eq!(
        condition(&s.conditions, types::STALLED).unwrap().1,
        "ContractCollisions"
    );
    assert!(env.ctx.store.generated().is_none());
    assert_eq!(
        events(&env.client, "cluster", "ContractCollisions")
            .await
            .len(),
        1
    );
    // One definition left: the collision is gone, the over-subscription remains.
    env.builder.contracts.lock().unwrap().collisions.clear();
    reconcile("cluster", &env.ctx).await.unwrap();
    let (_, reason, _) = condition(&status(&env).await.conditions, types::READY).unwrap();
    assert_eq!(reason, "OverSubscribedContracts");
}
