//! The ModulePackage reconciler (docs/design/operator.md §2.1, §2.3, §2.4, §2.5, §6, §7.3; docs/design/principles.md
//! rules 1–3, 11).
//!
//! The phases ModulePackage shares with ModuleInstance (gates, deletion, identity, render on a
//! lease, digests, apply/prune, the deferred commit) are those of
//! [`super::render_apply::RenderRun`]; this module holds what is the ModulePackage's own, in the
//! order of §2.3:
//! 1. The interval = `spec.interval` (Go duration; unset, `0` or unparsable → 5m, unparsable
//!    logged): a success, a NoOp and every soft failure (source not ready, fetch, no platform)
//!    requeue after it. Deletion prunes with an empty owner uuid (no uuid guard); no Prometheus
//!    metrics (as upstream alpha.12), so suspend and deletion record none either.
//! 2. `dependsOn` before anything else, through the gate both kinds share
//!    ([`super::depends_on`]: `readyExpr`, cycles, readiness at the current generation, waking,
//!    reverse deletion order): a dependency in another namespace is an error (“…
//!    cross-namespace dependencies are not supported”, Warning); a missing one blocks as
//!    `<ns>/<name> (not found)`, one not ready blocks as `<ns>/<name>`; a blocker
//!    is Ready=False `DependenciesNotReady` “waiting for dependency X” (Normal, action
//!    `DependsOn`); a cycle stalls `DependencyCycle`. Always observedGeneration, one patch,
//!    requeue after the interval; nothing is fetched or rendered.
//! 3. MarkReconciling, then the source ([`source`]): an unsupported kind, a refused
//!    cross-namespace reference (`--allow-cross-namespace-refs` off) or a missing source (or
//!    missing Flux CRD) is Stalled `SourceNotReady` (30m); a source not Ready or without artifact
//!    is Ready=False `SourceNotReady` after the interval (a soft block: the reconcile failure
//!    counter is not bumped). Warning, action `Resolve`. Success records `status.source` and the
//!    Source digest is the artifact digest verbatim.
//! 4. The artifact is fetched with [`crate::registry::flux::fetch`] into a temporary directory removed
//!    afterwards (every limit of step 4 lives there); a failure is Ready=False `FetchFailed`
//!    naming the cause, Warning action `Fetch`, requeue after the interval.
//! 5. The package path ([`crate::registry::flux::package_dir`]): `..` or a missing directory is Stalled
//!    `PathNotFound`, no `instance.cue` Stalled `InstanceFileNotFound`; Warning action `Load`, 30m.
//! 6. Render through `kernel::PackageRenderer` (the loader gates on `#ModuleInstance`) on a lease
//!    (none → Ready=False `PlatformNotReady`, requeue after the interval); the extraction lives
//!    until the render is done.
//! 7. Config digest = digest of nothing; no drift detection.
//! 8. Apply and prune stamp the instance labels of the render; apply and prune errors are always
//!    transient (no ServiceAccount-403 stall) and prune runs with an empty owner uuid.

pub mod source;

use std::time::Duration;

use crds::conditions::reasons;
use crds::module_package::{ModulePackage, ModulePackageStatus, SourceStatus};
use kube::api::DynamicObject;
use kube::Api;

use super::context::{Context, Reconciled};
use super::depends_on::{self, Blocked, Dependent};
use super::reconcile::{self, End, Failure, Halt, Kind, Mode, Run};
use super::render_apply::{self, RenderRun, Rendered};
use super::runtime::{self, Error, EventType};
use crate::apply::object::InstanceLabels;
use crate::inventory;
use crate::kernel::RenderResult;
use crate::registry::flux as artifact;

/// The kind label of spans.
pub const KIND: &str = "ModulePackage";
/// The interval when `spec.interval` is unset or zero (§1.2).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// How soon a deletion whose objects are still terminating is looked at again.
pub const DELETION_RECHECK: Duration = render_apply::DELETION_RECHECK;

/// Event actions of the ModulePackage loop (§7.3).
pub mod actions {
    pub use super::super::render_apply::actions::*;
    /// Waiting for dependencies.
    pub const DEPENDS_ON: &str = "DependsOn";
    /// Resolving the source.
    pub const RESOLVE: &str = "Resolve";
    /// Downloading the artifact.
    pub const FETCH: &str = "Fetch";
    /// Locating the package in the artifact.
    pub const LOAD: &str = "Load";
}

/// The interval of `mp` (§1.2: unset or zero → 5m; malformed → 5m).
pub fn interval_of(mp: &ModulePackage) -> Duration {
    match mp.spec.interval.as_deref() {
        None => DEFAULT_INTERVAL,
        Some(s) => match crds::duration::parse_go(s) {
            Some(d) if !d.is_zero() => d,
            Some(_) => DEFAULT_INTERVAL,
            None => {
                tracing::warn!(interval = s, "spec.interval is not a duration; using 5m");
                DEFAULT_INTERVAL
            }
        },
    }
}

/// The §2.3 step 2 message of a cross-namespace dependency.
pub fn cross_namespace_dependency_message(namespace: &str, name: &str) -> String {
    format!("dependency {namespace}/{name}: cross-namespace dependencies are not supported")
}

impl Kind for ModulePackage {
    type Status = ModulePackageStatus;
    const KIND: &'static str = KIND;

    reconcile::status_field!();

    fn api(client: kube::Client, namespace: &str) -> Api<Self> {
        Api::namespaced(client, namespace)
    }

    /// ModulePackage records no §7.2 metrics (as upstream alpha.12).
    fn metered(&self) -> bool {
        false
    }

    fn gone(ctx: &Context, namespace: &str, name: &str) {
        render_apply::forget::<Self>(ctx, namespace, name);
    }

    fn interval(&self) -> Option<Duration> {
        Some(interval_of(self))
    }

    /// The reverse deletion order, the shared gates, step 2, then steps 3–9 (module docs).
    async fn phases(run: &mut Run<'_, Self>) -> Result<End, Halt> {
        depends_on::await_dependents(run).await?;
        let mut rr = RenderRun::new(run);
        rr.gates().await?;
        depends_on::gate(rr.run).await?;
        rr.digests.config = inventory::config_digest(None);
        let result = reconcile_steps(&mut rr).await;
        rr.attempted(result)
    }
}

impl Rendered for ModulePackage {
    const METRICS: bool = false;
    const FORBIDDEN_STALLS: bool = false;
    const DETECTS_DRIFT: bool = false;

    render_apply::same_named_fields!();
}

/// Reconciles the ModulePackage `namespace/name` (§2.3).
pub async fn reconcile(namespace: &str, name: &str, ctx: &Context) -> Result<Reconciled, Error> {
    reconcile::reconcile::<ModulePackage>(ctx, namespace, name, Mode::Lead).await
}

impl Dependent for ModulePackage {
    fn depends_on(&self) -> &[crds::depends_on::DependsOn] {
        &self.spec.depends_on
    }

    /// Never (§2.3 step 2).
    fn cross_namespace(_ctx: &Context) -> bool {
        false
    }

    /// Step 2 (module docs): Ready=False `DependenciesNotReady` “waiting for dependency X”
    /// (Normal; the cross-namespace message as a Warning), the event once per transition,
    /// requeued at the interval, no failure counted; a cycle or an invalid `readyExpr` stalls
    /// (`DependencyCycle`, `DependencyInvalid`).
    fn blocked(run: &Run<'_, Self>, blocked: Blocked) -> Failure {
        let not_ready = |message: String, event_type: EventType| {
            Failure::transient(
                reasons::DEPENDENCIES_NOT_READY,
                actions::DEPENDS_ON,
                message,
            )
            .after(run.interval)
            .event_type(event_type)
        };
        match blocked {
            Blocked::NotReady { dependency, why } => not_ready(
                Blocked::waiting_message(&dependency, why.as_deref()),
                EventType::Normal,
            ),
            Blocked::CrossNamespace { namespace, name } => not_ready(
                cross_namespace_dependency_message(&namespace, &name),
                EventType::Warning,
            ),
            Blocked::Cycle(cycle) => Failure::stalled(
                reasons::DEPENDENCY_CYCLE,
                actions::DEPENDS_ON,
                format!("dependency cycle: {cycle}"),
            ),
            Blocked::Invalid(m) => {
                Failure::stalled(reasons::DEPENDENCY_INVALID, actions::DEPENDS_ON, m)
            }
        }
    }
}

/// Step 3: the source's artifact, or a classified failure.
async fn resolve_source(run: &Run<'_, ModulePackage>) -> Result<source::Artifact, Halt> {
    let r = &run.obj.spec.source_ref;
    let stalled = |message: String| {
        Err(Failure::stalled(reasons::SOURCE_NOT_READY, actions::RESOLVE, message).into())
    };
    let ar = match source::resource(r) {
        Ok(ar) => ar,
        Err(m) => return stalled(m),
    };
    let ns = source::effective_namespace(r, &run.namespace).to_owned();
    if ns != run.namespace && !run.ctx.allow_cross_namespace_refs {
        return stalled(format!(
            "source {} in namespace {ns:?}: cross-namespace source references are refused \
             (the operator runs without --allow-cross-namespace-refs)",
            r.name
        ));
    }
    let shown = source::ref_string(r, &run.namespace);
    let api: Api<DynamicObject> = Api::namespaced_with(run.ctx.client.clone(), &ns, &ar);
    let obj = match api.get(&r.name).await {
        Ok(o) => o,
        Err(e) if runtime::is_not_found(&e) => {
            return stalled(format!("source {shown} not found"));
        }
        Err(e) => return Err(Error::kube(format!("reading source {shown}"), e).into()),
    };
    source::ready_artifact(&obj).map_err(|why| {
        Failure::transient(
            reasons::SOURCE_NOT_READY,
            actions::RESOLVE,
            format!("source {shown} {why}"),
        )
        .after(run.interval)
        .soft()
        .into()
    })
}

/// Steps 3–9; `rr.digests` are this reconcile's as far as they are known.
async fn reconcile_steps(rr: &mut RenderRun<'_, '_, ModulePackage>) -> Result<End, Halt> {
    rr.mark_reconciling();

    // Step 3: source.
    let art = resolve_source(rr.run).await?;
    rr.digests.source = art.digest.clone();
    let run = &mut *rr.run;
    let shown = source::ref_string(&run.obj.spec.source_ref, &run.namespace);
    run.status().source = Some(SourceStatus {
        r#ref: Some(shown),
        artifact_revision: Some(art.revision.clone()),
        artifact_digest: Some(art.digest.clone()),
        artifact_url: Some(art.url.clone()),
    });

    // Step 4: fetch.
    let fetched = artifact::fetch(&art.url, &art.digest, &run.ctx.artifact_limits)
        .await
        .map_err(|e| {
            Failure::transient(
                reasons::FETCH_FAILED,
                actions::FETCH,
                format!("fetching artifact {}: {e}", art.url),
            )
            .after(run.interval)
        })?;

    // Step 5: path.
    let dir = artifact::package_dir(fetched.root(), &run.obj.spec.path).map_err(|e| {
        let reason = match e {
            artifact::Error::InstanceFileNotFound(_) => reasons::INSTANCE_FILE_NOT_FOUND,
            _ => reasons::PATH_NOT_FOUND,
        };
        Failure::stalled(reason, actions::LOAD, e.to_string())
    })?;

    // Step 6: render (the extraction lives until the render is done).
    let inputs = (art.digest.clone(), run.obj.spec.path.clone());
    let rendered = render(rr, &inputs, fetched, dir).await?;

    // Steps 7–9: digests, NoOp, identity, apply, prune, commit.
    let objects = rr.convert(&rendered).await?;
    rr.apply(&objects, &rendered.inventory, InstanceLabels::of(&rendered))
        .await
}

/// Step 6.
/// `inputs`: the artifact digest and the path in it (what the render depends on,
/// `super::fairness`).
async fn render(
    rr: &RenderRun<'_, '_, ModulePackage>,
    inputs: &(String, String),
    fetched: artifact::Fetched,
    dir: std::path::PathBuf,
) -> Result<RenderResult, Halt> {
    let renderer = rr.run.ctx.package_renderer.clone();
    rr.render_on(
        "package",
        inputs,
        renderer,
        move |renderer, platform, skew| {
            let r = renderer.render_package(&dir, platform, skew);
            drop(fetched);
            r
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn the_interval_defaults_to_five_minutes() {
        let mut mp = ModulePackage::test();
        assert_eq!(interval_of(&mp), DEFAULT_INTERVAL);
        mp.spec.interval = Some("0s".into());
        assert_eq!(interval_of(&mp), DEFAULT_INTERVAL);
        mp.spec.interval = Some("10m".into());
        assert_eq!(interval_of(&mp), Duration::from_secs(600));
        mp.spec.interval = Some("soon".into());
        assert_eq!(interval_of(&mp), DEFAULT_INTERVAL);
    }

    #[test]
    fn a_package_requeues_at_its_interval_prunes_without_a_uuid_guard_and_is_never_handed_off() {
        let mut mp = ModulePackage::test();
        mp.spec.interval = Some("10m".into());
        assert_eq!(mp.interval(), Some(Duration::from_secs(600)));
        assert_eq!(
            ModulePackage::owner_uuid(&ModulePackageStatus::default()),
            ""
        );
        assert!(!mp.handed_off());
    }
}
