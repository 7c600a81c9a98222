//! Job outputs on PostgreSQL: the fenced completion that records them
//! (`complete_output_fenced()`, migration 0018), the read, and the listener of the
//! `<schema>_done` channel that wakes a caller waiting for one.

use docket_core::*;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::rows;
use crate::store::PgStore;

impl PgStore {
    /// Channel on which a completion with an output announces its job (payload: the id).
    pub fn done_channel(&self) -> String {
        format!("{}_done", self.schema())
    }

    pub(crate) async fn complete_outputs_impl(
        &self,
        owner: &str,
        outputs: &[Output],
    ) -> Result<BatchOutcome> {
        if outputs.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = docket_core::output::sorted_outputs(outputs);
        for o in &sorted {
            docket_core::output::check(&o.value, docket_core::output::MAX_OUTPUT_BYTES)?;
        }
        let leases: Vec<Lease> = sorted.iter().map(|o| o.lease).collect();
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().complete_outputs)
                    .bind(sorted.iter().map(|o| o.lease.id.0).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|o| o.lease.attempt).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|o| o.value.clone()).collect::<Vec<_>>())
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        self.fenced(&leases, rows).await
    }

    /// [`PgStore::complete_outputs_impl`] for one job, inside the caller's transaction.
    pub(crate) async fn complete_output_tx(
        &self,
        conn: &mut PgConnection,
        owner: &str,
        output: &Output,
    ) -> Result<()> {
        docket_core::output::check(&output.value, docket_core::output::MAX_OUTPUT_BYTES)?;
        let lease = output.lease;
        let rows = self
            .query(&self.queries().complete_outputs)
            .bind(vec![lease.id.0])
            .bind(vec![lease.attempt])
            .bind(vec![output.value.clone()])
            .bind(owner)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
        if rows.is_empty() {
            let lost = self.explain_lost(vec![lease]).await?;
            return Err(StoreError::LeaseLost(
                lost.into_iter().next().expect("one lease"),
            ));
        }
        Ok(())
    }

    pub(crate) async fn output_impl(&self, id: JobId) -> Result<JobOutput> {
        let row = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().output)
                    .bind(id.0)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let Some(r) = row else {
            return Err(StoreError::NotFound(id));
        };
        let state: String = r.try_get("state").map_err(db_err)?;
        Ok(JobOutput {
            state: rows::state(&state)?,
            output: r.try_get("output").map_err(db_err)?,
            finished_at: r.try_get("finished_at").map_err(db_err)?,
        })
    }
}
