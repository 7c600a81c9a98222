//! Runs one claimed job: finds its handler, enforces its maximum runtime, catches panics,
//! honours cancellation, and turns what happened into a [`Completion`].

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use docket_core::duration::MAX_DELAY;
use docket_core::{ClaimedJob, Failure, FailureClass, Lease, NodeDone, Snooze, Store};
use futures::FutureExt;
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, warn, Instrument};

use crate::completer::Completion;
use crate::intx::{TxCall, TxEnd};
use crate::job::{JobContext, JobError, JobResult};
use crate::metrics::Metrics;
use crate::pace::RunSlot;
use crate::registry::Handler;
use crate::runtime::Shared;
use crate::telemetry::Outcome;
use crate::tracker::{InFlight, StopReason};

/// How a handler run ended.
pub(crate) enum Ended {
    Returned(JobResult),
    Panicked(String),
    /// Dropped after ignoring its cancellation for the grace period.
    Dropped,
}

pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

/// Registers a claimed job with the tracker now and returns its run, to be spawned.
/// Registered before the fetcher that claimed it returns: shutdown joins the fetchers and
/// then reads the tracker, so a job claimed just as shutdown began is always seen (released
/// or finished), never left leased by a task that had not yet started.
pub(crate) fn execute<S: Store>(
    shared: Arc<Shared<S>>,
    job: ClaimedJob,
    permit: OwnedSemaphorePermit,
    deadline: std::time::Instant,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let lease = job.lease();
    let labels = shared.telemetry.claimed(&job, shared.config.lease);
    let span = crate::telemetry::job_span(&job);
    let Some(entry) = shared.tracker.insert(lease, Some(permit), deadline, labels) else {
        // Dropping the permit frees the credit; the running execution owns the job.
        if let Some(p) = shared.pace.get(&job.queue) {
            p.left_buffer();
        }
        warn!(job = %lease.id, attempt = lease.attempt,
              "claimed a job again that is still running here (an earlier claim was lost, as in a server crash); the running execution keeps it");
        return None;
    };
    Some(run(shared, job, entry).instrument(span))
}

async fn run<S: Store>(shared: Arc<Shared<S>>, job: ClaimedJob, entry: Arc<InFlight>) {
    let lease = entry.lease;
    // Claimed ahead of a free slot (prefetch): wait for one — leased, heartbeated, and never
    // started once the lease is lost or about to be.
    let slot = wait_for_slot(&shared, &entry, &job.queue).await;
    let pace = shared.pace.get(&job.queue).cloned();
    if let Some(p) = &pace {
        p.left_buffer();
    }
    let Some(permit) = slot else {
        return;
    };
    let run_slot = RunSlot {
        _permit: permit,
        pace: pace.clone(),
    };
    // The attempt a handler sees counts runs: claims given back unrun (releases, snoozes)
    // raised the fencing token but are not attempts of the job.
    let (run, max_runs) =
        if docket_core::mutants::active(docket_core::mutants::Mutant::ReleaseCountsRun) {
            (job.attempt, job.max_attempts)
        } else {
            (job.run(), job.max_runs())
        };
    let ctx = JobContext {
        id: job.id,
        attempt: run,
        max_attempts: max_runs,
        fence: job.attempt,
        queue: job.queue.clone(),
        kind: job.kind.clone(),
        metadata: job.metadata.clone(),
        cancel: entry.cancel.clone(),
        store: shared.erased_store.clone(),
        reason: entry.reason_cell(),
        run: Default::default(),
        max_output: shared.config.max_output_bytes,
        progress: entry.progress_cell(),
        steps: shared.step_store.clone(),
        entry: entry.clone(),
        claimed_at: job.lease_expires_at
            - chrono::TimeDelta::from_std(shared.config.lease).unwrap_or_default(),
    };
    let Some((handler, timeout)) = shared.registry.get(&job.kind) else {
        let known = shared.registry.kinds().join(", ");
        let failure = Failure {
            lease,
            class: FailureClass::Retry,
            message: format!(
                "no handler for kind {:?} in this worker (known: [{known}]); retried with backoff so a deploy that adds it picks the job up",
                job.kind
            ),
            retry_in: None,
        };
        finish(&shared, &entry, Completion::Fail(failure)).await;
        return;
    };
    let max_runtime = timeout.unwrap_or(shared.config.max_runtime);
    // A workflow node's success goes to `complete_nodes`, which resolves its children.
    let node = docket_core::workflow::marker(&job.metadata).is_some();
    let started = std::time::Instant::now();
    // The handler records its output here (`set_output`); it is written with the success.
    let run = ctx.run.clone();
    // And the signal a snooze waits for (`wait_signal`): the snooze is then a park.
    let (attempt, max_attempts) = (job.attempt, job.max_attempts);
    let ended = match handler {
        Handler::Plain(f) => run_plain(&shared, &entry, f(job.args, ctx), max_runtime).await,
        Handler::InTransaction(f) => {
            let call = TxCall {
                store: shared.store.clone(),
                args: job.args,
                ctx,
                owner: shared.config.owner.clone(),
                lease,
                entry: entry.clone(),
                stop: Box::pin(must_stop(shared.clone(), entry.clone(), max_runtime)),
            };
            match f(call).await {
                TxEnd::Committed => {
                    Metrics::add(&shared.metrics.completed, 1);
                    shared
                        .telemetry
                        .finished(&entry.labels, Outcome::Succeeded, started.elapsed());
                    shared.tracker.remove(lease);
                    return;
                }
                TxEnd::Other(ended) => ended,
            }
        }
    };
    // The slot is free as soon as the handler is done: the next buffered job starts while
    // this one's outcome is being written.
    drop(run_slot);
    let ran = started.elapsed();
    if let Some(p) = &pace {
        p.record(ran);
    }
    let output = run.output.lock().expect("poisoned").take();
    let decided = outcome(&shared, &entry, lease, ended, max_runtime, output).map(|c| match c {
        Completion::Complete(lease) if node => Completion::Node(NodeDone {
            lease,
            output: None,
        }),
        Completion::Output(o) if node => Completion::Node(NodeDone {
            lease: o.lease,
            output: Some(o.value),
        }),
        c => c,
    });
    let completion = match decided {
        Some(Completion::Snooze(s)) => match run.park.lock().expect("poisoned").take() {
            Some(signal) => Some(Completion::Park(docket_core::Park {
                lease: s.lease,
                delay: s.delay,
                signal,
            })),
            None => Some(Completion::Snooze(s)),
        },
        other => other,
    };
    match completion {
        Some(c) => {
            let t = &shared.telemetry;
            t.finished(&entry.labels, outcome_of(&c, attempt, max_attempts), ran);
            finish(&shared, &entry, c).await
        }
        None => {
            shared.telemetry.lease_lost(&entry.labels);
            shared.tracker.remove(lease)
        }
    }
}

/// The metric outcome of a completion (a retry with no attempt left is the job's death).
fn outcome_of(c: &Completion, attempt: i32, max_attempts: i32) -> Outcome {
    match c {
        Completion::Complete(_) | Completion::Output(_) | Completion::Node(_) => Outcome::Succeeded,
        Completion::Snooze(_) | Completion::Park(_) => Outcome::Snoozed,
        Completion::Release(_) => Outcome::Released,
        Completion::Fail(f) => match f.class {
            FailureClass::Retry if attempt < max_attempts => Outcome::Retried,
            FailureClass::Retry | FailureClass::Discard => Outcome::Dead,
            FailureClass::Cancel => Outcome::Cancelled,
        },
    }
}

/// Waits for one of the queue's run slots. `None` when the job must not start: its lease is
/// lost (nothing is written: the lease is someone else's), or it was cancelled, timed out in
/// the buffer, the worker is shutting down, or its lease is about to run out (it is released:
/// back to the queue at once, its attempt not counted).
async fn wait_for_slot<S: Store>(
    shared: &Arc<Shared<S>>,
    entry: &Arc<InFlight>,
    queue: &str,
) -> Option<OwnedSemaphorePermit> {
    let slots = shared.run_slots.get(queue)?.clone();
    if docket_core::mutants::active(docket_core::mutants::Mutant::BufferedStartsAfterLost) {
        return slots.acquire_owned().await.ok();
    }
    let slot = match slots.clone().try_acquire_owned() {
        Ok(p) => Some(p),
        Err(_) => tokio::select! {
            p = slots.acquire_owned() => p.ok(),
            _ = entry.cancel.cancelled() => None,
            _ = shared.buffer_release.cancelled() => None,
            _ = tokio::time::sleep(shared.config.prefetch_timeout) => {
                // Waited too long: this worker claimed deeper than it runs. Halve the depth.
                if let Some(d) = shared.depth.get(queue) {
                    let _ = d.fetch_update(
                        std::sync::atomic::Ordering::Relaxed,
                        std::sync::atomic::Ordering::Relaxed,
                        |d| Some(d / 2),
                    );
                }
                None
            }
        },
    };
    let margin = stop_margin(&shared.config);
    let nearly_expired = entry
        .deadline()
        .checked_sub(margin)
        .is_none_or(|t| std::time::Instant::now() >= t);
    match (slot, entry.reason()) {
        (Some(p), None) if !nearly_expired && !shared.buffer_release.is_cancelled() => Some(p),
        (_, Some(StopReason::LeaseLost)) => {
            shared.telemetry.lease_lost(&entry.labels);
            shared.tracker.remove(entry.lease);
            shared.credit_returned.notify_one();
            None
        }
        _ => {
            let t = &shared.telemetry;
            t.finished(&entry.labels, Outcome::Released, Duration::ZERO);
            finish(shared, entry, Completion::Release(entry.lease)).await;
            None
        }
    }
}

/// How long before its local lease deadline a job must stop (a running one) or must not
/// start (a buffered one): a tenth of the lease, or the cancel grace when longer, at most a
/// third of the lease (see [`must_stop`]).
fn stop_margin(config: &crate::config::WorkerConfig) -> Duration {
    (config.lease / 10)
        .max(config.cancel_grace)
        .min(config.lease / 3)
}

/// Completes when the job must stop: its token fired (lease lost by heartbeat, operator
/// cancel, shutdown), it ran past `max_runtime`, or its lease is about to run out without a
/// successful heartbeat — a lease the worker cannot renew may belong to someone else by now
/// (the database clock decides, and a cut-off worker cannot ask it), so it stops a tenth of a
/// lease early — or earlier by the cancel grace, so that a handler given its grace to stop
/// (a child process given SIGTERM, then SIGKILL) is gone before the database lets another
/// worker claim the job. Capped at a third of the lease, so heartbeats keep their slack.
async fn must_stop<S: Store>(shared: Arc<Shared<S>>, entry: Arc<InFlight>, max_runtime: Duration) {
    let watchdog = async {
        if docket_core::mutants::no_worker_guards()
            || docket_core::mutants::active(docket_core::mutants::Mutant::NoLeaseWatchdog)
        {
            // Test builds only: the watchdog is off, the database fence alone must hold.
            return std::future::pending::<()>().await;
        }
        let margin = stop_margin(&shared.config);
        loop {
            let d = entry.deadline();
            tokio::time::sleep_until(d.checked_sub(margin).unwrap_or(d).into()).await;
            if entry.deadline() == d {
                warn!(job = %entry.lease.id, "lease about to run out without a successful heartbeat; stopping the handler");
                Metrics::add(&shared.metrics.leases_lost, 1);
                entry.stop(StopReason::LeaseLost);
                return;
            }
        }
    };
    tokio::select! {
        _ = entry.cancel.cancelled() => {}
        _ = tokio::time::sleep(max_runtime) => entry.stop(StopReason::TimedOut),
        _ = watchdog => {}
    }
}

async fn run_plain<S: Store>(
    shared: &Arc<Shared<S>>,
    entry: &Arc<InFlight>,
    fut: futures::future::BoxFuture<'static, JobResult>,
    max_runtime: Duration,
) -> Ended {
    // Polled in place (no task per job): a panic is caught as a value, and a handler that
    // ignores its token is dropped after the grace period.
    let mut fut = std::panic::AssertUnwindSafe(fut).catch_unwind();
    // A handler that is done at its first poll needs no watchdog: arming one costs two
    // timers (registered with the runtime's timer wheel and removed again) per job, and it
    // could not have stopped that poll anyway.
    if let std::task::Poll::Ready(r) = futures::poll!(&mut fut) {
        return match r {
            Ok(r) => Ended::Returned(r),
            Err(p) => Ended::Panicked(panic_message(&*p)),
        };
    }
    let done = tokio::select! {
        r = &mut fut => Some(r),
        _ = must_stop(shared.clone(), entry.clone(), max_runtime) => None,
    };
    let r = match done {
        Some(r) => r,
        None => match tokio::time::timeout(shared.config.cancel_grace, &mut fut).await {
            Ok(r) => r,
            Err(_) => return Ended::Dropped,
        },
    };
    match r {
        Ok(r) => Ended::Returned(r),
        Err(p) => Ended::Panicked(panic_message(&*p)),
    }
}

/// Decides what to write. `None`: nothing (the lease is lost; whatever we wrote would be
/// fenced off anyway).
fn outcome<S: Store>(
    shared: &Shared<S>,
    entry: &InFlight,
    lease: Lease,
    ended: Ended,
    max_runtime: Duration,
    output: Option<serde_json::Value>,
) -> Option<Completion> {
    let fail = |class, message: String, retry_in| {
        Some(Completion::Fail(Failure {
            lease,
            class,
            message,
            retry_in,
        }))
    };
    if let Ended::Panicked(msg) = &ended {
        Metrics::add(&shared.metrics.panics, 1);
        warn!(job = %lease.id, "handler panicked");
        if entry.reason().is_none() {
            return fail(
                FailureClass::Retry,
                format!("handler panicked: {msg}"),
                None,
            );
        }
    }
    match (entry.reason(), ended) {
        (Some(StopReason::LeaseLost), _) => {
            debug!(job = %lease.id, "lease lost; outcome dropped");
            None
        }
        (_, Ended::Returned(Ok(()))) => Some(match output {
            Some(value) => Completion::Output(docket_core::Output { lease, value }),
            None => Completion::Complete(lease),
        }),
        (Some(StopReason::Cancelled), _) => {
            fail(FailureClass::Cancel, "cancelled by operator".into(), None)
        }
        (Some(StopReason::TimedOut), _) => fail(
            FailureClass::Retry,
            format!("timed out after {}", humantime_secs(max_runtime)),
            None,
        ),
        (Some(StopReason::Shutdown), Ended::Returned(Err(JobError::Discard(m)))) => {
            fail(FailureClass::Discard, m, None)
        }
        (Some(StopReason::Shutdown), _) => Some(Completion::Release(lease)),
        (None, Ended::Returned(Err(e))) => match e {
            // Absurd delays are clamped rather than rejected: one handler's bad value must
            // not fail the whole batch it is written with.
            JobError::Retry { message, delay } => fail(
                FailureClass::Retry,
                message,
                delay.map(|d| d.min(MAX_DELAY)),
            ),
            JobError::Discard(m) => fail(FailureClass::Discard, m, None),
            JobError::Cancel(m) => fail(FailureClass::Cancel, m, None),
            JobError::Snooze(delay) => Some(Completion::Snooze(Snooze {
                lease,
                delay: delay.min(MAX_DELAY),
            })),
        },
        (None, Ended::Panicked(msg)) => fail(
            FailureClass::Retry,
            format!("handler panicked: {msg}"),
            None,
        ),
        (None, Ended::Dropped) => fail(FailureClass::Retry, "handler was dropped".into(), None),
    }
}

fn humantime_secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

async fn finish<S: Store>(shared: &Shared<S>, entry: &InFlight, c: Completion) {
    entry.mark_finished();
    // Sending may wait when the completer is behind; the slot stays taken meanwhile, which is
    // the back-pressure on fetching.
    if shared.completions.send(c).await.is_err() {
        // The completer is gone: shutdown stopped it (step 5) or it died. The entry stays
        // tracked so that shutdown's last step releases the job at once; removing it here
        // left a job whose handler ended between those two steps running until its lease
        // expired (seen as a second SIGTERM leaving its `--exec` job running).
        return;
    }
    entry.release_slot();
    shared.credit_returned.notify_one();
}
