//! The invariant checker on SQLite: the rules of [`crate::checker`], over an audit table that
//! triggers fill on every update and delete of a job.
//!
//! SQLite cannot tell a trigger which statement fired it, so the writer is read off the
//! change itself: pending → running is a claim; running → running with a new expiry a
//! heartbeat; running → succeeded a completion; running → anything with a new
//! `lease_expired` history entry a reap, with a new `retry`/`discard`/`cancel` entry a
//! failure report, with one more attempt of budget and no entry a snooze or release. As on
//! PostgreSQL every fenced statement writes its own token (`attempt = <claimed attempt>`,
//! the heartbeat also `lease_owner`), a no-op while the fence holds, so a write that slipped
//! past a broken fence shows as a change of token.
//!
//! Times: the fence compares the lease with the database's now read at the start of the
//! write transaction, the trigger records the time it fired, a moment later. The lease rule
//! therefore allows [`LATE_MS`]; a worker that really wrote past its lease (paused, stalled)
//! is seconds late.

use std::collections::HashMap;

use sqlx::SqlitePool;

use crate::checker::{overlaps, CheckReport, Execution};

/// How much later than its lease's expiry a fenced write may be recorded (see above).
pub const LATE_MS: i64 = 100;

/// Installs the audit table and triggers on the file of `pool`.
pub async fn install_audit(pool: &SqlitePool) {
    sqlx::raw_sql(include_str!("checker_sqlite.sql"))
        .execute(pool)
        .await
        .expect("install the SQLite audit");
}

const WRITER: &str = "CASE
    WHEN op = 'D' AND old_state = 'running' THEN 'complete_delete'
    WHEN op = 'D' THEN 'delete'
    WHEN old_state = 'pending' AND new_state = 'running' THEN 'claim'
    WHEN old_state = 'running' AND new_state = 'running' AND new_errors = old_errors THEN 'heartbeat'
    WHEN old_state = 'running' AND new_state = 'running' THEN 'cancel_request'
    WHEN old_state = 'running' AND new_state = 'succeeded' THEN 'complete_many'
    WHEN old_state = 'running' AND new_errors = old_errors + 1 AND last_class = 'lease_expired' THEN 'reap'
    WHEN old_state = 'running' AND new_errors = old_errors + 1
         AND last_class IN ('retry', 'discard', 'cancel') THEN 'fail_many'
    WHEN old_state = 'running' AND new_errors = old_errors AND new_max = old_max + 1 THEN 'snooze_many'
    ELSE 'other' END";

fn rules() -> Vec<(&'static str, String)> {
    let w = format!("(SELECT *, {WRITER} AS writer FROM audit)");
    const WORKER: &str = "('complete_many', 'fail_many', 'snooze_many', 'heartbeat')";
    vec![
        (
            "token: a worker write landed on a row whose current token was another",
            format!(
                "SELECT printf('job %d: %s by token %d (owner %s) landed on token %d (owner %s), state %s',
                               job_id, writer, new_attempt, new_owner, old_attempt, old_owner, old_state)
                 FROM {w} WHERE writer IN {WORKER}
                   AND (new_attempt IS NOT old_attempt
                        OR (writer = 'heartbeat' AND new_owner IS NOT old_owner))"
            ),
        ),
        (
            "lease: a worker write was accepted after the lease expired",
            format!(
                "SELECT printf('job %d: %s at %d, lease expired at %d', job_id, writer, at, old_lease)
                 FROM {w} WHERE (writer IN {WORKER} OR writer = 'complete_delete')
                   AND at > old_lease + {LATE_MS}"
            ),
        ),
        (
            "reaper: a lease was reaped before it expired",
            format!(
                "SELECT printf('job %d: reaped at %d, lease until %d', job_id, at, old_lease)
                 FROM {w} WHERE writer = 'reap' AND old_lease >= at"
            ),
        ),
        (
            "terminal: more than one accepted success for a job",
            "SELECT printf('job %d: %d successes', job_id, count(*)) FROM audit
             WHERE (op = 'U' AND old_state = 'running' AND new_state = 'succeeded')
                OR (op = 'D' AND old_state = 'running')
             GROUP BY job_id HAVING count(*) > 1"
                .into(),
        ),
        (
            "claims: a claim did not move the token by exactly one",
            format!(
                "SELECT printf('job %d: claim %d -> %d', job_id, old_attempt, new_attempt)
                 FROM {w} WHERE writer = 'claim' AND new_attempt IS NOT old_attempt + 1"
            ),
        ),
        (
            "deletes: an unfinished job was deleted",
            "SELECT printf('job %d deleted while %s', job_id, old_state) FROM audit
             WHERE op = 'D' AND old_state NOT IN ('succeeded', 'dead', 'cancelled', 'running')"
                .into(),
        ),
        (
            "writers: a change no Docket statement makes",
            format!(
                "SELECT printf('job %d: %s -> %s (errors %d -> %d, budget %d -> %d)', job_id,
                               old_state, new_state, old_errors, new_errors, old_max, new_max)
                 FROM {w} WHERE writer = 'other'
                   AND NOT (old_state IN ('dead', 'cancelled') AND new_state = 'pending')
                   AND NOT (old_state = 'pending' AND new_state IN ('pending', 'cancelled'))
                   AND NOT (old_state = 'dead' AND new_state = 'cancelled')"
            ),
        ),
    ]
}

/// Every rule, the execution log included; panics with the violations found.
pub async fn check(pool: &SqlitePool, executions: &[Execution], terminal: &[&str]) -> CheckReport {
    let mut violations = Vec::new();
    for (rule, sql) in rules() {
        let rows: Vec<String> = sqlx::query_scalar(&sql)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("checker rule {rule:?}: {e}"));
        violations.extend(rows.into_iter().map(|r| format!("{rule}: {r}")));
    }
    let mut report = CheckReport::default();
    let states: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM jobs GROUP BY state")
            .fetch_all(pool)
            .await
            .expect("states");
    for (state, n) in &states {
        report.jobs += n;
        if !terminal.contains(&state.as_str()) {
            violations.push(format!(
                "completeness: {n} job(s) ended {state}, expected only {terminal:?}"
            ));
        }
    }
    // Jobs completed by deleting their rows (the workers' default) succeeded.
    let deleted: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM audit WHERE op = 'D' AND old_state = 'running'")
            .fetch_one(pool)
            .await
            .expect("deleted");
    if deleted > 0 && !terminal.contains(&"succeeded") {
        violations.push(format!(
            "completeness: {deleted} job(s) succeeded (deleted), expected only {terminal:?}"
        ));
    }
    report.jobs += deleted;
    let accepted: Vec<(i64, i32)> = sqlx::query_as(
        "SELECT job_id, old_attempt FROM audit
         WHERE (op = 'U' AND old_state = 'running' AND new_state = 'succeeded')
                OR (op = 'D' AND old_state = 'running')",
    )
    .fetch_all(pool)
    .await
    .expect("accepted");
    let mut by_job: HashMap<i64, Vec<&Execution>> = HashMap::new();
    for e in executions {
        by_job.entry(e.job).or_default().push(e);
    }
    for (job, attempt) in &accepted {
        let runs = by_job.get(job).cloned().unwrap_or_default();
        if !runs.iter().any(|e| e.attempt == *attempt) {
            violations.push(format!(
                "executions: job {job}: accepted attempt {attempt} has no execution record ({runs:?})"
            ));
        }
    }
    violations.extend(overlaps(executions));
    assert!(
        violations.is_empty(),
        "invariant violations:\n{}",
        violations.join("\n")
    );
    let writes: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT {WRITER} AS writer, count(*) FROM audit GROUP BY 1"
    ))
    .fetch_all(pool)
    .await
    .expect("writers");
    report.writes = writes.into_iter().collect();
    report.reaped = report.writes.get("reap").copied().unwrap_or(0);
    report.executions = executions.len();
    report.rerun_jobs = by_job.values().filter(|v| v.len() > 1).count();
    report
}
