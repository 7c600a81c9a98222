//! Type-erased handlers, looked up by kind.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::PgConnection;

use crate::job::{Job, JobContext, JobError, JobResult, TxJob};

type PlainFn = dyn Fn(serde_json::Value, JobContext) -> BoxFuture<'static, JobResult> + Send + Sync;
type TxFn = dyn for<'a> Fn(serde_json::Value, JobContext, &'a mut PgConnection) -> BoxFuture<'a, JobResult>
    + Send
    + Sync;

/// One registered handler.
#[derive(Clone)]
pub enum Handler {
    /// Runs outside any transaction.
    Plain(Arc<PlainFn>),
    /// Runs inside the completing transaction.
    InTransaction(Arc<TxFn>),
}

/// Handlers by kind, plus an optional fallback for any other kind (used by `docket work
/// --exec`, which runs one command for every kind).
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<String, (Handler, Option<Duration>)>,
    fallback: Option<Handler>,
}

fn bad_args(kind: &str, e: serde_json::Error) -> JobError {
    // Arguments that do not deserialize will not deserialize next time either: permanent.
    JobError::discard(format!("invalid args for kind {kind}: {e}"))
}

impl Registry {
    /// Registers a typed job. A later registration of the same kind replaces the earlier.
    pub fn register<J: Job>(&mut self) -> &mut Self {
        let f: Arc<PlainFn> = Arc::new(|args, ctx| {
            Box::pin(async move {
                let job: J = serde_json::from_value(args).map_err(|e| bad_args(J::KIND, e))?;
                job.run(ctx).await
            })
        });
        self.handlers
            .insert(J::KIND.to_string(), (Handler::Plain(f), J::TIMEOUT));
        self
    }

    /// Registers a job that runs inside its completing transaction.
    pub fn register_tx<J: TxJob>(&mut self) -> &mut Self {
        let f: Arc<TxFn> = Arc::new(|args, ctx, tx| {
            Box::pin(async move {
                let job: J = serde_json::from_value(args).map_err(|e| bad_args(J::KIND, e))?;
                job.run(ctx, tx).await
            })
        });
        self.handlers
            .insert(J::KIND.to_string(), (Handler::InTransaction(f), None));
        self
    }

    /// Registers an untyped handler for `kind`.
    pub fn register_fn<F, Fut>(&mut self, kind: &str, f: F) -> &mut Self
    where
        F: Fn(serde_json::Value, JobContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = JobResult> + Send + 'static,
    {
        let f: Arc<PlainFn> = Arc::new(move |args, ctx| Box::pin(f(args, ctx)));
        self.handlers
            .insert(kind.to_string(), (Handler::Plain(f), None));
        self
    }

    /// Handles every kind without a handler of its own.
    pub fn fallback<F, Fut>(&mut self, f: F) -> &mut Self
    where
        F: Fn(serde_json::Value, JobContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = JobResult> + Send + 'static,
    {
        self.fallback = Some(Handler::Plain(Arc::new(move |args, ctx| {
            Box::pin(f(args, ctx))
        })));
        self
    }

    /// Sets the maximum runtime of one kind (overrides the worker default).
    pub fn timeout(&mut self, kind: &str, timeout: Duration) -> &mut Self {
        if let Some(h) = self.handlers.get_mut(kind) {
            h.1 = Some(timeout);
        }
        self
    }

    /// The handler for `kind` and its timeout.
    pub fn get(&self, kind: &str) -> Option<(Handler, Option<Duration>)> {
        self.handlers
            .get(kind)
            .cloned()
            .or_else(|| self.fallback.clone().map(|h| (h, None)))
    }

    /// Registered kinds.
    pub fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self.handlers.keys().cloned().collect();
        k.sort();
        k
    }
}
