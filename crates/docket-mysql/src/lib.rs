//! Docket's MariaDB / MySQL store: the same queue on InnoDB.
//!
//! The same state machine and guarantees as PostgreSQL, with the SQL MariaDB ≥ 10.6 and
//! MySQL ≥ 8.0.16 share (tested here on MariaDB 10.11):
//!
//! - **Claims** are one short transaction (READ COMMITTED): a shared lock on the queue's row
//!   in `queue_locks` (control changes take it exclusively, so a pause waits for claims in
//!   flight and binds every later one; a limited queue's claims also take its `limit:` row
//!   exclusively, one at a time), the candidates read `FOR UPDATE SKIP LOCKED`, keys decided under a
//!   `SKIP LOCKED` try-lock of their row in `key_locks`, then the lease — select, then
//!   update, since neither server has `UPDATE … RETURNING` in common.
//! - **Fenced writes** read the rows their claim still holds (`FOR UPDATE`: same attempt,
//!   same owner, lease unexpired by the server's clock) and update exactly those.
//! - **One clock**: every time is the server's (`UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3))`), read
//!   once per transaction, stored as milliseconds.
//! - **No LISTEN**: workers poll; an enqueue by this process wakes this process's workers.
//! - **Transactional enqueue**: [`MySqlStore::enqueue_tx`] on the application's own
//!   connection, and [`docket_core::InTransaction`] for handlers.
//!
//! Deadlocks and lock-wait timeouts (errors 1213, 1205) roll the transaction back and retry
//! it; a server that went away is [`docket_core::StoreError::Unavailable`].

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
pub use store::{MySqlStore, IDLE_TRANSACTION_TIMEOUT_S};
pub use tx::MySqlTx;

/// The newest migration this build knows.
pub const SCHEMA_VERSION: i64 = migrate::LATEST;
