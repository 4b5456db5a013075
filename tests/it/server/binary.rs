//! The binary as a newcomer runs it: `opm-operator serve --self-signed` with no cluster, JSON logs,
//! a review over TLS with the written CA bundle, per-request span fields in the log, SIGTERM exits 0.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::common::*;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Reads log lines until one matches, failing after `within`.
fn wait_line(
    rx: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    within: Duration,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    if pred(&v) {
                        return v;
                    }
                }
            }
            Err(_) => panic!("no matching log line; output so far:\n{}", seen.join("\n")),
        }
    }
}

#[test]
fn serve_help_documents_every_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--webhook-addr",
        "--probe-addr",
        "--metrics-addr",
        "--tls-cert",
        "--tls-key",
        "--client-ca",
        "--self-signed",
        "--self-signed-dir",
        "--ca-bundle-out",
        "--log-format",
        "--request-timeout",
        "--shutdown-grace",
        "--max-concurrent-reviews",
        "--cert-poll-interval",
    ] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().split([' ', '=']).next() == Some(flag)),
            "{flag} missing from --help:\n{help}"
        );
    }
    // Every option line is followed by its help text (clap's long help puts it on the next line).
    let lines: Vec<&str> = help.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("--")
            && !line.contains("--help")
            && !line.contains("--version")
        {
            let next = lines.get(i + 1).copied().unwrap_or("");
            assert!(
                !next.trim().is_empty(),
                "{line:?} has no help text:\n{help}"
            );
        }
    }
}

#[test]
fn serve_without_tls_flags_fails_with_a_hint() {
    let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args([
            "serve",
            "--webhook-addr",
            "127.0.0.1:0",
            "--probe-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--self-signed"), "{err}");
}

#[test]
fn self_signed_serve_answers_reviews_logs_spans_and_stops_on_sigterm() {
    setup();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("out/ca-bundle.pem");
    let child = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["serve", "--self-signed", "--log-format", "json"])
        .args([
            "--webhook-addr",
            "127.0.0.1:0",
            "--probe-addr",
            "127.0.0.1:0",
        ])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .arg("--self-signed-dir")
        .arg(dir.path().join("certs"))
        .arg("--ca-bundle-out")
        .arg(&bundle)
        .env("RUST_LOG", "info,opm_operator=debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Kill(child);
    let rx = spawn_lines(&mut child.0);
    let mut seen = Vec::new();
    let serving = wait_line(&rx, &mut seen, Duration::from_secs(20), |v| {
        v["fields"]["message"] == "serving"
    });
    let webhook: std::net::SocketAddr = serving["fields"]["webhook"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let probe: std::net::SocketAddr = serving["fields"]["probe"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ready = get_plain(probe, "/readyz").await.unwrap();
        assert_eq!(ready.status, 200);
        let ca = std::fs::read_to_string(&bundle).unwrap();
        let client = TlsClient::new(&ca, None, &[b"http/1.1"]);
        let body = to_bytes(&review(
            "bin-1",
            platform_request("CREATE", Some(platform_object("prod", "2.1.0")), None),
        ));
        let req = http::Request::post(opm_operator::server::PLATFORMS_PATH)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap();
        let resp = client.request(webhook, req).await.unwrap();
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.json()["response"]["allowed"], false);
    });

    // The request's span carries the review's fields, recorded after parsing.
    let answered = wait_line(&rx, &mut seen, Duration::from_secs(10), |v| {
        v["fields"]["message"] == "answered" && v["span"]["uid"] == "bin-1"
    });
    let span = &answered["span"];
    assert_eq!(span["name"], "request", "{answered}");
    assert_eq!(span["kind"], "Platform", "{answered}");
    assert_eq!(span["name"], "request");
    assert_eq!(span["operation"], "CREATE", "{answered}");
    assert_eq!(span["allowed"], false, "{answered}");

    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_line(&rx, &mut seen, Duration::from_secs(15), |v| {
        v["fields"]["message"] == "stopped"
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit after SIGTERM"
        );
        std::thread::park_timeout(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
}
