//! Leadership, queue and key controls, periodic definitions and the worker registry.
//! PostgreSQL's versions: `leader_try`, `pause_queue`, `set_queue_limits`, … (its SQL
//! functions).
//!
//! A control change runs in one write transaction that first takes the engine's queue lock
//! ([`Engine::lock_queue`]), which every claim of that queue also holds while it reads the
//! controls: once `pause_queue` returns, the claims in flight have committed and no later
//! claim hands out a job of that queue; a limit binds every claim after the change returns.

use std::time::Duration;

use chrono::{DateTime, Utc};
use docket_core::*;

use crate::args;
use crate::claim::bucket_of;
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn, Inserted, Row};
use crate::rows::{self, ms, ms_of};

fn rate_of(r: &Row) -> Result<Option<RateLimit>> {
    let limit: Option<i32> = r.get("rate_limit")?;
    let period: Option<i64> = r.get("rate_period_ms")?;
    Ok(match (limit, period) {
        (Some(limit), Some(p)) => Some(RateLimit {
            limit,
            period: Duration::from_millis(p.max(0) as u64),
        }),
        _ => None,
    })
}

/// A `queues` row (from queues_list.sql) as a control, tokens counted at `now`.
pub fn control_row(r: &Row, now: i64) -> Result<QueueControl> {
    Ok(QueueControl {
        queue: r.get("name")?,
        paused_at: rows::time_opt(r, "paused_at")?,
        limits: QueueLimits {
            max_running: r.get("max_running")?,
            key_max_running: r.get("key_max_running")?,
            rate: rate_of(r)?,
        },
        tokens: bucket_of(r)?.map(|b| b.tokens_at(now)),
    })
}

fn periodic_state(r: &Row) -> Result<PeriodicState> {
    let missed: String = r.get("missed")?;
    let last_job: Option<i64> = r.get("last_job_id")?;
    Ok(PeriodicState {
        def: Periodic {
            name: r.get("name")?,
            cron: r.get("cron")?,
            timezone: r.get("timezone")?,
            queue: r.get("queue")?,
            kind: r.get("kind")?,
            args: rows::json(r, "args")?,
            priority: r.get("priority")?,
            max_attempts: r.get("max_attempts")?,
            missed: missed.parse()?,
        },
        next_tick_at: rows::time(r, "next_tick_at")?,
        last_tick_at: rows::time_opt(r, "last_tick_at")?,
        last_job: last_job.map(JobId),
        paused_at: rows::time_opt(r, "paused_at")?,
    })
}

async fn controls_on<C: Conn>(
    c: &mut C,
    queue: Option<&str>,
    now: i64,
) -> Result<Vec<QueueControl>> {
    let rows = c.fetch_all("queues_list", args![queue]).await?;
    rows.iter().map(|r| control_row(r, now)).collect()
}

/// The database's now (ms) for a read.
pub async fn now_ms<E: Engine>(e: &E) -> Result<i64> {
    e.reader().scalar("now", args![]).await
}

/// Takes or renews leadership: free when nobody holds it, `owner` holds it, or the holder's
/// term ran out. The first term is an insert, so two claimants racing for an empty table
/// cannot both win (the unique key refuses one); later terms update the row read (locked
/// where the engine locks rows).
pub async fn leader_try<E: Engine>(e: &E, owner: &str, ttl: Duration) -> Result<bool> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let until = now.saturating_add(ms(ttl));
    let row = tx.fetch_optional("leader_get", args![]).await?;
    let won = match row {
        None => tx.insert("leader_insert", args![owner, until]).await? != Inserted::Duplicate,
        Some(r) => {
            let holder: String = r.get("owner")?;
            let expires: i64 = r.get("expires_at")?;
            if holder == owner || expires < now {
                tx.execute("leader_update", args![owner, until]).await?;
                true
            } else {
                false
            }
        }
    };
    tx.commit().await?;
    Ok(won)
}

/// Gives up the leadership `owner` holds, if it does.
pub async fn leader_resign<E: Engine>(e: &E, owner: &str) -> Result<()> {
    let mut tx = e.begin().await?;
    tx.execute("leader_resign", args![owner]).await?;
    tx.commit().await
}

/// Runs one control statement on `queue` and returns its control afterwards.
async fn change_queue<E: Engine>(
    e: &E,
    queue: &str,
    statement: &'static str,
    extra: &[crate::exec::Arg<'_>],
) -> Result<QueueControl> {
    validate::queue(queue)?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    E::lock_queue(&mut tx, queue).await?;
    let mut a = vec![queue.into(), now.into()];
    a.extend_from_slice(extra);
    tx.execute(statement, &a).await?;
    let ctl = controls_on(&mut tx, Some(queue), now)
        .await?
        .pop()
        .unwrap_or_else(|| QueueControl::none(queue));
    tx.commit().await?;
    if ctl.paused_at.is_none() {
        e.hint(Wake::Queue(queue.to_string()));
    }
    Ok(ctl)
}

/// Pauses `queue` (claims take none of its jobs until it is resumed).
pub async fn pause_queue<E: Engine>(e: &E, queue: &str) -> Result<QueueControl> {
    change_queue(e, queue, "queue_pause", &[]).await
}

/// Resumes `queue`.
pub async fn resume_queue<E: Engine>(e: &E, queue: &str) -> Result<QueueControl> {
    change_queue(e, queue, "queue_resume", &[]).await
}

/// Forgets `queue`'s stored controls when no job of it is pending or running (see
/// `Store::remove_queue`).
pub async fn remove_queue<E: Engine>(e: &E, queue: &str) -> Result<bool> {
    validate::queue(queue)?;
    let mut tx = e.begin().await?;
    E::lock_queue(&mut tx, queue).await?;
    let n = tx.execute("queue_remove", args![queue]).await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Replaces `queue`'s limits (all `None` removes them).
pub async fn set_queue_limits<E: Engine>(
    e: &E,
    queue: &str,
    l: &QueueLimits,
) -> Result<QueueControl> {
    l.validate()?;
    let extra = args![
        l.max_running,
        l.key_max_running,
        l.rate.map(|r| r.limit),
        l.rate.map(|r| ms(r.period)),
    ];
    change_queue(e, queue, "queue_limits", extra).await
}

/// Every stored queue control.
pub async fn queue_controls<E: Engine>(e: &E) -> Result<Vec<QueueControl>> {
    let now = now_ms(e).await?;
    controls_on(&mut e.reader(), None, now).await
}

/// Sets a concurrency key's limits (both `None` removes them).
pub async fn set_key_limit<E: Engine>(e: &E, l: &KeyLimit) -> Result<()> {
    l.validate()?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    if l.max_running.is_none() && l.rate.is_none() {
        tx.execute("key_limit_delete", args![&l.key]).await?;
    } else {
        tx.execute(
            "key_limit_set",
            args![
                &l.key,
                l.max_running,
                l.rate.map(|r| r.limit),
                l.rate.map(|r| ms(r.period)),
                now
            ],
        )
        .await?;
    }
    tx.commit().await
}

/// Every stored key limit.
pub async fn key_limits<E: Engine>(e: &E) -> Result<Vec<KeyLimit>> {
    let rows = e.reader().fetch_all("key_limits_list", args![]).await?;
    rows.iter()
        .map(|r| {
            Ok(KeyLimit {
                key: r.get("key")?,
                max_running: r.get("max_running")?,
                rate: rate_of(r)?,
            })
        })
        .collect()
}

/// Ordering keys held by a dead job at their head, up to `limit`.
pub async fn blocked_keys<E: Engine>(e: &E, limit: i64) -> Result<Vec<BlockedKey>> {
    let limit = if limit <= 0 { 100 } else { limit };
    let rows = e.reader().fetch_all("blocked_keys", args![limit]).await?;
    rows.iter()
        .map(|r| {
            Ok(BlockedKey {
                key: r.get("key")?,
                head: JobId(r.get("head")?),
                queue: r.get("queue")?,
                kind: r.get("kind")?,
                dead_since: rows::time_opt(r, "dead_since")?,
                waiting: r.get("waiting")?,
            })
        })
        .collect()
}

/// Creates or updates a periodic schedule; it restarts from now only when its expression
/// or time zone changed.
pub async fn upsert_periodic<E: Engine>(e: &E, def: &Periodic) -> Result<PeriodicState> {
    let schedule = def.schedule()?;
    let mut tx = e.begin().await?;
    let now = tx.now();
    let at = rows::at(now, "now").map_err(corrupt)?;
    let next = schedule
        .next_after(at)
        .ok_or_else(|| ValidationError::Other {
            what: "cron expression",
            reason: format!("{:?} never fires", def.cron),
        })?;
    let args_text = def.args.to_string();
    tx.execute(
        "periodic_upsert",
        args![
            &def.name,
            &def.cron,
            &def.timezone,
            &def.queue,
            &def.kind,
            &args_text,
            def.priority,
            def.max_attempts,
            def.missed.as_str(),
            ms_of(next),
            now,
        ],
    )
    .await?;
    let row = tx.fetch_one("periodic_list", args![&def.name]).await?;
    let st = periodic_state(&row)?;
    tx.commit().await?;
    Ok(st)
}

/// Removes a periodic schedule; false when there was none.
pub async fn remove_periodic<E: Engine>(e: &E, name: &str) -> Result<bool> {
    let mut tx = e.begin().await?;
    let n = tx.execute("periodic_remove", args![name]).await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Pauses or resumes a periodic schedule; false when there is no such one.
pub async fn pause_periodic<E: Engine>(e: &E, name: &str, paused: bool) -> Result<bool> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    let n = tx
        .execute("periodic_pause", args![name, i64::from(paused), now])
        .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Every periodic schedule with where it stands.
pub async fn list_periodic<E: Engine>(e: &E) -> Result<Vec<PeriodicState>> {
    let rows = e
        .reader()
        .fetch_all("periodic_list", args![None::<&str>])
        .await?;
    rows.iter().map(periodic_state).collect()
}

/// Enqueues due ticks: each definition's ticks and the compare-and-set of its next tick
/// commit together, so a tick is enqueued once however many leaders race.
pub async fn enqueue_due_periodic<E: Engine>(e: &E, limit: i64) -> Result<Vec<TickEnqueued>> {
    let now = now_ms(e).await?;
    let rows = e
        .reader()
        .fetch_all("periodic_due", args![now, limit.max(1)])
        .await?;
    let mut out = Vec::new();
    for r in &rows {
        let st = periodic_state(r)?;
        let schedule = match st.def.schedule() {
            Ok(s) => s,
            Err(err) => {
                tracing::warn!(periodic = %st.def.name, error = %err, "invalid periodic definition skipped");
                continue;
            }
        };
        let mut due = std::collections::BTreeSet::new();
        let mut tx = e.begin().await?;
        let now = tx.now();
        let at: DateTime<Utc> = rows::at(now, "now").map_err(corrupt)?;
        let (ticks, next) = schedule.due(st.next_tick_at, at, st.def.missed);
        let next = next.unwrap_or(at + chrono::Duration::days(36_500));
        let jobs: Vec<NewJob> = ticks.iter().map(|t| st.def.job_for(*t)).collect();
        let enq = crate::enqueue::insert(&mut tx, now, &jobs, &mut due).await?;
        let won = tx
            .execute(
                "periodic_advance",
                args![
                    &st.def.name,
                    ms_of(st.next_tick_at),
                    ms_of(next),
                    ticks.last().map(|t| ms_of(*t)),
                    enq.last().map(|e| e.id.0),
                    now,
                ],
            )
            .await?
            == 1;
        if !won {
            // Another leader enqueued these ticks first: ours roll back with the drop.
            continue;
        }
        tx.commit().await?;
        for q in due {
            e.hint(Wake::Queue(q));
        }
        out.extend(ticks.into_iter().zip(enq).map(|(t, en)| TickEnqueued {
            name: st.def.name.clone(),
            tick: t,
            job: en.id,
            duplicate: en.duplicate,
        }));
    }
    Ok(out)
}

/// Records a worker's heartbeat in the registry, live for `ttl`.
pub async fn worker_beat<E: Engine>(e: &E, beat: &WorkerBeat, ttl: Duration) -> Result<()> {
    validate::worker_beat(beat)?;
    let mut end = beat.host.len().min(255);
    while !beat.host.is_char_boundary(end) {
        end -= 1;
    }
    let host = &beat.host[..end];
    let queues = serde_json::to_string(&beat.queues).unwrap_or_else(|_| "[]".into());
    let by_queue = serde_json::to_string(&beat.buffered_by_queue).unwrap_or_else(|_| "[]".into());
    let mut tx = e.begin().await?;
    let now = tx.now();
    tx.execute("worker_forget", args![now]).await?;
    tx.execute(
        "worker_beat",
        args![
            &beat.owner,
            host,
            beat.pid,
            &queues,
            beat.concurrency,
            beat.in_flight,
            now,
            ms(ttl),
            beat.buffered,
            &by_queue,
        ],
    )
    .await?;
    tx.commit().await
}

/// Marks a worker of the registry stopped (it stays a day, as gone).
pub async fn worker_gone<E: Engine>(e: &E, owner: &str) -> Result<()> {
    let mut tx = e.begin().await?;
    let now = tx.now();
    tx.execute("worker_gone", args![owner, now]).await?;
    tx.commit().await
}

/// Live workers and those gone since `window`, and the leadership's lease.
pub async fn registry<E: Engine>(e: &E, window: std::time::Duration) -> Result<Registry> {
    let now = now_ms(e).await?;
    let since = now.saturating_sub(ms(window));
    let rows = e
        .reader()
        .fetch_all("workers_recent", args![now, since])
        .await?;
    let workers = rows
        .iter()
        .map(|r| {
            let mut w = worker_row(r)?;
            w.stopped_at = rows::time_opt(r, "stopped_at")?;
            Ok(w)
        })
        .collect::<Result<Vec<_>>>()?;
    let leader = match e.reader().fetch_optional("leader_lease", args![]).await? {
        Some(r) => Some(LeaderLease {
            owner: r.get("owner")?,
            expires_at: rows::time(&r, "expires_at")?,
        }),
        None => None,
    };
    Ok(Registry {
        workers,
        leader,
        now: DateTime::<Utc>::from_timestamp_millis(now).unwrap_or(DateTime::<Utc>::MIN_UTC),
    })
}

/// The live workers of the registry.
pub async fn workers<E: Engine>(e: &E) -> Result<Vec<WorkerInfo>> {
    let now = now_ms(e).await?;
    let rows = e.reader().fetch_all("workers_list", args![now]).await?;
    rows.iter().map(worker_row).collect()
}

/// One registry row, `stopped_at` left for the caller (not every statement reads it).
fn worker_row(r: &Row) -> Result<WorkerInfo> {
    let count =
        |r: &Row, c: &str| -> Result<u32> { Ok(r.get::<i64>(c)?.clamp(0, u32::MAX.into()) as u32) };
    let queues: Vec<String> = serde_json::from_value(rows::json(r, "queues")?).unwrap_or_default();
    Ok(WorkerInfo {
        beat: WorkerBeat {
            owner: r.get("owner")?,
            host: r.get("host")?,
            pid: count(r, "pid")?,
            queues,
            concurrency: count(r, "concurrency")?,
            in_flight: count(r, "in_flight")?,
            buffered: count(r, "buffered")?,
            // NULL from a worker older than the column (and on a row a stop cleared).
            buffered_by_queue: match r.get::<Option<String>>("buffered_by_queue")? {
                Some(s) => serde_json::from_str(&s).unwrap_or_default(),
                None => Vec::new(),
            },
        },
        started_at: rows::time(r, "started_at")?,
        seen_at: rows::time(r, "seen_at")?,
        expires_at: rows::time(r, "expires_at")?,
        leader: r.get("leader")?,
        stopped_at: None,
    })
}
