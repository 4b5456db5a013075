//! Types shared by the ModuleInstance and ModulePackage statuses and specs (docs/design/operator.md §1.1, §1.2,
//! §6): rollout options, failure counters, the inventory and the history.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The apply strategy (only `Apply`, server-side apply, exists).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RolloutStrategy {
    /// Staged server-side apply.
    #[default]
    Apply,
}

/// How rendered objects are rolled out.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// The apply strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RolloutStrategy>,
    /// Recreate objects whose update is refused (field ownership is always forced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_conflicts: Option<bool>,
    /// How long the applied objects may take to become ready (kstatus Current) after an apply
    /// before Ready=False `HealthCheckFailed` (Go duration; unset: the operator's
    /// `--health-timeout`, 5m; `0`: Ready once applied, no health check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Consecutive failure counters (§6.6).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureCounters {
    /// Failed reconciles.
    #[serde(default)]
    pub reconcile: i64,
    /// Failed applies.
    #[serde(default)]
    pub apply: i64,
    /// Failed prunes.
    #[serde(default)]
    pub prune: i64,
    /// Failed drift checks.
    #[serde(default)]
    pub drift: i64,
}

/// One object the instance owns. Identity for pruning is group+kind+namespace+name.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct InventoryEntry {
    /// API group (empty/absent for the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kind.
    pub kind: String,
    /// Namespace (absent for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// API version the object was applied at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v: Option<String>,
    /// The component that rendered it (label `component.opmodel.dev/name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
}

/// The authoritative set of applied objects, replaced only after a fully successful apply (§6.1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// Incremented on every replacement (1 first).
    #[serde(default)]
    pub revision: i64,
    /// Digest of the entries.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// Number of entries.
    #[serde(default)]
    pub count: i64,
    /// The entries.
    #[serde(default)]
    pub entries: Vec<InventoryEntry>,
    /// The API server URL of the remote cluster the entries live on (`spec.kubeConfig`);
    /// absent: the operator's own cluster. Entries of another cluster than the current target
    /// are never pruned on the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// One reconcile attempt in the history (at most 10, newest first).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// Monotonic sequence number.
    #[serde(default)]
    pub sequence: i64,
    /// The action (`reconcile`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub action: String,
    /// The phase reached or failed in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// When the attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the attempt finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Source digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_digest: String,
    /// Config (values) digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config_digest: String,
    /// Render digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub render_digest: String,
    /// Inventory digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub inventory_digest: String,
    /// Inventory size.
    #[serde(default)]
    pub inventory_count: i64,
    /// Failure or summary message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The inputs of the last applied render (reserved, not written yet).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastAppliedInputs {
    /// Digest of the inputs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// When they were rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered_at: Option<Time>,
}

/// Status fields common to ModuleInstance and ModulePackage (flattened into both).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileStatus {
    /// `lastAttemptedAction` (`reconcile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_action: Option<String>,
    /// When the last attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_at: Option<Time>,
    /// Duration of the last attempt (a Go duration string such as `1.5s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_duration: Option<String>,
    /// Source digest of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_source_digest: Option<String>,
    /// Config digest of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_config_digest: Option<String>,
    /// Render digest of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_render_digest: Option<String>,
    /// When the last successful apply finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_at: Option<Time>,
    /// Source digest of the last successful apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_source_digest: Option<String>,
    /// Config digest of the last successful apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config_digest: Option<String>,
    /// Render digest of the last successful apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_render_digest: Option<String>,
    /// Consecutive failure counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_counters: Option<FailureCounters>,
    /// The owned objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    /// Reconcile history (≤ 10, newest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub history: Vec<HistoryEntry>,
    /// When the next retry is scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<Time>,
    /// The value of the `reconcile.fluxcd.io/requestedAt` annotation the last reconcile
    /// handled (Flux's `lastHandledReconcileAt`): a client that set a new value sees its request
    /// was acted on when this equals it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    /// Version of the last applied module (reserved, not written yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_version: Option<String>,
    /// Inputs of the last applied render (reserved, not written yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_inputs: Option<LastAppliedInputs>,
}

/// Schema for free-form JSON (`x-kubernetes-preserve-unknown-fields`).
pub fn preserve_unknown_fields(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
