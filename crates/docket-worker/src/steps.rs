//! Memoized steps inside a handler (`JobContext::step`): the recorded steps of the job,
//! loaded once per run, and the store's fenced record, type-erased so handlers stay
//! engine-independent.

use std::collections::{HashMap, HashSet};

use docket_core::{JobId, Lease, StepRecord, StepRecorded, Store, StoreError};
use futures::future::BoxFuture;

/// What a handler's steps need of the store.
pub(crate) trait StepStore: Send + Sync {
    fn load(&self, id: JobId) -> BoxFuture<'_, Result<Vec<StepRecord>, StoreError>>;
    fn record<'a>(
        &'a self,
        owner: &'a str,
        lease: Lease,
        name: &'a str,
        output: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<StepRecorded, StoreError>>;
    fn signal<'a>(
        &'a self,
        id: JobId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<serde_json::Value>, StoreError>>;
}

impl<S: Store> StepStore for S {
    fn load(&self, id: JobId) -> BoxFuture<'_, Result<Vec<StepRecord>, StoreError>> {
        Box::pin(self.job_steps(id))
    }

    fn record<'a>(
        &'a self,
        owner: &'a str,
        lease: Lease,
        name: &'a str,
        output: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<StepRecorded, StoreError>> {
        Box::pin(self.record_step(owner, lease, name, output))
    }

    fn signal<'a>(
        &'a self,
        id: JobId,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<serde_json::Value>, StoreError>> {
        Box::pin(self.job_signal(id, name))
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
