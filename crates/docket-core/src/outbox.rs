//! The transactional outbox: messages for a broker (NATS JetStream) written inside the
//! application's transaction, so one exists iff that transaction commits, and published
//! afterwards by a relay (the `docket-nats` crate) that claims them with a lease and a
//! fencing token like jobs.
//!
//! What a relay may rely on, on every engine:
//! - **Order within a key.** A claim takes a keyed message only when it is its key's oldest
//!   unpublished one, so the next message of a key is claimable only after the previous one
//!   was marked published — after the broker acknowledged it.
//! - **Fenced marks.** Each claim adds one to the message's `attempt`; a mark or a failure
//!   carries the attempt it claimed and changes nothing once another claim took the
//!   message (a stopped relay whose lease ran out marks nothing).
//! - **A stable de-duplication id.** [`message_id`]: the outbox's origin (random, made when
//!   the table was created) and the message's id, sent as `Nats-Msg-Id`, so a re-publish
//!   after a crash inside the stream's duplicate window is dropped by JetStream.
//!
//! Every input is checked here, before any write, and again by PostgreSQL's `publish()`
//! (migration 0032) for callers that reach SQL directly.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ValidationError;

/// The largest payload (its JSON text, in bytes). JetStream's default `max_payload` is
/// 1 MiB for the whole message; this leaves room for the headers.
pub const MAX_PAYLOAD: usize = 1_000_000;
/// The largest subject, in bytes.
pub const MAX_SUBJECT: usize = 255;
/// The largest ordering key, in bytes.
pub const MAX_KEY: usize = 255;
/// The most headers a message may carry.
pub const MAX_HEADERS: usize = 32;
/// The largest total of header names and values, in bytes.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// The longest stored publish error, in characters (a broker's message can be long).
pub const MAX_ERROR: usize = 2_000;

/// A message to publish once the transaction that writes it commits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMessage {
    /// The NATS subject (tokens separated by `.`, no wildcards, no whitespace).
    pub subject: String,
    /// The payload, a JSON document, published as its text.
    pub payload: serde_json::Value,
    /// Messages with the same key reach the stream in the order they were written; `None`
    /// for no order (published in parallel).
    pub key: Option<String>,
    /// Extra headers (names must not start with `Nats-`: the relay sets `Nats-Msg-Id`).
    pub headers: BTreeMap<String, String>,
}

impl NewMessage {
    /// A message with `payload` serialised to JSON.
    pub fn new(
        subject: impl Into<String>,
        payload: &impl Serialize,
    ) -> Result<Self, ValidationError> {
        let payload = serde_json::to_value(payload).map_err(|e| ValidationError::Other {
            what: "outbox payload",
            reason: e.to_string(),
        })?;
        Ok(Self {
            subject: subject.into(),
            payload,
            key: None,
            headers: BTreeMap::new(),
        })
    }

    /// Orders this message after every earlier message with the same key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// The payload's JSON text, checked. Its size is measured as PostgreSQL's `jsonb` prints
    /// it (what `publish()` measures), so every engine refuses the same payloads.
    pub fn payload_text(&self) -> Result<String, ValidationError> {
        let size = crate::validate::jsonb_text_len(&self.payload);
        if size > MAX_PAYLOAD {
            return Err(ValidationError::TooLarge {
                what: "outbox payload",
                size,
                limit: MAX_PAYLOAD,
            });
        }
        let text = self.payload.to_string();
        check_payload(&text)?;
        Ok(text)
    }

    /// The headers as a JSON object's text, or `None` when there are none.
    pub fn headers_text(&self) -> Option<String> {
        (!self.headers.is_empty())
            .then(|| serde_json::to_string(&self.headers).expect("a map of strings serialises"))
    }

    /// Checks every field; nothing is written when this fails.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.checked().map(drop)
    }

    /// Checks every field and returns the payload's JSON text (what a write stores), so a
    /// publish serialises its payload once.
    pub fn checked(&self) -> Result<String, ValidationError> {
        check_subject(&self.subject)?;
        if let Some(k) = &self.key {
            check_key(k)?;
        }
        check_headers(&self.headers)?;
        self.payload_text()
    }
}

fn refused(reason: impl Into<String>) -> ValidationError {
    ValidationError::Other {
        what: "outbox message",
        reason: reason.into(),
    }
}

/// A subject a publish may use: 1-255 bytes of printable ASCII without spaces, tokens
/// separated by single dots, and no wildcard tokens (`*`, `>`): a message goes to one
/// subject.
pub fn check_subject(s: &str) -> Result<(), ValidationError> {
    if s.is_empty() || s.len() > MAX_SUBJECT {
        return Err(refused(format!(
            "subject must be 1-{MAX_SUBJECT} bytes (got {})",
            s.len()
        )));
    }
    if let Some(c) = s.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(refused(format!(
            "subject {:?} contains {c:?}: use printable ASCII without spaces",
            s.escape_debug().to_string()
        )));
    }
    for token in s.split('.') {
        if token.is_empty() {
            return Err(refused(format!("subject {s:?} has an empty token")));
        }
        if token.contains('*') || token.contains('>') {
            return Err(refused(format!(
                "subject {s:?} contains a wildcard: a message is published to one subject"
            )));
        }
    }
    Ok(())
}

/// A subject filter a stream may capture (wildcards allowed, `>` only last).
pub fn check_subject_filter(s: &str) -> Result<(), ValidationError> {
    if s.is_empty() || s.len() > MAX_SUBJECT || !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err(refused(format!(
            "subject filter {:?} must be 1-{MAX_SUBJECT} bytes of printable ASCII without spaces",
            s.escape_debug().to_string()
        )));
    }
    let tokens: Vec<&str> = s.split('.').collect();
    for (i, t) in tokens.iter().enumerate() {
        let bad = t.is_empty()
            || (t.contains('*') && *t != "*")
            || (t.contains('>') && (*t != ">" || i + 1 != tokens.len()));
        if bad {
            return Err(refused(format!(
                "subject filter {s:?} is malformed at {t:?}"
            )));
        }
    }
    Ok(())
}

fn check_key(k: &str) -> Result<(), ValidationError> {
    if k.is_empty() || k.len() > MAX_KEY || k.chars().any(char::is_control) {
        return Err(refused(format!(
            "key must be 1-{MAX_KEY} bytes without control characters"
        )));
    }
    Ok(())
}

fn check_headers(h: &BTreeMap<String, String>) -> Result<(), ValidationError> {
    if h.len() > MAX_HEADERS {
        return Err(refused(format!(
            "{} headers, over the limit of {MAX_HEADERS}",
            h.len()
        )));
    }
    let mut bytes = 0;
    for (name, value) in h {
        // RFC 9110 token characters: what NATS writes as a header name verbatim.
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(refused(format!(
                "header name {:?} must be 1 or more token characters (A-Z a-z 0-9 !#$%&'*+-.^_`|~)",
                name.escape_debug().to_string()
            )));
        }
        if name.len() >= 5 && name[..5].eq_ignore_ascii_case("nats-") {
            return Err(refused(format!(
                "header {name:?} is reserved: NATS headers are the relay's (it sets Nats-Msg-Id)"
            )));
        }
        if value.chars().any(|c| c == '\r' || c == '\n' || c == '\0') {
            return Err(refused(format!(
                "header {name:?} has a line break or NUL in its value"
            )));
        }
        bytes += name.len() + value.len();
    }
    if bytes > MAX_HEADER_BYTES {
        return Err(refused(format!(
            "headers are {bytes} bytes, over the limit of {MAX_HEADER_BYTES}"
        )));
    }
    Ok(())
}

fn check_payload(text: &str) -> Result<(), ValidationError> {
    if text.len() > MAX_PAYLOAD {
        return Err(ValidationError::TooLarge {
            what: "outbox payload",
            size: text.len(),
            limit: MAX_PAYLOAD,
        });
    }
    if text.contains("\\u0000") {
        return Err(ValidationError::Nul {
            what: "outbox payload",
        });
    }
    Ok(())
}

/// The de-duplication id JetStream sees for message `id` of the outbox with `origin`.
pub fn message_id(origin: &str, id: i64) -> String {
    format!("{origin}-{id}")
}

/// A message a relay claimed: publish it, then mark it with this attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxMessage {
    /// Its id (the order it was written in).
    pub id: i64,
    /// The fencing token of this claim.
    pub attempt: i32,
    /// Failed publishes so far (the next retry delay doubles with each).
    pub errors: i32,
    /// The subject.
    pub subject: String,
    /// The payload's JSON text.
    pub payload: String,
    /// Its ordering key.
    pub key: Option<String>,
    /// Its headers.
    pub headers: BTreeMap<String, String>,
}

/// A publish the broker acknowledged, to mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// The message.
    pub id: i64,
    /// The attempt that claimed it (the fence).
    pub attempt: i32,
    /// Its sequence number in the stream.
    pub stream_seq: u64,
    /// True when the stream already held it (a re-publish inside the duplicate window).
    pub duplicate: bool,
}

/// The outbox as an operator sees it. Counts stop at 100,000 (the dashboard's and the
/// gauges' bounded reads); the oldest age is exact.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OutboxStats {
    /// Messages not yet published.
    pub unpublished: i64,
    /// Of those, held by a relay's live lease (being published).
    pub in_flight: i64,
    /// Of those, whose last publish failed.
    pub failing: i64,
    /// The oldest unpublished message's age, in milliseconds (0 when none).
    pub oldest_age_ms: i64,
    /// Published messages still kept (until the retention prunes them).
    pub published: i64,
    /// The newest publish error, if any unpublished message has one.
    pub last_error: Option<String>,
}

/// Which messages a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutboxState {
    /// Not yet published (the default).
    #[default]
    Unpublished,
    /// Whose last publish failed and are not yet published.
    Failing,
    /// Published and kept.
    Published,
}

impl std::str::FromStr for OutboxState {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "unpublished" => Ok(Self::Unpublished),
            "failing" => Ok(Self::Failing),
            "published" => Ok(Self::Published),
            _ => Err(ValidationError::Other {
                what: "outbox state",
                reason: format!("{s:?}: use unpublished, failing or published"),
            }),
        }
    }
}

impl OutboxState {
    /// Its name in the CLI and the SQL text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unpublished => "unpublished",
            Self::Failing => "failing",
            Self::Published => "published",
        }
    }
}

/// One message in a listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutboxRow {
    /// Its id.
    pub id: i64,
    /// The subject.
    pub subject: String,
    /// Its ordering key.
    pub key: Option<String>,
    /// Claims so far.
    pub attempt: i32,
    /// Failed publishes so far.
    pub errors: i32,
    /// The last publish error.
    pub last_error: Option<String>,
    /// When it was written.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When the broker acknowledged it.
    pub published_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Its stream sequence number, once published.
    pub stream_seq: Option<i64>,
    /// The payload's JSON text. `None` for a published message whose payload was not kept:
    /// PostgreSQL's history keeps payloads of at most 1,800 bytes as stored (a larger one is
    /// in the stream at `stream_seq`); SQLite and MariaDB keep every one.
    pub payload: Option<String>,
}

/// The delay before a message whose publish failed `errors` times is claimed again:
/// doubling from 1 s, at most 5 minutes (a stream missing for a day is retried every
/// five minutes, not in a busy loop).
pub fn retry_delay(errors: i32) -> Duration {
    let exp = errors.clamp(1, 20) as u32 - 1;
    Duration::from_secs((1u64 << exp.min(9)).min(300))
}

/// A stored error: at most [`MAX_ERROR`] characters, control characters replaced.
pub fn stored_error(e: &str) -> String {
    let clean: String = e
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_ERROR)
        .collect();
    crate::redact::redact(&clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_checked() {
        for ok in ["orders", "orders.created", "a.b-c_d.9"] {
            check_subject(ok).unwrap();
        }
        for bad in [
            "",
            "orders.",
            ".orders",
            "a..b",
            "orders.*",
            "orders.>",
            "or ders",
            "orders\n",
            &"x".repeat(256),
        ] {
            assert!(check_subject(bad).is_err(), "{bad:?} was accepted");
        }
        check_subject_filter("orders.>").unwrap();
        check_subject_filter("orders.*.x").unwrap();
        assert!(check_subject_filter("orders.>.x").is_err());
        assert!(check_subject_filter("or*").is_err());
    }

    #[test]
    fn headers_keys_and_payloads_are_checked() {
        let m = NewMessage::new("a", &serde_json::json!({"n": 1})).unwrap();
        m.clone().header("X-Trace", "abc").validate().unwrap();
        assert!(m.clone().header("Nats-Msg-Id", "x").validate().is_err());
        assert!(m
            .clone()
            .header("nats-expected-stream", "x")
            .validate()
            .is_err());
        assert!(m.clone().header("X", "a\r\nB: c").validate().is_err());
        assert!(m.clone().header("bad name", "v").validate().is_err());
        assert!(m.clone().key("").validate().is_err());
        assert!(m.clone().key("k\u{7}").validate().is_err());
        m.clone().key("tenant-1").validate().unwrap();
        let big = NewMessage::new("a", &"x".repeat(MAX_PAYLOAD)).unwrap();
        assert!(matches!(
            big.validate(),
            Err(ValidationError::TooLarge { .. })
        ));
        let nul = NewMessage::new("a", &"a\u{0}b").unwrap();
        assert!(matches!(nul.validate(), Err(ValidationError::Nul { .. })));
    }

    #[test]
    fn retry_delay_doubles_to_a_cap() {
        assert_eq!(retry_delay(1), Duration::from_secs(1));
        assert_eq!(retry_delay(2), Duration::from_secs(2));
        assert_eq!(retry_delay(9), Duration::from_secs(256));
        assert_eq!(retry_delay(10), Duration::from_secs(300));
        assert_eq!(retry_delay(1000), Duration::from_secs(300));
    }
}
