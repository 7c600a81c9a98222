//! The invariant checker on MariaDB / MySQL: the SQLite checker's audit (triggers on every
//! update and delete of a job, the writer read off each change; see `checker_sqlite.rs`) and
//! its rules, in this server's SQL.
//!
//! One rule of the PostgreSQL checker is missing here: **token**. The fenced statements on
//! these servers select the rows a claim still holds and update those by id, without writing
//! the claim's attempt into the row, so an audit cannot tell whose token a write carried. A
//! stale write is still caught when it lands after its lease (**lease**), as a second
//! success (**terminal**) or as a success without its run (**executions**).

use std::collections::HashMap;

use sqlx::MySqlPool;

use crate::checker::{overlaps, CheckReport, Execution};
use crate::checker_sqlite::LATE_MS;

/// Installs the audit table and triggers on the database of `pool`.
pub async fn install_audit(pool: &MySqlPool) {
    for stmt in include_str!("checker_mysql.sql").split(";\n") {
        if !stmt.trim().is_empty() {
            sqlx::Executor::execute(pool, stmt)
                .await
                .unwrap_or_else(|e| panic!("install the MySQL audit: {e}\n{stmt}"));
        }
    }
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
    let w = format!("(SELECT a.*, {WRITER} AS writer FROM audit a) w");
    const WORKER: &str = "('complete_many', 'fail_many', 'snooze_many', 'heartbeat')";
    vec![
        (
            "lease: a worker write was accepted after the lease expired",
            format!(
                "SELECT CAST(CONCAT('job ', job_id, ': ', writer, ' at ', at, ', lease expired at ', old_lease) AS CHAR)
                 FROM {w} WHERE (writer IN {WORKER} OR writer = 'complete_delete')
                   AND at > old_lease + {LATE_MS}"
            ),
        ),
        (
            "reaper: a lease was reaped before it expired",
            format!(
                "SELECT CAST(CONCAT('job ', job_id, ': reaped at ', at, ', lease until ', old_lease) AS CHAR)
                 FROM {w} WHERE writer = 'reap' AND old_lease >= at"
            ),
        ),
        (
            "terminal: more than one accepted success for a job",
            "SELECT CAST(CONCAT('job ', job_id, ': ', COUNT(*), ' successes') AS CHAR) FROM audit
             WHERE (op = 'U' AND old_state = 'running' AND new_state = 'succeeded')
                OR (op = 'D' AND old_state = 'running')
             GROUP BY job_id HAVING COUNT(*) > 1"
                .into(),
        ),
        (
            "claims: a claim did not move the token by exactly one",
            format!(
                "SELECT CAST(CONCAT('job ', job_id, ': claim ', old_attempt, ' -> ', new_attempt) AS CHAR)
                 FROM {w} WHERE writer = 'claim' AND NOT (new_attempt <=> old_attempt + 1)"
            ),
        ),
        (
            "deletes: an unfinished job was deleted",
            "SELECT CAST(CONCAT('job ', job_id, ' deleted while ', old_state) AS CHAR) FROM audit
             WHERE op = 'D' AND old_state NOT IN ('succeeded', 'dead', 'cancelled', 'running')"
                .into(),
        ),
        (
            "writers: a change no Docket statement makes",
            format!(
                "SELECT CAST(CONCAT('job ', job_id, ': ', old_state, ' -> ', new_state) AS CHAR)
                 FROM {w} WHERE writer = 'other'
                   AND NOT (old_state IN ('dead', 'cancelled') AND new_state = 'pending')
                   AND NOT (old_state = 'pending' AND new_state IN ('pending', 'cancelled'))
                   AND NOT (old_state = 'dead' AND new_state = 'cancelled')"
            ),
        ),
    ]
}

/// Every rule, the execution log included; panics with the violations found.
pub async fn check(pool: &MySqlPool, executions: &[Execution], terminal: &[&str]) -> CheckReport {
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
        sqlx::query_as("SELECT CAST(state AS CHAR), COUNT(*) FROM jobs GROUP BY state")
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
        "SELECT CAST({WRITER} AS CHAR) AS writer, COUNT(*) FROM audit GROUP BY 1"
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
