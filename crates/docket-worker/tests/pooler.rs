//! The runtime through a real PgBouncer in transaction pooling mode, with fewer server
//! connections than client connections so the pooler really multiplexes: a two-worker
//! drain, the scheduling controls, LISTEN over a direct `listen_url` (and polling without
//! one), and the failure that pooler mode exists to prevent.

use crate::common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_postgres::{PgStore, PoolerMode};
use docket_testkit::pgbouncer::PgBouncer;
use docket_testkit::TestDb;
use docket_worker::maintenance::Scheduler;
use docket_worker::{JobContext, Registry, Shutdown, Worker};
use serde_json::json;
use sqlx::{Connection, PgConnection};

async fn via(db: &TestDb, bouncer: &PgBouncer, max: u32) -> PgStore {
    let store = PgStore::connect(
        &bouncer.url_for(&db.url, "pooler=transaction"),
        &db.schema,
        max,
    )
    .await
    .expect("connect through pgbouncer");
    assert_eq!(store.pooler(), PoolerMode::Transaction);
    store
}

fn noop() -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_fn("noop", |_, _| async { Ok(()) });
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pooler_mode_named_statements_collide_with_it_they_do_not() {
    let db = TestDb::new().await;
    // One server connection behind the pooler: two clients share it.
    let bouncer = PgBouncer::start(&db.url, "transaction", 1);
    // (PgBouncer refuses sqlx's extra_float_digits startup parameter; pooler mode omits it.)
    let plain = bouncer
        .url_for(&db.url, "")
        .parse::<sqlx::postgres::PgConnectOptions>()
        .unwrap()
        .extra_float_digits(None);
    let mut a = PgConnection::connect_with(&plain).await.unwrap();
    let mut b = PgConnection::connect_with(&plain).await.unwrap();
    let _: i64 = sqlx::query_scalar("SELECT $1::int8")
        .bind(1_i64)
        .fetch_one(&mut a)
        .await
        .unwrap();
    let e = sqlx::query_scalar::<_, i64>("SELECT $1::int8")
        .bind(2_i64)
        .fetch_one(&mut b)
        .await
        .expect_err("sqlx's cached statement name is already taken on the shared server");
    assert!(e.to_string().contains("already exists"), "{e}");

    // Docket in pooler mode on the same (already polluted) server connection: two stores,
    // interleaved, every statement unnamed and inside its own transaction.
    let (s1, s2) = (via(&db, &bouncer, 2).await, via(&db, &bouncer, 2).await);
    for i in 0..20 {
        let s = if i % 2 == 0 { &s1 } else { &s2 };
        s.enqueue(&NewJob::new("q", "noop", json!({ "i": i })))
            .await
            .unwrap();
        s.stats().await.unwrap();
    }
    let claimed = s2
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 20,
            owner: "w".into(),
            lease: Duration::from_secs(30),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    let leases: Vec<Lease> = claimed.iter().map(|j| j.lease()).collect();
    let done = s1.complete_many("w", &leases).await.unwrap();
    assert_eq!(done.applied.len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_drain_through_pgbouncer() {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start(&db.url, "transaction", 4);
    let producer = via(&db, &bouncer, 2).await;
    const N: i64 = 4000;
    // Bulk (COPY) and single enqueue, both through the pooler.
    let jobs: Vec<NewJob> = (0..N - 10)
        .map(|i| NewJob::new("q", "noop", json!({ "i": i })))
        .collect();
    producer.enqueue_many(&jobs).await.unwrap();
    for i in 0..10 {
        producer
            .enqueue(&NewJob::new("q", "noop", json!({ "one": i })))
            .await
            .unwrap();
    }
    let mut runs = Vec::new();
    for _ in 0..2 {
        let store = via(&db, &bouncer, 8).await;
        let mut cfg = config("q", 50);
        cfg.poll_interval = Duration::from_millis(100);
        let w = Arc::new(Worker::new(store, noop(), cfg).unwrap());
        runs.push(tokio::spawn(async move {
            w.drain(Shutdown::default()).await.unwrap()
        }));
    }
    let mut done = 0;
    for r in runs {
        let report = tokio::time::timeout(Duration::from_secs(120), r)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(report.metrics.fenced, 0);
        done += report.metrics.completed;
    }
    assert_eq!(done as i64, N);
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM {schema}.jobs_all WHERE state = 'succeeded' AND attempt = 1"
        )
        .await,
        N
    );
    assert!(!bouncer.log().contains("ERROR"), "{}", bouncer.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_controls_hold_through_pgbouncer() {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start(&db.url, "transaction", 3);
    let store = via(&db, &bouncer, 4).await;

    // Queue limit: two workers with 4 slots each, at most 2 running at once.
    store
        .set_queue_limits(
            "lim",
            &QueueLimits {
                max_running: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // Ordering: one key's jobs one at a time, in enqueue order.
    let now = Arc::new(AtomicI64::new(0));
    let max = Arc::new(AtomicI64::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let registry = || {
        let (now, max, order) = (now.clone(), max.clone(), order.clone());
        let mut r = Registry::default();
        r.register_fn("hold", move |args, _ctx: JobContext| {
            let (now, max, order) = (now.clone(), max.clone(), order.clone());
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(n, Ordering::SeqCst);
                if let Some(seq) = args["seq"].as_i64() {
                    order.lock().unwrap().push(seq);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        });
        r
    };
    for i in 0..16 {
        store
            .enqueue(&NewJob::new("lim", "hold", json!({ "i": i })))
            .await
            .unwrap();
    }
    for seq in 0..8 {
        store
            .enqueue(&NewJob::new("ord", "hold", json!({ "seq": seq })).ordering_key("k"))
            .await
            .unwrap();
    }
    let mut workers = Vec::new();
    for _ in 0..2 {
        let cfg = config("lim", 4).queue("ord", 4);
        workers.push(Arc::new(
            Worker::new(via(&db, &bouncer, 6).await, registry(), cfg).unwrap(),
        ));
    }
    let runs: Vec<_> = workers
        .iter()
        .map(|w| {
            let w = w.clone();
            tokio::spawn(async move { w.drain(Shutdown::default()).await.unwrap() })
        })
        .collect();
    for r in runs {
        tokio::time::timeout(Duration::from_secs(120), r)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(count_state(&db, "succeeded").await, 24);
    // The "lim" jobs alone could reach 8; "ord" adds at most 1 (one at a time).
    assert!(
        max.load(Ordering::SeqCst) <= 3,
        "max concurrent {}",
        max.load(Ordering::SeqCst)
    );
    assert_eq!(
        *order.lock().unwrap(),
        (0..8).collect::<Vec<i64>>(),
        "per-key order"
    );

    // Pause: a paused queue yields nothing to a claim through the pooler; resume frees it.
    store.pause_queue("p").await.unwrap();
    store
        .enqueue(&NewJob::new("p", "hold", json!({})))
        .await
        .unwrap();
    let w = Worker::new(via(&db, &bouncer, 2).await, registry(), config("p", 2)).unwrap();
    assert_eq!(w.fetch_once("p").await.unwrap().0, 0, "paused");
    store.resume_queue("p").await.unwrap();
    assert_eq!(w.fetch_once("p").await.unwrap().0, 1, "resumed");

    // Cron: a due tick is enqueued once, however often the scheduler runs.
    store
        .upsert_periodic(&Periodic::new(
            "every",
            "* * * * * *",
            "c",
            "hold",
            json!({}),
        ))
        .await
        .unwrap();
    db.exec("UPDATE {schema}.periodic SET next_tick_at = now() - interval '1 second'")
        .await;
    let s = Scheduler::new(store.clone());
    let first = s.run_once().await.unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    let again = s.run_once().await.unwrap();
    assert!(again.iter().all(|t| t.tick != first[0].tick), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_goes_over_listen_url_and_without_one_the_worker_polls() {
    let db = TestDb::new().await;
    let bouncer = PgBouncer::start(&db.url, "transaction", 2);

    // With a direct listen_url: a job is picked up long before the 60 s poll.
    let mut cfg = config("q", 4);
    cfg.poll_interval = Duration::from_secs(60);
    cfg.listen_url = Some(db.url.clone());
    let r = start_on(via(&db, &bouncer, 4).await, noop(), cfg).await;
    let m = r.worker.metrics();
    eventually(Duration::from_secs(20), "LISTEN connected", || {
        let m = m.clone();
        async move { m.snapshot().listen_connects >= 1 }
    })
    .await;
    // The first claim at start has run (it found nothing), so only a wake-up can claim now.
    eventually(Duration::from_secs(20), "first claim done", || {
        let m = m.clone();
        async move { m.snapshot().claims >= 1 }
    })
    .await;
    db.store
        .enqueue(&NewJob::new("q", "noop", json!({})))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "woken by NOTIFY", || async {
        count_state(&db, "succeeded").await == 1
    })
    .await;
    r.stop().await;

    // Without one: no LISTEN at all, and the job is found by the poll.
    let mut cfg = config("q", 4);
    cfg.poll_interval = Duration::from_millis(200);
    let r = start_on(via(&db, &bouncer, 4).await, noop(), cfg).await;
    db.store
        .enqueue(&NewJob::new("q", "noop", json!({})))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "found by polling", || async {
        count_state(&db, "succeeded").await == 2
    })
    .await;
    let report = r.stop().await;
    assert_eq!(report.metrics.listen_connects, 0);
    assert_eq!(report.metrics.notifications, 0);
}
