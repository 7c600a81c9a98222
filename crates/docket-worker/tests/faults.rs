//! Database faults under a running worker, injected into one statement at a time by a
//! trigger that recognises the statement by its header comment (`-- heartbeat: …`): beats
//! that fail or hang, completions that fail transiently, for one job, or for good. Also the
//! outcomes a handler chooses at the edges: success after a cancel request, absurd delays,
//! and pickup by the poll alone.

use crate::common;

use docket_postgres::PgStore;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_testkit::TestDb;
use docket_worker::{JobError, Registry, StopReason};
use serde_json::json;

/// Installs the injector: statement `writer` fails with `sqlstate` for the first `times` rows
/// it touches (of job `job` when given), or — with `hang_s` > 0 — each such statement first
/// sleeps `hang_s` seconds (a statement-level trigger, so the hang holds no row lock and every
/// later call reaches it too). The count is a sequence, so a failing statement's rollback
/// does not undo it.
async fn inject(
    db: &TestDb,
    writer: &str,
    sqlstate: &str,
    times: i64,
    job: Option<i64>,
    hang_s: f64,
) {
    let (level, body) = if hang_s > 0.0 {
        (
            "STATEMENT",
            format!("PERFORM pg_sleep({hang_s}); RETURN NULL;"),
        )
    } else {
        (
            "ROW",
            format!("RAISE EXCEPTION 'injected fault in {writer}' USING ERRCODE = '{sqlstate}';"),
        )
    };
    let row_test = match (level, job) {
        ("ROW", Some(j)) => format!("AND coalesce(NEW.id, OLD.id) = {j}"),
        _ => String::new(),
    };
    let sql = format!(
        "CREATE SEQUENCE IF NOT EXISTS {{schema}}.injected;
         CREATE OR REPLACE FUNCTION {{schema}}.inject_fn() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF substring(current_query() FROM '^\\s*--\\s*([a-z_]+):') = '{writer}' {row_test}
                AND nextval('{{schema}}.injected') <= {times} THEN
                 {body}
             END IF;
             RETURN CASE WHEN TG_LEVEL = 'ROW' THEN coalesce(NEW, OLD) END;
         END $$;
         DROP TRIGGER IF EXISTS inject ON {{schema}}.jobs;
         CREATE TRIGGER inject BEFORE UPDATE OR DELETE ON {{schema}}.jobs FOR EACH {level}
         EXECUTE FUNCTION {{schema}}.inject_fn();"
    );
    sqlx::raw_sql(&sql.replace("{schema}", &db.schema))
        .execute(&db.pool)
        .await
        .expect("install the injector");
}

/// How many rows the injector has seen so far.
async fn injected(db: &TestDb) -> i64 {
    db.scalar("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {schema}.injected")
        .await
}

async fn clear(db: &TestDb) {
    db.exec("DROP TRIGGER IF EXISTS inject ON {schema}.jobs")
        .await;
}

fn noop() -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_fn("noop", |_a, _c| async { Ok(()) });
    r
}

/// Serialisation failures (transient) on the first two completion flushes: the completer
/// retries with backoff and the job succeeds on its first attempt, nothing reaped.
#[tokio::test]
async fn the_completer_retries_a_transient_failure() {
    let db = TestDb::new().await;
    inject(&db, "complete_many", "40001", 2, None, 0.0).await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "noop", json!(1)))
        .await
        .unwrap()
        .id;
    let w = start(&db, noop(), config("q", 1)).await;
    eventually(Duration::from_secs(30), "completed", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    let r = w.stop().await;
    assert!(
        injected(&db).await >= 3,
        "two failures and the success went through the trigger"
    );
    assert_eq!(db.store.get(id).await.unwrap().attempt, 1);
    assert!(r.metrics.flushes >= 3, "{:?}", r.metrics);
    assert_eq!(r.metrics.reaped, 0);
}

/// One job's completion fails for good (a non-transient error) inside a batch of ten: the
/// batch falls back to item-by-item writes, the nine others succeed on their first attempt,
/// and only the bad one is left to its lease.
#[tokio::test]
async fn a_failing_item_does_not_sink_its_batch() {
    let db = TestDb::new().await;
    let ids: Vec<JobId> = db
        .store
        .enqueue_many(
            &(0..10)
                .map(|i| NewJob::new("q", "noop", json!(i)))
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    let bad = ids[4];
    inject(&db, "complete_many", "P0001", i64::MAX, Some(bad.0), 0.0).await;
    let mut c = config("q", 10);
    c.lease = Duration::from_secs(60);
    c.completion_flush = Duration::from_millis(200); // gather the ten into one batch
    let w = start(&db, noop(), c).await;
    eventually(
        Duration::from_secs(30),
        "the nine others succeeded",
        || async { count_state(&db, "succeeded").await == 9 },
    )
    .await;
    let rec = db.store.get(bad).await.unwrap();
    assert_eq!(
        (rec.state, rec.attempt),
        (JobState::Running, 1),
        "left to its lease"
    );
    w.stop().await;
    for id in ids.iter().filter(|i| **i != bad) {
        assert_eq!(db.store.get(*id).await.unwrap().attempt, 1);
    }
}

/// Completions fail transiently for good: the completer gives up after its 10 tries (it does
/// not retry forever or pile up), the job stays running under its lease, and once the fault is
/// gone and the lease has expired the reaper hands it back and it succeeds.
#[tokio::test]
async fn the_completer_gives_up_after_ten_tries_and_the_lease_takes_over() {
    let db = TestDb::new().await;
    inject(&db, "complete_many", "40001", i64::MAX, None, 0.0).await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "noop", json!(1)))
        .await
        .unwrap()
        .id;
    let mut c = config("q", 1);
    c.lease = Duration::from_secs(60);
    c.maintenance = false; // the test reaps
    let w = start(&db, noop(), c).await;
    eventually(Duration::from_secs(60), "ten tries", || async {
        injected(&db).await >= 10
    })
    .await;
    // An eleventh try would come within 2 s of the tenth (the retry delay cap); an absence
    // cannot be awaited, so wait twice that.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        injected(&db).await,
        10,
        "the completer stopped at ten tries"
    );
    assert_eq!(db.store.get(id).await.unwrap().state, JobState::Running);
    clear(&db).await;
    db.exec("UPDATE {schema}.jobs SET lease_expires_at = now() - interval '1 second'")
        .await;
    assert_eq!(db.store.reap(10).await.unwrap().requeued(), 1);
    db.exec("UPDATE {schema}.jobs SET run_at = now()").await;
    eventually(Duration::from_secs(30), "re-run and completed", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    w.stop().await;
    assert_eq!(db.store.get(id).await.unwrap().attempt, 2);
}

/// What a held handler saw when it was stopped: the reason, and whether the database still
/// considered its lease valid at that moment.
type Seen = Arc<Mutex<Option<(Option<StopReason>, bool)>>>;

fn held(seen: Seen) -> Registry<PgStore> {
    let mut r = Registry::default();
    r.register_fn("held", move |_a, ctx| {
        let seen = seen.clone();
        async move {
            ctx.cancel.cancelled().await;
            let valid: bool = sqlx::query_scalar(&format!(
                "SELECT lease_expires_at > now() FROM {}.jobs WHERE id = $1",
                ctx.metadata["schema"].as_str().unwrap_or_default()
            ))
            .bind(ctx.id.0)
            .fetch_one(ctx.store::<PgStore>().expect("postgres").pool())
            .await
            .unwrap_or(false);
            *seen.lock().unwrap() = Some((ctx.stop_reason(), valid));
            Err(JobError::retry("stopped"))
        }
    });
    r
}

async fn beats_fail_and_the_watchdog_stops_the_handler(hang_s: f64) {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "held", json!(1)).metadata(json!({"schema": db.schema})))
        .await
        .unwrap()
        .id;
    inject(&db, "heartbeat", "P0001", i64::MAX, None, hang_s).await;
    let seen: Seen = Arc::default();
    let mut c = config("q", 1);
    c.lease = Duration::from_secs(4);
    c.heartbeat_interval = Duration::from_millis(500);
    c.maintenance = false; // the test reaps
    let w = start(&db, held(seen.clone()), c).await;
    eventually(
        Duration::from_secs(30),
        "the handler was stopped",
        || async { seen.lock().unwrap().is_some() },
    )
    .await;
    let (reason, valid) = seen.lock().unwrap().expect("seen");
    assert_eq!(reason, Some(StopReason::LeaseLost));
    assert!(
        valid,
        "stopped while the database still held the lease for it"
    );
    assert!(
        injected(&db).await >= 2,
        "the heartbeater kept trying: {}",
        injected(&db).await
    );
    clear(&db).await;
    w.stop().await;
    // Its outcome was dropped (the lease is presumed lost): the job waits for the reaper.
    let rec = db.store.get(id).await.unwrap();
    assert_eq!((rec.state, rec.attempt), (JobState::Running, 1));
}

/// Beats that fail with an error (not a hang): the lease is never renewed, so the watchdog
/// stops the handler before the lease runs out at the database.
#[tokio::test]
async fn failing_heartbeats_make_the_watchdog_stop_the_handler_in_time() {
    beats_fail_and_the_watchdog_stops_the_handler(0.0).await;
}

/// Beats that hang: each call is cut off after one heartbeat interval (so the heartbeater
/// tries again instead of waiting forever on one statement), and the watchdog still stops
/// the handler before the lease runs out.
#[tokio::test]
async fn a_hanging_heartbeat_is_cut_off_and_the_watchdog_still_stops_in_time() {
    beats_fail_and_the_watchdog_stops_the_handler(30.0).await;
}

/// A cancel request does not beat a handler that finishes anyway: it ignores its token,
/// returns success within the grace period, and the success is recorded (with the request
/// kept in the history).
#[tokio::test]
async fn a_success_after_a_cancel_request_is_recorded_as_success() {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "stubborn", json!(1)))
        .await
        .unwrap()
        .id;
    let stopped: Arc<Mutex<Option<StopReason>>> = Arc::default();
    let mut r = Registry::default();
    let s = stopped.clone();
    r.register_fn("stubborn", move |_a, ctx| {
        let s = s.clone();
        async move {
            ctx.cancel.cancelled().await;
            *s.lock().unwrap() = ctx.stop_reason();
            Ok(()) // done anyway
        }
    });
    let mut c = config("q", 1);
    c.cancel_grace = Duration::from_secs(5);
    let w = start(&db, r, c).await;
    eventually(Duration::from_secs(20), "running", || async {
        db.store.get(id).await.unwrap().state == JobState::Running
    })
    .await;
    db.store.cancel(id).await.unwrap();
    eventually(Duration::from_secs(20), "finished", || async {
        db.store.get(id).await.unwrap().state.is_terminal()
    })
    .await;
    w.stop().await;
    assert_eq!(*stopped.lock().unwrap(), Some(StopReason::Cancelled));
    let rec = db.store.get(id).await.unwrap();
    assert_eq!(rec.state, JobState::Succeeded);
    assert_eq!(rec.errors.last().unwrap().class, "cancel_requested");
}

/// A handler asking to retry or snooze in a thousand years is clamped to ten years (one bad
/// value must not fail the batch it is written with).
#[tokio::test]
async fn absurd_delays_are_clamped_to_ten_years() {
    let db = TestDb::new().await;
    let retry = db
        .store
        .enqueue(&NewJob::new("q", "far", json!("retry")))
        .await
        .unwrap()
        .id;
    let snooze = db
        .store
        .enqueue(&NewJob::new("q", "far", json!("snooze")))
        .await
        .unwrap()
        .id;
    let mut r = Registry::default();
    r.register_fn("far", |a, _c| async move {
        let forever = Duration::from_secs(1000 * 365 * 24 * 3600);
        Err(if a == json!("retry") {
            JobError::retry_in("later", forever)
        } else {
            JobError::snooze(forever)
        })
    });
    let w = start(&db, r, config("q", 2)).await;
    eventually(Duration::from_secs(20), "both rescheduled", || async {
        count_state(&db, "pending").await == 2
            && db
                .scalar(
                    "SELECT count(*) FROM {schema}.jobs WHERE run_at > now() + interval '1 year'",
                )
                .await
                == 2
    })
    .await;
    w.stop().await;
    for id in [retry, snooze] {
        let days: f64 = sqlx::query_scalar(&format!(
            "SELECT extract(epoch FROM run_at - now())::float8 / 86400 FROM {}.jobs WHERE id = $1",
            db.schema
        ))
        .bind(id.0)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert!((3649.0..=3651.0).contains(&days), "{id}: {days} days");
    }
}

/// With LISTEN off the poll alone picks work up: no LISTEN connection exists, and a job
/// enqueued while the worker waits is claimed within a few poll intervals.
#[tokio::test]
async fn the_poll_alone_picks_up_work_when_listen_is_off() {
    let db = TestDb::new().await;
    let mut c = config("q", 1);
    c.listen = false;
    c.poll_interval = Duration::from_millis(300);
    let w = start(&db, noop(), c).await;
    // Let the worker settle into its idle poll (its first claim found nothing).
    eventually(Duration::from_secs(20), "the worker polled", || async {
        w.worker
            .metrics()
            .claims
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    })
    .await;
    let listeners = db
        .scalar(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}' AND query LIKE 'LISTEN%'",
            db.schema
        ))
        .await;
    assert_eq!(listeners, 0, "no LISTEN connection");
    let id = db
        .store
        .enqueue(&NewJob::new("q", "noop", json!(1)))
        .await
        .unwrap()
        .id;
    eventually(Duration::from_secs(20), "picked up by the poll", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;
    let r = w.stop().await;
    assert_eq!(r.metrics.listen_connects, 0);
    assert_eq!(r.metrics.notifications, 0);
}
