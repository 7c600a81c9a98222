//! Trust boundaries: a role that can only connect sends forged NOTIFYs and cancels nothing;
//! the least-privilege roles from `grant` can do exactly their share (the application role
//! enqueues through the validating definer function and cannot read, change or insert jobs;
//! the operator reads; the worker runs jobs).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use docket_core::*;
use docket_postgres::roles::Roles;
use docket_postgres::PgStore;
use docket_testkit::{fresh_schema, host_port, TestDb};
use docket_worker::{JobContext, Registry, Shutdown, Worker};
use serde_json::json;
use sqlx::PgPool;

/// A login role with no privileges, on the test server; dropped at the end.
async fn login_role(db: &TestDb, name: &str, member_of: Option<&str>) -> PgPool {
    db.exec(&format!("CREATE ROLE {name} LOGIN")).await;
    if let Some(g) = member_of {
        db.exec(&format!("GRANT {g} TO {name}")).await;
    }
    let (host, port) = host_port(&db.url);
    let o: sqlx::postgres::PgConnectOptions = db.url.parse().unwrap();
    docket_testkit::pool(
        &format!(
            "postgres://{name}@{host}:{port}/{}",
            o.get_database().unwrap_or("postgres")
        ),
        name,
        2,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_cancel_notification_cancels_nothing() {
    let db = TestDb::new().await;
    let started = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let mut r = Registry::default();
    {
        let (started, release) = (started.clone(), release.clone());
        r.register_fn("hold", move |_, ctx: JobContext| {
            let (started, release) = (started.clone(), release.clone());
            async move {
                started.notify_one();
                tokio::select! {
                    _ = release.notified() => Ok(()),
                    _ = ctx.cancel.cancelled() => Err(docket_worker::JobError::cancel("stopped")),
                }
            }
        });
    }
    let w = start(&db, r, config("q", 2)).await;
    let m = w.worker.metrics();
    eventually(Duration::from_secs(20), "listening", || {
        let m = m.clone();
        async move { m.snapshot().listen_connects >= 1 }
    })
    .await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "hold", json!({})))
        .await
        .unwrap()
        .id;
    started.notified().await;

    // A role that may do nothing but connect sends the cancel notification, many times.
    let role = format!("r{}", fresh_schema());
    let nobody = login_role(&db, &role, None).await;
    let denied = sqlx::query(&format!("SELECT args FROM {}.jobs", db.schema))
        .execute(&nobody)
        .await;
    assert!(denied.is_err(), "the forger cannot even read the jobs");
    for _ in 0..20 {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(format!("{}_cancel", db.schema))
            .bind(id.to_string())
            .execute(&nobody)
            .await
            .unwrap();
    }
    eventually(Duration::from_secs(20), "notifications delivered", || {
        let m = m.clone();
        async move { m.snapshot().notifications >= 20 }
    })
    .await;
    // Delivered and looked into (an early heartbeat), but the database recorded no cancel:
    // the job runs on and then succeeds.
    let beat = w.worker.heartbeat_once().await;
    assert_eq!(beat.cancelled, 0);
    assert_eq!(db.store.get(id).await.unwrap().state, JobState::Running);
    release.notify_one();
    eventually(Duration::from_secs(20), "succeeded", || async {
        db.store.get(id).await.unwrap().state == JobState::Succeeded
    })
    .await;

    // An authorised cancel still works, and leaves an audit entry naming the role.
    let id2 = db
        .store
        .enqueue(&NewJob::new("q", "hold", json!({})))
        .await
        .unwrap()
        .id;
    started.notified().await;
    assert_eq!(
        db.store.cancel(id2).await.unwrap(),
        CancelOutcome::Requested
    );
    eventually(Duration::from_secs(20), "cancelled", || async {
        db.store.get(id2).await.unwrap().state == JobState::Cancelled
    })
    .await;
    let history = db.store.get(id2).await.unwrap().errors;
    assert!(
        history
            .iter()
            .any(|e| e.class == "cancel_requested" && e.message.contains("by role")),
        "{history:?}"
    );
    w.stop().await;
    nobody.close().await;
    let _ = sqlx::raw_sql(&format!("DROP ROLE {role}"))
        .execute(&db.pool)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_can_do_its_share_and_nothing_more() {
    let db = TestDb::new().await;
    let suffix = fresh_schema();
    let roles = Roles {
        app: format!("a{suffix}"),
        worker: format!("w{suffix}"),
        operator: format!("o{suffix}"),
    };
    db.store.grant(&roles).await.expect("grant");
    db.store.grant(&roles).await.expect("grant is idempotent");
    let s = &db.schema;
    let existing = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({"secret": "someone else's"})))
        .await
        .unwrap()
        .id;

    // Application: enqueue through the function, validated; nothing else.
    let app = login_role(&db, &format!("au{suffix}"), Some(&roles.app)).await;
    let id: i64 = sqlx::query_scalar(&format!(
        "SELECT id FROM {s}.enqueue('q', 'k', '{{\"a\": 1}}')"
    ))
    .fetch_one(&app)
    .await
    .expect("the application enqueues");
    assert!(id > existing.0);
    for (what, sql) in [
        ("read args", format!("SELECT args FROM {s}.jobs")),
        (
            "change state",
            format!(
                "UPDATE {s}.jobs SET state = 'succeeded' WHERE id = {}",
                existing.0
            ),
        ),
        (
            "insert directly",
            format!("INSERT INTO {s}.jobs (queue, kind, args) VALUES ('q','k','{{}}')"),
        ),
        ("delete", format!("DELETE FROM {s}.jobs")),
        (
            "claim",
            format!("SELECT * FROM {s}.claim('q', 10, 'me', 30000, NULL)"),
        ),
        (
            "enqueue_many unvalidated path",
            format!("SELECT * FROM {s}.enqueue_many(ARRAY['q'], ARRAY['k'], ARRAY['{{}}'::jsonb])"),
        ),
    ] {
        let e = sqlx::query(&sql).execute(&app).await.expect_err(what);
        assert_eq!(
            docket_postgres::errors::sqlstate(&e).as_deref(),
            Some("42501"),
            "{what}: {e}"
        );
    }
    // Its input is validated by the definer function, and no setting raises a limit.
    let mut c = app.acquire().await.unwrap();
    sqlx::query("SET docket.max_args_bytes = '100000000'")
        .execute(&mut *c)
        .await
        .unwrap();
    for (what, sql) in [
        (
            "bad queue",
            format!("SELECT * FROM {s}.enqueue('bad queue', 'k')"),
        ),
        (
            "priority",
            format!("SELECT * FROM {s}.enqueue('q', 'k', '{{}}', 500::smallint)"),
        ),
        (
            "run_at",
            format!("SELECT * FROM {s}.enqueue('q', 'k', '{{}}', 0::smallint, 'infinity')"),
        ),
        (
            "size",
            format!(
                "SELECT * FROM {s}.enqueue('q', 'k', jsonb_build_object('s', repeat('x', 300000)))"
            ),
        ),
        (
            "attempts",
            format!("SELECT * FROM {s}.enqueue('q', 'k', '{{}}', 0::smallint, NULL, 5000)"),
        ),
    ] {
        let e = sqlx::query(&sql).execute(&mut *c).await.expect_err(what);
        assert_eq!(
            docket_postgres::errors::sqlstate(&e).as_deref(),
            Some("22023"),
            "{what}: {e}"
        );
    }
    // A temp table named like Docket's cannot capture the definer function's insert.
    sqlx::query("CREATE TEMP TABLE jobs (LIKE pg_class)")
        .execute(&mut *c)
        .await
        .ok();
    sqlx::query(&format!(
        "SELECT * FROM {s}.enqueue('q', 'k', '{{\"after\": 1}}')"
    ))
    .execute(&mut *c)
    .await
    .unwrap();
    drop(c);
    assert_eq!(db.scalar("SELECT count(*) FROM {schema}.jobs").await, 3);

    // Operator: reads everything, writes nothing.
    let op = login_role(&db, &format!("ou{suffix}"), Some(&roles.operator)).await;
    let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {s}.jobs"))
        .fetch_one(&op)
        .await
        .unwrap();
    assert_eq!(n, 3);
    let op_store = PgStore::with_schema(op.clone(), s).unwrap();
    op_store.stats().await.expect("stats");
    op_store.list(&JobFilter::default()).await.expect("list");
    let e = op_store.cancel(existing).await.expect_err("no writes");
    assert!(e.to_string().contains("permission denied"), "{e}");

    // Worker: runs the jobs.
    let wk = login_role(&db, &format!("wu{suffix}"), Some(&roles.worker)).await;
    let mut r = Registry::default();
    r.register_fn("k", |_, _| async { Ok(()) });
    let w = Worker::new(
        PgStore::with_schema(wk.clone(), s).unwrap(),
        r,
        config("q", 4),
    )
    .unwrap();
    let report = w.drain(Shutdown::default()).await.unwrap();
    assert_eq!(report.metrics.completed, 3);

    for p in [app, op, wk] {
        p.close().await;
    }
    // Housekeeping on the shared server, best effort: a closed connection's backend may take a
    // moment to go, and a leftover role harms no other test.
    for r in ["au", "ou", "wu"] {
        let _ = sqlx::raw_sql(&format!("DROP OWNED BY {r}{suffix}; DROP ROLE {r}{suffix}"))
            .execute(&db.pool)
            .await;
    }
    let _ = sqlx::raw_sql(&format!(
        "DROP OWNED BY {a}, {w}, {o}; DROP ROLE {a}, {w}, {o}",
        a = roles.app,
        w = roles.worker,
        o = roles.operator
    ))
    .execute(&db.pool)
    .await;
}

/// A role that can only connect takes the advisory locks that claims, limits and key
/// hand-overs use (their keys are computable and pg_advisory_lock is PUBLIC): no claim waits
/// for them (it hands out nothing while the queue's lock is held), shutdown never waits
/// behind a claim, a completion whose key lock is held still commits (the key sweeper hands
/// the key on), and an operator's pause fails with a clear error instead of hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_any_connection_can_hold_stop_no_claim_and_no_completion() {
    let db = TestDb::new().await;
    let role = format!("r{}", fresh_schema());
    let nobody = login_role(&db, &role, None).await;
    let mut holder = nobody.acquire().await.unwrap();
    let space = |what: &str| format!("hashtext('{}/{what}')", db.schema);
    // The queue's control lock, held for the connection's life.
    sqlx::query(&format!(
        "SELECT pg_advisory_lock({}, hashtext('q'))",
        space("queue")
    ))
    .execute(&mut *holder)
    .await
    .unwrap();
    let id = db
        .store
        .enqueue(&NewJob::new("q", "keyed", json!({})).concurrency_key("k1"))
        .await
        .unwrap()
        .id;
    // A claim returns at once with nothing.
    let t = std::time::Instant::now();
    let got = tokio::time::timeout(
        Duration::from_secs(5),
        db.store.claim(&ClaimRequest {
            queue: "q".into(),
            limit: 10,
            owner: "w".into(),
            lease: Duration::from_secs(30),
            starvation: None,
            controlled: None,
        }),
    )
    .await
    .expect("a claim waited for a lock another connection holds")
    .unwrap();
    assert!(got.is_empty());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // An operator's pause says who is in the way instead of hanging.
    let paused = tokio::time::timeout(Duration::from_secs(20), db.store.pause_queue("q"))
        .await
        .expect("pause hung");
    let e = paused
        .expect_err("pause must not go through a held lock")
        .to_string();
    assert!(e.contains("control lock is held"), "{e}");
    // A worker starts, claims nothing, and stops at once on request.
    let mut r = Registry::default();
    r.register_fn("keyed", |_, _| async { Ok(()) });
    let w = start(&db, r, config("q", 2)).await;
    // Its first claims: each gives up on the queue's lock (nothing is claimed).
    let m = w.worker.metrics();
    eventually(Duration::from_secs(20), "two claims tried", || {
        let m = m.clone();
        async move { m.snapshot().claims >= 2 }
    })
    .await;
    assert_eq!(count_state(&db, "succeeded").await, 0);
    let t = std::time::Instant::now();
    let report = w.stop().await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        t.elapsed()
    );
    assert_eq!(report.metrics.claimed, 0);
    // The queue lock goes; the keyed job starts; then the connection takes the key's lock: the
    // completion, whose key hand-over cannot take it, commits all the same.
    sqlx::query(&format!(
        "SELECT pg_advisory_unlock({}, hashtext('q'))",
        space("queue")
    ))
    .execute(&mut *holder)
    .await
    .unwrap();
    let (started, finish) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let mut r = Registry::default();
    {
        let (started, finish) = (started.clone(), finish.clone());
        r.register_fn("keyed", move |_, _| {
            let (started, finish) = (started.clone(), finish.clone());
            async move {
                started.notify_one();
                finish.notified().await;
                Ok(())
            }
        });
    }
    let w = start(&db, r, config("q", 2)).await;
    started.notified().await;
    sqlx::query(&format!(
        "SELECT pg_advisory_lock({}, hashtext('c:k1'))",
        space("key")
    ))
    .execute(&mut *holder)
    .await
    .unwrap();
    finish.notify_one();
    eventually(
        Duration::from_secs(20),
        "the keyed job succeeded",
        || async { db.store.get(id).await.unwrap().state == JobState::Succeeded },
    )
    .await;
    w.stop().await;
    drop(holder);
}
