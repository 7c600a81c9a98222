//! Exactly-once for in-transaction jobs (`TxJob`): the handler's writes and the completion are
//! one transaction. Proved three ways: the handler's row and the job's `succeeded` row carry
//! the same transaction id (`xmin`), so they cannot have committed separately; a lease lost
//! while the handler runs rolls its writes back; and a worker that dies before the commit
//! leaves nothing behind, the re-run writing exactly once.

use crate::common;

use docket_postgres::PgStore;
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{JobContext, JobResult, Registry, TxJob};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::PgConnection;

/// Lets the "held" handlers of each test go on; one flag per test (tests run in parallel).
static GO_LOST: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);
static GO_CRASH: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

#[derive(Serialize, Deserialize)]
struct Credit {
    amount: i64,
    /// Which flag attempt 1 waits for after writing (none: go on at once).
    hold: Option<String>,
}

impl TxJob<PgStore> for Credit {
    const KIND: &'static str = "credit";

    async fn run(self, ctx: JobContext, tx: &mut PgConnection) -> JobResult {
        let schema = ctx.metadata["schema"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        sqlx::query(&format!(
            "INSERT INTO {schema}.ledger (job, attempt, amount) VALUES ($1, $2, $3)"
        ))
        .bind(ctx.id.0)
        .bind(ctx.attempt)
        .bind(self.amount)
        .execute(&mut *tx)
        .await?;
        let flag = match self.hold.as_deref() {
            Some("lost") => Some(&GO_LOST),
            Some("crash") => Some(&GO_CRASH),
            _ => None,
        };
        if let Some(flag) = flag.filter(|_| ctx.attempt == 1) {
            // Released by the test (a permit, not a polled flag).
            let _ = flag.acquire().await;
        }
        Ok(())
    }
}

async fn setup(db: &TestDb, hold: Option<&str>) -> JobId {
    db.exec("CREATE TABLE {schema}.ledger (job bigint, attempt int, amount bigint)")
        .await;
    db.store
        .enqueue(
            &NewJob::new("q", "credit", json!({"amount": 10, "hold": hold}))
                .metadata(json!({ "schema": db.schema }))
                .backoff(Backoff {
                    base: Duration::from_millis(10),
                    cap: Duration::from_millis(10),
                }),
        )
        .await
        .unwrap()
        .id
}

fn registry() -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_tx::<Credit>();
    r
}

async fn ledger_started(db: &TestDb) {
    // The handler's insert is not visible until commit: wait for its transaction instead.
    eventually(
        Duration::from_secs(20),
        "the handler is inside its transaction",
        || async {
            db.scalar(&format!(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}'
             AND state = 'idle in transaction' AND query LIKE 'INSERT INTO {}.ledger%'",
                db.schema, db.schema
            ))
            .await
                == 1
        },
    )
    .await;
}

/// The handler's write and the completion commit in one transaction: same `xmin`.
#[tokio::test]
async fn the_handlers_writes_and_the_completion_are_one_transaction() {
    let db = TestDb::new().await;
    let id = setup(&db, None).await;
    let w = start(&db, registry(), config("q", 1)).await;
    eventually(Duration::from_secs(20), "completed", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    w.stop().await;
    let same: bool = sqlx::query_scalar(&format!(
        // The kept success moved to its history row (migration 0035) in that transaction.
        "SELECT (SELECT xmin::text FROM {s}.ledger)
              = (SELECT xmin::text FROM {s}.jobs_succeeded WHERE int8range(lo, hi, '[]') @> $1::bigint)",
        s = db.schema
    ))
    .bind(id.0)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(
        same,
        "the ledger row and the completion committed in different transactions"
    );
}

/// The lease is lost while the handler runs (the clock moves past it and the reaper hands the
/// job back): the handler's write is rolled back with the refused completion, and the re-run
/// writes once.
#[tokio::test]
async fn a_lease_lost_mid_handler_rolls_the_handlers_writes_back() {
    let db = TestDb::new().await;
    let id = setup(&db, Some("lost")).await;
    let mut c = config("q", 1);
    c.maintenance = false; // the test reaps
    let w = start(&db, registry(), c).await;
    ledger_started(&db).await;
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    assert_eq!(db.store.reap(10).await.unwrap().requeued(), 1);
    GO_LOST.add_permits(1);
    eventually(Duration::from_secs(30), "the re-run completes", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    w.stop().await;
    let rows: Vec<(i32, i64)> = sqlx::query_as(&format!(
        "SELECT attempt, amount FROM {}.ledger ORDER BY attempt",
        db.schema
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(rows, vec![(2, 10)], "attempt 1's write was rolled back");
    assert_eq!(db.store.get(id).await.unwrap().attempt, 2);
}

/// The worker's transaction dies before the commit — at the server a crashed worker is
/// exactly this: its connection vanishes and the open transaction is rolled back. Nothing the
/// handler wrote survives, the lease runs out, the job is re-run and the ledger holds exactly
/// one entry.
#[tokio::test]
async fn a_transaction_that_dies_before_the_commit_leaves_nothing_behind() {
    let db = TestDb::new().await;
    let id = setup(&db, Some("crash")).await;
    let c = config("q", 1).lease(Duration::from_secs(2));
    let w = start(&db, registry(), c).await;
    ledger_started(&db).await;
    let killed = db
        .scalar(&format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = '{}' AND state = 'idle in transaction'",
            db.schema
        ))
        .await;
    assert_eq!(killed, 1);
    GO_CRASH.add_permits(1);
    eventually(
        Duration::from_secs(30),
        "the job is re-run and completed",
        || async { db.store.get(id).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    w.stop().await;
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.attempt, 2);
    assert_eq!(rec.errors[0].class, "lease_expired");
    let rows: Vec<i32> = sqlx::query_scalar(&format!("SELECT attempt FROM {}.ledger", db.schema))
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(rows, vec![2]);
}
