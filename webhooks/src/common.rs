//! Helpers shared by both webhooks: the request-kind guard, typed field access on a
//! `DynamicObject`, and Kubernetes name checks (DNS-1123 label and subdomain).

use kube_core::admission::AdmissionRequest;
use kube_core::DynamicObject;
use serde_json::Value;

use crate::violations::Findings;

/// Denies a request whose `request.kind` is not `opmodel.dev/<kind>` (a misrouted webhook call);
/// returns whether the kind is right.
pub(crate) fn check_kind(
    req: &AdmissionRequest<DynamicObject>,
    kind: &str,
    f: &mut Findings,
) -> bool {
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
pub(crate) fn spec(obj: &DynamicObject) -> Option<&Value> {
    obj.data.get("spec")
}

/// Reads a required non-empty string field, recording a violation at `path` otherwise.
pub(crate) fn req_str<'a>(v: Option<&'a Value>, path: &str, f: &mut Findings) -> Option<&'a str> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(Value::String(_)) => {
            f.deny(path, "must not be empty");
            None
        }
        None | Some(Value::Null) => {
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
pub(crate) fn check_dns_label(s: &str) -> Result<(), String> {
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
