//! Custom health checks in CEL (`spec.healthCheckExprs`, the shape of Flux 2.5's
//! kustomize-controller `healthCheckExprs`): per kind, the expressions that say whether a live
//! object is in progress, failed or current, used instead of the built-in kstatus rules for that
//! kind. The semantics (binding, order, errors) are stated where they are evaluated
//! (`opm-operator`'s `apply::health::cel`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The CEL expressions judging the health of one kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckExpr {
    /// The kind's API version, `group/version` (`v1` for the core group). Only the group is
    /// compared, so every served version of the kind is judged by these expressions.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// The kind, e.g. `Certificate`.
    #[schemars(length(min = 1))]
    pub kind: String,
    /// CEL: true when the object is ready (kstatus `Current`). Evaluated last.
    #[schemars(length(min = 1))]
    pub current: String,
    /// CEL: true while the object is still progressing. Evaluated first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<String>,
    /// CEL: true when the object has failed. Evaluated after `inProgress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}
