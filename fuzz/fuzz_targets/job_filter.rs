//! libFuzzer entry for the `job_filter` target; the body and its properties are in
//! `docket_fuzz::job_filter` (crates/docket-fuzz), which the suite also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| docket_fuzz::job_filter(data));
