//! The head deadline (slow-loris): an HTTP/1 connection that starts no request and has none in
//! flight for a whole `head_timeout` period is closed, while one that keeps sending requests, or
//! has a request in flight (a slow body), is not.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::common::*;
use opm_operator::server::{Limits, PLATFORMS_PATH};

const PERIOD: Duration = Duration::from_millis(200);

async fn server() -> TestServer {
    let mut opts = Options::default();
    opts.settings.limits = Limits::with_timeout(Duration::from_secs(5), 2);
    opts.settings.limits.head_timeout = PERIOD;
    TestServer::start_with(opts).await
}

#[tokio::test]
async fn a_stalled_request_head_is_closed_within_two_periods() {
    let server = server().await;
    let mut tls = server
        .client
        .connect(server.running.webhook_addr)
        .await
        .unwrap();
    tls.write_all(b"POST /validate/platforms HTTP/1.1\r\nhost: localhost\r\n")
        .await
        .unwrap();
    tls.flush().await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(REQUEST_TIMEOUT, tls.read(&mut buf))
        .await
        .expect("the server never closed the stalled connection");
    // EOF, or a reset: either way the server hung up without answering.
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let elapsed = started.elapsed();
    assert!(
        elapsed < PERIOD * 2 + Duration::from_millis(300),
        "closed only after {elapsed:?}"
    );
}

#[tokio::test]
async fn a_busy_connection_stays_open_and_an_idle_one_is_closed() {
    let server = server().await;
    let (mut send, conn) = server.webhook_http1().await;
    let conn = tokio::spawn(conn);
    // Five head periods of requests, one every half period, all on this connection.
    for i in 0..10 {
        let req = http::Request::post(PLATFORMS_PATH)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(Bytes::from(
                platform_create_review(&format!("busy-{i}")),
            )))
            .unwrap();
        let resp = tokio::time::timeout(REQUEST_TIMEOUT, send.send_request(req))
            .await
            .expect("client timeout")
            .unwrap();
        assert_eq!(resp.status(), 200);
        tokio::time::sleep(PERIOD / 2).await;
    }
    // Then idle: the server closes it within two periods.
    let started = Instant::now();
    tokio::time::timeout(REQUEST_TIMEOUT, conn)
        .await
        .expect("the idle connection was never closed")
        .unwrap()
        .ok();
    assert!(started.elapsed() < PERIOD * 2 + Duration::from_millis(300));
}

#[tokio::test]
async fn a_request_in_flight_outlives_the_head_deadline() {
    let server = server().await;
    let (mut send, conn) = server.webhook_http1().await;
    tokio::spawn(conn);
    let body = platform_create_review("slow-body");
    let (tx, req) = streamed_post(PLATFORMS_PATH, body.len());
    let pending = tokio::spawn(async move { send.send_request(req).await });
    // The body trickles in over four periods; the request is in flight all along.
    for chunk in body.chunks(body.len() / 4 + 1) {
        tokio::time::sleep(PERIOD).await;
        tx.send(Bytes::copy_from_slice(chunk)).await.unwrap();
    }
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, pending)
        .await
        .expect("client timeout")
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200);
}
