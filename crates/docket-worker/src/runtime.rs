//! State shared by a worker's services.

use std::collections::HashMap;
use std::sync::Arc;

use docket_core::Store;
use tokio::sync::{mpsc, Notify};

use crate::completer::Completion;
use crate::config::WorkerConfig;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::tracker::Tracker;

/// Everything a worker's services share.
pub(crate) struct Shared<S: Store> {
    pub store: S,
    /// The same store, type-erased for [`crate::JobContext::store`].
    pub erased_store: Arc<dyn std::any::Any + Send + Sync>,
    /// The store as handlers' steps use it (batched across running jobs, under this
    /// worker's identity).
    pub step_store: Arc<dyn crate::steps::StepStore>,
    pub registry: Registry<S>,
    pub config: WorkerConfig,
    pub tracker: Arc<Tracker>,
    pub metrics: Arc<Metrics>,
    /// Metrics through the facade, and samples for the dashboard's charts.
    pub telemetry: Arc<crate::telemetry::Telemetry>,
    /// Into the completer.
    pub completions: mpsc::Sender<Completion>,
    /// One wake-up per queue, poked by notifications and by reconnects of the listener.
    pub wakeups: HashMap<String, Arc<Notify>>,
    /// Poked by every claim attempt; in serverless mode the leader's maintenance waits on it
    /// instead of its own timer, so an idle worker queries only when it polls.
    pub claimed: Arc<Notify>,
    /// Poked by a cancel notification: the heartbeater beats at once and stops the jobs
    /// whose cancellation the database recorded.
    pub beat_now: Notify,
    /// Test-only panics (feature `fault-injection`).
    pub faults: Arc<crate::faults::Faults>,
    /// Per queue: its run slots (its concurrency). Claim credits are the fetcher's.
    pub run_slots: HashMap<String, Arc<tokio::sync::Semaphore>>,
    /// Per queue: the handlers' pace and the jobs claimed but not started (see `pace.rs`).
    pub pace: HashMap<String, Arc<crate::pace::QueuePace>>,
    /// Per queue: the current prefetch depth (see `WorkerConfig::prefetch`).
    pub depth: HashMap<String, Arc<std::sync::atomic::AtomicUsize>>,
    /// Fired at shutdown: buffered jobs go back to the queue at once.
    pub buffer_release: tokio_util::sync::CancellationToken,
    /// Poked when a claim credit comes back (a job ended), for a fetcher that has used its
    /// prefetch depth up.
    pub credit_returned: Notify,
}

impl<S: Store> Shared<S> {
    /// Wakes the fetcher of `queue` (a hint: it claims once more).
    pub fn wake(&self, queue: &str) {
        if let Some(n) = self.wakeups.get(queue) {
            n.notify_one();
        }
    }

    /// Wakes every fetcher (after a reconnect, notifications may have been missed).
    pub fn wake_all(&self) {
        for n in self.wakeups.values() {
            n.notify_one();
        }
    }
}
