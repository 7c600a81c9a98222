//! In-transaction handlers ([`crate::TxJob`]): the handler's writes and its job's completion
//! in one transaction of the engine's ([`docket_core::InTransaction`]). Built at
//! registration, where the engine's capability is known, and called by the executor through
//! [`TxCall`], so the executor itself needs no such capability.

use std::sync::Arc;

use docket_core::{InTransaction, Lease};
use futures::future::BoxFuture;
use futures::FutureExt;
use tracing::warn;

use crate::executor::{panic_message, Ended};
use crate::job::{JobContext, JobError, TxJob};
use crate::registry::bad_args;
use crate::tracker::{InFlight, StopReason};

/// Everything one in-transaction run needs.
pub(crate) struct TxCall<S> {
    pub store: S,
    pub args: serde_json::Value,
    pub ctx: JobContext,
    pub owner: String,
    pub lease: Lease,
    pub entry: Arc<InFlight>,
    /// Completes when the job must stop (lost lease, cancel, timeout, shutdown).
    pub stop: BoxFuture<'static, ()>,
}

/// How it ended.
pub(crate) enum TxEnd {
    /// Handler writes and completion committed together.
    Committed,
    /// Rolled back; the executor writes this outcome as for a plain handler.
    Other(Ended),
}

fn retry(what: &str, e: impl std::fmt::Display) -> TxEnd {
    TxEnd::Other(Ended::Returned(Err(JobError::retry(format!(
        "{what}: {e}"
    )))))
}

/// Runs job `J` inside a transaction of `S` and commits it with the job's completion.
pub(crate) async fn run<S: InTransaction, J: TxJob<S>>(call: TxCall<S>) -> TxEnd {
    let TxCall {
        store,
        args,
        ctx,
        owner,
        lease,
        entry,
        stop,
    } = call;
    let job: J = match serde_json::from_value(args) {
        Ok(j) => j,
        Err(e) => return TxEnd::Other(Ended::Returned(Err(bad_args(J::KIND, e)))),
    };
    let mut tx = match store.begin().await {
        Ok(tx) => tx,
        Err(e) => return retry("could not begin the job's transaction", e),
    };
    let run = ctx.run.clone();
    let ran = {
        let fut = std::panic::AssertUnwindSafe(job.run(ctx, S::conn(&mut tx))).catch_unwind();
        tokio::select! {
            r = fut => Some(r),
            _ = stop => None,
        }
    };
    let ended = match ran {
        None => Ended::Dropped,
        Some(Err(p)) => Ended::Panicked(panic_message(&*p)),
        Some(Ok(Err(e))) => Ended::Returned(Err(e)),
        Some(Ok(Ok(()))) => {
            // The completion joins the handler's writes: both commit, or neither.
            let output = run.output.lock().expect("poisoned").take();
            let completed = match output {
                Some(value) => {
                    let o = docket_core::Output { lease, value };
                    store.complete_output_in(&mut tx, &owner, &o).await
                }
                None => store.complete_in(&mut tx, &owner, lease).await,
            };
            match completed {
                Ok(()) => match S::commit(tx).await {
                    Ok(()) => return TxEnd::Committed,
                    Err(e) => {
                        // Unknown whether it committed: leave the job to its lease. If it did
                        // not, the reaper requeues it and the handler's writes are gone too.
                        warn!(job = %lease.id, error = %e, "commit of in-transaction job failed");
                        entry.stop(StopReason::LeaseLost);
                        return TxEnd::Other(Ended::Dropped);
                    }
                },
                Err(e) => {
                    warn!(job = %lease.id, error = %e, "in-transaction completion rejected; rolling back");
                    let _ = S::rollback(tx).await;
                    entry.stop(StopReason::LeaseLost);
                    return TxEnd::Other(Ended::Dropped);
                }
            }
        }
    };
    let _ = S::rollback(tx).await;
    TxEnd::Other(ended)
}
