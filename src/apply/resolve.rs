//! Kind → API resource resolution with a refreshable discovery cache (lessons.md §5 rule 4).
//!
//! Rules:
//! - A (group, version, kind) resolves through the API server's discovery documents
//!   (`/api/v1`, `/apis/<g>/<v>`), one request per group-version, cached. Only successful
//!   lookups are cached: a kind that is not served yet (a CR whose CRD is being applied in the
//!   same pass) is looked up again next time, so it becomes resolvable as soon as the CRD is
//!   established. `refresh` drops the cache (at the start of every apply, and at the stage
//!   boundary after CRDs).
//! - A kind the server does not serve resolves to `None` (not an error); discovery transport or
//!   status errors (other than 404) are errors.
//! - An inventory entry without a version resolves through the group's preferred version.

use std::collections::HashMap;

use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use kube::Client;
use std::sync::Mutex;

use super::error::{is_not_found, Error};
use super::object::ObjectRef;

/// A resolved kind.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The API resource (plural, group, version).
    pub resource: ApiResource,
    /// Whether the kind is namespaced.
    pub namespaced: bool,
}

/// The discovery cache.
#[derive(Debug, Default)]
pub struct Resolver {
    cache: Mutex<HashMap<(String, String, String), Resolved>>,
}

impl Resolver {
    /// Drops every cached lookup.
    pub fn refresh(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    /// Resolves the kind of `r` (`None`: not served).
    /// `impersonated` is the user the client acts as (for typing a 403).
    pub async fn resolve(
        &self,
        client: &Client,
        r: &ObjectRef,
        impersonated: Option<&str>,
    ) -> Result<Option<Resolved>, Error> {
        let key = (r.group.clone(), r.version.clone(), r.kind.clone());
        let hit = self.cache.lock().ok().and_then(|c| c.get(&key).cloned());
        if let Some(hit) = hit {
            return Ok(Some(hit));
        }
        let found = if r.version.is_empty() {
            match kube::discovery::group(client, &r.group).await {
                Ok(g) => g
                    .recommended_kind(&r.kind)
                    .map(|(ar, caps)| (ar, caps.scope)),
                Err(e) => return miss(e, r, impersonated),
            }
        } else {
            let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
            match kube::discovery::pinned_kind(client, &gvk).await {
                Ok((ar, caps)) => Some((ar, caps.scope)),
                Err(e) => return miss(e, r, impersonated),
            }
        };
        let Some((resource, scope)) = found else {
            return Ok(None);
        };
        let resolved = Resolved {
            resource,
            namespaced: scope == Scope::Namespaced,
        };
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, resolved.clone());
        }
        Ok(Some(resolved))
    }
}

fn miss(
    e: kube::Error,
    r: &ObjectRef,
    impersonated: Option<&str>,
) -> Result<Option<Resolved>, Error> {
    match e {
        kube::Error::Discovery(_) => Ok(None),
        e if is_not_found(&e) => Ok(None),
        e => Err(Error::from_kube(
            e,
            &format!("discovery of {} {}", r.api_version(), r.kind),
            "discover",
            impersonated,
        )),
    }
}
