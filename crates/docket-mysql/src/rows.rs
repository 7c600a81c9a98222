//! Row decoding. Nothing here panics on a bad row: a time that is not a millisecond count
//! within chrono's range, or JSON that does not parse, is named in the record's `invalid`
//! notes (operator reads) or fails the claimed job with the reason (claims), never stalls.

use chrono::{DateTime, Utc};
use docket_core::{ClaimedJob, ErrorEntry, JobId, JobRecord, JobState, Lease, StoreError};
use sqlx::mysql::MySqlRow;
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

/// Text of a column whatever its collation: the tables use utf8mb4_bin (names and keys
/// compare byte for byte, as on PostgreSQL), which the protocol flags as binary and sqlx
/// then refuses to decode as a string; this decodes the bytes and checks they are UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Txt(pub String);

impl sqlx::Type<sqlx::MySql> for Txt {
    fn type_info() -> sqlx::mysql::MySqlTypeInfo {
        <str as sqlx::Type<sqlx::MySql>>::type_info()
    }
    fn compatible(ty: &sqlx::mysql::MySqlTypeInfo) -> bool {
        <str as sqlx::Type<sqlx::MySql>>::compatible(ty)
            || <[u8] as sqlx::Type<sqlx::MySql>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::MySql> for Txt {
    fn decode(v: sqlx::mysql::MySqlValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let b = <&[u8] as sqlx::Decode<sqlx::MySql>>::decode(v)?;
        Ok(Txt(std::str::from_utf8(b)?.to_owned()))
    }
}

/// Types a text column decodes into.
pub(crate) trait FromTxt: Sized {
    fn get(r: &MySqlRow, col: &str) -> Result<Self, sqlx::Error>;
}

impl FromTxt for String {
    fn get(r: &MySqlRow, col: &str) -> Result<Self, sqlx::Error> {
        r.try_get::<Txt, _>(col).map(|t| t.0)
    }
}

impl FromTxt for Option<String> {
    fn get(r: &MySqlRow, col: &str) -> Result<Self, sqlx::Error> {
        r.try_get::<Option<Txt>, _>(col).map(|t| t.map(|t| t.0))
    }
}

/// A text column (see [`Txt`]).
pub(crate) fn get<T: FromTxt>(r: &MySqlRow, col: &str) -> Result<T, sqlx::Error> {
    T::get(r, col)
}

pub(crate) fn state(s: &str) -> Result<JobState, StoreError> {
    s.parse().map_err(|e| StoreError::Database(Box::new(e)))
}

/// A stored time column (integer ms), tolerating a value of the wrong type.
fn ms_col(r: &MySqlRow, col: &str) -> Result<Option<i64>, String> {
    r.try_get::<Option<i64>, _>(col)
        .map_err(|e| format!("{col}: {e}"))
}

fn json_col(r: &MySqlRow, col: &str) -> Result<serde_json::Value, String> {
    let text: String = get(r, col).map_err(|e| format!("{col}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{col} is not JSON: {e}"))
}

/// A row that could not be decoded into a job a handler can run.
pub(crate) struct Undecodable {
    pub lease: Lease,
    pub reason: String,
}

/// A claimed job, or why it cannot run.
pub(crate) fn claimed(r: &MySqlRow) -> Result<Result<ClaimedJob, Undecodable>, StoreError> {
    let id = JobId(r.try_get("id").map_err(db_err)?);
    let attempt: i32 = r.try_get("attempt").map_err(db_err)?;
    let rest = || -> Result<ClaimedJob, String> {
        let e = |c: &str, e: sqlx::Error| format!("{c}: {e}");
        let time = |c: &str| -> Result<DateTime<Utc>, String> {
            at(ms_col(r, c)?.ok_or_else(|| format!("{c} is NULL"))?, c)
        };
        Ok(ClaimedJob {
            id,
            attempt,
            max_attempts: r
                .try_get("max_attempts")
                .map_err(|x| e("max_attempts", x))?,
            queue: get(r, "queue").map_err(|x| e("queue", x))?,
            kind: get(r, "kind").map_err(|x| e("kind", x))?,
            args: json_col(r, "args")?,
            metadata: json_col(r, "metadata")?,
            priority: r.try_get("priority").map_err(|x| e("priority", x))?,
            run_at: time("run_at")?,
            created_at: time("created_at")?,
            lease_expires_at: time("lease_expires_at")?,
            released: r.try_get("released").map_err(|x| e("released", x))?,
        })
    };
    Ok(rest().map_err(|reason| Undecodable {
        lease: Lease { id, attempt },
        reason,
    }))
}

/// A whole job row for operators; what cannot be decoded is shown as a note.
pub(crate) fn record(r: &MySqlRow) -> Result<JobRecord, StoreError> {
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
    let st: String = get(r, "state").map_err(db_err)?;
    Ok(JobRecord {
        id: JobId(r.try_get("id").map_err(db_err)?),
        queue: get(r, "queue").map_err(db_err)?,
        kind: get(r, "kind").map_err(db_err)?,
        state: state(&st)?,
        attempt: r.try_get("attempt").map_err(db_err)?,
        max_attempts: r.try_get("max_attempts").map_err(db_err)?,
        released: r.try_get("released").map_err(db_err)?,
        priority: r.try_get("priority").map_err(db_err)?,
        run_at,
        created_at,
        attempted_at,
        finished_at,
        lease_owner: get(r, "lease_owner").map_err(db_err)?,
        lease_expires_at,
        cancel_requested_at,
        unique_key: get(r, "unique_key").map_err(db_err)?,
        ordering_key: get(r, "ordering_key").map_err(db_err)?,
        concurrency_key: get(r, "concurrency_key").map_err(db_err)?,
        blocked: r.try_get::<i64, _>("blocked").map_err(db_err)? != 0,
        args,
        metadata,
        errors,
        invalid: notes,
    })
}

/// A required time column of a non-job table.
pub(crate) fn time(r: &MySqlRow, col: &str) -> Result<DateTime<Utc>, StoreError> {
    let ms: i64 = r.try_get(col).map_err(db_err)?;
    at(ms, col).map_err(corrupt)
}

/// An optional time column of a non-job table.
pub(crate) fn time_opt(r: &MySqlRow, col: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    let ms: Option<i64> = r.try_get(col).map_err(db_err)?;
    ms.map(|ms| at(ms, col).map_err(corrupt)).transpose()
}

/// A JSON text column of a non-job table.
pub(crate) fn json(r: &MySqlRow, col: &str) -> Result<serde_json::Value, StoreError> {
    json_col(r, col).map_err(corrupt)
}
