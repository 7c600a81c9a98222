//! The prefetch buffer: jobs claimed ahead of free slots are leased and heartbeated, go back
//! to the queue uncounted at shutdown and after waiting too long, never start once their
//! lease is lost, and do not let one worker hoard a backlog another could run.

mod common;

use docket_postgres::PgStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{JobContext, Registry, Shutdown, Worker};
use serde_json::json;

/// Kind "hold": records (id, attempt), then waits until released (or cancelled).
fn holding(
    seen: Arc<Mutex<Vec<(i64, i32)>>>,
    release: Arc<tokio::sync::Notify>,
) -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_fn("hold", move |_, ctx: JobContext| {
        let (seen, release) = (seen.clone(), release.clone());
        async move {
            seen.lock().unwrap().push((ctx.id.0, ctx.attempt));
            tokio::select! {
                _ = release.notified() => {}
                _ = ctx.cancel.cancelled() => {}
            }
            Ok(())
        }
    });
    r
}

async fn row(db: &TestDb, id: i64) -> (String, i32, i32, bool) {
    sqlx::query_as(&format!(
        "SELECT state, attempt, max_attempts, lease_owner IS NOT NULL FROM {}.jobs WHERE id = $1",
        db.schema
    ))
    .bind(id)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_jobs_are_leased_and_go_back_uncounted_at_shutdown() {
    let db = TestDb::new().await;
    let ids: Vec<i64> = {
        let jobs: Vec<NewJob> = (0..5)
            .map(|i| NewJob::new("q", "hold", json!({ "i": i })))
            .collect();
        db.store
            .enqueue_many(&jobs)
            .await
            .unwrap()
            .iter()
            .map(|e| e.id.0)
            .collect()
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Notify::new());
    let mut cfg = config("q", 1);
    cfg.prefetch = 4;
    cfg.prefetch_timeout = Duration::from_secs(60);
    cfg.shutdown_timeout = Duration::from_secs(20);
    let w = start(&db, holding(seen.clone(), release.clone()), cfg).await;
    // One runs, four wait in the buffer: all five are running (leased) in the database.
    eventually(
        Duration::from_secs(20),
        "one started, five leased",
        || async {
            seen.lock().unwrap().len() == 1
                && db
                    .scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'running'")
                    .await
                    == 5
        },
    )
    .await;
    // Heartbeats cover the buffered ones too.
    let beat = w.worker.heartbeat_once().await;
    assert_eq!(beat.extended, 5);
    // Graceful shutdown: the buffer goes back at once, while the running job may finish.
    let stopping = {
        let s = w.shutdown.clone();
        tokio::spawn(async move { s.graceful.cancel() })
    };
    stopping.await.unwrap();
    let running = seen.lock().unwrap()[0].0;
    eventually(Duration::from_secs(20), "buffer released", || async {
        let mut back = 0;
        for &id in &ids {
            if id != running && row(&db, id).await.0 == "pending" {
                back += 1;
            }
        }
        back == 4
    })
    .await;
    for &id in ids.iter().filter(|&&id| id != running) {
        let (state, attempt, max, leased) = row(&db, id).await;
        assert_eq!((state.as_str(), leased), ("pending", false));
        // The claim's attempt was given back with the budget: 1 of 26 (25 + 1).
        assert_eq!((attempt, max), (1, 26), "job {id}");
    }
    release.notify_waiters();
    w.task.await.unwrap();
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "no buffered job started during shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_waits_too_long_in_the_buffer_goes_back_to_the_queue() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..3)
        .map(|i| NewJob::new("q", "hold", json!({ "i": i })))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Notify::new());
    let mut cfg = config("q", 1);
    cfg.prefetch = 2;
    cfg.prefetch_timeout = Duration::from_millis(300);
    let w = start(&db, holding(seen.clone(), release.clone()), cfg).await;
    eventually(Duration::from_secs(20), "first started", || async {
        seen.lock().unwrap().len() == 1
    })
    .await;
    // The slot stays busy: the two buffered jobs are released (not run, not counted), and
    // the depth halves so they are not claimed straight back.
    eventually(Duration::from_secs(20), "buffered released", || async {
        db.scalar(
            "SELECT count(*) FROM {schema}.jobs WHERE state = 'pending' AND max_attempts = 26",
        )
        .await
            >= 2
    })
    .await;
    assert_eq!(seen.lock().unwrap().len(), 1);
    eventually(Duration::from_secs(20), "all done", || async {
        release.notify_waiters();
        count_state(&db, "succeeded").await == 3
    })
    .await;
    // Every job ran once, each at the attempt it was claimed with.
    let by_job: HashMap<i64, usize> =
        seen.lock()
            .unwrap()
            .iter()
            .fold(HashMap::new(), |mut m, (id, _)| {
                *m.entry(*id).or_default() += 1;
                m
            });
    assert!(by_job.values().all(|&n| n == 1), "{by_job:?}");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffered_job_never_starts_once_its_lease_is_lost() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..2)
        .map(|i| NewJob::new("q", "hold", json!({ "i": i })))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Notify::new());
    let mut cfg = config("q", 1);
    cfg.prefetch = 1;
    cfg.prefetch_timeout = Duration::from_secs(60);
    cfg.maintenance = false;
    let w = start(&db, holding(seen.clone(), release.clone()), cfg).await;
    eventually(
        Duration::from_secs(20),
        "one running, one buffered",
        || async {
            seen.lock().unwrap().len() == 1
                && db
                    .scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'running'")
                    .await
                    == 2
        },
    )
    .await;
    let running = seen.lock().unwrap()[0].0;
    let buffered: i64 = db
        .scalar(&format!(
            "SELECT id FROM {{schema}}.jobs WHERE id <> {running}"
        ))
        .await;
    // The buffered job's lease runs out and the reaper gives it to another claim.
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = {buffered}"
    ))
    .await;
    assert_eq!(db.store.reap(10).await.unwrap().requeued(), 1);
    let beat = w.worker.heartbeat_once().await;
    assert_eq!(beat.lost, 1, "the heartbeat finds the buffered lease gone");
    // The slot frees: the stale buffered claim must not run (attempt 1 of that job, never).
    release.notify_waiters();
    eventually(
        Duration::from_secs(20),
        "the job ran on its new claim",
        || async {
            seen.lock()
                .unwrap()
                .iter()
                .any(|&(id, a)| id == buffered && a == 2)
        },
    )
    .await;
    release.notify_waiters();
    assert!(
        !seen.lock().unwrap().contains(&(buffered, 1)),
        "a buffered job started after its lease was lost: {:?}",
        seen.lock().unwrap()
    );
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_draining_one_backlog_both_stay_busy() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..600)
        .map(|i| NewJob::new("q", "work", json!({ "i": i })))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut r = Registry::default();
        r.register_fn("work", |_, _| async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(())
        });
        let w = Arc::new(Worker::new(db.second_store(6).await, r, config("q", 4)).unwrap());
        runs.push(tokio::spawn(async move {
            w.drain(Shutdown::default()).await.unwrap()
        }));
    }
    let mut done = Vec::new();
    for r in runs {
        done.push(r.await.unwrap().metrics.completed);
    }
    assert_eq!(done.iter().sum::<u64>(), 600);
    // With 4 slots × 5 ms each worker runs ~800 jobs/s: neither may sit idle while the other
    // holds the backlog in its buffer.
    assert!(
        done.iter().all(|&n| n >= 150),
        "completed per worker: {done:?}"
    );
}
