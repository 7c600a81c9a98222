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
    /// Jobs of this queue started so far (counted by the executor).
    pub started: Arc<std::sync::atomic::AtomicU64>,
    /// The pace of the last window (see [`Window`]).
    pub window: std::sync::Mutex<Window>,
}

/// How many jobs a queue started in the last window of a quarter of `prefetch_timeout` (or
/// so far in the window under way, when more): the deepest buffer that still starts well
/// within the time-out. Full claims deepen the buffer up to this (and `prefetch`), so a
/// queue of slow handlers is not handed jobs that would wait out their time-out and go back
/// (each such release costs a claim and a write).
pub(crate) struct Window {
    since: Instant,
    started_then: u64,
    cap: usize,
}

impl Window {
    pub(crate) fn new() -> Window {
        Window {
            since: Instant::now(),
            started_then: 0,
            cap: 0,
        }
    }

    /// The cap at `now`, given the queue's running count of jobs `started`; at least `floor`
    /// (one claim's worth, which the depth starts at). `now` is a parameter so the windows
    /// can be tested without waiting them out.
    fn cap(&mut self, now: Instant, started: u64, quarter: Duration, floor: usize) -> usize {
        let so_far =
            usize::try_from(started.saturating_sub(self.started_then)).unwrap_or(usize::MAX);
        if now.saturating_duration_since(self.since) >= quarter {
            self.cap = so_far;
            self.since = now;
            self.started_then = started;
            return self.cap.max(floor);
        }
        // The window under way counts too: what it started so far is no more than the last
        // quarter started, so it may raise the cap at once (a fresh worker's first window
        // would otherwise hold the depth at one claim for its whole quarter — 40 % of a
        // 20,000-job drain at 10 slots).
        self.cap.max(so_far).max(floor)
    }
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

    /// The deepest buffer the queue's recent pace allows (see [`Window`]); at least one
    /// claim's worth, which the depth starts at.
    fn pace(&self) -> usize {
        let started = self.started.load(Ordering::Relaxed);
        self.window.lock().expect("poisoned").cap(
            Instant::now(),
            started,
            self.shared.config.prefetch_timeout / 4,
            self.shared.config.claim_batch,
        )
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
                    if immediate {
                        // A backlog: deepen the buffer by this claim, up to what the queue
                        // starts in a quarter of the time-out (time-outs halve it).
                        let max = self.shared.config.prefetch.min(self.pace());
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

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Duration = Duration::from_millis(250);

    #[test]
    fn the_cap_follows_the_last_window_and_the_one_under_way() {
        let t0 = Instant::now();
        let mut w = Window {
            since: t0,
            started_then: 0,
            cap: 0,
        };
        // A fresh worker: one claim's worth until it has started more.
        assert_eq!(w.cap(t0, 0, Q, 100), 100);
        // Within the first window, what it started so far already counts.
        assert_eq!(w.cap(t0 + Q / 2, 700, Q, 100), 700);
        // The window closes: the cap is what it started in it, kept through the next one
        // while that one has started less.
        assert_eq!(w.cap(t0 + Q, 900, Q, 100), 900);
        assert_eq!(w.cap(t0 + Q + Q / 2, 1_200, Q, 100), 900);
        // A slow window lowers the cap when it closes, down to the floor.
        assert_eq!(w.cap(t0 + Q * 2, 1_230, Q, 100), 330);
        assert_eq!(w.cap(t0 + Q * 3, 1_240, Q, 100), 100);
    }
}
