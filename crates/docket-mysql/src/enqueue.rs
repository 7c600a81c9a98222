//! Enqueue: validated first (nothing is written when any job of a batch is bad), then one
//! insert per job inside one transaction; a unique key held by an unfinished job returns
//! that job (`duplicate`), also between two jobs of one batch.

use std::collections::BTreeSet;

use docket_core::*;
use sqlx::mysql::MySqlConnection;

use crate::errors::{db_err, is_unique_violation};
use crate::rows::ms_of;
use crate::store::{ms, MySqlStore};

const INSERT: &str = include_str!("../sql/enqueue_insert.sql");
const UNIQUE_HOLDER: &str = include_str!("../sql/unique_holder.sql");

/// Jobs validated at a time by [`MySqlStore::enqueue_stream`].
pub const BULK_CHUNK: usize = 10_000;

/// What a streamed bulk enqueue wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkEnqueued {
    /// New jobs.
    pub inserted: u64,
    /// Jobs whose unique key an unfinished job held (not inserted).
    pub duplicates: u64,
}

fn validate_batch(jobs: &[NewJob], limits: &Limits) -> Result<()> {
    for (index, job) in jobs.iter().enumerate() {
        validate::new_job(job, limits).map_err(|e| {
            if jobs.len() == 1 {
                e
            } else {
                ValidationError::InBatch {
                    index,
                    error: Box::new(e),
                }
            }
        })?;
    }
    Ok(())
}

fn run_at(job: &NewJob, now: i64) -> i64 {
    match job.schedule {
        Schedule::Now => now,
        Schedule::Delay(d) => now.saturating_add(ms(d)),
        Schedule::At(t) => ms_of(t),
    }
}

/// Inserts validated `jobs` on `conn` (inside a write transaction) at database time `now`;
/// returns the results in input order and adds the queues with due work to `due`.
pub(crate) async fn insert(
    conn: &mut MySqlConnection,
    now: i64,
    jobs: &[NewJob],
    due: &mut BTreeSet<String>,
) -> Result<Vec<Enqueued>> {
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        let at = run_at(job, now);
        let res = sqlx::query(INSERT)
            .bind(&job.queue)
            .bind(&job.kind)
            .bind(job.args.to_string())
            .bind(job.priority)
            .bind(at)
            .bind(job.max_attempts)
            .bind(&job.unique_key)
            .bind(job.metadata.to_string())
            .bind(job.backoff.map(|b| ms(b.base)))
            .bind(job.backoff.map(|b| ms(b.cap)))
            .bind(&job.ordering_key)
            .bind(&job.concurrency_key)
            .bind(now)
            .execute(&mut *conn)
            .await;
        match res {
            Ok(r) => {
                if at <= now {
                    due.insert(job.queue.clone());
                }
                out.push(Enqueued {
                    id: JobId(r.last_insert_id() as i64),
                    duplicate: false,
                });
            }
            // The statement alone was rolled back; the transaction goes on.
            Err(e) if is_unique_violation(&e) && job.unique_key.is_some() => {
                let key = job.unique_key.as_deref().unwrap_or_default();
                let holder: Option<i64> = sqlx::query_scalar(UNIQUE_HOLDER)
                    .bind(key)
                    .fetch_optional(&mut *conn)
                    .await
                    .map_err(db_err)?;
                match holder {
                    Some(id) => out.push(Enqueued {
                        id: JobId(id),
                        duplicate: true,
                    }),
                    // The holder finished in between: let the caller's retry insert it.
                    None => {
                        return Err(StoreError::Unavailable(
                            format!("unique key {key:?} is contended; try again").into(),
                        ))
                    }
                }
            }
            Err(e) => return Err(db_err(e)),
        }
    }
    Ok(out)
}

impl MySqlStore {
    pub(crate) async fn enqueue_many_impl(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        validate_batch(jobs, &self.inner.limits)?;
        let mut due = BTreeSet::new();
        let out = self
            .write(async |c: &mut MySqlConnection, now| insert(c, now, jobs, &mut due).await)
            .await?;
        for q in due {
            self.hint(Wake::Queue(q));
        }
        Ok(out)
    }

    /// Enqueues inside the caller's own transaction on `conn` (any connection to the same
    /// database): the job exists iff that transaction commits. This process's workers find
    /// it at their next poll, or at once when the caller calls [`MySqlStore::wake`] after
    /// committing (the server has no notification that waits for a commit).
    pub async fn enqueue_tx(&self, conn: &mut MySqlConnection, job: &NewJob) -> Result<Enqueued> {
        let mut v = self
            .enqueue_many_tx(conn, std::slice::from_ref(job))
            .await?;
        Ok(v.remove(0))
    }

    /// Bulk form of [`MySqlStore::enqueue_tx`].
    pub async fn enqueue_many_tx(
        &self,
        conn: &mut MySqlConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        validate_batch(jobs, &self.inner.limits)?;
        let now: i64 = sqlx::query_scalar(crate::store::NOW)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)?;
        insert(conn, now, jobs, &mut BTreeSet::new()).await
    }

    /// Enqueues every job of `jobs` in one transaction, [`BULK_CHUNK`] validated at a
    /// time: all of them or, on the first invalid job or error, none. Memory is bounded by
    /// one chunk however long the stream; returns counts, not ids, for the same reason.
    pub async fn enqueue_stream<S>(&self, jobs: S) -> Result<BulkEnqueued>
    where
        S: futures::Stream<Item = NewJob> + Send,
    {
        use futures::StreamExt;
        let mut jobs = std::pin::pin!(jobs);
        let mut due = BTreeSet::new();
        let limits = self.inner.limits;
        let out = self
            .write(async |c: &mut MySqlConnection, now| {
                let mut out = BulkEnqueued::default();
                let mut chunk = Vec::with_capacity(BULK_CHUNK);
                let mut seen = 0usize;
                loop {
                    let next = jobs.next().await;
                    let end = next.is_none();
                    chunk.extend(next);
                    if chunk.len() >= BULK_CHUNK || (end && !chunk.is_empty()) {
                        for (i, job) in chunk.iter().enumerate() {
                            validate::new_job(job, &limits).map_err(|e| {
                                ValidationError::InBatch {
                                    index: seen + i,
                                    error: Box::new(e),
                                }
                            })?;
                        }
                        let res = insert(c, now, &chunk, &mut due).await?;
                        let dups = res.iter().filter(|e| e.duplicate).count() as u64;
                        out.duplicates += dups;
                        out.inserted += res.len() as u64 - dups;
                        seen += chunk.len();
                        chunk.clear();
                    }
                    if end {
                        break;
                    }
                }
                Ok(out)
            })
            .await?;
        for q in due {
            self.hint(Wake::Queue(q));
        }
        Ok(out)
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
