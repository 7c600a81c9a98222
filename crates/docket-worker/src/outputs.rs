//! Typed reads of job outputs, for any store: `store.output::<T>(id)` and
//! `store.wait_output::<T>(id, timeout)`.

use std::future::Future;
use std::time::Duration;

use docket_core::{JobId, JobState, ListenSupport, Listener, Store, StoreError, Wake};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// Why an output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The store failed; `NotFound` when the job does not exist or no longer (a plain
    /// success deleted on completion, an output past its retention).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The job finished without an output: dead, cancelled, or succeeded without one.
    #[error("job {id} ended {state} without an output")]
    Ended {
        /// The job.
        id: JobId,
        /// Its final state.
        state: JobState,
    },
    /// The job had not finished when the wait ran out.
    #[error("job {id} had no output after {waited:?}")]
    TimedOut {
        /// The job.
        id: JobId,
        /// How long the caller waited.
        waited: Duration,
    },
    /// The stored output is not a `T`.
    #[error("job {id}'s output does not decode as the type asked for: {error}")]
    Decode {
        /// The job.
        id: JobId,
        /// The decoding error.
        error: serde_json::Error,
    },
}

/// How long a waiter sleeps between reads at most: with a listener the hint usually comes
/// first (the reads only cover a dropped connection), without one this is the polling
/// interval it grows to.
const MAX_POLL_LISTENING: Duration = Duration::from_secs(2);
const MAX_POLL: Duration = Duration::from_millis(500);

/// Typed outputs on every [`Store`].
pub trait Outputs: Store {
    /// The job's output as a `T`: `None` while the job has not finished (pending or
    /// running); [`OutputError::Ended`] when it finished without one.
    fn output<T: DeserializeOwned>(
        &self,
        id: JobId,
    ) -> impl Future<Output = Result<Option<T>, OutputError>> + Send {
        async move {
            let o = self.job_output(id).await?;
            match (o.state, o.output) {
                (_, Some(v)) => serde_json::from_value(v)
                    .map(Some)
                    .map_err(|error| OutputError::Decode { id, error }),
                (JobState::Waiting | JobState::Pending | JobState::Running, None) => Ok(None),
                (state, None) => Err(OutputError::Ended { id, state }),
            }
        }
    }

    /// Waits up to `timeout` for the job's output. Woken by the engine's notifications
    /// where it has them (PostgreSQL's LISTEN on `<schema>_done`: one connection of the
    /// store's pool shared by all its waiters while any waits; SQLite and MariaDB:
    /// completions in this process), reading the row again
    /// at growing intervals otherwise (10 ms up to 500 ms) — the hint only says when to
    /// look, the row says what happened.
    fn wait_output<T: DeserializeOwned + Send>(
        &self,
        id: JobId,
        timeout: Duration,
    ) -> impl Future<Output = Result<T, OutputError>> + Send {
        async move {
            let deadline = Instant::now() + timeout;
            // Listen before the first read, so a completion between the two is heard.
            let mut hints = match self.listen_support(None) {
                ListenSupport::Yes => self.listen_outputs(None).await.ok(),
                ListenSupport::No(_) => None,
            };
            let mut poll = Duration::from_millis(10);
            loop {
                if let Some(v) = self.output::<T>(id).await? {
                    return Ok(v);
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(OutputError::TimedOut {
                        id,
                        waited: timeout,
                    });
                }
                let until = deadline.min(now + poll);
                let max = if hints.is_some() {
                    MAX_POLL_LISTENING
                } else {
                    MAX_POLL
                };
                poll = (poll * 2).min(max);
                let Some(l) = hints.as_mut() else {
                    tokio::time::sleep_until(until).await;
                    continue;
                };
                // Wait for this job's hint (others' are skipped) or the next read.
                loop {
                    tokio::select! {
                        r = l.recv() => match r {
                            // This job's, or hints were missed: read again.
                            Ok(Some(Wake::Done(done))) if done == id => break,
                            Ok(Some(Wake::Unreadable)) => break,
                            Ok(Some(_)) => continue,
                            // The connection dropped: poll from now on.
                            Ok(None) | Err(_) => {
                                hints = None;
                                break;
                            }
                        },
                        _ = tokio::time::sleep_until(until) => break,
                    }
                }
            }
        }
    }
}

impl<S: Store> Outputs for S {}
