//! A worker as its own process: the same registry as the web service, more slots, no HTTP.
//! Run as many as you like, on as many machines as you like; each job runs on one of them at
//! a time (leases on the database's clock, every write fenced by the attempt).
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//!   cargo run -p docket-examples --bin worker
//! ```
//! With `DRAIN=1` it exits once the queue is empty (the tests use that).

use docket::prelude::*;
use docket_examples::{registry, start, QUEUE};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = start(20).await?;
    let worker = Worker::new(store, registry(), WorkerConfig::default().queue(QUEUE, 32))?;
    let report = if std::env::var_os("DRAIN").is_some() {
        worker.drain(Shutdown::on_signals()).await?
    } else {
        worker.run(Shutdown::on_signals()).await?
    };
    println!("stopped: {report:?}");
    Ok(())
}
