//! JetStream as a job source: a worker that takes jobs from a durable pull consumer and runs
//! them with the same [`docket_worker::Registry`] and handlers as the database worker.
//!
//! How Docket's rules map onto a consumer:
//! - **Claim** = a pull request sized to the free slots (never more: a job waits in the
//!   stream, not in a local buffer where its ack timer would run — no prefetch churn).
//! - **Lease** = the consumer's `ack_wait`; **heartbeat** = an in-progress ack (`+WPI`)
//!   every third of it, awaited, for every running job; the job's local deadline moves
//!   only when the server confirmed. A job whose deadline nears without a confirmed beat is
//!   told to stop ([`docket_worker::StopReason::LeaseLost`]), and its outcome is not written.
//! - **Fence**: JetStream takes an ack from any earlier delivery of a message, so the
//!   source checks its own deadline before every write: a run that outlived its delivery
//!   (a pause past `ack_wait`, a partition) writes nothing. See docs/outbox.md for the
//!   boundary this leaves.
//! - **Outcomes**: success → ack; retry → nak with the backoff delay (or the handler's);
//!   discard, cancel, or a retry on the last delivery → a copy on the dead-letter subject
//!   (awaited, with `Nats-Msg-Id` so a repeat is dropped), then term; snooze → nak with its
//!   delay (it spends a delivery); shutdown → nak at once (another worker takes it).
//! - **Attempts** = deliveries. The consumer's `max_deliver` is `max_attempts + 1`: the extra
//!   delivery only dead-letters a job whose last run ended without an outcome (the worker was
//!   killed), so a job is never left undelivered and unrecorded.
//! - **Id** = the stream sequence: stable across redeliveries, the idempotency key handlers
//!   see as `ctx.id`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use docket_worker::external::RunLimits;
use docket_worker::{Registry, StopReason};
use futures::StreamExt;
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::deliver::{self, Flight};
use crate::error::NatsError;

/// How a source runs.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// The stream jobs are in.
    pub stream: String,
    /// The durable consumer's name (shared by every worker of this queue).
    pub consumer: String,
    /// Only subjects matching this filter (e.g. `jobs.email`); `None` for the whole stream.
    pub filter_subject: Option<String>,
    /// Jobs run at once in this process (1..=10,000).
    pub slots: usize,
    /// The lease: how long a delivery is held without an ack or an in-progress beat
    /// (1 s..=1 h).
    pub ack_wait: Duration,
    /// Runs a job may have (1..=1,000); the consumer delivers once more to dead-letter a job
    /// whose last run ended without an outcome.
    pub max_attempts: i32,
    /// Jobs delivered and not yet acknowledged across every worker of the consumer
    /// (JetStream's `max_ack_pending`): the queue's global concurrency limit.
    pub max_in_flight: i64,
    /// Retry delay: base × 2^(attempt−1) with ±25 % jitter, at most `backoff_cap`.
    pub backoff_base: Duration,
    /// The longest retry delay.
    pub backoff_cap: Duration,
    /// Where a dead job's copy goes (a stream other than the source's must capture it).
    pub dead_letter: String,
    /// The longest a handler may run (a kind's own timeout overrides it).
    pub max_runtime: Duration,
    /// How long a handler told to stop may take before it is dropped.
    pub cancel_grace: Duration,
    /// At shutdown, how long running jobs may take to end before they are stopped and
    /// handed back.
    pub shutdown_timeout: Duration,
    /// How long a pull request waits when the stream is empty.
    pub idle_wait: Duration,
    /// The largest output a handler may set (kept nowhere: a delivered job has no row).
    pub max_output_bytes: usize,
    /// Test hook: no watchdog stops a job whose delivery runs out (what a paused process
    /// does), so the check before every write must hold on its own.
    #[doc(hidden)]
    pub unguarded: bool,
}

impl SourceConfig {
    /// Defaults for `stream`'s consumer `consumer`; dead letters to `docket.dead.<stream>`.
    pub fn new(stream: &str, consumer: &str) -> Self {
        SourceConfig {
            stream: stream.to_string(),
            consumer: consumer.to_string(),
            filter_subject: None,
            slots: 10,
            ack_wait: Duration::from_secs(30),
            max_attempts: docket_core::DEFAULT_MAX_ATTEMPTS,
            max_in_flight: 1000,
            backoff_base: Duration::from_secs(10),
            backoff_cap: Duration::from_secs(3600),
            dead_letter: format!("docket.dead.{stream}"),
            max_runtime: Duration::from_secs(300),
            cancel_grace: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(30),
            idle_wait: Duration::from_secs(5),
            max_output_bytes: docket_core::output::DEFAULT_MAX_OUTPUT_BYTES,
            unguarded: false,
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), NatsError> {
        let bad = |r: &str| Err(NatsError::Config(r.to_string()));
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !name_ok(&self.stream) || !name_ok(&self.consumer) {
            return bad("stream and consumer names are 1-64 characters from A-Z a-z 0-9 - _");
        }
        if let Some(f) = &self.filter_subject {
            docket_core::outbox::check_subject_filter(f)
                .map_err(|e| NatsError::Config(e.to_string()))?;
        }
        docket_core::outbox::check_subject(&self.dead_letter)
            .map_err(|e| NatsError::Config(format!("dead-letter subject: {e}")))?;
        if !(1..=10_000).contains(&self.slots) {
            return bad("slots must be 1..=10000");
        }
        if self.ack_wait < Duration::from_secs(1) || self.ack_wait > Duration::from_secs(3600) {
            return bad("ack wait (the lease) must be 1 s to 1 h");
        }
        if !(1..=1000).contains(&self.max_attempts) {
            return bad("max attempts must be 1..=1000");
        }
        if !(1..=1_000_000).contains(&self.max_in_flight) {
            return bad("max in flight must be 1..=1000000");
        }
        if self.backoff_base.is_zero() || self.backoff_cap < self.backoff_base {
            return bad("the backoff base must be above 0 and at most its cap");
        }
        if self.backoff_cap > docket_core::duration::MAX_DELAY {
            return bad("the backoff cap is too long");
        }
        if self.max_runtime.is_zero() || self.cancel_grace.is_zero() {
            return bad("max runtime and cancel grace must be above 0");
        }
        if self.idle_wait < Duration::from_millis(10) || self.idle_wait > Duration::from_secs(60) {
            return bad("idle wait must be 10 ms to 1 minute");
        }
        Ok(())
    }

    /// How often running jobs are beaten: a third of the lease.
    pub(crate) fn beat_every(&self) -> Duration {
        self.ack_wait / 3
    }

    /// How long before its deadline a running job is stopped, and within which nothing is
    /// written: a tenth of the lease, or the cancel grace when longer, at most a third.
    pub(crate) fn margin(&self) -> Duration {
        (self.ack_wait / 10)
            .max(self.cancel_grace)
            .min(self.ack_wait / 3)
    }

    /// How long one pull request may wait: the idle wait, but at most a quarter of the
    /// lease (a job's deadline counts from when its request was sent).
    fn pull_wait(&self) -> Duration {
        self.idle_wait.min(self.ack_wait / 4)
    }
}

/// What a source has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceReport {
    /// Jobs delivered to this process.
    pub delivered: u64,
    /// Acknowledged as done.
    pub succeeded: u64,
    /// Handed back for a retry (nak with a delay).
    pub retried: u64,
    /// Dead-lettered and terminated (cancelled ones included).
    pub dead: u64,
    /// Snoozed (nak with the snooze's delay).
    pub snoozed: u64,
    /// Handed back at shutdown.
    pub released: u64,
    /// Stopped because the delivery was lost; nothing written.
    pub lost: u64,
    /// In-progress acks the server confirmed.
    pub beats: u64,
    /// Pull requests sent (delivered / pulls: the jobs one pull brought).
    pub pulls: u64,
}

/// How a written job ended, for the report and `docket_jetstream_jobs_total{outcome}`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    Succeeded,
    Retried,
    Dead,
    Cancelled,
    Snoozed,
    Released,
    Lost,
}

const OUTCOMES: [&str; 7] = [
    "succeeded",
    "retried",
    "dead",
    "cancelled",
    "snoozed",
    "released",
    "lost",
];

/// The report's counts, kept in atomics (written once or twice per job by every job's
/// task), and the outcome counters, registered once.
pub(crate) struct Tally {
    counts: [AtomicU64; 7],
    delivered: AtomicU64,
    beats: AtomicU64,
    pulls: AtomicU64,
    metrics: [metrics::Counter; 7],
}

impl Tally {
    fn new() -> Self {
        Tally {
            counts: Default::default(),
            delivered: AtomicU64::new(0),
            beats: AtomicU64::new(0),
            pulls: AtomicU64::new(0),
            metrics: OUTCOMES
                .map(|o| metrics::counter!("docket_jetstream_jobs_total", "outcome" => o)),
        }
    }

    pub(crate) fn ended(&self, o: Outcome) {
        self.counts[o as usize].fetch_add(1, Ordering::Relaxed);
        self.metrics[o as usize].increment(1);
    }

    fn report(&self) -> SourceReport {
        let c = |o: Outcome| self.counts[o as usize].load(Ordering::Relaxed);
        SourceReport {
            delivered: self.delivered.load(Ordering::Relaxed),
            succeeded: c(Outcome::Succeeded),
            retried: c(Outcome::Retried),
            dead: c(Outcome::Dead) + c(Outcome::Cancelled),
            snoozed: c(Outcome::Snoozed),
            released: c(Outcome::Released),
            lost: c(Outcome::Lost),
            beats: self.beats.load(Ordering::Relaxed),
            pulls: self.pulls.load(Ordering::Relaxed),
        }
    }
}

pub(crate) struct Inner<S> {
    pub(crate) registry: Registry<S>,
    pub(crate) js: jetstream::Context,
    pub(crate) cfg: SourceConfig,
    pub(crate) limits: RunLimits,
    consumer: jetstream::consumer::Consumer<pull::Config>,
    pub(crate) flights: Mutex<HashMap<u64, Arc<Flight>>>,
    slots: Arc<Semaphore>,
    /// Jobs started and not yet ended (their task included), for [`Source::wait_idle`].
    pub(crate) busy: watch::Sender<usize>,
    pub(crate) tally: Tally,
}

/// A worker on a JetStream consumer (see the module doc). Clones share the source.
pub struct Source<S> {
    inner: Arc<Inner<S>>,
}

impl<S> Clone for Source<S> {
    fn clone(&self) -> Self {
        Source {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Send + Sync + 'static> Source<S> {
    /// A source running `registry`'s handlers on `cfg.stream`'s durable consumer: creates
    /// the consumer when missing, and refuses one whose settings differ (another ack wait,
    /// attempt budget or filter would change every worker's promises), a dead-letter subject
    /// no stream captures, and one the source's own stream captures (a dead job would come
    /// back as a job).
    pub async fn new(
        client: async_nats::Client,
        registry: Registry<S>,
        cfg: SourceConfig,
    ) -> Result<Self, NatsError> {
        cfg.validate()?;
        let js = jetstream::ContextBuilder::new()
            .timeout(cfg.beat_every().min(Duration::from_secs(5)))
            .build(client);
        let consumer = consumer(&js, &cfg).await?;
        match js.stream_by_subject(cfg.dead_letter.as_str()).await {
            Ok(name) if name == cfg.stream => {
                return Err(NatsError::Stream {
                    stream: cfg.stream.clone(),
                    reason: format!(
                        "it captures the dead-letter subject {:?}: a dead job would be delivered again as a job; capture dead letters in another stream",
                        cfg.dead_letter
                    ),
                })
            }
            Ok(_) => {}
            Err(e) => {
                return Err(NatsError::Stream {
                    stream: cfg.dead_letter.clone(),
                    reason: format!(
                        "no stream captures the dead-letter subject ({}); create one (docket consume --create-streams does)",
                        crate::connect::redact(&e.to_string())
                    ),
                })
            }
        }
        let limits = RunLimits {
            max_runtime: cfg.max_runtime,
            cancel_grace: cfg.cancel_grace,
            max_output_bytes: cfg.max_output_bytes,
        };
        Ok(Source {
            inner: Arc::new(Inner {
                registry,
                js,
                slots: Arc::new(Semaphore::new(cfg.slots)),
                cfg,
                limits,
                consumer,
                flights: Mutex::default(),
                busy: watch::Sender::new(0),
                tally: Tally::new(),
            }),
        })
    }

    /// Its settings.
    pub fn config(&self) -> &SourceConfig {
        &self.inner.cfg
    }

    /// What it has done so far.
    pub fn report(&self) -> SourceReport {
        self.inner.tally.report()
    }

    /// Jobs running now.
    pub fn in_flight(&self) -> usize {
        self.inner.flights.lock().expect("poisoned").len()
    }

    /// One pull: asks for as many jobs as there are free slots (waiting for one slot
    /// first), starts each as it arrives, and returns how many arrived. A job runs on after
    /// this returns; [`Source::wait_idle`] waits for them.
    pub async fn run_once(&self) -> Result<usize, NatsError> {
        self.pull(self.inner.cfg.pull_wait()).await
    }

    /// A pull whose request waits at most `wait` for jobs.
    async fn pull(&self, wait: Duration) -> Result<usize, NatsError> {
        let first = self
            .inner
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| NatsError::Config("the source is closed".into()))?;
        // Jobs that just ended release their slots when their tasks next run: letting them
        // run first makes one pull of many instead of many pulls of one (measured with no-op
        // jobs on 200 slots: pulls of 1-3 messages without it).
        tokio::task::yield_now().await;
        let mut permits = vec![first];
        while let Ok(p) = self.inner.slots.clone().try_acquire_owned() {
            permits.push(p);
        }
        let asked = permits.len();
        self.inner.tally.pulls.fetch_add(1, Ordering::Relaxed);
        // A delivery's lease counts from the server's send, which comes after this.
        let sent = Instant::now();
        let mut batch = self
            .inner
            .consumer
            .batch()
            .max_messages(asked)
            .expires(wait)
            .messages()
            .await
            .map_err(NatsError::nats)?;
        let mut got = 0;
        while let Some(m) = batch.next().await {
            let m = m.map_err(NatsError::nats)?;
            let Some(permit) = permits.pop() else { break };
            got += 1;
            self.inner.tally.delivered.fetch_add(1, Ordering::Relaxed);
            let busy = Busy::new(self.inner.clone());
            let mut job = Box::pin(deliver::handle(
                busy,
                m,
                permit,
                sent + self.inner.cfg.ack_wait,
            ));
            // Polled here first: a job done at once (its handler ready at its first poll,
            // its ack sent) costs no task; one that waits goes on in a task of its own.
            if futures::poll!(&mut job).is_pending() {
                tokio::spawn(job);
            }
        }
        Ok(got)
    }

    /// One heartbeat: an in-progress ack for every running job whose lease surely still
    /// holds, awaited; a job's deadline moves to one lease after the beat was sent when the
    /// server confirmed it. Returns how many were confirmed.
    pub async fn beat_once(&self) -> usize {
        let flights: Vec<Arc<Flight>> = self
            .inner
            .flights
            .lock()
            .expect("poisoned")
            .values()
            .cloned()
            .collect();
        let ack_wait = self.inner.cfg.ack_wait;
        let spare = self.inner.cfg.ack_wait / 10;
        let beats = flights.iter().map(|f| async move {
            let sent = Instant::now();
            // A beat sent once the lease may have run out proves nothing: JetStream confirms
            // an in-progress ack of a delivery it has since given to another worker. Such a
            // delivery is lost, whatever the server answers.
            if !f.held_at(sent, spare) {
                return false;
            }
            match f.beat().await {
                Ok(()) => {
                    f.extend(sent + ack_wait);
                    true
                }
                Err(e) => {
                    tracing::warn!(job = f.seq, error = %crate::connect::redact(&e.to_string()), "in-progress ack failed");
                    false
                }
            }
        });
        let confirmed = futures::future::join_all(beats)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count();
        self.inner
            .tally
            .beats
            .fetch_add(confirmed as u64, Ordering::Relaxed);
        confirmed
    }

    /// Waits until no job runs here (each one's outcome written).
    pub async fn wait_idle(&self) {
        let mut busy = self.inner.busy.subscribe();
        let _ = busy.wait_for(|n| *n == 0).await;
    }

    /// Runs until `stop` fires: pulls while slots are free, beats running jobs, and on stop
    /// lets running jobs end for `shutdown_timeout`, then stops the rest and hands them back.
    pub async fn run(&self, stop: CancellationToken) -> Result<SourceReport, NatsError> {
        self.serve(stop, false).await
    }

    /// Like [`Source::run`], but returns once the consumer has nothing left: no job
    /// waiting, none delivered and unacknowledged (a retry waiting out its delay counts), and
    /// none running here.
    pub async fn drain(&self, stop: CancellationToken) -> Result<SourceReport, NatsError> {
        self.serve(stop, true).await
    }

    async fn serve(&self, stop: CancellationToken, drain: bool) -> Result<SourceReport, NatsError> {
        // Beats go on until the last job here has ended (their leases must hold while they
        // end at shutdown), then the task is stopped.
        let beats = {
            let me = self.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(me.inner.cfg.beat_every());
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                every.tick().await;
                loop {
                    every.tick().await;
                    me.beat_once().await;
                }
            })
        };
        // Draining, an empty pull ends soon: the check for "nothing left" follows it.
        let wait = if drain {
            self.inner.cfg.pull_wait().min(Duration::from_millis(100))
        } else {
            self.inner.cfg.pull_wait()
        };
        let mut failures = 0u32;
        let result = loop {
            if stop.is_cancelled() {
                break Ok(());
            }
            let pulled = tokio::select! {
                r = self.pull(wait) => r,
                _ = stop.cancelled() => break Ok(()),
            };
            match pulled {
                Ok(n) => {
                    failures = 0;
                    if drain && n == 0 && self.nothing_left().await? {
                        break Ok(());
                    }
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "pull from the consumer failed; trying again");
                    let pause = Duration::from_millis(100 * 2u64.pow(failures.min(5)));
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stop.cancelled() => break Ok(()),
                    }
                }
            }
        };
        // Running jobs (counted in `busy` until their task ends) get the shutdown timeout to end, then are stopped and handed back.
        if tokio::time::timeout(self.inner.cfg.shutdown_timeout, self.wait_idle())
            .await
            .is_err()
        {
            for f in self.inner.flights.lock().expect("poisoned").values() {
                f.running.stop(StopReason::Shutdown);
            }
            self.wait_idle().await;
        }
        beats.abort();
        result.map(|()| self.report())
    }

    /// True when the consumer has nothing waiting or unacknowledged and nothing runs here.
    async fn nothing_left(&self) -> Result<bool, NatsError> {
        let idle = || *self.inner.busy.borrow() == 0;
        if !idle() {
            return Ok(false);
        }
        let mut c = self.inner.consumer.clone();
        let info = c.info().await.map_err(NatsError::nats)?;
        Ok(info.num_pending == 0 && info.num_ack_pending == 0 && idle())
    }
}

/// One started job, counted in `busy` until its task drops this (whatever way it ends).
pub(crate) struct Busy<S>(pub(crate) Arc<Inner<S>>);

impl<S> Busy<S> {
    fn new(inner: Arc<Inner<S>>) -> Self {
        inner.busy.send_modify(|n| *n += 1);
        Busy(inner)
    }
}

impl<S> Drop for Busy<S> {
    fn drop(&mut self) {
        self.0.busy.send_modify(|n| *n -= 1);
    }
}

/// The durable consumer: created when missing, refused when it differs from `cfg`.
async fn consumer(
    js: &jetstream::Context,
    cfg: &SourceConfig,
) -> Result<jetstream::consumer::Consumer<pull::Config>, NatsError> {
    let stream = js
        .get_stream(&cfg.stream)
        .await
        .map_err(|e| NatsError::Stream {
            stream: cfg.stream.clone(),
            reason: format!(
                "{} (create it with --create-streams --subjects …)",
                crate::connect::redact(&e.to_string())
            ),
        })?;
    let want = pull::Config {
        durable_name: Some(cfg.consumer.clone()),
        ack_policy: AckPolicy::Explicit,
        ack_wait: cfg.ack_wait,
        max_deliver: i64::from(cfg.max_attempts) + 1,
        max_ack_pending: cfg.max_in_flight,
        filter_subject: cfg.filter_subject.clone().unwrap_or_default(),
        ..Default::default()
    };
    let mut c = match stream.get_consumer::<pull::Config>(&cfg.consumer).await {
        Ok(c) => c,
        Err(_) => match stream.create_consumer(want.clone()).await {
            Ok(c) => c,
            // Two workers starting together: the other created it.
            Err(e) => stream
                .get_consumer::<pull::Config>(&cfg.consumer)
                .await
                .map_err(|_| NatsError::nats(e))?,
        },
    };
    let have = c.info().await.map_err(NatsError::nats)?.config.clone();
    let differs = |what: &str, have: String, want: String| {
        Err(NatsError::Stream {
            stream: cfg.stream.clone(),
            reason: format!(
                "its consumer {:?} has {what} {have}, this worker wants {want}: every worker of a consumer must agree (delete the consumer to change it, or use the same settings)",
                cfg.consumer
            ),
        })
    };
    if have.ack_policy != AckPolicy::Explicit {
        return differs(
            "an ack policy other than explicit",
            String::new(),
            "explicit".into(),
        );
    }
    if have.ack_wait != want.ack_wait {
        return differs(
            "ack wait",
            humantime::format_duration(have.ack_wait).to_string(),
            humantime::format_duration(want.ack_wait).to_string(),
        );
    }
    if have.max_deliver != want.max_deliver {
        return differs(
            "max_deliver",
            have.max_deliver.to_string(),
            format!("{} (max attempts + 1)", want.max_deliver),
        );
    }
    if have.filter_subject != want.filter_subject {
        return differs(
            "filter subject",
            format!("{:?}", have.filter_subject),
            format!("{:?}", want.filter_subject),
        );
    }
    Ok(c)
}
