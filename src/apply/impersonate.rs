//! Impersonation of a tenant ServiceAccount (docs/design/operator.md §2.5; docs/design/principles.md rule 12).
//!
//! Rules:
//! - The user is `system:serviceaccount:<ns>:<sa>`; the groups are exactly
//!   `system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`. Everything
//!   else of the controller's client configuration is copied.
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

/// The three impersonated groups of a ServiceAccount in `namespace`.
pub fn sa_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_string(),
    ]
}

/// `base` with impersonation of the ServiceAccount set (and nothing else changed).
pub fn sa_config(base: &Config, namespace: &str, name: &str) -> Config {
    let mut c = base.clone();
    c.auth_info.impersonate = Some(sa_user(namespace, name));
    c.auth_info.impersonate_groups = Some(sa_groups(namespace));
    c
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
    fn user_and_exactly_three_groups() {
        let base = Config::new("http://127.0.0.1:1".parse().unwrap_or_default());
        let c = sa_config(&base, "team-a", "deploy-sa");
        assert_eq!(
            c.auth_info.impersonate.as_deref(),
            Some("system:serviceaccount:team-a:deploy-sa")
        );
        assert_eq!(
            c.auth_info.impersonate_groups,
            Some(vec![
                "system:serviceaccounts".to_string(),
                "system:serviceaccounts:team-a".to_string(),
                "system:authenticated".to_string(),
            ])
        );
        assert_eq!(c.cluster_url, base.cluster_url);
    }
}
