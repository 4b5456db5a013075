//! AdmissionReview cases through the real router over real TLS: allowed and denied for both kinds
//! and every operation, and every kind of bad input with its documented status and JSON body.

use serde_json::{json, Value};

use super::common::*;
use opm_operator::server::{PLATFORMS_PATH as PLAT, TRANSFORMER_REGISTRATIONS_PATH as TR};

enum Expect {
    /// 200 with a review whose `response.allowed` is this, `response.uid` the request's.
    Review(bool),
    /// This status with the JSON error shape and this code.
    Error(u16, &'static str),
}

async fn check(path: &str, body: Vec<u8>, content_type: Option<&str>, expect: Expect) -> Resp {
    let server = TestServer::start().await;
    let sent_uid = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["request"]["uid"].as_str().map(str::to_string));
    let resp = server.post_with(path, body, content_type).await;
    match expect {
        Expect::Review(allowed) => {
            assert_eq!(resp.status, 200, "{}", resp.text());
            let v = resp.json();
            assert_eq!(v["apiVersion"], "admission.k8s.io/v1", "{v}");
            assert_eq!(v["kind"], "AdmissionReview", "{v}");
            assert_eq!(
                v["response"]["uid"].as_str(),
                sent_uid.as_deref(),
                "uid echo: {v}"
            );
            assert_eq!(v["response"]["allowed"], json!(allowed), "{v}");
            if !allowed {
                let msg = v["response"]["status"]["message"].as_str().unwrap_or("");
                assert!(!msg.is_empty(), "a denial says why: {v}");
            }
        }
        Expect::Error(status, code) => {
            assert_eq!(resp.status, status, "{}", resp.text());
            assert_eq!(resp.error_code(), code);
        }
    }
    resp
}

fn tr_ok() -> Value {
    tr_object(
        "opm-system.k8s-provider",
        "example.com/catalogs/k8s@v1",
        "1.2.0",
    )
}

macro_rules! cases {
    ($( $name:ident: $path:expr, $body:expr, $ct:expr => $expect:expr; )*) => {
        $(
            #[tokio::test]
            async fn $name() {
                check($path, $body, $ct, $expect).await;
            }
        )*
    };
}

const JSON: Option<&str> = Some("application/json");

cases! {
    // TransformerRegistration: allowed.
    tr_create_allowed: TR, to_bytes(&review("u-1", tr_request("CREATE", Some(tr_ok()), None))), JSON
        => Expect::Review(true);
    tr_update_version_bump_allowed: TR, to_bytes(&review("u-2", tr_request("UPDATE",
        Some(tr_object("opm-system.k8s-provider", "example.com/catalogs/k8s@v1", "1.3.0")),
        Some(tr_ok())))), JSON
        => Expect::Review(true);
    tr_delete_allowed: TR, to_bytes(&review("u-3", tr_request("DELETE", None, Some(tr_ok())))), JSON
        => Expect::Review(true);
    tr_create_dry_run_allowed: TR, {
        let mut r = review("u-4", tr_request("CREATE", Some(tr_ok()), None));
        r["request"]["dryRun"] = json!(true);
        to_bytes(&r)
    }, JSON => Expect::Review(true);
    tr_status_subresource_allowed: TR, {
        let mut r = review("u-5", tr_request("UPDATE", Some(tr_ok()), Some(tr_ok())));
        r["request"]["subResource"] = json!("status");
        to_bytes(&r)
    }, JSON => Expect::Review(true);
    // TransformerRegistration: denied.
    tr_create_name_mismatch_denied: TR, to_bytes(&review("u-6", tr_request("CREATE",
        Some({ let mut o = tr_ok(); o["metadata"]["name"] = json!("other.name"); o }), None))), JSON
        => Expect::Review(false);
    tr_create_bad_catalog_denied: TR, to_bytes(&review("u-7", tr_request("CREATE",
        Some(tr_object("opm-system.k8s-provider", "Example.com/catalogs/k8s", "1.2.0")), None))), JSON
        => Expect::Review(false);
    tr_create_version_range_denied: TR, to_bytes(&review("u-8", tr_request("CREATE",
        Some(tr_object("opm-system.k8s-provider", "example.com/catalogs/k8s@v1", "^1.2.0")), None))), JSON
        => Expect::Review(false);
    tr_create_major_mismatch_denied: TR, to_bytes(&review("u-9", tr_request("CREATE",
        Some(tr_object("opm-system.k8s-provider", "example.com/catalogs/k8s@v2", "1.2.0")), None))), JSON
        => Expect::Review(false);
    tr_create_reserved_namespace_denied: TR, to_bytes(&review("u-10", tr_request("CREATE",
        Some(tr_object("opm-system.k8s-provider", "opmodel.dev/platforms/cluster@v0", "0.1.0")), None))), JSON
        => Expect::Review(false);
    tr_update_catalog_change_denied: TR, to_bytes(&review("u-11", tr_request("UPDATE",
        Some(tr_object("opm-system.k8s-provider", "example.com/catalogs/other@v1", "1.2.0")),
        Some(tr_ok())))), JSON
        => Expect::Review(false);
    tr_create_transformer_fqn_in_provides_denied: TR, to_bytes(&review("u-12", tr_request("CREATE",
        Some({ let mut o = tr_ok(); o["spec"]["provides"] = json!(["example.com/t/deploy@1.2.3"]); o }), None))), JSON
        => Expect::Review(false);
    tr_wrong_resource_kind_denied: TR, to_bytes(&review("u-13",
        platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None))), JSON
        => Expect::Review(false);

    // Platform: allowed.
    platform_create_allowed: PLAT, to_bytes(&review("p-1",
        platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None))), JSON
        => Expect::Review(true);
    platform_update_allowed: PLAT, to_bytes(&review("p-2", platform_request("UPDATE",
        Some(platform_object("cluster", "2.2.0")), Some(platform_object("cluster", "2.1.0"))))), JSON
        => Expect::Review(true);
    platform_delete_allowed: PLAT, to_bytes(&review("p-3",
        platform_request("DELETE", None, Some(platform_object("cluster", "2.1.0"))))), JSON
        => Expect::Review(true);
    platform_content_type_with_charset_allowed: PLAT, to_bytes(&review("p-4",
        platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None))),
        Some("application/json; charset=utf-8")
        => Expect::Review(true);
    platform_no_content_type_allowed: PLAT, to_bytes(&review("p-5",
        platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None))), None
        => Expect::Review(true);
    // Platform: denied.
    platform_create_not_cluster_denied: PLAT, to_bytes(&review("p-6",
        platform_request("CREATE", Some(platform_object("prod", "2.1.0")), None))), JSON
        => Expect::Review(false);
    platform_create_v_prefixed_version_denied: PLAT, to_bytes(&review("p-7",
        platform_request("CREATE", Some(platform_object("cluster", "v2.1.0")), None))), JSON
        => Expect::Review(false);
    platform_create_major_mismatch_denied: PLAT, to_bytes(&review("p-8",
        platform_request("CREATE", Some(platform_object("cluster", "3.0.0")), None))), JSON
        => Expect::Review(false);
    platform_update_bad_skew_policy_denied: PLAT, to_bytes(&review("p-9", platform_request("UPDATE",
        Some({ let mut o = platform_object("cluster", "2.1.0"); o["spec"]["skewPolicy"] = json!("Ignore"); o }),
        Some(platform_object("cluster", "2.1.0"))))), JSON
        => Expect::Review(false);
    platform_wrong_resource_kind_denied: PLAT, to_bytes(&review("p-10",
        tr_request("CREATE", Some(tr_ok()), None))), JSON
        => Expect::Review(false);

    // Bad input: the documented 4xx with the JSON error shape.
    malformed_json_400: PLAT, b"{\"apiVersion\": ".to_vec(), JSON
        => Expect::Error(400, "malformed_json");
    empty_body_400: TR, Vec::new(), JSON
        => Expect::Error(400, "malformed_json");
    json_array_400: TR, b"[1, 2]".to_vec(), JSON
        => Expect::Error(400, "not_an_object");
    v1beta1_review_400: PLAT, {
        let mut r = review("x-1", platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None));
        r["apiVersion"] = json!("admission.k8s.io/v1beta1");
        to_bytes(&r)
    }, JSON => Expect::Error(400, "wrong_api_version");
    wrong_kind_400: TR, {
        let mut r = review("x-2", tr_request("CREATE", Some(tr_ok()), None));
        r["kind"] = json!("ConversionReview");
        to_bytes(&r)
    }, JSON => Expect::Error(400, "wrong_kind");
    missing_request_400: TR, to_bytes(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})), JSON
        => Expect::Error(400, "missing_request");
    null_request_400: PLAT, to_bytes(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": null})), JSON
        => Expect::Error(400, "missing_request");
    missing_uid_400: PLAT, {
        let mut r = review("x", platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None));
        r["request"].as_object_mut().unwrap().remove("uid");
        to_bytes(&r)
    }, JSON => Expect::Error(400, "missing_uid");
    empty_uid_400: TR, to_bytes(&review("", tr_request("CREATE", Some(tr_ok()), None))), JSON
        => Expect::Error(400, "missing_uid");
    request_without_operation_400: TR, {
        let mut r = review("x-3", tr_request("CREATE", Some(tr_ok()), None));
        r["request"].as_object_mut().unwrap().remove("operation");
        to_bytes(&r)
    }, JSON => Expect::Error(400, "invalid_request");
    body_over_limit_413: PLAT, {
        // A syntactically valid review padded past 3 MiB.
        let mut r = review("x-4", platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None));
        r["request"]["object"]["metadata"]["annotations"] = json!({ "pad": "x".repeat(3 * 1024 * 1024) });
        to_bytes(&r)
    }, JSON => Expect::Error(413, "payload_too_large");
    text_content_type_415: PLAT, to_bytes(&review("x-5",
        platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None))), Some("text/plain")
        => Expect::Error(415, "unsupported_media_type");
    unknown_path_404: "/validate/modules", to_bytes(&review("x-6", tr_request("CREATE", Some(tr_ok()), None))), JSON
        => Expect::Error(404, "not_found");
    root_path_404: "/", Vec::new(), JSON
        => Expect::Error(404, "not_found");
}

#[tokio::test]
async fn get_on_a_webhook_route_is_405_json() {
    let server = TestServer::start().await;
    let req = http::Request::get(TR)
        .header("host", "localhost")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = server
        .client
        .request(server.running.webhook_addr, req)
        .await
        .unwrap();
    assert_eq!(resp.status, 405);
    assert_eq!(resp.error_code(), "method_not_allowed");
}

#[tokio::test]
async fn http2_is_negotiated_and_serves_reviews() {
    let server = TestServer::start().await;
    let client = TlsClient::new(server.ca.cert_pem(), None, &[b"h2", b"http/1.1"]);
    let body = to_bytes(&review("h2-1", tr_request("CREATE", Some(tr_ok()), None)));
    let req = http::Request::post(format!("https://localhost{TR}"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = client
        .request(server.running.webhook_addr, req)
        .await
        .unwrap();
    assert_eq!(resp.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["response"]["uid"], "h2-1");
}

#[tokio::test]
async fn mtls_requires_a_client_certificate_from_the_client_ca() {
    let server = TestServer::start_with(Options {
        client_ca: true,
        ..Options::default()
    })
    .await;
    let body = to_bytes(&review("m-1", tr_request("CREATE", Some(tr_ok()), None)));
    let req = || {
        http::Request::post(TR)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body.clone())))
            .unwrap()
    };
    // Without a client certificate the handshake (or the first read) fails.
    let anonymous = server
        .client
        .request(server.running.webhook_addr, req())
        .await;
    assert!(
        anonymous.is_err(),
        "served without a client certificate: {anonymous:?}"
    );
    // A certificate from another CA is refused too.
    let stranger = certs::self_signed::Ca::new("other CA").unwrap();
    let foreign = stranger.issue_client("apiserver").unwrap();
    let foreign_client = TlsClient::new(server.ca.cert_pem(), Some(&foreign), &[b"http/1.1"]);
    assert!(foreign_client
        .request(server.running.webhook_addr, req())
        .await
        .is_err());
    // A certificate from the client CA is served.
    let id = server.ca.issue_client("kube-apiserver").unwrap();
    let client = TlsClient::new(server.ca.cert_pem(), Some(&id), &[b"http/1.1"]);
    let resp = client
        .request(server.running.webhook_addr, req())
        .await
        .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["response"]["allowed"], true);
}

#[tokio::test]
async fn a_slow_body_gets_408_json_within_the_request_timeout() {
    let mut opts = Options::default();
    opts.settings.limits =
        opm_operator::server::Limits::with_timeout(std::time::Duration::from_millis(300), 2);
    let server = TestServer::start_with(opts).await;
    // Send headers promising a body that never arrives.
    let (mut send, conn) = server.webhook_http1().await;
    tokio::spawn(conn);
    let (_tx, req) = streamed_post(PLAT, 100);
    let started = std::time::Instant::now();
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, send.send_request(req))
        .await
        .expect("client timeout")
        .unwrap();
    assert_eq!(resp.status(), 408);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
}

#[tokio::test]
async fn an_evaluation_over_its_deadline_is_a_denial_that_says_so() {
    let mut opts = Options::default();
    opts.settings.limits =
        opm_operator::server::Limits::with_timeout(std::time::Duration::from_millis(400), 1);
    let server = TestServer::start_with(opts).await;
    // Hold the only evaluation permit: the review waits for it past its deadline.
    let permit = server
        .running
        .state
        .semaphore
        .clone()
        .acquire_owned()
        .await
        .unwrap();
    let resp = server
        .post(
            PLAT,
            to_bytes(&review(
                "slow-1",
                platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None),
            )),
        )
        .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    let v = resp.json();
    assert_eq!(v["response"]["uid"], "slow-1");
    assert_eq!(v["response"]["allowed"], false);
    let message = v["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("timed out"), "{message}");
    assert!(message.contains("Platform CREATE"), "{message}");
    let text = server.metrics().await;
    assert_eq!(
        metric_value(
            &text,
            r#"admission_reviews_total{webhook="platforms",result="timeout"}"#
        ),
        Some(1.0)
    );
    // With the permit free again, the same review is judged normally.
    drop(permit);
    let again = server
        .post(
            PLAT,
            to_bytes(&review(
                "slow-2",
                platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None),
            )),
        )
        .await;
    assert_eq!(again.json()["response"]["allowed"], true);
}
