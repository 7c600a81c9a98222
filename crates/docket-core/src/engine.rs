//! The parts of the seam beyond queue operations: what an engine can push to the runtime
//! (wake-ups and cancel hints), and the capability to run a handler inside the transaction
//! that completes it.
//!
//! An engine without push (SQLite, or PostgreSQL behind a transaction-mode pooler with no
//! direct address) says so in [`Store::listen_support`], and the runtime then polls only;
//! an engine without transactions a handler can join does not implement [`InTransaction`],
//! and in-transaction handlers cannot be registered for it (a compile error, not a surprise
//! at run time).

use std::future::Future;

use crate::job::{Enqueued, JobId, Lease, NewJob};
use crate::Result;

#[allow(unused_imports)] // for the doc links
use crate::store::Store;

/// A hint pushed by the engine. Any client that can connect may forge one (PostgreSQL lets
/// every role NOTIFY every channel), so the runtime treats each as a reason to ask the
/// database, never as a fact: a wake-up makes a fetcher claim once, a cancel hint makes the
/// heartbeater beat at once (the beat stops a job only if the database recorded the cancel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// A queue may have due work.
    Queue(String),
    /// A running job may have been cancelled.
    Cancel(JobId),
    /// A job may have finished with an output (woken: [`Store::listen_outputs`]).
    Done(JobId),
    /// A hint the engine could not read (counted, otherwise ignored).
    Unreadable,
}

/// Whether this store can push hints, and if not why (said once at start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenSupport {
    /// [`Store::listen`] works.
    Yes,
    /// Poll only, for this reason.
    No(String),
}

/// An open stream of hints.
pub trait Listener: Send + 'static {
    /// The next hint. `Ok(None)`: the connection dropped; the runtime opens a new listener and
    /// every fetcher claims once, since hints sent in between are gone.
    fn recv(&mut self) -> impl Future<Output = Result<Option<Wake>>> + Send;
}

/// The listener of an engine without push: never yields.
#[derive(Debug)]
pub enum NoListener {}

impl Listener for NoListener {
    async fn recv(&mut self) -> Result<Option<Wake>> {
        match *self {}
    }
}

/// How long a server may keep one of Docket's own transactions open while its client says
/// nothing between two statements, before it ends the connection and releases its row locks.
///
/// A worker cut off by a network partition between two statements of a transaction leaves it
/// open on the server, which cannot tell a silent client from a slow one: the rows it locked
/// stay locked until TCP gives up (hours, by the kernel's default keepalive) — the reaper
/// could not take leases back on MariaDB, and a new leader could enqueue no cron tick on
/// PostgreSQL (both found by `crates/docket-cli/tests/partition.rs`). Docket's own
/// transactions never wait on their client for more than milliseconds, so 5 s only ends dead
/// ones. A handler's transaction ([`InTransaction`]) runs the user's code and is exempt.
/// Each engine applies it its own way (PostgreSQL per transaction, MariaDB per connection).
pub const IDLE_TRANSACTION_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// Capability: a handler's own writes and its job's completion commit together, or neither
/// does (exactly-once for local effects); and jobs can be enqueued inside the caller's
/// transaction (the outbox: the job exists iff the business change commits).
pub trait InTransaction: Store {
    /// An open transaction owned by the runtime.
    type Tx: Send + 'static;
    /// What a handler or an enqueuing caller writes through (`PgConnection` on PostgreSQL).
    type Conn: Send + ?Sized;

    /// Begins a transaction.
    fn begin(&self) -> impl Future<Output = Result<Self::Tx>> + Send;

    /// The connection of an open transaction.
    fn conn(tx: &mut Self::Tx) -> &mut Self::Conn;

    /// Marks the claimed job succeeded inside `tx` (fenced like `complete_many`): a
    /// [`crate::StoreError::LeaseLost`] when another attempt owns it now.
    fn complete_in(
        &self,
        tx: &mut Self::Tx,
        owner: &str,
        lease: Lease,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Marks the claimed job succeeded with its output inside `tx` (fenced as
    /// [`Store::complete_outputs`]): a [`crate::StoreError::LeaseLost`] when another attempt
    /// owns it now.
    fn complete_output_in(
        &self,
        tx: &mut Self::Tx,
        owner: &str,
        output: &crate::Output,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Commits.
    fn commit(tx: Self::Tx) -> impl Future<Output = Result<()>> + Send;

    /// Rolls back.
    fn rollback(tx: Self::Tx) -> impl Future<Output = Result<()>> + Send;

    /// Enqueues a workflow inside the caller's transaction on `conn`: every node and edge
    /// exists iff that transaction commits.
    fn enqueue_workflow_in(
        &self,
        conn: &mut Self::Conn,
        graph: &crate::workflow::Graph,
    ) -> impl Future<Output = Result<crate::WorkflowEnqueued>> + Send;

    /// Opens a batch inside the caller's transaction on `conn` (see
    /// [`crate::Store::open_batch`]): it and its first members exist iff that transaction
    /// commits.
    fn open_batch_in(
        &self,
        conn: &mut Self::Conn,
        spec: &crate::batches::BatchSpec,
    ) -> impl Future<Output = Result<crate::batches::BatchOpened>> + Send;

    /// Adds members to an open batch inside the caller's transaction on `conn` (see
    /// [`crate::Store::add_to_batch`]).
    fn add_to_batch_in(
        &self,
        conn: &mut Self::Conn,
        id: i64,
        jobs: &[crate::batches::JobSpec],
    ) -> impl Future<Output = Result<Vec<crate::JobId>>> + Send;

    /// Enqueues inside the caller's transaction on `conn`.
    fn enqueue_in(
        &self,
        conn: &mut Self::Conn,
        job: &NewJob,
    ) -> impl Future<Output = Result<Enqueued>> + Send;

    /// Writes a message to the outbox inside the caller's transaction on `conn`: it exists,
    /// and is published, iff that transaction commits. Its id.
    fn publish_in(
        &self,
        conn: &mut Self::Conn,
        msg: &crate::outbox::NewMessage,
    ) -> impl Future<Output = Result<i64>> + Send;

    /// Sends a signal inside the caller's transaction on `conn` (as [`Store::signal`]): it
    /// exists, and wakes its job, iff the transaction commits.
    fn signal_in(
        &self,
        conn: &mut Self::Conn,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> impl Future<Output = Result<crate::SignalSent>> + Send;

    /// The args of every job of `kind` the transaction on `conn` has enqueued so far (for
    /// tests that assert what a request enqueued before it commits).
    fn enqueued_in(
        &self,
        conn: &mut Self::Conn,
        kind: &str,
    ) -> impl Future<Output = Result<Vec<serde_json::Value>>> + Send;
}
