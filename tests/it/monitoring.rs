//! `deploy/monitoring/` against what the operator exports (issue 39 item 4): every metric an
//! alert expression or a dashboard query selects is exported, with every label the query matches
//! on, groups by, or prints (an alert's `{{ $labels.x }}`, a panel's `{{x}}` legend).
//!
//! The operator runs as `opm-operator dev` (exactly what `serve` runs, with an embedded cluster):
//! the example instance reconciles to Ready, a Platform edit goes through the admission webhook
//! (and is denied), the render API renders once; then `/metrics` is scraped and each query of
//! `prometheusrule.yaml` and `dashboard.json` is parsed (PromQL, `promql-parser`) and checked.
//!
//! Label flow through an expression (what the output of a query can carry): a selector carries
//! its metric's labels; `rate`/`increase`/… keep them; `histogram_quantile` drops `le` (which its
//! input must have); `sum by (l)` keeps `l` (which its input must have), `sum` keeps none, `topk`
//! keeps all; a binary operation keeps the vector side's (the left one when both are vectors).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(
    clippy::disallowed_methods,
    reason = "a synchronous test polling a child process (no runtime to yield to)"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use promql_parser::parser::{self, Expr, LabelModifier};

use crate::dev::{line, ok, Dev};
use crate::kubectls::{self, Version};

/// Sample names of an exposition → the union of their label names.
type Exposition = BTreeMap<String, BTreeSet<String>>;

/// Parses the Prometheus text format (sample lines only).
fn exposition(text: &str) -> Exposition {
    let mut out = Exposition::new();
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, labels) = match l.find('{') {
            Some(i) => {
                let end = l.rfind('}').unwrap();
                (&l[..i], &l[i + 1..end])
            }
            None => (l.split_whitespace().next().unwrap(), ""),
        };
        let entry = out.entry(name.to_owned()).or_default();
        // Label values here never contain `",` (names, kinds, statuses, routes).
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let key = pair.split('=').next().unwrap().trim();
            entry.insert(key.to_owned());
        }
    }
    out
}

/// One query to check: where it comes from, the PromQL, the labels its text prints.
struct Query {
    origin: String,
    expr: String,
    printed: Vec<String>,
}

/// The `{{x}}` / `{{ $labels.x }}` label names of a template.
fn printed_labels(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        let Some(j) = rest[i..].find("}}") else { break };
        let inner = rest[i + 2..i + j].trim();
        let name = inner.strip_prefix("$labels.").unwrap_or(inner);
        if !name.starts_with('$') && !name.contains(' ') && !name.contains('|') {
            out.push(name.to_owned());
        }
        rest = &rest[i + j + 2..];
    }
    out
}

/// Grafana's variables, replaced by what they expand to in a real query.
fn expand_grafana(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$namespace", ".*")
}

/// The queries of the PrometheusRule.
fn rule_queries(text: &str) -> Vec<Query> {
    let doc: serde_json::Value = crds::yaml::from_str(text).unwrap();
    let mut out = Vec::new();
    for group in doc["spec"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["alert"].as_str().or(rule["record"].as_str()).unwrap();
            let mut printed = Vec::new();
            if let Some(a) = rule["annotations"].as_object() {
                for v in a.values() {
                    printed.extend(printed_labels(v.as_str().unwrap()));
                }
            }
            out.push(Query {
                origin: format!("alert {name}"),
                expr: rule["expr"].as_str().unwrap().to_owned(),
                printed,
            });
        }
    }
    out
}

/// The queries of the dashboard: every panel target and the `label_values` variables (as a
/// selector of the metric and the label).
fn dashboard_queries(text: &str) -> Vec<Query> {
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut out = Vec::new();
    for panel in doc["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        for t in panel["targets"].as_array().unwrap() {
            out.push(Query {
                origin: format!("panel {title:?}"),
                expr: expand_grafana(t["expr"].as_str().unwrap()),
                printed: printed_labels(t["legendFormat"].as_str().unwrap_or("")),
            });
        }
    }
    for v in doc["templating"]["list"].as_array().unwrap() {
        let Some(q) = v["definition"].as_str() else {
            continue;
        };
        let args = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable query {q:?} is not label_values(metric, label)"));
        let (metric, label) = args.split_once(',').unwrap();
        out.push(Query {
            origin: format!("variable {}", v["name"]),
            expr: metric.trim().to_owned(),
            printed: vec![label.trim().to_owned()],
        });
    }
    out
}

/// The labels the output of `e` can carry; problems with what `e` selects go to `problems`.
fn output_labels(e: &Expr, expo: &Exposition, problems: &mut Vec<String>) -> BTreeSet<String> {
    match e {
        Expr::VectorSelector(vs) => selector(vs, expo, problems),
        Expr::MatrixSelector(ms) => selector(&ms.vs, expo, problems),
        Expr::Paren(p) => output_labels(&p.expr, expo, problems),
        Expr::Unary(u) => output_labels(&u.expr, expo, problems),
        Expr::Subquery(s) => output_labels(&s.expr, expo, problems),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => BTreeSet::new(),
        Expr::Aggregate(a) => {
            let inner = output_labels(&a.expr, expo, problems);
            match &a.modifier {
                Some(LabelModifier::Include(by)) => {
                    for l in &by.labels {
                        if !inner.contains(l) {
                            problems.push(format!("groups by {l:?}, which its input lacks"));
                        }
                    }
                    by.labels.iter().cloned().collect()
                }
                Some(LabelModifier::Exclude(without)) => inner
                    .into_iter()
                    .filter(|l| !without.labels.contains(l))
                    .collect(),
                None => match a.op.to_string().as_str() {
                    "topk" | "bottomk" | "limitk" => inner,
                    _ => BTreeSet::new(),
                },
            }
        }
        Expr::Call(c) => {
            let mut outs: Vec<BTreeSet<String>> = c
                .args
                .args
                .iter()
                .map(|a| output_labels(a, expo, problems))
                .collect();
            match c.func.name {
                "histogram_quantile" => {
                    let mut inner = outs.pop().unwrap_or_default();
                    if !inner.remove("le") {
                        problems.push("histogram_quantile over series without `le`".into());
                    }
                    inner
                }
                "absent" | "absent_over_time" | "time" | "vector" | "scalar" => BTreeSet::new(),
                _ => outs.into_iter().next().unwrap_or_default(),
            }
        }
        Expr::Binary(b) => {
            let lhs = output_labels(&b.lhs, expo, problems);
            let rhs = output_labels(&b.rhs, expo, problems);
            if let Some(m) = b.modifier.as_ref().and_then(|m| m.matching.as_ref()) {
                for l in &m.labels().labels {
                    if !lhs.contains(l) || !rhs.contains(l) {
                        problems.push(format!("matches on {l:?}, which a side lacks"));
                    }
                }
            }
            if is_scalar(&b.lhs) {
                rhs
            } else {
                lhs
            }
        }
    }
}

fn is_scalar(e: &Expr) -> bool {
    match e {
        Expr::NumberLiteral(_) => true,
        Expr::Paren(p) => is_scalar(&p.expr),
        Expr::Call(c) => matches!(c.func.name, "time" | "scalar"),
        Expr::Binary(b) => is_scalar(&b.lhs) && is_scalar(&b.rhs),
        _ => false,
    }
}

fn selector(
    vs: &promql_parser::parser::VectorSelector,
    expo: &Exposition,
    problems: &mut Vec<String>,
) -> BTreeSet<String> {
    let name = vs.name.clone().or_else(|| {
        vs.matchers
            .matchers
            .iter()
            .find(|m| m.name == "__name__")
            .map(|m| m.value.clone())
    });
    let Some(name) = name else {
        problems.push("a selector without a metric name".into());
        return BTreeSet::new();
    };
    let Some(labels) = expo.get(&name) else {
        problems.push(format!("metric {name} is not exported"));
        return BTreeSet::new();
    };
    let matchers = vs
        .matchers
        .matchers
        .iter()
        .chain(vs.matchers.or_matchers.iter().flatten());
    for m in matchers.filter(|m| m.name != "__name__") {
        if !labels.contains(&m.name) {
            problems.push(format!("metric {name} has no label {:?}", m.name));
        }
    }
    labels.clone()
}

/// Every problem of `queries` against `expo`, each naming its query.
fn problems(queries: &[Query], expo: &Exposition) -> Vec<String> {
    let mut out = Vec::new();
    for q in queries {
        let mut found = Vec::new();
        match parser::parse(&q.expr) {
            Err(e) => found.push(format!("does not parse: {e}")),
            Ok(e) => {
                let labels = output_labels(&e, expo, &mut found);
                for p in &q.printed {
                    if !labels.contains(p) {
                        found.push(format!("prints label {p:?}, which its result lacks"));
                    }
                }
            }
        }
        out.extend(
            found
                .into_iter()
                .map(|p| format!("{}: {p} (in {})", q.origin, q.expr.trim())),
        );
    }
    out
}

fn monitoring_file(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/monitoring")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_checker_finds_a_missing_metric_a_missing_label_and_a_lost_label() {
    let expo = exposition(
        "# TYPE x counter\nx_total{kind=\"A\",outcome=\"ok\"} 1\n\
         h_bucket{kind=\"A\",le=\"0.1\"} 1\nh_bucket{kind=\"A\",le=\"+Inf\"} 1\n",
    );
    let q = |expr: &str, printed: &[&str]| Query {
        origin: "test".into(),
        expr: expr.into(),
        printed: printed.iter().map(|s| s.to_string()).collect(),
    };
    let good = [
        q(
            "sum by (kind) (rate(x_total{outcome=~\"o.*\"}[5m])) > 0",
            &["kind"],
        ),
        q(
            "histogram_quantile(0.99, sum by (le, kind) (rate(h_bucket[5m])))",
            &["kind"],
        ),
        q("topk(3, x_total)", &["outcome"]),
    ];
    assert_eq!(problems(&good, &expo), Vec::<String>::new());
    let bad = [
        q("rate(y_total[5m])", &[]),
        q("x_total{namespace=\"a\"}", &[]),
        q("sum(x_total)", &["kind"]),
        q("sum by (name) (x_total)", &[]),
        q(
            "histogram_quantile(0.9, sum by (kind) (rate(h_bucket[5m])))",
            &[],
        ),
        q("sum(x_total", &[]),
    ];
    let found = problems(&bad, &expo);
    for needle in [
        "metric y_total is not exported",
        "metric x_total has no label \"namespace\"",
        "prints label \"kind\", which its result lacks",
        "groups by \"name\", which its input lacks",
        "histogram_quantile over series without `le`",
        "does not parse",
    ] {
        assert!(
            found.iter().any(|p| p.contains(needle)),
            "{needle:?} not in {found:#?}"
        );
    }
}

#[test]
fn every_alert_and_dashboard_query_selects_exported_metrics_and_labels() {
    let rules = rule_queries(&monitoring_file("prometheusrule.yaml"));
    let panels = dashboard_queries(&monitoring_file("dashboard.json"));
    assert!(rules.len() >= 8, "{} alerts", rules.len());
    assert!(panels.len() >= 15, "{} dashboard queries", panels.len());

    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let path = kubectls::path_with(&kubectls::path_dir(Version::V1_37, tmp.path()));
    let mut dev = Dev::start(&state);
    let summary = dev.summary();
    // Reconciles: the example instance (and the Platform) become Ready.
    ok(
        &path,
        line(
            &summary,
            &["kubectl wait --for=condition=Ready", "mi/hello"],
        ),
    );
    // A webhook call: a Platform edit only our webhook refuses.
    let kubeconfig = state.join("kubeconfig");
    let denied = std::process::Command::new(kubectls::bin(Version::V1_37))
        .env("KUBECONFIG", &kubeconfig)
        .args([
            "patch",
            "platform",
            "cluster",
            "--type=merge",
            "-p",
            r#"{"spec":{"type":" kubernetes"}}"#,
        ])
        .output()
        .unwrap();
    assert!(!denied.status.success());
    // A render through the API.
    ok(&path, line(&summary, &["curl --cacert", "/render"]));

    let url = line(&summary, &["metrics", "/metrics"])
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = ok(&path, &format!("curl -sf {url}"));
        let seen = [
            "opm_controller_ready{kind=\"ModuleInstance\"",
            "opm_render_total{caller=\"api\"",
            "opm_render_total{caller=\"reconcile\"",
            "admission_reviews_total{webhook=\"platforms\",result=\"denied\"} 1",
        ]
        .iter()
        .all(|s| text.contains(s));
        if seen {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never showed the drive:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let expo = exposition(&text);
    let found = problems(&rules.into_iter().chain(panels).collect::<Vec<_>>(), &expo);
    assert!(
        found.is_empty(),
        "queries that select what the operator does not export:\n{}\n\nexposition:\n{text}",
        found.join("\n")
    );
}
