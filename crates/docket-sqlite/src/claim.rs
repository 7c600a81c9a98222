//! The claim on SQLite: one `BEGIN IMMEDIATE` transaction that reads the queue's controls
//! and its candidates in one statement (claim_context.sql), chooses by the shared rules
//! ([`docket_local::claim`]), leases and commits; SQLite's single writer makes every read
//! inside it final, so no key needs a lock of its own. A queue with nothing to decide is
//! claimed by one autocommit statement instead (claim_fast.sql).

use std::collections::HashMap;

use docket_core::*;
use docket_local::args;
use docket_local::claim::{self as rules, Candidate, ClaimTx, Decoded, QueueRow};
use docket_local::rows::{claimed, claimed_all, ms};
use docket_local::Conn;

use crate::errors::corrupt;
use crate::store::{SqliteStore, WriteTx};

fn candidates(r: &docket_local::Row, column: &str) -> Result<Vec<Candidate>> {
    let text: String = r.get(column)?;
    serde_json::from_str(&text).map_err(|e| corrupt(format!("claim candidates: {e}")))
}

impl ClaimTx for WriteTx {
    async fn try_key(&mut self, _k: &str) -> Result<bool> {
        // The file's write lock is this transaction's: nobody else decides a key now.
        Ok(true)
    }
}

/// What a claim leased: claimed_rows.sql's one row, and the ids in the order they were
/// chosen. Decoded after the write transaction has committed, so the single writer is not
/// held while JSON is parsed.
struct Leased {
    text: String,
    chosen: Vec<i64>,
}

/// Chooses and leases up to `req.limit` jobs at the database's now (read by
/// claim_context.sql, the transaction's first statement).
async fn claim_in(tx: &mut WriteTx, req: &ClaimRequest) -> Result<(Option<Leased>, bool)> {
    let r = tx
        .fetch_one(
            "claim_context",
            args![&req.queue, req.limit, req.starvation.map(ms)],
        )
        .await?;
    let now: i64 = r.get("now")?;
    let q = QueueRow::of(&r)?;
    let mut rows = candidates(&r, "starving")?;
    rows.extend(candidates(&r, "ready")?);
    if q.paused_at.is_some() {
        return Ok((None, false));
    }
    let mut budget = rules::budget(tx, req, &q, now).await?;
    if budget.n <= 0 {
        // A limit or the controlled-work bound is spent: ready work waits for a job to end.
        return Ok((None, !rows.is_empty()));
    }
    let depth = i64::from(req.limit) * 4 + 200;
    let first = rules::Candidates {
        rows,
        keyed: true,
        depth,
    };
    let choice = rules::choose(tx, req, &q, now, &mut budget, first).await?;
    if choice.chosen.is_empty() {
        return Ok((None, choice.held_back));
    }
    let chosen = &choice.chosen[..];
    let leased = tx
        .execute("claim_lease", args![chosen, &req.owner, now, ms(req.lease)])
        .await?;
    let text: String = tx.scalar("claimed_rows", args![chosen, &req.owner]).await?;
    rules::spend(tx, req, &budget, &choice, leased as usize, now).await?;
    let held_back = choice.held_back;
    Ok((
        Some(Leased {
            text,
            chosen: choice.chosen,
        }),
        held_back,
    ))
}

impl SqliteStore {
    pub(crate) async fn claim_impl(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        validate::queue(&req.queue)?;
        if req.limit <= 0 {
            return Ok(Vec::new());
        }
        let since = docket_local::Engine::hub(self).epoch();
        let (decoded, held_back) = match self.claim_fast(req).await? {
            Some(decoded) => (decoded, false),
            None => self.claim_full(req).await?,
        };
        rules::finish(self, req, (held_back, since), decoded).await
    }

    /// claim_fast.sql: one autocommit statement for a queue with nothing to decide. `None`
    /// when it leased nothing — an empty queue, or one whose controls or keyed jobs need
    /// the full claim (it wrote nothing then).
    async fn claim_fast(&self, req: &ClaimRequest) -> Result<Option<Decoded>> {
        let sql = crate::exec::text("claim_fast")?;
        let texts = self
            .write_alone_rows(|| {
                sqlx::query_scalar(sql)
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
        let (mut jobs, bad) = rules::split(texts.iter().map(|t| claimed(t)));
        // RETURNING gives the rows in the order they were written: hand them out in the
        // claim's order.
        jobs.sort_by_key(|j| (j.priority, j.run_at, j.id.0));
        Ok(Some((jobs, bad)))
    }

    /// The claim that reads the queue's controls and decides key by key, in one `BEGIN
    /// IMMEDIATE` transaction.
    async fn claim_full(&self, req: &ClaimRequest) -> Result<(Decoded, bool)> {
        // Not `Engine::begin`: claim_context.sql reads the transaction's now itself (one
        // statement fewer while the writer is held).
        let mut tx = self.begin_write().await?;
        let (leased, held_back) = claim_in(&mut tx, req).await?;
        tx.commit().await?;
        let Some(leased) = leased else {
            return Ok(((Vec::new(), Vec::new()), held_back));
        };
        let (mut jobs, bad) = rules::split(claimed_all(&leased.text)?);
        // Hand the jobs out in the order they were chosen.
        let pos: HashMap<i64, usize> = leased
            .chosen
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, i))
            .collect();
        jobs.sort_by_key(|j| pos.get(&j.id.0).copied().unwrap_or(usize::MAX));
        Ok(((jobs, bad), held_back))
    }
}
