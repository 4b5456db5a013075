//! Remote clusters (`spec.kubeConfig.secretRef`, Flux's `kubeConfig`): a ModuleInstance (or
//! ModulePackage) rendered here and applied, pruned, drift-checked and health-checked on the
//! cluster a kubeconfig names.
//!
//! Rules:
//! - **The kubeconfig** is read from the Secret `spec.kubeConfig.secretRef.name` in the object's
//!   own namespace, with the controller's identity, at the key `secretRef.key`, else `value`,
//!   else `value.yaml` (Flux's and Cluster API's keys). A missing Secret or key is Ready=False
//!   `KubeConfigNotFound`, retried with backoff (a Secret written later, e.g. by Cluster API, is
//!   picked up). A kubeconfig that does not parse or names no usable current context and
//!   cluster is Stalled `KubeConfigInvalid`; so is one that asks for what the operator refuses,
//!   as Flux does without its `--insecure-kubeconfig-*` flags: exec or auth-provider credential
//!   plugins (they would run a command, or use a cloud identity, inside the operator's pod),
//!   file paths (`tokenFile`, `client-certificate`, `client-key`, `certificate-authority`: they
//!   would read the operator's own files, its ServiceAccount token included, and send them to
//!   a server of the tenant's choosing) and `insecure-skip-tls-verify`. Only inline credentials
//!   (`token`, `client-*-data`, `certificate-authority-data`, basic auth) are used.
//! - **Clients are cached** per Secret (namespace, name, key) with its resourceVersion
//!   ([`Clusters`]): a reconcile reads the Secret (one GET), reuses the client while the
//!   resourceVersion is the same, and builds a new one (dropping the old, with its discovery
//!   cache) when it changed. A Secret found missing drops its entry. Remote clients connect
//!   within [`CONNECT_TIMEOUT`] and wait at most [`REQUEST_TIMEOUT`] per request.
//! - **Reachability**: each reconcile asks the remote API server for its version first (one GET
//!   of `/version`). No answer (connection refused, TLS, timeout) or a refusal (401/403 of the
//!   kubeconfig's credentials) is Ready=False `RemoteClusterUnreachable` naming the server,
//!   retried with backoff; nothing is applied, drift-checked or pruned anywhere. A transport
//!   failure during the apply that follows is reported the same way (and, as any failed apply,
//!   prunes nothing).
//! - **Identity there**: the apply and prune impersonate `serviceAccountName` (or the operator's
//!   `--default-service-account`) on the remote cluster, which must have that ServiceAccount in a
//!   namespace of the instance's name; drift and health checks use the kubeconfig's identity, as
//!   they use the controller's on the operator's cluster. Owner lookups of the ownership rule
//!   (`crate::apply::ownership`) stay on the operator's cluster, where the instances are.
//! - **Inventory**: the inventory records the remote server URL (`status.inventory.cluster`;
//!   absent for the operator's own cluster). When the target changes (another Secret, or the
//!   Secret now names another server), the recorded entries are of the other cluster: nothing of
//!   them is pruned on the new one, they are left where they are (Warning `InventoryOrphaned`
//!   naming the count and the old cluster), and the reconcile is never a NoOp.
//! - **Deletion** prunes the inventory on its cluster. A kubeconfig that cannot be used (missing,
//!   invalid) or a cluster that does not answer keeps the finalizer (Ready=False with the reasons
//!   above, retried; the invalid kubeconfig stalls), unless the object is annotated
//!   `opm.dev/force-delete-orphan: "true"` (Warning `OrphanedOnDeletion`, nothing deleted) or
//!   `spec.prune` is off. An inventory recorded on another cluster than the current target is
//!   orphaned (Warning `InventoryOrphaned`).
//! - **Health after Ready**: the workload watch (`super::workloads`) watches the operator's own
//!   cluster only; a Ready instance on a remote cluster is instead reconciled again every
//!   [`REMOTE_HEALTH_POLL`] (or its own interval when shorter), which re-checks its health (and
//!   drift) there. A watch per remote cluster would need list/watch rights cluster-wide there
//!   and a connection per cluster kept open; the poll needs neither.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crds::k8s_openapi::api::core::v1::Secret;
use crds::kube_config::{KubeConfigReference, DEFAULT_KEY, FALLBACK_KEY};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Api;

use crate::apply::Engine;

/// How often a Ready instance on a remote cluster is reconciled again (module rules, “Health
/// after Ready”).
pub const REMOTE_HEALTH_POLL: Duration = Duration::from_secs(60);
/// How long a remote client waits for a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a remote client waits for one answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A remote cluster in use.
pub struct RemoteCluster {
    /// The engine acting there with the kubeconfig's identity.
    pub engine: Engine,
    /// The kubeconfig's client configuration (copied into impersonating clients).
    pub config: kube::Config,
    /// The API server URL (the inventory's `cluster`).
    pub server: String,
    /// `namespace/name` of the Secret.
    pub secret: String,
}

impl std::fmt::Debug for RemoteCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteCluster")
            .field("server", &self.server)
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

/// Where a reconcile acts: the operator's own cluster or a remote one.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// The remote cluster (`None`: the operator's own).
    pub remote: Option<Arc<RemoteCluster>>,
}

impl Target {
    /// The operator's own cluster.
    pub fn local() -> Target {
        Target::default()
    }

    /// Whether the target is a remote cluster.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// The engine acting on the target with its base identity (`local`: the operator's).
    pub fn engine<'a>(&'a self, local: &'a Engine) -> &'a Engine {
        self.remote.as_ref().map_or(local, |r| &r.engine)
    }

    /// The client configuration impersonating clients copy (`local`: the operator's).
    pub fn base_config<'a>(&'a self, local: Option<&'a kube::Config>) -> Option<&'a kube::Config> {
        match &self.remote {
            Some(r) => Some(&r.config),
            None => local,
        }
    }

    /// The inventory's `cluster` for this target (module rules).
    pub fn cluster(&self) -> Option<String> {
        self.remote.as_ref().map(|r| r.server.clone())
    }

    /// `cluster <server>` or `the operator's cluster` (messages).
    pub fn describe(cluster: Option<&str>) -> String {
        match cluster {
            Some(server) => format!("cluster {server}"),
            None => "the operator's cluster".to_owned(),
        }
    }
}

/// Why a remote cluster cannot be used (each a condition reason, module rules).
#[derive(Debug)]
pub enum Unusable {
    /// The Secret or its key is missing (`KubeConfigNotFound`).
    NotFound(String),
    /// The kubeconfig cannot be used (`KubeConfigInvalid`).
    Invalid(String),
    /// The cluster does not answer, or refuses the credentials (`RemoteClusterUnreachable`).
    Unreachable(String),
    /// Reading the Secret failed on the operator's cluster (retried as an error).
    Read(String, kube::Error),
}

type Key = (String, String, String);

/// The remote clients in use, per Secret and resourceVersion (module rules).
#[derive(Default)]
pub struct Clusters {
    cache: Mutex<HashMap<Key, (String, Arc<RemoteCluster>)>>,
}

impl std::fmt::Debug for Clusters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clusters")
            .field("cached", &self.len())
            .finish()
    }
}

impl Clusters {
    /// How many remote clients are cached.
    pub fn len(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no remote client is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The remote cluster `r` names for an object of `namespace`, checked reachable (module
    /// rules); `client` reads the Secret, `local` is the engine whose options remote engines
    /// share.
    pub async fn target(
        &self,
        client: &kube::Client,
        local: &Engine,
        namespace: &str,
        r: &KubeConfigReference,
    ) -> Result<Target, Unusable> {
        let remote = self.resolve(client, local, namespace, r).await?;
        probe(&remote).await?;
        Ok(Target {
            remote: Some(remote),
        })
    }

    /// The cached (or a new) remote cluster of the Secret `r` names, without the probe.
    pub async fn resolve(
        &self,
        client: &kube::Client,
        local: &Engine,
        namespace: &str,
        r: &KubeConfigReference,
    ) -> Result<Arc<RemoteCluster>, Unusable> {
        let name = &r.secret_ref.name;
        let shown = format!("{namespace}/{name}");
        let key: Key = (
            namespace.to_owned(),
            name.clone(),
            r.secret_ref.key.clone().unwrap_or_default(),
        );
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let secret = match api.get_opt(name).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                self.drop_key(&key);
                return Err(Unusable::NotFound(format!(
                    "the kubeConfig Secret {shown} was not found"
                )));
            }
            Err(e) => {
                return Err(Unusable::Read(
                    format!("reading the kubeConfig Secret {shown}"),
                    e,
                ))
            }
        };
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        if let Some(hit) = self.cached(&key, &version) {
            return Ok(hit);
        }
        let data = secret.data.unwrap_or_default();
        let bytes = match &r.secret_ref.key {
            Some(k) => data.get(k).ok_or_else(|| {
                Unusable::NotFound(format!("the kubeConfig Secret {shown} has no key {k}"))
            })?,
            None => data
                .get(DEFAULT_KEY)
                .or_else(|| data.get(FALLBACK_KEY))
                .ok_or_else(|| {
                    Unusable::NotFound(format!(
                        "the kubeConfig Secret {shown} has neither key {DEFAULT_KEY} nor {FALLBACK_KEY}"
                    ))
                })?,
        };
        let config = config_of(&bytes.0)
            .await
            .map_err(|why| Unusable::Invalid(format!("the kubeConfig Secret {shown}: {why}")))?;
        let remote_client = kube::Client::try_from(config.clone()).map_err(|e| {
            Unusable::Invalid(format!(
                "the kubeConfig Secret {shown}: cannot build a client: {e}"
            ))
        })?;
        let remote = Arc::new(RemoteCluster {
            engine: local.on_cluster(remote_client),
            server: config.cluster_url.to_string(),
            config,
            secret: shown,
        });
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, (version, remote.clone()));
        Ok(remote)
    }

    fn cached(&self, key: &Key, version: &str) -> Option<Arc<RemoteCluster>> {
        let map = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(key)
            .filter(|(v, _)| !version.is_empty() && v == version)
            .map(|(_, r)| r.clone())
    }

    fn drop_key(&self, key: &Key) {
        let mut map = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if !map.is_empty() {
            map.remove(key);
        }
    }
}

/// The client configuration of a kubeconfig (module rules: what is refused).
pub async fn config_of(bytes: &[u8]) -> Result<kube::Config, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the kubeconfig is not UTF-8".to_owned())?;
    let kubeconfig = Kubeconfig::from_yaml(text)
        .map_err(|e| format!("the kubeconfig does not parse: {}", first_line(&e)))?;
    refuse_unsafe(&kubeconfig)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| format!("the kubeconfig is not usable: {}", first_line(&e)))?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.write_timeout = Some(REQUEST_TIMEOUT);
    Ok(config)
}

/// The first line of an error's text (a YAML error goes on with a caret excerpt of the
/// input, which a condition message does not need and which could hold a credential).
fn first_line(e: &dyn std::fmt::Display) -> String {
    e.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Refuses plugins, file paths and disabled TLS verification (module rules).
fn refuse_unsafe(k: &Kubeconfig) -> Result<(), String> {
    for named in &k.auth_infos {
        let Some(a) = &named.auth_info else { continue };
        let user = &named.name;
        if a.exec.is_some() {
            return Err(format!(
                "user {user}: exec credential plugins are not allowed"
            ));
        }
        if a.auth_provider.is_some() {
            return Err(format!(
                "user {user}: auth-provider plugins are not allowed"
            ));
        }
        for (field, set) in [
            ("tokenFile", a.token_file.is_some()),
            ("client-certificate", a.client_certificate.is_some()),
            ("client-key", a.client_key.is_some()),
        ] {
            if set {
                return Err(format!(
                    "user {user}: {field} (a file path) is not allowed; inline the data"
                ));
            }
        }
    }
    for named in &k.clusters {
        let Some(c) = &named.cluster else { continue };
        let cluster = &named.name;
        if c.certificate_authority.is_some() {
            return Err(format!(
                "cluster {cluster}: certificate-authority (a file path) is not allowed; use certificate-authority-data"
            ));
        }
        if c.insecure_skip_tls_verify == Some(true) {
            return Err(format!(
                "cluster {cluster}: insecure-skip-tls-verify is not allowed"
            ));
        }
    }
    Ok(())
}

/// Asks the remote API server for its version (module rules, “Reachability”).
async fn probe(remote: &RemoteCluster) -> Result<(), Unusable> {
    match remote.engine.client().apiserver_version().await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err(Unusable::Unreachable(format!(
            "cluster {} refused the kubeConfig's credentials ({} {}): {}",
            remote.server, s.code, s.reason, s.message
        ))),
        Err(e) => Err(Unusable::Unreachable(format!(
            "cluster {} is not reachable: {e}",
            remote.server
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  cluster: {server: 'http://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: t}\n";

    #[tokio::test]
    async fn inline_credentials_are_used_and_unsafe_kubeconfigs_refused() {
        let config = config_of(BASE.as_bytes()).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "http://127.0.0.1:1/");
        assert_eq!(config.connect_timeout, Some(CONNECT_TIMEOUT));
        for (from, to, refused) in [
            (
                "{token: t}",
                "{exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}}",
                "exec credential plugins",
            ),
            (
                "{token: t}",
                "{auth-provider: {name: gcp}}",
                "auth-provider",
            ),
            (
                "{token: t}",
                "{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}",
                "tokenFile",
            ),
            (
                "{token: t}",
                "{client-certificate: /etc/c.crt, client-key: /etc/c.key}",
                "client-certificate",
            ),
            (
                "{server: 'http://127.0.0.1:1'}",
                "{server: 'https://127.0.0.1:1', certificate-authority: /etc/ca.crt}",
                "certificate-authority",
            ),
            (
                "{server: 'http://127.0.0.1:1'}",
                "{server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}",
                "insecure-skip-tls-verify",
            ),
        ] {
            let text = BASE.replace(from, to);
            let e = config_of(text.as_bytes()).await.unwrap_err();
            assert!(e.contains(refused), "{e}");
        }
        for bad in ["not: [yaml", "apiVersion: v1\nkind: Config\n"] {
            assert!(config_of(bad.as_bytes()).await.is_err(), "{bad}");
        }
        assert!(config_of(&[0xff, 0xfe]).await.is_err());
    }

    #[test]
    fn a_target_names_its_cluster() {
        let local = Target::local();
        assert!(!local.is_remote());
        assert_eq!(local.cluster(), None);
        assert_eq!(Target::describe(None), "the operator's cluster");
        assert_eq!(
            Target::describe(Some("https://10.0.0.1:6443/")),
            "cluster https://10.0.0.1:6443/"
        );
    }
}
