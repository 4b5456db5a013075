//! The TransformerRegistration reconciler (docs/design/operator.md §4; docs/design/decisions.md §7, §8, §10, §13, §14).
//!
//! Rules implemented here:
//! - §4.1 the verdict steps run in order and the first refusal or deferral wins: lease the store
//!   record (none → defer `PlatformNotReady`), acquire the catalog (wrong kind by type →
//!   `CatalogWrongKind`, anything else → `CatalogUnresolved`), provides (`ProvidesMismatch`),
//!   provider identity (`ProviderMismatch` / defer `ProviderInventoryPending`), build compatibility
//!   against the leased package's deps (`BuildIncompatible`), duplicate claim (`DuplicateClaim`),
//!   subscribed contract (`ContractSubscribed`), claimed contract (`ContractClaimed`), accept.
//!   The pure steps live in [`super::claims`].
//! - Step 9 skips providers that are the claim's own catalog or the catalog of an active claim:
//!   those are entries the Platform folded in from claims, not subscriptions, and step 10 judges
//!   them as `ContractClaimed` (otherwise an active claim would refuse itself and oscillate, and a
//!   rival claim would be reported as a subscription).
//! - §4.2 refuse: Warning once per transition (action `Accept`), `accepted=false`, Stalled, the
//!   `Active` condition removed only when not active (latch), requeue 30 min. Defer: Ready=Unknown
//!   via Reconciling, `accepted` untouched, requeue 30 min (the watches are the fast path).
//! - §4.1 step 11 accept: the dependents finalizer (metadata patch) then one status patch:
//!   `accepted=true`, Ready=True `Accepted`, and the §4.3 activation latch (`active` is never
//!   cleared; Active=True `ProviderReady` once the provider is Ready, else Active=False
//!   `ProviderNotReady`). No requeue.
//! - §4.4 deletion: without the finalizer nothing is done; dependents are the ModuleInstances whose
//!   `status.requiredContracts` meet `spec.provides` (no registry access); any → Stalled
//!   `DependentsRemain` (Warning on transition, action `Delete`), 30 min; none → the finalizer is
//!   released. A list error is returned (never release on an unreadable answer).
//! - *(post-seed)* transient catalog hold (§4.1 step 4): when the catalog cannot be pulled for
//!   a transient reason (the kernel classifies it `TransientPull`: registry unreachable, timeout,
//!   5xx) and the claim is accepted at its current generation (`status.accepted` and
//!   `observedGeneration == metadata.generation`), the verdict is kept: `accepted`, `active`,
//!   Ready and the finalizer are untouched (the catalog stays in the platform package), and only
//!   Reconciling=True `CatalogUnresolved` records the failure (a Warning once per transition,
//!   action `Accept`). Requeue is the hold-age backoff: the age of that Reconciling condition,
//!   clamped to [5 s, 5 min] (level-computed from the status, so it survives restarts). A claim
//!   not yet accepted, or edited since, is refused `CatalogUnresolved` as in the seed.
//! - Every message names the claim, catalog and version, or the provider `ns/name`.

use std::sync::Arc;
use std::time::Duration;

use crds::common::Inventory;
use crds::conditions::{self, reasons, types, Status};
use crds::module_instance::ModuleInstance;
use crds::transformer_registration::{TransformerRegistration, TransformerRegistrationStatus};
use crds::FINALIZER_DEPENDENTS;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::claims;
use super::context::{Context, Reconciled};
use super::outcome::{Outcome, STALLED_RECHECK};
use super::reconcile::{self, End, Failure, Halt, Kind, Mark, Mode, Note, Run, When};
use super::runtime::{self, is_not_found, Error};
use crate::kernel::{AcquireError, ErrorClass};

/// The shortest requeue of a transient catalog hold.
pub const HOLD_MIN: Duration = Duration::from_secs(5);
/// The longest requeue of a transient catalog hold.
pub const HOLD_MAX: Duration = Duration::from_secs(5 * 60);

/// The event action of verdicts.
pub const ACTION_ACCEPT: &str = "Accept";
/// The event action of the removal guard.
pub const ACTION_DELETE: &str = "Delete";

/// The deferral message when no platform is recorded.
pub const NO_PLATFORM: &str = "No platform has been generated yet, so the claim cannot be judged";

/// A verdict step's result.
enum Verdict {
    Refuse(&'static str, String),
    Defer(&'static str, String),
    /// Keep the accepted verdict through a transient catalog pull failure.
    Hold(String),
}

/// Whether a claim counts as a holder (docs/design/decisions.md §14, §7): not deleting, or deleting while holding the finalizer.
pub fn counts(tr: &TransformerRegistration) -> bool {
    tr.metadata.deletion_timestamp.is_none()
        || tr.finalizers().iter().any(|f| f == FINALIZER_DEPENDENTS)
}

fn ready_true(mi: &ModuleInstance) -> bool {
    mi.status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, types::READY))
}

fn owns_claim(inv: &Inventory, claim: &str) -> bool {
    inv.entries.iter().any(|e| {
        e.group.as_deref() == Some(crds::GROUP)
            && e.kind == "TransformerRegistration"
            && e.name == claim
    })
}

/// Reconciles the claim named `name` (§4).
pub async fn reconcile(name: &str, ctx: &Context) -> Result<Reconciled, Error> {
    reconcile::reconcile::<TransformerRegistration>(ctx, "", name, Mode::Lead).await
}

impl Kind for TransformerRegistration {
    type Status = TransformerRegistrationStatus;
    const KIND: &'static str = "TransformerRegistration";

    reconcile::status_field!();

    fn api(client: kube::Client, _namespace: &str) -> Api<Self> {
        Api::all(client)
    }

    /// §4, top to bottom.
    async fn phases(run: &mut Run<'_, Self>) -> Result<End, Halt> {
        // §4.4 removal guard.
        if run.deleting() {
            return guard_removal(run).await;
        }
        // Steps 3–10 (judged on the status as read: a hold needs the verdict at this generation).
        let judged = verdict(&run.obj, run.ctx).await;
        // Every verdict records the generation and the reconcile request handled.
        let (generation, requested) = (run.generation(), run.requested());
        let status = run.status();
        status.observed_generation = generation;
        if requested.is_some() {
            status.last_handled_reconcile_at = requested;
        }
        let provider = match judged {
            Ok(provider) => provider,
            Err(Verdict::Refuse(reason, message)) => return Err(refuse(run, reason, message)),
            Err(Verdict::Defer(reason, message)) => {
                return Err(Failure::deferred(reason, message)
                    .after(Some(STALLED_RECHECK))
                    .into())
            }
            Err(Verdict::Hold(message)) => return Ok(hold(run, message)),
        };
        // Step 11.
        accept(run, provider).await
    }
}

/// Steps 3–10; `Ok` carries the provider instance (for the activation gate).
async fn verdict(tr: &TransformerRegistration, ctx: &Context) -> Result<ModuleInstance, Verdict> {
    let name = tr.name_any();
    let api: Api<TransformerRegistration> = Api::all(ctx.client.clone());
    let spec = &tr.spec;
    let (catalog, version) = (spec.catalog.clone(), spec.version.clone());

    // 3. Lease the record for the whole judgement (prune keeps leased packages).
    let Some((record, _lease)) = ctx.store.lease() else {
        return Err(Verdict::Defer(
            reasons::PLATFORM_NOT_READY,
            NO_PLATFORM.to_owned(),
        ));
    };

    // 4. Acquire the catalog.
    let acquirer = Arc::clone(&ctx.acquirer);
    let (c, v) = (catalog.clone(), version.clone());
    let acquired = runtime::blocking("acquiring the claimed catalog", move || {
        acquirer.acquire(&c, &v)
    })
    .await
    .map_err(|e| {
        Verdict::Refuse(
            reasons::CATALOG_UNRESOLVED,
            format!("Claimed catalog {catalog} at {version} could not be resolved: {e}"),
        )
    })?;
    let info = match acquired {
        Ok(info) => info,
        Err(AcquireError::WrongKind(m)) => {
            return Err(Verdict::Refuse(
                reasons::CATALOG_WRONG_KIND,
                format!("Claimed artifact {catalog} at {version} is not a catalog: {m}"),
            ))
        }
        Err(AcquireError::Other(e)) if e.class == ErrorClass::TransientPull && holds(tr) => {
            return Err(Verdict::Hold(format!(
                "Claimed catalog {catalog} at {version} could not be resolved: {e}; the accepted \
                 verdict is kept until the registry answers"
            )))
        }
        Err(AcquireError::Other(e)) => {
            return Err(Verdict::Refuse(
                reasons::CATALOG_UNRESOLVED,
                format!("Claimed catalog {catalog} at {version} could not be resolved: {e}"),
            ))
        }
    };

    // 5. Provides.
    if let Some(msg) = claims::provides_mismatch(&spec.provides, &info.provides) {
        return Err(Verdict::Refuse(reasons::PROVIDES_MISMATCH, msg));
    }

    // 6. Provider identity.
    let (pns, pname) = (&spec.provider_ref.namespace, &spec.provider_ref.name);
    let mis: Api<ModuleInstance> = Api::namespaced(ctx.client.clone(), pns);
    let provider = match mis.get(pname).await {
        Ok(mi) => mi,
        Err(e) if is_not_found(&e) => {
            return Err(Verdict::Refuse(
                reasons::PROVIDER_MISMATCH,
                format!(
                    "Claim names provider ModuleInstance {pns}/{pname}, which does not exist, so \
                     the claim is not rendered output"
                ),
            ))
        }
        Err(e) => {
            return Err(Verdict::Defer(
                reasons::PROVIDER_INVENTORY_PENDING,
                format!("Provider ModuleInstance {pns}/{pname} could not be read: {e}"),
            ))
        }
    };
    match provider
        .status
        .as_ref()
        .and_then(|s| s.reconcile.inventory.as_ref())
    {
        None => {
            return Err(Verdict::Defer(
                reasons::PROVIDER_INVENTORY_PENDING,
                format!("Provider ModuleInstance {pns}/{pname} has not written an inventory yet"),
            ))
        }
        Some(inv) if !owns_claim(inv, &name) => {
            return Err(Verdict::Refuse(
                reasons::PROVIDER_MISMATCH,
                format!(
                    "Claim {name} is not in the inventory of provider ModuleInstance \
                     {pns}/{pname}, so the claim is not rendered output"
                ),
            ))
        }
        Some(_) => {}
    }

    // 7. Build compatibility against the leased package.
    if let Err(msg) =
        claims::build_incompatibility(&record.platform.deps, &info.requires, claims::OPM_PREFIXES)
    {
        return Err(Verdict::Refuse(reasons::BUILD_INCOMPATIBLE, msg));
    }

    // 8. Duplicate claim.
    let all = match api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => {
            return Err(Verdict::Defer(
                reasons::DUPLICATE_CLAIM,
                format!("Claims of catalog {catalog} could not be listed: {e}"),
            ))
        }
    };
    let live: Vec<&TransformerRegistration> = all.iter().filter(|t| counts(t)).collect();
    let same: Vec<(i128, String)> = live
        .iter()
        .filter(|t| t.spec.catalog == catalog)
        .map(|t| {
            let created = t
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|ts| ts.0.as_nanosecond())
                .unwrap_or_default();
            (created, t.name_any())
        })
        .collect();
    if let Some(holder) = claims::holder(&same) {
        if holder != name {
            return Err(Verdict::Refuse(
                reasons::DUPLICATE_CLAIM,
                format!(
                    "Claim {holder} already holds provider catalog {catalog}; remove one of the \
                     two claims"
                ),
            ));
        }
    }

    // 9. Subscribed contract.
    let mut provides = spec.provides.clone();
    provides.sort();
    provides.dedup();
    let active_others: Vec<&&TransformerRegistration> = live
        .iter()
        .filter(|t| t.name_any() != name && t.status.as_ref().is_some_and(|s| s.active))
        .collect();
    let claimed_catalogs: Vec<&str> = active_others
        .iter()
        .map(|t| t.spec.catalog.as_str())
        .collect();
    for contract in &provides {
        let Some(providers) = record.platform.contracts.provided_by.get(contract) else {
            continue;
        };
        let mut providers = providers.clone();
        providers.sort();
        for p in providers {
            if p == catalog || claimed_catalogs.contains(&p.as_str()) {
                continue;
            }
            return Err(Verdict::Refuse(
                reasons::CONTRACT_SUBSCRIBED,
                format!(
                    "Contract {contract} is already provided by subscribed catalog {p}; a \
                     contract has exactly one provider, so disable that subscription or withdraw \
                     this claim"
                ),
            ));
        }
    }

    // 10. Claimed contract (active claims only, by name).
    let mut others = active_others;
    others.sort_by_key(|t| t.name_any());
    for other in others {
        if let Some(contract) = provides.iter().find(|c| other.spec.provides.contains(c)) {
            return Err(Verdict::Refuse(
                reasons::CONTRACT_CLAIMED,
                format!(
                    "Contract {contract} is already provided by active claim {}; a contract has \
                     exactly one provider, so remove one of the two providers",
                    other.name_any()
                ),
            ));
        }
    }
    Ok(provider)
}

/// Step 11 (§4.1, §4.3): the finalizer, `accepted`, Ready=True `Accepted` and the activation
/// latch; Normal events when the claim is newly accepted and when it becomes active.
async fn accept(
    run: &mut Run<'_, TransformerRegistration>,
    provider: ModuleInstance,
) -> Result<End, Halt> {
    run.add_finalizer(FINALIZER_DEPENDENTS).await?;
    let generation = run.generation();
    let now = runtime::now();
    let spec = &run.obj.spec;
    let (c, v) = (&spec.catalog, &spec.version);
    let (pns, pname) = (&spec.provider_ref.namespace, &spec.provider_ref.name);
    let accepted = format!("Claim accepted for catalog {c} at {v}");
    let ready = format!("Provider ModuleInstance {pns}/{pname} is Ready");
    let waiting = format!("Waiting for provider ModuleInstance {pns}/{pname} to report Ready");
    let activated_note = format!("{ready}; the claim is active");
    // Ready before the latch's Active in a new list.
    run.mark(&Mark::Ready(reasons::ACCEPTED, accepted.clone()));
    let status = run.status();
    status.accepted = true;
    let was_active = status.active;
    // §4.3 activation latch.
    if !status.active {
        if ready_true(&provider) {
            status.active = true;
            conditions::set(
                &mut status.conditions,
                types::ACTIVE,
                Status::True,
                reasons::PROVIDER_READY,
                &ready,
                generation,
                &now,
            );
        } else {
            conditions::set(
                &mut status.conditions,
                types::ACTIVE,
                Status::False,
                reasons::PROVIDER_NOT_READY,
                &waiting,
                generation,
                &now,
            );
        }
    }
    let activated = !was_active && status.active;
    // Normal events on the changes a user waits for: the claim accepted, then activated.
    Ok(End::reason(reasons::ACCEPTED)
        .outcome(Outcome::Applied)
        .note(Note::normal(reasons::ACCEPTED, ACTION_ACCEPT, accepted).when(When::Transition))
        .note_if(
            activated,
            Note::normal(reasons::PROVIDER_READY, ACTION_ACCEPT, activated_note),
        ))
}

/// §4.2 refuse: `accepted=false`, the `Active` condition removed unless active (latch), Stalled
/// with a Warning once per transition (action `Accept`), 30 minutes.
fn refuse(
    run: &mut Run<'_, TransformerRegistration>,
    reason: &'static str,
    message: String,
) -> Halt {
    let status = run.status();
    status.accepted = false;
    if !status.active {
        conditions::remove(&mut status.conditions, types::ACTIVE);
    }
    Failure::stalled(reason, ACTION_ACCEPT, message).into()
}

/// Whether a transient pull failure keeps `tr`'s verdict: accepted at its current generation.
fn holds(tr: &TransformerRegistration) -> bool {
    tr.status.as_ref().is_some_and(|s| {
        s.accepted
            && s.observed_generation.is_some()
            && s.observed_generation == tr.metadata.generation
    })
}

/// The hold-age backoff: the time the hold has lasted, clamped to [`HOLD_MIN`, `HOLD_MAX`].
pub fn hold_requeue(age: Duration) -> Duration {
    age.clamp(HOLD_MIN, HOLD_MAX)
}

/// The transient catalog hold: only Reconciling=True `CatalogUnresolved` is written; a Warning
/// when the hold starts; requeue by the hold's age.
fn hold(run: &mut Run<'_, TransformerRegistration>, message: String) -> End {
    let generation = run.generation();
    let now = runtime::now();
    let status = run.status();
    let since = conditions::get(&status.conditions, types::RECONCILING)
        .filter(|c| c.status == "True" && c.reason == reasons::CATALOG_UNRESOLVED)
        .map(|c| c.last_transition_time.0);
    let started = since.is_none();
    let age = since
        .and_then(|t| {
            let secs = now.0.as_second().saturating_sub(t.as_second());
            u64::try_from(secs).ok()
        })
        .map(Duration::from_secs)
        .unwrap_or_default();
    conditions::set(
        &mut status.conditions,
        types::RECONCILING,
        Status::True,
        reasons::CATALOG_UNRESOLVED,
        &message,
        generation,
        &now,
    );
    tracing::warn!(message = %message, held_s = age.as_secs(), "claim verdict held");
    End::reason(reasons::CATALOG_UNRESOLVED)
        .outcome(Outcome::FailedTransient)
        .after(Some(hold_requeue(age)))
        .note_if(
            started,
            Note::warning(reasons::CATALOG_UNRESOLVED, ACTION_ACCEPT, message),
        )
}

/// §4.4: the removal guard.
async fn guard_removal(run: &mut Run<'_, TransformerRegistration>) -> Result<End, Halt> {
    if !run.has_finalizer(FINALIZER_DEPENDENTS) {
        return Ok(End::done());
    }
    let name = &run.name;
    let mis: Api<ModuleInstance> = Api::all(run.ctx.client.clone());
    let list = mis.list(&ListParams::default()).await.map_err(|e| {
        Error::kube(
            format!("listing ModuleInstances for the dependents of TransformerRegistration {name}"),
            e,
        )
    })?;
    let required: Vec<(String, String, Vec<String>)> = list
        .items
        .iter()
        .map(|mi| {
            (
                mi.namespace().unwrap_or_default(),
                mi.name_any(),
                mi.status
                    .as_ref()
                    .map(|s| s.required_contracts.clone())
                    .unwrap_or_default(),
            )
        })
        .collect();
    let dependents = claims::dependents(
        &run.obj.spec.provides,
        required
            .iter()
            .map(|(ns, n, r)| (ns.as_str(), n.as_str(), r.as_slice())),
    );
    if dependents.is_empty() {
        run.remove_finalizer(FINALIZER_DEPENDENTS).await?;
        tracing::info!("no dependents; removal guard released");
        return Ok(End::done());
    }
    let message = claims::dependents_message(&dependents);
    Err(Failure::stalled(reasons::DEPENDENTS_REMAIN, ACTION_DELETE, message).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hold_backoff_follows_the_hold_age_within_bounds() {
        assert_eq!(hold_requeue(Duration::ZERO), HOLD_MIN);
        assert_eq!(hold_requeue(Duration::from_secs(3)), HOLD_MIN);
        assert_eq!(
            hold_requeue(Duration::from_secs(42)),
            Duration::from_secs(42)
        );
        assert_eq!(hold_requeue(Duration::from_secs(3600)), HOLD_MAX);
    }
}
