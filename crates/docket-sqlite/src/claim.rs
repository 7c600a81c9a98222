//! The claim: one `BEGIN IMMEDIATE` transaction that reads the queue's controls, chooses the
//! jobs it may hand out, leases them and commits at once.
//!
//! The rules are PostgreSQL's `claim()` / `claim_controlled()` (docket-postgres
//! schema/current.sql), decided here in Rust because SQLite's single writer makes every read
//! inside the transaction final: a paused queue hands out nothing; a queue's `max_running`
//! and rate bucket cap the batch; jobs ready for longer than the starvation bound come first,
//! oldest first, then the rest by priority; an ordering key runs one job at a time, in id
//! order, held by a dead head; a concurrency key runs at most its limit (the key's own, else
//! the queue's `key_max_running`) and spends its own rate bucket.

use std::collections::HashMap;

use docket_core::*;
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use sqlx::Row;

use crate::errors::db_err;
use crate::store::{ms, SqliteStore};

const QUEUE_CONTROL: &str = include_str!("../sql/queue_control.sql");
const RUNNING_IN_QUEUE: &str = include_str!("../sql/running_in_queue.sql");
const CLAIM_CONTEXT: &str = include_str!("../sql/claim_context.sql");
const ORDERING_BEHIND: &str = include_str!("../sql/ordering_behind.sql");
const KEY_LIMIT: &str = include_str!("../sql/key_limit.sql");
const KEY_RUNNING: &str = include_str!("../sql/key_running.sql");
const CANDIDATES_PAST_HELD: &str = include_str!("../sql/candidates_past_held.sql");
const CLAIM_FAST: &str = include_str!("../sql/claim_fast.sql");
const CLAIM_LEASE: &str = include_str!("../sql/claim_lease.sql");
const CLAIMED_ROWS: &str = include_str!("../sql/claimed_rows.sql");
const QUEUE_TOKENS_SPEND: &str = include_str!("../sql/queue_tokens_spend.sql");
const KEY_TOKENS_SPEND: &str = include_str!("../sql/key_tokens_spend.sql");

pub(crate) use docket_core::local::Bucket;

/// A rate bucket read from a `queues` or `key_limits` row (none without a rate).
pub(crate) fn bucket_of(r: &SqliteRow) -> Result<Option<Bucket>> {
    let rate: Option<i32> = r.try_get("rate_limit").map_err(db_err)?;
    let period: Option<i64> = r.try_get("rate_period_ms").map_err(db_err)?;
    Ok(match (rate, period) {
        (Some(rate), Some(period_ms)) if period_ms > 0 => Some(Bucket {
            rate,
            period_ms,
            tokens: r.try_get("tokens").map_err(db_err)?,
            refilled_at: r.try_get("refilled_at").map_err(db_err)?,
        }),
        _ => None,
    })
}

/// A queue's controls as the claim reads them.
#[derive(Debug, Default)]
pub(crate) struct QueueRow {
    pub paused_at: Option<i64>,
    pub max_running: Option<i32>,
    pub key_max_running: Option<i32>,
    pub bucket: Option<Bucket>,
}

pub(crate) async fn queue_row(c: &mut SqliteConnection, queue: &str) -> Result<QueueRow> {
    let row = sqlx::query(QUEUE_CONTROL)
        .bind(queue)
        .fetch_optional(&mut *c)
        .await
        .map_err(db_err)?;
    let Some(r) = row else {
        return Ok(QueueRow::default());
    };
    queue_row_of(&r)
}

/// A queue's controls from a row with queue_control.sql's columns (claim_context.sql has
/// them too; all NULL without a `queues` row).
fn queue_row_of(r: &SqliteRow) -> Result<QueueRow> {
    Ok(QueueRow {
        paused_at: r.try_get("paused_at").map_err(db_err)?,
        max_running: r.try_get("max_running").map_err(db_err)?,
        key_max_running: r.try_get("key_max_running").map_err(db_err)?,
        bucket: bucket_of(r)?,
    })
}

/// A concurrency key's limits.
pub(crate) struct KeyRow {
    pub max_running: Option<i32>,
    pub bucket: Option<Bucket>,
}

pub(crate) async fn key_row(c: &mut SqliteConnection, key: &str) -> Result<Option<KeyRow>> {
    let row = sqlx::query(KEY_LIMIT)
        .bind(key)
        .fetch_optional(&mut *c)
        .await
        .map_err(db_err)?;
    row.map(|r| {
        Ok(KeyRow {
            max_running: r.try_get("max_running").map_err(db_err)?,
            bucket: bucket_of(&r)?,
        })
    })
    .transpose()
}

pub(crate) async fn count(c: &mut SqliteConnection, sql: &str, key: &str) -> Result<i64> {
    sqlx::query_scalar(sql)
        .bind(key)
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)
}

pub(crate) async fn running_in_queue(c: &mut SqliteConnection, queue: &str) -> Result<i64> {
    count(c, RUNNING_IN_QUEUE, queue).await
}

pub(crate) async fn key_running(c: &mut SqliteConnection, key: &str) -> Result<i64> {
    count(c, KEY_RUNNING, key).await
}

pub(crate) async fn ordering_behind(c: &mut SqliteConnection, key: &str, id: i64) -> Result<bool> {
    sqlx::query_scalar(ORDERING_BEHIND)
        .bind(key)
        .bind(id)
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)
}

type Candidate = (i64, Option<String>, Option<String>);

fn candidates(r: &SqliteRow, column: &str) -> Result<Vec<Candidate>> {
    let text: String = r.try_get(column).map_err(db_err)?;
    serde_json::from_str(&text)
        .map_err(|e| crate::errors::corrupt(format!("claim candidates: {e}")))
}

/// A further pass's candidates (candidates_past_held.sql).
async fn past_held(
    c: &mut SqliteConnection,
    queue: &str,
    now: i64,
    depth: i64,
    held: &docket_core::local::HeldKeys,
) -> Result<Vec<Candidate>> {
    let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
    let r = sqlx::query(CANDIDATES_PAST_HELD)
        .bind(queue)
        .bind(now)
        .bind(depth)
        .bind(json(&held.concurrency))
        .bind(json(&held.ordering))
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)?;
    candidates(&r, "ready")
}

/// What claim_context.sql read: the claim's instant, the queue's controls and the
/// candidates (starving first, then ready).
struct Context {
    now: i64,
    queue: QueueRow,
    rows: Vec<Candidate>,
}

async fn context(c: &mut SqliteConnection, req: &ClaimRequest) -> Result<Context> {
    let r = sqlx::query(CLAIM_CONTEXT)
        .bind(&req.queue)
        .bind(i64::from(req.limit))
        .bind(req.starvation.map(ms))
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)?;
    let queue = queue_row_of(&r)?;
    let mut rows = candidates(&r, "starving")?;
    rows.extend(candidates(&r, "ready")?);
    Ok(Context {
        now: r.try_get("now").map_err(db_err)?,
        queue,
        rows,
    })
}

/// What a claim leased: claimed_rows.sql's one row, and the ids in the order they were
/// chosen. Decoded after the write transaction has committed, so the single writer is not
/// held while JSON is parsed.
pub(crate) struct Leased {
    text: String,
    chosen: Vec<i64>,
}

/// Chooses and leases up to `req.limit` jobs at the database's now (read by
/// claim_context.sql, the transaction's first statement).
async fn claim_in(c: &mut SqliteConnection, req: &ClaimRequest) -> Result<Option<Leased>> {
    let Context {
        now,
        queue: q,
        rows,
    } = context(c, req).await?;
    if q.paused_at.is_some() {
        return Ok(None);
    }
    let mut budget = i64::from(req.limit);
    if let Some(max) = q.max_running {
        budget = budget.min(i64::from(max) - running_in_queue(c, &req.queue).await?);
    }
    let queue_tokens = q.bucket.map(|b| b.tokens_at(now));
    if let Some(t) = queue_tokens {
        budget = budget.min(t.floor() as i64);
    }
    // Controlled work only for the claimer's free slots (ClaimRequest::controlled).
    let mut controlled = docket_core::local::ControlledBound::new(req.controlled);
    if q.max_running.is_some() || q.bucket.is_some() {
        budget = controlled.limited_queue_budget(budget);
    }
    if budget <= 0 {
        return Ok(None);
    }

    let mut chosen: Vec<i64> = Vec::new();
    let mut okeys: Vec<String> = Vec::new();
    let mut ckeys: HashMap<String, i64> = HashMap::new();
    let mut key_buckets: HashMap<String, (Bucket, f64)> = HashMap::new();
    // Passes: each further one leaves out the keys the earlier ones found held (see
    // docket_core::local::HeldKeys).
    let depth = i64::from(req.limit) * 4 + 200;
    let mut held = docket_core::local::HeldKeys::default();
    let mut rows = rows;
    loop {
        let read = rows.len();
        for (id, okey, ckey) in rows.drain(..) {
            if chosen.len() as i64 >= budget {
                break;
            }
            if chosen.contains(&id) {
                continue;
            }
            let keyed = okey.is_some() || ckey.is_some();
            if !controlled.allows(keyed) {
                continue;
            }
            if let Some(k) = &okey {
                // One job per ordering key per batch: a second one cannot be the head.
                if okeys.contains(k) {
                    continue;
                }
                if ordering_behind(c, k, id).await? {
                    held.ordering(k);
                    continue;
                }
            }
            if let Some(k) = &ckey {
                let limits = key_row(c, k).await?;
                let lim = limits
                    .as_ref()
                    .and_then(|l| l.max_running)
                    .or(q.key_max_running);
                let in_batch = ckeys.get(k).copied().unwrap_or(0);
                if let Some(lim) = lim {
                    if in_batch + key_running(c, k).await? >= i64::from(lim) {
                        held.concurrency(k);
                        continue;
                    }
                }
                if let Some(b) = limits.as_ref().and_then(|l| l.bucket) {
                    let tokens = b.tokens_at(now);
                    if tokens - (in_batch as f64) < 1.0 {
                        held.concurrency(k);
                        continue;
                    }
                    key_buckets.insert(k.clone(), (b, tokens));
                }
            }
            chosen.push(id);
            controlled.took(keyed);
            if let Some(k) = okey {
                okeys.push(k);
            }
            if let Some(k) = ckey {
                *ckeys.entry(k).or_default() += 1;
            }
        }
        if !held.another_pass(read, depth as usize, chosen.len(), budget.max(0) as usize) {
            break;
        }
        rows = past_held(c, &req.queue, now, depth, &held).await?;
    }
    if chosen.is_empty() {
        return Ok(None);
    }
    let ids = serde_json::to_string(&chosen).map_err(|e| StoreError::Database(Box::new(e)))?;
    let leased = sqlx::query(CLAIM_LEASE)
        .bind(&ids)
        .bind(&req.owner)
        .bind(now)
        .bind(ms(req.lease))
        .execute(&mut *c)
        .await
        .map_err(db_err)?
        .rows_affected();
    let text: String = sqlx::query_scalar(CLAIMED_ROWS)
        .bind(&ids)
        .bind(&req.owner)
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)?;
    let n = leased as f64;
    if let (Some(t), true) = (queue_tokens, n > 0.0) {
        sqlx::query(QUEUE_TOKENS_SPEND)
            .bind(&req.queue)
            .bind(t - n)
            .bind(now)
            .execute(&mut *c)
            .await
            .map_err(db_err)?;
    }
    for (k, (_, tokens)) in key_buckets {
        let spent = ckeys.get(&k).copied().unwrap_or(0) as f64;
        sqlx::query(KEY_TOKENS_SPEND)
            .bind(&k)
            .bind(tokens - spent)
            .bind(now)
            .execute(&mut *c)
            .await
            .map_err(db_err)?;
    }
    Ok(Some(Leased { text, chosen }))
}

impl SqliteStore {
    pub(crate) async fn claim_impl(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        validate::queue(&req.queue)?;
        if req.limit <= 0 {
            return Ok(Vec::new());
        }
        let (jobs, bad) = match self.claim_fast(req).await? {
            Some(decoded) => decoded,
            None => self.claim_full(req).await?,
        };
        if !bad.is_empty() {
            // A row written around validation (a time out of range, JSON that does not
            // parse) cannot run: it is failed at once, dead with the reason, so it can
            // neither stall this worker nor come back after its lease.
            for u in &bad {
                tracing::warn!(job = %u.lease.id, reason = %u.reason, "claimed a job whose row cannot be decoded; failing it");
            }
            let failures: Vec<Failure> = bad
                .into_iter()
                .map(|u| Failure {
                    lease: u.lease,
                    class: FailureClass::Discard,
                    message: format!("the stored job cannot be decoded: {}", u.reason),
                    retry_in: None,
                })
                .collect();
            self.fail_many_impl(&req.owner, &failures).await?;
        }
        Ok(jobs)
    }

    /// claim_fast.sql: one autocommit statement for a queue with nothing to decide. `None`
    /// when it leased nothing — an empty queue, or one whose controls or keyed jobs need
    /// the full claim (it wrote nothing then).
    async fn claim_fast(&self, req: &ClaimRequest) -> Result<Option<Decoded>> {
        let texts = self
            .write_alone_rows(|| {
                sqlx::query_scalar(CLAIM_FAST)
                    .bind(&req.queue)
                    .bind(i64::from(req.limit))
                    .bind(&req.owner)
                    .bind(ms(req.lease))
                    .bind(req.starvation.map(ms))
            })
            .await?;
        if texts.is_empty() {
            return Ok(None);
        }
        let (mut jobs, bad) = split(texts.iter().map(|t| crate::rows::claimed(t)));
        // RETURNING gives the rows in the order they were written: hand them out in the
        // claim's order.
        jobs.sort_by_key(|j| (j.priority, j.run_at, j.id.0));
        Ok(Some((jobs, bad)))
    }

    /// The claim that reads the queue's controls and decides key by key, in one `BEGIN
    /// IMMEDIATE` transaction.
    async fn claim_full(&self, req: &ClaimRequest) -> Result<Decoded> {
        // Not `write`: claim_context.sql reads the transaction's now itself (one statement
        // fewer while the writer is held).
        let mut tx = self.begin_write().await?;
        let leased = claim_in(tx.conn(), req).await?;
        tx.commit().await?;
        let Some(leased) = leased else {
            return Ok((Vec::new(), Vec::new()));
        };
        let (mut jobs, bad) = split(crate::rows::claimed_all(&leased.text)?);
        // Hand the jobs out in the order they were chosen.
        let pos: HashMap<i64, usize> = leased
            .chosen
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, i))
            .collect();
        jobs.sort_by_key(|j| pos.get(&j.id.0).copied().unwrap_or(usize::MAX));
        Ok((jobs, bad))
    }
}

/// Claimed jobs a handler can run, and those whose rows cannot be decoded.
type Decoded = (Vec<ClaimedJob>, Vec<crate::rows::Undecodable>);

fn split(
    rows: impl IntoIterator<Item = std::result::Result<ClaimedJob, crate::rows::Undecodable>>,
) -> Decoded {
    let mut jobs = Vec::new();
    let mut bad = Vec::new();
    for r in rows {
        match r {
            Ok(j) => jobs.push(j),
            Err(u) => bad.push(u),
        }
    }
    (jobs, bad)
}
