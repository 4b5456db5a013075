//! HTTPS serving: a self-signed certificate for 127.0.0.1, localhost and the in-cluster
//! `kubernetes.default.svc` names, made by rcgen, rustls
//! with ring, and a listener for `axum::serve` that completes TLS handshakes off the accept
//! loop (a stalled handshake never blocks other connections; failed ones are dropped).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

use crate::Error;

/// Accepted TLS connections, fed by a background accept task.
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    /// Wraps a bound listener; returns it and the CA (the self-signed certificate) as PEM.
    pub fn bind(
        tcp: TcpListener,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(Self, String), Error> {
        let addr = tcp.local_addr()?;
        // The in-cluster names of the API server too, for clients configured as in a Pod.
        let ck = rcgen::generate_simple_self_signed(
            [
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ]
            .map(str::to_string)
            .to_vec(),
        )
        .map_err(|e| Error::Tls(e.to_string()))?;
        let pem = ck.cert.pem();
        let key = rustls_pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .map_err(|e| Error::Tls(e.to_string()))?;
        let mut cfg = cfg;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = tcp.accept() => a,
                    _ = shutdown.changed() => return,
                };
                let Ok((stream, peer)) = accepted else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let hs = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream));
                    if let Ok(Ok(tls)) = hs.await {
                        // The server may be gone; the connection is then dropped.
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok((TlsListener { rx, addr }, pem))
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task ended (shutdown): wait for graceful shutdown to stop serving.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// The DER certificates of a PEM bundle.
pub fn pem_to_der(pem: &str) -> Result<Vec<Vec<u8>>, Error> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .map(|c| c.map(|c| c.to_vec()).map_err(|e| Error::Tls(e.to_string())))
        .collect()
}
