//! Snapshot persistence of the store, for the embedded dev cluster (`opm-operator dev
//! --state-dir`; docs/design/architecture.md §4, "the embedded default").
//!
//! Rules:
//! - A snapshot holds every stored object (CRDs included) and the global resourceVersion counter;
//!   nothing else (no watch history, no tokens, no faults). Kinds declared by stored CRDs are
//!   registered again on load, so their objects are served at once.
//! - Writing is atomic: the JSON goes to `<file>.tmp` in the same directory, is synced, and is
//!   renamed over the file, so a reader (or a crash) sees the old snapshot or the new one.
//! - With `Options::snapshot` set the emulator loads the file at start (a missing file is an empty
//!   store), writes it after changes (debounced by [`DEBOUNCE`]) and once more on
//!   [`crate::Emulator::shutdown`].
//! - A file that exists but does not parse, or has an unknown format version, is an error naming
//!   the file and the cause: it is never silently discarded or overwritten.
//! - After a load the watch history is empty and starts at the loaded counter, so a client resuming
//!   from an older resourceVersion gets 410 Gone and relists, as after an apiserver restart.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::state::{ResKey, State};

/// The format version written and accepted.
pub const FORMAT: u32 = 1;

/// How long the writer waits after a change for further changes before writing.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// Why a snapshot could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading, writing or renaming the file failed.
    #[error("snapshot {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not a snapshot this emulator can load.
    #[error("snapshot {} is corrupt ({message}); move it away to start with an empty store", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Serialising the store failed.
    #[error("serialising the snapshot: {0}")]
    Serialize(#[source] serde_json::Error),
}

/// One stored object.
#[derive(Debug)]
struct Entry {
    group: String,
    plural: String,
    namespace: String,
    name: String,
    object: Arc<Value>,
}

/// One stored object in the file.
#[derive(Debug, Serialize, Deserialize)]
struct FileEntry<O> {
    group: String,
    plural: String,
    namespace: String,
    name: String,
    object: O,
}

/// The file's content (`O`: `&Value` when writing, `Value` when reading).
#[derive(Debug, Serialize, Deserialize)]
struct File<O> {
    format: u32,
    resource_version: u64,
    objects: Vec<FileEntry<O>>,
}

/// A copy of the store's persistent part, taken under the lock (cheap: objects are shared).
#[derive(Debug)]
pub struct Snapshot {
    rv: u64,
    objects: Vec<Entry>,
}

impl Snapshot {
    /// Copies the persistent part of `state`.
    pub fn take(state: &State) -> Snapshot {
        let mut objects = Vec::new();
        for ((group, plural), m) in &state.objects {
            for ((namespace, name), object) in m {
                objects.push(Entry {
                    group: group.clone(),
                    plural: plural.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    object: object.clone(),
                });
            }
        }
        objects.sort_by(|a, b| {
            (&a.group, &a.plural, &a.namespace, &a.name).cmp(&(
                &b.group,
                &b.plural,
                &b.namespace,
                &b.name,
            ))
        });
        Snapshot {
            rv: state.rv,
            objects,
        }
    }

    /// The resourceVersion counter captured.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// Writes the snapshot to `path` atomically (tmp + sync + rename).
    pub fn write(self, path: &Path) -> Result<(), SnapshotError> {
        let file = File {
            format: FORMAT,
            resource_version: self.rv,
            objects: self
                .objects
                .iter()
                .map(|e| FileEntry {
                    group: e.group.clone(),
                    plural: e.plural.clone(),
                    namespace: e.namespace.clone(),
                    name: e.name.clone(),
                    object: &*e.object,
                })
                .collect(),
        };
        let bytes = serde_json::to_vec(&file).map_err(SnapshotError::Serialize)?;
        let io = |source| SnapshotError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            use std::io::Write as _;
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(&bytes).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads `path`: `Ok(None)` when the file does not exist, an error when it does not parse.
    pub fn read(path: &Path) -> Result<Option<Snapshot>, SnapshotError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(SnapshotError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let corrupt = |message: String| SnapshotError::Corrupt {
            path: path.to_path_buf(),
            message,
        };
        let file: File<Value> =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if file.format != FORMAT {
            return Err(corrupt(format!(
                "format {} (this emulator reads format {FORMAT})",
                file.format
            )));
        }
        for e in &file.objects {
            let rv = e.object["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse::<u64>().ok());
            if rv.is_none_or(|rv| rv > file.resource_version) {
                return Err(corrupt(format!(
                    "object {}/{} {}/{} has no resourceVersion at or below the counter {}",
                    e.group, e.plural, e.namespace, e.name, file.resource_version
                )));
            }
        }
        Ok(Some(Snapshot {
            rv: file.resource_version,
            objects: file
                .objects
                .into_iter()
                .map(|e| Entry {
                    group: e.group,
                    plural: e.plural,
                    namespace: e.namespace,
                    name: e.name,
                    object: Arc::new(e.object),
                })
                .collect(),
        }))
    }

    /// Replaces the objects of `state` with the snapshot's, registers the kinds of its CRDs, and
    /// restarts the counter and the (empty) history at the snapshot's resourceVersion.
    pub fn restore(self, state: &mut State) {
        let mut objects: HashMap<ResKey, BTreeMap<(String, String), Arc<Value>>> = HashMap::new();
        for e in self.objects {
            if e.group == "apiextensions.k8s.io" && e.plural == "customresourcedefinitions" {
                if let Ok(rt) = crate::resources::from_crd(&e.object) {
                    state
                        .types
                        .insert((rt.group.clone(), rt.plural.clone()), rt);
                }
            }
            // Snapshots from before the shared Event store kept events.k8s.io Events apart.
            let (key, object) = if e.group == "events.k8s.io" && e.plural == "events" {
                let core = crate::events::to_core((*e.object).clone());
                ((String::new(), e.plural), Arc::new(core))
            } else {
                ((e.group, e.plural), e.object)
            };
            objects
                .entry(key)
                .or_default()
                .insert((e.namespace, e.name), object);
        }
        state.objects = objects;
        state.restart_history(self.rv);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::{Emulator, Options};
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::discovery::ApiResource;

    fn crd() -> Value {
        serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.x.test"},
            "spec": {"group": "x.test", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        })
    }

    fn widgets(client: &kube::Client) -> Api<DynamicObject> {
        let ar = ApiResource {
            group: "x.test".into(),
            version: "v1".into(),
            api_version: "x.test/v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
        };
        Api::namespaced_with(client.clone(), "default", &ar)
    }

    fn opts(path: &Path) -> Options {
        Options {
            snapshot: Some(path.to_path_buf()),
            ..Options::default()
        }
    }

    #[tokio::test]
    async fn objects_crd_kinds_and_the_counter_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/snapshot.json");
        let emu = Emulator::start(opts(&path)).await.unwrap();
        let client = emu.client().unwrap();
        let crds: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ApiResource {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                plural: "customresourcedefinitions".into(),
            },
        );
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(crd()).unwrap(),
        )
        .await
        .unwrap();
        let w: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "x.test/v1", "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 3}
        }))
        .unwrap();
        let created = widgets(&client)
            .create(&PostParams::default(), &w)
            .await
            .unwrap();
        // The debounced writer writes without a shutdown.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let on_disk = Snapshot::read(&path).unwrap();
            if on_disk.is_some_and(|s| s.resource_version() == emu.resource_version()) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no debounced write");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rv = emu.resource_version();
        emu.stop().await.unwrap();
        assert!(!dir.path().join("state/snapshot.json.tmp").exists());

        let emu = Emulator::start(opts(&path)).await.unwrap();
        assert_eq!(emu.resource_version(), rv);
        let client = emu.client().unwrap();
        let got = widgets(&client).get("w1").await.unwrap();
        assert_eq!(got.data["spec"]["size"], 3);
        assert_eq!(got.metadata.uid, created.metadata.uid);
        assert_eq!(
            got.metadata.resource_version,
            created.metadata.resource_version
        );
        // New writes continue the counter.
        let w2: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "x.test/v1", "kind": "Widget",
            "metadata": {"name": "w2", "namespace": "default"}
        }))
        .unwrap();
        let c2 = widgets(&client)
            .create(&PostParams::default(), &w2)
            .await
            .unwrap();
        let rv2: u64 = c2.metadata.resource_version.unwrap().parse().unwrap();
        assert_eq!(rv2, rv + 1);
        emu.stop().await.unwrap();
    }

    #[tokio::test]
    async fn a_corrupt_snapshot_fails_the_start_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snapshot.json");
        std::fs::write(&path, b"{\"format\": 1, \"resource_ver").unwrap();
        let err = match Emulator::start(opts(&path)).await {
            Err(e) => e,
            Ok(_) => panic!("a corrupt snapshot started"),
        };
        assert!(
            matches!(
                err,
                crate::Error::Snapshot(SnapshotError::Corrupt { ref path, .. }) if path.ends_with("snapshot.json")
            ),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"{\"format\": 1, \"resource_ver"
        );
        std::fs::write(
            &path,
            b"{\"format\": 9, \"resource_version\": 1, \"objects\": []}",
        )
        .unwrap();
        assert!(matches!(
            Emulator::start(opts(&path)).await,
            Err(crate::Error::Snapshot(SnapshotError::Corrupt { .. }))
        ));
    }

    #[tokio::test]
    async fn a_missing_snapshot_is_an_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.json");
        let emu = Emulator::start(opts(&path)).await.unwrap();
        emu.stop().await.unwrap();
        let s = Snapshot::read(&path).unwrap().unwrap();
        assert!(s
            .objects
            .iter()
            .any(|e| e.plural == "namespaces" && e.name == "default"));
    }
}
