//! Custom health checks in CEL (`spec.healthCheckExprs`; Flux 2.5's kustomize-controller
//! `healthCheckExprs`, fluxcd/pkg `runtime/cel`), evaluated with the `cel` crate.
//!
//! Rules:
//! - An entry `{apiVersion, kind, current, inProgress?, failed?}` judges every live object of
//!   that **group and kind** (the version of `apiVersion` is not compared, as in Flux), instead
//!   of the built-in kstatus rules of [`super::assess`]. Two entries for one group and kind are
//!   refused, as is an empty `current`.
//! - The expressions see the live object as `self`, and each of its top-level fields by name
//!   (`metadata`, `spec`, `status`, …), so Flux's expressions (`status.conditions.filter(…)`)
//!   work unchanged. The standard macros (`has`, `all`, `exists`, `exists_one`, `map`,
//!   `filter`), optional fields (`status.?conditions.orValue([])`), the strings extension,
//!   `matches` (regular expressions) and `base64.encode/decode` are available; CEL's `sets`
//!   extension and timestamps are not.
//! - Evaluation ([`HealthRules::assess`]), as Flux's status evaluator: an object being deleted
//!   is in progress (terminating); an object whose integer `status.observedGeneration` differs
//!   from `metadata.generation` is in progress; then `inProgress` (true → in progress), `failed`
//!   (true → Failed), `current` (true → Current), in that order, the first that holds deciding;
//!   none holds → in progress. An expression that does not evaluate to a boolean, or fails (a
//!   missing field, a type error), makes the object Failed with the entry and the expression
//!   named (Flux waits on such an error until its timeout; here it is reported at once, so the
//!   fix — `has(…)` or `.?field` — is plain; it is re-evaluated at every health check, so an
//!   object whose status fills in later recovers by itself).
//! - Expressions are compiled once per spec: [`RulesCache`] keeps each object's compiled rules
//!   with the generation they were compiled at ([`HealthRules::compile`] refuses an expression
//!   that does not parse, naming the entry, the field and the expression: the reconciler stalls
//!   `HealthCheckExprInvalid`). Objects with no entries cost nothing (no lock, no allocation).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ::cel::{Context, Env, Program, Value as CelValue};
use crds::custom_health::HealthCheckExpr;
use serde_json::Value;

use super::Health;
use crate::apply::error::Error;
use crate::apply::object::split_api_version;

/// One compiled expression.
#[derive(Debug)]
struct Expr {
    /// `healthCheckExprs[i].current` (for messages).
    at: String,
    source: String,
    program: Program,
}

/// The compiled expressions of one group and kind.
#[derive(Debug)]
struct Check {
    group: String,
    kind: String,
    in_progress: Option<Expr>,
    failed: Option<Expr>,
    current: Expr,
}

/// The compiled `healthCheckExprs` of one object (module rules).
#[derive(Debug, Default)]
pub struct HealthRules {
    checks: Vec<Check>,
}

/// The CEL environment every expression compiles and runs in (built once).
fn env() -> Result<Arc<Env>, String> {
    static ENV: OnceLock<Result<Arc<Env>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(::cel::extensions::strings)
            .map_err(|e| e.to_string())?;
        env.add_extension(::cel::extensions::encoders)
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(env))
    })
    .clone()
}

/// The first line of a CEL parse error, without the `ERROR: <input>:` prefix.
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default().trim();
    line.strip_prefix("ERROR: <input>:")
        .unwrap_or(line)
        .trim()
        .to_owned()
}

fn compile(env: &Env, at: String, source: &str) -> Result<Expr, Error> {
    let invalid = |message: String| Error::HealthCheckExpr {
        at: at.clone(),
        expression: source.to_owned(),
        message,
    };
    if source.trim().is_empty() {
        return Err(invalid("the expression is empty".to_owned()));
    }
    let program = env
        .compile(source)
        .map_err(|e| invalid(first_line(&e.to_string())))?;
    Ok(Expr {
        at,
        source: source.to_owned(),
        program,
    })
}

impl HealthRules {
    /// Compiles `exprs` (module rules); the error names the first bad entry.
    pub fn compile(exprs: &[HealthCheckExpr]) -> Result<HealthRules, Error> {
        if exprs.is_empty() {
            return Ok(HealthRules::default());
        }
        let env = env().map_err(|message| Error::HealthCheckExpr {
            at: "healthCheckExprs".to_owned(),
            expression: String::new(),
            message,
        })?;
        let mut checks: Vec<Check> = Vec::with_capacity(exprs.len());
        for (i, e) in exprs.iter().enumerate() {
            let at = |field: &str| format!("healthCheckExprs[{i}].{field}");
            let (group, _) = split_api_version(&e.api_version);
            if let Some(j) = checks
                .iter()
                .position(|c| c.group == group && c.kind == e.kind)
            {
                return Err(Error::HealthCheckExpr {
                    at: format!("healthCheckExprs[{i}]"),
                    expression: String::new(),
                    message: format!(
                        "{} {} is already judged by healthCheckExprs[{j}]",
                        e.api_version, e.kind
                    ),
                });
            }
            let optional = |field: &str, source: &Option<String>| {
                source
                    .as_deref()
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| compile(&env, at(field), s))
                    .transpose()
            };
            checks.push(Check {
                group,
                kind: e.kind.clone(),
                in_progress: optional("inProgress", &e.in_progress)?,
                failed: optional("failed", &e.failed)?,
                current: compile(&env, at("current"), &e.current)?,
            });
        }
        Ok(HealthRules { checks })
    }

    /// Whether no kind has custom expressions.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// Whether objects of `api_version` and `kind` are judged by these rules.
    pub fn judges(&self, api_version: &str, kind: &str) -> bool {
        self.check_for(api_version, kind).is_some()
    }

    fn check_for(&self, api_version: &str, kind: &str) -> Option<&Check> {
        if self.checks.is_empty() {
            return None;
        }
        let (group, _) = split_api_version(api_version);
        self.checks
            .iter()
            .find(|c| c.kind == kind && c.group == group)
    }

    /// The health of the live object `o` when these rules judge its kind (module rules), else
    /// `None` (the built-in kstatus rules apply).
    pub fn assess(&self, o: &Value) -> Option<Health> {
        let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or_default();
        let check = self.check_for(s("apiVersion"), s("kind"))?;
        if o.pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return Some(Health::InProgress("terminating".into()));
        }
        if let (Some(observed), Some(generation)) = (
            o.pointer("/status/observedGeneration")
                .and_then(Value::as_i64),
            o.pointer("/metadata/generation").and_then(Value::as_i64),
        ) {
            if observed != generation {
                return Some(Health::InProgress(format!(
                    "observedGeneration {observed} behind generation {generation}"
                )));
            }
        }
        Some(check.evaluate(o))
    }
}

impl Check {
    fn evaluate(&self, o: &Value) -> Health {
        let Ok(env) = env() else {
            return Health::Failed("the CEL environment is unavailable".into());
        };
        let mut ctx = Context::with_env(env);
        if let Err(e) = bind(&mut ctx, o) {
            return Health::Failed(format!("cannot evaluate {}: {e}", self.current.at));
        }
        let optional = [
            (&self.in_progress, Outcome::InProgress),
            (&self.failed, Outcome::Failed),
        ];
        for (expr, outcome) in optional {
            if let Some(expr) = expr {
                match expr.holds(&ctx) {
                    Ok(true) => return outcome.health(expr),
                    Ok(false) => {}
                    Err(message) => return Health::Failed(message),
                }
            }
        }
        match self.current.holds(&ctx) {
            Ok(true) => Health::Current,
            Ok(false) => Health::InProgress(format!("{} is not yet true", self.current.at)),
            Err(message) => Health::Failed(message),
        }
    }
}

/// What an optional expression that holds says.
#[derive(Clone, Copy)]
enum Outcome {
    InProgress,
    Failed,
}

impl Outcome {
    fn health(self, expr: &Expr) -> Health {
        match self {
            Outcome::InProgress => Health::InProgress(format!("{} is true", expr.at)),
            Outcome::Failed => Health::Failed(format!("{} is true", expr.at)),
        }
    }
}

/// Binds `self` and the top-level fields of `o` (module rules).
fn bind(ctx: &mut Context<'_, '_>, o: &Value) -> Result<(), String> {
    let value = ::cel::to_value(o).map_err(|e| e.to_string())?;
    if let (Value::Object(fields), CelValue::Map(_)) = (o, &value) {
        for (k, v) in fields {
            if k == "self" {
                continue;
            }
            let v = ::cel::to_value(v).map_err(|e| e.to_string())?;
            ctx.add_variable(k.as_str(), v).map_err(|e| e.to_string())?;
        }
    }
    ctx.add_variable("self", value).map_err(|e| e.to_string())?;
    Ok(())
}

impl Expr {
    /// Whether the expression holds for the bound object; `Err`: the message naming it.
    fn holds(&self, ctx: &Context<'_, '_>) -> Result<bool, String> {
        match self.program.execute(ctx) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "{} `{}` evaluated to {}, not a boolean",
                self.at,
                self.source,
                type_name(&other)
            )),
            Err(e) => Err(format!("{} `{}` failed: {e}", self.at, self.source)),
        }
    }
}

fn type_name(v: &CelValue) -> &'static str {
    match v {
        CelValue::Int(_) => "an int",
        CelValue::UInt(_) => "a uint",
        CelValue::Float(_) => "a double",
        CelValue::String(_) => "a string",
        CelValue::Bytes(_) => "bytes",
        CelValue::List(_) => "a list",
        CelValue::Map(_) => "a map",
        CelValue::Null => "null",
        _ => "a value of another type",
    }
}

/// An object's compiled rules and the generation they were compiled at.
type Compiled = (Option<i64>, Arc<HealthRules>);

/// Compiled rules per object, with the generation they were compiled at (module rules).
#[derive(Debug, Default)]
pub struct RulesCache {
    rules: Mutex<HashMap<String, Compiled>>,
    /// How many objects have rules (read without the lock: an empty cache costs nothing).
    count: AtomicUsize,
}

impl RulesCache {
    /// The rules of the object `key` at `generation`, compiled from `exprs` unless the cache
    /// holds them for that generation; `None` when `exprs` is empty (and the key is forgotten).
    pub fn rules(
        &self,
        key: &str,
        generation: Option<i64>,
        exprs: &[HealthCheckExpr],
    ) -> Result<Option<Arc<HealthRules>>, Error> {
        if exprs.is_empty() {
            self.forget(key);
            return Ok(None);
        }
        let mut map = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((g, rules)) = map.get(key) {
            if *g == generation && generation.is_some() {
                return Ok(Some(rules.clone()));
            }
        }
        let rules = Arc::new(HealthRules::compile(exprs)?);
        map.insert(key.to_owned(), (generation, rules.clone()));
        self.count.store(map.len(), Ordering::Relaxed);
        Ok(Some(rules))
    }

    /// Forgets what was compiled for `key` (the object is gone or has no expressions); no lock
    /// is taken while the cache is empty.
    pub fn forget(&self, key: &str) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut map = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(key);
        self.count.store(map.len(), Ordering::Relaxed);
    }

    /// How many objects have compiled rules.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether no object has compiled rules.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn certificate_rule() -> HealthCheckExpr {
        HealthCheckExpr {
            api_version: "cert-manager.io/v1".into(),
            kind: "Certificate".into(),
            current: "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')"
                .into(),
            in_progress: Some(
                "status.?conditions.orValue([]).exists(e, e.type == 'Issuing' && e.status == 'True')"
                    .into(),
            ),
            failed: Some(
                "self.status.conditions.exists(e, e.type == 'Ready' && e.status == 'False' && e.reason == 'Failed')"
                    .into(),
            ),
        }
    }

    fn certificate(conditions: Value) -> Value {
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "web", "namespace": "n", "generation": 2},
               "status": {"observedGeneration": 2, "conditions": conditions}})
    }

    #[test]
    fn in_progress_then_failed_then_current_decide_in_that_order() {
        let rules = HealthRules::compile(&[certificate_rule()]).unwrap();
        let ready = certificate(json!([{"type": "Ready", "status": "True"}]));
        assert_eq!(rules.assess(&ready), Some(Health::Current));
        let failed = certificate(json!([{"type": "Ready", "status": "False", "reason": "Failed"}]));
        assert_eq!(
            rules.assess(&failed),
            Some(Health::Failed("healthCheckExprs[0].failed is true".into()))
        );
        // inProgress is evaluated first: it wins over a failed Ready.
        let issuing = certificate(json!([
            {"type": "Ready", "status": "False", "reason": "Failed"},
            {"type": "Issuing", "status": "True"}
        ]));
        assert_eq!(
            rules.assess(&issuing),
            Some(Health::InProgress(
                "healthCheckExprs[0].inProgress is true".into()
            ))
        );
        // None holds: in progress.
        let pending =
            certificate(json!([{"type": "Ready", "status": "False", "reason": "Pending"}]));
        assert_eq!(
            rules.assess(&pending),
            Some(Health::InProgress(
                "healthCheckExprs[0].current is not yet true".into()
            ))
        );
    }

    #[test]
    fn generation_and_deletion_come_before_the_expressions() {
        let rules = HealthRules::compile(&[certificate_rule()]).unwrap();
        let mut behind = certificate(json!([{"type": "Ready", "status": "True"}]));
        behind["metadata"]["generation"] = json!(3);
        assert!(
            matches!(rules.assess(&behind), Some(Health::InProgress(m)) if m.contains("behind"))
        );
        let mut deleting = certificate(json!([{"type": "Ready", "status": "True"}]));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            rules.assess(&deleting),
            Some(Health::InProgress("terminating".into()))
        );
    }

    #[test]
    fn only_the_group_and_kind_select_and_other_kinds_keep_kstatus() {
        let rules = HealthRules::compile(&[certificate_rule()]).unwrap();
        assert!(rules.judges("cert-manager.io/v1beta1", "Certificate"));
        assert!(!rules.judges("cert-manager.io/v1", "Issuer"));
        assert!(!rules.judges("other.io/v1", "Certificate"));
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(rules.assess(&cm), None);
        assert!(HealthRules::compile(&[]).unwrap().is_empty());
    }

    #[test]
    fn an_evaluation_error_or_a_non_boolean_is_a_failure_naming_the_expression() {
        let rule = HealthCheckExpr {
            current: "self.status.phase == 'Ready'".into(),
            in_progress: None,
            failed: Some("size(metadata.name)".into()),
            ..certificate_rule()
        };
        let rules = HealthRules::compile(std::slice::from_ref(&rule)).unwrap();
        let Some(Health::Failed(m)) = rules.assess(&certificate(json!([]))) else {
            panic!("not failed")
        };
        assert_eq!(
            m,
            "healthCheckExprs[0].failed `size(metadata.name)` evaluated to an int, not a boolean"
        );
        let rules = HealthRules::compile(&[HealthCheckExpr {
            failed: None,
            ..rule
        }])
        .unwrap();
        let Some(Health::Failed(m)) = rules.assess(&certificate(json!([]))) else {
            panic!("not failed")
        };
        assert!(
            m.starts_with("healthCheckExprs[0].current `self.status.phase == 'Ready'` failed: ")
                && m.contains("phase"),
            "{m}"
        );
    }

    #[test]
    fn bad_expressions_and_duplicate_kinds_are_refused_naming_the_entry() {
        let bad = HealthCheckExpr {
            failed: Some("status.conditions.exists(e, ".into()),
            ..certificate_rule()
        };
        let e = HealthRules::compile(&[bad]).unwrap_err().to_string();
        assert!(
            e.starts_with("healthCheckExprs[0].failed: invalid CEL expression `status.conditions.exists(e, `: "),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        let empty = HealthCheckExpr {
            current: " ".into(),
            ..certificate_rule()
        };
        assert!(HealthRules::compile(&[empty])
            .unwrap_err()
            .to_string()
            .contains("the expression is empty"));
        let twice = HealthRules::compile(&[
            certificate_rule(),
            HealthCheckExpr {
                api_version: "cert-manager.io/v1beta1".into(),
                ..certificate_rule()
            },
        ])
        .unwrap_err()
        .to_string();
        assert!(
            twice.contains("healthCheckExprs[1]") && twice.contains("healthCheckExprs[0]"),
            "{twice}"
        );
    }

    #[test]
    fn the_cache_compiles_once_per_generation_and_forgets() {
        let cache = RulesCache::default();
        let exprs = [certificate_rule()];
        let a = cache.rules("MI/n/a", Some(1), &exprs).unwrap().unwrap();
        let again = cache.rules("MI/n/a", Some(1), &exprs).unwrap().unwrap();
        assert!(
            Arc::ptr_eq(&a, &again),
            "same generation: not compiled again"
        );
        let next = cache.rules("MI/n/a", Some(2), &exprs).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&a, &next), "a new generation compiles again");
        assert_eq!(cache.len(), 1);
        assert!(cache.rules("MI/n/a", Some(3), &[]).unwrap().is_none());
        assert!(cache.is_empty());
    }
}
