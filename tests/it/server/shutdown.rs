//! Graceful shutdown: an in-flight request completes, readiness drops, new connections are refused.

use std::time::Duration;

use bytes::Bytes;

use super::common::*;
use opm_operator::server::PLATFORMS_PATH;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_request_completes_during_graceful_shutdown() {
    let server = TestServer::start().await;
    let addr = server.running.webhook_addr;
    let body = platform_create_review("drain-1");
    let (head, tail) = body.split_at(body.len() / 2);

    // Start a request and send half of its body: it is in flight on the server.
    let (mut send, conn) = server.webhook_http1().await;
    tokio::spawn(conn);
    let (tx, req) = streamed_post(PLATFORMS_PATH, body.len());
    let pending = tokio::spawn(async move { send.send_request(req).await });
    tx.send(Bytes::copy_from_slice(head)).await.unwrap();
    eventually("the request in flight", Duration::from_secs(10), || async {
        metric_value(
            &server.metrics().await,
            r#"http_requests_in_flight{listener="webhook"}"#,
        ) == Some(1.0)
    })
    .await;

    server.running.shutdown();
    // Readiness drops at once, while the probe listener still answers.
    let ready = get_plain(server.running.probe_addr, "/readyz")
        .await
        .unwrap();
    assert_eq!(ready.status, 503);
    // The webhook listener stops accepting.
    eventually(
        "new connections refused",
        Duration::from_secs(10),
        || async { tokio::net::TcpStream::connect(addr).await.is_err() },
    )
    .await;

    // The in-flight request still completes with its review.
    tx.send(Bytes::copy_from_slice(tail)).await.unwrap();
    drop(tx);
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, pending)
        .await
        .expect("client timeout")
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["response"]["uid"], "drain-1");
    assert_eq!(v["response"]["allowed"], true, "{v}");

    tokio::time::timeout(Duration::from_secs(10), server.running.wait())
        .await
        .expect("the server stops after draining")
        .unwrap();
}
