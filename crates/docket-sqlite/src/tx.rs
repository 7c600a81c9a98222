//! Jobs inside the application's own SQLite transaction, and handlers whose writes commit
//! with their job's completion ([`InTransaction`]).
//!
//! SQLite has no NOTIFY that waits for a commit, so an enqueue inside a caller's transaction
//! registers its wake-ups against that connection, and a commit hook on the connection sends
//! them when (and only when) the transaction commits; a rollback hook drops them. The same
//! per-connection record lists the ids a transaction enqueued, for
//! [`InTransaction::enqueued_in`].

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use docket_core::*;
use docket_local::{args, Conn};
use sqlx::sqlite::SqliteConnection;

use crate::errors::db_err;
use crate::exec::Caller;
use crate::store::SqliteStore;

/// An open transaction owned by the runtime (a handler writes through it).
pub type SqliteTx = crate::store::WriteTx;

#[derive(Default)]
struct Pending {
    wakes: Vec<Wake>,
    ids: Vec<i64>,
}

/// Keyed by the connection's sqlite3 handle address, which is unique while it is open; an
/// entry lives from an enqueue to its transaction's end.
fn pending() -> &'static Mutex<HashMap<usize, Pending>> {
    static P: OnceLock<Mutex<HashMap<usize, Pending>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

fn take(key: usize) -> Option<Pending> {
    pending()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key)
}

async fn handle_key(conn: &mut SqliteConnection) -> Result<usize> {
    let mut h = conn.lock_handle().await.map_err(db_err)?;
    Ok(h.as_raw_handle().as_ptr() as usize)
}

/// Sends `wakes` to this process's workers when the transaction on `conn` commits, and
/// records `ids` as enqueued by it.
pub(crate) async fn on_commit(
    store: &SqliteStore,
    conn: &mut SqliteConnection,
    wakes: Vec<Wake>,
    ids: Vec<i64>,
) -> Result<()> {
    let mut h = conn.lock_handle().await.map_err(db_err)?;
    let key = h.as_raw_handle().as_ptr() as usize;
    {
        let mut p = pending().lock().unwrap_or_else(|p| p.into_inner());
        let e = p.entry(key).or_default();
        e.wakes.extend(wakes);
        e.ids.extend(ids);
    }
    let tx = store.inner.wake.clone();
    // Hooks run inside sqlite3_step on the connection's thread: they only move values into
    // a channel, never touch the connection.
    h.set_commit_hook(move || {
        if let Some(p) = take(key) {
            for w in p.wakes {
                tx.send(w);
            }
        }
        true
    });
    h.set_rollback_hook(move || {
        take(key);
    });
    Ok(())
}

impl InTransaction for SqliteStore {
    type Tx = SqliteTx;
    type Conn = SqliteConnection;

    async fn begin(&self) -> Result<SqliteTx> {
        // IMMEDIATE: the handler's own reads and writes never meet SQLITE_BUSY_SNAPSHOT.
        self.begin_write().await
    }

    fn conn(tx: &mut SqliteTx) -> &mut SqliteConnection {
        tx.conn()
    }

    async fn complete_in(&self, tx: &mut SqliteTx, owner: &str, lease: Lease) -> Result<()> {
        let now: i64 = tx.scalar("now", args![]).await?;
        let pair = format!("[[{},{}]]", lease.id.0, lease.attempt);
        let n = tx
            .execute("complete_many", args![pair.as_str(), owner, now])
            .await?;
        if n == 1 {
            // A workflow node's children and a batch member's count, in this transaction.
            let mut ready = std::collections::BTreeSet::new();
            docket_local::workflow::ended_in_caller(
                tx,
                now,
                lease.id,
                JobState::Succeeded,
                &mut ready,
            )
            .await?;
            // Found by the workers' poll: a hint sent now could beat the commit.
            drop(ready);
        }
        if n == 0 {
            let out = docket_local::writes::lease_lost(self, lease)
                .await
                .unwrap_or(LeaseLost {
                    lease,
                    reason: LostReason::Expired,
                });
            return Err(out.into());
        }
        Ok(())
    }

    async fn complete_output_in(
        &self,
        tx: &mut SqliteTx,
        owner: &str,
        output: &Output,
    ) -> Result<()> {
        docket_local::outputs::complete_output_on(self, tx, owner, output).await
    }

    async fn commit(tx: SqliteTx) -> Result<()> {
        tx.commit().await
    }

    async fn rollback(tx: SqliteTx) -> Result<()> {
        tx.rollback().await
    }

    async fn signal_in(
        &self,
        conn: &mut SqliteConnection,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<SignalSent> {
        let mut c = crate::exec::Caller(conn);
        let now: i64 = c.scalar("now", args![]).await?;
        let (sent, _) = docket_local::signals::signal_on(&mut c, now, id, name, payload).await?;
        Ok(sent)
    }

    async fn enqueue_workflow_in(
        &self,
        conn: &mut SqliteConnection,
        graph: &docket_core::workflow::Graph,
    ) -> Result<docket_core::WorkflowEnqueued> {
        let mut due = std::collections::BTreeSet::new();
        let mut c = Caller(&mut *conn);
        let now: i64 = c.scalar("now", args![]).await?;
        let out = docket_local::workflow::enqueue_on(
            &mut c,
            docket_local::Engine::limits(self),
            now,
            graph,
            &mut due,
        )
        .await?;
        let ids = out.jobs.iter().map(|(_, id)| id.0).collect();
        on_commit(self, conn, due.into_iter().map(Wake::Queue).collect(), ids).await?;
        Ok(out)
    }

    async fn open_batch_in(
        &self,
        conn: &mut SqliteConnection,
        spec: &docket_core::batches::BatchSpec,
    ) -> Result<docket_core::batches::BatchOpened> {
        let mut due = std::collections::BTreeSet::new();
        let mut c = Caller(&mut *conn);
        let now: i64 = c.scalar("now", args![]).await?;
        let limits = docket_local::Engine::limits(self);
        let out = docket_local::batches::open_on(&mut c, limits, now, spec, &mut due).await?;
        let ids = out.jobs.iter().map(|id| id.0).collect();
        on_commit(self, conn, due.into_iter().map(Wake::Queue).collect(), ids).await?;
        Ok(out)
    }

    async fn add_to_batch_in(
        &self,
        conn: &mut SqliteConnection,
        id: i64,
        jobs: &[docket_core::batches::JobSpec],
    ) -> Result<Vec<JobId>> {
        let mut due = std::collections::BTreeSet::new();
        let mut c = Caller(&mut *conn);
        let now: i64 = c.scalar("now", args![]).await?;
        let limits = docket_local::Engine::limits(self);
        let out =
            docket_local::batches::add_checked_on(&mut c, limits, now, id, jobs, &mut due).await?;
        let ids = out.iter().map(|id| id.0).collect();
        on_commit(self, conn, due.into_iter().map(Wake::Queue).collect(), ids).await?;
        Ok(out)
    }

    async fn publish_in(
        &self,
        conn: &mut SqliteConnection,
        msg: &docket_core::outbox::NewMessage,
    ) -> Result<i64> {
        let mut c = Caller(&mut *conn);
        let now: i64 = c.scalar("now", args![]).await?;
        docket_local::outbox::publish_on(&mut c, now, msg).await
    }

    async fn enqueue_in(&self, conn: &mut SqliteConnection, job: &NewJob) -> Result<Enqueued> {
        self.enqueue_tx(conn, job).await
    }

    async fn enqueued_in(
        &self,
        conn: &mut SqliteConnection,
        kind: &str,
    ) -> Result<Vec<serde_json::Value>> {
        let key = handle_key(conn).await?;
        let ids: Vec<i64> = pending()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .map(|p| p.ids.clone())
            .unwrap_or_default();
        let mut out = Vec::new();
        for id in ids {
            let row = Caller(&mut *conn)
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
