//! The invariant checker for crash and chaos tests.
//!
//! Two records are kept: an append-only `audit` table filled by a trigger on every state or
//! attempt change of a job (what the database accepted, stamped with the statement's time),
//! and an execution log written by the handlers themselves (what ran, when). The checker
//! then asserts:
//! - completeness: every job ended in an expected terminal state, none lost or left running;
//! - at most one accepted completion per job;
//! - every accepted outcome came from the newest token, under a lease that was still valid
//!   when it was written (no stale worker ever won). This is also the mutual-exclusion check:
//!   an accepted execution's lease runs from its claim to its accepted outcome, so two
//!   accepted executions of one job overlap exactly when an outcome of attempt `a` is
//!   accepted after attempt `a + 1` was claimed;
//! - every accepted success has a record of the execution that produced it.

use std::collections::HashMap;

use crate::TestDb;

/// Installs the audit trigger on this test's jobs table.
pub async fn install_audit(db: &TestDb) {
    let s = &db.schema;
    sqlx::raw_sql(&format!(
        "CREATE TABLE {s}.audit (
             seq bigserial PRIMARY KEY, job_id bigint NOT NULL,
             old_state text, new_state text, old_attempt int, new_attempt int,
             old_owner text, new_owner text, old_lease_expires_at timestamptz,
             at timestamptz NOT NULL);
         CREATE FUNCTION {s}.audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO {s}.audit (job_id, old_state, new_state, old_attempt, new_attempt,
                                    old_owner, new_owner, old_lease_expires_at, at)
             VALUES (NEW.id, OLD.state, NEW.state, OLD.attempt, NEW.attempt,
                     OLD.lease_owner, NEW.lease_owner, OLD.lease_expires_at, statement_timestamp());
             RETURN NULL;
         END $$;
         CREATE TRIGGER audit AFTER UPDATE ON {s}.jobs FOR EACH ROW
         WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.attempt IS DISTINCT FROM NEW.attempt)
         EXECUTE FUNCTION {s}.audit_fn();"
    ))
    .execute(&db.pool)
    .await
    .expect("install audit");
}

/// One handler run, from the execution log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub job: i64,
    pub attempt: i32,
    /// Unix nanoseconds.
    pub start: i64,
    /// Unix nanoseconds; `None` when the run was killed before it ended.
    pub end: Option<i64>,
}

/// Parses an execution log of lines `start|end JOB ATTEMPT UNIX_NANOS`.
pub fn parse_log(text: &str) -> Vec<Execution> {
    let mut runs: HashMap<(i64, i32), Execution> = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 4 {
            continue; // a line torn by a kill -9
        }
        let (Ok(job), Ok(attempt), Ok(t)) = (f[1].parse(), f[2].parse(), f[3].parse()) else {
            continue;
        };
        let e = runs.entry((job, attempt)).or_insert(Execution {
            job,
            attempt,
            start: t,
            end: None,
        });
        match f[0] {
            "start" => e.start = t,
            "end" => e.end = Some(t),
            _ => {}
        }
    }
    let mut v: Vec<Execution> = runs.into_values().collect();
    v.sort_by_key(|e| (e.job, e.attempt));
    v
}

/// What the checker found.
#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    pub jobs: i64,
    pub executions: usize,
    /// Jobs that ran more than once (at-least-once at work: crashes, lost leases).
    pub rerun_jobs: usize,
    /// Leases the reaper took back.
    pub reaped: i64,
}

/// Runs every check; panics with the first violation.
pub async fn check(db: &TestDb, executions: &[Execution], terminal: &[&str]) -> CheckReport {
    let s = &db.schema;
    // Completeness.
    let states: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT state, count(*) FROM {s}.jobs GROUP BY state"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("states");
    let mut report = CheckReport::default();
    for (state, n) in &states {
        report.jobs += n;
        assert!(
            terminal.contains(&state.as_str()),
            "completeness: {n} job(s) ended {state}, expected only {terminal:?}"
        );
    }
    // At most one accepted completion per job.
    let twice: Vec<(i64, i64)> = sqlx::query_as(&format!(
        "SELECT job_id, count(*) FROM {s}.audit WHERE new_state = 'succeeded' GROUP BY job_id HAVING count(*) > 1"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("completions");
    assert!(twice.is_empty(), "jobs completed more than once: {twice:?}");
    // Every write out of `running` by a worker (not the reaper) came from the newest token
    // under a lease still valid at that statement's time.
    let stale: Vec<(i64, i32, String)> = sqlx::query_as(&format!(
        "SELECT a.job_id, a.old_attempt, a.new_state FROM {s}.audit a
         WHERE a.old_state = 'running' AND a.new_state <> 'running'
           AND a.old_lease_expires_at >= a.at                      -- written under a lease
           AND (a.new_attempt <> a.old_attempt
                OR EXISTS (SELECT 1 FROM {s}.audit c
                           WHERE c.job_id = a.job_id AND c.new_state = 'running'
                             AND c.new_attempt > a.old_attempt AND c.seq < a.seq))"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("stale");
    assert!(
        stale.is_empty(),
        "outcomes accepted from a stale token: {stale:?}"
    );
    report.reaped = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.audit WHERE old_state = 'running' AND old_lease_expires_at < at"
    ))
    .fetch_one(&db.pool)
    .await
    .expect("reaped");
    // Every accepted success was produced by a logged execution of that attempt.
    let accepted: Vec<(i64, i32)> = sqlx::query_as(&format!(
        "SELECT job_id, old_attempt FROM {s}.audit WHERE old_state = 'running' AND new_state = 'succeeded'"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("accepted");
    let by_job: HashMap<i64, Vec<&Execution>> =
        executions.iter().fold(HashMap::new(), |mut m, e| {
            m.entry(e.job).or_default().push(e);
            m
        });
    for (job, attempt) in &accepted {
        let runs = by_job.get(job).cloned().unwrap_or_default();
        let winner = runs.iter().find(|e| e.attempt == *attempt);
        assert!(
            winner.is_some() || runs.is_empty(),
            "job {job}: accepted attempt {attempt} has no execution record ({runs:?})"
        );
    }
    report.executions = executions.len();
    report.rerun_jobs = by_job.values().filter(|v| v.len() > 1).count();
    report
}
