//! What a claim may take: PostgreSQL's `claim()` / `claim_controlled()` (docket-postgres
//! schema/current.sql) decided in Rust, over rows the engine read under its own locks. A
//! paused queue hands out nothing; a queue's `max_running` and rate bucket cap the batch;
//! jobs ready for longer than the starvation bound come first, oldest first, then the rest
//! by priority (the engine's candidate order); an ordering key runs one job at a time, in
//! id order, held by a dead head; a concurrency key runs at most its limit (the key's own,
//! else the queue's `key_max_running`) and spends its own rate bucket; controlled work
//! only for the claimer's free slots.
//!
//! The engine supplies how it reads and locks ([`ClaimTx`]): SQLite's one writer makes
//! every read final; MariaDB try-locks each key's row with SKIP LOCKED first.

use std::collections::HashMap;
use std::future::Future;

use docket_core::local::{Bucket, ControlledBound, HeldKeys};
use docket_core::*;

use crate::args;
use crate::engine::Engine;
use crate::exec::{Conn, Row};
use crate::rows::Undecodable;

/// A candidate job: (id, ordering key, concurrency key).
pub type Candidate = (i64, Option<String>, Option<String>);

/// A rate bucket read from a `queues` or `key_limits` row (none without a rate).
pub fn bucket_of(r: &Row) -> Result<Option<Bucket>> {
    let rate: Option<i32> = r.get("rate_limit")?;
    let period: Option<i64> = r.get("rate_period_ms")?;
    Ok(match (rate, period) {
        (Some(rate), Some(period_ms)) if period_ms > 0 => Some(Bucket {
            rate,
            period_ms,
            tokens: r.get("tokens")?,
            refilled_at: r.get("refilled_at")?,
        }),
        _ => None,
    })
}

/// A queue's controls as the claim reads them.
#[derive(Debug, Default, Clone)]
pub struct QueueRow {
    /// Set while the queue is paused (milliseconds since the epoch).
    pub paused_at: Option<i64>,
    /// At most this many of its jobs running at once.
    pub max_running: Option<i32>,
    /// At most this many running per concurrency key within the queue.
    pub key_max_running: Option<i32>,
    /// The queue's rate bucket, with a rate limit.
    pub bucket: Option<Bucket>,
}

impl QueueRow {
    /// A queue's controls from a row with queue_control.sql's columns (all NULL without a
    /// `queues` row).
    pub fn of(r: &Row) -> Result<QueueRow> {
        Ok(QueueRow {
            paused_at: r.get("paused_at")?,
            max_running: r.get("max_running")?,
            key_max_running: r.get("key_max_running")?,
            bucket: bucket_of(r)?,
        })
    }

    /// Whether claims of this queue must serialise on its limits.
    pub fn limited(&self) -> bool {
        self.max_running.is_some() || self.bucket.is_some()
    }
}

/// Reads `queue`'s controls (none: a queue without a row).
pub async fn queue_row<C: Conn>(c: &mut C, queue: &str) -> Result<QueueRow> {
    match c.fetch_optional("queue_control", args![queue]).await? {
        Some(r) => QueueRow::of(&r),
        None => Ok(QueueRow::default()),
    }
}

/// A concurrency key's limits.
pub struct KeyRow {
    /// At most this many of its jobs running at once.
    pub max_running: Option<i32>,
    /// The key's rate bucket, with a rate limit.
    pub bucket: Option<Bucket>,
}

/// Reads concurrency key `key`'s limits, if it has any.
pub async fn key_row<C: Conn>(c: &mut C, key: &str) -> Result<Option<KeyRow>> {
    let row = c.fetch_optional("key_limit", args![key]).await?;
    row.map(|r| {
        Ok(KeyRow {
            max_running: r.get("max_running")?,
            bucket: bucket_of(&r)?,
        })
    })
    .transpose()
}

/// Running jobs of `queue`.
pub async fn running_in_queue<C: Conn>(c: &mut C, queue: &str) -> Result<i64> {
    c.scalar("running_in_queue", args![queue]).await
}

/// Running jobs of concurrency key `key`, in every queue.
pub async fn key_running<C: Conn>(c: &mut C, key: &str) -> Result<i64> {
    c.scalar("key_running", args![key]).await
}

/// Whether an older unfinished (pending, running or dead) job of ordering key `key` than
/// job `id` exists.
pub async fn ordering_behind<C: Conn>(c: &mut C, key: &str, id: i64) -> Result<bool> {
    c.scalar("ordering_behind", args![key, id]).await
}

/// How an engine's claim transaction reads and locks.
pub trait ClaimTx: Conn {
    /// Takes key `k`'s lock (`o:` or `c:` + key) without waiting: false when another claim
    /// holds it (SQLite: always true, its writer is alone).
    fn try_key(&mut self, k: &str) -> impl Future<Output = Result<bool>> + Send;

    /// A further pass's candidates (candidates_past_held.sql): ready jobs of `queue` at
    /// `now`, past the keys in `held`, up to `depth`, in claim order (locked where the
    /// engine locks rows).
    fn past_held(
        &mut self,
        queue: &str,
        now: i64,
        depth: i64,
        held: &HeldKeys,
    ) -> impl Future<Output = Result<Vec<Candidate>>> + Send {
        async move {
            let rows = self
                .fetch_all(
                    "candidates_past_held",
                    args![queue, now, depth, &held.concurrency[..], &held.ordering[..]],
                )
                .await?;
            candidates_of(&rows)
        }
    }
}

/// Candidates from rows of (id, ordering_key, concurrency_key).
pub fn candidates_of(rows: &[Row]) -> Result<Vec<Candidate>> {
    rows.iter()
        .map(|r| {
            Ok((
                r.get("id")?,
                r.get("ordering_key")?,
                r.get("concurrency_key")?,
            ))
        })
        .collect()
}

/// How many jobs a claim may take: the request's limit, capped by the queue's free slots
/// and tokens (read after the engine's limit lock) and the controlled-work bound.
pub struct Budget {
    /// The most jobs this claim may take.
    pub n: i64,
    /// Tokens left in the queue's bucket, with a rate limit (spent by the claim).
    pub queue_tokens: Option<f64>,
    /// What controlled work (limits, keys) may still take.
    pub controlled: ControlledBound,
}

/// Works out a claim's [`Budget`] from its request, the queue's controls and `now`.
pub async fn budget<C: Conn>(
    c: &mut C,
    req: &ClaimRequest,
    q: &QueueRow,
    now: i64,
) -> Result<Budget> {
    let mut n = i64::from(req.limit);
    if let Some(max) = q.max_running {
        n = n.min(i64::from(max) - running_in_queue(c, &req.queue).await?);
    }
    let queue_tokens = q.bucket.map(|b| b.tokens_at(now));
    if let Some(t) = queue_tokens {
        n = n.min(t.floor() as i64);
    }
    let controlled = ControlledBound::new(req.controlled);
    if q.limited() {
        n = controlled.limited_queue_budget(n);
    }
    Ok(Budget {
        n,
        queue_tokens,
        controlled,
    })
}

/// The jobs chosen, in the order chosen, and what they spend.
#[derive(Debug, Default)]
pub struct Choice {
    /// Job ids, in claim order.
    pub chosen: Vec<i64>,
    /// Jobs chosen per concurrency key.
    pub ckeys: HashMap<String, i64>,
    /// Keys with a rate bucket, and their tokens at the claim's now.
    pub key_buckets: HashMap<String, f64>,
    /// Whether ready work was left for a key, a limit or the controlled-work bound (it may
    /// run once a running job ends: see [`docket_core::local::Hub`]).
    pub held_back: bool,
}

/// The first pass's candidates and how further passes look.
pub struct Candidates {
    /// In claim order: starving first, then ready.
    pub rows: Vec<Candidate>,
    /// Whether a ready job of the queue has a key (else one pass decides everything).
    pub keyed: bool,
    /// How far each pass looks.
    pub depth: i64,
}

/// Chooses from the candidates (and further passes past held keys while keyed) up to the
/// budget.
pub async fn choose<T: ClaimTx>(
    c: &mut T,
    req: &ClaimRequest,
    q: &QueueRow,
    now: i64,
    budget: &mut Budget,
    Candidates {
        mut rows,
        keyed,
        depth,
    }: Candidates,
) -> Result<Choice> {
    let mut out = Choice::default();
    let mut okeys: Vec<String> = Vec::new();
    // Passes: each further one leaves out the keys the earlier ones found held (see
    // docket_core::local::HeldKeys).
    let mut held = HeldKeys::default();
    loop {
        let read = rows.len();
        for (id, okey, ckey) in rows.drain(..) {
            if out.chosen.len() as i64 >= budget.n {
                break;
            }
            if out.chosen.contains(&id) {
                continue;
            }
            let is_keyed = okey.is_some() || ckey.is_some();
            if !budget.controlled.allows(is_keyed) {
                out.held_back = true;
                continue;
            }
            if let Some(k) = &okey {
                // One job per ordering key per batch: a second one cannot be the head.
                if okeys.contains(k) || !c.try_key(&format!("o:{k}")).await? {
                    out.held_back = true;
                    continue;
                }
                if ordering_behind(c, k, id).await? {
                    held.ordering(k);
                    out.held_back = true;
                    continue;
                }
            }
            if let Some(k) = &ckey {
                if !out.ckeys.contains_key(k) && !c.try_key(&format!("c:{k}")).await? {
                    out.held_back = true;
                    continue;
                }
                let limits = key_row(c, k).await?;
                let lim = limits
                    .as_ref()
                    .and_then(|l| l.max_running)
                    .or(q.key_max_running);
                let in_batch = out.ckeys.get(k).copied().unwrap_or(0);
                if let Some(lim) = lim {
                    if in_batch + key_running(c, k).await? >= i64::from(lim) {
                        held.concurrency(k);
                        out.held_back = true;
                        continue;
                    }
                }
                if let Some(b) = limits.as_ref().and_then(|l| l.bucket) {
                    let tokens = b.tokens_at(now);
                    if tokens - (in_batch as f64) < 1.0 {
                        held.concurrency(k);
                        out.held_back = true;
                        continue;
                    }
                    out.key_buckets.insert(k.clone(), tokens);
                }
            }
            out.chosen.push(id);
            budget.controlled.took(is_keyed);
            if let Some(k) = okey {
                okeys.push(k);
            }
            if let Some(k) = ckey {
                *out.ckeys.entry(k).or_default() += 1;
            }
        }
        let n = budget.n.max(0) as usize;
        if !keyed || !held.another_pass(read, depth as usize, out.chosen.len(), n) {
            break;
        }
        rows = c.past_held(&req.queue, now, depth, &held).await?;
    }
    Ok(out)
}

/// Spends the tokens of what `leased` jobs took: the queue's bucket and each key's.
pub async fn spend<C: Conn>(
    c: &mut C,
    req: &ClaimRequest,
    budget: &Budget,
    choice: &Choice,
    leased: usize,
    now: i64,
) -> Result<()> {
    let n = leased as f64;
    if let (Some(t), true) = (budget.queue_tokens, n > 0.0) {
        c.execute("queue_tokens_spend", args![&req.queue, t - n, now])
            .await?;
    }
    for (k, tokens) in &choice.key_buckets {
        let spent = choice.ckeys.get(k).copied().unwrap_or(0) as f64;
        c.execute("key_tokens_spend", args![k, tokens - spent, now])
            .await?;
    }
    Ok(())
}

/// Claimed jobs a handler can run, and those whose rows cannot be decoded.
pub type Decoded = (Vec<ClaimedJob>, Vec<Undecodable>);

/// Splits decoded rows into runnable jobs and undecodable ones.
pub fn split(
    rows: impl IntoIterator<Item = std::result::Result<ClaimedJob, Undecodable>>,
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

/// The end of every claim: a queue whose ready work was `held_back` is hinted when a running
/// job ends ([`docket_core::local::Hub`]; `since` is the hub's epoch read before the claim
/// decided, so an end during the claim hints at once); a row written around validation (a time out of
/// range, JSON that does not parse) cannot run: it is failed at once, dead with the reason,
/// so it can neither stall this worker nor come back after its lease. Returns the jobs that
/// can run.
pub async fn finish<E: Engine>(
    e: &E,
    req: &ClaimRequest,
    (held_back, since): (bool, u64),
    (jobs, bad): Decoded,
) -> Result<Vec<ClaimedJob>> {
    if held_back {
        e.hub().held_back(&req.queue, since);
    }
    let owner = &req.owner;
    if !bad.is_empty() {
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
        crate::writes::fail_many(e, owner, &failures).await?;
    }
    Ok(jobs)
}
