//! Scheduling controls and periodic jobs on PostgreSQL: the bodies behind the
//! corresponding [`Store`] methods (the trait impl in `store.rs` delegates here).
//!
//! Every control change takes the queue's control lock first (`queue_lock.sql`): claims hold
//! it shared while they decide, so when a change returns, claims in flight have committed
//! and every later claim sees it. That is what makes "paused means never claimed" exact.

use std::time::Duration;

use chrono::{DateTime, Utc};
use docket_core::*;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::store::{ms, PgStore};

/// Keys of each kind one unblock sweep looks at after a limit change.
const SWEEP_BATCH: i32 = 1000;

fn rate_of(r: &PgRow) -> Result<Option<RateLimit>> {
    let limit: Option<i32> = r.try_get("rate_limit").map_err(db_err)?;
    let period: Option<i64> = r.try_get("rate_period_ms").map_err(db_err)?;
    Ok(match (limit, period) {
        (Some(limit), Some(p)) => Some(RateLimit {
            limit,
            period: Duration::from_millis(p.max(0) as u64),
        }),
        _ => None,
    })
}

pub(crate) fn control_row(r: &PgRow) -> Result<QueueControl> {
    Ok(QueueControl {
        queue: r.try_get("name").map_err(db_err)?,
        paused_at: r.try_get("paused_at").map_err(db_err)?,
        limits: QueueLimits {
            max_running: r.try_get("max_running").map_err(db_err)?,
            key_max_running: r.try_get("key_max_running").map_err(db_err)?,
            rate: rate_of(r)?,
        },
        tokens: r.try_get("tokens").map_err(db_err)?,
    })
}

fn periodic_state(r: &PgRow) -> Result<PeriodicState> {
    let missed: String = r.try_get("missed").map_err(db_err)?;
    let last_job: Option<i64> = r.try_get("last_job_id").map_err(db_err)?;
    Ok(PeriodicState {
        def: Periodic {
            name: r.try_get("name").map_err(db_err)?,
            cron: r.try_get("cron").map_err(db_err)?,
            timezone: r.try_get("timezone").map_err(db_err)?,
            queue: r.try_get("queue").map_err(db_err)?,
            kind: r.try_get("kind").map_err(db_err)?,
            args: r.try_get("args").map_err(db_err)?,
            priority: r.try_get("priority").map_err(db_err)?,
            max_attempts: r.try_get("max_attempts").map_err(db_err)?,
            missed: missed.parse()?,
        },
        next_tick_at: r.try_get("next_tick_at").map_err(db_err)?,
        last_tick_at: r.try_get("last_tick_at").map_err(db_err)?,
        last_job: last_job.map(JobId),
        paused_at: r.try_get("paused_at").map_err(db_err)?,
    })
}

impl PgStore {
    /// Runs one control change for `queue` under its exclusive control lock.
    async fn change_queue(
        &self,
        queue: &str,
        sql: &str,
        bind: impl FnOnce(
            sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
        )
            -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<QueueControl> {
        validate::queue(queue)?;
        let mut tx = self.begin_bounded().await?;
        lock_queue(self, &mut tx, queue).await?;
        let row = bind(self.query(sql).bind(queue))
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
        let ctl = match row {
            Some(r) => control_row(&r)?,
            None => QueueControl::none(queue),
        };
        if ctl.paused_at.is_none() {
            // Limits may have been raised or removed: release what they held back, and wake
            // idle workers so the change shows at once rather than at the next poll.
            self.query(&self.inner.q.unblock_keys)
                .bind(SWEEP_BATCH)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
            self.notify(&mut *tx, &self.wakeup_channel(), queue).await?;
        }
        tx.commit().await.map_err(db_err)?;
        Ok(ctl)
    }

    pub(crate) async fn remove_queue_impl(&self, queue: &str) -> Result<bool> {
        validate::queue(queue)?;
        let mut tx = self.begin_bounded().await?;
        lock_queue(self, &mut tx, queue).await?;
        let row = self
            .query(&self.inner.q.queue_remove)
            .bind(queue)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        Ok(row.is_some())
    }

    pub(crate) async fn pause_queue_impl(&self, queue: &str) -> Result<QueueControl> {
        self.change_queue(queue, &self.inner.q.queue_pause, |q| q)
            .await
    }

    pub(crate) async fn resume_queue_impl(&self, queue: &str) -> Result<QueueControl> {
        self.change_queue(queue, &self.inner.q.queue_resume, |q| q)
            .await
    }

    pub(crate) async fn set_queue_limits_impl(
        &self,
        queue: &str,
        l: &QueueLimits,
    ) -> Result<QueueControl> {
        l.validate()?;
        self.change_queue(queue, &self.inner.q.queue_limits, |q| {
            q.bind(l.max_running)
                .bind(l.key_max_running)
                .bind(l.rate.map(|r| r.limit))
                .bind(l.rate.map(|r| ms(r.period)))
        })
        .await
    }

    pub(crate) async fn queue_controls_impl(&self) -> Result<Vec<QueueControl>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.queues_list)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter().map(control_row).collect()
    }

    pub(crate) async fn set_key_limit_impl(&self, l: &KeyLimit) -> Result<()> {
        l.validate()?;
        let mut tx = self.begin_bounded().await?;
        if l.max_running.is_none() && l.rate.is_none() {
            self.query(&self.inner.q.key_limit_delete)
                .bind(&l.key)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
        } else {
            self.query(&self.inner.q.key_limit_set)
                .bind(&l.key)
                .bind(l.max_running)
                .bind(l.rate.map(|r| r.limit))
                .bind(l.rate.map(|r| ms(r.period)))
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
        }
        self.query(&self.inner.q.unblock_keys)
            .bind(SWEEP_BATCH)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)
    }

    pub(crate) async fn key_limits_impl(&self) -> Result<Vec<KeyLimit>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.key_limits_list)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                Ok(KeyLimit {
                    key: r.try_get("key").map_err(db_err)?,
                    max_running: r.try_get("max_running").map_err(db_err)?,
                    rate: rate_of(r)?,
                })
            })
            .collect()
    }

    pub(crate) async fn blocked_keys_impl(&self, limit: i64) -> Result<Vec<BlockedKey>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.blocked_keys)
                    .bind(if limit <= 0 { 100 } else { limit })
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                Ok(BlockedKey {
                    key: r.try_get("key").map_err(db_err)?,
                    head: JobId(r.try_get("head").map_err(db_err)?),
                    queue: r.try_get("queue").map_err(db_err)?,
                    kind: r.try_get("kind").map_err(db_err)?,
                    dead_since: r.try_get("dead_since").map_err(db_err)?,
                    waiting: r.try_get("waiting").map_err(db_err)?,
                })
            })
            .collect()
    }

    pub(crate) async fn skip_impl(&self, id: JobId) -> Result<JobRecord> {
        let done: Option<i64> = self
            .run(async |c: &mut PgConnection| {
                self.query_scalar(&self.inner.q.skip)
                    .bind(id.0)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let job = self.get(id).await?;
        if done.is_none() {
            return Err(StoreError::WrongState {
                id,
                state: job.state,
                op: "skip (only dead jobs can be skipped)",
            });
        }
        Ok(job)
    }

    pub(crate) async fn unblock_keys_impl(&self, batch: i32) -> Result<u64> {
        self.unflag_pass(&self.inner.q.unblock_keys, batch).await
    }

    pub(crate) async fn hand_over_keys_impl(&self, batch: i32) -> Result<u64> {
        self.unflag_pass(&self.inner.q.hand_over_keys, batch).await
    }

    /// One pass of a statement that unflags blocked jobs (`$1` = batch), returning how many.
    async fn unflag_pass(&self, sql: &str, batch: i32) -> Result<u64> {
        let n: i64 = self
            .run(async |c: &mut PgConnection| {
                self.query_scalar(sql)
                    .bind(batch.max(1))
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Ok(n.max(0) as u64)
    }

    pub(crate) async fn upsert_periodic_impl(&self, def: &Periodic) -> Result<PeriodicState> {
        let schedule = def.schedule()?;
        let now: DateTime<Utc> = self
            .run(async |c: &mut PgConnection| {
                self.query_scalar(&self.inner.q.db_now)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let next = schedule
            .next_after(now)
            .ok_or_else(|| ValidationError::Other {
                what: "cron expression",
                reason: format!("{:?} never fires", def.cron),
            })?;
        let row = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.periodic_upsert)
                    .bind(&def.name)
                    .bind(&def.cron)
                    .bind(&def.timezone)
                    .bind(&def.queue)
                    .bind(&def.kind)
                    .bind(&def.args)
                    .bind(def.priority)
                    .bind(def.max_attempts)
                    .bind(def.missed.as_str())
                    .bind(next)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        periodic_state(&row)
    }

    pub(crate) async fn remove_periodic_impl(&self, name: &str) -> Result<bool> {
        let r = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.periodic_remove)
                    .bind(name)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Ok(r.rows_affected() > 0)
    }

    pub(crate) async fn pause_periodic_impl(&self, name: &str, paused: bool) -> Result<bool> {
        let r = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.periodic_pause)
                    .bind(name)
                    .bind(paused)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Ok(r.rows_affected() > 0)
    }

    pub(crate) async fn list_periodic_impl(&self) -> Result<Vec<PeriodicState>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.periodic_list)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter().map(periodic_state).collect()
    }

    pub(crate) async fn enqueue_due_periodic_impl(&self, limit: i64) -> Result<Vec<TickEnqueued>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.periodic_due)
                    .bind(limit.max(1))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut out = Vec::new();
        for r in &rows {
            let st = periodic_state(r)?;
            let now: DateTime<Utc> = r.try_get("db_now").map_err(db_err)?;
            let schedule = match st.def.schedule() {
                Ok(s) => s,
                Err(e) => {
                    // Written by hand into the table, or by a newer version: leave it alone
                    // rather than stop every other schedule.
                    tracing::warn!(periodic = %st.def.name, error = %e, "invalid periodic definition skipped");
                    continue;
                }
            };
            let (ticks, next) = schedule.due(st.next_tick_at, now, st.def.missed);
            // A schedule that never fires again is parked a century ahead.
            let next = next.unwrap_or(now + chrono::Duration::days(36_500));
            let mut tx = self.begin_bounded().await?;
            if !advance(self, &mut tx, &st, next, ticks.last().copied()).await? {
                continue; // another leader enqueued these ticks first
            }
            let jobs: Vec<NewJob> = ticks.iter().map(|t| st.def.job_for(*t)).collect();
            let done = self.enqueue_many_tx(&mut tx, &jobs).await?;
            if let Some(last) = done.last() {
                self.query(&self.inner.q.periodic_job)
                    .bind(&st.def.name)
                    .bind(last.id.0)
                    .execute(&mut *tx)
                    .await
                    .map_err(db_err)?;
            }
            tx.commit().await.map_err(db_err)?;
            out.extend(ticks.iter().zip(done).map(|(t, e)| TickEnqueued {
                name: st.def.name.clone(),
                tick: *t,
                job: e.id,
                duplicate: e.duplicate,
            }));
        }
        Ok(out)
    }
}

async fn lock_queue(store: &PgStore, conn: &mut PgConnection, queue: &str) -> Result<()> {
    let got: bool = store
        .query_scalar(&store.inner.q.queue_lock)
        .bind(queue)
        .fetch_one(conn)
        .await
        .map_err(db_err)?;
    if !got {
        return Err(StoreError::Unavailable(
            format!(
                "queue {queue:?}: its control lock is held by another database connection (an advisory lock in pg_locks); nothing was changed, try again"
            )
            .into(),
        ));
    }
    Ok(())
}

/// The compare-and-set on the schedule; false when another leader got there first.
async fn advance(
    store: &PgStore,
    conn: &mut PgConnection,
    st: &PeriodicState,
    next: DateTime<Utc>,
    last_tick: Option<DateTime<Utc>>,
) -> Result<bool> {
    let won: Option<String> = store
        .query_scalar(&store.inner.q.periodic_advance)
        .bind(&st.def.name)
        .bind(st.next_tick_at)
        .bind(next)
        .bind(last_tick)
        .fetch_optional(conn)
        .await
        .map_err(db_err)?;
    Ok(won.is_some())
}
