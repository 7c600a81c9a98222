//! Row decoding: database rows into core types. Nothing here may panic on a bad row:
//! timestamps are decoded by [`Ts`] (sqlx's chrono decoder panics on `infinity` and on
//! values beyond chrono's range), and every failure is an error naming the column.

use chrono::{DateTime, Utc};
use docket_core::{ClaimedJob, ErrorEntry, JobId, JobProgress, JobRecord, JobState, StoreError};
use sqlx::postgres::{PgRow, PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Postgres, Row, Type};

use crate::errors::db_err;

/// A `timestamptz` as the server sent it: finite and within chrono's range, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ts {
    At(DateTime<Utc>),
    Infinity,
    MinusInfinity,
    /// Finite for PostgreSQL, beyond what chrono represents (microseconds since 2000).
    OutOfRange(i64),
}

impl Ts {
    /// The time, or an error naming `column`.
    pub(crate) fn finite(self, column: &str) -> Result<DateTime<Utc>, String> {
        match self {
            Ts::At(t) => Ok(t),
            Ts::Infinity => Err(format!("{column} is infinity")),
            Ts::MinusInfinity => Err(format!("{column} is -infinity")),
            Ts::OutOfRange(us) => Err(format!("{column} is out of range ({us} µs after 2000)")),
        }
    }

    /// For display: the time, clamped to chrono's range, and a note when it was not finite.
    fn shown(self, column: &str, notes: &mut Vec<String>) -> DateTime<Utc> {
        match self.finite(column) {
            Ok(t) => t,
            Err(note) => {
                notes.push(note);
                match self {
                    Ts::MinusInfinity => DateTime::<Utc>::MIN_UTC,
                    Ts::OutOfRange(us) if us < 0 => DateTime::<Utc>::MIN_UTC,
                    _ => DateTime::<Utc>::MAX_UTC,
                }
            }
        }
    }
}

impl Type<Postgres> for Ts {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
}

impl<'r> Decode<'r, Postgres> for Ts {
    fn decode(value: PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => {
                let bytes: [u8; 8] = value.as_bytes()?.try_into()?;
                let us = i64::from_be_bytes(bytes);
                Ok(match us {
                    i64::MAX => Ts::Infinity,
                    i64::MIN => Ts::MinusInfinity,
                    us => {
                        // PostgreSQL's epoch is 2000-01-01 00:00:00 UTC.
                        const PG_EPOCH_US: i64 = 946_684_800_000_000;
                        us.checked_add(PG_EPOCH_US)
                            .and_then(DateTime::<Utc>::from_timestamp_micros)
                            .map_or(Ts::OutOfRange(us), Ts::At)
                    }
                })
            }
            PgValueFormat::Text => {
                let s = value.as_str()?;
                Ok(match s {
                    "infinity" => Ts::Infinity,
                    "-infinity" => Ts::MinusInfinity,
                    s => Ts::At(
                        DateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f%#z")?.with_timezone(&Utc),
                    ),
                })
            }
        }
    }
}

fn ts(r: &PgRow, col: usize) -> Result<Ts, StoreError> {
    r.try_get::<Ts, _>(col).map_err(db_err)
}

fn ts_named(r: &PgRow, col: &str) -> Result<Option<Ts>, StoreError> {
    r.try_get::<Option<Ts>, _>(col).map_err(db_err)
}

pub(crate) fn state(s: &str) -> Result<JobState, StoreError> {
    s.parse().map_err(|e| StoreError::Database(Box::new(e)))
}

/// A claimed row that could not be decoded: its lease (id and attempt always decode) and why.
pub(crate) struct Undecodable {
    pub lease: docket_core::Lease,
    pub reason: String,
}

/// A row of sql/claim.sql, by position (its column list is fixed there): a name lookup per
/// column per row was a measurable share of a worker's CPU in the drain. A row whose other
/// columns do not decode comes back as [`Undecodable`], so one bad row cannot stall a worker.
pub(crate) fn claimed(r: &PgRow) -> Result<Result<ClaimedJob, Undecodable>, StoreError> {
    let id = JobId(r.try_get(0).map_err(db_err)?);
    let attempt: i32 = r.try_get(1).map_err(db_err)?;
    let rest = || -> Result<ClaimedJob, String> {
        let e = |c: &str, e: sqlx::Error| format!("{c}: {e}");
        Ok(ClaimedJob {
            id,
            attempt,
            max_attempts: r.try_get(2).map_err(|x| e("max_attempts", x))?,
            queue: r.try_get(3).map_err(|x| e("queue", x))?,
            kind: r.try_get(4).map_err(|x| e("kind", x))?,
            args: r.try_get(5).map_err(|x| e("args", x))?,
            metadata: r.try_get(6).map_err(|x| e("metadata", x))?,
            priority: r.try_get(7).map_err(|x| e("priority", x))?,
            run_at: ts(r, 8).map_err(|x| x.to_string())?.finite("run_at")?,
            created_at: ts(r, 9).map_err(|x| x.to_string())?.finite("created_at")?,
            lease_expires_at: ts(r, 10)
                .map_err(|x| x.to_string())?
                .finite("lease_expires_at")?,
            released: r.try_get(11).map_err(|x| e("released", x))?,
        })
    };
    Ok(rest().map_err(|reason| Undecodable {
        lease: docket_core::Lease { id, attempt },
        reason,
    }))
}

pub(crate) fn record(r: &PgRow) -> Result<JobRecord, StoreError> {
    let mut notes = Vec::new();
    let errors: serde_json::Value = r.try_get("errors").map_err(db_err)?;
    let errors: Vec<ErrorEntry> = serde_json::from_value(errors).unwrap_or_else(|e| {
        notes.push(format!("error history is malformed: {e}"));
        Vec::new()
    });
    let st: String = r.try_get("state").map_err(db_err)?;
    let req = |c: &str, notes: &mut Vec<String>| -> Result<DateTime<Utc>, StoreError> {
        Ok(ts_named(r, c)?.map_or(DateTime::<Utc>::MIN_UTC, |t| t.shown(c, notes)))
    };
    let opt = |c: &str, notes: &mut Vec<String>| -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(ts_named(r, c)?.map(|t| t.shown(c, notes)))
    };
    let run_at = req("run_at", &mut notes)?;
    let created_at = req("created_at", &mut notes)?;
    let attempted_at = opt("attempted_at", &mut notes)?;
    let finished_at = opt("finished_at", &mut notes)?;
    let lease_expires_at = opt("lease_expires_at", &mut notes)?;
    let cancel_requested_at = opt("cancel_requested_at", &mut notes)?;
    // Only get.sql selects the progress columns.
    let progress = match r.try_get::<Option<f32>, _>("progress_percent") {
        Err(sqlx::Error::ColumnNotFound(_)) => None,
        Err(e) => return Err(db_err(e)),
        Ok(None) => None,
        Ok(Some(percent)) => Some(JobProgress {
            percent,
            message: r
                .try_get::<Option<String>, _>("progress_message")
                .map_err(db_err)?
                .unwrap_or_default(),
            at: opt("progress_at", &mut notes)?.unwrap_or(DateTime::<Utc>::MIN_UTC),
        }),
    };
    Ok(JobRecord {
        id: JobId(r.try_get("id").map_err(db_err)?),
        queue: r.try_get("queue").map_err(db_err)?,
        kind: r.try_get("kind").map_err(db_err)?,
        state: state(&st)?,
        attempt: r.try_get("attempt").map_err(db_err)?,
        max_attempts: r.try_get("max_attempts").map_err(db_err)?,
        released: r.try_get("released").map_err(db_err)?,
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
        blocked: r.try_get("blocked").map_err(db_err)?,
        args: r.try_get("args").map_err(db_err)?,
        metadata: r.try_get("metadata").map_err(db_err)?,
        errors,
        progress,
        invalid: notes,
    })
}
