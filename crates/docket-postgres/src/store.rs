//! [`PgStore`]: every queue operation as one SQL statement from [`crate::queries`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use docket_core::*;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::{Query, QueryAs, QueryScalar};
use sqlx::Postgres;
use sqlx::{PgConnection, PgExecutor, PgPool, Row};

use crate::connect::PoolerMode;
use crate::errors::{db_err, sqlstate};
use crate::queries::Queries;
use crate::rows;

/// Jobs per statement of [`PgStore::enqueue_stream`].
pub const BULK_CHUNK: usize = 10_000;

/// What a streamed bulk enqueue wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkEnqueued {
    /// New jobs.
    pub inserted: u64,
    /// Jobs whose unique key an unfinished job held (not inserted).
    pub duplicates: u64,
}

/// The PostgreSQL store. Cheap to clone (an `Arc`).
#[derive(Clone, Debug)]
pub struct PgStore {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: PgPool,
    schema: String,
    pub(crate) q: Queries,
    pub(crate) limits: Limits,
    pooler: PoolerMode,
    /// Whether an unrecognised transaction-mode pooler may be detected from its errors
    /// (off when the connection string said `pooler=` explicitly).
    detect: bool,
    /// Set once such a pooler was detected: from then on the store runs as with
    /// [`PoolerMode::Transaction`]. Shared by the stores `with_*` derives from one another.
    switched: Arc<AtomicBool>,
    /// The one LISTEN connection shared by this store's output waiters.
    pub(crate) done: crate::outputs::DoneHub,
    /// Where each queue's next claim starts scanning (migration 0036). Shared by the stores
    /// `with_*` derives from one another: one worker's claims, whichever store they use.
    pub(crate) hints: Arc<crate::scan_hint::ScanHints>,
}

/// [`docket_core::engine::IDLE_TRANSACTION_BOUND`] on PostgreSQL: set per transaction
/// (`idle_in_transaction_session_timeout`, `sql/idle_bound.sql`), not per connection, so it
/// also holds on a pool the application built and through a transaction pooler, and a
/// handler's transaction stays unbounded.
pub const IDLE_TRANSACTION_TIMEOUT: Duration = docket_core::engine::IDLE_TRANSACTION_BOUND;

pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl PgStore {
    /// A store on `pool` using the default schema (`docket`).
    pub fn new(pool: PgPool) -> Self {
        Self::with_schema(pool, crate::DEFAULT_SCHEMA).expect("default schema is valid")
    }

    /// A store on `pool` using `schema` (1-48 of `a-z 0-9 _`).
    pub fn with_schema(pool: PgPool, schema: &str) -> Result<Self, ValidationError> {
        validate::schema(schema)?;
        Ok(PgStore {
            inner: Arc::new(Inner {
                pool,
                schema: schema.to_string(),
                q: Queries::render(schema),
                limits: Limits::default(),
                pooler: PoolerMode::Direct,
                detect: true,
                switched: Arc::default(),
                done: Default::default(),
                hints: Arc::default(),
            }),
        })
    }

    /// Replaces the size limits.
    pub fn with_limits(self, limits: Limits) -> Self {
        self.rebuild(|i| i.limits = limits)
    }

    /// Declares how the pool reaches the server. With [`PoolerMode::Transaction`] every
    /// statement runs inside an explicit transaction, so each statement's parse and execute
    /// reach the same server connection behind a transaction-mode pooler (the pool must also
    /// have been built without a statement cache: [`crate::connect::parse`] does both).
    pub fn with_pooler(self, pooler: PoolerMode) -> Self {
        self.rebuild(|i| i.pooler = pooler)
    }

    /// Whether a transaction-mode pooler Docket did not recognise from the connection
    /// string may be detected from the errors it causes (on by default; off for an explicit
    /// `pooler=`). Such a pooler hands one client's named prepared statements to another:
    /// the first statement that meets one fails with "prepared statement \"sqlx_s_1\"
    /// already exists" (or "does not exist"). The store then switches to
    /// [`PoolerMode::Transaction`] for good, says so once in the log, and runs the failed
    /// operation once more — nothing of a statement that failed so was executed.
    pub fn detect_pooler(self, on: bool) -> Self {
        self.rebuild(|i| i.detect = on)
    }

    /// When claims start their scan past what they already took (see
    /// `crates/docket-postgres/src/scan_hint.rs`): for tests, which cannot wait for a real
    /// pin to make claims slow. A fresh state for every queue.
    #[doc(hidden)]
    pub fn with_scan_hints(self, rules: crate::scan_hint::HintRules) -> Self {
        self.rebuild(|i| i.hints = Arc::new(crate::scan_hint::ScanHints::new(rules)))
    }

    fn rebuild(self, change: impl FnOnce(&mut Inner)) -> Self {
        let inner = &self.inner;
        let mut new = Inner {
            pool: inner.pool.clone(),
            schema: inner.schema.clone(),
            q: Queries::render(&inner.schema),
            limits: inner.limits,
            pooler: inner.pooler,
            detect: inner.detect,
            switched: inner.switched.clone(),
            done: Default::default(),
            hints: inner.hints.clone(),
        };
        change(&mut new);
        PgStore {
            inner: Arc::new(new),
        }
    }

    /// Connects a pool of `max_connections` to `url` (a URL or key=value string; TLS and
    /// `pooler=` as in [`crate::connect`]) and builds a store on `schema`. A connection is
    /// made before this returns, so a wrong URL fails at once with its cause.
    pub async fn connect(url: &str, schema: &str, max_connections: u32) -> Result<Self> {
        validate::schema(schema)?;
        let mut target = crate::connect::parse(url).map_err(|e| {
            StoreError::Invalid(ValidationError::Other {
                what: "database url",
                reason: e.to_string(),
            })
        })?;
        let pool = crate::connect::pool(&mut target, "docket", max_connections)
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        Ok(Self::with_schema(pool, schema)?
            .with_pooler(target.pooler)
            .detect_pooler(target.pooler_source != crate::connect::PoolerSource::Explicit))
    }

    /// Creates (when missing) and grants the least-privilege roles of this schema; see
    /// [`crate::roles`]. Run as the schema's owner, with CREATEROLE for new roles.
    pub async fn grant(&self, roles: &crate::roles::Roles) -> Result<()> {
        let sql = crate::roles::grant_script(&self.inner.schema, roles)?;
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        sqlx::Executor::execute(&mut *tx, sql.as_str())
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)
    }

    /// How this store reaches the server: as declared, or [`PoolerMode::Transaction`] once
    /// a pooler was detected (see [`PgStore::detect_pooler`]).
    pub fn pooler(&self) -> PoolerMode {
        if self.inner.switched.load(Ordering::Relaxed) {
            PoolerMode::Transaction
        } else {
            self.inner.pooler
        }
    }

    /// After an error: when it is a transaction-mode pooler's prepared-statement mix-up and
    /// detection is on, switches to [`PoolerMode::Transaction`] (logged by the first store
    /// to see it) and returns true: the operation may run once more.
    pub(crate) fn switched_to_pooler(&self, e: &StoreError) -> bool {
        if !self.inner.detect
            || docket_core::mutants::active(docket_core::mutants::Mutant::PoolerNotDetected)
            || self.pooler() == PoolerMode::Transaction
            || !crate::errors::is_pooler_statement_error(e)
        {
            return false;
        }
        if !self.inner.switched.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %e,
                "the server answers like a transaction-mode pooler (PgBouncer, Supavisor, RDS \
                 Proxy): switched to pooler=transaction — every statement in its own \
                 transaction, no named prepared statements. Add pooler=transaction to the \
                 connection string to start that way"
            );
        }
        true
    }

    /// Named (cached) prepared statements, except behind a transaction-mode pooler: there a
    /// named statement stays on whichever server connection it was prepared on, and sqlx
    /// 0.8 names statements even with the statement cache disabled, so another client's
    /// `sqlx_s_1` collides with ours ("prepared statement already exists").
    fn persistent(&self) -> bool {
        self.pooler() == PoolerMode::Direct
    }

    /// A statement with the prepared-statement mode this store needs.
    pub(crate) fn query<'q>(&self, sql: &'q str) -> Query<'q, Postgres, PgArguments> {
        sqlx::query(sql).persistent(self.persistent())
    }

    /// [`PgStore::query`] for one column.
    pub(crate) fn query_scalar<'q, O>(
        &self,
        sql: &'q str,
    ) -> QueryScalar<'q, Postgres, O, PgArguments>
    where
        (O,): for<'r> sqlx::FromRow<'r, PgRow>,
    {
        sqlx::query_scalar(sql).persistent(self.persistent())
    }

    /// [`PgStore::query`] into a tuple or row type.
    #[allow(dead_code)]
    pub(crate) fn query_as<'q, O>(&self, sql: &'q str) -> QueryAs<'q, Postgres, O, PgArguments>
    where
        O: for<'r> sqlx::FromRow<'r, PgRow>,
    {
        sqlx::query_as(sql).persistent(self.persistent())
    }

    /// Runs `f` on one pooled connection. Behind a transaction-mode pooler, inside a
    /// transaction: sqlx sends a statement's parse and its execute as two protocol exchanges,
    /// and between them the pooler may hand the server connection to another client.
    ///
    /// A transaction-mode pooler detected by the error it causes (see
    /// [`PgStore::detect_pooler`]) switches the store, and `f` runs once more.
    /// (`f` is cloned for that, on every call: callers capture references and small
    /// values, never an owned array, so the clone copies pointers.)
    pub(crate) async fn run<T>(
        &self,
        f: impl AsyncFnOnce(&mut PgConnection) -> Result<T> + Clone,
    ) -> Result<T> {
        let again = f.clone();
        match self.run_once(f).await {
            Err(e) if self.switched_to_pooler(&e) => self.run_once(again).await,
            other => other,
        }
    }

    /// Begins one of Docket's own multi-statement transactions, bounded by
    /// [`IDLE_TRANSACTION_TIMEOUT`] (one more round trip; none of these is on a per-job path).
    pub(crate) async fn begin_bounded(&self) -> Result<sqlx::Transaction<'static, Postgres>> {
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let bound =
            if docket_core::mutants::active(docket_core::mutants::Mutant::PgNoIdleTransactionBound)
            {
                0
            } else {
                ms(IDLE_TRANSACTION_TIMEOUT)
            };
        self.query(&self.inner.q.idle_bound)
            .bind(bound.to_string())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        Ok(tx)
    }

    async fn run_once<T>(&self, f: impl AsyncFnOnce(&mut PgConnection) -> Result<T>) -> Result<T> {
        match self.pooler() {
            PoolerMode::Direct => {
                let mut c = self.inner.pool.acquire().await.map_err(db_err)?;
                f(&mut c).await
            }
            PoolerMode::Transaction => {
                let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
                let out = f(&mut tx).await?;
                tx.commit().await.map_err(db_err)?;
                Ok(out)
            }
        }
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The schema name.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// The size limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The rendered SQL of this store.
    pub fn queries(&self) -> &Queries {
        &self.inner.q
    }

    /// Channel on which enqueue announces a queue with due work (payload: queue name).
    pub fn wakeup_channel(&self) -> String {
        format!("{}_wakeup", self.inner.schema)
    }

    /// Channel on which cancel announces a running job to stop (payload: job id).
    pub fn cancel_channel(&self) -> String {
        format!("{}_cancel", self.inner.schema)
    }

    /// Enqueues one job inside the caller's transaction: the job exists iff it commits, and
    /// its wake-up notification is delivered only then.
    pub async fn enqueue_tx(&self, conn: &mut PgConnection, job: &NewJob) -> Result<Enqueued> {
        let mut v = self
            .enqueue_many_on(conn, std::slice::from_ref(job))
            .await?;
        Ok(v.remove(0))
    }

    /// Bulk form of [`PgStore::enqueue_tx`].
    pub async fn enqueue_many_tx(
        &self,
        conn: &mut PgConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_in_tx(conn, jobs).await
    }

    /// Enqueues every job of `jobs` in one transaction, [`BULK_CHUNK`] at a time (by COPY
    /// when worthwhile): all of them or, on the first invalid job or error, none; memory is
    /// bounded by one chunk however long the stream (a million-line import does not hold a
    /// million jobs). Returns counts, not ids, for the same reason.
    pub async fn enqueue_stream<S>(&self, jobs: S) -> Result<BulkEnqueued>
    where
        S: futures::Stream<Item = NewJob> + Send,
    {
        use futures::StreamExt;
        let mut jobs = std::pin::pin!(jobs);
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let mut out = BulkEnqueued::default();
        let mut chunk = Vec::with_capacity(BULK_CHUNK);
        loop {
            let next = jobs.next().await;
            let end = next.is_none();
            chunk.extend(next);
            if chunk.len() >= BULK_CHUNK || (end && !chunk.is_empty()) {
                let res = self.enqueue_in_tx(&mut tx, &chunk).await?;
                let dups = res.iter().filter(|e| e.duplicate).count() as u64;
                out.duplicates += dups;
                out.inserted += res.len() as u64 - dups;
                chunk.clear();
            }
            if end {
                break;
            }
        }
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    /// [`PgStore::enqueue_stream`] over an iterator.
    pub async fn enqueue_iter<I>(&self, jobs: I) -> Result<BulkEnqueued>
    where
        I: IntoIterator<Item = NewJob>,
        I::IntoIter: Send,
    {
        self.enqueue_stream(futures::stream::iter(jobs)).await
    }

    /// The `EXPLAIN` of the statements the claim runs for `queue` on the current data, read
    /// from the live `claim()` and `claim_controlled()` (see `explain.rs`). Runs inside a
    /// transaction that is rolled back, so `ANALYZE` claims nothing.
    pub async fn explain_claim(&self, queue: &str, analyze: bool) -> Result<String> {
        let mut tx = self.inner.pool.begin().await.map_err(db_err)?;
        let out = crate::explain::explain_claim(&mut tx, &self.inner.schema, queue, analyze).await;
        tx.rollback().await.map_err(db_err)?;
        out
    }

    /// Sends a notification (delivered at commit of the surrounding transaction, or at once
    /// on the pool).
    pub(crate) async fn notify<'e, E: PgExecutor<'e>>(
        &self,
        exec: E,
        channel: &str,
        payload: &str,
    ) -> Result<()> {
        self.query(&self.inner.q.notify)
            .bind(channel)
            .bind(payload)
            .execute(exec)
            .await
            .map_err(db_err)?;
        Ok(())
    }
}

impl Store for PgStore {
    type Listener = crate::engine::PgHints;

    async fn migrate(&self) -> Result<()> {
        crate::migrate(&self.inner.pool, &self.inner.schema).await
    }

    async fn leader_try(&self, owner: &str, ttl: Duration) -> Result<bool> {
        self.leader_try_sql(owner, ttl).await
    }

    async fn leader_resign(&self, owner: &str) -> Result<()> {
        self.leader_resign_sql(owner).await
    }

    fn listen_support(&self, direct_url: Option<&str>) -> ListenSupport {
        self.listen_support_for(direct_url)
    }

    async fn listen(&self, direct_url: Option<&str>) -> Result<crate::engine::PgHints> {
        crate::engine::PgHints::connect(self, direct_url).await
    }

    async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let mut v = self
            .run(async |c: &mut PgConnection| {
                self.enqueue_many_on(c, std::slice::from_ref(job)).await
            })
            .await?;
        Ok(v.remove(0))
    }

    async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        if !crate::enqueue::copy_worthwhile(jobs) {
            return self
                .run(async |c: &mut PgConnection| self.enqueue_many_on(c, jobs).await)
                .await;
        }
        let mut tx = self.begin_bounded().await?;
        let out = self.enqueue_in_tx(&mut tx, jobs).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        self.claim_impl(req).await
    }

    async fn complete_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        self.complete_with(&self.inner.q.complete_many, owner, leases)
            .await
    }

    async fn complete_outputs(&self, owner: &str, outputs: &[Output]) -> Result<BatchOutcome> {
        self.complete_outputs_impl(owner, outputs).await
    }

    async fn complete_nodes(&self, owner: &str, nodes: &[NodeDone]) -> Result<BatchOutcome> {
        self.complete_nodes_impl(owner, nodes).await
    }

    async fn enqueue_workflow(
        &self,
        graph: &docket_core::workflow::Graph,
    ) -> Result<WorkflowEnqueued> {
        self.enqueue_workflow_impl(graph).await
    }

    async fn dep_outputs(&self, id: JobId) -> Result<Vec<DepOutput>> {
        self.dep_outputs_impl(id).await
    }

    async fn workflows(&self, limit: i64) -> Result<Vec<docket_core::workflow::WorkflowSummary>> {
        self.workflows_impl(limit).await
    }

    async fn workflow(&self, id: i64) -> Result<docket_core::workflow::WorkflowDetail> {
        self.workflow_impl(id).await
    }

    async fn skip_edge(&self, parent: JobId, child: JobId) -> Result<JobRecord> {
        self.skip_edge_impl(parent, child).await
    }

    async fn open_batch(
        &self,
        spec: &docket_core::batches::BatchSpec,
    ) -> Result<docket_core::batches::BatchOpened> {
        self.open_batch_impl(spec).await
    }

    async fn add_to_batch(
        &self,
        id: i64,
        jobs: &[docket_core::batches::JobSpec],
    ) -> Result<Vec<JobId>> {
        self.add_to_batch_impl(id, jobs).await
    }

    async fn close_batch(&self, id: i64) -> Result<docket_core::batches::BatchStatus> {
        self.close_batch_impl(id).await
    }

    async fn publish(&self, msg: &docket_core::outbox::NewMessage) -> Result<i64> {
        self.publish_impl(msg).await
    }

    async fn outbox_origin(&self) -> Result<String> {
        self.outbox_origin_impl().await
    }

    async fn outbox_claim(
        &self,
        relay: &str,
        limit: i64,
        lease: Duration,
    ) -> Result<Vec<docket_core::outbox::OutboxMessage>> {
        self.outbox_claim_impl(relay, limit, lease).await
    }

    async fn outbox_mark(&self, done: &[docket_core::outbox::Published]) -> Result<u64> {
        self.outbox_mark_impl(done).await
    }

    async fn outbox_fail(
        &self,
        id: i64,
        attempt: i32,
        error: &str,
        retry_in: Duration,
    ) -> Result<bool> {
        self.outbox_fail_impl(id, attempt, error, retry_in).await
    }

    async fn outbox_stats(&self) -> Result<docket_core::outbox::OutboxStats> {
        self.outbox_stats_impl().await
    }

    async fn outbox_list(
        &self,
        state: docket_core::outbox::OutboxState,
        limit: i64,
    ) -> Result<Vec<docket_core::outbox::OutboxRow>> {
        self.outbox_list_impl(state, limit).await
    }

    async fn prune_outbox(&self, retention: Duration, limit: i64) -> Result<u64> {
        self.prune_outbox_impl(retention, limit).await
    }

    async fn batch(&self, id: i64) -> Result<docket_core::batches::BatchStatus> {
        self.batch_impl(id).await
    }

    async fn batches(&self, limit: i64) -> Result<Vec<docket_core::batches::BatchStatus>> {
        self.batches_impl(limit).await
    }

    async fn spawn_nodes(
        &self,
        owner: &str,
        lease: Lease,
        step: &str,
        graph: &docket_core::workflow::Graph,
    ) -> Result<WorkflowEnqueued> {
        self.spawn_nodes_impl(owner, lease, step, graph).await
    }

    async fn record_steps(
        &self,
        owner: &str,
        steps: &[StepWrite],
    ) -> Result<Vec<std::result::Result<StepRecorded, LeaseLost>>> {
        self.record_steps_impl(owner, steps).await
    }

    async fn job_steps(&self, id: JobId) -> Result<Vec<StepRecord>> {
        self.job_steps_impl(id).await
    }

    async fn park_many(&self, owner: &str, parks: &[Park]) -> Result<BatchOutcome> {
        self.park_many_impl(owner, parks).await
    }

    async fn signal(
        &self,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<SignalSent> {
        self.signal_impl(id, name, payload).await
    }

    async fn job_signal(&self, id: JobId, name: &str) -> Result<Option<serde_json::Value>> {
        self.job_signal_impl(id, name).await
    }

    async fn progress_many(&self, owner: &str, reports: &[Progress]) -> Result<BatchOutcome> {
        self.progress_many_impl(owner, reports).await
    }

    async fn complete_delete_many(&self, owner: &str, leases: &[Lease]) -> Result<BatchOutcome> {
        self.complete_with(&self.inner.q.complete_delete_many, owner, leases)
            .await
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
        self.snooze_many(owner, &snoozes).await
    }

    async fn reap(&self, batch: i64) -> Result<ReapReport> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.reap)
                    .bind(batch.max(1))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut report = ReapReport::default();
        for r in &rows {
            let st: String = r.try_get("state").map_err(db_err)?;
            report.jobs.push(Reaped {
                id: JobId(r.try_get("id").map_err(db_err)?),
                attempt: r.try_get("attempt").map_err(db_err)?,
                owner: r.try_get("lease_owner").map_err(db_err)?,
                queue: r.try_get("queue").map_err(db_err)?,
                state: rows::state(&st)?,
            });
        }
        Ok(report)
    }

    async fn prune(&self, retention: &Retention) -> Result<PruneReport> {
        let mut report = PruneReport::default();
        let batch = retention.batch.max(1);
        let outputs = ms(retention.outputs);
        for (states, keep, counter) in [
            (
                vec!["succeeded", "cancelled"],
                retention.finished,
                &mut report.finished,
            ),
            (vec!["dead"], retention.dead, &mut report.dead),
        ] {
            loop {
                let n: i64 = self
                    .run(async |c: &mut PgConnection| {
                        self.query_scalar(&self.inner.q.prune)
                            .bind(&states)
                            .bind(ms(keep))
                            .bind(outputs)
                            .bind(batch)
                            .fetch_one(&mut *c)
                            .await
                            .map_err(db_err)
                    })
                    .await?;
                let n = u64::try_from(n).unwrap_or(0);
                *counter += n;
                if n < batch as u64 {
                    break;
                }
            }
        }
        report.steps = self.prune_steps(batch).await?;
        report.workflow_rows = self.prune_workflows(batch).await?;
        Ok(report)
    }

    async fn retry(&self, id: JobId, extra_attempts: i32) -> Result<JobRecord> {
        if !(1..=1000).contains(&extra_attempts) {
            return Err(ValidationError::MaxAttempts(extra_attempts).into());
        }
        let mut tx = self.begin_bounded().await?;
        let res = self
            .query(&self.inner.q.retry)
            .bind(id.0)
            .bind(extra_attempts)
            .fetch_optional(&mut *tx)
            .await;
        match res {
            Ok(Some(_)) => {}
            Ok(None) => {
                drop(tx);
                let job = self.get(id).await?;
                return Err(StoreError::WrongState {
                    id,
                    state: job.state,
                    op: "retry (only dead or cancelled jobs can be retried)",
                });
            }
            Err(e) if sqlstate(&e).as_deref() == Some("23505") => {
                drop(tx);
                let job = self.get(id).await?;
                let key = job.unique_key.unwrap_or_default();
                let holder: i64 = self
                    .run(async |c: &mut PgConnection| {
                        self.query_scalar(&self.inner.q.unique_holder)
                            .bind(&key)
                            .fetch_optional(&mut *c)
                            .await
                            .map_err(db_err)
                    })
                    .await?
                    .unwrap_or_default();
                return Err(StoreError::UniqueConflict {
                    key,
                    holder: JobId(holder),
                });
            }
            Err(e) => return Err(db_err(e)),
        }
        let rec = self
            .query(&self.inner.q.get)
            .bind(id.0)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        let rec = rows::record(&rec)?;
        self.notify(&mut *tx, &self.wakeup_channel(), &rec.queue)
            .await?;
        tx.commit().await.map_err(db_err)?;
        Ok(rec)
    }

    async fn cancel(&self, id: JobId) -> Result<CancelOutcome> {
        let mut tx = self.begin_bounded().await?;
        let prev: Option<String> = self
            .query_scalar(&self.inner.q.cancel)
            .bind(id.0)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
        let outcome = match prev.as_deref() {
            Some("pending" | "waiting") => CancelOutcome::Cancelled,
            Some(_) => {
                self.notify(&mut *tx, &self.cancel_channel(), &id.to_string())
                    .await?;
                CancelOutcome::Requested
            }
            None => {
                drop(tx);
                let job = self.get(id).await?;
                return Err(StoreError::WrongState {
                    id,
                    state: job.state,
                    op: "cancel (it already finished)",
                });
            }
        };
        tx.commit().await.map_err(db_err)?;
        Ok(outcome)
    }

    async fn get(&self, id: JobId) -> Result<JobRecord> {
        let row = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.get)
                    .bind(id.0)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        match row {
            Some(r) => rows::record(&r),
            None => Err(StoreError::NotFound(id)),
        }
    }

    async fn job_output(&self, id: JobId) -> Result<JobOutput> {
        self.output_impl(id).await
    }

    async fn listen_outputs(&self, direct_url: Option<&str>) -> Result<crate::engine::PgHints> {
        self.listen_outputs_impl(direct_url).await
    }

    async fn worker_beat(&self, beat: &WorkerBeat, ttl: Duration) -> Result<()> {
        self.worker_beat_impl(beat, ttl).await
    }

    async fn worker_gone(&self, owner: &str) -> Result<()> {
        self.worker_gone_impl(owner).await
    }
    async fn registry(&self, window: Duration) -> Result<Registry> {
        self.registry_impl(window).await
    }

    async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.workers_impl().await
    }

    async fn why(&self, id: JobId) -> Result<WhyReport> {
        self.why_impl(id).await
    }

    async fn list(&self, filter: &JobFilter) -> Result<Vec<JobRecord>> {
        if let Some(q) = &filter.queue {
            validate::queue(q)?;
        }
        let limit = if filter.limit <= 0 { 100 } else { filter.limit };
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.list)
                    .bind(filter.queue.as_deref())
                    .bind(filter.state.map(|s| s.as_str()))
                    .bind(limit)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter().map(rows::record).collect()
    }

    async fn active_count(&self, queues: &[String]) -> Result<i64> {
        self.run(async |c: &mut PgConnection| {
            self.query_scalar(&self.inner.q.active_count)
                .bind(queues)
                .fetch_one(&mut *c)
                .await
                .map_err(db_err)
        })
        .await
    }

    async fn any_active(&self, queues: &[String]) -> Result<bool> {
        self.run(async |c: &mut PgConnection| {
            self.query_scalar(&self.inner.q.any_active)
                .bind(queues)
                .fetch_one(&mut *c)
                .await
                .map_err(db_err)
        })
        .await
    }

    async fn stats(&self) -> Result<Stats> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.stats_queues)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut queues = Vec::with_capacity(rows.len());
        for r in &rows {
            queues.push(QueueStats {
                queue: r.try_get("queue").map_err(db_err)?,
                pending: r.try_get("pending").map_err(db_err)?,
                ready: r.try_get("ready").map_err(db_err)?,
                waiting: r.try_get("waiting").map_err(db_err)?,
                running: r.try_get("running").map_err(db_err)?,
                succeeded: r.try_get("succeeded").map_err(db_err)?,
                dead: r.try_get("dead").map_err(db_err)?,
                cancelled: r.try_get("cancelled").map_err(db_err)?,
                oldest_ready_age_s: r.try_get("oldest_ready_age_s").map_err(db_err)?,
                oldest_waiting_age_s: r.try_get("oldest_waiting_age_s").map_err(db_err)?,
                running_near_expiry: r.try_get("running_near_expiry").map_err(db_err)?,
                running_expired: r.try_get("running_expired").map_err(db_err)?,
                oldest_dead_age_s: r.try_get("oldest_dead_age_s").map_err(db_err)?,
                blocked: r.try_get("blocked").map_err(db_err)?,
                paused: r.try_get("paused").map_err(db_err)?,
            });
        }
        let table = self.table_health().await?;
        Ok(Stats { queues, table })
    }

    async fn table_health(&self) -> Result<Option<TableStats>> {
        let t = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.stats_table)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let table = match t {
            Some(r) => Some(TableStats {
                live_tuples: r.try_get("live_tuples").map_err(db_err)?,
                dead_tuples: r.try_get("dead_tuples").map_err(db_err)?,
                last_vacuum: r.try_get("last_vacuum").map_err(db_err)?,
                last_autovacuum: r.try_get("last_autovacuum").map_err(db_err)?,
                total_bytes: r.try_get("total_bytes").map_err(db_err)?,
                index_bytes: r.try_get("index_bytes").map_err(db_err)?,
            }),
            None => None,
        };
        Ok(table)
    }

    async fn pause_queue(&self, queue: &str) -> Result<QueueControl> {
        self.pause_queue_impl(queue).await
    }
    async fn resume_queue(&self, queue: &str) -> Result<QueueControl> {
        self.resume_queue_impl(queue).await
    }
    async fn remove_queue(&self, queue: &str) -> Result<bool> {
        self.remove_queue_impl(queue).await
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
    async fn search(&self, query: &JobQuery) -> Result<JobPage> {
        self.search_impl(query).await
    }
    async fn overview(&self, cap: i64) -> Result<Overview> {
        self.overview_impl(cap).await
    }
    async fn queue_health(&self, cap: i64) -> Result<Vec<docket_core::QueueHealth>> {
        self.queue_health_impl(cap).await
    }
    async fn sample_depth(&self, cap: i64) -> Result<()> {
        self.sample_depth_impl(cap).await
    }
    async fn depth_history(&self, window: Duration) -> Result<Vec<docket_core::DepthSample>> {
        self.depth_history_impl(window).await
    }
    async fn dead_groups(&self, limit: i64) -> Result<Vec<DeadGroup>> {
        self.dead_groups_impl(limit).await
    }
    async fn errored_jobs(&self, per_state: i64) -> Result<Vec<docket_core::ErroredJob>> {
        self.errored_jobs_impl(per_state).await
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
    async fn skip(&self, id: JobId) -> Result<JobRecord> {
        self.skip_impl(id).await
    }
    async fn unblock_keys(&self, batch: i32) -> Result<u64> {
        self.unblock_keys_impl(batch).await
    }

    async fn hand_over_keys(&self, batch: i32) -> Result<u64> {
        self.hand_over_keys_impl(batch).await
    }
    async fn upsert_periodic(&self, def: &Periodic) -> Result<PeriodicState> {
        self.upsert_periodic_impl(def).await
    }
    async fn remove_periodic(&self, name: &str) -> Result<bool> {
        self.remove_periodic_impl(name).await
    }
    async fn pause_periodic(&self, name: &str, paused: bool) -> Result<bool> {
        self.pause_periodic_impl(name, paused).await
    }
    async fn list_periodic(&self) -> Result<Vec<PeriodicState>> {
        self.list_periodic_impl().await
    }
    async fn enqueue_due_periodic(&self, limit: i64) -> Result<Vec<TickEnqueued>> {
        self.enqueue_due_periodic_impl(limit).await
    }
}
