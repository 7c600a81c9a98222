//! The dangerous interleavings, deterministically: a stale holder writes while its successor
//! holds the lease **and is still running**. For every post-claim write (complete, fail,
//! snooze, heartbeat, release, in-transaction completion), and for a successor that is
//! another worker or the same worker claiming again (so the attempt alone must fence), the
//! stale write is refused, the successor's row is unchanged byte for byte, the successor then
//! completes, and the audit checker finds no write by a superseded token. The clock is moved
//! by backdating the lease and the retry time, never by sleeping.

use std::time::Duration;

use docket_core::*;
use docket_testkit::{checker, TestDb};
use serde_json::json;

const LEASE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
enum Write {
    Complete,
    Fail,
    Snooze,
    Heartbeat,
    Release,
    CompleteInTransaction,
}

async fn claim(db: &TestDb, owner: &str) -> ClaimedJob {
    let mut v = db
        .store
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 1,
            owner: owner.into(),
            lease: LEASE,
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    assert_eq!(v.len(), 1, "one claimable job");
    v.remove(0)
}

/// The row exactly as stored.
async fn row(db: &TestDb, id: JobId) -> serde_json::Value {
    sqlx::query_scalar(&format!(
        "SELECT to_jsonb(j) FROM {}.jobs j WHERE id = $1",
        db.schema
    ))
    .bind(id.0)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

/// Writes `w` as the holder of `lease`; true when the store accepted it.
async fn write(db: &TestDb, w: Write, owner: &str, lease: Lease) -> bool {
    let s = &db.store;
    match w {
        Write::Complete => {
            let out = s.complete_many(owner, &[lease]).await.unwrap();
            assert_eq!(out.applied.len() + out.lost.len(), 1);
            !out.applied.is_empty()
        }
        Write::Fail => {
            let f = Failure {
                lease,
                class: FailureClass::Retry,
                message: "stale".into(),
                retry_in: Some(Duration::ZERO),
            };
            let out = s.fail_many(owner, &[f]).await.unwrap();
            !out.applied.is_empty()
        }
        Write::Snooze => {
            let z = Snooze {
                lease,
                delay: Duration::from_secs(5),
            };
            !s.snooze_many(owner, &[z]).await.unwrap().applied.is_empty()
        }
        Write::Heartbeat => {
            let out = s.heartbeat(owner, &[lease], LEASE).await.unwrap();
            assert_eq!(out.extended.len() + out.lost.len(), 1);
            !out.extended.is_empty()
        }
        Write::Release => !s
            .release_many(owner, &[lease])
            .await
            .unwrap()
            .applied
            .is_empty(),
        Write::CompleteInTransaction => {
            // The handler's own write and the completion: both commit or neither does.
            let mut tx = db.pool.begin().await.unwrap();
            sqlx::query(&format!(
                "INSERT INTO {}.effects (job, attempt) VALUES ($1, $2)",
                db.schema
            ))
            .bind(lease.id.0)
            .bind(lease.attempt)
            .execute(&mut *tx)
            .await
            .unwrap();
            match s.complete_tx(&mut tx, owner, lease).await {
                Ok(()) => {
                    tx.commit().await.unwrap();
                    true
                }
                Err(StoreError::LeaseLost(l)) => {
                    assert_eq!(l.lease, lease);
                    tx.rollback().await.unwrap();
                    false
                }
                Err(e) => panic!("complete_tx: {e}"),
            }
        }
    }
}

async fn stale_holder_writes_while_the_successor_runs(w: Write, same_owner: bool) {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    db.exec("CREATE TABLE {schema}.effects (job bigint, attempt int)")
        .await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({"n": 1})).max_attempts(5))
        .await
        .unwrap()
        .id;
    let a = claim(&db, "worker-a").await;
    // The clock moves past A's lease; the reaper hands the job back; its retry is due.
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    assert_eq!(db.store.reap(10).await.unwrap().requeued(), 1);
    db.exec("UPDATE {schema}.jobs SET run_at = now() - interval '1 second'")
        .await;
    let b_owner = if same_owner { "worker-a" } else { "worker-b" };
    let b = claim(&db, b_owner).await;
    assert_eq!((b.id, b.attempt), (id, 2));
    let before = row(&db, id).await;
    // A, whose handler finished late, writes with its old token while B runs.
    let accepted = write(&db, w, "worker-a", a.lease()).await;
    assert!(!accepted, "{w:?} by the stale token was accepted");
    assert_eq!(
        row(&db, id).await,
        before,
        "{w:?}: the successor's row changed"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.effects").await,
        0,
        "the stale holder's own writes were rolled back"
    );
    // B is unaffected: it beats and completes under its own token.
    assert!(write(&db, Write::Heartbeat, b_owner, b.lease()).await);
    assert!(write(&db, Write::CompleteInTransaction, b_owner, b.lease()).await);
    let rec = db.store.get(id).await.unwrap();
    assert_eq!((rec.state, rec.attempt), (JobState::Succeeded, 2));
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.effects WHERE attempt = 2")
            .await,
        1
    );
    let report = checker::check_writes(&db, &["succeeded"]).await;
    assert_eq!(report.reaped, 1);
}

macro_rules! interleavings {
    ($($name:ident: $w:expr, $same:expr;)*) => {$(
        #[tokio::test]
        async fn $name() {
            stale_holder_writes_while_the_successor_runs($w, $same).await;
        }
    )*};
}

interleavings! {
    stale_complete_is_refused_while_another_worker_runs_the_job: Write::Complete, false;
    stale_complete_is_refused_when_the_same_worker_reclaimed_the_job: Write::Complete, true;
    stale_fail_is_refused_while_another_worker_runs_the_job: Write::Fail, false;
    stale_fail_is_refused_when_the_same_worker_reclaimed_the_job: Write::Fail, true;
    stale_snooze_is_refused_while_another_worker_runs_the_job: Write::Snooze, false;
    stale_snooze_is_refused_when_the_same_worker_reclaimed_the_job: Write::Snooze, true;
    stale_heartbeat_is_refused_while_another_worker_runs_the_job: Write::Heartbeat, false;
    stale_heartbeat_is_refused_when_the_same_worker_reclaimed_the_job: Write::Heartbeat, true;
    stale_release_is_refused_while_another_worker_runs_the_job: Write::Release, false;
    stale_release_is_refused_when_the_same_worker_reclaimed_the_job: Write::Release, true;
    stale_in_transaction_completion_rolls_back_while_another_worker_runs_the_job: Write::CompleteInTransaction, false;
    stale_in_transaction_completion_rolls_back_when_the_same_worker_reclaimed_the_job: Write::CompleteInTransaction, true;
}

/// The checker itself can fail: a write that bypasses the fence (here a hand-written
/// completion of the successor's row by the stale token) is reported as a token violation.
#[tokio::test]
async fn the_checker_sees_a_write_by_a_superseded_token() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!(1)))
        .await
        .unwrap();
    let a = claim(&db, "worker-a").await;
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    db.store.reap(10).await.unwrap();
    db.exec("UPDATE {schema}.jobs SET run_at = now() - interval '1 second'")
        .await;
    let _b = claim(&db, "worker-b").await;
    // complete_many without its fence, as a broken statement would run it.
    db.exec(&format!(
        "-- complete_many: a broken copy\n UPDATE {{schema}}.jobs SET state = 'succeeded', attempt = {},
         finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE id = {}",
        a.attempt, a.id
    ))
    .await;
    let caught = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
        checker::check_writes(&db, &["succeeded"]),
    ))
    .await;
    let msg = caught
        .expect_err("the checker must fail")
        .downcast::<String>()
        .map(|s| *s)
        .unwrap_or_default();
    assert!(msg.contains("token: a worker write landed"), "{msg}");
    assert!(msg.contains("by token 1"), "{msg}");
}

/// The steps rule can fail too: a step recorded past the fence (here inserted by hand for the
/// stale token after the job moved on) is reported, while the fenced records pass.
#[tokio::test]
async fn the_checker_sees_a_step_recorded_by_a_superseded_token() {
    let db = TestDb::new().await;
    checker::install_audit(&db).await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!(1)))
        .await
        .unwrap();
    let a = claim(&db, "worker-a").await;
    let rec = db
        .store
        .record_step("worker-a", a.lease(), "charge", &json!(1))
        .await
        .unwrap();
    assert!(rec.written);
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    db.store.reap(10).await.unwrap();
    db.exec("UPDATE {schema}.jobs SET run_at = now() - interval '1 second'")
        .await;
    let b = claim(&db, "worker-b").await;
    db.store
        .record_step("worker-b", b.lease(), "ship", &json!(2))
        .await
        .unwrap();
    checker::check_writes(&db, &["running"]).await;
    // record_step without its fence, as a broken function would write it.
    db.exec(&format!(
        "INSERT INTO {{schema}}.job_steps (job_id, name, attempt, output) VALUES ({}, 'late', {}, '3')",
        a.id, a.attempt
    ))
    .await;
    let caught = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
        checker::check_writes(&db, &["running"]),
    ))
    .await;
    let msg = caught
        .expect_err("the checker must fail")
        .downcast::<String>()
        .map(|s| *s)
        .unwrap_or_default();
    assert!(
        msg.contains("steps: a step was recorded by a token"),
        "{msg}"
    );
    assert!(msg.contains("step late recorded by token 1"), "{msg}");
}
