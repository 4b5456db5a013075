//! Request-fault injection over HTTP: a matching request gets the injected Status and never
//! reaches the store; non-matching requests and dry-run filters behave as configured.

use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube_emu::fault::{FaultKind, FaultRule};
use kube_emu::{Emulator, Options};

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn faults_answer_matching_requests_and_write_nothing() {
    let emu = Emulator::start(Options::default()).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(emu.client().unwrap(), "default");
    emu.inject_fault(
        FaultRule::any(2, FaultKind::Internal)
            .method(Method::POST)
            .path_contains("/configmaps"),
    );
    let before = emu.requests_served();
    for _ in 0..2 {
        match api.create(&PostParams::default(), &cm("a")).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"))
            }
            other => panic!("expected an injected 500, got {other:?}"),
        }
    }
    assert!(api.get_opt("a").await.unwrap().is_none(), "nothing written");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    assert_eq!(emu.faults_fired(), 2);
    assert!(emu.requests_served() - before >= 4);

    // A dry-run-only conflict leaves real writes alone.
    emu.inject_fault(FaultRule::any(1, FaultKind::Conflict).dry_run(true));
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&dry, &cm("c")).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 409),
        other => panic!("expected an injected 409, got {other:?}"),
    }
    emu.inject_fault(FaultRule::any(5, FaultKind::Internal));
    emu.clear_faults();
    assert!(api.get_opt("b").await.unwrap().is_some());
    assert_eq!(emu.faults_fired(), 3);
    emu.shutdown().await;
}
