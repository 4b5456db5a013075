//! Pure admission logic for TransformerRegistration claims and the Platform singleton
//! (operator-spec.md §1.3, §1.4; lessons.md rule 17).
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
pub mod platform;
pub mod syntax;
pub mod transformer_registration;
mod violations;

use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube_core::DynamicObject;

pub use common::check_dns_label;
pub use error::ReviewError;
pub use platform::validate_platform;
pub use transformer_registration::validate_transformer_registration;

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

    /// The webhook's validation function.
    pub fn validate(self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        match self {
            WebhookKind::TransformerRegistration => validate_transformer_registration(req),
            WebhookKind::Platform => validate_platform(req),
        }
    }
}

/// Parses an AdmissionReview body, dispatches it to the webhook of `kind`, and returns the response
/// review (same apiVersion/kind, `response.uid` = `request.uid`).
///
/// Errors: the body is not JSON, is not an `admission.k8s.io/v1` `AdmissionReview`, has no `request`,
/// has no (or an empty) `request.uid`, or the request does not have the AdmissionRequest shape.
pub fn review(
    kind: WebhookKind,
    body: &[u8],
) -> Result<AdmissionReview<DynamicObject>, ReviewError> {
    let req = parse_request(body)?;
    Ok(kind.validate(&req).into_review())
}

/// Parses and checks an AdmissionReview body, returning its request (with the review's type meta, so
/// the response echoes it).
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
        let api_version = self.api_version.unwrap_or_default();
        if api_version != ADMISSION_API_VERSION {
            return Err(ReviewError::WrongApiVersion { found: api_version });
        }
        let kind = self.kind.unwrap_or_default();
        if kind != ADMISSION_KIND {
            return Err(ReviewError::WrongKind { found: kind });
        }
        let Some(mut request) = self.request else {
            return Err(ReviewError::MissingRequest);
        };
        if request.uid.is_empty() {
            return Err(ReviewError::MissingUid);
        }
        request.types = kube_core::TypeMeta { api_version, kind };
        Ok(request)
    }
}

/// Names what is wrong with a body the typed pass rejected (`typed` is that pass's error), checking
/// in order: JSON, object, `apiVersion`, `kind`, `request`, `request.uid`, then the request's shape.
fn classify(body: &[u8], typed: serde_json::Error) -> ReviewError {
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
