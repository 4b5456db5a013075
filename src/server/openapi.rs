//! The OpenAPI document of the HTTP API, generated from the handlers' `#[utoipa::path]` annotations.
//!
//! `openapi/openapi.json` is this document, checked in and drift-tested by
//! `cargo test --test it openapi` (regenerate with `UPDATE_EXPECT=1 cargo test --test it openapi`
//! or `opm-operator openapi > openapi/openapi.json`). The AdmissionReview schemas here describe the
//! fields the webhooks read and write; the full types are Kubernetes' `admission.k8s.io/v1`.

use utoipa::OpenApi;

use super::error::{ErrorBody, ErrorCode, ErrorDetail, ErrorProblem};
use super::render_api::{
    auth::KubeStatus, ForbiddenBody, InstanceDoc, ModuleCoordinate, ObjectErrorDoc,
    ObjectPreviewDoc, ObjectRefDoc, RenderMode, RenderRequest, RenderResponse, RenderedObjectDoc,
};
use super::review_doc::{AdmissionRequestDoc, AdmissionResponseDoc, AdmissionReviewDoc, StatusDoc};
use super::routes::probes::ProbeStatus;

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
        super::routes::admission::validate_transformer_registrations,
        super::routes::admission::validate_platforms,
        super::routes::probes::healthz,
        super::routes::probes::readyz,
        super::routes::probes::metrics,
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
