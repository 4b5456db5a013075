//! Authentication and authorisation of render requests (issue 16 item 2, docs/design/architecture.md §3 "HTTP").
//!
//! Rules:
//! - A request carries `Authorization: Bearer <token>`. The token is checked with a
//!   `authentication.k8s.io/v1` TokenReview; a missing, malformed or unauthenticated token is a
//!   401.
//! - The authenticated user (name, uid, groups, extra) is then authorised with a
//!   `authorization.k8s.io/v1` SubjectAccessReview for verb `create` on the virtual subresource
//!   `moduleinstances/render` of group `opmodel.dev` in the request's namespace; a denial is a 403.
//!   The Role a caller needs is the ClusterRole `opm-render` of `deploy/rbac.yaml`, bound in the
//!   namespaces the caller may render in.
//! - 401 and 403 answers use the Kubernetes `Status` shape (`kind: Status`, `status: Failure`,
//!   `reason: Unauthorized|Forbidden`, `code`), like the apiserver's own, so kubectl-style clients
//!   print them unchanged. A failure of the review calls themselves (the apiserver unreachable or
//!   refusing the operator) is a 503 in the server's own error shape: the caller is not at fault.
//! - The cluster client is published once `serve` has connected ([`ClusterRx`]); before that
//!   every request is a 503 `auth_unavailable`.
//! - [`RenderAuth::None`] skips both checks. It exists for the embedded `dev` cluster only; `serve`
//!   logs a warning when it is chosen.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;
use serde::Serialize;

/// The virtual resource a render is authorised against.
pub const RENDER_RESOURCE: &str = "moduleinstances";
/// The virtual subresource a render is authorised against.
pub const RENDER_SUBRESOURCE: &str = "render";

/// How render requests are authenticated and authorised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenderAuth {
    /// No checks (the embedded `dev` cluster only).
    None,
    /// TokenReview + SubjectAccessReview against the connected cluster; until `serve` has
    /// connected, every request is a 503 `auth_unavailable`, never let through.
    Kube,
}

/// The cluster the operator talks to: the controller's client and the configuration it was
/// built from (impersonating clients for validate/diff are derived from it).
#[derive(Clone)]
pub struct Cluster {
    /// The controller's client.
    pub client: kube::Client,
    /// Its configuration.
    pub config: kube::Config,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("url", &self.config.cluster_url)
            .finish_non_exhaustive()
    }
}

/// The cluster, published once `serve` has connected (`None` before).
pub type ClusterRx = tokio::sync::watch::Receiver<Option<Cluster>>;

/// The caller, as the TokenReview saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// User name (`system:anonymous` when auth is off).
    pub username: String,
    /// User uid, if any.
    pub uid: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// Why a request was not allowed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error("no bearer token: send `Authorization: Bearer <token>`")]
    NoToken,
    /// The TokenReview did not authenticate the token.
    #[error("the bearer token was not accepted{}", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    BadToken {
        /// The reviewer's error text, if any.
        reason: Option<String>,
    },
    /// The SubjectAccessReview denied the render.
    #[error("user {user:?} cannot create moduleinstances/render in the namespace {namespace:?}{}", reason.as_deref().filter(|r| !r.is_empty()).map(|r| format!(": {r}")).unwrap_or_default())]
    Denied {
        /// The user.
        user: String,
        /// The namespace.
        namespace: String,
        /// The authoriser's reason, if any.
        reason: Option<String>,
    },
    /// No cluster connection yet to review with.
    #[error("the operator is not connected to the cluster yet")]
    NotConnected,
    /// A review call failed (apiserver unreachable, the operator not allowed to review).
    #[error("the {what} call failed: {source}")]
    Review {
        /// `TokenReview` or `SubjectAccessReview`.
        what: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// The Kubernetes `Status` body of a 401/403 answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeStatus {
    /// Always `v1`.
    pub api_version: &'static str,
    /// Always `Status`.
    pub kind: &'static str,
    /// Always `Failure`.
    pub status: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// `Unauthorized` or `Forbidden`.
    pub reason: &'static str,
    /// The HTTP status code.
    pub code: u16,
}

/// Extracts the bearer token of an `Authorization` header value.
pub fn bearer_token(header: Option<&str>) -> Result<&str, AuthError> {
    let value = header.ok_or(AuthError::NoToken)?.trim();
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::NoToken)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthError::NoToken);
    }
    Ok(token)
}

impl RenderAuth {
    /// Authenticates `authorization` (the header value) and authorises a render in `namespace`
    /// against `cluster`. With [`RenderAuth::None`] the caller is `None` (nobody checked).
    pub async fn check(
        &self,
        cluster: Option<&Cluster>,
        authorization: Option<&str>,
        namespace: &str,
    ) -> Result<Option<Caller>, AuthError> {
        if *self == RenderAuth::None {
            return Ok(None);
        }
        let client = &cluster.ok_or(AuthError::NotConnected)?.client;
        let token = bearer_token(authorization)?;
        let caller = authenticate(client, token).await?;
        authorize(client, &caller, namespace).await?;
        Ok(Some(caller))
    }
}

async fn authenticate(client: &kube::Client, token: &str) -> Result<Caller, AuthError> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_string(),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let api: Api<TokenReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|source| AuthError::Review {
            what: "TokenReview",
            source,
        })?;
    let status = answer.status.unwrap_or_default();
    let user = status.user.unwrap_or_default();
    match (status.authenticated, user.username) {
        (Some(true), Some(username)) if !username.is_empty() => Ok(Caller {
            username,
            uid: user.uid,
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }),
        _ => Err(AuthError::BadToken {
            reason: status.error.filter(|e| !e.is_empty()),
        }),
    }
}

async fn authorize(
    client: &kube::Client,
    caller: &Caller,
    namespace: &str,
) -> Result<(), AuthError> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(caller.username.clone()),
            uid: caller.uid.clone(),
            groups: Some(caller.groups.clone()),
            extra: (!caller.extra.is_empty()).then(|| caller.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_string()),
                verb: Some("create".to_string()),
                group: Some(crds::GROUP.to_string()),
                resource: Some(RENDER_RESOURCE.to_string()),
                subresource: Some(RENDER_SUBRESOURCE.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|source| AuthError::Review {
            what: "SubjectAccessReview",
            source,
        })?;
    let status = answer.status.unwrap_or_default();
    if status.allowed && !status.denied.unwrap_or(false) {
        Ok(())
    } else {
        Err(AuthError::Denied {
            user: caller.username.clone(),
            namespace: namespace.to_string(),
            reason: status.reason.or(status.evaluation_error),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_extracted_case_insensitively() {
        assert_eq!(bearer_token(Some("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer_token(Some("bearer  abc ")).unwrap(), "abc");
        assert!(matches!(bearer_token(None), Err(AuthError::NoToken)));
        assert!(matches!(
            bearer_token(Some("Basic dXNlcjpwYXNz")),
            Err(AuthError::NoToken)
        ));
        assert!(matches!(
            bearer_token(Some("Bearer ")),
            Err(AuthError::NoToken)
        ));
        assert!(matches!(
            bearer_token(Some("Bearer")),
            Err(AuthError::NoToken)
        ));
    }

    #[tokio::test]
    async fn without_a_cluster_kube_auth_refuses_and_none_lets_through() {
        let err = RenderAuth::Kube
            .check(None, Some("Bearer t"), "ns")
            .await
            .unwrap_err();
        assert!(matches!(err, AuthError::NotConnected), "{err:?}");
        assert_eq!(
            RenderAuth::None.check(None, None, "ns").await.unwrap(),
            None
        );
    }

    #[test]
    fn messages_name_the_user_and_namespace() {
        let e = AuthError::Denied {
            user: "alice".into(),
            namespace: "team-a".into(),
            reason: None,
        };
        assert_eq!(
            e.to_string(),
            "user \"alice\" cannot create moduleinstances/render in the namespace \"team-a\""
        );
    }
}
