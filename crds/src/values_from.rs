//! `spec.valuesFrom` of a ModuleInstance (issue 40; helm-controller's `valuesFrom`): values read
//! from Secrets and ConfigMaps of the instance's own namespace.
//!
//! Rules (the reconciler and the render API implement them; this module holds the types):
//! - The references are merged in order, then `spec.values` on top: a later source wins per
//!   key, maps merge deeply, any other value (lists included) is replaced whole.
//! - `valuesKey` (default `values.yaml`) names the key of the object's data; its content is a
//!   YAML (or JSON) mapping, merged at the root. With `targetPath` the content is one value set
//!   at that path instead (Helm's `--set` path syntax: `a.b.c`, `list[0].name`, `a\.b` for a dot
//!   in a key; an unquoted `true`, `false`, `null` or integer is typed, a quoted one is a string).
//! - `optional: true` tolerates a missing object or key; a missing required one is not Ready.
//! - The object is read with the identity the instance applies as, in the instance's namespace
//!   only: a `namespace` naming another one is refused.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The key read when `valuesKey` is unset.
pub const DEFAULT_VALUES_KEY: &str = "values.yaml";

/// The kind of object values are read from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ValuesKind {
    /// A core/v1 Secret (`data`, base64; `stringData` as the server folds it).
    Secret,
    /// A core/v1 ConfigMap (`data`, then `binaryData`).
    ConfigMap,
}

impl ValuesKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ValuesKind::Secret => "Secret",
            ValuesKind::ConfigMap => "ConfigMap",
        }
    }
}

/// One source of values.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValuesReference {
    /// `Secret` or `ConfigMap`.
    pub kind: ValuesKind,
    /// Name of the object, in the instance's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Must be empty or the instance's own namespace: another namespace is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The data key holding the values (default `values.yaml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = r"^[\-._a-zA-Z0-9]+$"))]
    pub values_key: Option<String>,
    /// Set the key's content as the one value at this path (Helm's `--set` syntax: `a.b`,
    /// `a[0].b`, `a\.b`) instead of merging it as a mapping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 250),
        regex(pattern = r"^([a-zA-Z0-9_\-.\\/]|\[[0-9]{1,5}\])+$")
    )]
    pub target_path: Option<String>,
    /// Tolerate a missing object or key (default false: it is an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

impl ValuesReference {
    /// The data key read.
    pub fn key(&self) -> &str {
        self.values_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .unwrap_or(DEFAULT_VALUES_KEY)
    }

    /// Whether a missing object or key is tolerated.
    pub fn is_optional(&self) -> bool {
        self.optional == Some(true)
    }
}
