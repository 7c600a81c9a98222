//! Claim and the fenced writes: complete, fail (retry/discard/cancel), snooze, heartbeat,
//! release — and the fencing matrix: a stale token never changes anything.

use std::time::Duration;

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::json;

const LEASE: Duration = Duration::from_secs(60);

fn req(queue: &str, limit: i32, owner: &str) -> ClaimRequest {
    ClaimRequest {
        queue: queue.into(),
        limit,
        owner: owner.into(),
        lease: LEASE,
        starvation: None,
        controlled: None,
    }
}

async fn one(db: &TestDb, job: NewJob) -> JobId {
    db.store.enqueue(&job).await.unwrap().id
}

async fn claim1(db: &TestDb, owner: &str) -> ClaimedJob {
    let mut v = db.store.claim(&req("q", 1, owner)).await.unwrap();
    assert_eq!(v.len(), 1, "expected one claimable job");
    v.remove(0)
}

/// Expires every running lease (as if the database clock moved past it).
async fn expire_leases(db: &TestDb) {
    db.exec(
        "UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second' WHERE state = 'running'",
    )
    .await;
}

#[tokio::test]
async fn claim_sets_lease_bumps_attempt_and_respects_order() {
    let db = TestDb::new().await;
    let low = one(&db, NewJob::new("q", "k", json!("low")).priority(10)).await;
    let high = one(&db, NewJob::new("q", "k", json!("high")).priority(-10)).await;
    let mid1 = one(&db, NewJob::new("q", "k", json!("mid1"))).await;
    let mid2 = one(&db, NewJob::new("q", "k", json!("mid2"))).await;
    let _later = one(
        &db,
        NewJob::new("q", "k", json!("later")).delay(Duration::from_secs(600)),
    )
    .await;
    let _other = one(&db, NewJob::new("other", "k", json!("other"))).await;

    let got = db.store.claim(&req("q", 10, "w1")).await.unwrap();
    let mut ids: Vec<JobId> = got.iter().map(|j| j.id).collect();
    // Claim order is priority, run_at, id; the UPDATE's RETURNING order is not, so sort the
    // same way for comparison.
    let order = |id: &JobId| [high, mid1, mid2, low].iter().position(|x| x == id);
    ids.sort_by_key(order);
    assert_eq!(ids, vec![high, mid1, mid2, low]);
    for j in &got {
        assert_eq!(j.attempt, 1);
        assert_eq!(j.queue, "q");
    }
    let rec = db.store.get(high).await.unwrap();
    assert_eq!(rec.state, JobState::Running);
    assert_eq!(rec.lease_owner.as_deref(), Some("w1"));
    let secs = db
        .scalar(&format!(
            "SELECT round(extract(epoch FROM lease_expires_at - now()))::bigint FROM {{schema}}.jobs WHERE id = {}",
            high
        ))
        .await;
    assert!((58..=60).contains(&secs), "{secs}");
    // Nothing else is ready in q: scheduled and other-queue jobs are not claimed.
    assert!(db
        .store
        .claim(&req("q", 10, "w2"))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn claim_takes_at_most_the_limit_and_the_highest_priority_first() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..20)
        .map(|i| NewJob::new("q", "k", json!(i)).priority((i % 5) as i16))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let got = db.store.claim(&req("q", 4, "w")).await.unwrap();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|j| j.priority == 0));
}

#[tokio::test]
async fn complete_is_fenced_on_token_owner_and_lease() {
    let db = TestDb::new().await;
    one(&db, NewJob::new("q", "k", json!(1))).await;
    let j = claim1(&db, "w1").await;
    // Wrong owner.
    let out = db.store.complete_many("w2", &[j.lease()]).await.unwrap();
    assert!(out.applied.is_empty());
    assert_eq!(out.lost[0].reason, LostReason::Expired);
    // Wrong token.
    let stale = Lease {
        id: j.id,
        attempt: j.attempt - 1,
    };
    let out = db.store.complete_many("w1", &[stale]).await.unwrap();
    assert!(out.applied.is_empty());
    assert_eq!(db.store.get(j.id).await.unwrap().state, JobState::Running);
    // Right.
    let out = db.store.complete_many("w1", &[j.lease()]).await.unwrap();
    assert_eq!(out.applied, vec![j.lease()]);
    assert!(out.lost.is_empty());
    let rec = db.store.get(j.id).await.unwrap();
    assert_eq!(rec.state, JobState::Succeeded);
    assert!(rec.finished_at.is_some());
    assert!(rec.lease_owner.is_none());
    // Twice: the second is lost (already finished), never silently applied.
    let out = db.store.complete_many("w1", &[j.lease()]).await.unwrap();
    assert_eq!(
        out.lost[0].reason,
        LostReason::NotRunning(JobState::Succeeded)
    );
}

#[tokio::test]
async fn an_expired_lease_cannot_complete_even_before_the_reaper_runs() {
    let db = TestDb::new().await;
    one(&db, NewJob::new("q", "k", json!(1))).await;
    let j = claim1(&db, "w1").await;
    expire_leases(&db).await;
    let out = db.store.complete_many("w1", &[j.lease()]).await.unwrap();
    assert_eq!(out.lost.len(), 1);
    assert_eq!(out.lost[0].reason, LostReason::Expired);
    let hb = db.store.heartbeat("w1", &[j.lease()], LEASE).await.unwrap();
    assert_eq!(hb.lost.len(), 1);
}

/// The fencing matrix: for each write, a stale token after a reap, and after a re-claim by
/// another owner, gets LeaseLost, changes nothing, and leaves the successor unaffected.
#[tokio::test]
async fn fencing_matrix() {
    #[derive(Debug, Clone, Copy)]
    enum Op {
        Complete,
        Fail,
        Snooze,
        Heartbeat,
        Release,
    }
    for op in [
        Op::Complete,
        Op::Fail,
        Op::Snooze,
        Op::Heartbeat,
        Op::Release,
    ] {
        for reclaimed in [false, true] {
            let db = TestDb::new().await;
            one(
                &db,
                NewJob::new("q", "k", json!(1)).backoff(Backoff {
                    base: Duration::from_millis(1),
                    cap: Duration::from_millis(1),
                }),
            )
            .await;
            let a = claim1(&db, "A").await;
            expire_leases(&db).await;
            let reaped = db.store.reap(100).await.unwrap();
            assert_eq!(reaped.requeued(), 1);
            let mut successor = None;
            if reclaimed {
                db.exec("UPDATE {schema}.jobs SET run_at = now()").await;
                successor = Some(claim1(&db, "B").await);
            }
            let before = db.store.get(a.id).await.unwrap();

            let lost = match op {
                Op::Complete => {
                    db.store
                        .complete_many("A", &[a.lease()])
                        .await
                        .unwrap()
                        .lost
                }
                Op::Fail => {
                    db.store
                        .fail_many(
                            "A",
                            &[Failure {
                                lease: a.lease(),
                                class: FailureClass::Discard,
                                message: "late".into(),
                                retry_in: None,
                            }],
                        )
                        .await
                        .unwrap()
                        .lost
                }
                Op::Snooze => {
                    db.store
                        .snooze_many(
                            "A",
                            &[Snooze {
                                lease: a.lease(),
                                delay: Duration::from_secs(1),
                            }],
                        )
                        .await
                        .unwrap()
                        .lost
                }
                Op::Heartbeat => {
                    db.store
                        .heartbeat("A", &[a.lease()], LEASE)
                        .await
                        .unwrap()
                        .lost
                }
                Op::Release => db.store.release_many("A", &[a.lease()]).await.unwrap().lost,
            };
            assert_eq!(lost.len(), 1, "{op:?} reclaimed={reclaimed}");
            let expected = if reclaimed {
                LostReason::Superseded(2)
            } else {
                LostReason::NotRunning(JobState::Pending)
            };
            assert_eq!(lost[0].reason, expected, "{op:?}");
            let after = db.store.get(a.id).await.unwrap();
            assert_eq!(
                before, after,
                "{op:?} reclaimed={reclaimed}: stale write changed the row"
            );

            if let Some(b) = successor {
                let out = db.store.complete_many("B", &[b.lease()]).await.unwrap();
                assert_eq!(out.applied, vec![b.lease()], "{op:?}: successor blocked");
            }
        }
    }
}

#[tokio::test]
async fn fail_retries_with_backoff_then_dies_with_history() {
    let db = TestDb::new().await;
    let id = one(&db, NewJob::new("q", "k", json!(1)).max_attempts(3)).await;
    for attempt in 1..=3 {
        db.exec("UPDATE {schema}.jobs SET run_at = now() WHERE state = 'pending'")
            .await;
        let j = claim1(&db, "w").await;
        assert_eq!(j.attempt, attempt);
        let out = db
            .store
            .fail_many(
                "w",
                &[Failure {
                    lease: j.lease(),
                    class: FailureClass::Retry,
                    message: format!("boom {attempt}"),
                    retry_in: None,
                }],
            )
            .await
            .unwrap();
        assert_eq!(out.applied.len(), 1);
        let rec = db.store.get(id).await.unwrap();
        if attempt < 3 {
            assert_eq!(rec.state, JobState::Pending);
            // Default backoff: 10 s * 2^(attempt-1), +-25 %.
            let wait = (rec.run_at - chrono::Utc::now()).num_milliseconds() as f64 / 1000.0;
            let nominal = 10.0 * 2f64.powi(attempt - 1);
            assert!(
                wait > nominal * 0.74 && wait < nominal * 1.26,
                "attempt {attempt}: waited {wait}"
            );
        } else {
            assert_eq!(rec.state, JobState::Dead);
            assert!(rec.finished_at.is_some());
        }
    }
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.errors.len(), 3);
    assert_eq!(
        rec.errors
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>(),
        vec!["boom 1", "boom 2", "boom 3"]
    );
    assert_eq!(rec.errors[2].attempt, 3);
    assert_eq!(rec.errors[0].class, "retry");
    assert_eq!(rec.errors[0].owner.as_deref(), Some("w"));
    // Dead jobs are never claimable.
    assert!(db.store.claim(&req("q", 10, "w")).await.unwrap().is_empty());
}

#[tokio::test]
async fn explicit_retry_delay_discard_and_cancel_classes() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..3).map(|i| NewJob::new("q", "k", json!(i))).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let got = db.store.claim(&req("q", 3, "w")).await.unwrap();
    let f = |j: &ClaimedJob, class, retry_in| Failure {
        lease: j.lease(),
        class,
        message: "x".repeat(10_000),
        retry_in,
    };
    let out = db
        .store
        .fail_many(
            "w",
            &[
                f(&got[0], FailureClass::Retry, Some(Duration::from_secs(5))),
                f(&got[1], FailureClass::Discard, None),
                f(&got[2], FailureClass::Cancel, None),
            ],
        )
        .await
        .unwrap();
    assert_eq!(out.applied.len(), 3);
    let r0 = db.store.get(got[0].id).await.unwrap();
    assert_eq!(r0.state, JobState::Pending);
    let wait = (r0.run_at - chrono::Utc::now()).num_milliseconds();
    assert!((3_500..=5_000).contains(&wait), "{wait}");
    // Stored error text is bounded.
    assert!(r0.errors[0].message.len() <= Limits::default().max_error_bytes);
    let r1 = db.store.get(got[1].id).await.unwrap();
    assert_eq!(r1.state, JobState::Dead);
    assert_eq!(r1.errors[0].class, "discard");
    let r2 = db.store.get(got[2].id).await.unwrap();
    assert_eq!(r2.state, JobState::Cancelled);
    assert!(r2.finished_at.is_some());
}

#[tokio::test]
async fn snooze_and_release_do_not_consume_the_retry_budget() {
    let db = TestDb::new().await;
    let id = one(&db, NewJob::new("q", "k", json!(1)).max_attempts(1)).await;
    for _ in 0..3 {
        db.exec("UPDATE {schema}.jobs SET run_at = now()").await;
        let j = claim1(&db, "w").await;
        let out = db
            .store
            .snooze_many(
                "w",
                &[Snooze {
                    lease: j.lease(),
                    delay: Duration::from_secs(30),
                }],
            )
            .await
            .unwrap();
        assert_eq!(out.applied.len(), 1);
        let rec = db.store.get(id).await.unwrap();
        assert_eq!(rec.state, JobState::Pending);
        assert!(rec.run_at > chrono::Utc::now() + chrono::Duration::seconds(25));
        assert!(rec.errors.is_empty(), "a snooze is not an error");
    }
    db.exec("UPDATE {schema}.jobs SET run_at = now()").await;
    let j = claim1(&db, "w").await;
    db.store.release_many("w", &[j.lease()]).await.unwrap();
    let j = claim1(&db, "w").await;
    assert_eq!(j.attempt, 5, "the token still grows on every claim");
    // The one real attempt is still there: a failure now is the first that counts.
    db.store
        .fail_many(
            "w",
            &[Failure {
                lease: j.lease(),
                class: FailureClass::Retry,
                message: "m".into(),
                retry_in: None,
            }],
        )
        .await
        .unwrap();
    assert_eq!(db.store.get(id).await.unwrap().state, JobState::Dead);
}

#[tokio::test]
async fn heartbeat_extends_in_batches_and_reports_cancel_requests() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..5).map(|i| NewJob::new("q", "k", json!(i))).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let got = db.store.claim(&req("q", 5, "w")).await.unwrap();
    let leases: Vec<Lease> = got.iter().map(ClaimedJob::lease).collect();
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() + interval '2 seconds'")
        .await;
    db.store.cancel(got[0].id).await.unwrap();
    let hb = db
        .store
        .heartbeat("w", &leases, Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(hb.extended.len(), 5);
    assert!(hb.lost.is_empty());
    assert_eq!(hb.cancel_requested, vec![got[0].lease()]);
    let min_secs = db
        .scalar("SELECT min(round(extract(epoch FROM lease_expires_at - now())))::bigint FROM {schema}.jobs")
        .await;
    assert!(min_secs >= 118, "{min_secs}");
}

#[tokio::test]
async fn exhausted_jobs_are_never_claimable() {
    let db = TestDb::new().await;
    let id = one(&db, NewJob::new("q", "k", json!(1)).max_attempts(1)).await;
    let _ = claim1(&db, "w").await;
    // The schema itself forbids a pending job without budget.
    let err = sqlx::query(&format!(
        "UPDATE {}.jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL WHERE id = $1",
        db.schema
    ))
    .bind(id.0)
    .execute(&db.pool)
    .await
    .unwrap_err();
    assert!(err.to_string().contains("jobs_pending_has_budget"), "{err}");
    expire_leases(&db).await;
    let r = db.store.reap(10).await.unwrap();
    assert_eq!(r.dead(), 1);
    assert!(db.store.claim(&req("q", 10, "w")).await.unwrap().is_empty());
}

#[tokio::test]
async fn schema_checks_reject_impossible_shapes() {
    let db = TestDb::new().await;
    let id = one(&db, NewJob::new("q", "k", json!(1))).await;
    for (bad, constraint) in [
        ("state = 'running'", "jobs_running_has_lease"),
        ("state = 'succeeded'", "jobs_terminal_has_finished"),
        ("finished_at = now()", "jobs_terminal_has_finished"),
        ("attempt = -1", "jobs_attempt_nonnegative"),
        // A pending row with no budget breaks jobs_pending_has_budget, a CHECK, before the
        // input-rules trigger (migration 0012) reports jobs_max_attempts_positive; on a row
        // that is not pending, the trigger's rule alone applies (hostile.rs covers that).
        ("max_attempts = 0", "jobs_pending_has_budget"),
        ("state = 'lost'", "jobs_state_valid"),
        ("lease_owner = 'w'", "jobs_running_has_lease"),
    ] {
        let err = sqlx::query(&format!(
            "UPDATE {}.jobs SET {bad} WHERE id = $1",
            db.schema
        ))
        .bind(id.0)
        .execute(&db.pool)
        .await
        .unwrap_err();
        assert!(err.to_string().contains(constraint), "{bad}: {err}");
    }
}

/// The worker's claim (claim() with p_async, as sql/claim.sql calls it) commits without
/// waiting for its WAL flush; claim() with its five arguments — a caller's own transaction —
/// and any claim under `docket.durable_claims = on` keep the connection's durability. Read
/// inside one transaction each, where `SHOW` sees what the commit will use.
#[tokio::test]
async fn only_the_workers_own_claim_commits_without_waiting_for_its_flush() {
    let db = TestDb::new().await;
    one(&db, NewJob::new("q", "k", json!(1))).await;
    let mode = |call: &'static str, durable: bool| {
        let db = &db;
        async move {
            let mut tx = db.pool.begin().await.unwrap();
            sqlx::query("SET LOCAL synchronous_commit = on")
                .execute(&mut *tx)
                .await
                .unwrap();
            if durable {
                sqlx::query("SET LOCAL docket.durable_claims = on")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            sqlx::query(&format!("SELECT count(*) FROM {}.{call}", db.schema))
                .execute(&mut *tx)
                .await
                .unwrap();
            let m: String = sqlx::query_scalar("SHOW synchronous_commit")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            tx.rollback().await.unwrap();
            m
        }
    };
    let worker = "claim('q', 1, 'w', 60000, NULL, true)";
    let caller = "claim('q', 1, 'w', 60000, NULL)";
    assert_eq!(mode(worker, false).await, "off");
    assert_eq!(mode(caller, false).await, "on");
    assert_eq!(mode(worker, true).await, "on");
    // The store's claim is the worker's call, and it leases the job as always.
    assert!(
        include_str!("../sql/claim.sql").contains(".claim($1, $2, $3, $4, $5, true, $6, $7, $8)"),
        "sql/claim.sql no longer opts in"
    );
    let j = claim1(&db, "w").await;
    assert_eq!(j.attempt, 1);
}
