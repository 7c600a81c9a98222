//! [`MySqlStore`]: the pool, the write transaction every change runs in (retried on a
//! deadlock), and the [`Store`] implementation (each operation in the module of its concern).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use docket_core::*;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::Executor;
use tokio::sync::broadcast;

use crate::errors::db_err;
use docket_core::local::LocalHints;

/// The MariaDB / MySQL store. Cheap to clone (an `Arc`).
#[derive(Clone, Debug)]
pub struct MySqlStore {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: MySqlPool,
    pub(crate) limits: Limits,
    pub(crate) wake: broadcast::Sender<Wake>,
}

pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
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

impl MySqlStore {
    /// Connects a pool of `max_connections` to `url` (`mysql://user:pass@host:port/db`;
    /// MariaDB or MySQL) and checks it before returning. Every session runs READ COMMITTED
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
                    Ok(())
                })
            })
            .connect_with(opts)
            .await
            .map_err(db_err)?;
        Ok(Self::with_pool(pool, &key))
    }

    /// A store on an existing pool (its sessions must run READ COMMITTED); `key` names the
    /// database for the in-process wake.
    pub fn with_pool(pool: MySqlPool, key: &str) -> Self {
        MySqlStore {
            inner: Arc::new(Inner {
                pool,
                limits: Limits::default(),
                wake: docket_core::local::channel(key),
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
        self.hint(Wake::Queue(queue.to_string()));
    }

    pub(crate) fn hint(&self, w: Wake) {
        let _ = self.inner.wake.send(w);
    }

    /// Runs `f` in one transaction with the server's now (ms), read once inside it; commits
    /// when `f` succeeds, rolls back otherwise. A deadlock or lock-wait timeout the server
    /// resolved by rolling this transaction back is [`StoreError::Unavailable`]: transient,
    /// so the runtime runs the operation again.
    pub(crate) async fn write<T>(
        &self,
        f: impl AsyncFnOnce(&mut MySqlConnection, i64) -> Result<T>,
    ) -> Result<T> {
        self.write_once(f).await
    }

    /// One transaction around `f` (see [`MySqlStore::write`]).
    pub(crate) async fn write_once<T>(
        &self,
        f: impl AsyncFnOnce(&mut MySqlConnection, i64) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let now: i64 = sqlx::query_scalar(NOW)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        let out = f(&mut tx, now).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    /// One transaction around `f`, which reads the clock itself (the claim folds it into its
    /// first statement).
    pub(crate) async fn write_bare<T>(
        &self,
        f: impl AsyncFnOnce(&mut MySqlConnection) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let out = f(&mut tx).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    /// Runs `op` on this store in a task of its own and waits for it. Every [`Store`]
    /// call goes through here because sqlx's MySQL connection is not safe to drop mid-query:
    /// a call cut short (a heartbeat under its timeout, a claim raced against shutdown)
    /// left its connection expecting a reply the server never sends, and the pool's check
    /// of it on return waited for ever — one connection lost per cut until the pool had
    /// none ("pool timed out"). In its own task the statement always finishes and the
    /// connection comes back clean; a caller that stopped waiting just never sees the
    /// result (every write is fenced, so one that lands after its caller gave up is as safe
    /// as a retry).
    pub(crate) async fn detached<T, F>(&self, op: impl FnOnce(MySqlStore) -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        in_own_task(op(self.clone())).await?
    }

    /// The server's now (ms) for a read.
    pub(crate) async fn now_ms(&self) -> Result<i64> {
        sqlx::query_scalar(NOW)
            .fetch_one(&self.inner.pool)
            .await
            .map_err(db_err)
    }
}

impl Store for MySqlStore {
    type Listener = LocalHints;

    async fn migrate(&self) -> Result<()> {
        self.detached(move |s| async move { crate::migrate::run(&s.inner.pool).await })
            .await
    }

    async fn leader_try(&self, owner: &str, ttl: Duration) -> Result<bool> {
        let owner = owner.to_owned();
        self.detached(move |s| async move { s.leader_try_impl(&owner, ttl).await })
            .await
    }

    async fn leader_resign(&self, owner: &str) -> Result<()> {
        let owner = owner.to_owned();
        self.detached(move |s| async move { s.leader_resign_impl(&owner).await })
            .await
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
        let jobs = jobs.to_owned();
        self.detached(move |s| async move { s.enqueue_many_impl(&jobs).await })
            .await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        let req = req.to_owned();
        self.detached(move |s| async move { s.claim_impl(&req).await })
            .await
    }

    async fn complete_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        let owner = owner.to_owned();
        let leases = leases.to_owned();
        self.detached(move |s| async move { s.complete_many_impl(&owner, &leases).await })
            .await
    }

    async fn complete_delete_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        let owner = owner.to_owned();
        let leases = leases.to_owned();
        self.detached(move |s| async move { s.complete_delete_many_impl(&owner, &leases).await })
            .await
    }

    async fn fail_many(&self, owner: &str, failures: &[Failure]) -> Result<BatchOutcome> {
        let owner = owner.to_owned();
        let failures = failures.to_owned();
        self.detached(move |s| async move { s.fail_many_impl(&owner, &failures).await })
            .await
    }

    async fn snooze_many(&self, owner: &str, snoozes: &[Snooze]) -> Result<BatchOutcome> {
        let owner = owner.to_owned();
        let snoozes = snoozes.to_owned();
        self.detached(move |s| async move { s.snooze_many_impl(&owner, &snoozes).await })
            .await
    }

    async fn heartbeat(
        &self,
        owner: &str,
        leases: &[Lease],
        lease: Duration,
    ) -> Result<HeartbeatOutcome> {
        let owner = owner.to_owned();
        let leases = leases.to_owned();
        self.detached(move |s| async move { s.heartbeat_impl(&owner, &leases, lease).await })
            .await
    }

    async fn release_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        let snoozes: Vec<Snooze> = leases
            .iter()
            .map(|&lease| Snooze {
                lease,
                delay: Duration::ZERO,
            })
            .collect();
        let owner = owner.to_owned();
        self.detached(move |s| async move { s.snooze_many_impl(&owner, &snoozes).await })
            .await
    }

    async fn reap(&self, batch: i64) -> Result<ReapReport> {
        self.detached(move |s| async move { s.reap_impl(batch).await })
            .await
    }

    async fn prune(&self, retention: &Retention) -> Result<PruneReport> {
        let retention = retention.to_owned();
        self.detached(move |s| async move { s.prune_impl(&retention).await })
            .await
    }

    async fn retry(&self, id: JobId, extra_attempts: i32) -> Result<JobRecord> {
        self.detached(move |s| async move { s.retry_impl(id, extra_attempts).await })
            .await
    }

    async fn cancel(&self, id: JobId) -> Result<CancelOutcome> {
        self.detached(move |s| async move { s.cancel_impl(id).await })
            .await
    }

    async fn get(&self, id: JobId) -> Result<JobRecord> {
        self.detached(move |s| async move { s.get_impl(id).await })
            .await
    }

    async fn worker_beat(&self, beat: &WorkerBeat, ttl: Duration) -> Result<()> {
        let beat = beat.to_owned();
        self.detached(move |s| async move { s.worker_beat_impl(&beat, ttl).await })
            .await
    }

    async fn worker_gone(&self, owner: &str) -> Result<()> {
        let owner = owner.to_owned();
        self.detached(move |s| async move { s.worker_gone_impl(&owner).await })
            .await
    }

    async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.detached(move |s| async move { s.workers_impl().await })
            .await
    }

    async fn why(&self, id: JobId) -> Result<WhyReport> {
        self.detached(move |s| async move { s.why_impl(id).await })
            .await
    }

    async fn search(&self, query: &JobQuery) -> Result<JobPage> {
        let query = query.to_owned();
        self.detached(move |s| async move { s.search_impl(&query).await })
            .await
    }

    async fn overview(&self, cap: i64) -> Result<Overview> {
        self.detached(move |s| async move { s.overview_impl(cap).await })
            .await
    }

    async fn dead_groups(&self, limit: i64) -> Result<Vec<DeadGroup>> {
        self.detached(move |s| async move { s.dead_groups_impl(limit).await })
            .await
    }

    async fn run_now(&self, id: JobId) -> Result<JobRecord> {
        self.detached(move |s| async move { s.run_now_impl(id).await })
            .await
    }

    async fn record_samples(&self, samples: &[Sample]) -> Result<()> {
        let samples = samples.to_owned();
        self.detached(move |s| async move { s.record_samples_impl(&samples).await })
            .await
    }

    async fn samples(&self, window: Duration) -> Result<Vec<Sample>> {
        self.detached(move |s| async move { s.samples_impl(window).await })
            .await
    }

    async fn audit(&self, entry: &AuditEntry) -> Result<()> {
        let entry = entry.to_owned();
        self.detached(move |s| async move { s.audit_impl(&entry).await })
            .await
    }

    async fn audit_log(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        self.detached(move |s| async move { s.audit_log_impl(limit).await })
            .await
    }

    async fn list(&self, filter: &JobFilter) -> Result<Vec<JobRecord>> {
        let filter = filter.to_owned();
        self.detached(move |s| async move { s.list_impl(&filter).await })
            .await
    }

    async fn active_count(&self, queues: &[String]) -> Result<i64> {
        let queues = queues.to_owned();
        self.detached(move |s| async move { s.active_count_impl(&queues).await })
            .await
    }

    async fn any_active(&self, queues: &[String]) -> Result<bool> {
        let queues = queues.to_owned();
        self.detached(move |s| async move { s.any_active_impl(&queues).await })
            .await
    }

    async fn table_health(&self) -> Result<Option<TableStats>> {
        self.detached(move |s| async move { s.table_health_impl().await })
            .await
    }

    async fn stats(&self) -> Result<Stats> {
        self.detached(move |s| async move { s.stats_impl().await })
            .await
    }

    async fn pause_queue(&self, queue: &str) -> Result<QueueControl> {
        let queue = queue.to_owned();
        self.detached(move |s| async move { s.pause_queue_impl(&queue).await })
            .await
    }

    async fn resume_queue(&self, queue: &str) -> Result<QueueControl> {
        let queue = queue.to_owned();
        self.detached(move |s| async move { s.resume_queue_impl(&queue).await })
            .await
    }

    async fn set_queue_limits(&self, queue: &str, limits: &QueueLimits) -> Result<QueueControl> {
        let queue = queue.to_owned();
        let limits = limits.to_owned();
        self.detached(move |s| async move { s.set_queue_limits_impl(&queue, &limits).await })
            .await
    }

    async fn queue_controls(&self) -> Result<Vec<QueueControl>> {
        self.detached(move |s| async move { s.queue_controls_impl().await })
            .await
    }

    async fn set_key_limit(&self, limit: &KeyLimit) -> Result<()> {
        let limit = limit.to_owned();
        self.detached(move |s| async move { s.set_key_limit_impl(&limit).await })
            .await
    }

    async fn key_limits(&self) -> Result<Vec<KeyLimit>> {
        self.detached(move |s| async move { s.key_limits_impl().await })
            .await
    }

    async fn blocked_keys(&self, limit: i64) -> Result<Vec<BlockedKey>> {
        self.detached(move |s| async move { s.blocked_keys_impl(limit).await })
            .await
    }

    async fn skip(&self, id: JobId) -> Result<JobRecord> {
        self.detached(move |s| async move { s.skip_impl(id).await })
            .await
    }

    async fn unblock_keys(&self, _batch: i32) -> Result<u64> {
        // Nothing is ever flagged here: the claim decides every key under its try-lock, so
        // there is nothing to sweep.
        Ok(0)
    }

    async fn upsert_periodic(&self, def: &Periodic) -> Result<PeriodicState> {
        let def = def.to_owned();
        self.detached(move |s| async move { s.upsert_periodic_impl(&def).await })
            .await
    }

    async fn remove_periodic(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.detached(move |s| async move { s.remove_periodic_impl(&name).await })
            .await
    }

    async fn list_periodic(&self) -> Result<Vec<PeriodicState>> {
        self.detached(move |s| async move { s.list_periodic_impl().await })
            .await
    }

    async fn enqueue_due_periodic(&self, limit: i64) -> Result<Vec<TickEnqueued>> {
        self.detached(move |s| async move { s.enqueue_due_periodic_impl(limit).await })
            .await
    }
}
