//! ModuleInstance `spec.valuesFrom` (issue 40): the phase composing the values a reconcile
//! renders with, and the watch that re-renders an instance when an object it reads changes.
//! Reading, merging and redaction are [`crate::values_from`]'s.
//!
//! Rules:
//! - **Phase** ([`compose`], before the render): without `valuesFrom` the values are
//!   `spec.values` and the Config digest is that of their JSON, as before the field existed (so
//!   upgrading re-applies nothing). With it, the references are read with the client of the
//!   identity the instance applies as ([`super::render_apply::RenderRun::apply_client`]: the
//!   ServiceAccount, else the controller), merged in order, `spec.values` on top; the Config
//!   digest covers the merged values keyed by the instance uid (a changed Secret re-renders and
//!   re-applies; the digest stores no value). `spec.drift.ignore` rules, when present, are part
//!   of the Config digest too, so changing them applies once (releasing or taking back the
//!   ignored fields).
//! - **Failures**: a missing required object or key is Ready=False `ValuesFromNotFound`
//!   (Warning once per transition, retried with backoff); another namespace or unusable content
//!   is Stalled `ValuesFromInvalid`; a 403 is Stalled `ValuesFromForbidden` (the message names
//!   the user and the object, as the API server's does); a failure to build the identity stalls
//!   `ImpersonationFailed`; any other API error is retried by the controller runtime.
//! - **Secrets never leak**: the Secret-sourced values of the instance are registered for the log
//!   writer under the instance's key ([`owner_key`]) and forgotten when the instance no longer
//!   reads any (or is gone); [`redact_end`] removes them from the failure message of the
//!   reconcile (condition, event, history and the reconcile's log line), and the render's
//!   warnings are redacted before they become events.
//! - **Watch** ([`triggers`]): Secrets and ConfigMaps carrying `--watch-configs-label-selector`
//!   (Flux's `reconcile.fluxcd.io/watch=Enabled`) are watched cluster-wide; when one appears,
//!   changes its data or is deleted, every instance of its namespace whose `valuesFrom` names it
//!   is reconciled. Objects without the label are read at each reconcile but their changes are
//!   seen only at the instance's next reconcile (its `spec.interval`, a spec change, a
//!   reconcile request), as with Flux: watching every Secret of a cluster would cache them all.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crds::conditions::reasons;
use crds::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use crds::module_instance::ModuleInstance;
use crds::values_from::ValuesKind;
use futures::{future, stream, Stream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, ResourceExt};
use serde_json::Value;

use super::reconcile::{End, Failure, Halt};
use super::render_apply::{actions, RenderRun};
use super::runtime::Error;
use crate::values_from::{self as values, Redactor};

/// What a reconcile renders with.
#[derive(Debug, Clone, Default)]
pub struct Composed {
    /// The values (references merged, `spec.values` on top).
    pub values: Option<Value>,
    /// The bytes the Config digest is computed from (module rules).
    pub config: Vec<u8>,
    /// The Secret-sourced values to keep out of every message.
    pub redactor: Redactor,
}

/// The key an instance's values are registered under for the log writer.
pub fn owner_key(namespace: &str, name: &str) -> String {
    format!("ModuleInstance/{namespace}/{name}")
}

/// The phase (module rules).
pub async fn compose(rr: &RenderRun<'_, '_, ModuleInstance>) -> Result<Composed, Halt> {
    let run = &*rr.run;
    let key = owner_key(&run.namespace, &run.name);
    let spec = run.obj.spec.values.as_ref();
    let ignore = run
        .obj
        .spec
        .drift
        .as_ref()
        .map(|d| d.ignore.as_slice())
        .unwrap_or_default();
    let encode = |what: &str, v: &dyn erased::Encode| {
        v.encode().map_err(|source| Error::Encode {
            what: what.to_owned(),
            source,
        })
    };
    if run.obj.spec.values_from.is_empty() {
        values::forget(&key);
        let mut config = match spec {
            Some(v) => encode("spec.values", v)?,
            None => Vec::new(),
        };
        if !ignore.is_empty() {
            config = values::digest_input(&run.obj.uid().unwrap_or_default(), spec);
            config.extend(b"\0ignore\0");
            config.extend(encode("spec.drift.ignore", &ignore)?);
        }
        return Ok(Composed {
            values: spec.cloned(),
            config,
            redactor: Redactor::default(),
        });
    }
    let client = rr.apply_client().await?;
    let read = values::read(&client, &run.namespace, &run.obj.spec.values_from)
        .await
        .map_err(failure)?;
    values::register(&key, &read.redactor);
    let merged = values::compose(read.values, spec);
    let mut config = values::digest_input(&run.obj.uid().unwrap_or_default(), merged.as_ref());
    if !ignore.is_empty() {
        config.extend(b"\0ignore\0");
        config.extend(encode("spec.drift.ignore", &ignore)?);
    }
    Ok(Composed {
        values: merged,
        config,
        redactor: read.redactor,
    })
}

/// JSON encoding behind a trait object, so one closure encodes values and rules.
mod erased {
    /// Something encodable as JSON.
    pub trait Encode {
        /// The JSON bytes.
        fn encode(&self) -> Result<Vec<u8>, serde_json::Error>;
    }

    impl<T: serde::Serialize> Encode for T {
        fn encode(&self) -> Result<Vec<u8>, serde_json::Error> {
            serde_json::to_vec(self)
        }
    }
}

/// The failure of a read (module rules, “Failures”).
fn failure(e: values::Error) -> Halt {
    let message = e.to_string();
    match e {
        values::Error::NotFound { .. } => {
            Failure::transient(reasons::VALUES_FROM_NOT_FOUND, actions::RENDER, message).into()
        }
        values::Error::OtherNamespace { .. } | values::Error::Invalid { .. } => {
            Failure::stalled(reasons::VALUES_FROM_INVALID, actions::RENDER, message).into()
        }
        values::Error::Forbidden { .. } => {
            Failure::stalled(reasons::VALUES_FROM_FORBIDDEN, actions::RENDER, message).into()
        }
        values::Error::Api { what, source } => Error::kube(what, source).into(),
    }
}

/// The reconcile's end with the instance's registered values removed from its failure message
/// (module rules, “Secrets never leak”).
pub fn redact_end(redactor: &Redactor, ended: Result<End, Halt>) -> Result<End, Halt> {
    if redactor.is_empty() {
        return ended;
    }
    match ended {
        Err(Halt::Failed(mut f)) => {
            f.message = redactor.redact(&f.message);
            Err(Halt::Failed(f))
        }
        Ok(mut end) => {
            for n in &mut end.notes {
                n.message = redactor.redact(&n.message);
            }
            Ok(end)
        }
        Err(Halt::Ended(mut end)) => {
            for n in &mut end.notes {
                n.message = redactor.redact(&n.message);
            }
            Err(Halt::Ended(end))
        }
        other => other,
    }
}

/// What one watched object looked like: its data's hash.
#[derive(Debug, Default)]
struct Seen(HashMap<String, u64>);

impl Seen {
    /// Whether the object (by uid) is new or its data changed; records it.
    fn changed(&mut self, uid: &str, hash: u64) -> bool {
        self.0.insert(uid.to_owned(), hash) != Some(hash)
    }

    fn deleted(&mut self, uid: &str) {
        self.0.remove(uid);
    }
}

/// A watched object's identity and data hash.
#[derive(Debug, Clone)]
struct Observed {
    kind: ValuesKind,
    namespace: String,
    name: String,
    uid: String,
    hash: u64,
}

fn observe_secret(s: &Secret) -> Observed {
    let mut h = DefaultHasher::new();
    if let Some(d) = &s.data {
        for (k, v) in d {
            k.hash(&mut h);
            v.0.hash(&mut h);
        }
    }
    if let Some(d) = &s.string_data {
        d.hash(&mut h);
    }
    Observed {
        kind: ValuesKind::Secret,
        namespace: s.namespace().unwrap_or_default(),
        name: s.name_any(),
        uid: s.uid().unwrap_or_default(),
        hash: h.finish(),
    }
}

fn observe_config_map(c: &ConfigMap) -> Observed {
    let mut h = DefaultHasher::new();
    c.data.hash(&mut h);
    if let Some(d) = &c.binary_data {
        for (k, v) in d {
            k.hash(&mut h);
            v.0.hash(&mut h);
        }
    }
    Observed {
        kind: ValuesKind::ConfigMap,
        namespace: c.namespace().unwrap_or_default(),
        name: c.name_any(),
        uid: c.uid().unwrap_or_default(),
        hash: h.finish(),
    }
}

/// The instances of `instances` that read `o` (module rules, “Watch”).
pub fn readers(
    instances: &[std::sync::Arc<ModuleInstance>],
    kind: ValuesKind,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<ModuleInstance>> {
    instances
        .iter()
        .filter(|mi| mi.namespace().as_deref() == Some(namespace))
        .filter(|mi| {
            mi.spec
                .values_from
                .iter()
                .any(|r| r.kind == kind && r.name == name)
        })
        .map(|mi| ObjectRef::from_obj(mi.as_ref()))
        .collect()
}

/// One watch's changed objects (module rules, “Watch”).
fn changes<K>(
    client: &kube::Client,
    selector: &str,
    observe: fn(&K) -> Observed,
) -> impl Stream<Item = Observed> + Send + 'static
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let mut seen = Seen::default();
    let mut failing = false;
    let kind = K::kind(&()).into_owned();
    watcher(
        Api::<K>::all(client.clone()),
        watcher::Config::default().labels(selector),
    )
    .default_backoff()
    .filter_map(move |ev| {
        future::ready(match ev {
            Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                failing = false;
                let ob = observe(&o);
                seen.changed(&ob.uid, ob.hash).then_some(ob)
            }
            Ok(watcher::Event::Delete(o)) => {
                let ob = observe(&o);
                seen.deleted(&ob.uid);
                Some(ob)
            }
            Ok(_) => None,
            Err(e) if failing => {
                tracing::debug!(kind = %kind, error = %e, "valuesFrom watch still failing");
                None
            }
            Err(e) => {
                failing = true;
                tracing::warn!(kind = %kind, error = %e, "valuesFrom watch failed (retrying with backoff): until it runs, changes of labelled objects are seen at the next reconcile");
                None
            }
        })
    })
}

/// The instances to reconcile because an object their `valuesFrom` names changed (module rules,
/// “Watch”); runs until dropped.
pub fn triggers(
    client: &kube::Client,
    selector: &str,
    instances: Store<ModuleInstance>,
) -> impl Stream<Item = ObjectRef<ModuleInstance>> + Send + 'static {
    let secrets = changes::<Secret>(client, selector, observe_secret).boxed();
    let config_maps = changes::<ConfigMap>(client, selector, observe_config_map).boxed();
    stream::select(secrets, config_maps)
        .flat_map(move |o| stream::iter(readers(&instances.state(), o.kind, &o.namespace, &o.name)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crds::values_from::ValuesReference;

    #[test]
    fn an_object_change_names_the_instances_of_its_namespace_that_read_it() {
        let mi = |ns: &str, name: &str, kind: ValuesKind, object: &str| {
            let mut mi = ModuleInstance::new(name, Default::default());
            mi.metadata.namespace = Some(ns.into());
            mi.spec.values_from = vec![ValuesReference {
                kind,
                name: object.into(),
                namespace: None,
                values_key: None,
                target_path: None,
                optional: None,
            }];
            std::sync::Arc::new(mi)
        };
        let all = vec![
            mi("a", "web", ValuesKind::Secret, "creds"),
            mi("a", "api", ValuesKind::ConfigMap, "creds"),
            mi("b", "web", ValuesKind::Secret, "creds"),
        ];
        let got = readers(&all, ValuesKind::Secret, "a", "creds");
        assert_eq!(got, vec![ObjectRef::new("web").within("a")]);
        let mut seen = Seen::default();
        assert!(seen.changed("u1", 1), "new");
        assert!(!seen.changed("u1", 1), "same data");
        assert!(seen.changed("u1", 2), "changed data");
    }

    #[test]
    fn a_failure_message_loses_the_registered_values() {
        let mut r = Redactor::default();
        r.add("canary-value-9");
        let f = Failure::stalled(
            reasons::RESOLUTION_FAILED,
            actions::RENDER,
            "conflicting values \"canary-value-9\" and int".into(),
        );
        let Err(Halt::Failed(f)) = redact_end(&r, Err(f.into())) else {
            panic!("not a failure")
        };
        assert_eq!(f.message, "conflicting values \"[redacted]\" and int");
    }
}
