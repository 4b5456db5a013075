//! Probes and metrics: readiness after bind, JSON probe bodies, request and cert counters.

use std::time::Duration;

use super::common::*;
use opm_operator::server::{self, Settings, TRANSFORMER_REGISTRATIONS_PATH as TR};

#[tokio::test]
async fn readyz_is_200_after_bind_and_healthz_is_200() {
    let server = TestServer::start().await;
    let ready = get_plain(server.running.probe_addr, "/readyz")
        .await
        .unwrap();
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert_eq!(ready.json()["status"], "ready");
    let health = get_plain(server.running.probe_addr, "/healthz")
        .await
        .unwrap();
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["status"], "ok");
    let missing = get_plain(server.running.probe_addr, "/nope").await.unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(missing.error_code(), "not_found");
}

#[tokio::test]
async fn readyz_is_503_json_when_not_serving() {
    let server = TestServer::start().await;
    server.running.state.set_ready(false);
    let r = get_plain(server.running.probe_addr, "/readyz")
        .await
        .unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(r.error_code(), "not_ready");
}

#[tokio::test]
async fn metrics_count_requests_reviews_and_cert_state() {
    let server = TestServer::start().await;
    let ok = to_bytes(&review(
        "m-1",
        tr_request(
            "CREATE",
            Some(tr_object(
                "opm-system.k8s-provider",
                "example.com/catalogs/k8s@v1",
                "1.2.0",
            )),
            None,
        ),
    ));
    for _ in 0..3 {
        assert_eq!(server.post(TR, ok.clone()).await.status, 200);
    }
    assert_eq!(server.post(TR, b"{".to_vec()).await.status, 400);
    assert_eq!(server.post("/x", Vec::new()).await.status, 404);
    let text = server.metrics().await;
    let v = |s: &str| metric_value(&text, s).unwrap_or_else(|| panic!("no {s} in\n{text}"));
    assert_eq!(
        v(r#"admission_reviews_total{webhook="transformerregistrations",result="allowed"}"#),
        3.0
    );
    assert_eq!(
        v(r#"admission_reviews_total{webhook="transformerregistrations",result="error"}"#),
        1.0
    );
    assert_eq!(
        v(
            r#"http_requests_total{listener="webhook",route="/validate/transformerregistrations",method="POST",status="200"}"#
        ),
        3.0
    );
    assert_eq!(
        v(
            r#"http_requests_total{listener="webhook",route="unmatched",method="POST",status="404"}"#
        ),
        1.0
    );
    assert_eq!(
        v(
            r#"admission_review_duration_seconds_count{webhook="transformerregistrations",result="allowed"}"#
        ),
        3.0
    );
    assert_eq!(v(r#"cert_reload_total{result="success"}"#), 0.0);
    assert_eq!(v(r#"cert_reload_total{result="failure"}"#), 0.0);
    let not_after = v("cert_not_after_seconds");
    assert_eq!(not_after as i64, server.store.info().not_after_unix);
    let content_type = get_plain(server.running.metrics_addr.unwrap(), "/metrics")
        .await
        .unwrap()
        .headers["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
}

#[tokio::test]
async fn metrics_share_the_probe_listener_when_addresses_are_equal() {
    setup();
    // Find a free port, then ask for the same address for both listeners.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let shared = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut settings = Settings::loopback();
    settings.probe_addr = shared;
    settings.metrics_addr = Some(shared);
    let ca = certs::self_signed::Ca::new("ca").unwrap();
    let leaf = ca.issue_server(&localhost_sans()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    secret_swap(dir.path(), "1", &leaf.cert_pem, &leaf.key_pem);
    let store = certs::CertStore::load(certs::TlsPaths {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
        client_ca: None,
    })
    .unwrap();
    let running = server::start(settings, store).await.unwrap();
    assert_eq!(running.metrics_addr, Some(running.probe_addr));
    let m = get_plain(running.probe_addr, "/metrics").await.unwrap();
    assert_eq!(m.status, 200);
    assert!(m.text().contains("cert_not_after_seconds"));
    running.shutdown();
    tokio::time::timeout(Duration::from_secs(10), running.wait())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_taken_port_is_a_bind_error_naming_the_listener() {
    setup();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut settings = Settings::loopback();
    settings.probe_addr = taken.local_addr().unwrap();
    let ca = certs::self_signed::Ca::new("ca").unwrap();
    let leaf = ca.issue_server(&localhost_sans()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    secret_swap(dir.path(), "1", &leaf.cert_pem, &leaf.key_pem);
    let store = certs::CertStore::load(certs::TlsPaths {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
        client_ca: None,
    })
    .unwrap();
    let err = server::start(settings, store).await.unwrap_err();
    assert!(err.to_string().contains("probe"), "{err}");
}
