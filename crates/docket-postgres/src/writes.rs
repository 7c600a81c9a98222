//! The fenced writes of a claim on PostgreSQL: the claim itself, failures, snoozes,
//! heartbeats and completions, each one statement over sorted leases (one lock order for
//! every batch writer), and the reading of why a lease no longer holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use docket_core::*;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::errors::db_err;
use crate::rows;
use crate::scan_hint::{After, Found, Probe, Scan};
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
        let hints = &self.inner.hints;
        let (scan, probe) = hints.plan(&req.queue, Instant::now());
        if let Some(probe) = probe {
            self.spawn_probe(req, probe);
        }
        let (from_priority, from_run_at) = match scan {
            Scan::Full => (None, None),
            Scan::From(p, t) => (Some(p), Some(t)),
        };
        // Nanoseconds of the statement alone (not the wait for a pooled connection).
        let took = AtomicU64::new(0);
        let rows = self
            .run(async |c: &mut PgConnection| {
                let t0 = Instant::now();
                let rows = self
                    .query(&self.inner.q.claim)
                    .bind(&req.queue)
                    .bind(req.limit)
                    .bind(&req.owner)
                    .bind(ms(req.lease))
                    .bind(req.starvation.map(ms))
                    .bind(req.controlled)
                    .bind(from_priority)
                    .bind(from_run_at)
                    .fetch_all(&mut *c)
                    .await
                    .map_err(db_err);
                took.store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                rows
            })
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                let took = Duration::from_nanos(took.load(Ordering::Relaxed));
                hints.observe(req, scan, took, None, Instant::now());
                return Err(e);
            }
        };
        let mut jobs = Vec::with_capacity(rows.len());
        let mut bad = Vec::new();
        for r in &rows {
            match rows::claimed(r)? {
                Ok(j) => jobs.push(j),
                Err(u) => bad.push(u),
            }
        }
        let took = Duration::from_nanos(took.load(Ordering::Relaxed));
        let after = hints.observe(req, scan, took, Some(&jobs), Instant::now());
        if after == After::CheckHorizon {
            // One more statement, only after a slow unhinted claim: is an old snapshot the
            // reason (see scan_hint.rs)? An error here only leaves the claims unhinted.
            if let Ok(age) = self
                .query(&self.inner.q.horizon_age)
                .fetch_one(&self.inner.pool)
                .await
                .and_then(|r| r.try_get::<i64, _>(0))
            {
                hints.horizon(&req.queue, age, took, Instant::now());
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

    /// Runs `sql/claim_probe.sql` in a task of its own: its walk behind the hint must not
    /// delay the claim that found it due (see `scan_hint.rs`).
    fn spawn_probe(&self, req: &ClaimRequest, probe: Probe) {
        let (store, queue, starvation) = (self.clone(), req.queue.clone(), req.starvation);
        tokio::spawn(async move {
            let t0 = Instant::now();
            let found = store
                .query(&store.inner.q.claim_probe)
                .bind(&queue)
                .bind(probe.priority)
                .bind(probe.run_at)
                .bind(starvation.map(ms))
                .fetch_one(&store.inner.pool)
                .await
                .map_err(db_err)
                .and_then(|r| {
                    let p: Option<i16> = r.try_get(0).map_err(db_err)?;
                    let t: Option<chrono::DateTime<chrono::Utc>> = r.try_get(1).map_err(db_err)?;
                    Ok(Found {
                        before: p.zip(t),
                        starving: r.try_get(2).map_err(db_err)?,
                    })
                });
            if let Err(e) = &found {
                tracing::debug!(queue, error = %e, "the probe behind the claim hint failed; retried next interval");
            }
            let hints = &store.inner.hints;
            hints.probed(&queue, found.ok(), t0.elapsed(), Instant::now());
        });
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
