//! The apply engine's one error type (operator-spec.md §2.2 phases 5–6, §2.4, §2.5, §6.3).
//!
//! Rules:
//! - Every error is classified where it arises, from the API `Status` (`code`, `reason`, cause
//!   types), never from message text. A 403 is [`Error::Forbidden`] and records the identity in
//!   effect, so the reconciler can tell "SA in effect + 403" (→ Stalled `ImpersonationFailed`)
//!   from a controller-identity denial by type.
//! - An SSA conflict (409 with `FieldManagerConflict` causes) is [`Error::Conflict`] naming the
//!   other manager(s) and the fields. The manager name is read from the cause message's quoted
//!   part (`conflict with "<manager>" ...`), which is the apiserver's documented cause format;
//!   this is data extraction, not classification (the class comes from the cause type).
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
    /// Server-side apply refused because other field managers own fields we set (force off).
    #[error("{object}: apply conflict with {managers:?} on {fields:?} (set rollout.forceConflicts to take ownership)")]
    Conflict {
        /// `Kind/namespace/name`.
        object: String,
        /// The other managers, sorted and de-duplicated.
        managers: Vec<String>,
        /// The conflicting field paths as the API server names them.
        fields: Vec<String>,
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
    /// The desired inventory exceeds the size budget (lessons rule 1).
    #[error("inventory too large: {0}")]
    InventoryTooLarge(#[source] crate::inventory::Error),
    /// An empty render would prune a non-empty inventory and `allow_empty` is off (lessons rule 3).
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

    /// Whether this error (or any it aggregates) is an SSA field-manager conflict.
    pub fn is_conflict(&self) -> bool {
        self.any(&|e| matches!(e, Error::Conflict { .. }))
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
    let causes = s
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    let conflicts: Vec<_> = causes
        .iter()
        .filter(|c| c.reason == "FieldManagerConflict")
        .collect();
    if s.is_conflict() && !conflicts.is_empty() {
        let mut managers: Vec<String> = conflicts
            .iter()
            .filter_map(|c| quoted(&c.message))
            .collect();
        managers.sort();
        managers.dedup();
        let fields = conflicts.iter().map(|c| c.field.clone()).collect();
        return Error::Conflict {
            object: object.to_string(),
            managers,
            fields,
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

/// The first double-quoted part of a cause message (`conflict with "kubectl" using v1`).
fn quoted(message: &str) -> Option<String> {
    let start = message.find('"')? + 1;
    let len = message[start..].find('"')?;
    Some(message[start..start + len].to_string())
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
        let cause = StatusCause {
            reason: "FieldManagerConflict".into(),
            message: "conflict with \"kubectl\" using v1".into(),
            field: ".data.k".into(),
        };
        match Error::from_kube(status(409, "Conflict", vec![cause]), "x", "apply", None) {
            Error::Conflict {
                managers, fields, ..
            } => {
                assert_eq!(managers, vec!["kubectl".to_string()]);
                assert_eq!(fields, vec![".data.k".to_string()]);
            }
            other => unreachable!("{other:?}"),
        }
        // A 409 without field-manager causes is a plain API error (e.g. a stale resourceVersion).
        let e = Error::from_kube(status(409, "Conflict", vec![]), "x", "apply", None);
        assert!(matches!(e, Error::Api { code: 409, .. }));
        let many = Error::collect(vec![e, Error::Cancelled]);
        assert!(matches!(many, Some(Error::Many(ref v)) if v.len() == 2));
    }
}
