//! What the overview leaves out and an operator needs at a glance: per queue, the jobs
//! waiting to be retried, the age of the oldest running job, and the blocked jobs split by
//! why they wait (`Store::queue_health`); and the per-minute depth history
//! (`Store::depth_history`) that tells a growing backlog from a steady one.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::inspect::Count;

/// Why a blocked job waits: one word per gate, the same on the pages, in `docket stats` and in
/// the `docket_queue_blocked_jobs` gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedReason {
    /// Its concurrency key already runs as many jobs as its limit allows.
    KeyLimit,
    /// An earlier job of its ordering key is pending or running.
    OrderingBehind,
    /// The earliest unfinished job of its ordering key is dead: nothing behind it runs until
    /// an operator retries or skips that job.
    DeadHead,
    /// Nothing holds it any more; the key sweep clears the flag within a minute (or the next
    /// completion of its key does, at once).
    AwaitingSweep,
}

impl BlockedReason {
    /// Every reason, in display order.
    pub const ALL: [BlockedReason; 4] = [
        BlockedReason::KeyLimit,
        BlockedReason::OrderingBehind,
        BlockedReason::DeadHead,
        BlockedReason::AwaitingSweep,
    ];

    /// The stored and exported word.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockedReason::KeyLimit => "key_limit",
            BlockedReason::OrderingBehind => "ordering_behind",
            BlockedReason::DeadHead => "dead_head",
            BlockedReason::AwaitingSweep => "awaiting_sweep",
        }
    }

    /// Parses [`BlockedReason::as_str`].
    pub fn parse(s: &str) -> Option<BlockedReason> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Words for people.
    pub fn label(self) -> &'static str {
        match self {
            BlockedReason::KeyLimit => "key limit full",
            BlockedReason::OrderingBehind => "behind an earlier job of its key",
            BlockedReason::DeadHead => "behind a dead job of its key",
            BlockedReason::AwaitingSweep => "free, released within 60 s",
        }
    }
}

/// One queue's health beyond the overview.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueHealth {
    /// The queue.
    pub queue: String,
    /// Pending jobs that failed before and wait for another attempt.
    pub retrying: Count,
    /// Age of the oldest running job (since its attempt began), seconds.
    pub oldest_running_age_s: Option<f64>,
    /// Blocked jobs by reason (reasons with none are left out).
    pub blocked: Vec<(BlockedReason, i64)>,
    /// True when more blocked jobs exist than were classified (the cap was reached).
    pub blocked_more: bool,
}

impl QueueHealth {
    /// Blocked jobs held for `reason`.
    pub fn blocked_by(&self, reason: BlockedReason) -> i64 {
        self.blocked
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }
}

/// One minute of one queue's depth, as the leader sampled it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DepthSample {
    /// The queue.
    pub queue: String,
    /// The minute it was taken in (truncated).
    pub minute: DateTime<Utc>,
    /// Due jobs not started, blocked or not (capped like the overview's counts).
    pub waiting: i64,
    /// Running jobs.
    pub running: i64,
    /// Jobs enqueued since the previous sample (ids allotted since then that still exist);
    /// `None` for the first sample after a gap of more than two minutes.
    pub enqueued: Option<i64>,
}

/// Whether a queue's backlog grows: its waiting count rose in each of the last `n` complete
/// sampled minutes (gaps break the run) and the last one is above the first by more than a
/// tenth. `samples` are one queue's, any order.
pub fn backlog_growing(samples: &[DepthSample], n: usize) -> bool {
    let mut s: Vec<&DepthSample> = samples.iter().collect();
    s.sort_by_key(|d| d.minute);
    if n == 0 || s.len() < n + 1 {
        return false;
    }
    let tail = &s[s.len() - n - 1..];
    let consecutive = tail
        .windows(2)
        .all(|w| w[1].minute - w[0].minute == chrono::Duration::minutes(1));
    let rising = tail.windows(2).all(|w| w[1].waiting > w[0].waiting);
    let first = tail[0].waiting.max(1);
    consecutive && rising && tail[n].waiting * 10 > first * 11
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(m: i64, waiting: i64) -> DepthSample {
        DepthSample {
            queue: "q".into(),
            minute: DateTime::from_timestamp(1_800_000_000 + m * 60, 0).unwrap(),
            waiting,
            running: 0,
            enqueued: None,
        }
    }

    #[test]
    fn a_backlog_grows_only_when_it_rises_every_minute_by_more_than_a_tenth() {
        let rising: Vec<_> = (0..6).map(|m| at(m, 100 + m * 10)).collect();
        assert!(backlog_growing(&rising, 5));
        let mut dip = rising.clone();
        dip[4].waiting = 105;
        assert!(!backlog_growing(&dip, 5));
        let slow: Vec<_> = (0..6).map(|m| at(m, 1000 + m)).collect();
        assert!(!backlog_growing(&slow, 5), "a rise of 0.5 % is noise");
        let mut gap = rising.clone();
        gap[3].minute += chrono::Duration::minutes(1);
        assert!(!backlog_growing(&gap, 5), "a missing minute breaks the run");
        assert!(!backlog_growing(&rising[..5], 5), "too few samples");
        let from_zero: Vec<_> = (0..6).map(|m| at(m, m * 3)).collect();
        assert!(backlog_growing(&from_zero, 5));
    }

    #[test]
    fn reasons_round_trip() {
        for r in BlockedReason::ALL {
            assert_eq!(BlockedReason::parse(r.as_str()), Some(r));
        }
        assert_eq!(BlockedReason::parse("other"), None);
    }
}
