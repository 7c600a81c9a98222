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
    /// Set by each claim: jobs ran when it was sent and slots were idle when it came back
    /// (the buffer ran dry during its round trip).
    pub starved: std::sync::atomic::AtomicBool,
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

    /// Jobs held now (credits taken).
    fn held(&self) -> usize {
        (self.concurrency + self.shared.config.prefetch)
            .saturating_sub(self.slots.available_permits())
    }

    /// Claims once for the free slots and starts the jobs. Returns how many were claimed and
    /// how many slots were offered.
    pub async fn run_once(&self) -> Result<(usize, usize), docket_core::StoreError> {
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
    ) -> Result<(usize, usize), docket_core::StoreError> {
        let offered = permits.len();
        if offered == 0 {
            return Ok((0, 0));
        }
        let lease = self.shared.config.lease;
        let run_slots = self.shared.run_slots.get(&self.queue);
        // Jobs were running as this claim left: an idle slot when it comes back means the
        // work ran out while it was out (not merely that the worker has just started).
        let busy = run_slots.is_some_and(|s| s.available_permits() < self.concurrency);
        // Measured before sending: the database's expiry is at least this late.
        let sent_at = Instant::now();
        let jobs = self
            .shared
            .store
            .claim(&ClaimRequest {
                queue: self.queue.clone(),
                limit: offered as i32,
                owner: self.shared.config.owner.clone(),
                lease,
                starvation: self.shared.config.starvation_bound,
            })
            .await?;
        Metrics::add(&self.shared.metrics.claimed, jobs.len() as u64);
        Metrics::add(&self.shared.metrics.claims, 1);
        // Wakes only waiting maintenance services and `Worker::ready` (no stored permit): a
        // service still pausing between its ticks must not run later, between two polls.
        // After the counters, so a waiter woken here reads this claim in them.
        self.shared.claimed.notify_waiters();
        ::metrics::histogram!("docket_claim_duration_seconds", "queue" => self.queue.clone())
            .record(sent_at.elapsed().as_secs_f64());
        let n = jobs.len();
        // Read before this claim's jobs take any: were slots idle, waiting for it?
        let idle = run_slots.is_some_and(|s| s.available_permits() > 0);
        self.starved.store(busy && idle, Ordering::Relaxed);
        for job in jobs {
            let permit = permits.pop().expect("one permit per claimed job");
            tokio::spawn(execute(self.shared.clone(), job, permit, sent_at + lease));
        }
        Ok((n, offered))
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
        let mut error_backoff = Duration::from_millis(100);
        loop {
            let first = tokio::select! {
                p = self.slots.clone().acquire_owned() => p.expect("semaphore never closed"),
                _ = stop.cancelled() => return,
            };
            if !immediate {
                tokio::select! {
                    _ = self.wake.notified() => {}
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
            match self.claim_with(permits).await {
                Ok((n, offered)) => {
                    error_backoff = Duration::from_millis(100);
                    immediate = n == offered;
                    if immediate && self.shared.config.claims_in_flight > 1 {
                        // A backlog: a sibling fetcher asleep until the next poll joins in.
                        self.wake.notify_one();
                    }
                    if immediate && self.starved.swap(false, Ordering::Relaxed) {
                        // A backlog, and slots sat idle while this claim was out: the buffer
                        // is shallower than a claim round trip's worth of work. Deepen it by
                        // this claim (time-outs halve it); a buffer the slots never drain
                        // does not grow, so slow handlers are not handed jobs to time out.
                        let max = self.shared.config.prefetch;
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
