//! libFuzzer entry for the `durations` target; the body and its properties are in
//! `docket_fuzz::durations` (crates/docket-fuzz), which the suite also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| docket_fuzz::durations(data));
