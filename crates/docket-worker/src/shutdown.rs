//! How a worker stops: one sequence, in phases, whatever asked for it (the graceful token,
//! the end of a drain, or a service that died).
//!
//! | step | what happens | bounded by |
//! |---|---|---|
//! | 1. stop claiming | the fetchers ([`Phase::Fetch`]) are stopped and joined: no claim is in flight after this | a claim's round trip |
//! | 2. release the buffer | jobs claimed ahead of a free slot go back to pending at once, their attempt not counted | at once |
//! | 3. finish running jobs | running handlers finish and hand over their outcomes | `shutdown_timeout`, or the immediate token |
//! | 4. cancel the rest | handlers still running are told to stop (`StopReason::Shutdown`); what they return is written as a release | `cancel_grace` + 0.5 s (nothing when immediate) |
//! | 5. write outcomes | the completer ([`Phase::Completer`]) writes every queued outcome, then ends | 30 s |
//! | 6. release leftovers | a job still tracked (no outcome written: a hard stop, or a completer that gave up) is released directly, not left to its lease | 5 s |
//! | 7. stop services | heartbeater, notifier, leader (which resigns, so another worker takes over at once) and the leader's tasks ([`Phase::Service`]); heartbeats kept every lease alive until here | — |

use std::time::Duration;

use docket_core::{Lease, Store};
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::runtime::Shared;
use crate::supervisor::{Phase, Supervisor};
use crate::tracker::StopReason;
use crate::worker::Shutdown;

/// What shutdown had to give up on.
pub(crate) struct Stopped {
    /// Jobs cancelled at the deadline and released.
    pub released: usize,
    /// Jobs whose outcome could not be written (their leases expire; the reaper requeues).
    pub abandoned: usize,
}

/// Runs steps 1–7.
pub(crate) async fn stop<S: Store>(
    shared: &Shared<S>,
    sup: &mut Supervisor,
    shutdown: &Shutdown,
) -> Stopped {
    let cfg = &shared.config;
    info!("worker stopping: no new claims");
    sup.stop(Phase::Fetch).await;
    shared.buffer_release.cancel();

    let finished_in_time = tokio::select! {
        _ = shared.tracker.wait_empty() => true,
        _ = tokio::time::sleep(cfg.shutdown_timeout) => false,
        _ = shutdown.immediate.cancelled() => false,
    };
    let mut released = 0;
    if !finished_in_time {
        // The executor turns a shutdown stop into a release (pending again at once, the
        // attempt not counted).
        let left = shared.tracker.all();
        released = left.len();
        warn!(
            jobs = released,
            "shutdown deadline: cancelling running jobs and releasing them"
        );
        for e in &left {
            e.stop(StopReason::Shutdown);
        }
        let grace = if shutdown.immediate.is_cancelled() {
            Duration::ZERO
        } else {
            cfg.cancel_grace + Duration::from_millis(500)
        };
        tokio::select! {
            _ = shared.tracker.wait_empty() => {}
            _ = tokio::time::sleep(grace) => {}
            _ = shutdown.immediate.cancelled(), if grace > Duration::ZERO => {}
        }
    }

    let _ = tokio::time::timeout(Duration::from_secs(30), sup.stop(Phase::Completer)).await;

    let leftover: Vec<Lease> = shared
        .tracker
        .all()
        .iter()
        .map(|e| {
            // The executor drops a handler that ignores this after its grace period.
            e.stop(StopReason::Shutdown);
            e.lease
        })
        .collect();
    let mut abandoned = 0;
    if !leftover.is_empty() {
        match tokio::time::timeout(
            Duration::from_secs(5),
            shared.store.release_many(&cfg.owner, &leftover),
        )
        .await
        {
            Ok(Ok(out)) => {
                Metrics::add(&shared.metrics.released, out.applied.len() as u64);
                abandoned = out.lost.len();
            }
            _ => abandoned = leftover.len(),
        }
        for l in &leftover {
            shared.tracker.remove(*l);
        }
    }

    sup.stop(Phase::Service).await;
    info!("worker stopped");
    Stopped {
        released,
        abandoned,
    }
}
