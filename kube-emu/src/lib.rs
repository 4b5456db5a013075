//! kube-emu: an in-memory Kubernetes API server for tests and the embedded dev cluster.
//!
//! One call starts it on a random loopback port:
//! `let emu = Emulator::start(Options::default()).await?; let client = emu.client()?;`.
//! What it emulates, and every known difference from a real apiserver, is listed in the crate's
//! README.md. Module map: `server` (HTTP, auth, watch), `ops` (verbs), `state` (store, history,
//! store controllers), `ssa`/`fieldset` (managedFields), `patch`, `schema` (CRD structural
//! schemas), `authn` (tokens, TokenRequest, impersonation), `audit` (the audit log), `validation_rules` (CRD validation rules on the `cel` crate), `immutable` (fields updates may not change), `selector`, `rbac`, `admission`, `discovery`, `openapi` (CRD schemas for `kubectl explain`), `resources` (the resource registry; built-ins from `builtin`, computed from `k8s-openapi`'s types), `table` (server-side printing), `protobuf` (Kubernetes protobuf request bodies), `events` (one store for core and `events.k8s.io` Events), `fault` (request-fault injection for tests), `snapshot` (store persistence for the dev cluster), `simulate` (opt-in workload statuses).

pub mod admission;
pub mod api_error;
pub mod audit;
pub mod authn;
pub mod builtin;
pub mod discovery;
pub mod error;
pub mod events;
pub mod fault;
pub mod fieldset;
pub mod immutable;
pub mod openapi;
pub mod ops;
pub mod patch;
pub mod protobuf;
pub mod rbac;
mod request;
pub mod resources;
pub mod scale;
pub mod schema;
pub mod selector;
pub mod server;
pub mod simulate;
pub mod snapshot;
pub mod ssa;
pub mod state;
pub mod table;
pub mod timefmt;
mod tls;
pub mod validation_rules;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub use error::Error;
pub use rbac::UserInfo;

/// Emulator settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// How many events watches can resume from (older versions get 410 Gone).
    pub history_limit: usize,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Webhook service resolution: `"namespace/name"` → base URL (e.g. `https://127.0.0.1:8443`).
    pub service_urls: HashMap<String, String>,
    /// Bearer tokens known to the authenticator (and TokenReview).
    pub tokens: HashMap<String, UserInfo>,
    /// Serve HTTPS with a freshly generated self-signed certificate (for 127.0.0.1 and
    /// localhost) that `client()` and the kubeconfig trust.
    pub tls: bool,
    /// Persist the store in this file (see [`snapshot`]): loaded at start (a corrupt file fails
    /// the start), written after changes (debounced) and on [`Emulator::shutdown`].
    pub snapshot: Option<std::path::PathBuf>,
    /// Give workloads the status a controller would (see [`simulate`]); `None`: never.
    pub workloads: Option<simulate::Workloads>,
    /// Append one `audit.k8s.io/v1` Event per request to this file (see [`audit`]).
    pub audit_log: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            port: 0,
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(1),
            service_urls: HashMap::new(),
            tokens: HashMap::new(),
            tls: false,
            snapshot: None,
            workloads: None,
            audit_log: None,
        }
    }
}

/// State shared by the HTTP handlers.
pub struct Shared {
    /// The store.
    pub state: parking_lot::Mutex<state::State>,
    /// Webhook service URL mapping.
    pub service_urls: HashMap<String, String>,
    /// Shutdown signal for long-running watches.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// BOOKMARK interval.
    pub bookmark_interval: Duration,
    /// The server address (`127.0.0.1:port`).
    pub addr: String,
    /// A token that authenticates as cluster-admin (written into the kubeconfig).
    pub admin_token: String,
    /// Injected request faults (see [`fault`]).
    pub faults: fault::Faults,
    /// The audit log, when one is written (see [`audit`]).
    pub audit: Option<audit::AuditLog>,
}

/// A running emulator.
pub struct Emulator {
    shared: Arc<Shared>,
    url: String,
    shutdown_tx: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
    ca_pem: Option<String>,
    snapshot: Option<SnapshotWriter>,
}

/// The snapshot file and its background writer.
struct SnapshotWriter {
    path: std::path::PathBuf,
    /// Serialises writes of the file (the writer task and the final save).
    lock: Arc<tokio::sync::Mutex<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Emulator {
    /// Binds 127.0.0.1 and serves until [`Emulator::shutdown`] (or drop).
    pub async fn start(opts: Options) -> Result<Self, Error> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.port)).await?;
        let addr = listener.local_addr()?;
        let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
        let mut st = state::State::new(opts.history_limit);
        st.tokens = opts.tokens.clone();
        if let Some(path) = &opts.snapshot {
            if let Some(snap) = snapshot::Snapshot::read(path)? {
                snap.restore(&mut st);
            }
        }
        let audit = match &opts.audit_log {
            Some(path) => Some(audit::AuditLog::open(path)?),
            None => None,
        };
        let changes = st.tx.subscribe();
        // Objects restored from a snapshot were never seen by the simulator: they are looked
        // at once, as if just changed.
        let delayed = match opts.workloads {
            Some(w) if w.delay.is_zero() => {
                st.simulate_now = true;
                for (key, ns, name, next) in simulations_due(&st) {
                    st.commit(&key, &ns, &name, state::Change::Put(next));
                }
                None
            }
            Some(w) => Some((w.delay, st.tx.subscribe(), simulations_due(&st))),
            None => None,
        };
        let shared = Arc::new(Shared {
            state: parking_lot::Mutex::new(st),
            service_urls: opts.service_urls.clone(),
            shutdown: shutdown_rx.clone(),
            bookmark_interval: opts.bookmark_interval,
            addr: addr.to_string(),
            admin_token: format!("kube-emu-admin-{}", uuid::Uuid::new_v4().simple()),
            faults: fault::Faults::default(),
            audit,
        });
        // The apiserver accepts request bodies up to 3 MiB; axum's default is 2 MiB.
        let app = axum::Router::new()
            .fallback(server::handle)
            .layer(axum::extract::DefaultBodyLimit::max(3 * 1024 * 1024))
            .with_state(shared.clone());
        let mut rx = shutdown_rx.clone();
        let stopped = async move {
            let _ = rx.changed().await;
        };
        let (task, ca_pem, scheme) = if opts.tls {
            let (listener, ca_pem) = tls::TlsListener::bind(listener, shutdown_rx)?;
            let task = tokio::spawn(async move {
                let serve = axum::serve(listener, app).with_graceful_shutdown(stopped);
                if let Err(e) = serve.await {
                    tracing::error!(error = %e, "kube-emu server stopped");
                }
            });
            (task, Some(ca_pem), "https")
        } else {
            let task = tokio::spawn(async move {
                let serve = axum::serve(listener, app).with_graceful_shutdown(stopped);
                if let Err(e) = serve.await {
                    tracing::error!(error = %e, "kube-emu server stopped");
                }
            });
            (task, None, "http")
        };
        if let Some((delay, rx, restored)) = delayed {
            for (key, ns, name, _) in restored {
                let current = shared.state.lock().get(&key, &ns, &name);
                if let Some(object) = current {
                    tokio::spawn(simulate_later(
                        shared.clone(),
                        delay,
                        key,
                        object,
                        shutdown_tx.subscribe(),
                    ));
                }
            }
            tokio::spawn(simulate_writer(
                shared.clone(),
                delay,
                rx,
                shutdown_tx.subscribe(),
            ));
        }
        let snapshot = opts.snapshot.map(|path| {
            let lock = Arc::new(tokio::sync::Mutex::new(()));
            let task = tokio::spawn(snapshot_writer(
                shared.clone(),
                path.clone(),
                lock.clone(),
                changes,
                shutdown_tx.subscribe(),
            ));
            SnapshotWriter {
                path,
                lock,
                task: Some(task),
            }
        });
        Ok(Emulator {
            shared,
            url: format!("{scheme}://{addr}"),
            shutdown_tx,
            task: Some(task),
            ca_pem,
            snapshot,
        })
    }

    /// The serving CA (PEM) when started with `tls: true`.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The base URL, `http://127.0.0.1:<port>` (`https://` with `tls: true`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.state.lock().rv
    }

    /// Registers a bearer token for a user.
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.shared
            .state
            .lock()
            .tokens
            .insert(token.to_string(), user);
    }

    /// Fails the next `rule.count` requests matching `rule` (see [`fault`]).
    pub fn inject_fault(&self, rule: fault::FaultRule) {
        self.shared.faults.add(rule);
    }

    /// Removes every injected fault rule.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// How many requests injected faults have answered so far.
    pub fn faults_fired(&self) -> usize {
        self.shared.faults.fired()
    }

    /// How many HTTP requests the emulator has received so far.
    pub fn requests_served(&self) -> usize {
        self.shared.faults.requests()
    }

    /// The client configuration (cluster-admin) that [`Emulator::client`] uses, for callers that
    /// build their own clients from it (e.g. impersonating ones).
    pub fn config(&self) -> Result<kube::Config, Error> {
        let uri: http::Uri = self
            .url
            .parse()
            .map_err(|e: http::uri::InvalidUri| Error::Serde(e.to_string()))?;
        let mut c = kube::Config::new(uri);
        c.default_namespace = "default".into();
        if let Some(pem) = &self.ca_pem {
            c.root_cert = Some(tls::pem_to_der(pem)?);
        }
        Ok(c)
    }

    /// A kube client with the default (cluster-admin) identity.
    pub fn client(&self) -> Result<kube::Client, Error> {
        Ok(kube::Client::try_from(self.config()?)?)
    }

    /// A kube client that impersonates `user` with `groups`.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Result<kube::Client, Error> {
        let mut c = self.config()?;
        c.auth_info.impersonate = Some(user.to_string());
        if !groups.is_empty() {
            c.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        }
        Ok(kube::Client::try_from(c)?)
    }

    /// A kube client that authenticates with a bearer token.
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client, Error> {
        let mut c = self.config()?;
        c.auth_info.token = Some(token.to_string().into());
        Ok(kube::Client::try_from(c)?)
    }

    /// A kubeconfig for kubectl (context `kube-emu`, namespace `default`, the admin token).
    pub fn kubeconfig_yaml(&self) -> String {
        use base64::Engine as _;
        let ca = match &self.ca_pem {
            Some(pem) => format!(
                "\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(pem)
            ),
            None => String::new(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-emu\n  cluster:\n    server: {url}{ca}\ncontexts:\n- name: kube-emu\n  context:\n    cluster: kube-emu\n    user: kube-emu-admin\n    namespace: default\ncurrent-context: kube-emu\nusers:\n- name: kube-emu-admin\n  user:\n    token: {tok}\n",
            url = self.url,
            tok = self.shared.admin_token
        )
    }

    /// Writes the snapshot file now (when started with `Options::snapshot`; otherwise nothing).
    pub async fn save_snapshot(&self) -> Result<(), Error> {
        match &self.snapshot {
            Some(w) => Ok(save(&self.shared, &w.path, &w.lock).await?),
            None => Ok(()),
        }
    }

    /// Stops serving: open watches end, the listener closes. With `Options::snapshot`, the
    /// writer stops and the store is written one last time (an error is logged and returned by
    /// [`Emulator::stop`]).
    pub async fn shutdown(self) {
        if let Err(e) = self.stop().await {
            tracing::error!(error = %e, "kube-emu: the final snapshot was not written");
        }
    }

    /// [`Emulator::shutdown`], returning the final snapshot write's error.
    pub async fn stop(mut self) -> Result<(), Error> {
        let _ = self.shutdown_tx.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        if let Some(mut w) = self.snapshot.take() {
            if let Some(t) = w.task.take() {
                let _ = t.await;
            }
            save(&self.shared, &w.path, &w.lock).await?;
        }
        Ok(())
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}

/// Takes a snapshot under the store lock and writes it off the async threads.
async fn save(
    shared: &Arc<Shared>,
    path: &std::path::Path,
    lock: &tokio::sync::Mutex<()>,
) -> Result<(), snapshot::SnapshotError> {
    let _guard = lock.lock().await;
    let snap = snapshot::Snapshot::take(&shared.state.lock());
    let path = path.to_path_buf();
    let p = path.clone();
    match tokio::task::spawn_blocking(move || snap.write(&p)).await {
        Ok(r) => r,
        Err(e) => Err(snapshot::SnapshotError::Io {
            path,
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

/// Writes the snapshot after each burst of changes (debounced), until shutdown.
async fn snapshot_writer(
    shared: Arc<Shared>,
    path: std::path::PathBuf,
    lock: Arc<tokio::sync::Mutex<()>>,
    mut changes: tokio::sync::broadcast::Receiver<Arc<state::Event>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    loop {
        tokio::select! {
            r = changes.recv() => match r {
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(snapshot::DEBOUNCE) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        // Everything received meanwhile is in this write.
        loop {
            match changes.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => {}
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
        if let Err(e) = save(&shared, &path, &lock).await {
            tracing::error!(error = %e, "kube-emu: writing the snapshot failed; retrying on the next change");
        }
    }
}

/// The delayed workload simulator ([`simulate`]): every stored change that asks for a status
/// gets it `delay` later, if the object is still the same (uid and generation).
async fn simulate_writer(
    shared: Arc<Shared>,
    delay: Duration,
    mut changes: tokio::sync::broadcast::Receiver<Arc<state::Event>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let mut stopping = stop.clone();
        let ev = tokio::select! {
            r = changes.recv() => match r {
                Ok(ev) => ev,
                // Missed changes: an object keeps its old status until it changes again.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            },
            _ = stopping.wait_for(|s| *s) => return,
        };
        let res = (ev.key.0.as_str(), ev.key.1.as_str());
        if ev.etype == state::EventType::Deleted || simulate::update_for(res, &ev.object).is_none()
        {
            continue;
        }
        tokio::spawn(simulate_later(
            shared.clone(),
            delay,
            ev.key.clone(),
            ev.object.clone(),
            stop.clone(),
        ));
    }
}

/// Writes the simulated status of `object` (as stored under `key`) `delay` from now, if the
/// object then still has the same uid and generation.
async fn simulate_later(
    shared: Arc<Shared>,
    delay: Duration,
    key: state::ResKey,
    object: Arc<serde_json::Value>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    tokio::select! {
        _ = tokio::time::sleep(delay) => {}
        _ = stop.wait_for(|s| *s) => return,
    }
    let md = |f: &str| {
        object["metadata"][f]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (ns, name) = (md("namespace"), md("name"));
    let mut st = shared.state.lock();
    let Some(current) = st.get(&key, &ns, &name) else {
        return;
    };
    let same = |p: &str| current.pointer(p) == object.pointer(p);
    if !(same("/metadata/uid") && same("/metadata/generation")) {
        return;
    }
    if let Some(next) = simulate::update_for((key.0.as_str(), key.1.as_str()), &current) {
        st.commit(&key, &ns, &name, state::Change::Put(next));
    }
}

/// Every stored object whose simulated status differs from its stored one: (resource,
/// namespace, name, the object with that status).
fn simulations_due(st: &state::State) -> Vec<(state::ResKey, String, String, serde_json::Value)> {
    let mut out = Vec::new();
    for (key, objects) in &st.objects {
        for ((ns, name), o) in objects {
            if let Some(next) = simulate::update_for((key.0.as_str(), key.1.as_str()), o) {
                out.push((key.clone(), ns.clone(), name.clone(), next));
            }
        }
    }
    out
}
