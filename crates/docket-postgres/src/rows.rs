//! Row decoding: database rows into core types.

use docket_core::{ClaimedJob, ErrorEntry, JobId, JobRecord, JobState, StoreError};
use sqlx::postgres::PgRow;
use sqlx::Row;

use crate::errors::db_err;

pub(crate) fn state(s: &str) -> Result<JobState, StoreError> {
    s.parse().map_err(|e| StoreError::Database(Box::new(e)))
}

/// A row of sql/claim.sql, by position (its column list is fixed there): a name lookup per
/// column per row was a measurable share of a worker's CPU in the drain.
pub(crate) fn claimed(r: &PgRow) -> Result<ClaimedJob, StoreError> {
    Ok(ClaimedJob {
        id: JobId(r.try_get(0).map_err(db_err)?),
        attempt: r.try_get(1).map_err(db_err)?,
        max_attempts: r.try_get(2).map_err(db_err)?,
        queue: r.try_get(3).map_err(db_err)?,
        kind: r.try_get(4).map_err(db_err)?,
        args: r.try_get(5).map_err(db_err)?,
        metadata: r.try_get(6).map_err(db_err)?,
        priority: r.try_get(7).map_err(db_err)?,
        run_at: r.try_get(8).map_err(db_err)?,
        created_at: r.try_get(9).map_err(db_err)?,
        lease_expires_at: r.try_get(10).map_err(db_err)?,
    })
}

pub(crate) fn record(r: &PgRow) -> Result<JobRecord, StoreError> {
    let errors: serde_json::Value = r.try_get("errors").map_err(db_err)?;
    let errors: Vec<ErrorEntry> =
        serde_json::from_value(errors).map_err(|e| StoreError::Database(Box::new(e)))?;
    let st: String = r.try_get("state").map_err(db_err)?;
    Ok(JobRecord {
        id: JobId(r.try_get("id").map_err(db_err)?),
        queue: r.try_get("queue").map_err(db_err)?,
        kind: r.try_get("kind").map_err(db_err)?,
        state: state(&st)?,
        attempt: r.try_get("attempt").map_err(db_err)?,
        max_attempts: r.try_get("max_attempts").map_err(db_err)?,
        priority: r.try_get("priority").map_err(db_err)?,
        run_at: r.try_get("run_at").map_err(db_err)?,
        created_at: r.try_get("created_at").map_err(db_err)?,
        attempted_at: r.try_get("attempted_at").map_err(db_err)?,
        finished_at: r.try_get("finished_at").map_err(db_err)?,
        lease_owner: r.try_get("lease_owner").map_err(db_err)?,
        lease_expires_at: r.try_get("lease_expires_at").map_err(db_err)?,
        cancel_requested_at: r.try_get("cancel_requested_at").map_err(db_err)?,
        unique_key: r.try_get("unique_key").map_err(db_err)?,
        ordering_key: r.try_get("ordering_key").map_err(db_err)?,
        concurrency_key: r.try_get("concurrency_key").map_err(db_err)?,
        blocked: r.try_get("blocked").map_err(db_err)?,
        args: r.try_get("args").map_err(db_err)?,
        metadata: r.try_get("metadata").map_err(db_err)?,
        errors,
    })
}
