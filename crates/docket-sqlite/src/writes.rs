//! The fenced writes after a claim (complete, fail, snooze/release, heartbeat), the reaper,
//! pruning, and the operator's single-job actions (retry, cancel, skip, run now).
//!
//! Every fenced write compares the claim's attempt, its owner and the lease's expiry on the
//! database's clock, so a worker that lost its lease — reaped, reclaimed, or simply late —
//! can never overwrite its successor; what it could not apply comes back as `LeaseLost`
//! with the reason.

use std::collections::HashMap;
use std::time::Duration;

use docket_core::local::{backoff_ms, entry, history_len, push_error};
use docket_core::*;
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use sqlx::Row;

use crate::errors::{corrupt, db_err};
use crate::rows;
use crate::store::{ms, SqliteStore};

const COMPLETE_MANY: &str = include_str!("../sql/complete_many.sql");
const COMPLETE_ALL: &str = include_str!("../sql/complete_all.sql");
const COMPLETE_DELETE_ALL: &str = include_str!("../sql/complete_delete_all.sql");
const COMPLETE_DELETE_MANY: &str = include_str!("../sql/complete_delete_many.sql");
const HEARTBEAT: &str = include_str!("../sql/heartbeat.sql");
const SNOOZE_MANY: &str = include_str!("../sql/snooze_many.sql");
const FENCED_ROW: &str = include_str!("../sql/fenced_row.sql");
const FINISH_ATTEMPT: &str = include_str!("../sql/finish_attempt.sql");
const REAP_EXPIRED: &str = include_str!("../sql/reap_expired.sql");
const LEASE_STATUS: &str = include_str!("../sql/lease_status.sql");
const FENCED_STATE: &str = include_str!("../sql/fenced_state.sql");
const PRUNE: &str = include_str!("../sql/prune.sql");
const JOB_STATE: &str = include_str!("../sql/job_state.sql");
const RETRY: &str = include_str!("../sql/retry.sql");
const CANCEL: &str = include_str!("../sql/cancel.sql");
const SKIP: &str = include_str!("../sql/skip.sql");
const RUN_NOW: &str = include_str!("../sql/run_now.sql");
const UNIQUE_HOLDER: &str = include_str!("../sql/unique_holder.sql");
const GET: &str = include_str!("../sql/get.sql");
const LIST: &str = include_str!("../sql/list.sql");

fn sorted_leases(leases: &[Lease]) -> Vec<Lease> {
    let mut v = leases.to_vec();
    v.sort();
    v.dedup();
    v
}

fn pairs(leases: &[Lease]) -> String {
    let v: Vec<(i64, i32)> = leases.iter().map(|l| (l.id.0, l.attempt)).collect();
    serde_json::to_string(&v).unwrap_or_else(|_| "[]".into())
}

/// One job's row after a fenced batch write (fenced_state.sql).
type Fenced = (
    i64,
    i32,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    bool,
);

async fn fenced_state(c: &mut SqliteConnection, leases: &[Lease]) -> Result<Vec<Fenced>> {
    let ids: Vec<i64> = leases.iter().map(|l| l.id.0).collect();
    let text: String = sqlx::query_scalar(FENCED_STATE)
        .bind(serde_json::to_string(&ids).unwrap_or_default())
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)?;
    serde_json::from_str(&text).map_err(|e| corrupt(format!("fenced state: {e}")))
}

fn applied(rows: &[SqliteRow]) -> Result<Vec<Lease>> {
    rows.iter()
        .map(|r| {
            Ok(Lease {
                id: JobId(r.try_get("id").map_err(db_err)?),
                attempt: r.try_get("attempt").map_err(db_err)?,
            })
        })
        .collect()
}

impl SqliteStore {
    /// Says why each lease no longer holds.
    async fn explain_lost(&self, lost: Vec<Lease>) -> Result<Vec<LeaseLost>> {
        if lost.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = lost.iter().map(|l| l.id.0).collect();
        let rows = sqlx::query(LEASE_STATUS)
            .bind(serde_json::to_string(&ids).unwrap_or_default())
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        let mut now: HashMap<i64, (JobState, i32)> = HashMap::new();
        for r in &rows {
            let st: String = r.try_get("state").map_err(db_err)?;
            now.insert(
                r.try_get("id").map_err(db_err)?,
                (rows::state(&st)?, r.try_get("attempt").map_err(db_err)?),
            );
        }
        Ok(lost
            .into_iter()
            .map(|lease| docket_core::local::lost(lease, now.get(&lease.id.0).copied()))
            .collect())
    }

    /// Why one lease no longer holds.
    pub(crate) async fn lease_lost(&self, lease: Lease) -> Result<LeaseLost> {
        let mut v = self.explain_lost(vec![lease]).await?;
        Ok(v.remove(0))
    }

    async fn outcome(&self, leases: &[Lease], done: Vec<Lease>) -> Result<BatchOutcome> {
        let lost: Vec<Lease> = leases
            .iter()
            .filter(|l| !done.contains(l))
            .copied()
            .collect();
        Ok(BatchOutcome {
            applied: done,
            lost: self.explain_lost(lost).await?,
        })
    }

    /// The common case of a completion first: every lease still holds, and one autocommit
    /// statement (`complete_all.sql` or `complete_delete_all.sql`, parameters: pairs, owner,
    /// count) completes them all. It writes all or nothing, so when any lease was lost the
    /// caller's transaction sorts the batch out from the same rows. True when it wrote all.
    async fn all_or_nothing(
        &self,
        sql: &'static str,
        owner: &str,
        sorted: &[Lease],
    ) -> Result<bool> {
        let json = pairs(sorted);
        let n = self
            .write_alone(|| {
                sqlx::query(sql)
                    .bind(json.as_str())
                    .bind(owner)
                    .bind(sorted.len() as i64)
            })
            .await?;
        Ok(n as usize == sorted.len())
    }

    pub(crate) async fn complete_many_impl(
        &self,
        owner: &str,
        leases: &[Lease],
    ) -> Result<BatchOutcome> {
        if leases.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = sorted_leases(leases);
        if self.all_or_nothing(COMPLETE_ALL, owner, &sorted).await? {
            return Ok(BatchOutcome {
                applied: sorted,
                lost: Vec::new(),
            });
        }
        let done = self
            .write(async |c: &mut SqliteConnection, now| {
                let n = sqlx::query(COMPLETE_MANY)
                    .bind(pairs(&sorted))
                    .bind(owner)
                    .bind(now)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?
                    .rows_affected();
                if n as usize == sorted.len() {
                    return Ok(sorted.clone());
                }
                // Some were refused: the ones this transaction finished are succeeded by
                // their own attempt at this transaction's now.
                let state = fenced_state(c, &sorted).await?;
                Ok(sorted
                    .iter()
                    .filter(|l| {
                        state.iter().any(|(id, att, st, _, _, fin, _)| {
                            *id == l.id.0
                                && *att == l.attempt
                                && st == "succeeded"
                                && *fin == Some(now)
                        })
                    })
                    .copied()
                    .collect())
            })
            .await?;
        self.outcome(&sorted, done).await
    }

    /// Completes by deleting (see `Store::complete_delete_many`): one all-or-nothing
    /// autocommit statement when every lease holds, else a write transaction that reads
    /// which leases hold and deletes exactly those.
    pub(crate) async fn complete_delete_many_impl(
        &self,
        owner: &str,
        leases: &[Lease],
    ) -> Result<BatchOutcome> {
        if leases.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = sorted_leases(leases);
        if self
            .all_or_nothing(COMPLETE_DELETE_ALL, owner, &sorted)
            .await?
        {
            return Ok(BatchOutcome {
                applied: sorted,
                lost: Vec::new(),
            });
        }
        let done = self
            .write(async |c: &mut SqliteConnection, now| {
                // Read before the delete: a deleted row cannot say whose it was.
                let state = fenced_state(c, &sorted).await?;
                let held: Vec<Lease> = sorted
                    .iter()
                    .filter(|l| {
                        state.iter().any(|(id, att, st, own, exp, _, _)| {
                            *id == l.id.0
                                && *att == l.attempt
                                && st == "running"
                                && own.as_deref() == Some(owner)
                                && exp.is_some_and(|e| e > now)
                        })
                    })
                    .copied()
                    .collect();
                let n = sqlx::query(COMPLETE_DELETE_MANY)
                    .bind(pairs(&held))
                    .bind(owner)
                    .bind(now)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?
                    .rows_affected();
                if n as usize != held.len() {
                    // Nobody else writes inside this transaction; a mismatch is a bug.
                    return Err(corrupt(format!(
                        "deleted {n} of {} jobs whose leases held",
                        held.len()
                    )));
                }
                Ok(held)
            })
            .await?;
        self.outcome(&sorted, done).await
    }

    pub(crate) async fn fail_many_impl(
        &self,
        owner: &str,
        failures: &[Failure],
    ) -> Result<BatchOutcome> {
        if failures.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let mut sorted = failures.to_vec();
        sorted.sort_by_key(|f| f.lease);
        sorted.dedup_by_key(|f| f.lease);
        let max = self.inner.limits.max_error_bytes;
        let leases: Vec<Lease> = sorted.iter().map(|f| f.lease).collect();
        let done = self
            .write(async |c: &mut SqliteConnection, now| {
                let mut done = Vec::new();
                for f in &sorted {
                    let row = sqlx::query(FENCED_ROW)
                        .bind(f.lease.id.0)
                        .bind(f.lease.attempt)
                        .bind(owner)
                        .bind(now)
                        .fetch_optional(&mut *c)
                        .await
                        .map_err(db_err)?;
                    let Some(r) = row else { continue };
                    let attempt: i32 = r.try_get("attempt").map_err(db_err)?;
                    let max_attempts: i64 = r.try_get("max_attempts").map_err(db_err)?;
                    let cancel_req: Option<i64> =
                        r.try_get("cancel_requested_at").map_err(db_err)?;
                    let errors: String = r.try_get("errors").map_err(db_err)?;
                    let cancelled = f.class == FailureClass::Cancel || cancel_req.is_some();
                    let retry = f.class == FailureClass::Retry
                        && i64::from(attempt) < max_attempts
                        && cancel_req.is_none();
                    let state = if cancelled {
                        JobState::Cancelled
                    } else if f.class == FailureClass::Discard || i64::from(attempt) >= max_attempts
                    {
                        JobState::Dead
                    } else {
                        JobState::Pending
                    };
                    let run_at = retry.then(|| {
                        now + f.retry_in.map(ms).unwrap_or_else(|| {
                            backoff_ms(
                                history_len(&errors) + 1,
                                r.try_get("backoff_base_ms").ok().flatten(),
                                r.try_get("backoff_cap_ms").ok().flatten(),
                            )
                        })
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
                    let n = sqlx::query(FINISH_ATTEMPT)
                        .bind(f.lease.id.0)
                        .bind(state.as_str())
                        .bind(run_at)
                        .bind((!retry).then_some(now))
                        .bind(errors)
                        .bind(attempt)
                        .execute(&mut *c)
                        .await
                        .map_err(db_err)?
                        .rows_affected();
                    if n == 1 {
                        done.push(f.lease);
                    }
                }
                Ok(done)
            })
            .await?;
        self.outcome(&leases, done).await
    }

    pub(crate) async fn snooze_many_impl(
        &self,
        owner: &str,
        snoozes: &[Snooze],
    ) -> Result<BatchOutcome> {
        if snoozes.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let mut sorted = snoozes.to_vec();
        sorted.sort_by_key(|s| s.lease);
        sorted.dedup_by_key(|s| s.lease);
        for s in &sorted {
            duration::check_bounds("snooze", s.delay, Duration::ZERO, duration::MAX_DELAY)?;
        }
        let leases: Vec<Lease> = sorted.iter().map(|s| s.lease).collect();
        let triples: Vec<(i64, i32, i64)> = sorted
            .iter()
            .map(|s| (s.lease.id.0, s.lease.attempt, ms(s.delay)))
            .collect();
        let rows = self
            .write(async |c: &mut SqliteConnection, now| {
                sqlx::query(SNOOZE_MANY)
                    .bind(serde_json::to_string(&triples).unwrap_or_default())
                    .bind(owner)
                    .bind(now)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let done = applied(&rows)?;
        if sorted.iter().any(|s| s.delay.is_zero()) && !done.is_empty() {
            // Released jobs are due now: let this process's idle fetchers look.
            for q in self.queues_of(&done).await? {
                self.hint(Wake::Queue(q));
            }
        }
        self.outcome(&leases, done).await
    }

    async fn queues_of(&self, leases: &[Lease]) -> Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        for l in leases {
            if let Ok(r) = self.get_impl(l.id).await {
                if !out.contains(&r.queue) {
                    out.push(r.queue);
                }
            }
        }
        Ok(out)
    }

    pub(crate) async fn heartbeat_impl(
        &self,
        owner: &str,
        leases: &[Lease],
        lease: Duration,
    ) -> Result<HeartbeatOutcome> {
        if leases.is_empty() {
            return Ok(HeartbeatOutcome::default());
        }
        let sorted = sorted_leases(leases);
        let (state, until) = self
            .write(async |c: &mut SqliteConnection, now| {
                sqlx::query(HEARTBEAT)
                    .bind(pairs(&sorted))
                    .bind(owner)
                    .bind(now)
                    .bind(ms(lease))
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?;
                Ok((fenced_state(c, &sorted).await?, now + ms(lease)))
            })
            .await?;
        let mut out = HeartbeatOutcome::default();
        let until_at = rows::at(until, "lease_expires_at").map_err(corrupt)?;
        for l in &sorted {
            let row = state.iter().find(|(id, att, st, o, exp, _, _)| {
                *id == l.id.0
                    && *att == l.attempt
                    && st == "running"
                    && o.as_deref() == Some(owner)
                    && *exp == Some(until)
            });
            if let Some((.., cancel)) = row {
                out.extended.push((*l, until_at));
                if *cancel {
                    out.cancel_requested.push(*l);
                }
            }
        }
        let lost: Vec<Lease> = sorted
            .into_iter()
            .filter(|l| !out.extended.iter().any(|(e, _)| e == l))
            .collect();
        out.lost = self.explain_lost(lost).await?;
        Ok(out)
    }

    pub(crate) async fn reap_impl(&self, batch: i64) -> Result<ReapReport> {
        let jobs = self
            .write(async |c: &mut SqliteConnection, now| {
                let rows = sqlx::query(REAP_EXPIRED)
                    .bind(now)
                    .bind(batch.max(1))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    let id: i64 = r.try_get("id").map_err(db_err)?;
                    // Read wide: a row written by hand with a budget beyond 32 bits must
                    // not stop the sweep of every other expired lease.
                    let stored: i64 = r.try_get("attempt").map_err(db_err)?;
                    let max_attempts: i64 = r.try_get("max_attempts").map_err(db_err)?;
                    let attempt = i32::try_from(stored).unwrap_or(i32::MAX);
                    let cancel_req: Option<i64> =
                        r.try_get("cancel_requested_at").map_err(db_err)?;
                    let errors: String = r.try_get("errors").map_err(db_err)?;
                    let owner: String = r.try_get("lease_owner").map_err(db_err)?;
                    let state = if cancel_req.is_some() {
                        JobState::Cancelled
                    } else if stored >= max_attempts {
                        JobState::Dead
                    } else {
                        JobState::Pending
                    };
                    let run_at = (state == JobState::Pending).then(|| {
                        now + backoff_ms(
                            history_len(&errors) + 1,
                            r.try_get("backoff_base_ms").ok().flatten(),
                            r.try_get("backoff_cap_ms").ok().flatten(),
                        )
                    });
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
                    sqlx::query(FINISH_ATTEMPT)
                        .bind(id)
                        .bind(state.as_str())
                        .bind(run_at)
                        .bind((state != JobState::Pending).then_some(now))
                        .bind(errors)
                        .bind(stored)
                        .execute(&mut *c)
                        .await
                        .map_err(db_err)?;
                    out.push(Reaped {
                        id: JobId(id),
                        attempt,
                        owner,
                        queue: r.try_get("queue").map_err(db_err)?,
                        state,
                    });
                }
                Ok(out)
            })
            .await?;
        Ok(ReapReport { jobs })
    }

    pub(crate) async fn prune_impl(&self, retention: &Retention) -> Result<PruneReport> {
        let mut report = PruneReport::default();
        let batch = retention.batch.max(1);
        for (states, keep, counter) in [
            (
                r#"["succeeded","cancelled"]"#,
                retention.finished,
                &mut report.finished,
            ),
            (r#"["dead"]"#, retention.dead, &mut report.dead),
        ] {
            loop {
                let n = self
                    .write(async |c: &mut SqliteConnection, now| {
                        Ok(sqlx::query(PRUNE)
                            .bind(states)
                            .bind(now)
                            .bind(ms(keep))
                            .bind(batch)
                            .execute(&mut *c)
                            .await
                            .map_err(db_err)?
                            .rows_affected())
                    })
                    .await?;
                *counter += n;
                if n < batch as u64 {
                    break;
                }
            }
        }
        Ok(report)
    }

    pub(crate) async fn get_impl(&self, id: JobId) -> Result<JobRecord> {
        let row = sqlx::query(GET)
            .bind(id.0)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(db_err)?;
        match row {
            Some(r) => rows::record(&r),
            None => Err(StoreError::NotFound(id)),
        }
    }

    pub(crate) async fn list_impl(&self, filter: &JobFilter) -> Result<Vec<JobRecord>> {
        if let Some(q) = &filter.queue {
            validate::queue(q)?;
        }
        let limit = if filter.limit <= 0 { 100 } else { filter.limit };
        let rows = sqlx::query(LIST)
            .bind(filter.queue.as_deref())
            .bind(filter.state.map(|s| s.as_str()))
            .bind(limit)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        rows.iter().map(rows::record).collect()
    }

    pub(crate) async fn retry_impl(&self, id: JobId, extra_attempts: i32) -> Result<JobRecord> {
        if !(1..=1000).contains(&extra_attempts) {
            return Err(ValidationError::MaxAttempts(extra_attempts).into());
        }
        let queue = self
            .write(async |c: &mut SqliteConnection, now| {
                let (state, _, queue, key) = job_state(c, id).await?;
                if !matches!(state, JobState::Dead | JobState::Cancelled) {
                    return Err(StoreError::WrongState {
                        id,
                        state,
                        op: "retry (only dead or cancelled jobs can be retried)",
                    });
                }
                if let Some(key) = key {
                    let holder: Option<i64> = sqlx::query_scalar(UNIQUE_HOLDER)
                        .bind(&key)
                        .fetch_optional(&mut *c)
                        .await
                        .map_err(db_err)?;
                    if let Some(h) = holder {
                        return Err(StoreError::UniqueConflict {
                            key,
                            holder: JobId(h),
                        });
                    }
                }
                sqlx::query(RETRY)
                    .bind(id.0)
                    .bind(now)
                    .bind(extra_attempts)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?;
                Ok(queue)
            })
            .await?;
        self.hint(Wake::Queue(queue));
        self.get_impl(id).await
    }

    pub(crate) async fn cancel_impl(&self, id: JobId) -> Result<CancelOutcome> {
        let actor = self.inner.actor.clone();
        let outcome = self
            .write(async |c: &mut SqliteConnection, now| {
                let row = sqlx::query(JOB_STATE)
                    .bind(id.0)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)?
                    .ok_or(StoreError::NotFound(id))?;
                let state = rows::state(&row.try_get::<String, _>("state").map_err(db_err)?)?;
                let attempt: i32 = row.try_get("attempt").map_err(db_err)?;
                let requested: Option<i64> = row.try_get("cancel_requested_at").map_err(db_err)?;
                let mut errors: String = row.try_get("errors").map_err(db_err)?;
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
                    JobState::Pending => ("cancelled", Some(now), CancelOutcome::Cancelled),
                    JobState::Running => ("running", None, CancelOutcome::Requested),
                    _ => {
                        return Err(StoreError::WrongState {
                            id,
                            state,
                            op: "cancel (it already finished)",
                        })
                    }
                };
                sqlx::query(CANCEL)
                    .bind(id.0)
                    .bind(to)
                    .bind(finished)
                    .bind(now)
                    .bind(errors)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?;
                Ok(outcome)
            })
            .await?;
        if outcome == CancelOutcome::Requested {
            self.hint(Wake::Cancel(id));
        }
        Ok(outcome)
    }

    pub(crate) async fn skip_impl(&self, id: JobId) -> Result<JobRecord> {
        self.write(async |c: &mut SqliteConnection, now| {
            let row = sqlx::query(JOB_STATE)
                .bind(id.0)
                .fetch_optional(&mut *c)
                .await
                .map_err(db_err)?
                .ok_or(StoreError::NotFound(id))?;
            let state = rows::state(&row.try_get::<String, _>("state").map_err(db_err)?)?;
            if state != JobState::Dead {
                return Err(StoreError::WrongState {
                    id,
                    state,
                    op: "skip (only dead jobs can be skipped)",
                });
            }
            let attempt: i32 = row.try_get("attempt").map_err(db_err)?;
            let errors: String = row.try_get("errors").map_err(db_err)?;
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
            sqlx::query(SKIP)
                .bind(id.0)
                .bind(now)
                .bind(errors)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await?;
        self.get_impl(id).await
    }

    pub(crate) async fn run_now_impl(&self, id: JobId) -> Result<JobRecord> {
        let queue: Option<String> = self
            .write(async |c: &mut SqliteConnection, now| {
                sqlx::query_scalar(RUN_NOW)
                    .bind(id.0)
                    .bind(now)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let Some(queue) = queue else {
            let job = self.get_impl(id).await?;
            return Err(StoreError::WrongState {
                id,
                state: job.state,
                op: "run now (only a pending job scheduled for later)",
            });
        };
        self.hint(Wake::Queue(queue));
        self.get_impl(id).await
    }
}

/// (state, attempt, queue, unique key) of job `id`, or `NotFound`.
async fn job_state(
    c: &mut SqliteConnection,
    id: JobId,
) -> Result<(JobState, i32, String, Option<String>)> {
    let row = sqlx::query(JOB_STATE)
        .bind(id.0)
        .fetch_optional(&mut *c)
        .await
        .map_err(db_err)?
        .ok_or(StoreError::NotFound(id))?;
    let st: String = row.try_get("state").map_err(db_err)?;
    Ok((
        rows::state(&st).map_err(|_| corrupt(format!("job {id} has state {st:?}")))?,
        row.try_get("attempt").map_err(db_err)?,
        row.try_get("queue").map_err(db_err)?,
        row.try_get("unique_key").map_err(db_err)?,
    ))
}

/// The run a history entry names: the row's `attempt` (the fencing token) less the claims
/// given back unrun (`released`, read alongside it).
fn run_of(r: &sqlx::sqlite::SqliteRow, attempt: i32) -> i32 {
    docket_core::runs(attempt, r.try_get("released").unwrap_or(0))
}
