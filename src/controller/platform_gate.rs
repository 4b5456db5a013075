//! The Platform contract-inventory gate and the ContractsFulfilled condition (docs/design/operator.md
//! §3.5 step 4, §3.6; docs/design/decisions.md §9).
//!
//! Rules implemented here, as pure functions of a [`ContractInventory`]:
//! - *(post-seed)* A contract defined by more than one enabled entry (`collisions` non-empty)
//!   refuses with [`CONTRACT_COLLISIONS`], ahead of both other findings: the message is the
//!   collision finding (`platform has colliding contract definitions: <1 contract is | N contracts
//!   are> defined by more than one enabled catalog; a contract has exactly one definition, so
//!   disable all but one of them:` then per contract `\n  <fqn> defined by <a>, <b>`), followed,
//!   after a blank line each, by the over-subscription and comparability findings when those
//!   also hold.
//! - The gate reads the booleans, never list lengths. `!routable` refuses with
//!   `OverSubscribedContracts`; `!discriminated` refuses with `ComparablePredicates`; both refuse with
//!   `OverSubscribedContracts` carrying both findings separated by a blank line.
//! - Every list is sorted before it is printed, so an unchanged finding produces an identical
//!   message (and so no new event: events are emitted on transitions only).
//! - Counted phrases: `1 over-subscribed contract` / `N over-subscribed contracts`,
//!   `1 comparable transformer pair` / `N comparable transformer pairs`,
//!   `1 provider-fulfilled contract is` / `N provider-fulfilled contracts are`.
//! - ContractsFulfilled never moves Ready: `NoContractsDefined` (True) when no enabled catalog
//!   defines a contract, `UnfulfilledContracts` (False) when `!fulfilled`, else
//!   `ContractsFulfilled` (True) with the number of defined contracts.

use crds::conditions::reasons;

use crate::kernel::ContractInventory;

/// The Ready/Stalled reason of a contract defined by more than one enabled catalog (post-seed,
/// docs/design/operator.md §3.5 step 4 and §7.4).
pub use crds::conditions::reasons::CONTRACT_COLLISIONS;

/// A refusal of the inventory gate: the Ready/Stalled reason and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `ContractCollisions`, `OverSubscribedContracts` or `ComparablePredicates`.
    pub reason: &'static str,
    /// The finding(s), stable text.
    pub message: String,
}

/// The ContractsFulfilled condition to write when a package is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fulfilment {
    /// Condition status.
    pub status: bool,
    /// Condition reason.
    pub reason: &'static str,
    /// Condition message.
    pub message: String,
}

fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn sorted(items: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = items.iter().collect();
    v.sort();
    v.dedup();
    v
}

fn defined_by(inv: &ContractInventory, fqn: &str) -> String {
    match inv.defined_by.get(fqn) {
        Some(catalog) => format!(" (defined by {catalog})"),
        None => String::new(),
    }
}

fn over_subscribed_finding(inv: &ContractInventory) -> String {
    let contracts = sorted(&inv.over_subscribed);
    let mut msg = format!(
        "platform is not routable: {}; a platform package cannot be generated until one competing \
         catalog is disabled or its claim removed:",
        counted(
            contracts.len(),
            "over-subscribed contract",
            "over-subscribed contracts"
        )
    );
    for fqn in contracts {
        let providers = inv
            .provided_by
            .get(fqn.as_str())
            .map(|p| sorted(p))
            .unwrap_or_default();
        let providers: Vec<&str> = providers.iter().map(|s| s.as_str()).collect();
        msg.push_str(&format!(
            "\n  {fqn}{} provided by {}",
            defined_by(inv, fqn),
            providers.join(", ")
        ));
    }
    msg
}

fn comparable_finding(inv: &ContractInventory) -> String {
    let mut pairs: Vec<_> = inv.comparable.iter().collect();
    pairs.sort_by(|a, b| (&a.broader, &a.narrower).cmp(&(&b.broader, &b.narrower)));
    let mut msg = format!(
        "platform is not discriminated: {}; every component the narrower transformer matches is \
         also matched by the broader one, so both would render (0015:D5):",
        counted(
            pairs.len(),
            "comparable transformer pair",
            "comparable transformer pairs"
        )
    );
    for p in pairs {
        let contracts: Vec<&str> = sorted(&p.contracts).iter().map(|s| s.as_str()).collect();
        msg.push_str(&format!(
            "\n  {} (broader) and {} (narrower) over {}",
            p.broader,
            p.narrower,
            contracts.join(", ")
        ));
    }
    msg
}

fn collision_finding(inv: &ContractInventory) -> String {
    let mut msg = format!(
        "platform has colliding contract definitions: {} defined by more than one enabled \
         catalog; a contract has exactly one definition, so disable all but one of them:",
        counted(inv.collisions.len(), "contract is", "contracts are")
    );
    for (fqn, definers) in &inv.collisions {
        let definers: Vec<&str> = sorted(definers).iter().map(|s| s.as_str()).collect();
        msg.push_str(&format!("\n  {fqn} defined by {}", definers.join(", ")));
    }
    msg
}

/// The gate: `None` when the platform may be recorded, else the refusal.
pub fn gate(inv: &ContractInventory) -> Option<Refusal> {
    let rest = inventory_gate(inv);
    if inv.collisions.is_empty() {
        return rest;
    }
    let mut message = collision_finding(inv);
    if let Some(r) = rest {
        message.push_str("\n\n");
        message.push_str(&r.message);
    }
    Some(Refusal {
        reason: CONTRACT_COLLISIONS,
        message,
    })
}

/// The seed's gate: over-subscription and comparable predicates.
fn inventory_gate(inv: &ContractInventory) -> Option<Refusal> {
    match (inv.routable, inv.discriminated) {
        (true, true) => None,
        (false, true) => Some(Refusal {
            reason: reasons::OVER_SUBSCRIBED_CONTRACTS,
            message: over_subscribed_finding(inv),
        }),
        (true, false) => Some(Refusal {
            reason: reasons::COMPARABLE_PREDICATES,
            message: comparable_finding(inv),
        }),
        (false, false) => Some(Refusal {
            reason: reasons::OVER_SUBSCRIBED_CONTRACTS,
            message: format!(
                "{}\n\n{}",
                over_subscribed_finding(inv),
                comparable_finding(inv)
            ),
        }),
    }
}

/// The ContractsFulfilled condition for a recorded package.
pub fn fulfilment(inv: &ContractInventory) -> Fulfilment {
    if inv.defined_by.is_empty() {
        return Fulfilment {
            status: true,
            reason: reasons::NO_CONTRACTS_DEFINED,
            message: "the enabled catalogs define no contract, so nothing was verified".into(),
        };
    }
    if !inv.fulfilled {
        let missing = sorted(&inv.unfulfilled);
        let mut message = format!(
            "{} defined by an enabled catalog and implemented by nothing on the platform; a module \
             demanding one will not resolve until a provider registers:",
            counted(
                missing.len(),
                "provider-fulfilled contract is",
                "provider-fulfilled contracts are"
            )
        );
        for fqn in missing {
            message.push_str(&format!("\n  {fqn}{}", defined_by(inv, fqn)));
        }
        return Fulfilment {
            status: false,
            reason: reasons::UNFULFILLED_CONTRACTS,
            message,
        };
    }
    Fulfilment {
        status: true,
        reason: reasons::CONTRACTS_FULFILLED,
        message: format!(
            "every provider-fulfilled contract the enabled catalogs define has a provider ({} defined)",
            inv.defined_by.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::kernel::ComparablePair;

    fn inv() -> ContractInventory {
        ContractInventory {
            routable: true,
            discriminated: true,
            fulfilled: true,
            ..Default::default()
        }
    }

    fn over_subscribed() -> ContractInventory {
        let mut i = inv();
        i.routable = false;
        i.over_subscribed = vec!["z.test/backup@v1".into(), "a.test/dns@v1".into()];
        i.defined_by.insert(
            "a.test/dns@v1".into(),
            "fixtures.test/catalogs/mini@v0".into(),
        );
        i.provided_by.insert(
            "a.test/dns@v1".into(),
            vec!["p2.test/cat@v1".into(), "p1.test/cat@v1".into()],
        );
        i.provided_by.insert(
            "z.test/backup@v1".into(),
            vec!["p3.test/cat@v1".into(), "p1.test/cat@v1".into()],
        );
        i
    }

    #[test]
    fn a_routable_discriminated_platform_passes() {
        assert_eq!(gate(&inv()), None);
    }

    #[test]
    fn over_subscription_lists_sorted_contracts_definers_and_providers() {
        let r = gate(&over_subscribed()).unwrap();
        assert_eq!(r.reason, "OverSubscribedContracts");
        assert_eq!(
            r.message,
            "platform is not routable: 2 over-subscribed contracts; a platform package cannot be \
             generated until one competing catalog is disabled or its claim removed:\n  \
             a.test/dns@v1 (defined by fixtures.test/catalogs/mini@v0) provided by p1.test/cat@v1, \
             p2.test/cat@v1\n  z.test/backup@v1 provided by p1.test/cat@v1, p3.test/cat@v1"
        );
    }

    #[test]
    fn the_gate_reads_booleans_not_list_lengths() {
        let mut i = over_subscribed();
        i.routable = true;
        assert_eq!(gate(&i), None);
    }

    #[test]
    fn comparable_pairs_refuse_with_one_row_each() {
        let mut i = inv();
        i.discriminated = false;
        i.comparable = vec![ComparablePair {
            broader: "t.test/deploy@1.0.0".into(),
            narrower: "t.test/web@1.0.0".into(),
            contracts: vec!["r.test/container@v1".into()],
        }];
        let r = gate(&i).unwrap();
        assert_eq!(r.reason, "ComparablePredicates");
        assert_eq!(
            r.message,
            "platform is not discriminated: 1 comparable transformer pair; every component the \
             narrower transformer matches is also matched by the broader one, so both would render \
             (0015:D5):\n  t.test/deploy@1.0.0 (broader) and t.test/web@1.0.0 (narrower) over \
             r.test/container@v1"
        );
    }

    #[test]
    fn both_findings_are_joined_under_over_subscribed() {
        let mut i = over_subscribed();
        i.discriminated = false;
        let r = gate(&i).unwrap();
        assert_eq!(r.reason, "OverSubscribedContracts");
        let parts: Vec<&str> = r.message.split("\n\n").collect();
        assert_eq!(parts.len(), 2);
        assert!(parts[0].starts_with("platform is not routable: 2 over-subscribed contracts;"));
        assert!(parts[1].starts_with("platform is not discriminated: 0 comparable"));
    }

    #[test]
    fn colliding_definitions_refuse_ahead_of_the_other_findings() {
        let mut i = inv();
        i.collisions.insert(
            "t.test/expose@v1".into(),
            vec!["c.test/b@v0".into(), "c.test/a@v0".into()],
        );
        let r = gate(&i).unwrap();
        assert_eq!(r.reason, "ContractCollisions");
        assert_eq!(
            r.message,
            "platform has colliding contract definitions: 1 contract is defined by more than one \
             enabled catalog; a contract has exactly one definition, so disable all but one of \
             them:\n  t.test/expose@v1 defined by c.test/a@v0, c.test/b@v0"
        );
        // Over-subscribed too: the collision reason, both findings.
        let mut both = over_subscribed();
        both.collisions = i.collisions.clone();
        both.collisions.insert(
            "a.test/dns@v1".into(),
            vec!["c.test/a@v0".into(), "c.test/c@v0".into()],
        );
        let r = gate(&both).unwrap();
        assert_eq!(r.reason, "ContractCollisions");
        let parts: Vec<&str> = r.message.split("\n\n").collect();
        assert_eq!(parts.len(), 2);
        assert!(
            parts[0].starts_with("platform has colliding contract definitions: 2 contracts are"),
            "{}",
            parts[0]
        );
        assert!(parts[0].ends_with(
            ":\n  a.test/dns@v1 defined by c.test/a@v0, c.test/c@v0\n  t.test/expose@v1 defined \
             by c.test/a@v0, c.test/b@v0"
        ));
        assert_eq!(parts[1], gate(&over_subscribed()).unwrap().message);
    }

    #[test]
    fn fulfilment_follows_the_table() {
        let f = fulfilment(&inv());
        assert_eq!((f.status, f.reason), (true, "NoContractsDefined"));
        assert_eq!(
            f.message,
            "the enabled catalogs define no contract, so nothing was verified"
        );

        let mut i = inv();
        i.defined_by.insert("a@v1".into(), "cat@v0".into());
        i.defined_by.insert("b@v1".into(), "cat@v0".into());
        let f = fulfilment(&i);
        assert_eq!((f.status, f.reason), (true, "ContractsFulfilled"));
        assert_eq!(
            f.message,
            "every provider-fulfilled contract the enabled catalogs define has a provider (2 defined)"
        );

        i.fulfilled = false;
        i.unfulfilled = vec!["b@v1".into()];
        let f = fulfilment(&i);
        assert_eq!((f.status, f.reason), (false, "UnfulfilledContracts"));
        assert_eq!(
            f.message,
            "1 provider-fulfilled contract is defined by an enabled catalog and implemented by \
             nothing on the platform; a module demanding one will not resolve until a provider \
             registers:\n  b@v1 (defined by cat@v0)"
        );
    }
}
