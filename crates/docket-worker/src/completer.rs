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

use docket_core::{BatchOutcome, Failure, Lease, Snooze, Store, StoreError};
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
    /// Failed (retry, discard or cancel).
    Fail(Failure),
    /// Snoozed.
    Snooze(Snooze),
    /// Released back to the queue without consuming an attempt (shutdown).
    Release(Lease),
}

impl Completion {
    fn lease(&self) -> Lease {
        match self {
            Completion::Complete(l) | Completion::Release(l) => *l,
            Completion::Fail(f) => f.lease,
            Completion::Snooze(s) => s.lease,
        }
    }
}

/// Batches and writes completions.
pub struct Completer<S: Store> {
    store: S,
    owner: String,
    tracker: Arc<Tracker>,
    metrics: Arc<Metrics>,
    batch: usize,
    flush: Duration,
}

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
        batch: usize,
        flush: Duration,
    ) -> Self {
        Completer {
            store,
            owner,
            tracker,
            metrics,
            batch: batch.max(1),
            flush,
        }
    }

    /// Runs until `close` fires (or every sender is dropped), then writes what is left in
    /// the channel and returns.
    pub async fn run(self, mut rx: mpsc::Receiver<Completion>, close: CancellationToken) {
        let mut buf = Vec::with_capacity(self.batch);
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
                    self.run_once(std::mem::take(&mut buf)).await;
                }
                return;
            };
            buf.push(first);
            let deadline = tokio::time::Instant::now() + self.flush;
            while buf.len() < self.batch {
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
            self.run_once(std::mem::take(&mut buf)).await;
        }
    }

    /// Writes one batch (with bounded retries) and forgets its jobs.
    pub async fn run_once(&self, batch: Vec<Completion>) {
        let mut complete = Vec::new();
        let mut fail = Vec::new();
        let mut snooze = Vec::new();
        let mut release = Vec::new();
        for c in &batch {
            match c {
                Completion::Complete(l) => complete.push(*l),
                Completion::Fail(f) => fail.push(f.clone()),
                Completion::Snooze(s) => snooze.push(*s),
                Completion::Release(l) => release.push(*l),
            }
        }
        if !complete.is_empty() {
            self.write("complete", || {
                self.store.complete_many(&self.owner, &complete)
            })
            .await;
        }
        if !fail.is_empty() {
            self.write("fail", || self.store.fail_many(&self.owner, &fail))
                .await;
        }
        if !snooze.is_empty() {
            self.write("snooze", || self.store.snooze_many(&self.owner, &snooze))
                .await;
        }
        if !release.is_empty() {
            self.write("release", || self.store.release_many(&self.owner, &release))
                .await;
        }
        for c in &batch {
            self.tracker.remove(c.lease());
        }
    }

    async fn write<F, Fut>(&self, what: &str, op: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<BatchOutcome, StoreError>>,
    {
        let mut delay = Duration::from_millis(50);
        for attempt in 1..=FLUSH_TRIES {
            match op().await {
                Ok(out) => {
                    self.metrics.record_written(what, out.applied.len());
                    for lost in &out.lost {
                        // Another worker (or the reaper) owns the job now: our outcome is
                        // fenced off, which is exactly what must happen.
                        warn!(job = %lost.lease.id, attempt = lost.lease.attempt, reason = %lost.reason,
                              "{what} fenced off: lease lost");
                    }
                    self.metrics.record_fenced(out.lost.len());
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
