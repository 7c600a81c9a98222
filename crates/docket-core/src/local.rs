//! Engine-neutral pieces for engines that keep the queue's rules in Rust (SQLite, MariaDB /
//! MySQL) where PostgreSQL keeps them in SQL: the bounded error history and the retry
//! backoff (PostgreSQL's `push_error` and `backoff_delay`), why a lease was lost, token
//! buckets (`bucket_tokens`), and the in-process wake-up channel of an engine without LISTEN.
//! Times are milliseconds since the epoch on the database's clock.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use chrono::{DateTime, Utc};
use rand::Rng;
use tokio::sync::broadcast;

use crate::engine::{Listener, Wake};
use crate::error::{LeaseLost, LostReason};
use crate::job::{JobState, Lease};

/// Entries kept in a job's error history: the first and the 31 most recent.
pub const HISTORY: usize = 32;

/// Retry delay in ms for the `n`th failure: min(cap, base × 2^(n−1)) with ±25 % jitter, never
/// above cap (base 10 s and cap 1 h by default).
pub fn backoff_ms(n: usize, base: Option<i64>, cap: Option<i64>) -> i64 {
    let cap = cap.unwrap_or(3_600_000) as f64;
    let base = base.unwrap_or(10_000) as f64;
    let exp = (n.max(1) - 1).min(40) as i32;
    let raw = cap.min(base * 2f64.powi(exp));
    let jitter = 0.75 + rand::thread_rng().gen::<f64>() * 0.5;
    cap.min(raw * jitter) as i64
}

/// Appends `entry` to the stored history `errors` (a JSON array's text), keeping the first
/// entry and the most recent ones.
pub fn push_error(errors: &str, entry: serde_json::Value) -> String {
    let mut v: Vec<serde_json::Value> = serde_json::from_str(errors).unwrap_or_default();
    if v.len() >= HISTORY {
        v.remove(1);
    }
    v.push(entry);
    serde_json::Value::Array(v).to_string()
}

/// Entries in a stored history (0 when it does not parse).
pub fn history_len(errors: &str) -> usize {
    serde_json::from_str::<Vec<serde_json::Value>>(errors).map_or(0, |v| v.len())
}

/// One history entry (the shape `ErrorEntry` reads).
pub fn entry(
    attempt: i32,
    now_ms: i64,
    class: &str,
    message: &str,
    owner: Option<&str>,
) -> serde_json::Value {
    let at: DateTime<Utc> = DateTime::from_timestamp_millis(now_ms).unwrap_or_default();
    let mut e = serde_json::json!({
        "attempt": attempt, "at": at, "class": class, "message": message,
    });
    if let Some(o) = owner {
        e["owner"] = o.into();
    }
    e
}

/// Why `lease` no longer holds, from the job's (state, attempt) now (`None`: no such job).
pub fn lost(lease: Lease, now: Option<(JobState, i32)>) -> LeaseLost {
    let reason = match now {
        None => LostReason::Missing,
        Some((_, a)) if a > lease.attempt => LostReason::Superseded(a),
        Some((s, _)) if s != JobState::Running => LostReason::NotRunning(s),
        Some(_) => LostReason::Expired,
    };
    LeaseLost { lease, reason }
}

/// A token bucket: `rate` per `period_ms`, bursts up to `rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Tokens added per period (and the largest burst).
    pub rate: i32,
    /// The period, in milliseconds.
    pub period_ms: i64,
    /// Tokens in the bucket at `refilled_at`.
    pub tokens: f64,
    /// When `tokens` was last brought up to date (milliseconds since the epoch).
    pub refilled_at: i64,
}

impl Bucket {
    /// Tokens available at `now` (PostgreSQL's `bucket_tokens`).
    pub fn tokens_at(&self, now: i64) -> f64 {
        let elapsed = (now - self.refilled_at).max(0) as f64;
        (self.rate as f64).min(self.tokens + elapsed * self.rate as f64 / self.period_ms as f64)
    }
}

/// Hints kept for a slow receiver before it is told it missed some (then every fetcher
/// claims once, as after a dropped connection).
const CAPACITY: usize = 1024;

/// A database's in-process hints: the wake-up channel, and the queues whose ready work a
/// claim held back (a key at its limit or its ordering head running, a queue full or out of
/// tokens). An engine without a server-side release hook cannot tell other workers when a
/// key frees up, so the rules hint those queues whenever a running job ends (PostgreSQL's
/// `jobs_release_keys` trigger sends the same NOTIFY); workers of other processes poll.
#[derive(Debug)]
pub struct Hub {
    tx: broadcast::Sender<Wake>,
    waiting: Mutex<std::collections::BTreeSet<String>>,
    /// Running jobs ended so far ([`Hub::freed`]): a claim reads it before it decides, so a
    /// job that ends while the claim holds work back is not missed (see [`Hub::held_back`]).
    freed: std::sync::atomic::AtomicU64,
}

impl Hub {
    /// Sends a hint to this process's listeners.
    pub fn send(&self, w: Wake) {
        let _ = self.tx.send(w);
    }

    /// A listener of this database's hints.
    pub fn listener(&self) -> LocalHints {
        LocalHints::new(&self.tx)
    }

    /// How many times a running job has ended: read by a claim before it decides.
    pub fn epoch(&self) -> u64 {
        self.freed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A claim of `queue`, which read [`Hub::epoch`] `since` before deciding, left ready work
    /// behind for a key or a limit. Recorded for the next [`Hub::freed`]; and when a job ended
    /// while the claim was deciding (its hint went out before this record), the queue is
    /// hinted now — else that end's freed key would wake nobody until the next poll.
    pub fn held_back(&self, queue: &str, since: u64) {
        {
            let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            if !w.contains(queue) {
                w.insert(queue.to_string());
            }
        }
        if self.epoch() != since {
            self.send(Wake::Queue(queue.to_string()));
        }
    }

    /// A running job ended (a key or a slot may be free): hints every queue that had work
    /// held back, once.
    pub fn freed(&self) {
        if crate::mutants::active(crate::mutants::Mutant::HeldBackNotHinted) {
            return;
        }
        self.freed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let queues = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
        for q in queues {
            self.send(Wake::Queue(q));
        }
    }
}

/// The in-process hub of database `key` (a file's absolute path; host, port and database
/// name): stores of one process on one database share it, whichever enqueued.
pub fn hub(key: &str) -> std::sync::Arc<Hub> {
    static R: OnceLock<Mutex<HashMap<String, std::sync::Arc<Hub>>>> = OnceLock::new();
    let mut r = R
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    r.entry(key.to_string())
        .or_insert_with(|| {
            std::sync::Arc::new(Hub {
                tx: broadcast::channel(CAPACITY).0,
                waiting: Default::default(),
                freed: Default::default(),
            })
        })
        .clone()
}

#[cfg(test)]
mod hub_tests {
    use super::*;
    use crate::engine::Listener;

    #[tokio::test]
    async fn a_freed_slot_hints_each_held_back_queue_once() {
        let h = hub("test:hub");
        let mut l = h.listener();
        h.freed();
        let since = h.epoch();
        h.held_back("a", since);
        h.held_back("a", since);
        h.held_back("b", since);
        h.freed();
        h.freed();
        h.send(Wake::Queue("end".into()));
        let mut got = Vec::new();
        while let Ok(Some(Wake::Queue(q))) = l.recv().await {
            let end = q == "end";
            got.push(q);
            if end {
                break;
            }
        }
        assert_eq!(got, ["a", "b", "end"]);
    }
}

/// The listener of an engine without LISTEN: the hints this process sent. Each is only a
/// reason to look (a fetcher claims, a heartbeater beats), as every hint.
#[derive(Debug)]
pub struct LocalHints {
    rx: broadcast::Receiver<Wake>,
}

impl LocalHints {
    /// Listens on `tx`.
    pub fn new(tx: &broadcast::Sender<Wake>) -> Self {
        LocalHints { rx: tx.subscribe() }
    }
}

impl Listener for LocalHints {
    async fn recv(&mut self) -> crate::Result<Option<Wake>> {
        match self.rx.recv().await {
            Ok(w) => Ok(Some(w)),
            // Missed hints: report a "reconnect", so every fetcher claims once.
            Err(broadcast::error::RecvError::Lagged(_)) => Ok(None),
            // Never: the registry keeps a sender per database for the process's life.
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// The claim's bound on *controlled* work ([`crate::ClaimRequest::controlled`]), as
/// PostgreSQL's `claim_controlled()` applies it (migration 0014): every job of a queue with a
/// `max_running` or a rate, and every keyed job, counts against it; unkeyed jobs of a queue
/// without limits do not.
#[derive(Debug, Clone, Copy)]
pub struct ControlledBound {
    cap: Option<i64>,
    taken: i64,
}

impl ControlledBound {
    /// The bound of a claim that asked for `controlled` (`None`: unbounded).
    pub fn new(controlled: Option<i32>) -> ControlledBound {
        ControlledBound {
            cap: controlled.map(|c| i64::from(c.max(0))),
            taken: 0,
        }
    }

    /// A limited queue's budget: no more than the bound (all its jobs hold its limit).
    pub fn limited_queue_budget(&self, budget: i64) -> i64 {
        self.cap.map_or(budget, |c| budget.min(c))
    }

    /// Whether one more job with (`keyed`) or without keys fits.
    pub fn allows(&self, keyed: bool) -> bool {
        !keyed || self.cap.is_none_or(|c| self.taken < c)
    }

    /// Counts a chosen job.
    pub fn took(&mut self, keyed: bool) {
        if keyed {
            self.taken += 1;
        }
    }
}

#[cfg(test)]
mod controlled_tests {
    use super::ControlledBound;

    #[test]
    fn keyed_jobs_and_limited_queues_count_against_the_bound() {
        let mut b = ControlledBound::new(Some(2));
        assert_eq!(b.limited_queue_budget(200), 2);
        assert!(b.allows(true));
        b.took(true);
        b.took(false);
        assert!(b.allows(true));
        b.took(true);
        assert!(!b.allows(true), "two keyed jobs taken: no third");
        assert!(
            b.allows(false),
            "unkeyed jobs of an unlimited queue are not bounded"
        );
        let free = ControlledBound::new(None);
        assert_eq!(free.limited_queue_budget(200), 200);
        assert!(free.allows(true));
        assert!(!ControlledBound::new(Some(0)).allows(true));
    }
}

/// Keys a claim found held — an ordering key whose head is not this job, a concurrency key
/// at its running limit or out of tokens — so that a further pass of the claim looks past
/// every job of theirs. Without it a deep backlog of one held key fills the claim's whole
/// walk (4 × limit + 200 candidates) and holds back every other job of its queue.
#[derive(Debug, Default, Clone)]
pub struct HeldKeys {
    /// Concurrency keys held (limit full, out of tokens).
    pub concurrency: Vec<String>,
    /// Ordering keys held (an earlier job of the key is unfinished).
    pub ordering: Vec<String>,
    new: usize,
    passes: usize,
}

impl HeldKeys {
    /// Passes a claim makes at most.
    pub const MAX_PASSES: usize = 8;

    /// A concurrency key found held.
    pub fn concurrency(&mut self, k: &str) {
        if !self.concurrency.iter().any(|x| x == k) {
            self.concurrency.push(k.to_string());
            self.new += 1;
        }
    }

    /// An ordering key found held.
    pub fn ordering(&mut self, k: &str) {
        if !self.ordering.iter().any(|x| x == k) {
            self.ordering.push(k.to_string());
            self.new += 1;
        }
    }

    /// After a pass that read `read` candidates of at most `depth` and chose `chosen` of a
    /// `budget`: whether another pass, leaving out the held keys, may find more. Not when
    /// the budget is met, the queue showed all it had, this pass found no new held key, or
    /// the passes are used up. Resets the count of new keys for the next pass.
    pub fn another_pass(
        &mut self,
        read: usize,
        depth: usize,
        chosen: usize,
        budget: usize,
    ) -> bool {
        self.passes += 1;
        let again =
            chosen < budget && read >= depth && self.new > 0 && self.passes < Self::MAX_PASSES;
        self.new = 0;
        again
    }
}

#[cfg(test)]
mod held_tests {
    use super::HeldKeys;

    #[test]
    fn another_pass_only_while_it_can_find_more() {
        let mut h = HeldKeys::default();
        h.concurrency("slow");
        h.concurrency("slow");
        assert_eq!(h.concurrency, vec!["slow".to_string()]);
        assert!(
            h.another_pass(240, 240, 0, 10),
            "a full walk that met a held key"
        );
        assert!(
            !h.another_pass(240, 240, 0, 10),
            "no new held key this pass"
        );
        h.ordering("o");
        assert!(
            !h.another_pass(100, 240, 0, 10),
            "the queue showed all it had"
        );
        h.ordering("p");
        assert!(!h.another_pass(240, 240, 10, 10), "the budget is met");
        let mut h = HeldKeys::default();
        for i in 0..20 {
            h.concurrency(&format!("k{i}"));
            let again = h.another_pass(240, 240, 0, 10);
            assert_eq!(again, i + 1 < HeldKeys::MAX_PASSES, "pass {}", i + 1);
        }
    }
}
