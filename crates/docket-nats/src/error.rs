//! The relay's errors. Every message built from a client or server error passes through
//! [`crate::connect::redact`] first.

use docket_core::StoreError;

/// What went wrong talking to NATS or the outbox.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// A setting that cannot work (a file that cannot be read, a malformed URL).
    #[error("NATS configuration: {0}")]
    Config(String),
    /// NATS could not be reached, or a request to it failed; retrying later may work.
    #[error("NATS unavailable: {0}")]
    Unavailable(String),
    /// The stream cannot keep the outbox's promises (missing, no de-duplication window long
    /// enough, subjects not captured); the message says what to change.
    #[error("stream {stream}: {reason}")]
    Stream {
        /// The stream's name.
        stream: String,
        /// What is wrong.
        reason: String,
    },
    /// The database.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl NatsError {
    /// A NATS client error, redacted.
    pub(crate) fn nats(e: impl std::fmt::Display) -> Self {
        NatsError::Unavailable(crate::connect::redact(&e.to_string()))
    }
}
