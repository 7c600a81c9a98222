//! The fetcher of one queue: claims as many jobs as it has credits (free slots plus the
//! prefetch depth), in one statement, when woken (notification), when the last claim came
//! back full (there is more), or on the jittered fallback poll. `claims_in_flight` of them
//! share one queue's credits.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_core::{ClaimRequest, Store};
use rand::Rng;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::executor::execute;
use crate::metrics::Metrics;
use crate::pace::QueuePace;
use crate::runtime::Shared;

/// Fetches for one queue.
pub(crate) struct Fetcher<S: Store> {
    pub shared: Arc<Shared<S>>,
    pub queue: String,
    pub slots: Arc<Semaphore>,
    pub wake: Arc<Notify>,
    /// Told when a claim came back empty (drain mode checks then whether all is done).
    pub idle: Arc<Notify>,
    /// This queue's slots in this process.
    pub concurrency: usize,
    /// The current prefetch depth (shared with the executor, which halves it on time-outs).
    pub depth: Arc<std::sync::atomic::AtomicUsize>,
    /// The handlers' pace and the jobs claimed but not started (see `pace.rs`).
    pub pace: Arc<QueuePace>,
}

fn jittered(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.8..1.2))
}

impl<S: Store> Fetcher<S> {
    /// Jobs this queue may hold now (running plus buffered): its slots plus the current
    /// prefetch depth.
    fn allowance(&self) -> usize {
        self.concurrency + self.depth.load(Ordering::Relaxed)
    }

    /// The deepest buffer the handlers' measured pace allows (see `pace.rs`).
    fn pace_cap(&self) -> usize {
        self.pace.cap(
            self.concurrency,
            self.shared.config.prefetch_timeout / 4,
            self.shared.config.prefetch,
        )
    }

    /// Run slots free now.
    fn free_run_slots(&self) -> usize {
        self.shared
            .run_slots
            .get(&self.queue)
            .map_or(0, |s| s.available_permits())
    }

    /// Jobs held now (credits taken).
    fn held(&self) -> usize {
        (self.concurrency + self.shared.config.prefetch)
            .saturating_sub(self.slots.available_permits())
    }

    /// Claims once for the free slots and starts the jobs. Returns how many were claimed, how
    /// many credits were offered and how many of them were free run slots (the bound on
    /// controlled work).
    pub async fn run_once(&self) -> Result<Claimed, docket_core::StoreError> {
        let mut permits = Vec::new();
        while permits.len() < self.shared.config.claim_batch {
            match self.slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        self.claim_with(permits).await
    }

    async fn claim_with(
        &self,
        mut permits: Vec<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<Claimed, docket_core::StoreError> {
        let offered = permits.len();
        if offered == 0 {
            return Ok(Claimed::default());
        }
        let lease = self.shared.config.lease;
        // Controlled work (limits, keys) only for run slots free now: see `pace.rs`.
        let free = self.pace.reserve(self.free_run_slots()).min(offered);
        let controlled =
            if docket_core::mutants::active(docket_core::mutants::Mutant::ControlledWorkBuffered) {
                None
            } else {
                Some(free as i32)
            };
        // Measured before sending: the database's expiry is at least this late.
        let sent_at = Instant::now();
        let claimed = self
            .shared
            .store
            .claim(&ClaimRequest {
                queue: self.queue.clone(),
                limit: offered as i32,
                owner: self.shared.config.owner.clone(),
                lease,
                starvation: self.shared.config.starvation_bound,
                controlled,
            })
            .await;
        let jobs = match claimed {
            Ok(jobs) => jobs,
            Err(e) => {
                self.pace.settle(free, 0);
                return Err(e);
            }
        };
        self.pace.settle(free, jobs.len());
        Metrics::add(&self.shared.metrics.claimed, jobs.len() as u64);
        Metrics::add(&self.shared.metrics.claims, 1);
        // Wakes only waiting maintenance services and `Worker::ready` (no stored permit): a
        // service still pausing between its ticks must not run later, between two polls.
        // After the counters, so a waiter woken here reads this claim in them.
        self.shared.claimed.notify_waiters();
        ::metrics::histogram!("docket_claim_duration_seconds", "queue" => self.queue.clone())
            .record(sent_at.elapsed().as_secs_f64());
        let n = jobs.len();
        for job in jobs {
            let permit = permits.pop().expect("one permit per claimed job");
            if let Some(run) = execute(self.shared.clone(), job, permit, sent_at + lease) {
                tokio::spawn(run);
            }
        }
        Ok(Claimed { n, offered, free })
    }
}

/// What one claim did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claimed {
    /// Jobs claimed.
    pub n: usize,
    /// Credits offered (the claim's limit).
    pub offered: usize,
    /// Run slots that were free for it (its bound on controlled work).
    pub free: usize,
}

impl Claimed {
    /// The claim came back short while it had no more free run slots than it took jobs:
    /// controlled work may be waiting for a slot, so the next slot to free up is worth a
    /// claim (rather than waiting for the next notification or poll).
    fn bound_by_slots(&self) -> bool {
        self.n < self.offered && self.n >= self.free
    }
}

impl<S: Store> crate::service::Service for Fetcher<S> {
    fn name(&self) -> &'static str {
        "fetcher"
    }

    fn phase(&self) -> crate::supervisor::Phase {
        crate::supervisor::Phase::Fetch
    }

    /// Runs until `stop` fires.
    async fn run(self, stop: CancellationToken) {
        // Claim once at start: work may have been enqueued while no worker listened.
        let mut immediate = true;
        let mut bound_by_slots = false;
        let mut error_backoff = Duration::from_millis(100);
        loop {
            let first = tokio::select! {
                p = self.slots.clone().acquire_owned() => p.expect("semaphore never closed"),
                _ = stop.cancelled() => return,
            };
            if !immediate {
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = self.pace.slot_freed.notified(), if bound_by_slots => {}
                    _ = tokio::time::sleep(jittered(self.shared.config.poll_interval)) => {}
                    _ = stop.cancelled() => return,
                }
            }
            self.shared.faults.check("fetcher");
            // The depth may have shrunk below what is held: wait for a job to end.
            if self.held() > self.allowance() {
                drop(first);
                tokio::select! {
                    _ = self.shared.credit_returned.notified() => {}
                    _ = tokio::time::sleep(self.shared.config.poll_interval) => {}
                    _ = stop.cancelled() => return,
                }
                continue;
            }
            let mut permits = vec![first];
            // While claims come back full there is a backlog: wait a moment for more credits
            // so one statement claims many jobs instead of one each — but never for more than
            // the queue may hold (with 10 slots and no prefetch, waiting for an 11th cost the
            // whole coalescing window on every claim).
            let room = self.allowance().saturating_sub(self.held()) + 1;
            let target = self.shared.config.claim_batch.min(room).max(1);
            let coalesce_until = tokio::time::Instant::now() + self.shared.config.claim_coalesce;
            while permits.len() < target {
                match self.slots.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) if !immediate => break,
                    Err(_) => match tokio::time::timeout_at(
                        coalesce_until,
                        self.slots.clone().acquire_owned(),
                    )
                    .await
                    {
                        Ok(p) => permits.push(p.expect("semaphore never closed")),
                        Err(_) => break,
                    },
                }
            }
            // A backlog while claimed jobs still wait in the buffer: no run slot waits for
            // this claim, so let room gather until half of what the queue may hold is free, or
            // the buffer runs dry — one claim for many jobs rather than one claim per job that
            // ends (handlers of tens of milliseconds were claimed one job at a time, the claim
            // costing the server more than the job). Every job that ends frees its run slot,
            // which wakes this wait to look again; the poll interval bounds it. Without a
            // buffer (depth 0: slow handlers) nothing waits here.
            if immediate {
                let batch = self.shared.config.claim_batch.max(1);
                let half = (self.allowance() / 2).clamp(1, batch);
                let room = |held: usize| self.allowance().saturating_sub(held);
                // One deadline for the whole wait: a stream of freed slots that never adds up
                // to half does not hold the claim back longer than a poll interval.
                let give_up = tokio::time::Instant::now() + self.shared.config.poll_interval;
                while permits.len() + room(self.held()) < half && self.pace.buffered() > 0 {
                    tokio::select! {
                        _ = self.pace.slot_freed.notified() => {}
                        _ = tokio::time::sleep_until(give_up) => break,
                        _ = stop.cancelled() => return,
                    }
                }
                while permits.len() < batch && room(self.held()) > 0 {
                    match self.slots.clone().try_acquire_owned() {
                        Ok(p) => permits.push(p),
                        Err(_) => break,
                    }
                }
            }
            match self.claim_with(permits).await {
                Ok(claimed) => {
                    let Claimed { n, offered, .. } = claimed;
                    error_backoff = Duration::from_millis(100);
                    immediate = n == offered;
                    bound_by_slots = claimed.bound_by_slots();
                    if immediate && self.shared.config.claims_in_flight > 1 {
                        // A backlog: a sibling fetcher asleep until the next poll joins in.
                        self.wake.notify_one();
                    }
                    if immediate {
                        // A backlog: deepen the buffer by this claim, up to what the queue
                        // starts in a quarter of the time-out (time-outs halve it).
                        let max = self.pace_cap();
                        let grow = n.max(1);
                        let _ =
                            self.depth
                                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                                    Some((d + grow).min(max))
                                });
                    }
                    if n == 0 {
                        self.idle.notify_one();
                    }
                }
                Err(e) => {
                    warn!(queue = %self.queue, error = %e, "claim failed; backing off");
                    immediate = false;
                    bound_by_slots = false;
                    tokio::select! {
                        _ = tokio::time::sleep(error_backoff) => {}
                        _ = stop.cancelled() => return,
                    }
                    error_backoff = (error_backoff * 2)
                        .min(self.shared.config.poll_interval.max(Duration::from_secs(1)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Claimed;

    #[test]
    fn a_short_claim_waits_for_a_slot_only_when_slots_may_have_cut_it() {
        let c = |n, offered, free| Claimed { n, offered, free };
        // Full: claims again at once anyway.
        assert!(!c(10, 10, 3).bound_by_slots());
        // Took every free slot's worth and came back short: keyed work may be waiting.
        assert!(c(3, 10, 3).bound_by_slots());
        assert!(c(0, 10, 0).bound_by_slots());
        // Had free slots it did not use: nothing more to claim now.
        assert!(!c(1, 10, 3).bound_by_slots());
        assert!(!c(0, 10, 3).bound_by_slots());
    }
}
