//! The worker runtime against a real server: throughput correctness, lost leases, handler
//! outcomes, cancellation, timeouts, panics and unknown kinds.

use crate::common;

use docket_postgres::PgStore;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{Job, JobContext, JobError, JobResult, Registry};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Records each execution in a table (job id, attempt, owner) and succeeds.
fn recording_registry(schema: &str, owner_tag: &str) -> Registry<PgStore> {
    let mut r = Registry::default();
    let schema = schema.to_string();
    let tag = owner_tag.to_string();
    r.register_fn("record", move |_args, ctx: JobContext| {
        let schema = schema.clone();
        let tag = tag.clone();
        async move {
            sqlx::query(&format!(
                "INSERT INTO {schema}.executions (job_id, attempt, owner) VALUES ($1, $2, $3)"
            ))
            .bind(ctx.id.0)
            .bind(ctx.attempt)
            .bind(tag)
            .execute(ctx.store::<PgStore>().expect("postgres").pool())
            .await?;
            Ok(())
        }
    });
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_workers_run_ten_thousand_jobs_exactly_once() {
    let db = TestDb::with_pool_size(4).await;
    db.exec("CREATE TABLE {schema}.executions (job_id bigint, attempt int, owner text)")
        .await;
    let jobs: Vec<NewJob> = (0..10_000)
        .map(|i| NewJob::new("work", "record", json!({ "i": i })))
        .collect();
    db.store.enqueue_many(&jobs).await.unwrap();
    let mut workers = Vec::new();
    for w in 0..4 {
        let mut cfg = config("work", 16);
        cfg.claim_batch = 16;
        workers.push(start(&db, recording_registry(&db.schema, &format!("w{w}")), cfg).await);
    }
    eventually(Duration::from_secs(120), "all jobs succeeded", || async {
        count_state(&db, "succeeded").await == 10_000
    })
    .await;
    let (mut claimed, mut completed) = (0, 0);
    for w in workers {
        let r = w.stop().await;
        claimed += r.metrics.claimed;
        completed += r.metrics.completed;
        assert_eq!(r.metrics.fenced, 0);
    }
    assert_eq!(completed, 10_000, "one completion per job");
    // Claims may exceed the jobs on a loaded machine, never runs: a buffered job given back
    // unstarted, or a claim whose reply came too late, is claimed again (9 of 10,000 once,
    // 2026-12-07) — each a claim, none an execution.
    assert!(claimed >= 10_000, "{claimed} claims for 10,000 jobs");
    println!("{claimed} claims for 10,000 jobs, each run once");
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.executions").await,
        10_000
    );
    assert_eq!(
        db.scalar("SELECT count(DISTINCT job_id) FROM {schema}.executions")
            .await,
        10_000
    );
    assert_eq!(
        db.scalar("SELECT count(DISTINCT owner) FROM {schema}.executions")
            .await,
        4,
        "every worker took part"
    );
    assert_eq!(count_state(&db, "running").await, 0);
}

#[derive(Serialize, Deserialize)]
struct Outcome {
    what: String,
}

impl Job for Outcome {
    const KIND: &'static str = "outcome";
    const TIMEOUT: Option<Duration> = Some(Duration::from_millis(300));

    async fn run(self, ctx: JobContext) -> JobResult {
        match self.what.as_str() {
            "ok" => Ok(()),
            "retry" => Err(JobError::retry_in("transient", Duration::from_secs(60))),
            "discard" => Err(JobError::discard("invalid email address")),
            "snooze" => Err(JobError::snooze(Duration::from_secs(120))),
            "cancel" => Err(JobError::cancel("not needed any more")),
            "error" => {
                let n: i32 = "not a number".parse()?;
                let _ = n;
                Ok(())
            }
            "panic" => panic!("handler bug"),
            "sleep" => {
                // Ignores its token: the runtime must time it out and drop it.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(())
            }
            "wait_cancel" => {
                ctx.cancel.cancelled().await;
                Err(JobError::retry("stopped"))
            }
            other => Err(JobError::discard(format!("unknown outcome {other}"))),
        }
    }
}

#[tokio::test]
async fn handler_outcomes_are_recorded_by_class() {
    let db = TestDb::new().await;
    let whats = [
        "ok", "retry", "discard", "snooze", "cancel", "error", "panic", "sleep",
    ];
    let jobs: Vec<NewJob> = whats
        .iter()
        .map(|w| NewJob::new("q", "outcome", json!({ "what": w })))
        .collect();
    let ids: Vec<JobId> = db
        .store
        .enqueue_many(&jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let bad_args = db
        .store
        .enqueue(&NewJob::new("q", "outcome", json!({"nope": 1})))
        .await
        .unwrap()
        .id;
    let unknown = db
        .store
        .enqueue(&NewJob::new("q", "no_such_kind", json!({})))
        .await
        .unwrap()
        .id;
    let mut reg = Registry::default();
    reg.register::<Outcome>();
    let w = start(&db, reg, config("q", 20)).await;
    eventually(Duration::from_secs(30), "no job running or ready", || async {
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE state = 'running' OR (state = 'pending' AND run_at <= now())")
            .await
            == 0
    })
    .await;
    let r = w.stop().await;
    assert_eq!(r.metrics.panics, 1);
    let get = |i: usize| db.store.get(ids[i]);
    let ok = get(0).await.unwrap();
    assert_eq!(ok.state, JobState::Succeeded);
    let retry = get(1).await.unwrap();
    assert_eq!(retry.state, JobState::Pending);
    assert_eq!(retry.errors[0].message, "transient");
    assert!(retry.run_at > chrono::Utc::now() + chrono::Duration::seconds(50));
    let discard = get(2).await.unwrap();
    assert_eq!(discard.state, JobState::Dead);
    assert_eq!(discard.errors[0].class, "discard");
    let snooze = get(3).await.unwrap();
    assert_eq!(snooze.state, JobState::Pending);
    assert_eq!(snooze.max_attempts, DEFAULT_MAX_ATTEMPTS + 1);
    assert!(snooze.errors.is_empty());
    let cancel = get(4).await.unwrap();
    assert_eq!(cancel.state, JobState::Cancelled);
    let error = get(5).await.unwrap();
    assert_eq!(error.state, JobState::Pending);
    assert!(
        error.errors[0].message.contains("invalid digit"),
        "{:?}",
        error.errors
    );
    let panic = get(6).await.unwrap();
    assert_eq!(panic.state, JobState::Pending);
    assert!(panic.errors[0]
        .message
        .contains("handler panicked: handler bug"));
    let timeout = get(7).await.unwrap();
    assert_eq!(timeout.state, JobState::Pending);
    assert!(
        timeout.errors[0].message.contains("timed out after 0.300s"),
        "{:?}",
        timeout.errors
    );
    let bad = db.store.get(bad_args).await.unwrap();
    assert_eq!(bad.state, JobState::Dead);
    assert!(bad.errors[0]
        .message
        .contains("invalid args for kind outcome"));
    // An unknown kind is a clear, retried failure with backoff — not a hot loop.
    let unk = db.store.get(unknown).await.unwrap();
    assert_eq!(unk.state, JobState::Pending);
    assert_eq!(unk.attempt, 1);
    assert!(unk.errors[0]
        .message
        .contains("no handler for kind \"no_such_kind\""));
    assert!(unk.run_at > chrono::Utc::now() + chrono::Duration::seconds(5));
}

#[tokio::test]
async fn cancelling_a_running_job_fires_its_token_on_the_worker() {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "outcome", json!({"what": "wait_cancel"})))
        .await
        .unwrap()
        .id;
    let mut reg = Registry::default();
    reg.register::<Outcome>();
    let mut cfg = config("q", 2);
    cfg.max_runtime = Duration::from_secs(600);
    let w = start(&db, reg, cfg).await;
    eventually(Duration::from_secs(10), "job running", || async {
        count_state(&db, "running").await == 1
    })
    .await;
    assert_eq!(db.store.cancel(id).await.unwrap(), CancelOutcome::Requested);
    eventually(Duration::from_secs(10), "job cancelled", || async {
        db.store.get(id).await.unwrap().state == JobState::Cancelled
    })
    .await;
    w.stop().await;
}

/// A worker whose lease is lost mid-job (backdated, reaped, re-claimed by another worker):
/// its handler is cancelled, its completion never lands, the other worker's result stands.
#[tokio::test]
async fn a_lost_lease_cancels_the_handler_and_fences_its_completion() {
    let db = TestDb::new().await;
    let stopped = Arc::new(AtomicUsize::new(0));
    let mut reg = Registry::default();
    let s = stopped.clone();
    reg.register_fn("long", move |_a, ctx: JobContext| {
        let s = s.clone();
        async move {
            ctx.cancel.cancelled().await;
            s.fetch_add(1, Ordering::SeqCst);
            // Pretends it finished anyway: this success must be fenced off.
            Ok(())
        }
    });
    let mut cfg = config("q", 1).lease(Duration::from_secs(600));
    cfg.maintenance = false;
    cfg.heartbeat_interval = Duration::from_secs(599); // beats are driven by the test
    let a = start(&db, reg, cfg).await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "long", json!({})))
        .await
        .unwrap()
        .id;
    eventually(Duration::from_secs(10), "A runs the job", || async {
        count_state(&db, "running").await == 1
    })
    .await;
    // A stalls past its lease; the reaper gives the job back; B claims it.
    db.exec(
        "UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second', run_at = now()",
    )
    .await;
    let reaped = db.store.reap(10).await.unwrap();
    assert_eq!(reaped.requeued(), 1);
    db.exec("UPDATE {schema}.jobs SET run_at = now()").await;
    let b = db
        .store
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 1,
            owner: "B".into(),
            lease: Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap()
        .remove(0);
    assert_eq!(b.attempt, 2);
    // A's next heartbeat finds nothing: the handler is cancelled.
    let beat = a.worker.heartbeat_once().await;
    assert_eq!(beat.lost, 1);
    eventually(Duration::from_secs(5), "A's handler stopped", || async {
        stopped.load(Ordering::SeqCst) == 1
    })
    .await;
    eventually(Duration::from_secs(5), "A forgets the job", || async {
        a.worker.in_flight().is_empty()
    })
    .await;
    assert_eq!(db.store.get(id).await.unwrap().state, JobState::Running);
    assert_eq!(
        db.store.get(id).await.unwrap().lease_owner.as_deref(),
        Some("B")
    );
    let out = db.store.complete_many("B", &[b.lease()]).await.unwrap();
    assert_eq!(out.applied.len(), 1);
    let r = a.stop().await;
    assert_eq!(r.metrics.leases_lost, 1);
    assert_eq!(r.metrics.completed, 0, "A's success was never written");
    let rec = db.store.get(id).await.unwrap();
    assert_eq!((rec.state, rec.attempt), (JobState::Succeeded, 2));
}

/// Heartbeats keep a job alive far past its initial lease.
#[tokio::test]
async fn heartbeats_extend_leases_of_long_jobs() {
    let db = TestDb::new().await;
    let mut reg = Registry::default();
    reg.register_fn("slow", |_a, _ctx| async {
        tokio::time::sleep(Duration::from_millis(7500)).await;
        Ok(())
    });
    // A 3 s lease beats every second and stops a job only after 2 s without a renewal: ten
    // times what a loaded machine delays a timer, so the test cannot flap.
    let mut cfg = config("q", 1).lease(Duration::from_secs(3));
    cfg.reap_interval = Duration::from_millis(100);
    let w = start(&db, reg, cfg).await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "slow", json!({})))
        .await
        .unwrap()
        .id;
    eventually(Duration::from_secs(30), "job done", || async {
        db.store.get(id).await.unwrap().state.is_terminal()
    })
    .await;
    let r = w.stop().await;
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.state, JobState::Succeeded);
    assert_eq!(
        rec.attempt, 1,
        "never reaped although it ran 2.5 leases long"
    );
    assert_eq!(r.metrics.leases_lost, 0);
}

/// `WorkerConfig::default()` lists no queue and serves `default` with 100 slots; a leader TTL
/// that would lapse between renewals is refused when the worker is built.
#[tokio::test]
async fn the_default_config_serves_the_default_queue_and_bad_ttls_are_refused() {
    let db = TestDb::new().await;
    db.store
        .enqueue_many(
            &(0..150)
                .map(|i| NewJob::new("default", "noop", json!(i)))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let mut r = Registry::default();
    let peak = Arc::new(AtomicUsize::new(0));
    let now = Arc::new(AtomicUsize::new(0));
    // Handlers hold their slots until 100 run at once (then all go), instead of sleeping and
    // hoping the slots fill meanwhile; a worker that never runs 100 at once lets them go after
    // 30 s and the peak assertion below says so.
    let full = Arc::new(tokio::sync::Notify::new());
    let (p, n, f) = (peak.clone(), now.clone(), full.clone());
    r.register_fn("noop", move |_a, _c| {
        let (p, n, f) = (p.clone(), n.clone(), f.clone());
        async move {
            let wait = f.notified();
            let running = n.fetch_add(1, Ordering::SeqCst) + 1;
            let before = p.fetch_max(running, Ordering::SeqCst);
            if running >= 100 || before >= 100 {
                f.notify_waiters();
            } else {
                let _ = tokio::time::timeout(Duration::from_secs(30), wait).await;
            }
            n.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let w = docket_worker::Worker::new(
        db.second_store(8).await,
        r.clone(),
        docket_worker::WorkerConfig::default(),
    )
    .unwrap();
    let report = w.drain(docket_worker::Shutdown::default()).await.unwrap();
    // The default deletes what succeeds: nothing is left, and all 150 completed.
    assert_eq!(db.scalar("SELECT count(*) FROM {schema}.jobs").await, 0);
    assert_eq!(report.metrics.completed, 150);
    assert_eq!(peak.load(Ordering::SeqCst), 100, "100 slots on `default`");
    let mut bad = docket_worker::WorkerConfig::default();
    bad.leader_ttl = bad.reap_interval;
    let err = docket_worker::Worker::new(db.second_store(1).await, r, bad)
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("leader_ttl must be longer"),
        "{err}"
    );
}

/// Library default (`keep_succeeded = false`): a job that succeeds leaves no row — each ran
/// once — while every other outcome stays readable (here a discarded job, dead); keyed jobs
/// still hand their keys on, so both jobs of one ordering key run, in order. With
/// `keep_succeeded(true)` the success stays as a `succeeded` row.
#[tokio::test]
async fn by_default_a_success_deletes_its_row_and_other_outcomes_stay() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE {schema}.executions (seq bigserial, job_id bigint, attempt int, owner text)",
    )
    .await;
    let mut jobs: Vec<NewJob> = (0..50)
        .map(|i| NewJob::new("q", "record", json!({ "i": i })))
        .collect();
    jobs.push(NewJob::new("q", "record", json!({})).ordering_key("acct"));
    jobs.push(NewJob::new("q", "record", json!({})).ordering_key("acct"));
    let ids: Vec<JobId> = db
        .store
        .enqueue_many(&jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let dead = db
        .store
        .enqueue(&NewJob::new("q", "outcome", json!({ "what": "discard" })))
        .await
        .unwrap()
        .id;
    let mut reg = recording_registry(&db.schema, "w");
    reg.register::<Outcome>();
    let w = start(&db, reg, config("q", 8).keep_succeeded(false)).await;
    eventually(
        Duration::from_secs(30),
        "only the dead job is left",
        || async { db.scalar("SELECT count(*) FROM {schema}.jobs_all").await == 1 },
    )
    .await;
    let r = w.stop().await;
    assert_eq!(r.metrics.completed, 52);
    assert_eq!(r.metrics.fenced, 0);
    assert_eq!(db.store.get(dead).await.unwrap().state, JobState::Dead);
    assert!(matches!(
        db.store.get(ids[0]).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        db.scalar("SELECT count(DISTINCT job_id) FROM {schema}.executions WHERE attempt = 1")
            .await,
        52,
        "every job ran, once"
    );
    let order: Vec<i64> = sqlx::query_scalar(&format!(
        "SELECT job_id FROM {}.executions WHERE job_id IN ($1, $2) ORDER BY seq",
        db.schema
    ))
    .bind(ids[50].0)
    .bind(ids[51].0)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        order,
        vec![ids[50].0, ids[51].0],
        "the key was handed on, in order"
    );

    let kept = db
        .store
        .enqueue(&NewJob::new("q", "record", json!({})))
        .await
        .unwrap()
        .id;
    let w = start(&db, recording_registry(&db.schema, "w"), config("q", 8)).await;
    eventually(Duration::from_secs(30), "the job succeeded", || async {
        count_state(&db, "succeeded").await == 1
    })
    .await;
    w.stop().await;
    assert_eq!(db.store.get(kept).await.unwrap().state, JobState::Succeeded);
}
