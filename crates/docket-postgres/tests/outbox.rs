//! The outbox's SQL API called directly with hostile input: `publish()` refuses every value
//! the library refuses, with a clear error and nothing written; the relay's functions clamp
//! what they are given.

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
