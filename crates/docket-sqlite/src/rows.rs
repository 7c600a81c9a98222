//! Row decoding. Nothing here panics on a bad row: a time that is not a millisecond count
//! within chrono's range, or JSON that does not parse, is named in the record's `invalid`
//! notes (operator reads) or fails the claimed job with the reason (claims), never stalls.

use chrono::{DateTime, Utc};
use docket_core::{ClaimedJob, ErrorEntry, JobId, JobRecord, JobState, Lease, StoreError};
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

use crate::errors::{corrupt, db_err};

/// Milliseconds since the epoch into a time, or why not.
pub(crate) fn at(ms: i64, column: &str) -> Result<DateTime<Utc>, String> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .ok_or_else(|| format!("{column} is out of range ({ms} ms)"))
}

/// A time into milliseconds since the epoch.
pub(crate) fn ms_of(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn state(s: &str) -> Result<JobState, StoreError> {
    s.parse().map_err(|e| StoreError::Database(Box::new(e)))
}

/// A stored time column (integer ms), tolerating a value of the wrong type.
fn ms_col(r: &SqliteRow, col: &str) -> Result<Option<i64>, String> {
    r.try_get::<Option<i64>, _>(col)
        .map_err(|e| format!("{col}: {e}"))
}

fn json_col(r: &SqliteRow, col: &str) -> Result<serde_json::Value, String> {
    let text: String = r.try_get(col).map_err(|e| format!("{col}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{col} is not JSON: {e}"))
}

/// A row that could not be decoded into a job a handler can run.
pub(crate) struct Undecodable {
    pub lease: Lease,
    pub reason: String,
}

/// A claimed job (an object of claimed_rows.sql), or why it cannot run.
pub(crate) fn claimed(v: &serde_json::Value) -> Result<ClaimedJob, Undecodable> {
    let id = JobId(v["id"].as_i64().unwrap_or_default());
    let attempt = v["attempt"].as_i64().unwrap_or_default() as i32;
    let rest = || -> Result<ClaimedJob, String> {
        let int = |c: &str| {
            v[c].as_i64()
                .ok_or_else(|| format!("{c} is not an integer"))
        };
        let text = |c: &str| {
            v[c].as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{c} is not text"))
        };
        let time = |c: &str| at(int(c)?, c);
        Ok(ClaimedJob {
            id,
            attempt,
            max_attempts: i32::try_from(int("max_attempts")?).map_err(|e| e.to_string())?,
            queue: text("queue")?,
            kind: text("kind")?,
            args: v["args"].clone(),
            metadata: v["metadata"].clone(),
            priority: i16::try_from(int("priority")?).map_err(|e| e.to_string())?,
            run_at: time("run_at")?,
            created_at: time("created_at")?,
            lease_expires_at: time("lease_expires_at")?,
        })
    };
    rest().map_err(|reason| Undecodable {
        lease: Lease { id, attempt },
        reason,
    })
}

/// A whole job row for operators; what cannot be decoded is shown as a note.
pub(crate) fn record(r: &SqliteRow) -> Result<JobRecord, StoreError> {
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
    let st: String = r.try_get("state").map_err(db_err)?;
    Ok(JobRecord {
        id: JobId(r.try_get("id").map_err(db_err)?),
        queue: r.try_get("queue").map_err(db_err)?,
        kind: r.try_get("kind").map_err(db_err)?,
        state: state(&st)?,
        attempt: r.try_get("attempt").map_err(db_err)?,
        max_attempts: r.try_get("max_attempts").map_err(db_err)?,
        priority: r.try_get("priority").map_err(db_err)?,
        run_at,
        created_at,
        attempted_at,
        finished_at,
        lease_owner: r.try_get("lease_owner").map_err(db_err)?,
        lease_expires_at,
        cancel_requested_at,
        unique_key: r.try_get("unique_key").map_err(db_err)?,
        ordering_key: r.try_get("ordering_key").map_err(db_err)?,
        concurrency_key: r.try_get("concurrency_key").map_err(db_err)?,
        blocked: r.try_get::<i64, _>("blocked").map_err(db_err)? != 0,
        args,
        metadata,
        errors,
        invalid: notes,
    })
}

/// A required time column of a non-job table.
pub(crate) fn time(r: &SqliteRow, col: &str) -> Result<DateTime<Utc>, StoreError> {
    let ms: i64 = r.try_get(col).map_err(db_err)?;
    at(ms, col).map_err(corrupt)
}

/// An optional time column of a non-job table.
pub(crate) fn time_opt(r: &SqliteRow, col: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    let ms: Option<i64> = r.try_get(col).map_err(db_err)?;
    ms.map(|ms| at(ms, col).map_err(corrupt)).transpose()
}

/// A JSON text column of a non-job table.
pub(crate) fn json(r: &SqliteRow, col: &str) -> Result<serde_json::Value, StoreError> {
    json_col(r, col).map_err(corrupt)
}
