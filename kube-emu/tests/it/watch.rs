//! Watch streams: resume from a resourceVersion, 410 for versions older than the window,
//! bookmarks, timeoutSeconds, selector transitions and kube-runtime's watcher (both initial
//! list strategies).

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::ResourceExt;
use kube_emu::{Emulator, Options};
use serde_json::json;

use crate::common::*;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "x"}}, "data": {"k": "v"}}),
    )
    .unwrap()
}

async fn next<S, T>(s: &mut S) -> T
where
    S: futures::Stream<Item = Result<T, kube::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("watch event within 10s")
        .expect("stream open")
        .unwrap()
}

fn describe(ev: &WatchEvent<ConfigMap>) -> String {
    match ev {
        WatchEvent::Added(o) => format!("ADDED {}", o.name_any()),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.name_any()),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.name_any()),
        WatchEvent::Bookmark(_) => "BOOKMARK".into(),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

#[tokio::test]
async fn watch_resumes_from_resource_version() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    let a = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("b", &Default::default()).await.unwrap();
    let mut s = api
        .watch(&WatchParams::default(), &a.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next(&mut s).await));
    }
    assert_eq!(seen, ["ADDED b", "MODIFIED a", "DELETED b"]);
    // Live events follow the replay.
    api.create(&PostParams::default(), &cm("c")).await.unwrap();
    assert_eq!(describe(&next(&mut s).await), "ADDED c");
}

#[tokio::test]
async fn watch_from_expired_version_is_gone() {
    let emu = Emulator::start(Options {
        history_limit: 5,
        ..Default::default()
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    let first = api.create(&PostParams::default(), &cm("c0")).await.unwrap();
    for i in 1..12 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let mut s = api
        .watch(&WatchParams::default(), &first.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    match next(&mut s).await {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert!(
                e.message.contains("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected 410, got {}", describe(&other)),
    }
    // A recent version inside the window still resumes.
    let rv = (emu.resource_version() - 2).to_string();
    let mut s = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert_eq!(describe(&next(&mut s).await), "ADDED c10");
}

#[tokio::test]
async fn watch_bookmarks_selectors_and_timeout() {
    let emu = Emulator::start(Options {
        bookmark_interval: Duration::from_millis(50),
        ..Default::default()
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = emu.resource_version().to_string();
    let wp = WatchParams::default().labels("app=x").timeout(2);
    let mut s = api.watch(&wp, &rv).await.unwrap().boxed();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "x"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    // The stream ends by itself once timeoutSeconds pass (bounded here at 10s).
    let all = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = s.next().await {
            kinds.push(describe(&ev.unwrap()));
        }
    })
    .await;
    assert!(all.is_ok(), "watch must end after timeoutSeconds");
    let non_bm: Vec<_> = kinds.iter().filter(|k| *k != "BOOKMARK").cloned().collect();
    assert_eq!(
        non_bm,
        ["DELETED a", "ADDED a"],
        "leaving and re-entering the selection"
    );
    assert!(kinds.iter().any(|k| k == "BOOKMARK"));
}

#[tokio::test]
async fn kube_runtime_watcher_lists_and_streams() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    for cfg in [
        watcher::Config::default().page_size(1),
        watcher::Config::default().streaming_lists(),
    ] {
        let mut s = watcher(api.clone(), cfg).boxed();
        let mut init = Vec::new();
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(10), s.try_next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            match ev {
                watcher::Event::Init => {}
                watcher::Event::InitApply(o) => init.push(o.name_any()),
                watcher::Event::InitDone => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(init.contains(&"a".to_string()));
        let name = format!("n{}", init.len());
        api.create(&PostParams::default(), &cm(&name))
            .await
            .unwrap();
        let ev = tokio::time::timeout(Duration::from_secs(10), s.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match ev {
            watcher::Event::Apply(o) => assert_eq!(o.name_any(), name),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn metadata_watcher_sees_partial_objects() {
    let emu = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(emu.client().unwrap());
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let meta: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::default_namespaced(emu.client().unwrap());
    let mut s = watcher(meta, watcher::Config::default()).boxed();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), s.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match ev {
            watcher::Event::InitApply(o) => assert_eq!(o.metadata.name.as_deref(), Some("a")),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(10), s.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match ev {
        watcher::Event::Apply(o) => {
            assert_eq!(o.metadata.name.as_deref(), Some("b"));
            assert_eq!(
                o.types.as_ref().map(|t| t.kind.as_str()),
                Some("PartialObjectMetadata")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}
