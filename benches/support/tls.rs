//! What the HTTPS benches (`admission`, `render_api`) share: a loopback certificate with a client
//! trusting it, keep-alive HTTP/1.1 connections over it, one JSON POST, and the `BENCH_*`
//! settings. Included with `#[path]` (a file under `benches/support/` is no bench target).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

/// The `u64` in environment variable `name`, else `default`.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A server certificate for `localhost`/`127.0.0.1` issued by a fresh CA, loaded into a
/// certificate store, and an HTTP/1.1 client configuration trusting that CA.
pub struct LoopbackTls {
    pub store: Arc<certs::CertStore>,
    pub client: Arc<rustls::ClientConfig>,
    /// Holds `tls.crt` and `tls.key` for the run.
    _dir: tempfile::TempDir,
}

impl LoopbackTls {
    pub fn new() -> LoopbackTls {
        let ca = certs::self_signed::Ca::new("bench CA").unwrap();
        let leaf = ca
            .issue_server(&["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).unwrap();
        let store = certs::CertStore::load(certs::TlsPaths {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        })
        .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let mut client = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        LoopbackTls {
            store,
            client: Arc::new(client),
            _dir: dir,
        }
    }
}

/// The sending half of one keep-alive connection.
pub type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// A keep-alive HTTP/1.1 connection over TLS (no Nagle) to `addr`.
pub async fn connect(addr: SocketAddr, client: Arc<rustls::ClientConfig>) -> Sender {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(client)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

/// POSTs JSON `body` to `path`: whether the answer was a 200 read to its end.
pub async fn call(send: &mut Sender, path: &str, body: &Bytes) -> bool {
    let req = hyper::Request::post(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))
        .unwrap();
    if send.ready().await.is_err() {
        return false;
    }
    match send.send_request(req).await {
        Ok(resp) => {
            let ok = resp.status() == 200;
            ok && resp.into_body().collect().await.is_ok()
        }
        Err(_) => false,
    }
}
