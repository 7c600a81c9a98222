//! After every step: every row and the counters, database against model.

use std::collections::BTreeMap;

use docket_core::*;
use docket_testkit::TestDb;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sqlx::Row;

use crate::state::*;
use crate::*;

/// One row as the database has it.
#[derive(Debug)]
pub struct DbJob {
    pub id: i64,
    pub state: JobState,
    pub attempt: i32,
    pub max_attempts: i32,
    pub owner: Option<String>,
    pub cancel_requested: bool,
    pub queue: String,
    pub priority: i16,
    pub errors: i32,
    pub last_error: Option<LastError>,
    pub finished: bool,
    pub run_in: f64,
    pub lease_in: Option<f64>,
    pub blocked: bool,
}

pub async fn snapshot(db: &TestDb) -> Result<Vec<DbJob>, TestCaseError> {
    let sql = "SELECT id, state, attempt, max_attempts, lease_owner, \
                      cancel_requested_at IS NOT NULL AS cancel_requested, \
                      queue, priority, jsonb_array_length(errors) AS errors, \
                      (errors->-1->>'attempt')::int AS last_attempt, \
                      errors->-1->>'class' AS last_class, \
                      errors->-1->>'owner' AS last_owner, \
                      finished_at IS NOT NULL AS finished, \
                      extract(epoch FROM run_at - now())::float8 AS run_in, \
                      extract(epoch FROM lease_expires_at - now())::float8 AS lease_in, blocked \
               FROM {schema}.jobs ORDER BY id"
        .replace("{schema}", &db.schema);
    let rows = sqlx::query(&sql)
        .fetch_all(&db.pool)
        .await
        .map_err(|e| fail(format!("snapshot: {e}")))?;
    let get = |e: sqlx::Error| fail(format!("snapshot column: {e}"));
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let st: String = r.try_get("state").map_err(get)?;
        out.push(DbJob {
            id: r.try_get("id").map_err(get)?,
            state: st.parse().map_err(|e| fail(format!("{e}")))?,
            attempt: r.try_get("attempt").map_err(get)?,
            max_attempts: r.try_get("max_attempts").map_err(get)?,
            owner: r.try_get("lease_owner").map_err(get)?,
            cancel_requested: r.try_get("cancel_requested").map_err(get)?,
            queue: r.try_get("queue").map_err(get)?,
            priority: r.try_get("priority").map_err(get)?,
            errors: r.try_get("errors").map_err(get)?,
            last_error: match r.try_get::<Option<i32>, _>("last_attempt").map_err(get)? {
                None => None,
                Some(attempt) => Some(LastError {
                    attempt,
                    class: r.try_get("last_class").map_err(get)?,
                    owner: r.try_get("last_owner").map_err(get)?,
                }),
            },
            finished: r.try_get("finished").map_err(get)?,
            run_in: r.try_get("run_in").map_err(get)?,
            lease_in: r.try_get("lease_in").map_err(get)?,
            blocked: r.try_get("blocked").map_err(get)?,
        });
    }
    Ok(out)
}

/// `got` (seconds from the database's now) is within `[lo, hi]` (model seconds from the
/// model's now), allowing the database to lag by the real time the test has taken.
pub fn within(got: f64, lo: i64, hi: i64) -> bool {
    got >= lo as f64 - LAG_S && got <= hi as f64 + 0.5
}

pub async fn compare(db: &TestDb, m: &Model) -> Result<(), TestCaseError> {
    m.check_invariants()?;
    let rows = snapshot(db).await?;
    let db_ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let model_ids: Vec<i64> = m.jobs.keys().copied().collect();
    prop_assert_eq!(&db_ids, &model_ids, "job ids differ");
    for r in &rows {
        let j = &m.jobs[&r.id];
        let id = r.id;
        let want_owner = j.owner.map(|w| WORKERS[w].to_string());
        prop_assert_eq!(
            (r.state, r.attempt, r.max_attempts, &r.owner),
            (j.state, j.attempt, j.max_attempts, &want_owner),
            "job {} (state, attempt, max_attempts, owner): database (left) vs model (right)",
            id
        );
        prop_assert_eq!(
            r.cancel_requested,
            j.cancel_requested,
            "job {} cancel flag",
            id
        );
        prop_assert_eq!(
            (r.queue.as_str(), r.priority),
            (QUEUES[j.queue], j.priority),
            "job {} queue and priority",
            id
        );
        prop_assert_eq!(
            r.errors,
            j.errors.min(MAX_HISTORY),
            "job {} error count",
            id
        );
        prop_assert_eq!(&r.last_error, &j.last_error, "job {} newest error", id);
        prop_assert_eq!(r.finished, j.state.is_terminal(), "job {} finished_at", id);
        match j.state {
            JobState::Pending => {
                let (lo, hi) = (j.run_at.lo() - m.now, j.run_at.hi() - m.now);
                prop_assert!(
                    within(r.run_in, lo, hi),
                    "job {}: run_at is now{:+.1}s, model expects [{}, {}]",
                    id,
                    r.run_in,
                    lo,
                    hi
                );
            }
            JobState::Running => {
                let e = j.lease_exp - m.now;
                let got = r.lease_in.unwrap_or(f64::NAN);
                prop_assert!(
                    within(got, e, e),
                    "job {}: lease expires at now{:+.1}s, model expects {}",
                    id,
                    got,
                    e
                );
            }
            _ => {}
        }
    }
    for (qi, q) in QUEUES.iter().enumerate() {
        // Running, or ready in an unpaused queue and not flagged blocked.
        let mut active = 0;
        for r in &rows {
            let j = &m.jobs[&r.id];
            if j.queue == qi
                && (j.state == JobState::Running || (m.ready(j)? && !r.blocked && !m.paused[qi]))
            {
                active += 1;
            }
        }
        let got = ok(
            db.store.active_count(&[q.to_string()]).await,
            "active_count",
        )?;
        prop_assert_eq!(got, active, "active_count of {}", q);
    }
    compare_stats(db, m).await
}

/// The operator counters of `Store::stats`, per queue.
pub async fn compare_stats(db: &TestDb, m: &Model) -> Result<(), TestCaseError> {
    // (pending, ready, running, succeeded, dead, cancelled, near expiry, expired)
    type Counts = [i64; 8];
    let mut want: BTreeMap<String, Counts> = BTreeMap::new();
    for j in m.jobs.values() {
        let c = want.entry(QUEUES[j.queue].to_string()).or_default();
        match j.state {
            JobState::Pending => c[0] += 1,
            JobState::Running => c[2] += 1,
            JobState::Succeeded => c[3] += 1,
            JobState::Dead => c[4] += 1,
            JobState::Cancelled => c[5] += 1,
        }
        if m.ready(j)? {
            c[1] += 1;
        }
        if j.state == JobState::Running {
            // "Expires within 10 s": a lease exactly 10 s away in the model is a few
            // milliseconds closer in the database.
            if j.lease_exp - m.now <= 10 {
                c[6] += 1;
            }
            if !m.unexpired(j)? {
                c[7] += 1;
            }
        }
    }
    let stats = ok(db.store.stats().await, "stats")?;
    let got: BTreeMap<String, Counts> = stats
        .queues
        .iter()
        .map(|q| {
            let c = [
                q.pending,
                q.ready,
                q.running,
                q.succeeded,
                q.dead,
                q.cancelled,
                q.running_near_expiry,
                q.running_expired,
            ];
            (q.queue.clone(), c)
        })
        .collect();
    prop_assert_eq!(
        got,
        want,
        "stats: [pending, ready, running, succeeded, dead, cancelled, near expiry, expired]"
    );
    Ok(())
}
