//! What one queue's fetcher needs to know about the jobs it has claimed, so that it claims
//! ahead of its free slots only what will start well within `prefetch_timeout`, and never
//! buffers work that holds a limit.
//!
//! Two rules, both against the *prefetch churn* a buffer causes with real handlers (a claim
//! of 200 jobs for 3 slots of 0.5 s handlers: 197 wait out their time-out, go back, and are
//! claimed again, over and over):
//! - **Depth by measured pace.** The buffer may hold what the queue's slots start in a
//!   quarter of the time-out at the handlers' measured mean run time
//!   (`slots × quarter / mean`), never more than `prefetch`, and nothing before a first
//!   handler has finished. No-op handlers (microseconds) get the whole `prefetch`; handlers of
//!   0.5 s on 3 slots get one job or none.
//! - **Controlled work only for free slots.** A job that holds a limit while it is `running`
//!   (its queue has a limit or rate, or it has an ordering or concurrency key) is claimed
//!   only for a run slot that is free now ([`QueuePace::reserve`]): buffered, it would fill
//!   its tenant's limit, or block its ordering key, for work another worker could run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit};

/// How much one new run time moves the mean (an exponentially weighted moving average).
const WEIGHT: f64 = 0.1;

/// One queue's pace and buffer, shared by its fetchers and executions.
#[derive(Default)]
pub(crate) struct QueuePace {
    /// The mean handler run time in nanoseconds, as `f64` bits; 0 before the first sample.
    mean_ns: AtomicU64,
    /// Jobs claimed, or reserved by a claim in flight, that have not yet started (taken a
    /// run slot) or given up: they will take free run slots before anything claimed later.
    unstarted: AtomicUsize,
    /// Poked whenever a run slot of the queue frees, for a fetcher whose last claim may have
    /// been cut short by the free slots.
    pub slot_freed: Notify,
}

impl QueuePace {
    /// Records one handler's run time.
    pub fn record(&self, ran: Duration) {
        let x = ran.as_nanos() as f64;
        // A lost update between two racing executions only drops one sample of a mean.
        let old = f64::from_bits(self.mean_ns.load(Ordering::Relaxed));
        let new = if old == 0.0 {
            x.max(1.0)
        } else {
            (old + WEIGHT * (x - old)).max(1.0)
        };
        self.mean_ns.store(new.to_bits(), Ordering::Relaxed);
    }

    /// The mean run time so far (`None` before any handler finished).
    pub fn mean(&self) -> Option<Duration> {
        let m = f64::from_bits(self.mean_ns.load(Ordering::Relaxed));
        (m > 0.0).then(|| Duration::from_nanos(m as u64))
    }

    /// The deepest buffer the measured pace allows: what `slots` start in `quarter` at the
    /// mean run time, at most `prefetch`; 0 before any handler finished.
    pub fn cap(&self, slots: usize, quarter: Duration, prefetch: usize) -> usize {
        let Some(mean) = self.mean() else { return 0 };
        let per_slot = quarter.as_secs_f64() / mean.as_secs_f64().max(1e-9);
        let cap = (slots as f64 * per_slot).floor();
        if cap >= prefetch as f64 {
            prefetch
        } else {
            cap as usize
        }
    }

    /// Reserves, for a claim about to be sent, the run slots free now that no earlier
    /// claimed job will take: how many controlled jobs the claim may take. Give the
    /// reservation back with [`QueuePace::settle`] once the claim returned.
    pub fn reserve(&self, free_run_slots: usize) -> usize {
        let mut cur = self.unstarted.load(Ordering::Relaxed);
        loop {
            let free = free_run_slots.saturating_sub(cur);
            match self.unstarted.compare_exchange_weak(
                cur,
                cur + free,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return free,
                Err(now) => cur = now,
            }
        }
    }

    /// Replaces a claim's reservation by the jobs it claimed (each of which later calls
    /// [`QueuePace::left_buffer`] once).
    pub fn settle(&self, reserved: usize, claimed: usize) {
        // Add first: the count never drops below what is still reserved or claimed.
        self.unstarted.fetch_add(claimed, Ordering::AcqRel);
        self.unstarted.fetch_sub(reserved, Ordering::AcqRel);
    }

    /// A claimed job took its run slot, or will never take one.
    pub fn left_buffer(&self) {
        let _ = self
            .unstarted
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(1))
            });
    }

    /// Claimed jobs waiting for a run slot (and reservations of claims in flight).
    pub fn buffered(&self) -> usize {
        self.unstarted.load(Ordering::Relaxed)
    }
}

/// A run slot held by an executing job; freeing it tells the queue's fetcher.
pub(crate) struct RunSlot {
    pub _permit: OwnedSemaphorePermit,
    pub pace: Option<std::sync::Arc<QueuePace>>,
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        if let Some(p) = &self.pace {
            p.slot_freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Duration = Duration::from_millis(250);

    #[test]
    fn nothing_is_buffered_before_a_handler_finished() {
        let p = QueuePace::default();
        assert_eq!(p.cap(10, Q, 600), 0);
    }

    #[test]
    fn the_cap_is_what_the_slots_start_in_a_quarter() {
        let p = QueuePace::default();
        // Handlers of half a second on 3 slots start 1.5 jobs in a quarter second.
        p.record(Duration::from_millis(500));
        assert_eq!(p.cap(3, Q, 600), 1);
        // 1.5 s handlers on 8 slots: 1.33.
        let p = QueuePace::default();
        p.record(Duration::from_millis(1500));
        assert_eq!(p.cap(8, Q, 600), 1);
        // No-op handlers: the whole prefetch.
        let p = QueuePace::default();
        p.record(Duration::from_micros(3));
        assert_eq!(p.cap(10, Q, 600), 600);
        // 5 ms handlers on 50 slots: 2,500 a quarter, capped.
        let p = QueuePace::default();
        p.record(Duration::from_millis(5));
        assert_eq!(p.cap(50, Q, 600), 600);
    }

    #[test]
    fn the_mean_follows_a_change_of_handler() {
        let p = QueuePace::default();
        p.record(Duration::from_micros(2));
        assert_eq!(p.cap(3, Q, 600), 600);
        // The handlers become slow: within some dozens of jobs the cap is down to slots.
        for _ in 0..60 {
            p.record(Duration::from_millis(800));
        }
        assert_eq!(p.cap(3, Q, 600), 0);
    }

    #[test]
    fn reservations_count_buffered_jobs_and_claims_in_flight() {
        let p = QueuePace::default();
        // 3 free slots, nothing buffered: a claim may take 3 controlled jobs.
        assert_eq!(p.reserve(3), 3);
        // A second claim in flight at the same time may take none.
        assert_eq!(p.reserve(3), 0);
        // The first claimed 5 (2 uncontrolled beyond its reservation), the second nothing.
        p.settle(3, 5);
        p.settle(0, 0);
        assert_eq!(p.buffered(), 5);
        // Three start, two wait: still no slot for controlled work while 2 wait for 0 free.
        for _ in 0..3 {
            p.left_buffer();
        }
        assert_eq!(p.reserve(0), 0);
        assert_eq!(p.buffered(), 2);
        // Two slots free up and the two waiting take them; then one more frees.
        p.left_buffer();
        p.left_buffer();
        assert_eq!(p.reserve(1), 1);
        p.settle(1, 0);
        assert_eq!(p.buffered(), 0);
    }
}
