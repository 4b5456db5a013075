//! Accept loops: HTTPS (rustls) for the webhooks, plain HTTP for probes and metrics.
//!
//! Rules:
//! - Each accepted TLS connection handshakes with the config current *at accept time*
//!   ([`certs::CertStore::config`]), so a reloaded certificate applies to new handshakes while
//!   established connections keep theirs. The handshake has a 10 s deadline.
//! - Head deadline (slow-loris): an HTTP/1 connection that, for a whole `head_timeout` period
//!   (10 s by default), neither starts a request (completes a request head) nor has one in flight
//!   (from its head until its response body is written) is closed; an idle keep-alive connection
//!   likewise. The check runs once per period per connection, so such a connection lives at most
//!   two periods. (hyper's own `header_read_timeout` arms, allocates and cancels a timer for every
//!   request, about 3 % of a review's cost.) Connections that negotiated HTTP/2 by ALPN are exempt,
//!   as they were from hyper's HTTP/1-only timeout.
//! - An HTTP/1 response sent before its request body was read to the end (an early 415, 413,
//!   408, 404 or 405) carries `connection: close`: hyper closes such a connection after the
//!   response unless the rest of the body is already buffered, and a client told nothing would
//!   reuse it and race that close (its next request fails with an EOF).
//! - Connections speak HTTP/1.1 or HTTP/2 (ALPN for TLS, preface sniffing for plain HTTP).
//! - On shutdown the loop stops accepting (closing the listening socket), asks every connection to
//!   finish its in-flight requests (hyper graceful shutdown: HTTP/1 stops keep-alive, HTTP/2 sends
//!   GOAWAY), and waits up to the grace period before dropping what is left.
//! - Accept errors (e.g. EMFILE) are logged and retried after a short pause; they never end the loop.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a listener's connections are served.
#[derive(Clone)]
pub(crate) struct Connections {
    /// TLS certificates (HTTPS), or none (plain HTTP).
    pub tls: Option<Arc<certs::CertStore>>,
    /// The head deadline's period (see the module doc).
    pub head_timeout: Duration,
}

/// Waits until `rx` reads `true` (or its sender is gone).
pub(crate) async fn signalled(mut rx: watch::Receiver<bool>) {
    // An error means the sender was dropped, which also means "stop".
    let _ = rx.wait_for(|stop| *stop).await;
}

/// One connection's requests, for the head deadline: how many have started, and how many are in
/// flight (head received, response body not yet written).
#[derive(Default)]
struct Progress {
    started: AtomicU64,
    in_flight: AtomicUsize,
    /// Whether the current HTTP/1 request's body has been read to its end (requests on an
    /// HTTP/1 connection are served one at a time; HTTP/2 does not consult it).
    body_read: AtomicBool,
}

/// A request body that records on its connection's [`Progress`] when it has been read to its end.
struct ReadTracked {
    body: Incoming,
    progress: Arc<Progress>,
}

impl hyper::body::Body for ReadTracked {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || hyper::body::Body::is_end_stream(&self.body) {
            self.progress.body_read.store(true, Ordering::Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::Body::size_hint(&self.body)
    }
}

/// A request in flight on a connection; it ends when dropped (with the response body).
struct InFlight(Arc<Progress>);

impl InFlight {
    fn start(progress: &Arc<Progress>) -> Self {
        progress.started.fetch_add(1, Ordering::Relaxed);
        progress.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(progress.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that keeps its request [`InFlight`] until hyper has written (or dropped) it.
struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::Body::size_hint(&self.body)
    }
}

/// Drives `conn` to its end, or ends it (returning `None`) once a whole `period` passes in which
/// no request started and none was in flight.
async fn with_head_deadline<F: Future>(
    conn: F,
    progress: &Progress,
    period: Duration,
) -> Option<F::Output> {
    let mut conn = pin!(conn);
    let mut tick = pin!(tokio::time::sleep(period));
    let mut seen = progress.started.load(Ordering::Relaxed);
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(out) = conn.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        while tick.as_mut().poll(cx).is_ready() {
            let started = progress.started.load(Ordering::Relaxed);
            if started == seen && progress.in_flight.load(Ordering::Relaxed) == 0 {
                return Poll::Ready(None);
            }
            seen = started;
            tick.as_mut().reset(tokio::time::Instant::now() + period);
        }
        Poll::Pending
    })
    .await
}

/// What a listener serves: the webhook service or a router.
pub(crate) trait App:
    tower::Service<
        axum::extract::Request,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> App for S where
    S: tower::Service<
            axum::extract::Request,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

async fn serve_io<I, A: App>(
    io: I,
    app: A,
    watcher: Watcher,
    peer: SocketAddr,
    head_timeout: Option<Duration>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let progress = Arc::new(Progress::default());
    let service = {
        let progress = progress.clone();
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let in_flight = InFlight::start(&progress);
            let http1 = req.version() < http::Version::HTTP_2;
            let read = hyper::body::Body::is_end_stream(req.body());
            progress.body_read.store(read, Ordering::Relaxed);
            let resp = app.clone().oneshot(req.map(|body| {
                if read {
                    axum::body::Body::new(body)
                } else {
                    axum::body::Body::new(ReadTracked {
                        body,
                        progress: progress.clone(),
                    })
                }
            }));
            let progress = progress.clone();
            async move {
                let mut resp = resp.await?;
                if http1 && !progress.body_read.load(Ordering::Relaxed) {
                    resp.headers_mut().insert(
                        http::header::CONNECTION,
                        http::HeaderValue::from_static("close"),
                    );
                }
                Ok::<_, std::convert::Infallible>(resp.map(|body| Tracked {
                    body,
                    _in_flight: in_flight,
                }))
            }
        })
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = watcher.watch(builder.serve_connection(TokioIo::new(io), service));
    let result = match head_timeout {
        Some(period) => match with_head_deadline(conn, &progress, period).await {
            Some(result) => result,
            None => {
                tracing::debug!(%peer, period_ms = period.as_millis() as u64, "no request started within the head deadline; closing the connection");
                return;
            }
        },
        None => conn.await,
    };
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// Serves `app` on `listener` until `shutdown` fires, then drains for up to `grace`.
pub(crate) async fn serve<A: App>(
    what: &'static str,
    listener: TcpListener,
    conns: Connections,
    app: A,
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
        let head_timeout = conns.head_timeout;
        match &conns.tls {
            None => {
                tokio::spawn(serve_io(tcp, app, watcher, peer, Some(head_timeout)));
            }
            Some(store) => {
                let acceptor = tokio_rustls::TlsAcceptor::from(store.config());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                            let head_timeout = (!h2).then_some(head_timeout);
                            serve_io(stream, app, watcher, peer, head_timeout).await
                        }
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
