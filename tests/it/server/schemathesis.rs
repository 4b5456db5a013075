//! `schemathesis` (PyPI; installed by `scripts/setup.sh` into `/opt/opm-venv`) against the live
//! server: every operation of `openapi/openapi.json` is exercised with generated requests (valid
//! and schema-violating ones), over real TLS, with the render API wired to the real render kernel
//! (the fixture modules in an OCI layout, the generated platform fixture in the leased store),
//! authenticated and authorised by `kube-emu` (TokenReview + SubjectAccessReview) with a valid
//! bearer token, and `validate` / `diff` connected to the same emulator.
//!
//! Checks: no 5xx (`not_a_server_error`), every status documented (`status_code_conformance`),
//! every body valid against its documented schema (`response_schema_conformance`), the documented
//! content types and headers (`content_type_conformance`, `response_headers_conformance`). The run
//! is bounded and reproducible: a fixed seed, a fixed number of examples per operation, one worker.
//! The test fails on any schemathesis failure, and when schemathesis is not installed (run
//! `scripts/setup.sh`; `OPM_SCHEMATHESIS` names another binary).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::PostParams;
use kube::Api;
use kube_emu::UserInfo;
use opm_operator::server::render_api::auth::{Cluster, RenderAuth};

use super::common::{metric_value, published_fixture_modules, real_render_server, render_cluster};

/// Examples per operation and the seed: about 6 operations × (examples + coverage + fuzzing).
const MAX_EXAMPLES: &str = "40";
const SEED: &str = "20261204";
/// Each of the three runs must finish within this.
const RUN_DEADLINE: Duration = Duration::from_secs(120);

fn schemathesis() -> PathBuf {
    if let Some(p) = std::env::var_os("OPM_SCHEMATHESIS") {
        return PathBuf::from(p);
    }
    let venv = Path::new("/opt/opm-venv/bin/schemathesis");
    if venv.exists() {
        return venv.to_path_buf();
    }
    PathBuf::from("schemathesis")
}

/// Makes `user` allowed everything, cluster-wide (render, and the dry-runs of validate / diff).
async fn grant_all(admin: &kube::Client, user: &str) {
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some("everything".into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["*".into()]),
            resources: Some(vec!["*".into()]),
            verbs: vec!["*".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("everything-{user}")),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "everything".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let (layout, opm) = published_fixture_modules();

    let (emu, admin) = render_cluster(vec![(
        "alice-token",
        UserInfo {
            username: "alice".into(),
            groups: vec!["system:authenticated".into()],
            uid: "u-alice".into(),
        },
    )])
    .await;
    grant_all(&admin, "alice").await;

    let cluster = Cluster {
        client: admin,
        config: emu.config().unwrap(),
    };
    let (server, _cluster_tx) = real_render_server(
        layout.path(),
        &opm.join("platform/generated"),
        (RenderAuth::Kube, Some(cluster)),
        Duration::from_secs(60),
        2,
    )
    .await;
    let ca = server.dir().join("schemathesis-ca.crt");
    std::fs::write(&ca, server.ca.cert_pem()).unwrap();
    let ca = ca.to_str().unwrap().to_string();
    let running = &server.running;
    let metrics_addr = running.metrics_addr.unwrap_or(running.probe_addr);
    // Each listener serves its own tags (the document says which): the HTTPS webhook listener
    // the webhooks and the render API, the plain-HTTP ones the probes and the metrics.
    let runs = [
        (
            format!("https://localhost:{}", running.webhook_addr.port()),
            &["webhooks", "render"][..],
        ),
        (format!("http://{}", running.probe_addr), &["probes"][..]),
        (format!("http://{metrics_addr}"), &["metrics"][..]),
    ];
    let mut cases = 0;
    let mut summaries = Vec::new();
    for (n, (url, tags)) in runs.iter().enumerate() {
        let report = server.dir().join(format!("schemathesis-report-{n}"));
        let stdout = run_schemathesis(url, tags, &ca, &report, server.dir()).await;
        cases += test_cases(&stdout);
        summaries.push(stdout);
    }
    // The runs really exercised the API: the summaries count the generated test cases.
    assert!(
        cases >= 200,
        "schemathesis generated only {cases} test cases:\n{}",
        summaries.join("\n")
    );
    // ... and reached the real work: a render answered 200 (the document's example request),
    // and reviews were judged.
    let text = server.metrics().await;
    let ok = |route: &str| {
        metric_value(
            &text,
            &format!(
                r#"http_requests_total{{listener="webhook",route="{route}",method="POST",status="200"}}"#
            ),
        )
        .unwrap_or(0.0)
    };
    assert!(
        ok("/v1/namespaces/{ns}/render") >= 1.0,
        "no render answered 200:\n{text}"
    );
    assert!(
        ok("/validate/platforms") + ok("/validate/transformerregistrations") >= 1.0,
        "no review answered 200:\n{text}"
    );
    println!("{cases} generated test cases\n{}", summaries.join("\n"));
}

/// Runs schemathesis on the operations tagged `tags` against `url`; returns its output, or fails
/// the test with it.
async fn run_schemathesis(
    url: &str,
    tags: &[&str],
    ca: &str,
    report: &Path,
    dir: PathBuf,
) -> String {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json");
    let bin = schemathesis();
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.arg("run").arg(&spec).args(["--url", url]);
    for tag in tags {
        cmd.args(["--include-tag", tag]);
    }
    cmd.args(["--tls-verify", ca])
        .args(["--header", "Authorization: Bearer alice-token"])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_headers_conformance,response_schema_conformance",
        ])
        .args(["--max-examples", MAX_EXAMPLES, "--seed", SEED])
        .arg("--generation-deterministic")
        .args(["--workers", "1", "--request-timeout", "60"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--suppress-health-check", "all"])
        .arg("--no-color")
        .args(["--report", "junit", "--report-dir"])
        .arg(report)
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(RUN_DEADLINE, cmd.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!(
            "running {} failed ({e}): install it with scripts/setup.sh \
             (or name the binary in OPM_SCHEMATHESIS)",
            bin.display()
        ),
        Err(_) => panic!("schemathesis on {tags:?} ran over {RUN_DEADLINE:?}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "schemathesis on {tags:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// The number of generated test cases in schemathesis' summary (`Test cases:` then
/// `N generated, ...` on the next line).
fn test_cases(stdout: &str) -> u64 {
    let mut lines = stdout.lines().skip_while(|l| l.trim() != "Test cases:");
    lines
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
