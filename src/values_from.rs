//! Values from Secrets and ConfigMaps (issue 40, helm-controller's `valuesFrom`): read, merge,
//! redact. The ModuleInstance reconciler (`controller::values_from`) and the render API
//! (`server::render_api`) share this module; each reads with its own identity.
//!
//! Rules:
//! - **Reading** ([`read`]): each reference is read with the client given (the reconciler's
//!   apply identity: the instance's ServiceAccount, else the controller; the render API's caller),
//!   in the instance's namespace only: a reference naming another namespace is
//!   [`Error::OtherNamespace`], before any request. An object referenced twice is read once.
//!   A missing object or key is [`Error::NotFound`] unless the reference is `optional`
//!   (then it contributes nothing); a 403 is [`Error::Forbidden`]; another API failure is
//!   [`Error::Api`] (retried by the caller). A Secret's data is base64-decoded by the client; a
//!   ConfigMap's key is looked up in `data`, then `binaryData`.
//! - **Merging** ([`merge`], helm-controller's `MergeMaps`): references in order, then
//!   `spec.values`; a later source wins per key, two mappings merge key by key (recursively),
//!   anything else (scalars, lists, a mapping over a scalar) is replaced whole. A key's content
//!   is a YAML (JSON is YAML) mapping merged at the root; an empty content merges nothing; any
//!   other document is [`Error::Invalid`] (the error names the line and column, never the text).
//! - **`targetPath`** ([`set_path`], Helm's `--set` path syntax): segments separated by `.`, a
//!   `\.` is a dot inside a key, `name[3]` indexes a list (grown with nulls as Helm does), a
//!   key's content is the one value set there. Unquoted `true`/`false`/`null` and integers are
//!   typed as Helm's `strvals.ParseInto` types them (a number with a leading zero or a fraction
//!   stays a string); content wrapped in single or double quotes is the string inside them.
//!   Limits, stated: the content is never split at commas and `{a,b}` list literals are not
//!   parsed (it is one value, unlike `helm --set`); an index above 65,535 is refused.
//! - **Secrets never leak** ([`Redactor`]): every string a Secret contributes (each scalar leaf of
//!   its mapping, or the whole value set by `targetPath`), with its JSON-escaped and base64
//!   forms, is replaced by [`REDACTED`] in every message the caller writes: conditions, events,
//!   history, render API errors and diffs. A value shorter than [`MIN_REDACTED`] characters is not
//!   searched for (it cannot be told from ordinary words; such a value is no secret anyway).
//!   Logs are redacted where they are written ([`Redacting`], [`LogWriter`]): a process-wide set of the values
//!   in use ([`register`], [`forget`]) is removed from every formatted log line, whatever its
//!   level or origin (the Kubernetes client's debug lines echo server error messages).
//!   ConfigMap content is not secret and is not redacted.
//! - **Digest**: the caller digests the merged values (so a changed Secret re-renders and
//!   re-applies); [`digest_input`] keys them by the instance uid, so the stored digest cannot be
//!   compared across instances or against a table of likely values.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::{LazyLock, PoisonError, RwLock};

use base64::Engine as _;
use crds::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use crds::values_from::{ValuesKind, ValuesReference};
use serde_json::{Map, Value};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";
/// The shortest value searched for.
pub const MIN_REDACTED: usize = 4;

/// Why values could not be read (messages name objects and keys, never content).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A reference names another namespace.
    #[error("valuesFrom {kind} {namespace}/{name}: another namespace than the instance's ({own}) is refused")]
    OtherNamespace {
        /// The kind referenced.
        kind: &'static str,
        /// The namespace named.
        namespace: String,
        /// The object's name.
        name: String,
        /// The instance's namespace.
        own: String,
    },
    /// A required object or key is missing.
    #[error("valuesFrom {what} not found")]
    NotFound {
        /// `Secret ns/name` or `key k of Secret ns/name`.
        what: String,
    },
    /// The identity may not read the object.
    #[error("valuesFrom: reading {what} is forbidden: {message}")]
    Forbidden {
        /// `Secret ns/name`.
        what: String,
        /// The API server's message (names the user and the resource).
        message: String,
    },
    /// The content is not usable.
    #[error("valuesFrom {what}: {why}")]
    Invalid {
        /// `key k of Secret ns/name`.
        what: String,
        /// Why (never the content).
        why: String,
    },
    /// Another API failure (retried).
    #[error("valuesFrom: reading {what}: {source}")]
    Api {
        /// `Secret ns/name`.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Whether the failure may pass without a change of the instance (missing objects, API
    /// failures) rather than needing one (refusals, bad content, forbidden).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::NotFound { .. } | Error::Api { .. })
    }
}

/// The values the references contributed, merged in order, and what must never be shown.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// The merged values of the references (`None`: they contributed nothing).
    pub values: Option<Value>,
    /// The Secret-sourced strings to redact.
    pub redactor: Redactor,
}

/// `Kind ns/name`.
fn object_name(kind: ValuesKind, namespace: &str, name: &str) -> String {
    format!("{} {namespace}/{name}", kind.as_str())
}

/// One object's data: key → bytes (`None`: the object does not exist).
type Data = Option<BTreeMap<String, Vec<u8>>>;

async fn fetch(
    client: &kube::Client,
    kind: ValuesKind,
    namespace: &str,
    name: &str,
) -> Result<Data, Error> {
    let what = object_name(kind, namespace, name);
    let classify = |e: kube::Error| match &e {
        kube::Error::Api(s) if s.code == 403 => Error::Forbidden {
            what: what.clone(),
            message: s.message.clone(),
        },
        _ => Error::Api {
            what: what.clone(),
            source: e,
        },
    };
    match kind {
        ValuesKind::Secret => {
            let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
            let Some(s) = api.get_opt(name).await.map_err(classify)? else {
                return Ok(None);
            };
            let mut out = BTreeMap::new();
            for (k, v) in s.data.unwrap_or_default() {
                out.insert(k, v.0);
            }
            // A server folds stringData into data; an object read from a store that does not
            // still counts it.
            for (k, v) in s.string_data.unwrap_or_default() {
                out.entry(k).or_insert_with(|| v.into_bytes());
            }
            Ok(Some(out))
        }
        ValuesKind::ConfigMap => {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), namespace);
            let Some(c) = api.get_opt(name).await.map_err(classify)? else {
                return Ok(None);
            };
            let mut out = BTreeMap::new();
            for (k, v) in c.binary_data.unwrap_or_default() {
                out.insert(k, v.0);
            }
            for (k, v) in c.data.unwrap_or_default() {
                out.insert(k, v.into_bytes());
            }
            Ok(Some(out))
        }
    }
}

/// Reads and merges `refs` in order as `client` in `namespace` (module rules).
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    refs: &[ValuesReference],
) -> Result<Read, Error> {
    for r in refs {
        if let Some(ns) = r
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty() && *n != namespace)
        {
            return Err(Error::OtherNamespace {
                kind: r.kind.as_str(),
                namespace: ns.to_owned(),
                name: r.name.clone(),
                own: namespace.to_owned(),
            });
        }
    }
    let mut objects: HashMap<(ValuesKind, String), Data> = HashMap::new();
    let mut out = Read::default();
    for r in refs {
        let key = (r.kind, r.name.clone());
        if !objects.contains_key(&key) {
            let data = fetch(client, r.kind, namespace, &r.name).await?;
            objects.insert(key.clone(), data);
        }
        let object = object_name(r.kind, namespace, &r.name);
        let content = match objects.get(&key).and_then(Option::as_ref) {
            None if r.is_optional() => continue,
            None => return Err(Error::NotFound { what: object }),
            Some(data) => match data.get(r.key()) {
                None if r.is_optional() => continue,
                None => {
                    return Err(Error::NotFound {
                        what: format!("key {} of {object}", r.key()),
                    })
                }
                Some(bytes) => bytes,
            },
        };
        let what = format!("key {} of {object}", r.key());
        let text = std::str::from_utf8(content).map_err(|_| Error::Invalid {
            what: what.clone(),
            why: "the content is not UTF-8 text".to_owned(),
        })?;
        let secret = r.kind == ValuesKind::Secret;
        let layer = match r.target_path.as_deref().filter(|p| !p.is_empty()) {
            Some(path) => {
                if secret {
                    out.redactor.add(text);
                    out.redactor.add(unquote(text).0);
                }
                let mut layer = Value::Object(Map::new());
                set_path(&mut layer, path, text).map_err(|why| Error::Invalid {
                    what: what.clone(),
                    why: format!("targetPath {path:?}: {why}"),
                })?;
                layer
            }
            None => {
                let layer = parse_mapping(text).map_err(|why| Error::Invalid {
                    what: what.clone(),
                    why,
                })?;
                if secret {
                    out.redactor.add_leaves(&layer);
                }
                layer
            }
        };
        match out.values.as_mut() {
            Some(v) => merge(v, layer),
            None => out.values = Some(layer),
        }
    }
    Ok(out)
}

/// A key's content as a mapping (empty content: an empty mapping); the error names the position
/// only.
pub fn parse_mapping(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let v: Value = crds::yaml::from_str(text).map_err(|e| match e.location() {
        Some(l) => format!("not valid YAML (line {}, column {})", l.line(), l.column()),
        None => "not valid YAML".to_owned(),
    })?;
    match v {
        Value::Object(_) => Ok(v),
        Value::Null => Ok(Value::Object(Map::new())),
        _ => Err(
            "the content is not a YAML mapping (set targetPath to use it as one value)".to_owned(),
        ),
    }
}

/// Merges `overlay` into `base` (module rules: mappings merge recursively, the overlay wins).
pub fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// The values a reconcile renders with: the references' values, then `spec` on top.
pub fn compose(from: Option<Value>, spec: Option<&Value>) -> Option<Value> {
    match (from, spec) {
        (None, s) => s.cloned(),
        (Some(f), None) => Some(f),
        (Some(mut f), Some(s)) => {
            merge(&mut f, s.clone());
            Some(f)
        }
    }
}

/// The bytes whose digest is the config digest of values read with `valuesFrom` (module rules:
/// keyed by the instance `uid`).
pub fn digest_input(uid: &str, values: Option<&Value>) -> Vec<u8> {
    let mut out = format!("opm-values-from\0{uid}\0").into_bytes();
    if let Some(v) = values {
        out.extend(serde_json::to_vec(v).unwrap_or_default());
    }
    out
}

/// Whether `text` is wrapped in single or double quotes: the text inside, and whether it was.
fn unquote(text: &str) -> (&str, bool) {
    for q in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(q) && text.ends_with(q) {
            return (&text[1..text.len() - 1], true);
        }
    }
    (text, false)
}

/// Helm's `strvals` typing of an unquoted value (module rules).
fn typed(text: &str) -> Value {
    match text {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    let leading_zero = digits.len() > 1 && digits.starts_with('0');
    if !digits.is_empty() && !leading_zero && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = text.parse::<i64>() {
            return Value::from(n);
        }
    }
    Value::String(text.to_owned())
}

/// One segment of a target path: a key, optionally indexed.
#[derive(Debug, PartialEq, Eq)]
struct Segment {
    key: String,
    index: Option<usize>,
}

/// The largest list index a target path may name.
const MAX_INDEX: usize = 65_535;

fn segments(path: &str) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut key = String::new();
    let mut index: Option<usize> = None;
    let mut chars = path.chars().peekable();
    let mut closed = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                chars.next();
                key.push('.');
            }
            '.' => {
                if key.is_empty() {
                    return Err("an empty key".to_owned());
                }
                out.push(Segment {
                    key: std::mem::take(&mut key),
                    index: index.take(),
                });
                closed = false;
            }
            '[' => {
                let mut n = String::new();
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some(d) if d.is_ascii_digit() => n.push(d),
                        _ => return Err("an index must be digits in brackets".to_owned()),
                    }
                }
                let i: usize = n.parse().map_err(|_| "an empty index".to_owned())?;
                if i > MAX_INDEX {
                    return Err(format!("index {i} is above {MAX_INDEX}"));
                }
                if index.is_some() || key.is_empty() {
                    return Err("an index must follow a key, once".to_owned());
                }
                index = Some(i);
                closed = true;
            }
            c if closed => return Err(format!("{c:?} after an index")),
            c => key.push(c),
        }
    }
    if key.is_empty() {
        return Err("an empty key".to_owned());
    }
    out.push(Segment { key, index });
    Ok(out)
}

/// Sets `raw` at `path` in `root` (module rules, “targetPath”).
pub fn set_path(root: &mut Value, path: &str, raw: &str) -> Result<(), String> {
    let (inner, quoted) = unquote(raw);
    let value = if quoted {
        Value::String(inner.to_owned())
    } else {
        typed(raw)
    };
    let segs = segments(path)?;
    let mut current = root;
    let last = segs.len() - 1;
    for (i, seg) in segs.iter().enumerate() {
        let Value::Object(map) = current else {
            return Err(format!("{} is not a mapping", seg.key));
        };
        let slot = map.entry(seg.key.clone()).or_insert(Value::Null);
        let slot = match seg.index {
            None => slot,
            Some(n) => {
                if !slot.is_array() {
                    *slot = Value::Array(Vec::new());
                }
                let Value::Array(list) = slot else {
                    return Err(format!("{} is not a list", seg.key));
                };
                if list.len() <= n {
                    list.resize(n + 1, Value::Null);
                }
                &mut list[n]
            }
        };
        if i == last {
            *slot = value;
            return Ok(());
        }
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        current = slot;
    }
    Ok(())
}

/// The Secret-sourced strings of a reconcile or a request, and how to remove them from text
/// (module rules, “Secrets never leak”).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a value containing another is replaced whole.
    needles: Vec<String>,
}

impl Redactor {
    /// Adds `value` (with its JSON-escaped and base64 forms).
    pub fn add(&mut self, value: &str) {
        if value.chars().count() < MIN_REDACTED {
            return;
        }
        let mut forms = vec![value.to_owned()];
        if let Ok(quoted) = serde_json::to_string(value) {
            let escaped = quoted[1..quoted.len() - 1].to_owned();
            forms.push(escaped);
        }
        forms.push(base64::engine::general_purpose::STANDARD.encode(value));
        for f in forms {
            if !self.needles.contains(&f) {
                self.needles.push(f);
            }
        }
        self.needles
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// Adds every scalar leaf of `v` (strings, and numbers as written).
    pub fn add_leaves(&mut self, v: &Value) {
        match v {
            Value::String(s) => self.add(s),
            Value::Number(n) => self.add(&n.to_string()),
            Value::Array(items) => items.iter().for_each(|i| self.add_leaves(i)),
            Value::Object(m) => m.values().for_each(|i| self.add_leaves(i)),
            Value::Bool(_) | Value::Null => {}
        }
    }

    /// Adds what `other` holds.
    pub fn extend(&mut self, other: &Redactor) {
        for n in &other.needles {
            if !self.needles.contains(n) {
                self.needles.push(n.clone());
            }
        }
        self.needles
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// Whether nothing is redacted.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every value replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for n in &self.needles {
            if out.contains(n.as_str()) {
                out = out.replace(n.as_str(), REDACTED);
            }
        }
        out
    }

    /// Redacts every string inside `v`, keys included.
    pub fn redact_json(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) => *s = self.redact(s),
            Value::Number(n) => {
                let text = n.to_string();
                if self.redact(&text) != text {
                    *v = Value::String(REDACTED.to_owned());
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.redact_json(i)),
            Value::Object(m) => {
                let old = std::mem::take(m);
                for (k, mut i) in old {
                    self.redact_json(&mut i);
                    m.insert(self.redact(&k), i);
                }
            }
            Value::Bool(_) | Value::Null => {}
        }
    }
}

/// The values in use in this process, by owner (`Kind/ns/name`, a request id), removed from
/// every log line ([`Redacting`]). Logs are written process-wide, so this set is process-wide.
static IN_USE: LazyLock<RwLock<HashMap<String, Redactor>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// Registers `owner`'s values (replacing what it registered before; an empty redactor forgets
/// it).
pub fn register(owner: &str, redactor: &Redactor) {
    let mut all = IN_USE.write().unwrap_or_else(PoisonError::into_inner);
    if redactor.is_empty() {
        all.remove(owner);
    } else {
        all.insert(owner.to_owned(), redactor.clone());
    }
}

/// Forgets `owner`'s values.
pub fn forget(owner: &str) {
    let in_use = IN_USE.read().unwrap_or_else(PoisonError::into_inner);
    if !in_use.contains_key(owner) {
        return;
    }
    drop(in_use);
    IN_USE
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(owner);
}

/// `text` without any value in use (module rules).
pub fn redact_in_use(text: &str) -> String {
    let in_use = IN_USE.read().unwrap_or_else(PoisonError::into_inner);
    let mut out = text.to_owned();
    for r in in_use.values() {
        out = r.redact(&out);
    }
    out
}

/// The log writer of the process: `inner` (standard output in `serve`), each formatted line
/// without the values in use (module rules). A `tracing_subscriber` fmt layer writes one event
/// per `write`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Redacting<M>(pub M);

/// The process's log writer: standard output, redacted.
pub type LogWriter = Redacting<fn() -> std::io::Stdout>;

/// [`LogWriter`] itself.
pub fn log_writer() -> LogWriter {
    Redacting(std::io::stdout)
}

impl<'a, M: tracing_subscriber::fmt::MakeWriter<'a>> tracing_subscriber::fmt::MakeWriter<'a>
    for Redacting<M>
{
    type Writer = Redacting<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Redacting(self.0.make_writer())
    }
}

impl<W: Write> Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let empty = IN_USE
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        if empty {
            self.0.write_all(buf)?;
        } else {
            let text = String::from_utf8_lossy(buf);
            self.0.write_all(redact_in_use(&text).as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_later_source_wins_per_key_and_maps_merge_deeply() {
        let mut base = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
        merge(
            &mut base,
            json!({"a": {"c": [3], "e": true}, "d": {"f": 1}}),
        );
        assert_eq!(
            base,
            json!({"a": {"b": 1, "c": [3], "e": true}, "d": {"f": 1}})
        );
        let composed = compose(Some(json!({"a": 1, "b": 2})), Some(&json!({"b": 3})));
        assert_eq!(composed, Some(json!({"a": 1, "b": 3})));
        assert_eq!(compose(None, None), None);
    }

    #[test]
    fn target_paths_follow_helm_set_syntax() {
        let mut v = json!({});
        set_path(&mut v, "a.b", "true").unwrap();
        set_path(&mut v, "a.n", "42").unwrap();
        set_path(&mut v, "a.z", "007").unwrap();
        set_path(&mut v, "a.f", "1.5").unwrap();
        set_path(&mut v, "a.q", "'42'").unwrap();
        set_path(&mut v, r"dots\.in\.key", "x,y").unwrap();
        set_path(&mut v, "list[2].name", "web").unwrap();
        assert_eq!(
            v,
            json!({"a": {"b": true, "n": 42, "z": "007", "f": "1.5", "q": "42"},
                   "dots.in.key": "x,y", "list": [null, null, {"name": "web"}]})
        );
        assert!(set_path(&mut v, "a..b", "1").is_err());
        assert!(set_path(&mut v, "a[x]", "1").is_err());
        assert!(set_path(&mut v, "a[70000]", "1").is_err());
        assert!(set_path(&mut v, "[1]", "1").is_err());
    }

    #[test]
    fn content_must_be_a_mapping_and_errors_never_show_it() {
        assert_eq!(parse_mapping("a: 1\n").unwrap(), json!({"a": 1}));
        assert_eq!(parse_mapping("  \n").unwrap(), json!({}));
        let e = parse_mapping("s3cr3t-value").unwrap_err();
        assert!(!e.contains("s3cr3t"), "{e}");
        let e = parse_mapping("a: [s3cr3t-value\n").unwrap_err();
        assert!(e.contains("line") && !e.contains("s3cr3t"), "{e}");
    }

    #[test]
    fn the_redactor_removes_plain_escaped_and_base64_forms() {
        let mut r = Redactor::default();
        r.add_leaves(&json!({"pw": "hunter2-\"x\"", "n": 123456, "short": "ab"}));
        let b64 = base64::engine::general_purpose::STANDARD.encode("hunter2-\"x\"");
        let text = format!("a hunter2-\"x\" b hunter2-\\\"x\\\" c {b64} d 123456 ab");
        let out = r.redact(&text);
        assert_eq!(
            out,
            "a [redacted] b [redacted] c [redacted] d [redacted] ab"
        );
        let mut v = json!({"op": "add", "value": {"hunter2-\"x\"": 123456, "k": "xhunter2-\"x\""}});
        r.redact_json(&mut v);
        assert_eq!(
            v,
            json!({"op": "add", "value": {"[redacted]": "[redacted]", "k": "x[redacted]"}})
        );
    }

    #[test]
    fn registered_values_leave_the_log_until_forgotten() {
        let mut r = Redactor::default();
        r.add("log-canary-0042");
        register("test/a", &r);
        assert_eq!(redact_in_use("x log-canary-0042 y"), "x [redacted] y");
        forget("test/a");
        assert_eq!(redact_in_use("log-canary-0042"), "log-canary-0042");
    }
}
