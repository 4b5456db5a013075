//! Server-side printing: the `meta.k8s.io/v1` `Table` answer to a GET or LIST whose `Accept`
//! asks for `application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` sends).
//!
//! Rules implemented:
//! - Custom resources: a `Name` column (`format: name`) first, then the served version's
//!   `additionalPrinterColumns` in declaration order (name, type, format, description,
//!   priority), read from the stored CustomResourceDefinition. A CRD with no printer columns gets
//!   `Name` and `Age` (`.metadata.creationTimestamp`), as the apiserver's defaulting does.
//! - Built-in kinds: the columns a real apiserver prints (its internal printers) for
//!   Deployment (Ready `ready/desired`, Up-to-date, Available, Age; Containers, Images, Selector
//!   wide), StatefulSet, DaemonSet, ReplicaSet, Job, Pod (Ready, Status, Restarts, Age; IP, Node
//!   wide), Service (Type, Cluster-IP, External-IP, Port(s), Age; Selector wide), ConfigMap
//!   (Data), Secret (Type, Data), Namespace (Status) and Event (Last Seen, Type, Reason, Object,
//!   Message; Subobject, Source, First Seen, Count, Name wide; both the core and the
//!   `events.k8s.io` form); `Name` and `Age` for the other kinds. Status-derived cells read the
//!   status as stored (kube-emu runs no workload controllers: counts are 0 unless something
//!   writes the status).
//! - Cells: the JSONPath subset `.a.b.c`, `[n]` (index) and `[?(@.k=="v")]` (filter on a
//!   dotted key path, string or bare literal) is evaluated on the object; the first match is the
//!   cell. A missing value is `null` (kubectl prints `<none>`). `date` columns become the
//!   human-readable age of the timestamp (`5s`, `3m10s`, `2d4h`, like `duration.HumanDuration`).
//!   Strings stay strings, integers/numbers/booleans stay JSON values, objects and lists are their
//!   JSON text.
//! - Watches asking for a Table get one Table (column definitions and one row) per event.
//! - Each row carries the object per `includeObject`: `None`, `Object`, or (the default)
//!   `PartialObjectMetadata`. The table's `metadata` is the list's (resourceVersion, continue).
//!   An unsupported JSONPath is a `null` cell, never an error.

use serde_json::{json, Value};

use crate::ops::Target;
use crate::state::State;
use crate::timefmt;

/// Whether an `Accept` header asks for a `meta.k8s.io/v1` Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let p: Vec<&str> = part.split(';').map(str::trim).collect();
        p.contains(&"as=Table") && p.contains(&"g=meta.k8s.io") && p.contains(&"v=v1")
    })
}

/// One printed column.
#[derive(Debug, Clone)]
struct Column {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i64,
    path: String,
    /// A built-in kind's cell, computed from the object and the current time (instead of `path`).
    compute: Option<fn(&Value, i64) -> Value>,
}

fn name_column() -> Column {
    Column {
        name: "Name".into(),
        ty: "string".into(),
        format: "name".into(),
        description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.".into(),
        priority: 0,
        path: ".metadata.name".into(),
        compute: None,
    }
}

fn age_column() -> Column {
    Column {
        name: "Age".into(),
        ty: "date".into(),
        format: String::new(),
        description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(),
        priority: 0,
        path: ".metadata.creationTimestamp".into(),
        compute: None,
    }
}

/// The printer columns of a served version of a custom resource, from its stored CRD.
fn crd_columns(st: &State, t: &Target) -> Option<Vec<Column>> {
    let crd = st.get(
        &(
            "apiextensions.k8s.io".to_string(),
            "customresourcedefinitions".to_string(),
        ),
        "",
        &format!("{}.{}", t.rt.plural, t.rt.group),
    )?;
    let version = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"].as_str() == Some(t.version.as_str()))?;
    let cols = version["additionalPrinterColumns"].as_array()?;
    if cols.is_empty() {
        return None;
    }
    let s = |c: &Value, k: &str| c[k].as_str().unwrap_or("").to_string();
    Some(
        cols.iter()
            .map(|c| Column {
                name: s(c, "name"),
                ty: s(c, "type"),
                format: s(c, "format"),
                description: s(c, "description"),
                priority: c["priority"].as_i64().unwrap_or(0),
                path: s(c, "jsonPath"),
                compute: None,
            })
            .collect(),
    )
}

/// A computed column of a built-in kind.
fn col(name: &str, ty: &str, priority: i64, f: fn(&Value, i64) -> Value) -> Column {
    Column {
        name: name.into(),
        ty: ty.into(),
        format: String::new(),
        description: String::new(),
        priority,
        path: String::new(),
        compute: Some(f),
    }
}

fn int_at(o: &Value, path: &[&str]) -> i64 {
    path.iter().fold(o, |v, k| &v[*k]).as_i64().unwrap_or(0)
}

/// `spec.replicas`, defaulted to 1 as the apiserver defaults it.
fn replicas(o: &Value) -> i64 {
    o["spec"]["replicas"].as_i64().unwrap_or(1)
}

fn containers(o: &Value) -> &[Value] {
    o["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn joined(items: &[Value], key: &str) -> Value {
    let v: Vec<&str> = items.iter().filter_map(|c| c[key].as_str()).collect();
    json!(v.join(","))
}

fn workload_containers(o: &Value, _: i64) -> Value {
    joined(containers(o), "name")
}

fn workload_images(o: &Value, _: i64) -> Value {
    joined(containers(o), "image")
}

fn workload_selector(o: &Value, _: i64) -> Value {
    let sel = &o["spec"]["selector"];
    let mut parts: Vec<String> = sel["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let vals: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let key = e["key"].as_str().unwrap_or("");
        parts.push(match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", vals.join(",")),
            "NotIn" => format!("{key} notin ({})", vals.join(",")),
            "DoesNotExist" => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    json!(parts.join(","))
}

fn map_len(v: &Value) -> i64 {
    v.as_object().map_or(0, |m| m.len() as i64)
}

fn age_of(ts: &Value, now: i64) -> Option<String> {
    ts.as_str()
        .and_then(parse_rfc3339)
        .map(|t| human_duration(now - t))
}

fn pod_ready(o: &Value, _: i64) -> Value {
    let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = o["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["ready"] == json!(true))
        .count();
    json!(format!("{ready}/{total}"))
}

fn pod_status(o: &Value, _: i64) -> Value {
    if o["metadata"]["deletionTimestamp"].is_string() {
        return json!("Terminating");
    }
    let st = &o["status"];
    for c in st["containerStatuses"].as_array().into_iter().flatten() {
        for state in ["waiting", "terminated"] {
            if let Some(r) = c["state"][state]["reason"].as_str() {
                return json!(r);
            }
        }
    }
    json!(st["reason"]
        .as_str()
        .or(st["phase"].as_str())
        .unwrap_or("Pending"))
}

fn pod_restarts(o: &Value, _: i64) -> Value {
    let n: i64 = o["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["restartCount"].as_i64().unwrap_or(0))
        .sum();
    json!(n.to_string())
}

fn service_external_ip(o: &Value, _: i64) -> Value {
    let spec = &o["spec"];
    let ext: Vec<&str> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let lb: Vec<&str> = o["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
        .collect();
    let out = match spec["type"].as_str().unwrap_or("ClusterIP") {
        "ExternalName" => spec["externalName"].as_str().unwrap_or("").to_string(),
        "LoadBalancer" if !lb.is_empty() || !ext.is_empty() => lb
            .iter()
            .chain(ext.iter())
            .copied()
            .collect::<Vec<_>>()
            .join(","),
        "LoadBalancer" => "<pending>".to_string(),
        _ if !ext.is_empty() => ext.join(","),
        _ => "<none>".to_string(),
    };
    json!(out)
}

fn service_ports(o: &Value, _: i64) -> Value {
    let ports: Vec<String> = o["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(np) if np > 0 => format!("{}:{np}/{proto}", int_at(p, &["port"])),
                _ => format!("{}/{proto}", int_at(p, &["port"])),
            }
        })
        .collect();
    json!(if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    })
}

/// An Event field in either form (core `involvedObject`/`message`/`source`, or
/// `events.k8s.io/v1` `regarding`/`note`/`deprecatedSource`).
fn ev<'a>(o: &'a Value, core: &str, new: &str) -> &'a Value {
    if o[core].is_null() {
        &o[new]
    } else {
        &o[core]
    }
}

fn event_first_seen(o: &Value, now: i64) -> Option<String> {
    age_of(ev(o, "firstTimestamp", "deprecatedFirstTimestamp"), now)
        .or_else(|| age_of(&o["eventTime"], now))
}

fn event_last_seen(o: &Value, now: i64) -> Value {
    let last = age_of(&o["series"]["lastObservedTime"], now)
        .or_else(|| age_of(ev(o, "lastTimestamp", "deprecatedLastTimestamp"), now))
        .or_else(|| event_first_seen(o, now));
    json!(last.unwrap_or_else(|| "<unknown>".into()))
}

fn event_object(o: &Value, _: i64) -> Value {
    let r = ev(o, "involvedObject", "regarding");
    let kind = r["kind"].as_str().unwrap_or("").to_lowercase();
    json!(match r["name"].as_str() {
        Some(n) if !n.is_empty() => format!("{kind}/{n}"),
        _ => kind,
    })
}

fn event_source(o: &Value, _: i64) -> Value {
    let src = ev(o, "source", "deprecatedSource");
    let component = src["component"]
        .as_str()
        .filter(|c| !c.is_empty())
        .or(ev(o, "reportingComponent", "reportingController").as_str())
        .unwrap_or("");
    let host = src["host"]
        .as_str()
        .filter(|h| !h.is_empty())
        .or(o["reportingInstance"].as_str())
        .unwrap_or("");
    json!(if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    })
}

fn event_count(o: &Value, _: i64) -> Value {
    let n = o["series"]["count"]
        .as_i64()
        .or(ev(o, "count", "deprecatedCount").as_i64())
        .filter(|n| *n > 0)
        .unwrap_or(1);
    json!(n)
}

/// The columns a real apiserver prints for the built-in kinds kubectl users look at
/// (`pkg/printers/internalversion`), or `None` (then `Name` and `Age`).
fn builtin_columns(t: &Target) -> Option<Vec<Column>> {
    let age = age_column;
    Some(match (t.rt.group.as_str(), t.rt.plural.as_str()) {
        ("apps", "deployments") => vec![
            name_column(),
            col("Ready", "string", 0, |o, _| {
                json!(format!(
                    "{}/{}",
                    int_at(o, &["status", "readyReplicas"]),
                    replicas(o)
                ))
            }),
            col("Up-to-date", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "updatedReplicas"]))
            }),
            col("Available", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "availableReplicas"]))
            }),
            age(),
            col("Containers", "string", 1, workload_containers),
            col("Images", "string", 1, workload_images),
            col("Selector", "string", 1, workload_selector),
        ],
        ("apps", "statefulsets") => vec![
            name_column(),
            col("Ready", "string", 0, |o, _| {
                json!(format!(
                    "{}/{}",
                    int_at(o, &["status", "readyReplicas"]),
                    replicas(o)
                ))
            }),
            age(),
            col("Containers", "string", 1, workload_containers),
            col("Images", "string", 1, workload_images),
        ],
        ("apps", "daemonsets") => vec![
            name_column(),
            col("Desired", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "desiredNumberScheduled"]))
            }),
            col("Current", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "currentNumberScheduled"]))
            }),
            col("Ready", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "numberReady"]))
            }),
            col("Up-to-date", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "updatedNumberScheduled"]))
            }),
            col("Available", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "numberAvailable"]))
            }),
            col("Node Selector", "string", 0, |o, _| {
                let sel: Vec<String> = o["spec"]["template"]["spec"]["nodeSelector"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect();
                json!(if sel.is_empty() {
                    "<none>".to_string()
                } else {
                    sel.join(",")
                })
            }),
            age(),
            col("Containers", "string", 1, workload_containers),
            col("Images", "string", 1, workload_images),
            col("Selector", "string", 1, workload_selector),
        ],
        ("apps", "replicasets") => vec![
            name_column(),
            col("Desired", "integer", 0, |o, _| json!(replicas(o))),
            col("Current", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "replicas"]))
            }),
            col("Ready", "integer", 0, |o, _| {
                json!(int_at(o, &["status", "readyReplicas"]))
            }),
            age(),
            col("Containers", "string", 1, workload_containers),
            col("Images", "string", 1, workload_images),
            col("Selector", "string", 1, workload_selector),
        ],
        ("batch", "jobs") => vec![
            name_column(),
            col("Completions", "string", 0, |o, _| {
                json!(format!(
                    "{}/{}",
                    int_at(o, &["status", "succeeded"]),
                    o["spec"]["completions"].as_i64().unwrap_or(1)
                ))
            }),
            age(),
            col("Containers", "string", 1, workload_containers),
            col("Images", "string", 1, workload_images),
        ],
        ("", "pods") => vec![
            name_column(),
            col("Ready", "string", 0, pod_ready),
            col("Status", "string", 0, pod_status),
            col("Restarts", "string", 0, pod_restarts),
            age(),
            col("IP", "string", 1, |o, _| {
                json!(o["status"]["podIP"].as_str().unwrap_or("<none>"))
            }),
            col("Node", "string", 1, |o, _| {
                json!(o["spec"]["nodeName"].as_str().unwrap_or("<none>"))
            }),
        ],
        ("", "services") => vec![
            name_column(),
            col("Type", "string", 0, |o, _| {
                json!(o["spec"]["type"].as_str().unwrap_or("ClusterIP"))
            }),
            col("Cluster-IP", "string", 0, |o, _| {
                json!(o["spec"]["clusterIP"].as_str().unwrap_or("<none>"))
            }),
            col("External-IP", "string", 0, service_external_ip),
            col("Port(s)", "string", 0, service_ports),
            age(),
            col("Selector", "string", 1, |o, _| {
                let sel: Vec<String> = o["spec"]["selector"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect();
                json!(if sel.is_empty() {
                    "<none>".to_string()
                } else {
                    sel.join(",")
                })
            }),
        ],
        ("", "configmaps") => vec![
            name_column(),
            col("Data", "integer", 0, |o, _| {
                json!(map_len(&o["data"]) + map_len(&o["binaryData"]))
            }),
            age(),
        ],
        ("", "secrets") => vec![
            name_column(),
            col("Type", "string", 0, |o, _| {
                json!(o["type"].as_str().unwrap_or("Opaque"))
            }),
            col("Data", "integer", 0, |o, _| json!(map_len(&o["data"]))),
            age(),
        ],
        ("", "namespaces") => vec![
            name_column(),
            col("Status", "string", 0, |o, _| {
                json!(o["status"]["phase"].as_str().unwrap_or("Active"))
            }),
            age(),
        ],
        ("" | "events.k8s.io", "events") => vec![
            col("Last Seen", "string", 0, event_last_seen),
            col("Type", "string", 0, |o, _| {
                json!(o["type"].as_str().unwrap_or(""))
            }),
            col("Reason", "string", 0, |o, _| {
                json!(o["reason"].as_str().unwrap_or(""))
            }),
            col("Object", "string", 0, event_object),
            col("Subobject", "string", 1, |o, _| {
                json!(ev(o, "involvedObject", "regarding")["fieldPath"]
                    .as_str()
                    .unwrap_or(""))
            }),
            col("Source", "string", 1, event_source),
            col("Message", "string", 0, |o, _| {
                json!(ev(o, "message", "note").as_str().unwrap_or("").trim())
            }),
            col("First Seen", "string", 1, |o, now| {
                json!(event_first_seen(o, now).unwrap_or_else(|| "<unknown>".into()))
            }),
            col("Count", "integer", 1, event_count),
            Column {
                priority: 1,
                ..name_column()
            },
        ],
        _ => return None,
    })
}

fn columns(st: &State, t: &Target) -> Vec<Column> {
    if !t.rt.custom {
        if let Some(cols) = builtin_columns(t) {
            return cols;
        }
    }
    let mut out = vec![name_column()];
    match t.rt.custom.then(|| crd_columns(st, t)).flatten() {
        Some(cols) => out.extend(cols),
        None => out.push(age_column()),
    }
    out
}

/// A parsed step of the supported JSONPath subset.
#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    Filter(Vec<String>, String),
}

/// Parses `.a.b[0].c[?(@.k.l=="v")].d`; `None` for anything outside the subset.
fn parse_path(p: &str) -> Option<Vec<Step>> {
    let p = p.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let mut rest = p.trim();
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return None;
            }
            steps.push(Step::Field(name.to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("[?(@") {
            let end = r.find(")]")?;
            let (key, lit) = r[..end].split_once("==")?;
            let keys: Vec<String> = key
                .trim()
                .split('.')
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .collect();
            let lit = lit.trim();
            let lit = lit
                .strip_prefix('"')
                .and_then(|l| l.strip_suffix('"'))
                .or_else(|| lit.strip_prefix('\'').and_then(|l| l.strip_suffix('\'')))
                .unwrap_or(lit);
            if keys.is_empty() {
                return None;
            }
            steps.push(Step::Filter(keys, lit.to_string()));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            steps.push(Step::Index(r[..end].trim().parse().ok()?));
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

fn lit_matches(v: &Value, lit: &str) -> bool {
    match v {
        Value::String(s) => s == lit,
        Value::Null => false,
        other => serde_json::to_string(other).is_ok_and(|s| s == lit),
    }
}

/// The values a JSONPath of the subset selects in `obj`.
fn eval_path<'a>(obj: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut cur = vec![obj];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(f) => {
                    if let Some(x) = v.get(f.as_str()) {
                        next.push(x);
                    }
                }
                Step::Index(i) => {
                    if let Some(x) = v.get(*i) {
                        next.push(x);
                    }
                }
                Step::Filter(keys, lit) => {
                    for el in v.as_array().into_iter().flatten() {
                        let mut k = Some(el);
                        for key in keys {
                            k = k.and_then(|x| x.get(key.as_str()));
                        }
                        if k.is_some_and(|x| lit_matches(x, lit)) {
                            next.push(el);
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur.retain(|v| !v.is_null());
    cur
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`).
fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, sec) = (
        n(0..4)?,
        n(5..7)?,
        n(8..10)?,
        n(11..13)?,
        n(14..16)?,
        n(17..19)?,
    );
    let mut tail = &s[19..];
    if let Some(r) = tail.strip_prefix('.') {
        let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        tail = &r[end..];
    }
    let offset = match tail {
        "Z" | "z" => 0,
        t if t.len() == 6 => {
            let sign = if t.starts_with('-') { -1 } else { 1 };
            let oh: i64 = t.get(1..3)?.parse().ok()?;
            let om: i64 = t.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    // Days from civil (proleptic Gregorian), the inverse of `timefmt::format_unix`.
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2.rem_euclid(400);
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

/// `duration.HumanDuration` of apimachinery: the age kubectl prints.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        return match s % 60 {
            0 => format!("{m}m"),
            r => format!("{m}m{r}s"),
        };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        return match m % 60 {
            0 => format!("{h}h"),
            r => format!("{h}h{r}m"),
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        return match h % 24 {
            0 => format!("{}d", h / 24),
            r => format!("{}d{r}h", h / 24),
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let y = h / 24 / 365;
        return match (h / 24) % 365 {
            0 => format!("{y}y"),
            r => format!("{y}y{r}d"),
        };
    }
    format!("{}y", h / 24 / 365)
}

fn now_unix() -> i64 {
    parse_rfc3339(&timefmt::now()).unwrap_or(0)
}

fn cell(obj: &Value, c: &Column, now: i64) -> Value {
    if let Some(f) = c.compute {
        return f(obj, now);
    }
    let Some(steps) = parse_path(&c.path) else {
        return Value::Null;
    };
    let Some(v) = eval_path(obj, &steps).into_iter().next() else {
        return Value::Null;
    };
    if c.ty == "date" {
        return match v.as_str().and_then(parse_rfc3339) {
            Some(ts) => json!(human_duration(now - ts)),
            None => Value::Null,
        };
    }
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => v.clone(),
        other => json!(other.to_string()),
    }
}

fn row_object(obj: &Value, include: &str) -> Value {
    match include {
        "None" => Value::Null,
        "Object" => obj.clone(),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }),
    }
}

/// The columns and row-object mode of one request, computed once (a watch reuses it for every
/// event).
#[derive(Debug, Clone)]
pub struct Printer {
    cols: Vec<Column>,
    include_object: String,
}

impl Printer {
    /// The printer for target `t` (`include_object`: `None`, `Object` or
    /// `PartialObjectMetadata`).
    pub fn new(st: &State, t: &Target, include_object: &str) -> Self {
        Printer {
            cols: columns(st, t),
            include_object: include_object.to_string(),
        }
    }

    /// The Table for a GET (one object), a LIST (`items`) or a watch event's object.
    pub fn table(&self, v: &Value) -> Value {
        build(&self.cols, v, &self.include_object)
    }
}

/// The Table for a GET (one object) or LIST (`items`) answer `v` of target `t`.
pub fn to_table(st: &State, t: &Target, v: &Value, include_object: &str) -> Value {
    Printer::new(st, t, include_object).table(v)
}

fn build(cols: &[Column], v: &Value, include_object: &str) -> Value {
    let now = now_unix();
    let objs: Vec<&Value> = match v.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None => vec![v],
    };
    let rows: Vec<Value> = objs
        .into_iter()
        .map(|o| {
            let cells: Vec<Value> = cols.iter().map(|c| cell(o, c, now)).collect();
            let mut row = json!({"cells": cells});
            let ob = row_object(o, include_object);
            if !ob.is_null() {
                row["object"] = ob;
            }
            row
        })
        .collect();
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "type": c.ty, "format": c.format,
                "description": c.description, "priority": c.priority,
            })
        })
        .collect();
    let mut meta = json!({});
    if v.get("items").is_some() {
        meta = v["metadata"].clone();
    } else if let Some(rv) = v["metadata"].get("resourceVersion") {
        meta["resourceVersion"] = rv.clone();
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_detection() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
        assert!(!wants_table(
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
        ));
    }

    #[test]
    fn jsonpath_subset() {
        let o = json!({"status": {"conditions": [
            {"type": "Reconciling", "status": "False"},
            {"type": "Ready", "status": "True"}
        ]}, "spec": {"module": {"path": "a/b"}, "ports": [1, 2]}});
        let ready = parse_path(r#".status.conditions[?(@.type=="Ready")].status"#);
        assert_eq!(
            eval_path(&o, &ready.unwrap_or_default()),
            vec![&json!("True")]
        );
        let path = parse_path(".spec.module.path").unwrap_or_default();
        assert_eq!(eval_path(&o, &path), vec![&json!("a/b")]);
        let idx = parse_path(".spec.ports[1]").unwrap_or_default();
        assert_eq!(eval_path(&o, &idx), vec![&json!(2)]);
        assert!(eval_path(&o, &parse_path(".spec.nope").unwrap_or_default()).is_empty());
        assert_eq!(parse_path(".a..b"), None);
    }

    #[test]
    fn human_durations_match_apimachinery() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(190), "3m10s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(52 * 3600), "2d4h");
        assert_eq!(human_duration(400 * 86_400), "400d");
        assert_eq!(human_duration(-5), "<invalid>");
    }

    #[test]
    fn rfc3339_round_trips_with_timefmt() {
        for secs in [0u64, 951_782_400, 1_700_000_000] {
            assert_eq!(
                parse_rfc3339(&timefmt::format_unix(secs)),
                Some(secs as i64)
            );
        }
        assert_eq!(
            parse_rfc3339("2023-11-14T23:13:20.5+01:00"),
            Some(1_700_000_000)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
