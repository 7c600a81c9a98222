//! The claim experiment from the design, runnable against any server: N jobs, W concurrent
//! connections, each claiming and finishing one job per statement until none is left.
//! `naive` shows duplicated work, `for-update` is correct but serialised, `skip-locked` does
//! every job exactly once without waiting.

use std::time::{Duration, Instant};

use docket_core::StoreError;
use serde::Serialize;
use sqlx::Row;

use docket_postgres::errors::db_err;
use docket_postgres::PgStore;

/// The lab's statements (`sql/lab_*.sql`, each with a header), rendered for one schema. They
/// live with the command that runs them: the experiment is a demonstration, not part of the
/// storage library.
struct LabQueries {
    lab_setup: String,
    lab_naive: String,
    lab_for_update: String,
    lab_skip_locked: String,
    lab_result: String,
}

impl LabQueries {
    fn render(schema: &str) -> Self {
        let r = |t: &str| t.replace("{{schema}}", schema);
        LabQueries {
            lab_setup: r(include_str!("../sql/lab_setup.sql")),
            lab_naive: r(include_str!("../sql/lab_naive.sql")),
            lab_for_update: r(include_str!("../sql/lab_for_update.sql")),
            lab_skip_locked: r(include_str!("../sql/lab_skip_locked.sql")),
            lab_result: r(include_str!("../sql/lab_result.sql")),
        }
    }
}

/// The claim statement under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabMode {
    /// Subquery without a lock.
    Naive,
    /// `FOR UPDATE`.
    ForUpdate,
    /// `FOR UPDATE SKIP LOCKED`.
    SkipLocked,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct LabReport {
    pub mode: LabMode,
    pub jobs: i64,
    pub workers: usize,
    /// Jobs that ended done.
    pub done: i64,
    /// Jobs claimed more than once (lost or duplicated work).
    pub duplicated: i64,
    /// The highest number of claims of one job.
    pub max_claims: i32,
    /// Claims made in total (equals `jobs` when nothing was duplicated).
    pub total_claims: i64,
    /// Wall time of the drain.
    pub seconds: f64,
}

/// Runs the experiment in the store's schema (table `lab_jobs`, re-created each run).
pub async fn run(
    store: &PgStore,
    mode: LabMode,
    jobs: u32,
    workers: usize,
) -> Result<LabReport, StoreError> {
    let q = LabQueries::render(store.schema());
    let setup = q.lab_setup.replace("{{count}}", &jobs.to_string());
    sqlx::raw_sql(&setup)
        .execute(store.pool())
        .await
        .map_err(db_err)?;
    let stmt = match mode {
        LabMode::Naive => q.lab_naive.clone(),
        LabMode::ForUpdate => q.lab_for_update.clone(),
        LabMode::SkipLocked => q.lab_skip_locked.clone(),
    };
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers.max(1) {
        let pool = store.pool().clone();
        let stmt = stmt.clone();
        tasks.push(tokio::spawn(async move {
            // Each worker holds one connection, like a pgbench client.
            let mut conn = pool.acquire().await.map_err(db_err)?;
            let mut empty_in_a_row = 0;
            while empty_in_a_row < 3 {
                let row = sqlx::query(&stmt)
                    .fetch_optional(&mut *conn)
                    .await
                    .map_err(db_err)?;
                if row.is_some() {
                    empty_in_a_row = 0;
                } else {
                    // SKIP LOCKED may see nothing while others still hold the last rows;
                    // look twice more before concluding the table is drained.
                    empty_in_a_row += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            Ok::<_, StoreError>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| StoreError::Database(Box::new(e)))??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let r = sqlx::query(&q.lab_result)
        .fetch_one(store.pool())
        .await
        .map_err(db_err)?;
    Ok(LabReport {
        mode,
        jobs: jobs.into(),
        workers,
        done: r.try_get("done").map_err(db_err)?,
        duplicated: r.try_get("duplicated").map_err(db_err)?,
        max_claims: r.try_get("max_claims").map_err(db_err)?,
        total_claims: r.try_get("total_claims").map_err(db_err)?,
        seconds,
    })
}
