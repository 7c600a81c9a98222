//! `Store::why` on PostgreSQL: `sql/why.sql` reads every gate in one statement; this turns
//! its row into [`Gate`]s in the order a claim meets them.

use docket_core::*;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::rows;
use crate::store::PgStore;

impl PgStore {
    pub(crate) async fn why_impl(&self, id: JobId) -> Result<WhyReport> {
        let row = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().why)
                    .bind(id.0)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let Some(row) = row else {
            // A kept success is no longer in `jobs` (migration 0035): read from its history,
            // it is simply not pending.
            let job = self.get(id).await?;
            return Ok(WhyReport {
                id,
                queue: job.queue,
                state: job.state,
                gates: vec![Gate::NotPending { state: job.state }],
            });
        };
        let mut r = report(id, &row)?;
        if docket_core::why::scheduled_later(&r) {
            docket_core::why::name_sleep(&mut r, &self.job_steps_impl(id).await?);
        }
        if r.state == JobState::Waiting {
            docket_core::why::name_parents(&mut r, &self.dep_outputs_impl(id).await?);
        }
        Ok(r)
    }
}

fn report(id: JobId, r: &PgRow) -> Result<WhyReport> {
    let state = rows::state(&r.try_get::<String, _>("state").map_err(db_err)?)?;
    Ok(WhyReport {
        id,
        queue: r.try_get("queue").map_err(db_err)?,
        state,
        gates: match state {
            JobState::Pending => gates(r)?,
            _ => vec![Gate::NotPending { state }],
        },
    })
}

/// The gates of a pending job, in the order a claim meets them.
fn gates(r: &PgRow) -> Result<Vec<Gate>> {
    let get_state = |col: &str| -> Result<Option<JobState>> {
        let s: Option<String> = r.try_get(col).map_err(db_err)?;
        s.map(|s| rows::state(&s)).transpose()
    };
    let mut gates = Vec::new();
    let in_s: f64 = r.try_get("run_in_s").map_err(db_err)?;
    if in_s > 0.0 {
        gates.push(Gate::ScheduledLater {
            run_at: r.try_get("run_at").map_err(db_err)?,
            in_s,
        });
    }
    if let Some(since) = r.try_get("paused_at").map_err(db_err)? {
        gates.push(Gate::QueuePaused { since });
    }
    let queue_max: Option<i32> = r.try_get("queue_max_running").map_err(db_err)?;
    let queue_running: Option<i64> = r.try_get("queue_running").map_err(db_err)?;
    if let (Some(max_running), Some(running)) = (queue_max, queue_running) {
        if running >= i64::from(max_running) {
            gates.push(Gate::QueueFull {
                max_running,
                running,
            });
        }
    }
    let queue_tokens: Option<f64> = r.try_get("queue_tokens").map_err(db_err)?;
    if let Some(tokens) = queue_tokens.filter(|t| *t < 1.0) {
        gates.push(Gate::QueueRateEmpty {
            tokens,
            limit: r.try_get("queue_rate_limit").map_err(db_err)?,
            period_ms: r.try_get("queue_rate_period_ms").map_err(db_err)?,
        });
    }
    let ordering_key: Option<String> = r.try_get("ordering_key").map_err(db_err)?;
    let ahead_id: Option<i64> = r.try_get("ordering_ahead_id").map_err(db_err)?;
    let mut key_gate = false;
    if let (Some(key), Some(job), Some(st)) =
        (ordering_key, ahead_id, get_state("ordering_ahead_state")?)
    {
        key_gate = true;
        gates.push(Gate::OrderingBehind {
            key,
            job: JobId(job),
            state: st,
        });
    }
    let ckey: Option<String> = r.try_get("concurrency_key").map_err(db_err)?;
    if let Some(key) = ckey {
        let max: Option<i32> = r.try_get("key_max_running").map_err(db_err)?;
        let running: Option<i64> = r.try_get("key_running").map_err(db_err)?;
        if let (Some(max_running), Some(running)) = (max, running) {
            if running >= i64::from(max_running) {
                key_gate = true;
                let by_queue: Option<serde_json::Value> =
                    r.try_get("key_running_by_queue").map_err(db_err)?;
                gates.push(Gate::KeyFull {
                    key: key.clone(),
                    max_running,
                    running,
                    by_queue: by_queue
                        .and_then(|v| serde_json::from_value(v).ok())
                        .unwrap_or_default(),
                });
            }
        }
        let tokens: Option<f64> = r.try_get("key_tokens").map_err(db_err)?;
        if let Some(tokens) = tokens.filter(|t| *t < 1.0) {
            gates.push(Gate::KeyRateEmpty {
                key,
                tokens,
                limit: r.try_get("key_rate_limit").map_err(db_err)?,
                period_ms: r.try_get("key_rate_period_ms").map_err(db_err)?,
            });
        }
    }
    let blocked: bool = r.try_get("blocked").map_err(db_err)?;
    if blocked && !key_gate {
        gates.push(Gate::AwaitingSweep);
    }
    let served: bool = r.try_get("served").map_err(db_err)?;
    if !served {
        gates.push(Gate::NoLiveWorker);
    }
    let ahead: Option<i64> = r.try_get("ahead").map_err(db_err)?;
    if let Some(ahead) = ahead.filter(|a| *a > 0) {
        gates.push(Gate::BehindInQueue { ahead });
    }
    Ok(gates)
}
