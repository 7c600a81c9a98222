//! One line of a bulk file (NDJSON: one job object per line), parsed and validated.
//!
//! Every engine's `docket enqueue --bulk` reads files through this one parser, so a line means
//! the same job on PostgreSQL, SQLite and MariaDB, and the fuzz target `bulk_line` exercises
//! exactly what users' files meet. A line is hostile input: it yields a job that passed
//! [`validate::new_job`] or an error that says what is wrong, never a panic.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::duration::{parse_bounded, MAX_DELAY};
use crate::{validate, NewJob};

/// Why a line is not a job. The message is meant for the user as it stands (the caller adds
/// the line number).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LineError(pub String);

/// One NDJSON line as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default = "default_queue")]
    queue: String,
    kind: String,
    #[serde(default = "empty_object")]
    args: serde_json::Value,
    #[serde(default)]
    priority: i16,
    /// "30s" or a number of seconds.
    delay: Option<serde_json::Value>,
    run_at: Option<String>,
    max_attempts: Option<i32>,
    unique_key: Option<String>,
    metadata: Option<serde_json::Value>,
    ordering_key: Option<String>,
    concurrency_key: Option<String>,
}

fn default_queue() -> String {
    "default".into()
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

/// A delay as a human duration ("30s", "2h"), between zero and [`MAX_DELAY`].
pub fn delay(s: &str) -> Result<Duration, LineError> {
    parse_bounded("delay", s, Duration::ZERO, MAX_DELAY).map_err(|e| LineError(e.to_string()))
}

/// A start time in RFC 3339.
pub fn run_at(s: &str) -> Result<DateTime<Utc>, LineError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| LineError(format!("run_at {s:?} is not an RFC 3339 time: {e}")))
}

/// Parses one line: `Ok(None)` for a blank line, `Ok(Some(job))` for a job that passed the
/// same validation as every other entry point, or what is wrong with it.
pub fn parse_line(line: &str) -> Result<Option<NewJob>, LineError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    if line.trim_start().starts_with('[') {
        return Err(LineError(
            "a JSON array; each line holds one job object (NDJSON), not a list of them".into(),
        ));
    }
    let parsed: Line =
        serde_json::from_str(line).map_err(|e| LineError(format!("not a job object: {e}")))?;
    parsed.into_job().map(Some)
}

impl Line {
    fn into_job(self) -> Result<NewJob, LineError> {
        let mut job = NewJob::new(self.queue, self.kind, self.args).priority(self.priority);
        if let Some(m) = self.max_attempts {
            job = job.max_attempts(m);
        }
        if let Some(k) = self.unique_key {
            job = job.unique_key(k);
        }
        job.ordering_key = self.ordering_key;
        job.concurrency_key = self.concurrency_key;
        if let Some(m) = self.metadata {
            job = job.metadata(m);
        }
        match (self.delay, self.run_at) {
            (Some(_), Some(_)) => return Err(LineError("give delay or run_at, not both".into())),
            (Some(serde_json::Value::String(s)), None) => job = job.delay(delay(&s)?),
            (Some(serde_json::Value::Number(n)), None) => {
                let secs = n.as_f64().unwrap_or(-1.0);
                if !(0.0..=MAX_DELAY.as_secs_f64()).contains(&secs) {
                    return Err(LineError(format!("delay {n} is out of range")));
                }
                job = job.delay(Duration::from_secs_f64(secs));
            }
            (Some(other), None) => {
                return Err(LineError(format!(
                    "delay must be a duration string or seconds, not {other}"
                )))
            }
            (None, Some(t)) => job = job.run_at(run_at(&t)?),
            (None, None) => {}
        }
        validate::new_job(&job, &validate::Limits::default())
            .map_err(|e| LineError(e.to_string()))?;
        Ok(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_are_nothing_and_arrays_are_named() {
        assert_eq!(parse_line("  \t"), Ok(None));
        let e = parse_line(r#" [{"kind":"k"}]"#).unwrap_err();
        assert!(e.0.contains("JSON array"), "{e}");
    }

    #[test]
    fn a_full_line_is_the_job_it_says() {
        let job = parse_line(
            r#"{"queue":"q","kind":"k","args":{"a":1},"priority":-3,"delay":"30s","max_attempts":4,"unique_key":"u","ordering_key":"o"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!((job.queue.as_str(), job.kind.as_str()), ("q", "k"));
        assert_eq!(job.priority, -3);
        assert_eq!(job.max_attempts, 4);
        assert_eq!(job.ordering_key.as_deref(), Some("o"));
    }

    #[test]
    fn delays_out_of_range_and_both_times_are_refused() {
        for line in [
            r#"{"kind":"k","delay":-1}"#,
            r#"{"kind":"k","delay":1e300}"#,
            r#"{"kind":"k","delay":"-5s"}"#,
            r#"{"kind":"k","delay":"1s","run_at":"2030-01-01T00:00:00Z"}"#,
            r#"{"kind":"k","delay":true}"#,
            r#"{"kind":"k","run_at":"tomorrow"}"#,
            r#"{"kind":"k","extra":1}"#,
        ] {
            assert!(parse_line(line).is_err(), "{line}");
        }
    }

    mod arbitrary {
        //! The parser against arbitrary input: any line is a job that passed validation or a
        //! clear error, never a panic (the fuzz target `bulk_line` explores further).
        use super::super::parse_line;
        use proptest::prelude::*;

        fn field() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("null".to_string()),
                any::<i64>().prop_map(|n| n.to_string()),
                any::<f64>().prop_map(|f| format!("{f:e}")),
                "[ -~]{0,20}".prop_map(|s| serde_json::to_string(&s).unwrap()),
                Just(r#""infinity""#.to_string()),
                Just(r#""+275760-09-13T00:00:00Z""#.to_string()),
                Just(r#""1969-12-31T23:59:59Z""#.to_string()),
                Just(r#""30s""#.to_string()),
                Just(r#""-5s""#.to_string()),
                Just("1e999999".to_string()),
                Just(r#"{"a":[1,{"b":"\u0000"}]}"#.to_string()),
                Just("[]".to_string()),
            ]
        }

        proptest! {
            #[test]
            fn arbitrary_text_never_panics(line in ".{0,200}") {
                let _ = parse_line(&line);
            }

            #[test]
            fn lines_with_hostile_fields_are_valid_jobs_or_errors(
                values in prop::collection::vec(field(), 12),
            ) {
                let names = ["queue", "kind", "args", "priority", "delay", "run_at",
                             "max_attempts", "unique_key", "metadata", "ordering_key",
                             "concurrency_key", "extra"];
                for i in 0..names.len() {
                    let line = format!(r#"{{"kind":"k","{}":{}}}"#, names[i], values[i]);
                    if let Ok(Some(job)) = parse_line(&line) {
                        // Whatever parses has passed the validation of every entry point.
                        prop_assert!(
                            crate::validate::new_job(&job, &Default::default()).is_ok(),
                            "{}", line
                        );
                    }
                }
            }
        }
    }
}
