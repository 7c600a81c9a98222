//! Helpers for an application's own tests (the counterpart of River's `rivertest` and
//! `Oban.Testing`), against a real database as Docket's own tests are:
//!
//! - [`run_job`]: enqueue one typed job and run it to its end with a worker of its own;
//! - [`drain`]: run a registry over some queues until nothing in them is ready or running;
//! - [`enqueued_in`]: what the caller's open transaction has enqueued so far (assert that a
//!   request handler enqueued its email, before it commits).
//!
//! Workers started here poll every 20 ms, do not LISTEN, run no maintenance, prefetch
//! nothing and keep succeeded jobs, so a test sees each job run promptly, in claim order, and
//! can read how it ended.

use std::time::Duration;

use docket_core::{InTransaction, JobRecord, Store, StoreError};

use crate::enqueue::new_job;
use crate::job::Job;
use crate::registry::Registry;
use crate::worker::{RunReport, Shutdown, Worker, WorkerError};
use crate::WorkerConfig;

/// A worker configuration for tests: `queues` × `concurrency`, fast poll, no LISTEN, no
/// maintenance, no prefetch.
pub fn config(queues: &[&str], concurrency: usize) -> WorkerConfig {
    let mut c = WorkerConfig::default();
    for q in queues {
        c = c.queue(q, concurrency);
    }
    c.poll_interval = Duration::from_millis(20);
    c.listen = false;
    c.maintenance = false;
    c.prefetch = 0;
    // A test reads what became of its job: the succeeded row stays.
    c.keep_succeeded = true;
    c
}

/// Runs `registry` over `queues` until no job in them is ready or running.
pub async fn drain<S: Store>(
    store: &S,
    registry: Registry<S>,
    queues: &[&str],
) -> Result<RunReport, WorkerError> {
    Worker::new(store.clone(), registry, config(queues, 10))?
        .drain(Shutdown::default())
        .await
}

/// Enqueues `job` in a queue of its own and runs it (retries included, their backoff
/// shortened to 10 ms) until it ends; returns its final record. A retry scheduled further
/// ahead than a test should wait ends the run with the job still pending.
pub async fn run_job<S: Store, J: Job>(store: &S, job: J) -> Result<JobRecord, WorkerError> {
    let queue = format!("test-{}", uuid_ish());
    let mut new = new_job(&job)?;
    new.queue = queue.clone();
    let new = new.backoff(docket_core::Backoff {
        base: Duration::from_millis(10),
        cap: Duration::from_millis(10),
    });
    let id = store.enqueue(&new).await?.id;
    let mut registry = Registry::default();
    registry.register::<J>();
    loop {
        drain(store, registry.clone(), &[&queue]).await?;
        let rec = store.get(id).await?;
        let wait = rec.run_at - chrono::Utc::now();
        if rec.state.is_terminal() || wait > chrono::Duration::seconds(1) {
            return Ok(rec);
        }
        // Pending with a retry due within the second: drain again when it is due (the
        // database's clock may differ a little from ours; the next drain finds it either way).
        tokio::time::sleep(wait.to_std().unwrap_or(Duration::ZERO)).await;
    }
}

/// The args of every job of `kind` that the transaction on `conn` has enqueued (and not yet
/// committed, or committed by this transaction: rows written by it).
pub async fn enqueued_in<S: InTransaction>(
    store: &S,
    conn: &mut S::Conn,
    kind: &str,
) -> Result<Vec<serde_json::Value>, StoreError> {
    store.enqueued_in(conn, kind).await
}

fn uuid_ish() -> String {
    use rand::Rng;
    format!("{:016x}", rand::thread_rng().gen::<u64>())
}
