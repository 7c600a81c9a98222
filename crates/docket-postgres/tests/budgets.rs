//! Retry budgets and error history at the store: backoff counts failures (not claims), the
//! history keeps its first entry and the last 31, the SQL cuts a message the client did not,
//! two reapers never reap one lease twice, and a unique key that a repeatable-read snapshot
//! cannot see fails with a retryable 40001 instead of looping.

use std::time::Duration;

use docket_core::*;
use docket_testkit::{checker, TestDb};
use serde_json::json;

fn req(owner: &str, limit: i32) -> ClaimRequest {
    ClaimRequest {
        queue: "q".into(),
        limit,
        owner: owner.into(),
        lease: Duration::from_secs(60),
        starvation: None,
        controlled: None,
    }
}

async fn claim1(db: &TestDb) -> ClaimedJob {
    let mut v = db.store.claim(&req("w", 1)).await.unwrap();
    assert_eq!(v.len(), 1);
    v.remove(0)
}

/// Makes every pending job due now (the clock moved past its retry time).
async fn due_now(db: &TestDb) {
    db.exec("UPDATE {schema}.jobs SET run_at = now() - interval '1 millisecond' WHERE state = 'pending'")
        .await;
}

/// Seconds from now until the job's run_at.
async fn wait_secs(db: &TestDb, id: JobId) -> f64 {
    sqlx::query_scalar(&format!(
        "SELECT extract(epoch FROM run_at - now())::float8 FROM {}.jobs WHERE id = $1",
        db.schema
    ))
    .bind(id.0)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

fn retry(lease: Lease) -> Failure {
    Failure {
        lease,
        class: FailureClass::Retry,
        message: "boom".into(),
        retry_in: None,
    }
}

/// Three releases and a snooze are claims without failures: the first real failure waits the
/// base delay (±25 % jitter), not base · 2^4; the second failure waits twice the base.
#[tokio::test]
async fn backoff_counts_failures_not_claims() {
    let db = TestDb::new().await;
    let backoff = Backoff {
        base: Duration::from_secs(100),
        cap: Duration::from_secs(100_000),
    };
    let id = db
        .store
        .enqueue(
            &NewJob::new("q", "k", json!(1))
                .backoff(backoff)
                .max_attempts(20),
        )
        .await
        .unwrap()
        .id;
    for _ in 0..3 {
        let j = claim1(&db).await;
        db.store.release_many("w", &[j.lease()]).await.unwrap();
    }
    let j = claim1(&db).await;
    db.store
        .snooze_many(
            "w",
            &[Snooze {
                lease: j.lease(),
                delay: Duration::ZERO,
            }],
        )
        .await
        .unwrap();
    let j = claim1(&db).await;
    assert_eq!(j.attempt, 5, "five claims");
    db.store.fail_many("w", &[retry(j.lease())]).await.unwrap();
    let first = wait_secs(&db, id).await;
    assert!(
        (74.0..=126.0).contains(&first),
        "first failure waits ~100 s, not 1600 s: {first}"
    );
    due_now(&db).await;
    let j = claim1(&db).await;
    db.store.fail_many("w", &[retry(j.lease())]).await.unwrap();
    let second = wait_secs(&db, id).await;
    assert!(
        (149.0..=251.0).contains(&second),
        "second failure waits ~200 s: {second}"
    );
}

/// The error history is bounded: 40 failures keep the first entry and the last 31 (32 in
/// all), in order.
#[tokio::test]
async fn the_history_keeps_the_first_failure_and_the_last_31() {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(1)).max_attempts(50))
        .await
        .unwrap()
        .id;
    for _ in 0..40 {
        let j = claim1(&db).await;
        let mut f = retry(j.lease());
        f.retry_in = Some(Duration::ZERO);
        f.message = format!("failure of attempt {}", j.attempt);
        db.store.fail_many("w", &[f]).await.unwrap();
        due_now(&db).await;
    }
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.attempt, 40);
    let attempts: Vec<i32> = rec.errors.iter().map(|e| e.attempt).collect();
    let mut want = vec![1];
    want.extend(10..=40);
    assert_eq!(attempts, want);
    assert_eq!(rec.errors[0].message, "failure of attempt 1");
    assert_eq!(rec.errors[31].message, "failure of attempt 40");
}

/// A message the client did not cut (a caller that writes the statement itself) is cut by the
/// SQL to 4,096 characters, on a character boundary.
#[tokio::test]
async fn the_sql_cuts_an_error_message_to_4096_characters() {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(1)))
        .await
        .unwrap()
        .id;
    let j = claim1(&db).await;
    let q = docket_postgres::queries::Queries::render(&db.schema);
    let long = "é".repeat(10_000);
    let n = sqlx::query(&q.fail_many)
        .bind(vec![j.id.0])
        .bind(vec![j.attempt])
        .bind(vec!["retry"])
        .bind(vec![long])
        .bind(vec![0_i64])
        .bind("w")
        .execute(&db.pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(n, 1);
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.errors[0].message.chars().count(), 4096);
    assert!(rec.errors[0].message.chars().all(|c| c == 'é'));
}

/// Two reapers sweep the same 600 expired leases at the same time: every lease is reaped
/// exactly once, by one of them, and nothing live is touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reapers_at_once_reap_each_lease_exactly_once() {
    let db = TestDb::with_pool_size(4).await;
    checker::install_audit(&db).await;
    db.store
        .enqueue_many(
            &(0..650)
                .map(|i| NewJob::new("q", "k", json!(i)))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let claimed = db.store.claim(&req("w", 650)).await.unwrap();
    assert_eq!(claimed.len(), 650);
    // 600 leases expire; 50 stay live.
    db.exec(
        "UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'
         WHERE id IN (SELECT id FROM {schema}.jobs ORDER BY id LIMIT 600)",
    )
    .await;
    let (a, b) = (db.second_store(1).await, db.second_store(1).await);
    let sweep = |s: docket_postgres::PgStore| async move {
        let mut n = 0;
        loop {
            let got = s.reap(25).await.unwrap().jobs.len();
            if got == 0 {
                return n;
            }
            n += got;
        }
    };
    let (na, nb) = tokio::join!(tokio::spawn(sweep(a)), tokio::spawn(sweep(b)));
    let (na, nb) = (na.unwrap(), nb.unwrap());
    assert_eq!(na + nb, 600, "reaped {na} + {nb}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'running'")
            .await,
        50
    );
    assert_eq!(
        db.scalar("SELECT count(DISTINCT job_id) FROM {schema}.audit WHERE writer = 'reap'")
            .await,
        600
    );
    let report = checker::check_writes(&db, &["pending", "running"]).await;
    assert_eq!(report.reaped, 600, "each lease reaped once");
    println!("reaper A took {na}, reaper B took {nb}");
}

/// Under REPEATABLE READ the caller's snapshot cannot see a job that another transaction
/// committed with the same unique key, while the unique index can, so the function's
/// look-up/insert loop could never resolve the key. It must end in a retryable 40001
/// (serialisation failure) rather than spin: here the server raises it at the insert itself,
/// before the loop's own bound of 21 rounds (which stays the defence for read-committed
/// races that no test can provoke on demand). The store reports it as transient; the
/// caller's retry, in a fresh transaction, sees the holder.
#[tokio::test]
async fn a_unique_key_hidden_by_a_repeatable_read_snapshot_fails_retryably_with_40001() {
    let db = TestDb::new().await;
    let mut tx = db.pool.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap(); // the snapshot is taken
    let holder = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(1)).unique_key("welcome:42"))
        .await
        .unwrap();
    assert!(!holder.duplicate);
    let err = db
        .store
        .enqueue_tx(
            &mut tx,
            &NewJob::new("q", "k", json!(2)).unique_key("welcome:42"),
        )
        .await
        .expect_err("the hidden holder cannot be resolved in this snapshot");
    assert!(err.is_transient(), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("could not serialize") || msg.contains("contended"),
        "{msg}"
    );
    tx.rollback().await.unwrap();
    // The retry, in a fresh transaction, sees the holder.
    let again = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(2)).unique_key("welcome:42"))
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.id, holder.id);
}
