//! Flux source artifacts over real HTTP on loopback (docs/design/operator.md §2.3 step 4): the download
//! limits, the status check and the digest check, then extraction of what was verified.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

use std::net::SocketAddr;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use opm_operator::registry::flux::{self as artifact, Error, Limits};
use sha2::{Digest as _, Sha256};

fn tgz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (path, content) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(content.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, *content).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Serves `/ok.tar.gz`, `/missing` (404), `/big` (Content-Length over the limit) and `/stream`
/// (chunked, no Content-Length, over the limit).
async fn serve(artifact: Vec<u8>) -> SocketAddr {
    let ok = artifact.clone();
    let app = Router::new()
        .route(
            "/ok.tar.gz",
            get(move || {
                let ok = ok.clone();
                async move { ok }
            }),
        )
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
        .route(
            "/big",
            get(|| async {
                Response::builder()
                    .header(header::CONTENT_LENGTH, "2000")
                    .body(Body::from(vec![0u8; 2000]))
                    .unwrap()
            }),
        )
        .route(
            "/stream",
            get(|| async {
                let chunks = futures::stream::iter(
                    (0..20).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![0u8; 100]))),
                );
                Response::builder().body(Body::from_stream(chunks)).unwrap()
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test]
async fn a_verified_artifact_is_extracted_and_removed_on_drop() {
    let bytes = tgz(&[("apps/web/instance.cue", b"package web\n")]);
    let addr = serve(bytes.clone()).await;
    let fetched = artifact::fetch(
        &format!("http://{addr}/ok.tar.gz"),
        &digest(&bytes),
        &Limits::default(),
    )
    .await
    .unwrap();
    let root = fetched.root().to_path_buf();
    assert!(root
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("opm-modulepackage-artifact-"));
    let dir = artifact::package_dir(&root, "apps/web").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("instance.cue")).unwrap(),
        "package web\n"
    );
    drop(fetched);
    assert!(!root.exists(), "the temporary directory is removed");
}

#[tokio::test]
async fn download_failures_are_typed_fetch_failures() {
    let bytes = tgz(&[("instance.cue", b"package x\n")]);
    let addr = serve(bytes.clone()).await;
    let small = Limits {
        max_download: 1000,
        ..Limits::default()
    };
    let good = digest(&bytes);
    type Case = (String, String, Limits, fn(&Error) -> bool);
    let cases: Vec<Case> = vec![
        (
            format!("http://{addr}/missing"),
            good.clone(),
            Limits::default(),
            |e| matches!(e, Error::Status { status: 404, .. }),
        ),
        (
            format!("http://{addr}/ok.tar.gz"),
            digest(b"other"),
            Limits::default(),
            |e| matches!(e, Error::DigestMismatch { .. }),
        ),
        (format!("http://{addr}/big"), good.clone(), small, |e| {
            matches!(e, Error::TooLarge { limit: 1000 })
        }),
        (format!("http://{addr}/stream"), good.clone(), small, |e| {
            matches!(e, Error::TooLarge { limit: 1000 })
        }),
        (
            format!("https://{addr}/ok.tar.gz"),
            good.clone(),
            Limits::default(),
            |e| matches!(e, Error::Url { .. }),
        ),
        (
            format!("http://{addr}/ok.tar.gz"),
            "sha1:abc".to_string(),
            Limits::default(),
            |e| matches!(e, Error::BadDigest(_)),
        ),
        // Nothing listens on port 9 of loopback.
        (
            "http://127.0.0.1:9/x".to_string(),
            good.clone(),
            Limits::default(),
            |e| matches!(e, Error::Transport { .. }),
        ),
    ];
    for (url, d, limits, check) in cases {
        let err = artifact::fetch(&url, &d, &limits).await.unwrap_err();
        assert!(check(&err), "{url}: {err:?}");
        assert!(!err.to_string().is_empty());
    }
}
