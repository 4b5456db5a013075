//! API errors as the apiserver reports them: a `Status` object with `reason`, `code`, `details`.
//! Reasons and codes follow apimachinery's `StatusReason` table.

use serde_json::{json, Value};

/// An error returned to an API client.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// Optional `details` object.
    pub details: Option<Value>,
}

/// Shorthand result type for request handling.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = json!({ "kind": kind });
        if !name.is_empty() {
            d["name"] = json!(name);
        }
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// 404 for an object (`configmaps "x" not found`).
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qual = qualified(group, resource);
        Self::new(404, "NotFound", format!("{qual} \"{name}\" not found"))
            .with_details(group, resource, name)
    }

    /// 404 for a path that names no resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let qual = qualified(group, resource);
        Self::new(
            409,
            "AlreadyExists",
            format!("{qual} \"{name}\" already exists"),
        )
        .with_details(group, resource, name)
    }

    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        let qual = qualified(group, resource);
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qual} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(group, resource, name)
    }

    /// 409 Conflict with a custom message and details (server-side apply conflicts).
    pub fn conflict_with(message: String, details: Value) -> Self {
        let mut e = Self::new(409, "Conflict", message);
        e.details = Some(details);
        e
    }

    /// 422 Invalid with field causes (`(field, message)`, each of type `FieldValueInvalid`).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<(String, String)>) -> Self {
        let typed = causes
            .into_iter()
            .map(|(f, m)| ("FieldValueInvalid", f, m))
            .collect();
        Self::invalid_typed(group, kind, name, typed)
    }

    /// 422 Invalid with typed field causes (`(cause type, field, message)`), the shape of
    /// apimachinery's `NewInvalid`: the cause type is the `field.ErrorType` (`FieldValueInvalid`,
    /// `FieldValueForbidden`, ...) and the message its `ErrorBody` (`Invalid value: ...`).
    pub fn invalid_typed(
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<(&'static str, String, String)>,
    ) -> Self {
        let qual = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let msgs: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
        let joined = if msgs.len() == 1 {
            msgs[0].clone()
        } else {
            format!("[{}]", msgs.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{qual} \"{name}\" is invalid: {joined}"),
        )
        .with_details(group, kind, name);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = Value::Array(
                causes
                    .iter()
                    .map(|(r, f, m)| json!({"reason": r, "message": m, "field": f}))
                    .collect(),
            );
        }
        e
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 410 Gone (expired resourceVersion).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct})"),
        )
    }

    /// 415 UnsupportedMediaType for a request body (create, update, delete options) whose
    /// encoding the emulator does not decode. client-go answers a 415 to a CBOR body by sending
    /// JSON from then on.
    pub fn unsupported_body_media_type(what: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf ({what})"),
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// A Status returned by an admission webhook denial, with the real apiserver's wording.
    pub fn webhook_denied(
        code: u16,
        reason: &str,
        message: String,
        details: Option<Value>,
    ) -> Self {
        let mut e = Self::new(code.max(400), "", message);
        e.reason = reason_static(reason);
        e.details = details;
        e
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if !self.reason.is_empty() {
            s["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

fn reason_static(r: &str) -> &'static str {
    match r {
        "Forbidden" => "Forbidden",
        "Invalid" => "Invalid",
        "BadRequest" => "BadRequest",
        "Conflict" => "Conflict",
        "NotFound" => "NotFound",
        "AlreadyExists" => "AlreadyExists",
        "InternalError" => "InternalError",
        _ => "",
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
