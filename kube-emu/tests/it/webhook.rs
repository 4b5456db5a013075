//! Validating admission webhooks served over TLS by an axum + rustls server in the test, with
//! a certificate made by rcgen and trusted through `caBundle`.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use axum::Json;
use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_emu::{Emulator, Options};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::common::*;

/// A TLS listener for `axum::serve`: failed handshakes are skipped.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok((s, a)) = self.tcp.accept().await {
                if let Ok(tls) = self.acceptor.accept(s).await {
                    return (tls, a);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

pub type Seen = Arc<Mutex<Vec<Value>>>;

async fn validate(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    let req = &review["request"];
    seen.lock().push(req.clone());
    let uid = req["uid"].clone();
    let forbidden = req["object"]["data"].get("forbidden").is_some();
    let response = if forbidden {
        json!({"uid": uid, "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "key \"forbidden\" is not allowed"}})
    } else {
        json!({"uid": uid, "allowed": true})
    };
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// Starts the webhook; returns its base URL, the base64 CA bundle and the received requests.
pub async fn serve_webhook() -> (String, String, Seen) {
    let ck = rcgen::generate_simple_self_signed(vec![
        "127.0.0.1".to_string(),
        "hook.sys.svc".to_string(),
    ])
    .unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(ck.cert.pem());
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![ck.cert.der().clone()], key)
    .unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route("/validate", post(validate))
        .with_state(seen.clone());
    let listener = TlsListener {
        tcp,
        acceptor: TlsAcceptor::from(Arc::new(cfg)),
    };
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("https://127.0.0.1:{port}"), ca, seen)
}

pub fn vwc(
    name: &str,
    client_config: Value,
    failure_policy: &str,
    object_selector: Option<Value>,
) -> ValidatingWebhookConfiguration {
    let mut wh = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "Namespaced"}],
        "failurePolicy": failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    });
    if let Some(s) = object_selector {
        wh["objectSelector"] = s;
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": [wh]})).unwrap()
}

fn cm(name: &str, data: Value, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": data}))
        .unwrap()
}

#[tokio::test]
async fn webhook_denies_create_with_its_message() {
    let (url, ca, seen) = serve_webhook().await;
    let emu = start().await;
    let client = emu.client().unwrap();
    let cfg = vwc(
        "deny.example.com",
        json!({"url": format!("{url}/validate"), "caBundle": ca}),
        "Fail",
        None,
    );
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &cfg)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(
        &PostParams::default(),
        &cm("ok", json!({"a": "1"}), json!({})),
    )
    .await
    .unwrap();
    let s = api_status(
        api.create(
            &PostParams::default(),
            &cm("bad", json!({"forbidden": "1"}), json!({})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(s.code, 403);
    assert_eq!(s.message, "admission webhook \"deny.example.com\" denied the request: key \"forbidden\" is not allowed");
    assert_eq!(api_status(api.get("bad").await.unwrap_err()).code, 404);
    let s = api_status(
        api.patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"forbidden": "x"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(s.code, 403);
    let reqs = seen.lock().clone();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["operation"], "CREATE");
    assert_eq!(
        reqs[0]["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(reqs[0]["namespace"], "default");
    assert_eq!(reqs[0]["userInfo"]["username"], "kube-emu-admin");
    assert_eq!(reqs[2]["operation"], "UPDATE");
    assert_eq!(reqs[2]["oldObject"]["data"], json!({"a": "1"}));
}

#[tokio::test]
async fn webhook_service_mapping_selectors_and_failure_policy() {
    let (url, ca, seen) = serve_webhook().await;
    let emu = Emulator::start(Options {
        service_urls: [("sys/hook".to_string(), url)].into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = emu.client().unwrap();
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let svc = json!({"service": {"namespace": "sys", "name": "hook", "path": "/validate"}, "caBundle": ca});
    vwcs.create(
        &PostParams::default(),
        &vwc(
            "svc.example.com",
            svc,
            "Fail",
            Some(json!({"matchLabels": {"checked": "yes"}})),
        ),
    )
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    // Not selected by objectSelector: the webhook is not called.
    api.create(
        &PostParams::default(),
        &cm("free", json!({"forbidden": "1"}), json!({})),
    )
    .await
    .unwrap();
    assert!(seen.lock().is_empty());
    let s = api_status(
        api.create(
            &PostParams::default(),
            &cm("b", json!({"forbidden": "1"}), json!({"checked": "yes"})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        s.message
            .starts_with("admission webhook \"svc.example.com\" denied the request"),
        "{}",
        s.message
    );
    // An unreachable webhook: ignored under Ignore, fatal under Fail.
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!(
        "https://127.0.0.1:{}/validate",
        dead.local_addr().unwrap().port()
    );
    drop(dead);
    vwcs.create(
        &PostParams::default(),
        &vwc(
            "dead.example.com",
            json!({"url": dead_url, "caBundle": ca}),
            "Ignore",
            None,
        ),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("c", json!({}), json!({})))
        .await
        .unwrap();
    vwcs.patch(
        "dead.example.com",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([
        {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}]))
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    let s = api_status(
        api.create(&PostParams::default(), &cm("d", json!({}), json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 500);
    assert!(
        s.message
            .contains("failed calling webhook \"dead.example.com\""),
        "{}",
        s.message
    );
}
