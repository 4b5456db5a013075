//! The pure verdict steps of the TransformerRegistration reconciler (docs/design/operator.md §4.1 steps
//! 5, 7, 8 and §4.4; docs/design/decisions.md §10, §13, §14).
//!
//! Rules implemented here:
//! - **Provides (docs/design/decisions.md §13)**: the claim's `spec.provides` must equal, as a sorted set, the contracts the
//!   catalog's transformers require with `fulfilment: "provider"`; order in the claim is irrelevant.
//! - **Build compatibility (docs/design/decisions.md §10)**: walk the catalog's requirements in path order; consider only OPM
//!   paths (prefixes `opmodel.dev/` and `testing.opmodel.dev/` by default); match them to the
//!   platform's resolved deps by base path (without `@vN`); skip paths the platform does not have.
//!   A different major refuses (majors are not comparable); a catalog requirement newer than the
//!   platform's resolved version refuses; equal or older passes.
//! - **Duplicate claim (docs/design/decisions.md §14)**: among the claims of one catalog, the holder is the one with the
//!   earliest creation time, ties broken by the lowest name.
//! - **Dependents (§4.4)**: the ModuleInstances whose `status.requiredContracts` intersect the
//!   claim's `spec.provides`, as sorted `ns/name`; an empty `provides` has no dependents. No registry
//!   access, so the guard works with the registry down.

use std::collections::{BTreeMap, BTreeSet};

use cue::module::semver;

/// The path prefixes the build-compatibility check considers.
pub const OPM_PREFIXES: &[&str] = &["opmodel.dev/", "testing.opmodel.dev/"];

fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

fn sorted_set(items: &[String]) -> Vec<String> {
    items
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Step 5: `None` when the claimed contracts equal the derived ones, else the refusal message.
pub fn provides_mismatch(claimed: &[String], derived: &[String]) -> Option<String> {
    let claimed = sorted_set(claimed);
    let derived = sorted_set(derived);
    (claimed != derived).then(|| {
        format!(
            "Claim lists provider contracts {} but the catalog implements {}; acceptance requires \
             them to match exactly",
            list(&claimed),
            list(&derived)
        )
    })
}

/// Splits `path@vN` into (base, major).
fn split_major(path: &str) -> (&str, &str) {
    match path.rsplit_once('@') {
        Some((base, major)) => (base, major),
        None => (path, ""),
    }
}

/// The major of a `vX.Y.Z` version (`v2` of `v2.0.0-alpha.4`), or "" when unparsable.
fn version_major(v: &str) -> String {
    semver::Version::parse(v)
        .map(|p| format!("v{}", p.major))
        .unwrap_or_default()
}

/// Step 7: `Ok` when the catalog's OPM requirements are compatible with what the platform
/// resolved, else the refusal message. Both maps are `path@major → v-prefixed version`.
pub fn build_incompatibility(
    platform_deps: &BTreeMap<String, String>,
    catalog_requires: &BTreeMap<String, String>,
    prefixes: &[&str],
) -> Result<(), String> {
    let platform_by_base: BTreeMap<&str, (&str, &str)> = platform_deps
        .iter()
        .map(|(p, v)| {
            let (base, major) = split_major(p);
            (base, (major, v.as_str()))
        })
        .collect();
    for (path, version) in catalog_requires {
        if !prefixes.iter().any(|pre| path.starts_with(pre)) {
            continue;
        }
        let (base, major) = split_major(path);
        let Some(&(platform_major, platform_version)) = platform_by_base.get(base) else {
            continue;
        };
        let catalog_major = if major.is_empty() {
            version_major(version)
        } else {
            major.to_owned()
        };
        let platform_major = if platform_major.is_empty() {
            version_major(platform_version)
        } else {
            platform_major.to_owned()
        };
        let why = if catalog_major != platform_major {
            Some("the majors differ and are not comparable")
        } else if !version.is_empty()
            && !platform_version.is_empty()
            && semver::compare(version, platform_version) == std::cmp::Ordering::Greater
        {
            Some("the catalog needs a newer version than the platform resolved")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(format!(
                "Claimed catalog requires {path} at \"{version}\" but the platform resolved \
                 \"{platform_version}\": {why}. The comparison is conservative: a cue.mod \
                 requirement records what the provider was tidied against, not what it uses, so \
                 lowering the requirement on {base} is the author's fix."
            ));
        }
    }
    Ok(())
}

/// Step 8: the holder among `(creation time, name)` claims of one catalog.
pub fn holder<K: Ord>(claims: &[(K, String)]) -> Option<&str> {
    claims
        .iter()
        .min_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)))
        .map(|(_, name)| name.as_str())
}

/// §4.4: the `ns/name` of instances demanding one of `provides`, sorted.
pub fn dependents<'a>(
    provides: &[String],
    instances: impl IntoIterator<Item = (&'a str, &'a str, &'a [String])>,
) -> Vec<String> {
    let provided: BTreeSet<&str> = provides.iter().map(String::as_str).collect();
    if provided.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = instances
        .into_iter()
        .filter(|(_, _, required)| required.iter().any(|c| provided.contains(c.as_str())))
        .map(|(ns, name, _)| format!("{ns}/{name}"))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// §4.4: the `DependentsRemain` message.
pub fn dependents_message(dependents: &[String]) -> String {
    format!(
        "Deletion blocked: {} module instance(s) still demand contracts this claim provides ({}); \
         remove them before removing the provider",
        dependents.len(),
        dependents.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn m(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn provides_must_match_as_a_set_scenario_54() {
        let derived = s(&["x.test/backup@v1"]);
        assert_eq!(
            provides_mismatch(&[], &derived).as_deref(),
            Some(
                "Claim lists provider contracts [] but the catalog implements [x.test/backup@v1]; \
                 acceptance requires them to match exactly"
            )
        );
        assert!(
            provides_mismatch(&s(&["x.test/backup@v1", "x.test/restore@v1"]), &derived)
                .is_some_and(|m| m.contains("[x.test/backup@v1, x.test/restore@v1]"))
        );
        let two = s(&["b@v1", "a@v1"]);
        assert_eq!(provides_mismatch(&two, &s(&["a@v1", "b@v1"])), None);
    }

    #[test]
    fn build_compatibility_scenario_56() {
        let platform = m(&[
            ("opmodel.dev/core@v2", "v2.0.0-alpha.4"),
            ("cue.dev/x/k8s.io@v0", "v0.7.0"),
        ]);
        // Older or equal passes; non-OPM paths are ignored even when newer.
        let ok = m(&[
            ("opmodel.dev/core@v2", "v2.0.0-alpha.3"),
            ("cue.dev/x/k8s.io@v0", "v0.9.0"),
        ]);
        assert_eq!(build_incompatibility(&platform, &ok, OPM_PREFIXES), Ok(()));
        assert_eq!(
            build_incompatibility(
                &platform,
                &m(&[("opmodel.dev/core@v2", "v2.0.0-alpha.4")]),
                OPM_PREFIXES
            ),
            Ok(())
        );
        // Newer in the same major refuses with the conservative wording.
        let newer = m(&[("opmodel.dev/core@v2", "v2.0.0-alpha.5")]);
        assert_eq!(
            build_incompatibility(&platform, &newer, OPM_PREFIXES),
            Err(
                "Claimed catalog requires opmodel.dev/core@v2 at \"v2.0.0-alpha.5\" but the \
                 platform resolved \"v2.0.0-alpha.4\": the catalog needs a newer version than \
                 the platform resolved. The comparison is conservative: a cue.mod requirement \
                 records what the provider was tidied against, not what it uses, so lowering \
                 the requirement on opmodel.dev/core is the author's fix."
                    .to_string()
            )
        );
        // Another major refuses even when "older".
        let other_major = m(&[("opmodel.dev/core@v1", "v1.9.0")]);
        assert!(build_incompatibility(&platform, &other_major, OPM_PREFIXES)
            .is_err_and(|e| e.contains("not comparable")));
        // Paths the platform does not have are skipped.
        let unshared = m(&[("opmodel.dev/catalogs/other@v1", "v9.0.0")]);
        assert_eq!(
            build_incompatibility(&platform, &unshared, OPM_PREFIXES),
            Ok(())
        );
    }

    #[test]
    fn the_oldest_claim_holds_ties_by_name_scenario_57() {
        let claims = vec![
            (5, "b.two".to_string()),
            (3, "z.one".to_string()),
            (3, "a.one".to_string()),
        ];
        assert_eq!(holder(&claims), Some("a.one"));
        assert_eq!(holder::<i32>(&[]), None);
    }

    #[test]
    fn dependents_intersect_required_contracts_scenario_61() {
        let provides = s(&["x.test/backup@v1"]);
        let a = s(&["x.test/backup@v1", "y@v1"]);
        let b = s(&["y@v1"]);
        let c = s(&["x.test/backup@v1"]);
        let got = dependents(
            &provides,
            [
                ("ns", "consumer", a.as_slice()),
                ("ns", "other", b.as_slice()),
                ("a", "z", c.as_slice()),
            ],
        );
        assert_eq!(got, s(&["a/z", "ns/consumer"]));
        assert!(dependents(&[], [("ns", "consumer", a.as_slice())]).is_empty());
        assert_eq!(
            dependents_message(&s(&["ns/consumer"])),
            "Deletion blocked: 1 module instance(s) still demand contracts this claim provides \
             (ns/consumer); remove them before removing the provider"
        );
    }
}
