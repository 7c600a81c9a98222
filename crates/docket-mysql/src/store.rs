//! [`MySqlStore`]: the pool, the write transaction every change runs in (retried on a
//! deadlock), and the [`Store`] implementation (each operation in the module of its concern).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use docket_core::*;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::Executor;

use crate::errors::db_err;

/// The MariaDB / MySQL store. Cheap to clone (an `Arc`).
#[derive(Clone, Debug)]
pub struct MySqlStore {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: MySqlPool,
    pub(crate) limits: Limits,
    pub(crate) wake: std::sync::Arc<docket_core::local::Hub>,
}

/// Runs `fut` to its end in a task of its own, whether or not the caller keeps waiting (see
/// [`MySqlStore::detached`]); a panic in it comes back as an error.
pub(crate) async fn in_own_task<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T> {
    tokio::spawn(fut)
        .await
        .map_err(|e| StoreError::Database(Box::new(e)))
}

/// The server clock, in ms since the epoch.
pub(crate) const NOW: &str = include_str!("../sql/now.sql");

/// [`docket_core::engine::IDLE_TRANSACTION_BOUND`] in seconds, as MariaDB's
/// `idle_transaction_timeout` on every connection of Docket's (a handler's transaction,
/// [`docket_core::InTransaction`], is exempt while open). MySQL has no such variable: there a
/// partitioned connection holds its locks until the server's `wait_timeout`, which an operator
/// should lower.
pub const IDLE_TRANSACTION_TIMEOUT_S: u32 =
    docket_core::engine::IDLE_TRANSACTION_BOUND.as_secs() as u32;

/// Sets this connection's idle-in-transaction bound (0: none). MySQL, which lacks the
/// variable, answers error 1193; that is not a failure.
pub(crate) async fn set_idle_bound(
    c: &mut sqlx::MySqlConnection,
    seconds: u32,
) -> std::result::Result<(), sqlx::Error> {
    // The value is this crate's own number, never input: formatted, not bound, because
    // SET of a system variable takes no placeholder on every server version.
    match c
        .execute(format!("SET idle_transaction_timeout = {seconds}").as_str())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if unknown_variable(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

fn unknown_variable(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .is_some_and(|d| d.number() == 1193)
}

impl MySqlStore {
    /// Connects a pool of `max_connections` to `url` (`mysql://user:pass@host:port/db`;
    /// MariaDB or MySQL) and checks it before returning. Every connection runs READ COMMITTED
    /// (each statement sees what committed before it, as on PostgreSQL) in UTC. Does not
    /// migrate.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        let opts = MySqlConnectOptions::from_str(url).map_err(|e| {
            StoreError::Invalid(ValidationError::Other {
                what: "database url",
                reason: docket_core::redact::redact(&e.to_string()),
            })
        })?;
        let key = format!(
            "{}:{}/{}",
            opts.get_host(),
            opts.get_port(),
            opts.get_database().unwrap_or_default()
        );
        // One connection first, alone: the pool retries a failed connect until its acquire
        // time-out and then says only "pool timed out"; this says "connection refused" (or
        // what else went wrong) at once.
        {
            use sqlx::ConnectOptions;
            let first = opts.connect().await.map_err(db_err)?;
            let _ = sqlx::Connection::close(first).await;
        }
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(|c, _| {
                Box::pin(async move {
                    // The mode Docket's SQL is written for, whatever the server's global one
                    // (`ORACLE`, `ANSI_QUOTES`, … change what a statement means): MariaDB's
                    // and MySQL's shared strict defaults, and `||` as concatenation.
                    c.execute(
                        "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,PIPES_AS_CONCAT'",
                    )
                    .await?;
                    c.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .await?;
                    c.execute("SET SESSION innodb_lock_wait_timeout = 10")
                        .await?;
                    let bound = if docket_core::mutants::active(
                        docket_core::mutants::Mutant::NoIdleTransactionBound,
                    ) {
                        0
                    } else {
                        IDLE_TRANSACTION_TIMEOUT_S
                    };
                    set_idle_bound(c, bound).await?;
                    Ok(())
                })
            })
            .connect_with(opts)
            .await
            .map_err(db_err)?;
        Ok(Self::with_pool(pool, &key))
    }

    /// A store on an existing pool (its connections must run READ COMMITTED); `key` names the
    /// database for the in-process wake.
    pub fn with_pool(pool: MySqlPool, key: &str) -> Self {
        MySqlStore {
            inner: Arc::new(Inner {
                pool,
                limits: Limits::default(),
                wake: docket_core::local::hub(key),
            }),
        }
    }

    /// Replaces the size limits.
    pub fn with_limits(self, limits: Limits) -> Self {
        let i = &self.inner;
        MySqlStore {
            inner: Arc::new(Inner {
                pool: i.pool.clone(),
                limits,
                wake: i.wake.clone(),
            }),
        }
    }

    /// The connection pool (for the application's own transactions).
    pub fn pool(&self) -> &MySqlPool {
        &self.inner.pool
    }

    /// The size limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The newest schema version applied (0 before [`Store::migrate`]).
    pub async fn schema_version(&self) -> Result<i64> {
        crate::migrate::applied(&self.inner.pool).await
    }

    /// Tells this process's workers that `queue` may have due work: call it after committing
    /// a transaction that enqueued with [`MySqlStore::enqueue_tx`] (otherwise the next poll
    /// finds the job).
    pub fn wake(&self, queue: &str) {
        self.inner.wake.send(Wake::Queue(queue.to_string()));
    }
}

impl docket_local::Engine for MySqlStore {
    type Tx = crate::exec::Tx;
    type ReadTx = crate::exec::Tx;
    type Reader = crate::exec::Reader;

    fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    fn actor(&self) -> String {
        "mysql".into()
    }

    fn hub(&self) -> &docket_core::local::Hub {
        &self.inner.wake
    }

    async fn begin(&self) -> Result<crate::exec::Tx> {
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let now = sqlx::query_scalar(NOW)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        Ok(crate::exec::Tx { tx, now })
    }

    async fn begin_read(&self) -> Result<crate::exec::Tx> {
        docket_local::Engine::begin(self).await
    }

    fn reader(&self) -> crate::exec::Reader {
        crate::exec::Reader(self.inner.pool.clone())
    }

    /// In a task of its own: sqlx's MySQL connection is not safe to drop mid-query. A call
    /// cut short (a heartbeat under its timeout, a claim raced against shutdown) left its
    /// connection expecting a reply the server never sends, and the pool's check of it on
    /// return waited for ever — one connection lost per cut until the pool had none ("pool
    /// timed out"). In its own task the statement always finishes and the connection comes
    /// back clean; a caller that stopped waiting just never sees the result (every write is
    /// fenced, so one that lands after its caller gave up is as safe as a retry).
    async fn detach<T: Send + 'static>(
        &self,
        op: impl std::future::Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        in_own_task(op).await?
    }

    async fn lock_queue(tx: &mut crate::exec::Tx, queue: &str) -> Result<()> {
        crate::claim::lock_queue(tx, queue, true).await
    }

    async fn migrate(&self) -> Result<()> {
        crate::migrate::run(&self.inner.pool).await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        self.claim_impl(req).await
    }

    async fn table_health(&self) -> Result<Option<TableStats>> {
        let r = docket_local::Conn::fetch_optional(&mut self.reader(), "table_health", &[]).await?;
        r.map(|r| {
            Ok(TableStats {
                live_tuples: r.get("live_tuples")?,
                dead_tuples: 0,
                last_vacuum: None,
                last_autovacuum: None,
                total_bytes: r.get("total_bytes")?,
                index_bytes: r.get("index_bytes")?,
            })
        })
        .transpose()
    }
}

docket_local::store_impl!(MySqlStore);
