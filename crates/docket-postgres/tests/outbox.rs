//! The outbox's SQL API called directly with hostile input: `publish()` refuses every value
//! the library refuses, with a clear error and nothing written; the relay's functions clamp
//! what they are given; a published message moves to the history table (migration 0034).

use docket_testkit::TestDb;

/// subject, payload, key, headers, what the refusal says.
type Case<'a> = (&'a str, String, Option<&'a str>, Option<&'a str>, &'a str);

#[tokio::test]
async fn publish_refuses_hostile_input_from_sql_writing_nothing() {
    let db = TestDb::new().await;
    let s = &db.schema;
    let big = format!(r#""{}""#, "x".repeat(1_000_001));
    let cases: Vec<Case> = vec![
        ("", "{}".into(), None, None, "subject must be 1-255 bytes"),
        ("a.*", "{}".into(), None, None, "without wildcards"),
        ("a.>", "{}".into(), None, None, "without wildcards"),
        ("a..b", "{}".into(), None, None, "single dots"),
        (".a", "{}".into(), None, None, "single dots"),
        ("a b", "{}".into(), None, None, "printable ASCII"),
        ("a\u{7}", "{}".into(), None, None, "printable ASCII"),
        ("ok", big, None, None, "over the limit of 1000000 bytes"),
        ("ok", "{}".into(), Some(""), None, "key must be"),
        ("ok", "{}".into(), Some("a\nb"), None, "key must be"),
        (
            "ok",
            "{}".into(),
            None,
            Some("[]"),
            "JSON object of strings",
        ),
        (
            "ok",
            "{}".into(),
            None,
            Some(r#"{"Nats-Msg-Id": "x"}"#),
            "reserved",
        ),
        (
            "ok",
            "{}".into(),
            None,
            Some(r#"{"nats-expected-stream": "x"}"#),
            "reserved",
        ),
        (
            "ok",
            "{}".into(),
            None,
            Some(r#"{"a b": "x"}"#),
            "token characters",
        ),
        (
            "ok",
            "{}".into(),
            None,
            Some(r#"{"X": "a\r\nInjected: 1"}"#),
            "line breaks",
        ),
        (
            "ok",
            "{}".into(),
            None,
            Some(r#"{"X": 7}"#),
            "must be a string",
        ),
    ];
    for (subject, payload, key, headers, says) in &cases {
        let r = sqlx::query(&format!("SELECT {s}.publish($1, $2::jsonb, $3, $4::jsonb)"))
            .bind(subject)
            .bind(payload)
            .bind(key)
            .bind(headers)
            .execute(&db.pool)
            .await;
        match r {
            Err(sqlx::Error::Database(e)) => {
                assert_eq!(
                    e.code().as_deref(),
                    Some("22023"),
                    "{subject:?}: {}",
                    e.message()
                );
                assert!(
                    e.message().contains(says),
                    "{subject:?} {headers:?}: {}",
                    e.message()
                );
            }
            other => panic!("{subject:?} {key:?} {headers:?} was not refused: {other:?}"),
        }
    }
    let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {s}.outbox"))
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "nothing was written");
    // Through the store: the refusal is a validation error naming the message.
    let e = docket_core::Store::publish(
        &db.store,
        &docket_core::outbox::NewMessage::new("a..b", &serde_json::json!({})).unwrap(),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("outbox message"), "{e}");
    // The relay's functions clamp a hostile limit instead of reading the whole table.
    for i in 0..3 {
        sqlx::query(&format!("SELECT {s}.publish('a.b', $1::jsonb)"))
            .bind(format!(r#"{{"i": {i}}}"#))
            .execute(&db.pool)
            .await
            .unwrap();
    }
    let claimed: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.outbox_claim('r', -5, 1000)"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(claimed, 1, "a limit below 1 claims one");
    let marked: i64 = sqlx::query_scalar(&format!(
        "SELECT {s}.outbox_mark(ARRAY[1, 2]::bigint[], ARRAY[1]::int[], ARRAY[1, 2]::bigint[], ARRAY[false, false])"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        marked, 1,
        "arrays of unequal length mark only what matches: {marked}"
    );
}

/// A relay's mark moves a message to `outbox_sent` with its stream sequence; the payload goes
/// with it when it is stored inline (at most 1,800 bytes), a larger one stays only in the
/// stream — listed as `None` — so the mark never copies an out-of-line value.
#[tokio::test]
async fn a_published_message_moves_to_the_history_with_its_payload_when_small() {
    use docket_core::outbox::{NewMessage, OutboxState, Published};
    use docket_core::Store;
    let db = TestDb::new().await;
    let s = &db.store;
    // 40 kB of digits from a linear congruential sequence: not compressible below 1,800 bytes.
    let mut x: u64 = 7;
    let big: String = (0..40_000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'0' + ((x >> 33) % 10) as u8)
        })
        .collect();
    let small = NewMessage::new("orders.small", &serde_json::json!({"n": 1})).unwrap();
    let large = NewMessage::new("orders.large", &serde_json::json!({ "blob": big })).unwrap();
    let small_id = s.publish(&small).await.unwrap();
    let large_id = s.publish(&large).await.unwrap();
    let claimed = s
        .outbox_claim("r", 10, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let done: Vec<Published> = claimed
        .iter()
        .map(|m| Published {
            id: m.id,
            attempt: m.attempt,
            stream_seq: m.id as u64 + 100,
            duplicate: false,
        })
        .collect();
    assert_eq!(s.outbox_mark(&done).await.unwrap(), 2);
    let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {}.outbox", db.schema))
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "a published message leaves the hot table");
    let mut rows = s.outbox_list(OutboxState::Published, 10).await.unwrap();
    rows.sort_by_key(|r| r.id);
    assert_eq!(
        rows.iter()
            .map(|r| (r.id, r.stream_seq))
            .collect::<Vec<_>>(),
        vec![
            (small_id, Some(small_id + 100)),
            (large_id, Some(large_id + 100))
        ]
    );
    assert_eq!(rows[0].payload.as_deref(), Some(r#"{"n": 1}"#));
    assert_eq!(
        rows[1].payload, None,
        "a payload stored out of line is not copied"
    );
    assert!(rows.iter().all(|r| r.published_at.is_some()));
    assert_eq!(s.outbox_stats().await.unwrap().published, 2);
}

/// Migration 0034 moves what earlier relays marked published into `outbox_sent`, leaving the
/// unpublished messages where the claim finds them.
#[tokio::test]
async fn migration_0034_moves_published_messages_to_the_history() {
    use sqlx::Connection;
    let db = TestDb::new().await;
    let schema = docket_testkit::fresh_schema();
    let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA {schema}; SET search_path TO {schema}"
    ))
    .execute(&mut c)
    .await
    .unwrap();
    let run = |v: i64| {
        docket_postgres::migrate::MIGRATOR
            .iter()
            .find(|m| m.version == v)
            .unwrap()
            .sql
            .to_string()
    };
    for v in 1..=33 {
        sqlx::raw_sql(&run(v)).execute(&mut c).await.unwrap();
    }
    sqlx::raw_sql(
        "INSERT INTO outbox (subject, payload, key, attempt, published_at, stream_seq, duplicate)
         VALUES ('a.one', '{\"n\": 1}', 'k', 1, now() - interval '1 minute', 11, false),
                ('a.two', '{\"n\": 2}', 'k', 0, NULL, NULL, NULL),
                ('a.three', '{\"n\": 3}', NULL, 2, now(), 12, true)",
    )
    .execute(&mut c)
    .await
    .unwrap();
    sqlx::raw_sql(&run(34)).execute(&mut c).await.unwrap();
    let sent: Vec<(String, i64, bool, Option<String>)> = sqlx::query_as(
        "SELECT subject, stream_seq, duplicate, payload::text FROM outbox_sent ORDER BY published_at",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert_eq!(
        sent,
        vec![
            ("a.one".into(), 11, false, Some(r#"{"n": 1}"#.into())),
            ("a.three".into(), 12, true, Some(r#"{"n": 3}"#.into())),
        ]
    );
    let left: Vec<String> = sqlx::query_scalar("SELECT subject FROM outbox")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(left, vec!["a.two".to_string()]);
    sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut c)
        .await
        .unwrap();
}

/// Under a held vacuum horizon autoanalyze records an outbox of dead versions as empty
/// (`reltuples = 0`); planned on that, the mark's join walked `outbox_pkey` whole (125 ms for
/// a mark of 300 among 2,000 live messages and 100,000 dead ones). Migration 0037: the mark
/// probes the primary key for its ids whatever the statistics say. Counted, not timed: the
/// index entries the mark's transaction read (`pg_stat_get_xact_tuples_returned`).
#[tokio::test]
async fn a_mark_probes_the_primary_key_for_its_ids_on_statistics_that_say_empty() {
    let db = TestDb::new().await;
    let s = &db.schema;
    // Autovacuum (on a private test server) must not correct the statistics under the test.
    db.exec(&format!(
        "ALTER TABLE {s}.outbox SET (autovacuum_enabled = false)"
    ))
    .await;
    let publish = |n: i32| {
        format!("SELECT {s}.publish('t.a', jsonb_build_object('n', g), NULL, NULL) FROM generate_series(1, {n}) g")
    };
    db.exec(&publish(20_000)).await;
    // What a pinned horizon leaves: the moved messages' versions, dead but not removable.
    db.exec(&format!("DELETE FROM {s}.outbox")).await;
    db.exec(&format!("ANALYZE {s}.outbox")).await;
    let (tuples, pages): (f32, i32) = sqlx::query_as(&format!(
        "SELECT reltuples, relpages FROM pg_class WHERE oid = '{s}.outbox'::regclass"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(
        tuples == 0.0 && pages > 0,
        "the statistics say empty: {tuples} rows in {pages} pages"
    );
    let live = 5_000;
    db.exec(&publish(live)).await;
    let claimed: Vec<(i64, i32)> = sqlx::query_as(&format!(
        "SELECT id, attempt FROM {s}.outbox_claim('r1', 300, 60000)"
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(claimed.len(), 300);
    let ids: Vec<i64> = claimed.iter().map(|c| c.0).collect();
    let attempts: Vec<i32> = claimed.iter().map(|c| c.1).collect();
    let seqs: Vec<i64> = (1..=300).collect();
    let mut tx = db.pool.begin().await.unwrap();
    let marked: i64 = sqlx::query_scalar(&format!(
        "SELECT {s}.outbox_mark($1, $2, $3, array_fill(false, ARRAY[300]))"
    ))
    .bind(&ids)
    .bind(&attempts)
    .bind(&seqs)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    let read: i64 = sqlx::query_scalar(&format!(
        "SELECT pg_stat_get_xact_tuples_returned('{s}.outbox_pkey'::regclass)"
    ))
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(marked, 300);
    assert!(
        read <= 600,
        "the mark of 300 read {read} entries of outbox_pkey (of {live} live messages): it walked the index instead of probing it"
    );
}
