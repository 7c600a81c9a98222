//! Enqueue inside the application's own SQLite transaction and the streamed bulk enqueue;
//! the rules are [`docket_local::enqueue`].

use std::collections::BTreeSet;

use docket_core::*;
use docket_local::enqueue as rules;
use sqlx::sqlite::SqliteConnection;

use crate::exec::Caller;
use crate::store::SqliteStore;

pub use docket_local::{BulkEnqueued, BULK_CHUNK};

impl SqliteStore {
    /// Enqueues inside the caller's own transaction on `conn` (begun on this store's pool or
    /// any connection to the same file): the job exists iff that transaction commits. The
    /// wake-up of this process's workers is sent when it commits (a commit hook on `conn`).
    /// Begin it with `BEGIN IMMEDIATE` (`pool.begin_with("BEGIN IMMEDIATE")`) when it also
    /// reads: a deferred transaction that read first fails with SQLITE_BUSY when another
    /// writer committed in between.
    pub async fn enqueue_tx(&self, conn: &mut SqliteConnection, job: &NewJob) -> Result<Enqueued> {
        let mut v = self
            .enqueue_many_tx(conn, std::slice::from_ref(job))
            .await?;
        Ok(v.remove(0))
    }

    /// Bulk form of [`SqliteStore::enqueue_tx`].
    pub async fn enqueue_many_tx(
        &self,
        conn: &mut SqliteConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        let mut due = BTreeSet::new();
        let out = rules::insert_in(&mut Caller(conn), self.limits(), jobs, &mut due).await?;
        if out.is_empty() {
            return Ok(out);
        }
        let ids = out
            .iter()
            .filter(|e| !e.duplicate)
            .map(|e| e.id.0)
            .collect();
        crate::tx::on_commit(self, conn, due.into_iter().map(Wake::Queue).collect(), ids).await?;
        Ok(out)
    }

    /// Enqueues every job of `jobs` in one write transaction, [`BULK_CHUNK`] validated at a
    /// time: all of them or, on the first invalid job or error, none. Memory is bounded by
    /// one chunk however long the stream; returns counts, not ids, for the same reason.
    pub async fn enqueue_stream<S>(&self, jobs: S) -> Result<BulkEnqueued>
    where
        S: futures::Stream<Item = NewJob> + Send,
    {
        rules::stream(self, jobs).await
    }

    /// [`SqliteStore::enqueue_stream`] over an iterator.
    pub async fn enqueue_iter<I>(&self, jobs: I) -> Result<BulkEnqueued>
    where
        I: IntoIterator<Item = NewJob>,
        I::IntoIter: Send,
    {
        self.enqueue_stream(futures::stream::iter(jobs)).await
    }
}
