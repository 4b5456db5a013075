//! The platform's contract inventory (docs/design/operator.md §2.0, §3.5 steps 3–4, §3.6; docs/design/render.md
//! §1.5 step 4; docs/design/decisions.md §9).
//!
//! The inventory is computed from plain data read off the built platform ([`EntryFacts`] per
//! `#registry` entry), so it is a pure, deterministic function (every list sorted):
//! - **DefinedBy**: contract FQN → the enabled catalog whose contract maps (`#resources`,
//!   `#traits`, `#blueprints`) define it. Disabled catalogs define nothing. When two enabled
//!   entries define one key, the first in path order is kept here and every definer is listed
//!   in **Collisions** (contract FQN → the enabled entries defining it, sorted; one per entry, so
//!   two majors of one catalog collide), which the gate refuses as `ContractCollisions`.
//! - **RequiredBy**: contract FQN → the composed (enabled) transformers that require it
//!   (`requiredResources` ∪ `requiredTraits` ∪ `requiredBlueprints`), sorted.
//! - **ProvidedBy**: contract FQN → the enabled entries some transformer of which requires it with
//!   `fulfilment: "provider"` (the copy embedded in the transformer, defaults resolved), one per
//!   entry: two majors of one catalog are two entries and count twice.
//! - **OverSubscribed**: contracts with more than one provider. **Routable** ⇔ none.
//! - **Unfulfilled**: contracts defined (by an enabled catalog) as provider-fulfilled with no
//!   provider. **Fulfilled** ⇔ none.
//! - **Comparable** (`ComparablePredicates`): a transformer's match predicate is its required
//!   contracts plus its `requiredLabels` pairs; it matches a component that has all of them. For
//!   two composed transformers A ≠ B, when A's predicate is a subset of B's, every component B
//!   matches is also matched by A: A is the broader, B the narrower, over A's contracts (the
//!   contracts both match over). Equal predicates are reported once, the lower FQN as the
//!   broader. Sorted by (broader, narrower). **Discriminated** ⇔ none.

use std::collections::{BTreeMap, BTreeSet};

use crate::{ComparablePair, ContractInventory};

/// What the inventory needs to know about one transformer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransformerFacts {
    /// The transformer FQN (its key in the catalog's `#transformers`).
    pub fqn: String,
    /// Required contract FQN → whether the embedded copy is provider-fulfilled.
    pub required: BTreeMap<String, bool>,
    /// `requiredLabels` as `key → value`.
    pub required_labels: BTreeMap<String, String>,
}

/// What the inventory needs to know about one `#registry` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EntryFacts {
    /// The entry key: the catalog module path with major.
    pub path: String,
    /// Whether it is enabled.
    pub enable: bool,
    /// Contracts the catalog defines → whether they are provider-fulfilled.
    pub defined: BTreeMap<String, bool>,
    /// The catalog's transformers.
    pub transformers: Vec<TransformerFacts>,
}

/// Contracts some transformer requires with `fulfilment: "provider"`, sorted (a catalog's
/// `provides()`, docs/design/operator.md §4.1 step 5).
pub fn provides(transformers: &[TransformerFacts]) -> Vec<String> {
    let set: BTreeSet<&String> = transformers
        .iter()
        .flat_map(|t| t.required.iter().filter(|(_, p)| **p).map(|(c, _)| c))
        .collect();
    set.into_iter().cloned().collect()
}

/// The composed transformers of the enabled entries, by FQN (first entry in path order wins a
/// duplicate FQN).
pub fn composed(entries: &[EntryFacts]) -> BTreeMap<&str, &TransformerFacts> {
    let mut sorted: Vec<&EntryFacts> = entries.iter().filter(|e| e.enable).collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut out = BTreeMap::new();
    for e in sorted {
        for t in &e.transformers {
            out.entry(t.fqn.as_str()).or_insert(t);
        }
    }
    out
}

/// Computes the inventory of the entries.
pub fn inventory(entries: &[EntryFacts]) -> ContractInventory {
    let mut sorted: Vec<&EntryFacts> = entries.iter().filter(|e| e.enable).collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));

    let mut defined_by: BTreeMap<String, String> = BTreeMap::new();
    let mut definers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut provider_defined: BTreeSet<String> = BTreeSet::new();
    for e in &sorted {
        for (c, provider) in &e.defined {
            definers.entry(c.clone()).or_default().push(e.path.clone());
            if !defined_by.contains_key(c) {
                defined_by.insert(c.clone(), e.path.clone());
                if *provider {
                    provider_defined.insert(c.clone());
                }
            }
        }
    }

    let mut provided_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &sorted {
        for c in provides(&e.transformers) {
            provided_by.entry(c).or_default().push(e.path.clone());
        }
    }
    for v in provided_by.values_mut() {
        v.sort();
    }

    let tfs = composed(entries);
    let mut required_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (fqn, t) in &tfs {
        for c in t.required.keys() {
            required_by
                .entry(c.clone())
                .or_default()
                .push(fqn.to_string());
        }
    }
    for v in required_by.values_mut() {
        v.sort();
        v.dedup();
    }

    let over_subscribed: Vec<String> = provided_by
        .iter()
        .filter(|(_, p)| p.len() > 1)
        .map(|(c, _)| c.clone())
        .collect();
    let unfulfilled: Vec<String> = provider_defined
        .iter()
        .filter(|c| provided_by.get(*c).is_none_or(Vec::is_empty))
        .cloned()
        .collect();
    let comparable = comparable(&tfs);
    let collisions: BTreeMap<String, Vec<String>> = definers
        .into_iter()
        .filter(|(_, d)| d.len() > 1)
        .map(|(c, mut d)| {
            d.sort();
            (c, d)
        })
        .collect();

    ContractInventory {
        routable: over_subscribed.is_empty(),
        discriminated: comparable.is_empty(),
        fulfilled: unfulfilled.is_empty(),
        defined_by,
        collisions,
        required_by,
        provided_by,
        over_subscribed,
        unfulfilled,
        comparable,
    }
}

/// `a`'s predicate is a subset of `b`'s.
fn covers(a: &TransformerFacts, b: &TransformerFacts) -> bool {
    a.required.keys().all(|c| b.required.contains_key(c))
        && a.required_labels
            .iter()
            .all(|(k, v)| b.required_labels.get(k) == Some(v))
}

fn comparable(tfs: &BTreeMap<&str, &TransformerFacts>) -> Vec<ComparablePair> {
    let mut out = Vec::new();
    let all: Vec<(&str, &TransformerFacts)> = tfs.iter().map(|(k, v)| (*k, *v)).collect();
    for (i, (fa, a)) in all.iter().enumerate() {
        for (fb, b) in all.iter().skip(i + 1) {
            // `fa < fb` (BTreeMap order): on equal predicates the lower FQN is the broader.
            let (ab, ba) = (covers(a, b), covers(b, a));
            let pair = match (ab, ba) {
                (true, _) => Some((fa, a, fb)),
                (false, true) => Some((fb, b, fa)),
                (false, false) => None,
            };
            if let Some((broader, bt, narrower)) = pair {
                out.push(ComparablePair {
                    broader: broader.to_string(),
                    narrower: narrower.to_string(),
                    contracts: bt.required.keys().cloned().collect(),
                });
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;

    fn tf(fqn: &str, req: &[(&str, bool)], labels: &[(&str, &str)]) -> TransformerFacts {
        TransformerFacts {
            fqn: fqn.into(),
            required: req.iter().map(|(c, p)| (c.to_string(), *p)).collect(),
            required_labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn entry(
        path: &str,
        enable: bool,
        defined: &[(&str, bool)],
        t: Vec<TransformerFacts>,
    ) -> EntryFacts {
        EntryFacts {
            path: path.into(),
            enable,
            defined: defined.iter().map(|(c, p)| (c.to_string(), *p)).collect(),
            transformers: t,
        }
    }

    #[test]
    fn mini_alone_is_routable_discriminated_and_reports_its_unfulfilled_contract() {
        let mini = entry(
            "t.test/mini@v0",
            true,
            &[("r/container@v0", false), ("t/scaling@v0", true)],
            vec![
                tf(
                    "x/deploy@0.1.0",
                    &[("r/container@v0", false)],
                    &[("workload-type", "stateless")],
                ),
                tf("x/cm@0.1.0", &[("r/configs@v0", false)], &[]),
            ],
        );
        let inv = inventory(&[mini]);
        assert!(inv.routable && inv.discriminated);
        assert!(!inv.fulfilled);
        assert_eq!(inv.unfulfilled, ["t/scaling@v0"]);
        assert_eq!(inv.defined_by["r/container@v0"], "t.test/mini@v0");
        assert_eq!(inv.required_by["r/container@v0"], ["x/deploy@0.1.0"]);
        assert!(inv.provided_by.is_empty());
    }

    #[test]
    fn two_providers_oversubscribe_and_disabled_entries_count_for_nothing() {
        let p = |path: &str, enable: bool, fqn: &str| {
            entry(
                path,
                enable,
                &[],
                vec![tf(
                    fqn,
                    &[("t/scaling@v0", true), ("r/container@v0", false)],
                    &[],
                )],
            )
        };
        let inv = inventory(&[
            p("t.test/prov@v1", true, "p1/hpa@1.0.0"),
            p("t.test/prov@v0", true, "p0/hpa@0.1.0"),
            p("t.test/off@v0", false, "off/hpa@0.1.0"),
        ]);
        assert_eq!(
            inv.provided_by["t/scaling@v0"],
            ["t.test/prov@v0", "t.test/prov@v1"]
        );
        assert_eq!(inv.over_subscribed, ["t/scaling@v0"]);
        assert!(!inv.routable);
        // Equal predicates: one pair, the lower FQN broader.
        assert_eq!(
            inv.comparable,
            [ComparablePair {
                broader: "p0/hpa@0.1.0".into(),
                narrower: "p1/hpa@1.0.0".into(),
                contracts: vec!["r/container@v0".into(), "t/scaling@v0".into()],
            }]
        );
        assert!(!inv.discriminated);
        assert_eq!(
            inv.required_by["t/scaling@v0"],
            ["p0/hpa@0.1.0", "p1/hpa@1.0.0"]
        );
    }

    #[test]
    fn a_contract_defined_by_two_enabled_entries_collides() {
        let def = |path: &str, enable: bool| {
            entry(
                path,
                enable,
                &[("r/container@v0", false), ("t/expose@v0", true)],
                vec![],
            )
        };
        let inv = inventory(&[
            def("t.test/b@v0", true),
            def("t.test/a@v0", true),
            def("t.test/off@v0", false),
            entry("t.test/c@v0", true, &[("r/own@v0", false)], vec![]),
        ]);
        assert_eq!(
            inv.collisions.keys().collect::<Vec<_>>(),
            ["r/container@v0", "t/expose@v0"]
        );
        assert_eq!(
            inv.collisions["t/expose@v0"],
            ["t.test/a@v0", "t.test/b@v0"]
        );
        // The first definer in path order is the one DefinedBy names.
        assert_eq!(inv.defined_by["r/container@v0"], "t.test/a@v0");
        assert_eq!(inv.defined_by["r/own@v0"], "t.test/c@v0");
        // One definition each: no collision (the disabled entry defines nothing).
        let one = inventory(&[def("t.test/a@v0", true), def("t.test/off@v0", false)]);
        assert!(one.collisions.is_empty());
    }

    #[test]
    fn subset_predicates_are_comparable_and_labels_discriminate() {
        let e = entry(
            "t.test/c@v0",
            true,
            &[],
            vec![
                tf("c/a@1", &[("r@v0", false)], &[]),
                tf("c/b@1", &[("r@v0", false), ("s@v0", false)], &[]),
                tf("c/s1@1", &[("q@v0", false)], &[("k", "x")]),
                tf("c/s2@1", &[("q@v0", false)], &[("k", "y")]),
            ],
        );
        let inv = inventory(&[e]);
        assert_eq!(
            inv.comparable,
            [ComparablePair {
                broader: "c/a@1".into(),
                narrower: "c/b@1".into(),
                contracts: vec!["r@v0".into()],
            }]
        );
        assert_eq!(
            provides(&[tf("z", &[("b", true), ("a", true), ("c", false)], &[])]),
            ["a", "b"]
        );
    }
}
