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

/// A response sent before its request body was read (here a 415 for a non-JSON body that is
/// still on its way) says `connection: close` on HTTP/1: hyper closes such a connection unless
/// the rest of the body happens to be buffered already, and a client that reused it would race
/// that close and see its next request fail with an EOF. A request whose body was read keeps
/// the connection open.
#[tokio::test]
async fn an_answer_sent_before_the_body_is_read_says_the_connection_closes() {
    let server = TestServer::start().await;
    let (mut send, conn) = server.webhook_http1().await;
    let conn = tokio::spawn(conn);
    let read = http::Request::post(PLATFORMS_PATH)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(http_body_util::Either::Left(http_body_util::Full::new(
            Bytes::from(platform_create_review("read-body")),
        )))
        .unwrap();
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, send.send_request(read))
        .await
        .expect("client timeout")
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers().get(http::header::CONNECTION), None);
    let (tx, req) = streamed_post(PLATFORMS_PATH, 64);
    let (mut parts, body) = req.into_parts();
    parts.headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    let unread = http::Request::from_parts(parts, http_body_util::Either::Right(body));
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, send.send_request(unread))
        .await
        .expect("client timeout")
        .unwrap();
    assert_eq!(resp.status(), 415);
    assert_eq!(
        resp.headers()
            .get(http::header::CONNECTION)
            .map(|v| v.as_bytes()),
        Some(&b"close"[..]),
        "{:?}",
        resp.headers()
    );
    drop(tx);
    tokio::time::timeout(REQUEST_TIMEOUT, conn)
        .await
        .expect("the server kept the connection open")
        .unwrap()
        .ok();
}
