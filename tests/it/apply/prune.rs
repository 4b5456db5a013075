//! Prune and deletion against kube-emu: scenarios 37, 38, 44 and 45 of docs/design/operator.md §8, the
//! Namespace/CRD protection, the foreign-uuid and non-OPM guards, the opt-out annotation and the
//! empty-render refusal.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use http::Method;
use kube::api::{Patch, PatchParams};
use kube_emu::fault::{FaultKind, FaultRule};
use opm_operator::apply::deletion::{decide, Decision};
use opm_operator::apply::object::InstanceLabels;
use opm_operator::apply::prune::{PruneOptions, SkipReason};
use opm_operator::apply::{ApplyOptions, Error, Phase, SyncOptions};
use opm_operator::inventory::entries_of;
use serde_json::{json, Value};

use crate::apply::{cm, cm_api, crd, emu, engine, live_cm, ns};

fn sync_opts(uuid: &str) -> SyncOptions {
    SyncOptions {
        apply: ApplyOptions {
            instance: Some(InstanceLabels {
                name: "inst".into(),
                namespace: "app".into(),
                uuid: uuid.into(),
            }),
            ..ApplyOptions::default()
        },
        prune: true,
        prune_options: PruneOptions {
            owner_uuid: uuid.into(),
        },
        ..SyncOptions::default()
    }
}

/// Merges `labels` into the live labels of ConfigMap `ns/name` (as another actor would).
pub(crate) async fn relabel(client: &kube::Client, ns: &str, name: &str, labels: Value) {
    cm_api(client, ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn scenario_37_prune_deletes_stale_and_honours_every_guard() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let opts = sync_opts("u1");
    let names = [
        "gone",
        "foreign-uuid",
        "not-opm",
        "legacy",
        "cli",
        "opted-out",
        "kept",
    ];
    let mut objects = vec![ns("app"), crd()];
    objects.extend(names.iter().map(|n| cm("app", n, json!({}))));
    let first = eng.sync(&objects, &[], &opts).await.unwrap();
    assert_eq!(first.inventory.len(), 9);

    // Live labels rewritten by others after the apply.
    relabel(
        &client,
        "app",
        "foreign-uuid",
        json!({"module-instance.opmodel.dev/uuid": "u2"}),
    )
    .await;
    relabel(
        &client,
        "app",
        "not-opm",
        json!({"app.kubernetes.io/managed-by": "helm"}),
    )
    .await;
    relabel(
        &client,
        "app",
        "legacy",
        json!({"app.kubernetes.io/managed-by": "open-platform-model", "module-instance.opmodel.dev/uuid": null}),
    )
    .await;
    relabel(
        &client,
        "app",
        "cli",
        json!({"app.kubernetes.io/managed-by": "opm-cli"}),
    )
    .await;
    cm_api(&client, "app")
        .patch(
            "opted-out",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"opm.dev/prune": "disabled"}}})),
        )
        .await
        .unwrap();

    // The component drops everything but "kept"; the Namespace and CRD drop out too.
    let desired = vec![cm("app", "kept", json!({}))];
    let second = eng.sync(&desired, &first.inventory, &opts).await.unwrap();
    let pruned = second.pruned.unwrap();
    let deleted: Vec<String> = pruned.deleted.iter().map(ToString::to_string).collect();
    assert_eq!(
        deleted,
        vec![
            "ConfigMap/app/gone",
            "ConfigMap/app/legacy",
            "ConfigMap/app/cli"
        ]
    );
    let skipped: Vec<(String, SkipReason)> = pruned
        .skipped
        .iter()
        .map(|(r, why)| (r.to_string(), why.clone()))
        .collect();
    assert_eq!(
        skipped,
        vec![
            ("Namespace/app".to_string(), SkipReason::ProtectedKind),
            (
                "CustomResourceDefinition/widgets.example.dev".to_string(),
                SkipReason::ProtectedKind
            ),
            (
                "ConfigMap/app/foreign-uuid".to_string(),
                SkipReason::OtherOwner("u2".into())
            ),
            (
                "ConfigMap/app/not-opm".to_string(),
                SkipReason::NotManaged("helm".into())
            ),
            ("ConfigMap/app/opted-out".to_string(), SkipReason::OptedOut),
        ]
    );
    for n in ["gone", "legacy", "cli"] {
        assert!(live_cm(&client, "app", n).await.is_none(), "{n}");
    }
    for n in ["foreign-uuid", "not-opm", "opted-out", "kept"] {
        assert!(live_cm(&client, "app", n).await.is_some(), "{n}");
    }
    assert_eq!(second.inventory, entries_of(&desired).unwrap());
    emu.shutdown().await;
}

#[tokio::test]
async fn scenario_38_component_move_and_version_change_are_not_stale() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let opts = sync_opts("u1");
    let objects = vec![ns("app"), cm("app", "a", json!({"k": "1"}))];
    let first = eng.sync(&objects, &[], &opts).await.unwrap();
    // The previous inventory recorded another component and an older API version.
    let mut previous = first.inventory.clone();
    previous[1].component = Some("old-component".into());
    previous[1].v = Some("v1beta1".into());
    let mut moved = cm("app", "a", json!({"k": "2"}));
    moved["metadata"]["labels"]["component.opmodel.dev/name"] = json!("new-component");
    let second = eng
        .sync(&[ns("app"), moved], &previous, &opts)
        .await
        .unwrap();
    let pruned = second.pruned.unwrap();
    assert!(pruned.deleted.is_empty() && pruned.skipped.is_empty());
    let live = live_cm(&client, "app", "a").await.unwrap();
    assert_eq!(live["data"]["k"], "2");
    assert_eq!(
        second.inventory[1].component.as_deref(),
        Some("new-component")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn empty_render_refused_unless_allowed() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let mut opts = sync_opts("u1");
    let first = eng
        .sync(&[ns("app"), cm("app", "a", json!({}))], &[], &opts)
        .await
        .unwrap();
    let err = eng.sync(&[], &first.inventory, &opts).await.unwrap_err();
    assert_eq!(err.phase, Phase::Plan);
    assert!(matches!(
        err.error,
        Error::EmptyRenderRefused { previous: 2 }
    ));
    assert!(live_cm(&client, "app", "a").await.is_some());
    opts.allow_empty = true;
    let ok = eng.sync(&[], &first.inventory, &opts).await.unwrap();
    assert!(ok.inventory.is_empty());
    assert_eq!(ok.pruned.unwrap().deleted.len(), 1);
    assert!(live_cm(&client, "app", "a").await.is_none());
    emu.shutdown().await;
}

#[tokio::test]
async fn oversize_inventory_refused_before_any_write() {
    let emu = emu().await;
    let eng = engine(&emu);
    let mut opts = sync_opts("u1");
    opts.size_budget = 200;
    let objects: Vec<Value> = (0..10)
        .map(|i| cm("default", &format!("c{i}"), json!({})))
        .collect();
    let err = eng.sync(&objects, &[], &opts).await.unwrap_err();
    assert_eq!(err.phase, Phase::Plan);
    assert!(matches!(err.error, Error::InventoryTooLarge(_)));
    assert!(live_cm(&emu.client().unwrap(), "default", "c0")
        .await
        .is_none());
    emu.shutdown().await;
}

#[tokio::test]
async fn scenario_44_deletion_prunes_all_but_protected_fail_slow_and_waits_for_gone() {
    let emu = emu().await;
    let eng = engine(&emu);
    let client = emu.client().unwrap();
    let opts = sync_opts("u1");
    let objects = vec![
        ns("app"),
        crd(),
        cm("app", "a", json!({})),
        cm("app", "b", json!({})),
        cm("app", "c", json!({})),
    ];
    let inv = eng.sync(&objects, &[], &opts).await.unwrap().inventory;

    // prune=false → orphan: nothing deleted.
    assert_eq!(decide(false, inv.len(), None, None), Decision::Orphan);
    assert_eq!(decide(true, inv.len(), None, None), Decision::Prune);

    // One delete fails: the others are still attempted, the error is returned.
    emu.inject_fault(
        FaultRule::any(1, FaultKind::Internal)
            .method(Method::DELETE)
            .path_contains("/configmaps/b"),
    );
    // "c" has a finalizer: deleted but not gone yet.
    cm_api(&client, "app")
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.dev/hold"]}})),
        )
        .await
        .unwrap();
    let res = eng.delete_all(&inv, &opts.prune_options).await;
    assert!(!res.complete());
    assert_eq!(res.pruned.errors.len(), 1);
    assert!(res.pruned.errors[0].to_string().contains("ConfigMap/app/b"));
    assert_eq!(
        res.remaining
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["ConfigMap/app/c"]
    );
    assert_eq!(
        res.pruned.skipped.len(),
        2,
        "Namespace and CRD are never deleted"
    );
    assert!(live_cm(&client, "app", "a").await.is_none());
    assert!(live_cm(&client, "app", "b").await.is_some());

    // Retry after the finalizer is released: complete.
    cm_api(&client, "app")
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let res = eng.delete_all(&inv, &opts.prune_options).await;
    assert!(res.complete(), "{res:?}");
    assert!(live_cm(&client, "app", "b").await.is_none());
    // The Namespace and the CRD survive.
    let ns_ref = opm_operator::apply::object::ObjectRef::of(&ns("app")).unwrap();
    assert!(eng.get_live(&ns_ref).await.unwrap().is_some());
    let crd_ref = opm_operator::apply::object::ObjectRef::of(&crd()).unwrap();
    assert!(eng.get_live(&crd_ref).await.unwrap().is_some());
    emu.shutdown().await;
}

#[tokio::test]
async fn scenario_45_deleting_with_the_sa_gone() {
    let emu = emu().await;
    let eng = engine(&emu);
    let config = emu.config().unwrap();
    // The SA does not exist: typed, and the decision follows the annotation exactly.
    let identity = eng.impersonating(&config, "app", "deploy-sa").await;
    assert!(matches!(
        identity,
        Err(Error::ServiceAccountNotFound { .. })
    ));
    assert_eq!(
        decide(true, 3, Some(&identity), None),
        Decision::StallSaMissing {
            service_account: "app/deploy-sa".into()
        }
    );
    assert_eq!(
        decide(true, 3, Some(&identity), Some("yes")),
        Decision::StallSaMissing {
            service_account: "app/deploy-sa".into()
        }
    );
    assert_eq!(
        decide(true, 3, Some(&identity), Some("true")),
        Decision::OrphanSaMissing {
            count: 3,
            service_account: "app/deploy-sa".into()
        }
    );
    // RBAC-denied impersonation (the controller may not read the SA): ImpersonationFailed,
    // the annotation is ignored.
    let weak = opm_operator::apply::Engine::new(
        emu.client_as("weak-controller", &[]).unwrap(),
        Default::default(),
    );
    let identity = weak.impersonating(&config, "app", "deploy-sa").await;
    assert!(
        matches!(identity, Err(Error::Forbidden { .. })),
        "{identity:?}"
    );
    assert!(matches!(
        decide(true, 3, Some(&identity), Some("true")),
        Decision::ImpersonationFailed(_)
    ));
    emu.shutdown().await;
}
