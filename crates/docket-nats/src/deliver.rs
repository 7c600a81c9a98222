//! One delivered job: read it (hostile until checked: anyone who may publish on the subject
//! wrote it), run it, and write its outcome — only while the delivery still holds.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, message::PublishMessage, AckKind};
use async_nats::{HeaderMap, HeaderName, HeaderValue};
use docket_core::mutants::{self, Mutant};
use docket_core::JobId;
use docket_worker::external::{Delivery, Running, Verdict};
use docket_worker::StopReason;
use tokio::sync::OwnedSemaphorePermit;

use crate::jobs::{KIND_HEADER, METADATA_HEADER};
use crate::source::{Busy, Inner, Outcome};

/// The header naming how a dead-lettered job ended (`dead` or `cancelled`).
pub const OUTCOME_HEADER: &str = "Docket-Outcome";
/// The header carrying a dead-lettered job's last error.
pub const ERROR_HEADER: &str = "Docket-Error";
/// The header carrying a dead-lettered job's stream sequence (its id) in its source stream.
pub const SEQUENCE_HEADER: &str = "Docket-Source-Sequence";
/// The header carrying a dead-lettered job's deliveries.
pub const DELIVERIES_HEADER: &str = "Docket-Deliveries";
/// The header carrying the subject a dead-lettered job was delivered on.
pub const SUBJECT_HEADER: &str = "Docket-Source-Subject";

/// A job running here.
pub(crate) struct Flight {
    pub(crate) seq: u64,
    msg: jetstream::Message,
    pub(crate) running: Running,
    deadline: Mutex<Instant>,
}

impl Flight {
    /// An in-progress ack, awaited: `Ok` once the server confirmed it.
    pub(crate) async fn beat(&self) -> Result<(), async_nats::Error> {
        if mutants::active(Mutant::SourceNoBeat) {
            return Ok(());
        }
        self.msg.double_ack_with(AckKind::Progress).await
    }

    /// Moves the local deadline forward.
    pub(crate) fn extend(&self, until: Instant) {
        let mut d = self.deadline.lock().expect("poisoned");
        if until > *d {
            *d = until;
        }
    }

    /// True when a write sent at `t` reaches the server before the lease ends, `spare` to
    /// spare.
    pub(crate) fn held_at(&self, t: Instant, spare: Duration) -> bool {
        t + spare < self.deadline()
    }

    fn deadline(&self) -> Instant {
        *self.deadline.lock().expect("poisoned")
    }
}

/// The job a message carries, or why it carries none.
fn read(
    msg: &jetstream::Message,
) -> Result<(String, serde_json::Value, serde_json::Value), String> {
    let header = |name: &str| {
        msg.headers
            .as_ref()
            .and_then(|h| h.get(name))
            .map(|v| v.as_str().to_string())
    };
    let kind = header(KIND_HEADER)
        .ok_or_else(|| format!("the message has no {KIND_HEADER} header: not a Docket job"))?;
    docket_core::validate::kind(&kind).map_err(|e| format!("{KIND_HEADER}: {e}"))?;
    let args = if msg.payload.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&msg.payload)
            .map_err(|e| format!("the payload is not JSON (the job's arguments): {e}"))?
    };
    let metadata = match header(METADATA_HEADER) {
        None => serde_json::json!({}),
        Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(m @ serde_json::Value::Object(_)) => m,
            _ => return Err(format!("{METADATA_HEADER} is not a JSON object")),
        },
    };
    Ok((kind, args, metadata))
}

/// Runs one delivered job to its written outcome.
pub(crate) async fn handle<S: Send + Sync + 'static>(
    busy: Busy<S>,
    msg: jetstream::Message,
    permit: OwnedSemaphorePermit,
    deadline: Instant,
) {
    let inner = &busy.0;
    let Ok(info) = msg.info() else {
        tracing::warn!(subject = %msg.subject, "a delivery without JetStream info; ignored");
        return;
    };
    let (seq, delivered) = (info.stream_sequence, info.delivered);
    let attempt = i32::try_from(delivered).unwrap_or(i32::MAX);
    let max = inner.cfg.max_attempts;
    let job = match read(&msg) {
        Ok(job) if attempt <= max => job,
        Ok(_) => {
            let why = "its last run ended without an outcome (its worker was killed or lost the delivery, or the dead letter could not be written then)";
            dead(inner, &msg, seq, attempt, "dead", why, deadline).await;
            return;
        }
        Err(why) => {
            dead(inner, &msg, seq, attempt, "dead", &why, deadline).await;
            return;
        }
    };
    let (kind, args, metadata) = job;
    let d = Delivery {
        id: JobId(i64::try_from(seq).unwrap_or(i64::MAX)),
        attempt,
        max_attempts: max,
        queue: msg.subject.to_string(),
        kind,
        args,
        metadata,
        delivered_at: chrono::Utc::now(),
    };
    let (running, mut run) = inner.registry.start_delivery(d, inner.limits);
    let flight = Arc::new(Flight {
        seq,
        msg,
        running,
        deadline: Mutex::new(deadline),
    });
    let margin = inner.cfg.margin();
    // A handler done at its first poll needs no watchdog (arming one costs a timer per job)
    // and no beat.
    let first = futures::poll!(&mut run);
    let verdict = if let std::task::Poll::Ready(v) = first {
        v
    } else {
        inner
            .flights
            .lock()
            .expect("poisoned")
            .insert(seq, flight.clone());
        tokio::select! {
            v = &mut run => v,
            _ = watchdog(&flight, margin, inner.cfg.unguarded) => {
                tracing::warn!(job = seq, "delivery about to run out without a confirmed in-progress ack; stopping the handler");
                flight.running.stop(StopReason::LeaseLost);
                run.await
            }
        }
    };
    drop(permit);
    write(inner, &flight, attempt, verdict).await;
    inner.flights.lock().expect("poisoned").remove(&seq);
}

/// Completes when the deadline is a margin away and no beat moved it meanwhile.
async fn watchdog(f: &Flight, margin: Duration, unguarded: bool) {
    if unguarded || mutants::no_worker_guards() {
        // Tests only: the write fence alone must hold.
        return std::future::pending().await;
    }
    loop {
        let d = f.deadline();
        tokio::time::sleep_until(d.checked_sub(margin).unwrap_or(d).into()).await;
        if f.deadline() == d {
            return;
        }
    }
}

/// True while the delivery is surely still this worker's: a write sent now reaches the
/// server before the lease ends (a tenth of it to spare).
fn held<S>(inner: &Inner<S>, deadline: Instant) -> bool {
    mutants::active(Mutant::SourceWritesWhenLost)
        || Instant::now() + inner.cfg.ack_wait / 10 < deadline
}

async fn write<S>(inner: &Inner<S>, f: &Flight, attempt: i32, verdict: Verdict) {
    if verdict == Verdict::Lost || !held(inner, f.deadline()) {
        tracing::warn!(job = f.seq, "the delivery ran out before the job ended; its outcome is not written (JetStream delivers it again)");
        inner.tally.ended(Outcome::Lost);
        return;
    }
    let last = attempt >= inner.cfg.max_attempts;
    let nak = |delay: Option<Duration>| f.msg.ack_with(AckKind::Nak(delay));
    let (outcome, sent) = match verdict {
        Verdict::Succeeded(_) => (Outcome::Succeeded, f.msg.ack().await),
        Verdict::Retry { message, .. } if last => {
            let why = format!("no attempt left: {message}");
            dead(inner, &f.msg, f.seq, attempt, "dead", &why, f.deadline()).await;
            return;
        }
        Verdict::Retry { message, delay } => {
            let delay = delay.unwrap_or_else(|| backoff(&inner.cfg, attempt));
            tracing::info!(job = f.seq, attempt, error = %docket_core::outbox::stored_error(&message), retry_in = ?delay, "job failed; retried");
            (Outcome::Retried, nak(Some(delay)).await)
        }
        Verdict::Discard(m) => {
            dead(inner, &f.msg, f.seq, attempt, "dead", &m, f.deadline()).await;
            return;
        }
        Verdict::Cancel(m) => {
            dead(inner, &f.msg, f.seq, attempt, "cancelled", &m, f.deadline()).await;
            return;
        }
        Verdict::Snooze(_) if last => {
            let why = "snoozed on its last delivery (a snooze spends a JetStream delivery)";
            dead(inner, &f.msg, f.seq, attempt, "dead", why, f.deadline()).await;
            return;
        }
        Verdict::Snooze(d) => (Outcome::Snoozed, nak(Some(d)).await),
        Verdict::Released => (Outcome::Released, nak(None).await),
        Verdict::Lost => unreachable!("handled above"),
    };
    inner.tally.ended(outcome);
    if let Err(e) = sent {
        tracing::warn!(job = f.seq, error = %crate::connect::redact(&e.to_string()), "the outcome could not be sent; JetStream delivers the job again");
    }
}

/// The retry delay after `attempt` failed runs.
fn backoff(cfg: &crate::source::SourceConfig, attempt: i32) -> Duration {
    let ms = docket_core::local::backoff_ms(
        usize::try_from(attempt).unwrap_or(1),
        Some(i64::try_from(cfg.backoff_base.as_millis()).unwrap_or(i64::MAX)),
        Some(i64::try_from(cfg.backoff_cap.as_millis()).unwrap_or(i64::MAX)),
    );
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Puts a copy of the job on the dead-letter subject (awaited; its `Nats-Msg-Id` makes a
/// repeat after a crash a duplicate JetStream drops), then terminates the delivery. A copy
/// that cannot be written is tried again while the delivery holds; then the job is left to
/// be delivered again (its extra delivery dead-letters it).
#[allow(clippy::too_many_arguments)]
async fn dead<S>(
    inner: &Inner<S>,
    msg: &jetstream::Message,
    seq: u64,
    attempt: i32,
    outcome: &'static str,
    why: &str,
    deadline: Instant,
) {
    let mut headers = HeaderMap::new();
    if let Some(h) = &msg.headers {
        for (name, values) in h.iter() {
            // The broker's own headers (the enqueue's Nats-Msg-Id among them) stay behind.
            let text: &str = name.as_ref();
            if text.to_ascii_lowercase().starts_with("nats-") {
                continue;
            }
            for v in values {
                headers.append(name.clone(), v.clone());
            }
        }
    }
    let mut put = |name: &str, value: String| {
        if let (Ok(n), Ok(v)) = (HeaderName::from_str(name), HeaderValue::from_str(&value)) {
            headers.insert(n, v);
        }
    };
    put(OUTCOME_HEADER, outcome.to_string());
    put(ERROR_HEADER, docket_core::outbox::stored_error(why));
    put(SEQUENCE_HEADER, seq.to_string());
    put(DELIVERIES_HEADER, attempt.to_string());
    put(
        SUBJECT_HEADER,
        docket_core::outbox::stored_error(msg.subject.as_str()),
    );
    let id = format!("{}-{seq}-dead", inner.cfg.stream);
    let mut pause = tokio::time::interval(Duration::from_millis(500));
    loop {
        pause.tick().await;
        if !held(inner, deadline) {
            tracing::error!(job = seq, "the dead letter could not be written while the delivery held; the job is delivered again");
            return;
        }
        if mutants::active(Mutant::SourceNoDeadLetter) {
            break;
        }
        let p = PublishMessage::build()
            .payload(msg.payload.clone())
            .headers(headers.clone())
            .message_id(&id);
        let sent = match inner
            .js
            .send_publish(inner.cfg.dead_letter.clone(), p)
            .await
        {
            Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match sent {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!(job = seq, error = %crate::connect::redact(&e), "the dead letter could not be written; trying again");
            }
        }
    }
    inner.tally.ended(if outcome == "cancelled" {
        Outcome::Cancelled
    } else {
        Outcome::Dead
    });
    if let Err(e) = msg.ack_with(AckKind::Term).await {
        tracing::warn!(job = seq, error = %crate::connect::redact(&e.to_string()), "the term could not be sent; JetStream delivers the job again (its dead letter is de-duplicated)");
    }
}
