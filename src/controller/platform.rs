//! The Platform reconciler (docs/design/operator.md §3, keyed on the package identity of §5.4).
//!
//! Rules implemented here, in order:
//! - §3.1 guards: a request for any name but `cluster` is ignored (store untouched); a missing
//!   Platform or one being deleted clears the store and touches no workload (§3.8: renders then
//!   get PlatformNotReady, leases finish against their directories).
//! - §3.2 the package is a pure function of (spec, active claims), both read as current state.
//!   Active claims: `status.accepted && status.active` and (no deletion timestamp, or still holding
//!   `opmodel.dev/dependents`), by name. Entries: one per `spec.registry` key (an empty version
//!   stalls with `BuildFailed` before any registry I/O), then one per active claim whose catalog is
//!   not already a key (a subscription, even disabled, wins), sorted by path.
//! - §3.9/§5.4 skip: when the store holds a record of the same [`PackageIdentity`] whose directory
//!   still exists, nothing is regenerated; status and ContractsFulfilled are refreshed from the
//!   held package. Otherwise the files are generated and installed with `Layout::ensure`, so the
//!   hazard of §5.3 (moving a leased directory of the same key) cannot occur.
//! - §3.5 build (in one of the process's render slots, `crate::render_lease::RenderSlots`: it
//!   evaluates like a render), gate (texts in [`super::platform_gate`]), record, then prune with keep-set
//!   = current ∪ leased (the store is the prune's lease view). Failed builds never prune.
//! - §3.6 failures: Warning once per transition (action `Generate`), Stalled, store untouched
//!   (the last good package keeps serving); requeue 1 minute for `TransientPull`, else 30 minutes;
//!   inventory refusals 30 minutes. ContractsFulfilled is written only when a package is recorded.
//! - [`Mode::Observe`] (followers) runs the same steps into the replica's own store and layout but
//!   writes no status and no event: the render API of every replica then has a package to lease,
//!   while the cluster sees only the leader.
//! - Success: Ready=True `Generated` “Platform module generated and built for generation N”,
//!   Normal event `Generated`, no requeue; the TransformerRegistration controller is signalled.
//! - `spec.verify` (issue 41, `super::verify`): the keys of the Secret in the operator's
//!   namespace become the process's registry-wide policy before anything is generated, so the
//!   closure's module files and the build's catalogs are verified by digest; a catalog that does
//!   not verify (or an unusable key Secret) is Stalled `VerificationFailed`; a package recorded
//!   under other keys (or none) is not skipped but built again.
//! - Messages: the kernel's errors already carry the prefixes of §3.3–§3.5 (`resolving platform
//!   dependencies: …`, `generating platform module: …`, `building platform module: …`, `reading
//!   the platform's contract inventory: …`) and name the path, version or field; they are written
//!   verbatim (with their structured problems). The reason is chosen by step and class, never by
//!   text: a generate error of class `TransientPull`/`Resolution` is a closure failure
//!   (`BuildFailed`), any other `GenerateFailed`; a build error is `BuildFailed`. The reconciler's
//!   own steps prefix theirs (`writing platform module: …`, the versionless-entry text).

use std::collections::BTreeMap;
use std::sync::Arc;

use crds::conditions::{self, reasons, types, Status};
use crds::platform::{
    PackageIdentity as StatusIdentity, PinnedCatalog, Platform, PlatformStatus, RegistrySource,
};
use crds::transformer_registration::TransformerRegistration;
use crds::{FINALIZER_DEPENDENTS, PLATFORM_NAME};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::context::{Context, Reconciled};
use super::outcome::{platform_retry, Outcome};
use super::platform_gate;
use super::reconcile::{self, End, Failure, Halt, Kind, Mark, Mode, Note, Run};
use super::runtime::{self, Error};
use crate::kernel::SkewPolicy;
use crate::kernel::{BuiltPlatform, ErrorClass, PlatformEntry, PlatformInput};
use crate::platform::{Generated, PackageIdentity};

/// The event action of every Platform event.
pub const ACTION: &str = "Generate";

/// One accepted-and-active claim contributing its catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveClaim {
    /// Claim name.
    pub name: String,
    /// Catalog path (major-suffixed).
    pub catalog: String,
    /// Bare SemVer.
    pub version: String,
}

/// The contribution of a claim to the platform (§3.7): `(catalog, version)` iff accepted, active
/// and (not deleting, or still holding the dependents finalizer).
pub fn contribution(tr: &TransformerRegistration) -> Option<(String, String)> {
    let status = tr.status.as_ref()?;
    let holds = tr.finalizers().iter().any(|f| f == FINALIZER_DEPENDENTS);
    let live = tr.metadata.deletion_timestamp.is_none() || holds;
    (status.accepted && status.active && live)
        .then(|| (tr.spec.catalog.clone(), tr.spec.version.clone()))
}

/// A failure of the entries step (§3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    /// The condition message.
    pub message: String,
}

/// §3.2: the entries of the generated module, and the provenance of each pinned catalog.
pub fn entries(
    registry: &BTreeMap<String, crds::platform::RegistryEntry>,
    claims: &[ActiveClaim],
) -> Result<(Vec<PlatformEntry>, Vec<PinnedCatalog>), EntryError> {
    let mut out = Vec::new();
    let mut pinned = Vec::new();
    for (path, e) in registry {
        if e.version.is_empty() {
            return Err(EntryError {
                message: format!(
                    "registry entry \"{path}\": version is required (stored object predates the \
                     required field)"
                ),
            });
        }
        out.push(PlatformEntry {
            path: path.clone(),
            version: e.version.clone(),
            enable: e.enabled(),
        });
        pinned.push(PinnedCatalog {
            catalog: path.clone(),
            version: e.version.clone(),
            enabled: e.enabled(),
            source: RegistrySource::Subscription,
        });
    }
    for c in claims {
        if registry.contains_key(&c.catalog) || out.iter().any(|e| e.path == c.catalog) {
            continue;
        }
        out.push(PlatformEntry {
            path: c.catalog.clone(),
            version: c.version.clone(),
            enable: true,
        });
        pinned.push(PinnedCatalog {
            catalog: c.catalog.clone(),
            version: c.version.clone(),
            enabled: true,
            source: RegistrySource::Registration,
        });
    }
    out.sort();
    pinned.sort_by(|a, b| a.catalog.cmp(&b.catalog));
    Ok((out, pinned))
}

/// The Ready message of a recorded package.
pub fn generated_message(generation: i64) -> String {
    format!("Platform module generated and built for generation {generation}")
}

fn status_identity(id: &PackageIdentity) -> StatusIdentity {
    let s = id.to_string();
    let digest = s
        .strip_prefix(&format!("gen-{}", id.generation()))
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or_default();
    StatusIdentity {
        generation: id.generation(),
        claims_digest: digest.to_owned(),
    }
}

/// Lists the active claims, sorted by name.
async fn active_claims(ctx: &Context) -> Result<Vec<ActiveClaim>, Error> {
    let api: Api<TransformerRegistration> = Api::all(ctx.client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube("listing TransformerRegistrations for Platform cluster", e))?;
    let mut out: Vec<ActiveClaim> = list
        .items
        .iter()
        .filter_map(|tr| {
            contribution(tr).map(|(catalog, version)| ActiveClaim {
                name: tr.name_any(),
                catalog,
                version,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Reconciles the Platform named `name` (§3) as the leader.
pub async fn reconcile(name: &str, ctx: &Context) -> Result<Reconciled, Error> {
    reconcile_as(name, ctx, Mode::Lead).await
}

/// Reconciles the Platform named `name` (§3) in `mode`.
pub async fn reconcile_as(name: &str, ctx: &Context, mode: Mode) -> Result<Reconciled, Error> {
    if name != PLATFORM_NAME {
        return Ok(Reconciled::done());
    }
    reconcile::reconcile::<Platform>(ctx, "", name, mode).await
}

impl Kind for Platform {
    type Status = PlatformStatus;
    const KIND: &'static str = "Platform";

    reconcile::status_field!();

    fn api(client: kube::Client, _namespace: &str) -> Api<Self> {
        Api::all(client)
    }

    fn gone(ctx: &Context, _namespace: &str, _name: &str) {
        ctx.store.clear();
    }

    /// §3, top to bottom.
    async fn phases(run: &mut Run<'_, Self>) -> Result<End, Halt> {
        let ctx = run.ctx;
        if run.deleting() {
            ctx.store.clear();
            return Ok(End::done());
        }
        // Every end records the generation, the operator version and the reconcile request
        // handled.
        let generation = run.generation();
        let requested = run.requested();
        let status = run.status();
        status.observed_generation = generation;
        status.operator_version = Some(ctx.operator_version.clone());
        if requested.is_some() {
            status.last_handled_reconcile_at = requested;
        }
        let plat = &run.obj;
        let claims = active_claims(ctx).await?;

        let (entries, pinned) = entries(&plat.spec.registry, &claims)
            .map_err(|e| failure(reasons::BUILD_FAILED, e.message, None))?;
        let identity = PackageIdentity::new(
            generation.unwrap_or_default(),
            claims
                .iter()
                .map(|c| (c.catalog.as_str(), c.version.as_str())),
        )
        .map_err(|e| {
            let msg = format!("generating platform module: {e}");
            failure(reasons::GENERATE_FAILED, msg, None)
        })?;
        let skew = SkewPolicy::from_spec(match plat.spec.skew_policy {
            Some(crds::platform::SkewPolicy::Refuse) => Some("Refuse"),
            _ => None,
        });

        // Signed catalogs (`spec.verify`): the registry-wide policy is set before anything is
        // read (`super::verify`).
        let keys = match &plat.spec.verify {
            Some(v) => Some(
                super::verify::trusted_keys(&ctx.client, &ctx.operator_namespace, v)
                    .await
                    .map_err(keys_halt)?,
            ),
            None => None,
        };
        match &ctx.signatures {
            Some(s) => s.require(keys.clone()),
            None if keys.is_some() => {
                let msg = "spec.verify: this operator has no verifying registry client".to_owned();
                return Err(failure(reasons::VERIFICATION_FAILED, msg, None).into());
            }
            None => {}
        }
        let verified_build =
            |s: &super::verify::Signatures| s.built_under(&identity.to_string(), keys.as_deref());

        // §3.9 skip keyed on the package identity (and the keys it was built under).
        if let Some(held) = ctx.store.generated() {
            if held.identity == identity
                && held.skew == skew
                && held.dir.is_dir()
                && ctx.signatures.as_deref().is_none_or(verified_build)
            {
                let built = held.platform.clone();
                return Ok(succeed(run, identity, pinned, &built, false));
            }
        }

        let input = PlatformInput {
            platform_type: plat.spec.r#type.clone(),
            entries,
        };
        let builder = Arc::clone(&ctx.builder);
        let files = runtime::blocking("generating the platform module", move || {
            builder.generate(&input)
        })
        .await?
        .map_err(|e| {
            // The kernel's message carries the §3.3/§3.4 prefix; the reason follows the class.
            let reason = match e.class {
                ErrorClass::TransientPull | ErrorClass::Resolution => reasons::BUILD_FAILED,
                ErrorClass::Verification => reasons::VERIFICATION_FAILED,
                _ => reasons::GENERATE_FAILED,
            };
            failure(reason, e.to_string(), Some(e.class))
        })?;
        let (dir, _) = ctx.layout.ensure(&identity, &files).map_err(|e| {
            let msg = format!("writing platform module: {e}");
            failure(reasons::GENERATE_FAILED, msg, None)
        })?;
        let builder = Arc::clone(&ctx.builder);
        let build_dir = dir.clone();
        // "building platform module: …" / "reading the platform's contract inventory: …" come
        // from the kernel.
        // The build evaluates like a render: it takes one of the process's render slots
        // (`crate::render_lease::RenderSlots`), held until the build returns.
        let what = "building the platform module";
        let permit = ctx
            .render_slots
            .acquire()
            .await
            .map_err(|source| runtime::Error::Slots {
                what: what.to_owned(),
                source,
            })?;
        let built = runtime::blocking(what, move || {
            let built = builder.build(&build_dir);
            drop(permit);
            built
        })
        .await?
        .map_err(|e| {
            let reason = match e.class {
                ErrorClass::Verification => reasons::VERIFICATION_FAILED,
                _ => reasons::BUILD_FAILED,
            };
            failure(reason, e.to_string(), Some(e.class))
        })?;
        if let Some(s) = &ctx.signatures {
            s.record_built(&identity.to_string(), keys.as_deref());
        }
        if let Some(refusal) = platform_gate::gate(&built.contracts) {
            return Err(failure(refusal.reason, refusal.message, None).into());
        }
        ctx.store.set_generated(Generated {
            identity,
            dir,
            platform: built.clone(),
            skew,
        });
        match ctx.layout.prune(&[identity], &ctx.store) {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(removed = ?removed, "pruned superseded platform packages");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "pruning platform packages failed"),
        }
        Ok(succeed(run, identity, pinned, &built, true))
    }
}

/// Ready=True `Generated` with the package's status; Normal `Generated` when the package was
/// `recorded` by this reconcile; the claims controller is signalled on every success (after a
/// restart the record is new even when the status is not).
fn succeed(
    run: &mut Run<'_, Platform>,
    identity: PackageIdentity,
    pinned: Vec<PinnedCatalog>,
    built: &BuiltPlatform,
    recorded: bool,
) -> End {
    let generation = run.generation();
    let fulfilment = platform_gate::fulfilment(&built.contracts);
    let status = run.status();
    status.registry = pinned;
    status.package_identity = Some(status_identity(&identity));
    conditions::set(
        &mut status.conditions,
        types::CONTRACTS_FULFILLED,
        if fulfilment.status {
            Status::True
        } else {
            Status::False
        },
        fulfilment.reason,
        &fulfilment.message,
        generation,
        &runtime::now(),
    );
    let msg = generated_message(generation.unwrap_or_default());
    tracing::info!(identity = %identity, recorded, "platform package ready");
    End::marked(Mark::Ready(reasons::GENERATED, msg.clone()))
        .outcome(if recorded {
            Outcome::Applied
        } else {
            Outcome::NoOp
        })
        .note_if(recorded, Note::normal(reasons::GENERATED, ACTION, msg))
        .then(Context::notify_recorded)
}

/// The end of a reconcile whose `spec.verify` keys could not be had (`super::verify`).
fn keys_halt(e: super::verify::KeysError) -> Halt {
    match e {
        super::verify::KeysError::Unusable(m) => {
            failure(reasons::VERIFICATION_FAILED, m, None).into()
        }
        super::verify::KeysError::Read(e) => e.into(),
    }
}

/// A failed step (§3.6): Stalled with `reason`/`message`, a Warning once per transition (action
/// `Generate`), requeued by class ([`platform_retry`]); a transient pull is counted transient.
fn failure(reason: &'static str, message: String, class: Option<ErrorClass>) -> Failure {
    let f = Failure::stalled(reason, ACTION, message).after(Some(platform_retry(class)));
    if class == Some(ErrorClass::TransientPull) {
        f.counted_as(Outcome::FailedTransient)
    } else {
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::platform::RegistryEntry;

    fn reg(v: &[(&str, &str, Option<bool>)]) -> BTreeMap<String, RegistryEntry> {
        v.iter()
            .map(|(p, ver, en)| {
                (
                    p.to_string(),
                    RegistryEntry {
                        enable: *en,
                        version: ver.to_string(),
                    },
                )
            })
            .collect()
    }

    fn claim(name: &str, catalog: &str, version: &str) -> ActiveClaim {
        ActiveClaim {
            name: name.into(),
            catalog: catalog.into(),
            version: version.into(),
        }
    }

    #[test]
    fn a_subscription_wins_over_a_claim_of_the_same_catalog_scenario_25() {
        let registry = reg(&[("x.test/b@v0", "0.1.0", Some(false))]);
        let claims = [
            claim("ns.p", "x.test/b@v0", "0.2.0"),
            claim("ns.q", "x.test/a@v1", "1.0.0"),
        ];
        let (entries, pinned) = entries(&registry, &claims).unwrap_or_default();
        assert_eq!(
            entries,
            vec![
                PlatformEntry {
                    path: "x.test/a@v1".into(),
                    version: "1.0.0".into(),
                    enable: true
                },
                PlatformEntry {
                    path: "x.test/b@v0".into(),
                    version: "0.1.0".into(),
                    enable: false
                },
            ]
        );
        assert_eq!(pinned[0].source, RegistrySource::Registration);
        assert_eq!(pinned[1].source, RegistrySource::Subscription);
    }

    #[test]
    fn a_versionless_subscription_is_refused_scenario_18() {
        let registry = reg(&[("x.test/legacy@v0", "", None)]);
        let err = entries(&registry, &[]).err();
        assert_eq!(
            err.map(|e| e.message).as_deref(),
            Some(
                "registry entry \"x.test/legacy@v0\": version is required (stored object \
                 predates the required field)"
            )
        );
    }

    #[test]
    fn the_status_identity_splits_generation_and_digest() {
        let plain = PackageIdentity::unclaimed(3);
        let claimed = PackageIdentity::new(3, [("x.test/a@v1", "1.0.0")]);
        let (Ok(plain), Ok(claimed)) = (plain, claimed) else {
            unreachable!("valid identities")
        };
        assert_eq!(status_identity(&plain).claims_digest, "");
        let s = status_identity(&claimed);
        assert_eq!(s.generation, 3);
        assert_eq!(s.claims_digest.len(), 16);
        assert_eq!(claimed.to_string(), format!("gen-3-{}", s.claims_digest));
    }
}
