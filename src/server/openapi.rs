//! The OpenAPI document of the HTTP API, generated from the handlers' `#[utoipa::path]` annotations.
//!
//! `openapi/openapi.json` is this document, checked in and drift-tested by
//! `cargo test --test it openapi` (regenerate with `UPDATE_EXPECT=1 cargo test --test it openapi`
//! or `opm-operator openapi > openapi/openapi.json`). The AdmissionReview schemas here describe the
//! fields the webhooks read and write; the full types are Kubernetes' `admission.k8s.io/v1`.

use serde::Serialize;
use utoipa::OpenApi;

use super::error::{ErrorBody, ErrorCode, ErrorDetail, ErrorProblem};
use super::render_api::{
    auth::KubeStatus, ForbiddenBody, InstanceDoc, ModuleCoordinate, ObjectErrorDoc,
    ObjectPreviewDoc, ObjectRefDoc, RenderMode, RenderRequest, RenderResponse, RenderedObjectDoc,
};
use super::routes::ProbeStatus;

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

/// Adds the `bearer` security scheme the render API uses.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "opm-operator",
        description = "Admission webhooks and the REST render API (HTTPS), probes and metrics (plain HTTP) of the Open Platform Model operator. Every non-review error answer has the shape {\"error\": {\"code\", \"message\", \"problems\"?}}, except the render API's 401/403, which use the Kubernetes Status shape.",
        license(name = "Apache-2.0")
    ),
    paths(
        super::routes::validate_transformer_registrations,
        super::routes::validate_platforms,
        super::routes::healthz,
        super::routes::readyz,
        super::routes::metrics,
        super::render_api::render,
    ),
    modifiers(&BearerAuth),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        ErrorProblem,
        ErrorCode,
        KubeStatus,
        ForbiddenBody,
        RenderMode,
        ModuleCoordinate,
        RenderRequest,
        RenderResponse,
        RenderedObjectDoc,
        InstanceDoc,
        ObjectPreviewDoc,
        ObjectRefDoc,
        ObjectErrorDoc,
        ProbeStatus,
        AdmissionReviewDoc,
        AdmissionRequestDoc,
        AdmissionResponseDoc,
        StatusDoc
    )),
    tags(
        (name = "webhooks", description = "Validating admission webhooks, HTTPS on --webhook-addr"),
        (name = "render", description = "The REST render API, HTTPS on --webhook-addr, bearer-token authenticated"),
        (name = "probes", description = "Liveness and readiness, plain HTTP on --probe-addr"),
        (name = "metrics", description = "Prometheus metrics, plain HTTP on --metrics-addr")
    )
)]
pub struct ApiDoc;

/// The document as pretty JSON with a trailing newline (the checked-in form).
pub fn openapi_json() -> Result<String, serde_json::Error> {
    let mut api = ApiDoc::openapi();
    // The crate version would make the file change on every release; the API is versioned with the
    // CRD group version instead.
    api.info.version = "v1alpha1".to_string();
    let mut doc = serde_json::to_string_pretty(&api)?;
    doc.push('\n');
    Ok(doc)
}
