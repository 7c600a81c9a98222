//! Maintenance run by the elected leader: the leader election itself, the reaper, the
//! pruner, the periodic-job scheduler and the key sweeper. Each has a `run_once` that tests
//! drive directly; each runs as its own service with its own interval
//! (`crate::service::WhileLeading`, `crate::service::Election`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_core::{PruneReport, ReapReport, Retention, Store, StoreError, TickEnqueued};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// Leader election over a row with an expiry (`sql/leader_try.sql`). A leader renews on
/// every tick; one that crashes, pauses or loses its connection stops renewing and another
/// worker takes over once the row expires. Locally, leadership is trusted only until
/// `renewal sent + ttl`, so a leader that cannot reach the database gives it up on its own.
pub struct Leader<S: Store> {
    store: S,
    owner: String,
    ttl: Duration,
    valid_until: std::sync::Mutex<Option<Instant>>,
    /// Told after every renewal attempt, so leader-gated services start at once on winning.
    renewed: tokio::sync::watch::Sender<bool>,
}

impl<S: Store> Leader<S> {
    /// A candidate named `owner` whose leadership lasts `ttl` per renewal.
    pub fn new(store: S, owner: impl Into<String>, ttl: Duration) -> Self {
        Leader {
            store,
            owner: owner.into(),
            ttl,
            valid_until: std::sync::Mutex::new(None),
            renewed: tokio::sync::watch::channel(false).0,
        }
    }

    /// True while this process holds leadership.
    pub fn is_leader(&self) -> bool {
        self.valid_until
            .lock()
            .expect("poisoned")
            .is_some_and(|t| Instant::now() < t)
    }

    /// Takes or renews leadership. Returns whether we lead.
    pub async fn run_once(&self) -> bool {
        let sent = Instant::now();
        let got =
            tokio::time::timeout(self.ttl / 2, self.store.leader_try(&self.owner, self.ttl)).await;
        let leading = matches!(got, Ok(Ok(true)));
        // Held at the last renewal, even if that leadership has run out locally since (a
        // paused process): losing it is worth saying either way.
        let was = self.valid_until.lock().expect("poisoned").is_some();
        *self.valid_until.lock().expect("poisoned") = leading.then_some(sent + self.ttl);
        match (was, leading) {
            (false, true) => info!(owner = %self.owner, "became maintenance leader"),
            (true, false) => warn!(owner = %self.owner, "lost maintenance leadership"),
            _ => {}
        }
        self.renewed.send_replace(leading);
        leading
    }

    /// Waits until this process leads (at once when it does). False when `stop` fired.
    pub(crate) async fn wait_leading(&self, stop: &CancellationToken) -> bool {
        let mut renewed = self.renewed.subscribe();
        loop {
            if self.is_leader() {
                return true;
            }
            tokio::select! {
                r = renewed.changed() => if r.is_err() { return false },
                _ = stop.cancelled() => return false,
            }
        }
    }

    /// Gives up leadership (on shutdown) so another worker takes over at once.
    pub async fn resign(&self) {
        if self.valid_until.lock().expect("poisoned").take().is_some() {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                self.store.leader_resign(&self.owner),
            )
            .await;
        }
    }
}

/// Returns expired leases to the queue, batch after batch, until none is left.
pub struct Reaper<S: Store> {
    store: S,
    batch: i64,
    metrics: Arc<Metrics>,
}

impl<S: Store> Reaper<S> {
    /// A reaper of `batch` rows per statement.
    pub fn new(store: S, batch: i64, metrics: Arc<Metrics>) -> Self {
        Reaper {
            store,
            batch: batch.max(1),
            metrics,
        }
    }

    /// One sweep: bounded batches until a batch comes back short.
    pub async fn run_once(&self) -> Result<ReapReport, StoreError> {
        let mut all = ReapReport::default();
        loop {
            let r = self.store.reap(self.batch).await?;
            let n = r.jobs.len();
            all.jobs.extend(r.jobs);
            if (n as i64) < self.batch {
                break;
            }
        }
        if !all.jobs.is_empty() {
            info!(
                requeued = all.requeued(),
                dead = all.dead(),
                "reaped expired leases"
            );
        }
        Metrics::add(&self.metrics.reaped, all.jobs.len() as u64);
        for j in &all.jobs {
            ::metrics::counter!("docket_jobs_reaped_total", "queue" => j.queue.clone(),
                                "to" => j.state.as_str())
            .increment(1);
        }
        Ok(all)
    }
}

/// Deletes finished jobs past their retention.
pub struct Pruner<S: Store> {
    store: S,
    retention: Retention,
}

impl<S: Store> Pruner<S> {
    /// A pruner with `retention`.
    pub fn new(store: S, retention: Retention) -> Self {
        Pruner { store, retention }
    }

    /// One pass.
    pub async fn run_once(&self) -> Result<PruneReport, StoreError> {
        let r = self.store.prune(&self.retention).await?;
        if r.finished + r.dead > 0 {
            info!(finished = r.finished, dead = r.dead, "pruned finished jobs");
        }
        Ok(r)
    }
}

/// Enqueues due periodic ticks. Exactly-once per tick is the store's compare-and-set, so
/// two leaders overlapping for a moment (a paused one waking up) still enqueue each tick once.
pub struct Scheduler<S: Store> {
    store: S,
}

impl<S: Store> Scheduler<S> {
    /// A scheduler over `store`.
    pub fn new(store: S) -> Self {
        Scheduler { store }
    }

    /// One pass over every due definition.
    pub async fn run_once(&self) -> Result<Vec<TickEnqueued>, StoreError> {
        const BATCH: i64 = 100;
        let mut all = Vec::new();
        loop {
            let done = self.store.enqueue_due_periodic(BATCH).await?;
            let names: std::collections::HashSet<&str> =
                done.iter().map(|t| t.name.as_str()).collect();
            let more = names.len() as i64 >= BATCH;
            all.extend(done);
            if !more {
                break;
            }
        }
        for t in &all {
            info!(periodic = %t.name, tick = %t.tick, job = %t.job, duplicate = t.duplicate, "periodic tick enqueued");
        }
        Ok(all)
    }
}

/// The safety net for jobs flagged blocked by their key: unflags those whose key could run
/// now (see migration 0005). Normally the key's own release does this at once.
pub struct KeySweeper<S: Store> {
    store: S,
    batch: i32,
}

impl<S: Store> KeySweeper<S> {
    /// A sweeper looking at up to `batch` keys of each kind per pass.
    pub fn new(store: S, batch: i32) -> Self {
        KeySweeper { store, batch }
    }

    /// One pass; returns how many jobs were unflagged.
    pub async fn run_once(&self) -> Result<u64, StoreError> {
        let n = self.store.unblock_keys(self.batch).await?;
        if n > 0 {
            info!(unblocked = n, "key sweep released blocked jobs");
        }
        Ok(n)
    }
}

/// Hands on the keys whose release could not be done when their job finished (the key's
/// lock was held by a claim flagging the next job): recorded in the finishing transaction,
/// handed on here at every reap interval instead of waiting for the full sweep.
pub struct KeyHandOver<S: Store> {
    store: S,
    batch: i32,
}

impl<S: Store> KeyHandOver<S> {
    /// A pass handing on up to `batch` recorded keys.
    pub fn new(store: S, batch: i32) -> Self {
        KeyHandOver { store, batch }
    }

    /// One pass; returns how many jobs were unflagged.
    pub async fn run_once(&self) -> Result<u64, StoreError> {
        let n = self.store.hand_over_keys(self.batch).await?;
        if n > 0 {
            info!(unblocked = n, "recorded key hand-overs done");
        }
        Ok(n)
    }
}

/// Samples every queue's depth once a minute (`Store::sample_depth`): the history behind
/// the queues page's backlog chart, its enqueue rate and its "growing backlog" flag.
pub struct DepthSampler<S: Store> {
    store: S,
}

impl<S: Store> DepthSampler<S> {
    /// How often the leader samples (the store keeps the first sample of each minute).
    pub const INTERVAL: Duration = Duration::from_secs(60);

    /// Waiting counts stop here per queue, as the overview's gauges do.
    pub const CAP: i64 = 100_000;

    /// A sampler over `store`.
    pub fn new(store: S) -> Self {
        DepthSampler { store }
    }

    /// One sample.
    pub async fn run_once(&self) -> Result<(), StoreError> {
        self.store.sample_depth(Self::CAP).await
    }
}
