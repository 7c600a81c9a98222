//! Jobs on a JetStream stream: how one is written (the subject is the queue, the payload
//! the handler's arguments as JSON, the kind and metadata in headers) and how it is
//! enqueued — directly ([`JobQueue`]), or through the outbox inside the application's
//! transaction ([`job_message`], published by the relay once the transaction commits).
//!
//! What a database job has and a JetStream job cannot: a priority, a schedule, a unique key,
//! ordering and concurrency keys, a per-job backoff or attempt budget (the consumer's
//! `max_deliver` and the source's backoff apply to every job). [`new_job_message`] and
//! [`JobQueue::enqueue_new`] refuse a [`NewJob`] that sets one, naming it, instead of
//! dropping it silently. A unique key's nearest equivalent is an idempotency id
//! (`Nats-Msg-Id`, [`JobQueue::enqueue_with_id`]), honoured inside the stream's duplicate
//! window.

use async_nats::jetstream::{self, message::PublishMessage};
use docket_core::outbox::NewMessage;
use docket_core::{JobId, NewJob, Schedule};
use docket_worker::Job;

use crate::error::NatsError;

/// The header naming the job's kind (required).
pub const KIND_HEADER: &str = "Docket-Kind";
/// The header carrying the job's metadata, a JSON object (optional).
pub const METADATA_HEADER: &str = "Docket-Metadata";
/// The most bytes of metadata a job carries (as compact JSON, one header line).
pub const MAX_METADATA_BYTES: usize = 8 * 1024;

/// The outbox message that enqueues `job` on the JetStream queue `subject` when the
/// transaction it is published in commits (`store.publish_in(&mut tx, &msg)`).
pub fn job_message<J: Job>(subject: &str, job: &J) -> Result<NewMessage, NatsError> {
    new_job_message(subject, &typed(job)?)
}

/// The [`NewJob`] of a typed job (`docket_worker::new_job`), its error as this crate's.
fn typed<J: Job>(job: &J) -> Result<NewJob, NatsError> {
    docket_worker::new_job(job).map_err(|e| NatsError::Config(e.to_string()))
}

/// The outbox message for a [`NewJob`]: refused when it sets what a JetStream job cannot
/// carry (see the module doc).
pub fn new_job_message(subject: &str, job: &NewJob) -> Result<NewMessage, NatsError> {
    checked_job_message(subject, job).map(|(msg, _)| msg)
}

/// [`new_job_message`] and its checked payload text (what is published).
fn checked_job_message(subject: &str, job: &NewJob) -> Result<(NewMessage, String), NatsError> {
    let (kind, metadata) = parts(job)?;
    let mut msg = NewMessage::new(subject, &job.args)
        .map_err(|e| NatsError::Config(e.to_string()))?
        .header(KIND_HEADER, kind);
    if let Some(m) = metadata {
        msg = msg.header(METADATA_HEADER, m);
    }
    let payload = msg
        .checked()
        .map_err(|e| NatsError::Config(e.to_string()))?;
    Ok((msg, payload))
}

/// The kind and the metadata header of a job, after refusing what cannot carry over.
fn parts(job: &NewJob) -> Result<(String, Option<String>), NatsError> {
    let refuse = |what: &str| {
        Err(NatsError::Config(format!(
            "a JetStream job cannot have {what}: it needs the database queue"
        )))
    };
    docket_core::validate::kind(&job.kind).map_err(|e| NatsError::Config(e.to_string()))?;
    if job.priority != 0 {
        return refuse("a priority (a stream delivers in order)");
    }
    if !matches!(job.schedule, Schedule::Now) {
        return refuse("a schedule");
    }
    if job.unique_key.is_some() {
        return refuse("a unique key (an idempotency id, Nats-Msg-Id, is honoured inside the stream's duplicate window)");
    }
    if job.ordering_key.is_some() {
        return refuse("an ordering key");
    }
    if job.concurrency_key.is_some() {
        return refuse("a concurrency key");
    }
    if job.backoff.is_some() {
        return refuse("its own backoff (the source's backoff applies)");
    }
    if job.max_attempts != docket_core::DEFAULT_MAX_ATTEMPTS {
        return refuse("its own attempt budget (the consumer's max_deliver applies)");
    }
    let metadata = match &job.metadata {
        serde_json::Value::Null => None,
        serde_json::Value::Object(m) if m.is_empty() => None,
        m @ serde_json::Value::Object(_) => {
            let text = m.to_string();
            if text.len() > MAX_METADATA_BYTES {
                return Err(NatsError::Config(format!(
                    "job metadata is {} bytes; a JetStream job carries at most {MAX_METADATA_BYTES}",
                    text.len()
                )));
            }
            Some(text)
        }
        _ => {
            return Err(NatsError::Config(
                "job metadata must be a JSON object".into(),
            ))
        }
    };
    Ok((job.kind.clone(), metadata))
}

/// Enqueues jobs straight onto a JetStream queue (not transactional: for that, publish
/// [`job_message`] through the outbox). Each enqueue awaits the stream's acknowledgement,
/// and returns the job's id, its stream sequence.
#[derive(Clone)]
pub struct JobQueue {
    js: jetstream::Context,
    subject: String,
}

impl JobQueue {
    /// A queue on `subject` (a stream must capture it).
    pub fn new(js: jetstream::Context, subject: &str) -> Result<Self, NatsError> {
        docket_core::outbox::check_subject(subject)
            .map_err(|e| NatsError::Config(e.to_string()))?;
        Ok(JobQueue {
            js,
            subject: subject.to_string(),
        })
    }

    /// Enqueues a typed job.
    pub async fn enqueue<J: Job>(&self, job: &J) -> Result<JobId, NatsError> {
        self.enqueue_new(&typed(job)?, None).await
    }

    /// Enqueues a typed job once per `id` inside the stream's duplicate window: a second
    /// enqueue with the same id returns the first one's job id and adds nothing.
    pub async fn enqueue_with_id<J: Job>(&self, job: &J, id: &str) -> Result<JobId, NatsError> {
        self.enqueue_new(&typed(job)?, Some(id)).await
    }

    /// Enqueues a [`NewJob`] (refused when it sets what a JetStream job cannot carry).
    pub async fn enqueue_new(&self, job: &NewJob, id: Option<&str>) -> Result<JobId, NatsError> {
        let (msg, payload) = checked_job_message(&self.subject, job)?;
        let headers = crate::relay::header_map(&msg.headers).map_err(NatsError::Config)?;
        let mut p = PublishMessage::build()
            .payload(payload.into_bytes().into())
            .headers(headers);
        if let Some(id) = id {
            if id.is_empty() || id.len() > 255 || id.chars().any(char::is_control) {
                return Err(NatsError::Config(
                    "an enqueue id is 1-255 bytes without control characters".into(),
                ));
            }
            p = p.message_id(id);
        }
        let ack = self
            .js
            .send_publish(self.subject.clone(), p)
            .await
            .map_err(NatsError::nats)?
            .await
            .map_err(NatsError::nats)?;
        i64::try_from(ack.sequence)
            .map(JobId)
            .map_err(|_| NatsError::Unavailable("stream sequence beyond i64".into()))
    }
}
