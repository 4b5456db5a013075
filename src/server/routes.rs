//! The routing of the HTTP listeners: which path and method reach which handler, and the one
//! middleware around each of them.
//!
//! Rules:
//! - [`router`] is the HTTPS webhook router, shared by `main` and the tests. It serves
//!   `POST /validate/transformerregistrations` and `POST /validate/platforms` (the admission
//!   handlers, [`admission`]) and the render API; any other path is a 404 and any other method a
//!   405, both with the JSON error shape.
//! - [`WebhookService`] serves the webhook listener: [`router`], with the admission reviews
//!   dispatched directly (same middleware, same handlers, same answers).
//! - Every route, the 404 fallback included, is wrapped by the request middleware
//!   ([`middleware`]) of its listener, told its route template once ([`ROUTES`]), so the metric
//!   labels are static strings.
//! - [`probe_router`] (`/healthz`, `/readyz`) and [`metrics_router`] (`/metrics`) are plain HTTP
//!   ([`probes`]); [`probe_and_metrics_router`] serves both on one listener.

use std::sync::Arc;

use axum::extract::Request;
use axum::handler::Handler as _;
use axum::response::Response;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use futures::FutureExt as _;
use webhooks::WebhookKind;

use super::error::{ApiError, ErrorCode};
use super::render_api::RENDER_PATH;
use super::state::AppState;

pub(super) mod admission;
mod middleware;
pub(super) mod probes;

use admission::{review, validate_platforms, validate_transformer_registrations};
use middleware::{make_span, serve_request, RequestHead, RequestLayer, RequestLayerState};
use probes::{healthz, metrics, readyz};

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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::header;
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
                let state = AppState::new(crate::server::Limits::default(), None);
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
