//! AdmissionReview throughput and latency over TLS on loopback: the real `opm-operator` server
//! (router, layers, semaphore + spawn_blocking, webhooks logic) against a bare hyper + rustls echo
//! server with the same certificate, in the same run.
//!
//! Phases (each `BENCH_SECS`, default 10 s, split into `BENCH_ROUNDS` (default 5) rounds that
//! alternate between the two servers, so drifting background load hits both alike): max throughput
//! with `BENCH_CONNS` (default 8) keep-alive HTTP/1.1 connections, then a paced open-loop run at
//! `BENCH_RATE` (default 1000) req/s whose latency is measured from each request's scheduled send
//! time (no coordinated omission). The throughput ratio is the median of the per-round ratios.
//! Goal: the server reaches >= 70 % of the bare server's throughput and p99 < 5 ms at 1000 req/s.
//!
//! Run: `cargo bench --bench admission` (add `BENCH_SECS=3` for a quick look).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark binary: a failure aborts the run"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]

#[path = "support/tls.rs"]
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opm_operator::server::{self, Settings, PLATFORMS_PATH};
use tokio::net::TcpListener;

use tls::{call, connect, env_or, LoopbackTls};

fn review_body() -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "5b6f2f4e-1c3a-4c8e-9d4e-bench",
                "kind": { "group": "opmodel.dev", "version": "v1alpha1", "kind": "Platform" },
                "resource": { "group": "opmodel.dev", "version": "v1alpha1", "resource": "platforms" },
                "name": "cluster",
                "operation": "CREATE",
                "userInfo": { "username": "system:admin", "groups": ["system:masters"] },
                "object": {
                    "apiVersion": "opmodel.dev/v1alpha1",
                    "kind": "Platform",
                    "metadata": { "name": "cluster" },
                    "spec": {
                        "type": "kubernetes",
                        "registry": { "opmodel.dev/catalogs/opm@v2": { "version": "2.1.0" } }
                    }
                },
                "dryRun": false
            }
        }))
        .unwrap(),
    )
}

/// The baseline: hyper + tokio-rustls, echoing the request body, no router and no layers.
async fn bare_server(config: Arc<rustls::ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    |req: hyper::Request<hyper::body::Incoming>| async move {
                        let body = req.into_body().collect().await?.to_bytes();
                        Ok::<_, hyper::Error>(
                            hyper::Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(body))
                                .unwrap(),
                        )
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

struct Figures {
    lat: Vec<u64>,
    round_rps: Vec<f64>,
    requests: usize,
    errors: usize,
    secs: f64,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
}

impl Figures {
    fn from(mut lat: Vec<u64>, errors: usize, secs: f64) -> Self {
        lat.sort_unstable();
        let pct = |p: f64| {
            if lat.is_empty() {
                0
            } else {
                lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1]
            }
        };
        Figures {
            requests: lat.len(),
            errors,
            secs,
            p50_us: pct(0.50),
            p99_us: pct(0.99),
            max_us: lat.last().copied().unwrap_or(0),
            round_rps: vec![lat.len() as f64 / secs],
            lat,
        }
    }
    fn merge(rounds: Vec<Figures>) -> Figures {
        let secs = rounds.iter().map(|f| f.secs).sum();
        let errors = rounds.iter().map(|f| f.errors).sum();
        let round_rps = rounds.iter().map(Figures::rps).collect();
        let lat = rounds.into_iter().flat_map(|f| f.lat).collect();
        Figures {
            round_rps,
            ..Figures::from(lat, errors, secs)
        }
    }
    fn rps(&self) -> f64 {
        self.requests as f64 / self.secs
    }
    fn print(&self, name: &str) {
        println!(
            "{name:<34} {:>9.0} req/s  p50 {:>6.3} ms  p99 {:>6.3} ms  max {:>7.3} ms  ({} ok, {} errors)",
            self.rps(),
            self.p50_us as f64 / 1000.0,
            self.p99_us as f64 / 1000.0,
            self.max_us as f64 / 1000.0,
            self.requests,
            self.errors
        );
    }
}

/// Closed loop: each connection sends its next request as soon as the previous one is answered.
async fn max_throughput(
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
    conns: usize,
    secs: f64,
) -> Figures {
    let body = review_body();
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let mut send = connect(addr, client.clone()).await;
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            while Instant::now() < deadline {
                let t = Instant::now();
                if call(&mut send, PLATFORMS_PATH, &body).await {
                    lat.push(t.elapsed().as_micros() as u64);
                } else {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let start = Instant::now();
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        lat.extend(l);
        errors += e;
    }
    Figures::from(lat, errors, start.elapsed().as_secs_f64().max(secs))
}

/// Open loop at `rate` req/s spread over `conns` connections; latency counts from the scheduled
/// send time, so a stalled server is charged for the queue it causes.
async fn paced(
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
    conns: usize,
    rate: u64,
    secs: f64,
) -> Figures {
    let body = review_body();
    let per_conn = Duration::from_secs_f64(conns as f64 / rate as f64);
    let total = (rate as f64 * secs) as usize / conns;
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::new();
    for i in 0..conns {
        let mut send = connect(addr, client.clone()).await;
        let body = body.clone();
        let offset = per_conn.mul_f64(i as f64 / conns as f64);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(total);
            let mut errors = 0;
            for n in 0..total {
                let scheduled = start + offset + per_conn * n as u32;
                tokio::time::sleep_until(scheduled).await;
                if call(&mut send, PLATFORMS_PATH, &body).await {
                    lat.push(scheduled.elapsed().as_micros() as u64);
                } else {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        lat.extend(l);
        errors += e;
    }
    Figures::from(lat, errors, secs)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let secs = env_or("BENCH_SECS", 10);
    let conns = env_or("BENCH_CONNS", 8) as usize;
    let rate = env_or("BENCH_RATE", 1000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tls = LoopbackTls::new();
        let bare_addr = bare_server(tls.store.config()).await;
        let running = server::start(Settings::loopback(), tls.store.clone())
            .await
            .unwrap();
        let client = tls.client.clone();

        // Sanity: the server really judges the review.
        let mut probe = connect(running.webhook_addr, client.clone()).await;
        assert!(call(&mut probe, PLATFORMS_PATH, &review_body()).await, "the server answers");

        // The admission logic alone, in-process: what every request pays before any HTTP.
        let body = review_body();
        let n = 20_000;
        let t = Instant::now();
        for _ in 0..n {
            let review = webhooks::review(webhooks::WebhookKind::Platform, &body).unwrap();
            std::hint::black_box(serde_json::to_vec(&review).unwrap());
        }
        println!(
            "webhooks::review + serialise, in-process: {:.1} us/op ({} byte body)",
            t.elapsed().as_secs_f64() * 1e6 / n as f64,
            body.len()
        );

        // The machine is shared, so background load drifts during a run: the two servers are
        // measured in alternating rounds and compared round by round (median of the ratios).
        let rounds = env_or("BENCH_ROUNDS", 5).max(1);
        let round_secs = (secs as f64 / rounds as f64).max(0.5);
        println!(
            "AdmissionReview over TLS (HTTP/1.1 keep-alive, loopback): {secs} s per phase in {rounds} alternating rounds, {conns} connections, {} CPUs",
            server::default_concurrency()
        );
        let mut bare_max = Vec::new();
        let mut ours_max = Vec::new();
        for _ in 0..rounds {
            bare_max.push(max_throughput(bare_addr, client.clone(), conns, round_secs).await);
            ours_max.push(max_throughput(running.webhook_addr, client.clone(), conns, round_secs).await);
        }
        let mut bare_paced = Vec::new();
        let mut ours_paced = Vec::new();
        for _ in 0..rounds {
            bare_paced.push(paced(bare_addr, client.clone(), conns, rate, round_secs).await);
            ours_paced.push(paced(running.webhook_addr, client.clone(), conns, rate, round_secs).await);
        }
        let bare_max = Figures::merge(bare_max);
        let ours_max = Figures::merge(ours_max);
        let bare_paced = Figures::merge(bare_paced);
        let ours_paced = Figures::merge(ours_paced);
        bare_max.print("bare hyper+rustls echo, max");
        ours_max.print("opm-operator serve, max");
        bare_paced.print(&format!("bare hyper+rustls echo, {rate}/s"));
        ours_paced.print(&format!("opm-operator serve, {rate}/s"));
        let mut ratios: Vec<f64> = ours_max
            .round_rps
            .iter()
            .zip(&bare_max.round_rps)
            .map(|(o, b)| o / b)
            .collect();
        ratios.sort_by(f64::total_cmp);
        let ratio = ratios[ratios.len() / 2];
        println!(
            "throughput ratio (server / bare), median of {} rounds: {:.1} % (rounds: {})  [goal >= 70 %: {}]",
            ratios.len(),
            ratio * 100.0,
            ratios
                .iter()
                .map(|r| format!("{:.0} %", r * 100.0))
                .collect::<Vec<_>>()
                .join(", "),
            if ratio >= 0.7 { "met" } else { "NOT met" }
        );
        println!(
            "p99 at {rate}/s: {:.3} ms (bare: {:.3} ms)  [goal < 5 ms: {}]",
            ours_paced.p99_us as f64 / 1000.0,
            bare_paced.p99_us as f64 / 1000.0,
            if ours_paced.p99_us < 5000 { "met" } else { "NOT met" }
        );
        running.shutdown();
        let _ = tokio::time::timeout(Duration::from_secs(5), running.wait()).await;
    });
}
