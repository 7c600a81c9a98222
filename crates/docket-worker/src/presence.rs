//! The presence service: reports this worker to the registry of live workers
//! ([`docket_core::Store::worker_beat`]) every `presence_interval`, with an expiry of three
//! intervals, and removes it when the worker stops. Operators list the live workers
//! (`docket workers`), and "why is this job not running?" checks that one serves the job's
//! queue. A failed report is logged and retried; nothing else depends on it.

use std::sync::Arc;
use std::time::Duration;

use docket_core::{Store, StoreError, WorkerBeat};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::runtime::Shared;
use crate::service::{Cadence, Service};
use crate::supervisor::Phase;

/// Reports this worker alive.
pub(crate) struct Presence<S: Store> {
    pub shared: Arc<Shared<S>>,
    pub cadence: Cadence,
}

impl<S: Store> Presence<S> {
    fn beat(&self) -> WorkerBeat {
        let cfg = &self.shared.config;
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        WorkerBeat {
            owner: cfg.owner.clone(),
            host: crate::config::host_name(),
            pid: std::process::id(),
            queues: cfg.queues.iter().map(|q| q.name.clone()).collect(),
            concurrency: clamp(cfg.queues.iter().map(|q| q.concurrency).sum()),
            in_flight: clamp(self.shared.tracker.len()),
            buffered: clamp(self.shared.pace.values().map(|p| p.buffered()).sum()),
            buffered_by_queue: cfg
                .queues
                .iter()
                .map(|q| clamp(self.shared.pace.get(&q.name).map_or(0, |p| p.buffered())))
                .collect(),
        }
    }

    /// Executing and buffered jobs per queue, as gauges (the database says `running` for
    /// both: only the worker can tell them apart).
    fn gauges(&self) {
        for q in &self.shared.config.queues {
            let executing = self
                .shared
                .run_slots
                .get(&q.name)
                .map_or(0, |s| q.concurrency.saturating_sub(s.available_permits()));
            let buffered = self.shared.pace.get(&q.name).map_or(0, |p| p.buffered());
            ::metrics::gauge!("docket_worker_jobs_executing", "queue" => q.name.clone())
                .set(executing as f64);
            ::metrics::gauge!("docket_worker_jobs_buffered", "queue" => q.name.clone())
                .set(buffered as f64);
        }
    }

    /// One report.
    pub async fn run_once(&self) -> Result<(), StoreError> {
        self.gauges();
        let ttl = self.cadence.every * 3;
        self.shared.store.worker_beat(&self.beat(), ttl).await
    }
}

impl<S: Store> Service for Presence<S> {
    fn name(&self) -> &'static str {
        "presence"
    }

    fn phase(&self) -> Phase {
        // Stopped last: the worker is listed for as long as it holds jobs.
        Phase::Service
    }

    async fn run(self, stop: CancellationToken) {
        let mut last = None;
        while self.cadence.turn("presence", &mut last, &stop).await {
            if let Err(e) = self.run_once().await {
                warn!(error = %e, "presence report failed; retrying at the next interval");
            }
        }
        let gone = self.shared.store.worker_gone(&self.shared.config.owner);
        if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(2), gone).await {
            warn!(error = %e, "could not remove this worker from the registry; it expires");
        }
    }
}
