//! Every case of the webhooks crate's fixture index (`webhooks/tests/fixtures/cases.json`) posted
//! over real TLS to the route it names: the HTTP status, `response.allowed`, the uid echo, the
//! message and warnings, or the JSON error code for bodies that are not judgeable.

use serde::Deserialize;

use super::common::*;

#[derive(Debug, Deserialize)]
struct Case {
    file: String,
    path: String,
    expect: String,
    message_contains: String,
    description: String,
    #[serde(default)]
    warning_contains: Option<String>,
    #[serde(default)]
    no_warnings: bool,
    #[serde(default)]
    error_code: Option<String>,
}

fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("webhooks/tests/fixtures")
}

fn check(case: &Case, sent: &[u8], resp: &Resp) -> Result<(), String> {
    let v: serde_json::Value =
        serde_json::from_slice(&resp.body).map_err(|e| format!("body is not JSON: {e}"))?;
    match case.expect.as_str() {
        "allowed" | "denied" => {
            if resp.status != 200 {
                return Err(format!("status {} (want 200): {v}", resp.status));
            }
            let want_allowed = case.expect == "allowed";
            if v["response"]["allowed"] != serde_json::json!(want_allowed) {
                return Err(format!("allowed is not {want_allowed}: {v}"));
            }
            let sent: serde_json::Value = serde_json::from_slice(sent).unwrap();
            if v["response"]["uid"] != sent["request"]["uid"] {
                return Err(format!("uid not echoed: {v}"));
            }
            let message = v["response"]["status"]["message"].as_str().unwrap_or("");
            if !message.contains(&case.message_contains) {
                return Err(format!("message lacks {:?}: {v}", case.message_contains));
            }
            let warnings: Vec<&str> = v["response"]["warnings"]
                .as_array()
                .map(|a| a.iter().filter_map(|w| w.as_str()).collect())
                .unwrap_or_default();
            if let Some(w) = &case.warning_contains {
                if !warnings.iter().any(|x| x.contains(w.as_str())) {
                    return Err(format!("no warning contains {w:?}: {v}"));
                }
            }
            if case.no_warnings && !warnings.is_empty() {
                return Err(format!("unexpected warnings: {v}"));
            }
        }
        "400" => {
            if resp.status != 400 {
                return Err(format!("status {} (want 400): {v}", resp.status));
            }
            let message = v["error"]["message"].as_str().unwrap_or("");
            if !message.contains(&case.message_contains) {
                return Err(format!(
                    "error message lacks {:?}: {v}",
                    case.message_contains
                ));
            }
            if let Some(code) = &case.error_code {
                if v["error"]["code"] != serde_json::json!(code) {
                    return Err(format!("error code is not {code:?}: {v}"));
                }
            }
        }
        other => return Err(format!("unknown expectation {other:?}")),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_webhooks_fixture_is_answered_as_indexed_over_tls() {
    let index = std::fs::read_to_string(fixtures_dir().join("cases.json"))
        .expect("webhooks/tests/fixtures/cases.json (written by the webhooks track)");
    let cases: Vec<Case> = serde_json::from_str(&index).unwrap();
    assert!(cases.len() >= 30, "only {} fixture cases", cases.len());
    let server = TestServer::start().await;
    let mut failures = Vec::new();
    for case in &cases {
        let body = std::fs::read(fixtures_dir().join(&case.file)).unwrap();
        let resp = server.post(&case.path, body.clone()).await;
        if let Err(e) = check(case, &body, &resp) {
            failures.push(format!("{} ({}): {e}", case.file, case.description));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    let text = server.metrics().await;
    let total: f64 = ["allowed", "denied", "error"]
        .iter()
        .flat_map(|r| {
            ["platforms", "transformerregistrations"].map(|w| {
                metric_value(
                    &text,
                    &format!(r#"admission_reviews_total{{webhook="{w}",result="{r}"}}"#),
                )
                .unwrap_or(0.0)
            })
        })
        .sum();
    assert_eq!(total as usize, cases.len(), "every fixture is counted once");
}
