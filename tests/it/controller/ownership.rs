//! Issue 29: two instances never fight over one object (the ownership rule of
//! `opm_operator::apply::ownership`), on the real kernel and kube-emu.
//!
//! The demo module renders the ConfigMap `settings` under a fixed name, so every instance of it
//! in one namespace claims the same object. The first instance to apply owns it; every other one
//! is `Ready=False OwnershipConflict` naming the owner and the object, writes nothing (the
//! object's resourceVersion does not move), and prunes nothing. Deleting the owner (prune) deletes
//! the object; an instance deleted without prune leaves it to be adopted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crds::conditions::types;
use crds::module_instance::{ModuleInstance, ModuleInstanceStatus};
use kube::api::DeleteParams;
use kube::Api;
use opm_operator::controller::instance;
use serde_json::Value;

use super::common::*;
use super::real::*;

const NS: &str = "team";

fn values() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(crate::platform::gen::opm("values").join("valid.json")).unwrap(),
    )
    .unwrap()
}

fn instances(r: &Real) -> Api<ModuleInstance> {
    Api::namespaced(r.client.clone(), NS)
}

fn name(i: usize) -> String {
    format!("i{i:02}")
}

/// A cluster with the platform recorded and `n` demo instances in `team` (prune as given).
async fn cluster(n: usize, prune: bool) -> Real {
    let r = rendering(|_| {}).await;
    namespace(&r.client, NS).await;
    record(&r, &[(MINI, None)]).await;
    for i in 0..n {
        let mi = ModuleInstance::test()
            .named(NS, &name(i))
            .with_module(DEMO, "v0.1.0")
            .with_values(values())
            .with_prune(prune);
        create(&instances(&r), mi).await;
    }
    r
}

async fn reconcile(r: &Real, i: usize) {
    instance::reconcile(NS, &name(i), &r.ctx).await.unwrap();
}

async fn status(r: &Real, i: usize) -> ModuleInstanceStatus {
    instances(r)
        .get(&name(i))
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

/// `(status, reason, message)` of `Ready`.
async fn ready(r: &Real, i: usize) -> (String, String, String) {
    condition(&status(r, i).await.conditions, types::READY).unwrap()
}

/// The `settings` ConfigMap's owner label and resourceVersion, if it exists.
async fn settings(r: &Real) -> Option<(String, String)> {
    let cm = Api::<crds::k8s_openapi::api::core::v1::ConfigMap>::namespaced(r.client.clone(), NS)
        .get_opt("settings")
        .await
        .unwrap()?;
    let owner = cm
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("module-instance.opmodel.dev/name"))
        .cloned()
        .unwrap_or_default();
    Some((owner, cm.metadata.resource_version.unwrap_or_default()))
}

/// Every condition message of the `n` instances is well-formed (issue 29 item 4).
async fn assert_messages_well_formed(r: &Real, n: usize) {
    for i in 0..n {
        super::common::assert_messages_well_formed(&status(r, i).await.conditions);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_instances_one_owner_the_rest_conflict_and_nothing_is_rewritten() {
    const N: usize = 20;
    let r = cluster(N, true).await;
    // Finalizers, then one apply each, in order: i00 applies first and owns `settings`.
    for i in 0..N {
        reconcile(&r, i).await;
        reconcile(&r, i).await;
    }
    let (owner, rv) = settings(&r).await.expect("settings exists");
    assert_eq!(owner, name(0));
    assert_eq!(ready(&r, 0).await.1, "ReconciliationSucceeded");
    for i in 1..N {
        let (s, reason, message) = ready(&r, i).await;
        assert_eq!(
            (s.as_str(), reason.as_str()),
            ("False", "OwnershipConflict"),
            "{}: {message}",
            name(i)
        );
        assert!(message.contains("ConfigMap/team/settings"), "{message}");
        assert!(message.contains("team/i00"), "{message}");
        // Nothing of a refused instance was written: its own Deployment does not exist.
        let deployments: Api<crds::k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(r.client.clone(), NS);
        let own = format!("{}-web", name(i));
        assert!(deployments.get_opt(&own).await.unwrap().is_none(), "{own}");
    }
    // Three more reconcile periods: nobody rewrites the object.
    for _ in 0..3 {
        for i in 0..N {
            reconcile(&r, i).await;
        }
    }
    assert_eq!(
        settings(&r).await,
        Some((name(0), rv.clone())),
        "settings was rewritten"
    );
    assert_messages_well_formed(&r, N).await;

    // Deleting the owner (prune) deletes the object; the others still report the conflict
    // until they reconcile, then exactly one takes it over and the rest name the new owner.
    instances(&r)
        .delete(&name(0), &DeleteParams::default())
        .await
        .unwrap();
    reconcile(&r, 0).await;
    assert_eq!(
        settings(&r).await,
        None,
        "the owner's prune deletes settings"
    );
    assert_eq!(ready(&r, 1).await.1, "OwnershipConflict");
    for i in 1..N {
        reconcile(&r, i).await;
    }
    let (owner, _) = settings(&r).await.expect("recreated by the next instance");
    assert_eq!(owner, name(1));
    assert_eq!(ready(&r, 1).await.1, "ReconciliationSucceeded");
    for i in 2..N {
        let (_, reason, message) = ready(&r, i).await;
        assert_eq!(reason, "OwnershipConflict", "{}", name(i));
        assert!(message.contains("team/i01"), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_whose_owner_is_gone_is_adopted_and_the_status_says_so() {
    let r = cluster(2, false).await;
    for i in 0..2 {
        reconcile(&r, i).await;
        reconcile(&r, i).await;
    }
    assert_eq!(ready(&r, 1).await.1, "OwnershipConflict");
    // i00 goes without prune: `settings` stays, labelled for an instance that no longer exists.
    instances(&r)
        .delete(&name(0), &DeleteParams::default())
        .await
        .unwrap();
    reconcile(&r, 0).await;
    assert!(
        eventually(10, || async {
            instances(&r).get_opt(&name(0)).await.unwrap().is_none()
        })
        .await
    );
    assert_eq!(settings(&r).await.map(|s| s.0), Some(name(0)));
    reconcile(&r, 1).await;
    let (s, reason, _) = ready(&r, 1).await;
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("True", "ReconciliationSucceeded")
    );
    assert_eq!(settings(&r).await.map(|s| s.0), Some(name(1)));
    let events: Api<crds::k8s_openapi::api::events::v1::Event> =
        Api::namespaced(r.client.clone(), NS);
    let notes: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|o| o.name.as_deref()) == Some("i01"))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes.iter().any(|n| n
            .contains("adopted from deleted instances: ConfigMap/team/settings (from team/i00)")),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("OwnershipConflict") || n.contains("belongs to instance team/i00")),
        "the earlier conflict was an event: {notes:#?}"
    );
}
