//! Flux source artifacts for ModulePackage: download, verify, extract, locate the package
//! (docs/design/operator.md §2.3 steps 4–5; artifacts are hostile input: docs/design/principles.md rule 21).
//!
//! Rules:
//! - Download: `GET` the artifact URL (plain HTTP or HTTPS is the source-controller's choice; we
//!   speak plain HTTP on the cluster network), any status but 200 fails, the body is capped at
//!   [`Limits::max_download`] (64 MiB; a larger `Content-Length` fails before reading), and its
//!   sha256 must equal the artifact's `sha256:<hex>` digest.
//! - The artifact is always a tar.gz: a body without the gzip magic is refused.
//! - Extraction into a fresh temporary directory `opm-modulepackage-artifact-*` (removed when the
//!   [`Fetched`] is dropped) refuses, naming the entry: absolute paths and `..` components;
//!   more than [`Limits::max_entries`] (10,000) entries; more than [`Limits::max_unpacked`] bytes of
//!   file content (a decompression bomb); hard links, devices and FIFOs; symlinks whose target is
//!   absolute or resolves outside the directory; and any entry that would be written *through* a
//!   symlink or over one. After extraction every symlink is resolved on disk and must stay inside
//!   the directory. So nothing is ever written outside it, whatever the archive holds.
//! - Modes are masked to `0o777` (directories keep owner `rwx` so extraction can continue); owners,
//!   times and extended attributes are ignored. A root `cue.mod` is not required.
//! - Package path (step 5): `"/" + path` is cleaned; a `..` component is refused; the result must be
//!   an existing directory inside the extraction (`PathNotFound`) holding `instance.cue`
//!   (`InstanceFileNotFound`).
//! - Every error is typed; the ModulePackage reconciler maps its variants to condition reasons.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use http_body_util::BodyExt as _;
use sha2::{Digest as _, Sha256};

/// Limits of one artifact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest download in bytes (64 MiB).
    pub max_download: u64,
    /// Most archive entries (10,000).
    pub max_entries: usize,
    /// Most bytes of unpacked file content.
    pub max_unpacked: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_download: 64 * 1024 * 1024,
            max_entries: 10_000,
            max_unpacked: 256 * 1024 * 1024,
        }
    }
}

/// Errors of fetching an artifact or locating its package.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL could not be used.
    #[error("artifact URL {url:?}: {message}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The connection or transfer failed.
    #[error("downloading {url}: {message}")]
    Transport {
        /// The URL.
        url: String,
        /// The transport error.
        message: String,
    },
    /// The server answered with another status than 200.
    #[error("downloading {url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// The artifact is larger than the download limit.
    #[error("the artifact is larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// The artifact digest is not `sha256:<64 hex>`.
    #[error("unsupported artifact digest {0:?} (expected sha256:<hex>)")]
    BadDigest(String),
    /// The content does not match the digest.
    #[error("artifact digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// From the source's status.
        expected: String,
        /// Of the downloaded bytes.
        actual: String,
    },
    /// Not a gzip stream.
    #[error("the artifact is not a tar.gz (no gzip header)")]
    NotGzip,
    /// The tar stream is corrupt.
    #[error("reading the artifact archive: {0}")]
    Archive(String),
    /// An entry path is absolute or contains `..`.
    #[error("archive entry {0:?} escapes the extraction directory (absolute path or `..`)")]
    UnsafePath(String),
    /// Too many entries.
    #[error("the archive has more than {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: usize,
    },
    /// Too much unpacked content.
    #[error("the archive unpacks to more than {limit} bytes")]
    UnpackedTooLarge {
        /// The limit.
        limit: u64,
    },
    /// A symlink points outside the extraction directory (or would be written through).
    #[error("archive symlink {entry:?} -> {target:?} escapes the extraction directory")]
    SymlinkEscape {
        /// The entry.
        entry: String,
        /// Its target.
        target: String,
    },
    /// An entry would be written through or over a symlink.
    #[error("archive entry {0:?} would be written through a symlink")]
    ThroughSymlink(String),
    /// Hard links, devices, FIFOs.
    #[error("archive entry {entry:?} has an unsupported type ({kind})")]
    UnsupportedEntry {
        /// The entry.
        entry: String,
        /// Its type.
        kind: String,
    },
    /// A file system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was done.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// `spec.path` contains `..`.
    #[error("path {0:?} must not contain `..`")]
    PathTraversal(String),
    /// `spec.path` is not a directory of the artifact.
    #[error("path {0:?} is not a directory of the artifact")]
    PathNotFound(String),
    /// The package directory has no `instance.cue`.
    #[error("path {0:?} has no instance.cue")]
    InstanceFileNotFound(String),
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}

/// An extracted artifact; the directory is removed on drop.
#[derive(Debug)]
pub struct Fetched {
    dir: tempfile::TempDir,
    /// Entries extracted.
    pub entries: usize,
}

impl Fetched {
    /// The extraction directory.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// Checks `digest` is `sha256:<64 lowercase hex>` and returns the hex.
pub fn parse_digest(digest: &str) -> Result<&str, Error> {
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(hex)
        }
        _ => Err(Error::BadDigest(digest.to_string())),
    }
}

/// Verifies `bytes` against `digest` (`sha256:<hex>`).
pub fn verify(bytes: &[u8], digest: &str) -> Result<(), Error> {
    let expected = parse_digest(digest)?;
    let actual = hex::encode(Sha256::digest(bytes));
    if actual == expected {
        Ok(())
    } else {
        Err(Error::DigestMismatch {
            expected: digest.to_string(),
            actual: format!("sha256:{actual}"),
        })
    }
}

/// Downloads `url` (plain HTTP) with the size limit; the body's digest is not checked here.
pub async fn download(url: &str, limits: &Limits) -> Result<Vec<u8>, Error> {
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| Error::Url {
        url: url.to_string(),
        message: e.to_string(),
    })?;
    if uri.scheme_str() != Some("http") {
        return Err(Error::Url {
            url: url.to_string(),
            message: "only http:// artifact URLs are supported (the source-controller's in-cluster service)".to_string(),
        });
    }
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let transport = |e: &dyn std::fmt::Display| Error::Transport {
        url: url.to_string(),
        message: e.to_string(),
    };
    let resp = client.get(uri).await.map_err(|e| transport(&e))?;
    if resp.status() != http::StatusCode::OK {
        return Err(Error::Status {
            url: url.to_string(),
            status: resp.status().as_u16(),
        });
    }
    let declared = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_download) {
        return Err(Error::TooLarge {
            limit: limits.max_download,
        });
    }
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| transport(&e))?;
        if let Ok(data) = frame.into_data() {
            if out.len() as u64 + data.len() as u64 > limits.max_download {
                return Err(Error::TooLarge {
                    limit: limits.max_download,
                });
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// Downloads, verifies and extracts the artifact at `url` with `digest`.
pub async fn fetch(url: &str, digest: &str, limits: &Limits) -> Result<Fetched, Error> {
    parse_digest(digest)?;
    let bytes = download(url, limits).await?;
    verify(&bytes, digest)?;
    let limits = *limits;
    tokio::task::spawn_blocking(move || extract_to_temp(&bytes, &limits))
        .await
        .map_err(|e| Error::Archive(format!("the extraction task failed: {e}")))?
}

/// Extracts a verified tar.gz into a fresh temporary directory.
pub fn extract_to_temp(bytes: &[u8], limits: &Limits) -> Result<Fetched, Error> {
    let dir = tempfile::Builder::new()
        .prefix("opm-modulepackage-artifact-")
        .tempdir()
        .map_err(io(
            "creating a temporary directory in",
            &std::env::temp_dir(),
        ))?;
    let entries = extract(bytes, dir.path(), limits)?;
    Ok(Fetched { dir, entries })
}

/// The normalised relative path of an entry, or `UnsafePath`.
fn entry_path(raw: &Path) -> Result<PathBuf, Error> {
    let mut out = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Error::UnsafePath(raw.display().to_string()))
            }
        }
    }
    Ok(out)
}

/// Fails when an existing ancestor of `rel` under `root` is not a real directory (a symlink or a
/// file), so nothing is written through a symlink.
fn check_ancestors(root: &Path, rel: &Path) -> Result<(), Error> {
    let mut cur = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        cur.push(part);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::ThroughSymlink(rel.display().to_string()))
            }
            Ok(m) if !m.is_dir() => {
                return Err(Error::UnsafePath(rel.display().to_string()));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io("inspecting", &cur)(e)),
        }
    }
    Ok(())
}

/// Removes an existing regular file at `path` (a later duplicate entry wins); refuses to replace
/// a symlink or a directory.
fn clear_target(path: &Path, rel: &Path) -> Result<(), Error> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            Err(Error::ThroughSymlink(rel.display().to_string()))
        }
        Ok(m) if m.is_dir() => Err(Error::UnsafePath(rel.display().to_string())),
        Ok(_) => std::fs::remove_file(path).map_err(io("replacing", path)),
        Err(_) => Ok(()),
    }
}

/// Lexically resolves symlink `target` from the link's directory `link_dir` (relative to the
/// root); `None` when it leaves the root.
fn lexical_target(link_dir: &Path, target: &Path) -> Option<PathBuf> {
    if target.is_absolute() {
        return None;
    }
    let mut stack: Vec<std::ffi::OsString> = link_dir
        .components()
        .map(|c| c.as_os_str().to_os_string())
        .collect();
    for c in target.components() {
        match c {
            Component::Normal(p) => stack.push(p.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir => {
                stack.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(stack.iter().collect())
}

/// Extracts `bytes` (tar.gz) into `root` under the rules of the module doc; returns the number
/// of entries.
pub fn extract(bytes: &[u8], root: &Path, limits: &Limits) -> Result<usize, Error> {
    use std::os::unix::fs::PermissionsExt as _;
    if bytes.len() < 2 || bytes[0] != 0x1f || bytes[1] != 0x8b {
        return Err(Error::NotGzip);
    }
    let gz = flate2::read::GzDecoder::new(bytes);
    let mut archive = tar::Archive::new(gz);
    let mut count = 0usize;
    let mut unpacked = 0u64;
    let mut links: Vec<PathBuf> = Vec::new();
    let entries = archive
        .entries()
        .map_err(|e| Error::Archive(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::Archive(e.to_string()))?;
        count += 1;
        if count > limits.max_entries {
            return Err(Error::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let raw = entry
            .path()
            .map_err(|e| Error::Archive(e.to_string()))?
            .into_owned();
        let rel = entry_path(&raw)?;
        let kind = entry.header().entry_type();
        if rel.as_os_str().is_empty() {
            // `./` itself.
            if kind.is_dir() {
                continue;
            }
            return Err(Error::UnsafePath(raw.display().to_string()));
        }
        check_ancestors(root, &rel)?;
        let dest = root.join(&rel);
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        if kind.is_dir() {
            match std::fs::symlink_metadata(&dest) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(Error::ThroughSymlink(rel.display().to_string())),
                Err(_) => std::fs::create_dir_all(&dest).map_err(io("creating", &dest))?,
            }
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode | 0o700))
                .map_err(io("setting the mode of", &dest))?;
        } else if kind.is_file() || kind == tar::EntryType::Continuous {
            let size = entry.header().size().unwrap_or(0);
            if unpacked.saturating_add(size) > limits.max_unpacked {
                return Err(Error::UnpackedTooLarge {
                    limit: limits.max_unpacked,
                });
            }
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(io("creating", parent))?;
            }
            clear_target(&dest, &rel)?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&dest)
                .map_err(io("creating", &dest))?;
            // Never trust the header's size alone: count what is actually copied.
            let budget = limits.max_unpacked - unpacked;
            let copied = std::io::copy(&mut (&mut entry).take(budget + 1), &mut file)
                .map_err(io("writing", &dest))?;
            if copied > budget {
                return Err(Error::UnpackedTooLarge {
                    limit: limits.max_unpacked,
                });
            }
            unpacked += copied;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode))
                .map_err(io("setting the mode of", &dest))?;
        } else if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(|e| Error::Archive(e.to_string()))?
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let link_dir = rel.parent().unwrap_or(Path::new(""));
            let escape = || Error::SymlinkEscape {
                entry: rel.display().to_string(),
                target: target.display().to_string(),
            };
            if target.as_os_str().is_empty() || lexical_target(link_dir, &target).is_none() {
                return Err(escape());
            }
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(io("creating", parent))?;
            }
            clear_target(&dest, &rel)?;
            std::os::unix::fs::symlink(&target, &dest).map_err(io("creating", &dest))?;
            links.push(rel);
        } else {
            return Err(Error::UnsupportedEntry {
                entry: raw.display().to_string(),
                kind: format!("{kind:?}"),
            });
        }
    }
    check_links(root, &links)?;
    Ok(count)
}

/// Resolves every extracted symlink on disk: each must end inside `root`.
fn check_links(root: &Path, links: &[PathBuf]) -> Result<(), Error> {
    let real_root = std::fs::canonicalize(root).map_err(io("resolving", root))?;
    for rel in links {
        let path = root.join(rel);
        let target = std::fs::read_link(&path)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        let escape = || Error::SymlinkEscape {
            entry: rel.display().to_string(),
            target: target.clone(),
        };
        match std::fs::canonicalize(&path) {
            Ok(real) if real.starts_with(&real_root) => {}
            Ok(_) => return Err(escape()),
            // Dangling: resolve what exists of it, the parent of its final target must be inside.
            Err(_) => {
                let Ok(t) = std::fs::read_link(&path) else {
                    return Err(escape());
                };
                let base = path.parent().unwrap_or(root).join(&t);
                let parent = base.parent().map(Path::to_path_buf).unwrap_or_default();
                match std::fs::canonicalize(&parent) {
                    Ok(real) if real.starts_with(&real_root) => {}
                    _ => return Err(escape()),
                }
            }
        }
    }
    Ok(())
}

/// Locates the instance package `path` (docs/design/operator.md §2.3 step 5) inside `root`.
pub fn package_dir(root: &Path, path: &str) -> Result<PathBuf, Error> {
    let mut rel = PathBuf::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(Error::PathTraversal(path.to_string())),
            p => rel.push(p),
        }
    }
    let shown = format!("/{}", rel.display());
    let dir = root.join(&rel);
    let real_root = std::fs::canonicalize(root).map_err(io("resolving", root))?;
    match std::fs::canonicalize(&dir) {
        Ok(real) if real.starts_with(&real_root) && real.is_dir() => {
            if real.join("instance.cue").is_file() {
                Ok(real)
            } else {
                Err(Error::InstanceFileNotFound(shown))
            }
        }
        _ => Err(Error::PathNotFound(shown)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    /// A tar.gz from raw entries: (path bytes, type flag, link name, content). Paths are written
    /// into the header directly, so hostile names can be built.
    fn tgz(entries: &[(&str, u8, &str, &[u8])]) -> Vec<u8> {
        let mut tar_bytes = Vec::new();
        for (path, flag, link, content) in entries {
            let mut h = tar::Header::new_old();
            {
                let old = h.as_old_mut();
                old.name[..path.len()].copy_from_slice(path.as_bytes());
                old.linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            h.set_entry_type(tar::EntryType::new(*flag));
            h.set_mode(0o4755);
            h.set_size(content.len() as u64);
            h.set_cksum();
            tar_bytes.extend_from_slice(h.as_bytes());
            tar_bytes.extend_from_slice(content);
            let pad = (512 - content.len() % 512) % 512;
            tar_bytes.extend(std::iter::repeat_n(0u8, pad));
        }
        tar_bytes.extend(std::iter::repeat_n(0u8, 1024));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar_bytes).unwrap();
        gz.finish().unwrap()
    }

    fn extract_new(bytes: &[u8]) -> (tempfile::TempDir, Result<usize, Error>) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let r = extract(bytes, &root, &Limits::default());
        (dir, r)
    }

    /// Everything under `dir` other than `root/` (what an escape would have written).
    fn outside(dir: &tempfile::TempDir) -> Vec<String> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "root")
            .collect()
    }

    #[test]
    fn a_plain_package_extracts_with_masked_modes() {
        use std::os::unix::fs::PermissionsExt as _;
        let bytes = tgz(&[
            ("pkg/", b'5', "", b""),
            ("pkg/instance.cue", b'0', "", b"package x\n"),
            ("pkg/link.cue", b'2', "instance.cue", b""),
        ]);
        let (dir, r) = extract_new(&bytes);
        assert_eq!(r.unwrap(), 3);
        let root = dir.path().join("root");
        assert_eq!(
            std::fs::read_to_string(root.join("pkg/instance.cue")).unwrap(),
            "package x\n"
        );
        let mode = std::fs::metadata(root.join("pkg/instance.cue"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "setuid bit masked off");
        assert_eq!(
            std::fs::read_to_string(root.join("pkg/link.cue")).unwrap(),
            "package x\n"
        );
        let found = package_dir(&root, "./pkg").unwrap();
        assert!(found.ends_with("pkg"));
    }

    #[test]
    fn hostile_archives_are_refused_and_write_nothing_outside() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("traversal", tgz(&[("../evil", b'0', "", b"x")])),
            ("nested traversal", tgz(&[("a/../../evil", b'0', "", b"x")])),
            ("absolute", tgz(&[("/tmp/evil", b'0', "", b"x")])),
            ("absolute symlink", tgz(&[("l", b'2', "/etc", b"")])),
            ("escaping symlink", tgz(&[("a/l", b'2', "../../x", b"")])),
            (
                "write through symlink",
                tgz(&[("l", b'2', ".", b""), ("l/../evil", b'0', "", b"x")]),
            ),
            (
                "symlink then file under it",
                tgz(&[
                    ("d/", b'5', "", b""),
                    ("l", b'2', "d", b""),
                    ("l/f", b'0', "", b"x"),
                ]),
            ),
            (
                "physical escape through a symlink chain",
                tgz(&[
                    ("sub/", b'5', "", b""),
                    ("sub/up", b'2', "..", b""),
                    ("x", b'2', "sub/up/../..", b""),
                ]),
            ),
            ("hard link", tgz(&[("h", b'1', "/etc/passwd", b"")])),
            ("fifo", tgz(&[("p", b'6', "", b"")])),
            ("char device", tgz(&[("c", b'3', "", b"")])),
        ];
        for (name, bytes) in cases {
            let (dir, r) = extract_new(&bytes);
            let err = r.err().unwrap_or_else(|| panic!("{name}: extracted"));
            assert!(
                matches!(
                    err,
                    Error::UnsafePath(_)
                        | Error::SymlinkEscape { .. }
                        | Error::ThroughSymlink(_)
                        | Error::UnsupportedEntry { .. }
                ),
                "{name}: {err:?}"
            );
            assert_eq!(outside(&dir), Vec::<String>::new(), "{name}");
        }
    }

    #[test]
    fn bombs_and_entry_floods_are_refused() {
        let zeros = vec![0u8; 2 * 1024 * 1024];
        let bytes = tgz(&[("big", b'0', "", &zeros)]);
        assert!(bytes.len() < 64 * 1024, "compresses well");
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_unpacked: 1024 * 1024,
            ..Limits::default()
        };
        let err = extract(&bytes, dir.path(), &limits).unwrap_err();
        assert!(matches!(err, Error::UnpackedTooLarge { .. }), "{err:?}");

        let many: Vec<(String, u8, &str, &[u8])> = (0..20)
            .map(|i| (format!("f{i}"), b'0', "", &b""[..]))
            .collect();
        let refs: Vec<(&str, u8, &str, &[u8])> = many
            .iter()
            .map(|(p, f, l, c)| (p.as_str(), *f, *l, *c))
            .collect();
        let limits = Limits {
            max_entries: 10,
            ..Limits::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let err = extract(&tgz(&refs), dir.path(), &limits).unwrap_err();
        assert!(
            matches!(err, Error::TooManyEntries { limit: 10 }),
            "{err:?}"
        );
    }

    #[test]
    fn non_gzip_and_corrupt_archives_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = extract(b"PK\x03\x04zip", dir.path(), &Limits::default()).unwrap_err();
        assert!(matches!(err, Error::NotGzip));
        let mut bytes = tgz(&[("f", b'0', "", b"hello")]);
        bytes.truncate(bytes.len() / 2);
        let err = extract(&bytes, dir.path(), &Limits::default()).unwrap_err();
        assert!(matches!(err, Error::Archive(_)), "{err:?}");
    }

    #[test]
    fn digests_are_checked() {
        let d = format!("sha256:{}", hex::encode(Sha256::digest(b"abc")));
        verify(b"abc", &d).unwrap();
        assert!(matches!(
            verify(b"abd", &d).unwrap_err(),
            Error::DigestMismatch { .. }
        ));
        assert!(matches!(
            verify(b"abc", "md5:00").unwrap_err(),
            Error::BadDigest(_)
        ));
        assert!(matches!(
            verify(b"abc", &d.to_uppercase()).unwrap_err(),
            Error::BadDigest(_)
        ));
    }

    #[test]
    fn package_paths_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("apps/web")).unwrap();
        std::fs::write(root.join("apps/web/instance.cue"), "package web\n").unwrap();
        std::fs::create_dir_all(root.join("apps/empty")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("apps/out")).unwrap();
        assert!(package_dir(root, "apps/web").is_ok());
        assert!(package_dir(root, "/apps//web/").is_ok());
        let e = package_dir(root, "apps/../apps/web").unwrap_err();
        assert!(matches!(e, Error::PathTraversal(_)));
        let e = package_dir(root, "apps/none").unwrap_err();
        assert!(
            matches!(e, Error::PathNotFound(ref p) if p == "/apps/none"),
            "{e:?}"
        );
        let e = package_dir(root, "apps/out").unwrap_err();
        assert!(
            matches!(e, Error::PathNotFound(_)),
            "a symlink out is not found: {e:?}"
        );
        let e = package_dir(root, "apps/empty").unwrap_err();
        assert!(matches!(e, Error::InstanceFileNotFound(_)), "{e:?}");
        // The root itself: no instance.cue there.
        assert!(matches!(
            package_dir(root, "").unwrap_err(),
            Error::InstanceFileNotFound(ref p) if p == "/"
        ));
    }
}
