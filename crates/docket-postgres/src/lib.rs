//! Docket's PostgreSQL store.
//!
//! # Layout
//! - [`mod@migrate`]: numbered, embedded migrations into a dedicated schema, serialised by an
//!   advisory lock so any number of processes may run them at once.
//! - [`queries`]: the registry of `sql/*.sql`, one file per statement.
//! - [`store`]: [`PgStore`], the [`docket_core::Store`] implementation plus the
//!   PostgreSQL-only extras (transactional enqueue, in-transaction completion, EXPLAIN).
//! - [`engine`]: leader election, LISTEN hints ([`engine::PgHints`]) and the
//!   [`docket_core::InTransaction`] capability.
//! - [`connect`]: connection strings (URL or key=value), TLS, transaction-mode poolers, and
//!   connection failures named by their cause; [`redact`] keeps passwords out of messages.
//! - [`roles`]: the least-privilege role model (application, worker, operator) and its
//!   grant script.
//! - [`errors`]: how database errors map onto [`docket_core::StoreError`].
//! - [`schema_dump`]: the current shape of a migrated schema (checked in as
//!   `schema/current.sql`, so the present definition of every object is in one place).

#![warn(missing_docs)]

mod batches;
pub mod connect;
pub mod controls;
pub mod engine;
mod enqueue;
pub mod errors;
mod explain;
mod health;
mod inspect;
pub mod migrate;
mod outbox;
mod outputs;
pub mod queries;
/// Re-exported from the core (stored errors are redacted there too).
pub use docket_core::redact;
pub mod roles;
mod rows;
mod scan_hint;
#[doc(hidden)]
pub use scan_hint::HintRules;
pub mod schema_dump;
mod steps;
pub mod store;
mod why;
mod workers;
mod workflows;
mod writes;

pub use connect::{ConnectError, PoolerMode};
pub use docket_core as core;
#[doc(hidden)]
pub use enqueue::encode_copy;
pub use migrate::migrate;
pub use store::PgStore;

/// The default schema name.
pub const DEFAULT_SCHEMA: &str = "docket";
