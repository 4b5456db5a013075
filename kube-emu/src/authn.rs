//! Authentication as the apiserver does it, and the RBAC check against the store (`authorize`): bearer tokens, service-account tokens issued by
//! the TokenRequest API, and impersonation with its own authorization checks.
//!
//! Rules implemented:
//! - No `Authorization` header, or the kubeconfig's admin token, is cluster-admin
//!   (`system:masters`). A static token (`Options::tokens`, `Emulator::add_token`, the binary's
//!   `--token`) is its user. An unknown token is 401.
//! - TokenRequest (`POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`, an
//!   `authentication.k8s.io/v1` `TokenRequest`; authorized as `create` on
//!   `serviceaccounts/token`): the ServiceAccount must exist (404 otherwise);
//!   `spec.expirationSeconds` defaults to 3600 and may not be under 600 (422, as the
//!   apiserver); `spec.audiences` defaults to the apiserver's
//!   `https://kubernetes.default.svc.cluster.local`. The answer carries `status.token` (a JWT-shaped
//!   string: its claims are the upstream ones, its signature is random and never checked: the
//!   emulator looks the whole token up) and `status.expirationTimestamp`.
//! - Such a token authenticates as `system:serviceaccount:<ns>:<name>` with the
//!   ServiceAccount's uid and the groups `system:serviceaccounts`,
//!   `system:serviceaccounts:<ns>`, `system:authenticated`, until it expires or the
//!   ServiceAccount is deleted (or recreated with another uid): then 401. TokenReview knows the
//!   same tokens.
//! - Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//!   `Impersonate-Extra-<key>`), each authorized for the requesting user with verb
//!   `impersonate`: a `system:serviceaccount:<ns>:<sa>` user on `serviceaccounts` (group `""`,
//!   namespace `ns`, name `sa`), another user on `users`, each group on `groups` (group `""`),
//!   the uid on `uids` and each extra value on `userextras/<key>` (group
//!   `authentication.k8s.io`). A refusal is 403 with the apiserver's message. Groups, uid or
//!   extras without a user are 400. An impersonated service account without
//!   `Impersonate-Group` gets the service-account groups; every impersonated user other than
//!   `system:anonymous` gets `system:authenticated` unless a group already says
//!   `system:authenticated` or `system:unauthenticated`. Extra values are authorized and then
//!   dropped (the emulator's user has no extras).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::api_error::{ApiError, ApiResult};
use crate::rbac::{self, Attributes, UserInfo};
use crate::request::Target;
use crate::state::{ServiceAccountToken, State};
use crate::timefmt;

/// The audience a token gets when the request names none (the apiserver's default
/// `--api-audiences` on kubeadm and kind clusters).
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Token lifetime when `spec.expirationSeconds` is absent.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// The shortest lifetime the apiserver issues.
const MIN_EXPIRATION_SECONDS: i64 = 600;

/// Evaluates RBAC against the stored roles and bindings.
pub fn authorize(st: &State, user: &UserInfo, a: &Attributes<'_>) -> bool {
    if user.is_admin() {
        return true;
    }
    let g = "rbac.authorization.k8s.io".to_string();
    let crbs = st.list(&(g.clone(), "clusterrolebindings".into()), None);
    let rbs = if a.namespace.is_empty() {
        Vec::new()
    } else {
        st.list(&(g.clone(), "rolebindings".into()), Some(a.namespace))
    };
    rbac::allowed(
        user,
        a,
        crbs.iter().map(|v| &**v),
        rbs.iter().map(|v| &**v),
        |kind, ns, name| {
            let plural = if kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            st.get(&(g.clone(), plural.into()), ns, name)
                .map(|v| (*v).clone())
        },
    )
}

/// The user name of a service account.
pub fn service_account_username(ns: &str, name: &str) -> String {
    format!("system:serviceaccount:{ns}:{name}")
}

/// The groups of every service account of `ns` (without `system:authenticated`).
fn service_account_groups(ns: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{ns}"),
    ]
}

/// `system:serviceaccount:<ns>:<name>` → `(ns, name)`.
fn split_service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The user a bearer token (static or issued by TokenRequest) authenticates as, if any.
pub fn token_user(st: &State, token: &str) -> Option<UserInfo> {
    if let Some(u) = st.tokens.get(token) {
        return Some(u.clone());
    }
    let t = st.sa_tokens.get(token)?;
    if SystemTime::now() >= t.expires {
        return None;
    }
    let sa = st.get(
        &(String::new(), "serviceaccounts".into()),
        &t.namespace,
        &t.name,
    )?;
    if sa["metadata"]["uid"].as_str() != Some(t.uid.as_str()) {
        return None;
    }
    let mut groups = service_account_groups(&t.namespace);
    groups.push("system:authenticated".into());
    Some(UserInfo {
        username: service_account_username(&t.namespace, &t.name),
        groups,
        uid: t.uid.clone(),
    })
}

/// The authenticated (not yet impersonated) user of a request.
pub fn authenticate(st: &State, admin_token: &str, headers: &HeaderMap) -> ApiResult<UserInfo> {
    let Some(tok) = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
    else {
        return Ok(UserInfo::admin());
    };
    match token_user(st, tok) {
        Some(u) => Ok(u),
        None if tok == admin_token => Ok(UserInfo::admin()),
        None => Err(ApiError::unauthorized()),
    }
}

fn header_all(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// The `Impersonate-Extra-<key>` headers: (key, value) pairs.
fn extras(headers: &HeaderMap) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix("impersonate-extra-") else {
            continue;
        };
        if let Ok(v) = value.to_str() {
            out.push((key.to_string(), v.to_string()));
        }
    }
    out
}

/// Checks one impersonation permission of `requestor`.
fn allow(st: &State, requestor: &UserInfo, a: &Attributes<'_>) -> ApiResult<()> {
    if authorize(st, requestor, a) {
        Ok(())
    } else {
        Err(ApiError::forbidden(rbac::forbidden_message(requestor, a)))
    }
}

/// The user a request acts as when it carries impersonation headers (module rules), or `None`
/// when it carries none.
pub fn impersonate(
    st: &State,
    requestor: &UserInfo,
    headers: &HeaderMap,
) -> ApiResult<Option<UserInfo>> {
    let user = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let groups = header_all(headers, "impersonate-group");
    let uid = headers
        .get("impersonate-uid")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let extras = extras(headers);
    let Some(user) = user else {
        if groups.is_empty() && uid.is_empty() && extras.is_empty() {
            return Ok(None);
        }
        return Err(ApiError::bad_request(
            "requested impersonation of groups, uid or extras without impersonating a user",
        ));
    };
    let attrs = |group: &'static str, resource: &'static str, ns: &str, name: &str| {
        (group, resource, ns.to_string(), name.to_string())
    };
    let mut checks = Vec::new();
    let sa = split_service_account(&user);
    match sa {
        Some((ns, name)) => checks.push(attrs("", "serviceaccounts", ns, name)),
        None => checks.push(attrs("", "users", "", &user)),
    }
    for g in &groups {
        checks.push(attrs("", "groups", "", g));
    }
    if !uid.is_empty() {
        checks.push(attrs("authentication.k8s.io", "uids", "", &uid));
    }
    for (group, resource, ns, name) in &checks {
        allow(
            st,
            requestor,
            &Attributes {
                verb: "impersonate",
                group,
                resource,
                subresource: "",
                namespace: ns,
                name,
            },
        )?;
    }
    for (key, value) in &extras {
        allow(
            st,
            requestor,
            &Attributes {
                verb: "impersonate",
                group: "authentication.k8s.io",
                resource: "userextras",
                subresource: key,
                namespace: "",
                name: value,
            },
        )?;
    }
    let groups_given = !groups.is_empty();
    let mut groups = groups;
    if let (Some((ns, _)), false) = (sa, groups_given) {
        groups = service_account_groups(ns);
    }
    if user != "system:anonymous"
        && !groups
            .iter()
            .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
    {
        groups.push("system:authenticated".into());
    }
    Ok(Some(UserInfo {
        username: user,
        groups,
        uid,
    }))
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Serves a TokenRequest for the ServiceAccount `t` names (module rules): issues the token,
/// records it, and returns the answered TokenRequest.
pub fn token_request(st: &mut State, t: &Target, body: Value) -> ApiResult<Value> {
    let sa = st
        .get(&(String::new(), "serviceaccounts".into()), &t.ns, &t.name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", &t.name))?;
    let uid = sa["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let spec = &body["spec"];
    let seconds = match &spec["expirationSeconds"] {
        Value::Null => DEFAULT_EXPIRATION_SECONDS,
        v => v.as_i64().ok_or_else(|| {
            ApiError::bad_request("spec.expirationSeconds must be an integer".to_string())
        })?,
    };
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            &t.name,
            vec![(
                "spec.expirationSeconds".into(),
                format!(
                    "Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                ),
            )],
        ));
    }
    let audiences: Vec<Value> = match spec["audiences"].as_array() {
        Some(a) if !a.is_empty() => a.clone(),
        _ => vec![json!(DEFAULT_AUDIENCE)],
    };
    let now = SystemTime::now();
    let iat = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let lifetime = u64::try_from(seconds).unwrap_or(0);
    let exp = iat.saturating_add(lifetime);
    let header = json!({"alg": "RS256", "kid": "kube-emu"});
    let claims = json!({
        "aud": audiences,
        "exp": exp,
        "iat": iat,
        "nbf": iat,
        "iss": DEFAULT_AUDIENCE,
        "jti": uuid::Uuid::new_v4().to_string(),
        "sub": service_account_username(&t.ns, &t.name),
        "kubernetes.io": {
            "namespace": t.ns,
            "serviceaccount": {"name": t.name, "uid": uid},
        },
    });
    let token = format!(
        "{}.{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes()),
        b64url(uuid::Uuid::new_v4().as_bytes()),
    );
    st.sa_tokens.insert(
        token.clone(),
        ServiceAccountToken {
            namespace: t.ns.clone(),
            name: t.name.clone(),
            uid,
            expires: now + Duration::from_secs(lifetime),
        },
    );
    let mut spec_out = json!({"audiences": audiences, "expirationSeconds": seconds});
    if spec["boundObjectRef"].is_object() {
        spec_out["boundObjectRef"] = spec["boundObjectRef"].clone();
    }
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": t.name, "namespace": t.ns, "creationTimestamp": timefmt::format_unix(iat)},
        "spec": spec_out,
        "status": {"token": token, "expirationTimestamp": timefmt::format_unix(exp)},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_user_names_split() {
        assert_eq!(
            split_service_account("system:serviceaccount:opm-system:op"),
            Some(("opm-system", "op"))
        );
        assert_eq!(split_service_account("system:serviceaccount:ns"), None);
        assert_eq!(split_service_account("system:serviceaccount:a:b:c"), None);
        assert_eq!(split_service_account("alice"), None);
    }
}
