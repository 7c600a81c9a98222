//! libFuzzer entry for the `bulk_line` target; the body and its properties are in
//! `docket_fuzz::bulk_line` (crates/docket-fuzz), which the suite also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| docket_fuzz::bulk_line(data));
