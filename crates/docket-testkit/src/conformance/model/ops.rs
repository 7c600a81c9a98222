//! The operations of a case and their strategies.

use proptest::prelude::*;

use super::*;

// ---------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailKind {
    /// `Retry` with the job's backoff.
    Backoff,
    /// `Retry` with `retry_in = 40 s`.
    RetryIn,
    Discard,
    Cancel,
}

/// A fenced write presenting one given lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Complete,
    /// Completion by deleting the row (a worker that keeps no succeeded jobs).
    CompleteDelete,
    Fail(FailKind),
    Snooze {
        delay_s: i64,
    },
    Release,
    Heartbeat,
    /// Completion with an output (the row is kept).
    CompleteOutput,
    /// A memoized step `s{k}` recorded under the lease.
    Step(u8),
    /// The answer to a wait for signal `g{k}` (its payload or its timeout), recorded as the
    /// runtime records it when the parked job runs again: the step `docket:signal:g{k}`.
    Answer(u8),
}

/// A signal sent with a park, to its first job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Also {
    Nothing,
    Before,
    After,
}

/// Whom a signal is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigTarget {
    /// The `k`-th (modulo) job in any state.
    Any(usize),
    /// The `k`-th (modulo) pending job that recorded a wait (parked, or due again), sent
    /// the signal it waits for.
    Waiting(usize),
    /// The `k`-th (modulo) running job: a signal that arrives before its handler waits.
    Running(usize),
    /// A job id no job has.
    Missing,
}

/// The key an enqueued job carries, if any (one kind per job; `k` picks one of two keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    None,
    /// `ordering_key = o{k}`: jobs of a key run one at a time, in enqueue order.
    Ordering(usize),
    /// `concurrency_key = c{k}`: `c0` may run one job at a time (a key limit), `c1` any.
    Concurrency(usize),
    /// `unique_key = u{k}`: at most one pending or running job per key.
    Unique(usize),
}

/// One step. Indices (`picks`, `job`) are taken modulo the length of what they index, so
/// every step stays meaningful while proptest shrinks the sequence.
#[derive(Debug, Clone)]
pub enum Op {
    /// Enqueue `n` jobs with a claim budget of `max_attempts` into `QUEUES[queue]`,
    /// claimable after `delay_s`.
    Enqueue {
        n: usize,
        max_attempts: i32,
        queue: usize,
        priority: i16,
        delay_s: i64,
        key: Key,
    },
    /// Worker `w` claims up to `limit` jobs of `QUEUES[queue]`; with `starve`, under the
    /// starvation bound `STARVE_S` (the two-branch claim), else in strict priority order.
    Claim {
        w: usize,
        queue: usize,
        limit: i32,
        starve: bool,
    },
    /// Operator pause of a queue: no claim hands out its jobs until it is resumed.
    Pause { queue: usize },
    /// Operator resume.
    Resume { queue: usize },
    /// Operator sets (or with `None` removes) the queue's concurrency limit.
    Limit { queue: usize, max: Option<i32> },
    /// The pruner: deletes finished and dead jobs older than 1 h (`keep_long`) or all.
    Prune { keep_long: bool },
    /// The key sweep (`unblock_keys`): flags left on jobs that could run are cleared.
    Sweep,
    /// Worker `w` completes some of the leases it holds (one batch); with `delete`, by
    /// deleting the rows (`complete_delete_many`).
    Complete {
        w: usize,
        picks: Vec<usize>,
        delete: bool,
    },
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
    /// Worker `w` writes `write` for one of the leases it holds (outputs and steps; the
    /// batch ops cover the rest).
    Own { w: usize, pick: usize, write: Write },
    /// Worker `w` records step `s{k}` for some of the leases it holds and, with `replay`, for
    /// a lease from the history (usually stale), all in one `record_steps` call: each judged
    /// by its own claim; with `again`, the same batch once more (a batch resent after its
    /// answer was lost: the first records come back, nothing is written twice).
    StepBatch {
        w: usize,
        picks: Vec<usize>,
        replay: Option<usize>,
        k: u8,
        again: bool,
    },
    /// Worker `w` parks some of its leases waiting for signal `g{sig}`, timing out after
    /// `delay_s` (one `park_many` batch); with `wait`, first recording each job's wait step
    /// (`docket:wait:g{sig}`) as the runtime does — without it a signal cannot wake the job;
    /// `also` sends the signal to the first picked job as well, just before the park (it
    /// arrived while the handler ran) or just after (it arrives while the job is parked).
    Park {
        w: usize,
        picks: Vec<usize>,
        delay_s: i64,
        sig: u8,
        wait: bool,
        also: Also,
    },
    /// Someone sends signal `g{sig}` to `to`.
    Signal { to: SigTarget, sig: u8 },
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
pub fn queue() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 1 => Just(1usize)]
}

pub fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        4 => Just(Key::None),
        1 => (0usize..2).prop_map(Key::Ordering),
        1 => (0usize..2).prop_map(Key::Concurrency),
        1 => (0usize..2).prop_map(Key::Unique),
    ]
}

fn picks() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..8, 1..=3)
}

pub fn fail_kind() -> impl Strategy<Value = FailKind> {
    prop_oneof![
        3 => Just(FailKind::Backoff),
        2 => Just(FailKind::RetryIn),
        1 => Just(FailKind::Discard),
        1 => Just(FailKind::Cancel),
    ]
}

/// Mostly due at once.
pub fn enqueue_delay() -> impl Strategy<Value = i64> {
    prop_oneof![3 => Just(0i64), 1 => Just(40i64)]
}

pub fn snooze_delay() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0i64), Just(40i64)]
}

pub fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        Just(Write::Complete),
        Just(Write::CompleteDelete),
        fail_kind().prop_map(Write::Fail),
        snooze_delay().prop_map(|delay_s| Write::Snooze { delay_s }),
        Just(Write::Release),
        Just(Write::Heartbeat),
        Just(Write::CompleteOutput),
        (0u8..3).prop_map(Write::Step),
        (0u8..2).prop_map(Write::Answer),
    ]
}

fn sig_target() -> impl Strategy<Value = SigTarget> {
    prop_oneof![
        2 => (0usize..16).prop_map(SigTarget::Any),
        4 => (0usize..8).prop_map(SigTarget::Waiting),
        2 => (0usize..8).prop_map(SigTarget::Running),
        1 => Just(SigTarget::Missing),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..=4, 1i32..=3, queue(), -1i16..=1, enqueue_delay())
            .prop_flat_map(|t| (Just(t), key()))
            .prop_map(|((n, max_attempts, queue, priority, delay_s), key)| Op::Enqueue {
                n,
                max_attempts,
                queue,
                priority,
                delay_s,
                key,
            }),
        5 => (0..NW, queue(), 1i32..=4, prop_oneof![2 => Just(false), 1 => Just(true)])
            .prop_map(|(w, queue, limit, starve)| Op::Claim { w, queue, limit, starve }),
        1 => queue().prop_map(|queue| Op::Pause { queue }),
        2 => queue().prop_map(|queue| Op::Resume { queue }),
        1 => (queue(), prop_oneof![Just(None), (1i32..=3).prop_map(Some)])
            .prop_map(|(queue, max)| Op::Limit { queue, max }),
        1 => any::<bool>().prop_map(|keep_long| Op::Prune { keep_long }),
        1 => Just(Op::Sweep),
        4 => (0..NW, picks(), any::<bool>())
            .prop_map(|(w, picks, delete)| Op::Complete { w, picks, delete }),
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
        3 => (0..NW, 0usize..8, prop_oneof![
                2 => Just(Write::CompleteOutput),
                2 => (0u8..3).prop_map(Write::Step),
                1 => (0u8..2).prop_map(Write::Answer),
            ])
            .prop_map(|(w, pick, write)| Op::Own { w, pick, write }),
        3 => (0..NW, picks(), prop::option::of(0usize..32), 0u8..2, any::<bool>())
            .prop_map(|(w, picks, replay, k, again)| Op::StepBatch { w, picks, replay, k, again }),
        5 => (0..NW, picks(), prop_oneof![1 => Just(0i64), 3 => Just(40i64)], 0u8..2,
              prop_oneof![4 => Just(true), 1 => Just(false)], prop_oneof![2 => Just(Also::Nothing), 1 => Just(Also::Before), 1 => Just(Also::After)])
            .prop_map(|(w, picks, delay_s, sig, wait, also)| Op::Park { w, picks, delay_s, sig, wait, also }),
        4 => (sig_target(), 0u8..2).prop_map(|(to, sig)| Op::Signal { to, sig }),
        3 => Just(Op::Advance { big: false }),
        1 => Just(Op::Advance { big: true }),
        3 => prop_oneof![3 => Just(REAP_ALL), 1 => 1i64..=2].prop_map(|batch| Op::Reap { batch }),
        2 => (0usize..16, any::<bool>()).prop_map(|(job, running)| Op::Cancel { job, running }),
        2 => (0usize..16, any::<bool>(), 1i32..=2)
            .prop_map(|(job, finished, extra)| Op::Retry { job, finished, extra }),
    ]
}

/// Fewer than 100 steps: 99 small advances (2475 s) never reach a backoff window (2700 s).
pub fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..MAX_STEPS)
}
