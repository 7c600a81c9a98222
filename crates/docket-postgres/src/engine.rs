//! The PostgreSQL side of the seam beyond queue operations: leader election, LISTEN for
//! wake-ups and cancel hints, and the in-transaction capability (a handler's writes and its
//! completion in one transaction; enqueue inside the caller's transaction).

use std::time::Duration;

use docket_core::*;
use sqlx::postgres::PgListener;
use sqlx::{PgConnection, Postgres};

use crate::connect::PoolerMode;
use crate::errors::db_err;
use crate::store::{ms, PgStore};

impl PgStore {
    /// Takes or renews maintenance leadership for `owner` until `now() + ttl`.
    pub(crate) async fn leader_try_sql(&self, owner: &str, ttl: Duration) -> Result<bool> {
        let leading: Option<bool> = self
            .run(async |c: &mut PgConnection| {
                self.query_scalar(&self.inner.q.leader_try)
                    .bind(owner)
                    .bind(ms(ttl))
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Ok(leading.unwrap_or(false))
    }

    /// Gives up leadership held by `owner`.
    pub(crate) async fn leader_resign_sql(&self, owner: &str) -> Result<()> {
        self.run(async |c: &mut PgConnection| {
            self.query(&self.inner.q.leader_resign)
                .bind(owner)
                .execute(&mut *c)
                .await
                .map_err(db_err)
        })
        .await?;
        Ok(())
    }

    pub(crate) fn listen_support_for(&self, direct_url: Option<&str>) -> ListenSupport {
        if self.pooler() == PoolerMode::Transaction && direct_url.is_none() {
            // LISTEN is session state: through a transaction-mode pooler it would be lost (or
            // land on another client's server connection).
            return ListenSupport::No(
                "transaction-mode pooler and no listen_url: no LISTEN, polling only (give a direct URL as listen_url / --listen-url for wake-ups)".into(),
            );
        }
        ListenSupport::Yes
    }
}

/// One dedicated LISTEN connection (never through a pooler) on this schema's wake-up and
/// cancel channels.
pub struct PgHints {
    inner: Hints,
}

enum Hints {
    /// A connection of its own (a worker's notifier).
    Own {
        listener: PgListener,
        cancel: String,
        done: String,
    },
    /// One output waiter's share of the store's done listener (`crate::outputs::DoneHub`):
    /// `None` when its connection dropped.
    Shared(tokio::sync::broadcast::Receiver<Option<JobId>>),
}

impl PgHints {
    pub(crate) async fn connect(store: &PgStore, direct_url: Option<&str>) -> Result<PgHints> {
        let channels = [store.wakeup_channel(), store.cancel_channel()];
        Self::connect_to(store, direct_url, &channels).await
    }

    /// A listener on `channels` of this schema (the wake-up and cancel channels for workers,
    /// the done channel for callers waiting for outputs).
    pub(crate) async fn connect_to(
        store: &PgStore,
        direct_url: Option<&str>,
        channels: &[String],
    ) -> Result<PgHints> {
        let unavailable = |e: sqlx::Error| StoreError::Unavailable(Box::new(e));
        let mut listener = match direct_url {
            Some(url) => {
                // TLS parameters and key=value strings as for the main pool.
                let mut target =
                    crate::connect::parse(url).map_err(|e| StoreError::Unavailable(Box::new(e)))?;
                let pool = crate::connect::pool(&mut target, "docket-listen", 1)
                    .await
                    .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
                PgListener::connect_with(&pool).await.map_err(unavailable)?
            }
            None => PgListener::connect_with(store.pool())
                .await
                .map_err(unavailable)?,
        };
        listener
            .listen_all(channels.iter().map(String::as_str))
            .await
            .map_err(unavailable)?;
        Ok(PgHints {
            inner: Hints::Own {
                listener,
                cancel: store.cancel_channel(),
                done: store.done_channel(),
            },
        })
    }

    /// A waiter's share of the store's done listener.
    pub(crate) fn shared(rx: tokio::sync::broadcast::Receiver<Option<JobId>>) -> PgHints {
        PgHints {
            inner: Hints::Shared(rx),
        }
    }

    /// The underlying listener (the done hub's own).
    pub(crate) fn into_listener(self) -> Option<PgListener> {
        match self.inner {
            Hints::Own { listener, .. } => Some(listener),
            Hints::Shared(_) => None,
        }
    }
}

impl Listener for PgHints {
    async fn recv(&mut self) -> Result<Option<Wake>> {
        let (listener, cancel, done) = match &mut self.inner {
            Hints::Own {
                listener,
                cancel,
                done,
            } => (listener, cancel, done),
            Hints::Shared(rx) => {
                use tokio::sync::broadcast::error::RecvError;
                return Ok(match rx.recv().await {
                    Ok(Some(id)) => Some(Wake::Done(id)),
                    // Hints were missed: the waiter reads the row again.
                    Err(RecvError::Lagged(_)) => Some(Wake::Unreadable),
                    Ok(None) | Err(RecvError::Closed) => None,
                });
            }
        };
        match listener.try_recv().await {
            // The connection dropped. The caller reconnects itself (rather than letting sqlx
            // re-listen lazily) so that its claim-once happens only after LISTEN is back.
            Ok(None) => Ok(None),
            Ok(Some(n)) if n.channel() == cancel.as_str() => Ok(Some(
                n.payload()
                    .parse::<i64>()
                    .map_or(Wake::Unreadable, |id| Wake::Cancel(JobId(id))),
            )),
            Ok(Some(n)) if n.channel() == done.as_str() => Ok(Some(
                n.payload()
                    .parse::<i64>()
                    .map_or(Wake::Unreadable, |id| Wake::Done(JobId(id))),
            )),
            Ok(Some(n)) => Ok(Some(Wake::Queue(n.payload().to_string()))),
            Err(e) => Err(StoreError::Unavailable(Box::new(e))),
        }
    }
}

impl InTransaction for PgStore {
    type Tx = sqlx::Transaction<'static, Postgres>;
    type Conn = PgConnection;

    async fn begin(&self) -> Result<Self::Tx> {
        self.pool().begin().await.map_err(db_err)
    }

    fn conn(tx: &mut Self::Tx) -> &mut PgConnection {
        tx
    }

    async fn complete_in(&self, tx: &mut Self::Tx, owner: &str, lease: Lease) -> Result<()> {
        self.complete_tx(tx, owner, lease).await
    }

    async fn complete_output_in(
        &self,
        tx: &mut Self::Tx,
        owner: &str,
        output: &Output,
    ) -> Result<()> {
        self.complete_output_tx(tx, owner, output).await
    }

    async fn commit(tx: Self::Tx) -> Result<()> {
        tx.commit().await.map_err(db_err)
    }

    async fn rollback(tx: Self::Tx) -> Result<()> {
        tx.rollback().await.map_err(db_err)
    }

    async fn signal_in(
        &self,
        conn: &mut PgConnection,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<SignalSent> {
        self.signal_on(conn, id, name, payload).await
    }

    async fn enqueue_in(&self, conn: &mut PgConnection, job: &NewJob) -> Result<Enqueued> {
        self.enqueue_tx(conn, job).await
    }

    async fn enqueue_workflow_in(
        &self,
        conn: &mut PgConnection,
        graph: &docket_core::workflow::Graph,
    ) -> Result<WorkflowEnqueued> {
        self.enqueue_workflow_tx(conn, graph).await
    }

    async fn publish_in(
        &self,
        conn: &mut PgConnection,
        msg: &docket_core::outbox::NewMessage,
    ) -> Result<i64> {
        self.publish_on(conn, msg).await
    }

    async fn open_batch_in(
        &self,
        conn: &mut PgConnection,
        spec: &docket_core::batches::BatchSpec,
    ) -> Result<docket_core::batches::BatchOpened> {
        spec.validate(self.limits())?;
        self.open_batch_on(conn, spec).await
    }

    async fn add_to_batch_in(
        &self,
        conn: &mut PgConnection,
        id: i64,
        jobs: &[docket_core::batches::JobSpec],
    ) -> Result<Vec<JobId>> {
        docket_core::batches::check_jobs(jobs, self.limits())?;
        self.add_to_batch_on(conn, id, jobs).await
    }

    async fn enqueued_in(
        &self,
        conn: &mut PgConnection,
        kind: &str,
    ) -> Result<Vec<serde_json::Value>> {
        validate::kind(kind)?;
        // Rows whose creating transaction is this one (xmin is the 32-bit transaction id).
        sqlx::query_scalar(&format!(
            "SELECT args FROM \"{}\".jobs
             WHERE kind = $1 AND xmin::text::bigint = txid_current() % 4294967296 ORDER BY id",
            self.schema()
        ))
        .persistent(false)
        .bind(kind)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)
    }
}

impl PgStore {
    /// Completes a claimed job inside the caller's transaction (in-transaction mode): the
    /// handler's own writes and the completion commit together, or neither does.
    pub async fn complete_tx(
        &self,
        conn: &mut PgConnection,
        owner: &str,
        lease: Lease,
    ) -> Result<()> {
        let rows = self
            .query(&self.inner.q.complete_many)
            .bind(vec![lease.id.0])
            .bind(vec![lease.attempt])
            .bind(owner)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        if rows.is_empty() {
            let lost = self.explain_lost(vec![lease]).await?;
            return Err(StoreError::LeaseLost(
                lost.into_iter().next().expect("one lease"),
            ));
        }
        Ok(())
    }
}
