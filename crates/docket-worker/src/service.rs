//! One shape for every runtime service.
//!
//! A service owns its dependencies and its interval, exposes a `run_once` that tests drive
//! directly, and is started the same way as every other: [`Supervisor::start`]
//! (`crate::supervisor`) spawns [`Service::run`] with the stop token of the service's
//! [`Phase`], and shutdown (`crate::shutdown`) stops phase after phase. A service that ends
//! before its phase is stopped — it returned, or it panicked — is a failure the supervisor
//! reports.
//!
//! | service | `run_once` | interval | depends on |
//! |---|---|---|---|
//! | fetcher (one per queue) | one claim for free slots | wake-up, full claim, or jittered `poll_interval` | store, run/claim slots |
//! | completer | one flush | `completion_flush` or a full batch | store, tracker |
//! | heartbeater | one beat | `heartbeat_interval`, or a cancel hint | store, tracker |
//! | notifier | — (a stream) | pushed hints | store's listener |
//! | leader | one renewal | `min(schedule_interval, reap_interval)` | store |
//! | reaper | one sweep | `reap_interval`, while leading | store, leader |
//! | pruner | one pass | `prune_interval`, while leading | store, leader |
//! | scheduler | due cron ticks | `schedule_interval`, while leading | store, leader |
//! | key sweeper | one pass | `prune_interval`, while leading | store, leader |
//! | presence | one report to the worker registry | `presence_interval` | store, tracker |
//! | samples | add the per-minute samples (done, failed, wait, run time) to the database | `sample_interval` | store, telemetry |

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use docket_core::{Store, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::maintenance::{
    DepthSampler, KeyHandOver, KeySweeper, Leader, Pruner, Reaper, Scheduler,
};
use crate::supervisor::Phase;

/// A runtime service.
pub(crate) trait Service: Send + 'static {
    /// Its name in logs, in [`crate::WorkerError::ServiceFailed`] and for fault injection.
    fn name(&self) -> &'static str;

    /// When shutdown stops it.
    fn phase(&self) -> Phase;

    /// Runs until `stop` fires. Returning earlier is a failure.
    fn run(self, stop: CancellationToken) -> impl Future<Output = ()> + Send;
}

/// A pass the elected leader runs on an interval.
pub(crate) trait LeaderTask: Send + Sync + 'static {
    /// Its service name.
    const NAME: &'static str;

    /// One pass (its `run_once`); errors are logged and the next pass retries.
    fn pass(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Each maintenance task's `run_once`, as a leader pass under its service name.
macro_rules! leader_task {
    ($($task:ident => $name:literal),* $(,)?) => {$(
        impl<S: Store> LeaderTask for $task<S> {
            const NAME: &'static str = $name;
            async fn pass(&self) -> Result<(), StoreError> {
                self.run_once().await.map(drop)
            }
        }
    )*};
}

leader_task!(Reaper => "reaper", Pruner => "pruner", Scheduler => "scheduler", KeySweeper => "sweeper", KeyHandOver => "handover",
             DepthSampler => "depth");

/// When a periodic service may run.
#[derive(Clone)]
pub(crate) struct Cadence {
    /// At most this often.
    pub every: Duration,
    /// Serverless mode: only in the wake-up of a claim (see `WorkerConfig::serverless`), so
    /// an idle worker sends nothing between its polls.
    pub after_claims: Option<Arc<Notify>>,
    /// Test-only panics (feature `fault-injection`).
    pub faults: Arc<crate::faults::Faults>,
}

impl Cadence {
    /// Waits for the next turn: `every` after the last one (`None`: the first, at once),
    /// then, serverless, for a claim. False when `stop` fired.
    async fn next(&self, last: Option<tokio::time::Instant>, stop: &CancellationToken) -> bool {
        if let Some(t) = last {
            tokio::select! {
                _ = tokio::time::sleep_until(t + self.every) => {}
                _ = stop.cancelled() => return false,
            }
        }
        if let Some(claimed) = &self.after_claims {
            tokio::select! {
                _ = claimed.notified() => {}
                _ = stop.cancelled() => return false,
            }
        }
        true
    }
}

impl Cadence {
    /// The next turn of service `name`: waits for it ([`Cadence::next`]), records it in
    /// `last`, and gives the fault injector its chance. False when `stop` fired.
    pub(crate) async fn turn(
        &self,
        name: &str,
        last: &mut Option<tokio::time::Instant>,
        stop: &CancellationToken,
    ) -> bool {
        if !self.next(*last, stop).await {
            return false;
        }
        *last = Some(tokio::time::Instant::now());
        self.faults.check(name);
        true
    }
}

/// Runs a [`LeaderTask`] while this worker leads: its first pass as soon as it leads, then
/// every `cadence.every`.
pub(crate) struct WhileLeading<S: Store, T: LeaderTask> {
    pub task: T,
    pub leader: Arc<Leader<S>>,
    pub cadence: Cadence,
}

impl<S: Store, T: LeaderTask> Service for WhileLeading<S, T> {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn phase(&self) -> Phase {
        Phase::Service
    }

    async fn run(self, stop: CancellationToken) {
        let mut last = None;
        loop {
            if !self.leader.wait_leading(&stop).await {
                return;
            }
            if !self.cadence.next(last, &stop).await {
                return;
            }
            if !self.leader.is_leader() {
                continue;
            }
            last = Some(tokio::time::Instant::now());
            self.cadence.faults.check(T::NAME);
            if let Err(e) = self.task.pass().await {
                warn!(service = T::NAME, error = %e, "maintenance pass failed");
            }
        }
    }
}

/// The leader election as a service: renews every `cadence.every` and resigns when stopped.
pub(crate) struct Election<S: Store> {
    pub leader: Arc<Leader<S>>,
    pub cadence: Cadence,
}

impl<S: Store> Service for Election<S> {
    fn name(&self) -> &'static str {
        "leader"
    }

    fn phase(&self) -> Phase {
        Phase::Service
    }

    async fn run(self, stop: CancellationToken) {
        let mut last = None;
        while self.cadence.turn("leader", &mut last, &stop).await {
            self.leader.run_once().await;
        }
        self.leader.resign().await;
    }
}
