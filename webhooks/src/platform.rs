//! Admission rules for the `Platform` singleton (docs/design/operator.md §1.3, §3; docs/design/decisions.md §17–§18).
//!
//! The Platform spec becomes a generated CUE module (`cue.mod` pins + `#registry` keys), so anything
//! that would only surface there as `GenerateFailed`/`BuildFailed` for syntax reasons is refused at
//! apply time instead. Whether a pinned version exists in the registry stays the reconciler's job.
//!
//! CREATE and UPDATE (every violation is listed, each prefixed by its field path):
//! 1. `request.kind` must be `opmodel.dev` `Platform`.
//! 2. `metadata.name` must be `cluster` (the singleton; same rule as the CRD's CEL).
//! 3. `spec` must be an object; `spec.type` a non-empty string without leading/trailing whitespace or
//!    control characters, ≤ 253 characters (it is written into the generated `platform.cue`).
//! 4. `spec.registry`, when present, must be an object. Each key must be a major-suffixed module path
//!    (`opmodel.dev/catalogs/opm@v2`, see [`crate::syntax`]) outside the reserved platforms namespace
//!    `opmodel.dev/platforms/` (the generated module itself lives there), and not the core schema
//!    `opmodel.dev/core` (the operator pins core itself, §3.3; a second pin would clash).
//! 5. Each entry must be an object; `version` is required: one bare SemVer version (no `v` prefix, no
//!    range; prerelease/build allowed) whose major equals the key's `@vN`; `enable`, when set, a bool.
//!    Two majors of one catalog are two distinct entries and allowed.
//! 6. `spec.skewPolicy`, when set, must be `Warn` or `Refuse`.
//!
//! UPDATE only:
//! 7. Ratcheting: when `spec` is unchanged (metadata-only edits, e.g. finalizers or labels), the request
//!    is allowed even if the stored spec breaks a rule (a stored legacy entry without `version` stays
//!    patchable, §1.3); the violations come back as warnings.
//! 8. Status-subresource requests are allowed unchecked.
//!
//! Warnings (allowed, but risky):
//! - CREATE/UPDATE with no enabled registry entry (nothing can render until a catalog is enabled or a
//!   provider claim activates).
//! - UPDATE disabling an entry (`enable` true/unset → false): its transformers leave the platform.
//! - UPDATE removing an entry: the catalog is no longer pinned or imported.
//! - UPDATE lowering an entry's `version` (downgrade).
//! - UPDATE relaxing `skewPolicy` from `Refuse` to `Warn` or unset (renders that were refused for skew
//!   will proceed with a warning).
//!
//! DELETE is allowed with a warning: deleting the Platform clears the platform store, so every
//! ModuleInstance and ModulePackage stops rendering (`PlatformNotReady`); workloads are frozen, not
//! torn down (§3.8). The deploy manifests do not register DELETE (an operator outage must not block
//! cleanup); the function still answers it. CONNECT is allowed.

use std::collections::BTreeMap;

use crate::json::{Json, Members};
use kube_core::admission::{AdmissionRequest, AdmissionResponse};
use kube_core::DynamicObject;

use crate::common::{At, FieldPath};
use crate::syntax;
use crate::view::{ObjectView, RequestView};
use crate::violations::Findings;

/// The kind this module validates.
pub const KIND: &str = "Platform";

const RULES: crate::common::Rules = crate::common::Rules {
    kind: KIND,
    check_object,
    check_update,
    on_delete,
};

/// Validates a Platform admission request (see the module doc for the rules).
pub fn validate_platform(req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    validate_view(&RequestView::from(req))
}

/// [`validate_platform`] on the view of a request.
pub(crate) fn validate_view(req: &RequestView<'_>) -> AdmissionResponse {
    crate::common::validate(req, &RULES)
}

/// Warnings for a DELETE (always allowed).
fn on_delete(_req: &RequestView<'_>, f: &mut Findings<'_>) {
    f.warn(
        "metadata.name",
        "deleting the Platform stops all rendering: every ModuleInstance and ModulePackage reports PlatformNotReady; workloads are frozen, not torn down",
    );
}

/// One parsed registry entry, for the update comparisons.
struct Entry {
    enabled: bool,
    version: Option<semver::Version>,
}

/// Whether a registry entry is enabled (`enable` unset, or anything but `false`).
fn entry_enabled(entry: &Json<'_>) -> bool {
    !matches!(entry.get("enable"), Some(Json::Bool(false)))
}

fn entries<'s>(spec: Option<&'s Json<'_>>) -> BTreeMap<&'s str, Entry> {
    let Some(reg) = spec
        .and_then(|s| s.get("registry"))
        .and_then(Json::as_object)
    else {
        return BTreeMap::new();
    };
    reg.iter()
        .map(|(k, v)| {
            let enabled = entry_enabled(v);
            let version = v
                .get("version")
                .and_then(Json::as_str)
                .and_then(|s| semver::Version::parse(s).ok());
            (&**k, Entry { enabled, version })
        })
        .collect()
}

/// Checks rules 2–6 on one object, plus the "nothing enabled" warning.
fn check_object(obj: &ObjectView<'_>, f: &mut Findings<'_>) {
    let name = obj.name.as_deref().unwrap_or("");
    if name != crds::PLATFORM_NAME {
        f.deny(
            "metadata.name",
            format!(
                "Platform is a cluster singleton, so the only permitted name is {:?} (found {name:?})",
                crds::PLATFORM_NAME
            ),
        );
    }
    let Some(spec) = crate::common::spec(obj).and_then(Json::as_object) else {
        f.deny("spec", "is required and must be an object");
        return;
    };
    if let Some(t) = crate::common::req_str(spec.get("type"), "spec.type", f) {
        if t.trim() != t || t.trim().is_empty() {
            f.deny(
                "spec.type",
                format!("{t:?} must not have leading or trailing whitespace"),
            );
        }
        if t.chars().any(char::is_control) {
            f.deny("spec.type", "must not contain control characters");
        }
        if t.len() > 253 {
            f.deny("spec.type", "must be at most 253 characters");
        }
    }
    match spec.get("registry") {
        None | Some(Json::Null) => {}
        Some(Json::Object(reg)) => check_registry(reg, f),
        Some(_) => f.deny(
            "spec.registry",
            "must be a map from catalog path to {enable, version}",
        ),
    }
    match spec.get("skewPolicy") {
        None | Some(Json::Null) => {}
        Some(Json::String(s)) if s == "Warn" || s == "Refuse" => {}
        Some(other) => f.deny(
            "spec.skewPolicy",
            format!("must be \"Warn\" or \"Refuse\", found {other}"),
        ),
    }
    // Only `enable` matters here: no clone of the spec, no version parsing.
    let any_enabled = spec
        .get("registry")
        .and_then(Json::as_object)
        .is_some_and(|reg| reg.values().any(entry_enabled));
    if !any_enabled {
        f.warn(
            "spec.registry",
            "no catalog is enabled; nothing can render until one is enabled or a provider claim activates",
        );
    }
}

fn check_registry(reg: &Members<'_>, f: &mut Findings<'_>) {
    for (key, entry) in reg {
        let base = FieldPath {
            base: "spec.registry",
            at: At::Key(key),
            tail: "",
        };
        let mut major = None;
        match syntax::check_major_module_path(key) {
            Ok((path, m)) => {
                major = Some(m);
                if path == syntax::CORE_MODULE_PATH {
                    f.deny(
                        base,
                        format!("{key:?} is the core schema, which the operator pins itself, not a catalog"),
                    );
                }
                if syntax::is_reserved(path) {
                    f.deny(
                        base,
                        format!(
                            "{key:?} lies under the reserved platforms namespace {:?} (the generated platform module's, never published)",
                            syntax::RESERVED_PLATFORMS_PREFIX
                        ),
                    );
                }
            }
            Err(e) => f.deny(base, format!("the key {e}")),
        }
        let Some(entry) = entry.as_object() else {
            f.deny(base, "must be an object {enable, version}");
            continue;
        };
        if let Some(version) =
            crate::common::req_str(entry.get("version"), base.field(".version"), f)
        {
            match syntax::check_bare_semver(version) {
                Ok(v) => {
                    if let Some(m) = major {
                        if v.major != m {
                            f.deny(
                                base.field(".version"),
                                format!(
                                    "{version:?} has major {} but the key is major-suffixed @v{m}",
                                    v.major
                                ),
                            );
                        }
                    }
                }
                Err(e) => f.deny(base.field(".version"), e),
            }
        }
        match entry.get("enable") {
            None | Some(Json::Null) | Some(Json::Bool(_)) => {}
            Some(_) => f.deny(base.field(".enable"), "must be a bool"),
        }
    }
}

/// The update warnings.
fn check_update(old: &ObjectView<'_>, new: &ObjectView<'_>, f: &mut Findings<'_>) {
    let old_spec = crate::common::spec(old);
    let new_spec = crate::common::spec(new);
    let (old_e, new_e) = (entries(old_spec), entries(new_spec));
    for (key, o) in &old_e {
        let base = FieldPath {
            base: "spec.registry",
            at: At::Key(key),
            tail: "",
        };
        match new_e.get(key) {
            None => f.warn(
                base,
                "removes this catalog from the platform; instances rendering with its transformers will fail to resolve",
            ),
            Some(n) => {
                if o.enabled && !n.enabled {
                    f.warn(
                        base.field(".enable"),
                        "disables this catalog; its transformers leave the platform and instances using them will fail to resolve",
                    );
                }
                if let (Some(ov), Some(nv)) = (&o.version, &n.version) {
                    if nv < ov {
                        f.warn(base.field(".version"), format!("downgrades the catalog from {ov} to {nv}"));
                    }
                }
            }
        }
    }
    let policy = |s: Option<&Json<'_>>| {
        s.and_then(|s| s.get("skewPolicy"))
            .and_then(Json::as_str)
            .unwrap_or("Warn")
            .to_owned()
    };
    if policy(old_spec) == "Refuse" && policy(new_spec) != "Refuse" {
        f.warn(
            "spec.skewPolicy",
            "relaxes the skew policy from Refuse to Warn; renders of modules built against newer catalogs will proceed with a warning",
        );
    }
}
