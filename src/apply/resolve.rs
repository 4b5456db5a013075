//! Kind → API resource resolution with a discovery cache (docs/design/principles.md rule 4; as
//! controller-runtime's lazy REST mapper: cache what resolved, look again on a miss).
//!
//! Rules:
//! - A (group, version, kind) resolves through the API server's discovery documents
//!   (`/api/v1`, `/apis/<g>/<v>`), one request per group-version, cached for [`MAX_AGE`] and
//!   shared by every apply, drift check, health check and prune of the engine (and of its
//!   impersonating copies). Only successful lookups are cached: a kind that is not served yet (a
//!   CR whose CRD is being applied in the same pass) is looked up again next time, so it becomes
//!   resolvable as soon as the CRD is established.
//! - What the cache holds can only go stale by a CRD change (scope and plural are immutable, so
//!   a served version going away): the engine drops the cache after applying CRDs (the stage
//!   boundary, `Engine::apply_all_staged`), and drops one kind's entry ([`Resolver::forget`])
//!   when a request made with it answers 404 where the kind itself must be missing (a dry-run
//!   apply never answers 404 for a missing object), then resolves it again.
//! - A kind the server does not serve resolves to `None` (not an error); discovery transport or
//!   status errors (other than 404) are errors.
//! - An inventory entry without a version resolves through the group's preferred version.

use std::collections::HashMap;
use std::time::{Duration, Instant};

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

/// How long a resolved kind is served from the cache before discovery is asked again (a safety
/// net: what can go stale is also dropped when it is seen to, module rules).
pub const MAX_AGE: Duration = Duration::from_secs(300);

type Key = (String, String, String);

fn key_of(r: &ObjectRef) -> Key {
    (r.group.clone(), r.version.clone(), r.kind.clone())
}

/// The discovery cache.
#[derive(Debug, Default)]
pub struct Resolver {
    cache: Mutex<HashMap<Key, (Resolved, Instant)>>,
}

impl Resolver {
    /// Drops every cached lookup.
    pub fn refresh(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    /// Drops the cached lookup of `r`'s kind.
    pub fn forget(&self, r: &ObjectRef) {
        if let Ok(mut c) = self.cache.lock() {
            c.remove(&key_of(r));
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
        let key = key_of(r);
        let hit = self.cache.lock().ok().and_then(|c| {
            c.get(&key)
                .filter(|(_, at)| at.elapsed() < MAX_AGE)
                .map(|(hit, _)| hit.clone())
        });
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
            c.insert(key, (resolved.clone(), Instant::now()));
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
