//! Docket's worker runtime: the part an application embeds to run jobs.
//!
//! # Layout
//! - [`job`]: the handler API — typed [`Job`]s and in-transaction [`TxJob`]s, their
//!   [`JobContext`] (with the stable job id to use as an idempotency key) and [`JobError`]
//!   outcomes (retry, discard, snooze, cancel).
//! - [`registry`]: handlers by kind (plus a fallback for `docket work --exec`).
//! - [`outputs`]: typed reads of what handlers recorded with `JobContext::set_output`.
//! - [`config`]: [`WorkerConfig`], every knob with its default.
//! - [`worker`]: [`Worker`], which wires the services below and handles shutdown and drain.
//! - Services, each with a `run_once` for tests: the fetcher (claims sized to free slots),
//!   the executor (timeouts, panics, cancellation), the completer (batched fenced writes),
//!   the heartbeater (batched lease extension; stops handlers whose lease is lost), the
//!   notifier (LISTEN with reconnect; notifications are hints, polling is the fallback) and
//!   [`maintenance`] (leader election, reaper, pruner).
//!
//! Delivery is **at-least-once**: a crash after a side effect, or a lost lease, runs the job
//! again. Use [`JobContext::id`] to make external effects idempotent, or a [`TxJob`] for
//! exactly-once local database effects.

#![warn(missing_docs)]

mod completer;
pub mod config;
mod enqueue;
mod executor;
pub mod external;
mod faults;
mod fetcher;
mod heartbeat;
mod intx;
pub mod job;
pub mod maintenance;
pub mod metrics;
mod notifier;
pub mod outputs;
mod pace;
mod presence;
pub mod registry;
mod runtime;
mod service;
mod shutdown;
mod steps;
mod supervisor;
pub mod telemetry;
pub mod testing;
pub mod trace;
mod tracker;
pub mod worker;

pub use config::{ConfigError, QueueConfig, WorkerConfig};
pub use enqueue::{new_job, new_tx_job, EnqueueJob};
pub use heartbeat::BeatReport;
pub use job::{Job, JobContext, JobError, JobResult, Signal, StopReason, TxJob};
pub use outputs::{OutputError, Outputs};
pub use registry::Registry;
pub use worker::{RunReport, Shutdown, Worker, WorkerError};
