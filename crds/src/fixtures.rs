//! Fixture builders on the CRD types, for tests in every crate (controller-rs style:
//! `Platform::test().with_catalog(..)`). Builders only fill data; they do no I/O and never panic.
//!
//! Defaults: the Platform is `cluster` of type `kubernetes` subscribing `opmodel.dev/catalogs/opm@v2` at
//! `2.0.0`; the claim is `team-a.k8up` for `opmodel.dev/catalogs/k8up@v1` at `1.0.0` providing one
//! contract; the ModuleInstance is `team-a/web` of `opmodel.dev/modules/web@v0` at `v0.1.0`; the
//! ModulePackage is `team-a/pkg` from OCIRepository `team-a/src`, path `./app`. All at generation 1.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::common::{Inventory, InventoryEntry};
use crate::module_instance::{ModuleInstance, ModuleInstanceSpec, ModuleRef};
use crate::module_package::{ModulePackage, ModulePackageSpec, SourceRef};
use crate::platform::{Platform, PlatformSpec, RegistryEntry, SkewPolicy};
use crate::transformer_registration::{
    ProviderRef, TransformerRegistration, TransformerRegistrationSpec,
};

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        generation: Some(1),
        uid: Some(format!("00000000-0000-4000-8000-{:012x}", fnv(name))),
        ..ObjectMeta::default()
    }
}

/// A small deterministic hash so fixture uids differ per name.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) & 0xffff_ffff_ffff
}

impl Platform {
    /// The default test Platform (see the module doc).
    pub fn test() -> Self {
        let mut registry = BTreeMap::new();
        registry.insert(
            "opmodel.dev/catalogs/opm@v2".to_owned(),
            RegistryEntry {
                enable: None,
                version: "2.0.0".to_owned(),
            },
        );
        Platform {
            metadata: meta(crate::PLATFORM_NAME, None),
            spec: PlatformSpec {
                r#type: "kubernetes".to_owned(),
                registry,
                skew_policy: None,
                verify: None,
            },
            status: None,
        }
    }

    /// Requires cosign signatures with the public keys of the Secret `secret` (operator
    /// namespace).
    #[must_use]
    pub fn with_verify(mut self, secret: &str) -> Self {
        self.spec.verify = Some(crate::verify::Verify {
            provider: crate::verify::VerifyProvider::Cosign,
            secret_ref: crate::verify::SecretRef {
                name: secret.to_owned(),
            },
        });
        self
    }

    /// Adds (or replaces) a registry entry.
    #[must_use]
    pub fn with_catalog(mut self, path: &str, version: &str, enable: Option<bool>) -> Self {
        self.spec.registry.insert(
            path.to_owned(),
            RegistryEntry {
                enable,
                version: version.to_owned(),
            },
        );
        self
    }

    /// Removes every registry entry.
    #[must_use]
    pub fn without_catalogs(mut self) -> Self {
        self.spec.registry.clear();
        self
    }

    /// Sets the skew policy.
    #[must_use]
    pub fn with_skew_policy(mut self, policy: SkewPolicy) -> Self {
        self.spec.skew_policy = Some(policy);
        self
    }

    /// Sets metadata.name (to build the refused non-singleton).
    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.metadata.name = Some(name.to_owned());
        self
    }

    /// Sets metadata.generation.
    #[must_use]
    pub fn with_generation(mut self, generation: i64) -> Self {
        self.metadata.generation = Some(generation);
        self
    }
}

impl TransformerRegistration {
    /// The default test claim (see the module doc).
    pub fn test() -> Self {
        Self::for_provider("team-a", "k8up", "opmodel.dev/catalogs/k8up@v1", "1.0.0")
    }

    /// A claim stamped by ModuleInstance `namespace/name` for `catalog` at `version`, named
    /// `<namespace>.<name>`, providing one contract under the catalog's host.
    pub fn for_provider(namespace: &str, name: &str, catalog: &str, version: &str) -> Self {
        TransformerRegistration {
            metadata: meta(&format!("{namespace}.{name}"), None),
            spec: TransformerRegistrationSpec {
                catalog: catalog.to_owned(),
                version: version.to_owned(),
                provides: vec!["opmodel.dev/contracts/backup/schedule@v1".to_owned()],
                provider_ref: ProviderRef {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                },
            },
            status: None,
        }
    }

    /// Replaces `spec.provides`.
    #[must_use]
    pub fn with_provides(mut self, provides: &[&str]) -> Self {
        self.spec.provides = provides.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Adds the `opmodel.dev/dependents` finalizer.
    #[must_use]
    pub fn with_dependents_finalizer(mut self) -> Self {
        self.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(crate::FINALIZER_DEPENDENTS.to_owned());
        self
    }

    /// Marks the claim accepted and (optionally) active.
    #[must_use]
    pub fn accepted(mut self, active: bool) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        status.accepted = true;
        status.active = active;
        self
    }
}

impl ModuleInstance {
    /// The default test ModuleInstance (see the module doc).
    pub fn test() -> Self {
        ModuleInstance {
            metadata: meta("web", Some("team-a")),
            spec: ModuleInstanceSpec {
                module: ModuleRef {
                    path: "opmodel.dev/modules/web@v0".to_owned(),
                    version: "v0.1.0".to_owned(),
                },
                ..ModuleInstanceSpec::default()
            },
            status: None,
        }
    }

    /// Requires the module to be signed with the public keys of the Secret `secret` (the
    /// instance's namespace).
    #[must_use]
    pub fn with_verify(mut self, secret: &str) -> Self {
        self.spec.verify = Some(crate::verify::Verify {
            provider: crate::verify::VerifyProvider::Cosign,
            secret_ref: crate::verify::SecretRef {
                name: secret.to_owned(),
            },
        });
        self
    }

    /// Sets name and namespace.
    #[must_use]
    pub fn named(mut self, namespace: &str, name: &str) -> Self {
        self.metadata = ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..self.metadata
        };
        self
    }

    /// Sets the module path and version.
    #[must_use]
    pub fn with_module(mut self, path: &str, version: &str) -> Self {
        self.spec.module = ModuleRef {
            path: path.to_owned(),
            version: version.to_owned(),
        };
        self
    }

    /// Sets `spec.values`.
    #[must_use]
    pub fn with_values(mut self, values: serde_json::Value) -> Self {
        self.spec.values = Some(values);
        self
    }

    /// Sets `spec.prune`.
    #[must_use]
    pub fn with_prune(mut self, prune: bool) -> Self {
        self.spec.prune = Some(prune);
        self
    }

    /// Sets `spec.suspend`.
    #[must_use]
    pub fn suspended(mut self) -> Self {
        self.spec.suspend = Some(true);
        self
    }

    /// Adds the `opmodel.dev/cleanup` finalizer.
    #[must_use]
    pub fn finalized(mut self) -> Self {
        self.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(crate::FINALIZER_CLEANUP.to_owned());
        self
    }

    /// Marks the instance Ready=True (`ReconciliationSucceeded`) at its generation.
    #[must_use]
    pub fn ready(mut self, now: &Time) -> Self {
        let generation = self.metadata.generation;
        let status = self.status.get_or_insert_with(Default::default);
        status.observed_generation = generation;
        crate::conditions::mark_ready(&mut status.conditions, "", "Applied", generation, now);
        self
    }

    /// Sets `status.requiredContracts` (sorted and de-duplicated, as a render reports them).
    #[must_use]
    pub fn with_required_contracts(mut self, contracts: &[&str]) -> Self {
        let mut c: Vec<String> = contracts.iter().map(|s| (*s).to_owned()).collect();
        c.sort();
        c.dedup();
        self.status
            .get_or_insert_with(Default::default)
            .required_contracts = c;
        self
    }

    /// Sets `status.inventory` to the given entries (revision 1).
    #[must_use]
    pub fn with_inventory(mut self, entries: Vec<InventoryEntry>) -> Self {
        let count = i64::try_from(entries.len()).unwrap_or(i64::MAX);
        self.status
            .get_or_insert_with(Default::default)
            .reconcile
            .inventory = Some(Inventory {
            revision: 1,
            digest: String::new(),
            count,
            entries,
            cluster: None,
        });
        self
    }

    /// Adds to the inventory the entry a provider's rendered TransformerRegistration has (docs/design/operator.md §4.1 step 6).
    #[must_use]
    pub fn owning_claim(self) -> Self {
        let ns = self.metadata.namespace.clone().unwrap_or_default();
        let name = self.metadata.name.clone().unwrap_or_default();
        let entry = InventoryEntry {
            group: Some(crate::GROUP.to_owned()),
            kind: "TransformerRegistration".to_owned(),
            namespace: None,
            name: format!("{ns}.{name}"),
            v: Some(crate::VERSION.to_owned()),
            component: None,
        };
        let mut entries = self
            .status
            .as_ref()
            .and_then(|s| s.reconcile.inventory.as_ref())
            .map(|i| i.entries.clone())
            .unwrap_or_default();
        entries.push(entry);
        self.with_inventory(entries)
    }
}

impl ModulePackage {
    /// The default test ModulePackage (see the module doc).
    pub fn test() -> Self {
        ModulePackage {
            metadata: meta("pkg", Some("team-a")),
            spec: ModulePackageSpec {
                source_ref: SourceRef {
                    api_version: None,
                    kind: "OCIRepository".to_owned(),
                    name: "src".to_owned(),
                    namespace: None,
                },
                path: "./app".to_owned(),
                ..ModulePackageSpec::default()
            },
            status: None,
        }
    }

    /// Sets the source kind and name.
    #[must_use]
    pub fn with_source(mut self, kind: &str, name: &str) -> Self {
        self.spec.source_ref.kind = kind.to_owned();
        self.spec.source_ref.name = name.to_owned();
        self
    }

    /// Adds the `opmodel.dev/cleanup` finalizer.
    #[must_use]
    pub fn finalized(mut self) -> Self {
        self.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(crate::FINALIZER_CLEANUP.to_owned());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_round_trip_through_json() {
        let p = Platform::test().with_skew_policy(SkewPolicy::Refuse);
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["apiVersion"], "opmodel.dev/v1alpha1");
        assert_eq!(v["kind"], "Platform");
        assert_eq!(v["spec"]["skewPolicy"], "Refuse");
        assert_eq!(
            v["spec"]["registry"]["opmodel.dev/catalogs/opm@v2"]["version"],
            "2.0.0"
        );
        let back: Platform = serde_json::from_value(v).unwrap();
        assert_eq!(back.spec, p.spec);

        let t = TransformerRegistration::test()
            .with_dependents_finalizer()
            .accepted(true);
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["metadata"]["name"], "team-a.k8up");
        assert_eq!(v["spec"]["providerRef"]["namespace"], "team-a");
        assert_eq!(v["status"]["active"], true);

        let mi = ModuleInstance::test()
            .with_values(serde_json::json!({"replicas": 2}))
            .finalized();
        let v = serde_json::to_value(&mi).unwrap();
        assert_eq!(v["spec"]["module"]["path"], "opmodel.dev/modules/web@v0");
        assert_eq!(v["spec"]["values"]["replicas"], 2);
        assert_eq!(v["metadata"]["finalizers"][0], crate::FINALIZER_CLEANUP);

        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let provider = ModuleInstance::test()
            .named("team-a", "k8up")
            .ready(&now)
            .owning_claim();
        let st = provider.status.as_ref().unwrap();
        assert!(crate::conditions::is_true(
            &st.conditions,
            crate::conditions::types::READY
        ));
        let inv = st.reconcile.inventory.as_ref().unwrap();
        assert_eq!(
            (inv.count, inv.entries[0].name.as_str()),
            (1, "team-a.k8up")
        );
        let demanding = ModuleInstance::test().with_required_contracts(&["b@v1", "a@v1", "b@v1"]);
        assert_eq!(
            demanding.status.unwrap().required_contracts,
            ["a@v1", "b@v1"]
        );

        let mp = ModulePackage::test().with_source("GitRepository", "repo");
        let v = serde_json::to_value(&mp).unwrap();
        assert_eq!(v["spec"]["sourceRef"]["kind"], "GitRepository");
    }

    #[test]
    fn legacy_registry_entry_without_version_reads_as_empty() {
        let p: Platform = serde_json::from_value(serde_json::json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "Platform",
            "metadata": {"name": "cluster"},
            "spec": {"type": "kubernetes", "registry": {"opmodel.dev/catalogs/opm@v2": {"enable": false}}}
        }))
        .unwrap();
        let entry = &p.spec.registry["opmodel.dev/catalogs/opm@v2"];
        assert_eq!(entry.version, "");
        assert!(!entry.enabled());
    }
}
