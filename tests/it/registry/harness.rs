//! Test harness: the real CNCF distribution registry (`docker-registry`, Debian package) on a
//! random loopback port with storage in a temp dir, the real `opm-operator module` CLI, and raw OCI
//! pushes for artifacts our own publisher would never produce.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use opm_operator::registry::artifact::{self, Descriptor, Manifest};
use opm_operator::registry::{Mapping, ModuleRegistry, RegistryConfig, Timeouts};

const BINARY: &str = "/usr/bin/docker-registry";

/// A running distribution registry; killed on drop.
pub struct DistRegistry {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// The registry's storage root.
    pub storage: PathBuf,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[allow(
    clippy::disallowed_methods,
    reason = "test polling with a short bounded sleep"
)]
fn nap(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

fn v2_answers(addr: &str) -> bool {
    let Ok(sock) = addr.parse::<SocketAddr>() else {
        return false;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&sock, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(
        format!("GET /v2/ HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(n) => {
            let head = String::from_utf8_lossy(&buf[..n]);
            head.starts_with("HTTP/1.") && (head.contains(" 200 ") || head.contains(" 401 "))
        }
        Err(_) => false,
    }
}

impl DistRegistry {
    /// Starts a registry and waits (at most 10 s) for `GET /v2/` to answer.
    pub fn start() -> DistRegistry {
        Self::start_with(None)
    }

    /// Starts a registry that requires HTTP basic auth with one htpasswd line (`user:bcrypt`).
    pub fn start_with_auth(htpasswd: &str) -> DistRegistry {
        Self::start_with(Some(htpasswd))
    }

    fn start_with(htpasswd: Option<&str>) -> DistRegistry {
        assert!(
            Path::new(BINARY).exists(),
            "{BINARY} is missing: the registry tests need the Debian package docker-registry; run scripts/setup.sh"
        );
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let storage = dir.path().join("storage");
            let port = free_port();
            let host = format!("127.0.0.1:{port}");
            let config = format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n  maintenance:\n    uploadpurging:\n      enabled: false\nhttp:\n  addr: {host}\n",
                storage.display()
            );
            let config = match htpasswd {
                Some(line) => {
                    let p = dir.path().join("htpasswd");
                    std::fs::write(&p, format!("{line}\n")).unwrap();
                    format!(
                        "{config}auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
                        p.display()
                    )
                }
                None => config,
            };
            let cfg_path = dir.path().join("config.yml");
            std::fs::write(&cfg_path, config).unwrap();
            let mut child = Command::new(BINARY)
                .arg("serve")
                .arg(&cfg_path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                // Another test's registry may have taken the port: only an answer while our
                // child is still alive (checked twice, 50 ms apart) counts.
                if v2_answers(&host) && child.try_wait().unwrap().is_none() && {
                    nap(50);
                    child.try_wait().unwrap().is_none()
                } {
                    return DistRegistry {
                        child: Some(child),
                        host,
                        storage,
                        _dir: dir,
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // Port taken by someone else in the meantime: try another.
                }
                nap(25);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("docker-registry did not answer GET /v2/ within 10 s (3 attempts)");
    }

    /// `fixtures.test=HOST` (plain HTTP: loopback is insecure by default).
    pub fn mapping(&self) -> String {
        format!("fixtures.test={}", self.host)
    }

    /// Publishes the module in `dir` as `version` into this registry with the real CLI.
    pub fn publish(&self, dir: &Path, version: &str) {
        cli_ok(&[
            "module",
            "publish",
            dir.to_str().unwrap(),
            version,
            "--registry",
            &self.mapping(),
        ]);
    }

    /// A client for this registry with test time bounds.
    pub fn client(&self, cache: Option<&Path>) -> ModuleRegistry {
        self.client_for(&["fixtures.test"], cache)
    }

    /// A client routing each of `prefixes` (module path prefixes such as `opmodel.dev`) to this
    /// registry, with test time bounds; any other path goes to the default registry.
    pub fn client_for(&self, prefixes: &[&str], cache: Option<&Path>) -> ModuleRegistry {
        let mapping: Vec<String> = prefixes
            .iter()
            .map(|p| format!("{p}={}", self.host))
            .collect();
        let mut cfg = RegistryConfig::new(Mapping::parse(&mapping.join(",")).unwrap());
        cfg.timeouts = test_timeouts();
        cfg.cache_dir = cache.map(Path::to_path_buf);
        ModuleRegistry::new(cfg).unwrap()
    }

    /// Stops the registry now.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Path of a blob's data file in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = artifact::digest_hex(digest).unwrap();
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for DistRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Deadline 2 s, connect 1 s, 2 retries.
pub fn test_timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(1),
        deadline: Duration::from_secs(2),
        retries: 2,
    }
}

/// The fixtures directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Runs the real `opm-operator` binary with an empty docker config.
pub fn cli(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    cli_with_docker_config(args, home.path())
}

/// Runs the real `opm-operator` binary with `DOCKER_CONFIG=docker_config`.
pub fn cli_with_docker_config(args: &[&str], docker_config: &Path) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(args)
        .env("DOCKER_CONFIG", docker_config)
        .env_remove("CUE_REGISTRY")
        .env("OPM_CACHE_DIR", home.path().join("cache"))
        .output()
        .unwrap()
}

/// Runs the CLI and asserts success; returns stdout.
pub fn cli_ok(args: &[&str]) -> String {
    let o = cli(args);
    assert!(
        o.status.success(),
        "opm-operator {args:?} failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Publishes the three fixture modules at v0.1.0 with the CLI (`--registry SPEC` or `--layout`).
pub fn publish_fixtures(target: &[&str]) {
    for m in ["schema", "lib", "app"] {
        let dir = fixtures().join(m);
        let mut args = vec!["module", "publish", dir.to_str().unwrap(), "v0.1.0"];
        args.extend_from_slice(target);
        let out = cli_ok(&args);
        assert!(out.starts_with("published fixtures.test/"), "{out}");
    }
}

/// Raw OCI access for pushing arbitrary artifacts.
pub struct RawPush {
    rt: tokio::runtime::Runtime,
    client: oci_client::Client,
    host: String,
}

impl RawPush {
    /// A plain-HTTP oci-client for `host`.
    pub fn new(host: &str) -> RawPush {
        opm_operator::registry::install_crypto_provider();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = {
            let _g = rt.enter();
            oci_client::Client::new(oci_client::client::ClientConfig {
                protocol: oci_client::client::ClientProtocol::HttpsExcept(vec![host.to_string()]),
                ..Default::default()
            })
        };
        RawPush {
            rt,
            client,
            host: host.to_string(),
        }
    }

    /// Pushes `blobs` and the manifest under `repo:tag`.
    pub fn push(&self, repo: &str, tag: &str, blobs: &[Vec<u8>], manifest: &Manifest) {
        let r = oci_client::Reference::with_tag(self.host.clone(), repo.into(), tag.into());
        let body = serde_json::to_vec(manifest).unwrap();
        self.rt.block_on(async {
            self.client
                .store_auth_if_needed(&self.host, &oci_client::secrets::RegistryAuth::Anonymous)
                .await;
            for b in blobs {
                let d = artifact::sha256_digest(b);
                self.client.push_blob(&r, b.clone(), &d).await.unwrap();
            }
            self.client
                .push_manifest_raw(
                    &r,
                    body,
                    http::HeaderValue::from_static(artifact::MANIFEST_MEDIA_TYPE),
                )
                .await
                .unwrap();
        });
    }

    /// Pulls a manifest's raw bytes.
    pub fn manifest(&self, repo: &str, tag: &str) -> Vec<u8> {
        let r = oci_client::Reference::with_tag(self.host.clone(), repo.into(), tag.into());
        self.rt.block_on(async {
            let (b, _) = self
                .client
                .pull_manifest_raw(
                    &r,
                    &oci_client::secrets::RegistryAuth::Anonymous,
                    &[artifact::MANIFEST_MEDIA_TYPE],
                )
                .await
                .unwrap();
            b.to_vec()
        })
    }

    /// Pulls a blob.
    pub fn blob(&self, repo: &str, d: &Descriptor) -> Vec<u8> {
        let r = oci_client::Reference::with_tag(self.host.clone(), repo.into(), "x".into());
        let od = oci_client::manifest::OciDescriptor {
            media_type: d.media_type.clone(),
            digest: d.digest.clone(),
            size: d.size,
            ..Default::default()
        };
        self.rt.block_on(async {
            let mut out = Vec::new();
            self.client.pull_blob(&r, &od, &mut out).await.unwrap();
            out
        })
    }
}

/// A manifest in CUE's shape over the given config/layer descriptors.
pub fn manifest(config: Descriptor, layers: Vec<Descriptor>) -> Manifest {
    Manifest {
        schema_version: 2,
        media_type: Some(artifact::MANIFEST_MEDIA_TYPE.into()),
        artifact_type: None,
        config,
        layers,
        annotations: None,
    }
}
