//! Signature policies of the client: verification by digest before any layer is read, the cache
//! of verified digests, signing for publishers, and [`VerifyingRegistry`], the view a render
//! fetches through when a module of its own must be signed.
//!
//! Rules:
//! - Policies in force for a fetch: the registry-wide keys ([`ModuleRegistry::require`]: every
//!   module and module file the registry serves, e.g. a Platform's `spec.verify`) and the caller's
//!   own keys for one module ([`ModuleRegistry::fetch_module_verified`], [`VerifyingRegistry`]).
//!   Each policy must be satisfied on its own: one signature verifying with one of its keys.
//! - The digest verified is the manifest digest the fetch resolved (or the one a memo or cache
//!   entry recorded when it was verified and stored); the layers are then read by the digests
//!   that manifest lists (module docs of `client`).
//! - A verified (digest, key-set fingerprint) pair is remembered for the life of the client, so a
//!   warm render asks the registry nothing; a new key set verifies again. A digest that failed is
//!   not remembered (a signature pushed later is found on the next fetch).
//! - Failures are [`RegistryError::Unverified`] naming the module and why (no signature artifact;
//!   no signature verifying with the keys of the source, each signature's reason), except that
//!   a registry that cannot be reached while fetching signatures is `Transient`.
//! - OCI layouts hold signatures the same way: the tag `sha256-<hex>.sig` of the module's
//!   repository in the layout's `index.json` (`repository:sha256-<hex>.sig`).

use std::path::Path;
use std::sync::Arc;

use cue::module::{check_coordinate, FileSystem, ModuleVersion, Registry, RegistryError};
use oci_client::Reference;
use p256::ecdsa::SigningKey;

use super::{invalid, transient, FetchedModule, ModuleRegistry};
use crate::artifact::{self, Descriptor};
use crate::layout::{Layout, LayoutError};
use crate::mapping::Location;
use crate::remote::OpError;
use crate::sign;
use crate::verify::{self, Candidate, TrustedKeys, MAX_PAYLOAD, MAX_SIGNATURE_MANIFEST};
use crate::Error;

/// Manifest media types a signature artifact may be stored as.
const SIGNATURE_MANIFEST_TYPES: &[&str] = &[
    artifact::MANIFEST_MEDIA_TYPE,
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// Most verified pairs remembered; past it the memory starts again (a cost, never a risk).
const MAX_VERIFIED: usize = 100_000;

/// Where a module's artifacts are, for signature reads.
#[derive(Clone, Copy)]
pub(super) enum Site<'a> {
    Layout(&'a Path),
    Remote(&'a str),
    None,
}

impl<'a> Site<'a> {
    pub(super) fn of(loc: &'a Location) -> Site<'a> {
        match loc {
            Location::Layout { dir } => Site::Layout(dir),
            Location::Remote { host, .. } => Site::Remote(host),
            Location::None => Site::None,
        }
    }
}

/// What `module verify` established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The coordinate.
    pub module: ModuleVersion,
    /// The manifest digest verified.
    pub manifest_digest: String,
    /// The tag the signatures were read from.
    pub signature_tag: String,
}

/// What `module sign` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The coordinate.
    pub module: ModuleVersion,
    /// The manifest digest signed.
    pub manifest_digest: String,
    /// The tag the signature was stored under.
    pub signature_tag: String,
    /// `false` when this very signature was already stored.
    pub created: bool,
}

fn unverified(coord: &str, message: impl Into<String>) -> RegistryError {
    RegistryError::Unverified {
        module: coord.to_string(),
        message: message.into(),
    }
}

/// Signature candidates with their payloads (or why a payload could not be read).
type Found = Vec<(Candidate, Result<Vec<u8>, String>)>;

impl ModuleRegistry {
    /// Sets (or clears) the registry-wide signature policy: from now on every module and
    /// module file this client serves must be signed with one of `keys`.
    pub fn require(&self, keys: Option<Arc<TrustedKeys>>) {
        let mut r = self.required.write().unwrap_or_else(|p| p.into_inner());
        *r = keys;
    }

    /// The registry-wide signature policy.
    pub fn required(&self) -> Option<Arc<TrustedKeys>> {
        self.required
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn policies(&self, extra: Option<&Arc<TrustedKeys>>) -> Vec<Arc<TrustedKeys>> {
        let mut out: Vec<Arc<TrustedKeys>> = self.required().into_iter().collect();
        if let Some(k) = extra {
            if !out.iter().any(|o| o == k) {
                out.push(k.clone());
            }
        }
        out
    }

    /// Fetches `m` (as [`ModuleRegistry::fetch_module`]) requiring, besides the registry-wide
    /// policy, a signature by one of `keys`.
    pub fn fetch_module_verified(
        &self,
        m: &ModuleVersion,
        keys: &Arc<TrustedKeys>,
    ) -> Result<Arc<FetchedModule>, RegistryError> {
        self.fetch_checked(m, Some(keys))
    }

    fn is_verified(&self, digest: &str, fingerprint: &str) -> bool {
        let v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        v.contains(&(digest.to_string(), fingerprint.to_string()))
    }

    fn mark_verified(&self, digest: &str, fingerprint: &str) {
        let mut v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() >= MAX_VERIFIED {
            v.clear();
        }
        v.insert((digest.to_string(), fingerprint.to_string()));
    }

    /// Checks `digest` of `repo` at `site` against every policy (module docs).
    pub(super) fn verify_digest(
        &self,
        coord: &str,
        site: Site<'_>,
        repo: &str,
        digest: &str,
        policies: &[Arc<TrustedKeys>],
    ) -> Result<(), RegistryError> {
        let pending: Vec<&Arc<TrustedKeys>> = policies
            .iter()
            .filter(|p| !self.is_verified(digest, p.fingerprint()))
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let tag = verify::signature_tag(digest).map_err(|e| invalid(coord, e))?;
        let found = self.signatures(coord, site, repo, &tag, digest)?;
        for p in pending {
            let key = verify::check(&found, digest, p).map_err(|m| unverified(coord, m))?;
            tracing::debug!(module = %coord, digest, key = %key, keys = p.source(), "signature verified");
            self.mark_verified(digest, p.fingerprint());
        }
        Ok(())
    }

    /// The signature layers stored under `tag` and their payloads.
    fn signatures(
        &self,
        coord: &str,
        site: Site<'_>,
        repo: &str,
        tag: &str,
        digest: &str,
    ) -> Result<Found, RegistryError> {
        let unsigned = || {
            unverified(
                coord,
                format!("manifest {digest} is not signed (no signature artifact {repo}:{tag})"),
            )
        };
        match site {
            Site::None => Err(unsigned()),
            Site::Layout(dir) => {
                let l = Layout::new(dir);
                let raw = match l.manifest(repo, tag) {
                    Ok((raw, _)) => raw,
                    Err(LayoutError::NotFound(_)) => return Err(unsigned()),
                    Err(LayoutError::Invalid(m)) => return Err(unverified(coord, m)),
                };
                let found = verify::candidates(&raw).map_err(|m| unverified(coord, m))?;
                Ok(found
                    .into_iter()
                    .map(|c| {
                        let p = l.blob(&c.payload, MAX_PAYLOAD).map_err(|e| match e {
                            LayoutError::NotFound(m) | LayoutError::Invalid(m) => m,
                        });
                        (c, p)
                    })
                    .collect())
            }
            Site::Remote(host) => {
                let remote = self.remote(coord)?;
                let r = Reference::with_tag(host.to_string(), repo.to_string(), tag.to_string());
                let res = self
                    .block(async move {
                        let (raw, _) = remote
                            .manifest_accepting(&r, SIGNATURE_MANIFEST_TYPES)
                            .await?;
                        if raw.len() as u64 > MAX_SIGNATURE_MANIFEST {
                            return Err(OpError::Invalid(format!(
                                "the signature manifest is over {MAX_SIGNATURE_MANIFEST} bytes"
                            )));
                        }
                        let found = verify::candidates(&raw).map_err(OpError::Invalid)?;
                        let mut out: Found = Vec::new();
                        for c in found {
                            let p = match remote.blob(&r, &c.payload).await {
                                Ok(b) => Ok(b),
                                Err(OpError::NotFound(m) | OpError::Invalid(m)) => Err(m),
                                Err(e) => return Err(e),
                            };
                            out.push((c, p));
                        }
                        Ok(out)
                    })
                    .map_err(|e| transient(coord, e))?;
                res.map_err(|e| match e {
                    OpError::NotFound(_) => unsigned(),
                    OpError::Transient(m) => transient(coord, m),
                    OpError::Denied(m) => RegistryError::Denied {
                        module: coord.to_string(),
                        message: m,
                    },
                    OpError::Invalid(m) => unverified(coord, m),
                })
            }
        }
    }

    /// Verifies that `m` is signed with one of `keys` (and the registry-wide policy), and reads
    /// and checks it as a fetch would (`opm-operator module verify`).
    pub fn verify_module(
        &self,
        m: &ModuleVersion,
        keys: &Arc<TrustedKeys>,
    ) -> Result<Verified, RegistryError> {
        let f = self.fetch_checked(m, Some(keys))?;
        let digest = f.meta.manifest_digest.clone();
        Ok(Verified {
            module: m.clone(),
            signature_tag: verify::signature_tag(&digest)
                .map_err(|e| invalid(&m.to_string(), e))?,
            manifest_digest: digest,
        })
    }

    /// Signs the published `m` with `key` and stores the signature as cosign does, next to the
    /// signatures already there (`opm-operator module sign`). The digest signed is the one the
    /// tag names now; the module is checked as a fetch would check it first, so nothing that
    /// would be refused is signed.
    pub fn sign_module(&self, m: &ModuleVersion, key: &SigningKey) -> Result<Signed, Error> {
        let coord = m.to_string();
        let base = check_coordinate(m).map_err(|e| invalid(&coord, e.to_string()))?;
        let loc = self.location(base).clone();
        let repo = loc.repository(base);
        // Resolve and check the artifact without the cache: what is signed is what the
        // location serves now.
        let (digest, reference) = match &loc {
            Location::None => return Err(Error::Registry(super::none_error(&coord, base))),
            Location::Layout { dir } => {
                let (mm, digest, mf, zip) = self.layout_artifact(&coord, dir, &repo, m, &[])?;
                super::finish(m, &coord, &mm, &mf, &zip, &self.cfg.limits)?;
                (digest, repo.clone())
            }
            Location::Remote { host, .. } => {
                let (mm, digest, mf, zip) = self.remote_artifact(&coord, host, &repo, m, &[])?;
                super::finish(m, &coord, &mm, &mf, &zip, &self.cfg.limits)?;
                (digest, format!("{host}/{repo}"))
            }
        };
        let tag = verify::signature_tag(&digest).map_err(|e| invalid(&coord, e))?;
        let payload = verify::payload(&reference, &digest, None);
        let signature = sign::sign_payload(key, &payload);
        let publish_err = |message: String| Error::Publish {
            module: coord.clone(),
            message,
        };
        let created = match &loc {
            Location::None => false,
            Location::Layout { dir } => {
                let l = Layout::new(dir);
                let existing = match l.manifest(&repo, &tag) {
                    Ok((raw, _)) => {
                        let payloads = layout_payloads(&l, &raw).map_err(publish_err)?;
                        Some((raw, payloads))
                    }
                    Err(LayoutError::NotFound(_)) => None,
                    Err(LayoutError::Invalid(m)) => return Err(publish_err(m)),
                };
                let a = sign::signature_manifest(
                    existing.as_ref().map(|(r, p)| (r.as_slice(), p.clone())),
                    &payload,
                    &signature,
                )
                .map_err(publish_err)?;
                if a.changed {
                    let blobs: Vec<Vec<u8>> = a.blobs.into_iter().map(|(_, b)| b).collect();
                    l.replace_raw(
                        &repo,
                        &tag,
                        &blobs,
                        &a.manifest,
                        artifact::MANIFEST_MEDIA_TYPE,
                    )
                    .map_err(publish_err)?;
                }
                a.changed
            }
            Location::Remote { host, .. } => {
                let remote = self.remote(&coord).map_err(Error::Registry)?;
                let r = Reference::with_tag(host.clone(), repo.clone(), tag.clone());
                let res = self
                    .block(async move {
                        let existing =
                            match remote
                                .manifest_accepting(&r, SIGNATURE_MANIFEST_TYPES)
                                .await
                            {
                                Ok((raw, _)) => {
                                    let m: artifact::Manifest = serde_json::from_slice(&raw)
                                        .map_err(|e| OpError::Invalid(e.to_string()))?;
                                    let mut payloads = Vec::new();
                                    for l in m.layers.iter().filter(|l| {
                                        l.media_type == verify::SIMPLE_SIGNING_MEDIA_TYPE
                                    }) {
                                        payloads.push(remote.blob(&r, l).await?);
                                    }
                                    Some((raw.to_vec(), payloads))
                                }
                                Err(OpError::NotFound(_)) => None,
                                Err(e) => return Err(e),
                            };
                        let a = sign::signature_manifest(
                            existing.as_ref().map(|(r, p)| (r.as_slice(), p.clone())),
                            &payload,
                            &signature,
                        )
                        .map_err(OpError::Invalid)?;
                        if a.changed {
                            for (d, data) in &a.blobs {
                                remote.push_blob(&r, d, data).await?;
                            }
                            remote
                                .push_manifest(&r, &a.manifest, artifact::MANIFEST_MEDIA_TYPE)
                                .await?;
                        }
                        Ok(a.changed)
                    })
                    .map_err(|e| Error::Registry(transient(&coord, e)))?;
                res.map_err(|e| Error::Registry(super::op_to_registry(&coord, e, Vec::new())))?
            }
        };
        Ok(Signed {
            module: m.clone(),
            manifest_digest: digest,
            signature_tag: tag,
            created,
        })
    }
}

/// The payload blobs of the signature layers of `raw`, read from the layout.
fn layout_payloads(l: &Layout, raw: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let m: artifact::Manifest = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
    m.layers
        .iter()
        .filter(|d: &&Descriptor| d.media_type == verify::SIMPLE_SIGNING_MEDIA_TYPE)
        .map(|d| {
            l.blob(d, MAX_PAYLOAD).map_err(|e| match e {
                LayoutError::NotFound(m) | LayoutError::Invalid(m) => m,
            })
        })
        .collect()
}

/// The registry a render fetches through when its module must be signed with keys of its own
/// (a ModuleInstance's `spec.verify`): every fetch goes through the shared client (registry-wide
/// policy, memo, cache); a fetch of `module`'s path also requires `keys`. The first
/// verification failure is kept, so the caller can report it as such even when the evaluator
/// saw it as an import that did not load.
pub struct VerifyingRegistry {
    inner: Arc<ModuleRegistry>,
    module: Option<(String, Arc<TrustedKeys>)>,
    failure: std::sync::Mutex<Option<RegistryError>>,
}

impl VerifyingRegistry {
    /// A view of `inner`; `module` = (module path with major, keys it must be signed with).
    pub fn new(
        inner: Arc<ModuleRegistry>,
        module: Option<(String, Arc<TrustedKeys>)>,
    ) -> VerifyingRegistry {
        VerifyingRegistry {
            inner,
            module,
            failure: std::sync::Mutex::new(None),
        }
    }

    /// The first verification failure of a fetch through this view.
    pub fn failure(&self) -> Option<RegistryError> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Registry for VerifyingRegistry {
    fn fetch(&self, m: &ModuleVersion) -> Result<Arc<dyn FileSystem>, RegistryError> {
        let extra = self
            .module
            .as_ref()
            .filter(|(path, _)| *path == m.path)
            .map(|(_, k)| k);
        match self.inner.fetch_checked(m, extra) {
            Ok(f) => Ok(Arc::new(f.to_memfs())),
            Err(e) => {
                if matches!(e, RegistryError::Unverified { .. }) {
                    let mut first = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                    if first.is_none() {
                        *first = Some(e.clone());
                    }
                }
                Err(e)
            }
        }
    }

    fn versions(&self, path: &str) -> Result<Vec<String>, RegistryError> {
        self.inner.list_versions(path)
    }
}
