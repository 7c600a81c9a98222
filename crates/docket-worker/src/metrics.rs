//! Counters a worker keeps about itself, for tests, the CLI and dashboards.

use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Jobs claimed.
    pub claimed: AtomicU64,
    /// Claim statements run (claimed / claims = the mean claim batch).
    pub claims: AtomicU64,
    /// Completer statements run.
    pub flushes: AtomicU64,
    /// Outcomes written: succeeded.
    pub completed: AtomicU64,
    /// Outcomes written: failed (any class).
    pub failed: AtomicU64,
    /// Outcomes written: snoozed.
    pub snoozed: AtomicU64,
    /// Jobs released at shutdown.
    pub released: AtomicU64,
    /// Writes fenced off because the lease was lost.
    pub fenced: AtomicU64,
    /// Leases found lost by a heartbeat (or presumed lost locally).
    pub leases_lost: AtomicU64,
    /// Handler panics.
    pub panics: AtomicU64,
    /// LISTEN connections (re-)established.
    pub listen_connects: AtomicU64,
    /// Notifications received.
    pub notifications: AtomicU64,
    /// Expired leases reaped by this process as leader.
    pub reaped: AtomicU64,
}

/// A plain copy of the counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MetricsSnapshot {
    /// Jobs claimed.
    pub claimed: u64,
    /// Claim statements run (claimed / claims = the mean claim batch).
    pub claims: u64,
    /// Completer statements run.
    pub flushes: u64,
    /// Outcomes written: succeeded.
    pub completed: u64,
    /// Outcomes written: failed (any class).
    pub failed: u64,
    /// Outcomes written: snoozed.
    pub snoozed: u64,
    /// Jobs released at shutdown.
    pub released: u64,
    /// Writes fenced off because the lease was lost.
    pub fenced: u64,
    /// Leases found lost by a heartbeat (or presumed lost locally).
    pub leases_lost: u64,
    /// Handler panics.
    pub panics: u64,
    /// LISTEN connections (re-)established.
    pub listen_connects: u64,
    /// Notifications received.
    pub notifications: u64,
    /// Expired leases reaped by this process as leader.
    pub reaped: u64,
}

impl Metrics {
    pub(crate) fn record_written(&self, what: &str, n: usize) {
        let c = match what {
            "complete" => &self.completed,
            "fail" => &self.failed,
            "snooze" => &self.snoozed,
            _ => &self.released,
        };
        c.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_fenced(&self, n: usize) {
        self.fenced.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            claimed: r(&self.claimed),
            claims: r(&self.claims),
            flushes: r(&self.flushes),
            completed: r(&self.completed),
            failed: r(&self.failed),
            snoozed: r(&self.snoozed),
            released: r(&self.released),
            fenced: r(&self.fenced),
            leases_lost: r(&self.leases_lost),
            panics: r(&self.panics),
            listen_connects: r(&self.listen_connects),
            notifications: r(&self.notifications),
            reaped: r(&self.reaped),
        }
    }
}
