//! Memoized steps on PostgreSQL: the fenced record (`record_step()`, migration 0019), the
//! read, and the pruning of steps whose job is gone.

use docket_core::output::{check, MAX_OUTPUT_BYTES};
use docket_core::*;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::store::PgStore;

impl PgStore {
    pub(crate) async fn record_step_impl(
        &self,
        owner: &str,
        lease: Lease,
        name: &str,
        output: &serde_json::Value,
    ) -> Result<StepRecorded> {
        docket_core::steps::check_name(name)?;
        check(output, MAX_OUTPUT_BYTES)?;
        let row = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().record_step)
                    .bind(lease.id.0)
                    .bind(lease.attempt)
                    .bind(owner)
                    .bind(name)
                    .bind(output)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let Some(r) = row else {
            let lost = self.explain_lost(vec![lease]).await?;
            return Err(StoreError::LeaseLost(
                lost.into_iter().next().expect("one lease"),
            ));
        };
        Ok(StepRecorded {
            written: r.try_get("written").map_err(db_err)?,
            output: r.try_get("output").map_err(db_err)?,
        })
    }

    pub(crate) async fn job_steps_impl(&self, id: JobId) -> Result<Vec<StepRecord>> {
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().job_steps)
                    .bind(id.0)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        rows.iter()
            .map(|r| {
                Ok(StepRecord {
                    name: r.try_get("name").map_err(db_err)?,
                    attempt: r.try_get("attempt").map_err(db_err)?,
                    output: r.try_get("output").map_err(db_err)?,
                    recorded_at: r.try_get("recorded_at").map_err(db_err)?,
                })
            })
            .collect()
    }

    /// Deletes step records of jobs that no longer exist, `batch` at a time until none is
    /// left; returns how many.
    pub(crate) async fn prune_steps(&self, batch: i64) -> Result<u64> {
        let mut total = 0;
        loop {
            let n: i64 = self
                .run(async |c: &mut PgConnection| {
                    self.query_scalar(&self.queries().prune_steps)
                        .bind(batch)
                        .fetch_one(&mut *c)
                        .await
                        .map_err(db_err)
                })
                .await?;
            let n = u64::try_from(n).unwrap_or(0);
            total += n;
            if n < batch as u64 {
                return Ok(total);
            }
        }
    }
}
