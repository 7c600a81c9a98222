//! Queue and key controls: pause, concurrency limits and token-bucket rate limits.
//!
//! All of them are enforced by the database inside the claim, so they hold across every
//! worker process, not per process. See `docs/guarantees.md` ("Scheduling controls").

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::duration::parse_bounded;
use crate::job::JobId;
use crate::ValidationError;

/// A token bucket: at most `limit` claims per `period`, with bursts of up to `limit`.
/// Over any window of length `t`, at most `limit + limit * t / period` jobs are claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RateLimit {
    /// Claims allowed per period (and the largest burst).
    pub limit: i32,
    #[serde(with = "millis")]
    /// The period the limit refills over.
    pub period: Duration,
}

mod millis {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

impl RateLimit {
    /// Checks the bounds: 1..=1,000,000 per 1 ms..=1 day.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if !(1..=1_000_000).contains(&self.limit) {
            return Err(ValidationError::Other {
                what: "rate limit",
                reason: format!("{} is outside 1..=1000000", self.limit),
            });
        }
        crate::duration::check_bounds(
            "rate period",
            self.period,
            Duration::from_millis(1),
            Duration::from_secs(24 * 3600),
        )?;
        Ok(())
    }
}

/// Parses `N/DURATION`, e.g. `10/1s`, `600/1m`, `5/500ms`.
impl FromStr for RateLimit {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: String| ValidationError::Other {
            what: "rate limit",
            reason,
        };
        let (n, per) = s
            .split_once('/')
            .ok_or_else(|| bad(format!("{s:?}: expected N/DURATION, e.g. 10/1s")))?;
        let limit: i32 = n
            .trim()
            .parse()
            .map_err(|_| bad(format!("{n:?} is not a whole number")))?;
        let period = parse_bounded(
            "rate period",
            per,
            Duration::from_millis(1),
            Duration::from_secs(24 * 3600),
        )?;
        let r = RateLimit { limit, period };
        r.validate()?;
        Ok(r)
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            self.limit,
            humantime::format_duration(self.period)
        )
    }
}

/// The limits of a queue. Setting them replaces all three.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueLimits {
    /// Running jobs of the queue, across all workers.
    pub max_running: Option<i32>,
    /// Default cap per concurrency key, for keys without their own [`KeyLimit`].
    pub key_max_running: Option<i32>,
    /// Claims per period for the whole queue.
    pub rate: Option<RateLimit>,
}

impl QueueLimits {
    /// Checks every value.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_cap("max_running", self.max_running)?;
        check_cap("key_max_running", self.key_max_running)?;
        self.rate.map(|r| r.validate()).transpose()?;
        Ok(())
    }
}

fn check_cap(what: &'static str, v: Option<i32>) -> Result<(), ValidationError> {
    match v {
        Some(n) if !(1..=1_000_000).contains(&n) => Err(ValidationError::Other {
            what,
            reason: format!("{n} is outside 1..=1000000"),
        }),
        _ => Ok(()),
    }
}

/// A queue's controls as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueControl {
    /// The queue.
    pub queue: String,
    /// Set while the queue is paused.
    pub paused_at: Option<DateTime<Utc>>,
    /// Its concurrency and rate limits (all `None`: none).
    pub limits: QueueLimits,
    /// Tokens left in the queue's bucket now (with a rate limit).
    pub tokens: Option<f64>,
}

impl QueueControl {
    /// A queue without a row has no controls.
    pub fn none(queue: &str) -> Self {
        QueueControl {
            queue: queue.to_string(),
            paused_at: None,
            limits: QueueLimits::default(),
            tokens: None,
        }
    }
}

/// The limits of one concurrency key, in every queue. Both `None` removes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyLimit {
    /// The concurrency key the limits apply to.
    pub key: String,
    /// At most this many of its jobs running at once, across queues and workers.
    pub max_running: Option<i32>,
    /// At most this many of its jobs claimed per period.
    pub rate: Option<RateLimit>,
}

impl KeyLimit {
    /// Checks every value.
    pub fn validate(&self) -> Result<(), ValidationError> {
        crate::validate::key("concurrency key", Some(&self.key))?;
        check_cap("max_running", self.max_running)?;
        self.rate.map(|r| r.validate()).transpose()?;
        Ok(())
    }
}

/// An ordering key that cannot progress because its oldest unfinished job is dead.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockedKey {
    /// The ordering key.
    pub key: String,
    /// The dead job at the head of the key: retry it or skip it.
    pub head: JobId,
    /// The dead job's queue.
    pub queue: String,
    /// The dead job's kind.
    pub kind: String,
    /// When it died.
    pub dead_since: Option<DateTime<Utc>>,
    /// Pending jobs of the key waiting behind it.
    pub waiting: i64,
}
