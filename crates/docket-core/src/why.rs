//! "Why is this job not running?": every gate that holds a pending job, as the claim's own
//! rules see it (see `claim()` and `claim_controlled()` in PostgreSQL's
//! `schema/current.sql`), computed by the database in one statement so that the answer and
//! the claim cannot disagree about the data.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::job::{JobId, JobState};

/// One reason a job is not being claimed now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "gate", rename_all = "snake_case")]
pub enum Gate {
    /// The job is not waiting at all (running, or finished).
    NotPending {
        /// Its state.
        state: JobState,
    },
    /// It is scheduled for later (a delay, a backoff, a snooze).
    ScheduledLater {
        /// When it becomes claimable.
        run_at: DateTime<Utc>,
        /// Seconds from now until then.
        in_s: f64,
    },
    /// Its handler parked it in a durable sleep (`ctx.sleep`) until `until`.
    Sleeping {
        /// The sleep's name (unique within the job, like a step's).
        name: String,
        /// When it wakes.
        until: DateTime<Utc>,
        /// Seconds from now until then.
        in_s: f64,
    },
    /// Its handler parked it waiting for signal `name` (`ctx.wait_signal`) since `since`;
    /// it runs at `timeout_at` without one.
    WaitingForSignal {
        /// The signal it waits for.
        name: String,
        /// When the wait began (its wait step was recorded).
        since: DateTime<Utc>,
        /// When it runs without the signal.
        timeout_at: DateTime<Utc>,
    },
    /// A workflow node waiting for its parents: `unfinished` of its `total` parents have not
    /// succeeded (name and state of each).
    WaitingForParents {
        /// The parents that have not succeeded, by name, with their states.
        unfinished: Vec<(String, JobState)>,
        /// Its parents in all.
        total: usize,
    },
    /// Its queue is paused.
    QueuePaused {
        /// When the queue was paused.
        since: DateTime<Utc>,
    },
    /// Its queue runs as many jobs as its `max_running` allows.
    QueueFull {
        /// The queue's limit.
        max_running: i32,
        /// Jobs of the queue running now.
        running: i64,
    },
    /// Its queue's rate bucket has no whole token.
    QueueRateEmpty {
        /// Tokens in the bucket now (below 1).
        tokens: f64,
        /// Jobs allowed per period.
        limit: i32,
        /// The period, in milliseconds.
        period_ms: i64,
    },
    /// Its concurrency key runs as many jobs as the key's limit allows.
    KeyFull {
        /// The concurrency key.
        key: String,
        /// The key's limit.
        max_running: i32,
        /// Jobs of the key running now.
        running: i64,
        /// Which queues' jobs those are: running jobs of the key per queue, the most first
        /// (ties by name), at most five queues (a key is shared by every queue).
        #[serde(default)]
        by_queue: Vec<(String, i64)>,
    },
    /// Its concurrency key's rate bucket has no whole token.
    KeyRateEmpty {
        /// The concurrency key.
        key: String,
        /// Tokens in the bucket now (below 1).
        tokens: f64,
        /// Jobs allowed per period.
        limit: i32,
        /// The period, in milliseconds.
        period_ms: i64,
    },
    /// An earlier job of its ordering key is unfinished (or dead, which holds the key until it
    /// is retried or skipped).
    OrderingBehind {
        /// The ordering key.
        key: String,
        /// The earlier job holding it.
        job: JobId,
        /// That job's state.
        state: JobState,
    },
    /// Flagged blocked by a key that has since freed up: claims skip it until the key sweep
    /// (run by the leader every `prune_interval`) clears the flag.
    AwaitingSweep,
    /// No live worker (in the registry, unexpired) serves its queue.
    NoLiveWorker,
    /// Ready jobs of its queue that a claim takes first (strict priority, then age; under a
    /// starvation bound a job older than the bound goes first). Counted up to 10,000.
    BehindInQueue {
        /// How many ready jobs go first.
        ahead: i64,
    },
}

/// Names a park where the report only says "scheduled for later": when the job's most
/// recent step is a durable sleep (`ctx.sleep` records one, then parks the job until it
/// ends) or a wait for a signal (`ctx.wait_signal`, parked until the signal or its timeout).
/// Every engine's `why` applies it to the job's steps.
pub fn name_sleep(report: &mut WhyReport, steps: &[crate::StepRecord]) {
    let Some(last) = steps.iter().max_by_key(|s| s.recorded_at) else {
        return;
    };
    let wait = last
        .name
        .strip_prefix(crate::steps::RESERVED_PREFIX)
        .and_then(|n| n.strip_prefix("wait:"));
    for g in &mut report.gates {
        if let Gate::ScheduledLater { run_at, in_s } = g {
            if let Some((name, _)) = crate::steps::sleep_of(last) {
                *g = Gate::Sleeping {
                    name: name.to_string(),
                    until: *run_at,
                    in_s: *in_s,
                };
            } else if let Some(name) = wait {
                *g = Gate::WaitingForSignal {
                    name: name.to_string(),
                    since: last.recorded_at,
                    timeout_at: *run_at,
                };
            }
        }
    }
}

/// A waiting workflow node's gate, from its parents (`Store::dep_outputs`): the parents
/// that have not succeeded, by name.
pub fn name_parents(report: &mut WhyReport, parents: &[crate::DepOutput]) {
    if report.state != JobState::Waiting {
        return;
    }
    let unfinished = parents
        .iter()
        .filter(|p| p.state != JobState::Succeeded)
        .map(|p| (p.node.clone(), p.state))
        .collect();
    report.gates = vec![Gate::WaitingForParents {
        unfinished,
        total: parents.len(),
    }];
}

/// Whether `report` is scheduled later (a sleep may be the reason).
pub fn scheduled_later(report: &WhyReport) -> bool {
    report
        .gates
        .iter()
        .any(|g| matches!(g, Gate::ScheduledLater { .. }))
}

/// The answer for one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhyReport {
    /// The job.
    pub id: JobId,
    /// Its queue.
    pub queue: String,
    /// Its state.
    pub state: JobState,
    /// Every gate that holds it, in the order the claim meets them; empty when the next claim
    /// of its queue takes it.
    pub gates: Vec<Gate>,
}

impl Gate {
    /// One line for a person, e.g. "queue mail is paused (since 2026-12-01 10:00:00)".
    /// Values from job data (queue, keys) are inserted as they are: escape the line for
    /// where it is shown (a terminal's control characters, HTML).
    pub fn describe(&self, queue: &str) -> String {
        let time = |t: &DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S").to_string();
        let q = queue;
        match self {
            Gate::NotPending { state } => format!("it is {state}"),
            Gate::ScheduledLater { run_at, in_s } => {
                format!("scheduled for {} (in {})", time(run_at), human_secs(*in_s))
            }
            Gate::Sleeping { name, until, in_s } => format!(
                "sleeping until {} (in {}): durable sleep {}",
                time(until),
                human_secs(*in_s),
                crate::validate::visible(name)
            ),
            Gate::WaitingForSignal {
                name,
                since,
                timeout_at,
            } => format!(
                "waiting for signal {} since {}, timing out at {}",
                crate::validate::visible(name),
                time(since),
                time(timeout_at)
            ),
            Gate::WaitingForParents { unfinished, total } => format!(
                "waiting for {} of {total} parents: {}",
                unfinished.len(),
                unfinished
                    .iter()
                    .map(|(n, s)| format!("{} ({s})", crate::validate::visible(n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Gate::QueuePaused { since } => format!("queue {q} is paused (since {})", time(since)),
            Gate::QueueFull {
                max_running,
                running,
            } => format!("queue {q} is full: {running} running of max_running {max_running}"),
            Gate::QueueRateEmpty {
                tokens,
                limit,
                period_ms,
            } => format!(
                "queue {q}'s rate bucket is empty: {tokens:.2} tokens of {limit} per {period_ms} ms"
            ),
            Gate::KeyFull {
                key,
                max_running,
                running,
                by_queue,
            } => {
                let shown: i64 = by_queue.iter().map(|(_, n)| n).sum();
                let mut whose: Vec<String> = by_queue
                    .iter()
                    .map(|(queue, n)| format!("{n} of queue {queue}"))
                    .collect();
                if !whose.is_empty() && shown < *running {
                    whose.push(format!("{} of other queues", running - shown));
                }
                format!(
                    "concurrency key {key} is full: {running} of its jobs run ({}; its limit \
                     is {max_running}); it runs when one of them ends",
                    if whose.is_empty() {
                        "in any queue".to_string()
                    } else {
                        whose.join(", ")
                    }
                )
            }
            Gate::KeyRateEmpty {
                key,
                tokens,
                limit,
                period_ms,
            } => format!(
                "concurrency key {key}'s rate bucket is empty: {tokens:.2} tokens of {limit} per {period_ms} ms"
            ),
            Gate::OrderingBehind { key, job, state } => format!(
                "ordering key {key}: job {job} before it is {state}{}",
                if *state == JobState::Dead {
                    " (retry or skip it to move on)"
                } else {
                    ""
                }
            ),
            Gate::AwaitingSweep => "nothing holds it any more: it becomes claimable within about a \
                 minute (at once when a job of its key finishes)"
                .into(),
            Gate::NoLiveWorker => {
                format!("no live worker serves queue {q} (`docket workers` lists them)")
            }
            Gate::BehindInQueue { ahead } => format!(
                "{}{ahead} ready job(s) of queue {q} go first (priority, then age)",
                if *ahead >= 10_000 { "at least " } else { "" }
            ),
        }
    }
}

impl WhyReport {
    /// True when nothing holds it: the next claim of its queue (by a live worker) takes it.
    pub fn next_up(&self) -> bool {
        self.gates.is_empty()
    }
}

/// A wait as a person reads it: "4.2s", "3m 20s", "5h 2m", "12d 3h", "7975y 40d" — never
/// billions of seconds.
pub fn human_secs(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "0s".into();
    }
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let t = s as u64;
    let (m, h, d, y) = (60, 3_600, 86_400, 31_557_600);
    match t {
        _ if t < h => format!("{}m {}s", t / m, t % m),
        _ if t < d => format!("{}h {}m", t / h, (t % h) / m),
        _ if t < y => format!("{}d {}h", t / d, (t % d) / h),
        _ => format!("{}y {}d", t / y, (t % y) / d),
    }
}

#[cfg(test)]
mod human_tests {
    use super::{human_secs, Gate};

    #[test]
    fn a_full_key_names_the_queues_whose_jobs_fill_it() {
        let g = |by_queue: Vec<(String, i64)>| Gate::KeyFull {
            key: "tenant-4".into(),
            max_running: 25,
            running: 25,
            by_queue,
        };
        let s = g(vec![("mail".into(), 20), ("sms".into(), 3)]).describe("mail");
        assert!(
            s.contains("(20 of queue mail, 3 of queue sms, 2 of other queues; its limit is 25)"),
            "{s}"
        );
        let s = g(vec![]).describe("mail");
        assert!(s.contains("(in any queue; its limit is 25)"), "{s}");
    }

    #[test]
    fn waits_read_as_people_say_them() {
        assert_eq!(human_secs(4.25), "4.2s");
        assert_eq!(human_secs(200.0), "3m 20s");
        assert_eq!(human_secs(5.0 * 3600.0 + 130.0), "5h 2m");
        assert_eq!(human_secs(251_605_794_632.9), "7972y 331d");
        assert_eq!(human_secs(f64::NAN), "0s");
    }
}
