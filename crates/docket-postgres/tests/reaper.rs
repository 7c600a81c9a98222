//! The reaper: expired leases back to the queue or to dead, in bounded SKIP LOCKED batches,
//! never overwriting a job that finished meanwhile.

use std::time::Duration;

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::json;

async fn claim_all(db: &TestDb, owner: &str, n: i32) -> Vec<ClaimedJob> {
    db.store
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: n,
            owner: owner.into(),
            lease: Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn reaps_only_expired_leases_requeues_with_backoff_or_kills_when_exhausted() {
    let db = TestDb::new().await;
    let a = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(1)))
        .await
        .unwrap()
        .id;
    let b = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(2)).max_attempts(1))
        .await
        .unwrap()
        .id;
    let c = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(3)))
        .await
        .unwrap()
        .id;
    claim_all(&db, "crashed", 3).await;
    // a and b expired; c is still leased.
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET lease_expires_at = now() - interval '1 second' WHERE id IN ({a}, {b})"
    ))
    .await;
    let r = db.store.reap(100).await.unwrap();
    assert_eq!(r.jobs.len(), 2);
    assert_eq!(r.requeued(), 1);
    assert_eq!(r.dead(), 1);
    assert!(r.jobs.iter().all(|j| j.owner == "crashed"));

    let ja = db.store.get(a).await.unwrap();
    assert_eq!(ja.state, JobState::Pending);
    assert!(ja.run_at > chrono::Utc::now(), "requeued with backoff");
    assert_eq!(ja.errors.len(), 1);
    assert_eq!(ja.errors[0].class, "lease_expired");
    assert_eq!(ja.errors[0].owner.as_deref(), Some("crashed"));
    let jb = db.store.get(b).await.unwrap();
    assert_eq!(jb.state, JobState::Dead);
    assert!(jb.errors[0].message.contains("lease expired"));
    assert_eq!(db.store.get(c).await.unwrap().state, JobState::Running);
    // Nothing left to reap.
    assert!(db.store.reap(100).await.unwrap().jobs.is_empty());
}

#[tokio::test]
async fn reaps_in_bounded_batches() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..250).map(|i| NewJob::new("q", "k", json!(i))).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    claim_all(&db, "w", 250).await;
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    let sizes = [
        db.store.reap(100).await.unwrap().jobs.len(),
        db.store.reap(100).await.unwrap().jobs.len(),
        db.store.reap(100).await.unwrap().jobs.len(),
        db.store.reap(100).await.unwrap().jobs.len(),
    ];
    assert_eq!(sizes, [100, 100, 50, 0]);
}

/// A completion in flight holds the row lock: once the lease has expired by the database
/// clock, the reaper skips the row instead of waiting or overwriting, and the completion
/// stands.
#[tokio::test]
async fn reaper_never_overwrites_a_completion_in_flight() {
    let db = TestDb::new().await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!(1)))
        .await
        .unwrap();
    let j = claim_all(&db, "w", 1).await.remove(0);
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = clock_timestamp() + interval '300 milliseconds'")
        .await;
    // The completer matched the row while the lease was valid, and has not committed yet.
    let mut tx = db.pool.begin().await.unwrap();
    let n = sqlx::query(&db.store.queries().complete_many)
        .bind(vec![j.id.0])
        .bind(vec![j.attempt])
        .bind("w")
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(n, 1);
    // Wait for the database clock (not ours) to pass the lease.
    while db
        .scalar("SELECT count(*) FROM {schema}.jobs WHERE lease_expires_at >= clock_timestamp()")
        .await
        > 0
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The row is a reaper candidate now, but locked: SKIP LOCKED passes it by at once.
    let r = tokio::time::timeout(Duration::from_secs(5), db.store.reap(10))
        .await
        .expect("the reaper must not wait on a locked row")
        .unwrap();
    assert!(r.jobs.is_empty());
    tx.commit().await.unwrap();
    assert_eq!(db.store.get(j.id).await.unwrap().state, JobState::Succeeded);
    assert!(db.store.reap(10).await.unwrap().jobs.is_empty());
}

/// Race many completions against the reaper on leases that expire right at that moment:
/// every job ends either succeeded (completion won, reaper skipped it) or re-queued (reaper
/// won, completion was fenced off) — never both, never a lost update.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn completions_racing_the_reaper_are_all_or_nothing() {
    let db = TestDb::with_pool_size(8).await;
    let jobs: Vec<NewJob> = (0..400)
        .map(|i| {
            NewJob::new("q", "k", json!(i)).backoff(Backoff {
                base: Duration::from_secs(3600),
                cap: Duration::from_secs(3600),
            })
        })
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let claimed = claim_all(&db, "w", 400).await;
    // Leases expire 300 ms from now, in the middle of the race.
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() + interval '300 milliseconds'")
        .await;
    let store = db.store.clone();
    let completer = tokio::spawn(async move {
        let mut applied = Vec::new();
        for chunk in claimed.chunks(5) {
            let leases: Vec<Lease> = chunk.iter().map(ClaimedJob::lease).collect();
            applied.extend(store.complete_many("w", &leases).await.unwrap().applied);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        applied
    });
    let store = db.store.clone();
    let reaper = tokio::spawn(async move {
        let mut reaped = Vec::new();
        for _ in 0..400 {
            reaped.extend(store.reap(20).await.unwrap().jobs);
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        reaped
    });
    let applied = completer.await.unwrap();
    let reaped = reaper.await.unwrap();
    reaped.iter().for_each(|r| {
        assert!(
            !applied.iter().any(|a| a.id == r.id),
            "job {} both completed and reaped",
            r.id
        )
    });
    let succeeded = db
        .scalar("SELECT coalesce(sum(n), 0)::bigint FROM {schema}.jobs_succeeded")
        .await;
    let pending = db
        .scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'pending'")
        .await;
    let running = db
        .scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'running'")
        .await;
    assert_eq!(succeeded as usize, applied.len());
    assert_eq!(pending as usize + running as usize, 400 - applied.len());
    // After the race every expired lease is reaped eventually.
    while !db.store.reap(100).await.unwrap().jobs.is_empty() {}
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'running'")
            .await,
        0
    );
}

/// A maintenance leader cut off (the network goes silent, the sockets stay open) inside a cron
/// schedule's transaction — after its compare-and-set took the schedule's row, before its
/// commit — leaves that transaction open on the server. Docket bounds how long its own
/// transactions may sit idle (`docket_postgres::store::IDLE_TRANSACTION_TIMEOUT`), so the
/// server ends the silent one, its enqueue rolls back and the row is released: the next leader
/// enqueues the tick, once. Without the bound the next leader waits on the row for as long as
/// TCP keeps the dead connection (found by `crates/docket-cli/tests/partition.rs`). The cut
/// lands between the two statements deterministically: a table lock held by the test stops
/// the old leader's insert until the proxy is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_inside_a_cron_transaction_does_not_hold_the_schedule() {
    use docket_testkit::proxy::Proxy;
    let db = TestDb::new().await;
    let def =
        Periodic::new("tick", "* * * * * *", "c", "tick", json!({})).missed(MissedTicks::Latest);
    db.store.upsert_periodic(&def).await.unwrap();
    db.exec("UPDATE {schema}.periodic SET next_tick_at = now() - interval '1 second'")
        .await;
    let proxy = Proxy::in_front_of(&db.url).await;
    let old = docket_postgres::PgStore::connect(&proxy.url(&db.url), &db.schema, 2)
        .await
        .unwrap();
    // The test's lock on the jobs table: the old leader's schedule update goes through, its
    // insert waits.
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query(&format!("LOCK TABLE {}.jobs IN EXCLUSIVE MODE", db.schema))
        .execute(&mut *holder)
        .await
        .unwrap();
    let holder_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    let stuck = tokio::spawn(async move { old.enqueue_due_periodic(10).await });
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE {holder_pid} = ANY(pg_blocking_pids(pid))"
    );
    docket_testkit::eventually(
        Duration::from_secs(10),
        "the old leader's insert waits on the table lock",
        || async { db.scalar(&waiting).await == 1 },
    )
    .await;
    let held = db
        .scalar(&format!(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
             WHERE c.relname = 'periodic' AND l.mode = 'RowExclusiveLock'
               AND c.relnamespace = '{}'::regnamespace",
            db.schema
        ))
        .await;
    assert_eq!(held, 1, "the old leader's transaction holds the schedule");
    proxy.cut();
    holder.commit().await.unwrap();
    let started = std::time::Instant::now();
    let bound = docket_postgres::store::IDLE_TRANSACTION_TIMEOUT;
    let ticks = tokio::time::timeout(bound * 4, db.store.enqueue_due_periodic(10))
        .await
        .expect("the next leader waited on the schedule's row past four idle bounds")
        .unwrap();
    let took = started.elapsed();
    assert_eq!(
        ticks.len(),
        1,
        "the next leader enqueued the tick: {ticks:?}"
    );
    assert!(
        took >= bound - Duration::from_millis(500),
        "the schedule was free after {took:?}, before the bound of {bound:?}"
    );
    let jobs = db
        .scalar("SELECT count(*) FROM {schema}.jobs WHERE kind = 'tick'")
        .await;
    assert_eq!(
        jobs, 1,
        "the old leader's enqueue rolled back; the tick is there once"
    );
    assert!(
        !stuck.is_finished(),
        "the old leader still waits on its silent link"
    );
    stuck.abort();
    println!("the schedule's row was free {took:?} after the old leader's link went silent");
}
