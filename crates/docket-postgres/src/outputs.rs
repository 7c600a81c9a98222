//! Job outputs and progress on PostgreSQL: the fenced completion that records outputs
//! (`complete_output_fenced()`, migration 0018), their read, the listener of the
//! `<schema>_done` channel that wakes a caller waiting for one, and the fenced progress
//! write (`progress_fenced()`).

use std::time::Duration;

use docket_core::*;
use sqlx::postgres::PgListener;
use sqlx::{PgConnection, Row};
use tokio::sync::broadcast;

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

    pub(crate) async fn progress_many_impl(
        &self,
        owner: &str,
        reports: &[Progress],
    ) -> Result<BatchOutcome> {
        if reports.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = docket_core::progress::sorted_progress(reports)?;
        let leases: Vec<Lease> = sorted.iter().map(|p| p.lease).collect();
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().progress_many)
                    .bind(sorted.iter().map(|p| p.lease.id.0).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|p| p.lease.attempt).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|p| p.percent).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|p| p.message.clone()).collect::<Vec<_>>())
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        self.fenced(&leases, rows).await
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

/// The LISTEN connection on `<schema>_done` that every output waiter of one store shares:
/// opened by the first waiter (which returns only once LISTEN is in place, so a completion
/// after it is heard), closed when the last one has gone. One connection however many
/// callers wait, instead of one each out of the application's pool.
#[derive(Default)]
pub(crate) struct DoneHub {
    tx: tokio::sync::Mutex<Option<broadcast::Sender<Option<JobId>>>>,
}

impl std::fmt::Debug for DoneHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DoneHub")
    }
}

/// Hints a waiter may fall behind by before it is told to read again.
const DONE_CAPACITY: usize = 1024;
/// How often the hub's task looks whether anyone still waits.
const IDLE_CHECK: Duration = Duration::from_secs(5);

impl PgStore {
    pub(crate) async fn listen_outputs_impl(
        &self,
        direct_url: Option<&str>,
    ) -> Result<crate::engine::PgHints> {
        let mut slot = self.inner.done.tx.lock().await;
        if let Some(tx) = slot.as_ref() {
            return Ok(crate::engine::PgHints::shared(tx.subscribe()));
        }
        let hints =
            crate::engine::PgHints::connect_to(self, direct_url, &[self.done_channel()]).await?;
        let listener = hints.into_listener().expect("its own connection");
        let (tx, rx) = broadcast::channel(DONE_CAPACITY);
        *slot = Some(tx.clone());
        tokio::spawn(relay_done(self.clone(), listener, tx));
        Ok(crate::engine::PgHints::shared(rx))
    }
}

/// Passes each done hint to the store's waiters until the connection drops (they are told,
/// and poll) or nobody waits any more.
async fn relay_done(
    store: PgStore,
    mut listener: PgListener,
    tx: broadcast::Sender<Option<JobId>>,
) {
    let mut idle = tokio::time::interval(IDLE_CHECK);
    loop {
        tokio::select! {
            n = listener.try_recv() => match n {
                Ok(Some(n)) => {
                    if let Ok(id) = n.payload().parse::<i64>() {
                        let _ = tx.send(Some(JobId(id)));
                    }
                }
                Ok(None) | Err(_) => {
                    let _ = tx.send(None);
                    break;
                }
            },
            _ = idle.tick() => {
                if tx.receiver_count() == 0 {
                    break;
                }
            }
        }
    }
    // Unless a new waiter came in meanwhile and found the hub still set, the next one opens
    // a new connection.
    let mut slot = store.inner.done.tx.lock().await;
    if slot.as_ref().is_some_and(|t| t.same_channel(&tx)) {
        *slot = None;
    }
}
