//! Impersonation of a tenant ServiceAccount (docs/design/operator.md §2.5; docs/design/principles.md rule 12).
//!
//! Rules:
//! - The user is `system:serviceaccount:<ns>:<sa>`, sent as `Impersonate-User` alone: the API
//!   server then gives the request exactly the ServiceAccount's groups (`system:serviceaccounts`,
//!   `system:serviceaccounts:<ns>`, `system:authenticated`). Sending them as `Impersonate-Group`
//!   would need `impersonate` on `groups`, a right that also lets its holder impersonate
//!   `system:masters`; `deploy/rbac.yaml` grants `impersonate` on `serviceaccounts` only (the
//!   install test proves the operator needs no more). Everything else of the controller's client
//!   configuration is copied.
//! - [`impersonate`] is the one place a client configuration gets impersonation headers (the
//!   render API's dry-runs as the caller use it too): a ServiceAccount user never carries groups.
//! - The ServiceAccount must exist: it is read with a direct GET through the controller client
//!   (no cache). NotFound is [`Error::ServiceAccountNotFound`]; other failures keep their type.
//! - The SA is always looked up in the object's own namespace (the caller passes it).
//! - A 403 from an engine built here is [`Error::Forbidden`] with `impersonated: Some(user)`.

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use kube::{Client, Config};

use super::error::{is_not_found, Error};
use super::Engine;

/// The impersonated user name of a ServiceAccount.
pub fn sa_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups the API server gives an impersonated ServiceAccount of `namespace`.
pub fn sa_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_string(),
    ]
}

/// `base` impersonating `user` with `groups`; a ServiceAccount user is sent without groups (the
/// API server derives them: module docs).
pub fn impersonate(base: &Config, user: &str, groups: &[String]) -> Config {
    let mut c = base.clone();
    c.auth_info.impersonate = Some(user.to_owned());
    c.auth_info.impersonate_groups = (!user.starts_with("system:serviceaccount:")
        && !groups.is_empty())
    .then(|| groups.to_vec());
    c
}

/// `base` with impersonation of the ServiceAccount set (and nothing else changed).
pub fn sa_config(base: &Config, namespace: &str, name: &str) -> Config {
    impersonate(base, &sa_user(namespace, name), &sa_groups(namespace))
}

/// Checks that the ServiceAccount exists (uncached GET through `controller`).
pub async fn check_sa(controller: &Client, namespace: &str, name: &str) -> Result<(), Error> {
    let api: Api<ServiceAccount> = Api::namespaced(controller.clone(), namespace);
    match api.get(name).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Err(Error::ServiceAccountNotFound {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }),
        Err(e) => Err(Error::from_kube(
            e,
            &format!("ServiceAccount/{namespace}/{name}"),
            "get",
            None,
        )),
    }
}

impl Engine {
    /// An engine acting as the ServiceAccount `namespace/name`, after checking it exists with
    /// this engine's (controller) client. `base` is the controller's client configuration.
    pub async fn impersonating(
        &self,
        base: &Config,
        namespace: &str,
        name: &str,
    ) -> Result<Engine, Error> {
        check_sa(&self.client, namespace, name).await?;
        let client =
            Client::try_from(sa_config(base, namespace, name)).map_err(|e| Error::Client {
                object: format!("ServiceAccount/{namespace}/{name}"),
                verb: "impersonate",
                source: e,
            })?;
        Ok(self.with_identity(client, sa_user(namespace, name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_account_is_impersonated_without_group_headers() {
        let base = Config::new("http://127.0.0.1:1".parse().unwrap_or_default());
        let c = sa_config(&base, "team-a", "deploy-sa");
        assert_eq!(
            c.auth_info.impersonate.as_deref(),
            Some("system:serviceaccount:team-a:deploy-sa")
        );
        assert_eq!(c.auth_info.impersonate_groups, None);
        assert_eq!(c.cluster_url, base.cluster_url);
        // A user who is not a ServiceAccount keeps the groups the caller authenticated with.
        let u = impersonate(&base, "alice", &["devs".to_string()]);
        assert_eq!(u.auth_info.impersonate.as_deref(), Some("alice"));
        assert_eq!(
            u.auth_info.impersonate_groups,
            Some(vec!["devs".to_string()])
        );
    }
}
