//! Typed enqueue: the queue and kind come from the job's type, so the kind a worker looks up
//! and the arguments it decodes cannot drift apart from what was enqueued.
//!
//! ```text
//! store.enqueue_job(&SendWelcome { user_id: 42 }).await?;                       // queue, kind from the type
//! store.enqueue_job_with(&SendWelcome { user_id: 42 }, |j| j.priority(-5)).await?;
//! store.enqueue_job_in(&mut tx, &SendWelcome { user_id: 42 }).await?;             // in the caller's transaction
//! ```

use std::future::Future;

use docket_core::{Enqueued, InTransaction, NewJob, Store, StoreError, ValidationError};

use crate::job::{Job, TxJob};

fn args<T: serde::Serialize>(job: &T) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(job).map_err(|e| {
        StoreError::Invalid(ValidationError::Other {
            what: "job args",
            reason: e.to_string(),
        })
    })
}

/// The [`NewJob`] for a typed job: its type's queue and kind, its value as the args.
pub fn new_job<J: Job>(job: &J) -> Result<NewJob, StoreError> {
    Ok(NewJob::new(J::QUEUE, J::KIND, args(job)?))
}

/// The [`NewJob`] for a typed in-transaction job of engine `S`.
pub fn new_tx_job<S: InTransaction, J: TxJob<S>>(job: &J) -> Result<NewJob, StoreError> {
    Ok(NewJob::new(J::QUEUE, J::KIND, args(job)?))
}

/// Enqueue typed jobs on any store.
pub trait EnqueueJob {
    /// Enqueues `job` in its type's queue under its type's kind.
    fn enqueue_job<J: Job>(
        &self,
        job: &J,
    ) -> impl Future<Output = Result<Enqueued, StoreError>> + Send;

    /// [`EnqueueJob::enqueue_job`] with options set on the [`NewJob`] (priority, delay,
    /// unique key, ...).
    fn enqueue_job_with<J: Job>(
        &self,
        job: &J,
        options: impl FnOnce(NewJob) -> NewJob + Send,
    ) -> impl Future<Output = Result<Enqueued, StoreError>> + Send;

    /// Enqueues an in-transaction job in its type's queue under its type's kind.
    fn enqueue_tx_job<J: TxJob<Self>>(
        &self,
        job: &J,
    ) -> impl Future<Output = Result<Enqueued, StoreError>> + Send
    where
        Self: InTransaction;

    /// Enqueues `job` inside the caller's transaction on `conn` (the outbox: the job exists
    /// iff the transaction commits).
    fn enqueue_job_in<J: Job>(
        &self,
        conn: &mut <Self as InTransaction>::Conn,
        job: &J,
    ) -> impl Future<Output = Result<Enqueued, StoreError>> + Send
    where
        Self: InTransaction;
}

impl<S: Store + Sync> EnqueueJob for S {
    async fn enqueue_job<J: Job>(&self, job: &J) -> Result<Enqueued, StoreError> {
        self.enqueue(&new_job(job)?).await
    }

    async fn enqueue_job_with<J: Job>(
        &self,
        job: &J,
        options: impl FnOnce(NewJob) -> NewJob + Send,
    ) -> Result<Enqueued, StoreError> {
        self.enqueue(&options(new_job(job)?)).await
    }

    async fn enqueue_tx_job<J: TxJob<Self>>(&self, job: &J) -> Result<Enqueued, StoreError>
    where
        Self: InTransaction,
    {
        self.enqueue(&new_tx_job::<Self, J>(job)?).await
    }

    async fn enqueue_job_in<J: Job>(
        &self,
        conn: &mut <Self as InTransaction>::Conn,
        job: &J,
    ) -> Result<Enqueued, StoreError>
    where
        Self: InTransaction,
    {
        let new = new_job(job)?;
        self.enqueue_in(conn, &new).await
    }
}
