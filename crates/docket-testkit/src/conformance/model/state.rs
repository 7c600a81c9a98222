//! The model of the state machine.

use std::collections::{BTreeMap, BTreeSet};

use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::*;

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

/// When a pending job becomes claimable, in model seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAt {
    /// Exactly then.
    At(i64),
    /// Somewhere in `[lo, hi]` (backoff jitter).
    Window(i64, i64),
}

impl RunAt {
    pub fn lo(self) -> i64 {
        match self {
            RunAt::At(t) | RunAt::Window(t, _) => t,
        }
    }
    pub fn hi(self) -> i64 {
        match self {
            RunAt::At(t) | RunAt::Window(_, t) => t,
        }
    }
}

/// The newest entry of a job's error history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    pub attempt: i32,
    pub class: String,
    pub owner: String,
}

#[derive(Debug, Clone)]
pub struct MJob {
    pub queue: usize,
    pub priority: i16,
    pub state: JobState,
    pub attempt: i32,
    pub max_attempts: i32,
    /// Claims given back unrun (releases and snoozes): history entries name the run,
    /// `attempt - released`.
    pub released: i32,
    /// Worker index holding the lease (running only).
    pub owner: Option<usize>,
    /// Lease expiry in model seconds (running only).
    pub lease_exp: i64,
    /// The step that last set `lease_exp` (orders equal model times, like `run_at_step`).
    pub lease_step: u64,
    pub run_at: RunAt,
    /// The step that last set `run_at`: orders equal model times as the database does
    /// (earlier statement, earlier `now()`).
    pub run_at_step: u64,
    /// Errors recorded (the history keeps at most 32 of them).
    pub errors: i32,
    pub last_error: Option<LastError>,
    pub cancel_requested: bool,
    /// `o{k}`: runs only as the oldest unfinished (pending, running, dead) job of its key,
    /// and not while another job of its key runs.
    pub ordering_key: Option<usize>,
    /// `c{k}`: counts against the key's limit while running.
    pub concurrency_key: Option<usize>,
    /// `u{k}`: no second pending or running job with this key.
    pub unique_key: Option<usize>,
    /// Model time it entered a terminal state (set after every step).
    pub finished_at: Option<i64>,
    /// The output its completion recorded (`complete_outputs`).
    pub output: Option<serde_json::Value>,
    /// Recorded steps: name → (the token that recorded it, its output).
    pub steps: BTreeMap<String, (i32, serde_json::Value)>,
}

/// `push_error` keeps the first entry and the 31 most recent.
pub const MAX_HISTORY: i32 = 32;

impl MJob {
    pub fn record_error(&mut self, class: &str, owner: usize) {
        self.record_entry(class, WORKERS[owner].into());
    }

    /// A history entry written on behalf of `who` (a worker, or for an operator's cancel
    /// request the database role that asked).
    pub fn record_entry(&mut self, class: &str, who: String) {
        self.errors += 1;
        self.last_error = Some(LastError {
            attempt: self.attempt - self.released,
            class: class.into(),
            owner: who,
        });
    }
}

#[derive(Debug, Default)]
pub struct Model {
    pub now: i64,
    pub step: u64,
    pub jobs: BTreeMap<i64, MJob>,
    /// Leases each worker believes it holds (possibly stale).
    pub held: [Vec<Lease>; NW],
    /// Every lease ever handed out, in claim order.
    pub history: Vec<Lease>,
    /// Paused queues.
    pub paused: [bool; 2],
    /// Queue concurrency limits.
    pub max_running: [Option<i32>; 2],
    /// Signals sent, by (job, `g{k}`'s k): the first payload (a repeat changes nothing).
    pub signals: BTreeMap<(i64, u8), serde_json::Value>,
    /// How often each operation and each interesting outcome happened in this case.
    pub coverage: BTreeMap<&'static str, u64>,
}

/// What a fenced write will do, as the model predicts it.
pub struct Split {
    pub applied: Vec<Lease>,
    pub lost: Vec<LeaseLost>,
}

impl Model {
    pub fn job(&self, id: JobId) -> &MJob {
        &self.jobs[&id.0]
    }

    pub fn job_mut(&mut self, id: JobId) -> &mut MJob {
        self.jobs.get_mut(&id.0).expect("model knows the job")
    }

    pub fn ready(&self, j: &MJob) -> Result<bool, TestCaseError> {
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

    pub fn ready_ids(&self, queue: usize) -> Result<BTreeSet<i64>, TestCaseError> {
        let mut out = BTreeSet::new();
        for (id, j) in &self.jobs {
            if j.queue == queue && self.ready(j)? {
                out.insert(*id);
            }
        }
        Ok(out)
    }

    /// Whether a running job's lease is still valid by the model clock.
    pub fn unexpired(&self, j: &MJob) -> Result<bool, TestCaseError> {
        if j.lease_exp == self.now {
            return Err(TestCaseError::fail(format!(
                "test design: clock {} exactly on a lease expiry",
                self.now
            )));
        }
        Ok(j.lease_exp > self.now)
    }

    /// The fence: running, same token, same owner, lease not expired.
    pub fn live(&self, w: usize, l: Lease) -> Result<bool, TestCaseError> {
        let Some(j) = self.jobs.get(&l.id.0) else {
            return Ok(false); // pruned
        };
        Ok(j.state == JobState::Running
            && j.attempt == l.attempt
            && j.owner == Some(w)
            && self.unexpired(j)?)
    }

    /// Why a lease no longer holds, as `PgStore` explains it.
    pub fn lost_reason(&self, l: Lease) -> LostReason {
        match self.jobs.get(&l.id.0) {
            None => LostReason::Missing,
            Some(j) if j.attempt > l.attempt => LostReason::Superseded(j.attempt),
            Some(j) if j.state != JobState::Running => LostReason::NotRunning(j.state),
            Some(_) => LostReason::Expired,
        }
    }

    pub fn split(&self, w: usize, leases: &[Lease]) -> Result<Split, TestCaseError> {
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
    pub fn pick(&self, w: usize, picks: &[usize]) -> Vec<Lease> {
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

    pub fn forget(&mut self, w: usize, leases: &[Lease]) {
        self.held[w].retain(|l| !leases.contains(l));
    }

    /// The `k`-th (modulo) job whose state passes `filter`.
    pub fn pick_job(&self, k: usize, filter: impl Fn(JobState) -> bool) -> Option<JobId> {
        let ids: Vec<i64> = self
            .jobs
            .iter()
            .filter(|(_, j)| filter(j.state))
            .map(|(&id, _)| id)
            .collect();
        (!ids.is_empty()).then(|| JobId(ids[k % ids.len()]))
    }

    pub fn backoff_window(&self) -> RunAt {
        RunAt::Window(self.now + BACKOFF_LO_S, self.now + BACKOFF_HI_S)
    }

    /// Leaves `running`: the lease is gone.
    pub fn end_lease(j: &mut MJob) {
        j.owner = None;
        j.lease_exp = 0;
    }

    /// A claim given back unrun (snooze, release, park): the lease ends and the budget
    /// comes back (by raising `max_attempts`: `attempt` never goes down); the job is pending
    /// again at `run_at` — or cancelled, when a cancel was requested. Returns whether it was
    /// cancelled.
    pub fn give_back(j: &mut MJob, run_at: i64, step: u64) -> bool {
        Model::end_lease(j);
        j.max_attempts += 1;
        j.released += 1;
        if j.cancel_requested {
            j.state = JobState::Cancelled;
            return true;
        }
        j.state = JobState::Pending;
        j.run_at = RunAt::At(run_at);
        j.run_at_step = step;
        false
    }

    /// `a` is claimed before `b` for sure: a lower priority value, or the same priority and
    /// an earlier `run_at` by more than the lag, or the same exact model time and an earlier
    /// statement, or the same statement and a smaller id.
    pub fn definitely_before(&self, a: i64, b: i64) -> bool {
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

    /// Counts a fenced write's outcome for the coverage report.
    pub fn saw_split(&mut self, s: &Split) {
        if !s.applied.is_empty() {
            self.saw("write: applied");
        }
        if !s.lost.is_empty() {
            self.saw("write: fenced off");
        }
    }

    /// Counts one occurrence of `what` for the coverage report.
    pub fn saw(&mut self, what: &'static str) {
        *self.coverage.entry(what).or_default() += 1;
    }

    /// Sets `finished_at` on jobs that became terminal in this step (the database stamps
    /// the transition with that statement's `now()`), clears it on jobs that left.
    pub fn stamp_finished(&mut self) {
        let now = self.now;
        for j in self.jobs.values_mut() {
            if j.state.is_terminal() {
                j.finished_at.get_or_insert(now);
            } else {
                j.finished_at = None;
            }
        }
    }

    /// Whether a ready job has waited past the starvation bound (see `STARVE_S`).
    pub fn starving(&self, j: &MJob) -> Result<bool, TestCaseError> {
        match j.run_at {
            RunAt::At(t) => Ok(self.now - t >= STARVE_S),
            RunAt::Window(_, hi) if self.now - hi >= STARVE_S => Ok(true),
            RunAt::Window(lo, _) if self.now - lo < STARVE_S => Ok(false),
            RunAt::Window(lo, hi) => Err(TestCaseError::fail(format!(
                "test design: starvation of a job in [{lo}, {hi}] undecided at {}",
                self.now
            ))),
        }
    }

    /// Claim order with a starvation bound: starving jobs first, oldest first (priority
    /// ignored), then the rest by priority; without one, [`Model::definitely_before`].
    pub fn definitely_before_in(
        &self,
        a: i64,
        b: i64,
        starve: bool,
    ) -> Result<bool, TestCaseError> {
        if !starve {
            return Ok(self.definitely_before(a, b));
        }
        let (ja, jb) = (&self.jobs[&a], &self.jobs[&b]);
        Ok(match (self.starving(ja)?, self.starving(jb)?) {
            (true, false) => true,
            (false, true) => false,
            (true, true) => match (ja.run_at, jb.run_at) {
                (RunAt::At(x), RunAt::At(y)) => x < y,
                (ra, rb) => (ra.hi() as f64) + LAG_S < rb.lo() as f64,
            },
            (false, false) => self.definitely_before(a, b),
        })
    }

    /// Running jobs of a concurrency key.
    pub fn running_with_ckey(&self, k: usize) -> i32 {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Running && j.concurrency_key == Some(k))
            .count() as i32
    }

    /// Free slots of a concurrency key (`None`: no limit).
    pub fn ckey_quota(&self, k: usize) -> Option<i32> {
        (k == 0).then(|| (C0_LIMIT - self.running_with_ckey(0)).max(0))
    }

    /// A pending job's keys allow it to run now: it heads its ordering key (no older
    /// pending, running or dead job of the key) and no job of the key runs; its concurrency
    /// key has a free slot. (Slots shared within one claim are counted by the caller.)
    pub fn keys_allow(&self, id: i64) -> bool {
        let j = &self.jobs[&id];
        if let Some(k) = j.ordering_key {
            let held = self.jobs.iter().any(|(&o, oj)| {
                oj.ordering_key == Some(k)
                    && ((o < id
                        && matches!(
                            oj.state,
                            JobState::Pending | JobState::Running | JobState::Dead
                        ))
                        || oj.state == JobState::Running)
            });
            if held {
                return false;
            }
        }
        if let Some(k) = j.concurrency_key {
            if self.ckey_quota(k) == Some(0) {
                return false;
            }
        }
        true
    }

    /// The pending or running job holding unique key `k`, if any.
    pub fn unique_holder(&self, k: usize) -> Option<i64> {
        self.jobs
            .iter()
            .find(|(_, j)| {
                j.unique_key == Some(k) && matches!(j.state, JobState::Pending | JobState::Running)
            })
            .map(|(&id, _)| id)
    }

    pub fn check_invariants(&self) -> Result<(), TestCaseError> {
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
