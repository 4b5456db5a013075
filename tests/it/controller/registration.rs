//! TransformerRegistration reconciler scenarios 52–64 (docs/design/operator.md §8) against kube-emu with a
//! fake `CatalogAcquirer` and a Platform recorded through the fake builder.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

use crds::conditions::types;
use crds::module_instance::ModuleInstance;
use crds::platform::Platform;
use crds::transformer_registration::TransformerRegistration;
use kube::api::DeleteParams;
use kube::Api;
use opm_operator::controller::registration::reconcile;
use opm_operator::controller::{manager, platform};
use opm_operator::kernel::{AcquireError, CatalogInfo, ErrorClass, KernelError};

use super::common::*;

const THIRTY_MIN: Duration = Duration::from_secs(30 * 60);
const CATALOG: &str = "x.test/catalogs/k8up@v1";
const CONTRACT: &str = "x.test/contracts/backup@v1";

/// A provider instance `ns/name` whose inventory lists `claims`, Ready or not.
async fn provider(client: &kube::Client, ns: &str, name: &str, claims: &[&str], ready: bool) {
    namespace(client, ns).await;
    let api: Api<ModuleInstance> = Api::namespaced(client.clone(), ns);
    create(&api, ModuleInstance::test().named(ns, name)).await;
    let entries: Vec<_> = claims
        .iter()
        .map(|c| serde_json::json!({"group": "opmodel.dev", "kind": "TransformerRegistration", "name": c, "v": "v1alpha1"}))
        .collect();
    set_ready(client, ns, name, ready).await;
    patch_status(
        &api,
        name,
        serde_json::json!({"inventory": {"revision": 1, "digest": "sha256:x", "count": entries.len(), "entries": entries}}),
    )
    .await;
}

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

/// A cluster with a recorded platform, catalog `CATALOG` providing `CONTRACT`, provider
/// `team-a/k8up` owning claim `team-a.k8up` (Ready), and the claim itself.
async fn judged_env() -> Env {
    let env = env().await;
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    env.acquirer.provides(CATALOG, "1.0.0", &[CONTRACT]);
    provider(&env.client, "team-a", "k8up", &["team-a.k8up"], true).await;
    create(
        &claims(&env.client),
        claim("team-a", "k8up", CATALOG, &[CONTRACT]),
    )
    .await;
    env
}

fn claim(ns: &str, name: &str, catalog: &str, provides: &[&str]) -> TransformerRegistration {
    TransformerRegistration::for_provider(ns, name, catalog, "1.0.0").with_provides(provides)
}

async fn get(env: &Env, name: &str) -> TransformerRegistration {
    claims(&env.client).get(name).await.unwrap()
}

async fn ready(env: &Env, name: &str) -> (String, String, String) {
    let tr = get(env, name).await;
    condition(&tr.status.unwrap().conditions, types::READY).unwrap()
}

#[tokio::test]
async fn scenario_52_no_platform_defers() {
    let env = env().await;
    let trs = claims(&env.client);
    let created = create(&trs, claim("team-a", "k8up", CATALOG, &[CONTRACT])).await;
    patch_status(&trs, "team-a.k8up", serde_json::json!({"accepted": true})).await;
    let r = reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    let tr = get(&env, "team-a.k8up").await;
    let s = tr.status.unwrap();
    assert!(s.accepted, "no verdict taken");
    assert_eq!(s.observed_generation, created.metadata.generation);
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "Unknown".into(),
            "PlatformNotReady".into(),
            "No platform has been generated yet, so the claim cannot be judged".into()
        )
    );
    assert_eq!(
        condition(&s.conditions, types::RECONCILING).unwrap().0,
        "True"
    );
    assert_eq!(*env.acquirer.calls.lock().unwrap(), 0);
}

/// A reconcile request is recorded with the verdict (here a deferral: no platform yet).
#[tokio::test]
async fn a_reconcile_request_is_recorded_with_the_verdict() {
    let env = env().await;
    let trs = claims(&env.client);
    create(&trs, claim("team-a", "k8up", CATALOG, &[CONTRACT])).await;
    patch_meta(
        &trs,
        "team-a.k8up",
        serde_json::json!({"annotations": {crds::RECONCILE_REQUEST_ANNOTATION: "now"}}),
    )
    .await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let s = get(&env, "team-a.k8up").await.status.unwrap();
    assert_eq!(s.last_handled_reconcile_at.as_deref(), Some("now"));
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap().1,
        "PlatformNotReady"
    );
}

#[tokio::test]
async fn scenario_53_wrong_kind_by_type_and_unresolved() {
    let env = judged_env().await;
    env.acquirer.set(
        CATALOG,
        "1.0.0",
        Err(AcquireError::WrongKind(
            "the artifact is a module, not a catalog".into(),
        )),
    );
    let r = reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    assert_eq!(
        ready(&env, "team-a.k8up").await,
        (
            "False".into(),
            "CatalogWrongKind".into(),
            format!("Claimed artifact {CATALOG} at 1.0.0 is not a catalog: the artifact is a module, not a catalog")
        )
    );
    // A plain error that mentions kinds is not a wrong kind.
    env.acquirer.set(
        CATALOG,
        "1.0.0",
        Err(AcquireError::Other(KernelError::new(
            ErrorClass::Other,
            "unexpected kind of layer",
        ))),
    );
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let (_, reason, msg) = ready(&env, "team-a.k8up").await;
    assert_eq!(reason, "CatalogUnresolved");
    assert_eq!(
        msg,
        format!(
            "Claimed catalog {CATALOG} at 1.0.0 could not be resolved: unexpected kind of layer"
        )
    );
}

#[tokio::test]
async fn scenario_54_provides_must_match() {
    let env = judged_env().await;
    let trs = claims(&env.client);
    patch_spec(&trs, "team-a.k8up", serde_json::json!({"provides": []})).await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let (_, reason, msg) = ready(&env, "team-a.k8up").await;
    assert_eq!(reason, "ProvidesMismatch");
    assert_eq!(msg, format!("Claim lists provider contracts [] but the catalog implements [{CONTRACT}]; acceptance requires them to match exactly"));
    env.acquirer
        .provides(CATALOG, "1.0.0", &["x.test/b@v1", "x.test/a@v1"]);
    patch_spec(
        &trs,
        "team-a.k8up",
        serde_json::json!({"provides": ["x.test/a@v1", "x.test/b@v1"]}),
    )
    .await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(ready(&env, "team-a.k8up").await.1, "Accepted");
}

#[tokio::test]
async fn scenario_55_provider_identity() {
    let env = judged_env().await;
    let trs = claims(&env.client);
    // Missing provider.
    patch_spec(
        &trs,
        "team-a.k8up",
        serde_json::json!({"providerRef": {"namespace": "team-a", "name": "ghost"}}),
    )
    .await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(
        ready(&env, "team-a.k8up").await,
        (
            "False".into(),
            "ProviderMismatch".into(),
            "Claim names provider ModuleInstance team-a/ghost, which does not exist, so the claim is not rendered output".into()
        )
    );
    // A provider whose inventory owns another claim.
    provider(&env.client, "team-a", "other", &["team-a.other"], true).await;
    patch_spec(
        &trs,
        "team-a.k8up",
        serde_json::json!({"providerRef": {"namespace": "team-a", "name": "other"}}),
    )
    .await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let (_, reason, msg) = ready(&env, "team-a.k8up").await;
    assert_eq!(reason, "ProviderMismatch");
    assert!(
        msg.contains("team-a.k8up") && msg.contains("team-a/other"),
        "{msg}"
    );
    // No inventory yet: deferred.
    namespace(&env.client, "team-b").await;
    let mis: Api<ModuleInstance> = Api::namespaced(env.client.clone(), "team-b");
    create(&mis, ModuleInstance::test().named("team-b", "fresh")).await;
    patch_spec(
        &trs,
        "team-a.k8up",
        serde_json::json!({"providerRef": {"namespace": "team-b", "name": "fresh"}}),
    )
    .await;
    let r = reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, Some(THIRTY_MIN));
    assert_eq!(
        ready(&env, "team-a.k8up").await,
        (
            "Unknown".into(),
            "ProviderInventoryPending".into(),
            "Provider ModuleInstance team-b/fresh has not written an inventory yet".into()
        )
    );
}

#[tokio::test]
async fn scenario_56_build_compatibility() {
    let env = judged_env().await;
    let info = |v: &str| CatalogInfo {
        provides: vec![CONTRACT.into()],
        requires: BTreeMap::from([
            ("opmodel.dev/core@v2".to_owned(), v.to_owned()),
            ("cue.dev/x/k8s.io@v0".to_owned(), "v9.0.0".to_owned()),
        ]),
    };
    env.acquirer.set(CATALOG, "1.0.0", Ok(info("v2.0.0")));
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let (_, reason, msg) = ready(&env, "team-a.k8up").await;
    assert_eq!(reason, "BuildIncompatible");
    assert_eq!(
        msg,
        "Claimed catalog requires opmodel.dev/core@v2 at \"v2.0.0\" but the platform resolved \
         \"v2.0.0-alpha.4\": the catalog needs a newer version than the platform resolved. The \
         comparison is conservative: a cue.mod requirement records what the provider was tidied \
         against, not what it uses, so lowering the requirement on opmodel.dev/core is the \
         author's fix."
    );
    // Equal passes; the non-OPM path is ignored.
    env.acquirer
        .set(CATALOG, "1.0.0", Ok(info("v2.0.0-alpha.4")));
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(ready(&env, "team-a.k8up").await.1, "Accepted");
}

#[tokio::test]
async fn scenario_57_duplicate_claims() {
    let env = judged_env().await;
    // Same creation second: the tie goes to the lowest name.
    provider(&env.client, "team-b", "k8up", &["team-b.k8up"], true).await;
    create(
        &claims(&env.client),
        claim("team-b", "k8up", CATALOG, &[CONTRACT]),
    )
    .await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    reconcile("team-b.k8up", &env.ctx).await.unwrap();
    assert_eq!(ready(&env, "team-a.k8up").await.1, "Accepted");
    assert_eq!(
        ready(&env, "team-b.k8up").await,
        (
            "False".into(),
            "DuplicateClaim".into(),
            format!("Claim team-a.k8up already holds provider catalog {CATALOG}; remove one of the two claims")
        )
    );
}

#[tokio::test]
async fn scenario_58_subscribed_and_claimed_contracts() {
    let env = judged_env().await;
    // An enabled subscription already provides the contract.
    {
        let mut inv = env.builder.contracts.lock().unwrap();
        inv.provided_by
            .insert(CONTRACT.into(), vec!["x.test/catalogs/velero@v1".into()]);
    }
    let trs = claims(&env.client);
    patch_spec(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"type": "t2"}),
    )
    .await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(
        ready(&env, "team-a.k8up").await,
        (
            "False".into(),
            "ContractSubscribed".into(),
            format!("Contract {CONTRACT} is already provided by subscribed catalog x.test/catalogs/velero@v1; a contract has exactly one provider, so disable that subscription or withdraw this claim")
        )
    );
    // The claim's own catalog among the providers does not refuse it.
    env.builder
        .contracts
        .lock()
        .unwrap()
        .provided_by
        .insert(CONTRACT.into(), vec![CATALOG.into()]);
    patch_spec(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"type": "t3"}),
    )
    .await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let r = ready(&env, "team-a.k8up").await;
    assert_eq!(r.1, "Accepted", "{r:?}");
    // Another catalog's claim providing the same contract: accepted-inactive does not block
    // (the platform then has no provider of the contract) ...
    env.builder.contracts.lock().unwrap().provided_by.clear();
    patch_spec(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"type": "t4"}),
    )
    .await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    const OTHER: &str = "x.test/catalogs/velero@v1";
    env.acquirer.provides(OTHER, "1.0.0", &[CONTRACT]);
    provider(&env.client, "team-v", "velero", &["team-v.velero"], true).await;
    create(&trs, claim("team-v", "velero", OTHER, &[CONTRACT])).await;
    patch_status(&trs, "team-a.k8up", serde_json::json!({"active": false})).await;
    reconcile("team-v.velero", &env.ctx).await.unwrap();
    let r = ready(&env, "team-v.velero").await;
    assert_eq!(r.1, "Accepted", "{r:?}");
    // ... an active one does (the platform folded its catalog in as the contract's provider).
    env.builder
        .contracts
        .lock()
        .unwrap()
        .provided_by
        .insert(CONTRACT.into(), vec![CATALOG.into()]);
    patch_spec(
        &platforms(&env.client),
        "cluster",
        serde_json::json!({"type": "t5"}),
    )
    .await;
    platform::reconcile("cluster", &env.ctx).await.unwrap();
    patch_status(&trs, "team-a.k8up", serde_json::json!({"active": true})).await;
    patch_status(&trs, "team-v.velero", serde_json::json!({"active": false})).await;
    reconcile("team-v.velero", &env.ctx).await.unwrap();
    assert_eq!(
        ready(&env, "team-v.velero").await,
        (
            "False".into(),
            "ContractClaimed".into(),
            format!("Contract {CONTRACT} is already provided by active claim team-a.k8up; a contract has exactly one provider, so remove one of the two providers")
        )
    );
}

#[tokio::test]
async fn scenario_59_activation_latch() {
    let env = judged_env().await;
    set_ready(&env.client, "team-a", "k8up", false).await;
    let r = reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert_eq!(r.requeue, None);
    let tr = get(&env, "team-a.k8up").await;
    assert!(tr
        .metadata
        .finalizers
        .as_ref()
        .unwrap()
        .contains(&"opmodel.dev/dependents".to_owned()));
    let s = tr.status.unwrap();
    assert!(s.accepted && !s.active);
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "True".into(),
            "Accepted".into(),
            format!("Claim accepted for catalog {CATALOG} at 1.0.0")
        )
    );
    assert_eq!(
        condition(&s.conditions, types::ACTIVE).unwrap(),
        (
            "False".into(),
            "ProviderNotReady".into(),
            "Waiting for provider ModuleInstance team-a/k8up to report Ready".into()
        )
    );
    let generation = tr.metadata.generation;
    set_ready(&env.client, "team-a", "k8up", true).await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let tr = get(&env, "team-a.k8up").await;
    assert_eq!(tr.metadata.generation, generation);
    let s = tr.status.unwrap();
    assert!(s.active);
    let active = s
        .conditions
        .iter()
        .find(|c| c.type_ == types::ACTIVE)
        .unwrap()
        .clone();
    assert_eq!(
        (active.status.as_str(), active.reason.as_str()),
        ("True", "ProviderReady")
    );
    // Outage and recovery: still active, transition time unchanged.
    set_ready(&env.client, "team-a", "k8up", false).await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    set_ready(&env.client, "team-a", "k8up", true).await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let s = get(&env, "team-a.k8up").await.status.unwrap();
    assert!(s.active);
    let again = s
        .conditions
        .iter()
        .find(|c| c.type_ == types::ACTIVE)
        .unwrap();
    assert_eq!(again.last_transition_time, active.last_transition_time);
}

#[tokio::test]
async fn scenario_60_refusals_and_the_latch() {
    let env = judged_env().await;
    env.acquirer.provides(CATALOG, "1.0.0", &["x.test/else@v1"]);
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let tr = get(&env, "team-a.k8up").await;
    assert!(
        tr.metadata.finalizers.unwrap_or_default().is_empty(),
        "a refused claim holds no finalizer"
    );
    assert!(condition(&tr.status.unwrap().conditions, types::ACTIVE).is_none());
    // Accepted-inactive, then refused: Active removed.
    env.acquirer.provides(CATALOG, "1.0.0", &[CONTRACT]);
    set_ready(&env.client, "team-a", "k8up", false).await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert!(condition(
        &get(&env, "team-a.k8up").await.status.unwrap().conditions,
        types::ACTIVE
    )
    .is_some());
    env.acquirer.provides(CATALOG, "1.0.0", &["x.test/else@v1"]);
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let s = get(&env, "team-a.k8up").await.status.unwrap();
    assert!(!s.accepted && condition(&s.conditions, types::ACTIVE).is_none());
    // Active, then refused: stays active.
    env.acquirer.provides(CATALOG, "1.0.0", &[CONTRACT]);
    set_ready(&env.client, "team-a", "k8up", true).await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    env.acquirer.provides(CATALOG, "1.0.0", &["x.test/else@v1"]);
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let s = get(&env, "team-a.k8up").await.status.unwrap();
    assert!(!s.accepted && s.active);
    assert_eq!(condition(&s.conditions, types::ACTIVE).unwrap().0, "True");
}

#[tokio::test]
async fn scenarios_61_62_the_dependents_guard() {
    let env = judged_env().await;
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    let trs = claims(&env.client);
    assert!(get(&env, "team-a.k8up").await.status.unwrap().active);
    namespace(&env.client, "apps").await;
    let mis: Api<ModuleInstance> = Api::namespaced(env.client.clone(), "apps");
    create(&mis, ModuleInstance::test().named("apps", "consumer")).await;
    patch_status(
        &mis,
        "consumer",
        serde_json::json!({"requiredContracts": [CONTRACT]}),
    )
    .await;
    trs.delete("team-a.k8up", &DeleteParams::default())
        .await
        .unwrap();
    for _ in 0..2 {
        let r = reconcile("team-a.k8up", &env.ctx).await.unwrap();
        assert_eq!(r.requeue, Some(THIRTY_MIN));
    }
    let tr = get(&env, "team-a.k8up").await;
    let s = tr.status.clone().unwrap();
    assert!(s.accepted && s.active, "verdict untouched while blocked");
    let msg = "Deletion blocked: 1 module instance(s) still demand contracts this claim provides (apps/consumer); remove them before removing the provider";
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        ("False".into(), "DependentsRemain".into(), msg.into())
    );
    assert_eq!(
        events(&env.client, "team-a.k8up", "DependentsRemain")
            .await
            .len(),
        1
    );
    // 62: a blocked claim still contributes its catalog.
    assert_eq!(
        platform::contribution(&tr),
        Some((CATALOG.into(), "1.0.0".into()))
    );
    // The dependent goes: the guard releases and the object is gone.
    mis.delete("consumer", &DeleteParams::default())
        .await
        .unwrap();
    reconcile("team-a.k8up", &env.ctx).await.unwrap();
    assert!(trs.get_opt("team-a.k8up").await.unwrap().is_none());
    // Without dependents the claim goes at once.
    provider(&env.client, "team-b", "k8up", &["team-b.k8up"], true).await;
    create(&trs, claim("team-b", "k8up", CATALOG, &[CONTRACT])).await;
    reconcile("team-b.k8up", &env.ctx).await.unwrap();
    trs.delete("team-b.k8up", &DeleteParams::default())
        .await
        .unwrap();
    reconcile("team-b.k8up", &env.ctx).await.unwrap();
    assert!(trs.get_opt("team-b.k8up").await.unwrap().is_none());
}

#[tokio::test]
async fn scenario_63_instance_events_that_matter() {
    let env = judged_env().await;
    let mis: Api<ModuleInstance> = Api::namespaced(env.client.clone(), "team-a");
    let mut filter = manager::InstanceFilter::default();
    let mi = mis.get("k8up").await.unwrap();
    assert!(filter.applied(&mi), "create passes");
    let mut history_only = mi.clone();
    if let Some(s) = history_only.status.as_mut() {
        s.reconcile.last_attempted_action = Some("apply".into());
    }
    assert!(
        !filter.applied(&history_only),
        "history-only update dropped"
    );
    let mut required = history_only.clone();
    if let Some(s) = required.status.as_mut() {
        s.required_contracts = vec!["x.test/c@v1".into()];
    }
    assert!(filter.applied(&required));
    let mut digest = required.clone();
    if let Some(s) = digest.status.as_mut() {
        if let Some(inv) = s.reconcile.inventory.as_mut() {
            inv.digest = "sha256:y".into();
        }
    }
    assert!(filter.applied(&digest));
    let mut unready = digest.clone();
    if let Some(s) = unready.status.as_mut() {
        s.conditions[0].status = "False".into();
    }
    assert!(filter.applied(&unready));
    assert!(filter.deleted(&unready), "delete passes");
    // The map: claims naming the instance, or providing its demand.
    let trs = claims(&env.client);
    create(
        &trs,
        claim("team-z", "other", "x.test/catalogs/z@v0", &["x.test/c@v1"]),
    )
    .await;
    create(
        &trs,
        claim(
            "team-y",
            "unrelated",
            "x.test/catalogs/y@v0",
            &["x.test/u@v1"],
        ),
    )
    .await;
    let all: Vec<_> = trs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
    let mut names: Vec<String> = manager::claims_for_instance(&required, &all)
        .into_iter()
        .map(|r| r.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec!["team-a.k8up".to_owned(), "team-z.other".to_owned()]
    );
}

#[tokio::test]
async fn scenario_64_a_repeated_refusal_emits_one_warning() {
    let env = judged_env().await;
    env.acquirer.provides(CATALOG, "1.0.0", &[]);
    for _ in 0..3 {
        reconcile("team-a.k8up", &env.ctx).await.unwrap();
    }
    let evs = events(&env.client, "team-a.k8up", "ProvidesMismatch").await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].action.as_deref(), Some("Accept"));
}
