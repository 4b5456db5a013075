//! The request as the rules see it: [`RequestView`], read from a body in one typed pass or
//! borrowed from a `kube_core` `AdmissionRequest<DynamicObject>`, so both entry points run the same
//! rules.
//!
//! Rules:
//! - Reading a body ([`RequestView::parse`]) is one pass with no intermediate buffer (after one
//!   UTF-8 check of the whole body): strings are borrowed from the body unless they contain escapes, `spec` is parsed into a
//!   `serde_json::Value`, `status` is kept as raw JSON text and parsed only when a rule reads it, and
//!   every other member is skipped without allocating. (Deserializing the whole `AdmissionRequest`
//!   copies every string twice, through the buffer `#[serde(flatten)]` needs, and types
//!   `metadata.managedFields`; that was most of a review's cost.)
//! - Typed, with the types `kube_core` gives them: `uid`, `kind` (group, version, kind),
//!   `subResource`, `name`, `namespace`, `operation`, and per object `metadata.name`,
//!   `metadata.finalizers`, `spec` and `status` (any JSON). `resource` and `userInfo`, which
//!   `AdmissionRequest` requires but no rule reads, must be present; their contents are not checked,
//!   nor is any member no rule reads (`options`, `requestKind`, the rest of `metadata`): the webhook
//!   judges the object, the API server owns the envelope.
//! - The envelope checks (apiVersion, kind, request, non-empty uid) and the error classification are
//!   those of [`crate::parse_request`], so a body that is not a judgeable review gets the same
//!   [`ReviewError`].
//! - [`RequestView::response`] is what `AdmissionResponse::from(&AdmissionRequest)` builds: uid
//!   echoed, the review's type meta copied, allowed.

use std::borrow::Cow;

use kube_core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube_core::{DynamicObject, TypeMeta};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::ReviewError;
use crate::json::{Json, Str};

fn opt_str<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    Ok(Option::<Str<'a>>::deserialize(d)?.map(|s| s.0))
}

/// A present member, `null` included (`Some(Json::Null)`), as `DynamicObject::data` keeps it.
fn present<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Json<'a>>, D::Error> {
    Json::deserialize(d).map(Some)
}

/// `request.kind`: the kind of the object under review.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KindView<'a> {
    /// API group (`opmodel.dev`).
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    /// API version.
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    /// Kind (`Platform`, `TransformerRegistration`).
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// The members of an AdmissionReview `request` the rules read (see the module doc).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestView<'a> {
    /// The review's `apiVersion`, echoed in the response.
    #[serde(skip)]
    pub review_api_version: &'a str,
    /// The review's `kind`, echoed in the response.
    #[serde(skip)]
    pub review_kind: &'a str,
    /// `request.uid`, echoed as `response.uid`.
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    /// `request.kind`.
    #[serde(borrow)]
    pub kind: KindView<'a>,
    /// `request.resource`: required, not read.
    #[serde(rename = "resource")]
    _resource: IgnoredAny,
    /// `request.subResource` (`status` for status-subresource writes).
    #[serde(default, borrow, deserialize_with = "opt_str")]
    pub sub_resource: Option<Cow<'a, str>>,
    /// `request.name` (empty when the API server has not named the object yet).
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    /// `request.namespace` (none for cluster-scoped objects).
    #[serde(default, borrow, deserialize_with = "opt_str")]
    pub namespace: Option<Cow<'a, str>>,
    /// `request.operation`.
    pub operation: Operation,
    /// `request.userInfo`: required, not read.
    #[serde(rename = "userInfo")]
    _user_info: IgnoredAny,
    /// `request.object` (CREATE, UPDATE).
    #[serde(default, borrow)]
    pub object: Option<ObjectView<'a>>,
    /// `request.oldObject` (UPDATE, DELETE).
    #[serde(default, borrow)]
    pub old_object: Option<ObjectView<'a>>,
}

/// The members of an object under review the rules read.
#[derive(Debug, Clone, Default)]
pub struct ObjectView<'a> {
    /// `metadata.name`.
    pub name: Option<Cow<'a, str>>,
    /// `metadata.finalizers` (empty when absent).
    pub finalizers: Vec<Cow<'a, str>>,
    /// `spec`, when present (`null` included).
    pub spec: Option<Json<'a>>,
    status: Option<Status<'a>>,
}

/// `status`, either still text (from a body) or already a value (from a `DynamicObject`).
#[derive(Debug, Clone, Copy)]
enum Status<'a> {
    Text(&'a RawValue),
    Value(&'a Value),
}

#[derive(Deserialize)]
struct ObjectIn<'a> {
    #[serde(default, borrow)]
    metadata: MetaIn<'a>,
    #[serde(default, borrow, deserialize_with = "present")]
    spec: Option<Json<'a>>,
    #[serde(default, borrow)]
    status: Option<&'a RawValue>,
}

#[derive(Default, Deserialize)]
struct MetaIn<'a> {
    #[serde(default, borrow)]
    name: Option<Str<'a>>,
    #[serde(default, borrow)]
    finalizers: Option<Vec<Str<'a>>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for ObjectView<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let o = ObjectIn::deserialize(d)?;
        Ok(ObjectView {
            name: o.metadata.name.map(|s| s.0),
            finalizers: o
                .metadata
                .finalizers
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.0)
                .collect(),
            spec: o.spec,
            status: o.status.map(Status::Text),
        })
    }
}

impl ObjectView<'_> {
    /// Whether `status.<field>` is JSON `true` (status text is parsed here, on first need).
    pub fn status_flag(&self, field: &str) -> bool {
        let is_true = |v: &Value| v.get(field) == Some(&Value::Bool(true));
        match self.status {
            None => false,
            Some(Status::Value(v)) => is_true(v),
            Some(Status::Text(raw)) => serde_json::from_str::<Value>(raw.get())
                .ok()
                .is_some_and(|v| is_true(&v)),
        }
    }
}

impl<'a> From<&'a DynamicObject> for ObjectView<'a> {
    fn from(obj: &'a DynamicObject) -> Self {
        ObjectView {
            name: obj.metadata.name.as_deref().map(Cow::Borrowed),
            finalizers: obj
                .metadata
                .finalizers
                .iter()
                .flatten()
                .map(|f| Cow::Borrowed(f.as_str()))
                .collect(),
            spec: obj.data.get("spec").map(Json::from),
            status: obj.data.get("status").map(Status::Value),
        }
    }
}

impl<'a> From<&'a AdmissionRequest<DynamicObject>> for RequestView<'a> {
    fn from(req: &'a AdmissionRequest<DynamicObject>) -> Self {
        RequestView {
            review_api_version: &req.types.api_version,
            review_kind: &req.types.kind,
            uid: Cow::Borrowed(&req.uid),
            kind: KindView {
                group: Cow::Borrowed(&req.kind.group),
                version: Cow::Borrowed(&req.kind.version),
                kind: Cow::Borrowed(&req.kind.kind),
            },
            _resource: IgnoredAny,
            sub_resource: req.sub_resource.as_deref().map(Cow::Borrowed),
            name: Cow::Borrowed(&req.name),
            namespace: req.namespace.as_deref().map(Cow::Borrowed),
            operation: req.operation.clone(),
            _user_info: IgnoredAny,
            object: req.object.as_ref().map(ObjectView::from),
            old_object: req.old_object.as_ref().map(ObjectView::from),
        }
    }
}

/// The AdmissionReview members around the request.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "apiVersion", default, borrow)]
    api_version: Option<Str<'a>>,
    #[serde(default, borrow)]
    kind: Option<Str<'a>>,
    #[serde(default, borrow)]
    request: Option<RequestView<'a>>,
}

impl<'a> RequestView<'a> {
    /// Reads an AdmissionReview body (see the module doc); a body that is not a judgeable
    /// `admission.k8s.io/v1` review is the [`ReviewError`] [`crate::parse_request`] gives it.
    pub fn parse(body: &'a [u8]) -> Result<Self, ReviewError> {
        // UTF-8 is checked once for the whole body (word at a time) rather than string by string;
        // a body that is not UTF-8 goes the byte path, whose error names where it breaks.
        let typed = match std::str::from_utf8(body) {
            Ok(text) => serde_json::from_str::<Envelope<'a>>(text),
            Err(_) => serde_json::from_slice::<Envelope<'a>>(body),
        };
        let envelope = match typed {
            Ok(envelope) => envelope,
            Err(typed) => return Err(crate::classify(body, typed)),
        };
        crate::check_envelope(
            envelope.api_version.as_ref().map(|s| &*s.0),
            envelope.kind.as_ref().map(|s| &*s.0),
        )?;
        let Some(mut request) = envelope.request else {
            return Err(ReviewError::MissingRequest);
        };
        if request.uid.is_empty() {
            return Err(ReviewError::MissingUid);
        }
        request.review_api_version = crate::ADMISSION_API_VERSION;
        request.review_kind = crate::ADMISSION_KIND;
        Ok(request)
    }

    /// An allowed response to this request: what `AdmissionResponse::from(&AdmissionRequest)`
    /// builds (uid echoed, the review's type meta copied). `AdmissionResponse` is
    /// `#[non_exhaustive]`, so it starts from the one constructor that needs no request.
    pub fn response(&self) -> AdmissionResponse {
        let mut resp = AdmissionResponse::invalid("");
        // `invalid` already carries the v1 review type meta, this request's unless it came from a
        // hand-built `AdmissionRequest`.
        if resp.types.api_version != self.review_api_version || resp.types.kind != self.review_kind
        {
            resp.types = TypeMeta {
                api_version: self.review_api_version.to_owned(),
                kind: self.review_kind.to_owned(),
            };
        }
        resp.uid = self.uid.clone().into_owned();
        resp.allowed = true;
        resp.result = Default::default();
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(object: &str, old: &str) -> Vec<u8> {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{
            "uid":"u-1","kind":{{"group":"opmodel.dev","version":"v1alpha1","kind":"Platform"}},
            "resource":{{"group":"opmodel.dev","version":"v1alpha1","resource":"platforms"}},
            "name":"cluster","operation":"UPDATE","userInfo":{{"username":"a"}},
            "object":{object},"oldObject":{old}}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn the_view_of_a_body_matches_the_view_of_its_admission_request() {
        let b = body(
            r#"{"apiVersion":"opmodel.dev/v1alpha1","kind":"Platform","metadata":{"name":"clu\u0073ter","finalizers":["x"],"labels":{"a":"b"}},"spec":{"type":"k"},"status":{"active":true}}"#,
            r#"{"metadata":{"name":"cluster"},"spec":null,"status":{"active":"yes"}}"#,
        );
        let full = crate::parse_request(&b).unwrap();
        let from_full = RequestView::from(&full);
        let parsed = RequestView::parse(&b).unwrap();
        for (a, b) in [(&from_full, &parsed), (&parsed, &from_full)] {
            assert_eq!(a.uid, b.uid);
            assert_eq!(a.kind, b.kind);
            assert_eq!(a.name, b.name);
            assert_eq!(a.operation, b.operation);
            let (ao, bo) = (a.object.as_ref().unwrap(), b.object.as_ref().unwrap());
            assert_eq!(ao.name.as_deref(), Some("cluster"));
            assert_eq!(ao.name, bo.name);
            assert_eq!(ao.finalizers, bo.finalizers);
            assert_eq!(ao.spec, bo.spec);
            assert!(ao.status_flag("active") && bo.status_flag("active"));
            let (ao, bo) = (
                a.old_object.as_ref().unwrap(),
                b.old_object.as_ref().unwrap(),
            );
            assert_eq!(ao.spec, Some(Json::Null), "a null spec is present");
            assert_eq!(ao.spec, bo.spec);
            assert!(!ao.status_flag("active") && !bo.status_flag("active"));
        }
        assert_eq!(parsed.response(), AdmissionResponse::from(&full));
        assert_eq!(from_full.response(), AdmissionResponse::from(&full));
        // A hand-built request's own type meta is echoed too.
        let mut built = full.clone();
        built.types.api_version = "admission.k8s.io/v1beta1".to_owned();
        assert_eq!(
            RequestView::from(&built).response(),
            AdmissionResponse::from(&built)
        );
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let b = body(r#"{"metadata":{"name":"cluster"}}"#, "null");
        let v = RequestView::parse(&b).unwrap();
        assert!(matches!(v.uid, Cow::Borrowed(_)));
        assert!(matches!(v.kind.kind, Cow::Borrowed(_)));
        assert!(matches!(
            v.object.as_ref().and_then(|o| o.name.as_ref()),
            Some(Cow::Borrowed(_))
        ));
        assert!(v.old_object.is_none());
    }

    #[test]
    fn required_members_stay_required() {
        let b = String::from_utf8(body("null", "null")).unwrap();
        for member in [
            r#""userInfo":{"username":"a"},"#,
            r#""operation":"UPDATE","#,
        ] {
            let without = b.replace(member, "");
            assert!(
                matches!(
                    RequestView::parse(without.as_bytes()),
                    Err(ReviewError::InvalidRequest(_))
                ),
                "{member}"
            );
        }
    }
}
