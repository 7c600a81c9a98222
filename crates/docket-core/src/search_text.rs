//! Job searches written as text: a form's fields, a query string, command-line flags.

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::inspect::{FieldEq, JobQuery};
use crate::{JobId, JobState};

/// A time as an operator types it: RFC 3339, or `2026-12-01T10:00` (UTC).
pub fn parse_time(what: &str, s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Ok(t.and_utc());
        }
    }
    Err(format!(
        "{what}: {s:?} is not a time (use 2026-12-01T10:00, UTC, or RFC 3339)"
    ))
}

impl JobQuery {
    /// The search a form, a query string or command-line flags describe (keys: queue, kind,
    /// state, priority, since, until, ordering_key, concurrency_key, field, error, before,
    /// before_at, limit), validated. Bad values are an error naming the field; nothing is
    /// half-applied. One parser, so the dashboard's filters and `docket jobs list` agree.
    pub fn from_fields<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<JobQuery, String> {
        let text = |k: &str| get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let q = JobQuery {
            queue: text("queue").map(str::to_string),
            kind: text("kind").map(str::to_string),
            state: match text("state") {
                Some("retrying" | "scheduled") => Some(JobState::Pending),
                s => s
                    .map(|s| s.parse::<JobState>().map_err(|e| e.to_string()))
                    .transpose()?,
            },
            pending: match text("state") {
                Some("retrying") => Some(crate::inspect::PendingPhase::Retrying),
                Some("scheduled") => Some(crate::inspect::PendingPhase::Scheduled),
                _ => None,
            },
            priority: text("priority")
                .map(|p| {
                    p.parse::<i16>()
                        .map_err(|_| format!("priority {p:?} is not a number"))
                })
                .transpose()?,
            since: text("since").map(|s| parse_time("since", s)).transpose()?,
            until: text("until").map(|s| parse_time("until", s)).transpose()?,
            ordering_key: text("ordering_key").map(str::to_string),
            concurrency_key: text("concurrency_key").map(str::to_string),
            field: text("field")
                .map(|f| FieldEq::parse(f).map_err(|e| e.to_string()))
                .transpose()?,
            // A browser sends a form field's line breaks as CRLF; stored messages have LF.
            last_error: get("error")
                .filter(|v| !v.is_empty())
                .map(|v| v.replace("\r\n", "\n")),
            before_finished_at: text("before_at")
                .map(|s| parse_time("before_at", s))
                .transpose()?,
            before: text("before")
                .map(|b| {
                    b.parse::<i64>()
                        .map(JobId)
                        .map_err(|_| "before must be a job id".to_string())
                })
                .transpose()?,
            limit: text("limit")
                .map(|l| {
                    l.parse::<i64>()
                        .map_err(|_| "limit must be a number".to_string())
                })
                .transpose()?
                .unwrap_or(0),
        };
        q.validate().map_err(|e| e.to_string())?;
        Ok(q)
    }
}
