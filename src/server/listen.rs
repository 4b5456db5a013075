//! Accept loops: HTTPS (rustls) for the webhooks, plain HTTP for probes and metrics.
//!
//! Rules:
//! - Each accepted TLS connection handshakes with the config current *at accept time*
//!   ([`certs::CertStore::config`]), so a reloaded certificate applies to new handshakes while
//!   established connections keep theirs. The handshake has a 10 s deadline, and so has reading
//!   the request headers of HTTP/1 requests.
//! - Connections speak HTTP/1.1 or HTTP/2 (ALPN for TLS, preface sniffing for plain HTTP).
//! - On shutdown the loop stops accepting (closing the listening socket), asks every connection to
//!   finish its in-flight requests (hyper graceful shutdown: HTTP/1 stops keep-alive, HTTP/2 sends
//!   GOAWAY), and waits up to the grace period before dropping what is left.
//! - Accept errors (e.g. EMFILE) are logged and retried after a short pause; they never end the loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until `rx` reads `true` (or its sender is gone).
pub(crate) async fn signalled(mut rx: watch::Receiver<bool>) {
    // An error means the sender was dropped, which also means "stop".
    let _ = rx.wait_for(|stop| *stop).await;
}

async fn serve_io<I>(io: I, app: Router, watcher: Watcher, peer: SocketAddr)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Request headers must arrive within the deadline (slow-loris); the body is bounded by the
    // router's request timeout.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    if let Err(error) = watcher.watch(conn).await {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// Serves `app` on `listener` until `shutdown` fires, then drains for up to `grace`.
pub(crate) async fn serve(
    what: &'static str,
    listener: TcpListener,
    tls: Option<Arc<certs::CertStore>>,
    app: Router,
    shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let graceful = GracefulShutdown::new();
    let stop = signalled(shutdown);
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::warn!(listener = what, %error, "accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let app = app.clone();
        let watcher = graceful.watcher();
        match &tls {
            None => {
                tokio::spawn(serve_io(tcp, app, watcher, peer));
            }
            Some(store) => {
                let acceptor = tokio_rustls::TlsAcceptor::from(store.config());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve_io(stream, app, watcher, peer).await,
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        }
    }
    drop(listener);
    tracing::info!(listener = what, connections = graceful.count(), "draining");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!(listener = what, "drained"),
        () = tokio::time::sleep(grace) => {
            tracing::warn!(listener = what, grace_ms = grace.as_millis() as u64, "grace period over; closing the remaining connections");
        }
    }
}
