//! Batches on SQLite and MariaDB: a batch's open, additions and close, and the rule that
//! keeps its counters and enqueues each callback once. PostgreSQL's versions are
//! `batch_open()`, `batch_add()`, `batch_close()`, the trigger `jobs_batch_tally` and
//! `batch_settle()` (migration 0031).
//!
//! Here the rule runs where this layer moves a member into or out of an end state — a
//! node's completion, a failure, the reaper, an operator's cancel, retry and skip, an end
//! written inside the caller's transaction ([`crate::workflow::ended_in_caller`]) — each passing the
//! batch id from the row it already read (no read of its own: plain jobs and graph nodes
//! pay nothing). Each call comes after the layer's own fenced write changed the row, so a
//! stale attempt counts nothing; the counters' UPDATE
//! takes the batch row's lock (MariaDB; SQLite's writer is alone), so the settle that
//! follows is decided by one transaction at a time and a callback, once recorded as fired,
//! is never enqueued again.

use std::collections::BTreeSet;

use docket_core::batches::{
    check_jobs, check_members, member_metadata, member_name, BatchError, BatchOpened, BatchSpec,
    BatchStatus, Callback, JobSpec, RESULT_KEY,
};
use docket_core::mutants::{self, Mutant};
use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn, Inserted, Row};
use crate::rows;

/// Opens a batch in a transaction of its own: its row, its first members and, unless the
/// spec keeps it open, its close (which settles an empty batch at once).
pub async fn open<E: Engine>(e: &E, spec: &BatchSpec) -> Result<BatchOpened> {
    spec.validate(e.limits())?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut due = BTreeSet::new();
    let out = open_checked(&mut tx, now, spec, &mut due).await?;
    tx.commit().await?;
    hint(e, due);
    Ok(out)
}

/// [`open`] on `c` (inside the caller's transaction) at database time `now`; the queues
/// with members due go to `due`, for the caller to hint once it commits.
pub async fn open_on<C: Conn>(
    c: &mut C,
    limits: &Limits,
    now: i64,
    spec: &BatchSpec,
    due: &mut BTreeSet<String>,
) -> Result<BatchOpened> {
    spec.validate(limits)?;
    open_checked(c, now, spec, due).await
}

async fn open_checked<C: Conn>(
    c: &mut C,
    now: i64,
    spec: &BatchSpec,
    due: &mut BTreeSet<String>,
) -> Result<BatchOpened> {
    let callbacks = spec.callbacks_json().to_string();
    let id = match c
        .insert("batch_insert", args![&spec.name, now, &callbacks])
        .await?
    {
        Inserted::Id(id) => id,
        Inserted::Duplicate => return Err(corrupt("workflows has no unique key to meet")),
    };
    let jobs = add_on(c, now, id, &spec.jobs, due).await?;
    if spec.close {
        close_on(c, now, id, due).await?;
    }
    Ok(BatchOpened { id, jobs })
}

/// Adds members to open batch `id` in a transaction of its own.
pub async fn add<E: Engine>(e: &E, id: i64, jobs: &[JobSpec]) -> Result<Vec<JobId>> {
    check_jobs(jobs, e.limits())?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut due = BTreeSet::new();
    let out = add_on(&mut tx, now, id, jobs, &mut due).await?;
    tx.commit().await?;
    hint(e, due);
    Ok(out)
}

/// [`add`] on `c` (inside the caller's transaction), like [`open_on`].
pub async fn add_checked_on<C: Conn>(
    c: &mut C,
    limits: &Limits,
    now: i64,
    id: i64,
    jobs: &[JobSpec],
    due: &mut BTreeSet<String>,
) -> Result<Vec<JobId>> {
    check_jobs(jobs, limits)?;
    add_on(c, now, id, jobs, due).await
}

/// Closes batch `id` (settling it when every member already ended) and reads it back.
pub async fn close<E: Engine>(e: &E, id: i64) -> Result<BatchStatus> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut due = BTreeSet::new();
    close_on(&mut tx, now, id, &mut due).await?;
    tx.commit().await?;
    hint(e, due);
    batch(e, id).await
}

fn hint<E: Engine>(e: &E, due: BTreeSet<String>) {
    for q in due {
        e.hint(Wake::Queue(q));
    }
}

/// Batch `id`'s row, locked; refused when missing, a graph, or (`open`) closed.
async fn locked<C: Conn>(c: &mut C, id: i64, open: bool) -> Result<Row> {
    let Some(r) = c.fetch_optional("batch_lock", args![id]).await? else {
        return Err(StoreError::NotFound(JobId(id)));
    };
    if r.get::<Option<String>>("callbacks")?.is_none() {
        return Err(BatchError::NotABatch(id).into());
    }
    if open && r.get::<Option<i64>>("closed_at")?.is_some() {
        return Err(BatchError::Closed(id).into());
    }
    Ok(r)
}

async fn add_on<C: Conn>(
    c: &mut C,
    now: i64,
    id: i64,
    jobs: &[JobSpec],
    due: &mut BTreeSet<String>,
) -> Result<Vec<JobId>> {
    let r = locked(c, id, true).await?;
    let has: i64 = r.get("nodes")?;
    check_members(has, jobs.len())?;
    let mut out = Vec::with_capacity(jobs.len());
    for (i, spec) in jobs.iter().enumerate() {
        let index = has + 1 + i64::try_from(i).unwrap_or(i64::MAX);
        let mut job = spec.job();
        job.metadata = member_metadata(spec, id, index);
        let job_id = crate::enqueue::insert(c, now, std::slice::from_ref(&job), due).await?[0].id;
        let name = member_name(index);
        c.execute("batch_member", args![id, &name, job_id.0])
            .await?;
        out.push(job_id);
    }
    let n = i64::try_from(jobs.len()).unwrap_or(i64::MAX);
    c.execute("batch_grow", args![id, n]).await?;
    Ok(out)
}

async fn close_on<C: Conn>(c: &mut C, now: i64, id: i64, due: &mut BTreeSet<String>) -> Result<()> {
    locked(c, id, false).await?;
    c.execute("batch_close", args![id, now]).await?;
    settle(c, now, id, due).await
}

/// A job of batch `batch` (`None`: of no batch — nothing to do) moved from `from` to `to`:
/// when it entered or left an end state, the batch's counters move and the batch settles if
/// it can. Callers pass the `batch_id` of the row they read and run this after their own
/// write changed the row, in the same transaction.
pub async fn moved<C: Conn>(
    c: &mut C,
    now: i64,
    batch: Option<i64>,
    from: JobState,
    to: JobState,
    due: &mut BTreeSet<String>,
) -> Result<()> {
    let Some(batch) = batch else {
        return Ok(());
    };
    if from == to || (!from.is_terminal() && !to.is_terminal()) {
        return Ok(());
    }
    let d = |s: JobState| i64::from(to == s) - i64::from(from == s);
    let unfinished = i64::from(from.is_terminal()) - i64::from(to.is_terminal());
    c.execute(
        "batch_tally",
        args![
            batch,
            unfinished,
            d(JobState::Succeeded),
            d(JobState::Dead),
            d(JobState::Cancelled)
        ],
    )
    .await?;
    settle(c, now, batch, due).await
}

/// Enqueues the callbacks due for batch `id`, each once. The caller holds the batch row's
/// lock (the counters' UPDATE or the close's).
async fn settle<C: Conn>(c: &mut C, now: i64, id: i64, due: &mut BTreeSet<String>) -> Result<()> {
    let Some(r) = c.fetch_optional("batch_row", args![id]).await? else {
        return Ok(());
    };
    let b = status(&r)?;
    if b.closed_at.is_none() || b.unfinished > 0 {
        return Ok(());
    }
    if b.ended_at.is_none() {
        c.execute("batch_ended", args![id, now]).await?;
    }
    // Parsed from the stored text straight into jobs: through a `Value` first
    // (`serde_json::from_value`), a number of more digits than an f64 holds would be
    // rounded on its way into the callback's metadata.
    let text: Option<String> = r.get("callbacks")?;
    let specs: std::collections::HashMap<String, JobSpec> =
        serde_json::from_str(text.as_deref().unwrap_or("{}"))
            .map_err(|e| corrupt(format!("batch {id}'s callbacks: {e}")))?;
    for (callback, fired) in &b.callbacks {
        if !callback.applies(b.dead + b.cancelled) {
            continue;
        }
        // Once each: a callback that fired is never enqueued again.
        if fired.is_some() && !mutants::active(Mutant::BatchCallbackTwice) {
            continue;
        }
        let spec = specs
            .get(callback.as_str())
            .ok_or_else(|| corrupt(format!("batch {id}'s {callback} is not stored")))?;
        let mut job = spec.job();
        if let serde_json::Value::Object(m) = &mut job.metadata {
            m.insert(
                RESULT_KEY.into(),
                serde_json::to_value(b.result(*callback)).unwrap_or_default(),
            );
        }
        let job_id = crate::enqueue::insert(c, now, std::slice::from_ref(&job), due).await?[0].id;
        c.execute("batch_fired", args![id, callback.as_str(), job_id.0])
            .await?;
    }
    Ok(())
}

fn json_of(r: &Row, col: &str) -> Result<serde_json::Value> {
    let text: Option<String> = r.get(col)?;
    serde_json::from_str(text.as_deref().unwrap_or("{}")).map_err(|e| corrupt(e.to_string()))
}

/// A batch's row as operators see it.
fn status(r: &Row) -> Result<BatchStatus> {
    let specs = json_of(r, "callbacks")?;
    let mut callbacks = Vec::new();
    for c in Callback::ALL {
        if specs.get(c.as_str()).is_some() {
            let job: Option<i64> = r.get(&format!("{}_job", c.as_str()))?;
            callbacks.push((c, job.map(JobId)));
        }
    }
    Ok(BatchStatus {
        id: r.get("id")?,
        name: r.get("name")?,
        created_at: rows::time(r, "created_at")?,
        closed_at: rows::time_opt(r, "closed_at")?,
        ended_at: rows::time_opt(r, "ended_at")?,
        total: r.get("total")?,
        unfinished: r.get("unfinished")?,
        succeeded: r.get("succeeded")?,
        dead: r.get("dead")?,
        cancelled: r.get("cancelled")?,
        callbacks,
    })
}

/// One batch.
pub async fn batch<E: Engine>(e: &E, id: i64) -> Result<BatchStatus> {
    let mut c = e.reader();
    if let Some(r) = c.fetch_optional("batch_row", args![id]).await? {
        return status(&r);
    }
    Err(match c.fetch_optional("workflow_kind", args![id]).await? {
        Some(_) => BatchError::NotABatch(id).into(),
        None => StoreError::NotFound(JobId(id)),
    })
}

/// The newest `limit` batches.
pub async fn batches<E: Engine>(e: &E, limit: i64) -> Result<Vec<BatchStatus>> {
    docket_core::workflow::check_limit(limit)?;
    let rows = e.reader().fetch_all("batch_list", args![limit]).await?;
    rows.iter().map(status).collect()
}
