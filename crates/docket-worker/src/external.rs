//! Running the registry's handlers for jobs that a source other than a `Store` delivers —
//! a JetStream consumer (`docket-nats`'s `Source`) — with the same [`crate::Job`] API and the
//! same guards as the database worker: panics caught, the maximum runtime enforced,
//! cancellation with a grace period, a handler that ignores it dropped.
//!
//! What the source keeps is the source's business (acks, redelivery, dead letters); this
//! module only turns a handler's run into a [`Verdict`]. A delivered job has no row, so the
//! context's steps, sleeps, signals, spawns and dependency reads are refused as discards
//! with a reason that says so, and an output set with `set_output` is handed back in the
//! verdict for the source to keep or drop.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use docket_core::duration::MAX_DELAY;
use docket_core::{JobId, Lease, StepRecord, StepRecorded, StoreError};
use futures::future::BoxFuture;
use futures::FutureExt;

use crate::executor::panic_message;
use crate::job::{JobContext, JobError, JobResult};
use crate::registry::{Handler, Registry};
use crate::steps::StepStore;
use crate::tracker::{InFlight, StopReason};

/// One delivered job.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Its stable id (a stream sequence): the idempotency key handlers see as `ctx.id`.
    pub id: JobId,
    /// Which delivery this is (1 on the first).
    pub attempt: i32,
    /// Deliveries allowed in total.
    pub max_attempts: i32,
    /// Where it came from (shown to the handler as `ctx.queue`).
    pub queue: String,
    /// Its kind: which handler runs it.
    pub kind: String,
    /// The handler's arguments.
    pub args: serde_json::Value,
    /// Metadata given at enqueue.
    pub metadata: serde_json::Value,
    /// When it was delivered.
    pub delivered_at: DateTime<Utc>,
}

/// The bounds of one run.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// The longest a handler may run (a kind's own timeout overrides it).
    pub max_runtime: Duration,
    /// How long a handler told to stop may take before it is dropped.
    pub cancel_grace: Duration,
    /// The largest output `set_output` accepts.
    pub max_output_bytes: usize,
}

/// How a delivered job's run ended: what the source must write.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Succeeded, with the output the handler set, if any.
    Succeeded(Option<serde_json::Value>),
    /// Failed transiently: again after `delay` (the source's backoff when `None`) while
    /// deliveries remain.
    Retry {
        /// What went wrong.
        message: String,
        /// The handler's own delay, clamped to Docket's longest.
        delay: Option<Duration>,
    },
    /// Failed for good.
    Discard(String),
    /// Cancelled by its handler.
    Cancel(String),
    /// Run again after the delay.
    Snooze(Duration),
    /// Stopped because the delivery was lost (another consumer may hold it now): write
    /// nothing.
    Lost,
    /// Stopped by shutdown before it ended: hand it back unfinished.
    Released,
}

/// A running delivery, for the source to stop it.
#[derive(Debug, Clone)]
pub struct Running {
    entry: Arc<InFlight>,
}

impl Running {
    /// Tells the handler to stop (the first reason sticks): [`StopReason::LeaseLost`] when
    /// the delivery can no longer be kept, [`StopReason::Shutdown`] at shutdown.
    pub fn stop(&self, reason: StopReason) {
        self.entry.stop(reason);
    }

    /// Why it was told to stop, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        self.entry.reason()
    }
}

/// The step store of a delivery: it has none.
struct NoSteps;

const NO_STEPS: &str = "steps, durable sleeps, signals and workflows need a job kept in the database; this job was delivered by JetStream (run it on a database queue)";

fn refused<T>() -> BoxFuture<'static, Result<T, StoreError>> {
    Box::pin(async { Err(StoreError::Denied(NO_STEPS.into())) })
}

impl StepStore for NoSteps {
    fn load(&self, _: JobId) -> BoxFuture<'_, Result<Vec<StepRecord>, StoreError>> {
        refused()
    }
    fn record<'a>(
        &'a self,
        _: Lease,
        _: &'a str,
        _: &'a serde_json::Value,
        _: usize,
    ) -> BoxFuture<'a, Result<StepRecorded, StoreError>> {
        refused()
    }
    fn signal<'a>(
        &'a self,
        _: JobId,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<serde_json::Value>, StoreError>> {
        refused()
    }
    fn deps(&self, _: JobId) -> BoxFuture<'_, Result<Vec<docket_core::DepOutput>, StoreError>> {
        refused()
    }
    fn spawn<'a>(
        &'a self,
        _: Lease,
        _: &'a str,
        _: &'a docket_core::workflow::Graph,
    ) -> BoxFuture<'a, Result<docket_core::WorkflowEnqueued, StoreError>> {
        refused()
    }
    fn unsupported(&self) -> Option<&'static str> {
        Some(NO_STEPS)
    }
}

impl<S> Registry<S> {
    /// Starts running a delivered job: the handle to stop it, and the run to await (it
    /// ends with the verdict). A kind without a handler is a retry (a deploy may add it), an
    /// in-transaction handler ([`crate::TxJob`]) a discard: there is no transaction to run
    /// it in.
    pub fn start_delivery(
        &self,
        d: Delivery,
        limits: RunLimits,
    ) -> (Running, BoxFuture<'static, Verdict>) {
        let lease = Lease {
            id: d.id,
            attempt: d.attempt,
        };
        let labels = crate::telemetry::Labels {
            queue: d.queue.as_str().into(),
            kind: d.kind.as_str().into(),
            claimed_at: d.delivered_at,
        };
        // The record the context's cancellation and stop reason live in.
        let entry = InFlight::detached(lease, labels);
        let running = Running {
            entry: entry.clone(),
        };
        let ctx = JobContext {
            id: d.id,
            attempt: d.attempt,
            max_attempts: d.max_attempts,
            fence: d.attempt,
            queue: d.queue,
            kind: d.kind.clone(),
            metadata: d.metadata,
            cancel: entry.cancel.clone(),
            store: Arc::new(()),
            reason: entry.reason_cell(),
            run: Default::default(),
            max_output: limits.max_output_bytes,
            progress: entry.progress_cell(),
            steps: Arc::new(NoSteps),
            entry: entry.clone(),
            claimed_at: d.delivered_at,
        };
        let run: BoxFuture<'static, Verdict> = match self.get(&d.kind) {
            None => {
                let known = self.kinds().join(", ");
                let message = format!(
                    "no handler for kind {:?} in this worker (known: [{known}]); retried with backoff so a deploy that adds it picks the job up",
                    d.kind
                );
                Box::pin(async move {
                    Verdict::Retry {
                        message,
                        delay: None,
                    }
                })
            }
            Some((Handler::InTransaction(_), _)) => {
                let message = format!(
                    "kind {:?} runs inside a database transaction (TxJob); a JetStream delivery has none: run it on a database queue",
                    d.kind
                );
                Box::pin(async move { Verdict::Discard(message) })
            }
            Some((Handler::Plain(f), timeout)) => {
                let max_runtime = timeout.unwrap_or(limits.max_runtime);
                let output = ctx.run.clone();
                let fut = f(d.args, ctx);
                Box::pin(async move {
                    let ended = run_guarded(&entry, fut, max_runtime, limits.cancel_grace).await;
                    let output = output.output.lock().expect("poisoned").take();
                    verdict(&entry, ended, max_runtime, output)
                })
            }
        };
        (running, run)
    }
}

enum Ended {
    Returned(JobResult),
    Panicked(String),
    Dropped,
}

async fn run_guarded(
    entry: &InFlight,
    fut: BoxFuture<'static, JobResult>,
    max_runtime: Duration,
    grace: Duration,
) -> Ended {
    let mut fut = std::panic::AssertUnwindSafe(fut).catch_unwind();
    let done = tokio::select! {
        r = &mut fut => Some(r),
        _ = entry.cancel.cancelled() => None,
        _ = tokio::time::sleep(max_runtime) => {
            entry.stop(StopReason::TimedOut);
            None
        }
    };
    let r = match done {
        Some(r) => r,
        None => match tokio::time::timeout(grace, &mut fut).await {
            Ok(r) => r,
            Err(_) => return Ended::Dropped,
        },
    };
    match r {
        Ok(r) => Ended::Returned(r),
        Err(p) => Ended::Panicked(panic_message(&*p)),
    }
}

fn verdict(
    entry: &InFlight,
    ended: Ended,
    max_runtime: Duration,
    output: Option<serde_json::Value>,
) -> Verdict {
    let retry = |message: String| Verdict::Retry {
        message,
        delay: None,
    };
    match (entry.reason(), ended) {
        (Some(StopReason::LeaseLost), _) => Verdict::Lost,
        (_, Ended::Returned(Ok(()))) => Verdict::Succeeded(output),
        (Some(StopReason::Cancelled), _) => Verdict::Cancel("cancelled by operator".into()),
        (Some(StopReason::TimedOut), _) => {
            retry(format!("timed out after {:.3}s", max_runtime.as_secs_f64()))
        }
        (Some(StopReason::Shutdown), Ended::Returned(Err(JobError::Discard(m)))) => {
            Verdict::Discard(m)
        }
        (Some(StopReason::Shutdown), _) => Verdict::Released,
        (None, Ended::Returned(Err(e))) => match e {
            JobError::Retry { message, delay } => Verdict::Retry {
                message,
                delay: delay.map(|d| d.min(MAX_DELAY)),
            },
            JobError::Discard(m) => Verdict::Discard(m),
            JobError::Cancel(m) => Verdict::Cancel(m),
            JobError::Snooze(d) => Verdict::Snooze(d.min(MAX_DELAY)),
        },
        (None, Ended::Panicked(m)) => retry(format!("handler panicked: {m}")),
        (None, Ended::Dropped) => retry("handler was dropped".into()),
    }
}
