//! Batches on PostgreSQL: the SQL API of migration 0031 (`batch_open()`, `batch_add()`,
//! `batch_close()`). The rule — counters kept and each callback enqueued once when the last
//! member ends — lives in the schema (the trigger `jobs_batch_tally` and `batch_settle()`),
//! so it holds whichever path ends a member.

use docket_core::batches::{
    check_jobs, BatchError, BatchOpened, BatchSpec, BatchStatus, Callback, JobSpec,
};
use docket_core::*;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::store::PgStore;

impl PgStore {
    pub(crate) async fn open_batch_impl(&self, spec: &BatchSpec) -> Result<BatchOpened> {
        spec.validate(self.limits())?;
        self.run(async |c: &mut PgConnection| self.open_batch_on(c, spec).await)
            .await
    }

    /// A checked batch opened by `batch_open()` on `conn` (perhaps inside the caller's
    /// transaction).
    pub(crate) async fn open_batch_on(
        &self,
        conn: &mut PgConnection,
        spec: &BatchSpec,
    ) -> Result<BatchOpened> {
        let jobs = serde_json::to_value(&spec.jobs).map_err(|e| StoreError::Database(e.into()))?;
        let row = self
            .query(&self.queries().batch_open)
            .bind(&spec.name)
            .bind(spec.callbacks_json())
            .bind(jobs)
            .bind(spec.close)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| batch_err(e, 0))?;
        let ids: Vec<i64> = row.try_get("job_ids").map_err(db_err)?;
        Ok(BatchOpened {
            id: row.try_get("batch_id").map_err(db_err)?,
            jobs: ids.into_iter().map(JobId).collect(),
        })
    }

    pub(crate) async fn add_to_batch_impl(&self, id: i64, jobs: &[JobSpec]) -> Result<Vec<JobId>> {
        check_jobs(jobs, self.limits())?;
        self.run(async |c: &mut PgConnection| self.add_to_batch_on(c, id, jobs).await)
            .await
    }

    /// Checked members added by `batch_add()` on `conn`.
    pub(crate) async fn add_to_batch_on(
        &self,
        conn: &mut PgConnection,
        id: i64,
        jobs: &[JobSpec],
    ) -> Result<Vec<JobId>> {
        let text = serde_json::to_value(jobs).map_err(|e| StoreError::Database(e.into()))?;
        let row = self
            .query(&self.queries().batch_add)
            .bind(id)
            .bind(text)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| batch_err(e, id))?;
        let ids: Vec<i64> = row.try_get("job_ids").map_err(db_err)?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    pub(crate) async fn close_batch_impl(&self, id: i64) -> Result<BatchStatus> {
        self.run(async |c: &mut PgConnection| {
            self.query(&self.queries().batch_close)
                .bind(id)
                .execute(&mut *c)
                .await
                .map_err(|e| batch_err(e, id))
        })
        .await?;
        self.batch_impl(id).await
    }

    pub(crate) async fn batch_impl(&self, id: i64) -> Result<BatchStatus> {
        let rows = self.batch_rows(Some(id), 1).await?;
        if let Some(r) = rows.first() {
            return status(r);
        }
        let kind = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().workflow_kind)
                    .bind(id)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        Err(match kind {
            Some(_) => BatchError::NotABatch(id).into(),
            None => StoreError::NotFound(JobId(id)),
        })
    }

    pub(crate) async fn batches_impl(&self, limit: i64) -> Result<Vec<BatchStatus>> {
        if !(1..=1000).contains(&limit) {
            return Err(ValidationError::Other {
                what: "limit",
                reason: format!("{limit} is out of range 1..=1000"),
            }
            .into());
        }
        self.batch_rows(None, limit)
            .await?
            .iter()
            .map(status)
            .collect()
    }

    async fn batch_rows(&self, id: Option<i64>, limit: i64) -> Result<Vec<PgRow>> {
        self.run(async |c: &mut PgConnection| {
            self.query(&self.queries().batch_list)
                .bind(id)
                .bind(limit)
                .fetch_all(&mut *c)
                .await
                .map_err(db_err)
        })
        .await
    }
}

/// A batch's row as operators see it.
fn status(r: &PgRow) -> Result<BatchStatus> {
    let callbacks: serde_json::Value = r.try_get("callbacks").map_err(db_err)?;
    let mut fired = Vec::new();
    for c in Callback::ALL {
        if callbacks.get(c.as_str()).is_some() {
            let job: Option<i64> = r
                .try_get(format!("{}_job", c.as_str()).as_str())
                .map_err(db_err)?;
            fired.push((c, job.map(JobId)));
        }
    }
    Ok(BatchStatus {
        id: r.try_get("id").map_err(db_err)?,
        name: r.try_get("name").map_err(db_err)?,
        created_at: r.try_get("created_at").map_err(db_err)?,
        closed_at: r.try_get("closed_at").map_err(db_err)?,
        ended_at: r.try_get("ended_at").map_err(db_err)?,
        total: r.try_get("total").map_err(db_err)?,
        unfinished: r.try_get("unfinished").map_err(db_err)?,
        succeeded: r.try_get("succeeded").map_err(db_err)?,
        dead: r.try_get("dead").map_err(db_err)?,
        cancelled: r.try_get("cancelled").map_err(db_err)?,
        callbacks: fired,
    })
}

/// The functions' refusals as typed errors: a missing batch, a graph's id, a closed batch,
/// and invalid input named by the function ("batch refused: …").
fn batch_err(e: sqlx::Error, id: i64) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        match d.code().as_deref() {
            Some("P0002") => return StoreError::NotFound(JobId(id)),
            Some("42809") => return BatchError::NotABatch(id).into(),
            Some("55000") => return BatchError::Closed(id).into(),
            _ => {}
        }
    }
    match db_err(e) {
        StoreError::Invalid(ValidationError::Other { reason, .. }) => {
            StoreError::Invalid(ValidationError::Other {
                what: "batch",
                reason: reason.trim_start_matches("batch refused: ").to_string(),
            })
        }
        other => other,
    }
}
