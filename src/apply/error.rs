//! The apply engine's one error type (docs/design/operator.md §2.2 phases 5–6, §2.4, §2.5, §6.3).
//!
//! Rules:
//! - Every error is classified where it arises, from the API `Status` (`code`, `reason`, cause
//!   types), never from message text. A 403 is [`Error::Forbidden`] and records the identity in
//!   effect, so the reconciler can tell "SA in effect + 403" (→ Stalled `ImpersonationFailed`)
//!   from a controller-identity denial by type.
//! - Every apply forces field ownership, so no SSA field-manager conflict reaches this type.
//! - An update refused because it changes a field that cannot change is recognised by
//!   [`immutable_fields`] from the typed Status: 422 `Invalid` whose every cause is
//!   `FieldValueForbidden` (e.g. a StatefulSet's or a PVC's spec) or `FieldValueInvalid` with the
//!   apiserver's `FieldImmutableErrorMsg` (`field is immutable`, apimachinery
//!   `api/validation.ValidateImmutableField`). The engine decides what it means (it knows whether
//!   the object exists): [`Error::Immutable`] without `rollout.forceConflicts`,
//!   [`Error::RecreateRefused`] for an object it never recreates.
//! - A stage that fails on several objects reports all of them ([`Error::Many`]);
//!   [`Error::is_forbidden`] and friends look through it.

use std::time::Duration;

use kube::core::Status;

/// Errors of the apply engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A rendered object is not a valid Kubernetes object (no apiVersion/kind/name, or a
    /// namespaced kind without a namespace).
    #[error("invalid object {object}: {reason}")]
    InvalidObject {
        /// `Kind/namespace/name` as far as known.
        object: String,
        /// What is wrong.
        reason: String,
    },
    /// The kind is not served by the cluster (not discoverable, even after a refresh).
    #[error("{object}: no API resource serves {api_version} {kind}")]
    UnknownKind {
        /// `Kind/namespace/name`.
        object: String,
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
    },
    /// The update of an existing object was refused because it changes immutable fields, and
    /// recreating is not enabled (`rollout.forceConflicts` off).
    #[error("{object}: update refused, immutable field(s) {fields:?} changed (set rollout.forceConflicts to recreate the object)")]
    Immutable {
        /// `Kind/namespace/name`.
        object: String,
        /// The immutable field paths as the API server names them.
        fields: Vec<String>,
    },
    /// The update of an existing object was refused because it changes immutable fields, and
    /// the object is one the engine never recreates (a Namespace, CRD or PVC: data loss; or a
    /// live object that is not ours), whatever `rollout.forceConflicts` says.
    #[error(
        "{object}: update refused, immutable field(s) {fields:?} changed; not recreated: {why}"
    )]
    RecreateRefused {
        /// `Kind/namespace/name`.
        object: String,
        /// The immutable field paths as the API server names them.
        fields: Vec<String>,
        /// Why it is not recreated.
        why: String,
    },
    /// The live object belongs to another instance that still exists ([`super::ownership`]): it is
    /// not applied, and nothing is pruned in that reconcile.
    #[error("{object} belongs to instance {owner}; not applied (remove it from one of the two instances)")]
    OwnershipConflict {
        /// `Kind/namespace/name`.
        object: String,
        /// The owning instance, `namespace/name`.
        owner: String,
    },
    /// The API server denied the request (403).
    #[error("{object}: {verb} forbidden{}: {message}", impersonated.as_ref().map(|u| format!(" for {u}")).unwrap_or_default())]
    Forbidden {
        /// `Kind/namespace/name`.
        object: String,
        /// The verb attempted (`get`, `apply`, `delete`, ...).
        verb: &'static str,
        /// The impersonated user in effect (`system:serviceaccount:<ns>:<sa>`), if any.
        impersonated: Option<String>,
        /// The API server's message.
        message: String,
    },
    /// The ServiceAccount to impersonate does not exist (uncached read; §2.5, §2.4).
    #[error("ServiceAccount {namespace}/{name} not found")]
    ServiceAccountNotFound {
        /// Namespace of the SA.
        namespace: String,
        /// Name of the SA.
        name: String,
    },
    /// The desired inventory exceeds the size budget (docs/design/principles.md rule 1).
    #[error("inventory too large: {0}")]
    InventoryTooLarge(#[source] crate::inventory::Error),
    /// An empty render would prune a non-empty inventory and `allow_empty` is off (docs/design/principles.md rule 3).
    #[error("refusing to apply an empty render over an inventory of {previous} resources (allow empty renders to prune everything)")]
    EmptyRenderRefused {
        /// Entries of the previous inventory.
        previous: usize,
    },
    /// Any other API error status.
    #[error("{object}: {verb} failed ({code} {reason}): {message}")]
    Api {
        /// `Kind/namespace/name` (or the discovery target).
        object: String,
        /// The verb attempted.
        verb: &'static str,
        /// HTTP status code.
        code: u16,
        /// The Status reason (`InternalError`, `Conflict`, `Invalid`, ...).
        reason: String,
        /// The API server's message.
        message: String,
    },
    /// A transport or client error (connection refused, decode failure, ...).
    #[error("{object}: {verb} failed: {source}")]
    Client {
        /// `Kind/namespace/name` (or the discovery target).
        object: String,
        /// The verb attempted.
        verb: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A wait ran past its deadline.
    #[error("timed out after {after:?} waiting for {waiting_for:?}")]
    Timeout {
        /// The objects not ready at the deadline (`Kind/namespace/name: status`).
        waiting_for: Vec<String>,
        /// The deadline.
        after: Duration,
    },
    /// An object reached a terminal failure while waited for (fail fast).
    #[error("{object} failed: {message}")]
    HealthFailed {
        /// `Kind/namespace/name`.
        object: String,
        /// Why (the condition message).
        message: String,
    },
    /// The wait was cancelled because a newer desired state arrived.
    #[error("cancelled: a newer desired state arrived")]
    Cancelled,
    /// Several objects failed in one stage; every error is listed.
    #[error("{} errors: {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Many(Vec<Error>),
    /// An entry of `healthCheckExprs` cannot be used ([`super::health::cel`]): an expression does
    /// not compile, or the entry repeats a kind.
    #[error("{}", health_check_expr_message(at, expression, message))]
    HealthCheckExpr {
        /// `healthCheckExprs[i].field` (or `healthCheckExprs[i]`).
        at: String,
        /// The expression (empty when the entry as a whole is refused).
        expression: String,
        /// Why.
        message: String,
    },
    /// A rendered object carries a value of an `opm.dev/*` policy annotation that means nothing
    /// ([`super::policy`]); nothing is applied.
    #[error(
        "{object}: annotation {annotation} has the unknown value {value:?} (allowed: {allowed})"
    )]
    InvalidPolicy {
        /// `Kind/namespace/name`.
        object: String,
        /// The annotation.
        annotation: &'static str,
        /// Its value.
        value: String,
        /// The values it may take, comma-separated.
        allowed: &'static str,
    },
}

fn health_check_expr_message(at: &str, expression: &str, message: &str) -> String {
    if expression.is_empty() {
        format!("{at}: {message}")
    } else {
        format!("{at}: invalid CEL expression `{expression}`: {message}")
    }
}

impl Error {
    /// Builds an error from a kube client error for `verb` on `object`.
    pub(crate) fn from_kube(
        e: kube::Error,
        object: &str,
        verb: &'static str,
        impersonated: Option<&str>,
    ) -> Error {
        match e {
            kube::Error::Api(status) => from_status(*status, object, verb, impersonated),
            other => Error::Client {
                object: object.to_string(),
                verb,
                source: other,
            },
        }
    }

    /// Whether this error (or any error it aggregates) is a 403.
    pub fn is_forbidden(&self) -> bool {
        self.any(&|e| matches!(e, Error::Forbidden { .. }))
    }

    /// Whether this error (or any it aggregates) is a 403 under impersonation (§2.2 phase 5:
    /// "SA in effect + 403 → Stalled ImpersonationFailed").
    pub fn is_impersonation_forbidden(&self) -> bool {
        self.any(&|e| {
            matches!(
                e,
                Error::Forbidden {
                    impersonated: Some(_),
                    ..
                }
            )
        })
    }

    /// Whether this error (or any it aggregates) is an [`Error::OwnershipConflict`].
    pub fn is_ownership_conflict(&self) -> bool {
        self.any(&|e| matches!(e, Error::OwnershipConflict { .. }))
    }

    /// Whether this error (or any it aggregates) is an update refused for immutable fields
    /// ([`Error::Immutable`] or [`Error::RecreateRefused`]).
    pub fn is_immutable(&self) -> bool {
        self.any(&|e| matches!(e, Error::Immutable { .. } | Error::RecreateRefused { .. }))
    }

    /// Whether this error (or any it aggregates) is a transport failure: the API server did not
    /// answer (connection refused or reset, TLS or timeout), as opposed to an answer refusing the
    /// request. A remote cluster that cannot be reached reports it ([`crate::controller`]'s
    /// `RemoteClusterUnreachable`).
    pub fn is_unreachable(&self) -> bool {
        self.any(&|e| {
            matches!(
                e,
                Error::Client {
                    source: kube::Error::HyperError(_) | kube::Error::Service(_),
                    ..
                }
            )
        })
    }

    /// Whether `pred` holds for this error or any error it aggregates.
    pub fn any(&self, pred: &dyn Fn(&Error) -> bool) -> bool {
        match self {
            Error::Many(v) => v.iter().any(|e| e.any(pred)),
            e => pred(e),
        }
    }

    /// One error from a non-empty list (the single error itself, or [`Error::Many`]).
    pub(crate) fn collect(mut errors: Vec<Error>) -> Option<Error> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Error::Many(errors)),
        }
    }
}

/// Whether a kube error is a 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

fn from_status(s: Status, object: &str, verb: &'static str, impersonated: Option<&str>) -> Error {
    if s.is_forbidden() {
        return Error::Forbidden {
            object: object.to_string(),
            verb,
            impersonated: impersonated.map(str::to_string),
            message: s.message,
        };
    }
    Error::Api {
        object: object.to_string(),
        verb,
        code: s.code,
        reason: s.reason,
        message: s.message,
    }
}

/// The apiserver's message for a changed immutable field (apimachinery
/// `api/validation.FieldImmutableErrorMsg`); a `FieldValueInvalid` cause ends with it.
const FIELD_IMMUTABLE: &str = "field is immutable";

/// The fields of a refused update when `e` says they cannot change (see the module rules), else
/// `None`. Only meaningful for an update of an existing object.
pub(crate) fn immutable_fields(e: &kube::Error) -> Option<Vec<String>> {
    let kube::Error::Api(s) = e else {
        return None;
    };
    if s.code != 422 || s.reason != "Invalid" {
        return None;
    }
    let causes = s.details.as_ref().map(|d| d.causes.as_slice())?;
    let immutable = |c: &&kube::core::response::StatusCause| {
        c.reason == "FieldValueForbidden"
            || (c.reason == "FieldValueInvalid" && c.message.ends_with(FIELD_IMMUTABLE))
    };
    if causes.is_empty() || !causes.iter().all(|c| immutable(&c)) {
        return None;
    }
    let mut fields: Vec<String> = causes.iter().map(|c| c.field.clone()).collect();
    fields.sort();
    fields.dedup();
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    fn status(code: u16, reason: &str, causes: Vec<StatusCause>) -> kube::Error {
        let mut s = Status::failure("msg", reason).with_code(code);
        s.details = Some(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        });
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn classifies_by_status_not_text() {
        let e = Error::from_kube(
            status(403, "Forbidden", vec![]),
            "ConfigMap/a/b",
            "apply",
            Some("system:serviceaccount:a:sa"),
        );
        assert!(e.is_impersonation_forbidden());
        let e = Error::from_kube(status(403, "Forbidden", vec![]), "x", "apply", None);
        assert!(e.is_forbidden() && !e.is_impersonation_forbidden());
        // A 409 is a plain API error (e.g. a stale resourceVersion).
        let e = Error::from_kube(status(409, "Conflict", vec![]), "x", "apply", None);
        assert!(matches!(e, Error::Api { code: 409, .. }));
        let many = Error::collect(vec![e, Error::Cancelled]);
        assert!(matches!(many, Some(Error::Many(ref v)) if v.len() == 2));
    }

    fn cause(reason: &str, field: &str, message: &str) -> StatusCause {
        StatusCause {
            reason: reason.into(),
            message: message.into(),
            field: field.into(),
        }
    }

    #[test]
    fn immutable_fields_come_from_the_cause_types() {
        let selector = cause(
            "FieldValueInvalid",
            "spec.selector",
            "Invalid value: {\"app\":\"b\"}: field is immutable",
        );
        let pvc = cause(
            "FieldValueForbidden",
            "spec",
            "Forbidden: spec is immutable after creation except resources.requests",
        );
        let e = status(422, "Invalid", vec![pvc.clone(), selector.clone()]);
        assert_eq!(
            immutable_fields(&e),
            Some(vec!["spec".to_string(), "spec.selector".to_string()])
        );
        // Any other invalid value makes it an ordinary validation error.
        let other = cause(
            "FieldValueInvalid",
            "spec.replicas",
            "Invalid value: -1: must be >= 0",
        );
        assert_eq!(
            immutable_fields(&status(422, "Invalid", vec![selector.clone(), other])),
            None
        );
        assert_eq!(immutable_fields(&status(422, "Invalid", vec![])), None);
        assert_eq!(
            immutable_fields(&status(409, "Conflict", vec![selector])),
            None
        );
    }
}
