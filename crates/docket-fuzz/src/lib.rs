//! The bodies of Docket's fuzz targets: each takes arbitrary bytes, feeds them to a parser of
//! hostile input, and panics only when a property the parser promises does not hold (a
//! panic inside the parser is a finding too). The libFuzzer binaries under `fuzz/` call
//! these functions, and `tests/corpus.rs` replays the seed corpus and every past finding
//! through them in the ordinary suite, so a regression fails `cargo test` without a fuzzer.
//!
//! Run the fuzzer itself with `scripts/fuzz.sh` (stable toolchain, no sanitizer) or, where
//! cargo-fuzz is installed, `cargo fuzz run <target>` in this repository's root.

#![warn(missing_docs)]

mod conninfo;
mod cron;
mod durations;
mod filter;
mod workflows;

pub use conninfo::conninfo;
pub use cron::cron;
pub use durations::durations;
pub use filter::job_filter;
pub use workflows::{batch_spec, workflow_graph};

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// Every target by the name of its binary and corpus directory (`fuzz/corpus/<name>`).
pub const TARGETS: &[(&str, Target)] = &[
    ("bulk_line", bulk_line),
    ("conninfo", conninfo),
    ("durations", durations),
    ("cron", cron),
    ("job_filter", job_filter),
    ("workflow_graph", workflow_graph),
    ("batch_spec", batch_spec),
];

/// Lines of a bulk (NDJSON) file: each is a blank line, a job that passes the validation
/// every entry point applies, or an error — never a panic.
pub fn bulk_line(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.lines() {
        if let Ok(Some(job)) = docket_core::bulk::parse_line(line) {
            let checked = docket_core::validate::new_job(&job, &Default::default());
            assert!(
                checked.is_ok(),
                "{line:?} parsed to an invalid job: {checked:?}"
            );
        }
    }
}
