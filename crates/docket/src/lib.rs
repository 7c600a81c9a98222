//! Docket: a background-job queue that lives in the database you already run.
//!
//! One crate to depend on. With the default feature `postgres` it holds everything an
//! application needs:
//!
//! ```no_run
//! use docket::prelude::*;
//! use serde::{Deserialize, Serialize};
//! # mod mailer {
//! #     pub async fn send(_user: i64, _key: docket::JobId) -> Result<(), std::io::Error> { Ok(()) }
//! # }
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendWelcome { user_id: i64 }
//!
//! impl Job for SendWelcome {
//!     const KIND: &'static str = "send_welcome";
//!     const QUEUE: &'static str = "email";
//!     async fn run(self, ctx: JobContext) -> JobResult {
//!         mailer::send(self.user_id, ctx.id).await?;          // ctx.id: the idempotency key
//!         Ok(())
//!     }
//! }
//!
//! # async fn quickstart(url: &str) -> Result<(), Box<dyn std::error::Error>> {
//! let store = PgStore::connect(url, "docket", 10).await?;
//! store.migrate().await?;
//! store.enqueue_job(&SendWelcome { user_id: 42 }).await?;   // queue and kind from the type
//! let mut tx = store.pool().begin().await?;
//! store.enqueue_job_in(&mut tx, &SendWelcome { user_id: 43 }).await?; // iff tx commits
//! tx.commit().await?;
//!
//! let mut registry = Registry::default();
//! registry.register::<SendWelcome>();
//! Worker::new(store, registry, WorkerConfig::default().queue("email", 10))?
//!     .run(Shutdown::on_signals())
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! Delivery is at-least-once: a job can run again after a crash, so external effects use
//! `ctx.id` as their idempotency key, or run as a [`TxJob`] inside the transaction that
//! completes them.
//!
//! # Features
//! - `postgres` (default): [`PgStore`], migrations, connection strings (TLS, poolers).
//! - `sqlite`: `SqliteStore`, the queue in one file (no server); see docs/engines.md.
//! - `mysql`: `MySqlStore`, on MariaDB >= 10.6 or MySQL >= 8.0.16; see docs/engines.md.
//!
//! Without features the crate is engine-independent: job types, states, validation, typed
//! errors, the [`Store`] seam an engine implements (with the [`InTransaction`] and
//! [`Listener`] capabilities), and the worker runtime, [`Worker<S>`](Worker) over any
//! store.
//!
//! # Testing an application
//! [`testing`] runs a job inline against a real database, drains queues, and shows what an
//! open transaction has enqueued.

#![warn(missing_docs)]

pub use docket_core as core;
/// Sets of jobs with callbacks: [`batches::Batch`], [`batches::JobSpec`], the callbacks'
/// [`batches::BatchResult`] (docs/workflows.md, "Batches with callbacks").
pub use docket_core::batches;
/// Graphs of jobs: [`workflow::Workflow`], the JSON [`workflow::Graph`], failure policies
/// (docs/workflows.md).
pub use docket_core::workflow;
pub use docket_core::{
    Backoff, CancelOutcome, ClaimRequest, ClaimedJob, Enqueued, Failure, FailureClass,
    InTransaction, JobFilter, JobId, JobRecord, JobState, KeyLimit, Lease, LeaseLost,
    ListenSupport, Listener, LostReason, NewJob, Periodic, QueueLimits, RateLimit, Retention,
    Store, StoreError, ValidationError, Wake,
};
pub use docket_core::{Batch, BatchResult, Limits};

#[cfg(feature = "mysql")]
pub use docket_mysql as mysql;
#[cfg(feature = "mysql")]
pub use docket_mysql::MySqlStore;
#[cfg(feature = "postgres")]
pub use docket_postgres as postgres;
#[cfg(feature = "postgres")]
pub use docket_postgres::{migrate, ConnectError, PgStore, PoolerMode};
#[cfg(feature = "sqlite")]
pub use docket_sqlite as sqlite;
#[cfg(feature = "sqlite")]
pub use docket_sqlite::SqliteStore;
pub use docket_worker::{
    new_job, new_tx_job, testing, ConfigError, EnqueueJob, Job, JobContext, JobError, JobResult,
    OutputError, Outputs, QueueConfig, Registry, RunReport, Shutdown, Signal, StopReason, TxJob,
    Worker, WorkerConfig, WorkerError,
};

/// The names an application uses all day: `use docket::prelude::*;`. Includes the [`Store`]
/// trait (so `store.enqueue(..)` resolves), [`EnqueueJob`] (typed enqueue) and [`Outputs`]
/// (typed results: `store.output::<T>(id)`, `store.wait_output::<T>(id, timeout)`).
pub mod prelude {
    pub use docket_core::workflow::Workflow;
    pub use docket_core::Batch;
    pub use docket_core::{InTransaction, JobId, JobState, NewJob, Store, StoreError};
    #[cfg(feature = "postgres")]
    pub use docket_postgres::PgStore;
    pub use docket_worker::{
        EnqueueJob, Job, JobContext, JobError, JobResult, Outputs, Registry, Shutdown, TxJob,
        Worker, WorkerConfig,
    };
}
