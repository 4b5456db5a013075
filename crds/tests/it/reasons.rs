//! Condition reasons have one home and one row each.
//!
//! - Every reason the operator can set is a constant of `crds::conditions::reasons`: the list is
//!   read from that module's source, so a constant added there is covered without touching this
//!   test.
//! - `docs/operations.md` has a troubleshooting table with one row per reason (the reason in
//!   backticks in the first cell). A reason without a row fails, naming it; so does a row whose
//!   reason the module no longer has.
//! - No other source file of the crates that set reasons (`src`, `kernel`, `crds`, `registry`,
//!   `webhooks`) spells a reason as a string literal outside its tests: a literal equal to a
//!   known reason fails (use the constant), and so does any other literal shaped like a reason
//!   (`UpperCamelCase` of two words or more) that is not listed in [`NOT_REASONS`] (a new reason
//!   belongs in the module; a Kubernetes kind or an API term belongs in that list, with why).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The values of the `pub const` items of `pub mod reasons` in `crds/src/conditions.rs`.
fn reasons() -> BTreeSet<String> {
    let src = std::fs::read_to_string(root().join("crds/src/conditions.rs")).unwrap();
    let start = src
        .find("pub mod reasons {")
        .expect("conditions.rs has `pub mod reasons`");
    let body = &src[start..];
    let end = body.find("\n}").expect("the reasons module ends");
    let mut out = BTreeSet::new();
    for line in body[..end].lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("pub const ") {
            let value = rest
                .split_once("= \"")
                .and_then(|(_, v)| v.strip_suffix("\";"))
                .unwrap_or_else(|| panic!("a reason constant is not a plain string: {line}"));
            out.insert(value.to_owned());
        }
    }
    out
}

/// The reasons named by the first cell of the troubleshooting table rows of
/// `docs/operations.md`.
fn documented() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(root().join("docs/operations.md")).unwrap();
    let start = doc
        .find("## Troubleshooting")
        .expect("docs/operations.md has a `## Troubleshooting` section");
    let section = &doc[start..];
    let section = match section[3..].find("\n## ") {
        Some(end) => &section[..end + 3],
        None => section,
    };
    let mut out = BTreeSet::new();
    for line in section.lines() {
        let Some(rest) = line.strip_prefix("| `") else {
            continue;
        };
        if let Some((reason, _)) = rest.split_once('`') {
            out.insert(reason.to_owned());
        }
    }
    out
}

#[test]
fn the_reasons_module_is_read_completely() {
    let all = reasons();
    use crds::conditions::reasons as r;
    for known in [
        r::RECONCILIATION_SUCCEEDED,
        r::PLATFORM_NOT_READY,
        r::DEPENDENTS_REMAIN,
        r::CONTRACTS_FULFILLED,
    ] {
        assert!(all.contains(known), "{known} not read from conditions.rs");
    }
    assert!(all.len() > 40, "only {} reasons read", all.len());
}

#[test]
fn every_reason_has_a_troubleshooting_row() {
    let rows = documented();
    let missing: Vec<_> = reasons().difference(&rows).cloned().collect();
    assert!(
        missing.is_empty(),
        "docs/operations.md `## Troubleshooting` has no row for: {}",
        missing.join(", ")
    );
}

#[test]
fn every_troubleshooting_row_is_a_reason() {
    let stale: Vec<_> = documented().difference(&reasons()).cloned().collect();
    assert!(
        stale.is_empty(),
        "docs/operations.md lists reasons crds::conditions::reasons does not define: {}",
        stale.join(", ")
    );
}

/// `UpperCamelCase` literals of the scanned crates that are not condition reasons, with why.
const NOT_REASONS: &[(&str, &str)] = &[
    // Values of the `opm.dev/apply` per-object policy annotation (src/apply/policy.rs).
    ("IfNotPresent", "a value of the opm.dev/apply annotation"),
    // Type names in Debug output.
    ("RemoteCluster", "a type name in Debug output"),
    ("TrustedKeys", "a type name in Debug output"),
    // Kinds (ours, Kubernetes', Flux's), which are written as literals to build and match objects.
    ("ModuleInstance", "kind"),
    ("ModulePackage", "kind"),
    ("TransformerRegistration", "kind"),
    ("CustomResourceDefinition", "kind"),
    ("ValidatingWebhookConfiguration", "kind"),
    ("AdmissionReview", "kind"),
    ("StatefulSet", "kind"),
    ("DaemonSet", "kind"),
    ("ServiceAccount", "kind"),
    ("PersistentVolumeClaim", "kind"),
    ("PodDisruptionBudget", "kind"),
    ("NetworkPolicy", "kind"),
    ("ResourceQuota", "kind"),
    ("LimitRange", "kind"),
    ("IngressClass", "kind"),
    ("ClusterRole", "kind"),
    ("ConfigMap", "kind"),
    ("GitRepository", "kind (Flux source)"),
    ("OCIRepository", "kind (Flux source)"),
    ("TokenReview", "kind"),
    ("SubjectAccessReview", "kind"),
    ("TransformerRegistrationStatus", "schema name"),
    ("ModuleInstanceStatus", "schema name"),
    ("ModulePackageStatus", "schema name"),
    ("PlatformStatus", "schema name"),
    // Kubernetes API vocabulary the operator reads or answers with.
    (
        "NamesAccepted",
        "a CRD's condition type, read by the health check",
    ),
    (
        "ProgressDeadlineExceeded",
        "a Deployment's condition reason, read by the health check",
    ),
    (
        "RollingUpdate",
        "a StatefulSet strategy, read by the health check",
    ),
    ("LoadBalancer", "a Service type, read by the health check"),
    ("FieldValueInvalid", "an admission denial's cause type"),
    (
        "FieldValueForbidden",
        "an API Status cause type, read to spot immutable fields",
    ),
    // Event actions (what a controller did), not reasons.
    ("DependsOn", "event action"),
    // Rust type names printed in Debug output.
    ("WebhookService", "type name"),
    ("RenderParts", "type name"),
    ("RenderBackend", "type name"),
    ("LeaseGuard", "type name"),
];

/// Reason literals that are something else in one file: (file, literal, why).
const ELSEWHERE: &[(&str, &str, &str)] = &[
    (
        "src/apply/health.rs",
        "Progressing",
        "a Deployment's condition type, read by the health check",
    ),
    (
        "crds/src/fixtures.rs",
        "Applied",
        "a Ready condition's message in a test fixture (its reason is the default)",
    ),
];

/// The directories whose non-test code may set reasons.
const SCANNED: &[&str] = &[
    "src",
    "kernel/src",
    "crds/src",
    "registry/src",
    "webhooks/src",
];

#[test]
fn reasons_are_spelled_only_in_the_reasons_module() {
    let reasons = reasons();
    let mut violations = Vec::new();
    for dir in SCANNED {
        let mut files = Vec::new();
        rust_files(&root().join(dir), &mut files);
        assert!(!files.is_empty(), "no Rust files under {dir}");
        for file in files {
            let rel = file
                .strip_prefix(root())
                .unwrap_or(&file)
                .to_string_lossy()
                .replace('\\', "/");
            let rel = rel.trim_start_matches("./").to_owned();
            if rel == "crds/src/conditions.rs" {
                continue;
            }
            let src = std::fs::read_to_string(&file).unwrap();
            for (line, lit) in non_test_literals(&src) {
                let exempt = ELSEWHERE.iter().any(|(f, l, _)| *f == rel && *l == lit);
                if exempt {
                    continue;
                }
                if reasons.contains(&lit) {
                    violations.push(format!(
                        "{rel}:{line}: reason \"{lit}\" spelled as a literal; use crds::conditions::reasons"
                    ));
                } else if reason_shaped(&lit) && !NOT_REASONS.iter().any(|(n, _)| *n == lit) {
                    violations.push(format!(
                        "{rel}:{line}: \"{lit}\" looks like a condition reason: define it in \
                         crds::conditions::reasons (and give it a row in docs/operations.md), or \
                         list it in NOT_REASONS of crds/tests/it/reasons.rs with why"
                    ));
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_scanner_finds_what_it_must() {
    let src = r##"
        const A: &str = "ValuesFromNotFound"; // "InComment"
        /* "InBlock" */ let c = 'x'; let l: &'static str = r#"Raw"Inner"#;
        fn f<'a>(x: &'a str) -> char { '"' }
        let s = "esc\"aped";
        #[cfg(test)]
        mod tests { const T: &str = "InTests"; fn g() { let _ = "{"; } }
        const B: &str = "AfterTests";
    "##;
    let lits: Vec<String> = non_test_literals(src).into_iter().map(|(_, l)| l).collect();
    assert_eq!(
        lits,
        [
            "ValuesFromNotFound",
            "Raw\"Inner",
            "esc\\\"aped",
            "AfterTests"
        ],
        "{lits:?}"
    );
    assert!(reason_shaped("ValuesFromNotFound"));
    assert!(reason_shaped("DeletionSAMissing"));
    assert!(!reason_shaped("Ready"));
    assert!(!reason_shaped("opm-controller"));
    assert!(!reason_shaped("HTTP"));
}

/// `UpperCamelCase` of at least two words: `ApplyFailed`, `DeletionSAMissing`.
fn reason_shaped(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !first.is_ascii_uppercase() || !s.chars().all(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    let rest: Vec<char> = chars.collect();
    let starts_lower = rest
        .first()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let humps = rest.iter().filter(|c| c.is_ascii_uppercase()).count();
    starts_lower && humps >= 1
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "tests" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// The string literals (line, content as written between the quotes) of `src`, outside comments
/// and outside items marked `#[cfg(test)]`.
fn non_test_literals(src: &str) -> Vec<(usize, String)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    // Brace depth of the code, and the depth at which a skipped test item ends.
    let mut depth = 0usize;
    let mut skip_until: Option<usize> = None;
    let mut pending_test = false;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
            continue;
        }
        if src[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if src[i..].starts_with("/*") {
            let mut nest = 0;
            while i < b.len() {
                if src[i..].starts_with("/*") {
                    nest += 1;
                    i += 2;
                } else if src[i..].starts_with("*/") {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            continue;
        }
        if src[i..].starts_with("#[cfg(test)]") {
            pending_test = true;
            i += "#[cfg(test)]".len();
            continue;
        }
        // Raw strings: r"..", r#".."#, br#".."#.
        let raw_start = if c == b'r' || (c == b'b' && b.get(i + 1) == Some(&b'r')) {
            let mut j = i + if c == b'b' { 2 } else { 1 };
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
            (b.get(j) == Some(&b'"') && !ident_before).then_some((j + 1, hashes))
        } else {
            None
        };
        if let Some((start, hashes)) = raw_start {
            let close = format!("\"{}", "#".repeat(hashes));
            let end = src[start..].find(&close).map_or(b.len(), |e| start + e);
            let text = &src[start..end];
            if skip_until.is_none() {
                out.push((line, text.to_owned()));
            }
            line += text.matches('\n').count();
            i = (end + close.len()).min(b.len());
            continue;
        }
        if c == b'"' {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = j.min(b.len());
            let text = &src[start..end];
            if skip_until.is_none() {
                out.push((line, text.to_owned()));
            }
            line += text.matches('\n').count();
            i = end + 1;
            continue;
        }
        if c == b'\'' {
            // A char literal ('x', '\n', '"') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            let next_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
            if b.get(i + 1 + next_len) == Some(&b'\'') {
                i += 2 + next_len;
                continue;
            }
            i += 1;
            continue;
        }
        match c {
            b'{' => {
                if pending_test && skip_until.is_none() {
                    skip_until = Some(depth);
                }
                pending_test = false;
                depth += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                if skip_until == Some(depth) {
                    skip_until = None;
                }
            }
            b';' if skip_until.is_none() => pending_test = false,
            _ => {}
        }
        i += 1;
    }
    out
}
