//! Prometheus metrics of the HTTP server, in the Prometheus text format (0.0.4).
//!
//! Series:
//! - `http_requests_total{listener, route, method, status}` and
//!   `http_request_duration_seconds{listener, route, method, status}`: every HTTP request; `route` is
//!   the matched route template, or `unmatched` for unknown paths (so scanners cannot blow up the
//!   label space).
//! - `admission_reviews_total{webhook, result}` and `admission_review_duration_seconds{webhook, result}`
//!   with `result` one of `allowed`, `denied`, `error` (the body could not be judged) or `timeout`.
//! - `http_requests_in_flight{listener}`: requests being served.
//! - `admission_reviews_in_flight`: reviews holding or waiting for an evaluation permit.
//! - `opm_build_info{version, commit}`: always 1; the binary's version and git commit (what
//!   `--version` prints), so dashboards can show which build each replica runs.
//! - `cert_reload_total{result="success|failure"}` and `cert_not_after_seconds`: read from
//!   [`certs::CertMetrics`] at scrape time (the `certs` crate has no registry of its own).

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Labels of the HTTP request series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// `webhook`, `probe` or `metrics`.
    pub listener: &'static str,
    /// Matched route template or `unmatched`.
    pub route: &'static str,
    /// HTTP method (`other` for extension methods).
    pub method: &'static str,
    /// Status code.
    pub status: u16,
}

/// Labels of the in-flight HTTP gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    /// `webhook`, `probe` or `metrics`.
    pub listener: &'static str,
}

/// Labels of the admission review series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// Webhook resource plural (`platforms`, `transformerregistrations`).
    pub webhook: &'static str,
    /// `allowed`, `denied`, `error` or `timeout`.
    pub result: &'static str,
}

/// Labels of `opm_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

/// Latency buckets in seconds, dense below 10 ms where a healthy webhook lives.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The `result` label values of the review series, in [`ReviewResult`] order.
const REVIEW_RESULTS: [&str; 4] = ["allowed", "denied", "error", "timeout"];

/// The outcome of one admission review (the `result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewResult {
    /// Allowed (possibly with warnings).
    Allowed = 0,
    /// Denied by a rule.
    Denied = 1,
    /// The body could not be judged.
    Error = 2,
    /// The evaluation permit did not arrive in time.
    Timeout = 3,
}

/// The counter and histogram of one (webhook, result) pair, resolved once at start so a review
/// does no label lookup.
#[derive(Clone, Debug)]
pub struct ReviewHandles {
    /// `admission_reviews_total` of the pair.
    pub count: Counter,
    /// `admission_review_duration_seconds` of the pair.
    pub duration: Histogram,
}

/// The server's metric families and registry.
pub struct Metrics {
    registry: Registry,
    /// HTTP requests.
    pub http_requests: Family<HttpLabels, Counter>,
    /// HTTP request latency.
    pub http_duration: Family<HttpLabels, Histogram, fn() -> Histogram>,
    /// Admission reviews.
    pub reviews: Family<ReviewLabels, Counter>,
    /// Admission review latency.
    pub review_duration: Family<ReviewLabels, Histogram, fn() -> Histogram>,
    /// Reviews in flight.
    pub in_flight: Gauge,
    /// HTTP requests in flight per listener.
    pub http_in_flight: Family<ListenerLabels, Gauge>,
    /// Pre-resolved review series, indexed by webhook (in `WebhookKind::ALL` order) then result.
    review_handles: Vec<[ReviewHandles; 4]>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct CertCollector(Arc<certs::CertStore>);

impl prometheus_client::collector::Collector for CertCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = self.0.metrics();
        let mut family = encoder.encode_descriptor(
            "cert_reload",
            "TLS certificate reloads by result",
            None,
            MetricType::Counter,
        )?;
        for (result, value) in [
            ("success", m.reload_success()),
            ("failure", m.reload_failure()),
        ] {
            let labels = [("result", result)];
            ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
        }
        let gauge = encoder.encode_descriptor(
            "cert_not_after_seconds",
            "notAfter of the served TLS certificate, seconds since the Unix epoch",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(m.not_after_seconds()).encode(gauge)?;
        Ok(())
    }
}

impl Metrics {
    /// Registers every family; `certs` adds the certificate series.
    pub fn new(certs: Option<Arc<certs::CertStore>>) -> Self {
        Self::new_with(certs, |_| {})
    }

    /// Like [`Metrics::new`], then lets `register` add further families (the controllers') to the
    /// registry `/metrics` serves.
    pub fn new_with(
        certs: Option<Arc<certs::CertStore>>,
        register: impl FnOnce(&mut Registry),
    ) -> Self {
        let mut registry = Registry::default();
        let http_requests = Family::<HttpLabels, Counter>::default();
        let http_duration =
            Family::<HttpLabels, Histogram, fn() -> Histogram>::new_with_constructor(histogram);
        let reviews = Family::<ReviewLabels, Counter>::default();
        let review_duration =
            Family::<ReviewLabels, Histogram, fn() -> Histogram>::new_with_constructor(histogram);
        let in_flight = Gauge::default();
        let http_in_flight = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "http_requests_in_flight",
            "HTTP requests being served, by listener",
            http_in_flight.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests by listener, route, method and status",
            http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency in seconds",
            http_duration.clone(),
        );
        registry.register(
            "admission_reviews",
            "AdmissionReviews by webhook and result",
            reviews.clone(),
        );
        registry.register(
            "admission_review_duration_seconds",
            "AdmissionReview latency in seconds (parse + evaluation)",
            review_duration.clone(),
        );
        registry.register(
            "admission_reviews_in_flight",
            "AdmissionReviews holding or waiting for an evaluation permit",
            in_flight.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: crate::GIT_COMMIT,
            })
            .set(1);
        registry.register(
            "opm_build_info",
            "The binary's version and git commit (always 1)",
            build_info,
        );
        if let Some(store) = certs {
            registry.register_collector(Box::new(CertCollector(store)));
        }
        register(&mut registry);
        let review_handles = webhooks::WebhookKind::ALL
            .iter()
            .map(|kind| {
                REVIEW_RESULTS.map(|result| {
                    let labels = ReviewLabels {
                        webhook: kind.plural(),
                        result,
                    };
                    ReviewHandles {
                        count: reviews.get_or_create(&labels).clone(),
                        duration: review_duration.get_or_create(&labels).clone(),
                    }
                })
            })
            .collect();
        Metrics {
            registry,
            http_requests,
            http_duration,
            reviews,
            review_duration,
            in_flight,
            http_in_flight,
            review_handles,
        }
    }

    /// The pre-resolved series of `kind`'s reviews with `result` (`None` only for a webhook kind
    /// missing from `WebhookKind::ALL`, which cannot be built).
    pub fn review(
        &self,
        kind: webhooks::WebhookKind,
        result: ReviewResult,
    ) -> Option<&ReviewHandles> {
        let index = webhooks::WebhookKind::ALL.iter().position(|k| *k == kind)?;
        self.review_handles
            .get(index)
            .map(|handles| &handles[result as usize])
    }

    /// The exposition in Prometheus text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_the_series() {
        let m = Metrics::new(None);
        m.reviews
            .get_or_create(&ReviewLabels {
                webhook: "platforms",
                result: "allowed",
            })
            .inc();
        let text = m.encode().unwrap();
        assert!(
            text.contains(r#"admission_reviews_total{webhook="platforms",result="allowed"} 1"#),
            "{text}"
        );
        assert!(
            !text.contains("# EOF"),
            "Prometheus text, not OpenMetrics: {text}"
        );
    }
}
