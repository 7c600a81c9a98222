//! The batch writes after a claim, in MariaDB's shape: the rows whose leases hold are
//! locked by primary key (fenced_select.sql) and written by id, each statement checking
//! the lease again by the server's clock after any lock wait; a completion is one
//! autocommit statement with the fence in its WHERE clause. What the fence refused is
//! explained by the shared rules ([`docket_local::writes`]).

use std::time::Duration;

use docket_core::*;
use docket_local::args;
use docket_local::engine::BatchWrites;
use docket_local::rows::ms;
use docket_local::writes::ids;
use docket_local::{Conn, Engine, Tx as _};

use crate::errors::db_err;
use crate::exec::Tx;
use crate::store::MySqlStore;

/// The leases of `leases` that `owner`'s claim still holds, locked until the transaction
/// ends, with whether a cancel was requested and the queue; only exact (id, attempt)
/// matches are kept — the fence.
pub(crate) async fn fenced<C: Conn>(
    c: &mut C,
    leases: &[Lease],
    owner: &str,
) -> Result<Vec<(Lease, bool, String)>> {
    let ids = ids(leases);
    let rows = c.fetch_all("fenced_select", args![&ids[..], owner]).await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let lease = Lease {
            id: JobId(r.get("id")?),
            attempt: r.get("attempt")?,
        };
        if leases.contains(&lease) {
            let cancel: Option<i64> = r.get("cancel_requested_at")?;
            out.push((lease, cancel.is_some(), r.get("queue")?));
        }
    }
    Ok(out)
}

impl BatchWrites for MySqlStore {
    async fn complete(&self, owner: &str, sorted: &[Lease]) -> Result<Vec<Lease>> {
        // One autocommit statement: the fence is in its WHERE clause.
        let now = docket_local::controls::now_ms(self).await?;
        let sql = crate::exec::sql("complete_fast")
            .unwrap_or_default()
            .replace("/*pairs*/", &vec!["(?, ?)"; sorted.len()].join(", "));
        let mut q = sqlx::query(&sql).bind(now).bind(owner);
        for l in sorted {
            q = q.bind(l.id.0).bind(l.attempt);
        }
        let n = q
            .execute(&self.inner.pool)
            .await
            .map_err(db_err)?
            .rows_affected();
        if n as usize == sorted.len() {
            return Ok(sorted.to_vec());
        }
        let ids = ids(sorted);
        let rows = self
            .reader()
            .fetch_all("complete_check", args![now, &ids[..]])
            .await?;
        let mut done = Vec::new();
        for r in &rows {
            let l = Lease {
                id: JobId(r.get("id")?),
                attempt: r.get("attempt")?,
            };
            if sorted.contains(&l) {
                done.push(l);
            }
        }
        done.sort();
        Ok(done)
    }

    /// Completes by deleting, in one transaction: lock the rows whose leases hold
    /// (fenced_select.sql), delete them, and when a lease ran out between the two, read
    /// which rows are left. Exact, unlike an autocommit DELETE, which could not tell
    /// afterwards whose rows it removed.
    async fn complete_delete(&self, owner: &str, sorted: &[Lease]) -> Result<Vec<Lease>> {
        let mut tx = Engine::begin(self).await?;
        let held: Vec<Lease> = fenced(&mut tx, sorted, owner)
            .await?
            .into_iter()
            .map(|(l, _, _)| l)
            .collect();
        if held.is_empty() {
            return Ok(held);
        }
        let held_ids = ids(&held);
        let n = tx
            .execute("complete_delete_apply", args![owner, &held_ids[..]])
            .await?;
        let done = if n as usize == held.len() {
            held
        } else {
            let left: Vec<i64> = tx
                .fetch_all("lease_status", args![&held_ids[..]])
                .await?
                .iter()
                .map(|r| r.get("id"))
                .collect::<Result<_>>()?;
            held.into_iter()
                .filter(|l| !left.contains(&l.id.0))
                .collect()
        };
        tx.commit().await?;
        Ok(done)
    }

    async fn snooze(&self, owner: &str, sorted: &[Snooze]) -> Result<(Vec<Lease>, Vec<String>)> {
        let leases: Vec<Lease> = sorted.iter().map(|s| s.lease).collect();
        let mut tx = Engine::begin(self).await?;
        let now = tx.now();
        let held = fenced(&mut tx, &leases, owner).await?;
        let mut done = Vec::with_capacity(held.len());
        let mut due: Vec<String> = Vec::new();
        for (l, _, queue) in held {
            let delay = sorted
                .iter()
                .find(|s| s.lease == l)
                .map_or(0, |s| ms(s.delay));
            let n = tx
                .execute("snooze_apply", args![now, now + delay, l.id.0, l.attempt])
                .await?;
            if n != 1 {
                continue;
            }
            if delay == 0 && !due.contains(&queue) {
                due.push(queue);
            }
            done.push(l);
        }
        tx.commit().await?;
        Ok((done, due))
    }

    async fn extend(
        &self,
        owner: &str,
        sorted: &[Lease],
        lease: Duration,
    ) -> Result<(Vec<(Lease, bool)>, i64)> {
        let mut tx = Engine::begin(self).await?;
        let until = tx.now() + ms(lease);
        let mut held = fenced(&mut tx, sorted, owner).await?;
        let apply = async |tx: &mut Tx, ls: &[Lease]| -> Result<u64> {
            if ls.is_empty() {
                return Ok(0);
            }
            let ids = ids(ls);
            tx.execute("heartbeat_apply", args![until, owner, &ids[..]])
                .await
        };
        let ls: Vec<Lease> = held.iter().map(|(l, _, _)| *l).collect();
        if apply(&mut tx, &ls).await? as usize != ls.len() {
            // Some expired between the fenced read and the write: find which (an extended
            // lease matches again, an expired one does not).
            let mut kept = Vec::with_capacity(held.len());
            for h in held {
                if apply(&mut tx, &[h.0]).await? == 1 {
                    kept.push(h);
                }
            }
            held = kept;
        }
        tx.commit().await?;
        Ok((held.into_iter().map(|(l, c, _)| (l, c)).collect(), until))
    }
}
