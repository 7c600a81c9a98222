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
use tokio::sync::broadcast;

use crate::errors::db_err;
use docket_core::local::LocalHints;

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
    pub(crate) wake: broadcast::Sender<Wake>,
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

pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
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
                wake: docket_core::local::channel(key),
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

    /// The size limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The newest schema version applied to this file (0 before [`Store::migrate`]).
    pub async fn schema_version(&self) -> Result<i64> {
        crate::migrate::applied(&self.inner.pool).await
    }

    /// Tells this process's workers (a hint; see [`crate::LocalHints`]).
    pub(crate) fn hint(&self, w: Wake) {
        let _ = self.inner.wake.send(w);
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
        })
    }

    /// Runs `f` in one write transaction ([`SqliteStore::begin_write`]) with the database's
    /// now (ms), read once inside it; commits when `f` succeeds, rolls back otherwise.
    pub(crate) async fn write<T>(
        &self,
        f: impl AsyncFnOnce(&mut SqliteConnection, i64) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.begin_write().await?;
        let now: i64 = sqlx::query_scalar(NOW)
            .fetch_one(tx.conn())
            .await
            .map_err(db_err)?;
        let out = f(tx.conn(), now).await?;
        tx.commit().await?;
        Ok(out)
    }

    /// Runs one write statement on its own, in autocommit: SQLite takes the file's write
    /// lock as the statement starts and commits as it ends, so it is a transaction of one
    /// statement without the three extra hand-offs to the connection's thread (BEGIN, the
    /// clock, COMMIT) that [`SqliteStore::write`] costs. This process's turn first, as
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

    /// The database's now (ms) for a read.
    pub(crate) async fn now_ms(&self) -> Result<i64> {
        sqlx::query_scalar(NOW)
            .fetch_one(&self.inner.pool)
            .await
            .map_err(db_err)
    }
}

/// An open write transaction: this process's write turn and the file's write lock, held
/// until [`WriteTx::commit`] or drop (which rolls back).
#[derive(Debug)]
pub struct WriteTx {
    tx: sqlx::Transaction<'static, sqlx::Sqlite>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
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

impl Store for SqliteStore {
    type Listener = LocalHints;

    async fn migrate(&self) -> Result<()> {
        crate::migrate::run(&self.inner.pool).await
    }

    async fn leader_try(&self, owner: &str, ttl: Duration) -> Result<bool> {
        self.leader_try_impl(owner, ttl).await
    }

    async fn leader_resign(&self, owner: &str) -> Result<()> {
        self.leader_resign_impl(owner).await
    }

    fn listen_support(&self, _direct_url: Option<&str>) -> ListenSupport {
        // Hints come from this process only; other processes' enqueues are found by polling.
        ListenSupport::Yes
    }

    async fn listen(&self, _direct_url: Option<&str>) -> Result<LocalHints> {
        Ok(LocalHints::new(&self.inner.wake))
    }

    async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let mut v = self.enqueue_many(std::slice::from_ref(job)).await?;
        Ok(v.remove(0))
    }

    async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        self.enqueue_many_impl(jobs).await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        self.claim_impl(req).await
    }

    async fn complete_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        self.complete_many_impl(owner, leases).await
    }

    async fn complete_delete_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        self.complete_delete_many_impl(owner, leases).await
    }

    async fn fail_many(&self, owner: &str, failures: &[Failure]) -> Result<BatchOutcome> {
        self.fail_many_impl(owner, failures).await
    }

    async fn snooze_many(&self, owner: &str, snoozes: &[Snooze]) -> Result<BatchOutcome> {
        self.snooze_many_impl(owner, snoozes).await
    }

    async fn heartbeat(
        &self,
        owner: &str,
        leases: &[Lease],
        lease: Duration,
    ) -> Result<HeartbeatOutcome> {
        self.heartbeat_impl(owner, leases, lease).await
    }

    async fn release_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        let snoozes: Vec<Snooze> = leases
            .iter()
            .map(|&lease| Snooze {
                lease,
                delay: Duration::ZERO,
            })
            .collect();
        self.snooze_many_impl(owner, &snoozes).await
    }

    async fn reap(&self, batch: i64) -> Result<ReapReport> {
        self.reap_impl(batch).await
    }

    async fn prune(&self, retention: &Retention) -> Result<PruneReport> {
        self.prune_impl(retention).await
    }

    async fn retry(&self, id: JobId, extra_attempts: i32) -> Result<JobRecord> {
        self.retry_impl(id, extra_attempts).await
    }

    async fn cancel(&self, id: JobId) -> Result<CancelOutcome> {
        self.cancel_impl(id).await
    }

    async fn get(&self, id: JobId) -> Result<JobRecord> {
        self.get_impl(id).await
    }

    async fn worker_beat(&self, beat: &WorkerBeat, ttl: Duration) -> Result<()> {
        self.worker_beat_impl(beat, ttl).await
    }

    async fn worker_gone(&self, owner: &str) -> Result<()> {
        self.worker_gone_impl(owner).await
    }

    async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.workers_impl().await
    }

    async fn why(&self, id: JobId) -> Result<WhyReport> {
        self.why_impl(id).await
    }

    async fn search(&self, query: &JobQuery) -> Result<JobPage> {
        self.search_impl(query).await
    }

    async fn overview(&self, cap: i64) -> Result<Overview> {
        self.overview_impl(cap).await
    }

    async fn dead_groups(&self, limit: i64) -> Result<Vec<DeadGroup>> {
        self.dead_groups_impl(limit).await
    }

    async fn run_now(&self, id: JobId) -> Result<JobRecord> {
        self.run_now_impl(id).await
    }

    async fn record_samples(&self, samples: &[Sample]) -> Result<()> {
        self.record_samples_impl(samples).await
    }

    async fn samples(&self, window: Duration) -> Result<Vec<Sample>> {
        self.samples_impl(window).await
    }

    async fn audit(&self, entry: &AuditEntry) -> Result<()> {
        self.audit_impl(entry).await
    }

    async fn audit_log(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        self.audit_log_impl(limit).await
    }

    async fn list(&self, filter: &JobFilter) -> Result<Vec<JobRecord>> {
        self.list_impl(filter).await
    }

    async fn active_count(&self, queues: &[String]) -> Result<i64> {
        self.active_count_impl(queues).await
    }

    async fn any_active(&self, queues: &[String]) -> Result<bool> {
        self.any_active_impl(queues).await
    }

    async fn table_health(&self) -> Result<Option<TableStats>> {
        // SQLite keeps no tuple or vacuum statistics.
        Ok(None)
    }

    async fn stats(&self) -> Result<Stats> {
        self.stats_impl().await
    }

    async fn pause_queue(&self, queue: &str) -> Result<QueueControl> {
        self.pause_queue_impl(queue).await
    }

    async fn resume_queue(&self, queue: &str) -> Result<QueueControl> {
        self.resume_queue_impl(queue).await
    }

    async fn set_queue_limits(&self, queue: &str, limits: &QueueLimits) -> Result<QueueControl> {
        self.set_queue_limits_impl(queue, limits).await
    }

    async fn queue_controls(&self) -> Result<Vec<QueueControl>> {
        self.queue_controls_impl().await
    }

    async fn set_key_limit(&self, limit: &KeyLimit) -> Result<()> {
        self.set_key_limit_impl(limit).await
    }

    async fn key_limits(&self) -> Result<Vec<KeyLimit>> {
        self.key_limits_impl().await
    }

    async fn blocked_keys(&self, limit: i64) -> Result<Vec<BlockedKey>> {
        self.blocked_keys_impl(limit).await
    }

    async fn skip(&self, id: JobId) -> Result<JobRecord> {
        self.skip_impl(id).await
    }

    async fn unblock_keys(&self, _batch: i32) -> Result<u64> {
        // Nothing is ever flagged here: the claim decides every key inside its own write
        // transaction (see migration 0001), so there is nothing to sweep.
        Ok(0)
    }

    async fn upsert_periodic(&self, def: &Periodic) -> Result<PeriodicState> {
        self.upsert_periodic_impl(def).await
    }

    async fn remove_periodic(&self, name: &str) -> Result<bool> {
        self.remove_periodic_impl(name).await
    }

    async fn list_periodic(&self) -> Result<Vec<PeriodicState>> {
        self.list_periodic_impl().await
    }

    async fn enqueue_due_periodic(&self, limit: i64) -> Result<Vec<TickEnqueued>> {
        self.enqueue_due_periodic_impl(limit).await
    }
}
