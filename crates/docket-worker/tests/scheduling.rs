//! Scheduling semantics with several workers racing on one database: concurrency limits per
//! queue and per key, rate limits, per-key ordering (and what retries, dead and cancelled
//! jobs do to a key), periodic ticks enqueued once, and paused queues never claimed.
//! Every limit is checked where it matters: concurrent executions as the handlers saw them.

use crate::common;

use docket_postgres::PgStore;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::maintenance::Scheduler;
use docket_worker::{JobContext, JobError, Registry, WorkerConfig};
use serde_json::json;

/// One execution of a handler as it saw it.
#[derive(Debug, Clone)]
struct Exec {
    key: String,
    seq: i64,
    attempt: i32,
    start: Instant,
    end: Option<Instant>,
}

/// Concurrent executions per label ("*" = all), their maxima, and a log.
#[derive(Default)]
struct Recorder {
    now: HashMap<String, i64>,
    max: HashMap<String, i64>,
    log: Vec<Exec>,
}

type Rec = Arc<Mutex<Recorder>>;

impl Recorder {
    fn enter(&mut self, labels: &[String], e: Exec) -> usize {
        for l in labels {
            let n = self.now.entry(l.clone()).or_default();
            *n += 1;
            let m = self.max.entry(l.clone()).or_default();
            *m = (*m).max(*n);
        }
        self.log.push(e);
        self.log.len() - 1
    }
    fn exit(&mut self, labels: &[String], i: usize) {
        for l in labels {
            *self.now.get_mut(l).unwrap() -= 1;
        }
        self.log[i].end = Some(Instant::now());
    }
    fn max(&self, label: &str) -> i64 {
        self.max.get(label).copied().unwrap_or(0)
    }
}

/// Kind "work": args {key, seq, ms, fail_first}. Holds the slot for `ms`, records the
/// execution, fails its first attempt when asked (retried 1 ms later).
fn registry(rec: Rec) -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_fn("work", move |args, ctx: JobContext| {
        let rec = rec.clone();
        async move {
            let key = args["key"].as_str().unwrap_or("").to_string();
            let labels = vec!["*".to_string(), key.clone()];
            let i = rec.lock().unwrap().enter(
                &labels,
                Exec {
                    key,
                    seq: args["seq"].as_i64().unwrap_or(0),
                    attempt: ctx.attempt,
                    start: Instant::now(),
                    end: None,
                },
            );
            tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(10))).await;
            rec.lock().unwrap().exit(&labels, i);
            if args["fail_first"].as_bool() == Some(true) && ctx.attempt == 1 {
                return Err(JobError::retry_in(
                    "first attempt fails",
                    Duration::from_millis(1),
                ));
            }
            if args["fail"].as_bool() == Some(true) {
                return Err(JobError::discard("permanent failure"));
            }
            Ok(())
        }
    });
    r
}

fn work(queue: &str, key: &str, seq: i64, ms: u64) -> NewJob {
    NewJob::new(queue, "work", json!({"key": key, "seq": seq, "ms": ms}))
}

async fn four_workers(db: &TestDb, rec: &Rec, cfg: impl Fn() -> WorkerConfig) -> Vec<Running> {
    let mut ws = Vec::new();
    for _ in 0..4 {
        ws.push(start(db, registry(rec.clone()), cfg()).await);
    }
    ws
}

async fn stop_all(ws: Vec<Running>) {
    for w in ws {
        w.stop().await;
    }
}

async fn all_finished(db: &TestDb) -> bool {
    count_state(db, "pending").await + count_state(db, "running").await == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_limit_holds_across_four_workers() {
    let db = TestDb::new().await;
    let rec: Rec = Arc::default();
    db.store
        .set_queue_limits(
            "q",
            &QueueLimits {
                max_running: Some(3),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..120).map(|i| work("q", "", i, 15)).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let ws = four_workers(&db, &rec, || config("q", 5)).await;
    eventually(Duration::from_secs(60), "all 120 jobs done", || {
        all_finished(&db)
    })
    .await;
    stop_all(ws).await;
    let max = rec.lock().unwrap().max("*");
    println!("max concurrent executions with max_running 3 and 4 x 5 slots: {max}");
    assert!(max <= 3, "the queue limit was exceeded: {max}");
    assert!(
        max >= 2,
        "the limit should still allow parallel work: {max}"
    );
    assert_eq!(count_state(&db, "succeeded").await, 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_key_limits_hold_across_four_workers() {
    let db = TestDb::new().await;
    let rec: Rec = Arc::default();
    // Every tenant at most 2 by the queue's default; tenant b at most 1 by its own limit.
    db.store
        .set_queue_limits(
            "t",
            &QueueLimits {
                key_max_running: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    db.store
        .set_key_limit(&KeyLimit {
            key: "b".into(),
            max_running: Some(1),
            rate: None,
        })
        .await
        .unwrap();
    let mut jobs = Vec::new();
    for i in 0..40 {
        for key in ["a", "b", "c"] {
            jobs.push(work("t", key, i, 10).concurrency_key(key));
        }
    }
    db.store.enqueue_many(&jobs).await.unwrap();
    let ws = four_workers(&db, &rec, || config("t", 5)).await;
    eventually(Duration::from_secs(60), "all keyed jobs done", || {
        all_finished(&db)
    })
    .await;
    stop_all(ws).await;
    {
        let r = rec.lock().unwrap();
        let (a, b, c, all) = (r.max("a"), r.max("b"), r.max("c"), r.max("*"));
        println!("max concurrent: a {a}, b {b}, c {c}, all {all}");
        assert!(
            a <= 2 && c <= 2,
            "default per-key limit exceeded: a {a}, c {c}"
        );
        assert!(b <= 1, "tenant b's own limit exceeded: {b}");
        assert!(all >= 3, "different tenants should run side by side: {all}");
    }
    assert_eq!(count_state(&db, "succeeded").await, 120);
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE blocked")
            .await,
        0,
        "no job is left flagged blocked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_rate_limit_holds_across_four_workers() {
    let db = TestDb::new().await;
    let rec: Rec = Arc::default();
    let rate = RateLimit {
        limit: 10,
        period: Duration::from_secs(1),
    };
    db.store
        .set_queue_limits(
            "r",
            &QueueLimits {
                rate: Some(rate),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..30).map(|i| work("r", "", i, 1)).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let ws = four_workers(&db, &rec, || {
        let mut c = config("r", 10);
        c.poll_interval = Duration::from_millis(50);
        c
    })
    .await;
    eventually(
        Duration::from_secs(60),
        "all rate-limited jobs done",
        || all_finished(&db),
    )
    .await;
    stop_all(ws).await;
    // Claim times by the database clock, in ms since the first claim.
    let times: Vec<f64> = sqlx::query_scalar(&format!(
        "SELECT extract(epoch FROM attempted_at - min(attempted_at) OVER ())::float8 * 1000
         FROM {}.jobs_all ORDER BY attempted_at",
        db.schema
    ))
    .fetch_all(db.store.pool())
    .await
    .unwrap();
    assert_eq!(times.len(), 30);
    // Token bucket: within any window of length w, at most 10 + 10 * w / 1 s claims.
    for i in 0..times.len() {
        for j in i..times.len() {
            let w = times[j] - times[i];
            let allowed = 10.0 + 10.0 * w / 1000.0;
            assert!(
                (j - i + 1) as f64 <= allowed + 1e-6,
                "{} claims within {w:.0} ms exceed the bucket ({allowed:.1})",
                j - i + 1
            );
        }
    }
    let span = times.last().unwrap();
    println!("30 jobs at 10/s with a burst of 10 took {span:.0} ms of claims");
    assert!(
        *span >= 1900.0,
        "30 jobs need at least 2 s of refills: {span}"
    );
}

/// The token buckets, driven without waiting: the refill is computed from the stored
/// refill time, so backdating it stands in for time passing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_buckets_refill_with_database_time() {
    let db = TestDb::new().await;
    let hour = Duration::from_secs(3600);
    db.store
        .set_queue_limits(
            "b",
            &QueueLimits {
                rate: Some(RateLimit {
                    limit: 6,
                    period: hour,
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    db.store
        .set_key_limit(&KeyLimit {
            key: "k".into(),
            max_running: None,
            rate: Some(RateLimit {
                limit: 2,
                period: hour,
            }),
        })
        .await
        .unwrap();
    // Key k's jobs first in claim order (priority), so its own bucket is what stops them.
    let mut jobs: Vec<NewJob> = (0..5)
        .map(|i| work("b", "k", i, 0).concurrency_key("k").priority(-1))
        .collect();
    jobs.extend((0..10).map(|i| work("b", "", i, 0)));
    db.store.enqueue_many(&jobs).await.unwrap();
    let req = ClaimRequest {
        queue: "b".into(),
        limit: 100,
        owner: "t".into(),
        lease: Duration::from_secs(60),
        starvation: None,
        controlled: None,
    };
    let first = db.store.claim(&req).await.unwrap();
    let keyed = |v: &[ClaimedJob]| v.iter().filter(|j| j.args["key"] == "k").count();
    assert_eq!(first.len(), 6, "the queue's burst is 6");
    assert_eq!(keyed(&first), 2, "key k's burst is 2");
    assert!(
        db.store.claim(&req).await.unwrap().is_empty(),
        "bucket empty"
    );
    // Ten minutes pass for the queue: one token (6 per hour).
    db.exec("UPDATE {schema}.queues SET refilled_at = refilled_at - interval '10 minutes'")
        .await;
    let next = db.store.claim(&req).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(keyed(&next), 0, "key k's own bucket is still empty");
    // Half an hour for both: key k gets one token back, the queue three.
    db.exec("UPDATE {schema}.queues SET refilled_at = refilled_at - interval '30 minutes'")
        .await;
    db.exec("UPDATE {schema}.key_limits SET refilled_at = refilled_at - interval '30 minutes'")
        .await;
    let more = db.store.claim(&req).await.unwrap();
    assert_eq!(more.len(), 3);
    assert_eq!(keyed(&more), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_key_order_is_never_violated_by_four_workers_with_retries() {
    let db = TestDb::new().await;
    let rec: Rec = Arc::default();
    let keys = ["k0", "k1", "k2", "k3", "k4", "k5"];
    let mut jobs = Vec::new();
    for seq in 0..15 {
        for k in keys {
            let mut j = work("o", k, seq, 3).ordering_key(k);
            if seq % 5 == 2 {
                j.args["fail_first"] = json!(true);
            }
            jobs.push(j);
        }
        jobs.push(work("o", "free", seq, 3));
    }
    db.store.enqueue_many(&jobs).await.unwrap();
    let ws = four_workers(&db, &rec, || config("o", 5)).await;
    eventually(Duration::from_secs(90), "all ordered jobs done", || {
        all_finished(&db)
    })
    .await;
    stop_all(ws).await;
    {
        let r = rec.lock().unwrap();
        let mut by_key: BTreeMap<&str, Vec<&Exec>> = BTreeMap::new();
        for e in r.log.iter().filter(|e| e.key != "free") {
            by_key.entry(&e.key).or_default().push(e);
        }
        for (key, mut runs) in by_key {
            runs.sort_by_key(|e| e.start);
            for w in runs.windows(2) {
                assert!(
                    w[0].end.unwrap() <= w[1].start,
                    "key {key}: seq {} overlapped seq {}",
                    w[0].seq,
                    w[1].seq
                );
                let retry_of_same = w[1].seq == w[0].seq && w[1].attempt == w[0].attempt + 1;
                assert!(
                    w[1].seq == w[0].seq + 1 || retry_of_same,
                    "key {key}: seq {} (attempt {}) ran after seq {} (attempt {})",
                    w[1].seq,
                    w[1].attempt,
                    w[0].seq,
                    w[0].attempt
                );
            }
            assert_eq!(runs.len(), 15 + 3, "key {key}: 15 jobs, 3 of them twice");
        }
        assert!(r.max("*") >= 3, "different keys run side by side");
    }
    assert_eq!(count_state(&db, "succeeded").await, 15 * 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_job_blocks_its_key_until_skipped_or_retried_and_a_cancelled_one_does_not() {
    let db = TestDb::new().await;
    let rec: Rec = Arc::default();
    let dead_head = |k: &str| {
        let mut j = work("d", k, 0, 1).ordering_key(k).max_attempts(1);
        j.args["fail"] = json!(true);
        j
    };
    let ids = db
        .store
        .enqueue_many(&[
            dead_head("skip-me"),
            work("d", "skip-me", 1, 1).ordering_key("skip-me"),
            dead_head("retry-me"),
            work("d", "retry-me", 1, 1).ordering_key("retry-me"),
            work("d", "cancel-me", 0, 1)
                .ordering_key("cancel-me")
                .delay(Duration::from_secs(3600)),
            work("d", "cancel-me", 1, 1).ordering_key("cancel-me"),
        ])
        .await
        .unwrap();
    let id = |i: usize| ids[i].id;
    let ws = four_workers(&db, &rec, || config("d", 3)).await;
    // The cancelled (never run) head releases its key: the job behind it runs.
    db.store.cancel(id(4)).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the cancelled key moves on",
        || async { db.store.get(id(5)).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    eventually(Duration::from_secs(30), "both heads are dead", || async {
        count_state(&db, "dead").await == 2
    })
    .await;
    // Followers stay pending while their head is dead; fetching again changes nothing.
    for w in &ws {
        w.worker.fetch_once("d").await.unwrap();
    }
    assert_eq!(db.store.get(id(1)).await.unwrap().state, JobState::Pending);
    assert_eq!(db.store.get(id(3)).await.unwrap().state, JobState::Pending);
    let blocked = db.store.blocked_keys(10).await.unwrap();
    let keys: Vec<(&str, JobId, i64)> = blocked
        .iter()
        .map(|b| (b.key.as_str(), b.head, b.waiting))
        .collect();
    assert_eq!(keys.len(), 2, "both dead heads are reported: {keys:?}");
    assert!(keys.contains(&("skip-me", id(0), 1)) && keys.contains(&("retry-me", id(2), 1)));
    let skipped = db.store.skip(id(0)).await.unwrap();
    assert_eq!(skipped.state, JobState::Cancelled);
    assert!(
        skipped.errors.iter().any(|e| e.class == "skipped"),
        "history says so"
    );
    eventually(
        Duration::from_secs(30),
        "the skipped key moves on",
        || async { db.store.get(id(1)).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    assert_eq!(db.store.get(id(3)).await.unwrap().state, JobState::Pending);
    // Retrying the dead head runs it again first (it fails again: dead again, key blocked).
    db.store.retry(id(2), 1).await.unwrap();
    eventually(
        Duration::from_secs(30),
        "the retried head ran again",
        || async {
            let j = db.store.get(id(2)).await.unwrap();
            j.state == JobState::Dead && j.attempt == 2
        },
    )
    .await;
    assert_eq!(db.store.get(id(3)).await.unwrap().state, JobState::Pending);
    stop_all(ws).await;
    assert!(matches!(
        db.store.skip(id(3)).await,
        Err(StoreError::WrongState { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_cron_tick_is_enqueued_once_with_four_workers() {
    let db = TestDb::new().await;
    let rec: Rec = Arc::default();
    // "all": a leader that stalls for a second still enqueues every tick, so the ticks
    // must come out consecutive.
    let def = Periodic::new(
        "every-second",
        "* * * * * *",
        "c",
        "work",
        json!({"key": "cron"}),
    )
    .missed(MissedTicks::All);
    let ws = four_workers(&db, &rec, || {
        let mut c = config("c", 2).periodic(def.clone());
        c.schedule_interval = Duration::from_millis(100);
        c.leader_ttl = Duration::from_secs(1);
        c
    })
    .await;
    eventually(Duration::from_secs(30), "four ticks enqueued", || async {
        db.scalar("SELECT count(*) FROM {schema}.jobs_all").await >= 4
    })
    .await;
    stop_all(ws).await;
    let ticks: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT metadata->>'tick' FROM {}.jobs_all ORDER BY 1",
        db.schema
    ))
    .fetch_all(db.store.pool())
    .await
    .unwrap();
    let mut dedup = ticks.clone();
    dedup.dedup();
    assert_eq!(dedup, ticks, "a tick was enqueued twice");
    let secs: Vec<i64> = ticks
        .iter()
        .map(|t| chrono::DateTime::parse_from_rfc3339(t).unwrap().timestamp())
        .collect();
    assert!(
        secs.windows(2).all(|w| w[1] == w[0] + 1),
        "consecutive ticks, none skipped: {ticks:?}"
    );
}

/// Overlapping leaders (a paused one waking up) racing over a backlog of missed ticks: the
/// compare-and-set lets exactly one pass enqueue each tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_schedulers_enqueue_missed_ticks_once_per_policy() {
    let db = TestDb::new().await;
    for (name, missed) in [
        ("all", MissedTicks::All),
        ("latest", MissedTicks::Latest),
        ("skip", MissedTicks::Skip),
    ] {
        let def = Periodic::new(name, "*/10 * * * * *", "c", "work", json!({})).missed(missed);
        db.store.upsert_periodic(&def).await.unwrap();
    }
    // A minute and a half of outage for "all" and "latest"; "skip" was last seen 10 min ago.
    db.exec(
        "UPDATE {schema}.periodic SET next_tick_at = date_trunc('minute', now()) - interval '90 seconds'
         WHERE name <> 'skip'",
    )
    .await;
    db.exec(
        "UPDATE {schema}.periodic SET next_tick_at = date_trunc('minute', now()) - interval '10 minutes',
                cron = '0 * * * * *' WHERE name = 'skip'",
    )
    .await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let store = db.second_store(2).await;
        tasks.push(tokio::spawn(async move {
            Scheduler::new(store).run_once().await.unwrap()
        }));
    }
    let mut enqueued = Vec::new();
    for t in tasks {
        enqueued.extend(t.await.unwrap());
    }
    let count = |name: &str| {
        enqueued
            .iter()
            .filter(|t| t.name == name && !t.duplicate)
            .count()
    };
    let rows = |name: &'static str| {
        let db = &db;
        async move {
            db.scalar(&format!(
                "SELECT count(*) FROM {{schema}}.jobs WHERE metadata->>'periodic' = '{name}'"
            ))
            .await
        }
    };
    // 90 s + the seconds into this minute, in 10 s steps: at least 9 ticks.
    assert!(count("all") >= 9, "all: {}", count("all"));
    assert_eq!(rows("all").await as usize, count("all"), "each tick once");
    assert_eq!(count("latest"), 1);
    assert_eq!(rows("latest").await, 1);
    // The skip schedule's newest tick is this minute's :00, at most 59 s old: within the
    // grace, so it is enqueued; the nine older ones are dropped.
    assert_eq!(rows("skip").await, 1);
    // Everything missed is now enqueued: another pass enqueues no tick at or before the
    // newest one of its schedule (a tick that fell due since, when the clock crossed a
    // 10-second boundary meanwhile, is the only thing it may add).
    let again = Scheduler::new(db.store.clone()).run_once().await.unwrap();
    for t in &again {
        let newest = enqueued
            .iter()
            .filter(|e| e.name == t.name)
            .map(|e| e.tick)
            .max();
        assert!(newest.is_some_and(|n| t.tick > n), "re-enqueued: {again:?}");
    }
    assert!(again.len() <= 3, "{again:?}");
    let list = db.store.list_periodic().await.unwrap();
    assert_eq!(list.len(), 3);
    assert!(list.iter().all(|p| p.last_job.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_queue_is_never_claimed_by_any_worker() {
    let db = TestDb::new().await;
    let rec: Rec = Arc::default();
    // 20 ms each: 3 s of work for 20 slots, so the queue is still busy when it is paused.
    let jobs: Vec<NewJob> = (0..3000).map(|i| work("p", "", i, 20)).collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let ws = four_workers(&db, &rec, || config("p", 5)).await;
    eventually(Duration::from_secs(30), "work under way", || async {
        count_state(&db, "succeeded").await >= 100
    })
    .await;
    let ctl = db.store.pause_queue("p").await.unwrap();
    assert!(ctl.paused_at.is_some());
    // From here on nothing may be claimed: record what was claimed when pause returned.
    let claimed_at_pause = db
        .scalar("SELECT count(*) FROM {schema}.jobs_all WHERE attempt > 0")
        .await;
    for _ in 0..3 {
        for w in &ws {
            let (claimed, _) = w.worker.fetch_once("p").await.unwrap();
            assert_eq!(claimed, 0, "a paused queue handed out a job");
        }
    }
    eventually(Duration::from_secs(30), "in-flight jobs finish", || async {
        count_state(&db, "running").await == 0
    })
    .await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs_all WHERE attempt > 0")
            .await,
        claimed_at_pause,
        "jobs were claimed after pause returned"
    );
    let stats = db.store.stats().await.unwrap();
    let p = stats.queues.iter().find(|q| q.queue == "p").unwrap();
    assert!(p.paused && p.pending > 0);
    assert!(
        !db.store.any_active(&["p".into()]).await.unwrap(),
        "drain sees nothing to do"
    );
    db.store.resume_queue("p").await.unwrap();
    eventually(Duration::from_secs(60), "all done after resume", || {
        all_finished(&db)
    })
    .await;
    stop_all(ws).await;
    assert_eq!(count_state(&db, "succeeded").await, 3000);
}

/// A key's release that met a claim holding the key's lock (the claim flagging the next job
/// behind the one finishing) is handed on by the leader within a reap interval, not left for
/// the full key sweep (here an hour away): the next job of the key runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_that_meets_a_held_key_lock_is_handed_on_within_a_reap_interval() {
    let db = TestDb::new().await;
    let (started, finish) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let mut r = Registry::default();
    {
        let (started, finish) = (started.clone(), finish.clone());
        r.register_fn("keyed", move |args: serde_json::Value, _| {
            let (started, finish) = (started.clone(), finish.clone());
            async move {
                if args == json!(1) {
                    started.notify_one();
                    finish.notified().await;
                }
                Ok(())
            }
        });
    }
    let first = db
        .store
        .enqueue(&NewJob::new("h", "keyed", json!(1)).ordering_key("k"))
        .await
        .unwrap()
        .id;
    let next = db
        .store
        .enqueue(&NewJob::new("h", "keyed", json!(2)).ordering_key("k"))
        .await
        .unwrap()
        .id;
    let mut cfg = config("h", 2);
    cfg.prune_interval = Duration::from_secs(3600);
    let w = start(&db, r, cfg).await;
    started.notified().await;
    let claim = db.claim_holding_key("o:k", next).await;
    finish.notify_one();
    eventually(
        Duration::from_secs(20),
        "the first job succeeded",
        || async { db.store.get(first).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    claim.commit().await.unwrap();
    eventually(
        Duration::from_secs(15),
        "the next job of the key ran",
        || async { db.store.get(next).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    w.stop().await;
}
