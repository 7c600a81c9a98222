//! The completer: batches fenced writes of finished jobs.
//!
//! Handlers hand their outcome to a bounded channel; the completer flushes it by size or
//! after a few milliseconds as one statement per outcome type (complete, fail, snooze,
//! release), retries a failed flush with backoff (the writes are fenced, so a retry can never
//! apply twice or overwrite a successor), and only then forgets the jobs — so the heartbeater
//! keeps their leases alive while they wait. A full channel blocks the handlers' tasks, which
//! keeps their slots taken, which stops the fetcher claiming: back-pressure without a knob.

use std::sync::Arc;
use std::time::Duration;

use docket_core::{
    BatchOutcome, Failure, Lease, NodeDone, Output, Park, Snooze, Store, StoreError,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn};

use crate::metrics::Metrics;
use crate::tracker::Tracker;

/// A finished job's outcome to write.
#[derive(Debug, Clone)]
pub enum Completion {
    /// Succeeded.
    Complete(Lease),
    /// Succeeded with an output (kept with the job, never completed by delete).
    Output(Output),
    /// Parked waiting for a signal (a snooze that the signal cuts short).
    Park(Park),
    /// Failed (retry, discard or cancel).
    Fail(Failure),
    /// Snoozed.
    Snooze(Snooze),
    /// Released back to the queue without consuming an attempt (shutdown).
    Release(Lease),
    /// A workflow node succeeded (with its output, if any): its children are resolved in the
    /// same transaction (`Store::complete_nodes`).
    Node(NodeDone),
}

impl Completion {
    fn lease(&self) -> Lease {
        match self {
            Completion::Complete(l) | Completion::Release(l) => *l,
            Completion::Fail(f) => f.lease,
            Completion::Snooze(s) => s.lease,
            Completion::Output(o) => o.lease,
            Completion::Park(p) => p.lease,
            Completion::Node(n) => n.lease,
        }
    }
}

/// Batches and writes completions.
pub struct Completer<S: Store> {
    store: S,
    owner: String,
    tracker: Arc<Tracker>,
    metrics: Arc<Metrics>,
    telemetry: Arc<crate::telemetry::Telemetry>,
    batch: usize,
    flush: Duration,
    /// Whether a success keeps the job's row (`succeeded`) or deletes it
    /// (`WorkerConfig::keep_succeeded`).
    keep_succeeded: bool,
    /// Test-only panics (feature `fault-injection`).
    pub(crate) faults: Arc<crate::faults::Faults>,
}

/// Flushes written at once. One at a time, a drain's completions queued behind each other
/// (batches of 500 every ~100 ms while the table was fresh, measured in the concurrency
/// benchmark); the writes are fenced per row, so their order does not matter.
const FLUSHES_IN_FLIGHT: usize = 4;

/// Attempts of one flush before giving up (the leases then expire and the reaper requeues
/// the jobs: at-least-once, never lost).
const FLUSH_TRIES: u32 = 10;

impl<S: Store> Completer<S> {
    /// A completer writing as `owner`.
    pub fn new(
        store: S,
        owner: String,
        tracker: Arc<Tracker>,
        metrics: Arc<Metrics>,
        telemetry: Arc<crate::telemetry::Telemetry>,
        batch: usize,
        flush: Duration,
    ) -> Self {
        Completer {
            store,
            owner,
            tracker,
            metrics,
            telemetry,
            batch: batch.max(1),
            flush,
            keep_succeeded: false,
            faults: Default::default(),
        }
    }

    /// Keep succeeded jobs' rows (`true`) or delete them as they complete (`false`, the
    /// default, as `WorkerConfig::keep_succeeded`).
    pub fn keep_succeeded(mut self, keep: bool) -> Self {
        self.keep_succeeded = keep;
        self
    }

    /// Runs until `close` fires (or every sender is dropped), then writes what is left in
    /// the channel and returns.
    pub async fn run(self, mut rx: mpsc::Receiver<Completion>, close: CancellationToken) {
        let me = Arc::new(self);
        let slots = Arc::new(tokio::sync::Semaphore::new(FLUSHES_IN_FLIGHT));
        let mut flushes = tokio::task::JoinSet::new();
        // A flush that panicked is the completer's panic (the supervisor must see it).
        let reap = |set: &mut tokio::task::JoinSet<()>| {
            while let Some(r) = set.try_join_next() {
                if let Err(e) = r {
                    if e.is_panic() {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
            }
        };
        let mut buf = Vec::with_capacity(me.batch);
        loop {
            let first = tokio::select! {
                biased;
                c = rx.recv() => c,
                _ = close.cancelled() => None,
            };
            let Some(first) = first else {
                while let Ok(c) = rx.try_recv() {
                    buf.push(c);
                }
                if !buf.is_empty() {
                    me.run_once(std::mem::take(&mut buf)).await;
                }
                while let Some(r) = flushes.join_next().await {
                    if let Err(e) = r {
                        if e.is_panic() {
                            std::panic::resume_unwind(e.into_panic());
                        }
                    }
                }
                return;
            };
            me.faults.check("completer");
            buf.push(first);
            let deadline = tokio::time::Instant::now() + me.flush;
            while buf.len() < me.batch {
                match rx.try_recv() {
                    Ok(c) => buf.push(c),
                    Err(mpsc::error::TryRecvError::Disconnected) => break,
                    Err(mpsc::error::TryRecvError::Empty) => {
                        match tokio::time::timeout_at(deadline, rx.recv()).await {
                            Ok(Some(c)) => buf.push(c),
                            _ => break,
                        }
                    }
                }
            }
            reap(&mut flushes);
            let permit = slots.clone().acquire_owned().await.expect("never closed");
            let batch = std::mem::take(&mut buf);
            let w = me.clone();
            flushes.spawn(async move {
                w.run_once(batch).await;
                drop(permit);
            });
        }
    }

    /// Writes one batch (with bounded retries) and forgets its jobs.
    pub async fn run_once(&self, batch: Vec<Completion>) {
        self.write_batch(&batch).await;
        for c in &batch {
            self.tracker.remove(c.lease());
        }
    }

    async fn write_batch(&self, batch: &[Completion]) {
        let mut groups: [Vec<Completion>; 7] = Default::default();
        for c in batch {
            let i = match c {
                Completion::Complete(_) => 0,
                Completion::Fail(_) => 1,
                Completion::Snooze(_) => 2,
                Completion::Release(_) => 3,
                Completion::Output(_) => 4,
                Completion::Park(_) => 5,
                Completion::Node(_) => 6,
            };
            groups[i].push(c.clone());
        }
        for g in groups.iter().filter(|g| !g.is_empty()) {
            self.write(g).await;
        }
    }

    /// One statement for a group of completions of the same type.
    async fn apply(&self, items: &[Completion]) -> Result<BatchOutcome, StoreError> {
        let owner = &self.owner;
        match items.first() {
            Some(Completion::Complete(_)) => {
                let v: Vec<Lease> = items.iter().map(Completion::lease).collect();
                if self.keep_succeeded {
                    self.store.complete_many(owner, &v).await
                } else {
                    self.store.complete_delete_many(owner, &v).await
                }
            }
            Some(Completion::Fail(_)) => {
                let v: Vec<Failure> = items
                    .iter()
                    .filter_map(|c| match c {
                        Completion::Fail(f) => Some(f.clone()),
                        _ => None,
                    })
                    .collect();
                self.store.fail_many(owner, &v).await
            }
            Some(Completion::Snooze(_)) => {
                let v: Vec<Snooze> = items
                    .iter()
                    .filter_map(|c| match c {
                        Completion::Snooze(s) => Some(*s),
                        _ => None,
                    })
                    .collect();
                self.store.snooze_many(owner, &v).await
            }
            Some(Completion::Release(_)) => {
                let v: Vec<Lease> = items.iter().map(Completion::lease).collect();
                self.store.release_many(owner, &v).await
            }
            Some(Completion::Output(_)) => {
                let v: Vec<Output> = items
                    .iter()
                    .filter_map(|c| match c {
                        Completion::Output(o) => Some(o.clone()),
                        _ => None,
                    })
                    .collect();
                self.store.complete_outputs(owner, &v).await
            }
            Some(Completion::Park(_)) => {
                let v: Vec<Park> = items
                    .iter()
                    .filter_map(|c| match c {
                        Completion::Park(p) => Some(p.clone()),
                        _ => None,
                    })
                    .collect();
                self.store.park_many(owner, &v).await
            }
            Some(Completion::Node(_)) => {
                let v: Vec<NodeDone> = items
                    .iter()
                    .filter_map(|c| match c {
                        Completion::Node(n) => Some(n.clone()),
                        _ => None,
                    })
                    .collect();
                self.store.complete_nodes(owner, &v).await
            }
            None => Ok(BatchOutcome::default()),
        }
    }

    fn what(items: &[Completion]) -> &'static str {
        match items.first() {
            Some(Completion::Complete(_) | Completion::Output(_) | Completion::Node(_)) => {
                "complete"
            }
            Some(Completion::Fail(_)) => "fail",
            Some(Completion::Snooze(_) | Completion::Park(_)) => "snooze",
            _ => "release",
        }
    }

    /// Writes a group: transient errors are retried with backoff; any other error on a group
    /// of several is retried item by item, so one bad item cannot sink the rest.
    async fn write(&self, items: &[Completion]) {
        let what = Self::what(items);
        let mut delay = Duration::from_millis(50);
        for attempt in 1..=FLUSH_TRIES {
            Metrics::add(&self.metrics.flushes, 1);
            match self.apply(items).await {
                Ok(out) => {
                    self.metrics.record_written(what, out.applied.len());
                    for lost in &out.lost {
                        // Another worker (or the reaper) owns the job now: our outcome is
                        // fenced off, which is exactly what must happen.
                        warn!(job = %lost.lease.id, attempt = lost.lease.attempt, reason = %lost.reason,
                              "{what} fenced off: lease lost");
                        let entry = self.tracker.get(lost.lease.id);
                        self.telemetry
                            .fenced(entry.as_ref().map(|e| &e.labels), what);
                    }
                    self.metrics.record_fenced(out.lost.len());
                    return;
                }
                Err(e) if !e.is_transient() && items.len() > 1 => {
                    warn!(error = %e, "{what} batch failed; writing its items one by one");
                    for item in items.chunks(1) {
                        Box::pin(self.write(item)).await;
                    }
                    return;
                }
                Err(e) if !e.is_transient() => {
                    error!(error = %e, "{what} failed and cannot be retried; the lease will expire and the reaper will requeue the job");
                    return;
                }
                Err(e) => {
                    debug!(error = %e, attempt, "{what} flush failed; retrying");
                    if attempt == FLUSH_TRIES {
                        error!(error = %e, "{what} flush failed {FLUSH_TRIES} times; the leases will expire and the reaper will requeue the jobs");
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

/// The completer with its channel, as a service.
pub(crate) struct CompleterService<S: Store> {
    pub completer: Completer<S>,
    pub rx: mpsc::Receiver<Completion>,
}

impl<S: Store> crate::service::Service for CompleterService<S> {
    fn name(&self) -> &'static str {
        "completer"
    }

    fn phase(&self) -> crate::supervisor::Phase {
        // Closed after running jobs ended, so that every outcome is written.
        crate::supervisor::Phase::Completer
    }

    async fn run(self, stop: CancellationToken) {
        self.completer.run(self.rx, stop).await
    }
}
