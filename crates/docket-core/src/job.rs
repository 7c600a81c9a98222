//! The shapes of a job at each point of its life.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A job's stable identity. It never changes across retries, reaps or replays, so handlers use
/// it as the idempotency key for external side effects (delivery is at-least-once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a job is in its life. See `docs/state-machine.md` for every transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// A workflow node waiting for its parents: not claimable until the last of them ends
    /// (see [`crate::workflow`]); then `pending`.
    Waiting,
    /// Waiting for `run_at`, then claimable.
    Pending,
    /// Claimed: holds a lease (owner + expiry) and a fencing token (`attempt`).
    Running,
    /// Finished successfully. Terminal.
    Succeeded,
    /// Failed permanently or ran out of attempts; kept with its error history. Terminal, but an
    /// operator can replay it.
    Dead,
    /// Cancelled by an operator or a handler. Terminal, replayable.
    Cancelled,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 6] = [
        JobState::Waiting,
        JobState::Pending,
        JobState::Running,
        JobState::Succeeded,
        JobState::Dead,
        JobState::Cancelled,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Terminal states carry `finished_at` and are never claimed again without an operator.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Dead | JobState::Cancelled
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Returned when a string names no state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?} (expected one of: waiting, pending, running, succeeded, dead, cancelled)")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// When a new job becomes claimable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// As soon as the enqueuing transaction commits.
    #[default]
    Now,
    /// At an absolute time (compared with the database clock).
    At(DateTime<Utc>),
    /// After a delay counted from the database's `now()` at insert time.
    Delay(Duration),
}

/// Retry backoff for one job: `min(cap, base * 2^(failures-1))`, then ±25 % jitter (never
/// above `cap`), where `failures` counts this job's recorded failures. Computed in the database so the reaper and the worker agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failed attempt. Defaults to 10 s (the design's figure).
    pub base: Duration,
    /// Upper bound of any delay. Defaults to 1 h.
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(10),
            cap: Duration::from_secs(3600),
        }
    }
}

/// A job to enqueue. Build with [`NewJob::new`] and the chained setters.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Queue name (`[A-Za-z0-9_.-]`, 1–64 chars).
    pub queue: String,
    /// Handler kind (`[A-Za-z0-9_.:/-]`, 1–128 chars).
    pub kind: String,
    /// Handler arguments; any JSON value, bounded in size.
    pub args: serde_json::Value,
    /// Lower runs first. Range -100..=100, default 0.
    pub priority: i16,
    /// When it becomes claimable.
    pub schedule: Schedule,
    /// Claims allowed before the job is dead. Range 1..=1000, default 25.
    pub max_attempts: i32,
    /// At most one non-terminal job per key; a second enqueue returns the first job's id.
    pub unique_key: Option<String>,
    /// Free-form JSON object for tracing ids and the like (bounded like `args`).
    pub metadata: serde_json::Value,
    /// Retry backoff; `None` uses the default (10 s · 2^(failures-1), cap 1 h).
    pub backoff: Option<Backoff>,
    /// Jobs sharing an ordering key run one at a time, in enqueue (id) order: only the
    /// oldest unfinished job of the key is claimable. A dead job blocks its key until an
    /// operator retries or skips it.
    pub ordering_key: Option<String>,
    /// Jobs sharing a concurrency key (e.g. a tenant) count against that key's limits
    /// (`key_limits`, or the queue's per-key default), across all workers.
    pub concurrency_key: Option<String>,
}

/// Default claim budget of a job.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 25;

impl NewJob {
    /// A job with default options.
    pub fn new(queue: impl Into<String>, kind: impl Into<String>, args: serde_json::Value) -> Self {
        NewJob {
            queue: queue.into(),
            kind: kind.into(),
            args,
            priority: 0,
            schedule: Schedule::Now,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            unique_key: None,
            metadata: serde_json::Value::Object(Default::default()),
            backoff: None,
            ordering_key: None,
            concurrency_key: None,
        }
    }
    /// Sets the priority (lower runs first).
    #[must_use = "a builder method returns the changed value"]
    pub fn priority(mut self, p: i16) -> Self {
        self.priority = p;
        self
    }
    /// Makes the job claimable only after `d`.
    #[must_use = "a builder method returns the changed value"]
    pub fn delay(mut self, d: Duration) -> Self {
        self.schedule = Schedule::Delay(d);
        self
    }
    /// Makes the job claimable only at `at`.
    #[must_use = "a builder method returns the changed value"]
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.schedule = Schedule::At(at);
        self
    }
    /// Sets the claim budget.
    #[must_use = "a builder method returns the changed value"]
    pub fn max_attempts(mut self, n: i32) -> Self {
        self.max_attempts = n;
        self
    }
    /// Sets a uniqueness key.
    #[must_use = "a builder method returns the changed value"]
    pub fn unique_key(mut self, k: impl Into<String>) -> Self {
        self.unique_key = Some(k.into());
        self
    }
    /// Sets metadata (a JSON object).
    #[must_use = "a builder method returns the changed value"]
    pub fn metadata(mut self, m: serde_json::Value) -> Self {
        self.metadata = m;
        self
    }
    /// Sets the retry backoff.
    #[must_use = "a builder method returns the changed value"]
    pub fn backoff(mut self, b: Backoff) -> Self {
        self.backoff = Some(b);
        self
    }
    /// Runs this job after every earlier unfinished job of `key`, one at a time.
    #[must_use = "a builder method returns the changed value"]
    pub fn ordering_key(mut self, key: impl Into<String>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }
    /// Counts this job against the limits of `key` (e.g. a tenant id).
    #[must_use = "a builder method returns the changed value"]
    pub fn concurrency_key(mut self, key: impl Into<String>) -> Self {
        self.concurrency_key = Some(key.into());
        self
    }
}

/// What an enqueue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Enqueued {
    /// The new job, or the existing non-terminal job holding the same unique key.
    pub id: JobId,
    /// True when no job was inserted because the unique key was taken.
    pub duplicate: bool,
}

/// A fencing token: the pair a worker got from its claim. Every later write about the job
/// is a compare-and-set on it, so a stale worker can never overwrite its successor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Lease {
    /// The job.
    pub id: JobId,
    /// The claim generation (`attempt`), bumped by every claim.
    pub attempt: i32,
}

/// A job handed to one worker by a claim.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimedJob {
    /// Stable id (idempotency key).
    pub id: JobId,
    /// Fencing token: this claim's generation (every claim raises it, runs or not).
    pub attempt: i32,
    /// Claims allowed in total.
    pub max_attempts: i32,
    /// Claims given back without counting as a run (a buffered job released, a shutdown
    /// release, a snooze): each also raised `max_attempts` by one, so the budget of runs
    /// stays as enqueued. See [`ClaimedJob::run`].
    pub released: i32,
    /// Queue it was claimed from.
    pub queue: String,
    /// Handler kind.
    pub kind: String,
    /// Handler arguments.
    pub args: serde_json::Value,
    /// Metadata given at enqueue.
    pub metadata: serde_json::Value,
    /// Priority (lower first).
    pub priority: i16,
    /// When it was scheduled to run.
    pub run_at: DateTime<Utc>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// Lease expiry, by the database clock.
    pub lease_expires_at: DateTime<Utc>,
}

impl ClaimedJob {
    /// The fencing token of this claim.
    pub fn lease(&self) -> Lease {
        Lease {
            id: self.id,
            attempt: self.attempt,
        }
    }

    /// Which run of the job this is (1 for the first): the attempt a user sees. Claims that
    /// were given back unrun (releases, snoozes) do not count.
    pub fn run(&self) -> i32 {
        runs(self.attempt, self.released)
    }

    /// Runs allowed in total (as enqueued, plus replays' extra attempts).
    pub fn max_runs(&self) -> i32 {
        runs(self.max_attempts, self.released)
    }
}

/// `n` claims less the `released` ones that did not run (never below 0: a row written by
/// hand may say anything).
pub fn runs(n: i32, released: i32) -> i32 {
    n.saturating_sub(released.max(0)).max(0)
}

/// How a failure is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// Transient: retry with backoff while attempts remain, then dead.
    Retry,
    /// Permanent (e.g. invalid args): dead at once, whatever the budget.
    Discard,
    /// Stop for good without it being an error: cancelled.
    Cancel,
}

impl FailureClass {
    /// The name stored in the error history.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Retry => "retry",
            FailureClass::Discard => "discard",
            FailureClass::Cancel => "cancel",
        }
    }
}

/// A fenced failure report.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The claim being reported on.
    pub lease: Lease,
    /// How to treat it.
    pub class: FailureClass,
    /// Error text; truncated to the store's bound.
    pub message: String,
    /// For `Retry`: an explicit delay instead of the job's backoff.
    pub retry_in: Option<Duration>,
}

/// A fenced snooze: back to pending after `delay` without consuming the retry budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snooze {
    /// The claim being snoozed.
    pub lease: Lease,
    /// How long until it is claimable again.
    pub delay: Duration,
}

/// A batch of leases in id order without repeats: the order every engine's batch write
/// locks rows in (no two batches wait on each other's rows in opposite orders).
pub fn sorted_leases(leases: &[Lease]) -> Vec<Lease> {
    let mut v = leases.to_vec();
    v.sort();
    v.dedup();
    v
}

/// A batch of failure reports in lease order, one per lease (the first wins).
pub fn sorted_failures(failures: &[Failure]) -> Vec<Failure> {
    let mut v = failures.to_vec();
    v.sort_by_key(|f| f.lease);
    v.dedup_by_key(|f| f.lease);
    v
}

/// A batch of snoozes in lease order, one per lease, each delay checked against
/// [`crate::duration::MAX_DELAY`] (nothing is written when one is out of range).
pub fn sorted_snoozes(snoozes: &[Snooze]) -> Result<Vec<Snooze>, crate::ValidationError> {
    let mut v = snoozes.to_vec();
    v.sort_by_key(|s| s.lease);
    v.dedup_by_key(|s| s.lease);
    for s in &v {
        crate::duration::check_bounds(
            "snooze",
            s.delay,
            Duration::ZERO,
            crate::duration::MAX_DELAY,
        )?;
    }
    Ok(v)
}

/// What a batch of fenced writes did. Every input is in exactly one of the two lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchOutcome {
    /// Leases whose write was applied.
    pub applied: Vec<Lease>,
    /// Leases that matched nothing: the job moved on without this worker.
    pub lost: Vec<crate::LeaseLost>,
}

/// What a batch heartbeat did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeartbeatOutcome {
    /// Leases extended, with their new expiry.
    pub extended: Vec<(Lease, DateTime<Utc>)>,
    /// Extended jobs on which an operator requested cancellation.
    pub cancel_requested: Vec<Lease>,
    /// Leases that matched nothing: the handler must be cancelled.
    pub lost: Vec<crate::LeaseLost>,
}

/// One job the reaper moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reaped {
    /// The job.
    pub id: JobId,
    /// The expired claim's generation.
    pub attempt: i32,
    /// The owner whose lease expired.
    pub owner: String,
    /// Its queue (for metrics).
    pub queue: String,
    /// `pending` (retried later), `dead` (attempts exhausted) or `cancelled` (an operator
    /// had asked to cancel it).
    pub state: JobState,
}

/// What one reaper pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReapReport {
    /// Every job moved, in no particular order.
    pub jobs: Vec<Reaped>,
}

impl ReapReport {
    /// Jobs returned to the queue.
    pub fn requeued(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| j.state == JobState::Pending)
            .count()
    }
    /// Jobs that became dead.
    pub fn dead(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| j.state == JobState::Dead)
            .count()
    }
    /// Jobs cancelled because an operator had asked to.
    pub fn cancelled(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| j.state == JobState::Cancelled)
            .count()
    }
}

/// Retention for pruning finished jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Succeeded and cancelled jobs older than this (by `finished_at`) are deleted.
    pub finished: Duration,
    /// Dead jobs are kept longer: they are evidence.
    pub dead: Duration,
    /// A succeeded job with an output is kept at least this long (by `finished_at`) so the
    /// output can be read, whichever of the two windows is longer.
    pub outputs: Duration,
    /// Rows deleted per statement (keeps locks and WAL bursts small).
    pub batch: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            finished: Duration::from_secs(24 * 3600),
            dead: Duration::from_secs(30 * 24 * 3600),
            outputs: crate::output::DEFAULT_OUTPUT_RETENTION,
            batch: 5_000,
        }
    }
}

/// What a prune did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Succeeded + cancelled rows deleted.
    pub finished: u64,
    /// Dead rows deleted.
    pub dead: u64,
    /// Step records of jobs that no longer exist, deleted.
    pub steps: u64,
    /// Workflow edges into nodes that no longer exist, and workflows left with no node,
    /// deleted.
    #[serde(default)]
    pub workflow_rows: u64,
}

/// One entry of a job's bounded error history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEntry {
    /// The attempt that failed.
    pub attempt: i32,
    /// When, by the database clock.
    pub at: DateTime<Utc>,
    /// `retry`, `discard`, `cancel` or `lease_expired`.
    pub class: String,
    /// Bounded error text.
    pub message: String,
    /// The worker that reported it (or whose lease expired).
    #[serde(default)]
    pub owner: Option<String>,
}

/// A whole job row, for operators.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRecord {
    /// The job id: stable across retries, the idempotency key.
    pub id: JobId,
    /// Its queue.
    pub queue: String,
    /// Its kind (which handler runs it).
    pub kind: String,
    /// Where it is in the state machine.
    pub state: JobState,
    /// The fencing token (claims so far, run or not); [`JobRecord::runs`] is what a user
    /// calls the attempt.
    pub attempt: i32,
    /// The claim budget: `attempt` never passes it.
    pub max_attempts: i32,
    /// Claims given back without a run (releases, snoozes); see [`ClaimedJob::released`].
    #[serde(default)]
    pub released: i32,
    /// Lower runs first (-100..=100).
    pub priority: i16,
    /// When it is (or was) due.
    pub run_at: DateTime<Utc>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When it was last claimed.
    pub attempted_at: Option<DateTime<Utc>>,
    /// When it reached a terminal state.
    pub finished_at: Option<DateTime<Utc>>,
    /// The worker holding its lease (running only).
    pub lease_owner: Option<String>,
    /// When that lease runs out, by the database's clock (running only).
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When an operator asked to cancel it while it ran.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// At most one pending or running job holds a unique key.
    pub unique_key: Option<String>,
    /// Jobs of an ordering key run one at a time, in enqueue order.
    pub ordering_key: Option<String>,
    /// Jobs of a concurrency key count against the key's limits.
    pub concurrency_key: Option<String>,
    /// Pending but known to wait for its key (see `NewJob::ordering_key`); claims skip it
    /// until the key frees up.
    pub blocked: bool,
    /// Its arguments (JSON, as enqueued).
    pub args: serde_json::Value,
    /// Free-form metadata (a JSON object; trace context lives here).
    pub metadata: serde_json::Value,
    /// Its error history, oldest first (the first and the 31 most recent kept).
    pub errors: Vec<ErrorEntry>,
    /// The last progress its handler reported (read by `get` only; `None` in lists).
    pub progress: Option<crate::JobProgress>,
    /// What is wrong with the stored row, when something is (a non-finite time, a malformed
    /// history): such a row can only come from a write that bypassed Docket's checks, and is
    /// shown rather than hidden.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

impl JobRecord {
    /// Runs so far: the attempt a user sees (claims given back unrun do not count).
    pub fn runs(&self) -> i32 {
        runs(self.attempt, self.released)
    }

    /// Runs allowed in total.
    pub fn max_runs(&self) -> i32 {
        runs(self.max_attempts, self.released)
    }
}

/// Filter for listing jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this state.
    pub state: Option<JobState>,
    /// At most this many (newest first). Defaults to 100 when 0.
    pub limit: i64,
}

/// What cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// A pending job is now cancelled.
    Cancelled,
    /// A running job is flagged; its worker stops it at its next heartbeat (or at once via
    /// notification) and records it cancelled.
    Requested,
}

/// Per-queue counters for operators.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// Pending and not held by a key (due now or scheduled later): the same definition as
    /// the dashboard's and the `docket_queue_pending` gauge's.
    pub pending: i64,
    /// Pending, due and not held by a key: what a worker may claim now (limits aside).
    pub ready: i64,
    /// Pending and due, held by a key or not: `ready` plus the due part of `blocked`.
    pub waiting: i64,
    /// Running now.
    pub running: i64,
    /// Succeeded and kept (a worker deletes plain successes by default).
    pub succeeded: i64,
    /// Dead: out of attempts or discarded.
    pub dead: i64,
    /// Cancelled.
    pub cancelled: i64,
    /// Age of the oldest ready job (due, not held by a key), in seconds.
    pub oldest_ready_age_s: Option<f64>,
    /// Age of the oldest due job that has not started, held by a key or not, in seconds:
    /// "is anything stuck?" (a blocked job is not ready, but it is waiting).
    pub oldest_waiting_age_s: Option<f64>,
    /// Running jobs whose lease expires within the next 10 s (or already has).
    pub running_near_expiry: i64,
    /// Running jobs whose lease already expired (the reaper has work).
    pub running_expired: i64,
    /// Age of the oldest dead job, in seconds.
    pub oldest_dead_age_s: Option<f64>,
    /// Pending jobs held by their ordering or concurrency key (not counted in `pending` or
    /// `ready`). Always 0 on SQLite and MariaDB, whose claims judge keys as they go: a job
    /// held there counts as ready.
    pub blocked: i64,
    /// Paused queues are not claimed from (see `docket queues pause`).
    pub paused: bool,
}

/// Table health for operators.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TableStats {
    /// Live rows.
    pub live_tuples: i64,
    /// Dead rows not yet vacuumed.
    pub dead_tuples: i64,
    /// The last manual VACUUM.
    pub last_vacuum: Option<DateTime<Utc>>,
    /// The last autovacuum.
    pub last_autovacuum: Option<DateTime<Utc>>,
    /// Table, TOAST and indexes, in bytes.
    pub total_bytes: i64,
    /// Of which the indexes.
    pub index_bytes: i64,
}

/// Everything `docket stats` shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// One entry per queue with jobs or controls.
    pub queues: Vec<QueueStats>,
    /// Engine-specific table health (PostgreSQL's tuples and vacuum times); `None` on an
    /// engine that has no such statistics.
    pub table: Option<TableStats>,
}
