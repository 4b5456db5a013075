//! What a request addresses (resource type, version, namespace, name, subresource), who asks, and
//! its query parameters: plain data shared by the operations (`ops`) and the admission webhooks
//! they call (`admission`), so neither module needs the other's types.

use std::collections::HashMap;

use crate::api_error::ApiError;
use crate::events;
use crate::rbac::UserInfo;
use crate::resources::ResourceType;
use crate::ssa::Scope;
use crate::state::ResKey;

/// The addressed resource, namespace, name and subresource of a request.
#[derive(Debug, Clone)]
pub struct Target {
    /// Resource type.
    pub rt: ResourceType,
    /// Requested version.
    pub version: String,
    /// Namespace (`""` when cluster-scoped or all namespaces).
    pub ns: String,
    /// Object name (`""` for collections).
    pub name: String,
    /// Subresource (`""`, `status` or `scale`).
    pub sub: String,
}

impl Target {
    /// The store key.
    pub fn key(&self) -> ResKey {
        if events::is_events_v1(&self.rt) {
            return (String::new(), "events".into());
        }
        (self.rt.group.clone(), self.rt.plural.clone())
    }

    /// The apiVersion string of the request.
    pub fn api_version(&self) -> String {
        self.rt.api_version(&self.version)
    }

    pub(crate) fn scope(&self) -> Scope {
        if self.sub == "status" {
            Scope::Status
        } else if self.rt.status_subresource {
            Scope::Main
        } else {
            Scope::All
        }
    }

    pub(crate) fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.rt.group, &self.rt.plural, &self.name)
    }
}

/// Query parameters.
#[derive(Debug, Clone, Default)]
pub struct Query(pub HashMap<String, String>);

impl Query {
    /// A parameter's value.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    /// A boolean parameter (`true`/`1`).
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1"))
    }

    pub(crate) fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }
}

/// Who asks, and how.
#[derive(Debug, Clone)]
pub struct Req {
    /// The (impersonated) user.
    pub user: UserInfo,
    /// Query parameters.
    pub q: Query,
    /// User-Agent header.
    pub user_agent: String,
}

impl Req {
    pub(crate) fn manager(&self) -> String {
        match self.q.get("fieldManager") {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => {
                let ua = self.user_agent.split('/').next().unwrap_or("").trim();
                if ua.is_empty() {
                    "unknown".into()
                } else {
                    ua.to_string()
                }
            }
        }
    }
}
