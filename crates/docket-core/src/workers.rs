//! The registry of live worker processes: each worker reports itself every few seconds with
//! an expiry on the database's clock, and removes itself when it stops. A report for
//! operators (and for "why is this job not running?"), never a lock: nothing that decides who
//! runs a job reads it.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// What a worker reports about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerBeat {
    /// Its lease-owner identity.
    pub owner: String,
    /// Host name (at most 255 bytes; longer is cut).
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Queues it serves.
    pub queues: Vec<String>,
    /// Run slots over all its queues.
    pub concurrency: u32,
    /// Jobs it holds now (executing and buffered: all `running` in the database).
    pub in_flight: u32,
    /// Of those, claimed ahead of a free slot and not yet started (the prefetch buffer).
    #[serde(default)]
    pub buffered: u32,
    /// `buffered` split by queue: one count per entry of `queues`, in its order (empty from a
    /// worker older than this field). The database says `running` for executing and buffered
    /// jobs alike; this is how the pages tell them apart per queue.
    #[serde(default)]
    pub buffered_by_queue: Vec<u32>,
}

impl WorkerBeat {
    /// Its buffered jobs of `queue` (0 when it does not serve it or did not say).
    pub fn buffered_in(&self, queue: &str) -> u32 {
        self.queues
            .iter()
            .position(|q| q == queue)
            .and_then(|i| self.buffered_by_queue.get(i).copied())
            .unwrap_or(0)
    }
}

/// A live worker, as the registry has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerInfo {
    /// What it last reported.
    #[serde(flatten)]
    pub beat: WorkerBeat,
    /// First report of this process.
    pub started_at: DateTime<Utc>,
    /// Last report.
    pub seen_at: DateTime<Utc>,
    /// When it counts as gone unless it reports again.
    pub expires_at: DateTime<Utc>,
    /// True while it holds maintenance leadership.
    pub leader: bool,
    /// When it stopped cleanly (`None`: running, or gone without a word — a crash).
    #[serde(default)]
    pub stopped_at: Option<DateTime<Utc>>,
}

/// How a worker of the registry stands at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "at")]
pub enum WorkerStatus {
    /// Reporting.
    Live,
    /// Stopped cleanly at this time (its jobs finished or released).
    Stopped(DateTime<Utc>),
    /// No report since its registration expired at this time: killed, frozen or cut off.
    /// Its leases, if any, are the reaper's once they expire.
    Expired(DateTime<Utc>),
}

impl WorkerInfo {
    /// How it stands at `now` (the database's clock).
    pub fn status(&self, now: DateTime<Utc>) -> WorkerStatus {
        match self.stopped_at {
            Some(t) => WorkerStatus::Stopped(t),
            None if self.expires_at > now => WorkerStatus::Live,
            None => WorkerStatus::Expired(self.expires_at),
        }
    }
}

/// Who holds the maintenance leadership's lease, whether or not its worker still reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaderLease {
    /// The holder's owner identity.
    pub owner: String,
    /// When its lease runs out; another worker takes over after that.
    pub expires_at: DateTime<Utc>,
}

/// The worker registry for operators: live workers and those gone within a window, the
/// leader's lease, and the database's clock they were read by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Registry {
    /// Live and recently gone workers, the latest report first.
    pub workers: Vec<WorkerInfo>,
    /// The leadership lease, live or not, if anyone ever held it.
    pub leader: Option<LeaderLease>,
    /// The database's clock.
    pub now: DateTime<Utc>,
}
