//! Errors of the server: [`Error`] for starting and running it, [`ApiError`] for HTTP answers.
//!
//! Which error where:
//! - [`Error`] is returned by `server::run`/`server::start` (bind failures, bad TLS files, runtime
//!   setup). `main.rs` wraps it in `anyhow`.
//! - [`ApiError`] is every non-AdmissionReview HTTP answer. Its body always has the one shape
//!   `{"error": {"code": "...", "message": "..."}}` ([`ErrorBody`]). The code table is [`ErrorCode`]:
//!   one line per code with its HTTP status. A 5xx body never carries internal detail; the detail
//!   is logged instead.

use std::net::SocketAddr;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Errors of starting and running the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A listener could not be bound.
    #[error("binding the {what} listener on {addr}: {source}")]
    Bind {
        /// Which listener ("webhook", "probe", "metrics").
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS material could not be loaded, generated or watched.
    #[error(transparent)]
    Certs(#[from] certs::Error),
    /// Neither `--tls-cert`/`--tls-key` nor `--self-signed` was given.
    #[error("no TLS certificate: pass --tls-cert and --tls-key, or --self-signed for development")]
    NoTls,
    /// The async runtime could not be built.
    #[error("building the tokio runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The logging subscriber could not be installed.
    #[error("installing the log subscriber: {0}")]
    Logging(String),
    /// Waiting for a shutdown signal failed.
    #[error("listening for shutdown signals: {0}")]
    Signal(#[source] std::io::Error),
    /// A server task ended abnormally.
    #[error("a server task failed: {0}")]
    Task(String),
}

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident = ($code:literal, $status:ident); )*) => {
        /// The stable error codes of non-review HTTP answers, each with its HTTP status.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as it appears in `error.code`.
            pub fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $code, )* }
            }

            /// The HTTP status answered with this code.
            pub fn status(self) -> StatusCode {
                match self { $( ErrorCode::$variant => StatusCode::$status, )* }
            }
        }
    };
}

error_codes! {
    /// The body is not JSON.
    MalformedJson = ("malformed_json", BAD_REQUEST);
    /// The body is JSON but not an object.
    NotAnObject = ("not_an_object", BAD_REQUEST);
    /// `apiVersion` is not `admission.k8s.io/v1`.
    WrongApiVersion = ("wrong_api_version", BAD_REQUEST);
    /// `kind` is not `AdmissionReview`.
    WrongKind = ("wrong_kind", BAD_REQUEST);
    /// The review has no `request`.
    MissingRequest = ("missing_request", BAD_REQUEST);
    /// The request has no `uid`.
    MissingUid = ("missing_uid", BAD_REQUEST);
    /// The request does not have the AdmissionRequest shape.
    InvalidRequest = ("invalid_request", BAD_REQUEST);
    /// Any other unreadable request (e.g. a broken body stream).
    BadRequest = ("bad_request", BAD_REQUEST);
    /// No route has this path.
    NotFound = ("not_found", NOT_FOUND);
    /// The route exists but not for this method.
    MethodNotAllowed = ("method_not_allowed", METHOD_NOT_ALLOWED);
    /// The request did not complete within `--request-timeout`.
    RequestTimeout = ("request_timeout", REQUEST_TIMEOUT);
    /// The body is larger than the limit (3 MiB, the apiserver's own request limit).
    PayloadTooLarge = ("payload_too_large", PAYLOAD_TOO_LARGE);
    /// `Content-Type` is present and is not `application/json`.
    UnsupportedMediaType = ("unsupported_media_type", UNSUPPORTED_MEDIA_TYPE);
    /// A bug: the handler panicked or failed; details are in the log.
    Internal = ("internal", INTERNAL_SERVER_ERROR);
    /// The server is not ready (starting or draining).
    NotReady = ("not_ready", SERVICE_UNAVAILABLE);
    /// No platform is recorded yet; retry after `Retry-After` seconds.
    PlatformNotReady = ("platform_not_ready", SERVICE_UNAVAILABLE);
    /// The registry failed in a way that may pass (unreachable, 5xx).
    RegistryUnavailable = ("registry_unavailable", BAD_GATEWAY);
    /// The module, a version of it, or a catalog it needs does not resolve.
    ModuleNotFound = ("module_not_found", NOT_FOUND);
    /// The values do not satisfy the module's `#config` (`error.problems` names each path).
    InvalidValues = ("invalid_values", UNPROCESSABLE_ENTITY);
    /// The module needs newer catalogs than the platform pins and the skew policy is Refuse.
    SkewRefused = ("skew_refused", CONFLICT);
    /// The package is not a module instance.
    UnsupportedKind = ("unsupported_kind", UNPROCESSABLE_ENTITY);
    /// The render ran over its deadline or an evaluation limit.
    RenderTimeout = ("render_timeout", GATEWAY_TIMEOUT);
    /// The render ran out of its memory budget (`--render-memory-limit`; the message names the
    /// budget, the figure reached and the value being evaluated).
    RenderMemoryExceeded = ("render_memory_exceeded", UNPROCESSABLE_ENTITY);
    /// The module does not evaluate or render (details in `error.problems`).
    RenderFailed = ("render_failed", UNPROCESSABLE_ENTITY);
    /// This server has no render backend.
    RenderUnavailable = ("render_unavailable", SERVICE_UNAVAILABLE);
    /// The TokenReview/SubjectAccessReview calls failed; the caller is not at fault.
    AuthUnavailable = ("auth_unavailable", SERVICE_UNAVAILABLE);
    /// validate/diff need the cluster and the operator is not connected to it (yet).
    ClusterUnavailable = ("cluster_unavailable", SERVICE_UNAVAILABLE);
    /// The caller may not read what the answer needs (e.g. the instance for `diff`, a
    /// `valuesFrom` object).
    Forbidden = ("forbidden", FORBIDDEN);
    /// A required `valuesFrom` Secret, ConfigMap or key does not exist.
    ValuesFromNotFound = ("values_from_not_found", UNPROCESSABLE_ENTITY);
    /// A `valuesFrom` reference names another namespace, or its content is not usable.
    ValuesFromInvalid = ("values_from_invalid", UNPROCESSABLE_ENTITY);
}

/// The `error` member of [`ErrorBody`].
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable code.
    pub code: ErrorCode,
    /// A human-readable explanation.
    pub message: String,
    /// Structured detail (render errors: one entry per CUE problem); absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<ErrorProblem>,
}

/// One structured problem of an error answer.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorProblem {
    /// The value path it is about, e.g. `values.image.tag`.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// Source positions as `file:line:col`, primary first.
    pub positions: Vec<String>,
}

/// The one JSON shape of every non-review error answer.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// A non-review HTTP error answer.
#[derive(Clone, Debug)]
pub struct ApiError {
    /// The code (which fixes the status).
    pub code: ErrorCode,
    /// The message shown to the client.
    pub message: String,
    /// Structured detail.
    pub problems: Vec<ErrorProblem>,
    /// A `Retry-After` header in seconds.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            problems: Vec::new(),
            retry_after: None,
        }
    }

    /// A 500 with a generic message; `detail` goes to the log, never to the client.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(%detail, "internal error");
        ApiError::new(ErrorCode::Internal, "internal server error")
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message.clone(),
                problems: self.problems.clone(),
            },
        }
    }
}

impl From<webhooks::ReviewError> for ApiError {
    fn from(e: webhooks::ReviewError) -> Self {
        use webhooks::ReviewError as R;
        let code = match &e {
            R::MalformedJson(_) => ErrorCode::MalformedJson,
            R::NotAnObject => ErrorCode::NotAnObject,
            R::WrongApiVersion { .. } => ErrorCode::WrongApiVersion,
            R::WrongKind { .. } => ErrorCode::WrongKind,
            R::MissingRequest => ErrorCode::MissingRequest,
            R::MissingUid => ErrorCode::MissingUid,
            R::InvalidRequest(_) => ErrorCode::InvalidRequest,
            _ => ErrorCode::BadRequest,
        };
        ApiError::new(code, e.to_string())
    }
}

/// Serialises `body` to a JSON response with `status`.
pub(crate) fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response {
    // Sized for an AdmissionReview answer in one allocation (serde_json starts at 128 bytes).
    let mut bytes = Vec::with_capacity(512);
    match serde_json::to_writer(&mut bytes, body) {
        Ok(()) => {
            let mut resp = Response::new(axum::body::Body::from(bytes));
            *resp.status_mut() = status;
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
        Err(e) => {
            tracing::error!(error = %e, "serialising a response");
            let mut resp = (
                StatusCode::INTERNAL_SERVER_ERROR,
                r#"{"error":{"code":"internal","message":"internal server error"}}"#,
            )
                .into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = json_response(self.code.status(), &self.body());
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp.extensions_mut().insert(self.code);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialise_as_their_table_name() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.as_str().to_string()));
        }
    }

    #[test]
    fn review_errors_map_to_400_codes() {
        let e = webhooks::parse_request(b"{").unwrap_err();
        let api = ApiError::from(e);
        assert_eq!(api.code, ErrorCode::MalformedJson);
        assert_eq!(api.code.status(), StatusCode::BAD_REQUEST);
    }
}
