//! Operators' reads: search, overview, dead groups, samples, the audit log, stats, and
//! "why is this job not running?" by the claim's own rules (claim.rs). Positional
//! parameters only on these servers, so a value used twice is bound twice.

use std::time::Duration;

use docket_core::inspect::Document;
use docket_core::*;
use sqlx::mysql::MySqlRow;
use sqlx::Row;

use crate::claim::{key_row, key_running, queue_row, running_in_queue};
use crate::errors::db_err;
use crate::rows::{self, ms_of};
use crate::store::{ms, MySqlStore};

const SEARCH: &str = include_str!("../sql/search.sql");
const SEARCH_FINISHED: &str = include_str!("../sql/search_finished.sql");
const SEARCH_WINDOW: &str = include_str!("../sql/search_window.sql");
const OVERVIEW: &str = include_str!("../sql/overview.sql");
const DEAD_GROUPS: &str = include_str!("../sql/dead_groups.sql");
const SAMPLES_FORGET: &str = include_str!("../sql/samples_forget.sql");
const SAMPLES_RECORD: &str = include_str!("../sql/samples_record.sql");
const SAMPLES_LIST: &str = include_str!("../sql/samples_list.sql");
const AUDIT_INSERT: &str = include_str!("../sql/audit_insert.sql");
const AUDIT_LIST: &str = include_str!("../sql/audit_list.sql");
const STATS_QUEUES: &str = include_str!("../sql/stats_queues.sql");
const SEARCH_WINDOW_SCAN: &str = include_str!("../sql/search_window_scan.sql");
const TABLE_HEALTH: &str = include_str!("../sql/table_health.sql");
const ACTIVE_COUNT: &str = include_str!("../sql/active_count.sql");
const ANY_ACTIVE: &str = include_str!("../sql/any_active.sql");
const WHY_JOB: &str = include_str!("../sql/why_job.sql");
const WHY_ORDERING: &str = include_str!("../sql/why_ordering.sql");
const WHY_AHEAD: &str = include_str!("../sql/why_ahead.sql");
const WHY_SERVED: &str = include_str!("../sql/why_served.sql");

/// A JSON path from keys: `$."a"."b"`. A key with a double quote or a backslash is refused
/// (the servers' path syntaxes do not agree on escaping it).
fn json_path(keys: &[String]) -> Result<String> {
    let mut p = String::from("$");
    for k in keys {
        if k.contains('"') || k.contains('\\') {
            return Err(ValidationError::Other {
                what: "field filter",
                reason: format!(
                    "the key {k:?} has a quote or backslash, which a JSON path here cannot express"
                ),
            }
            .into());
        }
        p.push_str(".\"");
        p.push_str(k);
        p.push('"');
    }
    Ok(p)
}

fn count(r: &MySqlRow, col: &str, cap: i64) -> Result<Count> {
    let n: i64 = r.try_get(col).map_err(db_err)?;
    Ok(Count::capped(n, cap))
}

impl MySqlStore {
    pub(crate) async fn search_impl(&self, q: &JobQuery) -> Result<JobPage> {
        q.validate()?;
        let page = q.page_size();
        let field = match &q.field {
            Some(f) => Some((f.document, json_path(&f.path)?, f.value.to_string())),
            None => None,
        };
        let (args_path, args_value, meta_path, meta_value) = match field {
            Some((Document::Args, p, v)) => (Some(p), Some(v), None, None),
            Some((Document::Metadata, p, v)) => (None, None, Some(p), Some(v)),
            None => (None, None, None, None),
        };
        let window = q.needs_window();
        let finished =
            !window && matches!(q.state, Some(JobState::Succeeded | JobState::Cancelled));
        let sql = if window {
            SEARCH_WINDOW
        } else if finished {
            SEARCH_FINISHED
        } else {
            SEARCH
        };
        let mut scan: Option<(i64, Option<i64>)> = None;
        if window {
            let (n, end): (i64, Option<i64>) = sqlx::query_as(SEARCH_WINDOW_SCAN)
                .bind(q.before.map(|b| b.0))
                .bind(q.before.map(|b| b.0))
                .bind(inspect::SCAN_WINDOW)
                .fetch_one(&self.inner.pool)
                .await
                .map_err(db_err)?;
            scan = Some((n, end));
        }
        let since = q.since.map(ms_of);
        let until = q.until.map(ms_of);
        let state = q.state.map(|s| s.as_str());
        let before = q.before.map(|b| b.0);
        let mut query = sqlx::query(sql);
        macro_rules! twice {
            ($v:expr) => {
                query = query.bind($v).bind($v)
            };
        }
        twice!(&q.queue);
        twice!(&q.kind);
        twice!(state);
        twice!(q.priority);
        twice!(since);
        twice!(until);
        twice!(&q.ordering_key);
        twice!(&q.concurrency_key);
        query = query.bind(&args_path).bind(&args_path).bind(&args_value);
        query = query.bind(&meta_path).bind(&meta_path).bind(&meta_value);
        twice!(&q.last_error);
        if finished {
            // (? IS NULL OR (finished_at, id) < (COALESCE(?, <the cursor's>), ?))
            query = query
                .bind(before)
                .bind(q.before_finished_at.map(ms_of))
                .bind(before)
                .bind(before);
        } else {
            twice!(before);
        }
        if window {
            // Below the window's lowest id nothing is looked at (an empty window: nothing).
            query = query.bind(scan.and_then(|(_, end)| end).unwrap_or(i64::MAX));
        }
        let rows = query
            .bind(page + 1)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        let scanned = scan.map(|(n, _)| n);
        let scan_end = scan.and_then(|(_, end)| end);
        let mut jobs = Vec::with_capacity(rows.len());
        for r in &rows {
            jobs.push(rows::record(r)?);
        }
        let next = if jobs.len() as i64 > page {
            jobs.truncate(page as usize);
            jobs.last().map(|j| j.id)
        } else if window && scanned == Some(inspect::SCAN_WINDOW) {
            scan_end.map(JobId)
        } else {
            None
        };
        let next_finished_at = match (finished, next) {
            (true, Some(_)) => jobs.last().and_then(|j| j.finished_at),
            _ => None,
        };
        Ok(JobPage {
            jobs,
            next,
            next_finished_at,
            scanned,
        })
    }

    pub(crate) async fn overview_impl(&self, cap: i64) -> Result<Overview> {
        if !(1..=10_000_000).contains(&cap) {
            return Err(ValidationError::Other {
                what: "count cap",
                reason: format!("{cap} is out of range 1..=10000000"),
            }
            .into());
        }
        let now = self.now_ms().await?;
        let mut query = sqlx::query(OVERVIEW);
        for _ in 0..6 {
            query = query.bind(now);
        }
        let rows = query.fetch_all(&self.inner.pool).await.map_err(db_err)?;
        let mut queues = Vec::with_capacity(rows.len());
        for r in &rows {
            let name: Option<String> = crate::rows::get(r, "name").map_err(db_err)?;
            let control = match name {
                Some(_) => Some(crate::controls::control_row(r, now)?),
                None => None,
            };
            queues.push(QueueSummary {
                queue: crate::rows::get(r, "queue").map_err(db_err)?,
                pending: count(r, "pending", cap)?,
                ready: count(r, "ready", cap)?,
                blocked: count(r, "blocked", cap)?,
                running: r.try_get("running").map_err(db_err)?,
                near_expiry: r.try_get("near_expiry").map_err(db_err)?,
                dead: count(r, "dead", cap)?,
                oldest_ready_age_s: r.try_get("oldest_ready_age_s").map_err(db_err)?,
                paused: control.as_ref().is_some_and(|c| c.paused_at.is_some()),
                control,
                workers: r.try_get("workers").map_err(db_err)?,
            });
        }
        Ok(Overview {
            queues,
            cap,
            at: rows::at(now, "now").ok(),
        })
    }

    pub(crate) async fn dead_groups_impl(&self, limit: i64) -> Result<Vec<DeadGroup>> {
        let rows = sqlx::query(DEAD_GROUPS)
            .bind(limit.clamp(1, inspect::MAX_PAGE))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(DeadGroup {
                    kind: crate::rows::get(r, "kind").map_err(db_err)?,
                    error: crate::rows::get(r, "error").map_err(db_err)?,
                    count: r.try_get("n").map_err(db_err)?,
                    newest_at: rows::time(r, "newest_at")?,
                    example: JobId(r.try_get("example").map_err(db_err)?),
                })
            })
            .collect()
    }

    pub(crate) async fn record_samples_impl(&self, samples: &[Sample]) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        for s in samples {
            validate::queue(&s.queue)?;
        }
        self.write(async |c: &mut sqlx::MySqlConnection, now| {
            sqlx::query(SAMPLES_FORGET)
                .bind(now)
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            for s in samples {
                sqlx::query(SAMPLES_RECORD)
                    .bind(&s.queue)
                    .bind(ms_of(s.minute))
                    .bind(s.succeeded.max(0))
                    .bind(s.failed.max(0))
                    .bind(s.wait_ms_sum.max(0))
                    .bind(s.wait_count.max(0))
                    .bind(s.run_ms_sum.max(0))
                    .execute(&mut *c)
                    .await
                    .map_err(db_err)?;
            }
            Ok(())
        })
        .await
    }

    pub(crate) async fn samples_impl(&self, window: Duration) -> Result<Vec<Sample>> {
        let now = self.now_ms().await?;
        let first = ((now - ms(window.min(Duration::from_secs(86_400)))) / 60_000) * 60_000;
        let rows = sqlx::query(SAMPLES_LIST)
            .bind(first)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(Sample {
                    queue: crate::rows::get(r, "queue").map_err(db_err)?,
                    minute: rows::time(r, "minute_at")?,
                    succeeded: r.try_get("succeeded").map_err(db_err)?,
                    failed: r.try_get("failed").map_err(db_err)?,
                    wait_ms_sum: r.try_get("wait_ms_sum").map_err(db_err)?,
                    wait_count: r.try_get("wait_count").map_err(db_err)?,
                    run_ms_sum: r.try_get("run_ms_sum").map_err(db_err)?,
                })
            })
            .collect()
    }

    pub(crate) async fn audit_impl(&self, e: &AuditEntry) -> Result<()> {
        e.validate()?;
        self.write(async |c: &mut sqlx::MySqlConnection, now| {
            sqlx::query(AUDIT_INSERT)
                .bind(now)
                .bind(&e.actor)
                .bind(&e.action)
                .bind(&e.target)
                .bind(e.detail.to_string())
                .execute(&mut *c)
                .await
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    pub(crate) async fn audit_log_impl(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(AUDIT_LIST)
            .bind(limit.clamp(1, inspect::MAX_PAGE))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                Ok(AuditEntry {
                    at: Some(rows::time(r, "at")?),
                    actor: crate::rows::get(r, "actor").map_err(db_err)?,
                    action: crate::rows::get(r, "action").map_err(db_err)?,
                    target: crate::rows::get(r, "target").map_err(db_err)?,
                    detail: rows::json(r, "detail")?,
                })
            })
            .collect()
    }

    pub(crate) async fn stats_impl(&self) -> Result<Stats> {
        let now = self.now_ms().await?;
        let mut query = sqlx::query(STATS_QUEUES);
        for _ in 0..6 {
            query = query.bind(now);
        }
        let rows = query.fetch_all(&self.inner.pool).await.map_err(db_err)?;
        let mut queues = Vec::with_capacity(rows.len());
        for r in &rows {
            queues.push(QueueStats {
                queue: crate::rows::get(r, "queue").map_err(db_err)?,
                pending: r.try_get("pending").map_err(db_err)?,
                ready: r.try_get("ready").map_err(db_err)?,
                running: r.try_get("running").map_err(db_err)?,
                succeeded: r.try_get("succeeded").map_err(db_err)?,
                dead: r.try_get("dead").map_err(db_err)?,
                cancelled: r.try_get("cancelled").map_err(db_err)?,
                oldest_ready_age_s: r.try_get("oldest_ready_age_s").map_err(db_err)?,
                running_near_expiry: r.try_get("running_near_expiry").map_err(db_err)?,
                running_expired: r.try_get("running_expired").map_err(db_err)?,
                oldest_dead_age_s: r.try_get("oldest_dead_age_s").map_err(db_err)?,
                blocked: r.try_get("blocked").map_err(db_err)?,
                paused: r.try_get("paused").map_err(db_err)?,
            });
        }
        Ok(Stats {
            queues,
            table: self.table_health_impl().await?,
        })
    }

    async fn active(&self, sql: &str, queues: &[String]) -> Result<i64> {
        if queues.is_empty() {
            return Ok(0);
        }
        let now = self.now_ms().await?;
        let marks = vec!["?"; queues.len()].join(", ");
        let sql = sql.replace("/*queues*/", &marks);
        let mut query = sqlx::query_scalar(&sql).bind(now);
        for _ in 0..2 {
            for q in queues {
                query = query.bind(q);
            }
        }
        query.fetch_one(&self.inner.pool).await.map_err(db_err)
    }

    pub(crate) async fn active_count_impl(&self, queues: &[String]) -> Result<i64> {
        self.active(ACTIVE_COUNT, queues).await
    }

    pub(crate) async fn any_active_impl(&self, queues: &[String]) -> Result<bool> {
        Ok(self.active(ANY_ACTIVE, queues).await? > 0)
    }

    pub(crate) async fn table_health_impl(&self) -> Result<Option<TableStats>> {
        let r = sqlx::query(TABLE_HEALTH)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(db_err)?;
        r.map(|r| {
            Ok(TableStats {
                live_tuples: r.try_get("live_tuples").map_err(db_err)?,
                dead_tuples: 0,
                last_vacuum: None,
                last_autovacuum: None,
                total_bytes: r.try_get("total_bytes").map_err(db_err)?,
                index_bytes: r.try_get("index_bytes").map_err(db_err)?,
            })
        })
        .transpose()
    }

    /// Every gate that holds job `id`, read in one read transaction (one snapshot), by the
    /// comparisons the claim makes.
    pub(crate) async fn why_impl(&self, id: JobId) -> Result<WhyReport> {
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let now: i64 = sqlx::query_scalar(crate::store::NOW)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        let row = sqlx::query(WHY_JOB)
            .bind(id.0)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?
            .ok_or(StoreError::NotFound(id))?;
        let state = rows::state(&crate::rows::get::<String>(&row, "state").map_err(db_err)?)?;
        let queue: String = crate::rows::get(&row, "queue").map_err(db_err)?;
        if state != JobState::Pending {
            return Ok(WhyReport {
                id,
                queue,
                state,
                gates: vec![Gate::NotPending { state }],
            });
        }
        let run_at: i64 = row.try_get("run_at").map_err(db_err)?;
        let priority: i64 = row.try_get("priority").map_err(db_err)?;
        let okey: Option<String> = crate::rows::get(&row, "ordering_key").map_err(db_err)?;
        let ckey: Option<String> = crate::rows::get(&row, "concurrency_key").map_err(db_err)?;
        let mut gates = Vec::new();
        if run_at > now {
            gates.push(Gate::ScheduledLater {
                run_at: rows::time(&row, "run_at")?,
                in_s: (run_at - now) as f64 / 1000.0,
            });
        }
        let q = queue_row(&mut tx, &queue).await?;
        if let Some(p) = q.paused_at {
            gates.push(Gate::QueuePaused {
                since: rows::at(p, "paused_at").map_err(crate::errors::corrupt)?,
            });
        }
        if let Some(max_running) = q.max_running {
            let running = running_in_queue(&mut tx, &queue).await?;
            if running >= i64::from(max_running) {
                gates.push(Gate::QueueFull {
                    max_running,
                    running,
                });
            }
        }
        if let Some(b) = q.bucket {
            let tokens = b.tokens_at(now);
            if tokens < 1.0 {
                gates.push(Gate::QueueRateEmpty {
                    tokens,
                    limit: b.rate,
                    period_ms: b.period_ms,
                });
            }
        }
        if let Some(key) = okey {
            let ahead: Option<(i64, crate::rows::Txt)> = sqlx::query_as(WHY_ORDERING)
                .bind(&key)
                .bind(id.0)
                .bind(id.0)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_err)?;
            if let Some((job, st)) = ahead {
                gates.push(Gate::OrderingBehind {
                    key,
                    job: JobId(job),
                    state: rows::state(&st.0)?,
                });
            }
        }
        if let Some(key) = ckey {
            let k = key_row(&mut tx, &key).await?;
            let lim = k.as_ref().and_then(|k| k.max_running).or(q.key_max_running);
            if let Some(max_running) = lim {
                let running = key_running(&mut tx, &key).await?;
                if running >= i64::from(max_running) {
                    gates.push(Gate::KeyFull {
                        key: key.clone(),
                        max_running,
                        running,
                    });
                }
            }
            if let Some(b) = k.and_then(|k| k.bucket) {
                let tokens = b.tokens_at(now);
                if tokens < 1.0 {
                    gates.push(Gate::KeyRateEmpty {
                        key,
                        tokens,
                        limit: b.rate,
                        period_ms: b.period_ms,
                    });
                }
            }
        }
        let served: bool = sqlx::query_scalar(WHY_SERVED)
            .bind(now)
            .bind(&queue)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        if !served {
            gates.push(Gate::NoLiveWorker);
        }
        if run_at <= now {
            let ahead: i64 = sqlx::query_scalar(WHY_AHEAD)
                .bind(&queue)
                .bind(now)
                .bind(id.0)
                .bind(priority)
                .bind(run_at)
                .bind(id.0)
                .bind(now)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_err)?;
            if ahead > 0 {
                gates.push(Gate::BehindInQueue { ahead });
            }
        }
        tx.commit().await.map_err(db_err)?;
        Ok(WhyReport {
            id,
            queue,
            state,
            gates,
        })
    }
}
