//! The fenced writes after a claim (the batch frame around each engine's complete, snooze
//! and heartbeat; fail in full), the reaper, pruning, and the operator's single-job
//! actions (retry, cancel, skip, run now). PostgreSQL's versions are its SQL functions
//! `fail_jobs`, `reap_expired`, `retry_job`, `cancel_job`, … (schema/current.sql).
//!
//! Every fenced write compares the claim's attempt, its owner and the lease's expiry on the
//! database's clock, so a worker that lost its lease — reaped, reclaimed, or simply late —
//! can never overwrite its successor; what it could not apply comes back as `LeaseLost`
//! with the reason.

use std::collections::HashMap;
use std::time::Duration;

use docket_core::local::{backoff_ms, entry, history_len, push_error};
use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn, Row};
use crate::rows::{self, ms};

/// The ids of `leases`.
pub fn ids(leases: &[Lease]) -> Vec<i64> {
    leases.iter().map(|l| l.id.0).collect()
}

/// Running jobs ended (committed): a key or a slot may be free for held-back work.
pub(crate) fn ended<E: Engine>(e: &E, done: &[Lease]) {
    if !done.is_empty() {
        e.hub().freed();
    }
}

/// Says why each lease no longer holds.
pub async fn explain_lost<E: Engine>(e: &E, lost: Vec<Lease>) -> Result<Vec<LeaseLost>> {
    if lost.is_empty() {
        return Ok(Vec::new());
    }
    let ids = ids(&lost);
    let rows = e
        .reader()
        .fetch_all("lease_status", args![&ids[..]])
        .await?;
    let mut now: HashMap<i64, (JobState, i32)> = HashMap::new();
    for r in &rows {
        let st: String = r.get("state")?;
        now.insert(r.get("id")?, (rows::state(&st)?, r.get("attempt")?));
    }
    Ok(lost
        .into_iter()
        .map(|lease| docket_core::local::lost(lease, now.get(&lease.id.0).copied()))
        .collect())
}

/// Why one lease no longer holds.
pub async fn lease_lost<E: Engine>(e: &E, lease: Lease) -> Result<LeaseLost> {
    let mut v = explain_lost(e, vec![lease]).await?;
    Ok(v.remove(0))
}

pub(crate) async fn outcome<E: Engine>(
    e: &E,
    leases: &[Lease],
    done: Vec<Lease>,
) -> Result<BatchOutcome> {
    let lost: Vec<Lease> = leases
        .iter()
        .filter(|l| !done.contains(l))
        .copied()
        .collect();
    Ok(BatchOutcome {
        applied: done,
        lost: explain_lost(e, lost).await?,
    })
}

/// A completion batch: sorted, applied by the engine's `op` (fenced), the rest explained.
async fn complete_batch<E: Engine>(
    e: &E,
    owner: &str,
    leases: &[Lease],
    delete: bool,
) -> Result<BatchOutcome> {
    if leases.is_empty() {
        return Ok(BatchOutcome::default());
    }
    let sorted = sorted_leases(leases);
    let done = if delete {
        e.complete_delete(owner, &sorted).await?
    } else {
        e.complete(owner, &sorted).await?
    };
    ended(e, &done);
    outcome(e, &sorted, done).await
}

/// Completes the jobs whose `leases` still hold (fenced), keeping their rows.
pub async fn complete_many<E: Engine>(
    e: &E,
    owner: &str,
    leases: &[Lease],
) -> Result<BatchOutcome> {
    complete_batch(e, owner, leases, false).await
}

/// Completes the jobs whose `leases` still hold (fenced) by deleting their rows.
pub async fn complete_delete_many<E: Engine>(
    e: &E,
    owner: &str,
    leases: &[Lease],
) -> Result<BatchOutcome> {
    complete_batch(e, owner, leases, true).await
}

/// Snoozes jobs whose leases still hold (fenced): pending again after each delay, the
/// attempt given back.
pub async fn snooze_many<E: Engine>(
    e: &E,
    owner: &str,
    snoozes: &[Snooze],
) -> Result<BatchOutcome> {
    if snoozes.is_empty() {
        return Ok(BatchOutcome::default());
    }
    let sorted = sorted_snoozes(snoozes)?;
    let leases: Vec<Lease> = sorted.iter().map(|s| s.lease).collect();
    let (done, due) = e.snooze(owner, &sorted).await?;
    ended(e, &done);
    // Released jobs are due now: let this process's idle fetchers look.
    for q in due {
        e.hint(Wake::Queue(q));
    }
    outcome(e, &leases, done).await
}

/// Gives back claims that still hold (fenced): pending at once, the attempt given back.
pub async fn release_many<E: Engine>(e: &E, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
    let snoozes: Vec<Snooze> = leases
        .iter()
        .map(|&lease| Snooze {
            lease,
            delay: Duration::ZERO,
        })
        .collect();
    snooze_many(e, owner, &snoozes).await
}

/// Extends the leases that still hold (fenced); an expired lease is not revived.
pub async fn heartbeat<E: Engine>(
    e: &E,
    owner: &str,
    leases: &[Lease],
    lease: Duration,
) -> Result<HeartbeatOutcome> {
    if leases.is_empty() {
        return Ok(HeartbeatOutcome::default());
    }
    let sorted = sorted_leases(leases);
    let (held, until) = e.extend(owner, &sorted, lease).await?;
    let until = rows::at(until, "lease_expires_at").map_err(corrupt)?;
    let mut out = HeartbeatOutcome::default();
    for (l, cancel) in held {
        out.extended.push((l, until));
        if cancel {
            out.cancel_requested.push(l);
        }
    }
    let lost: Vec<Lease> = sorted
        .into_iter()
        .filter(|l| !out.extended.iter().any(|(e, _)| e == l))
        .collect();
    out.lost = explain_lost(e, lost).await?;
    Ok(out)
}

/// What a failure report makes of an attempt: retry (pending again), dead or cancelled.
/// PostgreSQL: `fail_jobs`.
pub fn failure_state(
    class: FailureClass,
    attempt: i64,
    max_attempts: i64,
    cancel_requested: bool,
) -> JobState {
    if class == FailureClass::Cancel || cancel_requested {
        JobState::Cancelled
    } else if class == FailureClass::Discard
        || (attempt >= max_attempts
            && !docket_core::mutants::active(docket_core::mutants::Mutant::LocalRetryPastBudget))
    {
        JobState::Dead
    } else {
        JobState::Pending
    }
}

/// What the reaper makes of an expired lease. PostgreSQL: `reap_expired`.
pub fn reaped_state(attempt: i64, max_attempts: i64, cancel_requested: bool) -> JobState {
    if cancel_requested {
        JobState::Cancelled
    } else if attempt >= max_attempts {
        JobState::Dead
    } else {
        JobState::Pending
    }
}

/// The retry delay of a row (its own backoff, else the default) for its next failure.
fn backoff_of(r: &Row, errors: &str) -> i64 {
    backoff_ms(
        history_len(errors) + 1,
        r.get("backoff_base_ms").ok().flatten(),
        r.get("backoff_cap_ms").ok().flatten(),
    )
}

/// Records failures of jobs whose leases still hold (fenced): retried with backoff, dead,
/// or cancelled.
pub async fn fail_many<E: Engine>(
    e: &E,
    owner: &str,
    failures: &[Failure],
) -> Result<BatchOutcome> {
    if failures.is_empty() {
        return Ok(BatchOutcome::default());
    }
    let sorted = sorted_failures(failures);
    let max = e.limits().max_error_bytes;
    let leases: Vec<Lease> = sorted.iter().map(|f| f.lease).collect();
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut done = Vec::new();
    let mut ready = std::collections::BTreeSet::new();
    for f in &sorted {
        let row = tx
            .fetch_optional(
                "fenced_row",
                args![f.lease.id.0, f.lease.attempt, owner, now],
            )
            .await?;
        let Some(r) = row else { continue };
        let attempt: i32 = r.get("attempt")?;
        let max_attempts: i64 = r.get("max_attempts")?;
        let cancel_req: Option<i64> = r.get("cancel_requested_at")?;
        let errors: String = r.get("errors")?;
        let state = failure_state(f.class, attempt.into(), max_attempts, cancel_req.is_some());
        let retry = state == JobState::Pending && f.class == FailureClass::Retry;
        let run_at = retry.then(|| {
            now + f
                .retry_in
                .map(ms)
                .unwrap_or_else(|| backoff_of(&r, &errors))
        });
        let message: String = validate::truncate_message(&f.message, max)
            .chars()
            .take(4096)
            .collect();
        let errors = push_error(
            &errors,
            entry(
                run_of(&r, attempt),
                now,
                f.class.as_str(),
                &message,
                Some(owner),
            ),
        );
        let n = tx
            .execute(
                "finish_attempt",
                args![
                    f.lease.id.0,
                    state.as_str(),
                    run_at,
                    (!retry).then_some(now),
                    &errors,
                    i64::from(attempt),
                    true
                ],
            )
            .await?;
        if n == 1 {
            done.push(f.lease);
            let batch: Option<i64> = r.get("batch_id")?;
            crate::batches::moved(&mut tx, now, batch, JobState::Running, state, &mut ready)
                .await?;
            if state.is_terminal() && r.get::<Option<i64>>("workflow_id")?.is_some() {
                crate::workflow::resolve(&mut tx, now, f.lease.id, state, &mut ready).await?;
            }
        }
    }
    tx.commit().await?;
    ended(e, &done);
    for q in ready {
        e.hint(Wake::Queue(q));
    }
    outcome(e, &leases, done).await
}

/// Returns up to `batch` expired leases to the queue (or to dead when out of attempts).
pub async fn reap<E: Engine>(e: &E, batch: i64) -> Result<ReapReport> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let rows = tx
        .fetch_all("reap_expired", args![now, batch.max(1)])
        .await?;
    let mut jobs = Vec::with_capacity(rows.len());
    let mut ready = std::collections::BTreeSet::new();
    for r in &rows {
        let id: i64 = r.get("id")?;
        // Read wide: a row written by hand with a budget beyond 32 bits must not stop the
        // sweep of every other expired lease.
        let stored: i64 = r.get("attempt")?;
        let max_attempts: i64 = r.get("max_attempts")?;
        let attempt = i32::try_from(stored).unwrap_or(i32::MAX);
        let cancel_req: Option<i64> = r.get("cancel_requested_at")?;
        let errors: String = r.get("errors")?;
        let owner: String = r.get("lease_owner")?;
        let state = reaped_state(stored, max_attempts, cancel_req.is_some());
        let run_at = (state == JobState::Pending).then(|| now + backoff_of(r, &errors));
        let errors = push_error(
            &errors,
            entry(
                run_of(r, attempt),
                now,
                "lease_expired",
                "lease expired: the worker crashed, stalled or lost its connection",
                Some(&owner),
            ),
        );
        tx.execute(
            "finish_attempt",
            args![
                id,
                state.as_str(),
                run_at,
                (state != JobState::Pending).then_some(now),
                &errors,
                stored,
                false
            ],
        )
        .await?;
        let batch: Option<i64> = r.get("batch_id")?;
        crate::batches::moved(&mut tx, now, batch, JobState::Running, state, &mut ready).await?;
        if state.is_terminal() && r.get::<Option<i64>>("workflow_id")?.is_some() {
            crate::workflow::resolve(&mut tx, now, JobId(id), state, &mut ready).await?;
        }
        jobs.push(Reaped {
            id: JobId(id),
            attempt,
            owner,
            queue: r.get("queue")?,
            state,
        });
    }
    tx.commit().await?;
    if !jobs.is_empty() {
        e.hub().freed();
    }
    for q in ready {
        e.hint(Wake::Queue(q));
    }
    Ok(ReapReport { jobs })
}

/// Deletes finished jobs past their retention, in bounded batches.
pub async fn prune<E: Engine>(e: &E, retention: &Retention) -> Result<PruneReport> {
    let mut report = PruneReport::default();
    let batch = retention.batch.max(1);
    let finished = ["succeeded".to_string(), "cancelled".to_string()];
    let dead = ["dead".to_string()];
    let outputs = ms(retention.outputs);
    for (states, keep, counter) in [
        (&finished[..], retention.finished, &mut report.finished),
        (&dead[..], retention.dead, &mut report.dead),
    ] {
        loop {
            let mut tx = e.begin().await?;
            let now = tx.now();
            let n = tx
                .execute("prune", args![states, now, ms(keep), batch, outputs])
                .await?;
            tx.commit().await?;
            *counter += n;
            if n < batch as u64 {
                break;
            }
        }
    }
    report.workflow_rows = crate::workflow::prune(e, batch).await?;
    report.steps = crate::steps::prune_steps(e, batch).await?
        + crate::signals::prune_signals(e, batch).await?;
    Ok(report)
}

/// One job by id.
pub async fn get<E: Engine>(e: &E, id: JobId) -> Result<JobRecord> {
    match e.reader().fetch_optional("get", args![id.0]).await? {
        Some(r) => rows::record(&r),
        None => Err(StoreError::NotFound(id)),
    }
}

/// Jobs matching `filter`.
pub async fn list<E: Engine>(e: &E, filter: &JobFilter) -> Result<Vec<JobRecord>> {
    if let Some(q) = &filter.queue {
        validate::queue(q)?;
    }
    let limit = if filter.limit <= 0 { 100 } else { filter.limit };
    let rows = e
        .reader()
        .fetch_all(
            "list",
            args![
                filter.queue.as_deref(),
                filter.state.map(|s| s.as_str()),
                limit
            ],
        )
        .await?;
    rows.iter().map(rows::record).collect()
}

/// (state, attempt, queue, unique key, the row) of job `id`, locked where the engine locks
/// rows, or `NotFound`.
pub(crate) async fn job_state<C: Conn>(
    c: &mut C,
    id: JobId,
) -> Result<(JobState, i32, String, Option<String>, Row)> {
    let row = c
        .fetch_optional("job_state", args![id.0])
        .await?
        .ok_or(StoreError::NotFound(id))?;
    let st: String = row.get("state")?;
    Ok((
        rows::state(&st).map_err(|_| corrupt(format!("job {id} has state {st:?}")))?,
        row.get("attempt")?,
        row.get("queue")?,
        row.get("unique_key")?,
        row,
    ))
}

/// Replays a dead or cancelled job with `extra_attempts` more claims, keeping its id and
/// history.
pub async fn retry<E: Engine>(e: &E, id: JobId, extra_attempts: i32) -> Result<JobRecord> {
    if !(1..=1000).contains(&extra_attempts) {
        return Err(ValidationError::MaxAttempts(extra_attempts).into());
    }
    let mut tx = e.begin().await?;
    let now = tx.now();
    let (state, _, queue, key, row) = job_state(&mut tx, id).await?;
    if !matches!(state, JobState::Dead | JobState::Cancelled) {
        return Err(StoreError::WrongState {
            id,
            state,
            op: "retry (only dead or cancelled jobs can be retried)",
        });
    }
    if let Some(key) = key {
        let holder = tx.fetch_optional("unique_holder", args![&key]).await?;
        if let Some(h) = holder {
            return Err(StoreError::UniqueConflict {
                key,
                holder: JobId(h.first()?),
            });
        }
    }
    tx.execute("retry", args![id.0, now, extra_attempts])
        .await?;
    crate::workflow::rearm(&mut tx, id).await?;
    let mut due = std::collections::BTreeSet::new();
    let batch: Option<i64> = row.get("batch_id")?;
    crate::batches::moved(&mut tx, now, batch, state, JobState::Pending, &mut due).await?;
    tx.commit().await?;
    e.hint(Wake::Queue(queue));
    get(e, id).await
}

/// Cancels a pending job, or asks its worker to stop a running one.
pub async fn cancel<E: Engine>(e: &E, id: JobId) -> Result<CancelOutcome> {
    let actor = e.actor();
    let mut tx = e.begin().await?;
    let now = tx.now();
    let (state, attempt, _, _, row) = job_state(&mut tx, id).await?;
    let requested: Option<i64> = row.get("cancel_requested_at")?;
    let mut errors: String = row.get("errors")?;
    if requested.is_none() {
        errors = push_error(
            &errors,
            entry(
                run_of(&row, attempt),
                now,
                "cancel_requested",
                &format!("cancel requested by {actor}"),
                Some(&actor),
            ),
        );
    }
    let (to, finished, outcome) = match state {
        JobState::Pending | JobState::Waiting => ("cancelled", Some(now), CancelOutcome::Cancelled),
        JobState::Running => ("running", None, CancelOutcome::Requested),
        _ => {
            return Err(StoreError::WrongState {
                id,
                state,
                op: "cancel (it already finished)",
            })
        }
    };
    let n = tx
        .execute("cancel", args![id.0, to, finished, now, &errors])
        .await?;
    let mut ready = std::collections::BTreeSet::new();
    if n == 1 && outcome == CancelOutcome::Cancelled {
        let batch: Option<i64> = row.get("batch_id")?;
        crate::batches::moved(&mut tx, now, batch, state, JobState::Cancelled, &mut ready).await?;
        crate::workflow::resolve(&mut tx, now, id, JobState::Cancelled, &mut ready).await?;
    }
    tx.commit().await?;
    if outcome == CancelOutcome::Requested {
        e.hint(Wake::Cancel(id));
    }
    for q in ready {
        e.hint(Wake::Queue(q));
    }
    Ok(outcome)
}

/// Skips a dead job (it becomes cancelled, history kept), releasing its ordering key.
pub async fn skip<E: Engine>(e: &E, id: JobId) -> Result<JobRecord> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let (state, attempt, _, _, row) = job_state(&mut tx, id).await?;
    if state != JobState::Dead {
        return Err(StoreError::WrongState {
            id,
            state,
            op: "skip (only dead jobs can be skipped)",
        });
    }
    let errors: String = row.get("errors")?;
    let errors = push_error(
        &errors,
        entry(
            run_of(&row, attempt),
            now,
            "skipped",
            "skipped by an operator",
            None,
        ),
    );
    let n = tx.execute("skip", args![id.0, now, &errors]).await?;
    let mut due = std::collections::BTreeSet::new();
    if n == 1 {
        let batch: Option<i64> = row.get("batch_id")?;
        crate::batches::moved(&mut tx, now, batch, state, JobState::Cancelled, &mut due).await?;
    }
    tx.commit().await?;
    for q in due {
        e.hint(Wake::Queue(q));
    }
    get(e, id).await
}

/// Makes a pending job scheduled for later due now (attempt and budget untouched).
pub async fn run_now<E: Engine>(e: &E, id: JobId) -> Result<JobRecord> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let n = tx.execute("run_now", args![id.0, now]).await?;
    tx.commit().await?;
    let job = get(e, id).await?;
    if n == 0 {
        return Err(StoreError::WrongState {
            id,
            state: job.state,
            op: "run now (only a pending job scheduled for later)",
        });
    }
    e.hint(Wake::Queue(job.queue.clone()));
    Ok(job)
}

/// The run a history entry names: the row's `attempt` (the fencing token) less the claims
/// given back unrun (`released`, read alongside it).
pub fn run_of(r: &Row, attempt: i32) -> i32 {
    docket_core::runs(attempt, r.get("released").unwrap_or(0))
}
