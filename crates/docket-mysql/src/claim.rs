//! The claim on MariaDB / MySQL: one short transaction that locks the queue's row (shared,
//! or exclusive for a limited queue), reads its controls, locks candidate jobs with SKIP
//! LOCKED, and chooses by the shared rules ([`docket_local::claim`]) with each key's row
//! try-locked (SKIP LOCKED) before the key is decided; then leases and commits. Every count
//! is read after the lock that serialises it (READ COMMITTED: each statement sees what
//! committed before it).

use std::collections::HashMap;

use docket_core::*;
use docket_local::args;
use docket_local::claim::{self as rules, candidates_of, Candidate, Candidates, ClaimTx, QueueRow};
use docket_local::rows::{claimed_row, ms};
use docket_local::{Conn, Row};

use crate::errors::corrupt;
use crate::exec::Tx;
use crate::store::MySqlStore;

/// Takes queue `queue`'s lock row, shared or exclusive, creating it the first time.
pub(crate) async fn lock_queue(c: &mut Tx, queue: &str, exclusive: bool) -> Result<()> {
    let name = if exclusive {
        "queue_lock_exclusive"
    } else {
        "queue_lock_share"
    };
    for _ in 0..2 {
        if c.fetch_optional(name, args![queue]).await?.is_some() {
            return Ok(());
        }
        c.execute("queue_lock_ensure", args![queue]).await?;
    }
    Err(corrupt(format!(
        "the lock row of queue {queue:?} cannot be created"
    )))
}

impl ClaimTx for Tx {
    /// Tries the lock of key `k` (`o:` or `c:` + key) without waiting: false when another
    /// claim holds it.
    async fn try_key(&mut self, k: &str) -> Result<bool> {
        for _ in 0..2 {
            if self
                .fetch_optional("key_lock_try", args![k])
                .await?
                .is_some()
            {
                return Ok(true);
            }
            if self.scalar::<bool>("key_lock_exists", args![k]).await? {
                return Ok(false);
            }
            self.execute("key_lock_ensure", args![k]).await?;
        }
        Ok(false)
    }
}

/// The starving candidates (ready since before `until`), oldest first, locked: read plainly,
/// then locked by primary key (see candidates_starving.sql for why not in one statement).
async fn starving_candidates(
    c: &mut Tx,
    queue: &str,
    until: i64,
    n: i64,
) -> Result<Vec<Candidate>> {
    let ids: Vec<i64> = c
        .fetch_all("candidates_starving", args![queue, until, n])
        .await?
        .iter()
        .map(|r| r.first())
        .collect::<Result<_>>()?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let locked = c
        .fetch_all("candidates_lock", args![queue, until, &ids[..]])
        .await?;
    let mut locked: HashMap<i64, Candidate> = candidates_of(&locked)?
        .into_iter()
        .map(|c| (c.0, c))
        .collect();
    // In the plain read's order (oldest first); a job skipped by the lock is left out.
    Ok(ids
        .into_iter()
        .filter_map(|id| locked.remove(&id))
        .collect())
}

/// Chooses and leases up to `req.limit` jobs at the server's now.
async fn claim_in(c: &mut Tx, req: &ClaimRequest) -> Result<(Vec<Row>, bool)> {
    // The queue's lock first (shared), then everything the claim decides from, read after
    // it in one statement; a limited queue's claims also serialise on its limit row.
    lock_queue(c, &req.queue, false).await?;
    let bound = req.starvation.map(ms);
    let ctx = c
        .fetch_one("claim_context", args![&req.queue, bound])
        .await?;
    let mut now: i64 = ctx.get("now")?;
    let mut q = QueueRow::of(&ctx)?;
    let keyed: bool = ctx.get("keyed")?;
    let starving: bool = ctx.get("starving")?;
    if q.paused_at.is_some() {
        return Ok((Vec::new(), false));
    }
    if q.limited() {
        // Two claimers must never both see the last free slot: one at a time, and the counts
        // and bucket read after this lock.
        lock_queue(c, &format!("limit:{}", req.queue), true).await?;
        q = rules::queue_row(c, &req.queue).await?;
        // The clock read after the lock: a claim that waited for it must not refill the
        // buckets, nor stamp its jobs, with an instant before the previous claim's (the
        // same rule as PostgreSQL's migration 0028).
        if !docket_core::mutants::active(docket_core::mutants::Mutant::ClaimClockBeforeLock) {
            now = c.scalar("now", args![]).await?;
        }
    }
    let mut budget = rules::budget(c, req, &q, now).await?;
    if budget.n <= 0 {
        // A limit or the controlled-work bound is spent: ready work waits for a job to end.
        return Ok((Vec::new(), true));
    }
    // Unkeyed work is taken in order; keyed work is looked at further ahead, past jobs a key
    // holds back (the same depth as PostgreSQL's claim_controlled).
    let depth = if keyed { budget.n * 4 + 200 } else { budget.n };
    let mut rows = Vec::new();
    if let (Some(bound), true) = (bound, starving) {
        rows = starving_candidates(c, &req.queue, now - bound, depth).await?;
    }
    let ready = c
        .fetch_all("candidates_ready", args![&req.queue, now, depth])
        .await?;
    rows.extend(candidates_of(&ready)?);
    let first = Candidates { rows, keyed, depth };
    let choice = rules::choose(c, req, &q, now, &mut budget, first).await?;
    if choice.chosen.is_empty() {
        return Ok((Vec::new(), choice.held_back));
    }
    let chosen = &choice.chosen[..];
    c.execute("claim_lease", args![chosen, &req.owner, now, ms(req.lease)])
        .await?;
    let mut leased = c
        .fetch_all("claimed_rows", args![chosen, &req.owner])
        .await?;
    // Hand the jobs out in the order they were chosen.
    let pos: HashMap<i64, usize> = chosen.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    leased.sort_by_key(|r| {
        r.get::<i64>("id")
            .ok()
            .and_then(|id| pos.get(&id).copied())
            .unwrap_or(usize::MAX)
    });
    rules::spend(c, req, &budget, &choice, leased.len(), now).await?;
    Ok((leased, choice.held_back))
}

impl MySqlStore {
    pub(crate) async fn claim_impl(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        validate::queue(&req.queue)?;
        if req.limit <= 0 {
            return Ok(Vec::new());
        }
        let since = docket_local::Engine::hub(self).epoch();
        // Not `Engine::begin`: claim_context.sql reads the clock after the queue's lock.
        let tx = self
            .inner
            .pool
            .begin()
            .await
            .map_err(crate::errors::db_err)?;
        let mut tx = Tx { tx, now: 0 };
        let (rows, held_back) = claim_in(&mut tx, req).await?;
        docket_local::Tx::commit(tx).await?;
        let decoded = rules::split(rows.iter().map(claimed_row).collect::<Result<Vec<_>>>()?);
        rules::finish(self, req, (held_back, since), decoded).await
    }
}
