//! The worker runtime on the engines without LISTEN (SQLite, MariaDB / MySQL), one suite run
//! per engine (`local_worker_suite!`), as the conformance suite is: two workers on one
//! database run every job exactly once, an in-transaction handler's writes commit with its
//! completion, a job enqueued in the worker's own process is picked up without waiting for a
//! poll (and a rolled-back one wakes nobody), a graceful stop gives buffered jobs back
//! without charging them, and a key that frees up wakes the worker whose claim it held back.
//!
//! An engine supplies [`Local`]: raw SQL on its pool and on a handler's transaction. The
//! tables the tests create and the statements they run are written to mean the same on
//! both (integer columns, literal values of the tests' own).
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_core::*;
use docket_testkit::conformance::Harness;
use docket_testkit::eventually;
use docket_worker::{
    JobContext, JobResult, Registry, RunReport, Shutdown, TxJob, Worker, WorkerConfig,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What a suite needs of an engine beyond its conformance harness.
pub trait Local: Harness<S: InTransaction> + Send + Sync + 'static {
    /// Runs `sql` on `store`'s pool.
    fn exec_on(store: &Self::S, sql: &str) -> impl Future<Output = ()> + Send;
    /// The one integer `sql` returns, on `store`'s pool.
    fn scalar_on(store: &Self::S, sql: &str) -> impl Future<Output = i64> + Send;
    /// Runs `sql` inside a handler's transaction.
    fn exec_in(
        conn: &mut <Self::S as InTransaction>::Conn,
        sql: &str,
    ) -> impl Future<Output = ()> + Send;
}

pub fn config(queue: &str, concurrency: usize) -> WorkerConfig {
    let mut c = WorkerConfig::default()
        .queue(queue, concurrency)
        .lease(Duration::from_secs(10))
        // These tests read how each job ended; tests of the default (rows deleted) say so.
        .keep_succeeded(true);
    c.poll_interval = Duration::from_millis(200);
    c.reap_interval = Duration::from_millis(200);
    c.shutdown_timeout = Duration::from_secs(10);
    c
}

pub struct Running<S: Store> {
    pub worker: Arc<Worker<S>>,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<RunReport>,
}

impl<S: Store> Running<S> {
    pub async fn stop(self) -> RunReport {
        self.shutdown.graceful.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("worker stops in time")
            .expect("worker task")
    }
}

pub fn start<S: Store>(store: S, registry: Registry<S>, cfg: WorkerConfig) -> Running<S> {
    let worker = Arc::new(Worker::new(store, registry, cfg).expect("worker"));
    let shutdown = Shutdown::default();
    let (w, s) = (worker.clone(), shutdown.clone());
    let task = tokio::spawn(async move { w.run(s).await.expect("run") });
    Running {
        worker,
        shutdown,
        task,
    }
}

async fn count_state<H: Local>(s: &H::S, state: &str) -> i64 {
    H::scalar_on(
        s,
        &format!("SELECT count(*) FROM jobs WHERE state = '{state}'"),
    )
    .await
}

/// Records each execution (job id, attempt, worker) and succeeds.
fn recording<H: Local>(tag: &'static str) -> Registry<H::S> {
    let mut r = Registry::default();
    r.register_fn("record", move |_args, ctx: JobContext| async move {
        let store = ctx.store::<H::S>().expect("the worker's store");
        H::exec_on(
            &store,
            &format!(
                "INSERT INTO executions (job_id, attempt, owner) VALUES ({}, {}, '{tag}')",
                ctx.id.0, ctx.attempt
            ),
        )
        .await;
        Ok(())
    });
    r
}

pub async fn two_workers_on_one_database_run_every_job_exactly_once<H: Local>() {
    let h = H::fresh().await;
    let s = h.store();
    H::exec_on(
        s,
        "CREATE TABLE executions (job_id BIGINT, attempt INT, owner VARCHAR(16))",
    )
    .await;
    let jobs: Vec<NewJob> = (0..4_000)
        .map(|i| NewJob::new("work", "record", json!({ "i": i })))
        .collect();
    s.enqueue_many(&jobs).await.unwrap();
    let started = Instant::now();
    let a = start(h.second().await, recording::<H>("a"), config("work", 10));
    let b = start(h.second().await, recording::<H>("b"), config("work", 10));
    eventually(Duration::from_secs(120), "all jobs succeeded", || async {
        count_state::<H>(s, "succeeded").await == 4_000
    })
    .await;
    let took = started.elapsed();
    let (ra, rb) = (a.stop().await, b.stop().await);
    assert_eq!(
        H::scalar_on(s, "SELECT count(*) FROM executions").await,
        4_000,
        "each job ran once"
    );
    assert_eq!(
        H::scalar_on(s, "SELECT count(DISTINCT job_id) FROM executions").await,
        4_000
    );
    let by_a = H::scalar_on(s, "SELECT count(*) FROM executions WHERE owner = 'a'").await;
    assert!(
        by_a > 0 && by_a < 4_000,
        "both workers ran jobs ({by_a} by a)"
    );
    assert_eq!(ra.metrics.leases_lost + rb.metrics.leases_lost, 0);
    assert_eq!(ra.metrics.fenced + rb.metrics.fenced, 0);
    eprintln!("4000 jobs, 2 workers x 10 slots: {took:?}");
}

/// A handler whose write commits with its completion; `fail` fails the first attempt after
/// writing.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct Credit<H> {
    amount: i64,
    fail: bool,
    #[serde(skip)]
    engine: std::marker::PhantomData<fn() -> H>,
}

impl<H: Local> TxJob<H::S> for Credit<H> {
    const KIND: &'static str = "credit";

    async fn run(self, ctx: JobContext, tx: &mut <H::S as InTransaction>::Conn) -> JobResult {
        H::exec_in(
            tx,
            &format!(
                "INSERT INTO ledger (job, attempt, amount) VALUES ({}, {}, {})",
                ctx.id.0, ctx.attempt, self.amount
            ),
        )
        .await;
        if self.fail && ctx.attempt == 1 {
            return Err(docket_worker::JobError::retry_in(
                "first attempt fails after writing",
                Duration::from_millis(10),
            ));
        }
        Ok(())
    }
}

pub async fn in_transaction_writes_commit_with_the_completion_or_not_at_all<H: Local>() {
    let h = H::fresh().await;
    let s = h.store();
    H::exec_on(
        s,
        "CREATE TABLE ledger (job BIGINT, attempt INT, amount BIGINT)",
    )
    .await;
    let ok = s
        .enqueue(&NewJob::new(
            "q",
            "credit",
            json!({"amount": 10, "fail": false}),
        ))
        .await
        .unwrap()
        .id;
    let retried = s
        .enqueue(&NewJob::new(
            "q",
            "credit",
            json!({"amount": 5, "fail": true}),
        ))
        .await
        .unwrap()
        .id;
    let mut r = Registry::default();
    r.register_tx::<Credit<H>>();
    let w = start(h.second().await, r, config("q", 4));
    eventually(Duration::from_secs(30), "both succeeded", || async {
        count_state::<H>(s, "succeeded").await == 2
    })
    .await;
    w.stop().await;
    // The failed first attempt's write was rolled back with it: one ledger row per job.
    assert_eq!(H::scalar_on(s, "SELECT count(*) FROM ledger").await, 2);
    for (job, attempt) in [(ok, 1), (retried, 2)] {
        let sql = format!(
            "SELECT count(*) FROM ledger WHERE job = {} AND attempt = {attempt}",
            job.0
        );
        assert_eq!(H::scalar_on(s, &sql).await, 1, "{sql}");
    }
}

pub async fn an_enqueue_in_the_workers_process_wakes_it_before_any_poll<H: Local>() {
    let h = H::fresh().await;
    let s = h.store().clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut r = Registry::default();
    r.register_fn("ping", move |_a, _c| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(Instant::now());
            Ok(())
        }
    });
    let mut cfg = config("ping", 2);
    // A poll this long never fires during the test: only the in-process wake can.
    cfg.poll_interval = Duration::from_secs(3600);
    cfg.maintenance = false;
    let w = start(s.clone(), r, cfg);
    tokio::time::timeout(Duration::from_secs(10), w.worker.ready())
        .await
        .expect("the listener is up and a claim came back empty");
    for _ in 0..5 {
        let t = Instant::now();
        s.enqueue(&NewJob::new("ping", "ping", json!({})))
            .await
            .unwrap();
        let ran = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("picked up without a poll")
            .unwrap();
        assert!(ran.duration_since(t) < Duration::from_secs(1));
    }
    // The same through a transaction of the store's: the wake goes out at its commit.
    let mut txn = <H::S as InTransaction>::begin(&s).await.unwrap();
    s.enqueue_in(
        <H::S as InTransaction>::conn(&mut txn),
        &NewJob::new("ping", "ping", json!({})),
    )
    .await
    .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err(),
        "nothing runs before the commit"
    );
    <H::S as InTransaction>::commit(txn).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("woken at the commit")
        .unwrap();
    w.stop().await;
}

pub async fn a_rolled_back_enqueue_leaves_nothing_and_wakes_nobody<H: Local>() {
    let h = H::fresh().await;
    let s = h.store().clone();
    let mut l = s.listen(None).await.unwrap();
    let mut txn = <H::S as InTransaction>::begin(&s).await.unwrap();
    let conn = <H::S as InTransaction>::conn(&mut txn);
    s.enqueue_in(conn, &NewJob::new("q", "k", json!({})))
        .await
        .unwrap();
    assert_eq!(s.enqueued_in(conn, "k").await.unwrap(), vec![json!({})]);
    <H::S as InTransaction>::rollback(txn).await.unwrap();
    assert!(docket_testkit::conformance::all(&s).await.is_empty());
    assert!(
        tokio::time::timeout(Duration::from_millis(200), l.recv())
            .await
            .is_err(),
        "no wake-up for a rolled-back enqueue"
    );
}

pub async fn a_graceful_stop_gives_buffered_jobs_back_uncharged<H: Local>() {
    let h = H::fresh().await;
    let s = h.store();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let mut r = Registry::default();
    r.register_fn("slow", move |_a, _c| {
        let g = g.clone();
        async move {
            let _ = g.acquire().await;
            Ok(())
        }
    });
    let jobs: Vec<NewJob> = (0..50)
        .map(|_| NewJob::new("q", "slow", json!({})))
        .collect();
    s.enqueue_many(&jobs).await.unwrap();
    let mut cfg = config("q", 2);
    cfg.shutdown_timeout = Duration::from_secs(5);
    let w = start(h.second().await, r, cfg);
    eventually(Duration::from_secs(10), "two running", || async {
        count_state::<H>(s, "running").await >= 2
    })
    .await;
    gate.add_permits(1000);
    w.stop().await;
    assert_eq!(
        count_state::<H>(s, "running").await,
        0,
        "nothing left leased"
    );
    // Jobs given back unstarted keep their whole budget (attempt + 1 was balanced).
    let pending = count_state::<H>(s, "pending").await;
    let whole = H::scalar_on(
        s,
        "SELECT count(*) FROM jobs WHERE state = 'pending' AND max_attempts - attempt = 25",
    )
    .await;
    assert_eq!(
        whole, pending,
        "{pending} pending, {whole} with their whole budget"
    );
}

/// A key that frees up wakes the worker whose claim it held back, as PostgreSQL's release
/// NOTIFY does: two workers of one process serve two queues whose jobs share a concurrency
/// key (at most 1 running); the second worker's claim finds the key full; when the first
/// job ends, the second job starts with no poll (polls are an hour apart).
pub async fn a_freed_key_wakes_the_worker_holding_its_next_job_before_any_poll<H: Local>() {
    let h = H::fresh().await;
    let s = h.store().clone();
    s.set_key_limit(&KeyLimit {
        key: "k".into(),
        max_running: Some(1),
        rate: None,
    })
    .await
    .unwrap();
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let release = Arc::new(tokio::sync::Notify::new());
    let registry = || {
        let mut r = Registry::default();
        let (tx, rel) = (started_tx.clone(), release.clone());
        r.register_fn("held", move |a: serde_json::Value, _c| {
            let (tx, rel) = (tx.clone(), rel.clone());
            async move {
                let _ = tx.send((a["name"].as_str().unwrap_or("").to_string(), Instant::now()));
                if a["wait"].as_bool().unwrap_or(false) {
                    rel.notified().await;
                }
                Ok(())
            }
        });
        r
    };
    let cfg = |queue: &str| {
        let mut c = config(queue, 1);
        // A poll this long never fires during the test: only a hint can start a job.
        c.poll_interval = Duration::from_secs(3600);
        c.maintenance = false;
        c
    };
    let a = start(s.clone(), registry(), cfg("qa"));
    tokio::time::timeout(Duration::from_secs(10), a.worker.ready())
        .await
        .expect("worker a is up");
    s.enqueue(
        &NewJob::new("qa", "held", json!({"name": "first", "wait": true})).concurrency_key("k"),
    )
    .await
    .unwrap();
    let (name, _) = tokio::time::timeout(Duration::from_secs(5), started.recv())
        .await
        .expect("the first job starts")
        .unwrap();
    assert_eq!(name, "first");
    s.enqueue(&NewJob::new("qb", "held", json!({"name": "second"})).concurrency_key("k"))
        .await
        .unwrap();
    // Worker b's first claim (before `ready`) finds the key full and takes nothing.
    let b = start(s.clone(), registry(), cfg("qb"));
    tokio::time::timeout(Duration::from_secs(10), b.worker.ready())
        .await
        .expect("worker b is up");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), started.recv())
            .await
            .is_err(),
        "the second job waits while the key is full"
    );
    let freed = Instant::now();
    release.notify_one();
    // Anything short of the hour-long poll proves the hint; 30 s rather than 5 because the
    // full suite on two cores has taken the first job's end, the hint and MariaDB's claim
    // past 5 s once (it passed alone in half a second).
    let (name, at) = tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .expect("the freed key's next job starts without a poll")
        .unwrap();
    assert_eq!(name, "second");
    assert!(at.duration_since(freed) < Duration::from_secs(30));
    a.stop().await;
    b.stop().await;
}

/// A queue's rate limit (10 per second, a burst of 10) holds for the claim times four
/// workers leave behind, as the database's clock has them: within any window of w seconds at
/// most 10 + 10 w claims. A claim that waited for the queue's limit lock must refill the
/// bucket and stamp its jobs with the clock read after it, not before.
pub async fn a_queue_rate_limit_holds_across_four_workers<H: Local>() {
    let h = H::fresh().await;
    let s = h.store();
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
    let jobs: Vec<NewJob> = (0..30)
        .map(|i| NewJob::new("r", "record", json!({ "i": i })))
        .collect();
    s.enqueue_many(&jobs).await.unwrap();
    H::exec_on(
        s,
        "CREATE TABLE executions (job_id BIGINT, attempt INT, owner VARCHAR(16))",
    )
    .await;
    let mut ws = Vec::new();
    for tag in ["a", "b", "c", "d"] {
        let mut c = config("r", 10);
        c.poll_interval = Duration::from_millis(50);
        ws.push(start(h.second().await, recording::<H>(tag), c));
    }
    eventually(
        Duration::from_secs(60),
        "all rate-limited jobs done",
        || async { count_state::<H>(s, "succeeded").await == 30 },
    )
    .await;
    for w in ws {
        w.stop().await;
    }
    let mut times = Vec::new();
    for i in 0..30 {
        times.push(
            H::scalar_on(
                s,
                &format!("SELECT attempted_at FROM jobs ORDER BY attempted_at LIMIT 1 OFFSET {i}"),
            )
            .await,
        );
    }
    for i in 0..times.len() {
        for j in i..times.len() {
            let w = (times[j] - times[i]) as f64;
            let allowed = 10.0 + 10.0 * w / 1000.0;
            assert!(
                (j - i + 1) as f64 <= allowed + 1e-6,
                "{} claims within {w} ms exceed the bucket ({allowed:.1}): {times:?}",
                j - i + 1
            );
        }
    }
    assert!(
        times[29] - times[0] >= 1900,
        "30 jobs need at least 2 s of refills: {times:?}"
    );
}

/// One `#[tokio::test]` per case of this suite, for harness `$h` (which implements
/// [`Local`]).
#[macro_export]
macro_rules! local_worker_suite {
    ($h:ty) => {
        $crate::local_worker_suite!(@cases $h;
            two_workers_on_one_database_run_every_job_exactly_once,
            in_transaction_writes_commit_with_the_completion_or_not_at_all,
            an_enqueue_in_the_workers_process_wakes_it_before_any_poll,
            a_rolled_back_enqueue_leaves_nothing_and_wakes_nobody,
            a_graceful_stop_gives_buffered_jobs_back_uncharged,
            a_freed_key_wakes_the_worker_holding_its_next_job_before_any_poll,
            a_queue_rate_limit_holds_across_four_workers
        );
    };
    (@cases $h:ty; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                local::$case::<$h>().await;
            }
        )*
    };
}
