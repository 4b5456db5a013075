//! Request operations on the store: get, list, create, update, patch (merge, JSON, strategic,
//! apply), delete and deletecollection.
//!
//! Rules: writes are prepared under the store lock, sent to matching validating webhooks without
//! the lock, then committed only if the object's resourceVersion is still the one the write was
//! prepared from (otherwise prepared again). `dryRun=All` runs everything but the commit.
//! Update semantics: a stale `metadata.resourceVersion` is 409 Conflict; `uid`,
//! `creationTimestamp` and `deletionTimestamp` cannot change; with a status subresource the main
//! resource keeps the stored status and `/status` keeps everything but status (status is dropped
//! on create); `generation` starts at 1 and is bumped when anything outside `metadata` and
//! `status` changes; a write that changes nothing (managedFields timestamps aside) is a no-op
//! that keeps the resourceVersion. Deleting an object with finalizers sets `deletionTimestamp`;
//! an update that removes the last finalizer of such an object deletes it; no finalizer may be
//! added once deleting. Deleting a namespace makes it Terminating and cascades (see state.rs).
//! Custom resources are pruned, defaulted and validated against their structural schema and
//! their `x-kubernetes-validations` rules (see `schema` and `validation_rules`). An apply patch
//! that creates its object is authorized as `create` as well as `patch`, as the apiserver does.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::admission;
use crate::api_error::{ApiError, ApiResult};
use crate::events;
use crate::fieldset::Shape;
use crate::immutable;
use crate::patch;
pub use crate::request::{Query, Req, Target};
use crate::resources::{self, ResourceType};
use crate::schema;
use crate::selector::{FieldSelector, LabelSelector};
use crate::ssa::{self, Scope};
use crate::state::{Change, State};
use crate::timefmt;
use crate::validation_rules;
use crate::Shared;

/// Converts a stored object to the requested version (apiVersion only: no conversion webhooks;
/// `events.k8s.io` Events are converted from the stored core form, see `events`).
pub fn at_version(obj: &Value, t: &Target) -> Value {
    let mut v = if events::is_events_v1(&t.rt) {
        events::from_core(obj.clone())
    } else {
        obj.clone()
    };
    if v.is_object() {
        v["apiVersion"] = Value::String(t.api_version());
    }
    v
}

/// GET of one object.
pub fn get(sh: &Shared, t: &Target) -> ApiResult<Value> {
    let st = sh.state.lock();
    let obj = st
        .get(&t.key(), &t.ns, &t.name)
        .ok_or_else(|| t.not_found())?;
    Ok(at_version(&obj, t))
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Continue {
    rv: u64,
    start: String,
}

/// LIST with selectors and `limit`/`continue`.
pub fn list(sh: &Shared, t: &Target, q: &Query) -> ApiResult<Value> {
    let ls = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?;
    let fs = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?;
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let cont = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => {
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(c)
                .map_err(|_| ApiError::bad_request("invalid continue token"))?;
            Some(
                serde_json::from_slice::<Continue>(&raw)
                    .map_err(|_| ApiError::bad_request("invalid continue token"))?,
            )
        }
        None => None,
    };
    let st = sh.state.lock();
    let ns = (!t.ns.is_empty()).then_some(t.ns.as_str());
    let all = st.list(&t.key(), ns);
    let list_rv = cont.as_ref().map(|c| c.rv).unwrap_or(st.rv);
    let mut items = Vec::new();
    let mut next = None;
    let mut remaining = 0usize;
    for obj in all.iter() {
        let k = format!(
            "{}/{}",
            obj["metadata"]["namespace"].as_str().unwrap_or(""),
            obj["metadata"]["name"].as_str().unwrap_or("")
        );
        if let Some(c) = &cont {
            if k <= c.start {
                continue;
            }
        }
        if !ls.matches(obj["metadata"].get("labels")) || !fs.matches(obj) {
            continue;
        }
        if items.len() >= limit {
            remaining += 1;
            continue;
        }
        if items.len() + 1 == limit {
            next = Some(k.clone());
        }
        items.push(at_version(obj, t));
    }
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if remaining > 0 {
        if let Some(start) = next {
            let tok = serde_json::to_vec(&Continue { rv: list_rv, start }).unwrap_or_default();
            meta["continue"] = json!(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tok));
            meta["remainingItemCount"] = json!(remaining);
        }
    }
    Ok(json!({
        "kind": format!("{}List", t.rt.kind),
        "apiVersion": t.api_version(),
        "metadata": meta,
        "items": items,
    }))
}

/// A prepared write.
pub struct Plan {
    /// HTTP code on success.
    pub code: u16,
    /// The object it was prepared from.
    pub old: Option<Arc<Value>>,
    /// The change, or `None` for a no-op returning `old`.
    pub change: Option<Change>,
    /// Admission operation name.
    pub operation: &'static str,
}

fn rv_of(v: Option<&Value>) -> String {
    v.and_then(|o| o["metadata"]["resourceVersion"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Runs a write: prepare under the lock, admission, commit.
pub async fn run_write<F>(sh: &Shared, t: &Target, r: &Req, prepare: F) -> ApiResult<(u16, Value)>
where
    F: Fn(&State) -> ApiResult<Plan>,
{
    for _ in 0..32 {
        let (plan, hooks) = {
            let st = sh.state.lock();
            let plan = prepare(&st)?;
            let hooks = match &plan.change {
                Some(c) => admission::matching(&st, t, plan.operation, c, plan.old.as_deref()),
                None => Vec::new(),
            };
            (plan, hooks)
        };
        let Some(change) = plan.change else {
            let old = plan.old.as_deref().cloned().unwrap_or(Value::Null);
            return Ok((200, at_version(&old, t)));
        };
        if !hooks.is_empty() {
            let new = match &change {
                Change::Put(v) => Some(v),
                Change::Delete => None,
            };
            admission::run(sh, hooks, t, plan.operation, new, plan.old.as_deref(), r).await?;
        }
        let name = match &change {
            Change::Put(v) => v["metadata"]["name"].as_str().unwrap_or("").to_string(),
            Change::Delete => t.name.clone(),
        };
        if r.q.dry_run() {
            let out = match change {
                Change::Put(v) => v,
                Change::Delete => plan.old.as_deref().cloned().unwrap_or(Value::Null),
            };
            return Ok((plan.code, at_version(&out, t)));
        }
        let mut st = sh.state.lock();
        let cur = st.get(&t.key(), &t.ns, &name);
        if rv_of(cur.as_deref()) != rv_of(plan.old.as_deref()) {
            continue;
        }
        let stored = st.commit(&t.key(), &t.ns, &name, change);
        return Ok((plan.code, at_version(&stored, t)));
    }
    Err(ApiError::conflict(&t.rt.group, &t.rt.plural, &t.name))
}

fn valid_name(rt: &ResourceType, name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("Required value: name or generateName is required".into());
    }
    let path_segment = rt.custom
        || rt.group == "rbac.authorization.k8s.io"
        || rt.group == "admissionregistration.k8s.io";
    if path_segment {
        if name == "." || name == ".." || name.contains('/') || name.contains('%') {
            return Some(format!(
                "Invalid value: \"{name}\": may not contain '/' or '%'"
            ));
        }
        return None;
    }
    let ok = name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| format!("Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"))
}

fn invalid(t: &Target, name: &str, causes: Vec<(String, String)>) -> ApiError {
    ApiError::invalid(&t.rt.group, &t.rt.kind, name, causes)
}

/// Makes `v[key]` an object (inserting `{}` when absent) so nested writes cannot fail; a
/// present non-object value is 422 Invalid.
fn ensure_object(t: &Target, v: &mut Value, path: &[&str]) -> ApiResult<()> {
    let mut cur = v;
    let mut walked = Vec::new();
    for key in path {
        walked.push(*key);
        let Some(m) = cur.as_object_mut() else {
            return Err(ApiError::bad_request(
                "the body of the request must be an object",
            ));
        };
        let child = m
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
        if child.is_null() {
            *child = Value::Object(Default::default());
        }
        if !child.is_object() {
            return Err(invalid(
                t,
                &t.name,
                vec![(walked.join("."), "Invalid value: must be an object".into())],
            ));
        }
        cur = child;
    }
    Ok(())
}

/// Per-kind behaviour of the built-in kinds the store emulates.
fn kind_hooks(t: &Target, new: &mut Value, now: &str) -> ApiResult<()> {
    ensure_object(t, new, &["metadata"])?;
    let name = new["metadata"]["name"].as_str().unwrap_or("").to_string();
    let md = &new["metadata"];
    let mut errs = Vec::new();
    for f in ["labels", "annotations"] {
        let ok = match &md[f] {
            Value::Null => true,
            Value::Object(m) => m.values().all(Value::is_string),
            _ => false,
        };
        if !ok {
            errs.push((
                format!("metadata.{f}"),
                "Invalid value: must be a map of strings".to_string(),
            ));
        }
    }
    let fin_ok = match &md["finalizers"] {
        Value::Null => true,
        Value::Array(a) => a.iter().all(Value::is_string),
        _ => false,
    };
    if !fin_ok {
        errs.push((
            "metadata.finalizers".into(),
            "Invalid value: must be a list of strings".into(),
        ));
    }
    if !errs.is_empty() {
        return Err(invalid(t, &name, errs));
    }
    match (t.rt.group.as_str(), t.rt.plural.as_str()) {
        ("", "namespaces") => {
            ensure_object(t, new, &["spec"])?;
            ensure_object(t, new, &["status"])?;
            ensure_object(t, new, &["metadata", "labels"])?;
            if !new["spec"]["finalizers"].is_array() {
                new["spec"]["finalizers"] = json!(["kubernetes"]);
            }
            let phase = if new["metadata"]["deletionTimestamp"].is_string() {
                "Terminating"
            } else {
                "Active"
            };
            new["status"]["phase"] = json!(phase);
            new["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let rt = resources::from_crd(new).map_err(|c| invalid(t, &name, c))?;
            new["status"] = resources::crd_status(&rt, now);
        }
        ("", "secrets") => {
            if let Some(sd) = new.get("stringData").and_then(Value::as_object).cloned() {
                ensure_object(t, new, &["data"])?;
                for (k, v) in sd {
                    let enc = base64::engine::general_purpose::STANDARD
                        .encode(v.as_str().unwrap_or("").as_bytes());
                    new["data"][k] = json!(enc);
                }
                if let Some(m) = new.as_object_mut() {
                    m.remove("stringData");
                }
            }
            if !new["type"].is_string() {
                new["type"] = json!("Opaque");
            }
        }
        ("", "services") => {
            ensure_object(t, new, &["spec"])?;
            if !new["spec"]["type"].is_string() {
                new["spec"]["type"] = json!("ClusterIP");
            }
            if new["spec"]["type"] != "ExternalName" && !new["spec"]["clusterIP"].is_string() {
                let uid = new["metadata"]["uid"]
                    .as_str()
                    .unwrap_or("")
                    .as_bytes()
                    .to_vec();
                let a = uid.first().copied().unwrap_or(1);
                let b = uid.get(1).copied().unwrap_or(1).max(1);
                let ip = format!("10.96.{a}.{b}");
                new["spec"]["clusterIP"] = json!(ip);
                new["spec"]["clusterIPs"] = json!([ip]);
            }
        }
        _ => {}
    }
    Ok(())
}

fn custom_schema(t: &Target, new: &mut Value, old: Option<&Value>, name: &str) -> ApiResult<()> {
    if let Some(s) = t.rt.schema(&t.version) {
        schema::prune(new, s, true);
        schema::default(new, s);
        let mut errs = Vec::new();
        schema::validate(new, s, "", &mut errs);
        let mut causes: Vec<(&'static str, String, String)> = errs
            .into_iter()
            .map(|(f, m)| ("FieldValueInvalid", f, m))
            .collect();
        causes.extend(validation_rules::validate(new, old, s));
        if !causes.is_empty() {
            return Err(ApiError::invalid_typed(
                &t.rt.group,
                &t.rt.kind,
                name,
                causes,
            ));
        }
    }
    Ok(())
}

/// How managedFields are maintained for a write.
enum Tracking {
    /// An ordinary write by this manager.
    Update(String),
    /// Already computed by server-side apply.
    Done,
}

fn shape<'a>(t: &'a Target) -> Shape<'a> {
    Shape::root(t.rt.schema(&t.version))
}

fn strip_for_generation(v: &Value) -> Value {
    let mut c = v.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    c
}

fn strip_for_noop(v: &Value) -> Value {
    let mut c = v.clone();
    if let Some(md) = c.get_mut("metadata").and_then(Value::as_object_mut) {
        md.remove("resourceVersion");
        if let Some(mf) = md.get_mut("managedFields").and_then(Value::as_array_mut) {
            for e in mf {
                if let Some(e) = e.as_object_mut() {
                    e.remove("time");
                }
            }
        }
    }
    if let Some(m) = c.as_object_mut() {
        m.remove("apiVersion");
    }
    c
}

fn prepare_new(st: &State, t: &Target, mut obj: Value, tracking: Tracking) -> ApiResult<Plan> {
    let now = timefmt::now();
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    if let Some(k) = obj["kind"].as_str() {
        if !k.is_empty() && k != t.rt.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                t.rt.kind
            )));
        }
    }
    obj["apiVersion"] = json!(t.api_version());
    obj["kind"] = json!(t.rt.kind);
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    let mut name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    if name.is_empty() {
        if let Some(g) = obj["metadata"]["generateName"].as_str() {
            let suffix: String = uuid::Uuid::new_v4()
                .simple()
                .to_string()
                .chars()
                .take(5)
                .collect();
            name = format!("{g}{suffix}");
            obj["metadata"]["name"] = json!(name);
        }
    }
    if let Some(msg) = valid_name(&t.rt, &name) {
        return Err(invalid(t, &name, vec![("metadata.name".into(), msg)]));
    }
    if t.rt.namespaced {
        let body_ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
        if !body_ns.is_empty() && body_ns != t.ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        obj["metadata"]["namespace"] = json!(t.ns);
        match st.namespace_state(&t.ns) {
            None => return Err(ApiError::not_found("", "namespaces", &t.ns)),
            Some(true) => {
                return Err(ApiError::forbidden(format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                    t.rt.plural, t.ns
                )))
            }
            Some(false) => {}
        }
    } else if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    if t.rt.status_subresource {
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
    }
    if let Some(md) = obj["metadata"].as_object_mut() {
        md.remove("resourceVersion");
        md.remove("deletionTimestamp");
        md.remove("deletionGracePeriodSeconds");
        md.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        md.insert("creationTimestamp".into(), json!(now));
        md.insert("generation".into(), json!(1));
        if matches!(tracking, Tracking::Update(_)) {
            md.remove("managedFields");
        }
    }
    kind_hooks(t, &mut obj, &now)?;
    if t.rt.custom {
        custom_schema(t, &mut obj, None, &name)?;
    }
    // Validation comes first, as in the apiserver: an invalid object is 422 even if the name
    // is taken.
    if st.get(&t.key(), &t.ns, &name).is_some() {
        return Err(ApiError::already_exists(&t.rt.group, &t.rt.plural, &name));
    }
    if let Tracking::Update(m) = &tracking {
        ssa::track_update(
            None,
            &mut obj,
            m,
            shape(t),
            t.scope(),
            &t.api_version(),
            &now,
        );
    }
    Ok(Plan {
        code: 201,
        old: None,
        change: Some(Change::Put(obj)),
        operation: "CREATE",
    })
}

fn prepare_replace(
    t: &Target,
    old: &Arc<Value>,
    body: Value,
    tracking: Tracking,
) -> ApiResult<Plan> {
    let now = timefmt::now();
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    let body_name = body["metadata"]["name"].as_str().unwrap_or("");
    if !body_name.is_empty() && body_name != t.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            t.name
        )));
    }
    let body_rv = body["metadata"]["resourceVersion"].as_str().unwrap_or("");
    if !body_rv.is_empty() && body_rv != rv_of(Some(old)) {
        return Err(ApiError::conflict(&t.rt.group, &t.rt.plural, &t.name));
    }
    let mut new = match t.scope() {
        Scope::Status => {
            let mut n = (**old).clone();
            match body.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if let Tracking::Done = tracking {
                n["metadata"]["managedFields"] = body["metadata"]["managedFields"].clone();
            }
            n
        }
        Scope::Main => {
            let mut n = body;
            match old.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            n
        }
        Scope::All => body,
    };
    new["apiVersion"] = json!(t.api_version());
    new["kind"] = json!(t.rt.kind);
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    new["metadata"]["name"] = json!(t.name);
    if t.rt.namespaced {
        new["metadata"]["namespace"] = json!(t.ns);
    }
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old["metadata"].get(k) {
            Some(v) => new["metadata"][k] = v.clone(),
            None => {
                if let Some(md) = new["metadata"].as_object_mut() {
                    md.remove(k);
                }
            }
        }
    }
    if matches!(tracking, Tracking::Update(_)) {
        new["metadata"]["managedFields"] = old["metadata"]["managedFields"].clone();
    }
    if new["metadata"]["managedFields"].is_null() {
        if let Some(md) = new["metadata"].as_object_mut() {
            md.remove("managedFields");
        }
    }
    let main = !matches!(t.scope(), Scope::Status);
    if main {
        immutable::keep_allocated(&t.rt.group, &t.rt.plural, old, &mut new);
    }
    kind_hooks(t, &mut new, &now)?;
    if t.rt.custom {
        custom_schema(t, &mut new, Some(old), &t.name)?;
    }
    if main {
        let causes = immutable::check(&t.rt.group, &t.rt.plural, old, &new);
        if !causes.is_empty() {
            return Err(ApiError::invalid_typed(
                &t.rt.group,
                &t.rt.kind,
                &t.name,
                causes,
            ));
        }
    }
    let deleting = old["metadata"]["deletionTimestamp"].is_string();
    if deleting {
        let oldf: Vec<Value> = old["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let added = new["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|a| a.iter().any(|f| !oldf.contains(f)));
        if added {
            return Err(invalid(
                t,
                &t.name,
                vec![(
                    "metadata.finalizers".into(),
                    "Forbidden: no new finalizers can be added if the object is being deleted"
                        .into(),
                )],
            ));
        }
    }
    if strip_for_generation(&new) != strip_for_generation(old) {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        new["metadata"]["generation"] = json!(g);
    }
    if let Tracking::Update(m) = &tracking {
        ssa::track_update(
            Some(old),
            &mut new,
            m,
            shape(t),
            t.scope(),
            &t.api_version(),
            &now,
        );
    }
    let finished = deleting
        && new["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|a| a.is_empty());
    let change = if finished {
        Some(Change::Delete)
    } else if strip_for_noop(&new) == strip_for_noop(old) {
        None
    } else {
        Some(Change::Put(new))
    };
    Ok(Plan {
        code: 200,
        old: Some(old.clone()),
        change,
        operation: "UPDATE",
    })
}

/// POST.
pub async fn create(sh: &Shared, t: &Target, r: &Req, body: Value) -> ApiResult<(u16, Value)> {
    let manager = r.manager();
    run_write(sh, t, r, |st| {
        prepare_new(st, t, body.clone(), Tracking::Update(manager.clone()))
    })
    .await
}

/// PUT.
pub async fn update(sh: &Shared, t: &Target, r: &Req, body: Value) -> ApiResult<(u16, Value)> {
    let manager = r.manager();
    run_write(sh, t, r, |st| {
        let old = st
            .get(&t.key(), &t.ns, &t.name)
            .ok_or_else(|| t.not_found())?;
        prepare_replace(t, &old, body.clone(), Tracking::Update(manager.clone()))
    })
    .await
}

/// PATCH in any of the four formats, chosen by Content-Type.
pub async fn patch(
    sh: &Shared,
    t: &Target,
    r: &Req,
    content_type: &str,
    body: &[u8],
) -> ApiResult<(u16, Value)> {
    let ct = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let parsed: Value = if ct == "application/apply-patch+yaml" {
        match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(_) => yaml_value(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
        }
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    let manager = r.manager();
    if ct == "application/apply-patch+yaml" {
        if r.q.get("fieldManager").is_none_or(str::is_empty) {
            return Err(invalid(
                t,
                &t.name,
                vec![(
                    "fieldManager".into(),
                    "Required value: is required for apply patch".into(),
                )],
            ));
        }
        if !parsed.is_object() {
            return Err(ApiError::bad_request("apply patch must be an object"));
        }
        let kind = parsed["kind"].as_str().unwrap_or("");
        if kind.is_empty() || parsed["apiVersion"].as_str().unwrap_or("").is_empty() {
            return Err(ApiError::bad_request(
                "invalid object type: apply patches need apiVersion and kind",
            ));
        }
        if kind != t.rt.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                t.rt.kind
            )));
        }
        let pname = parsed["metadata"]["name"].as_str().unwrap_or("");
        if !pname.is_empty() && pname != t.name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({pname}) does not match the name on the URL ({})",
                t.name
            )));
        }
        let force = r.q.flag("force");
        let parsed = events::stored_form(&t.rt, parsed);
        return run_write(sh, t, r, |st| {
            let old = st.get(&t.key(), &t.ns, &t.name);
            let now = timefmt::now();
            let live = match &old {
                Some(o) => (**o).clone(),
                None => {
                    if t.sub == "status" {
                        return Err(t.not_found());
                    }
                    // An apply that creates is authorized as `create` too (the apiserver's
                    // patch handler, "Patch and Apply" in the API concepts).
                    let attrs = crate::rbac::Attributes {
                        verb: "create",
                        group: &t.rt.group,
                        resource: &t.rt.plural,
                        subresource: "",
                        namespace: &t.ns,
                        name: &t.name,
                    };
                    if !crate::authn::authorize(st, &r.user, &attrs) {
                        return Err(ApiError::forbidden(crate::rbac::forbidden_message(
                            &r.user, &attrs,
                        )));
                    }
                    json!({"metadata": {"name": t.name}})
                }
            };
            let prv = parsed["metadata"]["resourceVersion"].as_str().unwrap_or("");
            if !prv.is_empty() && prv != rv_of(old.as_deref()) {
                return Err(ApiError::conflict(&t.rt.group, &t.rt.plural, &t.name));
            }
            let av = t.api_version();
            let merged = ssa::apply(
                &live,
                &parsed,
                &ssa::Apply {
                    manager: &manager,
                    force,
                    shape: shape(t),
                    scope: t.scope(),
                    api_version: &av,
                    now: &now,
                },
            )?;
            match &old {
                None => prepare_new(st, t, merged, Tracking::Done),
                Some(o) => {
                    let mut m = merged;
                    ensure_object(t, &mut m, &["metadata"])?;
                    m["metadata"]["resourceVersion"] = json!(rv_of(Some(o)));
                    prepare_replace(t, o, m, Tracking::Done)
                }
            }
        })
        .await;
    }
    let strategic = ct == "application/strategic-merge-patch+json";
    if strategic && t.rt.custom {
        return Err(ApiError::unsupported_media_type(&ct));
    }
    if !matches!(
        ct.as_str(),
        "application/merge-patch+json"
            | "application/json-patch+json"
            | "application/strategic-merge-patch+json"
    ) {
        return Err(ApiError::unsupported_media_type(&ct));
    }
    run_write(sh, t, r, |st| {
        let old = st
            .get(&t.key(), &t.ns, &t.name)
            .ok_or_else(|| t.not_found())?;
        let mut doc = at_version(&old, t);
        match ct.as_str() {
            "application/json-patch+json" => patch::json(&mut doc, &parsed)?,
            "application/merge-patch+json" => patch::merge(&mut doc, &parsed),
            _ => patch::strategic(&mut doc, &parsed, shape(t)),
        }
        if !doc.is_object() {
            return Err(invalid(
                t,
                &t.name,
                vec![(
                    "".into(),
                    "Invalid value: the patched object must be an object".into(),
                )],
            ));
        }
        let mut doc = events::stored_form(&t.rt, doc);
        ensure_object(t, &mut doc, &["metadata"])?;
        if doc["metadata"]["resourceVersion"].is_null() {
            doc["metadata"]["resourceVersion"] = json!(rv_of(Some(&old)));
        }
        prepare_replace(t, &old, doc, Tracking::Update(manager.clone()))
    })
    .await
}

fn prepare_delete(t: &Target, old: &Arc<Value>, opts: &Value) -> ApiResult<Plan> {
    let pre = &opts["preconditions"];
    if let Some(rv) = pre["resourceVersion"].as_str() {
        if rv != rv_of(Some(old)) {
            return Err(ApiError::conflict(&t.rt.group, &t.rt.plural, &t.name));
        }
    }
    if let Some(uid) = pre["uid"].as_str() {
        if Some(uid) != old["metadata"]["uid"].as_str() {
            return Err(ApiError::conflict(&t.rt.group, &t.rt.plural, &t.name));
        }
    }
    let deleting = old["metadata"]["deletionTimestamp"].is_string();
    let is_ns = t.rt.group.is_empty() && t.rt.plural == "namespaces";
    let has_finalizers = old["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    let change = if deleting {
        None
    } else if is_ns || has_finalizers {
        let mut n = (**old).clone();
        n["metadata"]["deletionTimestamp"] = json!(timefmt::now());
        n["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if is_ns {
            n["status"]["phase"] = json!("Terminating");
        }
        Some(Change::Put(n))
    } else {
        Some(Change::Delete)
    };
    Ok(Plan {
        code: 200,
        old: Some(old.clone()),
        change,
        operation: "DELETE",
    })
}

/// DELETE of one object.
pub async fn delete(sh: &Shared, t: &Target, r: &Req, opts: Value) -> ApiResult<(u16, Value)> {
    let mut r = r.clone();
    if opts["dryRun"]
        .as_array()
        .is_some_and(|a| a.iter().any(|d| d == "All"))
    {
        r.q.0.insert("dryRun".into(), "All".into());
    }
    let r = &r;
    run_write(sh, t, r, |st| {
        let old = st
            .get(&t.key(), &t.ns, &t.name)
            .ok_or_else(|| t.not_found())?;
        prepare_delete(t, &old, &opts)
    })
    .await
}

/// DELETE of a collection (honours label and field selectors); returns the list of deleted
/// (or now deleting) objects.
pub async fn delete_collection(
    sh: &Shared,
    t: &Target,
    r: &Req,
    opts: Value,
) -> ApiResult<(u16, Value)> {
    let mut q = r.q.clone();
    q.0.remove("limit");
    q.0.remove("continue");
    let listed = list(sh, t, &q)?;
    let mut out = Vec::new();
    for item in listed["items"].as_array().cloned().unwrap_or_default() {
        let mut ot = t.clone();
        ot.name = item["metadata"]["name"].as_str().unwrap_or("").to_string();
        ot.ns = item["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        match delete(sh, &ot, r, opts.clone()).await {
            Ok((_, v)) => out.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok((
        200,
        json!({"kind": format!("{}List", t.rt.kind), "apiVersion": t.api_version(), "metadata": {}, "items": out}),
    ))
}

/// A YAML request body (or an apply patch) as JSON: YAML 1.2 core as the API server reads it
/// (`sigs.k8s.io/yaml`): `yes`/`on` are strings, integers with leading zeros or underscores stay
/// strings.
pub(crate) fn yaml_value(body: &[u8]) -> Result<Value, serde_saphyr::Error> {
    serde_saphyr::from_slice_with_options(
        body,
        serde_saphyr::options! {
            strict_booleans: true,
            leading_zero_numbers_as_strings: true,
            underscored_numbers_as_strings: true,
        },
    )
}
