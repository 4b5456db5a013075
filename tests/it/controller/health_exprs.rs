//! Issue 40 item 4: custom health in CEL (`spec.healthCheckExprs`, Flux 2.5's semantics). A
//! cert-manager-like Certificate whose status has no standard conditions (`status.state`) is
//! judged by its expressions (in progress, failed, current), where kstatus would call it healthy
//! in every state; a bad expression stalls naming it; a failing expression names it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crds::conditions::{reasons, types};
use crds::custom_health::HealthCheckExpr;
use crds::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use super::common::*;
use super::rendered::*;

const CERT: (&str, &str, &str, &str) = ("cert-manager.io", "v1", "Certificate", "certificates");

/// `certificates.cert-manager.io` with a status subresource and no schema to speak of.
async fn install_certificate_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "certificates.cert-manager.io"},
        "spec": {"group": "cert-manager.io", "scope": "Namespaced",
            "names": {"plural": "certificates", "singular": "certificate", "kind": "Certificate",
                      "listKind": "CertificateList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

fn certificate() -> serde_json::Value {
    json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web-tls"},
        "spec": {"secretName": "web-tls", "dnsNames": ["{{msg}}.example"]}})
}

/// The expressions of the Certificate: `state` Pending → in progress, Error → failed,
/// Issued → current (Flux's field-name style and `self` style mixed on purpose).
fn exprs() -> Vec<HealthCheckExpr> {
    vec![HealthCheckExpr {
        api_version: "cert-manager.io/v1".into(),
        kind: "Certificate".into(),
        in_progress: Some("has(self.status) && self.status.state == 'Pending'".into()),
        failed: Some("self.?status.?state.orValue('') == 'Error'".into()),
        current: "has(self.status) && has(status.state) && status.state == 'Issued'".into(),
    }]
}

async fn set_state(m: &Mi, state: &str) {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(CERT.0, CERT.1, CERT.2),
        CERT.3,
    );
    Api::<DynamicObject>::namespaced_with(m.env.client.clone(), NS, &ar)
        .patch_status(
            "web-tls",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"state": state}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_is_judged_by_its_expressions_where_kstatus_calls_it_healthy() {
    let m = mi_env(vec![certificate()], |_| {}).await;
    install_certificate_crd(&m.env.client).await;
    m.create("web", |mi| mi.spec.health_check_exprs = exprs())
        .await;

    // No status yet: none of the expressions holds → waiting, naming the expression.
    let out = m.reconcile("web").await;
    assert_eq!(out.reason, Some(reasons::PROGRESSING), "{out:?}");
    let (st, _, message) = m.ready("web").await;
    assert_eq!(st, "Unknown");
    assert_eq!(
        message,
        "waiting for 1 object(s) to become ready: Certificate/team-a/web-tls: \
         healthCheckExprs[0].current is not yet true"
    );
    // Pending: inProgress holds.
    set_state(&m, "Pending").await;
    m.reconcile("web").await;
    assert!(m
        .ready("web")
        .await
        .2
        .ends_with("healthCheckExprs[0].inProgress is true"));
    // Issued: current → Ready.
    set_state(&m, "Issued").await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    assert_eq!(m.ready("web").await.0, "True");
    // Error: failed → HealthCheckFailed naming the object and the expression.
    set_state(&m, "Error").await;
    let out = m.reconcile("web").await;
    assert_eq!(out.reason, Some(reasons::HEALTH_CHECK_FAILED), "{out:?}");
    assert_eq!(
        m.ready("web").await,
        (
            "False".into(),
            reasons::HEALTH_CHECK_FAILED.into(),
            "1 object(s) failed: Certificate/team-a/web-tls: healthCheckExprs[0].failed is true"
                .into()
        )
    );

    // The same failed Certificate judged by kstatus (no expressions): no standard conditions,
    // so kstatus calls it Current and the instance Ready — the wrong verdict the expressions
    // exist for.
    patch_spec(&m.instances(), "web", json!({"healthCheckExprs": null})).await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
    assert!(
        m.ctx.health_rules.is_empty(),
        "the compiled rules are dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_expression_stalls_before_applying_and_a_failing_one_is_named() {
    let m = mi_env(vec![certificate()], |_| {}).await;
    install_certificate_crd(&m.env.client).await;
    let mut bad = exprs();
    bad[0].failed = Some("self.status.state == ".into());
    m.create("web", |mi| mi.spec.health_check_exprs = bad).await;
    let out = m.reconcile("web").await;
    let message = assert_stalled(
        &out,
        &m.status("web").await.conditions,
        reasons::HEALTH_CHECK_EXPR_INVALID,
    );
    assert!(
        message.starts_with(
            "spec.healthCheckExprs[0].failed: invalid CEL expression `self.status.state == `: "
        ),
        "{message}"
    );
    assert!(
        live(&m.env.client, CERT, "web-tls").await.is_none(),
        "nothing is applied"
    );

    // Fixed, but an expression that reads a field the object does not have yet fails, naming
    // it (Flux would wait on it until the timeout).
    let mut failing = exprs();
    failing[0].in_progress = None;
    failing[0].failed = None;
    failing[0].current = "self.status.state == 'Issued'".into();
    patch_spec(
        &m.instances(),
        "web",
        json!({"healthCheckExprs": serde_json::to_value(&failing).unwrap()}),
    )
    .await;
    let out = m.reconcile("web").await;
    assert_eq!(out.reason, Some(reasons::HEALTH_CHECK_FAILED), "{out:?}");
    let (_, _, message) = m.ready("web").await;
    assert!(
        message.starts_with(
            "1 object(s) failed: Certificate/team-a/web-tls: healthCheckExprs[0].current \
             `self.status.state == 'Issued'` failed: "
        ),
        "{message}"
    );
    assert!(
        condition(&m.status("web").await.conditions, types::STALLED).is_none(),
        "a health failure is not a stall"
    );
    // Once the status is there the same expression holds.
    set_state(&m, "Issued").await;
    assert_eq!(
        m.reconcile("web").await.reason,
        Some(reasons::RECONCILIATION_SUCCEEDED)
    );
}
