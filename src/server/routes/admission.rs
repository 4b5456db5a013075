//! The admission handlers: the TransformerRegistration and Platform reviews.
//!
//! Rules:
//! - A review is answered 200 with an AdmissionReview whenever the body is a judgeable v1 review
//!   (allowed or denied, `response.uid` = `request.uid`). Bodies that cannot be judged get a 400
//!   error body; over 3 MiB a 413; a present non-JSON `Content-Type` a 415.
//! - A review reads its body, then takes a permit of the review semaphore, which bounds the memory
//!   of concurrent reviews (parsing and evaluation both run under it); a review whose permit does
//!   not arrive within `eval_timeout` is answered as a denial that says it timed out. Parsing (one
//!   pass into a `webhooks::RequestView` that borrows the body) and evaluation run on the async
//!   worker, synchronously (both are bounded pure functions of a body of at most 3 MiB; the
//!   webhooks run no CUE). Only CUE work (the render API) goes to `spawn_blocking`.
//! - Per-request cost is budgeted (issue 16: throughput against a bare hyper + rustls echo): only
//!   the body crosses an await in a review, so the handler future axum boxes per request stays
//!   small (the request head and the parsed review never live in it).
//! - The request span (`super::middleware`) gets `uid`, `kind`, `namespace`, `name`, `operation`
//!   and `allowed` once the review is parsed; the review metrics count every review by its result
//!   (allowed, denied, timeout, error) with its duration.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube_core::admission::Operation;
use tokio::sync::TryAcquireError;
use tracing::Span;
use webhooks::WebhookKind;

use super::super::body::{check_content_type, read_body};
use super::super::error::{json_response, ApiError, ErrorBody};
use super::super::metrics::ReviewResult;
use super::super::state::AppState;
use super::middleware::InFlight;

/// The answers of both review endpoints, for the OpenAPI document (the handlers build them with
/// [`review`]; this type only describes them).
#[allow(
    dead_code,
    clippy::large_enum_variant,
    reason = "never built: it only describes the responses to utoipa"
)]
#[derive(utoipa::IntoResponses)]
enum ReviewResponses {
    #[response(
        status = 200,
        description = "The review, allowed or denied; response.uid echoes request.uid"
    )]
    Review(super::super::review_doc::AdmissionReviewDoc),
    #[response(
        status = 400,
        description = "Not a judgeable v1 AdmissionReview (malformed JSON, wrong apiVersion/kind, no request or uid)"
    )]
    BadRequest(ErrorBody),
    #[response(status = 404, description = "Unknown path")]
    NotFound(ErrorBody),
    #[response(status = 405, description = "Method other than POST")]
    MethodNotAllowed(ErrorBody),
    #[response(status = 408, description = "The request did not complete in time")]
    Timeout(ErrorBody),
    #[response(status = 413, description = "Body over 3 MiB")]
    TooLarge(ErrorBody),
    #[response(
        status = 415,
        description = "Content-Type present and not application/json"
    )]
    UnsupportedMediaType(ErrorBody),
    #[response(status = 500, description = "Internal error (details are logged)")]
    Internal(ErrorBody),
}

/// Validates a TransformerRegistration claim.
#[utoipa::path(
    post,
    path = "/validate/transformerregistrations",
    tag = "webhooks",
    request_body(content = super::super::review_doc::AdmissionReviewDoc, content_type = "application/json",
        description = "An admission.k8s.io/v1 AdmissionReview with a request",
        example = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "00000000-0000-4000-8000-000000000001",
            "kind": {"group": "opmodel.dev", "version": "v1alpha1", "kind": "TransformerRegistration"},
            "resource": {"group": "opmodel.dev", "version": "v1alpha1", "resource": "transformerregistrations"},
            "name": "team-a.k8up", "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": {"apiVersion": "opmodel.dev/v1alpha1", "kind": "TransformerRegistration",
                "metadata": {"name": "team-a.k8up"},
                "spec": {"catalog": "opmodel.dev/catalogs/k8up@v1", "version": "1.0.0",
                    "provides": ["opmodel.dev/contracts/backup/schedule@v1"],
                    "providerRef": {"namespace": "team-a", "name": "k8up"}}},
            "dryRun": false}})),
    responses(ReviewResponses)
)]
pub fn validate_transformer_registrations(
    State(state): State<AppState>,
    req: Request,
) -> impl std::future::Future<Output = Response> + Send {
    review(state, WebhookKind::TransformerRegistration, req)
}

/// Validates the Platform singleton.
#[utoipa::path(
    post,
    path = "/validate/platforms",
    tag = "webhooks",
    request_body(content = super::super::review_doc::AdmissionReviewDoc, content_type = "application/json",
        description = "An admission.k8s.io/v1 AdmissionReview with a request",
        example = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "00000000-0000-4000-8000-000000000002",
            "kind": {"group": "opmodel.dev", "version": "v1alpha1", "kind": "Platform"},
            "resource": {"group": "opmodel.dev", "version": "v1alpha1", "resource": "platforms"},
            "name": "cluster", "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": {"apiVersion": "opmodel.dev/v1alpha1", "kind": "Platform",
                "metadata": {"name": "cluster"},
                "spec": {"type": "kubernetes",
                    "registry": {"opmodel.dev/catalogs/opm@v2": {"version": "2.1.0"}}}},
            "dryRun": false}})),
    responses(ReviewResponses)
)]
pub fn validate_platforms(
    State(state): State<AppState>,
    req: Request,
) -> impl std::future::Future<Output = Response> + Send {
    review(state, WebhookKind::Platform, req)
}

fn operation_str(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// One review: the head is checked here and dropped, so only the body crosses an await and the
/// handler future (which axum boxes per request) stays small; then [`judge`], then the review
/// metrics.
pub(super) fn review(
    state: AppState,
    kind: WebhookKind,
    req: Request,
) -> impl std::future::Future<Output = Response> + Send {
    let start = Instant::now();
    let (parts, body) = req.into_parts();
    let body = check_content_type(&parts.headers)
        .map(|()| read_body(&parts.headers, body, state.limits.body_limit));
    drop(parts);
    async move {
        let outcome = match body {
            Ok(read) => match read.await {
                Ok(bytes) => judge(&state, kind, &bytes).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let (result, resp) = match outcome {
            Ok((result, resp)) => (result, resp),
            Err(e) => (ReviewResult::Error, e.into_response()),
        };
        if let Some(series) = state.metrics.review(kind, result) {
            series.count.inc();
            series.duration.observe(start.elapsed().as_secs_f64());
        }
        resp
    }
}

/// Takes an evaluation permit (waiting at most `eval_timeout` for one), then [`evaluate`]s.
async fn judge(
    state: &AppState,
    kind: WebhookKind,
    bytes: &[u8],
) -> Result<(ReviewResult, Response), ApiError> {
    // A free permit is taken without arming a timer; only a review that has to wait for one is
    // bounded by `eval_timeout` (and then denied, see `evaluate`).
    let in_flight = InFlight::enter(&state.metrics.in_flight);
    let permit = match state.semaphore.try_acquire() {
        Ok(permit) => Some(permit),
        Err(TryAcquireError::Closed) => {
            return Err(ApiError::internal("evaluation semaphore closed"))
        }
        Err(TryAcquireError::NoPermits) => {
            match tokio::time::timeout(state.limits.eval_timeout, state.semaphore.acquire()).await {
                Ok(Ok(permit)) => Some(permit),
                Ok(Err(e)) => return Err(ApiError::internal(format!("evaluation semaphore: {e}"))),
                Err(_elapsed) => None,
            }
        }
    };
    let outcome = evaluate(state, kind, bytes, permit.is_some());
    drop(permit);
    drop(in_flight);
    outcome
}

/// Parses and judges a review body under an evaluation permit (`permitted`), or denies it when the
/// permit did not arrive in time. Synchronous on purpose: the parsed request borrows the body and
/// never lives across an await, which keeps the handler future (boxed by axum per request) small.
fn evaluate(
    state: &AppState,
    kind: WebhookKind,
    bytes: &[u8],
    permitted: bool,
) -> Result<(ReviewResult, Response), ApiError> {
    let req = webhooks::RequestView::parse(bytes)?;
    let span = Span::current();
    span.record("uid", &*req.uid);
    span.record("kind", &*req.kind.kind);
    span.record("name", &*req.name);
    if let Some(ns) = &req.namespace {
        span.record("namespace", &**ns);
    }
    let operation = operation_str(&req.operation);
    span.record("operation", operation);
    if !permitted {
        let eval_timeout = state.limits.eval_timeout;
        tracing::warn!(
            timeout_ms = eval_timeout.as_millis() as u64,
            "admission evaluation timed out"
        );
        let message = format!(
            "opm-operator webhook: evaluating this {} {} timed out after {} ms; \
             the request was denied by the webhook's own timeout, not by a policy — \
             retry, and report it if it persists",
            kind.resource_kind(),
            operation,
            eval_timeout.as_millis()
        );
        span.record("allowed", false);
        let denial = req.response().deny(message);
        return Ok((
            ReviewResult::Timeout,
            json_response(StatusCode::OK, &webhooks::ResponseReview::new(&denial)),
        ));
    }
    let response = kind.validate_view(&req);
    let result = if response.allowed {
        ReviewResult::Allowed
    } else {
        ReviewResult::Denied
    };
    span.record("allowed", response.allowed);
    Ok((
        result,
        json_response(StatusCode::OK, &webhooks::ResponseReview::new(&response)),
    ))
}
