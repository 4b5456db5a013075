//! Async access to OCI distribution registries through `oci-client`, bounded in time.
//!
//! Rules implemented:
//! - Every operation runs under one overall deadline ([`Timeouts::deadline`]); each HTTP request
//!   also has a connect timeout. Nothing waits longer than the deadline: a registry that accepts
//!   connections and never answers yields [`OpError::Transient`] when it expires.
//! - Transient failures (connection errors, timeouts, HTTP 5xx and 429) are retried up to
//!   [`Timeouts::retries`] times with exponential backoff (100 ms, 200 ms, ...), within the
//!   deadline. Other failures are returned at once.
//! - HTTP 404 / `MANIFEST_UNKNOWN` / `NAME_UNKNOWN` / `BLOB_UNKNOWN` are [`OpError::NotFound`];
//!   401/403 / `UNAUTHORIZED` / `DENIED` are [`OpError::Denied`].
//! - Blobs are streamed with a byte cap (the descriptor's size, itself capped by the caller) and
//!   verified by the caller; the manifest's digest is computed here from the bytes received.
//! - Plain HTTP is used exactly for the hosts the mapping marks insecure; redirects (a CDN for
//!   blobs) are followed by reqwest's default policy.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use tokio::time::Instant;

use super::artifact::{self, Descriptor};
use super::auth::Credentials;

/// Time bounds of network operations.
#[derive(Clone, Debug)]
pub struct Timeouts {
    /// Connect timeout of one HTTP request.
    pub connect: Duration,
    /// Overall deadline of one registry operation, retries included.
    pub deadline: Duration,
    /// Retries after the first attempt for transient failures.
    pub retries: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            deadline: Duration::from_secs(30),
            retries: 3,
        }
    }
}

/// A failed operation, classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpError {
    /// The manifest, tag, repository or blob does not exist.
    NotFound(String),
    /// May succeed later.
    Transient(String),
    /// Authentication or authorisation failed.
    Denied(String),
    /// Anything else: a malformed answer, a refused upload, ...
    Invalid(String),
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpError::NotFound(m)
            | OpError::Transient(m)
            | OpError::Denied(m)
            | OpError::Invalid(m) => f.write_str(m),
        }
    }
}

/// A client for the remote registries of one mapping.
#[derive(Clone)]
pub struct Remote {
    client: oci_client::Client,
    creds: Credentials,
    timeouts: Timeouts,
}

impl Remote {
    /// Builds a client; `insecure_hosts` are reached over plain HTTP.
    pub fn new(
        insecure_hosts: Vec<String>,
        creds: Credentials,
        timeouts: Timeouts,
    ) -> Result<Remote, String> {
        let config = oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::HttpsExcept(insecure_hosts),
            connect_timeout: Some(timeouts.connect.min(timeouts.deadline)),
            read_timeout: Some(timeouts.deadline),
            platform_resolver: None,
            ..Default::default()
        };
        let client = oci_client::Client::try_from(config)
            .map_err(|e| format!("cannot build the OCI client: {e}"))?;
        Ok(Remote {
            client,
            creds,
            timeouts,
        })
    }

    fn auth(&self, host: &str) -> RegistryAuth {
        self.creds.for_host(host)
    }

    /// Runs `op` with retries under the overall deadline.
    async fn bounded<T, F, Fut>(&self, what: &str, mut op: F) -> Result<T, OpError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, OpError>>,
    {
        let now = Instant::now();
        // A deadline too far away to represent is no deadline worth keeping: cap it at a day.
        let deadline = now
            .checked_add(self.timeouts.deadline)
            .unwrap_or(now + Duration::from_secs(24 * 3600));
        let mut attempt: u32 = 0;
        loop {
            let result = match tokio::time::timeout_at(deadline, op()).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(OpError::Transient(format!(
                        "{what}: no answer within {:?}",
                        self.timeouts.deadline
                    )))
                }
            };
            match result {
                Err(OpError::Transient(msg)) if attempt < self.timeouts.retries => {
                    let backoff = Duration::from_millis(100u64 << attempt.min(6));
                    if Instant::now() + backoff >= deadline {
                        return Err(OpError::Transient(format!("{what}: {msg}")));
                    }
                    tracing::debug!(what, attempt, %msg, "transient registry error, retrying");
                    tokio::time::sleep(backoff).await;
                    attempt += 1;
                }
                Err(OpError::Transient(msg)) => {
                    return Err(OpError::Transient(format!(
                        "{what}: {msg} (after {} attempts)",
                        attempt + 1
                    )))
                }
                Err(e) => return Err(e),
                Ok(v) => return Ok(v),
            }
        }
    }

    /// Fetches a manifest by tag; returns its bytes and their digest.
    pub async fn manifest(&self, r: &Reference) -> Result<(Bytes, String), OpError> {
        self.manifest_accepting(r, &[artifact::MANIFEST_MEDIA_TYPE])
            .await
    }

    /// Fetches a manifest by tag accepting any of `media_types` (a cosign signature manifest may
    /// be stored as an OCI or a Docker v2 manifest); returns its bytes and their digest.
    pub async fn manifest_accepting(
        &self,
        r: &Reference,
        media_types: &[&str],
    ) -> Result<(Bytes, String), OpError> {
        let auth = self.auth(r.registry());
        self.bounded("manifest", || async {
            let (body, _) = self
                .client
                .pull_manifest_raw(r, &auth, media_types)
                .await
                .map_err(classify)?;
            let digest = artifact::sha256_digest(&body);
            Ok((body, digest))
        })
        .await
    }

    /// Fetches a blob, refusing more than `desc.size` bytes.
    pub async fn blob(&self, r: &Reference, desc: &Descriptor) -> Result<Vec<u8>, OpError> {
        let auth = self.auth(r.registry());
        let cap = u64::try_from(desc.size).unwrap_or(0);
        let oci_desc = oci_client::manifest::OciDescriptor {
            media_type: desc.media_type.clone(),
            digest: desc.digest.clone(),
            size: desc.size,
            ..Default::default()
        };
        self.bounded("blob", || async {
            self.client
                .store_auth_if_needed(r.resolve_registry(), &auth)
                .await;
            let mut stream = self
                .client
                .pull_blob_stream(r, &oci_desc)
                .await
                .map_err(classify)?;
            let mut out = Vec::with_capacity(usize::try_from(cap.min(1 << 24)).unwrap_or(0));
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| {
                    // oci-client verifies the digest at the end of the stream; a mismatch is not
                    // worth retrying.
                    let digest_error = e
                        .get_ref()
                        .is_some_and(|inner| inner.is::<oci_client::errors::DigestError>());
                    if digest_error {
                        OpError::Invalid(format!("blob {}: digest mismatch: {e}", desc.digest))
                    } else {
                        OpError::Transient(format!("reading blob: {e}"))
                    }
                })?;
                if out.len() as u64 + chunk.len() as u64 > cap {
                    return Err(OpError::Invalid(format!(
                        "blob {} is larger than its descriptor's {cap} bytes",
                        desc.digest
                    )));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(out)
        })
        .await
    }

    /// Lists the tags of a repository; a repository that does not exist has none.
    pub async fn tags(&self, r: &Reference) -> Result<Vec<String>, OpError> {
        let auth = self.auth(r.registry());
        self.bounded("tag list", || async {
            let mut all = Vec::new();
            let mut last: Option<String> = None;
            // Pages of 1000; a registry that ignores `n` answers everything at once.
            for _ in 0..100 {
                let resp = match self
                    .client
                    .list_tags(r, &auth, Some(1000), last.as_deref())
                    .await
                    .map_err(classify)
                {
                    Ok(resp) => resp,
                    Err(OpError::NotFound(_)) => return Ok(all),
                    Err(e) => return Err(e),
                };
                let n = resp.tags.len();
                let new_last = resp.tags.last().cloned();
                all.extend(resp.tags);
                if n < 1000 || new_last.is_none() || new_last == last {
                    break;
                }
                last = new_last;
            }
            Ok(all)
        })
        .await
    }

    /// Uploads a blob unless it is already there.
    pub async fn push_blob(
        &self,
        r: &Reference,
        desc: &Descriptor,
        data: &[u8],
    ) -> Result<(), OpError> {
        let auth = self.auth(r.registry());
        let data = Bytes::copy_from_slice(data);
        self.bounded("blob upload", || async {
            self.client
                .store_auth_if_needed(r.resolve_registry(), &auth)
                .await;
            if self
                .client
                .blob_exists(r, &desc.digest)
                .await
                .map_err(classify)?
            {
                return Ok(());
            }
            self.client
                .push_blob(r, data.clone(), &desc.digest)
                .await
                .map_err(classify)?;
            Ok(())
        })
        .await
    }

    /// Uploads a manifest under the reference's tag.
    pub async fn push_manifest(
        &self,
        r: &Reference,
        body: &[u8],
        media_type: &str,
    ) -> Result<(), OpError> {
        let auth = self.auth(r.registry());
        let body = Bytes::copy_from_slice(body);
        let ct = http::HeaderValue::from_str(media_type)
            .map_err(|e| OpError::Invalid(format!("bad media type: {e}")))?;
        self.bounded("manifest upload", || async {
            self.client
                .store_auth_if_needed(r.resolve_registry(), &auth)
                .await;
            self.client
                .push_manifest_raw(r, body.clone(), ct.clone())
                .await
                .map_err(classify)?;
            Ok(())
        })
        .await
    }
}

/// Maps an `oci-client` error onto the four classes.
pub fn classify(e: OciDistributionError) -> OpError {
    match e {
        OciDistributionError::RequestError(re) => {
            if re.is_timeout() || re.is_connect() || re.is_request() || re.is_body() {
                OpError::Transient(format!("{re}: {}", source_chain(&re)))
            } else if let Some(status) = re.status() {
                by_status(status.as_u16(), re.to_string())
            } else {
                OpError::Transient(format!("{re}: {}", source_chain(&re)))
            }
        }
        OciDistributionError::ServerError { code, url, message } => {
            by_status(code, format!("HTTP {code} from {url}: {message}"))
        }
        OciDistributionError::RegistryError { envelope, url } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            let msg = format!("{url}: {envelope}");
            if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                OpError::NotFound(msg)
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                OpError::Denied(msg)
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Toomanyrequests))
            {
                OpError::Transient(msg)
            } else {
                OpError::Invalid(msg)
            }
        }
        OciDistributionError::ImageManifestNotFoundError(m) => OpError::NotFound(m),
        OciDistributionError::UnauthorizedError { url } => {
            OpError::Denied(format!("not authorized: {url}"))
        }
        OciDistributionError::AuthenticationFailure(m) => OpError::Denied(m),
        OciDistributionError::IoError(e) => OpError::Transient(e.to_string()),
        other => OpError::Invalid(other.to_string()),
    }
}

fn by_status(code: u16, msg: String) -> OpError {
    match code {
        404 => OpError::NotFound(msg),
        401 | 403 => OpError::Denied(msg),
        408 | 429 | 500..=599 => OpError::Transient(msg),
        _ => OpError::Invalid(msg),
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut parts = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        parts.push(s.to_string());
        cur = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        assert!(matches!(
            by_status(404, String::new()),
            OpError::NotFound(_)
        ));
        assert!(matches!(by_status(403, String::new()), OpError::Denied(_)));
        assert!(matches!(
            by_status(503, String::new()),
            OpError::Transient(_)
        ));
        assert!(matches!(
            by_status(429, String::new()),
            OpError::Transient(_)
        ));
        assert!(matches!(by_status(400, String::new()), OpError::Invalid(_)));
        let e = classify(OciDistributionError::ServerError {
            code: 502,
            url: "u".into(),
            message: "bad gateway".into(),
        });
        assert!(matches!(e, OpError::Transient(m) if m.contains("502")));
    }
}
