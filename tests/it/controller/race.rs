//! Issue 41 item 4, the create race: twenty instances created at once that render one shared,
//! absent object, reconciled at the same moment. Exactly one becomes its owner and the other
//! nineteen report `OwnershipConflict` in that same reconcile; the owner labels the object ever
//! carries (watched from before the race) name that one owner only; a second round changes
//! nothing; the losers leave nothing of theirs behind and nothing of the owner's is pruned.
//! Twenty rounds, each in a namespace of its own (`opm_operator::apply::claim`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crds::conditions::types;
use crds::k8s_openapi::api::core::v1::ConfigMap;
use crds::module_instance::ModuleInstance;
use crds::platform::Platform;
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::WatchEvent;
use kube::api::WatchParams;
use kube::Api;
use opm_operator::controller::{instance, platform};
use opm_operator::kernel::{
    BuiltPlatform, KernelError, ModuleRenderer, ModuleRequest, RenderResult, SkewPolicy,
};

use super::common::*;

const N: usize = 20;
const ROUNDS: usize = 20;
const SHARED: &str = "shared";
const UUID_LABEL: &str = "module-instance.opmodel.dev/uuid";

/// Renders the shared ConfigMap and one of the instance's own, stamped with a uuid per instance.
struct Shared;

fn uuid_of(name: &str) -> String {
    format!("race-{name}")
}

impl ModuleRenderer for Shared {
    fn render_module(
        &self,
        req: &ModuleRequest,
        _platform: &BuiltPlatform,
        _skew: SkewPolicy,
    ) -> Result<RenderResult, KernelError> {
        let own = format!("{}-own", req.name);
        Ok(fake_render(
            (&req.name, &req.namespace, &uuid_of(&req.name)),
            &[
                ("v1", "ConfigMap", SHARED, "c"),
                ("v1", "ConfigMap", own.as_str(), "c"),
            ],
            "hello",
            Vec::new(),
        ))
    }
}

fn name(i: usize) -> String {
    format!("i{i:02}")
}

async fn ready(client: &kube::Client, ns: &str, name: &str) -> (String, String, String) {
    let s = Api::<ModuleInstance>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    condition(&s.conditions, types::READY).unwrap()
}

async fn reconcile_all(ctx: &Arc<opm_operator::controller::context::Context>, ns: &str) {
    let runs = (0..N).map(|i| {
        let ctx = ctx.clone();
        let ns = ns.to_owned();
        tokio::spawn(async move { instance::reconcile(&ns, &name(i), &ctx).await.unwrap() })
    });
    for r in futures::future::join_all(runs).await {
        r.unwrap();
    }
}

// Twenty rounds in four tests of five (each on a cluster of its own, run in parallel), so no
// one test nears the runner's time limit on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_instances_creating_one_object_at_once_leave_exactly_one_owner_rounds_0_to_4() {
    rounds(0..5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_instances_creating_one_object_at_once_leave_exactly_one_owner_rounds_5_to_9() {
    rounds(5..10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_instances_creating_one_object_at_once_leave_exactly_one_owner_rounds_10_to_14() {
    rounds(10..15).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_instances_creating_one_object_at_once_leave_exactly_one_owner_rounds_15_to_19() {
    rounds(15..ROUNDS).await;
}

async fn rounds(rounds: std::ops::Range<usize>) {
    let env = env().await;
    let ctx = context_for(&env, "race", |ctx| {
        ctx.renderer = Some(Arc::new(Shared));
    });
    create(&platforms(&env.client), Platform::test().without_catalogs()).await;
    platform::reconcile("cluster", &ctx).await.unwrap();
    for round in rounds {
        let ns = format!("race-{round}");
        namespace(&env.client, &ns).await;
        let mis: Api<ModuleInstance> = Api::namespaced(env.client.clone(), &ns);
        futures::future::join_all((0..N).map(|i| {
            let mi = ModuleInstance::test().named(&ns, &name(i)).with_prune(true);
            create(&mis, mi)
        }))
        .await;
        // The finalizers, so the next reconcile of every instance renders and applies.
        reconcile_all(&ctx, &ns).await;
        // Watch the shared object from before the race: every owner label it ever carries.
        let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
        let rv = cms
            .list_metadata(&Default::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap_or_default();
        let watch = cms.watch(&WatchParams::default(), &rv).await.unwrap();
        let owners = Arc::new(Mutex::new(BTreeSet::new()));
        let seen = {
            let owners = owners.clone();
            tokio::spawn(async move {
                let mut watch = watch.boxed();
                while let Ok(Some(ev)) = watch.try_next().await {
                    let (WatchEvent::Added(o) | WatchEvent::Modified(o)) = ev else {
                        continue;
                    };
                    if o.metadata.name.as_deref() == Some(SHARED) {
                        if let Some(u) = o.metadata.labels.as_ref().and_then(|l| l.get(UUID_LABEL))
                        {
                            owners.lock().unwrap().insert(u.clone());
                        }
                    }
                }
            })
        };

        reconcile_all(&ctx, &ns).await;

        let shared = cms.get(SHARED).await.unwrap();
        let labels = shared.metadata.labels.clone().unwrap_or_default();
        let owner = labels
            .get("module-instance.opmodel.dev/name")
            .cloned()
            .unwrap_or_default();
        let mut winners = Vec::new();
        for i in 0..N {
            let (s, reason, message) = ready(&env.client, &ns, &name(i)).await;
            if s == "True" {
                winners.push(name(i));
            } else {
                assert_eq!(
                    reason,
                    "OwnershipConflict",
                    "round {round}, {}: {message}",
                    name(i)
                );
                assert!(
                    message.contains(&format!("{ns}/{owner}")),
                    "round {round}: {message}"
                );
                assert!(
                    cms.get_opt(&format!("{}-own", name(i)))
                        .await
                        .unwrap()
                        .is_none(),
                    "round {round}: the loser {} left its object behind",
                    name(i)
                );
            }
        }
        assert_eq!(winners, vec![owner.clone()], "round {round}: one owner");
        assert_eq!(labels.get(UUID_LABEL), Some(&uuid_of(&owner)));
        assert!(
            cms.get_opt(&format!("{owner}-own"))
                .await
                .unwrap()
                .is_some(),
            "round {round}: the owner's own object"
        );

        // A second round: nothing is rewritten, the owner stays.
        reconcile_all(&ctx, &ns).await;
        let again = cms.get(SHARED).await.unwrap();
        assert_eq!(
            again.metadata.resource_version, shared.metadata.resource_version,
            "round {round}: the shared object was rewritten"
        );
        for i in 0..N {
            let (s, reason, _) = ready(&env.client, &ns, &name(i)).await;
            let want = if name(i) == owner { "True" } else { "False" };
            assert_eq!(s, want, "round {round}, {}: {reason}", name(i));
        }
        // The watch saw one owner only: the labels never changed hands.
        assert!(
            eventually(10, || {
                let o = owners.clone();
                async move { !o.lock().unwrap().is_empty() }
            })
            .await,
            "round {round}: the watch saw no event"
        );
        seen.abort();
        let owners = owners.lock().unwrap().clone();
        assert_eq!(
            owners,
            BTreeSet::from([uuid_of(&owner)]),
            "round {round}: the owner label changed hands"
        );
    }
}
