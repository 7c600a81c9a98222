//! Type-erased handlers, looked up by kind.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use docket_core::{InTransaction, Store};
use futures::future::BoxFuture;

use crate::intx::{TxCall, TxEnd};
use crate::job::{Job, JobContext, JobError, JobResult, TxJob};

type PlainFn = dyn Fn(serde_json::Value, JobContext) -> BoxFuture<'static, JobResult> + Send + Sync;
/// An in-transaction handler, erased together with the engine's transaction calls (so the
/// registry of an engine without the capability can exist, just never hold one).
type TxFn<S> = dyn Fn(TxCall<S>) -> BoxFuture<'static, TxEnd> + Send + Sync;

/// One registered handler.
pub(crate) enum Handler<S> {
    /// Runs outside any transaction.
    Plain(Arc<PlainFn>),
    /// Runs inside the completing transaction.
    InTransaction(Arc<TxFn<S>>),
}

impl<S> Clone for Handler<S> {
    fn clone(&self) -> Self {
        match self {
            Handler::Plain(f) => Handler::Plain(f.clone()),
            Handler::InTransaction(f) => Handler::InTransaction(f.clone()),
        }
    }
}

/// Handlers by kind, plus an optional fallback for any other kind (used by `docket work
/// --exec`, which runs one command for every kind). Typed by the engine `S` the worker runs
/// on, because in-transaction handlers write through that engine's connection.
pub struct Registry<S> {
    handlers: HashMap<String, (Handler<S>, Option<Duration>)>,
    fallback: Option<Handler<S>>,
}

impl<S> Default for Registry<S> {
    fn default() -> Self {
        Registry {
            handlers: HashMap::new(),
            fallback: None,
        }
    }
}

impl<S> Clone for Registry<S> {
    fn clone(&self) -> Self {
        Registry {
            handlers: self.handlers.clone(),
            fallback: self.fallback.clone(),
        }
    }
}

pub(crate) fn bad_args(kind: &str, e: serde_json::Error) -> JobError {
    // Arguments that do not deserialize will not deserialize next time either: permanent.
    JobError::discard(format!("invalid args for kind {kind}: {e}"))
}

/// Registering needs no engine: a registry for a source without one (a JetStream
/// consumer) is a `Registry<()>`. Only in-transaction handlers need the engine's
/// transactions.
impl<S> Registry<S> {
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
    pub fn register_tx<J: TxJob<S>>(&mut self) -> &mut Self
    where
        S: InTransaction + Store,
    {
        let f: Arc<TxFn<S>> = Arc::new(|call| Box::pin(crate::intx::run::<S, J>(call)));
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
    pub(crate) fn get(&self, kind: &str) -> Option<(Handler<S>, Option<Duration>)> {
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
