//! Matching components to transformers (docs/design/render.md §1.6, docs/design/decisions.md §26), in Rust over the built values.
//!
//! Choice: the matcher runs in Rust over the single render build rather than as CUE glue
//! (experiment 05's matchdef). Reason (docs/design/decisions.md §21): the design left both open, Rust as the fallback;
//! Rust matching keeps every outcome typed (MissingFQN with its alternatives, unify-rung causes,
//! trait postures) without round-tripping diagnostics through CUE data, costs one lookup per
//! contract instead of evaluating a match table per (component × transformer), and leaves only
//! execution to CUE, per matched pair. The inputs are read from the same build the pairs execute
//! in, so the contract copies compared by the unify rung are the same package instances.
//!
//! Rules:
//! - Demands of a component are the keys of `#resources` and `#traits`; its labels are
//!   `matchLabels` (values stringified); `metadata.labels` is never read for matching (docs/design/decisions.md §25).
//! - Buckets: contract FQN → transformers listing it in `requiredResources`, or in
//!   `requiredTraits` ∪ `optionalTraits`.
//! - Rung 1 (lookup): a resource demand with no bucket is unresolved (`MissingFqn`, with the same
//!   contract's other API versions that have a bucket, on the Kubernetes version ladder).
//! - Rung 2 (always-unify): for each FQN a component carries and a transformer requires, the two
//!   bodies are unified and validated non-concretely; a conflict disqualifies the transformer for
//!   that component. Diagnostics located at `metadata.catalogVersion` or `metadata.description`
//!   are ignored (docs/design/decisions.md §27). A verdict is reached once per pair of values
//!   that are the same by construction (`Value::same_sources`: made only of references to the
//!   same definitions), not once per component and transformer.
//! - Rung 3 (predicate): every `requiredLabels` pair is in `matchLabels`, every
//!   `requiredResources` key is in `#resources`, every `requiredTraits` key in `#traits`. Every
//!   satisfied, non-disqualified transformer pairs with the component.
//! - Demand resolution (docs/design/decisions.md §26): a resource demand whose bucket is fully disqualified is unresolved (`Disqualified`,
//!   with the causes). A trait no matched transformer requires or lists as optional is resolved by
//!   its posture, `#traits[fqn].optional` with its default taken: `true` is a warning (values
//!   ignored), `false` is `TraitRequired`, unset is `TraitUnstated`. A component with no pair is
//!   unmatched.

use std::collections::{BTreeMap, BTreeSet};

use cue::path::{Path, Selector};
use cue::{FieldFilter, Value};

use super::error::{Demand, DemandReason};

/// What the matcher needs of one transformer.
#[derive(Debug, Clone)]
pub struct TransformerInfo {
    /// The FQN (its key in the composed map).
    pub fqn: String,
    /// `requiredLabels` as `k → v` strings.
    pub required_labels: BTreeMap<String, String>,
    /// `requiredResources` FQNs.
    pub required_resources: Vec<String>,
    /// `requiredTraits` FQNs.
    pub required_traits: Vec<String>,
    /// `optionalTraits` FQNs.
    pub optional_traits: Vec<String>,
    /// The transformer value (for the unify rung).
    pub value: Value,
}

/// What the matcher needs of one component.
#[derive(Debug, Clone)]
pub struct ComponentInfo {
    /// The component's key in `components`.
    pub name: String,
    /// `#resources` keys.
    pub resources: Vec<String>,
    /// `#traits` keys.
    pub traits: Vec<String>,
    /// `matchLabels`, stringified.
    pub labels: BTreeMap<String, String>,
    /// The component value.
    pub value: Value,
}

/// The matcher's outcome.
#[derive(Debug, Default)]
pub struct Matched {
    /// `(component, transformer FQN)` pairs sorted by component, then FQN.
    pub pairs: Vec<(String, String)>,
    /// Unresolved demands.
    pub demands: Vec<Demand>,
    /// Components with no pair (in component order).
    pub unmatched: Vec<String>,
    /// Warnings (stable text).
    pub warnings: Vec<String>,
    /// Demanded contract FQNs, sorted and unique.
    pub required_contracts: Vec<String>,
}

fn def(name: &str) -> Selector {
    Selector::Definition(name.to_string())
}

fn field(name: &str) -> Selector {
    Selector::Field(name.to_string())
}

/// The regular field names of `v.sel` (empty when absent).
fn keys(v: &Value, sel: Selector) -> Vec<String> {
    match v.lookup_path(&Path::new(vec![sel])) {
        Some(x) => x
            .fields_where(FieldFilter::data())
            .into_iter()
            .filter_map(|f| match f.selector {
                Selector::Field(s) => Some(s),
                _ => None,
            })
            .collect(),
        None => Vec::new(),
    }
}

/// A label map as `k → v` strings (scalars stringified as CUE interpolation does).
fn label_map(v: &Value, sel: Selector) -> BTreeMap<String, String> {
    let Some(x) = v.lookup_path(&Path::new(vec![sel])) else {
        return BTreeMap::new();
    };
    let Ok(serde_json::Value::Object(m)) = x.to_json_value() else {
        return BTreeMap::new();
    };
    m.into_iter()
        .map(|(k, v)| {
            let s = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, s)
        })
        .collect()
}

/// Reads the transformer index from the composed transformers value.
pub fn transformers(composed: &Value) -> Vec<TransformerInfo> {
    composed
        .fields_where(FieldFilter::data())
        .into_iter()
        .filter_map(|f| {
            let Selector::Field(fqn) = f.selector else {
                return None;
            };
            let t = f.value;
            Some(TransformerInfo {
                fqn,
                required_labels: label_map(&t, field("requiredLabels")),
                required_resources: keys(&t, field("requiredResources")),
                required_traits: keys(&t, field("requiredTraits")),
                optional_traits: keys(&t, field("optionalTraits")),
                value: t,
            })
        })
        .collect()
}

/// Reads the components of the instance.
pub fn components(components: &Value) -> Vec<ComponentInfo> {
    components
        .fields_where(FieldFilter::data())
        .into_iter()
        .filter_map(|f| {
            let Selector::Field(name) = f.selector else {
                return None;
            };
            let c = f.value;
            Some(ComponentInfo {
                name,
                resources: keys(&c, def("#resources")),
                traits: keys(&c, def("#traits")),
                labels: label_map(&c, field("matchLabels")),
                value: c,
            })
        })
        .collect()
}

/// The trait's posture: `Some(bool)` when `optional` has a concrete value or default.
fn posture(component: &Value, fqn: &str) -> Option<bool> {
    let p = Path::new(vec![def("#traits"), field(fqn), field("optional")]);
    let v = component.lookup_path(&p)?;
    match v.default().to_json_value() {
        Ok(serde_json::Value::Bool(b)) => Some(b),
        _ => None,
    }
}

/// The verdicts of rung 2 so far, by contract, each with the two values it was reached for.
/// A verdict holds for any two values that are the same values by construction
/// ([`Value::same_sources`]: made only of references to the same definitions). Components
/// and transformers usually hold a contract exactly so (`#resources: [fqn]: #Resource` with
/// `(fqn): #ContainerResource` on the component, `requiredResources: [fqn]: #Resource` with
/// the same `(fqn): #ContainerResource` on every transformer requiring it), so a contract is
/// unified once per render instead of once per component and transformer.
#[derive(Default)]
struct Rung2 {
    /// By (`"resource"` or `"trait"`, contract FQN).
    seen: BTreeMap<(&'static str, String), Vec<Verdict>>,
}

/// A rung-2 verdict with the component's and the transformer's value it was reached for.
struct Verdict {
    component: Value,
    transformer: Value,
    conflict: Option<String>,
}

impl Rung2 {
    /// Rung 2 for one shared contract: `None` when the copies unify, else the first cause.
    fn conflict(
        &mut self,
        component: &Value,
        group: &'static str,
        t: &TransformerInfo,
        fqn: &str,
    ) -> Option<String> {
        let (cgroup, tgroup) = match group {
            "resource" => ("#resources", "requiredResources"),
            _ => ("#traits", "requiredTraits"),
        };
        let c = component.lookup_path(&Path::new(vec![def(cgroup), field(fqn)]))?;
        let r = t
            .value
            .lookup_path(&Path::new(vec![field(tgroup), field(fqn)]))?;
        let known = self.seen.entry((group, fqn.to_string())).or_default();
        if let Some(v) = known
            .iter()
            .find(|v| v.component.same_sources(&c) && v.transformer.same_sources(&r))
        {
            return v.conflict.clone();
        }
        let conflict = unify_conflict(&c, &r);
        known.push(Verdict {
            component: c,
            transformer: r,
            conflict: conflict.clone(),
        });
        conflict
    }
}

/// Rung 2 for one pair of contract values: `None` when they unify, else the first cause.
fn unify_conflict(c: &Value, r: &Value) -> Option<String> {
    // A throw-away evaluation: only the verdict is kept, not the unified copy.
    let diags = match c.check_unify(r, false) {
        Ok(()) => return None,
        Err(d) => d,
    };
    diags
        .into_iter()
        .find(|d| {
            !(d.path.ends_with("metadata.catalogVersion")
                || d.path.ends_with("metadata.description"))
        })
        .map(|d| {
            if d.path.is_empty() {
                d.message
            } else {
                format!("{}: {}", d.path, d.message)
            }
        })
}

/// A sort key on the Kubernetes version ladder: GA before beta before alpha, higher first.
fn ladder_key(fqn: &str) -> (i64, i64, i64, String) {
    let api = fqn.rsplit('@').next().unwrap_or("");
    let rest = api.strip_prefix('v').unwrap_or(api);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse::<i64>().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n.parse::<i64>().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n.parse::<i64>().unwrap_or(0))
    } else {
        (2, 0)
    };
    (-stage, -major, -minor, fqn.to_string())
}

fn contract_base(fqn: &str) -> &str {
    fqn.rsplit_once('@').map_or(fqn, |(b, _)| b)
}

/// Matches every component against the transformers.
pub fn match_all(components: &[ComponentInfo], transformers: &[TransformerInfo]) -> Matched {
    let mut buckets: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, t) in transformers.iter().enumerate() {
        for f in t
            .required_resources
            .iter()
            .chain(&t.required_traits)
            .chain(&t.optional_traits)
        {
            buckets.entry(f.as_str()).or_default().push(i);
        }
    }
    let mut out = Matched::default();
    let mut contracts = BTreeSet::new();
    let mut rung2 = Rung2::default();
    for c in components {
        contracts.extend(c.resources.iter().cloned());
        contracts.extend(c.traits.iter().cloned());
        // Rung 2 per candidate transformer.
        let mut disqualified: BTreeMap<usize, Vec<(String, String)>> = BTreeMap::new();
        for (i, t) in transformers.iter().enumerate() {
            for f in &t.required_resources {
                if c.resources.contains(f) {
                    if let Some(cause) = rung2.conflict(&c.value, "resource", t, f) {
                        disqualified.entry(i).or_default().push((f.clone(), cause));
                    }
                }
            }
            for f in &t.required_traits {
                if c.traits.contains(f) {
                    if let Some(cause) = rung2.conflict(&c.value, "trait", t, f) {
                        disqualified.entry(i).or_default().push((f.clone(), cause));
                    }
                }
            }
        }
        // Rung 3.
        let mut matched: Vec<usize> = Vec::new();
        for (i, t) in transformers.iter().enumerate() {
            if disqualified.contains_key(&i) {
                continue;
            }
            let labels_ok = t
                .required_labels
                .iter()
                .all(|(k, v)| c.labels.get(k) == Some(v));
            let res_ok = t.required_resources.iter().all(|f| c.resources.contains(f));
            let traits_ok = t.required_traits.iter().all(|f| c.traits.contains(f));
            if labels_ok && res_ok && traits_ok {
                matched.push(i);
            }
        }
        // Resource demands (rung 1 and full disqualification, docs/design/decisions.md §26).
        for f in &c.resources {
            let bucket: Vec<usize> = buckets
                .get(f.as_str())
                .map(|b| {
                    b.iter()
                        .copied()
                        .filter(|&i| transformers[i].required_resources.contains(f))
                        .collect()
                })
                .unwrap_or_default();
            if bucket.is_empty() {
                out.demands.push(Demand {
                    component: c.name.clone(),
                    kind: "resource",
                    fqn: f.clone(),
                    reason: DemandReason::MissingFqn {
                        alternatives: alternatives(f, &buckets),
                    },
                });
            } else if bucket.iter().all(|i| disqualified.contains_key(i)) {
                let causes = bucket
                    .iter()
                    .flat_map(|i| {
                        disqualified
                            .get(i)
                            .into_iter()
                            .flatten()
                            .filter(|(g, _)| g == f)
                            .map(|(_, cause)| (transformers[*i].fqn.clone(), cause.clone()))
                    })
                    .collect();
                out.demands.push(Demand {
                    component: c.name.clone(),
                    kind: "resource",
                    fqn: f.clone(),
                    reason: DemandReason::Disqualified { causes },
                });
            }
        }
        // Trait demands (docs/design/decisions.md §26).
        for f in &c.traits {
            let handled = matched.iter().any(|&i| {
                transformers[i].required_traits.contains(f)
                    || transformers[i].optional_traits.contains(f)
            });
            if handled {
                continue;
            }
            match posture(&c.value, f) {
                Some(true) => out.warnings.push(format!(
                    "component {:?}: trait {f} is not handled by any matched transformer; its values will be ignored",
                    c.name
                )),
                Some(false) => out.demands.push(Demand {
                    component: c.name.clone(),
                    kind: "trait",
                    fqn: f.clone(),
                    reason: DemandReason::TraitRequired,
                }),
                None => out.demands.push(Demand {
                    component: c.name.clone(),
                    kind: "trait",
                    fqn: f.clone(),
                    reason: DemandReason::TraitUnstated,
                }),
            }
        }
        if matched.is_empty() {
            out.unmatched.push(c.name.clone());
        }
        for i in matched {
            out.pairs
                .push((c.name.clone(), transformers[i].fqn.clone()));
        }
    }
    out.pairs.sort();
    out.required_contracts = contracts.into_iter().collect();
    out
}

fn alternatives(fqn: &str, buckets: &BTreeMap<&str, Vec<usize>>) -> Vec<String> {
    let base = contract_base(fqn);
    let mut alts: Vec<String> = buckets
        .keys()
        .filter(|k| **k != fqn && contract_base(k) == base)
        .map(|k| k.to_string())
        .collect();
    alts.sort_by_key(|a| ladder_key(a));
    alts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_prefers_ga_then_beta_then_alpha_higher_first() {
        let mut v = vec![
            "x/c@v1alpha1".to_string(),
            "x/c@v1".to_string(),
            "x/c@v2beta1".to_string(),
            "x/c@v2".to_string(),
            "x/c@v1beta2".to_string(),
        ];
        v.sort_by_key(|a| ladder_key(a));
        assert_eq!(
            v,
            vec![
                "x/c@v2",
                "x/c@v1",
                "x/c@v2beta1",
                "x/c@v1beta2",
                "x/c@v1alpha1"
            ]
        );
    }
}
