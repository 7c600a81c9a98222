//! libFuzzer entry for the `conninfo` target; the body and its properties are in
//! `docket_fuzz::conninfo` (crates/docket-fuzz), which the suite also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| docket_fuzz::conninfo(data));
