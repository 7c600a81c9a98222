//! libFuzzer entry for the `batch_spec` target; the body and its properties are in
//! `docket_fuzz::batch_spec` (crates/docket-fuzz), which the suite also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| docket_fuzz::batch_spec(data));
