//! The stream the relay publishes into: created on request, and checked either way, so the
//! relay refuses to start on a stream that cannot drop a re-publish.
//!
//! How the de-duplication window is chosen: a message is published again only after the
//! publishing relay lost it — its lease ran out (a crash or a stop between the broker's ack
//! and the mark) or its publish failed and waited out its retry delay (at most
//! [`docket_core::outbox::retry_delay`]'s cap, 5 minutes). So a re-publish comes at most one
//! lease plus one retry delay after the first: the window must be at least that, and
//! [`required_window`] adds a minute for clocks and claim latency. [`DEFAULT_WINDOW`], what
//! `--create-stream` sets, is 10 minutes: twice that for the default 30 s lease. An outage
//! longer than the window (the relay down for an hour after publishing and before marking)
//! can still produce a duplicate; consumers stay idempotent (docs/outbox.md).

use std::time::Duration;

use async_nats::jetstream::{self, stream};

use crate::error::NatsError;

/// The duplicate window `--create-stream` sets.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(600);

/// The shortest duplicate window that covers a re-publish after a lease of `lease`.
pub fn required_window(lease: Duration) -> Duration {
    lease + docket_core::outbox::retry_delay(i32::MAX) + Duration::from_secs(60)
}

/// A stream to create or check.
#[derive(Debug, Clone)]
pub struct StreamSpec {
    /// Its name.
    pub name: String,
    /// The subjects it captures (for creation; checked against an existing stream).
    pub subjects: Vec<String>,
    /// Its duplicate window (for creation).
    pub duplicate_window: Duration,
    /// Replicas (1 for a single server, 3 for a cluster).
    pub replicas: usize,
}

impl StreamSpec {
    /// A file-stored stream `name` capturing `subjects`, with the default window.
    pub fn new(name: impl Into<String>, subjects: Vec<String>) -> Self {
        Self {
            name: name.into(),
            subjects,
            duplicate_window: DEFAULT_WINDOW,
            replicas: 1,
        }
    }

    fn check_input(&self) -> Result<(), NatsError> {
        let bad = |r: String| NatsError::Stream {
            stream: self.name.clone(),
            reason: r,
        };
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(bad(
                "a stream name is 1-64 characters from A-Z a-z 0-9 - _".into()
            ));
        }
        for s in &self.subjects {
            docket_core::outbox::check_subject_filter(s).map_err(|e| bad(e.to_string()))?;
        }
        Ok(())
    }
}

/// Creates the stream when missing (file storage, the spec's window), or checks the one
/// there; then checks it can de-duplicate a relay's re-publish after a lease of `lease`.
pub async fn ensure(
    js: &jetstream::Context,
    spec: &StreamSpec,
    lease: Duration,
) -> Result<stream::Config, NatsError> {
    spec.check_input()?;
    if spec.subjects.is_empty() {
        return Err(NatsError::Stream {
            stream: spec.name.clone(),
            reason: "creating a stream needs --subjects (what it captures, e.g. 'orders.>')".into(),
        });
    }
    let config = stream::Config {
        name: spec.name.clone(),
        subjects: spec.subjects.clone(),
        storage: stream::StorageType::File,
        duplicate_window: spec.duplicate_window,
        num_replicas: spec.replicas,
        ..Default::default()
    };
    // Two relays starting together both find it missing and both create it: the second
    // create fails, and the stream the first made is what the second then checks.
    let mut s = match js.get_stream(&spec.name).await {
        Ok(s) => s,
        Err(_) => match js.create_stream(config).await {
            Ok(s) => s,
            Err(e) => js
                .get_stream(&spec.name)
                .await
                .map_err(|_| NatsError::nats(e))?,
        },
    };
    let info = s.info().await.map_err(NatsError::nats)?.config.clone();
    check_config(&info, &spec.subjects, lease)?;
    Ok(info)
}

/// Checks the existing stream `name`.
pub async fn check(
    js: &jetstream::Context,
    name: &str,
    lease: Duration,
) -> Result<stream::Config, NatsError> {
    StreamSpec::new(name, Vec::new()).check_input()?;
    let mut s = js.get_stream(name).await.map_err(|e| NatsError::Stream {
        stream: name.to_string(),
        reason: format!(
            "{} (create it with --create-stream --subjects …)",
            crate::connect::redact(&e.to_string())
        ),
    })?;
    let info = s.info().await.map_err(NatsError::nats)?.config.clone();
    check_config(&info, &[], lease)?;
    Ok(info)
}

/// What the relay needs of a stream: a de-duplication window covering a re-publish, and
/// (when given) the subjects asked for among those it captures.
pub fn check_config(
    c: &stream::Config,
    subjects: &[String],
    lease: Duration,
) -> Result<(), NatsError> {
    let need = required_window(lease);
    if c.duplicate_window < need {
        return Err(NatsError::Stream {
            stream: c.name.clone(),
            reason: format!(
                "its duplicate window is {}, shorter than the {} a re-publish can come after \
                 (a lease of {} plus the longest retry delay and a minute): JetStream could not \
                 drop it. Raise duplicate_window (e.g. `nats stream edit {} --dupe-window 10m`) \
                 or shorten the lease",
                humantime::format_duration(c.duplicate_window),
                humantime::format_duration(need),
                humantime::format_duration(lease),
                c.name
            ),
        });
    }
    for s in subjects {
        if !c.subjects.iter().any(|have| have == s) {
            return Err(NatsError::Stream {
                stream: c.name.clone(),
                reason: format!(
                    "it exists without subject {s:?} (it captures {:?}); change it or name another stream",
                    c.subjects
                ),
            });
        }
    }
    Ok(())
}
