//! `opm-operator serve`: the controller side (docs/design/operator.md §7.1 flags and startup order).
//!
//! Rules implemented here:
//! - Webhooks (and later the render endpoint) run on every replica; the controllers run only on
//!   the replica holding the `coordination.k8s.io/v1` Lease `4cc9e43e.opmodel.dev`
//!   (`--leader-elect`, default on; `--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
//!   `--leader-elect-retry-period`, ordered retry < renew deadline < lease duration).
//! - `--platform-dir` (default `<temp dir>/opm-platform`) is reset once at boot, before anything
//!   reconciles: the disk is ephemeral and the first reconcile regenerates; a failed reset fails
//!   `serve` (exit 1).
//! - `--registry` (CUE_REGISTRY syntax) resolves flag → `OPM_REGISTRY` → the built-in default, is
//!   validated at boot and logged with its source; the kernel is constructed once for the process
//!   from the resolved value.
//! - `--cue-cache-dir` (else `CUE_CACHE_DIR`, else `<temp dir>/cue-cache`) is the registry
//!   client's module cache: created at boot (failure fails `serve`), logged, and handed to the
//!   kernel constructor in [`ResolvedRegistry::cache_dir`]. It is not exported into the process
//!   environment: our evaluator receives the registry as an object and reads no `CUE_*` variable,
//!   and no child process needs it.
//! - The cluster comes from `--kubeconfig`, else the in-cluster config, else `KUBECONFIG` /
//!   `~/.kube/config`. Without a reachable cluster `serve` says so (one error line naming the
//!   source and the cause), keeps serving webhooks, and retries the connection every retry period
//!   ×5 until it succeeds or the process stops.
//! - Graceful shutdown stops the controllers, then releases the lease.
//! - `--shard NAME` (a DNS label; empty: the unsharded replica) and `--shard-label` (default
//!   `sharding.opmodel.dev/key`) are validated at boot (a bad value fails `serve`); the shard picks
//!   the Lease (`NAME.4cc9e43e.opmodel.dev`), the watches' label selector and the events'
//!   reporting instance (`NAME/<identity>`). Replicas and what they run: `controller::manager`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;

use crate::controller::context::Context;
use crate::controller::leader::{Elector, Timing, TimingError};
use crate::controller::manager::{self, Role};
use crate::controller::metrics::ControllerMetrics;
use crate::controller::shard::{Shard, ShardError};
use crate::kernel::{BuiltPlatform, CatalogAcquirer, PlatformBuilder};
use crate::platform::{Layout, Store};
use crate::server::Sidecar;

/// The built-in registry mapping when neither `--registry` nor `OPM_REGISTRY` is set.
pub const DEFAULT_REGISTRY: &str =
    "testing.opmodel.dev=ghcr.io/open-platform-model,opmodel.dev=ghcr.io/open-platform-model,registry.cue.works";

/// Flags of the controller side of `opm-operator serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct ControllerArgs {
    /// Run the controllers only on the replica holding the leader Lease (4cc9e43e.opmodel.dev);
    /// `--leader-elect=false` runs them at once (a single replica).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,

    /// How long the leader Lease is valid after its last renewal.
    #[arg(long, default_value = "15s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps leading without a successful renewal (below the lease duration).
    #[arg(long, default_value = "10s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub leader_elect_renew_deadline: Duration,

    /// The interval between attempts to acquire or renew the Lease (below the renew deadline).
    #[arg(long, default_value = "2s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub leader_elect_retry_period: Duration,

    /// Namespace of the leader Lease.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "opm-system",
        value_name = "NAMESPACE"
    )]
    pub leader_elect_namespace: String,

    /// Kubeconfig file of the cluster to reconcile [default: in-cluster config, else KUBECONFIG or
    /// ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Directory of the generated platform packages; emptied at start [default: <temp dir>/opm-platform].
    #[arg(long, value_name = "DIR")]
    pub platform_dir: Option<PathBuf>,

    /// ServiceAccount (in each instance's own namespace) ModuleInstances apply and prune as when
    /// their spec names none (docs/design/operator.md §2.5); empty: the controller identity.
    #[arg(long, default_value = "", value_name = "NAME")]
    pub default_service_account: String,

    /// Module registry mapping in CUE_REGISTRY syntax [default: $OPM_REGISTRY, else the OPM
    /// registries on ghcr.io with registry.cue.works as the catch-all].
    #[arg(long, value_name = "MAPPING")]
    pub registry: Option<String>,

    /// Module cache directory of the registry client (docs/design/operator.md §7.1) [default:
    /// <temp dir>/cue-cache].
    #[arg(long, env = "CUE_CACHE_DIR", value_name = "DIR")]
    pub cue_cache_dir: Option<PathBuf>,

    /// How platform modules are generated (core pin and registry shape).
    #[command(flatten)]
    pub generator: GeneratorArgs,

    /// Let a ModulePackage name a Flux source in another namespace (docs/design/operator.md §2.3; default
    /// deny).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub allow_cross_namespace_refs: bool,

    /// Deadline of one ModuleInstance or ModulePackage reconcile; a reconcile that passes it
    /// (a hung registry or artifact server) is Ready=False `ReconcileTimedOut` and retried.
    #[arg(long, default_value = "2m", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub reconcile_timeout: std::time::Duration,

    /// How soon a ModuleInstance or ModulePackage whose applied objects are not ready yet is
    /// checked again (Ready=Unknown `Progressing` meanwhile).
    #[arg(long, default_value = "2s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub health_poll_interval: std::time::Duration,

    /// How long applied objects may take to become ready before Ready=False
    /// `HealthCheckFailed`, unless `spec.rollout.timeout` says otherwise (0: no health check).
    #[arg(long, default_value = "5m", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub health_timeout: std::time::Duration,

    /// Reconcile only the ModuleInstances and ModulePackages whose `--shard-label` is NAME, under
    /// the Lease NAME.4cc9e43e.opmodel.dev; the Platform is observed, never written. Empty: the
    /// unsharded replica (objects without the label; runs the Platform and
    /// TransformerRegistration controllers).
    #[arg(long, default_value = "", value_name = "NAME")]
    pub shard: String,

    /// The label key that assigns a ModuleInstance or ModulePackage to a shard.
    #[arg(long, default_value = crate::controller::shard::DEFAULT_SHARD_LABEL, value_name = "KEY")]
    pub shard_label: String,

    /// Percentage of jitter applied to `spec.interval` requeues: a value of 10 requeues after the
    /// interval ± up to 10 %, uniformly (Flux's semantics; below 100; 0: none).
    #[arg(long, default_value_t = crate::controller::context::DEFAULT_INTERVAL_JITTER_PERCENTAGE, value_parser = clap::value_parser!(u8).range(0..100), value_name = "PERCENT")]
    pub interval_jitter_percentage: u8,

    /// The drift mode of a ModuleInstance whose `spec.drift.mode` is unset: `warn` (report
    /// drift: Drifted condition, Warning event), `enabled` (also re-apply drifted objects) or
    /// `disabled` (no drift check).
    #[arg(long, value_enum, default_value = "warn", value_name = "MODE")]
    pub default_drift_mode: DriftModeArg,

    /// How soon a ModuleInstance waiting for a `dependsOn` dependency looks again (it is also
    /// woken when the dependency changes in this process).
    #[arg(long, default_value = "5s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub requeue_dependency: std::time::Duration,

    /// Label selector of the Secrets and ConfigMaps watched for `valuesFrom`: a change of one
    /// re-renders the ModuleInstances reading it (others are read at each reconcile).
    #[arg(long, default_value = crate::controller::context::DEFAULT_WATCH_CONFIGS_LABEL_SELECTOR, value_name = "SELECTOR")]
    pub watch_configs_label_selector: String,

    /// The server's `--max-concurrent-renders` (not a flag of its own: `main` copies it here so
    /// the ModuleInstance controller and the render API share one setting).
    #[arg(skip)]
    pub max_concurrent_renders: Option<u16>,
}

/// `--default-drift-mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriftModeArg {
    /// Detect and re-apply.
    Enabled,
    /// Detect and report.
    Warn,
    /// No drift check.
    Disabled,
}

impl From<DriftModeArg> for crds::drift::DriftMode {
    fn from(m: DriftModeArg) -> Self {
        match m {
            DriftModeArg::Enabled => Self::Enabled,
            DriftModeArg::Warn => Self::Warn,
            DriftModeArg::Disabled => Self::Disabled,
        }
    }
}

/// The default `--core-module`.
pub const DEFAULT_CORE_MODULE: &str = "opmodel.dev/core@v2";
/// The default `--core-version`.
pub const DEFAULT_CORE_VERSION: &str = "v2.0.0-alpha.4";

/// The platform generator's flags, shared by `serve` (the Platform reconciler), `dev --layout`
/// and `render --platform` (which generates and builds a Platform CR the same way).
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct GeneratorArgs {
    /// The OPM core module every generated platform pins (docs/design/operator.md §3.3 roots).
    #[arg(long, default_value = DEFAULT_CORE_MODULE, value_name = "PATH@MAJOR")]
    pub core_module: String,

    /// The core version pinned (`v`-prefixed SemVer; the library's verified release).
    #[arg(long, default_value = DEFAULT_CORE_VERSION, value_name = "VERSION")]
    pub core_version: String,

    /// Shape of the generated `#registry`: `catalog-entry` (docs/design/operator.md §3.4, with the
    /// expected-version tripwire) or `subscription` (cores up to 2.0.0-alpha.4).
    #[arg(
        long,
        value_enum,
        default_value = "catalog-entry",
        value_name = "SHAPE"
    )]
    pub platform_shape: PlatformShape,
}

impl GeneratorArgs {
    /// The generator these flags select.
    pub fn generator(&self) -> crate::platform::generate::Generator {
        crate::platform::generate::Generator::new(
            &self.core_module,
            &self.core_version,
            self.platform_shape.into(),
        )
    }
}

/// `--platform-shape`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformShape {
    /// `#CatalogEntry` with the imported catalog (the target shape).
    CatalogEntry,
    /// `#Subscription` (`enable`, `version`; catalogs not imported).
    Subscription,
}

impl From<PlatformShape> for crate::platform::generate::RegistryShape {
    fn from(s: PlatformShape) -> Self {
        match s {
            PlatformShape::CatalogEntry => Self::CatalogEntry,
            PlatformShape::Subscription => Self::Subscription,
        }
    }
}

/// Where the registry mapping came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrySource {
    /// `--registry`.
    Flag,
    /// `OPM_REGISTRY`.
    Env,
    /// [`DEFAULT_REGISTRY`].
    Default,
}

impl RegistrySource {
    /// The log word.
    pub fn as_str(self) -> &'static str {
        match self {
            RegistrySource::Flag => "flag",
            RegistrySource::Env => "env",
            RegistrySource::Default => "default",
        }
    }
}

/// The resolved registry mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRegistry {
    /// The mapping text (CUE_REGISTRY syntax).
    pub mapping: String,
    /// Its source.
    pub source: RegistrySource,
    /// The module cache directory (`--cue-cache-dir`; exists once `sidecar` returned): the kernel
    /// constructor sets it as the registry client's cache root.
    pub cache_dir: PathBuf,
}

/// Resolves `--registry` → `OPM_REGISTRY` → default (empty values count as unset).
pub fn resolve_registry(flag: Option<&str>, env: Option<&str>) -> ResolvedRegistry {
    let set = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    if let Some(mapping) = set(flag) {
        return ResolvedRegistry {
            mapping,
            source: RegistrySource::Flag,
            cache_dir: default_cue_cache_dir(),
        };
    }
    if let Some(mapping) = set(env) {
        return ResolvedRegistry {
            mapping,
            source: RegistrySource::Env,
            cache_dir: default_cue_cache_dir(),
        };
    }
    ResolvedRegistry {
        mapping: DEFAULT_REGISTRY.to_owned(),
        source: RegistrySource::Default,
        cache_dir: default_cue_cache_dir(),
    }
}

/// Why the controller side cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The leader election timing is not ordered.
    #[error("leader election: {0}")]
    Timing(#[from] TimingError),
    /// `--registry` (or `OPM_REGISTRY`) does not parse.
    #[error("registry mapping {mapping:?} (from {source_name}): {message}")]
    Registry {
        /// The mapping.
        mapping: String,
        /// flag, env or default.
        source_name: &'static str,
        /// The parse error.
        message: String,
    },
    /// The kernel could not be constructed (e.g. the registry client).
    #[error("constructing the render kernel: {0}")]
    Kernel(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// `--cue-cache-dir` could not be created.
    #[error("creating --cue-cache-dir {}: {source}", dir.display())]
    CacheDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `--shard` or `--shard-label` is not valid.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// `--platform-dir` could not be reset.
    #[error("resetting --platform-dir {}: {source}", dir.display())]
    PlatformDir {
        /// The directory.
        dir: PathBuf,
        /// The layout error.
        #[source]
        source: crate::platform::Error,
    },
}

/// The kernel seams the controllers use.
#[derive(Clone)]
pub struct Kernel {
    /// Platform generation and build.
    pub builder: Arc<dyn PlatformBuilder>,
    /// Catalog acquisition.
    pub acquirer: Arc<dyn CatalogAcquirer>,
    /// Module rendering for the REST render API (`None`: the route answers 503).
    pub renderer: Option<Arc<dyn crate::kernel::ModuleRenderer>>,
    /// Package rendering for the ModulePackage controller (`None`: the controller is off).
    pub package_renderer: Option<Arc<dyn crate::kernel::PackageRenderer>>,
    /// Signature policies over the shared registry client (`spec.verify`; `None`: a kernel
    /// without one, and `spec.verify` then stalls `VerificationFailed`).
    pub signatures: Option<Arc<crate::controller::verify::Signatures>>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").finish_non_exhaustive()
    }
}

/// The default `--cue-cache-dir`.
pub fn default_cue_cache_dir() -> PathBuf {
    std::env::temp_dir().join("cue-cache")
}

/// Creates the module cache directory `flag` names (else the default) and returns it.
pub fn prepare_cache_dir(flag: Option<&std::path::Path>) -> Result<PathBuf, ServeError> {
    let dir = flag.map_or_else(default_cue_cache_dir, std::path::Path::to_path_buf);
    std::fs::create_dir_all(&dir).map_err(|source| ServeError::CacheDir {
        dir: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// The default `--platform-dir`.
pub fn default_platform_dir() -> PathBuf {
    std::env::temp_dir().join("opm-platform")
}

/// This process's identity in the Lease and in events: `$POD_NAME`, else the host name, plus
/// the process id.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "opm-operator".to_owned());
    format!("{host}_{}", std::process::id())
}

/// Builds a client from `--kubeconfig`, else the inferred config. Returns where it came from.
async fn client(
    kubeconfig: Option<&PathBuf>,
) -> Result<(kube::Client, kube::Config, String), String> {
    let (config, source) = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("reading kubeconfig {}: {e}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            (config, format!("kubeconfig {}", path.display()))
        }
        None => (
            kube::Config::infer()
                .await
                .map_err(|e| format!("no cluster configuration (in-cluster or KUBECONFIG): {e}"))?,
            "inferred configuration".to_owned(),
        ),
    };
    let url = config.cluster_url.to_string();
    let client = kube::Client::try_from(config.clone()).map_err(|e| format!("{source}: {e}"))?;
    client
        .apiserver_version()
        .await
        .map_err(|e| format!("{source}: the API server at {url} is not reachable: {e}"))?;
    Ok((client, config, format!("{source} ({url})")))
}

/// The process's one set of render slots: `--max-concurrent-renders` (else its default), shared
/// by the REST render API, the ModuleInstance and ModulePackage reconcilers and the Platform
/// build, so at most that many evaluations run at once (each under `--render-memory-limit`).
pub fn render_slots(max_concurrent_renders: Option<u16>) -> crate::render_lease::RenderSlots {
    crate::render_lease::RenderSlots::new(usize::from(
        max_concurrent_renders.unwrap_or_else(crate::server::default_concurrent_renders),
    ))
}

/// Prepares the controller side (timing, registry, `--platform-dir` reset) and returns the
/// [`Sidecar`] the server runs. `kernel` constructs the process's one kernel from the resolved
/// registry; its failure fails `serve`. One set of render slots ([`render_slots`]) is shared by
/// the render API (`Sidecar::render`) and the controllers. `store` is the process's one platform store: pass the same
/// store to the render API, so renders lease what the Platform reconciler records.
pub fn sidecar(
    args: ControllerArgs,
    store: Store<BuiltPlatform>,
    kernel: impl FnOnce(&ResolvedRegistry) -> Result<Kernel, Box<dyn std::error::Error + Send + Sync>>,
) -> Result<Sidecar, ServeError> {
    let timing = Timing {
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    };
    timing.validate()?;
    let shard = Shard::new(&args.shard_label, &args.shard)?;
    let mut registry = resolve_registry(
        args.registry.as_deref(),
        std::env::var("OPM_REGISTRY").ok().as_deref(),
    );
    registry.cache_dir = prepare_cache_dir(args.cue_cache_dir.as_deref())?;
    crate::registry::Mapping::parse(&registry.mapping).map_err(|message| ServeError::Registry {
        mapping: registry.mapping.clone(),
        source_name: registry.source.as_str(),
        message,
    })?;
    let root = args
        .platform_dir
        .clone()
        .unwrap_or_else(default_platform_dir);
    let layout = Layout::new(&root).map_err(|source| ServeError::PlatformDir {
        dir: root.clone(),
        source,
    })?;
    layout.reset().map_err(|source| ServeError::PlatformDir {
        dir: root.clone(),
        source,
    })?;
    let kernel = kernel(&registry).map_err(ServeError::Kernel)?;
    // The process's one set of render slots: the render API, the reconcilers, the Platform build.
    let slots = render_slots(args.max_concurrent_renders);
    // The render API shares the store and learns the cluster client once `run` has connected.
    let (connected, client_rx) = watch::channel(None);
    // One set of controller series; the render API counts its renders into the same families.
    let controller_metrics = ControllerMetrics::default();
    let render = kernel
        .renderer
        .clone()
        .map(|renderer| crate::server::RenderParts {
            store: store.clone(),
            renderer,
            cluster: client_rx,
            metrics: controller_metrics.render.clone(),
            slots: slots.clone(),
        });
    let metrics: Arc<Mutex<Option<ControllerMetrics>>> = Arc::default();
    let registered = Arc::clone(&metrics);
    let layout = Arc::new(layout);
    Ok(Sidecar {
        register: Box::new(move |r| {
            controller_metrics.register_into(r);
            *registered.lock().unwrap_or_else(PoisonError::into_inner) = Some(controller_metrics);
        }),
        run: Box::new(move |stop| {
            let metrics = metrics
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            async move {
                // Logged here: logging is initialised by the server, after this function ran.
                tracing::info!(
                    registry = %registry.mapping,
                    source = registry.source.as_str(),
                    cue_cache_dir = %registry.cache_dir.display(),
                    "resolved the module registry"
                );
                tracing::info!(platform_dir = %root.display(), "reset the platform directory");
                run(
                    args, timing, shard, store, layout, kernel, metrics, slots, connected, stop,
                )
                .await;
            }
            .boxed()
        }),
        render,
    })
}

/// The operator's one wiring, shared by `opm-operator serve` and `opm-operator dev`: one platform
/// store for the process (records from the Platform reconciler, leases for renders), one kernel
/// built from the resolved registry (`RegistryConfig` with the docker config's credentials, the
/// platform kernel pinning `--core-module`/`--core-version` in `--platform-shape`, the render
/// kernel), and the server's `--max-concurrent-renders`: one set of render slots for the whole
/// process (render API, reconcilers, Platform build);
/// renders and platform builds evaluate under the server's `--render-memory-limit`.
/// Pass the result to [`crate::server::run_with`] with the same `server` arguments.
pub fn operator_sidecar(
    server: &crate::server::ServeArgs,
    mut controllers: ControllerArgs,
) -> Result<Sidecar, ServeError> {
    use crate::platform::PlatformKernel;
    use crate::registry::{Mapping, ModuleRegistry, RegistryConfig};
    let store = Store::new();
    controllers.max_concurrent_renders = server.max_concurrent_renders;
    let generator = controllers.generator.generator();
    // `--render-memory-limit`: every render and platform build of the process.
    let eval_config =
        crate::kernel::limits::render_config(cue::Config::default(), server.render_memory_limit);
    sidecar(controllers, store, move |resolved| {
        let mapping = Mapping::parse(&resolved.mapping)?;
        let mut config = RegistryConfig::new(mapping).with_docker_config()?;
        config.cache_dir = Some(resolved.cache_dir.clone());
        let registry = Arc::new(ModuleRegistry::new(config)?);
        let platform = Arc::new(PlatformKernel::new(
            registry.clone(),
            generator.clone(),
            eval_config.clone(),
        ));
        let renderer = Arc::new(
            crate::render::Renderer::new(registry.clone()).with_config(eval_config.clone()),
        );
        let signatures = Arc::new(crate::controller::verify::Signatures::new(
            registry,
            (*renderer).clone(),
        ));
        Ok(Kernel {
            builder: platform.clone(),
            acquirer: platform,
            renderer: Some(renderer.clone()),
            package_renderer: Some(renderer),
            signatures: Some(signatures),
        })
    })
}

#[allow(
    clippy::too_many_arguments,
    reason = "the sidecar's private entry point: each argument is a distinct piece it owns"
)]
async fn run(
    args: ControllerArgs,
    timing: Timing,
    shard: Shard,
    store: Store<BuiltPlatform>,
    layout: Arc<Layout>,
    kernel: Kernel,
    metrics: Option<ControllerMetrics>,
    slots: crate::render_lease::RenderSlots,
    connected: watch::Sender<Option<crate::server::render_api::auth::Cluster>>,
    mut stop: watch::Receiver<bool>,
) {
    let retry = timing.retry_period.saturating_mul(5);
    let mut reported = false;
    let client = loop {
        if *stop.borrow() {
            return;
        }
        match client(args.kubeconfig.as_ref()).await {
            Ok((client, config, source)) => {
                tracing::info!(cluster = %source, "connected to the cluster");
                connected.send_replace(Some(crate::server::render_api::auth::Cluster {
                    client: client.clone(),
                    config: config.clone(),
                }));
                break (client, config);
            }
            Err(e) => {
                if !reported {
                    tracing::error!(
                        error = %e,
                        retry_s = retry.as_secs(),
                        "no reachable Kubernetes cluster: the controllers are not running; \
                         serving webhooks only and retrying"
                    );
                    reported = true;
                } else {
                    tracing::debug!(error = %e, "cluster still unreachable");
                }
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        }
    };
    let (client, config) = client;
    let me = identity();
    let mut ctx = Context::new(
        client.clone(),
        store,
        layout,
        kernel.builder,
        kernel.acquirer,
        &shard.reporting_instance(&me),
    );
    ctx.metrics = metrics;
    ctx.renderer = kernel.renderer;
    ctx.package_renderer = kernel.package_renderer;
    ctx.signatures = kernel.signatures;
    ctx.operator_namespace = args.leader_elect_namespace.clone();
    ctx.allow_cross_namespace_refs = args.allow_cross_namespace_refs;
    ctx.reconcile_timeout = args.reconcile_timeout;
    ctx.health_poll = args.health_poll_interval;
    ctx.health_timeout = args.health_timeout;
    ctx.gitops = crate::controller::context::GitOps {
        interval_jitter_percentage: args.interval_jitter_percentage,
        default_drift_mode: args.default_drift_mode.into(),
        requeue_dependency: args.requeue_dependency,
        watch_configs_label_selector: args.watch_configs_label_selector.clone(),
    };
    ctx.kube_config = Some(config);
    ctx.default_service_account =
        (!args.default_service_account.is_empty()).then(|| args.default_service_account.clone());
    // `--max-concurrent-renders` (a server flag, copied here by `main`).
    ctx.max_concurrent_renders = args
        .max_concurrent_renders
        .unwrap_or_else(crate::server::default_concurrent_renders);
    ctx.render_slots = slots;
    let elector = args.leader_elect.then(|| {
        Elector::new(
            client,
            &args.leader_elect_namespace,
            &shard.lease_name(),
            &me,
            timing,
        )
    });
    tracing::info!(
        shard = shard.name().unwrap_or(""),
        selector = %shard.selector(),
        lease = %shard.lease_name(),
        "ModuleInstance and ModulePackage watches select their shard"
    );
    let lease = shard.lease_name();
    ctx.shard = shard;
    let (role, mut role_rx) = watch::channel(Role::Follower);
    let leader_metrics = ctx.metrics.clone();
    if let Some(m) = &leader_metrics {
        m.set_leader(&lease, false);
    }
    let watcher = tokio::spawn(async move {
        while role_rx.changed().await.is_ok() {
            let r = *role_rx.borrow();
            tracing::info!(role = ?r, "leadership changed");
            if let Some(m) = &leader_metrics {
                m.set_leader(&lease, r == Role::Leader);
            }
        }
    });
    manager::run(Arc::new(ctx), elector, stop, role).await;
    let _ = watcher.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser, Debug)]
    struct Flags {
        #[command(flatten)]
        args: ControllerArgs,
    }

    fn parse(args: &[&str]) -> ControllerArgs {
        use clap::Parser as _;
        let mut argv = vec!["serve"];
        argv.extend_from_slice(args);
        match Flags::try_parse_from(argv) {
            Ok(f) => f.args,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    #[allow(clippy::panic, reason = "test")]
    fn the_package_flags_default_to_deny_and_two_minutes() {
        let d = parse(&[]);
        assert!(!d.allow_cross_namespace_refs);
        assert_eq!(d.reconcile_timeout, std::time::Duration::from_secs(120));
        let set = parse(&["--allow-cross-namespace-refs", "--reconcile-timeout", "45s"]);
        assert!(set.allow_cross_namespace_refs);
        assert_eq!(set.reconcile_timeout, std::time::Duration::from_secs(45));
        assert!(!parse(&["--allow-cross-namespace-refs=false"]).allow_cross_namespace_refs);
    }

    #[test]
    fn the_shard_flags_pick_selector_lease_and_reporting_instance() {
        let d = parse(&[]);
        let unsharded = Shard::new(&d.shard_label, &d.shard).ok();
        assert_eq!(unsharded, Some(Shard::default()));
        let u = Shard::default();
        assert_eq!(u.selector(), "!sharding.opmodel.dev/key");
        assert_eq!(u.lease_name(), "4cc9e43e.opmodel.dev");
        assert_eq!(u.reporting_instance("pod_1"), "pod_1");
        let a = parse(&["--shard", "shard-1", "--shard-label", "example.com/shard"]);
        let s = Shard::new(&a.shard_label, &a.shard);
        let s = s.unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(s.name(), Some("shard-1"));
        assert_eq!(s.selector(), "example.com/shard=shard-1");
        assert_eq!(s.lease_name(), "shard-1.4cc9e43e.opmodel.dev");
        assert_eq!(s.reporting_instance("pod_1"), "shard-1/pod_1");
        for bad in ["Shard", "a.b", "-a", "a-", "a b", &"x".repeat(64)] {
            assert_eq!(
                Shard::new("k", bad),
                Err(ShardError::Name(bad.to_owned())),
                "{bad}"
            );
        }
        for bad in ["", "/k", "a/", "Ex.com/k", "a/b/c", "-k", &"k".repeat(64)] {
            assert_eq!(
                Shard::new(bad, "s"),
                Err(ShardError::Label(bad.to_owned())),
                "{bad}"
            );
        }
        let msg = Shard::new("k", "A").err().map(|e| e.to_string());
        assert!(msg.is_some_and(|m| m.starts_with("--shard \"A\" must be a DNS label")));
    }

    #[test]
    fn the_registry_resolves_flag_then_env_then_default() {
        let r = resolve_registry(Some("a.test=127.0.0.1:5000"), Some("b"));
        assert_eq!(
            (r.mapping.as_str(), r.source),
            ("a.test=127.0.0.1:5000", RegistrySource::Flag)
        );
        let r = resolve_registry(Some(""), Some("b.test=x"));
        assert_eq!(
            (r.mapping.as_str(), r.source),
            ("b.test=x", RegistrySource::Env)
        );
        let r = resolve_registry(None, Some("  "));
        assert_eq!(
            (r.mapping.as_str(), r.source),
            (DEFAULT_REGISTRY, RegistrySource::Default)
        );
        assert!(crate::registry::Mapping::parse(DEFAULT_REGISTRY).is_ok());
        assert_eq!(r.cache_dir, default_cue_cache_dir());
    }

    #[test]
    fn the_cue_cache_dir_is_created_at_boot_and_a_bad_one_fails_clearly() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| unreachable!("tempdir: {e}"));
        let want = tmp.path().join("a/b/cue-cache");
        let got = prepare_cache_dir(Some(&want)).ok();
        assert_eq!(got.as_deref(), Some(want.as_path()));
        assert!(want.is_dir());
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap_or_else(|e| unreachable!("write: {e}"));
        let err = prepare_cache_dir(Some(&file.join("cache"))).err();
        assert!(
            matches!(&err, Some(ServeError::CacheDir { dir, .. }) if *dir == file.join("cache")),
            "{err:?}"
        );
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.starts_with("creating --cue-cache-dir "), "{msg}");
    }
}
