//! The heartbeater: extends the leases of every job in flight in one statement, well before
//! they expire, and stops the jobs whose lease is gone.

use std::sync::Arc;
use std::time::Instant;

use docket_core::{Lease, Progress, Store};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::metrics::Metrics;
use crate::runtime::Shared;
use crate::tracker::StopReason;

/// What one beat did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BeatReport {
    /// Leases extended.
    pub extended: usize,
    /// Jobs stopped because their lease was lost (by the database, or presumed locally).
    pub lost: usize,
    /// Jobs stopped because an operator cancelled them.
    pub cancelled: usize,
}

/// Extends leases.
pub(crate) struct Heartbeater<S: Store> {
    pub shared: Arc<Shared<S>>,
}

impl<S: Store> Heartbeater<S> {
    /// One beat.
    pub async fn run_once(&self) -> BeatReport {
        let entries: Vec<_> = self
            .shared
            .tracker
            .all()
            .into_iter()
            .filter(|e| e.reason() != Some(StopReason::LeaseLost))
            .collect();
        let mut report = BeatReport::default();
        if entries.is_empty() {
            return report;
        }
        let leases: Vec<Lease> = entries.iter().map(|e| e.lease).collect();
        let lease = self.shared.config.lease;
        let sent_at = Instant::now();
        // Bounded: a connection that hangs silently must not delay the local-deadline check
        // below past the lease.
        let beat = tokio::time::timeout(
            self.shared.config.heartbeat_interval,
            self.shared
                .store
                .heartbeat(&self.shared.config.owner, &leases, lease),
        )
        .await
        .unwrap_or_else(|_| {
            Err(docket_core::StoreError::Unavailable(
                "heartbeat timed out".into(),
            ))
        });
        let tracked = |l: &Lease| self.shared.tracker.get(l.id).filter(|e| e.lease == *l);
        match beat {
            Ok(out) => {
                for (l, _) in &out.extended {
                    if let Some(e) = tracked(l) {
                        e.extend(sent_at + lease);
                    }
                }
                report.extended = out.extended.len();
                for l in &out.cancel_requested {
                    if let Some(e) = tracked(l) {
                        e.stop(StopReason::Cancelled);
                        report.cancelled += 1;
                    }
                }
                for lost in &out.lost {
                    // A job whose outcome the completer is writing right now shows up as
                    // "not running" here: that is our own completion, not a lost lease.
                    if let Some(e) = tracked(&lost.lease).filter(|e| !e.is_finished()) {
                        warn!(job = %lost.lease.id, reason = %lost.reason, "lease lost; stopping the handler");
                        e.stop(StopReason::LeaseLost);
                        self.shared.telemetry.lease_lost(&e.labels);
                        report.lost += 1;
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "heartbeat failed; will retry");
            }
        }
        self.write_progress(&entries).await;
        Metrics::add(&self.shared.metrics.leases_lost, report.lost as u64);
        report
    }

    /// Writes the progress reported since the last beat (one statement, only when there is
    /// any). A report that fails to be written is dropped: the next one replaces it anyway.
    async fn write_progress(&self, entries: &[std::sync::Arc<crate::tracker::InFlight>]) {
        let reports: Vec<Progress> = entries
            .iter()
            .filter(|e| e.reason() != Some(StopReason::LeaseLost) && !e.is_finished())
            .filter_map(|e| {
                let (percent, message) = e.take_progress()?;
                Some(Progress {
                    lease: e.lease,
                    percent,
                    message,
                })
            })
            .collect();
        if reports.is_empty() {
            return;
        }
        let write = self
            .shared
            .store
            .progress_many(&self.shared.config.owner, &reports);
        match tokio::time::timeout(self.shared.config.heartbeat_interval, write).await {
            Ok(Ok(out)) => {
                for lost in &out.lost {
                    tracing::debug!(job = %lost.lease.id, reason = %lost.reason, "progress fenced off");
                }
            }
            Ok(Err(e)) => warn!(error = %e, "progress not written"),
            Err(_) => warn!("progress not written: timed out"),
        }
    }
}

impl<S: Store> crate::service::Service for Heartbeater<S> {
    fn name(&self) -> &'static str {
        "heartbeater"
    }

    fn phase(&self) -> crate::supervisor::Phase {
        // Stopped last: leases stay alive until every outcome is written.
        crate::supervisor::Phase::Service
    }

    /// Beats every `heartbeat_interval` until `stop` fires, and early when a cancel
    /// notification arrives (at most every 50 ms, so a flood of forged notifications costs
    /// one statement per 50 ms and nothing else).
    async fn run(self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.shared.config.heartbeat_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.shared.beat_now.notified() => {
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
                        _ = stop.cancelled() => return,
                    }
                }
                _ = stop.cancelled() => return,
            }
            self.shared.faults.check("heartbeater");
            self.run_once().await;
        }
    }
}
