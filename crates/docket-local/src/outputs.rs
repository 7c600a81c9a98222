//! Job outputs and progress: the fenced completion that records a handler's output, its
//! read, and the fenced progress write. PostgreSQL's versions: `complete_output_fenced()`,
//! `progress_fenced()` (migration 0018) and `sql/output.sql`.

use docket_core::output::{check, sorted_outputs, MAX_OUTPUT_BYTES};
use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::Conn;
use crate::rows;
use crate::writes::{ended, outcome};

/// Marks each claimed job succeeded with its output, fenced (same attempt, same owner,
/// lease unexpired by the database's clock), in one write transaction; what the fence
/// refused comes back as `LeaseLost`. A waiter hears [`Wake::Done`] for each job written.
pub async fn complete_outputs<E: Engine>(
    e: &E,
    owner: &str,
    outputs: &[Output],
) -> Result<BatchOutcome> {
    if outputs.is_empty() {
        return Ok(BatchOutcome::default());
    }
    let sorted = sorted_outputs(outputs);
    let mut texts = Vec::with_capacity(sorted.len());
    for o in &sorted {
        // The hard cap binds whatever the caller checked (PostgreSQL: a CHECK constraint).
        check(&o.value, MAX_OUTPUT_BYTES)?;
        texts.push(o.value.to_string());
    }
    let leases: Vec<Lease> = sorted.iter().map(|o| o.lease).collect();
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut done = Vec::new();
    for (l, text) in leases.iter().zip(&texts) {
        let n = tx
            .execute(
                "complete_output",
                args![l.id.0, l.attempt, owner, now, text.as_str()],
            )
            .await?;
        if n == 1 {
            done.push(*l);
        }
    }
    tx.commit().await?;
    ended(e, &done);
    for l in &done {
        e.hint(Wake::Done(l.id));
    }
    outcome(e, &leases, done).await
}

/// One job's [`complete_outputs`] on `c`, inside the caller's transaction (an
/// in-transaction handler's): `LeaseLost` when the fence refused it.
pub async fn complete_output_on<E: Engine, C: Conn>(
    e: &E,
    c: &mut C,
    owner: &str,
    output: &Output,
) -> Result<()> {
    check(&output.value, MAX_OUTPUT_BYTES)?;
    let now: i64 = c.scalar("now", args![]).await?;
    let l = output.lease;
    let text = output.value.to_string();
    let n = c
        .execute(
            "complete_output",
            args![l.id.0, l.attempt, owner, now, text.as_str()],
        )
        .await?;
    if n == 0 {
        let lost = crate::writes::lease_lost(e, l).await.unwrap_or(LeaseLost {
            lease: l,
            reason: LostReason::Expired,
        });
        return Err(lost.into());
    }
    // A workflow node's children and a batch member's count, in the caller's transaction
    // (their queues are found by polling: the caller's commit carries no hint for them).
    let mut ready = std::collections::BTreeSet::new();
    crate::workflow::ended_in_caller(c, now, l.id, JobState::Succeeded, &mut ready).await?;
    Ok(())
}

/// Records running jobs' progress, fenced as a heartbeat (same attempt, same owner, lease
/// unexpired by the database's clock) without extending the lease, in one write
/// transaction. PostgreSQL: `progress_fenced()` (migration 0018).
pub async fn progress_many<E: Engine>(
    e: &E,
    owner: &str,
    reports: &[Progress],
) -> Result<BatchOutcome> {
    if reports.is_empty() {
        return Ok(BatchOutcome::default());
    }
    let sorted = docket_core::progress::sorted_progress(reports)?;
    let leases: Vec<Lease> = sorted.iter().map(|p| p.lease).collect();
    let mut tx = e.begin().await?;
    let now = tx.now();
    let mut done = Vec::new();
    for p in &sorted {
        let l = p.lease;
        let n = tx
            .execute(
                "progress",
                args![
                    l.id.0,
                    l.attempt,
                    owner,
                    now,
                    f64::from(p.percent),
                    p.message.as_str()
                ],
            )
            .await?;
        if n == 1 {
            done.push(l);
        }
    }
    tx.commit().await?;
    outcome(e, &leases, done).await
}

/// A job's state and output; `NotFound` once its row is gone.
pub async fn output<E: Engine>(e: &E, id: JobId) -> Result<JobOutput> {
    let r = e
        .reader()
        .fetch_optional("output", args![id.0])
        .await?
        .ok_or(StoreError::NotFound(id))?;
    let st: String = r.get("state")?;
    let text: Option<String> = r.get("output")?;
    let output = text
        .map(|t| serde_json::from_str(&t))
        .transpose()
        .map_err(|err| crate::exec::corrupt(format!("job {id}'s output: {err}")))?;
    Ok(JobOutput {
        state: rows::state(&st)?,
        output,
        finished_at: rows::time_opt(&r, "finished_at")?,
    })
}
