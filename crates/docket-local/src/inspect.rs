//! Operators' reads: search, overview, dead groups, samples, the audit log, stats, and
//! "why is this job not running?" by the claim's own rules ([`crate::claim`]).

use std::time::Duration;

use docket_core::inspect::Document;
use docket_core::*;

use crate::args;
use crate::claim::{key_row, key_running, queue_row, running_in_queue};
use crate::controls::{control_row, now_ms};
use crate::engine::{Engine, Tx};
use crate::exec::{corrupt, Conn, Row};
use crate::rows::{self, ms, ms_of};

/// A JSON path from keys: `$."a"."b"`. A key with a double quote or a backslash is refused
/// (the engines' path syntaxes do not agree on escaping it).
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

fn count(r: &Row, col: &str, cap: i64) -> Result<Count> {
    Ok(Count::capped(r.get(col)?, cap))
}

/// A page of jobs matching `q`, newest first.
pub async fn search<E: Engine>(e: &E, q: &JobQuery) -> Result<JobPage> {
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
    let finished = !window && matches!(q.state, Some(JobState::Succeeded | JobState::Cancelled));
    let before = q.before.map(|b| b.0);
    // "Not due yet" is judged by the database's clock, read only when asked.
    let now = match q.pending {
        Some(PendingPhase::Scheduled) => now_ms(e).await?,
        _ => 0,
    };
    let mut c = e.reader();
    // A filter the indexes cannot serve looks at one window of ids below the cursor.
    let scan: Option<(i64, Option<i64>)> = if window {
        let r = c
            .fetch_one("search_window_scan", args![before, inspect::SCAN_WINDOW])
            .await?;
        Some((r.get("scanned")?, r.get("scan_end")?))
    } else {
        None
    };
    let sql = if window {
        "search_window"
    } else if finished {
        "search_finished"
    } else {
        "search"
    };
    let rows = c
        .fetch_all(
            sql,
            args![
                &q.queue,
                &q.kind,
                q.state.map(|s| s.as_str()),
                q.priority,
                q.since.map(ms_of),
                q.until.map(ms_of),
                &q.ordering_key,
                &q.concurrency_key,
                &args_path,
                &args_value,
                &meta_path,
                &meta_value,
                before,
                page + 1,
                &q.last_error,
                q.before_finished_at.map(ms_of),
                // Below the window's lowest id nothing is looked at (an empty window: nothing).
                scan.and_then(|(_, end)| end).unwrap_or(i64::MAX),
                q.pending.map(|p| p.as_str()),
                now,
            ],
        )
        .await?;
    let scanned = scan.map(|(n, _)| n);
    let scan_end = scan.and_then(|(_, end)| end);
    let jobs = rows.iter().map(rows::record).collect::<Result<Vec<_>>>()?;
    Ok(JobPage::cut(jobs, page, finished, scanned, scan_end))
}

/// Every known queue at a glance, counts capped at `cap`.
pub async fn overview<E: Engine>(e: &E, cap: i64) -> Result<Overview> {
    validate::count_cap(cap)?;
    let now = now_ms(e).await?;
    let rows = e.reader().fetch_all("overview", args![now, cap]).await?;
    let mut queues = Vec::with_capacity(rows.len());
    for r in &rows {
        let name: Option<String> = r.get("name")?;
        let control = match name {
            Some(_) => Some(control_row(r, now)?),
            None => None,
        };
        queues.push(QueueSummary {
            queue: r.get("queue")?,
            pending: count(r, "pending", cap)?,
            ready: count(r, "ready", cap)?,
            blocked: count(r, "blocked", cap)?,
            running: r.get("running")?,
            near_expiry: r.get("near_expiry")?,
            dead: count(r, "dead", cap)?,
            oldest_ready_age_s: r.get("oldest_ready_age_s")?,
            // No job is flagged blocked here (a claim judges keys as it goes), so the oldest
            // ready job is the oldest waiting one.
            oldest_waiting_age_s: r.get("oldest_ready_age_s")?,
            paused: control.as_ref().is_some_and(|c| c.paused_at.is_some()),
            control,
            workers: r.get("workers")?,
        });
    }
    Ok(Overview {
        queues,
        cap,
        at: rows::at(now, "now").ok(),
    })
}

/// Dead jobs grouped by kind and last error, largest groups first, up to `limit`.
pub async fn dead_groups<E: Engine>(e: &E, limit: i64) -> Result<Vec<DeadGroup>> {
    let rows = e
        .reader()
        .fetch_all("dead_groups", args![limit.clamp(1, inspect::MAX_PAGE)])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(DeadGroup {
                kind: r.get("kind")?,
                error: r.get("error")?,
                count: r.get("n")?,
                newest_at: rows::time(r, "newest_at")?,
                example: JobId(r.get("example")?),
            })
        })
        .collect()
}

/// The newest errored jobs (see `Store::errored_jobs`).
pub async fn errored_jobs<E: Engine>(e: &E, per_state: i64) -> Result<Vec<ErroredJob>> {
    let rows = e
        .reader()
        .fetch_all(
            "errored_jobs",
            args![per_state.clamp(1, docket_core::error_groups::ERRORED_MAX)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let entry = |col: &str| -> Result<Option<docket_core::ErrorEntry>> {
                let text: Option<String> = r.get(col)?;
                // An entry shaped otherwise is shown as none rather than failing the page.
                Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
            };
            let state: String = r.get("state")?;
            Ok(ErroredJob {
                id: JobId(r.get("id")?),
                queue: r.get("queue")?,
                kind: r.get("kind")?,
                state: state.parse().unwrap_or(JobState::Pending),
                first: entry("first_error")?,
                last: entry("last_error")?,
            })
        })
        .collect()
}

/// Adds workers' per-minute samples to the stored ones.
pub async fn record_samples<E: Engine>(e: &E, samples: &[Sample]) -> Result<()> {
    if samples.is_empty() {
        return Ok(());
    }
    for s in samples {
        validate::queue(&s.queue)?;
    }
    let mut tx = e.begin().await?;
    let now = tx.now();
    tx.execute("samples_forget", args![now]).await?;
    tx.execute("sample_buckets_forget", args![now]).await?;
    for (queue, minute, metric, bucket, n) in samples.iter().flat_map(histogram::rows) {
        let metric = metric.to_string();
        tx.execute(
            "sample_buckets_record",
            args![queue, ms_of(minute), metric.as_str(), i64::from(bucket), n],
        )
        .await?;
    }
    for s in samples {
        tx.execute(
            "samples_record",
            args![
                &s.queue,
                ms_of(s.minute),
                s.succeeded.max(0),
                s.failed.max(0),
                s.wait_ms_sum.max(0),
                s.wait_count.max(0),
                s.run_ms_sum.max(0),
            ],
        )
        .await?;
    }
    tx.commit().await
}

/// The per-minute samples of the last `window`.
pub async fn samples<E: Engine>(e: &E, window: Duration) -> Result<Vec<Sample>> {
    let now = now_ms(e).await?;
    let window = ms(window.min(Duration::from_secs(86_400)));
    let first = ((now - window) / 60_000) * 60_000;
    let rows = e
        .reader()
        .fetch_all("samples_list", args![now, window, first])
        .await?;
    let buckets = e
        .reader()
        .fetch_all("sample_buckets_list", args![now, window])
        .await?;
    let mut samples = rows
        .iter()
        .map(|r| {
            Ok(Sample {
                queue: r.get("queue")?,
                minute: rows::time(r, "minute_at")?,
                succeeded: r.get("succeeded")?,
                failed: r.get("failed")?,
                wait_ms_sum: r.get("wait_ms_sum")?,
                wait_count: r.get("wait_count")?,
                run_ms_sum: r.get("run_ms_sum")?,
                wait_hist: Vec::new(),
                run_hist: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let buckets = buckets
        .iter()
        .map(|r| {
            let metric: String = r.get("metric")?;
            let bucket: i64 = r.get("bucket")?;
            Ok((
                r.get::<String>("queue")?,
                rows::time(r, "minute_at")?,
                metric.chars().next().unwrap_or('?'),
                i16::try_from(bucket).unwrap_or(-1),
                r.get::<i64>("n")?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    histogram::merge(&mut samples, buckets);
    Ok(samples)
}

/// Appends an operator's action to the audit log.
pub async fn audit<E: Engine>(e: &E, entry: &AuditEntry) -> Result<()> {
    entry.validate()?;
    let detail = entry.detail.to_string();
    let mut tx = e.begin().await?;
    let now = tx.now();
    tx.execute(
        "audit_insert",
        args![now, &entry.actor, &entry.action, &entry.target, &detail],
    )
    .await?;
    tx.commit().await
}

/// The newest `limit` entries of the audit log.
pub async fn audit_log<E: Engine>(e: &E, limit: i64) -> Result<Vec<AuditEntry>> {
    let rows = e
        .reader()
        .fetch_all("audit_list", args![limit.clamp(1, inspect::MAX_PAGE)])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(AuditEntry {
                at: Some(rows::time(r, "at")?),
                actor: r.get("actor")?,
                action: r.get("action")?,
                target: r.get("target")?,
                detail: rows::json(r, "detail")?,
            })
        })
        .collect()
}

/// Per-queue counters (`docket stats`).
pub async fn stats<E: Engine>(e: &E) -> Result<Stats> {
    let now = now_ms(e).await?;
    let rows = e.reader().fetch_all("stats_queues", args![now]).await?;
    let mut queues = Vec::with_capacity(rows.len());
    for r in &rows {
        queues.push(QueueStats {
            queue: r.get("queue")?,
            pending: r.get("pending")?,
            ready: r.get("ready")?,
            waiting: r.get("ready")?,
            running: r.get("running")?,
            succeeded: r.get("succeeded")?,
            dead: r.get("dead")?,
            cancelled: r.get("cancelled")?,
            oldest_ready_age_s: r.get("oldest_ready_age_s")?,
            oldest_waiting_age_s: r.get("oldest_ready_age_s")?,
            running_near_expiry: r.get("running_near_expiry")?,
            running_expired: r.get("running_expired")?,
            oldest_dead_age_s: r.get("oldest_dead_age_s")?,
            blocked: r.get("blocked")?,
            paused: r.get("paused")?,
        });
    }
    Ok(Stats {
        queues,
        table: e.table_health().await?,
    })
}

/// Pending and running jobs of `queues`.
pub async fn active_count<E: Engine>(e: &E, queues: &[String]) -> Result<i64> {
    if queues.is_empty() {
        return Ok(0);
    }
    let now = now_ms(e).await?;
    e.reader().scalar("active_count", args![queues, now]).await
}

/// Whether `queues` have a pending or running job.
pub async fn any_active<E: Engine>(e: &E, queues: &[String]) -> Result<bool> {
    if queues.is_empty() {
        return Ok(false);
    }
    let now = now_ms(e).await?;
    e.reader().scalar("any_active", args![queues, now]).await
}

/// Every gate that holds job `id`, read in one read transaction (one snapshot), by the
/// comparisons the claim makes.
pub async fn why<E: Engine>(e: &E, id: JobId) -> Result<WhyReport> {
    let mut r = why_gates(e, id).await?;
    if docket_core::why::scheduled_later(&r) {
        docket_core::why::name_sleep(&mut r, &crate::steps::job_steps(e, id).await?);
    }
    if r.state == JobState::Waiting {
        docket_core::why::name_parents(&mut r, &crate::workflow::dep_outputs(e, id).await?);
    }
    Ok(r)
}

async fn why_gates<E: Engine>(e: &E, id: JobId) -> Result<WhyReport> {
    let mut tx = e.begin_read().await?;
    let now = tx.now();
    let row = tx
        .fetch_optional("why_job", args![id.0])
        .await?
        .ok_or(StoreError::NotFound(id))?;
    let state = rows::state(&row.get::<String>("state")?)?;
    let queue: String = row.get("queue")?;
    if state != JobState::Pending {
        return Ok(WhyReport {
            id,
            queue,
            state,
            gates: vec![Gate::NotPending { state }],
        });
    }
    let run_at: i64 = row.get("run_at")?;
    let priority: i64 = row.get("priority")?;
    let okey: Option<String> = row.get("ordering_key")?;
    let ckey: Option<String> = row.get("concurrency_key")?;
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
            since: rows::at(p, "paused_at").map_err(corrupt)?,
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
        if let Some(r) = tx.fetch_optional("why_ordering", args![&key, id.0]).await? {
            gates.push(Gate::OrderingBehind {
                key,
                job: JobId(r.get("id")?),
                state: rows::state(&r.get::<String>("state")?)?,
            });
        }
    }
    if let Some(key) = ckey {
        let k = key_row(&mut tx, &key).await?;
        let lim = k.as_ref().and_then(|k| k.max_running).or(q.key_max_running);
        if let Some(max_running) = lim {
            let running = key_running(&mut tx, &key).await?;
            if running >= i64::from(max_running) {
                let by_queue = tx
                    .fetch_all("why_key_queues", args![&key])
                    .await?
                    .iter()
                    .map(|r| Ok((r.get::<String>("queue")?, r.get::<i64>("n")?)))
                    .collect::<Result<Vec<_>>>()?;
                gates.push(Gate::KeyFull {
                    key: key.clone(),
                    max_running,
                    running,
                    by_queue,
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
    let served: bool = tx.scalar("why_served", args![&queue, now]).await?;
    if !served {
        gates.push(Gate::NoLiveWorker);
    }
    if run_at <= now {
        let ahead: i64 = tx
            .scalar("why_ahead", args![&queue, id.0, priority, run_at, now])
            .await?;
        if ahead > 0 {
            gates.push(Gate::BehindInQueue { ahead });
        }
    }
    tx.commit().await?;
    Ok(WhyReport {
        id,
        queue,
        state,
        gates,
    })
}
