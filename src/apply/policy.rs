//! Per-object apply policies: the `opm.dev/*` annotations a module puts on a rendered object
//! (Flux's `kustomize.toolkit.fluxcd.io/{ssa,force,prune}`, Argo CD's sync options), and the one
//! place their values are read ([`Policy::of`]).
//!
//! | annotation | values (default first) | apply | inventory | prune (stale, and on deletion) | drift | health |
//! |---|---|---|---|---|---|---|
//! | `opm.dev/apply` | `Always` | server-side apply, every reconcile that applies | recorded | pruned when stale (with `spec.prune`) and on deletion | checked | checked |
//! | `opm.dev/apply` | `IfNotPresent` | created when absent (so re-created at the next apply after a deletion); an existing object is read, then left as it is: no dry-run, no update, no ownership check | recorded | pruned as any object (Flux's rule: only `opm.dev/prune: disabled` keeps it) | only a missing object counts | checked |
//! | `opm.dev/apply` | `Ignore` | never applied, nor previewed by the render API | not recorded | never: an entry recorded before it was ignored is not stale and is dropped from the inventory | not checked | not checked |
//! | `opm.dev/force` | `disabled`, `enabled` | `enabled`: an update refused for immutable fields deletes and re-creates the object (`spec.rollout.forceConflicts` for this object alone); a Namespace, CRD or PersistentVolumeClaim, and a live object the prune guard keeps, are still never re-created | – | – | – | – |
//! | `opm.dev/prune` | `enabled`, `disabled` | – | recorded | `disabled`: never deleted, when stale nor on deletion (read on the live object) | – | – |
//! | `opm.dev/wait` | `enabled`, `disabled` | – | – | – | – | `disabled`: not health-checked, not followed after Ready |
//!
//! Rules:
//! - Values are exact (case-sensitive). A value outside the table is [`Error::InvalidPolicy`]
//!   naming the object, the annotation and the allowed values: the whole apply is refused before
//!   anything is written (the reconciler stalls `ApplyFailed`), never silently ignored.
//! - `Ignore` wins over the others; `IfNotPresent` makes `opm.dev/force` moot (nothing existing is
//!   updated).
//! - The readers of live objects (the prune guard, the health watch after Ready) honour exactly
//!   `disabled`; a live object carries what a render validated here, or a person's edit, which is
//!   not an apply and so not refused.

use std::collections::HashSet;

use crds::common::InventoryEntry;
use serde_json::Value;

use super::error::Error;
use super::object::ObjectRef;
use super::prune::PRUNE_ANNOTATION;
use super::WAIT_ANNOTATION;

/// How an object is applied (`opm.dev/apply`).
pub const APPLY_ANNOTATION: &str = "opm.dev/apply";
/// Re-create on an immutable-field change (`opm.dev/force`).
pub const FORCE_ANNOTATION: &str = "opm.dev/force";

/// The values of [`APPLY_ANNOTATION`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApplyMode {
    /// Applied every time (the default).
    #[default]
    Always,
    /// Created when absent, never updated.
    IfNotPresent,
    /// Never applied, never pruned.
    Ignore,
}

/// The policy of one rendered object (module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `opm.dev/apply`.
    pub apply: ApplyMode,
    /// `opm.dev/force: enabled`.
    pub force: bool,
    /// Not `opm.dev/prune: disabled`.
    pub prune: bool,
    /// Not `opm.dev/wait: disabled`.
    pub wait: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            apply: ApplyMode::Always,
            force: false,
            prune: true,
            wait: true,
        }
    }
}

/// The value of annotation `key` on `o`, if it is a string.
pub fn annotation<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o.pointer("/metadata/annotations")?.get(key)?.as_str()
}

/// Whether `o` carries `key: disabled` exactly (the readers of live objects, module rules).
pub fn is_disabled(o: &Value, key: &str) -> bool {
    annotation(o, key) == Some("disabled")
}

impl Policy {
    /// The policy of the rendered object `o` (module rules): an unknown value is an error.
    pub fn of(o: &Value) -> Result<Policy, Error> {
        let Some(annotations) = o
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        else {
            return Ok(Policy::default());
        };
        if !annotations.keys().any(|k| k.starts_with("opm.dev/")) {
            return Ok(Policy::default());
        }
        let invalid = |annotation: &'static str, value: &str, allowed: &'static str| {
            let object = ObjectRef::of(o).map_or_else(|_| "object".to_owned(), |r| r.to_string());
            Error::InvalidPolicy {
                object,
                annotation,
                value: value.to_owned(),
                allowed,
            }
        };
        let get = |key: &str| {
            annotations
                .get(key)
                .map(|v| v.as_str().unwrap_or("<not a string>"))
        };
        let switch = |key: &'static str, default: bool| match get(key) {
            None => Ok(default),
            Some("enabled") => Ok(true),
            Some("disabled") => Ok(false),
            Some(v) => Err(invalid(key, v, "enabled, disabled")),
        };
        let apply = match get(APPLY_ANNOTATION) {
            None | Some("Always") => ApplyMode::Always,
            Some("IfNotPresent") => ApplyMode::IfNotPresent,
            Some("Ignore") => ApplyMode::Ignore,
            Some(v) => return Err(invalid(APPLY_ANNOTATION, v, "Always, IfNotPresent, Ignore")),
        };
        Ok(Policy {
            apply,
            force: switch(FORCE_ANNOTATION, false)?,
            prune: switch(PRUNE_ANNOTATION, true)?,
            wait: switch(WAIT_ANNOTATION, true)?,
        })
    }

    /// Whether the object is `opm.dev/apply: Ignore`.
    pub fn ignored(&self) -> bool {
        self.apply == ApplyMode::Ignore
    }
}

/// The identity an inventory entry and an object share (group, kind, namespace, name).
type Identity = (String, String, Option<String>, String);

fn identity_of(r: &ObjectRef) -> Identity {
    (
        r.group.clone(),
        r.kind.clone(),
        r.namespace.clone(),
        r.name.clone(),
    )
}

/// The identities of the `Ignore` objects of `objects` (empty for most renders: no allocation
/// beyond the empty set). An object with an unknown policy value is an error.
pub fn ignored(objects: &[Value]) -> Result<HashSet<Identity>, Error> {
    let mut out = HashSet::new();
    for o in objects {
        if Policy::of(o)?.ignored() {
            if let Ok(r) = ObjectRef::of(o) {
                out.insert(identity_of(&r));
            }
        }
    }
    Ok(out)
}

/// `entries` without those of `ignored` (module table: an ignored object is not recorded).
pub fn recorded(entries: &[InventoryEntry], ignored: &HashSet<Identity>) -> Vec<InventoryEntry> {
    if ignored.is_empty() {
        return entries.to_vec();
    }
    entries
        .iter()
        .filter(|e| !ignored.contains(&identity_of(&ObjectRef::of_entry(e))))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "pw", "namespace": "n", "annotations": annotations}})
    }

    #[test]
    fn every_value_of_the_table_parses_and_the_default_is_always() {
        assert_eq!(Policy::of(&object(json!({}))).unwrap(), Policy::default());
        assert_eq!(
            Policy::of(&json!({"kind": "X", "metadata": {"name": "x"}})).unwrap(),
            Policy::default()
        );
        let p = Policy::of(&object(json!({"opm.dev/apply": "IfNotPresent",
            "opm.dev/force": "enabled", "opm.dev/prune": "disabled", "opm.dev/wait": "disabled"})))
        .unwrap();
        assert_eq!(
            p,
            Policy {
                apply: ApplyMode::IfNotPresent,
                force: true,
                prune: false,
                wait: false
            }
        );
        assert!(Policy::of(&object(json!({"opm.dev/apply": "Ignore"})))
            .unwrap()
            .ignored());
        assert_eq!(
            Policy::of(&object(
                json!({"opm.dev/apply": "Always", "opm.dev/force": "disabled",
                "opm.dev/prune": "enabled", "opm.dev/wait": "enabled"})
            ))
            .unwrap(),
            Policy::default()
        );
        // Other annotations, ours included, are not policies.
        assert_eq!(
            Policy::of(&object(
                json!({"opm.dev/force-delete-orphan": "x", "a": "b"})
            ))
            .unwrap(),
            Policy::default()
        );
    }

    #[test]
    fn an_unknown_value_is_an_error_naming_the_object_and_the_allowed_values() {
        for (key, value, allowed) in [
            (
                "opm.dev/apply",
                "ifnotpresent",
                "Always, IfNotPresent, Ignore",
            ),
            ("opm.dev/force", "true", "enabled, disabled"),
            ("opm.dev/prune", "false", "enabled, disabled"),
            ("opm.dev/wait", "off", "enabled, disabled"),
        ] {
            let e = Policy::of(&object(json!({ key: value }))).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "Secret/n/pw: annotation {key} has the unknown value {value:?} (allowed: {allowed})"
                )
            );
        }
    }

    #[test]
    fn ignored_objects_are_not_recorded() {
        let objects = vec![
            object(json!({"opm.dev/apply": "Ignore"})),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}),
        ];
        let set = ignored(&objects).unwrap();
        assert_eq!(set.len(), 1);
        let entries = crate::inventory::entries_of(&objects).unwrap();
        let kept = recorded(&entries, &set);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].kind, "ConfigMap");
        assert_eq!(recorded(&entries, &HashSet::new()), entries);
        assert!(ignored(&[object(json!({"opm.dev/apply": "never"}))]).is_err());
    }
}
