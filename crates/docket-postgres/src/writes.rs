//! The fenced writes of a claim on PostgreSQL: the claim itself, failures, snoozes,
//! heartbeats and completions, each one statement over sorted leases (one lock order for
//! every batch writer), and the reading of why a lease no longer holds.

use std::collections::HashMap;
use std::time::Duration;

use docket_core::*;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::rows;
use crate::store::{ms, PgStore};

impl PgStore {
    /// A fenced completion (`complete_many.sql` or `complete_delete_many.sql`: both take ids,
    /// attempts and owner, and return the rows they finished).
    pub(crate) async fn complete_with(
        &self,
        sql: &str,
        owner: &str,
        leases: &[Lease],
    ) -> Result<BatchOutcome> {
        if leases.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let (sorted, ids, attempts) = lease_arrays(leases);
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(sql)
                    .bind(&ids)
                    .bind(&attempts)
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        self.fenced(&sorted, rows).await
    }

    /// Runs a fenced batch statement whose rows are `(id, attempt)` of the applied writes and
    /// sorts every input lease into applied or lost.
    pub(crate) async fn fenced(&self, leases: &[Lease], rows: Vec<PgRow>) -> Result<BatchOutcome> {
        let mut applied = Vec::with_capacity(rows.len());
        for r in &rows {
            applied.push(Lease {
                id: JobId(r.try_get("id").map_err(db_err)?),
                attempt: r.try_get("attempt").map_err(db_err)?,
            });
        }
        let lost: Vec<Lease> = if applied.len() == leases.len() {
            Vec::new()
        } else {
            leases
                .iter()
                .filter(|l| !applied.contains(l))
                .copied()
                .collect()
        };
        let lost = if lost.is_empty() {
            Vec::new()
        } else {
            self.explain_lost(lost).await?
        };
        Ok(BatchOutcome { applied, lost })
    }

    /// Says why each lease no longer holds.
    pub(crate) async fn explain_lost(&self, lost: Vec<Lease>) -> Result<Vec<LeaseLost>> {
        let ids: Vec<i64> = lost.iter().map(|l| l.id.0).collect();
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.lease_status)
                    .bind(&ids)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut now: HashMap<i64, (JobState, i32)> = HashMap::new();
        for r in &rows {
            let st: String = r.try_get("state").map_err(db_err)?;
            now.insert(
                r.try_get("id").map_err(db_err)?,
                (rows::state(&st)?, r.try_get("attempt").map_err(db_err)?),
            );
        }
        Ok(lost
            .into_iter()
            .map(|lease| {
                let reason = match now.get(&lease.id.0) {
                    None => LostReason::Missing,
                    Some((_, a)) if *a > lease.attempt => LostReason::Superseded(*a),
                    Some((s, _)) if *s != JobState::Running => LostReason::NotRunning(*s),
                    Some(_) => LostReason::Expired,
                };
                LeaseLost { lease, reason }
            })
            .collect())
    }

    pub(crate) async fn claim_impl(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        validate::queue(&req.queue)?;
        if req.limit <= 0 {
            return Ok(Vec::new());
        }
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.claim)
                    .bind(&req.queue)
                    .bind(req.limit)
                    .bind(&req.owner)
                    .bind(ms(req.lease))
                    .bind(req.starvation.map(ms))
                    .bind(req.controlled)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut jobs = Vec::with_capacity(rows.len());
        let mut bad = Vec::new();
        for r in &rows {
            match rows::claimed(r)? {
                Ok(j) => jobs.push(j),
                Err(u) => bad.push(u),
            }
        }
        if !bad.is_empty() {
            // A row that bypassed validation (a non-finite time, say) cannot run: it is
            // failed at once, dead with the reason, so it can neither stall this worker nor
            // come back after its lease.
            for u in &bad {
                tracing::warn!(job = %u.lease.id, reason = %u.reason, "claimed a job whose row cannot be decoded; failing it");
            }
            let failures: Vec<Failure> = bad
                .into_iter()
                .map(|u| Failure {
                    lease: u.lease,
                    class: FailureClass::Discard,
                    message: format!("the stored job cannot be decoded: {}", u.reason),
                    retry_in: None,
                })
                .collect();
            self.fail_many(&req.owner, &failures).await?;
        }
        Ok(jobs)
    }

    pub(crate) async fn fail_many_impl(
        &self,
        owner: &str,
        failures: &[Failure],
    ) -> Result<BatchOutcome> {
        if failures.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = sorted_failures(failures);
        let max = self.inner.limits.max_error_bytes;
        let leases: Vec<Lease> = sorted.iter().map(|f| f.lease).collect();
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.fail_many)
                    .bind(sorted.iter().map(|f| f.lease.id.0).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|f| f.lease.attempt).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|f| f.class.as_str()).collect::<Vec<_>>())
                    .bind(
                        sorted
                            .iter()
                            .map(|f| validate::truncate_message(&f.message, max))
                            .collect::<Vec<_>>(),
                    )
                    .bind(
                        sorted
                            .iter()
                            .map(|f| f.retry_in.map(ms))
                            .collect::<Vec<_>>(),
                    )
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        self.fenced(&leases, rows).await
    }

    pub(crate) async fn snooze_many_impl(
        &self,
        owner: &str,
        snoozes: &[Snooze],
    ) -> Result<BatchOutcome> {
        if snoozes.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let sorted = sorted_snoozes(snoozes)?;
        let leases: Vec<Lease> = sorted.iter().map(|s| s.lease).collect();
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.snooze_many)
                    .bind(sorted.iter().map(|s| s.lease.id.0).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|s| s.lease.attempt).collect::<Vec<_>>())
                    .bind(sorted.iter().map(|s| ms(s.delay)).collect::<Vec<_>>())
                    .bind(owner)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        self.fenced(&leases, rows).await
    }

    pub(crate) async fn heartbeat_impl(
        &self,
        owner: &str,
        leases: &[Lease],
        lease: Duration,
    ) -> Result<HeartbeatOutcome> {
        if leases.is_empty() {
            return Ok(HeartbeatOutcome::default());
        }
        let (sorted, ids, attempts) = lease_arrays(leases);
        let rows = self
            .run(async |c: &mut PgConnection| {
                self.query(&self.inner.q.heartbeat)
                    .bind(&ids)
                    .bind(&attempts)
                    .bind(owner)
                    .bind(ms(lease))
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err)
            })
            .await?;
        let mut out = HeartbeatOutcome::default();
        for r in &rows {
            let l = Lease {
                id: JobId(r.try_get("id").map_err(db_err)?),
                attempt: r.try_get("attempt").map_err(db_err)?,
            };
            out.extended
                .push((l, r.try_get("lease_expires_at").map_err(db_err)?));
            if r.try_get::<bool, _>("cancel_requested").map_err(db_err)? {
                out.cancel_requested.push(l);
            }
        }
        let lost: Vec<Lease> = sorted
            .into_iter()
            .filter(|l| !out.extended.iter().any(|(e, _)| e == l))
            .collect();
        if !lost.is_empty() {
            out.lost = self.explain_lost(lost).await?;
        }
        Ok(out)
    }
}

/// Sorted, de-duplicated leases as parallel arrays: one lock order for every batch writer.
fn lease_arrays(leases: &[Lease]) -> (Vec<Lease>, Vec<i64>, Vec<i32>) {
    let sorted = sorted_leases(leases);
    let ids = sorted.iter().map(|l| l.id.0).collect();
    let attempts = sorted.iter().map(|l| l.attempt).collect();
    (sorted, ids, attempts)
}
