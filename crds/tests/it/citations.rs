//! The documents the code cites are in the repository, and the sections it cites exist.
//!
//! - No source, manifest, fixture or script names a document outside the repository (the
//!   background specifications the project started from are not part of it): the names in
//!   [`FORBIDDEN`] fail, with the file and line.
//! - Every `docs/<page>.md` named there exists, and every section, rule or decision cited after a
//!   page name (`docs/design/operator.md §2.2`, `docs/design/principles.md rules 1–3`,
//!   `docs/design/decisions.md §9`) exists in that page: an `## N.` or `### N.M` heading (a
//!   `### §N` heading in `decisions.md`, a numbered rule in `principles.md` §2, a numbered
//!   convention in `conventions.md` §6).
//! - Relative links between the pages of `docs/` resolve to files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What the code scanned here may not cite (documents beside the repository).
const FORBIDDEN: &[&str] = &[
    "operator-spec",
    "render-spec",
    "shared/docs",
    "lessons.md",
    "DESIGN.md",
    "style.md",
    "ADR-0",
];

/// Scanned roots (relative to the repository).
const SCANNED: &[&str] = &[
    "src",
    "kernel",
    "cue",
    "registry",
    "crds",
    "webhooks",
    "certs",
    "kube-emu",
    "modpath",
    "tests",
    "fixtures",
    "scripts",
    "deploy",
    "benches",
    "fuzz",
    "openapi",
    "README.md",
];

/// Files not held to the rules yet, each with why.
const PENDING: &[(&str, &str)] = &[
    ("crds/tests/it/citations.rs", "this test names the forbidden documents"),
];

fn scanned_files() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            if p.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    walk(&p, out);
                }
            } else if [
                ".rs", ".yaml", ".yml", ".cue", ".md", ".sh", ".txtar", ".toml",
            ]
            .iter()
            .any(|x| name.ends_with(x))
            {
                out.push(p);
            }
        }
    }
    let mut paths = Vec::new();
    for s in SCANNED {
        let p = root().join(s);
        if p.is_file() {
            paths.push(p);
        } else {
            walk(&p, &mut paths);
        }
    }
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let rel = p
            .strip_prefix(root())
            .unwrap_or(&p)
            .to_string_lossy()
            .trim_start_matches("./")
            .to_owned();
        if PENDING.iter().any(|(f, _)| *f == rel) {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&p) {
            out.push((rel, text));
        }
    }
    out
}

#[test]
fn nothing_cites_a_document_outside_the_repository() {
    let mut bad = Vec::new();
    for (rel, text) in scanned_files() {
        for (n, line) in text.lines().enumerate() {
            for f in FORBIDDEN {
                if line.contains(f) {
                    bad.push(format!("{rel}:{}: cites {f}", n + 1));
                }
            }
            // `E0015 D5`-style enhancement decision codes (not `\u{E0001}`).
            for (i, _) in line.match_indices("E00") {
                let before = line[..i].chars().last();
                let word_start = before.is_none_or(|c| c.is_whitespace() || c == '(' || c == ',');
                let digits = line[i + 3..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .count();
                if word_start && digits == 2 {
                    bad.push(format!(
                        "{rel}:{}: cites an enhancement decision code",
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "cite docs/ instead (see docs/README.md):\n{}",
        bad.join("\n")
    );
}

/// The section numbers a page has: `N` and `N.M` from its headings (and rule, decision and
/// convention numbers where the page numbers those).
fn sections(page: &str, text: &str) -> (BTreeSet<String>, BTreeSet<u32>) {
    let mut secs = BTreeSet::new();
    let mut items = BTreeSet::new();
    let mut in_list = false;
    for line in text.lines() {
        if let Some(h) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            let h = h.trim_start_matches('§');
            let num: String = h
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.');
            if !num.is_empty() {
                secs.insert(num.to_owned());
            }
            // The numbered list of principles.md §2 (rules) and conventions.md §6.
            in_list = (page == "design/principles.md" && num == "2")
                || (page == "design/conventions.md" && num == "6");
            continue;
        }
        if in_list {
            let t = line.trim_start();
            let num: String = t.chars().take_while(char::is_ascii_digit).collect();
            if !num.is_empty() && t[num.len()..].starts_with(". ") {
                if let Ok(n) = num.parse() {
                    items.insert(n);
                    if page == "design/conventions.md" {
                        secs.insert(format!("6.{n}"));
                    }
                }
            }
        }
    }
    (secs, items)
}

/// The numbers cited in `clause`: `§2.2`, `§2.1–§2.5` (both ends), and after `rule`/`rules`:
/// `1`, `1–3`, `8, 9`.
fn cited(clause: &str) -> (Vec<String>, Vec<u32>) {
    let mut secs = Vec::new();
    for part in clause.split('§').skip(1) {
        let num: String = part
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let num = num.trim_end_matches('.');
        if !num.is_empty() {
            secs.push(num.to_owned());
        }
    }
    let mut rules = Vec::new();
    if let Some(i) = clause.find("rule") {
        let rest = clause[i..]
            .trim_start_matches("rules")
            .trim_start_matches("rule");
        for token in rest.split([' ', ',', '–', '-']) {
            if token.is_empty() || token == "and" {
                continue;
            }
            match token.parse() {
                Ok(n) => rules.push(n),
                Err(_) => break,
            }
        }
    }
    (secs, rules)
}

#[test]
fn every_cited_page_section_and_rule_exists() {
    let docs = root().join("docs");
    let mut bad = Vec::new();
    let mut checked = 0;
    for (rel, text) in scanned_files() {
        // Comment markers and line breaks do not end a clause.
        let flat: String = text
            .lines()
            .map(|l| {
                l.trim_start()
                    .trim_start_matches("//!")
                    .trim_start_matches("///")
                    .trim_start_matches("//")
                    .trim_start_matches('#')
                    .trim()
            })
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = flat.as_str();
        while let Some(i) = rest.find("docs/") {
            // A citation follows a space, `(` or a backtick; `"docs/x.md"` is a path in a test.
            let cites = i == 0 || rest[..i].ends_with([' ', '(', '`']);
            let after = &rest[i + 5..];
            let Some(end) = after.find(".md") else {
                break;
            };
            let page = &after[..end + 3];
            rest = &after[end + 3..];
            if !cites || page.contains(char::is_whitespace) || page.contains('`') {
                continue;
            }
            let Ok(doc) = std::fs::read_to_string(docs.join(page)) else {
                bad.push(format!("{rel}: docs/{page} does not exist"));
                continue;
            };
            // The clause after the page name: up to the next `)`, `;` or `:` (or another page).
            let stop = rest
                .find([')', ';', ':', '('])
                .unwrap_or(rest.len())
                .min(rest.find("docs/").unwrap_or(rest.len()));
            let clause = &rest[..stop];
            let (secs, items) = sections(page, &doc);
            let (want_secs, want_rules) = cited(clause);
            for s in want_secs {
                checked += 1;
                if !secs.contains(&s) {
                    bad.push(format!("{rel}: docs/{page} has no §{s}"));
                }
            }
            if page == "design/principles.md" {
                for r in want_rules {
                    checked += 1;
                    if !items.contains(&r) {
                        bad.push(format!("{rel}: docs/{page} has no rule {r}"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(
        checked > 200,
        "only {checked} citations checked: the scan is broken"
    );
}

#[test]
fn links_between_pages_resolve() {
    fn pages(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                pages(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    pages(&root().join("docs"), &mut all);
    assert!(all.len() >= 10, "docs/ has {} pages", all.len());
    let mut bad = Vec::new();
    for page in all {
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, _) in text.match_indices("](") {
            let target: String = text[i + 2..].chars().take_while(|c| *c != ')').collect();
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || file.contains("://") {
                continue;
            }
            let resolved = page.parent().unwrap().join(file);
            if !resolved.exists() {
                bad.push(format!("{}: link to {target}", page.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_citation_parser_reads_ranges_lists_and_rules() {
    let (s, r) = cited(" §2.1–§2.5, §6.1 and rules 1–3, 8, 9 and 11 ");
    assert_eq!(s, ["2.1", "2.5", "6.1"]);
    assert_eq!(r, [1, 3, 8, 9, 11]);
    let (s, r) = cited(" rule 6 and §1.4");
    assert_eq!(s, ["1.4"]);
    assert_eq!(r, [6]);
    let (secs, items) = sections(
        "design/principles.md",
        "## 1. Lessons\n### 1.8 Kubewarden\n## 2. Rules\n1. **One**\n21. **Last**\n",
    );
    assert!(secs.contains("1.8") && secs.contains("2"));
    assert_eq!(items.into_iter().collect::<Vec<_>>(), [1, 21]);
}
