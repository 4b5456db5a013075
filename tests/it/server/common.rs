//! Test harness: a started server with a test CA, a TLS client and AdmissionReview builders.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use bytes::Bytes;
use certs::self_signed::{Ca, Issued};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opm_operator::server::{self, Running, Settings};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};
use tokio::net::TcpStream;

/// Deadline of one client request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// The serial of the certificate the server presented (TLS only).
    pub serial: Option<String>,
    /// The negotiated ALPN protocol (TLS only).
    pub alpn: Option<Vec<u8>>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// Asserts the documented error shape and returns the code.
    pub fn error_code(&self) -> String {
        let v = self.json();
        let err = v
            .get("error")
            .unwrap_or_else(|| panic!("no error member: {v}"));
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert_eq!(
            self.headers
                .get("content-type")
                .and_then(|h| h.to_str().ok()),
            Some("application/json"),
            "error content-type"
        );
        err["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no code: {v}"))
            .to_string()
    }
}

/// A TLS client trusting one CA, optionally with a client certificate.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<rustls::ClientConfig>,
}

impl TlsClient {
    pub fn new(ca_pem: &str, client: Option<&Issued>, alpn: &[&[u8]]) -> Self {
        setup();
        let mut roots = rustls::RootCertStore::empty();
        for c in pem_certs(ca_pem.as_bytes()) {
            roots.add(c).unwrap();
        }
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        let mut config = match client {
            Some(id) => {
                let chain = pem_certs(id.cert_pem.as_bytes());
                let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes()).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsClient {
            config: Arc::new(config),
        }
    }

    /// One request on a fresh connection (so each call sees the certificate served right now).
    pub async fn request(
        &self,
        addr: SocketAddr,
        req: http::Request<Full<Bytes>>,
    ) -> Result<Resp, String> {
        tokio::time::timeout(REQUEST_TIMEOUT, self.request_inner(addr, req))
            .await
            .map_err(|_| "client timeout".to_string())?
    }

    pub async fn connect(
        &self,
        addr: SocketAddr,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let name = ServerName::try_from("localhost").unwrap();
        connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))
    }

    async fn request_inner(
        &self,
        addr: SocketAddr,
        req: http::Request<Full<Bytes>>,
    ) -> Result<Resp, String> {
        let tls = self.connect(addr).await?;
        let (_, conn) = tls.get_ref();
        let serial = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| certs::CertInfo::from_der(c.as_ref()).unwrap().serial);
        let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
        let mut resp = if alpn.as_deref() == Some(b"h2") {
            let (mut send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| format!("h2 handshake: {e}"))?;
            tokio::spawn(conn);
            collect(
                send.send_request(req)
                    .await
                    .map_err(|e| format!("send: {e}"))?,
            )
            .await?
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| format!("h1 handshake: {e}"))?;
            tokio::spawn(conn);
            collect(
                send.send_request(req)
                    .await
                    .map_err(|e| format!("send: {e}"))?,
            )
            .await?
        };
        resp.serial = serial;
        resp.alpn = alpn;
        Ok(resp)
    }
}

async fn collect(resp: http::Response<hyper::body::Incoming>) -> Result<Resp, String> {
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Resp {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
        serial: None,
        alpn: None,
    })
}

/// A request body fed by the test, chunk by chunk.
pub struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
}

impl ChannelBody {
    pub fn new() -> (tokio::sync::mpsc::Sender<Bytes>, Self) {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        (tx, ChannelBody { rx })
    }
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

/// A plain-HTTP GET (probes, metrics).
pub async fn get_plain(addr: SocketAddr, path: &str) -> Result<Resp, String> {
    let fut = async {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(conn);
        let req = http::Request::get(path)
            .header("host", "localhost")
            .body(Full::new(Bytes::new()))
            .unwrap();
        collect(
            send.send_request(req)
                .await
                .map_err(|e| format!("send: {e}"))?,
        )
        .await
    };
    tokio::time::timeout(REQUEST_TIMEOUT, fut)
        .await
        .map_err(|_| "client timeout".to_string())?
}

pub fn pem_certs(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// Writes `cert`/`key` as a Kubernetes Secret volume does: `..<version>/tls.*`, an atomic swap of the
/// `..data` symlink, and `tls.crt -> ..data/tls.crt`.
pub fn secret_swap(dir: &Path, version: &str, cert_pem: &str, key_pem: &str) {
    let data = dir.join(format!("..{version}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("tls.crt"), cert_pem).unwrap();
    std::fs::write(data.join("tls.key"), key_pem).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(f)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
        }
    }
}

/// A running server with its CA and cert directory.
pub struct TestServer {
    pub running: Running,
    pub ca: Ca,
    pub store: Arc<certs::CertStore>,
    pub dir: tempfile::TempDir,
    pub client: TlsClient,
    _watcher: certs::Watcher,
}

pub struct Options {
    pub settings: Settings,
    pub client_ca: bool,
    pub poll: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: Settings::loopback(),
            client_ca: false,
            poll: Duration::from_secs(5),
        }
    }
}

pub fn localhost_sans() -> Vec<String> {
    vec!["localhost".to_string(), "127.0.0.1".to_string()]
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(opts: Options) -> Self {
        setup();
        let ca = Ca::new("test CA").unwrap();
        let leaf = ca.issue_server(&localhost_sans()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        secret_swap(dir.path(), "1", &leaf.cert_pem, &leaf.key_pem);
        let client_ca = if opts.client_ca {
            let p = dir.path().join("client-ca.crt");
            std::fs::write(&p, ca.cert_pem()).unwrap();
            Some(p)
        } else {
            None
        };
        let store = certs::CertStore::load(certs::TlsPaths {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca,
        })
        .unwrap();
        let watcher = certs::watch(store.clone(), opts.poll).unwrap();
        let running = server::start(opts.settings, store.clone()).await.unwrap();
        let client = TlsClient::new(ca.cert_pem(), None, &[b"http/1.1"]);
        TestServer {
            running,
            ca,
            store,
            dir,
            client,
            _watcher: watcher,
        }
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub async fn post(&self, path: &str, body: impl Into<Bytes>) -> Resp {
        self.post_with(path, body, Some("application/json")).await
    }

    pub async fn post_with(
        &self,
        path: &str,
        body: impl Into<Bytes>,
        content_type: Option<&str>,
    ) -> Resp {
        let mut b = http::Request::post(path).header("host", "localhost");
        if let Some(ct) = content_type {
            b = b.header("content-type", ct);
        }
        let req = b.body(Full::new(body.into())).unwrap();
        self.client
            .request(self.running.webhook_addr, req)
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    pub async fn metrics(&self) -> String {
        let addr = self.running.metrics_addr.unwrap();
        let r = get_plain(addr, "/metrics").await.unwrap();
        assert_eq!(r.status, 200);
        r.text()
    }

    /// An HTTP/1 connection to the webhook listener that the test drives itself: the request
    /// sender and the connection (spawn it, or await it to see the server hang up).
    pub async fn webhook_http1<B>(&self) -> Http1<B>
    where
        B: hyper::body::Body + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tls = self
            .client
            .connect(self.running.webhook_addr)
            .await
            .unwrap();
        hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap()
    }
}

/// What [`TestServer::webhook_http1`] returns.
pub type Http1<B> = (
    hyper::client::conn::http1::SendRequest<B>,
    hyper::client::conn::http1::Connection<TokioIo<tokio_rustls::client::TlsStream<TcpStream>>, B>,
);

/// A JSON POST to `path` announcing `len` body bytes, which the test feeds through the sender
/// (a slow or stalled body).
pub fn streamed_post(
    path: &str,
    len: usize,
) -> (tokio::sync::mpsc::Sender<Bytes>, http::Request<ChannelBody>) {
    let (tx, body) = ChannelBody::new();
    let req = http::Request::post(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("content-length", len.to_string())
        .body(body)
        .unwrap();
    (tx, req)
}

/// Polls `cond` every 20 ms until it holds, failing after `within`.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if cond().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of one series in a Prometheus text exposition (`name{labels}` as written).
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l[series.len()..].trim().parse().ok())
}

// ---- AdmissionReview builders ----

pub fn review(uid: &str, request: Value) -> Value {
    let mut req = request;
    req["uid"] = json!(uid);
    json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req })
}

fn user() -> Value {
    json!({ "username": "system:admin", "groups": ["system:masters", "system:authenticated"] })
}

pub fn tr_object(name: &str, catalog: &str, version: &str) -> Value {
    let (ns, prov) = name
        .split_once('.')
        .unwrap_or(("opm-system", "k8s-provider"));
    json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "TransformerRegistration",
        "metadata": { "name": name },
        "spec": {
            "providerRef": { "namespace": ns, "name": prov },
            "catalog": catalog,
            "version": version,
            "provides": ["opmodel.dev/resources/workload/container@v1"]
        }
    })
}

pub fn tr_request(operation: &str, object: Option<Value>, old: Option<Value>) -> Value {
    let name = object
        .as_ref()
        .or(old.as_ref())
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or("")
        .to_string();
    json!({
        "kind": { "group": "opmodel.dev", "version": "v1alpha1", "kind": "TransformerRegistration" },
        "resource": { "group": "opmodel.dev", "version": "v1alpha1", "resource": "transformerregistrations" },
        "name": name,
        "operation": operation,
        "userInfo": user(),
        "object": object,
        "oldObject": old,
        "dryRun": false
    })
}

pub fn platform_object(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": "opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": { "name": name },
        "spec": {
            "type": "kubernetes",
            "registry": { "opmodel.dev/catalogs/opm@v2": { "version": version } }
        }
    })
}

pub fn platform_request(operation: &str, object: Option<Value>, old: Option<Value>) -> Value {
    let name = object
        .as_ref()
        .or(old.as_ref())
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or("")
        .to_string();
    json!({
        "kind": { "group": "opmodel.dev", "version": "v1alpha1", "kind": "Platform" },
        "resource": { "group": "opmodel.dev", "version": "v1alpha1", "resource": "platforms" },
        "name": name,
        "operation": operation,
        "userInfo": user(),
        "object": object,
        "oldObject": old,
        "dryRun": false
    })
}

pub fn to_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// The AdmissionReview `uid` of a valid Platform CREATE, as bytes (an admitted request).
pub fn platform_create_review(uid: &str) -> Vec<u8> {
    to_bytes(&review(
        uid,
        platform_request("CREATE", Some(platform_object("cluster", "2.1.0")), None),
    ))
}

/// A `kube-emu` cluster for the render API tests: the OPM CRDs, namespace `team-a`, and one
/// bearer token per `(token, user)`; returns the emulator and its admin client.
pub async fn render_cluster(
    tokens: Vec<(&str, kube_emu::UserInfo)>,
) -> (kube_emu::Emulator, kube::Client) {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, PostParams};

    let emu = kube_emu::Emulator::start(kube_emu::Options {
        workloads: Some(kube_emu::simulate::Workloads::immediate()),
        ..kube_emu::Options::default()
    })
    .await
    .unwrap();
    for (token, user) in tokens {
        emu.add_token(token, user);
    }
    let admin = emu.client().unwrap();
    let crds_api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in crds::all_crds() {
        crds_api.create(&PostParams::default(), &crd).await.unwrap();
    }
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some("team-a".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (emu, admin)
}

/// The fixture modules (`fixtures/opm/{core,kube,mini,gateway,demo}`) published at v0.1.0 into a
/// fresh OCI layout, returned with `fixtures/opm`.
pub fn published_fixture_modules() -> (tempfile::TempDir, PathBuf) {
    let opm = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/opm");
    let layout = tempfile::tempdir().unwrap();
    let layout_dir = layout.path().to_str().unwrap().to_string();
    for m in ["core", "kube", "mini", "gateway", "demo"] {
        let dir = opm.join(m);
        crate::registry::harness::cli_ok(&[
            "module",
            "publish",
            dir.to_str().unwrap(),
            "v0.1.0",
            "--layout",
            &layout_dir,
        ]);
    }
    (layout, opm)
}

/// The server with the render API on the real kernel: modules from the OCI layout `layout`, the
/// generated platform fixture `platform_dir` recorded in the store (its `cue.mod` deps, skew
/// Warn), `auth` against `cluster`, a render and request timeout of `timeout`, `concurrency`
/// renders at once. The cluster sender is returned to keep it open.
pub async fn real_render_server(
    layout: &Path,
    platform_dir: &Path,
    (auth, cluster): (
        opm_operator::server::render_api::auth::RenderAuth,
        Option<opm_operator::server::render_api::auth::Cluster>,
    ),
    timeout: Duration,
    concurrency: usize,
) -> (
    TestServer,
    tokio::sync::watch::Sender<Option<opm_operator::server::render_api::auth::Cluster>>,
) {
    use opm_operator::kernel::SkewPolicy;
    use opm_operator::platform::{Generated, PackageIdentity, Store};
    use opm_operator::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};

    let registry = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: layout.to_path_buf(),
    })))
    .unwrap();
    let renderer = opm_operator::render::Renderer::new(Arc::new(registry));
    let store = Store::new();
    store.set_generated(Generated {
        identity: PackageIdentity::unclaimed(1).unwrap(),
        dir: platform_dir.to_path_buf(),
        platform: opm_operator::platform::from_dir(platform_dir).unwrap(),
        skew: SkewPolicy::Warn,
    });
    let (cluster_tx, cluster) = tokio::sync::watch::channel(cluster);
    let mut settings = Settings::loopback();
    settings.limits.request_timeout = timeout;
    settings.render = Some(opm_operator::server::render_api::RenderBackend::new(
        store,
        Arc::new(renderer),
        auth,
        cluster,
        timeout,
        concurrency,
    ));
    let server = TestServer::start_with(Options {
        settings,
        ..Options::default()
    })
    .await;
    (server, cluster_tx)
}
