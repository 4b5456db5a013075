//! The request middleware of every route (issue 16's per-request budget): one hand-written
//! tower layer rather than a stack of generic ones.
//!
//! Rules:
//! - One middleware per route ([`serve_request`]) does, outermost first: trace (one `request` span
//!   per request, with `method`, `path` and `status`, and `uid`, `kind`, `namespace`, `name`,
//!   `operation`, `allowed` recorded after parsing by the admission handlers), the in-flight
//!   gauge, the panic catcher (500 with the JSON error shape and no detail; the detail is
//!   logged), the request timeout (408 with the JSON error shape), then the request counter and
//!   latency histogram, which thus see timeouts and panics as their 408/500.
//! - Metric handles are resolved once: the in-flight gauge per listener, the series of a 200 per
//!   (route, method) on its first use (so `/metrics` lists no series that never saw a request),
//!   then read without a label lookup. Each route's layer knows its template
//!   ([`super::ROUTES`]), so axum's `MatchedPath` is not needed; a path outside them is
//!   `unmatched`.
//! - The in-flight gauge is decremented when a request ends, also when the client goes away and
//!   its future is dropped.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures::FutureExt as _;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use tracing::field::Empty;
use tracing::{Instrument as _, Span};

use super::super::error::{ApiError, ErrorCode};
use super::super::metrics::{HttpLabels, ListenerLabels};
use super::super::state::AppState;
use super::ROUTES;

/// The per-listener state of [`serve_request`]: the in-flight gauge, resolved once, and the
/// series of successful requests per (route, method), resolved on first use (so `/metrics` lists
/// no series that never saw a request) and then read without a label lookup.
pub(super) struct RequestLayerState {
    state: AppState,
    listener: &'static str,
    timeout: Duration,
    in_flight: Gauge,
    /// Indexed by route (in [`ROUTES`] order) then method (POST, GET): status 200's series.
    ok_series: [[OnceLock<(Counter, Histogram)>; 2]; ROUTES.len()],
}

impl RequestLayerState {
    pub(super) fn new(state: AppState, listener: &'static str) -> Self {
        let in_flight = state
            .metrics
            .http_in_flight
            .get_or_create(&ListenerLabels { listener })
            .clone();
        RequestLayerState {
            timeout: state.limits.request_timeout,
            state,
            listener,
            in_flight,
            ok_series: Default::default(),
        }
    }

    fn observe(&self, route: Option<usize>, method: &'static str, status: u16, secs: f64) {
        let slot = match (route, method, status) {
            (Some(r), "POST", 200) => self.ok_series.get(r).map(|s| &s[0]),
            (Some(r), "GET", 200) => self.ok_series.get(r).map(|s| &s[1]),
            _ => None,
        };
        let labels = || HttpLabels {
            listener: self.listener,
            route: route
                .and_then(|r| ROUTES.get(r))
                .copied()
                .unwrap_or("unmatched"),
            method,
            status,
        };
        match slot {
            Some(slot) => {
                let (count, duration) = slot.get_or_init(|| {
                    let labels = labels();
                    (
                        self.state
                            .metrics
                            .http_requests
                            .get_or_create(&labels)
                            .clone(),
                        self.state
                            .metrics
                            .http_duration
                            .get_or_create(&labels)
                            .clone(),
                    )
                });
                count.inc();
                duration.observe(secs);
            }
            None => {
                let labels = labels();
                self.state
                    .metrics
                    .http_requests
                    .get_or_create(&labels)
                    .inc();
                self.state
                    .metrics
                    .http_duration
                    .get_or_create(&labels)
                    .observe(secs);
            }
        }
    }
}

/// Decrements the in-flight gauge when a request ends, also when the client goes away and its
/// future is dropped.
pub(super) struct InFlight<'a>(&'a Gauge);

impl<'a> InFlight<'a> {
    pub(super) fn enter(gauge: &'a Gauge) -> Self {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The middleware of one route ([`serve_request`]) as a tower layer, with the route's index in
/// [`ROUTES`] (`None`: the 404 fallback, or a route outside it). Hand-written rather than
/// `axum::middleware::from_fn`, which per request clones the wrapped route once more and boxes it
/// again as `Next`; here the wrapped route is called directly (axum routes are always ready).
#[derive(Clone)]
pub(super) struct RequestLayer {
    pub(super) shared: Arc<RequestLayerState>,
    pub(super) route: Option<usize>,
}

impl<S> tower::Layer<S> for RequestLayer {
    type Service = RequestService<S>;

    fn layer(&self, inner: S) -> RequestService<S> {
        RequestService {
            inner,
            layer: self.clone(),
        }
    }
}

/// A route wrapped by [`RequestLayer`].
#[derive(Clone)]
pub(super) struct RequestService<S> {
    inner: S,
    layer: RequestLayer,
}

impl<S> tower::Service<Request> for RequestService<S>
where
    S: tower::Service<Request, Error = std::convert::Infallible> + Send + 'static,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let head = RequestHead {
            route: self.layer.route,
            method: method_label(req.method()),
            span: make_span(&req),
        };
        let inner = self.inner.call(req);
        Box::pin(serve_request(self.layer.shared.clone(), head, inner).map(Ok))
    }
}

/// What [`serve_request`] needs from the request head, read before the route takes the request.
pub(super) struct RequestHead {
    pub(super) route: Option<usize>,
    pub(super) method: &'static str,
    pub(super) span: Span,
}

/// Trace span, in-flight gauge, request timeout (408), panic catcher (500 with the JSON error
/// shape, no detail), then the request counter and latency histogram, which thus see timeouts
/// and panics as their 408/500.
pub(super) async fn serve_request<F, R>(
    layer: Arc<RequestLayerState>,
    head: RequestHead,
    inner: F,
) -> Response
where
    F: std::future::Future<Output = Result<R, std::convert::Infallible>>,
    R: IntoResponse,
{
    let RequestHead {
        route,
        method,
        span,
    } = head;
    let in_flight = InFlight::enter(&layer.in_flight);
    let start = Instant::now();
    let guarded = std::panic::AssertUnwindSafe(tokio::time::timeout(layer.timeout, inner))
        .catch_unwind()
        .instrument(span.clone());
    let resp = match guarded.await {
        Ok(Ok(Ok(resp))) => resp.into_response(),
        Ok(Ok(Err(never))) => match never {},
        Ok(Err(_elapsed)) => ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request did not complete within {} ms",
                layer.timeout.as_millis()
            ),
        )
        .into_response(),
        Err(panic) => panic_response(panic),
    };
    drop(in_flight);
    let elapsed = start.elapsed();
    let status = resp.status().as_u16();
    span.record("status", status);
    span.in_scope(|| tracing::debug!(latency_us = elapsed.as_micros() as u64, "answered"));
    layer.observe(route, method, status, elapsed.as_secs_f64());
    resp
}

/// The `request` span of `req`, its review fields empty until the handler parses the review.
pub(super) fn make_span(req: &Request) -> Span {
    tracing::info_span!(
        "request",
        method = %req.method(),
        path = %req.uri().path(),
        status = Empty,
        uid = Empty,
        kind = Empty,
        namespace = Empty,
        name = Empty,
        operation = Empty,
        allowed = Empty,
    )
}

/// The 500 of a panicking handler: the detail is logged (through [`ApiError`]), never sent.
fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    ApiError::internal(format!("handler panicked: {detail}")).into_response()
}

/// The metric label of `method` (a static string: a bounded label space).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::routed;
    use super::RequestLayerState;
    use crate::server::AppState;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::response::Response;
    use axum::routing::get;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    async fn panics() -> Response {
        panic!("boom")
    }

    #[tokio::test]
    async fn a_panicking_handler_is_a_500_with_the_json_error_shape() {
        let state = AppState::new(crate::server::Limits::default(), None);
        let app = routed(
            &Arc::new(RequestLayerState::new(state.clone(), "webhook")),
            state.clone(),
            vec![("/panic", get(panics))],
        );
        let resp = app
            .oneshot(
                axum::http::Request::get("/panic")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], "internal");
        assert_eq!(
            v["error"]["message"], "internal server error",
            "no panic detail leaks"
        );
        let text = state.metrics.encode().unwrap();
        assert!(
            text.contains(r#"http_requests_total{listener="webhook",route="unmatched",method="GET",status="500"} 1"#),
            "{text}"
        );
    }
}
