//! Model-based test of the PostgreSQL store: random sequences of enqueue, claim, heartbeat,
//! complete, fail, snooze, release, crash, writes by impostors and stale tokens, operator
//! cancel and retry, advance-the-clock and reap run against
//! [`PgStore`](docket_postgres::PgStore) and against a small in-memory model of the state
//! machine (`docs/state-machine.md`, `sql/*.sql`); the two are compared after every step.
//!
//! # What is compared
//!
//! - Every fenced write (complete, fail, snooze, release, heartbeat): the applied and lost
//!   sets, and each lost lease's reason; heartbeats also the cancel requests they report.
//! - Every claim: see "Claim order" below. Every reap: the jobs taken (all expired ones, or
//!   the earliest-expiring `batch` of them), their token, owner and new state.
//! - Operator cancel and retry: the outcome, or the `WrongState` error and its state.
//! - After every step, every row: state, `attempt`, `max_attempts`, lease owner, queue,
//!   priority, cancel request, number of history entries and the newest one (attempt, class,
//!   owner), `finished_at` set iff terminal, `run_at` of pending jobs and `lease_expires_at`
//!   of running ones (within the model's bounds); and `active_count` and the `stats` counters
//!   per queue.
//!
//! # Time
//!
//! The database clock cannot be moved, so "advance the clock by S seconds" moves every job's
//! `run_at` and `lease_expires_at` S seconds into the past, and the model moves its own clock
//! forward by S. Every model duration is a multiple of 5 s (lease 60 s, explicit retry,
//! snooze and enqueue delays 0 or 40 s, advances 25 s or 2 h), so the clock never lands
//! exactly on a lease expiry (60 - 25k is never 0) and two deadlines that differ differ by at
//! least 10 s: the real time the test takes (assumed below `LAG_S` between a write and the
//! checks that depend on it) never decides an outcome. A lease whose model expiry equals the
//! model clock would be a design error of this test and is reported as such. A `run_at`
//! equal to the model clock is due: the database wrote it a little earlier than it reads it.
//!
//! Backoff is `base = cap = 1 h`, so a job retried by backoff (or reaped) runs again after a
//! random 45-60 min: the model keeps that window. Sequences are short enough (< 100 steps of
//! at most 25 s) that only a 2 h advance can reach it, so readiness is never ambiguous. (The
//! backoff exponent itself is therefore not tested here.)
//!
//! # Claim order
//!
//! Claim order is `priority, run_at, id`. The model knows `run_at` exactly except inside a
//! backoff window, so a claim is checked for: the count (`min(limit, ready)`), the set (only
//! ready jobs of the queue), the new token (`attempt + 1`), and that no ready job left
//! unclaimed comes definitely before a claimed one. The database's choice is then applied to
//! the model. Reaps with a small batch are checked the same way against expiry order.
//!
//! A failure prints the minimal sequence proptest could shrink it to. Set
//! `DOCKET_MODEL_CASES` to run more (or fewer) cases than the default 48.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use docket_core::*;
use docket_testkit::TestDb;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;
use sqlx::Row;

const QUEUES: [&str; 2] = ["q", "r"];
const WORKERS: [&str; 3] = ["w0", "w1", "w2"];
const NW: usize = WORKERS.len();

/// Lease length of claims and heartbeats.
const LEASE_S: i64 = 60;
/// The small clock step: never makes a lease expiry (60 - 25k) or an explicit retry
/// (40 - 25k) coincide with the clock.
const SMALL_STEP_S: i64 = 25;
/// The big clock step: past every backoff window.
const BIG_STEP_S: i64 = 2 * 3600;
/// Explicit `retry_in` of a failure.
const RETRY_IN_S: i64 = 40;
/// Backoff of every job: base = cap = 1 h, so the delay is 45-60 min whatever the count.
const BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(3600),
    cap: Duration::from_secs(3600),
};
const BACKOFF_LO_S: i64 = 2700;
const BACKOFF_HI_S: i64 = 3600;
/// How far behind the model a database time may be (the real time elapsed since it was
/// written), in seconds. Below the 10 s margin between the clock and any deadline.
const LAG_S: f64 = 8.0;
/// Longest sequence: (MAX_STEPS - 1) * SMALL_STEP_S must stay below BACKOFF_LO_S.
const MAX_STEPS: usize = 100;
const _: () = assert!((MAX_STEPS as i64 - 1) * SMALL_STEP_S < BACKOFF_LO_S);
/// Reaper batch when unbounded: larger than any case's job count.
const REAP_ALL: i64 = 1000;

// ---------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailKind {
    /// `Retry` with the job's backoff.
    Backoff,
    /// `Retry` with `retry_in = 40 s`.
    RetryIn,
    Discard,
    Cancel,
}

/// A fenced write presenting one given lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Complete,
    Fail(FailKind),
    Snooze { delay_s: i64 },
    Release,
    Heartbeat,
}

/// One step. Indices (`picks`, `job`) are taken modulo the length of what they index, so
/// every step stays meaningful while proptest shrinks the sequence.
#[derive(Debug, Clone)]
enum Op {
    /// Enqueue `n` jobs with a claim budget of `max_attempts` into `QUEUES[queue]`,
    /// claimable after `delay_s`.
    Enqueue {
        n: usize,
        max_attempts: i32,
        queue: usize,
        priority: i16,
        delay_s: i64,
    },
    /// Worker `w` claims up to `limit` jobs of `QUEUES[queue]`.
    Claim { w: usize, queue: usize, limit: i32 },
    /// Worker `w` completes some of the leases it holds (one batch).
    Complete { w: usize, picks: Vec<usize> },
    /// Worker `w` reports failures on some of its leases (one batch).
    Fail {
        w: usize,
        items: Vec<(usize, FailKind)>,
    },
    /// Worker `w` snoozes some of its leases by `delay_s` (one batch).
    Snooze {
        w: usize,
        picks: Vec<usize>,
        delay_s: i64,
    },
    /// Worker `w` releases some of its leases (shutdown).
    Release { w: usize, picks: Vec<usize> },
    /// Worker `w` heartbeats every lease it holds; with `forget_lost` it then drops the lost
    /// ones, as the runtime does (otherwise it keeps presenting them later).
    Heartbeat { w: usize, forget_lost: bool },
    /// Worker `w` dies: it forgets its leases, the database keeps them until they expire.
    Crash { w: usize },
    /// Worker `w` presents a lease worker `victim` holds, under its own name.
    Impostor {
        w: usize,
        victim: usize,
        pick: usize,
        write: Write,
    },
    /// Worker `w` presents any lease ever handed out (its own or not, usually stale): a
    /// worker that was partitioned away, a duplicate message, a bug in the runtime.
    Replay { w: usize, pick: usize, write: Write },
    /// Moves the clock forward 25 s, or 2 h.
    Advance { big: bool },
    /// One reaper pass of at most `batch` jobs (in expiry order).
    Reap { batch: i64 },
    /// Operator cancel of a job (with `running`: of a running job).
    Cancel { job: usize, running: bool },
    /// Operator replay of a job with `extra` more claims (with `finished`: of a dead or
    /// cancelled job).
    Retry {
        job: usize,
        finished: bool,
        extra: i32,
    },
}

/// Mostly the first queue, so claims find work.
fn queue() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 1 => Just(1usize)]
}

fn picks() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..8, 1..=3)
}

fn fail_kind() -> impl Strategy<Value = FailKind> {
    prop_oneof![
        3 => Just(FailKind::Backoff),
        2 => Just(FailKind::RetryIn),
        1 => Just(FailKind::Discard),
        1 => Just(FailKind::Cancel),
    ]
}

/// Mostly due at once.
fn enqueue_delay() -> impl Strategy<Value = i64> {
    prop_oneof![3 => Just(0i64), 1 => Just(40i64)]
}

fn snooze_delay() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0i64), Just(40i64)]
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        Just(Write::Complete),
        fail_kind().prop_map(Write::Fail),
        snooze_delay().prop_map(|delay_s| Write::Snooze { delay_s }),
        Just(Write::Release),
        Just(Write::Heartbeat),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..=4, 1i32..=3, queue(), -1i16..=1, enqueue_delay())
            .prop_map(|(n, max_attempts, queue, priority, delay_s)| Op::Enqueue {
                n,
                max_attempts,
                queue,
                priority,
                delay_s,
            }),
        5 => (0..NW, queue(), 1i32..=4).prop_map(|(w, queue, limit)| Op::Claim { w, queue, limit }),
        4 => (0..NW, picks()).prop_map(|(w, picks)| Op::Complete { w, picks }),
        3 => (0..NW, prop::collection::vec((0usize..8, fail_kind()), 1..=3))
            .prop_map(|(w, items)| Op::Fail { w, items }),
        2 => (0..NW, picks(), snooze_delay())
            .prop_map(|(w, picks, delay_s)| Op::Snooze { w, picks, delay_s }),
        1 => (0..NW, picks()).prop_map(|(w, picks)| Op::Release { w, picks }),
        4 => (0..NW, any::<bool>()).prop_map(|(w, forget_lost)| Op::Heartbeat { w, forget_lost }),
        1 => (0..NW).prop_map(|w| Op::Crash { w }),
        1 => (0..NW, 1..NW, 0usize..8, write()).prop_map(|(w, off, pick, write)| {
            Op::Impostor { w, victim: (w + off) % NW, pick, write }
        }),
        2 => (0..NW, 0usize..32, write()).prop_map(|(w, pick, write)| Op::Replay { w, pick, write }),
        3 => Just(Op::Advance { big: false }),
        1 => Just(Op::Advance { big: true }),
        3 => prop_oneof![3 => Just(REAP_ALL), 1 => 1i64..=2].prop_map(|batch| Op::Reap { batch }),
        2 => (0usize..16, any::<bool>()).prop_map(|(job, running)| Op::Cancel { job, running }),
        2 => (0usize..16, any::<bool>(), 1i32..=2)
            .prop_map(|(job, finished, extra)| Op::Retry { job, finished, extra }),
    ]
}

/// Fewer than 100 steps: 99 small advances (2475 s) never reach a backoff window (2700 s).
fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..MAX_STEPS)
}

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

/// When a pending job becomes claimable, in model seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunAt {
    /// Exactly then.
    At(i64),
    /// Somewhere in `[lo, hi]` (backoff jitter).
    Window(i64, i64),
}

impl RunAt {
    fn lo(self) -> i64 {
        match self {
            RunAt::At(t) | RunAt::Window(t, _) => t,
        }
    }
    fn hi(self) -> i64 {
        match self {
            RunAt::At(t) | RunAt::Window(_, t) => t,
        }
    }
}

/// The newest entry of a job's error history.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LastError {
    attempt: i32,
    class: String,
    owner: String,
}

#[derive(Debug, Clone)]
struct MJob {
    queue: usize,
    priority: i16,
    state: JobState,
    attempt: i32,
    max_attempts: i32,
    /// Worker index holding the lease (running only).
    owner: Option<usize>,
    /// Lease expiry in model seconds (running only).
    lease_exp: i64,
    /// The step that last set `lease_exp` (orders equal model times, like `run_at_step`).
    lease_step: u64,
    run_at: RunAt,
    /// The step that last set `run_at`: orders equal model times as the database does
    /// (earlier statement, earlier `now()`).
    run_at_step: u64,
    /// Errors recorded (the history keeps at most 32 of them).
    errors: i32,
    last_error: Option<LastError>,
    cancel_requested: bool,
}

/// `push_error` keeps the first entry and the 31 most recent.
const MAX_HISTORY: i32 = 32;

impl MJob {
    fn record_error(&mut self, class: &str, owner: usize) {
        self.record_entry(class, WORKERS[owner].into());
    }

    /// A history entry written on behalf of `who` (a worker, or for an operator's cancel
    /// request the database role that asked).
    fn record_entry(&mut self, class: &str, who: String) {
        self.errors += 1;
        self.last_error = Some(LastError {
            attempt: self.attempt,
            class: class.into(),
            owner: who,
        });
    }
}

#[derive(Debug, Default)]
struct Model {
    now: i64,
    step: u64,
    jobs: BTreeMap<i64, MJob>,
    /// Leases each worker believes it holds (possibly stale).
    held: [Vec<Lease>; NW],
    /// Every lease ever handed out, in claim order.
    history: Vec<Lease>,
}

/// What a fenced write will do, as the model predicts it.
struct Split {
    applied: Vec<Lease>,
    lost: Vec<LeaseLost>,
}

impl Model {
    fn job(&self, id: JobId) -> &MJob {
        &self.jobs[&id.0]
    }

    fn job_mut(&mut self, id: JobId) -> &mut MJob {
        self.jobs.get_mut(&id.0).expect("model knows the job")
    }

    fn ready(&self, j: &MJob) -> Result<bool, TestCaseError> {
        if j.state != JobState::Pending {
            return Ok(false);
        }
        match j.run_at {
            RunAt::At(t) => Ok(t <= self.now),
            RunAt::Window(_, hi) if self.now >= hi => Ok(true),
            RunAt::Window(lo, _) if self.now < lo => Ok(false),
            RunAt::Window(lo, hi) => Err(TestCaseError::fail(format!(
                "test design: clock {} inside a backoff window [{lo}, {hi}]",
                self.now
            ))),
        }
    }

    fn ready_ids(&self, queue: usize) -> Result<BTreeSet<i64>, TestCaseError> {
        let mut out = BTreeSet::new();
        for (id, j) in &self.jobs {
            if j.queue == queue && self.ready(j)? {
                out.insert(*id);
            }
        }
        Ok(out)
    }

    /// Whether a running job's lease is still valid by the model clock.
    fn unexpired(&self, j: &MJob) -> Result<bool, TestCaseError> {
        if j.lease_exp == self.now {
            return Err(TestCaseError::fail(format!(
                "test design: clock {} exactly on a lease expiry",
                self.now
            )));
        }
        Ok(j.lease_exp > self.now)
    }

    /// The fence: running, same token, same owner, lease not expired.
    fn live(&self, w: usize, l: Lease) -> Result<bool, TestCaseError> {
        let j = self.job(l.id);
        Ok(j.state == JobState::Running
            && j.attempt == l.attempt
            && j.owner == Some(w)
            && self.unexpired(j)?)
    }

    /// Why a lease no longer holds, as `PgStore` explains it.
    fn lost_reason(&self, l: Lease) -> LostReason {
        match self.jobs.get(&l.id.0) {
            None => LostReason::Missing,
            Some(j) if j.attempt > l.attempt => LostReason::Superseded(j.attempt),
            Some(j) if j.state != JobState::Running => LostReason::NotRunning(j.state),
            Some(_) => LostReason::Expired,
        }
    }

    fn split(&self, w: usize, leases: &[Lease]) -> Result<Split, TestCaseError> {
        let mut s = Split {
            applied: Vec::new(),
            lost: Vec::new(),
        };
        for &l in leases {
            if self.live(w, l)? {
                s.applied.push(l);
            } else {
                s.lost.push(LeaseLost {
                    lease: l,
                    reason: self.lost_reason(l),
                });
            }
        }
        Ok(s)
    }

    /// Distinct leases of worker `w` chosen by `picks` (modulo what it holds).
    fn pick(&self, w: usize, picks: &[usize]) -> Vec<Lease> {
        let held = &self.held[w];
        let mut out: Vec<Lease> = Vec::new();
        if held.is_empty() {
            return out;
        }
        for p in picks {
            let l = held[p % held.len()];
            if !out.contains(&l) {
                out.push(l);
            }
        }
        out
    }

    fn forget(&mut self, w: usize, leases: &[Lease]) {
        self.held[w].retain(|l| !leases.contains(l));
    }

    /// The `k`-th (modulo) job whose state passes `filter`.
    fn pick_job(&self, k: usize, filter: impl Fn(JobState) -> bool) -> Option<JobId> {
        let ids: Vec<i64> = self
            .jobs
            .iter()
            .filter(|(_, j)| filter(j.state))
            .map(|(&id, _)| id)
            .collect();
        (!ids.is_empty()).then(|| JobId(ids[k % ids.len()]))
    }

    fn backoff_window(&self) -> RunAt {
        RunAt::Window(self.now + BACKOFF_LO_S, self.now + BACKOFF_HI_S)
    }

    /// Leaves `running`: the lease is gone.
    fn end_lease(j: &mut MJob) {
        j.owner = None;
        j.lease_exp = 0;
    }

    /// `a` is claimed before `b` for sure: a lower priority value, or the same priority and
    /// an earlier `run_at` by more than the lag, or the same exact model time and an earlier
    /// statement, or the same statement and a smaller id.
    fn definitely_before(&self, a: i64, b: i64) -> bool {
        let (ja, jb) = (&self.jobs[&a], &self.jobs[&b]);
        if ja.priority != jb.priority {
            return ja.priority < jb.priority;
        }
        match (ja.run_at, jb.run_at) {
            // Equal stored run_at: the claim index has no tiebreak (it deduplicates equal
            // keys), so either may come first.
            (RunAt::At(x), RunAt::At(y)) => x < y,
            (ra, rb) => (ra.hi() as f64) + LAG_S < rb.lo() as f64,
        }
    }

    fn check_invariants(&self) -> Result<(), TestCaseError> {
        for (id, j) in &self.jobs {
            if j.state == JobState::Pending {
                prop_assert!(
                    j.attempt < j.max_attempts,
                    "model: pending job {id} without budget: {j:?}"
                );
            }
            prop_assert_eq!(j.state == JobState::Running, j.owner.is_some());
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Running one case
// ---------------------------------------------------------------------------------------

fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
}

fn ok<T>(r: Result<T, StoreError>, what: &str) -> Result<T, TestCaseError> {
    r.map_err(|e| fail(format!("{what}: unexpected store error: {e}")))
}

fn sorted_leases(v: &[Lease]) -> Vec<Lease> {
    let mut v = v.to_vec();
    v.sort();
    v
}

fn sorted_lost(v: &[LeaseLost]) -> Vec<LeaseLost> {
    let mut v = v.to_vec();
    v.sort_by_key(|l| l.lease);
    v
}

fn check_batch(what: &str, got: &BatchOutcome, want: &Split) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        sorted_leases(&got.applied),
        sorted_leases(&want.applied),
        "{}: applied differs",
        what
    );
    prop_assert_eq!(
        sorted_lost(&got.lost),
        sorted_lost(&want.lost),
        "{}: lost differs",
        what
    );
    Ok(())
}

async fn step(db: &TestDb, m: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    let store = &db.store;
    m.step += 1;
    match *op {
        Op::Enqueue {
            n,
            max_attempts,
            queue,
            priority,
            delay_s,
        } => {
            let jobs: Vec<NewJob> = (0..n)
                .map(|i| {
                    let job = NewJob::new(QUEUES[queue], "model", json!(i))
                        .max_attempts(max_attempts)
                        .priority(priority)
                        .backoff(BACKOFF);
                    if delay_s == 0 {
                        job
                    } else {
                        job.delay(Duration::from_secs(delay_s as u64))
                    }
                })
                .collect();
            let got = ok(store.enqueue_many(&jobs).await, "enqueue_many")?;
            prop_assert_eq!(got.len(), n);
            for e in got {
                prop_assert!(!e.duplicate, "enqueue: duplicate without unique key");
                prop_assert!(!m.jobs.contains_key(&e.id.0), "enqueue: id {} reused", e.id);
                m.jobs.insert(
                    e.id.0,
                    MJob {
                        queue,
                        priority,
                        state: JobState::Pending,
                        attempt: 0,
                        max_attempts,
                        owner: None,
                        lease_exp: 0,
                        lease_step: 0,
                        run_at: RunAt::At(m.now + delay_s),
                        run_at_step: m.step,
                        errors: 0,
                        last_error: None,
                        cancel_requested: false,
                    },
                );
            }
        }

        Op::Claim { w, queue, limit } => {
            let ready = m.ready_ids(queue)?;
            let got = ok(
                store
                    .claim(&ClaimRequest {
                        queue: QUEUES[queue].into(),
                        limit,
                        owner: WORKERS[w].into(),
                        lease: Duration::from_secs(LEASE_S as u64),
                        starvation: None,
                    })
                    .await,
                "claim",
            )?;
            let want = ready.len().min(limit as usize);
            prop_assert_eq!(
                got.len(),
                want,
                "claim: got {} jobs, model has {} ready (limit {})",
                got.len(),
                ready.len(),
                limit
            );
            let claimed: BTreeSet<i64> = got.iter().map(|c| c.id.0).collect();
            prop_assert_eq!(claimed.len(), got.len(), "claim: a job twice");
            for c in &got {
                prop_assert!(
                    ready.contains(&c.id.0),
                    "claim: job {} is not ready in the model (ready: {:?})",
                    c.id,
                    ready
                );
                let j = m.job(c.id);
                prop_assert_eq!(c.attempt, j.attempt + 1, "claim: token of job {}", c.id);
                prop_assert_eq!(&c.queue, QUEUES[queue], "claim: queue of job {}", c.id);
                prop_assert_eq!(c.priority, j.priority, "claim: priority of job {}", c.id);
                prop_assert_eq!(c.max_attempts, j.max_attempts, "claim: budget of {}", c.id);
                prop_assert!(c.attempt <= c.max_attempts, "claim over budget: {:?}", c);
            }
            let stored = lease_expiries(db).await?;
            for c in &got {
                prop_assert_eq!(
                    Some(&c.lease_expires_at),
                    stored.get(&c.id.0),
                    "claim: returned expiry of job {} is not the stored one",
                    c.id
                );
            }
            for &u in ready.difference(&claimed) {
                for &c in &claimed {
                    prop_assert!(
                        !m.definitely_before(u, c),
                        "claim order: job {} (left ready) runs before claimed job {}",
                        u,
                        c
                    );
                }
            }
            let (now, step) = (m.now, m.step);
            for c in &got {
                let j = m.job_mut(c.id);
                j.state = JobState::Running;
                j.attempt = c.attempt;
                j.owner = Some(w);
                j.lease_exp = now + LEASE_S;
                j.lease_step = step;
                m.held[w].push(c.lease());
                m.history.push(c.lease());
            }
        }

        Op::Complete { w, ref picks } => {
            let leases = m.pick(w, picks);
            complete(db, m, w, &leases).await?;
        }

        Op::Fail { w, ref items } => {
            let held = &m.held[w];
            let mut failures: Vec<(Lease, FailKind)> = Vec::new();
            if !held.is_empty() {
                for &(p, kind) in items {
                    let l = held[p % held.len()];
                    if !failures.iter().any(|(f, _)| *f == l) {
                        failures.push((l, kind));
                    }
                }
            }
            fail_many(db, m, w, &failures).await?;
        }

        Op::Snooze {
            w,
            ref picks,
            delay_s,
        } => {
            let leases = m.pick(w, picks);
            snooze(db, m, w, &leases, Some(delay_s)).await?;
        }

        Op::Release { w, ref picks } => {
            let leases = m.pick(w, picks);
            snooze(db, m, w, &leases, None).await?;
        }

        Op::Heartbeat { w, forget_lost } => {
            let leases = m.held[w].clone();
            heartbeat(db, m, w, &leases, forget_lost).await?;
        }

        Op::Crash { w } => m.held[w].clear(),

        Op::Impostor {
            w,
            victim,
            pick,
            write,
        } => {
            let held = &m.held[victim];
            if held.is_empty() {
                return Ok(());
            }
            let lease = held[pick % held.len()];
            prop_assert!(
                !m.live(w, lease)?,
                "model: {} holds {:?} of {}",
                w,
                lease,
                victim
            );
            one_write(db, m, w, lease, write).await?;
        }

        Op::Replay { w, pick, write } => {
            if m.history.is_empty() {
                return Ok(());
            }
            let lease = m.history[pick % m.history.len()];
            one_write(db, m, w, lease, write).await?;
        }

        Op::Advance { big } => {
            let s = if big { BIG_STEP_S } else { SMALL_STEP_S };
            db.exec(&format!(
                "UPDATE {{schema}}.jobs SET run_at = run_at - interval '{s} seconds', \
                 lease_expires_at = lease_expires_at - interval '{s} seconds'"
            ))
            .await;
            m.now += s;
        }

        Op::Reap { batch } => {
            // Every expired lease, with what the reaper must make of it.
            let mut expired: BTreeMap<i64, Reaped> = BTreeMap::new();
            for (&id, j) in &m.jobs {
                if j.state == JobState::Running && !m.unexpired(j)? {
                    expired.insert(
                        id,
                        Reaped {
                            id: JobId(id),
                            attempt: j.attempt,
                            owner: WORKERS[j.owner.expect("running has an owner")].into(),
                            state: if j.cancel_requested {
                                JobState::Cancelled
                            } else if j.attempt >= j.max_attempts {
                                JobState::Dead
                            } else {
                                JobState::Pending
                            },
                        },
                    );
                }
            }
            let mut got = ok(store.reap(batch).await, "reap")?.jobs;
            got.sort_by_key(|r| r.id);
            prop_assert_eq!(
                got.len(),
                expired.len().min(batch as usize),
                "reap: {:?} of {} expired (batch {})",
                got,
                expired.len(),
                batch
            );
            for r in &got {
                prop_assert_eq!(Some(r), expired.get(&r.id.0), "reap: job {}", r.id);
            }
            // Expiry order: no expired lease left behind expires definitely before a taken one.
            let taken: BTreeSet<i64> = got.iter().map(|r| r.id.0).collect();
            for &u in expired.keys().filter(|id| !taken.contains(id)) {
                for &t in &taken {
                    let (ju, jt) = (&m.jobs[&u], &m.jobs[&t]);
                    prop_assert!(
                        (ju.lease_exp, ju.lease_step) >= (jt.lease_exp, jt.lease_step),
                        "reap order: job {} (left) expired before job {} (taken)",
                        u,
                        t
                    );
                }
            }
            let (step, window) = (m.step, m.backoff_window());
            for r in &got {
                let j = m.job_mut(r.id);
                j.state = r.state;
                j.record_error("lease_expired", j.owner.expect("running has an owner"));
                Model::end_lease(j);
                if r.state == JobState::Pending {
                    j.run_at = window;
                    j.run_at_step = step;
                }
            }
        }

        Op::Cancel { job, running } => {
            let Some(id) = m.pick_job(job, |s| !running || s == JobState::Running) else {
                return Ok(());
            };
            let got = store.cancel(id).await;
            let st = m.job(id).state;
            // The first request of a job is audited in its history, naming the role.
            let role: String = sqlx::query_scalar("SELECT session_user::text")
                .fetch_one(store.pool())
                .await
                .map_err(|e| fail(format!("session_user: {e}")))?;
            match (st, got) {
                (JobState::Pending, Ok(CancelOutcome::Cancelled)) => {
                    let j = m.job_mut(id);
                    j.state = JobState::Cancelled;
                    if !j.cancel_requested {
                        j.record_entry("cancel_requested", role);
                    }
                    j.cancel_requested = true;
                }
                (JobState::Running, Ok(CancelOutcome::Requested)) => {
                    let j = m.job_mut(id);
                    if !j.cancel_requested {
                        j.record_entry("cancel_requested", role);
                    }
                    j.cancel_requested = true;
                }
                (s, Err(StoreError::WrongState { id: eid, state, .. }))
                    if s.is_terminal() && eid == id && state == s => {}
                (s, other) => {
                    return Err(fail(format!(
                        "cancel of {s} job {id}: unexpected result {other:?}"
                    )))
                }
            }
        }

        Op::Retry {
            job,
            finished,
            extra,
        } => {
            let Some(id) = m.pick_job(job, |s| {
                !finished || matches!(s, JobState::Dead | JobState::Cancelled)
            }) else {
                return Ok(());
            };
            let got = store.retry(id, extra).await;
            let st = m.job(id).state;
            let (now, step) = (m.now, m.step);
            match (st, got) {
                (JobState::Dead | JobState::Cancelled, Ok(rec)) => {
                    let j = m.job_mut(id);
                    j.state = JobState::Pending;
                    j.max_attempts = j.attempt + extra;
                    j.run_at = RunAt::At(now);
                    j.run_at_step = step;
                    j.cancel_requested = false;
                    prop_assert_eq!(rec.id, id);
                    prop_assert_eq!(rec.state, JobState::Pending, "retry: record state");
                    prop_assert_eq!(rec.attempt, j.attempt, "retry: record attempt");
                    prop_assert_eq!(rec.max_attempts, j.max_attempts, "retry: budget");
                    prop_assert_eq!(
                        rec.errors.len() as i32,
                        j.errors.min(MAX_HISTORY),
                        "retry: history"
                    );
                }
                (s, Err(StoreError::WrongState { id: eid, state, .. }))
                    if !matches!(s, JobState::Dead | JobState::Cancelled)
                        && eid == id
                        && state == s => {}
                (s, other) => {
                    return Err(fail(format!(
                        "retry of {s} job {id}: unexpected result {other:?}"
                    )))
                }
            }
        }
    }
    Ok(())
}

/// Worker `w` writes `write` for `lease`.
async fn one_write(
    db: &TestDb,
    m: &mut Model,
    w: usize,
    lease: Lease,
    write: Write,
) -> Result<(), TestCaseError> {
    match write {
        Write::Complete => complete(db, m, w, &[lease]).await,
        Write::Fail(kind) => fail_many(db, m, w, &[(lease, kind)]).await,
        Write::Snooze { delay_s } => snooze(db, m, w, &[lease], Some(delay_s)).await,
        Write::Release => snooze(db, m, w, &[lease], None).await,
        Write::Heartbeat => heartbeat(db, m, w, &[lease], true).await,
    }
}

/// Worker `w` completes `leases` (distinct) in one batch, then forgets them.
async fn complete(
    db: &TestDb,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
) -> Result<(), TestCaseError> {
    let want = m.split(w, leases)?;
    let got = ok(db.store.complete_many(WORKERS[w], leases).await, "complete")?;
    check_batch("complete", &got, &want)?;
    for l in &want.applied {
        let j = m.job_mut(l.id);
        j.state = JobState::Succeeded;
        Model::end_lease(j);
    }
    m.forget(w, leases);
    Ok(())
}

/// Worker `w` reports `failures` (distinct leases) in one batch, then forgets them.
async fn fail_many(
    db: &TestDb,
    m: &mut Model,
    w: usize,
    failures: &[(Lease, FailKind)],
) -> Result<(), TestCaseError> {
    let leases: Vec<Lease> = failures.iter().map(|f| f.0).collect();
    let want = m.split(w, &leases)?;
    let batch: Vec<Failure> = failures
        .iter()
        .map(|&(lease, kind)| Failure {
            lease,
            class: match kind {
                FailKind::Backoff | FailKind::RetryIn => FailureClass::Retry,
                FailKind::Discard => FailureClass::Discard,
                FailKind::Cancel => FailureClass::Cancel,
            },
            message: format!("{kind:?}"),
            retry_in: (kind == FailKind::RetryIn).then(|| Duration::from_secs(RETRY_IN_S as u64)),
        })
        .collect();
    let got = ok(db.store.fail_many(WORKERS[w], &batch).await, "fail")?;
    check_batch("fail", &got, &want)?;
    let (now, step, window) = (m.now, m.step, m.backoff_window());
    for &(l, kind) in failures {
        if !want.applied.contains(&l) {
            continue;
        }
        let j = m.job_mut(l.id);
        j.record_error(
            match kind {
                FailKind::Backoff | FailKind::RetryIn => "retry",
                FailKind::Discard => "discard",
                FailKind::Cancel => "cancel",
            },
            w,
        );
        Model::end_lease(j);
        j.state = if kind == FailKind::Cancel || j.cancel_requested {
            JobState::Cancelled
        } else if kind == FailKind::Discard || j.attempt >= j.max_attempts {
            JobState::Dead
        } else {
            j.run_at = if kind == FailKind::RetryIn {
                RunAt::At(now + RETRY_IN_S)
            } else {
                window
            };
            j.run_at_step = step;
            JobState::Pending
        };
    }
    m.forget(w, &leases);
    Ok(())
}

/// Worker `w` snoozes `leases` (distinct) by `delay_s`, or releases them (`None`:
/// `release_many`, delay 0), in one batch, then forgets them.
async fn snooze(
    db: &TestDb,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
    delay_s: Option<i64>,
) -> Result<(), TestCaseError> {
    let want = m.split(w, leases)?;
    let got = match delay_s {
        Some(d) => {
            let batch: Vec<Snooze> = leases
                .iter()
                .map(|&lease| Snooze {
                    lease,
                    delay: Duration::from_secs(d as u64),
                })
                .collect();
            ok(db.store.snooze_many(WORKERS[w], &batch).await, "snooze")?
        }
        None => ok(db.store.release_many(WORKERS[w], leases).await, "release")?,
    };
    check_batch(
        if delay_s.is_some() {
            "snooze"
        } else {
            "release"
        },
        &got,
        &want,
    )?;
    let (now, step) = (m.now, m.step);
    for l in &want.applied {
        let j = m.job_mut(l.id);
        Model::end_lease(j);
        // The budget is given back by raising max_attempts (attempt never goes down), even
        // when the job is cancelled instead of requeued.
        j.max_attempts += 1;
        if j.cancel_requested {
            j.state = JobState::Cancelled;
        } else {
            j.state = JobState::Pending;
            j.run_at = RunAt::At(now + delay_s.unwrap_or(0));
            j.run_at_step = step;
        }
    }
    m.forget(w, leases);
    Ok(())
}

/// Worker `w` heartbeats `leases`; with `forget_lost` it then drops the lost ones.
async fn heartbeat(
    db: &TestDb,
    m: &mut Model,
    w: usize,
    leases: &[Lease],
    forget_lost: bool,
) -> Result<(), TestCaseError> {
    // The store de-duplicates; so does the model.
    let mut leases = sorted_leases(leases);
    leases.dedup();
    let want = m.split(w, &leases)?;
    let got = ok(
        db.store
            .heartbeat(WORKERS[w], &leases, Duration::from_secs(LEASE_S as u64))
            .await,
        "heartbeat",
    )?;
    let stored = lease_expiries(db).await?;
    for (l, at) in &got.extended {
        prop_assert_eq!(
            Some(at),
            stored.get(&l.id.0),
            "heartbeat: returned expiry of job {} is not the stored one",
            l.id
        );
    }
    let extended: Vec<Lease> = got.extended.iter().map(|e| e.0).collect();
    prop_assert_eq!(
        sorted_leases(&extended),
        sorted_leases(&want.applied),
        "heartbeat: extended differs"
    );
    let cancel: Vec<Lease> = want
        .applied
        .iter()
        .copied()
        .filter(|l| m.job(l.id).cancel_requested)
        .collect();
    prop_assert_eq!(
        sorted_leases(&got.cancel_requested),
        sorted_leases(&cancel),
        "heartbeat: cancel_requested differs"
    );
    prop_assert_eq!(
        sorted_lost(&got.lost),
        sorted_lost(&want.lost),
        "heartbeat: lost differs"
    );
    let (now, step) = (m.now, m.step);
    for l in &want.applied {
        let j = m.job_mut(l.id);
        j.lease_exp = now + LEASE_S;
        j.lease_step = step;
    }
    if forget_lost {
        let lost: Vec<Lease> = want.lost.iter().map(|l| l.lease).collect();
        m.forget(w, &lost);
    }
    Ok(())
}

/// `lease_expires_at` of every running job.
async fn lease_expiries(db: &TestDb) -> Result<BTreeMap<i64, DateTime<Utc>>, TestCaseError> {
    let sql = "SELECT id, lease_expires_at FROM {schema}.jobs WHERE state = 'running'"
        .replace("{schema}", &db.schema);
    let rows: Vec<(i64, DateTime<Utc>)> = sqlx::query_as(&sql)
        .fetch_all(&db.pool)
        .await
        .map_err(|e| fail(format!("lease expiries: {e}")))?;
    Ok(rows.into_iter().collect())
}

/// One row as the database has it.
#[derive(Debug)]
struct DbJob {
    id: i64,
    state: JobState,
    attempt: i32,
    max_attempts: i32,
    owner: Option<String>,
    cancel_requested: bool,
    queue: String,
    priority: i16,
    errors: i32,
    last_error: Option<LastError>,
    finished: bool,
    run_in: f64,
    lease_in: Option<f64>,
}

async fn snapshot(db: &TestDb) -> Result<Vec<DbJob>, TestCaseError> {
    let sql = "SELECT id, state, attempt, max_attempts, lease_owner, \
                      cancel_requested_at IS NOT NULL AS cancel_requested, \
                      queue, priority, jsonb_array_length(errors) AS errors, \
                      (errors->-1->>'attempt')::int AS last_attempt, \
                      errors->-1->>'class' AS last_class, \
                      errors->-1->>'owner' AS last_owner, \
                      finished_at IS NOT NULL AS finished, \
                      extract(epoch FROM run_at - now())::float8 AS run_in, \
                      extract(epoch FROM lease_expires_at - now())::float8 AS lease_in \
               FROM {schema}.jobs ORDER BY id"
        .replace("{schema}", &db.schema);
    let rows = sqlx::query(&sql)
        .fetch_all(&db.pool)
        .await
        .map_err(|e| fail(format!("snapshot: {e}")))?;
    let get = |e: sqlx::Error| fail(format!("snapshot column: {e}"));
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let st: String = r.try_get("state").map_err(get)?;
        out.push(DbJob {
            id: r.try_get("id").map_err(get)?,
            state: st.parse().map_err(|e| fail(format!("{e}")))?,
            attempt: r.try_get("attempt").map_err(get)?,
            max_attempts: r.try_get("max_attempts").map_err(get)?,
            owner: r.try_get("lease_owner").map_err(get)?,
            cancel_requested: r.try_get("cancel_requested").map_err(get)?,
            queue: r.try_get("queue").map_err(get)?,
            priority: r.try_get("priority").map_err(get)?,
            errors: r.try_get("errors").map_err(get)?,
            last_error: match r.try_get::<Option<i32>, _>("last_attempt").map_err(get)? {
                None => None,
                Some(attempt) => Some(LastError {
                    attempt,
                    class: r.try_get("last_class").map_err(get)?,
                    owner: r.try_get("last_owner").map_err(get)?,
                }),
            },
            finished: r.try_get("finished").map_err(get)?,
            run_in: r.try_get("run_in").map_err(get)?,
            lease_in: r.try_get("lease_in").map_err(get)?,
        });
    }
    Ok(out)
}

/// `got` (seconds from the database's now) is within `[lo, hi]` (model seconds from the
/// model's now), allowing the database to lag by the real time the test has taken.
fn within(got: f64, lo: i64, hi: i64) -> bool {
    got >= lo as f64 - LAG_S && got <= hi as f64 + 0.5
}

async fn compare(db: &TestDb, m: &Model) -> Result<(), TestCaseError> {
    m.check_invariants()?;
    let rows = snapshot(db).await?;
    let db_ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let model_ids: Vec<i64> = m.jobs.keys().copied().collect();
    prop_assert_eq!(&db_ids, &model_ids, "job ids differ");
    for r in &rows {
        let j = &m.jobs[&r.id];
        let id = r.id;
        let want_owner = j.owner.map(|w| WORKERS[w].to_string());
        prop_assert_eq!(
            (r.state, r.attempt, r.max_attempts, &r.owner),
            (j.state, j.attempt, j.max_attempts, &want_owner),
            "job {} (state, attempt, max_attempts, owner): database (left) vs model (right)",
            id
        );
        prop_assert_eq!(
            r.cancel_requested,
            j.cancel_requested,
            "job {} cancel flag",
            id
        );
        prop_assert_eq!(
            (r.queue.as_str(), r.priority),
            (QUEUES[j.queue], j.priority),
            "job {} queue and priority",
            id
        );
        prop_assert_eq!(
            r.errors,
            j.errors.min(MAX_HISTORY),
            "job {} error count",
            id
        );
        prop_assert_eq!(&r.last_error, &j.last_error, "job {} newest error", id);
        prop_assert_eq!(r.finished, j.state.is_terminal(), "job {} finished_at", id);
        match j.state {
            JobState::Pending => {
                let (lo, hi) = (j.run_at.lo() - m.now, j.run_at.hi() - m.now);
                prop_assert!(
                    within(r.run_in, lo, hi),
                    "job {}: run_at is now{:+.1}s, model expects [{}, {}]",
                    id,
                    r.run_in,
                    lo,
                    hi
                );
            }
            JobState::Running => {
                let e = j.lease_exp - m.now;
                let got = r.lease_in.unwrap_or(f64::NAN);
                prop_assert!(
                    within(got, e, e),
                    "job {}: lease expires at now{:+.1}s, model expects {}",
                    id,
                    got,
                    e
                );
            }
            _ => {}
        }
    }
    for (qi, q) in QUEUES.iter().enumerate() {
        let mut active = 0;
        for j in m.jobs.values() {
            if j.queue == qi && (j.state == JobState::Running || m.ready(j)?) {
                active += 1;
            }
        }
        let got = ok(
            db.store.active_count(&[q.to_string()]).await,
            "active_count",
        )?;
        prop_assert_eq!(got, active, "active_count of {}", q);
    }
    compare_stats(db, m).await
}

/// The operator counters of `Store::stats`, per queue.
async fn compare_stats(db: &TestDb, m: &Model) -> Result<(), TestCaseError> {
    // (pending, ready, running, succeeded, dead, cancelled, near expiry, expired)
    type Counts = [i64; 8];
    let mut want: BTreeMap<String, Counts> = BTreeMap::new();
    for j in m.jobs.values() {
        let c = want.entry(QUEUES[j.queue].to_string()).or_default();
        match j.state {
            JobState::Pending => c[0] += 1,
            JobState::Running => c[2] += 1,
            JobState::Succeeded => c[3] += 1,
            JobState::Dead => c[4] += 1,
            JobState::Cancelled => c[5] += 1,
        }
        if m.ready(j)? {
            c[1] += 1;
        }
        if j.state == JobState::Running {
            // "Expires within 10 s": a lease exactly 10 s away in the model is a few
            // milliseconds closer in the database.
            if j.lease_exp - m.now <= 10 {
                c[6] += 1;
            }
            if !m.unexpired(j)? {
                c[7] += 1;
            }
        }
    }
    let stats = ok(db.store.stats().await, "stats")?;
    let got: BTreeMap<String, Counts> = stats
        .queues
        .iter()
        .map(|q| {
            let c = [
                q.pending,
                q.ready,
                q.running,
                q.succeeded,
                q.dead,
                q.cancelled,
                q.running_near_expiry,
                q.running_expired,
            ];
            (q.queue.clone(), c)
        })
        .collect();
    prop_assert_eq!(
        got,
        want,
        "stats: [pending, ready, running, succeeded, dead, cancelled, near expiry, expired]"
    );
    Ok(())
}

fn with_context(e: TestCaseError, ctx: String) -> TestCaseError {
    match e {
        TestCaseError::Fail(why) => fail(format!("{ctx}: {why}")),
        other => other,
    }
}

async fn run_case(db: &TestDb, ops: &[Op]) -> Result<(), TestCaseError> {
    db.exec("TRUNCATE {schema}.jobs RESTART IDENTITY").await;
    let mut m = Model::default();
    for (i, op) in ops.iter().enumerate() {
        step(db, &mut m, op)
            .await
            .map_err(|e| with_context(e, format!("step {i} {op:?}")))?;
        compare(db, &m)
            .await
            .map_err(|e| with_context(e, format!("after step {i} {op:?}")))?;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("DOCKET_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48)
}

#[test]
fn store_matches_the_state_machine_model() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let db = rt.block_on(TestDb::with_pool_size(2));
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        // No regression files next to the sources: a failure prints its minimal sequence.
        failure_persistence: None,
        max_shrink_time: 120_000,
        ..Config::default()
    });
    let started = Instant::now();
    let result = runner.run(&ops(), |ops| rt.block_on(run_case(&db, &ops)));
    eprintln!("model test: {} cases in {:.1?}", cases(), started.elapsed());
    if let Err(e) = result {
        panic!("{e}");
    }
}
