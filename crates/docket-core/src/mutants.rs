//! Deliberately broken variants of Docket, for proving that the test suite can fail.
//!
//! A proof that cannot fail proves nothing. Each [`Mutant`] removes one guarantee — a fence
//! from a SQL statement, a check from the runtime — and `scripts/mutants.sh` runs the tests
//! that claim to prove that guarantee against it; every mutant must make at least one of
//! them fail. A mutant is chosen at run time by the `DOCKET_MUTANT` environment variable
//! (so the script reuses the test binaries already built), but only in builds with the
//! cargo feature `fault-injection`, which only the workspace's tests enable: in any other
//! build [`active`] is a constant `false` and the variable is never read.
//!
//! `DOCKET_NO_WORKER_GUARDS=1` (same feature) switches off the worker's own protections
//! (the lease watchdog and stopping a handler whose lease is lost), so that process-level
//! tests show the database fence holding on its own.

/// One deliberately broken variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// `complete_many` without `attempt = claimed attempt`.
    CompleteNoAttemptCheck,
    /// `complete_many` without its fence (attempt, owner and lease).
    CompleteNoFence,
    /// `complete_many` accepts a success after the lease expired.
    CompleteAfterExpiry,
    /// `complete_delete_many` (completion by delete, the workers' default) without its fence.
    CompleteDeleteNoFence,
    /// `fail_many` without its fence.
    FailNoFence,
    /// `snooze_many` (snooze and release) without its fence.
    SnoozeNoFence,
    /// `heartbeat` without the owner and attempt checks.
    HeartbeatNoFence,
    /// The claim functions lock with `FOR UPDATE` but without `SKIP LOCKED`.
    ClaimNoSkipLocked,
    /// The reaper takes leases that have not expired.
    ReapUnexpired,
    /// The runtime keeps running a handler whose lease was reported lost.
    NoCancelOnLostLease,
    /// The lease watchdog never fires: a worker that cannot renew a lease (cut off from the
    /// database) runs its handler past the lease's local deadline, into its successor's run.
    NoLeaseWatchdog,
    /// The notifier treats a cancel NOTIFY as a command and stops the handler itself.
    NotifyTrusted,
    /// The executor starts a buffered job even though its lease is lost or nearly expired.
    BufferedStartsAfterLost,
    /// The fetcher claims controlled work (limits, keys) into its buffer, beyond its free
    /// run slots.
    ControlledWorkBuffered,
    /// A release (or snooze) is counted as a run: the attempt a handler sees is the fencing
    /// token, not its run.
    ReleaseCountsRun,
    /// The claim waits for the queue's advisory lock (which any role can hold) instead of
    /// giving up on it.
    ClaimWaitsOnPublicLock,
    /// The claim's walk ends at its first pass: a deep backlog of a key out of tokens holds
    /// back the rest of its queue.
    ClaimWalkStopsAtHeldKeys,
    /// `docket grant` leaves the worker role INSERT, UPDATE and DELETE on `jobs`: its members
    /// can write rows past the state machine.
    GrantKeepsJobWrites,
    /// A finishing keyed job whose key's lock is held (by a claim flagging the next job)
    /// records no hand-over: the next job waits for the full key sweep.
    HandoverLost,
    /// A claim of a rate-limited queue spends no tokens: the bucket never empties.
    BucketNeverSpent,
    /// MariaDB: a claim that waited for its queue's limit lock refills the bucket with the
    /// clock it read before waiting.
    ClaimClockBeforeLock,
    /// MariaDB: Docket's connections have no idle-in-transaction bound; a worker partitioned
    /// mid-transaction holds its row locks until the server's `wait_timeout`.
    NoIdleTransactionBound,
    /// PostgreSQL: Docket's own multi-statement transactions carry no idle bound; a leader
    /// partitioned inside a cron schedule's transaction holds the schedule's row until TCP
    /// gives the connection up.
    PgNoIdleTransactionBound,
    /// SQLite and MariaDB (the shared rules): a retryable failure of the last attempt is
    /// retried again instead of ending dead.
    LocalRetryPastBudget,
    /// SQLite and MariaDB: a running job that ends hints no queue whose work a key or a
    /// limit held back; that work waits for the next poll.
    HeldBackNotHinted,
    /// Workflows: a completion refused by its fence still consumes the node's edges — a
    /// stale attempt unblocks children.
    WorkflowStaleUnblocks,
    /// Workflows: a satisfied edge is not marked consumed, so a parent that ends again
    /// (retried, then succeeded) decrements its child a second time.
    WorkflowDoubleDecrement,
    /// Workflows: a parent that ends without success leaves the children of its `cancel`
    /// edges waiting for ever instead of cancelling them.
    WorkflowCancelNotApplied,
    /// Workflows: a spawn is written without the spawning node's fence: a stale attempt adds
    /// nodes to the workflow.
    WorkflowStaleSpawns,
    /// Batches: a callback that already fired is enqueued again when the batch settles
    /// again (a member retried after the batch ended).
    BatchCallbackTwice,
    /// The outbox's mark is applied without its fence: a relay whose lease ran out marks a
    /// message its successor claimed.
    OutboxMarkNoFence,
    /// The relay publishes without `Nats-Msg-Id`: a re-publish after a crash between the
    /// broker's ack and the mark lands in the stream twice.
    OutboxNoMsgId,
    /// The outbox's claim takes every message of a key, not only its oldest unpublished
    /// one: a key's messages are published side by side and may reach the stream out of
    /// order.
    OutboxKeyPipelined,
    /// The JetStream source writes a job's outcome after its delivery ran out: a worker
    /// paused past `ack_wait` acks (or naks) a job its successor is running.
    SourceWritesWhenLost,
    /// The JetStream source sends no in-progress acks: a job running longer than `ack_wait`
    /// is delivered to a second worker while the first still runs it.
    SourceNoBeat,
    /// The JetStream source terminates a dead job without its dead-letter copy: the job and
    /// its error are gone.
    SourceNoDeadLetter,
    /// A completion with an output is applied without its fence: a stale attempt records
    /// its output over its successor's run.
    OutputStaleCompletion,
    /// Progress is written without its fence: a stale attempt's report lands on its
    /// successor's run.
    ProgressStaleAttempt,
    /// A step is recorded without the claim's check: a stale attempt's step is kept and a
    /// later run skips work nobody recorded under the claim.
    StepNoFence,
    /// A wait does not keep its answer: a run after a timed-out wait (a retry) reads a
    /// signal that came later, and the one park resumes twice with two answers.
    SignalAnswerNotKept,
    /// A signal wakes its job whatever the job waits for: a job parked on another signal
    /// (or its timeout) runs early.
    SignalWakesAny,
    /// A park is applied without its fence: a stale attempt puts its successor's running
    /// job back to sleep and gives its budget back.
    ParkNoFence,
    /// A transaction-mode pooler Docket did not recognise is never detected from the error
    /// it causes: every command after the first fails with `sqlx_s_1 already exists`.
    PoolerNotDetected,
    /// The dashboard's bulk actions act on the first post, without the confirmation that
    /// names how many jobs they touch.
    BulkUnconfirmed,
    /// The database gauges keep a series for every queue ever seen, at 0 once it vanished
    /// (the old recorder's way): an alert on a vanished queue never resolves.
    GaugesKeepVanished,
    /// SQLite and MariaDB (the shared rules): the depth sample counts every job as enqueued
    /// since the previous sample, not only those above its high-water mark.
    DepthCountsEveryJob,
    /// PostgreSQL: a hinted claim starts *after* the hint's position instead of at it, so the
    /// jobs sharing the run_at of the last one it took (one enqueue's) are skipped.
    ClaimHintStrict,
    /// PostgreSQL: claims under a held horizon ignore the hint and walk from the head.
    ClaimHintIgnored,
    /// PostgreSQL: the probe behind the hint finds nothing: a job that became ready before
    /// the hint waits until the hinting ends.
    ClaimProbeBlind,
    /// PostgreSQL: the outbox's mark joins on the id alone, without `o.id = ANY (p_ids)`:
    /// planned on statistics that say the outbox is empty it walks the whole primary key.
    OutboxMarkWalks,
}

impl Mutant {
    /// Every mutant, in the order of the script's table.
    pub const ALL: &'static [Mutant] = &[
        Mutant::CompleteNoAttemptCheck,
        Mutant::CompleteNoFence,
        Mutant::CompleteAfterExpiry,
        Mutant::CompleteDeleteNoFence,
        Mutant::FailNoFence,
        Mutant::SnoozeNoFence,
        Mutant::HeartbeatNoFence,
        Mutant::ClaimNoSkipLocked,
        Mutant::ReapUnexpired,
        Mutant::NoCancelOnLostLease,
        Mutant::NoLeaseWatchdog,
        Mutant::NotifyTrusted,
        Mutant::BufferedStartsAfterLost,
        Mutant::ControlledWorkBuffered,
        Mutant::ReleaseCountsRun,
        Mutant::ClaimWaitsOnPublicLock,
        Mutant::ClaimWalkStopsAtHeldKeys,
        Mutant::GrantKeepsJobWrites,
        Mutant::HandoverLost,
        Mutant::BucketNeverSpent,
        Mutant::ClaimClockBeforeLock,
        Mutant::NoIdleTransactionBound,
        Mutant::PgNoIdleTransactionBound,
        Mutant::LocalRetryPastBudget,
        Mutant::HeldBackNotHinted,
        Mutant::WorkflowStaleUnblocks,
        Mutant::WorkflowDoubleDecrement,
        Mutant::WorkflowCancelNotApplied,
        Mutant::WorkflowStaleSpawns,
        Mutant::BatchCallbackTwice,
        Mutant::OutboxMarkNoFence,
        Mutant::OutboxNoMsgId,
        Mutant::OutboxKeyPipelined,
        Mutant::SourceWritesWhenLost,
        Mutant::SourceNoBeat,
        Mutant::SourceNoDeadLetter,
        Mutant::OutputStaleCompletion,
        Mutant::ProgressStaleAttempt,
        Mutant::StepNoFence,
        Mutant::SignalAnswerNotKept,
        Mutant::SignalWakesAny,
        Mutant::ParkNoFence,
        Mutant::PoolerNotDetected,
        Mutant::BulkUnconfirmed,
        Mutant::GaugesKeepVanished,
        Mutant::DepthCountsEveryJob,
        Mutant::ClaimHintStrict,
        Mutant::ClaimHintIgnored,
        Mutant::ClaimProbeBlind,
        Mutant::OutboxMarkWalks,
    ];

    /// The name `DOCKET_MUTANT` takes.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::CompleteNoAttemptCheck => "complete_no_attempt_check",
            Mutant::CompleteNoFence => "complete_no_fence",
            Mutant::CompleteAfterExpiry => "complete_after_expiry",
            Mutant::CompleteDeleteNoFence => "complete_delete_no_fence",
            Mutant::FailNoFence => "fail_no_fence",
            Mutant::SnoozeNoFence => "snooze_no_fence",
            Mutant::HeartbeatNoFence => "heartbeat_no_fence",
            Mutant::ClaimNoSkipLocked => "claim_no_skip_locked",
            Mutant::ReapUnexpired => "reap_unexpired",
            Mutant::NoCancelOnLostLease => "no_cancel_on_lost_lease",
            Mutant::NoLeaseWatchdog => "no_lease_watchdog",
            Mutant::NotifyTrusted => "notify_trusted",
            Mutant::BufferedStartsAfterLost => "buffered_starts_after_lost",
            Mutant::ControlledWorkBuffered => "controlled_work_buffered",
            Mutant::ReleaseCountsRun => "release_counts_run",
            Mutant::ClaimWaitsOnPublicLock => "claim_waits_on_public_lock",
            Mutant::ClaimWalkStopsAtHeldKeys => "claim_walk_stops_at_held_keys",
            Mutant::GrantKeepsJobWrites => "grant_keeps_job_writes",
            Mutant::HandoverLost => "handover_lost",
            Mutant::BucketNeverSpent => "bucket_never_spent",
            Mutant::ClaimClockBeforeLock => "claim_clock_before_lock",
            Mutant::NoIdleTransactionBound => "no_idle_transaction_bound",
            Mutant::PgNoIdleTransactionBound => "pg_no_idle_transaction_bound",
            Mutant::LocalRetryPastBudget => "local_retry_past_budget",
            Mutant::HeldBackNotHinted => "held_back_not_hinted",
            Mutant::WorkflowStaleUnblocks => "workflow_stale_unblocks",
            Mutant::WorkflowDoubleDecrement => "workflow_double_decrement",
            Mutant::WorkflowCancelNotApplied => "workflow_cancel_not_applied",
            Mutant::WorkflowStaleSpawns => "workflow_stale_spawns",
            Mutant::BatchCallbackTwice => "batch_callback_twice",
            Mutant::OutboxMarkNoFence => "outbox_mark_no_fence",
            Mutant::OutboxNoMsgId => "outbox_no_msg_id",
            Mutant::OutboxKeyPipelined => "outbox_key_pipelined",
            Mutant::SourceWritesWhenLost => "source_writes_when_lost",
            Mutant::SourceNoBeat => "source_no_beat",
            Mutant::SourceNoDeadLetter => "source_no_dead_letter",
            Mutant::OutputStaleCompletion => "output_stale_completion",
            Mutant::ProgressStaleAttempt => "progress_stale_attempt",
            Mutant::StepNoFence => "step_no_fence",
            Mutant::SignalAnswerNotKept => "signal_answer_not_kept",
            Mutant::SignalWakesAny => "signal_wakes_any",
            Mutant::ParkNoFence => "park_no_fence",
            Mutant::PoolerNotDetected => "pooler_not_detected",
            Mutant::BulkUnconfirmed => "bulk_unconfirmed",
            Mutant::GaugesKeepVanished => "gauges_keep_vanished",
            Mutant::DepthCountsEveryJob => "depth_counts_every_job",
            Mutant::ClaimHintStrict => "claim_hint_strict",
            Mutant::ClaimHintIgnored => "claim_hint_ignored",
            Mutant::OutboxMarkWalks => "outbox_mark_walks",
            Mutant::ClaimProbeBlind => "claim_probe_blind",
        }
    }

    /// Text replacements `(function, from, to)` applied to the definitions of the schema's
    /// SQL functions (after migrating, in the test's own schema): the fenced writes and the
    /// claim live in functions (migration 0016), where every role's write must pass.
    /// `docket-postgres`'s unit tests check that each `from` occurs in the function's current
    /// definition (`schema/current.sql`), so a reworded function cannot disarm a mutant.
    pub fn function_edits(self) -> &'static [(&'static str, &'static str, &'static str)] {
        const FENCE: &str =
            "AND j.lease_owner = p_owner\n      AND j.lease_expires_at > statement_timestamp()";
        match self {
            Mutant::CompleteNoAttemptCheck => {
                &[("complete_fenced", "AND j.attempt = c.attempt", "")]
            }
            Mutant::CompleteNoFence => &[
                ("complete_fenced", "AND j.attempt = c.attempt", ""),
                ("complete_fenced", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::CompleteAfterExpiry => &[(
                "complete_fenced",
                "AND j.lease_expires_at > statement_timestamp()",
                "",
            )],
            Mutant::CompleteDeleteNoFence => &[
                ("complete_delete_fenced", "AND j.attempt = c.attempt", ""),
                ("complete_delete_fenced", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::FailNoFence => &[
                ("fail_fenced", "AND j.attempt = f.attempt", ""),
                ("fail_fenced", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::SnoozeNoFence => &[
                ("snooze_fenced", "AND j.attempt = s.attempt", ""),
                ("snooze_fenced", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::HeartbeatNoFence => &[
                ("heartbeat_fenced", "AND j.attempt = c.attempt", ""),
                (
                    "heartbeat_fenced",
                    "AND j.lease_owner = p_owner\n",
                    "AND j.state = 'running'\n",
                ),
            ],
            Mutant::ReapUnexpired => &[(
                "reap_expired",
                "lease_expires_at < now()",
                "lease_expires_at < now() + interval '1 hour'",
            )],
            Mutant::ClaimNoSkipLocked => &[
                ("claim", "SKIP LOCKED", ""),
                ("claim_controlled", "SKIP LOCKED", ""),
            ],
            Mutant::ClaimWaitsOnPublicLock => &[(
                "claim",
                "IF NOT lock_briefly(lock_space('queue'), hashtext(p_queue), true, 50) THEN RETURN; END IF;",
                "PERFORM pg_advisory_xact_lock_shared(lock_space('queue'), hashtext(p_queue));",
            )],
            Mutant::OutboxMarkWalks => &[("outbox_mark", "AND o.id = ANY (p_ids)", "")],
            Mutant::ClaimHintStrict => &[(
                "claim",
                "AND (priority, run_at) >= ($8, $9)",
                "AND (priority, run_at) > ($8, $9)",
            )],
            Mutant::ClaimWalkStopsAtHeldKeys => {
                &[("claim_controlled", "OR new_rated = 0 OR", "OR true OR")]
            }
            Mutant::OutputStaleCompletion => &[
                ("complete_output_fenced", "AND j.attempt = c.attempt", ""),
                ("complete_output_fenced", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::ProgressStaleAttempt => &[
                ("progress_fenced", "AND j.attempt = c.attempt", ""),
                ("progress_fenced", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::StepNoFence => &[
                ("record_steps", " AND h.attempt = s.attempt", ""),
                ("record_steps", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::ParkNoFence => &[
                ("park_fenced", "AND j.attempt = s.attempt", ""),
                ("park_fenced", FENCE, "AND j.state = 'running'"),
            ],
            Mutant::SignalWakesAny => &[(
                "signal",
                "AND EXISTS (SELECT 1 FROM job_steps AS s WHERE s.job_id = p_id AND s.name = 'docket:wait:' || p_name)",
                "",
            )],
            // Both branches (ordering and concurrency keys): the edit replaces every match.
            Mutant::HandoverLost => &[(
                "jobs_release_keys",
                "IF NOT v_done THEN",
                "IF false THEN",
            )],
            Mutant::BucketNeverSpent => &[(
                "claim_controlled",
                "UPDATE queues SET tokens = queue_tokens - n,",
                "UPDATE queues SET tokens = queue_tokens,",
            )],
            Mutant::WorkflowStaleUnblocks => &[(
                "complete_nodes_fenced",
                "WHERE d.parent_id = ANY (v_done) AND d.state = 'waiting'",
                "WHERE d.parent_id = ANY (p_ids) AND d.state = 'waiting'",
            )],
            Mutant::WorkflowDoubleDecrement => &[(
                "workflow_resolve",
                "UPDATE job_deps SET state = 'satisfied'",
                "UPDATE job_deps SET state = 'waiting'",
            )],
            Mutant::WorkflowCancelNotApplied => &[(
                "workflow_resolve",
                "ELSIF e.on_failure = 'cancel' THEN",
                "ELSIF false THEN",
            )],
            Mutant::WorkflowStaleSpawns => &[
                (
                    "spawn_nodes",
                    "WHERE j.id = p_id AND j.attempt = p_attempt",
                    "WHERE j.id = p_id",
                ),
                ("spawn_nodes", FENCE, "true"),
            ],
            Mutant::BatchCallbackTwice => &[(
                "batch_settle",
                "ELSE w.on_success_job END IS NOT NULL;",
                "ELSE w.on_success_job END IS NOT NULL AND false;",
            )],
            Mutant::OutboxMarkNoFence => &[("outbox_mark", "AND o.attempt = m.attempt", "")],
            Mutant::OutboxKeyPipelined => &[(
                "outbox_claim",
                "WHERE k.turn = 1 AND",
                "WHERE k.turn >= 1 AND",
            )],
            _ => &[],
        }
    }

    /// The mutant named `name`.
    pub fn from_name(name: &str) -> Option<Mutant> {
        Mutant::ALL.iter().copied().find(|m| m.name() == name)
    }
}

/// True when this build is the mutant `m`.
#[inline]
pub fn active(m: Mutant) -> bool {
    current() == Some(m)
}

/// The mutant this process runs as, if any (read once).
#[cfg(feature = "fault-injection")]
pub fn current() -> Option<Mutant> {
    static CURRENT: std::sync::OnceLock<Option<Mutant>> = std::sync::OnceLock::new();
    *CURRENT.get_or_init(|| {
        let name = std::env::var("DOCKET_MUTANT").ok()?;
        let name = name.trim();
        if name.is_empty() {
            return None;
        }
        Some(
            Mutant::from_name(name)
                .unwrap_or_else(|| panic!("DOCKET_MUTANT: no mutant named {name:?}")),
        )
    })
}

/// The mutant this process runs as: never, in a build without `fault-injection`.
#[cfg(not(feature = "fault-injection"))]
#[inline]
pub const fn current() -> Option<Mutant> {
    None
}

/// True when the worker's own lease guards are switched off (`DOCKET_NO_WORKER_GUARDS=1`,
/// `fault-injection` builds only).
#[cfg(feature = "fault-injection")]
pub fn no_worker_guards() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var("DOCKET_NO_WORKER_GUARDS").is_ok_and(|v| v == "1"))
}

/// Never, in a build without `fault-injection`.
#[cfg(not(feature = "fault-injection"))]
#[inline]
pub const fn no_worker_guards() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Mutant::ALL {
            assert_eq!(Mutant::from_name(m.name()), Some(*m));
        }
        assert_eq!(Mutant::from_name("nothing"), None);
    }
}
