//! Request-fault injection: "fail the next N requests that match a filter" (test-only behaviour,
//! off unless a rule is installed through `Emulator::inject_fault`).
//!
//! Rules:
//! - A [`FaultRule`] matches a request by HTTP method (any when `None`), by a substring of the
//!   request path (any when `None`) and by dry-run-ness (`dryRun=All` in the query; any when
//!   `None`). Matching happens before authentication and routing, so a faulted request never
//!   reaches the store: nothing it would have written is written.
//! - Each rule answers its next `count` matching requests with its [`FaultKind`] (a `Status`
//!   500 `InternalError` or 409 `Conflict`, as the apiserver would send them), then retires.
//!   Rules are checked in installation order; the first live matching rule answers.
//! - Every faulted request is counted (`Emulator::faults_fired`), so tests can prove the fault
//!   actually happened; every request at all is counted too (`Emulator::requests_served`, for
//!   request-cost benchmarks).

use http::Method;
use parking_lot::Mutex;

use crate::api_error::ApiError;

/// The error a fault answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// 500 `InternalError`.
    Internal,
    /// 409 `Conflict` (a stale-resourceVersion style conflict, no field causes).
    Conflict,
}

/// Which requests a fault applies to, and how many times.
#[derive(Debug, Clone)]
pub struct FaultRule {
    /// HTTP method (`GET`, `PATCH`, ...); `None` matches every method.
    pub method: Option<Method>,
    /// A substring the request path must contain (e.g. `/configmaps/`); `None` matches all.
    pub path_contains: Option<String>,
    /// `Some(true)` only dry-run requests, `Some(false)` only real ones, `None` both.
    pub dry_run: Option<bool>,
    /// How many matching requests fail.
    pub count: usize,
    /// The answer.
    pub kind: FaultKind,
}

impl FaultRule {
    /// Fails the next `count` requests of any kind with `kind`.
    pub fn any(count: usize, kind: FaultKind) -> Self {
        FaultRule {
            method: None,
            path_contains: None,
            dry_run: None,
            count,
            kind,
        }
    }

    /// Restricts the rule to one method.
    pub fn method(mut self, m: Method) -> Self {
        self.method = Some(m);
        self
    }

    /// Restricts the rule to paths containing `s`.
    pub fn path_contains(mut self, s: &str) -> Self {
        self.path_contains = Some(s.to_string());
        self
    }

    /// Restricts the rule to dry-run (`true`) or real (`false`) requests.
    pub fn dry_run(mut self, d: bool) -> Self {
        self.dry_run = Some(d);
        self
    }

    fn matches(&self, method: &Method, path: &str, dry_run: bool) -> bool {
        self.count > 0
            && self.method.as_ref().is_none_or(|m| m == method)
            && self
                .path_contains
                .as_deref()
                .is_none_or(|s| path.contains(s))
            && self.dry_run.is_none_or(|d| d == dry_run)
    }
}

/// The installed rules, the count of faults fired, and the count of requests seen.
#[derive(Debug, Default)]
pub struct Faults {
    inner: Mutex<(Vec<FaultRule>, usize)>,
    requests: std::sync::atomic::AtomicUsize,
}

impl Faults {
    /// Installs a rule (after the existing ones).
    pub fn add(&self, rule: FaultRule) {
        self.inner.lock().0.push(rule);
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.inner.lock().0.clear();
    }

    /// How many requests have been answered by a fault so far.
    pub fn fired(&self) -> usize {
        self.inner.lock().1
    }

    /// How many requests the server has received (faulted or not).
    pub fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The fault answering this request, if any (consumes one use of the matching rule).
    /// Every call counts one request.
    pub fn check(&self, method: &Method, path: &str, dry_run: bool) -> Option<ApiError> {
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut g = self.inner.lock();
        let (rules, fired) = &mut *g;
        let rule = rules
            .iter_mut()
            .find(|r| r.matches(method, path, dry_run))?;
        rule.count -= 1;
        let kind = rule.kind;
        rules.retain(|r| r.count > 0);
        *fired += 1;
        Some(match kind {
            FaultKind::Internal => ApiError::internal(format!(
                "injected fault: internal error on {method} {path}"
            )),
            FaultKind::Conflict => ApiError::conflict_with(
                format!("injected fault: Operation cannot be fulfilled on {path}: the object has been modified; please apply your changes to the latest version and try again"),
                serde_json::json!({}),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_fires_count_times_then_retires() {
        let f = Faults::default();
        f.add(
            FaultRule::any(2, FaultKind::Internal)
                .method(Method::PATCH)
                .path_contains("/configmaps/"),
        );
        assert!(f
            .check(&Method::GET, "/api/v1/namespaces/a/configmaps/x", false)
            .is_none());
        assert!(f
            .check(&Method::PATCH, "/api/v1/namespaces/a/secrets/x", false)
            .is_none());
        let e = f.check(&Method::PATCH, "/api/v1/namespaces/a/configmaps/x", false);
        assert_eq!(e.map(|e| e.code), Some(500));
        assert!(f
            .check(&Method::PATCH, "/api/v1/namespaces/a/configmaps/y", true)
            .is_some());
        assert!(f
            .check(&Method::PATCH, "/api/v1/namespaces/a/configmaps/y", false)
            .is_none());
        assert_eq!(f.fired(), 2);
    }

    #[test]
    fn dry_run_filter_and_conflict_kind() {
        let f = Faults::default();
        f.add(FaultRule::any(1, FaultKind::Conflict).dry_run(false));
        assert!(f.check(&Method::PATCH, "/x", true).is_none());
        let e = f.check(&Method::PATCH, "/x", false);
        assert_eq!(
            e.as_ref().map(|e| (e.code, e.reason)),
            Some((409, "Conflict"))
        );
        f.add(FaultRule::any(5, FaultKind::Internal));
        f.clear();
        assert!(f.check(&Method::GET, "/x", false).is_none());
    }
}
