//! `opm-operator dev`: the whole product on one machine with no cluster (docs/design/architecture.md §4, the
//! embedded default; issue 18).
//!
//! Rules implemented here:
//! - One process runs kube-emu over HTTPS (its store persisted in `STATE/cluster.json`, see
//!   `kube_emu::snapshot`), and beside it exactly what `serve` runs, through the same wiring
//!   ([`crate::cmd::serve::operator_sidecar`] + [`crate::server::run_with`]): webhooks, the
//!   REST render API with render auth on (`--render-auth kube`: TokenReview + SubjectAccessReview
//!   against the emulator), probes, metrics, and the controllers (no leader election: one process).
//! - State directory (`--state-dir`, default `.dev/state` under the working directory):
//!   `cluster.json` (the emulator's objects), `kubeconfig` and `kube-ca.crt` (the emulator,
//!   rewritten at every start: its serving CA and admin token are per process), `certs/` (our
//!   server's development CA `ca.crt` and serving pair, regenerated at every start), `token` (the
//!   dev render-API token, kept across restarts), `registry/` (an OCI layout holding the bundled
//!   catalog and module, see [`bundle`]), `platform/` (the generated platform packages, reset at
//!   start as `serve` does).
//! - Ports (`--port-base N`, default 7443): emulator N, webhooks + render API N+1, probes N+2,
//!   metrics N+3; `0` picks four free ports.
//! - Setup at every start is idempotent and never overwrites what a user changed: the CRDs and the
//!   ValidatingWebhookConfiguration are server-side applied (their content is ours, and the
//!   webhook's URL and caBundle change per start); the namespaces, the Platform `cluster` and the
//!   example ModuleInstance are created only when absent.
//! - `--layout DIR` (issue 28: the operator on a real catalog) takes every module from the OCI
//!   layout `DIR` (e.g. the one `scripts/opm-real.sh` publishes the public OPM core, catalog and
//!   modules into) instead of the bundled fixtures: nothing is published (the layout is the
//!   user's, never written), the generated platforms pin `--core-module`/`--core-version` in the
//!   `--platform-shape` the flags select (as `serve`), Platform `cluster` subscribes each
//!   `--catalog PATH@MAJOR=VERSION`, and no example ModuleInstance is created (the user applies
//!   one of the layout's modules). A state directory keeps the Platform `cluster` it was first
//!   created with: use one state directory per layout.
//! - The embedded cluster runs kube-emu's workload simulator (`--workload-delay`, default 2 s):
//!   a ModuleInstance shows Ready=Unknown `Progressing` while its Deployment rolls out, then
//!   Ready=True; an object annotated `kube-emu.opmodel.dev/simulate: fail` makes it Ready=False
//!   `HealthCheckFailed` (issue 29).
//! - The controllers run with `--allow-cross-namespace-refs` (the README's `dependsOn` pair is a
//!   ModuleInstance in `prod` waiting for `demo/hello`: the example's object names are fixed, so
//!   one instance per namespace).
//! - The dev token authenticates as user `opm-dev` in `system:masters` (every verb, including
//!   `create moduleinstances/render`).
//! - SIGINT/SIGTERM stop the server and controllers (as `serve`), then the emulator, whose final
//!   snapshot write's error fails the command.

pub mod bundle;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use futures::FutureExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use crate::server::Sidecar;

/// The example ModuleInstance's namespace.
pub const EXAMPLE_NAMESPACE: &str = "demo";
/// The example ModuleInstance's name.
pub const EXAMPLE_NAME: &str = "hello";
/// The example module.
pub const EXAMPLE_MODULE: &str = "fixtures.test/modules/demo@v0";
/// The version every bundled module is published as.
pub const BUNDLE_VERSION: &str = "v0.1.0";
/// The ConfigMap of the example whose `log-level` follows `values.logLevel`.
pub const EXAMPLE_CONFIGMAP: &str = "settings";
/// The user the dev token authenticates as.
pub const DEV_USER: &str = "opm-dev";
const FIELD_MANAGER: &str = "opm-operator-dev";

/// Flags of `opm-operator dev`.
#[derive(clap::Args, Debug, Clone)]
pub struct DevArgs {
    /// Directory of the dev cluster's state, kept across restarts (objects, kubeconfig, CA files,
    /// token, module layout).
    #[arg(long, default_value = ".dev/state", value_name = "DIR")]
    pub state_dir: PathBuf,

    /// First of four ports on 127.0.0.1: emulator N, webhooks + render API N+1, probes N+2,
    /// metrics N+3; 0 picks free ports.
    #[arg(long, default_value_t = 7443, value_name = "N")]
    pub port_base: u16,

    /// An OCI layout to take every module from instead of the bundled fixtures (never written
    /// to); Platform `cluster` subscribes the `--catalog`s and no example is created.
    #[arg(long, value_name = "DIR", requires = "catalog")]
    pub layout: Option<PathBuf>,

    /// With `--layout`: a catalog Platform `cluster` subscribes, `PATH@MAJOR=VERSION` (the
    /// Platform CR's `spec.registry` key and version, e.g.
    /// `opmodel.dev/catalogs/opm@v2=2.0.0-alpha.4`); repeatable.
    #[arg(long, value_name = "PATH@MAJOR=VERSION", requires = "layout", value_parser = parse_catalog)]
    pub catalog: Vec<Catalog>,

    /// With `--layout`: the generated platforms' core pin and `#registry` shape (the flags of
    /// `serve`; the bundled fixtures always use their own core).
    #[command(flatten)]
    pub generator: crate::cmd::serve::GeneratorArgs,

    /// The embedded cluster gives Deployments, StatefulSets, DaemonSets, Jobs, PVCs and
    /// LoadBalancer Services the status a healthy controller would, this long after each change
    /// (kube-emu's workload simulator); the annotation `kube-emu.opmodel.dev/simulate: fail`
    /// (or `hold`) on an object asks for a failed (or never-ending) rollout.
    #[arg(long, default_value = "2s", value_parser = crds::duration::parse_flag, value_name = "DURATION")]
    pub workload_delay: std::time::Duration,

    /// Memory budget of one render (`serve`'s flag of the same name).
    #[arg(long, default_value = crate::kernel::limits::DEFAULT_RENDER_MEMORY_LIMIT, value_parser = crate::kernel::limits::parse_bytes, value_name = "BYTES")]
    pub render_memory_limit: u64,
}

/// A catalog Platform `cluster` subscribes (`--catalog`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// The module path with its major version (`spec.registry` key).
    pub path: String,
    /// The subscribed version (SemVer, no `v`, as the Platform CR writes it).
    pub version: String,
}

fn parse_catalog(s: &str) -> Result<Catalog, String> {
    let (path, version) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: want PATH@MAJOR=VERSION"))?;
    cue::module::check_path_with_major(path).map_err(|e| e.to_string())?;
    let version = version.strip_prefix('v').unwrap_or(version);
    if cue::module::semver::Version::parse(&format!("v{version}")).is_none() {
        return Err(format!("{version:?}: not a SemVer version"));
    }
    Ok(Catalog {
        path: path.to_owned(),
        version: version.to_owned(),
    })
}

/// Where the modules come from: the bundled fixtures or a user's layout.
#[derive(Debug, Clone)]
enum Source {
    Bundled,
    Layout {
        dir: PathBuf,
        catalogs: Vec<Catalog>,
        generator: crate::cmd::serve::GeneratorArgs,
    },
}

impl Source {
    fn of(args: &DevArgs, cwd: &Path) -> Source {
        match &args.layout {
            None => Source::Bundled,
            Some(dir) => Source::Layout {
                dir: cwd.join(dir),
                catalogs: args.catalog.clone(),
                generator: args.generator.clone(),
            },
        }
    }

    /// The `spec.registry` of Platform `cluster`.
    fn platform_registry(&self) -> Value {
        match self {
            Source::Bundled => json!({"fixtures.test/catalogs/mini@v0": {"version": "0.1.0"}}),
            Source::Layout { catalogs, .. } => Value::Object(
                catalogs
                    .iter()
                    .map(|c| (c.path.clone(), json!({"version": c.version})))
                    .collect(),
            ),
        }
    }
}

/// Why `opm-operator dev` failed.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// A state file or directory could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `--port-base` leaves no room for four ports.
    #[error("--port-base {0}: the four ports N..N+3 must be at most 65535")]
    PortBase(u16),
    /// The async runtime could not be built.
    #[error("starting the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The development certificates could not be generated.
    #[error("development certificates: {0}")]
    Certs(#[from] certs::Error),
    /// Publishing a bundled module into the layout failed.
    #[error("publishing the bundled module {module}: {source}")]
    Publish {
        /// The module directory.
        module: &'static str,
        /// The cause.
        #[source]
        source: crate::registry::Error,
    },
    /// The emulator failed to start (e.g. a corrupt snapshot) or to save its snapshot.
    #[error("the embedded cluster: {0}")]
    Emulator(#[from] kube_emu::Error),
    /// A setup request to the emulator failed.
    #[error("{what}: {source}")]
    Setup {
        /// What was being set up.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The CRD manifests did not parse.
    #[error("the CRD manifests: {0}")]
    Crds(String),
    /// The controller side could not be prepared.
    #[error(transparent)]
    Serve(#[from] crate::cmd::serve::ServeError),
    /// The server failed.
    #[error(transparent)]
    Server(#[from] crate::server::Error),
    /// The server arguments dev builds did not parse (a bug).
    #[error("the server arguments: {0}")]
    Args(String),
}

/// The four ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// kube-emu (HTTPS).
    pub emulator: u16,
    /// Webhooks and render API (HTTPS).
    pub server: u16,
    /// Probes (HTTP).
    pub probes: u16,
    /// Metrics (HTTP).
    pub metrics: u16,
}

impl Ports {
    /// N..N+3, or four free ports for 0.
    pub fn resolve(base: u16) -> Result<Ports, DevError> {
        if base == 0 {
            let mut held = Vec::new();
            for _ in 0..4 {
                let l = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|source| {
                    DevError::Io {
                        what: "picking a free port on",
                        path: PathBuf::from("127.0.0.1"),
                        source,
                    }
                })?;
                let port = l
                    .local_addr()
                    .map_err(|source| DevError::Io {
                        what: "picking a free port on",
                        path: PathBuf::from("127.0.0.1"),
                        source,
                    })?
                    .port();
                held.push((l, port));
            }
            let p: Vec<u16> = held.iter().map(|(_, p)| *p).collect();
            return match p.as_slice() {
                [emulator, server, probes, metrics] => Ok(Ports {
                    emulator: *emulator,
                    server: *server,
                    probes: *probes,
                    metrics: *metrics,
                }),
                _ => Err(DevError::PortBase(base)),
            };
        }
        let at = |k: u16| base.checked_add(k).ok_or(DevError::PortBase(base));
        Ok(Ports {
            emulator: base,
            server: at(1)?,
            probes: at(2)?,
            metrics: at(3)?,
        })
    }
}

/// The files of the state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    /// The directory (absolute).
    pub root: PathBuf,
}

impl StateDir {
    /// The emulator's snapshot.
    pub fn snapshot(&self) -> PathBuf {
        self.root.join("cluster.json")
    }
    /// The kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }
    /// The emulator's serving CA.
    pub fn kube_ca(&self) -> PathBuf {
        self.root.join("kube-ca.crt")
    }
    /// Our server's certificates.
    pub fn certs(&self) -> PathBuf {
        self.root.join("certs")
    }
    /// The dev token.
    pub fn token(&self) -> PathBuf {
        self.root.join("token")
    }
    /// The OCI layout.
    pub fn registry(&self) -> PathBuf {
        self.root.join("registry")
    }
    /// The generated platform packages.
    pub fn platform(&self) -> PathBuf {
        self.root.join("platform")
    }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> DevError + 'a {
    move |source| DevError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, contents: &[u8], mode: u32) -> Result<(), DevError> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = options.open(&tmp).map_err(io("writing", &tmp))?;
    f.write_all(contents).map_err(io("writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io("writing", path))
}

/// The dev token: read from `STATE/token`, or generated and written (mode 0600).
fn token(state: &StateDir) -> Result<String, DevError> {
    let path = state.token();
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_owned()),
        Ok(_) => Err(DevError::Io {
            what: "reading the dev token",
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "empty file"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 16];
            let urandom = Path::new("/dev/urandom");
            std::io::Read::read_exact(
                &mut std::fs::File::open(urandom).map_err(io("opening", urandom))?,
                &mut bytes,
            )
            .map_err(io("reading", urandom))?;
            let t = format!("opm-dev-{}", hex::encode(bytes));
            write(&path, format!("{t}\n").as_bytes(), 0o600)?;
            Ok(t)
        }
        Err(source) => Err(DevError::Io {
            what: "reading the dev token",
            path,
            source,
        }),
    }
}

/// Publishes the bundled modules into the OCI layout `dir` (idempotent: same content, same
/// digests).
pub fn publish_bundle(dir: &Path) -> Result<(), DevError> {
    use crate::registry::{Location, Mapping, ModuleRegistry, RegistryConfig};
    let registry = ModuleRegistry::new(RegistryConfig::new(Mapping::single(Location::Layout {
        dir: dir.to_path_buf(),
    })))
    .map_err(|source| DevError::Publish {
        module: "(registry)",
        source,
    })?;
    for m in bundle::MODULES {
        let files: Vec<(String, Vec<u8>)> = m
            .files
            .iter()
            .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
            .collect();
        registry
            .publish_files(&files, BUNDLE_VERSION)
            .map_err(|source| DevError::Publish {
                module: m.dir,
                source,
            })?;
    }
    Ok(())
}

/// `--layout` names an OCI layout: a directory with `oci-layout` (checked before anything starts,
/// so a typo is an error, not an empty registry).
fn check_layout(dir: &Path) -> Result<(), DevError> {
    let marker = dir.join("oci-layout");
    std::fs::metadata(&marker)
        .map(|_| ())
        .map_err(io("--layout: reading the OCI layout marker", &marker))
}

/// The example's values: a ConfigMap (`settings`) carries `logLevel`.
pub fn example_values() -> Value {
    json!({
        "image": {"tag": "1.2.3"},
        "replicas": 1,
        "hosts": ["a.example", "b.example"],
        "logLevel": "info",
        "secret": {"value": "dev-secret"}
    })
}

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn object(v: Value) -> Result<DynamicObject, DevError> {
    serde_json::from_value(v).map_err(|e| DevError::Crds(e.to_string()))
}

async fn create_if_absent(api: &Api<DynamicObject>, what: &str, v: Value) -> Result<(), DevError> {
    match api.create(&PostParams::default(), &object(v)?).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(DevError::Setup {
            what: format!("creating {what}"),
            source,
        }),
    }
}

async fn apply(api: &Api<DynamicObject>, name: &str, what: &str, v: Value) -> Result<(), DevError> {
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object(v)?),
    )
    .await
    .map(|_| ())
    .map_err(|source| DevError::Setup {
        what: format!("applying {what}"),
        source,
    })
}

/// The ValidatingWebhookConfiguration of deploy/webhook.yaml, pointing at `base` by URL.
fn webhook_config(base: &str, ca_pem: &str) -> Value {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let hook = |name: &str, path: &str, resource: &str| {
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": 5,
            "clientConfig": {"url": format!("{base}{path}"), "caBundle": ca},
            "rules": [{"apiGroups": ["opmodel.dev"], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE", "UPDATE"], "resources": [resource], "scope": "Cluster"}],
        })
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "opm-operator", "labels": {"app.kubernetes.io/name": "opm-operator"}},
        "webhooks": [
            hook("transformerregistrations.opmodel.dev", crate::server::TRANSFORMER_REGISTRATIONS_PATH, "transformerregistrations"),
            hook("platforms.opmodel.dev", crate::server::PLATFORMS_PATH, "platforms"),
        ],
    })
}

/// Installs the CRDs and the webhook configuration, and creates what is absent: namespaces,
/// Platform `cluster` (subscribing the bundled `mini` catalog, or the `--catalog`s of a layout)
/// and, with the bundled modules, the example ModuleInstance.
async fn setup(
    client: &kube::Client,
    ports: Ports,
    server_ca: &str,
    source: &Source,
) -> Result<(), DevError> {
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    let yaml = crds::all_crds_yaml().map_err(|e| DevError::Crds(e.to_string()))?;
    let docs: Vec<Value> =
        crds::yaml::from_str_multiple(&yaml).map_err(|e| DevError::Crds(e.to_string()))?;
    for v in docs {
        if v.is_null() {
            continue;
        }
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        apply(&crds, &name, &format!("CRD {name}"), v).await?;
    }
    let namespaces: Api<DynamicObject> =
        Api::all_with(client.clone(), &ar("", "v1", "Namespace", "namespaces"));
    for ns in ["opm-system", EXAMPLE_NAMESPACE] {
        create_if_absent(
            &namespaces,
            &format!("namespace {ns}"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await?;
    }
    // Created before the webhook is registered: our server is not listening yet.
    let platforms: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar("opmodel.dev", "v1alpha1", "Platform", "platforms"),
    );
    create_if_absent(
        &platforms,
        "Platform cluster",
        json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "Platform",
            "metadata": {"name": "cluster"},
            "spec": {
                "type": "kubernetes",
                "registry": source.platform_registry(),
            },
        }),
    )
    .await?;
    if matches!(source, Source::Bundled) {
        create_example(client).await?;
    }
    let hooks: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    let base = format!("https://127.0.0.1:{}", ports.server);
    apply(
        &hooks,
        "opm-operator",
        "the ValidatingWebhookConfiguration",
        webhook_config(&base, server_ca),
    )
    .await
}

/// Creates the example ModuleInstance of the bundled `demo` module when absent.
async fn create_example(client: &kube::Client) -> Result<(), DevError> {
    let instances: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        EXAMPLE_NAMESPACE,
        &ar(
            "opmodel.dev",
            "v1alpha1",
            "ModuleInstance",
            "moduleinstances",
        ),
    );
    create_if_absent(
        &instances,
        "the example ModuleInstance",
        json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
            "metadata": {"name": EXAMPLE_NAME, "namespace": EXAMPLE_NAMESPACE},
            "spec": {
                "module": {"path": EXAMPLE_MODULE, "version": BUNDLE_VERSION},
                "values": example_values(),
                "prune": true,
            },
        }),
    )
    .await
}

/// The summary printed once everything listens, for the bundled modules.
pub fn summary(state: &StateDir, ports: Ports) -> String {
    summary_of(state, ports, &Source::Bundled)
}

fn summary_of(state: &StateDir, ports: Ports, source: &Source) -> String {
    if let Source::Layout { dir, catalogs, .. } = source {
        return layout_summary(state, ports, dir, catalogs);
    }
    let s = state.root.display();
    let kc = state.kubeconfig();
    let kc = kc.display();
    let body = json!({
        "name": EXAMPLE_NAME,
        "module": {"path": EXAMPLE_MODULE, "version": BUNDLE_VERSION},
        "values": example_values(),
    });
    format!(
        "opm-operator dev: running (state in {s})\n\
         \x20 kube-emu (Kubernetes API)  https://127.0.0.1:{emu}  CRDs, Platform cluster, ModuleInstance {ns}/{name}\n\
         \x20 webhooks + render API      https://127.0.0.1:{srv}  (CA {s}/certs/ca.crt, token {s}/token)\n\
         \x20 controllers                Platform, TransformerRegistration, ModuleInstance (modules from oci:{s}/registry)\n\
         \x20 probes                     http://127.0.0.1:{probes}/readyz\n\
         \x20 metrics                    http://127.0.0.1:{metrics}/metrics\n\
         Try:\n\
         KUBECONFIG={kc} kubectl get mi -A\n\
         KUBECONFIG={kc} kubectl wait --for=condition=Ready mi/{name} -n {ns} --timeout=60s\n\
         KUBECONFIG={kc} kubectl patch mi/{name} -n {ns} --type=merge -p '{{\"spec\":{{\"values\":{{\"logLevel\":\"debug\"}}}}}}'\n\
         KUBECONFIG={kc} kubectl get configmap {cm} -n {ns} -o jsonpath='{{.data.log-level}}'\n\
         curl --cacert {s}/certs/ca.crt -H \"Authorization: Bearer $(cat {s}/token)\" -H 'content-type: application/json' -d '{body}' https://127.0.0.1:{srv}/v1/namespaces/{ns}/render\n\
         Ctrl-C stops everything; the cluster's objects stay in {s}/cluster.json.",
        emu = ports.emulator,
        srv = ports.server,
        probes = ports.probes,
        metrics = ports.metrics,
        ns = EXAMPLE_NAMESPACE,
        name = EXAMPLE_NAME,
        cm = EXAMPLE_CONFIGMAP,
    )
}

/// The summary with `--layout`: no example; how to apply a ModuleInstance of the layout.
fn layout_summary(state: &StateDir, ports: Ports, dir: &Path, catalogs: &[Catalog]) -> String {
    let s = state.root.display();
    let kc = state.kubeconfig();
    let kc = kc.display();
    let subscribed: Vec<String> = catalogs
        .iter()
        .map(|c| format!("{} {}", c.path, c.version))
        .collect();
    format!(
        "opm-operator dev: running (state in {s})\n\
         \x20 kube-emu (Kubernetes API)  https://127.0.0.1:{emu}  CRDs, Platform cluster subscribing {subscribed}\n\
         \x20 webhooks + render API      https://127.0.0.1:{srv}  (CA {s}/certs/ca.crt, token {s}/token)\n\
         \x20 controllers                Platform, TransformerRegistration, ModuleInstance (modules from oci:{layout})\n\
         \x20 probes                     http://127.0.0.1:{probes}/readyz\n\
         \x20 metrics                    http://127.0.0.1:{metrics}/metrics\n\
         Try:\n\
         KUBECONFIG={kc} kubectl wait --for=condition=Ready platform/cluster --timeout=60s\n\
         KUBECONFIG={kc} kubectl apply -f moduleinstance.yaml   (spec.module: a module of the layout)\n\
         KUBECONFIG={kc} kubectl get mi -A\n\
         curl --cacert {s}/certs/ca.crt -H \"Authorization: Bearer $(cat {s}/token)\" -H 'content-type: application/json' -d '{{\"name\": …, \"module\": …, \"values\": …}}' https://127.0.0.1:{srv}/v1/namespaces/{ns}/render\n\
         Ctrl-C stops everything; the cluster's objects stay in {s}/cluster.json.",
        subscribed = subscribed.join(", "),
        layout = dir.display(),
        emu = ports.emulator,
        srv = ports.server,
        probes = ports.probes,
        metrics = ports.metrics,
        ns = EXAMPLE_NAMESPACE,
    )
}

/// The `serve` arguments dev runs with.
#[derive(clap::Parser, Debug)]
struct Wiring {
    #[command(flatten)]
    server: crate::server::ServeArgs,
    #[command(flatten)]
    controllers: crate::cmd::serve::ControllerArgs,
}

fn wiring(
    state: &StateDir,
    ports: Ports,
    source: &Source,
    render_memory_limit: u64,
) -> Result<Wiring, DevError> {
    use clap::Parser as _;
    let p = |p: &Path| p.display().to_string();
    let certs = state.certs();
    let modules = match source {
        Source::Bundled => [
            format!("--registry=oci:{}", p(&state.registry())),
            "--core-module=fixtures.test/core@v0".to_owned(),
            format!("--core-version={BUNDLE_VERSION}"),
            "--platform-shape=catalog-entry".to_owned(),
        ],
        Source::Layout { dir, generator, .. } => {
            use clap::ValueEnum as _;
            let shape = generator
                .platform_shape
                .to_possible_value()
                .map(|v| v.get_name().to_owned())
                .unwrap_or_default();
            [
                format!("--registry=oci:{}", p(dir)),
                format!("--core-module={}", generator.core_module),
                format!("--core-version={}", generator.core_version),
                format!("--platform-shape={shape}"),
            ]
        }
    };
    let args = [
        "dev".to_owned(),
        format!("--webhook-addr=127.0.0.1:{}", ports.server),
        format!("--probe-addr=127.0.0.1:{}", ports.probes),
        format!("--metrics-addr=127.0.0.1:{}", ports.metrics),
        format!("--tls-cert={}", p(&certs.join("tls.crt"))),
        format!("--tls-key={}", p(&certs.join("tls.key"))),
        "--render-auth=kube".to_owned(),
        "--shutdown-grace=2s".to_owned(),
        "--leader-elect=false".to_owned(),
        // The README's dependsOn pair spans two namespaces (the example's fixed object names
        // allow one instance per namespace).
        "--allow-cross-namespace-refs".to_owned(),
        format!("--kubeconfig={}", p(&state.kubeconfig())),
        format!("--platform-dir={}", p(&state.platform())),
        format!("--render-memory-limit={render_memory_limit}"),
    ];
    Wiring::try_parse_from(args.into_iter().chain(modules))
        .map_err(|e| DevError::Args(e.to_string()))
}

/// Prints the summary once the server listens (the sidecar runs after the listeners are bound),
/// then runs the controllers.
fn announce(sidecar: Sidecar, text: String, started: Instant) -> Sidecar {
    let run = sidecar.run;
    Sidecar {
        register: sidecar.register,
        render: sidecar.render,
        run: Box::new(move |stop| {
            async move {
                println!(
                    "{text}\n(ready to serve in {} ms)",
                    started.elapsed().as_millis()
                );
                use std::io::Write as _;
                let _ = std::io::stdout().flush();
                run(stop).await;
            }
            .boxed()
        }),
    }
}

/// Runs `opm-operator dev` until SIGINT/SIGTERM.
pub fn run(args: DevArgs) -> Result<(), DevError> {
    let started = Instant::now();
    let cwd =
        std::env::current_dir().map_err(io("reading the working directory", Path::new(".")))?;
    let root = cwd.join(&args.state_dir);
    std::fs::create_dir_all(&root).map_err(io("creating", &root))?;
    let source = Source::of(&args, &cwd);
    let state = StateDir { root };
    let ports = Ports::resolve(args.port_base)?;
    let token = token(&state)?;
    let sans = certs::self_signed::default_sans("opm-operator-webhook", "opm-system");
    let certs = certs::self_signed::bootstrap(&state.certs(), &sans, None)?;
    match &source {
        Source::Bundled => publish_bundle(&state.registry())?,
        Source::Layout { dir, .. } => check_layout(dir)?,
    }

    // The emulator's runtime: separate from the server's (`run_with` builds its own), it keeps
    // serving on its worker threads while the server runs on this thread.
    let emu_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("kube-emu")
        .enable_all()
        .build()
        .map_err(DevError::Runtime)?;
    let emu = emu_rt.block_on(async {
        let mut tokens = HashMap::new();
        tokens.insert(
            token.clone(),
            kube_emu::UserInfo {
                username: DEV_USER.into(),
                groups: vec!["system:masters".into(), "system:authenticated".into()],
                uid: String::new(),
            },
        );
        let emu = kube_emu::Emulator::start(kube_emu::Options {
            port: ports.emulator,
            tls: true,
            tokens,
            snapshot: Some(state.snapshot()),
            workloads: Some(kube_emu::simulate::Workloads::after(args.workload_delay)),
            ..kube_emu::Options::default()
        })
        .await?;
        write(&state.kubeconfig(), emu.kubeconfig_yaml().as_bytes(), 0o600)?;
        write(
            &state.kube_ca(),
            emu.ca_pem().unwrap_or_default().as_bytes(),
            0o644,
        )?;
        let client = emu.client()?;
        setup(&client, ports, &certs.ca_pem, &source).await?;
        Ok::<_, DevError>(emu)
    })?;

    let w = wiring(&state, ports, &source, args.render_memory_limit)?;
    let sidecar = crate::cmd::serve::operator_sidecar(&w.server, w.controllers)?;
    let sidecar = announce(sidecar, summary_of(&state, ports, &source), started);
    let served = crate::server::run_with(w.server, Some(sidecar));
    let saved = emu_rt.block_on(emu.stop());
    served?;
    saved?;
    println!(
        "opm-operator dev: stopped; state kept in {}",
        state.root.display()
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn ports_follow_the_base_and_zero_picks_free_ones() {
        let p = Ports::resolve(7443).unwrap();
        assert_eq!(
            (p.emulator, p.server, p.probes, p.metrics),
            (7443, 7444, 7445, 7446)
        );
        assert!(matches!(
            Ports::resolve(65534),
            Err(DevError::PortBase(65534))
        ));
        let p = Ports::resolve(0).unwrap();
        let set: std::collections::BTreeSet<u16> =
            [p.emulator, p.server, p.probes, p.metrics].into();
        assert_eq!(set.len(), 4);
        assert!(!set.contains(&0));
    }

    #[test]
    fn the_wiring_parses_and_turns_render_auth_on_and_leader_election_off() {
        let state = StateDir {
            root: PathBuf::from("/tmp/x"),
        };
        let w = wiring(
            &state,
            Ports::resolve(7443).unwrap(),
            &Source::Bundled,
            96 << 20,
        )
        .unwrap();
        assert_eq!(w.server.render_auth, crate::server::RenderAuthMode::Kube);
        assert_eq!(
            w.server.render_memory_limit,
            96 << 20,
            "dev's flag reaches serve's"
        );
        assert!(!w.controllers.leader_elect);
        assert_eq!(w.server.webhook_addr.to_string(), "127.0.0.1:7444");
        assert_eq!(
            w.controllers.registry.as_deref(),
            Some("oci:/tmp/x/registry")
        );
    }

    #[test]
    fn a_catalog_flag_is_a_path_with_major_and_a_semver_version() {
        let c = parse_catalog("opmodel.dev/catalogs/opm@v2=2.0.0-alpha.4").unwrap();
        assert_eq!(c.path, "opmodel.dev/catalogs/opm@v2");
        assert_eq!(c.version, "2.0.0-alpha.4");
        assert_eq!(
            parse_catalog("opmodel.dev/catalogs/opm@v2=v2.0.0")
                .unwrap()
                .version,
            "2.0.0"
        );
        for bad in [
            "opmodel.dev/catalogs/opm@v2",
            "opmodel.dev/catalogs/opm=2.0.0",
            "opmodel.dev/catalogs/opm@v2=two",
            "opmodel.dev/catalogs/opm@v2=",
        ] {
            assert!(parse_catalog(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_layout_serves_the_modules_with_the_generator_flags_and_subscribes_the_catalogs() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            dev: DevArgs,
        }
        let state = StateDir {
            root: PathBuf::from("/tmp/x"),
        };
        let args = Cli::try_parse_from([
            "dev",
            "--layout",
            "out/layout",
            "--catalog",
            "opmodel.dev/catalogs/opm@v2=2.0.0-alpha.4",
            "--platform-shape",
            "subscription",
        ])
        .unwrap()
        .dev;
        let source = Source::of(&args, Path::new("/w"));
        let w = wiring(&state, Ports::resolve(7443).unwrap(), &source, 512 << 20).unwrap();
        assert_eq!(w.controllers.registry.as_deref(), Some("oci:/w/out/layout"));
        assert_eq!(w.controllers.generator.core_module, "opmodel.dev/core@v2");
        assert_eq!(
            w.controllers.generator.platform_shape,
            crate::cmd::serve::PlatformShape::Subscription
        );
        assert_eq!(
            source.platform_registry(),
            json!({"opmodel.dev/catalogs/opm@v2": {"version": "2.0.0-alpha.4"}})
        );
        // --layout needs a catalog, a catalog needs --layout.
        assert!(Cli::try_parse_from(["dev", "--layout", "l"]).is_err());
        assert!(Cli::try_parse_from(["dev", "--catalog", "a.b/c@v0=0.1.0"]).is_err());
    }

    #[test]
    fn the_token_is_generated_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: dir.path().to_path_buf(),
        };
        let t1 = token(&state).unwrap();
        let t2 = token(&state).unwrap();
        assert_eq!(t1, t2);
        assert!(t1.starts_with("opm-dev-"));
    }
}
