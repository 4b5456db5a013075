//! The built-in resources, computed from `k8s-openapi`'s generated types (the crate's `latest`
//! feature: Kubernetes 1.37, the version `/version` reports) at first use, once per process.
//!
//! Rules implemented:
//! - Served: every resource of a GA group version (`v1`, `v2`, ...) that `k8s-openapi` knows,
//!   listed below by type; alpha and beta group versions are off by default on a real
//!   apiserver (since 1.24 new beta APIs are, and the older betas were removed), so they are
//!   not served. The test `builtin_table_matches_k8s_openapi` reads `k8s-openapi`'s sources and
//!   fails when a GA resource of the version is missing here (or one listed here is gone).
//! - From each type: group, version, kind, plural (`URL_PATH_SEGMENT`), scope
//!   (`NamespaceResourceScope` or `ClusterResourceScope`), whether it lists
//!   (`ListableResource`: all eight verbs; otherwise a review-style `create`-only resource),
//!   whether it has a `/status` subresource (a listable kind whose schema has a `status`
//!   property), and its OpenAPI definitions (`schemars`, the schema of the upstream OpenAPI
//!   document, named as upstream: `io.k8s.api.apps.v1.Deployment`).
//! - A resource served at two GA versions (HorizontalPodAutoscaler: `autoscaling/v2` and
//!   `v1`) is one resource with the newer version preferred.
//! - What the OpenAPI document does not say is a small hand table, from the upstream REST
//!   storage of each resource (`pkg/registry/<group>/<resource>/storage/storage.go`:
//!   `ShortNames()`, `Categories()`; `pkg/registry/core/namespace`, `componentstatus` for
//!   their verbs; `/scale` from the registries that define it): short names, the `all` and
//!   `api-extensions` categories, the verb exceptions and the `/scale` subresources.
//! - One correction of `k8s-openapi`'s schemas towards the upstream document: the apiextensions
//!   `JSON` type (any value) has no `type` (k8s-openapi says `object`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::schemars::{self, JsonSchema};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};
use serde_json::{Map, Value};

/// One built-in resource at one version, as the types describe it.
#[derive(Debug, Clone)]
pub struct Builtin {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Lists and watches (all verbs); `false` for create-only review resources.
    pub listable: bool,
    /// The upstream definition name (`io.k8s.api.apps.v1.Deployment`).
    pub definition: String,
    /// Whether the kind has a `/status` subresource (module rules).
    pub status: bool,
}

/// The scope of a `k8s-openapi` resource type.
trait Scope {
    const NAMESPACED: bool;
}

impl Scope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// What the type generator collects: the rows and every definition reached.
struct Collected {
    rows: Vec<Builtin>,
    generator: schemars::SchemaGenerator,
}

impl Collected {
    fn add<T>(&mut self, listable: bool)
    where
        T: Resource + JsonSchema,
        T::Scope: Scope,
    {
        let definition = T::schema_name().into_owned();
        let schema = self.generator.subschema_for::<T>();
        let status = listable
            && self
                .generator
                .definitions()
                .get(&definition)
                .or(Some(schema.as_value()))
                .and_then(|d| d.get("properties"))
                .is_some_and(|p| p.get("status").is_some());
        self.rows.push(Builtin {
            group: T::GROUP,
            version: T::VERSION,
            kind: T::KIND,
            plural: T::URL_PATH_SEGMENT,
            namespaced: <T::Scope as Scope>::NAMESPACED,
            listable,
            definition,
            status,
        });
    }
}

/// Lists resource types: `listable: [types...]` and `create_only: [types...]`.
macro_rules! collect {
    ($c:ident; listable: [$($l:ty),* $(,)?]; create_only: [$($r:ty),* $(,)?]) => {{
        $( $c.add::<$l>(true); )*
        $( $c.add::<$r>(false); )*
    }};
}

/// The table and the OpenAPI definitions (v2 form: `$ref`s to `#/definitions/`).
pub struct Table {
    /// Every served (group, version) resource.
    pub rows: Vec<Builtin>,
    /// Every definition the built-in kinds reach, by upstream name.
    pub definitions: Map<String, Value>,
}

/// The table, computed once per process.
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(compute)
}

fn compute() -> Table {
    use k8s_openapi::api as a;
    let mut settings = schemars::generate::SchemaSettings::draft07();
    // The OpenAPI v2 shape: refs into `#/definitions`, `$ref` siblings kept, no meta schema.
    settings.definitions_path = "/definitions".into();
    settings.meta_schema = None;
    settings.transforms = Vec::new();
    let mut c = Collected {
        rows: Vec::new(),
        generator: schemars::SchemaGenerator::new(settings),
    };
    collect!(c;
        listable: [
            a::admissionregistration::v1::MutatingAdmissionPolicy,
            a::admissionregistration::v1::MutatingAdmissionPolicyBinding,
            a::admissionregistration::v1::MutatingWebhookConfiguration,
            a::admissionregistration::v1::ValidatingAdmissionPolicy,
            a::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
            a::admissionregistration::v1::ValidatingWebhookConfiguration,
            a::apps::v1::ControllerRevision,
            a::apps::v1::DaemonSet,
            a::apps::v1::Deployment,
            a::apps::v1::ReplicaSet,
            a::apps::v1::StatefulSet,
            a::autoscaling::v2::HorizontalPodAutoscaler,
            a::autoscaling::v1::HorizontalPodAutoscaler,
            a::batch::v1::CronJob,
            a::batch::v1::Job,
            a::certificates::v1::CertificateSigningRequest,
            a::certificates::v1::ClusterTrustBundle,
            a::certificates::v1::PodCertificateRequest,
            a::coordination::v1::Lease,
            a::core::v1::ComponentStatus,
            a::core::v1::ConfigMap,
            a::core::v1::Endpoints,
            a::core::v1::Event,
            a::core::v1::LimitRange,
            a::core::v1::Namespace,
            a::core::v1::Node,
            a::core::v1::PersistentVolumeClaim,
            a::core::v1::PersistentVolume,
            a::core::v1::Pod,
            a::core::v1::PodTemplate,
            a::core::v1::ReplicationController,
            a::core::v1::ResourceQuota,
            a::core::v1::Secret,
            a::core::v1::ServiceAccount,
            a::core::v1::Service,
            a::discovery::v1::EndpointSlice,
            a::events::v1::Event,
            a::flowcontrol::v1::FlowSchema,
            a::flowcontrol::v1::PriorityLevelConfiguration,
            a::networking::v1::IngressClass,
            a::networking::v1::Ingress,
            a::networking::v1::IPAddress,
            a::networking::v1::NetworkPolicy,
            a::networking::v1::ServiceCIDR,
            a::node::v1::RuntimeClass,
            a::policy::v1::PodDisruptionBudget,
            a::rbac::v1::ClusterRoleBinding,
            a::rbac::v1::ClusterRole,
            a::rbac::v1::RoleBinding,
            a::rbac::v1::Role,
            a::resource::v1::DeviceClass,
            a::resource::v1::DeviceTaintRule,
            a::resource::v1::ResourceClaim,
            a::resource::v1::ResourceClaimTemplate,
            a::resource::v1::ResourceSlice,
            a::scheduling::v1::PriorityClass,
            a::storage::v1::CSIDriver,
            a::storage::v1::CSINode,
            a::storage::v1::CSIStorageCapacity,
            a::storage::v1::StorageClass,
            a::storage::v1::VolumeAttachment,
            a::storage::v1::VolumeAttributesClass,
            a::storagemigration::v1::StorageVersionMigration,
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
            k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        ];
        create_only: [
            a::authentication::v1::SelfSubjectReview,
            a::authentication::v1::TokenReview,
            a::authorization::v1::LocalSubjectAccessReview,
            a::authorization::v1::SelfSubjectAccessReview,
            a::authorization::v1::SelfSubjectRulesReview,
            a::authorization::v1::SubjectAccessReview,
            a::core::v1::Binding,
        ]
    );
    let mut definitions = c.generator.take_definitions(true);
    // Upstream's document gives `JSON` (any JSON value: CRD defaults, enums, examples) no type;
    // k8s-openapi's schema says object, which would make kubectl refuse a CRD with a default.
    if let Some(d) = definitions
        .get_mut("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON")
        .and_then(Value::as_object_mut)
    {
        d.remove("type");
    }
    Table {
        rows: c.rows,
        definitions,
    }
}

/// Short names (upstream `ShortNames()`).
pub const SHORT_NAMES: &[(&str, &str, &[&str])] = &[
    ("", "componentstatuses", &["cs"]),
    ("", "configmaps", &["cm"]),
    ("", "endpoints", &["ep"]),
    ("", "events", &["ev"]),
    ("", "limitranges", &["limits"]),
    ("", "namespaces", &["ns"]),
    ("", "nodes", &["no"]),
    ("", "persistentvolumeclaims", &["pvc"]),
    ("", "persistentvolumes", &["pv"]),
    ("", "pods", &["po"]),
    ("", "replicationcontrollers", &["rc"]),
    ("", "resourcequotas", &["quota"]),
    ("", "serviceaccounts", &["sa"]),
    ("", "services", &["svc"]),
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["crd", "crds"],
    ),
    ("apps", "daemonsets", &["ds"]),
    ("apps", "deployments", &["deploy"]),
    ("apps", "replicasets", &["rs"]),
    ("apps", "statefulsets", &["sts"]),
    ("autoscaling", "horizontalpodautoscalers", &["hpa"]),
    ("batch", "cronjobs", &["cj"]),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &["csr"],
    ),
    ("events.k8s.io", "events", &["ev"]),
    ("networking.k8s.io", "ingresses", &["ing"]),
    ("networking.k8s.io", "networkpolicies", &["netpol"]),
    ("policy", "poddisruptionbudgets", &["pdb"]),
    ("scheduling.k8s.io", "priorityclasses", &["pc"]),
    ("storage.k8s.io", "storageclasses", &["sc"]),
    ("storage.k8s.io", "volumeattributesclasses", &["vac"]),
];

/// Categories (upstream `Categories()`): `all` (what `kubectl get all` lists) and
/// `api-extensions`.
pub const CATEGORIES: &[(&str, &str, &str)] = &[
    ("", "pods", "all"),
    ("", "replicationcontrollers", "all"),
    ("", "services", "all"),
    ("apps", "daemonsets", "all"),
    ("apps", "deployments", "all"),
    ("apps", "replicasets", "all"),
    ("apps", "statefulsets", "all"),
    ("autoscaling", "horizontalpodautoscalers", "all"),
    ("batch", "cronjobs", "all"),
    ("batch", "jobs", "all"),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicies",
        "api-extensions",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
        "api-extensions",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "api-extensions",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        "api-extensions",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        "api-extensions",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "api-extensions",
    ),
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "api-extensions",
    ),
    ("apiregistration.k8s.io", "apiservices", "api-extensions"),
];

/// Verbs that differ from the eight of a listable resource.
pub const VERB_EXCEPTIONS: &[(&str, &str, &[&str])] = &[
    // A namespace is deleted through its finalizer, one at a time.
    (
        "",
        "namespaces",
        &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
    ),
    ("", "componentstatuses", &["get", "list"]),
];

/// The built-in resources with a `/scale` subresource.
pub const SCALABLE: &[(&str, &str)] = &[
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
];

/// Short names of a resource.
pub fn short_names(group: &str, plural: &str) -> Vec<String> {
    SHORT_NAMES
        .iter()
        .filter(|(g, p, _)| *g == group && *p == plural)
        .flat_map(|(_, _, s)| s.iter().map(|x| x.to_string()))
        .collect()
}

/// Categories of a resource.
pub fn categories(group: &str, plural: &str) -> Vec<String> {
    CATEGORIES
        .iter()
        .filter(|(g, p, _)| *g == group && *p == plural)
        .map(|(_, _, c)| c.to_string())
        .collect()
}

/// The rows grouped per (group, plural), versions in table order (preferred first).
pub fn by_resource() -> BTreeMap<(&'static str, &'static str), Vec<&'static Builtin>> {
    let mut out: BTreeMap<(&str, &str), Vec<&Builtin>> = BTreeMap::new();
    for row in &table().rows {
        out.entry((row.group, row.plural)).or_default().push(row);
    }
    out
}
