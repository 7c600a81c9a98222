//! The `docket` binary; everything is in the library (`src/lib.rs`).

fn main() {
    docket_cli::main();
}
