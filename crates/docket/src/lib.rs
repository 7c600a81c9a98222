//! Docket: a background-job queue that lives in the database you already run.
//!
//! One crate to depend on. With the default feature `postgres` it holds everything an
//! application needs:
//!
//! ```text
//! use docket::prelude::*;
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
//! let store = PgStore::connect(&url, "docket", 10).await?;
//! docket::migrate(store.pool(), "docket").await?;
//! store.enqueue_job(&SendWelcome { user_id: 42 }).await?;   // queue and kind from the type
//!
//! let mut registry = Registry::default();
//! registry.register::<SendWelcome>();
//! Worker::new(store, registry, WorkerConfig::default().queue("email", 10))?
//!     .run(Shutdown::on_signals())
//!     .await?;
//! ```
//!
//! Delivery is at-least-once: a job can run again after a crash, so external effects use
//! `ctx.id` as their idempotency key, or run as a [`TxJob`] inside the transaction that
//! completes them.
//!
//! # Features
//! - `postgres` (default): [`PgStore`], migrations, connection strings (TLS, poolers), and
//!   the worker runtime ([`Worker`]), which runs on PostgreSQL today.
//!
//! Without features the crate is the engine-independent core: job types, states,
//! validation, typed errors and the [`Store`] seam an engine implements.
//!
//! # Testing an application
//! [`testing`] runs a job inline against a real database, drains queues, and shows what an
//! open transaction has enqueued.

pub use docket_core as core;
pub use docket_core::{
    Backoff, CancelOutcome, ClaimRequest, ClaimedJob, Enqueued, Failure, FailureClass, JobFilter,
    JobId, JobRecord, JobState, KeyLimit, Lease, LeaseLost, LostReason, NewJob, Periodic,
    QueueLimits, RateLimit, Retention, Store, StoreError, ValidationError,
};

#[cfg(feature = "postgres")]
pub use docket_postgres as postgres;
#[cfg(feature = "postgres")]
pub use docket_postgres::{migrate, ConnectError, PgStore, PoolerMode};
#[cfg(feature = "postgres")]
pub use docket_worker::{
    new_job, new_tx_job, testing, ConfigError, EnqueueJob, Job, JobContext, JobError, JobResult,
    QueueConfig, Registry, RunReport, Shutdown, StopReason, TxJob, Worker, WorkerConfig,
    WorkerError,
};

/// The names an application uses all day: `use docket::prelude::*;`. Includes the [`Store`]
/// trait (so `store.enqueue(..)` resolves) and [`EnqueueJob`] (typed enqueue).
pub mod prelude {
    pub use docket_core::{JobId, JobState, NewJob, Store, StoreError};
    #[cfg(feature = "postgres")]
    pub use docket_postgres::PgStore;
    #[cfg(feature = "postgres")]
    pub use docket_worker::{
        EnqueueJob, Job, JobContext, JobError, JobResult, Registry, Shutdown, TxJob, Worker,
        WorkerConfig,
    };
}
