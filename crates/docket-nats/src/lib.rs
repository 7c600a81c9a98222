//! Docket and NATS JetStream: the relay that publishes Docket's transactional outbox.
//!
//! An application writes a message inside its own transaction
//! (`store.publish_in(&mut tx, &NewMessage::new("orders.created", &order)?.key(id))`, or
//! `SELECT docket.publish(…)` in SQL); it exists iff that transaction commits. A
//! [`Relay`] — in a worker process, or `docket relay` on its own — publishes it to a
//! JetStream stream with `Nats-Msg-Id` set, so a re-publish after a crash is dropped inside
//! the stream's duplicate window, and marks it with a fenced write. See docs/outbox.md.

#![warn(missing_docs)]

pub mod connect;
pub mod error;
pub mod relay;
pub mod stream;

/// The NATS client this crate is built on, for reading streams and connecting by hand.
pub use async_nats;
pub use connect::NatsOptions;
pub use error::NatsError;
pub use relay::{Pass, Relay, RelayConfig};
pub use stream::StreamSpec;
