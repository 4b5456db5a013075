//! The HTTP front: path routing, authentication and impersonation (`authn`), authorization,
//! the audit log (`audit`), JSON bodies, `Status` errors, and watch streams. GET and LIST answer a `meta.k8s.io/v1` Table
//! when the `Accept` header asks for one (`as=Table`), a PartialObjectMetadata form for
//! `as=PartialObjectMetadata`; `/openapi/*` comes from `openapi`.
//!
//! Paths: `/api/v1/...` and `/apis/<group>/<version>/...`, then
//! `[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`. Verbs: GET (get, list, watch with
//! `watch=true|1`), POST (create), PUT (update), PATCH (patch), DELETE (delete, deletecollection).
//! Watch rules: without `resourceVersion` (or `0`) and with `sendInitialEvents=true` the stream
//! starts with ADDED for the current objects (the latter then a BOOKMARK annotated
//! `k8s.io/initial-events-end`); with a version it replays history after that version, or
//! sends one ERROR event with a 410 `Expired` Status when the version is older than the history
//! window. Selectors filter the stream; an object entering or leaving the selection is
//! ADDED/DELETED. `allowWatchBookmarks` adds periodic BOOKMARK events. `timeoutSeconds` ends the
//! stream; so does emulator shutdown. A watch asking for `as=Table` gets each event's object as
//! a one-row Table (see `table`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query as AxQuery, State as AxState};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Value};

use crate::api_error::{ApiError, ApiResult};
use crate::audit;
use crate::authn::{self, authorize};
use crate::discovery;
use crate::events;
use crate::openapi;
use crate::ops::{self, Query, Req, Target};
use crate::protobuf;
use crate::rbac::{self, Attributes, UserInfo};
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::{Event, EventType, State};
use crate::table;
use crate::Shared;

fn json_response(code: u16, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

/// The single handler behind every path.
pub async fn handle(
    AxState(sh): AxState<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    AxQuery(params): AxQuery<Vec<(String, String)>>,
    body: Bytes,
) -> Response {
    let q = Query(params.into_iter().collect::<HashMap<_, _>>());
    let mut record = sh.audit.as_ref().map(|_| {
        let ua = headers
            .get("user-agent")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        audit::Record::new(method.as_str(), &uri.to_string(), ua)
    });
    let response = match sh
        .faults
        .check(&method, uri.path(), is_dry_run(&method, &q, &body))
    {
        Some(e) => error_response(&e),
        None => match route(&sh, &method, &uri, &headers, q, body, &mut record).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        },
    };
    if let (Some(log), Some(record)) = (&sh.audit, &record) {
        log.write(record, response.status().as_u16());
    }
    response
}

/// Whether a request is a dry run (`dryRun` in the query, or in a DELETE's `DeleteOptions`).
fn is_dry_run(method: &Method, q: &Query, body: &Bytes) -> bool {
    q.0.contains_key("dryRun")
        || (method == Method::DELETE
            && serde_json::from_slice::<Value>(body)
                .ok()
                .is_some_and(|v| v.get("dryRun").is_some()))
}

/// The JSON of a request body: JSON or YAML, Kubernetes protobuf (see `protobuf`); other
/// encodings (CBOR) are 415, which makes client-go fall back to JSON.
fn parse_body(headers: &HeaderMap, body: &Bytes) -> ApiResult<Value> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if protobuf::is_protobuf(ct) {
        return protobuf::decode(body);
    }
    let media = ct.split(';').next().unwrap_or("").trim();
    if media.contains("cbor") || media.contains("protobuf") {
        return Err(ApiError::unsupported_body_media_type(media));
    }
    serde_json::from_slice(body)
        .or_else(|_| ops::yaml_value(body))
        .map_err(|e| ApiError::bad_request(format!("error decoding body: {e}")))
}

/// Authenticates and, when the request asks for it, impersonates (see `authn`); records both
/// users for the audit log.
fn identify(
    sh: &Shared,
    headers: &HeaderMap,
    record: &mut Option<audit::Record>,
) -> ApiResult<UserInfo> {
    let st = sh.state.lock();
    let user = authn::authenticate(&st, &sh.admin_token, headers)?;
    if let Some(r) = record.as_mut() {
        r.user = Some(user.clone());
    }
    match authn::impersonate(&st, &user, headers)? {
        None => Ok(user),
        Some(acting) => {
            if let Some(r) = record.as_mut() {
                r.impersonated = Some(acting.clone());
            }
            Ok(acting)
        }
    }
}

async fn route(
    sh: &Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    q: Query,
    body: Bytes,
    record: &mut Option<audit::Record>,
) -> ApiResult<Response> {
    let path = uri.path().trim_end_matches('/');
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let user = identify(sh, headers, record)?;
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match segs.as_slice() {
        ["version"] => return Ok(json_response(200, &discovery::version())),
        ["healthz"] | ["livez"] | ["readyz"] => {
            return Ok(Response::new(Body::from("ok")));
        }
        ["openapi", "v2"] | ["swagger.json"] => {
            let st = sh.state.lock();
            if accept.contains("protobuf") {
                return Ok(Response::builder()
                    .header(
                        "content-type",
                        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                    )
                    .body(Body::from(openapi::v2_proto(&st)))
                    .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()));
            }
            return Ok(json_response(200, &openapi::v2_json(&st)));
        }
        ["openapi", "v3"] => {
            let st = sh.state.lock();
            return Ok(json_response(200, &openapi::v3_root(&st)));
        }
        ["openapi", "v3", "api", v] => {
            let st = sh.state.lock();
            return openapi::v3_group_version(&st, "", v)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| ApiError::no_route(path));
        }
        ["openapi", "v3", "apis", g, v] => {
            let st = sh.state.lock();
            return openapi::v3_group_version(&st, g, v)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| ApiError::no_route(path));
        }
        ["api"] => return Ok(json_response(200, &discovery::core_versions(&sh.addr))),
        ["apis"] => {
            let st = sh.state.lock();
            return Ok(json_response(200, &discovery::group_list(&st)));
        }
        ["apis", g] => {
            let st = sh.state.lock();
            return discovery::group(&st, g)
                .map(|v| json_response(200, &v))
                .ok_or_else(|| ApiError::no_route(path));
        }
        ["api", v] => {
            let st = sh.state.lock();
            return discovery::resource_list(&st, "", v)
                .map(|v| json_response(200, &v))
                .ok_or_else(|| ApiError::no_route(path));
        }
        ["apis", g, v] => {
            let st = sh.state.lock();
            return discovery::resource_list(&st, g, v)
                .map(|v| json_response(200, &v))
                .ok_or_else(|| ApiError::no_route(path));
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route(path)),
    };
    let t = {
        let st = sh.state.lock();
        resolve(&st, group, version, rest).ok_or_else(|| ApiError::no_route(path))?
    };
    let is_watch = q.flag("watch");
    let token_request =
        t.sub == "token" && t.rt.group.is_empty() && t.rt.plural == "serviceaccounts";
    let verb = match (method.as_str(), t.name.is_empty()) {
        ("GET", true) if is_watch => "watch",
        ("GET", true) => "list",
        ("GET", false) => "get",
        ("POST", true) => "create",
        ("POST", false) if token_request => "create",
        ("PUT", false) => "update",
        ("PATCH", false) => "patch",
        ("DELETE", false) => "delete",
        ("DELETE", true) => "deletecollection",
        _ => return Err(ApiError::method_not_allowed()),
    };
    if let Some(r) = record.as_mut() {
        r.verb = verb.to_string();
        r.object_ref = Some(audit::ObjectRef {
            resource: t.rt.plural.clone(),
            subresource: t.sub.clone(),
            namespace: t.ns.clone(),
            name: t.name.clone(),
            api_group: t.rt.group.clone(),
            api_version: t.version.clone(),
        });
    }
    if t.rt.is_review() {
        if verb != "create" {
            return Err(ApiError::method_not_allowed());
        }
        let v = parse_body(headers, &body)?;
        let st = sh.state.lock();
        // The self-reviews are open to every user (upstream's `system:basic-user` role, which
        // kube-emu has no bootstrap copy of); the others need `create` like any write.
        if !t.rt.plural.starts_with("self") {
            let attrs = Attributes {
                verb,
                group: &t.rt.group,
                resource: &t.rt.plural,
                subresource: "",
                namespace: &t.ns,
                name: "",
            };
            if !authorize(&st, &user, &attrs) {
                return Err(ApiError::forbidden(rbac::forbidden_message(&user, &attrs)));
            }
        }
        return Ok(json_response(201, &review(&st, &t, &user, v)));
    }
    let known_sub = t.sub.is_empty()
        || (t.sub == "status" && t.rt.status_subresource)
        || (t.sub == "scale" && t.rt.scale.is_some())
        || token_request;
    if !known_sub {
        return Err(ApiError::no_route(path));
    }
    let sub_verbs: &[&str] = if token_request {
        &["create"]
    } else {
        &["get", "update", "patch"]
    };
    if !t.sub.is_empty() && !sub_verbs.contains(&verb) {
        return Err(ApiError::method_not_allowed());
    }
    if verb == "create" && t.name.is_empty() {
        if let (Some(r), Ok(v)) = (record.as_mut(), parse_body(headers, &body)) {
            if let (Some(o), Some(name)) = (r.object_ref.as_mut(), v["metadata"]["name"].as_str()) {
                o.name = name.to_string();
            }
        }
    }
    {
        let st = sh.state.lock();
        let attrs = Attributes {
            verb,
            group: &t.rt.group,
            resource: &t.rt.plural,
            subresource: &t.sub,
            namespace: &t.ns,
            name: &t.name,
        };
        if !authorize(&st, &user, &attrs) {
            return Err(ApiError::forbidden(rbac::forbidden_message(&user, &attrs)));
        }
    }
    let r = Req {
        user,
        q,
        user_agent: headers
            .get("user-agent")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
    };
    let partial = accept.contains("as=PartialObjectMetadata");
    if token_request {
        let v = parse_body(headers, &body)?;
        let mut st = sh.state.lock();
        return Ok(json_response(201, &authn::token_request(&mut st, &t, v)?));
    }
    if t.sub == "scale" {
        let ct = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let (code, v) = crate::scale::serve(sh, &t, &r, verb, ct, &body).await?;
        return Ok(json_response(code, &v));
    }
    let (code, v) = match verb {
        "watch" => {
            let printer = table::wants_table(accept).then(|| {
                let st = sh.state.lock();
                let include = r.q.get("includeObject").unwrap_or("PartialObjectMetadata");
                table::Printer::new(&st, &t, include)
            });
            return watch(sh.clone(), t, &r.q, partial, printer);
        }
        "list" => (200, ops::list(sh, &t, &r.q)?),
        "get" => (200, ops::get(sh, &t)?),
        "create" => {
            let v = events::stored_form(&t.rt, parse_body(headers, &body)?);
            ops::create(sh, &t, &r, v).await?
        }
        "update" => {
            let v = events::stored_form(&t.rt, parse_body(headers, &body)?);
            ops::update(sh, &t, &r, v).await?
        }
        "patch" => {
            let ct = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            ops::patch(sh, &t, &r, ct, &body).await?
        }
        "delete" => ops::delete(sh, &t, &r, parse_body(headers, &body)?).await?,
        _ => ops::delete_collection(sh, &t, &r, parse_body(headers, &body)?).await?,
    };
    if matches!(verb, "get" | "list") && t.sub.is_empty() && table::wants_table(accept) {
        let include = r.q.get("includeObject").unwrap_or("PartialObjectMetadata");
        let st = sh.state.lock();
        return Ok(json_response(code, &table::to_table(&st, &t, &v, include)));
    }
    if partial && matches!(verb, "get" | "list") {
        return Ok(json_response(code, &partial_metadata(&v)));
    }
    Ok(json_response(code, &v))
}

/// The `PartialObjectMetadata` (or `...List`) form of an object or list, for clients that ask
/// with `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`.
fn partial_metadata(v: &Value) -> Value {
    let one = |o: &Value| json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]});
    match v.get("items").and_then(Value::as_array) {
        Some(items) => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v["metadata"],
            "items": items.iter().map(one).collect::<Vec<_>>(),
        }),
        None => one(v),
    }
}

fn resolve(st: &State, group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    let mk = |plural: &str, ns: &str, name: &str, sub: &str| -> Option<Target> {
        let rt = st.find_type(group, version, plural)?.clone();
        if !ns.is_empty() && !rt.namespaced {
            return None;
        }
        Some(Target {
            rt,
            version: version.to_string(),
            ns: ns.to_string(),
            name: name.to_string(),
            sub: sub.to_string(),
        })
    };
    match rest {
        ["namespaces", ns, plural, tail @ ..]
            if group.is_empty()
                && st
                    .find_type("", version, plural)
                    .is_some_and(|t| t.namespaced) =>
        {
            mk(
                plural,
                ns,
                tail.first().copied().unwrap_or(""),
                tail.get(1).copied().unwrap_or(""),
            )
        }
        ["namespaces", ns, plural, tail @ ..] if !group.is_empty() => mk(
            plural,
            ns,
            tail.first().copied().unwrap_or(""),
            tail.get(1).copied().unwrap_or(""),
        ),
        [plural] => mk(plural, "", "", ""),
        [plural, name] => mk(plural, "", name, ""),
        [plural, name, sub] => mk(plural, "", name, sub),
        _ => None,
    }
}

fn review(st: &State, t: &Target, user: &UserInfo, mut v: Value) -> Value {
    if !v.is_object() {
        v = json!({});
    }
    match t.rt.plural.as_str() {
        "selfsubjectreviews" => {
            v["status"] = json!({"userInfo": user.to_json()});
        }
        "selfsubjectrulesreviews" => {
            // Rule listing is not evaluated: the answer says so, as an incomplete one may.
            v["status"] = json!({"resourceRules": [], "nonResourceRules": [], "incomplete": true,
                                 "evaluationError": "kube-emu does not list rules"});
        }
        "bindings" => {
            // No scheduler: a Binding is accepted and changes nothing.
        }
        "tokenreviews" => {
            let tok = v["spec"]["token"].as_str().unwrap_or("");
            v["status"] = match authn::token_user(st, tok) {
                Some(u) => {
                    json!({"authenticated": true, "user": u.to_json(), "audiences": v["spec"]["audiences"]})
                }
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            };
        }
        _ => {
            if t.rt.plural == "localsubjectaccessreviews" {
                v["spec"]["resourceAttributes"]["namespace"] = json!(t.ns);
            }
            let subject = if t.rt.plural == "selfsubjectaccessreviews" {
                user.clone()
            } else {
                let s = &v["spec"];
                UserInfo {
                    username: s["user"].as_str().unwrap_or("").to_string(),
                    groups: s["groups"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|g| g.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default(),
                    uid: s["uid"].as_str().unwrap_or("").to_string(),
                }
            };
            let ra = &v["spec"]["resourceAttributes"];
            let s = |k: &str| ra[k].as_str().unwrap_or("").to_string();
            let (verb, group, resource, sub, ns, name) = (
                s("verb"),
                s("group"),
                s("resource"),
                s("subresource"),
                s("namespace"),
                s("name"),
            );
            let attrs = Attributes {
                verb: &verb,
                group: &group,
                resource: &resource,
                subresource: &sub,
                namespace: &ns,
                name: &name,
            };
            let allowed = ra.is_object() && authorize(st, &subject, &attrs);
            v["status"] = if allowed {
                json!({"allowed": true, "reason": "allowed by RBAC"})
            } else {
                json!({"allowed": false})
            };
        }
    }
    v["apiVersion"] = json!(t.api_version());
    v["kind"] = json!(t.rt.kind);
    v
}

fn event_line(etype: &str, obj: &Value) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(etype.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    let _ = serde_json::to_writer(&mut out, obj);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

struct Filter {
    partial: bool,
    table: Option<table::Printer>,
    key: (String, String),
    ns: String,
    ls: LabelSelector,
    fs: FieldSelector,
}

impl Filter {
    fn matches(&self, o: &Value) -> bool {
        self.ls.matches(o["metadata"].get("labels")) && self.fs.matches(o)
    }

    /// The line for an event, if the watcher should see it.
    fn line(&self, ev: &Event, t: &Target) -> Option<Bytes> {
        if ev.key != self.key || (!self.ns.is_empty() && ev.namespace != self.ns) {
            return None;
        }
        let now = self.matches(&ev.object);
        let before = ev.prev.as_deref().is_some_and(|p| self.matches(p));
        let etype = match ev.etype {
            EventType::Added if now => "ADDED",
            EventType::Deleted if now || before => "DELETED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            _ => return None,
        };
        Some(self.render(etype, &ev.object, t))
    }

    fn render(&self, etype: &str, o: &Value, t: &Target) -> Bytes {
        if let Some(p) = &self.table {
            event_line(etype, &p.table(&ops::at_version(o, t)))
        } else if self.partial {
            event_line(etype, &partial_metadata(o))
        } else {
            event_line(etype, &ops::at_version(o, t))
        }
    }
}

fn watch(
    sh: Arc<Shared>,
    t: Target,
    q: &Query,
    partial: bool,
    table: Option<table::Printer>,
) -> ApiResult<Response> {
    let filter = Filter {
        partial,
        table,
        key: t.key(),
        ns: t.ns.clone(),
        ls: LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?,
        fs: FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?,
    };
    let bookmarks = q.flag("allowWatchBookmarks");
    let initial_events = q.flag("sendInitialEvents");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let rv_param = q.get("resourceVersion").unwrap_or("").to_string();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(256);
    let (mut sub, start_rv, backlog) = {
        let st = sh.state.lock();
        let sub = st.tx.subscribe();
        let mut backlog = Vec::new();
        if initial_events || rv_param.is_empty() || rv_param == "0" {
            for o in st.list(&t.key(), (!t.ns.is_empty()).then_some(t.ns.as_str())) {
                if filter.matches(&o) {
                    backlog.push(filter.render("ADDED", &o, &t));
                }
            }
            if initial_events && bookmarks {
                backlog.push(bookmark(&t, st.rv, true));
            }
        } else {
            let rv: u64 = rv_param.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {rv_param:?}"))
            })?;
            match st.events_since(rv) {
                Ok(evs) => backlog.extend(evs.iter().filter_map(|e| filter.line(e, &t))),
                Err(oldest) => {
                    let e = ApiError::gone(format!(
                        "too old resource version: {rv} ({})",
                        oldest.saturating_sub(1)
                    ));
                    backlog.push(event_line("ERROR", &e.to_status()));
                    drop(sub);
                    let body = futures::stream::iter(backlog.into_iter().map(Ok::<_, Infallible>));
                    return Ok(stream_response(Body::from_stream(body)));
                }
            }
        }
        (sub, st.rv, backlog)
    };
    let interval = sh.bookmark_interval;
    let mut shutdown = sh.shutdown.clone();
    tokio::spawn(async move {
        for line in backlog {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let deadline = timeout.map(|d| tokio::time::Instant::now() + d);
        let mut last_rv = start_rv;
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => futures::future::pending::<()>().await,
                }
            };
            tokio::select! {
                ev = sub.recv() => match ev {
                    Ok(ev) => {
                        if ev.rv <= start_rv { continue; }
                        last_rv = ev.rv;
                        if let Some(line) = filter.line(&ev, &t) {
                            if tx.send(line).await.is_err() { return; }
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let e = ApiError::gone("too old resource version: watcher fell behind");
                        let _ = tx.send(event_line("ERROR", &e.to_status())).await;
                        return;
                    }
                    Err(_) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    if tx.send(bookmark(&t, last_rv, false)).await.is_err() { return; }
                }
                _ = sleep => return,
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok(stream_response(Body::from_stream(body)))
}

fn stream_response(body: Body) -> Response {
    Response::builder()
        .header("content-type", "application/json")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn bookmark(t: &Target, rv: u64, initial_end: bool) -> Bytes {
    let mut md = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line(
        "BOOKMARK",
        &json!({"kind": t.rt.kind, "apiVersion": t.api_version(), "metadata": md}),
    )
}
