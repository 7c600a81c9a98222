//! Enqueue: validated first (nothing is written when any job of a batch is bad), then one
//! insert per job inside one transaction; a unique key held by an unfinished job returns
//! that job (`duplicate`), also between two jobs of one batch. PostgreSQL's version is its
//! `enqueue` function.

use std::collections::BTreeSet;

use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{Conn, Inserted};
use crate::rows::{ms, ms_of};

/// Jobs validated at a time by [`stream`] (and per write transaction on SQLite).
pub const BULK_CHUNK: usize = 10_000;

/// What a streamed bulk enqueue wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkEnqueued {
    /// New jobs.
    pub inserted: u64,
    /// Jobs whose unique key an unfinished job held (not inserted).
    pub duplicates: u64,
}

/// Validates every job of a batch, naming the first bad one's index.
pub fn validate_batch(jobs: &[NewJob], limits: &Limits) -> Result<()> {
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

/// Inserts validated `jobs` on `conn` (inside a transaction) at database time `now`;
/// returns the results in input order and adds the queues with due work to `due`.
pub async fn insert<C: Conn>(
    conn: &mut C,
    now: i64,
    jobs: &[NewJob],
    due: &mut BTreeSet<String>,
) -> Result<Vec<Enqueued>> {
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        let at = run_at(job, now);
        let (args_text, meta_text) = (job.args.to_string(), job.metadata.to_string());
        let res = conn
            .insert(
                "enqueue_insert",
                args![
                    &job.queue,
                    &job.kind,
                    &args_text,
                    job.priority,
                    at,
                    job.max_attempts,
                    &job.unique_key,
                    &meta_text,
                    job.backoff.map(|b| ms(b.base)),
                    job.backoff.map(|b| ms(b.cap)),
                    &job.ordering_key,
                    &job.concurrency_key,
                    now,
                ],
            )
            .await?;
        match res {
            Inserted::Id(id) => {
                if at <= now {
                    due.insert(job.queue.clone());
                }
                out.push(Enqueued {
                    id: JobId(id),
                    duplicate: false,
                });
            }
            // Only the statement was undone; the transaction goes on.
            Inserted::Duplicate => {
                let key = job.unique_key.as_deref().ok_or_else(|| {
                    crate::exec::corrupt("a job without a unique key met a unique index")
                })?;
                match conn.fetch_optional("unique_holder", args![key]).await? {
                    Some(h) => out.push(Enqueued {
                        id: JobId(h.first()?),
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
        }
    }
    Ok(out)
}

/// Validates and inserts `jobs` on a connection inside the caller's transaction; the due
/// queues are the caller's to announce once it commits.
pub async fn insert_in<C: Conn>(
    conn: &mut C,
    limits: &Limits,
    jobs: &[NewJob],
    due: &mut BTreeSet<String>,
) -> Result<Vec<Enqueued>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    validate_batch(jobs, limits)?;
    let now: i64 = conn.scalar("now", args![]).await?;
    insert(conn, now, jobs, due).await
}

/// Enqueues `jobs` in one transaction: all of them or, on the first invalid one, none.
pub async fn enqueue_many<E: Engine>(e: &E, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    validate_batch(jobs, e.limits())?;
    let mut due = BTreeSet::new();
    let mut tx = e.begin().await?;
    let now = tx.now();
    let out = insert(&mut tx, now, jobs, &mut due).await?;
    tx.commit().await?;
    for q in due {
        e.hint(Wake::Queue(q));
    }
    Ok(out)
}

/// Enqueues one job.
pub async fn enqueue<E: Engine>(e: &E, job: &NewJob) -> Result<Enqueued> {
    let mut v = enqueue_many(e, std::slice::from_ref(job)).await?;
    Ok(v.remove(0))
}

/// Enqueues every job of `jobs` in one transaction, [`BULK_CHUNK`] validated at a time:
/// all of them or, on the first invalid job or error, none. Memory is bounded by one chunk
/// however long the stream; returns counts, not ids, for the same reason.
pub async fn stream<E, S>(e: &E, jobs: S) -> Result<BulkEnqueued>
where
    E: Engine,
    S: futures::Stream<Item = NewJob> + Send,
{
    use futures::StreamExt;
    let mut jobs = std::pin::pin!(jobs);
    let mut due = BTreeSet::new();
    let limits = *e.limits();
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut out = BulkEnqueued::default();
    let mut chunk = Vec::with_capacity(BULK_CHUNK);
    let mut seen = 0usize;
    loop {
        let next = jobs.next().await;
        let end = next.is_none();
        chunk.extend(next);
        if chunk.len() >= BULK_CHUNK || (end && !chunk.is_empty()) {
            for (i, job) in chunk.iter().enumerate() {
                validate::new_job(job, &limits).map_err(|err| ValidationError::InBatch {
                    index: seen + i,
                    error: Box::new(err),
                })?;
            }
            let res = insert(&mut tx, now, &chunk, &mut due).await?;
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
    tx.commit().await?;
    for q in due {
        e.hint(Wake::Queue(q));
    }
    Ok(out)
}
