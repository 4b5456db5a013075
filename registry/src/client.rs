//! [`ModuleRegistry`]: the synchronous module registry the evaluator calls, over remote OCI
//! registries and OCI layout directories, with verification and an on-disk cache.
//!
//! Threading rules: the OCI client is async; [`ModuleRegistry`] owns a small tokio runtime of its
//! own (one worker thread) and every blocking method hands its future to that runtime and waits on
//! a channel. It therefore works from plain threads and from `tokio::task::spawn_blocking`, and it
//! never panics when called inside another runtime. It must NOT be called directly from an async
//! task (that would block the task's worker thread while the fetch runs): call it through
//! `spawn_blocking`. Dropping it anywhere is fine (the runtime is shut down in the background).
//! The OCI client is built on the first remote operation, not with the registry: building it
//! loads the system's root certificates (a tenth of a 20-component render's time and memory),
//! which a registry of layout directories never uses. A client that cannot be built is a
//! `Transient` error of that operation.
//!
//! Fetch order for `path@vN` + `version`: in-process memo → on-disk cache (keyed by registry and
//! coordinate; a warm fetch does no network) → the mapped location. A fetched artifact is checked
//! in full before it is used or cached: manifest shape (`artifact`), digest and size of every blob,
//! zip safety (`zipfile`), and the module path declared by both the module-file layer and the
//! zip's `cue.mod/module.cue`, which must equal the requested path. A missing version is
//! `NotFound` listing the versions published in that major. Every error names the coordinate.
//!
//! Signatures (`signed`): when a signature policy applies to a fetch (the registry-wide one set by
//! [`ModuleRegistry::require`], and the caller's own for [`ModuleRegistry::fetch_module_verified`]),
//! the manifest is resolved first, its digest verified (cosign layout, [`crate::verify`]), and only
//! then are the layers of that manifest read, by their digests: content cannot change between the
//! verification and the read. A memo or disk-cache hit is verified by the manifest digest it
//! recorded. Results are cached per (digest, key-set fingerprint). Module files read for MVS
//! ([`ModuleRegistry::module_file`]) are verified under the registry-wide policy the same way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cue::module::{
    check_coordinate, check_path_with_major, semver, FileSystem, MemFs, ModuleFile,
    ModuleFileSource, ModuleVersion, Registry, RegistryError, SourceKind,
};
use oci_client::Reference;

use super::artifact::{self, Descriptor, ModuleManifest};
use super::auth::Credentials;
use super::cache::{Cache, EntryMeta};
use super::layout::{Layout, LayoutError};
use super::mapping::{Location, Mapping};
use super::remote::{OpError, Remote, Timeouts};
use super::verify::TrustedKeys;
use super::zipfile::{self, ZipLimits};
use super::Error;

mod signed;

use signed::Site;
pub use signed::{Signed, Verified, VerifyingRegistry};

/// Configuration of a [`ModuleRegistry`].
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// Where modules come from.
    pub mapping: Mapping,
    /// On-disk cache root; `None` disables the disk cache (the in-process memo stays).
    pub cache_dir: Option<PathBuf>,
    /// Network time bounds.
    pub timeouts: Timeouts,
    /// Zip extraction limits.
    pub limits: ZipLimits,
    /// Registry credentials.
    pub credentials: Credentials,
}

impl RegistryConfig {
    /// Defaults for a mapping: no disk cache, 30 s deadline, 3 retries, 500 MiB limits,
    /// anonymous access.
    pub fn new(mapping: Mapping) -> RegistryConfig {
        RegistryConfig {
            mapping,
            cache_dir: None,
            timeouts: Timeouts::default(),
            limits: ZipLimits::default(),
            credentials: Credentials::anonymous(),
        }
    }

    /// Loads credentials from the docker config file (`$DOCKER_CONFIG/config.json`, else
    /// `~/.docker/config.json`; a missing file means anonymous access).
    pub fn with_docker_config(mut self) -> Result<RegistryConfig, Error> {
        if let Some(p) = Credentials::default_path() {
            self.credentials = Credentials::from_file(&p).map_err(Error::Credentials)?;
        }
        Ok(self)
    }
}

/// A fetched, verified module.
#[derive(Clone, Debug)]
pub struct FetchedModule {
    /// `(path, contents)`, sorted by path.
    pub files: Vec<(String, Vec<u8>)>,
    /// Where it came from and its digests.
    pub meta: EntryMeta,
    /// `true` when served from the disk cache or the memo without any registry access.
    pub cached: bool,
}

impl FetchedModule {
    /// The files as an in-memory file system.
    pub fn to_memfs(&self) -> MemFs {
        let mut fs = MemFs::new();
        for (p, d) in &self.files {
            fs.insert(p.clone(), d.clone());
        }
        fs
    }
}

/// What `publish` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The coordinate (`path@vN` + version).
    pub module: ModuleVersion,
    /// Where it went.
    pub location: String,
    /// Repository within the location.
    pub repository: String,
    /// Manifest digest.
    pub manifest_digest: String,
    /// `false` when the same artifact was already published under that tag.
    pub created: bool,
}

/// The registry client. See the module documentation for the threading rules.
pub struct ModuleRegistry {
    cfg: RegistryConfig,
    /// The OCI client, built on first use (see the module docs).
    remote: std::sync::OnceLock<Remote>,
    rt: Option<tokio::runtime::Runtime>,
    memo: Mutex<HashMap<(String, ModuleVersion), Arc<FetchedModule>>>,
    /// The registry-wide signature policy (`signed`).
    required: std::sync::RwLock<Option<Arc<TrustedKeys>>>,
    /// Verified (manifest digest, key-set fingerprint) pairs.
    verified: Mutex<std::collections::HashSet<(String, String)>>,
}

impl Drop for ModuleRegistry {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Installs ring as the process's rustls crypto provider (once; a provider installed earlier by
/// the process is kept).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl ModuleRegistry {
    /// Builds a client for `cfg`.
    pub fn new(cfg: RegistryConfig) -> Result<ModuleRegistry, Error> {
        install_crypto_provider();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("opm-registry")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        Ok(ModuleRegistry {
            cfg,
            remote: std::sync::OnceLock::new(),
            rt: Some(rt),
            memo: Mutex::new(HashMap::new()),
            required: std::sync::RwLock::new(None),
            verified: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// The OCI client (a clone: it is shared inside), built on first use; `coord` names the
    /// operation's module in the error.
    fn remote(&self, coord: &str) -> Result<Remote, RegistryError> {
        if let Some(r) = self.remote.get() {
            return Ok(r.clone());
        }
        let insecure: Vec<String> = self
            .cfg
            .mapping
            .locations()
            .filter_map(|l| match l {
                Location::Remote {
                    host,
                    insecure: true,
                    ..
                } => Some(host.clone()),
                _ => None,
            })
            .collect();
        let rt = self
            .rt
            .as_ref()
            .ok_or_else(|| transient(coord, "registry runtime is shut down"))?;
        // reqwest's client must be built inside a runtime context for its DNS resolver.
        let built = {
            let _guard = rt.enter();
            Remote::new(
                insecure,
                self.cfg.credentials.clone(),
                self.cfg.timeouts.clone(),
            )
            .map_err(|e| transient(coord, e))?
        };
        // Two threads may both build one; either is the same client.
        Ok(self.remote.get_or_init(|| built).clone())
    }

    /// The configuration.
    pub fn config(&self) -> &RegistryConfig {
        &self.cfg
    }

    /// Runs a future on the registry's runtime and waits for it.
    fn block<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, String> {
        let rt = self.rt.as_ref().ok_or("registry runtime is shut down")?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| "registry runtime stopped before answering".to_string())
    }

    fn location(&self, base: &str) -> &Location {
        self.cfg.mapping.resolve(base)
    }

    fn cache(&self) -> Option<Cache> {
        self.cfg.cache_dir.as_ref().map(Cache::new)
    }

    /// Fetches and verifies a module (memo → disk cache → registry), under the registry-wide
    /// signature policy if one is set.
    pub fn fetch_module(&self, m: &ModuleVersion) -> Result<Arc<FetchedModule>, RegistryError> {
        self.fetch_checked(m, None)
    }

    /// [`ModuleRegistry::fetch_module`], also requiring a signature by one of `extra`'s keys.
    fn fetch_checked(
        &self,
        m: &ModuleVersion,
        extra: Option<&Arc<TrustedKeys>>,
    ) -> Result<Arc<FetchedModule>, RegistryError> {
        let coord = m.to_string();
        let base = check_coordinate(m).map_err(|e| invalid(&coord, e.to_string()))?;
        let loc = self.location(base).clone();
        let key = loc.key();
        let policies = self.policies(extra);
        let memo_key = (key.clone(), m.clone());
        if let Some(hit) = self.memo_get(&memo_key) {
            self.verify_digest(
                &coord,
                Site::of(&loc),
                &loc.repository(base),
                &hit.meta.manifest_digest,
                &policies,
            )?;
            return Ok(hit);
        }
        if let Some(cache) = self.cache() {
            if let Some(e) = cache.load(&key, m) {
                self.verify_digest(
                    &coord,
                    Site::of(&loc),
                    &loc.repository(base),
                    &e.meta.manifest_digest,
                    &policies,
                )?;
                let f = Arc::new(FetchedModule {
                    files: e.files,
                    meta: e.meta,
                    cached: true,
                });
                self.memo_put(memo_key, f.clone());
                return Ok(f);
            }
        }
        let repo = loc.repository(base);
        tracing::debug!(module = %coord, location = %loc, repository = %repo, "fetching module");
        let (manifest, manifest_digest, mf_bytes, zip_bytes) = match &loc {
            Location::None => return Err(none_error(&coord, base)),
            Location::Layout { dir } => self.layout_artifact(&coord, dir, &repo, m, &policies)?,
            Location::Remote { host, .. } => {
                self.remote_artifact(&coord, host, &repo, m, &policies)?
            }
        };
        let files = finish(
            m,
            &coord,
            &manifest,
            &mf_bytes,
            &zip_bytes,
            &self.cfg.limits,
        )?;
        let meta = EntryMeta {
            registry: key.clone(),
            module: m.path.clone(),
            version: m.version.clone(),
            zip_digest: manifest.zip.digest.clone(),
            manifest_digest,
        };
        if let Some(cache) = self.cache() {
            if let Err(e) = cache.store(&meta, &files) {
                tracing::warn!(module = %coord, error = %e, "could not write the module cache");
            }
        }
        let f = Arc::new(FetchedModule {
            files,
            meta,
            cached: false,
        });
        self.memo_put(memo_key, f.clone());
        Ok(f)
    }

    fn memo_get(&self, k: &(String, ModuleVersion)) -> Option<Arc<FetchedModule>> {
        let memo = self.memo.lock().unwrap_or_else(|p| p.into_inner());
        memo.get(k).map(|f| {
            Arc::new(FetchedModule {
                files: f.files.clone(),
                meta: f.meta.clone(),
                cached: true,
            })
        })
    }

    fn memo_put(&self, k: (String, ModuleVersion), f: Arc<FetchedModule>) {
        let mut memo = self.memo.lock().unwrap_or_else(|p| p.into_inner());
        memo.insert(k, f);
    }

    /// Reads the module file of a version without downloading the zip (used by MVS / tidy).
    pub fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, RegistryError> {
        let coord = m.to_string();
        let base = check_coordinate(m).map_err(|e| invalid(&coord, e.to_string()))?;
        let loc = self.location(base).clone();
        let repo = loc.repository(base);
        let policies = self.policies(None);
        if let Some(cache) = self.cache() {
            if let Some(e) = cache.load(&loc.key(), m) {
                if let Some((_, b)) = e.files.iter().find(|(p, _)| p == zipfile::MODULE_FILE) {
                    self.verify_digest(
                        &coord,
                        Site::of(&loc),
                        &repo,
                        &e.meta.manifest_digest,
                        &policies,
                    )?;
                    return ModuleFile::parse(b).map_err(|e| invalid(&coord, e));
                }
            }
        }
        let bytes = match &loc {
            Location::None => return Err(none_error(&coord, base)),
            Location::Layout { dir } => {
                let l = Layout::new(dir);
                let (raw, digest) = l
                    .manifest(&repo, &m.version)
                    .map_err(|e| self.layout_error(&coord, &l, &repo, m, e))?;
                let mm = artifact::check_manifest(&raw).map_err(|e| invalid(&coord, e))?;
                self.verify_digest(&coord, Site::of(&loc), &repo, &digest, &policies)?;
                l.blob(&mm.module_file, MAX_MODULE_FILE)
                    .map_err(|e| self.layout_error(&coord, &l, &repo, m, e))?
            }
            Location::Remote { host, .. } => {
                let remote = self.remote(&coord)?;
                let r = Reference::with_tag(host.clone(), repo.clone(), m.version.clone());
                let (mm, digest) = self.remote_manifest(&coord, host, &repo, m)?;
                self.verify_digest(&coord, Site::of(&loc), &repo, &digest, &policies)?;
                let res = self
                    .block(async move {
                        check_size(&mm.module_file, MAX_MODULE_FILE)?;
                        remote.blob(&r, &mm.module_file).await
                    })
                    .map_err(|e| transient(&coord, e))?;
                match res {
                    Ok(b) => b,
                    Err(e) => return Err(self.op_error(&coord, host, &repo, m, e)),
                }
            }
        };
        let mf = ModuleFile::parse(&bytes).map_err(|e| invalid(&coord, e))?;
        check_declared(&coord, &m.path, &mf.module, "module file layer")?;
        Ok(mf)
    }

    /// Lists the published versions of `path@vN`, ascending.
    pub fn list_versions(&self, path: &str) -> Result<Vec<String>, RegistryError> {
        let (base, major) =
            check_path_with_major(path).map_err(|e| invalid(path, e.to_string()))?;
        let loc = self.location(base).clone();
        let repo = loc.repository(base);
        let tags = match &loc {
            Location::None => return Err(none_error(path, base)),
            Location::Layout { dir } => match Layout::new(dir).tags(&repo) {
                Ok(t) => t,
                Err(LayoutError::NotFound(_)) => Vec::new(),
                Err(LayoutError::Invalid(e)) => return Err(invalid(path, e)),
            },
            Location::Remote { host, .. } => {
                let remote = self.remote(path)?;
                let r = Reference::with_tag(host.clone(), repo.clone(), "latest".into());
                match self
                    .block(async move { remote.tags(&r).await })
                    .map_err(|e| transient(path, e))?
                {
                    Ok(t) => t,
                    Err(e) => return Err(op_to_registry(path, e, Vec::new())),
                }
            }
        };
        Ok(semver::filter_major(tags, major))
    }

    fn layout_artifact(
        &self,
        coord: &str,
        dir: &Path,
        repo: &str,
        m: &ModuleVersion,
        policies: &[Arc<TrustedKeys>],
    ) -> Result<(ModuleManifest, String, Vec<u8>, Vec<u8>), RegistryError> {
        let l = Layout::new(dir);
        let (raw, digest) = l
            .manifest(repo, &m.version)
            .map_err(|e| self.layout_error(coord, &l, repo, m, e))?;
        let mm = artifact::check_manifest(&raw).map_err(|e| invalid(coord, e))?;
        self.verify_digest(coord, Site::Layout(dir), repo, &digest, policies)?;
        let mf = l
            .blob(&mm.module_file, MAX_MODULE_FILE)
            .map_err(|e| self.layout_error(coord, &l, repo, m, e))?;
        let zip = l
            .blob(&mm.zip, self.cfg.limits.max_zip_size)
            .map_err(|e| self.layout_error(coord, &l, repo, m, e))?;
        Ok((mm, digest, mf, zip))
    }

    fn layout_error(
        &self,
        coord: &str,
        l: &Layout,
        repo: &str,
        m: &ModuleVersion,
        e: LayoutError,
    ) -> RegistryError {
        match e {
            LayoutError::NotFound(msg) => {
                let major = check_path_with_major(&m.path).map_or(0, |(_, n)| n);
                let available = l
                    .tags(repo)
                    .map(|t| semver::filter_major(t, major))
                    .unwrap_or_default();
                if available.contains(&m.version) {
                    // The tag exists, a blob is missing: the layout is broken.
                    invalid(coord, msg)
                } else {
                    RegistryError::NotFound {
                        module: coord.to_string(),
                        available,
                    }
                }
            }
            LayoutError::Invalid(msg) => invalid(coord, msg),
        }
    }

    fn remote_artifact(
        &self,
        coord: &str,
        host: &str,
        repo: &str,
        m: &ModuleVersion,
        policies: &[Arc<TrustedKeys>],
    ) -> Result<(ModuleManifest, String, Vec<u8>, Vec<u8>), RegistryError> {
        let (mm, digest) = self.remote_manifest(coord, host, repo, m)?;
        // The layers below are read by the digests of this manifest, after its digest verified.
        self.verify_digest(coord, Site::Remote(host), repo, &digest, policies)?;
        let remote = self.remote(coord)?;
        let r = Reference::with_tag(host.to_string(), repo.to_string(), m.version.clone());
        let max_zip = self.cfg.limits.max_zip_size;
        let res = self
            .block(async move {
                check_size(&mm.module_file, MAX_MODULE_FILE)?;
                check_size(&mm.zip, max_zip)?;
                let (mf, zip) =
                    futures::try_join!(remote.blob(&r, &mm.module_file), remote.blob(&r, &mm.zip))?;
                Ok::<_, OpError>((mm, digest, mf, zip))
            })
            .map_err(|e| transient(coord, e))?;
        res.map_err(|e| self.op_error(coord, host, repo, m, e))
    }

    /// The checked module manifest of `m` at `host/repo` and its digest.
    fn remote_manifest(
        &self,
        coord: &str,
        host: &str,
        repo: &str,
        m: &ModuleVersion,
    ) -> Result<(ModuleManifest, String), RegistryError> {
        let remote = self.remote(coord)?;
        let r = Reference::with_tag(host.to_string(), repo.to_string(), m.version.clone());
        let res = self
            .block(async move {
                let (raw, digest) = remote.manifest(&r).await?;
                let mm = artifact::check_manifest(&raw).map_err(OpError::Invalid)?;
                Ok::<_, OpError>((mm, digest))
            })
            .map_err(|e| transient(coord, e))?;
        res.map_err(|e| self.op_error(coord, host, repo, m, e))
    }

    fn op_error(
        &self,
        coord: &str,
        host: &str,
        repo: &str,
        m: &ModuleVersion,
        e: OpError,
    ) -> RegistryError {
        if let OpError::NotFound(_) = &e {
            // List what is published in the major, for the message.
            let major = check_path_with_major(&m.path).map_or(0, |(_, n)| n);
            let remote = match self.remote(coord) {
                Ok(r) => r,
                Err(e) => return e,
            };
            let r = Reference::with_tag(host.to_string(), repo.to_string(), "latest".into());
            let available = match self.block(async move { remote.tags(&r).await }) {
                Ok(Ok(t)) => semver::filter_major(t, major),
                _ => Vec::new(),
            };
            if available.contains(&m.version) {
                return invalid(coord, format!("tag exists but its content is missing: {e}"));
            }
            return RegistryError::NotFound {
                module: coord.to_string(),
                available,
            };
        }
        op_to_registry(coord, e, Vec::new())
    }

    /// Publishes the module in `dir` as `version` to the location its path maps to (see
    /// `zipfile` for which files are included).
    pub fn publish(&self, dir: &Path, version_str: &str) -> Result<Published, Error> {
        let mf_path = dir.join(zipfile::MODULE_FILE);
        let mf_bytes = std::fs::read(&mf_path).map_err(|e| Error::Io {
            path: mf_path.clone(),
            source: e,
        })?;
        let mf = ModuleFile::parse(&mf_bytes).map_err(|message| Error::ModuleFile {
            path: mf_path.clone(),
            message,
        })?;
        let coord = format!(
            "{}@{version_str}",
            mf.module
                .rsplit_once('@')
                .map(|(b, _)| b)
                .unwrap_or(&mf.module)
        );
        let files = zipfile::collect_module_files(dir).map_err(|message| Error::Publish {
            module: coord,
            message,
        })?;
        self.publish_files(&files, version_str)
    }

    /// Publishes a module given as `(path, contents)` pairs (e.g. an embedded bundle); the files
    /// must include `cue.mod/module.cue`.
    pub fn publish_files(
        &self,
        files: &[(String, Vec<u8>)],
        version_str: &str,
    ) -> Result<Published, Error> {
        let mf_bytes = files
            .iter()
            .find(|(p, _)| p == zipfile::MODULE_FILE)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| Error::ModuleFile {
                path: PathBuf::from(zipfile::MODULE_FILE),
                message: "missing".into(),
            })?;
        let mf = ModuleFile::parse(&mf_bytes).map_err(|message| Error::ModuleFile {
            path: PathBuf::from(zipfile::MODULE_FILE),
            message,
        })?;
        let m = ModuleVersion {
            path: mf.module.clone(),
            version: version_str.to_string(),
        };
        let coord = m.to_string();
        let base = check_coordinate(&m).map_err(|e| Error::Publish {
            module: coord.clone(),
            message: e.to_string(),
        })?;
        if let Some(kind) = mf.source {
            if kind == SourceKind::Git {
                return Err(Error::Publish {
                    module: coord,
                    message: "source.kind \"git\" is not supported (only \"self\": the files of \
                              the directory)"
                        .into(),
                });
            }
        }
        let mut files = files.to_vec();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let zip = zipfile::create(&files).map_err(|message| Error::Publish {
            module: coord.clone(),
            message,
        })?;
        // The artifact must pass our own fetch checks.
        zipfile::extract(&zip, &self.cfg.limits).map_err(|message| Error::Publish {
            module: coord.clone(),
            message,
        })?;
        let built = artifact::build(zip, mf_bytes).map_err(|message| Error::Publish {
            module: coord.clone(),
            message,
        })?;
        let loc = self.location(base).clone();
        let repo = loc.repository(base);
        let created = match &loc {
            Location::None => return Err(Error::Registry(none_error(&coord, base))),
            Location::Layout { dir } => {
                Layout::new(dir)
                    .push(&repo, &m.version, &built)
                    .map_err(|message| Error::Publish {
                        module: coord.clone(),
                        message,
                    })?
            }
            Location::Remote { host, .. } => {
                let remote = self.remote(&coord).map_err(Error::Registry)?;
                let r = Reference::with_tag(host.clone(), repo.clone(), m.version.clone());
                let b = built.clone();
                let res = self
                    .block(async move {
                        match remote.manifest(&r).await {
                            Ok((_, digest)) if digest == b.manifest_digest => return Ok(false),
                            Ok((_, digest)) => {
                                return Err(OpError::Invalid(format!(
                                    "the tag already exists with different content ({digest}); tags are immutable, publish a new version"
                                )))
                            }
                            Err(OpError::NotFound(_)) => {}
                            Err(e) => return Err(e),
                        }
                        for (d, data) in &b.blobs {
                            remote.push_blob(&r, d, data).await?;
                        }
                        remote
                            .push_manifest(&r, &b.manifest, artifact::MANIFEST_MEDIA_TYPE)
                            .await?;
                        Ok(true)
                    })
                    .map_err(|e| Error::Registry(transient(&coord, e)))?;
                res.map_err(|e| match e {
                    OpError::Invalid(message) => Error::Publish {
                        module: coord.clone(),
                        message,
                    },
                    e => Error::Registry(op_to_registry(&coord, e, Vec::new())),
                })?
            }
        };
        Ok(Published {
            module: m,
            location: loc.to_string(),
            repository: repo,
            manifest_digest: built.manifest_digest,
            created,
        })
    }
}

/// MVS and tidy ([`cue::module::select`], [`cue::module::tidy`]) read module files through
/// [`ModuleRegistry::module_file`]: one blob per version, never the zip.
impl ModuleFileSource for ModuleRegistry {
    type Error = RegistryError;
    fn module_file(&self, m: &ModuleVersion) -> Result<ModuleFile, RegistryError> {
        ModuleRegistry::module_file(self, m)
    }
}

impl Registry for ModuleRegistry {
    fn fetch(&self, module: &ModuleVersion) -> Result<Arc<dyn FileSystem>, RegistryError> {
        let f = self.fetch_module(module)?;
        Ok(Arc::new(f.to_memfs()))
    }

    fn versions(&self, path: &str) -> Result<Vec<String>, RegistryError> {
        self.list_versions(path)
    }
}

/// Cap on the module-file layer (CUE's 16 MiB limit for module.cue).
const MAX_MODULE_FILE: u64 = 16 << 20;

fn check_size(d: &Descriptor, max: u64) -> Result<(), OpError> {
    if u64::try_from(d.size).map_or(true, |s| s > max) {
        return Err(OpError::Invalid(format!(
            "blob {} declares {} bytes, over the limit of {max}",
            d.digest, d.size
        )));
    }
    Ok(())
}

/// Verifies the downloaded blobs and extracts the zip.
fn finish(
    m: &ModuleVersion,
    coord: &str,
    mm: &ModuleManifest,
    mf_bytes: &[u8],
    zip_bytes: &[u8],
    limits: &ZipLimits,
) -> Result<Vec<(String, Vec<u8>)>, RegistryError> {
    artifact::verify(&mm.module_file, mf_bytes, "module file layer")
        .map_err(|e| invalid(coord, e))?;
    artifact::verify(&mm.zip, zip_bytes, "module zip").map_err(|e| invalid(coord, e))?;
    let mf = ModuleFile::parse(mf_bytes)
        .map_err(|e| invalid(coord, format!("module file layer: {e}")))?;
    check_declared(coord, &m.path, &mf.module, "module file layer")?;
    let files = zipfile::extract(zip_bytes, limits).map_err(|e| invalid(coord, e))?;
    let inner = files
        .iter()
        .find(|(p, _)| p == zipfile::MODULE_FILE)
        .map(|(_, b)| b.as_slice())
        .unwrap_or_default();
    let inner = ModuleFile::parse(inner)
        .map_err(|e| invalid(coord, format!("zip's {}: {e}", zipfile::MODULE_FILE)))?;
    check_declared(coord, &m.path, &inner.module, "zip's cue.mod/module.cue")?;
    Ok(files)
}

fn check_declared(
    coord: &str,
    requested: &str,
    declared: &str,
    what: &str,
) -> Result<(), RegistryError> {
    if declared != requested {
        return Err(invalid(
            coord,
            format!("{what} declares module {declared:?} but {requested:?} was requested"),
        ));
    }
    Ok(())
}

fn invalid(coord: &str, message: impl Into<String>) -> RegistryError {
    RegistryError::Invalid {
        module: coord.to_string(),
        message: message.into(),
    }
}

fn transient(coord: &str, message: impl Into<String>) -> RegistryError {
    RegistryError::Transient {
        module: coord.to_string(),
        message: message.into(),
    }
}

fn none_error(coord: &str, base: &str) -> RegistryError {
    RegistryError::Denied {
        module: coord.to_string(),
        message: format!("the registry mapping sends {base} to `none`: fetching it is forbidden"),
    }
}

fn op_to_registry(coord: &str, e: OpError, available: Vec<String>) -> RegistryError {
    match e {
        OpError::NotFound(_) => RegistryError::NotFound {
            module: coord.to_string(),
            available,
        },
        OpError::Transient(message) => transient(coord, message),
        OpError::Denied(message) => RegistryError::Denied {
            module: coord.to_string(),
            message,
        },
        OpError::Invalid(message) => invalid(coord, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout_registry(dir: &Path, cache: Option<PathBuf>) -> ModuleRegistry {
        let mut cfg = RegistryConfig::new(Mapping::single(Location::Layout {
            dir: dir.to_path_buf(),
        }));
        cfg.cache_dir = cache;
        ModuleRegistry::new(cfg).unwrap()
    }

    fn files() -> Vec<(String, Vec<u8>)> {
        vec![
            ("x.cue".into(), b"package x\nx: 1\n".to_vec()),
            (
                "cue.mod/module.cue".into(),
                b"module: \"t.test/x@v1\"\nlanguage: version: \"v0.17.0\"\n".to_vec(),
            ),
        ]
    }

    #[test]
    fn publish_files_then_fetch_from_a_layout_and_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let layout = d.path().join("layout");
        let cache = d.path().join("cache");
        let reg = layout_registry(&layout, Some(cache.clone()));
        let p = reg.publish_files(&files(), "v1.2.0").unwrap();
        assert!(p.created);
        assert_eq!(p.repository, "t.test/x");
        assert!(!reg.publish_files(&files(), "v1.2.0").unwrap().created);
        let m = ModuleVersion {
            path: "t.test/x@v1".into(),
            version: "v1.2.0".into(),
        };
        let f = reg.fetch_module(&m).unwrap();
        assert!(!f.cached);
        let mut want = files();
        want.sort();
        assert_eq!(f.files, want);
        assert_eq!(f.meta.zip_digest.len(), 71);
        // A second client with the same cache does not need the layout any more.
        std::fs::remove_dir_all(&layout).unwrap();
        let again = layout_registry(&layout, Some(cache))
            .fetch_module(&m)
            .unwrap();
        assert!(again.cached);
        assert_eq!(again.files, f.files);
        let fs = reg.fetch(&m).unwrap();
        assert_eq!(fs.read_file("x.cue").unwrap(), b"package x\nx: 1\n");
    }

    #[test]
    fn publish_refuses_a_version_outside_the_major() {
        let d = tempfile::tempdir().unwrap();
        let reg = layout_registry(d.path(), None);
        let e = reg.publish_files(&files(), "v2.0.0").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot publish t.test/x@v2.0.0: version v2.0.0 is not in major v1"),
            "{e}"
        );
        let e = reg.publish_files(&files(), "1.0.0").unwrap_err();
        assert!(e.to_string().contains("not a canonical semver"), "{e}");
    }

    #[test]
    fn none_mapping_forbids_fetching() {
        let reg = ModuleRegistry::new(RegistryConfig::new(
            Mapping::parse("t.test=none,oci:/nonexistent").unwrap(),
        ))
        .unwrap();
        let m = ModuleVersion {
            path: "t.test/x@v1".into(),
            version: "v1.0.0".into(),
        };
        assert!(matches!(
            reg.fetch_module(&m),
            Err(RegistryError::Denied { module, .. }) if module == "t.test/x@v1.0.0"
        ));
    }
}
