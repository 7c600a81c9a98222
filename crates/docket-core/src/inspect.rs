//! What operators look at and act on in bulk: a filtered, keyset-paginated job search, a
//! per-queue overview cheap enough to refresh every second on a table of millions, dead jobs
//! grouped by kind and error, bulk retry and cancel, per-minute throughput samples, and the
//! audit log of operator actions.
//!
//! Everything here is bounded by construction: counts stop at a cap (and say so), pages are
//! keyset pages, bulk actions take at most one page of ids per call. A dashboard that counts
//! the whole table on every refresh is the dashboard that takes the database down.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::ValidationError;
use crate::job::{JobId, JobRecord, JobState};
use crate::validate;

/// The most jobs one search page or one bulk call takes.
pub const MAX_PAGE: i64 = 1000;

/// Jobs one page of a search looks at when a filter has no index (kind, priority, a time
/// range, a JSON path, the last error) — what keeps such a page fast on a table of millions.
pub const SCAN_WINDOW: i64 = 20_000;

/// Which JSON document a [`FieldEq`] looks into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Document {
    /// The job's arguments.
    Args,
    /// The job's metadata.
    Metadata,
}

/// `args.user_id = 42`: a JSON path into the job's args or metadata equal to a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldEq {
    /// Which document the path starts in.
    pub document: Document,
    /// Object keys (or array indexes as decimal strings), outermost first; 1 to 16 of them.
    pub path: Vec<String>,
    /// Compared with JSON equality (so `42` matches `42.0`, `"42"` does not match `42`).
    pub value: serde_json::Value,
}

impl FieldEq {
    /// Parses `args.a.b = VALUE` or `metadata.k = VALUE`. VALUE is JSON when it parses as
    /// JSON (`42`, `true`, `"x"`, `null`, `{"a":1}`), otherwise the bare text as a string.
    pub fn parse(text: &str) -> Result<FieldEq, ValidationError> {
        let bad = |reason: &str| ValidationError::Other {
            what: "field filter",
            reason: format!("{reason} (expected args.PATH = VALUE or metadata.PATH = VALUE)"),
        };
        if text.len() > 1024 {
            return Err(bad("longer than 1024 bytes"));
        }
        if text.contains('\0') {
            return Err(ValidationError::Nul {
                what: "field filter",
            });
        }
        let (lhs, rhs) = text.split_once('=').ok_or_else(|| bad("no '='"))?;
        let mut parts = lhs.trim().split('.');
        let document = match parts.next() {
            Some("args") => Document::Args,
            Some("metadata") => Document::Metadata,
            _ => return Err(bad("the path must start with args. or metadata.")),
        };
        let path: Vec<String> = parts.map(|p| p.trim().to_string()).collect();
        if path.is_empty() || path.len() > 16 || path.iter().any(|p| p.is_empty()) {
            return Err(bad("the path needs 1 to 16 non-empty keys"));
        }
        let rhs = rhs.trim();
        if rhs.is_empty() {
            return Err(bad("no value"));
        }
        let value = serde_json::from_str(rhs)
            .unwrap_or_else(|_| serde_json::Value::String(rhs.to_string()));
        let f = FieldEq {
            document,
            path,
            value,
        };
        // The bound holds for the filter as it is shown too (pages put it back in the search
        // box): JSON escapes can lengthen a value, and a filter that was accepted once and
        // refused when sent again from its own page was found by the `job_filter` fuzz target.
        if f.display().len() > 1024 {
            return Err(bad(
                "longer than 1024 bytes once its value is written as JSON",
            ));
        }
        Ok(f)
    }

    /// The filter as it would be typed.
    pub fn display(&self) -> String {
        let doc = match self.document {
            Document::Args => "args",
            Document::Metadata => "metadata",
        };
        format!("{doc}.{} = {}", self.path.join("."), self.value)
    }
}

/// A part of the pending jobs an operator asks for by name in the job list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingPhase {
    /// Pending after at least one failed attempt (its error history is not empty).
    Retrying,
    /// Pending and not due yet (`run_at` in the future).
    Scheduled,
}

impl PendingPhase {
    /// The word in filters and URLs (`state=retrying`).
    pub fn as_str(self) -> &'static str {
        match self {
            PendingPhase::Retrying => "retrying",
            PendingPhase::Scheduled => "scheduled",
        }
    }
}

/// A job search: every field narrows it; `before` continues a previous page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobQuery {
    /// In this queue.
    pub queue: Option<String>,
    /// Of this kind.
    pub kind: Option<String>,
    /// In this state.
    pub state: Option<JobState>,
    /// With this priority.
    pub priority: Option<i16>,
    /// Created at or after.
    pub since: Option<DateTime<Utc>>,
    /// Created before.
    pub until: Option<DateTime<Utc>>,
    /// With this ordering key.
    pub ordering_key: Option<String>,
    /// With this concurrency key.
    pub concurrency_key: Option<String>,
    /// Whose args or metadata hold this value at this path.
    pub field: Option<FieldEq>,
    /// The last error's message equals this (a dead-job group).
    pub last_error: Option<String>,
    /// Of the pending jobs, only those that failed before (retrying) or those not due yet
    /// (scheduled); implies `state` pending. Read over a bounded window, like the other
    /// filters no index serves on every engine.
    pub pending: Option<PendingPhase>,
    /// Keyset cursor: only jobs with a smaller id (the page is newest first).
    pub before: Option<JobId>,
    /// With `before`, when a page of a finished state is ordered by finished time: the
    /// cursor job's finished time ([`JobPage::next_finished_at`]). Carried rather than looked
    /// up, so a walk that changes the jobs it visits (a bulk replay) keeps its place.
    pub before_finished_at: Option<DateTime<Utc>>,
    /// Page size, 1..=[`MAX_PAGE`]; 0 means 50.
    pub limit: i64,
}

impl JobQuery {
    /// Checks every bound before the query reaches the database.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(q) = &self.queue {
            validate::queue(q)?;
        }
        if let Some(k) = &self.kind {
            validate::kind(k)?;
        }
        if let Some(p) = self.priority {
            if !(-100..=100).contains(&p) {
                return Err(ValidationError::Priority(p.into()));
            }
        }
        for (what, key) in [
            ("ordering key", &self.ordering_key),
            ("concurrency key", &self.concurrency_key),
        ] {
            if let Some(k) = key {
                if k.is_empty() || k.len() > 512 {
                    return Err(ValidationError::Other {
                        what,
                        reason: "use 1 to 512 bytes".into(),
                    });
                }
                if k.contains('\0') {
                    return Err(ValidationError::Nul { what });
                }
            }
        }
        if let Some(e) = &self.last_error {
            if e.len() > 8192 {
                return Err(ValidationError::TooLarge {
                    what: "error filter",
                    size: e.len(),
                    limit: 8192,
                });
            }
            if e.contains('\0') {
                return Err(ValidationError::Nul {
                    what: "error filter",
                });
            }
        }
        if !(0..=MAX_PAGE).contains(&self.limit) {
            return Err(ValidationError::Other {
                what: "page size",
                reason: format!("{} is out of range 1..={MAX_PAGE}", self.limit),
            });
        }
        if let (Some(a), Some(b)) = (self.since, self.until) {
            if a > b {
                return Err(ValidationError::Other {
                    what: "time range",
                    reason: "since is after until".into(),
                });
            }
        }
        Ok(())
    }

    /// True when a filter no index serves is set, and the state gives no small index to
    /// read instead (dead and running jobs are few; the others may be millions).
    pub fn needs_window(&self) -> bool {
        let unindexed = self.kind.is_some()
            || self.priority.is_some()
            || self.since.is_some()
            || self.until.is_some()
            || self.field.is_some()
            || self.last_error.is_some()
            || self.pending.is_some();
        unindexed && !matches!(self.state, Some(JobState::Dead | JobState::Running))
    }

    /// The page size to use.
    pub fn page_size(&self) -> i64 {
        if self.limit == 0 {
            50
        } else {
            self.limit
        }
    }
}

/// One page of a search, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobPage {
    /// The jobs of this page, newest first.
    pub jobs: Vec<JobRecord>,
    /// The cursor of the next page, when there may be one.
    pub next: Option<JobId>,
    /// With `next`, for pages ordered by finished time: the cursor's finished time (pass it
    /// as [`JobQuery::before_finished_at`]).
    pub next_finished_at: Option<DateTime<Utc>>,
    /// Set when the search looked at a bounded window of jobs (a filter no index serves):
    /// how many it looked at. The page may then hold fewer matches than asked for, and
    /// `next` goes on below the window.
    pub scanned: Option<i64>,
}

impl JobPage {
    /// A page from the rows a search read (up to `page` + 1, newest first): the extra row
    /// says there is a next page; a window that ended before the page filled
    /// (`scanned` = [`SCAN_WINDOW`]) goes on below its lowest id, `scan_end`. Pages in
    /// finished order (`finished`) carry the cursor's finished time.
    pub fn cut(
        mut jobs: Vec<JobRecord>,
        page: i64,
        finished: bool,
        scanned: Option<i64>,
        scan_end: Option<i64>,
    ) -> JobPage {
        let next = if jobs.len() as i64 > page {
            jobs.truncate(page.max(0) as usize);
            jobs.last().map(|j| j.id)
        } else if scanned == Some(SCAN_WINDOW) {
            scan_end.map(JobId)
        } else {
            None
        };
        let next_finished_at = match (finished, next) {
            (true, Some(_)) => jobs.last().and_then(|j| j.finished_at),
            _ => None,
        };
        JobPage {
            jobs,
            next,
            next_finished_at,
            scanned,
        }
    }
}

/// A count that stops at a cap: `more` says the true number is larger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    /// The count, up to the cap.
    pub n: i64,
    /// True when the true count is larger than `n`.
    pub more: bool,
}

impl Count {
    /// A count of `n` rows read with a cap of `cap`.
    pub fn capped(n: i64, cap: i64) -> Count {
        Count {
            n: n.min(cap),
            more: n > cap,
        }
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.n, if self.more { "+" } else { "" })
    }
}

/// One queue at a glance, from bounded reads only.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueSummary {
    /// The queue.
    pub queue: String,
    /// Pending, not waiting for a key (due now or scheduled).
    pub pending: Count,
    /// Pending and due now: the ready backlog.
    pub ready: Count,
    /// Pending but waiting for its ordering or concurrency key.
    pub blocked: Count,
    /// Running now.
    pub running: i64,
    /// Running with a lease that runs out within 10 s (or already has).
    pub near_expiry: i64,
    /// Dead (kept for inspection and replay).
    pub dead: Count,
    /// Age of the oldest ready job (due, not held by a key), seconds.
    pub oldest_ready_age_s: Option<f64>,
    /// Age of the oldest due job that has not started, held by a key or not, seconds.
    pub oldest_waiting_age_s: Option<f64>,
    /// Whether an operator paused it.
    pub paused: bool,
    /// Its stored controls (pause, limits, rate), when it has any.
    pub control: Option<crate::control::QueueControl>,
    /// Live workers serving the queue.
    pub workers: i64,
}

/// The overview of every known queue (those with pending, running or dead jobs, a control
/// row, or a live worker).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Overview {
    /// One summary per queue, by name.
    pub queues: Vec<QueueSummary>,
    /// The cap the counts stop at.
    pub cap: i64,
    /// The database's clock when it was read.
    pub at: Option<DateTime<Utc>>,
}

/// Dead jobs sharing a kind and a last error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadGroup {
    /// The kind of the jobs.
    pub kind: String,
    /// The last error's message (as stored; escape when rendering).
    pub error: String,
    /// How many dead jobs share kind and error.
    pub count: i64,
    /// When the most recent of them died.
    pub newest_at: DateTime<Utc>,
    /// The most recent job of the group.
    pub example: JobId,
}

/// A bulk operator action on a page of jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// Dead or cancelled: replay with one more attempt (history kept). Pending and scheduled
    /// later: run now. Other states are left alone.
    Retry,
    /// Pending: cancelled. Running: cancellation requested (its worker stops it). Other
    /// states are left alone.
    Cancel,
}

impl BulkAction {
    /// The action as the audit log and the CLI name it.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Retry => "retry",
            BulkAction::Cancel => "cancel",
        }
    }
}

/// What a bulk call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BulkReport {
    /// Jobs changed.
    pub changed: u64,
    /// Ids given that did not exist or were in a state the action leaves alone (or, for a
    /// replay, whose unique key another live job holds).
    pub skipped: u64,
}

/// Per-minute work of one queue, as reported by the workers (added up across them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// The queue.
    pub queue: String,
    /// The minute, truncated.
    pub minute: DateTime<Utc>,
    /// Jobs that succeeded in the minute.
    pub succeeded: i64,
    /// Failures of any kind (retried, dead, cancelled).
    pub failed: i64,
    /// Sum and count of queue waits (claim time − run_at), milliseconds.
    pub wait_ms_sum: i64,
    /// How many waits `wait_ms_sum` adds up.
    pub wait_count: i64,
    /// Sum of handler run times, milliseconds.
    pub run_ms_sum: i64,
    /// Queue waits by [`crate::histogram`] bucket (empty: none recorded).
    #[serde(default)]
    pub wait_hist: Vec<i64>,
    /// Run times of finished runs by [`crate::histogram`] bucket (empty: none recorded).
    #[serde(default)]
    pub run_hist: Vec<i64>,
}

/// An operator action, kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// When it happened (the database's clock).
    pub at: Option<DateTime<Utc>>,
    /// Who (the dashboard's authenticated user, or "anonymous" on loopback).
    pub actor: String,
    /// What: `job.retry`, `queue.pause`, `bulk.retry`, …
    pub action: String,
    /// On what: a job id, a queue, a filter.
    pub target: String,
    /// Details, e.g. how many jobs a bulk action changed.
    pub detail: serde_json::Value,
}

impl AuditEntry {
    /// Checks the bounds the table also enforces.
    pub fn validate(&self) -> Result<(), ValidationError> {
        for (what, v, max) in [
            ("audit actor", &self.actor, 200),
            ("audit action", &self.action, 64),
            ("audit target", &self.target, 2048),
        ] {
            if v.is_empty() || v.len() > max {
                return Err(ValidationError::Other {
                    what,
                    reason: format!("use 1 to {max} bytes"),
                });
            }
            if v.contains('\0') {
                return Err(ValidationError::Nul { what });
            }
        }
        let size = self.detail.to_string().len();
        if size > 16384 {
            return Err(ValidationError::TooLarge {
                what: "audit detail",
                size,
                limit: 16384,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_filters_parse_json_or_text() {
        let f = FieldEq::parse("args.user_id = 42").unwrap();
        assert_eq!(f.document, Document::Args);
        assert_eq!(f.path, vec!["user_id"]);
        assert_eq!(f.value, serde_json::json!(42));
        let f = FieldEq::parse("metadata.a.b=hello world").unwrap();
        assert_eq!(f.document, Document::Metadata);
        assert_eq!(f.path, vec!["a", "b"]);
        assert_eq!(f.value, serde_json::json!("hello world"));
        assert_eq!(
            FieldEq::parse(r#"args.s = "42""#).unwrap().value,
            serde_json::json!("42")
        );
        for bad in [
            "user_id = 1",
            "args = 1",
            "args..x = 1",
            "args.x",
            "args.x = ",
            "args.x\0 = 1",
        ] {
            assert!(FieldEq::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    /// Found by the `job_filter` fuzz target: a value of control characters fits the bound
    /// as typed and not as shown (each becomes a six-byte JSON escape), so the filter a page
    /// showed was refused when sent back. Whatever is accepted now reads back the same.
    #[test]
    fn an_accepted_filter_reads_back_from_its_display() {
        let typed = format!("args.x = {}", "\u{1c}".repeat(200));
        assert!(typed.len() <= 1024);
        let e = FieldEq::parse(&typed).unwrap_err();
        assert!(
            e.to_string().contains("once its value is written as JSON"),
            "{e}"
        );
        let f = FieldEq::parse("args.x = a\u{1c}b").unwrap();
        assert_eq!(FieldEq::parse(&f.display()).unwrap(), f);
    }

    #[test]
    fn queries_are_bounded() {
        let ok = JobQuery::default();
        assert!(ok.validate().is_ok());
        assert_eq!(ok.page_size(), 50);
        for bad in [
            JobQuery {
                limit: MAX_PAGE + 1,
                ..Default::default()
            },
            JobQuery {
                queue: Some("no spaces".into()),
                ..Default::default()
            },
            JobQuery {
                priority: Some(101),
                ..Default::default()
            },
            JobQuery {
                ordering_key: Some(String::new()),
                ..Default::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn capped_counts_say_when_there_are_more() {
        assert_eq!(Count::capped(5, 10).to_string(), "5");
        assert_eq!(Count::capped(11, 10).to_string(), "10+");
    }
}
