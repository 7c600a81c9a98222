//! The engine contract (docket-testkit's conformance suite) on MariaDB / MySQL: the same
//! cases as PostgreSQL, unchanged. The server: `MYSQL_URL`, or a private `mariadbd`.

docket_testkit::conformance_suite!(docket_testkit::conformance::MySqlHarness);

/// A claim of a rate-limited queue that waits for the queue's limit lock refills the bucket,
/// and stamps its jobs, with the server's clock read after the lock — not with the instant
/// it read before waiting. While the claim waits, the lock's holder empties the bucket and
/// backdates its refill by half a second (time passing, without waiting for it): the claim
/// must find about 5 tokens and stamp its jobs no earlier than the release, which comes
/// after the server's clock has moved past the moment the claim was seen waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_waited_for_the_limit_lock_refills_from_the_clock_after_it() {
    use std::time::Duration;

    use docket_core::*;
    use docket_mysql::MySqlStore;
    use docket_testkit::conformance::{Harness, MySqlHarness};

    let h = MySqlHarness::fresh().await;
    let s = h.store().clone();
    s.set_queue_limits(
        "r",
        &QueueLimits {
            rate: Some(RateLimit {
                limit: 10,
                period: Duration::from_secs(1),
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let jobs: Vec<NewJob> = (0..20)
        .map(|i| NewJob::new("r", "k", serde_json::json!({ "i": i })))
        .collect();
    s.enqueue_many(&jobs).await.unwrap();
    let claim = |owner: &'static str| {
        let s = s.clone();
        async move {
            s.claim(&ClaimRequest {
                queue: "r".into(),
                limit: 20,
                owner: owner.into(),
                lease: Duration::from_secs(60),
                starvation: None,
                controlled: None,
            })
            .await
            .unwrap()
        }
    };
    assert_eq!(
        claim("first").await.len(),
        10,
        "the burst empties the bucket"
    );

    // Hold the queue's limit lock, as a slow claim would.
    let mut holder = s.pool().begin().await.unwrap();
    sqlx::query("SELECT 1 FROM queue_locks WHERE name = 'limit:r' FOR UPDATE")
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    let waiting = tokio::spawn(claim("second"));
    // Until the claim runs its lock statement on that row (so it has read the clock of its
    // start). The processlist, not innodb_trx: MariaDB may list a transaction waiting for a
    // row as RUNNING there.
    docket_testkit::eventually(
        Duration::from_secs(20),
        "the claim waits for the lock",
        || {
            let s = s.clone();
            async move {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM information_schema.processlist
                 WHERE db = DATABASE() AND info LIKE '-- queue_lock_exclusive:%'",
                )
                .fetch_one(s.pool())
                .await
                .unwrap()
                    > 0
            }
        },
    )
    .await;
    let server_now = |s: MySqlStore| async move {
        sqlx::query_scalar::<_, i64>(
            "SELECT CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED)",
        )
        .fetch_one(s.pool())
        .await
        .unwrap()
    };
    // The claim read its clock before it began to wait, so at or before `seen`; the release
    // is stamped strictly later (the clock's next millisecond, at most one away).
    let seen = server_now(s.clone()).await;
    docket_testkit::eventually(
        Duration::from_secs(5),
        "the server's clock moves on",
        || {
            let s = s.clone();
            async move { server_now(s).await > seen }
        },
    )
    .await;
    let released_at = server_now(s.clone()).await;
    sqlx::query("UPDATE queues SET tokens = 0, refilled_at = ? WHERE name = 'r'")
        .bind(released_at - 500)
        .execute(&mut *holder)
        .await
        .unwrap();
    holder.commit().await.unwrap();
    let got = waiting.await.unwrap();
    assert!(
        got.len() >= 4,
        "the bucket refilled up to the claim's start only: {} jobs",
        got.len()
    );
    let first_stamp: i64 =
        sqlx::query_scalar("SELECT MIN(attempted_at) FROM jobs WHERE lease_owner = 'second'")
            .fetch_one(s.pool())
            .await
            .unwrap();
    assert!(
        first_stamp >= released_at,
        "stamped {first_stamp}, before the lock was released at {released_at}"
    );
}
