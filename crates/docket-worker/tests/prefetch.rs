//! The prefetch buffer: jobs claimed ahead of free slots are leased and heartbeated, go back
//! to the queue uncounted at shutdown and after waiting too long, never start once their
//! lease is lost, and do not let one worker hoard a backlog another could run.

use crate::common;

use docket_postgres::PgStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{JobContext, Registry, Shutdown, Worker};
use serde_json::json;

/// Kind "hold": records (id, attempt), then waits until released (or cancelled). Kind
/// "quick" returns at once (see [`prime`]).
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
    r.register_fn("quick", |_, _| async { Ok(()) });
    r
}

/// Runs `n` quick jobs through the worker first: nothing is buffered before the handlers'
/// pace is known, and quick handlers let the buffer grow to its `prefetch`.
async fn prime(db: &TestDb, n: usize) {
    let jobs: Vec<NewJob> = (0..n)
        .map(|_| NewJob::new("q", "quick", json!({})))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    eventually(Duration::from_secs(20), "quick jobs done", || async {
        db.scalar(
            "SELECT count(*) FROM {schema}.jobs_all WHERE kind = 'quick' AND state = 'succeeded'",
        )
        .await
            == n as i64
    })
    .await;
}

async fn row(db: &TestDb, id: i64) -> (String, i32, i32, bool) {
    sqlx::query_as(&format!(
        "SELECT state, attempt, max_attempts, lease_owner IS NOT NULL FROM {}.jobs_all WHERE id = $1",
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
    let seen = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Notify::new());
    let mut cfg = config("q", 1);
    cfg.prefetch = 4;
    cfg.prefetch_timeout = Duration::from_secs(60);
    cfg.shutdown_timeout = Duration::from_secs(20);
    let w = start(&db, holding(seen.clone(), release.clone()), cfg).await;
    prime(&db, 40).await;
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
        // The claim's token stays spent and its budget was given back: 1 of 26 (25 + 1),
        // one claim released, so a user sees 0 runs of 25.
        assert_eq!((attempt, max), (1, 26), "job {id}");
        let rec = db.store.get(JobId(id)).await.unwrap();
        assert_eq!(
            (rec.released, rec.runs(), rec.max_runs()),
            (1, 0, 25),
            "job {id}"
        );
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
    let seen = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Notify::new());
    let mut cfg = config("q", 1);
    cfg.prefetch = 2;
    cfg.prefetch_timeout = Duration::from_millis(300);
    let w = start(&db, holding(seen.clone(), release.clone()), cfg).await;
    prime(&db, 40).await;
    let jobs: Vec<NewJob> = (0..3)
        .map(|i| NewJob::new("q", "hold", json!({ "i": i })))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
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
        db.scalar(
            "SELECT count(*) FROM {schema}.jobs_all WHERE kind = 'hold' AND state = 'succeeded'",
        )
        .await
            == 3
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
    let seen = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Notify::new());
    let mut cfg = config("q", 1);
    cfg.prefetch = 1;
    cfg.prefetch_timeout = Duration::from_secs(60);
    cfg.maintenance = false;
    cfg.presence_interval = Duration::from_millis(100);
    let w = start(&db, holding(seen.clone(), release.clone()), cfg).await;
    prime(&db, 40).await;
    let jobs: Vec<NewJob> = (0..2)
        .map(|i| NewJob::new("q", "hold", json!({ "i": i })))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
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
    // The database says `running` for both; the worker's report tells them apart per queue.
    eventually(
        Duration::from_secs(20),
        "the registry shows one job of q buffered",
        || async {
            db.store.workers().await.unwrap().iter().any(|w| {
                w.beat.buffered == 1 && w.beat.buffered_in("q") == 1 && w.beat.in_flight == 2
            })
        },
    )
    .await;
    let running = seen.lock().unwrap()[0].0;
    let buffered: i64 = db
        .scalar(&format!(
            "SELECT id FROM {{schema}}.jobs WHERE id <> {running} AND kind = 'hold'"
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
            // Its second claim: the reaper counted the lost one as a run (it cannot tell a
            // buffered claim from a crashed run).
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

/// Keyed work is claimed only for free run slots, however deep the buffer has grown: a
/// buffered keyed job would hold its key (its tenant's limit, its ordering key's turn) for
/// work that is not executing. The worker's buffer is first grown to its full `prefetch` by
/// quick jobs; then 100 keyed jobs of 20 ms drain through 2 slots while the database's
/// count of running keyed jobs is sampled. Executing jobs plus completions not yet written
/// stay within a few times the slots (the completions' share grows while a loaded machine
/// delays the completer's batch: 5 seen once in CI with four test threads); a buffer of keyed
/// work would hold dozens (the `controlled_work_buffered` mutant).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_work_is_claimed_only_for_free_slots() {
    let db = TestDb::new().await;
    let mut r = Registry::default();
    r.register_fn("quick", |_, _| async { Ok(()) });
    // Each run, as it starts, reads how many keyed jobs the database holds running (its own
    // included): the buffer's keyed jobs would be among them.
    let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
    let schema = db.schema.clone();
    let s = seen.clone();
    r.register_fn("keyed", move |_, ctx: JobContext| {
        let (s, schema) = (s.clone(), schema.clone());
        async move {
            let store = ctx.store::<PgStore>().expect("a PostgreSQL worker");
            let running: i64 = sqlx::query_scalar(&format!(
                "SELECT count(*) FROM {schema}.jobs WHERE kind = 'keyed' AND state = 'running'"
            ))
            .fetch_one(store.pool())
            .await
            .map_err(|e| docket_worker::JobError::retry(e.to_string()))?;
            s.lock().unwrap().push(running);
            // The job's work.
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(())
        }
    });
    let mut cfg = config("q", 2);
    cfg.prefetch = 600;
    let w = start(&db, r, cfg).await;
    prime(&db, 300).await;
    let jobs: Vec<NewJob> = (0..100)
        .map(|i| NewJob::new("q", "keyed", json!({ "i": i })).concurrency_key(format!("k{i}")))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    eventually(Duration::from_secs(60), "the keyed jobs done", || async {
        db.scalar(
            "SELECT count(*) FROM {schema}.jobs_all WHERE kind = 'keyed' AND state = 'succeeded'",
        )
        .await
            == 100
    })
    .await;
    let report = w.stop().await;
    let most = seen.lock().unwrap().iter().copied().max().unwrap_or(0);
    assert!(most <= 12, "keyed jobs running at once (slots 2): {most}");
    assert_eq!(report.metrics.released, 0, "nothing waited out the buffer");
}

/// The churn an operator met: three slots, handlers of 0.1-0.3 s, every job keyed by one of
/// four tenants with a limit of one each, two workers. Nothing is released (claimed only to
/// wait and go back), and every job ran once, at attempt 1 of its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_keyed_handlers_do_not_churn() {
    let db = TestDb::new().await;
    for t in 0..4 {
        db.store
            .set_key_limit(&KeyLimit {
                key: format!("tenant-{t}"),
                max_running: Some(1),
                rate: None,
            })
            .await
            .unwrap();
    }
    let jobs: Vec<NewJob> = (0..40)
        .map(|i| {
            NewJob::new("q", "slow", json!({ "ms": 100 + (i * 37) % 200 }))
                .concurrency_key(format!("tenant-{}", i % 4))
        })
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let seen: Arc<Mutex<Vec<(i32, i32)>>> = Arc::default();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut r = Registry::default();
        let seen = seen.clone();
        r.register_fn("slow", move |args: serde_json::Value, ctx: JobContext| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((ctx.attempt, ctx.max_attempts));
                let ms = args["ms"].as_u64().unwrap_or(100);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(())
            }
        });
        let w = Arc::new(Worker::new(db.second_store(6).await, r, config("q", 3)).unwrap());
        runs.push(tokio::spawn(async move {
            w.drain(Shutdown::default()).await.unwrap()
        }));
    }
    let mut released = 0;
    for r in runs {
        released += r.await.unwrap().metrics.released;
    }
    assert_eq!(released, 0, "jobs claimed only to go back");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 40);
    assert!(
        seen.iter().all(|&s| s == (1, 25)),
        "attempts seen: {seen:?}"
    );
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM {schema}.jobs_all WHERE state = 'succeeded' AND released = 0"
        )
        .await,
        40
    );
}

/// A claim given back unrun does not count as an attempt: a job that snoozes once is on its
/// first run at its next claim, of the budget it was enqueued with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempt_a_handler_sees_counts_runs() {
    let db = TestDb::new().await;
    let seen: Arc<Mutex<Vec<(i32, i32)>>> = Arc::default();
    let mut r = Registry::default();
    let s = seen.clone();
    r.register_fn("snoozy", move |_, ctx: JobContext| {
        let s = s.clone();
        async move {
            let first = {
                let mut s = s.lock().unwrap();
                s.push((ctx.attempt, ctx.max_attempts));
                s.len() == 1
            };
            if first {
                return Err(docket_worker::JobError::Snooze(Duration::ZERO));
            }
            Ok(())
        }
    });
    let id = db
        .store
        .enqueue(&NewJob::new("q", "snoozy", json!({})).max_attempts(3))
        .await
        .unwrap()
        .id;
    let w = start(&db, r, config("q", 1)).await;
    eventually(Duration::from_secs(20), "done", || async {
        count_state(&db, "succeeded").await == 1
    })
    .await;
    w.stop().await;
    // The snoozed run counted as no attempt: its second claim is attempt 1 of 3 again.
    assert_eq!(*seen.lock().unwrap(), vec![(1, 3), (1, 3)]);
    let rec = db.store.get(id).await.unwrap();
    assert_eq!((rec.attempt, rec.released, rec.runs()), (2, 1, 1));
}
