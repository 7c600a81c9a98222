//! libFuzzer entry for the `workflow_graph` target; the body and its properties are in
//! `docket_fuzz::workflow_graph` (crates/docket-fuzz), which the suite also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| docket_fuzz::workflow_graph(data));
