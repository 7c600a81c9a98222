//! Memoized steps inside a handler (`JobContext::step`): the recorded steps of the job,
//! loaded once per run, and the store's fenced record, type-erased so handlers stay
//! engine-independent.
//!
//! Records are batched across the worker's running jobs ([`StepBatcher`]): a step that
//! arrives while another batch is being written waits for it and goes with the next, so a
//! worker whose slots all step at once pays one round trip per batch, not one per step, and
//! a lone step goes at once (no timer, no added latency when idle).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use docket_core::{
    JobId, Lease, LeaseLost, StepRecord, StepRecorded, StepWrite, Store, StoreError,
};
use futures::future::BoxFuture;
use tokio::sync::oneshot;

/// What a handler's steps need of the store.
pub(crate) trait StepStore: Send + Sync {
    fn load(&self, id: JobId) -> BoxFuture<'_, Result<Vec<StepRecord>, StoreError>>;
    /// Records a step under `lease` (the worker's own claim: its owner is the worker's);
    /// `bytes` is the output's size as JSON text (what sizes a batch), measured by the
    /// caller's bound check so the output is not serialized twice.
    fn record<'a>(
        &'a self,
        lease: Lease,
        name: &'a str,
        output: &'a serde_json::Value,
        bytes: usize,
    ) -> BoxFuture<'a, Result<StepRecorded, StoreError>>;
    fn signal<'a>(
        &'a self,
        id: JobId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<serde_json::Value>, StoreError>>;
    /// The job's parents in its workflow (empty for a plain job).
    fn deps(&self, id: JobId) -> BoxFuture<'_, Result<Vec<docket_core::DepOutput>, StoreError>>;
    /// Adds a graph to the workflow of the node `lease` holds (see `Store::spawn_nodes`).
    fn spawn<'a>(
        &'a self,
        lease: Lease,
        step: &'a str,
        graph: &'a docket_core::workflow::Graph,
    ) -> BoxFuture<'a, Result<docket_core::WorkflowEnqueued, StoreError>>;
    /// Why this source keeps no steps, when it keeps none (a job delivered by a broker has
    /// no row to record them in): every step, sleep, signal, spawn and dependency read is
    /// then refused with this reason as a discard, before anything runs.
    fn unsupported(&self) -> Option<&'static str> {
        None
    }
}

/// The most steps one batch carries, and the most output bytes (a batch is one statement:
/// past these a step waits for the next batch; a single step larger than the byte bound
/// goes alone).
const MAX_BATCH: usize = 256;
const MAX_BATCH_BYTES: usize = 4 << 20;

/// Step records of a worker's running jobs, written in batches by the store's
/// `record_steps`. Written by hand rather than with a channel and a service: a batch is
/// flushed by a task spawned when the first step arrives while none is running, and that
/// task ends when nothing waits, so an idle worker holds no task and a handler dropped
/// mid-step (its lease lost, its grace period over) cannot strand the steps of others — the
/// spawned flush runs on regardless of who started it.
pub(crate) struct StepBatcher<S: Store> {
    store: S,
    owner: Arc<str>,
    queue: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    steps: Vec<Pending>,
    flushing: bool,
}

struct Pending {
    step: StepWrite,
    bytes: usize,
    reply: oneshot::Sender<Result<StepRecorded, Refused>>,
}

/// Why a step in a batch was not recorded.
enum Refused {
    Lost(LeaseLost),
    /// The whole batch failed (the store's error, as text: every step of it gets one).
    Failed(String),
}

impl<S: Store> StepBatcher<S> {
    pub(crate) fn new(store: S, owner: Arc<str>) -> Arc<Self> {
        Arc::new(StepBatcher {
            store,
            owner,
            queue: Mutex::default(),
        })
    }

    /// Queues one step; starts a flush unless one runs (it takes this step with the next
    /// batch).
    async fn record_one(
        self: Arc<Self>,
        step: StepWrite,
        output_bytes: usize,
    ) -> Result<StepRecorded, StoreError> {
        let bytes = output_bytes + step.name.len();
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut q = self.queue.lock().expect("poisoned");
            q.steps.push(Pending { step, bytes, reply });
            !std::mem::replace(&mut q.flushing, true)
        };
        if start {
            tokio::spawn(self.clone().flush());
        }
        match answer.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(Refused::Lost(lost))) => Err(StoreError::LeaseLost(lost)),
            Ok(Err(Refused::Failed(e))) => Err(StoreError::Database(e.into())),
            Err(_) => Err(StoreError::Database(
                "the step's batch ended without an answer".into(),
            )),
        }
    }

    /// Writes batches until nothing waits.
    async fn flush(self: Arc<Self>) {
        loop {
            // Let the handlers the last batch answered run first: most reach their next step
            // at once and join this batch, instead of half of them waiting for the one after
            // (measured: 5 steps a batch on 10 slots without this).
            tokio::task::yield_now().await;
            let batch = {
                let mut q = self.queue.lock().expect("poisoned");
                if q.steps.is_empty() {
                    q.flushing = false;
                    return;
                }
                let (mut n, mut bytes) = (0, 0);
                while n < q.steps.len().min(MAX_BATCH)
                    && (n == 0 || bytes + q.steps[n].bytes <= MAX_BATCH_BYTES)
                {
                    bytes += q.steps[n].bytes;
                    n += 1;
                }
                q.steps.drain(..n).collect::<Vec<_>>()
            };
            let writes: Vec<StepWrite> = batch.iter().map(|p| p.step.clone()).collect();
            match self.store.record_steps(&self.owner, &writes).await {
                Ok(results) if results.len() == batch.len() => {
                    for (p, r) in batch.into_iter().zip(results) {
                        let _ = p.reply.send(r.map_err(Refused::Lost));
                    }
                }
                Ok(results) => {
                    let e = format!(
                        "the store answered {} of {} steps",
                        results.len(),
                        batch.len()
                    );
                    for p in batch {
                        let _ = p.reply.send(Err(Refused::Failed(e.clone())));
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    for p in batch {
                        let _ = p.reply.send(Err(Refused::Failed(e.clone())));
                    }
                }
            }
        }
    }
}

impl<S: Store> StepStore for Arc<StepBatcher<S>> {
    fn load(&self, id: JobId) -> BoxFuture<'_, Result<Vec<StepRecord>, StoreError>> {
        Box::pin(self.store.job_steps(id))
    }

    fn record<'a>(
        &'a self,
        lease: Lease,
        name: &'a str,
        output: &'a serde_json::Value,
        bytes: usize,
    ) -> BoxFuture<'a, Result<StepRecorded, StoreError>> {
        let step = StepWrite {
            lease,
            name: name.to_owned(),
            output: output.clone(),
        };
        Box::pin(self.clone().record_one(step, bytes))
    }

    fn signal<'a>(
        &'a self,
        id: JobId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<serde_json::Value>, StoreError>> {
        Box::pin(self.store.job_signal(id, name))
    }

    fn deps(&self, id: JobId) -> BoxFuture<'_, Result<Vec<docket_core::DepOutput>, StoreError>> {
        Box::pin(self.store.dep_outputs(id))
    }

    fn spawn<'a>(
        &'a self,
        lease: Lease,
        step: &'a str,
        graph: &'a docket_core::workflow::Graph,
    ) -> BoxFuture<'a, Result<docket_core::WorkflowEnqueued, StoreError>> {
        Box::pin(self.store.spawn_nodes(&self.owner, lease, step, graph))
    }
}

/// One run's view of its job's steps.
#[derive(Debug, Default)]
pub(crate) struct RunSteps {
    /// The steps recorded before this run (or by it), by name; loaded at the first step.
    pub recorded: Option<HashMap<String, StepRecord>>,
    /// The names this run has used (a name may be used once per run).
    pub used: HashSet<String>,
}

/// What one run of a handler leaves for the runtime besides its result.
#[derive(Debug, Default)]
pub(crate) struct RunState {
    /// The output recorded by `JobContext::set_output`, written with the completion.
    pub output: std::sync::Mutex<Option<serde_json::Value>>,
    /// The signal a park waits for (`wait_signal`): the snooze it returns is written as a
    /// park, due at once if the signal arrives before the park is written.
    pub park: std::sync::Mutex<Option<String>>,
    /// This run's steps.
    pub steps: tokio::sync::Mutex<RunSteps>,
}
