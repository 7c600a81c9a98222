//! Docket's SQLite store: the queue in one file, with no server to install.
//!
//! The same state machine and the same guarantees as PostgreSQL, reached differently:
//!
//! - **One writer.** SQLite serialises writers, so every write is one short
//!   `BEGIN IMMEDIATE` transaction: the claim reads the queue's controls, decides which jobs
//!   it may take (limits, keys, rate buckets, the starvation bound) and leases them, with
//!   nothing else able to change the data in between. No SKIP LOCKED, no advisory locks.
//!   Several worker *processes* may share one file (WAL mode); a writer that finds the file
//!   locked waits up to the busy timeout and is then reported as transient (the runtime
//!   retries), never as a failed job.
//! - **One clock.** Every time is read from SQLite (`unixepoch('subsec')`) once per write
//!   transaction and bound to its statements; no worker's clock is ever used.
//! - **No LISTEN.** Workers poll; in addition, an enqueue, retry or cancel made by *this
//!   process* wakes this process's workers at once (an in-process channel per database
//!   file), so a worker and the code that enqueues in one process see no poll delay.
//! - **Transactional enqueue** with the application's own SQLite transaction:
//!   [`SqliteStore::enqueue_tx`] (and the [`docket_core::InTransaction`] capability).
//!
//! Times are stored as integer milliseconds since the epoch; JSON as text. See
//! `docs/engines.md` for what this engine can and cannot do.

#![warn(missing_docs)]

mod claim;
mod enqueue;
mod errors;
mod exec;
mod migrate;
mod store;
mod tx;
mod writes;

pub use docket_core::local::LocalHints;
pub use enqueue::{BulkEnqueued, BULK_CHUNK};
pub use store::{SqliteStore, WriteTx, BUSY_TIMEOUT};
pub use tx::SqliteTx;

/// The newest migration this build knows.
pub const SCHEMA_VERSION: i64 = migrate::LATEST;
