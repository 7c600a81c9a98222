//! Docket's engine-independent core.
//!
//! # Layout
//! - [`job`]: identifiers, states, the shape of a job to enqueue and of a claimed job.
//! - [`validate`]: the limits every entry point checks *before* any write.
//! - [`error`]: typed errors, including [`LeaseLost`], the signal that a fenced write matched
//!   nothing because another worker (or the reaper) owns the job now.
//! - [`store`]: the storage seam, one method per queue operation, so engines other than
//!   PostgreSQL can be added without touching the runtime; [`engine`]: pushed hints
//!   (LISTEN) and the in-transaction capability.
//! - [`control`]: queue pause, concurrency and rate limits, key limits.
//! - [`periodic`]: cron schedules with a time zone and the missed-tick policy.
//! - [`redact`]: passwords out of anything printed, logged or stored.
//! - [`mutants`]: deliberately broken variants (test builds only) that prove the suite can fail.
//! - [`workers`]: the registry of live worker processes.
//! - [`inspect`]: bounded reads and bulk actions for operators (search, overview, dead
//!   groups, throughput samples, the audit log).
//! - [`why`]: every gate that holds a pending job ("why is this job not running?").
//! - [`output`]: a handler's result, stored by the fenced completion and kept for a window.
//! - [`progress`]: a running job's reported progress, written with its heartbeat.
//! - [`steps`]: memoized steps, recorded once per job under the claim's fence.
//! - [`signals`]: signals a job waits for, parked, and the fenced park.
//! - [`bulk`]: one line of a bulk (NDJSON) file, parsed and validated.
//! - [`workflow`]: graphs of jobs (dependencies with failure policies), checked before any
//!   write; readiness is a counter consumed by each parent's fenced end.
//! - [`outbox`]: messages for NATS JetStream written in the application's transaction,
//!   published by a relay under a lease and a fence, in order within a key.
//! - [`duration`]: parsing of human durations ("30s", "7d") with bounds.
//!
//! Delivery is **at-least-once**: a job may run more than once (a crash after a side effect,
//! a lost lease). Handlers get the stable [`JobId`] to use as an idempotency key.

#![warn(missing_docs)]

pub mod batches;
pub mod bulk;
pub mod control;
pub mod duration;
pub mod engine;
pub mod error;
pub mod error_groups;
pub mod health;
pub mod histogram;
pub mod inspect;
pub mod job;
pub mod local;
pub mod mutants;
pub mod outbox;
pub mod output;
pub mod periodic;
pub mod progress;
pub mod redact;
pub mod search_text;
pub mod signals;
pub mod steps;
pub mod store;
pub mod validate;
pub mod why;
pub mod workers;
pub mod workflow;

pub use batches::{Batch, BatchOpened, BatchResult, BatchSpec, BatchStatus};
pub use control::*;
pub use engine::{InTransaction, ListenSupport, Listener, NoListener, Wake};
pub use error::{LeaseLost, LostReason, StoreError, ValidationError};
pub use error_groups::{ErrorGroup, ErroredJob};
pub use health::{BlockedReason, DepthSample, QueueHealth};
pub use inspect::{
    AuditEntry, BulkAction, BulkReport, Count, DeadGroup, FieldEq, JobPage, JobQuery, Overview,
    PendingPhase, QueueSummary, Sample, MAX_PAGE,
};
pub use job::*;
pub use output::{JobOutput, Output};
pub use periodic::*;
pub use progress::{JobProgress, Progress};
pub use signals::{Park, SignalSent};
pub use steps::{StepRecord, StepRecorded, StepWrite};
pub use store::*;
pub use validate::Limits;
pub use why::{Gate, WhyReport};
pub use workers::{LeaderLease, Registry, WorkerBeat, WorkerInfo, WorkerStatus};
pub use workflow::{DepOutput, NodeDone, Workflow, WorkflowEnqueued};

/// Result alias for store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
