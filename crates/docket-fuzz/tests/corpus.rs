//! Every fuzz target's seed corpus (`fuzz/corpus/<target>`) and every input a fuzzer ever
//! found failing (`fuzz/regressions/<target>`), replayed through the same target bodies the
//! libFuzzer binaries run: a fixed finding stays fixed without a fuzzer in the loop.

use std::path::PathBuf;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

#[test]
fn every_target_has_a_seed_corpus_and_a_binary() {
    for (name, _) in docket_fuzz::TARGETS {
        assert!(
            inputs("corpus", name).len() >= 3,
            "fuzz/corpus/{name} needs seeds"
        );
        let bin = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let src = std::fs::read_to_string(&bin).unwrap_or_default();
        assert!(
            src.contains(&format!("docket_fuzz::{name}(")),
            "{} must call docket_fuzz::{name}",
            bin.display()
        );
    }
}

#[test]
fn seeds_and_past_findings_hold_their_properties() {
    let mut ran = 0;
    for (name, body) in docket_fuzz::TARGETS {
        for kind in ["corpus", "regressions"] {
            for (path, bytes) in inputs(kind, name) {
                let outcome = std::panic::catch_unwind(|| body(&bytes));
                assert!(outcome.is_ok(), "{name} fails on {}", path.display());
                ran += 1;
            }
        }
    }
    assert!(ran >= 3 * docket_fuzz::TARGETS.len(), "only {ran} inputs");
}
