//! [`SqliteStore`]: the pool, the write transaction every change runs in, and the
//! [`Store`] implementation (each operation lives in the module of its concern).

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;

use docket_core::*;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

use crate::errors::db_err;

/// How long a writer waits for the file's write lock before the operation is reported as
/// transient ([`StoreError::Unavailable`]; the runtime retries).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite store. Cheap to clone (an `Arc`).
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// Reads and the application's own statements: waits up to [`BUSY_TIMEOUT`] for a lock
    /// in SQLite's busy handler.
    pub(crate) pool: SqlitePool,
    /// Docket's write transactions: no busy handler (it sleeps in growing steps, up to
    /// 100 ms, so a contended file ran at tens of jobs per second across processes);
    /// [`SqliteStore::begin_write`] retries a locked `BEGIN IMMEDIATE` itself, within a
    /// millisecond or two, until [`BUSY_TIMEOUT`].
    pub(crate) writer: SqlitePool,
    pub(crate) limits: Limits,
    pub(crate) wake: std::sync::Arc<docket_core::local::Hub>,
    /// One writer at a time in this process (shared by every store on the file): SQLite
    /// lets one connection write anyway, and connections of one process that queue here
    /// wait their turn in order instead of in SQLite's busy handler, which sleeps in growing
    /// steps (up to 100 ms) between retries.
    pub(crate) gate: Arc<tokio::sync::Mutex<()>>,
    /// Who operator actions (a cancel's history entry) are recorded as: SQLite has no roles.
    pub(crate) actor: String,
}

/// The in-process write gate of the database file `key` (see `Inner::gate`).
fn gate(key: &str) -> Arc<tokio::sync::Mutex<()>> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static G: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut g = G
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    g.entry(key.to_string()).or_default().clone()
}

/// Runs `attempt` until it is not refused for a file another process holds locked, up to
/// [`BUSY_TIMEOUT`]. The writer connection has no busy handler (SQLite's sleeps in growing
/// steps up to 100 ms); this retries every 0.2–2 ms, jittered, so the writer gets in soon
/// after the other process commits — another process's commit sends no signal to wait on.
/// Only for attempts refused before they wrote anything (a BEGIN, a single statement).
async fn busy_retry<T, F: std::future::Future<Output = std::result::Result<T, sqlx::Error>>>(
    mut attempt: impl FnMut() -> F,
) -> Result<T> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if crate::errors::is_busy(&e) && Instant::now() < deadline => {
                let us = rand::thread_rng().gen_range(200..2_000);
                tokio::time::sleep(Duration::from_micros(us)).await;
            }
            Err(e) => return Err(db_err(e)),
        }
    }
}

/// The pools' last guard against a transaction nobody can end (see
/// [`SqliteStore::begin_write`]): a connection that comes back to the pool still inside one
/// (a dropped transaction's rollback is sent before the connection is released, so by now
/// it has run) is closed instead of handed out — closing rolls the transaction back and
/// frees the file's write lock — and the pool opens a fresh one.
fn not_mid_transaction(
    conn: &mut SqliteConnection,
    _: sqlx::pool::PoolConnectionMetadata,
) -> futures::future::BoxFuture<'_, std::result::Result<bool, sqlx::Error>> {
    use sqlx::Connection;
    let stuck = conn.is_in_transaction();
    if stuck {
        tracing::warn!("closing a SQLite connection left inside a transaction");
    }
    Box::pin(async move { Ok(!stuck) })
}

/// Creates the database file, when missing, readable and writable by its owner only (0600):
/// job data is the application's, and SQLite creates the `-wal` and `-shm` files with the
/// database file's permissions, so they follow. An existing file is left as it is.
fn create_private(path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if path.as_os_str().is_empty() || path.exists() {
        return Ok(());
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Unavailable(Box::new(e))),
    }
}

/// The database clock, in ms since the epoch.
pub(crate) const NOW: &str = include_str!("../sql/now.sql");

impl SqliteStore {
    /// Opens (creating when missing) the database at `url` — `sqlite://path/jobs.db`,
    /// `sqlite:jobs.db` or `sqlite::memory:` — in WAL mode with a pool of `max_connections`,
    /// and checks it can be read before returning. Does not migrate.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        let opts = SqliteConnectOptions::from_str(url).map_err(|e| {
            StoreError::Invalid(ValidationError::Other {
                what: "database url",
                reason: e.to_string(),
            })
        })?;
        let in_memory = opts.get_filename().as_os_str() == ":memory:"
            || opts
                .get_filename()
                .to_string_lossy()
                .contains("mode=memory");
        if !in_memory {
            create_private(opts.get_filename())?;
        }
        let opts = opts
            .create_if_missing(true)
            .journal_mode(if in_memory {
                SqliteJournalMode::Memory
            } else {
                SqliteJournalMode::Wal
            })
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        // The writer's rows come through a channel of this many: a claim's RETURNING rows
        // (claim_fast.sql, up to a batch) are then sent without the connection's thread
        // waiting for the async side to take each one while the file's write lock is held.
        let writer_opts = opts
            .clone()
            .busy_timeout(Duration::ZERO)
            .row_buffer_size(1024);
        let key = if in_memory {
            format!("memory:{}", opts.get_filename().display())
        } else {
            let f = opts.get_filename();
            std::path::absolute(f)
                .unwrap_or_else(|_| f.to_path_buf())
                .display()
                .to_string()
        };
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections.max(1))
            .before_acquire(not_mid_transaction)
            .min_connections(if in_memory { 1 } else { 0 })
            // An in-memory database lives as long as one connection to it.
            .idle_timeout((!in_memory).then_some(Duration::from_secs(600)))
            .max_lifetime(None)
            .connect_with(opts)
            .await
            .map_err(db_err)?;
        // One connection: the in-process gate lets one write transaction at a time anyway.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .before_acquire(not_mid_transaction)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(writer_opts)
            .await
            .map_err(db_err)?;
        Ok(Self::build(pool, writer, &key))
    }

    fn build(pool: SqlitePool, writer: SqlitePool, key: &str) -> Self {
        SqliteStore {
            inner: Arc::new(Inner {
                pool,
                writer,
                limits: Limits::default(),
                wake: docket_core::local::hub(key),
                gate: gate(key),
                actor: "sqlite".into(),
            }),
        }
    }

    /// Replaces the size limits.
    pub fn with_limits(self, limits: Limits) -> Self {
        let i = &self.inner;
        SqliteStore {
            inner: Arc::new(Inner {
                pool: i.pool.clone(),
                writer: i.writer.clone(),
                limits,
                wake: i.wake.clone(),
                gate: i.gate.clone(),
                actor: i.actor.clone(),
            }),
        }
    }

    /// The connection pool (for the application's own transactions).
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    /// Closes both of this store's pools (the readers' and the writer's) and waits for them
    /// to hand back their connections. Dropping a store leaves that to the background. Each
    /// SQLite handle is released on its connection's own thread, possibly a moment after
    /// this returns: a file is not safe to remove and re-create under the same name right
    /// after (its last handle checkpoints and unlinks `<file>-wal` by name as it goes).
    pub async fn close(&self) {
        self.inner.pool.close().await;
        self.inner.writer.close().await;
    }

    /// The size limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The newest schema version applied to this file (0 before [`Store::migrate`]).
    pub async fn schema_version(&self) -> Result<i64> {
        crate::migrate::applied(&self.inner.pool).await
    }

    /// Begins a write transaction (`BEGIN IMMEDIATE`): this process's turn first (see
    /// [`WriteTx`]), then the file's write lock, retried every millisecond or two while
    /// another process holds it, up to [`BUSY_TIMEOUT`] (then [`StoreError::Unavailable`]).
    /// IMMEDIATE takes the lock up front, so the transaction never fails half way because
    /// another writer got in first (a deferred one would, with SQLITE_BUSY_SNAPSHOT). Use it
    /// for the application's own writes too: they then queue with Docket's instead of
    /// sleeping in SQLite's busy handler.
    ///
    /// Safe to drop at any await. sqlx's SQLite `begin_with` awaits once more after SQLite
    /// has acknowledged the BEGIN and before the `Transaction` that would roll it back
    /// exists (it checks the handle's autocommit flag); a caller dropped there — a
    /// heartbeat under its timeout, a claim raced against shutdown — left the transaction
    /// open on a pooled connection with nobody to end it: the file's write lock held for
    /// ever, other processes' writes "database is locked", this process's next BEGIN
    /// refused at "non-zero transaction depth". So the BEGIN runs in a task of its own,
    /// which always reaches the end: when the caller is gone, the task drops the
    /// `Transaction` it got, and that rolls back. The turn travels with it, so this
    /// process's next writer still waits until that has happened.
    pub async fn begin_write(&self) -> Result<WriteTx> {
        let turn = self.inner.gate.clone().lock_owned().await;
        let writer = self.inner.writer.clone();
        let begun = tokio::spawn(async move {
            let tx = busy_retry(|| writer.begin_with("BEGIN IMMEDIATE")).await;
            (tx, turn)
        });
        let (tx, turn) = begun.await.map_err(|e| StoreError::Database(Box::new(e)))?;
        Ok(WriteTx {
            tx: tx?,
            _turn: turn,
            now: 0,
        })
    }

    /// Runs one write statement on its own, in autocommit: SQLite takes the file's write
    /// lock as the statement starts and commits as it ends, so it is a transaction of one
    /// statement without the three extra hand-offs to the connection's thread (BEGIN, the
    /// clock, COMMIT) that a transaction of the rules costs. This process's turn first, as
    /// there; a file locked by another process is retried like `begin_write`'s BEGIN (a
    /// statement refused at its start has written nothing). `query` builds the statement
    /// afresh for each try (a query's bound values are spent by running it). The statement
    /// reads the clock itself (`unixepoch('subsec')`, the same instant for all of one
    /// statement's step). Returns the rows changed.
    pub(crate) async fn write_alone<'q>(
        &self,
        query: impl Fn() -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    ) -> Result<u64> {
        let _turn = self.inner.gate.clone().lock_owned().await;
        let r = busy_retry(|| query().execute(&self.inner.writer)).await?;
        Ok(r.rows_affected())
    }

    /// [`SqliteStore::write_alone`] for a statement that returns one text column per row
    /// (an `UPDATE … RETURNING`): the rows it returns. A statement refused at its start
    /// returns no rows and has written nothing, so it is retried like write_alone's.
    pub(crate) async fn write_alone_rows<'q>(
        &self,
        query: impl Fn() -> sqlx::query::QueryScalar<
            'q,
            sqlx::Sqlite,
            String,
            sqlx::sqlite::SqliteArguments<'q>,
        >,
    ) -> Result<Vec<String>> {
        let _turn = self.inner.gate.clone().lock_owned().await;
        busy_retry(|| query().fetch_all(&self.inner.writer)).await
    }
}

/// An open write transaction: this process's write turn and the file's write lock, held
/// until [`WriteTx::commit`] or drop (which rolls back).
#[derive(Debug)]
pub struct WriteTx {
    tx: sqlx::Transaction<'static, sqlx::Sqlite>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
    /// The database's now (ms) when the rules began it (0 for the application's own).
    pub(crate) now: i64,
}

impl docket_local::Tx for WriteTx {
    fn now(&self) -> i64 {
        self.now
    }

    async fn commit(self) -> Result<()> {
        WriteTx::commit(self).await
    }
}

impl WriteTx {
    /// The connection to write through.
    pub fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.tx
    }

    /// Commits (then the turn passes on).
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await.map_err(db_err)
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<()> {
        self.tx.rollback().await.map_err(db_err)
    }
}

impl docket_local::Engine for SqliteStore {
    type Tx = WriteTx;
    type ReadTx = crate::exec::ReadTx;
    type Reader = crate::exec::Reader;

    fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    fn actor(&self) -> String {
        self.inner.actor.clone()
    }

    fn hub(&self) -> &docket_core::local::Hub {
        &self.inner.wake
    }

    async fn begin(&self) -> Result<WriteTx> {
        let mut tx = self.begin_write().await?;
        tx.now = sqlx::query_scalar(NOW)
            .fetch_one(tx.conn())
            .await
            .map_err(db_err)?;
        Ok(tx)
    }

    async fn begin_read(&self) -> Result<crate::exec::ReadTx> {
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let now = sqlx::query_scalar(NOW)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        Ok(crate::exec::ReadTx { tx, now })
    }

    fn reader(&self) -> crate::exec::Reader {
        crate::exec::Reader(self.inner.pool.clone())
    }

    async fn detach<T: Send + 'static>(
        &self,
        op: impl std::future::Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        // Inline: every write begins in a task of its own already (see begin_write).
        op.await
    }

    async fn lock_queue(_tx: &mut WriteTx, _queue: &str) -> Result<()> {
        // The write transaction holds the file's only write lock.
        Ok(())
    }

    async fn migrate(&self) -> Result<()> {
        crate::migrate::run(&self.inner.pool).await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        self.claim_impl(req).await
    }

    async fn table_health(&self) -> Result<Option<TableStats>> {
        // SQLite keeps no tuple or vacuum statistics.
        Ok(None)
    }
}

docket_local::store_impl!(SqliteStore);
