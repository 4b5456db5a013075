//! The AdmissionReview as the OpenAPI document describes it (schema types only; the webhooks
//! parse reviews with `webhooks::RequestView`). A leaf: the routes name these types in their
//! `utoipa::path` attributes and `openapi` gathers them.

use serde::Serialize;

/// `admission.k8s.io/v1` AdmissionReview, as sent by the apiserver and answered by the webhook.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewDoc {
    /// Always `admission.k8s.io/v1`.
    #[schema(example = "admission.k8s.io/v1", pattern = "^admission\\.k8s\\.io/v1$")]
    pub api_version: String,
    /// Always `AdmissionReview`.
    #[schema(example = "AdmissionReview", pattern = "^AdmissionReview$")]
    pub kind: String,
    /// The request (present in requests to the webhook).
    pub request: Option<AdmissionRequestDoc>,
    /// The answer (present in responses from the webhook).
    pub response: Option<AdmissionResponseDoc>,
}

/// The fields of `request` the webhooks use.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequestDoc {
    /// Correlates request and response; required and non-empty.
    #[schema(min_length = 1)]
    pub uid: String,
    /// Group, version and kind of the object.
    #[schema(value_type = Object)]
    pub kind: serde_json::Value,
    /// Group, version and plural resource.
    #[schema(value_type = Object)]
    pub resource: serde_json::Value,
    /// Object name.
    pub name: Option<String>,
    /// Object namespace (absent for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    #[schema(pattern = "^(CREATE|UPDATE|DELETE|CONNECT)$")]
    pub operation: String,
    /// The requesting user.
    #[schema(value_type = Object)]
    pub user_info: serde_json::Value,
    /// The new object (absent on DELETE).
    #[schema(value_type = Option<Object>)]
    pub object: Option<serde_json::Value>,
    /// The existing object (UPDATE and DELETE).
    #[schema(value_type = Option<Object>)]
    pub old_object: Option<serde_json::Value>,
    /// Whether the change will not be persisted.
    pub dry_run: Option<bool>,
}

/// The answer in `response`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AdmissionResponseDoc {
    /// `request.uid`, echoed.
    pub uid: String,
    /// Whether the change is admitted.
    pub allowed: bool,
    /// On denial: the reasons, one violation per line, each prefixed with its field path.
    pub status: Option<StatusDoc>,
    /// Warnings shown to the client even when allowed.
    pub warnings: Option<Vec<String>>,
}

/// `metav1.Status` as used in a denial.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatusDoc {
    /// HTTP-like code of the denial.
    pub code: Option<u16>,
    /// The message shown to the user.
    pub message: Option<String>,
    /// Machine-readable reason.
    pub reason: Option<String>,
}
