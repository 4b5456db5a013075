//! Conditions and reasons (docs/design/operator.md §2.1, §3.6, §4.2, §7.3; docs/design/decisions.md §1).
//!
//! Rules:
//! - Conditions are a list-map keyed by `type` (`x-kubernetes-list-type: map`, `x-kubernetes-list-map-keys:
//!   [type]`): at most one condition per type.
//! - [`set`] replaces the condition of a type. `lastTransitionTime` changes only when the **status**
//!   changes (True/False/Unknown); a new reason, message or observedGeneration keeps the old time. New
//!   types are appended, so the list order is stable.
//! - kstatus setters ([`mark_reconciling`], [`mark_stalled`], [`mark_ready`], ...) keep the three
//!   kstatus conditions consistent: Reconciling and Stalled are never both present, and Ready always
//!   says what the other two mean. Every condition written carries the object's `observedGeneration`.
//! - The clock is never read here: `now` comes from the caller.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub mod types {
    /// kstatus: the object reached its desired state.
    pub const READY: &str = "Ready";
    /// kstatus: work is in progress.
    pub const RECONCILING: &str = "Reconciling";
    /// kstatus: progress stopped; a human must act (rechecked every 30 min).
    pub const STALLED: &str = "Stalled";
    /// ModuleInstance: the module was resolved from the registry.
    pub const MODULE_RESOLVED: &str = "ModuleResolved";
    /// ModuleInstance/ModulePackage: live objects drifted from the desired state.
    pub const DRIFTED: &str = "Drifted";
    /// Platform: every provider-fulfilled contract has a provider (never moves Ready).
    pub const CONTRACTS_FULFILLED: &str = "ContractsFulfilled";
    /// TransformerRegistration: the activation latch.
    pub const ACTIVE: &str = "Active";
}

/// Condition (and event) reasons of docs/design/operator.md §2–§4 and §7.3.
pub mod reasons {
    // kstatus / generic.
    /// Ready=True after a successful reconcile.
    pub const RECONCILIATION_SUCCEEDED: &str = "ReconciliationSucceeded";
    /// Ready=Unknown at loop start.
    pub const PROGRESSING: &str = "Progressing";
    /// Ready=False while `spec.suspend`.
    pub const SUSPENDED: &str = "Suspended";
    /// Event only: reconciliation resumed after suspension.
    pub const RESUMED: &str = "Resumed";
    /// Ready=Unknown for `owner: cli` instances.
    pub const MANAGED_EXTERNALLY: &str = "ManagedExternally";
    /// Event only: nothing changed.
    pub const NO_OP: &str = "NoOp";
    /// Event only: objects applied.
    pub const APPLIED: &str = "Applied";
    /// Event only: stale objects pruned.
    pub const PRUNED: &str = "Pruned";

    // ModuleInstance / ModulePackage render and apply.
    /// No platform record in the store yet.
    pub const PLATFORM_NOT_READY: &str = "PlatformNotReady";
    /// The module (or its dependencies) could not be resolved.
    pub const RESOLUTION_FAILED: &str = "ResolutionFailed";
    /// `skewPolicy: Refuse` refused the render.
    pub const SKEW_REFUSED: &str = "SkewRefused";
    /// The render failed for another reason.
    pub const RENDER_FAILED: &str = "RenderFailed";
    /// Ready=False, Stalled=True: the render ran out of its memory budget
    /// (`--render-memory-limit`); the message names the budget, the figure reached and the value
    /// being evaluated. Retried with backoff, never two such renders at once.
    pub const MEMORY_BUDGET_EXCEEDED: &str = "MemoryBudgetExceeded";
    /// Event only: a render warning.
    pub const RENDER_WARNING: &str = "RenderWarning";
    /// Server-side apply failed.
    pub const APPLY_FAILED: &str = "ApplyFailed";
    /// Ready=False: a rendered object already exists and belongs to another live instance; it is
    /// not applied and nothing is pruned (the message names the object and the owner).
    pub const OWNERSHIP_CONFLICT: &str = "OwnershipConflict";
    /// Ready=False: a required signature is missing or does not verify (`spec.verify`); nothing
    /// was rendered or applied (the message names the module and why).
    pub const VERIFICATION_FAILED: &str = "VerificationFailed";
    /// Pruning stale objects failed.
    pub const PRUNE_FAILED: &str = "PruneFailed";
    /// Ready=False: an applied object is kstatus `Failed`, or not `Current` when the rollout
    /// timeout passed (the message names the objects). While waiting, Ready=Unknown `Progressing`.
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    /// Impersonating the apply service account failed (or 403 under it).
    pub const IMPERSONATION_FAILED: &str = "ImpersonationFailed";
    /// Deletion blocked: the apply service account is missing.
    pub const DELETION_SA_MISSING: &str = "DeletionSAMissing";
    /// Event only: objects orphaned on deletion (force-delete-orphan annotation).
    pub const ORPHANED_ON_DELETION: &str = "OrphanedOnDeletion";
    /// Drifted=True.
    pub const DRIFT_DETECTED: &str = "DriftDetected";
    /// ModuleResolved=True.
    pub const MODULE_RESOLVED: &str = "ModuleResolved";
    /// ModulePackage: the Flux source is missing, unsupported or not ready.
    pub const SOURCE_NOT_READY: &str = "SourceNotReady";
    /// ModulePackage: the artifact download failed.
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// ModulePackage: `spec.path` is not a directory of the artifact.
    pub const PATH_NOT_FOUND: &str = "PathNotFound";
    /// ModulePackage: no `instance.cue` in `spec.path`.
    pub const INSTANCE_FILE_NOT_FOUND: &str = "InstanceFileNotFound";
    /// ModulePackage: a `dependsOn` entry is not Ready.
    pub const DEPENDENCIES_NOT_READY: &str = "DependenciesNotReady";
    /// ModulePackage: the package is not a `#ModuleInstance`.
    pub const UNSUPPORTED_KIND: &str = "UnsupportedKind";
    /// Ready=False: the reconcile passed `--reconcile-timeout` (retried with backoff).
    pub const RECONCILE_TIMED_OUT: &str = "ReconcileTimedOut";

    // Custom health and remote clusters (ModuleInstance and ModulePackage).
    /// Stalled: an expression of `spec.healthCheckExprs` does not compile, or two entries judge
    /// the same kind (the message names the entry and the expression).
    pub const HEALTH_CHECK_EXPR_INVALID: &str = "HealthCheckExprInvalid";
    /// Ready=False, retried with backoff: the `spec.kubeConfig` Secret or its key is missing.
    pub const KUBE_CONFIG_NOT_FOUND: &str = "KubeConfigNotFound";
    /// Stalled: the `spec.kubeConfig` kubeconfig does not parse, names no usable cluster, or
    /// asks for what the operator refuses (exec or auth-provider plugins, file paths).
    pub const KUBE_CONFIG_INVALID: &str = "KubeConfigInvalid";
    /// Ready=False, retried with backoff: the `spec.kubeConfig` cluster does not answer; nothing
    /// is applied or pruned anywhere until it does.
    pub const REMOTE_CLUSTER_UNREACHABLE: &str = "RemoteClusterUnreachable";
    /// Event only (Warning): the recorded inventory lives on another cluster than the one
    /// `spec.kubeConfig` now targets; its objects are left there (orphaned), not pruned.
    pub const INVENTORY_ORPHANED: &str = "InventoryOrphaned";

    // Platform.
    /// Ready=True: the platform module was generated and built.
    pub const GENERATED: &str = "Generated";
    /// The module could not be produced or written.
    pub const GENERATE_FAILED: &str = "GenerateFailed";
    /// The module did not build (pins, imports, inventory).
    pub const BUILD_FAILED: &str = "BuildFailed";
    /// The contract inventory is not routable.
    pub const OVER_SUBSCRIBED_CONTRACTS: &str = "OverSubscribedContracts";
    /// The contract inventory is not discriminated.
    pub const COMPARABLE_PREDICATES: &str = "ComparablePredicates";
    /// A contract is defined by more than one enabled catalog.
    pub const CONTRACT_COLLISIONS: &str = "ContractCollisions";
    /// ContractsFulfilled=True: no contract defined.
    pub const NO_CONTRACTS_DEFINED: &str = "NoContractsDefined";
    /// ContractsFulfilled=False.
    pub const UNFULFILLED_CONTRACTS: &str = "UnfulfilledContracts";
    /// ContractsFulfilled=True.
    pub const CONTRACTS_FULFILLED: &str = "ContractsFulfilled";

    // TransformerRegistration.
    /// Ready=True: the claim was accepted.
    pub const ACCEPTED: &str = "Accepted";
    /// The claimed artifact is not a catalog.
    pub const CATALOG_WRONG_KIND: &str = "CatalogWrongKind";
    /// The claimed catalog could not be resolved.
    pub const CATALOG_UNRESOLVED: &str = "CatalogUnresolved";
    /// `spec.provides` differs from what the catalog implements.
    pub const PROVIDES_MISMATCH: &str = "ProvidesMismatch";
    /// `spec.providerRef` does not own this claim.
    pub const PROVIDER_MISMATCH: &str = "ProviderMismatch";
    /// The provider has not written an inventory yet (deferred).
    pub const PROVIDER_INVENTORY_PENDING: &str = "ProviderInventoryPending";
    /// The catalog needs newer shared dependencies than the platform resolved.
    pub const BUILD_INCOMPATIBLE: &str = "BuildIncompatible";
    /// Another claim already holds the catalog.
    pub const DUPLICATE_CLAIM: &str = "DuplicateClaim";
    /// A subscribed catalog already provides a claimed contract.
    pub const CONTRACT_SUBSCRIBED: &str = "ContractSubscribed";
    /// Another active claim already provides a claimed contract.
    pub const CONTRACT_CLAIMED: &str = "ContractClaimed";
    /// Active=True.
    pub const PROVIDER_READY: &str = "ProviderReady";
    /// Active=False.
    pub const PROVIDER_NOT_READY: &str = "ProviderNotReady";
    /// Deletion blocked by dependents.
    pub const DEPENDENTS_REMAIN: &str = "DependentsRemain";

    // ModuleInstance `valuesFrom`, `drift`, `dependsOn` (issue 40).
    /// Ready=False: a required `valuesFrom` Secret, ConfigMap or key is missing (retried with
    /// backoff; a labelled object's creation retries at once).
    pub const VALUES_FROM_NOT_FOUND: &str = "ValuesFromNotFound";
    /// Stalled: a `valuesFrom` reference is refused (another namespace) or its content is not
    /// usable (not a YAML mapping, a bad `targetPath`).
    pub const VALUES_FROM_INVALID: &str = "ValuesFromInvalid";
    /// Stalled: the identity the instance applies as may not read a `valuesFrom` object.
    pub const VALUES_FROM_FORBIDDEN: &str = "ValuesFromForbidden";
    /// Event only: drifted objects were re-applied (`drift.mode: Enabled`).
    pub const DRIFT_CORRECTED: &str = "DriftCorrected";
    /// Ready=False: a `dependsOn` entry is missing or not ready (the message names the first);
    /// requeued at `--requeue-dependency` and woken when the dependency changes.
    pub const DEPENDENCY_NOT_READY: &str = "DependencyNotReady";
    /// Stalled: the `dependsOn` entries form a cycle (the message names it).
    pub const DEPENDENCY_CYCLE: &str = "DependencyCycle";
    /// Stalled: a `dependsOn` entry cannot be judged: its `readyExpr` does not compile or is not
    /// a boolean, or it names another namespace without `--allow-cross-namespace-refs`.
    pub const DEPENDENCY_INVALID: &str = "DependencyInvalid";
    /// Deletion waits: an instance depending on this one is being deleted too (reverse order).
    pub const DEPENDENTS_DELETING: &str = "DependentsDeleting";
}

/// Standard messages of §2.1.
pub mod messages {
    /// Ready=Unknown at loop start.
    pub const PROGRESSING: &str = "Reconciliation in progress";
    /// Ready=False while suspended.
    pub const SUSPENDED: &str = "Reconciliation is suspended";
    /// Ready=Unknown for CLI-owned instances.
    pub const MANAGED_EXTERNALLY: &str = "ModuleInstance is managed externally by the CLI";
}

/// A condition status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl Status {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

/// Implemented by every status that carries conditions and an observedGeneration.
pub trait HasConditions {
    /// The conditions.
    fn conditions(&self) -> &[Condition];
    /// The conditions, mutably.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
    /// `status.observedGeneration`, mutably.
    fn observed_generation_mut(&mut self) -> &mut Option<i64>;
}

/// The condition of `type_`, if present.
pub fn get<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with status `True`.
pub fn is_true(conds: &[Condition], type_: &str) -> bool {
    get(conds, type_).is_some_and(|c| c.status == "True")
}

/// Sets the condition of `type_` (see the module doc for the lastTransitionTime rule). Returns
/// whether anything changed.
pub fn set(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: Status,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let new = Condition {
        type_: type_.to_owned(),
        status: status.as_str().to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation,
        last_transition_time: now.clone(),
    };
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(old) => {
            let time = if old.status == new.status {
                old.last_transition_time.clone()
            } else {
                new.last_transition_time.clone()
            };
            let new = Condition {
                last_transition_time: time,
                ..new
            };
            if *old == new {
                false
            } else {
                *old = new;
                true
            }
        }
        None => {
            conds.push(new);
            true
        }
    }
}

/// Removes the condition of `type_`; returns whether one was present.
pub fn remove(conds: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conds.len();
    conds.retain(|c| c.type_ != type_);
    conds.len() != before
}

/// *Reconciling*(reason, message): Reconciling=True, Stalled removed, Ready=Unknown(reason, message).
pub fn mark_reconciling(
    conds: &mut Vec<Condition>,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    set(
        conds,
        types::RECONCILING,
        Status::True,
        reason,
        message,
        generation,
        now,
    );
    remove(conds, types::STALLED);
    set(
        conds,
        types::READY,
        Status::Unknown,
        reason,
        message,
        generation,
        now,
    );
}

/// *Stalled*(reason, message): Stalled=True, Reconciling removed, Ready=False(reason, message).
pub fn mark_stalled(
    conds: &mut Vec<Condition>,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    set(
        conds,
        types::STALLED,
        Status::True,
        reason,
        message,
        generation,
        now,
    );
    remove(conds, types::RECONCILING);
    set(
        conds,
        types::READY,
        Status::False,
        reason,
        message,
        generation,
        now,
    );
}

/// *Ready*(reason, message): Reconciling and Stalled removed, Ready=True (reason default
/// [`reasons::RECONCILIATION_SUCCEEDED`] when `reason` is empty).
pub fn mark_ready(
    conds: &mut Vec<Condition>,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let reason = if reason.is_empty() {
        reasons::RECONCILIATION_SUCCEEDED
    } else {
        reason
    };
    remove(conds, types::RECONCILING);
    remove(conds, types::STALLED);
    set(
        conds,
        types::READY,
        Status::True,
        reason,
        message,
        generation,
        now,
    );
}

/// *Suspended*: Reconciling and Stalled removed, Ready=False `Suspended` "Reconciliation is suspended".
pub fn mark_suspended(conds: &mut Vec<Condition>, generation: Option<i64>, now: &Time) {
    remove(conds, types::RECONCILING);
    remove(conds, types::STALLED);
    set(
        conds,
        types::READY,
        Status::False,
        reasons::SUSPENDED,
        messages::SUSPENDED,
        generation,
        now,
    );
}

/// *ManagedExternally*: Ready=Unknown `ManagedExternally` (static, so idempotent).
pub fn mark_managed_externally(conds: &mut Vec<Condition>, generation: Option<i64>, now: &Time) {
    set(
        conds,
        types::READY,
        Status::Unknown,
        reasons::MANAGED_EXTERNALLY,
        messages::MANAGED_EXTERNALLY,
        generation,
        now,
    );
}

/// *NotReady*(reason, message): Ready=False only (a transient failure; Reconciling stays).
pub fn mark_not_ready(
    conds: &mut Vec<Condition>,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    set(
        conds,
        types::READY,
        Status::False,
        reason,
        message,
        generation,
        now,
    );
}

/// *Drifted*(n): Drifted=True `DriftDetected` "%d resource(s) drifted from desired state".
pub fn mark_drifted(
    conds: &mut Vec<Condition>,
    drifted: usize,
    generation: Option<i64>,
    now: &Time,
) {
    let msg = format!("{drifted} resource(s) drifted from desired state");
    set(
        conds,
        types::DRIFTED,
        Status::True,
        reasons::DRIFT_DETECTED,
        &msg,
        generation,
        now,
    );
}

/// *ModuleResolved*: ModuleResolved=True `"module resolved: <coordinate>"`, the coordinate written
/// as CUE writes it: `example.com/m@v0` at `v0.1.0` is `example.com/m@v0.1.0` (the major suffix is
/// not repeated before the version).
pub fn mark_module_resolved(
    conds: &mut Vec<Condition>,
    path: &str,
    version: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let base = match path.rsplit_once('@') {
        Some((base, major))
            if major
                .strip_prefix('v')
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) =>
        {
            base
        }
        _ => path,
    };
    let msg = format!("module resolved: {base}@{version}");
    set(
        conds,
        types::MODULE_RESOLVED,
        Status::True,
        reasons::MODULE_RESOLVED,
        &msg,
        generation,
        now,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn module_resolved_names_the_coordinate_once() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let msg = |path: &str| {
            let mut conds = Vec::new();
            mark_module_resolved(&mut conds, path, "v0.1.0", Some(1), &now);
            conds[0].message.clone()
        };
        // Regression (issue 29): the major suffix and the version were both joined with `@`.
        assert_eq!(
            msg("fixtures.test/modules/demo@v0"),
            "module resolved: fixtures.test/modules/demo@v0.1.0"
        );
        assert_eq!(
            msg("example.com/m"),
            "module resolved: example.com/m@v0.1.0"
        );
        assert_eq!(
            msg("example.com/m@latest"),
            "module resolved: example.com/m@latest@v0.1.0"
        );
    }

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn set_keeps_transition_time_when_status_unchanged() {
        let mut c = Vec::new();
        assert!(set(
            &mut c,
            "Ready",
            Status::False,
            "A",
            "a",
            Some(1),
            &t(10)
        ));
        assert!(set(
            &mut c,
            "Ready",
            Status::False,
            "B",
            "b",
            Some(2),
            &t(20)
        ));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].last_transition_time, t(10));
        assert_eq!(c[0].reason, "B");
        assert_eq!(c[0].observed_generation, Some(2));
        assert!(
            !set(&mut c, "Ready", Status::False, "B", "b", Some(2), &t(30)),
            "identical set is no change"
        );
        assert!(set(
            &mut c,
            "Ready",
            Status::True,
            "B",
            "b",
            Some(2),
            &t(40)
        ));
        assert_eq!(c[0].last_transition_time, t(40));
    }

    #[test]
    fn kstatus_setters_are_consistent() {
        let mut c = Vec::new();
        mark_reconciling(
            &mut c,
            reasons::PROGRESSING,
            messages::PROGRESSING,
            Some(3),
            &t(1),
        );
        assert!(is_true(&c, types::RECONCILING));
        assert_eq!(get(&c, types::READY).unwrap().status, "Unknown");
        mark_stalled(&mut c, reasons::RENDER_FAILED, "boom", Some(3), &t(2));
        assert!(get(&c, types::RECONCILING).is_none());
        assert!(is_true(&c, types::STALLED));
        assert_eq!(get(&c, types::READY).unwrap().status, "False");
        mark_ready(&mut c, "", "done", Some(3), &t(3));
        assert!(get(&c, types::STALLED).is_none());
        let ready = get(&c, types::READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", reasons::RECONCILIATION_SUCCEEDED)
        );
        mark_suspended(&mut c, Some(4), &t(4));
        assert_eq!(get(&c, types::READY).unwrap().message, messages::SUSPENDED);
        mark_drifted(&mut c, 2, Some(4), &t(5));
        assert_eq!(
            get(&c, types::DRIFTED).unwrap().message,
            "2 resource(s) drifted from desired state"
        );
        assert!(remove(&mut c, types::DRIFTED));
        assert!(!remove(&mut c, types::DRIFTED));
    }

    #[test]
    fn managed_externally_is_idempotent() {
        let mut c = Vec::new();
        mark_managed_externally(&mut c, None, &t(1));
        let before = c.clone();
        mark_managed_externally(&mut c, None, &t(2));
        assert_eq!(c, before);
    }
}
