//! Maintenance services run by the elected leader: the leader election itself, the reaper
//! and the pruner. Each has a `run_once` that tests drive directly and a periodic loop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_core::{PruneReport, ReapReport, Retention, Store, StoreError};
use docket_postgres::PgStore;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// Leader election over a row with an expiry (`sql/leader_try.sql`). A leader renews on
/// every tick; one that crashes, pauses or loses its connection stops renewing and another
/// worker takes over once the row expires. Locally, leadership is trusted only until
/// `renewal sent + ttl`, so a leader that cannot reach the database gives it up on its own.
pub struct Leader {
    store: PgStore,
    owner: String,
    ttl: Duration,
    valid_until: std::sync::Mutex<Option<Instant>>,
}

impl Leader {
    /// A candidate named `owner` whose leadership lasts `ttl` per renewal.
    pub fn new(store: PgStore, owner: impl Into<String>, ttl: Duration) -> Self {
        Leader {
            store,
            owner: owner.into(),
            ttl,
            valid_until: std::sync::Mutex::new(None),
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
        let was = self.is_leader();
        *self.valid_until.lock().expect("poisoned") = leading.then_some(sent + self.ttl);
        match (was, leading) {
            (false, true) => info!(owner = %self.owner, "became maintenance leader"),
            (true, false) => warn!(owner = %self.owner, "lost maintenance leadership"),
            _ => {}
        }
        leading
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

/// The leader loop: keeps trying to lead; while leading, reaps every `reap_interval` and
/// prunes every `prune_interval`.
pub(crate) async fn run_maintenance(
    leader: Arc<Leader>,
    reaper: Reaper<PgStore>,
    pruner: Pruner<PgStore>,
    reap_interval: Duration,
    prune_interval: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(reap_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_prune: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => break,
        }
        if !leader.run_once().await {
            continue;
        }
        if let Err(e) = reaper.run_once().await {
            warn!(error = %e, "reaper pass failed");
        }
        if last_prune.is_none_or(|t| t.elapsed() >= prune_interval) {
            last_prune = Some(tokio::time::Instant::now());
            if let Err(e) = pruner.run_once().await {
                warn!(error = %e, "prune pass failed");
            }
        }
    }
    leader.resign().await;
}
