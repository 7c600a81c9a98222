//! The claim: one short transaction that locks the queue's row (shared, or exclusive for a
//! limited queue), reads its controls, locks candidate jobs with SKIP LOCKED, decides keys
//! under a SKIP LOCKED try-lock of each key's row, leases the chosen jobs and commits.
//!
//! The rules are PostgreSQL's `claim()` / `claim_controlled()` (docket-postgres
//! schema/current.sql), decided here in Rust; every count is read after the lock that
//! serialises it (READ COMMITTED: each statement sees what committed before it). A paused
//! queue hands out nothing; a queue's `max_running`
//! and rate bucket cap the batch; jobs ready for longer than the starvation bound come first,
//! oldest first, then the rest by priority; an ordering key runs one job at a time, in id
//! order, held by a dead head; a concurrency key runs at most its limit (the key's own, else
//! the queue's `key_max_running`) and spends its own rate bucket.

use std::collections::HashMap;

use docket_core::*;
use sqlx::mysql::{MySqlConnection, MySqlRow};
use sqlx::Row;

use crate::errors::db_err;
use crate::store::{ms, MySqlStore};

const QUEUE_CONTROL: &str = include_str!("../sql/queue_control.sql");
const RUNNING_IN_QUEUE: &str = include_str!("../sql/running_in_queue.sql");
const CLAIM_CONTEXT: &str = include_str!("../sql/claim_context.sql");
const CANDIDATES_READY: &str = include_str!("../sql/candidates_ready.sql");
const CANDIDATES_PAST_HELD: &str = include_str!("../sql/candidates_past_held.sql");
const CANDIDATES_STARVING: &str = include_str!("../sql/candidates_starving.sql");
const CANDIDATES_LOCK: &str = include_str!("../sql/candidates_lock.sql");
const ORDERING_BEHIND: &str = include_str!("../sql/ordering_behind.sql");
const KEY_LIMIT: &str = include_str!("../sql/key_limit.sql");
const KEY_RUNNING: &str = include_str!("../sql/key_running.sql");
const CLAIM_LEASE: &str = include_str!("../sql/claim_lease.sql");
const CLAIMED_ROWS: &str = include_str!("../sql/claimed_rows.sql");
const QUEUE_LOCK_SHARE: &str = include_str!("../sql/queue_lock_share.sql");
const QUEUE_LOCK_EXCLUSIVE: &str = include_str!("../sql/queue_lock_exclusive.sql");
const QUEUE_LOCK_ENSURE: &str = include_str!("../sql/queue_lock_ensure.sql");
const KEY_LOCK_TRY: &str = include_str!("../sql/key_lock_try.sql");
const KEY_LOCK_EXISTS: &str = include_str!("../sql/key_lock_exists.sql");
const KEY_LOCK_ENSURE: &str = include_str!("../sql/key_lock_ensure.sql");
const QUEUE_TOKENS_SPEND: &str = include_str!("../sql/queue_tokens_spend.sql");
const KEY_TOKENS_SPEND: &str = include_str!("../sql/key_tokens_spend.sql");

pub(crate) use docket_core::local::Bucket;

/// A rate bucket read from a `queues` or `key_limits` row (none without a rate).
pub(crate) fn bucket_of(r: &MySqlRow) -> Result<Option<Bucket>> {
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

pub(crate) async fn queue_row(c: &mut MySqlConnection, queue: &str) -> Result<QueueRow> {
    let row = sqlx::query(QUEUE_CONTROL)
        .bind(queue)
        .fetch_optional(&mut *c)
        .await
        .map_err(db_err)?;
    let Some(r) = row else {
        return Ok(QueueRow::default());
    };
    Ok(QueueRow {
        paused_at: r.try_get("paused_at").map_err(db_err)?,
        max_running: r.try_get("max_running").map_err(db_err)?,
        key_max_running: r.try_get("key_max_running").map_err(db_err)?,
        bucket: bucket_of(&r)?,
    })
}

/// A concurrency key's limits.
pub(crate) struct KeyRow {
    pub max_running: Option<i32>,
    pub bucket: Option<Bucket>,
}

pub(crate) async fn key_row(c: &mut MySqlConnection, key: &str) -> Result<Option<KeyRow>> {
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

pub(crate) async fn count(c: &mut MySqlConnection, sql: &str, key: &str) -> Result<i64> {
    sqlx::query_scalar(sql)
        .bind(key)
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)
}

pub(crate) async fn running_in_queue(c: &mut MySqlConnection, queue: &str) -> Result<i64> {
    count(c, RUNNING_IN_QUEUE, queue).await
}

pub(crate) async fn key_running(c: &mut MySqlConnection, key: &str) -> Result<i64> {
    count(c, KEY_RUNNING, key).await
}

pub(crate) async fn ordering_behind(c: &mut MySqlConnection, key: &str, id: i64) -> Result<bool> {
    sqlx::query_scalar(ORDERING_BEHIND)
        .bind(key)
        .bind(id)
        .bind(key)
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)
}

/// `sql` with its `/*ids*/` marker expanded to `n` bound placeholders.
pub(crate) fn with_ids(sql: &str, n: usize) -> String {
    let marks = vec!["?"; n.max(1)].join(", ");
    sql.replace("/*ids*/", &marks)
}

/// Takes queue `queue`'s lock row, shared or exclusive, creating it the first time.
pub(crate) async fn lock_queue(
    c: &mut MySqlConnection,
    queue: &str,
    exclusive: bool,
) -> Result<()> {
    let sql = if exclusive {
        QUEUE_LOCK_EXCLUSIVE
    } else {
        QUEUE_LOCK_SHARE
    };
    for _ in 0..2 {
        let got: Option<i64> = sqlx::query_scalar(sql)
            .bind(queue)
            .fetch_optional(&mut *c)
            .await
            .map_err(db_err)?;
        if got.is_some() {
            return Ok(());
        }
        sqlx::query(QUEUE_LOCK_ENSURE)
            .bind(queue)
            .execute(&mut *c)
            .await
            .map_err(db_err)?;
    }
    Err(crate::errors::corrupt(format!(
        "the lock row of queue {queue:?} cannot be created"
    )))
}

/// Tries the lock of key `k` (`o:` or `c:` + key) without waiting: false when another
/// claim holds it.
async fn try_key(c: &mut MySqlConnection, k: &str) -> Result<bool> {
    for _ in 0..2 {
        let got: Option<i64> = sqlx::query_scalar(KEY_LOCK_TRY)
            .bind(k)
            .fetch_optional(&mut *c)
            .await
            .map_err(db_err)?;
        if got.is_some() {
            return Ok(true);
        }
        let exists: bool = sqlx::query_scalar(KEY_LOCK_EXISTS)
            .bind(k)
            .fetch_one(&mut *c)
            .await
            .map_err(db_err)?;
        if exists {
            return Ok(false);
        }
        sqlx::query(KEY_LOCK_ENSURE)
            .bind(k)
            .execute(&mut *c)
            .await
            .map_err(db_err)?;
    }
    Ok(false)
}

type Candidate = (i64, Option<String>, Option<String>);
type RawCandidate = (i64, Option<crate::rows::Txt>, Option<crate::rows::Txt>);

fn candidate((id, o, k): RawCandidate) -> Candidate {
    (id, o.map(|t| t.0), k.map(|t| t.0))
}

/// Ready candidates in claim order, locked (candidates_ready.sql).
async fn ready_candidates(
    c: &mut MySqlConnection,
    queue: &str,
    until: i64,
    n: i64,
) -> Result<Vec<Candidate>> {
    let rows: Vec<RawCandidate> = sqlx::query_as(CANDIDATES_READY)
        .bind(queue)
        .bind(until)
        .bind(n)
        .fetch_all(&mut *c)
        .await
        .map_err(db_err)?;
    Ok(rows.into_iter().map(candidate).collect())
}

/// A further pass's candidates (candidates_past_held.sql), locked.
async fn past_held(
    c: &mut MySqlConnection,
    queue: &str,
    now: i64,
    n: i64,
    held: &docket_core::local::HeldKeys,
) -> Result<Vec<Candidate>> {
    let marks = |k: &Vec<String>| vec!["?"; k.len().max(1)].join(", ");
    let sql = CANDIDATES_PAST_HELD
        .replace("/*ckeys*/", &marks(&held.concurrency))
        .replace("/*okeys*/", &marks(&held.ordering));
    let mut q = sqlx::query_as::<_, RawCandidate>(&sql)
        .bind(queue)
        .bind(now);
    for keys in [&held.concurrency, &held.ordering] {
        if keys.is_empty() {
            q = q.bind("");
        }
        for k in keys {
            q = q.bind(k);
        }
    }
    let rows: Vec<RawCandidate> = q.bind(n).fetch_all(&mut *c).await.map_err(db_err)?;
    Ok(rows.into_iter().map(candidate).collect())
}

/// The starving candidates (ready since before `until`), oldest first, locked: read plainly,
/// then locked by primary key (see candidates_starving.sql for why not in one statement).
async fn starving_candidates(
    c: &mut MySqlConnection,
    queue: &str,
    until: i64,
    n: i64,
) -> Result<Vec<Candidate>> {
    let ids: Vec<i64> = sqlx::query_scalar(CANDIDATES_STARVING)
        .bind(queue)
        .bind(until)
        .bind(n)
        .fetch_all(&mut *c)
        .await
        .map_err(db_err)?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = with_ids(CANDIDATES_LOCK, ids.len());
    let mut q = sqlx::query_as::<_, RawCandidate>(&sql)
        .bind(queue)
        .bind(until);
    for id in &ids {
        q = q.bind(id);
    }
    let mut locked: HashMap<i64, Candidate> = q
        .fetch_all(&mut *c)
        .await
        .map_err(db_err)?
        .into_iter()
        .map(|r| (r.0, candidate(r)))
        .collect();
    // In the plain read's order (oldest first); a job skipped by the lock is left out.
    Ok(ids
        .into_iter()
        .filter_map(|id| locked.remove(&id))
        .collect())
}

/// Chooses and leases up to `req.limit` jobs at database time `now`.
async fn claim_in(c: &mut MySqlConnection, req: &ClaimRequest) -> Result<Vec<MySqlRow>> {
    // The queue's lock first (shared), then everything the claim decides from, read after
    // it in one statement; a limited queue's claims also serialise on its limit row.
    lock_queue(c, &req.queue, false).await?;
    let bound = req.starvation.map(ms);
    let ctx = sqlx::query(CLAIM_CONTEXT)
        .bind(&req.queue)
        .bind(bound)
        .bind(&req.queue)
        .bind(bound)
        .bind(&req.queue)
        .fetch_one(&mut *c)
        .await
        .map_err(db_err)?;
    let now: i64 = ctx.try_get("now").map_err(db_err)?;
    let mut q = QueueRow {
        paused_at: ctx.try_get("paused_at").map_err(db_err)?,
        max_running: ctx.try_get("max_running").map_err(db_err)?,
        key_max_running: ctx.try_get("key_max_running").map_err(db_err)?,
        bucket: if ctx
            .try_get::<Option<i32>, _>("rate_limit")
            .map_err(db_err)?
            .is_some()
        {
            bucket_of(&ctx)?
        } else {
            None
        },
    };
    let keyed: bool = ctx.try_get("keyed").map_err(db_err)?;
    let starving: bool = ctx.try_get("starving").map_err(db_err)?;
    if q.paused_at.is_some() {
        return Ok(Vec::new());
    }
    if q.max_running.is_some() || q.bucket.is_some() {
        // Two claimers must never both see the last free slot: one at a time, and the counts
        // and bucket read after this lock.
        lock_queue(c, &format!("limit:{}", req.queue), true).await?;
        q = queue_row(c, &req.queue).await?;
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
        return Ok(Vec::new());
    }
    // Unkeyed work is taken in order; keyed work is looked at further ahead, past jobs a key
    // holds back (the same depth as PostgreSQL's claim_controlled).
    let depth = if keyed { budget * 4 + 200 } else { budget };
    let mut rows = Vec::new();
    if let (Some(bound), true) = (bound, starving) {
        rows = starving_candidates(c, &req.queue, now - bound, depth).await?;
    }
    rows.extend(ready_candidates(c, &req.queue, now, depth).await?);

    let mut chosen: Vec<i64> = Vec::new();
    let mut okeys: Vec<String> = Vec::new();
    let mut ckeys: HashMap<String, i64> = HashMap::new();
    let mut key_buckets: HashMap<String, (Bucket, f64)> = HashMap::new();
    // Passes: each further one leaves out the keys the earlier ones found held (see
    // docket_core::local::HeldKeys).
    let mut held = docket_core::local::HeldKeys::default();
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
                if okeys.contains(k) || !try_key(c, &format!("o:{k}")).await? {
                    continue;
                }
                if ordering_behind(c, k, id).await? {
                    held.ordering(k);
                    continue;
                }
            }
            if let Some(k) = &ckey {
                if !ckeys.contains_key(k) && !try_key(c, &format!("c:{k}")).await? {
                    continue;
                }
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
        if !keyed || !held.another_pass(read, depth as usize, chosen.len(), budget.max(0) as usize)
        {
            break;
        }
        rows = past_held(c, &req.queue, now, depth, &held).await?;
    }
    if chosen.is_empty() {
        return Ok(Vec::new());
    }
    let lease_sql = with_ids(CLAIM_LEASE, chosen.len());
    let mut q_lease = sqlx::query(&lease_sql)
        .bind(&req.owner)
        .bind(now)
        .bind(now)
        .bind(ms(req.lease));
    for id in &chosen {
        q_lease = q_lease.bind(id);
    }
    q_lease.execute(&mut *c).await.map_err(db_err)?;
    let rows_sql = with_ids(CLAIMED_ROWS, chosen.len());
    let mut q_rows = sqlx::query(&rows_sql).bind(&req.owner);
    for id in &chosen {
        q_rows = q_rows.bind(id);
    }
    let mut leased = q_rows.fetch_all(&mut *c).await.map_err(db_err)?;
    // Hand the jobs out in the order they were chosen.
    let pos: HashMap<i64, usize> = chosen.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    leased.sort_by_key(|r| {
        r.try_get::<i64, _>("id")
            .ok()
            .and_then(|id| pos.get(&id).copied())
            .unwrap_or(usize::MAX)
    });
    let n = leased.len() as f64;
    if let (Some(t), true) = (queue_tokens, n > 0.0) {
        sqlx::query(QUEUE_TOKENS_SPEND)
            .bind(t - n)
            .bind(now)
            .bind(&req.queue)
            .execute(&mut *c)
            .await
            .map_err(db_err)?;
    }
    for (k, (_, tokens)) in key_buckets {
        let spent = ckeys.get(&k).copied().unwrap_or(0) as f64;
        sqlx::query(KEY_TOKENS_SPEND)
            .bind(tokens - spent)
            .bind(now)
            .bind(&k)
            .execute(&mut *c)
            .await
            .map_err(db_err)?;
    }
    Ok(leased)
}

impl MySqlStore {
    pub(crate) async fn claim_impl(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        validate::queue(&req.queue)?;
        if req.limit <= 0 {
            return Ok(Vec::new());
        }
        let rows = self
            .write_bare(async |c: &mut MySqlConnection| claim_in(c, req).await)
            .await?;
        let mut jobs = Vec::with_capacity(rows.len());
        let mut bad = Vec::new();
        for r in &rows {
            match crate::rows::claimed(r)? {
                Ok(j) => jobs.push(j),
                Err(u) => bad.push(u),
            }
        }
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
}
