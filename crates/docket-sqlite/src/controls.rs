//! Leadership, queue and key controls, periodic definitions and the worker registry.
//!
//! A control change is a write transaction, and so is every claim: SQLite runs them one at a
//! time, so once `pause_queue` returns no claim hands out a job of that queue, and a limit
//! binds every claim after the change returns.

use std::time::Duration;

use chrono::{DateTime, Utc};
use docket_core::*;
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use sqlx::Row;

use crate::errors::db_err;
use crate::rows::{self, ms_of};
use crate::store::{ms, SqliteStore};

const LEADER_GET: &str = include_str!("../sql/leader_get.sql");
const LEADER_SET: &str = include_str!("../sql/leader_set.sql");
const LEADER_RESIGN: &str = include_str!("../sql/leader_resign.sql");
const QUEUE_PAUSE: &str = include_str!("../sql/queue_pause.sql");
const QUEUE_RESUME: &str = include_str!("../sql/queue_resume.sql");
const QUEUE_LIMITS: &str = include_str!("../sql/queue_limits.sql");
const QUEUES_LIST: &str = include_str!("../sql/queues_list.sql");
const KEY_LIMIT_SET: &str = include_str!("../sql/key_limit_set.sql");
const KEY_LIMIT_DELETE: &str = include_str!("../sql/key_limit_delete.sql");
const KEY_LIMITS_LIST: &str = include_str!("../sql/key_limits_list.sql");
const BLOCKED_KEYS: &str = include_str!("../sql/blocked_keys.sql");
const PERIODIC_UPSERT: &str = include_str!("../sql/periodic_upsert.sql");
const PERIODIC_REMOVE: &str = include_str!("../sql/periodic_remove.sql");
const PERIODIC_LIST: &str = include_str!("../sql/periodic_list.sql");
const PERIODIC_DUE: &str = include_str!("../sql/periodic_due.sql");
const PERIODIC_ADVANCE: &str = include_str!("../sql/periodic_advance.sql");
const WORKER_BEAT: &str = include_str!("../sql/worker_beat.sql");
const WORKER_FORGET: &str = include_str!("../sql/worker_forget.sql");
const WORKER_GONE: &str = include_str!("../sql/worker_gone.sql");
const WORKERS_LIST: &str = include_str!("../sql/workers_list.sql");

fn rate_of(r: &SqliteRow) -> Result<Option<RateLimit>> {
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

/// A `queues` row (from queues_list.sql) as a control, tokens counted at `now`.
pub(crate) fn control_row(r: &SqliteRow, now: i64) -> Result<QueueControl> {
    Ok(QueueControl {
        queue: r.try_get("name").map_err(db_err)?,
        paused_at: rows::time_opt(r, "paused_at")?,
        limits: QueueLimits {
            max_running: r.try_get("max_running").map_err(db_err)?,
            key_max_running: r.try_get("key_max_running").map_err(db_err)?,
            rate: rate_of(r)?,
        },
        tokens: crate::claim::bucket_of(r)?.map(|b| b.tokens_at(now)),
    })
}

fn periodic_state(r: &SqliteRow) -> Result<PeriodicState> {
    let missed: String = r.try_get("missed").map_err(db_err)?;
    let last_job: Option<i64> = r.try_get("last_job_id").map_err(db_err)?;
    Ok(PeriodicState {
        def: Periodic {
            name: r.try_get("name").map_err(db_err)?,
            cron: r.try_get("cron").map_err(db_err)?,
            timezone: r.try_get("timezone").map_err(db_err)?,
            queue: r.try_get("queue").map_err(db_err)?,
            kind: r.try_get("kind").map_err(db_err)?,
            args: rows::json(r, "args")?,
            priority: r.try_get("priority").map_err(db_err)?,
            max_attempts: r.try_get("max_attempts").map_err(db_err)?,
            missed: missed.parse()?,
        },
        next_tick_at: rows::time(r, "next_tick_at")?,
        last_tick_at: rows::time_opt(r, "last_tick_at")?,
        last_job: last_job.map(JobId),
    })
}

async fn controls_on(
    c: &mut SqliteConnection,
    queue: Option<&str>,
    now: i64,
) -> Result<Vec<QueueControl>> {
    let rows = sqlx::query(QUEUES_LIST)
        .bind(queue)
        .fetch_all(&mut *c)
        .await
        .map_err(db_err)?;
    rows.iter().map(|r| control_row(r, now)).collect()
}

impl SqliteStore {
    pub(crate) async fn leader_try_impl(&self, owner: &str, ttl: Duration) -> Result<bool> {
        self.write(async |c: &mut SqliteConnection, now| {
            let row: Option<(String, i64)> = sqlx::query_as(LEADER_GET)
                .fetch_optional(&mut *c)
                .await
                .map_err(db_err)?;
            let free = match &row {
                None => true,
                Some((o, exp)) => o == owner || *exp < now,
            };
            if free {
                sqlx::query(LEADER_SET)
                    .bind(owner)
                    .bind(now + ms(ttl))
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?;
            }
            Ok(free)
        })
        .await
    }

    pub(crate) async fn leader_resign_impl(&self, owner: &str) -> Result<()> {
        self.write(async |c: &mut SqliteConnection, _| {
            sqlx::query(LEADER_RESIGN)
                .bind(owner)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    /// Runs one control change on `queue` and returns its control afterwards.
    async fn change_queue(
        &self,
        queue: &str,
        change: impl AsyncFnOnce(&mut SqliteConnection, i64) -> Result<()>,
    ) -> Result<QueueControl> {
        validate::queue(queue)?;
        let ctl = self
            .write(async |c: &mut SqliteConnection, now| {
                change(c, now).await?;
                Ok(controls_on(c, Some(queue), now).await?.pop())
            })
            .await?
            .unwrap_or_else(|| QueueControl::none(queue));
        if ctl.paused_at.is_none() {
            self.hint(Wake::Queue(queue.to_string()));
        }
        Ok(ctl)
    }

    pub(crate) async fn pause_queue_impl(&self, queue: &str) -> Result<QueueControl> {
        self.change_queue(queue, async |c: &mut SqliteConnection, now| {
            sqlx::query(QUEUE_PAUSE)
                .bind(queue)
                .bind(now)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn resume_queue_impl(&self, queue: &str) -> Result<QueueControl> {
        self.change_queue(queue, async |c: &mut SqliteConnection, now| {
            sqlx::query(QUEUE_RESUME)
                .bind(queue)
                .bind(now)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn set_queue_limits_impl(
        &self,
        queue: &str,
        l: &QueueLimits,
    ) -> Result<QueueControl> {
        l.validate()?;
        self.change_queue(queue, async |c: &mut SqliteConnection, now| {
            sqlx::query(QUEUE_LIMITS)
                .bind(queue)
                .bind(l.max_running)
                .bind(l.key_max_running)
                .bind(l.rate.map(|r| r.limit))
                .bind(l.rate.map(|r| ms(r.period)))
                .bind(now)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn queue_controls_impl(&self) -> Result<Vec<QueueControl>> {
        let now = self.now_ms().await?;
        let mut c = self.inner.pool.acquire().await.map_err(db_err)?;
        controls_on(&mut c, None, now).await
    }

    pub(crate) async fn set_key_limit_impl(&self, l: &KeyLimit) -> Result<()> {
        l.validate()?;
        self.write(async |c: &mut SqliteConnection, now| {
            if l.max_running.is_none() && l.rate.is_none() {
                sqlx::query(KEY_LIMIT_DELETE)
                    .bind(&l.key)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?;
            } else {
                sqlx::query(KEY_LIMIT_SET)
                    .bind(&l.key)
                    .bind(l.max_running)
                    .bind(l.rate.map(|r| r.limit))
                    .bind(l.rate.map(|r| ms(r.period)))
                    .bind(now)
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?;
            }
            Ok(())
        })
        .await
    }

    pub(crate) async fn key_limits_impl(&self) -> Result<Vec<KeyLimit>> {
        let rows = sqlx::query(KEY_LIMITS_LIST)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
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
        let rows = sqlx::query(BLOCKED_KEYS)
            .bind(if limit <= 0 { 100 } else { limit })
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(BlockedKey {
                    key: r.try_get("key").map_err(db_err)?,
                    head: JobId(r.try_get("head").map_err(db_err)?),
                    queue: r.try_get("queue").map_err(db_err)?,
                    kind: r.try_get("kind").map_err(db_err)?,
                    dead_since: rows::time_opt(r, "dead_since")?,
                    waiting: r.try_get("waiting").map_err(db_err)?,
                })
            })
            .collect()
    }

    pub(crate) async fn upsert_periodic_impl(&self, def: &Periodic) -> Result<PeriodicState> {
        let schedule = def.schedule()?;
        self.write(async |c: &mut SqliteConnection, now| {
            let at = rows::at(now, "now").map_err(crate::errors::corrupt)?;
            let next = schedule
                .next_after(at)
                .ok_or_else(|| ValidationError::Other {
                    what: "cron expression",
                    reason: format!("{:?} never fires", def.cron),
                })?;
            sqlx::query(PERIODIC_UPSERT)
                .bind(&def.name)
                .bind(&def.cron)
                .bind(&def.timezone)
                .bind(&def.queue)
                .bind(&def.kind)
                .bind(def.args.to_string())
                .bind(def.priority)
                .bind(def.max_attempts)
                .bind(def.missed.as_str())
                .bind(ms_of(next))
                .bind(now)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            let row = sqlx::query(PERIODIC_LIST)
                .bind(&def.name)
                .fetch_one(&mut *c)
                .await
                .map_err(db_err)?;
            periodic_state(&row)
        })
        .await
    }

    pub(crate) async fn remove_periodic_impl(&self, name: &str) -> Result<bool> {
        self.write(async |c: &mut SqliteConnection, _| {
            Ok(sqlx::query(PERIODIC_REMOVE)
                .bind(name)
                .execute(&mut *c)
                .await
                .map_err(db_err)?
                .rows_affected()
                > 0)
        })
        .await
    }

    pub(crate) async fn list_periodic_impl(&self) -> Result<Vec<PeriodicState>> {
        let rows = sqlx::query(PERIODIC_LIST)
            .bind(None::<String>)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        rows.iter().map(periodic_state).collect()
    }

    /// Enqueues due ticks: each definition's ticks and the compare-and-set of its next tick
    /// commit together, so a tick is enqueued once however many leaders race.
    pub(crate) async fn enqueue_due_periodic_impl(&self, limit: i64) -> Result<Vec<TickEnqueued>> {
        let now = self.now_ms().await?;
        let rows = sqlx::query(PERIODIC_DUE)
            .bind(now)
            .bind(limit.max(1))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        let mut out = Vec::new();
        for r in &rows {
            let st = periodic_state(r)?;
            let schedule = match st.def.schedule() {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(periodic = %st.def.name, error = %e, "invalid periodic definition skipped");
                    continue;
                }
            };
            let mut due = std::collections::BTreeSet::new();
            let done = self
                .write(async |c: &mut SqliteConnection, now| {
                    let at: DateTime<Utc> = rows::at(now, "now").map_err(crate::errors::corrupt)?;
                    let (ticks, next) = schedule.due(st.next_tick_at, at, st.def.missed);
                    let next = next.unwrap_or(at + chrono::Duration::days(36_500));
                    let jobs: Vec<NewJob> = ticks.iter().map(|t| st.def.job_for(*t)).collect();
                    let enq = crate::enqueue::insert(c, now, &jobs, &mut due).await?;
                    let won = sqlx::query(PERIODIC_ADVANCE)
                        .bind(&st.def.name)
                        .bind(ms_of(st.next_tick_at))
                        .bind(ms_of(next))
                        .bind(ticks.last().map(|t| ms_of(*t)))
                        .bind(enq.last().map(|e| e.id.0))
                        .bind(now)
                        .execute(&mut *c)
                        .await
                        .map_err(db_err)?
                        .rows_affected()
                        == 1;
                    if !won {
                        // Another leader enqueued these ticks first: undo ours.
                        return Err(StoreError::WrongState {
                            id: JobId(0),
                            state: JobState::Pending,
                            op: "periodic tick (taken)",
                        });
                    }
                    Ok(ticks.into_iter().zip(enq).collect::<Vec<_>>())
                })
                .await;
            let done = match done {
                Ok(d) => d,
                Err(StoreError::WrongState {
                    op: "periodic tick (taken)",
                    ..
                }) => continue,
                Err(e) => return Err(e),
            };
            for q in due {
                self.hint(Wake::Queue(q));
            }
            out.extend(done.into_iter().map(|(t, e)| TickEnqueued {
                name: st.def.name.clone(),
                tick: t,
                job: e.id,
                duplicate: e.duplicate,
            }));
        }
        Ok(out)
    }

    pub(crate) async fn worker_beat_impl(&self, beat: &WorkerBeat, ttl: Duration) -> Result<()> {
        for q in &beat.queues {
            validate::queue(q)?;
        }
        let mut end = beat.host.len().min(255);
        while !beat.host.is_char_boundary(end) {
            end -= 1;
        }
        let host = &beat.host[..end];
        let queues = serde_json::to_string(&beat.queues).unwrap_or_else(|_| "[]".into());
        self.write(async |c: &mut SqliteConnection, now| {
            sqlx::query(WORKER_FORGET)
                .bind(now)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            sqlx::query(WORKER_BEAT)
                .bind(&beat.owner)
                .bind(host)
                .bind(i64::from(beat.pid))
                .bind(&queues)
                .bind(i64::from(beat.concurrency))
                .bind(i64::from(beat.in_flight))
                .bind(now)
                .bind(ms(ttl))
                .bind(i64::from(beat.buffered))
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn worker_gone_impl(&self, owner: &str) -> Result<()> {
        self.write(async |c: &mut SqliteConnection, _| {
            sqlx::query(WORKER_GONE)
                .bind(owner)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn workers_impl(&self) -> Result<Vec<WorkerInfo>> {
        let now = self.now_ms().await?;
        let rows = sqlx::query(WORKERS_LIST)
            .bind(now)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                let queues: Vec<String> =
                    serde_json::from_value(rows::json(r, "queues")?).unwrap_or_default();
                Ok(WorkerInfo {
                    beat: WorkerBeat {
                        owner: r.try_get("owner").map_err(db_err)?,
                        host: r.try_get("host").map_err(db_err)?,
                        pid: r.try_get::<i64, _>("pid").map_err(db_err)?.max(0) as u32,
                        queues,
                        concurrency: r.try_get::<i64, _>("concurrency").map_err(db_err)?.max(0)
                            as u32,
                        in_flight: r.try_get::<i64, _>("in_flight").map_err(db_err)?.max(0) as u32,
                        buffered: r.try_get::<i64, _>("buffered").map_err(db_err)?.max(0) as u32,
                    },
                    started_at: rows::time(r, "started_at")?,
                    seen_at: rows::time(r, "seen_at")?,
                    expires_at: rows::time(r, "expires_at")?,
                    leader: r.try_get("leader").map_err(db_err)?,
                })
            })
            .collect()
    }
}
