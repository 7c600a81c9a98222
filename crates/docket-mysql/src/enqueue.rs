//! Enqueue inside the application's own transaction and the streamed bulk enqueue; the
//! rules are [`docket_local::enqueue`].

use std::collections::BTreeSet;

use docket_core::*;
use docket_local::enqueue as rules;
use sqlx::mysql::MySqlConnection;

use crate::exec::Caller;
use crate::store::MySqlStore;

pub use docket_local::{BulkEnqueued, BULK_CHUNK};

impl MySqlStore {
    /// Enqueues inside the caller's own transaction on `conn` (any connection to the same
    /// database): the job exists iff that transaction commits. This process's workers find
    /// it at their next poll, or at once when the caller calls [`MySqlStore::wake`] after
    /// committing (the server has no notification that waits for a commit).
    pub async fn enqueue_tx(&self, conn: &mut MySqlConnection, job: &NewJob) -> Result<Enqueued> {
        let one = std::slice::from_ref(job);
        Ok(self.enqueue_many_tx(conn, one).await?.remove(0))
    }

    /// Bulk form of [`MySqlStore::enqueue_tx`].
    pub async fn enqueue_many_tx(
        &self,
        conn: &mut MySqlConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        rules::insert_in(&mut Caller(conn), self.limits(), jobs, &mut BTreeSet::new()).await
    }

    /// Enqueues every job of `jobs` in one transaction, [`BULK_CHUNK`] validated at a
    /// time: all of them or, on the first invalid job or error, none. Memory is bounded by
    /// one chunk however long the stream; returns counts, not ids, for the same reason.
    pub async fn enqueue_stream<S>(&self, jobs: S) -> Result<BulkEnqueued>
    where
        S: futures::Stream<Item = NewJob> + Send,
    {
        rules::stream(self, jobs).await
    }

    /// [`MySqlStore::enqueue_stream`] over an iterator.
    pub async fn enqueue_iter<I>(&self, jobs: I) -> Result<BulkEnqueued>
    where
        I: IntoIterator<Item = NewJob>,
        I::IntoIter: Send,
    {
        self.enqueue_stream(futures::stream::iter(jobs)).await
    }
}
