//! The relay: claims unpublished outbox messages, publishes them to JetStream with
//! `Nats-Msg-Id` set to their de-duplication id, awaits the acknowledgements and marks what
//! was acknowledged with a fenced write.
//!
//! Why each step is safe:
//! - A message is marked only after JetStream acknowledged it (stored it, or found it a
//!   duplicate inside its window), so a crash anywhere before the mark leaves it to be
//!   published again: at-least-once.
//! - The re-publish carries the same id, so inside the stream's duplicate window JetStream
//!   drops it and answers with the first copy's sequence (`duplicate: true`): no duplicate
//!   while every outage stays inside the window ([`crate::stream`]).
//! - A claim takes at most one message per key (its oldest unpublished one), so a batch
//!   publishes different keys side by side and never two of one key; a key's next message is
//!   claimable only once this one is marked. Order within a key therefore holds in the
//!   stream, whatever crashes.
//! - The mark carries the claim's attempt: a relay that stalled past its lease (SIGSTOP, a
//!   long pause) and whose message another relay claimed marks nothing.
//!
//! Several lanes (claim → publish → await → mark loops) run side by side so the database
//! and the broker are both kept busy; each lane's claim skips what another lane holds.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, message::PublishMessage as Publish};
use async_nats::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use docket_core::mutants::{self, Mutant};
use docket_core::outbox::{message_id, retry_delay, OutboxMessage, Published};
use docket_core::Store;
use tokio_util::sync::CancellationToken;

use crate::connect::redact;
use crate::error::NatsError;

/// How a relay runs.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// This relay's name in the outbox's `relay` column (unique per process start).
    pub name: String,
    /// Messages per claim (1..=1000).
    pub batch: i64,
    /// Claim → publish → mark loops run side by side (1..=64).
    pub lanes: usize,
    /// How long a claim holds its messages. Longer than `ack_timeout`.
    pub lease: Duration,
    /// How long to wait for JetStream's acknowledgement of one publish.
    pub ack_timeout: Duration,
    /// How long an idle lane waits before claiming again.
    pub poll: Duration,
    /// Published messages are deleted after this long.
    pub retention: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            name: format!("relay-{}-{}", std::process::id(), rand_suffix()),
            batch: 1000,
            lanes: 4,
            lease: Duration::from_secs(30),
            ack_timeout: Duration::from_secs(10),
            poll: Duration::from_millis(50),
            retention: Duration::from_secs(3600),
        }
    }
}

fn rand_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{nanos:08x}")
}

impl RelayConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), NatsError> {
        let bad = |r: &str| Err(NatsError::Config(r.to_string()));
        if !(1..=1000).contains(&self.batch) {
            return bad("relay batch must be 1..=1000");
        }
        if !(1..=64).contains(&self.lanes) {
            return bad("relay lanes must be 1..=64");
        }
        if self.lease < Duration::from_secs(1) || self.lease > Duration::from_secs(3600) {
            return bad("the relay lease must be 1 s to 1 h");
        }
        if self.retention > Duration::from_secs(366 * 86_400) {
            return bad("the retention of published messages must be at most a year");
        }
        if self.poll.is_zero() || self.poll > Duration::from_secs(60) {
            return bad("the relay poll interval must be above 0 and at most a minute");
        }
        if self.ack_timeout.is_zero() || self.ack_timeout >= self.lease {
            return bad("the ack timeout must be above 0 and shorter than the lease (a publish still awaited when the lease ends could be claimed again)");
        }
        if self.name.is_empty() || self.name.len() > 200 || self.name.chars().any(char::is_control)
        {
            return bad("relay name must be 1-200 characters without control characters");
        }
        Ok(())
    }
}

/// A message's headers as the client's map, each name and value checked (the client's
/// `&str` conversions panic on a bad one).
pub(crate) fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_str(k).map_err(|_| format!("invalid header name {k:?}"))?;
        let value =
            HeaderValue::from_str(v).map_err(|_| format!("invalid value of header {k:?}"))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// Why a publish failed, and so when to try it again.
enum Failed {
    /// The broker did not answer in time or the connection broke (a restart, a leader
    /// election, a partition): nothing is wrong with the message, so it is tried again
    /// within two seconds however often this happened — a long outage must not leave
    /// messages waiting minutes after the broker is back.
    Broker(String),
    /// No stream answered for the subject: a stream missing or misconfigured, or a
    /// cluster electing its stream leader — doubling, at most 10 seconds.
    NoStream(String),
    /// Anything else (the message is too large, a stored field that cannot be sent): the
    /// delay doubles with each failure, up to 5 minutes.
    Message(String),
}

impl From<async_nats::jetstream::context::PublishError> for Failed {
    fn from(e: async_nats::jetstream::context::PublishError) -> Self {
        use async_nats::jetstream::context::PublishErrorKind as K;
        let text = redact(&e.to_string());
        match e.kind() {
            K::TimedOut | K::BrokenPipe | K::MaxAckPending => Failed::Broker(text),
            K::StreamNotFound => Failed::NoStream(text),
            _ => Failed::Message(text),
        }
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Broker(t) | Failed::NoStream(t) | Failed::Message(t) => f.write_str(t),
        }
    }
}

impl Failed {
    fn retry_in(&self, errors: i32) -> Duration {
        match self {
            Failed::Broker(_) => retry_delay(errors).min(Duration::from_secs(2)),
            Failed::NoStream(_) => retry_delay(errors).min(Duration::from_secs(10)),
            Failed::Message(_) => retry_delay(errors),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Messages claimed.
    pub claimed: usize,
    /// Acknowledged by JetStream.
    pub acked: usize,
    /// Of those, found already in the stream (a re-publish dropped by de-duplication).
    pub duplicates: usize,
    /// Marked published (fewer than `acked` when another claim took a message meanwhile).
    pub marked: u64,
    /// Publishes that failed (recorded; retried after their delay).
    pub failed: usize,
}

/// A relay over `S`'s outbox.
#[derive(Clone)]
pub struct Relay<S> {
    store: S,
    js: jetstream::Context,
    origin: Arc<str>,
    cfg: Arc<RelayConfig>,
}

impl<S: Store> Relay<S> {
    /// A relay publishing `store`'s outbox through `client`.
    pub async fn new(
        store: S,
        client: async_nats::Client,
        cfg: RelayConfig,
    ) -> Result<Self, NatsError> {
        cfg.validate()?;
        let origin = store.outbox_origin().await?;
        let js = jetstream::ContextBuilder::new()
            .timeout(cfg.ack_timeout)
            .ack_timeout(cfg.ack_timeout)
            .max_ack_inflight((cfg.batch as usize * cfg.lanes).max(1))
            .build(client);
        Ok(Self {
            store,
            js,
            origin: origin.into(),
            cfg: Arc::new(cfg),
        })
    }

    /// The JetStream context it publishes through.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// Its settings.
    pub fn config(&self) -> &RelayConfig {
        &self.cfg
    }

    /// One pass: claim a batch, publish it, await the acknowledgements, mark.
    pub async fn run_once(&self) -> Result<Pass, NatsError> {
        self.pass(true).await
    }

    /// A pass that stops after the acknowledgements, marking nothing: what a relay killed
    /// between the broker's ack and its mark leaves behind. For tests of the crash path.
    #[doc(hidden)]
    pub async fn run_once_unmarked(&self) -> Result<Pass, NatsError> {
        self.pass(false).await
    }

    async fn pass(&self, mark: bool) -> Result<Pass, NatsError> {
        let started = Instant::now();
        let msgs = self
            .store
            .outbox_claim(&self.cfg.name, self.cfg.batch, self.cfg.lease)
            .await?;
        let mut pass = Pass {
            claimed: msgs.len(),
            ..Pass::default()
        };
        if msgs.is_empty() {
            return Ok(pass);
        }
        let claimed_in = started.elapsed();
        // Every publish is sent before the first acknowledgement is awaited: the claim
        // holds at most one message per key, so nothing here must wait for another.
        let mut sent = Vec::with_capacity(msgs.len());
        for m in &msgs {
            let r = match self.message(m) {
                Ok(p) => self
                    .js
                    .send_publish(m.subject.clone(), p)
                    .await
                    .map_err(Failed::from),
                Err(e) => Err(Failed::Message(e)),
            };
            sent.push(r);
        }
        let sent_in = started.elapsed();
        let mut done = Vec::with_capacity(msgs.len());
        for (m, r) in msgs.iter().zip(sent) {
            let ack = match r {
                Ok(fut) => fut.await.map_err(Failed::from),
                Err(e) => Err(e),
            };
            match ack {
                Ok(ack) => {
                    pass.acked += 1;
                    pass.duplicates += usize::from(ack.duplicate);
                    done.push(Published {
                        id: m.id,
                        attempt: m.attempt,
                        stream_seq: ack.sequence,
                        duplicate: ack.duplicate,
                    });
                }
                Err(e) => {
                    pass.failed += 1;
                    let text = e.to_string();
                    tracing::warn!(message = m.id, subject = %m.subject, error = %text, "outbox publish failed");
                    self.store
                        .outbox_fail(m.id, m.attempt, &text, e.retry_in(m.errors + 1))
                        .await?;
                }
            }
        }
        let acked_in = started.elapsed();
        if mark {
            pass.marked = self.store.outbox_mark(&done).await?;
        }
        tracing::debug!(
            claimed = pass.claimed,
            ?claimed_in,
            ?sent_in,
            ?acked_in,
            marked_in = ?started.elapsed(),
            "outbox relay pass"
        );
        metrics::counter!("docket_outbox_published_total").increment(pass.marked);
        metrics::counter!("docket_outbox_duplicates_total").increment(pass.duplicates as u64);
        metrics::counter!("docket_outbox_publish_errors_total").increment(pass.failed as u64);
        metrics::histogram!("docket_outbox_pass_seconds").record(started.elapsed().as_secs_f64());
        Ok(pass)
    }

    /// The JetStream message for `m`, its stored fields checked again (a row written past
    /// `publish()` by the schema's owner must not panic the client).
    fn message(&self, m: &OutboxMessage) -> Result<Publish, String> {
        docket_core::outbox::check_subject(&m.subject).map_err(|e| e.to_string())?;
        let headers = header_map(&m.headers)?;
        let mut p = Publish::build()
            .payload(Bytes::from(m.payload.clone()))
            .headers(headers);
        if !mutants::active(Mutant::OutboxNoMsgId) {
            p = p.message_id(message_id(&self.origin, m.id));
        }
        Ok(p)
    }

    /// Publishes until nothing is left unpublished, with all its lanes (failing messages are
    /// retried after their delays, so this waits for them too); the total marked.
    pub async fn drain(&self, stop: &CancellationToken) -> Result<u64, NatsError> {
        let mut marked = 0;
        loop {
            // Each lane claims until a claim comes back empty.
            let mut lanes = tokio::task::JoinSet::new();
            for _ in 0..self.cfg.lanes {
                let (r, stop) = (self.clone(), stop.clone());
                lanes.spawn(async move {
                    let mut marked = 0;
                    while !stop.is_cancelled() {
                        let pass = r.run_once().await?;
                        marked += pass.marked;
                        if pass.claimed == 0 {
                            break;
                        }
                    }
                    Ok::<u64, NatsError>(marked)
                });
            }
            while let Some(lane) = lanes.join_next().await {
                marked += lane.map_err(|e| NatsError::Config(format!("relay lane: {e}")))??;
            }
            if stop.is_cancelled() || self.store.outbox_stats().await?.unpublished == 0 {
                return Ok(marked);
            }
            // What is left waits out a retry delay or a lease another relay holds: no event
            // says when (other processes' writes send none), so poll.
            tokio::select! {
                _ = stop.cancelled() => return Ok(marked),
                _ = tokio::time::sleep(self.cfg.poll) => {}
            }
        }
    }

    /// Runs its lanes until `stop` fires; each lane finishes its pass (the acknowledgements
    /// it awaits and their mark) before returning. Errors are logged and the lane retries
    /// after a second. The first lane also prunes.
    pub async fn run(self, stop: CancellationToken) {
        let mut lanes = tokio::task::JoinSet::new();
        for lane in 0..self.cfg.lanes {
            let r = self.clone();
            let stop = stop.clone();
            lanes.spawn(async move { r.lane(lane, stop).await });
        }
        while lanes.join_next().await.is_some() {}
    }

    async fn lane(&self, lane: usize, stop: CancellationToken) {
        let mut upkeep = Instant::now() - Duration::from_secs(3600);
        while !stop.is_cancelled() {
            if lane == 0 && upkeep.elapsed() >= Duration::from_secs(10) {
                upkeep = Instant::now();
                if let Err(e) = self.upkeep().await {
                    tracing::warn!(error = %e, "outbox upkeep failed");
                }
            }
            let wait = match self.run_once().await {
                Ok(p) if p.claimed as i64 >= self.cfg.batch => Duration::ZERO,
                Ok(_) => self.cfg.poll,
                Err(e) => {
                    tracing::warn!(lane, error = %e, "outbox relay pass failed");
                    Duration::from_secs(1)
                }
            };
            if !wait.is_zero() {
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }

    /// Prunes published messages past the retention. (The outbox's gauges — backlog,
    /// failing, oldest age — are read from the database by the dashboard's `/metrics` and
    /// `docket work --metrics-listen`, whichever process relays.)
    pub async fn upkeep(&self) -> Result<(), NatsError> {
        loop {
            let n = self.store.prune_outbox(self.cfg.retention, 10_000).await?;
            if n < 10_000 {
                break;
            }
        }
        Ok(())
    }
}
