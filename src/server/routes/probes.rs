//! The probe and metrics handlers, served over plain HTTP.
//!
//! Rules:
//! - `/healthz` is 200 while the process runs.
//! - `/readyz` is 200 only while the webhook listener serves (503 before it is bound and while
//!   draining).
//! - `/metrics` is the Prometheus text exposition format 0.0.4 of the server's registry (and of
//!   the controllers' families registered into it); an encoding failure is a 500.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::super::error::{json_response, ApiError, ErrorBody, ErrorCode};
use super::super::state::AppState;

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
