//! Memoized steps, signals and parks on PostgreSQL (migration 0019): the fenced record
//! (`record_step()`), the read, the fenced park (`park_fenced()`), sending a signal
//! (`signal()`), and the pruning of steps and signals whose job is gone.

use docket_core::*;
use sqlx::{PgConnection, Row};

use crate::errors::{db_err, sqlstate};
use crate::store::PgStore;

impl PgStore {
    /// Records many steps in one statement (`record_steps()`): results in input order; a
    /// step without a row from the function was refused by its fence, and why is read once
    /// for all of them.
    pub(crate) async fn record_steps_impl(
        &self,
        owner: &str,
        steps: &[StepWrite],
    ) -> Result<Vec<std::result::Result<StepRecorded, LeaseLost>>> {
        docket_core::steps::check_writes(steps)?;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().record_steps)
                    .bind(steps.iter().map(|s| s.lease.id.0).collect::<Vec<_>>())
                    .bind(steps.iter().map(|s| s.lease.attempt).collect::<Vec<_>>())
                    .bind(steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>())
                    .bind(steps.iter().map(|s| &s.output).collect::<Vec<_>>())
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut out: Vec<Option<StepRecorded>> = vec![None; steps.len()];
        for r in rows {
            let ord: i32 = r.try_get("ord").map_err(db_err)?;
            let slot = usize::try_from(ord - 1)
                .ok()
                .and_then(|i| out.get_mut(i))
                .ok_or_else(|| {
                    StoreError::Database(format!("record_steps: position {ord}").into())
                })?;
            *slot = Some(StepRecorded {
                written: r.try_get("written").map_err(db_err)?,
                output: r.try_get("output").map_err(db_err)?,
            });
        }
        let refused: Vec<Lease> = steps
            .iter()
            .zip(&out)
            .filter(|(_, r)| r.is_none())
            .map(|(s, _)| s.lease)
            .collect();
        let mut lost = if refused.is_empty() {
            Vec::new()
        } else {
            self.explain_lost(refused).await?
        };
        Ok(steps
            .iter()
            .zip(out)
            .map(|(s, r)| match r {
                Some(r) => Ok(r),
                None => {
                    let i = lost.iter().position(|l| l.lease == s.lease);
                    Err(match i {
                        Some(i) => lost.swap_remove(i),
                        None => LeaseLost {
                            lease: s.lease,
                            reason: LostReason::Expired,
                        },
                    })
                }
            })
            .collect())
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

    pub(crate) async fn park_many_impl(&self, owner: &str, parks: &[Park]) -> Result<BatchOutcome> {
        if parks.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = docket_core::signals::sorted_parks(parks)?;
        let leases: Vec<Lease> = sorted.iter().map(|p| p.lease).collect();
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().park_many)
                    .bind(sorted.iter().map(|p| p.lease.id.0).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|p| p.lease.attempt).collect::<Vec<_>>())
                    .bind(
                        sorted
                            .iter()
                            .map(|p| crate::store::ms(p.delay))
                            .collect::<Vec<_>>(),
                    )
                    .bind(sorted.iter().map(|p| p.signal.clone()).collect::<Vec<_>>())
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        self.fenced(&leases, rows).await
    }

    /// Sends a signal on `conn` (the caller's transaction, or one of the store's own).
    pub(crate) async fn signal_on(
        &self,
        conn: &mut PgConnection,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<SignalSent> {
        docket_core::signals::check(name, payload)?;
        let r = self
            .query(&self.queries().signal)
            .bind(id.0)
            .bind(name)
            .bind(payload)
            .fetch_one(&mut *conn)
            .await;
        match r {
            Ok(r) => Ok(SignalSent {
                new: r.try_get("new").map_err(db_err)?,
                woke: r.try_get("woke").map_err(db_err)?,
            }),
            Err(e) => match sqlstate(&e).as_deref() {
                Some("P0002") => Err(StoreError::NotFound(id)),
                Some("55000") => {
                    // Finished, in the state signal() gives as the error's detail.
                    let detail = match &e {
                        sqlx::Error::Database(d) => d
                            .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                            .and_then(|p| p.detail())
                            .map(str::to_owned),
                        _ => None,
                    };
                    match detail.as_deref().map(str::parse::<JobState>) {
                        Some(Ok(state)) => Err(StoreError::WrongState {
                            id,
                            state,
                            op: "signal",
                        }),
                        _ => Err(db_err(e)),
                    }
                }
                _ => Err(db_err(e)),
            },
        }
    }

    pub(crate) async fn signal_impl(
        &self,
        id: JobId,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<SignalSent> {
        let mut tx = self.begin_bounded().await?;
        let sent = self.signal_on(&mut tx, id, name, payload).await;
        match sent {
            Ok(s) => {
                tx.commit().await.map_err(db_err)?;
                Ok(s)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }

    pub(crate) async fn job_signal_impl(
        &self,
        id: JobId,
        name: &str,
    ) -> Result<Option<serde_json::Value>> {
        let row = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.queries().job_signal)
                    .bind(id.0)
                    .bind(name)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        row.map(|r| r.try_get("payload").map_err(db_err))
            .transpose()
    }

    /// Deletes step and signal records of jobs that no longer exist, `batch` at a time until
    /// none is left; returns how many.
    pub(crate) async fn prune_steps(&self, batch: i64) -> Result<u64> {
        self.prune_loop(&self.queries().prune_steps, batch).await
    }

    /// Deletes workflow edges into nodes that no longer exist and workflows with no node
    /// left, `batch` at a time until none is left; returns how many.
    pub(crate) async fn prune_workflows(&self, batch: i64) -> Result<u64> {
        self.prune_loop(&self.queries().prune_workflows, batch)
            .await
    }

    async fn prune_loop(&self, sql: &str, batch: i64) -> Result<u64> {
        let mut total = 0;
        loop {
            let n: i64 = self
                .run(async |c: &mut PgConnection| {
                    self.query_scalar(sql)
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
