//! The batch writes after a claim, in SQLite's shape: the common case of a completion is one
//! all-or-nothing autocommit statement (no BEGIN, clock or COMMIT hand-offs); otherwise one
//! write transaction applies each batch from a JSON array of (id, attempt) pairs and reads
//! back which rows it wrote (fenced_state.sql). What the fence refused is explained by the
//! shared rules ([`docket_local::writes`]).

use std::time::Duration;

use docket_core::*;
use docket_local::args;
use docket_local::engine::BatchWrites;
use docket_local::rows::ms;
use docket_local::{Conn, Engine, Tx};

use crate::errors::corrupt;
use crate::store::{SqliteStore, WriteTx};

fn pairs(leases: &[Lease]) -> String {
    let v: Vec<(i64, i32)> = leases.iter().map(|l| (l.id.0, l.attempt)).collect();
    serde_json::to_string(&v).unwrap_or_else(|_| "[]".into())
}

/// One job's row after a fenced batch write (fenced_state.sql): id, attempt, state, owner,
/// lease expiry, finished_at, cancel requested.
type Fenced = (
    i64,
    i32,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    bool,
);

async fn fenced_state(tx: &mut WriteTx, leases: &[Lease]) -> Result<Vec<Fenced>> {
    let ids = docket_local::writes::ids(leases);
    let text: String = tx.scalar("fenced_state", args![&ids[..]]).await?;
    serde_json::from_str(&text).map_err(|e| corrupt(format!("fenced state: {e}")))
}

impl SqliteStore {
    /// Every lease still holds, and one autocommit statement (`complete_all.sql` or
    /// `complete_delete_all.sql`, parameters: pairs, owner, count) completes them all. It
    /// writes all or nothing, so when any lease was lost the caller's transaction sorts the
    /// batch out from the same rows. True when it wrote all.
    async fn all_or_nothing(
        &self,
        name: &'static str,
        owner: &str,
        sorted: &[Lease],
    ) -> Result<bool> {
        let json = pairs(sorted);
        let sql = crate::exec::text(name)?;
        let n = self
            .write_alone(|| {
                sqlx::query(sql)
                    .bind(json.as_str())
                    .bind(owner)
                    .bind(sorted.len() as i64)
            })
            .await?;
        Ok(n as usize == sorted.len())
    }
}

impl BatchWrites for SqliteStore {
    async fn complete(&self, owner: &str, sorted: &[Lease]) -> Result<Vec<Lease>> {
        if self.all_or_nothing("complete_all", owner, sorted).await? {
            return Ok(sorted.to_vec());
        }
        let mut tx = Engine::begin(self).await?;
        let now = tx.now();
        let n = tx
            .execute("complete_many", args![pairs(sorted).as_str(), owner, now])
            .await?;
        let done = if n as usize == sorted.len() {
            sorted.to_vec()
        } else {
            // Some were refused: the ones this transaction finished are succeeded by their
            // own attempt at this transaction's now.
            let state = fenced_state(&mut tx, sorted).await?;
            sorted
                .iter()
                .filter(|l| {
                    state.iter().any(|(id, att, st, _, _, fin, _)| {
                        *id == l.id.0 && *att == l.attempt && st == "succeeded" && *fin == Some(now)
                    })
                })
                .copied()
                .collect()
        };
        tx.commit().await?;
        Ok(done)
    }

    /// Completes by deleting: one all-or-nothing autocommit statement when every lease
    /// holds, else a write transaction that reads which leases hold and deletes exactly
    /// those.
    async fn complete_delete(&self, owner: &str, sorted: &[Lease]) -> Result<Vec<Lease>> {
        if self
            .all_or_nothing("complete_delete_all", owner, sorted)
            .await?
        {
            return Ok(sorted.to_vec());
        }
        let mut tx = Engine::begin(self).await?;
        let now = tx.now();
        // Read before the delete: a deleted row cannot say whose it was.
        let state = fenced_state(&mut tx, sorted).await?;
        let held: Vec<Lease> = sorted
            .iter()
            .filter(|l| {
                state.iter().any(|(id, att, st, own, exp, _, _)| {
                    *id == l.id.0
                        && *att == l.attempt
                        && st == "running"
                        && own.as_deref() == Some(owner)
                        && exp.is_some_and(|e| e > now)
                })
            })
            .copied()
            .collect();
        let n = tx
            .execute(
                "complete_delete_many",
                args![pairs(&held).as_str(), owner, now],
            )
            .await?;
        if n as usize != held.len() {
            // Nobody else writes inside this transaction; a mismatch is a bug.
            return Err(corrupt(format!(
                "deleted {n} of {} jobs whose leases held",
                held.len()
            )));
        }
        tx.commit().await?;
        Ok(held)
    }

    async fn snooze(&self, owner: &str, sorted: &[Snooze]) -> Result<(Vec<Lease>, Vec<String>)> {
        let triples: Vec<(i64, i32, i64)> = sorted
            .iter()
            .map(|s| (s.lease.id.0, s.lease.attempt, ms(s.delay)))
            .collect();
        let triples = serde_json::to_string(&triples).unwrap_or_default();
        let mut tx = Engine::begin(self).await?;
        let now = tx.now();
        let rows = tx
            .fetch_all("snooze_many", args![triples.as_str(), owner, now])
            .await?;
        tx.commit().await?;
        let mut done = Vec::with_capacity(rows.len());
        let mut due: Vec<String> = Vec::new();
        for r in &rows {
            let lease = Lease {
                id: JobId(r.get("id")?),
                attempt: r.get("attempt")?,
            };
            let released = sorted.iter().any(|s| s.lease == lease && s.delay.is_zero());
            let queue: String = r.get("queue")?;
            if released && !due.contains(&queue) {
                due.push(queue);
            }
            done.push(lease);
        }
        Ok((done, due))
    }

    async fn extend(
        &self,
        owner: &str,
        sorted: &[Lease],
        lease: Duration,
    ) -> Result<(Vec<(Lease, bool)>, i64)> {
        let mut tx = Engine::begin(self).await?;
        let now = tx.now();
        let until = now + ms(lease);
        tx.execute(
            "heartbeat",
            args![pairs(sorted).as_str(), owner, now, ms(lease)],
        )
        .await?;
        let state = fenced_state(&mut tx, sorted).await?;
        tx.commit().await?;
        let mut held = Vec::new();
        for l in sorted {
            let row = state.iter().find(|(id, att, st, o, exp, _, _)| {
                *id == l.id.0
                    && *att == l.attempt
                    && st == "running"
                    && o.as_deref() == Some(owner)
                    && *exp == Some(until)
            });
            if let Some((.., cancel)) = row {
                held.push((*l, *cancel));
            }
        }
        Ok((held, until))
    }
}
