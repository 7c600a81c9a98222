//! Operators' reads and writes on PostgreSQL (`sql/search.sql`, `overview.sql`,
//! `dead_groups.sql`, `run_now.sql`, `samples_*.sql`, `audit_*.sql`; tables from migration
//! 0010).
//!
//! The dashboard's reads run unprepared (`persistent(false)`): each is planned with its
//! values, so a filter left empty folds away and the partial index that fits the given
//! state is chosen. Their plans are what keeps every page fast on a table of millions; a
//! generic prepared plan would pick one index for every combination of filters.

use std::time::Duration;

use chrono::{DateTime, Utc};
use docket_core::*;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::rows;
use crate::store::{ms, PgStore};

fn count(r: &PgRow, col: &str, cap: i64) -> Result<Count> {
    let n: i64 = r.try_get(col).map_err(db_err)?;
    Ok(Count::capped(n, cap))
}

fn summary(r: &PgRow, cap: i64) -> Result<QueueSummary> {
    let name: Option<String> = r.try_get("name").map_err(db_err)?;
    let control = match name {
        Some(_) => Some(crate::controls::control_row(r)?),
        None => None,
    };
    Ok(QueueSummary {
        queue: r.try_get("queue").map_err(db_err)?,
        pending: count(r, "pending", cap)?,
        ready: count(r, "ready", cap)?,
        blocked: count(r, "blocked", cap)?,
        running: r.try_get("running").map_err(db_err)?,
        near_expiry: r.try_get("near_expiry").map_err(db_err)?,
        dead: count(r, "dead", cap)?,
        oldest_ready_age_s: r.try_get("oldest_ready_age_s").map_err(db_err)?,
        oldest_waiting_age_s: r.try_get("oldest_waiting_age_s").map_err(db_err)?,
        paused: control.as_ref().is_some_and(|c| c.paused_at.is_some()),
        control,
        workers: r.try_get("workers").map_err(db_err)?,
    })
}

impl PgStore {
    pub(crate) async fn search_impl(&self, q: &JobQuery) -> Result<JobPage> {
        q.validate()?;
        let page = q.page_size();
        let (args_path, args_value, meta_path, meta_value) = match &q.field {
            Some(f) if f.document == inspect::Document::Args => {
                (Some(f.path.clone()), Some(f.value.clone()), None, None)
            }
            Some(f) => (None, None, Some(f.path.clone()), Some(f.value.clone())),
            None => (None, None, None, None),
        };
        // Kept successes live packed in jobs_succeeded (migration 0035), which an id window
        // over `jobs` cannot see: a search for them is always read in finished order.
        let succeeded = q.state == Some(JobState::Succeeded);
        let window = q.needs_window() && !succeeded;
        // Dead jobs are few and have their own index by id; the other finished states are
        // read in finished order over jobs_finished_idx.
        let finished = succeeded || (!window && q.state == Some(JobState::Cancelled));
        let sql = if window {
            &self.queries().search_window
        } else if finished {
            &self.queries().search_finished
        } else {
            &self.queries().search
        };
        let rows = self
            .read_plain(async |c: &mut PgConnection| {
                let query = sqlx::query(sql)
                    .persistent(false)
                    .bind(&q.queue)
                    .bind(&q.kind)
                    .bind(q.state.map(|s| s.as_str()))
                    .bind(q.priority)
                    .bind(q.since)
                    .bind(q.until)
                    .bind(&q.ordering_key)
                    .bind(&q.concurrency_key)
                    .bind(&args_path)
                    .bind(&args_value)
                    .bind(&meta_path)
                    .bind(&meta_value)
                    .bind(q.before.map(|b| b.0))
                    .bind(page + 1)
                    .bind(&q.last_error);
                let query = if window {
                    query
                        .bind(inspect::SCAN_WINDOW)
                        .bind(q.pending.map(|p| p.as_str()))
                } else if finished {
                    query.bind(q.before_finished_at)
                } else {
                    query
                };
                query.fetch_all(&mut *c).await.map_err(db_err)
            })
            .await?;
        let mut scanned = None;
        let mut scan_end = None;
        let mut jobs = Vec::with_capacity(rows.len());
        for r in &rows {
            if window {
                scanned = Some(r.try_get::<i64, _>("scanned").map_err(db_err)?);
                scan_end = r.try_get::<Option<i64>, _>("scan_end").map_err(db_err)?;
                if r.try_get::<Option<i64>, _>("id").map_err(db_err)?.is_none() {
                    continue;
                }
            }
            jobs.push(rows::record(r)?);
        }
        Ok(JobPage::cut(jobs, page, finished, scanned, scan_end))
    }

    /// Runs a dashboard read in a transaction of its own with JIT compilation off: the
    /// planner's cost of a capped count or a windowed scan on a table of millions crosses
    /// `jit_above_cost`, and compiling took 900 ms of a 1 s overview that runs in 80 ms
    /// without it (measured by scripts/dashboard-bench.sh). `SET LOCAL` ends with the
    /// transaction, so a pooled connection is left as it was (and behind a transaction-mode
    /// pooler the setting never leaks to another client).
    pub(crate) async fn read_plain<T>(
        &self,
        f: impl AsyncFnOnce(&mut PgConnection) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.pool().begin().await.map_err(db_err)?;
        sqlx::query("SET LOCAL jit = off")
            .persistent(false)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        let out = f(&mut *tx).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    pub(crate) async fn overview_impl(&self, cap: i64) -> Result<Overview> {
        validate::count_cap(cap)?;
        let rows = self
            .read_plain(async |c: &mut PgConnection| {
                sqlx::query(&self.queries().overview)
                    .persistent(false)
                    .bind(cap)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let at = match rows.first() {
            Some(r) => r.try_get::<DateTime<Utc>, _>("at").ok(),
            None => None,
        };
        Ok(Overview {
            queues: rows
                .iter()
                .map(|r| summary(r, cap))
                .collect::<Result<_>>()?,
            cap,
            at,
        })
    }

    pub(crate) async fn errored_jobs_impl(&self, per_state: i64) -> Result<Vec<ErroredJob>> {
        let rows = self
            .read_plain(async |c: &mut PgConnection| {
                sqlx::query(&self.queries().errored_jobs)
                    .persistent(false)
                    .bind(per_state.clamp(1, docket_core::error_groups::ERRORED_MAX))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                let entry = |col: &str| -> Result<Option<docket_core::ErrorEntry>> {
                    let v: Option<serde_json::Value> = r.try_get(col).map_err(db_err)?;
                    // A history entry some other writer shaped differently is shown as no
                    // entry rather than failing the page.
                    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
                };
                let state: String = r.try_get("state").map_err(db_err)?;
                Ok(ErroredJob {
                    id: JobId(r.try_get("id").map_err(db_err)?),
                    queue: r.try_get("queue").map_err(db_err)?,
                    kind: r.try_get("kind").map_err(db_err)?,
                    state: state.parse().unwrap_or(JobState::Pending),
                    first: entry("first_error")?,
                    last: entry("last_error")?,
                })
            })
            .collect()
    }

    pub(crate) async fn dead_groups_impl(&self, limit: i64) -> Result<Vec<DeadGroup>> {
        let rows = self
            .read_plain(async |c: &mut PgConnection| {
                sqlx::query(&self.queries().dead_groups)
                    .persistent(false)
                    .bind(limit.clamp(1, inspect::MAX_PAGE))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                Ok(DeadGroup {
                    kind: r.try_get("kind").map_err(db_err)?,
                    error: r.try_get("error").map_err(db_err)?,
                    count: r.try_get("n").map_err(db_err)?,
                    newest_at: r.try_get("newest_at").map_err(db_err)?,
                    example: JobId(r.try_get("example").map_err(db_err)?),
                })
            })
            .collect()
    }

    pub(crate) async fn run_now_impl(&self, id: JobId) -> Result<JobRecord> {
        let mut tx = self.begin_bounded().await?;
        let queue: Option<String> = self
            .query_scalar(&self.queries().run_now)
            .bind(id.0)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
        let Some(queue) = queue else {
            drop(tx);
            let job = self.get(id).await?;
            return Err(StoreError::WrongState {
                id,
                state: job.state,
                op: "run now (only a pending job scheduled for later)",
            });
        };
        self.notify(&mut *tx, &self.wakeup_channel(), &queue)
            .await?;
        tx.commit().await.map_err(db_err)?;
        self.get(id).await
    }

    pub(crate) async fn record_samples_impl(&self, samples: &[Sample]) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        for s in samples {
            validate::queue(&s.queue)?;
        }
        let col = |f: fn(&Sample) -> i64| samples.iter().map(|s| f(s).max(0)).collect::<Vec<_>>();
        let queues: Vec<&str> = samples.iter().map(|s| s.queue.as_str()).collect();
        let minutes: Vec<DateTime<Utc>> = samples.iter().map(|s| s.minute).collect();
        let buckets: Vec<_> = samples.iter().flat_map(histogram::rows).collect();
        let b_queues: Vec<&str> = buckets.iter().map(|b| b.0).collect();
        let b_minutes: Vec<DateTime<Utc>> = buckets.iter().map(|b| b.1).collect();
        let b_metrics: Vec<i8> = buckets.iter().map(|b| b.2 as i8).collect();
        let b_buckets: Vec<i16> = buckets.iter().map(|b| b.3).collect();
        let b_counts: Vec<i64> = buckets.iter().map(|b| b.4).collect();
        // Sums and histogram counts in one transaction: a worker whose report failed puts it
        // back and reports it again, so half of one must never stay written.
        let mut tx = self.begin_bounded().await?;
        if !buckets.is_empty() {
            self.query(&self.queries().sample_buckets_record)
                .bind(&b_queues)
                .bind(&b_minutes)
                .bind(&b_metrics)
                .bind(&b_buckets)
                .bind(&b_counts)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
        }
        self.query(&self.queries().samples_record)
            .bind(&queues)
            .bind(&minutes)
            .bind(col(|s| s.succeeded))
            .bind(col(|s| s.failed))
            .bind(col(|s| s.wait_ms_sum))
            .bind(col(|s| s.wait_count))
            .bind(col(|s| s.run_ms_sum))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        Ok(())
    }

    pub(crate) async fn samples_impl(&self, window: Duration) -> Result<Vec<Sample>> {
        let window = ms(window.min(Duration::from_secs(86_400)));
        let (rows, buckets) = self
            .run(async |c: &mut PgConnection| {
                let rows = self
                    .query(&self.queries().samples_list)
                    .bind(window)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)?;
                let buckets = self
                    .query(&self.queries().sample_buckets_list)
                    .bind(window)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)?;
                Ok((rows, buckets))
            })
            .await?;
        let mut samples = rows
            .iter()
            .map(|r| {
                Ok(Sample {
                    queue: r.try_get("queue").map_err(db_err)?,
                    minute: r.try_get("minute").map_err(db_err)?,
                    succeeded: r.try_get("succeeded").map_err(db_err)?,
                    failed: r.try_get("failed").map_err(db_err)?,
                    wait_ms_sum: r.try_get("wait_ms_sum").map_err(db_err)?,
                    wait_count: r.try_get("wait_count").map_err(db_err)?,
                    run_ms_sum: r.try_get("run_ms_sum").map_err(db_err)?,
                    wait_hist: Vec::new(),
                    run_hist: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let buckets = buckets
            .iter()
            .map(|r| {
                let metric: String = r.try_get("metric").map_err(db_err)?;
                Ok((
                    r.try_get::<String, _>("queue").map_err(db_err)?,
                    r.try_get::<DateTime<Utc>, _>("minute").map_err(db_err)?,
                    metric.chars().next().unwrap_or('?'),
                    r.try_get::<i16, _>("bucket").map_err(db_err)?,
                    r.try_get::<i64, _>("n").map_err(db_err)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        histogram::merge(&mut samples, buckets);
        Ok(samples)
    }

    pub(crate) async fn audit_impl(&self, e: &AuditEntry) -> Result<()> {
        e.validate()?;
        self.run(async |c: &mut PgConnection| {
            self.query(&self.queries().audit_insert)
                .bind(&e.actor)
                .bind(&e.action)
                .bind(&e.target)
                .bind(&e.detail)
                .execute(&mut *c)
                .await
                .map_err(db_err)
        })
        .await?;
        Ok(())
    }

    pub(crate) async fn audit_log_impl(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().audit_list)
                    .bind(limit.clamp(1, inspect::MAX_PAGE))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                Ok(AuditEntry {
                    at: r.try_get("at").map_err(db_err)?,
                    actor: r.try_get("actor").map_err(db_err)?,
                    action: r.try_get("action").map_err(db_err)?,
                    target: r.try_get("target").map_err(db_err)?,
                    detail: r.try_get("detail").map_err(db_err)?,
                })
            })
            .collect()
    }
}
