//! Enqueueing: the `enqueue_many` SQL function for ordinary batches (validation, unique keys,
//! wake-ups, one round trip), and COPY for large batches without unique keys.
//!
//! Why a second path: inserting 10,000 rows through `enqueue_many` spends most of its time
//! outside the insert itself — binding eleven arrays, unnesting them, validating per row in
//! PL/pgSQL (docs/benchmarks.md, "Bulk enqueue"). COPY streams rows straight into the table.
//! Both paths validate in Rust first, both leave the table's constraints as the last line of
//! defence, and both schedule with the transaction's `now()`.

use std::collections::BTreeSet;

use chrono::{DateTime, SecondsFormat, Utc};
use docket_core::*;
use sqlx::{PgConnection, PgExecutor, Row};

use crate::errors::db_err;
use crate::store::{ms, PgStore};

/// Below this many jobs the function's single round trip beats COPY's three.
pub(crate) const COPY_MIN_JOBS: usize = 1000;

/// True when a batch goes through COPY: large, and no unique keys (they need `ON CONFLICT`).
pub(crate) fn copy_worthwhile(jobs: &[NewJob]) -> bool {
    jobs.len() >= COPY_MIN_JOBS && jobs.iter().all(|j| j.unique_key.is_none())
}

/// Validates every job before anything is sent; names the first bad one.
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

/// Parallel arrays for `enqueue_many`, built once per batch.
#[derive(Default)]
struct EnqueueArrays {
    queues: Vec<String>,
    kinds: Vec<String>,
    args: Vec<serde_json::Value>,
    priorities: Vec<i16>,
    run_ats: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    delays: Vec<Option<i64>>,
    max_attempts: Vec<i32>,
    unique_keys: Vec<Option<String>>,
    metadata: Vec<serde_json::Value>,
    backoff_base: Vec<Option<i64>>,
    backoff_cap: Vec<Option<i64>>,
    ordering_keys: Vec<Option<String>>,
    concurrency_keys: Vec<Option<String>>,
}

/// Appends `s` to a COPY text-format row, escaping what the format reserves. Written by hand:
/// the escaping is four characters, not worth a CSV dependency (whose quoting rules differ).
fn push_text(buf: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            _ => buf.push(b),
        }
    }
}

fn push_opt(buf: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(s) => push_text(buf, s),
        None => buf.extend_from_slice(b"\\N"),
    }
}

fn push_json(buf: &mut Vec<u8>, scratch: &mut Vec<u8>, v: &serde_json::Value) -> Result<()> {
    scratch.clear();
    serde_json::to_writer(&mut *scratch, v).map_err(|e| StoreError::Database(Box::new(e)))?;
    push_text(buf, scratch);
    Ok(())
}

/// One job as a COPY text row, in the column order of `sql/enqueue_copy.sql`. `now_text` is
/// `now` already formatted: most jobs of a bulk load run at once, and formatting the same
/// timestamp per row was a fifth of the encoding time (`benches/copy_encode.rs`).
fn copy_row(
    buf: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    id: i64,
    job: &NewJob,
    now: DateTime<Utc>,
    now_text: &str,
) -> Result<DateTime<Utc>> {
    use std::io::Write as _;
    let run_at = match job.schedule {
        Schedule::Now => now,
        Schedule::At(t) => t,
        // Bounded by validation (10 years), so the conversion cannot fail.
        Schedule::Delay(d) => now + chrono::Duration::from_std(d).unwrap_or_default(),
    };
    let field = |buf: &mut Vec<u8>, s: &str| {
        push_text(buf, s.as_bytes());
        buf.push(b'\t');
    };
    // Numbers need no escaping; written in place (no String per field).
    let _ = write!(buf, "{id}\t");
    field(buf, &job.queue);
    field(buf, &job.kind);
    push_json(buf, scratch, &job.args)?;
    buf.push(b'\t');
    let _ = write!(buf, "{}\t", job.priority);
    if run_at == now {
        field(buf, now_text);
    } else {
        field(buf, &run_at.to_rfc3339_opts(SecondsFormat::Micros, true));
    }
    let _ = write!(buf, "{}\t", job.max_attempts);
    push_json(buf, scratch, &job.metadata)?;
    buf.push(b'\t');
    for v in [
        job.backoff.map(|b| ms(b.base)),
        job.backoff.map(|b| ms(b.cap)),
    ] {
        match v {
            Some(x) => {
                let _ = write!(buf, "{x}");
            }
            None => buf.extend_from_slice(b"\\N"),
        }
        buf.push(b'\t');
    }
    push_opt(buf, job.ordering_key.as_deref().map(str::as_bytes));
    buf.push(b'\t');
    push_opt(buf, job.concurrency_key.as_deref().map(str::as_bytes));
    buf.push(b'\n');
    Ok(run_at)
}

/// Encodes validated `jobs` (with their `ids`, scheduled from the transaction's `now`) as
/// COPY text rows; returns the rows and the queues with a job due at once (to wake).
/// Public but hidden for the criterion benchmark (`benches/copy_encode.rs`).
#[doc(hidden)]
pub fn encode_copy<'a>(
    jobs: &'a [NewJob],
    ids: &[i64],
    now: DateTime<Utc>,
) -> Result<(Vec<u8>, BTreeSet<&'a str>)> {
    let mut buf = Vec::with_capacity(jobs.len() * 160);
    let mut scratch = Vec::with_capacity(256);
    let mut due = BTreeSet::new();
    let now_text = now.to_rfc3339_opts(SecondsFormat::Micros, true);
    for (job, id) in jobs.iter().zip(ids) {
        if copy_row(&mut buf, &mut scratch, *id, job, now, &now_text)? <= now {
            due.insert(job.queue.as_str());
        }
    }
    Ok((buf, due))
}

impl PgStore {
    /// Enqueues on the caller's connection (inside its transaction), by COPY when worthwhile.
    pub(crate) async fn enqueue_in_tx(
        &self,
        conn: &mut PgConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        if copy_worthwhile(jobs) && self.may_copy(conn).await? {
            self.enqueue_copy(conn, jobs).await
        } else {
            self.enqueue_many_on(conn, jobs).await
        }
    }

    /// Whether the connection's role may COPY into jobs (`sql/may_copy.sql`).
    async fn may_copy(&self, conn: &mut PgConnection) -> Result<bool> {
        self.query_scalar(&self.inner.q.may_copy)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)
    }

    /// The COPY path. Must run inside a transaction (ids, rows and wake-up commit together).
    async fn enqueue_copy(
        &self,
        conn: &mut PgConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        validate_batch(jobs, self.limits())?;
        let row = self
            .query(&self.inner.q.enqueue_copy_ids)
            .bind(i32::try_from(jobs.len()).unwrap_or(i32::MAX))
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)?;
        let now: DateTime<Utc> = row.try_get("now").map_err(db_err)?;
        let ids: Vec<i64> = row.try_get("ids").map_err(db_err)?;
        let (buf, due) = encode_copy(jobs, &ids, now)?;
        let mut copy = conn
            .copy_in_raw(&self.inner.q.enqueue_copy)
            .await
            .map_err(db_err)?;
        copy.send(buf).await.map_err(db_err)?;
        copy.finish().await.map_err(db_err)?;
        for q in due {
            self.notify(&mut *conn, &self.wakeup_channel(), q).await?;
        }
        let out: Vec<Enqueued> = ids
            .into_iter()
            .map(|id| Enqueued {
                id: JobId(id),
                duplicate: false,
            })
            .collect();
        count_enqueued(jobs, &out);
        Ok(out)
    }

    pub(crate) async fn enqueue_many_on<'e, E: PgExecutor<'e>>(
        &self,
        exec: E,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let mut a = EnqueueArrays::default();
        validate_batch(jobs, self.limits())?;
        for job in jobs {
            let (run_at, delay) = match job.schedule {
                Schedule::Now => (None, None),
                Schedule::At(t) => (Some(t), None),
                Schedule::Delay(d) => (None, Some(ms(d))),
            };
            a.queues.push(job.queue.clone());
            a.kinds.push(job.kind.clone());
            a.args.push(job.args.clone());
            a.priorities.push(job.priority);
            a.run_ats.push(run_at);
            a.delays.push(delay);
            a.max_attempts.push(job.max_attempts);
            a.unique_keys.push(job.unique_key.clone());
            a.metadata.push(job.metadata.clone());
            a.backoff_base.push(job.backoff.map(|b| ms(b.base)));
            a.backoff_cap.push(job.backoff.map(|b| ms(b.cap)));
            a.ordering_keys.push(job.ordering_key.clone());
            a.concurrency_keys.push(job.concurrency_key.clone());
        }
        // NULL instead of an array of NULLs lets the SQL side skip work nobody asked for.
        fn some_or_null(v: Vec<Option<String>>) -> Option<Vec<Option<String>>> {
            v.iter().any(Option::is_some).then_some(v)
        }
        let rows = self
            .query(&self.inner.q.enqueue_many)
            .bind(a.queues)
            .bind(a.kinds)
            .bind(a.args)
            .bind(a.priorities)
            .bind(a.run_ats)
            .bind(a.delays)
            .bind(a.max_attempts)
            .bind(some_or_null(a.unique_keys))
            .bind(a.metadata)
            .bind(a.backoff_base)
            .bind(a.backoff_cap)
            .bind(some_or_null(a.ordering_keys))
            .bind(some_or_null(a.concurrency_keys))
            .fetch_all(exec)
            .await
            .map_err(db_err)?;
        let out = rows
            .iter()
            .map(|r| {
                Ok(Enqueued {
                    id: JobId(r.try_get("id").map_err(db_err)?),
                    duplicate: r.try_get("duplicate").map_err(db_err)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        count_enqueued(jobs, &out);
        Ok(out)
    }
}

/// `docket_jobs_enqueued_total{queue,kind}` for the jobs actually inserted (a duplicate of a
/// unique key is not). Counted when written: inside a caller's transaction that then rolls
/// back, the jobs were counted all the same. One increment per queue and kind of the batch.
fn count_enqueued(jobs: &[NewJob], out: &[Enqueued]) {
    let mut by: std::collections::HashMap<(&str, &str), u64> = Default::default();
    for (j, e) in jobs.iter().zip(out) {
        if !e.duplicate {
            *by.entry((j.queue.as_str(), j.kind.as_str())).or_default() += 1;
        }
    }
    for ((q, k), n) in by {
        metrics::counter!("docket_jobs_enqueued_total", "queue" => q.to_string(), "kind" => k.to_string())
            .increment(n);
    }
}
