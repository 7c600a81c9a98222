//! The documentation cites tests as `crates/<file>.rs::<function>`; a renamed or removed test
//! would leave a guarantee resting on nothing. This fails when a cited test does not exist.

use std::path::Path;

#[test]
fn every_test_the_docs_cite_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root.join("README.md"));
    let mut cited = 0;
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for piece in text.split('`').skip(1).step_by(2) {
            let Some((file, item)) = piece.split_once(".rs::") else {
                continue;
            };
            if !file.starts_with("crates/") {
                continue;
            }
            let name = item.rsplit("::").next().unwrap_or(item);
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            cited += 1;
            let path = root.join(format!("{file}.rs"));
            let ok = std::fs::read_to_string(&path).is_ok_and(|src| {
                // A test, a generic conformance case (`fn name<H: Harness>(`), or a field.
                src.contains(&format!("fn {name}("))
                    || src.contains(&format!("fn {name}<"))
                    || src.contains(&format!("{name}:"))
            });
            if !ok {
                missing.push(format!("{}: {file}.rs::{item}", doc.display()));
            }
        }
    }
    assert!(
        cited > 100,
        "only {cited} citations found: the parser is broken"
    );
    assert!(
        missing.is_empty(),
        "cited tests that do not exist:\n{}",
        missing.join("\n")
    );
}

/// The Markdown files of the project (README, CHANGELOG, docs/, examples/, the crates'
/// READMEs).
fn markdown_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    for dir in ["docs", "examples"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    for e in std::fs::read_dir(root.join("crates")).unwrap() {
        let p = e.unwrap().path().join("README.md");
        if p.exists() {
            out.push(p);
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The targets of Markdown links `](target)` in `text`, code spans and blocks left out.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Drop inline code spans: a `](x)` inside one is an example, not a link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// A newcomer follows the README's links to everything else: every relative link in the
/// project's Markdown must name a file that exists and, with `#anchor`, a heading in it.
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut checked = 0;
    let mut broken = Vec::new();
    for doc in markdown_files(&root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, frag) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            checked += 1;
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            }
            if frag.is_empty() || path.is_dir() {
                continue;
            }
            let body = std::fs::read_to_string(&path).unwrap_or_default();
            let found = body
                .lines()
                .filter_map(|l| l.strip_prefix('#'))
                .map(|l| anchor(l.trim_start_matches('#')))
                .any(|a| a == frag);
            if !found {
                broken.push(format!("{}: {target} (no such heading)", doc.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: the parser is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_the_rules_of_github_headings() {
    assert_eq!(anchor(" Try it"), "try-it");
    assert_eq!(
        anchor("The dashboard beyond loopback"),
        "the-dashboard-beyond-loopback"
    );
    assert_eq!(
        anchor("Results, 2026-12-05 (a, b)"),
        "results-2026-12-05-a-b"
    );
    assert_eq!(
        link_targets("see [a](x.md#y) and `[b](z.md)`"),
        vec!["x.md#y".to_string()]
    );
}
