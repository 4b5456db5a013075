//! Pure admission logic for TransformerRegistration claims and the Platform singleton
//! (docs/design/operator.md §1.3, §1.4; docs/design/principles.md rule 17).
//!
//! Architecture invariants:
//! - Every function here is pure: an AdmissionReview in, an AdmissionReview out. No I/O, no tokio, no
//!   axum, no kube client, no CUE evaluation (the hot path must answer well inside the webhook's
//!   `timeoutSeconds: 5`). The `server` track wires [`review`] into the HTTPS router.
//! - The response always echoes the request `uid` (built with `AdmissionResponse::from(&req)`).
//! - A denial lists every violation, one per line, each prefixed by the field path it concerns
//!   (`spec.catalog: ...`). Legal-but-risky edits are allowed with `warnings`.
//! - Nothing reachable from input panics; a body that is not a v1 AdmissionReview with a request and a
//!   uid is a typed [`ReviewError`] (the server answers 400 with a JSON body).
//! - The rules run on a [`RequestView`]: read from a body in one pass by [`review`] and the server
//!   (the hot path), or borrowed from a `kube_core` `AdmissionRequest` by [`WebhookKind::validate`];
//!   see [`view`] for what it reads and skips.
//!
//! Response format:
//! - Allowed: `allowed: true`, optional `warnings` for legal-but-risky edits (disabling or removing a
//!   catalog, downgrading a version, relaxing `skewPolicy` to Warn, dropping provided contracts,
//!   deleting the Platform or an active/guarded claim).
//! - Denied: `allowed: false`, `status` = Failure, code 422, reason `Invalid`, `message` = every
//!   violation as `<field path>: <reason>` joined by `"; "`, and `details.causes` with one
//!   `FieldValueInvalid` cause (field + message) per violation.
//! - A misrouted kind (a Platform on the claim route or vice versa) is a denial on `request.kind`.
//!
//! Operations: CREATE and UPDATE are judged; an UPDATE that leaves `spec` unchanged (finalizer or
//! label edits) is always allowed, with the stored object's faults as warnings (ratcheting, so a
//! legacy object never gets stuck); status-subresource requests are allowed unjudged; DELETE and
//! CONNECT are allowed (DELETE with warnings). The deploy manifests register CREATE and UPDATE only.
//!
//! The rules themselves are listed in the module docs of [`transformer_registration`] and
//! [`platform`]; the shared syntax (module paths, bare SemVer, contract FQNs, reserved namespaces) in
//! [`syntax`].

mod common;
pub mod error;
pub mod json;
pub mod platform;
pub mod syntax;
pub mod transformer_registration;
pub mod view;
mod violations;

use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube_core::DynamicObject;

pub use common::check_dns_label;
pub use error::ReviewError;
pub use json::Json;
pub use platform::validate_platform;
pub use transformer_registration::validate_transformer_registration;
pub use view::{KindView, ObjectView, RequestView};

/// The only AdmissionReview apiVersion this crate accepts.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
/// The AdmissionReview kind.
pub const ADMISSION_KIND: &str = "AdmissionReview";

/// Which validating webhook a request arrived on (one per HTTPS route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookKind {
    /// `/validate/transformerregistrations`.
    TransformerRegistration,
    /// `/validate/platforms`.
    Platform,
}

impl WebhookKind {
    /// Every webhook, in route order.
    pub const ALL: [WebhookKind; 2] = [WebhookKind::TransformerRegistration, WebhookKind::Platform];

    /// The HTTPS path the ValidatingWebhookConfiguration calls for this kind.
    pub fn path(self) -> &'static str {
        match self {
            WebhookKind::TransformerRegistration => "/validate/transformerregistrations",
            WebhookKind::Platform => "/validate/platforms",
        }
    }

    /// The CRD kind this webhook validates.
    pub fn resource_kind(self) -> &'static str {
        match self {
            WebhookKind::TransformerRegistration => "TransformerRegistration",
            WebhookKind::Platform => "Platform",
        }
    }

    /// The lowercase plural resource name (as in `request.resource.resource`).
    pub fn plural(self) -> &'static str {
        match self {
            WebhookKind::TransformerRegistration => "transformerregistrations",
            WebhookKind::Platform => "platforms",
        }
    }

    /// Looks a kind up by its route path.
    pub fn from_path(path: &str) -> Option<WebhookKind> {
        Self::ALL.into_iter().find(|k| k.path() == path)
    }

    /// The webhook's validation function, on a `kube_core` request.
    pub fn validate(self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self.validate_view(&RequestView::from(req))
    }

    /// The webhook's validation function, on the view of a request.
    pub fn validate_view(self, req: &RequestView<'_>) -> AdmissionResponse {
        match self {
            WebhookKind::TransformerRegistration => transformer_registration::validate_view(req),
            WebhookKind::Platform => platform::validate_view(req),
        }
    }
}

/// The review that carries a response back, serialized exactly as
/// `AdmissionResponse::into_review()` serializes (`apiVersion`, `kind`, `response`) but borrowing
/// the response instead of copying its type meta into a new review.
#[derive(Debug, serde::Serialize)]
pub struct ResponseReview<'r> {
    #[serde(rename = "apiVersion")]
    api_version: &'r str,
    kind: &'r str,
    response: &'r AdmissionResponse,
}

impl<'r> ResponseReview<'r> {
    /// The review of `response` (its type meta becomes the review's).
    pub fn new(response: &'r AdmissionResponse) -> Self {
        ResponseReview {
            api_version: &response.types.api_version,
            kind: &response.types.kind,
            response,
        }
    }
}

/// Reads an AdmissionReview body ([`RequestView::parse`]), dispatches it to the webhook of `kind`,
/// and returns the response review (same apiVersion/kind, `response.uid` = `request.uid`).
///
/// Errors: the body is not JSON, is not an `admission.k8s.io/v1` `AdmissionReview`, has no `request`,
/// has no (or an empty) `request.uid`, or the request does not have the shape [`view`] reads.
pub fn review(
    kind: WebhookKind,
    body: &[u8],
) -> Result<AdmissionReview<DynamicObject>, ReviewError> {
    let req = RequestView::parse(body)?;
    Ok(kind.validate_view(&req).into_review())
}

/// Parses and checks an AdmissionReview body into a whole `kube_core` request (with the review's
/// type meta, so the response echoes it), for callers that need every member; the webhooks
/// themselves read the cheaper [`RequestView`].
///
/// One typed pass over the body on the happy path: the envelope is deserialized straight into
/// [`Envelope`] (no `serde(flatten)` at the top, which would buffer the whole body first). Only a body
/// that fails that pass is parsed again, as a `serde_json::Value`, to name exactly what is wrong
/// ([`classify`]); both paths accept and reject the same bodies.
pub fn parse_request(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
    match serde_json::from_slice::<Envelope>(body) {
        Ok(envelope) => envelope.into_request(),
        Err(typed) => Err(classify(body, typed)),
    }
}

/// The fields of an AdmissionReview a webhook reads; any other member (`response`) is ignored.
#[derive(serde::Deserialize)]
struct Envelope {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    request: Option<AdmissionRequest<DynamicObject>>,
}

impl Envelope {
    fn into_request(self) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
        check_envelope(self.api_version.as_deref(), self.kind.as_deref())?;
        let Some(mut request) = self.request else {
            return Err(ReviewError::MissingRequest);
        };
        if request.uid.is_empty() {
            return Err(ReviewError::MissingUid);
        }
        request.types = kube_core::TypeMeta {
            api_version: ADMISSION_API_VERSION.to_owned(),
            kind: ADMISSION_KIND.to_owned(),
        };
        Ok(request)
    }
}

/// The review's own `apiVersion` and `kind` (missing counts as empty).
pub(crate) fn check_envelope(
    api_version: Option<&str>,
    kind: Option<&str>,
) -> Result<(), ReviewError> {
    let api_version = api_version.unwrap_or_default();
    if api_version != ADMISSION_API_VERSION {
        return Err(ReviewError::WrongApiVersion {
            found: api_version.to_owned(),
        });
    }
    let kind = kind.unwrap_or_default();
    if kind != ADMISSION_KIND {
        return Err(ReviewError::WrongKind {
            found: kind.to_owned(),
        });
    }
    Ok(())
}

/// Names what is wrong with a body the typed pass rejected (`typed` is that pass's error), checking
/// in order: JSON, object, `apiVersion`, `kind`, `request`, `request.uid`, then the request's shape.
pub(crate) fn classify(body: &[u8], typed: serde_json::Error) -> ReviewError {
    let value: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return ReviewError::MalformedJson(e),
    };
    let Some(top) = value.as_object() else {
        return ReviewError::NotAnObject;
    };
    let api_version = top.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
    if api_version != ADMISSION_API_VERSION {
        return ReviewError::WrongApiVersion {
            found: api_version.to_owned(),
        };
    }
    let kind = top.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    if kind != ADMISSION_KIND {
        return ReviewError::WrongKind {
            found: kind.to_owned(),
        };
    }
    let request = match top.get("request") {
        None | Some(serde_json::Value::Null) => return ReviewError::MissingRequest,
        Some(r) => r,
    };
    match request.get("uid").and_then(|v| v.as_str()) {
        Some(uid) if !uid.is_empty() => ReviewError::InvalidRequest(typed),
        _ => ReviewError::MissingUid,
    }
}
