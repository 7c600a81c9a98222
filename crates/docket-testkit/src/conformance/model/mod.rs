//! Model-based test of an engine's store, through the seam and its [`Harness`]: random
//! sequences of enqueue (plain, with an ordering key, a concurrency key or a unique key),
//! claim (strict priority order or under a starvation bound), heartbeat, complete, fail,
//! snooze, release, crash, writes by impostors and stale tokens, outputs, memoized steps
//! (one at a time and in batches), parks waiting for signals and the signals that wake
//! them (`signals.rs`), operator cancel, retry,
//! pause, resume and queue limits, prune, the key sweep, advance-the-clock and reap run
//! against the store and against a small in-memory model of the state machine (`docs/state-machine.md`,
//! `sql/*.sql`); the two are compared after every step. The claims reach all three claim
//! paths: the fast path, its starving branch, and the controlled path (limits and keys); see
//! `claims.rs`.
//!
//! A run counts how often each operation and outcome happened and fails when one of
//! `MUST_COVER` never did (a starving job overtaking higher priorities, a key limit holding
//! a job back, a paused queue holding ready jobs, a prune deleting, ...), so a change to the
//! generator cannot quietly stop exercising a path. Rate limits are not modelled (they depend
//! on the clock in ways the moved clock does not reach); `scheduling.rs` tests them.
//!
//! # What is compared
//!
//! - Every fenced write (complete, fail, snooze, release, heartbeat, park): the applied and
//!   lost sets, and each lost lease's reason; heartbeats also the cancel requests they
//!   report; every step record: written, the first record back, or refused.
//! - Every signal: new or a repeat, whether it woke the job, or the refusal (missing or
//!   finished job); and the payload a wait would read.
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
//! "Advance the clock by S seconds" is [`Harness::advance`] (on PostgreSQL: every timestamp
//! of the schema S seconds into the past), and the model moves its own clock forward by S.
//! What the store holds is read back through the seam only (`list`, `stats`,
//! `active_count`). Every model duration is a multiple of 5 s (lease 60 s, explicit retry,
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

mod claims;
mod compare;
mod ops;
mod signals;
mod state;
mod steps;
mod writes;

use std::time::{Duration, Instant};

use crate::conformance::Harness;
use docket_core::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use ops::{ops, Op};
use state::Split;

pub const QUEUES: [&str; 2] = ["q", "r"];
pub const WORKERS: [&str; 3] = ["w0", "w1", "w2"];
pub const NW: usize = WORKERS.len();

/// Lease length of claims and heartbeats.
pub const LEASE_S: i64 = 60;
/// The small clock step: never makes a lease expiry (60 - 25k) or an explicit retry
/// (40 - 25k) coincide with the clock.
pub const SMALL_STEP_S: i64 = 25;
/// The big clock step: past every backoff window.
pub const BIG_STEP_S: i64 = 2 * 3600;
/// Explicit `retry_in` of a failure.
pub const RETRY_IN_S: i64 = 40;
/// Backoff of every job: base = cap = 1 h, so the delay is 45-60 min whatever the count.
pub const BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(3600),
    cap: Duration::from_secs(3600),
};
pub const BACKOFF_LO_S: i64 = 2700;
pub const BACKOFF_HI_S: i64 = 3600;
/// How far behind the model a database time may be (the real time elapsed since it was
/// written), in seconds. Below the 10 s margin between the clock and any deadline.
pub const LAG_S: f64 = 8.0;
/// Longest sequence: (MAX_STEPS - 1) * SMALL_STEP_S must stay below BACKOFF_LO_S.
pub const MAX_STEPS: usize = 100;
const _: () = assert!((MAX_STEPS as i64 - 1) * SMALL_STEP_S < BACKOFF_LO_S);
/// Reaper batch when unbounded: larger than any case's job count.
pub const REAP_ALL: i64 = 1000;
/// Starvation bound of a starving claim. Model ages (clock minus `run_at`) are 0 or 10
/// modulo 25 s, so none lies in [16, 24): with the database lagging the model by under 8 s,
/// "has waited 24 s" is never ambiguous.
pub const STARVE_S: i64 = 24;
/// The long retention of a prune: only a 2 h advance ages a finished job past it (99 small
/// steps are 2,475 s).
pub const KEEP_LONG_S: i64 = 3600;
/// Concurrency key `c0` runs at most this many jobs at once (a `key_limits` row); `c1` has
/// no limit.
pub const C0_LIMIT: i32 = 1;

// ---------------------------------------------------------------------------------------
// Running one case
// ---------------------------------------------------------------------------------------

pub fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
}

pub fn ok<T>(r: Result<T, StoreError>, what: &str) -> Result<T, TestCaseError> {
    r.map_err(|e| fail(format!("{what}: unexpected store error: {e}")))
}

pub fn leases_in_order(v: &[Lease]) -> Vec<Lease> {
    let mut v = v.to_vec();
    v.sort();
    v
}

pub fn sorted_lost(v: &[LeaseLost]) -> Vec<LeaseLost> {
    let mut v = v.to_vec();
    v.sort_by_key(|l| l.lease);
    v
}

pub fn check_batch(what: &str, got: &BatchOutcome, want: &Split) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        leases_in_order(&got.applied),
        leases_in_order(&want.applied),
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

fn with_context(e: TestCaseError, ctx: String) -> TestCaseError {
    match e {
        TestCaseError::Fail(why) => fail(format!("{ctx}: {why}")),
        other => other,
    }
}

/// Coverage over every case of a run: how often each operation and outcome happened.
type Coverage = std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>;

async fn run_case<H: Harness>(h: &H, ops: &[Op], coverage: &Coverage) -> Result<(), TestCaseError> {
    h.reset().await;
    // c0 runs one job at a time; c1 has no limit.
    ok(
        h.store()
            .set_key_limit(&KeyLimit {
                key: "c0".into(),
                max_running: Some(C0_LIMIT),
                rate: None,
            })
            .await,
        "set_key_limit",
    )?;
    let mut m = state::Model::default();
    let result = async {
        for (i, op) in ops.iter().enumerate() {
            steps::step(h, &mut m, op)
                .await
                .map_err(|e| with_context(e, format!("step {i} {op:?}")))?;
            m.stamp_finished();
            compare::compare(h, &m)
                .await
                .map_err(|e| with_context(e, format!("after step {i} {op:?}")))?;
        }
        Ok(())
    }
    .await;
    let mut all = coverage.lock().expect("coverage");
    *all.entry(CASES_RUN).or_default() += 1;
    for (k, v) in &m.coverage {
        *all.entry(k).or_default() += v;
    }
    result
}

/// The coverage entry counting cases run (shrinking runs more), so a round that ran
/// none is seen.
const CASES_RUN: &str = "(cases run, shrinking included)";

fn cases() -> u32 {
    std::env::var("DOCKET_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48)
}

/// Every operation and outcome the model is meant to exercise; each must have happened at
/// least once in a run, or the run proved less than it claims.
const MUST_COVER: &[&str] = &[
    "enqueue",
    "enqueue: unique duplicate",
    "claim: strict order",
    "claim: starving bound",
    "claim: handed out jobs",
    "claim: a starving job overtook higher priorities",
    "claim: paused queue held its ready jobs",
    "claim: queue limit bound",
    "claim: ordering head",
    "claim: key limit held a job back",
    "pause",
    "resume",
    "limit: set",
    "limit: removed",
    "prune",
    "prune: deleted",
    "sweep",
    "write: applied",
    "write: fenced off",
    "reap: took leases",
    "cancel",
    "retry",
    "step batch: recorded",
    "step batch: the first record wins",
    "step batch: lease lost",
    "park: parked",
    "park: the signal was already there",
    "signal: sent",
    "signal: a repeat changed nothing",
    "signal: woke a parked job",
    "signal: refused for a finished job",
    "signal: refused for a missing job",
];

/// Every job, by id (cases have fewer than the 1,000 a page holds).
pub async fn records<H: Harness>(h: &H) -> Result<Vec<JobRecord>, TestCaseError> {
    let mut v = ok(
        h.store()
            .list(&JobFilter {
                limit: 1000,
                ..Default::default()
            })
            .await,
        "list",
    )?;
    v.sort_by_key(|r| r.id);
    Ok(v)
}

/// Runs the model test on engine harness `H` (expanded as a `#[test]` by
/// [`crate::conformance_suite!`]).
pub fn run<H: Harness>() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let h = rt.block_on(H::fresh());
    let config = Config {
        cases: cases(),
        // No regression files next to the sources: a failure prints its minimal sequence.
        failure_persistence: None,
        max_shrink_time: 120_000,
        // Under a mutant (scripts/mutants.sh) the failure is the point, not its minimal
        // sequence: no shrinking (0 turns it off), which took up to two minutes a mutant.
        max_shrink_iters: if docket_core::mutants::current().is_some() {
            0
        } else {
            Config::default().max_shrink_iters
        },
        ..Config::default()
    };
    let coverage = Coverage::default();
    let started = Instant::now();
    // The sequences are random, so a rare outcome (a starving job overtaking higher
    // priorities) can be missed by one round of cases; up to two more rounds of fresh
    // cases run then, before a miss counts — a run proves what it claims without the
    // coverage check failing by chance. Each round needs its own runner: a runner counts
    // its passed cases across calls, so a second `run` on it would run none.
    let mut rounds = 0;
    let missed = loop {
        rounds += 1;
        let mut runner = TestRunner::new(config.clone());
        let result = runner.run(&ops(), |ops| rt.block_on(run_case(&h, &ops, &coverage)));
        if let Err(e) = result {
            panic!("{e}");
        }
        let seen = coverage.lock().expect("coverage");
        let missed: Vec<&str> = MUST_COVER
            .iter()
            .copied()
            .filter(|k| seen.get(*k).copied().unwrap_or(0) == 0)
            .collect();
        if missed.is_empty() || rounds == 3 {
            break missed;
        }
    };
    eprintln!(
        "model test: {} rounds of {} cases in {:.1?}",
        rounds,
        cases(),
        started.elapsed()
    );
    let coverage = coverage.into_inner().expect("coverage");
    eprintln!("coverage: {coverage:#?}");
    let ran = coverage.get(CASES_RUN).copied().unwrap_or(0);
    assert!(
        ran >= u64::from(rounds * cases()),
        "{rounds} rounds of {} cases ran only {ran} cases",
        cases()
    );
    assert!(
        missed.is_empty() || cases() < 48,
        "the model test never exercised {missed:?} in {rounds} rounds of {} cases",
        cases()
    );
}
