//! Maintenance services run by the elected leader: the leader election itself, the reaper
//! and the pruner. Each has a `run_once` that tests drive directly and a periodic loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use docket_core::{PruneReport, ReapReport, Retention, Store, StoreError};
use docket_postgres::PgStore;
use sqlx::{Connection, PgConnection};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// Leader election over a session advisory lock on a dedicated connection. The lock dies
/// with the session, so a leader that loses its connection (crash, network split, server
/// restart) stops being leader at once, and another worker takes over on its next attempt.
pub struct Leader {
    store: PgStore,
    conn: Mutex<Option<PgConnection>>,
    leading: AtomicBool,
}

impl Leader {
    /// A candidate for `store`'s schema.
    pub fn new(store: PgStore) -> Self {
        Leader {
            store,
            conn: Mutex::new(None),
            leading: AtomicBool::new(false),
        }
    }

    /// True while this process holds leadership (as of the last `run_once`).
    pub fn is_leader(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }

    /// Checks an existing leadership, or tries to take it. Returns whether we lead.
    pub async fn run_once(&self) -> bool {
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_mut() {
            match self.store.leader_check(c).await {
                Ok(true) => return true,
                Ok(false) | Err(_) => {
                    warn!("leader connection lost; giving up leadership");
                    *conn = None;
                    self.leading.store(false, Ordering::SeqCst);
                }
            }
        }
        let mut c = match self.store.connect_direct().await {
            Ok(c) => c,
            Err(_) => return false,
        };
        match self.store.leader_try(&mut c).await {
            Ok(true) => {
                info!("became maintenance leader");
                *conn = Some(c);
                self.leading.store(true, Ordering::SeqCst);
                true
            }
            _ => {
                let _ = c.close().await;
                false
            }
        }
    }

    /// Gives up leadership (on shutdown).
    pub async fn resign(&self) {
        let mut conn = self.conn.lock().await;
        if let Some(mut c) = conn.take() {
            let _ = self.store.leader_resign(&mut c).await;
            let _ = c.close().await;
        }
        self.leading.store(false, Ordering::SeqCst);
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
