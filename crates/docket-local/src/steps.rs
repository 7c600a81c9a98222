//! Memoized steps: the fenced record, the read, and the pruning of steps whose job is gone.
//! PostgreSQL's versions: `record_step()` and `prune_steps()` (migration 0019).

use docket_core::*;

use crate::args;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn};
use crate::rows;

fn json(text: &str, what: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| corrupt(format!("{what}: {e}")))
}

/// Records steps of jobs `owner` holds, in one write transaction: for each, the claim's
/// check first (step_fence.sql: SQLite's write transaction admits no other writer, MariaDB's
/// locks the job's row), then the step unless one of that name exists (the first record wins
/// and its output comes back). A step whose claim no longer holds writes nothing and comes
/// back as its `LeaseLost`; the others are recorded.
pub async fn record_steps<E: Engine>(
    e: &E,
    owner: &str,
    steps: &[StepWrite],
) -> Result<Vec<std::result::Result<StepRecorded, LeaseLost>>> {
    docket_core::steps::check_writes(steps)?;
    if steps.is_empty() {
        return Ok(Vec::new());
    }
    let mut done: Vec<Option<StepRecorded>> = Vec::with_capacity(steps.len());
    let mut tx = e.begin().await?;
    let now = tx.now();
    for s in steps {
        let id = s.lease.id.0;
        let held = tx
            .fetch_optional("step_fence", args![id, s.lease.attempt, owner, now])
            .await?;
        if held.is_none() {
            done.push(None);
            continue;
        }
        if let Some(r) = tx
            .fetch_optional("step_get", args![id, s.name.as_str()])
            .await?
        {
            let text: String = r.get("output")?;
            done.push(Some(StepRecorded {
                output: json(&text, "a step's output")?,
                written: false,
            }));
            continue;
        }
        let text = s.output.to_string();
        tx.execute(
            "step_insert",
            args![id, s.name.as_str(), s.lease.attempt, text.as_str(), now],
        )
        .await?;
        done.push(Some(StepRecorded {
            output: s.output.clone(),
            written: true,
        }));
    }
    tx.commit().await?;
    let refused: Vec<Lease> = steps
        .iter()
        .zip(&done)
        .filter(|(_, d)| d.is_none())
        .map(|(s, _)| s.lease)
        .collect();
    let mut lost = if refused.is_empty() {
        Vec::new()
    } else {
        crate::writes::explain_lost(e, refused).await?
    };
    Ok(steps
        .iter()
        .zip(done)
        .map(|(s, d)| {
            d.ok_or_else(|| match lost.iter().position(|l| l.lease == s.lease) {
                Some(i) => lost.swap_remove(i),
                None => LeaseLost {
                    lease: s.lease,
                    reason: LostReason::Expired,
                },
            })
        })
        .collect())
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
