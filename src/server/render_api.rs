//! The REST render API: `POST /v1/namespaces/{ns}/render` (issue 16, docs/design/architecture.md §3 "HTTP",
//! docs/design/principles.md §1.6 and rule 16).
//!
//! Rules:
//! - The body names a module either as `module` (`path`, `version`) + `values` + `name`, or as a
//!   whole ModuleInstance manifest in `instance` (`metadata.name`, `spec.module`, `spec.values`;
//!   a `metadata.namespace` must equal the path's namespace). Unknown members are a 400, so a typo
//!   never renders something other than what the caller meant. Values enter the kernel as data.
//! - Order of work: authentication and authorisation first ([`auth`]: nothing of an anonymous
//!   body is parsed), then the body (content type, size limit → 413, shape → 400), then a lease
//!   on the current platform record (none → 503 `platform_not_ready` with `Retry-After`), then the
//!   render: a render slot (`--max-concurrent-renders`, the process's one set shared with the
//!   reconcilers, [`crate::render_lease::RenderSlots`]) and the kernel call in
//!   `spawn_blocking`, both inside `--render-timeout` (→ 504). The lease is held until the render
//!   ends, so a platform regenerated meanwhile never removes the directory it reads.
//!   A render that outlives the timeout keeps its permit and lease until the kernel returns (it
//!   is bounded by the evaluator's own limits), so a slow client cannot multiply the load.
//! - Kernel errors map by [`ErrorClass`] only, never by message text: `PlatformNotReady` 503,
//!   `TransientPull` 502, `Resolution` 404, `Values` 422 (each `values.<path>` with file:line in
//!   `error.problems`), `SkewRefused` 409, `UnsupportedKind` 422, `Timeout` 504, `Other` 422 (a
//!   module that does not evaluate is the caller's input, not a server fault).
//! - `mode`: `render` returns objects with provenance, warnings, inventory entries, required
//!   contracts and the render digest. `validate` and `diff` add `results`: each object previewed
//!   by the apply engine (GET + server-side apply dry-run, field manager `opm-controller`)
//!   **as the caller** (impersonating the TokenReview's user and groups), so a caller sees only
//!   what they may do: `create` / `update` / `recreate` / `unchanged`, or `error` with a reason
//!   (`forbidden`, `immutable`, `unknown_kind`, `ownership_conflict`, `rejected`) and the
//!   server's message. An object of another live instance is `ownership_conflict` (the
//!   ownership rule of `apply::ownership`), so `validate` finds a conflict before any apply. `diff` also
//!   gives, for an `update`, an RFC 6902 JSON Patch from the live object to the dry-run result (both without
//!   `status`, `managedFields`, `resourceVersion`, `generation`), and `prune`: the entries of the
//!   named ModuleInstance's inventory (read as the caller) that the render no longer produces —
//!   what a reconcile would prune. With `--render-auth=none` (dev only) previews run as the
//!   operator. Without a cluster connection they are a 503 `cluster_unavailable`. A failed
//!   object is a result, never a failed request: the preview is fail-slow like apply.
//! - Without a configured backend (no platform store / kernel, e.g. a webhook-only server) the
//!   route answers 503 `render_unavailable`.
//! - `valuesFrom` (issue 40; a manifest's `spec.valuesFrom`, or the member next to `module`):
//!   the Secrets and ConfigMaps are read **as the caller** (impersonating the TokenReview's user
//!   and groups; as the operator with `--render-auth=none`), in the path's namespace only, before
//!   the platform lease, merged under `values` ([`crate::values_from`]): a caller who may not
//!   `get` one gets 403 `forbidden` naming the object (never its content), a missing required
//!   one 422 `values_from_not_found`, another namespace or unusable content 422
//!   `values_from_invalid`, no cluster connection 503 `cluster_unavailable`. No Secret value
//!   read is in an error answer (message, problems), a refusal or a diff patch, nor in a log
//!   line while the request runs; the rendered objects are the answer and carry what they were
//!   rendered from. A `diff` of a Secret masks every value under `/data` and `/stringData`.

pub mod auth;

use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tracing::Span;

use self::auth::{AuthError, Caller, Cluster, KubeStatus};
use super::error::{json_response, ApiError, ErrorCode, ErrorProblem};
use super::state::AppState;
use crate::apply::{Action, ApplyOptions, Engine, EngineOptions};
use crate::kernel::{ErrorClass, KernelError, ModuleRequest};
use crate::render_lease::{Origin, RenderEnd};
use crate::values_from::Redactor;

/// Route of the render API.
pub const RENDER_PATH: &str = "/v1/namespaces/{ns}/render";

/// Seconds a client is told to wait when no platform is ready.
pub const PLATFORM_RETRY_AFTER_SECS: u64 = 10;

pub use super::state::RenderBackend;

/// What the caller asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RenderMode {
    /// Render only.
    #[default]
    Render,
    /// Render and server-side dry-run each object as the caller.
    Validate,
    /// Render, dry-run as the caller and compare with the live objects; list what would be pruned.
    Diff,
}

/// A module coordinate.
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModuleCoordinate {
    /// Major-suffixed module path, e.g. `opmodel.dev/modules/web_app@v0`.
    pub path: String,
    /// Module version, `v`-prefixed SemVer (`v0.1.0`; a bare `0.1.0` is accepted).
    pub version: String,
}

/// The body of a render request.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "mode": "render",
    "name": "shop",
    "module": {"path": "fixtures.test/modules/demo@v0", "version": "v0.1.0"},
    "values": {"image": {"tag": "1.2.3"}, "replicas": 3, "hosts": ["a.example"], "logLevel": "info",
               "secret": {"value": "s3cr3t"}}
}))]
pub struct RenderRequest {
    /// `render` (default), `validate` or `diff`.
    #[serde(default)]
    pub mode: RenderMode,
    /// Instance name (a DNS label); required with `module`, taken from `metadata.name` with
    /// `instance`.
    #[serde(default)]
    pub name: Option<String>,
    /// The module to render (exclusive with `instance`).
    #[serde(default)]
    pub module: Option<ModuleCoordinate>,
    /// Values as JSON data, unified with the module's `#config` (with `module` only).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub values: Option<serde_json::Value>,
    /// A whole `opmodel.dev/v1alpha1` ModuleInstance manifest (exclusive with `module`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub instance: Option<serde_json::Value>,
    /// Values read from Secrets and ConfigMaps of the namespace **as the caller** (the
    /// ModuleInstance's `spec.valuesFrom`: `kind`, `name`, `valuesKey`, `targetPath`,
    /// `optional`), merged in order under `values` (with `module` only; a manifest carries its
    /// own).
    #[serde(default, rename = "valuesFrom")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub values_from: Option<Vec<crds::values_from::ValuesReference>>,
}

/// The body of a 403: the Kubernetes `Status` when the caller may not create
/// `moduleinstances/render` in the namespace, the error shape (`error.code` = `forbidden`) when
/// (diff) the caller may not read the named ModuleInstance. Documentation only.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum ForbiddenBody {
    /// The SubjectAccessReview denied the render.
    Status(auth::KubeStatus),
    /// Reading the named ModuleInstance was forbidden.
    Error(super::error::ErrorBody),
}

// The schema of `kernel::RenderedObject`, which the API sends as is (this type only documents it).
/// One rendered object with its provenance.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct RenderedObjectDoc {
    /// The Kubernetes object, in CUE field order.
    #[schema(value_type = Object)]
    pub object: serde_json::Value,
    /// The component that produced it.
    pub component: String,
    /// The transformer FQN that produced it.
    pub transformer: String,
}

// The schema of `kernel::InstanceRef`, which the API sends as is (this type only documents it).
/// The instance identity the render used.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct InstanceDoc {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Fully qualified name.
    pub fqn: String,
    /// Instance UUID.
    pub uuid: String,
}

/// The answer of a successful render.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenderResponse {
    /// The mode answered.
    pub mode: RenderMode,
    /// The instance.
    #[schema(value_type = InstanceDoc)]
    pub instance: crate::kernel::InstanceRef,
    /// Objects in execution order.
    #[schema(value_type = Vec<RenderedObjectDoc>)]
    pub objects: Vec<crate::kernel::RenderedObject>,
    /// Inventory entries (`group`, `kind`, `namespace`, `name`, `v`, `component`), same order.
    #[schema(value_type = Vec<Object>)]
    pub inventory: Vec<crds::common::InventoryEntry>,
    /// Render warnings.
    pub warnings: Vec<String>,
    /// Contract FQNs the components demand, sorted.
    pub required_contracts: Vec<String>,
    /// `sha256:<hex>` render digest.
    pub digest: String,
    /// `validate` and `diff`: one preview per object, in render order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<ObjectPreviewDoc>>,
    /// `diff`: inventory entries of the named instance that this render no longer produces.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub prune: Option<Vec<crds::common::InventoryEntry>>,
}

/// The object a preview is about.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRefDoc {
    /// `group/version` or `version`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace, for namespaced objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// Why the server refused an object's dry-run.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ObjectErrorDoc {
    /// `forbidden`, `immutable`, `unknown_kind`, `ownership_conflict` (the live object belongs
    /// to another live instance) or `rejected`.
    pub reason: String,
    /// The server's message.
    pub message: String,
}

/// One object's preview (`validate`, `diff`).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ObjectPreviewDoc {
    /// The object.
    pub object: ObjectRefDoc,
    /// `create`, `update`, `recreate`, `unchanged` or `error`.
    pub result: String,
    /// `diff` and `update` only: RFC 6902 JSON Patch from the live object to the dry-run result.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub patch: Option<serde_json::Value>,
    /// `error` only: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ObjectErrorDoc>,
}

/// Why a request body is not a render request.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    /// Not JSON, or not the request shape.
    #[error("the body is not a render request: {0}")]
    Shape(String),
    /// Neither or both of `module` and `instance`.
    #[error("name exactly one of `module` and `instance`")]
    ModuleOrInstance,
    /// `values` or `name` next to `instance`.
    #[error("`{0}` cannot be combined with `instance` (the manifest carries it)")]
    WithInstance(&'static str),
    /// The manifest is not a ModuleInstance.
    #[error("`instance` must be an opmodel.dev/v1alpha1 ModuleInstance: {0}")]
    Instance(String),
    /// The manifest names another namespace.
    #[error("`instance.metadata.namespace` is {found:?} but the request is for the namespace {expected:?}")]
    NamespaceMismatch {
        /// From the URL.
        expected: String,
        /// From the manifest.
        found: String,
    },
    /// A field has a bad value.
    #[error("`{field}`: {message}")]
    Field {
        /// The field.
        field: &'static str,
        /// Why.
        message: String,
    },
}

/// Turns a request body into the kernel's request for `namespace`.
pub fn parse_request(
    bytes: &[u8],
    namespace: &str,
) -> Result<(RenderMode, ModuleRequest), RequestError> {
    parse_request_with_sources(bytes, namespace).map(|(mode, request, _)| (mode, request))
}

/// [`parse_request`] with the request's `valuesFrom` (or the manifest's `spec.valuesFrom`).
pub fn parse_request_with_sources(
    bytes: &[u8],
    namespace: &str,
) -> Result<
    (
        RenderMode,
        ModuleRequest,
        Vec<crds::values_from::ValuesReference>,
    ),
    RequestError,
> {
    let req: RenderRequest =
        serde_json::from_slice(bytes).map_err(|e| RequestError::Shape(e.to_string()))?;
    let (name, module, values, sources) = match (req.module, req.instance) {
        (Some(module), None) => {
            let name = req.name.ok_or(RequestError::Field {
                field: "name",
                message: "required with `module` (the instance name)".to_string(),
            })?;
            (
                name,
                module,
                req.values,
                req.values_from.unwrap_or_default(),
            )
        }
        (None, Some(instance)) => {
            if req.values.is_some() {
                return Err(RequestError::WithInstance("values"));
            }
            if req.name.is_some() {
                return Err(RequestError::WithInstance("name"));
            }
            if req.values_from.is_some() {
                return Err(RequestError::WithInstance("valuesFrom"));
            }
            from_manifest(instance, namespace)?
        }
        _ => return Err(RequestError::ModuleOrInstance),
    };
    webhooks::check_dns_label(&name).map_err(|message| RequestError::Field {
        field: "name",
        message,
    })?;
    webhooks::syntax::check_major_module_path(&module.path).map_err(|message| {
        RequestError::Field {
            field: "module.path",
            message,
        }
    })?;
    let bare = module.version.strip_prefix('v').unwrap_or(&module.version);
    webhooks::syntax::check_bare_semver(bare).map_err(|message| RequestError::Field {
        field: "module.version",
        message,
    })?;
    if values.as_ref().is_some_and(|v| !v.is_object()) {
        return Err(RequestError::Field {
            field: "values",
            message: "must be a JSON object".to_string(),
        });
    }
    Ok((
        req.mode,
        ModuleRequest {
            name,
            namespace: namespace.to_string(),
            path: module.path,
            version: format!("v{bare}"),
            values,
        },
        sources,
    ))
}

/// Name, module, values and `valuesFrom` of a manifest.
type FromManifest = (
    String,
    ModuleCoordinate,
    Option<serde_json::Value>,
    Vec<crds::values_from::ValuesReference>,
);

fn from_manifest(
    instance: serde_json::Value,
    namespace: &str,
) -> Result<FromManifest, RequestError> {
    let api_version = instance.get("apiVersion").and_then(|v| v.as_str());
    let kind = instance.get("kind").and_then(|v| v.as_str());
    if api_version != Some("opmodel.dev/v1alpha1") || kind != Some("ModuleInstance") {
        return Err(RequestError::Instance(format!(
            "apiVersion {api_version:?}, kind {kind:?}"
        )));
    }
    let mi: crds::ModuleInstance =
        serde_json::from_value(instance).map_err(|e| RequestError::Instance(e.to_string()))?;
    let name = mi.metadata.name.clone().ok_or(RequestError::Field {
        field: "instance.metadata.name",
        message: "required".to_string(),
    })?;
    if let Some(found) = mi.metadata.namespace.clone() {
        if found != namespace {
            return Err(RequestError::NamespaceMismatch {
                expected: namespace.to_string(),
                found,
            });
        }
    }
    let module = ModuleCoordinate {
        path: mi.spec.module.path,
        version: mi.spec.module.version,
    };
    Ok((name, module, mi.spec.values, mi.spec.values_from))
}

/// The error answer of a kernel error, by class.
pub fn kernel_error(e: KernelError) -> ApiError {
    let code = match e.class {
        ErrorClass::PlatformNotReady => ErrorCode::PlatformNotReady,
        ErrorClass::TransientPull => ErrorCode::RegistryUnavailable,
        ErrorClass::Resolution => ErrorCode::ModuleNotFound,
        ErrorClass::Values => ErrorCode::InvalidValues,
        ErrorClass::SkewRefused => ErrorCode::SkewRefused,
        ErrorClass::UnsupportedKind => ErrorCode::UnsupportedKind,
        ErrorClass::Timeout => ErrorCode::RenderTimeout,
        ErrorClass::ResourceExhausted => ErrorCode::RenderMemoryExceeded,
        // No code of its own: the message names the module and why its signature failed.
        ErrorClass::Other | ErrorClass::Verification => ErrorCode::RenderFailed,
    };
    let mut err = ApiError::new(code, e.message);
    err.problems = e
        .problems
        .into_iter()
        .map(|p| ErrorProblem {
            path: p.path,
            message: p.message,
            positions: p
                .positions
                .into_iter()
                .map(|s| format!("{}:{}:{}", s.file, s.line, s.column))
                .collect(),
        })
        .collect();
    if code == ErrorCode::PlatformNotReady {
        err.retry_after = Some(PLATFORM_RETRY_AFTER_SECS);
    }
    err
}

fn auth_error(e: AuthError) -> Response {
    let (status, reason) = match &e {
        AuthError::NoToken | AuthError::BadToken { .. } => {
            (StatusCode::UNAUTHORIZED, "Unauthorized")
        }
        AuthError::Denied { .. } => (StatusCode::FORBIDDEN, "Forbidden"),
        AuthError::Review { .. } | AuthError::NotConnected => {
            tracing::warn!(error = %e, "render authorisation could not be checked");
            return ApiError::new(
                ErrorCode::AuthUnavailable,
                format!("the caller could not be authenticated or authorised: {e}"),
            )
            .into_response();
        }
    };
    let body = KubeStatus {
        api_version: "v1",
        kind: "Status",
        status: "Failure",
        message: e.to_string(),
        reason,
        code: status.as_u16(),
    };
    let mut resp = json_response(status, &body);
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

/// Renders a module on the current platform.
#[utoipa::path(
    post,
    path = "/v1/namespaces/{ns}/render",
    tag = "render",
    params(("ns" = String, Path, description = "Namespace of the instance (a DNS label)", example = "team-a")),
    request_body(content = RenderRequest, content_type = "application/json"),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The rendered objects", body = RenderResponse),
        (status = 400, description = "Not a render request (shape, unknown member, bad name/path/version)", body = super::error::ErrorBody),
        (status = 401, description = "No or a rejected bearer token", body = auth::KubeStatus),
        (status = 403, description = "The caller may not create moduleinstances/render in the namespace (Status shape), or (diff) may not read the named ModuleInstance (error shape)", body = ForbiddenBody),
        (status = 404, description = "The module (or a catalog it needs) does not resolve", body = super::error::ErrorBody),
        (status = 405, description = "Method other than POST", body = super::error::ErrorBody),
        (status = 408, description = "The request did not complete in time", body = super::error::ErrorBody),
        (status = 409, description = "The module needs newer catalogs and the skew policy is Refuse", body = super::error::ErrorBody),
        (status = 413, description = "Body over the limit", body = super::error::ErrorBody),
        (status = 415, description = "Content-Type present and not application/json", body = super::error::ErrorBody),
        (status = 422, description = "Bad values (error.problems name each values.<path> with file:line), or the module does not evaluate", body = super::error::ErrorBody),
        (status = 502, description = "The registry failed", body = super::error::ErrorBody),
        (status = 503, description = "No platform is ready (Retry-After), render API not configured, authorisation unavailable, or (validate/diff) no cluster connection", body = super::error::ErrorBody),
        (status = 504, description = "The render ran over --render-timeout", body = super::error::ErrorBody)
    )
)]
pub async fn render(
    State(state): State<AppState>,
    UrlPath(ns): UrlPath<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let span = Span::current();
    span.record("namespace", ns.as_str());
    let Some(backend) = state.render.clone() else {
        return ApiError::new(
            ErrorCode::RenderUnavailable,
            "this server has no render backend (no platform store)",
        )
        .into_response();
    };
    if let Err(message) = webhooks::check_dns_label(&ns) {
        return ApiError::new(
            ErrorCode::BadRequest,
            format!("namespace {ns:?}: {message}"),
        )
        .into_response();
    }
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let cluster = backend.cluster.borrow().clone();
    let caller = match backend
        .auth
        .check(cluster.as_ref(), authorization, &ns)
        .await
    {
        Ok(caller) => caller,
        Err(e) => return auth_error(e),
    };
    // `valuesFrom` (issue 40): the values read are kept out of the answer's errors and diffs
    // and, while the request runs, out of the log (`crate::values_from`).
    let owner = format!("render/{}", next_request());
    let mut redactor = Redactor::default();
    let out = render_inner(
        &state,
        &backend,
        &ns,
        &headers,
        body,
        cluster,
        caller,
        (&owner, &mut redactor),
    )
    .await;
    crate::values_from::forget(&owner);
    match out {
        Ok(mut resp) => {
            redact_response(&redactor, &mut resp);
            json_response(StatusCode::OK, &resp)
        }
        Err(e) => redact_error(&redactor, e).into_response(),
    }
}

/// A process-unique number for each render request (the log redaction's owner key).
fn next_request() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `e` without the request's Secret-sourced values.
fn redact_error(redactor: &Redactor, mut e: ApiError) -> ApiError {
    if redactor.is_empty() {
        return e;
    }
    e.message = redactor.redact(&e.message);
    for p in &mut e.problems {
        p.message = redactor.redact(&p.message);
        p.path = redactor.redact(&p.path);
    }
    e
}

/// The answer's refusals and diffs without the request's Secret-sourced values (the rendered
/// objects themselves are the answer: the caller may read what they were rendered from).
fn redact_response(redactor: &Redactor, resp: &mut RenderResponse) {
    if redactor.is_empty() {
        return;
    }
    for w in &mut resp.warnings {
        *w = redactor.redact(w);
    }
    for r in resp.results.iter_mut().flatten() {
        if let Some(e) = r.error.as_mut() {
            e.message = redactor.redact(&e.message);
        }
        if let Some(p) = r.patch.as_mut() {
            redactor.redact_json(p);
        }
    }
}

/// The error answer of a `valuesFrom` read (issue 40): a missing object or key 422
/// `values_from_not_found`, a refused namespace or unusable content 422 `values_from_invalid`,
/// a caller who may not read the object 403 `forbidden`, another failure 503.
fn values_from_error(e: crate::values_from::Error) -> ApiError {
    use crate::values_from::Error as E;
    let code = match &e {
        E::NotFound { .. } => ErrorCode::ValuesFromNotFound,
        E::OtherNamespace { .. } | E::Invalid { .. } => ErrorCode::ValuesFromInvalid,
        E::Forbidden { .. } => ErrorCode::Forbidden,
        E::Api { .. } => ErrorCode::ClusterUnavailable,
    };
    ApiError::new(code, e.to_string())
}

#[allow(
    clippy::too_many_arguments,
    reason = "the handler's parts, passed once; `secrets` is the valuesFrom redaction (owner key, redactor)"
)]
async fn render_inner(
    state: &AppState,
    backend: &RenderBackend,
    ns: &str,
    headers: &HeaderMap,
    body: Body,
    cluster: Option<Cluster>,
    caller: Option<Caller>,
    secrets: (&str, &mut Redactor),
) -> Result<RenderResponse, ApiError> {
    super::body::check_content_type(headers)?;
    let bytes = super::body::read_body(headers, body, state.limits.body_limit).await?;
    let (mode, mut request, sources) = parse_request_with_sources(&bytes, ns)
        .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.to_string()))?;
    let span = Span::current();
    span.record("name", request.name.as_str());
    if !sources.is_empty() {
        // Read as the caller: a caller who may not get a Secret cannot render with it.
        let Some(c) = cluster.as_ref() else {
            return Err(ApiError::new(
                ErrorCode::ClusterUnavailable,
                "valuesFrom reads Secrets and ConfigMaps from the cluster, and the operator is \
                 not connected to it yet; retry",
            ));
        };
        let client = engine_for(c, caller.as_ref())?.client();
        let read = crate::values_from::read(&client, ns, &sources)
            .await
            .map_err(values_from_error)?;
        crate::values_from::register(secrets.0, &read.redactor);
        request.values = crate::values_from::compose(read.values, request.values.as_ref());
        *secrets.1 = read.redactor;
    }
    let cluster =
        match (mode, cluster) {
            (RenderMode::Render, _) => None,
            (_, Some(c)) => Some(c),
            (_, None) => return Err(ApiError::new(
                ErrorCode::ClusterUnavailable,
                "validate and diff dry-run against the cluster, and the operator is not connected \
                 to it yet; retry, or use mode render",
            )),
        };
    let Some((record, lease)) = backend.store.lease() else {
        return Err(kernel_error(KernelError::new(
            ErrorClass::PlatformNotReady,
            "no platform is ready: the Platform reconciler has not recorded a built platform yet",
        )));
    };
    let timeout = backend.timeout;
    let slots = backend.slots.clone();
    let renderer = backend.renderer.clone();
    let metrics = backend.metrics.clone();
    let render_span = span.clone();
    let work = async move {
        let permit = slots
            .acquire()
            .await
            .map_err(|e| ApiError::internal(format!("render semaphore: {e}")))?;
        crate::render_lease::render_on_lease((record, lease), permit, move |platform, skew| {
            let started = std::time::Instant::now();
            let out = render_span.in_scope(|| renderer.render_module(&request, platform, skew));
            metrics.record(Origin::Api, RenderEnd::of(&out), started.elapsed());
            out
        })
        .await
        .map_err(|e| ApiError::internal(format!("the render task failed: {e}")))
    };
    let result = match tokio::time::timeout(timeout, work).await {
        Ok(Ok(Ok(result))) => result,
        Ok(Ok(Err(e))) => return Err(kernel_error(e)),
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            // The render may still be running (it is counted when it ends); the caller's
            // deadline is a time-out of its own.
            backend
                .metrics
                .record(Origin::Api, RenderEnd::Timeout, timeout);
            return Err(ApiError::new(
                ErrorCode::RenderTimeout,
                format!(
                    "the render did not finish within {} ms (--render-timeout)",
                    timeout.as_millis()
                ),
            ));
        }
    };
    let (results, prune) = match cluster {
        Some(cluster) => {
            let (results, prune) = preview(&cluster, caller.as_ref(), mode, &result, ns).await?;
            (Some(results), prune)
        }
        None => (None, None),
    };
    Ok(RenderResponse {
        mode,
        results,
        prune,
        instance: result.instance,
        objects: result.objects,
        inventory: result.inventory,
        warnings: result.warnings,
        required_contracts: result.required_contracts,
        digest: result.digest,
    })
}

/// The apply engine acting as `caller` (or as the operator when auth is off).
fn engine_for(cluster: &Cluster, caller: Option<&Caller>) -> Result<Engine, ApiError> {
    let base = Engine::new(cluster.client.clone(), EngineOptions::default());
    let Some(caller) = caller else {
        return Ok(base);
    };
    let config =
        crate::apply::impersonate::impersonate(&cluster.config, &caller.username, &caller.groups);
    let client = kube::Client::try_from(config)
        .map_err(|e| ApiError::internal(format!("building the impersonating client: {e}")))?;
    Ok(base.with_identity(client, caller.username.clone()))
}

fn object_doc(r: &crate::apply::object::ObjectRef) -> ObjectRefDoc {
    ObjectRefDoc {
        api_version: if r.group.is_empty() {
            r.version.clone()
        } else {
            format!("{}/{}", r.group, r.version)
        },
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

fn refusal(e: &crate::apply::Error) -> ObjectErrorDoc {
    let reason = if e.is_forbidden() {
        "forbidden"
    } else if e.is_immutable() {
        "immutable"
    } else if matches!(e, crate::apply::Error::UnknownKind { .. }) {
        "unknown_kind"
    } else if e.is_ownership_conflict() {
        "ownership_conflict"
    } else {
        "rejected"
    };
    ObjectErrorDoc {
        reason: reason.to_string(),
        message: e.to_string(),
    }
}

/// A Secret's patch with every value under `/data` and `/stringData` masked: a diff says which
/// keys change, never what they hold (issue 40).
fn mask_secret_patch(patch: &mut serde_json::Value) {
    let masked = || serde_json::Value::String(crate::values_from::REDACTED.to_owned());
    for op in patch.as_array_mut().into_iter().flatten() {
        let path = op.get("path").and_then(|p| p.as_str()).unwrap_or_default();
        let whole = path == "/data" || path == "/stringData";
        let under = path.starts_with("/data/") || path.starts_with("/stringData/");
        match op.get_mut("value") {
            Some(serde_json::Value::Object(m)) if whole => {
                for v in m.values_mut() {
                    *v = masked();
                }
            }
            Some(v) if whole || under => *v = masked(),
            _ => {}
        }
    }
}

/// Previews every rendered object as `caller`; for `diff` also the prune set.
async fn preview(
    cluster: &Cluster,
    caller: Option<&Caller>,
    mode: RenderMode,
    result: &crate::kernel::RenderResult,
    ns: &str,
) -> Result<
    (
        Vec<ObjectPreviewDoc>,
        Option<Vec<crds::common::InventoryEntry>>,
    ),
    ApiError,
> {
    let engine = engine_for(cluster, caller)?;
    let objects: Vec<serde_json::Value> = result.objects.iter().map(|o| o.object.clone()).collect();
    // The same instance labels a reconcile stamps, so the preview is what it would apply.
    let opts = ApplyOptions {
        instance: crate::apply::object::InstanceLabels::of(result),
        ..ApplyOptions::default()
    };
    let previews = engine
        .preview(&objects, &opts)
        .await
        .map_err(|e| ApiError::new(ErrorCode::RenderFailed, e.to_string()))?;
    let diff = mode == RenderMode::Diff;
    let results = previews
        .into_iter()
        .map(|(r, p)| match p {
            Ok(p) => {
                let (word, patch) = match p.action {
                    Action::Created => ("create", None),
                    Action::Unchanged => ("unchanged", None),
                    Action::Recreated => ("recreate", None),
                    Action::Configured => {
                        let patch = match (&p.live, diff) {
                            (Some(live), true) => {
                                serde_json::to_value(json_patch::diff(live, &p.planned))
                                    .ok()
                                    .map(|mut patch| {
                                        if r.kind == "Secret" && r.group.is_empty() {
                                            mask_secret_patch(&mut patch);
                                        }
                                        patch
                                    })
                            }
                            _ => None,
                        };
                        ("update", patch)
                    }
                };
                ObjectPreviewDoc {
                    object: object_doc(&r),
                    result: word.to_string(),
                    patch,
                    error: None,
                }
            }
            Err(e) => ObjectPreviewDoc {
                object: object_doc(&r),
                result: "error".to_string(),
                patch: None,
                error: Some(refusal(&e)),
            },
        })
        .collect();
    let prune = if diff {
        Some(prune_set(&engine, result, ns).await?)
    } else {
        None
    };
    Ok((results, prune))
}

/// The named instance's inventory entries the render no longer produces (read as the caller;
/// no instance means nothing to prune).
async fn prune_set(
    engine: &Engine,
    result: &crate::kernel::RenderResult,
    ns: &str,
) -> Result<Vec<crds::common::InventoryEntry>, ApiError> {
    let api: kube::Api<crds::ModuleInstance> = kube::Api::namespaced(engine.client(), ns);
    let instance = api.get_opt(&result.instance.name).await.map_err(|e| {
        let message = format!(
            "reading ModuleInstance {ns}/{} for the prune set: {e}",
            result.instance.name
        );
        match &e {
            kube::Error::Api(s) if s.code == 403 => ApiError::new(ErrorCode::Forbidden, message),
            _ => ApiError::new(ErrorCode::ClusterUnavailable, message),
        }
    })?;
    let previous = instance
        .and_then(|mi| mi.status)
        .and_then(|s| s.reconcile.inventory)
        .map(|inv| inv.entries)
        .unwrap_or_default();
    Ok(crate::inventory::stale(&previous, &result.inventory))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<(RenderMode, ModuleRequest), RequestError> {
        parse_request(&serde_json::to_vec(&v).unwrap(), "team-a")
    }

    #[test]
    fn a_module_request_becomes_a_kernel_request() {
        let (mode, req) = parse(json!({
            "name": "demo",
            "module": {"path": "fixtures.test/modules/demo@v0", "version": "0.1.0"},
            "values": {"replicas": 2}
        }))
        .unwrap();
        assert_eq!(mode, RenderMode::Render);
        assert_eq!(
            req,
            ModuleRequest {
                name: "demo".into(),
                namespace: "team-a".into(),
                path: "fixtures.test/modules/demo@v0".into(),
                version: "v0.1.0".into(),
                values: Some(json!({"replicas": 2})),
            }
        );
    }

    #[test]
    fn a_manifest_request_takes_name_module_and_values_from_the_manifest() {
        let (_, req) = parse(json!({
            "mode": "render",
            "instance": {
                "apiVersion": "opmodel.dev/v1alpha1",
                "kind": "ModuleInstance",
                "metadata": {"name": "web", "namespace": "team-a"},
                "spec": {"module": {"path": "example.com/web@v1", "version": "v1.2.3"},
                         "values": {"image": "nginx"}}
            }
        }))
        .unwrap();
        assert_eq!(req.name, "web");
        assert_eq!(req.path, "example.com/web@v1");
        assert_eq!(req.version, "v1.2.3");
        assert_eq!(req.values, Some(json!({"image": "nginx"})));
    }

    #[test]
    fn malformed_requests_are_named() {
        let module = json!({"path": "example.com/web@v1", "version": "1.0.0"});
        assert_eq!(
            parse(json!({"name": "x"})).unwrap_err(),
            RequestError::ModuleOrInstance
        );
        assert!(matches!(
            parse(json!({"module": module})).unwrap_err(),
            RequestError::Field { field: "name", .. }
        ));
        assert!(matches!(
            parse(json!({"name": "x", "module": module, "valuez": {}})).unwrap_err(),
            RequestError::Shape(_)
        ));
        assert!(matches!(
            parse(json!({"name": "Not_A_Label", "module": module})).unwrap_err(),
            RequestError::Field { field: "name", .. }
        ));
        assert!(matches!(
            parse(json!({"name": "x", "module": {"path": "example.com/web", "version": "1.0.0"}}))
                .unwrap_err(),
            RequestError::Field {
                field: "module.path",
                ..
            }
        ));
        assert!(matches!(
            parse(
                json!({"name": "x", "module": {"path": "example.com/web@v1", "version": "latest"}})
            )
            .unwrap_err(),
            RequestError::Field {
                field: "module.version",
                ..
            }
        ));
        assert!(matches!(
            parse(json!({"name": "x", "module": module, "values": [1]})).unwrap_err(),
            RequestError::Field {
                field: "values",
                ..
            }
        ));
        assert!(matches!(
            parse(json!({"mode": "explode", "name": "x", "module": module})).unwrap_err(),
            RequestError::Shape(_)
        ));
        let manifest = json!({
            "apiVersion": "opmodel.dev/v1alpha1", "kind": "ModuleInstance",
            "metadata": {"name": "web", "namespace": "other"},
            "spec": {"module": {"path": "example.com/web@v1", "version": "v1.0.0"}}
        });
        assert_eq!(
            parse(json!({"instance": manifest})).unwrap_err(),
            RequestError::NamespaceMismatch {
                expected: "team-a".into(),
                found: "other".into()
            }
        );
        assert_eq!(
            parse(json!({"instance": manifest, "values": {}})).unwrap_err(),
            RequestError::WithInstance("values")
        );
        assert!(matches!(
            parse(json!({"instance": {"apiVersion": "v1", "kind": "ConfigMap"}})).unwrap_err(),
            RequestError::Instance(_)
        ));
        assert!(matches!(
            parse_request(b"{not json", "ns").unwrap_err(),
            RequestError::Shape(_)
        ));
    }

    #[test]
    fn kernel_errors_map_by_class() {
        let cases = [
            (ErrorClass::PlatformNotReady, 503),
            (ErrorClass::TransientPull, 502),
            (ErrorClass::Resolution, 404),
            (ErrorClass::Values, 422),
            (ErrorClass::SkewRefused, 409),
            (ErrorClass::UnsupportedKind, 422),
            (ErrorClass::Timeout, 504),
            (ErrorClass::ResourceExhausted, 422),
            (ErrorClass::Other, 422),
        ];
        for (class, status) in cases {
            let e = kernel_error(KernelError::new(class, "m"));
            assert_eq!(e.code.status().as_u16(), status, "{class:?}");
        }
        let e = kernel_error(KernelError::new(ErrorClass::PlatformNotReady, "m"));
        assert_eq!(e.retry_after, Some(PLATFORM_RETRY_AFTER_SECS));
    }
}
