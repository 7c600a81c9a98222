//! Hostile values at the storage layer: the payload size measured one way on every path
//! (client, SQL function, COPY, direct INSERT) and raised by no session setting; direct
//! writes that would break an invariant refused by the table; and a bad row that got in
//! anyway (from before the checks) shown and failed, never fatal.

use docket_core::*;
use docket_testkit::TestDb;
use serde_json::{json, Value};

fn parse(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[tokio::test]
async fn the_client_measures_payloads_exactly_as_postgres_stores_them() {
    let db = TestDb::new().await;
    for text in [
        r#"{"a":1}"#,
        "[1,2,3]",
        r#"{"s":"é\"\\\n\t\u0001/\u2028"}"#,
        r#""\u00e9""#,
        "1e3",
        "1.5e-3",
        "-0",
        "-0.0",
        "0.000e5",
        "12e-1",
        "1.50",
        "-1e-2",
        "100E+2",
        "12345678901234567890.123456789",
        "0.00012",
        r#"{"nested":{"deep":[{"x":null,"y":true,"z":false}]},"b":[]}"#,
        "{}",
        "[]",
        r#""""#,
        r#"{"dup":1,"dup":22}"#,
    ] {
        let v = parse(text);
        let ours = validate::jsonb_text_len(&v);
        let theirs: i32 = sqlx::query_scalar("SELECT octet_length($1::jsonb::text)")
            .bind(text)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(ours, theirs as usize, "{text}");
    }
}

/// Args whose stored text is exactly `n` bytes: `{"s": "xxx…"}` is 9 bytes plus the string.
fn args_of(n: usize) -> Value {
    let v = json!({ "s": "x".repeat(n - 9) });
    assert_eq!(validate::jsonb_text_len(&v), n);
    v
}

#[tokio::test]
async fn the_size_limit_is_one_limit_on_every_path_and_no_setting_raises_it() {
    let db = TestDb::new().await;
    const LIMIT: usize = 262_144;
    let (fits, over) = (args_of(LIMIT), args_of(LIMIT + 1));

    // Library, single and bulk (1,000 jobs take the COPY path).
    db.store
        .enqueue(&NewJob::new("q", "k", fits.clone()))
        .await
        .expect("at the limit");
    let e = db
        .store
        .enqueue(&NewJob::new("q", "k", over.clone()))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    let mut bulk: Vec<NewJob> = (0..999)
        .map(|i| NewJob::new("q", "k", json!({ "i": i })))
        .collect();
    bulk.push(NewJob::new("q", "k", over.clone()));
    let e = db.store.enqueue_many(&bulk).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e}");

    // The SQL function, with a session setting that used to raise the limit.
    let mut c = db.pool.acquire().await.unwrap();
    sqlx::query("SET docket.max_args_bytes = '100000000'")
        .execute(&mut *c)
        .await
        .unwrap();
    let call = format!("SELECT id FROM {}.enqueue('q', 'k', $1::jsonb)", db.schema);
    sqlx::query(&call)
        .bind(&fits)
        .execute(&mut *c)
        .await
        .expect("function at the limit");
    let e = sqlx::query(&call)
        .bind(&over)
        .execute(&mut *c)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("over the limit of 262144"), "{e}");
    drop(c);

    // Direct INSERT, bypassing every function: the table refuses too.
    let insert = format!(
        "INSERT INTO {}.jobs (queue, kind, args) VALUES ('q', 'k', $1)",
        db.schema
    );
    sqlx::query(&insert)
        .bind(&fits)
        .execute(&db.pool)
        .await
        .expect("insert at the limit");
    let e = sqlx::query(&insert)
        .bind(&over)
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert_eq!(
        docket_postgres::errors::sqlstate(&e).as_deref(),
        Some("23514"),
        "{e}"
    );
    let mapped = docket_postgres::errors::db_err(e);
    assert!(
        mapped.to_string().contains("args is over the limit"),
        "{mapped}"
    );
    // …and the message never carries the row (the server's DETAIL prints it).
    assert!(!mapped.to_string().contains("xxxxxxxx"));
}

#[tokio::test]
async fn direct_writes_that_break_an_invariant_are_refused_by_the_table() {
    let db = TestDb::new().await;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({})))
        .await
        .unwrap()
        .id;
    let s = &db.schema;
    for (what, sql) in [
        ("priority", format!("INSERT INTO {s}.jobs (queue, kind, args, priority) VALUES ('q','k','{{}}', 500)")),
        ("run_at infinity", format!("INSERT INTO {s}.jobs (queue, kind, args, run_at) VALUES ('q','k','{{}}','infinity')")),
        ("run_at -infinity", format!("INSERT INTO {s}.jobs (queue, kind, args, run_at) VALUES ('q','k','{{}}','-infinity')")),
        ("run_at year 200", format!("INSERT INTO {s}.jobs (queue, kind, args, run_at) VALUES ('q','k','{{}}','0200-01-01')")),
        ("run_at year 20000", format!("INSERT INTO {s}.jobs (queue, kind, args, run_at) VALUES ('q','k','{{}}','20000-01-01')")),
        ("created_at", format!("INSERT INTO {s}.jobs (queue, kind, args, created_at) VALUES ('q','k','{{}}','infinity')")),
        ("attempts", format!("INSERT INTO {s}.jobs (queue, kind, args, state, attempt, max_attempts, finished_at) VALUES ('q','k','{{}}','dead', 9, 3, now())")),
        ("backoff", format!("INSERT INTO {s}.jobs (queue, kind, args, backoff_base_ms) VALUES ('q','k','{{}}', 0)")),
        ("metadata", format!("INSERT INTO {s}.jobs (queue, kind, args, metadata) VALUES ('q','k','{{}}', jsonb_build_object('m', repeat('x', 20000)))")),
        ("update run_at", format!("UPDATE {s}.jobs SET run_at = 'infinity' WHERE id = {id}")),
        ("update lease", format!("UPDATE {s}.jobs SET state = 'running', attempt = 1, lease_owner = 'x', lease_expires_at = 'infinity' WHERE id = {id}")),
    ] {
        let e = sqlx::query(&sql).execute(&db.pool).await.expect_err(what);
        assert_eq!(
            docket_postgres::errors::sqlstate(&e).as_deref(),
            Some("23514"),
            "{what}: {e}"
        );
    }
    // A huge number is refused too (numeric cannot hold it): no 100 kB of digits per row.
    let e = sqlx::query(&format!(
        "INSERT INTO {s}.jobs (queue, kind, args) VALUES ('q','k', $1::jsonb)"
    ))
    .bind(r#"{"n": 1e1000000}"#)
    .execute(&db.pool)
    .await
    .unwrap_err();
    assert!(matches!(
        docket_postgres::errors::db_err(e),
        StoreError::Invalid(_)
    ));
    let e = db
        .store
        .enqueue(&NewJob::new("q", "k", parse(r#"{"n": 1e300000}"#)))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    // The library refuses an out-of-range run_at before any write.
    let far = chrono::NaiveDate::from_ymd_opt(10000, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let e = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({})).run_at(far))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e}");
}

#[tokio::test]
async fn a_bad_row_that_got_in_anyway_is_shown_and_failed_never_fatal() {
    let db = TestDb::new().await;
    // As if written before migration 0008's checks existed.
    db.exec("ALTER TABLE {schema}.jobs DROP CONSTRAINT jobs_times_finite, DROP CONSTRAINT jobs_times_in_range").await;
    let bad = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({"bad": true})))
        .await
        .unwrap()
        .id;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET run_at = '-infinity' WHERE id = {bad}"
    ))
    .await;
    let worse = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({"worse": true})))
        .await
        .unwrap()
        .id;
    db.exec(&format!(
        "UPDATE {{schema}}.jobs SET created_at = 'infinity' WHERE id = {worse}"
    ))
    .await;
    let good = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({"good": true})))
        .await
        .unwrap()
        .id;

    // Operators see the rows, with what is wrong with them.
    let listed = db.store.list(&JobFilter::default()).await.expect("list");
    assert_eq!(listed.len(), 3);
    let b = db.store.get(bad).await.expect("show");
    assert_eq!(b.invalid, vec!["run_at is -infinity".to_string()]);
    assert!(db.store.get(worse).await.unwrap().invalid[0].contains("created_at is infinity"));
    let stats = db.store.stats().await.expect("stats");
    assert_eq!(stats.queues[0].pending, 3);

    // A worker's claim returns the good job and fails the bad ones at once (dead, with the
    // reason), so nothing stalls and nothing comes back.
    let claimed = db
        .store
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 10,
            owner: "w".into(),
            lease: std::time::Duration::from_secs(30),
            starvation: None,
            controlled: None,
        })
        .await
        .expect("claim");
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![good]);
    for id in [bad, worse] {
        let r = db.store.get(id).await.unwrap();
        assert_eq!(r.state, JobState::Dead, "{id}");
        assert!(
            r.errors
                .last()
                .unwrap()
                .message
                .contains("cannot be decoded"),
            "{:?}",
            r.errors
        );
    }
}

mod generated {
    //! Random JSON documents (nested, with escapes, unicode, big and exponent numbers):
    //! the client's size is the server's, and validation never panics.
    use proptest::prelude::*;
    use serde_json::Value;

    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            (any::<u32>(), 0u32..1_000_000, -40i32..40)
                .prop_map(|(i, f, e)| format!("{i}.{f}e{e}")),
            (1u64..u64::MAX, 1u64..u64::MAX).prop_map(|(a, b)| format!("{a}{b}.{b}{a}")),
            Just("-0".to_string()),
            Just("0.000".to_string()),
        ]
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number().prop_map(|n| serde_json::from_str(&n).unwrap()),
            "[^\u{0}]{0,12}".prop_map(Value::String),
            "[\u{1}-\u{1f}\"\\\\/é€😀\u{2028}]{0,6}".prop_map(Value::String),
        ]
    }

    fn doc() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\u{e9}\"]{0,5}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn random_documents_measure_the_same_on_both_sides() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let db = rt.block_on(docket_testkit::TestDb::new());
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 300,
            ..ProptestConfig::default()
        });
        runner
            .run(&doc(), |v| {
                let _ = docket_core::validate::new_job(
                    &docket_core::NewJob::new("q", "k", v.clone()),
                    &docket_core::validate::Limits::default(),
                );
                let text = serde_json::to_string(&v).unwrap();
                let theirs: i32 = rt
                    .block_on(
                        sqlx::query_scalar("SELECT octet_length($1::jsonb::text)")
                            .bind(&text)
                            .fetch_one(&db.pool),
                    )
                    .unwrap();
                prop_assert_eq!(
                    docket_core::validate::jsonb_text_len(&v),
                    theirs as usize,
                    "{}",
                    text
                );
                Ok(())
            })
            .unwrap();
    }
}

/// Migration 0012 moved the input rules from CHECKs into a trigger that fires on INSERT and
/// on an UPDATE naming an input column. Each rule must still refuse a direct write of any
/// role — an INSERT, and an UPDATE of an existing job — with SQLSTATE 23514 and the rule's
/// name (errors.rs maps names to messages), and a row that keeps every rule must pass.
#[tokio::test]
async fn every_input_rule_refuses_a_direct_insert_and_update_by_name() {
    let db = TestDb::new().await;
    let s = &db.schema;
    let id = db
        .store
        .enqueue(&NewJob::new("q", "k", json!({})))
        .await
        .unwrap()
        .id;
    let big = |n: usize| format!("jsonb_build_object('x', repeat('x', {n}))");
    for (rule, column, value) in [
        ("jobs_queue_length", "queue", "''".to_string()),
        (
            "jobs_queue_length",
            "queue",
            format!("'{}'", "q".repeat(65)),
        ),
        ("jobs_kind_length", "kind", format!("'{}'", "k".repeat(129))),
        ("jobs_max_attempts_positive", "max_attempts", "0".into()),
        ("jobs_priority_range", "priority", "101".into()),
        ("jobs_priority_range", "priority", "-101".into()),
        ("jobs_args_size", "args", big(262_144)),
        ("jobs_metadata_object", "metadata", "'[]'".into()),
        ("jobs_metadata_size", "metadata", big(16_384)),
        ("jobs_errors_array", "errors", "'{}'".into()),
        (
            "jobs_errors_size",
            "errors",
            format!("jsonb_build_array({})", big(262_144)),
        ),
        ("jobs_unique_key_length", "unique_key", "''".into()),
        (
            "jobs_ordering_key_length",
            "ordering_key",
            format!("'{}'", "o".repeat(513)),
        ),
        (
            "jobs_concurrency_key_length",
            "concurrency_key",
            "''".into(),
        ),
        ("jobs_backoff_range", "backoff_base_ms", "0".into()),
        ("jobs_backoff_range", "backoff_cap_ms", "2592000001".into()),
        // 31 bytes in, 131 KB stored (migration 0016), in args and in metadata.
        ("jobs_number_length", "args", "'{\"x\":1e131000}'".into()),
        (
            "jobs_number_length",
            "args",
            "'[1, {\"y\": [-0.5e2000]}]'".into(),
        ),
        ("jobs_number_length", "metadata", "'{\"x\":1e1100}'".into()),
    ] {
        // The three required columns, with the one under test in its place.
        let cols = ["queue", "kind", "args"];
        let mut values = ["'q'".to_string(), "'k'".to_string(), "'{}'".to_string()];
        let insert = match cols.iter().position(|c| *c == column) {
            Some(i) => {
                values[i] = value.clone();
                format!(
                    "INSERT INTO {s}.jobs (queue, kind, args) VALUES ({})",
                    values.join(", ")
                )
            }
            None => format!(
                "INSERT INTO {s}.jobs (queue, kind, args, {column}) VALUES ({}, {value})",
                values.join(", ")
            ),
        };
        let update = format!("UPDATE {s}.jobs SET {column} = {value} WHERE id = {id}");
        for sql in [insert, update] {
            let e = sqlx::query(&sql).execute(&db.pool).await.expect_err(&sql);
            let d = e.as_database_error().expect("a database error");
            assert_eq!(d.code().as_deref(), Some("23514"), "{rule}: {e}");
            // max_attempts 0 on a pending job breaks jobs_pending_has_budget (a CHECK,
            // judged before any trigger) as well; either name refuses it.
            let also = (rule == "jobs_max_attempts_positive").then_some("jobs_pending_has_budget");
            assert!(
                d.constraint().is_some_and(|c| c == rule || Some(c) == also),
                "{rule}: {e}"
            );
            assert!(!e.to_string().contains("xxxxxxxx"), "no job data: {e}");
        }
    }
    // The SQL enqueue functions (what the application role may call) are bound by the same
    // rule, with the client's words; a long number in a string and a long number of 1,024
    // characters pass.
    let e = sqlx::query(&format!(
        "SELECT {s}.enqueue('q', 'k', '{{\"x\":1e131000}}'::jsonb)"
    ))
    .execute(&db.pool)
    .await
    .expect_err("a 131 KB number");
    let e = docket_postgres::errors::db_err(e).to_string();
    assert!(e.contains("more than 1024 characters"), "{e}");
    let n1024 = format!("1{}", "0".repeat(1023));
    sqlx::query(&format!(
        "SELECT {s}.enqueue('q', 'k', jsonb_build_object('n', {n1024}::numeric, 's', '1e131000', 'pad', repeat('x', 2000)))"
    ))
    .execute(&db.pool)
    .await
    .expect("a number of 1,024 characters and a string are fine");
    // The one rule a pending job cannot break alone (the budget CHECKs come first): a
    // finished job's max_attempts.
    let e = sqlx::query(&format!(
        "INSERT INTO {s}.jobs (queue, kind, args, state, finished_at, max_attempts) VALUES ('q', 'k', '{{}}', 'dead', now(), 0)"
    ))
    .execute(&db.pool)
    .await
    .unwrap_err();
    assert_eq!(
        e.as_database_error().and_then(|d| d.constraint()),
        Some("jobs_max_attempts_positive"),
        "{e}"
    );
    // The job itself is untouched, and values at the limits pass.
    assert_eq!(
        db.scalar(&format!("SELECT count(*) FROM {s}.jobs WHERE id = {id} AND queue = 'q' AND max_attempts = 25 AND errors = '[]'"))
            .await,
        1
    );
    db.exec(&format!(
        "UPDATE {s}.jobs SET queue = '{}', priority = -100, backoff_base_ms = 1, backoff_cap_ms = 2592000000,
                unique_key = 'u', metadata = {} - 'x' || jsonb_build_object('y', 1) WHERE id = {id}",
        "q".repeat(64),
        big(1)
    ))
    .await;
}

/// A claim and a completion name no input column, so a job whose input broke a rule before
/// the rule existed (migration 0008's NOT VALID checks judged old rows on every later UPDATE,
/// so such a row failed every claim batch it was picked into) runs and finishes like any
/// other.
#[tokio::test]
async fn a_job_with_input_from_before_the_rules_is_claimed_and_completed() {
    let db = TestDb::new().await;
    let s = &db.schema;
    // As if written before the rules existed.
    db.exec("ALTER TABLE {schema}.jobs DISABLE TRIGGER jobs_input_rules")
        .await;
    db.exec("INSERT INTO {schema}.jobs (queue, kind, args, metadata) SELECT q, 'k', '{}', jsonb_build_object('m', repeat('x', 20000)) FROM unnest(ARRAY['old', 'old2']) AS q")
        .await;
    db.exec("ALTER TABLE {schema}.jobs ENABLE TRIGGER jobs_input_rules")
        .await;
    let got = db
        .store
        .claim(&ClaimRequest {
            queue: "old".into(),
            limit: 10,
            owner: "w".into(),
            lease: std::time::Duration::from_secs(60),
            starvation: None,
            controlled: None,
        })
        .await
        .expect("the claim is not judged by input rules");
    assert_eq!(got.len(), 1);
    let out = db
        .store
        .complete_many("w", &[got[0].lease()])
        .await
        .unwrap();
    assert_eq!(out.applied.len(), 1);
    assert_eq!(
        db.scalar(&format!(
            "SELECT coalesce(sum(n), 0)::bigint FROM {s}.jobs_succeeded"
        ))
        .await,
        1
    );
    // Writing such input again is judged: the old metadata cannot be written back (on a
    // second old row: the completed one moved to the kept history, migration 0035).
    let e = sqlx::query(&format!("UPDATE {s}.jobs SET metadata = metadata"))
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert_eq!(
        e.as_database_error().and_then(|d| d.constraint()),
        Some("jobs_metadata_size")
    );
}

/// `record_steps()` called directly with a malformed batch (arrays of different lengths, a
/// NULL element) is refused with SQLSTATE 22023 before it writes: `unnest()` would pad the
/// short arrays with NULLs and record part of the batch.
#[tokio::test]
async fn a_malformed_step_batch_is_refused_and_writes_nothing() {
    let db = TestDb::new().await;
    db.store
        .enqueue(&NewJob::new("q", "k", json!({})))
        .await
        .unwrap();
    let claimed = db
        .store
        .claim(&ClaimRequest {
            queue: "q".into(),
            limit: 1,
            owner: "w".into(),
            lease: std::time::Duration::from_secs(600),
            starvation: None,
            controlled: None,
        })
        .await
        .unwrap();
    let (id, attempt) = (claimed[0].id.0, claimed[0].attempt);
    let s = &db.schema;
    let call = format!("SELECT count(*) FROM {s}.record_steps($1, $2, $3, $4, $5)");
    let one = || Some(json!(1));
    for (what, names, outputs) in [
        (
            "two names for one id",
            vec![Some("a"), Some("b")],
            vec![one(), one()],
        ),
        ("no output", vec![Some("a")], vec![]),
        ("a NULL name", vec![None], vec![one()]),
        ("a NULL output", vec![Some("a")], vec![None]),
    ] {
        let e = sqlx::query(&call)
            .bind(vec![id])
            .bind(vec![attempt])
            .bind(names)
            .bind(outputs)
            .bind("w")
            .execute(&db.pool)
            .await
            .expect_err(what);
        assert_eq!(
            docket_postgres::errors::sqlstate(&e).as_deref(),
            Some("22023"),
            "{what}: {e}"
        );
        assert!(e.to_string().contains("record_steps"), "{what}: {e}");
    }
    assert_eq!(
        db.scalar(&format!("SELECT count(*) FROM {s}.job_steps"))
            .await,
        0,
        "a refused batch wrote a step"
    );
    // The same call well formed records its step.
    let n: i64 = sqlx::query_scalar(&call)
        .bind(vec![id])
        .bind(vec![attempt])
        .bind(vec!["a"])
        .bind(vec![json!(1)])
        .bind("w")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 1);
}

/// `enqueue_workflow(jsonb)` called from SQL with no library in front: every malformed or
/// hostile graph is refused with `invalid_parameter_value` (or the jobs' own input rules),
/// names what is wrong, and writes nothing — no workflow row, no job, no edge.
#[tokio::test]
async fn the_workflow_function_refuses_hostile_graphs_from_sql_writing_nothing() {
    let db = TestDb::new().await;
    let s = &db.schema;
    let node = |extra: &str| format!(r#"{{"name":"a","kind":"k"{extra}}}"#);
    let cases: Vec<(String, &str)> = vec![
        ("null".into(), "JSON object"),
        ("[]".into(), "JSON object"),
        (r#"{"name":"x"}"#.into(), "at least one node"),
        (r#"{"name":"x","nodes":{}}"#.into(), "at least one node"),
        (format!(r#"{{"name":"x","nodes":[{}],"extra":1}}"#, node("")), "unknown field"),
        (format!(r#"{{"name":7,"nodes":[{}]}}"#, node("")), "workflow name"),
        (format!(r#"{{"name":"a\u0007b","nodes":[{}]}}"#, node("")), "workflow name"),
        (r#"{"name":"x","nodes":[7]}"#.into(), "not a JSON object"),
        (r#"{"name":"x","nodes":[{"name":"","kind":"k"}]}"#.into(), "node name"),
        (r#"{"name":"x","nodes":[{"name":["a"],"kind":"k"}]}"#.into(), "node name"),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","queue":"a b""#)), "queue"),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","queue":7"#)), "queue"),
        (r#"{"name":"x","nodes":[{"name":"a","kind":"k;drop table jobs"}]}"#.into(), "kind"),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","priority":1e400"#)), "integer"),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","priority":"1""#)), "integer"),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","max_attempts":0"#)), "max_attempts"),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","metadata":[]"#)), "metadata"),
        (
            format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","metadata":{"docket:workflow":1}"#)),
            "metadata",
        ),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","after":"a""#)), "after must be an array"),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","after":[7]"#)), "each entry of after"),
        (
            format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","after":[{"node":"a","x":1}]"#)),
            "each entry of after",
        ),
        (
            r#"{"name":"x","nodes":[{"name":"p","kind":"k"},{"name":"a","kind":"k","after":[{"node":"p","on_failure":"explode"}]}]}"#.into(),
            "unknown on_failure",
        ),
        (format!(r#"{{"name":"x","nodes":[{}]}}"#, node(r#","after":["a"]"#)), "depends on itself"),
        (format!(r#"{{"name":"x","nodes":[{},{}]}}"#, node(""), node("")), "defined twice"),
        (
            r#"{"name":"x","nodes":[{"name":"a","kind":"k","after":["c"]},{"name":"b","kind":"k","after":["a"]},{"name":"c","kind":"k","after":["b"]},{"name":"d","kind":"k","after":["c"]}]}"#.into(),
            "a cycle through node",
        ),
        (
            format!(r#"{{"name":"x","nodes":[{}]}}"#, node(&format!(r#","args":"{}""#, "x".repeat(300_000)))),
            "",
        ),
    ];
    for (graph, says) in &cases {
        let r = sqlx::query(&format!("SELECT * FROM {s}.enqueue_workflow($1::jsonb)"))
            .bind(graph)
            .fetch_all(&db.pool)
            .await;
        match r {
            Err(sqlx::Error::Database(e)) => {
                let code = e.code().map(|c| c.to_string()).unwrap_or_default();
                assert!(
                    ["22023", "23514"].contains(&code.as_str()),
                    "{graph:.80}: SQLSTATE {code}: {}",
                    e.message()
                );
                assert!(e.message().contains(says), "{graph:.80}: {}", e.message());
            }
            other => panic!("{graph:.80} was not refused: {other:?}"),
        }
    }
    let (workflows, jobs, edges): (i64, i64, i64) = sqlx::query_as(&format!(
        "SELECT (SELECT count(*) FROM {s}.workflows), (SELECT count(*) FROM {s}.jobs),
                (SELECT count(*) FROM {s}.job_deps)"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((workflows, jobs, edges), (0, 0, 0), "nothing was written");
}

/// `batch_open()` and `batch_add()` called from SQL with hostile input — bad names,
/// callbacks that are not objects or name unknown occasions, members and callbacks with
/// bad fields, Docket's own metadata keys, an oversized callback (judged at open by the
/// table's own rules, not when the last member ends), a closed batch, a graph's id — are
/// refused with a clear error, writing nothing.
#[tokio::test]
async fn the_batch_functions_refuse_hostile_input_from_sql_writing_nothing() {
    let db = TestDb::new().await;
    let s = &db.schema;
    let ok = r#"{"kind":"k"}"#;
    let big = format!(r#"{{"kind":"k","args":"{}"}}"#, "x".repeat(300_000));
    let cases: Vec<(String, String, String, &str)> = vec![
        ("".into(), "{}".into(), "[]".into(), "batch name"),
        ("a\u{7}b".into(), "{}".into(), "[]".into(), "batch name"),
        (
            "b".into(),
            "[]".into(),
            "[]".into(),
            "callbacks must be a JSON object",
        ),
        (
            "b".into(),
            format!(r#"{{"on_death":{ok}}}"#),
            "[]".into(),
            "unknown callback",
        ),
        (
            "b".into(),
            r#"{"on_success":7}"#.into(),
            "[]".into(),
            "on_success: a job is a JSON object",
        ),
        (
            "b".into(),
            r#"{"on_success":{"kind":"a b"}}"#.into(),
            "[]".into(),
            "invalid kind",
        ),
        (
            "b".into(),
            format!(r#"{{"on_failure":{big}}}"#),
            "[]".into(),
            "on_failure",
        ),
        ("b".into(), "{}".into(), "{}".into(), "must be a JSON array"),
        (
            "b".into(),
            "{}".into(),
            r#"[{"kind":"k","after":["x"]}]"#.into(),
            "unknown field",
        ),
        (
            "b".into(),
            "{}".into(),
            r#"[{"kind":"k","queue":"a b"}]"#.into(),
            "queue",
        ),
        (
            "b".into(),
            "{}".into(),
            r#"[{"kind":"k","priority":"1"}]"#.into(),
            "integer",
        ),
        (
            "b".into(),
            "{}".into(),
            r#"[{"kind":"k","max_attempts":0}]"#.into(),
            "max_attempts",
        ),
        (
            "b".into(),
            "{}".into(),
            r#"[{"kind":"k","metadata":{"docket:batch":{}}}]"#.into(),
            "metadata",
        ),
        (
            "b".into(),
            "{}".into(),
            format!("[{ok},{big}]"),
            "jobs_args_size",
        ),
    ];
    for (name, callbacks, jobs, says) in &cases {
        let r = sqlx::query(&format!(
            "SELECT * FROM {s}.batch_open($1, $2::jsonb, $3::jsonb, true)"
        ))
        .bind(name)
        .bind(callbacks)
        .bind(jobs)
        .fetch_all(&db.pool)
        .await;
        match r {
            Err(sqlx::Error::Database(e)) => {
                let code = e.code().map(|c| c.to_string()).unwrap_or_default();
                assert!(
                    ["22023", "23514"].contains(&code.as_str()),
                    "{callbacks:.80} {jobs:.80}: SQLSTATE {code}: {}",
                    e.message()
                );
                assert!(
                    e.message().contains(says),
                    "{callbacks:.80} {jobs:.80}: {}",
                    e.message()
                );
            }
            other => panic!("{callbacks:.80} {jobs:.80} was not refused: {other:?}"),
        }
    }
    let count = || async {
        sqlx::query_as::<_, (i64, i64)>(&format!(
            "SELECT (SELECT count(*) FROM {s}.workflows), (SELECT count(*) FROM {s}.jobs)"
        ))
        .fetch_one(&db.pool)
        .await
        .unwrap()
    };
    assert_eq!(count().await, (0, 0), "nothing was written");
    // A closed batch and a graph take no members.
    let (closed,): (i64,) = sqlx::query_as(&format!(
        "SELECT batch_id FROM {s}.batch_open('b', '{{}}', '[]', true)"
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let (graph,): (i64,) = sqlx::query_as(&format!(
        r#"SELECT workflow_id FROM {s}.enqueue_workflow('{{"name":"g","nodes":[{{"name":"a","kind":"k"}}]}}')"#
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    for (id, code) in [(closed, "55000"), (graph, "42809"), (999_999, "P0002")] {
        let r = sqlx::query(&format!("SELECT {s}.batch_add($1, $2::jsonb)"))
            .bind(id)
            .bind(format!("[{ok}]"))
            .execute(&db.pool)
            .await;
        match r {
            Err(sqlx::Error::Database(e)) => {
                assert_eq!(e.code().as_deref(), Some(code), "{}", e.message())
            }
            other => panic!("batch_add({id}) was not refused: {other:?}"),
        }
    }
    assert_eq!(
        count().await,
        (2, 1),
        "only the batch, the graph and its node"
    );
}
