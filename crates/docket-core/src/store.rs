//! The storage seam: one method per queue operation.
//!
//! The runtime (fetcher, completer, heartbeater, reaper, pruner) talks only to this trait, so
//! another engine can be added by implementing it and running the same conformance tests.
//! Every write after a claim is fenced on the claim's [`Lease`] (id + attempt) *and* the
//! claiming `owner`, and reports what it could not apply as [`crate::LeaseLost`].

use std::future::Future;
use std::time::Duration;

use crate::control::*;
use crate::engine::{ListenSupport, Listener};
use crate::inspect::*;
use crate::job::*;
use crate::periodic::*;
use crate::Result;

/// A claim request: up to `limit` ready jobs of one queue for `owner`, leased for `lease`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The queue to claim from (claims are per queue so each uses its index order).
    pub queue: String,
    /// Batch size; the runtime sizes it to its free slots.
    pub limit: i32,
    /// This worker's identity (unique per process start).
    pub owner: String,
    /// Lease length, added to the database's `now()`.
    pub lease: Duration,
    /// Fairness: jobs ready for longer than this are claimed first, oldest first, whatever
    /// their priority. `None` claims in strict priority order (a steady stream of urgent
    /// work can then starve the rest).
    pub starvation: Option<Duration>,
    /// At most this many of the claimed jobs may be *controlled*: in a queue with a
    /// `max_running` or a rate, or carrying an ordering or concurrency key — jobs that hold a
    /// limit (or their key's turn) from the moment they are `running`. The runtime passes its
    /// free run slots, so such work is claimed only to start at once, never to wait in its
    /// prefetch buffer where it would hold a limit another worker could use. `None`: no
    /// separate bound (a caller that runs everything it claims at once).
    pub controlled: Option<i32>,
}

/// Engine-independent queue operations.
pub trait Store: Clone + Send + Sync + 'static {
    /// The engine's stream of pushed hints ([`crate::NoListener`] for an engine without).
    type Listener: Listener;

    // ---- The engine itself ----

    /// Creates or upgrades the schema (idempotent; safe to race from several processes).
    fn migrate(&self) -> impl Future<Output = Result<()>> + Send;

    /// Takes or renews maintenance leadership for `owner` until the database's now + `ttl`;
    /// true while `owner` leads. At most one owner leads at any database instant.
    fn leader_try(&self, owner: &str, ttl: Duration) -> impl Future<Output = Result<bool>> + Send;

    /// Gives up leadership held by `owner` (another worker takes over at once).
    fn leader_resign(&self, owner: &str) -> impl Future<Output = Result<()>> + Send;

    /// Whether [`Store::listen`] works here. `direct_url` is an address for the listening
    /// connection when the store's own cannot hold one (behind a transaction-mode pooler).
    fn listen_support(&self, direct_url: Option<&str>) -> ListenSupport;

    /// Opens a listener for wake-ups and cancel hints.
    fn listen(
        &self,
        direct_url: Option<&str>,
    ) -> impl Future<Output = Result<Self::Listener>> + Send;

    // ---- Queue operations ----

    /// Inserts one job (or returns the holder of its unique key).
    fn enqueue(&self, job: &NewJob) -> impl Future<Output = Result<Enqueued>> + Send;

    /// Inserts many jobs in one round trip; results in input order.
    fn enqueue_many(&self, jobs: &[NewJob]) -> impl Future<Output = Result<Vec<Enqueued>>> + Send;

    /// Atomically claims up to `limit` ready jobs and commits at once.
    fn claim(&self, req: &ClaimRequest) -> impl Future<Output = Result<Vec<ClaimedJob>>> + Send;

    /// Marks claimed jobs succeeded (fenced).
    fn complete_many(
        &self,
        owner: &str,
        leases: &[Lease],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Marks claimed jobs succeeded with their handlers' outputs (fenced exactly as
    /// [`Store::complete_many`]: a stale attempt records nothing). The rows are kept, not
    /// deleted, so each output stays readable until [`crate::Retention::outputs`] past its
    /// finish; callers check each output first ([`crate::output::check`]) and the engine
    /// refuses one over [`crate::output::MAX_OUTPUT_BYTES`]. Listeners of
    /// [`Store::listen_outputs`] hear [`crate::Wake::Done`] for each.
    fn complete_outputs(
        &self,
        owner: &str,
        outputs: &[crate::Output],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Completes claimed workflow nodes (fenced exactly as [`Store::complete_many`]), each
    /// with its output if it has one, keeping their rows; in the same transaction as each
    /// node's completion, every edge to its children is consumed once and a child whose
    /// last parent this was becomes claimable. The runtime sends every job carrying
    /// [`crate::workflow::MARKER`] here. (PostgreSQL applies the same rule whichever
    /// completion ends a node; SQLite and MariaDB only here.)
    fn complete_nodes(
        &self,
        owner: &str,
        nodes: &[crate::NodeDone],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Enqueues a workflow atomically: every node's job and every edge, or nothing. Nodes
    /// without parents are pending at once; the rest `waiting`. The graph is checked first
    /// ([`crate::workflow::Graph::validate`]): a refused graph writes nothing.
    fn enqueue_workflow(
        &self,
        graph: &crate::workflow::Graph,
    ) -> impl Future<Output = Result<crate::WorkflowEnqueued>> + Send;

    /// The newest `limit` workflows (1..=1000), newest first, with their nodes' counts —
    /// graphs only: batches, stored as workflows, are listed by [`Store::batches`].
    fn workflows(
        &self,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<crate::workflow::WorkflowSummary>>> + Send;

    /// One workflow: its nodes and edges. `NotFound` names the workflow's id as a job id.
    fn workflow(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<crate::workflow::WorkflowDetail>> + Send;

    /// Cancels every unfinished node of workflow `id`, parents first (a waiting or pending
    /// node ends cancelled, its dependents follow their policies; a running one is asked to
    /// stop); returns how many nodes the cancel reached. Nodes that ended meanwhile are
    /// skipped.
    fn cancel_workflow(&self, id: i64) -> impl Future<Output = Result<u64>> + Send {
        async move {
            let w = self.workflow(id).await?;
            let mut n = 0;
            for i in topological(&w) {
                let node = &w.nodes[i];
                if matches!(
                    node.state,
                    JobState::Waiting | JobState::Pending | JobState::Running
                ) {
                    match self.cancel(node.id).await {
                        Ok(_) => n += 1,
                        Err(crate::StoreError::WrongState { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok(n)
        }
    }

    /// Retries every dead or cancelled node of workflow `id`, parents first: each waits
    /// again for what is unfinished above it (see [`Store::retry`]). Returns how many.
    fn retry_workflow(&self, id: i64) -> impl Future<Output = Result<u64>> + Send {
        async move {
            let w = self.workflow(id).await?;
            let mut n = 0;
            for i in topological(&w) {
                let node = &w.nodes[i];
                if matches!(node.state, JobState::Dead | JobState::Cancelled) {
                    match self.retry(node.id, 1).await {
                        Ok(_) => n += 1,
                        Err(crate::StoreError::WrongState { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok(n)
        }
    }

    /// Adds `graph` to the workflow of the running node `lease` (fenced exactly as a step:
    /// same attempt, same owner, lease unexpired): every root of the graph runs after that
    /// node, and the node's dependents still waiting wait for every sink of the graph too.
    /// Once per `step` name (1 to 115 bytes): the spawn is recorded as the node's step
    /// `docket:spawn:<step>`, so a later run of the node gets the same jobs back instead of
    /// spawning again. `LeaseLost` (nothing written) when the claim no longer holds; refused
    /// for a job outside a workflow and for a name its workflow already has.
    fn spawn_nodes(
        &self,
        owner: &str,
        lease: Lease,
        step: &str,
        graph: &crate::workflow::Graph,
    ) -> impl Future<Output = Result<crate::WorkflowEnqueued>> + Send;

    /// An operator's skip of a held edge: `parent` ended dead or cancelled (or was pruned
    /// after it did) and the edge to `child`, on the `hold` policy, still waits. The edge is
    /// satisfied now, once, and the child runs when its other parents allow; returns the
    /// child. Refused, writing nothing, for no such edge, an edge already consumed, or a
    /// parent not ended (`WrongState` naming it).
    fn skip_edge(
        &self,
        parent: JobId,
        child: JobId,
    ) -> impl Future<Output = Result<JobRecord>> + Send;

    /// Opens a batch atomically: its row, its first members (pending at once, nodes `#1`,
    /// `#2`, … of the batch's workflow) and, unless the spec keeps it open, its close. The
    /// spec is checked first ([`crate::batches::BatchSpec::validate`]); a refused batch
    /// writes nothing. Once closed and every member has ended, each callback whose occasion
    /// holds is enqueued in the transaction that ended the last member — at most once each.
    fn open_batch(
        &self,
        spec: &crate::batches::BatchSpec,
    ) -> impl Future<Output = Result<crate::batches::BatchOpened>> + Send;

    /// Adds members to open batch `id`, atomically; refused (nothing written) once it is
    /// closed, past [`crate::batches::MAX_MEMBERS`], or for a workflow that is not a batch.
    fn add_to_batch(
        &self,
        id: i64,
        jobs: &[crate::batches::JobSpec],
    ) -> impl Future<Output = Result<Vec<JobId>>> + Send;

    /// Closes batch `id` (again: nothing changes); when every member has already ended its
    /// callbacks are enqueued now. Returns the batch as it stands after.
    fn close_batch(
        &self,
        id: i64,
    ) -> impl Future<Output = Result<crate::batches::BatchStatus>> + Send;

    /// One batch. `NotFound` names its id as a job id; a workflow that is not a batch is
    /// refused.
    fn batch(&self, id: i64) -> impl Future<Output = Result<crate::batches::BatchStatus>> + Send;

    /// The newest `limit` batches (1..=1000), newest first.
    fn batches(
        &self,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<crate::batches::BatchStatus>>> + Send;

    // ---- the transactional outbox (crate::outbox, docs/outbox.md) ----

    /// Writes a message to the outbox in a transaction of its own; its id. Checked first
    /// ([`crate::outbox::NewMessage::validate`]); nothing is written when refused.
    fn publish(&self, msg: &crate::outbox::NewMessage) -> impl Future<Output = Result<i64>> + Send;

    /// The outbox's origin: random, made with its table, the first part of every
    /// de-duplication id ([`crate::outbox::message_id`]), so two databases publishing to one
    /// stream never share an id.
    fn outbox_origin(&self) -> impl Future<Output = Result<String>> + Send;

    /// Claims up to `limit` (1..=1000) unpublished messages for `relay`, leased for
    /// `lease`, oldest first: unkeyed ones and each key's oldest unpublished one, whose
    /// lease (or retry delay) ran out. Each claim adds one to the message's attempt.
    fn outbox_claim(
        &self,
        relay: &str,
        limit: i64,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<crate::outbox::OutboxMessage>>> + Send;

    /// Marks acknowledged publishes published, fenced: a message another claim took since
    /// (a higher attempt) or already marked is left alone. How many were marked.
    fn outbox_mark(
        &self,
        done: &[crate::outbox::Published],
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Records a failed publish of message `id` under `attempt` (fenced) and holds it back
    /// for `retry_in`; false when another claim owns it now or it was published.
    fn outbox_fail(
        &self,
        id: i64,
        attempt: i32,
        error: &str,
        retry_in: Duration,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Counts for operators and metrics.
    fn outbox_stats(&self) -> impl Future<Output = Result<crate::outbox::OutboxStats>> + Send;

    /// Up to `limit` (1..=1000) messages in `state`: unpublished and failing ones oldest
    /// first, published ones newest first.
    fn outbox_list(
        &self,
        state: crate::outbox::OutboxState,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<crate::outbox::OutboxRow>>> + Send;

    /// Deletes up to `limit` messages published longer than `retention` ago; how many.
    fn prune_outbox(
        &self,
        retention: Duration,
        limit: i64,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// A job's parents in its workflow: name, state and output (empty for a plain job).
    fn dep_outputs(&self, id: JobId) -> impl Future<Output = Result<Vec<crate::DepOutput>>> + Send;

    /// Completes claimed jobs by deleting them (fenced exactly as [`Store::complete_many`]):
    /// the success is the row's disappearance, with nothing kept for history. A deleted row
    /// writes no new row version and no index entry, which is why a worker that does not keep
    /// succeeded jobs (`WorkerConfig::keep_succeeded`, off by default) drains faster. A keyed
    /// job releases its ordering and concurrency keys as a succeeded one does.
    fn complete_delete_many(
        &self,
        owner: &str,
        leases: &[Lease],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Records failures (fenced): retry with backoff, dead, or cancelled by class.
    fn fail_many(
        &self,
        owner: &str,
        failures: &[Failure],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Re-schedules claimed jobs without consuming their retry budget (fenced).
    fn snooze_many(
        &self,
        owner: &str,
        snoozes: &[Snooze],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Extends leases to `now() + lease` (fenced).
    fn heartbeat(
        &self,
        owner: &str,
        leases: &[Lease],
        lease: Duration,
    ) -> impl Future<Output = Result<HeartbeatOutcome>> + Send;

    /// Records steps of jobs `owner` holds, in one transaction with the fence (attempt,
    /// owner, unexpired lease; each job's row locked until it commits): results in input
    /// order, a [`crate::LeaseLost`] for a step whose claim no longer holds, and nothing
    /// written for it. When a job already has a step of that name, nothing is written and the
    /// recorded output comes back (`written: false`). Every name and output is checked
    /// first ([`crate::steps::check_writes`]); one bad step fails the call and writes nothing.
    /// One statement for many steps is why a worker's running jobs share a round trip.
    fn record_steps(
        &self,
        owner: &str,
        steps: &[crate::StepWrite],
    ) -> impl Future<Output = Result<Vec<std::result::Result<crate::StepRecorded, crate::LeaseLost>>>>
           + Send;

    /// [`Store::record_steps`] for one step: a [`crate::StoreError::LeaseLost`] when the
    /// claim no longer holds.
    fn record_step(
        &self,
        owner: &str,
        lease: Lease,
        name: &str,
        output: &serde_json::Value,
    ) -> impl Future<Output = Result<crate::StepRecorded>> + Send {
        let step = crate::StepWrite {
            lease,
            name: name.to_owned(),
            output: output.clone(),
        };
        async move {
            match self
                .record_steps(owner, std::slice::from_ref(&step))
                .await?
                .pop()
            {
                Some(Ok(r)) => Ok(r),
                Some(Err(lost)) => Err(lost.into()),
                None => Err(crate::StoreError::Database(
                    "the engine returned no result for the step it recorded".into(),
                )),
            }
        }
    }

    /// The steps job `id` has recorded, oldest first (empty for a job without, or one that
    /// no longer exists).
    fn job_steps(&self, id: JobId) -> impl Future<Output = Result<Vec<crate::StepRecord>>> + Send;

    /// Parks claimed jobs waiting for a signal (fenced as [`Store::snooze_many`], the budget
    /// given back the same way): pending until `delay` has passed, or at once when the
    /// signal has already arrived. The park and [`Store::signal`] lock the job's row first,
    /// so one of them always sees the other.
    fn park_many(
        &self,
        owner: &str,
        parks: &[crate::Park],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Sends signal `name` with `payload` to job `id`: kept until its wait reads it (sent
    /// before the wait, it is found at once); a repeat of (job, name) changes nothing; a job
    /// parked waiting for it is woken. `NotFound` for a missing job and `WrongState` for a
    /// finished one, with nothing written.
    fn signal(
        &self,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> impl Future<Output = Result<crate::SignalSent>> + Send;

    /// The payload of signal `name` sent to job `id`, if one was.
    fn job_signal(
        &self,
        id: JobId,
        name: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Value>>> + Send;

    /// Records running jobs' progress (fenced as [`Store::heartbeat`]: a stale attempt
    /// writes nothing; the lease is not extended). Reports are checked first
    /// ([`crate::progress::check`]); an invalid one fails the batch and writes nothing.
    fn progress_many(
        &self,
        owner: &str,
        reports: &[crate::Progress],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Gives back claimed jobs that were never started or were interrupted by shutdown:
    /// pending again at once, and the attempt does not count against the budget (fenced).
    fn release_many(
        &self,
        owner: &str,
        leases: &[Lease],
    ) -> impl Future<Output = Result<BatchOutcome>> + Send;

    /// Returns up to `batch` expired leases to the queue (or to dead when exhausted).
    fn reap(&self, batch: i64) -> impl Future<Output = Result<ReapReport>> + Send;

    /// Deletes finished jobs past their retention, in bounded batches.
    fn prune(&self, retention: &Retention) -> impl Future<Output = Result<PruneReport>> + Send;

    /// Replays a dead or cancelled job with `extra_attempts` more claims, keeping id and history.
    fn retry(
        &self,
        id: JobId,
        extra_attempts: i32,
    ) -> impl Future<Output = Result<JobRecord>> + Send;

    /// Cancels a pending job, or requests cancellation of a running one.
    fn cancel(&self, id: JobId) -> impl Future<Output = Result<CancelOutcome>> + Send;

    /// Reads one job.
    fn get(&self, id: JobId) -> impl Future<Output = Result<JobRecord>> + Send;

    /// Reads a job's state and output (kept apart from [`Store::get`], whose pages would
    /// otherwise carry every output). `NotFound` when the job does not exist, or no longer:
    /// a plain success deleted on completion, or an output past its retention.
    fn job_output(&self, id: JobId) -> impl Future<Output = Result<crate::JobOutput>> + Send;

    /// Opens a listener that hears [`crate::Wake::Done`] when a job completes with an
    /// output (for [`Store::job_output`]'s waiters). Hints only: a waiter reads the row.
    fn listen_outputs(
        &self,
        direct_url: Option<&str>,
    ) -> impl Future<Output = Result<Self::Listener>> + Send;

    /// Reports worker `beat.owner` alive until the database's now + `ttl`.
    fn worker_beat(
        &self,
        beat: &crate::WorkerBeat,
        ttl: Duration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Removes worker `owner` from the registry (it is stopping).
    fn worker_gone(&self, owner: &str) -> impl Future<Output = Result<()>> + Send;

    /// Live workers, oldest first.
    fn workers(&self) -> impl Future<Output = Result<Vec<crate::WorkerInfo>>> + Send;

    /// Live workers and those gone (stopped or expired) within `window`, and the
    /// leadership's lease even when its holder is gone: "which worker is dead?".
    fn registry(
        &self,
        window: std::time::Duration,
    ) -> impl Future<Output = Result<crate::workers::Registry>> + Send;

    /// Every gate that holds job `id` now, by the claim's own rules (not found: `NotFound`).
    fn why(&self, id: JobId) -> impl Future<Output = Result<crate::WhyReport>> + Send;

    // ---- Operators: bounded reads, bulk actions, throughput samples, audit ----

    /// One keyset page of jobs matching `query`, newest first.
    fn search(&self, query: &JobQuery) -> impl Future<Output = Result<JobPage>> + Send;

    /// Every known queue at a glance; counts stop at `cap` (and say so).
    fn overview(&self, cap: i64) -> impl Future<Output = Result<Overview>> + Send;

    /// Per queue, what the overview leaves out: retrying jobs, the oldest running job's age,
    /// blocked jobs by reason (`crate::health`). At most `cap` retrying and `cap` blocked
    /// jobs are read over all queues (and `*_more` says so).
    fn queue_health(
        &self,
        cap: i64,
    ) -> impl Future<Output = Result<Vec<crate::QueueHealth>>> + Send;

    /// The leader's per-minute sample of every queue's depth and of the jobs enqueued since
    /// the previous sample (idempotent within a minute; rows older than two days go).
    /// Waiting counts stop at `cap` per queue.
    fn sample_depth(&self, cap: i64) -> impl Future<Output = Result<()>> + Send;

    /// The depth samples of the last `window` (at most two days), oldest first; the row of
    /// the whole database has the queue `""`.
    fn depth_history(
        &self,
        window: Duration,
    ) -> impl Future<Output = Result<Vec<crate::DepthSample>>> + Send;

    /// Dead jobs grouped by kind and last error (of the most recent ones), largest first.
    fn dead_groups(&self, limit: i64) -> impl Future<Output = Result<Vec<DeadGroup>>> + Send;

    /// The newest errored jobs: up to `per_state` dead ones (by when they died) and up to
    /// `per_state` retrying ones (pending with an error history, newest first), with the
    /// first and last entries of their histories — what [`crate::error_groups::group`]
    /// groups for the errors page. Bounded reads: an index walk each, never a count.
    fn errored_jobs(
        &self,
        per_state: i64,
    ) -> impl Future<Output = Result<Vec<crate::ErroredJob>>> + Send;

    /// Makes a pending job scheduled for later due now (attempt and budget untouched).
    fn run_now(&self, id: JobId) -> impl Future<Output = Result<JobRecord>> + Send;

    /// Applies `action` to each of `ids` (at most [`crate::inspect::MAX_PAGE`]) with the
    /// single-job operation's own semantics; ids in a state the action leaves alone are
    /// counted as skipped. An engine may override it with one set-based statement.
    fn bulk(
        &self,
        ids: &[JobId],
        action: BulkAction,
    ) -> impl Future<Output = Result<BulkReport>> + Send {
        async move {
            if ids.len() as i64 > crate::inspect::MAX_PAGE {
                return Err(crate::ValidationError::Other {
                    what: "bulk action",
                    reason: format!("{} ids, over {}", ids.len(), crate::inspect::MAX_PAGE),
                }
                .into());
            }
            let mut report = BulkReport::default();
            for &id in ids {
                let r = match action {
                    BulkAction::Retry => match self.retry(id, 1).await {
                        Err(crate::StoreError::WrongState {
                            state: JobState::Pending,
                            ..
                        }) => self.run_now(id).await.map(|_| ()),
                        other => other.map(|_| ()),
                    },
                    BulkAction::Cancel => self.cancel(id).await.map(|_| ()),
                };
                match r {
                    Ok(()) => report.changed += 1,
                    Err(
                        crate::StoreError::WrongState { .. }
                        | crate::StoreError::NotFound(_)
                        | crate::StoreError::UniqueConflict { .. },
                    ) => report.skipped += 1,
                    Err(e) => return Err(e),
                }
            }
            Ok(report)
        }
    }

    /// Adds workers' per-minute samples (additive across workers).
    fn record_samples(&self, samples: &[Sample]) -> impl Future<Output = Result<()>> + Send;

    /// Samples of the last `window`, oldest first.
    fn samples(&self, window: Duration) -> impl Future<Output = Result<Vec<Sample>>> + Send;

    /// Keeps one operator action.
    fn audit(&self, entry: &AuditEntry) -> impl Future<Output = Result<()>> + Send;

    /// The latest operator actions, newest first.
    fn audit_log(&self, limit: i64) -> impl Future<Output = Result<Vec<AuditEntry>>> + Send;

    /// Lists jobs, newest first.
    fn list(&self, filter: &JobFilter) -> impl Future<Output = Result<Vec<JobRecord>>> + Send;

    /// Counts jobs of `queues` that are ready now or running (drain mode stops at zero).
    fn active_count(&self, queues: &[String]) -> impl Future<Output = Result<i64>> + Send;

    /// True when any job of `queues` is ready now or running (cheap at any backlog).
    fn any_active(&self, queues: &[String]) -> impl Future<Output = Result<bool>> + Send;

    /// Table health alone (tuples, vacuum, sizes): cheap, unlike [`Store::stats`]; `None`
    /// on an engine without such statistics.
    fn table_health(&self) -> impl Future<Output = Result<Option<TableStats>>> + Send;

    /// Operator counters.
    fn stats(&self) -> impl Future<Output = Result<Stats>> + Send;

    // ---- Scheduling controls (enforced inside `claim`, across all workers) ----

    /// Pauses a queue: once this returns, no claim takes a job of it (claims in flight
    /// have committed) until [`Store::resume_queue`].
    fn pause_queue(&self, queue: &str) -> impl Future<Output = Result<QueueControl>> + Send;

    /// Resumes a paused queue and wakes idle workers.
    fn resume_queue(&self, queue: &str) -> impl Future<Output = Result<QueueControl>> + Send;

    /// Forgets a queue's stored controls (pause, limits, rate bucket) — the row a mistyped
    /// `pause` leaves — when no job of it is pending or running. `true` when a row was
    /// removed; `false` when there was none or work remains (nothing changed).
    fn remove_queue(&self, queue: &str) -> impl Future<Output = Result<bool>> + Send;

    /// Replaces a queue's limits (all `None` removes them); binds every claim after it returns.
    fn set_queue_limits(
        &self,
        queue: &str,
        limits: &QueueLimits,
    ) -> impl Future<Output = Result<QueueControl>> + Send;

    /// Every queue with a control row.
    fn queue_controls(&self) -> impl Future<Output = Result<Vec<QueueControl>>> + Send;

    /// Sets (or, with both limits `None`, removes) the limits of a concurrency key.
    fn set_key_limit(&self, limit: &KeyLimit) -> impl Future<Output = Result<()>> + Send;

    /// Every key with limits.
    fn key_limits(&self) -> impl Future<Output = Result<Vec<KeyLimit>>> + Send;

    /// Ordering keys held up by a dead job at their head.
    fn blocked_keys(&self, limit: i64) -> impl Future<Output = Result<Vec<BlockedKey>>> + Send;

    /// Skips a dead job (it becomes cancelled, history kept), releasing its ordering key.
    fn skip(&self, id: JobId) -> impl Future<Output = Result<JobRecord>> + Send;

    /// Safety net: unflags blocked jobs whose key could run now (at most `batch` keys of
    /// each kind); returns how many jobs it unflagged.
    fn unblock_keys(&self, batch: i32) -> impl Future<Output = Result<u64>> + Send;

    /// Hands on the keys whose release could not be done when their job finished (the key's
    /// lock was held: see migration 0017 of docket-postgres), at most `batch`; returns how
    /// many jobs it unflagged. Run by the leader at every reap interval. Engines that decide
    /// every key inside the finishing transaction record none: the default does nothing.
    fn hand_over_keys(&self, batch: i32) -> impl Future<Output = Result<u64>> + Send {
        let _ = batch;
        async { Ok(0) }
    }

    // ---- Periodic jobs ----

    /// Creates or updates a definition. The schedule restarts from now only when the
    /// expression or time zone changed, so redeploys keep the missed-tick policy working.
    fn upsert_periodic(&self, def: &Periodic)
        -> impl Future<Output = Result<PeriodicState>> + Send;

    /// Removes a definition; false when there was none.
    fn remove_periodic(&self, name: &str) -> impl Future<Output = Result<bool>> + Send;

    /// Pauses (`paused`) or resumes a periodic schedule; false when there is no such one.
    fn pause_periodic(&self, name: &str, paused: bool)
        -> impl Future<Output = Result<bool>> + Send;

    /// Every definition with its next tick.
    fn list_periodic(&self) -> impl Future<Output = Result<Vec<PeriodicState>>> + Send;

    /// Enqueues the due ticks of up to `limit` definitions, each exactly once however many
    /// callers race (a compare-and-set on the next tick in the enqueuing transaction, plus
    /// a unique key per tick). Run by the leader.
    fn enqueue_due_periodic(
        &self,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<TickEnqueued>>> + Send;
}

/// `w`'s node indexes, parents before children (by depth).
fn topological(w: &crate::workflow::WorkflowDetail) -> Vec<usize> {
    let depth = w.depths();
    let mut order: Vec<usize> = (0..w.nodes.len()).collect();
    order.sort_by_key(|&i| (depth[i], i));
    order
}
