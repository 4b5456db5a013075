//! The audit log (`Options::audit_log`, the binary's `--audit-log FILE`): one JSON line per
//! request, an `audit.k8s.io/v1` `Event` as the apiserver's log backend writes it with a policy
//! of level `Metadata` for everything.
//!
//! Rules implemented:
//! - Every request received gets one event, stage `ResponseComplete`, written when its answer
//!   is ready (for a watch: when the stream starts, with code 200; the apiserver writes
//!   `ResponseStarted` then, and `ResponseComplete` when the watch ends), including requests
//!   refused by authentication (401, with an empty `user`, as the apiserver records them), by
//!   authorization (403) or by an injected fault.
//! - `verb` is the Kubernetes verb of a resource request (`get`, `list`, `watch`, `create`,
//!   `update`, `patch`, `delete`, `deletecollection`), the lowercase HTTP method of any other
//!   request (`/api`, `/openapi/v2`, ...), as the apiserver records non-resource requests.
//! - `user` is the authenticated user, `impersonatedUser` the impersonated one (when the request
//!   impersonates), each `{username, uid?, groups}`.
//! - `objectRef` (resource requests only) has `resource`, `subresource`, `namespace`, `name`,
//!   `apiGroup`, `apiVersion`, each omitted when empty; a create's `name` is the one in the
//!   body, as the apiserver fills it in.
//! - `responseStatus.code` is the HTTP status; `requestURI` the path with its query;
//!   `sourceIPs` is `["127.0.0.1"]` (the emulator listens on loopback only); `userAgent`,
//!   `auditID` (a fresh UUID), `requestReceivedTimestamp` and `stageTimestamp` (RFC 3339 with
//!   microseconds) as upstream. No `annotations`, request or response bodies (level Metadata).
//! - Each line is written and flushed whole under one lock, so a reader never sees half an
//!   event; a failed write is logged and the request still answered.

use std::io::Write as _;
use std::path::Path;
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use crate::rbac::UserInfo;
use crate::timefmt;

/// The open audit log file.
pub struct AuditLog {
    file: parking_lot::Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens (creates or appends to) the log file.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(AuditLog {
            file: parking_lot::Mutex::new(file),
        })
    }

    /// Appends the event of one answered request.
    pub fn write(&self, record: &Record, code: u16) {
        let mut line = match serde_json::to_vec(&record.event(code)) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "kube-emu: an audit event did not serialise");
                return;
            }
        };
        line.push(b'\n');
        let mut f = self.file.lock();
        if let Err(e) = f.write_all(&line).and_then(|()| f.flush()) {
            tracing::error!(error = %e, "kube-emu: writing the audit log failed");
        }
    }
}

/// The object a resource request addresses (`objectRef`).
#[derive(Debug, Clone, Default)]
pub struct ObjectRef {
    /// Resource plural.
    pub resource: String,
    /// Subresource, or empty.
    pub subresource: String,
    /// Namespace, or empty.
    pub namespace: String,
    /// Object name, or empty.
    pub name: String,
    /// API group (empty for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
}

/// What is known of one request, filled in as it is served.
#[derive(Debug, Clone)]
pub struct Record {
    received: SystemTime,
    uri: String,
    user_agent: String,
    /// The authenticated user, once known.
    pub user: Option<UserInfo>,
    /// The impersonated user, when the request impersonates.
    pub impersonated: Option<UserInfo>,
    /// The Kubernetes verb of a resource request (else the lowercase HTTP method).
    pub verb: String,
    /// The addressed object of a resource request.
    pub object_ref: Option<ObjectRef>,
}

impl Record {
    /// A record for a request just received.
    pub fn new(method: &str, uri: &str, user_agent: &str) -> Self {
        Record {
            received: SystemTime::now(),
            uri: uri.to_string(),
            user_agent: user_agent.to_string(),
            user: None,
            impersonated: None,
            verb: method.to_ascii_lowercase(),
            object_ref: None,
        }
    }

    fn user_json(u: &UserInfo) -> Value {
        let mut v = json!({"username": u.username, "groups": u.groups});
        if !u.uid.is_empty() {
            v["uid"] = json!(u.uid);
        }
        v
    }

    /// The `audit.k8s.io/v1` `Event` of this request answered with `code`.
    pub fn event(&self, code: u16) -> Value {
        let mut ev = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": uuid::Uuid::new_v4().to_string(),
            "stage": "ResponseComplete",
            "requestURI": self.uri,
            "verb": self.verb,
            "user": self.user.as_ref().map(Self::user_json).unwrap_or_else(|| json!({})),
            "sourceIPs": ["127.0.0.1"],
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": timefmt::format_micros(self.received),
            "stageTimestamp": timefmt::format_micros(SystemTime::now()),
        });
        if !self.user_agent.is_empty() {
            ev["userAgent"] = json!(self.user_agent);
        }
        if let Some(u) = &self.impersonated {
            ev["impersonatedUser"] = Self::user_json(u);
        }
        if let Some(r) = &self.object_ref {
            let mut m = Map::new();
            for (k, v) in [
                ("resource", &r.resource),
                ("namespace", &r.namespace),
                ("name", &r.name),
                ("apiGroup", &r.api_group),
                ("apiVersion", &r.api_version),
                ("subresource", &r.subresource),
            ] {
                if !v.is_empty() {
                    m.insert(k.into(), json!(v));
                }
            }
            ev["objectRef"] = Value::Object(m);
        }
        ev
    }
}
