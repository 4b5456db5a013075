//! The one reconcile every kind goes through (issue 33 “one reconciler shape”; Flux's
//! `pkg/runtime` with each controller's sub-reconcilers): a kind supplies its phases, this module
//! does everything around them (docs/design/operator.md §2.1, §3.6, §4.2, §7.2, §7.3).
//!
//! The frame, for every [`Kind`]:
//! 1. **Read**: one GET of the object (docs/design/decisions.md §2: no mid-loop re-GET). A missing object is done:
//!    [`Kind::gone`] forgets what the process kept about it.
//! 2. **Prepare**: one span ([`super::runtime::reconcile_span`]), one status [`Patcher`] whose
//!    diff base is the object as read, the status as read (`prior`).
//! 3. **Phases**: [`Kind::phases`] runs the kind's phases in order, top to bottom in the kind's
//!    file; its first phases are the kind's gates (hand-off, finalizer, deletion, suspend).
//! 4. **Commit** ([`Run::conclude`]), the one place a reconcile ends: the conditions of the end
//!    are written ([`Mark`]), the status is patched once (nothing is sent when it equals the
//!    status as read, so an idempotent reconcile writes nothing), the end's events are sent, the
//!    end's process-local effects run, and the end becomes a requeue ([`Reconciled`]).
//! 5. **Metrics** (§7.2): every reconcile of a metered object ([`Kind::metered`]) is observed,
//!    its outcome counted when it has one, an error's duration included.
//!
//! The phase contract:
//! - A phase returns `Result<T, Halt>`. `Ok` goes on to the next phase (with what the phase
//!   produced); `Err` ends the reconcile, so the `?` operator stops at the first phase that ends
//!   it. The last phase returns the [`End`].
//! - [`Halt::Failed`]: a classified [`Failure`], never an error to the controller runtime: the
//!   frame marks Ready=False with the failure's reason and message (and Stalled=True when
//!   stalled, or only Ready=Unknown with Reconciling=True when deferred), sends the failure's
//!   event once per transition of Ready ([`super::events::ready_changed`]) and requeues after the
//!   failure's interval (`None`: the outcome's at a failure counter of 0, i.e. 30 minutes when
//!   stalled; kinds that count failures resolve it before).
//! - [`Halt::Ended`]: the reconcile ends early with an [`End`] the phase built (a finished
//!   deletion, a suspend, a hold, a requeue after adding a finalizer).
//! - [`Halt::Error`]: an [`Error`] (API failure, conflict): nothing is committed, the controller
//!   runtime retries with backoff.
//! - Phases change the status they own in memory (`run.status()`); only the commit writes it.
//!   Events about progress (render warnings, applied objects, drift) are sent by the phase that
//!   makes the progress; the events of the end are [`Note`]s of the [`End`].
//! - Process-local effects that must follow a committed status (signals, gauges, remembered
//!   notes) are the end's [`End::then`]: a failed patch leaves the process as it was.
//!
//! Waiting (issue 40): a committed status write, a finalizer change and a missing object wake
//! the reconciles registered as waiting for the object ([`super::waiters`]); [`Kind::interval`]
//! is jittered by `--interval-jitter-percentage` once per reconcile.
//!
//! Modes ([`Mode`]): the leader writes; an observer ([`Mode::Observe`], the Platform follower)
//! runs the same phases but writes no status and no event, and records no outcome or metric.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

use crds::conditions::{self, HasConditions};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::Instrument;

use super::context::{Context, Reconciled};
use super::outcome::{self, Outcome, STALLED_RECHECK};
use super::runtime::{self, Error, EventType, Patcher};

/// How a reconcile acts on the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The leader: writes status and events, records metrics.
    Lead,
    /// A follower: runs the phases (e.g. records the platform package in its own store) but
    /// writes nothing to the cluster and records no metric.
    Observe,
}

/// A kind the frame reconciles: what it reads and writes, and its phases.
pub trait Kind:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static
{
    /// The status type.
    type Status: HasConditions + Default + Clone + Debug + Send + Sync + 'static;
    /// The kind label of spans, metrics, logs and error texts.
    const KIND: &'static str;

    /// The API of the kind in `namespace` (ignored by cluster-scoped kinds).
    fn api(client: kube::Client, namespace: &str) -> Api<Self>;
    /// The status as read, if any.
    fn status_of(&self) -> Option<&Self::Status>;
    /// The status, created when missing.
    fn status_mut(&mut self) -> &mut Self::Status;
    /// Whether the reconciles of this object are observed in the §7.2 metrics.
    fn metered(&self) -> bool {
        true
    }
    /// Forgets what the process kept about `namespace/name`, which no longer exists.
    fn gone(_ctx: &Context, _namespace: &str, _name: &str) {}
    /// Requeue after a success (`None`: wait for a watch event).
    fn interval(&self) -> Option<Duration> {
        None
    }
    /// The kind's phases, in order (the phase contract of the module docs).
    fn phases(run: &mut Run<'_, Self>) -> impl Future<Output = Result<End, Halt>> + Send;
}

/// The [`Kind`] accessors of a kind whose status is `status: Option<Status>` (all four are);
/// invoked inside the kind's `impl Kind`.
macro_rules! status_field {
    () => {
        fn status_of(&self) -> Option<&Self::Status> {
            self.status.as_ref()
        }

        fn status_mut(&mut self) -> &mut Self::Status {
            self.status.get_or_insert_with(Default::default)
        }
    };
}
pub(crate) use status_field;

/// Reconciles `namespace/name` of kind `K` in `mode` (the frame of the module docs).
pub async fn reconcile<K: Kind>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    mode: Mode,
) -> Result<Reconciled, Error> {
    frame(ctx, namespace, name, mode, Instant::now(), K::phases).await
}

/// The frame of the module docs around `phases` instead of the kind's own (the deadline's
/// timed-out reconcile, [`super::deadline`]); `started` is when the reconcile began.
pub async fn frame<K: Kind>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    mode: Mode,
    started: Instant,
    phases: impl AsyncFnOnce(&mut Run<'_, K>) -> Result<End, Halt>,
) -> Result<Reconciled, Error> {
    let api = K::api(ctx.client.clone(), namespace);
    let what = what(K::KIND, namespace, name);
    let Some(obj) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading {what}"), e))?
    else {
        K::gone(ctx, namespace, name);
        if let Some(m) = &ctx.metrics {
            m.forget_ready(K::KIND, namespace, name);
        }
        ctx.waiters.wake(K::KIND, namespace, name);
        return Ok(Reconciled::done());
    };
    let generation = obj.meta().generation.unwrap_or_default();
    let span = runtime::reconcile_span(K::KIND, namespace, name, generation);
    let metered = mode == Mode::Lead && obj.metered();
    let result = async {
        let mut run = Run::new(api, obj, ctx, mode, started)?;
        let end = phases(&mut run).await;
        let reconciled = run.conclude(end).await?;
        Ok::<_, Error>((reconciled, run.ready_status()))
    }
    .instrument(span)
    .await;
    if metered {
        let outcome = result.as_ref().ok().and_then(|(r, _)| r.outcome);
        ctx.observe(K::KIND, namespace, name, outcome, started);
        if let (Some(m), Ok((_, ready))) = (&ctx.metrics, &result) {
            m.set_ready(K::KIND, namespace, name, *ready);
        }
    }
    result.map(|(r, _)| r)
}

/// `Kind ns/name`, or `Kind name` for a cluster-scoped object.
fn what(kind: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

/// How a phase ends the reconcile (the phase contract of the module docs).
#[derive(Debug)]
pub enum Halt {
    /// A classified failure, committed by the frame (boxed: a `Result` carrying it stays small).
    Failed(Box<Failure>),
    /// An end the phase built (boxed, as above).
    Ended(Box<End>),
    /// An error returned to the controller runtime; nothing is committed.
    Error(Error),
}

impl From<Error> for Halt {
    fn from(e: Error) -> Self {
        Halt::Error(e)
    }
}

impl From<Failure> for Halt {
    fn from(f: Failure) -> Self {
        Halt::Failed(Box::new(f))
    }
}

impl From<End> for Halt {
    fn from(e: End) -> Self {
        Halt::Ended(Box::new(e))
    }
}

/// The conditions an end writes (each through its `crds::conditions` helper).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Ready=True; Reconciling and Stalled removed.
    Ready(&'static str, String),
    /// Ready=Unknown and Reconciling=True; Stalled removed.
    Progressing(&'static str, String),
    /// Ready=False only.
    NotReady(&'static str, String),
    /// Ready=False and Stalled=True; Reconciling removed.
    Stalled(&'static str, String),
    /// Ready=False `Suspended`; Reconciling and Stalled removed.
    Suspended,
}

impl Mark {
    fn write(&self, conds: &mut Vec<Condition>, generation: Option<i64>, now: &Time) {
        match self {
            Mark::Ready(r, m) => conditions::mark_ready(conds, r, m, generation, now),
            Mark::Progressing(r, m) => conditions::mark_reconciling(conds, r, m, generation, now),
            Mark::NotReady(r, m) => conditions::mark_not_ready(conds, r, m, generation, now),
            Mark::Stalled(r, m) => conditions::mark_stalled(conds, r, m, generation, now),
            Mark::Suspended => conditions::mark_suspended(conds, generation, now),
        }
    }
}

/// When a [`Note`] is sent (after the status patch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Every time the end is committed.
    Always,
    /// When Ready differs from Ready as read ([`super::events::ready_changed`]).
    Transition,
    /// When the patch wrote something.
    Written,
}

/// An event of an end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Normal or Warning.
    pub type_: EventType,
    /// The event reason.
    pub reason: &'static str,
    /// The event action.
    pub action: &'static str,
    /// The note (a stable string).
    pub message: String,
    /// When it is sent.
    pub when: When,
}

impl Note {
    /// A Normal event sent every time.
    pub fn normal(reason: &'static str, action: &'static str, message: impl Into<String>) -> Self {
        Note {
            type_: EventType::Normal,
            reason,
            action,
            message: message.into(),
            when: When::Always,
        }
    }

    /// A Warning event sent every time.
    pub fn warning(reason: &'static str, action: &'static str, message: impl Into<String>) -> Self {
        Note {
            type_: EventType::Warning,
            ..Note::normal(reason, action, message)
        }
    }

    /// The same event, sent `when`.
    pub fn when(self, when: When) -> Self {
        Note { when, ..self }
    }
}

/// A process-local effect of a committed end.
pub type Then = Box<dyn FnOnce(&Context) + Send>;

/// How a reconcile ends: what the commit writes, sends and returns.
#[derive(Default)]
pub struct End {
    /// The conditions written last (`None`: only what the phases wrote).
    pub mark: Option<Mark>,
    /// The metrics outcome (`None`: a path without one).
    pub outcome: Option<Outcome>,
    /// Requeue after this (`None`: wait for a watch event).
    pub requeue: Option<Duration>,
    /// The condition reason the reconcile ended with (logs and tests).
    pub reason: Option<&'static str>,
    /// The events, sent in order after the patch.
    pub notes: Vec<Note>,
    /// The process-local effect, run after the patch and the events.
    pub then: Option<Then>,
}

impl Debug for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("End")
            .field("mark", &self.mark)
            .field("outcome", &self.outcome)
            .field("requeue", &self.requeue)
            .field("reason", &self.reason)
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

impl End {
    /// Nothing more to write, no requeue.
    pub fn done() -> Self {
        End::default()
    }

    /// Nothing more to write; look again after `after`.
    pub fn requeue(after: Duration) -> Self {
        End {
            requeue: Some(after),
            ..End::default()
        }
    }

    /// An end that writes `mark` and ends with its reason.
    pub fn marked(mark: Mark) -> Self {
        let reason = match &mark {
            Mark::Ready(r, _)
            | Mark::Progressing(r, _)
            | Mark::NotReady(r, _)
            | Mark::Stalled(r, _) => Some(*r),
            Mark::Suspended => Some(crds::conditions::reasons::SUSPENDED),
        };
        End {
            mark: Some(mark),
            reason,
            ..End::default()
        }
    }

    /// An end that writes nothing more and ends with `reason`.
    pub fn reason(reason: &'static str) -> Self {
        End {
            reason: Some(reason),
            ..End::default()
        }
    }

    /// With the metrics outcome `outcome`.
    pub fn outcome(mut self, outcome: Outcome) -> Self {
        self.outcome = Some(outcome);
        self
    }

    /// Requeue after `after` (`None`: wait for a watch event).
    pub fn after(mut self, after: Option<Duration>) -> Self {
        self.requeue = after;
        self
    }

    /// With the event `note` (after those already added).
    pub fn note(mut self, note: Note) -> Self {
        self.notes.push(note);
        self
    }

    /// With the events `notes` (after those already added).
    pub fn with_notes(mut self, notes: impl IntoIterator<Item = Note>) -> Self {
        self.notes.extend(notes);
        self
    }

    /// With the event `note` when `send` (after those already added).
    pub fn note_if(self, send: bool, note: Note) -> Self {
        if send {
            self.note(note)
        } else {
            self
        }
    }

    /// With the process-local effect `then`, run once the status is committed.
    pub fn then(mut self, then: impl FnOnce(&Context) + Send + 'static) -> Self {
        self.then = Some(Box::new(then));
        self
    }
}

/// What a failure's conditions say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Ready=False, Stalled=True: needs a change (or an outside event) to recover.
    Stalled,
    /// Ready=False: may pass by itself.
    NotReady,
    /// Ready=Unknown, Reconciling=True: the verdict is deferred until something is ready.
    Deferred,
}

/// A classified failure of a phase (the phase contract of the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The Ready (and Stalled or Reconciling) condition reason.
    pub reason: &'static str,
    /// The event's reason (the condition reason unless the phase's failure reason differs, §7.3).
    pub event: &'static str,
    /// The condition message, the event note (and the history message of kinds that keep one).
    pub message: String,
    /// What the conditions say.
    pub standing: Standing,
    /// The metrics outcome.
    pub outcome: Outcome,
    /// The event action.
    pub action: &'static str,
    /// The event's type (`None`: no event).
    pub event_type: Option<EventType>,
    /// Requeue after this instead of the outcome's.
    pub requeue: Option<Duration>,
    /// A soft block: a kind's failure counter is left alone.
    pub soft: bool,
    /// Write a failure history entry (kinds that keep one, when there is a message).
    pub history: bool,
}

impl Failure {
    fn new(
        reason: &'static str,
        action: &'static str,
        message: String,
        standing: Standing,
        outcome: Outcome,
    ) -> Self {
        Failure {
            reason,
            event: reason,
            message,
            standing,
            outcome,
            action,
            event_type: Some(EventType::Warning),
            requeue: None,
            soft: false,
            history: true,
        }
    }

    /// A stalled failure (30-minute recheck), Warning once per transition.
    pub fn stalled(reason: &'static str, action: &'static str, message: String) -> Self {
        Failure::new(
            reason,
            action,
            message,
            Standing::Stalled,
            Outcome::FailedStalled,
        )
    }

    /// A transient failure (backoff unless [`Failure::after`] says otherwise), Warning once per
    /// transition.
    pub fn transient(reason: &'static str, action: &'static str, message: String) -> Self {
        Failure::new(
            reason,
            action,
            message,
            Standing::NotReady,
            Outcome::FailedTransient,
        )
    }

    /// A deferred verdict (transient, no event).
    pub fn deferred(reason: &'static str, message: String) -> Self {
        Failure {
            event_type: None,
            ..Failure::new(
                reason,
                "",
                message,
                Standing::Deferred,
                Outcome::FailedTransient,
            )
        }
    }

    /// Requeue after `requeue` (`None` keeps the outcome's).
    pub fn after(mut self, requeue: Option<Duration>) -> Self {
        self.requeue = requeue;
        self
    }

    /// A soft block: a kind's failure counter is not bumped.
    pub fn soft(mut self) -> Self {
        self.soft = true;
        self
    }

    /// Counted as `outcome` in the metrics (the conditions keep their standing).
    pub fn counted_as(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }

    /// The event is of type `type_`.
    pub fn event_type(mut self, type_: EventType) -> Self {
        self.event_type = Some(type_);
        self
    }

    /// The end committing this failure.
    fn end(self) -> End {
        let requeue = self.requeue.unwrap_or_else(|| {
            outcome::requeue_after(self.outcome, 0, None).unwrap_or(STALLED_RECHECK)
        });
        let note = self.event_type.map(|type_| Note {
            type_,
            reason: self.event,
            action: self.action,
            message: self.message.clone(),
            when: When::Transition,
        });
        let mark = match self.standing {
            Standing::Stalled => Mark::Stalled(self.reason, self.message),
            Standing::NotReady => Mark::NotReady(self.reason, self.message),
            Standing::Deferred => Mark::Progressing(self.reason, self.message),
        };
        End {
            notes: note.into_iter().collect(),
            ..End::marked(mark)
        }
        .outcome(self.outcome)
        .after(Some(requeue))
    }
}

/// One reconcile of one object.
pub struct Run<'a, K: Kind> {
    /// The shared reconciler state.
    pub ctx: &'a Context,
    /// The object as read, with the status this reconcile is building.
    pub obj: K,
    /// Commits the status (diff against the object as read).
    pub patcher: Patcher<K>,
    /// The status as read.
    pub prior: K::Status,
    /// The object's namespace (empty for a cluster-scoped kind).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// [`Kind::interval`] of the object, taken once.
    pub interval: Option<Duration>,
    /// The generation the conditions are written at (the object's unless a phase says
    /// otherwise).
    pub at: Option<i64>,
    /// Leader or observer.
    pub mode: Mode,
    /// When the reconcile started.
    pub started: Instant,
    /// When the reconcile started, as a Kubernetes time.
    pub started_at: Time,
}

impl<'a, K: Kind> Run<'a, K> {
    /// A reconcile of `obj` as read from `api`.
    pub fn new(
        api: Api<K>,
        obj: K,
        ctx: &'a Context,
        mode: Mode,
        started: Instant,
    ) -> Result<Self, Error> {
        let namespace = obj.namespace().unwrap_or_default();
        let name = obj.name_any();
        let patcher = Patcher::new(api, &obj, what(K::KIND, &namespace, &name))?;
        let prior = obj.status_of().cloned().unwrap_or_default();
        let interval = obj.interval().map(|d| ctx.gitops.jittered(d));
        let at = obj.meta().generation;
        Ok(Run {
            ctx,
            obj,
            patcher,
            prior,
            namespace,
            name,
            interval,
            at,
            mode,
            started,
            started_at: runtime::now(),
        })
    }

    /// The object's generation.
    pub fn generation(&self) -> Option<i64> {
        self.obj.meta().generation
    }

    /// Whether the object is being deleted.
    pub fn deleting(&self) -> bool {
        self.obj.meta().deletion_timestamp.is_some()
    }

    /// The status being built.
    pub fn status(&mut self) -> &mut K::Status {
        self.obj.status_mut()
    }

    /// Writes `mark`'s conditions into the status being built, at [`Run::at`].
    pub fn mark(&mut self, mark: &Mark) {
        let at = self.at;
        let now = runtime::now();
        mark.write(self.status().conditions_mut(), at, &now);
    }

    /// Publishes one event about the object (an observer publishes nothing).
    pub async fn event(&self, type_: EventType, reason: &str, action: &str, note: &str) {
        if self.mode == Mode::Lead {
            self.ctx
                .events
                .publish(&self.obj, type_, reason, action, note)
                .await;
        }
    }

    /// The value of the reconcile-request annotation ([`crds::RECONCILE_REQUEST_ANNOTATION`]),
    /// which this reconcile handles; each kind records it in `status.lastHandledReconcileAt`
    /// once it is past its deletion (and suspend) gates.
    pub fn requested(&self) -> Option<String> {
        self.obj
            .annotations()
            .get(crds::RECONCILE_REQUEST_ANNOTATION)
            .cloned()
    }

    /// Whether the object holds `finalizer`.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.obj.finalizers().iter().any(|f| f == finalizer)
    }

    /// Adds `finalizer` when missing (a metadata patch with the patcher's precondition).
    pub async fn add_finalizer(&mut self, finalizer: &str) -> Result<(), Error> {
        if self.has_finalizer(finalizer) {
            return Ok(());
        }
        let mut finalizers = self.obj.finalizers().to_vec();
        finalizers.push(finalizer.to_owned());
        self.set_finalizers(finalizers).await
    }

    /// Removes `finalizer` (a metadata patch with the patcher's precondition).
    pub async fn remove_finalizer(&mut self, finalizer: &str) -> Result<(), Error> {
        let finalizers = self
            .obj
            .finalizers()
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        self.set_finalizers(finalizers).await
    }

    async fn set_finalizers(&mut self, finalizers: Vec<String>) -> Result<(), Error> {
        let written = self.patcher.patch_finalizers(&finalizers).await?;
        self.obj.meta_mut().finalizers = written.meta().finalizers.clone();
        self.ctx.waiters.wake(K::KIND, &self.namespace, &self.name);
        Ok(())
    }

    /// The status of the object's Ready condition as it stands (`True`, `False`, `Unknown`), for
    /// the `opm_controller_ready` series; `None` without one.
    fn ready_status(&self) -> Option<&'static str> {
        self.obj
            .status_of()
            .and_then(|s| crds::conditions::get(s.conditions(), crds::conditions::types::READY))
            .map(|c| match c.status.as_str() {
                "True" => "True",
                "False" => "False",
                _ => "Unknown",
            })
    }

    /// Commits how the phases ended (the commit of the module docs).
    pub async fn conclude(&mut self, ended: Result<End, Halt>) -> Result<Reconciled, Error> {
        let end = match ended {
            Ok(end) => end,
            Err(Halt::Ended(end)) => *end,
            Err(Halt::Failed(f)) => {
                match self.mode {
                    // A deferred verdict is waiting, not failing.
                    Mode::Lead if f.standing == Standing::Deferred => {
                        tracing::info!(reason = f.reason, message = %f.message, "verdict deferred");
                    }
                    Mode::Lead => {
                        tracing::warn!(reason = f.reason, message = %f.message, "not reconciled");
                    }
                    Mode::Observe => {
                        tracing::debug!(reason = f.reason, message = %f.message, "not reconciled (observer)");
                    }
                }
                f.end()
            }
            Err(Halt::Error(e)) => return Err(e),
        };
        self.commit(end).await
    }

    async fn commit(&mut self, end: End) -> Result<Reconciled, Error> {
        if let Some(mark) = &end.mark {
            self.mark(mark);
        }
        let lead = self.mode == Mode::Lead;
        if lead {
            let wrote = self.patcher.patch_status(&self.obj).await?;
            if wrote {
                // Dependents blocked on this object look again (`super::waiters`).
                self.ctx.waiters.wake(K::KIND, &self.namespace, &self.name);
            }
            let changed = super::events::ready_changed(
                self.prior.conditions(),
                self.obj
                    .status_of()
                    .map(HasConditions::conditions)
                    .unwrap_or_default(),
            );
            for n in &end.notes {
                let send = match n.when {
                    When::Always => true,
                    When::Transition => changed,
                    When::Written => wrote,
                };
                if send {
                    self.event(n.type_, n.reason, n.action, &n.message).await;
                }
            }
        }
        if let Some(then) = end.then {
            then(self.ctx);
        }
        Ok(Reconciled {
            requeue: end.requeue,
            outcome: end.outcome.filter(|_| lead),
            reason: end.reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crds::conditions::{reasons, types};

    #[test]
    fn a_failure_ends_with_its_conditions_event_and_requeue() {
        let stalled =
            Failure::stalled(reasons::BUILD_FAILED, "Generate", "pin missing".into()).end();
        assert_eq!(
            stalled.mark,
            Some(Mark::Stalled(reasons::BUILD_FAILED, "pin missing".into()))
        );
        assert_eq!(
            (stalled.outcome, stalled.requeue, stalled.reason),
            (
                Some(Outcome::FailedStalled),
                Some(STALLED_RECHECK),
                Some(reasons::BUILD_FAILED)
            )
        );
        assert_eq!(
            stalled.notes,
            vec![
                Note::warning(reasons::BUILD_FAILED, "Generate", "pin missing")
                    .when(When::Transition)
            ]
        );
        // A transient failure backs off from 5 s unless told otherwise.
        let transient = Failure::transient(reasons::APPLY_FAILED, "Apply", "x".into()).end();
        assert_eq!(transient.requeue, Some(Duration::from_secs(5)));
        assert_eq!(
            transient.mark,
            Some(Mark::NotReady(reasons::APPLY_FAILED, "x".into()))
        );
        // A deferral marks Reconciling and sends nothing; a stall may be counted as transient.
        let deferred = Failure::deferred(reasons::PLATFORM_NOT_READY, "later".into())
            .after(Some(STALLED_RECHECK))
            .end();
        assert_eq!(
            (deferred.mark, deferred.notes.len(), deferred.outcome),
            (
                Some(Mark::Progressing(
                    reasons::PLATFORM_NOT_READY,
                    "later".into()
                )),
                0,
                Some(Outcome::FailedTransient)
            )
        );
        let counted = Failure::stalled(reasons::BUILD_FAILED, "Generate", "x".into())
            .counted_as(Outcome::FailedTransient)
            .end();
        assert!(matches!(counted.mark, Some(Mark::Stalled(..))));
        assert_eq!(counted.outcome, Some(Outcome::FailedTransient));
    }

    #[test]
    fn marks_write_their_conditions() {
        let now = runtime::now();
        let mut conds = Vec::new();
        Mark::Progressing(reasons::PROGRESSING, "working".into()).write(&mut conds, Some(2), &now);
        assert!(conditions::is_true(&conds, types::RECONCILING));
        Mark::Stalled(reasons::BUILD_FAILED, "no".into()).write(&mut conds, Some(2), &now);
        assert!(conditions::is_true(&conds, types::STALLED));
        assert!(conditions::get(&conds, types::RECONCILING).is_none());
        Mark::Ready(reasons::GENERATED, "yes".into()).write(&mut conds, Some(3), &now);
        assert!(conditions::is_true(&conds, types::READY));
        assert!(conditions::get(&conds, types::STALLED).is_none());
        assert_eq!(
            conditions::get(&conds, types::READY).and_then(|c| c.observed_generation),
            Some(3)
        );
    }
}
