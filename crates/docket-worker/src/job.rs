//! The handler API: typed jobs, their context and their outcomes.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use docket_core::{InTransaction, JobId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use crate::tracker::StopReason;

/// What a handler gets besides its arguments.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// The job's stable id. Delivery is at-least-once, so use it as the idempotency key of
    /// any external side effect (e.g. an email provider's idempotency header).
    pub id: JobId,
    /// Which run of the job this is (1 on the first): claims given back unrun (a buffered
    /// job released, a snooze) do not count, a crashed or failed run does.
    pub attempt: i32,
    /// Runs allowed in total.
    pub max_attempts: i32,
    /// This claim's fencing token, unique per claim of the job (every claim raises it, run
    /// or not): what the database compares every write of this claim with. For logs that
    /// must tell two claims of one run apart (a run interrupted by shutdown and given back
    /// runs again under the same `attempt`).
    pub fence: i32,
    /// The queue it came from.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// Metadata given at enqueue.
    pub metadata: serde_json::Value,
    /// Fires when the job must stop: its lease was lost, an operator cancelled it, it ran past
    /// its maximum runtime, or the worker is shutting down past its deadline. A handler that
    /// ignores it is dropped after a grace period.
    pub cancel: CancellationToken,
    /// The worker's store, type-erased so that handlers stay engine-independent; read it
    /// with [`JobContext::store`].
    pub(crate) store: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    /// Why the job was told to stop (shared with the runtime's record of it).
    pub(crate) reason: std::sync::Arc<std::sync::Mutex<Option<StopReason>>>,
    /// This run's output, park and steps (one allocation per job: plain jobs pay little).
    pub(crate) run: std::sync::Arc<crate::steps::RunState>,
    /// The largest output allowed (`WorkerConfig::max_output_bytes`).
    pub(crate) max_output: usize,
    /// Where progress reports go (the runtime's record of this job).
    pub(crate) progress: std::sync::Arc<std::sync::Mutex<Option<(f32, String)>>>,
    /// The store, for steps.
    pub(crate) steps: std::sync::Arc<dyn crate::steps::StepStore>,
    /// The runtime's record of this job (stopped when a step finds the lease lost).
    pub(crate) entry: std::sync::Arc<crate::tracker::InFlight>,
    /// When this claim was made, on the database's clock (its lease's expiry less the
    /// lease): durable sleeps are judged against it.
    pub(crate) claimed_at: chrono::DateTime<chrono::Utc>,
}

/// What a wait for a signal ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal<T> {
    /// The signal arrived, with this payload.
    Received(T),
    /// The timeout passed first.
    TimedOut,
}

impl fmt::Debug for dyn crate::steps::StepStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StepStore")
    }
}

impl JobContext {
    /// The worker's store, for handlers that touch the database (`ctx.store::<PgStore>()`
    /// then `.pool()`); `None` when the worker runs another engine.
    pub fn store<S: Clone + 'static>(&self) -> Option<S> {
        self.store.downcast_ref::<S>().cloned()
    }

    /// Records the job's output: stored with the job by its completion when the handler
    /// returns `Ok(())` — fenced like every write of this claim, so an attempt that lost its
    /// lease records nothing — and readable with `store.output(id)` (typed:
    /// [`crate::Outputs`]), `docket jobs output ID` and the dashboard until the outputs'
    /// retention (`Retention::outputs`, 24 h by default), even when plain successes are
    /// deleted. A later call replaces an earlier one; a failed run records nothing.
    ///
    /// An output that does not serialize, holds a NUL, a number longer than 1,024
    /// characters, or is over `WorkerConfig::max_output_bytes` (1 MiB by default) of stored
    /// JSON text is refused with [`JobError::Discard`] (it would be refused on every run),
    /// so `ctx.set_output(&v)?` ends the job dead with the reason.
    pub fn set_output<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), JobError> {
        let v = serde_json::to_value(value)
            .map_err(|e| JobError::discard(format!("the output does not serialize: {e}")))?;
        docket_core::output::check(&v, self.max_output)
            .map_err(|e| JobError::discard(format!("the output is refused: {e}")))?;
        *self.run.output.lock().expect("poisoned") = Some(v);
        Ok(())
    }

    /// Reports progress: `percent` (clamped to 0..=100; NaN counts as 0) and what the
    /// handler is doing (cut to 256 bytes). Cheap to call often: reports between two
    /// heartbeats coalesce to the latest, which the next heartbeat writes — fenced like it,
    /// so an attempt that lost its lease reports nothing. Shown by `docket jobs show` and the
    /// dashboard's job page (with the database time of the write).
    pub fn progress(&self, percent: f64, message: impl Into<String>) {
        let p = if percent.is_nan() {
            0.0
        } else {
            percent.clamp(0.0, 100.0)
        };
        let message = docket_core::progress::cut_message(&message.into().replace('\0', ""));
        *self.progress.lock().expect("poisoned") = Some((p as f32, message));
    }

    /// Runs `f` at most once per job *as far as the database records*: the first run that
    /// gets here runs it and records its output under this claim's fence (a stale attempt
    /// records nothing); every later run of the job — a retry, a run after a crash or a
    /// durable sleep — gets the recorded value back without running `f`.
    ///
    /// A crash after `f`'s side effect and before its record runs `f` again: use the job id
    /// and `name` as the side effect's idempotency key (`format!("{}:{name}", ctx.id)`).
    ///
    /// `name` is unique within a job (1 to 128 bytes, no control characters): using one
    /// twice in a run is a [`JobError::Discard`], as is an output that does not serialize
    /// or is over the output bound. An error from `f` is the step's failure: nothing is
    /// recorded and the job fails with it (a retry runs `f` again). When the claim no longer
    /// holds, the job stops (its outcome is not written) and nothing is recorded.
    pub async fn step<T, F, Fut>(&self, name: &str, f: F) -> Result<T, JobError>
    where
        T: Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, JobError>>,
    {
        docket_core::steps::check_user_name(name).map_err(JobError::discard)?;
        let decode = |v: serde_json::Value| {
            serde_json::from_value::<T>(v).map_err(|e| {
                JobError::discard(format!(
                    "step {name:?}: its recorded output does not decode as the type asked for: {e}"
                ))
            })
        };
        if let Some(v) = self.recorded_step(name).await? {
            return decode(v.output);
        }
        let out = f().await?;
        let v = serde_json::to_value(&out).map_err(|e| {
            JobError::discard(format!("step {name:?}: its output does not serialize: {e}"))
        })?;
        let bytes = docket_core::output::check(&v, self.max_output)
            .map_err(|e| JobError::discard(format!("step {name:?}: {e}")))?;
        let (value, written) = self.record(name, v, Some(bytes)).await?;
        if written {
            Ok(out)
        } else {
            decode(value)
        }
    }

    /// Parks the job for `duration` — not running, holding no slot, spending no attempt —
    /// and runs it again from the top once the time has passed; recorded steps are skipped
    /// then, and this call returns `Ok(())` at once. Call it with `?`: the first time it
    /// returns the park as an error, which ends this run (the worker writes the park,
    /// fenced like every write of the claim). `name` is unique within the job, like a
    /// step's; the time is kept on the database's clock (an operator's "run now" ends a
    /// sleep early). `docket jobs why` says "sleeping until T".
    pub async fn sleep(&self, name: &str, duration: std::time::Duration) -> Result<(), JobError> {
        docket_core::steps::check_user_name(name).map_err(JobError::discard)?;
        let duration = duration.min(docket_core::duration::MAX_DELAY);
        let step = docket_core::steps::sleep_step(name);
        if let Some(rec) = self.recorded_step(&step).await? {
            // Recorded by an earlier run: done once this run was claimed after its end (a
            // crash right after the record must not cut the sleep short).
            let until = docket_core::steps::sleep_of(&rec).map(|(_, t)| t);
            return match until.map(|t| t - self.claimed_at) {
                Some(left) if left > chrono::TimeDelta::zero() => Err(JobError::snooze(
                    left.to_std().unwrap_or(std::time::Duration::ZERO),
                )),
                _ => Ok(()),
            };
        }
        let ms = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        self.record(&step, serde_json::json!({ "sleep_ms": ms }), None)
            .await?;
        Err(JobError::snooze(duration))
    }

    /// This job's workflow and node name, when it is a node of one.
    pub fn workflow(&self) -> Option<(i64, &str)> {
        docket_core::workflow::marker(&self.metadata)
    }

    /// What this job is told when it is a batch's callback: the batch, why the callback
    /// fired and its members' counts.
    pub fn batch(&self) -> Option<docket_core::BatchResult> {
        docket_core::BatchResult::of(&self.metadata)
    }

    /// Adds `children` to this node's workflow, each running after this node, and `then`
    /// (if given) after all of them; this node's own dependents wait for `then` (or for every
    /// child) too. Fenced by this run's claim — a stale attempt spawns nothing — and once per
    /// `name`: a later run of this node gets the same jobs back instead of spawning again (the
    /// spawn is recorded as a step). Children's names must be new to the workflow. Returns
    /// the spawned nodes' jobs.
    pub async fn spawn(
        &self,
        name: &str,
        children: Vec<(String, docket_core::NewJob)>,
        then: Option<(String, docket_core::NewJob)>,
    ) -> Result<docket_core::WorkflowEnqueued, JobError> {
        self.supported()?;
        if self.workflow().is_none() {
            return Err(JobError::discard("only a workflow node can spawn nodes"));
        }
        if docket_core::batches::is_member(&self.metadata) {
            // A spawned node would not be counted among the batch's members, so the batch
            // could settle before it ran.
            return Err(JobError::discard(
                "a batch's member cannot spawn nodes (add members to an open batch instead)",
            ));
        }
        let names: Vec<String> = children.iter().map(|(n, _)| n.clone()).collect();
        let mut w = docket_core::workflow::Workflow::new(name);
        for (n, job) in children {
            w = w.add(n, job);
        }
        if let Some((n, job)) = then {
            w = w.add_after(n, job, names);
        }
        let graph = w
            .graph(&docket_core::Limits::default())
            .map_err(|e| JobError::discard(format!("spawn {name:?}: {e}")))?
            .clone();
        let lease = docket_core::Lease {
            id: self.id,
            attempt: self.fence,
        };
        match self.steps.spawn(lease, name, &graph).await {
            Ok(out) => Ok(out),
            Err(docket_core::StoreError::Invalid(e)) => {
                Err(JobError::discard(format!("spawn {name:?}: {e}")))
            }
            Err(e) => Err(JobError::retry(format!("spawn {name:?}: {e}"))),
        }
    }

    /// Every parent of this workflow node: name, job, state and output (empty for a plain
    /// job). A node runs once each parent has succeeded — or ended on an edge whose policy is
    /// `ignore`, so a parent here may be dead or cancelled, without an output.
    pub async fn deps(&self) -> Result<Vec<docket_core::DepOutput>, JobError> {
        self.supported()?;
        self.steps.deps(self.id).await.map_err(|e| {
            JobError::retry(format!("the dependencies' outputs could not be read: {e}"))
        })
    }

    /// The output of parent `name`, decoded: `Ok(None)` when it ended without one (no
    /// output set, or it failed on an `ignore` edge). A name that is not a parent of this
    /// node, or an output that is not a `T`, is a [`JobError::Discard`] (a bug no retry
    /// mends).
    pub async fn dep_output<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, JobError> {
        let deps = self.deps().await?;
        let Some(d) = deps.into_iter().find(|d| d.node == name) else {
            return Err(JobError::discard(format!(
                "{name:?} is not a parent of this job in its workflow"
            )));
        };
        match d.output {
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                JobError::discard(format!(
                    "the output of {name:?} does not decode as the type asked for: {e}"
                ))
            }),
            None => Ok(None),
        }
    }

    /// Waits for signal `name` (sent with `store.signal(id, name, payload)`, `signal_in`
    /// inside a transaction, SQL `docket.signal(...)`, `docket jobs signal` or the
    /// dashboard) for up to `timeout`: parked meanwhile — pending, holding no slot, spending
    /// no attempt — and run again from the top when it arrives or the timeout passes; a
    /// signal sent before the wait is found at once. Call it with `?`: while the job must
    /// wait it returns the park as an error, which ends this run.
    ///
    /// The answer — the payload, or [`Signal::TimedOut`] — is recorded as a step under this
    /// claim, so the job resumes once per wait with one answer whatever runs it again. `name`
    /// is unique within the job, like a step's; a payload that is not a `T` is a
    /// [`JobError::Discard`]. `docket jobs why` says "waiting for signal S since T, timing
    /// out at T'".
    pub async fn wait_signal<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        timeout: std::time::Duration,
    ) -> Result<Signal<T>, JobError> {
        use docket_core::signals::{answer_step, wait_step};
        docket_core::steps::check_user_name(name).map_err(JobError::discard)?;
        let timeout = timeout.min(docket_core::duration::MAX_DELAY);
        let decode = |v: serde_json::Value| -> Result<Signal<T>, JobError> {
            match v.get("signal") {
                Some(p) => serde_json::from_value(p.clone())
                    .map(Signal::Received)
                    .map_err(|e| {
                        JobError::discard(format!(
                            "signal {name:?}: its payload does not decode as the type asked for: {e}"
                        ))
                    }),
                None => Ok(Signal::TimedOut),
            }
        };
        let answer = answer_step(name);
        if let Some(rec) = self.recorded_step(&answer).await? {
            if !docket_core::mutants::active(docket_core::mutants::Mutant::SignalAnswerNotKept) {
                return decode(rec.output);
            }
        }
        let sent = self
            .steps
            .signal(self.id, name)
            .await
            .map_err(|e| JobError::retry(format!("signal {name:?} could not be read: {e}")))?;
        if let Some(payload) = sent {
            if docket_core::mutants::active(docket_core::mutants::Mutant::SignalAnswerNotKept) {
                return decode(serde_json::json!({ "signal": payload }));
            }
            let (v, _) = self
                .record(&answer, serde_json::json!({ "signal": payload }), None)
                .await?;
            return decode(v);
        }
        let wait = wait_step(name);
        let left = match self.recorded_step(&wait).await? {
            Some(rec) => {
                let ms = rec
                    .output
                    .get("timeout_ms")
                    .and_then(|v| v.as_i64())
                    .unwrap_or(0);
                let until = rec.recorded_at + chrono::TimeDelta::milliseconds(ms);
                let left = until - self.claimed_at;
                if left <= chrono::TimeDelta::zero() {
                    let (v, _) = self
                        .record(&answer, serde_json::json!({ "timed_out": true }), None)
                        .await?;
                    return decode(v);
                }
                left.to_std().unwrap_or(std::time::Duration::ZERO)
            }
            None => {
                let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
                self.record(&wait, serde_json::json!({ "timeout_ms": ms }), None)
                    .await?;
                timeout
            }
        };
        *self.run.park.lock().expect("poisoned") = Some(name.to_string());
        Err(JobError::snooze(left))
    }

    /// A step recorded before (or by) this run, marking `name` used in this run: a name
    /// used twice in one run is a [`JobError::Discard`].
    async fn recorded_step(&self, name: &str) -> Result<Option<docket_core::StepRecord>, JobError> {
        self.supported()?;
        let mut st = self.run.steps.lock().await;
        if !st.used.insert(name.to_string()) {
            return Err(JobError::discard(format!(
                "step {name:?} is used twice in one run: step names are unique within a job"
            )));
        }
        if st.recorded.is_none() {
            // Only a claim that held the job records a step: under the first claim there is
            // none to read.
            let loaded = if self.fence == 1 {
                Vec::new()
            } else {
                self.steps.load(self.id).await.map_err(|e| {
                    JobError::retry(format!("the job's recorded steps could not be read: {e}"))
                })?
            };
            st.recorded = Some(loaded.into_iter().map(|s| (s.name.clone(), s)).collect());
        }
        Ok(st.recorded.as_ref().and_then(|r| r.get(name)).cloned())
    }

    /// Records step `name` under this claim: the value as recorded (an earlier record of
    /// the name wins) and whether this call wrote it. A lost claim stops the job. `bytes`:
    /// the value's size as JSON text when the caller measured it already.
    async fn record(
        &self,
        name: &str,
        v: serde_json::Value,
        bytes: Option<usize>,
    ) -> Result<(serde_json::Value, bool), JobError> {
        let lease = docket_core::Lease {
            id: self.id,
            attempt: self.fence,
        };
        let bytes = bytes.unwrap_or_else(|| v.to_string().len());
        match self.steps.record(lease, name, &v, bytes).await {
            Ok(r) => {
                let value = if r.written { v } else { r.output };
                if let Some(rec) = self.run.steps.lock().await.recorded.as_mut() {
                    rec.insert(
                        name.to_string(),
                        docket_core::StepRecord {
                            name: name.to_string(),
                            attempt: self.fence,
                            output: value.clone(),
                            recorded_at: self.claimed_at,
                        },
                    );
                }
                Ok((value, r.written))
            }
            Err(docket_core::StoreError::LeaseLost(lost)) => {
                self.entry.stop(StopReason::LeaseLost);
                Err(JobError::retry(format!(
                    "step {name:?} not recorded: {}",
                    lost.reason
                )))
            }
            Err(e) => Err(JobError::retry(format!("step {name:?} not recorded: {e}"))),
        }
    }

    /// A discard when the job's source keeps no steps (a JetStream delivery): the same
    /// answer on every run, so retrying would not help.
    fn supported(&self) -> Result<(), JobError> {
        match self.steps.unsupported() {
            Some(why) => Err(JobError::discard(why)),
            None => Ok(()),
        }
    }

    /// True once the job must stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Why the job must stop, once it must: a handler that runs processes kills them at once
    /// on [`StopReason::LeaseLost`] (another worker may own the job now) and may let them
    /// wind down otherwise.
    pub fn stop_reason(&self) -> Option<StopReason> {
        *self.reason.lock().expect("poisoned")
    }
}

/// How a handler ends other than with success. `?` on any `std::error::Error` gives
/// [`JobError::Retry`] with the error's text.
#[derive(Debug, Clone, PartialEq)]
pub enum JobError {
    /// Transient: retry with backoff (or after `delay`) while attempts remain, then dead.
    Retry {
        /// Error text (bounded when stored).
        message: String,
        /// Overrides the job's backoff for this retry.
        delay: Option<Duration>,
    },
    /// Permanent (invalid arguments, a 4xx from a provider): dead at once.
    Discard(String),
    /// Not an error: run again after the delay, without consuming an attempt.
    Snooze(Duration),
    /// Stop for good: cancelled.
    Cancel(String),
}

impl JobError {
    /// A transient failure with the job's backoff.
    pub fn retry(message: impl fmt::Display) -> Self {
        JobError::Retry {
            message: message.to_string(),
            delay: None,
        }
    }
    /// A transient failure retried after `delay`.
    pub fn retry_in(message: impl fmt::Display, delay: Duration) -> Self {
        JobError::Retry {
            message: message.to_string(),
            delay: Some(delay),
        }
    }
    /// A permanent failure.
    pub fn discard(message: impl fmt::Display) -> Self {
        JobError::Discard(message.to_string())
    }
    /// Run again later without consuming an attempt.
    pub fn snooze(delay: Duration) -> Self {
        JobError::Snooze(delay)
    }
    /// Cancel the job.
    pub fn cancel(message: impl fmt::Display) -> Self {
        JobError::Cancel(message.to_string())
    }
}

impl<E: std::error::Error> From<E> for JobError {
    fn from(e: E) -> Self {
        JobError::retry(e)
    }
}

/// What a handler returns.
pub type JobResult = Result<(), JobError>;

/// A typed job: serde arguments, a kind name, and an async handler.
///
/// ```text
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail { to: String }
/// impl Job for SendEmail {
///     const KIND: &'static str = "send_email";
///     async fn run(self, ctx: JobContext) -> JobResult {
///         mailer.send(&self.to, ctx.id.to_string()).await?; // id = idempotency key
///         Ok(())
///     }
/// }
/// ```
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind stored with the job and used to find this handler.
    const KIND: &'static str;

    /// The queue [`crate::EnqueueJob::enqueue_job`] puts it in. Defaults to `default`.
    const QUEUE: &'static str = "default";

    /// Maximum runtime of one attempt; `None` uses the worker's default.
    const TIMEOUT: Option<Duration> = None;

    /// Runs the job.
    fn run(self, ctx: JobContext) -> impl Future<Output = JobResult> + Send;
}

/// A job that runs inside the transaction that completes it: its own writes through `tx` and
/// the completion commit together, or neither does (exactly-once for local effects). Keep
/// such jobs short: the transaction is open while the handler runs.
///
/// Generic over the engine `S`, since `tx` is the engine's connection type: on PostgreSQL,
/// `impl TxJob<PgStore> for MyJob` and `tx: &mut PgConnection`. Only engines with the
/// [`InTransaction`] capability can run such jobs.
pub trait TxJob<S: InTransaction>: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind stored with the job and used to find this handler.
    const KIND: &'static str;

    /// The queue [`crate::EnqueueJob::enqueue_tx_job`] puts it in. Defaults to `default`.
    const QUEUE: &'static str = "default";

    /// Runs the job inside `tx`. Returning an error rolls `tx` back.
    fn run(self, ctx: JobContext, tx: &mut S::Conn) -> impl Future<Output = JobResult> + Send;
}
