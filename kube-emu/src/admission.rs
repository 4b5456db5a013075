//! Validating admission webhooks, called like the apiserver calls them.
//!
//! Rules: every webhook of every stored ValidatingWebhookConfiguration whose `rules` match the
//! request (operations, apiGroups, apiVersions, resources incl. `res/sub` and `*`, scope) and
//! whose `namespaceSelector`/`objectSelector` match is sent an `admission.k8s.io/v1`
//! AdmissionReview by POST to `clientConfig.url`, or to `clientConfig.service` resolved through
//! `Options::service_urls` (`namespace/name` → base URL) plus `path`. HTTPS trusts only
//! `caBundle` (rustls with ring) and, for a Service, verifies the certificate for the Service's
//! DNS name `<name>.<namespace>.svc` (as the apiserver does), not the mapped address; plain `http://` URLs are accepted as an emulator extension.
//! `timeoutSeconds` (default 10) bounds the call. A denial becomes
//! `admission webhook "<name>" denied the request: <message>` with the webhook's code (at least
//! 400), reason and `details` (as the apiserver's ToStatusErr). A failed call fails the request with 500 under `failurePolicy: Fail` (the default) and is
//! skipped under `Ignore`. Webhook configurations themselves are never sent to webhooks.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use crate::api_error::{ApiError, ApiResult};
use crate::request::{Req, Target};
use crate::selector::LabelSelector;
use crate::state::{Change, State};
use crate::Shared;

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn rule_matches(rule: &Value, t: &Target, op: &str) -> bool {
    let ops = strs(&rule["operations"]).any(|o| o == "*" || o == op);
    let groups = strs(&rule["apiGroups"]).any(|g| g == "*" || g == t.rt.group);
    let versions = strs(&rule["apiVersions"]).any(|v| v == "*" || v == t.version);
    let full = if t.sub.is_empty() {
        t.rt.plural.clone()
    } else {
        format!("{}/{}", t.rt.plural, t.sub)
    };
    let resources = strs(&rule["resources"]).any(|r| {
        r == "*/*"
            || r == full
            || (t.sub.is_empty() && r == "*")
            || (!t.sub.is_empty() && r == format!("*/{}", t.sub))
            || (!t.sub.is_empty() && r == format!("{}/*", t.rt.plural))
    });
    let scope = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !t.rt.namespaced,
        "Namespaced" => t.rt.namespaced,
        _ => true,
    };
    ops && groups && versions && resources && scope
}

/// The webhooks that apply to a prepared write.
pub fn matching(
    st: &State,
    t: &Target,
    op: &str,
    change: &Change,
    old: Option<&Value>,
) -> Vec<Value> {
    if t.rt.group == "admissionregistration.k8s.io" {
        return Vec::new();
    }
    let key = (
        "admissionregistration.k8s.io".to_string(),
        "validatingwebhookconfigurations".to_string(),
    );
    let configs = st.list(&key, None);
    if configs.is_empty() {
        return Vec::new();
    }
    let obj = match change {
        Change::Put(v) => Some(v),
        Change::Delete => old,
    };
    let labels = obj.and_then(|o| o["metadata"].get("labels"));
    let ns_labels = if t.rt.group.is_empty() && t.rt.plural == "namespaces" {
        labels.cloned()
    } else if !t.ns.is_empty() {
        st.get(&(String::new(), "namespaces".into()), "", &t.ns)
            .and_then(|n| n["metadata"].get("labels").cloned())
    } else {
        None
    };
    let mut out = Vec::new();
    for cfg in configs {
        for wh in cfg["webhooks"].as_array().into_iter().flatten() {
            let rules_ok = wh["rules"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|r| rule_matches(r, t, op)));
            if !rules_ok {
                continue;
            }
            if wh["objectSelector"].is_object()
                && !LabelSelector::from_object(&wh["objectSelector"]).matches(labels)
            {
                continue;
            }
            if wh["namespaceSelector"].is_object()
                && (t.rt.namespaced || t.rt.plural == "namespaces")
                && !LabelSelector::from_object(&wh["namespaceSelector"]).matches(ns_labels.as_ref())
            {
                continue;
            }
            out.push(wh.clone());
        }
    }
    out
}

/// Sends the review to every matching webhook; the first denial fails the request.
pub async fn run(
    sh: &Shared,
    hooks: Vec<Value>,
    t: &Target,
    op: &str,
    new: Option<&Value>,
    old: Option<&Value>,
    r: &Req,
) -> ApiResult<()> {
    let gvk = json!({"group": t.rt.group, "version": t.version, "kind": t.rt.kind});
    let gvr = json!({"group": t.rt.group, "version": t.version, "resource": t.rt.plural});
    let name = new
        .or(old)
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or(&t.name)
        .to_string();
    for wh in hooks {
        let whname = wh["name"].as_str().unwrap_or("").to_string();
        let uid = uuid::Uuid::new_v4().to_string();
        let mut request = json!({
            "uid": uid,
            "kind": gvk, "resource": gvr,
            "requestKind": gvk, "requestResource": gvr,
            "name": name,
            "operation": op,
            "userInfo": r.user.to_json(),
            "object": new.cloned().unwrap_or(Value::Null),
            "oldObject": old.cloned().unwrap_or(Value::Null),
            "dryRun": r.q.get("dryRun") == Some("All"),
            "options": Value::Null,
        });
        if !t.ns.is_empty() {
            request["namespace"] = json!(t.ns);
        }
        if !t.sub.is_empty() {
            request["subResource"] = json!(t.sub);
        }
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
        let timeout = Duration::from_secs(wh["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30));
        let ignore = wh["failurePolicy"].as_str() == Some("Ignore");
        let result = tokio::time::timeout(timeout, call(sh, &wh["clientConfig"], &review))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "context deadline exceeded after {}s",
                    timeout.as_secs()
                ))
            });
        let resp = match result {
            Ok(v) => v,
            Err(e) => {
                if ignore {
                    continue;
                }
                return Err(ApiError::internal(format!(
                    "Internal error occurred: failed calling webhook \"{whname}\": {e}"
                )));
            }
        };
        let response = &resp["response"];
        if response["allowed"].as_bool() == Some(true) {
            continue;
        }
        let status = &response["status"];
        let code = status["code"].as_u64().unwrap_or(0) as u16;
        let code = if code < 400 { 400 } else { code };
        let denied = format!("admission webhook \"{whname}\" denied the request");
        let message = match (status["message"].as_str(), status["reason"].as_str()) {
            (Some(m), _) if !m.is_empty() => format!("{denied}: {m}"),
            (_, Some(rs)) if !rs.is_empty() => format!("{denied}: {rs}"),
            _ => format!("{denied} without explanation"),
        };
        let reason = status["reason"].as_str().unwrap_or("");
        // The apiserver returns the webhook's status as it is (ToStatusErr), details included:
        // kubectl prints `details.causes` of an `Invalid` denial and only a generic line without.
        let details = status.get("details").filter(|d| d.is_object()).cloned();
        return Err(ApiError::webhook_denied(code, reason, message, details));
    }
    Ok(())
}

/// Where to send the review, and the name its serving certificate must carry: a `url` is
/// verified against its own host; a `service` reference against the Service's DNS name
/// `<name>.<namespace>.svc`, as the apiserver verifies it, whatever address the emulator maps it to.
fn target_url(sh: &Shared, cc: &Value) -> Result<(String, Option<String>), String> {
    if let Some(u) = cc["url"].as_str() {
        return Ok((u.to_string(), None));
    }
    let svc = &cc["service"];
    let ns = svc["namespace"].as_str().unwrap_or("");
    let name = svc["name"].as_str().unwrap_or("");
    let base = sh
        .service_urls
        .get(&format!("{ns}/{name}"))
        .ok_or_else(|| {
            format!("service \"{ns}/{name}\" has no URL mapping (Options::service_urls)")
        })?;
    let path = svc["path"].as_str().unwrap_or("");
    Ok((
        format!("{}{}", base.trim_end_matches('/'), path),
        Some(format!("{name}.{ns}.svc")),
    ))
}

fn tls_config(ca_bundle: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca_bundle.trim())
        .map_err(|e| format!("caBundle is not base64: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

async fn call(sh: &Shared, cc: &Value, review: &Value) -> Result<Value, String> {
    let (url, service_name) = target_url(sh, cc)?;
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
    let https = uri.scheme_str() == Some("https");
    let host = uri.host().ok_or("webhook URL has no host")?.to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .to_string();
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let req = http::Request::post(&path)
        .header("host", format!("{host}:{port}"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("failed to call webhook: Post \"{url}\": {e}"))?;
    let resp = if https {
        let cfg = tls_config(cc["caBundle"].as_str().unwrap_or(""))?;
        let verify_as = service_name.unwrap_or_else(|| host.trim_matches(['[', ']']).to_string());
        let server_name =
            rustls_pki_types::ServerName::try_from(verify_as).map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(cfg)
            .connect(server_name, tcp)
            .await
            .map_err(|e| format!("failed to call webhook: Post \"{url}\": tls: {e}"))?;
        send(TokioIo::new(tls), req).await?
    } else {
        send(TokioIo::new(tcp), req).await?
    };
    let _ = sh;
    serde_json::from_slice(&resp).map_err(|e| format!("webhook response is not JSON: {e}"))
}

async fn send<I>(io: I, req: http::Request<Full<Bytes>>) -> Result<Bytes, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        // The connection ends when the response is read; errors surface on the request.
        let _ = conn.await;
    });
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("webhook returned HTTP {status}"));
    }
    Ok(body)
}
