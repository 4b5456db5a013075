//! Drift detection (docs/design/operator.md §6.5, docs/design/decisions.md §6; docs/design/principles.md rule 6 and §1.4).
//!
//! Rules:
//! - Per rendered object, a server-side apply dry-run (with the engine's identity: build the
//!   engine with [`Engine::impersonating`] to run it as the tenant SA) is compared with the live
//!   object **within the fields our field manager owns** in the dry-run result (its `Apply`
//!   entry's `fieldsV1`), so fields defaulted by the server or owned by other managers never
//!   read as drift. With no such entry the whole object (minus `managedFields`,
//!   `resourceVersion`, `generation`, `status`) is compared. An object whose fields a create
//!   claim still holds ([`super::claim`], the lazy hand-over) is read the same way: the forced
//!   dry-run makes our manager co-own every field it renders, so the claim is never drift.
//! - A missing live object is drift (`missing`).
//! - Ignore rules: JSON pointers (RFC 6901) removed from both sides before the comparison,
//!   optionally restricted to a group, version, kind, namespace and/or name
//!   ([`IgnoreRule::selects`]). [`strip_ignored`] removes them from an object before it is
//!   applied: under server-side apply a field the manager stops sending is released (and removed
//!   by the API server unless another manager owns it).
//! - A dry-run (or read) error is recorded in `errors`; [`DriftReport::outcome`] is then
//!   [`DriftOutcome::Unknown`], never "in sync".
//! - Correction is opt-in ([`DriftOptions::correct`]): drifted objects are re-applied.
//! - Per-object policies ([`super::policy`]): an `opm.dev/apply: Ignore` object is not checked
//!   (nor counted); for an `opm.dev/apply: IfNotPresent` object only its absence is drift (its
//!   fields are not ours to keep), and correction re-creates it.

use futures::stream::{self, StreamExt};
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value};

use super::error::Error;
use super::object::{self, ObjectRef};
use super::Engine;

/// The outcome of checking one object (`r` is the default ref when the object is invalid).
struct Check {
    r: ObjectRef,
    valid: bool,
    verdict: Result<Option<bool>, Error>,
    corrected: Option<Result<(), Error>>,
}

/// One ignore rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreRule {
    /// JSON pointers to ignore (e.g. `/spec/replicas`).
    pub paths: Vec<String>,
    /// Only objects of this kind (any when `None`).
    pub kind: Option<String>,
    /// Only objects with this name (any when `None`).
    pub name: Option<String>,
    /// Only objects of this API group (`""`: the core group; any when `None`).
    pub group: Option<String>,
    /// Only objects of this API version (any when `None`).
    pub version: Option<String>,
    /// Only objects in this namespace (any when `None`).
    pub namespace: Option<String>,
}

impl IgnoreRule {
    /// Whether the rule applies to `r` (every field it sets matches).
    pub fn selects(&self, r: &ObjectRef) -> bool {
        self.kind.as_deref().is_none_or(|k| k == r.kind)
            && self.name.as_deref().is_none_or(|n| n == r.name)
            && self.group.as_deref().is_none_or(|g| g == r.group)
            && self.version.as_deref().is_none_or(|v| v == r.version)
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| Some(n) == r.namespace.as_deref())
    }
}

/// Removes the paths of the `rules` that select `object` from it (what the operator stops
/// applying, so it stops owning those fields; see the module rules).
pub fn strip_ignored(object: &mut Value, rules: &[IgnoreRule]) {
    let Ok(r) = ObjectRef::of(object) else {
        return;
    };
    for rule in rules.iter().filter(|rule| rule.selects(&r)) {
        for p in &rule.paths {
            remove_pointer(object, p);
        }
    }
}

/// Drift settings.
#[derive(Debug, Clone, Default)]
pub struct DriftOptions {
    /// Ignore rules.
    pub ignore: Vec<IgnoreRule>,
    /// Re-apply drifted objects (opt-in; ownership forced, as every apply of the engine).
    pub correct: bool,
}

/// The drift check's findings.
#[derive(Debug, Default)]
pub struct DriftReport {
    /// Objects checked.
    pub checked: usize,
    /// Objects whose owned fields differ from what we apply.
    pub drifted: Vec<ObjectRef>,
    /// Objects that do not exist.
    pub missing: Vec<ObjectRef>,
    /// Objects re-applied (correction on).
    pub corrected: Vec<ObjectRef>,
    /// Objects whose check failed.
    pub errors: Vec<(ObjectRef, Error)>,
}

/// The verdict of a drift check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriftOutcome {
    /// Every object checked and none drifted.
    InSync,
    /// `n` objects drifted or missing (and every check succeeded).
    Drifted(usize),
    /// At least one check failed: no verdict (never "in sync").
    Unknown,
}

impl DriftReport {
    /// The verdict (see the module rules).
    pub fn outcome(&self) -> DriftOutcome {
        if !self.errors.is_empty() {
            DriftOutcome::Unknown
        } else if self.drifted.is_empty() && self.missing.is_empty() {
            DriftOutcome::InSync
        } else {
            DriftOutcome::Drifted(self.drifted.len() + self.missing.len())
        }
    }
}

/// Projects `v` onto a `fieldsV1` set: the parts of `v` the set names.
pub fn project(fields: &Value, v: &Value) -> Value {
    let Some(fm) = fields.as_object() else {
        return v.clone();
    };
    let children: Vec<(&String, &Value)> = fm.iter().filter(|(k, _)| k.as_str() != ".").collect();
    if children.is_empty() {
        return v.clone();
    }
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, sub) in children {
                if let Some(name) = k.strip_prefix("f:") {
                    if let Some(child) = m.get(name) {
                        out.insert(name.to_string(), project(sub, child));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for (k, sub) in children {
                if let Some(key) = k.strip_prefix("k:") {
                    let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(key) else {
                        continue;
                    };
                    if let Some(item) = items
                        .iter()
                        .find(|it| keys.iter().all(|(kk, kv)| it.get(kk) == Some(kv)))
                    {
                        out.push(project(sub, item));
                    }
                } else if let Some(val) = k.strip_prefix("v:") {
                    if let Ok(want) = serde_json::from_str::<Value>(val) {
                        if items.contains(&want) {
                            out.push(want);
                        }
                    }
                } else if let Some(idx) = k.strip_prefix("i:") {
                    if let Some(item) = idx.parse::<usize>().ok().and_then(|i| items.get(i)) {
                        out.push(project(sub, item));
                    }
                }
            }
            Value::Array(out)
        }
        other => other.clone(),
    }
}

fn remove_pointer(v: &mut Value, ptr: &str) {
    let Some((parent, last)) = ptr.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match v.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.remove(&last);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = last.parse::<usize>() {
                if i < a.len() {
                    a.remove(i);
                }
            }
        }
        _ => {}
    }
}

fn owned_fields<'a>(o: &'a Value, manager: &str) -> Option<&'a Value> {
    o.pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|e| {
            e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some("Apply")
                && e.get("subresource").is_none_or(|s| s.as_str() == Some(""))
        })?
        .get("fieldsV1")
}

fn strip_volatile(o: &mut Value) {
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["managedFields", "resourceVersion", "generation"] {
            m.remove(k);
        }
    }
}

/// Whether `live` differs from `planned` within our owned fields, after the ignore rules.
pub fn differs(
    planned: &Value,
    live: &Value,
    manager: &str,
    ignore: &[IgnoreRule],
    r: &ObjectRef,
) -> bool {
    let (mut a, mut b) = match owned_fields(planned, manager) {
        Some(fs) => (project(fs, planned), project(fs, live)),
        None => (planned.clone(), live.clone()),
    };
    strip_volatile(&mut a);
    strip_volatile(&mut b);
    for rule in ignore {
        if !rule.selects(r) {
            continue;
        }
        for p in &rule.paths {
            remove_pointer(&mut a, p);
            remove_pointer(&mut b, p);
        }
    }
    a != b
}

impl Engine {
    /// Checks `objects` for drift (see the module rules), with the engine's bounded
    /// concurrency; the report lists objects in render order.
    pub async fn drift(&self, objects: &[Value], opts: &DriftOptions) -> DriftReport {
        // Owned items (not `&Value`): the future must be `Send` for any caller, including a
        // kube-runtime reconcile, which a closure over a borrowed item cannot prove.
        let checks: Vec<Check> = stream::iter(objects.iter().cloned())
            .map(|o| async move { self.check_one(&o, opts).await })
            .buffered(self.opts.concurrency.max(1))
            .collect()
            .await;
        let mut report = DriftReport::default();
        for Check {
            r,
            valid,
            verdict,
            corrected,
        } in checks
        {
            if valid {
                report.checked += 1;
            }
            match verdict {
                Ok(None) => {}
                Ok(Some(true)) => report.missing.push(r.clone()),
                Ok(Some(false)) => report.drifted.push(r.clone()),
                Err(e) => report.errors.push((r.clone(), e)),
            }
            match corrected {
                Some(Ok(())) => report.corrected.push(r),
                Some(Err(e)) => report.errors.push((r, e)),
                None => {}
            }
        }
        report
    }

    async fn check_one(&self, o: &Value, opts: &DriftOptions) -> Check {
        let r = match ObjectRef::of(o) {
            Ok(r) => r,
            Err(e) => {
                return Check {
                    r: ObjectRef::default(),
                    valid: false,
                    verdict: Err(e),
                    corrected: None,
                }
            }
        };
        let policy = match super::policy::Policy::of(o) {
            Ok(p) if p.ignored() => {
                return Check {
                    r,
                    valid: false,
                    verdict: Ok(None),
                    corrected: None,
                }
            }
            Ok(p) => p,
            Err(e) => {
                return Check {
                    r,
                    valid: true,
                    verdict: Err(e),
                    corrected: None,
                }
            }
        };
        let body = object::prepare(o, &self.opts.runtime_name, None);
        let verdict = match policy.apply {
            super::policy::ApplyMode::IfNotPresent => self.missing(&r).await,
            _ => self.drift_one(&r, &body, opts).await,
        };
        let corrected = match verdict {
            Ok(Some(_)) if opts.correct => Some(self.correct(&r, &body).await),
            _ => None,
        };
        Check {
            r,
            valid: true,
            verdict,
            corrected,
        }
    }

    /// `None`: in sync; `Some(true)`: missing; `Some(false)`: drifted.
    async fn drift_one(
        &self,
        r: &ObjectRef,
        body: &Value,
        opts: &DriftOptions,
    ) -> Result<Option<bool>, Error> {
        let Some((api, _)) = self.api_for(r).await? else {
            return Err(Error::UnknownKind {
                object: r.to_string(),
                api_version: r.api_version(),
                kind: r.kind.clone(),
            });
        };
        let live = match api.get_opt(&r.name).await {
            Ok(Some(o)) => super::to_value(&o, r)?,
            Ok(None) => return Ok(Some(true)),
            Err(e) => return Err(self.err(e, r, "get")),
        };
        let params = PatchParams::apply(&self.opts.field_manager)
            .dry_run()
            .force();
        let planned = api
            .patch(&r.name, &params, &Patch::Apply(body))
            .await
            .map_err(|e| self.err(e, r, "apply (dry-run)"))?;
        let planned = super::to_value(&planned, r)?;
        Ok(differs(&planned, &live, &self.opts.field_manager, &opts.ignore, r).then_some(false))
    }

    /// `Some(true)` when the object is missing, else `None` (module rules, `IfNotPresent`).
    async fn missing(&self, r: &ObjectRef) -> Result<Option<bool>, Error> {
        Ok(self.get_live(r).await?.is_none().then_some(true))
    }

    async fn correct(&self, r: &ObjectRef, body: &Value) -> Result<(), Error> {
        let Some((api, _)) = self.api_for(r).await? else {
            return Ok(());
        };
        let params = PatchParams::apply(&self.opts.field_manager).force();
        api.patch(&r.name, &params, &Patch::Apply(body))
            .await
            .map_err(|e| self.err(e, r, "apply"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn projection_keeps_only_owned_fields() {
        let fields = json!({"f:data": {"f:a": {}}, "f:spec": {"f:containers": {
            "k:{\"name\":\"app\"}": {".": {}, "f:image": {}}}}});
        let v = json!({"data": {"a": "1", "b": "2"}, "spec": {"containers": [
            {"name": "side", "image": "x"}, {"name": "app", "image": "y", "imagePullPolicy": "Always"}]}});
        assert_eq!(
            project(&fields, &v),
            json!({"data": {"a": "1"}, "spec": {"containers": [{"image": "y"}]}})
        );
    }

    #[test]
    fn differs_within_owned_fields_and_honours_ignore_rules() {
        let r = ObjectRef {
            kind: "Deployment".into(),
            name: "d".into(),
            ..ObjectRef::default()
        };
        let planned = json!({"metadata": {"managedFields": [{"manager": "opm-controller",
            "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}}]},
            "spec": {"replicas": 2, "paused": false, "revisionHistoryLimit": 10}});
        // A defaulted field that we do not own differs: not drift.
        let live = json!({"spec": {"replicas": 2, "paused": false, "revisionHistoryLimit": 5}});
        assert!(!differs(&planned, &live, "opm-controller", &[], &r));
        let live = json!({"spec": {"replicas": 5, "paused": false}});
        assert!(differs(&planned, &live, "opm-controller", &[], &r));
        let ignore = vec![IgnoreRule {
            paths: vec!["/spec/replicas".into()],
            kind: Some("Deployment".into()),
            ..IgnoreRule::default()
        }];
        assert!(!differs(&planned, &live, "opm-controller", &ignore, &r));
        let other_kind = vec![IgnoreRule {
            paths: vec!["/spec/replicas".into()],
            kind: Some("StatefulSet".into()),
            ..IgnoreRule::default()
        }];
        assert!(differs(&planned, &live, "opm-controller", &other_kind, &r));
    }

    #[test]
    fn an_error_is_never_in_sync() {
        let mut rep = DriftReport {
            checked: 1,
            ..DriftReport::default()
        };
        assert_eq!(rep.outcome(), DriftOutcome::InSync);
        rep.errors.push((ObjectRef::default(), Error::Cancelled));
        assert_eq!(rep.outcome(), DriftOutcome::Unknown);
    }
}
