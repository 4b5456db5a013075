//! Admission rules for `TransformerRegistration` claims (docs/design/operator.md §1.4, §4; docs/design/decisions.md §11–§14).
//!
//! A claim is stamped by a provider module's transformer, never authored by hand, so anything the
//! reconciler would later refuse for syntax alone is refused here, where the author sees it at apply
//! time. Semantic checks that need the registry or the cluster (wrong kind, provides mismatch,
//! provider identity, build compatibility, duplicate claims) stay in the reconciler (§4.1).
//!
//! CREATE and UPDATE (every violation is listed, each prefixed by its field path):
//! 1. `request.kind` must be `opmodel.dev` `TransformerRegistration`.
//! 2. `spec` must be an object.
//! 3. `spec.providerRef.namespace` must be a DNS-1123 label (a namespace name, ≤ 63 characters);
//!    `spec.providerRef.name` a DNS-1123 subdomain (an object name, ≤ 253 characters).
//! 4. `metadata.name` must equal `<spec.providerRef.namespace>.<spec.providerRef.name>` (docs/design/decisions.md §14; the
//!    CRD's CEL rule only checks for the dot).
//! 5. `spec.catalog` must be a major-suffixed module path (`example.com/catalogs/x@v1`, see
//!    [`crate::syntax`]); it must not lie under the reserved platforms namespace `opmodel.dev/platforms/`
//!    and must not be the core schema `opmodel.dev/core` (pinned by the operator, never a catalog).
//! 6. `spec.version` must be one bare SemVer version (no `v` prefix, no range; prerelease and build
//!    allowed) whose major equals the `@vN` of `spec.catalog`.
//! 7. `spec.provides` must be present (it may be empty), a list of contract FQNs
//!    (`<module path>/<name>@v<N>`; a transformer FQN `...@1.2.3` is refused with a hint), without
//!    duplicates.
//!
//! UPDATE only:
//! 8. Identity is immutable: `spec.providerRef` (the name is derived from it and names cannot change)
//!    and `spec.catalog` (the claim's catalog is what the duplicate-claim holder rule of §4.1 step 8 ranks
//!    by creationTimestamp, what the Platform folds in, and what the dependents finalizer guards; a
//!    different catalog is a different claim: delete this one and create a new one). `spec.version` and
//!    `spec.provides` may change (a provider upgrade re-stamps them).
//! 9. Ratcheting: when `spec` is unchanged (a metadata-only edit such as the operator releasing the
//!    `opmodel.dev/dependents` finalizer), the request is allowed even if the stored spec breaks a
//!    rule; the violations are returned as warnings instead, so a legacy object never gets stuck.
//! 10. Status-subresource requests are allowed unchecked (the status belongs to the reconciler).
//!
//! Warnings (allowed, but risky):
//! - UPDATE lowering `spec.version` (a downgrade of the provider catalog).
//! - UPDATE dropping contracts from `spec.provides` (instances demanding them stop resolving once the
//!   claim is re-judged).
//! - `spec.catalog` containing a `modules` path element (a claim must name a catalog, never a module,
//!   docs/design/decisions.md §12; the reconciler refuses it with `CatalogWrongKind`).
//!
//! DELETE is always allowed (a claim's removal is guarded by the `opmodel.dev/dependents` finalizer,
//! §4.4, not by admission), with a warning when the claim holds that finalizer (the delete waits until
//! no ModuleInstance demands its contracts) and one when it is active (once released, its catalog
//! leaves the platform). The deploy manifests do not register DELETE (so an
//! operator outage never blocks cleanup); the function still answers it. CONNECT is allowed.

use std::collections::BTreeSet;

use crate::json::Json;
use kube_core::admission::{AdmissionRequest, AdmissionResponse};
use kube_core::DynamicObject;

use crate::common::{At, FieldPath};
use crate::syntax;
use crate::view::{ObjectView, RequestView};
use crate::violations::Findings;

/// The kind this module validates.
pub const KIND: &str = "TransformerRegistration";

const RULES: crate::common::Rules = crate::common::Rules {
    kind: KIND,
    check_object,
    check_update,
    on_delete,
};

/// Validates a TransformerRegistration admission request (see the module doc for the rules).
pub fn validate_transformer_registration(
    req: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    validate_view(&RequestView::from(req))
}

/// [`validate_transformer_registration`] on the view of a request.
pub(crate) fn validate_view(req: &RequestView<'_>) -> AdmissionResponse {
    crate::common::validate(req, &RULES)
}

/// Warnings for a DELETE (always allowed).
fn on_delete(req: &RequestView<'_>, f: &mut Findings<'_>) {
    if let Some(old) = &req.old_object {
        if old.status_flag("active") {
            f.warn(
                "status.active",
                format!(
                    "{} is an active claim: once released, its catalog {} leaves the platform",
                    old.name.as_deref().unwrap_or(""),
                    crate::common::spec(old)
                        .and_then(|s| s.get("catalog"))
                        .and_then(Json::as_str)
                        .unwrap_or("")
                ),
            );
        }
        let guarded = old
            .finalizers
            .iter()
            .any(|x| x == crds::FINALIZER_DEPENDENTS);
        if guarded {
            f.warn(
                "metadata.finalizers",
                format!(
                    "{} holds the {} finalizer: deletion completes only once no ModuleInstance demands a contract it provides",
                    old.name.as_deref().unwrap_or(""),
                    crds::FINALIZER_DEPENDENTS
                ),
            );
        }
    }
}

/// Checks rules 2–7 on one object.
fn check_object(obj: &ObjectView<'_>, f: &mut Findings<'_>) {
    let name = obj.name.as_deref().unwrap_or("");
    let Some(spec) = crate::common::spec(obj).and_then(Json::as_object) else {
        f.deny("spec", "is required and must be an object");
        return;
    };

    // providerRef and the name derived from it.
    let mut ref_parts = None;
    match spec.get("providerRef") {
        Some(Json::Object(pr)) => {
            let ns = crate::common::req_str(pr.get("namespace"), "spec.providerRef.namespace", f);
            let nm = crate::common::req_str(pr.get("name"), "spec.providerRef.name", f);
            if let Some(ns) = ns {
                if let Err(e) = crate::common::check_dns_label(ns) {
                    f.deny("spec.providerRef.namespace", e);
                }
            }
            if let Some(nm) = nm {
                if let Err(e) = crate::common::check_dns_subdomain(nm) {
                    f.deny("spec.providerRef.name", e);
                }
            }
            if let (Some(ns), Some(nm)) = (ns, nm) {
                ref_parts = Some((ns, nm));
            }
        }
        Some(_) => f.deny("spec.providerRef", "must be an object {namespace, name}"),
        None => f.deny(
            "spec.providerRef",
            "is required (the ModuleInstance that rendered this claim)",
        ),
    }
    if let Some((ns, nm)) = ref_parts {
        let derived = name
            .strip_prefix(ns)
            .and_then(|rest| rest.strip_prefix('.'))
            == Some(nm);
        if !derived {
            let want = format!("{ns}.{nm}");
            f.deny(
                "metadata.name",
                format!("must be {want:?} (<spec.providerRef.namespace>.<spec.providerRef.name>), found {name:?}"),
            );
        }
    } else if !name.contains('.') {
        f.deny(
            "metadata.name",
            "must be the dot-joined <namespace>.<name> of the claiming instance",
        );
    }

    // catalog and version.
    let mut major = None;
    if let Some(catalog) = crate::common::req_str(spec.get("catalog"), "spec.catalog", f) {
        match syntax::check_major_module_path(catalog) {
            Ok((path, m)) => {
                major = Some(m);
                if syntax::is_reserved(path) {
                    f.deny(
                        "spec.catalog",
                        format!(
                            "{catalog:?} lies under the reserved platforms namespace {:?} (the generated platform module's, never published)",
                            syntax::RESERVED_PLATFORMS_PREFIX
                        ),
                    );
                }
                if path == syntax::CORE_MODULE_PATH {
                    f.deny(
                        "spec.catalog",
                        format!("{catalog:?} is the core schema, which the operator pins itself, not a catalog"),
                    );
                }
                if path.split('/').skip(1).any(|e| e == "modules") {
                    f.warn(
                        "spec.catalog",
                        format!("{catalog:?} looks like a module path; a claim must name a catalog, never a module"),
                    );
                }
            }
            Err(e) => f.deny("spec.catalog", e),
        }
    }
    if let Some(version) = crate::common::req_str(spec.get("version"), "spec.version", f) {
        match syntax::check_bare_semver(version) {
            Ok(v) => {
                if let Some(m) = major {
                    if v.major != m {
                        f.deny(
                            "spec.version",
                            format!(
                                "{version:?} has major {} but spec.catalog is major-suffixed @v{m}",
                                v.major
                            ),
                        );
                    }
                }
            }
            Err(e) => f.deny("spec.version", e),
        }
    }

    // provides.
    match spec.get("provides") {
        Some(Json::Array(items)) => {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let path = FieldPath {
                    base: "spec.provides",
                    at: At::Index(i),
                    tail: "",
                };
                match item.as_str() {
                    Some(fqn) => {
                        if let Err(e) = syntax::check_contract_fqn(fqn) {
                            f.deny(path, e);
                        }
                        if !seen.insert(fqn) {
                            f.deny(path, format!("{fqn:?} is listed more than once"));
                        }
                    }
                    None => f.deny(path, "must be a string (a contract FQN)"),
                }
            }
        }
        Some(Json::Null) | None => f.deny("spec.provides", "is required (it may be an empty list)"),
        Some(_) => f.deny("spec.provides", "must be a list of contract FQNs"),
    }
}

/// Checks rule 8 and the update warnings.
fn check_update(old: &ObjectView<'_>, new: &ObjectView<'_>, f: &mut Findings<'_>) {
    let old_spec = crate::common::spec(old);
    let new_spec = crate::common::spec(new);
    fn field<'v, 'a>(spec: Option<&'v Json<'a>>, key: &str) -> Option<&'v Json<'a>> {
        spec.and_then(|s| s.get(key))
    }
    for (key, why) in [
        ("providerRef", "the claim's name is derived from it"),
        (
            "catalog",
            "a different catalog is a different claim: delete this claim and create a new one",
        ),
    ] {
        let (o, n) = (field(old_spec, key), field(new_spec, key));
        if o.is_some() && o != n {
            f.deny(format!("spec.{key}"), format!("is immutable ({why})"));
        }
    }
    let ver = |s: Option<&Json<'_>>| {
        s.and_then(|s| s.get("version"))
            .and_then(Json::as_str)
            .and_then(|v| semver::Version::parse(v).ok())
    };
    if let (Some(o), Some(n)) = (ver(old_spec), ver(new_spec)) {
        if n < o {
            f.warn(
                "spec.version",
                format!("downgrades the provider catalog from {o} to {n}"),
            );
        }
    }
    let provides = |s: Option<&Json<'_>>| -> BTreeSet<String> {
        s.and_then(|s| s.get("provides"))
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (o, n) = (provides(old_spec), provides(new_spec));
    let dropped: Vec<&str> = o.difference(&n).map(String::as_str).collect();
    if !dropped.is_empty() {
        f.warn(
            "spec.provides",
            format!(
                "drops {}; ModuleInstances demanding them stop resolving once the claim is re-judged",
                dropped.join(", ")
            ),
        );
    }
}
