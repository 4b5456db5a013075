//! Runs every case of `tests/fixtures/cases.json` through [`webhooks::review`] and checks the
//! expectation (allowed / denied / 400), the message substring, the violation count and warnings.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use webhooks::WebhookKind;

#[derive(Debug, Deserialize)]
struct Case {
    file: String,
    kind: String,
    path: String,
    expect: String,
    message_contains: String,
    description: String,
    #[serde(default)]
    violations: Option<usize>,
    #[serde(default)]
    warning_contains: Option<String>,
    #[serde(default)]
    no_warnings: bool,
    #[serde(default)]
    error_code: Option<String>,
}

pub(crate) fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures_dir().join("cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn kind_of(name: &str) -> WebhookKind {
    match name {
        "TransformerRegistration" => WebhookKind::TransformerRegistration,
        "Platform" => WebhookKind::Platform,
        other => panic!("unknown kind {other}"),
    }
}

/// Checks one case; returns a description of the mismatch, if any.
fn check(case: &Case) -> Result<(), String> {
    let kind = kind_of(&case.kind);
    if kind.path() != case.path {
        return Err(format!(
            "path {} is not the route of {:?} ({})",
            case.path,
            kind,
            kind.path()
        ));
    }
    let body = std::fs::read(fixtures_dir().join(&case.file)).map_err(|e| e.to_string())?;
    let result = webhooks::review(kind, &body);
    match (case.expect.as_str(), result) {
        ("400", Err(e)) => {
            let msg = e.to_string();
            if !msg.contains(&case.message_contains) {
                return Err(format!("error {msg:?} lacks {:?}", case.message_contains));
            }
            if let Some(code) = &case.error_code {
                if e.code() != code {
                    return Err(format!("error code {} != {code}", e.code()));
                }
            }
            if e.http_status() != 400 || e.to_json()["code"] != e.code() {
                return Err("error body/status shape".to_owned());
            }
            Ok(())
        }
        ("400", Ok(r)) => Err(format!(
            "expected 400, got a review: {}",
            serde_json::to_string(&r).unwrap()
        )),
        (_, Err(e)) => Err(format!("expected a review, got error {e}")),
        (expect, Ok(review)) => {
            let request_uid = serde_json::from_slice::<serde_json::Value>(&body).unwrap()
                ["request"]["uid"]
                .clone();
            let resp = review.response.ok_or("review has no response")?;
            if serde_json::Value::String(resp.uid.clone()) != request_uid {
                return Err(format!("uid {} not echoed", resp.uid));
            }
            let msg = resp.result.message.clone();
            match expect {
                "allowed" if !resp.allowed => {
                    return Err(format!("expected allowed, denied with {msg:?}"))
                }
                "denied" if resp.allowed => return Err("expected denied, was allowed".to_owned()),
                "allowed" | "denied" => {}
                other => return Err(format!("bad expect {other}")),
            }
            if !msg.contains(&case.message_contains) {
                return Err(format!("message {msg:?} lacks {:?}", case.message_contains));
            }
            if !resp.allowed {
                let causes = resp
                    .result
                    .details
                    .as_ref()
                    .map(|d| d.causes.len())
                    .unwrap_or(0);
                if causes != msg.split("; ").count() {
                    return Err(format!("{causes} status causes for message {msg:?}"));
                }
                // Every violation starts with the field path it concerns.
                for v in msg.split("; ") {
                    let path = v.split(": ").next().unwrap_or("");
                    let ok = !path.is_empty()
                        && v.len() > path.len()
                        && (path.starts_with("spec")
                            || path.starts_with("metadata.")
                            || path.starts_with("request."))
                        && !path.contains(' ');
                    if !ok {
                        return Err(format!("violation {v:?} does not start with a field path"));
                    }
                }
            }
            if let Some(n) = case.violations {
                let got = msg.split("; ").count();
                if got != n {
                    return Err(format!("expected {n} violations, got {got}: {msg:?}"));
                }
            }
            let warnings = resp.warnings.unwrap_or_default();
            if let Some(w) = &case.warning_contains {
                if !warnings.iter().any(|x| x.contains(w.as_str())) {
                    return Err(format!("no warning contains {w:?}: {warnings:?}"));
                }
            }
            if case.no_warnings && !warnings.is_empty() {
                return Err(format!("expected no warnings, got {warnings:?}"));
            }
            Ok(())
        }
    }
}

#[test]
fn every_fixture_case_meets_its_expectation() {
    let cases = cases();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            check(c)
                .err()
                .map(|e| format!("{} ({}): {e}", c.file, c.description))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_table_covers_both_kinds_every_operation_and_malformed_input() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let count = |pred: &dyn Fn(&Case) -> bool| cases.iter().filter(|c| pred(c)).count();
    for kind in ["TransformerRegistration", "Platform"] {
        for expect in ["allowed", "denied"] {
            assert!(
                count(&|c| c.kind == kind && c.expect == expect) >= 5,
                "{kind} {expect}"
            );
        }
        for op in ["create-", "update-", "delete"] {
            assert!(
                count(&|c| c.kind == kind && c.file.contains(&format!("/{op}"))) >= 1,
                "{kind} {op}"
            );
        }
    }
    assert!(count(&|c| c.expect == "400") >= 8);
}

fn json_files(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            json_files(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "json")
            && path.file_name().is_some_and(|n| n != "cases.json")
        {
            out.insert(
                path.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
}

#[test]
fn cases_json_lists_every_fixture_file_once() {
    let mut on_disk = BTreeSet::new();
    json_files(&fixtures_dir(), &fixtures_dir(), &mut on_disk);
    let listed: Vec<String> = cases().into_iter().map(|c| c.file).collect();
    let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(listed.len(), listed_set.len(), "a file is listed twice");
    assert_eq!(on_disk, listed_set);
}
