//! Docket and NATS JetStream: the relay that publishes Docket's transactional outbox.
//!
//! An application writes a message inside its own transaction
//! (`store.publish_in(&mut tx, &NewMessage::new("orders.created", &order)?.key(id))`, or
//! `SELECT docket.publish(…)` in SQL); it exists iff that transaction commits. A
//! [`Relay`] — in a worker process, or `docket relay` on its own — publishes it to a
//! JetStream stream with `Nats-Msg-Id` set, so a re-publish after a crash is dropped inside
//! the stream's duplicate window, and marks it with a fenced write. See docs/outbox.md.
//!
//! The other direction: a [`Source`] runs jobs from a JetStream durable consumer with the
//! same handlers as the database worker ([`docket_worker::Registry`]), for a queue that has
//! outgrown its database; [`JobQueue`] enqueues onto it, [`job_message`] through the outbox
//! (transactionally). See docs/jetstream-source.md.

#![warn(missing_docs)]

pub mod connect;
mod deliver;
pub mod error;
pub mod jobs;
pub mod relay;
pub mod source;
pub mod stream;

/// The NATS client this crate is built on, for reading streams and connecting by hand.
pub use async_nats;
pub use connect::NatsOptions;
pub use deliver::{
    DELIVERIES_HEADER, ERROR_HEADER, OUTCOME_HEADER, SEQUENCE_HEADER, SUBJECT_HEADER,
};
pub use error::NatsError;
pub use jobs::{job_message, new_job_message, JobQueue, KIND_HEADER, METADATA_HEADER};
pub use relay::{Pass, Relay, RelayConfig};
pub use source::{Source, SourceConfig, SourceReport};
pub use stream::StreamSpec;
