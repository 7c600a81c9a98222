//! Handlers whose writes commit with their job's completion ([`InTransaction`]), and jobs
//! enqueued inside such a transaction.
//!
//! The servers have no notification that waits for a commit, so the transaction type
//! carries what it enqueued: [`MySqlTx::commit`] wakes this process's workers for those
//! queues after the commit, and [`InTransaction::enqueued_in`] reads its own list.

use docket_core::*;
use sqlx::mysql::MySqlConnection;
use sqlx::MySql;

use docket_local::{args, Conn};

use crate::errors::db_err;
use crate::exec::Caller;
use crate::store::{in_own_task, set_idle_bound, MySqlStore, IDLE_TRANSACTION_TIMEOUT_S};
use crate::writes::fenced;

/// An open transaction: the connection a handler writes through, and what it enqueued.
#[derive(Debug)]
pub struct MySqlTx {
    /// Open until [`MySqlTx::commit`] or [`MySqlTx::rollback`] takes it (or the drop does).
    tx: Option<sqlx::Transaction<'static, MySql>>,
    store: MySqlStore,
    enqueued: Vec<(i64, String)>,
}

impl MySqlTx {
    /// The connection to write through.
    pub fn conn(&mut self) -> &mut MySqlConnection {
        self.open()
    }

    fn open(&mut self) -> &mut sqlx::Transaction<'static, MySql> {
        self.tx.as_mut().expect("open until commit or rollback")
    }

    /// Enqueues inside this transaction (the job exists iff it commits; this process's
    /// workers are woken at the commit).
    pub async fn enqueue(&mut self, job: &NewJob) -> Result<Enqueued> {
        let store = self.store.clone();
        let e = store.enqueue_tx(self.open(), job).await?;
        if !e.duplicate {
            self.enqueued.push((e.id.0, job.queue.clone()));
        }
        Ok(e)
    }

    /// Commits, then wakes this process's workers for the queues it enqueued to.
    pub async fn commit(mut self) -> Result<()> {
        let tx = self.tx.take().expect("open until commit or rollback");
        in_own_task(end(tx, true)).await?.map_err(db_err)?;
        let mut queues: Vec<&String> = self.enqueued.iter().map(|(_, q)| q).collect();
        queues.sort();
        queues.dedup();
        for q in queues {
            self.store.wake(q);
        }
        Ok(())
    }

    /// Rolls back (nothing it enqueued exists, nobody is woken).
    pub async fn rollback(mut self) -> Result<()> {
        let tx = self.tx.take().expect("open until commit or rollback");
        in_own_task(end(tx, false)).await?.map_err(db_err)
    }
}

/// Ends a handler's transaction: restores the connection's idle bound (lifted at `begin`),
/// then commits or rolls back. Run in a task of its own (see `MySqlStore::detached`): a
/// caller dropped mid-COMMIT must not strand the connection.
async fn end(
    mut tx: sqlx::Transaction<'static, MySql>,
    commit: bool,
) -> std::result::Result<(), sqlx::Error> {
    set_idle_bound(&mut tx, IDLE_TRANSACTION_TIMEOUT_S).await?;
    if commit {
        tx.commit().await
    } else {
        tx.rollback().await
    }
}

impl Drop for MySqlTx {
    /// A transaction dropped unended (a panicking handler, a cancelled future) is rolled
    /// back as sqlx would, but by [`end`] in a task, so the connection goes back to the pool
    /// with its idle bound: Docket's own transactions on it must be ended by the server if
    /// their worker is cut off (see `store::IDLE_TRANSACTION_TIMEOUT_S`). On an error the
    /// connection is broken, and dropping it closes it.
    fn drop(&mut self) {
        if let (Some(tx), Ok(rt)) = (self.tx.take(), tokio::runtime::Handle::try_current()) {
            rt.spawn(end(tx, false));
        }
    }
}

impl InTransaction for MySqlStore {
    type Tx = MySqlTx;
    type Conn = MySqlTx;

    async fn begin(&self) -> Result<MySqlTx> {
        // In a task of its own, like every store call (see `MySqlStore::detached`): a
        // caller dropped mid-BEGIN must not strand the connection.
        // The connection's idle-in-transaction bound is lifted for the handler's transaction
        // (the user's code may rightly pause between its statements) and restored before it
        // ends (see `store::IDLE_TRANSACTION_TIMEOUT_S`).
        let pool = self.inner.pool.clone();
        let tx = in_own_task(async move {
            let mut conn = pool.acquire().await?;
            set_idle_bound(&mut conn, 0).await?;
            sqlx::Transaction::begin(conn, None).await
        })
        .await?;
        Ok(MySqlTx {
            tx: Some(tx.map_err(db_err)?),
            store: self.clone(),
            enqueued: Vec::new(),
        })
    }

    fn conn(tx: &mut MySqlTx) -> &mut MySqlTx {
        tx
    }

    async fn complete_in(&self, tx: &mut MySqlTx, owner: &str, lease: Lease) -> Result<()> {
        let mut c = Caller(tx.conn());
        let now: i64 = c.scalar("now", args![]).await?;
        let held = fenced(&mut c, &[lease], owner).await?;
        if held.is_empty() {
            let out = docket_local::writes::lease_lost(self, lease)
                .await
                .unwrap_or(LeaseLost {
                    lease,
                    reason: LostReason::Expired,
                });
            return Err(out.into());
        }
        let n = c
            .execute("complete_apply", args![now, owner, &[lease.id.0][..]])
            .await?;
        if n != 1 {
            return Err(LeaseLost {
                lease,
                reason: LostReason::Expired,
            }
            .into());
        }
        // A workflow node's children and a batch member's count, in this transaction.
        let mut ready = std::collections::BTreeSet::new();
        docket_local::workflow::ended_in_caller(
            &mut c,
            now,
            lease.id,
            JobState::Succeeded,
            &mut ready,
        )
        .await?;
        for q in ready {
            tx.enqueued.push((lease.id.0, q));
        }
        Ok(())
    }

    async fn complete_output_in(
        &self,
        tx: &mut MySqlTx,
        owner: &str,
        output: &Output,
    ) -> Result<()> {
        docket_local::outputs::complete_output_on(self, &mut Caller(tx.conn()), owner, output).await
    }

    async fn commit(tx: MySqlTx) -> Result<()> {
        tx.commit().await
    }

    async fn rollback(tx: MySqlTx) -> Result<()> {
        tx.rollback().await
    }

    async fn signal_in(
        &self,
        conn: &mut MySqlTx,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<SignalSent> {
        let mut c = Caller(conn.conn());
        let now: i64 = c.scalar("now", args![]).await?;
        let (sent, _) = docket_local::signals::signal_on(&mut c, now, id, name, payload).await?;
        Ok(sent)
    }

    async fn enqueue_workflow_in(
        &self,
        conn: &mut MySqlTx,
        graph: &docket_core::workflow::Graph,
    ) -> Result<docket_core::WorkflowEnqueued> {
        let mut due = std::collections::BTreeSet::new();
        let mut c = Caller(conn.conn());
        let now: i64 = c.scalar("now", args![]).await?;
        let out = docket_local::workflow::enqueue_on(
            &mut c,
            docket_local::Engine::limits(self),
            now,
            graph,
            &mut due,
        )
        .await?;
        // The roots' queues are woken when the transaction commits, as for enqueue_in.
        let root = out.jobs.first().map(|(_, id)| id.0).unwrap_or_default();
        for q in due {
            conn.enqueued.push((root, q));
        }
        Ok(out)
    }

    async fn open_batch_in(
        &self,
        conn: &mut MySqlTx,
        spec: &docket_core::batches::BatchSpec,
    ) -> Result<docket_core::batches::BatchOpened> {
        let mut due = std::collections::BTreeSet::new();
        let mut c = Caller(conn.conn());
        let now: i64 = c.scalar("now", args![]).await?;
        let limits = docket_local::Engine::limits(self);
        let out = docket_local::batches::open_on(&mut c, limits, now, spec, &mut due).await?;
        // The members' queues are woken when the transaction commits, as for enqueue_in.
        let first = out.jobs.first().map(|id| id.0).unwrap_or_default();
        for q in due {
            conn.enqueued.push((first, q));
        }
        Ok(out)
    }

    async fn add_to_batch_in(
        &self,
        conn: &mut MySqlTx,
        id: i64,
        jobs: &[docket_core::batches::JobSpec],
    ) -> Result<Vec<JobId>> {
        let mut due = std::collections::BTreeSet::new();
        let mut c = Caller(conn.conn());
        let now: i64 = c.scalar("now", args![]).await?;
        let limits = docket_local::Engine::limits(self);
        let out =
            docket_local::batches::add_checked_on(&mut c, limits, now, id, jobs, &mut due).await?;
        let first = out.first().map(|id| id.0).unwrap_or_default();
        for q in due {
            conn.enqueued.push((first, q));
        }
        Ok(out)
    }

    async fn publish_in(
        &self,
        conn: &mut MySqlTx,
        msg: &docket_core::outbox::NewMessage,
    ) -> Result<i64> {
        let mut c = Caller(conn.conn());
        let now: i64 = c.scalar("now", args![]).await?;
        docket_local::outbox::publish_on(&mut c, now, msg).await
    }

    async fn enqueue_in(&self, conn: &mut MySqlTx, job: &NewJob) -> Result<Enqueued> {
        conn.enqueue(job).await
    }

    async fn enqueued_in(&self, conn: &mut MySqlTx, kind: &str) -> Result<Vec<serde_json::Value>> {
        let ids: Vec<i64> = conn.enqueued.iter().map(|(id, _)| *id).collect();
        let mut out = Vec::new();
        for id in ids {
            let row = Caller(conn.conn())
                .fetch_optional("enqueued_in", args![id])
                .await?;
            if let Some(r) = row {
                if r.get::<String>("kind")? == kind {
                    out.push(docket_local::rows::json(&r, "args")?);
                }
            }
        }
        Ok(out)
    }
}
