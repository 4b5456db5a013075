//! The controller metrics of docs/design/operator.md §7.2 and docs/design/principles.md rule 19.
//!
//! Rules implemented:
//! - `opm_controller_reconcile_total{kind,name,namespace,outcome}` counts every reconcile that
//!   ends in an [`Outcome`]; the `outcome` label is [`Outcome::metric_label`] (`no_op`, `applied`,
//!   `applied_and_pruned`, `failed_transient`, `failed_stalled`).
//! - `opm_controller_reconcile_duration_seconds{kind,name,namespace}` observes every reconcile,
//!   including the suspend and deletion paths, which have no outcome: that is why the histogram
//!   carries no `outcome` label (§7.2).
//! - Buckets: the baseline used controller-runtime's defaults (5 ms–10 s); docs/design/principles.md rule 19
//!   asks for 10 ms–30 min. We follow rule 19 ([`RECONCILE_BUCKETS`]): a reconcile that renders,
//!   applies with server-side apply and waits on the API server routinely exceeds 10 s, and with
//!   a 10 s top bucket every slow reconcile collapses into `+Inf`, so the histogram cannot tell a
//!   30 s reconcile from a 20-minute one.
//! - `opm_controller_apply_resources_total{action=created|updated|unchanged}` and
//!   `opm_controller_prune_resources_total` count objects per apply / prune phase.
//! - `opm_controller_inventory_size{name,namespace}` is set after a successful reconcile and
//!   removed with [`ControllerMetrics::forget_inventory`] when the owner is deleted.
//! - `opm_controller_ready{kind,name,namespace,status}` is 1 for the status of the object's Ready
//!   condition after its last committed reconcile (`True`, `False` or `Unknown`) and 0 for the two
//!   others (Flux's `gotk_reconcile_condition` shape: an alert selects `status="False"` and needs no
//!   join); the object's three series are removed when it is gone. The `opm-operator` alerts
//!   ("not Ready for 15 minutes") read it.
//! - `opm_leader{lease}` is 1 while this process holds the leader Lease `lease`, else 0 (each
//!   replica exports its own; `max by (lease)` is 0 when nobody leads).
//! - `opm_render_total{caller,result}` and `opm_render_duration_seconds{caller}` count and time
//!   every render on a leased platform (see [`crate::render_lease::RenderMetrics`]).
//! - Callers record for ModuleInstances (never CLI-owned ones), Platforms and claims (§7.2); this module
//!   does not know ownership, so that filter is the caller's.
//!
//! The families are registered into a `prometheus_client` [`Registry`] the caller owns (the
//! server's registry is private to `src/server`, so wiring it there is left to the manager).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::controller::outcome::Outcome;

/// Reconcile-duration buckets in seconds: 10 ms to 30 min (docs/design/principles.md rule 19).
pub const RECONCILE_BUCKETS: [f64; 16] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

/// Labels of `opm_controller_reconcile_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// The reconciled kind (`ModuleInstance`, `Platform`, …).
    pub kind: String,
    /// Object name.
    pub name: String,
    /// Object namespace (empty for cluster-scoped kinds).
    pub namespace: String,
    /// [`Outcome::metric_label`].
    pub outcome: &'static str,
}

/// Labels of `opm_controller_reconcile_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    /// The reconciled kind.
    pub kind: String,
    /// Object name.
    pub name: String,
    /// Object namespace (empty for cluster-scoped kinds).
    pub namespace: String,
}

/// Labels of `opm_controller_apply_resources_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApplyLabels {
    /// `created`, `updated` or `unchanged`.
    pub action: &'static str,
}

/// Labels of `opm_controller_ready`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadyLabels {
    /// The reconciled kind.
    pub kind: String,
    /// Object name.
    pub name: String,
    /// Object namespace (empty for cluster-scoped kinds).
    pub namespace: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
}

/// Labels of `opm_leader`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    /// The Lease name (`4cc9e43e.opmodel.dev`, or `<shard>.4cc9e43e.opmodel.dev`).
    pub lease: String,
}

/// The values of the `status` label of `opm_controller_ready`.
pub const READY_STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// Labels of `opm_controller_inventory_size`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InventoryLabels {
    /// Owner name.
    pub name: String,
    /// Owner namespace.
    pub namespace: String,
}

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

/// The controller metric families. Cloning shares the underlying series.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    reconciles: Family<ReconcileLabels, Counter>,
    durations: Family<ObjectLabels, Histogram, fn() -> Histogram>,
    applied: Family<ApplyLabels, Counter>,
    pruned: Counter,
    inventory: Family<InventoryLabels, Gauge>,
    ready: Family<ReadyLabels, Gauge>,
    leader: Family<LeaseLabels, Gauge>,
    /// The render series (shared with the REST render API).
    pub render: crate::render_lease::RenderMetrics,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        ControllerMetrics {
            reconciles: Family::default(),
            durations: Family::new_with_constructor(reconcile_histogram),
            applied: Family::default(),
            pruned: Counter::default(),
            inventory: Family::default(),
            ready: Family::default(),
            leader: Family::default(),
            render: crate::render_lease::RenderMetrics::default(),
        }
    }
}

impl ControllerMetrics {
    /// Creates the families and registers them into `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = ControllerMetrics::default();
        m.register_into(registry);
        m
    }

    /// Registers these families (clones share the series) into `registry`.
    pub fn register_into(&self, registry: &mut Registry) {
        let m = self;
        // prometheus-client appends `_total` to counter names.
        registry.register(
            "opm_controller_reconcile",
            "Reconciles by outcome",
            m.reconciles.clone(),
        );
        registry.register(
            "opm_controller_reconcile_duration_seconds",
            "Reconcile duration in seconds, including suspend and deletion paths",
            m.durations.clone(),
        );
        registry.register(
            "opm_controller_apply_resources",
            "Objects applied, by action",
            m.applied.clone(),
        );
        registry.register(
            "opm_controller_prune_resources",
            "Objects pruned",
            m.pruned.clone(),
        );
        registry.register(
            "opm_controller_inventory_size",
            "Inventory entries after the last successful reconcile",
            m.inventory.clone(),
        );
        registry.register(
            "opm_controller_ready",
            "1 for the status of the object's Ready condition after its last reconcile, else 0",
            m.ready.clone(),
        );
        registry.register(
            "opm_leader",
            "1 while this process holds the leader Lease, else 0",
            m.leader.clone(),
        );
        m.render.register_into(registry);
    }

    /// Sets the Ready series of `kind` `namespace/name` to `status` (`True`, `False`, `Unknown`);
    /// `None` (no Ready condition) counts as `Unknown`.
    pub fn set_ready(&self, kind: &str, namespace: &str, name: &str, status: Option<&str>) {
        let current = status.unwrap_or("Unknown");
        for s in READY_STATUSES {
            self.ready
                .get_or_create(&ReadyLabels {
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                    namespace: namespace.to_owned(),
                    status: s,
                })
                .set(i64::from(s == current));
        }
    }

    /// Removes the Ready series of an object that is gone.
    pub fn forget_ready(&self, kind: &str, namespace: &str, name: &str) {
        for status in READY_STATUSES {
            self.ready.remove(&ReadyLabels {
                kind: kind.to_owned(),
                name: name.to_owned(),
                namespace: namespace.to_owned(),
                status,
            });
        }
    }

    /// Records whether this process holds the Lease `lease`.
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels {
                lease: lease.to_owned(),
            })
            .set(i64::from(leading));
    }

    /// Records one reconcile that ended in `outcome` and took `duration`.
    pub fn record_reconcile(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        outcome: Outcome,
        duration: Duration,
    ) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                kind: kind.to_owned(),
                name: name.to_owned(),
                namespace: namespace.to_owned(),
                outcome: outcome.metric_label(),
            })
            .inc();
        self.observe_duration(kind, namespace, name, duration);
    }

    /// Records the duration of a reconcile without an outcome (suspend, deletion paths).
    pub fn observe_duration(&self, kind: &str, namespace: &str, name: &str, duration: Duration) {
        self.durations
            .get_or_create(&ObjectLabels {
                kind: kind.to_owned(),
                name: name.to_owned(),
                namespace: namespace.to_owned(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Adds the counts of one apply phase.
    pub fn record_apply(&self, created: u64, updated: u64, unchanged: u64) {
        for (action, n) in [
            ("created", created),
            ("updated", updated),
            ("unchanged", unchanged),
        ] {
            self.applied
                .get_or_create(&ApplyLabels { action })
                .inc_by(n);
        }
    }

    /// Adds the count of objects deleted by one prune phase.
    pub fn record_prune(&self, deleted: u64) {
        self.pruned.inc_by(deleted);
    }

    /// Sets the inventory size of `namespace/name` after a successful reconcile.
    pub fn set_inventory_size(&self, namespace: &str, name: &str, size: usize) {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        self.inventory
            .get_or_create(&InventoryLabels {
                name: name.to_owned(),
                namespace: namespace.to_owned(),
            })
            .set(size);
    }

    /// Removes the inventory series of a deleted owner.
    pub fn forget_inventory(&self, namespace: &str, name: &str) {
        self.inventory.remove(&InventoryLabels {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn encode(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    fn series(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn ready_series_follow_the_condition_and_are_forgotten() {
        let mut registry = Registry::default();
        let m = ControllerMetrics::register(&mut registry);
        m.set_ready("ModuleInstance", "apps", "web", Some("False"));
        let l = "kind=\"ModuleInstance\",name=\"web\",namespace=\"apps\"";
        let text = encode(&registry);
        for (status, v) in [("True", 0), ("False", 1), ("Unknown", 0)] {
            let line = format!("opm_controller_ready{{{l},status=\"{status}\"}} {v}");
            assert!(
                series(&text).contains(&line.as_str()),
                "missing {line} in {text}"
            );
        }
        m.set_ready("ModuleInstance", "apps", "web", Some("True"));
        let text = encode(&registry);
        let line = format!("opm_controller_ready{{{l},status=\"True\"}} 1");
        assert!(series(&text).contains(&line.as_str()), "{text}");
        m.forget_ready("ModuleInstance", "apps", "web");
        let text = encode(&registry);
        assert!(!text.contains("opm_controller_ready{"), "{text}");
    }

    #[test]
    fn the_leader_gauge_says_who_leads() {
        let mut registry = Registry::default();
        let m = ControllerMetrics::register(&mut registry);
        m.set_leader("4cc9e43e.opmodel.dev", true);
        let text = encode(&registry);
        assert!(
            series(&text).contains(&"opm_leader{lease=\"4cc9e43e.opmodel.dev\"} 1"),
            "{text}"
        );
        m.set_leader("4cc9e43e.opmodel.dev", false);
        let text = encode(&registry);
        assert!(
            series(&text).contains(&"opm_leader{lease=\"4cc9e43e.opmodel.dev\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn reconcile_counter_and_histogram() {
        let mut registry = Registry::default();
        let m = ControllerMetrics::register(&mut registry);
        m.record_reconcile(
            "ModuleInstance",
            "apps",
            "web",
            Outcome::Applied,
            Duration::from_millis(40),
        );
        m.record_reconcile(
            "ModuleInstance",
            "apps",
            "web",
            Outcome::Applied,
            Duration::from_secs(45),
        );
        m.record_reconcile(
            "ModuleInstance",
            "apps",
            "web",
            Outcome::FailedStalled,
            Duration::from_secs(2000),
        );
        let text = encode(&registry);
        let s = series(&text);
        assert!(s.contains(
            &"opm_controller_reconcile_total{kind=\"ModuleInstance\",name=\"web\",namespace=\"apps\",outcome=\"applied\"} 2"
        ), "{text}");
        assert!(s.contains(
            &"opm_controller_reconcile_total{kind=\"ModuleInstance\",name=\"web\",namespace=\"apps\",outcome=\"failed_stalled\"} 1"
        ), "{text}");
        assert!(
            text.contains("# TYPE opm_controller_reconcile_duration_seconds histogram"),
            "{text}"
        );
        let l = "kind=\"ModuleInstance\",name=\"web\",namespace=\"apps\"";
        assert!(
            s.contains(
                &format!("opm_controller_reconcile_duration_seconds_count{{{l}}} 3").as_str()
            ),
            "{text}"
        );
        assert!(
            s.contains(
                &format!("opm_controller_reconcile_duration_seconds_sum{{{l}}} 2045.04").as_str()
            ),
            "{text}"
        );
        // Cumulative buckets: 40 ms falls in 0.05; 45 s in 60; 2000 s only in +Inf.
        for (le, n) in [
            ("0.025", 0),
            ("0.05", 1),
            ("30.0", 1),
            ("60.0", 2),
            ("1800.0", 2),
            ("+Inf", 3),
        ] {
            let line =
                format!("opm_controller_reconcile_duration_seconds_bucket{{le=\"{le}\",{l}}} {n}");
            assert!(s.contains(&line.as_str()), "missing {line} in {text}");
        }
        let buckets = s
            .iter()
            .filter(|l| l.starts_with("opm_controller_reconcile_duration_seconds_bucket"))
            .count();
        assert_eq!(buckets, RECONCILE_BUCKETS.len() + 1);
    }

    #[test]
    fn outcome_free_duration_is_observed() {
        let mut registry = Registry::default();
        let m = ControllerMetrics::register(&mut registry);
        m.observe_duration("ModuleInstance", "apps", "web", Duration::from_millis(5));
        let text = encode(&registry);
        let s = series(&text);
        assert!(s.contains(
            &"opm_controller_reconcile_duration_seconds_count{kind=\"ModuleInstance\",name=\"web\",namespace=\"apps\"} 1"
        ), "{text}");
        assert!(
            !s.iter()
                .any(|l| l.starts_with("opm_controller_reconcile_total")),
            "{text}"
        );
    }

    #[test]
    fn apply_prune_and_inventory() {
        let mut registry = Registry::default();
        let m = ControllerMetrics::register(&mut registry);
        m.record_apply(2, 1, 5);
        m.record_apply(0, 3, 1);
        m.record_prune(4);
        m.record_prune(0);
        m.set_inventory_size("apps", "web", 9);
        m.set_inventory_size("apps", "web", 7);
        m.set_inventory_size("apps", "db", 3);
        let text = encode(&registry);
        let s = series(&text);
        for line in [
            "opm_controller_apply_resources_total{action=\"created\"} 2",
            "opm_controller_apply_resources_total{action=\"updated\"} 4",
            "opm_controller_apply_resources_total{action=\"unchanged\"} 6",
            "opm_controller_prune_resources_total 4",
            "opm_controller_inventory_size{name=\"web\",namespace=\"apps\"} 7",
            "opm_controller_inventory_size{name=\"db\",namespace=\"apps\"} 3",
        ] {
            assert!(s.contains(&line), "missing {line} in {text}");
        }
        assert!(
            text.contains("# TYPE opm_controller_inventory_size gauge"),
            "{text}"
        );

        m.forget_inventory("apps", "web");
        let text = encode(&registry);
        assert!(
            !text.contains("opm_controller_inventory_size{name=\"web\""),
            "{text}"
        );
        assert!(
            series(&text)
                .contains(&"opm_controller_inventory_size{name=\"db\",namespace=\"apps\"} 3"),
            "{text}"
        );
    }
}
