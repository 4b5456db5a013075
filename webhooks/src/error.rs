//! Errors of the webhooks crate. [`ReviewError`] is the only error type: it describes a request body
//! the webhook cannot judge at all (the server answers HTTP 400 with the JSON of
//! [`ReviewError::to_json`]). A judged request never errors; a denial is an `AdmissionResponse`.

/// A body that is not a judgeable `admission.k8s.io/v1` AdmissionReview.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// The body is not valid JSON (expected for garbage input).
    #[error("request body is not valid JSON: {0}")]
    MalformedJson(#[source] serde_json::Error),
    /// The body is JSON but not an object.
    #[error("request body is not a JSON object")]
    NotAnObject,
    /// `apiVersion` is missing or not `admission.k8s.io/v1` (v1beta1 is not served).
    #[error("apiVersion must be \"admission.k8s.io/v1\", found {found:?}")]
    WrongApiVersion {
        /// The apiVersion found (empty when missing).
        found: String,
    },
    /// `kind` is missing or not `AdmissionReview`.
    #[error("kind must be \"AdmissionReview\", found {found:?}")]
    WrongKind {
        /// The kind found (empty when missing).
        found: String,
    },
    /// The review has no `request`.
    #[error("AdmissionReview has no request")]
    MissingRequest,
    /// `request.uid` is missing, not a string, or empty, so no response could be correlated.
    #[error("AdmissionReview request has no uid")]
    MissingUid,
    /// The request does not have the AdmissionRequest shape (e.g. no `operation` or `kind`).
    #[error("AdmissionReview request is malformed: {0}")]
    InvalidRequest(#[source] serde_json::Error),
}

impl ReviewError {
    /// The HTTP status the server answers with (always 400 Bad Request).
    pub fn http_status(&self) -> u16 {
        400
    }

    /// A stable machine-readable code for the JSON error body.
    pub fn code(&self) -> &'static str {
        match self {
            ReviewError::MalformedJson(_) => "malformed_json",
            ReviewError::NotAnObject => "not_an_object",
            ReviewError::WrongApiVersion { .. } => "wrong_api_version",
            ReviewError::WrongKind { .. } => "wrong_kind",
            ReviewError::MissingRequest => "missing_request",
            ReviewError::MissingUid => "missing_uid",
            ReviewError::InvalidRequest(_) => "invalid_request",
        }
    }

    /// The JSON error body: `{"code": "...", "message": "..."}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "code": self.code(), "message": self.to_string() })
    }
}
