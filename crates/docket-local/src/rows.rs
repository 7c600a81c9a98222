//! Row decoding. Nothing here panics on a bad row: a time that is not a millisecond count
//! within chrono's range, or JSON that does not parse, is named in the record's `invalid`
//! notes (operator reads) or fails the claimed job with the reason (claims), never stalls.

use chrono::{DateTime, Utc};
use docket_core::{
    ClaimedJob, ErrorEntry, JobId, JobProgress, JobRecord, JobState, Lease, StoreError,
};

use crate::exec::{corrupt, Row};

/// Milliseconds since the epoch into a time, or why not.
pub fn at(ms: i64, column: &str) -> Result<DateTime<Utc>, String> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .ok_or_else(|| format!("{column} is out of range ({ms} ms)"))
}

/// A time into milliseconds since the epoch.
pub fn ms_of(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// A duration in milliseconds (saturating).
pub fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A stored state's name.
pub fn state(s: &str) -> Result<JobState, StoreError> {
    s.parse().map_err(|e| StoreError::Database(Box::new(e)))
}

/// A stored time column (integer ms), tolerating a value of the wrong type.
fn ms_col(r: &Row, col: &str) -> Result<Option<i64>, String> {
    r.get::<Option<i64>>(col).map_err(|e| e.to_string())
}

fn json_col(r: &Row, col: &str) -> Result<serde_json::Value, String> {
    let text: String = r.get(col).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("{col} is not JSON: {e}"))
}

/// A row that could not be decoded into a job a handler can run.
pub struct Undecodable {
    /// The claim of the job.
    pub lease: Lease,
    /// Why it could not be decoded.
    pub reason: String,
}

/// One job of claimed_rows.sql, by position.
#[derive(serde::Deserialize)]
struct Wire(
    i64,
    i64,
    i64,
    String,
    String,
    serde_json::Value,
    serde_json::Value,
    i64,
    i64,
    i64,
    i64,
    i64,
);

/// The jobs of claimed_rows.sql's one row: each a job a handler can run, or why it cannot.
/// Each element is decoded on its own (a bad one cannot hide the others), straight into
/// typed fields; only an element that does not fit is read again as a plain JSON value to
/// find its id and attempt (the lease to fail it with) and the reason.
pub fn claimed_all(text: &str) -> Result<Vec<Result<ClaimedJob, Undecodable>>, StoreError> {
    let raws: Vec<&serde_json::value::RawValue> =
        serde_json::from_str(text).map_err(|e| corrupt(format!("claimed rows: {e}")))?;
    Ok(raws.into_iter().map(|r| claimed(r.get())).collect())
}

/// One claimed job, a JSON array by position (claimed_rows.sql's element, claim_fast.sql's
/// row): a job a handler can run, or why it cannot.
pub fn claimed(text: &str) -> Result<ClaimedJob, Undecodable> {
    let typed = serde_json::from_str::<Wire>(text).map_err(|e| e.to_string());
    let w = match typed {
        Ok(w) => w,
        Err(reason) => {
            // By raw elements: a value too deep for a decoder is still skipped over.
            let v: Vec<&serde_json::value::RawValue> =
                serde_json::from_str(text).unwrap_or_default();
            let int = |i: usize| {
                v.get(i)
                    .and_then(|r| r.get().parse::<i64>().ok())
                    .unwrap_or_default()
            };
            return Err(Undecodable {
                lease: Lease {
                    id: JobId(int(0)),
                    attempt: i32::try_from(int(1)).unwrap_or_default(),
                },
                reason,
            });
        }
    };
    let Wire(
        id,
        attempt,
        max_attempts,
        queue,
        kind,
        args,
        metadata,
        priority,
        run_at,
        created_at,
        lease,
        released,
    ) = w;
    let id = JobId(id);
    let lease_of = |attempt: i64| Lease {
        id,
        attempt: i32::try_from(attempt).unwrap_or_default(),
    };
    let rest = || -> Result<ClaimedJob, String> {
        let narrow =
            |c: &str, v: i64| i32::try_from(v).map_err(|_| format!("{c} is out of range ({v})"));
        Ok(ClaimedJob {
            id,
            attempt: narrow("attempt", attempt)?,
            max_attempts: narrow("max_attempts", max_attempts)?,
            queue,
            kind,
            args,
            metadata,
            priority: i16::try_from(priority)
                .map_err(|_| format!("priority is out of range ({priority})"))?,
            run_at: at(run_at, "run_at")?,
            created_at: at(created_at, "created_at")?,
            lease_expires_at: at(lease, "lease_expires_at")?,
            released: narrow("released", released)?,
        })
    };
    rest().map_err(|reason| Undecodable {
        lease: lease_of(attempt),
        reason,
    })
}

/// A claimed job from a row of claimed_rows.sql's columns, or why it cannot run.
pub fn claimed_row(r: &Row) -> Result<Result<ClaimedJob, Undecodable>, StoreError> {
    let id = JobId(r.get("id")?);
    let attempt: i32 = r.get("attempt")?;
    let rest = || -> Result<ClaimedJob, String> {
        let e = |x: StoreError| x.to_string();
        let time = |c: &str| -> Result<DateTime<Utc>, String> {
            at(ms_col(r, c)?.ok_or_else(|| format!("{c} is NULL"))?, c)
        };
        Ok(ClaimedJob {
            id,
            attempt,
            max_attempts: r.get("max_attempts").map_err(e)?,
            queue: r.get("queue").map_err(e)?,
            kind: r.get("kind").map_err(e)?,
            args: json_col(r, "args")?,
            metadata: json_col(r, "metadata")?,
            priority: r.get("priority").map_err(e)?,
            run_at: time("run_at")?,
            created_at: time("created_at")?,
            lease_expires_at: time("lease_expires_at")?,
            released: r.get("released").map_err(e)?,
        })
    };
    Ok(rest().map_err(|reason| Undecodable {
        lease: Lease { id, attempt },
        reason,
    }))
}

/// A whole job row for operators; what cannot be decoded is shown as a note.
pub fn record(r: &Row) -> Result<JobRecord, StoreError> {
    let mut notes = Vec::new();
    let mut time = |c: &str| -> Option<DateTime<Utc>> {
        match ms_col(r, c) {
            Ok(None) => None,
            Ok(Some(ms)) => match at(ms, c) {
                Ok(t) => Some(t),
                Err(n) => {
                    notes.push(n);
                    Some(if ms < 0 {
                        DateTime::<Utc>::MIN_UTC
                    } else {
                        DateTime::<Utc>::MAX_UTC
                    })
                }
            },
            Err(n) => {
                notes.push(n);
                Some(DateTime::<Utc>::MIN_UTC)
            }
        }
    };
    let run_at = time("run_at").unwrap_or(DateTime::<Utc>::MIN_UTC);
    let created_at = time("created_at").unwrap_or(DateTime::<Utc>::MIN_UTC);
    let attempted_at = time("attempted_at");
    let finished_at = time("finished_at");
    let lease_expires_at = time("lease_expires_at");
    let cancel_requested_at = time("cancel_requested_at");
    let mut json = |c: &str| match json_col(r, c) {
        Ok(v) => v,
        Err(n) => {
            notes.push(n);
            serde_json::Value::Null
        }
    };
    let args = json("args");
    let metadata = json("metadata");
    let errors = json("errors");
    let errors: Vec<ErrorEntry> = if errors.is_null() {
        Vec::new()
    } else {
        serde_json::from_value(errors).unwrap_or_else(|e| {
            notes.push(format!("error history is malformed: {e}"));
            Vec::new()
        })
    };
    let mut narrow = |c: &str| -> Result<i32, StoreError> {
        let v: i64 = r.get(c)?;
        Ok(i32::try_from(v).unwrap_or_else(|_| {
            notes.push(format!("{c} is out of range ({v})"));
            i32::MAX
        }))
    };
    let attempt = narrow("attempt")?;
    let max_attempts = narrow("max_attempts")?;
    let released = narrow("released")?;
    let st: String = r.get("state")?;
    let progress = match (
        r.get_if::<Option<f64>>("progress_percent")?.flatten(),
        r.get_if::<Option<i64>>("progress_at")?.flatten(),
    ) {
        (Some(percent), Some(ms)) => Some(JobProgress {
            percent: percent as f32,
            message: r
                .get_if::<Option<String>>("progress_message")?
                .flatten()
                .unwrap_or_default(),
            at: at(ms, "progress_at").map_err(corrupt)?,
        }),
        _ => None,
    };
    Ok(JobRecord {
        id: JobId(r.get("id")?),
        queue: r.get("queue")?,
        kind: r.get("kind")?,
        state: state(&st)?,
        attempt,
        max_attempts,
        released,
        priority: r.get("priority")?,
        run_at,
        created_at,
        attempted_at,
        finished_at,
        lease_owner: r.get("lease_owner")?,
        lease_expires_at,
        cancel_requested_at,
        unique_key: r.get("unique_key")?,
        ordering_key: r.get("ordering_key")?,
        concurrency_key: r.get("concurrency_key")?,
        blocked: r.get::<i64>("blocked")? != 0,
        args,
        metadata,
        errors,
        progress,
        invalid: notes,
    })
}

/// A required time column of a non-job table.
pub fn time(r: &Row, col: &str) -> Result<DateTime<Utc>, StoreError> {
    let ms: i64 = r.get(col)?;
    at(ms, col).map_err(corrupt)
}

/// An optional time column of a non-job table.
pub fn time_opt(r: &Row, col: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    let ms: Option<i64> = r.get(col)?;
    ms.map(|ms| at(ms, col).map_err(corrupt)).transpose()
}

/// A JSON text column of a non-job table.
pub fn json(r: &Row, col: &str) -> Result<serde_json::Value, StoreError> {
    json_col(r, col).map_err(corrupt)
}
