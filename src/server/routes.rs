//! Routers and handlers.
//!
//! Rules:
//! - [`router`] is the HTTPS webhook router, shared by `main` and the tests. It serves
//!   `POST /validate/transformerregistrations` and `POST /validate/platforms`; any other path is a
//!   404 and any other method a 405, both with the JSON error shape.
//! - A review is answered 200 with an AdmissionReview whenever the body is a judgeable v1 review
//!   (allowed or denied, `response.uid` = `request.uid`). Bodies that cannot be judged get a 400
//!   error body; over 3 MiB a 413; a present non-JSON `Content-Type` a 415.
//! - A review reads its body, then takes a permit of the review semaphore, which bounds the memory
//!   of concurrent reviews (parsing and evaluation both run under it); a review whose permit does
//!   not arrive within `eval_timeout` is answered as a denial that says it timed out; a panic
//!   inside it is a 500. Parsing (one pass into a `webhooks::RequestView` that borrows the body)
//!   and evaluation run on the async worker, synchronously (both are bounded pure functions of a
//!   body of at most 3 MiB; the webhooks run no CUE). Only CUE work (the render API) goes to
//!   `spawn_blocking`.
//! - Per-request cost is budgeted (issue 16: throughput against a bare hyper + rustls echo): only
//!   the body crosses an await in a review, so the handler future axum boxes per request stays
//!   small (the request head and the parsed review never live in it).
//! - One middleware per route wraps every handler; its rules are [`middleware`]'s.
//! - [`probe_router`] (`/healthz`, `/readyz`) and [`metrics_router`] (`/metrics`) are plain HTTP.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::handler::Handler as _;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use futures::FutureExt as _;
use kube_core::admission::Operation;
use serde::Serialize;
use tokio::sync::TryAcquireError;
use tracing::Span;
use webhooks::WebhookKind;

use super::body::{check_content_type, read_body};
use super::error::{json_response, ApiError, ErrorBody, ErrorCode};
use super::metrics::ReviewResult;
use super::render_api::RENDER_PATH;
use super::state::AppState;

mod middleware;

use middleware::{
    make_span, serve_request, InFlight, RequestHead, RequestLayer, RequestLayerState,
};

/// Route of the TransformerRegistration webhook.
pub const TRANSFORMER_REGISTRATIONS_PATH: &str = "/validate/transformerregistrations";
/// Route of the Platform webhook.
pub const PLATFORMS_PATH: &str = "/validate/platforms";

/// The HTTPS router of the admission webhooks (and the render API). The listener serves it behind
/// [`WebhookService`].
pub fn router(state: AppState) -> Router {
    webhook_routes(
        &Arc::new(RequestLayerState::new(state.clone(), "webhook")),
        state,
    )
}

fn webhook_routes(shared: &Arc<RequestLayerState>, state: AppState) -> Router {
    routed(
        shared,
        state,
        vec![
            (
                TRANSFORMER_REGISTRATIONS_PATH,
                post(validate_transformer_registrations),
            ),
            (PLATFORMS_PATH, post(validate_platforms)),
            (RENDER_PATH, post(super::render_api::render)),
        ],
    )
}

/// The HTTPS webhook listener's service: [`router`], with the admission reviews dispatched
/// directly.
///
/// A `POST` whose path is exactly one of the two admission routes (as axum matches a static route)
/// goes straight to the review handler under the same middleware as the router's route (that
/// route's own layer: the same span, timeout, panic catcher and metric series). That skips what
/// axum's routing costs every review: the route lookup, an extension map for the (empty) path
/// parameters, two clones of the route's boxed service and a boxed handler future (about a tenth
/// of a review's cost against the bare echo of issue 16). Everything else, other methods on those
/// paths included, goes to the router, which serves the same routes with the same handlers, so
/// both ways answer alike.
#[derive(Clone)]
pub struct WebhookService {
    router: Router,
    state: AppState,
    /// The review routes' layers, in [`WebhookKind::ALL`] order.
    reviews: [RequestLayer; 2],
}

impl WebhookService {
    /// The service of the webhook listener over `state`.
    pub fn new(state: AppState) -> Self {
        let shared = Arc::new(RequestLayerState::new(state.clone(), "webhook"));
        let layer = |kind: WebhookKind| RequestLayer {
            shared: shared.clone(),
            route: ROUTES.iter().position(|r| *r == kind.path()),
        };
        WebhookService {
            router: webhook_routes(&shared, state.clone()),
            reviews: WebhookKind::ALL.map(layer),
            state,
        }
    }
}

impl std::fmt::Debug for WebhookService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookService").finish_non_exhaustive()
    }
}

impl tower::Service<Request> for WebhookService {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::Either<
        futures::future::BoxFuture<'static, Result<Response, Self::Error>>,
        <Router as tower::Service<Request>>::Future,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        tower::Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let direct = (req.method() == axum::http::Method::POST)
            .then(|| WebhookKind::from_path(req.uri().path()))
            .flatten()
            .and_then(|kind| {
                let i = WebhookKind::ALL.iter().position(|k| *k == kind)?;
                Some((kind, self.reviews.get(i)?))
            });
        let Some((kind, layer)) = direct else {
            return futures::future::Either::Right(self.router.call(req));
        };
        let head = RequestHead {
            route: layer.route,
            method: "POST",
            span: make_span(&req),
        };
        let review = review(self.state.clone(), kind, req).map(Ok);
        futures::future::Either::Left(Box::pin(
            serve_request(layer.shared.clone(), head, review).map(Ok),
        ))
    }
}

/// The plain-HTTP probe router: `/healthz` and `/readyz`.
pub fn probe_router(state: AppState) -> Router {
    routed(
        &Arc::new(RequestLayerState::new(state.clone(), "probe")),
        state,
        vec![("/healthz", get(healthz)), ("/readyz", get(readyz))],
    )
}

/// The plain-HTTP metrics router: `/metrics`.
pub fn metrics_router(state: AppState) -> Router {
    routed(
        &Arc::new(RequestLayerState::new(state.clone(), "metrics")),
        state,
        vec![("/metrics", get(metrics))],
    )
}

/// Probes and metrics on one listener (when `--metrics-addr` equals `--probe-addr`).
pub fn probe_and_metrics_router(state: AppState) -> Router {
    routed(
        &Arc::new(RequestLayerState::new(state.clone(), "probe")),
        state,
        vec![
            ("/healthz", get(healthz)),
            ("/readyz", get(readyz)),
            ("/metrics", get(metrics)),
        ],
    )
}

/// One listener's router: every route answers other methods with the JSON 405, any other path
/// gets the JSON 404, and each of them (the 404 too) is wrapped by the request middleware
/// ([`RequestLayer`]) of the listener's `shared` state, told its route template here, once, for the
/// metric labels.
fn routed(
    shared: &Arc<RequestLayerState>,
    state: AppState,
    routes: Vec<(&'static str, MethodRouter<AppState>)>,
) -> Router {
    let layer = |route: Option<usize>| RequestLayer {
        shared: shared.clone(),
        route,
    };
    let mut router = Router::new();
    for (path, methods) in routes {
        let route = ROUTES.iter().position(|r| *r == path);
        router = router.route(
            path,
            methods.fallback(method_not_allowed).layer(layer(route)),
        );
    }
    router
        .fallback(not_found.layer(layer(None)))
        .with_state(state)
}

/// Every route template, so metric labels are static strings (no allocation per request, and a
/// bounded label space).
const ROUTES: [&str; 6] = [
    TRANSFORMER_REGISTRATIONS_PATH,
    PLATFORMS_PATH,
    RENDER_PATH,
    "/healthz",
    "/readyz",
    "/metrics",
];

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("no route for {}", req.uri().path()),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

/// Body of the probe endpoints.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProbeStatus {
    /// `ok` (healthz) or `ready` (readyz).
    pub status: &'static str,
}

/// Liveness: 200 while the process runs.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "probes",
    responses((status = 200, description = "The process is alive", body = ProbeStatus))
)]
pub async fn healthz() -> Response {
    json_response(StatusCode::OK, &ProbeStatus { status: "ok" })
}

/// Readiness: 200 once the HTTPS listener is bound, 503 before and while draining.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "probes",
    responses(
        (status = 200, description = "The webhook listener is serving", body = ProbeStatus),
        (status = 503, description = "Starting or draining", body = ErrorBody)
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    if state.is_ready() {
        json_response(StatusCode::OK, &ProbeStatus { status: "ready" })
    } else {
        ApiError::new(ErrorCode::NotReady, "the webhook listener is not serving").into_response()
    }
}

/// Prometheus metrics in the text exposition format 0.0.4.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "metrics",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain; version=0.0.4"))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => {
            let mut resp = (StatusCode::OK, text).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            resp
        }
        Err(e) => ApiError::internal(format!("encoding metrics: {e}")).into_response(),
    }
}

/// Validates a TransformerRegistration claim.
#[utoipa::path(
    post,
    path = "/validate/transformerregistrations",
    tag = "webhooks",
    request_body(content = super::review_doc::AdmissionReviewDoc, content_type = "application/json",
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
    responses(
        (status = 200, description = "The review, allowed or denied; response.uid echoes request.uid", body = super::review_doc::AdmissionReviewDoc),
        (status = 400, description = "Not a judgeable v1 AdmissionReview (malformed JSON, wrong apiVersion/kind, no request or uid)", body = ErrorBody),
        (status = 404, description = "Unknown path", body = ErrorBody),
        (status = 405, description = "Method other than POST", body = ErrorBody),
        (status = 408, description = "The request did not complete in time", body = ErrorBody),
        (status = 413, description = "Body over 3 MiB", body = ErrorBody),
        (status = 415, description = "Content-Type present and not application/json", body = ErrorBody),
        (status = 500, description = "Internal error (details are logged)", body = ErrorBody)
    )
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
    request_body(content = super::review_doc::AdmissionReviewDoc, content_type = "application/json",
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
    responses(
        (status = 200, description = "The review, allowed or denied; response.uid echoes request.uid", body = super::review_doc::AdmissionReviewDoc),
        (status = 400, description = "Not a judgeable v1 AdmissionReview (malformed JSON, wrong apiVersion/kind, no request or uid)", body = ErrorBody),
        (status = 404, description = "Unknown path", body = ErrorBody),
        (status = 405, description = "Method other than POST", body = ErrorBody),
        (status = 408, description = "The request did not complete in time", body = ErrorBody),
        (status = 413, description = "Body over 3 MiB", body = ErrorBody),
        (status = 415, description = "Content-Type present and not application/json", body = ErrorBody),
        (status = 500, description = "Internal error (details are logged)", body = ErrorBody)
    )
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
fn review(
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    /// Requests the direct dispatch takes (POST on a review path) and ones it must leave to the
    /// router (other methods, other paths); both ways must give the same status, body and series.
    #[tokio::test]
    async fn the_webhook_service_answers_as_the_router_does() {
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "opmodel.dev", "version": "v1alpha1", "kind": "Platform"},
                "resource": {"group": "opmodel.dev", "version": "v1alpha1", "resource": "platforms"},
                "name": "prod", "operation": "CREATE", "userInfo": {"username": "a"},
                "object": {"metadata": {"name": "prod"}, "spec": {"type": "kubernetes"}}
            }
        })
        .to_string();
        let cases: Vec<(&str, &str, Option<&str>, String)> = vec![
            (
                "POST",
                PLATFORMS_PATH,
                Some("application/json"),
                review.clone(),
            ),
            ("POST", TRANSFORMER_REGISTRATIONS_PATH, None, review.clone()),
            ("POST", PLATFORMS_PATH, Some("text/plain"), review.clone()),
            ("POST", PLATFORMS_PATH, None, "{".to_owned()),
            ("GET", PLATFORMS_PATH, None, String::new()),
            ("POST", "/validate/platforms/", None, review.clone()),
            ("POST", "/nowhere", None, review),
        ];
        // Each way on a fresh state: the answers (status, body) and the request/review series.
        let run = |direct: bool| {
            let cases = cases.clone();
            async move {
                let state = AppState::new(super::super::Limits::default(), None);
                let mut answers = Vec::new();
                for (method, path, content_type, body) in cases {
                    let mut req = axum::http::Request::builder().method(method).uri(path);
                    if let Some(ct) = content_type {
                        req = req.header(header::CONTENT_TYPE, ct);
                    }
                    let req = req.body(Body::from(body)).unwrap();
                    let resp = if direct {
                        WebhookService::new(state.clone()).oneshot(req).await
                    } else {
                        router(state.clone()).oneshot(req).await
                    }
                    .unwrap();
                    let status = resp.status().as_u16();
                    let body = resp.into_body().collect().await.unwrap().to_bytes();
                    answers.push((status, body));
                }
                let text = state.metrics.encode().unwrap();
                let mut series: Vec<String> = text
                    .lines()
                    .filter(|l| {
                        l.starts_with("http_requests_total")
                            || l.starts_with("admission_reviews_total")
                    })
                    .map(str::to_owned)
                    .collect();
                series.sort();
                (answers, series)
            }
        };
        let (routed_answers, routed_series) = run(false).await;
        let (direct_answers, direct_series) = run(true).await;
        let statuses: Vec<u16> = direct_answers.iter().map(|a| a.0).collect();
        assert_eq!(statuses, [200, 200, 415, 400, 405, 404, 404]);
        assert!(direct_answers.iter().all(|a| !a.1.is_empty()));
        assert_eq!(direct_answers, routed_answers, "same statuses and bodies");
        assert_eq!(direct_series, routed_series, "same metric series");
        assert!(direct_series.iter().any(|l| l
            == r#"http_requests_total{listener="webhook",route="/validate/platforms",method="POST",status="200"} 1"#));
    }
}
