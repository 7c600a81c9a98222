//! The invariant checker for crash, chaos and interleaving tests.
//!
//! Two records are kept: an append-only `audit` table filled by a trigger on **every** update
//! and delete of a job (and `audit_steps`, on every step recorded) (what the database accepted, with the statement that wrote it and that
//! statement's time), and an execution log written by the handlers themselves (what ran,
//! when). Every fenced statement carries its writer's token into the row it changes
//! (`SET attempt = <claimed attempt>`, and the heartbeat also `lease_owner = <owner>`; no-ops
//! while the fence holds), so a write that slipped past a broken fence shows up as a change of
//! token. The writer is named by the statement's header comment (`-- complete_many: …`), read
//! with `current_query()`.
//!
//! The rules, each a query over the audit:
//! - **token**: no write by a worker statement (complete, fail, snooze/release, heartbeat) lands
//!   on a row whose current token differs from the writer's, or on a row that was not running;
//! - **lease**: no worker write is accepted after the row's lease expired (a success after
//!   expiry included), and the heartbeat never revives an expired lease;
//! - **reaper**: no reap of a lease that had not expired, and only of running rows;
//! - **steps**: every memoized step (and every sleep, wait and answer of a durable job) was
//!   recorded by the token that held the job, running, its lease unexpired (a trigger on
//!   `job_steps` inserts, reading the job's row as the insert saw it);
//! - **terminal**: at most one accepted terminal write per job and attempt, at most one
//!   success per job;
//! - **claims**: a claim moves `pending → running` and increments the token by one;
//! - **deletes**: only finished jobs are deleted, or a running one by a fenced completion
//!   (`complete_delete_many`, the workers' default, and `complete_many`, which moves a kept
//!   success to its packed history, migration 0035), which the lease, terminal and
//!   executions rules count as a success of the attempt it deleted;
//! - **executions** (with the log, which is then mandatory): every accepted success has the
//!   execution that produced it, and no two attempts of one job overlap in time;
//! - **completeness**: every job ended in an expected state.

use std::collections::HashMap;

use crate::TestDb;

/// Installs the audit trigger on this test's jobs table.
pub async fn install_audit(db: &TestDb) {
    let s = &db.schema;
    sqlx::raw_sql(&format!(
        "CREATE TABLE {s}.audit (
             seq bigserial PRIMARY KEY, job_id bigint NOT NULL, op text NOT NULL, writer text NOT NULL,
             old_state text, new_state text, old_attempt int, new_attempt int,
             old_owner text, new_owner text, old_lease_expires_at timestamptz,
             new_lease_expires_at timestamptz, at timestamptz NOT NULL,
             tx bigint NOT NULL DEFAULT txid_current());
         CREATE FUNCTION {s}.audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
         DECLARE w text := coalesce(substring(current_query() FROM '^\\s*--\\s*([a-z_]+):'), 'other');
         BEGIN
             IF TG_OP = 'DELETE' THEN
                 INSERT INTO {s}.audit (job_id, op, writer, old_state, old_attempt, old_owner,
                                        old_lease_expires_at, at)
                 VALUES (OLD.id, 'D', w, OLD.state, OLD.attempt, OLD.lease_owner,
                         OLD.lease_expires_at, statement_timestamp());
             ELSE
                 INSERT INTO {s}.audit (job_id, op, writer, old_state, new_state, old_attempt,
                                        new_attempt, old_owner, new_owner, old_lease_expires_at,
                                        new_lease_expires_at, at)
                 VALUES (NEW.id, 'U', w, OLD.state, NEW.state, OLD.attempt, NEW.attempt,
                         OLD.lease_owner, NEW.lease_owner, OLD.lease_expires_at,
                         NEW.lease_expires_at, statement_timestamp());
             END IF;
             RETURN NULL;
         END $$;
         CREATE TRIGGER audit AFTER UPDATE OR DELETE ON {s}.jobs FOR EACH ROW
         EXECUTE FUNCTION {s}.audit_fn();
         CREATE TABLE {s}.audit_steps (
             seq bigserial PRIMARY KEY, job_id bigint NOT NULL, name text NOT NULL,
             attempt int NOT NULL, job_state text, job_attempt int, job_owner text,
             job_lease_expires_at timestamptz, at timestamptz NOT NULL);
         CREATE FUNCTION {s}.audit_steps_fn() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO {s}.audit_steps (job_id, name, attempt, job_state, job_attempt, job_owner,
                                          job_lease_expires_at, at)
             SELECT NEW.job_id, NEW.name, NEW.attempt, j.state, j.attempt, j.lease_owner,
                    j.lease_expires_at, statement_timestamp()
             FROM (SELECT 1) AS one LEFT JOIN {s}.jobs AS j ON j.id = NEW.job_id;
             RETURN NULL;
         END $$;
         CREATE TRIGGER audit_steps AFTER INSERT ON {s}.job_steps FOR EACH ROW
         EXECUTE FUNCTION {s}.audit_steps_fn();"
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
    /// Audited writes, by writer statement.
    pub writes: HashMap<String, i64>,
}

/// The audit rules as `(rule, query)`; each query returns the violating rows as text.
fn rules(s: &str) -> Vec<(&'static str, String)> {
    const WORKER: &str = "('complete_many', 'complete_outputs', 'fail_many', 'snooze_many', \
                          'park_many', 'progress_many', 'heartbeat')";
    vec![
        (
            "token: a worker write landed on a row whose current token was another",
            format!(
                "SELECT format('job %s: %s by token %s (owner %s) landed on token %s (owner %s), state %s',
                               job_id, writer, new_attempt, new_owner, old_attempt, old_owner, old_state)
                 FROM {s}.audit WHERE op = 'U' AND writer IN {WORKER}
                   AND (new_attempt IS DISTINCT FROM old_attempt
                        OR (writer = 'heartbeat' AND new_owner IS DISTINCT FROM old_owner)
                        OR old_state <> 'running')"
            ),
        ),
        (
            "lease: a worker write was accepted after the lease expired",
            format!(
                "SELECT format('job %s: %s of attempt %s at %s, lease expired %s',
                               job_id, writer, old_attempt, at, old_lease_expires_at)
                 FROM {s}.audit
                 WHERE ((op = 'U' AND writer IN {WORKER}) OR (op = 'D' AND writer IN ('complete_delete_many', 'complete_many')))
                   AND (old_lease_expires_at IS NULL OR old_lease_expires_at <= at)"
            ),
        ),
        (
            "steps: a step was recorded by a token that did not hold the job",
            format!(
                "SELECT format('job %s: step %s recorded by token %s at %s; the job was %s, token %s, lease until %s',
                               job_id, name, attempt, at, job_state, job_attempt, job_lease_expires_at)
                 FROM {s}.audit_steps
                 WHERE job_state IS DISTINCT FROM 'running' OR job_attempt IS DISTINCT FROM attempt
                    OR job_lease_expires_at IS NULL OR job_lease_expires_at <= at"
            ),
        ),
        (
            "reaper: a lease was reaped before it expired",
            format!(
                "SELECT format('job %s: reaped attempt %s at %s, lease until %s (state %s)',
                               job_id, old_attempt, at, old_lease_expires_at, old_state)
                 FROM {s}.audit WHERE op = 'U' AND writer = 'reap'
                   AND (old_state <> 'running' OR old_lease_expires_at >= at)"
            ),
        ),
        (
            "terminal: more than one accepted terminal write for one attempt",
            format!(
                "SELECT format('job %s attempt %s: %s terminal writes', job_id, old_attempt, count(*))
                 FROM {s}.audit WHERE op = 'U'
                   AND new_state IN ('succeeded', 'dead', 'cancelled')
                   AND old_state NOT IN ('succeeded', 'dead', 'cancelled')
                 GROUP BY job_id, old_attempt HAVING count(*) > 1"
            ),
        ),
        (
            "terminal: a job succeeded more than once",
            format!(
                "SELECT format('job %s: %s successes', job_id, count(*)) FROM {s}.audit
                 WHERE (op = 'U' AND new_state = 'succeeded' AND old_state <> 'succeeded')
                    OR (op = 'D' AND writer IN ('complete_delete_many', 'complete_many'))
                 GROUP BY job_id HAVING count(*) > 1"
            ),
        ),
        (
            "claims: a claim that did not move pending to running with the next token",
            format!(
                "SELECT format('job %s: claim %s -> %s, token %s -> %s', job_id, old_state, new_state,
                               old_attempt, new_attempt)
                 FROM {s}.audit WHERE op = 'U' AND writer = 'claim'
                   AND (old_state <> 'pending' OR new_state <> 'running'
                        OR new_attempt <> old_attempt + 1)"
            ),
        ),
        (
            "deletes: an unfinished job was deleted",
            format!(
                "SELECT format('job %s: deleted while %s by %s', job_id, old_state, writer)
                 FROM {s}.audit WHERE op = 'D' AND old_state NOT IN ('succeeded', 'dead', 'cancelled')
                   AND NOT (writer IN ('complete_delete_many', 'complete_many') AND old_state = 'running')"
            ),
        ),
    ]
}

/// The audit rules alone, for tests where no handler runs (store-level interleavings):
/// panics with every violation found.
pub async fn check_writes(db: &TestDb, terminal: &[&str]) -> CheckReport {
    let s = &db.schema;
    let mut violations = Vec::new();
    for (rule, sql) in rules(s) {
        let rows: Vec<String> = sqlx::query_scalar(&sql)
            .fetch_all(&db.pool)
            .await
            .unwrap_or_else(|e| panic!("checker rule {rule:?}: {e}"));
        for r in rows {
            violations.push(format!("{rule}: {r}"));
        }
    }
    assert!(
        violations.is_empty(),
        "invariant violations:\n{}",
        violations.join("\n")
    );
    let mut report = CheckReport::default();
    let states: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT state, count(*) FROM {s}.jobs GROUP BY state"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("states");
    for (state, n) in &states {
        report.jobs += n;
        assert!(
            terminal.contains(&state.as_str()),
            "completeness: {n} job(s) ended {state}, expected only {terminal:?}"
        );
    }
    // Jobs completed by deleting their rows (the workers' default, or moved to the kept
    // history) succeeded.
    let deleted: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.audit WHERE op = 'D' AND writer IN ('complete_delete_many', 'complete_many')"
    ))
    .fetch_one(&db.pool)
    .await
    .expect("deleted");
    assert!(
        deleted == 0 || terminal.contains(&"succeeded"),
        "completeness: {deleted} job(s) succeeded (deleted), expected only {terminal:?}"
    );
    report.jobs += deleted;
    report.reaped = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.audit WHERE writer = 'reap'"
    ))
    .fetch_one(&db.pool)
    .await
    .expect("reaped");
    let writes: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT writer, count(*) FROM {s}.audit GROUP BY writer"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("writers");
    report.writes = writes.into_iter().collect();
    report
}

/// Every rule, the execution log included (mandatory: an accepted success without the
/// execution that produced it is a violation); panics with the violations found.
pub async fn check(db: &TestDb, executions: &[Execution], terminal: &[&str]) -> CheckReport {
    let mut report = check_writes(db, terminal).await;
    let s = &db.schema;
    let accepted: Vec<(i64, i32)> = sqlx::query_as(&format!(
        "SELECT job_id, old_attempt FROM {s}.audit
         WHERE (op = 'U' AND old_state = 'running' AND new_state = 'succeeded')
            OR (op = 'D' AND writer IN ('complete_delete_many', 'complete_many'))"
    ))
    .fetch_all(&db.pool)
    .await
    .expect("accepted");
    let mut by_job: HashMap<i64, Vec<&Execution>> = HashMap::new();
    for e in executions {
        by_job.entry(e.job).or_default().push(e);
    }
    let mut violations = Vec::new();
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
    report.executions = executions.len();
    report.rerun_jobs = by_job.values().filter(|v| v.len() > 1).count();
    report
}

/// Two attempts of one job that ran at the same time: an attempt that logged its end after
/// a later attempt of the same job had started. (A run killed before its end has no end to
/// compare; its process was gone before the successor's lease could be granted.)
pub fn overlaps(executions: &[Execution]) -> Vec<String> {
    let mut by_job: HashMap<i64, Vec<&Execution>> = HashMap::new();
    for e in executions {
        by_job.entry(e.job).or_default().push(e);
    }
    let mut out = Vec::new();
    for runs in by_job.values_mut() {
        runs.sort_by_key(|e| e.attempt);
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                if let Some(end) = a.end {
                    if end > b.start {
                        out.push(format!(
                            "executions: job {}: attempt {} ended {} ns after attempt {} started",
                            a.job,
                            a.attempt,
                            end - b.start,
                            b.attempt
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Asserts that a worker process ended as the test expects: `Clean` (exit 0, no panic in
/// its stderr) or `Killed` (by SIGKILL, as the test sent it).
pub fn assert_exit(name: &str, status: std::process::ExitStatus, stderr: &str, expect: Exit) {
    use std::os::unix::process::ExitStatusExt;
    assert!(
        !stderr.contains("panicked"),
        "{name} panicked:\n{}",
        tail(stderr)
    );
    match expect {
        Exit::Clean => assert!(
            status.success(),
            "{name} exited {status}, expected 0:\n{}",
            tail(stderr)
        ),
        Exit::Killed => assert_eq!(
            status.signal(),
            Some(9), // SIGKILL
            "{name} ended {status}, expected SIGKILL"
        ),
    }
}

/// How a worker process should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Clean,
    Killed,
}

fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(4000);
    let mut i = start;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(job: i64, attempt: i32, start: i64, end: Option<i64>) -> Execution {
        Execution {
            job,
            attempt,
            start,
            end,
        }
    }

    #[test]
    fn overlapping_attempts_are_found_and_sequential_ones_pass() {
        assert!(overlaps(&[run(1, 1, 0, Some(10)), run(1, 2, 20, Some(30))]).is_empty());
        assert!(overlaps(&[run(1, 1, 0, None), run(1, 2, 20, Some(30))]).is_empty());
        let v = overlaps(&[run(1, 1, 0, Some(25)), run(1, 2, 20, Some(30))]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("attempt 1 ended 5 ns after attempt 2"));
        assert!(overlaps(&[run(1, 1, 0, Some(25)), run(2, 1, 20, Some(30))]).is_empty());
    }

    #[test]
    fn the_log_parser_skips_torn_lines() {
        let v = parse_log("start 1 1 5\nend 1 1 9\nstart 1 2\nstart 2 1 7\n");
        assert_eq!(v, vec![run(1, 1, 5, Some(9)), run(2, 1, 7, None)]);
    }
}
