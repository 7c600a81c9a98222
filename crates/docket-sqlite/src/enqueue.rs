//! Enqueue: validated first (nothing is written when any job of a batch is bad), then one
//! insert per job inside one write transaction; a unique key held by an unfinished job
//! returns that job (`duplicate`), also between two jobs of one batch.

use std::collections::BTreeSet;

use docket_core::*;
use sqlx::sqlite::SqliteConnection;

use crate::errors::{db_err, is_unique_violation};
use crate::rows::ms_of;
use crate::store::{ms, SqliteStore};

const INSERT: &str = include_str!("../sql/enqueue_insert.sql");
const UNIQUE_HOLDER: &str = include_str!("../sql/unique_holder.sql");

/// Jobs per write transaction of [`SqliteStore::enqueue_stream`].
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
    conn: &mut SqliteConnection,
    now: i64,
    jobs: &[NewJob],
    due: &mut BTreeSet<String>,
) -> Result<Vec<Enqueued>> {
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        if let Some(key) = &job.unique_key {
            let holder: Option<i64> = sqlx::query_scalar(UNIQUE_HOLDER)
                .bind(key)
                .fetch_optional(&mut *conn)
                .await
                .map_err(db_err)?;
            if let Some(id) = holder {
                out.push(Enqueued {
                    id: JobId(id),
                    duplicate: true,
                });
                continue;
            }
        }
        let at = run_at(job, now);
        let id: i64 = sqlx::query_scalar(INSERT)
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
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::UniqueConflict {
                        key: job.unique_key.clone().unwrap_or_default(),
                        holder: JobId(0),
                    }
                } else {
                    db_err(e)
                }
            })?;
        if at <= now {
            due.insert(job.queue.clone());
        }
        out.push(Enqueued {
            id: JobId(id),
            duplicate: false,
        });
    }
    Ok(out)
}

impl SqliteStore {
    pub(crate) async fn enqueue_many_impl(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        validate_batch(jobs, &self.inner.limits)?;
        let mut due = BTreeSet::new();
        let out = self
            .write(async |c: &mut SqliteConnection, now| insert(c, now, jobs, &mut due).await)
            .await?;
        for q in due {
            self.hint(Wake::Queue(q));
        }
        Ok(out)
    }

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
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        validate_batch(jobs, &self.inner.limits)?;
        let now: i64 = sqlx::query_scalar(crate::store::NOW)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)?;
        let mut due = BTreeSet::new();
        let out = insert(conn, now, jobs, &mut due).await?;
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
        use futures::StreamExt;
        let mut jobs = std::pin::pin!(jobs);
        let mut due = BTreeSet::new();
        let limits = self.inner.limits;
        let out = self
            .write(async |c: &mut SqliteConnection, now| {
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

    /// [`SqliteStore::enqueue_stream`] over an iterator.
    pub async fn enqueue_iter<I>(&self, jobs: I) -> Result<BulkEnqueued>
    where
        I: IntoIterator<Item = NewJob>,
        I::IntoIter: Send,
    {
        self.enqueue_stream(futures::stream::iter(jobs)).await
    }
}
