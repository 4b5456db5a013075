//! The `kube-emu` binary with the flags an install test uses: `--tls` + `--ca-file`,
//! `--token`, `--service-url`, `--audit-log`, run as a separate process.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::*;
use crate::webhook::{serve_webhook, vwc};

/// The running binary and the URL it announced.
struct Running {
    child: tokio::process::Child,
    url: String,
}

/// Starts the built binary with `args`; waits for the line announcing its URL.
async fn start_binary(args: &[String]) -> Running {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-emu"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("kube-emu exited");
            if let Some(rest) = line.strip_prefix("kube-emu serving on ") {
                return rest.split(';').next().unwrap().to_string();
            }
        }
    })
    .await
    .expect("kube-emu announced its URL within 30s");
    // Keep draining stderr so the process never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Running { child, url }
}

/// A client for `url` trusting the CA in `ca_file`, authenticating with `token`.
fn client(url: &str, ca_file: &Path, token: &str) -> kube::Client {
    let pem = std::fs::read(ca_file).unwrap();
    let ders: Vec<Vec<u8>> = rustls_pemfile::certs(&mut pem.as_slice())
        .map(|c| c.unwrap().to_vec())
        .collect();
    let mut c = kube::Config::new(url.parse().unwrap());
    c.root_cert = Some(ders);
    c.default_namespace = "default".into();
    c.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(c).unwrap()
}

#[tokio::test]
async fn the_binary_serves_tls_static_tokens_service_urls_and_an_audit_log() {
    let (hook_url, ca_bundle, seen) = serve_webhook().await;
    let dir = tempfile::tempdir().unwrap();
    let p = |f: &str| dir.path().join(f);
    let s = |f: &str| p(f).to_string_lossy().into_owned();
    let mut run = start_binary(&[
        "--port".into(),
        "0".into(),
        "--kubeconfig".into(),
        s("kubeconfig"),
        "--tls".into(),
        "--ca-file".into(),
        s("ca.crt"),
        "--token".into(),
        "bob-token=bob,devs".into(),
        "--service-url".into(),
        format!("sys/hook={hook_url}"),
        "--audit-log".into(),
        s("audit.log"),
    ])
    .await;
    assert!(run.url.starts_with("https://127.0.0.1:"), "{}", run.url);
    let kubeconfig = std::fs::read_to_string(p("kubeconfig")).unwrap();
    assert!(kubeconfig.contains("certificate-authority-data"));
    let admin_token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap()
        .to_string();

    // TLS verified against the written CA; the kubeconfig's token is cluster-admin.
    let admin = client(&run.url, &p("ca.crt"), &admin_token);
    let cms: Api<ConfigMap> = Api::default_namespaced(admin.clone());
    cms.list(&ListParams::default()).await.unwrap();

    // The static token is bob in devs, and RBAC applies.
    let bob: Api<ConfigMap> = Api::default_namespaced(client(&run.url, &p("ca.crt"), "bob-token"));
    let st = api_status(bob.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(st.code, 403);
    assert!(
        st.message.contains("User \"bob\" cannot list"),
        "{}",
        st.message
    );
    let unknown: Api<ConfigMap> = Api::default_namespaced(client(&run.url, &p("ca.crt"), "nope"));
    assert_eq!(
        api_status(unknown.list(&ListParams::default()).await.unwrap_err()).code,
        401
    );

    // A webhook Service resolves through --service-url.
    let svc = json!({"service": {"namespace": "sys", "name": "hook", "path": "/validate"}, "caBundle": ca_bundle});
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .create(
            &PostParams::default(),
            &vwc("svc.example.com", svc, "Fail", None),
        )
        .await
        .unwrap();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(seen.lock().len(), 1);

    // Every request is in the audit log, with bob's groups.
    let log = std::fs::read_to_string(p("audit.log")).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.len() >= 5, "{log}");
    assert!(events.iter().any(|e| e["user"]["username"] == "bob"
        && e["user"]["groups"] == json!(["devs", "system:authenticated"])
        && e["verb"] == "list"
        && e["responseStatus"]["code"] == 403));
    assert!(events.iter().any(|e| e["verb"] == "create"
        && e["objectRef"]["resource"] == "validatingwebhookconfigurations"
        && e["objectRef"]["apiGroup"] == "admissionregistration.k8s.io"));

    // SIGTERM stops it cleanly.
    let pid = run.child.id().unwrap();
    let kill = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .unwrap();
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(10), run.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn the_binary_refuses_malformed_flags() {
    for args in [
        ["--token", "no-user"],
        ["--service-url", "hook=https://127.0.0.1:1"],
        ["--ca-file", "/tmp/x"],
    ] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-emu"))
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(out.status.code(), Some(2), "{args:?}: clap's usage error");
    }
}
