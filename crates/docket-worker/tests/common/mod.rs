//! Helpers shared by the runtime tests.
#![allow(dead_code)]

use docket_postgres::PgStore;
use std::sync::Arc;
use std::time::Duration;

use docket_testkit::TestDb;
use docket_worker::{Registry, RunReport, Shutdown, Worker, WorkerConfig};
use tokio::task::JoinHandle;

/// A config for tests: short lease and poll, quick maintenance.
pub fn config(queue: &str, concurrency: usize) -> WorkerConfig {
    let mut c = WorkerConfig::default()
        .queue(queue, concurrency)
        .lease(Duration::from_secs(10))
        // These tests read how each job ended; tests of the default (rows deleted) say so.
        .keep_succeeded(true);
    c.poll_interval = Duration::from_millis(200);
    c.reap_interval = Duration::from_millis(200);
    c.shutdown_timeout = Duration::from_secs(10);
    c.cancel_grace = Duration::from_secs(1);
    c
}

/// A running worker and the means to stop it.
pub struct Running {
    pub worker: Arc<Worker<PgStore>>,
    pub shutdown: Shutdown,
    pub task: JoinHandle<RunReport>,
}

impl Running {
    /// Graceful stop; returns the run's report.
    pub async fn stop(self) -> RunReport {
        self.shutdown.graceful.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("worker stops in time")
            .expect("worker task")
    }
}

/// Starts a worker on its own pool (its own connections, like a separate process).
pub async fn start(db: &TestDb, registry: Registry<PgStore>, config: WorkerConfig) -> Running {
    start_on(db.second_store(8).await, registry, config).await
}

/// Starts a worker on `store`.
pub async fn start_on(
    store: docket_postgres::PgStore,
    registry: Registry<PgStore>,
    config: WorkerConfig,
) -> Running {
    let worker = Arc::new(Worker::new(store, registry, config).expect("worker"));
    let shutdown = Shutdown::default();
    let w = worker.clone();
    let s = shutdown.clone();
    let task = tokio::spawn(async move { w.run(s).await.expect("run") });
    Running {
        worker,
        shutdown,
        task,
    }
}

#[allow(unused_imports)]
pub use docket_testkit::eventually;

/// Count of jobs in `state`.
pub async fn count_state(db: &TestDb, state: &str) -> i64 {
    db.count_state(state).await
}
