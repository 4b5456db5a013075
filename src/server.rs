//! HTTP server: admission webhooks over rustls, probes and metrics (docs/design/architecture.md §3 "HTTP",
//! docs/design/principles.md §1.8 and rules 17–18, docs/design/conventions.md §1.3 and §6.7–§6.9).
//!
//! Rules:
//! - The webhooks are served over HTTPS on `--webhook-addr` ([`WebhookService`]: [`router`] with the
//!   admission reviews dispatched directly). Probes (`/healthz`, `/readyz`) are plain HTTP on
//!   `--probe-addr`, and that listener is opened only *after* the TLS listener is bound; `/readyz`
//!   is 200 only while the webhook listener serves (503 while draining). `/metrics` is plain HTTP
//!   on `--metrics-addr` (the same listener as the probes when both addresses are equal;
//!   `--metrics-addr 0` turns it off).
//! - TLS comes from `--tls-cert`/`--tls-key` (optional `--client-ca` for mTLS) or from
//!   `--self-signed`, which generates a development CA and serving certificate. The files are watched
//!   and reloaded without a restart (the `certs` crate; the reload loop never dies).
//! - SIGTERM/SIGINT: readiness drops to 503, the webhook listener stops accepting and drains
//!   in-flight requests for up to `--shutdown-grace`, then the probe and metrics listeners stop.
//! - A [`Sidecar`] (the controller manager) registers its metric families into the registry
//!   `/metrics` serves, starts once the listeners are bound, and is stopped and awaited on
//!   SIGTERM/SIGINT before the webhook listener drains.
//! - The rustls `ring` provider is installed by `main` once; every config built here passes the
//!   provider explicitly anyway.

mod body;
mod error;
mod listen;
mod metrics;
pub mod openapi;
pub mod render_api;
mod review_doc;
mod routes;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use error::{ApiError, Error, ErrorBody, ErrorCode, ErrorDetail, ErrorProblem};
pub use metrics::Metrics;
pub use routes::{
    metrics_router, probe_and_metrics_router, probe_router, router, WebhookService, PLATFORMS_PATH,
    TRANSFORMER_REGISTRATIONS_PATH,
};
pub use state::{default_concurrency, AppState, Limits, DEFAULT_BODY_LIMIT, DEFAULT_HEAD_TIMEOUT};

/// Log output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line (for log collectors).
    Json,
    /// Human-readable lines.
    Text,
}

/// Flags of `opm-operator serve` (docs/design/operator.md §7, the ones that apply to the HTTP server).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address of the HTTPS listener serving the admission webhooks.
    #[arg(long, default_value = "0.0.0.0:9443", value_name = "ADDR")]
    pub webhook_addr: SocketAddr,

    /// Address of the plain-HTTP listener serving /healthz and /readyz; opened only after the
    /// HTTPS listener is bound.
    #[arg(long, default_value = "0.0.0.0:8081", value_name = "ADDR")]
    pub probe_addr: SocketAddr,

    /// Address of the plain-HTTP listener serving /metrics (Prometheus text format); `0` disables
    /// it, and the same address as --probe-addr serves probes and metrics on one listener.
    #[arg(long, default_value = "0.0.0.0:8080", value_name = "ADDR|0", value_parser = parse_optional_addr)]
    pub metrics_addr: OptionalAddr,

    /// PEM certificate chain (leaf first) for the HTTPS listener; reloaded when it changes.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "self_signed"
    )]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key matching --tls-cert; reloaded when it changes.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_cert",
        conflicts_with = "self_signed"
    )]
    pub tls_key: Option<PathBuf>,

    /// PEM bundle of CAs for client certificates; when set, every webhook client must present a
    /// certificate signed by one of them (mTLS).
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,

    /// Generate a development CA and serving certificate instead of reading --tls-cert/--tls-key
    /// (SANs: localhost, 127.0.0.1, ::1 and the Service DNS names). For development only.
    #[arg(long)]
    pub self_signed: bool,

    /// Directory where --self-signed writes ca.crt, tls.crt and tls.key [default: <temp dir>/opm-operator-certs].
    #[arg(long, value_name = "DIR")]
    pub self_signed_dir: Option<PathBuf>,

    /// File to which --self-signed also writes the CA bundle (for caBundle or curl --cacert)
    /// [default: <self-signed dir>/ca.crt only].
    #[arg(long, value_name = "FILE")]
    pub ca_bundle_out: Option<PathBuf>,

    /// Service name used for the --self-signed SANs (<name>, <name>.<ns>, <name>.<ns>.svc, ...).
    #[arg(long, default_value = "opm-operator-webhook", value_name = "NAME")]
    pub service_name: String,

    /// Service namespace used for the --self-signed SANs.
    #[arg(long, default_value = "opm-system", value_name = "NAMESPACE")]
    pub service_namespace: String,

    /// Log format.
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub log_format: LogFormat,

    /// Deadline of one HTTP request (e.g. 5s, 500ms); an admission evaluation gets 80 % of it and is
    /// denied with a message saying so when it runs over. Keep it below the webhook's timeoutSeconds
    /// (5 in deploy/webhook.yaml), so the answer arrives before the apiserver gives up.
    #[arg(long, default_value = "4s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub request_timeout: Duration,

    /// How long a shutdown waits for in-flight requests before closing connections.
    #[arg(long, default_value = "10s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub shutdown_grace: Duration,

    /// Admission evaluations run at once (further requests wait for a permit) [default: CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reviews: Option<u16>,

    /// How render API callers are checked: `kube` (TokenReview + SubjectAccessReview against
    /// the cluster) or `none` (no checks; for the embedded dev cluster only, logged as a warning).
    #[arg(long, value_enum, default_value = "kube", value_name = "MODE")]
    pub render_auth: RenderAuthMode,

    /// Deadline of one render API request's render, including the wait for a render slot.
    #[arg(long, default_value = "30s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub render_timeout: Duration,

    /// Renders running at once in the process: REST render API requests, ModuleInstance and
    /// ModulePackage reconciles and Platform builds share these slots [default: min(CPUs, 8)].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_renders: Option<u16>,

    /// Memory budget of one render (reconciles, the render API, platform builds), accounted by
    /// the evaluator: a render past it stops with `MemoryBudgetExceeded` (the API: 422
    /// `render_memory_exceeded`). Size the container: floor + renders at once × this.
    #[arg(long, default_value = crate::kernel::limits::DEFAULT_RENDER_MEMORY_LIMIT, value_parser = crate::kernel::limits::parse_bytes, value_name = "BYTES")]
    pub render_memory_limit: u64,

    /// Interval of the fallback check of the TLS files (file events are watched too).
    #[arg(long, default_value = "5s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub cert_poll_interval: Duration,
}

/// The default `--max-concurrent-renders`: min(CPUs, 8) (memory is the real bound: each
/// concurrent render holds one evaluation, docs/design/operator.md §2.6).
pub fn default_concurrent_renders() -> u16 {
    u16::try_from(default_concurrency().min(8)).unwrap_or(1)
}

/// How the REST render API checks its callers (`--render-auth`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenderAuthMode {
    /// TokenReview + SubjectAccessReview (`create` on `moduleinstances/render`).
    Kube,
    /// No checks (the embedded dev cluster only).
    None,
}

/// What the REST render API needs from the rest of the process: the platform store the Platform
/// reconciler records into, the render kernel, and the cluster client once `serve` has
/// connected (for TokenReview/SubjectAccessReview).
#[derive(Clone)]
pub struct RenderParts {
    /// The process's one platform store.
    pub store: crate::platform::Store<crate::kernel::BuiltPlatform>,
    /// The render kernel.
    pub renderer: Arc<dyn crate::kernel::ModuleRenderer>,
    /// The cluster, published when connected.
    pub cluster: render_api::auth::ClusterRx,
    /// The render series the reconcilers count into too.
    pub metrics: crate::render_lease::RenderMetrics,
    /// The process's one set of render slots, the reconcilers' and the Platform build's too.
    pub slots: crate::render_lease::RenderSlots,
}

impl std::fmt::Debug for RenderParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderParts")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// An address, or none (`0`, `off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionalAddr(pub Option<SocketAddr>);

fn parse_optional_addr(s: &str) -> Result<OptionalAddr, String> {
    match s.trim() {
        "0" | "off" | "" => Ok(OptionalAddr(None)),
        other => other
            .parse::<SocketAddr>()
            .map(|a| OptionalAddr(Some(a)))
            .map_err(|e| format!("{e} (expected HOST:PORT, or 0 to disable)")),
    }
}

/// What [`start`] needs, independent of the command line.
#[derive(Clone, Debug)]
pub struct Settings {
    /// HTTPS webhook listener address.
    pub webhook_addr: SocketAddr,
    /// Plain-HTTP probe listener address.
    pub probe_addr: SocketAddr,
    /// Plain-HTTP metrics listener address, if any (shared with probes when equal).
    pub metrics_addr: Option<SocketAddr>,
    /// Request limits.
    pub limits: Limits,
    /// Drain deadline on shutdown.
    pub shutdown_grace: Duration,
    /// The REST render API's backend (`None`: the route answers 503 `render_unavailable`).
    pub render: Option<render_api::RenderBackend>,
}

impl Settings {
    /// Loopback listeners on free ports with default limits (tests, benchmarks).
    pub fn loopback() -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        Settings {
            webhook_addr: any,
            probe_addr: any,
            metrics_addr: Some(any),
            limits: Limits::default(),
            shutdown_grace: Duration::from_secs(10),
            render: None,
        }
    }
}

/// A started server.
#[derive(Debug)]
pub struct Running {
    /// Bound HTTPS webhook address.
    pub webhook_addr: SocketAddr,
    /// Bound probe address.
    pub probe_addr: SocketAddr,
    /// Bound metrics address, if any.
    pub metrics_addr: Option<SocketAddr>,
    /// Shared handler state.
    pub state: AppState,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Starts a graceful shutdown: readiness drops, the webhook listener drains, then probes and
    /// metrics stop. Returns at once; await [`Running::wait`] for the end.
    pub fn shutdown(&self) {
        self.state.set_ready(false);
        self.stop.send_replace(true);
    }

    /// Waits until every listener has stopped.
    pub async fn wait(self) -> Result<(), Error> {
        for task in self.tasks {
            task.await.map_err(|e| Error::Task(e.to_string()))?;
        }
        Ok(())
    }
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { what, addr, source })
}

fn local_addr(what: &'static str, l: &TcpListener, addr: SocketAddr) -> Result<SocketAddr, Error> {
    l.local_addr()
        .map_err(|source| Error::Bind { what, addr, source })
}

/// Binds the listeners and serves until [`Running::shutdown`].
pub async fn start(settings: Settings, store: Arc<certs::CertStore>) -> Result<Running, Error> {
    start_with(settings, store, |_| {}).await
}

/// Like [`start`]; `register` adds further metric families to the registry `/metrics` serves.
pub async fn start_with(
    settings: Settings,
    store: Arc<certs::CertStore>,
    register: impl FnOnce(&mut prometheus_client::registry::Registry),
) -> Result<Running, Error> {
    let state = AppState::new_with(
        settings.limits.clone(),
        Some(store.clone()),
        settings.render.clone(),
        register,
    );
    let (stop, stop_rx) = watch::channel(false);
    let (drained, drained_rx) = watch::channel(false);

    let webhook = bind("webhook", settings.webhook_addr).await?;
    let webhook_addr = local_addr("webhook", &webhook, settings.webhook_addr)?;
    let app = WebhookService::new(state.clone());
    let grace = settings.shutdown_grace;
    let head_timeout = settings.limits.head_timeout;
    let webhook_task = tokio::spawn(async move {
        let conns = listen::Connections {
            tls: Some(store),
            head_timeout,
        };
        listen::serve("webhook", webhook, conns, app, stop_rx, grace).await;
        drained.send_replace(true);
    });
    let mut tasks = vec![webhook_task];

    // The probe port opens only now that TLS is bound (a failure below stops the webhook again).
    let side = async {
        let probe = bind("probe", settings.probe_addr).await?;
        let probe_addr = local_addr("probe", &probe, settings.probe_addr)?;
        let shared =
            settings.metrics_addr == Some(settings.probe_addr) && settings.probe_addr.port() != 0;
        let probe_app = if shared {
            probe_and_metrics_router(state.clone())
        } else {
            probe_router(state.clone())
        };
        let side_grace = Duration::from_secs(1);
        let rx = drained_rx.clone();
        let plain = || listen::Connections {
            tls: None,
            head_timeout,
        };
        let mut side_tasks = vec![tokio::spawn(listen::serve(
            "probe",
            probe,
            plain(),
            probe_app,
            rx,
            side_grace,
        ))];
        let metrics_addr = match settings.metrics_addr {
            Some(_) if shared => Some(probe_addr),
            Some(addr) => {
                let l = bind("metrics", addr).await?;
                let bound = local_addr("metrics", &l, addr)?;
                side_tasks.push(tokio::spawn(listen::serve(
                    "metrics",
                    l,
                    plain(),
                    metrics_router(state.clone()),
                    drained_rx.clone(),
                    side_grace,
                )));
                Some(bound)
            }
            None => None,
        };
        Ok::<_, Error>((probe_addr, metrics_addr, side_tasks))
    };
    match side.await {
        Ok((probe_addr, metrics_addr, side_tasks)) => {
            tasks.extend(side_tasks);
            state.set_ready(true);
            Ok(Running {
                webhook_addr,
                probe_addr,
                metrics_addr,
                state,
                stop,
                tasks,
            })
        }
        Err(e) => {
            stop.send_replace(true);
            Err(e)
        }
    }
}

fn init_logging(format: LogFormat) -> Result<(), Error> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    // Every line goes through the redacting writer: no `valuesFrom` Secret value in any log
    // line, whatever its level or origin (`crate::values_from`).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::values_from::log_writer())
        .with_ansi(ansi);
    let result = match format {
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    result.map_err(|e| Error::Logging(e.to_string()))
}

/// Resolves the TLS files: the given pair, or a freshly bootstrapped self-signed one.
pub fn resolve_tls(args: &ServeArgs) -> Result<(certs::TlsPaths, Option<PathBuf>), Error> {
    if args.self_signed {
        let dir = args
            .self_signed_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("opm-operator-certs"));
        let sans = certs::self_signed::default_sans(&args.service_name, &args.service_namespace);
        let b = certs::self_signed::bootstrap(&dir, &sans, args.ca_bundle_out.as_deref())?;
        let bundle = b.ca_bundle.clone().unwrap_or_else(|| b.ca.clone());
        return Ok((
            certs::TlsPaths {
                cert: b.cert,
                key: b.key,
                client_ca: args.client_ca.clone(),
            },
            Some(bundle),
        ));
    }
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Ok((
            certs::TlsPaths {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: args.client_ca.clone(),
            },
            None,
        )),
        _ => Err(Error::NoTls),
    }
}

async fn shutdown_signal() -> Result<&'static str, Error> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(Error::Signal)?;
    tokio::select! {
        _ = term.recv() => Ok("SIGTERM"),
        r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT").map_err(Error::Signal),
    }
}

/// Work that runs beside the HTTP server in its runtime (the controller manager): it registers
/// its metric families into the registry `/metrics` serves, runs once the listeners are bound, and
/// is stopped (its receiver turns true) and awaited on SIGTERM/SIGINT before the webhook drains.
pub struct Sidecar {
    /// Adds metric families to the served registry.
    pub register: Box<dyn FnOnce(&mut prometheus_client::registry::Registry) + Send>,
    /// Runs until its receiver turns true.
    pub run:
        Box<dyn FnOnce(watch::Receiver<bool>) -> futures::future::BoxFuture<'static, ()> + Send>,
    /// The REST render API's parts, when this process renders.
    pub render: Option<RenderParts>,
}

impl std::fmt::Debug for Sidecar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar").finish_non_exhaustive()
    }
}

async fn serve(args: ServeArgs, sidecar: Option<Sidecar>) -> Result<(), Error> {
    let (paths, ca_bundle) = resolve_tls(&args)?;
    let store = certs::CertStore::load(paths)?;
    let info = store.info();
    tracing::info!(serial = %info.serial, sans = ?info.sans, not_after = info.not_after_unix, "loaded the TLS certificate");
    let _watcher = certs::watch(store.clone(), args.cert_poll_interval)?;
    let concurrency = args
        .max_concurrent_reviews
        .map_or_else(default_concurrency, usize::from);
    let settings = Settings {
        webhook_addr: args.webhook_addr,
        probe_addr: args.probe_addr,
        metrics_addr: args.metrics_addr.0,
        limits: Limits::with_timeout(args.request_timeout, concurrency),
        shutdown_grace: args.shutdown_grace,
        render: None,
    };
    let (register, side_run, render) = match sidecar {
        Some(s) => (Some(s.register), Some(s.run), s.render),
        None => (None, None, None),
    };
    let mut settings = settings;
    settings.render = render.map(|parts| {
        let auth = match args.render_auth {
            RenderAuthMode::Kube => render_api::auth::RenderAuth::Kube,
            RenderAuthMode::None => {
                tracing::warn!(
                    "--render-auth=none: the REST render API answers anyone who can reach it; \
                     use it only for the embedded dev cluster"
                );
                render_api::auth::RenderAuth::None
            }
        };
        render_api::RenderBackend::new(
            parts.store,
            parts.renderer,
            auth,
            parts.cluster,
            args.render_timeout,
            usize::from(
                args.max_concurrent_renders
                    .unwrap_or_else(default_concurrent_renders),
            ),
        )
        .with_metrics(parts.metrics)
        .sharing(parts.slots)
    });
    let running = start_with(settings, store, |r| {
        if let Some(register) = register {
            register(r);
        }
    })
    .await?;
    let (side_stop, side_stop_rx) = watch::channel(false);
    let side_task = side_run.map(|run| tokio::spawn(run(side_stop_rx)));
    tracing::info!(
        webhook = %running.webhook_addr,
        probe = %running.probe_addr,
        metrics = ?running.metrics_addr,
        "serving"
    );
    if let Some(bundle) = &ca_bundle {
        tracing::info!(
            ca_bundle = %bundle.display(),
            "self-signed development certificate; try: curl --cacert {} https://localhost:{}{} -H 'Content-Type: application/json' -d @review.json",
            bundle.display(),
            running.webhook_addr.port(),
            PLATFORMS_PATH
        );
    }
    let signal = shutdown_signal().await?;
    tracing::info!(
        signal,
        grace_ms = args.shutdown_grace.as_millis() as u64,
        "shutting down"
    );
    side_stop.send_replace(true);
    if let Some(task) = side_task {
        task.await.map_err(|e| Error::Task(e.to_string()))?;
    }
    running.shutdown();
    running.wait().await?;
    tracing::info!("stopped");
    Ok(())
}

/// Runs the server until SIGTERM or SIGINT.
pub fn run(args: ServeArgs) -> Result<(), Error> {
    run_with(args, None)
}

/// Runs the server, and `sidecar` beside it, until SIGTERM or SIGINT.
pub fn run_with(args: ServeArgs, sidecar: Option<Sidecar>) -> Result<(), Error> {
    init_logging(args.log_format)?;
    // Renders and platform builds run in `spawn_blocking`: threads with the evaluator's stack run
    // them in place (the kernel's big-stack policy, `opm_kernel::stack`).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(crate::kernel::stack::eval_stack_bytes(
            &cue::Config::default(),
        ))
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(serve(args, sidecar))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_addr_zero_disables() {
        assert_eq!(parse_optional_addr("0").unwrap(), OptionalAddr(None));
        assert_eq!(
            parse_optional_addr("127.0.0.1:9").unwrap(),
            OptionalAddr(Some(SocketAddr::from(([127, 0, 0, 1], 9))))
        );
        assert!(parse_optional_addr("nope").is_err());
    }
}
