//! libFuzzer entry for the `cron` target; the body and its properties are in
//! `docket_fuzz::cron` (crates/docket-fuzz), which the suite also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| docket_fuzz::cron(data));
