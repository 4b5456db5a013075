//! `spec.dependsOn` of ModuleInstance and ModulePackage (issue 40; Flux's `dependsOn` with
//! `readyExpr`): objects of the same kind that must be ready before this one is reconciled.
//!
//! Rules (implemented by `controller::depends_on`; this module holds the type): a dependency is
//! ready when it is Ready=True at its current generation, or, with `readyExpr`, when that CEL
//! expression holds (`dep`: the dependency object, `self`: the dependent).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One dependency.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependsOn {
    /// Name of the dependency.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the dependency (empty: the dependent's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A CEL expression over the dependency (`dep`) and the dependent (`self`) that replaces the
    /// Ready check, e.g. `dep.status.conditions.exists(c, c.type == 'Ready')`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_expr: Option<String>,
}
