//! Runtime lifecycle: LISTEN reconnects, graceful and deadline shutdown, drain mode,
//! in-transaction jobs, leader election.

use crate::common;

use docket_postgres::PgStore;
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::maintenance::Leader;
use docket_worker::{JobContext, JobError, JobResult, Registry, Shutdown, TxJob, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::PgConnection;

fn noop_registry() -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_fn("noop", |_a, _c| async { Ok(()) });
    r
}

async fn listener_backends(db: &TestDb) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}' AND query LIKE 'LISTEN%'",
        db.schema
    ))
    .await
}

/// The listener is terminated: jobs enqueued during and after are still processed (the
/// fallback poll is an hour here, so only a re-established LISTEN or the claim-once after
/// reconnect can pick them up), and LISTEN comes back.
#[tokio::test]
async fn listen_connection_terminated_is_reestablished_and_nothing_is_missed() {
    let db = TestDb::new().await;
    let mut cfg = config("q", 4);
    cfg.poll_interval = Duration::from_secs(3600);
    cfg.maintenance = false;
    let w = start(&db, noop_registry(), cfg).await;
    eventually(Duration::from_secs(10), "LISTEN up", || async {
        listener_backends(&db).await == 1
    })
    .await;
    let first = db
        .store
        .enqueue(&NewJob::new("q", "noop", json!(1)))
        .await
        .unwrap()
        .id;
    eventually(
        Duration::from_secs(10),
        "first job done via NOTIFY",
        || async { db.store.get(first).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    for round in 0..3 {
        let killed = db
            .scalar(&format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{}' AND query LIKE 'LISTEN%'",
                db.schema
            ))
            .await;
        assert_eq!(killed, 1, "round {round}");
        // Enqueued while the listener is down.
        let during = db
            .store
            .enqueue(&NewJob::new("q", "noop", json!(2)))
            .await
            .unwrap()
            .id;
        eventually(
            Duration::from_secs(15),
            "job enqueued during the outage done",
            || async { db.store.get(during).await.unwrap().state == JobState::Succeeded },
        )
        .await;
        eventually(Duration::from_secs(15), "LISTEN back", || async {
            listener_backends(&db).await == 1
        })
        .await;
        let after = db
            .store
            .enqueue(&NewJob::new("q", "noop", json!(3)))
            .await
            .unwrap()
            .id;
        eventually(
            Duration::from_secs(10),
            "job enqueued after reconnect done",
            || async { db.store.get(after).await.unwrap().state == JobState::Succeeded },
        )
        .await;
    }
    let r = w.stop().await;
    assert!(r.metrics.listen_connects >= 4, "{:?}", r.metrics);
}

#[tokio::test]
async fn graceful_shutdown_finishes_jobs_in_flight() {
    let db = TestDb::new().await;
    let mut reg = Registry::default();
    reg.register_fn("slow", |_a, _c| async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(())
    });
    let jobs: Vec<NewJob> = (0..8).map(|i| NewJob::new("q", "slow", json!(i))).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let w = start(&db, reg, config("q", 8)).await;
    eventually(Duration::from_secs(10), "8 running", || async {
        count_state(&db, "running").await == 8
    })
    .await;
    let r = w.stop().await;
    assert_eq!(r.metrics.completed, 8);
    assert_eq!(r.released_at_shutdown, 0);
    assert_eq!(count_state(&db, "succeeded").await, 8);
    assert_eq!(count_state(&db, "running").await, 0);
}

/// Past the shutdown deadline, running jobs are cancelled and released: pending again at
/// once, and the interrupted attempt is not counted against the budget.
#[tokio::test]
async fn shutdown_deadline_releases_jobs_without_consuming_an_attempt() {
    let db = TestDb::new().await;
    let mut reg = Registry::default();
    reg.register_fn("stuck", |_a, ctx: JobContext| async move {
        ctx.cancel.cancelled().await;
        Err(JobError::retry("interrupted"))
    });
    let jobs: Vec<NewJob> = (0..5)
        .map(|i| NewJob::new("q", "stuck", json!(i)).max_attempts(1))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let mut cfg = config("q", 5);
    cfg.shutdown_timeout = Duration::from_millis(300);
    let w = start(&db, reg, cfg).await;
    eventually(Duration::from_secs(10), "5 running", || async {
        count_state(&db, "running").await == 5
    })
    .await;
    let r = w.stop().await;
    assert_eq!(r.released_at_shutdown, 5);
    assert_eq!(count_state(&db, "running").await, 0);
    assert_eq!(count_state(&db, "pending").await, 5);
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs_all WHERE max_attempts = 2 AND run_at <= now() AND errors = '[]'")
            .await,
        5,
        "released: claimable again at once, budget given back, not an error"
    );
}

/// A second signal stops at once: nothing waits for the deadline, and still nothing is left
/// running without a lease that will expire (here: released straight away).
#[tokio::test]
async fn immediate_shutdown_releases_at_once() {
    let db = TestDb::new().await;
    let mut reg = Registry::default();
    reg.register_fn("ignores_cancel", |_a, _c| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    });
    db.store
        .enqueue_many(
            &(0..3)
                .map(|i| NewJob::new("q", "ignores_cancel", json!(i)))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let mut cfg = config("q", 3);
    cfg.shutdown_timeout = Duration::from_secs(3600);
    cfg.cancel_grace = Duration::from_secs(3600);
    let w = start(&db, reg, cfg).await;
    eventually(Duration::from_secs(10), "3 running", || async {
        count_state(&db, "running").await == 3
    })
    .await;
    w.shutdown.graceful.cancel();
    w.shutdown.immediate.cancel();
    let r = tokio::time::timeout(Duration::from_secs(20), w.task)
        .await
        .expect("stops at once")
        .unwrap();
    assert_eq!(r.abandoned, 0);
    assert_eq!(count_state(&db, "running").await, 0);
    assert_eq!(count_state(&db, "pending").await, 3);
}

#[tokio::test]
async fn drain_returns_once_nothing_is_ready_or_running() {
    let db = TestDb::new().await;
    db.store
        .enqueue_many(
            &(0..50)
                .map(|i| NewJob::new("q", "noop", json!(i)))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    // Scheduled for later: does not keep a drain running.
    db.store
        .enqueue(&NewJob::new("q", "noop", json!("later")).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let worker = Worker::new(db.second_store(4).await, noop_registry(), config("q", 8)).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(30), worker.drain(Shutdown::default()))
        .await
        .expect("drain returns")
        .unwrap();
    assert_eq!(r.metrics.completed, 50);
    assert_eq!(count_state(&db, "succeeded").await, 50);
    assert_eq!(count_state(&db, "pending").await, 1);
}

#[derive(Serialize, Deserialize)]
struct Transfer {
    amount: i64,
    fail: bool,
}

impl TxJob<PgStore> for Transfer {
    const KIND: &'static str = "transfer";

    async fn run(self, ctx: JobContext, tx: &mut PgConnection) -> JobResult {
        let schema = ctx.metadata["schema"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        sqlx::query(&format!("INSERT INTO {schema}.ledger (amount) VALUES ($1)"))
            .bind(self.amount)
            .execute(&mut *tx)
            .await?;
        if self.fail {
            return Err(JobError::retry("failed after writing"));
        }
        Ok(())
    }
}

/// In-transaction mode: the handler's insert and the completion commit together; a failure
/// rolls both back and the job goes back to the queue.
#[tokio::test]
async fn in_transaction_jobs_commit_or_roll_back_with_their_completion() {
    let db = TestDb::new().await;
    db.exec("CREATE TABLE {schema}.ledger (amount bigint)")
        .await;
    let meta = json!({ "schema": db.schema });
    let ok = db
        .store
        .enqueue(
            &NewJob::new("q", "transfer", json!({"amount": 10, "fail": false}))
                .metadata(meta.clone()),
        )
        .await
        .unwrap()
        .id;
    let bad = db
        .store
        .enqueue(
            &NewJob::new("q", "transfer", json!({"amount": 99, "fail": true}))
                .metadata(meta.clone()),
        )
        .await
        .unwrap()
        .id;
    let mut reg = Registry::default();
    reg.register_tx::<Transfer>();
    let w = start(&db, reg, config("q", 2)).await;
    eventually(Duration::from_secs(10), "both attempted", || async {
        db.scalar("SELECT count(*) FROM {schema}.jobs_all WHERE attempt = 1 AND state <> 'running'")
            .await
            == 2
    })
    .await;
    let r = w.stop().await;
    assert_eq!(r.metrics.completed, 1);
    assert_eq!(db.store.get(ok).await.unwrap().state, JobState::Succeeded);
    let b = db.store.get(bad).await.unwrap();
    assert_eq!(b.state, JobState::Pending);
    assert_eq!(b.errors[0].message, "failed after writing");
    assert_eq!(db.scalar("SELECT count(*) FROM {schema}.ledger").await, 1);
    assert_eq!(
        db.scalar("SELECT sum(amount)::bigint FROM {schema}.ledger")
            .await,
        10
    );
}

/// Two candidates, one leader; the leader resigns, the other takes over; a leader that stops
/// renewing (crashed, paused, cut off) is replaced once its row expires, and the stale one
/// learns it lost on its next attempt.
#[tokio::test]
async fn leader_election_hands_over() {
    let db = TestDb::new().await;
    let ttl = Duration::from_secs(60);
    let a = Leader::new(db.second_store(1).await, "A", ttl);
    let b = Leader::new(db.second_store(1).await, "B", ttl);
    assert!(a.run_once().await);
    assert!(!b.run_once().await);
    assert!(a.run_once().await, "A renews");
    assert!(!b.run_once().await);
    assert!(a.is_leader() && !b.is_leader());
    a.resign().await;
    assert!(!a.is_leader());
    assert!(b.run_once().await, "B takes over at once after A resigns");
    assert!(!a.run_once().await);
    // B stops renewing (SIGSTOP, network split): its row expires by the database clock.
    db.exec("UPDATE {schema}.leader SET expires_at = now() - interval '1 second'")
        .await;
    assert!(a.run_once().await, "A takes over the expired row");
    assert!(!b.run_once().await, "B learns it lost");
    assert!(a.is_leader() && !b.is_leader());
}

/// Two whole workers: exactly one leads, and only the leader reaps (the other's reaper
/// counter stays at zero while an expired lease is taken back); when the leader stops, the
/// other leads and reaps.
#[tokio::test]
async fn only_the_leader_reaps_and_the_other_takes_over() {
    let db = TestDb::new().await;
    let w1 = start(&db, noop_registry(), config("q", 1)).await;
    let w2 = start(&db, noop_registry(), config("q", 1)).await;
    eventually(Duration::from_secs(10), "a leader", || async {
        w1.worker.is_leader() || w2.worker.is_leader()
    })
    .await;
    assert!(w1.worker.is_leader() != w2.worker.is_leader());
    let (leader, other) = if w1.worker.is_leader() {
        (w1, w2)
    } else {
        (w2, w1)
    };
    let reaped = |r: &Running| {
        r.worker
            .metrics()
            .reaped
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    // A crashed worker's expired lease.
    let crashed_lease = |n: i64| {
        let db = &db;
        async move {
            db.store
                .enqueue(&NewJob::new("elsewhere", "noop", json!(n)))
                .await
                .unwrap();
            db.store
                .claim(&ClaimRequest {
                    queue: "elsewhere".into(),
                    limit: 1,
                    owner: "crashed".into(),
                    lease: Duration::from_secs(60),
                    starvation: None,
                    controlled: None,
                })
                .await
                .unwrap();
            db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second' WHERE state = 'running'")
                .await;
        }
    };
    crashed_lease(1).await;
    // The reaper counts after its transaction commits: wait for the count, not only the row
    // (the row is seen requeued a moment before the counter moves).
    eventually(Duration::from_secs(10), "reaped by the leader", || async {
        count_state(&db, "running").await == 0 && reaped(&leader) + reaped(&other) >= 1
    })
    .await;
    assert_eq!(reaped(&leader), 1);
    assert_eq!(reaped(&other), 0, "a worker that does not lead never reaps");
    leader.stop().await;
    eventually(Duration::from_secs(10), "the other leads", || async {
        other.worker.is_leader()
    })
    .await;
    crashed_lease(2).await;
    eventually(
        Duration::from_secs(10),
        "reaped by the new leader",
        || async { count_state(&db, "running").await == 0 && reaped(&other) >= 1 },
    )
    .await;
    assert_eq!(reaped(&other), 1);
    other.stop().await;
}

/// A leader that loses its database connection gives up leadership on its own (its renewal
/// fails), and another candidate takes over once the row expires.
#[tokio::test]
async fn a_leader_cut_off_from_the_database_gives_up_leadership() {
    let db = TestDb::new().await;
    let proxy = docket_testkit::proxy::Proxy::in_front_of(&db.url).await;
    let cut_store = docket_postgres::PgStore::with_schema(
        docket_testkit::pool(&proxy.url(&db.url), &db.schema, 2).await,
        &db.schema,
    )
    .unwrap();
    let ttl = Duration::from_secs(1);
    let a = Leader::new(cut_store, "A", ttl);
    let b = Leader::new(db.second_store(1).await, "B", ttl);
    assert!(a.run_once().await);
    assert!(!b.run_once().await);
    proxy.cut();
    assert!(
        !a.run_once().await,
        "a renewal that cannot reach the database fails"
    );
    assert!(!a.is_leader(), "and A stops leading at once");
    eventually(
        Duration::from_secs(10),
        "B takes over after the row expires",
        || async { b.run_once().await },
    )
    .await;
    proxy.heal();
}

/// The leader prunes on its own, in bounded batches: 35 succeeded jobs past their retention
/// and 3 dead ones past theirs go, each deleting transaction removing at most `batch` (10)
/// rows; recent successes and the running job stay.
#[tokio::test]
async fn the_leader_prunes_by_itself_in_bounded_batches() {
    let db = TestDb::new().await;
    docket_testkit::checker::install_audit(&db).await;
    db.store
        .enqueue_many(
            &(0..43)
                .map(|i| NewJob::new("done", "noop", json!(i)))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    // 35 finished two hours ago, 5 just now, 3 dead two days ago; one job still running.
    db.exec(
        "UPDATE {schema}.jobs SET state = 'succeeded', finished_at = now() - interval '2 hours'
         WHERE id <= 35;
         ",
    )
    .await;
    db.exec("UPDATE {schema}.jobs SET state = 'succeeded', finished_at = now() WHERE id BETWEEN 36 AND 40")
        .await;
    db.exec("UPDATE {schema}.jobs SET state = 'dead', finished_at = now() - interval '2 days' WHERE id > 40")
        .await;
    db.store
        .enqueue(&NewJob::new("q", "hold", json!(0)))
        .await
        .unwrap();
    let mut reg = Registry::default();
    reg.register_fn("hold", |_a, ctx: JobContext| async move {
        ctx.cancel.cancelled().await;
        Ok(())
    });
    let mut c = config("q", 1);
    c.prune_interval = Duration::from_millis(200);
    c.retention = Retention {
        finished: Duration::from_secs(3600),
        dead: Duration::from_secs(24 * 3600),
        batch: 10,
        ..Retention::default()
    };
    let w = start(&db, reg, c).await;
    // Pruning and the claim of the held job race (the leader may prune before the claim
    // loop's first round trip on a loaded machine), so both are awaited; the assertions
    // below then check that the prune spared the running job.
    eventually(
        Duration::from_secs(30),
        "the leader pruned and the held job runs",
        || async {
            db.scalar("SELECT count(*) FROM {schema}.jobs_all").await == 6
                && count_state(&db, "running").await == 1
        },
    )
    .await;
    assert_eq!(count_state(&db, "running").await, 1);
    assert_eq!(count_state(&db, "succeeded").await, 5);
    assert_eq!(count_state(&db, "dead").await, 0);
    let biggest = db
        .scalar("SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {schema}.audit WHERE op = 'D' GROUP BY tx) t")
        .await;
    let batches = db
        .scalar("SELECT count(DISTINCT tx) FROM {schema}.audit WHERE op = 'D'")
        .await;
    assert!(biggest <= 10, "a prune transaction deleted {biggest} rows");
    assert!(
        batches >= 5,
        "38 rows in batches of 10 take at least 5 deletes, saw {batches}"
    );
    w.shutdown.immediate.cancel();
    let _ = w.stop().await;
}

/// A claim lost in a server crash (claims commit without waiting for their WAL flush) leaves
/// the row as it was before the claim — pending, the attempt it had, no lease — while the
/// worker still runs the job. The worker then claims it again under the same owner and
/// token; it must not start a second execution of that token: the running one keeps the job
/// and its outcome is written against the new claim. The crash's effect on the row is
/// written directly here (what recovery leaves), so the test needs no crash to be exact.
#[tokio::test]
async fn a_job_reclaimed_after_a_lost_claim_runs_once_per_token() {
    let db = TestDb::new().await;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut reg = Registry::default();
    let (r2, rel) = (runs.clone(), release.clone());
    reg.register_fn("held", move |_a, _ctx: JobContext| {
        let (r2, rel) = (r2.clone(), rel.clone());
        async move {
            r2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            rel.notified().await;
            Ok(())
        }
    });
    let id = db
        .store
        .enqueue(&NewJob::new("q", "held", json!(0)))
        .await
        .unwrap()
        .id;
    // No heartbeat between the "recovery" and the second claim: a heartbeat that found the
    // row unleased would end the execution as lease-lost, which is right but not this case.
    let mut c = config("q", 2).lease(Duration::from_secs(600));
    c.heartbeat_interval = Duration::from_secs(500);
    c.maintenance = false;
    let w = start(&db, reg, c).await;
    eventually(Duration::from_secs(10), "the job runs", || async {
        runs.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    let owner: String = sqlx::query_scalar(&format!(
        "SELECT lease_owner FROM {}.jobs WHERE id = $1",
        db.schema
    ))
    .bind(id.0)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    // What a crash that lost the claim leaves behind.
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET state = 'pending', attempt = attempt - 1, lease_owner = NULL,
         lease_expires_at = NULL, attempted_at = NULL WHERE id = {}",
        id.0
    ))
    .await;
    eventually(Duration::from_secs(10), "claimed again by the same worker", || async {
        db.scalar(&format!(
            "SELECT count(*) FROM {{schema}}.jobs WHERE id = {} AND state = 'running' AND attempt = 1 AND lease_owner = '{owner}'",
            id.0
        ))
        .await
            == 1
    })
    .await;
    release.notify_waiters();
    eventually(Duration::from_secs(10), "the job succeeded", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one token, one execution"
    );
    assert_eq!(db.store.get(id).await.unwrap().attempt, 1);
    w.shutdown.immediate.cancel();
    let _ = w.stop().await;
}
