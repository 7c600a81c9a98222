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
use sqlx::mysql::{MySqlConnection, MySqlRow};
use sqlx::Row;

use crate::claim::with_ids;
use crate::errors::{corrupt, db_err};
use crate::rows;
use crate::store::{ms, MySqlStore};

const FENCED_SELECT: &str = include_str!("../sql/fenced_select.sql");
const COMPLETE_FAST: &str = include_str!("../sql/complete_fast.sql");
const COMPLETE_CHECK: &str = include_str!("../sql/complete_check.sql");
const COMPLETE_DELETE_APPLY: &str = include_str!("../sql/complete_delete_apply.sql");
const HEARTBEAT_APPLY: &str = include_str!("../sql/heartbeat_apply.sql");
const SNOOZE_APPLY: &str = include_str!("../sql/snooze_apply.sql");
const FENCED_ROW: &str = include_str!("../sql/fenced_row.sql");
const FINISH_ATTEMPT: &str = include_str!("../sql/finish_attempt.sql");
const REAP_EXPIRED: &str = include_str!("../sql/reap_expired.sql");
const LEASE_STATUS: &str = include_str!("../sql/lease_status.sql");
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

/// The rows of the jobs named by `leases` that `owner`'s claim still holds, locked
/// until the transaction ends, as (lease, cancel requested, queue); only exact (id, attempt)
/// matches are kept — the fence.
pub(crate) async fn fenced(
    c: &mut MySqlConnection,
    leases: &[Lease],
    owner: &str,
) -> Result<Vec<(Lease, bool, String)>> {
    let sql = with_ids(FENCED_SELECT, leases.len());
    let mut q = sqlx::query(&sql);
    for l in leases {
        q = q.bind(l.id.0);
    }
    let rows: Vec<MySqlRow> = q.bind(owner).fetch_all(&mut *c).await.map_err(db_err)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let lease = Lease {
            id: JobId(r.try_get("id").map_err(db_err)?),
            attempt: r.try_get("attempt").map_err(db_err)?,
        };
        if leases.contains(&lease) {
            let cancel: Option<i64> = r.try_get("cancel_requested_at").map_err(db_err)?;
            out.push((
                lease,
                cancel.is_some(),
                crate::rows::get(r, "queue").map_err(db_err)?,
            ));
        }
    }
    Ok(out)
}

/// Runs `sql` (params `first`, then `owner`, then the ids of `held`).
async fn apply(
    c: &mut MySqlConnection,
    sql: &str,
    first: i64,
    owner: &str,
    held: &[Lease],
) -> Result<u64> {
    if held.is_empty() {
        return Ok(0);
    }
    let sql = with_ids(sql, held.len());
    let mut q = sqlx::query(&sql).bind(first).bind(owner);
    for l in held {
        q = q.bind(l.id.0);
    }
    Ok(q.execute(&mut *c).await.map_err(db_err)?.rows_affected())
}

impl MySqlStore {
    /// Says why each lease no longer holds.
    async fn explain_lost(&self, lost: Vec<Lease>) -> Result<Vec<LeaseLost>> {
        if lost.is_empty() {
            return Ok(Vec::new());
        }
        let sql = with_ids(LEASE_STATUS, lost.len());
        let mut q = sqlx::query(&sql);
        for l in &lost {
            q = q.bind(l.id.0);
        }
        let rows = q.fetch_all(&self.inner.pool).await.map_err(db_err)?;
        let mut now: HashMap<i64, (JobState, i32)> = HashMap::new();
        for r in &rows {
            let st: String = crate::rows::get(r, "state").map_err(db_err)?;
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

    pub(crate) async fn complete_many_impl(
        &self,
        owner: &str,
        leases: &[Lease],
    ) -> Result<BatchOutcome> {
        if leases.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = sorted_leases(leases);
        // One autocommit statement: the fence is in its WHERE clause.
        let now = self.now_ms().await?;
        let sql = COMPLETE_FAST.replace("/*pairs*/", &vec!["(?, ?)"; sorted.len()].join(", "));
        let mut q = sqlx::query(&sql).bind(now).bind(owner);
        for l in &sorted {
            q = q.bind(l.id.0).bind(l.attempt);
        }
        let n = q
            .execute(&self.inner.pool)
            .await
            .map_err(db_err)?
            .rows_affected();
        let done = if n as usize == sorted.len() {
            sorted.clone()
        } else {
            let sql = with_ids(COMPLETE_CHECK, sorted.len());
            let mut q = sqlx::query_as::<_, (i64, i32)>(&sql).bind(now);
            for l in &sorted {
                q = q.bind(l.id.0);
            }
            let rows = q.fetch_all(&self.inner.pool).await.map_err(db_err)?;
            sorted
                .iter()
                .filter(|l| rows.contains(&(l.id.0, l.attempt)))
                .copied()
                .collect()
        };
        self.outcome(&sorted, done).await
    }

    /// Completes by deleting (see `Store::complete_delete_many`), in one transaction: lock the
    /// rows whose leases hold (fenced_select.sql), delete them, and when a lease ran out
    /// between the two, read which rows are left. Exact, unlike an autocommit DELETE, which
    /// could not tell afterwards whose rows it removed.
    pub(crate) async fn complete_delete_many_impl(
        &self,
        owner: &str,
        leases: &[Lease],
    ) -> Result<BatchOutcome> {
        if leases.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = sorted_leases(leases);
        let done = self
            .write(async |c: &mut MySqlConnection, _now| {
                let held: Vec<Lease> = fenced(c, &sorted, owner)
                    .await?
                    .into_iter()
                    .map(|(l, _, _)| l)
                    .collect();
                if held.is_empty() {
                    return Ok(held);
                }
                let sql = with_ids(COMPLETE_DELETE_APPLY, held.len());
                let mut q = sqlx::query(&sql).bind(owner);
                for l in &held {
                    q = q.bind(l.id.0);
                }
                let n = q.execute(&mut *c).await.map_err(db_err)?.rows_affected();
                if n as usize == held.len() {
                    return Ok(held);
                }
                let sql = with_ids(LEASE_STATUS, held.len());
                let mut q = sqlx::query_scalar::<_, i64>(&sql);
                for l in &held {
                    q = q.bind(l.id.0);
                }
                let left = q.fetch_all(&mut *c).await.map_err(db_err)?;
                Ok(held
                    .into_iter()
                    .filter(|l| !left.contains(&l.id.0))
                    .collect())
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
            .write(async |c: &mut MySqlConnection, now| {
                let mut done = Vec::new();
                for f in &sorted {
                    let row = sqlx::query(FENCED_ROW)
                        .bind(f.lease.id.0)
                        .bind(f.lease.attempt)
                        .bind(owner)
                        .fetch_optional(&mut *c)
                        .await
                        .map_err(db_err)?;
                    let Some(r) = row else { continue };
                    let attempt: i32 = r.try_get("attempt").map_err(db_err)?;
                    let max_attempts: i32 = r.try_get("max_attempts").map_err(db_err)?;
                    let cancel_req: Option<i64> =
                        r.try_get("cancel_requested_at").map_err(db_err)?;
                    let errors: String = crate::rows::get(&r, "errors").map_err(db_err)?;
                    let cancelled = f.class == FailureClass::Cancel || cancel_req.is_some();
                    let retry = f.class == FailureClass::Retry
                        && attempt < max_attempts
                        && cancel_req.is_none();
                    let state = if cancelled {
                        JobState::Cancelled
                    } else if f.class == FailureClass::Discard || attempt >= max_attempts {
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
                        .bind(state.as_str())
                        .bind(run_at)
                        .bind((!retry).then_some(now))
                        .bind(errors)
                        .bind(f.lease.id.0)
                        .bind(attempt)
                        .bind(1)
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
        let (done, queues) = self
            .write(async |c: &mut MySqlConnection, now| {
                let held = fenced(c, &leases, owner).await?;
                let mut done = Vec::with_capacity(held.len());
                let mut queues: Vec<String> = Vec::new();
                for (l, _, queue) in held {
                    let delay = sorted
                        .iter()
                        .find(|s| s.lease == l)
                        .map_or(0, |s| ms(s.delay));
                    let n = sqlx::query(SNOOZE_APPLY)
                        .bind(now)
                        .bind(now + delay)
                        .bind(l.id.0)
                        .bind(l.attempt)
                        .execute(&mut *c)
                        .await
                        .map_err(db_err)?
                        .rows_affected();
                    if n != 1 {
                        continue;
                    }
                    if delay == 0 && !queues.contains(&queue) {
                        queues.push(queue);
                    }
                    done.push(l);
                }
                Ok((done, queues))
            })
            .await?;
        // Released jobs are due now: let this process's idle fetchers look.
        for q in queues {
            self.hint(Wake::Queue(q));
        }
        self.outcome(&leases, done).await
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
        let (held, until) = self
            .write(async |c: &mut MySqlConnection, now| {
                let mut held = fenced(c, &sorted, owner).await?;
                let until = now + ms(lease);
                let ls: Vec<Lease> = held.iter().map(|(l, _, _)| *l).collect();
                if apply(c, HEARTBEAT_APPLY, until, owner, &ls).await? as usize != ls.len() {
                    // Some expired between the fenced read and the write: find which (an
                    // extended lease matches again, an expired one does not).
                    let mut kept = Vec::with_capacity(held.len());
                    for h in held {
                        if apply(c, HEARTBEAT_APPLY, until, owner, &[h.0]).await? == 1 {
                            kept.push(h);
                        }
                    }
                    held = kept;
                }
                Ok((held, until))
            })
            .await?;
        let until = rows::at(until, "lease_expires_at").map_err(corrupt)?;
        let mut out = HeartbeatOutcome::default();
        for (l, cancel, _) in held {
            out.extended.push((l, until));
            if cancel {
                out.cancel_requested.push(l);
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
            .write(async |c: &mut MySqlConnection, now| {
                let rows = sqlx::query(REAP_EXPIRED)
                    .bind(now)
                    .bind(batch.max(1))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    let id: i64 = r.try_get("id").map_err(db_err)?;
                    let attempt: i32 = r.try_get("attempt").map_err(db_err)?;
                    let max_attempts: i32 = r.try_get("max_attempts").map_err(db_err)?;
                    let cancel_req: Option<i64> =
                        r.try_get("cancel_requested_at").map_err(db_err)?;
                    let errors: String = crate::rows::get(r, "errors").map_err(db_err)?;
                    let owner: String = crate::rows::get(r, "lease_owner").map_err(db_err)?;
                    let state = if cancel_req.is_some() {
                        JobState::Cancelled
                    } else if attempt >= max_attempts {
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
                        .bind(state.as_str())
                        .bind(run_at)
                        .bind((state != JobState::Pending).then_some(now))
                        .bind(errors)
                        .bind(id)
                        .bind(attempt)
                        .bind(0)
                        .execute(&mut *c)
                        .await
                        .map_err(db_err)?;
                    out.push(Reaped {
                        id: JobId(id),
                        attempt,
                        owner,
                        queue: crate::rows::get(r, "queue").map_err(db_err)?,
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
                &["succeeded", "cancelled"][..],
                retention.finished,
                &mut report.finished,
            ),
            (&["dead"][..], retention.dead, &mut report.dead),
        ] {
            for state in states {
                loop {
                    let n = self
                        .write(async |c: &mut MySqlConnection, now| {
                            Ok(sqlx::query(PRUNE)
                                .bind(*state)
                                .bind(now - ms(keep))
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
            .bind(filter.queue.as_deref())
            .bind(filter.state.map(|s| s.as_str()))
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
            .write(async |c: &mut MySqlConnection, now| {
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
                    .bind(now)
                    .bind(extra_attempts)
                    .bind(id.0)
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
        let actor = "mysql".to_string();
        let outcome = self
            .write(async |c: &mut MySqlConnection, now| {
                let row = sqlx::query(JOB_STATE)
                    .bind(id.0)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)?
                    .ok_or(StoreError::NotFound(id))?;
                let state =
                    rows::state(&crate::rows::get::<String>(&row, "state").map_err(db_err)?)?;
                let attempt: i32 = row.try_get("attempt").map_err(db_err)?;
                let requested: Option<i64> = row.try_get("cancel_requested_at").map_err(db_err)?;
                let mut errors: String = crate::rows::get(&row, "errors").map_err(db_err)?;
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
                    .bind(to)
                    .bind(finished)
                    .bind(now)
                    .bind(errors)
                    .bind(id.0)
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
        self.write(async |c: &mut MySqlConnection, now| {
            let row = sqlx::query(JOB_STATE)
                .bind(id.0)
                .fetch_optional(&mut *c)
                .await
                .map_err(db_err)?
                .ok_or(StoreError::NotFound(id))?;
            let state = rows::state(&crate::rows::get::<String>(&row, "state").map_err(db_err)?)?;
            if state != JobState::Dead {
                return Err(StoreError::WrongState {
                    id,
                    state,
                    op: "skip (only dead jobs can be skipped)",
                });
            }
            let attempt: i32 = row.try_get("attempt").map_err(db_err)?;
            let errors: String = crate::rows::get(&row, "errors").map_err(db_err)?;
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
                .bind(now)
                .bind(errors)
                .bind(id.0)
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
            .write(async |c: &mut MySqlConnection, now| {
                let (state, _, queue, _) = job_state(c, id).await?;
                let n = sqlx::query(RUN_NOW)
                    .bind(now)
                    .bind(id.0)
                    .bind(now)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?
                    .rows_affected();
                Ok((n == 1 && state == JobState::Pending).then_some(queue))
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
    c: &mut MySqlConnection,
    id: JobId,
) -> Result<(JobState, i32, String, Option<String>)> {
    let row = sqlx::query(JOB_STATE)
        .bind(id.0)
        .fetch_optional(&mut *c)
        .await
        .map_err(db_err)?
        .ok_or(StoreError::NotFound(id))?;
    let st: String = crate::rows::get(&row, "state").map_err(db_err)?;
    Ok((
        rows::state(&st).map_err(|_| corrupt(format!("job {id} has state {st:?}")))?,
        row.try_get("attempt").map_err(db_err)?,
        crate::rows::get(&row, "queue").map_err(db_err)?,
        crate::rows::get(&row, "unique_key").map_err(db_err)?,
    ))
}

/// The run a history entry names: the row's `attempt` (the fencing token) less the claims
/// given back unrun (`released`, read alongside it).
fn run_of(r: &sqlx::mysql::MySqlRow, attempt: i32) -> i32 {
    docket_core::runs(attempt, r.try_get("released").unwrap_or(0))
}
