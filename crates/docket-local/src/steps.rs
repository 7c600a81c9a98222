//! Memoized steps: the fenced record, the read, and the pruning of steps whose job is gone.
//! PostgreSQL's versions: `record_step()` and `prune_steps()` (migration 0019).

use docket_core::output::{check, MAX_OUTPUT_BYTES};
use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn};
use crate::rows;

fn json(text: &str, what: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| corrupt(format!("{what}: {e}")))
}

/// Records step `name` of the job `lease` holds, in one write transaction: the claim's
/// check first (step_fence.sql: SQLite's write transaction admits no other writer,
/// MariaDB's locks the job's row), then the step unless one of that name exists (the first
/// record wins and its output comes back). `LeaseLost` and nothing written when the claim
/// no longer holds.
pub async fn record_step<E: Engine>(
    e: &E,
    owner: &str,
    lease: Lease,
    name: &str,
    output: &serde_json::Value,
) -> Result<StepRecorded> {
    docket_core::steps::check_name(name)?;
    check(output, MAX_OUTPUT_BYTES)?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    let id = lease.id.0;
    let held = tx
        .fetch_optional("step_fence", args![id, lease.attempt, owner, now])
        .await?;
    if held.is_none() {
        drop(tx);
        return Err(crate::writes::lease_lost(e, lease).await?.into());
    }
    if let Some(r) = tx.fetch_optional("step_get", args![id, name]).await? {
        let text: String = r.get("output")?;
        drop(tx);
        return Ok(StepRecorded {
            output: json(&text, "a step's output")?,
            written: false,
        });
    }
    let text = output.to_string();
    tx.execute(
        "step_insert",
        args![id, name, lease.attempt, text.as_str(), now],
    )
    .await?;
    tx.commit().await?;
    Ok(StepRecorded {
        output: output.clone(),
        written: true,
    })
}

/// The steps job `id` recorded, oldest first.
pub async fn job_steps<E: Engine>(e: &E, id: JobId) -> Result<Vec<StepRecord>> {
    let rows = e.reader().fetch_all("steps_list", args![id.0]).await?;
    rows.iter()
        .map(|r| {
            let text: String = r.get("output")?;
            Ok(StepRecord {
                name: r.get("name")?,
                attempt: r.get("attempt")?,
                output: json(&text, "a step's output")?,
                recorded_at: rows::time(r, "recorded_at")?,
            })
        })
        .collect()
}

/// Deletes step records of jobs that no longer exist, `batch` at a time; returns how many.
pub async fn prune_steps<E: Engine>(e: &E, batch: i64) -> Result<u64> {
    let mut total = 0;
    loop {
        let mut tx = e.begin().await?;
        let n = tx.execute("steps_prune", args![batch]).await?;
        tx.commit().await?;
        total += n;
        if n < batch as u64 {
            return Ok(total);
        }
    }
}
