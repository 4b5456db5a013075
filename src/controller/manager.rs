//! The manager: the kube-runtime controllers of the Platform and TransformerRegistration
//! reconcilers, run on the elected leader only (docs/design/operator.md §3.7, §4.6, §7.1).
//!
//! One reconciler shape (issue 33; Flux's controllers share one runtime the same way): every
//! controller is its kind's watches plus its kind's reconcile, run by [`drive`]: the reconcile
//! (bounded by `--reconcile-timeout` for the kinds that render, [`bounded`]), then one settle
//! (success resets the object's consecutive-error counter, keyed `Kind/namespace/name`, and
//! requeues as the reconcile said) and one error policy (backoff by consecutive errors). The
//! reconciles go through one frame (`super::reconcile`: read, span, the kind's phases, one
//! commit of status and events, metrics); ModuleInstance and ModulePackage share one
//! render-and-apply core (`super::render_apply`), one builder of their watches
//! ([`rendered_controller`]) and one set of workload watches (`super::workloads::fan_out`).
//!
//! Watches and predicates:
//! - Platform: For(Platform) passes generation changes (and a newly set deletion timestamp). A deleted Platform clears the store
//!   at once (the controller cannot reconcile an object gone from its cache). TransformerRegistration
//!   events enqueue `cluster` when a claim's *contribution* changes ([`ContributionFilter`]):
//!   create passes iff it contributes, delete iff it contributed, update iff the contributing flag
//!   or the coordinate changed — stamping a deletion timestamp wakes nothing, releasing the
//!   finalizer does.
//! - TransformerRegistration: For(TR) passes a generation change or a newly set deletion timestamp
//!   (our own finalizer and status patches do not wake it). Every Platform event enqueues every
//!   claim; ModuleInstance events enqueue the claims naming the instance as provider or providing
//!   one of its `requiredContracts`, and pass on create and delete, and on update only when the
//!   Ready status, the inventory digest or the required contracts changed ([`InstanceFilter`]).
//!   Each recorded platform package re-judges every claim (restart recovery, §4.5).
//! - Leadership: controllers start when the lease is acquired and stop when it is lost (another
//!   holder, or no renewal within the renew deadline; each attempt is bounded by half the renew
//!   deadline so a hung request cannot outlive it) or on shutdown, which then releases the lease.
//! - Followers run the Platform controller in [`Mode::Observe`]: the same watches and steps into
//!   the replica's own store and `--platform-dir`, with no status, event or claim writes, so the
//!   render API of every replica has a package to lease. It stops before the replica starts
//!   leading (one writer of the layout at a time).
//!
//! Sharding (issue 32; Flux's `--watch-label-selector` model), by [`super::shard::Shard`] (its flags and
//! names: [`super::shard`]):
//! - A replica started with `--shard NAME` leases `NAME.4cc9e43e.opmodel.dev` and, while leading,
//!   runs only the ModuleInstance and ModulePackage controllers, whose watches select
//!   `<shard-label>=NAME` (`--shard-label`, default `sharding.opmodel.dev/key`): the API server
//!   filters, so its caches hold only its own objects. The replica without `--shard` leases
//!   `4cc9e43e.opmodel.dev`, selects `!<shard-label>` (label absent) and is the only one running the
//!   Platform and TransformerRegistration controllers (one writer of Platform status and claims).
//! - Every sharded replica, leader or not, runs the Platform controller in [`Mode::Observe`] for
//!   its whole life: it builds the same package into its own store and `--platform-dir` (it never
//!   leads the Platform, so it never competes for the layout), and each recorded package
//!   re-enqueues its instances and packages exactly as on the unsharded leader. A Platform change
//!   therefore reaches every shard through its own watch, with no cross-replica signal.
//! - An instance relabelled from shard A to shard B leaves A's selection (the watch reports it
//!   deleted: A's cache drops it and a pending requeue finds nothing) and enters B's (added: B
//!   reconciles it). All shards apply with the one field manager of the controller, so B's apply
//!   owns exactly the fields A owned: no conflict, nothing left behind. Which shard acted is
//!   visible in the events' `reportingInstance` (`<shard>/<identity>`, set by `serve`).
//! - Issue 40: the ModuleInstance controller also watches the Secrets and ConfigMaps labelled
//!   `--watch-configs-label-selector` (`super::values_from::triggers`), and both rendering
//!   controllers are woken when an object their reconcile waits for changes
//!   (`super::waiters`: `dependsOn`, the reverse deletion order).
//! - Caches are slimmed ([`slim_instance`], [`slim_package`]): the reconcilers read each object
//!   fresh from the API, the caches only map events to keys and feed the generation predicate, so
//!   managedFields, the last-applied annotation and status are not kept (memory per instance).

use std::collections::HashMap;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crds::module_instance::ModuleInstance;
use crds::module_package::ModulePackage;
use crds::platform::Platform;
use crds::transformer_registration::TransformerRegistration;
use crds::PLATFORM_NAME;
use futures::{future, Stream, StreamExt, TryStreamExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Api, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::context::{Context, Reconciled};
use super::leader::Elector;
use super::package::source::{self as flux, SourceFilter};
use super::platform::contribution;
use super::reconcile::Mode;
use super::runtime::Error;
use super::{deadline, instance, package, platform, registration};

/// Drops what no cache reader needs: managedFields and the last-applied annotation.
fn slim_meta(meta: &mut kube::api::ObjectMeta) {
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// The cached form of a ModuleInstance: metadata without managedFields or the last-applied
/// annotation, the spec, no status (the reconciler reads the object fresh).
pub fn slim_instance(mi: &mut ModuleInstance) {
    slim_meta(&mut mi.metadata);
    mi.status = None;
}

/// The cached form of a ModulePackage: as [`slim_instance`] (the spec stays: the Flux source
/// triggers read `spec.sourceRef` from the cache).
pub fn slim_package(mp: &mut ModulePackage) {
    slim_meta(&mut mp.metadata);
    mp.status = None;
}

fn action(r: Reconciled) -> Action {
    match r.requeue {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    }
}

/// The key of an object's consecutive-error counter: `Kind/namespace/name` (`Kind/name` for a
/// cluster-scoped object).
fn key<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    match obj.meta().namespace.as_deref() {
        Some(ns) => format!("{}/{ns}/{}", K::kind(&()), obj.name_any()),
        None => format!("{}/{}", K::kind(&()), obj.name_any()),
    }
}

/// Errors (API failures, conflicts) requeue with the §2.1 backoff on consecutive errors of the
/// object; a conflict retries after one second.
fn error_policy<K: kube::Resource<DynamicType = ()>>(
    obj: Arc<K>,
    err: &Error,
    ctx: Arc<Context>,
) -> Action {
    let n = ctx.failed(&key(obj.as_ref()));
    let after = err.retry_after(n);
    tracing::warn!(error = %err, retry_ms = after.as_millis() as u64, "reconcile failed; retrying");
    Action::requeue(after)
}

/// The end of every reconcile of every controller (one shape for the four kinds): a success
/// resets the object's consecutive-error counter and requeues as the reconcile said; an error
/// goes to [`error_policy`].
fn settle<K: kube::Resource<DynamicType = ()>>(
    obj: &K,
    ctx: &Context,
    r: Result<Reconciled, Error>,
) -> Result<Action, Error> {
    let r = r?;
    ctx.succeeded(&key(obj));
    Ok(action(r))
}

/// The one shape every controller runs (issue 33): until `stop` resolves, each object the
/// controller's watches enqueue is reconciled by `reconcile`, then [`settle`]d (a success resets
/// its consecutive-error counter and requeues as the reconcile said) or handed to
/// [`error_policy`] (backoff by consecutive errors). Each kind supplies only its watches and its
/// reconcile.
async fn drive<K, F, Fut>(
    controller: Controller<K>,
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
    reconcile: F,
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Reconciled, Error>> + Send + 'static,
{
    controller
        .graceful_shutdown_on(stop)
        .run(
            move |obj: Arc<K>, ctx: Arc<Context>| {
                let work = reconcile(obj.clone(), ctx.clone());
                async move { settle(obj.as_ref(), &ctx, work.await) }
            },
            error_policy,
            ctx,
        )
        .for_each(|_| future::ready(()))
        .await;
}

/// The reconcile of a kind that renders, bounded by `--reconcile-timeout` ([`deadline`]).
async fn bounded<K, Fut>(
    obj: Arc<K>,
    ctx: Arc<Context>,
    reconcile: impl FnOnce(String, String, Arc<Context>) -> Fut,
) -> Result<Reconciled, Error>
where
    K: super::render_apply::Rendered,
    Fut: Future<Output = Result<Reconciled, Error>>,
{
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let work = reconcile(ns.clone(), name.clone(), ctx.clone());
    deadline::bounded::<K>(&ctx, &ns, &name, work).await
}

/// A stream that yields once each time a platform package is recorded (restart recovery: every
/// object of a kind that depends on the platform is reconciled again).
fn recorded(ctx: &Context) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(ctx.recorded.subscribe(), |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

/// The controller of a kind that renders on the platform (ModuleInstance, ModulePackage), with
/// the watches both share: For(K) in the replica's shard, its cache slimmed by `slim`, with the
/// generation predicate (plus a newly set deletion timestamp); every Platform event and every
/// recorded package re-enqueue every object; a workload whose health changed after the apply
/// enqueues its instance (`super::workloads`); at most `--max-concurrent-renders` reconciles at
/// once. Returns the controller and a reader of its cache.
fn rendered_controller<K>(
    ctx: &Context,
    slim: fn(&mut K),
    workloads: impl Stream<Item = super::workloads::Named> + Send + 'static,
) -> (Controller<K>, reflector::Store<K>)
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let client = ctx.client.clone();
    let (reader, writer) = reflector::store();
    let objects = watcher(Api::<K>::all(client.clone()), ctx.shard.watcher_config())
        .default_backoff()
        .modify(slim)
        .reflect(writer)
        .applied_objects()
        .predicate_filter(claim_predicate_of::<K>, Default::default());
    let all = reader.clone();
    let concurrency = ctx.max_concurrent_renders.max(1);
    let controller = Controller::for_stream(objects, reader.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .watches(
            Api::<Platform>::all(client),
            watcher::Config::default(),
            move |_p| {
                all.state()
                    .iter()
                    .map(|o| ObjectRef::from_obj(o.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .reconcile_all_on(recorded(ctx))
        .reconcile_on(super::workloads::as_refs::<K>(workloads));
    (controller, reader)
}

fn hash_of<T: Hash>(t: &T) -> u64 {
    let mut h = DefaultHasher::new();
    t.hash(&mut h);
    h.finish()
}

/// The contribution-changed predicate of the Platform's claim watch (§3.7).
#[derive(Debug, Default)]
pub struct ContributionFilter {
    seen: HashMap<String, (String, String)>,
}

impl ContributionFilter {
    /// Whether an applied (created or updated) claim changes the platform's inputs.
    pub fn applied(&mut self, tr: &TransformerRegistration) -> bool {
        let name = tr.name_any();
        let now = contribution(tr);
        let before = match &now {
            Some(c) => self.seen.insert(name, c.clone()),
            None => self.seen.remove(&name),
        };
        before != now
    }

    /// Whether a deleted claim changes the platform's inputs.
    pub fn deleted(&mut self, tr: &TransformerRegistration) -> bool {
        self.seen.remove(&tr.name_any()).is_some()
    }
}

/// The property of a ModuleInstance the claim controller reacts to (§4.6).
pub fn instance_property(mi: &ModuleInstance) -> u64 {
    let status = mi.status.as_ref();
    let ready = status.and_then(|s| {
        crds::conditions::get(&s.conditions, crds::conditions::types::READY)
            .map(|c| c.status.clone())
    });
    let digest = status.and_then(|s| s.reconcile.inventory.as_ref().map(|i| i.digest.clone()));
    let required = status
        .map(|s| s.required_contracts.join("\n"))
        .unwrap_or_default();
    hash_of(&(ready, digest, required))
}

/// The ModuleInstance predicate of the claim controller (§4.6).
#[derive(Debug, Default)]
pub struct InstanceFilter {
    seen: HashMap<(String, String), u64>,
}

impl InstanceFilter {
    /// Whether an applied instance passes: created, or one of the three properties changed.
    pub fn applied(&mut self, mi: &ModuleInstance) -> bool {
        let key = (mi.namespace().unwrap_or_default(), mi.name_any());
        let p = instance_property(mi);
        self.seen.insert(key, p) != Some(p)
    }

    /// A deleted instance always passes.
    pub fn deleted(&mut self, mi: &ModuleInstance) -> bool {
        self.seen
            .remove(&(mi.namespace().unwrap_or_default(), mi.name_any()));
        true
    }
}

/// The claims an instance event concerns: those naming it as provider or providing one of its
/// required contracts.
pub fn claims_for_instance(
    mi: &ModuleInstance,
    claims: &[Arc<TransformerRegistration>],
) -> Vec<ObjectRef<TransformerRegistration>> {
    let (ns, name) = (mi.namespace().unwrap_or_default(), mi.name_any());
    let required: &[String] = mi
        .status
        .as_ref()
        .map(|s| s.required_contracts.as_slice())
        .unwrap_or_default();
    claims
        .iter()
        .filter(|tr| {
            (tr.spec.provider_ref.namespace == ns && tr.spec.provider_ref.name == name)
                || tr.spec.provides.iter().any(|c| required.contains(c))
        })
        .map(|tr| ObjectRef::new(&tr.name_any()))
        .collect()
}

/// One decoded watch event.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a, K> {
    /// Created or updated (or listed at start).
    Applied(&'a K),
    /// Deleted.
    Deleted(&'a K),
}

/// Decodes a watcher stream into the objects whose change passes `pass`.
fn filtered<K, S>(
    events: S,
    mut pass: impl FnMut(Change<'_, K>) -> bool + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    events.filter_map(move |ev| {
        let out = match ev {
            Ok(watcher::Event::Apply(k)) | Ok(watcher::Event::InitApply(k)) => {
                pass(Change::Applied(&k)).then_some(Ok(k))
            }
            Ok(watcher::Event::Delete(k)) => pass(Change::Deleted(&k)).then_some(Ok(k)),
            Ok(watcher::Event::Init) | Ok(watcher::Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        future::ready(out)
    })
}

/// Runs the Platform controller until `stop` resolves.
pub async fn run_platform(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
    mode: Mode,
) {
    let client = ctx.client.clone();
    let wc = watcher::Config::default();
    let (reader, writer) = reflector::store();
    let store = ctx.store.clone();
    let plats = watcher(Api::<Platform>::all(client.clone()), wc.clone())
        .default_backoff()
        .reflect(writer)
        .inspect_ok(move |ev| {
            if let watcher::Event::Delete(p) = ev {
                if p.name_any() == PLATFORM_NAME {
                    tracing::info!("Platform cluster deleted; store cleared, workloads frozen");
                    store.clear();
                }
            }
        })
        .applied_objects()
        .predicate_filter(claim_predicate_of::<Platform>, Default::default());
    let mut contributions = ContributionFilter::default();
    let claims = filtered(
        watcher(Api::<TransformerRegistration>::all(client), wc).default_backoff(),
        move |change| match change {
            Change::Applied(tr) => contributions.applied(tr),
            Change::Deleted(tr) => contributions.deleted(tr),
        },
    );
    let controller = Controller::for_stream(plats, reader).watches_stream(claims, |_tr| {
        Some(ObjectRef::<Platform>::new(PLATFORM_NAME))
    });
    drive(
        controller,
        ctx,
        stop,
        move |p: Arc<Platform>, ctx| async move {
            platform::reconcile_as(&p.name_any(), &ctx, mode).await
        },
    )
    .await;
}

/// The For predicate of the controllers: the generation, whether a deletion timestamp is set (a
/// deletion held by a finalizer must wake the reconciler even where the API server does not bump
/// the generation; our own finalizer and status patches change neither), and the value of the
/// reconcile-request annotation ([`crds::RECONCILE_REQUEST_ANNOTATION`]: a new value asks for a
/// reconcile now).
fn claim_predicate_of<K: kube::Resource>(obj: &K) -> Option<u64> {
    let meta = obj.meta();
    let requested = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(crds::RECONCILE_REQUEST_ANNOTATION));
    Some(hash_of(&(
        meta.generation,
        meta.deletion_timestamp.is_some(),
        requested,
    )))
}

/// Runs the TransformerRegistration controller until `stop` resolves.
pub async fn run_registrations(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let wc = watcher::Config::default();
    let (reader, writer) = reflector::store();
    let trs = watcher(
        Api::<TransformerRegistration>::all(client.clone()),
        wc.clone(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects()
    .predicate_filter(
        claim_predicate_of::<TransformerRegistration>,
        Default::default(),
    );
    let mut instances = InstanceFilter::default();
    let mis = filtered(
        watcher(Api::<ModuleInstance>::all(client.clone()), wc.clone()).default_backoff(),
        move |change| match change {
            Change::Applied(mi) => instances.applied(mi),
            Change::Deleted(mi) => instances.deleted(mi),
        },
    );
    let recorded = recorded(&ctx);
    let all_claims = reader.clone();
    let by_instance = reader.clone();
    let controller = Controller::for_stream(trs, reader)
        .watches(Api::<Platform>::all(client), wc, move |_p| {
            all_claims
                .state()
                .iter()
                .map(|tr| ObjectRef::new(&tr.name_any()))
                .collect::<Vec<_>>()
        })
        .watches_stream(mis, move |mi| {
            claims_for_instance(&mi, &by_instance.state())
        })
        .reconcile_all_on(recorded);
    drive(
        controller,
        ctx,
        stop,
        |tr: Arc<TransformerRegistration>, ctx| async move {
            registration::reconcile(&tr.name_any(), &ctx).await
        },
    )
    .await;
}

/// Runs the ModuleInstance controller until `stop` resolves (§2.6): For(MI) with the generation
/// predicate (plus a newly set deletion timestamp); every Platform event and every recorded
/// platform package re-enqueue every instance (a restart into a Ready Platform must not leave
/// instances on PlatformNotReady); at most `max_concurrent_renders` reconciles at once.
pub async fn run_instances(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let workloads = super::workloads::instances(&ctx.client);
    run_instances_on(ctx, stop, workloads).await;
}

/// [`run_instances`] with the workload triggers of `workloads` (shared with the ModulePackage
/// controller by [`run_controllers`]).
async fn run_instances_on(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
    workloads: impl Stream<Item = super::workloads::Named> + Send + 'static,
) {
    let (controller, reader) = rendered_controller(&ctx, slim_instance, workloads);
    // Issue 40: a changed labelled Secret or ConfigMap re-renders the instances reading it; a
    // dependency's change wakes the instances waiting for it.
    let controller = controller
        .reconcile_on(super::values_from::triggers(
            &ctx.client,
            &ctx.gitops.watch_configs_label_selector,
            reader,
        ))
        .reconcile_on(woken::<ModuleInstance>(&ctx));
    drive(controller, ctx, stop, |mi: Arc<ModuleInstance>, ctx| {
        bounded(mi, ctx, |ns, name, ctx| async move {
            instance::reconcile(&ns, &name, &ctx).await
        })
    })
    .await;
}

/// Runs the ModulePackage controller until `stop` resolves (§2.3 watches, §2.6): For(MP) with the
/// generation predicate (plus a newly set deletion timestamp); every Platform event and every
/// recorded platform package re-enqueue every package; Flux sources enqueue the packages naming
/// them ([`source_triggers`]); at most `max_concurrent_renders` reconciles at once, each bounded by
/// `--reconcile-timeout`.
pub async fn run_packages(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let workloads = super::workloads::instances(&ctx.client);
    run_packages_on(ctx, stop, workloads).await;
}

/// [`run_packages`] with the workload triggers of `workloads` (shared with the ModuleInstance
/// controller by [`run_controllers`]).
async fn run_packages_on(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
    workloads: impl Stream<Item = super::workloads::Named> + Send + 'static,
) {
    let (tx, rx) = futures::channel::mpsc::unbounded::<ModulePackage>();
    let (controller, reader) = rendered_controller(&ctx, slim_package, workloads);
    let triggers = source_triggers(
        ctx.client.clone(),
        reader,
        tx,
        ctx.source_discovery_interval,
    );
    let controller = controller
        .watches_stream(rx.map(Ok::<_, watcher::Error>), |mp| {
            Some(ObjectRef::from_obj(&mp))
        })
        .reconcile_on(woken::<ModulePackage>(&ctx));
    let controller = drive(controller, ctx, stop, |mp: Arc<ModulePackage>, ctx| {
        bounded(mp, ctx, |ns, name, ctx| async move {
            package::reconcile(&ns, &name, &ctx).await
        })
    });
    // The source watches live as long as the controller (dropped when it stops).
    let triggers = Box::pin(triggers);
    let controller = Box::pin(controller);
    future::select(controller, triggers).await;
}

/// The objects of kind `K` woken because what they wait for changed (`super::waiters`, issue
/// 40); runs until dropped. A lagging receiver skips what it missed (the requeue covers it).
fn woken<K>(ctx: &Context) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: super::reconcile::Kind,
{
    futures::stream::unfold(ctx.waiters.subscribe(), |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(key) => return Some((key, rx)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .filter_map(|(kind, ns, name)| {
        future::ready((kind == K::KIND).then(|| ObjectRef::new(&name).within(&ns)))
    })
}

/// Whether the Flux source kind `kind` is served (its CRD is installed).
async fn source_served(client: &kube::Client, kind: &str) -> Result<bool, kube::Error> {
    let ar = flux::kind_resource(kind, flux::DEFAULT_VERSION);
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(e) if super::runtime::is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Watches the Flux sources and sends the packages a passing source event concerns (§2.3
/// watches, docs/design/principles.md rule 11): each of OCIRepository, GitRepository and Bucket is looked for at
/// start and then every `poll` while absent; the absent kinds are logged once, and each kind's
/// watch starts when its CRD appears, so a cluster without Flux never crashloops and one that
/// installs Flux later gets the watches without a restart. Runs until dropped.
pub async fn source_triggers(
    client: kube::Client,
    packages: reflector::Store<ModulePackage>,
    tx: futures::channel::mpsc::UnboundedSender<ModulePackage>,
    poll: Duration,
) {
    type Events = std::pin::Pin<
        Box<
            dyn Stream<
                    Item = (
                        &'static str,
                        Result<watcher::Event<kube::api::DynamicObject>, watcher::Error>,
                    ),
                > + Send,
        >,
    >;
    let mut pending: Vec<&'static str> = flux::KINDS.to_vec();
    let mut streams: futures::stream::SelectAll<Events> = futures::stream::SelectAll::new();
    let mut logged = false;
    let mut filter = SourceFilter::default();
    let mut tick = tokio::time::interval(poll.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick(), if !pending.is_empty() => {
                let mut absent = Vec::new();
                for kind in pending {
                    match source_served(&client, kind).await {
                        Ok(true) => {
                            tracing::info!(kind, "Flux source CRD found: watching its artifacts");
                            let ar = flux::kind_resource(kind, flux::DEFAULT_VERSION);
                            let api: Api<kube::api::DynamicObject> =
                                Api::all_with(client.clone(), &ar);
                            let s = watcher(api, watcher::Config::default())
                                .default_backoff()
                                .map(move |ev| (kind, ev));
                            streams.push(Box::pin(s));
                        }
                        Ok(false) => absent.push(kind),
                        Err(e) => {
                            tracing::debug!(kind, error = %e, "looking for a Flux source CRD");
                            absent.push(kind);
                        }
                    }
                }
                if !absent.is_empty() && !logged {
                    tracing::info!(
                        missing = ?absent,
                        "Flux source CRDs not installed: ModulePackages naming these kinds wait \
                         for their source; the watches start when the CRDs appear"
                    );
                    logged = true;
                }
                pending = absent;
            }
            Some((kind, ev)) = streams.next(), if !streams.is_empty() => {
                let obj = match ev {
                    Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                        if !filter.applied(kind, &o) {
                            continue;
                        }
                        o
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        filter.deleted(kind, &o);
                        continue;
                    }
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::debug!(kind, error = %e, "Flux source watch");
                        continue;
                    }
                };
                let state = packages.state();
                for mp in flux::packages_for(kind, &obj, state.iter().map(|a| a.as_ref())) {
                    if tx.unbounded_send(mp.clone()).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// Runs the controllers until `stop` turns true: Platform and TransformerRegistration on the
/// unsharded replica only, ModuleInstance when a module renderer is configured, ModulePackage when
/// a package renderer is (both over the replica's [`super::shard::Shard`], sharing one set of
/// workload watches, [`super::workloads::fan_out`]).
pub async fn run_controllers(ctx: Arc<Context>, stop: watch::Receiver<bool>) {
    let until = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let (renders, packages_on) = (ctx.renderer.is_some(), ctx.package_renderer.is_some());
    if !packages_on {
        tracing::info!("no package renderer configured: the ModulePackage controller is off");
    }
    if !renders {
        tracing::info!("no module renderer configured: the ModuleInstance controller is off");
    }
    let subscribers = usize::from(renders) + usize::from(packages_on);
    let (forward, mut receivers) =
        super::workloads::fan_out(super::workloads::instances(&ctx.client), subscribers);
    let forward = {
        let stop = until(stop.clone());
        async move {
            if subscribers > 0 {
                future::select(Box::pin(forward), Box::pin(stop)).await;
            }
        }
    };
    let packages = {
        let ctx = Arc::clone(&ctx);
        let stop = until(stop.clone());
        let workloads = packages_on.then(|| receivers.pop()).flatten();
        async move {
            if let Some(workloads) = workloads {
                run_packages_on(ctx, stop, workloads).await;
            }
        }
    };
    let instances = {
        let ctx = Arc::clone(&ctx);
        let stop = until(stop.clone());
        let workloads = renders.then(|| receivers.pop()).flatten();
        async move {
            if let Some(workloads) = workloads {
                run_instances_on(ctx, stop, workloads).await;
            }
        }
    };
    if ctx.shard.name().is_some() {
        // A shard observes the Platform on its own (see `run`) and writes no Platform or claim.
        tokio::join!(forward, instances, packages);
        return;
    }
    tokio::join!(
        run_platform(Arc::clone(&ctx), until(stop.clone()), Mode::Lead),
        run_registrations(ctx, until(stop)),
        forward,
        instances,
        packages,
    );
}

/// Starts the Platform controller in [`Mode::Observe`] (a follower's, or a shard's for life).
fn observe(ctx: &Arc<Context>) -> Task {
    let ctx = Arc::clone(ctx);
    Task::spawn(move |mut rx| async move {
        let stop = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        run_platform(ctx, stop, Mode::Observe).await;
    })
}

/// Leadership as observed by the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Waiting for the lease.
    Follower,
    /// Holding the lease; the controllers run.
    Leader,
}

/// Runs the controllers on the leader only until `shutdown` turns true, then stops them and
/// releases the lease. `role` reports leadership changes. Without an elector the controllers run
/// at once (`--leader-elect=false`).
pub async fn run(
    ctx: Arc<Context>,
    elector: Option<Elector>,
    mut shutdown: watch::Receiver<bool>,
    role: watch::Sender<Role>,
) {
    // A shard never leads the Platform: it observes from start to shutdown.
    let sharded = ctx.shard.name().is_some();
    let mut observing: Option<Task> = sharded.then(|| observe(&ctx));
    let Some(elector) = elector else {
        role.send_replace(Role::Leader);
        let mut task = Some(Task::spawn(|rx| run_controllers(Arc::clone(&ctx), rx)));
        let _ = shutdown.wait_for(|s| *s).await;
        stop_task(&mut task).await;
        stop_task(&mut observing).await;
        role.send_replace(Role::Follower);
        return;
    };
    let timing = elector.timing();
    let mut leading: Option<Task> = None;
    let mut last_renew: Option<Instant> = None;
    loop {
        if *shutdown.borrow() {
            break;
        }
        // A hung request must not outlive the renew deadline: bound each attempt.
        let attempt_deadline = timing.renew_deadline / 2;
        let attempt = tokio::time::timeout(attempt_deadline, elector.try_acquire_or_renew())
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout {
                    what: "renewing the leader lease".to_owned(),
                    after: attempt_deadline,
                })
            });
        let lead_now = match attempt {
            Ok(true) => {
                last_renew = Some(Instant::now());
                true
            }
            Ok(false) => {
                if leading.is_some() {
                    tracing::warn!("lost the leader lease to another candidate");
                }
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "leader election attempt failed");
                let lost = last_renew.is_none_or(|t| t.elapsed() >= timing.renew_deadline);
                if leading.is_some() && lost {
                    tracing::warn!("could not renew the leader lease within the renew deadline");
                }
                leading.is_some() && !lost
            }
        };
        if lead_now && leading.is_none() {
            if !sharded {
                stop_task(&mut observing).await;
            }
            tracing::info!(
                identity = elector.identity(),
                lease = elector.name(),
                shard = ctx.shard.name().unwrap_or(""),
                "acquired the leader lease; starting controllers"
            );
            leading = Some(Task::spawn(|rx| run_controllers(Arc::clone(&ctx), rx)));
            role.send_replace(Role::Leader);
        }
        if !lead_now {
            last_renew = None;
            if leading.is_some() {
                stop_task(&mut leading).await;
                role.send_replace(Role::Follower);
            }
            if observing.is_none() {
                // Followers keep their own store current (for the render API), writing nothing.
                observing = Some(observe(&ctx));
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(timing.retry_period) => {}
            _ = shutdown.wait_for(|s| *s) => {}
        }
    }
    let was_leading = leading.is_some();
    stop_task(&mut leading).await;
    stop_task(&mut observing).await;
    if was_leading {
        match elector.release().await {
            Ok(()) => tracing::info!("released the leader lease"),
            Err(e) => tracing::warn!(error = %e, "releasing the leader lease failed"),
        }
    }
    role.send_replace(Role::Follower);
}

/// A spawned controller set and its stop signal.
struct Task {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

impl Task {
    fn spawn<F, Fut>(f: F) -> Task
    where
        F: FnOnce(watch::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, rx) = watch::channel(false);
        Task {
            stop,
            handle: tokio::spawn(f(rx)),
        }
    }
}

/// How long a stopped controller set may take to finish its in-flight reconciles.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Stops a controller set: signals it, waits up to [`STOP_GRACE`], then aborts it. (kube-runtime's
/// applier waits for its cache to be ready before it can end; a stop that arrives before the first
/// list completes would otherwise wait forever.)
async fn stop_task(task: &mut Option<Task>) {
    if let Some(mut t) = task.take() {
        t.stop.send_replace(true);
        match tokio::time::timeout(STOP_GRACE, &mut t.handle).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "a controller task ended abnormally"),
            Err(_) => {
                tracing::warn!(
                    grace_s = STOP_GRACE.as_secs(),
                    "controllers did not stop within the grace period; aborted"
                );
                t.handle.abort();
                let _ = t.handle.await;
            }
        }
    }
}
