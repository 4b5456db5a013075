//! Helpers shared by both webhooks: the admission skeleton ([`validate`]), the request-kind guard,
//! typed field access on an object's `spec`, and Kubernetes name checks (DNS-1123 label and
//! subdomain).

use crate::json::Json;
use kube_core::admission::{AdmissionResponse, Operation};

use crate::view::{ObjectView, RequestView};
use crate::violations::Findings;

/// The per-kind rules plugged into [`validate`].
pub(crate) struct Rules {
    /// The kind validated (`Platform`, `TransformerRegistration`).
    pub kind: &'static str,
    /// Checks one object as a whole (CREATE, and the new object of an UPDATE).
    pub check_object: fn(&ObjectView<'_>, &mut Findings<'_>),
    /// Checks what an UPDATE may change (`old`, `new`).
    pub check_update: fn(&ObjectView<'_>, &ObjectView<'_>, &mut Findings<'_>),
    /// Adds warnings for a DELETE (deletes are always allowed).
    pub on_delete: fn(&RequestView<'_>, &mut Findings<'_>),
}

/// The admission skeleton both webhooks share: kind guard; status-subresource writes allowed
/// unchecked; CREATE checks the object; an UPDATE that leaves `spec` unchanged is allowed with the
/// stored object's faults as warnings (so a legacy object never gets stuck); any other UPDATE checks
/// the object and the update rules; DELETE is allowed with warnings; CONNECT is allowed.
pub(crate) fn validate(req: &RequestView<'_>, rules: &Rules) -> AdmissionResponse {
    let mut f = Findings::for_request(req);
    let resp = req.response();
    if !check_kind(req, rules.kind, &mut f) {
        return f.respond(resp);
    }
    if req.sub_resource.is_some() {
        return resp;
    }
    match req.operation {
        Operation::Create => {
            match &req.object {
                Some(obj) => (rules.check_object)(obj, &mut f),
                None => f.deny("request.object", "a CREATE request must carry the object"),
            }
            f.respond(resp)
        }
        Operation::Update => {
            let (Some(new), Some(old)) = (&req.object, &req.old_object) else {
                f.deny(
                    "request.oldObject",
                    "an UPDATE request must carry the object and the old object",
                );
                return f.respond(resp);
            };
            if spec(new) == spec(old) {
                let mut stored = Findings::default();
                (rules.check_object)(new, &mut stored);
                f.ratchet(stored);
                return f.respond(resp);
            }
            (rules.check_object)(new, &mut f);
            (rules.check_update)(old, new, &mut f);
            f.respond(resp)
        }
        Operation::Delete => {
            (rules.on_delete)(req, &mut f);
            f.respond(resp)
        }
        Operation::Connect => resp,
    }
}

/// Denies a request whose `request.kind` is not `opmodel.dev/<kind>` (a misrouted webhook call);
/// returns whether the kind is right.
pub(crate) fn check_kind(req: &RequestView<'_>, kind: &str, f: &mut Findings<'_>) -> bool {
    if req.kind.group == crds::GROUP && req.kind.kind == kind {
        return true;
    }
    f.deny(
        "request.kind",
        format!(
            "this webhook validates {}/{kind}, not {:?} in group {:?}",
            crds::GROUP,
            req.kind.kind,
            req.kind.group
        ),
    );
    false
}

/// The object's `spec` value, if any.
pub(crate) fn spec<'v, 'a>(obj: &'v ObjectView<'a>) -> Option<&'v Json<'a>> {
    obj.spec.as_ref()
}

/// The path of a field inside a map entry or a list item (`spec.registry["k"].version`,
/// `spec.provides[2]`). The rules run on every review and most find nothing, so a path is formatted
/// only when a finding names it ([`Findings::deny`], [`Findings::warn`]).
#[derive(Clone, Copy)]
pub(crate) struct FieldPath<'k> {
    /// The map or list (`spec.registry`).
    pub base: &'static str,
    /// The entry.
    pub at: At<'k>,
    /// The field inside the entry (`.version`, or empty for the entry itself).
    pub tail: &'static str,
}

/// A map key or a list index.
#[derive(Clone, Copy)]
pub(crate) enum At<'k> {
    /// A map key, printed quoted.
    Key(&'k str),
    /// A list index.
    Index(usize),
}

impl<'k> FieldPath<'k> {
    /// The same entry's field `tail`.
    pub fn field(self, tail: &'static str) -> Self {
        FieldPath { tail, ..self }
    }
}

impl std::fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            At::Key(k) => write!(f, "{}[{k:?}]{}", self.base, self.tail),
            At::Index(i) => write!(f, "{}[{i}]{}", self.base, self.tail),
        }
    }
}

/// Reads a required non-empty string field, recording a violation at `path` otherwise.
pub(crate) fn req_str<'a>(
    v: Option<&'a Json<'_>>,
    path: impl std::fmt::Display,
    f: &mut Findings<'_>,
) -> Option<&'a str> {
    match v {
        Some(Json::String(s)) if !s.is_empty() => Some(s),
        Some(Json::String(_)) => {
            f.deny(path, "must not be empty");
            None
        }
        None | Some(Json::Null) => {
            f.deny(path, "is required");
            None
        }
        Some(_) => {
            f.deny(path, "must be a string");
            None
        }
    }
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// DNS-1123 label: ≤ 63 characters of `[a-z0-9-]`, alphanumeric at both ends (namespace names).
pub fn check_dns_label(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err(format!("{s:?} is longer than 63 characters"));
    }
    if s.is_empty() || !s.chars().all(is_label_char) || s.starts_with('-') || s.ends_with('-') {
        return Err(format!(
            "{s:?} is not a DNS-1123 label (lowercase alphanumerics and '-', alphanumeric at both ends)"
        ));
    }
    Ok(())
}

/// DNS-1123 subdomain: ≤ 253 characters, dot-separated DNS-1123 labels (object names).
pub(crate) fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err(format!("{s:?} is longer than 253 characters"));
    }
    let ok = !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.chars().all(is_label_char)
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if !ok {
        return Err(format!(
            "{s:?} is not a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', alphanumeric at both ends)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(check_dns_label("team-a").is_ok());
        assert!(check_dns_label("Team").is_err());
        assert!(check_dns_label("-a").is_err());
        assert!(check_dns_label(&"a".repeat(64)).is_err());
        assert!(check_dns_subdomain("k8up.backup").is_ok());
        assert!(check_dns_subdomain("a..b").is_err());
        assert!(check_dns_subdomain("a_b").is_err());
    }
}
