//! Input limits, checked by every entry point before any write. The same rules are enforced
//! again inside the database (`docket.enqueue`) so other languages get the same protection.

use std::time::Duration;

use crate::duration::{check_bounds, MAX_DELAY};
use crate::job::{NewJob, Schedule};
use crate::ValidationError;

/// Size limits. Stored errors and payloads are bounded so a misbehaving producer or handler
/// cannot bloat the jobs table (and every vacuum of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Serialized `args` size. Defaults to 256 KiB.
    pub max_args_bytes: usize,
    /// Serialized `metadata` size. Defaults to 16 KiB.
    pub max_metadata_bytes: usize,
    /// Stored error message size; longer messages are truncated (not rejected). Defaults to
    /// 4 KiB.
    pub max_error_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_args_bytes: 256 * 1024,
            max_metadata_bytes: 16 * 1024,
            max_error_bytes: 4 * 1024,
        }
    }
}

/// Longest unique key.
pub const MAX_UNIQUE_KEY_BYTES: usize = 512;

fn charset_ok(s: &str, max: usize, extra: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
}

/// [`visible`] line by line: multi-line text (pretty JSON) keeps its line breaks.
pub fn visible_lines(s: &str) -> String {
    s.lines().map(visible).collect::<Vec<_>>().join("\n")
}

/// Text from job data or keys made safe to show to a person, on a terminal or a page:
/// control characters (C0, DEL, C1 — an escape sequence can rewrite a terminal's screen or
/// title) and bidirectional overrides and isolates (which reorder what is shown, so a key can
/// look like another) become visible `\u{..}` escapes. Everything else is kept as it is;
/// HTML escaping is still the page's job.
pub fn visible(s: &str) -> String {
    let bad = |c: char| {
        c.is_control()
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
    };
    if !s.chars().any(bad) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if bad(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A rejected name as an error message may quote it: at most 64 characters (then how long
/// it was), so a 10 KB name is not echoed back in full. Debug-quoting in the message escapes
/// control characters.
pub fn shown(name: &str) -> String {
    let n = name.chars().count();
    if n <= 64 {
        name.to_string()
    } else {
        format!(
            "{}… ({n} characters)",
            name.chars().take(64).collect::<String>()
        )
    }
}

/// Queue names: 1–64 of `A-Z a-z 0-9 _ . -`.
pub fn queue(name: &str) -> Result<(), ValidationError> {
    if charset_ok(name, 64, b"_.-") {
        Ok(())
    } else {
        Err(ValidationError::Queue(shown(name)))
    }
}

/// Kinds: 1–128 of `A-Z a-z 0-9 _ . : / -` (room for Rust paths like `mail::Send`).
pub fn kind(name: &str) -> Result<(), ValidationError> {
    if charset_ok(name, 128, b"_.:/-") {
        Ok(())
    } else {
        Err(ValidationError::Kind(shown(name)))
    }
}

/// Schema names are spliced into SQL as identifiers, so they get the strictest rule:
/// 1–48 of `a-z 0-9 _`, not starting with a digit (48 leaves room for derived names).
pub fn schema(name: &str) -> Result<(), ValidationError> {
    let first_ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    // PostgreSQL reserves pg_* (CREATE SCHEMA refuses it) and information_schema is the
    // catalog's: a queue must never land beside or inside them.
    let reserved = name.starts_with("pg_") || name == "information_schema" || name == "public";
    if first_ok
        && !reserved
        && name.len() <= 48
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        Ok(())
    } else {
        Err(ValidationError::Schema(name.to_string()))
    }
}

fn has_nul(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(a) => a.iter().any(has_nul),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// The size of a payload, measured one way everywhere: the length in bytes of
/// PostgreSQL's text form of the `jsonb` value (`octet_length(args::text)`), which is what
/// the table's CHECK constraints and the SQL functions measure too. Computed here without
/// building the text (this runs for every job enqueued; `benches/hot_paths.rs` measures it):
/// `jsonb` prints `", "` and `": "` between elements, escapes strings like JSON, and prints
/// numbers as `numeric` does (exponents expanded: `1e3` is `1000`, 4 bytes, not 3).
pub fn jsonb_text_len(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => numeric_text_len(&n.to_string()),
        Value::String(s) => json_string_len(s),
        Value::Array(a) => {
            2 + a.iter().map(jsonb_text_len).sum::<usize>() + 2 * a.len().saturating_sub(1)
        }
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, v)| json_string_len(k) + 2 + jsonb_text_len(v))
                .sum::<usize>()
                + 2 * o.len().saturating_sub(1)
        }
    }
}

/// A JSON string as PostgreSQL escapes it: `\"` `\\` `\b` `\f` `\n` `\r` `\t`, other
/// control characters as `\u00XX`, everything else as UTF-8.
fn json_string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The length of `numeric`'s output for a JSON number literal: `[-]digits[.frac][e[+-]exp]`
/// becomes plain decimal notation with `max(0, len(frac) - exp)` fraction digits; zero has
/// no sign.
fn numeric_text_len(lit: &str) -> usize {
    let (neg, body) = match lit.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, lit),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i64>().unwrap_or(0)),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = format!("{int}{frac}");
    // Position of the decimal point within `digits` after applying the exponent.
    let point = int.len() as i64 + exp;
    let scale = (frac.len() as i64 - exp).max(0);
    let first_nonzero = digits.bytes().position(|b| b != b'0');
    let Some(first) = first_nonzero else {
        // Zero: "0" plus the fraction digits, never a sign.
        return 1 + if scale > 0 { 1 + scale as usize } else { 0 };
    };
    // Integer part: the significant digits before the point, or "0".
    let int_len = (point - first as i64).max(1) as usize;
    let frac_len = if scale > 0 { 1 + scale as usize } else { 0 };
    usize::from(neg) + int_len + frac_len
}

/// Checks a JSON payload's size and content; returns its size as stored.
pub fn json_payload(
    what: &'static str,
    v: &serde_json::Value,
    limit: usize,
) -> Result<usize, ValidationError> {
    if has_nul(v) {
        return Err(ValidationError::Nul { what });
    }
    let size = jsonb_text_len(v);
    if size > limit {
        return Err(ValidationError::TooLarge { what, size, limit });
    }
    if let Some(n) = longest_number(v).filter(|&n| n > MAX_NUMBER_TEXT) {
        return Err(ValidationError::Other {
            what,
            reason: format!(
                "a number is stored as {n} digits (PostgreSQL writes numbers out in full: \
                 1e131000 is 131,001 characters); at most {MAX_NUMBER_TEXT}: send it as a string"
            ),
        });
    }
    Ok(size)
}

/// The most characters one JSON number may take once stored. Without it a 31-byte document
/// (`{"x":1e131000}`) came back as 131 KB: bounded by the payload limit, but an
/// amplification no real number needs.
pub const MAX_NUMBER_TEXT: usize = 1024;

/// The stored length of the longest number in `v`.
fn longest_number(v: &serde_json::Value) -> Option<usize> {
    use serde_json::Value;
    match v {
        Value::Number(n) => Some(numeric_text_len(&n.to_string())),
        Value::Array(a) => a.iter().filter_map(longest_number).max(),
        Value::Object(o) => o.values().filter_map(longest_number).max(),
        _ => None,
    }
}

/// Checks every field of a job to enqueue.
pub fn new_job(job: &NewJob, limits: &Limits) -> Result<(), ValidationError> {
    queue(&job.queue)?;
    kind(&job.kind)?;
    json_payload("args", &job.args, limits.max_args_bytes)?;
    if !job.metadata.is_object() {
        return Err(ValidationError::MetadataNotObject);
    }
    json_payload("metadata", &job.metadata, limits.max_metadata_bytes)?;
    if !(1..=1000).contains(&job.max_attempts) {
        return Err(ValidationError::MaxAttempts(job.max_attempts));
    }
    if !(-100..=100).contains(&job.priority) {
        return Err(ValidationError::Priority(job.priority.into()));
    }
    if let Some(k) = &job.unique_key {
        if k.is_empty() || k.len() > MAX_UNIQUE_KEY_BYTES {
            return Err(ValidationError::UniqueKey(format!(
                "length must be 1..={MAX_UNIQUE_KEY_BYTES} bytes"
            )));
        }
        if k.contains('\0') {
            return Err(ValidationError::Nul { what: "unique key" });
        }
    }
    key("ordering key", job.ordering_key.as_deref())?;
    key("concurrency key", job.concurrency_key.as_deref())?;
    match job.schedule {
        Schedule::Delay(d) => {
            check_bounds("delay", d, Duration::ZERO, MAX_DELAY)?;
        }
        Schedule::At(t) => run_at(t)?,
        Schedule::Now => {}
    }
    if let Some(b) = job.backoff {
        check_bounds(
            "backoff base",
            b.base,
            Duration::from_millis(1),
            Duration::from_secs(7 * 24 * 3600),
        )?;
        check_bounds(
            "backoff cap",
            b.cap,
            b.base,
            Duration::from_secs(30 * 24 * 3600),
        )?;
    }
    Ok(())
}

/// Earliest and latest `run_at` (also the table's CHECK, migration 0008): whole years that
/// every engine and every client library represents.
pub fn run_at(t: chrono::DateTime<chrono::Utc>) -> Result<(), ValidationError> {
    use chrono::Datelike;
    if (1970..=9999).contains(&t.year()) {
        Ok(())
    } else {
        Err(ValidationError::Other {
            what: "run_at",
            reason: format!("{t} is outside 1970-01-01 .. 9999-12-31"),
        })
    }
}

/// Truncates an error message to at most `max` bytes on a char boundary, marking the cut.
/// Passwords in connection strings are redacted first: a handler's error may quote one
/// (a driver's message, a URL with credentials), and stored errors are shown to operators.
pub fn truncate_message(msg: &str, max: usize) -> String {
    let clean: String = crate::redact::redact(msg).replace('\0', "\u{FFFD}");
    if clean.len() <= max {
        return clean;
    }
    let mut end = max.saturating_sub(3);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &clean[..end])
}

/// Longest ordering or concurrency key.
pub const MAX_KEY_BYTES: usize = 512;

/// An ordering or concurrency key: 1–512 bytes, no NUL.
pub fn key(what: &'static str, k: Option<&str>) -> Result<(), ValidationError> {
    let Some(k) = k else { return Ok(()) };
    if k.is_empty() || k.len() > MAX_KEY_BYTES {
        return Err(ValidationError::Other {
            what,
            reason: format!("length must be 1..={MAX_KEY_BYTES} bytes"),
        });
    }
    if k.contains('\0') {
        return Err(ValidationError::Nul { what });
    }
    Ok(())
}

/// The cap of a bounded count (overview, queue health, depth samples): 1..=10,000,000.
pub fn count_cap(cap: i64) -> Result<(), ValidationError> {
    if (1..=10_000_000).contains(&cap) {
        Ok(())
    } else {
        Err(ValidationError::Other {
            what: "count cap",
            reason: format!("{cap} is out of range 1..=10000000"),
        })
    }
}

/// A worker's report: queue names valid, and the per-queue buffered counts (when given) one
/// per queue, so no count is filed under the wrong queue.
pub fn worker_beat(beat: &crate::WorkerBeat) -> Result<(), ValidationError> {
    for q in &beat.queues {
        queue(q)?;
    }
    let (n, q) = (beat.buffered_by_queue.len(), beat.queues.len());
    if n != 0 && n != q {
        return Err(ValidationError::Other {
            what: "worker report",
            reason: format!("{n} buffered counts for {q} queues"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_worker_report_files_each_buffered_count_under_one_queue() {
        let mut beat = crate::WorkerBeat {
            owner: "w".into(),
            host: "h".into(),
            pid: 1,
            queues: vec!["a".into(), "b".into()],
            concurrency: 2,
            in_flight: 3,
            buffered: 3,
            buffered_by_queue: vec![1, 2],
        };
        assert!(worker_beat(&beat).is_ok());
        assert_eq!(beat.buffered_in("b"), 2);
        assert_eq!(beat.buffered_in("c"), 0);
        beat.buffered_by_queue = vec![];
        assert!(
            worker_beat(&beat).is_ok(),
            "an older worker says nothing per queue"
        );
        assert_eq!(beat.buffered_in("b"), 0);
        beat.buffered_by_queue = vec![3];
        let e = worker_beat(&beat).unwrap_err().to_string();
        assert!(e.contains("1 buffered counts for 2 queues"), "{e}");
        beat.buffered_by_queue = vec![1, 2];
        beat.queues[1] = "bad name".into();
        assert!(worker_beat(&beat).is_err());
    }

    #[test]
    fn names() {
        assert!(queue("default").is_ok());
        assert!(queue("mail.high-1_x").is_ok());
        assert!(queue("").is_err());
        assert!(queue("a'; DROP TABLE jobs; --").is_err());
        assert!(queue(&"q".repeat(65)).is_err());
        assert!(kind("mail::Send/v2").is_ok());
        assert!(kind("bad kind").is_err());
        assert!(schema("docket").is_ok());
        assert!(schema("Docket").is_err());
        assert!(schema("1abc").is_err());
        assert!(schema("a\"b").is_err());
        for reserved in [
            "pg_catalog",
            "pg_toast",
            "pg_x",
            "information_schema",
            "public",
        ] {
            assert!(schema(reserved).is_err(), "{reserved}");
        }
    }

    #[test]
    fn payloads() {
        let l = Limits::default();
        assert!(new_job(&NewJob::new("q", "k", json!({"a": 1})), &l).is_ok());
        let big = json!({"s": "x".repeat(300 * 1024)});
        assert!(matches!(
            new_job(&NewJob::new("q", "k", big), &l),
            Err(ValidationError::TooLarge { what: "args", .. })
        ));
        let nul = json!({"s": "a\u{0}b"});
        assert!(matches!(
            new_job(&NewJob::new("q", "k", nul), &l),
            Err(ValidationError::Nul { .. })
        ));
        assert!(new_job(&NewJob::new("q", "k", json!(1)).max_attempts(0), &l).is_err());
        assert!(new_job(&NewJob::new("q", "k", json!(1)).priority(101), &l).is_err());
        assert!(new_job(&NewJob::new("q", "k", json!(1)).metadata(json!([1])), &l).is_err());
        assert!(new_job(&NewJob::new("q", "k", json!(1)).unique_key("a\0"), &l).is_err());
    }

    #[test]
    fn truncation_is_bounded_and_char_safe() {
        let s = "é".repeat(5000);
        let t = truncate_message(&s, 4096);
        assert!(t.len() <= 4096);
        assert!(t.ends_with("..."));
        assert_eq!(truncate_message("short", 10), "short");
        assert_eq!(
            truncate_message("connect postgres://u:pw@h/db failed", 100),
            "connect postgres://u:***@h/db failed"
        );
    }
}

#[cfg(test)]
mod shown_tests {
    #[test]
    fn long_names_are_cut_in_messages() {
        let e = super::queue(&"x".repeat(10_000)).unwrap_err().to_string();
        assert!(e.len() < 200, "{e}");
        assert!(e.contains("(10000 characters)"), "{e}");
        let e = super::kind("a\u{1b}[31mred").unwrap_err().to_string();
        assert!(!e.contains('\u{1b}'), "control characters are escaped: {e}");
    }
}

#[cfg(test)]
mod number_tests {
    #[test]
    fn a_number_that_expands_past_the_bound_is_refused() {
        let v: serde_json::Value = serde_json::from_str(r#"{"x":1e131000}"#).unwrap();
        let e = super::json_payload("args", &v, 262_144)
            .unwrap_err()
            .to_string();
        assert!(e.contains("131001 digits") || e.contains("digits"), "{e}");
        let ok: serde_json::Value =
            serde_json::from_str(r#"{"amount":12345678901234567890.123456789,"e":1e300}"#).unwrap();
        assert!(super::json_payload("args", &ok, 262_144).is_ok());
    }
}
