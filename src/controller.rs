//! The reconcilers and the runtime they share (docs/design/operator.md §2–§4, §7).
//!
//! Module map:
//! - [`runtime`]: what every reconciler shares: the status patcher (diff against the object as
//!   read, resourceVersion precondition), the events.k8s.io/v1 recorder, the per-reconcile span,
//!   the error type and the clock.
//! - [`reconcile`]: the one reconcile frame of all four kinds: read, span, the kind's phases,
//!   one commit point (conditions, one status patch, the end's events), metrics; each kind
//!   implements [`reconcile::Kind`] and supplies only its phases (issue 33).
//! - [`outcome`]: reconcile outcomes, their metric labels and requeue intervals, and the
//!   classification of kernel errors into condition reasons (§2.1).
//! - [`events`]: Warning events once per transition (scenario 64).
//! - [`metrics`]: the §7.2 metric families.
//! - [`context`]: what the reconcilers share (store, layout, kernel seams, client, settings).
//! - [`manager`]: the kube-runtime controllers with their watches and predicates and the one
//!   settle / error policy of every reconcile (§3.7, §4.6, §7.1); [`leader`]: Lease-based leader
//!   election; [`shard`]: which instances and packages a replica reconciles and which Lease it
//!   takes (issue 32).
//! - [`platform_gate`] and [`platform`]: the Platform reconciler (§3).
//! - [`claims`] and [`registration`]: the TransformerRegistration reconciler (§4).
//! - [`render_apply`]: the render-and-apply run ModuleInstance and ModulePackage share, one type
//!   ([`render_apply::RenderRun`], composed over the frame's run) whose phases are carried out by
//!   its submodules `gates`, `deletion`, `target`, `render`, `sync`, `health` and `commit`
//!   (§2.1–§2.5, §6).
//! - [`instance`]: the ModuleInstance reconciler's own phases (§2.2, §2.4–§2.6).
//! - [`package`]: the ModulePackage reconciler's own steps (§2.3, §2.4) and its Flux sources.
//! - [`fairness`]: renders that exhaust a budget back off per object and retry in one worker,
//!   so they never hold up the others (issue 41).
//! - [`deadline`]: the `--reconcile-timeout` of both; [`workloads`]: the watch that re-enqueues
//!   an instance when one of its workloads changes health after the apply.
//! - [`remote`]: `spec.kubeConfig`, the remote cluster both apply to (its client cache, what a
//!   kubeconfig may hold, reachability).
//! - [`values_from`]: values read from Secrets and ConfigMaps, and the watch that re-renders on
//!   their change; [`depends_on`]: the `dependsOn` gate both rendering kinds share, and
//!   [`waiters`]: the wake-ups of dependents when a dependency changes (issue 40).
//!
//! The controller flags of `opm-operator serve` and the wiring of all of this live in the
//! composition root, `crate::cmd::serve`.

pub mod claims;
pub mod context;
pub mod deadline;
pub mod events;
pub mod fairness;
pub mod instance;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod outcome;
pub mod package;
pub mod platform;
pub mod platform_gate;
pub mod reconcile;
pub mod registration;
pub mod remote;
pub mod render_apply;
pub mod runtime;
pub mod shard;
pub mod verify;
pub mod workloads;
// issue 40 (valuesFrom, interval and drift, dependsOn):
pub mod depends_on;
pub mod values_from;
pub mod waiters;
