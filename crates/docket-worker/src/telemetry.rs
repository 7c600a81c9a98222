//! What a worker tells the outside about its jobs.
//!
//! * **Metrics** through the [`metrics`] facade: counters and histograms per queue and kind
//!   (the names are listed in docs/metrics.md). The facade records nothing until an
//!   application installs a recorder — any recorder: `docket work --metrics-listen` and
//!   `docket_dashboard::metrics` install the Prometheus one — so this is the library hook.
//! * **Samples**: per-queue, per-minute totals (succeeded, failed, queue wait, run time) that
//!   the `SampleFlush` service adds to the database every `sample_interval`, so the
//!   dashboard's charts read sixty small rows instead of an hour of finished jobs. Minutes
//!   are on the database's clock: a job's claim time is its lease expiry minus the lease.
//! * **Spans**: one `docket.job` span per run (see [`job_span`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::metrics::{counter, histogram};
use chrono::{DateTime, DurationRound, Utc};
use docket_core::{ClaimedJob, Sample, Store};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::runtime::Shared;
use crate::service::{Cadence, Service};
use crate::supervisor::Phase;

/// The queue and kind of a job in flight, for labels.
#[derive(Debug, Clone)]
pub struct Labels {
    /// The job's queue.
    pub queue: Arc<str>,
    /// The job's kind.
    pub kind: Arc<str>,
    /// When it was claimed, by the database's clock.
    pub claimed_at: DateTime<Utc>,
}

/// How a run ended, for `docket_jobs_completed_total{outcome}` (disjoint outcomes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Succeeded.
    Succeeded,
    /// Failed with attempts left: back to pending with a backoff.
    Retried,
    /// Failed for the last time, or discarded.
    Dead,
    /// Cancelled (by the handler or an operator's request).
    Cancelled,
    /// Snoozed: pending again later, no attempt charged.
    Snoozed,
    /// Handed back unstarted or interrupted by shutdown (no attempt charged).
    Released,
}

impl Outcome {
    /// The `outcome` label's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Retried => "retried",
            Outcome::Dead => "dead",
            Outcome::Cancelled => "cancelled",
            Outcome::Snoozed => "snoozed",
            Outcome::Released => "released",
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Agg {
    succeeded: i64,
    failed: i64,
    wait_ms_sum: i64,
    wait_count: i64,
    run_ms_sum: i64,
    wait_hist: Vec<i64>,
    run_hist: Vec<i64>,
}

/// A sample row's identity: queue and minute.
type SampleKey = (Arc<str>, DateTime<Utc>);

/// A worker's telemetry: metrics out at once, samples kept until the next flush.
#[derive(Debug, Default)]
pub struct Telemetry {
    samples: Mutex<HashMap<SampleKey, Agg>>,
}

fn minute(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(chrono::Duration::minutes(1)).unwrap_or(t)
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6
}

/// Most sample rows one worker keeps between flushes (queues × minutes); beyond it new
/// minutes are dropped rather than grow without bound while the database is unreachable.
const MAX_SAMPLE_ROWS: usize = 10_000;

impl Outcome {
    /// Every outcome, in the order of the docs.
    pub const ALL: [Outcome; 6] = [
        Outcome::Succeeded,
        Outcome::Retried,
        Outcome::Dead,
        Outcome::Cancelled,
        Outcome::Snoozed,
        Outcome::Released,
    ];
}

/// The `op` label values of `docket_fenced_writes_total`.
const FENCED_OPS: [&str; 4] = ["complete", "fail", "snooze", "release"];

/// Series created at 0 per worker start at most (queues × kinds × labels): a worker of
/// thousands of kinds gets its series as they happen instead.
const MAX_ZERO_SERIES: usize = 10_000;

impl Telemetry {
    /// Creates every counter series this worker can move, at 0, for its `queues` and the
    /// registered `kinds`: `rate()` and `increase()` need a first sample before the first
    /// event, or the first failure of a run never shows in an alert.
    pub fn zero(&self, queues: &[String], kinds: &[String]) {
        if queues.len() * kinds.len() * (Outcome::ALL.len() + FENCED_OPS.len() + 3)
            > MAX_ZERO_SERIES
        {
            return;
        }
        for q in queues {
            for k in kinds {
                let l = || [("queue", q.clone()), ("kind", k.clone())];
                counter!("docket_jobs_claimed_total", &l()).increment(0);
                counter!("docket_jobs_failed_total", &l()).increment(0);
                counter!("docket_leases_lost_total", &l()).increment(0);
                for o in Outcome::ALL {
                    let mut labels = l().to_vec();
                    labels.push(("outcome", o.as_str().to_string()));
                    counter!("docket_jobs_completed_total", &labels).increment(0);
                }
                for op in FENCED_OPS {
                    let mut labels = l().to_vec();
                    labels.push(("op", op.to_string()));
                    counter!("docket_fenced_writes_total", &labels).increment(0);
                }
            }
        }
    }

    fn add(&self, queue: &Arc<str>, at: DateTime<Utc>, f: impl FnOnce(&mut Agg)) {
        let mut m = self.samples.lock().expect("poisoned");
        let key = (queue.clone(), minute(at));
        if m.len() >= MAX_SAMPLE_ROWS && !m.contains_key(&key) {
            return;
        }
        f(m.entry(key).or_default());
    }

    /// A job was claimed with a lease of `lease`; returns its labels.
    pub fn claimed(&self, job: &ClaimedJob, lease: Duration) -> Labels {
        let lease = chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::zero());
        let claimed_at = job.lease_expires_at - lease;
        let labels = Labels {
            queue: job.queue.as_str().into(),
            kind: job.kind.as_str().into(),
            claimed_at,
        };
        let wait = (claimed_at - job.run_at).max(chrono::Duration::zero());
        let (q, k) = (labels.queue.to_string(), labels.kind.to_string());
        counter!("docket_jobs_claimed_total", "queue" => q.clone(), "kind" => k).increment(1);
        histogram!("docket_job_queue_wait_seconds", "queue" => q.clone()).record(secs(wait));
        if job.run_at > job.created_at && docket_core::workflow::marker(&job.metadata).is_some() {
            // A node with parents becomes ready (run_at) when its last edge is consumed.
            histogram!("docket_workflow_dependency_wait_seconds", "queue" => q.clone())
                .record(secs(job.run_at - job.created_at));
        }
        self.add(&labels.queue, claimed_at, |a| {
            a.wait_ms_sum += wait.num_milliseconds();
            a.wait_count += 1;
            bump(&mut a.wait_hist, wait.num_milliseconds());
        });
        labels
    }

    /// A run ended with `outcome` after `ran` (zero for a job that never started).
    pub fn finished(&self, l: &Labels, outcome: Outcome, ran: Duration) {
        let (q, k) = (l.queue.to_string(), l.kind.to_string());
        counter!("docket_jobs_completed_total", "queue" => q.clone(), "kind" => k.clone(),
                 "outcome" => outcome.as_str())
        .increment(1);
        let failed = matches!(
            outcome,
            Outcome::Retried | Outcome::Dead | Outcome::Cancelled
        );
        if failed {
            counter!("docket_jobs_failed_total", "queue" => q.clone(), "kind" => k.clone())
                .increment(1);
        }
        if outcome != Outcome::Released {
            histogram!("docket_job_run_seconds", "queue" => q, "kind" => k)
                .record(ran.as_secs_f64());
        }
        let at = l.claimed_at + chrono::Duration::from_std(ran).unwrap_or_default();
        self.add(&l.queue, at, |a| {
            match outcome {
                Outcome::Succeeded => a.succeeded += 1,
                _ if failed => a.failed += 1,
                _ => {}
            }
            let ran_ms = ran.as_millis().min(i64::MAX as u128) as i64;
            a.run_ms_sum += ran_ms;
            // A release never ran: it is no run time (as for the Prometheus histogram).
            if outcome != Outcome::Released {
                bump(&mut a.run_hist, ran_ms);
            }
        });
    }

    /// A lease was found lost (heartbeat refused, or it ran out locally).
    pub fn lease_lost(&self, l: &Labels) {
        counter!("docket_leases_lost_total", "queue" => l.queue.to_string(),
                 "kind" => l.kind.to_string())
        .increment(1);
    }

    /// A fenced write (`op`: complete, fail, snooze, release) was refused.
    pub fn fenced(&self, l: Option<&Labels>, op: &'static str) {
        let (q, k) = l
            .map(|l| (l.queue.to_string(), l.kind.to_string()))
            .unwrap_or_default();
        counter!("docket_fenced_writes_total", "queue" => q, "kind" => k, "op" => op).increment(1);
    }

    /// Takes the samples gathered since the last call.
    pub fn drain(&self) -> Vec<Sample> {
        let m = std::mem::take(&mut *self.samples.lock().expect("poisoned"));
        m.into_iter()
            .map(|((queue, minute), a)| Sample {
                queue: queue.to_string(),
                minute,
                succeeded: a.succeeded,
                failed: a.failed,
                wait_ms_sum: a.wait_ms_sum,
                wait_count: a.wait_count,
                run_ms_sum: a.run_ms_sum,
                wait_hist: a.wait_hist,
                run_hist: a.run_hist,
            })
            .collect()
    }

    /// Puts samples back after a failed flush (they are added to what came since).
    pub fn restore(&self, samples: Vec<Sample>) {
        for s in samples {
            let q: Arc<str> = s.queue.as_str().into();
            self.add(&q, s.minute, |a| {
                a.succeeded += s.succeeded;
                a.failed += s.failed;
                a.wait_ms_sum += s.wait_ms_sum;
                a.wait_count += s.wait_count;
                a.run_ms_sum += s.run_ms_sum;
                docket_core::histogram::add(&mut a.wait_hist, &s.wait_hist);
                docket_core::histogram::add(&mut a.run_hist, &s.run_hist);
            });
        }
    }
}

/// The span of one run: `docket.job` with the job's id, queue, kind and attempt. With the
/// `otel` feature its parent is the span that enqueued the job (W3C trace context carried in
/// the job's metadata, see [`crate::trace`]).
pub fn job_span(job: &ClaimedJob) -> tracing::Span {
    let span = tracing::info_span!("docket.job", job.id = job.id.0, job.queue = %job.queue,
                                   job.kind = %job.kind, job.attempt = job.attempt);
    crate::trace::adopt_parent(&span, &job.metadata);
    span
}

/// Adds the worker's samples to the database every `sample_interval`, and once more when
/// the worker stops.
pub(crate) struct SampleFlush<S: Store> {
    pub shared: Arc<Shared<S>>,
    pub cadence: Cadence,
}

impl<S: Store> SampleFlush<S> {
    /// One flush; on failure the samples are kept for the next one.
    pub async fn run_once(&self) -> Result<usize, docket_core::StoreError> {
        let batch = self.shared.telemetry.drain();
        let n = batch.len();
        if n == 0 {
            return Ok(0);
        }
        match self.shared.store.record_samples(&batch).await {
            Ok(()) => Ok(n),
            Err(e) => {
                self.shared.telemetry.restore(batch);
                Err(e)
            }
        }
    }
}

impl<S: Store> Service for SampleFlush<S> {
    fn name(&self) -> &'static str {
        "samples"
    }

    fn phase(&self) -> Phase {
        Phase::Service
    }

    async fn run(self, stop: CancellationToken) {
        let mut last = None;
        while self.cadence.turn("samples", &mut last, &stop).await {
            if let Err(e) = self.run_once().await {
                warn!(error = %e, "sample flush failed; kept for the next interval");
            }
        }
        let last = self.run_once();
        if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(2), last).await {
            warn!(error = %e, "last sample flush failed; those samples are lost");
        }
    }
}

/// Counts `ms` in its bucket of `h` (sized on first use).
fn bump(h: &mut Vec<i64>, ms: i64) {
    if h.is_empty() {
        h.resize(docket_core::histogram::BUCKETS, 0);
    }
    h[docket_core::histogram::bucket(ms)] += 1;
}
