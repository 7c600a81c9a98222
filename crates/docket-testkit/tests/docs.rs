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
