//! What an engine supplies to the rules: its connections and transactions, its clock (read
//! inside each write transaction), its in-process hints, and the few operations whose
//! *shape* differs between engines because they lock differently — the claim (SQLite's one
//! writer against MariaDB's row locks with SKIP LOCKED) and the batch writes that follow it.
//! Everything else — what a failure becomes, what a control writes, how a row reads — is
//! decided once in this crate.

use std::future::Future;
use std::time::Duration;

use docket_core::*;

use crate::exec::Conn;

/// A transaction the rules write (or read) through.
pub trait Tx: Conn + Sized {
    /// The database's now (ms since the epoch), read once when the transaction began.
    fn now(&self) -> i64;

    /// Commits.
    fn commit(self) -> impl Future<Output = Result<()>> + Send;
}

/// An engine that keeps the queue's rules in this crate.
pub trait Engine: BatchWrites + Clone + Send + Sync + 'static {
    /// A write transaction.
    type Tx: Tx;
    /// A read-only transaction (one snapshot for several reads).
    type ReadTx: Tx;
    /// The pool, for single reads.
    type Reader: Conn;

    /// The size limits in force.
    fn limits(&self) -> &Limits;
    /// Who operator actions are recorded as.
    fn actor(&self) -> String;
    /// This database's in-process hints.
    fn hub(&self) -> &docket_core::local::Hub;

    /// Tells this process's workers (a hint).
    fn hint(&self, w: Wake) {
        self.hub().send(w);
    }

    /// Begins a write transaction and reads the database's now inside it.
    fn begin(&self) -> impl Future<Output = Result<Self::Tx>> + Send;
    /// Begins a read transaction and reads the database's now inside it.
    fn begin_read(&self) -> impl Future<Output = Result<Self::ReadTx>> + Send;
    /// The pool.
    fn reader(&self) -> Self::Reader;

    /// Runs `op` to its end whether or not the caller keeps waiting, where the driver
    /// cannot have a statement cut short (MariaDB's: see `MySqlStore::detached`); inline
    /// elsewhere.
    fn detach<T: Send + 'static>(
        &self,
        op: impl Future<Output = Result<T>> + Send + 'static,
    ) -> impl Future<Output = Result<T>> + Send;

    /// Serialises a control change on `queue` against claims that read its controls
    /// (MariaDB: the queue's lock row, exclusively; SQLite: the single writer already does).
    fn lock_queue(tx: &mut Self::Tx, queue: &str) -> impl Future<Output = Result<()>> + Send;

    // ---- operations whose shape is the engine's ----

    /// Creates or upgrades the schema.
    fn migrate(&self) -> impl Future<Output = Result<()>> + Send;
    /// Claims (see `Store::claim`; the choice itself is [`crate::claim::choose`]).
    fn claim(&self, req: &ClaimRequest) -> impl Future<Output = Result<Vec<ClaimedJob>>> + Send;
    /// Table statistics, where the engine keeps any.
    fn table_health(&self) -> impl Future<Output = Result<Option<TableStats>>> + Send;
}

/// The fenced batch writes after a claim, in the engine's shape (SQLite: all-or-nothing
/// autocommit statements over JSON batches; MariaDB: rows locked by primary key, then
/// written by id). Sorting, the explanation of lost leases and the hints are the rules'
/// ([`crate::writes`]).
pub trait BatchWrites {
    /// Completes (fenced); the leases applied.
    fn complete(
        &self,
        owner: &str,
        sorted: &[Lease],
    ) -> impl Future<Output = Result<Vec<Lease>>> + Send;
    /// Completes by deleting (fenced); the leases applied.
    fn complete_delete(
        &self,
        owner: &str,
        sorted: &[Lease],
    ) -> impl Future<Output = Result<Vec<Lease>>> + Send;
    /// Snoozes or releases (fenced); the leases applied and the queues with work due now.
    fn snooze(
        &self,
        owner: &str,
        sorted: &[Snooze],
    ) -> impl Future<Output = Result<(Vec<Lease>, Vec<String>)>> + Send;
    /// Extends leases (fenced); the leases extended with whether a cancel was requested,
    /// and the new expiry (ms).
    fn extend(
        &self,
        owner: &str,
        sorted: &[Lease],
        lease: Duration,
    ) -> impl Future<Output = Result<(Vec<(Lease, bool)>, i64)>> + Send;
}
