//! The apply engine's fault suite (docs/design/principles.md §1.2 (kubevela#7278, #4320), rules 1–2), with
//! kube-emu request-fault injection: rapid A→B→A never deletes a live desired object; a failed
//! apply adds nothing to the inventory and prunes nothing; a storm of 500/409 answers converges
//! after retries; an engine dropped after stage 1 and run again converges.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::time::Duration;

use crds::common::InventoryEntry;
use http::Method;
use kube_emu::fault::{FaultKind, FaultRule};
use opm_operator::apply::object::InstanceLabels;
use opm_operator::apply::prune::PruneOptions;
use opm_operator::apply::{ApplyOptions, Engine, Phase, SyncOptions};
use serde_json::{json, Value};

use crate::apply::{cm, crd, emu, engine, live_cm, ns, widget};

fn opts() -> SyncOptions {
    SyncOptions {
        apply: ApplyOptions {
            instance: Some(InstanceLabels {
                name: "inst".into(),
                namespace: "app".into(),
                uuid: "u1".into(),
            }),
            ..ApplyOptions::default()
        },
        prune: true,
        prune_options: PruneOptions {
            owner_uuid: "u1".into(),
        },
        ..SyncOptions::default()
    }
}

fn set(names: &[&str], rev: &str) -> Vec<Value> {
    let mut v = vec![ns("app")];
    v.extend(names.iter().map(|n| cm("app", n, json!({"rev": rev}))));
    v
}

/// The reconciler's rule: the inventory advances only on success.
async fn reconcile(eng: &Engine, desired: &[Value], inventory: &mut Vec<InventoryEntry>) -> bool {
    match eng.sync(desired, inventory, &opts()).await {
        Ok(r) => {
            *inventory = r.inventory;
            true
        }
        Err(_) => false,
    }
}

async fn assert_live(client: &kube::Client, names: &[&str]) {
    for n in names {
        assert!(
            live_cm(client, "app", n).await.is_some(),
            "{n} must be live"
        );
    }
}

#[tokio::test]
async fn rapid_a_b_a_never_deletes_a_live_desired_object() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let a = ["x", "y", "shared"];
    let b = ["z", "shared"];
    let mut inv = Vec::new();
    for round in 0..5 {
        assert!(reconcile(&eng, &set(&a, "a"), &mut inv).await);
        assert_live(&client, &a).await;
        // B fails half-way on odd rounds (its first real write of "z" is refused).
        if round % 2 == 1 {
            emu.inject_fault(
                FaultRule::any(1, FaultKind::Internal)
                    .method(Method::PATCH)
                    .path_contains("/configmaps/z")
                    .dry_run(false),
            );
        }
        let b_ok = reconcile(&eng, &set(&b, "b"), &mut inv).await;
        assert_eq!(b_ok, round % 2 == 0);
        if b_ok {
            assert_live(&client, &b).await;
        } else {
            // Nothing pruned after the failed apply: A's objects are all still there.
            assert_live(&client, &a).await;
        }
        assert!(reconcile(&eng, &set(&a, "a"), &mut inv).await);
        assert_live(&client, &a).await;
        assert!(live_cm(&client, "app", "z").await.is_none(), "B's z pruned");
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn failed_apply_adds_nothing_and_prunes_nothing() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let first = eng
        .sync(&set(&["a", "b"], "1"), &[], &opts())
        .await
        .unwrap();
    emu.inject_fault(
        FaultRule::any(1, FaultKind::Conflict)
            .method(Method::PATCH)
            .path_contains("/configmaps/c")
            .dry_run(false),
    );
    let err = eng
        .sync(&set(&["a", "c"], "2"), &first.inventory, &opts())
        .await
        .unwrap_err();
    assert_eq!(err.phase, Phase::Apply);
    assert_eq!(emu.faults_fired(), 1);
    // b (stale in the new desired set) is not pruned; the caller keeps the old inventory.
    assert!(live_cm(&client, "app", "b").await.is_some());
    assert!(live_cm(&client, "app", "c").await.is_none());
    emu.shutdown().await;
}

#[tokio::test]
async fn a_failed_prune_keeps_the_inventory_and_reports_the_apply() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let first = eng
        .sync(&set(&["a", "b", "c"], "1"), &[], &opts())
        .await
        .unwrap();
    emu.inject_fault(
        FaultRule::any(1, FaultKind::Internal)
            .method(Method::DELETE)
            .path_contains("/configmaps/b"),
    );
    let err = eng
        .sync(&set(&["a"], "2"), &first.inventory, &opts())
        .await
        .unwrap_err();
    assert_eq!(err.phase, Phase::Prune);
    // The apply happened and is reported; every stale entry was tried (fail-slow).
    assert_eq!(err.changes.as_ref().map(|c| c.changes.len()), Some(2));
    let pruned = err.pruned.unwrap();
    assert_eq!(
        pruned
            .deleted
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["ConfigMap/app/c"]
    );
    assert!(live_cm(&client, "app", "b").await.is_some());
    // The retry (with the old inventory kept) finishes the prune.
    let ok = eng
        .sync(&set(&["a"], "2"), &first.inventory, &opts())
        .await
        .unwrap();
    assert!(live_cm(&client, "app", "b").await.is_none());
    assert_eq!(ok.inventory.len(), 2);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_storm_of_500_and_409_converges_after_retries() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let mut inv = Vec::new();
    assert!(reconcile(&eng, &set(&["old1", "old2", "keep"], "1"), &mut inv).await);
    let desired = set(&["keep", "n1", "n2", "n3", "n4"], "2");
    // Faults on every kind of request the engine makes: GETs, dry-runs, writes, deletes.
    emu.inject_fault(FaultRule::any(3, FaultKind::Internal).method(Method::GET));
    emu.inject_fault(FaultRule::any(3, FaultKind::Conflict).dry_run(true));
    emu.inject_fault(
        FaultRule::any(4, FaultKind::Internal)
            .method(Method::PATCH)
            .dry_run(false),
    );
    emu.inject_fault(FaultRule::any(2, FaultKind::Conflict).method(Method::DELETE));
    emu.inject_fault(FaultRule::any(2, FaultKind::Internal).path_contains("/configmaps/n3"));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let before = inv.clone();
        if reconcile(&eng, &desired, &mut inv).await {
            break;
        }
        assert_eq!(inv, before, "a failed attempt never changes the inventory");
        assert!(attempts < 30, "no convergence");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(attempts > 1, "the storm must have hit");
    assert!(emu.faults_fired() >= 10, "fired {}", emu.faults_fired());
    assert_eq!(inv, opm_operator::inventory::entries_of(&desired).unwrap());
    assert_live(&client, &["keep", "n1", "n2", "n3", "n4"]).await;
    for n in ["old1", "old2"] {
        assert!(live_cm(&client, "app", n).await.is_none(), "{n} pruned");
    }
    for n in ["keep", "n1", "n4"] {
        assert_eq!(
            live_cm(&client, "app", n).await.unwrap()["data"]["rev"],
            "2"
        );
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn an_engine_dropped_after_stage_one_converges_when_run_again() {
    let emu = emu().await;
    let client = emu.client().unwrap();
    let desired = vec![
        crd(),
        ns("app"),
        widget("app", "w", 1),
        cm("app", "a", json!({})),
        cm("app", "b", json!({})),
    ];
    // Stage 1 (CRD, Namespace) lands; the first write of the rest hangs until the engine is
    // dropped: simulate with a fault, then drop the engine mid-way through its later stages.
    emu.inject_fault(
        FaultRule::any(1, FaultKind::Internal)
            .method(Method::PATCH)
            .path_contains("/configmaps/")
            .dry_run(true),
    );
    {
        let eng = engine(&emu);
        let err = eng.sync(&desired, &[], &opts()).await.unwrap_err();
        assert_eq!(err.phase, Phase::Apply);
        let crd_ref = opm_operator::apply::object::ObjectRef::of(&crd()).unwrap();
        assert!(eng.get_live(&crd_ref).await.unwrap().is_some());
    }
    let eng = engine(&emu);
    let r = eng.sync(&desired, &[], &opts()).await.unwrap();
    assert_eq!(r.inventory.len(), 5);
    assert_live(&client, &["a", "b"]).await;
    let w = opm_operator::apply::object::ObjectRef::of(&widget("app", "w", 1)).unwrap();
    assert!(eng.get_live(&w).await.unwrap().is_some());
    // And a further run is a pure no-op.
    let again = eng.sync(&desired, &r.inventory, &opts()).await.unwrap();
    assert_eq!(
        again.changes.count(opm_operator::apply::Action::Unchanged),
        5
    );

    // Engines aborted at different points of a pass (a process killed mid-reconcile): each
    // partial state converges on the next run, in a fresh namespace each time.
    for (i, delay) in [0u64, 1, 3, 8, 15, 30].into_iter().enumerate() {
        let space = format!("abort-{i}");
        let mut objs = vec![crd(), ns(&space), widget(&space, "w", 2)];
        objs.extend((0..6).map(|j| cm(&space, &format!("c{j}"), json!({"j": j.to_string()}))));
        let eng = engine(&emu);
        let o2 = objs.clone();
        let task =
            tokio::spawn(async move { eng.sync(&o2, &[], &opts()).await.map(|r| r.inventory) });
        tokio::time::sleep(Duration::from_millis(delay)).await;
        task.abort();
        let _ = task.await;
        let eng = engine(&emu);
        let r = eng.sync(&objs, &[], &opts()).await.unwrap();
        assert_eq!(r.inventory.len(), objs.len());
        for j in 0..6 {
            let live = crate::apply::live_cm(&client, &space, &format!("c{j}"))
                .await
                .unwrap();
            assert_eq!(live["data"]["j"], j.to_string());
        }
    }
    emu.shutdown().await;
}
