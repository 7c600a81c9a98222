//! After every step: every row and the counters, database against model.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::conformance::Harness;
use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::state::*;
use super::*;

/// One row as the database has it.
#[derive(Debug)]
pub struct DbJob {
    pub id: i64,
    pub state: JobState,
    pub attempt: i32,
    pub max_attempts: i32,
    pub released: i32,
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

pub async fn snapshot<H: Harness>(h: &H) -> Result<Vec<DbJob>, TestCaseError> {
    // Times relative to the database's clock, read once after the rows.
    let rows = records(h).await?;
    let now = h.now().await;
    let secs = |t: DateTime<Utc>| (t - now).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let last_error = match r.errors.last() {
            None => None,
            Some(e) => Some(LastError {
                attempt: e.attempt,
                class: e.class.clone(),
                owner: e
                    .owner
                    .clone()
                    .ok_or_else(|| fail(format!("job {}: history entry without owner", r.id)))?,
            }),
        };
        out.push(DbJob {
            id: r.id.0,
            state: r.state,
            attempt: r.attempt,
            max_attempts: r.max_attempts,
            released: r.released,
            owner: r.lease_owner,
            cancel_requested: r.cancel_requested_at.is_some(),
            queue: r.queue,
            priority: r.priority,
            errors: r.errors.len() as i32,
            last_error,
            finished: r.finished_at.is_some(),
            run_in: secs(r.run_at),
            lease_in: r.lease_expires_at.map(secs),
            blocked: r.blocked,
        });
    }
    Ok(out)
}

/// `got` (seconds from the database's now) is within `[lo, hi]` (model seconds from the
/// model's now), allowing the database to lag by the real time the test has taken.
pub fn within(got: f64, lo: i64, hi: i64) -> bool {
    got >= lo as f64 - LAG_S && got <= hi as f64 + 0.5
}

pub async fn compare<H: Harness>(h: &H, m: &Model) -> Result<(), TestCaseError> {
    m.check_invariants()?;
    let rows = snapshot(h).await?;
    let db_ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let model_ids: Vec<i64> = m.jobs.keys().copied().collect();
    prop_assert_eq!(&db_ids, &model_ids, "job ids differ");
    for r in &rows {
        let j = &m.jobs[&r.id];
        let id = r.id;
        let want_owner = j.owner.map(|w| WORKERS[w].to_string());
        prop_assert_eq!(
            (r.state, r.attempt, r.max_attempts, r.released, &r.owner),
            (j.state, j.attempt, j.max_attempts, j.released, &want_owner),
            "job {} (state, attempt, max_attempts, released, owner): database (left) vs model (right)",
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
        let o = ok(h.store().job_output(JobId(id)).await, "job_output")?;
        prop_assert_eq!(&o.output, &j.output, "job {} output", id);
        let steps = ok(h.store().job_steps(JobId(id)).await, "job_steps")?;
        let got: BTreeMap<String, (i32, serde_json::Value)> = steps
            .into_iter()
            .map(|s| (s.name, (s.attempt, s.output)))
            .collect();
        prop_assert_eq!(&got, &j.steps, "job {} steps", id);
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
            h.store().active_count(&[q.to_string()]).await,
            "active_count",
        )?;
        prop_assert_eq!(got, active, "active_count of {}", q);
    }
    compare_stats(h, m).await
}

/// The operator counters of `Store::stats`, per queue.
pub async fn compare_stats<H: Harness>(h: &H, m: &Model) -> Result<(), TestCaseError> {
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
            // The model enqueues no workflow.
            JobState::Waiting => {}
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
    let stats = ok(h.store().stats().await, "stats")?;
    let got: BTreeMap<String, Counts> = stats
        .queues
        .iter()
        .map(|q| {
            // The model knows no `blocked` flag (PostgreSQL sets it as claims pass a held
            // key): it counts every pending job, and every due one.
            let c = [
                q.pending + q.blocked,
                q.waiting,
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
