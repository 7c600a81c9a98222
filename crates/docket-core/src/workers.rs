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
}
