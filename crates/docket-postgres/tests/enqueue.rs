//! Enqueue: single, bulk, transactional, unique keys, the SQL function, validation.

use std::time::Duration;

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::json;

async fn count(db: &TestDb) -> i64 {
    db.scalar("SELECT count(*) FROM {schema}.jobs").await
}

#[tokio::test]
async fn single_enqueue_stores_every_option() {
    let db = TestDb::new().await;
    let at = chrono::Utc::now() + chrono::Duration::hours(1);
    let e = db
        .store
        .enqueue(
            &NewJob::new("mail", "send_welcome", json!({"user": 42}))
                .priority(-5)
                .run_at(at)
                .max_attempts(3)
                .unique_key("welcome:42")
                .metadata(json!({"trace": "abc"}))
                .backoff(Backoff {
                    base: Duration::from_secs(1),
                    cap: Duration::from_secs(60),
                }),
        )
        .await
        .unwrap();
    assert!(!e.duplicate);
    let j = db.store.get(e.id).await.unwrap();
    assert_eq!(j.queue, "mail");
    assert_eq!(j.kind, "send_welcome");
    assert_eq!(j.args, json!({"user": 42}));
    assert_eq!(j.priority, -5);
    assert_eq!(j.max_attempts, 3);
    assert_eq!(j.attempt, 0);
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(j.unique_key.as_deref(), Some("welcome:42"));
    assert_eq!(j.metadata, json!({"trace": "abc"}));
    assert!((j.run_at - at).num_milliseconds().abs() < 2);
    assert!(j.errors.is_empty());
    let (base, cap) = (
        db.scalar("SELECT backoff_base_ms FROM {schema}.jobs").await,
        db.scalar("SELECT backoff_cap_ms FROM {schema}.jobs").await,
    );
    assert_eq!((base, cap), (1000, 60_000));
}

#[tokio::test]
async fn delay_is_counted_from_database_now() {
    let db = TestDb::new().await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!(null)).delay(Duration::from_secs(90)))
        .await
        .unwrap();
    let secs = db
        .scalar("SELECT round(extract(epoch FROM run_at - now()))::bigint FROM {schema}.jobs")
        .await;
    assert!((88..=90).contains(&secs), "{secs}");
}

#[tokio::test]
async fn bulk_enqueue_of_ten_thousand_keeps_input_order() {
    let db = TestDb::new().await;
    let jobs: Vec<NewJob> = (0..10_000)
        .map(|i| NewJob::new("bulk", "n", json!({ "i": i })))
        .collect();
    let res = db.store.enqueue_many(&jobs).await.unwrap();
    assert_eq!(res.len(), 10_000);
    assert!(res.iter().all(|e| !e.duplicate));
    assert_eq!(count(&db).await, 10_000);
    // Result i is the job made from input i.
    for i in [0usize, 1, 4_999, 9_999] {
        let j = db.store.get(res[i].id).await.unwrap();
        assert_eq!(j.args, json!({ "i": i }));
    }
}

#[tokio::test]
async fn transactional_enqueue_exists_iff_the_transaction_commits() {
    let db = TestDb::new().await;
    let mut tx = db.pool.begin().await.unwrap();
    db.store
        .enqueue_tx(&mut tx, &NewJob::new("q", "k", json!(1)))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(count(&db).await, 0);

    let mut tx = db.pool.begin().await.unwrap();
    let e = db
        .store
        .enqueue_tx(&mut tx, &NewJob::new("q", "k", json!(2)))
        .await
        .unwrap();
    // Not visible to others before commit.
    assert_eq!(count(&db).await, 0);
    tx.commit().await.unwrap();
    assert_eq!(count(&db).await, 1);
    assert_eq!(db.store.get(e.id).await.unwrap().args, json!(2));
}

#[tokio::test]
async fn unique_key_returns_the_existing_job_until_it_finishes() {
    let db = TestDb::new().await;
    let job = NewJob::new("q", "k", json!(1)).unique_key("only-one");
    let a = db.store.enqueue(&job).await.unwrap();
    let b = db.store.enqueue(&job).await.unwrap();
    assert!(!a.duplicate);
    assert!(b.duplicate);
    assert_eq!(a.id, b.id);
    // Once the holder is terminal, the key is free again.
    db.exec("UPDATE {schema}.jobs SET state = 'succeeded', finished_at = now()")
        .await;
    let c = db.store.enqueue(&job).await.unwrap();
    assert!(!c.duplicate);
    assert_ne!(c.id, a.id);
}

#[tokio::test]
async fn unique_key_under_concurrent_enqueues_yields_exactly_one_job() {
    let db = TestDb::with_pool_size(20).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = db.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .enqueue(&NewJob::new("q", "k", json!(i)).unique_key("contended"))
                .await
                .unwrap()
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    assert_eq!(count(&db).await, 1);
    assert_eq!(results.iter().filter(|e| !e.duplicate).count(), 1);
    let id = results[0].id;
    assert!(results.iter().all(|e| e.id == id));
}

#[tokio::test]
async fn unique_key_races_between_open_transactions() {
    let db = TestDb::new().await;
    let job = NewJob::new("q", "k", json!(1)).unique_key("tx-race");
    let mut t1 = db.pool.begin().await.unwrap();
    let a = db.store.enqueue_tx(&mut t1, &job).await.unwrap();
    // A second transaction blocks on the unique index until the first decides.
    let store = db.store.clone();
    let pool = db.pool.clone();
    let job2 = job.clone();
    let second = tokio::spawn(async move {
        let mut t2 = pool.begin().await.unwrap();
        let b = store.enqueue_tx(&mut t2, &job2).await.unwrap();
        t2.commit().await.unwrap();
        b
    });
    db.wait_for_lock_waiters(1).await;
    t1.commit().await.unwrap();
    let b = second.await.unwrap();
    assert!(b.duplicate);
    assert_eq!(a.id, b.id);

    // And when the first rolls back, the second inserts.
    let job = NewJob::new("q", "k", json!(1)).unique_key("tx-race-2");
    let mut t1 = db.pool.begin().await.unwrap();
    db.store.enqueue_tx(&mut t1, &job).await.unwrap();
    let store = db.store.clone();
    let second = tokio::spawn(async move { store.enqueue(&job).await.unwrap() });
    db.wait_for_lock_waiters(1).await;
    t1.rollback().await.unwrap();
    let b = second.await.unwrap();
    assert!(!b.duplicate);
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE unique_key = 'tx-race-2'")
            .await,
        1
    );
}

#[tokio::test]
async fn unique_keys_in_bulk_including_repeats_within_the_batch() {
    let db = TestDb::new().await;
    let held = db
        .store
        .enqueue(&NewJob::new("q", "k", json!(0)).unique_key("held"))
        .await
        .unwrap();
    let jobs = vec![
        NewJob::new("q", "k", json!(1)).unique_key("a"),
        NewJob::new("q", "k", json!(2)).unique_key("a"),
        NewJob::new("q", "k", json!(3)),
        NewJob::new("q", "k", json!(4)).unique_key("held"),
        NewJob::new("q", "k", json!(5)).unique_key("b"),
    ];
    let r = db.store.enqueue_many(&jobs).await.unwrap();
    assert_eq!(
        r.iter().map(|e| e.duplicate).collect::<Vec<_>>(),
        vec![false, true, false, true, false]
    );
    assert_eq!(r[0].id, r[1].id);
    assert_eq!(r[3].id, held.id);
    assert_eq!(count(&db).await, 4);
}

#[tokio::test]
async fn sql_function_enqueues_with_the_same_validation() {
    let db = TestDb::new().await;
    let id = db
        .scalar("SELECT id FROM {schema}.enqueue('mail', 'send', '{\"to\": \"a@b\"}')")
        .await;
    let j = db.store.get(JobId(id)).await.unwrap();
    assert_eq!(j.kind, "send");
    let dup: bool = sqlx::query_scalar(&format!(
        "SELECT duplicate FROM {}.enqueue('q', 'k', '1', p_unique_key => 'u')",
        db.schema
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(!dup);
    for bad in [
        "SELECT * FROM {schema}.enqueue('bad queue', 'k')",
        "SELECT * FROM {schema}.enqueue('q', 'k''; DROP TABLE x; --')",
        "SELECT * FROM {schema}.enqueue('q', 'k', '{}', p_max_attempts => 0)",
        "SELECT * FROM {schema}.enqueue('q', 'k', '{}', p_priority => 500::smallint)",
        "SELECT * FROM {schema}.enqueue('q', 'k', '{}', p_metadata => '[1]')",
        "SELECT * FROM {schema}.enqueue('q', 'k', jsonb_build_object('s', repeat('x', 300000)))",
    ] {
        let err = sqlx::query(&bad.replace("{schema}", &db.schema))
            .execute(&db.pool)
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("docket: invalid job"), "{bad}: {msg}");
    }
    assert_eq!(count(&db).await, 2);
}

#[tokio::test]
async fn invalid_input_is_rejected_before_any_write() {
    let db = TestDb::new().await;
    let cases = vec![
        NewJob::new("", "k", json!(1)),
        NewJob::new("q\"; DROP TABLE jobs; --", "k", json!(1)),
        NewJob::new("q", "k k", json!(1)),
        NewJob::new("q", "k", json!({"s": "x".repeat(300 * 1024)})),
        NewJob::new("q", "k", json!({"nul": "a\u{0}b"})),
        NewJob::new("q", "k", json!(1)).max_attempts(0),
        NewJob::new("q", "k", json!(1)).max_attempts(1_000_000),
        NewJob::new("q", "k", json!(1)).priority(i16::MAX),
        NewJob::new("q", "k", json!(1)).metadata(json!("not an object")),
        NewJob::new("q", "k", json!(1)).unique_key(""),
        NewJob::new("q", "k", json!(1)).delay(Duration::from_secs(u64::MAX / 4)),
    ];
    for job in &cases {
        let err = db.store.enqueue(job).await.unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{job:?}: {err}");
    }
    // One bad job poisons the whole batch: nothing is written.
    let mut batch: Vec<NewJob> = (0..100).map(|i| NewJob::new("q", "k", json!(i))).collect();
    batch.push(NewJob::new("q", "bad kind", json!(1)));
    let err = db.store.enqueue_many(&batch).await.unwrap_err();
    assert!(err.to_string().contains("#100"), "{err}");
    assert_eq!(count(&db).await, 0);
}

#[tokio::test]
async fn enqueue_notifies_once_per_queue_after_commit() {
    let db = TestDb::new().await;
    let mut listener = sqlx::postgres::PgListener::connect(&db.url).await.unwrap();
    listener.listen(&db.store.wakeup_channel()).await.unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    let jobs: Vec<NewJob> = (0..50)
        .map(|i| NewJob::new(if i % 2 == 0 { "a" } else { "b" }, "k", json!(i)))
        .collect();
    db.store.enqueue_many_tx(&mut tx, &jobs).await.unwrap();
    db.store
        .enqueue_tx(&mut tx, &NewJob::new("a", "k", json!(1)))
        .await
        .unwrap();
    // Scheduled jobs wake nobody.
    db.store
        .enqueue_tx(
            &mut tx,
            &NewJob::new("later", "k", json!(1)).delay(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    // Nothing is delivered before commit.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), listener.recv())
            .await
            .is_err()
    );
    tx.commit().await.unwrap();
    let mut got = Vec::new();
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(500), listener.recv()).await {
        got.push(n.payload().to_string());
    }
    got.sort();
    assert_eq!(got, vec!["a", "b"]);
}

/// Large batches without unique keys go through COPY: every field must come out exactly as
/// the function path stores it — awkward text included — and schedules must use the
/// transaction's clock like the function does.
#[tokio::test]
async fn copy_path_stores_exactly_what_the_function_path_stores() {
    let db = TestDb::new().await;
    let awkward = json!({"s": "tab\there, newline\nthere, back\\slash, quote\", \\N, ünïcödé ✓"});
    let make = |i: usize, queue: &str| {
        let mut j = NewJob::new(queue, "k:awk/ward", json!({"i": i, "a": awkward.clone()}))
            .priority((i % 201) as i16 - 100)
            .max_attempts(1 + (i % 7) as i32)
            .metadata(json!({"trace": format!("t\\{i}\t")}));
        match i % 4 {
            0 => {}
            1 => j = j.delay(Duration::from_secs(90)),
            2 => j = j.run_at(chrono::Utc::now() + chrono::Duration::hours(2)),
            _ => {
                j = j
                    .backoff(Backoff {
                        base: Duration::from_millis(5),
                        cap: Duration::from_secs(9),
                    })
                    .ordering_key(format!("o\t{}", i % 3))
                    .concurrency_key("tenant\\1")
            }
        }
        j
    };
    // 1,200 jobs take the COPY path; one at a time takes the function path.
    let copied: Vec<NewJob> = (0..1200).map(|i| make(i, "copy")).collect();
    let ids = db.store.enqueue_many(&copied).await.unwrap();
    assert_eq!(ids.len(), 1200);
    assert!(
        ids.windows(2).all(|w| w[0].id.0 < w[1].id.0),
        "ids in input order"
    );
    for i in [0usize, 1, 2, 3, 1199] {
        db.store.enqueue(&make(i, "func")).await.unwrap();
    }
    let cols = "kind, args, priority, max_attempts, metadata, backoff_base_ms, backoff_cap_ms, \
                ordering_key, concurrency_key, state, attempt, blocked, \
                round(extract(epoch FROM run_at - created_at))::int AS delay_s";
    for i in [0usize, 1, 2, 3, 1199] {
        let q = |queue: &str| {
            format!(
                "SELECT to_jsonb(t) - 'delay_s' || jsonb_build_object('d', CASE WHEN delay_s > 3600 THEN 'abs' ELSE delay_s::text END) \
                 FROM (SELECT {cols} FROM {}.jobs WHERE queue = '{queue}' AND (args->>'i')::int = {i}) t",
                db.schema
            )
        };
        let a: serde_json::Value = sqlx::query_scalar(&q("copy"))
            .fetch_one(db.store.pool())
            .await
            .unwrap();
        let b: serde_json::Value = sqlx::query_scalar(&q("func"))
            .fetch_one(db.store.pool())
            .await
            .unwrap();
        assert_eq!(a, b, "job {i}: COPY and the function stored different rows");
    }
    // A bad job anywhere in a large batch: named, and nothing written.
    let before = count(&db).await;
    let mut bad: Vec<NewJob> = (0..1500).map(|i| make(i, "copy")).collect();
    bad[1400].queue = "no spaces allowed".into();
    let e = db.store.enqueue_many(&bad).await.unwrap_err();
    assert!(e.to_string().contains("#1400"), "{e}");
    assert_eq!(count(&db).await, before);
    // Inside the caller's transaction: exists iff it commits.
    let mut tx = db.store.pool().begin().await.unwrap();
    db.store
        .enqueue_many_tx(
            &mut tx,
            &(0..1000).map(|i| make(i, "tx")).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(count(&db).await, before, "rolled back with its transaction");
}

#[tokio::test]
async fn enqueue_stream_takes_any_number_of_jobs_all_or_nothing() {
    let db = TestDb::new().await;
    let n = docket_postgres::store::BULK_CHUNK * 2 + 7;
    let jobs = (0..n).map(|i| NewJob::new("s", "k", json!({ "i": i })));
    let out = db.store.enqueue_iter(jobs).await.unwrap();
    assert_eq!(out.inserted, n as u64);
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs").await,
        n as i64
    );
    // The last job is invalid: the chunks already sent are rolled back with it.
    let jobs = (0..n).map(|i| {
        let j = NewJob::new("t", "k", json!({ "i": i }));
        if i == n - 1 {
            j.priority(500)
        } else {
            j
        }
    });
    let e = db.store.enqueue_iter(jobs).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    assert_eq!(
        db.scalar("SELECT count(*) FROM {schema}.jobs WHERE queue = 't'")
            .await,
        0
    );
}
